"""Mechanisms: calibration, privacy cost (as events) and predicted accuracy, vectorised over ε."""

from planner.mechanisms.base import MechanismName, Sensitivity

__all__ = ["MechanismName", "Sensitivity"]
