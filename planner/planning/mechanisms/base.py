"""Names and value types shared by every mechanism family."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError
from planner.privacy.events import PrivacyEvent

FloatArray = npt.NDArray[np.float64]


class MechanismName(StrEnum):
    """Every mechanism the engine knows, by its stable public name (CLI, JSON, ledger)."""

    LAPLACE = "laplace"
    GAUSSIAN = "gaussian"
    DISCRETE_LAPLACE = "discrete_laplace"
    DISCRETE_GAUSSIAN = "discrete_gaussian"
    EXPONENTIAL = "exponential"
    REPORT_NOISY_MAX = "report_noisy_max"
    INVERSE_SENSITIVITY = "inverse_sensitivity"
    RANDOMIZED_RESPONSE = "randomized_response"
    PERTURBED_HISTOGRAM = "perturbed_histogram"
    SMOOTHED_HISTOGRAM = "smoothed_histogram"
    MST = "mst"
    AIM = "aim"
    MST_OR_AIM = "mst_or_aim"


@dataclass(frozen=True, slots=True)
class Sensitivity:
    """L1 and L2 sensitivity of a query under a schema (docs/mathematics.md §2). Both > 0, finite."""

    l1: float
    l2: float

    def __post_init__(self) -> None:
        for name in ("l1", "l2"):
            v = float(getattr(self, name))
            if not math.isfinite(v) or v <= 0:
                raise QueryError(
                    f"sensitivity {name} must be > 0 and finite; got {v}. "
                    "Check the declared bounds (L < U) and the privacy unit."
                )
            object.__setattr__(self, name, v)

    def scaled(self, factor: float) -> Sensitivity:
        """Sensitivity of a query whose privacy unit owns ``factor`` records (group privacy)."""
        return Sensitivity(self.l1 * factor, self.l2 * factor)


class AdditiveNoise(Protocol):
    """An additive-noise mechanism: answer + noise of a given ``scale``.

    ``scale`` is the Laplace scale b (Laplace family) or the standard deviation σ
    (Gaussian family), in the query's own units. Everything is vectorised: array
    arguments broadcast against each other. ``delta`` is ignored by pure mechanisms and
    must be > 0 for Gaussian ones (``QueryError`` otherwise).
    """

    @property
    def name(self) -> MechanismName: ...

    @property
    def pure(self) -> bool:
        """True if ε-DP (Laplace family), False if it needs δ > 0 (Gaussian family)."""
        ...

    @property
    def integer(self) -> bool:
        """True for the discrete versions (integer-valued noise for integer queries)."""
        ...

    def scale_for(
        self, epsilon: npt.ArrayLike, sensitivity: Sensitivity, delta: float = 0.0
    ) -> FloatArray:
        """Least noise scale giving (ε, δ)-DP at this sensitivity."""
        ...

    def epsilon_for(
        self, scale: npt.ArrayLike, sensitivity: Sensitivity, delta: float = 0.0
    ) -> FloatArray:
        """The ε (at δ) that a noise scale gives at this sensitivity (inverse of scale_for)."""
        ...

    def event(self, scale: float, sensitivity: Sensitivity) -> PrivacyEvent:
        """The privacy event of one release at this scale and sensitivity."""
        ...

    def rmse(self, scale: npt.ArrayLike) -> FloatArray:
        """Root mean squared error of the noise (its standard deviation)."""
        ...

    def error_bound(self, scale: npt.ArrayLike, beta: float = 0.05) -> FloatArray:
        """Half-width t with P(|noise| > t) ≤ β (exact for the distribution)."""
        ...

    def simulate(
        self, true_value: npt.ArrayLike, scale: float, size: int, rng: np.random.Generator
    ) -> FloatArray:
        """Planning-only numpy simulation (never used for a released value)."""
        ...
