"""The workload layer: queries → allocation items → per-query predictions."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.data.schema import Schema
from planner.planning.queries import queries_from_list
from planner.planning.workload import default_error_scales, plan

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def census() -> Schema:
    return Schema.load(ROOT / "data/census.schema.json")


def test_default_error_scales_come_from_the_declaration(census: Schema) -> None:
    qs = queries_from_list(
        [
            {"id": "n", "kind": "count", "mechanism": "laplace"},
            {"id": "s", "kind": "sum", "column": "age", "mechanism": "laplace"},
            {"id": "m", "kind": "mean", "column": "age", "mechanism": "laplace"},
            {"id": "r", "kind": "histogram", "column": "region", "mechanism": "laplace"},
            {"id": "p", "kind": "proportion", "column": "smoker", "mechanism": "laplace"},
        ],
        census,
    )
    got = default_error_scales(qs, census)
    assert got is not None
    n = census.public_n
    assert n == 50_000  # data/census.schema.json declares public_n = 50000
    lo, hi = census.column("age").bounds  # declared [18, 90]
    assert got["n"] == n
    assert got["s"] == pytest.approx(n * (abs(lo) + abs(hi)) / 2)
    assert got["m"] == pytest.approx((abs(lo) + abs(hi)) / 2)
    assert got["r"] == pytest.approx(n / len(census.column("region").labels))
    assert "p" not in got  # proportions are already in [0, 1]


def test_laplace_count_prediction_matches_hand_calculation(census: Schema) -> None:
    # One Laplace count at ε = 0.5: b = Δ/ε = 2, RMSE = √2·b, 95% bound b·ln 20 (docs/mathematics.md §3).
    qs = queries_from_list([{"id": "n", "kind": "count", "mechanism": "laplace", "nonnegative_integer": False}],
                           census)
    p = plan(qs, census, 0.5, 0.0, "basic").predictions[0]
    assert p.noise["laplace_scale"] == pytest.approx(2.0)
    assert p.rmse == pytest.approx(2.0 * 2**0.5)
    assert p.error_bound_95 == pytest.approx(2.0 * 2.995732273553991)  # ln 20
    # released as a whole number ≥ 0 (the default): the bound is the least integer t with
    # P(|N| ≥ t + ½) ≤ 5%, ⌈2 ln 20 − ½⌉ = ⌈5.49⌉ = 6 (by hand)
    qs = queries_from_list([{"id": "n", "kind": "count", "mechanism": "laplace"}], census)
    assert plan(qs, census, 0.5, 0.0, "basic").predictions[0].error_bound_95 == 6.0


def test_plan_reports_the_optimised_currency(census: Schema) -> None:
    # Gaussian shares are optimised in ρ (zCDP), pure ones in ε (issue 4: "in the rule's own currency")
    qs = queries_from_list(
        [
            {"id": "n", "kind": "count", "mechanism": "laplace"},
            {"id": "g", "kind": "count", "mechanism": "gaussian"},
        ],
        census,
    )
    out = {p["id"]: p for p in plan(qs, census, 1.0, 1e-6, "rdp").to_dict()["queries"]}
    assert out["n"]["optimised"]["currency"] == "epsilon"
    assert out["n"]["optimised"]["value"] == pytest.approx(out["n"]["epsilon"])
    assert out["g"]["optimised"]["currency"] == "rho"
    assert out["g"]["optimised"]["value"] == pytest.approx(out["g"]["rho"])


def test_a_quantile_bound_never_exceeds_the_whole_table(census: Schema) -> None:
    """Session 10: at a small ε the union bound (2Δ/ε)·ln(k/β) on a rank error passed n
    (the census median at ε = 1e-4: ±198% of the rows); ranks lie in [0, n], so it is capped at 1."""
    from planner.planning.mechanisms import exponential as em
    from planner.planning.statistics.quantile import candidate_grid
    from planner.planning.workload import accuracy_curves

    (q,) = queries_from_list([{"id": "m", "kind": "median", "column": "age", "mechanism": "exponential"}], census)
    k, n = len(candidate_grid(q, census)), census.public_n
    assert n is not None
    points, _ = accuracy_curves(q, census, 1e-6, [1e-4, 1.0])
    (tiny,) = [p for p in points if p.epsilon == 1e-4]
    (one,) = [p for p in points if p.epsilon == 1.0]
    # the median's rank sensitivity is 1/2 at add/remove-one (Δ_rank: score_sensitivity), so
    # the union bound at ε is em.quantile_rank_error_bound(2ε, k)/n: far past 1 at ε = 1e-4
    assert float(em.quantile_rank_error_bound(2e-4, k, 0.05)[()]) / n > 1
    assert tiny.error_bound_95 == 1.0
    # where it is below 1 it is unchanged
    assert one.error_bound_95 == pytest.approx(float(em.quantile_rank_error_bound(2.0, k, 0.05)[()]) / n)
    assert one.error_bound_95 < 1


@pytest.mark.parametrize("scale", [1e-160, 1e-200])
def test_a_scale_too_small_to_weigh_is_refused_naming_the_query(census: Schema, scale: float) -> None:
    """Fuzzing (session 10): the allocator weighs an MSE by weight ÷ scale²; a scale of 1e-200
    raised ZeroDivisionError (scale² underflows to 0) and 1e-160 blamed the rule (∞ weight)."""
    from planner.core.errors import QueryError

    qs = queries_from_list([{"id": "n", "kind": "count", "mechanism": "laplace"},
                            {"id": "s", "kind": "sum", "column": "income", "mechanism": "laplace"}], census)
    with pytest.raises(QueryError, match=rf"query 'n': its error is measured against a scale of {scale:g}"):
        plan(qs, census, 1.0, 1e-6, "basic", {"n": scale})
    # a small scale that the floats hold plans as before, the query taking the larger share
    p = plan(qs, census, 1.0, 1e-6, "basic", {"n": 1e-120})
    shares = {x.id: x.epsilon for x in p.predictions}
    assert shares["n"] > shares["s"]


def test_target_mode_names_every_query_without_a_target_and_where_to_type_one(census: Schema) -> None:
    """Found in the browser (session 10): the message named the first such query only and
    did not say where a target is typed."""
    from planner.core.errors import QueryError
    from planner.planning.workload import plan_for_targets

    qs = queries_from_list([{"id": "n", "kind": "count", "mechanism": "laplace", "target": 50},
                            {"id": "a", "kind": "mean", "column": "age", "mechanism": "laplace"},
                            {"id": "q", "kind": "quantile", "column": "age", "mechanism": "exponential",
                             "alphas": [0.25, 0.75]}], census)
    with pytest.raises(QueryError, match=r"\['a', 'q'\] have none\. Type one in the 'target ±' column of the "
                                         r"Queries page"):
        plan_for_targets(qs, census, 1e-6, "basic")
