"""Fitting shares to a budget exactly: one common factor, found on the exact accountant.

Every allocation's free shares are multiplied by the one factor that makes the exact
composed ε (the ledger's accountant) equal the budget, never above it:
:func:`_scale_to_budget` by Brent's method on the log factor (:mod:`planner.core.rootfind`,
SciPy's own routine, so a plan's θ keep their bits), :func:`_scale_by_secant` for an
accountant too costly for that (the optimal one).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from planner.core import rootfind
from planner.core.errors import PlanError
from planner.planning.allocation.model import FloatArray


def _unreachable(free: npt.NDArray[np.bool_], target: float) -> PlanError:
    """Why no factor brings the cost down to the budget: the pinned shares, or (nothing
    pinned) an accountant whose bound has a floor above it (RDP's orders stop at 4e5: about
    3.4e-5 at δ = 1e-12, found by fuzzing in session 9)."""
    if not bool(np.all(free)):
        return PlanError("the pinned shares alone exceed the total budget; lower them or raise ε.")
    return PlanError(f"ε = {target:g} is below the least ε this rule can certify for these queries at this δ, "
                     "however little each one gets; raise ε or δ, or choose the zcdp or basic rule.")


def _scale_to_budget(
    cost: Callable[[FloatArray], float],
    theta: FloatArray,
    free: npt.NDArray[np.bool_],
    target: float,
    width: float = 1.0,
) -> FloatArray:
    """Multiply the free θ by one factor so the exact cost equals target (never above).

    Brent's method on the log factor (the cost is increasing in it), then a few ulp-sized
    steps down until the cost is ≤ target: the result is feasible and within ~1e-12 of it.
    """
    def at(log_f: float) -> FloatArray:
        t = theta.copy()
        t[free] = theta[free] * math.exp(log_f)
        return t

    def g(log_f: float) -> float:
        return cost(at(log_f)) - target

    lo, hi = -width, width
    while g(lo) > 0:
        lo *= 2.0
        if lo < -700:
            raise _unreachable(free, target)
    while g(hi) <= 0:
        hi *= 2.0
        if hi > 700:
            return at(hi)
    root = rootfind.brentq(g, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=200)
    step = 1e-14
    while g(root) > 0:
        root -= step
        step *= 2.0
    return at(root)


def _scale_by_secant(
    cost: Callable[[FloatArray], float],
    theta: FloatArray,
    free: npt.NDArray[np.bool_],
    target: float,
    rel_tol: float = 1e-9,
    max_evals: int = 14,
) -> FloatArray:
    """:func:`_scale_to_budget` for an expensive cost (the PLD accountant): regula falsi
    (Illinois) on (log factor, ln cost), started from a secant step, stopping when the
    feasible end is within ``rel_tol`` of the target or after ``max_evals`` costs.

    The result is always feasible (cost ≤ target): the feasible end of the bracket.
    """

    def at(u: float) -> FloatArray:
        t = theta.copy()
        t[free] = theta[free] * math.exp(u)
        return t

    log_t = math.log(target)

    def g(u: float) -> float:
        c = cost(at(u))
        return (math.log(c) if c > 0 else -math.inf) - log_t

    u_ok, g_ok = 0.0, g(0.0)
    evals = 1
    while g_ok > 0:  # over budget: step down (PLD ≤ RDP makes this rare)
        u_ok -= max(g_ok, 1e-3) * 2.0
        g_ok = g(u_ok)
        evals += 1
        if u_ok < -700:
            raise _unreachable(free, target)
    # find an over-budget point by secant steps (slope ≥ ~0.5 for every family)
    u_bad, g_bad = math.nan, math.nan
    slope = 1.0
    while not math.isfinite(u_bad):
        # a cost of 0 (δ covers the whole difference, under PLD) has no log: step up e-fold
        u_new = u_ok - g_ok / slope * 1.02 + 1e-12 if math.isfinite(g_ok) else u_ok + 1.0
        g_new = g(u_new)
        evals += 1
        if g_new > 0:
            u_bad, g_bad = u_new, g_new
        else:
            if u_new > u_ok and g_new > g_ok:
                slope = max((g_new - g_ok) / (u_new - u_ok), 1e-3)
            u_ok, g_ok = u_new, g_new
            if -g_ok <= rel_tol:
                return at(u_ok)
        if evals > 60:
            return at(u_ok)
    w_ok, w_bad = g_ok, g_bad  # Illinois weights (the true values stay in g_ok, g_bad)
    side = 0
    while evals < max_evals and -g_ok > rel_tol and u_bad - u_ok > 1e-14:
        width = u_bad - u_ok
        u = u_ok - w_ok * width / (w_bad - w_ok) if math.isfinite(w_ok) else u_ok + width / 2.0
        u = min(max(u, u_ok + width * 1e-3), u_bad - width * 1e-3)
        gu = g(u)
        evals += 1
        if gu > 0:
            u_bad, g_bad, w_bad = u, gu, gu
            if side == 1:
                w_ok /= 2.0
            side = 1
        else:
            u_ok, g_ok, w_ok = u, gu, gu
            if side == -1:
                w_bad /= 2.0
            side = -1
    return at(u_ok)
