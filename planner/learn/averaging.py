"""Learn demo: Averaging done right (Borealis AI tutorial, figure 4, examples 3 and 4).

Part of :mod:`planner.learn` (one module per demo); see its docstring for the
warning on the numpy noise drawn here (demonstration only, never released).
"""

from __future__ import annotations

import math
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

#: Borealis AI, "Tutorial #12: Differential privacy I" (2021), figure 4: ε = 0.01 for both
#: mechanisms, split evenly for sum / count.
SEED_004_AVG_EPSILON: Final = 0.01


@dataclass(frozen=True, slots=True)
class AveragingDemo:
    """Naive noisy mean (Δ = C) against noisy sum / noisy count (ε split in half)."""

    n: int
    true_mean: float  # of the clipped values: DATA-DEPENDENT (demo on sample data)
    bound: float  # C = max(|L|, |U|): sensitivity of the sum and of the tutorial's naive mean
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
    """Borealis AI's tutorial #12's two ways to average, ``size`` times each, on clipped ``values``.

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
    Add/remove relation (as in the tutorial). Naive (ex. 3, the bad baseline): mean + Laplace(C/ε).
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
