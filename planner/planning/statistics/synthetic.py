"""Synthetic sample of a numeric column: the perturbed histogram (Wasserman & Zhou 2010).

Bins B₁…B_m over [L, U]; the counts are released with Laplace noise of scale Δ₁/ε
(Δ₁ as for a histogram: :func:`planner.planning.statistics.histogram.bins_sensitivity`), then
post-processed (docs/mathematics.md §8): D̃_j = max(D_j, 0), q̂_j = D̃_j/ΣD̃, and
k = min(round(ΣD̃), 10 000) points are drawn from the histogram density (uniform within a
bin; for a column declared to hold whole numbers, one of the bin's whole numbers, each
equally likely). Everything after the noisy counts is post-processing, so the sample is ε-DP
whatever k. The prediction is the per-bin error of the noisy counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from planner.core.errors import QueryError
from planner.data import requests as rq
from planner.data.requests import BinCounts
from planner.data.schema import ColumnKind, Schema
from planner.planning.mechanisms.base import MechanismName
from planner.planning.queries import MAX_GRID, Query, QueryKind, QueryPart
from planner.planning.statistics import _additive as add
from planner.planning.statistics.base import (
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
    one_draw,
    wrong_aggregate,
)
from planner.planning.statistics.histogram import bin_rows, bins_sensitivity, edges, labels
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.planning.allocation import ItemAllocation

M = MechanismName


def sample_from(noisy: list[float], bin_edges: FloatArray, *, whole: bool = False) -> dict[str, Any]:
    """Post-processing of a perturbed histogram: clamp, normalise, draw (module docstring).
    With ``whole`` (a column declared to hold whole numbers) each value is one of the whole
    numbers its bin holds, each equally likely (:func:`planner.data.requests.draw_whole_numbers`);
    every bin holds one (:meth:`SyntheticSample.check_schema`)."""
    from planner.privacy.noise import MAX_SYNTHETIC_ROWS, post_process_sample, post_process_uniform

    d = np.maximum(np.asarray(noisy, dtype=np.float64), 0.0)
    total = float(d.sum())
    if total <= 0:
        return {"probabilities": [0.0] * len(d), "sample": []}
    prob = d / total
    k = int(min(round(total), MAX_SYNTHETIC_ROWS))
    idx = post_process_sample(prob, k)
    u = post_process_uniform(k)
    if whole:
        sample = rq.draw_whole_numbers(bin_edges, idx, u)
    else:
        lo, hi = bin_edges[idx], bin_edges[idx + 1]
        sample = lo + (hi - lo) * u
    return {"probabilities": [float(p) for p in prob], "sample": [float(v) for v in sample]}


class SyntheticSample(Statistic):
    kind: ClassVar[QueryKind] = QueryKind.SYNTHETIC_SAMPLE
    label: ClassVar[str] = "Synthetic sample"
    summary: ClassVar[str] = "Up to 10 000 synthetic values of a numeric column, drawn from a noisy histogram."
    mechanisms = (MechanismSpec(M.PERTURBED_HISTOGRAM, "Perturbed histogram",
                                "Laplace noise on the bin counts, then a sample drawn from them (Wasserman & Zhou 2010)."),)
    not_offered: ClassVar[Mapping[MechanismName, str]] = {M.SMOOTHED_HISTOGRAM: (
        "the smoothed histogram is not released: its guarantee depends on the private row count and on how "
        "many points are drawn (it is shown on the Learn page 'Releasing a distribution'); use "
        "'perturbed_histogram'.")}
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.NUMERIC})
    column_hint: ClassVar[str] = "a numeric column"
    options = (OptionSpec("bins", OptionType.INT, "Number of bins",
                          "The declared range [L, U] cut into this many equal bins.", required=True,
                          minimum=1, maximum=MAX_GRID),)

    def check_schema(self, q: Query, schema: Schema) -> None:
        """A column of whole numbers is sampled as whole numbers, so every bin must hold one:
        bins at least 1 wide (any interval [a, a + w) with w ≥ 1 holds ⌈a⌉), i.e. at most
        ⌊U − L⌋ of them (one bin always: the bounds of such a column hold a whole number)."""
        if q.column is None or not (col := column_of(q, schema)).integer:
            return
        lo, hi = col.bounds
        most = max(1, math.floor(hi - lo))
        nb = int(q.option("bins") or 1)
        if nb > most:
            raise QueryError(f"{q.where}: column {q.column!r} holds whole numbers, so a synthetic sample draws "
                             f"whole numbers and each of its bins must hold one; {nb} bins over [{lo:g}, {hi:g}] "
                             f"are narrower than 1. Use at most {most} bins.")

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("synthetic_sample", bins_sensitivity(schema), size=len(labels(q, schema))),)

    def unit(self, q: Query, schema: Schema) -> str:
        return "rows per bin"

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        return None if schema.public_n is None else float(schema.public_n) / max(len(labels(q, schema)), 1)

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        return [Part(q, add.item(q.id, M.LAPLACE, bins_sensitivity(schema), weight, scale), "synthetic_sample")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        return add.predict(part, share, M.LAPLACE, bins_sensitivity(schema), "rows per bin", component="bins")

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        e = edges(q, schema)
        assert e is not None
        return (rq.Bins(q.column or "", tuple(e.tolist())),)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        labs = labels(q, schema)
        e = edges(q, schema)
        assert e is not None
        comp = add.component("bins", M.LAPLACE, bins_sensitivity(schema), share, integer_data=True, vector=True)
        whole = column_of(q, schema).integer

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, BinCounts) or tuple(agg.labels) != tuple(labs):
                raise wrong_aggregate(q, agg)
            noisy = [float(v) for v in comp.invoke(list(agg.counts))]
            return {"labels": list(labs), "counts": list(noisy), **sample_from(noisy, e, whole=whole)}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        return bin_rows(answer)

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, BinCounts):
            raise wrong_aggregate(q, agg)
        return add.simulate(M.LAPLACE, agg.as_array().astype(np.float64), pred.scales["bins"], runs, rng)
