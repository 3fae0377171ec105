"""The training-budget planner (planner/planning/dpsgd.py) and ``planner dpsgd``.

Expected numbers: Google dp-accounting 0.6 (RDP and PLD accountants on the same DP-SGD
events) and Microsoft prv-accountant 0.2 (a rigorous lower bound), the issue's table
(N, batch, σ, epochs, δ = 1e-5); steps = ⌈epochs·N/B⌉ by hand. Inverse problems are
checked by their definition (feasible, and one notch further is not). Timings are never
asserted.
"""

from __future__ import annotations

import json
import math
import warnings

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant
from prv_accountant import PRVAccountant
from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

from planner.cli import main
from planner.core.errors import PlanError
from planner.planning.dpsgd import (
    TrainingRun,
    dpsgd_command,
    epsilon_curve,
    guidance,
    solve_epochs,
    solve_sigma,
    training_epsilon,
)
from planner.privacy.sampling import SamplingScheme

ISSUE_TABLE = [(60000, 256, 1.1, 60), (60000, 256, 1.1, 15), (60000, 256, 0.7, 45), (50000, 512, 1.0, 100)]


def _dpacc(n: int, batch: int, sigma: float, steps: int, delta: float) -> tuple[float, float]:
    ev = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(batch / n, dp_accounting.GaussianDpEvent(sigma)), steps
    )
    rdp = RdpAccountant()
    rdp.compose(ev)
    pld = PLDAccountant()
    pld.compose(ev)
    return float(rdp.get_epsilon(delta)), float(pld.get_epsilon(delta))


def test_training_run_counts_steps_and_rate() -> None:
    run = TrainingRun.from_batch(n=60000, batch=256, epochs=60, sigma=1.1, delta=1e-5)
    assert run.steps == math.ceil(60 * 60000 / 256)  # 14063 (a started epoch runs to its end)
    assert run.sampling_rate == 256 / 60000
    assert TrainingRun.from_batch(n=1000, sampling_rate=0.01, steps=7, sigma=1.0).steps == 7


@pytest.mark.parametrize(("n", "batch", "sigma", "epochs"), ISSUE_TABLE)
def test_training_epsilon_matches_the_reference_accountants(n: int, batch: int, sigma: float, epochs: int) -> None:
    run = TrainingRun.from_batch(n=n, batch=batch, epochs=epochs, sigma=sigma, delta=1e-5)
    got = training_epsilon(run, with_error=True)
    rdp_ref, pld_ref = _dpacc(n, batch, sigma, run.steps, 1e-5)
    assert got.epsilon["rdp"] <= rdp_ref * 1.001
    assert got.epsilon["rdp"] >= rdp_ref * 0.995
    assert got.epsilon["pld"] <= pld_ref * 1.001
    assert got.epsilon["pld"] < got.epsilon["rdp"]
    assert got.pld_error is not None and 0 <= got.pld_error < 1e-3 * got.epsilon["pld"]
    d = got.to_dict()
    assert set(d) == {"steps", "sampling_rate", "epsilon", "seconds"}
    assert set(d["epsilon"]) == {"rdp", "pld"}


def test_training_epsilon_never_below_prv_lower_bound() -> None:
    run = TrainingRun.from_batch(n=60000, batch=256, epochs=15, sigma=1.1, delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prv = PRVAccountant(
            prvs=[PoissonSubsampledGaussianMechanism(noise_multiplier=1.1, sampling_probability=run.sampling_rate)],
            max_self_compositions=[run.steps], eps_error=0.01, delta_error=1e-8,
        )
        low, _, _ = prv.compute_epsilon(delta=1e-5, num_self_compositions=[run.steps])
    assert training_epsilon(run).epsilon["pld"] >= low


def test_solve_sigma_finds_the_least_noise() -> None:
    run = TrainingRun.from_batch(n=60000, batch=256, epochs=60, sigma=1.0, delta=1e-5)
    sol = solve_sigma(run, 2.0)
    assert sol.privacy.epsilon["pld"] <= 2.0
    # 0.1 % less noise no longer meets the target (the search stops at 1e-4 in ln σ)
    less = training_epsilon(run.with_(sigma=sol.run.sigma * 0.999))
    assert less.epsilon["pld"] > 2.0
    rdp = solve_sigma(run, 2.0, "rdp")
    assert rdp.run.sigma > sol.run.sigma  # the optimal accountant needs less noise
    assert rdp.privacy.epsilon["rdp"] <= 2.0


def test_solve_epochs_finds_the_most_whole_epochs() -> None:
    run = TrainingRun.from_batch(n=60000, batch=256, epochs=1, sigma=1.1, delta=1e-5)
    sol = solve_epochs(run, 2.0)
    assert sol.privacy.epsilon["pld"] <= 2.0
    epochs = sol.to_dict()["epochs"]
    assert isinstance(epochs, int) and epochs >= 1
    one_more = TrainingRun.from_batch(n=60000, batch=256, epochs=epochs + 1, sigma=1.1, delta=1e-5)
    assert training_epsilon(one_more).epsilon["pld"] > 2.0
    assert sol.run.steps == math.ceil(epochs * 60000 / 256)


def test_epsilon_curve_grows_with_epochs_and_pld_stays_below_rdp() -> None:
    run = TrainingRun.from_batch(n=10000, batch=100, epochs=1, sigma=1.5, delta=1e-6)
    curve = epsilon_curve(run, [1, 2, 5, 10, 20])
    for rule in ("rdp", "pld"):
        assert all(a < b for a, b in zip(curve[rule], curve[rule][1:], strict=False))
    assert all(p < r for p, r in zip(curve["pld"], curve["rdp"], strict=True))


def test_guidance_speaks_of_delta_and_the_clipping_norm() -> None:
    text = " ".join(guidance(TrainingRun.from_batch(n=10000, batch=100, epochs=1, sigma=1.0, delta=1e-3)))
    assert "1/N" in text and "at least 1/N" in text
    assert "clipping norm" in text and "does not change ε" in text
    ok = " ".join(guidance(TrainingRun.from_batch(n=10000, batch=100, epochs=1, sigma=1.0, delta=1e-7)))
    assert "well below 1/N" in ok


def test_without_replacement_uses_the_substitution_sensitivity() -> None:
    # fixed-size batches under substitution: sensitivity 2C, so σ/2 relative to it — and a
    # larger ε than Poisson sampling at the same σ (Lebeda et al. 2024 warn of exactly this)
    kw = dict(n=60000, batch=256, epochs=5, sigma=1.1, delta=1e-5)
    poisson = training_epsilon(TrainingRun.from_batch(**kw))  # type: ignore[arg-type]
    wor = training_epsilon(TrainingRun.from_batch(**kw, scheme=SamplingScheme.WITHOUT_REPLACEMENT))  # type: ignore[arg-type]
    assert wor.epsilon["pld"] > poisson.epsilon["pld"]
    assert wor.epsilon["pld"] <= wor.epsilon["rdp"] * (1 + 1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(n=100, batch=200, epochs=1, sigma=1.0), "batch must be ≤ n"),
        (dict(n=100, batch=10, epochs=1, sigma=-1.0), "sigma"),
        (dict(n=100, batch=10, epochs=1, sigma=1.0, delta=0.0), "delta must be > 0"),
        (dict(n=100, epochs=1, sigma=1.0), "either batch"),
        (dict(n=100, batch=10, sigma=1.0), "either epochs"),
        (dict(n=0, batch=10, epochs=1, sigma=1.0), "n"),
    ],
)
def test_training_run_errors_name_the_field(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(PlanError, match=match):
        TrainingRun.from_batch(**kwargs)  # type: ignore[arg-type]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object], str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def test_cli_dpsgd_forward(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(["dpsgd", "--n", "60000", "--batch", "256", "--epochs", "60", "--sigma", "1.1", "--delta", "1e-5"], capsys)
    assert code == 0
    assert set(out) == {"steps", "sampling_rate", "epsilon", "seconds"}
    assert out["steps"] == 14063
    _, pld_ref = _dpacc(60000, 256, 1.1, 14063, 1e-5)
    assert out["epsilon"]["pld"] <= pld_ref * 1.001  # type: ignore[index]


def test_cli_dpsgd_solves(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(["dpsgd", "--n", "60000", "--batch", "256", "--epochs", "60", "--delta", "1e-5",
                         "--target-epsilon", "2", "--solve", "sigma"], capsys)
    assert code == 0 and out["solve"] == "sigma"
    assert out["epsilon"]["pld"] <= 2.0  # type: ignore[index]
    code, out, _ = _cli(["dpsgd", "--n", "60000", "--batch", "256", "--sigma", "1.1", "--delta", "1e-5",
                         "--target-epsilon", "2", "--solve", "epochs"], capsys)
    assert code == 0 and out["solve"] == "epochs" and out["epsilon"]["pld"] <= 2.0  # type: ignore[index]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--batch", "256", "--epochs", "60"], "--sigma is missing"),
        (["--batch", "256", "--epochs", "60", "--sigma", "1", "--solve", "sigma"], "go together"),
        (["--batch", "256.5", "--epochs", "60", "--sigma", "1"], "batch must be a whole number"),
        (["--batch", "256", "--sigma", "1"], "--epochs"),
    ],
)
def test_cli_dpsgd_errors_are_json_with_exit_2(args: list[str], match: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(["dpsgd", "--n", "60000", *args], capsys)
    assert code == 2
    assert match in json.loads(err)["error"]


def test_dpsgd_command_is_the_cli_engine_call() -> None:
    out = dpsgd_command(1000, batch=10, epochs=2, sigma=1.0, delta=1e-5)
    assert out["steps"] == 200 and out["sampling_rate"] == 0.01
