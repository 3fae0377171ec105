"""End-to-end releases on the census sample into a file SQLite ledger.

Checks the order fixed in docs/engineering.md §5 (budget check → spend → sample → store), reuse of
stored answers for the same plan hash (nothing drawn again), refusal of an over-budget plan
(nothing sampled), declared bins (region's empty 'Overseas' bin), the exports, the CLI
handlers, and the statistical sanity of OpenDP's noise against the planner's predicted
RMSE (OpenDP is unseeded: ≥ 2000 draws, 5-standard-error tolerance).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from planner.core.errors import BudgetExceededError, PlannerError
from planner.data.backends.base import CountAggregate
from planner.data.backends.pandas_backend import PandasBackend
from planner.data.loader import load_table
from planner.data.schema import Schema
from planner.ledger import Ledger
from planner.planning.queries import queries_from_list
from planner.planning.workload import plan
from planner.privacy.accounting import CompositionRule
from planner.release import ReleaseError, cmd_ledger, cmd_release, plan_hash, prepare, release

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "census.csv"
SCHEMA = ROOT / "data" / "census.schema.json"
FP = "sha256:census-test"

QUERIES: list[dict[str, Any]] = [
    {"id": "n", "kind": "count", "mechanism": "discrete_laplace"},
    {"id": "region", "kind": "histogram", "column": "region", "mechanism": "discrete_laplace"},
    {"id": "income_sum", "kind": "sum", "column": "income", "mechanism": "gaussian"},
    {"id": "age_mean", "kind": "mean", "column": "age", "mechanism": "laplace"},
    {"id": "age_median", "kind": "median", "column": "age", "mechanism": "exponential", "candidates": 73},
    {"id": "income_q", "kind": "quantile", "column": "income", "mechanism": "exponential",
     "alphas": [0.25, 0.75], "candidates": 251},
    {"id": "edu_mode", "kind": "mode", "column": "education", "mechanism": "exponential"},
    {"id": "region_ism", "kind": "mode", "column": "region", "mechanism": "inverse_sensitivity"},
    {"id": "smokers", "kind": "proportion", "column": "smoker", "mechanism": "discrete_laplace"},
    {"id": "ages", "kind": "synthetic_sample", "column": "age", "mechanism": "perturbed_histogram", "bins": 8},
]
FORBIDDEN_KEYS = {"rows", "dropped", "unbinned", "clipped", "n", "n_true", "n_false", "exact", "true_value"}


@pytest.fixture(scope="module")
def schema() -> Schema:
    return Schema.load(SCHEMA)


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    return load_table(str(DATA))


@pytest.fixture()
def backend(df: pd.DataFrame, schema: Schema) -> PandasBackend:
    return PandasBackend(df, schema)


@pytest.fixture()
def ledger(tmp_path: Path) -> Any:
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    yield led
    led.close()


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count every OpenDP measurement invocation (the only place noise is drawn)."""
    counter: list[int] = []
    import planner.privacy.noise as noise

    real = noise._invoke

    def counting(meas: Any, arg: Any) -> Any:
        counter.append(1)
        return real(meas, arg)

    monkeypatch.setattr(noise, "_invoke", counting)
    return counter


def _plan(schema: Schema, eps: float = 1.0, delta: float = 1e-6, rule: str = "basic",
          queries: list[dict[str, Any]] | None = None) -> Any:
    return plan(queries_from_list(queries or QUERIES, schema), schema, eps, delta, rule)


def _walk_keys(obj: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(str(k))
            out |= _walk_keys(v)
    elif isinstance(obj, list):
        for v in obj:
            out |= _walk_keys(v)
    return out


def test_release_end_to_end_then_reuse(schema: Schema, backend: PandasBackend, ledger: Ledger, calls: list[int]) -> None:
    p = _plan(schema)
    res = release(p, schema, backend, ledger, FP, "census", total_epsilon=1.0, total_delta=1e-6, rule="basic")
    assert res.status == "done"
    assert {a.query_id for a in res.answers} == {q["id"] for q in QUERIES}
    n_draws = len(calls)
    # one invocation per measurement (a Laplace mean: sum and count; a quantile: per level)
    assert n_draws == sum(len(d.components) for d in prepare(p, schema).draws) == 12
    region = res.answer("region").answer
    assert isinstance(region, dict)
    assert region["labels"] == list(schema.column("region").labels)
    assert "Overseas" in region["labels"] and len(region["counts"]) == 6
    assert all(isinstance(v, float) and math.isfinite(v) for v in region["counts"])
    assert res.answer("edu_mode").answer["value"] in schema.column("education").labels  # type: ignore[index]
    assert res.answer("region_ism").answer["value"] in schema.column("region").labels  # type: ignore[index]
    med = res.answer("age_median").answer["value"]  # type: ignore[index]
    assert 18 <= med <= 90
    parts = res.answer("income_q").answer["parts"]  # type: ignore[index]
    assert set(parts) == {"quantile@0.25", "quantile@0.75"}
    assert 0.0 <= res.answer("smokers").answer["value"] <= 1.0  # type: ignore[index]
    syn = res.answer("ages").answer
    assert isinstance(syn, dict) and len(syn["counts"]) == 8 and all(18 <= v <= 90 for v in syn["sample"])  # type: ignore[union-attr]
    # costs: the shares add up to the plan's ε under basic composition
    assert math.isclose(sum(a.epsilon for a in res.answers), res.epsilon_spent, rel_tol=1e-9)
    assert res.epsilon_spent <= 1.0 * (1 + 1e-12)
    assert res.epsilon_remaining == pytest.approx(1.0 - res.epsilon_spent)
    # predictions are the plan's (data-independent)
    assert res.answer("n").predictions[0]["rmse"] == p.predictions[0].rmse

    # same plan again: stored answers, nothing drawn, nothing spent
    again = release(_plan(schema), schema, backend, ledger, FP, "census", total_epsilon=1.0, total_delta=1e-6, rule="basic")
    assert again.status == "reused"
    assert len(calls) == n_draws
    assert [a.answer for a in again.answers] == [a.answer for a in res.answers]
    assert again.epsilon_spent == res.epsilon_spent
    assert len(ledger.releases(FP)) == 1


def test_release_over_budget_refused_nothing_sampled(
    schema: Schema, backend: PandasBackend, ledger: Ledger, calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    small = [q for q in QUERIES if q["id"] in ("n", "region")]
    first = _plan(schema, 0.6, 0.0, queries=small)
    release(first, schema, backend, ledger, FP, "census", total_epsilon=1.0, total_delta=0.0, rule="basic")
    drawn = len(calls)

    def no_aggregates(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the backend must not be touched for a refused release")

    monkeypatch.setattr(backend, "evaluate", no_aggregates)
    second = _plan(schema, 0.6, 0.0, queries=[q for q in QUERIES if q["id"] == "n"])
    with pytest.raises(BudgetExceededError) as exc:
        release(second, schema, backend, ledger, FP, "census", total_epsilon=1.0, total_delta=0.0, rule="basic")
    msg = str(exc.value)
    assert "needs ε = 0.6" in msg and "only ε = 0.4" in msg and "remains" in msg
    assert len(calls) == drawn
    assert len(ledger.releases(FP)) == 1
    assert ledger.status(FP).epsilon_remaining == pytest.approx(0.4)


def test_release_rule_and_schema_mismatch_refused(schema: Schema, backend: PandasBackend, ledger: Ledger, calls: list[int]) -> None:
    p = _plan(schema, queries=QUERIES[:1], rule="rdp")
    with pytest.raises(ReleaseError, match="re-plan under basic"):
        release(p, schema, backend, ledger, FP, "census", total_epsilon=1.0, total_delta=1e-6, rule="basic")
    other = Schema.from_dict({**schema.to_dict(), "public_n": 49999})
    p2 = _plan(other, queries=QUERIES[:1])
    with pytest.raises(ReleaseError, match="schema"):
        release(p2, other, backend, ledger, FP, "census", total_epsilon=1.0, total_delta=1e-6, rule="basic")
    assert calls == []


def test_release_exports_hold_no_exact_aggregates(schema: Schema, backend: PandasBackend, ledger: Ledger) -> None:
    res = release(_plan(schema), schema, backend, ledger, FP, "census", total_epsilon=1.0, total_delta=1e-6, rule="basic")
    report = res.report_json()
    json.dumps(report)  # JSON-able
    assert not (_walk_keys(report) & FORBIDDEN_KEYS)
    assert report["schema_hash"] == schema.schema_hash()
    assert report["plan_hash"] == plan_hash(_plan(schema), schema)
    assert report["budget"]["epsilon_remaining"] == pytest.approx(1.0 - report["budget"]["epsilon_spent"])
    for q in report["queries"]:
        assert q["opendp"] and q["predictions"] and q["epsilon"] > 0
        for d in q["opendp"]:
            assert d["opendp"][0]["constructor"].startswith(("make_laplace", "make_gaussian", "make_noisy_max"))
    rows = list(csv.DictReader(io.StringIO(res.to_csv())))
    region_rows = [r for r in rows if r["query"] == "region"]
    assert [r["label"] for r in region_rows] == list(schema.column("region").labels)
    assert all(r["rmse"] and r["error_bound_95"] for r in region_rows)
    assert {r["part"] for r in rows if r["query"] == "income_q"} == {"quantile@0.25", "quantile@0.75"}


def test_plan_hash_changes_with_the_plan(schema: Schema) -> None:
    a = plan_hash(_plan(schema, queries=QUERIES[:2]), schema)
    assert a == plan_hash(_plan(schema, queries=QUERIES[:2]), schema)
    assert a != plan_hash(_plan(schema, 0.9, queries=QUERIES[:2]), schema)
    assert a != plan_hash(_plan(schema, queries=QUERIES[:2], rule="rdp"), schema)
    assert a != plan_hash(_plan(schema, queries=QUERIES[:1]), schema)


def test_release_smoothed_histogram_not_releasable(schema: Schema) -> None:
    q = [{"id": "s", "kind": "synthetic_sample", "column": "age", "mechanism": "smoothed_histogram", "bins": 4}]
    with pytest.raises(PlannerError):
        prepare(_plan(schema, queries=q), schema)


@pytest.mark.parametrize("mechanism", ["discrete_laplace", "laplace", "discrete_gaussian"])
def test_release_count_noise_matches_predicted_rmse(schema: Schema, mechanism: str) -> None:
    """Empirical MSE of 3000 OpenDP draws vs the plan's predicted RMSE², within 5 standard
    errors of the mean of X² (its sd estimated from the same draws)."""
    p = _plan(schema, 0.5, 1e-6, queries=[{"id": "n", "kind": "count", "mechanism": mechanism}])
    item = prepare(p, schema).items[0]
    truth = 1234
    err = np.array([item.answer(CountAggregate(truth))["value"] for _ in range(3000)], dtype=float) - truth  # type: ignore[operator]
    sq = err**2
    predicted = p.predictions[0].rmse ** 2
    se = sq.std(ddof=1) / math.sqrt(sq.size)
    assert abs(sq.mean() - predicted) <= 5 * se, (sq.mean(), predicted, se)
    assert abs(err.mean()) <= 5 * err.std(ddof=1) / math.sqrt(err.size)  # unbiased


def test_cmd_release_and_ledger(tmp_path: Path) -> None:
    spec = {
        "schema": str(SCHEMA),
        "budget": {"epsilon": 1.0, "delta": 0.0, "composition": "basic"},
        "queries": QUERIES[:2],
        "dataset_name": "census sample",
    }
    path = tmp_path / "PLAN.json"
    path.write_text(json.dumps(spec))
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    # no lifetime budget for the dataset yet: refused, nothing registered or spent
    with pytest.raises(PlannerError, match="no lifetime budget yet"):
        cmd_release(str(path), str(DATA), url)
    assert cmd_ledger(url, None)["datasets"] == []
    spec["lifetime"] = {"epsilon": 3.0, "delta": 0.0}
    path.write_text(json.dumps(spec))
    out = cmd_release(str(path), str(DATA), url)
    assert out["status"] == "done" and out["dataset"]["name"] == "census sample"
    assert [q["query"] for q in out["queries"]] == ["n", "region"]
    # the lifetime budget is 3, this release spends 1 (basic: the plan's ε): 2 remain
    assert out["budget"]["epsilon_total"] == 3.0
    assert out["budget"]["epsilon_spent"] == pytest.approx(1.0, rel=1e-9)
    assert out["budget"]["epsilon_remaining"] == pytest.approx(2.0, rel=1e-9)
    again = cmd_release(str(path), str(DATA), url)
    assert again["status"] == "reused" and again["queries"] == out["queries"]
    index = cmd_ledger(url, None)
    assert [d["name"] for d in index["datasets"]] == ["census sample"]
    fp = out["dataset"]["fingerprint"]
    full = cmd_ledger(url, fp)
    assert full["status"]["releases"] == 1
    assert {s["query_id"] for s in full["releases"][0]["spends"]} == {"n", "region"}


def test_cmd_release_bad_spec(tmp_path: Path) -> None:
    path = tmp_path / "PLAN.json"
    path.write_text("{not json")
    # the PLAN.json parser is shared with `planner plan` and raises PlanError (a PlannerError)
    with pytest.raises(PlannerError, match="not valid JSON"):
        cmd_release(str(path), str(DATA), f"sqlite:///{tmp_path / 'x.db'}")
    path.write_text(json.dumps({"schema": str(SCHEMA), "queries": []}))
    with pytest.raises(PlannerError, match="budget"):
        cmd_release(str(path), str(DATA), f"sqlite:///{tmp_path / 'x.db'}")


def test_release_rule_choice_gumbel_under_zcdp(schema: Schema, backend: PandasBackend, ledger: Ledger) -> None:
    qs = [q for q in QUERIES if q["id"] in ("age_median", "edu_mode")]
    p = _plan(schema, 1.0, 1e-6, "zcdp", qs)
    res = release(p, schema, backend, ledger, FP, "census", total_epsilon=1.0, total_delta=1e-6, rule=CompositionRule.ZCDP)
    for a in res.answers:
        assert a.opendp[0]["event"]["event"] == "exponential"
        assert a.opendp[0]["opendp"][0]["measure"] == "zero_concentrated_divergence"
    assert res.epsilon_spent <= 1.0 * (1 + 1e-12)


def test_cmd_release_target_mode_releases_the_target_plan(tmp_path: Path) -> None:
    # Issue 12: a spec in target mode used to be released as a weighted split at budget.epsilon,
    # missing its targets. The released plan must be the one that meets every target.
    queries = [dict(q, target=t) for q, t in zip(QUERIES[:2], (50.0, 200.0), strict=True)]
    spec = {"schema": str(SCHEMA), "mode": "target", "queries": queries,
            "budget": {"epsilon": 1.0, "delta": 0.0, "composition": "basic"},
            "lifetime": {"epsilon": 10.0, "delta": 0.0}}
    path = tmp_path / "PLAN.json"
    path.write_text(json.dumps(spec))
    out = cmd_release(str(path), str(DATA), f"sqlite:///{tmp_path / 'cli.db'}")
    bounds = {q["query"]: q["predictions"][0]["error_bound_95"] for q in out["queries"]}
    # each prediction meets its target (to the bisection's tolerance), as target mode promised
    assert bounds["n"] == pytest.approx(50.0, rel=1e-9) and bounds["region"] == pytest.approx(200.0, rel=1e-9)
    # the spend is target mode's least total ε, not budget.epsilon
    schema = Schema.load(SCHEMA)
    from planner.planning.workload import plan_for_targets

    least = plan_for_targets(queries_from_list(queries, schema), schema, 0.0, "basic").total_epsilon
    assert out["budget"]["epsilon_spent"] == pytest.approx(least, rel=1e-9) and least != pytest.approx(1.0)


def test_release_rows_are_typed_by_each_statistic(schema: Schema, backend: PandasBackend, ledger: Ledger) -> None:
    # every released number gets one row: histogram bins with their raw noisy counts, one row
    # per quantile level, whole-number counts next to the noisy value they came from
    qs = [
        {"id": "n", "kind": "count", "mechanism": "laplace"},
        {"id": "region", "kind": "histogram", "column": "region", "mechanism": "discrete_laplace"},
        {"id": "ageq", "kind": "quantile", "column": "age", "mechanism": "exponential", "alphas": [0.25, 0.75]},
    ]
    p = _plan(schema, 1.0, 0.0, "basic", qs)
    res = release(p, schema, backend, ledger, FP, "census", total_epsilon=2.0, total_delta=0.0, rule="basic")
    rows = res.rows()
    n_rows = [r for r in rows if r["query"] == "n"]
    assert len(n_rows) == 1 and n_rows[0]["value"] == max(round(n_rows[0]["noisy"]), 0)
    region = [r for r in rows if r["query"] == "region"]
    assert [r["label"] for r in region] == list(schema.column("region").labels)
    assert [r["part"] for r in rows if r["query"] == "ageq"] == ["quantile@0.25", "quantile@0.75"]
    # each level shows its own share of ε, as the plan does (found in the browser, session 10:
    # every level showed the query's total); under basic composition the levels add up to it
    levels = {pr.part: pr.epsilon for pr in p.predictions if pr.query_id == "ageq"}
    assert {r["part"]: r["epsilon"] for r in rows if r["query"] == "ageq"} == levels
    (ageq,) = [a for a in res.answers if a.query_id == "ageq"]
    assert sum(levels.values()) == pytest.approx(ageq.epsilon, rel=1e-12)
    assert all(r["epsilon"] == next(a.epsilon for a in res.answers if a.query_id == "region") for r in region)
    assert len(res.to_csv().strip().splitlines()) == len(rows) + 1
    notes = {a.query_id: a.notes for a in res.answers}
    assert any("whole number" in x for x in notes["n"])  # the post-processing is stated in the report


def test_release_report_carries_the_dataset_key_not_a_bare_hash(tmp_path: Path) -> None:
    # issue 16: a bare sha256 of the file lets anyone who knows all but one value test guesses
    import hashlib

    spec = {"schema": str(SCHEMA), "budget": {"epsilon": 1.0, "delta": 0.0, "composition": "basic"},
            "queries": QUERIES[:1], "lifetime": {"epsilon": 2.0, "delta": 0.0}}
    path = tmp_path / "PLAN.json"
    path.write_text(json.dumps(spec))
    out = cmd_release(str(path), str(DATA), f"sqlite:///{tmp_path / 'l.db'}")
    bare = hashlib.sha256(DATA.read_bytes()).hexdigest()
    assert bare not in json.dumps(out)
    assert out["dataset"]["fingerprint"].startswith("ds-")
