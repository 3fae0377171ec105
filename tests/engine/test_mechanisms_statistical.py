"""Statistical checks of the planning simulators against the predicted accuracy.

Fixed seeds (np.random.default_rng(seed)); every tolerance is 5 standard errors of the
Monte Carlo estimate (docs/engineering.md §2), computed from the predicted quantities.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.planning.mechanisms import (
    DISCRETE_GAUSSIAN,
    DISCRETE_LAPLACE,
    GAUSSIAN,
    LAPLACE,
    Sensitivity,
    ism,
)
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms import histogram as hist
from planner.planning.mechanisms import randomized_response as rr
from planner.planning.mechanisms.gaussian import discrete_gaussian_tail
from planner.planning.mechanisms.laplace import discrete_laplace_tail

N = 200_000
Z = 5.0


def _check_mse(err: np.ndarray, rmse: float) -> None:
    sq = err.astype(np.float64) ** 2
    se = sq.std(ddof=1) / math.sqrt(sq.size)
    assert abs(sq.mean() - rmse**2) <= Z * se, (sq.mean(), rmse**2, se)


def _check_rate(hits: np.ndarray, p: float) -> None:
    se = math.sqrt(p * (1 - p) / hits.size)
    assert abs(hits.mean() - p) <= Z * se + 1e-12, (hits.mean(), p, se)


@pytest.mark.parametrize(
    "mech,eps,delta,sens,seed",
    [
        (LAPLACE, 0.5, 0.0, Sensitivity(2.0, 2.0), 1),
        (GAUSSIAN, 0.8, 1e-6, Sensitivity(3.0, 1.5), 2),
        (DISCRETE_LAPLACE, 0.3, 0.0, Sensitivity(1.0, 1.0), 3),
        (DISCRETE_GAUSSIAN, 0.7, 1e-6, Sensitivity(1.0, 1.0), 4),
        (DISCRETE_GAUSSIAN, 4.0, 1e-5, Sensitivity(1.0, 1.0), 5),  # σ < 1: far from continuous
    ],
    ids=["laplace", "gaussian", "discrete_laplace", "discrete_gaussian", "discrete_gaussian_small"],
)
def test_additive_simulation_matches_rmse_and_bound_coverage(mech, eps, delta, sens, seed) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    scale = float(mech.scale_for(eps, sens, delta)[()])
    truth = 1234.0
    err = mech.simulate(truth, scale, N, rng) - truth
    _check_mse(err, float(mech.rmse(scale)[()]))
    for beta in (0.05, 0.2):
        m = float(mech.error_bound(scale, beta)[()])
        inside = np.abs(err) <= m
        if mech.integer:
            # exact coverage of the integer bound: 1 − P(|X| > m) (≥ 1 − β by construction)
            tail = discrete_laplace_tail if mech is DISCRETE_LAPLACE else discrete_gaussian_tail
            p_in = 1.0 - float(tail(scale, m)[()])
            assert p_in >= 1 - beta
            _check_rate(inside, p_in)
        else:
            _check_rate(inside, 1 - beta)  # continuous: exactly 1 − β


def test_discrete_gaussian_sampler_matches_pmf() -> None:
    rng = np.random.default_rng(6)
    s = 1.5
    x = DISCRETE_GAUSSIAN.simulate(0.0, s, N, rng)
    k = np.arange(-8, 9)
    w = np.exp(-(k**2) / (2 * s * s))
    w /= np.exp(-(np.arange(-60, 61) ** 2) / (2 * s * s)).sum()
    for kk, p in zip(k, w, strict=True):
        _check_rate(x == kk, float(p))


def test_em_gumbel_simulator_matches_selection_probabilities() -> None:
    rng = np.random.default_rng(7)
    u = np.array([5.0, 4.0, 4.0, 1.0, 0.0, -3.0, 2.5, 4.5])
    eps, du = 0.9, 1.5
    picks = em.simulate(u, eps, N, rng, sensitivity=du)
    p = em.selection_probabilities(u, eps, du)
    for t in range(u.size):
        _check_rate(picks == t, float(p[t]))


def test_em_quantile_rank_rmse_under_uniform_spacing_model() -> None:
    # Build data realising the model: K = 51 candidates at 0..50, n = 100 points at i − 0.5 and
    # i − 0.25 (i = 1..50), so rank(t_i) = #{x < i} = 2i (g = 2) and the median rank 50 is t_25.
    rng = np.random.default_rng(8)
    k_cand, n = 51, 100
    x = np.sort(np.concatenate([np.arange(1, 51) - 0.5, np.arange(1, 51) - 0.25]))
    cands = np.arange(k_cand, dtype=np.float64)
    rank = np.searchsorted(x, cands, side="left")
    u = -np.abs(rank - 0.5 * n)
    eps = 0.4
    picks = em.simulate(u, eps, N, rng)
    err = rank[picks] - 0.5 * n
    _check_mse(err, float(em.quantile_rank_rmse(eps, k_cand, n)[()]))
    bound = float(em.quantile_rank_error_bound(eps, k_cand, 0.05)[()])
    assert np.mean(-u[picks] > bound) <= 0.05  # utility bound (loose): P[excess > bound] ≤ β


def test_ism_discrete_sampler_matches_probabilities() -> None:
    rng = np.random.default_rng(9)
    d = ism.mode_distance([20, 18, 5, 0])
    draws = ism.sample(d, 0.5, N, rng)
    p = ism.probabilities(d, 0.5).probabilities
    for t in range(4):
        _check_rate(draws == t, float(p[t]))


def test_ism_quantile_sampler_matches_interval_weights() -> None:
    rng = np.random.default_rng(10)
    x = np.array([0.05, 0.2, 0.21, 0.5, 0.52, 0.55, 0.9])
    eps = 2.0
    draws = ism.sample_quantile(x, eps, 0.5, 0.0, 1.0, N, rng)
    iv = ism.quantile_intervals(x, 0.5, 0.0, 1.0)
    w = np.diff(iv.edges) * np.exp(-eps * iv.distance / 2)
    w /= w.sum()
    which = np.searchsorted(iv.edges, draws, side="right") - 1
    for i in range(w.size):
        _check_rate(which == i, float(w[i]))


def test_rr_estimator_unbiased_and_slides_estimator_biased() -> None:
    # the coin design of Garivier, "How to learn while respecting individual privacy?" (ENS de Lyon, 2021), simulated literally: truth w.p. 1/2, else a fair coin
    rng = np.random.default_rng(11)
    n, reps, ones = 1000, 4000, 300
    x = np.zeros(n, dtype=np.int64)
    x[:ones] = 1
    keep_truth = rng.random((reps, n)) < 0.5
    coin = rng.integers(0, 2, size=(reps, n))
    y = np.where(keep_truth, x, coin)
    ybar = y.mean(axis=1)
    ours = rr.estimate(ybar, rr.coin_design_keep_probability(0.5))
    se = ours.std(ddof=1) / math.sqrt(reps)
    assert abs(ours.mean() - 0.3) <= Z * se  # unbiased
    naive = 2 * ybar - 1  # the slides' estimator
    assert abs(naive.mean() - 0.3) > 50 * se  # biased by −1/2
    assert naive.mean() == pytest.approx(0.3 - 0.5, abs=Z * se)


def test_rr_simulated_rmse_matches_variance_and_ci_covers() -> None:
    rng = np.random.default_rng(12)
    pi, n, eps = 0.3, 2000, 1.0
    p = float(rr.keep_probability(eps)[()])
    est = rr.simulate_estimates(pi, n, p, N, rng)
    _check_mse(est - pi, float(np.sqrt(rr.variance(pi, n, p))[()]))
    # worst case π = 1/2 equals the planning RMSE
    est_half = rr.simulate_estimates(0.5, n, p, N, rng)
    _check_mse(est_half - 0.5, float(rr.worst_case_rmse(eps, n)[()]))
    # Wald interval coverage (CLT approximation; allow 1 point of approximation error)
    reps = 4000
    ybar = (est[:reps] * (2 * p - 1) + (1 - p))
    cover = np.array([rr.confidence_interval(float(yb), n, p).lower <= pi <= rr.confidence_interval(float(yb), n, p).upper
                      for yb in ybar])
    se = math.sqrt(0.05 * 0.95 / reps)
    assert abs(cover.mean() - 0.95) <= Z * se + 0.01


def test_rr_report_simulator_keeps_with_probability_p() -> None:
    rng = np.random.default_rng(13)
    y = rr.simulate_reports(np.ones(N, dtype=np.int64), 0.8, rng)
    _check_rate(y == 1, 0.8)


def test_histogram_perturbation_has_variance_8_over_eps_squared() -> None:
    rng = np.random.default_rng(14)
    eps = 0.5
    counts = np.full(N, 10.0)
    noisy = hist.perturb_counts(counts, eps, Sensitivity(2.0, math.sqrt(2.0)), rng)
    _check_mse(noisy - counts, math.sqrt(8 / eps**2))  # Wasserman & Zhou, "A statistical framework for differential privacy" (JASA 2010; Yu's Purdue slides): variance 8/α²
