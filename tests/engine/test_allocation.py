"""Tests of the budget allocator (planner/planning/allocation.py; docs/mathematics.md §6, issue 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.core.errors import PlanError
from planner.planning.allocation import (
    Family,
    Item,
    Target,
    _error_bound,
    allocate,
    compare_rules,
    error_curve,
    plan_targets,
)
from planner.privacy.accounting import CompositionRule, total_epsilon, zcdp_to_approx_epsilon

RULES = list(CompositionRule)


def test_allocate_laplace_basic_matches_closed_form() -> None:
    # docs/mathematics.md §6: Laplace under basic composition, MSEᵢ = cᵢ/εᵢ² with cᵢ = 2Δᵢ²,
    # Σεᵢ = E  ⇒  εᵢ = E·(wᵢcᵢ)^{1/3} / Σⱼ(wⱼcⱼ)^{1/3}.
    rng = np.random.default_rng(7)
    w = rng.uniform(0.1, 10, 6)
    d = rng.uniform(0.5, 100, 6)
    items = [Item(f"q{i}", Family.LAPLACE, 2 * d[i] ** 2, weight=w[i]) for i in range(6)]
    a = allocate(items, 2.5)
    shape = (w * 2 * d**2) ** (1 / 3)
    expected = 2.5 * shape / shape.sum()
    got = np.array([i.theta for i in a.items])
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert a.method == "closed form"


def test_allocate_laplace_basic_closed_form_with_error_scales_over_many_decades() -> None:
    # Regression: relative error scales make wᵢ = weightᵢ/sᵢ² span ~20 decades (a count
    # measured against n = 5e4, an income total against 6e9, a proportion against 1).
    # The closed form εᵢ ∝ (wᵢcᵢ)^{1/3} (docs/mathematics.md §6) must still hold exactly.
    scales = np.array([5e4, 6.25e9, 1.0, 8.3e3, 1.0])
    coefs = np.array([2.0, 1.25e11, 8e-10, 2.0, 3.2e-9])
    items = [Item(f"q{i}", Family.LAPLACE, coefs[i], error_scale=scales[i]) for i in range(5)]
    a = allocate(items, 1.0)
    shape = (coefs / scales**2) ** (1 / 3)
    np.testing.assert_allclose([i.theta for i in a.items], shape / shape.sum(), rtol=1e-6)
    assert a.method == "closed form"


def test_allocate_gaussian_zcdp_matches_closed_form() -> None:
    # docs/mathematics.md §6: Gaussian under zCDP, MSEᵢ = Δᵢ²/(2ρᵢ), Σρᵢ = ρ ⇒ ρᵢ ∝ √wᵢ·Δᵢ.
    # ρ is the budget's zCDP equivalent: zcdp_to_approx_epsilon(ρ, δ) = ε.
    w = np.array([1.0, 4.0, 9.0])
    d = np.array([1.0, 1.0, 3.0])
    items = [Item(f"g{i}", Family.GAUSSIAN, d[i] ** 2 / 2, weight=w[i]) for i in range(3)]
    a = allocate(items, 1.0, 1e-6, CompositionRule.ZCDP)
    rho = np.array([i.theta for i in a.items])
    shape = np.sqrt(w) * d
    np.testing.assert_allclose(rho / rho.sum(), shape / shape.sum(), rtol=1e-6)
    assert float(zcdp_to_approx_epsilon(rho.sum(), 1e-6)) == pytest.approx(1.0, rel=1e-9)


@st.composite
def workloads(draw: st.DrawFn) -> list[Item]:
    n = draw(st.integers(1, 5))
    fams = [
        Family.LAPLACE,
        Family.GAUSSIAN,
        Family.EXPONENTIAL,
        Family.PURE,
        Family.DISCRETE_LAPLACE,
        Family.MEAN_LAPLACE,
    ]
    items = []
    for i in range(n):
        fam = draw(st.sampled_from(fams))
        coef = draw(st.floats(0.5, 500.0))
        items.append(
            Item(
                f"q{i}",
                fam,
                coef,
                sensitivity=draw(st.floats(0.5, 5.0)),
                weight=draw(st.floats(0.1, 10.0)),
                part_b=draw(st.floats(0.1, 5.0)) if fam is Family.MEAN_LAPLACE else 0.0,
            )
        )
    return items


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=workloads(), eps=st.floats(0.05, 8.0), rule=st.sampled_from(RULES))
def test_allocate_meets_budget_and_beats_equal_split(
    items: list[Item], eps: float, rule: CompositionRule
) -> None:
    delta = 1e-6
    a = allocate(items, eps, delta, rule)
    # never over budget, and uses it to within 1e-9 relative (issue 4, item 1)
    spends = [s for _, s in a.spends()]
    used = total_epsilon(spends, rule, delta)
    assert used <= eps * (1 + 1e-12)
    # the PLD cost jumps where its grid changes with the shares: the fit keeps the feasible
    # side of a jump (planner.planning.allocation's docstring; 1.4e-4 found by fuzzing, session 9)
    assert used >= eps * (1 - (2e-4 if rule is CompositionRule.PLD else 1e-9))
    # never worse than the equal split (all pinned to the same share, scaled to the budget)
    eq = allocate([_replace_pinned(i, None) for i in items], eps, delta, rule)
    assert a.objective <= eq.objective * (1 + 1e-12)
    # equal split computed independently: equal θ for every item, scaled to the budget
    eq_obj = _equal_split_objective(items, eps, delta, rule)
    assert a.objective <= eq_obj * (1 + 1e-8)  # the reference bisection stops at 1e-10 in θ


def _replace_pinned(item: Item, pinned: float | None) -> Item:
    return Item(
        item.id,
        item.family,
        item.coef,
        item.sensitivity,
        item.weight,
        item.error_scale,
        item.part_b,
        pinned,
    )


def _equal_split_objective(
    items: list[Item], eps: float, delta: float, rule: CompositionRule
) -> float:
    """Pin every item to the same θ = t and bisect t so the budget is met (independent of
    the allocator's internals apart from the pinned path)."""
    lo, hi = 1e-9, 1e3
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        try:
            allocate([_replace_pinned(i, mid) for i in items], eps, delta, rule)
            lo = mid
        except PlanError:
            hi = mid
        if hi / lo - 1 < 1e-10:
            break
    return allocate([_replace_pinned(i, lo) for i in items], eps, delta, rule).objective


def test_pinned_path_survives_a_hopeless_probe_under_pld() -> None:
    # The brute-force test below once failed here (hypothesis: Gaussian a, Laplace b,
    # wb = 1, ε = 0.8125, PLD): with a pinned at θ = 0.0165 the bisection for b's θ probed
    # a Laplace at ε₀ ≈ 3e15 and the PLD accountant raised a ValueError. b takes the rest.
    a = _replace_pinned(Item("a", Family.GAUSSIAN, 2.0), 0.01649197395550419)
    got = allocate([a, Item("b", Family.LAPLACE, 50.0, weight=1.0)], 0.8125, 1e-6, CompositionRule.PLD)
    assert math.isfinite(got.objective) and got.items[0].theta == 0.01649197395550419


@pytest.mark.parametrize(("eps", "delta"), [(1e-5, 1e-3), (1e-3, 0.01), (0.01, 0.05)])
def test_pld_split_where_delta_covers_the_whole_difference(eps: float, delta: float) -> None:
    # Found by fuzzing (session 9): at these (ε, δ) the RDP-optimal shares cost exactly 0
    # under the optimal accountant (δ at least the composition's total variation), and the
    # refinement took log(0): a bare "math domain error". The split must spend within ε.
    items = [Item("a", Family.LAPLACE, 2.0), Item("b", Family.LAPLACE, 2.0, weight=8.0)]
    got = allocate(items, eps, delta, CompositionRule.PLD)
    assert all(math.isfinite(i.theta) and i.theta > 0 for i in got.items)
    from planner.planning.allocation import item_events
    from planner.privacy.accountants import accountant

    spent = accountant("pld").compose(
        [e for item, a in zip(items, got.items, strict=True) for e in item_events(item, a.theta)]).epsilon(delta)
    assert 0.9 * eps <= spent <= eps * (1 + 1e-9)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fam_a=st.sampled_from([Family.LAPLACE, Family.GAUSSIAN, Family.DISCRETE_LAPLACE]),
    fam_b=st.sampled_from([Family.LAPLACE, Family.GAUSSIAN, Family.EXPONENTIAL]),
    wb=st.floats(0.1, 10.0),
    eps=st.floats(0.1, 4.0),
    rule=st.sampled_from(RULES),
)
def test_allocate_two_queries_no_worse_than_brute_force(
    fam_a: Family, fam_b: Family, wb: float, eps: float, rule: CompositionRule
) -> None:
    # Brute force: pin query a on a fine log grid of θ, give the rest of the budget to b
    # (the pinned path bisects b's θ on the exact accountant), keep the best objective.
    delta = 1e-6
    a_item = Item("a", fam_a, 2.0 if fam_a is not Family.DISCRETE_LAPLACE else 1.0)
    b_item = Item("b", fam_b, 50.0, weight=wb)
    ours = allocate([a_item, b_item], eps, delta, rule).objective
    best = math.inf
    for theta_a in np.geomspace(1e-3, 20.0, 160):
        try:
            cand = allocate([_replace_pinned(a_item, float(theta_a)), b_item], eps, delta, rule)
        except PlanError:
            continue
        best = min(best, cand.objective)
    # The optimal rule is optimised under its RDP surrogate and fitted exactly to the PLD
    # accountant (planner/planning/allocation.py, module docstring): feasible, not the PLD optimum.
    # Measured gaps to this brute force on 25 random two-query workloads (2026-11-24):
    # at most 1.6e-3 (Laplace + exponential, ε = 0.1), most below 6e-4, some negative (the
    # grid misses the optimum); 5e-3 bounds them with room, so the property tested is
    # "within 0.5% of the best split". Every other rule is solved to 1e-6.
    assert ours <= best * (1 + (5e-3 if rule is CompositionRule.PLD else 1e-6))


def test_pinned_share_is_kept_and_rest_optimised() -> None:
    items = [
        Item("fixed", Family.LAPLACE, 2.0, pinned=0.4),
        Item("a", Family.LAPLACE, 2.0),
        Item("b", Family.LAPLACE, 2.0, weight=8.0),
    ]
    a = allocate(items, 1.0)
    got = {i.id: i.theta for i in a.items}
    assert got["fixed"] == 0.4
    # the remaining 0.6 splits 1 : 2 (weights 1 and 8, cube root), by hand: 0.2 and 0.4
    assert got["a"] == pytest.approx(0.2, rel=1e-6)
    assert got["b"] == pytest.approx(0.4, rel=1e-6)


def test_pinned_shares_over_budget_is_a_clear_error() -> None:
    with pytest.raises(PlanError, match="pinned"):
        allocate([Item("a", Family.LAPLACE, 2.0, pinned=2.0), Item("b", Family.LAPLACE, 2.0)], 1.0)


def test_target_mode_meets_every_target_and_one_percent_less_breaks_one() -> None:
    items = [
        Item("count", Family.LAPLACE, 2.0),
        Item("income_sum", Family.GAUSSIAN, 150_000.0**2 / 2),
        Item("smoker", Family.DISCRETE_LAPLACE, 1.0 / 50_000.0**2),
    ]
    targets = {"count": Target(50.0), "income_sum": Target(1e6), "smoker": Target(0.02)}
    for rule in RULES:
        plan = plan_targets(items, targets, 1e-6, rule)
        for it, alloc in zip(items, plan.items, strict=True):
            bound = _error_bound(it, np.array([alloc.theta]), 0.05)[0]
            assert bound <= targets[it.id].bound * (1 + 1e-9)
        # any split of 99% of that total misses at least one target
        for weights in ([1, 1, 1], [10, 1, 0.1], [0.1, 1, 10]):
            wl = [_with_weight(i, w) for i, w in zip(items, weights, strict=True)]
            a = allocate(wl, plan.total_epsilon * 0.99, 1e-6, rule)
            broken = [
                _error_bound(i, np.array([x.theta]), 0.05)[0] > targets[i.id].bound
                for i, x in zip(items, a.items, strict=True)
            ]
            assert any(broken), (rule, weights)
        assert plan.binding in targets


def _with_weight(item: Item, w: float) -> Item:
    return Item(item.id, item.family, item.coef, item.sensitivity, w, item.error_scale, item.part_b)


def test_target_relative_uses_the_error_scale() -> None:
    # "within 2% of a declared scale of 10,000" = ±200 at 95%; Laplace b·ln(20) = 200 ⇒
    # b = 200/ln 20, ε = Δ/b with Δ = 1 (MSE coefficient 2Δ² = 2); by hand.
    items = [Item("c", Family.LAPLACE, 2.0, error_scale=10_000.0)]
    plan = plan_targets(items, {"c": Target(0.02, relative=True)})
    assert plan.total_epsilon == pytest.approx(math.log(20) / 200, rel=1e-9)


def test_compare_rules_match_the_accountant_and_rdp_beats_basic_for_many_gaussians() -> None:
    items = [
        Item(f"g{i}", Family.DISCRETE_GAUSSIAN, 0.5) for i in range(50)
    ]  # as the product plans Gaussians
    out = compare_rules(items, 1.0, 1e-6)
    for rule, alloc in out.items():
        spends = [s for _, s in alloc.spends()]
        assert alloc.used_epsilon == pytest.approx(total_epsilon(spends, rule, 1e-6), rel=1e-12)
    assert out[CompositionRule.RDP].objective < 0.7 * out[CompositionRule.BASIC].objective


def test_error_curve_decreases_with_total_epsilon() -> None:
    items = [Item("a", Family.LAPLACE, 2.0), Item("g", Family.GAUSSIAN, 0.5)]
    curve = error_curve(items, np.geomspace(0.1, 10, 8), 1e-6, CompositionRule.RDP)
    assert np.all(np.diff(curve) < 0)


def test_warnings_for_large_epsilon_and_delta_over_one_over_n() -> None:
    # δ = 0.01 ≥ 1/n = 0.002 and ε = 12 > 10: both warnings (issue 4, item 5)
    a = allocate([Item("a", Family.LAPLACE, 2.0)], 12.0, 1e-2, CompositionRule.BASIC, n=500)
    text = " ".join(a.warnings)
    assert "above 10" in text and "1/n" in text


def test_gaussian_without_delta_is_a_clear_error() -> None:
    with pytest.raises(PlanError, match="δ > 0"):
        allocate([Item("g", Family.GAUSSIAN, 0.5)], 1.0, 0.0)


def test_bad_items_are_rejected() -> None:
    with pytest.raises(PlanError, match="weight"):
        Item("a", Family.LAPLACE, 2.0, weight=-1.0)
    with pytest.raises(PlanError, match="unique"):
        allocate([Item("a", Family.LAPLACE, 2.0), Item("a", Family.LAPLACE, 2.0)], 1.0)


def _mixed(n: int, seed: int) -> list[Item]:
    fams = [
        Family.LAPLACE,
        Family.GAUSSIAN,
        Family.DISCRETE_GAUSSIAN,
        Family.MEAN_LAPLACE,
        Family.DISCRETE_LAPLACE,
        Family.EXPONENTIAL,
    ]
    rng = np.random.default_rng(seed)
    return [
        Item(
            f"q{i}",
            fams[i % len(fams)],
            float(rng.uniform(1, 100)),
            weight=float(rng.uniform(0.5, 5)),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize(("n", "seed"), [(12, 3), (90, 1)])
def test_error_curve_matches_allocate_under_every_rule(
    rule: CompositionRule, n: int, seed: int
) -> None:
    # The curve is the same optimisation as allocate() without its exact final fit: a point
    # may be below allocate's objective only by the multiplier search's 1e-9 tolerance on
    # the budget (objective ∝ ε^-2 or so: ~2e-9 relative, 1e-8 allowed), and above it only
    # by what that fit adds. 1e-3 allows the RDP curve's coarser order search (measured
    # 1.6e-4 on the benchmark workload); before the curve used both KOV bounds, the advanced
    # curve of 90 queries sat 11.7% above allocate() at ε = 1.
    items = _mixed(n, seed)
    eps = np.array([0.3, 1.0, 4.0])
    curve = error_curve(items, eps, 1e-6, rule)
    direct = np.array([allocate(items, float(e), 1e-6, rule).objective for e in eps])
    ratio = curve / direct - 1.0
    assert np.all(ratio >= -1e-8), ratio
    assert np.all(ratio <= 1e-3), ratio


def test_multiplier_search_never_returns_a_row_over_budget() -> None:
    # The census example's items at the RDP curve's coarse orders: at one (order, ε) row the
    # per-item minimiser jumps between two local minima as μ moves (RDP curves clipped by
    # min() are not convex in log θ), so no μ meets the budget; the search used to stop 3%
    # over it there. Every row must come back within 1e-9 of its budget or under it.
    from pathlib import Path

    from planner.planning.allocation import (
        _Cost,
        _Dual,
        _scale_to_budget,
        _surrogate,
        _Workload,
    )
    from planner.planning.plan_spec import load_plan_spec
    from planner.planning.workload import build_items
    from planner.privacy.accounting import DEFAULT_ORDERS, conversion

    spec = load_plan_spec(Path(__file__).resolve().parents[2] / "examples" / "census_plan.json")
    items = [p.item for p in build_items(spec.queries, spec.schema, spec.error_scales)]
    wl = _Workload.build(items, CompositionRule.RDP, spec.delta, 1.0)
    free = np.ones(len(items), dtype=bool)
    d = _Dual(wl, free)
    eps = np.geomspace(0.1, 10, 50)
    alpha = np.repeat(np.asarray(DEFAULT_ORDERS[::120]), eps.size)
    budget = np.tile(eps, alpha.size // eps.size) - conversion(alpha, 0.0, math.log(spec.delta))
    # error_curve's start: the closed-form shape scaled to the median ε
    start = _scale_to_budget(
        _Cost(wl, CompositionRule.RDP, spec.delta).value,
        _surrogate(wl, CompositionRule.RDP),
        free,
        1.0,
    )
    u0 = np.tile(np.log(start), (alpha.size, 1))
    u, ok = d.solve(lambda th: d.rdp(th, alpha[:, None]), budget, u0)
    total = np.sum(d.rdp(np.exp(u), alpha[:, None]), axis=1)
    assert np.array_equal(ok, budget > 0) and ok.sum() > 200  # 224 of 500 rows have room (counted)
    assert np.all(total[ok] <= budget[ok] * (1 + 1e-9))


def test_a_weight_zero_item_never_makes_the_objective_nan() -> None:
    # Found by fuzzing (session 9), this workload as found: the weight-0 item q7 got θ ≈ 1e-152,
    # its MSE overflowed to ∞, and 0·∞ made the split's objective NaN. A weight of 0 is
    # documented as legal: the item counts 0 and the others share the budget.
    rows = [  # id, family, coef, sensitivity, weight, error scale
        ("q0", Family.PURE, 0.1109824710702085, 0.5843598516850688, 2.177182658531057, 28718.371344640324),
        ("q1", Family.DISCRETE_GAUSSIAN, 0.001543295489178242, 0.14593235574705374, 3.4716004849391795, 19.930416015020022),
        ("q2", Family.LAPLACE, 27458.194319648213, 0.6205785120574561, 0.15526695221660655, 11.169997655705064),
        ("q3", Family.DISCRETE_LAPLACE, 0.12069502369504805, 2.593032278640446, 13.205532133448017, 18879.903433572767),
        ("q4", Family.LAPLACE, 8738.40669379538, 2.6930150068203274, 0.004786716023703913, 8.637495822870566),
        ("q5", Family.DISCRETE_GAUSSIAN, 60.72441958924739, 71.55792943354088, 0.820319036829543, 47099.633986489316),
        ("q6", Family.DISCRETE_GAUSSIAN, 371911.0503722148, 0.361282772192345, 755.9986346905364, 0.0684703427118946),
        ("q7", Family.DISCRETE_LAPLACE, 972617.9424570194, 0.1146920201623344, 0.0, 0.15917567912519887),
        ("q8", Family.DISCRETE_GAUSSIAN, 386.25069721889344, 0.8088538610930766, 0.1613566834698183, 7.007136306146739),
        ("q9", Family.DISCRETE_GAUSSIAN, 47.80708123123955, 46.87453404412309, 52.29237113014613, 1.6157582949645117),
        ("q10", Family.LAPLACE, 27.01051833992159, 3.5612164191629794, 15.319349294252676, 55.48844429736216),
        ("q11", Family.DISCRETE_LAPLACE, 744819.6052836865, 37.176172207805735, 0.06240983875594803, 303.90704011464425),
    ]
    items = [Item(i, f, c, sensitivity=s, weight=w, error_scale=e) for i, f, c, s, w, e in rows]
    got = allocate(items, 3.8111762419677164e-05, 3.705832620382185e-12, CompositionRule.ZCDP)
    assert math.isfinite(got.objective)
    assert got.objective == pytest.approx(sum(i.weighted_mse for i in got.items), rel=1e-12)
    assert next(i for i in got.items if i.id == "q7").weighted_mse == 0.0


def test_a_budget_below_the_rdp_floor_says_so_and_does_not_blame_pinned_shares() -> None:
    # Found by fuzzing (session 9): RDP's orders stop at 4e5, so it certifies nothing below
    # about 3.4e-5 at δ = 1e-12 for a Gaussian; the split said "the pinned shares alone
    # exceed the total budget" with nothing pinned. zCDP splits the same budget.
    items = [Item("a", Family.LAPLACE, 2.0), Item("g", Family.GAUSSIAN, 2.0)]
    with pytest.raises(PlanError, match="below the least ε this rule can certify") as err:
        allocate(items, 4e-5, 1e-12, CompositionRule.RDP)
    assert "pinned" not in str(err.value)
    assert allocate(items, 4e-5, 1e-12, CompositionRule.ZCDP).used_epsilon <= 4e-5
