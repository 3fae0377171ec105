"""Rényi DP composition: add ε(α) order by order, convert to (ε, δ), refine the order.

* :func:`rdp_array` — the RDP curve of events of one kind, vectorised over parameters and
  orders (the allocator's kernel; the curves themselves are :mod:`planner.privacy.divergences`);
* :func:`event_rdp`, :func:`rdp_curve` — one event's curve, and a composition's;
* :func:`rdp_to_epsilon`, :func:`rdp_epsilon` — the conversion to (ε, δ) minimised over
  the order grid and refined continuously, with the order-∞ (pure) bound and the
  total-variation bound;
* :class:`RdpAccountant` — the rule.

Every conversion that involves floating-point optimisation rounds *up* (toward more
privacy loss) by a few ulps; RDP sums carry an explicit bound on their rounding error.

References
----------
.. [M17] I. Mironov, "Rényi Differential Privacy", CSF 2017, arXiv:1702.07476,
   Prop. 1 (composition), Prop. 3 (conversion), Table II (Laplace, RR).
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
   Privacy", NeurIPS 2020, arXiv:2004.00010, Prop. 12 (RDP → (ε, δ)).
.. [BBGHS20] B. Balle, G. Barthe, M. Gaboardi, J. Hsu, T. Sato, "Hypothesis Testing
   Interpretations and Rényi Differential Privacy", AISTATS 2020, arXiv:1905.09982, Thm 21.
.. [vEH14] T. van Erven, P. Harremoës, "Rényi Divergence and Kullback–Leibler
   Divergence", IEEE Trans. IT 2014, arXiv:1206.2459, Thm 3 (D_α is nondecreasing in α).
.. [C22] C. Canonne, "A short note on an inequality between KL and TV",
   arXiv:2202.07198 (Bretagnolle–Huber: TV ≤ √(1 − e^{−KL})).
.. [DR14] C. Dwork, A. Roth, Thm 3.16 (basic composition of the parts without a curve).
.. [MTZ19] I. Mironov, K. Talwar, L. Zhang, "Rényi Differential Privacy of the Sampled
   Gaussian Mechanism", arXiv:1908.10530, §3.3 (A_α for integer α) and Thm 5 (the remove
   direction dominates the add direction).
.. [WBK19] Y.-X. Wang, B. Balle, S. Kasiviswanathan, "Subsampled Rényi Differential Privacy
   and Analytical Moments Accountant", AISTATS 2019, arXiv:1808.00087, Thm 9 (sampling
   without replacement, substitute-one neighbours; the formula in Gatica-Perez, Sajadmanesh
   & Shahin Shamsabadi, "An introduction to trustworthy machine learning", AIDA 2022).
.. [ZW19] Y. Zhu, Y.-X. Wang, "Poisson Subsampled Rényi Differential Privacy", ICML 2019
   (the binomial expansion of the remove direction under Poisson sampling).
.. [BBG18] B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling",
   NeurIPS 2018, arXiv:1807.01647, Thms 9–10 ((ε, δ) → (ln(1 + q(e^ε − 1)), qδ)).
.. [vEH14b] van Erven & Harremoës 2014, Cor. 2: (α − 1)D_α is convex in α, so between two
   orders its chord is an upper bound (used to go from integer to fractional orders).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.privacy import divergences as dv
from planner.privacy.accountants.base import Accountant, FloatArray, Rule, round_up
from planner.privacy.accountants.exact import EMPTY_SUM, ExactSum
from planner.privacy.accountants.pairs import connect_dots, event_pair
from planner.privacy.accountants.pure import REL_TOL, pure_epsilon
from planner.privacy.accountants.zcdp import conversion, event_rho
from planner.privacy.budget import DEFAULT_ORDERS, CompositionRule, RDPCurve, check_delta
from planner.privacy.events import (
    SAMPLED_EVENTS,
    ApproxEvent,
    ComposedEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ThresholdedEvent,
    ZCDPEvent,
    flatten,
)

#: Bound on the relative rounding error of a kernel value and of a vectorised sum of them
#: (kernels are accurate to a few ulps; pairwise summation of up to 2^40 terms adds ≤ 40).
_RDP_ROUNDING: Final[float] = 1e-14
#: Points per round and rounds of the continuous refinement of the best RDP order.
_REFINE_POINTS: Final[int] = 17
_REFINE_ROUNDS: Final[int] = 3
#: Relative allowance for taking k equal terms as one product (never below k copies' sum).
_SELF_COMPOSED_ALLOWANCE: Final[float] = 1e-9

_KERNELS = {
    LaplaceEvent: dv.laplace_rdp,
    PureEvent: dv.pure_dp_rdp,
    ExponentialEvent: dv.exponential_rdp,
    RandomizedResponseEvent: dv.randomized_response_rdp,
    GaussianEvent: dv.gaussian_rdp,
}


def rdp_array(kind: type[PrivacyEvent], x: npt.ArrayLike, orders: npt.ArrayLike) -> FloatArray:
    """RDP ε(α) of events of one kind, broadcasting their parameter ``x`` against ``orders``.

    Laplace [M17, Table II], every pure ε-DP mechanism (the randomized-response curve,
    the tightest valid one), the exponential mechanism (also ε²/8-zCDP), Gaussian
    (α/(2s²)) and zCDP (ρα): the closed forms of :mod:`planner.privacy.divergences`.

    Examples
    --------
    >>> rdp_array(GaussianEvent, 1.0, [2.0]).tolist()  # α/(2s²) = 2/2
    [1.0]
    """
    if kind is ZCDPEvent:
        return np.asarray(np.asarray(x, dtype=np.float64) * np.asarray(orders, dtype=np.float64), dtype=np.float64)
    fn = _KERNELS.get(kind)
    if fn is None:
        raise BudgetError(f"no RDP curve for {kind.__name__}; use event_rdp().")
    return fn(x, orders)


def event_rdp(event: PrivacyEvent, orders: npt.ArrayLike) -> FloatArray:
    """One event's RDP curve on ``orders`` (inf where it has none: (ε, δ > 0) events)."""
    o = np.asarray(orders, dtype=np.float64)
    if isinstance(event, ApproxEvent):
        return dv.pure_dp_rdp(event.epsilon, o) if event.delta == 0.0 else np.full(o.shape, np.inf)
    if isinstance(event, ThresholdedEvent):  # δ-approximate: no curve alone (accountants reserve δ)
        return np.full(o.shape, np.inf)
    if isinstance(event, SelfComposedEvent):
        one = event_rdp(event.event, o)
        return np.asarray(event.count * one * (1.0 + _SELF_COMPOSED_ALLOWANCE), dtype=np.float64)
    if isinstance(event, ComposedEvent):
        return _orders_curve(flatten(event.events), o)[0]
    if isinstance(event, SAMPLED_EVENTS):
        return sampled_rdp(event, o)
    return rdp_array(type(event), getattr(event, type(event).parameter), o)


def _orders_array(orders: npt.ArrayLike) -> FloatArray:
    o = np.asarray(orders, dtype=np.float64)
    if o.ndim != 1 or o.size == 0:
        raise BudgetError(f"orders must be a non-empty 1-D sequence; got shape {o.shape}.")
    if not bool(np.all(o > 1.0)) or not bool(np.all(np.isfinite(o))):
        raise BudgetError("orders must all be finite and > 1; use orders such as 1.5, 2, 8, 64.")
    return o


class _Chain:
    """Items appended batch by batch (an immutable list with O(batch) appends)."""

    __slots__ = ("_joined", "parent", "size", "tail")

    def __init__(self, parent: _Chain | None = None, tail: tuple[Any, ...] = ()) -> None:
        self.parent = parent
        self.tail = tail
        self.size: int = (parent.size if parent is not None else 0) + len(tail)
        self._joined: tuple[Any, ...] | None = None

    def append(self, items: Sequence[Any]) -> _Chain:
        return _Chain(self, tuple(items)) if items else self

    def items(self) -> tuple[Any, ...]:
        if self._joined is None:
            parts: list[tuple[Any, ...]] = []
            node: _Chain | None = self
            while node is not None:
                parts.append(node.tail)
                node = node.parent
            self._joined = tuple(x for part in reversed(parts) for x in part)
        return self._joined


_EMPTY: Final = _Chain()


@dataclass(frozen=True, slots=True)
class RdpParts:
    """A composition as RDP reads it, kept so that adding events costs those events only.

    Events with a curve are grouped by kind (their parameters, in order) and the kind's
    curve on :data:`~planner.privacy.budget.DEFAULT_ORDERS` is kept summed; self-composed and
    sampled events are kept whole with their curve on that grid; (ε, δ > 0) events have no
    curve and are kept as exact sums of ε and δ. The grid sums are taken event by event in
    order, as NumPy's ``sum(axis=0)`` of the kind's block takes them, so the running sum is
    the float a composition of every event at once computes.
    """

    params: dict[type[PrivacyEvent], _Chain] = field(default_factory=dict)
    grid: dict[type[PrivacyEvent], FloatArray] = field(default_factory=dict)
    other: _Chain = _EMPTY  # self-composed and sampled events
    other_grid: _Chain = _EMPTY  # their curves on the grid
    pure_eps: ExactSum = EMPTY_SUM  # pure ε of every curve event
    all_pure: bool = True
    approx_eps: ExactSum = EMPTY_SUM  # (ε, δ > 0) events: no curve
    approx_delta: ExactSum = EMPTY_SUM

    @property
    def has_curve(self) -> bool:
        return bool(self.params) or self.other.size > 0

    @property
    def has_approx(self) -> bool:
        return self.approx_eps.count > 0

    @property
    def terms(self) -> int:
        """The number of curve terms summed (for the rounding allowance)."""
        return sum(c.size for c in self.params.values()) + self.other.size

    @property
    def eps_inf(self) -> float:
        """Order-∞ bound of the curve part: Σ pure ε (inf if some event is not pure)."""
        return self.pure_eps.value if self.all_pure else math.inf

    def add(self, events: Sequence[PrivacyEvent]) -> RdpParts:
        """A summary holding ``events`` as well (composed events unpacked)."""
        new_params: dict[type[PrivacyEvent], list[float]] = {}
        other: list[PrivacyEvent] = []
        pure: list[float] = []
        all_pure = self.all_pure
        a_eps: list[float] = []
        a_delta: list[float] = []
        for e in flatten(events):
            if isinstance(e, ApproxEvent):
                if e.delta > 0.0:
                    a_eps.append(e.epsilon)
                    a_delta.append(e.delta)
                    continue
                new_params.setdefault(PureEvent, []).append(e.epsilon)
            elif isinstance(e, SelfComposedEvent):
                other.append(e)
            elif isinstance(e, SAMPLED_EVENTS):
                inner = e.event  # type: ignore[attr-defined]
                if isinstance(inner, ApproxEvent) and inner.delta > 0.0:
                    # no curve: the amplified (ε, δ) [BBG18, Thms 9–10], by basic composition
                    q = float(e.rate)  # type: ignore[attr-defined]
                    a_eps.append(math.log1p(q * math.expm1(inner.epsilon)))
                    a_delta.append(q * inner.delta)
                    continue
                other.append(e)
            elif type(e) in _KERNELS or type(e) is ZCDPEvent:
                new_params.setdefault(type(e), []).append(float(getattr(e, type(e).parameter)))
            else:
                raise BudgetError(
                    f"events must be privacy events (LaplaceEvent, GaussianEvent, ...); got {type(e).__name__}."
                )
            pe = pure_epsilon(e)
            if math.isfinite(pe):
                pure.append(pe)
            else:
                all_pure = False
        params = dict(self.params)
        grid = dict(self.grid)
        o = np.asarray(DEFAULT_ORDERS, dtype=np.float64)
        for kind, xs in new_params.items():
            x = np.asarray(xs, dtype=np.float64)
            block = rdp_array(kind, x[:, None], o[None, :])
            old = grid.get(kind)
            # row by row, after the rows already summed: NumPy's sum over axis 0 adds the
            # rows in order, so this is the float of the whole kind's block summed at once
            grid[kind] = block.sum(axis=0) if old is None else np.vstack([old[None, :], block]).sum(axis=0)
            params[kind] = params.get(kind, _EMPTY).append(xs)
        return RdpParts(params, grid, self.other.append(other),
                      self.other_grid.append([event_rdp(e, o) for e in other]),
                      self.pure_eps.add(pure), all_pure, self.approx_eps.add(a_eps), self.approx_delta.add(a_delta))


def _split(events: Sequence[PrivacyEvent]) -> RdpParts:
    return RdpParts().add(events)


def _rdp_sum(g: RdpParts, orders: FloatArray) -> FloatArray:
    """Σᵢ εᵢ(α) of the curve part at every order: one (k, A) kernel call per kind (on the
    shared grid, the sums kept in ``g``).

    The sum is rounded up by :data:`_RDP_ROUNDING` times (Σ values + 1.5 k/(α − 1)): the
    relative error of kernels and summation, plus an absolute allowance for the
    cancellation of the ln-sums at tiny ε, so the result never understates the closed forms.
    """
    total = np.zeros(orders.shape)
    on_grid = orders is DEFAULT_ORDERS
    for kind, xs in g.params.items():
        if on_grid:
            total += g.grid[kind]
        else:
            x = np.asarray(xs.items(), dtype=np.float64)
            total += rdp_array(kind, x[:, None], orders[None, :]).sum(axis=0)
    if on_grid:
        for curve in g.other_grid.items():
            total += curve
    else:
        for e in g.other.items():
            total += event_rdp(e, orders)
    n = g.terms
    return total + _RDP_ROUNDING * (total + 1.5 * n / (orders - 1.0))


def _orders_curve(events: Sequence[PrivacyEvent], orders: FloatArray) -> tuple[FloatArray, float]:
    g = _split(events)
    if g.has_approx:
        return np.full(orders.shape, np.inf), math.inf
    return _rdp_sum(g, orders), g.eps_inf


def rdp_curve(events: Sequence[PrivacyEvent], orders: npt.ArrayLike = DEFAULT_ORDERS) -> RDPCurve:
    """The composed RDP curve of ``events``: ε(α) = Σᵢ εᵢ(α) at every order [M17, Prop. 1].

    An :class:`~planner.privacy.events.ApproxEvent` with δ > 0 has no RDP curve and makes every
    ε(α) infinite (:func:`rdp_epsilon` composes it by basic composition instead).
    ``eps_inf`` = Σ pure εᵢ (inf if some event is not pure).

    Examples
    --------
    >>> c = rdp_curve([GaussianEvent(1.0), GaussianEvent(1.0)], orders=[2.0])
    >>> round(c.epsilons[0], 12)  # 2 · α/(2σ²) = 2 · 2/2, by hand
    2.0
    """
    if len(events) == 0:
        raise BudgetError("events must contain at least one privacy event to build an RDP curve.")
    o = _orders_array(orders)
    values, eps_inf = _orders_curve(events, o)
    return RDPCurve(tuple(o.tolist()), tuple(values.tolist()), eps_inf)


def _tv_zero(rdp_min: float, delta: float) -> bool:
    """(0, δ)-DP from TV ≤ √(1 − e^{−KL}) ≤ √(1 − e^{−ε(α)}) [C22; vEH14, Thm 3]."""
    return math.isfinite(rdp_min) and delta * delta >= -math.expm1(-rdp_min)


def rdp_to_epsilon(curve: RDPCurve, delta: float) -> tuple[float, float]:
    """Convert an RDP curve to (ε, δ)-DP at δ, minimising over its orders.

    Returns (ε, α*): the least ε over the grid of ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1)
    [CKS20, Prop. 12; BBGHS20, Thm 21], the order-∞ value ``eps_inf`` (α* = inf), and 0
    when δ ≥ √(1 − e^{−min ε(α)}) (total variation ≤ δ). δ = 0 gives ``eps_inf``. The
    conversion improves Mironov's ε(α) + ln(1/δ)/(α−1) [M17, Prop. 3].

    Examples
    --------
    One Laplace query of ε = 1 costs exactly 1 (the order-∞ bound):

    >>> round(rdp_to_epsilon(rdp_curve([LaplaceEvent(1.0)]), 1e-6)[0], 12)
    1.0
    """
    d = check_delta(delta)
    if d == 0.0:
        return curve.eps_inf, math.inf
    o = curve.order_array
    r = curve.epsilon_array
    if _tv_zero(float(r.min()), d):
        return 0.0, float(o[int(np.argmin(r))])
    conv = conversion(o, r, math.log(d))
    i = int(np.argmin(conv))
    best = round_up(max(float(conv[i]), 0.0))
    if curve.eps_inf <= best:
        return curve.eps_inf, math.inf
    return best, float(o[i])


def _refine(g: RdpParts, orders: FloatArray, conv: FloatArray, log_delta: float) -> tuple[float, float]:
    """Continuous refinement of the grid minimum: a few rounds of a log-spaced sub-grid
    between the best order's neighbours. Every evaluated order is a valid bound, so the
    minimum over all of them is too."""
    i = int(np.argmin(conv))
    best, order = float(conv[i]), float(orders[i])
    if not math.isfinite(best):
        return best, order
    n = orders.size
    lo = orders[i - 1] - 1.0 if i > 0 else (orders[0] - 1.0) / 4.0
    hi = orders[i + 1] - 1.0 if i < n - 1 else (orders[-1] - 1.0) * 4.0
    for _ in range(_REFINE_ROUNDS):
        cand = 1.0 + np.geomspace(lo, hi, _REFINE_POINTS)
        vals = conversion(cand, _rdp_sum(g, cand), log_delta)
        j = int(np.argmin(vals))
        if vals[j] < best:
            best, order = float(vals[j]), float(cand[j])
        lo = cand[max(j - 1, 0)] - 1.0
        hi = cand[min(j + 1, _REFINE_POINTS - 1)] - 1.0
    return best, order


def _curve_part_epsilon(g: RdpParts, delta: float) -> tuple[float, float]:
    """(ε, α*) of the curve part at δ: grid, refinement, order ∞, TV."""
    eps_inf = g.eps_inf
    if delta <= 0.0:
        return eps_inf, math.inf
    o = DEFAULT_ORDERS
    r = _rdp_sum(g, o)
    if _tv_zero(float(r.min()), delta):
        return 0.0, float(o[int(np.argmin(r))])
    log_delta = math.log(delta)
    best, order = _refine(g, o, conversion(o, r, log_delta), log_delta)
    best = round_up(max(best, 0.0))
    if eps_inf <= best:
        return eps_inf, math.inf
    return best, order


def rdp_epsilon(events: Sequence[PrivacyEvent], delta: float) -> tuple[float, float]:
    """(ε, α*) of ``events`` under RDP composition at total δ, the order refined continuously.

    Events with an RDP curve are composed by RDP and converted at δ_R = δ − Σδⱼ, where the
    (εⱼ, δⱼ) are the (ε, δ > 0) events (no curve); those are added by basic composition
    [DR14]: ε = ε_RDP(δ_R) + Σεⱼ. ε is inf if δ_R < 0, or δ_R = 0 and some event is not
    pure. α* is inf when the order-∞ (pure) bound wins.

    Notes
    -----
    ε_RDP(δ) = min over α of ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1) [CKS20, Prop. 12],
    taken over the 1200-order grid and refined between the best order's neighbours; also
    min with Σ pure εᵢ (order ∞), so a single Laplace query at ε₀ costs exactly ε₀; and 0
    if δ ≥ √(1 − e^{−KL}) (total variation, Bretagnolle–Huber).

    Examples
    --------
    >>> rdp_epsilon([LaplaceEvent(2.0), LaplaceEvent(2.0)], 0.0)  # pure: 1/2 + 1/2, order ∞
    (1.0, inf)
    >>> rdp_epsilon([LaplaceEvent(2.0), LaplaceEvent(2.0)], 1e-6)[0] <= 1.0  # never above basic
    True
    """
    d = check_delta(delta)
    return parts_epsilon(_split(events), d)


def parts_epsilon(g: RdpParts, d: float) -> tuple[float, float]:
    """:func:`rdp_epsilon` of a summary at a checked δ."""
    extra_eps = g.approx_eps.value
    rest = d - g.approx_delta.value
    if rest < -d * REL_TOL:
        return math.inf, math.inf
    if not g.has_curve:
        return extra_eps, math.inf
    eps, order = _curve_part_epsilon(g, max(rest, 0.0) if rest > d * REL_TOL else 0.0)
    return eps + extra_eps, order


# --------------------------------------------------------------------------------------
# Amplification by sampling (the subsampled-RDP kernels)
# --------------------------------------------------------------------------------------

#: Integer orders at which subsampled curves are computed exactly: every integer to 64,
#: then log-spaced to 4096. Between them the chord of (α − 1)ε(α) is used [vEH14b].
_INT_ORDERS: Final = np.unique(np.concatenate([np.arange(2, 65), np.round(np.geomspace(64, 4096, 56))])).astype(np.int64)


def _chord(orders: FloatArray, nodes: npt.NDArray[np.int64] | FloatArray, cgf: FloatArray) -> FloatArray:
    """ε(α) ≤ K(α)/(α − 1), K = (α − 1)ε(α) interpolated linearly between integer nodes
    (K is convex in α, [vEH14b], so its chord lies above it); for α ≤ 2, ε(α) ≤ ε(2) (D_α is
    nondecreasing in α); beyond the last node, inf (the caller's fallback applies)."""
    o = np.asarray(orders, dtype=np.float64)
    k = np.interp(o, nodes.astype(np.float64), cgf)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(o <= nodes[0], cgf[0] / (nodes[0] - 1.0), k / (o - 1.0))
    return np.asarray(np.where(o > nodes[-1], np.inf, out), dtype=np.float64)


def _segment_logsumexp(values: FloatArray, starts: npt.NDArray[np.intp]) -> FloatArray:
    """log Σ exp over consecutive segments of ``values`` beginning at ``starts``."""
    m = np.maximum.reduceat(values, starts)
    seg = np.repeat(np.arange(starts.size), np.diff(np.append(starts, values.size)))
    with np.errstate(invalid="ignore"):
        shifted = np.exp(values - m[seg])
    return np.asarray(m + np.log(np.add.reduceat(np.nan_to_num(shifted), starts)), dtype=np.float64)


def _binomial_terms(nodes: npt.NDArray[np.int64]) -> tuple[FloatArray, FloatArray, npt.NDArray[np.intp]]:
    """For every node α and j = 0…α: (j, ln C(α, j)) flattened, and the segment starts."""
    from planner.core import special
    sizes = nodes + 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    alpha = np.repeat(nodes.astype(np.float64), sizes)
    j = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)
    jf = j.astype(np.float64)
    log_c = special.gammaln(alpha + 1.0) - special.gammaln(jf + 1.0) - special.gammaln(alpha - jf + 1.0)
    return jf, np.asarray(log_c, dtype=np.float64), starts


@functools.lru_cache(maxsize=256)
def _poisson_remove_cgf(q: float, moments_key: tuple[str, float]) -> FloatArray:
    """K(α) = ln E_Q[(1 − q + qP/Q)^α] at the integer nodes, by the binomial expansion
    Σⱼ C(α,j)(1 − q)^{α−j}qʲ E_Q[(P/Q)ʲ] [ZW19; MTZ19 §3.3], with E_Q[(P/Q)ʲ] =
    e^{(j−1)ε(j)} (1 for j = 0, 1). ``moments_key`` names the base curve: ("gaussian", s)
    — ε(j) = j/(2s²), exact [MTZ19] — or ("zcdp", ρ) — ε(j) = ρj, an upper bound."""
    kind, x = moments_key
    jf, log_c, starts = _binomial_terms(_INT_ORDERS)
    alpha = np.repeat(_INT_ORDERS.astype(np.float64), _INT_ORDERS + 1)
    coef = 1.0 / (2.0 * x * x) if kind == "gaussian" else x
    moment = coef * (jf * jf - jf)  # (j − 1)·ε(j) with ε(j) = coef·j: 0 at j = 0, 1
    terms = log_c + (alpha - jf) * math.log1p(-q) + jf * math.log(q) + moment
    out = _segment_logsumexp(terms, starts)
    out.setflags(write=False)
    return out


#: Fractional orders at which the sampled Gaussian is evaluated by MTZ's series (the
#: optimal order of DP-SGD accounting is usually below 32, where the chord between
#: integers is loosest).
_FRAC_ALL = np.concatenate([1.0 + np.arange(1, 100) / 10.0, np.arange(11.5, 32.0, 0.5)])
_FRAC_ORDERS: Final = _FRAC_ALL[np.abs(_FRAC_ALL - np.round(_FRAC_ALL)) > 1e-9]
#: Terms of the series summed, and the largest relative size of the truncated tail accepted.
_FRAC_TERMS: Final[int] = 384
_FRAC_TAIL: Final[float] = 1e-5


@functools.lru_cache(maxsize=256)
def _gaussian_frac_cgf(q: float, sigma: float) -> tuple[FloatArray, FloatArray]:
    """K(α) = ln A_α of the Poisson-sampled Gaussian at the fractional orders, by the series
    of [MTZ19, §3.3] (the one Google dp-accounting and Opacus use):

        A_α = Σ_{i≥0} C(α, i) [ qⁱ(1 − q)^{α−i} e^{(i²−i)/(2σ²)} Φ((z₀ − i)/σ)
                              + q^{α−i}(1 − q)ⁱ e^{(j²−j)/(2σ²)} Φ((j − z₀)/σ) ],  j = α − i,

    z₀ = σ² ln(1/q − 1) + ½, summed over 512 terms.

    Notes
    -----
    For i > α the coefficients C(α, i) alternate in sign and the bracket decreases (by
    Mills' ratio both of its parts behave like |C(α, i)|/(i − z₀), up to constant
    factors), so the series is alternating with decreasing terms from some i on and its
    truncation error is at most the first omitted term, itself at most the last one
    summed: that magnitude is *added* to A_α (an upper bound). Orders whose tail exceeds
    1e-5·A_α are dropped (the chord between their neighbours applies instead).
    """
    from planner.core import special
    a = _FRAC_ORDERS[:, None]
    i = np.arange(_FRAC_TERMS, dtype=np.float64)[None, :]
    j = a - i
    z0 = sigma * sigma * math.log(1.0 / q - 1.0) + 0.5
    log_c = special.gammaln(a + 1.0) - special.gammaln(i + 1.0) - special.gammaln(j + 1.0)
    sign = special.gammasgn(j + 1.0)
    lq, l1q = math.log(q), math.log1p(-q)
    s0 = log_c + i * lq + j * l1q + (i * i - i) / (2.0 * sigma * sigma) + special.log_ndtr((z0 - i) / sigma)
    s1 = log_c + j * lq + i * l1q + (j * j - j) / (2.0 * sigma * sigma) + special.log_ndtr((j - z0) / sigma)
    m = np.maximum(s0.max(axis=1), s1.max(axis=1))[:, None]
    parts = np.exp(s0 - m) + np.exp(s1 - m)
    total = np.sum(sign * parts, axis=1)
    tail = parts[:, -1]
    ok = (total > 0) & (tail <= _FRAC_TAIL * np.where(total > 0, total, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        k = m[:, 0] + np.log(total + tail)
    ok &= np.isfinite(k)
    return _FRAC_ORDERS[ok], np.asarray(k[ok] + 1e-12 * np.maximum(np.abs(k[ok]), 1.0), dtype=np.float64)


@functools.lru_cache(maxsize=256)
def _wor_cgf(q: float, base: PrivacyEvent) -> FloatArray:
    """K(α) of sampling without replacement at the integer nodes [WBK19, Thm 9]:

    ln(1 + q²C(α,2) min{4(e^{ε(2)} − 1), e^{ε(2)} min{2, (e^{ε(∞)} − 1)²}}
         + Σ_{j=3}^{α} qʲ C(α,j) e^{(j−1)ε(j)} min{2, (e^{ε(∞)} − 1)ʲ}),

    ε(·) the base event's RDP curve under substitution and ε(∞) its pure ε."""
    jf, log_c, starts = _binomial_terms(_INT_ORDERS)
    eps_inf = pure_epsilon(base)
    jint = jf.astype(np.int64)
    maxj = int(_INT_ORDERS[-1])
    curve = np.zeros(maxj + 1)
    curve[2:] = event_rdp(base, np.arange(2, maxj + 1, dtype=np.float64))
    eps_j = curve[jint]
    with np.errstate(over="ignore", divide="ignore"):
        if math.isfinite(eps_inf):  # ln min{2, (e^{ε∞} − 1)^j}
            cap = np.minimum(math.log(2.0), jf * math.log(math.expm1(eps_inf)))
        else:
            cap = np.full(jf.shape, math.log(2.0))
        t2 = np.log(np.minimum(4.0 * np.expm1(eps_j), np.exp(eps_j) * np.exp(cap)))
        t3 = (jf - 1.0) * eps_j + cap
        terms = np.where(jint == 2, t2, t3) + log_c + jf * math.log(q)
    terms = np.where(jint < 2, -np.inf, terms)
    terms[starts] = 0.0  # the leading 1 (j = 0 slot)
    out = _segment_logsumexp(terms, starts)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=256)
def _pair_cgf(event: PrivacyEvent) -> FloatArray:
    """K(α) at the integer nodes of a sampled event with a bounded dominating pair: the
    Rényi divergence of its pessimistic discretised loss distribution (planner.privacy.accountants.pld),
    the larger of the two directions. The discretised pair dominates the true one
    (hockey-stick at every ε, hence in Blackwell's order), so every f-divergence — Rényi
    included — is at least the true one: an upper bound."""
    pair = event_pair(event)
    assert pair is not None
    dirs = (False,) if pair.symmetric else (False, True)
    best = np.full(_INT_ORDERS.size, -np.inf)
    a = _INT_ORDERS.astype(np.float64)
    for add in dirs:
        lo, hi = pair.loss_range(add)
        h = max((hi - lo) / 2048.0, 1e-12)
        dist = connect_dots(pair, add, h, lo, hi)
        nz = dist.mass > 0
        lw = np.log(dist.mass[nz])
        v = lw[None, :] + (a - 1.0)[:, None] * dist.losses[nz][None, :]
        c = v.max(axis=1)
        best = np.maximum(best, c + np.log(np.exp(v - c[:, None]).sum(axis=1)))
    best.setflags(write=False)
    return best


def _bounded_pair(event: PrivacyEvent) -> bool:
    pair = event_pair(event)
    if pair is None or pair.inf_mass(False) > 0 or pair.inf_mass(True) > 0:
        return False
    return all(math.isfinite(v) for add in (False, True) for v in pair.loss_range(add))


def sampled_rdp(event: PrivacyEvent, orders: npt.ArrayLike) -> FloatArray:
    """RDP ε(α) of a Poisson-sampled or without-replacement-sampled event, on ``orders``.

    Notes
    -----
    Poisson sampling (add/remove neighbours), by the base mechanism:

    * continuous Gaussian: ln A_α/(α − 1), A_α = Σⱼ C(α,j)(1 − q)^{α−j}qʲe^{(j²−j)/(2s²)},
      exact at integer α [MTZ19, §3.3]; the remove direction dominates the add one
      [MTZ19, Thm 5];
    * Laplace, pure, randomized response, exponential: the Rényi divergence of the
      pessimistic discretised dominating pair, both directions (upper bound, exact up to
      the grid);
    * OpenDP's discrete Gaussian and zCDP events (known only by ε(α) = ρα): the larger of
      the remove direction's binomial expansion [ZW19] and the add direction's
      joint-convexity bound (1/(α − 1)) ln(1 − q + q e^{(α−1)ε(α)}) (the map b ↦ a^α b^{1−α}
      is convex).

    Sampling without replacement (substitute neighbours): [WBK19, Thm 9] on the base curve,
    and for bounded pairs also the discretised pair (the smaller of the two).

    Fractional orders use the chord of (α − 1)ε(α) between integer orders [vEH14b]; above
    4096 the unsampled curve (sampling never increases a Rényi divergence, by joint
    convexity). Every value is also capped by the unsampled curve.
    """
    if not isinstance(event, SAMPLED_EVENTS):
        raise BudgetError(f"sampled_rdp needs a sampled event; got {type(event).__name__}.")
    o = np.asarray(orders, dtype=np.float64)
    inner: PrivacyEvent = event.event  # type: ignore[attr-defined]
    q = float(event.rate)  # type: ignore[attr-defined]
    base = event_rdp(inner, o)
    if q >= 1.0 or (not np.all(np.isfinite(base)) and isinstance(inner, ApproxEvent)):
        return base
    nodes = _INT_ORDERS
    if isinstance(event, PoissonSampledEvent):
        if isinstance(inner, GaussianEvent) and not inner.discrete:
            fo, fk = _gaussian_frac_cgf(q, inner.noise_multiplier)
            all_nodes = np.concatenate([nodes.astype(np.float64), fo])
            order = np.argsort(all_nodes)
            all_k = np.concatenate([_poisson_remove_cgf(q, ("gaussian", inner.noise_multiplier)), fk])
            return np.asarray(np.minimum(_chord(o, all_nodes[order], all_k[order]), base), dtype=np.float64)
        elif _bounded_pair(event):
            cgf = _pair_cgf(event)
        else:
            rho = event_rho(inner)
            remove = _chord(o, nodes, _poisson_remove_cgf(q, ("zcdp", rho)))
            with np.errstate(over="ignore"):
                add = np.log1p(q * np.expm1((o - 1.0) * base)) / (o - 1.0)
            return np.asarray(np.minimum(np.maximum(remove, add), base), dtype=np.float64)
        return np.asarray(np.minimum(_chord(o, nodes, cgf), base), dtype=np.float64)
    assert isinstance(event, SampledWithoutReplacementEvent)
    cgf = _wor_cgf(q, inner)
    if _bounded_pair(event):
        cgf = np.minimum(cgf, _pair_cgf(event))
    return np.asarray(np.minimum(_chord(o, nodes, cgf), base), dtype=np.float64)


@dataclass(frozen=True, eq=False)
class RdpAccountant(Accountant):
    """RDP composition [M17] of the events (their assigned (ε, δ) are not used).

    Its summary (:class:`RdpParts`) keeps each kind's curve summed on the order grid, so a
    release adds its events' curves only; reading ε converts the kept curve (the continuous
    refinement of the best order evaluates the events' closed forms at 51 more orders).

    Examples
    --------
    >>> RdpAccountant().compose([LaplaceEvent(1.0)]).epsilon(0.0)  # pure: order ∞, exactly ε
    1.0
    """

    rule: ClassVar[CompositionRule] = CompositionRule.RDP
    parts: RdpParts = field(default_factory=RdpParts, repr=False)

    def supports(self, event: PrivacyEvent, assigned: tuple[float, float] | None = None) -> bool:
        return True  # (ε, δ > 0) events are added by basic composition (rdp_epsilon)

    def _grow(self, events: tuple[PrivacyEvent, ...], assigned: tuple[tuple[float, float] | None, ...],
              ) -> dict[str, Any]:
        return {"parts": self.parts.add(events)}

    def _epsilon(self, delta: float) -> float:
        if not len(self):
            return 0.0
        return parts_epsilon(self.parts, self.event_delta(delta))[0]


RULE: Final = Rule(
    name=CompositionRule.RDP,
    accountant=RdpAccountant,
    short="RDP",
    full="Rényi differential privacy (RDP)",
    gist="Rényi DP",
    explanation=("Each answer's privacy loss is measured at many Rényi orders, added order by order "
                 "and converted back to (ε, δ) once: tight for Gaussian noise and for many answers."),
    source="Ilya Mironov, *Rényi differential privacy*, CSF 2017",
)
