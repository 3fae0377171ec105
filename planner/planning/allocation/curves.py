"""Error curves: the total weighted error of the optimal split at each total ε, all ε in
one batch (the Planner's chart of the rules across ε)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from planner.planning.allocation.dual import _Dual
from planner.planning.allocation.fit import _scale_to_budget
from planner.planning.allocation.model import FloatArray, Item, free_delta, item_events
from planner.planning.allocation.modes import _validate
from planner.planning.allocation.solvers import (
    _Cost,
    _dual_batch,
    _kov_allocation,
    _surrogate,
)
from planner.planning.allocation.workload import _Workload
from planner.privacy.accountants import accountant
from planner.privacy.accountants import rule as rule_of
from planner.privacy.budget import CompositionRule, check_epsilon


def _surrogate_error_curve(
    items: Sequence[Item], eps: FloatArray, delta: float, free: npt.NDArray[np.bool_], rule: CompositionRule
) -> FloatArray:
    """The error curve of a rule optimised as its surrogate (the optimal rule, PLD, as RDP).

    Its allocations are the surrogate-optimal shares rescaled to the rule's budget
    (:func:`~planner.planning.allocation.modes.allocate`), so the surrogate-optimal
    allocation at total E_R *is* the rule's allocation at total E_P = its cost under the
    rule (≤ E_R). The curve solves the surrogate on a grid of E_R reaching past the largest
    ε asked for, computes each row's cost with the rule's accountant, and interpolates
    ln(objective) against ln E_P (both increase along the grid) at each ln ε: exact at the
    grid's points, interpolated between them.
    """
    rdp = rule_of(rule).optimised_as
    wl = _Workload.build(items, rdp, delta, 1.0)
    shape = np.where(free, _surrogate(wl, rdp), [i.pinned or 1.0 for i in items])
    lo, hi = float(eps.min()), float(eps.max())
    top = hi * 1.25
    acct = accountant(rule)
    for _ in range(6):
        grid = np.geomspace(lo, top, max(eps.size, 10) + 6)
        start = _scale_to_budget(_Cost(wl, rdp, delta).value, shape, free, float(np.median(grid)))
        theta = _dual_batch(wl, rdp, grid, delta, free, start)
        objective = np.sum(_Dual(wl, free).f(theta), axis=1)
        e_pld = np.array([
            acct.compose([e for k, item in enumerate(items) for e in item_events(item, float(row[k]))]).epsilon(delta)
            for row in theta
        ])
        if float(e_pld.max()) >= hi:
            break
        top *= 1.5
    order = np.argsort(e_pld)
    return np.asarray(np.exp(np.interp(np.log(eps), np.log(e_pld[order]), np.log(objective[order]))), dtype=np.float64)


def error_curve(
    items: Sequence[Item], epsilons: npt.ArrayLike, delta: float, rule: CompositionRule | str
) -> FloatArray:
    """Total weighted error (Σ wᵢ MSEᵢ/sᵢ², the objective) of the optimal split at each total ε.

    All ε are solved as one batch by the dual method; each point is the true objective of
    an allocation whose composed ε (the accountant's formulas; at a fixed Rényi order the
    conversion is exact) is within 1e-9 relative of that total. It skips the final exact
    fit of :func:`allocate`, so a point can sit a little above ``allocate(...).objective``,
    or below it by at most the 1e-9 tolerance's effect (~2e-9 relative).
    """
    rule = CompositionRule(rule)
    eps = np.asarray(epsilons, dtype=np.float64)
    for e in eps:
        check_epsilon(float(e))
    delta = free_delta(items, delta)
    _validate(items, float(eps.min()), delta, rule)
    free = np.array([i.pinned is None for i in items], dtype=bool)

    def solved_at(share: float, r: CompositionRule) -> tuple[_Workload, FloatArray]:
        wl = _Workload.build(items, rule, delta, share)
        shape = np.where(free, _surrogate(wl, rule), [i.pinned or 1.0 for i in items])
        start = _scale_to_budget(_Cost(wl, rule, delta).value, shape, free, float(np.median(eps)))
        return wl, _dual_batch(wl, r, eps, delta, free, start)

    r = rule_of(rule)
    if r.optimised_as is not rule:
        return _surrogate_error_curve(items, eps, delta, free, rule)
    if not (r.slack_delta and any(i.is_gaussian for i in items)):
        wl, theta = solved_at(1.0, rule)
        return np.asarray(np.sum(_Dual(wl, free).f(theta), axis=1))
    # A slack δ' with Gaussians (advanced composition): δ' is searched as in allocate().
    # Share 1 (δ' = 0) is the basic split, feasible and better than basic at any smaller
    # share (larger εᵢ), so it is solved once and starts the KOV iteration at the others.
    wl1, basic = solved_at(1.0, CompositionRule.BASIC)
    best = np.sum(_Dual(wl1, free).f(basic), axis=1)
    for share in (0.25, 0.5, 0.75):
        wl = _Workload.build(items, rule, delta, share)
        d = _Dual(wl, free)
        kov, solved = _kov_allocation(wl, d, eps, basic)
        best = np.minimum(best, np.where(solved, np.sum(d.f(kov), axis=1), np.inf))
    return np.asarray(best)
