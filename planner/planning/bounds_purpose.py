"""Purpose-aware quantile levels for a bounds suggestion: where to clip for the mean or the
sum the bounds are for.

A fixed tail level (the 99th percentile, the 99.9th) is not what a clipped sum or mean
needs: its best upper bound U depends on how much noise the statistic will carry, i.e. on
its ε and the row count. This module picks the suggestion's levels from PUBLIC inputs only
— the downstream statistic (mean or sum), the ε it will spend, the public row count n and
the schema's contribution bound — and leaves the mechanism unchanged (a DP quantile at
that level, released like any other, :mod:`planner.planning.bounds_suggest`).

Derivation (docs/mathematics.md §11). Work in the sum's units (a mean's errors × n). The
planner predicts the statistic's noise standard deviation at ε_stat as σ₁ times the
bounds' scale — U − L for a mean (its centred sum's sensitivity is c·(U − L)/2),
max(|L|, |U|) for a sum — with σ₁ computed by :func:`noise_per_width` from the planner's own
prediction at bounds [0, 1] (e.g. 2/ε_stat for the default mean under basic composition:
Laplace noise on the centred sum and on the count). With L the coarse range's lower end A
and U clipping the top, the clipping bias is −S(U), S(U) = Σ (xᵢ − U)₊, and the error is

    f(U) = S(U)² + σ₁²·(U − L)².

S is convex and decreasing with S′(U) = −m(U), m(U) = #{xᵢ > U}, so the minimiser solves

    S(U)·m(U) = σ₁²·(U − L).                                                   (1)

Write S(U) = m(U)·e(U), e(U) the mean excess of the values above U. Above a Pareto tail
of index α > 1 (P(X > u) ∝ u^(−α)), e(U) = U/(α − 1) exactly, so with L = 0 (1) gives

    m* = σ₁·√(α − 1)    rows above U,   the level 1 − m*/n.                     (2)

It does not depend on where the tail starts, on n or on U; only σ₁ (∝ 1/ε_stat for Laplace
noise) and the tail's index enter. Income and wage tails have α ≈ 1.5–3; we take α = 2
(:data:`TAIL_INDEX`), so k = σ₁·ε_stat and the level is 1 − k/(n·ε_stat) — e.g. k = 2 for
the default mean, about 2/ε_stat rows above U. α = 2 is also where (2) coincides with the
minimiser of |bias| + noise standard deviation, S(U) + σ₁·(U − L), whose derivative
−m(U) + σ₁ vanishes at m = σ₁ for ANY data: the rule of Amin, Kulesza, Muñoz Medina and
Vassilvitskii ("Bounding User Contributions: A Bias-Variance Trade-off in Differential
Privacy", ICML 2019), and the target Andrew, Thakkar, McMahan and Ramaswamy's adaptive
clipping tracks ("Differentially Private Learning with Adaptive Clipping", NeurIPS 2021).
The error is flat around the optimum: on a Pareto tail of index α, clipping t·m* rows
instead costs a factor √(t^(−2/α)·(t² + α − 1)/α) in root-mean-square error (1.25 at t = 2
or ½ for α = 2). ``tests/engine/test_bounds_purpose.py`` checks (2) against a brute-force
minimisation of f on Pareto data and (1) on log-normal data.

Lower bound. For a sum over a range with A ≥ 0 the noise scale is max(|L|, |U|) = U:
raising L above A only adds bias, so L = A (level 0, nothing released) is optimal. For a
mean over such a range raising L to ℓ saves at most σ₁·(ℓ − A) of noise, while a second
released quantile halves the ε of the upper one; on skewed data (most values far below
U) that trade is lost, so L = A as well — give a tighter public range [A, B] when the
values sit far above 0. Over a signed range (A < 0) the same rule (2) holds at each end
by symmetry: m* rows below L, the two levels sharing the suggestion's ε.

The level is rounded to two significant digits of its tail share (a simple fraction, which
keeps the quantile's integer scores small), kept between half a row and a quarter of n.

The floor. The DP quantile puts U within ±(2/ε_s)·ln(k/β) rows of its target (ε_s the
suggestion's ε, k candidates, :mod:`planner.planning.statistics.quantile`); with ε_s ≪ ε_stat
that spread is far wider than m* ≈ 2/ε_stat, so the choice of level matters less than the
suggestion's own ε (``tests/benchmarks/bench_bounds.py``, docs/measurements/2026-12-07/bounds.txt).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Final

from planner.core.errors import QueryError
from planner.data.schema import BoundsFor, Schema
from planner.planning.queries import Query
from planner.planning.workload import Plan, plan
from planner.privacy.budget import CompositionRule

__all__ = ["TAIL_INDEX", "Purpose", "PurposeLevels", "Statistic", "downstream_purpose", "noise_per_width",
           "optimal_tail_count", "purpose_levels", "tail_share"]

#: The Pareto tail index the purpose-aware level assumes (module docstring, (2)).
TAIL_INDEX: Final[float] = 2.0
#: Largest integer the quantile's scores may reach comfortably (b·n, b the level's denominator).
_SCORE_LIMIT: Final[int] = 2**53


#: The downstream statistic a suggestion's bounds are for (the schema's own enum, so the
#: schema can record the purpose: :class:`planner.data.schema.BoundsSource`).
Statistic = BoundsFor


@dataclass(frozen=True, slots=True)
class Purpose:
    """What the bounds are for: a ``statistic`` (mean or sum) of the column that will spend
    ``epsilon`` (and ``delta``); ``basis`` says where that ε came from, in words."""

    statistic: Statistic
    epsilon: float
    delta: float = 0.0
    basis: str = "given by the owner"

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "statistic", Statistic(self.statistic))
        except ValueError as exc:
            raise QueryError(f"purpose: the bounds can be tuned for {[s.value for s in Statistic]}; got "
                             f"{self.statistic!r}. For quantiles or histograms give fixed levels instead.") from exc
        for name in ("epsilon", "delta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
                raise QueryError(f"purpose {name} must be a finite number; got {type(v).__name__}. Give the {name} "
                                 f"the {self.statistic.value} will spend.")
            object.__setattr__(self, name, float(v))
        if not self.epsilon > 0:
            raise QueryError(f"purpose epsilon must be > 0 (the ε the {self.statistic.value} will spend); got "
                             f"{self.epsilon:g}.")
        if not 0 <= self.delta < 1:
            raise QueryError(f"purpose delta must be in [0, 1); got {self.delta:g}.")


@dataclass(frozen=True, slots=True)
class PurposeLevels:
    """The levels chosen for a purpose, and the public numbers they came from."""

    purpose: Purpose
    n: int
    sigma1: float  # noise std per unit of the bounds' scale, in the sum's units
    rows: float  # m*, the rows the bias²+noise optimum leaves beyond each tuned bound
    levels: tuple[float, float]

    def words(self, column: str) -> str:
        lo, hi = self.levels
        ends = (f"the upper bound at level {hi:g}" if lo == 0 else
                f"the lower bound at level {lo:g} and the upper at {hi:g}")
        mean = self.purpose.statistic is Statistic.MEAN
        scale = "width U − L, ÷ n" if mean else "scale max(|L|, |U|)"
        return (f"Levels tuned for a {self.purpose.statistic.value} of {column!r} that will spend ε = "
                f"{self.purpose.epsilon:g} ({self.purpose.basis}), public n = {self.n:,}: its predicted noise is "
                f"{self.sigma1:.3g} × the bounds' {scale}; clipping about {self.rows:.3g} row(s) beyond a bound "
                f"balances the clipping bias against that noise (Amin et al., ICML 2019), hence {ends}.")

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": self.purpose.statistic.value, "epsilon": self.purpose.epsilon,
                "delta": self.purpose.delta, "basis": self.purpose.basis, "n": self.n, "sigma1": self.sigma1,
                "rows": self.rows, "levels": list(self.levels)}


def noise_per_width(schema: Schema, column: str, purpose: Purpose,
                    rule: CompositionRule | str = CompositionRule.BASIC) -> float:
    """σ₁: the planner's predicted noise standard deviation of ``purpose``'s statistic, in
    the sum's units (a mean's × n), per unit of the bounds' scale — the statistic planned
    alone at ``purpose.epsilon`` with ``column`` bounded to [0, 1] (public inputs only:
    the schema's public n and contribution bound). Linear in the bounds' scale (module
    docstring), so σ₁·(U − L) is its noise at bounds [L, U].

    Examples
    --------
    >>> from planner.data.schema import Column, ColumnKind, MissingRule
    >>> s = Schema((Column("x", ColumnKind.NUMERIC, MissingRule(), 0.0, 1.0),), public_n=1000)
    >>> round(noise_per_width(s, "x", Purpose("sum", 0.5)), 6)  # Laplace: √2·Δ/ε, Δ = 1
    2.828427
    """
    n = schema.public_n
    if n is None:
        raise QueryError("public_n: tuning the bounds to a mean or a sum needs the public row count; declare "
                         "'public_n' (an approximate, public number of rows) in the schema.")
    cols = tuple(dataclasses.replace(c, lower=0.0, upper=1.0, bounds_source=None) if c.name == column else c
                 for c in schema.columns)
    unit = dataclasses.replace(schema, columns=cols)
    p = plan([Query("bounds_purpose", purpose.statistic.value, column, None)], unit, purpose.epsilon,
             purpose.delta, rule)
    rmse = math.sqrt(sum(pr.rmse ** 2 for pr in p.predictions))
    return rmse * n if purpose.statistic is Statistic.MEAN else rmse


def optimal_tail_count(sigma1: float, tail_index: float = TAIL_INDEX) -> float:
    """m* = σ₁·√(α − 1): the rows a bias²+noise-optimal bound leaves beyond it above a
    Pareto tail of index α (module docstring, (2)).

    Examples
    --------
    >>> optimal_tail_count(4.0), optimal_tail_count(4.0, 5.0)
    (4.0, 8.0)
    """
    if not tail_index > 1:
        raise QueryError(f"tail_index must be > 1 (a tail with a finite mean); got {tail_index:g}.")
    return float(sigma1) * math.sqrt(tail_index - 1.0)


def tail_share(rows: float, n: int) -> float:
    """The tail share m/n as a simple decimal: kept in [½ row, n/4], rounded to two
    significant digits (fewer when the level's denominator times n would make the
    quantile's integer scores too large).

    Examples
    --------
    >>> tail_share(2.2222, 48480), tail_share(0.1, 1000), tail_share(900.0, 1000)
    (4.6e-05, 0.0005, 0.25)
    """
    p = min(max(rows, 0.5) / n, 0.25)
    digits = 1 - math.floor(math.log10(p))  # two significant digits
    while digits > 1 and 10**digits * n > _SCORE_LIMIT:
        digits -= 1
    return max(round(p, digits), 10.0 ** -digits)


def purpose_levels(schema: Schema, column: str, purpose: Purpose, coarse_lower: float,
                   rule: CompositionRule | str = CompositionRule.BASIC,
                   tail_index: float = TAIL_INDEX) -> PurposeLevels:
    """The suggestion's levels for ``purpose`` (module docstring): (0, 1 − m*/n) over a
    coarse range starting at ``coarse_lower`` ≥ 0, (m*/n, 1 − m*/n) over a signed one;
    public inputs only."""
    s1 = noise_per_width(schema, column, purpose, rule)
    n = int(schema.public_n or 0)
    m = optimal_tail_count(s1, tail_index)
    p = tail_share(m, n)
    hi = round(1.0 - p, 1 - math.floor(math.log10(p)) + 1)  # p has at most that many decimals
    lo = 0.0 if coarse_lower >= 0 else p
    return PurposeLevels(purpose, n, s1, m, (lo, hi))


def downstream_purpose(the_plan: Plan | None, column: str, statistic: Statistic | str, *,
                       fallback_epsilon: float | None = None) -> Purpose:
    """The purpose of bounds for ``statistic`` of ``column`` in a plan: the ε the plan gives
    the first such query (the sum of its parts' ε), else ``fallback_epsilon`` (the plan's
    whole ε) with words saying so. Public: a plan is made before any data is read."""
    stat = Statistic(statistic)
    if the_plan is not None:
        queries = {part.query.id: part.query for part in the_plan.parts}
        eps: dict[str, float] = {}
        for pr in the_plan.predictions:
            q = queries.get(pr.query_id)
            if q is not None and q.column == column and q.kind.value == stat.value:
                eps[q.id] = eps.get(q.id, 0.0) + float(pr.epsilon)
        if eps:
            qid, e = next(iter(eps.items()))
            if e > 0:
                return Purpose(stat, e, basis=f"the plan's share for {qid!r}")
    if fallback_epsilon is None:
        raise QueryError(f"purpose: the plan holds no {stat.value} of {column!r}; give the ε that {stat.value} will "
                         "spend.")
    return Purpose(stat, fallback_epsilon,
                   basis=f"the plan's whole ε: it holds no {stat.value} of {column!r} yet")
