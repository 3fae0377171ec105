"""The optimal accountant: privacy loss distributions (PLDs), discretised pessimistically and
composed by FFT.

Every mechanism has a *dominating pair* (P, Q) of output distributions (for the worst pair of
neighbouring datasets), and its privacy loss L = ln(P(o)/Q(o)), o ~ P, composes by
*adding*: the loss of a composition is the sum of independent losses, so its distribution is
the convolution of theirs. The accountant

1. describes each event by the privacy curve of its dominating pair, δ(ε) =
   E_P[(1 − e^{ε−L})₊] (the hockey-stick divergence, exact closed forms below), in both
   directions (remove and add; they differ only for Poisson-sampled events);
2. discretises each curve on a grid of losses {i·h} with the *connect-the-dots* rule
   [DGKKM22]: the grid distribution whose curve equals the true one at every grid point and
   lies above it between them (convexity in e^ε), so it dominates the true pair: pessimistic,
   with no drift under composition (the error is second order in h);
3. composes by FFT: the k-fold self-composition of a group of identical events is the k-th
   power of its discrete Fourier transform, so 10,000 steps cost no more than one; the
   window of the FFT is sized by Chernoff bounds, and the mass that could lie beyond it is
   moved to +∞ (pessimistic);
4. reads the least ε with δ(ε) ≤ δ off the composed distribution exactly (δ is piecewise
   exponential between grid points), in both directions, and takes the larger.

Exact shortcuts: continuous Gaussians compose to one Gaussian (μ² = Σμᵢ², [DRS22, Cor. 3.3])
whose curve is the analytic Gaussian [BW18]; events with two-point dominating pairs
(randomized response, every pure ε-DP mechanism, (ε, δ) events) compose exactly as
binomials — ten randomized responses at ε = 0.05 cost exactly 0.5 at δ = 0 and exactly
the Kairouz–Oh–Viswanath value at every δ [KOV15, Thm 3.3].

Dominating pairs used (all are pairs of the mechanism as *released*):

==============================  ================================================================
event                           pair and curve
==============================  ================================================================
Gaussian (continuous) σ = s·Δ   N(0,1) vs N(μ,1), μ = 1/s: Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) [BW18]
Laplace b = λΔ                  Lap(0,b) vs Lap(Δ,b), ε₀ = 1/λ: 1 − e^{(ε−ε₀)/2} on [−ε₀, ε₀]
pure ε₀ (discrete Laplace ...)  randomized response at ε₀: every ε₀-DP pair is a
                                post-processing of it [KOV15, Thm 2.4]; *exact* for OpenDP's
                                discrete Laplace at integer sensitivity 1 (whose loss is ±ε₀)
randomized response p           itself: L = ±ln(p/(1−p)) (exact)
exponential mechanism ε₀        the bounded-range envelope: (e^{ε₀/2} − e^{ε/2})²/(e^{ε₀} − 1)
                                on [0, ε₀] (derived in :class:`_BoundedRange`) [DDR20]
(ε₀, δ₀)                        randomized response at ε₀ with δ₀ at +∞ [KOV15, Thm 2.4]
Poisson-sampled, rate q         ((1−q)Q + qP, Q) remove, (Q, (1−q)Q + qP) add [ZDW22, Thm 11]
sampled w/o replacement, q      the symmetric pair whose curve is the larger of the two above
                                (:class:`_WithoutReplacement`, from [BBG18, Thm 2])
discrete Gaussian, zCDP         no pair is certified: OpenDP certifies ρ-zCDP only, and the
                                discrete Gaussian's curve is *above* the continuous one's
                                (σ = 0.3: δ(0) = 0.99 vs 0.90); these are accounted by Rényi
                                DP and added by basic composition (:func:`pld_epsilon`)
==============================  ================================================================

References
----------
.. [DGKKM22] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, "Connect the
   Dots: Tighter Discrete Approximations of Privacy Loss Distributions", PETS 2022,
   arXiv:2207.04380.
.. [KJH20] A. Koskela, J. Jälkö, A. Honkela, "Computing Tight Differential Privacy
   Guarantees Using FFT", AISTATS 2020, arXiv:1906.03049 (composition by FFT).
.. [MM18] S. Meiser, E. Mohammadi, "Tight on Budget? Tight Bounds for r-Fold Approximate
   Differential Privacy", CCS 2018 (privacy buckets; pessimistic rounding).
.. [ZDW22] Y. Zhu, J. Dong, Y.-X. Wang, "Optimal Accounting of Differential Privacy via
   Characteristic Function", AISTATS 2022, arXiv:2106.08567, Def. 7 and Thm 10
   (dominating pairs compose), Thm 11 (subsampling).
.. [BBG18] B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling: Tight
   Analyses via Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647, Thm 2
   (advanced joint convexity), Thms 9–10.
.. [BW18] B. Balle, Y.-X. Wang, "Improving the Gaussian Mechanism for Differential
   Privacy", ICML 2018, arXiv:1805.06530, Thm 8.
.. [DRS22] J. Dong, A. Roth, W. Su, "Gaussian Differential Privacy", JRSS-B 2022,
   arXiv:1905.02383, Cor. 3.3 (Gaussians compose to a Gaussian), Thm 4.2 (sampling).
.. [KOV15] P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential
   Privacy", ICML 2015, arXiv:1311.0776, Thm 2.4, Thm 3.3 (k identical ε-DP mechanisms).
.. [DDR20] J. Dong, D. Durfee, R. Rogers, "Optimal Differential Privacy Composition for
   Exponential Mechanisms", ICML 2020, arXiv:1909.13830 (bounded range).
.. [GLW21] S. Gopi, Y. T. Lee, L. Wutschitz, "Numerical Composition of Differential
   Privacy", NeurIPS 2021, arXiv:2106.02848 (the PRV accountant used as an oracle in tests).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, cast

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.privacy import divergences as dv
from planner.privacy.accountants.base import ROUND_UP, Accountant, FloatArray, Rule, round_up
from planner.privacy.accountants.exact import EMPTY_SUM, ExactSum
from planner.privacy.accountants.pairs import (
    _MAX_LOSS,
    _as_array,
    _BoundedRange,
    _Dist,
    _Gaussian,
    _Pair,
    _search_lower,
    _search_upper,
    _TwoPoint,
    connect_dots,
    event_pair,
)
from planner.privacy.accountants.pure import pure_epsilon
from planner.privacy.accountants.rdp import RdpParts, rdp_curve, rdp_epsilon
from planner.privacy.accountants.rdp import parts_epsilon as rdp_parts_epsilon
from planner.privacy.accountants.zcdp import event_rho
from planner.privacy.budget import DEFAULT_ORDERS, CompositionRule, check_delta
from planner.privacy.events import (
    ComposedEvent,
    ExponentialEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

#: Relative accuracy the grid is sized for: the discretisation inflates the variance of the
#: composed loss by about Σₖ h²/4 (a spread of at most one cell per event); h is chosen so
#: that this is ``_TOL`` of the composed variance. The error is second order in h (∝ _TOL):
#: measured at about 0.4·_TOL relative to ε (DP-SGD cases against a grid 200× finer), the
#: same as Google dp-accounting's PLD at its default 1e-4 grid.
_TOL: Final[float] = 1e-4
#: Mass of one event's loss distribution left beyond its grid on each side (above: moved to
#: +∞; below: lumped at the grid's bottom). k events add at most k·1e-20 to δ.
_TAIL_MASS: Final[float] = 1e-20
#: Mass of the composition allowed beyond the FFT window on each side (Chernoff bounds).
_WINDOW_MASS: Final[float] = 1e-15
#: Values per batched FFT call (groups are transformed in blocks of this many points).
_FFT_BATCH: Final[int] = 1 << 21
#: Largest FFT length used (a coarser grid is taken beyond it; still a valid upper bound).
_MAX_POINTS: Final[int] = 1 << 22
#: Largest number of composed atoms computed exactly (the binomial path).
_MAX_EXACT_ATOMS: Final[int] = 1 << 21
#: The Chernoff parameters tried, in units of 1/(standard deviation of a group's sum): the
#: best t for a tail of 1e-15 of a near-Gaussian sum is about 8.3; the wider range covers
#: skewed sums (any t > 0 gives a valid bound, so the set only affects the window's width).
_CHERNOFF_T: Final = np.array([1.0, 3.0, 6.0, 9.0, 14.0, 30.0])
#: Points of the coarse pass that estimates each event's loss variance.
_COARSE_POINTS: Final[int] = 512

#: Rényi orders of the envelope of a Rényi-certified part (every 8th of the shared grid).
_ENVELOPE_ORDERS: Final = np.asarray(DEFAULT_ORDERS[::8], dtype=np.float64)


def _zcdp_log_delta(rho: float, eps: FloatArray) -> FloatArray:
    """ln of min over real α > 1 of e^{(α−1)(ρα − ε)}(1 − 1/α)^{α−1}/α, the tightest
    Rényi → (ε, δ) bound [CKS20, Prop. 12] of a ρ-zCDP mechanism, vectorised over ε ≥ 0.

    The exponent g(α) has g′(α) = 2ρα − ρ − ε + ln(1 − 1/α) and g″ = 2ρ + 1/(α−1) − 1/α > 0,
    so the minimiser is the root of g′, found by safeguarded Newton on ln(α − 1) (any α
    gives a valid bound; the root gives the least). The resulting curve is smooth and, as checked over ρ
    from 1e-4 to 5, convex in e^ε, so it needs no convexification (which would be applied
    anyway: :func:`~.pairs.connect_dots` checks every mass).
    """
    e = np.maximum(_as_array(eps), 0.0)
    # g′ in y = ln(α − 1): f(y) = 2ρ(1 + e^y) − ρ − ε + y − ln(1 + e^y), increasing; Newton
    # from a start above the root (f ≥ 0 there), kept inside a shrinking bracket
    lo = np.full(e.shape, -60.0)
    hi = np.full(e.shape, 60.0)
    # start: the root without the ln term, α₀ = (ε + ρ)/(2ρ) (there f = ln(1 − 1/α₀) < 0)
    y = np.log(np.maximum((e + rho) / (2.0 * rho) - 1.0, 1e-9))
    # The loop runs on arrays of a few hundred points, where each NumPy call costs more than
    # its arithmetic: 2ρ and 1 + e^y are computed once per step and the sign of f once (the
    # same operations on the same operands as 2.0 * rho * (1.0 + ey) etc., so the same bits).
    two_rho = 2.0 * rho
    for _ in range(40):
        ey = np.exp(np.minimum(y, 60.0))
        one_ey = 1.0 + ey
        f = two_rho * one_ey - rho - e + y - np.log1p(ey)
        pos = f > 0
        hi = np.where(pos, y, hi)
        lo = np.where(pos, lo, y)
        step = f / (two_rho * ey + 1.0 / one_ey)
        nxt = y - step
        y = np.where((nxt > lo) & (nxt < hi), nxt, (lo + hi) / 2.0)
        if (np.abs(step) < 1e-12 * np.maximum(1.0, np.abs(y))).all():
            break
    # in t = α − 1 = e^y: ln(1 − 1/α) = y − ln(1 + t) and ln α = ln(1 + t), stable where
    # α rounds to 1 (a large ρ at a small ε: t underflows against 1)
    t = np.exp(y)
    return np.asarray(t * (rho * (1.0 + t) - e + y - np.log1p(t)) - np.log1p(t), dtype=np.float64)


@functools.lru_cache(maxsize=16)
def _zcdp_log_delta_of(rho: float, flat: bytes) -> FloatArray:
    """:func:`_zcdp_log_delta` of the float64 values ``flat`` (read-only; kept for the next
    call with the same bytes). The curve's tail searches ask for the same points twice: the
    ladder of :func:`~.pairs._first_below` is the same |ε| above 0 (δ) and below it (δ̄ reads
    δ at −ε), and so is its fine step when both cross between the same rungs. The solve
    couples the points it is given (it stops when all have converged), so only the same
    array, bit for bit, is answered from the cache."""
    out = _zcdp_log_delta(rho, np.frombuffer(flat, dtype=np.float64))
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class _RenyiEnvelope(_Pair):
    """A symmetric pair dominating every mechanism (here: a composition of events certified
    only through Rényi DP / zCDP) whose RDP curve is at most ε_R(α).

    Notes
    -----
    An (α, ε_R)-RDP mechanism satisfies, for every ε, δ(ε) ≤ e^{(α−1)(ε_R − ε)}(1 − 1/α)^{α−1}/α
    [CKS20, Prop. 12; BBGHS20, Thm 21] in both directions, so v(ε) = min(1, min_α of that)
    bounds its curve for ε ≥ 0, and e^ε v(−ε) bounds δ̄ = δ − (1 − e^ε) below 0
    (H_γ(P‖Q) = 1 − γ + γH_{1/γ}(Q‖P)). When the curve is ρα (zCDP: the discrete Gaussian,
    ρ-zCDP events, exponential mechanisms by ε²/8) the minimum is over every real α
    (:func:`_zcdp_log_delta`); otherwise over a grid of orders, and the minimum, not convex
    in e^ε, is convexified by :func:`~.pairs.connect_dots` with chords, which stay above the true
    (convex) curve. Either way the grid pair built from it dominates the mechanism and
    composes with the other events' pairs by FFT — tighter than adding the two parts by
    basic composition.
    """

    #: ρ when the curve is ρα (zCDP), else 0 and ``values`` on :data:`_ENVELOPE_ORDERS`.
    rho: float = 0.0
    values: tuple[float, ...] = ()

    @property
    def convex(self) -> bool:  # type: ignore[override]
        return self.rho > 0

    def _log_v(self, flat: FloatArray) -> FloatArray:
        if self.rho > 0:
            return _zcdp_log_delta_of(self.rho, flat.tobytes())
        a = _ENVELOPE_ORDERS
        r = np.asarray(self.values, dtype=np.float64)
        const = (a - 1.0) * (np.log1p(-1.0 / a) + r) - np.log(a)
        best = np.full(flat.shape, np.inf)
        for k in range(a.size):  # running minimum over the orders
            np.minimum(best, const[k] - (a[k] - 1.0) * flat, out=best)
        return best

    def delta(self, eps: FloatArray, add: bool = False) -> FloatArray:
        e = _as_array(eps)
        with np.errstate(over="ignore"):  # a log-bound above 709 is a bound above 1: capped at 1
            v = np.minimum(np.exp(self._log_v(np.abs(e).ravel())), 1.0).reshape(e.shape)
        neg = e < 0
        with np.errstate(over="ignore"):
            out = np.where(neg, -np.expm1(np.minimum(e, 0.0)) + np.exp(np.minimum(e, 0.0)) * v, v)
        return np.asarray(np.clip(out, 0.0, 1.0), dtype=np.float64)

    def loss_range(self, add: bool = False) -> tuple[float, float]:
        return -math.inf, math.inf

    @classmethod
    def of(cls, events: Sequence[PrivacyEvent], rho: float | None = None) -> _RenyiEnvelope:
        """The envelope of ``events``; ``rho``, when given, is their Σρ as math.fsum
        computes it and none of them is sampled (a kept sum: no pass over the events)."""
        if rho is None and not any(isinstance(e, _SAMPLED) for e in _leaves(events)):
            rho = math.fsum(event_rho(e) for e in events)
        if rho is not None:
            if math.isfinite(rho) and rho > 0:
                return cls(rho=rho * (1.0 + 1e-12))
        curve = rdp_curve(list(events), _ENVELOPE_ORDERS)
        return cls(values=tuple(float(v) for v in curve.epsilons))


_SAMPLED: Final = (PoissonSampledEvent, SampledWithoutReplacementEvent)


def _leaves(events: Sequence[PrivacyEvent]) -> list[PrivacyEvent]:
    out: list[PrivacyEvent] = []
    for e in events:
        if isinstance(e, ComposedEvent):
            out.extend(_leaves(e.events))
        elif isinstance(e, SelfComposedEvent):
            out.extend(_leaves([e.event]))
        else:
            out.append(e)
    return out


# --------------------------------------------------------------------------------------
# Splitting a composition into groups of identical pairs
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Split:
    """A composition as (pair, count) groups, plus the events without a pair."""

    groups: tuple[tuple[_Pair, int], ...]
    rdp_events: tuple[PrivacyEvent, ...]
    relations: frozenset[str]
    #: Σρ of ``rdp_events`` (math.fsum's float) when none of them is sampled, else None.
    rdp_rho: float | None = None


@dataclass(frozen=True)
class _Grouping:
    """A composition grouped by dominating pair, kept so that adding events costs those
    events only: the count of each pair, Σμᵢ² of the continuous Gaussians (summed in the
    order a composition of every event at once sums it), the events set aside for the
    Rényi part, and the neighbouring relations the sampled events need."""

    renyi_exponential: bool = False
    counts: dict[_Pair, int] = field(default_factory=dict)
    mu_sq: float = 0.0
    rest: tuple[PrivacyEvent, ...] = ()
    relations: frozenset[str] = frozenset()
    rest_rho: ExactSum = EMPTY_SUM  # Σρ of ``rest``, exactly
    rest_sampled: bool = False  # whether some event in ``rest`` is sampled

    def add(self, events: Sequence[PrivacyEvent]) -> _Grouping:
        counts = dict(self.counts)
        rest: list[PrivacyEvent] = []
        mu_sq = self.mu_sq
        relations: set[str] = set(self.relations)

        def add(e: PrivacyEvent, n: int) -> None:
            nonlocal mu_sq
            if isinstance(e, ComposedEvent):
                for x in e.events:
                    add(x, n)
                return
            if isinstance(e, SelfComposedEvent):
                add(e.event, n * e.count)
                return
            if not isinstance(e, PrivacyEvent):
                raise BudgetError(
                    f"events must be privacy events (LaplaceEvent, GaussianEvent, ...); got {type(e).__name__}.")
            if isinstance(e, PoissonSampledEvent) and e.rate < 1.0:
                relations.add("add_remove")
            if isinstance(e, SampledWithoutReplacementEvent) and e.rate < 1.0:
                relations.add("substitute")
            if isinstance(e, GaussianEvent) and not e.discrete:
                mu_sq += n / e.noise_multiplier**2  # Gaussians compose to one Gaussian [DRS22]
                return
            pair = None if (self.renyi_exponential and isinstance(e, ExponentialEvent)) else event_pair(e)
            if pair is None:
                rest.extend([e] * n) if n <= 16 else rest.append(SelfComposedEvent(e, n))
                return
            counts[pair] = counts.get(pair, 0) + n

        for e in events:
            add(e, 1)
        sampled = self.rest_sampled or any(isinstance(x, _SAMPLED) for x in _leaves(rest))
        return _Grouping(self.renyi_exponential, counts, mu_sq, self.rest + tuple(rest), frozenset(relations),
                         self.rest_rho.add(event_rho(x) for x in rest), sampled)

    def split(self) -> _Split:
        groups = list(self.counts.items())
        if self.mu_sq > 0:
            groups.append((_Gaussian(math.sqrt(self.mu_sq)), 1))
        return _Split(tuple(groups), self.rest, self.relations, None if self.rest_sampled else self.rest_rho.value)


def _split(events: Sequence[PrivacyEvent], *, renyi_exponential: bool = False) -> _Split:
    """Group the events by dominating pair (continuous Gaussians merged into one); events
    without a pair — and, with ``renyi_exponential``, exponential mechanisms (ε²/8-zCDP) —
    are set aside for the Rényi part."""
    return _Grouping(renyi_exponential).add(events).split()


def check_relations(events: Sequence[PrivacyEvent]) -> None:
    """Refuse a composition that mixes Poisson sampling (add/remove neighbours) with sampling
    without replacement (substitute neighbours): each is only valid under its own relation."""
    _check_split(_split(events))


def _check_split(sp: _Split) -> None:
    """:func:`check_relations` on an already split composition."""
    if len(sp.relations) > 1:
        raise BudgetError(
            "these events mix Poisson sampling (accounted under add/remove neighbours) with "
            "sampling without replacement (substitute neighbours); one composition has one "
            "neighbouring relation. Use one sampling scheme for the whole composition."
        )


def _log_mgf(dist: _Dist, t: FloatArray) -> FloatArray:
    """ln Σⱼ ωⱼ e^{t Lⱼ} of the finite part, for each t (−inf if it has no mass)."""
    nz = dist.mass > 0
    if not np.any(nz):
        return np.full(t.shape, -np.inf)
    v = np.log(dist.mass[nz])[None, :] + t[:, None] * dist.losses[nz][None, :]
    c = v.max(axis=1)
    return np.asarray(c + np.log(np.exp(v - c[:, None]).sum(axis=1)), dtype=np.float64)


def _moments(dist: _Dist) -> tuple[float, float]:
    """(mean, variance) of the finite part, normalised."""
    tot = float(dist.mass.sum())
    if tot <= 0:
        return 0.0, 0.0
    mean = float(np.dot(dist.mass, dist.losses) / tot)
    return mean, float(np.dot(dist.mass, (dist.losses - mean) ** 2) / tot)


class _TooWide(Exception):
    def __init__(self, width: int) -> None:
        super().__init__(width)
        self.width = width


def _compose_fft(parts: Sequence[tuple[_Dist, int]], var: float) -> tuple[_Dist, int]:
    """Compose the grid distributions ``parts`` (each ``count`` times) by FFT on one window;
    returns the composed distribution and the FFT length. ``var`` is about the variance of
    the sum (it only scales the Chernoff parameters tried).

    The window [lo, hi] holds all but ``_WINDOW_MASS`` of the sum S on each side, by
    Chernoff's bound on the whole sum: P(S > s) ≤ e^{−ts} Πⱼ E[e^{tLⱼ}]^{kⱼ} for every t > 0
    (minimised over a grid of t; likewise below). The circular convolution folds what lies
    beyond the window back into it: mass below ``lo`` lands at higher losses (pessimistic);
    the mass above ``hi`` — at most the bound — is added to +∞ (its folded copy at low
    losses is extra mass, which can only add to δ). The groups are transformed in batches.
    """
    from scipy import fft as sfft
    h = parts[0][0].h
    ks = np.array([k for _, k in parts], dtype=np.float64)
    starts = np.array([p.start for p, _ in parts], dtype=np.int64)
    sizes = np.array([p.mass.size for p, _ in parts], dtype=np.int64)
    lo, hi, upper_out = _fft_window(parts, ks, starts, sizes, var)
    width = hi - lo + 1
    if width > _MAX_POINTS:
        raise _TooWide(width)
    n = int(sfft.next_fast_len(width, real=True))
    shift = int(np.sum(ks.astype(np.int64) * starts))  # grid index of the all-bottom outcome
    with np.errstate(divide="ignore"):  # a part with all its mass at +∞: nothing kept
        log_keep = float(np.sum(ks * np.log1p(-np.minimum([p.inf for p, _ in parts], 1.0))))
    spec = _fft_spectrum(parts, ks, n)
    res = sfft.irfft(spec, n)
    # position r holds grid index ≡ shift + r (mod n): rotate so position j is index lo + j
    roll = (lo - shift) % n
    res = np.concatenate([res[roll:], res[:roll]])
    # FFT rounding: masses that should be 0 come out as ±noise; the largest negative one
    # measures it. Negative masses are set to 0 (only adds mass); the noise of the others is
    # charged against δ when ε is read (:func:`_epsilon_of`).
    noise = max(-float(res.min()), 4.0 * np.finfo(float).eps * float(res.max()))
    inf = min(-math.expm1(log_keep) + upper_out, 1.0)
    return _Dist.grid(h, lo, np.maximum(res, 0.0), inf, noise), n


def _fft_window(
    parts: Sequence[tuple[_Dist, int]], ks: FloatArray, starts: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64], var: float,
) -> tuple[int, int, float]:
    """The window [lo, hi] (grid indices) of :func:`_compose_fft` and the mass moved to +∞
    for the sum beyond ``hi`` (``_WINDOW_MASS``, or 0 when ``hi`` is the sum's top).

    Chernoff's bound on the whole sum S = Σⱼ (kⱼ copies of Lⱼ): P(S > s) ≤ e^{−ts}
    Πⱼ E[e^{tLⱼ}]^{kⱼ} for every t > 0, minimised over the grid of t ``_CHERNOFF_T`` scaled by
    1/√var; likewise below with −t. ``ks``, ``starts``, ``sizes``: each part's count, first
    grid index and number of grid points.
    """
    h = parts[0][0].h
    # Σⱼ kⱼ ln E[e^{±tLⱼ}] for every t at once, over the concatenated supports
    seg = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    with np.errstate(divide="ignore"):
        logm = np.log(np.concatenate([p.mass for p, _ in parts]))
    loss = np.concatenate([p.losses for p, _ in parts])
    t = _CHERNOFF_T / max(math.sqrt(var), 1e-12)
    log_tau = math.log(_WINDOW_MASS)

    def log_mgf_sum(sign: float) -> FloatArray:
        out = np.empty(t.size)
        for i, ti in enumerate(t):
            v = logm + sign * ti * loss
            m = np.maximum.reduceat(v, seg)
            with np.errstate(invalid="ignore"):
                part = m + np.log(np.add.reduceat(np.exp(v - np.repeat(m, sizes)), seg))
            out[i] = float(np.sum(ks * np.where(np.isfinite(part), part, -np.inf)))
        return out

    full_lo = float(np.sum(ks * starts)) * h
    full_hi = float(np.sum(ks * (starts + sizes - 1))) * h
    # a t whose bound is not finite (no finite mass left on one side, or e^{tL} beyond the
    # floats) bounds nothing: it is skipped; with none left the window is the full support
    with np.errstate(invalid="ignore"):
        ups = (log_mgf_sum(1.0) - log_tau) / t
        dns = (log_tau - log_mgf_sum(-1.0)) / t
    up = min(float(np.min(ups, initial=full_hi, where=np.isfinite(ups))), full_hi)
    dn = max(float(np.max(dns, initial=full_lo, where=np.isfinite(dns))), full_lo)
    upper_out = _WINDOW_MASS if up < full_hi else 0.0
    return math.floor(dn / h) - 1, math.ceil(up / h) + 1, upper_out


def _fft_spectrum(parts: Sequence[tuple[_Dist, int]], ks: FloatArray, n: int) -> npt.NDArray[np.complex128]:
    """Πⱼ rfft(massⱼ, n)^{kⱼ}: the spectrum of the composition on a circle of ``n`` points,
    the groups transformed in blocks of about ``_FFT_BATCH`` values (bounded memory)."""
    from scipy import fft as sfft
    spec = np.ones(n // 2 + 1, dtype=np.complex128)
    chunk = max(1, _FFT_BATCH // n)  # groups transformed together (bounded memory)
    for c0 in range(0, len(parts), chunk):
        block = parts[c0 : c0 + chunk]
        arr = np.zeros((len(block), n))
        for j, (dist, _) in enumerate(block):
            m = dist.mass
            if m.size > n:  # fold (circular), consistent with the circular convolution
                pad = np.zeros(-(-m.size // n) * n)
                pad[: m.size] = m
                arr[j] = pad.reshape(-1, n).sum(axis=0)
            else:
                arr[j, : m.size] = m
        f = sfft.rfft(arr, n, axis=1)
        kb = ks[c0 : c0 + chunk]
        for gi in np.flatnonzero(kb != 1.0):
            f[gi] = _int_power(f[gi], int(kb[gi]))
        spec *= np.prod(f, axis=0)
    return spec


def _int_power(z: npt.NDArray[np.complex128], k: int) -> npt.NDArray[np.complex128]:
    """zᵏ for a whole k ≥ 1 by repeated squaring: ⌊log₂ k⌋ squarings and at most as many
    products, about 3× faster than the complex ``**`` (which goes through exp(k·ln z)) and
    as accurate (relative error about k·eps either way; the composed masses' rounding is
    measured after the inverse FFT and charged against δ, see :func:`_compose_fft`)."""
    result: npt.NDArray[np.complex128] | None = None
    base = z
    while True:
        if k & 1:
            result = base.copy() if result is None else np.multiply(result, base, out=result)
        k >>= 1
        if not k:
            break
        base = base * base
    assert result is not None
    return result


def _epsilon_of(dist: _Dist, delta: float) -> float:
    """Least ε ≥ 0 with δ(ε) = inf + Σ_{Lⱼ > ε} ωⱼ(1 − e^{ε − Lⱼ}) ≤ δ, solved exactly.

    Between consecutive atoms δ(ε) = inf + S₁ − e^ε S₂ (S₁, S₂ the sums of ωⱼ and ωⱼe^{−Lⱼ}
    over the atoms above), so the crossing is ε = ln((inf + S₁ − δ)/S₂). A composed grid's
    floating-point noise (per mass) times the number of positive-loss masses is taken off δ
    first, so rounding of the FFT cannot make ε smaller.
    """
    keep = (dist.mass > 0) & (dist.losses > 0)  # atoms at L ≤ 0 never count for ε ≥ 0
    delta = delta - dist.noise * float(np.count_nonzero(dist.losses > 0))
    if dist.inf > delta or delta <= 0:
        return math.inf
    L, w = dist.losses[keep], dist.mass[keep]
    if L.size == 0:
        return 0.0
    if dist.h > 0:  # a grid: already ascending
        L, w = L[::-1], w[::-1]
    else:
        order = np.argsort(-L, kind="stable")
        L, w = L[order], w[order]
    if float(L[0]) > _MAX_LOSS:
        # e^L overflows past 709.8: δ at those atoms reads as NaN or −∞, never over δ, and an
        # ε among them came out far too small (near 709.8). In logs it is right everywhere;
        # below them the sums that follow are too (those atoms add < e^-700 each to S₂) and
        # give the same numbers as ever, so plans made before keep their hash.
        e_logs = _epsilon_in_logs(L, w, dist.inf, delta)
        if e_logs > _MAX_LOSS - 1.0:
            return e_logs
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        s1 = np.cumsum(w)
        s2 = np.cumsum(w * np.exp(-L))
        # δ at each atom's loss counts the atoms strictly above it; it grows down the list
        d_at = dist.inf + (s1 - w) - np.exp(L) * (s2 - w * np.exp(-L))
    over = np.flatnonzero(d_at > delta)
    if over.size == 0:  # the answer lies below the smallest positive atom
        num, den = dist.inf + float(s1[-1]) - delta, float(s2[-1])
        if den <= 0:  # every S₂ term underflowed: δ(L_last) ≤ δ puts ε at most there
            return float(L[-1]) if num > 0 else 0.0
        return max(math.log(num / den), 0.0) if num > den else 0.0
    j = int(over[0])  # δ(L_j) > δ ≥ δ(L_{j−1}): the answer lies in (L_j, L_{j−1}]
    if j == 0:
        return float(L[0])
    num = dist.inf + float(s1[j - 1]) - delta
    den = float(s2[j - 1])
    e = math.log(num / den) if num > 0 and den > 0 else float(L[j - 1])
    return float(min(max(e, float(L[j])), float(L[j - 1])))


def _epsilon_in_logs(L: FloatArray, w: FloatArray, inf: float, delta: float) -> float:
    """:func:`_epsilon_of`'s solve for losses past e^709 (``L`` descending, ``w`` > 0), with
    S₂ = Σ ωᵢe^{−Lᵢ} kept as its logarithm (``logaddexp.accumulate``): the term e^{Lⱼ}·S₂ of
    δ(Lⱼ) is exp(Lⱼ + ln S₂) ≤ Σ_{i<j} ωᵢ ≤ 1 (Lⱼ ≤ Lᵢ above it), so nothing overflows, and
    the crossing ln(num/S₂) = ln num − ln S₂ divides by nothing.
    """
    s1 = np.cumsum(w)
    log_s2 = np.logaddexp.accumulate(np.log(w) - L)  # ln of S₂ over the atoms up to each one
    above = np.concatenate(([-np.inf], log_s2[:-1]))  # … strictly above each one
    d_at = inf + (s1 - w) - np.exp(L + above)
    over = np.flatnonzero(d_at > delta)
    if over.size == 0:  # below the smallest positive atom, whose δ is already ≤ δ
        num = inf + float(s1[-1]) - delta
        e = math.log(num) - float(log_s2[-1]) if num > 0 else 0.0
        return float(min(max(e, 0.0), float(L[-1])))
    j = int(over[0])
    if j == 0:
        return float(L[0])
    num = inf + float(s1[j - 1]) - delta
    e = math.log(num) - float(log_s2[j - 1]) if num > 0 else float(L[j - 1])
    return float(min(max(e, float(L[j])), float(L[j - 1])))


def _delta_of(dist: _Dist, epsilon: float) -> float:
    above = dist.losses > epsilon
    return float(dist.inf + np.sum(dist.mass[above] * -np.expm1(epsilon - dist.losses[above])))


# --------------------------------------------------------------------------------------
# The exact path: two-point pairs compose as binomials
# --------------------------------------------------------------------------------------


def _exact(groups: Sequence[tuple[_Pair, int]], add: bool) -> _Dist | None:
    """The exact composed distribution when every group has two finite atoms and the number
    of composed atoms is at most ``_MAX_EXACT_ATOMS``: k copies of atoms (l₁, l₂) with
    masses (p₁, p₂) give losses j·l₁ + (k − j)·l₂ with masses C(k, j)p₁ʲp₂^{k−j}."""
    from planner.core import special
    total = 1
    per: list[tuple[FloatArray, FloatArray]] = []
    for pair, k in groups:
        at = pair.atoms(add)
        if at is None:
            return None
        total *= k + 1
        if total > _MAX_EXACT_ATOMS:
            return None
        per.append(at)
    losses = np.zeros(1)
    logp = np.zeros(1)
    log_keep = 0.0
    for (pair, k), (la, pa) in zip(groups, per, strict=True):
        j = np.arange(k + 1, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = (special.gammaln(k + 1.0) - special.gammaln(j + 1.0) - special.gammaln(k - j + 1.0)
                  + special.xlogy(j, pa[0]) + special.xlogy(k - j, pa[1]))
        losses = (losses[:, None] + (j * la[0] + (k - j) * la[1])[None, :]).ravel()
        logp = (logp[:, None] + lp[None, :]).ravel()
        log_keep += k * math.log1p(-pair.inf_mass(add))
    return _Dist(losses, np.exp(logp), -math.expm1(log_keep))


@dataclass(frozen=True)
class PldResult:
    """The optimal accountant's answer for one composition at one δ.

    Attributes
    ----------
    epsilon
        The least ε the composed (pessimistic) distribution certifies at δ: never below the
        exact ε of the composition (up to floating-point rounding, see ``fp_error``).
    delta
        The δ asked for.
    method
        "pure" (δ = 0: the sum of the pure ε), "exact" (binomial / one Gaussian: no
        discretisation), "fft", or "fft + rdp" (events certified only through zCDP composed
        by Rényi DP and added by basic composition, δ split optimally), or "rdp".
    grid
        The grid step h of the losses (0 when exact).
    points
        The FFT length (0 when exact).
    error
        An estimate of how far ``epsilon`` may sit above the exact ε: ε(2h) − ε(h), the
        difference of two valid upper bounds on grids h and 2h (the discretisation error is
        second order in h, so the error at h is about a third of it). 0 when exact; None when
        not asked for (``with_error=False``).
    """

    epsilon: float
    delta: float
    method: str
    grid: float = 0.0
    points: int = 0
    error: float | None = 0.0

    @property
    def lower(self) -> float | None:
        """ε minus the error estimate (an estimate of the smallest the exact ε can be)."""
        return None if self.error is None else max(self.epsilon - self.error, 0.0)

    def to_dict(self) -> dict[str, float | int | str | None]:
        return {"epsilon": self.epsilon, "delta": self.delta, "method": self.method, "grid": self.grid,
                "points": self.points, "error": self.error}


@dataclass(frozen=True)
class _Plan:
    """The composed distributions of the directions needed (empty: one exact Gaussian)."""

    directions: tuple[_Dist, ...]
    method: str
    grid: float
    points: int


@functools.lru_cache(maxsize=1024)
def _profile(pair: _Pair, add: bool) -> tuple[float, float, float]:
    """(lo, hi, variance) of one event's loss in one direction: the range beyond which at
    most ``_TAIL_MASS`` lies on each side (moved to +∞ above, lumped at lo below), and the
    variance of the finite part (closed form for Gaussian and two-point pairs, else from a
    coarse discretisation; it only sizes the grid)."""
    lo = _search_lower(pair, add, _TAIL_MASS)
    hi = _search_upper(pair, add, _TAIL_MASS)
    if isinstance(pair, _Gaussian):
        return lo, hi, pair.mu**2  # L ~ N(μ²/2, μ²) under P
    if isinstance(pair, _TwoPoint):
        return lo, hi, 4.0 * pair.eps0**2 * pair.p * (1.0 - pair.p)
    h0 = max((hi - lo) / _COARSE_POINTS, 1e-12)
    return lo, hi, _moments(connect_dots(pair, add, h0, lo, hi))[1]


@functools.lru_cache(maxsize=256)
def _one_step(pair: _Pair, add: bool, h: float) -> _Dist:
    """One event's grid distribution at step h (cached: the inverse problems of the training
    planner compose the same step many times)."""
    lo, hi, _ = _profile(pair, add)
    dist = connect_dots(pair, add, h, lo, hi)
    dist.mass.setflags(write=False)
    dist.losses.setflags(write=False)
    return dist


def _aligned(groups: Sequence[tuple[_Pair, int]], h: float) -> float:
    """Shrink h so that the largest loss of the bounded group with the largest k·L_max is a
    grid point: its extreme atoms (Laplace's ±ε₀, randomized response's ±ε₀) then sit on
    the grid, where connect-the-dots keeps them exactly; off-grid, an atom is spread over
    the two neighbouring points, which matters when δ is small enough for ε to sit among
    the composition's largest losses (a few events). Not when that loss is below h: the
    step would shrink by h/top, without bound."""
    best = 0.0
    top = 0.0
    for pair, k in groups:
        hi = max(pair.loss_range(False)[1], pair.loss_range(True)[1])
        if math.isfinite(hi) and hi > 0 and k * hi > best:
            best, top = k * hi, hi
    if top < h:  # its atoms share a cell already; a step of top would multiply every grid's
        return h  # points by h/top (a Laplace of ε₀ = 1e-7 beside a Gaussian asked for 15 GB)
    return top / math.ceil(top / h - 1e-9)


@functools.lru_cache(maxsize=64)
def _plan(groups: tuple[tuple[_Pair, int], ...], tol: float) -> _Plan:
    """Compose ``groups`` (both directions when one is asymmetric) at accuracy ``tol``.

    The grid step h makes the variance the discretisation adds, about Σk·h²/4 (each event's
    mass spreads over at most one cell), ``tol`` of the composed variance V.
    """
    add_dirs = (False, True) if any(not p.symmetric for p, _ in groups) else (False,)
    if len(groups) == 1 and isinstance(groups[0][0], _Gaussian) and groups[0][1] == 1:
        return _Plan((), "exact", 0.0, 0)
    exact = [_exact(groups, add) for add in add_dirs]
    if all(x is not None for x in exact):
        return _Plan(tuple(x for x in exact if x is not None), "exact", 0.0, 0)
    profiles = [[_profile(p, add) for add in add_dirs] for p, _ in groups]
    var = sum(k * max(v for _, _, v in prof) for (_, k), prof in zip(groups, profiles, strict=True))
    count = float(sum(k for _, k in groups))
    # no event's own grid beyond _MAX_POINTS: a finite part of variance ~0 (an event whose
    # finite mass all sits at one loss, e.g. a Laplace pair with ε₀ far past _MAX_LOSS)
    # would otherwise ask for a step of 1e-152
    span = max(hi - lo for prof in profiles for lo, hi, _ in prof)
    h = _aligned(groups, max(math.sqrt(4.0 * tol * max(var, 1e-300) / count), span / _MAX_POINTS))
    while True:
        try:
            out: list[_Dist] = []
            points = 0
            for add in add_dirs:
                v_dir = sum(k * _profile(p, add)[2] for p, k in groups)
                dist, n = _compose_fft([(_one_step(p, add, h), k) for p, k in groups], v_dir)
                out.append(dist)
                points = max(points, n)
            return _Plan(tuple(out), "fft", h, points)
        except _TooWide as exc:  # a coarser grid: still a valid upper bound, less tight
            h *= 1.05 * exc.width / _MAX_POINTS


def _plan_epsilon(plan: _Plan, groups: tuple[tuple[_Pair, int], ...], delta: float) -> float:
    if not plan.directions:
        return float(dv.analytic_gaussian_epsilon(delta, cast(_Gaussian, groups[0][0]).mu)[()])
    return max(_epsilon_of(d, delta) for d in plan.directions)


def _plan_delta(plan: _Plan, groups: tuple[tuple[_Pair, int], ...], epsilon: float) -> float:
    if not plan.directions:
        return float(dv.analytic_gaussian_delta(epsilon, cast(_Gaussian, groups[0][0]).mu)[()])
    return max(_delta_of(d, epsilon) for d in plan.directions)


def pld_epsilon(events: Sequence[PrivacyEvent], delta: float, *, with_error: bool = False) -> PldResult:
    """The optimal accountant's ε of ``events`` at total δ (a :class:`PldResult`).

    Parameters
    ----------
    events
        Privacy events (composed and self-composed ones are unpacked; sampled ones carry
        their amplification).
    delta
        Total δ ∈ [0, 1).
    with_error
        Also compute the discretisation error estimate (one more composition on a grid
        twice as coarse).

    Notes
    -----
    δ = 0: the sum of the events' pure ε (exact for pure DP: the largest loss of a
    composition of worst-case pairs is the sum of theirs), inf if one is not pure.
    Otherwise the events with a dominating pair are composed as described in the module
    docstring. Events certified only through zCDP (OpenDP's discrete Gaussian, ρ-zCDP) are
    composed by Rényi DP at δ₂ and the two parts added by basic composition [DR14, Thm
    3.16]: ε = min over δ₁ + δ₂ = δ of ε_PLD(δ₁) + ε_RDP(δ₂) (a grid of 64 splits); the
    result is also never above the RDP accountant's value for all the events together.

    Examples
    --------
    Ten randomized responses at ε = 0.05 (keep probability e^0.05/(1 + e^0.05)) compose
    exactly: at δ = 0 their cost is 10 · 0.05.

    >>> from planner.privacy.events import RandomizedResponseEvent
    >>> p = 1 / (1 + math.exp(-0.05))
    >>> r = pld_epsilon([RandomizedResponseEvent(p)] * 10, 0.0)
    >>> round(r.epsilon, 12), r.method
    (0.5, 'pure')
    >>> pld_epsilon([RandomizedResponseEvent(p)] * 10, 1e-3).method
    'exact'
    """
    d = check_delta(delta)
    evs = list(events)
    if not evs:
        return PldResult(0.0, d, "exact")
    return _Composition().add(evs).result(d, with_error)


@dataclass(frozen=True)
class _Composition:
    """What the optimal accountant keeps of a composition, so that adding a release costs
    its events only: the grouping by dominating pair (twice: the second with exponential
    mechanisms set aside for their ε²/8-zCDP bound), the exact Σ of the events' pure ε,
    and the RDP accountant's summary (the PLD value is never above RDP's).

    The grid the composed distribution is read on depends on the whole composition (its
    step h is sized by the composed variance and aligned to the largest atom), so the
    distribution is not convolved onto a kept one: reading ε composes the *groups* of
    identical pairs by FFT (k identical events cost one transform and a k-th power, so
    a history that repeats its releases costs no more than one), and the composed plan of
    a set of groups is cached (:func:`_plan`). The answer is exactly that of composing every
    event at once.
    """

    plain: _Grouping = field(default_factory=_Grouping)
    renyi: _Grouping = field(default_factory=lambda: _Grouping(renyi_exponential=True))
    pure: ExactSum = EMPTY_SUM
    rdp: RdpParts = field(default_factory=RdpParts)
    size: int = 0

    def add(self, events: Sequence[PrivacyEvent]) -> _Composition:
        plain = self.plain.add(events)
        _check_split(plain.split())
        return _Composition(plain, self.renyi.add(events), self.pure.add(pure_epsilon(e) for e in events),
                            self.rdp.add(events), self.size + len(events))

    def result(self, d: float, with_error: bool = False) -> PldResult:
        """:func:`pld_epsilon` of the composition at a checked δ."""
        if self.size == 0:
            return PldResult(0.0, d, "exact")
        if d == 0.0:
            return PldResult(self.pure.value, d, "pure")
        # Exponential mechanisms compose better by their ε²/8-zCDP bound when they are many and
        # small (the per-event bounded-range envelope is loose under composition): both ways
        # are valid bounds, and the smaller is kept.
        first = self.plain.split()
        splits = [first]
        if any(isinstance(p, _BoundedRange) for p, _ in first.groups):
            splits.append(self.renyi.split())
        return min((_split_epsilon(sp, d, with_error) for sp in splits), key=lambda r: r.epsilon)


def _split_epsilon(sp: _Split, d: float, with_error: bool) -> PldResult:
    if not sp.groups:
        return PldResult(rdp_epsilon(list(sp.rdp_events), d)[0], d, "rdp", error=None)
    groups = list(sp.groups)
    if sp.rdp_events:
        groups.append((_RenyiEnvelope.of(sp.rdp_events, sp.rdp_rho), 1))
    canon = _canonical(tuple(groups))
    plan = _plan(canon, _TOL)
    method = plan.method if not sp.rdp_events else "fft, with a Rényi envelope for the zCDP-certified part"
    eps = round_up(_plan_epsilon(plan, canon, d))
    err: float | None = 0.0 if plan.method == "exact" else None
    if with_error and plan.method != "exact":
        coarse = _plan(canon, _TOL * 4.0)
        err = max(round_up(_plan_epsilon(coarse, canon, d)) - eps, 0.0)
    return PldResult(eps, d, method, plan.grid, plan.points, err)


def pld_delta(events: Sequence[PrivacyEvent], epsilon: float) -> float:
    """The least δ the composed (pessimistic) distribution certifies at ε: an upper bound on
    the exact δ(ε) of ``events`` (events without a dominating pair are refused).

    Examples
    --------
    k identical ε₀-DP mechanisms: at ε = (k − 2i)ε₀ the exact δ is Kairouz, Oh &
    Viswanath's Σ_{l<i} C(k,l)(e^{(k−l)ε₀} − e^{(k−2i+l)ε₀})/(1 + e^{ε₀})^k; with k = 2,
    i = 1, ε₀ = 1: (e² − 1)/(1 + e)² (by hand):

    >>> from planner.privacy.events import PureEvent
    >>> round(pld_delta([PureEvent(1.0)] * 2, 0.0), 12) == round((math.e**2 - 1) / (1 + math.e) ** 2, 12)
    True
    """
    if not math.isfinite(epsilon) or epsilon < 0:
        raise BudgetError(f"epsilon must be ≥ 0 and finite; got {epsilon}.")
    evs = list(events)
    if not evs:
        return 0.0
    check_relations(evs)
    sp = _split(evs)
    if sp.rdp_events:
        raise BudgetError(
            "δ(ε) needs a dominating pair for every event; OpenDP's discrete Gaussian and zCDP "
            "events are certified through ρ only. Ask for ε at a δ instead."
        )
    groups = _canonical(sp.groups)
    return float(min(1.0, _plan_delta(_plan(groups, _TOL), groups, float(epsilon)) * (1.0 + ROUND_UP)))


def _canonical(groups: tuple[tuple[_Pair, int], ...]) -> tuple[tuple[_Pair, int], ...]:
    """Groups in a canonical order (so equal compositions share the cache)."""
    return tuple(sorted(groups, key=lambda g: repr(g)))


@dataclass(frozen=True, eq=False)
class PldAccountant(Accountant):
    """The optimal accountant: privacy loss distributions composed by FFT (:func:`pld_epsilon`).

    Its ε is the least of its valid bounds: the PLD value and the RDP accountant's (which
    also holds the pure bound at order ∞), so the rule is never looser than RDP. When the
    PLD value is exact (method "exact": two-point pairs, one Gaussian) RDP is not computed:
    no valid bound is below the exact ε. Its summary is a :class:`_Composition`.

    Examples
    --------
    >>> from planner.privacy.events import LaplaceEvent
    >>> round(PldAccountant().compose([LaplaceEvent(1.0)]).epsilon(0.0), 12)  # pure: exactly ε
    1.0
    """

    rule: ClassVar[CompositionRule] = CompositionRule.PLD
    composition: _Composition = field(default_factory=_Composition, repr=False)

    def supports(self, event: PrivacyEvent, assigned: tuple[float, float] | None = None) -> bool:
        return True  # events without a dominating pair go through the RDP part

    def _grow(self, events: tuple[PrivacyEvent, ...], assigned: tuple[tuple[float, float] | None, ...],
              ) -> dict[str, Any]:
        return {"composition": self.composition.add(events)}

    def _epsilon(self, delta: float) -> float:
        if not len(self):
            return 0.0
        d = self.event_delta(delta)
        res = self.composition.result(d)
        if d == 0.0 or (res.method == "exact" and math.isfinite(res.epsilon)):
            return res.epsilon  # the exact ε: no valid bound (RDP's) is below it
        # an exact ε of ∞ (δ below the mass at +∞) leaves RDP's bound, which may be finite
        return min(res.epsilon, rdp_parts_epsilon(self.composition.rdp, d)[0])



RULE: Final = Rule(
    name=CompositionRule.PLD,
    accountant=PldAccountant,
    short="PLD",
    full="the optimal accountant: privacy loss distributions (PLD)",
    gist="optimal: privacy loss distributions",
    explanation=("The distribution of the privacy loss of all the answers together is computed "
                 "numerically, rounded toward more loss, so it is never looser than any other rule here."),
    source=("Antti Koskela, Joonas Jälkö and Antti Honkela, *Computing tight differential privacy "
            "guarantees using FFT*, AISTATS 2020; Vadym Doroshenko et al., *Connect the dots: tighter "
            "discrete approximations of privacy loss distributions*, PETS 2022"),
    surrogate=CompositionRule.RDP,
)

__all__ = ["PldAccountant", "PldResult", "check_relations", "event_pair", "pld_delta", "pld_epsilon"]
