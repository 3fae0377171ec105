"""Suggesting a numeric column's bounds by DP quantiles over a public coarse grid, and the
clipping bias of declared bounds.

Every sum, mean and quantile needs public bounds [L, U]. An owner who does not know them can
spend a small ε on two DP quantiles (by default the 1st and 99th percentiles) and declare
them as bounds. The suggestion is a plan like any other: one quantile query (the
exponential mechanism on ranks, :mod:`planner.planning.statistics.quantile`) on the column,
over a schema whose bounds for that column are a PUBLIC coarse range, with its candidates a
public grid on it — either the range the owner gives, or only a magnitude ("values up to
about 10⁶", signed or not) on a symmetric log-scale grid with 0 included. The data only
enters through the released quantiles (post-processing turns them into [L, U]); nothing
used for calibration is read from the rows. The release layer
(:func:`planner.release.bounds.suggest_bounds`) releases that plan through the one release
path (budget check → spend recorded → sample → store; a rerun returns the stored answer).

Predicted accuracy (before release, data-independent): each level's rank error (a fraction
of n) from the quantile statistic's own prediction, and the grid's resolution in the
column's units. With probability ≥ 95% (union bound), the released L at level α has at most
(α + r)·n values below it and at least (α − r)·n at or below it, r = the 95% rank bound; it
is a grid point, so in the column's units it lies within one grid step of the true
(α ± r)-quantiles.

Which levels. Without a purpose the levels are fixed, by default (0.01, 0.99): bounds holding
most of the mass, what a histogram or a quantile needs. When the owner says what the bounds
are for — a mean or a sum of the column, the ε it will spend — the levels are tuned to it
(:mod:`planner.planning.bounds_purpose`, from public inputs only): the bias²+noise-optimal
upper bound leaves about m* = σ₁ rows above it (σ₁ the statistic's noise per unit of the
bounds, ≈ 2/ε_stat for the default mean), so the level is 1 − m*/n; the lower bound is
the coarse range's own lower end when it is ≥ 0 (nothing released, the whole ε on U), else
m*/n. Measured (``tests/benchmarks/bench_bounds.py``, docs/measurements/2026-12-07/bounds.txt;
ε_total 0.5, 1 and 4, a tenth of it on the suggestion): the tuned levels cost 1.48–2.67 × the
error of the best pair of true quantiles chosen with hindsight on an income, a wage and a
log-normal column, where the best fixed level of the 2026-11-28 run (0, 0.9995) costs
1.85–5.22 ×. The limits: hindsight's lower bound cancels part of the clipping bias (with
L = 0 hindsight itself is 1.0–1.5 × worse), and the selection's rank resolution, ± (2/ε)·ln k
rows, is far coarser than a best upper bound that clips ~2/ε_stat rows; candidates above the
largest value all tie.

Clipping bias. Clipping into [L, U] moves a value below L up to L and a value above U down
to U. If every value is known to lie in a public outer range [A, B], at most a fraction p_lo
of them below L and p_hi above U, the clipped mean differs from the true mean by

    −p_hi·(B − U) ≤ mean(clip(x)) − mean(x) ≤ p_lo·(L − A)

(each clipped value moves by at most L − A up or B − U down). With p_lo = p_hi = 1 that is
the worst case of any data in [A, B]; with bounds from DP quantiles at levels (a, b),
p_lo = a + r and p_hi = 1 − b + r with probability ≥ 95% (r as above). Without a public outer
range the worst case is unbounded. The exact bias on the rows is data-dependent:
:func:`clipping_on_data` (owner only, never exported).

References
----------
A. Smith, "Privacy-preserving statistical estimation with optimal convergence rates",
STOC 2011 (DP quantiles by the exponential mechanism on ranks).
F. McSherry, K. Talwar, "Mechanism Design via Differential Privacy", FOCS 2007 (the
exponential mechanism and its utility bound (2Δu/ε)·ln(|T|/β)).
J. Gillenwater, M. Joseph, A. Kulesza, "Differentially Private Quantiles", ICML 2021
(quantiles over a public range to choose bounds).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import PlannerError, QueryError
from planner.data.schema import BoundsSource, BoundsSourceKind, ColumnKind, Schema
from planner.planning.bounds_purpose import Purpose, PurposeLevels, purpose_levels
from planner.planning.queries import MAX_GRID, Query, QueryKind
from planner.planning.workload import Plan, plan_equal
from planner.privacy.budget import CompositionRule

#: Default quantile levels of a suggestion: the 1st and 99th percentiles.
DEFAULT_LEVELS: Final[tuple[float, float]] = (0.01, 0.99)
#: Default log-scale grid: 20 points per decade (a step of 10^(1/20) ≈ ×1.122) over 6 decades.
DEFAULT_PER_DECADE: Final[int] = 20
DEFAULT_DECADES: Final[int] = 6
#: Default number of points of a linear grid over a given range.
DEFAULT_LINEAR_POINTS: Final[int] = 201
#: The id of the suggestion's quantile query (its answers are ``suggest_bounds:quantile@α``).
QUERY_ID: Final[str] = "suggest_bounds"
#: What a data-dependent clipping view says of itself.
DATA_DEPENDENT: Final[str] = ("Computed from your raw data — not private, for the data owner only, never "
                              "exported.")


class GridScale(StrEnum):
    """How the public candidate grid is spaced."""

    LOG = "log"  # symmetric log scale, 0 included
    LINEAR = "linear"


@dataclass(frozen=True, slots=True)
class CoarseGrid:
    """The public candidate grid of a suggestion: its range [lower, upper] (the column's
    bounds in the suggestion's schema) and its increasing candidates (both ends included)."""

    lower: float
    upper: float
    values: tuple[float, ...]
    scale: GridScale
    per_decade: int | None = None

    @property
    def ratio(self) -> float | None:
        """Ratio between neighbouring non-zero candidates of a log grid (10^(1/per_decade))."""
        return None if self.per_decade is None else 10.0 ** (1.0 / self.per_decade)

    def resolution(self) -> str:
        """The grid's spacing in words, in the column's units."""
        if self.scale is GridScale.LOG and self.ratio is not None:
            return (f"log-scale grid of {len(self.values)} candidates over [{self.lower:g}, {self.upper:g}]: "
                    f"neighbouring candidates differ by a factor {self.ratio:.4g} "
                    f"(+{100 * (self.ratio - 1):.3g}%), 0 included")
        step = (self.upper - self.lower) / max(len(self.values) - 1, 1)
        return f"linear grid of {len(self.values)} candidates over [{self.lower:g}, {self.upper:g}], step {step:g}"

    def neighbours(self, value: float) -> tuple[float, float]:
        """The grid points just below and just above ``value`` (itself at an end)."""
        g = np.asarray(self.values)
        i = int(np.searchsorted(g, value, side="left"))
        below = float(g[i - 1]) if i > 0 else float(g[0])
        j = int(np.searchsorted(g, value, side="right"))
        above = float(g[j]) if j < len(g) else float(g[-1])
        return below, above

    def to_dict(self) -> dict[str, Any]:
        return {"lower": self.lower, "upper": self.upper, "scale": self.scale.value, "candidates": len(self.values),
                "per_decade": self.per_decade}


def _positive(value: Any, name: str, remedy: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise QueryError(f"{name} must be a finite number; got {type(value).__name__}. {remedy}")
    v = float(value)
    if not v > 0:
        raise QueryError(f"{name} must be > 0; got {v:g}. {remedy}")
    return v


def _count(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise QueryError(f"{name} must be a whole number from {lo} to {hi}; got {value!r}.")
    return int(value)


def _round_sig(x: npt.NDArray[np.float64], digits: int = 4) -> npt.NDArray[np.float64]:
    """Round to ``digits`` significant digits (public, readable candidates)."""
    out = np.zeros_like(x)
    nz = x != 0
    mags = np.floor(np.log10(np.abs(x[nz])))
    scale = 10.0 ** (digits - 1 - mags)
    out[nz] = np.round(x[nz] * scale) / scale
    return out


def magnitude_grid(magnitude: float, *, signed: bool = False, decades: int = DEFAULT_DECADES,
                   per_decade: int = DEFAULT_PER_DECADE) -> CoarseGrid:
    """The public log-scale grid when the owner gives only a magnitude M ("values up to about M").

    Candidates: 0 and M·10^(−j/p) for j = 0, …, D·p (p points per decade over D decades),
    rounded to 4 significant digits; with ``signed`` also their negatives (a symmetric log
    scale). Range [0, M], or [−M, M] when signed. Values beyond it are clipped to it.

    Examples
    --------
    >>> g = magnitude_grid(1000.0, decades=3, per_decade=1)
    >>> g.values
    (0.0, 1.0, 10.0, 100.0, 1000.0)
    >>> magnitude_grid(10.0, signed=True, decades=1, per_decade=1).values
    (-10.0, -1.0, 0.0, 1.0, 10.0)
    """
    m = _positive(magnitude, "magnitude", "Give the public order of magnitude of the values, e.g. 1e6.")
    d = _count(decades, "decades", 1, 15)
    p = _count(per_decade, "per_decade", 1, 1000)
    pos = _round_sig(m * 10.0 ** (-np.arange(d * p, -1, -1) / p))
    pos[-1] = m
    pos = np.unique(pos[pos > 0])
    vals = np.concatenate([-pos[::-1], [0.0], pos]) if signed else np.concatenate([[0.0], pos])
    if len(vals) > MAX_GRID:
        raise QueryError(f"the grid would hold {len(vals)} candidates, more than {MAX_GRID}; use fewer decades.")
    return CoarseGrid(-m if signed else 0.0, m, tuple(float(v) for v in vals), GridScale.LOG, p)


def range_grid(lower: float, upper: float, *, scale: GridScale | str = GridScale.LOG,
               decades: int = DEFAULT_DECADES, per_decade: int = DEFAULT_PER_DECADE,
               points: int = DEFAULT_LINEAR_POINTS) -> CoarseGrid:
    """The public grid over a coarse range [A, B] the owner gives.

    ``log``: the symmetric log grid of :func:`magnitude_grid` at magnitude max(|A|, |B|)
    (signed when A < 0), kept inside (A, B), with A and B added. ``linear``: ``points``
    equally spaced candidates.

    Examples
    --------
    >>> range_grid(5.0, 1000.0, decades=3, per_decade=1).values
    (5.0, 10.0, 100.0, 1000.0)
    >>> range_grid(0.0, 10.0, scale="linear", points=3).values
    (0.0, 5.0, 10.0)
    """
    for v, name in ((lower, "lower"), (upper, "upper")):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise QueryError(f"{name} (the coarse range) must be a finite number; got {type(v).__name__}.")
    a, b = float(lower), float(upper)
    if not a < b:
        raise QueryError(f"the coarse range needs lower < upper; got [{a:g}, {b:g}]. Give a public range the values "
                         "are known to lie in.")
    try:
        sc = GridScale(scale)
    except ValueError as exc:
        raise QueryError(f"scale must be one of {[s.value for s in GridScale]}; got {scale!r}.") from exc
    if sc is GridScale.LINEAR:
        k = _count(points, "points", 2, MAX_GRID)
        return CoarseGrid(a, b, tuple(float(v) for v in np.linspace(a, b, k)), sc)
    base = magnitude_grid(max(abs(a), abs(b)), signed=a < 0, decades=decades, per_decade=per_decade)
    inner = [v for v in base.values if a < v < b]
    return CoarseGrid(a, b, (a, *inner, b), sc, base.per_decade)


def _levels(levels: Sequence[Any] | None) -> tuple[float, float]:
    lv = tuple(DEFAULT_LEVELS if levels is None else levels)
    if len(lv) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in lv):
        raise QueryError(f"levels must be two quantile levels (low, high), e.g. 0.01 0.99; got {list(lv)!r}.")
    lo, hi = float(lv[0]), float(lv[1])
    if not (0 <= lo < hi <= 1 and (lo > 0 or hi < 1)):
        raise QueryError(f"levels must satisfy 0 ≤ low < high ≤ 1 with one of them inside (0, 1); got {lo:g}, "
                         f"{hi:g}. E.g. 0.01 0.99, or 0 0.999 to keep the coarse range's lower end as L.")
    return lo, hi


def released_levels(levels: Sequence[float]) -> tuple[float, ...]:
    """The levels a suggestion releases: those inside (0, 1) (0 and 1 are the coarse range's
    own ends, public, released by no query)."""
    return tuple(a for a in levels if 0 < a < 1)


@dataclass(frozen=True, slots=True)
class LevelPrediction:
    """Predicted accuracy of one level of a suggestion (data-independent).

    ``rank_rmse`` and ``rank_bound_95`` are fractions of n (the quantile statistic's own
    prediction); ``resolution`` the grid's spacing in words.
    """

    alpha: float
    rank_rmse: float
    rank_bound_95: float

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "rank_rmse": self.rank_rmse, "rank_bound_95": self.rank_bound_95}


@dataclass(frozen=True, slots=True)
class SuggestionPlan:
    """A bounds suggestion before release: its schema (the column's bounds = the coarse
    range), its one quantile query, its plan at ``epsilon``, and its prediction."""

    column: str
    epsilon: float
    levels: tuple[float, float]
    grid: CoarseGrid
    schema: Schema
    query: Query
    plan: Plan
    predictions: tuple[LevelPrediction, LevelPrediction]
    tuned: PurposeLevels | None = None  # the purpose the levels were tuned for, if any

    @property
    def rank_bound_95(self) -> float:
        """The larger 95% rank bound of the two levels (a fraction of n)."""
        return max(p.rank_bound_95 for p in self.predictions)

    def words(self) -> str:
        """What the suggestion will spend and how accurate it will be, before release."""
        rel = [p for p in self.predictions if 0 < p.alpha < 1]
        ends = [("lower" if p.alpha == 0 else "upper", self.grid.lower if p.alpha == 0 else self.grid.upper)
                for p in self.predictions if not 0 < p.alpha < 1]
        kept = "".join(f" The {w} bound is the coarse range's own {v:g} (public, nothing released)." for w, v in ends)
        return (f"Spends ε = {self.epsilon:g} of the lifetime budget (recorded in the ledger like any release). "
                f"Releases the {' and '.join(f'{p.alpha:g}' for p in rel)} quantile(s) of {self.column!r} by the "
                f"exponential mechanism on the public {self.grid.resolution()}.{kept} Predicted rank error: "
                f"at most {' / '.join(f'{_pct(p.rank_bound_95)}' for p in rel)} of the rows 19 times in 20 "
                f"(typically {' / '.join(_pct(p.rank_rmse) for p in rel)}); in {self.column!r} units each bound "
                "is a grid point within one grid step of the true quantiles at those levels ± that rank error."
                + ("" if self.tuned is None else " " + self.tuned.words(self.column)))

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "epsilon": self.epsilon, "levels": list(self.levels),
                "grid": self.grid.to_dict(), "predictions": [p.to_dict() for p in self.predictions],
                "purpose": None if self.tuned is None else self.tuned.to_dict(), "words": self.words()}


def _pct(v: float) -> str:
    return "under 0.01%" if v < 1e-4 else f"{100 * v:.2g}%"


def suggestion_schema(schema: Schema, column: str, grid: CoarseGrid) -> Schema:
    """``schema`` with ``column``'s bounds replaced by the grid's public coarse range (and no
    bounds source): the schema the suggestion is planned and released under."""
    col = _numeric_column(schema, column)
    cols = tuple(dataclasses.replace(c, lower=grid.lower, upper=grid.upper, bounds_source=None)
                 if c.name == col.name else c for c in schema.columns)
    return dataclasses.replace(schema, columns=cols)


def _numeric_column(schema: Schema, column: Any) -> Any:
    if not isinstance(column, str) or not column:
        raise QueryError("column must name a numeric column of the schema; got none.")
    if column not in schema.names:
        raise QueryError(f"column {column!r} is not declared in the schema; declared columns: {list(schema.names)}. "
                         "Pick one of them.")
    col = schema.column(column)
    if col.kind is not ColumnKind.NUMERIC:
        raise QueryError(f"column {column!r} is {col.kind.value}, not numeric: bounds are suggested for numeric "
                         "columns only. Pick a numeric column.")
    return col


def plan_suggestion(
    schema: Schema,
    column: str,
    epsilon: Any,
    *,
    levels: Sequence[Any] | None = None,
    magnitude: float | None = None,
    signed: bool = False,
    lower: float | None = None,
    upper: float | None = None,
    scale: GridScale | str = GridScale.LOG,
    per_decade: int = DEFAULT_PER_DECADE,
    decades: int = DEFAULT_DECADES,
    rule: CompositionRule | str = CompositionRule.BASIC,
    purpose: Purpose | None = None,
) -> SuggestionPlan:
    """Plan a bounds suggestion (no data read): the grid, the schema, the quantile query,
    the plan at ``epsilon`` (the levels share it equally) and the predicted accuracy.

    Give either ``magnitude`` (log grid, :func:`magnitude_grid`) or ``lower`` and ``upper``
    (:func:`range_grid`). Needs the schema's public row count (the rank-error prediction).
    A level 0 (or 1) keeps the coarse range's lower (upper) end as the bound: for values
    known to be ≥ 0, ``levels=(0, 0.999)`` spends the whole ε on the upper bound.

    ``purpose`` (a mean or a sum of the column and the ε it will spend) tunes the levels
    to it instead (:func:`planner.planning.bounds_purpose.purpose_levels`, public inputs
    only); give either it or ``levels``. Without either, the fixed :data:`DEFAULT_LEVELS`.

    Raises
    ------
    QueryError
        A column that is not declared or not numeric, ε ≤ 0, a magnitude ≤ 0, both or
        neither of magnitude and range, bad levels — each naming the field.
    """
    _numeric_column(schema, column)
    eps = _positive(epsilon, "epsilon", "Give the small ε the suggestion may spend, e.g. 0.05.")
    if purpose is not None and levels is not None:
        raise QueryError("give either levels (fixed quantile levels) or a purpose (the mean or sum the bounds are "
                         "for, which chooses the levels), not both.")
    lv = _levels(levels) if purpose is None else (0.0, 0.5)  # replaced below, once the grid is known
    if magnitude is not None and (lower is not None or upper is not None):
        raise QueryError("give either a magnitude or a coarse range (lower and upper), not both.")
    if magnitude is not None:
        grid = magnitude_grid(magnitude, signed=signed, decades=decades, per_decade=per_decade)
    elif lower is not None and upper is not None:
        grid = range_grid(lower, upper, scale=scale, decades=decades, per_decade=per_decade)
    else:
        raise QueryError("a bounds suggestion needs a public coarse range: give magnitude (e.g. 1e6, values up "
                         "to about a million) or both lower and upper.")
    coarse = suggestion_schema(schema, column, grid)
    if coarse.public_n is None:
        raise QueryError("public_n: predicting the suggestion's rank error needs the public row count; declare "
                         "'public_n' (an approximate, public number of rows) in the schema.")
    tuned = None
    if purpose is not None:
        tuned = purpose_levels(schema, column, purpose, grid.lower, rule)
        lv = _levels(tuned.levels)
    q = Query(QUERY_ID, QueryKind.QUANTILE, column, "exponential",
              options={"alphas": list(released_levels(lv)), "grid": grid.values})
    p = plan_equal([q], coarse, eps, 0.0, rule)
    preds = {pr.part: pr for pr in p.predictions}
    # a level 0 or 1 is the coarse range's end: exact, nothing released
    lp = tuple(LevelPrediction(a, float(preds[f"quantile@{a:g}"].rmse), float(preds[f"quantile@{a:g}"].error_bound_95))
               if 0 < a < 1 else LevelPrediction(a, 0.0, 0.0) for a in lv)
    assert len(lp) == 2
    return SuggestionPlan(column, eps, lv, grid, coarse, q, p, (lp[0], lp[1]), tuned)


def bounds_from_answers(levels: Sequence[float], released: dict[float, float], grid: CoarseGrid) -> tuple[float, float]:
    """[L, U] from the released quantiles by level (post-processing); a level 0 or 1 is the
    grid's own end. :class:`~planner.core.errors.PlannerError` when a level has no answer."""
    vals: list[float] = []
    for a in levels:
        if a == 0:
            vals.append(grid.lower)
        elif a == 1:
            vals.append(grid.upper)
        elif a in released:
            vals.append(float(released[a]))
        else:
            raise PlannerError(f"the suggestion holds no released quantile at level {a:g}; ask again.")
    return bounds_from_quantiles(vals[0], vals[1], grid)


def bounds_from_quantiles(low: float, high: float, grid: CoarseGrid) -> tuple[float, float]:
    """[L, U] from the two released quantiles (post-processing): (low, high) when
    low < high, else widened to the neighbouring grid points so that L < U.

    Examples
    --------
    >>> g = range_grid(0.0, 10.0, scale="linear", points=11)
    >>> bounds_from_quantiles(2.0, 7.0, g)
    (2.0, 7.0)
    >>> bounds_from_quantiles(3.0, 3.0, g)
    (2.0, 4.0)
    """
    if low < high:
        return float(low), float(high)
    lo = grid.neighbours(min(low, high))[0]
    hi = grid.neighbours(max(low, high))[1]
    if not lo < hi:
        raise PlannerError("the grid has a single candidate; give a wider coarse range.")
    return lo, hi


def bounds_source(plan: SuggestionPlan, release_id: int, epsilon_spent: float) -> BoundsSource:
    """The schema's record that the bounds came from this suggestion's release."""
    tuned = plan.tuned
    return BoundsSource(BoundsSourceKind.DP_QUANTILES, int(release_id), float(epsilon_spent), plan.levels,
                        (plan.grid.lower, plan.grid.upper), min(plan.rank_bound_95, 1.0),
                        None if tuned is None else tuned.purpose.statistic,
                        None if tuned is None else tuned.purpose.epsilon)


def apply_bounds(schema: Schema, column: str, lower: float, upper: float, source: BoundsSource | None) -> Schema:
    """``schema`` with ``column``'s bounds set to [lower, upper] and their source recorded."""
    col = _numeric_column(schema, column)
    cols = tuple(dataclasses.replace(c, lower=float(lower), upper=float(upper), bounds_source=source)
                 if c.name == col.name else c for c in schema.columns)
    return dataclasses.replace(schema, columns=cols)


# --------------------------------------------------------------------------- clipping bias


@dataclass(frozen=True, slots=True)
class ClippingBias:
    """Data-independent bounds on the bias clipping into [lower, upper] adds to a mean.

    ``mean_low`` ≤ mean(clip(x)) − mean(x) ≤ ``mean_high`` whenever every value lies in the
    public outer range ``outer`` and at most ``below`` / ``above`` of them (fractions) lie
    below L / above U. Infinite when no outer range is known. ``basis`` says which case.
    """

    lower: float
    upper: float
    outer: tuple[float, float] | None
    below: float
    above: float
    mean_low: float
    mean_high: float
    basis: str

    @property
    def mean_abs(self) -> float:
        """The largest |bias| of the mean."""
        return max(abs(self.mean_low), abs(self.mean_high))

    def sum_abs(self, n: int) -> float:
        """The largest |bias| of the sum over n rows."""
        return n * self.mean_abs

    def to_dict(self) -> dict[str, Any]:
        return {"lower": self.lower, "upper": self.upper, "outer": None if self.outer is None else list(self.outer),
                "below": self.below, "above": self.above, "mean_low": _finite(self.mean_low),
                "mean_high": _finite(self.mean_high), "basis": self.basis}


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def clipping_bias_bound(lower: float, upper: float, *, outer: tuple[float, float] | None = None,
                        below: float = 1.0, above: float = 1.0, basis: str = "worst case") -> ClippingBias:
    """The bias of a mean clipped into [lower, upper] (module docstring; data-independent).

    Examples
    --------
    Values known in [0, 100], bounds [10, 50], at most 1% below and 1% above (by hand:
    −0.01·50 = −0.5 and 0.01·10 = 0.1):

    >>> b = clipping_bias_bound(10.0, 50.0, outer=(0.0, 100.0), below=0.01, above=0.01)
    >>> round(b.mean_low, 9), round(b.mean_high, 9)
    (-0.5, 0.1)
    >>> clipping_bias_bound(10.0, 50.0).mean_abs  # no public outer range: unbounded
    inf
    """
    lo, hi = float(lower), float(upper)
    pb, pa = min(max(float(below), 0.0), 1.0), min(max(float(above), 0.0), 1.0)
    if outer is None:
        return ClippingBias(lo, hi, None, pb, pa, -math.inf if pa > 0 else 0.0, math.inf if pb > 0 else 0.0,
                            basis + ", no public outer range: unbounded")
    a, b = float(outer[0]), float(outer[1])
    return ClippingBias(lo, hi, (a, b), pb, pa, -pa * max(b - hi, 0.0), pb * max(lo - a, 0.0), basis)


def column_clipping_bias(schema: Schema, column: str, outer: tuple[float, float] | None = None) -> ClippingBias:
    """The clipping bias of a mean of ``column`` under its declared bounds (data-independent):
    from its :class:`~planner.data.schema.BoundsSource` when the bounds came from DP
    quantiles at levels (a, b) over a coarse range (p_lo = a + r, p_hi = 1 − b + r, r the
    suggestion's predicted 95% rank bound; a 95% statement), else the worst case over the
    public outer range ``outer`` (unbounded without one)."""
    col = _numeric_column(schema, column)
    lo, hi = col.bounds
    src = col.bounds_source
    if src is not None and src.coarse is not None and outer is None:
        r = src.rank_error_95 or 0.0
        a, b = src.levels
        # a level 0 or 1 is the coarse range's own end: nothing in [A, B] lies beyond it
        below = 0.0 if a == 0 else min(a + r, 1.0)
        above = 0.0 if b == 1 else min(1 - b + r, 1.0)
        return clipping_bias_bound(lo, hi, outer=src.coarse, below=below, above=above,
                                   basis=f"bounds from DP quantiles at levels {a:g}, {b:g} (95%: at most "
                                         f"{100 * below:.3g}% below L and {100 * above:.3g}% above U, values in "
                                         f"[{src.coarse[0]:g}, {src.coarse[1]:g}])")
    return clipping_bias_bound(lo, hi, outer=outer, basis="worst case")


@dataclass(frozen=True, slots=True)
class ClippingOnData:
    """DATA-DEPENDENT (owner only, never exported): what clipping into [lower, upper] does
    to the rows of one column. ``mean_bias`` = mean(clip(x)) − mean(x)."""

    n: int
    below: int
    above: int
    mean_bias: float
    sum_bias: float
    label: str = DATA_DEPENDENT

    @property
    def clipped_fraction(self) -> float:
        return (self.below + self.above) / self.n if self.n else 0.0

    def words(self, column: str) -> str:
        return (f"On your raw rows, {self.below:,} value(s) of {column!r} lie below L and {self.above:,} above U "
                f"({100 * self.clipped_fraction:.3g}% of {self.n:,}); clipping moves their mean by "
                f"{self.mean_bias:.4g} and their sum by {self.sum_bias:.4g} (before contribution bounding and "
                "missing-value replacement).")


def clipping_on_data(values: npt.ArrayLike, lower: float, upper: float) -> ClippingOnData:
    """DATA-DEPENDENT: the clipped mass and the bias clipping adds to the mean and the sum,
    on the rows themselves (missing and non-finite values left out). For the owner's eyes
    only; never part of a release or an export.

    Examples
    --------
    >>> r = clipping_on_data([1.0, 5.0, 20.0], 2.0, 10.0)  # clipped to 2, 5, 10
    >>> r.below, r.above, round(r.sum_bias, 9)
    (1, 1, -9.0)
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    lo, hi = float(lower), float(upper)
    c = np.clip(x, lo, hi)
    n = int(x.size)
    sb = float(np.sum(c - x)) if n else 0.0
    return ClippingOnData(n, int(np.sum(x < lo)), int(np.sum(x > hi)), sb / n if n else 0.0, sb)


#: The kinds whose answer a clipping bias moves: a sum (by n × the mean's bias) and a mean.
_BIASED: Final = {QueryKind.SUM: "sum", QueryKind.GROUPED_SUM: "sum", QueryKind.MEAN: "mean",
                  QueryKind.GROUPED_MEAN: "mean"}


@dataclass(frozen=True, slots=True)
class ClippingView:
    """What the Accuracy page shows beside the noise for one query (data-independent):
    the bias bound of its answer in the answer's units, and the words saying on what basis."""

    query_id: str
    column: str
    answer: str  # "sum" or "mean"
    bias: ClippingBias
    low: float  # bias of the answer, lower end (may be −inf)
    high: float  # upper end (may be +inf)
    words: str

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)


def clipping_view(query: Query, schema: Schema, outer: tuple[float, float] | None = None) -> ClippingView | None:
    """The predicted clipping bias of ``query``'s answer under the declared bounds, or
    ``None`` for a query clipping does not bias that way (counts, histograms; a quantile
    inside the bounds is unchanged by clipping). Data-independent: the declared bounds,
    their :class:`~planner.data.schema.BoundsSource` or the public ``outer`` range, and the
    public n for a sum."""
    kind = _BIASED.get(query.kind)
    if kind is None or query.column is None:
        return None
    b = column_clipping_bias(schema, query.column, outer)
    per = "per group " if query.kind in (QueryKind.GROUPED_SUM, QueryKind.GROUPED_MEAN) else ""
    if kind == "sum":
        n = schema.public_n
        if n is None:
            return ClippingView(query.id, query.column, kind, b, -math.inf, math.inf,
                                "The bias of a sum is n times the bias of the mean: declare the public n to see it.")
        low, high = n * b.mean_low, n * b.mean_high
    else:
        low, high = b.mean_low, b.mean_high
    if math.isfinite(low) and math.isfinite(high):
        words = (f"Clipping {query.column!r} into [{b.lower:g}, {b.upper:g}] moves the {per}{kind} by between "
                 f"{low:.4g} and {high:.4g}: {b.basis}.")
    else:
        words = (f"Clipping {query.column!r} into [{b.lower:g}, {b.upper:g}] may move the {per}{kind} by any amount: "
                 "without a public range every value is known to lie in, nothing limits how far beyond the bounds a "
                 "value lies. Bounds suggested from DP quantiles (Data page) record their coarse range and the share "
                 "of rows they cut, which bounds it.")
    return ClippingView(query.id, query.column, kind, b, low, high, words)


def column_values(values: Any) -> npt.NDArray[np.float64]:
    """DATA-DEPENDENT helper: a raw column as finite floats (text and missing cells left out)."""
    import pandas as pd

    x = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64)
    return np.asarray(x[np.isfinite(x)], dtype=np.float64)


def parse_coarse(text: str) -> dict[str, float]:
    """The owner's public coarse range as typed: one number M (values up to about M:
    ``{"magnitude": M}``) or two numbers ``A, B`` (``{"lower": A, "upper": B}``).

    Examples
    --------
    >>> parse_coarse("1e6"), parse_coarse("-10, 250")
    ({'magnitude': 1000000.0}, {'lower': -10.0, 'upper': 250.0})
    """
    parts = [p.strip() for p in str(text).replace(";", ",").split(",") if p.strip()]
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        nums = []
    if len(nums) not in (1, 2) or not all(math.isfinite(v) for v in nums):
        raise QueryError(f"coarse range: give one number (values up to about it, e.g. 1e6) or two numbers 'A, B' "
                         f"(a public range the values lie in); got {str(text)[:40]!r}.")
    return {"magnitude": nums[0]} if len(nums) == 1 else {"lower": nums[0], "upper": nums[1]}


def parse_levels(text: str) -> tuple[float, float]:
    """Two quantile levels as typed, ``"0.01, 0.99"`` (validated like :func:`plan_suggestion`'s)."""
    parts = [p.strip() for p in str(text).replace(";", ",").split(",") if p.strip()]
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        nums = []
    if len(nums) != 2:
        raise QueryError(f"levels: give two levels 'low, high', e.g. 0.01, 0.99; got {str(text)[:40]!r}.")
    return _levels(nums)
