"""Learn demo: Releasing a distribution (Wasserman and Zhou's Beta(10, 10) simulation).

Part of :mod:`planner.learn` (one module per demo); see its docstring for the
warning on the numpy noise drawn here (demonstration only, never released).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from planner.learn._common import IntArray
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms import histogram as hist
from planner.planning.mechanisms.base import FloatArray, Sensitivity

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).

#: The simulation of Wasserman & Zhou, "A statistical framework for differential privacy"
#: (JASA 2010; Yu's Purdue slides): Beta(10, 10) data, n ∈ {100, 1000}, ε (α there) ∈ {0.1, 0.01}.
SEED_001_BETA: Final = (10.0, 10.0)
SEED_001_NS: Final = (100, 1000)
SEED_001_EPSILONS: Final = (0.1, 0.01)
#: Numbers of bins (the slides do not print their axis values; a grid from 5 to 100).
SEED_001_BINS: Final = (5, 8, 10, 15, 20, 30, 40, 60, 80, 100)


def _beta_sampler(n: int, rng: np.random.Generator) -> FloatArray:
    a, b = SEED_001_BETA
    return np.asarray(rng.beta(a, b, size=n), dtype=np.float64)


def _beta_cdf(x: FloatArray) -> FloatArray:
    from planner.core import special
    a, b = SEED_001_BETA
    return np.asarray(special.betainc(a, b, np.clip(x, 0.0, 1.0)), dtype=np.float64)


def beta_density(x: npt.ArrayLike) -> FloatArray:
    """The Beta(10, 10) density of Wasserman & Zhou's simulation."""
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
    """Monte Carlo MISE vs number of bins for Beta(10, 10) data (Wasserman & Zhou, Figure 1).

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

    ε-DP for any k (post-processing of the perturbed counts; Wasserman & Zhou; docs/mathematics.md §8).
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
