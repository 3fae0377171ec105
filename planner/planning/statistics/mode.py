"""Mode: the most common declared category, by report-noisy-max on the counts.

Mechanisms
----------
* **exponential** — report-noisy-max on the category counts: Gumbel noise under RDP and
  zCDP (the exponential mechanism exactly, ε²/8-zCDP; report noisy max with Gumbel noise
  *is* this mechanism, so it is not offered under a second name), exponential noise under
  basic and advanced composition (permute-and-flip, never worse). Under add/remove the
  counts are monotone (adding a unit raises some counts and lowers none), so OpenDP's
  map drops the factor 2: scale c/ε instead of 2c/ε (McSherry & Talwar 2007; OpenDP's
  ``linf_distance(monotonic=True)``).
* **inverse_sensitivity** — report-noisy-max on −D_f(x, t), the least number of
  neighbouring steps for t to become the mode, in the schema's relation: under
  substitution the least number of rows to change
  (:func:`planner.planning.mechanisms.ism.mode_distance`), under add/remove the least number of
  rows to add or remove (:func:`add_remove_mode_distance`). Δ(D_f) = c (D_f is a
  distance to a set, so one step moves it by at most 1), not monotone: scale 2c/ε.
  1/4-optimal for P[exact answer] among unbiased mechanisms (Asi & Duchi 2020).

  Under add/remove the substitution distance was used before issue 18: a substitution
  closes the gap to the leader by 2 where an addition or removal closes it by 1, so that
  D_f was about half the gap at the same sensitivity, and the selection twice as noisy as
  with the add/remove distance. Even so the inverse sensitivity mechanism is never more
  accurate for the mode than the exponential mechanism on the counts: D_f ≤ g + 1 for a
  count gap g (add g + 1 rows to t) with scale 2c/ε, against g with scale c/ε (monotone
  counts) under add/remove; D_f ≥ g/2 with scale 2c/ε against g with scale 2c/ε under
  substitution. The notes say so.

Prediction: the gap in rows between the true mode's count and the released category's,
at most s·(ln K + t) with probability ≥ 1 − e^{−t} for report-noisy-max of scale s over
K categories (each category of gap g is selected with probability ≤ e^{−g/s}, for Gumbel
and for permute-and-flip; union bound). Hence the 95% bound s·ln(K/0.05) and, since
E[g²] = ∫ 2t P(g > t) dt ≤ v₀² + 2(s·v₀ + s²) with v₀ = s ln K, the RMSE bound
s·√((ln K + 1)² + 1). For the inverse sensitivity mechanism the bound is on D_f, and a
category of count gap g needs at least g/2 changes under substitution (each change closes
the gap to the leader by at most 2), at least g additions or removals under add/remove
(each closes it by at most 1), so the gap is at most twice (substitution) or once
(add/remove) the D_f bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError
from planner.data import requests as rq
from planner.data.requests import BinCounts
from planner.data.schema import ColumnKind, Relation, Schema
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.mechanisms.ism import mode_distance
from planner.planning.queries import Query, QueryKind, QueryPart
from planner.planning.statistics.base import (
    BETA,
    Aggregate,
    FloatArray,
    ItemRelease,
    MechanismSpec,
    Part,
    Prediction,
    Statistic,
    one_draw,
    prediction,
    wrong_aggregate,
)
from planner.planning.statistics.histogram import labels
from planner.planning.statistics.quantile import EM_SPEC, selection_noise
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.planning.allocation import ItemAllocation

M = MechanismName


def _monotone(q: Query, schema: Schema) -> bool:
    return q.mechanism is M.EXPONENTIAL and schema.relation is Relation.ADD_REMOVE


def noise_scale(q: Query, schema: Schema, epsilon: float) -> float:
    """The report-noisy-max scale at ε: c/ε (monotone counts), else 2c/ε."""
    return (1.0 if _monotone(q, schema) else 2.0) * schema.c / epsilon


def _gap_factor(q: Query, schema: Schema) -> float:
    """Rows of count gap per unit of the selection's score: 1 (counts, or D_f under
    add/remove), 2 (D_f under substitution)."""
    return 2.0 if q.mechanism is M.INVERSE_SENSITIVITY and schema.relation is Relation.SUBSTITUTE else 1.0


def add_remove_mode_distance(counts: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """D_f(x, t) for the mode under add/remove: the least number of rows to add or remove
    for t to become the mode (ties go to the smallest index). DATA-DEPENDENT.

    Notes
    -----
    Adding rows anywhere but t, or removing rows from t, never helps. With k rows added
    to t, t wins iff c_j ≤ c_t + k − [j < t] for every j ≠ t, which takes
    max(0, c_j − c_t − k + [j < t]) removals from j, so

        D_f(x, t) = min over k ≥ k₀ of  k + Σ_{j≠t} max(0, c_j − c_t − k + [j < t]),

    with k₀ = max(0, 1 − c_t) when some category precedes t (an empty t cannot beat an
    earlier category, however many rows it loses), else 0. The objective is convex and
    piecewise linear in k with breakpoints at c_j − c_t + [j < t], so its minimum is at
    k₀ or at one of them. Each addition or removal closes t's gap to any one category by
    at most 1, so D_f ≥ the count gap g to the leader.

    Examples
    --------
    By hand for counts (5, 3, 0): t = 1 needs 3 steps (add 3 rows to it: (5, 6, 0); or
    remove 3 from category 0: (2, 3, 0)); t = 2 needs 6 (add 6 rows: 5 < 6 and 3 < 6).

    >>> add_remove_mode_distance([5, 3, 0]).tolist()
    [0, 3, 6]
    """
    c = np.asarray(counts, dtype=np.int64).reshape(-1)
    if c.size == 0 or np.any(c < 0):
        raise QueryError("counts must be a non-empty array of non-negative integers.")
    out = np.empty(c.size, dtype=np.int64)
    idx = np.arange(c.size)
    for t in range(c.size):
        earlier = (idx < t).astype(np.int64)
        need = np.delete(c - c[t] + earlier, t)  # c_j − c_t + [j < t], j ≠ t
        k0 = max(0, 1 - int(c[t])) if t > 0 else 0
        ks = np.unique(np.concatenate([[k0], need[need >= k0]]))
        cost = ks + np.maximum(need[None, :] - ks[:, None], 0).sum(axis=1)
        out[t] = int(cost.min())
    return out


def ism_scores(counts: npt.ArrayLike, schema: Schema) -> npt.NDArray[np.int64]:
    """−D_f(x, t) for every category in the schema's relation (the ISM's utility)."""
    if schema.relation is Relation.SUBSTITUTE:
        return np.asarray(-mode_distance(counts).distance, dtype=np.int64)
    return np.asarray(-add_remove_mode_distance(counts), dtype=np.int64)


class Mode(Statistic):
    kind: ClassVar[QueryKind] = QueryKind.MODE
    label: ClassVar[str] = "Most common category"
    summary: ClassVar[str] = "Which declared category has the most rows."
    mechanisms = (
        EM_SPEC,
        MechanismSpec(M.INVERSE_SENSITIVITY, "Inverse sensitivity mechanism",
                      "Scores each category by how many rows must change for it to win (Asi & Duchi 2020)."),
    )
    not_offered: ClassVar[Mapping[MechanismName, str]] = {M.REPORT_NOISY_MAX: "report noisy max with Gumbel noise is the exponential mechanism: use 'exponential'."}
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN})
    column_hint: ClassVar[str] = "a categorical or boolean column (or a histogram for numbers)"

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        out: tuple[str, ...] = (
            "Report noisy max with Gumbel noise is the exponential mechanism (one mechanism, shown once); "
            "under basic or advanced composition it is released with exponential noise "
            "(permute-and-flip), which is never less accurate.",)
        if q.mechanism is M.INVERSE_SENSITIVITY:
            out += ("For the most common category the inverse sensitivity mechanism is never more accurate than "
                    "the exponential mechanism on the counts (its scores change by at most one row's worth of "
                    "the gap per step but need twice the noise"
                    + (", and the counts need no factor 2 when rows are only added or removed" if
                       schema.relation is Relation.ADD_REMOVE else "")
                    + "): choose it to see its optimality, the exponential mechanism for accuracy.",)
        return out

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("mode", Sensitivity(schema.c, schema.c), size=len(labels(q, schema)), utility=True),)

    def unit(self, q: Query, schema: Schema) -> str:
        return "rows (gap to the true mode)"

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        return None if schema.public_n is None else float(schema.public_n) / max(len(labels(q, schema)), 1)

    def _rmse_at_unit_epsilon(self, q: Query, schema: Schema) -> float:
        k = len(labels(q, schema))
        return _gap_factor(q, schema) * noise_scale(q, schema, 1.0) * math.sqrt((math.log(k) + 1.0) ** 2 + 1.0)

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        # the allocator (and the accountants) are imported after a release's first read
        from planner.planning.allocation import Family, Item

        fam = Family.EXPONENTIAL if q.mechanism is M.EXPONENTIAL else Family.PURE
        coef = self._rmse_at_unit_epsilon(q, schema) ** 2  # RMSE ∝ 1/ε
        return [Part(q, Item(q.id, fam, coef, weight=weight, error_scale=scale), "mode")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        k = len(labels(q, schema))
        s = noise_scale(q, schema, share.theta)
        kind = selection_noise(part.item.family, rule)
        rmse = self._rmse_at_unit_epsilon(q, schema) / share.theta
        bound = _gap_factor(q, schema) * s * (math.log(k) + math.log(1 / BETA))
        return prediction(part, share, noise={"epsilon": share.theta, f"{kind}_scale": s}, scales={"scores": s},
                          rmse=rmse, bound=bound, unit=self.unit(q, schema), bound_kind="at most")

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.Bins(q.column or ""),)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        from planner.privacy.noise import (  # OpenDP is imported on the first release only
            Measure,
            noisy_max,
        )

        q = part.query
        labs = labels(q, schema)
        gumbel = selection_noise(part.item.family, rule) == "gumbel"
        comp = noisy_max("scores", schema.c, noise_scale(q, schema, share.theta),
                         Measure.ZCDP if gumbel else Measure.MAX_DIVERGENCE, monotonic=_monotone(q, schema))
        ism = q.mechanism is M.INVERSE_SENSITIVITY

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, BinCounts):
                raise wrong_aggregate(q, agg)
            counts = np.asarray(agg.counts, dtype=np.int64)
            scores = ism_scores(counts, schema) if ism else counts
            idx = int(comp.invoke(np.asarray(scores, dtype=np.int64)))
            return {"value": labs[idx]}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, BinCounts):
            raise wrong_aggregate(q, agg)
        cats = agg.as_array()
        scores = (ism_scores(cats, schema) if q.mechanism is M.INVERSE_SENSITIVITY else cats).astype(np.float64)
        noise = "gumbel" if "gumbel_scale" in pred.noise else "exponential"
        idx = em.report_noisy_max(scores, pred.scales["scores"], runs, rng, noise)
        return np.asarray(cats.max() - cats[idx], dtype=np.float64)
