"""Names and value types shared by every mechanism family."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from planner.errors import QueryError


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


@dataclass(frozen=True, slots=True)
class Sensitivity:
    """L1 and L2 sensitivity of a query under a schema (MATH.md §2). Both > 0, finite."""

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
