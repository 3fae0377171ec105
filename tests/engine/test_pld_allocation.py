"""The optimal rule in the planner: allocations fitted to the PLD accountant, never worse
than the RDP rule's, the error curve, target mode, and ``planner compose``.

Expected relations come from the design (an RDP-optimal split rescaled to the PLD budget:
PLD ≤ RDP makes every share grow) and from the accountant itself (the ledger's function).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from planner.cli import main
from planner.planning.allocation import (
    Family,
    Item,
    Target,
    allocate,
    applicable_rules,
    error_curve,
    plan_targets,
)
from planner.privacy.accountants import total_epsilon
from planner.privacy.budget import CompositionRule


def _workload(n: int, seed: int = 0) -> list[Item]:
    fams = [Family.LAPLACE, Family.DISCRETE_GAUSSIAN, Family.EXPONENTIAL, Family.MEAN_LAPLACE, Family.DISCRETE_LAPLACE, Family.GAUSSIAN]
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        fam = fams[i % len(fams)]
        out.append(Item(f"q{i}", fam, float(rng.uniform(1, 100)), weight=float(rng.uniform(0.5, 5)),
                        part_b=float(rng.uniform(1, 10)) if fam is Family.MEAN_LAPLACE else 0.0))
    return out


@pytest.mark.parametrize(("n", "eps", "delta"), [(12, 1.0, 1e-6), (30, 3.0, 1e-8)])
def test_pld_allocation_uses_the_budget_and_beats_rdp(n: int, eps: float, delta: float) -> None:
    items = _workload(n)
    pld = allocate(items, eps, delta, "pld")
    rdp = allocate(items, eps, delta, "rdp")
    spends = [s for _, s in pld.spends()]
    used = total_epsilon(spends, CompositionRule.PLD, delta)  # the ledger's number
    assert used == pld.used_epsilon
    assert used <= eps
    assert used >= eps * (1 - 1e-7)
    assert pld.objective <= rdp.objective * (1 + 1e-9)
    # every share grew (the RDP shape, scaled up by one common factor ≥ 1)
    for a, b in zip(pld.items, rdp.items, strict=True):
        assert a.theta >= b.theta * (1 - 1e-9)


def test_pld_allocation_of_laplace_counts_gains_over_rdp() -> None:
    items = [Item(f"c{i}", Family.LAPLACE, 2.0, weight=1.0 + i % 3) for i in range(40)]
    pld = allocate(items, 2.0, 1e-6, "pld")
    rdp = allocate(items, 2.0, 1e-6, "rdp")
    assert pld.objective < rdp.objective * 0.97  # ≥ 3 % less error for the same budget


def test_pld_is_an_applicable_rule_when_delta_is_positive() -> None:
    items = _workload(5)
    assert CompositionRule.PLD in applicable_rules(items, 1e-6)
    assert CompositionRule.PLD not in applicable_rules([Item("a", Family.LAPLACE, 2.0)], 0.0)


def test_pld_error_curve_is_below_rdp_and_decreasing() -> None:
    items = _workload(12)
    eps = np.geomspace(0.3, 5.0, 8)
    pld = error_curve(items, eps, 1e-6, "pld")
    rdp = error_curve(items, eps, 1e-6, "rdp")
    assert np.all(pld <= rdp * (1 + 1e-6))
    assert np.all(np.diff(pld) < 0)
    # a point of the curve is the objective of the PLD rule's allocation at that ε (up to
    # the interpolation between the curve's grid points)
    mid = allocate(items, float(eps[3]), 1e-6, "pld")
    assert pld[3] == pytest.approx(mid.objective, rel=0.02)


def test_pld_target_mode_costs_no_more_than_rdp() -> None:
    items = [Item(f"c{i}", Family.LAPLACE, 2.0) for i in range(20)]
    targets = {i.id: Target(bound=30.0, beta=0.05) for i in items}
    pld = plan_targets(items, targets, 1e-6, "pld")
    rdp = plan_targets(items, targets, 1e-6, "rdp")
    assert pld.total_epsilon < rdp.total_epsilon
    assert pld.total_epsilon == pytest.approx(
        total_epsilon([s for it in pld.items for s in it.spends], CompositionRule.PLD, 1e-6), rel=1e-12
    )


def test_cli_compose_reports_the_optimal_accountant_and_sampling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps({"delta": 1e-5, "mechanisms": [
        {"mechanism": "randomized_response", "epsilon": 0.05, "count": 10},
    ]}))
    assert main(["compose", "--spec", str(spec)]) == 0
    out = json.loads(capsys.readouterr().out)
    total = out["total"]
    assert set(total) == {"basic", "advanced", "rdp", "zcdp", "pld"}
    assert total["pld"]["method"] == "exact"
    assert total["pld"]["epsilon"] <= total["rdp"]["epsilon"] <= total["basic"]["epsilon"]
    spec.write_text(json.dumps({"delta": 0, "mechanisms": [{"mechanism": "randomized_response", "epsilon": 0.05, "count": 10}]}))
    assert main(["compose", "--spec", str(spec)]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["pld"]["epsilon"] == pytest.approx(0.5, abs=1e-12)
    spec.write_text(json.dumps({"delta": 1e-5, "mechanisms": [
        {"mechanism": "gaussian", "sigma": 1.1, "sampling_rate": 256 / 60000, "count": 3516},
    ]}))
    assert main(["compose", "--spec", str(spec)]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    assert total["pld"]["epsilon"] < total["rdp"]["epsilon"] < 1.3  # DP-SGD, 15 epochs (issue table: 1.13 / 1.28)
    assert math.isfinite(total["basic"]["epsilon"])
    spec.write_text(json.dumps({"delta": 1e-5, "mechanisms": [
        {"mechanism": "laplace", "epsilon": 1.0, "sampling_rate": 0.1},
        {"mechanism": "laplace", "epsilon": 1.0, "sampling_rate": 0.1, "sampling": "without_replacement"},
    ]}))
    assert main(["compose", "--spec", str(spec)]) == 2
    assert "neighbouring relation" in json.loads(capsys.readouterr().err)["error"]
    spec.write_text(json.dumps({"delta": 1e-5, "mechanisms": [{"mechanism": "laplace", "epsilon": 1.0, "sampling_rate": 0}]}))
    assert main(["compose", "--spec", str(spec)]) == 2
    assert "sampling_rate" in json.loads(capsys.readouterr().err)["error"]
