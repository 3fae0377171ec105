"""planner.planning.simulation: Monte Carlo checks agree with the planner's closed-form predictions.

Statistical tests use fixed seeds and tolerances of at least 5 standard errors (docs/engineering.md §2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.core.errors import PlannerError, QueryError
from planner.data.backends.base import (
    BinCounts,
    BooleanCounts,
    CountAggregate,
    QuantileAggregate,
    SumAggregate,
)
from planner.data.schema import Schema
from planner.planning import simulation as sim
from planner.planning.queries import queries_from_list
from planner.planning.statistics.base import MeanAggregate

SCHEMA = Schema.from_dict({
    "version": 1, "relation": "add_remove", "public_n": 1000,
    "columns": [
        {"name": "x", "kind": "numeric", "lower": 0, "upper": 100, "missing": {"action": "drop"}},
        {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"], "missing": {"action": "drop"}},
        {"name": "f", "kind": "boolean", "missing": {"action": "drop"}},
    ],
})


def _q(**kw):
    return queries_from_list([{"id": "q", **kw}], SCHEMA)[0]


def _close(r: sim.SimulatedAccuracy, rel_floor: float = 0.0) -> None:
    tol = max(5 * r.standard_error, rel_floor * r.predicted_rmse)
    assert abs(r.empirical_rmse - r.predicted_rmse) <= tol, r


@pytest.mark.parametrize("mech", ["laplace", "gaussian", "discrete_laplace", "discrete_gaussian"])
def test_simulate_query_count_matches_prediction(mech):
    # additive noise: the prediction is the noise's exact RMSE (√2·b for Laplace, σ for Gaussian)
    r = sim.simulate_query(_q(kind="count", mechanism=mech), SCHEMA, CountAggregate(950), [0.5, 2.0],
                           1e-6, 20_000, np.random.default_rng(1))
    assert [x.epsilon for x in r] == [0.5, 2.0]
    for x in r:
        _close(x)


def test_simulate_query_laplace_count_by_hand():
    # ε = 1, Δ = 1 (add/remove count): b = 1, RMSE = √2 (docs/mathematics.md §3, by hand), raw value
    q = _q(kind="count", mechanism="laplace", nonnegative_integer=False)
    r = sim.simulate_query(q, SCHEMA, CountAggregate(10), [1.0], 0.0, 40_000, np.random.default_rng(2))[0]
    assert r.predicted_rmse == pytest.approx(math.sqrt(2))
    _close(r)
    # released as a whole number (the default): RMSE of round(N), by hand
    # 2·sinh(½)·q(1 + q)/(1 − q)³ with q = e^{−1} (planner/planning/mechanisms/laplace.py)
    qq = math.exp(-1.0)
    by_hand = math.sqrt(2 * math.sinh(0.5) * qq * (1 + qq) / (1 - qq) ** 3)
    r = sim.simulate_query(_q(kind="count", mechanism="laplace"), SCHEMA, CountAggregate(10), [1.0], 0.0, 40_000,
                           np.random.default_rng(2))[0]
    assert r.predicted_rmse == pytest.approx(by_hand, rel=1e-12) and by_hand > math.sqrt(2)
    _close(r)


def test_simulate_query_sum_and_histogram_match_prediction():
    rng = np.random.default_rng(3)
    (s,) = sim.simulate_query(_q(kind="sum", column="x", mechanism="laplace"), SCHEMA,
                              SumAggregate(5e4, 1000), [1.0], 0.0, 20_000, rng)
    _close(s)
    (h,) = sim.simulate_query(_q(kind="histogram", column="c", mechanism="laplace"), SCHEMA,
                              BinCounts(("a", "b", "c"), (500, 300, 200)), [1.0], 0.0, 20_000, rng)
    _close(h)


def test_simulate_query_mean_is_no_worse_than_the_worst_case_prediction():
    # the delta-method prediction uses the worst-case mean max(|L|, |U|): an upper bound
    agg = MeanAggregate(SumAggregate(50_000.0, 1000), CountAggregate(1000))
    (r,) = sim.simulate_query(_q(kind="mean", column="x", mechanism="laplace"), SCHEMA, agg, [1.0],
                              0.0, 20_000, np.random.default_rng(4))
    assert r.empirical_rmse <= r.predicted_rmse + 5 * r.standard_error


def test_simulate_query_proportion_is_no_worse_than_the_worst_case_prediction():
    # add/remove: t̃/(t̃ + f̃); the prediction √2·b/n is the worst case π ∈ {0, 1}
    # (planner/planning/statistics/proportion.py); near π = 0.02 it is nearly attained
    for counts, tight in (((500, 500), False), ((20, 980), True)):
        (r,) = sim.simulate_query(_q(kind="proportion", column="f", mechanism="laplace"), SCHEMA,
                                  BooleanCounts(*counts), [1.0], 0.0, 20_000, np.random.default_rng(5))
        assert r.empirical_rmse <= r.predicted_rmse + 5 * r.standard_error
        if tight:
            assert r.empirical_rmse >= 0.9 * r.predicted_rmse


def test_randomized_response_is_a_comparison_for_proportions_not_a_release():
    # Warner's RR is local-model: shown beside the release's curves, worst case 1/(2√n·tanh(ε/2))
    from planner.planning.statistics import statistic

    q = _q(kind="proportion", column="f", mechanism="laplace")
    rmse, _ = statistic("proportion").comparison(q, SCHEMA, [1.0])  # type: ignore[attr-defined]
    assert float(rmse[0]) == pytest.approx(1 / (2 * math.sqrt(1000) * math.tanh(0.5)))
    with pytest.raises(PlannerError, match="local-model"):
        _q(kind="proportion", column="f", mechanism="randomized_response")


def test_simulate_query_mode_gap_is_below_the_predicted_bound():
    agg = BinCounts(("a", "b", "c"), (400, 390, 210))
    for mech in ("exponential", "inverse_sensitivity"):
        (r,) = sim.simulate_query(_q(kind="mode", column="c", mechanism=mech), SCHEMA, agg, [0.05],
                                  0.0, 5_000, np.random.default_rng(6))
        assert 0 < r.empirical_rmse <= r.predicted_rmse


def test_simulate_query_median_rank_error_shrinks_with_epsilon():
    grid = tuple(float(t) for t in np.linspace(0, 100, 101))
    counts = tuple([10] * 101)
    q = _q(kind="median", column="x", mechanism="exponential")
    r = sim.simulate_query(q, SCHEMA, QuantileAggregate(grid, counts), [0.01, 1.0], 0.0, 2_000,
                           np.random.default_rng(7))
    assert r[0].empirical_rmse > r[1].empirical_rmse
    assert r[0].unit == "rank, fraction of n"


def test_simulate_query_is_reproducible_with_the_same_seed():
    q = _q(kind="count", mechanism="laplace")
    a = sim.simulate_query(q, SCHEMA, CountAggregate(7), [1.0], 0.0, 500, np.random.default_rng(8))
    b = sim.simulate_query(q, SCHEMA, CountAggregate(7), [1.0], 0.0, 500, np.random.default_rng(8))
    assert a == b


def test_simulate_query_reports_progress():
    seen = []
    sim.simulate_query(_q(kind="count", mechanism="laplace"), SCHEMA, CountAggregate(7), [0.1, 1, 10],
                       0.0, 10, np.random.default_rng(0), progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_simulate_errors_rejects_a_mismatched_aggregate():
    q = _q(kind="sum", column="x", mechanism="laplace")
    p = sim.plan([q], SCHEMA, 1.0, 0.0, "basic").predictions[0]
    with pytest.raises(QueryError, match="does not fit"):
        sim.simulate_errors(p, q, SCHEMA, BooleanCounts(1, 1), 10, np.random.default_rng(0))


@pytest.mark.parametrize("runs", [0, sim.MAX_RUNS + 1])
def test_simulate_errors_rejects_bad_runs(runs):
    q = _q(kind="count", mechanism="laplace")
    p = sim.plan([q], SCHEMA, 1.0, 0.0, "basic").predictions[0]
    with pytest.raises(PlannerError):
        sim.simulate_errors(p, q, SCHEMA, CountAggregate(1), runs, np.random.default_rng(0))


def test_grid_values_repeats_candidates():
    assert sim.grid_values(QuantileAggregate((1.0, 2.0), (2, 1))).tolist() == [1.0, 1.0, 2.0]


def test_quantile_check_lower_bound_shrinks_and_is_data_dependent():
    agg = QuantileAggregate(tuple(float(t) for t in range(11)), (0, 5, 5, 5, 5, 10, 5, 5, 5, 5, 0))
    c = sim.quantile_check(agg, 0.5, 0.0, 10.0, [0.1, 1.0, 10.0], 500, np.random.default_rng(9))
    assert c.true_value == 5.0
    assert c.lower_bound_rmse[0] > c.lower_bound_rmse[1] > c.lower_bound_rmse[2] >= 0
    assert c.em_rmse.shape == c.ism_rmse.shape == (3,)
    with pytest.raises(QueryError):
        sim.quantile_check(agg, 1.5, 0.0, 10.0, [1.0], 10, np.random.default_rng(0))
