"""Proportion of true values in a boolean column, from noisy counts.

Under add/remove the pair (#true, #false) has L1 sensitivity c (a unit's ≤ c rows each
fall in one of the two bins), the same as #true alone, so both are released with one
noise draw each and the proportion is t̃⁺/(t̃⁺ + f̃⁺) (post-processing; t̃⁺ = max(t̃, 0)).
By the delta method its error is ≈ ((1 − p)N_t − p·N_f)/n, of variance
v((1 − p)² + p²)/n² ≤ v/n² with v the noise variance: the prediction is that worst case
(p = 0 or 1), "at most". Under substitution n is public and (#true, #false) has L1
sensitivity 2c, so only #true is released and the proportion is t̃/n_public, clipped to
[0, 1] (clipping only reduces the error).

Randomized response is not offered here: it is a local-model mechanism (each person
randomises their own answer before it reaches the data owner), so it cannot be applied
to a table already held; and "randomise each row, then aggregate" is not ε-DP under
add/remove, because the number of reports reveals n. The Accuracy page shows its error
beside the central mechanisms, for comparison (:meth:`Proportion.comparison`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from planner.data import requests as rq
from planner.data.requests import BooleanCounts
from planner.data.schema import ColumnKind, Relation, Schema
from planner.planning.mechanisms import randomized_response as rr
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.mechanisms.registry import additive
from planner.planning.queries import Query, QueryKind, QueryPart
from planner.planning.statistics import _additive as add
from planner.planning.statistics.base import (
    BETA,
    Aggregate,
    FloatArray,
    ItemRelease,
    Part,
    Prediction,
    Statistic,
    need_public_n,
    one_draw,
    wrong_aggregate,
)
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.planning.allocation import ItemAllocation

M = MechanismName


def _pair(schema: Schema) -> bool:
    return schema.relation is Relation.ADD_REMOVE


class Proportion(Statistic):
    kind: ClassVar[QueryKind] = QueryKind.PROPORTION
    label: ClassVar[str] = "Proportion"
    summary: ClassVar[str] = "The share of rows whose boolean column is true."
    mechanisms = (add.LAPLACE_SPEC, add.DISCRETE_LAPLACE_SPEC)
    not_offered: ClassVar[Mapping[MechanismName, str]] = {M.RANDOMIZED_RESPONSE: (
        "randomized response is a local-model mechanism: each person randomises their own answer before it "
        "reaches you, so it cannot be applied to a table you already hold. Use 'laplace' or "
        "'discrete_laplace' (the Accuracy page shows randomized response's error for comparison).")}
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.BOOLEAN})
    column_hint: ClassVar[str] = "a boolean column (or a count with a filter)"

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        return ("Randomized response (each person randomises their own answer, Warner 1965) is shown for "
                "comparison only: it protects people before their data reaches you, and costs about "
                "1/(2√n·tanh(ε/2)) in error, far more than noisy counts here.",)

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("proportion", Sensitivity(schema.c, schema.c)),)

    def unit(self, q: Query, schema: Schema) -> str:
        return "proportion"

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        n = need_public_n(q, schema)
        sens = self.parts(q, schema)[0].sensitivity
        return [Part(q, add.item(q.id, q.mechanism, sens, weight, scale, divisor=float(n)), "proportion")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        n = need_public_n(q, schema)
        return add.predict(part, share, q.mechanism, self.parts(q, schema)[0].sensitivity, "proportion",
                           component="counts" if _pair(schema) else "count", divisor=float(n),
                           bound_kind="at most" if _pair(schema) else "exact")

    def comparison(self, q: Query, schema: Schema, epsilons: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Randomized response's worst-case (π = ½) RMSE and 95% bound at each ε, for
        comparison on the Accuracy page (local model; never released)."""
        n = need_public_n(q, schema)
        return (np.asarray(rr.worst_case_rmse(epsilons, n), dtype=np.float64),
                np.asarray(rr.worst_case_error_bound(epsilons, n, BETA), dtype=np.float64))

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.Booleans(q.column or ""),)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        pair = _pair(schema)
        comp = add.component("counts" if pair else "count", q.mechanism, self.parts(q, schema)[0].sensitivity, share,
                             integer_data=True, vector=pair)
        n_pub = schema.public_n

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, BooleanCounts):
                raise wrong_aggregate(q, agg)
            if pair:
                t, f = comp.invoke([agg.n_true, agg.n_false])
                tt, ff = max(t, 0.0), max(f, 0.0)
                return {"value": tt / (tt + ff) if tt + ff > 0 else 0.5, "noisy_true": t, "noisy_false": f}
            assert n_pub is not None
            t = float(comp.invoke(agg.n_true))
            return {"value": min(max(t / n_pub, 0.0), 1.0), "noisy_true": t}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, BooleanCounts):
            raise wrong_aggregate(q, agg)
        n = max(agg.n, 1)
        pi = agg.n_true / n
        noise = additive(q.mechanism)
        scale = next(iter(pred.scales.values()))
        t = noise.simulate(float(agg.n_true), scale, runs, rng)
        if _pair(schema):
            f = noise.simulate(float(agg.n_false), scale, runs, rng)
            tt, ff = np.maximum(t, 0.0), np.maximum(f, 0.0)
            tot = tt + ff
            est = np.divide(tt, tot, out=np.full_like(tt, 0.5), where=tot > 0)
        else:
            est = np.clip(t / float(schema.public_n or n), 0.0, 1.0)
        return np.asarray(est - pi, dtype=np.float64)
