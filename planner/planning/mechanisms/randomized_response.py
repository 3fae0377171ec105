"""Binary randomized response (local DP): calibration, unbiased estimation, accuracy.

Two designs appear in the teaching notes (docs/mathematics.md §3):

* keep-p ([B]): report the truth with probability p, else its opposite;
* coin ([G]): with probability a report the truth, else toss a fair coin — the same
  channel as keep-p with p = (1 + a)/2 (a = 1/2 gives p = 3/4, P[Y=1|X=x] = 1/4 + x/2).

Both are ε-DP with ε = ln(p/(1−p)) (ln 3 for both teaching notes' designs). Vectorised over ε.

References
----------
.. [W65] S. L. Warner, "Randomized Response: A Survey Technique for Eliminating Evasive
   Answer Bias", JASA 60(309), 1965 (estimator and variance, eq. 5–6).
.. [KOV16] P. Kairouz, S. Oh, P. Viswanath, "Extremal Mechanisms for Local Differential
   Privacy", JMLR 17, 2016 (binary RR is optimal for binary data).
.. [G] A. Garivier, "How to learn while respecting individual privacy? An introduction to
   differential privacy", lecture, ENS de Lyon, 2021 ("Randomized response", the coin design;
   its estimator 2ȳ − 1 is biased — the unbiased one is 2ȳ − 1/2).
.. [B] "Differential privacy", Berkeley Math Circle handout, 16 October 2019 (Claim 1:
   ε = ln(p/(1−p))).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.core.errors import QueryError
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms.base import FloatArray
from planner.privacy.events import RandomizedResponseEvent

IntArray = npt.NDArray[np.int64]


def _keep(p: npt.ArrayLike) -> FloatArray:
    pp = np.asarray(p, dtype=np.float64)
    if pp.size == 0 or np.any(~((pp > 0.5) & (pp < 1.0))):
        raise QueryError(
            "keep_probability must be in (0.5, 1); got a value outside. "
            "p = 0.5 is pure noise and p = 1 is no privacy."
        )
    return pp


def keep_probability(epsilon: npt.ArrayLike) -> FloatArray:
    """p = e^ε/(1 + e^ε), the keep-probability giving exactly ε-DP.

    Examples
    --------
    >>> float(keep_probability(np.log(3.0))[()])  # 3/4 (both designs, [G] and [B]), by hand
    0.75
    """
    from planner.core import special
    return np.asarray(special.expit(v.epsilons(epsilon)), dtype=np.float64)


def epsilon_for(keep: npt.ArrayLike) -> FloatArray:
    """ε = ln(p/(1 − p)) [B, Claim 1].

    Examples
    --------
    >>> round(float(epsilon_for(0.75)[()]), 6)  # ln 3
    1.098612
    """
    from planner.core import special
    return np.asarray(special.logit(_keep(keep)), dtype=np.float64)


def coin_design_keep_probability(truth_probability: float = 0.5) -> float:
    """Keep-probability of "truth with probability a, else a fair coin": p = (1 + a)/2.

    Examples
    --------
    >>> coin_design_keep_probability(0.5)  # [G]: P[Y=1|X=x] = 1/4 + x/2
    0.75
    """
    a = float(truth_probability)
    if not (0.0 < a < 1.0):
        raise QueryError(f"truth_probability must be in (0, 1); got {a}.")
    return (1.0 + a) / 2.0


def event(keep: float) -> RandomizedResponseEvent:
    """``RandomizedResponseEvent(p)``."""
    return RandomizedResponseEvent(float(keep))


def report_one_probability(pi: npt.ArrayLike, keep: npt.ArrayLike) -> FloatArray:
    """q = P[Y = 1] = pπ + (1 − p)(1 − π)."""
    p = _keep(keep)
    pi_ = np.asarray(pi, dtype=np.float64)
    return np.asarray(p * pi_ + (1.0 - p) * (1.0 - pi_), dtype=np.float64)


def estimate(report_mean: npt.ArrayLike, keep: npt.ArrayLike) -> FloatArray:
    """Unbiased estimator of the true proportion: π̂ = (ȳ − (1 − p))/(2p − 1).

    Notes
    -----
    E[ȳ] = q = (1 − p) + (2p − 1)π, solved for π [W65]. For [G]'s coin design
    (p = 3/4) this is 2ȳ − 1/2, **not** the slides' 2ȳ − 1 (biased by −1/2).

    Examples
    --------
    >>> float(estimate(0.5, 0.75)[()])  # 2·0.5 − 1/2
    0.5
    """
    p = _keep(keep)
    return np.asarray((np.asarray(report_mean, dtype=np.float64) - (1.0 - p)) / (2.0 * p - 1.0), dtype=np.float64)


def variance(pi: npt.ArrayLike, n: npt.ArrayLike, keep: npt.ArrayLike) -> FloatArray:
    """Var π̂ = q(1 − q)/(n(2p − 1)²) [W65, eq. 6]."""
    q = report_one_probability(pi, keep)
    p = _keep(keep)
    nn = v.positive(n, "n", "The number of respondents must be positive.")
    return np.asarray(q * (1.0 - q) / (nn * (2.0 * p - 1.0) ** 2), dtype=np.float64)


def data_cost_factor(epsilon: npt.ArrayLike) -> FloatArray:
    """(2p − 1)⁻² = 1/tanh²(ε/2): how many times more respondents RR needs for the same variance
    (worst case π = 1/2, versus asking directly).

    Examples
    --------
    >>> round(float(data_cost_factor(np.log(3.0))[()]), 12)  # [G]'s "≈ 4× more data"
    4.0
    """
    return np.asarray(1.0 / np.tanh(v.epsilons(epsilon) / 2.0) ** 2, dtype=np.float64)


def worst_case_rmse(epsilon: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    """max over π of √Var π̂ = 1/(2√n · tanh(ε/2)), for planning (data-independent).

    Notes
    -----
    q ranges over [1 − p, p] ∋ 1/2 as π ranges over [0, 1], so max q(1 − q) = 1/4
    (attained at π = 1/2); 2p − 1 = tanh(ε/2).

    Examples
    --------
    >>> round(float(worst_case_rmse(np.log(3.0), 100)[()]), 6)  # 1/(2·10·(1/2)) = 0.1
    0.1
    """
    eps = v.epsilons(epsilon)
    nn = v.positive(n, "n", "The number of respondents must be positive.")
    return np.asarray(1.0 / (2.0 * np.sqrt(nn) * np.tanh(eps / 2.0)), dtype=np.float64)


def worst_case_error_bound(epsilon: npt.ArrayLike, n: npt.ArrayLike, beta: float = 0.05) -> FloatArray:
    """Normal-approximation (1−β) half-width z_{1−β/2}·worst_case_rmse (CLT; n ≳ 30/(2p−1)²)."""
    from planner.core import special
    z = float(special.ndtri(1.0 - v.beta_level(beta) / 2.0))
    return np.asarray(z * worst_case_rmse(epsilon, n), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class ConfidenceInterval:
    """A normal-approximation interval for π, clipped to [0, 1]."""

    estimate: float
    lower: float
    upper: float
    level: float


def confidence_interval(report_mean: float, n: int, keep: float, beta: float = 0.05) -> ConfidenceInterval:
    """π̂ ± z_{1−β/2}·√(ȳ(1 − ȳ)/(n(2p − 1)²)), clipped to [0, 1] (Wald interval).

    The plug-in q̂ = ȳ estimates q; clipping never lowers coverage since π ∈ [0, 1].
    """
    from planner.core import special
    p = float(_keep(keep))
    nn = v.count(n, "n")
    y = float(report_mean)
    if not (0.0 <= y <= 1.0):
        raise QueryError(f"report_mean must be in [0, 1]; got {y}.")
    est = float(estimate(y, p))
    half = float(special.ndtri(1.0 - v.beta_level(beta) / 2.0)) * np.sqrt(y * (1.0 - y) / (nn * (2 * p - 1) ** 2))
    return ConfidenceInterval(est, max(0.0, est - half), min(1.0, est + half), 1.0 - beta)


def simulate_reports(truth: npt.ArrayLike, keep: float, rng: np.random.Generator) -> IntArray:
    """Planning draws of the reports Y for true bits X (same shape): keep w.p. p, else flip."""
    x = np.asarray(truth)
    if np.any((x != 0) & (x != 1)):
        raise QueryError("truth must contain only 0/1 values.")
    p = float(_keep(keep))
    flip = rng.random(x.shape) >= p
    return np.asarray(np.where(flip, 1 - x, x), dtype=np.int64)


def simulate_estimates(
    pi: float, n: int, keep: float, size: int, rng: np.random.Generator
) -> FloatArray:
    """``size`` planning draws of π̂ for n respondents with true proportion π.

    Respondents are i.i.d. Bernoulli(π) (the model of :func:`variance`), so the number of
    1-reports is exactly Binomial(n, q), q = pπ + (1 − p)(1 − π). For a fixed population
    of bits use :func:`simulate_reports` (its variance is the smaller p(1−p)/(n(2p−1)²)).
    """
    p = float(_keep(keep))
    nn = v.count(n, "n")
    q = float(report_one_probability(pi, p))
    ones = rng.binomial(nn, q, size=v.count(size, "size"))
    return estimate(ones / nn, p)
