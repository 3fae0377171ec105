"""Mean of a numeric column: noisy centred sum ÷ noisy count, or ÷ a public row count.

Both modes release the **centred** sum S' = Σ (clip(x, L, U) − m₀) with m₀ = (L + U)/2,
the midpoint of the declared bounds (computed from the backend's exact clipped sum S and
count C as S − m₀·C), and add m₀ back after the noise (post-processing):

``sum_over_count`` (default): S' and the count C are released with independent noise and
the mean is clip(m₀ + S̃'/max(C̃, 1), L, U) (Borealis AI's tutorial, example 4).
``public_n``: the mean is m₀ + S̃'/n with n the declared public row count, one noisy
number. Under substitution n is the table's row count. Under add/remove the release is
ε-DP whatever the table holds, and exact in expectation when the table has n usable rows;
otherwise it is biased by (μ − m₀)(C − n)/n (the C − n missing or extra rows counted
at the midpoint): use it when the public n is the true one (a census count, a register).

Sensitivity of S' (c = rows per privacy unit, w = U − L). Each term clip(x) − m₀ lies in
[−w/2, w/2]. Add/remove: one unit adds or removes at most c terms, Δ₁ = Δ₂ = c·w/2.
Substitute: the removed unit's terms total in [−c·w/2, c·w/2] and so do the added
unit's, Δ₁ = Δ₂ = c·w (with either missing-value rule: a dropped row contributes no
term, a replaced one a term in the same range). ∎ Never larger than the uncentred sum's
(:func:`planner.planning.statistics.sum.sum_sensitivity`: c·max(|L|, |U|) ≥ c·w/2 under
add/remove, and max(U, cU) − min(L, cL) ≥ c·w under substitution): for bounds [0, U]
it is half, and the count's error enters multiplied by |μ − m₀| ≤ w/2 instead of
|μ| ≤ max(|L|, |U|), so the mean's error halves (issue 18: OpenDP's Context mean, which
sums uncentred values, is then about twice as noisy).

Error model (sum over count), data-independent: by the delta method the error is
≈ (N_S − (μ − m₀)·N_C)/n with μ the true mean; with |μ − m₀| ≤ m = w/2 its variance is
at most (Var N_S + m² Var N_C)/n², the value predicted ("at most": worst case over μ,
first order in the noise).

Budget split (sum over count). Laplace: minimising 2a²/ε_S² + 2b²/ε_C² (a = Δ_S,
b = m·Δ_C) subject to ε_S + ε_C = ε gives ε_S/ε_C = (a/b)^{2/3}
(:func:`planner.planning.allocation._mean_split`). Gaussian: minimising a₂²/(2ρ_S) + b₂²/(2ρ_C)
subject to ρ_S + ρ_C = ρ (Lagrange: a₂²/ρ_S² = b₂²/ρ_C²) gives ρ_S/ρ_C = a₂/b₂ and
MSE = (a₂ + b₂)²/(2ρ n²), with a₂, b₂ the L2 sensitivities (b₂ = m·Δ₂(C)); zCDP
composes the two Gaussians by adding ρ (Bun & Steinke 2016, Lemma 2.3). ∎

Known residual: S − m₀·C is computed in floating point from the exact S, so the value
noised can differ from the exact centred sum by a few ulps of S (the same residual as a
float sum's; :mod:`planner.release`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError
from planner.core.rootfind import brentq
from planner.data import requests as rq
from planner.data.requests import CountAggregate, Result, SumAggregate
from planner.data.schema import ColumnKind, Relation, Schema

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.mechanisms.registry import additive
from planner.planning.queries import MeanMode, Query, QueryKind, QueryPart
from planner.planning.statistics import _additive as add
from planner.planning.statistics.base import (
    BETA,
    Aggregate,
    FloatArray,
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
    prediction,
    scaled_sensitivity,
    share_epsilon,
    wrong_aggregate,
)
from planner.planning.statistics.sum import mid_magnitude
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.planning.allocation import Item, ItemAllocation
    from planner.privacy.noise import Component, Draw

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
    return brentq(tail, 0.0, hi, xtol=1e-12 * hi)


def midpoint(q: Query, schema: Schema) -> float:
    """m₀ = (L + U)/2 of the query's column: the centre the mean's sum is taken about."""
    lo, hi = column_of(q, schema).bounds
    return (lo + hi) / 2


def half_width(q: Query, schema: Schema) -> float:
    """w/2 = (U − L)/2: the largest |clip(x) − m₀|, and the largest |μ − m₀|."""
    lo, hi = column_of(q, schema).bounds
    return (hi - lo) / 2


def centred_sum_sensitivity(q: Query, schema: Schema) -> Sensitivity:
    """Δ of the centred sum Σ (clip(x) − m₀) (module docstring): c·w/2 under add/remove,
    c·w under substitution.

    Examples
    --------
    >>> from planner.data.schema import Column, ColumnKind, Schema
    >>> s = Schema((Column("x", ColumnKind.NUMERIC, lower=0, upper=200_000),))
    >>> centred_sum_sensitivity(Query("m", "mean", "x", "laplace"), s).l1  # c·w/2, c = 1
    100000.0
    """
    lo, hi = column_of(q, schema).bounds
    d = schema.c * (hi - lo) * (1.0 if schema.relation is Relation.SUBSTITUTE else 0.5)
    return Sensitivity(d, d)


def _public_n(q: Query) -> bool:
    return q.mode is MeanMode.PUBLIC_N


@dataclass(frozen=True, slots=True)
class RatioModel:
    """The sum-over-count mean's mathematics for given sensitivities (one mean, or the
    vectors of a grouped mean): the allocation item, the noise scales at a share, the
    prediction and the OpenDP components. ``sum_sens`` is the centred sum's, ``m`` =
    w/2 (the largest |μ − m₀|), ``n`` the public (or assumed) number of rows the mean is
    over, ``shift`` = m₀.
    """

    mech: MechanismName
    sum_sens: Sensitivity
    count_sens: Sensitivity
    m: float
    n: float
    shift: float = 0.0  # m₀: the sum released is Σ (x − m₀), and m₀ is added back

    def centred(self, total: float | npt.NDArray[np.float64], count: float | npt.NDArray[np.float64]) -> Any:
        """The sum the release noises, S − m₀·C (from the exact aggregates)."""
        return total - self.shift * count

    def value(self, noisy_sum: float, noisy_count: float, lo: float, hi: float) -> float:
        """The released mean: clip(m₀ + S̃'/max(C̃, 1), L, U) (post-processing)."""
        return ratio(noisy_sum, noisy_count, lo - self.shift, hi - self.shift) + self.shift

    def item(self, pid: str, weight: float, scale: float) -> Item:
        # the allocator (and the accountants) are imported after a release's first read
        from planner.planning.allocation import Family, Item
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
        from planner.privacy.noise import (  # OpenDP is imported on the first release only
            gaussian,
            laplace,
        )

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
                   "public_n: sum ÷ the declared public row count, about half the error when that count "
                   "is the table's true one (under add/remove it is biased if the table holds a different "
                   "number of usable rows).",
                   default=MeanMode.SUM_OVER_COUNT.value, choices=tuple(m.value for m in MeanMode)),
    )

    def check_schema(self, q: Query, schema: Schema) -> None:
        if _public_n(q) and schema.public_n is None:
            raise QueryError(
                f"{q.where}: 'mean with public n' needs the schema's public_n; declare it "
                "or use mode 'sum_over_count'."
            )

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        if _public_n(q) and schema.relation is Relation.ADD_REMOVE:
            return ("The mean is the sum ÷ the declared public row count: exact in expectation when the table "
                    "holds that many usable rows; each missing or extra row shifts it by about "
                    "(mean − midpoint of the bounds) ÷ n.",)
        return ()

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        d = centred_sum_sensitivity(q, schema)
        if _public_n(q):
            assert schema.public_n is not None
            return (QueryPart("mean", scaled_sensitivity(d, schema.public_n)),)
        return (QueryPart("sum", d), QueryPart("count", Sensitivity(schema.c, schema.c)))

    def unit(self, q: Query, schema: Schema) -> str:
        return column_units(q, "units")

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        return None if schema.public_n is None else mid_magnitude(q, schema)

    def model(self, q: Query, schema: Schema) -> RatioModel:
        s_part, c_part = self.parts(q, schema)
        return RatioModel(q.mechanism, s_part.sensitivity, c_part.sensitivity, half_width(q, schema),
                          float(need_public_n(q, schema)), midpoint(q, schema))

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        if _public_n(q):
            return [Part(q, add.item(q.id, q.mechanism, self.parts(q, schema)[0].sensitivity, weight, scale), "mean")]
        return [Part(q, self.model(q, schema).item(q.id, weight, scale), q.id)]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        unit = self.unit(q, schema)
        if _public_n(q):  # exact when the table holds public n usable rows (under add/remove: a model)
            return add.predict(part, share, q.mechanism, self.parts(q, schema)[0].sensitivity, unit, component="mean",
                               bound_kind="model" if schema.relation is Relation.ADD_REMOVE else "exact")
        return self.model(q, schema).predict(part, share, unit)

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.ClippedSum(q.column or ""),)

    def aggregate_of(self, q: Query, schema: Schema, results: Sequence[Result]) -> Aggregate:
        """The clipped sum and the count of the same rows (its ``n``)."""
        (s,) = results
        if not isinstance(s, SumAggregate):
            raise wrong_aggregate(q, s)
        return MeanAggregate(s, CountAggregate(s.n, s.dropped), schema.public_n if _public_n(q) else None)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        q = part.query
        lo, hi = column_of(q, schema).bounds
        mid = midpoint(q, schema)
        if _public_n(q):
            assert schema.public_n is not None
            n_pub = schema.public_n
            comp = add.component("mean", q.mechanism, self.parts(q, schema)[0].sensitivity, share,
                                 integer_data=False, vector=False)

            def answer_pub(agg: Aggregate) -> dict[str, JSON]:
                if not isinstance(agg, MeanAggregate):
                    raise wrong_aggregate(q, agg)
                v = mid + float(comp.invoke((agg.sum.value - mid * agg.count.value) / n_pub))
                return {"value": v, "clipped_to_bounds": min(max(v, lo), hi)}

            return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer_pub, comp.constructor)
        model = self.model(q, schema)
        comp_s, comp_c, draws = model.components(part, share, vector=False)

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, MeanAggregate):
                raise wrong_aggregate(q, agg)
            s = float(comp_s.invoke(model.centred(agg.sum.value, agg.count.value)))
            n = float(comp_c.invoke(agg.count.value))
            return {"value": model.value(s, n, lo, hi), "noisy_centred_sum": s, "noisy_count": n,
                    "centre": mid}

        return ItemRelease(part, share, pred, draws, answer, f"{comp_s.constructor} / {comp_c.constructor}")

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        if not isinstance(agg, MeanAggregate):
            raise wrong_aggregate(q, agg)
        lo, hi = column_of(q, schema).bounds
        mid = midpoint(q, schema)
        if _public_n(q):
            n_pub = float(agg.public_n or schema.public_n or 0)
            if n_pub <= 0:
                raise QueryError(f"query {q.id!r}: a mean over the public n needs 'public_n' in the schema.")
            true = mid + (agg.sum.value - mid * agg.count.value) / n_pub
            return add.simulate(q.mechanism, true, pred.scales["mean"], runs, rng)
        s, c = float(agg.sum.value), float(agg.count.value)
        true = s / c if c > 0 else mid
        noise = additive(q.mechanism)
        s_t = noise.simulate(s - mid * c, pred.scales["sum"], runs, rng)
        cs = pred.scales["count"]
        c_t = noise.simulate(c, cs, runs, rng) if math.isfinite(cs) and cs > 0 else np.full(runs, c)
        est = mid + np.clip(s_t / np.maximum(c_t, 1.0), lo - mid, hi - mid)
        return np.asarray(est - true, dtype=np.float64)
