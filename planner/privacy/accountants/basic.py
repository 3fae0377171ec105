"""Basic composition, and each event's own (ε, δ): the pure-DP currency.

* :func:`pure_epsilon` — an event's ε under pure DP (``inf`` if it has none);
* :func:`epsilon_array` — the same, vectorised over one event kind's parameter, and the
  tightest standalone ε of a Gaussian or zCDP event at a given δ (the allocator's
  kernel for the basic and advanced rules);
* :func:`standalone_epsilon` — the tightest (ε, δ) known for one event on its own;
* :func:`compose_basic`, :func:`compose_parallel` and :class:`BasicAccountant`.

References
----------
.. [DR14] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy",
   FnT-TCS 2014, Thm 3.16 (basic composition), Thm 2.2 (post-processing).
.. [BW18] B. Balle, Y.-X. Wang, "Improving the Gaussian Mechanism for Differential
   Privacy", ICML 2018, arXiv:1805.06530, Thm 8 (the exact Gaussian (ε, δ) curve).
.. [McS09] F. McSherry, "Privacy Integrated Queries", SIGMOD 2009, Thm 4 (parallel
   composition over disjoint parts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError
from planner.privacy import divergences as dv
from planner.privacy.accountants.base import REL_TOL, Accountant, FloatArray, as_deltas, as_epsilons
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


def epsilon_array(
    kind: type[PrivacyEvent], x: npt.ArrayLike, delta: float = 0.0, *, discrete: bool = False
) -> FloatArray:
    """Standalone ε of events of one kind, vectorised over their parameter ``x``.

    Parameters
    ----------
    kind
        The event class; ``x`` is its :attr:`~planner.privacy.events.PrivacyEvent.parameter`.
    x
        Parameters (any shape).
    delta
        The δ the event may use on its own (Gaussian and zCDP events only).
    discrete
        Gaussian events: OpenDP's samplers (certified through ρ-zCDP: the zCDP
        conversion) rather than the idealised continuous Gaussian (the exact analytic
        Gaussian [BW18]).

    Notes
    -----
    Laplace with b = λΔ: ε = 1/λ. Pure and exponential events: ε. Randomized response
    keeping the truth with probability p: ε = ln(p/(1 − p)). Gaussian σ = sΔ, zCDP ρ: the
    least ε at δ (inf at δ = 0).

    Examples
    --------
    >>> epsilon_array(LaplaceEvent, [2.0, 4.0]).tolist()
    [0.5, 0.25]
    """
    a = np.asarray(x, dtype=np.float64)
    if kind is LaplaceEvent:
        return np.asarray(1.0 / a, dtype=np.float64)
    if kind is PureEvent or kind is ExponentialEvent:
        return np.array(a, dtype=np.float64)
    if kind is RandomizedResponseEvent:
        return np.asarray(np.log(a) - np.log1p(-a), dtype=np.float64)
    if kind is GaussianEvent or kind is ZCDPEvent:
        d = check_delta(delta)
        if d == 0.0:
            return np.full(a.shape, np.inf)
        from planner.privacy.accountants.zcdp import rho_array, zcdp_to_approx_epsilon

        if kind is GaussianEvent and not discrete:
            return np.asarray(dv.analytic_gaussian_epsilon(d, 1.0 / a), dtype=np.float64)
        rho = rho_array(kind, a)
        return np.asarray(zcdp_to_approx_epsilon(rho.ravel(), d).reshape(rho.shape), dtype=np.float64)
    raise BudgetError(f"no vectorised ε for {kind.__name__}; use standalone_epsilon().")


def _param(event: PrivacyEvent) -> float:
    return float(getattr(event, type(event).parameter))


def pure_epsilon(event: PrivacyEvent) -> float:
    """The event's ε under pure DP; ``inf`` if it has none (Gaussian, zCDP, (ε, δ > 0)).

    Examples
    --------
    >>> pure_epsilon(SelfComposedEvent(LaplaceEvent(4.0), 3))  # 3 · 1/4
    0.75
    >>> pure_epsilon(GaussianEvent(1.0))
    inf
    """
    if isinstance(event, (LaplaceEvent, PureEvent, ExponentialEvent, RandomizedResponseEvent)):
        return float(epsilon_array(type(event), _param(event))[()])
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
        # ln(1 + q(e^ε − 1)): Balle, Barthe & Gaboardi 2018, Thm 9 (Poisson) and 10 (without replacement)
        inner = pure_epsilon(event.event)  # type: ignore[attr-defined]
        rate = float(event.rate)  # type: ignore[attr-defined]
        return math.log1p(rate * math.expm1(inner)) if math.isfinite(inner) else math.inf
    raise BudgetError(f"unknown privacy event {type(event).__name__}.")


def standalone_epsilon(event: PrivacyEvent, delta: float) -> float:
    """The tightest ε known for ``event`` on its own at δ (its pure ε when it has one).

    Gaussian: the exact analytic Gaussian [BW18], or the zCDP conversion for OpenDP's
    discrete samplers; zCDP: the conversion; (ε, δ) events: ε if δ suffices, else inf;
    composed events without a pure ε: their RDP composition at δ.
    """
    d = check_delta(delta)
    pe = pure_epsilon(event)
    if math.isfinite(pe):
        return pe
    if isinstance(event, GaussianEvent):
        return float(epsilon_array(GaussianEvent, event.noise_multiplier, d, discrete=event.discrete)[()])
    if isinstance(event, ZCDPEvent):
        return float(epsilon_array(ZCDPEvent, event.rho, d)[()])
    if isinstance(event, ApproxEvent):
        return event.epsilon if d >= event.delta else math.inf
    if isinstance(event, ThresholdedEvent):
        return standalone_epsilon(event.event, d - event.delta) if d >= event.delta else math.inf
    if d == 0.0:
        return math.inf
    from planner.privacy.accountants.rdp import rdp_epsilon

    return float(rdp_epsilon([event], d)[0])


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


def compose_basic(epsilons: npt.ArrayLike, deltas: npt.ArrayLike | None = None) -> tuple[float, float]:
    """Sequential (basic) composition: (Σεᵢ, Σδᵢ), each summed with :func:`math.fsum`.

    Holds under adaptive composition (MATH.md §5; [DR14, Thm 3.16]).

    Examples
    --------
    >>> compose_basic([0.5, 0.25], [1e-6, 0.0])  # 0.5 + 0.25, 1e-6 + 0
    (0.75, 1e-06)
    """
    eps = as_epsilons(epsilons)
    dl = as_deltas(deltas, eps.size)
    return math.fsum(eps.tolist()), math.fsum(dl.tolist())


def compose_parallel(epsilons: npt.ArrayLike, deltas: npt.ArrayLike | None = None) -> tuple[float, float]:
    """Parallel composition over disjoint parts of the data: (maxᵢ εᵢ, maxᵢ δᵢ).

    Valid only when each privacy unit can influence one mechanism's input (MATH.md §5;
    [McS09, Thm 4]); the grouped statistics rely on it (one group per unit).

    Examples
    --------
    >>> compose_parallel([0.5, 0.25], [1e-6, 1e-7])
    (0.5, 1e-06)
    """
    eps = as_epsilons(epsilons)
    dl = as_deltas(deltas, eps.size)
    if eps.size == 0:
        return 0.0, 0.0
    return float(eps.max()), float(dl.max())


def basic_total(epsilons: FloatArray, deltas: FloatArray, delta: float) -> float:
    """Σεᵢ of assigned pairs whose Σδᵢ fits in δ (:class:`BudgetError` otherwise)."""
    basic_eps, basic_delta = compose_basic(epsilons, deltas) if epsilons.size else (0.0, 0.0)
    if basic_delta > delta * (1.0 + REL_TOL):
        raise BudgetError(
            f"the spends' deltas sum to {basic_delta:.6g}, more than delta = {delta:.6g} "
            f"(difference {basic_delta - delta:.3g}). Raise delta or use the RDP rule."
        )
    return basic_eps


@dataclass(frozen=True)
class BasicAccountant(Accountant):
    """Basic composition of the assigned (εᵢ, δᵢ): ε = Σεᵢ, needing Σδᵢ ≤ δ.

    Examples
    --------
    >>> BasicAccountant().compose([LaplaceEvent(2.0), PureEvent(0.25)]).epsilon(0.0)
    0.75
    """

    rule: ClassVar[CompositionRule] = CompositionRule.BASIC

    def supports(self, event: PrivacyEvent, assigned: tuple[float, float] | None = None) -> bool:
        return assigned is not None

    def epsilon(self, delta: float) -> float:
        d = check_delta(delta)
        eps, dls = self.pairs()
        return basic_total(eps, dls, d)
