"""Sum of a numeric column, each value clipped to the declared bounds [L, U].

Sensitivity (c = rows per privacy unit; docs/mathematics.md §2 for c = 1):

========================  =============================================================
relation                  Δ₁ = Δ₂
========================  =============================================================
add/remove                c·max(|L|, |U|)
substitute, replace rule  max(U, cU) − min(L, cL)
substitute, drop rule     max(0, cU) − min(0, cL)
========================  =============================================================

Proofs. Add/remove: one unit adds or removes at most c clipped values, each of absolute
value ≤ max(|L|, |U|). Substitute with the ``replace`` missing-value rule: every row
contributes, so a unit owning a ∈ [1, c] rows contributes a sum in [min(L, aL), max(U, aU)]
⊆ [min(L, cL), max(U, cU)], and replacing it by another unit moves the total by at most
the width of that range. This is larger than c·(U − L) when L > 0 (L = 10, U = 20, c = 2:
one row at 10 replaced by two rows at 20 moves the sum by 30, not 20), so the plain
"× c" rule would be unsafe. With the ``drop`` rule a unit whose values are all missing
contributes 0, so the range is [min(0, cL), max(0, cU)]: docs/mathematics.md §2's U − L is too small
when 0 ∉ [L, U] ([10, 20]: 20, not 10). ∎
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from planner.core.errors import QueryError
from planner.data import requests as rq
from planner.data.requests import SumAggregate
from planner.data.schema import ColumnKind, MissingAction, Relation, Schema
from planner.planning.mechanisms.base import Sensitivity
from planner.planning.queries import Query, QueryKind, QueryPart
from planner.planning.statistics import _additive as add
from planner.planning.statistics.base import (
    Aggregate,
    FloatArray,
    ItemRelease,
    Part,
    Prediction,
    Statistic,
    column_of,
    column_units,
    one_draw,
    wrong_aggregate,
)
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.planning.allocation import ItemAllocation


def sum_sensitivity(q: Query, schema: Schema) -> Sensitivity:
    """Δ of the clipped sum of the query's column (module docstring)."""
    column = column_of(q, schema)
    lo, hi = column.bounds
    c = schema.c
    if schema.relation is Relation.SUBSTITUTE and column.missing.action is MissingAction.REPLACE:
        d = max(hi, c * hi) - min(lo, c * lo)
    elif schema.relation is Relation.SUBSTITUTE:
        d = max(0.0, c * hi) - min(0.0, c * lo)
    else:
        d = c * max(abs(lo), abs(hi))
    if d == 0:
        raise QueryError(f"{q.where}: the declared bounds give a zero sensitivity.")
    return Sensitivity(d, d)


def mid_magnitude(q: Query, schema: Schema) -> float:
    """(|L| + |U|)/2 of the query's column (1 if both are 0): a public magnitude of a value."""
    lo, hi = column_of(q, schema).bounds
    return (abs(lo) + abs(hi)) / 2 or 1.0


class Sum(Statistic):
    kind: ClassVar[QueryKind] = QueryKind.SUM
    label: ClassVar[str] = "Sum"
    summary: ClassVar[str] = "The total of a numeric column, each value clipped to its declared bounds."
    mechanisms = add.REAL_MECHANISMS
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.NUMERIC})
    column_hint: ClassVar[str] = "a numeric column"
    linear = True

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("sum", sum_sensitivity(q, schema)),)

    def unit(self, q: Query, schema: Schema) -> str:
        return column_units(q, "units")

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        return None if schema.public_n is None else mid_magnitude(q, schema) * schema.public_n

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        return [Part(q, add.item(q.id, q.mechanism, sum_sensitivity(q, schema), weight, scale), "sum")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        return add.predict(part, share, q.mechanism, sum_sensitivity(q, schema), self.unit(q, schema),
                           component="sum")

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.ClippedSum(q.column or ""),)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        comp = add.component("sum", q.mechanism, sum_sensitivity(q, schema), share, integer_data=False, vector=False)

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, SumAggregate):
                raise wrong_aggregate(q, agg)
            return {"value": float(comp.invoke(agg.value))}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, SumAggregate):
            raise wrong_aggregate(q, agg)
        return add.simulate(q.mechanism, float(agg.value), pred.scales["sum"], runs, rng)
