"""Histogram: counts over every declared bin (categories, or numeric bins over [L, U]).

Every declared bin is released, empty ones too, in the declared order (the backends join
the declared domain); undeclared categories go to the "other" bin if declared, else to
no bin.

Sensitivity (c = rows per privacy unit): add/remove Δ₁ = Δ₂ = c (one unit's c rows can
all fall in one bin, so the L2 sensitivity is c, not √c); substitute Δ₁ = 2c, Δ₂ = √2·c
(a rows leave bins and b rows enter others, all of each side possibly in one bin:
L1 ≤ a + b ≤ 2c, L2 ≤ √(a² + b²) ≤ √2·c). docs/mathematics.md §2 gives c = 1.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from planner.core.errors import QueryError
from planner.data import requests as rq
from planner.data.requests import BinCounts, numeric_bin_labels
from planner.data.schema import ColumnKind, Relation, Schema
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.queries import MAX_GRID, Query, QueryKind, QueryPart
from planner.planning.statistics import _additive as add
from planner.planning.statistics.base import (
    Aggregate,
    AnswerRow,
    FloatArray,
    ItemRelease,
    OptionSpec,
    OptionType,
    Part,
    Prediction,
    Statistic,
    column_of,
    one_draw,
    wrong_aggregate,
)
from planner.planning.statistics.count import WHOLE
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.planning.allocation import ItemAllocation

BINS = OptionSpec("bins", OptionType.INT, "Number of equal-width bins",
                  "Numeric columns: the declared range [L, U] cut into this many equal bins.",
                  minimum=1, maximum=MAX_GRID)
BIN_EDGES = OptionSpec("bin_edges", OptionType.FLOATS, "Bin edges",
                       "Numeric columns: strictly increasing edges covering the declared bounds, e.g. [0, 18, 65, 120].",
                       min_items=2, max_items=MAX_GRID + 1)


def edges(q: Query, schema: Schema) -> FloatArray | None:
    """Bin edges of a numeric histogram / synthetic sample (``None`` for categories)."""
    if q.column is None:
        return None
    col = column_of(q, schema)
    if col.kind is not ColumnKind.NUMERIC:
        return None
    e = q.option("bin_edges")
    if e is not None:
        return np.asarray(e, dtype=np.float64)
    lo, hi = col.bounds
    nb = q.option("bins") or 1
    return np.linspace(lo, hi, int(nb) + 1, dtype=np.float64)


def labels(q: Query, schema: Schema) -> tuple[str, ...]:
    """Labels of the released bins (histogram, synthetic sample, mode)."""
    e = edges(q, schema)
    if e is not None:
        return numeric_bin_labels(column_of(q, schema), e)
    if q.column is None:
        raise QueryError(f"{q.where}: a {q.kind.value} query has no bins.")
    return column_of(q, schema).labels


def bins_sensitivity(schema: Schema) -> Sensitivity:
    """Δ of a vector of bin counts under the schema's relation (module docstring)."""
    c = schema.c
    return Sensitivity(2 * c, math.sqrt(2) * c) if schema.relation is Relation.SUBSTITUTE else Sensitivity(c, c)


def check_bins(opts: dict[str, Any], where: str) -> None:
    """Bins or edges, not both; edges strictly increasing."""
    if opts.get("bins") is not None and opts.get("bin_edges") is not None:
        raise QueryError(f"{where}: give 'bins' or 'bin_edges', not both.")
    e = opts.get("bin_edges")
    if e is not None and any(b <= a for a, b in itertools.pairwise(e)):
        raise QueryError(f"{where}: bin edges must be at least 2 strictly increasing numbers.")


def check_bins_schema(q: Query, schema: Schema) -> None:
    """Numeric columns need bins or edges covering [L, U]; categories bring their own bins."""
    col = column_of(q, schema)
    has = q.option("bins") is not None or q.option("bin_edges") is not None
    if col.kind is ColumnKind.NUMERIC:
        if not has:
            raise QueryError(
                f"{q.where}: a {q.kind.value} of numeric column {q.column!r} needs declared "
                "'bin_edges' or a number of 'bins'."
            )
        e = q.option("bin_edges")
        if e is not None:
            lo, hi = col.bounds
            if e[0] > lo or e[-1] < hi:
                raise QueryError(
                    f"{q.where}: bin edges must cover the declared bounds [{lo:g}, {hi:g}] "
                    f"of {col.name!r}; extend the first/last edge."
                )
    elif has:
        raise QueryError(
            f"{q.where}: 'bins'/'bin_edges' apply to numeric columns; the bins of "
            f"{q.column!r} are its declared categories."
        )


def bin_rows(answer: JSON) -> tuple[AnswerRow, ...]:
    """One row per released bin: label, released count, raw noisy count."""
    if not isinstance(answer, dict):
        return ()
    labs, counts, noisy = answer.get("labels"), answer.get("counts"), answer.get("noisy_counts")
    if not isinstance(labs, list) or not isinstance(counts, list):
        return ()
    raw: list[Any] = noisy if isinstance(noisy, list) else [None] * len(counts)
    return tuple(AnswerRow("", str(lab), float(c) if isinstance(c, (int, float)) else None,
                           float(r) if isinstance(r, (int, float)) else None)
                 for lab, c, r in zip(labs, counts, raw, strict=True))


class Histogram(Statistic):
    kind: ClassVar[QueryKind] = QueryKind.HISTOGRAM
    label: ClassVar[str] = "Histogram"
    summary: ClassVar[str] = "Counts of rows in every declared category or numeric bin (empty bins included)."
    mechanisms = add.INTEGER_MECHANISMS
    #: integer noise on an integer count: exact, pure, and less variance than Laplace at the same ε
    default = MechanismName.DISCRETE_LAPLACE
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset(
        {ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN, ColumnKind.NUMERIC})
    column_hint: ClassVar[str] = "a categorical, boolean or numeric (with bin edges) column"
    options = (BINS, BIN_EDGES, WHOLE)
    linear = True

    def check_options(self, opts: dict[str, Any], where: str) -> None:
        check_bins(opts, where)

    def check_schema(self, q: Query, schema: Schema) -> None:
        check_bins_schema(q, schema)

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        if q.option("nonnegative_integer"):
            return ("Released as a whole number ≥ 0 (the raw noisy value is kept beside it): " + add.WHOLE_NONNEGATIVE_NOTE + ".",)
        return ()

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("histogram", bins_sensitivity(schema), size=len(labels(q, schema))),)

    def unit(self, q: Query, schema: Schema) -> str:
        return "rows per bin"

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        return None if schema.public_n is None else float(schema.public_n) / max(len(labels(q, schema)), 1)

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        return [Part(q, add.item(q.id, q.mechanism, bins_sensitivity(schema), weight, scale), "histogram")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        return add.predict(part, share, q.mechanism, bins_sensitivity(schema), "rows per bin", component="bins",
                           rounded=bool(q.option("nonnegative_integer")))

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        e = edges(q, schema)
        return (rq.Bins(q.column or "", None if e is None else tuple(e.tolist())),)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        labs = labels(q, schema)
        comp = add.component("bins", q.mechanism, bins_sensitivity(schema), share, integer_data=True, vector=True)
        whole = bool(q.option("nonnegative_integer"))

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, BinCounts):
                raise wrong_aggregate(q, agg)
            if tuple(agg.labels) != tuple(labs):
                raise QueryError(f"query {q.id!r}: the backend's bins do not match the declared bins.")
            noisy = [float(v) for v in comp.invoke(list(agg.counts))]
            counts = [add.whole_nonnegative(v) for v in noisy] if whole else noisy
            return {"labels": list(labs), "counts": list(counts), "noisy_counts": list(noisy)}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        return bin_rows(answer)

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, BinCounts):
            raise wrong_aggregate(q, agg)
        return add.simulate(q.mechanism, agg.as_array().astype(np.float64), pred.scales["bins"], runs, rng,
                            whole=bool(q.option("nonnegative_integer")))
