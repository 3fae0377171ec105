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
* **inverse_sensitivity** — report-noisy-max on −D_f(x, t), the least number of rows to
  change for t to become the mode (:func:`planner.mechanisms.ism.mode_distance`);
  Δ(D_f) = c, not monotone: scale 2c/ε. 1/4-optimal for P[exact answer] among unbiased
  mechanisms (Asi & Duchi 2020).

Prediction: the gap in rows between the true mode's count and the released category's,
at most s·(ln K + t) with probability ≥ 1 − e^{−t} for report-noisy-max of scale s over
K categories (each category of gap g is selected with probability ≤ e^{−g/s}, for Gumbel
and for permute-and-flip; union bound). Hence the 95% bound s·ln(K/0.05) and, since
E[g²] = ∫ 2t P(g > t) dt ≤ v₀² + 2(s·v₀ + s²) with v₀ = s ln K, the RMSE bound
s·√((ln K + 1)² + 1). For the inverse sensitivity mechanism the bound is on D_f, and a
category of count gap g needs at least g/2 changes (each change closes the gap to the
leader by at most 2), so the gap is at most twice the D_f bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from planner.allocation import Family, Item, ItemAllocation
from planner.backends.base import BinCounts
from planner.budget import CompositionRule
from planner.mechanisms import exponential as em
from planner.mechanisms.base import MechanismName, Sensitivity
from planner.mechanisms.ism import mode_distance
from planner.queries import Query, QueryKind, QueryPart
from planner.schema import ColumnKind, Relation, Schema
from planner.statistics.base import (
    BETA,
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
from planner.statistics.histogram import labels
from planner.statistics.quantile import EM_SPEC, selection_noise

if TYPE_CHECKING:
    from planner.backends.base import Aggregate, Backend
    from planner.ledger import JSON

M = MechanismName


def _monotone(q: Query, schema: Schema) -> bool:
    return q.mechanism is M.EXPONENTIAL and schema.relation is Relation.ADD_REMOVE


def noise_scale(q: Query, schema: Schema, epsilon: float) -> float:
    """The report-noisy-max scale at ε: c/ε (monotone counts), else 2c/ε."""
    return (1.0 if _monotone(q, schema) else 2.0) * schema.c / epsilon


def _gap_factor(q: Query) -> float:
    """Rows of count gap per unit of the selection's score: 1 (counts), 2 (D_f)."""
    return 2.0 if q.mechanism is M.INVERSE_SENSITIVITY else 1.0


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
        return ("Report noisy max with Gumbel noise is the exponential mechanism (one mechanism, shown once); "
                "under basic or advanced composition it is released with exponential noise "
                "(permute-and-flip), which is never less accurate.",)

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("mode", Sensitivity(schema.c, schema.c), size=len(labels(q, schema)), utility=True),)

    def unit(self, q: Query, schema: Schema) -> str:
        return "rows (gap to the true mode)"

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        return None if schema.public_n is None else float(schema.public_n) / max(len(labels(q, schema)), 1)

    def _rmse_at_unit_epsilon(self, q: Query, schema: Schema) -> float:
        k = len(labels(q, schema))
        return _gap_factor(q) * noise_scale(q, schema, 1.0) * math.sqrt((math.log(k) + 1.0) ** 2 + 1.0)

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        fam = Family.EXPONENTIAL if q.mechanism is M.EXPONENTIAL else Family.PURE
        coef = self._rmse_at_unit_epsilon(q, schema) ** 2  # RMSE ∝ 1/ε
        return [Part(q, Item(q.id, fam, coef, weight=weight, error_scale=scale), "mode")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        k = len(labels(q, schema))
        s = noise_scale(q, schema, share.theta)
        kind = selection_noise(part.item.family, rule)
        rmse = self._rmse_at_unit_epsilon(q, schema) / share.theta
        bound = _gap_factor(q) * s * (math.log(k) + math.log(1 / BETA))
        return prediction(part, share, noise={"epsilon": share.theta, f"{kind}_scale": s}, scales={"scores": s},
                          rmse=rmse, bound=bound, unit=self.unit(q, schema), bound_kind="at most")

    def aggregate(self, q: Query, backend: Backend) -> Aggregate:
        return backend.bin_counts(q.column or "")

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        from planner.noise import Measure, noisy_max  # OpenDP is imported on the first release only

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
            scores = -mode_distance(counts).distance if ism else counts
            idx = int(comp.invoke(np.asarray(scores, dtype=np.int64)))
            return {"value": labs[idx]}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, BinCounts):
            raise wrong_aggregate(q, agg)
        cats = agg.as_array()
        scores = (-mode_distance(cats).distance if q.mechanism is M.INVERSE_SENSITIVITY else cats).astype(np.float64)
        noise = "gumbel" if "gumbel_scale" in pred.noise else "exponential"
        idx = em.report_noisy_max(scores, pred.scales["scores"], runs, rng, noise)
        return np.asarray(cats.max() - cats[idx], dtype=np.float64)
