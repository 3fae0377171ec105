"""What every additive-noise statistic shares: answer + Laplace or Gaussian noise.

Count, sum, histogram, proportion, mean with a public n and synthetic sample release a
number (or a vector of bin counts) plus noise of scale b = Δ₁/ε (Laplace family) or
σ = Δ₂/√(2ρ) (Gaussian family), calibrated to the schema's sensitivity. This module
turns a mechanism name and a sensitivity into the allocation item, the noise scale
(one function, used by the prediction AND the release, so they cannot drift), the
prediction, the OpenDP component and the planning simulation.

Gaussian noise is planned as OpenDP releases it: OpenDP certifies ρ-zCDP for both its
float (2^k-grid) and its discrete Gaussian sampler, so both plan as the
DISCRETE_GAUSSIAN family (θ = ρ, (ε, δ) from the zCDP conversion).

Counts released as whole numbers: for an integer true count x, round(x + N) − x =
round(N), so the prediction of a rounded count is that of round(N)
(:func:`planner.planning.mechanisms.laplace.rounded_laplace_rmse`,
:func:`planner.planning.mechanisms.gaussian.rounded_gaussian_rmse`); clamping at 0 never increases
the error (|max(y, 0) − x| ≤ |y − x| for x ≥ 0).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.mechanisms.gaussian import rounded_gaussian_error_bound, rounded_gaussian_rmse
from planner.planning.mechanisms.laplace import rounded_laplace_error_bound, rounded_laplace_rmse
from planner.planning.mechanisms.registry import additive
from planner.planning.statistics.base import (
    BETA,
    MechanismSpec,
    Part,
    Prediction,
    prediction,
    share_epsilon,
)

if TYPE_CHECKING:
    from planner.planning.allocation import Item, ItemAllocation
    from planner.privacy.noise import Component

FloatArray = npt.NDArray[np.float64]
M = MechanismName

LAPLACE_SPEC: Final = MechanismSpec(M.LAPLACE, "Laplace", "Pure ε-DP; noise of scale Δ/ε, released as a real number.")
DISCRETE_LAPLACE_SPEC: Final = MechanismSpec(
    M.DISCRETE_LAPLACE, "Discrete Laplace", "Pure ε-DP; integer noise (the two-sided geometric), exact sampler.")
GAUSSIAN_SPEC: Final = MechanismSpec(
    M.GAUSSIAN, "Gaussian", "(ε, δ)-DP; lighter tails, and composes well over many queries (zCDP/RDP).")
DISCRETE_GAUSSIAN_SPEC: Final = MechanismSpec(
    M.DISCRETE_GAUSSIAN, "Discrete Gaussian", "(ε, δ)-DP; integer noise, exact sampler (Canonne, Kamath & Steinke 2020).")
#: The four additive mechanisms, for statistics over integer aggregates (counts, bins).
INTEGER_MECHANISMS: Final = (LAPLACE_SPEC, DISCRETE_LAPLACE_SPEC, GAUSSIAN_SPEC, DISCRETE_GAUSSIAN_SPEC)
#: Those for real-valued aggregates (sums, means).
REAL_MECHANISMS: Final = (LAPLACE_SPEC, GAUSSIAN_SPEC)


def is_pure(mech: MechanismName) -> bool:
    return mech in (M.LAPLACE, M.DISCRETE_LAPLACE)


def item(pid: str, mech: MechanismName, sens: Sensitivity, weight: float, scale: float,
         divisor: float = 1.0) -> Item:
    """The allocation item of an answer ÷ ``divisor`` released with additive noise.

    MSE(θ): Laplace 2(Δ₁/ε)²; discrete Laplace the exact variance of scale Δ₁/ε; Gaussian
    Δ₂²/(2ρ) (all divided by divisor²).
    """
    # the allocator (and the accountants) are imported after a release's first read
    from planner.planning.allocation import Family, Item
    d2 = divisor * divisor
    if mech is M.LAPLACE:
        return Item(pid, Family.LAPLACE, 2.0 * sens.l1**2 / d2, weight=weight, error_scale=scale)
    if mech is M.DISCRETE_LAPLACE:
        return Item(pid, Family.DISCRETE_LAPLACE, 1.0 / d2, sensitivity=sens.l1, weight=weight, error_scale=scale)
    return Item(pid, Family.DISCRETE_GAUSSIAN, sens.l2**2 / (2.0 * d2), weight=weight, error_scale=scale)


def noise_scale(mech: MechanismName, sens: Sensitivity, share: ItemAllocation, index: int = 0) -> float:
    """The noise scale at the item's share: b = Δ₁/ε for the Laplace family (ε the planned
    event's, exactly what is recorded), σ = Δ₂/√(2ρ) for the Gaussian family."""
    if is_pure(mech):
        return sens.l1 / share_epsilon(share, index)
    return sens.l2 / math.sqrt(2.0 * share.theta)


def error(mech: MechanismName, scale: float, *, rounded: bool) -> tuple[float, float]:
    """(RMSE, 95% bound) of the noise at ``scale``; of round(noise) when ``rounded``
    (the discrete mechanisms' noise is already whole)."""
    if rounded and mech is M.LAPLACE:
        return float(rounded_laplace_rmse(scale)[()]), float(rounded_laplace_error_bound(scale, BETA)[()])
    if rounded and mech is M.GAUSSIAN:
        return float(rounded_gaussian_rmse(scale)[()]), float(rounded_gaussian_error_bound(scale, BETA)[()])
    m = additive(mech)
    return float(m.rmse(scale)[()]), float(m.error_bound(scale, BETA)[()])


def predict(part: Part, share: ItemAllocation, mech: MechanismName, sens: Sensitivity, unit: str, *,
            component: str, divisor: float = 1.0, rounded: bool = False, bound_kind: str = "exact") -> Prediction:
    """The prediction of an additive-noise item; ``component`` names the OpenDP component
    the release builds at this scale."""
    scale = noise_scale(mech, sens, share)
    rmse, bound = error(mech, scale, rounded=rounded)
    noise = {"laplace_scale": scale} if is_pure(mech) else {"sigma": scale}
    return prediction(part, share, noise=noise, scales={component: scale}, rmse=rmse / divisor,
                      bound=bound / divisor, unit=unit, bound_kind=bound_kind)


def component(name: str, mech: MechanismName, sens: Sensitivity, share: ItemAllocation, *,
              integer_data: bool, vector: bool, index: int = 0) -> Component:
    """The OpenDP measurement: float Laplace, the discrete Laplace (i32), the float
    Gaussian, or the discrete Gaussian (i32, for integer aggregates)."""
    from planner.privacy.noise import (  # OpenDP is imported on the first release only
        gaussian,
        laplace,
    )

    scale = noise_scale(mech, sens, share, index)
    if mech is M.LAPLACE:
        return laplace(name, sens.l1, scale, integer=False, vector=vector)
    if mech is M.DISCRETE_LAPLACE:
        return laplace(name, sens.l1, scale, integer=True, vector=vector)
    return gaussian(name, sens.l2, scale, integer=integer_data and mech is M.DISCRETE_GAUSSIAN, vector=vector)


def simulate(mech: MechanismName, true: npt.ArrayLike, scale: float, runs: int, rng: np.random.Generator, *,
             whole: bool = False) -> FloatArray:
    """``runs`` planning draws of the released answer's error: ``true`` plus noise (as a
    whole number ≥ 0 when the release post-processes it so), minus ``true``."""
    t = np.asarray(true, dtype=np.float64)
    noisy = additive(mech).simulate(t, scale, runs, rng)
    if whole:
        noisy = np.maximum(np.rint(noisy), 0.0)
    return np.asarray(noisy - t, dtype=np.float64)


def whole_nonnegative(value: float) -> float:
    """Post-processing of a released count: the nearest whole number, at least 0.

    Rounding a count to the nearest integer adds no bias (the noise is symmetric and the
    true count is whole); clamping at 0 adds a bias of E[max(−(x + N), 0)], at most
    E[max(N, 0)] (b/2 for Laplace noise of scale b, σ/√(2π) for Gaussian) at a true count
    of 0, and vanishing for counts much larger than the noise (e^{−x/b}·b/2 for Laplace).
    """
    return float(max(round(value), 0))


WHOLE_NONNEGATIVE_NOTE: Final = (
    "rounding adds no bias; clamping at 0 only ever reduces the error, "
    "and biases a count upwards by at most half the noise scale when the true count is 0 "
    "(negligible once the count is several noise scales above 0)"
)
