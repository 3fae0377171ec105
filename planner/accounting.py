"""Composition: what several privacy events cost together.

Modelled on Google dp_accounting: mechanisms describe themselves as immutable events
(:mod:`planner.events`); this module only adds them up, under one of four rules
(:class:`CompositionRule`):

* **basic** — Σεᵢ, Σδᵢ (Dwork et al. 2006);
* **advanced** — Dwork–Rothblum–Vadhan 2010 / Kairouz–Oh–Viswanath 2015, never worse
  than basic;
* **rdp** — Rényi DP (Mironov 2017): add ε(α) order by order, convert to (ε, δ) with the
  Canonne–Kamath–Steinke / Balle et al. conversion, minimised over a dense order grid and
  refined continuously; pure events also get the order-∞ bound Σεᵢ;
* **zcdp** — Σρᵢ, converted to (ε, δ) by the same (continuous, exact-minimum) conversion
  OpenDP 0.16's ``make_zCDP_to_approxDP`` computes.

:func:`total_epsilon` is the single entry point the planner and the ledger use;
:func:`compare_rules` shows every rule side by side.

Every conversion that involves floating-point optimisation rounds *up* (toward more
privacy loss) by a few ulps; RDP sums carry an explicit bound on their rounding error.

References
----------
.. [DR14] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy",
   FnT-TCS 2014, Thm 3.16 (basic composition), Thm 2.2 (post-processing).
.. [DRV10] C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and Differential Privacy",
   FOCS 2010, Thm III.3 (advanced composition); also [DR14, Thm 3.20].
.. [KOV15] P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential
   Privacy", ICML 2015, arXiv:1311.0776, Thm 3.5 (heterogeneous closed form).
.. [M17] I. Mironov, "Rényi Differential Privacy", CSF 2017, arXiv:1702.07476,
   Prop. 1 (composition), Prop. 3 (conversion), Table II (Laplace, RR).
.. [BS16] M. Bun, T. Steinke, "Concentrated Differential Privacy: Simplifications,
   Extensions, and Lower Bounds", TCC 2016, arXiv:1605.02065, Lemma 2.3 (composition),
   Prop. 1.4 (pure ε ⇒ ε²/2-zCDP).
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
   Privacy", NeurIPS 2020, arXiv:2004.00010, Prop. 12 and Cor. 13 (RDP/zCDP → (ε, δ)).
.. [BBGHS20] B. Balle, G. Barthe, M. Gaboardi, J. Hsu, T. Sato, "Hypothesis Testing
   Interpretations and Rényi Differential Privacy", AISTATS 2020, arXiv:1905.09982, Thm 21.
.. [BBG18] B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling: Tight
   Analyses via Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647, Thm 9.
.. [vEH14] T. van Erven, P. Harremoës, "Rényi Divergence and Kullback–Leibler
   Divergence", IEEE Trans. IT 2014, arXiv:1206.2459, Thm 3 (D_α is nondecreasing in α).
.. [C22] C. Canonne, "A short note on an inequality between KL and TV",
   arXiv:2202.07198 (Bretagnolle–Huber: TV ≤ √(1 − e^{−KL})).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

import numpy as np
import numpy.typing as npt

from planner import divergences as dv
from planner.budget import DEFAULT_ORDERS, FloatArray, RDPCurve, check_delta, check_epsilon
from planner.errors import BudgetError
from planner.events import (
    ApproxEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    ZCDPEvent,
)

__all__ = [
    "CompositionRule",
    "Spend",
    "advanced_best",
    "advanced_epsilon",
    "compare_rules",
    "compose_basic",
    "compose_parallel",
    "drv_epsilon",
    "group_privacy",
    "kov_root_term",
    "rdp_curve",
    "rdp_epsilon",
    "rdp_to_epsilon",
    "subsample_pure",
    "total_assigned_epsilon",
    "total_epsilon",
    "zcdp_rho",
    "zcdp_to_approx_epsilon",
]

#: Relative slack accepted when comparing a requested δ (or a claimed ε) with a sum of
#: floating-point values: float noise, far below any meaningful privacy parameter.
_REL_TOL: Final[float] = 1e-9
#: Relative round-up applied to the result of every numerical conversion (≈ 8 ulps).
_ROUND_UP: Final[float] = 2.0**-50
#: Bound on the relative rounding error of a vectorised RDP sum (≥ 5× the worst case of
#: ~5 float operations plus pairwise summation of up to 2^40 terms).
_RDP_ROUNDING: Final[float] = 1e-14
#: exp() arguments are floored here: e^{-50} ≈ 2e-22 is invisible next to the terms it is
#: added to, the floor only over-states the divergence, and it keeps exp() out of the
#: (slow) subnormal range.
_EXP_FLOOR: Final[float] = -50.0
#: Points per round and rounds of the continuous refinement of the best RDP order.
_REFINE_POINTS: Final[int] = 17
_REFINE_ROUNDS: Final[int] = 3
#: Cap on the Newton steps of the zCDP conversion (8 suffice; any α is a valid bound).
_ZCDP_NEWTON: Final[int] = 50


class CompositionRule(StrEnum):
    """How the costs of several mechanisms add up (MATH.md §5)."""

    BASIC = "basic"
    ADVANCED = "advanced"
    RDP = "rdp"
    ZCDP = "zcdp"


# ---------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------


def _as_epsilons(values: npt.ArrayLike, name: str = "epsilons") -> FloatArray:
    """A 1-D float array of finite ε > 0, or a BudgetError naming the first bad entry."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"{name} must be a sequence of numbers; got {values!r}.") from exc
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise BudgetError(f"{name} must be one-dimensional; got shape {arr.shape}.")
    bad = np.flatnonzero(~(np.isfinite(arr) & (arr > 0.0)))
    if bad.size:
        i = int(bad[0])
        raise BudgetError(
            f"{name}[{i}] must be > 0 and finite; got {arr[i]}. Every mechanism needs a positive ε."
        )
    return arr


def _as_deltas(values: npt.ArrayLike | None, size: int, name: str = "deltas") -> FloatArray:
    """A 1-D float array of δ ∈ [0, 1) of the given length (zeros if ``values`` is None)."""
    if values is None:
        return np.zeros(size)
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"{name} must be a sequence of numbers; got {values!r}.") from exc
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.shape != (size,):
        raise BudgetError(
            f"{name} must have one entry per epsilon ({size}); got shape {arr.shape}."
        )
    bad = np.flatnonzero(~((arr >= 0.0) & (arr < 1.0)))
    if bad.size:
        i = int(bad[0])
        raise BudgetError(f"{name}[{i}] must satisfy 0 ≤ δ < 1; got {arr[i]}.")
    return arr


def _round_up(value: float) -> float:
    """Round a computed privacy loss up by a few ulps (toward more privacy loss)."""
    return value + abs(value) * _ROUND_UP


# ---------------------------------------------------------------------------------------
# a recorded spend
# ---------------------------------------------------------------------------------------


def _claim_is_refuted(event: PrivacyEvent, epsilon: float, delta: float) -> bool:
    """True iff (ε, δ) is *provably* not a guarantee of ``event`` (cheap checks only).

    Only claims that can be refuted exactly are rejected: (ε, 0) below a pure event's ε
    (or for an event with no pure ε), anything not implied by an :class:`ApproxEvent`'s
    own (ε, δ), and a continuous Gaussian whose exact δ(ε) [Balle & Wang 2018, Thm 8]
    exceeds δ. Everything else (e.g. a Laplace event claimed at δ > 0) is accepted.
    """
    slack = 1.0 + _REL_TOL
    if delta == 0.0:
        return epsilon * slack < event.pure_epsilon
    if isinstance(event, ApproxEvent):
        return epsilon * slack < event.epsilon or delta * slack < event.delta
    if isinstance(event, GaussianEvent) and not event.discrete:
        exact = float(dv.analytic_gaussian_delta(epsilon, 1.0 / event.noise_multiplier))
        return exact > delta * slack
    return False


@dataclass(frozen=True, slots=True)
class Spend:
    """One recorded mechanism invocation.

    Parameters
    ----------
    event
        What the mechanism costs in every currency; RDP and zCDP composition use it.
    epsilon, delta
        The (εᵢ, δᵢ) it was assigned; basic and advanced composition use these.

    Raises
    ------
    BudgetError
        If ε ≤ 0, δ ∉ [0, 1), ``event`` is not a privacy event, or (ε, δ) is provably
        not a guarantee of the event (e.g. (0.5, 0) for a Laplace event of ε = 1, or
        δ = 0 for a Gaussian).

    Examples
    --------
    >>> Spend(LaplaceEvent(2.0), 0.5, 0.0).epsilon
    0.5
    """

    event: PrivacyEvent
    epsilon: float
    delta: float = field(default=0.0)

    def __post_init__(self) -> None:
        if not isinstance(self.event, PrivacyEvent):
            raise BudgetError(
                f"event must be a privacy event (LaplaceEvent, GaussianEvent, ...); "
                f"got {type(self.event).__name__}."
            )
        eps = check_epsilon(self.epsilon)
        d = check_delta(self.delta)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", d)
        if _claim_is_refuted(self.event, eps, d):
            raise BudgetError(
                f"(epsilon, delta) = ({eps}, {d}) is not a guarantee of {self.event!r}: the "
                "mechanism costs more. Record the (ε, δ) the mechanism was calibrated for."
            )


def _spend_arrays(spends: Sequence[Spend]) -> tuple[FloatArray, FloatArray]:
    eps = np.fromiter((s.epsilon for s in spends), dtype=np.float64, count=len(spends))
    dl = np.fromiter((s.delta for s in spends), dtype=np.float64, count=len(spends))
    return eps, dl


# ---------------------------------------------------------------------------------------
# basic, parallel and advanced composition
# ---------------------------------------------------------------------------------------


def compose_basic(
    epsilons: npt.ArrayLike, deltas: npt.ArrayLike | None = None
) -> tuple[float, float]:
    """Sequential (basic) composition: (Σεᵢ, Σδᵢ).

    Parameters
    ----------
    epsilons
        The εᵢ > 0 of the mechanisms.
    deltas
        Their δᵢ ∈ [0, 1); ``None`` means all zero (pure DP).

    Returns
    -------
    tuple[float, float]
        (Σεᵢ, Σδᵢ), each summed with :func:`math.fsum` (correctly rounded).

    Notes
    -----
    Holds under adaptive composition (MATH.md §5; [DR14, Thm 3.16]).

    References
    ----------
    C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", Thm 3.16.

    Examples
    --------
    >>> compose_basic([0.5, 0.25], [1e-6, 0.0])  # 0.5 + 0.25, 1e-6 + 0
    (0.75, 1e-06)
    """
    eps = _as_epsilons(epsilons)
    dl = _as_deltas(deltas, eps.size)
    return math.fsum(eps.tolist()), math.fsum(dl.tolist())


def compose_parallel(
    epsilons: npt.ArrayLike, deltas: npt.ArrayLike | None = None
) -> tuple[float, float]:
    """Parallel composition over disjoint parts of the data: (maxᵢ εᵢ, maxᵢ δᵢ).

    Notes
    -----
    Valid only when each record (privacy unit) can influence one mechanism's input
    (MATH.md §5; McSherry 2009, "Privacy Integrated Queries", Thm 4).

    Examples
    --------
    >>> compose_parallel([0.5, 0.25], [1e-6, 1e-7])
    (0.5, 1e-06)
    """
    eps = _as_epsilons(epsilons)
    dl = _as_deltas(deltas, eps.size)
    if eps.size == 0:
        return 0.0, 0.0
    return float(eps.max()), float(dl.max())


def _check_delta_prime(delta_prime: float) -> float:
    d = check_delta(delta_prime, "delta_prime")
    if d == 0.0:
        raise BudgetError(
            "delta_prime must be > 0 for advanced composition; got 0. "
            "Use basic composition for pure DP, or allow a small δ' such as 1e-7."
        )
    return d


def drv_epsilon(epsilon: float, k: int, delta_prime: float) -> float:
    """Dwork–Rothblum–Vadhan advanced composition of k mechanisms, each (ε, δ).

    Returns ε' = ε√(2k ln(1/δ')) + kε(e^ε − 1); the composition is (ε', kδ + δ')-DP.
    This is the raw bound: :func:`advanced_epsilon` takes the minimum with basic and
    Kairouz–Oh–Viswanath, and is what the planner uses.

    References
    ----------
    C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and Differential Privacy", FOCS 2010,
    Thm III.3; Dwork & Roth 2014, Thm 3.20 (seed 002).

    Examples
    --------
    >>> round(drv_epsilon(1.0, 1, math.exp(-2.0)), 12)  # 1·√(2·1·2) + 1·(e − 1) = 2 + e − 1
    3.718281828459
    """
    eps = check_epsilon(epsilon)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise BudgetError(f"k must be an integer ≥ 1; got {k!r}. Count the mechanisms composed.")
    dp_ = _check_delta_prime(delta_prime)
    n = int(k)
    return eps * math.sqrt(2.0 * n * -math.log(dp_)) + n * eps * math.expm1(eps)


def kov_root_term(s: npt.ArrayLike, delta_prime: float) -> tuple[FloatArray, FloatArray]:
    """The square-root term of KOV's Thm 3.5 and its derivative in S = Σεᵢ² (vectorised).

    h(S) = min(√(2S ln(1/δ')), √(2S ln(e + √S/δ'))), the better of the theorem's two
    bounds, so the composition is (T + h(S), Σδᵢ + δ')-DP with T = Σεᵢ tanh(εᵢ/2)
    (:func:`advanced_epsilon`). Returns (h(S), h′(S)), h′ of the branch that attains the
    minimum; each branch is concave in S, so the tangent at any S lies above h (the
    planner linearises the constraint there).

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
        d1 = log_inv / h1  # (2 ln(1/δ'))/(2 h1)
        d2 = (2.0 * np.log(arg) + (x / delta_prime) / arg) / (2.0 * h2)
    first = h1 <= h2
    return np.asarray(np.where(first, h1, h2)), np.asarray(np.where(first, d1, d2))


def advanced_epsilon(epsilons: npt.ArrayLike, delta_prime: float) -> float:
    """ε of the adaptive composition of (εᵢ, δᵢ) mechanisms at extra failure mass δ'.

    The composition is (ε, Σδᵢ + δ')-DP for the returned ε (the δᵢ do not enter ε).

    Parameters
    ----------
    epsilons
        The εᵢ > 0.
    delta_prime
        δ' ∈ (0, 1), the slack spent on the advanced bound.

    Returns
    -------
    float
        The minimum of every valid bound:

        * basic: Σεᵢ;
        * [KOV15, Thm 3.5], with T = Σεᵢ(e^{εᵢ} − 1)/(e^{εᵢ} + 1) and S = Σεᵢ²:
          T + √(2S ln(1/δ')) and T + √(2S ln(e + √S/δ'));
        * if all εᵢ = ε are equal, [DRV10]: ε√(2k ln(1/δ')) + kε(e^ε − 1) (never below
          the KOV value, since (e^ε−1)/(e^ε+1) < e^ε − 1; kept as the textbook check).

    Notes
    -----
    KOV's statement gives δ_total = 1 − (1 − δ')Π(1 − δᵢ) ≤ δ' + Σδᵢ, so reporting
    δ' + Σδᵢ is conservative. For equal εᵢ this is never looser than MATH.md's DRV form.

    References
    ----------
    P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential Privacy",
    ICML 2015, arXiv:1311.0776, Thm 3.5. C. Dwork, G. N. Rothblum, S. Vadhan, FOCS 2010.

    Examples
    --------
    Basic wins for a few large ε:

    >>> advanced_epsilon([1.0, 1.0], 1e-6)
    2.0
    """
    eps = _as_epsilons(epsilons)
    dp_ = _check_delta_prime(delta_prime)
    if eps.size == 0:
        return 0.0
    basic = math.fsum(eps.tolist())
    # ε(e^ε − 1)/(e^ε + 1) = ε·tanh(ε/2): the stable form of KOV's first term.
    t = math.fsum((eps * np.tanh(eps / 2.0)).tolist())
    s = math.fsum((eps * eps).tolist())
    candidates = [basic, t + float(kov_root_term(s, dp_)[0])]
    if bool(np.all(eps == eps[0])):
        candidates.append(drv_epsilon(float(eps[0]), int(eps.size), dp_))
    return min(candidates)


def advanced_best(
    epsilons: npt.ArrayLike, deltas: npt.ArrayLike | None, total_delta: float
) -> tuple[float, float]:
    """Tightest advanced (or basic) composition within a total δ.

    Parameters
    ----------
    epsilons, deltas
        The (εᵢ, δᵢ) of the mechanisms (``deltas=None``: all zero).
    total_delta
        The δ the composition may use in all; δ' = total_delta − Σδᵢ is the slack.

    Returns
    -------
    tuple[float, float]
        (ε, δ'): the composition is (ε, Σδᵢ + δ')-DP. ε is :func:`advanced_epsilon` at
        the whole slack (ε decreases in δ'), or Σεᵢ with δ' = 0 when basic is as good
        (in particular when there is no slack).

    Raises
    ------
    BudgetError
        If Σδᵢ > total_delta: the mechanisms alone already need more δ.

    Examples
    --------
    >>> advanced_best([0.5, 0.5], [0.0, 0.0], 1e-6)  # no useful slack: basic wins
    (1.0, 0.0)
    """
    eps = _as_epsilons(epsilons)
    dl = _as_deltas(deltas, eps.size)
    total = check_delta(total_delta, "total_delta")
    used = math.fsum(dl.tolist())
    if used > total * (1.0 + _REL_TOL):
        raise BudgetError(
            f"the mechanisms' deltas sum to {used:.6g}, more than total_delta = {total:.6g} "
            f"(difference {used - total:.3g}). Raise total_delta or give the mechanisms less δ."
        )
    basic = math.fsum(eps.tolist())
    slack = total - used
    if slack <= total * _REL_TOL or eps.size == 0:
        return basic, 0.0
    adv = advanced_epsilon(eps, slack)
    if adv < basic:
        return adv, slack
    return basic, 0.0


# ---------------------------------------------------------------------------------------
# RDP: grouped, vectorised evaluation
# ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Groups:
    """Events split by family, with the parameters each closed form needs."""

    lap_inv: list[float] = field(default_factory=list)  # 1/λ of Laplace events
    pure_eps: list[float] = field(default_factory=list)  # pure ε-DP (Pure, RR, Approx δ=0)
    expo_eps: list[float] = field(default_factory=list)  # exponential mechanism ε
    rho: list[float] = field(default_factory=list)  # Gaussian and zCDP events
    other: list[PrivacyEvent] = field(default_factory=list)  # any other RDP event
    approx_eps: list[float] = field(default_factory=list)  # ApproxEvent with δ > 0
    approx_delta: list[float] = field(default_factory=list)

    @property
    def has_rdp_part(self) -> bool:
        return bool(self.lap_inv or self.pure_eps or self.expo_eps or self.rho or self.other)

    @property
    def eps_inf(self) -> float:
        """Order-∞ bound of the RDP part: Σ pure ε (inf if some event is not pure)."""
        if self.rho or any(math.isinf(e.pure_epsilon) for e in self.other):
            return math.inf
        parts = self.lap_inv + self.pure_eps + self.expo_eps
        parts += [e.pure_epsilon for e in self.other]
        return math.fsum(parts)


def _group(events: Sequence[PrivacyEvent]) -> _Groups:
    g = _Groups()
    for e in events:
        kind = type(e)
        if kind is LaplaceEvent:
            g.lap_inv.append(e.pure_epsilon)
        elif kind is GaussianEvent or kind is ZCDPEvent:
            g.rho.append(e.zcdp_rho)
        elif kind is PureEvent or kind is RandomizedResponseEvent:
            g.pure_eps.append(e.pure_epsilon)
        elif kind is ExponentialEvent:
            g.expo_eps.append(e.pure_epsilon)
        elif isinstance(e, ApproxEvent):
            if e.delta == 0.0:
                g.pure_eps.append(e.epsilon)
            else:
                g.approx_eps.append(e.epsilon)
                g.approx_delta.append(e.delta)
        elif isinstance(e, PrivacyEvent):
            g.other.append(e)
        else:
            raise BudgetError(
                f"events must be privacy events (LaplaceEvent, GaussianEvent, ...); "
                f"got {type(e).__name__}."
            )
    return g


def _sum_log1p_exp(c: FloatArray, m: FloatArray, x: FloatArray, work: FloatArray) -> FloatArray:
    """Σᵢ ln(1 + e^{c_j + m_j xᵢ}) for every column j, computed in place in ``work``
    (shape (len(x), len(c))); the exponent is floored at ``_EXP_FLOOR``."""
    np.multiply(m[None, :], x[:, None], out=work)
    work += c[None, :]
    np.maximum(work, _EXP_FLOOR, out=work)
    np.exp(work, out=work)
    np.log1p(work, out=work)
    return np.asarray(work.sum(axis=0), dtype=np.float64)


def _rdp_sum(g: _Groups, orders: FloatArray) -> FloatArray:
    """Σᵢ εᵢ(α) of the RDP part of ``g`` at every order: one broadcast op per family.

    Notes
    -----
    With a = α (a row) and one row per event:

    * Laplace, 1/λ = ε [M17, Table II]:
      (α−1)ε(α) = ln(α/(2α−1)) + (α−1)ε + ln(1 + ((α−1)/α) e^{−(2α−1)ε});
    * pure ε-DP / randomized response (:func:`planner.divergences.pure_dp_rdp`):
      (α−1)ε(α) = αε + ln(1 + e^{−(2α−1)ε}) − ln(1 + e^ε);
    * exponential mechanism: min(pure, αε²/8) [Cesar & Rogers 2021];
    * Gaussian / zCDP: ρα.

    Only the ln(1 + e^{·}) term is a (k, A) array; the rest are sums over events. The
    exponent is floored at −50 (over-stating the term by < 2e-22), and each family's sum
    gets an explicit bound on its floating-point error, so the result never understates
    the exact closed forms.
    """
    a = orders[None, :]
    am1 = orders - 1.0
    total = np.zeros(orders.shape)
    if g.rho:
        total += math.fsum(g.rho) * orders
    n_lap, n_pure, n_expo = len(g.lap_inv), len(g.pure_eps), len(g.expo_eps)
    # One workspace for every (k, A) array: fresh large temporaries cost page faults.
    work = np.empty((n_lap + n_pure + 2 * n_expo, orders.size))
    if n_lap:
        inv = np.asarray(g.lap_inv, dtype=np.float64)
        s_inv = math.fsum(g.lap_inv)
        # ln((α−1)/α) − (2α−1)/λ in the exponent
        s_log = _sum_log1p_exp(np.log1p(-1.0 / orders), 1.0 - 2.0 * orders, inv, work[:n_lap])
        num = -n_lap * np.log1p(am1 / orders) + am1 * s_inv + s_log
        err = _RDP_ROUNDING * (1.5 * n_lap + am1 * s_inv)
        total += np.maximum(num + err, 0.0) / am1
    if n_pure:
        eps = np.asarray(g.pure_eps, dtype=np.float64)
        s_eps = math.fsum(g.pure_eps)
        s_log = _sum_log1p_exp(
            np.zeros(orders.shape), 1.0 - 2.0 * orders, eps, work[n_lap : n_lap + n_pure]
        )
        num = orders * s_eps - math.fsum(np.logaddexp(0.0, eps).tolist()) + s_log
        err = _RDP_ROUNDING * (1.5 * n_pure + (orders + 1.0) * s_eps)
        total += np.maximum(num + err, 0.0) / am1
    if n_expo:
        eps = np.asarray(g.expo_eps, dtype=np.float64)
        col = eps[:, None]
        start = n_lap + n_pure
        d, q = work[start : start + n_expo], work[start + n_expo :]
        np.multiply(1.0 - 2.0 * a, col, out=d)
        np.maximum(d, _EXP_FLOOR, out=d)
        np.exp(d, out=d)
        np.log1p(d, out=d)
        np.multiply(a, col, out=q)
        d += q
        d -= np.logaddexp(0.0, col)
        d /= am1
        q *= col / 8.0
        np.minimum(d, q, out=d)
        s_eps = math.fsum(g.expo_eps)
        err = _RDP_ROUNDING * (1.5 * n_expo + (orders + 1.0) * s_eps) / am1
        total += np.maximum(d.sum(axis=0), 0.0) + err
    for e in g.other:
        total += np.asarray(e.rdp(orders), dtype=np.float64)
    return total


def _orders_array(orders: npt.ArrayLike) -> FloatArray:
    o = np.asarray(orders, dtype=np.float64)
    if o.ndim != 1 or o.size == 0:
        raise BudgetError(f"orders must be a non-empty 1-D sequence; got shape {o.shape}.")
    if not bool(np.all(o > 1.0)) or not bool(np.all(np.isfinite(o))):
        raise BudgetError("orders must all be finite and > 1; use orders such as 1.5, 2, 8, 64.")
    return o


def rdp_curve(events: Sequence[PrivacyEvent], orders: npt.ArrayLike = DEFAULT_ORDERS) -> RDPCurve:
    """The composed RDP curve of ``events``: ε(α) = Σᵢ εᵢ(α) at every order.

    Parameters
    ----------
    events
        At least one privacy event. An :class:`~planner.events.ApproxEvent` with δ > 0
        has no RDP curve and makes every ε(α) infinite (use :func:`rdp_epsilon`, which
        composes it by basic composition instead).
    orders
        Rényi orders α > 1 (default: the dense :data:`~planner.budget.DEFAULT_ORDERS`).

    Returns
    -------
    RDPCurve
        ε(α) on ``orders``; ``eps_inf`` = Σ pure εᵢ (inf if some event is not pure).

    Notes
    -----
    RDP composes additively at each order [M17, Prop. 1]. Events are grouped by family
    and each family is one (k, 1) × (1, A) broadcast (see ``_rdp_sum``): 1000 mixed
    events on the 1200-order default grid take a few milliseconds.

    References
    ----------
    I. Mironov, "Rényi Differential Privacy", CSF 2017, arXiv:1702.07476, Prop. 1, Table II.

    Examples
    --------
    >>> from planner.events import GaussianEvent
    >>> c = rdp_curve([GaussianEvent(1.0), GaussianEvent(1.0)], orders=[2.0])
    >>> c.epsilons  # 2 · α/(2σ²) = 2 · 2/2, by hand
    (2.0,)
    """
    if len(events) == 0:
        raise BudgetError("events must contain at least one privacy event to build an RDP curve.")
    o = _orders_array(orders)
    g = _group(events)
    values = _rdp_sum(g, o)
    eps_inf = g.eps_inf
    if g.approx_eps:
        values = np.full(o.shape, np.inf)
        eps_inf = math.inf
    return RDPCurve(tuple(o.tolist()), tuple(values.tolist()), eps_inf)


def _conversion(orders: FloatArray, rdp: FloatArray, log_delta: float) -> FloatArray:
    """ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1) at each order [CKS20, Prop. 12]."""
    with np.errstate(invalid="ignore"):
        out = rdp + np.log1p(-1.0 / orders) - (log_delta + np.log(orders)) / (orders - 1.0)
    return np.asarray(np.where(np.isnan(out), np.inf, out), dtype=np.float64)


def _tv_zero(rdp_min: float, delta: float) -> bool:
    """(0, δ)-DP from TV ≤ √(1 − e^{−KL}) ≤ √(1 − e^{−ε(α)}) [C22; vEH14, Thm 3]."""
    return math.isfinite(rdp_min) and delta * delta >= -math.expm1(-rdp_min)


def rdp_to_epsilon(curve: RDPCurve, delta: float) -> tuple[float, float]:
    """Convert an RDP curve to (ε, δ)-DP at the given δ, minimising over its orders.

    Parameters
    ----------
    curve
        ε(α) on a grid of orders, and the order-∞ value ``eps_inf``.
    delta
        Target δ ∈ [0, 1).

    Returns
    -------
    tuple[float, float]
        (ε, α*): the least ε over the grid of

            ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1)        [CKS20, Prop. 12],

        the order-∞ value ``eps_inf`` (a pure bound: α* = inf), and 0 when
        δ ≥ √(1 − e^{−min ε(α)}) (total variation ≤ δ). δ = 0 gives ``eps_inf``
        (inf unless every event is pure). The order-α values are rounded up by a few
        ulps; ``eps_inf`` is the correctly rounded Σεᵢ, as basic composition reports it.

    Notes
    -----
    The conversion improves Mironov's ε(α) + ln(1/δ)/(α−1) [M17, Prop. 3] by
    ln((α−1)/α) − ln(α)/(α−1) < 0. Only the grid is available here; :func:`rdp_epsilon`
    also refines the order continuously.

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, arXiv:2004.00010, Prop. 12; B. Balle et al.,
    arXiv:1905.09982, Thm 21; I. Mironov, arXiv:1702.07476, Prop. 3.

    Examples
    --------
    One Laplace query of ε = 1 costs exactly 1 (the order-∞ bound):

    >>> from planner.events import LaplaceEvent
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
    conv = _conversion(o, r, math.log(d))
    i = int(np.argmin(conv))
    best = _round_up(max(float(conv[i]), 0.0))
    if curve.eps_inf <= best:
        return curve.eps_inf, math.inf
    return best, float(o[i])


def _refine(
    g: _Groups, orders: FloatArray, conv: FloatArray, log_delta: float
) -> tuple[float, float]:
    """Continuous refinement of the grid minimum: a few rounds of a log-spaced sub-grid
    between the best order's neighbours. Every evaluated order is a valid bound, so the
    minimum over all of them is too (the search only ever makes ε smaller)."""
    i = int(np.argmin(conv))
    best, order = float(conv[i]), float(orders[i])
    if not math.isfinite(best):
        return best, order
    n = orders.size
    lo = orders[i - 1] - 1.0 if i > 0 else (orders[0] - 1.0) / 4.0
    hi = orders[i + 1] - 1.0 if i < n - 1 else (orders[-1] - 1.0) * 4.0
    for _ in range(_REFINE_ROUNDS):
        cand = 1.0 + np.geomspace(lo, hi, _REFINE_POINTS)
        vals = _conversion(cand, _rdp_sum(g, cand), log_delta)
        j = int(np.argmin(vals))
        if vals[j] < best:
            best, order = float(vals[j]), float(cand[j])
        lo = cand[max(j - 1, 0)] - 1.0
        hi = cand[min(j + 1, _REFINE_POINTS - 1)] - 1.0
    return best, order


def _rdp_part_epsilon(g: _Groups, delta: float) -> tuple[float, float]:
    """(ε, α*) of the RDP part of ``g`` at δ: grid, refinement, order ∞, TV."""
    eps_inf = g.eps_inf
    if delta <= 0.0:
        return eps_inf, math.inf
    o = np.asarray(DEFAULT_ORDERS, dtype=np.float64)
    r = _rdp_sum(g, o)
    if _tv_zero(float(r.min()), delta):
        return 0.0, float(o[int(np.argmin(r))])
    log_delta = math.log(delta)
    best, order = _refine(g, o, _conversion(o, r, log_delta), log_delta)
    best = _round_up(max(best, 0.0))
    if eps_inf <= best:
        return eps_inf, math.inf
    return best, order


def rdp_epsilon(events: Sequence[PrivacyEvent], delta: float) -> tuple[float, float]:
    """(ε, δ) cost of ``events`` under RDP composition, with the order refined continuously.

    Parameters
    ----------
    events
        Privacy events (may be empty: ε = 0).
    delta
        Total δ ∈ [0, 1).

    Returns
    -------
    tuple[float, float]
        (ε, α*). Events with an RDP curve are composed by RDP and converted at
        δ_R = δ − Σδⱼ, where the (εⱼ, δⱼ) are the :class:`~planner.events.ApproxEvent`\\ s
        with δⱼ > 0 (no RDP curve); those are added by basic composition:
        ε = ε_RDP(δ_R) + Σεⱼ. ε is inf if δ_R < 0, or δ_R = 0 and some event is not pure.
        α* is inf when the order-∞ (pure) bound wins.

    Notes
    -----
    ε_RDP(δ) = min over α of ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1) [CKS20, Prop. 12;
    BBGHS20, Thm 21], taken over the 1200-order grid and then refined between the best
    order's neighbours with the events' own closed forms; also min with Σ pure εᵢ (order
    ∞), so a single Laplace query at ε₀ costs exactly ε₀; and 0 if δ ≥ √(1 − e^{−KL})
    (total variation, Bretagnolle–Huber). Splitting δ as above is basic composition of
    the RDP part (an (ε_RDP, δ_R) mechanism) with the others [DR14, Thm 3.16].

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, arXiv:2004.00010, Prop. 12; B. Balle, G. Barthe,
    M. Gaboardi, J. Hsu, T. Sato, arXiv:1905.09982, Thm 21; I. Mironov, arXiv:1702.07476.

    Examples
    --------
    >>> from planner.events import LaplaceEvent
    >>> rdp_epsilon([LaplaceEvent(2.0), LaplaceEvent(2.0)], 0.0)  # pure: 1/2 + 1/2, order ∞
    (1.0, inf)
    >>> rdp_epsilon([LaplaceEvent(2.0), LaplaceEvent(2.0)], 1e-6)[0] <= 1.0  # never above basic
    True
    """
    d = check_delta(delta)
    g = _group(events)
    extra_eps = math.fsum(g.approx_eps)
    rest = d - math.fsum(g.approx_delta)
    if rest < -d * _REL_TOL:
        return math.inf, math.inf
    if not g.has_rdp_part:
        return extra_eps, math.inf
    eps, order = _rdp_part_epsilon(g, max(rest, 0.0) if rest > d * _REL_TOL else 0.0)
    return eps + extra_eps, order


# ---------------------------------------------------------------------------------------
# zCDP
# ---------------------------------------------------------------------------------------


def zcdp_rho(events: Sequence[PrivacyEvent]) -> float:
    """Composed ρ: Σρᵢ [BS16, Lemma 2.3]; inf if some event has no ρ (empty: 0).

    Examples
    --------
    >>> from planner.events import GaussianEvent, LaplaceEvent
    >>> zcdp_rho([GaussianEvent(1.0), LaplaceEvent(1.0)])  # 1/(2·1²) + 1²/2
    1.0
    """
    rhos = [float(e.zcdp_rho) for e in events]
    if any(math.isinf(r) for r in rhos):
        return math.inf
    return math.fsum(rhos)


def zcdp_to_approx_epsilon(rho: npt.ArrayLike, delta: float) -> FloatArray:
    """Tightest (ε, δ) of ρ-zCDP, vectorised over ρ.

    Parameters
    ----------
    rho
        ρ ≥ 0 (array-like; inf allowed).
    delta
        δ ∈ [0, 1).

    Returns
    -------
    numpy.ndarray
        ε ≥ 0 of the same shape as ``rho``: 0 where ρ = 0, inf where ρ = inf or δ = 0.

    Notes
    -----
    ρ-zCDP is (α, ρα)-RDP for every α > 1, so [CKS20, Prop. 12] gives, for every α,

        ε(α) = ρα + ln((α−1)/α) − (ln δ + ln α)/(α−1)

    (equivalently [CKS20, Cor. 13] solved for ε). Its derivative is
    ρ + ln(αδ)/(α−1)², whose numerator ρ(α−1)² + ln α + ln δ increases in α, so the
    minimiser is the unique root α* of ρ(α−1)² + ln(αδ) = 0. In y = ln(α − 1) that
    function is convex and increasing, so Newton's method started at
    α − 1 = min(√(ln(1/δ)/ρ), 1/δ − 1) (where it is ≥ 0) converges monotonically (vectorised,
    ≤ 8 steps). ε(α) is evaluated there (any α is a valid bound, so an
    inexact α* can only over-state ε), clipped at 0 and rounded up by a few ulps.
    This is the function OpenDP 0.16's ``make_zCDP_to_approxDP`` computes (agreement
    observed to ~1e-16 relative; the tests require 1e-6); it is never below the exact
    Gaussian ε.

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy",
    arXiv:2004.00010, Prop. 12, Cor. 13; M. Bun, T. Steinke, arXiv:1605.02065, Prop. 1.3
    (the looser ρ + 2√(ρ ln(1/δ))).

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
    if np.any(np.isnan(r)) or np.any(r < 0.0):
        raise BudgetError("rho must be ≥ 0 (inf allowed); got a negative or NaN value.")
    out = np.full(r.shape, np.inf)
    out[r == 0.0] = 0.0
    live = np.isfinite(r) & (r > 0.0)
    if d == 0.0 or not np.any(live):
        return np.asarray(out, dtype=np.float64)
    rl = r[live]
    log_d = math.log(d)
    # Newton on y = ln(α − 1) for g(y) = ρe^{2y} + ln(1 + e^y) + ln δ, which is convex and
    # increasing in y: started where g ≥ 0, the iterates decrease monotonically to the root
    # (≤ 8 steps to machine precision over ρ ∈ [1e-12, 1e4], δ ∈ [1e-300, 0.99]).
    y = np.log(np.minimum(np.sqrt(-log_d / rl), 1.0 / d - 1.0))
    for _ in range(_ZCDP_NEWTON):
        x = np.exp(y)
        rx2 = rl * x * x
        step = (rx2 + np.log1p(x) + log_d) / (2.0 * rx2 + x / (1.0 + x))
        y -= step
        if bool(np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(y)))):
            break
    alpha = 1.0 + np.exp(y)
    eps = _conversion(alpha, rl * alpha, math.log(d))
    eps = np.maximum(eps, 0.0)
    out[live] = eps + np.abs(eps) * _ROUND_UP
    return np.asarray(out, dtype=np.float64)


# ---------------------------------------------------------------------------------------
# the entry points
# ---------------------------------------------------------------------------------------


def _as_rule(rule: CompositionRule | str) -> CompositionRule:
    try:
        return CompositionRule(rule)
    except ValueError as exc:
        raise BudgetError(
            f"rule must be one of {', '.join(r.value for r in CompositionRule)}; got {rule!r}."
        ) from exc


def total_epsilon(spends: Sequence[Spend], rule: CompositionRule | str, delta: float) -> float:
    """The ε the composed ``spends`` cost at total δ under ``rule``.

    Parameters
    ----------
    spends
        Recorded invocations (empty: 0).
    rule
        * BASIC: Σεᵢ of the assigned (εᵢ, δᵢ); requires Σδᵢ ≤ δ.
        * ADVANCED: :func:`advanced_best` with δ' = δ − Σδᵢ; never worse than basic.
        * RDP: :func:`rdp_epsilon` of the events at δ (the assigned (εᵢ, δᵢ) are ignored).
        * ZCDP: :func:`zcdp_to_approx_epsilon` of Σρᵢ at δ.
    delta
        The total δ ∈ [0, 1).

    Returns
    -------
    float
        ε (inf if the rule cannot reach δ, e.g. RDP at δ = 0 with a Gaussian).

    Raises
    ------
    BudgetError
        Invalid δ or rule; BASIC/ADVANCED with Σδᵢ > δ; ZCDP with an event that has no
        ρ (an :class:`~planner.events.ApproxEvent` with δ > 0).

    Examples
    --------
    >>> from planner.events import LaplaceEvent
    >>> spends = [Spend(LaplaceEvent(2.0), 0.5), Spend(LaplaceEvent(4.0), 0.25)]
    >>> total_epsilon(spends, "basic", 0.0)  # 0.5 + 0.25
    0.75
    """
    d = check_delta(delta)
    r = _as_rule(rule)
    if len(spends) == 0:
        return 0.0
    if r is CompositionRule.RDP:
        return rdp_epsilon([s.event for s in spends], d)[0]
    if r is CompositionRule.ZCDP:
        rho = zcdp_rho([s.event for s in spends])
        if math.isinf(rho):
            raise BudgetError(
                "zCDP composition needs every event to have a ρ; an (ε, δ) event with δ > 0 "
                "has none. Use the basic, advanced or RDP rule for this set of spends."
            )
        return float(zcdp_to_approx_epsilon(rho, d))
    eps, dl = _spend_arrays(spends)
    return total_assigned_epsilon(eps, dl, r, d)


def total_assigned_epsilon(
    epsilons: FloatArray, deltas: FloatArray, rule: CompositionRule, delta: float
) -> float:
    """:func:`total_epsilon` under the basic or advanced rule, from the spends' assigned
    (εᵢ, δᵢ) as arrays (what those two rules read; the planner's exact fit calls this
    without building :class:`Spend` records)."""
    if rule is CompositionRule.ADVANCED:
        return advanced_best(epsilons, deltas, delta)[0]
    if rule is not CompositionRule.BASIC:
        raise BudgetError(
            f"assigned (ε, δ) pairs compose under the basic and advanced rules only; got {rule.value}."
        )
    basic_eps, basic_delta = compose_basic(epsilons, deltas)
    if basic_delta > delta * (1.0 + _REL_TOL):
        raise BudgetError(
            f"the spends' deltas sum to {basic_delta:.6g}, more than delta = {delta:.6g} "
            f"(difference {basic_delta - delta:.3g}). Raise delta or use the RDP rule."
        )
    return basic_eps


def compare_rules(spends: Sequence[Spend], delta: float) -> dict[CompositionRule, float]:
    """ε of ``spends`` at δ under every rule; inf where a rule does not apply.

    Examples
    --------
    >>> from planner.events import LaplaceEvent
    >>> out = compare_rules([Spend(LaplaceEvent(1.0), 1.0)], 0.0)
    >>> out[CompositionRule.BASIC], out[CompositionRule.RDP], out[CompositionRule.ZCDP]
    (1.0, 1.0, inf)
    """
    d = check_delta(delta)
    out: dict[CompositionRule, float] = {}
    for rule in CompositionRule:
        try:
            out[rule] = total_epsilon(spends, rule, d)
        except BudgetError:
            out[rule] = math.inf
    return out


# ---------------------------------------------------------------------------------------
# group privacy and subsampling
# ---------------------------------------------------------------------------------------


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """Privacy for groups of k records: (ε, δ) becomes (kε, k e^{(k−1)ε} δ).

    Returns δ capped at 1 (a δ of 1 promises nothing). MATH.md §5; seeds 000, 002.

    References
    ----------
    C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", Thm 2.2
    (pure); S. Vadhan, "The Complexity of Differential Privacy", 2017, Lemma 2.2
    (the (ε, δ) form; k e^{(k−1)ε} δ bounds its Σⱼ e^{jε} δ).

    Examples
    --------
    >>> group_privacy(0.5, 0.0, 3)
    (1.5, 0.0)
    >>> eps, d = group_privacy(1.0, 1e-6, 2)  # (2·1, 2·e^1·1e-6)
    >>> eps, round(d / 1e-6, 9)
    (2.0, 5.436563657)
    """
    eps = check_epsilon(epsilon)
    dl = check_delta(delta)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise BudgetError(
            f"k must be an integer ≥ 1 (records per group); got {k!r}. Use the most rows one "
            "person can contribute."
        )
    n = int(k)
    if dl == 0.0:
        return n * eps, 0.0
    log_d = math.log(n) + (n - 1) * eps + math.log(dl)
    return n * eps, 1.0 if log_d >= 0.0 else math.exp(log_d)


def subsample_pure(epsilon: float, q: float) -> float:
    """Amplification by Poisson subsampling at rate q of an ε-DP mechanism.

    Returns ln(1 + q(e^ε − 1)) (computed as log1p(q·expm1(ε))).

    References
    ----------
    B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling: Tight
    Analyses via Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647, Thm 9
    (MATH.md §5; seed 002).

    Examples
    --------
    >>> round(subsample_pure(math.log(3.0), 0.5), 12)  # ln(1 + 0.5·(3 − 1)) = ln 2
    0.69314718056
    """
    eps = check_epsilon(epsilon)
    try:
        rate = float(q)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"q must be a sampling rate in (0, 1]; got {q!r}.") from exc
    if not (0.0 < rate <= 1.0):
        raise BudgetError(
            f"q must be a sampling rate in (0, 1]; got {rate}. Use q = 1 for no sampling."
        )
    return math.log1p(rate * math.expm1(eps))
