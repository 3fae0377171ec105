"""Learn demo: The Laplace count (Borealis AI tutorial, figure 3).

Part of :mod:`planner.learn` (one module per demo); see its docstring for the
warning on the numpy noise drawn here (demonstration only, never released).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError
from planner.learn._common import _COUNT
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms.base import FloatArray, Sensitivity
from planner.planning.mechanisms.laplace import LAPLACE

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).

#: The true counts in figure 3 of Borealis AI, "Tutorial #12: Differential privacy I" (2021).
SEED_004_COUNTS: Final = (1000, 100)
#: ε for figure 3. The tutorial does not print its three values; its caption (at count 1000
#: almost always within ±10 %, at count 100 regularly outside) needs 1 − e^{−100ε} ≈ 1 and
#: 1 − e^{−10ε} well below 1 for all three, i.e. roughly 0.05 ≤ ε ≤ 0.25.
SEED_004_EPSILONS: Final = (0.05, 0.1, 0.2)


def within_share(
    count: npt.ArrayLike, epsilon: npt.ArrayLike, tolerance: float = 0.1, sensitivity: float = 1.0
) -> FloatArray:
    """P(|noisy count − count| ≤ tolerance·count) = 1 − e^{−tolerance·count·ε/Δ} (broadcast).

    From the Laplace tail P(|L| > t) = e^{−t/b}, b = Δ/ε (docs/mathematics.md §3).

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
