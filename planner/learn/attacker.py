"""Learn demo: What an attacker can learn: the differencing attack and the hypothesis-testing reading of DP.

Part of :mod:`planner.learn` (one module per demo); see its docstring for the
warning on the numpy noise drawn here (demonstration only, never released).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError
from planner.learn._common import _COUNT
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms.base import FloatArray
from planner.planning.mechanisms.laplace import LAPLACE

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.privacy import accounting


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
    Exact answers reveal x = total − without (the tracker attack of
    Borealis AI, "Tutorial #12: Differential privacy I" (2021); also in Garivier, "How to
    learn while respecting individual privacy?" (ENS de Lyon, 2021)). With
    Laplace noise, the attacker's best evidence about x is the likelihood ratio of the
    noisy answers; only the first depends on x, and the second only helps cancel the rest,
    so the ratio is that of d = y₁ − y₂ (:func:`difference_likelihood_ratio`), never more
    than e^ε: posterior odds ≤ e^ε·prior odds (DMNS06; Gatica-Perez et
    al., "An introduction to trustworthy machine learning" (AIDA, 2022), "robustness to side
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

    ``tight=False``: Wasserman & Zhou's bound min(1, γe^ε + δ) [WZ10]. ``tight=True``: the full
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
    γ ≤ e^{−ε}/2: the Laplace mechanism meets Wasserman & Zhou's bound.

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
