"""Basic composition, and each event's own (ε, δ).

* :func:`pure_epsilon` — an event's ε under pure DP (``inf`` if it has none; defined in
  :mod:`.pure`, re-exported here);
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
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError
from planner.privacy import divergences as dv
from planner.privacy.accountants.base import Accountant, FloatArray, Rule, as_deltas, as_epsilons
from planner.privacy.accountants.exact import EMPTY_SUM, ExactSum
from planner.privacy.accountants.pure import PURE_KINDS, REL_TOL, pure_epsilon, pure_epsilon_array
from planner.privacy.accountants.rdp import rdp_epsilon
from planner.privacy.accountants.zcdp import rho_array, zcdp_to_approx_epsilon
from planner.privacy.budget import CompositionRule, check_delta
from planner.privacy.events import (
    ApproxEvent,
    GaussianEvent,
    PrivacyEvent,
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
    >>> from planner.privacy.events import LaplaceEvent
    >>> epsilon_array(LaplaceEvent, [2.0, 4.0]).tolist()
    [0.5, 0.25]
    """
    a = np.asarray(x, dtype=np.float64)
    if kind in PURE_KINDS:
        return pure_epsilon_array(kind, a)
    if kind is GaussianEvent or kind is ZCDPEvent:
        d = check_delta(delta)
        if d == 0.0:
            return np.full(a.shape, np.inf)
        if kind is GaussianEvent and not discrete:
            return np.asarray(dv.analytic_gaussian_epsilon(d, 1.0 / a), dtype=np.float64)
        rho = rho_array(kind, a)
        return np.asarray(zcdp_to_approx_epsilon(rho.ravel(), d).reshape(rho.shape), dtype=np.float64)
    raise BudgetError(f"no vectorised ε for {kind.__name__}; use standalone_epsilon().")


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
    return float(rdp_epsilon([event], d)[0])


def compose_basic(epsilons: npt.ArrayLike, deltas: npt.ArrayLike | None = None) -> tuple[float, float]:
    """Sequential (basic) composition: (Σεᵢ, Σδᵢ), each summed with :func:`math.fsum`.

    Holds under adaptive composition (docs/mathematics.md §5; [DR14, Thm 3.16]).

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

    Valid only when each privacy unit can influence one mechanism's input (docs/mathematics.md §5;
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
    return _fitting_sum(basic_eps, basic_delta, delta)


def _fitting_sum(basic_eps: float, basic_delta: float, delta: float) -> float:
    if basic_delta > delta * (1.0 + REL_TOL):
        raise BudgetError(
            f"the spends' deltas sum to {basic_delta:.6g}, more than delta = {delta:.6g} "
            f"(difference {basic_delta - delta:.3g}). Raise delta or use the RDP rule."
        )
    return basic_eps


def unassigned_error(rule: CompositionRule) -> BudgetError:
    """The error of a rule that reads assigned pairs, given a spend without one."""
    return BudgetError(
        f"the {rule.value} rule needs an (ε, δ) assigned to every spend; record "
        "spends (planner.privacy.accountants.Spend), not bare events, for non-pure mechanisms."
    )


@dataclass(frozen=True, eq=False)
class BasicAccountant(Accountant):
    """Basic composition of the assigned (εᵢ, δᵢ): ε = Σεᵢ, needing Σδᵢ ≤ δ.

    Its summary is the exact sums Σεᵢ and Σδᵢ (:class:`~planner.privacy.accountants.exact.ExactSum`),
    so composing a release costs its spends and ε costs nothing more, whatever the history.

    Examples
    --------
    >>> from planner.privacy.events import LaplaceEvent, PureEvent
    >>> BasicAccountant().compose([LaplaceEvent(2.0), PureEvent(0.25)]).epsilon(0.0)
    0.75
    >>> a = BasicAccountant().compose([LaplaceEvent(2.0)])
    >>> a.compose([PureEvent(0.25)]).epsilon(0.0)  # one release at a time: the same sum
    0.75
    """

    rule: ClassVar[CompositionRule] = CompositionRule.BASIC
    eps_sum: ExactSum = field(default=EMPTY_SUM, repr=False)
    delta_sum: ExactSum = field(default=EMPTY_SUM, repr=False)
    unassigned: int = 0

    def supports(self, event: PrivacyEvent, assigned: tuple[float, float] | None = None) -> bool:
        return assigned is not None

    def _grow(self, events: tuple[PrivacyEvent, ...], assigned: tuple[tuple[float, float] | None, ...],
              ) -> dict[str, Any]:
        pairs = [p for p in assigned if p is not None]
        return {"eps_sum": self.eps_sum.add(p[0] for p in pairs),
                "delta_sum": self.delta_sum.add(p[1] for p in pairs),
                "unassigned": self.unassigned + len(assigned) - len(pairs)}

    def _epsilon(self, delta: float) -> float:
        if self.unassigned:
            raise unassigned_error(self.rule)
        return _fitting_sum(self.eps_sum.value, self.delta_sum.value, delta)


RULE: Final = Rule(
    name=CompositionRule.BASIC,
    accountant=BasicAccountant,
    short="basic",
    full="basic composition",
    gist="add up every ε",
    explanation=("The ε of every answer are added up (and their δ): the simplest rule, exact for a "
                 "few pure-ε answers and never wrong, but it charges many answers the most."),
    source=("Cynthia Dwork and Aaron Roth, *The algorithmic foundations of differential privacy*, "
            "2014, Theorem 3.16"),
    listed_at_zero_delta=True,
    reads_assigned=True,
)
