"""The command line: JSON in, JSON out, errors as JSON on stderr with exit status 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import main
from planner.privacy.accountants.basic import standalone_epsilon
from planner.privacy.budget import CompositionRule
from planner.privacy.events import GaussianEvent

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def test_cli_validate_reports_counts_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["validate", "--data", str(ROOT / "data/census.csv"), "--schema", str(ROOT / "data/census.schema.json")], capsys)
    assert code == 0
    assert out["rows"] == 50_000  # data/README.md: the census sample has 50,000 rows
    assert set(out["column_report"]["age"]) >= {"usable", "clipped", "invalid", "missing"}


def test_cli_plan_uses_the_whole_budget_and_compares_rules(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["plan", "--spec", str(ROOT / "examples/census_plan.json")], capsys)
    assert code == 0
    assert out["rule"] == "rdp"
    assert out["used_epsilon"] == pytest.approx(1.0, rel=1e-9)
    assert out["used_epsilon"] <= 1.0
    assert {q["id"] for q in out["queries"]} == {"people", "income_mean", "age_median", "region", "smokers"}
    for q in out["queries"]:
        assert q["rmse"] > 0 and q["error_bound_95"] > 0
    assert set(out["comparison"]) == {r.value for r in CompositionRule}  # every rule, the optimal one included


def test_cli_compose_matches_hand_calculation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps({"delta": 1e-6, "mechanisms": [{"mechanism": "laplace", "epsilon": 0.1, "count": 100}]}))
    code, out, _ = _run(["compose", "--spec", str(spec)], capsys)
    assert code == 0
    # basic: 100 × 0.1 = 10 (docs/mathematics.md §5)
    assert out["total"]["basic"]["epsilon"] == pytest.approx(10.0, rel=1e-12)
    # advanced (KOV Thm 3.5; no mechanism needs δ, so all of it is the slack δ' = 1e-6):
    # Σ εᵢ(e^εᵢ−1)/(e^εᵢ+1) + √(2 ln(1/δ') Σ εᵢ²) = 100·0.1·tanh(0.05) + √(2 ln(1e6)·100·0.01), by hand
    kov = 100 * 0.1 * math.tanh(0.05) + math.sqrt(2 * math.log(1 / 1e-6) * 100 * 0.01)
    assert out["total"]["advanced"]["epsilon"] == pytest.approx(min(10.0, kov), rel=1e-9)
    assert out["total"]["rdp"]["epsilon"] < out["total"]["basic"]["epsilon"]


def test_cli_compose_says_why_a_rule_cannot_account(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Five (0.5, 1e-7) mechanisms and a discrete Gaussian at δ = 1e-6: once failed with
    "epsilon must be > 0 and finite; got inf", naming neither the rule nor the cause."""
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps({"delta": 1e-6, "mechanisms": [
        {"mechanism": "approx", "epsilon": 0.5, "delta": 1e-7, "count": 5},
        {"mechanism": "discrete_gaussian", "sigma": 3.0, "sensitivity": 1}]}))
    code, out, _ = _run(["compose", "--spec", str(spec)], capsys)
    assert code == 0
    total = out["total"]
    # basic: the (ε, δ) mechanisms keep their own δ (5 × 1e-7); the Gaussian gets the rest
    # (5e-7), so ε = 5 × 0.5 + the Gaussian's standalone ε at 5e-7 (by construction)
    g = standalone_epsilon(GaussianEvent(3.0, discrete=True), 5e-7 * (1 - 1e-12))
    assert total["basic"]["epsilon"] == pytest.approx(2.5 + g, rel=1e-9)
    # advanced gives mechanisms without a pure ε half of δ, all taken by the (ε, δ) ones: said so
    assert total["advanced"]["epsilon"] is None and "raise δ" in total["advanced"]["note"]
    # zCDP has no ρ for an (ε, δ) mechanism: said so, with the rule's name
    assert math.isinf(total["zcdp"]["epsilon"]) and "zcdp rule cannot account" in total["zcdp"]["note"]
    assert math.isfinite(total["rdp"]["epsilon"]) and math.isfinite(total["pld"]["epsilon"])


def test_cli_bad_spec_is_json_error_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.json"
    spec.write_text("{}")
    code, _out, err = _run(["plan", "--spec", str(spec)], capsys)
    assert code == 2
    assert "missing 'schema'" in json.loads(err)["error"]
    spec.write_text("{not json")
    code, _, err = _run(["compose", "--spec", str(spec)], capsys)
    assert code == 2 and "not valid JSON" in json.loads(err)["error"]


def test_python_dash_m_planner_runs() -> None:
    res = subprocess.run([sys.executable, "-m", "planner", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 0 and "plan" in res.stdout


def test_cli_release_accepts_the_plan_spec_and_never_resamples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: `planner release` once had its own spec parser that rejected 'scale'.
    url = f"sqlite:///{tmp_path}/ledger.db"
    args = ["release", "--spec", str(ROOT / "examples/census_plan.json"), "--data", str(ROOT / "data/census.csv"), "--ledger", url]
    code, first, err = _run(args, capsys)
    assert code == 0, err
    assert first["status"] == "done"
    code, second, _ = _run(args, capsys)
    assert code == 0 and second["status"] == "reused"
    code, ledger, _ = _run(["ledger", "--ledger", url], capsys)
    assert code == 0 and len(ledger["datasets"]) == 1


def test_cli_reads_a_file_outside_the_data_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The allow-listed directory guards the web app; a command-line user names any file.
    import shutil

    data = tmp_path / "elsewhere" / "census copy.csv"
    data.parent.mkdir()
    shutil.copy(ROOT / "data/census.csv", data)
    for backend in ("pandas", "duckdb"):
        code, out, err = _run(
            ["validate", "--data", str(data), "--schema", str(ROOT / "data/census.schema.json"), "--backend", backend], capsys
        )
        assert code == 0, err
        assert out["rows"] == 50_000 and out["backend"] == backend  # data/README.md: 50,000 rows


def test_cli_validate_publishes_a_keyed_fingerprint_not_a_bare_hash(capsys: pytest.CaptureFixture[str]) -> None:
    import hashlib

    bare = hashlib.sha256((ROOT / "data/census.csv").read_bytes()).hexdigest()
    for backend in ("pandas", "duckdb"):
        code, out, _ = _run(["validate", "--data", str(ROOT / "data/census.csv"), "--schema",
                             str(ROOT / "data/census.schema.json"), "--backend", backend], capsys)
        assert code == 0
        assert out["fingerprint"].startswith("hmac-sha256:") and bare not in json.dumps(out)


def test_cli_ledger_verify_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/ledger.db"
    code, out, _ = _run(["ledger", "verify", "--ledger", url], capsys)
    assert code == 1 and not out["ok"]  # no ledger there: a problem, not a new ledger
    assert not (tmp_path / "ledger.db").exists()  # verify never creates one
    code, _, _ = _run(["ledger", "--ledger", url], capsys)  # opening creates it
    code, out, _ = _run(["ledger", "verify", "--ledger", url], capsys)
    assert code == 0 and out["ok"] and out["problems"] == []
