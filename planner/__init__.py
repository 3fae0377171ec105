"""Privacy Budget Planner: the pure, typed engine.

Nothing in this package imports Streamlit or Altair (enforced by ruff TID251).
Pages and the command line call into it; tests can make every call they make.
"""

from planner.core.errors import PlannerError

__all__ = ["PlannerError"]
__version__ = "0.1.0"
