"""Count of rows (optionally those matching a filter on a declared column).

Sensitivity: a privacy unit owns at most c rows, so adding, removing or replacing one
changes the count by at most c under both relations (docs/mathematics.md §2): Δ₁ = Δ₂ = c.
Released with additive noise (:mod:`planner.planning.statistics._additive`), by default as a
whole number ≥ 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from planner.data import requests as rq
from planner.data.requests import CountAggregate
from planner.data.schema import ColumnKind, Schema
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.queries import Query, QueryKind, QueryPart
from planner.planning.statistics import _additive as add
from planner.planning.statistics.base import (
    Aggregate,
    FloatArray,
    ItemRelease,
    OptionSpec,
    OptionType,
    Part,
    Prediction,
    Statistic,
    one_draw,
    wrong_aggregate,
)
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.planning.allocation import ItemAllocation

WHOLE = OptionSpec(
    "nonnegative_integer", OptionType.BOOL, "Whole number ≥ 0",
    "Post-process the released count to the nearest whole number, at least 0 (" + add.WHOLE_NONNEGATIVE_NOTE + ").",
    default=True,
)


class Count(Statistic):
    kind: ClassVar[QueryKind] = QueryKind.COUNT
    label: ClassVar[str] = "Count of rows"
    summary: ClassVar[str] = "How many rows (or rows matching a filter) the table holds."
    mechanisms = add.INTEGER_MECHANISMS
    #: integer noise on an integer count: exact, pure, and less variance than Laplace at the same ε
    default = MechanismName.DISCRETE_LAPLACE
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({None, *ColumnKind})
    column_hint: ClassVar[str] = "any declared column, or none (then every row counts)"
    options = (
        OptionSpec("predicate", OptionType.PREDICATE, "Filter",
                   "Count only rows where a declared column compares to a public constant, "
                   'e.g. {"column": "age", "op": ">=", "value": 65}.'),
        WHOLE,
    )
    linear = True

    def check_schema(self, q: Query, schema: Schema) -> None:
        if q.predicate is not None:
            q.predicate.validate(schema, q.where)

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        if q.option("nonnegative_integer"):
            return ("Released as a whole number ≥ 0 (the raw noisy value is kept beside it): " + add.WHOLE_NONNEGATIVE_NOTE + ".",)
        return ()

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("count", Sensitivity(schema.c, schema.c)),)

    def unit(self, q: Query, schema: Schema) -> str:
        return "rows"

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        return None if schema.public_n is None else float(schema.public_n)

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        sens = self.parts(q, schema)[0].sensitivity
        return [Part(q, add.item(q.id, q.mechanism, sens, weight, scale), "count")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        return add.predict(part, share, q.mechanism, self.parts(q, schema)[0].sensitivity, "rows",
                           component="count", rounded=bool(q.option("nonnegative_integer")))

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.Count(q.column, q.predicate),)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        comp = add.component("count", q.mechanism, self.parts(q, schema)[0].sensitivity, share,
                             integer_data=True, vector=False)
        whole = bool(q.option("nonnegative_integer"))

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, CountAggregate):
                raise wrong_aggregate(q, agg)
            noisy = float(comp.invoke(agg.value))
            return {"value": add.whole_nonnegative(noisy) if whole else noisy, "noisy": noisy}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, CountAggregate):
            raise wrong_aggregate(q, agg)
        return add.simulate(q.mechanism, float(agg.value), pred.scales["count"], runs, rng,
                            whole=bool(q.option("nonnegative_integer")))
