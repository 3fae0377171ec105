"""Mechanisms: calibration, privacy cost (as events) and predicted accuracy, vectorised over ε."""

from planner.planning.mechanisms.base import AdditiveNoise, MechanismName, Sensitivity
from planner.planning.mechanisms.gaussian import (
    DISCRETE_GAUSSIAN,
    GAUSSIAN,
    DiscreteGaussianMechanism,
    GaussianMechanism,
)
from planner.planning.mechanisms.laplace import (
    DISCRETE_LAPLACE,
    LAPLACE,
    DiscreteLaplaceMechanism,
    LaplaceMechanism,
)
from planner.planning.mechanisms.registry import ADDITIVE, additive

__all__ = [
    "ADDITIVE",
    "DISCRETE_GAUSSIAN",
    "DISCRETE_LAPLACE",
    "GAUSSIAN",
    "LAPLACE",
    "AdditiveNoise",
    "DiscreteGaussianMechanism",
    "DiscreteLaplaceMechanism",
    "GaussianMechanism",
    "LaplaceMechanism",
    "MechanismName",
    "Sensitivity",
    "additive",
]
