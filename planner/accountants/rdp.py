"""Rényi DP composition: add ε(α) order by order, convert to (ε, δ), refine the order.

* :func:`rdp_array` — the RDP curve of events of one kind, vectorised over parameters and
  orders (the allocator's kernel; the curves themselves are :mod:`planner.divergences`);
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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final

import numpy as np
import numpy.typing as npt

from planner import divergences as dv
from planner.accountants.base import REL_TOL, Accountant, FloatArray, round_up
from planner.accountants.zcdp import conversion
from planner.budget import DEFAULT_ORDERS, CompositionRule, RDPCurve, check_delta
from planner.errors import BudgetError
from planner.events import (
    ApproxEvent,
    ComposedEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
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
    (α/(2s²)) and zCDP (ρα): the closed forms of :mod:`planner.divergences`.

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
    if isinstance(event, SelfComposedEvent):
        one = event_rdp(event.event, o)
        return np.asarray(event.count * one * (1.0 + _SELF_COMPOSED_ALLOWANCE), dtype=np.float64)
    if isinstance(event, ComposedEvent):
        return _orders_curve(flatten(event.events), o)[0]
    return rdp_array(type(event), getattr(event, type(event).parameter), o)


def _orders_array(orders: npt.ArrayLike) -> FloatArray:
    o = np.asarray(orders, dtype=np.float64)
    if o.ndim != 1 or o.size == 0:
        raise BudgetError(f"orders must be a non-empty 1-D sequence; got shape {o.shape}.")
    if not bool(np.all(o > 1.0)) or not bool(np.all(np.isfinite(o))):
        raise BudgetError("orders must all be finite and > 1; use orders such as 1.5, 2, 8, 64.")
    return o


@dataclass(slots=True)
class _Parts:
    """A composition split for RDP: events with a curve, grouped by kind, and the rest."""

    params: dict[type[PrivacyEvent], list[float]] = field(default_factory=dict)
    other: list[PrivacyEvent] = field(default_factory=list)  # self-composed events
    pure_eps: list[float] = field(default_factory=list)  # pure ε of every curve event
    all_pure: bool = True
    approx_eps: list[float] = field(default_factory=list)  # (ε, δ > 0) events: no curve
    approx_delta: list[float] = field(default_factory=list)

    @property
    def has_curve(self) -> bool:
        return bool(self.params or self.other)

    @property
    def eps_inf(self) -> float:
        """Order-∞ bound of the curve part: Σ pure ε (inf if some event is not pure)."""
        return math.fsum(self.pure_eps) if self.all_pure else math.inf


def _split(events: Sequence[PrivacyEvent]) -> _Parts:
    from planner.accountants.basic import pure_epsilon

    g = _Parts()
    for e in flatten(events):
        if isinstance(e, ApproxEvent):
            if e.delta > 0.0:
                g.approx_eps.append(e.epsilon)
                g.approx_delta.append(e.delta)
                continue
            g.params.setdefault(PureEvent, []).append(e.epsilon)
        elif isinstance(e, SelfComposedEvent):
            g.other.append(e)
        elif type(e) in _KERNELS or type(e) is ZCDPEvent:
            g.params.setdefault(type(e), []).append(float(getattr(e, type(e).parameter)))
        else:
            raise BudgetError(
                f"events must be privacy events (LaplaceEvent, GaussianEvent, ...); got {type(e).__name__}."
            )
        pe = pure_epsilon(e)
        if math.isfinite(pe):
            g.pure_eps.append(pe)
        else:
            g.all_pure = False
    return g


def _rdp_sum(g: _Parts, orders: FloatArray) -> FloatArray:
    """Σᵢ εᵢ(α) of the curve part at every order: one (k, A) kernel call per kind.

    The sum is rounded up by :data:`_RDP_ROUNDING` times (Σ values + 1.5 k/(α − 1)): the
    relative error of kernels and summation, plus an absolute allowance for the
    cancellation of the ln-sums at tiny ε, so the result never understates the closed forms.
    """
    total = np.zeros(orders.shape)
    n = 0
    for kind, xs in g.params.items():
        x = np.asarray(xs, dtype=np.float64)
        n += x.size
        total += rdp_array(kind, x[:, None], orders[None, :]).sum(axis=0)
    for e in g.other:
        n += 1
        total += event_rdp(e, orders)
    return total + _RDP_ROUNDING * (total + 1.5 * n / (orders - 1.0))


def _orders_curve(events: Sequence[PrivacyEvent], orders: FloatArray) -> tuple[FloatArray, float]:
    g = _split(events)
    if g.approx_eps:
        return np.full(orders.shape, np.inf), math.inf
    return _rdp_sum(g, orders), g.eps_inf


def rdp_curve(events: Sequence[PrivacyEvent], orders: npt.ArrayLike = DEFAULT_ORDERS) -> RDPCurve:
    """The composed RDP curve of ``events``: ε(α) = Σᵢ εᵢ(α) at every order [M17, Prop. 1].

    An :class:`~planner.events.ApproxEvent` with δ > 0 has no RDP curve and makes every
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


def _refine(g: _Parts, orders: FloatArray, conv: FloatArray, log_delta: float) -> tuple[float, float]:
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


def _curve_part_epsilon(g: _Parts, delta: float) -> tuple[float, float]:
    """(ε, α*) of the curve part at δ: grid, refinement, order ∞, TV."""
    eps_inf = g.eps_inf
    if delta <= 0.0:
        return eps_inf, math.inf
    o = np.asarray(DEFAULT_ORDERS, dtype=np.float64)
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
    g = _split(events)
    extra_eps = math.fsum(g.approx_eps)
    rest = d - math.fsum(g.approx_delta)
    if rest < -d * REL_TOL:
        return math.inf, math.inf
    if not g.has_curve:
        return extra_eps, math.inf
    eps, order = _curve_part_epsilon(g, max(rest, 0.0) if rest > d * REL_TOL else 0.0)
    return eps + extra_eps, order


@dataclass(frozen=True)
class RdpAccountant(Accountant):
    """RDP composition [M17] of the events (their assigned (ε, δ) are not used).

    Examples
    --------
    >>> RdpAccountant().compose([LaplaceEvent(1.0)]).epsilon(0.0)  # pure: order ∞, exactly ε
    1.0
    """

    rule: ClassVar[CompositionRule] = CompositionRule.RDP

    def supports(self, event: PrivacyEvent, assigned: tuple[float, float] | None = None) -> bool:
        return True  # (ε, δ > 0) events are added by basic composition (rdp_epsilon)

    def epsilon(self, delta: float) -> float:
        if not self.events:
            return 0.0
        return rdp_epsilon(self.events, delta)[0]
