"""Grouped statistics: a count, sum, mean or quantile in every group of one or two declared
columns — "mean income by region".

Groups are every combination of the declared values of the ``by`` columns (categorical
or boolean; the "other" bin when declared), in declared order; every group is released,
empty ones too, so the set of groups says nothing about the data. Rows whose grouping
value the missing-value rule drops belong to no group.

Sensitivity of the vector over groups (c = rows per privacy unit, M = max(|L|, |U|)).
A unit's rows may fall in several groups, so each statistic is released as one vector
calibrated to the whole vector's sensitivity; with c = 1 this is parallel composition
(McSherry 2009): one unit touches one group.

===================  =======================  =============================================
statistic            add/remove (L1 / L2)     substitute (L1 / L2)
===================  =======================  =============================================
counts               c / c                    2c / √2·c            (a histogram over groups)
sums                 cM / cM                  2cM / max(√2·cM, Δ_S) (Δ_S: a sum's own, same group)
centred sums (means) cw/2 / cw/2              cw / cw      (terms clip(x) − (L + U)/2, w = U − L)
quantile scores      per group, L∞ d = c·max(a, b − a)    d = 2c·max(a, b − a)
===================  =======================  =============================================

Proofs. Counts: as a histogram (:mod:`.histogram`). Centred sums: as sums, each term of
magnitude ≤ w/2 instead of M (a mean's sums, :mod:`.mean`); under substitution L2 ≤ L1. Sums, add/remove: the unit's ≤ c
clipped values, each of magnitude ≤ M, split over the groups: Σ_g |Δ_g| ≤ cM and
√(Σ_g Δ_g²) ≤ cM. Substitute: the removed unit moves the vector by ≤ cM in L1 and the
added one by ≤ cM; in L2 the worst case is all of one in group A and all of the other in
B, √2·cM, or both in the same group, where the change is a sum's own substitution
sensitivity Δ_S (:func:`.sum.sum_sensitivity`). Quantiles: each group runs its own
report-noisy-max; a unit with k_g rows in group g moves g's scores by at most
k_g·max(a, b − a) (the proof in :mod:`.quantile`), so group g's selection, calibrated to
d = c·max(a, b − a), loses at most ε·k_g/c, and Σ_g k_g ≤ c gives ε in all (for ρ:
Σ_g (ε k_g/c)²/8 ≤ ε²/8). Under substitution the removed and the added rows are 2c rows
in all, hence d = 2c·max(a, b − a) (≥ c·b, the same-group bound). ∎

Prediction per group: the base statistic's, at the vector's noise. A mean or a quantile
needs the number of rows in a group: the option ``rows_per_group`` (a public guess),
by default the declared public n divided by the number of groups.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np

from planner.core.errors import QueryError
from planner.data import requests as rq
from planner.data.requests import (
    CountAggregate,
    GroupResults,
    QuantileAggregate,
    Result,
    SumAggregate,
)
from planner.data.schema import ColumnKind, Relation, Schema
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.mechanisms.registry import additive
from planner.planning.queries import Query, QueryKind, QueryPart
from planner.planning.statistics import _additive as add
from planner.planning.statistics.base import (
    Aggregate,
    AnswerRow,
    FloatArray,
    GroupedAggregate,
    ItemRelease,
    MeanAggregate,
    OptionSpec,
    OptionType,
    Part,
    Prediction,
    Statistic,
    column_of,
    column_units,
    need_public_n,
    one_draw,
    wrong_aggregate,
)
from planner.planning.statistics.count import WHOLE
from planner.planning.statistics.histogram import bins_sensitivity
from planner.planning.statistics.mean import (
    RatioModel,
    centred_sum_sensitivity,
    half_width,
    midpoint,
)
from planner.planning.statistics.quantile import (
    CANDIDATES,
    EM_SPEC,
    NOT_ISM,
    STEP,
    RankCounts,
    alpha_fraction,
    candidate_grid,
    check_distinct_levels,
    level_component,
    level_prediction,
    quantile_scores,
    rank_counts,
    rank_requests,
)
from planner.planning.statistics.sum import mid_magnitude, sum_sensitivity
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.planning.allocation import ItemAllocation

M = MechanismName
#: Most groups a grouped statistic may have (the product of the grouping columns' values).
MAX_GROUPS: Final = 10_000

BY = OptionSpec("by", OptionType.COLUMNS, "Group by",
                "One or two declared categorical or boolean columns; every combination of their declared "
                "values is a group, empty groups included.", required=True, min_items=1, max_items=2)
ROWS_PER_GROUP = OptionSpec("rows_per_group", OptionType.FLOAT, "Rows per group (public guess)",
                            "How many rows a typical group holds, a public guess used only to predict the error "
                            "of means and quantiles; by default the declared public n ÷ the number of groups.",
                            minimum=1.0, blank="public n ÷ groups")


def group_labels(q: Query, schema: Schema) -> tuple[str, ...]:
    """Every group's label ("North · female"), in declared order
    (:func:`planner.data.requests.group_labels`)."""
    return rq.group_labels(schema, q.by)


def rows_per_group(q: Query, schema: Schema) -> float:
    """The public guess of a group's rows: the option, else public n ÷ number of groups."""
    r = q.option("rows_per_group")
    if r is not None:
        return float(r)
    return max(need_public_n(q, schema) / len(group_labels(q, schema)), 1.0)


def grouped_sum_sensitivity(q: Query, schema: Schema) -> Sensitivity:
    """The sums-over-groups vector's sensitivity (module docstring)."""
    lo, hi = column_of(q, schema).bounds
    cm = schema.c * max(abs(lo), abs(hi))
    if schema.relation is Relation.SUBSTITUTE:
        return Sensitivity(2.0 * cm, max(math.sqrt(2.0) * cm, sum_sensitivity(q, schema).l2))
    return Sensitivity(cm, cm)


def grouped_centred_sum_sensitivity(q: Query, schema: Schema) -> Sensitivity:
    """The centred sums-over-groups vector's sensitivity (a grouped mean's; module
    docstring): each term clip(x) − m₀ has |·| ≤ w/2, so add/remove L1 = L2 = c·w/2,
    substitute L1 = L2 = c·w (all of both units in one group: a centred sum's own
    substitution bound, :func:`planner.planning.statistics.mean.centred_sum_sensitivity`)."""
    d = centred_sum_sensitivity(q, schema)
    return Sensitivity(d.l1, d.l2)


def grouped_score_sensitivity(alpha: float, schema: Schema) -> int:
    """Per-group L∞ sensitivity of a level's integer scores (module docstring)."""
    fr = alpha_fraction(alpha)
    d = schema.c * max(fr.numerator, fr.denominator - fr.numerator)
    return 2 * d if schema.relation is Relation.SUBSTITUTE else d


def _group_rows(answer: JSON, key: str) -> tuple[AnswerRow, ...]:
    if not isinstance(answer, dict) or not isinstance(answer.get("labels"), list):
        return ()
    labs = answer["labels"]
    vals = answer.get(key)
    noisy = answer.get("noisy_counts")
    assert isinstance(labs, list) and isinstance(vals, list)
    raw: list[Any] = noisy if isinstance(noisy, list) else [None] * len(vals)
    return tuple(AnswerRow("", str(lab), float(v) if isinstance(v, (int, float)) else None,
                           float(r) if isinstance(r, (int, float)) else None)
                 for lab, v, r in zip(labs, vals, raw, strict=True))


class _Grouped(Statistic):
    """What the grouped statistics share: the groups, their checks, their aggregates."""

    base_kind: ClassVar[QueryKind]

    def check_schema(self, q: Query, schema: Schema) -> None:
        for name in q.by:
            if name not in schema.names:
                raise QueryError(f"{q.where}: grouping column {name!r} is not declared; declare it or pick another.")
            col = schema.column(name)
            if col.kind not in (ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN):
                raise QueryError(
                    f"{q.where}: grouping column {name!r} is {col.kind.value}; group by a categorical or boolean "
                    "column (its declared values are the groups)."
                )
            if name == q.column:
                raise QueryError(f"{q.where}: group by another column than the one measured ({name!r}).")
        n_groups = math.prod(len(schema.column(name).labels) for name in q.by)
        if n_groups > MAX_GROUPS:
            raise QueryError(f"{q.where}: {n_groups} groups is more than {MAX_GROUPS}; group by fewer values.")

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        return (f"Every combination of {', '.join(q.by)} is a group ({len(group_labels(q, schema))} groups), "
                "empty groups included; a person's rows may fall in several groups, and the noise covers that.",)

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        """The base statistic's public magnitude in one group (relative errors): a group
        holds n/G rows (:func:`rows_per_group`; G groups), so a count's is n/G (as a
        histogram's bin), a sum's (n/G)·(|L|+|U|)/2 and a mean's (|L|+|U|)/2; quantiles are
        already fractions of a group's rows (None: scale 1). None without a public n."""
        if schema.public_n is None:
            return None
        return self.group_scale(q, schema, rows_per_group(q, schema))

    def group_scale(self, q: Query, schema: Schema, rows: float) -> float | None:
        """:meth:`error_scale` for a group of ``rows`` rows (None: the error is already relative)."""
        return None

    @abstractmethod
    def group_requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        """What the base statistic asks of the rows of one group."""

    def group_aggregate(self, q: Query, schema: Schema,
                        results: tuple[Result, ...]) -> CountAggregate | SumAggregate | MeanAggregate | QuantileAggregate:
        """The base aggregate of one group from its results (by default the one result)."""
        (r,) = results
        if not isinstance(r, (CountAggregate, SumAggregate)):
            raise wrong_aggregate(q, r)
        return r

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.Grouped(self.group_requests(q, schema), q.by),)

    def aggregate_of(self, q: Query, schema: Schema, results: Sequence[Result]) -> Aggregate:
        (g,) = results
        if not isinstance(g, GroupResults):
            raise wrong_aggregate(q, g)
        return GroupedAggregate(g.labels, tuple(self.group_aggregate(q, schema, r) for r in g.results))


class GroupedCount(_Grouped):
    kind: ClassVar[QueryKind] = QueryKind.GROUPED_COUNT
    base_kind: ClassVar[QueryKind] = QueryKind.COUNT
    label: ClassVar[str] = "Count by group"
    summary: ClassVar[str] = "How many rows each group (e.g. each region × sex) holds."
    mechanisms = add.INTEGER_MECHANISMS
    #: integer noise on an integer count: exact, pure, and less variance than Laplace at the same ε
    default = M.DISCRETE_LAPLACE
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({None, *ColumnKind})
    column_hint: ClassVar[str] = "any declared column, or none (then every row counts)"
    options = (BY, WHOLE)
    linear = True

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("groups", bins_sensitivity(schema), size=len(group_labels(q, schema))),)

    def unit(self, q: Query, schema: Schema) -> str:
        return "rows per group"

    def group_scale(self, q: Query, schema: Schema, rows: float) -> float | None:
        return rows

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        return [Part(q, add.item(q.id, q.mechanism, bins_sensitivity(schema), weight, scale), "groups")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        return add.predict(part, share, q.mechanism, bins_sensitivity(schema), "rows per group", component="counts",
                           rounded=bool(q.option("nonnegative_integer")))

    def group_requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.Count(q.column),)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        labs = group_labels(q, schema)
        comp = add.component("counts", q.mechanism, bins_sensitivity(schema), share, integer_data=True, vector=True)
        whole = bool(q.option("nonnegative_integer"))

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, GroupedAggregate) or agg.labels != labs:
                raise wrong_aggregate(q, agg)
            noisy = [float(v) for v in comp.invoke([g.value for g in agg.groups if isinstance(g, CountAggregate)])]
            counts = [add.whole_nonnegative(v) for v in noisy] if whole else noisy
            return {"labels": list(labs), "counts": list(counts), "noisy_counts": list(noisy)}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        return _group_rows(answer, "counts")

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, GroupedAggregate):
            raise wrong_aggregate(q, agg)
        true = np.array([float(g.value) for g in agg.groups if isinstance(g, CountAggregate)])
        return add.simulate(q.mechanism, true, pred.scales["counts"], runs, rng,
                            whole=bool(q.option("nonnegative_integer")))


class GroupedSum(_Grouped):
    kind: ClassVar[QueryKind] = QueryKind.GROUPED_SUM
    base_kind: ClassVar[QueryKind] = QueryKind.SUM
    label: ClassVar[str] = "Sum by group"
    summary: ClassVar[str] = "The total of a numeric column in each group, each value clipped to its bounds."
    mechanisms = add.REAL_MECHANISMS
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.NUMERIC})
    column_hint: ClassVar[str] = "a numeric column"
    options = (BY,)
    linear = True

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("sums", grouped_sum_sensitivity(q, schema), size=len(group_labels(q, schema))),)

    def unit(self, q: Query, schema: Schema) -> str:
        return column_units(q, "units per group")

    def group_scale(self, q: Query, schema: Schema, rows: float) -> float | None:
        return rows * mid_magnitude(q, schema)

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        return [Part(q, add.item(q.id, q.mechanism, grouped_sum_sensitivity(q, schema), weight, scale), "sums")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        return add.predict(part, share, q.mechanism, grouped_sum_sensitivity(q, schema), self.unit(q, schema),
                           component="sums")

    def group_requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.ClippedSum(q.column or ""),)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        labs = group_labels(q, schema)
        comp = add.component("sums", q.mechanism, grouped_sum_sensitivity(q, schema), share, integer_data=False,
                             vector=True)

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, GroupedAggregate) or agg.labels != labs:
                raise wrong_aggregate(q, agg)
            values = [float(v) for v in comp.invoke([g.value for g in agg.groups if isinstance(g, SumAggregate)])]
            return {"labels": list(labs), "values": list(values)}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        return _group_rows(answer, "values")

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, GroupedAggregate):
            raise wrong_aggregate(q, agg)
        true = np.array([float(g.value) for g in agg.groups if isinstance(g, SumAggregate)])
        return add.simulate(q.mechanism, true, pred.scales["sums"], runs, rng)


class GroupedMean(_Grouped):
    kind: ClassVar[QueryKind] = QueryKind.GROUPED_MEAN
    base_kind: ClassVar[QueryKind] = QueryKind.MEAN
    label: ClassVar[str] = "Mean by group"
    summary: ClassVar[str] = "The average of a numeric column in each group (noisy sum ÷ noisy count per group)."
    mechanisms = add.REAL_MECHANISMS
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.NUMERIC})
    column_hint: ClassVar[str] = "a numeric column"
    options = (BY, ROWS_PER_GROUP)

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        size = len(group_labels(q, schema))
        return (QueryPart("sums", grouped_centred_sum_sensitivity(q, schema), size=size),
                QueryPart("counts", bins_sensitivity(schema), size=size))

    def unit(self, q: Query, schema: Schema) -> str:
        return column_units(q, "units")

    def group_scale(self, q: Query, schema: Schema, rows: float) -> float | None:
        return mid_magnitude(q, schema)

    def model(self, q: Query, schema: Schema) -> RatioModel:
        return RatioModel(q.mechanism, grouped_centred_sum_sensitivity(q, schema), bins_sensitivity(schema),
                          half_width(q, schema), rows_per_group(q, schema), midpoint(q, schema))

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        return [Part(q, self.model(q, schema).item(q.id, weight, scale), q.id)]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        return self.model(part.query, schema).predict(part, share, self.unit(part.query, schema))

    def group_requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.ClippedSum(q.column or ""),)

    def group_aggregate(self, q: Query, schema: Schema, results: tuple[Result, ...]) -> MeanAggregate:
        (s,) = results
        if not isinstance(s, SumAggregate):
            raise wrong_aggregate(q, s)
        return MeanAggregate(s, CountAggregate(s.n, s.dropped), None)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        labs = group_labels(q, schema)
        lo, hi = column_of(q, schema).bounds
        model = self.model(q, schema)
        comp_s, comp_c, draws = model.components(part, share, vector=True)

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, GroupedAggregate) or agg.labels != labs:
                raise wrong_aggregate(q, agg)
            means = [g for g in agg.groups if isinstance(g, MeanAggregate)]
            if len(means) != len(labs):
                raise wrong_aggregate(q, agg)
            sums = [float(v) for v in comp_s.invoke([model.centred(g.sum.value, g.count.value) for g in means])]
            counts = [float(v) for v in comp_c.invoke([float(g.count.value) for g in means])]
            return {"labels": list(labs),
                    "values": [model.value(s_, n_, lo, hi) for s_, n_ in zip(sums, counts, strict=True)],
                    "noisy_centred_sums": list(sums), "noisy_counts": list(counts), "centre": model.shift}

        return ItemRelease(part, share, pred, draws, answer, f"{comp_s.constructor} / {comp_c.constructor}")

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        return tuple(AnswerRow(r.part, r.label, r.value) for r in _group_rows(answer, "values"))

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, GroupedAggregate):
            raise wrong_aggregate(q, agg)
        lo, hi = column_of(q, schema).bounds
        mid = midpoint(q, schema)
        means = [g for g in agg.groups if isinstance(g, MeanAggregate)]
        s = np.array([g.sum.value for g in means])
        c = np.array([float(g.count.value) for g in means])
        noise = additive(q.mechanism)
        s_t = noise.simulate(s - mid * c, pred.scales["sum"], runs, rng)
        c_t = noise.simulate(c, pred.scales["count"], runs, rng)
        true = np.where(c > 0, s / np.maximum(c, 1.0), mid)
        est = mid + np.clip(s_t / np.maximum(c_t, 1.0), lo - mid, hi - mid)
        return np.asarray(est - true, dtype=np.float64)


class GroupedQuantile(_Grouped):
    kind: ClassVar[QueryKind] = QueryKind.GROUPED_QUANTILE
    base_kind: ClassVar[QueryKind] = QueryKind.QUANTILE
    label: ClassVar[str] = "Quantiles by group"
    summary: ClassVar[str] = "Quantiles (e.g. the median) of a numeric column in each group."
    mechanisms = (EM_SPEC,)
    not_offered: ClassVar[Mapping[MechanismName, str]] = {M.INVERSE_SENSITIVITY: NOT_ISM}
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.NUMERIC})
    column_hint: ClassVar[str] = "a numeric column"
    options = (
        BY,
        OptionSpec("alphas", OptionType.FLOATS, "Levels", "Fractions in (0, 1), e.g. [0.5] for the median.",
                   required=True, minimum=0.0, maximum=1.0, open_bounds=True, max_items=20),
        CANDIDATES, STEP, ROWS_PER_GROUP,
    )

    def check_options(self, opts: dict[str, Any], where: str) -> None:
        check_distinct_levels(opts.get("alphas"), where)
        if opts.get("candidates") is not None and opts.get("step") is not None:
            raise QueryError(f"{where}: give 'candidates' or 'step', not both.")

    def check_schema(self, q: Query, schema: Schema) -> None:
        super().check_schema(q, schema)
        candidate_grid(q, schema)

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        size = len(group_labels(q, schema))
        out = []
        for a in q.alphas or ():
            d = grouped_score_sensitivity(a, schema) / alpha_fraction(a).denominator
            out.append(QueryPart(f"quantile@{a:g}", Sensitivity(d, d), size=size, utility=True))
        return tuple(out)

    def unit(self, q: Query, schema: Schema) -> str:
        return "rank, fraction of a group's rows"

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        # the allocator (and the accountants) are imported after a release's first read
        from planner.planning.allocation import Family, Item

        n = rows_per_group(q, schema)
        parts = self.parts(q, schema)
        return [Part(q, Item(q.id if len(parts) == 1 else f"{q.id}:{p.name}", Family.EXPONENTIAL,
                             8.0 * p.sensitivity.l1**2 / n**2, weight=weight, error_scale=scale), p.name)
                for p in parts]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        alpha = float(part.label.split("@")[1])
        return level_prediction(part, share, rule, d_int=grouped_score_sensitivity(alpha, schema),
                                b=alpha_fraction(alpha).denominator, k=len(candidate_grid(q, schema)),
                                n=rows_per_group(q, schema), unit=self.unit(q, schema))

    def group_requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return rank_requests(q.column or "", candidate_grid(q, schema))

    def group_aggregate(self, q: Query, schema: Schema, results: tuple[Result, ...]) -> RankCounts:
        return rank_counts(results)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        labs = group_labels(q, schema)
        alpha = float(part.label.split("@")[1])
        fr = alpha_fraction(alpha)
        comp = level_component(grouped_score_sensitivity(alpha, schema), share, part.item.family, rule)
        grid = candidate_grid(q, schema)

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, GroupedAggregate) or agg.labels != labs:
                raise wrong_aggregate(q, agg)
            values: list[JSON] = []
            for g in agg.groups:
                if not isinstance(g, RankCounts):
                    raise wrong_aggregate(q, agg)
                values.append(float(grid[int(comp.invoke(quantile_scores(g, fr.numerator, fr.denominator)))]))
            return {"alpha": alpha, "labels": list(labs), "values": values}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        if not isinstance(answer, dict):
            return ()
        parts = answer.get("parts")
        subs = parts.items() if isinstance(parts, dict) else [(f"quantile@{(q.alphas or (0.5,))[0]:g}", answer)]
        return tuple(AnswerRow(part, r.label, r.value) for part, sub in subs for r in _group_rows(sub, "values"))

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, GroupedAggregate):
            raise wrong_aggregate(q, agg)
        alpha = float(pred.part.split("@")[1])
        fr = alpha_fraction(alpha)
        noise = "gumbel" if "gumbel_scale" in pred.noise else "exponential"
        out = np.empty((runs, len(agg.groups)))
        for j, g in enumerate(agg.groups):
            assert isinstance(g, QuantileAggregate)
            scores = quantile_scores(g, fr.numerator, fr.denominator).astype(np.float64)
            idx = em.report_noisy_max(scores, pred.scales["scores"], runs, rng, noise)
            le = g.counts_le
            out[:, j] = (le[idx] - le[int(np.argmax(scores))]) / max(g.n, 1)
        return out
