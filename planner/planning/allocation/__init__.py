"""Splitting a total privacy budget across a workload (docs/mathematics.md §6).

Each query of a workload is reduced to an :class:`Item`: a *noise family* (how its
error depends on its privacy parameter θ, and which privacy events it emits), its
sensitivity, an importance weight and an optional error scale (so a count and a mean can
share a budget fairly). θ is the query's pure ε for pure mechanisms and its zCDP ρ for
Gaussian ones.

Weighted mode minimises Σ wᵢ·MSEᵢ(θᵢ)/sᵢ² subject to the composed budget ≤ (ε, δ)
under a :class:`~planner.privacy.accounting.CompositionRule`:

* closed forms where they exist — Laplace-type under basic composition,
  εᵢ ∝ (wᵢ cᵢ)^{1/3} (cᵢ = MSE·ε²), and Gaussian under zCDP, ρᵢ ∝ √(wᵢ cᵢ);
* otherwise SLSQP on log θ starting from the rule's surrogate closed form, with the exact
  composed ε as the constraint (RDP: the envelope gradient at the optimal order).

Every answer is then scaled by one common factor, by a root-finder on the exact accountant
(:func:`planner.privacy.accounting.total_epsilon`, the function the ledger uses), so the budget
is met to within 1e-9 relative and never exceeded; and it is compared with the equal
split, the better of the two being returned.

The optimal rule (``pld``, privacy loss distributions) has no separable surrogate, so the
allocation is *optimised under the RDP surrogate and fitted exactly to the PLD accountant*:
the RDP-optimal shares are scaled by the one factor that makes their PLD cost equal the
budget. The PLD accountant never charges more than RDP, so that factor is ≥ 1: every share
grows, every error shrinks, and the answer is never worse than the RDP rule's. It is not
the PLD optimum (which would need the PLD's gradient), only its RDP-shaped approximation:
on 25 random two-query workloads its weighted error was at most 0.16% above a brute-force
search of the split (``tests/engine/test_allocation.py``). The accountant's grid moves with
the shares, so the PLD cost of the scaled shares is not continuous: the fit lands within
~1e-7 of the budget (never above it) rather than 1e-9, and where the cost jumps across the
budget it keeps the feasible side, up to ~2e-4 below (fuzzing found 1.4e-4 in 2 of 2,736
random workloads).

Target mode returns, for per-query error targets, the least θ meeting each target and the
total ε this costs under the rule.

The package, one idea per module:

* :mod:`.model` — items, noise families, their errors and events; the results;
* :mod:`.workload` — a workload's costs vectorised over θ (the accountants' kernels);
* :mod:`.fit` — one common factor fitted on the exact accountant;
* :mod:`.dual` — the Lagrangian dual of a separable budget;
* :mod:`.solvers` — what differs per composition rule (one solver per rule it optimises
  under; the rules themselves are registered in :data:`planner.privacy.accountants.RULES`);
* :mod:`.modes` — weighted, equal, manual and target splits, and the comparison of rules;
* :mod:`.curves` — error curves across ε.

Every public name (and the private ones tests reach for) is importable from here.

References
----------
.. [L21] docs/mathematics.md §6 (closed forms); the Lagrangian of Σ wᵢcᵢ/εᵢ² + λΣεᵢ gives
   εᵢ³ = 2wᵢcᵢ/λ; of Σ wᵢcᵢ/ρᵢ + λΣρᵢ gives ρᵢ² = wᵢcᵢ/λ.
"""

from __future__ import annotations

from planner.planning.allocation.curves import _surrogate_error_curve, error_curve
from planner.planning.allocation.dual import _Dual
from planner.planning.allocation.fit import _scale_by_secant, _scale_to_budget, _unreachable
from planner.planning.allocation.model import (
    EMISSIONS,
    Allocation,
    Emission,
    Family,
    FloatArray,
    Item,
    ItemAllocation,
    Method,
    Target,
    TargetPlan,
    _error_bound,
    _mean_split,
    free_delta,
    item_events,
    item_mse,
    plan_warnings,
    reserved_delta,
)
from planner.planning.allocation.modes import (
    _validate,
    allocate,
    allocate_equal,
    applicable_rules,
    compare_rules,
    pinned_cost,
    plan_targets,
)
from planner.planning.allocation.solvers import (
    SOLVERS,
    Solver,
    _closed_form_applies,
    _Cost,
    _dual_allocation,
    _dual_batch,
    _exact_cost,
    _rho_for_epsilon,
    _surrogate,
    solver_for,
)
from planner.planning.allocation.workload import _assigned, _Workload

__all__ = [
    "EMISSIONS",
    "SOLVERS",
    "Allocation",
    "Emission",
    "Family",
    "FloatArray",
    "Item",
    "ItemAllocation",
    "Method",
    "Solver",
    "Target",
    "TargetPlan",
    "allocate",
    "allocate_equal",
    "applicable_rules",
    "compare_rules",
    "error_curve",
    "free_delta",
    "item_events",
    "item_mse",
    "pinned_cost",
    "plan_targets",
    "plan_warnings",
    "reserved_delta",
    "solver_for",
]
# the private names tests and other modules reach for, kept importable from the package
_PRIVATE = (_Cost, _Dual, _Workload, _assigned, _closed_form_applies, _dual_allocation, _dual_batch, _error_bound,
            _exact_cost, _mean_split, _rho_for_epsilon, _scale_by_secant, _scale_to_budget, _surrogate,
            _surrogate_error_curve, _unreachable, _validate)
