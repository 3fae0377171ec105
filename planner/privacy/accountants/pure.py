"""Pure ε-DP, the currency every accountant shares: an event's own ε and the cheap check
that a claimed (ε, δ) is not refuted by the event.

The lowest module of the accountants: :mod:`.base` (the :class:`~.base.Spend` record checks
its claim here) and every rule's module import it, and it imports none of them.

References
----------
.. [BW18] B. Balle, Y.-X. Wang, "Improving the Gaussian Mechanism for Differential
   Privacy", ICML 2018, arXiv:1805.06530, Thm 8 (the exact Gaussian (ε, δ) curve).
.. [BBG18] B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling",
   NeurIPS 2018, arXiv:1807.01647, Thms 9–10 (ε ↦ ln(1 + q(e^ε − 1))).
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError
from planner.privacy import divergences as dv
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

FloatArray = npt.NDArray[np.float64]

#: Relative slack accepted when comparing a requested δ (or a claimed ε) with a sum of
#: floating-point values: float noise, far below any meaningful privacy parameter.
REL_TOL: Final[float] = 1e-9

#: The event kinds with a pure ε that is a function of their one parameter.
PURE_KINDS: Final = (LaplaceEvent, PureEvent, ExponentialEvent, RandomizedResponseEvent)


def pure_epsilon_array(kind: type[PrivacyEvent], x: npt.ArrayLike) -> FloatArray:
    """ε of pure events of one kind, vectorised over their parameter ``x``.

    Laplace with b = λΔ: ε = 1/λ. Pure and exponential events: ε. Randomized response
    keeping the truth with probability p: ε = ln(p/(1 − p)).

    Examples
    --------
    >>> pure_epsilon_array(LaplaceEvent, [2.0, 4.0]).tolist()
    [0.5, 0.25]
    """
    a = np.asarray(x, dtype=np.float64)
    if kind is LaplaceEvent:
        return np.asarray(1.0 / a, dtype=np.float64)
    if kind is PureEvent or kind is ExponentialEvent:
        return np.array(a, dtype=np.float64)
    if kind is RandomizedResponseEvent:
        return np.asarray(np.log(a) - np.log1p(-a), dtype=np.float64)
    raise BudgetError(f"{kind.__name__} has no pure ε of its parameter.")


def pure_epsilon(event: PrivacyEvent) -> float:
    """The event's ε under pure DP; ``inf`` if it has none (Gaussian, zCDP, (ε, δ > 0)).

    Examples
    --------
    >>> pure_epsilon(SelfComposedEvent(LaplaceEvent(4.0), 3))  # 3 · 1/4
    0.75
    >>> pure_epsilon(GaussianEvent(1.0))
    inf
    """
    if isinstance(event, PURE_KINDS):
        return float(pure_epsilon_array(type(event), float(getattr(event, type(event).parameter)))[()])
    if isinstance(event, (GaussianEvent, ZCDPEvent)):
        return math.inf
    if isinstance(event, ApproxEvent):
        return event.epsilon if event.delta == 0.0 else math.inf
    if isinstance(event, ThresholdedEvent):  # δ > 0 by construction: never pure
        return math.inf
    if isinstance(event, SelfComposedEvent):
        return event.count * pure_epsilon(event.event)
    if isinstance(event, ComposedEvent):
        return math.fsum(pure_epsilon(e) for e in event.events)
    if isinstance(event, SAMPLED_EVENTS):
        # ln(1 + q(e^ε − 1)) [BBG18, Thm 9 (Poisson) and 10 (without replacement)]
        inner = pure_epsilon(event.event)  # type: ignore[attr-defined]
        rate = float(event.rate)  # type: ignore[attr-defined]
        return math.log1p(rate * math.expm1(inner)) if math.isfinite(inner) else math.inf
    raise BudgetError(f"unknown privacy event {type(event).__name__}.")


def claim_is_refuted(event: PrivacyEvent, epsilon: float, delta: float) -> bool:
    """True iff (ε, δ) is *provably* not a guarantee of ``event`` (cheap checks only).

    Only claims that can be refuted exactly are rejected: (ε, 0) below a pure event's ε
    (or for an event with no pure ε), anything not implied by an :class:`ApproxEvent`'s
    own (ε, δ), and a continuous Gaussian whose exact δ(ε) [BW18] exceeds δ. Everything
    else (e.g. a Laplace event claimed at δ > 0) is accepted.
    """
    slack = 1.0 + REL_TOL
    if delta == 0.0:
        return epsilon * slack < pure_epsilon(event)
    if isinstance(event, ApproxEvent):
        return epsilon * slack < event.epsilon or delta * slack < event.delta
    if isinstance(event, ThresholdedEvent):
        return delta * slack < event.delta or epsilon * slack < pure_epsilon(event.event)
    if isinstance(event, GaussianEvent) and not event.discrete:
        exact = float(dv.analytic_gaussian_delta(epsilon, 1.0 / event.noise_multiplier))
        return exact > delta * slack
    return False


__all__ = ["PURE_KINDS", "REL_TOL", "claim_is_refuted", "pure_epsilon", "pure_epsilon_array"]
