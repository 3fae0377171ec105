"""Tests of planner.learn: each demo reproduces its seed's numbers where the seed gives them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner import learn as demos
from planner.core.errors import PlannerError
from planner.privacy import accounting
from planner.privacy.budget import CompositionRule
from planner.privacy.events import LaplaceEvent, SelfComposedEvent

# ------------------------------------------------------------------ 1. randomized response


def test_randomized_response_both_seed_designs_give_ln3() -> None:
    # Garivier, "How to learn while respecting individual privacy?" (ENS de Lyon, 2021): "truth w.p. 1/2 else a fair coin", P[Y=1|X=1]/P[Y=1|X=0] = 3 ⇒ ε = ln 3;
    # the Berkeley Math Circle handout "Differential privacy": two coins, statement B iff both heads (w.p. 1/4) ⇒ p = 3/4, ε = ln(p/(1−p)) = ln 3
    coin = demos.design_keep_probability("coin", 0.5)
    keep = demos.design_keep_probability("keep", 1 - 0.25)
    for p in (coin, keep):
        sim = demos.simulate_survey(0.2, 500, p, np.random.default_rng(0))
        assert sim.epsilon == pytest.approx(math.log(3.0), rel=1e-12)
        assert sim.data_cost == pytest.approx(4.0)  # Garivier's lecture notes: "≈ 4× more data" = (2p−1)⁻²


def test_randomized_response_estimate_is_unbiased_not_the_slides_slip() -> None:
    # docs/mathematics.md §3: the unbiased estimator for Garivier's coin design is 2ȳ − 1/2 (the slides write 2ȳ − 1)
    pi, n, reps = 0.2, 400, 400
    g = np.random.default_rng(11)
    est = np.array([demos.simulate_survey(pi, n, 0.75, g).estimate for _ in range(reps)])
    ybar = np.array([demos.simulate_survey(pi, n, 0.75, g).report_rate for _ in range(reps)])
    se = est.std(ddof=1) / math.sqrt(reps)
    assert abs(est.mean() - pi) < 5 * se
    assert np.allclose(2 * ybar - 0.5, (ybar - 0.25) / 0.5)
    assert abs((2 * ybar - 1).mean() - pi) > 20 * se  # the slides' 2ȳ − 1 is off by −1/2


def test_repeated_surveys_rr_spread_is_sqrt_data_cost_times_direct_at_half() -> None:
    # Warner: Var π̂ = q(1−q)/(n(2p−1)²); at π = 1/2, q = 1/2, so sd_RR/sd_direct = 1/(2p−1) = 2
    rr_est, direct = demos.repeated_surveys(0.5, 1000, 0.75, 4000, np.random.default_rng(3))
    assert rr_est.std() / direct.std() == pytest.approx(2.0, rel=0.06)


# ------------------------------------------------------------------ 2. attacker


def test_differencing_attack_exact_reveals_target_and_noise_is_bounded() -> None:
    values = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1])
    for target in range(values.size):
        res = demos.differencing_attack(values, target, 0.5, 0.3, 3000, np.random.default_rng(target))
        assert res.revealed == values[target]  # Garivier's lecture notes and Borealis AI, "Tutorial #12: Differential privacy I" (2021): the two exact counts reveal X
        assert res.total_epsilon == pytest.approx(1.0)  # 2 × 0.5, basic composition
        # posterior odds ≤ e^ε × prior odds (and ≥ e^−ε ×)
        assert np.all(res.likelihood_ratio <= math.exp(0.5) * (1 + 1e-12))
        assert np.all(res.likelihood_ratio >= math.exp(-0.5) * (1 - 1e-12))
        lo, hi = demos.posterior_bounds(0.3, 0.5)
        assert np.all((res.posterior >= lo - 1e-12) & (res.posterior <= hi + 1e-12))


def test_difference_density_integrates_to_one_and_ratio_matches_it() -> None:
    # independent: numerical integration of (1/(4b))(1 + |z|/b)e^{−|z|/b}
    z = np.linspace(-60, 60, 200_001)
    f = demos.difference_density(z, 2.0)
    assert np.trapezoid(f, z) == pytest.approx(1.0, abs=1e-6)
    d = np.array([-3.0, 0.2, 0.5, 4.0])
    assert np.allclose(demos.difference_likelihood_ratio(d, 2.0),
                       demos.difference_density(d - 1, 2.0) / demos.difference_density(d, 2.0))


def test_membership_power_bound_wasserman_zhou_values() -> None:
    # Wasserman & Zhou, "A statistical framework for differential privacy" (JASA 2010; Yu's Purdue slides): a level-γ test has power ≤ γe^α; hand: γ = 0.05, e^α = 2 → 0.1; capped at 1
    assert float(demos.membership_power_bound(0.05, math.log(2.0))[()]) == pytest.approx(0.1)
    assert float(demos.membership_power_bound(0.6, math.log(2.0))[()]) == 1.0
    assert float(demos.membership_power_bound(0.05, math.log(2.0), 0.01)[()]) == pytest.approx(0.11)


def test_laplace_count_test_meets_the_bound_for_small_levels() -> None:
    eps = 0.7
    g = np.linspace(0.0, 1.0, 1001)
    power = demos.laplace_count_power(g, eps)
    assert np.all(power <= demos.membership_power_bound(g, eps, tight=True) + 1e-12)
    small = g <= math.exp(-eps) / 2
    assert np.allclose(power[small], g[small] * math.exp(eps))
    # Monte Carlo check of one point: threshold test on simulated Laplace counts (b = 1/ε)
    rng = np.random.default_rng(5)
    y0 = 100 + rng.laplace(0, 1 / eps, 200_000)
    y1 = 101 + rng.laplace(0, 1 / eps, 200_000)
    t = np.quantile(y0, 0.95)
    assert (y1 > t).mean() == pytest.approx(float(demos.laplace_count_power(0.05, eps)[()]), abs=0.006)


# ------------------------------------------------------------------ 3. Laplace count


def test_within_share_closed_form_and_simulation() -> None:
    # P(|Lap(1/ε)| ≤ 0.1·c) = 1 − e^{−0.1·c·ε}: hand values
    assert float(demos.within_share(1000, 0.1)[()]) == pytest.approx(1 - math.exp(-10))
    assert float(demos.within_share(100, 0.1)[()]) == pytest.approx(1 - math.exp(-1))
    size = 20_000
    d = demos.laplace_count_demo([1000, 100], [0.05, 0.1, 0.2], size, np.random.default_rng(1))
    se = np.sqrt(d.exact_share * (1 - d.exact_share) / size)
    assert np.all(np.abs(d.simulated_share - d.exact_share) <= 5 * se + 1 / size)


def test_laplace_count_default_epsilons_match_borealis_caption() -> None:
    # Borealis AI's tutorial #12, fig. 3: at count 1000 "almost always within 10 %"; at 100 "regularly" outside
    share = demos.within_share(np.array(demos.SEED_004_COUNTS)[:, None], np.array(demos.SEED_004_EPSILONS))
    assert np.all(share[0] > 0.99)
    assert np.all(share[1] < 0.9)


# ------------------------------------------------------------------ 4. averaging


def test_averaging_ratio_in_borealis_setting() -> None:
    # Borealis AI's tutorial #12, fig. 4: ε = 0.01, sum/count "around 400 times more accurate" (n and data not
    # given). Our setting: n = 1000 values symmetric in [−C, C]. Large-n formula: n/2 = 500.
    x = np.random.default_rng(7).uniform(-1.0, 1.0, 1000)
    res = demos.averaging_demo(x, -1.0, 1.0, demos.SEED_004_AVG_EPSILON, 20_000, np.random.default_rng(8))
    size = res.naive.size
    assert res.naive_mae == pytest.approx(1.0 / 0.01, abs=5 * (1.0 / 0.01) / math.sqrt(size))  # E|Lap(b)| = b
    assert 350 <= res.ratio <= 600
    assert res.ratio == pytest.approx(res.ratio_large_n, rel=0.15)


def test_averaging_large_n_formula_expected_abs_difference() -> None:
    # E|L₁ − rL₂| = (1 + r + r²)/(1 + r) for standard Laplace, checked by simulation (5 s.e.)
    rng = np.random.default_rng(9)
    for r in (0.0, 0.3, 1.0):
        z = np.abs(rng.laplace(size=400_000) - r * rng.laplace(size=400_000))
        assert abs(z.mean() - (1 + r + r * r) / (1 + r)) < 5 * z.std() / math.sqrt(z.size)
    assert demos.averaging_ratio_large_n(1000, 1.0, 1.0) == pytest.approx(1000 * 2 / 6)


# ------------------------------------------------------------------ 5. majority


def test_majority_hand_values_and_quarter_optimality() -> None:
    # Garivier's lecture notes, n = 11, s = 6, ε = 1: EM 1/(1+e^{−1/2}); better 1/(1+e^{−1}); bound 1/(1+e^{−2})
    c = demos.majority_curves(1.0, 11)
    assert c.exponential[6] == pytest.approx(1 / (1 + math.exp(-0.5)), rel=1e-12)
    assert c.better[6] == pytest.approx(1 / (1 + math.exp(-1.0)), rel=1e-12)
    assert c.unbiased_bound[6] == pytest.approx(1 / (1 + math.exp(-2.0)), rel=1e-12)
    # s = 11 (unanimous): |2s−n| = 11, r = 6: general ISM 1/(1+e^{−6ε/2}) = bound at ε/4
    assert c.ism[11] == pytest.approx(1 / (1 + math.exp(-3.0)), rel=1e-12)
    assert c.quarter_matches and c.half_matches
    assert np.all(c.exponential <= c.better + 1e-15) and np.all(c.better <= c.unbiased_bound + 1e-15)


def test_majority_rejects_even_n() -> None:
    with pytest.raises(PlannerError):
        demos.majority_curves(1.0, 10)


# ------------------------------------------------------------------ 6. histogram


def test_perturbed_histogram_noise_variance_is_8_over_eps_squared() -> None:
    # Wasserman & Zhou (Yu's slides): Laplace noise of variance 8/α² per bin (substitution, Δ₁ = 2)
    eps, m = 0.5, 20_000
    s = demos.synthetic_sample_demo(100, eps, m, np.random.default_rng(4))
    noise = s.noisy_counts - s.counts
    b = 2 / eps
    se = b * b * math.sqrt(20.0 / m)  # sd of the sample variance: √(Var Z²/m) = b²√(20/m)
    assert abs(noise.var() - 8 / eps**2) < 5 * se
    assert s.synthetic.size == 100 and np.all((s.synthetic >= 0) & (s.synthetic <= 1))


@pytest.mark.parametrize("n", demos.SEED_001_NS)
@pytest.mark.parametrize("eps", demos.SEED_001_EPSILONS)
def test_wasserman_zhou_figure_findings(n: int, eps: float) -> None:
    # Wasserman & Zhou (Yu's slides), Figure 1 and conclusions: the perturbed MISE is above the raw one at every m,
    # and "much more sensitive to the choice of the number of cells" (its range over m is larger)
    c = demos.beta_mise_curve(n, eps, np.random.default_rng(12), reps=10)
    assert np.all(c.perturbed > c.raw)
    assert np.ptp(c.perturbed) > np.ptp(c.raw)


def test_wasserman_zhou_smaller_epsilon_larger_error() -> None:
    # Wasserman & Zhou (Yu's slides), conclusion: smaller α induces a larger mean squared error
    hi = demos.beta_mise_curve(1000, 0.1, np.random.default_rng(2), reps=10)
    lo = demos.beta_mise_curve(1000, 0.01, np.random.default_rng(2), reps=10)
    assert lo.perturbed.mean() > hi.perturbed.mean()


# ------------------------------------------------------------------ 7. composition


@pytest.mark.parametrize(("eps0", "delta"), [(0.01, 1e-6), (0.1, 1e-6), (0.1, 1e-9), (0.5, 1e-5), (0.6, 1e-3)])
def test_drv_crossover_matches_hand_formula(eps0: float, delta: float) -> None:
    # ε₀√(2k ln(1/δ)) + kε₀(e^{ε₀} − 1) < kε₀  ⇔  k > 2 ln(1/δ)/(2 − e^{ε₀})²  (hand)
    k_star = 2 * math.log(1 / delta) / (2 - math.exp(eps0)) ** 2
    assert demos.drv_crossover_k(eps0, delta) == math.floor(k_star) + 1


def test_drv_never_beats_basic_when_e_eps_at_least_2() -> None:
    assert demos.drv_crossover_k(math.log(2.0) + 1e-9, 1e-6) is None


def test_composition_curves_use_engine_rules() -> None:
    c = demos.composition_curves(0.1, [1, 10, 35, 100], 1e-6)
    assert np.allclose(c.basic, 0.1 * c.k)
    assert c.drv_crossover == 35  # 2 ln(1e6)/(2 − e^{0.1})² = 34.5 (hand) → 35
    i = int(np.flatnonzero(c.k == 35)[0])
    assert c.drv[i] < c.basic[i] and c.drv[i - 1] > c.basic[i - 1]
    assert np.all(c.advanced <= c.basic + 1e-12) and np.all(c.rdp <= c.basic + 1e-9)
    assert c.rdp[-1] == pytest.approx(accounting.rdp_epsilon([LaplaceEvent(10.0)] * 100, 1e-6)[0])


def test_per_query_epsilon_never_over_budget_and_better_than_basic() -> None:
    acc = demos.accuracy_per_rule(1.0, [1, 10, 100], 1e-6)
    assert np.allclose(acc.per_query[CompositionRule.BASIC], 1.0 / acc.k)
    for r in demos.DEMO_RULES:
        for k, e0 in zip(acc.k, acc.per_query[r], strict=True):
            assert demos._composed(r, float(e0), int(k), 1e-6) <= 1.0 * (1 + 1e-12)
            assert e0 >= 1.0 / k * (1 - 1e-12)
    # Laplace RMSE √2/ε₀; for k = 100 the tighter rules buy a smaller error
    assert np.allclose(acc.rmse[CompositionRule.BASIC], math.sqrt(2) * acc.k)
    assert acc.rmse[CompositionRule.RDP][-1] < acc.rmse[CompositionRule.BASIC][-1]
    assert acc.rmse[CompositionRule.ADVANCED][-1] < acc.rmse[CompositionRule.BASIC][-1]


@pytest.mark.parametrize("eps0", [0.001, 0.1, 1.0])
@pytest.mark.parametrize("k", [1, 37, 1000])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
def test_repeated_laplace_event_matches_engine_rdp(eps0: float, k: int, delta: float) -> None:
    # expected: the engine's own RDP accountant on k separate events; the demo's one-event
    # shortcut may only round up (by its 1e-9 relative allowance), never down
    engine = accounting.rdp_epsilon([LaplaceEvent(1.0 / eps0)] * k, delta)[0]
    fast = accounting.rdp_epsilon([SelfComposedEvent(LaplaceEvent(1.0 / eps0), k)], delta)[0]
    assert engine <= fast <= engine * (1 + 1e-8)
