"""Releasing a plan: the ONLY module that draws released noise, and only through OpenDP.

Every released number comes from an OpenDP 0.16 measurement built here with
``dp.enable_features("contrib")`` and no other feature flag (never ``floating-point`` or
``honest-but-curious``). Mechanisms never see the DataFrame: they are fed the exact,
clipped aggregates a :class:`~planner.backends.base.Backend` computes (MATH.md §7), and
everything after the measurement (ratios, clamping at 0, normalising a histogram,
drawing a synthetic sample from it) is post-processing.

Order of a release (PRODUCT.md §5, enforced by :meth:`planner.ledger.Ledger.release`):

1. :func:`prepare` builds every measurement from the plan and the schema alone (no
   data) and asks OpenDP for its privacy loss at the query's sensitivity
   (``meas.map(d_in)``);
2. the spend recorded for each measurement is the planner's, or OpenDP's when OpenDP's
   is larger (rounding: it always rounds toward less privacy);
3. the ledger checks the budget and records the spends atomically;
4. ``sample()`` computes the aggregates and invokes the measurements;
5. the answers are stored; a second release of the same :func:`plan_hash` returns
   them without sampling.

Mechanism per family (θ is the item's allocation parameter)
-----------------------------------------------------------
============================  ===========================================================
planner family / event        OpenDP measurement (d_in = the schema's sensitivity)
============================  ===========================================================
LAPLACE / LaplaceEvent        ``make_laplace`` on a *float* atom or vector (counts cast to
                              float), b = Δ₁/θ. OpenDP's float Laplace samples exactly
                              on a 2^k grid (floating-point safe, MATH.md §9). The integer
                              (discrete) Laplace is NOT used here: its RDP curve is the
                              generic ε-DP curve, above the continuous Laplace's one the
                              planner composes under RDP.
DISCRETE_LAPLACE / Pure       ``make_laplace`` on an i32 atom or i32 vector, b = Δ₁/θ.
GAUSSIAN, DISCRETE_GAUSSIAN   ``make_gaussian`` (float for sums and means, i32 for counts
                              and bins), σ = Δ₂/√(2θ). OpenDP certifies ρ-zCDP; its
                              (ε, δ) is ``make_zCDP_to_approxDP``, so the spend records a
                              ``GaussianEvent(discrete=True)``.
EXPONENTIAL / Exponential     ``make_noisy_max`` on integer scores with L∞ sensitivity
                              d_in, scale 2·d_in/θ. basic/advanced: ``max_divergence``
                              (exponential noise = permute-and-flip, ε-DP), recorded as
                              ``PureEvent(ε)``; rdp/zcdp: ``zero_concentrated_divergence``
                              (Gumbel noise = the exponential mechanism, ρ = ε²/8),
                              recorded as ``ExponentialEvent(ε)``.
PURE (mode by ISM)            ``make_noisy_max`` (``max_divergence``) on −D_f(x, t),
                              d_in = c; ``PureEvent(ε)`` under every rule.
RANDOMIZED_RESPONSE           the proportion's count(s) by the i32 discrete Laplace at
                              ε = θ, recorded as ``PureEvent(ε)`` (see below).
============================  ===========================================================

Randomized response. OpenDP's ``make_randomized_response_bool`` is a *local* mechanism
applied per row; in the central model the released sum of reports comes with the number
of reports n, and n is private under add/remove (one more person, one more report), so
"RR per row, then aggregate" is not ε-DP under add/remove. The release therefore answers a
randomized-response proportion with the discrete Laplace on the proportion's count(s) at
the same ε: the same cost in every currency (a ``RandomizedResponseEvent`` of keep
probability p = e^ε/(1+e^ε) has exactly the generic ε-DP RDP curve,
:func:`planner.divergences.randomized_response_rdp`) and a smaller error than RR's, which
is predicted as an upper bound. RR remains a planning/demo mechanism (local model).

Proportions. Under add/remove the vector (n_true, n_false) has L1 sensitivity c (a
person's ≤ c rows each fall in one of the two bins), the same as the count of trues
alone, so both are released and the proportion is t̃/(t̃ + f̃) (post-processing). Under
substitute, (n_true, n_false) has L1 sensitivity 2c, so only n_true is released and the
proportion is t̃ / public_n, the planner's model.

Known residual. A float sum computed by the backend differs from the exact sum by float
rounding, so its sensitivity can exceed the declared Δ by a relative ~n·2⁻⁵³ (Casacuberta
et al. 2022, "Widespread underestimation of sensitivity in differentially private
libraries"). The backend, not this module, sums; see the release report.

References
----------
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
   Privacy", arXiv:2004.00010.
.. [MS20] R. McKenna, D. Sheldon, "Permute-and-Flip: A new mechanism for differentially
   private selection", NeurIPS 2020 (= report noisy max with exponential noise, Ding et
   al. 2021).
.. [CR21] M. Cesar, R. Rogers, "Bounding, Concentrating, and Truncating: Unifying Privacy
   Loss Composition for Data Analytics", arXiv:2004.07223 (exponential mechanism ρ = ε²/8).
.. [BS16] M. Bun, T. Steinke, arXiv:1605.02065, Prop. 1.4 (ε-DP ⇒ ε²/2-zCDP) and
   Lemma 2.3 (zCDP composes by adding ρ).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import opendp.prelude as dp

from planner.accounting import CompositionRule, Spend
from planner.allocation import Family, ItemAllocation
from planner.backends.base import (
    Aggregate,
    Backend,
    BinCounts,
    BooleanCounts,
    CountAggregate,
    MeanAggregate,
    QuantileAggregate,
    SumAggregate,
)
from planner.errors import ReleaseError
from planner.events import (
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
)
from planner.ledger import JSON, Ledger
from planner.mechanisms.base import MechanismName
from planner.mechanisms.ism import mode_distance
from planner.queries import MeanMode, Query, QueryKind
from planner.schema import Relation, Schema
from planner.workload import Part, Plan, Prediction

dp.enable_features("contrib")

__all__ = [
    "Draw",
    "PreparedRelease",
    "QueryAnswer",
    "ReleaseError",
    "ReleaseResult",
    "cmd_ledger",
    "cmd_release",
    "plan_hash",
    "prepare",
    "release",
]

#: Largest synthetic sample drawn from a perturbed histogram (post-processing; any size is ε-DP).
MAX_SYNTHETIC_ROWS: Final = 10_000
_I32_MAX: Final = 2**31 - 1
_I64_MAX: Final = 2**63 - 1
M = MechanismName


# --------------------------------------------------------------------------- invocation


def _map(measurement: dp.Measurement, d_in: float | int) -> Any:
    """OpenDP's privacy map at d_in (ε, ρ or an (ε, δ) pair)."""
    return measurement.map(d_in)  # type: ignore[no-untyped-call]


def _invoke(measurement: dp.Measurement, argument: Any) -> Any:
    """Invoke one OpenDP measurement: the only call that draws released noise.

    A separate function so tests can count (and forbid) invocations.
    """
    return measurement(argument)


# --------------------------------------------------------------------------- draws


@dataclass(frozen=True)
class Component:
    """One OpenDP measurement, its input sensitivity and what OpenDP says it costs."""

    name: str  # what it releases: "value", "sum", "count", "bins", "scores"
    measurement: dp.Measurement
    d_in: float | int
    constructor: str
    scale: float
    measure: str  # "max_divergence" or "zero_concentrated_divergence"
    cost: float  # ε (max divergence) or ρ (zCDP) at d_in, as OpenDP reports it

    def describe(self) -> dict[str, Any]:
        key = "epsilon" if self.measure == "max_divergence" else "rho"
        return {
            "releases": self.name,
            "constructor": self.constructor,
            "scale": self.scale,
            "d_in": float(self.d_in),
            "measure": self.measure,
            key: self.cost,
        }


@dataclass(frozen=True)
class Draw:
    """One ledger spend: the measurement(s) of one privacy event, planner's vs OpenDP's cost.

    ``planner`` is the spend the plan predicted; ``recorded`` is what the ledger records:
    the planner's unless OpenDP's loss is larger, then OpenDP's.
    """

    key: str
    item_id: str
    query_id: str
    components: tuple[Component, ...]
    planner: Spend
    recorded: Spend
    opendp_epsilon: float  # pure ε, or the (ε, δ) conversion's ε at the spend's δ, or inf
    opendp_rho: float  # ρ (zCDP measurements; ε²/2 for pure ones)

    @property
    def pure(self) -> bool:
        return all(c.measure == "max_divergence" for c in self.components)

    def describe(self) -> dict[str, Any]:
        r = self.recorded
        return {
            "spend": self.key,
            "opendp": [c.describe() for c in self.components],
            "epsilon": r.epsilon,
            "delta": r.delta,
            "rho": _finite_or_none(r.event.zcdp_rho),
            "event": r.event.to_dict(),
        }


@dataclass(frozen=True)
class _ItemRelease:
    part: Part
    share: ItemAllocation
    prediction: Prediction
    draws: tuple[Draw, ...]
    answer: Callable[[Aggregate], dict[str, JSON]]
    mechanism: str


@dataclass(frozen=True)
class PreparedRelease:
    """Everything about a release that needs no data: measurements, costs, predictions."""

    plan_hash: str
    schema_hash: str
    rule: CompositionRule
    items: tuple[_ItemRelease, ...]

    @property
    def draws(self) -> tuple[Draw, ...]:
        return tuple(d for it in self.items for d in it.draws)

    def spends(self) -> list[tuple[str, Spend]]:
        """``(key, recorded spend)`` for :meth:`planner.ledger.Ledger.release`."""
        return [(d.key, d.recorded) for d in self.draws]

    def queries(self) -> list[Query]:
        seen: dict[str, Query] = {}
        for it in self.items:
            seen.setdefault(it.part.query.id, it.part.query)
        return list(seen.values())

    def sample(self, backend: Backend) -> dict[str, JSON]:
        """Aggregate through the backend and invoke every measurement (draws noise)."""
        out: dict[str, dict[str, JSON]] = {}
        aggregates: dict[str, Aggregate] = {}
        for it in self.items:
            q = it.part.query
            if q.id not in aggregates:
                aggregates[q.id] = backend.aggregate(q)
            ans = it.answer(aggregates[q.id])
            if len(self._parts_of(q.id)) > 1:
                bucket = out.setdefault(q.id, {"parts": {}})
                parts = bucket["parts"]
                assert isinstance(parts, dict)
                parts[it.part.label] = ans
            else:
                out[q.id] = ans
        return dict(out)

    def _parts_of(self, query_id: str) -> list[_ItemRelease]:
        return [it for it in self.items if it.part.query.id == query_id]


# --------------------------------------------------------------------------- helpers


def _finite_or_none(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _laplace(name: str, d_in: float, scale: float, *, integer: bool, vector: bool) -> Component:
    """OpenDP Laplace (float: exact 2^k-grid sampler; i32: discrete Laplace)."""
    if integer:
        atom = dp.atom_domain(T="i32")
        if vector:
            dom, met, what = dp.vector_domain(atom), dp.l1_distance(T="i32"), "i32 vector"
        else:
            dom, met, what = atom, dp.absolute_distance(T="i32"), "i32"
        d: float | int = _as_int(d_in)
    else:
        atom = dp.atom_domain(T=float, nan=False)
        if vector:
            dom, met, what = dp.vector_domain(atom), dp.l1_distance(T=float), "float vector"
        else:
            dom, met, what = atom, dp.absolute_distance(T=float), "float"
        d = float(d_in)
    meas = dp.m.make_laplace(dom, met, scale=float(scale))
    return Component(name, meas, d, f"make_laplace({what})", float(scale), "max_divergence", float(_map(meas, d)))


def _gaussian(name: str, d_in: float, scale: float, *, integer: bool, vector: bool) -> Component:
    """OpenDP Gaussian (float: 2^k-grid sampler; i32: discrete Gaussian); ρ-zCDP."""
    atom = dp.atom_domain(T="i32") if integer else dp.atom_domain(T=float, nan=False)
    if vector:
        dom, met = dp.vector_domain(atom), dp.l2_distance(T=float)
    else:
        dom, met = atom, dp.absolute_distance(T=float)
    what = ("i32" if integer else "float") + (" vector" if vector else "")
    meas = dp.m.make_gaussian(dom, met, scale=float(scale))
    d = float(d_in)
    return Component(name, meas, d, f"make_gaussian({what})", float(scale), "zero_concentrated_divergence", float(_map(meas, d)))


def _noisy_max(name: str, d_in: int, scale: float, measure: str) -> Component:
    """OpenDP report-noisy-max on i64 scores with L∞ sensitivity d_in (not assumed monotone)."""
    out = dp.max_divergence() if measure == "max_divergence" else dp.zero_concentrated_divergence()
    meas = dp.m.make_noisy_max(
        dp.vector_domain(dp.atom_domain(T="i64")), dp.linf_distance(T="i64"), out, scale=float(scale)
    )
    noise = "exponential" if measure == "max_divergence" else "gumbel"
    return Component(name, meas, d_in, f"make_noisy_max(i64 scores, {noise} noise)", float(scale), measure, float(_map(meas, d_in)))


def _as_int(value: float) -> int:
    v = float(value)
    if v != math.floor(v):
        raise ReleaseError(f"an integer-domain mechanism needs an integer sensitivity; got {v:g}.")
    return int(v)


def _i32(values: Sequence[int] | npt.NDArray[Any], what: str) -> npt.NDArray[np.int32]:
    arr = np.asarray(values, dtype=np.int64)
    if arr.size and int(np.abs(arr).max()) > _I32_MAX - 10**6:
        raise ReleaseError(
            f"{what} is too large for OpenDP's 32-bit integers; use the 'laplace' or 'gaussian' "
            "mechanism (float) for this query."
        )
    return np.asarray(arr, dtype=np.int32)


def _zcdp_approx(meas: dp.Measurement, d_in: float, delta: float) -> float:
    """OpenDP's (ε, δ) of a zCDP measurement at d_in, ε at the given δ."""
    conv = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), delta=float(delta))
    eps, _ = _map(conv, d_in)
    return float(eps)


def _rho_approx(rho: float, delta: float) -> float:
    """OpenDP's (ε, δ) conversion of a total ρ (a Gaussian of scale 1 at d_in = √(2ρ)).

    Used for a composition of Gaussians (a mean's sum and count): zCDP composes by
    adding ρ [BS16, Lemma 2.3], which is what ``make_composition`` would compute.
    """
    meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0)
    d = math.sqrt(2.0 * rho)
    while float(_map(meas, d)) < rho:
        d = math.nextafter(d, math.inf)
    return _zcdp_approx(meas, d, delta)


def _laplace_event(eps: float) -> LaplaceEvent:
    nm = 1.0 / eps
    while LaplaceEvent(nm).pure_epsilon < eps:
        nm = math.nextafter(nm, 0.0)
    return LaplaceEvent(nm)


def _gaussian_event(rho: float) -> GaussianEvent:
    s = 1.0 / math.sqrt(2.0 * rho)
    while GaussianEvent(s, discrete=True).zcdp_rho < rho:
        s = math.nextafter(s, 0.0)
    return GaussianEvent(s, discrete=True)


def _exponential_event(rho: float, eps: float) -> ExponentialEvent:
    e = max(eps, math.sqrt(8.0 * rho))
    while e * e / 8.0 < rho:
        e = math.nextafter(e, math.inf)
    return ExponentialEvent(e)


def _make_draw(
    key: str,
    share: ItemAllocation,
    query_id: str,
    planner: Spend,
    components: Sequence[Component],
    rule: CompositionRule,
) -> Draw:
    """Compare OpenDP's loss with the planner's and build the spend the ledger records."""
    comps = tuple(components)
    pl_event = planner.event
    if all(c.measure == "max_divergence" for c in comps):
        eps_o = float(sum(c.cost for c in comps))
        eps_r = max(eps_o, float(pl_event.pure_epsilon))
        event: PrivacyEvent
        if isinstance(pl_event, LaplaceEvent):
            event = pl_event if eps_r <= pl_event.pure_epsilon else _laplace_event(eps_r)
        elif isinstance(pl_event, PureEvent):
            event = pl_event if eps_r <= pl_event.epsilon else PureEvent(eps_r)
        else:  # Exponential (PF) or randomized response answered by discrete Laplace
            event = PureEvent(eps_r)
        recorded = Spend(event, max(eps_r, float(planner.epsilon)), 0.0)
        return Draw(key, share.id, query_id, comps, planner, recorded, eps_o, eps_o**2 / 2.0)
    rho_o = float(sum(c.cost for c in comps))
    if isinstance(pl_event, ExponentialEvent):
        rho_r = max(rho_o, pl_event.zcdp_rho)
        event = pl_event if rho_r <= pl_event.zcdp_rho else _exponential_event(rho_r, pl_event.epsilon)
        recorded = Spend(event, max(event.pure_epsilon, float(planner.epsilon)), 0.0)
        return Draw(key, share.id, query_id, comps, planner, recorded, math.sqrt(8.0 * rho_o), rho_o)
    if not isinstance(pl_event, GaussianEvent):
        raise ReleaseError(f"query {query_id!r}: no OpenDP Gaussian release for a {type(pl_event).__name__}.")
    rho_r = max(rho_o, pl_event.zcdp_rho)
    g_event = _gaussian_event(rho_r)
    delta = float(planner.delta)
    if delta > 0:
        if len(comps) == 1:
            eps_o = _zcdp_approx(comps[0].measurement, comps[0].d_in, delta)
        else:
            eps_o = _rho_approx(rho_o, delta)
        eps_r = max(eps_o, float(planner.epsilon), g_event.approx_epsilon(delta))
    else:
        eps_o, eps_r = math.inf, float(planner.epsilon)
    recorded = Spend(g_event, eps_r, delta)
    return Draw(key, share.id, query_id, comps, planner, recorded, eps_o, rho_o)


def _selection_measure(family: Family, rule: CompositionRule) -> str:
    if family is Family.EXPONENTIAL and rule in (CompositionRule.RDP, CompositionRule.ZCDP):
        return "zero_concentrated_divergence"
    return "max_divergence"


def _alpha_fraction(alpha: float) -> Fraction:
    """α as a/b in lowest terms from its shortest decimal form (0.1 → 1/10)."""
    fr = Fraction(repr(float(alpha)))
    if fr.denominator > 10**6:
        fr = fr.limit_denominator(10**6)
    return fr


# --------------------------------------------------------------------------- per query


def _build_item(part: Part, share: ItemAllocation, pred: Prediction, schema: Schema, rule: CompositionRule) -> _ItemRelease:
    q = part.query
    kind = q.kind
    qparts = q.parts(schema)
    fam = share.family
    theta = share.theta
    spends = share.spends
    c = schema.c
    mech = q.mechanism

    def one(components: Sequence[Component], key: str | None = None, idx: int = 0) -> Draw:
        return _make_draw(key or share.id, share, q.id, spends[idx], components, rule)

    def additive(name: str, l1: float, l2: float, *, integer: bool, vector: bool) -> Component:
        # pure families are calibrated to the ε the planner records (for randomized
        # response ln(p/(1−p)), which differs from θ by float rounding only)
        if fam is Family.LAPLACE:
            return _laplace(name, l1, l1 / spends[0].event.pure_epsilon, integer=False, vector=vector)
        if fam in (Family.DISCRETE_LAPLACE, Family.RANDOMIZED_RESPONSE):
            return _laplace(name, l1, l1 / spends[0].event.pure_epsilon, integer=True, vector=vector)
        if fam in (Family.GAUSSIAN, Family.DISCRETE_GAUSSIAN):
            # the discrete Gaussian for integer aggregates the user asked it for; the
            # float (2^k-grid) Gaussian otherwise. Both are ρ-zCDP at the same ρ [CKS20].
            discrete = integer and mech is M.DISCRETE_GAUSSIAN
            return _gaussian(name, l2, l2 / math.sqrt(2.0 * theta), integer=discrete, vector=vector)
        raise ReleaseError(f"query {q.id!r}: family {fam.value!r} is not additive noise.")

    def invoke_scalar(comp: Component, value: float | int) -> float:
        if comp.constructor.startswith("make_laplace(i32") or comp.constructor.startswith("make_gaussian(i32"):
            return float(_invoke(comp.measurement, int(_i32([int(value)], "a count")[0])))
        return float(_invoke(comp.measurement, float(value)))

    def invoke_vector(comp: Component, values: Sequence[int]) -> list[float]:
        if "i32" in comp.constructor:
            arr: Any = _i32(values, "a bin count")
        else:
            arr = np.asarray(values, dtype=np.float64)
        return [float(v) for v in _invoke(comp.measurement, arr)]

    sens = qparts[0].sensitivity if len(qparts) == 1 or kind in (QueryKind.QUANTILE, QueryKind.MEDIAN) else None

    # ---------------- count
    if kind is QueryKind.COUNT:
        assert sens is not None
        comp = additive("count", sens.l1, sens.l2, integer=True, vector=False)
        draw = one([comp])

        def ans_count(agg: Aggregate) -> dict[str, JSON]:
            assert isinstance(agg, CountAggregate)
            v = invoke_scalar(comp, agg.value)
            return {"value": v, "nonnegative": max(v, 0.0)}

        return _ItemRelease(part, share, pred, (draw,), ans_count, comp.constructor)

    # ---------------- sum
    if kind is QueryKind.SUM:
        assert sens is not None
        comp = additive("sum", sens.l1, sens.l2, integer=False, vector=False)
        draw = one([comp])

        def ans_sum(agg: Aggregate) -> dict[str, JSON]:
            assert isinstance(agg, SumAggregate)
            return {"value": invoke_scalar(comp, agg.value)}

        return _ItemRelease(part, share, pred, (draw,), ans_sum, comp.constructor)

    # ---------------- mean
    if kind is QueryKind.MEAN:
        col = schema.column(q.column or "")
        lo, hi = col.bounds
        if q.mode is MeanMode.PUBLIC_N:
            assert sens is not None and schema.public_n is not None
            n_pub = schema.public_n
            comp = additive("mean", sens.l1, sens.l2, integer=False, vector=False)
            draw = one([comp])

            def ans_mean_pub(agg: Aggregate) -> dict[str, JSON]:
                assert isinstance(agg, MeanAggregate)
                v = invoke_scalar(comp, agg.sum.value / n_pub)
                return {"value": v, "clipped_to_bounds": min(max(v, lo), hi)}

            return _ItemRelease(part, share, pred, (draw,), ans_mean_pub, comp.constructor)
        s_part, c_part = qparts[0].sensitivity, qparts[1].sensitivity
        if fam is Family.MEAN_LAPLACE:
            if len(spends) != 2:
                raise ReleaseError(f"query {q.id!r}: a mean as sum / count needs two Laplace spends.")
            eps_s = spends[0].event.pure_epsilon
            eps_c = spends[1].event.pure_epsilon
            comp_s = _laplace("sum", s_part.l1, s_part.l1 / eps_s, integer=False, vector=False)
            comp_c = _laplace("count", c_part.l1, c_part.l1 / eps_c, integer=False, vector=False)
            draws: tuple[Draw, ...] = (one([comp_s], f"{share.id}:sum", 0), one([comp_c], f"{share.id}:count", 1))
        elif fam in (Family.GAUSSIAN, Family.DISCRETE_GAUSSIAN):
            col_m = max(abs(lo), abs(hi))
            a2, b2 = s_part.l2, col_m * c_part.l2
            rho_s, rho_c = theta * a2 / (a2 + b2), theta * b2 / (a2 + b2)
            comp_s = _gaussian("sum", s_part.l2, s_part.l2 / math.sqrt(2 * rho_s), integer=False, vector=False)
            comp_c = _gaussian("count", c_part.l2, c_part.l2 / math.sqrt(2 * rho_c), integer=False, vector=False)
            draws = (one([comp_s, comp_c]),)
        else:
            raise ReleaseError(f"query {q.id!r}: unsupported family {fam.value!r} for a mean.")

        def ans_mean(agg: Aggregate) -> dict[str, JSON]:
            assert isinstance(agg, MeanAggregate)
            s = invoke_scalar(comp_s, agg.sum.value)
            n = invoke_scalar(comp_c, agg.count.value)
            value = min(max(s / max(n, 1.0), lo), hi)
            return {"value": value, "noisy_sum": s, "noisy_count": n}

        return _ItemRelease(part, share, pred, draws, ans_mean, f"{comp_s.constructor} / {comp_c.constructor}")

    # ---------------- histogram and synthetic sample
    if kind in (QueryKind.HISTOGRAM, QueryKind.SYNTHETIC_SAMPLE):
        assert sens is not None
        labels = q.labels(schema)
        edges = q.edges(schema)
        comp = additive("bins", sens.l1, sens.l2, integer=True, vector=True)
        draw = one([comp])
        synthetic = kind is QueryKind.SYNTHETIC_SAMPLE

        def ans_hist(agg: Aggregate) -> dict[str, JSON]:
            assert isinstance(agg, BinCounts)
            if tuple(agg.labels) != tuple(labels):
                raise ReleaseError(f"query {q.id!r}: the backend's bins do not match the declared bins.")
            noisy = invoke_vector(comp, agg.counts)
            out: dict[str, JSON] = {"labels": list(labels), "counts": list(noisy)}
            if synthetic:
                out.update(_synthetic(noisy, edges))
            return out

        return _ItemRelease(part, share, pred, (draw,), ans_hist, comp.constructor)

    # ---------------- quantile / median
    if kind in (QueryKind.QUANTILE, QueryKind.MEDIAN):
        alpha = float(part.label.split("@")[1]) if "@" in part.label else 0.5
        fr = _alpha_fraction(alpha)
        a, b = fr.numerator, fr.denominator
        d_in = c * b
        measure = _selection_measure(fam, rule)
        comp = _noisy_max("scores", d_in, 2.0 * d_in / theta, measure)
        draw = one([comp])
        grid = q.candidate_grid(schema)

        def ans_quantile(agg: Aggregate) -> dict[str, JSON]:
            assert isinstance(agg, QuantileAggregate)
            scores = quantile_scores(agg, a, b)
            idx = int(_invoke(comp.measurement, scores))
            return {"alpha": alpha, "value": float(grid[idx])}

        return _ItemRelease(part, share, pred, (draw,), ans_quantile, comp.constructor)

    # ---------------- mode
    if kind is QueryKind.MODE:
        labels = q.labels(schema)
        measure = "max_divergence" if fam is Family.PURE else _selection_measure(fam, rule)
        comp = _noisy_max("scores", c, 2.0 * c / theta, measure)
        draw = one([comp])
        ism = mech is M.INVERSE_SENSITIVITY

        def ans_mode(agg: Aggregate) -> dict[str, JSON]:
            assert isinstance(agg, BinCounts)
            counts = np.asarray(agg.counts, dtype=np.int64)
            scores = -mode_distance(counts).distance if ism else counts
            idx = int(_invoke(comp.measurement, np.asarray(scores, dtype=np.int64)))
            return {"value": labels[idx]}

        return _ItemRelease(part, share, pred, (draw,), ans_mode, comp.constructor)

    # ---------------- proportion
    if kind is QueryKind.PROPORTION:
        assert sens is not None
        pair = schema.relation is Relation.ADD_REMOVE
        comp = additive("counts" if pair else "count", sens.l1, sens.l2, integer=True, vector=pair)
        draw = one([comp])
        n_prop = schema.public_n

        def ans_prop(agg: Aggregate) -> dict[str, JSON]:
            assert isinstance(agg, BooleanCounts)
            if pair:
                t, f = invoke_vector(comp, [agg.n_true, agg.n_false])
                tt, ff = max(t, 0.0), max(f, 0.0)
                p = tt / (tt + ff) if tt + ff > 0 else 0.5
                return {"value": p, "noisy_true": t, "noisy_false": f}
            if n_prop is None:
                raise ReleaseError(f"query {q.id!r}: a proportion under substitute needs the schema's public_n.")
            t = invoke_scalar(comp, agg.n_true)
            return {"value": min(max(t / n_prop, 0.0), 1.0), "noisy_true": t}

        return _ItemRelease(part, share, pred, (draw,), ans_prop, comp.constructor)

    raise ReleaseError(f"query {q.id!r}: kind {kind.value!r} cannot be released.")


def quantile_scores(agg: QuantileAggregate, a: int, b: int) -> npt.NDArray[np.int64]:
    """Integer rank scores u_t = −|b·#{x ≤ t} − a·n| for α = a/b (gcd(a, b) = 1).

    Notes
    -----
    Claim: for a privacy unit owning at most c rows, ‖u(x) − u(x')‖∞ ≤ c·b under both
    relations, so ``d_in = c·b`` for OpenDP's ``linf_distance``.

    Proof. Let C_t = #{x ≤ t} and v_t = b·C_t − a·n, so u_t = −|v_t|; as |·| is
    1-Lipschitz, |u_t(x) − u_t(x')| ≤ |v_t(x) − v_t(x')|. Adding one row changes n by 1
    and C_t by 1 if the row is ≤ t, else 0: v_t moves by b − a or by −a. Removing one row
    gives a − b or +a. A neighbour (add/remove one unit, or substitute one unit, which is
    removing k₁ ≤ c rows and adding k₂ ≤ c rows) moves v_t by a sum of such terms in which
    the positive ones are at most k₁·a + k₂·(b − a) ≤ c·a + c·(b − a) = c·b and the
    negative ones at least −(k₁(b − a) + k₂·a) ≥ −c·b. Hence |Δv_t| ≤ c·b for every t
    (add/remove: k₁ = 0 or k₂ = 0 gives the tighter c·max(a, b − a)). ∎

    In rank units (divide by b) this is the planner's utility sensitivity c of
    −|#{x ≤ t} − α·n| (:meth:`planner.queries.Query.parts`), so noisy max of scale
    2·c·b/ε is the exponential mechanism at ε (MATH.md §3).

    Examples
    --------
    >>> from planner.backends.base import QuantileAggregate
    >>> agg = QuantileAggregate((0.0, 1.0, 2.0), (1, 2, 1))  # #{x ≤ t} = 1, 3, 4; n = 4
    >>> quantile_scores(agg, 1, 2).tolist()  # −|2·C − 4|
    [-2, -2, -4]
    """
    cle = agg.counts_le.astype(np.int64)
    n = int(agg.n)
    if b * max(n, 1) > _I64_MAX // 4:
        raise ReleaseError("the quantile's rank scores do not fit in 64-bit integers; use a simpler alpha (e.g. 0.9).")
    return np.asarray(-np.abs(b * cle - a * n), dtype=np.int64)


def _synthetic(noisy: Sequence[float], edges: npt.NDArray[np.float64] | None) -> dict[str, JSON]:
    """Post-processing of a perturbed histogram (MATH.md §8): clamp, normalise, draw.

    D̃_j = max(D_j, 0), q̂_j = D̃_j/ΣD̃; k = min(round(ΣD̃), MAX_SYNTHETIC_ROWS) rows are
    drawn from the histogram density (uniform within a bin). The randomness here is
    post-processing of an ε-DP output, so any k is ε-DP.
    """
    d = np.maximum(np.asarray(noisy, dtype=np.float64), 0.0)
    total = float(d.sum())
    if total <= 0:
        return {"probabilities": [0.0] * len(d), "sample": []}
    prob = d / total
    k = int(min(round(total), MAX_SYNTHETIC_ROWS))
    rng = np.random.default_rng()
    bins = rng.choice(len(prob), size=k, p=prob)
    if edges is None:
        sample: list[JSON] = [int(i) for i in bins]
    else:
        lo, hi = edges[bins], edges[bins + 1]
        sample = [float(v) for v in lo + (hi - lo) * rng.random(k)]
    return {"probabilities": [float(p) for p in prob], "sample": sample}


# --------------------------------------------------------------------------- public API


def plan_hash(plan: Plan, schema: Schema) -> str:
    """sha256 of the canonical JSON of the plan: queries, schema hash, budget, rule, θ's.

    Examples
    --------
    >>> from planner.schema import Column, ColumnKind, MissingRule, Schema
    >>> from planner.workload import plan as make_plan
    >>> s = Schema((Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),))
    >>> q = Query("n", QueryKind.COUNT, None, MechanismName.LAPLACE)
    >>> p = make_plan([q], s, 1.0, 0.0, "basic")
    >>> plan_hash(p, s) == plan_hash(make_plan([q], s, 1.0, 0.0, "basic"), s)
    True
    """
    seen: dict[str, dict[str, Any]] = {}
    for p in plan.parts:
        seen.setdefault(p.query.id, p.query.to_dict())
    a = plan.allocation
    doc = {
        "queries": list(seen.values()),
        "schema_hash": schema.schema_hash(),
        "budget": {"epsilon": a.epsilon, "delta": a.delta},
        "rule": a.rule.value,
        "theta": {it.id: it.theta for it in a.items},
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prepare(plan: Plan, schema: Schema) -> PreparedRelease:
    """Build every OpenDP measurement of the plan and its cost (no data needed).

    Raises
    ------
    ReleaseError
        If a query cannot be released (e.g. a smoothed histogram) or the plan and the
        schema disagree.
    """
    parts, shares, preds = plan.parts, plan.allocation.items, plan.predictions
    if not (len(parts) == len(shares) == len(preds)):
        raise ReleaseError("the plan's parts, shares and predictions do not line up; re-plan.")
    rule = plan.allocation.rule
    items = tuple(_build_item(p, s, pr, schema, rule) for p, s, pr in zip(parts, shares, preds, strict=True))
    return PreparedRelease(plan_hash(plan, schema), schema.schema_hash(), rule, items)


@dataclass(frozen=True)
class QueryAnswer:
    """A released query: noisy answer(s), mechanism, cost and predicted accuracy."""

    query_id: str
    kind: str
    mechanism: str
    answer: JSON
    epsilon: float
    delta: float
    rho: float
    opendp: tuple[dict[str, Any], ...]
    predictions: tuple[dict[str, Any], ...]
    schema_hash: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query_id,
            "kind": self.kind,
            "mechanism": self.mechanism,
            "answer": self.answer,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": _finite_or_none(self.rho),
            "opendp": list(self.opendp),
            "predictions": list(self.predictions),
            "schema_hash": self.schema_hash,
        }


@dataclass(frozen=True)
class ReleaseResult:
    """A release: per query answers and costs, plus the dataset's budget after it.

    Holds only data-independent facts (plan, schema hash, costs, predictions) and the
    released noisy values; never an exact aggregate or a row count of the data.
    """

    fingerprint: str
    dataset_name: str
    plan_hash: str
    schema_hash: str
    rule: CompositionRule
    status: str
    release_id: int
    answers: tuple[QueryAnswer, ...]
    epsilon_total: float
    delta_total: float
    epsilon_spent: float
    epsilon_remaining: float
    warnings: tuple[str, ...] = field(default=())

    def answer(self, query_id: str) -> QueryAnswer:
        for a in self.answers:
            if a.query_id == query_id:
                return a
        raise ReleaseError(f"no query {query_id!r} in this release.")

    def report_json(self) -> dict[str, Any]:
        """The release as JSON (data-independent facts and noisy values only)."""
        return {
            "format": "privacy-budget-planner/release",
            "version": 1,
            "dataset": {"fingerprint": self.fingerprint, "name": self.dataset_name},
            "plan_hash": self.plan_hash,
            "schema_hash": self.schema_hash,
            "rule": self.rule.value,
            "status": self.status,
            "release_id": self.release_id,
            "budget": {
                "epsilon_total": self.epsilon_total,
                "delta_total": self.delta_total,
                "epsilon_spent": _finite_or_none(self.epsilon_spent),
                "epsilon_remaining": _finite_or_none(self.epsilon_remaining),
            },
            "queries": [a.to_dict() for a in self.answers],
            "warnings": list(self.warnings),
        }

    def to_csv(self) -> str:
        """One row per released number (every bin of a histogram), with cost and accuracy."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["query", "kind", "mechanism", "part", "label", "value", "epsilon", "delta",
                    "rmse", "error_bound_95", "unit", "plan_hash", "schema_hash"])
        for a in self.answers:
            preds = {p["part"]: p for p in a.predictions}
            for part, label, value in _rows_of(a.answer):
                p = preds.get(part) or (a.predictions[0] if len(a.predictions) == 1 else {})
                w.writerow([a.query_id, a.kind, a.mechanism, part, label, value, a.epsilon, a.delta,
                            p.get("rmse", ""), p.get("error_bound_95", ""), p.get("unit", ""),
                            self.plan_hash, self.schema_hash])
        return buf.getvalue()


def _rows_of(answer: JSON) -> list[tuple[str, str, JSON]]:
    if not isinstance(answer, dict):
        return [("", "", answer)]
    if "parts" in answer and isinstance(answer["parts"], dict):
        return [(part, "", sub.get("value") if isinstance(sub, dict) else sub) for part, sub in answer["parts"].items()]
    if "labels" in answer and isinstance(answer.get("labels"), list) and isinstance(answer.get("counts"), list):
        labels, counts = answer["labels"], answer["counts"]
        assert isinstance(labels, list) and isinstance(counts, list)
        return [("", str(lab), cnt) for lab, cnt in zip(labels, counts, strict=True)]
    return [("", "", answer.get("value"))]


def _result(
    prepared: PreparedRelease,
    answers: Mapping[str, JSON],
    ledger: Ledger,
    fingerprint: str,
    dataset_name: str,
    status: str,
    release_id: int,
    warnings: tuple[str, ...],
) -> ReleaseResult:
    out: list[QueryAnswer] = []
    for q in prepared.queries():
        its = [it for it in prepared.items if it.part.query.id == q.id]
        draws = [d for it in its for d in it.draws]
        out.append(
            QueryAnswer(
                query_id=q.id,
                kind=q.kind.value,
                mechanism=q.mechanism.value,
                answer=answers.get(q.id),
                epsilon=float(sum(d.recorded.epsilon for d in draws)),
                delta=float(sum(d.recorded.delta for d in draws)),
                rho=float(sum(d.recorded.event.zcdp_rho for d in draws)),
                opendp=tuple(d.describe() for d in draws),
                predictions=tuple(it.prediction.to_dict() for it in its),
                schema_hash=prepared.schema_hash,
            )
        )
    st = ledger.status(fingerprint)
    return ReleaseResult(
        fingerprint, dataset_name, prepared.plan_hash, prepared.schema_hash, prepared.rule, status,
        release_id, tuple(out), st.epsilon_total, st.delta_total, st.epsilon_spent, st.epsilon_remaining,
        warnings,
    )


def release(
    plan: Plan,
    schema: Schema,
    backend: Backend,
    ledger: Ledger,
    fingerprint: str,
    dataset_name: str,
    *,
    total_epsilon: float,
    total_delta: float,
    rule: CompositionRule | str,
) -> ReleaseResult:
    """Release a plan on a dataset: budget check → spend recorded → sample → answers stored.

    Parameters
    ----------
    plan : Plan
        From :func:`planner.workload.plan`; its rule must be the dataset's rule.
    schema : Schema
        The schema the plan was made under (the backend's schema must be equal).
    backend : Backend
        Computes the exact aggregates (only inside ``sample()``).
    ledger : Ledger
        Where the dataset's total budget and the spends are recorded.
    fingerprint, dataset_name : str
        The dataset's key and display name.
    total_epsilon, total_delta, rule
        The dataset's total budget (registered if new; must match if registered).

    Returns
    -------
    ReleaseResult
        ``status`` ``done`` (sampled now) or ``reused`` (same plan hash answered earlier:
        the stored answers, nothing sampled).

    Raises
    ------
    BudgetExceededError
        The plan's spends do not fit what remains (nothing is sampled).
    ReleaseError, LedgerError, PlannerError
        Rule or schema mismatch; a query that cannot be released; ledger problems.
    """
    rl = CompositionRule(rule)
    if plan.allocation.rule is not rl:
        raise ReleaseError(
            f"the plan was made under the {plan.allocation.rule.value} rule but the dataset's budget "
            f"is composed under {rl.value}; re-plan under {rl.value}."
        )
    if backend.schema.schema_hash() != schema.schema_hash():
        raise ReleaseError("the backend's schema differs from the plan's schema; load the data with the plan's schema.")
    prepared = prepare(plan, schema)
    ledger.register_dataset(fingerprint, dataset_name, total_epsilon, total_delta, rl)
    record = ledger.release(
        fingerprint,
        prepared.plan_hash,
        prepared.schema_hash,
        prepared.spends(),
        lambda: prepared.sample(backend),
    )
    answers = record.answers or {}
    return _result(prepared, answers, ledger, fingerprint, dataset_name, record.status.value,
                   record.release_id, plan.allocation.warnings)


# --------------------------------------------------------------------------- CLI


def _read_spec(spec_path: str) -> tuple[dict[str, Any], Path]:
    p = Path(spec_path)
    try:
        spec = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReleaseError(f"cannot read the plan file {p.name!r} ({exc.strerror}); check the path.") from exc
    except json.JSONDecodeError as exc:
        raise ReleaseError(f"the plan file {p.name!r} is not valid JSON (line {exc.lineno}).") from exc
    if not isinstance(spec, dict):
        raise ReleaseError("the plan file must hold a JSON object with 'schema', 'budget' and 'queries'.")
    return spec, p.parent


def cmd_release(
    spec_path: str,
    data_path: str,
    ledger_url: str | None,
    backend: str | None = None,
    spark_master: str | None = None,
    scan: Any = None,
) -> dict[str, Any]:
    """``planner release PLAN.json DATA``: plan, load, check, release; the report as JSON.

    PLAN.json: ``{"schema": {...} or "path", "budget": {"epsilon", "delta",
    "composition"}, "queries": [...], "dataset_name"?: str}``. DATA is any path or glob
    the invoking user can read, or ``DB.duckdb::table``
    (:func:`planner.sources.open_cli_source`; the allow-list guards the web app only). ``backend``: ``pandas``, ``duckdb`` or ``spark`` (default
    :func:`~planner.backends.default_backend`); the report names it under ``"backend"``.
    ``scan``: a :class:`~planner.backends.BackgroundScan` of this spec and data already
    started (the command line starts it before importing this module). The data is read
    once: every aggregate, the column report and the content digest, whose key names the
    dataset in the ledger (:func:`planner.sources.dataset_key`).
    """
    from planner.backends import BackgroundScan, check_backend, close_backend, default_backend

    # One parser for PLAN.json, shared with `planner plan` (planner/plan_spec.py).
    from planner.plan_spec import load_plan_spec
    from planner.sources import FileSource, dataset_key, open_cli_source
    from planner.workload import plan as make_plan

    spec = load_plan_spec(spec_path)
    schema, eps, delta, rl = spec.schema, spec.epsilon, spec.delta, spec.rule
    kind = (backend or default_backend()).strip().lower()
    if scan is None:  # read the data while planning
        scan = BackgroundScan(kind, open_cli_source(data_path), schema, spec.queries, spark_master=spark_master)
    try:
        the_plan = make_plan(spec.queries, schema, eps, delta, rl, spec.error_scales or None, spec.pinned or None)
    except BaseException:
        scan.cancel()
        raise
    source = scan.source
    engine = scan.result()
    try:
        check_backend(engine)
        fp = dataset_key(engine.content_digest())
        default_name = source.files[0].name if isinstance(source, FileSource) and len(source.files) == 1 else source.label
        name = spec.dataset_name or default_name
        ledger = Ledger(ledger_url)
        try:
            res = release(the_plan, schema, engine, ledger, fp, name, total_epsilon=eps, total_delta=delta, rule=rl)
        finally:
            ledger.close()
    finally:
        close_backend(engine)
    out = res.report_json()
    out["backend"] = kind
    return out


def cmd_ledger(ledger_url: str | None, fingerprint: str | None) -> dict[str, Any]:
    """``planner ledger``: every dataset's budget status, or one dataset's full ledger."""
    ledger = Ledger(ledger_url)
    try:
        if fingerprint is not None:
            return ledger.export(fingerprint)
        return {
            "format": "privacy-budget-planner/ledger-index",
            "version": 1,
            "datasets": [ledger.status(d.fingerprint).to_dict() for d in ledger.datasets()],
        }
    finally:
        ledger.close()
