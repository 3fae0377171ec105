"""Unit and property tests of planner.privacy.accounting (composition).

Every expected number says where it comes from: a hand calculation (shown), a formula of
docs/mathematics.md §5 / a cited paper, or planner.privacy.divergences' reference closed forms. The oracle
comparisons against dp-accounting and OpenDP live in test_accounting_oracles.py.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

import planner.privacy.accounting as acc
from planner.core.errors import BudgetError
from planner.privacy import divergences as dv
from planner.privacy.accounting import (
    CompositionRule,
    Spend,
    advanced_best,
    advanced_epsilon,
    compare_rules,
    compose_basic,
    compose_parallel,
    drv_epsilon,
    event_rdp,
    event_rho,
    group_privacy,
    pure_epsilon,
    rdp_curve,
    rdp_epsilon,
    rdp_to_epsilon,
    standalone_epsilon,
    subsample_pure,
    total_epsilon,
    zcdp_rho,
    zcdp_to_approx_epsilon,
)
from planner.privacy.budget import DEFAULT_ORDERS, RDPCurve
from planner.privacy.events import (
    ApproxEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    ZCDPEvent,
)

ORDERS = np.asarray(DEFAULT_ORDERS)


def test_accounting_doctests_pass() -> None:
    # The Examples sections are hand-checkable numbers; run them in the suite.
    import planner.privacy.accountants as accountants
    from planner.privacy.accountants import advanced, base, basic, rdp, zcdp

    attempted = failed = 0
    for mod in (acc, accountants, base, basic, advanced, rdp, zcdp):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        attempted += result.attempted
        failed += result.failed
    assert attempted > 20
    assert failed == 0


# --------------------------------------------------------------------------- basic


def test_compose_basic_sums_epsilons_and_deltas() -> None:
    # by hand: 0.1 + 0.2 + 0.7 = 1.0; 1e-6 + 0 + 2e-6 = 3e-6
    eps, delta = compose_basic([0.1, 0.2, 0.7], [1e-6, 0.0, 2e-6])
    assert eps == pytest.approx(1.0, rel=1e-15)
    assert delta == pytest.approx(3e-6, rel=1e-15)


def test_compose_basic_without_deltas_is_pure() -> None:
    assert compose_basic([0.5, 0.25]) == (0.75, 0.0)  # 0.5 + 0.25 exactly in binary


def test_compose_parallel_takes_maxima() -> None:
    # docs/mathematics.md §5: disjoint parts -> (max εᵢ, max δᵢ)
    assert compose_parallel([0.3, 0.9, 0.1], [1e-7, 1e-9, 1e-6]) == (0.9, 1e-6)
    assert compose_parallel([]) == (0.0, 0.0)


# --------------------------------------------------------------------------- advanced


def test_drv_epsilon_hand_calculation() -> None:
    # DRV10 / Gatica-Perez et al., "An introduction to trustworthy machine learning" (AIDA, 2022): ε√(2k ln(1/δ')) + kε(e^ε − 1) with ε = 0.1, k = 100, δ' = 1e-6:
    #   ln(1/δ') = 13.815510557964274; 2k ln(1/δ') = 2763.1021115928547
    #   √2763.1021115928547 = 52.56521769756932  -> × 0.1 = 5.256521769756932
    #   e^0.1 − 1 = 0.10517091807564771 -> × kε = 10 -> 1.0517091807564771
    #   total = 6.308230950513409
    assert drv_epsilon(0.1, 100, 1e-6) == pytest.approx(6.308230950513409, rel=1e-13)
    # ε = 1, k = 1, δ' = e^{-2}: 1·√(2·1·2) + 1·(e − 1) = 1 + e
    assert drv_epsilon(1.0, 1, math.exp(-2.0)) == pytest.approx(1.0 + math.e, rel=1e-14)


def test_advanced_epsilon_kov_beats_drv_for_equal_epsilons() -> None:
    # KOV15 Thm 3.5 with εᵢ = 0.1 (k = 100), δ' = 1e-6, by hand:
    #   Σ εᵢ(e^{εᵢ}−1)/(e^{εᵢ}+1) = 100 · 0.1 · tanh(0.05) = 10 · 0.04995837495787998
    #                             = 0.4995837495787998
    #   Σ εᵢ² = 1;  √(2 · 1 · ln 1e6) = √27.631021115928547 = 5.256521769756932
    #   total = 5.756105519335732   (< DRV's 6.308230950513409 < basic's 10)
    got = advanced_epsilon([0.1] * 100, 1e-6)
    assert got == pytest.approx(5.756105519335732, rel=1e-12)
    assert got < drv_epsilon(0.1, 100, 1e-6) < 10.0


def test_advanced_epsilon_heterogeneous_kov_form() -> None:
    # KOV15 Thm 3.5, εᵢ = (0.05 × 500, 0.2 × 100), δ' = 1e-8, third bound, by hand:
    #   T = 500·0.05·tanh(0.025) + 100·0.2·tanh(0.1)   [ε(e^ε−1)/(e^ε+1) = ε·tanh(ε/2)]
    #     = 25·0.024994793 + 20·0.099667995 = 2.618229
    #   S = 500·0.0025 + 100·0.04 = 5.25;  √(2·5.25·ln 1e8) = √193.417148 = 13.907449
    #   bound = 16.525679 (basic: 25 + 20 = 45)
    eps = [0.05] * 500 + [0.2] * 100
    t = 500 * 0.05 * math.tanh(0.025) + 100 * 0.2 * math.tanh(0.1)
    expected = t + math.sqrt(2 * 5.25 * math.log(1e8))
    assert expected == pytest.approx(16.525679, abs=1e-6)
    assert advanced_epsilon(eps, 1e-8) == pytest.approx(expected, rel=1e-12)


def test_advanced_epsilon_uses_kov_middle_bound_when_smaller() -> None:
    # KOV15 Thm 3.5 middle bound: T + √(2S ln(e + √S/δ')). With S tiny, e + √S/δ' < 1/δ'.
    eps = [1e-4] * 10
    s = 10 * 1e-8
    t = 10 * 1e-4 * math.tanh(5e-5)
    middle = t + math.sqrt(2 * s * math.log(math.e + math.sqrt(s) / 0.01))
    third = t + math.sqrt(2 * s * math.log(1 / 0.01))
    assert middle < third
    assert advanced_epsilon(eps, 0.01) == pytest.approx(min(middle, 1e-3), rel=1e-12)


def test_advanced_never_worse_than_basic_for_few_large_epsilons() -> None:
    assert advanced_epsilon([2.0, 3.0], 1e-9) == 5.0  # basic: 2 + 3


def test_advanced_best_uses_all_slack() -> None:
    eps = [0.1] * 100
    got, slack = advanced_best(eps, [1e-8] * 100, 2e-6)
    # slack = 2e-6 − 100·1e-8 = 1e-6, so the DRV/KOV number at δ' = 1e-6 applies.
    assert slack == pytest.approx(1e-6, rel=1e-9)
    assert got == pytest.approx(advanced_epsilon(eps, 1e-6), rel=1e-12)


def test_advanced_best_basic_when_no_slack() -> None:
    assert advanced_best([0.5, 0.5], [1e-6, 1e-6], 2e-6) == (1.0, 0.0)
    assert advanced_best([0.5, 0.5], None, 0.0) == (1.0, 0.0)


def test_advanced_best_rejects_deltas_over_total() -> None:
    with pytest.raises(BudgetError, match="total_delta"):
        advanced_best([0.5, 0.5], [1e-6, 1e-6], 1e-6)


# --------------------------------------------------------------------------- RDP


def test_rdp_to_epsilon_conversion_by_hand() -> None:
    # One order α = 2 with ε(2) = 1 and δ = e^{-4}; CKS20 Prop. 12:
    #   1 + ln(1/2) − (−4 + ln 2)/1 = 5 − 2 ln 2 = 3.613705638880109
    # (Mironov's ε + ln(1/δ)/(α−1) would give 5.)
    curve = RDPCurve((2.0,), (1.0,))
    eps, order = rdp_to_epsilon(curve, math.exp(-4.0))
    assert eps == pytest.approx(5.0 - 2.0 * math.log(2.0), rel=1e-14)
    assert eps >= 5.0 - 2.0 * math.log(2.0)  # rounded up, never down
    assert order == 2.0


@pytest.mark.parametrize("eps0", [0.01, 0.1, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [0.0, 1e-12, 1e-6, 1e-3])
def test_single_laplace_costs_at_most_its_epsilon(eps0: float, delta: float) -> None:
    # A single Laplace query at ε₀ is ε₀-DP: RDP accounting (order ∞) must not charge more.
    ev = LaplaceEvent(1.0 / eps0)
    eps, _ = rdp_epsilon([ev], delta)
    assert eps <= eps0 + 1e-12
    assert rdp_to_epsilon(rdp_curve([ev]), delta)[0] <= eps0 + 1e-12
    if delta == 0.0:
        assert eps == pytest.approx(eps0, rel=1e-15)


def test_pure_events_never_exceed_basic_under_rdp() -> None:
    events: list[PrivacyEvent] = [
        PureEvent(0.3),
        RandomizedResponseEvent(0.75),
        ExponentialEvent(0.7),
    ]
    basic = 0.3 + math.log(3.0) + 0.7  # RR with p = 3/4: ε = ln 3 (docs/mathematics.md §3)
    assert rdp_epsilon(events, 1e-9)[0] <= basic + 1e-12
    assert rdp_epsilon(events, 0.0) == (pytest.approx(basic, rel=1e-15), math.inf)


def test_rdp_delta_zero_with_gaussian_is_infinite() -> None:
    assert rdp_epsilon([GaussianEvent(1.0)], 0.0)[0] == math.inf
    assert rdp_to_epsilon(rdp_curve([GaussianEvent(1.0)]), 0.0)[0] == math.inf


def _reference_curve(ev: PrivacyEvent) -> np.ndarray:
    return np.asarray(event_rdp(ev, ORDERS))


@pytest.mark.parametrize(
    "event",
    [
        LaplaceEvent(0.05),
        LaplaceEvent(1.0),
        LaplaceEvent(20.0),
        LaplaceEvent(1000.0),
        PureEvent(1e-4),
        PureEvent(0.5),
        PureEvent(5.0),
        RandomizedResponseEvent(0.6),
        RandomizedResponseEvent(0.99),
        ExponentialEvent(0.01),
        ExponentialEvent(1.0),
        ExponentialEvent(8.0),
        GaussianEvent(0.5),
        GaussianEvent(20.0, discrete=True),
        ZCDPEvent(0.3),
        ApproxEvent(0.7, 0.0),
    ],
)
def test_vectorised_curve_matches_reference_closed_forms(event: PrivacyEvent) -> None:
    # planner.privacy.divergences (Mironov 2017 Table II etc.) is the reference. The grouped
    # kernel may only be above it (explicit rounding margin), by < 1e-9 absolute.
    ours = np.asarray(rdp_curve([event]).epsilons)
    ref = _reference_curve(event)
    assert np.all(ours >= ref - 1e-15)
    assert np.all(ours <= ref + 1e-9 + 1e-12 * ref)


def test_heterogeneous_curve_is_sum_of_single_curves() -> None:
    # RDP composes by adding ε(α) (Mironov 2017, Prop. 1).
    rng = np.random.default_rng(7)
    events: list[PrivacyEvent] = []
    for i in range(200):
        kind = i % 6
        x = float(rng.uniform(0.2, 5.0))
        events.append(
            [
                LaplaceEvent(x),
                GaussianEvent(x),
                RandomizedResponseEvent(0.5 + x / 11.0),
                ExponentialEvent(x / 3.0),
                PureEvent(x / 4.0),
                ZCDPEvent(x / 10.0),
            ][kind]
        )
    curve = rdp_curve(events)
    ref = np.sum([_reference_curve(e) for e in events], axis=0)
    ours = np.asarray(curve.epsilons)
    assert np.all(ours >= ref * (1 - 1e-14) - 1e-12)  # only summation-order noise below
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-7)
    assert curve.eps_inf == math.inf  # Gaussians have no pure ε


def test_rdp_curve_eps_inf_is_sum_of_pure_epsilons() -> None:
    curve = rdp_curve([LaplaceEvent(2.0), PureEvent(0.25)])
    assert curve.eps_inf == 0.75  # 1/2 + 1/4


def test_rdp_epsilon_refines_grid_minimum() -> None:
    # k = 50 Gaussians σ = 4: the continuous minimum of ρα + ln((α−1)/α) − (ln δ + ln α)/(α−1)
    # (ρ = 50/32) is found by scipy independently; the grid alone is only within ~1e-5.
    rho, delta = 50 / 32, 1e-7

    def f(x: float) -> float:
        a = 1.0 + math.exp(x)
        return rho * a + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)

    exact = minimize_scalar(f, bounds=(-10, 10), method="bounded", options={"xatol": 1e-12}).fun
    refined, _ = rdp_epsilon([GaussianEvent(4.0)] * 50, delta)
    grid, _ = rdp_to_epsilon(rdp_curve([GaussianEvent(4.0)] * 50), delta)
    assert exact <= refined <= exact * (1 + 1e-9)
    assert refined <= grid


def test_rdp_epsilon_basic_adds_approx_events() -> None:
    # ApproxEvent(0.4, 1e-7) has no RDP curve: ε = ε_RDP(δ − 1e-7) + 0.4.
    g = GaussianEvent(3.0)
    got, _ = rdp_epsilon([g, ApproxEvent(0.4, 1e-7)], 1e-6)
    assert got == pytest.approx(rdp_epsilon([g], 1e-6 - 1e-7)[0] + 0.4, rel=1e-12)
    assert rdp_epsilon([g, ApproxEvent(0.4, 1e-7)], 1e-8)[0] == math.inf
    assert rdp_epsilon([ApproxEvent(0.4, 1e-7)], 1e-7)[0] == 0.4
    assert rdp_epsilon([], 1e-6)[0] == 0.0


def test_rdp_total_variation_gives_zero_for_tiny_loss() -> None:
    # ρ = 1/(2·1000²) = 5e-7: TV ≤ √(1 − e^{−KL}) ≤ √(1.001·5e-7) ≈ 7.1e-4 < δ = 1e-2,
    # so (0, δ)-DP (Bretagnolle–Huber; dp-accounting's compute_epsilon does the same).
    assert rdp_epsilon([GaussianEvent(1000.0)], 1e-2)[0] == 0.0
    assert rdp_epsilon([GaussianEvent(1000.0)], 1e-4)[0] > 0.0


# --------------------------------------------------------------------------- zCDP


def test_zcdp_rho_sums_and_flags_missing() -> None:
    # ρ = 1/(2s²) for a Gaussian, ε²/2 for pure, ε²/8 for exponential (Cesar & Rogers 2021)
    assert zcdp_rho([GaussianEvent(2.0), PureEvent(1.0), ExponentialEvent(2.0)]) == pytest.approx(
        0.125 + 0.5 + 0.5, rel=1e-15
    )
    assert zcdp_rho([GaussianEvent(2.0), ApproxEvent(1.0, 1e-6)]) == math.inf
    assert zcdp_rho([]) == 0.0


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.05, 0.5, 2.0, 50.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-2])
def test_zcdp_conversion_is_the_continuous_minimum(rho: float, delta: float) -> None:
    # Independent: scipy's bounded minimisation of CKS20 Prop. 12 at ε(α) = ρα.
    def f(x: float) -> float:
        a = 1.0 + math.exp(x)
        return rho * a + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)

    exact = max(
        minimize_scalar(f, bounds=(-20, 25), method="bounded", options={"xatol": 1e-13}).fun, 0.0
    )
    got = float(zcdp_to_approx_epsilon(rho, delta))
    assert got >= exact * (1 - 1e-12)
    assert got == pytest.approx(exact, rel=1e-9, abs=1e-15)


def test_zcdp_conversion_vectorised_and_edge_cases() -> None:
    rho = np.array([[0.0, 0.1], [math.inf, 1.0]])
    out = zcdp_to_approx_epsilon(rho, 1e-6)
    assert out.shape == (2, 2)
    assert out[0, 0] == 0.0 and out[1, 0] == math.inf
    assert out[0, 1] == float(zcdp_to_approx_epsilon(0.1, 1e-6))
    assert float(zcdp_to_approx_epsilon(0.1, 0.0)) == math.inf
    # never above Bun–Steinke's ρ + 2√(ρ ln(1/δ)) (arXiv:1605.02065, Prop. 1.3)
    assert out[1, 1] < 1.0 + 2 * math.sqrt(math.log(1e6))


def test_zcdp_never_below_exact_gaussian() -> None:
    # The exact analytic Gaussian ε (Balle & Wang 2018) is a lower bound for any valid
    # conversion of the Gaussian's ρ = 1/(2σ²).
    for sigma in [0.3, 1.0, 4.0, 30.0]:
        for delta in [1e-9, 1e-5, 1e-2]:
            exact = float(dv.analytic_gaussian_epsilon(delta, 1.0 / sigma))
            assert float(zcdp_to_approx_epsilon(1 / (2 * sigma**2), delta)) >= exact


# --------------------------------------------------------------------------- entry points


def _spends() -> list[Spend]:
    g = GaussianEvent(5.0)
    return [
        Spend(LaplaceEvent(4.0), 0.25, 0.0),
        Spend(LaplaceEvent(4.0), 0.25, 0.0),
        Spend(g, standalone_epsilon(g, 1e-7), 1e-7),
        Spend(ExponentialEvent(0.5), 0.5, 0.0),
    ]


def test_total_epsilon_rules() -> None:
    spends = _spends()
    delta = 1e-6
    basic = 0.25 + 0.25 + spends[2].epsilon + 0.5
    assert total_epsilon(spends, CompositionRule.BASIC, delta) == pytest.approx(basic, rel=1e-15)
    assert total_epsilon(spends, "advanced", delta) <= basic
    rdp = total_epsilon(spends, CompositionRule.RDP, delta)
    assert rdp == rdp_epsilon([s.event for s in spends], delta)[0]
    # zCDP: each pure spend by its ρ (Laplace ε²/2, exponential ε²/8) or by its ε, the
    # Gaussian (σ = 5) by ρ = 1/50. The largest ρ/ε go to the ε side first (Laplace ρ/ε =
    # 0.125, exponential 0.0625), so the candidates are (hand arithmetic):
    def z(rho: float) -> float:
        return float(zcdp_to_approx_epsilon(rho, delta))

    candidates = [
        z(2 * 0.25**2 / 2 + 1 / 50 + 0.5**2 / 8),  # plain zCDP
        0.25 + z(0.25**2 / 2 + 1 / 50 + 0.5**2 / 8),
        0.5 + z(1 / 50 + 0.5**2 / 8),
        0.5 + 0.5 + z(1 / 50),  # every pure spend by ε: the best here
    ]
    zc = total_epsilon(spends, CompositionRule.ZCDP, delta)
    assert zc == pytest.approx(min(candidates), rel=1e-12) and zc < candidates[0]
    assert total_epsilon([], CompositionRule.RDP, delta) == 0.0


def test_total_epsilon_basic_rejects_too_little_delta() -> None:
    with pytest.raises(BudgetError, match="delta"):
        total_epsilon(_spends(), CompositionRule.BASIC, 1e-8)


def test_total_epsilon_zcdp_rejects_event_without_rho() -> None:
    spends = [Spend(ApproxEvent(0.5, 1e-7), 0.5, 1e-7)]
    with pytest.raises(BudgetError, match="ρ"):
        total_epsilon(spends, CompositionRule.ZCDP, 1e-6)


def test_compare_rules_marks_inapplicable_rules_infinite() -> None:
    spends = [Spend(ApproxEvent(0.5, 1e-7), 0.5, 1e-7), Spend(PureEvent(0.5), 0.5)]
    out = compare_rules(spends, 1e-6)
    assert set(out) == set(CompositionRule)
    assert out[CompositionRule.ZCDP] == math.inf
    assert out[CompositionRule.BASIC] == 1.0
    assert out[CompositionRule.RDP] <= 1.0 + 1e-12
    assert compare_rules(spends, 1e-8)[CompositionRule.BASIC] == math.inf


def test_many_small_gaussians_rdp_beats_advanced_beats_basic() -> None:
    # the AIDA course notes: RDP is the tighter accountant for many Gaussian releases.
    g = GaussianEvent(20.0)
    spends = [Spend(g, standalone_epsilon(g, 1e-9), 1e-9)] * 200
    out = compare_rules(spends, 1e-5)
    assert out[CompositionRule.RDP] < out[CompositionRule.ADVANCED] < out[CompositionRule.BASIC]
    assert out[CompositionRule.ZCDP] == pytest.approx(out[CompositionRule.RDP], rel=1e-6)


# --------------------------------------------------------------------------- group, subsampling


def test_group_privacy_by_hand() -> None:
    assert group_privacy(0.5, 0.0, 4) == (2.0, 0.0)  # 4 · 0.5
    eps, delta = group_privacy(0.1, 1e-6, 3)  # (3·0.1, 3·e^{0.2}·1e-6)
    assert eps == pytest.approx(0.3, rel=1e-15)
    assert delta == pytest.approx(3 * math.exp(0.2) * 1e-6, rel=1e-14)
    assert group_privacy(5.0, 0.1, 10)[1] == 1.0  # capped: promises nothing


def test_subsample_pure_by_hand() -> None:
    # ln(1 + q(e^ε − 1)), BBG18: q = 0.1, ε = ln 11 -> ln(1 + 0.1·10) = ln 2
    assert subsample_pure(math.log(11.0), 0.1) == pytest.approx(math.log(2.0), rel=1e-14)
    assert subsample_pure(0.7, 1.0) == pytest.approx(0.7, rel=1e-15)
    assert subsample_pure(0.7, 0.3) < 0.7


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: compose_basic([0.5, -1.0]), "epsilons"),
        (lambda: compose_basic([0.5], [1.5]), "deltas"),
        (lambda: compose_basic([0.5, 0.5], [0.0]), "deltas"),
        (lambda: compose_parallel([math.nan]), "epsilons"),
        (lambda: advanced_epsilon([0.5], 0.0), "delta_prime"),
        (lambda: advanced_epsilon([0.5], 1.0), "delta_prime"),
        (lambda: advanced_best([0.5], None, -1e-6), "total_delta"),
        (lambda: drv_epsilon(0.5, 0, 1e-6), "k"),
        (lambda: drv_epsilon(-0.5, 3, 1e-6), "epsilon"),
        (lambda: rdp_epsilon([LaplaceEvent(1.0)], 2.0), "delta"),
        (lambda: rdp_to_epsilon(rdp_curve([LaplaceEvent(1.0)]), -1.0), "delta"),
        (lambda: rdp_curve([]), "events"),
        (lambda: rdp_curve([LaplaceEvent(1.0)], orders=[0.5, 2.0]), "orders"),
        (lambda: rdp_epsilon(["laplace"], 1e-6), "events"),  # type: ignore[list-item]
        (lambda: zcdp_to_approx_epsilon(-0.1, 1e-6), "rho"),
        (lambda: zcdp_to_approx_epsilon(0.1, 1.0), "delta"),
        (lambda: total_epsilon([], "optimal", 1e-6), "rule"),
        (lambda: total_epsilon([], CompositionRule.RDP, math.inf), "delta"),
        (lambda: compare_rules([], -1.0), "delta"),
        (lambda: group_privacy(1.0, 1e-6, 0), "k"),
        (lambda: group_privacy(0.0, 1e-6, 2), "epsilon"),
        (lambda: group_privacy(1.0, 1.0, 2), "delta"),
        (lambda: subsample_pure(1.0, 0.0), "q"),
        (lambda: subsample_pure(-1.0, 0.5), "epsilon"),
        (lambda: Spend(LaplaceEvent(1.0), 0.0, 0.0), "epsilon"),
        (lambda: Spend(LaplaceEvent(1.0), 1.0, -0.1), "delta"),
        (lambda: Spend("laplace", 1.0, 0.0), "event"),  # type: ignore[arg-type]
    ],
)
def test_invalid_input_raises_budget_error_naming_parameter(call: object, name: str) -> None:
    assert callable(call)
    with pytest.raises(BudgetError, match=name):
        call()


def test_spend_rejects_claims_below_the_events_cost() -> None:
    with pytest.raises(BudgetError, match="not a guarantee"):
        Spend(LaplaceEvent(1.0), 0.5, 0.0)  # Laplace b = Δ is exactly 1-DP, not 0.5-DP
    with pytest.raises(BudgetError, match="not a guarantee"):
        Spend(GaussianEvent(1.0), 5.0, 0.0)  # a Gaussian is never pure DP
    with pytest.raises(BudgetError, match="not a guarantee"):
        Spend(GaussianEvent(1.0), 1.0, 1e-6)  # exact δ(1) at σ = 1 is ≈ 0.127 (Balle–Wang)
    with pytest.raises(BudgetError, match="not a guarantee"):
        Spend(ApproxEvent(1.0, 1e-6), 1.0, 1e-7)
    # calibrated spends pass: σ from the analytic Gaussian, b = Δ/ε for Laplace
    sigma = float(dv.analytic_gaussian_sigma(1.0, 1e-6))
    assert Spend(GaussianEvent(sigma), 1.0, 1e-6).delta == 1e-6
    assert Spend(LaplaceEvent(1.0 / 0.3), 0.3, 0.0).epsilon == 0.3


def test_composition_rule_values() -> None:
    assert [r.value for r in CompositionRule] == ["basic", "advanced", "rdp", "zcdp", "pld"]
    assert CompositionRule("rdp") is CompositionRule.RDP


# --------------------------------------------------------------------------- properties

_pos = st.floats(min_value=0.01, max_value=3.0, allow_nan=False)
_scale = st.floats(min_value=0.3, max_value=30.0, allow_nan=False)
_SPEND_DELTA = 1e-9


def _spend_for(kind: int, x: float) -> Spend:
    """A calibrated spend: pure events at (ε, 0); Gaussian / zCDP at δᵢ = 1e-9 with the ε
    of the zCDP conversion (≥ the exact Gaussian ε, so the assignment is valid)."""
    if kind == 0:
        return Spend(LaplaceEvent(x), 1.0 / x, 0.0)
    if kind == 1:
        g = GaussianEvent(x)
        return Spend(g, float(zcdp_to_approx_epsilon(event_rho(g), _SPEND_DELTA)), _SPEND_DELTA)
    if kind == 2:
        p = 0.5 + min(x, 29.0) / 60.0
        ev = RandomizedResponseEvent(p)
        return Spend(ev, pure_epsilon(ev), 0.0)
    if kind == 3:
        return Spend(ExponentialEvent(x / 10.0), x / 10.0, 0.0)
    if kind == 4:
        return Spend(PureEvent(x / 10.0), x / 10.0, 0.0)
    z = ZCDPEvent(x / 100.0)
    return Spend(z, float(zcdp_to_approx_epsilon(z.rho, _SPEND_DELTA)), _SPEND_DELTA)


_spend = st.builds(_spend_for, st.integers(min_value=0, max_value=5), _scale)


@settings(max_examples=40, deadline=None)
@given(st.lists(_spend, min_size=0, max_size=12), _spend, st.sampled_from([1e-7, 1e-5, 1e-3]))
def test_composed_epsilon_never_decreases_when_adding_an_event(
    spends: list[Spend], extra: Spend, delta: float
) -> None:
    for rule in CompositionRule:
        before = total_epsilon(spends, rule, delta)
        after = total_epsilon([*spends, extra], rule, delta)
        # the RDP order search is refined numerically: allow float-level noise only
        assert after >= before * (1 - 1e-9) - 1e-12, rule


@settings(max_examples=60, deadline=None)
@given(st.lists(_pos, min_size=1, max_size=50), st.floats(min_value=1e-12, max_value=0.5))
def test_advanced_never_exceeds_basic(eps: list[float], delta_prime: float) -> None:
    assert advanced_epsilon(eps, delta_prime) <= math.fsum(eps)
    got, slack = advanced_best(eps, None, delta_prime)
    assert got <= math.fsum(eps)
    assert slack in (0.0, delta_prime)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(min_value=1e-8, max_value=100.0),
    st.floats(min_value=1e-8, max_value=100.0),
    st.floats(min_value=1e-12, max_value=0.5),
    st.floats(min_value=1e-12, max_value=0.5),
)
def test_zcdp_conversion_monotone_in_rho_and_delta(
    r1: float, r2: float, d1: float, d2: float
) -> None:
    lo_r, hi_r = sorted((r1, r2))
    lo_d, hi_d = sorted((d1, d2))
    tol = 1e-12
    e = zcdp_to_approx_epsilon(np.array([lo_r, hi_r]), lo_d)
    assert e[1] >= e[0] * (1 - tol)  # more ρ costs more ε
    assert float(zcdp_to_approx_epsilon(lo_r, hi_d)) <= e[0] * (1 + tol) + 1e-300  # more δ, less ε


def test_self_composed_event_equals_k_copies_and_round_trips() -> None:
    # RDP adds order by order (Mironov 2017, Prop. 1): one event for k copies must give the
    # accountant's value for the k copies, never below it, within its 1e-9 allowance.
    from planner.privacy.events import SelfComposedEvent, event_from_dict

    for inner, k in (
        (LaplaceEvent(10.0), 100),
        (GaussianEvent(3.0), 25),
        (ExponentialEvent(0.1), 7),
    ):
        one = SelfComposedEvent(inner, k)
        many = rdp_epsilon([inner] * k, 1e-6)[0]
        assert many <= rdp_epsilon([one], 1e-6)[0] <= many * (1 + 1e-8)
        assert event_from_dict(one.to_dict()) == one
    with pytest.raises(BudgetError, match="count"):
        SelfComposedEvent(LaplaceEvent(1.0), 0)


def test_kov_root_term_is_the_better_bound_its_slope_and_concave() -> None:
    from planner.privacy.accounting import kov_root_term

    s = np.geomspace(1e-8, 1e4, 400)
    for dp in (1e-9, 1e-6, 1e-2):
        h, dh = kov_root_term(s, dp)
        # KOV15 Thm 3.5's two square-root terms, written out here
        first = np.sqrt(2 * s * math.log(1 / dp))
        middle = np.sqrt(2 * s * np.log(math.e + np.sqrt(s) / dp))
        np.testing.assert_allclose(h, np.minimum(first, middle), rtol=1e-15)
        # the slope against a central difference
        e = 1e-6
        num = (kov_root_term(s * (1 + e), dp)[0] - kov_root_term(s * (1 - e), dp)[0]) / (2 * e * s)
        # (away from the switch between the two terms, at √S = 1 − e·δ', where h has a kink)
        smooth = np.abs(np.sqrt(s) - (1 - math.e * dp)) > 1e-4
        np.testing.assert_allclose(dh[smooth], num[smooth], rtol=1e-6)
        # concave: every tangent lies above h (what makes the planner's iterates feasible)
        for k in range(0, 400, 37):
            tangent = h[k] + dh[k] * (s - s[k])
            assert np.all(tangent >= h * (1 - 1e-12))
        # advanced_epsilon adds it to T = Σ εᵢ tanh(εᵢ/2)
    eps = np.full(50, 0.05)
    t = float(np.sum(eps * np.tanh(eps / 2)))
    want = min(float(eps.sum()), t + float(kov_root_term(float(np.sum(eps**2)), 1e-6)[0]))
    assert advanced_epsilon(eps, 1e-6) == pytest.approx(want, rel=1e-14)


# ---------------------------------------------------------------- accountants as classes (issue 13)


def test_zcdp_charges_a_lone_laplace_its_pure_epsilon() -> None:
    # Issue 13, loose spot 5: ρ = ε²/2 = 2 converts to ε ≈ 11.7 at δ = 1e-6 (the issue
    # quotes 14.15, Bun–Steinke's looser ρ + 2√(ρ ln(1/δ)) = 2 + 2√(2·13.8) ≈ 12.5 at the
    # same δ); the pure Laplace at ε = 2 is (2, 0)-DP, so the rule must charge 2.
    from planner.privacy.events import LaplaceEvent

    spend = Spend(LaplaceEvent(0.5), 2.0)
    assert float(zcdp_to_approx_epsilon(2.0, 1e-6)) > 11.0
    assert total_epsilon([spend], CompositionRule.ZCDP, 1e-6) == 2.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.01, 3.0), min_size=1, max_size=12), st.sampled_from([1e-9, 1e-6, 1e-3]))
def test_zcdp_never_above_basic_or_plain_zcdp_for_pure_spends(eps: list[float], delta: float) -> None:
    from planner.privacy.events import LaplaceEvent

    spends = [Spend(LaplaceEvent(1.0 / e), e) for e in eps]
    zc = total_epsilon(spends, CompositionRule.ZCDP, delta)
    assert zc <= math.fsum(eps) * (1 + 1e-15)
    assert zc <= float(zcdp_to_approx_epsilon(math.fsum(e * e / 2 for e in eps), delta)) * (1 + 1e-12)


def test_accountant_classes_compose_like_total_epsilon() -> None:
    from planner.privacy.accountants import ACCOUNTANTS, accountant
    from planner.privacy.events import GaussianEvent, LaplaceEvent

    spends = _spends()
    for rule in ACCOUNTANTS:
        acct = accountant(rule).compose(spends)
        assert acct.rule is rule and len(acct.events) == len(spends)
        assert acct.epsilon(1e-6) == total_epsilon(spends, rule, 1e-6)
    # a bare Gaussian event has no assigned (ε, δ): basic composition cannot use it, RDP can
    with pytest.raises(BudgetError, match="needs an"):
        accountant("basic").compose([GaussianEvent(1.0)])
    assert accountant("rdp").compose([GaussianEvent(1.0), LaplaceEvent(1.0)]).epsilon(1e-6) > 0
    # compose is immutable and count repeats
    base = accountant("basic")
    assert base.compose([LaplaceEvent(4.0)], count=4).epsilon(0.0) == 1.0 and base.events == ()


@pytest.mark.parametrize(("epsilons", "expected"), [([710.0], 710.0), ([800.0, 800.0], 1600.0)])
def test_advanced_composition_past_e_to_the_709_falls_back_to_basic(epsilons: list[float], expected: float) -> None:
    """Found by fuzzing (session 9): equal ε above 709.78 made DRV's e^ε − 1 overflow
    (OverflowError). There the advanced bound is no better than basic composition's Σε
    (the expected values, by hand)."""
    from planner.privacy.accountants import accountant
    from planner.privacy.accounting import advanced_epsilon
    from planner.privacy.events import PureEvent

    assert advanced_epsilon(epsilons, 1e-6) == expected
    assert accountant("advanced").compose([PureEvent(e) for e in epsilons]).epsilon(1e-6) == expected
