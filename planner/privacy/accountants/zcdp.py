"""zCDP composition: add ρ, convert to (ε, δ); pure parts may keep their pure ε.

* :func:`rho_array` — ρ of events of one kind, vectorised (the allocator's kernel);
* :func:`event_rho`, :func:`zcdp_rho` — one event's ρ, and a composition's;
* :func:`zcdp_to_approx_epsilon` — the tightest (ε, δ) of ρ-zCDP (the conversion OpenDP
  0.16's ``make_zCDP_to_approxDP`` computes);
* :class:`ZcdpAccountant` — the rule: min over the ways of accounting the pure events
  (:func:`zcdp_epsilon`), never worse than basic composition of the pure ones.

References
----------
.. [BS16] M. Bun, T. Steinke, "Concentrated Differential Privacy: Simplifications,
   Extensions, and Lower Bounds", TCC 2016, arXiv:1605.02065, Lemma 2.3 (composition),
   Prop. 1.4 (pure ε ⇒ ε²/2-zCDP), Prop. 1.3.
.. [CR21] M. Cesar, R. Rogers, "Bounding, Concentrating, and Truncating: Unifying Privacy
   Loss Composition for Data Analytics", ALT 2021, arXiv:2004.07223, Lemma 3.2 (the
   exponential mechanism is ε²/8-zCDP).
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
   Privacy", NeurIPS 2020, arXiv:2004.00010, Prop. 12, Cor. 13 (zCDP → (ε, δ)).
.. [DR14] C. Dwork, A. Roth, Thm 3.16 (basic composition of the two parts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError
from planner.privacy.accountants.base import ROUND_UP, Accountant, FloatArray, Rule
from planner.privacy.accountants.exact import EMPTY_SUM, ExactSum
from planner.privacy.accountants.pure import pure_epsilon
from planner.privacy.budget import CompositionRule, check_delta
from planner.privacy.events import (
    SAMPLED_EVENTS,
    ApproxEvent,
    ComposedEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ThresholdedEvent,
    ZCDPEvent,
)

#: Cap on the Newton steps of the zCDP conversion (8 suffice; any α is a valid bound).
_ZCDP_NEWTON: Final[int] = 50
#: The least order α the conversion uses: OpenDP's ``make_zCDP_to_approxDP`` (the one
#: released noise is certified through) searches α ≥ 1.01, so the planner does too, and
#: the ε it plans is the ε the ledger records. The minimiser α* falls below 1.01 only
#: for δ near 1 or ρ past ~1e5 (δ = 1e-6); there ε(1.01) ≥ ε(α*) is still a valid bound.
ZCDP_MIN_ORDER: Final[float] = 1.01


def rho_array(kind: type[PrivacyEvent], x: npt.ArrayLike) -> FloatArray:
    """ρ of events of one kind, vectorised over their parameter ``x``.

    Notes
    -----
    Laplace (b = λΔ, ε = 1/λ) and every pure ε-DP event: ε²/2 [BS16, Prop. 1.4];
    exponential mechanism: ε²/8 [CR21]; Gaussian σ = sΔ: 1/(2s²) (discrete Gaussian: the
    same ρ [CKS20, Thm 4]); zCDP: ρ.

    Examples
    --------
    >>> rho_array(ExponentialEvent, [2.0]).tolist()  # 2²/8
    [0.5]
    """
    a = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore"):
        return _rho_array(kind, a)


def _rho_array(kind: type[PrivacyEvent], a: FloatArray) -> FloatArray:
    if kind is LaplaceEvent:
        return np.asarray((1.0 / a) ** 2 / 2.0, dtype=np.float64)
    if kind is PureEvent:
        return np.asarray(a**2 / 2.0, dtype=np.float64)
    if kind is ExponentialEvent:
        return np.asarray(a**2 / 8.0, dtype=np.float64)
    if kind is RandomizedResponseEvent:
        return np.asarray((np.log(a) - np.log1p(-a)) ** 2 / 2.0, dtype=np.float64)
    if kind is GaussianEvent:
        return np.asarray((1.0 / a) ** 2 / 2.0, dtype=np.float64)
    if kind is ZCDPEvent:
        return np.array(a, dtype=np.float64)
    raise BudgetError(f"no vectorised ρ for {kind.__name__}; use event_rho().")


def event_rho(event: PrivacyEvent) -> float:
    """One event's ρ (``inf`` for an (ε, δ) event with δ > 0, which has none).

    Examples
    --------
    >>> event_rho(GaussianEvent(1.0)), event_rho(LaplaceEvent(1.0))  # 1/(2·1²), 1²/2
    (0.5, 0.5)
    """
    if isinstance(event, ApproxEvent):
        return event.epsilon**2 / 2.0 if event.delta == 0.0 else math.inf
    if isinstance(event, ThresholdedEvent):  # δ-approximate: no ρ alone (accountants reserve δ)
        return math.inf
    if isinstance(event, SelfComposedEvent):
        return event.count * event_rho(event.event)
    if isinstance(event, SAMPLED_EVENTS):  # sampling never increases a Rényi divergence
        return event_rho(event.event)  # type: ignore[attr-defined]
    if isinstance(event, ComposedEvent):
        return zcdp_rho(event.events)
    return float(rho_array(type(event), getattr(event, type(event).parameter))[()])


def zcdp_rho(events: Sequence[PrivacyEvent]) -> float:
    """Composed ρ: Σρᵢ [BS16, Lemma 2.3]; inf if some event has no ρ (empty: 0).

    Examples
    --------
    >>> zcdp_rho([GaussianEvent(1.0), LaplaceEvent(1.0)])  # 1/(2·1²) + 1²/2
    1.0
    """
    rhos = [event_rho(e) for e in events]
    if any(math.isinf(r) for r in rhos):
        return math.inf
    return math.fsum(rhos)


def conversion(orders: npt.ArrayLike, rdp: npt.ArrayLike, log_delta: float) -> FloatArray:
    """ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1) at each order [CKS20, Prop. 12].

    The one RDP → (ε, δ) conversion: the RDP accountant minimises it over orders, the zCDP
    conversion at its closed-form optimum, and the allocator evaluates it per order.
    """
    o = np.asarray(orders, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.asarray(rdp, dtype=np.float64) + np.log1p(-1.0 / o) - (log_delta + np.log(o)) / (o - 1.0)
    return np.asarray(np.where(np.isnan(out), np.inf, out), dtype=np.float64)


def zcdp_to_approx_epsilon(rho: npt.ArrayLike, delta: float) -> FloatArray:
    """Tightest (ε, δ) of ρ-zCDP, vectorised over ρ.

    Returns ε ≥ 0 of the same shape as ``rho``: 0 where ρ = 0, inf where ρ = inf or δ = 0.

    Notes
    -----
    ρ-zCDP is (α, ρα)-RDP for every α > 1, so [CKS20, Prop. 12] gives, for every α,

        ε(α) = ρα + ln((α−1)/α) − (ln δ + ln α)/(α−1)

    (equivalently [CKS20, Cor. 13] solved for ε). Its derivative is
    ρ + ln(αδ)/(α−1)², whose numerator ρ(α−1)² + ln α + ln δ increases in α, so the
    minimiser is the unique root α* of ρ(α−1)² + ln(αδ) = 0. In y = ln(α − 1) that
    function is convex and increasing, so Newton's method started at
    α − 1 = min(√(ln(1/δ)/ρ), 1/δ − 1) (where it is ≥ 0) converges monotonically
    (vectorised, ≤ 8 steps). ε(α) is evaluated at max(α*, 1.01) (any α is a valid
    bound, so an inexact α* can only over-state ε), clipped at 0 and rounded up by a few
    ulps. This is the function OpenDP 0.16's ``make_zCDP_to_approxDP`` computes, which
    bisects for α* on [1.01, ∞) (agreement observed to ~1e-16 relative; the tests require
    1e-6, at δ up to 0.99 and ρ up to 1e4); it is never below the exact Gaussian ε.

    Examples
    --------
    >>> float(zcdp_to_approx_epsilon(0.0, 1e-6))
    0.0
    >>> bool(zcdp_to_approx_epsilon(0.5, 1e-6) < 0.5 + 2 * math.sqrt(0.5 * math.log(1e6)))
    True
    """
    d = check_delta(delta)
    try:
        r = np.asarray(rho, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"rho must be a number or an array of numbers ≥ 0; got {rho!r}.") from exc
    if r.size == 1 and d > 0.0:  # the allocator's bisections: thousands of single values
        one = _zcdp_epsilon_one(float(r.reshape(-1)[0]), d)
        if one is not None:
            return np.full(r.shape, one)
    return _zcdp_epsilon_array(r, d)


def _zcdp_epsilon_array(r: FloatArray, d: float) -> FloatArray:
    """:func:`zcdp_to_approx_epsilon` of an array ``r`` for a checked δ ``d``, vectorised."""
    if np.any(np.isnan(r)) or np.any(r < 0.0):
        raise BudgetError(_RHO_NOT_NUMBER)
    out = np.full(r.shape, np.inf)
    out[r == 0.0] = 0.0
    live = np.isfinite(r) & (r > 0.0)
    if d == 0.0 or not np.any(live):
        return np.asarray(out, dtype=np.float64)
    rl = r[live]
    log_d = math.log(d)
    # Newton on y = ln(α − 1) for g(y) = ρe^{2y} + ln(1 + e^y) + ln δ, convex and increasing
    # in y: started where g ≥ 0, the iterates decrease monotonically to the root.
    y = np.log(np.minimum(np.sqrt(-log_d / rl), 1.0 / d - 1.0))
    for _ in range(_ZCDP_NEWTON):
        xx = np.exp(y)
        rx2 = rl * xx * xx
        step = (rx2 + np.log1p(xx) + log_d) / (2.0 * rx2 + xx / (1.0 + xx))
        y -= step
        if bool(np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(y)))):
            break
    alpha = np.maximum(1.0 + np.exp(y), ZCDP_MIN_ORDER)
    eps = np.maximum(conversion(alpha, rl * alpha, log_d), 0.0)
    out[live] = eps + np.abs(eps) * ROUND_UP
    return np.asarray(out, dtype=np.float64)


_RHO_NOT_NUMBER: Final[str] = "rho must be ≥ 0 (inf allowed); got a negative or NaN value."


def _ufunc_at(f: np.ufunc, x: float) -> float:
    """``f(x)`` computed by NumPy's loop on a one-element float64 array.

    NumPy's exp, log and log1p are its own SIMD code, not the C library's: they differ from
    :mod:`math` in the last bit for about 5% of arguments. Going through the same loop on
    the same one-element array keeps the bits of the vectorised path exactly.
    """
    return float(f(np.array([x], dtype=np.float64))[0])


def _zcdp_epsilon_one(r: float, d: float) -> float | None:
    """:func:`zcdp_to_approx_epsilon` of one ρ for δ ``d`` > 0, in Python floats: bit for bit
    :func:`_zcdp_epsilon_array` of the one-element array, about 3× faster (17 µs against
    57 µs per call, timed alone at ρ = 0.37; the allocator's
    bisection in :func:`planner.planning.allocation._rho_for_epsilon` converts thousands of single
    values per plan).

    Why the bits agree: the vectorised path on one element performs the same sequence of
    IEEE-754 operations: +, −, ×, ÷ and √ are correctly rounded in NumPy and in Python alike,
    ``np.minimum``/``np.maximum``/``np.abs`` are exact, and exp, log and log1p go through
    NumPy's own loop (:func:`_ufunc_at`); Newton's stopping test on one element is the same
    test; the final ε is :func:`conversion` itself, on one-element arrays. ``tests/engine/test_zcdp_scalar.py`` compares the two on a grid of (ρ, δ).
    Returns None where a Newton step would leave the finite floats (division by zero,
    inf or NaN: the vectorised path's ``errstate`` handles those) so the caller takes that
    path.
    """
    if math.isnan(r) or r < 0.0:
        raise BudgetError(_RHO_NOT_NUMBER)
    if r == 0.0:
        return 0.0
    if not math.isfinite(r):
        return None
    log_d = math.log(d)
    start = min(math.sqrt(-log_d / r), 1.0 / d - 1.0)
    if not (math.isfinite(start) and start > 0.0):
        return None
    y = _ufunc_at(np.log, start)
    for _ in range(_ZCDP_NEWTON):
        xx = _ufunc_at(np.exp, y)
        rx2 = r * xx * xx
        den = 2.0 * rx2 + xx / (1.0 + xx)
        if not (math.isfinite(rx2) and den > 0.0 and math.isfinite(den)):
            return None
        step = (rx2 + _ufunc_at(np.log1p, xx) + log_d) / den
        y -= step
        if abs(step) <= 1e-15 * max(1.0, abs(y)):
            break
    alpha = max(1.0 + _ufunc_at(np.exp, y), ZCDP_MIN_ORDER)
    # the one conversion, on one-element arrays as the vectorised path calls it
    eps = max(float(conversion(np.array([alpha]), np.array([r * alpha]), log_d)[0]), 0.0)
    return eps + abs(eps) * ROUND_UP


def zcdp_epsilon(pure_eps: npt.ArrayLike, pure_rho: npt.ArrayLike, other_rho: float, delta: float) -> float:
    """The zCDP rule's ε: each pure event is counted by its ρ or by its ε, whichever is
    cheaper overall.

    Parameters
    ----------
    pure_eps, pure_rho
        ε and ρ of the events that have a pure ε (Laplace, exponential, ...).
    other_rho
        Σρ of the events that have only a ρ (Gaussian, zCDP).
    delta
        Total δ.

    Notes
    -----
    Claim: for any set P of the pure events, the composition is
    (Σ_{i∈P} εᵢ + ε_z(Σ_{i∉P} ρᵢ + other_rho, δ), δ)-DP, where ε_z is
    :func:`zcdp_to_approx_epsilon`. Proof: the events outside P and the ρ-only ones are
    (Σρ)-zCDP together [BS16, Lemma 2.3], hence (ε_z, δ)-DP [CKS20]; the events in P are
    (Σεᵢ, 0)-DP together; basic composition of the two groups adds ε and δ [DR14, Thm 3.16]. ∎
    Moving an event from the ρ side to the ε side changes the cost by εᵢ − (ε_z(R) −
    ε_z(R − ρᵢ)) ≈ εᵢ − ε_z′(R)·ρᵢ, which favours the ε side for the largest ρᵢ/εᵢ first
    (ρ/ε = ε/2 for a Laplace: the largest ε); the sets P tried are therefore the k pure
    events with the largest ρᵢ/εᵢ, k = 0 … all (k = 0 is plain zCDP, k = all with no
    ρ-only events is basic composition). Every candidate is a valid bound,
    so their minimum is too. A lone Laplace at ε = 2 costs 2, not the 14.15 of ρ = 2.

    Examples
    --------
    >>> round(zcdp_epsilon([2.0], [2.0], 0.0, 1e-6), 12)  # one Laplace of ε = 2
    2.0
    """
    d = check_delta(delta)
    eps = np.asarray(pure_eps, dtype=np.float64).ravel()
    rho = np.asarray(pure_rho, dtype=np.float64).ravel()
    if not math.isfinite(other_rho):
        return math.inf
    order = np.argsort(-rho / eps, kind="stable") if eps.size else np.zeros(0, dtype=np.intp)
    eps_sorted, rho_sorted = eps[order], rho[order]
    # candidate k: the first k (largest ρ/ε) by ε, the rest by ρ
    eps_part = np.concatenate([[0.0], np.cumsum(eps_sorted)])
    rho_rest = other_rho + np.concatenate([np.cumsum(rho_sorted[::-1])[::-1], [0.0]])
    conv = zcdp_to_approx_epsilon(np.maximum(rho_rest, 0.0), d)
    total = eps_part + np.where(rho_rest > 0, conv, 0.0)
    i = int(np.argmin(total))
    if i == eps.size and other_rho == 0.0:  # all pure, all by ε: exactly basic composition
        return math.fsum(eps.tolist())
    return float(total[i] + abs(total[i]) * ROUND_UP)


class _Chunks:
    """Floats appended batch by batch, joined into one array once when read."""

    __slots__ = ("_joined", "parent", "tail")

    def __init__(self, parent: _Chunks | None = None, tail: FloatArray | None = None) -> None:
        self.parent = parent
        self.tail = tail
        self._joined: FloatArray | None = None

    def append(self, values: FloatArray) -> _Chunks:
        return _Chunks(self, values) if values.size else self

    def array(self) -> FloatArray:
        if self._joined is None:
            parts: list[FloatArray] = []
            node: _Chunks | None = self
            while node is not None:
                if node.tail is not None:
                    parts.append(node.tail)
                node = node.parent
            self._joined = np.concatenate(parts[::-1]) if parts else np.zeros(0)
        return self._joined


@dataclass(frozen=True, eq=False)
class ZcdpAccountant(Accountant):
    """zCDP composition [BS16], pure events counted by ρ or by ε, whichever is cheaper
    (:func:`zcdp_epsilon`). Every event except an (ε, δ > 0) one is supported.

    Its summary: Σρ of the events without a pure ε (exactly), and the (ε, ρ) of the pure
    ones, appended per release (the choice of which pure events to count by ε needs them
    all; reading ε sorts them once, O(n log n) in NumPy, and keeps the answer).

    Examples
    --------
    >>> round(ZcdpAccountant().compose([LaplaceEvent(0.5)]).epsilon(1e-6), 12)  # pure ε 2
    2.0
    """

    rule: ClassVar[CompositionRule] = CompositionRule.ZCDP
    unsupported: ClassVar[str] = "an (ε, δ) event with δ > 0 has no ρ"
    pure_eps: _Chunks = field(default_factory=_Chunks, repr=False)
    pure_rho: _Chunks = field(default_factory=_Chunks, repr=False)
    other_rho: ExactSum = field(default=EMPTY_SUM, repr=False)

    def supports(self, event: PrivacyEvent, assigned: tuple[float, float] | None = None) -> bool:
        return math.isfinite(event_rho(event))

    def _grow(self, events: tuple[PrivacyEvent, ...], assigned: tuple[tuple[float, float] | None, ...],
              ) -> dict[str, Any]:
        pe = np.array([pure_epsilon(e) for e in events], dtype=np.float64)
        rho = np.array([event_rho(e) for e in events], dtype=np.float64)
        if np.any(np.isinf(rho)):
            raise BudgetError(
                "zCDP composition needs every event to have a ρ; an (ε, δ) event with δ > 0 "
                "has none. Use the basic, advanced or RDP rule for this set of spends."
            )
        pure = np.isfinite(pe)
        return {"pure_eps": self.pure_eps.append(pe[pure]), "pure_rho": self.pure_rho.append(rho[pure]),
                "other_rho": self.other_rho.add(rho[~pure].tolist())}

    def _epsilon(self, delta: float) -> float:
        d = self.event_delta(delta)
        if not len(self):
            return 0.0
        return zcdp_epsilon(self.pure_eps.array(), self.pure_rho.array(), self.other_rho.value, d)


RULE: Final = Rule(
    name=CompositionRule.ZCDP,
    accountant=ZcdpAccountant,
    short="zCDP",
    full="zero-concentrated differential privacy (zCDP)",
    gist="zero-concentrated DP",
    explanation=("Each answer costs a ρ (ε²/2 for pure-ε noise), the ρ add up and the total is "
                 "converted to (ε, δ) once: suited to Gaussian noise, the noise OpenDP certifies this way."),
    source=("Mark Bun and Thomas Steinke, *Concentrated differential privacy: simplifications, "
            "extensions, and lower bounds*, TCC 2016"),
)
