"""Dominating pairs of the mechanisms, and their pessimistic discretisation (connect the dots).

What the optimal accountant (:mod:`.pld`) composes and what the RDP accountant (:mod:`.rdp`)
reads for sampled events with a bounded pair; both import it, and it imports neither.

Every mechanism has a *dominating pair* (P, Q) of output distributions (for the worst pair of
neighbouring datasets), known here by its privacy curve δ(ε) = E_P[(1 − e^{ε−L})₊] in both
directions (the table of pairs is in :mod:`.pld`'s docstring). :func:`connect_dots` puts a
curve on a grid of losses {i·h} so that the grid pair dominates the true one [DGKKM22].

References
----------
.. [DGKKM22] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, "Connect the
   Dots: Tighter Discrete Approximations of Privacy Loss Distributions", PETS 2022,
   arXiv:2207.04380.
.. [ZDW22] Y. Zhu, J. Dong, Y.-X. Wang, "Optimal Accounting of Differential Privacy via
   Characteristic Function", AISTATS 2022, arXiv:2106.08567, Thm 11 (subsampling).
.. [BBG18] B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling: Tight
   Analyses via Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647, Thm 2.
.. [BW18] B. Balle, Y.-X. Wang, "Improving the Gaussian Mechanism for Differential
   Privacy", ICML 2018, arXiv:1805.06530, Thm 8.
.. [DRS22] J. Dong, A. Roth, W. Su, "Gaussian Differential Privacy", JRSS-B 2022,
   arXiv:1905.02383, Thm 4.2 (sampling without replacement).
.. [KOV15] P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential
   Privacy", ICML 2015, arXiv:1311.0776, Thm 2.4.
.. [DDR20] J. Dong, D. Durfee, R. Rogers, "Optimal Differential Privacy Composition for
   Exponential Mechanisms", ICML 2020, arXiv:1909.13830 (bounded range).
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError
from planner.privacy.events import (
    ApproxEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
)

FloatArray = npt.NDArray[np.float64]

# --------------------------------------------------------------------------------------
# Dominating pairs, described by their privacy curves
# --------------------------------------------------------------------------------------


def _as_array(x: npt.ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


class _Pair(ABC):
    """A dominating pair (P, Q) of one mechanism, known by its privacy curves.

    ``delta(ε, add)`` is δ(ε) = E_P[(1 − e^{ε−L})₊] of the remove direction (P ‖ Q), or of
    the add direction (Q ‖ P) when ``add``; ``delta_bar`` is δ(ε) − (1 − e^ε), the same curve
    measured from below, computed without cancellation for ε < 0 through the identity
    H_γ(P‖Q) = 1 − γ + γ H_{1/γ}(Q‖P): δ̄_remove(ε) = e^ε δ_add(−ε).
    """

    #: True when (Q, P) is (P, Q) relabelled: both directions have the same curve.
    symmetric: ClassVar[bool] = True
    #: False when ``delta`` is an upper bound that need not be convex in e^ε (it is then
    #: convexified before discretisation).
    convex: ClassVar[bool] = True

    @abstractmethod
    def delta(self, eps: FloatArray, add: bool = False) -> FloatArray:
        """δ(ε) of the pair in one direction (vectorised)."""

    def delta_bar(self, eps: FloatArray, add: bool = False) -> FloatArray:
        """δ(ε) − (1 − e^ε) = e^ε δ_other(−ε)."""
        e = _as_array(eps)
        with np.errstate(over="ignore"):
            return np.asarray(np.exp(e) * self.delta(-e, not add), dtype=np.float64)

    @abstractmethod
    def loss_range(self, add: bool = False) -> tuple[float, float]:
        """(least, largest) finite privacy loss with positive P-mass (±inf if unbounded)."""

    def inf_mass(self, add: bool = False) -> float:
        """P-mass of the loss +∞ (outputs impossible under Q): the curve's limit at ε → ∞."""
        return 0.0

    def atoms(self, add: bool = False) -> tuple[FloatArray, FloatArray] | None:
        """(losses, P-masses) of the finite part when it has at most two atoms, else None."""
        return None

    def pure_epsilon(self) -> float:
        """The largest finite loss over both directions when the pair has no +∞ mass."""
        if self.inf_mass(False) > 0 or self.inf_mass(True) > 0:
            return math.inf
        return max(self.loss_range(False)[1], self.loss_range(True)[1])


@dataclass(frozen=True)
class _Gaussian(_Pair):
    """N(0, 1) vs N(μ, 1): δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) [BW18, Thm 8].

    With a = ε/μ − μ/2 and b = ε/μ + μ/2 (b² − a² = 2ε), for a > 0 both terms share the
    factor ½e^{−a²/2}: δ = ½e^{−a²/2}(erfcx(a/√2) − erfcx(b/√2)), with no overflow and no
    cancellation of two tiny numbers.
    """

    mu: float

    def delta(self, eps: FloatArray, add: bool = False) -> FloatArray:
        from planner.core import special
        e = _as_array(eps)
        m = self.mu
        a = e / m - m / 2.0
        b = e / m + m / 2.0
        out = np.empty(e.shape)
        hi = a > 0
        r2 = math.sqrt(2.0)
        ah, bh = a[hi], b[hi]
        out[hi] = 0.5 * np.exp(-ah * ah / 2.0) * (special.erfcx(ah / r2) - special.erfcx(bh / r2))
        lo = ~hi
        with np.errstate(over="ignore"):
            out[lo] = special.ndtr(-a[lo]) - np.exp(e[lo] + special.log_ndtr(-b[lo]))
        return np.asarray(np.clip(out, 0.0, 1.0), dtype=np.float64)

    def loss_range(self, add: bool = False) -> tuple[float, float]:
        return -math.inf, math.inf


@dataclass(frozen=True)
class _Laplace(_Pair):
    """Lap(0, b) vs Lap(Δ, b), ε₀ = Δ/b: δ(ε) = 1 − e^{(ε−ε₀)/2} for |ε| ≤ ε₀, 0 above ε₀
    (hand calculation: L = ε₀ on x ≤ 0, −ε₀ on x ≥ Δ, linear in between)."""

    eps0: float

    def delta(self, eps: FloatArray, add: bool = False) -> FloatArray:
        e = _as_array(eps)
        e0 = self.eps0
        mid = -np.expm1((np.minimum(e, e0) - e0) / 2.0)
        out = np.where(e >= e0, 0.0, np.where(e < -e0, -np.expm1(np.minimum(e, 0.0)), mid))
        return np.asarray(out, dtype=np.float64)

    def loss_range(self, add: bool = False) -> tuple[float, float]:
        return -self.eps0, self.eps0


@dataclass(frozen=True)
class _TwoPoint(_Pair):
    """Randomized response at ε₀ with mass δ₀ at +∞: P = (δ₀, (1−δ₀)p, (1−δ₀)(1−p), 0),
    Q reversed, p = e^{ε₀}/(1 + e^{ε₀}). The worst (ε₀, δ₀)-DP pair: every (ε₀, δ₀)-DP
    mechanism is a post-processing of it [KOV15, Thm 2.4]; with δ₀ = 0 the worst ε₀-DP pair."""

    eps0: float
    delta0: float = 0.0

    @property
    def p(self) -> float:
        from planner.core import special
        return float(special.expit(self.eps0))

    def delta(self, eps: FloatArray, add: bool = False) -> FloatArray:
        e = _as_array(eps)
        e0, d0, p = self.eps0, self.delta0, self.p
        top = p * -np.expm1(np.minimum(e - e0, 0.0))
        bottom = (1.0 - p) * -np.expm1(np.minimum(e + e0, 0.0))
        out = d0 + (1.0 - d0) * (np.where(e < e0, top, 0.0) + np.where(e < -e0, bottom, 0.0))
        return np.asarray(out, dtype=np.float64)

    def loss_range(self, add: bool = False) -> tuple[float, float]:
        return -self.eps0, self.eps0

    def inf_mass(self, add: bool = False) -> float:
        return self.delta0

    def atoms(self, add: bool = False) -> tuple[FloatArray, FloatArray] | None:
        w = 1.0 - self.delta0
        return np.array([self.eps0, -self.eps0]), np.array([w * self.p, w * (1.0 - self.p)])


@dataclass(frozen=True)
class _BoundedRange(_Pair):
    """The envelope of every ε₀-bounded-range pair (the exponential mechanism, and noisy max
    with Gumbel noise) [DDR20].

    Notes
    -----
    A pair is ε₀-BR when its loss L lies in [t − ε₀, t] for some t ∈ [0, ε₀]. For fixed t,
    δ(ε) = E_P[(1 − e^{ε} e^{−L})₊] is convex in y = e^{−L} with E_P[y] = 1, so it is
    largest when L takes only the two end values: L = t with probability
    p_t = (e^{ε₀} − e^t)/(e^{ε₀} − 1), else t − ε₀. For ε ∈ [t − ε₀, t) that gives
    p_t(1 − e^{ε−t}); in u = e^t this is (E − u − cE/u + c)/(E − 1) (E = e^{ε₀}, c = e^ε),
    maximal at u = √(cE), i.e. t = (ε₀ + ε)/2 — inside [max(0, ε), min(ε₀, ε + ε₀)] for
    every ε ∈ [−ε₀, ε₀] — with value (√E − √c)²/(E − 1) = e^ε (e^{(ε₀−ε)/2} − 1)²/(e^{ε₀} − 1).
    The other t give 1 − e^ε (both values of L above ε) or 0. The upper envelope
    max(that, 1 − e^ε) is convex in e^ε (a maximum of convex curves), hence the curve of a
    pair dominating every ε₀-BR mechanism; the class is closed under swapping P and Q, so
    the envelope is symmetric.
    """

    eps0: float

    def delta(self, eps: FloatArray, add: bool = False) -> FloatArray:
        e = _as_array(eps)
        e0 = self.eps0
        ec = np.clip(e, -e0, e0)
        with np.errstate(over="ignore"):
            env = np.exp(ec) * np.expm1((e0 - ec) / 2.0) ** 2 / math.expm1(e0)
        floor = -np.expm1(np.minimum(e, 0.0))
        out = np.where(e >= e0, 0.0, np.where(e < -e0, floor, np.maximum(env, floor)))
        return np.asarray(out, dtype=np.float64)

    def loss_range(self, add: bool = False) -> tuple[float, float]:
        return -self.eps0, self.eps0


@dataclass(frozen=True)
class _Poisson(_Pair):
    """A mechanism with symmetric dominating pair (P, Q) run on a Poisson sample of rate q.

    Notes
    -----
    Remove direction: A = (1 − q)Q + qP against B = Q. For c = e^ε > 1 − q,
    A − cB = q(P − γQ) with γ = 1 + (c − 1)/q, so δ_A‖B(ε) = q·δ(ln γ) exactly (for
    c ≤ 1 − q, A − cB ≥ 0 and δ = 1 − c). Add direction: B − cA = (1 − c(1 − q))Q − cqP,
    so δ_B‖A(ε) = (1 − c(1 − q))·δ(ln(cq/(1 − c(1 − q)))) for c(1 − q) < 1, else 0. That
    (A, B) and (B, A) dominate the sampled mechanism under remove and add neighbours is
    [ZDW22, Thm 11] (the γ ≥ 1 part is [BBG18, Thm 2]; the rest follows from the identity
    H_γ(A‖B) = 1 − γ + γH_{1/γ}(B‖A)).
    """

    symmetric: ClassVar[bool] = False
    base: _Pair
    q: float

    def delta(self, eps: FloatArray, add: bool = False) -> FloatArray:
        e = _as_array(eps)
        q = self.q
        out = np.zeros(e.shape)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if not add:
                live = e > math.log1p(-q)
                out[~live] = -np.expm1(e[~live])
                out[live] = q * self.base.delta(np.log1p(np.expm1(e[live]) / q))
            else:
                c = np.exp(e)
                w = q * c - np.expm1(e)  # 1 − c(1 − q)
                live = w > 0
                arg = math.log(q) + e[live] - np.log(w[live])
                out[live] = w[live] * self.base.delta(arg)
        return np.asarray(np.clip(out, 0.0, 1.0), dtype=np.float64)

    def loss_range(self, add: bool = False) -> tuple[float, float]:
        lo_b, hi_b = self.base.loss_range()
        q = self.q

        def rem(v: float) -> float:  # ln(1 − q + q e^v)
            return math.log1p(q * math.expm1(v)) if v < 700 else math.inf

        lo = math.log1p(-q) if (lo_b == -math.inf or self.base.inf_mass() > 0) else rem(lo_b)
        hi = rem(hi_b) if hi_b < math.inf else math.inf
        if not add:
            return lo, hi
        return -hi, -lo

    def inf_mass(self, add: bool = False) -> float:
        return 0.0 if add else self.q * self.base.inf_mass()

    def atoms(self, add: bool = False) -> tuple[FloatArray, FloatArray] | None:
        base = self.base.atoms()
        if base is None or self.base.inf_mass() > 0:  # a third atom at ln(1 − q)
            return None
        lb, pb = base
        q = self.q
        if not add:  # loss ln(1 − q + q e^l), A-mass P(l)((1 − q)e^{−l} + q)
            return np.log1p(q * np.expm1(lb)), pb * ((1.0 - q) * np.exp(-lb) + q)
        return -np.log1p(q * np.expm1(lb)), pb * np.exp(-lb)  # B-mass = Q(l)

    def pure_epsilon(self) -> float:
        # ln(1 + q(e^ε − 1)) [BBG18, Thm 9]; the add side is never larger.
        return math.inf if self.inf_mass() > 0 else self.loss_range(False)[1]


@dataclass(frozen=True)
class _WithoutReplacement(_Pair):
    """A mechanism with symmetric dominating pair (P, Q) run on a uniformly random subset of
    fixed size m = qn, under the substitute-one relation.

    Notes
    -----
    For substitution neighbours D ≃ D′ the sampled outputs are (1 − q)μ₀ + qμ₁ and
    (1 − q)μ₀ + qμ₁′ (x's index sampled or not). For γ′ ≥ 1, advanced joint convexity
    [BBG18, Thm 2] gives H_γ′ = q·H_γ(μ₁ ‖ (1 − β)μ₀ + βμ₁′) with γ = 1 + (γ′ − 1)/q, and
    joint convexity with the couplings of [BBG18, §5] bounds it by q·H_γ(P‖Q) = H_γ′(A‖B),
    A = (1 − q)Q + qP, B = Q — in both orders of D and D′, the relation being symmetric.
    For γ′ < 1 the identity H_γ′(X‖Y) = 1 − γ′ + γ′H_{1/γ′}(Y‖X) turns that into
    H_γ′(B‖A)-type bounds. So the symmetric pair whose curve is max(δ_A‖B, δ_B‖A) at every ε
    dominates the sampled mechanism (it is the symmetrisation min{f, f⁻¹}** of [DRS22,
    Thm 4.2] in tradeoff-function terms). Using (A, B) alone would *not* be a valid
    dominating pair for substitution.
    """

    base: _Pair
    q: float

    def _poisson(self) -> _Poisson:
        return _Poisson(self.base, self.q)

    def delta(self, eps: FloatArray, add: bool = False) -> FloatArray:
        p = self._poisson()
        return np.asarray(np.maximum(p.delta(eps, False), p.delta(eps, True)), dtype=np.float64)

    def loss_range(self, add: bool = False) -> tuple[float, float]:
        p = self._poisson()
        (a0, a1), (b0, b1) = p.loss_range(False), p.loss_range(True)
        return min(a0, b0), max(a1, b1)

    def inf_mass(self, add: bool = False) -> float:
        return self.q * self.base.inf_mass()

    def pure_epsilon(self) -> float:
        return self._poisson().pure_epsilon()


def _base_pair(event: PrivacyEvent) -> _Pair | None:
    """The dominating pair of one (unsampled) mechanism event, or None if it has none."""
    if isinstance(event, LaplaceEvent):
        return _Laplace(1.0 / event.noise_multiplier)
    if isinstance(event, PureEvent):
        return _TwoPoint(event.epsilon)
    if isinstance(event, RandomizedResponseEvent):
        p = event.keep_probability
        return _TwoPoint(math.log(p) - math.log1p(-p))
    if isinstance(event, ExponentialEvent):
        return _BoundedRange(event.epsilon)
    if isinstance(event, ApproxEvent):
        return _TwoPoint(event.epsilon, event.delta)
    if isinstance(event, GaussianEvent) and not event.discrete:
        return _Gaussian(1.0 / event.noise_multiplier)
    return None  # OpenDP's discrete Gaussian, zCDP: certified through ρ only


def event_pair(event: PrivacyEvent) -> _Pair | None:
    """The dominating pair of a single (possibly sampled) event, or None when the event is
    certified only through Rényi DP / zCDP (OpenDP's discrete Gaussian, ρ-zCDP events)."""
    if isinstance(event, PoissonSampledEvent):
        base = _base_pair(event.event)
        if base is None:
            return None
        return base if event.rate == 1.0 else _Poisson(base, event.rate)
    if isinstance(event, SampledWithoutReplacementEvent):
        base = _base_pair(event.event)
        if base is None:
            return None
        return base if event.rate == 1.0 else _WithoutReplacement(base, event.rate)
    return _base_pair(event)


# --------------------------------------------------------------------------------------
# Discretisation (connect the dots) and composition (FFT)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Dist:
    """A discrete loss distribution: P-mass ``mass[j]`` at loss ``losses[j]``, ``inf`` at +∞.

    Grid distributions have losses (start + j)·h; exact ones (binomials) arbitrary losses.
    """

    losses: FloatArray
    mass: FloatArray
    inf: float
    h: float = 0.0
    start: int = 0
    #: Floating-point noise of each mass (FFT rounding), estimated after composition.
    noise: float = 0.0

    @classmethod
    def grid(cls, h: float, start: int, mass: FloatArray, inf: float, noise: float = 0.0) -> _Dist:
        losses = np.asarray((start + np.arange(mass.size)) * h, dtype=np.float64)
        return cls(losses, mass, inf, h, start, noise)


def _first_below(f: Any, start: float, direction: float, tau: float) -> float:
    """The point where the decreasing-in-|v| tail f(v) falls to ≤ τ, searching from
    ``start`` in ``direction`` (±1): a geometric ladder of 48 candidates in one call, then 64
    evenly spaced ones between the last two rungs. Returns a point where f ≤ τ (valid), at
    most 1/64 of a rung beyond the crossing (tightness only)."""
    ladder = start + direction * np.concatenate([[0.0], np.geomspace(1e-6, 1e4, 47)])
    vals = f(ladder)
    ok = np.flatnonzero(vals <= tau)
    if ok.size == 0:
        raise BudgetError("a privacy curve does not decay; the mechanism's loss is unbounded.")
    j = int(ok[0])
    if j == 0:
        return float(ladder[0])
    fine = np.linspace(ladder[j - 1], ladder[j], 65)[1:-1]
    below = np.flatnonzero(f(fine) <= tau)
    return float(fine[int(below[0])]) if below.size else float(ladder[j])


#: The largest loss a grid reaches: e^ε must stay finite in double precision (e^709.8 is
#: the largest). The curve is held at δ(ε) beyond the top point and that mass goes to +∞
#: (:func:`connect_dots`), so stopping the grid here is pessimistic, never optimistic.
_MAX_LOSS: Final = 700.0


def _search_upper(pair: _Pair, add: bool, tau: float) -> float:
    """A loss ε with δ(ε) − inf_mass ≤ τ (the tail beyond it is moved to +∞), at most
    :data:`_MAX_LOSS` (a slowly decaying curve, e.g. a Rényi envelope composed hundreds of
    times, once ran past e^ε's range and turned the grid into NaN)."""
    _, hi_l = pair.loss_range(add)
    if hi_l < math.inf:
        return min(hi_l, _MAX_LOSS)
    base = pair.inf_mass(add)
    return min(_first_below(lambda v: pair.delta(v, add) - base, 0.0, 1.0, tau), _MAX_LOSS)


def _search_lower(pair: _Pair, add: bool, tau: float) -> float:
    """A loss ε with δ̄(ε) ≤ τ (the mass below it is lumped at it: pessimistic), at least
    −:data:`_MAX_LOSS`: below it e^ε leaves the normal floats and the grid's slopes divide
    by zero (a Laplace pair with ε₀ ≈ 3e15, probed by the allocator's bisection, once
    turned the grid into NaN); lumping the mass below at −_MAX_LOSS only raises losses."""
    lo_l, _ = pair.loss_range(add)
    if lo_l > -math.inf:
        return max(lo_l, -_MAX_LOSS)
    return max(_first_below(lambda v: pair.delta_bar(v, add), 0.0, -1.0, tau), -_MAX_LOSS)


def _grid_masses(x: FloatArray, up: npt.NDArray[np.bool_], d: FloatArray, dbar: FloatArray) -> FloatArray:
    """P-masses xᵢ(sᵢ − sᵢ₋₁) of the grid distribution whose curve interpolates the values
    (δ where ``up``, δ̄ = δ − (1 − x) elsewhere; both at x = 1); slopes of segments above
    x = 1 from δ, below from δ̄ (slope s + 1); left of the bottom point the chord to
    (0, δ̄ = 0), right of the top point flat (the rest of the mass is at +∞)."""
    seg_up = up[:-1] & up[1:]
    dx = x[1:] - x[:-1]
    slope = np.where(seg_up, (d[1:] - d[:-1]) / dx, (dbar[1:] - dbar[:-1]) / dx)
    left = (d[0] - 1.0) / x[0] if up[0] else dbar[0] / x[0]
    s_left = np.concatenate([[left], slope])
    up_left = np.concatenate([[bool(up[0])], seg_up])
    s_right = np.concatenate([slope, [0.0 if up[-1] else 1.0]])
    up_right = np.concatenate([seg_up, [bool(up[-1])]])
    # a δ̄-slope on the left of a δ-slope: δ̄ slope = δ slope + 1
    return np.asarray(x * (s_right - s_left + np.where(up_right & ~up_left, 1.0, 0.0)), dtype=np.float64)


def _lower_hull(x: FloatArray, up: npt.NDArray[np.bool_], d: FloatArray, dbar: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The greatest convex minorant of the points (xᵢ, vᵢ) (v = δ where ``up``, δ̄ below),
    evaluated back at every xᵢ.

    Every vᵢ is ≥ the true curve, which is convex; a convex function below a set of points
    is below their lower hull, so the hull is still ≥ the true curve — and convex. Monotone
    chain (Andrew), with each orientation test done in the representation in which the
    three values are small (δ above x = 1, δ̄ below, δ across).
    """

    def val(i: int, rep_up: bool) -> float:
        if rep_up:
            return float(d[i]) if up[i] else float(dbar[i] + 1.0 - x[i])
        return float(dbar[i]) if not up[i] else float(d[i] - 1.0 + x[i])

    def below(i: int, j: int, k: int) -> bool:
        """Is point j strictly below the chord from i to k?"""
        rep_up = bool(up[j])
        vi, vj, vk = val(i, rep_up), val(j, rep_up), val(k, rep_up)
        chord = vi + (vk - vi) * (x[j] - x[i]) / (x[k] - x[i])
        return bool(vj < chord - 1e-15 * abs(chord))

    hull: list[int] = []
    for k in range(x.size):
        while len(hull) >= 2 and not below(hull[-2], hull[-1], k):
            hull.pop()
        hull.append(k)
    d2, db2 = d.copy(), dbar.copy()
    for a, b in itertools.pairwise(hull):
        if b - a < 2:
            continue
        j = np.arange(a + 1, b)
        w = (x[j] - x[a]) / (x[b] - x[a])
        for rep_up, target in ((True, d2), (False, db2)):
            va, vb = val(a, rep_up), val(b, rep_up)
            vals = va + w * (vb - va)
            mask = up[j] if rep_up else ~up[j]
            target[j[mask]] = vals[mask]
        zero = j[(up[j]) & (~up[j - 1] | (x[j] == 1.0))]
        db2[zero] = d2[zero]  # at x = 1 both representations hold the same value
    return d2, db2


def connect_dots(pair: _Pair, add: bool, h: float, lo: float, hi: float) -> _Dist:
    """The pessimistic grid distribution of ``pair`` on {i·h}, i from ⌊lo/h⌋ to ⌈hi/h⌉.

    Notes
    -----
    For a distribution on the grid, δ(ε) is linear in x = e^ε between grid points, and the
    P-mass at εᵢ is ωᵢ = xᵢ(sᵢ − sᵢ₋₁), sᵢ the slope of δ in x on [xᵢ, xᵢ₊₁]. Taking values
    vᵢ ≥ δ(εᵢ) at the grid points (the true values, for the exact curves) gives the
    piecewise-linear interpolant, which lies above the true curve everywhere because the
    true curve is convex in x; when the vᵢ are convex too the masses are ≥ 0 and the grid
    pair dominates the true one [DGKKM22]. For an upper bound that is not convex (a minimum
    over Rényi orders) the points are replaced by their lower convex hull
    (:func:`_lower_hull`), which stays above the true curve. Masses that come out negative
    by rounding (~1e-16 of the local values) are set to 0.
    Beyond the top point the curve is held at v_b (that mass goes to +∞); below the bottom
    one it follows the chord to (0, 1), so the mass below is lumped at ε_a. Slopes above 0
    come from δ, those below from δ̄ = δ − (1 − x), so each mass is a difference of small
    numbers in its own tail.
    """
    a = math.floor(lo / h + 1e-9)
    b = max(math.ceil(hi / h - 1e-9), a + 1)
    idx = np.arange(a, b + 1)
    eps = np.asarray(idx * h, dtype=np.float64)
    x = np.exp(eps)
    up = idx >= 0
    lower = idx <= 0
    d = np.zeros(idx.size)
    dbar = np.zeros(idx.size)
    if up.any():
        d[up] = pair.delta(eps[up], add)
    if lower.any():
        dbar[lower] = pair.delta_bar(eps[lower], add)
    if not pair.convex:
        d, dbar = _lower_hull(x, up, d, dbar)
    mass = np.maximum(_grid_masses(x, up, d, dbar), 0.0)
    inf = max(float(d[-1]) if up[-1] else 0.0, pair.inf_mass(add))
    return _Dist.grid(h, a, mass, inf)


__all__ = ["connect_dots", "event_pair"]
