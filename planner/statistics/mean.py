"""Mean of a numeric column: noisy sum ÷ noisy count, or sum ÷ a public row count.

``sum_over_count`` (default): the clipped sum S and the count C are released with
independent noise and the mean is clip(S̃/max(C̃, 1), L, U) (Borealis AI's tutorial,
example 4: about 400× more accurate than the naive "average with Δ = U" there).
``public_n``: under the substitute relation the row count n is public, the mean S/n has
sensitivity Δ_S/n and one noisy number is released.

Error model (sum over count), data-independent: by the delta method the error is
≈ (N_S − μ·N_C)/n with μ the true mean; with |μ| ≤ m = max(|L|, |U|) its variance is at
most (Var N_S + m² Var N_C)/n², the value predicted ("at most": worst case over μ,
first order in the noise).

Budget split (sum over count). Laplace: minimising 2a²/ε_S² + 2b²/ε_C² (a = Δ_S,
b = m·Δ_C) subject to ε_S + ε_C = ε gives ε_S/ε_C = (a/b)^{2/3}
(:func:`planner.allocation._mean_split`). Gaussian: minimising a₂²/(2ρ_S) + b₂²/(2ρ_C)
subject to ρ_S + ρ_C = ρ (Lagrange: a₂²/ρ_S² = b₂²/ρ_C²) gives ρ_S/ρ_C = a₂/b₂ and
MSE = (a₂ + b₂)²/(2ρ n²), with a₂, b₂ the L2 sensitivities (b₂ = m·Δ₂(C)); zCDP
composes the two Gaussians by adding ρ (Bun & Steinke 2016, Lemma 2.3). ∎
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from scipy import optimize

from planner.allocation import Family, Item, ItemAllocation
from planner.backends.base import CountAggregate, MeanAggregate
from planner.budget import CompositionRule
from planner.errors import QueryError
from planner.mechanisms.base import MechanismName, Sensitivity
from planner.mechanisms.registry import additive
from planner.queries import MeanMode, Query, QueryKind, QueryPart
from planner.schema import ColumnKind, Relation, Schema
from planner.statistics import _additive as add
from planner.statistics.base import (
    BETA,
    FloatArray,
    ItemRelease,
    OptionSpec,
    OptionType,
    Part,
    Prediction,
    Statistic,
    column_of,
    need_public_n,
    one_draw,
    prediction,
    scaled_sensitivity,
    share_epsilon,
    wrong_aggregate,
)
from planner.statistics.sum import mid_magnitude, sum_sensitivity

if TYPE_CHECKING:
    from planner.backends.base import Aggregate, Backend
    from planner.ledger import JSON
    from planner.noise import Component, Draw

M = MechanismName
_Z95 = 1.959963984540054


def laplace_difference_bound(b1: float, b2: float, beta: float) -> float:
    """t with P(|X₁ + X₂| > t) = β for independent Laplace(b₁), Laplace(b₂).

    P(|X₁+X₂| > t) = (b₁²e^{−t/b₁} − b₂²e^{−t/b₂})/(b₁² − b₂²) for b₁ ≠ b₂ (the
    convolution of two Laplace densities), and (1 + t/(2b))e^{−t/b} when equal.

    Examples
    --------
    >>> round(laplace_difference_bound(1.0, 0.0, 0.05), 6)  # one Laplace: ln 20
    2.995732
    """
    if b2 <= 0:
        return b1 * math.log(1.0 / beta)
    if abs(b1 - b2) <= 1e-9 * max(b1, b2):
        b = (b1 + b2) / 2

        def tail(t: float) -> float:
            return (1 + t / (2 * b)) * math.exp(-t / b) - beta

    else:

        def tail(t: float) -> float:
            return (b1**2 * math.exp(-t / b1) - b2**2 * math.exp(-t / b2)) / (b1**2 - b2**2) - beta

    hi = (b1 + b2) * math.log(2.0 / beta) + 1.0
    return float(optimize.brentq(tail, 0.0, hi, xtol=1e-12 * hi))


def _bound_magnitude(q: Query, schema: Schema) -> float:
    lo, hi = column_of(q, schema).bounds
    return max(abs(lo), abs(hi))


def _public_n(q: Query) -> bool:
    return q.mode is MeanMode.PUBLIC_N


@dataclass(frozen=True, slots=True)
class RatioModel:
    """The sum-over-count mean's mathematics for given sensitivities (one mean, or the
    vectors of a grouped mean): the allocation item, the noise scales at a share, the
    prediction and the OpenDP components. ``m`` = max(|L|, |U|), ``n`` the public (or
    assumed) number of rows the mean is over.
    """

    mech: MechanismName
    sum_sens: Sensitivity
    count_sens: Sensitivity
    m: float
    n: float

    def item(self, pid: str, weight: float, scale: float) -> Item:
        if self.mech is M.LAPLACE:
            a, b = self.sum_sens.l1, self.m * self.count_sens.l1
            coef = 2.0 * (a ** (2 / 3) + b ** (2 / 3)) ** 3 / self.n**2
            return Item(pid, Family.MEAN_LAPLACE, coef, sensitivity=a, weight=weight, error_scale=scale, part_b=b)
        a2, b2 = self.sum_sens.l2, self.m * self.count_sens.l2
        return Item(pid, Family.DISCRETE_GAUSSIAN, (a2 + b2) ** 2 / (2.0 * self.n**2), weight=weight, error_scale=scale)

    def scales(self, share: ItemAllocation) -> tuple[float, float, float, float]:
        """(sum scale, count scale, ρ_sum, ρ_count) at ``share``: b = Δ₁/ε for Laplace;
        σ = Δ₂/√(2ρ) for Gaussian with ρ split ∝ a₂ : b₂ (module docstring); ρ's 0 for Laplace."""
        if self.mech is M.LAPLACE:
            eps_c = share_epsilon(share, 1) if len(share.spends) > 1 else math.inf
            return self.sum_sens.l1 / share_epsilon(share, 0), self.count_sens.l1 / eps_c, 0.0, 0.0
        a2, b2 = self.sum_sens.l2, self.m * self.count_sens.l2
        rho_s, rho_c = share.theta * a2 / (a2 + b2), share.theta * b2 / (a2 + b2)
        return (self.sum_sens.l2 / math.sqrt(2 * rho_s), self.count_sens.l2 / math.sqrt(2 * rho_c), rho_s, rho_c)

    def predict(self, part: Part, share: ItemAllocation, unit: str) -> Prediction:
        s_scale, c_scale, rho_s, rho_c = self.scales(share)
        m, n = self.m, self.n
        if self.mech is M.LAPLACE:
            noise = {"sum_laplace_scale": s_scale, "count_laplace_scale": c_scale}
            rmse = math.sqrt(2 * s_scale**2 + 2 * (m * c_scale) ** 2) / n
            bound = laplace_difference_bound(s_scale, m * c_scale, BETA) / n
        else:
            noise = {"sum_sigma": s_scale, "count_sigma": c_scale, "rho_sum": rho_s, "rho_count": rho_c}
            rmse = math.sqrt(s_scale**2 + (m * c_scale) ** 2) / n
            bound = _Z95 * rmse
        return prediction(part, share, noise=noise, scales={"sum": s_scale, "count": c_scale}, rmse=rmse,
                          bound=bound, unit=unit, bound_kind="at most")

    def components(self, part: Part, share: ItemAllocation, *, vector: bool) -> tuple[Component, Component, tuple[Draw, ...]]:
        """The sum and count measurements and the draws the ledger records (two Laplace
        spends, or one Gaussian spend of the total ρ)."""
        from planner.noise import gaussian, laplace  # OpenDP is imported on the first release only

        s_scale, c_scale, _, _ = self.scales(share)
        if self.mech is M.LAPLACE:
            if len(share.spends) != 2:
                raise QueryError(f"query {part.query.id!r}: a mean as sum / count needs two Laplace spends.")
            comp_s = laplace("sum", self.sum_sens.l1, s_scale, integer=False, vector=vector)
            comp_c = laplace("count", self.count_sens.l1, c_scale, integer=False, vector=vector)
            return comp_s, comp_c, (one_draw(part, share, [comp_s], 0, f"{share.id}:sum"),
                                    one_draw(part, share, [comp_c], 1, f"{share.id}:count"))
        comp_s = gaussian("sum", self.sum_sens.l2, s_scale, integer=False, vector=vector)
        comp_c = gaussian("count", self.count_sens.l2, c_scale, integer=False, vector=vector)
        return comp_s, comp_c, (one_draw(part, share, [comp_s, comp_c]),)


def ratio(noisy_sum: float, noisy_count: float, lo: float, hi: float) -> float:
    """The released mean: clip(S̃ / max(C̃, 1), L, U) (post-processing)."""
    return min(max(noisy_sum / max(noisy_count, 1.0), lo), hi)


class Mean(Statistic):
    kind: ClassVar[QueryKind] = QueryKind.MEAN
    label: ClassVar[str] = "Mean"
    summary: ClassVar[str] = "The average of a numeric column, as a noisy sum over a noisy count (or over a public n)."
    mechanisms = add.REAL_MECHANISMS
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.NUMERIC})
    column_hint: ClassVar[str] = "a numeric column"
    options = (
        OptionSpec("mode", OptionType.CHOICE, "How the mean is released",
                   "sum_over_count: noisy sum ÷ noisy count (the budget split optimally between them); "
                   "public_n: sum ÷ the declared public row count (substitute relation only).",
                   default=MeanMode.SUM_OVER_COUNT.value, choices=tuple(m.value for m in MeanMode)),
    )

    def check_schema(self, q: Query, schema: Schema) -> None:
        if _public_n(q):
            if schema.relation is not Relation.SUBSTITUTE:
                raise QueryError(
                    f"{q.where}: 'mean with public n' is defined under the substitute relation "
                    "only (n changes under add/remove); use mode 'sum_over_count' or switch "
                    "the schema's relation to 'substitute'."
                )
            if schema.public_n is None:
                raise QueryError(
                    f"{q.where}: 'mean with public n' needs the schema's public_n; declare it "
                    "or use mode 'sum_over_count'."
                )

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        d = sum_sensitivity(q, schema)
        if _public_n(q):
            assert schema.public_n is not None
            return (QueryPart("mean", scaled_sensitivity(d, schema.public_n)),)
        return (QueryPart("sum", d), QueryPart("count", Sensitivity(schema.c, schema.c)))

    def unit(self, q: Query, schema: Schema) -> str:
        return f"{q.column} units"

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        return None if schema.public_n is None else mid_magnitude(q, schema)

    def model(self, q: Query, schema: Schema) -> RatioModel:
        s_part, c_part = self.parts(q, schema)
        return RatioModel(q.mechanism, s_part.sensitivity, c_part.sensitivity, _bound_magnitude(q, schema),
                          float(need_public_n(q, schema)))

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        if _public_n(q):
            return [Part(q, add.item(q.id, q.mechanism, self.parts(q, schema)[0].sensitivity, weight, scale), "mean")]
        return [Part(q, self.model(q, schema).item(q.id, weight, scale), q.id)]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        unit = self.unit(q, schema)
        if _public_n(q):
            return add.predict(part, share, q.mechanism, self.parts(q, schema)[0].sensitivity, unit, component="mean")
        return self.model(q, schema).predict(part, share, unit)

    def aggregate(self, q: Query, backend: Backend) -> Aggregate:
        s = backend.clipped_sum(q.column or "")
        pn = backend.schema.public_n if _public_n(q) else None
        return MeanAggregate(s, CountAggregate(s.n, s.dropped), pn)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        lo, hi = column_of(q, schema).bounds
        if _public_n(q):
            assert schema.public_n is not None
            n_pub = schema.public_n
            comp = add.component("mean", q.mechanism, self.parts(q, schema)[0].sensitivity, share,
                                 integer_data=False, vector=False)

            def answer_pub(agg: Aggregate) -> dict[str, JSON]:
                if not isinstance(agg, MeanAggregate):
                    raise wrong_aggregate(q, agg)
                v = float(comp.invoke(agg.sum.value / n_pub))
                return {"value": v, "clipped_to_bounds": min(max(v, lo), hi)}

            return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer_pub, comp.constructor)
        comp_s, comp_c, draws = self.model(q, schema).components(part, share, vector=False)

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, MeanAggregate):
                raise wrong_aggregate(q, agg)
            s = float(comp_s.invoke(agg.sum.value))
            n = float(comp_c.invoke(agg.count.value))
            return {"value": ratio(s, n, lo, hi), "noisy_sum": s, "noisy_count": n}

        return ItemRelease(part, share, pred, draws, answer, f"{comp_s.constructor} / {comp_c.constructor}")

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, MeanAggregate):
            raise wrong_aggregate(q, agg)
        lo, hi = column_of(q, schema).bounds
        if _public_n(q):
            n_pub = float(agg.public_n or schema.public_n or 0)
            if n_pub <= 0:
                raise QueryError(f"query {q.id!r}: a mean over the public n needs 'public_n' in the schema.")
            true = agg.sum.value / n_pub
            return add.simulate(q.mechanism, true, pred.scales["mean"], runs, rng)
        s, c = float(agg.sum.value), float(agg.count.value)
        true = s / c if c > 0 else (lo + hi) / 2
        noise = additive(q.mechanism)
        s_t = noise.simulate(s, pred.scales["sum"], runs, rng)
        cs = pred.scales["count"]
        c_t = noise.simulate(c, cs, runs, rng) if math.isfinite(cs) and cs > 0 else np.full(runs, c)
        return np.asarray(np.clip(s_t / np.maximum(c_t, 1.0), lo, hi) - true, dtype=np.float64)
