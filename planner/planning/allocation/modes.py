"""The split modes: weighted (the optimal split), equal, manual (pinned shares) and target,
and the comparison of rules.

Weighted mode minimises Σ wᵢ·MSEᵢ(θᵢ)/sᵢ² subject to the composed budget ≤ (ε, δ) under a
composition rule: closed forms where they exist, otherwise the rule's dual
(:mod:`.solvers`), then one common factor fitted on the exact accountant (:mod:`.fit`); the
answer is compared with the equal split and the better kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from planner.core.errors import PlanError
from planner.core.rootfind import bisect, bisect_array
from planner.planning.allocation.fit import _scale_by_secant, _scale_to_budget
from planner.planning.allocation.memo import Memo
from planner.planning.allocation.model import (
    Allocation,
    FloatArray,
    Item,
    ItemAllocation,
    Method,
    Target,
    TargetPlan,
    _error_bound,
    _weighted,
    free_delta,
    plan_warnings,
    reserved_delta,
)
from planner.planning.allocation.solvers import (
    _closed_form_applies,
    _Cost,
    _dual_allocation,
    _exact_cost,
    _surrogate,
    _surrogate_rule,
    solver_for,
)
from planner.planning.allocation.workload import _assigned, _Workload
from planner.privacy.accountants import RULES, total_epsilon
from planner.privacy.accountants import rule as rule_of
from planner.privacy.accountants.base import Spend
from planner.privacy.budget import (
    Budget,
    CompositionRule,
    as_budget,
    check_delta,
    check_epsilon,
    within_budget,
)
from planner.privacy.events import ThresholdedEvent

#: The splits already made in this process (:mod:`.memo`): :func:`allocate`,
#: :func:`allocate_equal` and :func:`plan_targets` are pure, and the same workload is planned
#: again by ``planner plan`` (the rule in force, then every rule) and by the Planner page.
SPLITS = Memo()


def _finish(
    wl: _Workload,
    theta: FloatArray,
    rule: CompositionRule,
    epsilon: float,
    delta: float,
    method: Method,
    warnings: tuple[str, ...],
) -> Allocation:
    rho_i = wl.rho_i(theta)
    mse = wl.mse(theta)
    weighted = _weighted(wl.w, mse)
    items = []
    assigned = _assigned(wl, theta, delta)  # δ here is what is left once key releases are reserved
    for k, item in enumerate(wl.items):
        spends = tuple(Spend(e, x, d) for e, x, d in assigned[k])
        if item.delta > 0.0:
            first = spends[0]
            spends = (Spend(ThresholdedEvent(first.event, item.delta), first.epsilon, first.delta + item.delta),
                      *spends[1:])
        items.append(
            ItemAllocation(
                id=item.id,
                family=item.family,
                theta=float(theta[k]),
                epsilon=float(sum(x.epsilon for x in spends)),
                delta=float(sum(x.delta for x in spends)),
                rho=float(rho_i[k]),
                rmse=float(math.sqrt(mse[k])),
                weighted_mse=float(weighted[k]),
                spends=spends,
            )
        )
    total_delta = delta + reserved_delta(wl.items)
    alloc = Allocation(
        rule, epsilon, total_delta, 0.0, float(np.sum(weighted)), method, tuple(items), warnings
    )
    used = float(total_epsilon([s for _, s in alloc.spends()], rule, total_delta))
    return replace(alloc, used_epsilon=used)


def _validate(items: Sequence[Item], epsilon: float, delta: float, rule: CompositionRule) -> None:
    if not items:
        raise PlanError("the workload is empty; add at least one query.")
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        dups = sorted({i for i in ids if ids.count(i) > 1})
        raise PlanError(f"item ids must be unique; {dups} appear more than once: rename the queries they name.")
    check_epsilon(epsilon)
    check_delta(delta)
    if any(i.is_gaussian for i in items) and delta == 0.0:
        raise PlanError(
            "Gaussian mechanisms need δ > 0; set a δ such as 1e-6 or switch those queries to Laplace."
        )
    solver_for(rule).validate(items, delta)


def allocate(
    items: Sequence[Item],
    epsilon: Budget | float,
    delta: float | None = None,
    rule: CompositionRule | str | None = None,
    n: int | None = None,
) -> Allocation:
    """Weighted mode: the split of (ε, δ) minimising Σ wᵢ·MSEᵢ/sᵢ² under ``rule``.

    ``epsilon`` is a :class:`~planner.privacy.budget.Budget` (then without ``delta`` and
    ``rule``), or the total ε with its δ (default 0) and rule (default basic).

    Returns an :class:`Allocation` whose exact composed ε (the ledger's accountant) is
    ≤ ``epsilon`` and ≥ ``epsilon``·(1 − 1e-9), and whose objective is never above the
    equal split's.

    Examples
    --------
    Two Laplace counts of weights 1 and 8 under basic composition at ε = 3: εᵢ ∝ wᵢ^{1/3},
    i.e. 1 : 2, so ε = (1, 2) (docs/mathematics.md §6, by hand):

    >>> from planner.planning.allocation import Family, Item
    >>> a = allocate([Item("a", Family.LAPLACE, 2.0), Item("b", Family.LAPLACE, 2.0, weight=8.0)], 3.0)
    >>> [round(i.theta, 9) for i in a.items]
    [1.0, 2.0]

    The budget may travel as one value (the same split):

    >>> b = allocate([Item("a", Family.LAPLACE, 2.0), Item("b", Family.LAPLACE, 2.0, weight=8.0)], Budget(3.0))
    >>> [i.theta for i in b.items] == [i.theta for i in a.items], b.budget == Budget(3.0, 0.0, "basic")
    (True, True)
    """
    budget = as_budget(epsilon, delta, rule)  # a Budget, or a loose (ε, δ, rule)
    return SPLITS(_allocate, tuple(items), budget, n)


def _allocate(items: tuple[Item, ...], budget: Budget, n: int | None) -> Allocation:
    """:func:`allocate` of a validated budget (what :data:`SPLITS` stores)."""
    rule, epsilon, delta = budget.rule, budget.epsilon, budget.delta
    warnings = plan_warnings(epsilon, delta, n)
    delta = free_delta(items, delta)
    _validate(items, epsilon, delta, rule)
    if all(i.pinned is not None for i in items):
        # A manual split: every θ is fixed; only the share of δ left to Gaussians (advanced
        # composition) is chosen, the one that makes the composed ε smallest.
        share, used = _pinned_best(items, delta, rule)
        if not budget.fits(used):  # the one test of fitting (the ledger's)
            raise PlanError(
                f"the shares cost ε = {used:.6g} under the {rule.value} rule, more than the total "
                f"{epsilon:g}; lower some shares or raise ε."
            )
        return _allocate_once(items, epsilon, delta, rule, share, warnings)
    shares = _delta_shares(items, rule)
    if len(shares) > 1:
        # δ' is chosen by the optimiser: search the share of δ given to the Gaussians.
        best: Allocation | None = None
        for share in shares:  # 1.0: δ' = 0, the basic split
            cand = _allocate_once(items, epsilon, delta, rule, share, warnings)
            if best is None or cand.objective < best.objective:
                best = cand
        assert best is not None
        return best
    return _allocate_once(items, epsilon, delta, rule, 1.0, warnings)


def _allocate_once(
    items: Sequence[Item],
    epsilon: float,
    delta: float,
    rule: CompositionRule,
    gauss_share: float,
    warnings: tuple[str, ...],
) -> Allocation:
    wl = _Workload.build(items, rule, delta, gauss_share)
    cost = _Cost(wl, rule, delta)
    surrogate = _surrogate_rule(rule)
    free = np.array([i.pinned is None for i in items], dtype=bool)
    pinned_theta = np.array(
        [i.pinned if i.pinned is not None else 1.0 for i in items], dtype=np.float64
    )

    def exact(theta: FloatArray) -> float:
        return _exact_cost(wl, rule, delta, theta)

    def fit(theta: FloatArray) -> FloatArray:
        # The fast cost uses the accountant's formulas (for RDP on a coarser order grid, so
        # never below the exact value); a narrow exact pass then lands on the ledger's number.
        theta = _scale_to_budget(cost.value, theta, free, epsilon)
        if surrogate is not rule:  # the surrogate's fit leaves room (PLD ≤ RDP): scale up
            return _scale_by_secant(exact, theta, free, epsilon)
        return _scale_to_budget(exact, theta, free, epsilon, width=1e-6)

    if not free.any():
        used = exact(pinned_theta)
        if not within_budget(used, epsilon):  # the one test of fitting (the ledger's)
            raise PlanError(
                f"the pinned shares cost ε = {used:.6g}, more than the total {epsilon:g}; lower a pinned share."
            )
        return _finish(wl, pinned_theta, rule, epsilon, delta, Method.PINNED, warnings)

    shape = _surrogate(wl, rule)
    start = np.where(free, shape, pinned_theta)
    start = _scale_to_budget(cost.value, start, free, epsilon)
    method = Method.CLOSED_FORM
    theta = start
    # One free item: its error falls as θ grows, so the best is all the budget that is left.
    if int(free.sum()) > 1 and (not _closed_form_applies(wl, rule) or not free.all()):
        method = Method.DUAL
        cand = _dual_allocation(wl, _surrogate_rule(rule), epsilon, delta, free, start)
        if np.all(np.isfinite(cand)) and np.all(cand > 0):
            # a pinned share is the owner's number, exactly (the dual works in log θ)
            theta = np.where(free, cand, pinned_theta)
    reshaped = None
    if surrogate is not rule and method is Method.DUAL:
        reshaped = _surrogate_reshaped(wl, surrogate, exact, epsilon, delta, free, start, theta, pinned_theta)
    theta = fit(theta)
    if reshaped is not None:  # both now cost exactly ε under PLD: keep the better
        reshaped = fit(reshaped)
        if wl.objective(reshaped) < wl.objective(theta):
            theta = reshaped
    equal = fit(np.where(free, 1.0, pinned_theta))
    if wl.objective(equal) < wl.objective(theta):
        theta, method = equal, Method.EQUAL_SPLIT
    return _finish(wl, theta, rule, epsilon, delta, method, warnings)


def _surrogate_reshaped(
    wl: _Workload,
    surrogate: CompositionRule,
    exact: Callable[[FloatArray], float],
    epsilon: float,
    delta: float,
    free: npt.NDArray[np.bool_],
    start: FloatArray,
    theta: FloatArray,
    pinned_theta: FloatArray,
) -> FloatArray:
    """Under a rule optimised as its ``surrogate`` (the optimal rule, PLD, as RDP): the
    surrogate-optimal allocation at the surrogate total E_R whose cost under the rule is
    ``epsilon`` (not the surrogate-optimal shape at ε scaled up uniformly).

    Why (PLD): PLD ≤ RDP leaves room after the RDP solve at ε. Scaling every share by one factor
    fills it, but the RDP-optimal split at a larger total E_R is a better use of that room
    (it is optimal for the surrogate at its own total), and it is the allocation the error
    curve (:func:`planner.planning.allocation.curves._surrogate_error_curve`) describes. E_R is found by the secant method on
    ln(PLD cost) against ln E_R (near-linear: slope ≈ 1), at most 4 dual solves; the caller's
    exact fit then lands it on the budget, and keeps whichever of this and the uniformly
    scaled ``theta`` has the lower objective at the same PLD cost.
    """
    def at(e_r: float) -> FloatArray:
        cand = _dual_allocation(wl, surrogate, e_r, delta, free, start)
        return np.where(free, cand, pinned_theta)

    log_t = math.log(epsilon)
    c0 = exact(theta)
    if not c0 > 0:  # δ covers the whole difference (PLD ε = 0 here): the caller's fit scales up
        return theta
    x0, g0 = log_t, math.log(c0) - log_t  # theta is the RDP solution at ε: g0 ≤ 0
    x1 = x0 - g0 if g0 < -1e-12 else x0
    if x1 == x0:
        return theta
    best, best_gap = theta, abs(g0)
    for _ in range(4):
        cand = at(math.exp(x1))
        if not (np.all(np.isfinite(cand)) and np.all(cand > 0)):
            break
        c1 = exact(cand)
        if not c1 > 0:
            break
        g1 = math.log(c1) - log_t
        if abs(g1) < best_gap:
            best, best_gap = cand, abs(g1)
        if abs(g1) <= 1e-4 or g1 == g0:  # the caller's exact fit removes the rest (a uniform 1e-4)
            break
        x0, g0, x1 = x1, g1, x1 - g1 * (x1 - x0) / (g1 - g0)
    return best


def _delta_shares(items: Sequence[Item], rule: CompositionRule) -> tuple[float, ...]:
    """The shares of δ given to the Gaussian items that the split searches: under a rule
    with a slack δ′ (advanced composition) and Gaussian items, 0.25, 0.5, 0.75 and 1 (δ′ =
    0, the basic split); otherwise only 1."""
    if rule_of(rule).slack_delta and any(i.is_gaussian for i in items):
        return (0.25, 0.5, 0.75, 1.0)
    return (1.0,)


def _theta_for_share(wl: _Workload, share: float, delta: float) -> FloatArray:
    """θ of every item whose standalone ε (:class:`ItemAllocation` ``epsilon``: a pure
    item's ε, a Gaussian's ε at its δᵢ) equals ``share``.

    Pure items: θ = ε. Gaussian items: the ρ whose standalone ε is ``share``, by bisection
    on log ρ (that ε grows with ρ), all Gaussian items at once.
    """
    theta = np.full(len(wl.items), float(share), dtype=np.float64)
    gauss = np.flatnonzero(wl.gauss)
    if gauss.size == 0:
        return theta

    def eps_at(rho: FloatArray) -> FloatArray:
        t = theta.copy()
        t[gauss] = rho
        pairs = _assigned(wl, t, delta)
        return np.array([sum(x for _, x, _ in pairs[k]) for k in gauss], dtype=np.float64)

    lo = np.full(gauss.size, -80.0)
    hi = np.full(gauss.size, 30.0)
    # 90 steps: 110 / 2⁹⁰ is far below a float's resolution of log ρ
    lo, hi = bisect_array(lambda mid: eps_at(np.exp(mid)) > share, lo, hi, iterations=90)
    theta[gauss] = np.exp(lo)  # the lower end: the item's ε never exceeds the share
    return theta


def allocate_equal(
    items: Sequence[Item],
    epsilon: Budget | float,
    delta: float | None = None,
    rule: CompositionRule | str | None = None,
    n: int | None = None,
) -> Allocation:
    """Equal split: every item gets the same standalone ε, the largest whose composition
    under ``rule`` fits ``epsilon`` (a :class:`~planner.privacy.budget.Budget`, or the total ε
    with its δ and rule, as :func:`allocate` takes them).

    Each item's standalone ε is the one :class:`ItemAllocation` reports (a pure item's ε;
    a Gaussian item's ε at its δᵢ); the common value s is found by bisection on the exact
    accountant, so the composed ε is ≤ ``epsilon`` and within 1e-9 relative of it. Weights
    and error scales do not change the split; they only enter the reported objective.
    Pinned shares are ignored (an equal split fixes every share).

    Notes
    -----
    Under basic composition of pure mechanisms Σᵢ s = ε, so s = ε/k for k items. Under
    RDP and zCDP the items compose to less than their sum, so s > ε/k. Under advanced
    composition with Gaussian items, the share of δ left to the Gaussians is searched as in
    :func:`allocate` and the largest s is kept.

    Examples
    --------
    Four Laplace counts under basic composition at ε = 2: each gets 2/4 (by hand):

    >>> from planner.planning.allocation import Family, Item
    >>> a = allocate_equal([Item(k, Family.LAPLACE, 2.0) for k in "abcd"], 2.0)
    >>> [round(i.epsilon, 9) for i in a.items], a.method.value
    ([0.5, 0.5, 0.5, 0.5], 'equal')
    """
    budget = as_budget(epsilon, delta, rule)  # a Budget, or a loose (ε, δ, rule)
    return SPLITS(_allocate_equal, tuple(items), budget, n)


def _allocate_equal(items_in: tuple[Item, ...], budget: Budget, n: int | None) -> Allocation:
    """:func:`allocate_equal` of a validated budget (what :data:`SPLITS` stores)."""
    rule, epsilon, delta = budget.rule, budget.epsilon, budget.delta
    items = [replace(i, pinned=None) if i.pinned is not None else i for i in items_in]
    warnings = plan_warnings(epsilon, delta, n)
    delta = free_delta(items, delta)
    _validate(items, epsilon, delta, rule)
    shares = _delta_shares(items, rule)
    best: tuple[float, _Workload, FloatArray] | None = None
    for gauss_share in shares:
        wl = _Workload.build(items, rule, delta, gauss_share)

        def over(log_s: float, wl: _Workload = wl) -> bool:
            return _exact_cost(wl, rule, delta, _theta_for_share(wl, math.exp(log_s), delta)) > epsilon

        lo, hi = math.log(epsilon / len(items)) - 1.0, math.log(epsilon) + 1.0
        while over(lo):
            lo -= 2.0
            if lo < -700:
                raise PlanError("no equal share fits this budget; raise ε or drop queries.")
        while not over(hi):
            hi += 1.0
            if hi > 700:
                break
        lo, hi = bisect(over, lo, hi, iterations=200, done=lambda a, b: b - a < 1e-13)
        if best is None or lo > best[0]:
            best = (lo, wl, _theta_for_share(wl, math.exp(lo), delta))
    assert best is not None
    _, wl, theta = best
    return _finish(wl, theta, rule, epsilon, delta, Method.EQUAL, warnings)


def pinned_cost(items: Sequence[Item], delta: float = 0.0,
                rule: CompositionRule | str = CompositionRule.BASIC) -> float:
    """The composed ε under ``rule`` of items whose every share is fixed (a manual split):
    what :func:`allocate` checks a fully pinned workload against its budget with.

    Examples
    --------
    Three Laplace counts with ε 0.1, 0.2 and 0.3 under basic composition cost 0.6:

    >>> from planner.planning.allocation import Family, Item
    >>> round(pinned_cost([Item(k, Family.LAPLACE, 2.0, pinned=p) for k, p in zip("abc", (0.1, 0.2, 0.3))]), 12)
    0.6
    """
    rule = CompositionRule(rule)
    delta = free_delta(items, delta)
    missing = [i.id for i in items if i.pinned is None]
    if missing:
        raise PlanError(f"a manual split needs a share for every query; missing for {missing}.")
    _validate(items, 1.0, delta, rule)
    return _pinned_best(items, delta, rule)[1]


def _pinned_best(items: Sequence[Item], delta: float, rule: CompositionRule) -> tuple[float, float]:
    """(share of δ left to Gaussians, composed ε) of a fully pinned workload: the share
    (advanced composition with Gaussians: 0.25, 0.5, 0.75 or 1) that makes ε smallest."""
    theta = np.array([float(i.pinned or 0.0) for i in items], dtype=np.float64)
    shares = _delta_shares(items, rule)
    costs = [(_exact_cost(_Workload.build(items, rule, delta, sh), rule, delta, theta), sh) for sh in shares]
    used, share = min(costs)
    return share, used


def plan_targets(
    items: Sequence[Item],
    targets: dict[str, Target],
    delta: float = 0.0,
    rule: CompositionRule | str = CompositionRule.BASIC,
) -> TargetPlan:
    """Target mode: the least θᵢ meeting each query's target, and the total ε it costs.

    Each target fixes a least θᵢ (errors fall as θ grows and composition is monotone in
    each θᵢ), so the least total is the composition of those θᵢ; every target then holds
    with equality. ``binding`` names the query whose target costs the most budget.
    """
    tp = SPLITS(_plan_targets, tuple(items), dict(targets), delta, CompositionRule(rule))
    return replace(tp, cost_shares=dict(tp.cost_shares))  # the one mutable field: the caller's own copy


def _plan_targets(items: tuple[Item, ...], targets: dict[str, Target], delta: float,
                  rule: CompositionRule) -> TargetPlan:
    """:func:`plan_targets` (what :data:`SPLITS` stores)."""
    delta = check_delta(delta)
    missing = [i.id for i in items if i.id not in targets]
    if missing:
        raise PlanError(f"target mode needs a target for every query; missing for {missing}.")
    theta = np.empty(len(items))
    for k, item in enumerate(items):
        tg = targets[item.id]
        if tg.min_theta is not None:
            theta[k] = tg.min_theta
            continue
        bound = tg.bound * (item.error_scale if tg.relative else 1.0)
        if not (bound > 0 and math.isfinite(bound)):
            raise PlanError(f"query {item.id!r}: the target must be > 0; got {tg.bound}.")
        if not (0 < tg.beta < 1):
            raise PlanError(
                f"query {item.id!r}: the confidence 1−β needs 0 < β < 1; got β = {tg.beta}."
            )
        lo, hi = 1e-12, 1.0
        while _error_bound(item, np.array([hi]), tg.beta)[0] > bound:
            hi *= 2.0
            if hi > 1e15:
                raise PlanError(
                    f"query {item.id!r}: the target ±{bound:g} cannot be met at any budget."
                )
        def met(mid: float, item: Item = item, beta: float = tg.beta, bound: float = bound) -> bool:
            return bool(_error_bound(item, np.array([mid]), beta)[0] <= bound)

        lo, hi = bisect(met, lo, hi, iterations=200, geometric=True, done=lambda a, b: b / a - 1 < 1e-13)
        theta[k] = hi  # the upper end: the target is met
    total_delta, delta = delta, free_delta(items, delta)
    _validate(items, 1.0, delta, rule)
    wl = _Workload.build(items, rule, delta, 0.5)
    alloc = _finish(wl, theta, rule, 1.0, delta, Method.TARGETS, ())
    used = alloc.used_epsilon
    # The share of each query: the drop in total ε if that query were removed.
    shares: dict[str, float] = {}
    for k, item in enumerate(items):
        rest = [s for j, it in enumerate(alloc.items) if j != k for s in it.spends]
        without = float(total_epsilon(rest, rule, total_delta)) if rest else 0.0
        shares[item.id] = used - without
    binding = max(shares, key=lambda key: shares[key])
    return TargetPlan(rule, total_delta, used, binding, alloc.items, shares)


def applicable_rules(items: Sequence[Item], delta: float) -> list[CompositionRule]:
    """Rules that can account for this workload at δ (Gaussians need δ > 0; at δ = 0 only
    the rules :attr:`~planner.privacy.accountants.base.Rule.listed_at_zero_delta`, the others
    giving the same number), in the registry's order."""
    if delta == 0.0:
        if any(i.is_gaussian for i in items):
            return []
        return [name for name, r in RULES.items() if r.listed_at_zero_delta]
    return list(RULES)


def compare_rules(
    items: Sequence[Item], epsilon: float, delta: float, n: int | None = None
) -> dict[CompositionRule, Allocation]:
    """The same workload optimised under every applicable rule."""
    return {r: allocate(items, epsilon, delta, r, n) for r in applicable_rules(items, delta)}
