"""Histogram and synthetic-sample release (Wasserman & Zhou 2010; docs/mathematics.md §8).

Two ε-DP ways to release a histogram density on [0, 1] (m equal bins of width h = 1/m;
the MISE helpers are 1-D, r = 1) and to draw synthetic points from it:

* **perturbed histogram**: D_j = C_j + Laplace(Δ₁/ε) (Δ₁ = 2 under substitution, variance
  8/ε², as in Yu's slides), D̃_j = max(D_j, 0), q̂_j = D̃_j/Σ D̃; any number of draws from the
  density q̂_j/h is ε-DP (post-processing);
* **smoothed histogram**: f̂ = (1 − w)·f̂_m + w (w the *mixing weight*, called δ in the
  paper — it is not the DP δ); k draws from it are ε-DP iff k·ln((1 − w)m/(nw) + 1) ≤ ε.

Numpy noise here is for PLANNING ONLY (simulations, figures); releases go through OpenDP.

References
----------
.. [WZ10] L. Wasserman, S. Zhou, "A Statistical Framework for Differential Privacy",
   JASA 105(489), 2010, arXiv:0811.2501; as numbered in Yang Yu's slides "A statistical framework for
   differential privacy" (Purdue University, 2015): Theorem 5 (smoothed
   histogram, eq. 4), "Sampling From a Perturbed Histogram" (Laplace of variance 8/α²),
   Theorem 8 (rates) and the Beta(10, 10) simulation (Figure 1).
.. [DMNS06] Dwork, McSherry, Nissim & Smith 2006 (Laplace noise on counts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.core.errors import QueryError
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms.base import FloatArray, Sensitivity
from planner.privacy.events import LaplaceEvent

IntArray = npt.NDArray[np.int64]


def equal_bins(m: int, lower: float = 0.0, upper: float = 1.0) -> FloatArray:
    """m + 1 equally spaced bin edges on [lower, upper]."""
    mm = v.count(m, "m (number of bins)")
    return np.linspace(float(lower), float(upper), mm + 1)


def bin_counts(data: npt.ArrayLike, m: int) -> IntArray:
    """Counts C_j of data in [0, 1] over m equal bins (points at 1 go to the last bin)."""
    x = np.clip(np.asarray(data, dtype=np.float64).reshape(-1), 0.0, 1.0)
    mm = v.count(m, "m (number of bins)")
    idx = np.minimum((x * mm).astype(np.int64), mm - 1)
    return np.bincount(idx, minlength=mm).astype(np.int64)


def perturbed_scale(epsilon: npt.ArrayLike, sensitivity: Sensitivity) -> FloatArray:
    """Laplace scale per bin b = Δ₁/ε (2/ε under substitution: variance 2b² = 8/ε²).

    Examples
    --------
    >>> from planner.planning.mechanisms.base import Sensitivity
    >>> float(perturbed_scale(0.5, Sensitivity(2.0, 2.0**0.5))[()])  # 2/0.5
    4.0
    """
    return np.asarray(sensitivity.l1 / v.epsilons(epsilon), dtype=np.float64)


def perturbed_event(epsilon: float, sensitivity: Sensitivity) -> LaplaceEvent:
    """The privacy event of a perturbed-histogram release (all bins at once): ε-DP Laplace."""
    return LaplaceEvent(float(perturbed_scale(epsilon, sensitivity)) / sensitivity.l1)


def perturb_counts(
    counts: npt.ArrayLike, epsilon: float, sensitivity: Sensitivity, rng: np.random.Generator
) -> FloatArray:
    """PLANNING draw of D_j = C_j + Laplace(Δ₁/ε), independently per bin."""
    c = np.asarray(counts, dtype=np.float64)
    b = float(perturbed_scale(epsilon, sensitivity))
    return np.asarray(c + rng.laplace(0.0, b, size=c.shape), dtype=np.float64)


def clamp_normalise(noisy_counts: npt.ArrayLike) -> FloatArray:
    """q̂_j = max(D_j, 0)/Σ max(D, 0); uniform if every D_j ≤ 0 (a fixed fallback: still DP)."""
    d = np.maximum(np.asarray(noisy_counts, dtype=np.float64), 0.0)
    total = d.sum(axis=-1, keepdims=True)
    uniform = np.full(d.shape, 1.0 / d.shape[-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(total > 0, d / np.where(total > 0, total, 1.0), uniform)
    return np.asarray(q, dtype=np.float64)


def sample_points(
    bin_probabilities: npt.ArrayLike, edges: npt.ArrayLike, k: int, rng: np.random.Generator
) -> FloatArray:
    """k synthetic points from the histogram density q_j/h_j (bin by q, then uniform in it)."""
    q = np.asarray(bin_probabilities, dtype=np.float64)
    e = np.asarray(edges, dtype=np.float64)
    if q.ndim != 1 or e.shape != (q.size + 1,):
        raise QueryError("edges must have one more entry than bin_probabilities.")
    kk = v.count(k, "k (number of synthetic points)", 0)
    idx = rng.choice(q.size, size=kk, p=q / q.sum())
    return np.asarray(e[idx] + rng.random(kk) * (e[idx + 1] - e[idx]), dtype=np.float64)


def smoothed_probabilities(counts: npt.ArrayLike, mixing_weight: float) -> FloatArray:
    """Bin masses of f̂ = (1 − w)f̂_m + w on [0, 1] with m equal bins: (1 − w)C_j/n + w/m."""
    c = np.asarray(counts, dtype=np.float64)
    w = _mixing(mixing_weight)
    n = c.sum()
    if n <= 0:
        raise QueryError("the histogram has no records; the smoothed histogram needs n ≥ 1.")
    return np.asarray((1.0 - w) * c / n + w / c.size, dtype=np.float64)


def _mixing(w: float) -> float:
    ww = float(w)
    if not (0.0 < ww < 1.0):
        raise QueryError(
            f"mixing_weight must be in (0, 1); got {ww}. It is the weight of the uniform "
            "density in the smoothed histogram (not the DP δ)."
        )
    return ww


def smoothed_epsilon(k: npt.ArrayLike, m: int, n: int, mixing_weight: float) -> FloatArray:
    """ε spent by k draws from the smoothed histogram: k·ln((1 − w)m/(nw) + 1) [WZ10, Thm 5].

    Examples
    --------
    >>> import math
    >>> round(float(smoothed_epsilon(10, 10, 1000, 0.1)[()]), 6) == round(10 * math.log(1.09), 6)
    True
    """
    w = _mixing(mixing_weight)
    mm, nn = v.count(m, "m"), v.count(n, "n")
    kk = np.asarray(k, dtype=np.float64)
    return np.asarray(kk * np.log1p((1.0 - w) * mm / (nn * w)), dtype=np.float64)


def smoothed_max_draws(epsilon: npt.ArrayLike, m: int, n: int, mixing_weight: float) -> IntArray:
    """Largest k with k·ln((1 − w)m/(nw) + 1) ≤ ε."""
    eps = v.epsilons(epsilon)
    w = _mixing(mixing_weight)
    per = np.log1p((1.0 - w) * v.count(m, "m") / (v.count(n, "n") * w))
    k = np.floor(eps / per)
    k = np.where(k * per > eps, k - 1, k)
    return np.asarray(k, dtype=np.int64)


def smoothed_min_mixing_weight(epsilon: npt.ArrayLike, k: int, m: int, n: int) -> FloatArray:
    """Least w with k·ln((1 − w)m/(nw) + 1) ≤ ε: w = m/(m + n(e^{ε/k} − 1))."""
    eps = v.epsilons(epsilon)
    kk = v.count(k, "k")
    mm, nn = v.count(m, "m"), v.count(n, "n")
    w = mm / (mm + nn * np.expm1(eps / kk))
    # one ulp up so that rounding can never put k·ln(...) above ε
    return np.asarray(np.nextafter(w, 1.0), dtype=np.float64)


def beta_density_l2_sq(a: float, b: float) -> float:
    """∫₀¹ p² for the Beta(a, b) density: B(2a − 1, 2b − 1)/B(a, b)² (a, b > 1/2)."""
    from planner.core import special
    return float(np.exp(special.betaln(2 * a - 1, 2 * b - 1) - 2 * special.betaln(a, b)))


def integrated_squared_error(
    bin_probabilities: npt.ArrayLike,
    cdf: Callable[[FloatArray], FloatArray],
    density_l2_sq: float,
) -> FloatArray:
    """∫₀¹ (p − f̂)² for the histogram density f̂ = Σ_j (q_j/h)·1{B_j}, m = len(q) equal bins.

    Notes
    -----
    ∫(p − f̂)² = ∫p² − 2Σ_j (q_j/h)·P(B_j) + Σ_j q_j²/h, exact given the cdf of p
    (P(B_j) = F(b_{j+1}) − F(b_j)) and ∫p². Broadcasts over leading axes of q.
    """
    q = np.asarray(bin_probabilities, dtype=np.float64)
    m = q.shape[-1]
    h = 1.0 / m
    edges = np.linspace(0.0, 1.0, m + 1)
    mass = np.diff(np.asarray(cdf(edges), dtype=np.float64))
    return np.asarray(
        density_l2_sq - 2.0 * (q * mass).sum(axis=-1) / h + (q**2).sum(axis=-1) / h, dtype=np.float64
    )


@dataclass(frozen=True, slots=True)
class MiseCurve:
    """Monte Carlo MISE against the number of bins (with standard errors). Data-independent:
    computed on samples from a *known* density, never on the user's rows."""

    bins: IntArray
    raw: FloatArray
    perturbed: FloatArray
    smoothed: FloatArray
    raw_se: FloatArray
    perturbed_se: FloatArray
    smoothed_se: FloatArray
    reps: int
    monte_carlo: bool = True
    data_dependent: bool = False


def mise_vs_bins(
    bins: Sequence[int],
    n: int,
    epsilon: float,
    sampler: Callable[[int, np.random.Generator], FloatArray],
    cdf: Callable[[FloatArray], FloatArray],
    density_l2_sq: float,
    reps: int,
    rng: np.random.Generator,
    sensitivity: Sensitivity | None = None,
    smoothed_draws: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> MiseCurve:
    """MISE of raw / perturbed / smoothed histogram density estimates vs m, by Monte Carlo.

    Parameters
    ----------
    bins : numbers of bins m to evaluate.
    n, epsilon : sample size and privacy budget.
    sampler : ``sampler(n, rng)`` draws n points in [0, 1] from the true density.
    cdf, density_l2_sq : the true cdf and ∫p² (see :func:`beta_density_l2_sq`).
    reps : Monte Carlo repetitions (standard errors are reported).
    sensitivity : histogram sensitivity (default substitution: Δ₁ = 2, Δ₂ = √2).
    smoothed_draws : k synthetic draws for the smoothed method (default n); its mixing
        weight is the least allowed by ε, :func:`smoothed_min_mixing_weight`, and its error
        is that of the histogram of the k draws ([WZ10] in Yu's slides, eq. 6).
    progress : called as ``progress(done, total)`` after each repetition.

    Notes
    -----
    Raw: ISE of q_j = C_j/n. Perturbed: ISE of the perturbed density q̂ itself (the k → ∞
    limit of its synthetic sample, as in [WZ10]'s Figure 1). Same data for all three
    methods within a repetition (common random numbers).

    Examples
    --------
    >>> from scipy import stats
    >>> rng = np.random.default_rng(0)
    >>> d = stats.beta(10, 10)
    >>> c = mise_vs_bins([10], 100, 1.0, lambda k, g: d.rvs(k, random_state=g), d.cdf,
    ...                  beta_density_l2_sq(10, 10), 20, rng)
    >>> bool(c.perturbed[0] > c.raw[0])
    True
    """
    sens = sensitivity if sensitivity is not None else Sensitivity(2.0, float(np.sqrt(2.0)))
    ms = np.asarray([v.count(b, "bins") for b in bins], dtype=np.int64)
    nn = v.count(n, "n")
    eps = float(v.epsilons(epsilon))
    r = v.count(reps, "reps", 2)
    k = v.count(smoothed_draws if smoothed_draws is not None else nn, "smoothed_draws")
    out = np.zeros((3, r, ms.size))
    for i in range(r):
        x = np.asarray(sampler(nn, rng), dtype=np.float64)
        for j, m in enumerate(ms):
            c = bin_counts(x, int(m))
            out[0, i, j] = integrated_squared_error(c / nn, cdf, density_l2_sq)
            qp = clamp_normalise(perturb_counts(c, eps, sens, rng))
            out[1, i, j] = integrated_squared_error(qp, cdf, density_l2_sq)
            w = float(smoothed_min_mixing_weight(eps, k, int(m), nn))
            qs = smoothed_probabilities(c, w)
            qz = rng.multinomial(k, qs / qs.sum()) / k
            out[2, i, j] = integrated_squared_error(qz, cdf, density_l2_sq)
        if progress is not None:
            progress(i + 1, r)
    mean = out.mean(axis=1)
    se = out.std(axis=1, ddof=1) / np.sqrt(r)
    return MiseCurve(ms, mean[0], mean[1], mean[2], se[0], se[1], se[2], r)
