"""What the allocator does per composition rule: one solver per rule it optimises under.

A :class:`Solver` holds every decision the allocator makes differently under a rule: its
fast cost while optimising (:meth:`Solver.fast_cost`), the closed form it may use
(:meth:`Solver.closed_form`), its dual (:meth:`Solver.dual`) and its exact cost (the
ledger's number, :meth:`Solver.exact_cost`). :data:`SOLVERS` has one per rule with a solver
of its own; a registered rule without one (:attr:`planner.privacy.accountants.base.Rule.surrogate`,
e.g. the optimal accountant) is optimised under its surrogate's solver and fitted to its own
accountant (:func:`exact_cost`). What the rules *are* (their δ split, their words) is read
from the rule registry, :data:`planner.privacy.accountants.RULES`.

References
----------
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
   Privacy", NeurIPS 2020, arXiv:2004.00010, Prop. 12 (RDP → (ε, δ)).
.. [KOV15] P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential
   Privacy", ICML 2015, arXiv:1311.0776, Thm 3.5.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import PlanError
from planner.core.rootfind import bisect, bisect_array
from planner.planning.allocation.dual import _Dual
from planner.planning.allocation.memo import Memo
from planner.planning.allocation.model import (
    _GAUSS_FAMILIES,
    _INV_SQ_FAMILIES,
    Family,
    FloatArray,
    Item,
    _weighted,
    item_events,
)
from planner.planning.allocation.workload import _assigned, _Workload
from planner.privacy.accountants import accountant
from planner.privacy.accountants import rule as rule_of
from planner.privacy.accountants.advanced import advanced_total, kov_root_term
from planner.privacy.accountants.rdp import rdp_epsilon
from planner.privacy.accountants.zcdp import conversion, zcdp_to_approx_epsilon
from planner.privacy.accounting import total_assigned_epsilon
from planner.privacy.budget import DEFAULT_ORDERS, CompositionRule


class _Cost:
    """Fast composed ε of a workload under a rule, for the optimiser: the accountants' own
    functions (for RDP on a coarser order grid, so never below the exact value), by the
    solver of the rule it is optimised under (:meth:`Solver.fast_cost`)."""

    def __init__(self, wl: _Workload, rule: CompositionRule, delta: float) -> None:
        self.wl, self.rule, self.delta = wl, _surrogate_rule(rule), delta
        self.solver = solver_for(rule)
        self.orders = np.asarray(DEFAULT_ORDERS[::4])
        self.conv = conversion(self.orders, 0.0, math.log(delta)) if delta > 0 else None

    def value(self, theta: FloatArray) -> float:
        return self.solver.fast_cost(self, theta)


def _surrogate(wl: _Workload, rule: CompositionRule) -> FloatArray:
    """Closed-form shape of the allocation (exact for single-family workloads).

    Rules that compose assigned pairs (basic, advanced): pure θᵢ ∝ (wᵢcᵢ)^{1/3}; Gaussian
    items use the zCDP form ρᵢ ∝ √(wᵢcᵢ), their ρ scale tied to the pure ones by ρ = ε²/2.
    Other rules: ρᵢ ∝ √(wᵢ kᵢ) with kᵢ the MSE·ρ constant (pure: cᵢ/2, exponential: cᵢ/8).
    """
    c = np.empty(len(wl.items))
    for k, item in enumerate(wl.items):
        if item.family is Family.DISCRETE_LAPLACE:
            c[k] = 2.0 * item.sensitivity**2 * item.coef  # small-ε limit of f/(2 sinh²(ε/2Δ))
        else:
            c[k] = item.coef
    # a zero weight still needs a positive share: give it a tiny one (only zero weights —
    # relative error scales make real weights span many decades)
    w = np.where(wl.w > 0, wl.w, 1e-12 * max(float(wl.w.max()), 1e-300))
    theta = np.empty(len(wl.items))
    pure = ~wl.gauss
    if rule_of(rule).reads_assigned:
        theta[pure] = (w[pure] * c[pure]) ** (1 / 3)
        theta[wl.gauss] = np.sqrt(w[wl.gauss] * c[wl.gauss])
    else:
        kk = c.copy()
        kk[pure] = c[pure] / 2.0
        kk[wl.masks[Family.EXPONENTIAL]] = c[wl.masks[Family.EXPONENTIAL]] / 8.0
        rho = np.sqrt(w * kk)
        theta[pure] = np.sqrt(2.0 * rho[pure])
        theta[wl.masks[Family.EXPONENTIAL]] = np.sqrt(8.0 * rho[wl.masks[Family.EXPONENTIAL]])
        theta[wl.gauss] = rho[wl.gauss]
    return theta


def _surrogate_rule(rule: CompositionRule) -> CompositionRule:
    """The rule whose fast cost and dual stand in for ``rule`` while optimising
    (:attr:`planner.privacy.accountants.base.Rule.optimised_as`; PLD: RDP)."""
    return rule_of(rule).optimised_as


def _closed_form_applies(wl: _Workload, rule: CompositionRule) -> bool:
    """Whether the rule's closed form is the exact optimum of this workload."""
    return solver_for(rule).closed_form(frozenset(wl.fam))


def _dual_allocation(
    wl: _Workload,
    rule: CompositionRule,
    epsilon: float,
    delta: float,
    free: npt.NDArray[np.bool_],
    start: FloatArray,
) -> FloatArray:
    """The allocation by the dual method (see :class:`_Dual`); θ of shape (n,), the caller's own.

    Solved once per workload, rule, ε, δ and start (:data:`DUALS`): the optimal rule (PLD) is
    optimised under RDP (:func:`_surrogate_rule`), so comparing the rules asks for the RDP
    solve at the same ε twice, from the same start."""
    return DUALS(_dual_one, wl, rule, epsilon, delta, free, start).copy()


#: The dual solves already made in this process (:class:`~planner.planning.allocation.memo.Memo`).
DUALS = Memo(max_entries=64)


def _dual_one(
    wl: _Workload,
    rule: CompositionRule,
    epsilon: float,
    delta: float,
    free: npt.NDArray[np.bool_],
    start: FloatArray,
) -> FloatArray:
    return np.asarray(
        _dual_batch(wl, rule, np.array([epsilon]), delta, free, start)[0], dtype=np.float64
    )


_PINNED_OVER_BUDGET: Final = "the pinned shares alone use the whole budget; lower them or raise ε."


def _dual_batch(
    wl: _Workload,
    rule: CompositionRule,
    epsilons: FloatArray,
    delta: float,
    free: npt.NDArray[np.bool_],
    start: FloatArray,
) -> FloatArray:
    """Optimal θ for each total ε in ``epsilons`` (one row each), shape (E, n).

    ``start`` (shape (n,)) holds the pinned items' θ and a starting shape for the others.
    The dual of the rule's solver (:meth:`Solver.dual`): :func:`_dual_basic` (also RDP at
    δ = 0), :func:`_dual_zcdp`, :func:`_dual_advanced` and :class:`_RdpOrderSearch`.
    """
    d = _Dual(wl, free)
    u0 = np.broadcast_to(np.log(start), (epsilons.size, start.size)).copy()
    return solver_for(rule).dual(d, epsilons, delta, start, u0)


def _dual_basic(d: _Dual, epsilons: FloatArray, start: FloatArray, u0: FloatArray) -> FloatArray:
    """Basic composition: cᵢ = εᵢ(θᵢ) (pure ε, or a Gaussian's ε at its δᵢ) and
    B = ε − Σ_pinned εᵢ; shape (E, n).

    Raises
    ------
    PlanError
        If the pinned items alone use the whole budget of some row.
    """
    wl = d.wl

    def c_basic(th: FloatArray) -> FloatArray:
        return wl.eps_i(th)

    budget = epsilons - float(c_basic(start[None, :])[0][~d.free].sum())
    u, ok = d.solve(c_basic, budget, u0)
    if not ok.all():
        raise PlanError(_PINNED_OVER_BUDGET)
    return np.asarray(np.exp(u))


def _dual_zcdp(
    d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray, u0: FloatArray
) -> FloatArray:
    """zCDP: cᵢ = ρᵢ(θᵢ) and B = the ρ whose (ε, δ) conversion is ε, less the pinned ρᵢ;
    shape (E, n).

    The zCDP accountant counts pure events by ε where that is cheaper
    (:func:`~planner.privacy.accountants.zcdp.zcdp_epsilon`), so two more splits are feasible: all
    by basic composition (all-pure workloads), and pure items by ε beside Gaussians by ρ
    (:func:`_zcdp_hybrid`, the best division of ε between them). The better of the
    feasible splits is returned, row by row.

    Raises
    ------
    PlanError
        If the pinned items alone use the whole budget of some row.
    """
    wl, free = d.wl, d.free

    def c_z(th: FloatArray) -> FloatArray:
        return wl.rho_i(th)

    budget = _rho_for_epsilon(epsilons, delta) - float(wl.rho_i(start)[~free].sum())
    u, ok = d.solve(c_z, budget, u0)
    if not ok.all():
        raise PlanError(_PINNED_OVER_BUDGET)
    theta = np.exp(u)
    if not wl.gauss.any():
        cand = _dual_batch(wl, CompositionRule.BASIC, epsilons, delta, free, start)
    elif free.all() and not wl.gauss.all():
        cand = _zcdp_hybrid(wl, epsilons, delta, start)
    else:
        return np.asarray(theta)
    better = np.sum(d.f(cand), axis=1) < np.sum(d.f(theta), axis=1)
    return np.asarray(np.where(better[:, None], cand, theta))


def _dual_advanced(d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray) -> FloatArray:
    """Advanced composition (Kairouz, Oh & Viswanath 2015, Thm 3.5); shape (E, n).

    The accountant takes min(basic, KOV), so the basic split is always feasible too: the
    KOV split (:func:`_kov_allocation`) is kept only in the rows where it solved and is
    better.
    """
    wl = d.wl
    basic = _dual_batch(wl, CompositionRule.BASIC, epsilons, delta, d.free, start)
    if wl.delta_prime <= 0:
        return basic
    kov, solved = _kov_allocation(wl, d, epsilons, basic)
    better = solved & (np.sum(d.f(kov), axis=1) < np.sum(d.f(basic), axis=1))
    return np.asarray(np.where(better[:, None], kov, basic))


class _RdpOrderSearch:
    """RDP allocation: the optimum over Rényi orders α, for a batch of total ε.

    At each order α the constraint is separable, cᵢ = εᵢ(α) and B(α) = ε − conversion(α)
    (Canonne, Kamath & Steinke 2020, Prop. 12), and the feasible set is the union over α,
    so the optimum is the best α. A coarse batch of orders for every ε (:meth:`coarse`),
    then bisection in log(α − 1) between the best one and the neighbour it points to
    (:meth:`refine`). The direction is the sign of dV/dα, V(α) the optimal objective at
    order α: by the envelope theorem dV/dα = μ·∂/∂α[Σᵢ εᵢ(α; θ*) + conversion(α)] at the
    solution θ*(α), μ > 0, so it is read off the cost at fixed θ (a central difference,
    no extra solve).
    """

    def __init__(self, d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray) -> None:
        self.d = d
        self.epsilons = epsilons
        self.delta = delta
        self.start = start
        self.log_delta = math.log(delta)
        self.n_e = epsilons.size

    def conv(self, orders: FloatArray) -> FloatArray:
        """The RDP → (ε, δ) conversion term at each order (:func:`conversion`)."""
        return conversion(orders, 0.0, self.log_delta)

    def solve_at(
        self, alpha: FloatArray, u_start: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Solve every row at its order (``alpha`` shape (R,)); returns (u, objective, dV/dα sign)."""
        d, start = self.d, self.start
        a = alpha[:, None]
        n_r = alpha.size
        eps_r = self.epsilons[np.arange(n_r) % self.n_e]
        fixed_r = np.sum(
            np.where(~d.free, d.rdp(np.broadcast_to(start, (n_r, start.size)).copy(), a), 0.0),
            axis=1,
        )
        u, ok = d.solve(lambda th: d.rdp(th, a), eps_r - self.conv(alpha) - fixed_r, u_start)
        obj = np.where(ok, np.sum(d.f(np.exp(u)), axis=1), np.inf)
        x, h = np.log(alpha - 1.0), 1e-4
        ap, am = 1.0 + np.exp(x + h), 1.0 + np.exp(x - h)
        th = np.exp(u)
        slope = (d.rdp(th, ap[:, None]).sum(axis=1) + self.conv(ap)) - (
            d.rdp(th, am[:, None]).sum(axis=1) + self.conv(am)
        )
        return u, obj, slope

    def run(self, u0: FloatArray) -> FloatArray:
        """θ for each total ε, shape (E, n): the best order, then the basic split where it
        is better (all pure: RDP's ε is min(conversion, Σε), so the basic split is
        feasible too) or where no order was feasible."""
        best_obj, best_u = self.refine(*self.coarse(u0))
        theta = np.exp(best_u)
        d = self.d
        wl = d.wl
        if not wl.gauss.any() or not np.all(np.isfinite(best_obj)):
            basic = _dual_batch(
                wl, CompositionRule.BASIC, self.epsilons, self.delta, d.free, self.start
            )
            better = np.sum(d.f(basic), axis=1) < np.where(
                np.isfinite(best_obj), np.sum(d.f(theta), axis=1), np.inf
            )
            theta = np.where(better[:, None], basic, theta)
        return np.asarray(theta)

    def coarse(
        self, u0: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """Solve on every 120th order of :data:`DEFAULT_ORDERS`; returns, per ε row, the best
        objective and its u, the bracket (lo, hi) in x = log(α − 1) that the slope's sign
        points to, the slopes at its ends, and x at the best coarse order."""
        n_e = self.n_e
        coarse = np.asarray(DEFAULT_ORDERS[::120])
        n_a = coarse.size
        # rows ordered (order, ε) so that row r has ε index r % n_e
        u, obj, slope = self.solve_at(np.repeat(coarse, n_e), np.tile(u0, (n_a, 1)))
        obj, slope, u = obj.reshape(n_a, n_e), slope.reshape(n_a, n_e), u.reshape(n_a, n_e, -1)
        rows = np.arange(n_e)
        k = np.argmin(obj, axis=0)
        xs = np.log(coarse - 1.0)
        up = slope[k, rows] < 0  # V still falling at the best order: the optimum lies above it
        k_lo = np.where(up, k, np.maximum(k - 1, 0))
        k_hi = np.where(up, np.minimum(k + 1, n_a - 1), k)
        return (
            obj[k, rows], u[k, rows], xs[k_lo], xs[k_hi],
            slope[k_lo, rows], slope[k_hi, rows], xs[k],
        )

    def refine(
        self,
        best_obj: FloatArray,
        best_u: FloatArray,
        lo: FloatArray,
        hi: FloatArray,
        s_lo: FloatArray,
        s_hi: FloatArray,
        x_best: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        """Six steps of regula falsi on the slope where it changes sign over the bracket,
        else bisection, kept a tenth of the bracket away from its ends; returns the best
        objective and u found, per ε row."""
        for _ in range(6):
            with np.errstate(divide="ignore", invalid="ignore"):
                mid = lo - s_lo * (hi - lo) / (s_hi - s_lo)
            width = hi - lo
            mid = np.where((s_lo < 0) & (s_hi > 0) & np.isfinite(mid), mid, lo + width / 2)
            mid = np.clip(mid, lo + width / 10, hi - width / 10)
            u_m, obj_m, slope_m = self.solve_at(1.0 + np.exp(mid), best_u)
            improve = obj_m < best_obj
            best_obj = np.where(improve, obj_m, best_obj)
            best_u = np.where(improve[:, None], u_m, best_u)
            # infeasible at mid: move towards the best order found so far
            go_up = np.where(np.isfinite(obj_m), slope_m < 0, mid < x_best)
            lo, s_lo = np.where(go_up, mid, lo), np.where(go_up, slope_m, s_lo)
            hi, s_hi = np.where(go_up, hi, mid), np.where(go_up, s_hi, slope_m)
        return best_obj, best_u


def _zcdp_hybrid(wl: _Workload, epsilons: FloatArray, delta: float, start: FloatArray) -> FloatArray:
    """Pure items by basic composition and Gaussian items by zCDP, with the best division
    s·ε | (1 − s)·ε of each total ε between them; shape (E, n).

    Feasible under the zCDP rule: its accountant charges at most Σ pure εᵢ + ε_z(Σ Gaussian
    ρᵢ) (:func:`~planner.privacy.accountants.zcdp.zcdp_epsilon`, the candidate with every pure event
    by ε). s is searched on a grid of 25 values, then by golden section between the best
    one's neighbours; each sub-workload is solved by the dual, all ε rows in one batch.
    """
    pure = ~wl.gauss
    items_p = [it for it, p in zip(wl.items, pure, strict=True) if p]
    items_g = [it for it, p in zip(wl.items, pure, strict=True) if not p]
    wl_p = _Workload.build(items_p, CompositionRule.BASIC, delta, 1.0)
    wl_g = _Workload.build(items_g, CompositionRule.ZCDP, delta, 1.0)
    free_p, free_g = np.ones(len(items_p), dtype=bool), np.ones(len(items_g), dtype=bool)
    n_e = epsilons.size

    def solve(shares: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """For shares (S, E): θ of the pure and Gaussian items and the objective, per row."""
        th_p = _dual_batch(wl_p, CompositionRule.BASIC, (shares * epsilons).ravel(), delta, free_p, start[pure])
        th_g = _dual_batch(wl_g, CompositionRule.ZCDP, ((1.0 - shares) * epsilons).ravel(), delta, free_g, start[~pure])
        obj = np.sum(_weighted(wl_p.w, wl_p.mse(th_p)), axis=1) + np.sum(_weighted(wl_g.w, wl_g.mse(th_g)), axis=1)
        return th_p, th_g, obj.reshape(shares.shape)

    grid = np.linspace(0.02, 0.98, 25)
    shares = np.broadcast_to(grid[:, None], (grid.size, n_e))
    _, _, obj = solve(shares)
    k = np.argmin(obj, axis=0)
    # Golden-section search between the best grid value's neighbours. The objective is
    # convex in s (each part is the minimum of a convex objective under a budget that is
    # linear in s, a convex function of that budget), hence unimodal: the bracket keeps
    # the minimum. 30 steps shrink it by 0.618³⁰ ≈ 5e-7 (s within 4e-8; the objective,
    # flat at its minimum, within ~1e-12 relative).
    lo = grid[np.maximum(k - 1, 0)].astype(np.float64)
    hi = grid[np.minimum(k + 1, grid.size - 1)].astype(np.float64)
    g = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = solve(x1[None, :])[2][0], solve(x2[None, :])[2][0]
    for _ in range(30):
        left = f1 <= f2  # the minimum lies in [lo, x2]: x1 becomes the new upper probe
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        # the surviving probe: x1 moves up to x2's slot (left) or x2 down to x1's
        x_keep, f_keep = np.where(left, x1, x2), np.where(left, f1, f2)
        x1, f1, x2, f2 = x_keep, f_keep, x_keep, f_keep
        x_new = np.where(left, hi - g * (hi - lo), lo + g * (hi - lo))
        f_new = solve(x_new[None, :])[2][0]
        x1, f1 = np.where(left, x_new, x1), np.where(left, f_new, f1)
        x2, f2 = np.where(left, x2, x_new), np.where(left, f2, f_new)
    cands = np.stack([grid[k], x1, x2])  # (3, E): the best grid value and the final pair
    th_p, th_g, obj_c = solve(cands)
    best = np.argmin(obj_c, axis=0)
    rows = np.arange(n_e)
    th_p = th_p.reshape(3, n_e, len(items_p))
    th_g = th_g.reshape(3, n_e, len(items_g))
    theta = np.empty((n_e, len(wl.items)))
    theta[:, pure] = th_p[best, rows]
    theta[:, ~pure] = th_g[best, rows]
    return theta


def _kov_allocation(
    wl: _Workload, d: _Dual, epsilons: FloatArray, start: FloatArray
) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Advanced composition (KOV Thm 3.5) with the square root linearised at the current
    S = Σεᵢ² of each row (see :class:`_Dual`), iterated to a fixed point; shape (E, n).

    Every solved iterate is feasible whatever the start (the tangent of the concave square
    root lies above it). Returns ``(θ, solved)``: rows where no linearisation left room
    for the free items (``solved`` False) keep ``start``, which the caller must replace.
    """
    fixed = ~d.free
    theta = start.copy()
    solved = np.zeros(epsilons.size, dtype=bool)
    live = np.ones(epsilons.size, dtype=bool)
    eps_rows = wl.eps_i

    for _ in range(30):
        e = eps_rows(theta)
        s_sq = np.maximum(np.sum(e**2, axis=1, keepdims=True), 1e-300)
        root, slope = kov_root_term(s_sq, wl.delta_prime)

        def c_adv(th: FloatArray, slope: FloatArray = slope) -> FloatArray:
            ee = eps_rows(th)
            return np.asarray(ee * np.tanh(ee / 2) + slope * ee**2)

        fixed_cost = np.sum(np.where(fixed, c_adv(theta), 0.0), axis=1, keepdims=True)
        # h(S′) ≤ h(S) + h′(S)(S′ − S): T′ + h′(S)·S′ ≤ ε − h(S) + h′(S)·S
        b = (epsilons[:, None] - root + slope * s_sq - fixed_cost)[:, 0]
        live &= b > 0  # no room left at this linearisation: keep the last feasible iterate
        if not live.any():
            break
        u, _ = d.solve(c_adv, np.where(live, b, -1.0), np.log(theta))
        new = np.where(live[:, None], np.exp(u), theta)
        solved |= live
        change = np.max(np.abs(np.log(new / theta)), axis=1)
        theta = new
        live &= change >= 1e-10
        if not live.any():
            break
    return theta, solved


def _rho_for_epsilon(epsilon: npt.ArrayLike, delta: float) -> FloatArray:
    """The ρ whose zCDP → (ε, δ) conversion equals each ε (vectorised bisection on the
    accountant's own conversion; the lower end, so converting back never exceeds ε)."""
    eps = np.atleast_1d(np.asarray(epsilon, dtype=np.float64))
    if eps.size == 1 and math.isfinite(eps[0]) and eps[0] >= 0.0:
        return np.full(eps.shape, _rho_for_one_epsilon(float(eps[0]), delta))
    lo = np.zeros_like(eps)
    hi = np.maximum(eps, 1.0)
    while np.any(zcdp_to_approx_epsilon(hi, delta) < eps):
        hi = np.where(zcdp_to_approx_epsilon(hi, delta) < eps, hi * 2.0, hi)
    lo, hi = bisect_array(lambda mid: ~(zcdp_to_approx_epsilon(mid, delta) <= eps), lo, hi, iterations=200,
                          done=lambda a, b: bool(np.all(b - a <= 1e-15 * b)))
    return np.asarray(lo, dtype=np.float64)


def _rho_for_one_epsilon(eps: float, delta: float) -> float:
    """:func:`_rho_for_epsilon` of one finite ε ≥ 0, in Python floats: the same bisection,
    the same midpoints (``(lo + hi) / 2`` is correctly rounded either way) and the same
    conversion bits (:func:`zcdp_to_approx_epsilon` of one value), hence the same ρ, bit for
    bit, without NumPy's per-call cost on one-element arrays (the zCDP split converts
    thousands of single values per plan)."""

    def conv(rho: float) -> float:
        return float(zcdp_to_approx_epsilon(rho, delta))

    lo, hi = 0.0, max(eps, 1.0)
    while conv(hi) < eps:
        hi *= 2.0
    lo, hi = bisect(lambda mid: not conv(mid) <= eps, lo, hi, iterations=200, done=lambda a, b: b - a <= 1e-15 * b)
    return lo


def _exact_cost(wl: _Workload, rule: CompositionRule, delta: float, theta: FloatArray) -> float:
    """The composed ε of the items at θ, by the ledger's own accountant: the rule's solver
    computes it with the accountant's own functions (skipping the Spend records), and a
    rule without a solver of its own (PLD) composes the events with its accountant."""
    own = SOLVERS.get(rule)
    if own is not None:
        return own.exact_cost(wl, delta, theta)
    evs = [e for k, item in enumerate(wl.items) for e in item_events(item, float(theta[k]))]
    return float(accountant(rule).compose(evs).epsilon(delta))


# --------------------------------------------------------------------------------------
# The solvers, one per rule the allocator optimises under
# --------------------------------------------------------------------------------------


class Solver(ABC):
    """Every decision the allocator makes differently under one composition rule."""

    rule: ClassVar[CompositionRule]

    @abstractmethod
    def fast_cost(self, cost: _Cost, theta: FloatArray) -> float:
        """The composed ε at θ while optimising (the accountant's formulas, never below the
        exact value)."""
        ...

    def closed_form(self, families: frozenset[Family]) -> bool:
        """Whether the surrogate shape (:func:`_surrogate`) is the exact optimum of a
        workload of these families."""
        return False

    @abstractmethod
    def dual(self, d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray, u0: FloatArray) -> FloatArray:
        """The optimal θ for each total ε (:func:`_dual_batch`)."""
        ...

    @abstractmethod
    def exact_cost(self, wl: _Workload, delta: float, theta: FloatArray) -> float:
        """The ledger's composed ε of the items at θ."""
        ...

    def validate(self, items: Sequence[Item], delta: float) -> None:
        """Refuse a workload the rule cannot account for (beyond the common checks); by
        default every workload the common checks pass."""
        return None


class BasicSolver(Solver):
    """Basic composition: the εᵢ add up; Laplace-type workloads have the closed form
    εᵢ ∝ (wᵢcᵢ)^{1/3}."""

    rule = CompositionRule.BASIC

    def fast_cost(self, cost: _Cost, theta: FloatArray) -> float:
        return float(cost.wl.eps_i(theta).sum())

    def closed_form(self, families: frozenset[Family]) -> bool:
        return families <= _INV_SQ_FAMILIES

    def dual(self, d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray, u0: FloatArray) -> FloatArray:
        return _dual_basic(d, epsilons, start, u0)

    def exact_cost(self, wl: _Workload, delta: float, theta: FloatArray) -> float:
        # basic / advanced read the assigned (εᵢ, δᵢ): total_epsilon without the Spend records
        pairs = [p for per_item in _assigned(wl, theta, delta) for p in per_item]
        eps = np.array([x for _, x, _ in pairs], dtype=np.float64)
        dls = np.array([d for _, _, d in pairs], dtype=np.float64)
        return float(total_assigned_epsilon(eps, dls, self.rule, delta))


class AdvancedSolver(BasicSolver):
    """Advanced composition (KOV Thm 3.5): the basic split, or the KOV split where it is
    better (:func:`_dual_advanced`)."""

    rule = CompositionRule.ADVANCED

    def fast_cost(self, cost: _Cost, theta: FloatArray) -> float:
        return advanced_total(cost.wl.eps_i(theta), cost.wl.delta_prime)

    def closed_form(self, families: frozenset[Family]) -> bool:
        return False

    def dual(self, d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray, u0: FloatArray) -> FloatArray:
        return _dual_advanced(d, epsilons, delta, start)


class ZcdpSolver(Solver):
    """zCDP: the ρᵢ add up; Gaussian workloads have the closed form ρᵢ ∝ √(wᵢcᵢ)."""

    rule = CompositionRule.ZCDP

    def fast_cost(self, cost: _Cost, theta: FloatArray) -> float:
        return cost.wl.zcdp_epsilon(theta, cost.delta)

    def closed_form(self, families: frozenset[Family]) -> bool:
        return families <= _GAUSS_FAMILIES

    def dual(self, d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray, u0: FloatArray) -> FloatArray:
        return _dual_zcdp(d, epsilons, delta, start, u0)

    def exact_cost(self, wl: _Workload, delta: float, theta: FloatArray) -> float:
        return wl.zcdp_epsilon(theta, delta)  # the accountant's zcdp_epsilon on the kernels' ρ

    def validate(self, items: Sequence[Item], delta: float) -> None:
        if delta == 0.0 and any(i.is_gaussian for i in items):
            raise PlanError("zCDP with δ = 0 cannot convert to (ε, δ); set δ > 0.")


class RdpSolver(Solver):
    """RDP: the best Rényi order's separable split (:class:`_RdpOrderSearch`); at δ = 0 RDP
    is basic composition."""

    rule = CompositionRule.RDP

    def fast_cost(self, cost: _Cost, theta: FloatArray) -> float:
        wl = cost.wl
        if cost.conv is None:
            return wl.pure_total(theta)
        th = np.broadcast_to(theta, (cost.orders.size, theta.size))
        curve = wl.rdp(th, cost.orders[:, None]).sum(axis=1) + cost.conv
        return min(float(curve.min()), wl.pure_total(theta))

    def dual(self, d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray, u0: FloatArray) -> FloatArray:
        if delta == 0.0:
            return _dual_basic(d, epsilons, start, u0)
        return _RdpOrderSearch(d, epsilons, delta, start).run(u0)

    def exact_cost(self, wl: _Workload, delta: float, theta: FloatArray) -> float:
        # the accountant's own function: total_epsilon is rdp_epsilon under RDP
        return float(
            rdp_epsilon([e for k, item in enumerate(wl.items) for e in item_events(item, float(theta[k]))], delta)[0]
        )


#: The rules with a solver of their own (the others are optimised under their surrogate).
SOLVERS: Final[dict[CompositionRule, Solver]] = {s.rule: s for s in (BasicSolver(), AdvancedSolver(), ZcdpSolver(),
                                                                      RdpSolver())}


def solver_for(rule: CompositionRule | str) -> Solver:
    """The solver the allocator uses under ``rule``: its own, else its surrogate's."""
    return SOLVERS[rule_of(rule).optimised_as]
