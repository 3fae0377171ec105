"""Input checks shared by the mechanism modules (private).

Every check raises a :class:`~planner.core.errors.PlannerError` subclass whose message names
the parameter, the constraint, the offending public value and a remedy (docs/engineering.md §1).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError, QueryError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def epsilons(epsilon: npt.ArrayLike, name: str = "epsilon") -> FloatArray:
    """ε as a float array; every entry finite and > 0 (``BudgetError`` otherwise)."""
    eps = np.asarray(epsilon, dtype=np.float64)
    if eps.size == 0:
        raise BudgetError(f"{name} must contain at least one value; got an empty array.")
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0.0):
        bad = float(eps.flat[int(np.argmax(~np.isfinite(eps) | (eps <= 0.0)))])
        raise BudgetError(f"{name} must be > 0 and finite; got {bad}. Pick a positive privacy budget.")
    return eps


def positive(value: npt.ArrayLike, name: str, remedy: str = "") -> FloatArray:
    """A float array, every entry finite and > 0 (``QueryError`` otherwise)."""
    v = np.asarray(value, dtype=np.float64)
    if v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0.0):
        bad = float(v.flat[int(np.argmax(~np.isfinite(v) | (v <= 0.0)))]) if v.size else math.nan
        raise QueryError(f"{name} must be > 0 and finite; got {bad}. {remedy}".rstrip())
    return v


def beta_level(beta: float) -> float:
    """β (the failure probability of an error bound) in (0, 1)."""
    b = float(beta)
    if not (0.0 < b < 1.0):
        raise QueryError(
            f"beta must satisfy 0 < beta < 1; got {b}. Use e.g. 0.05 for a 95% error bound."
        )
    return b


def delta_positive(delta: float) -> float:
    """δ for a Gaussian-family mechanism: 0 < δ < 1."""
    d = float(delta)
    if not (0.0 < d < 1.0) or not math.isfinite(d):
        raise QueryError(
            f"delta must satisfy 0 < delta < 1 for a Gaussian mechanism; got {d}. "
            "Use a small value such as 1e-6, or pick a Laplace mechanism for pure DP."
        )
    return d


def count(value: int, name: str, minimum: int = 1) -> int:
    """An integer ≥ ``minimum``."""
    try:
        v = int(value)
    except (TypeError, ValueError) as exc:
        raise QueryError(f"{name} must be an integer ≥ {minimum}; got {value!r}.") from exc
    if v != value or v < minimum:
        raise QueryError(f"{name} must be an integer ≥ {minimum}; got {value!r}.")
    return v
