"""Quantiles and the median: the exponential mechanism on ranks over a declared grid.

The candidates t₁ < … < t_k are declared (a number of candidates over [L, U], or a step);
each level α = a/b (lowest terms) is released by report-noisy-max on the integer rank
scores (:func:`quantile_scores`)

    u_t = −max(b·#{x < t} − a·n, a·n − b·#{x ≤ t}, 0),

b times the distance from the target rank α·n to the ranks [#{x < t}, #{x ≤ t}] the
candidate t holds: 0 exactly when t is an α-quantile of the data (the smallest t with
#{x ≤ t} ≥ α·n, numpy's ``inverted_cdf``, holds α·n), one selection per level. Without
ties (no value equal to a candidate) it is −|b·#{x ≤ t} − a·n|, which is also Smith
(2011)'s −|(b − a)·#{x < t} − a·#{x > t}| as OpenDP's ``make_quantile_score_candidates``
computes it. With ties (whole numbers on an integer grid, values clipped to a bound) both
of those misplace the optimum: −|b·#{x ≤ t} − a·n| counts every tie below t and
released the candidate below the true median of whole-number data at any ε (before
issue 18); Smith's score is 0 where #{x < t}/(#{x < t} + #{x > t}) = α, ignoring the
ties, and OpenDP's ``make_private_quantile`` released a 10th percentile of ages one year
off at every ε in the issue-18 benchmark. The aggregate therefore carries #{x = t}
besides #{x ≤ t} (:class:`RankCounts`, from two requests: :func:`rank_requests`, :func:`rank_counts`).

Sensitivity of the scores (c = rows per privacy unit). Claim: ‖u(x) − u(x')‖∞ ≤ c·b
under substitution and ≤ c·max(a, b − a) under add/remove. Proof. u_t = −max(f_t, g_t, 0)
with f_t = b·#{x < t} − a·n and g_t = a·n − b·#{x ≤ t}; a maximum of functions that each
move by at most d moves by at most d, so it suffices to bound f_t and g_t. Adding one
row moves f_t by b − a (the row is < t) or −a (≥ t), and g_t by a − b (≤ t) or +a
(> t); removing one row gives the opposite signs. Adding a unit's k ≤ c rows moves each
by a sum of k terms of magnitude ≤ max(a, b − a), and removing likewise: c·max(a, b − a).
Substituting one unit removes k₁ ≤ c rows and adds k₂ ≤ c: f_t's positive terms total
at most k₁·a + k₂·(b − a) ≤ c·b and its negative ones at least −c·b, and g_t's likewise.
∎ In rank units (÷ b) the add/remove sensitivity is c·max(α, 1 − α): c/2 for the median,
half the c·b/b = c of substitution — the same as OpenDP's ``make_private_quantile`` (its
``score_candidates_map``: d_in·max(a, b − a) unsized, (d_in // 2)·b sized), so the noise
is the same at the same ε (``tests/engine/test_accuracy_vs_opendp.py``).

The scores are not monotone (adding a row moves some up and others down), so the
selection pays the factor 2 of report-noisy-max: the noise scale on the integer scores
is 2·d/ε with d the sensitivity above; under RDP, zCDP and the optimal accountant the
noise is Gumbel (the exponential mechanism exactly: bounded range, ε²/8-zCDP [CR21], whose
privacy loss distribution the optimal accountant composes [DDR20]), under basic and
advanced composition it is exponential (permute-and-flip [MS20], never worse, ε-DP and no
more: those rules read only each answer's ε). On a grid the inverse sensitivity mechanism
for a quantile is this same exponential mechanism on ranks (Asi & Duchi 2020), so it is
not offered separately.

Prediction (rank error as a fraction of n, data-independent): under the uniform-spacing
model of :func:`planner.planning.mechanisms.exponential.quantile_rank_rmse` at the effective
ε/Δ_rank (exact for evenly spread data with Gumbel noise; permute-and-flip does at least
as well); the 95% bound is the union bound (2Δ_rank/ε)·ln(k/β) on the excess rank error,
capped at n (no rank error is larger).

References
----------
.. [CR21] M. Cesar, R. Rogers, "Bounding, Concentrating, and Truncating: Unifying Privacy
   Loss Composition for Data Analytics", ALT 2021 (the exponential mechanism is ε²/8-zCDP).
.. [DDR20] J. Dong, D. Durfee, R. Rogers, "Optimal Differential Privacy Composition for
   Exponential Mechanisms", ICML 2020 (bounded-range mechanisms and their composition).
.. [MS20] R. McKenna, D. Sheldon, "Permute-and-Flip: A new mechanism for differentially
   private selection", NeurIPS 2020.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError, ReleaseError
from planner.data import requests as rq
from planner.data.requests import BinCounts, QuantileAggregate, Result
from planner.data.schema import ColumnKind, Relation, Schema
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.queries import DEFAULT_CANDIDATES, MAX_GRID, Query, QueryKind, QueryPart
from planner.planning.statistics.base import (
    BETA,
    Aggregate,
    AnswerRow,
    FloatArray,
    ItemRelease,
    MechanismSpec,
    OptionSpec,
    OptionType,
    Part,
    Prediction,
    Statistic,
    column_of,
    need_public_n,
    one_draw,
    prediction,
    wrong_aggregate,
)
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.planning.allocation import Family, ItemAllocation
    from planner.privacy.noise import Component

M = MechanismName
_I64_MAX: Final = 2**63 - 1

EM_SPEC: Final = MechanismSpec(
    M.EXPONENTIAL, "Exponential mechanism",
    "Selects a candidate with probability falling exponentially in its rank error (report-noisy-max).")
NOT_ISM: Final = ("on a grid of candidates the inverse sensitivity mechanism for a quantile is the exponential "
                  "mechanism on ranks (Asi & Duchi 2020): use 'exponential' (the Accuracy page's owner-only view "
                  "simulates the continuous inverse sensitivity mechanism on your data).")
CANDIDATES = OptionSpec("candidates", OptionType.INT, "Number of candidates",
                        f"Equally spaced candidate answers over the declared bounds (default {DEFAULT_CANDIDATES}).",
                        minimum=2, maximum=MAX_GRID)
STEP = OptionSpec("step", OptionType.FLOAT, "Candidate spacing",
                  "Alternative to a number of candidates: L, L + step, …, U.", minimum=0.0, open_bounds=True)
GRID = OptionSpec("grid", OptionType.FLOATS, "Candidate values",
                  "Alternative to a number of candidates: the public candidates themselves, increasing, "
                  "inside the bounds (e.g. a log-scale grid: 0, 1, 10, 100, …).", min_items=2, max_items=MAX_GRID)


def alpha_fraction(alpha: float) -> Fraction:
    """α as a/b in lowest terms from its shortest decimal form (0.1 → 1/10)."""
    fr = Fraction(repr(float(alpha)))
    if fr.denominator > 10**6:
        fr = fr.limit_denominator(10**6)
    return fr


def candidate_grid(q: Query, schema: Schema) -> FloatArray:
    """The declared candidate grid over [L, U] (increasing).

    ``candidates`` k gives ``linspace(L, U, k)``; ``step`` s gives L, L + s, … and U
    (U appended if the last step falls short); ``grid`` is the public candidates themselves
    (strictly increasing, inside [L, U]); none of them gives ``DEFAULT_CANDIDATES``.
    """
    if q.kind not in (QueryKind.QUANTILE, QueryKind.MEDIAN, QueryKind.GROUPED_QUANTILE) or q.column is None:
        raise QueryError(f"{q.where}: only quantile and median queries have candidates.")
    lo, hi = column_of(q, schema).bounds
    given = q.option("grid")
    if given is not None:
        g = np.asarray(given, dtype=np.float64)
        if g[0] < lo or g[-1] > hi:
            raise QueryError(f"{q.where}: option 'grid' runs from {g[0]:g} to {g[-1]:g}, outside the column's "
                             f"declared bounds [{lo:g}, {hi:g}]; keep the candidates inside the bounds.")
        return g
    step = q.option("step")
    if step is not None:
        span = (hi - lo) / step + 1e-9  # inf when the step is tiny beside the bounds
        if not span + 2 <= MAX_GRID:
            raise QueryError(
                f"{q.where}: step {step:g} gives more than {MAX_GRID} candidates over [{lo:g}, {hi:g}]; use a larger step."
            )
        k = math.floor(span)
        grid = lo + step * np.arange(k + 1, dtype=np.float64)
        if grid[-1] < hi:
            grid = np.append(grid[grid < hi], hi)
        return np.asarray(grid, dtype=np.float64)
    n = q.option("candidates") or DEFAULT_CANDIDATES
    return np.linspace(lo, hi, int(n), dtype=np.float64)


def score_sensitivity(alpha: float, schema: Schema) -> int:
    """L∞ sensitivity of the integer scores at level α = a/b (module docstring):
    c·max(a, b − a) under add/remove, c·b under substitution."""
    fr = alpha_fraction(alpha)
    a, b = fr.numerator, fr.denominator
    return schema.c * (b if schema.relation is Relation.SUBSTITUTE else max(a, b - a))


def rank_sensitivity(alpha: float, schema: Schema) -> float:
    """The score sensitivity in rank units (÷ b)."""
    return score_sensitivity(alpha, schema) / alpha_fraction(alpha).denominator


@dataclass(frozen=True, slots=True)
class RankCounts(QuantileAggregate):
    """Counts on a candidate grid for the rank scores: the backend's
    :class:`~planner.data.requests.QuantileAggregate` (``counts``: values whose smallest
    candidate ≥ the value is t_i, so #{x ≤ t_i} is their cumulative sum) and ``ties``,
    #{x = t_i}. Private, like every aggregate.
    """

    ties: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        QuantileAggregate.__post_init__(self)
        if len(self.ties) != len(self.counts):
            raise QueryError("quantile ties and counts must have the same length.")
        if any(t < 0 or t > c for t, c in zip(self.ties, self.counts, strict=True)):
            raise QueryError("a candidate's ties cannot exceed the values counted at it.")

    @property
    def counts_lt(self) -> npt.NDArray[np.int64]:
        """#{x < t_i} for each candidate."""
        return np.asarray(self.counts_le - np.asarray(self.ties, dtype=np.int64), dtype=np.int64)


def rank_requests(column: str, grid: npt.NDArray[np.float64]) -> tuple[rq.Candidates, rq.Bins]:
    """The two requests #{x ≤ t} and #{x = t} on the grid come from: the candidate counts,
    and bin counts over the edges t₁ < … < t_k < t_k + (t_k − t_{k−1}) (bin i is
    [t_i, t_{i+1}), so the counts below bin i are #{x < t_i}; every clipped value is ≤ U ≤
    t_k and lands in a bin). A SQL backend counts both with one key in one statement."""
    g = tuple(float(t) for t in grid)
    top = g[-1] + (g[-1] - g[-2] if len(g) > 1 else 1.0)
    return rq.Candidates(column, g), rq.Bins(column, (*g, top))


def rank_counts(results: Sequence[Result]) -> RankCounts:
    """:class:`RankCounts` from the results of :func:`rank_requests` (in that order)."""
    le, bins = results
    if not isinstance(le, QuantileAggregate) or not isinstance(bins, BinCounts):
        raise QueryError("a quantile's rank counts need candidate counts and bin counts.")
    lt = np.concatenate([[0], np.cumsum(np.asarray(bins.counts, dtype=np.int64))[:-1]])
    ties = le.counts_le - lt
    return RankCounts(le.candidates, le.counts, le.dropped, tuple(int(t) for t in ties))


def quantile_scores(agg: QuantileAggregate, a: int, b: int) -> npt.NDArray[np.int64]:
    """Integer rank scores u_t = −max(b·#{x < t} − a·n, a·n − b·#{x ≤ t}, 0) for α = a/b
    (gcd(a, b) = 1): b times the distance from rank α·n to the ranks t holds.

    A plain :class:`~planner.data.requests.QuantileAggregate` carries no ties: it is read
    as values strictly between candidates (#{x < t} = #{x ≤ t}), which is what a hand-made
    aggregate of spread-out data means; a release reads :class:`RankCounts` (the
    statistic's own aggregate) and refuses anything else.

    Examples
    --------
    >>> agg = QuantileAggregate((0.0, 1.0, 2.0), (1, 2, 1))  # #{x ≤ t} = 1, 3, 4; n = 4
    >>> quantile_scores(agg, 1, 2).tolist()  # no ties: −|2·#{x ≤ t} − 4|
    [-2, -2, -4]
    >>> tied = RankCounts((0.0, 1.0, 2.0), (1, 2, 1), 0, (1, 2, 0))  # data 0, 1, 1, 1.5
    >>> quantile_scores(tied, 1, 2).tolist()  # #{x < t} = 0, 1, 4; #{x ≤ t} = 1, 3, 4
    [-2, 0, -4]
    """
    le = agg.counts_le.astype(np.int64)
    lt = agg.counts_lt if isinstance(agg, RankCounts) else le
    n = int(agg.n)
    if b * max(n, 1) > _I64_MAX // 4:
        raise ReleaseError("the quantile's rank scores do not fit in 64-bit integers; use a simpler alpha (e.g. 0.9).")
    above = b * lt - a * n
    below = a * n - b * le
    return np.asarray(-np.maximum(np.maximum(above, below), 0), dtype=np.int64)


#: The rules that account an exponential-mechanism item by its bounded-range privacy loss
#: (``ExponentialEvent``: ρ = ε²/8 under RDP and zCDP [CR21]; the bounded-range privacy loss
#: distribution under the optimal accountant [DDR20]). Only the exponential mechanism itself
#: (Gumbel noise) has that loss; permute-and-flip is ε-DP and no more, so under these rules
#: the release must draw Gumbel noise for the ledger to record what the plan accounted.
BOUNDED_RANGE_RULES = frozenset({CompositionRule.RDP, CompositionRule.ZCDP, CompositionRule.PLD})


def selection_noise(family: Family, rule: CompositionRule) -> str:
    """Gumbel (the exponential mechanism, bounded range, ε²/8-zCDP) under the rules of
    :data:`BOUNDED_RANGE_RULES` for an exponential-mechanism item; exponential noise
    (permute-and-flip [MS20], pure ε, at least as accurate) under basic and advanced
    composition, which read only each answer's ε."""
    # the allocator (and the accountants) are imported after a release's first read
    from planner.planning.allocation import Family

    if family is Family.EXPONENTIAL and rule in BOUNDED_RANGE_RULES:
        return "gumbel"
    return "exponential"


def check_distinct_levels(alphas: Sequence[float] | None, where: str) -> None:
    """Refuse levels that repeat, or that are one level as the planner names them: a level's
    answer is the part ``quantile@<α:g>`` (6 significant digits), so 0.5 and
    0.5000000000000001 would be one answer twice."""
    if alphas is None:
        return
    seen: dict[str, float] = {}
    for a in alphas:
        name = f"{a:g}"
        if name in seen:
            same = "repeats" if seen[name] == a else f"and {seen[name]!r} are the same level to 6 significant digits"
            raise QueryError(f"{where}: alphas must not repeat: {a!r} {same}; keep one.")
        seen[name] = a


def _level(part: Part) -> float:
    return float(part.label.split("@")[1]) if "@" in part.label else 0.5


def level_prediction(part: Part, share: ItemAllocation, rule: CompositionRule, *, d_int: int, b: int, k: int,
                     n: float, unit: str) -> Prediction:
    """The prediction of one quantile level: integer-score sensitivity ``d_int`` at
    denominator ``b`` (rank sensitivity d_int/b), ``k`` candidates, ``n`` rows (module
    docstring); the scores' noise scale is 2·d_int/ε."""
    eff = share.theta / (d_int / b)
    score_scale = 2.0 * d_int / share.theta
    noise_kind = selection_noise(part.item.family, rule)
    rmse = float(em.quantile_rank_rmse(eff, k, max(round(n), 1), _level(part))[()]) / n
    # The union bound grows without limit as ε → 0, but no answer errs by more than the
    # whole table: ranks lie in [0, n], so a rank error is at most n (all rows tied at one
    # candidate can reach it), and min(·, 1) is still a 95% bound, for any data.
    bound = min(float(em.quantile_rank_error_bound(eff, k, BETA)[()]) / n, 1.0)
    return prediction(part, share, noise={"epsilon": share.theta, "candidates": float(k),
                                          f"{noise_kind}_scale": score_scale},
                      scales={"scores": score_scale}, rmse=rmse, bound=bound, unit=unit,
                      bound_kind="model" if noise_kind == "gumbel" else "at most")


def level_component(d_int: int, share: ItemAllocation, family: Family, rule: CompositionRule) -> Component:
    """The report-noisy-max measurement of one level: scale 2·d_int/ε, Gumbel noise under
    RDP, zCDP and the optimal accountant, exponential noise otherwise."""
    from planner.privacy.noise import (  # OpenDP is imported on the first release only
        Measure,
        noisy_max,
    )

    gumbel = selection_noise(family, rule) == "gumbel"
    return noisy_max("scores", d_int, 2.0 * d_int / share.theta, Measure.ZCDP if gumbel else Measure.MAX_DIVERGENCE)


class Quantile(Statistic):
    kind: ClassVar[QueryKind] = QueryKind.QUANTILE
    label: ClassVar[str] = "Quantiles"
    summary: ClassVar[str] = "Values below which given fractions of a numeric column lie (e.g. the 10th and 90th percentiles)."
    mechanisms = (EM_SPEC,)
    not_offered: ClassVar[Mapping[MechanismName, str]] = {M.INVERSE_SENSITIVITY: NOT_ISM}
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.NUMERIC})
    column_hint: ClassVar[str] = "a numeric column"
    options: ClassVar[tuple[OptionSpec, ...]] = (
        OptionSpec("alphas", OptionType.FLOATS, "Levels", "Fractions in (0, 1), e.g. [0.1, 0.5, 0.9].",
                   required=True, minimum=0.0, maximum=1.0, open_bounds=True, max_items=100),
        CANDIDATES, STEP, GRID,
    )

    def levels(self, q: Query) -> tuple[float, ...]:
        return tuple(q.alphas or (0.5,))

    def check_options(self, opts: dict[str, Any], where: str) -> None:
        check_distinct_levels(opts.get("alphas"), where)
        given = [k for k in ("candidates", "step", "grid") if opts.get(k) is not None]
        if len(given) > 1:
            raise QueryError(f"{where}: give one of 'candidates', 'step' and 'grid', not {' and '.join(given)}.")
        grid = opts.get("grid")
        if grid is not None and any(b <= a for a, b in itertools.pairwise(grid)):
            raise QueryError(f"{where}: option 'grid' must list strictly increasing candidates; sort them and "
                             "drop repeats.")

    def check_schema(self, q: Query, schema: Schema) -> None:
        candidate_grid(q, schema)

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        return ("On a grid of candidates the inverse sensitivity mechanism for a quantile is the exponential "
                "mechanism on ranks (Asi & Duchi 2020): one mechanism, shown once.",)

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return tuple(QueryPart(f"quantile@{a:g}", Sensitivity(rank_sensitivity(a, schema), rank_sensitivity(a, schema)),
                               utility=True) for a in self.levels(q))

    def unit(self, q: Query, schema: Schema) -> str:
        return "rank, fraction of n"

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        # the allocator (and the accountants) are imported after a release's first read
        from planner.planning.allocation import Family, Item

        n = need_public_n(q, schema)
        out = []
        parts = self.parts(q, schema)
        for p in parts:
            pid = q.id if len(parts) == 1 else f"{q.id}:{p.name}"
            # Laplace limit of the rank error: 2√2·Δ/ε ranks (em.quantile_rank_rmse)
            coef = 8.0 * p.sensitivity.l1**2 / n**2
            out.append(Part(q, Item(pid, Family.EXPONENTIAL, coef, weight=weight, error_scale=scale), p.name))
        return out

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        alpha = _level(part)
        return level_prediction(part, share, rule, d_int=score_sensitivity(alpha, schema),
                                b=alpha_fraction(alpha).denominator, k=len(candidate_grid(q, schema)),
                                n=float(need_public_n(q, schema)), unit=self.unit(q, schema))

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return rank_requests(q.column or "", candidate_grid(q, schema))

    def aggregate_of(self, q: Query, schema: Schema, results: Sequence[Result]) -> Aggregate:
        return rank_counts(results)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        alpha = _level(part)
        fr = alpha_fraction(alpha)
        comp = level_component(score_sensitivity(alpha, schema), share, part.item.family, rule)
        grid = candidate_grid(q, schema)

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, RankCounts):
                raise wrong_aggregate(q, agg)
            idx = int(comp.invoke(quantile_scores(agg, fr.numerator, fr.denominator)))
            return {"alpha": alpha, "value": float(grid[idx])}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        if not isinstance(answer, dict):
            return ()
        parts = answer.get("parts")
        subs = parts.items() if isinstance(parts, dict) else [(f"quantile@{self.levels(q)[0]:g}", answer)]
        out = []
        for part, sub in subs:
            v = sub.get("value") if isinstance(sub, dict) else None
            out.append(AnswerRow(part, "", float(v) if isinstance(v, (int, float)) else None))
        return tuple(out)

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, QuantileAggregate):
            raise wrong_aggregate(q, agg)
        alpha = float(pred.part.split("@")[1]) if "@" in pred.part else 0.5
        fr = alpha_fraction(alpha)
        scores = quantile_scores(agg, fr.numerator, fr.denominator).astype(np.float64)
        noise = "gumbel" if "gumbel_scale" in pred.noise else "exponential"
        idx = em.report_noisy_max(scores, pred.scales["scores"], runs, rng, noise)
        le = agg.counts_le
        n = max(agg.n, 1)
        return np.asarray((le[idx] - le[int(np.argmax(scores))]) / n, dtype=np.float64)


class Median(Quantile):
    kind: ClassVar[QueryKind] = QueryKind.MEDIAN
    label: ClassVar[str] = "Median"
    summary: ClassVar[str] = "The middle value of a numeric column."
    options: ClassVar[tuple[OptionSpec, ...]] = (CANDIDATES, STEP)

    def levels(self, q: Query) -> tuple[float, ...]:
        return (0.5,)
