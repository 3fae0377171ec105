"""Released noise: the ONLY module that imports OpenDP and draws released randomness.

Every released number comes from an OpenDP 0.16 measurement built here with
``dp.enable_features("contrib")`` and no other feature flag (never ``floating-point`` or
``honest-but-curious``). The statistics modules (:mod:`planner.planning.statistics`) say which
measurements their release needs, through the builders below, and post-process the
outputs; they never see OpenDP and never draw noise themselves.

* :func:`laplace`, :func:`gaussian`, :func:`noisy_max` — a :class:`Component`: one
  measurement, its input sensitivity, and the privacy loss OpenDP's own map reports;
* :meth:`Component.invoke` — the only call that draws released noise (through
  :func:`_invoke`, so tests can count and forbid invocations);
* :func:`draw` — compares OpenDP's loss with the plan's and builds the spend the ledger
  records (the plan's, or OpenDP's when it is larger: rounding always goes toward less
  privacy);
* :func:`post_process_sample` — the synthetic sample drawn from a released histogram
  (post-processing of an ε-DP output, so any sample size is ε-DP);
  :func:`post_process_rng` — the unseeded generator of a synthetic table's fit and rows.

Measurements (θ is an item's allocation parameter)
--------------------------------------------------
======================  ====================================================================
builder                 OpenDP measurement (d_in = the schema's sensitivity)
======================  ====================================================================
laplace, float          ``make_laplace`` on a float atom or vector, b = Δ₁/ε: exact sampling
                        on a 2^k grid (floating-point safe, Mironov 2012)
laplace, integer        ``make_laplace`` on an i32 atom or vector: the discrete Laplace
gaussian                ``make_gaussian`` (float: 2^k-grid sampler; i32: discrete Gaussian),
                        σ = Δ₂/√(2ρ); OpenDP certifies ρ-zCDP, converted to (ε, δ) by
                        ``make_zCDP_to_approxDP``
noisy_max               ``make_noisy_max`` on i64 scores, L∞ sensitivity d_in (``monotonic``
                        when every score moves the same way under a neighbour): exponential
                        noise under ``max_divergence`` (permute-and-flip, ε-DP), Gumbel noise
                        under ``zero_concentrated_divergence`` (the exponential mechanism,
                        ρ = ε²/8)
noisy_max_float         the same on float scores (a synthetic table's choice of marginal:
                        its scores are L1 distances to a fitted model), Gumbel noise under
                        ``zero_concentrated_divergence``
======================  ====================================================================

References
----------
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
   Privacy", arXiv:2004.00010.
.. [MS20] R. McKenna, D. Sheldon, "Permute-and-Flip: A new mechanism for differentially
   private selection", NeurIPS 2020.
.. [CR21] M. Cesar, R. Rogers, arXiv:2004.07223 (exponential mechanism ρ = ε²/8).
.. [BS16] M. Bun, T. Steinke, arXiv:1605.02065, Lemma 2.3 (zCDP composes by adding ρ).
.. [M12] I. Mironov, "On Significance of the Least Significant Bits for Differential
   Privacy", CCS 2012.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Final

import numpy as np
import numpy.typing as npt

# OpenDP's own modules, not ``opendp.prelude``: the prelude also imports its scikit-learn,
# numpy and Polars extras (~0.15 s, and Polars), none of which a release uses.
from opendp import combinators, domains, measurements, measures, metrics
from opendp import mod as dp

from planner.core.errors import ReleaseError
from planner.privacy.accounting import Spend, event_rho, pure_epsilon, standalone_epsilon
from planner.privacy.events import (
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
    ThresholdedEvent,
)

dp.enable_features("contrib")

_I32_MAX: Final = 2**31 - 1
#: Largest synthetic sample drawn from a perturbed histogram (post-processing; any size is ε-DP).
MAX_SYNTHETIC_ROWS: Final = 10_000


class Measure(StrEnum):
    """The privacy measure an OpenDP measurement is certified in."""

    MAX_DIVERGENCE = "max_divergence"  # pure ε
    ZCDP = "zero_concentrated_divergence"  # ρ


class DType(StrEnum):
    """The domain a measurement reads (what its input must be converted to)."""

    I32 = "i32"
    I64 = "i64"
    FLOAT = "float"


def _map(measurement: dp.Measurement, d_in: float | int | tuple[int, int, int]) -> Any:
    """OpenDP's privacy map at d_in (ε, ρ or an (ε, δ) pair)."""
    return measurement.map(d_in)  # type: ignore[no-untyped-call]


def _invoke(measurement: dp.Measurement, argument: Any) -> Any:
    """Invoke one OpenDP measurement: the only call that draws released noise.

    A separate function so tests can count (and forbid) invocations.
    """
    return measurement(argument)


def _i32(values: Sequence[int] | npt.NDArray[Any], what: str) -> npt.NDArray[np.int32]:
    arr = np.asarray(values, dtype=np.int64)
    if arr.size and int(np.abs(arr).max()) > _I32_MAX - 10**6:
        raise ReleaseError(
            f"{what} is too large for OpenDP's 32-bit integers; use the 'laplace' or 'gaussian' "
            "mechanism (float) for this query."
        )
    return np.asarray(arr, dtype=np.int32)


@dataclass(frozen=True)
class Component:
    """One OpenDP measurement, its input sensitivity and what OpenDP says it costs."""

    name: str  # what it releases: "count", "sum", "bins", "scores", ...
    measurement: dp.Measurement
    d_in: float | int
    constructor: str
    scale: float
    measure: Measure
    cost: float  # ε (max divergence) or ρ (zCDP) at d_in, as OpenDP reports it
    dtype: DType
    vector: bool

    def invoke(self, value: Any) -> Any:
        """Release ``value`` through the measurement (draws noise): a float, a list of
        floats, or a selected index, as the measurement outputs it."""
        if self.dtype is DType.I32:
            arr = _i32(np.atleast_1d(np.asarray(value)), f"the {self.name}")
            out = _invoke(self.measurement, arr if self.vector else int(arr[0]))
        elif self.dtype is DType.I64:
            out = _invoke(self.measurement, np.asarray(value, dtype=np.int64))
        else:
            out = _invoke(self.measurement, np.asarray(value, dtype=np.float64) if self.vector else float(value))
        if self.dtype is DType.I64:
            return int(out)
        if self.vector:
            return [float(v) for v in out]
        return float(out)

    def describe(self) -> dict[str, Any]:
        key = "epsilon" if self.measure is Measure.MAX_DIVERGENCE else "rho"
        return {
            "releases": self.name,
            "constructor": self.constructor,
            "scale": self.scale,
            "d_in": float(self.d_in),
            "measure": self.measure.value,
            key: self.cost,
        }


def _as_int(value: float) -> int:
    v = float(value)
    if v != math.floor(v):
        raise ReleaseError(f"an integer-domain mechanism needs an integer sensitivity; got {v:g}.")
    return int(v)


def laplace(name: str, d_in: float, scale: float, *, integer: bool, vector: bool) -> Component:
    """OpenDP Laplace (float: exact 2^k-grid sampler; i32: the discrete Laplace)."""
    d: float | int
    if integer:
        atom = domains.atom_domain(T="i32")
        if vector:
            dom, met, what = domains.vector_domain(atom), metrics.l1_distance(T="i32"), "i32 vector"
        else:
            dom, met, what = atom, metrics.absolute_distance(T="i32"), "i32"
        d = _as_int(d_in)
    else:
        atom = domains.atom_domain(T=float, nan=False)
        if vector:
            dom, met, what = domains.vector_domain(atom), metrics.l1_distance(T=float), "float vector"
        else:
            dom, met, what = atom, metrics.absolute_distance(T=float), "float"
        d = float(d_in)
    meas = measurements.make_laplace(dom, met, scale=float(scale))
    return Component(name, meas, d, f"make_laplace({what})", float(scale), Measure.MAX_DIVERGENCE,
                     float(_map(meas, d)), DType.I32 if integer else DType.FLOAT, vector)


def gaussian(name: str, d_in: float, scale: float, *, integer: bool, vector: bool) -> Component:
    """OpenDP Gaussian (float: 2^k-grid sampler; i32: discrete Gaussian); ρ-zCDP."""
    atom = domains.atom_domain(T="i32") if integer else domains.atom_domain(T=float, nan=False)
    if vector:
        dom, met = domains.vector_domain(atom), metrics.l2_distance(T=float)
    else:
        dom, met = atom, metrics.absolute_distance(T=float)
    what = ("i32" if integer else "float") + (" vector" if vector else "")
    meas = measurements.make_gaussian(dom, met, scale=float(scale))
    d = float(d_in)
    return Component(name, meas, d, f"make_gaussian({what})", float(scale), Measure.ZCDP,
                     float(_map(meas, d)), DType.I32 if integer else DType.FLOAT, vector)


def noisy_max(name: str, d_in: int, scale: float, measure: Measure, *, monotonic: bool = False) -> Component:
    """OpenDP report-noisy-max on i64 scores with L∞ sensitivity d_in.

    ``monotonic`` declares that under a neighbour every score moves in the same direction
    (counts under add/remove); OpenDP's map then drops the factor 2 (ε = d_in/scale).
    """
    out = measures.max_divergence() if measure is Measure.MAX_DIVERGENCE else measures.zero_concentrated_divergence()
    meas = measurements.make_noisy_max(
        domains.vector_domain(domains.atom_domain(T="i64")), metrics.linf_distance(T="i64", monotonic=monotonic), out,
        scale=float(scale),
    )
    noise = "exponential" if measure is Measure.MAX_DIVERGENCE else "gumbel"
    mono = ", monotonic" if monotonic else ""
    return Component(name, meas, d_in, f"make_noisy_max(i64 scores{mono}, {noise} noise)", float(scale), measure,
                     float(_map(meas, d_in)), DType.I64, True)


@dataclass(frozen=True)
class IndexComponent(Component):
    """A noisy max over float scores: the released value is the index it selects."""

    def invoke(self, value: Any) -> Any:
        return int(_invoke(self.measurement, np.asarray(value, dtype=np.float64)))


def noisy_max_float(name: str, d_in: float, scale: float) -> IndexComponent:
    """OpenDP report-noisy-max on float scores with L∞ sensitivity d_in, Gumbel noise of
    ``scale`` under zCDP: the exponential mechanism P(i) ∝ exp(s_i/scale), ρ = (d_in/scale)²/2
    [MS20; CR21]; at scale 2Δ/ε that is ε²/8."""
    meas = measurements.make_noisy_max(
        domains.vector_domain(domains.atom_domain(T=float, nan=False)), metrics.linf_distance(T=float),
        measures.zero_concentrated_divergence(), scale=float(scale),
    )
    d = float(d_in)
    return IndexComponent(name, meas, d, "make_noisy_max(float scores, gumbel noise)", float(scale), Measure.ZCDP,
                          float(_map(meas, d)), DType.FLOAT, True)


@dataclass(frozen=True)
class ThresholdComponent(Component):
    """OpenDP's ``make_laplace_threshold`` over a map key → count (DP partition selection).

    ``delta`` is the δ the release really costs at ``d_in3`` = (l0, l1, l∞), which is
    OpenDP's map at ``threshold − 1``: OpenDP 0.16 keeps a key whose noisy count is ≥ the
    threshold but computes δ from P[Z > threshold − l∞], one integer short of the event
    that releases a key (P[Z ≥ threshold − l∞]), so its reported ``delta_opendp`` is too
    small by a factor e^{1/scale} (opendp/opendp issue #2922). The map at threshold − 1
    is OpenDP's own conservative arithmetic over the right event.
    """

    threshold: int = 0
    d_in3: tuple[int, int, int] = (1, 1, 1)
    delta: float = 0.0
    delta_opendp: float = 0.0

    def invoke(self, value: Any) -> Any:
        counts = {str(k): int(v) for k, v in dict(value).items()}
        arr = _i32(list(counts.values()), f"the {self.name}")
        out = _invoke(self.measurement, dict(zip(counts, (int(v) for v in arr), strict=True)))
        return {str(k): int(v) for k, v in dict(out).items()}

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update({"threshold": self.threshold, "d_in": list(self.d_in3), "delta": self.delta,
                    "delta_reported_by_opendp": self.delta_opendp})
        return out


def laplace_threshold(name: str, d_in: tuple[int, int, int], scale: float, threshold: int) -> ThresholdComponent:
    """OpenDP's discrete Laplace with a threshold on a map str → i32 (the key release)."""
    dom = domains.map_domain(domains.atom_domain(T=str), domains.atom_domain(T="i32"))
    met = metrics.l01inf_distance(metrics.absolute_distance(T="i32"))

    def make(t: int) -> dp.Measurement:
        return measurements.make_laplace_threshold(dom, met, scale=float(scale), threshold=int(t))

    meas = make(threshold)
    eps, delta_o = _map(meas, d_in)
    _, delta = _map(make(threshold - 1), d_in) if threshold - 1 >= d_in[2] else (eps, 1.0)
    return ThresholdComponent(name, meas, float(d_in[1]), "make_laplace_threshold(map str → i32)", float(scale),
                              Measure.MAX_DIVERGENCE, float(eps), DType.I32, True, int(threshold),
                              (int(d_in[0]), int(d_in[1]), int(d_in[2])), max(float(delta), float(delta_o)),
                              float(delta_o))


# --------------------------------------------------------------------------- recorded spends


def _zcdp_approx(meas: dp.Measurement, d_in: float, delta: float) -> float:
    """OpenDP's (ε, δ) of a zCDP measurement at d_in, ε at the given δ."""
    conv = combinators.make_fix_delta(combinators.make_zCDP_to_approxDP(meas), delta=float(delta))
    eps, _ = _map(conv, d_in)
    return float(eps)


def _rho_approx(rho: float, delta: float) -> float:
    """OpenDP's (ε, δ) conversion of a total ρ (a Gaussian of scale 1 at d_in = √(2ρ)).

    Used for a composition of Gaussians (a mean's sum and count): zCDP composes by
    adding ρ [BS16, Lemma 2.3], which is what ``make_composition`` would compute.
    """
    meas = measurements.make_gaussian(domains.atom_domain(T=float, nan=False), metrics.absolute_distance(T=float), scale=1.0)
    d = math.sqrt(2.0 * rho)
    while float(_map(meas, d)) < rho:
        d = math.nextafter(d, math.inf)
    return _zcdp_approx(meas, d, delta)


def _laplace_event(eps: float) -> LaplaceEvent:
    nm = 1.0 / eps
    while pure_epsilon(LaplaceEvent(nm)) < eps:
        nm = math.nextafter(nm, 0.0)
    return LaplaceEvent(nm)


def _gaussian_event(rho: float) -> GaussianEvent:
    s = 1.0 / math.sqrt(2.0 * rho)
    while event_rho(GaussianEvent(s, discrete=True)) < rho:
        s = math.nextafter(s, 0.0)
    return GaussianEvent(s, discrete=True)


def _exponential_event(rho: float, eps: float) -> ExponentialEvent:
    e = max(eps, math.sqrt(8.0 * rho))
    while e * e / 8.0 < rho:
        e = math.nextafter(e, math.inf)
    return ExponentialEvent(e)


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
        return all(c.measure is Measure.MAX_DIVERGENCE for c in self.components)

    def describe(self) -> dict[str, Any]:
        r = self.recorded
        rho = event_rho(r.event)
        return {
            "spend": self.key,
            "opendp": [c.describe() for c in self.components],
            "epsilon": r.epsilon,
            "delta": r.delta,
            "rho": rho if math.isfinite(rho) else None,
            "event": r.event.to_dict(),
        }


def draw(key: str, item_id: str, query_id: str, planner: Spend, components: Sequence[Component]) -> Draw:
    """Compare OpenDP's loss with the planner's and build the spend the ledger records."""
    comps = tuple(components)
    pl_event = planner.event
    if isinstance(pl_event, ThresholdedEvent):
        # the inner mechanism's draw, then its δ: the larger of the planned and the real one
        inner = Spend(pl_event.event, planner.epsilon, max(float(planner.delta) - pl_event.delta, 0.0))
        base = draw(key, item_id, query_id, inner, comps)
        d_real = max((c.delta for c in comps if isinstance(c, ThresholdComponent)), default=0.0)
        d_rec = max(pl_event.delta, d_real)
        r = base.recorded
        recorded = Spend(ThresholdedEvent(r.event, d_rec), r.epsilon, r.delta + d_rec)
        return replace(base, planner=planner, recorded=recorded)
    if all(c.measure is Measure.MAX_DIVERGENCE for c in comps):
        eps_o = float(sum(c.cost for c in comps))
        eps_r = max(eps_o, pure_epsilon(pl_event))
        event: PrivacyEvent
        if isinstance(pl_event, LaplaceEvent):
            event = pl_event if eps_r <= pure_epsilon(pl_event) else _laplace_event(eps_r)
        elif isinstance(pl_event, PureEvent):
            event = pl_event if eps_r <= pl_event.epsilon else PureEvent(eps_r)
        else:  # an exponential mechanism released by permute-and-flip: any ε-DP event
            event = PureEvent(eps_r)
        recorded = Spend(event, max(eps_r, float(planner.epsilon)), 0.0)
        return Draw(key, item_id, query_id, comps, planner, recorded, eps_o, eps_o**2 / 2.0)
    rho_o = float(sum(c.cost for c in comps))
    if isinstance(pl_event, ExponentialEvent):
        rho_r = max(rho_o, event_rho(pl_event))
        event = pl_event if rho_r <= event_rho(pl_event) else _exponential_event(rho_r, pl_event.epsilon)
        recorded = Spend(event, max(pure_epsilon(event), float(planner.epsilon)), 0.0)
        return Draw(key, item_id, query_id, comps, planner, recorded, math.sqrt(8.0 * rho_o), rho_o)
    if not isinstance(pl_event, GaussianEvent):
        raise ReleaseError(f"query {query_id!r}: no OpenDP Gaussian release for a {type(pl_event).__name__}.")
    rho_r = max(rho_o, event_rho(pl_event))
    g_event = _gaussian_event(rho_r)
    delta = float(planner.delta)
    if delta > 0:
        if len(comps) == 1:
            eps_o = _zcdp_approx(comps[0].measurement, comps[0].d_in, delta)
        else:
            eps_o = _rho_approx(rho_o, delta)
        eps_r = max(eps_o, float(planner.epsilon), standalone_epsilon(g_event, delta))
    else:
        eps_o, eps_r = math.inf, float(planner.epsilon)
    recorded = Spend(g_event, eps_r, delta)
    return Draw(key, item_id, query_id, comps, planner, recorded, eps_o, rho_o)


# --------------------------------------------------------------------------- post-processing


def post_process_sample(probabilities: npt.NDArray[np.float64], size: int) -> npt.NDArray[np.intp]:
    """Bin indices of a synthetic sample of ``size`` rows drawn from released probabilities.

    Post-processing of an ε-DP output (docs/mathematics.md §8; Wasserman & Zhou 2010): the randomness
    here is independent of the data, so any sample size keeps the release ε-DP. Drawn from
    a fresh, unseeded generator (a released sample must not be reproducible by others).
    """
    rng = np.random.default_rng()
    return np.asarray(rng.choice(probabilities.size, size=size, p=probabilities), dtype=np.intp)


def post_process_rng() -> np.random.Generator:
    """A fresh, unseeded generator for the post-processing of released outputs (a synthetic
    table's model fit and its rows): its draws are independent of the data, so they keep
    the release's guarantee, and a released table cannot be reproduced by others."""
    return np.random.default_rng()


def post_process_uniform(size: int) -> npt.NDArray[np.float64]:
    """``size`` uniform draws in [0, 1) (positions within bins of a synthetic sample)."""
    rng = np.random.default_rng()
    return np.asarray(rng.random(size), dtype=np.float64)
