"""Advanced composition (Dwork–Rothblum–Vadhan; Kairouz–Oh–Viswanath), never worse than basic.

The allocator calls :func:`advanced_total` (the accountant's own bound on arrays of εᵢ)
and :func:`kov_root_term` (its square-root term with the derivative, for the tangent it
optimises against); :class:`AdvancedAccountant` composes recorded spends with the same
functions.

References
----------
.. [DRV10] C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and Differential Privacy",
   FOCS 2010, Thm III.3; also Dwork & Roth 2014, Thm 3.20.
.. [KOV15] P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential
   Privacy", ICML 2015, arXiv:1311.0776, Thm 3.5 (heterogeneous closed form).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError
from planner.privacy.accountants.base import Accountant, FloatArray, Rule, as_deltas, as_epsilons
from planner.privacy.accountants.basic import unassigned_error
from planner.privacy.accountants.exact import EMPTY_SUM, ExactSum
from planner.privacy.accountants.pure import REL_TOL
from planner.privacy.budget import CompositionRule, check_delta
from planner.privacy.events import PrivacyEvent


def _check_delta_prime(delta_prime: float) -> float:
    d = check_delta(delta_prime, "delta_prime")
    if d == 0.0:
        raise BudgetError(
            "delta_prime must be > 0 for advanced composition; got 0. "
            "Use basic composition for pure DP, or allow a small δ' such as 1e-7."
        )
    return d


def drv_epsilon(epsilon: float, k: int, delta_prime: float) -> float:
    """Dwork–Rothblum–Vadhan: k mechanisms each (ε, δ) compose to (ε', kδ + δ') with
    ε' = ε√(2k ln(1/δ')) + kε(e^ε − 1) [DRV10, Thm III.3].

    The raw textbook bound: :func:`advanced_epsilon` takes the minimum with basic and KOV.

    Examples
    --------
    >>> round(drv_epsilon(1.0, 1, math.exp(-2.0)), 12)  # 1·√(2·1·2) + 1·(e − 1) = 2 + e − 1
    3.718281828459
    """
    from planner.privacy.budget import check_epsilon

    eps = check_epsilon(epsilon)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise BudgetError(f"k must be an integer ≥ 1; got {k!r}. Count the mechanisms composed.")
    dp_ = _check_delta_prime(delta_prime)
    n = int(k)
    if eps > 709.0:  # e^ε − 1 overflows a float: the bound is no better than basic's kε there
        return math.inf
    return eps * math.sqrt(2.0 * n * -math.log(dp_)) + n * eps * math.expm1(eps)


def kov_root_term(s: npt.ArrayLike, delta_prime: float) -> tuple[FloatArray, FloatArray]:
    """The square-root term of KOV's Thm 3.5 and its derivative in S = Σεᵢ² (vectorised).

    h(S) = min(√(2S ln(1/δ')), √(2S ln(e + √S/δ'))), the better of the theorem's two
    bounds, so the composition is (T + h(S), Σδᵢ + δ')-DP with T = Σεᵢ tanh(εᵢ/2). Returns
    (h(S), h′(S)), h′ of the branch attaining the minimum; each branch is concave in S,
    so the tangent at any S lies above h (the planner linearises the constraint there).

    Examples
    --------
    >>> h, dh = kov_root_term(1.0, math.exp(-2.0))  # √(2·1·2) = 2 ≤ √(2 ln(e + e²)), by hand
    >>> float(h), float(dh)
    (2.0, 1.0)
    """
    sv = np.asarray(s, dtype=np.float64)
    log_inv = -math.log(delta_prime)
    x = np.sqrt(sv)
    arg = math.e + x / delta_prime
    with np.errstate(divide="ignore", invalid="ignore"):
        h1 = np.sqrt(2.0 * sv * log_inv)
        h2 = np.sqrt(2.0 * sv * np.log(arg))
        d1 = log_inv / h1
        d2 = (2.0 * np.log(arg) + (x / delta_prime) / arg) / (2.0 * h2)
    first = h1 <= h2
    return np.asarray(np.where(first, h1, h2)), np.asarray(np.where(first, d1, d2))


def advanced_total(eps: FloatArray, delta_prime: float) -> float:
    """min(Σεᵢ, KOV Thm 3.5) for the εᵢ in ``eps`` (no validation: the allocator's kernel,
    also the core of :func:`advanced_epsilon`).

    KOV: T + h(S) with T = Σεᵢ(e^{εᵢ} − 1)/(e^{εᵢ} + 1) = Σεᵢ tanh(εᵢ/2) (the stable form)
    and S = Σεᵢ² (:func:`kov_root_term`).
    """
    basic = math.fsum(eps.tolist())
    if delta_prime <= 0.0 or eps.size == 0:
        return basic
    return _kov_total(basic, math.fsum(_t_terms(eps).tolist()), math.fsum(_s_terms(eps).tolist()), delta_prime)


def _t_terms(eps: FloatArray) -> FloatArray:
    """εᵢ tanh(εᵢ/2), elementwise (the terms of KOV's T)."""
    return np.asarray(eps * np.tanh(eps / 2.0), dtype=np.float64)


def _s_terms(eps: FloatArray) -> FloatArray:
    """εᵢ², elementwise (the terms of KOV's S)."""
    return np.asarray(eps * eps, dtype=np.float64)


def _kov_total(basic: float, t: float, s: float, delta_prime: float) -> float:
    return min(basic, t + float(kov_root_term(s, delta_prime)[0]))


def advanced_epsilon(epsilons: npt.ArrayLike, delta_prime: float) -> float:
    """ε of the adaptive composition of (εᵢ, δᵢ) mechanisms at extra failure mass δ'.

    The composition is (ε, Σδᵢ + δ')-DP for the returned ε (the δᵢ do not enter ε): the
    minimum of basic (Σεᵢ), KOV's two bounds [KOV15, Thm 3.5] (:func:`advanced_total`),
    and, for equal εᵢ, DRV [DRV10] (never below KOV; kept as the textbook check).

    Notes
    -----
    KOV's statement gives δ_total = 1 − (1 − δ')Π(1 − δᵢ) ≤ δ' + Σδᵢ, so reporting
    δ' + Σδᵢ is conservative.

    Examples
    --------
    Basic wins for a few large ε:

    >>> advanced_epsilon([1.0, 1.0], 1e-6)
    2.0
    """
    eps = as_epsilons(epsilons)
    dp_ = _check_delta_prime(delta_prime)
    if eps.size == 0:
        return 0.0
    best = advanced_total(eps, dp_)
    if bool(np.all(eps == eps[0])):
        best = min(best, drv_epsilon(float(eps[0]), int(eps.size), dp_))
    return best


def advanced_best(epsilons: npt.ArrayLike, deltas: npt.ArrayLike | None, total_delta: float) -> tuple[float, float]:
    """Tightest advanced (or basic) composition within a total δ.

    Returns (ε, δ'): the composition is (ε, Σδᵢ + δ')-DP, δ' = total_delta − Σδᵢ the slack;
    ε is :func:`advanced_epsilon` at the whole slack (ε decreases in δ'), or Σεᵢ with
    δ' = 0 when basic is as good (in particular with no slack).

    Raises
    ------
    BudgetError
        If Σδᵢ > total_delta: the mechanisms alone already need more δ.

    Examples
    --------
    >>> advanced_best([0.5, 0.5], [0.0, 0.0], 1e-6)  # no useful slack: basic wins
    (1.0, 0.0)
    """
    eps = as_epsilons(epsilons) if np.size(epsilons) else np.zeros(0)
    dl = as_deltas(deltas, eps.size)
    total = check_delta(total_delta, "total_delta")
    sums = _Sums().add(eps, dl)
    return sums.best(total)


@dataclass(frozen=True, slots=True)
class _Sums:
    """What advanced composition reads of the assigned pairs, as exact running sums: Σεᵢ,
    Σδᵢ, KOV's T = Σεᵢ tanh(εᵢ/2) and S = Σεᵢ², the count, and the common ε while every εᵢ
    is the same (for DRV). Adding pairs costs those pairs; :meth:`best` costs O(1)."""

    eps: ExactSum = EMPTY_SUM
    delta: ExactSum = EMPTY_SUM
    t: ExactSum = EMPTY_SUM
    s: ExactSum = EMPTY_SUM
    common: float | None = None  # the one ε every pair has so far (None: none yet, or differ)
    uniform: bool = True

    def add(self, eps: FloatArray, dl: FloatArray) -> _Sums:
        if eps.size == 0:
            return self
        first = float(eps[0]) if self.eps.count == 0 else self.common
        uniform = self.uniform and first is not None and bool(np.all(eps == first))
        return _Sums(self.eps.add(eps.tolist()), self.delta.add(dl.tolist()), self.t.add(_t_terms(eps).tolist()),
                     self.s.add(_s_terms(eps).tolist()), first if uniform else None, uniform)

    def best(self, total: float) -> tuple[float, float]:
        """:func:`advanced_best` at total δ ``total`` (checked)."""
        used = self.delta.value
        if used > total * (1.0 + REL_TOL):
            raise BudgetError(
                f"the mechanisms' deltas sum to {used:.6g}, more than total_delta = {total:.6g} "
                f"(difference {used - total:.3g}). Raise total_delta or give the mechanisms less δ."
            )
        basic = self.eps.value
        slack = total - used
        n = self.eps.count
        if slack <= total * REL_TOL or n == 0:
            return basic, 0.0
        dp_ = _check_delta_prime(slack)
        adv = _kov_total(basic, self.t.value, self.s.value, dp_)  # advanced_epsilon at the slack
        if self.uniform and self.common is not None:
            adv = min(adv, drv_epsilon(self.common, n, dp_))
        if adv < basic:
            return adv, slack
        return basic, 0.0


@dataclass(frozen=True, eq=False)
class AdvancedAccountant(Accountant):
    """Advanced composition of the assigned (εᵢ, δᵢ), with δ' = δ − Σδᵢ
    (:func:`advanced_best`; never worse than basic).

    Its summary is KOV's sums, kept exactly, so a release adds its spends only and ε costs
    O(1) whatever the history.

    Examples
    --------
    >>> from planner.privacy.events import PureEvent
    >>> acc = AdvancedAccountant().compose([PureEvent(0.01)], count=1000)
    >>> acc.epsilon(1e-6) < 1000 * 0.01  # √k growth beats basic for many small ε
    True
    """

    rule: ClassVar[CompositionRule] = CompositionRule.ADVANCED
    sums: _Sums = field(default_factory=_Sums, repr=False)
    unassigned: int = 0

    def supports(self, event: PrivacyEvent, assigned: tuple[float, float] | None = None) -> bool:
        return assigned is not None

    def _grow(self, events: tuple[PrivacyEvent, ...], assigned: tuple[tuple[float, float] | None, ...],
              ) -> dict[str, Any]:
        pairs = [p for p in assigned if p is not None]
        eps = np.fromiter((p[0] for p in pairs), dtype=np.float64, count=len(pairs))
        dls = np.fromiter((p[1] for p in pairs), dtype=np.float64, count=len(pairs))
        return {"sums": self.sums.add(eps, dls), "unassigned": self.unassigned + len(assigned) - len(pairs)}

    def _epsilon(self, delta: float) -> float:
        if self.unassigned:
            raise unassigned_error(self.rule)
        return self.sums.best(delta)[0]


RULE: Final = Rule(
    name=CompositionRule.ADVANCED,
    accountant=AdvancedAccountant,
    short="advanced",
    full="advanced composition (Kairouz–Oh–Viswanath)",
    gist="Kairouz–Oh–Viswanath",
    explanation=("Many small ε add up like the square root of their number rather than the number "
                 "itself, at the price of part of δ; never more than adding them up."),
    source=("Peter Kairouz, Sewoong Oh and Pramod Viswanath, *The composition theorem for "
            "differential privacy*, ICML 2015, Theorem 3.5"),
    reads_assigned=True,
    slack_delta=True,
)
