"""Statistical privacy audits (notes/audit.md): every mechanism passes, and a deliberately
mis-calibrated twin of each is flagged — proving the audit has power for that pair.

Claimed ε = 1 (ln 3 for randomized response). A correct mechanism fails with
probability ≤ α = 1e-6 per audit, whatever the seed.
"""

from __future__ import annotations

import math

import numpy as np

from planner.planning.mechanisms import DISCRETE_LAPLACE, GAUSSIAN, LAPLACE, Sensitivity
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms import randomized_response as rr
from tests.engine.audit import audit_delta, audit_epsilon, cp_lower, cp_upper

EPS = 1.0
COUNT = Sensitivity(1.0, 1.0)


def test_clopper_pearson_bounds_by_scipy_definition() -> None:
    # CP lower bound at k = n/2 is below 1/2, upper above; extremes are 0 and 1
    assert cp_lower(0, 10, 0.05) == 0.0 and cp_upper(10, 10, 0.05) == 1.0
    assert cp_lower(50, 100, 0.05) < 0.5 < cp_upper(50, 100, 0.05)
    # exact: with k = n, the lower bound solves p^n = α → p = α^{1/n}
    assert math.isclose(cp_lower(20, 20, 0.05), 0.05 ** (1 / 20), rel_tol=1e-9)


# ----------------------------------------------------------------------------- Laplace (count)


def _laplace_pair(scale: float) -> tuple:  # type: ignore[type-arg]
    return (lambda n, g: LAPLACE.simulate(100.0, scale, n, g),
            lambda n, g: LAPLACE.simulate(101.0, scale, n, g))


def test_audit_laplace_count_passes() -> None:
    b = float(LAPLACE.scale_for(EPS, COUNT)[()])
    res = audit_epsilon(*_laplace_pair(b), EPS, np.random.default_rng(101))
    assert not res.flagged, res
    assert res.bound > 0.8  # the audit is close to tight (notes: 0.960 predicted)


def test_audit_laplace_eps_times_two_is_flagged() -> None:
    b = float(LAPLACE.scale_for(2 * EPS, COUNT)[()])  # bug: noise for 2ε, claims ε
    res = audit_epsilon(*_laplace_pair(b), EPS, np.random.default_rng(102))
    assert res.flagged, res


# ----------------------------------------------------------------------- discrete Laplace (count)


def _dlap_pair(scale: float) -> tuple:  # type: ignore[type-arg]
    return (lambda n, g: DISCRETE_LAPLACE.simulate(100.0, scale, n, g),
            lambda n, g: DISCRETE_LAPLACE.simulate(101.0, scale, n, g))


def test_audit_discrete_laplace_passes_and_half_sensitivity_is_flagged() -> None:
    ok = audit_epsilon(*_dlap_pair(float(DISCRETE_LAPLACE.scale_for(EPS, COUNT)[()])), EPS,
                       np.random.default_rng(103), discrete=True)
    assert not ok.flagged, ok
    bad_scale = float(DISCRETE_LAPLACE.scale_for(EPS, Sensitivity(0.5, 0.5))[()])  # bug: Δ/2
    bad = audit_epsilon(*_dlap_pair(bad_scale), EPS, np.random.default_rng(104), discrete=True)
    assert bad.flagged, bad


# ------------------------------------------------------------------------ Gaussian (δ-audit form)

DELTA = 1e-5


def _gauss_pair(sigma: float) -> tuple:  # type: ignore[type-arg]
    return (lambda n, g: GAUSSIAN.simulate(0.0, sigma, n, g),
            lambda n, g: GAUSSIAN.simulate(1.0, sigma, n, g))


def test_audit_gaussian_passes_delta_audit() -> None:
    sigma = float(GAUSSIAN.scale_for(EPS, COUNT, DELTA)[()])
    res = audit_delta(*_gauss_pair(sigma), EPS, DELTA, np.random.default_rng(105))
    assert not res.flagged, res


def test_audit_gaussian_half_sensitivity_is_flagged() -> None:
    # bug: σ calibrated for Δ/2; the true δ at ε = 1 is ≈ 0.011 ≫ 1e-5
    sigma = float(GAUSSIAN.scale_for(EPS, Sensitivity(0.5, 0.5), DELTA)[()])
    res = audit_delta(*_gauss_pair(sigma), EPS, DELTA, np.random.default_rng(106))
    assert res.flagged, res


# ------------------------------------------------------------------- exponential mechanism, K=100

K = 100
U_X = np.zeros(K)
U_X[0] = 1.0  # (1, 0, …, 0)
U_XP = 1.0 - U_X  # (0, 1, …, 1): neighbours for a utility of sensitivity 1


def _em_pair(eps_used: float) -> tuple:  # type: ignore[type-arg]
    return (lambda n, g: em.simulate(U_X, eps_used, n, g),
            lambda n, g: em.simulate(U_XP, eps_used, n, g))


def test_audit_exponential_mechanism_passes() -> None:
    res = audit_epsilon(*_em_pair(EPS), EPS, np.random.default_rng(107), discrete=True)
    assert not res.flagged, res  # notes/audit.md prototype: 0.804


def test_audit_exponential_mechanism_missing_factor_two_is_flagged() -> None:
    # bug: P ∝ exp(εu/Δu) (no 2) ≡ the correct EM run at 2ε; notes/audit.md prototype: 1.809
    res = audit_epsilon(*_em_pair(2 * EPS), EPS, np.random.default_rng(108), discrete=True)
    assert res.flagged, res


# ------------------------------------------------------------------------- randomized response


def _rr_pair(keep: float) -> tuple:  # type: ignore[type-arg]
    return (lambda n, g: rr.simulate_reports(np.ones(n, dtype=np.int64), keep, g),
            lambda n, g: rr.simulate_reports(np.zeros(n, dtype=np.int64), keep, g))


def test_audit_randomized_response_passes() -> None:
    eps = math.log(3.0)
    res = audit_epsilon(*_rr_pair(float(rr.keep_probability(eps)[()])), eps,
                        np.random.default_rng(109), discrete=True)
    assert not res.flagged, res


def test_audit_randomized_response_eps_times_two_is_flagged() -> None:
    eps = math.log(3.0)
    keep = float(rr.keep_probability(2 * eps)[()])  # bug: p for 2ε (p = 0.9), claims ln 3
    res = audit_epsilon(*_rr_pair(keep), eps, np.random.default_rng(110), discrete=True)
    assert res.flagged, res
