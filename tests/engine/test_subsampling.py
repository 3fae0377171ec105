"""Amplification by sampling: the sampled events' Rényi curves, their pure ε, and secret
samples (:mod:`planner.privacy.sampling`).

Expected numbers come from: Google dp-accounting 0.6's sampled-Gaussian RDP (Mironov,
Talwar & Zhang 2019; for sampling without replacement Wang, Balle & Kasiviswanathan 2019,
Thm 27, tighter than the general Thm 9 we implement, so ours must be ≥ it); numerical
quadrature of A_α = E[(1 − q + q e^{(2z−1)/(2σ²)})^α], z ~ N(0, σ²) (scipy); the exact
binomial expansion of the remove direction with Laplace's closed-form Rényi divergences
(Mironov 2017, Table II); and hand calculations of ln(1 + q(e^ε − 1)) (Balle, Barthe &
Gaboardi 2018, Thms 9–10).
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpacc_rdp
from scipy import integrate, stats

from planner.core.errors import BudgetError
from planner.privacy import divergences as dv
from planner.privacy.accountants import Spend, total_epsilon
from planner.privacy.accountants.pld import pld_epsilon
from planner.privacy.accountants.pure import pure_epsilon
from planner.privacy.accountants.rdp import rdp_epsilon, sampled_rdp
from planner.privacy.accountants.zcdp import event_rho
from planner.privacy.events import (
    ApproxEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from planner.privacy.sampling import Sampling, SamplingScheme, sampled_total_epsilon

INT_ORDERS = np.array([2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0, 256.0])


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.0), (256 / 60000, 1.1), (0.1, 0.7), (0.001, 4.0)])
def test_sampled_gaussian_rdp_matches_dp_accounting_at_integer_orders(q: float, sigma: float) -> None:
    ours = sampled_rdp(PoissonSampledEvent(GaussianEvent(sigma), q), INT_ORDERS)
    ref = dpacc_rdp._compute_rdp_poisson_subsampled_gaussian(q, sigma, INT_ORDERS)
    nodes = INT_ORDERS <= 64  # every integer to 64 is computed exactly (MTZ19 §3.3)
    assert ours[nodes] == pytest.approx(ref[nodes], rel=1e-9)
    # beyond, log-spaced integers and the chord between them: an upper bound, within 1 %
    assert np.all(ours[~nodes] >= ref[~nodes] * (1 - 1e-9))
    assert np.all(ours[~nodes] <= ref[~nodes] * 1.01)


@pytest.mark.parametrize(("q", "sigma", "alpha"), [(0.01, 0.6, 1.5), (0.01, 0.6, 2.5), (0.05, 1.0, 3.7), (0.004, 1.1, 7.3)])
def test_sampled_gaussian_rdp_fractional_orders_bound_the_exact_integral(q: float, sigma: float, alpha: float) -> None:
    def integrand(z: float) -> float:
        return float(stats.norm.pdf(z, 0, sigma) * (1 - q + q * math.exp((2 * z - 1) / (2 * sigma**2))) ** alpha)

    val, _ = integrate.quad(integrand, -30 * sigma, 60, limit=500, points=[0, 1, 5, 10, 20])
    exact = math.log(val) / (alpha - 1)
    ours = float(sampled_rdp(PoissonSampledEvent(GaussianEvent(sigma), q), [alpha])[0])
    assert ours >= exact * (1 - 1e-9)
    assert ours <= exact * 1.02  # chord between orders 0.1 apart


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.0), (0.1, 0.7), (0.004, 2.0)])
def test_without_replacement_rdp_is_the_general_bound_above_dp_accountings_gaussian_one(q: float, sigma: float) -> None:
    ours = sampled_rdp(SampledWithoutReplacementEvent(GaussianEvent(sigma), q), INT_ORDERS)
    ref = dpacc_rdp._compute_rdp_sample_wor_gaussian(q, sigma, INT_ORDERS)
    assert np.all(ours >= ref * (1 - 1e-9))  # Thm 9 (general) ≥ Thm 27 (Gaussian)
    assert np.all(ours <= ref * 1.1)


def test_sampled_laplace_rdp_at_least_the_exact_remove_direction() -> None:
    # remove direction, integer α: Σⱼ C(α,j)(1 − q)^{α−j} qʲ e^{(j−1)ε_Lap(j)} (exact)
    q, lam = 0.05, 1.0
    ours = sampled_rdp(PoissonSampledEvent(LaplaceEvent(lam), q), INT_ORDERS[:6])
    for a, val in zip(INT_ORDERS[:6].astype(int), ours, strict=True):
        terms = [
            math.comb(a, j) * (1 - q) ** (a - j) * q**j * math.exp((j - 1) * float(dv.laplace_rdp(lam, j))) if j >= 2
            else math.comb(a, j) * (1 - q) ** (a - j) * q**j
            for j in range(a + 1)
        ]
        remove = math.log(math.fsum(terms)) / (a - 1)
        assert val >= remove * (1 - 1e-9)
        assert val <= remove * 1.05 + 1e-6  # the discretised pair's RDP, both directions


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("q", [0.01, 0.5])
def test_sampled_pure_epsilon_is_amplified(eps: float, q: float) -> None:
    expected = math.log1p(q * math.expm1(eps))  # ln(1 + q(e^ε − 1)), BBG18 Thms 9–10
    for cls in (PoissonSampledEvent, SampledWithoutReplacementEvent):
        ev = cls(PureEvent(eps), q)
        assert pure_epsilon(ev) == pytest.approx(expected, rel=1e-14)
        assert pld_epsilon([ev] * 3, 0.0).epsilon == pytest.approx(3 * expected, rel=1e-12)
        assert rdp_epsilon([ev] * 3, 1e-6)[0] <= 3 * expected * (1 + 1e-9)


def test_sampled_approx_event_is_amplified_by_basic_composition_under_rdp() -> None:
    ev = PoissonSampledEvent(ApproxEvent(1.0, 1e-4), 0.1)
    eps, _ = rdp_epsilon([ev], 1e-5 + 1e-9)
    assert eps == pytest.approx(math.log1p(0.1 * math.expm1(1.0)), rel=1e-12)  # δ' = qδ = 1e-5
    assert rdp_epsilon([ev], 1e-6)[0] == math.inf  # δ below qδ₀: impossible


def test_sampling_never_hurts_zcdp_and_discrete_gaussians_amplify_under_rdp() -> None:
    base = GaussianEvent(1.0, discrete=True)
    ev = PoissonSampledEvent(base, 0.01)
    assert event_rho(ev) == event_rho(base)
    sampled = rdp_epsilon([SelfComposedEvent(ev, 1000)], 1e-6)[0]
    unsampled = rdp_epsilon([SelfComposedEvent(base, 1000)], 1e-6)[0]
    assert sampled < unsampled / 3
    z = rdp_epsilon([SelfComposedEvent(PoissonSampledEvent(ZCDPEvent(0.5), 0.01), 1000)], 1e-6)[0]
    assert z < rdp_epsilon([SelfComposedEvent(ZCDPEvent(0.5), 1000)], 1e-6)[0]


def test_sampled_events_compose_under_every_rule() -> None:
    ev = PoissonSampledEvent(RandomizedResponseEvent(0.75), 0.1)
    spends = [Spend(ev, pure_epsilon(ev))] * 20
    eps = {r: total_epsilon(spends, r, 1e-6) for r in ("basic", "advanced", "rdp", "zcdp", "pld")}
    assert eps["pld"] <= min(eps.values()) * (1 + 1e-9)
    assert eps["basic"] == pytest.approx(20 * math.log1p(0.1 * (3 - 1)), rel=1e-12)  # ε₀ = ln 3


# --------------------------------------------------------------------------------------
# Secret samples
# --------------------------------------------------------------------------------------


def test_secret_sample_amplifies_the_whole_composition_once() -> None:
    s = Sampling(0.1)
    spends = [Spend(LaplaceEvent(1.0), 1.0)] * 3
    # basic: ε = 3 on the sample, ln(1 + 0.1(e³ − 1)) for the population (hand)
    assert sampled_total_epsilon(spends, "basic", 0.0, s) == pytest.approx(math.log1p(0.1 * math.expm1(3.0)), rel=1e-14)
    # ... not Σ of per-query amplifications, which would understate the cost
    assert sampled_total_epsilon(spends, "basic", 0.0, s) > 3 * math.log1p(0.1 * math.expm1(1.0))
    # δ: the composition on the sample may use δ/q
    d = 1e-6
    got = sampled_total_epsilon(spends, "pld", d, s)
    assert got == pytest.approx(s.amplify(total_epsilon(spends, "pld", d / 0.1), d / 0.1)[0], rel=1e-14)
    assert sampled_total_epsilon(spends, "pld", d, None) == total_epsilon(spends, "pld", d)


@pytest.mark.parametrize(("q", "eps", "delta"), [(0.01, 1.0, 1e-6), (0.5, 0.1, 1e-8), (1.0, 2.0, 1e-5), (0.001, 5.0, 0.0)])
def test_secret_sample_base_budget_round_trips_within_the_budget(q: float, eps: float, delta: float) -> None:
    s = Sampling(q)
    eps_s, d_s = s.base_budget(eps, delta)
    back, d_back = s.amplify(eps_s, d_s)
    assert back <= eps and back == pytest.approx(eps, rel=1e-13)
    assert d_back <= delta * (1 + 1e-15)
    assert eps_s >= eps  # the sample may spend more than the population's budget


def test_secret_sample_amplifies_past_the_float_range_of_e_to_the_epsilon() -> None:
    """Fuzzing (session 10): e^ε overflows past ε ≈ 709.78, and amplify raised OverflowError,
    for a plan at ε = 800 on a sample and for the ledger's total. ln(1 + q(e^ε − 1)) =
    ε + ln q + ln(1 + (1 − q)e^{−ε}/q), by hand: ε + ln q to double precision there."""
    for q, eps in ((0.01, 710.0), (0.5, 800.0), (1e-300, 1000.0)):
        assert Sampling(q).amplify(eps, 0.0)[0] == pytest.approx(eps + math.log(q), rel=1e-15)
    # the two forms agree where they meet (ε = 700): log1p/expm1 just below, log-sum-exp from 700
    s = Sampling(0.3)
    a, b = math.log(0.3) + 700.0, math.log1p(-0.3)
    assert s.amplify(700.0, 0.0)[0] == max(a, b) + math.log1p(math.exp(-abs(a - b)))
    assert s.amplify(math.nextafter(700.0, 0.0), 0.0)[0] == pytest.approx(s.amplify(700.0, 0.0)[0], rel=1e-15)
    assert Sampling(1.0).amplify(900.0, 1e-6) == (900.0, 1e-6)
    assert sampled_total_epsilon([Spend(LaplaceEvent(1 / 710.0), 710.0)], "basic", 0.0, Sampling(0.01)) == \
        pytest.approx(710.0 + math.log(0.01), rel=1e-15)
    eps_s, _ = Sampling(0.5).base_budget(800.0, 0.0)
    assert Sampling(0.5).amplify(eps_s, 0.0)[0] <= 800.0


def test_secret_sample_validation_names_the_field() -> None:
    with pytest.raises(BudgetError, match=r"sampling\.rate"):
        Sampling(0.0)
    with pytest.raises(BudgetError, match=r"sampling\.scheme"):
        Sampling(0.1, "stratified")  # type: ignore[arg-type]
    with pytest.raises(BudgetError, match="add_remove"):
        Sampling(0.1).check_relation("substitute")
    Sampling(0.1, SamplingScheme.WITHOUT_REPLACEMENT).check_relation("substitute")
    with pytest.raises(BudgetError, match="unknown field"):
        Sampling.from_dict({"rate": 0.1, "size": 5})
    assert Sampling.from_dict(Sampling(0.2, "without_replacement").to_dict()) == Sampling(0.2, SamplingScheme.WITHOUT_REPLACEMENT)


def test_dp_accounting_agrees_on_a_sampled_composition_rdp() -> None:
    q, sigma, steps = 0.01, 1.3, 2000
    ours = rdp_epsilon([SelfComposedEvent(PoissonSampledEvent(GaussianEvent(sigma), q), steps)], 1e-6)[0]
    acct = dp_accounting.rdp.RdpAccountant()
    acct.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps))
    ref = float(acct.get_epsilon(1e-6))
    assert ours <= ref * (1 + 1e-3)  # never looser (a denser grid of orders may be tighter)
    exact = pld_epsilon([SelfComposedEvent(PoissonSampledEvent(GaussianEvent(sigma), q), steps)], 1e-6).epsilon
    assert ours >= exact  # and, being a valid bound, never below the (near-exact) PLD
