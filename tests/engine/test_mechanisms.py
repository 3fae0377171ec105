"""Deterministic tests of the mechanism modules: formulas, calibration, round trips.

Every expected number states its source: a hand calculation, a seed page, a paper, or an
independent library (OpenDP's accuracy helpers and measurements, scipy) used only here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import opendp.prelude as dp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from planner.core.errors import BudgetError, QueryError
from planner.planning.mechanisms import (
    DISCRETE_GAUSSIAN,
    DISCRETE_LAPLACE,
    GAUSSIAN,
    LAPLACE,
    MechanismName,
    Sensitivity,
    additive,
    ism,
)
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms import histogram as hist
from planner.planning.mechanisms import randomized_response as rr
from planner.planning.mechanisms.gaussian import (
    discrete_gaussian_tail,
    discrete_gaussian_variance,
    textbook_gaussian_sigma,
)
from planner.planning.mechanisms.laplace import discrete_laplace_tail, discrete_laplace_variance
from planner.privacy import divergences as dv
from planner.privacy.accounting import event_rho, pure_epsilon
from planner.privacy.events import (
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PureEvent,
    RandomizedResponseEvent,
)

dp.enable_features("contrib")

UNIT = Sensitivity(1.0, 1.0)
ALL_ADDITIVE = [LAPLACE, GAUSSIAN, DISCRETE_LAPLACE, DISCRETE_GAUSSIAN]
EPS_GRID = np.geomspace(0.01, 10.0, 60)


def _delta_for(mech: object) -> float:
    return 0.0 if mech.pure else 1e-6


# ----------------------------------------------------------------------------- registry / API


def test_registry_additive_returns_each_mechanism_by_name() -> None:
    for name in (MechanismName.LAPLACE, MechanismName.GAUSSIAN,
                 MechanismName.DISCRETE_LAPLACE, MechanismName.DISCRETE_GAUSSIAN):
        m = additive(name)
        assert m.name == name
        assert additive(name.value) is m


def test_registry_additive_rejects_non_additive_names() -> None:
    with pytest.raises(QueryError, match="not an additive-noise mechanism"):
        additive(MechanismName.EXPONENTIAL)
    with pytest.raises(QueryError):
        additive("nonsense")


def test_additive_flags_pure_and_integer() -> None:
    assert (LAPLACE.pure, LAPLACE.integer) == (True, False)
    assert (GAUSSIAN.pure, GAUSSIAN.integer) == (False, False)
    assert (DISCRETE_LAPLACE.pure, DISCRETE_LAPLACE.integer) == (True, True)
    assert (DISCRETE_GAUSSIAN.pure, DISCRETE_GAUSSIAN.integer) == (False, True)


@pytest.mark.parametrize("mech", ALL_ADDITIVE, ids=lambda m: m.name.value)
def test_additive_rejects_bad_epsilon_and_beta(mech: object) -> None:
    m = mech
    with pytest.raises(BudgetError, match="epsilon must be > 0"):
        m.scale_for([1.0, -1.0], UNIT, _delta_for(m))  # type: ignore[attr-defined]
    with pytest.raises(QueryError, match="beta"):
        m.error_bound(1.0, 1.5)  # type: ignore[attr-defined]


@pytest.mark.parametrize("mech", [GAUSSIAN, DISCRETE_GAUSSIAN], ids=lambda m: m.name.value)
def test_gaussian_family_needs_positive_delta(mech: object) -> None:
    with pytest.raises(QueryError, match="delta"):
        mech.scale_for(1.0, UNIT, 0.0)  # type: ignore[attr-defined]


@pytest.mark.parametrize("mech", ALL_ADDITIVE, ids=lambda m: m.name.value)
def test_additive_vectorises_over_epsilon(mech: object) -> None:
    s = mech.scale_for(EPS_GRID, UNIT, _delta_for(mech))  # type: ignore[attr-defined]
    assert s.shape == EPS_GRID.shape
    assert mech.rmse(s).shape == EPS_GRID.shape  # type: ignore[attr-defined]
    assert mech.error_bound(s, 0.05).shape == EPS_GRID.shape  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------- Laplace


def test_laplace_scale_rmse_bound_by_hand() -> None:
    sens = Sensitivity(2.0, 2.0)
    b = float(LAPLACE.scale_for(0.5, sens)[()])
    assert b == 4.0  # b = Δ₁/ε = 2/0.5, by hand (MATH §3)
    assert float(LAPLACE.rmse(b)[()]) == pytest.approx(4.0 * math.sqrt(2.0))  # √2·b
    assert float(LAPLACE.error_bound(b, 0.05)[()]) == pytest.approx(4.0 * math.log(20.0))  # b ln(1/β)


def test_laplace_error_bound_matches_opendp() -> None:
    for b, beta in itertools.product([0.1, 1.0, 7.5], [0.5, 0.05, 1e-6]):
        # OpenDP's laplacian_scale_to_accuracy: independent implementation of b·ln(1/α)
        assert float(LAPLACE.error_bound(b, beta)[()]) == pytest.approx(
            dp.laplacian_scale_to_accuracy(b, beta), rel=1e-12)


def test_laplace_epsilon_matches_opendp_measurement() -> None:
    # OpenDP's make_laplace maps d_in = Δ to ε = Δ/b
    meas = dp.m.make_laplace(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=2.0)
    assert float(LAPLACE.epsilon_for(2.0, Sensitivity(3.0, 3.0))[()]) == pytest.approx(meas.map(3.0))


def test_laplace_event_is_laplace_with_noise_multiplier() -> None:
    ev = LAPLACE.event(4.0, Sensitivity(2.0, 2.0))
    assert isinstance(ev, LaplaceEvent)
    assert ev.noise_multiplier == 2.0 and pure_epsilon(ev) == 0.5  # b/Δ = 2 → ε = 1/2


# -------------------------------------------------------------------------------------- Gaussian


@pytest.mark.parametrize("eps,delta,l2", [(0.1, 1e-5, 1.0), (1.0, 1e-6, 2.0), (5.0, 1e-9, 0.3)])
def test_gaussian_sigma_is_the_least_valid(eps: float, delta: float, l2: float) -> None:
    sigma = float(GAUSSIAN.scale_for(eps, Sensitivity(l2, l2), delta)[()])
    # Balle & Wang 2018, Thm 8: valid at σ, invalid 0.1% below
    assert float(dv.analytic_gaussian_delta(eps, l2 / sigma)[()]) <= delta
    assert float(dv.analytic_gaussian_delta(eps, l2 / (sigma * 0.999))[()]) > delta


def test_gaussian_analytic_sigma_beats_textbook_for_small_epsilon() -> None:
    eps = np.linspace(0.01, 0.99, 50)
    for delta in (1e-3, 1e-6, 1e-10):
        analytic = GAUSSIAN.scale_for(eps, UNIT, delta)
        textbook = textbook_gaussian_sigma(eps, delta)  # Dwork & Roth Thm A.1
        assert np.all(analytic < textbook)


def test_gaussian_textbook_sigma_is_valid_hence_an_upper_bound() -> None:
    # Dwork & Roth Thm A.1 holds for ε < 1, so its σ must satisfy the exact condition.
    for eps in (0.1, 0.5, 0.9):
        s = float(textbook_gaussian_sigma(eps, 1e-5)[()])
        assert float(dv.analytic_gaussian_delta(eps, 1.0 / s)[()]) <= 1e-5


def test_gaussian_error_bound_matches_opendp_and_scipy() -> None:
    for s, beta in itertools.product([0.5, 1.0, 30.0], [0.05, 0.01, 1e-6]):
        got = float(GAUSSIAN.error_bound(s, beta)[()])
        assert got == pytest.approx(dp.gaussian_scale_to_accuracy(s, beta), rel=1e-9)
        assert got == pytest.approx(stats.norm.ppf(1 - beta / 2) * s, rel=1e-12)


def test_gaussian_round_trip_and_event() -> None:
    sigma = GAUSSIAN.scale_for(EPS_GRID, Sensitivity(3.0, 2.0), 1e-6)
    back = GAUSSIAN.epsilon_for(sigma, Sensitivity(3.0, 2.0), 1e-6)
    np.testing.assert_allclose(back, EPS_GRID, rtol=1e-9)
    ev = GAUSSIAN.event(4.0, Sensitivity(3.0, 2.0))
    assert isinstance(ev, GaussianEvent) and ev.noise_multiplier == 2.0 and not ev.discrete


def test_gaussian_rmse_is_sigma() -> None:
    assert float(GAUSSIAN.rmse(3.5)[()]) == 3.5  # MSE = σ² (MATH §3)


# ------------------------------------------------------------------------------ discrete Laplace


def _pmf_sum_discrete_laplace(t: float) -> tuple[float, np.ndarray]:
    k = np.arange(-4000, 4001, dtype=np.float64)
    w = np.exp(-np.abs(k) / t)
    w /= w.sum()
    return float((w * k**2).sum()), w


@pytest.mark.parametrize("t", [0.2, 1.0, 3.0, 50.0])
def test_discrete_laplace_variance_matches_pmf_sum(t: float) -> None:
    var, _ = _pmf_sum_discrete_laplace(t)  # direct sum of the pmf P(k) ∝ e^{−|k|/t}
    assert float(discrete_laplace_variance(t)[()]) == pytest.approx(var, rel=1e-10)
    r = math.exp(-1.0 / t)
    assert float(discrete_laplace_variance(t)[()]) == pytest.approx(2 * r / (1 - r) ** 2, rel=1e-12)


def test_discrete_laplace_tail_matches_pmf_sum() -> None:
    k = np.arange(-4000, 4001)
    _, w = _pmf_sum_discrete_laplace(2.0)
    for m in (0, 1, 5, 20):
        assert float(discrete_laplace_tail(2.0, m)[()]) == pytest.approx(w[np.abs(k) > m].sum(), rel=1e-10)


def test_discrete_laplace_error_bound_is_floor_of_opendp() -> None:
    # OpenDP returns the real a with P(|X| ≥ a) = α; "you can take the floor" (its docstring),
    # and floor(a) is the smallest integer m with P(|X| > m) ≤ α.
    for t, beta in itertools.product([0.3, 1.0, 2.0, 17.0, 1000.0], [0.5, 0.05, 0.01, 1e-6]):
        ours = float(DISCRETE_LAPLACE.error_bound(t, beta)[()])
        assert ours == math.floor(dp.discrete_laplacian_scale_to_accuracy(t, beta))
        assert float(discrete_laplace_tail(t, ours)[()]) <= beta
        if ours > 0:
            assert float(discrete_laplace_tail(t, ours - 1)[()]) > beta


def test_discrete_laplace_error_bound_by_hand() -> None:
    # t = 2, β = 0.05: P(|X| > m) = 2e^{−(m+1)/2}/(1 + e^{−1/2}): m = 5 → 0.0621, m = 6 → 0.0377
    assert float(DISCRETE_LAPLACE.error_bound(2.0, 0.05)[()]) == 6.0


def test_discrete_laplace_event_and_epsilon_match_opendp() -> None:
    ev = DISCRETE_LAPLACE.event(2.0, Sensitivity(1.0, 1.0))
    assert isinstance(ev, PureEvent) and ev.epsilon == 0.5
    meas = dp.m.make_laplace(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=2.0)
    assert float(DISCRETE_LAPLACE.epsilon_for(2.0, Sensitivity(3.0, 3.0))[()]) == pytest.approx(meas.map(3))


# ----------------------------------------------------------------------------- discrete Gaussian


@pytest.mark.parametrize("s", [0.3, 1.0, 3.0, 20.0, 63.9, 64.0, 150.0])
def test_discrete_gaussian_variance_matches_pmf_sum(s: float) -> None:
    k = np.arange(-20000, 20001, dtype=np.float64)
    w = np.exp(-(k**2) / (2 * s * s))
    w /= w.sum()
    assert float(discrete_gaussian_variance(s)[()]) == pytest.approx(float((w * k**2).sum()), rel=1e-10)
    assert float(discrete_gaussian_variance(s)[()]) <= s * s * (1 + 1e-12)  # CKS20: Var ≤ σ²


@pytest.mark.parametrize("s", [0.5, 2.0, 63.0, 64.0, 80.0, 300.0])
def test_discrete_gaussian_tail_matches_pmf_sum(s: float) -> None:
    k = np.arange(-40000, 40001, dtype=np.float64)
    w = np.exp(-(k**2) / (2 * s * s))
    w /= w.sum()
    for m in (0, int(s), int(3 * s), int(5 * s)):
        exact = float(w[np.abs(k) > m].sum())
        assert float(discrete_gaussian_tail(s, m)[()]) == pytest.approx(exact, rel=1e-7, abs=1e-300)


def test_discrete_gaussian_error_bound_matches_opendp() -> None:
    # OpenDP's discrete_gaussian_scale_to_accuracy returns the least integer a with
    # P(|X| ≥ a) ≤ α; ours is the least m with P(|X| > m) ≤ β, so a = m + 1.
    for s, beta in itertools.product([0.3, 1.0, 2.0, 10.0, 63.0, 64.0, 100.0, 12345.6],
                                     [0.5, 0.05, 0.01, 1e-6]):
        assert float(DISCRETE_GAUSSIAN.error_bound(s, beta)[()]) == dp.discrete_gaussian_scale_to_accuracy(s, beta) - 1


def test_discrete_gaussian_rho_and_epsilon_match_opendp() -> None:
    # OpenDP: discrete Gaussian on ints, scale 3 → ρ = Δ²/(2σ²); zCDP → (ε, δ) conversion
    meas = dp.m.make_gaussian(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=3.0)
    ev = DISCRETE_GAUSSIAN.event(3.0, UNIT)
    assert isinstance(ev, GaussianEvent) and ev.discrete
    assert event_rho(ev) == pytest.approx(meas.map(1))
    approx = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), delta=1e-6).map(1)
    assert float(DISCRETE_GAUSSIAN.epsilon_for(3.0, UNIT, 1e-6)[()]) == pytest.approx(approx[0], rel=1e-9)


def test_discrete_gaussian_round_trip_is_tight_and_valid() -> None:
    sens = Sensitivity(2.0, 1.5)
    sigma = DISCRETE_GAUSSIAN.scale_for(EPS_GRID, sens, 1e-6)
    back = DISCRETE_GAUSSIAN.epsilon_for(sigma, sens, 1e-6)
    assert np.all(back <= EPS_GRID)  # never too little noise
    np.testing.assert_allclose(back, EPS_GRID, rtol=1e-8)


def test_discrete_gaussian_needs_more_noise_than_analytic_gaussian() -> None:
    # the zCDP conversion is never below the exact Gaussian ε at the same ρ, hence σ_DG ≥ σ_G
    assert np.all(DISCRETE_GAUSSIAN.scale_for(EPS_GRID, UNIT, 1e-6) >= GAUSSIAN.scale_for(EPS_GRID, UNIT, 1e-6))


# ------------------------------------------------------------------------- hypothesis properties

eps_pairs = st.tuples(st.floats(0.01, 20.0), st.floats(1.001, 5.0))


@settings(max_examples=60, deadline=None)
@given(pair=eps_pairs, l1=st.floats(0.01, 1e4))
def test_additive_error_decreases_in_epsilon(pair: tuple[float, float], l1: float) -> None:
    e1, factor = pair
    e2 = e1 * factor
    sens = Sensitivity(l1, l1)
    for m in ALL_ADDITIVE:
        d = _delta_for(m)
        s1, s2 = m.scale_for([e1, e2], sens, d)
        r1, r2 = m.rmse([s1, s2])
        b1, b2 = m.error_bound([s1, s2], 0.05)
        if m.integer:
            # exact, but the discrete noise at a tiny scale is 0 w.p. 1 − 1e-300: both RMSEs
            # (and the integer bounds) may underflow or tie
            assert r2 <= r1
        else:
            assert r2 < r1
        assert b2 <= b1


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(0.005, 30.0), l1=st.floats(1e-3, 1e5), l2=st.floats(1e-3, 1e5),
       delta=st.sampled_from([1e-3, 1e-6, 1e-10]))
def test_additive_calibration_round_trips(eps: float, l1: float, l2: float, delta: float) -> None:
    sens = Sensitivity(l1, l2)
    for m in ALL_ADDITIVE:
        d = _delta_for(m) and delta
        s = m.scale_for(eps, sens, d)
        back = float(m.epsilon_for(s, sens, d)[()])
        assert back <= eps * (1 + 1e-12)
        assert back == pytest.approx(eps, rel=1e-7)


@settings(max_examples=40, deadline=None)
@given(e1=st.floats(0.01, 10.0), factor=st.floats(1.01, 4.0), k=st.integers(2, 10_000),
       n=st.integers(1, 10**6))
def test_selection_and_rr_errors_decrease_in_epsilon(e1: float, factor: float, k: int, n: int) -> None:
    e = np.array([e1, e1 * factor])
    b = em.utility_bound(e, k, 0.05)
    assert b[1] < b[0]
    r = rr.worst_case_rmse(e, n)
    assert r[1] < r[0]
    q = em.quantile_rank_rmse(e, min(k, 500), n)
    assert q[1] <= q[0] * (1 + 1e-12)


# ---------------------------------------------------------------------------- exponential mech.


def test_em_selection_probabilities_by_hand() -> None:
    p = em.selection_probabilities([2.0, 0.0, 0.0], 1.0, sensitivity=1.0)
    # P(0) = e^{1}/(e^{1} + 2) (ε u/(2Δ) = 1), by hand
    assert p[0] == pytest.approx(math.e / (math.e + 2.0))
    assert p.sum() == pytest.approx(1.0)


def test_em_selection_is_stable_in_log_space() -> None:
    p = em.selection_probabilities([1e6, 0.0], np.array([1.0, 1e3]))
    assert np.all(np.isfinite(p)) and np.allclose(p[:, 0], 1.0)


def test_em_selection_shape_vectorises_over_epsilon() -> None:
    p = em.selection_probabilities(np.arange(5.0), EPS_GRID)
    assert p.shape == (EPS_GRID.size, 5)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def test_em_utility_gap_by_hand_and_seed_form() -> None:
    # (2Δu/ε)(ln|T| + s) with Δu = 1, ε = 0.5, |T| = 10, s = 2: 4(ln 10 + 2) = 17.2103
    assert float(em.utility_gap(0.5, 10, 2.0)[()]) == pytest.approx(4 * (math.log(10) + 2))
    # Garivier, "How to learn while respecting individual privacy?" (ENS de Lyon, 2021): P(u ≤ OPT − v) ≤ |T| e^{−εv/(2Δu)}; at the β bound this equals β
    v = float(em.utility_bound(0.7, 37, 0.01, 3.0)[()])
    assert 37 * math.exp(-0.7 * v / 6.0) == pytest.approx(0.01)


def test_em_utility_bound_holds_exactly_for_worst_case_utilities() -> None:
    # exact law: one best candidate at 0, the rest at −v; P(selected has u ≤ OPT − v) ≤ β
    for eps, k in [(0.1, 100), (1.0, 10), (3.0, 1000)]:
        v = float(em.utility_bound(eps, k, 0.05)[()])
        u = np.concatenate([[0.0], np.full(k - 1, -v)])
        p = em.selection_probabilities(u, eps)
        assert p[1:].sum() <= 0.05


def test_em_quantile_rank_rmse_tends_to_laplace_value() -> None:
    # g → 0: rank error ~ Laplace(2/ε) in ranks, RMSE = 2√2/ε (ε = 0.05 → 56.57)
    got = float(em.quantile_rank_rmse(0.05, 20_001, 2_000)[()])
    assert got == pytest.approx(2 * math.sqrt(2) / 0.05, rel=0.01)


def test_em_quantile_rank_rmse_by_hand_two_steps() -> None:
    # |T| = 3, n = 2 → g = 1, c = 1: errors (1, 0, 1) with weights (e^{−ε/2}, 1, e^{−ε/2})
    eps = 1.0
    w = math.exp(-0.5)
    expected = math.sqrt(2 * w / (1 + 2 * w))
    assert float(em.quantile_rank_rmse(eps, 3, 2)[()]) == pytest.approx(expected)


def test_em_event() -> None:
    ev = em.event(0.8)
    assert isinstance(ev, ExponentialEvent) and event_rho(ev) == pytest.approx(0.08)  # ε²/8


def test_majority_formulas_by_hand_garivier() -> None:
    eps, s, n = 0.5, 8, 11  # |2s − n| = 5, r = 3
    assert float(em.majority_em_correct(eps, s, n)[()]) == pytest.approx(1 / (1 + math.exp(-5 * 0.5 / 2)))
    assert float(em.majority_better_correct(eps, s, n)[()]) == pytest.approx(1 / (1 + math.exp(-3 * 0.5)))
    assert float(em.majority_unbiased_upper_bound(eps, s, n)[()]) == pytest.approx(1 / (1 + math.exp(-6 * 0.5)))


def test_majority_em_equals_exponential_mechanism_with_seed_utility() -> None:
    # Garivier's lecture notes: u(x, t) = (2t − 1)(s − n/2), Δu = 1
    for s, n, eps in [(3, 11, 0.3), (9, 11, 1.2), (50, 101, 0.05)]:
        u = np.array([-(s - n / 2), s - n / 2])
        p = em.selection_probabilities(u, eps)
        correct = p[1] if 2 * s > n else p[0]
        assert float(em.majority_em_correct(eps, s, n)[()]) == pytest.approx(correct)


def test_majority_better_mechanism_is_eps_dp_garivier() -> None:
    # p(k + r) = 1/(1 + e^{−rε}), p(n − s) = 1 − p(s): check the DP ratio for every s
    n, eps = 21, 0.7
    k = n // 2
    s = np.arange(n + 1)
    r = np.where(s > k, s - k, 0)
    r_low = np.where(s <= k, k + 1 - s, 0)
    p1 = np.where(s > k, 1 / (1 + np.exp(-r * eps)), 1 - 1 / (1 + np.exp(-r_low * eps)))
    for a, b in ((p1[1:], p1[:-1]), (1 - p1[1:], 1 - p1[:-1])):
        assert np.all(np.abs(np.log(a / b)) <= eps + 1e-12)
    got = em.majority_better_correct(eps, s, n)
    np.testing.assert_allclose(got, np.where(s > k, p1, 1 - p1))


# ------------------------------------------------------------------------------------------ ISM


def test_ism_quantile_distance_by_hand() -> None:
    data = [1.0, 2.0, 3.0, 4.0, 5.0]  # median x_(3) = 3
    d = ism.quantile_distance(data, [3.0, 2.5, 3.5, 1.5, 0.5, 6.0, 2.0], 0.5, 0.0, 10.0)
    # t=3: 0; inside (2,3) or (3,4): 1; (1,2): 2 points must move; below 1 or above 5: 3
    # t = 2 (a data point): a = 1, b = 2 → max(0, 1−3+1, 3−2) = 1
    assert d.distance.tolist() == [0, 1, 1, 2, 3, 3, 1]
    assert d.data_dependent


def test_ism_quantile_distance_brute_force_small() -> None:
    # brute force on a grid: least number of substitutions (values from a grid) making x_(j) = t
    rng = np.random.default_rng(5)
    grid = np.arange(0, 6, dtype=np.float64)
    for _ in range(10):
        x = rng.integers(0, 6, size=5).astype(np.float64)
        for q in (0.2, 0.5, 0.8):
            j = ism.quantile_index(5, q)
            got = ism.quantile_distance(x, grid, q, 0, 5).distance
            for ti, t in enumerate(grid):
                best = None
                for k in range(6):
                    for idx in itertools.combinations(range(5), k):
                        rest = np.delete(x, list(idx))
                        # the changed records can take any value; optimal to put them at t or extremes
                        for vals in itertools.product([0.0, t, 5.0], repeat=k):
                            y = np.sort(np.concatenate([rest, vals]))
                            if y[j - 1] == t:
                                best = k
                                break
                        if best is not None:
                            break
                    if best is not None:
                        break
                assert got[ti] == best, (x, q, t)


def test_ism_intervals_match_pointwise_distance() -> None:
    x = np.array([0.1, 0.4, 0.4, 0.7, 0.9, 0.95])
    iv = ism.quantile_intervals(x, 0.5, 0.0, 1.0)
    assert iv.edges.size == x.size + 2 and iv.distance.size == x.size + 1
    mids = (iv.edges[:-1] + iv.edges[1:]) / 2
    ok = np.diff(iv.edges) > 0
    pointwise = ism.quantile_distance(x, mids, 0.5, 0.0, 1.0).distance
    np.testing.assert_array_equal(iv.distance[ok], pointwise[ok])


def _mode(c: tuple[int, ...]) -> int:
    return int(np.argmax(c))  # numpy's argmax breaks ties to the smallest index


def test_ism_mode_distance_matches_breadth_first_search() -> None:
    # BFS over count vectors: one substitution moves one record between categories
    rng = np.random.default_rng(11)
    for _ in range(25):
        k = int(rng.integers(2, 5))
        c = tuple(int(v) for v in rng.multinomial(int(rng.integers(1, 9)), np.ones(k) / k))
        dist = {c: 0}
        frontier = [c]
        while frontier:
            nxt = []
            for state in frontier:
                for a, b in itertools.permutations(range(k), 2):
                    if state[a] > 0:
                        s = list(state)
                        s[a] -= 1
                        s[b] += 1
                        st_ = tuple(s)
                        if st_ not in dist:
                            dist[st_] = dist[state] + 1
                            nxt.append(st_)
            frontier = nxt
        expected = [min(d for s, d in dist.items() if _mode(s) == t) for t in range(k)]
        assert ism.mode_distance(c).distance.tolist() == expected, c


def test_ism_majority_distance_agrees_with_mode_distance() -> None:
    for s, n in [(6, 11), (0, 11), (11, 11), (5, 11), (50, 99)]:
        a = ism.majority_distance(s, n).distance.tolist()
        b = ism.mode_distance([n - s, s]).distance.tolist()
        assert a == b
        assert max(a) == (abs(2 * s - n) + 1) // 2  # Garivier's lecture notes: |s − n/2| + 1/2


def test_ism_probabilities_equal_em_with_negative_distance() -> None:
    d = ism.mode_distance([9, 4, 4, 1])
    p = ism.probabilities(d, EPS_GRID)
    np.testing.assert_allclose(p.probabilities, em.selection_probabilities(-d.distance.astype(float), EPS_GRID))
    np.testing.assert_allclose(p.exact, p.probabilities[:, 0])  # f(x) = category 0 has D = 0
    assert p.data_dependent


def test_ism_binary_drops_the_half_and_matches_better_mechanism() -> None:
    d = ism.majority_distance(8, 11)
    p = ism.probabilities(d, 0.5)
    # |T| = 2: P(correct) = 1/(1 + e^{−rε}), r = 3 (Garivier's "better mechanism")
    assert float(p.exact[()]) == pytest.approx(float(em.majority_better_correct(0.5, 8, 11)[()]))


def test_ism_exact_probability_by_hand() -> None:
    # D = (0, 1, 2), ε = 2, with /2: 1/(1 + e^{−1} + e^{−2}) = 0.665241
    assert float(ism.exact_probability([0, 1, 2], 2.0)[()]) == pytest.approx(1 / (1 + math.exp(-1) + math.exp(-2)))


def test_ism_quantile_index_convention() -> None:
    assert ism.quantile_index(11, 0.5) == 6
    assert ism.quantile_index(10, 0.5) == 5
    assert ism.quantile_index(10, 1.0) == 10
    assert ism.quantile_index(10, 0.0) == 1


def test_ism_rejects_nan_and_bad_bounds() -> None:
    with pytest.raises(QueryError, match="NaN"):
        ism.quantile_distance([1.0, float("nan")], [1.0], 0.5, 0, 2)
    with pytest.raises(QueryError, match="lower < upper"):
        ism.quantile_intervals([1.0], 0.5, 2, 1)


# ---------------------------------------------------------------------------- randomized response


def test_rr_epsilon_and_keep_by_hand() -> None:
    assert float(rr.epsilon_for(0.75)[()]) == pytest.approx(math.log(3))  # the Berkeley Math Circle handout "Differential privacy", Claim 1
    assert float(rr.keep_probability(math.log(3))[()]) == pytest.approx(0.75)
    assert rr.coin_design_keep_probability(0.5) == 0.75  # Garivier's lecture notes: P[Y=1|X=x] = 1/4 + x/2
    assert float(rr.report_one_probability(1.0, 0.75)[()]) == 0.75
    assert float(rr.report_one_probability(0.0, 0.75)[()]) == 0.25


def test_rr_estimator_is_unbiased_in_expectation() -> None:
    # E[ȳ] = q(π) exactly; π̂ is affine in ȳ so E[π̂] = π̂(q(π)) = π
    for p, pi in itertools.product([0.55, 0.75, 0.99], [0.0, 0.1, 0.5, 0.93, 1.0]):
        q = float(rr.report_one_probability(pi, p)[()])
        assert float(rr.estimate(q, p)[()]) == pytest.approx(pi, abs=1e-12)


def test_rr_slides_estimator_two_ybar_minus_one_is_biased() -> None:
    # coin design p = 3/4: E[ȳ] = 1/4 + π/2; 2E[ȳ] − 1 = π − 1/2 ≠ π, while 2E[ȳ] − 1/2 = π
    for pi in (0.0, 0.3, 1.0):
        q = 0.25 + pi / 2
        assert 2 * q - 1 == pytest.approx(pi - 0.5)
        assert float(rr.estimate(q, 0.75)[()]) == pytest.approx(2 * q - 0.5)


def test_rr_variance_and_worst_case() -> None:
    # Warner 1965: Var = q(1 − q)/(n(2p − 1)²); n = 100, p = 3/4, π = 1/2: q = 1/2 → 0.01
    assert float(rr.variance(0.5, 100, 0.75)[()]) == pytest.approx(0.25 / (100 * 0.25))
    pis = np.linspace(0, 1, 1001)
    for eps in (0.1, 1.0, 4.0):
        p = float(rr.keep_probability(eps)[()])
        worst = np.sqrt(rr.variance(pis, 500, p)).max()
        assert float(rr.worst_case_rmse(eps, 500)[()]) == pytest.approx(worst, rel=1e-12)


def test_rr_data_cost_factor_garivier_four_times() -> None:
    assert float(rr.data_cost_factor(math.log(3))[()]) == pytest.approx(4.0)  # (2·3/4 − 1)⁻²


def test_rr_confidence_interval_by_hand() -> None:
    ci = rr.confidence_interval(0.5, 100, 0.75, 0.05)
    half = stats.norm.ppf(0.975) * math.sqrt(0.25 / (100 * 0.25))
    assert ci.estimate == pytest.approx(0.5)
    assert (ci.lower, ci.upper) == pytest.approx((0.5 - half, 0.5 + half))
    assert rr.confidence_interval(0.26, 100, 0.75).lower == 0.0  # clipped at 0


def test_rr_event_and_validation() -> None:
    ev = rr.event(0.75)
    assert isinstance(ev, RandomizedResponseEvent) and pure_epsilon(ev) == pytest.approx(math.log(3))
    with pytest.raises(QueryError, match="keep_probability"):
        rr.estimate(0.5, 0.5)


# -------------------------------------------------------------------------------------- histogram


def test_histogram_perturbed_scale_wasserman_zhou() -> None:
    sub = Sensitivity(2.0, math.sqrt(2.0))  # substitution, MATH §2
    b = float(hist.perturbed_scale(0.1, sub)[()])
    assert 2 * b**2 == pytest.approx(8 / 0.1**2)  # Wasserman & Zhou, "A statistical framework for differential privacy" (JASA 2010; Yu's Purdue slides): variance 8/α²
    ev = hist.perturbed_event(0.1, sub)
    assert pure_epsilon(ev) == pytest.approx(0.1)


def test_histogram_clamp_normalise() -> None:
    q = hist.clamp_normalise([3.0, -2.0, 1.0, 0.0])
    np.testing.assert_allclose(q, [0.75, 0.0, 0.25, 0.0])
    np.testing.assert_allclose(hist.clamp_normalise([-1.0, -3.0]), [0.5, 0.5])


def test_histogram_smoothed_condition_and_inverses() -> None:
    # Wasserman & Zhou (Yu's slides) eq. (4): k ln((1 − δ)m/(nδ) + 1) ≤ α; m = 10, n = 1000, w = 0.1 → per draw ln 1.09
    assert float(hist.smoothed_epsilon(1, 10, 1000, 0.1)[()]) == pytest.approx(math.log(1.09))
    kmax = int(hist.smoothed_max_draws(1.0, 10, 1000, 0.1)[()])
    assert kmax == math.floor(1.0 / math.log(1.09))  # = 11
    assert float(hist.smoothed_epsilon(kmax, 10, 1000, 0.1)[()]) <= 1.0 < float(hist.smoothed_epsilon(kmax + 1, 10, 1000, 0.1)[()])
    w = float(hist.smoothed_min_mixing_weight(1.0, 50, 10, 1000)[()])
    assert float(hist.smoothed_epsilon(50, 10, 1000, w)[()]) <= 1.0
    assert float(hist.smoothed_epsilon(50, 10, 1000, w * 0.999)[()]) > 1.0
    with pytest.raises(QueryError, match="not the DP δ"):
        hist.smoothed_epsilon(1, 10, 100, 0.0)


def test_histogram_smoothed_probabilities() -> None:
    q = hist.smoothed_probabilities([6, 2, 2, 0], 0.2)
    np.testing.assert_allclose(q, 0.8 * np.array([0.6, 0.2, 0.2, 0.0]) + 0.2 / 4)


def test_histogram_ise_matches_numerical_integration() -> None:
    d = stats.beta(10, 10)
    q = np.array([0.05, 0.2, 0.5, 0.2, 0.05])
    f_hat = lambda x: q[min(int(x * 5), 4)] * 5  # noqa: E731
    pts = list(np.linspace(0, 1, 6))
    quad, _ = integrate.quad(lambda x: (d.pdf(x) - f_hat(x)) ** 2, 0, 1, points=pts, limit=200)
    got = float(hist.integrated_squared_error(q, d.cdf, hist.beta_density_l2_sq(10, 10))[()])
    assert got == pytest.approx(quad, rel=1e-7)


def test_histogram_beta_l2_matches_quad() -> None:
    quad, _ = integrate.quad(lambda x: stats.beta(10, 10).pdf(x) ** 2, 0, 1)
    assert hist.beta_density_l2_sq(10, 10) == pytest.approx(quad, rel=1e-10)


def test_histogram_bin_counts_and_sampling_stay_in_bins() -> None:
    c = hist.bin_counts([0.0, 0.1, 0.5, 0.99, 1.0], 4)
    assert c.tolist() == [2, 0, 1, 2]
    rng = np.random.default_rng(0)
    pts = hist.sample_points(np.array([0.0, 1.0, 0.0]), hist.equal_bins(3), 1000, rng)
    assert np.all((pts >= 1 / 3) & (pts <= 2 / 3))


def test_histogram_mise_vs_bins_reports_progress_and_orders_methods() -> None:
    d = stats.beta(10, 10)
    calls: list[tuple[int, int]] = []
    curve = hist.mise_vs_bins([5, 20], 1000, 0.1, lambda k, g: d.rvs(k, random_state=g), d.cdf,
                              hist.beta_density_l2_sq(10, 10), 10, np.random.default_rng(1),
                              progress=lambda i, n: calls.append((i, n)))
    assert calls[-1] == (10, 10) and len(calls) == 10
    assert np.all(curve.perturbed > curve.raw)  # Wasserman & Zhou (Yu's slides) Figure 1: perturbed MISE is above raw
    assert curve.monte_carlo and not curve.data_dependent
