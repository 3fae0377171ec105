"""Purpose-aware levels of a bounds suggestion (planner.planning.bounds_purpose): the level
formula against a brute-force minimisation of clipping bias² + noise variance on known
distributions, σ₁ from the planner's own prediction, and the levels from public inputs only.

Where the numbers come from: the bias of clipping at U is −n·E[(X − U)₊], computed here
independently of the module — by numerical integration of the survival function for a
Pareto tail, by the log-normal's closed-form partial expectation
E[(X − U)₊] = e^(μ+σ²/2)·Φ((μ + σ² − ln U)/σ) − U·Φ((μ − ln U)/σ) — and the objective
(n·E[(X − U)₊])² + σ₁²U² is minimised by a grid over ln U refined by scipy's bounded
scalar minimiser.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from planner.core.errors import QueryError
from planner.data.schema import Column, ColumnKind, MissingRule, Schema
from planner.planning import bounds_suggest as bs
from planner.planning.bounds_purpose import (
    Purpose,
    Statistic,
    noise_per_width,
    optimal_tail_count,
    purpose_levels,
    tail_share,
)
from planner.planning.statistics.quantile import alpha_fraction


def _minimise(bias_rows: Callable[[float], float], sigma1: float, lo: float, hi: float) -> tuple[float, float]:
    """(U*, f(U*)) for f(U) = bias_rows(U)² + σ₁²U², brute force over ln U in [lo, hi]."""
    def f(lu: float) -> float:
        return bias_rows(math.exp(lu)) ** 2 + (sigma1 * math.exp(lu)) ** 2

    grid = np.linspace(math.log(lo), math.log(hi), 2000)
    i = int(np.argmin([f(float(g)) for g in grid]))
    r = optimize.minimize_scalar(f, bounds=(float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])),
                                 method="bounded", options={"xatol": 1e-12})
    return math.exp(float(r.x)), float(r.fun)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 3.0])
@pytest.mark.parametrize("sigma1", [2 / 0.9, 4.0, 40.0])
def test_level_formula_is_the_brute_force_optimum_on_a_pareto_tail(alpha: float, sigma1: float) -> None:
    n = 10_000

    def sf(x: float) -> float:  # Pareto(α) with x_m = 1
        return float(min(1.0, x ** -alpha))

    def bias_rows(u: float) -> float:  # n·E[(X − U)₊] = n·∫_U^∞ P(X > x) dx, numerically (x = U·eˢ)
        # beyond s = 200 the integrand is below e^(−100): nothing
        return n * float(integrate.quad(lambda s: sf(u * math.exp(s)) * u * math.exp(s), 0.0, 200.0, limit=200)[0])

    u, _ = _minimise(bias_rows, sigma1, 1.0, 1e7)
    rows_above = n * sf(u)
    assert rows_above == pytest.approx(optimal_tail_count(sigma1, alpha), rel=1e-4)
    if alpha == 2.0:  # the default tail index: m* = σ₁ itself
        assert rows_above == pytest.approx(optimal_tail_count(sigma1), rel=1e-4)


def test_on_a_lognormal_the_optimum_solves_the_stationarity_equation_and_the_formula_costs_little() -> None:
    # log-normal incomes (μ = 10, σ = 1), n = 20,000, the default mean at ε_stat = 0.9: σ₁ = 2/0.9
    mu, sg, n, s1 = 10.0, 1.0, 20_000, 2 / 0.9
    phi = stats.norm

    def bias_rows(u: float) -> float:
        return float(n * (math.exp(mu + sg**2 / 2) * phi.cdf((mu + sg**2 - math.log(u)) / sg)
                          - u * phi.cdf((mu - math.log(u)) / sg)))

    def above(u: float) -> float:
        return n * float(phi.sf((math.log(u) - mu) / sg))

    u, best = _minimise(bias_rows, s1, 1e4, 1e8)
    # (1): S(U)·m(U) = σ₁²·U at the optimum, for any distribution
    assert bias_rows(u) * above(u) == pytest.approx(s1**2 * u, rel=1e-6)
    # (2) with the tail's local index α = 1 + U/e(U) (e the mean excess) gives the optimum
    a_loc = 1 + u / (bias_rows(u) / above(u))
    assert above(u) == pytest.approx(optimal_tail_count(s1, a_loc), rel=1e-6)
    # the default α = 2 clips σ₁ rows instead of m*; the docstring's flatness factor
    # √(t^(−2/α)(t² + α − 1)/α), t = σ₁/m*, predicts the cost (≈ 1.05 here, measured 1.053)
    u_formula = math.exp(mu + sg * float(phi.isf(s1 / n)))
    ratio = math.sqrt((bias_rows(u_formula) ** 2 + (s1 * u_formula) ** 2) / best)
    t = s1 / above(u)
    assert ratio == pytest.approx(math.sqrt(t ** (-2 / a_loc) * (t * t + a_loc - 1) / a_loc), abs=0.01)
    assert ratio < 1.1


def _schema(lower: float = 0.0, n: int | None = 20_000) -> Schema:
    return Schema((Column("x", ColumnKind.NUMERIC, MissingRule(), lower, 1.0),), public_n=n)


@pytest.mark.parametrize("eps", [0.1, 0.9, 4.0])
def test_sigma1_is_the_planners_noise_per_unit_of_the_bounds(eps: float) -> None:
    # by hand: a sum under Laplace with Δ = U has std √2·U/ε; the default mean (centred sum,
    # Δ = w/2, and count, each at ε/2 under basic composition) has n × std = 2·w/ε
    assert noise_per_width(_schema(), "x", Purpose(Statistic.SUM, eps)) == pytest.approx(math.sqrt(2) / eps, rel=1e-9)
    assert noise_per_width(_schema(), "x", Purpose(Statistic.MEAN, eps)) == pytest.approx(2 / eps, rel=1e-9)


def test_levels_come_from_public_inputs_only() -> None:
    # non-negative coarse range: L is its own end; m* = 2/0.9 rows → 1.1e-4 of 20,000
    t = purpose_levels(_schema(), "x", Purpose(Statistic.MEAN, 0.9), 0.0)
    assert t.levels == (0.0, 0.99989) and t.rows == pytest.approx(2 / 0.9)
    # a signed range: the same share at each end
    t = purpose_levels(_schema(), "x", Purpose(Statistic.MEAN, 0.9), -5.0)
    assert t.levels == (0.00011, 0.99989)
    # more rows or more ε: fewer rows clipped in share
    assert purpose_levels(_schema(n=2_000_000), "x", Purpose(Statistic.MEAN, 0.9), 0.0).levels == (0.0, 0.9999989)
    # the level is a simple fraction whose integer scores stay small, even at n = 10⁹
    for n in (50, 20_000, 10**9):
        lv = purpose_levels(_schema(n=n), "x", Purpose(Statistic.SUM, 0.3), 0.0).levels[1]
        assert alpha_fraction(lv).denominator * n <= 2**53
    assert tail_share(1e-3, 100) == 0.005 and tail_share(1e6, 100) == 0.25  # half a row … a quarter of n


def test_the_suggestion_plan_carries_its_purpose_and_refuses_both() -> None:
    sp = bs.plan_suggestion(_schema(), "x", 0.1, magnitude=1e6, purpose=Purpose(Statistic.MEAN, 0.9, basis="given"))
    assert sp.levels == (0.0, 0.99989) and sp.tuned is not None
    assert list(sp.query.options["alphas"]) == [0.99989]  # one quantile released, the whole ε on it
    assert "Levels tuned for a mean of 'x' that will spend ε = 0.9 (given)" in sp.words()
    assert sp.to_dict()["purpose"]["levels"] == [0.0, 0.99989]
    assert bs.plan_suggestion(_schema(), "x", 0.1, magnitude=1e6).levels == bs.DEFAULT_LEVELS  # no purpose: fixed
    with pytest.raises(QueryError, match="not both"):
        bs.plan_suggestion(_schema(), "x", 0.1, magnitude=1e6, levels=(0, 0.99), purpose=Purpose(Statistic.SUM, 1.0))
    for bad, field in ((dict(statistic="median", epsilon=1.0), "purpose"), (dict(statistic="mean", epsilon=0.0),
                                                                             "epsilon"),
                       (dict(statistic="mean", epsilon=float("nan")), "epsilon")):
        with pytest.raises(QueryError, match=field):
            Purpose(**bad)  # type: ignore[arg-type]  # on purpose: bad input
    with pytest.raises(QueryError, match="public_n"):
        purpose_levels(_schema(n=None), "x", Purpose(Statistic.MEAN, 1.0), 0.0)
