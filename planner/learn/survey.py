"""Learn demo: Randomized response (Garivier's doping survey, coin design; the Berkeley Math Circle's coin game).

Part of :mod:`planner.learn` (one module per demo); see its docstring for the
warning on the numpy noise drawn here (demonstration only, never released).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from planner.core.errors import QueryError
from planner.learn._common import IntArray
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms import randomized_response as rr
from planner.planning.mechanisms.base import FloatArray

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).


class SurveyDesign(StrEnum):
    """The two randomized-response designs of the teaching notes: Garivier, "How to learn
    while respecting individual privacy?" (ENS de Lyon, 2021) (coin) and the Berkeley Math
    Circle handout "Differential privacy" (keep)."""

    COIN = "coin"  # Garivier: truth with probability a, else a fair coin (a = 1/2: ε = ln 3)
    KEEP = "keep"  # Berkeley handout: the truth with probability p, else the opposite


def design_keep_probability(design: SurveyDesign | str, parameter: float) -> float:
    """Keep-probability p of a design: coin with truth-probability a → (1 + a)/2; keep-p → p.

    Examples
    --------
    >>> design_keep_probability("coin", 0.5)  # Garivier: P[Y=1|X=x] = 1/4 + x/2
    0.75
    >>> design_keep_probability("keep", 0.75)  # the Berkeley handout's two coins: both heads w.p. 1/4
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
    estimate: float  # unbiased π̂ = (ȳ − (1 − p))/(2p − 1), NOT the slides' 2ȳ − 1
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
    ``confidence_interval`` (unbiased: 2ȳ − 1/2 for Garivier's coin design; the slides' 2ȳ − 1
    is biased, docs/mathematics.md §3). The data cost is (2p − 1)⁻² (4 at ε = ln 3, Garivier).

    Examples
    --------
    >>> s = simulate_survey(0.2, 1000, 0.75, np.random.default_rng(0))
    >>> round(s.epsilon, 6), s.data_cost  # ln 3 and Garivier's "≈ 4× more data"
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
