"""Engine functions behind the stakeholder demos ("Learn" pages), one group per demo.

Every function here is a thin, vectorised composition of the engine's own mechanism,
bound and accounting functions, so that a demo shows exactly the formulas the planner uses.

.. warning::
   The numpy noise drawn here is for DEMONSTRATION and PLANNING simulations only: it is
   never a released value, it is drawn on synthetic data or on the public sample data, and
   it goes through no floating-point-safe sampler (MATH.md §9). Releases go through
   ``planner.release`` only. Every simulation takes an explicit ``numpy.random.Generator``
   so a demo is reproducible from its seed.

Demos and their seeds (``/work/shared/seeds``):

1. randomized response — seed 000's doping survey (coin design), seed 003's coin game;
2. what an attacker can learn — seeds 000/004 (differencing attack), seed 001
   (hypothesis-testing reading of DP);
3. the Laplace count — seed 004, figure 3;
4. averaging done right — seed 004, figure 4 (examples 3 and 4);
5. binary majority, exponential mechanism and ISM — seed 000;
6. releasing a distribution — seed 001's Beta(10, 10) simulation (Figure 1);
7. the cost of asking many questions — seed 002 (composition, RDP).

References
----------
.. [W65] S. L. Warner, "Randomized Response", JASA 60(309), 1965.
.. [DMNS06] Dwork, McSherry, Nissim & Smith, "Calibrating Noise to Sensitivity", TCC 2006.
.. [WZ10] L. Wasserman, S. Zhou, "A Statistical Framework for Differential Privacy",
   JASA 105(489), 2010, arXiv:0811.2501 (seed 001: the hypothesis-testing bound γe^α and
   the Beta(10, 10) simulation).
.. [KOV15] P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential
   Privacy", ICML 2015, arXiv:1311.0776, Thm 2.1 (the full (ε, δ) testing region).
.. [DRV10] C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and Differential Privacy",
   FOCS 2010, Thm III.3 (advanced composition, seed 002).
.. [M17] I. Mironov, "Rényi Differential Privacy", CSF 2017, arXiv:1702.07476.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms import histogram as hist
from planner.planning.mechanisms import ism
from planner.planning.mechanisms import randomized_response as rr
from planner.planning.mechanisms.base import FloatArray, Sensitivity
from planner.planning.mechanisms.laplace import LAPLACE

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.privacy import accounting
from planner.privacy.events import LaplaceEvent, SelfComposedEvent

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_COUNT: Final = Sensitivity(1.0, 1.0)
#: Relative allowance for computing k equal RDP terms as one product rather than the
#: engine's k-term sum: generous (measured differences are ~1e-12), so that the result


# ======================================================================================
# 1. Randomized response (seeds 000 and 003)
# ======================================================================================


class SurveyDesign(StrEnum):
    """The two randomized-response designs of the seeds."""

    COIN = "coin"  # seed 000: truth with probability a, else a fair coin (a = 1/2: ε = ln 3)
    KEEP = "keep"  # seed 003: the truth with probability p, else the opposite


def design_keep_probability(design: SurveyDesign | str, parameter: float) -> float:
    """Keep-probability p of a design: coin with truth-probability a → (1 + a)/2; keep-p → p.

    Examples
    --------
    >>> design_keep_probability("coin", 0.5)  # seed 000: P[Y=1|X=x] = 1/4 + x/2
    0.75
    >>> design_keep_probability("keep", 0.75)  # seed 003's two coins: both heads w.p. 1/4
    0.75
    """
    d = SurveyDesign(design)
    if d is SurveyDesign.COIN:
        return rr.coin_design_keep_probability(parameter)
    rr.epsilon_for(parameter)  # validates p ∈ (1/2, 1)
    return float(parameter)


@dataclass(frozen=True, slots=True)
class SurveySimulation:
    """One simulated randomized-response survey (demo only: nothing is released)."""

    true_rate: float
    n: int
    keep: float
    epsilon: float
    truth: IntArray
    reports: IntArray
    sample_rate: float  # share of 1s among the n simulated true answers
    report_rate: float  # ȳ, share of "yes" reports
    estimate: float  # unbiased π̂ = (ȳ − (1 − p))/(2p − 1), NOT the seed's 2ȳ − 1
    lower: float
    upper: float
    level: float
    rr_sd: float  # √Var π̂ at the true rate (Warner's formula)
    direct_sd: float  # √(π(1 − π)/n): asking directly
    data_cost: float  # (2p − 1)⁻²


def simulate_survey(
    true_rate: float, n: int, keep: float, rng: np.random.Generator, beta: float = 0.05
) -> SurveySimulation:
    """Simulate n respondents with true rate π answering by randomized response.

    Parameters
    ----------
    true_rate : π ∈ [0, 1], each respondent's answer is Bernoulli(π).
    n : number of respondents.
    keep : keep-probability p ∈ (1/2, 1) (see :func:`design_keep_probability`).
    rng : the generator (demo draws only).
    beta : 1 − confidence level of the interval.

    Notes
    -----
    Estimate and interval are :func:`planner.planning.mechanisms.randomized_response.estimate` and
    ``confidence_interval`` (unbiased: 2ȳ − 1/2 for seed 000's design; the seed's 2ȳ − 1
    is biased, MATH.md §3). The data cost is (2p − 1)⁻² (4 at ε = ln 3, seed 000).

    Examples
    --------
    >>> s = simulate_survey(0.2, 1000, 0.75, np.random.default_rng(0))
    >>> round(s.epsilon, 6), s.data_cost  # ln 3 and seed 000's "≈ 4× more data"
    (1.098612, 4.0)
    """
    pi = float(true_rate)
    if not (0.0 <= pi <= 1.0):
        raise QueryError(f"true_rate must be in [0, 1]; got {pi}. Give a proportion.")
    nn = v.count(n, "n")
    p = float(design_keep_probability(SurveyDesign.KEEP, keep))
    truth = (rng.random(nn) < pi).astype(np.int64)
    reports = rr.simulate_reports(truth, p, rng)
    y = float(reports.mean())
    ci = rr.confidence_interval(y, nn, p, beta)
    eps = float(rr.epsilon_for(p))
    return SurveySimulation(
        true_rate=pi,
        n=nn,
        keep=p,
        epsilon=eps,
        truth=truth,
        reports=reports,
        sample_rate=float(truth.mean()),
        report_rate=y,
        estimate=ci.estimate,
        lower=ci.lower,
        upper=ci.upper,
        level=ci.level,
        rr_sd=float(np.sqrt(rr.variance(pi, nn, p))),
        direct_sd=math.sqrt(pi * (1.0 - pi) / nn),
        data_cost=float(np.round(rr.data_cost_factor(eps), 12)),
    )


def repeated_surveys(
    true_rate: float, n: int, keep: float, size: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """``size`` repetitions of the survey: (RR estimates π̂, direct-question estimates).

    Both from i.i.d. Bernoulli(π) respondents; the RR ones via
    :func:`planner.planning.mechanisms.randomized_response.simulate_estimates`.
    """
    pi = float(true_rate)
    if not (0.0 <= pi <= 1.0):
        raise QueryError(f"true_rate must be in [0, 1]; got {pi}. Give a proportion.")
    nn, ss = v.count(n, "n"), v.count(size, "size")
    est = rr.simulate_estimates(pi, nn, keep, ss, rng)
    direct = np.asarray(rng.binomial(nn, pi, size=ss) / nn, dtype=np.float64)
    return est, direct


# ======================================================================================
# 2. What an attacker can learn (seeds 000/004: differencing; seed 001: testing)
# ======================================================================================


def difference_density(z: npt.ArrayLike, scale: float) -> FloatArray:
    """Density of L₁ − L₂, L₁, L₂ i.i.d. Laplace(b): (1/(4b))(1 + |z|/b)e^{−|z|/b}.

    Examples
    --------
    >>> float(difference_density(0.0, 1.0)[()])  # 1/4 at 0 (hand: ∫ (1/4)e^{−2|u|} du = 1/4)
    0.25
    """
    b = float(v.positive(scale, "scale"))
    a = np.abs(np.asarray(z, dtype=np.float64)) / b
    return np.asarray((1.0 + a) * np.exp(-a) / (4.0 * b), dtype=np.float64)


def difference_likelihood_ratio(d: npt.ArrayLike, scale: float) -> FloatArray:
    """Likelihood ratio P(d | X = 1)/P(d | X = 0) of the difference d of the two noisy answers.

    d = (count + x + L₁) − (count + L₂) = x + L₁ − L₂, so the ratio is f(d − 1)/f(d) with f
    the density of :func:`difference_density`; it lies in (e^{−1/b}, e^{1/b}) = (e^{−ε}, e^ε)
    for a count (Δ = 1) answered at ε with b = 1/ε.

    Examples
    --------
    >>> round(float(difference_likelihood_ratio(0.5, 1.0)[()]), 12)  # symmetric point: ratio 1
    1.0
    """
    b = float(v.positive(scale, "scale"))
    dd = np.asarray(d, dtype=np.float64)
    a1, a0 = np.abs(dd - 1.0) / b, np.abs(dd) / b
    return np.asarray(np.exp(a0 - a1) * (1.0 + a1) / (1.0 + a0), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class DifferencingAttack:
    """The differencing (tracker) attack, exact and under the Laplace mechanism.

    ``exact_*`` and ``revealed`` are computed from the rows: DATA-DEPENDENT (a demo on the
    public synthetic sample; never show them for a real table).
    """

    n: int
    exact_total: int  # "how many smoke?"
    exact_without: int  # "how many smoke, not counting X?"
    revealed: int  # exact_total − exact_without = X's value
    epsilon: float  # per query
    scale: float  # Laplace scale b = 1/ε of each count
    noisy_total: FloatArray
    noisy_without: FloatArray
    likelihood_ratio: FloatArray  # P(answers | X smokes)/P(answers | X does not)
    prior: float
    posterior: FloatArray  # attacker's P(X smokes | answers)
    bound: float  # e^ε: posterior odds ≤ e^ε × prior odds
    total_epsilon: float  # both queries, basic composition (2ε)
    data_dependent: bool = True


def differencing_attack(
    values: npt.ArrayLike,
    target: int,
    epsilon: float,
    prior: float,
    size: int,
    rng: np.random.Generator,
) -> DifferencingAttack:
    """Ask "how many have the attribute?" and "... not counting X?", exactly and with noise.

    Parameters
    ----------
    values : 0/1 (or boolean) attribute of every record (e.g. ``smoker``).
    target : index of the attacker's target X.
    epsilon : ε of each count (Laplace, Δ = 1 under add/remove; 2ε for both, basic).
    prior : the attacker's prior P(X has the attribute), in (0, 1).
    size : number of repetitions of the pair of noisy queries.

    Notes
    -----
    Exact answers reveal x = total − without (seed 004's tracker attack; seed 000). With
    Laplace noise, the attacker's best evidence about x is the likelihood ratio of the
    noisy answers; only the first depends on x, and the second only helps cancel the rest,
    so the ratio is that of d = y₁ − y₂ (:func:`difference_likelihood_ratio`), never more
    than e^ε: posterior odds ≤ e^ε·prior odds (DMNS06; seed 002, "robustness to side
    knowledge").
    """
    x = np.asarray(values)
    if x.ndim != 1 or x.size < 2:
        raise QueryError("values must be a 1-D column with at least two records.")
    if np.any((x != 0) & (x != 1)):
        raise QueryError("values must contain only 0/1 (or boolean) values.")
    xi = x.astype(np.int64)
    t = int(target)
    if not (0 <= t < xi.size):
        raise QueryError(f"target must be a record index in [0, {xi.size - 1}]; got {t}.")
    pr = float(prior)
    if not (0.0 < pr < 1.0):
        raise QueryError(f"prior must be in (0, 1); got {pr}. Use e.g. the public base rate.")
    eps = float(v.epsilons(epsilon))
    total = int(xi.sum())
    without = total - int(xi[t])
    b = float(LAPLACE.scale_for(eps, _COUNT))
    y1 = LAPLACE.simulate(float(total), b, v.count(size, "size"), rng)
    y2 = LAPLACE.simulate(float(without), b, v.count(size, "size"), rng)
    lr = difference_likelihood_ratio(y1 - y2, b)
    odds = pr / (1.0 - pr) * lr
    return DifferencingAttack(
        n=int(xi.size),
        exact_total=total,
        exact_without=without,
        revealed=total - without,
        epsilon=eps,
        scale=b,
        noisy_total=y1,
        noisy_without=y2,
        likelihood_ratio=lr,
        prior=pr,
        posterior=np.asarray(odds / (1.0 + odds), dtype=np.float64),
        bound=math.exp(eps),
        total_epsilon=accounting.compose_basic([eps, eps])[0],
    )


def posterior_bounds(prior: npt.ArrayLike, epsilon: float) -> tuple[FloatArray, FloatArray]:
    """Range of an attacker's posterior after one ε-DP answer: odds × e^{±ε}.

    Examples
    --------
    >>> lo, hi = posterior_bounds(0.5, math.log(3.0))
    >>> round(float(lo[()]), 6), round(float(hi[()]), 6)  # 1/(1+3) and 3/(3+1)
    (0.25, 0.75)
    """
    p = np.asarray(prior, dtype=np.float64)
    if np.any((p <= 0.0) | (p >= 1.0)):
        raise QueryError("prior must be in (0, 1).")
    e = float(v.epsilons(epsilon))
    odds = p / (1.0 - p)
    return (
        np.asarray(odds * math.exp(-e) / (1.0 + odds * math.exp(-e)), dtype=np.float64),
        np.asarray(odds * math.exp(e) / (1.0 + odds * math.exp(e)), dtype=np.float64),
    )


def membership_power_bound(
    gamma: npt.ArrayLike, epsilon: float, delta: float = 0.0, tight: bool = False
) -> FloatArray:
    """Largest power of a level-γ test of "X is in the data" against an (ε, δ)-DP release.

    ``tight=False``: seed 001's bound min(1, γe^ε + δ) [WZ10]. ``tight=True``: the full
    region min(1, γe^ε + δ, 1 − e^{−ε}(1 − γ − δ)) [KOV15, Thm 2.1] (it also bounds the
    type-II error).

    Examples
    --------
    >>> round(float(membership_power_bound(0.05, math.log(2.0))[()]), 12)  # 0.05·2
    0.1
    """
    g = np.asarray(gamma, dtype=np.float64)
    if np.any((g < 0.0) | (g > 1.0)):
        raise QueryError("gamma (the test's level) must be in [0, 1].")
    e = float(v.epsilons(epsilon))
    d = float(delta)
    if not (0.0 <= d < 1.0):
        raise QueryError(f"delta must be in [0, 1); got {d}.")
    out = np.minimum(1.0, g * math.exp(e) + d)
    if tight:
        out = np.minimum(out, 1.0 - math.exp(-e) * (1.0 - g - d))
    return np.asarray(np.maximum(out, g), dtype=np.float64)


def laplace_count_power(gamma: npt.ArrayLike, epsilon: float) -> FloatArray:
    """Power of the best level-γ test of "X is in the data" from one Laplace count (Δ = 1).

    H₀: Y = c + L, H₁: Y = c + 1 + L, L ~ Laplace(1/ε). The likelihood ratio is monotone in
    y, so the Neyman–Pearson test rejects for Y > t with S(t − c) = γ (S the Laplace
    survival function) and has power S(S⁻¹(γ) − 1). It equals γe^ε exactly for
    γ ≤ e^{−ε}/2: the Laplace mechanism meets seed 001's bound.

    Examples
    --------
    >>> round(float(laplace_count_power(0.01, 1.0)[()]), 12) == round(0.01 * math.e, 12)
    True
    """
    g = np.asarray(gamma, dtype=np.float64)
    if np.any((g < 0.0) | (g > 1.0)):
        raise QueryError("gamma (the test's level) must be in [0, 1].")
    b = 1.0 / float(v.epsilons(epsilon))
    with np.errstate(divide="ignore"):
        z = np.where(g <= 0.5, -b * np.log(2.0 * g), b * np.log(2.0 * (1.0 - g)))  # S⁻¹(γ)
    zz = z - 1.0
    power = np.where(zz >= 0, 0.5 * np.exp(-zz / b), 1.0 - 0.5 * np.exp(zz / b))
    return np.asarray(np.clip(power, 0.0, 1.0), dtype=np.float64)


# ======================================================================================
# 3. The Laplace count (seed 004, figure 3)
# ======================================================================================

#: Seed 004's true counts in figure 3.
SEED_004_COUNTS: Final = (1000, 100)
#: ε for figure 3. The seed does not print its three values; its caption (at count 1000
#: almost always within ±10 %, at count 100 regularly outside) needs 1 − e^{−100ε} ≈ 1 and
#: 1 − e^{−10ε} well below 1 for all three, i.e. roughly 0.05 ≤ ε ≤ 0.25.
SEED_004_EPSILONS: Final = (0.05, 0.1, 0.2)


def within_share(
    count: npt.ArrayLike, epsilon: npt.ArrayLike, tolerance: float = 0.1, sensitivity: float = 1.0
) -> FloatArray:
    """P(|noisy count − count| ≤ tolerance·count) = 1 − e^{−tolerance·count·ε/Δ} (broadcast).

    From the Laplace tail P(|L| > t) = e^{−t/b}, b = Δ/ε (MATH.md §3).

    Examples
    --------
    >>> round(float(within_share(100, 0.1)[()]), 6)  # 1 − e^{−1}
    0.632121
    """
    c = np.asarray(count, dtype=np.float64)
    if np.any(c < 0):
        raise QueryError("count must be ≥ 0.")
    tol = float(v.positive(tolerance, "tolerance"))
    b = LAPLACE.scale_for(epsilon, Sensitivity(float(sensitivity), float(sensitivity)))
    return np.asarray(-np.expm1(-tol * c / b), dtype=np.float64)


def laplace_density(x: npt.ArrayLike, center: float, scale: float) -> FloatArray:
    """Density (1/2b)e^{−|x − center|/b} of the noisy answer."""
    b = float(v.positive(scale, "scale"))
    xx = np.asarray(x, dtype=np.float64)
    return np.asarray(np.exp(-np.abs(xx - center) / b) / (2.0 * b), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class LaplaceCountDemo:
    """Noisy counts for every (count, ε) pair, with the share within ±tolerance."""

    counts: FloatArray
    epsilons: FloatArray
    scales: FloatArray  # b = 1/ε
    draws: FloatArray  # shape (len(counts), len(epsilons), size)
    exact_share: FloatArray  # shape (len(counts), len(epsilons))
    simulated_share: FloatArray
    tolerance: float


def laplace_count_demo(
    counts: Sequence[float],
    epsilons: Sequence[float],
    size: int,
    rng: np.random.Generator,
    tolerance: float = 0.1,
) -> LaplaceCountDemo:
    """``size`` noisy answers to each true count at each ε (Δ = 1), and the share within ±10 %."""
    c = np.asarray(counts, dtype=np.float64).reshape(-1)
    e = v.epsilons(np.asarray(epsilons, dtype=np.float64).reshape(-1))
    b = LAPLACE.scale_for(e, _COUNT)
    ss = v.count(size, "size")
    draws = np.stack([
        np.stack([LAPLACE.simulate(ci, float(bj), ss, rng) for bj in b]) for ci in c
    ])
    tol = float(v.positive(tolerance, "tolerance"))
    inside = np.abs(draws - c[:, None, None]) <= tol * c[:, None, None]
    return LaplaceCountDemo(
        counts=c,
        epsilons=e,
        scales=b,
        draws=np.asarray(draws, dtype=np.float64),
        exact_share=within_share(c[:, None], e[None, :], tol),
        simulated_share=np.asarray(inside.mean(axis=-1), dtype=np.float64),
        tolerance=tol,
    )


# ======================================================================================
# 4. Averaging done right (seed 004, figure 4)
# ======================================================================================

#: Seed 004 figure 4: ε = 0.01 for both mechanisms, split evenly for sum / count.
SEED_004_AVG_EPSILON: Final = 0.01


@dataclass(frozen=True, slots=True)
class AveragingDemo:
    """Naive noisy mean (Δ = C) against noisy sum / noisy count (ε split in half)."""

    n: int
    true_mean: float  # of the clipped values: DATA-DEPENDENT (demo on sample data)
    bound: float  # C = max(|L|, |U|): sensitivity of the sum and of the seed's naive mean
    epsilon: float
    naive: FloatArray
    composed: FloatArray
    naive_mae: float
    composed_mae: float
    ratio: float  # naive_mae / composed_mae
    ratio_large_n: float  # closed-form approximation, :func:`averaging_ratio_large_n`
    clamped: bool


def averaging_ratio_large_n(n: float, mean: float, bound: float) -> float:
    """Approximate MAE ratio naive / (sum/count) for large n: n(1 + r)/(2(1 + r + r²)), r = |μ|/C.

    Notes
    -----
    Naive: |Laplace(C/ε)| has mean C/ε. Sum/count with ε/2 each: for n ≫ 2/ε the error is
    ≈ (ξ_s − μξ_c)/n with ξ_s ~ Laplace(2C/ε), ξ_c ~ Laplace(2/ε), i.e. (2C/(εn))(L₁ − rL₂)
    with L standard Laplace; E|L₁ − rL₂| = (1 + r + r²)/(1 + r) for 0 ≤ r ≤ 1 (hand
    integration). ε cancels.

    Examples
    --------
    >>> averaging_ratio_large_n(1000, 0.0, 1.0)  # symmetric data: n/2
    500.0
    """
    c = float(v.positive(bound, "bound"))
    r = min(abs(float(mean)) / c, 1.0)
    return float(n) * (1.0 + r) / (2.0 * (1.0 + r + r * r))


def averaging_demo(
    values: npt.ArrayLike,
    lower: float,
    upper: float,
    epsilon: float,
    size: int,
    rng: np.random.Generator,
    clamp: bool = True,
) -> AveragingDemo:
    """Seed 004's two ways to average, ``size`` times each, on clipped ``values``.

    Parameters
    ----------
    values : the numbers to average (missing values must be dropped first).
    lower, upper : declared bounds [L, U]; values are clipped into them. C = max(|L|, |U|).
    epsilon : total ε of each mechanism (seed: 0.01).
    clamp : clamp the sum/count output into [L, U] (free post-processing: a mean lies
        there). Without it, its MAE has no finite expectation (the noisy count can land
        near 0) and a Monte Carlo ratio is unstable when n is only a few times 2/ε.

    Notes
    -----
    Add/remove relation (seed 004). Naive (ex. 3, the bad baseline): mean + Laplace(C/ε).
    Composed (ex. 4): (sum + Laplace(C/(ε/2)))/(count + Laplace(1/(ε/2))), ε/2 each,
    ε in all by basic composition.
    """
    lo, hi = float(lower), float(upper)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise QueryError(f"bounds must satisfy lower < upper; got [{lo}, {hi}]. Declare the range.")
    x = np.clip(np.asarray(values, dtype=np.float64).reshape(-1), lo, hi)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise QueryError("values must be a non-empty column without missing values.")
    eps = float(v.epsilons(epsilon))
    c = max(abs(lo), abs(hi))
    ss = v.count(size, "size")
    n = int(x.size)
    mean = float(x.mean())
    half = eps / 2.0  # ε_sum = ε_count = ε/2: ε in all by basic composition
    naive = LAPLACE.simulate(mean, float(LAPLACE.scale_for(eps, Sensitivity(c, c))), ss, rng)
    s = LAPLACE.simulate(float(x.sum()), float(LAPLACE.scale_for(half, Sensitivity(c, c))), ss, rng)
    k = LAPLACE.simulate(float(n), float(LAPLACE.scale_for(half, _COUNT)), ss, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        comp = s / k
    comp = np.where(np.isfinite(comp), comp, 0.0)
    if clamp:
        comp = np.clip(comp, lo, hi)
    naive_mae = float(np.abs(naive - mean).mean())
    comp_mae = float(np.abs(comp - mean).mean())
    return AveragingDemo(
        n=n,
        true_mean=mean,
        bound=c,
        epsilon=eps,
        naive=naive,
        composed=np.asarray(comp, dtype=np.float64),
        naive_mae=naive_mae,
        composed_mae=comp_mae,
        ratio=naive_mae / comp_mae if comp_mae > 0 else math.inf,
        ratio_large_n=averaging_ratio_large_n(n, mean, c),
        clamped=bool(clamp),
    )


# ======================================================================================
# 5. Binary majority: exponential mechanism, ISM and the bounds (seed 000)
# ======================================================================================


@dataclass(frozen=True, slots=True)
class MajorityCurves:
    """P[correct] against s = Σxᵢ for n = 2k + 1 voters at one ε (seed 000)."""

    n: int
    epsilon: float
    s: IntArray
    exponential: FloatArray  # 1/(1 + e^{−|2s−n|ε/2})
    better: FloatArray  # 1/(1 + e^{−rε}), r = (|2s−n|+1)/2: the ISM with |T| = 2 (no /2)
    ism: FloatArray  # the general ISM (with /2): 1/(1 + e^{−rε/2})
    unbiased_bound: FloatArray  # 1/(1 + e^{−(|2s−n|+1)ε}) at ε
    bound_quarter: FloatArray  # the same bound at ε/4 (1/4-optimality)
    bound_half: FloatArray  # the same bound at ε/2 (1/2-optimality when |T| = 2)
    quarter_matches: bool  # ISM(ε) == bound(ε/4) at every s (to 1e-12)
    half_matches: bool  # better(ε) == bound(ε/2) at every s
    data_dependent: bool = True


def majority_curves(epsilon: float, n: int) -> MajorityCurves:
    """The binary-majority formulas of seed 000 for every s ∈ {0, …, n}.

    Notes
    -----
    Uses :mod:`planner.planning.mechanisms.exponential` (EM, better mechanism, unbiased bound) and
    :func:`planner.planning.mechanisms.ism.exact_probability` on :func:`ism.majority_distance`.
    The general ISM's 1/Σ e^{−εD/2} equals the unbiased bound 1/Σ e^{−2(ε/4)D} term by
    term, so "ISM at ε beats every unbiased ε/4-DP mechanism" holds with equality here.

    Examples
    --------
    >>> c = majority_curves(1.0, 11)
    >>> round(float(c.exponential[6]), 6), round(float(c.better[6]), 6)  # s = 6: hand values
    (0.622459, 0.731059)
    >>> c.quarter_matches and c.half_matches
    True
    """
    nn = v.count(n, "n")
    if nn % 2 != 1:
        raise QueryError(f"n must be odd (n = 2k + 1) for a strict majority; got {nn}.")
    eps = float(v.epsilons(epsilon))
    s = np.arange(nn + 1, dtype=np.int64)
    p_ism = np.array([
        float(ism.exact_probability(ism.majority_distance(int(si), nn).distance, eps, halve=True)[()])
        for si in s
    ])
    better = em.majority_better_correct(eps, s, nn)
    q = em.majority_unbiased_upper_bound(eps / 4.0, s, nn)
    h = em.majority_unbiased_upper_bound(eps / 2.0, s, nn)
    return MajorityCurves(
        n=nn,
        epsilon=eps,
        s=s,
        exponential=em.majority_em_correct(eps, s, nn),
        better=better,
        ism=np.asarray(p_ism, dtype=np.float64),
        unbiased_bound=em.majority_unbiased_upper_bound(eps, s, nn),
        bound_quarter=q,
        bound_half=h,
        quarter_matches=bool(np.allclose(p_ism, q, rtol=1e-12, atol=0.0)),
        half_matches=bool(np.allclose(better, h, rtol=1e-12, atol=0.0)),
    )


# ======================================================================================
# 6. Releasing a distribution (seed 001's simulation)
# ======================================================================================

#: Seed 001's simulation: Beta(10, 10) data, n ∈ {100, 1000}, ε (α there) ∈ {0.1, 0.01}.
SEED_001_BETA: Final = (10.0, 10.0)
SEED_001_NS: Final = (100, 1000)
SEED_001_EPSILONS: Final = (0.1, 0.01)
#: Numbers of bins (the seed's axis values are not printed; a grid from 5 to 100).
SEED_001_BINS: Final = (5, 8, 10, 15, 20, 30, 40, 60, 80, 100)


def _beta_sampler(n: int, rng: np.random.Generator) -> FloatArray:
    a, b = SEED_001_BETA
    return np.asarray(rng.beta(a, b, size=n), dtype=np.float64)


def _beta_cdf(x: FloatArray) -> FloatArray:
    from planner.core import special
    a, b = SEED_001_BETA
    return np.asarray(special.betainc(a, b, np.clip(x, 0.0, 1.0)), dtype=np.float64)


def beta_density(x: npt.ArrayLike) -> FloatArray:
    """The Beta(10, 10) density of seed 001's simulation."""
    from planner.core import special
    a, b = SEED_001_BETA
    xx = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    with np.errstate(divide="ignore"):
        logp = (a - 1) * np.log(xx) + (b - 1) * np.log1p(-xx) - special.betaln(a, b)
    return np.asarray(np.exp(logp), dtype=np.float64)


def beta_mise_curve(
    n: int,
    epsilon: float,
    rng: np.random.Generator,
    bins: Sequence[int] = SEED_001_BINS,
    reps: int = 50,
    progress: Callable[[int, int], None] | None = None,
) -> hist.MiseCurve:
    """Monte Carlo MISE vs number of bins for Beta(10, 10) data (seed 001, Figure 1).

    :func:`planner.planning.mechanisms.histogram.mise_vs_bins` with the substitution relation
    (Laplace of variance 8/ε² per bin). Data-independent (synthetic data, known density).
    """
    a, b = SEED_001_BETA
    return hist.mise_vs_bins(
        bins, n, epsilon, _beta_sampler, _beta_cdf, hist.beta_density_l2_sq(a, b), reps, rng,
        progress=progress,
    )


@dataclass(frozen=True, slots=True)
class SyntheticSample:
    """A real Beta(10, 10) sample, its perturbed histogram and a synthetic sample from it."""

    real: FloatArray
    edges: FloatArray
    counts: IntArray
    noisy_counts: FloatArray  # C_j + Laplace(2/ε)
    probabilities: FloatArray  # q̂_j = max(D_j, 0)/Σ max(D, 0)
    synthetic: FloatArray
    epsilon: float


def synthetic_sample_demo(
    n: int, epsilon: float, m: int, rng: np.random.Generator, k: int | None = None
) -> SyntheticSample:
    """Draw n Beta(10, 10) points, perturb their m-bin histogram, draw k (default n) points.

    ε-DP for any k (post-processing of the perturbed counts; seed 001, MATH.md §8).
    """
    nn = v.count(n, "n")
    mm = v.count(m, "m (number of bins)")
    x = _beta_sampler(nn, rng)
    counts = hist.bin_counts(x, mm)
    noisy = hist.perturb_counts(counts, epsilon, Sensitivity(2.0, math.sqrt(2.0)), rng)
    q = hist.clamp_normalise(noisy)
    edges = hist.equal_bins(mm)
    kk = nn if k is None else v.count(k, "k")
    return SyntheticSample(
        real=x,
        edges=edges,
        counts=counts,
        noisy_counts=noisy,
        probabilities=q,
        synthetic=hist.sample_points(q, edges, kk, rng),
        epsilon=float(v.epsilons(epsilon)),
    )


# ======================================================================================
# 7. The cost of asking many questions (seed 002)
# ======================================================================================


def drv_crossover_k(epsilon0: float, delta: float) -> int | None:
    """Least k at which DRV's advanced bound ε₀√(2k ln(1/δ)) + kε₀(e^{ε₀} − 1) < kε₀.

    None if it never happens (e^{ε₀} ≥ 2). Found by bisection on
    :func:`planner.privacy.accounting.drv_epsilon` (the gap is a√k − ck: one sign change).
    """
    e0 = float(v.epsilons(epsilon0))
    if math.expm1(e0) >= 1.0:
        return None

    def beats(k: int) -> bool:
        return accounting.drv_epsilon(e0, k, delta) < k * e0

    hi = 1
    while not beats(hi):
        hi *= 2
    lo = hi // 2  # beats(lo) is False (or lo = 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if beats(mid):
            hi = mid
        else:
            lo = mid
    return hi


def advanced_crossover_k(epsilon0: float, delta: float, k_max: int = 1_000_000) -> int | None:
    """Least k at which the engine's advanced bound (min of DRV and KOV) beats basic.

    Bisection over k on :func:`planner.privacy.accounting.advanced_best`; None if not by ``k_max``.
    """
    e0 = float(v.epsilons(epsilon0))

    def beats(k: int) -> bool:
        return accounting.advanced_best(np.full(k, e0), None, delta)[0] < k * e0 * (1 - 1e-12)

    if not beats(k_max):
        return None
    lo, hi = 0, 1
    while not beats(hi):
        lo, hi = hi, min(hi * 2, k_max)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if beats(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True, slots=True)
class CompositionCurves:
    """Total ε of k Laplace queries at ε₀ each under each composition rule."""

    k: IntArray
    epsilon0: float
    delta: float
    basic: FloatArray
    drv: FloatArray  # DRV's formula at δ' = δ (seed 002)
    advanced: FloatArray  # the engine's min(basic, DRV, KOV) at δ' = δ
    rdp: FloatArray  # RDP of k Laplace events, converted at δ
    drv_crossover: int | None
    advanced_crossover: int | None


def _rdp_repeated(e0: float, k: int, delta: float) -> float:
    """RDP total ε of k Laplace queries at ε₀ each, converted at δ."""
    return accounting.rdp_epsilon([SelfComposedEvent(LaplaceEvent(1.0 / e0), k)], delta)[0]


def composition_curves(epsilon0: float, ks: Sequence[int], delta: float) -> CompositionCurves:
    """Total ε of k queries at ε₀ (Laplace) under basic, advanced (DRV, engine) and RDP.

    The engine's advanced bound is never above DRV's, so its crossover is searched only
    up to DRV's (or 100,000 queries when DRV never beats basic).
    """
    e0 = float(v.epsilons(epsilon0))
    kk = np.asarray(sorted({v.count(k, "k") for k in ks}), dtype=np.int64)
    basic = np.array([accounting.compose_basic(np.full(int(k), e0))[0] for k in kk])
    drv = np.array([accounting.drv_epsilon(e0, int(k), delta) for k in kk])
    adv = np.array([accounting.advanced_best(np.full(int(k), e0), None, delta)[0] for k in kk])
    rdp = np.array([_rdp_repeated(e0, int(k), delta) for k in kk])
    drv_cross = drv_crossover_k(e0, delta)
    return CompositionCurves(
        k=kk,
        epsilon0=e0,
        delta=float(delta),
        basic=np.asarray(basic, dtype=np.float64),
        drv=np.asarray(drv, dtype=np.float64),
        advanced=np.asarray(adv, dtype=np.float64),
        rdp=np.asarray(rdp, dtype=np.float64),
        drv_crossover=drv_cross,
        advanced_crossover=advanced_crossover_k(e0, delta, drv_cross if drv_cross is not None else 100_000),
    )


class Rule(StrEnum):
    """Composition rules compared by the demo."""

    BASIC = "basic"
    ADVANCED = "advanced"
    RDP = "rdp"


def _composed(rule: Rule, e0: float, k: int, delta: float) -> float:
    if rule is Rule.BASIC:
        return float(accounting.compose_basic(np.full(k, e0))[0])
    if rule is Rule.ADVANCED:
        return accounting.advanced_best(np.full(k, e0), None, delta)[0]
    return _rdp_repeated(e0, k, delta)


def per_query_epsilon(total_epsilon: float, k: int, delta: float, rule: Rule | str) -> float:
    """Largest ε₀ such that k Laplace queries at ε₀ compose to ≤ total ε under ``rule``.

    Bisection in log ε₀ keeping the feasible end (never over budget); relative precision
    about 1e-6. Basic gives total/k exactly.
    """
    tot = float(v.epsilons(total_epsilon, "total_epsilon"))
    kk = v.count(k, "k")
    r = Rule(rule)
    if r is Rule.BASIC:
        return tot / kk
    lo = tot / kk  # basic: always within budget (every rule is ≤ basic)
    hi = 2.0 * tot
    while _composed(r, hi, kk, delta) <= tot:
        lo, hi = hi, 2.0 * hi
    for _ in range(40):
        if hi / lo - 1.0 < 1e-7:
            break
        mid = math.sqrt(lo * hi)
        if _composed(r, mid, kk, delta) <= tot:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True, slots=True)
class AccuracyPerRule:
    """For a fixed total ε: per-query ε₀ and Laplace RMSE √2·Δ/ε₀ under each rule."""

    k: IntArray
    total_epsilon: float
    delta: float
    sensitivity: float
    per_query: dict[Rule, FloatArray]
    rmse: dict[Rule, FloatArray]


def accuracy_per_rule(
    total_epsilon: float, ks: Sequence[int], delta: float, sensitivity: float = 1.0
) -> AccuracyPerRule:
    """Per-query ε₀ and RMSE of k Laplace queries sharing a total ε, under each rule."""
    kk = np.asarray(sorted({v.count(k, "k") for k in ks}), dtype=np.int64)
    sens = Sensitivity(float(sensitivity), float(sensitivity))
    per: dict[Rule, FloatArray] = {}
    err: dict[Rule, FloatArray] = {}
    for r in Rule:
        e0 = np.array([per_query_epsilon(total_epsilon, int(k), delta, r) for k in kk])
        per[r] = np.asarray(e0, dtype=np.float64)
        err[r] = LAPLACE.rmse(LAPLACE.scale_for(e0, sens))
    return AccuracyPerRule(kk, float(total_epsilon), float(delta), sens.l1, per, err)


def simulate_count_answers(
    true_count: float, epsilon: float, size: int, rng: np.random.Generator
) -> FloatArray:
    """``size`` demo draws of a count (Δ = 1) answered with Laplace noise at ε (never released)."""
    b = float(LAPLACE.scale_for(epsilon, _COUNT))
    return LAPLACE.simulate(float(true_count), b, v.count(size, "size"), rng)


def log_grid(k_max: int, points: int = 25) -> list[int]:
    """About ``points`` distinct integers from 1 to k_max, evenly spaced on a log scale."""
    km = v.count(k_max, "k_max")
    g = np.unique(np.round(np.logspace(0.0, math.log10(km), v.count(points, "points"))))
    return [int(x) for x in g]
