"""The optimal accountant (privacy loss distributions): exactness where the exact value is
known, tightness against independent accountants, and never below a valid lower bound.

Sources of every expected number:

* exact values: randomized response composes as a binomial (computed here with
  ``fractions``/``math.comb``, independently of the engine); k identical ε-DP mechanisms by
  Kairouz, Oh & Viswanath's formula (ICML 2015, Thm 3.3); k Gaussians are one Gaussian
  (Dong, Roth & Su 2019, Cor. 3.3) whose exact ε is the analytic Gaussian (Balle & Wang 2018,
  via ``dp_accounting.get_epsilon_gaussian``); one Laplace: δ(ε) = 1 − e^{(ε−ε₀)/2} (hand);
* Google dp-accounting 0.6 ``PLDAccountant`` at its default discretisation (1e-4): the issue
  asks for at most 0.1 % above it;
* Microsoft prv-accountant 0.2 ``PRVAccountant``: its lower bound is a rigorous lower bound
  of the exact ε, which no valid accountant may undercut.

These libraries are test-only dependencies.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from prv_accountant import PRVAccountant
from prv_accountant.privacy_random_variables import (
    LaplaceMechanism,
    PoissonSubsampledGaussianMechanism,
)

from planner.core.errors import BudgetError
from planner.privacy.accountants import ACCOUNTANTS, accountant, total_epsilon
from planner.privacy.accountants.base import Spend
from planner.privacy.accountants.pairs import (
    _BoundedRange,
    _Gaussian,
    _Laplace,
    _Poisson,
    _TwoPoint,
    _WithoutReplacement,
)
from planner.privacy.accountants.pld import (
    PldAccountant,
    _int_power,
    _plan,
    _plan_epsilon,
    pld_delta,
    pld_epsilon,
)
from planner.privacy.accountants.rdp import rdp_epsilon
from planner.privacy.budget import CompositionRule
from planner.privacy.events import (
    ApproxEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
    event_from_dict,
)

#: "within 0.1 % above dp-accounting's PLD" (issue 15)
ABOVE_DPACC = 1.001


def _dpacc_pld(events: list[dp_accounting.DpEvent], delta: float) -> float:
    acct = PLDAccountant()
    for e in events:
        acct.compose(e)
    return float(acct.get_epsilon(delta))


def _prv_low(prvs: list[object], counts: list[int], delta: float, eps_error: float = 1e-3) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acct = PRVAccountant(prvs=prvs, max_self_compositions=counts, eps_error=eps_error, delta_error=delta * 1e-3)
        low, _, _ = acct.compute_epsilon(delta=delta, num_self_compositions=counts)
    return float(low)


def _rr(eps0: float) -> RandomizedResponseEvent:
    return RandomizedResponseEvent(1.0 / (1.0 + math.exp(-eps0)))


# --------------------------------------------------------------------------------------
# Exact where the exact value is known
# --------------------------------------------------------------------------------------


def test_pld_ten_randomized_responses_cost_exactly_half_at_delta_zero() -> None:
    # 10 × 0.05 (the issue: dp-accounting reports 0.50008; ours must be exact)
    got = pld_epsilon([_rr(0.05)] * 10, 0.0).epsilon
    assert got == pytest.approx(0.5, abs=1e-12)
    assert got >= 0.5 - 1e-15


def _binomial_rr_epsilon(eps0: float, k: int, delta: float) -> float:
    """Exact ε of k randomized responses at ε₀ (hand: the loss is ε₀(2B − k), B ~ Bin(k, p))."""
    p = math.exp(eps0) / (1.0 + math.exp(eps0))
    atoms = sorted(((eps0 * (2 * j - k), math.comb(k, j) * p**j * (1 - p) ** (k - j)) for j in range(k + 1)), reverse=True)
    s1 = s2 = 0.0
    for idx, (loss, mass) in enumerate(atoms):
        # δ at this atom's loss counts the atoms above it
        if s1 - math.exp(loss) * s2 > delta:
            return math.log((s1 - delta) / s2)
        s1 += mass
        s2 += mass * math.exp(-loss)
        if idx == len(atoms) - 1:
            return max(math.log((s1 - delta) / s2), 0.0) if s1 - delta > s2 else 0.0
    return 0.0


@pytest.mark.parametrize(("eps0", "k", "delta"), [(0.05, 10, 1e-5), (0.05, 10, 1e-3), (0.3, 40, 1e-6), (1.0, 7, 1e-9)])
def test_pld_randomized_response_is_exact_binomial(eps0: float, k: int, delta: float) -> None:
    r = pld_epsilon([_rr(eps0)] * k, delta)
    assert r.method == "exact"
    exact = _binomial_rr_epsilon(eps0, k, delta)
    assert r.epsilon == pytest.approx(exact, rel=1e-9, abs=1e-12)


def test_pld_rule_returns_the_exact_value_for_randomized_response() -> None:
    # the registry's rule (min of PLD and RDP) skips RDP when the PLD value is exact: it must
    # still be the binomial's exact ε (computed here independently), not RDP's larger one
    for eps0, k, delta in [(0.05, 10, 1e-5), (0.3, 40, 1e-6)]:
        got = accountant(CompositionRule.PLD).compose([_rr(eps0)] * k).epsilon(delta)
        exact = _binomial_rr_epsilon(eps0, k, delta)
        assert got == pytest.approx(exact, rel=1e-9, abs=1e-12)
        assert got < rdp_epsilon([_rr(eps0)] * k, delta)[0]


def test_fft_self_composition_power_matches_numpy() -> None:
    # zᵏ by repeated squaring against numpy's complex power, on the spectrum of a random
    # distribution (|z| ≤ 1, as in the accountant), for counts with many set bits
    rng = np.random.default_rng(0)
    mass = rng.random(4096)
    z = np.fft.rfft(mass / mass.sum())
    for k in (1, 2, 3, 1000, 3516, 14063):
        got = _int_power(z, k)
        ref = z**k
        assert np.allclose(got, ref, rtol=1e-9, atol=1e-300)
        assert np.max(np.abs(got - ref)) <= 1e-12 * max(np.max(np.abs(ref)), 1e-300) + 1e-15


def _kov_delta(eps0: float, k: int, i: int) -> Fraction:
    """KOV15 Thm 3.3 δ_i for k identical ε₀-DP mechanisms at ε = (k − 2i)ε₀ (exact arithmetic
    on the float inputs)."""
    e = math.exp(eps0)
    num = sum(math.comb(k, j) * (Fraction(math.exp((k - j) * eps0)) - Fraction(math.exp((k - 2 * i + j) * eps0))) for j in range(i))
    return num / Fraction(1.0 + e) ** k


@pytest.mark.parametrize(("eps0", "k"), [(0.1, 50), (1.0, 5), (0.05, 10), (0.5, 31)])
def test_pld_pure_mechanisms_match_kairouz_oh_viswanath(eps0: float, k: int) -> None:
    for i in range(1, min(k // 2, 5)):
        ref = float(_kov_delta(eps0, k, i))
        got = pld_delta([PureEvent(eps0)] * k, (k - 2 * i) * eps0)
        assert got == pytest.approx(ref, rel=1e-9)
        assert got >= ref * (1 - 1e-12)
        # and ε at that δ is (k − 2i)ε₀ (within 1e-9, never below)
        eps = pld_epsilon([PureEvent(eps0)] * k, ref).epsilon
        assert eps == pytest.approx((k - 2 * i) * eps0, rel=1e-9)


@pytest.mark.parametrize(("sigma", "k", "delta"), [(1.0, 10, 1e-5), (5.0, 100, 1e-9), (20.0, 1000, 1e-6), (0.5, 3, 1e-5)])
def test_pld_gaussians_compose_to_the_exact_gaussian(sigma: float, k: int, delta: float) -> None:
    exact = dp_accounting.get_epsilon_gaussian(sigma / math.sqrt(k), delta)
    got = pld_epsilon([GaussianEvent(sigma)] * k, delta)
    assert got.method == "exact"
    assert got.epsilon == pytest.approx(exact, rel=1e-6)
    # the discretised FFT path on the same composition: within 0.1 % of exact, never below,
    # and its error estimate covers the gap
    g = ((_Gaussian(1.0 / sigma), k),)
    fine = _plan_epsilon(_plan(g, 1e-4), g, delta)
    coarse = _plan_epsilon(_plan(g, 4e-4), g, delta)
    assert exact <= fine <= exact * 1.001
    assert fine - (coarse - fine) <= exact


def test_pld_one_laplace_is_exact_at_every_delta() -> None:
    # δ(ε) = 1 − e^{(ε − ε₀)/2} on [−ε₀, ε₀] (hand) ⇒ ε(δ) = ε₀ + 2 ln(1 − δ); the grid
    # is exact at its points and a chord between them: within 1e-4, never below
    for eps0, delta in [(1 / 3, 1e-5), (1.0, 1e-3), (0.1, 1e-9)]:
        got = pld_epsilon([LaplaceEvent(1.0 / eps0)], delta).epsilon
        exact = eps0 + 2.0 * math.log1p(-delta)
        assert got == pytest.approx(exact, rel=1e-4)
        assert got >= exact * (1 - 1e-12)


def test_pld_delta_zero_is_the_pure_sum_and_gaussians_need_delta() -> None:
    assert pld_epsilon([LaplaceEvent(2.0), PureEvent(0.25)], 0.0).epsilon == pytest.approx(0.75, abs=1e-15)
    assert pld_epsilon([GaussianEvent(1.0)], 0.0).epsilon == math.inf
    assert PldAccountant().compose([LaplaceEvent(1.0)]).epsilon(0.0) == pytest.approx(1.0, abs=1e-15)


def test_pld_approx_event_carries_its_delta() -> None:
    # an (ε, δ₀) event alone: ε at δ ≥ δ₀ is ≤ ε, impossible below δ₀ (mass at +∞)
    assert pld_epsilon([ApproxEvent(1.0, 1e-6)], 1e-7).epsilon == math.inf
    assert pld_epsilon([ApproxEvent(1.0, 1e-6)], 1e-5).epsilon <= 1.0 + 1e-12


# --------------------------------------------------------------------------------------
# Tightness against dp-accounting and PRV
# --------------------------------------------------------------------------------------

#: The issue's table (N, batch, σ, epochs) at δ = 1e-5, then cases of our own.
DPSGD_CASES = [
    (60000, 256, 1.1, 60, 1e-5),
    (60000, 256, 1.1, 15, 1e-5),
    (60000, 256, 0.7, 45, 1e-5),
    (50000, 512, 1.0, 100, 1e-5),
    (60000, 256, 1.1, 15, 1e-9),
    (10000, 100, 2.0, 10, 1e-7),
    (60000, 600, 0.8, 5, 1e-9),
    (1000, 10, 0.6, 3, 1e-5),
    (100000, 1000, 5.0, 200, 1e-9),
    (50000, 5000, 1.5, 30, 1e-6),
]


#: The cases also checked against PRV's lower bound (PRV takes seconds each; the issue's
#: table plus two of ours, δ down to 1e-9).
PRV_CASES = {0, 1, 2, 3, 4, 6}


@pytest.mark.parametrize(("case", "n", "batch", "sigma", "epochs", "delta"), [(i, *c) for i, c in enumerate(DPSGD_CASES)])
def test_pld_sampled_gaussian_between_prv_low_and_dp_accounting(
    case: int, n: int, batch: int, sigma: float, epochs: int, delta: float
) -> None:
    q = batch / n
    steps = math.ceil(epochs * n / batch)
    ours = pld_epsilon([SelfComposedEvent(PoissonSampledEvent(GaussianEvent(sigma), q), steps)], delta).epsilon
    ref = _dpacc_pld(
        [dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)],
        delta,
    )
    assert ours <= ref * ABOVE_DPACC
    assert ours >= ref * (1 - 1e-3)  # dp-accounting is itself near-exact (pessimistic)
    if case in PRV_CASES:
        low = _prv_low([PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)], [steps], delta, 1e-2)
        assert ours >= low


@pytest.mark.parametrize(("lam", "k", "delta"), [(10.0, 100, 1e-5), (1.0, 10, 1e-6), (50.0, 1000, 1e-9), (3.0, 1, 1e-5)])
def test_pld_laplace_between_prv_low_and_dp_accounting(lam: float, k: int, delta: float) -> None:
    ours = pld_epsilon([LaplaceEvent(lam)] * k, delta).epsilon
    acct = PLDAccountant()
    acct.compose(dp_accounting.LaplaceDpEvent(lam), k)
    ref = float(acct.get_epsilon(delta))
    low = _prv_low([LaplaceMechanism(mu=1.0 / lam)], [k], delta)
    assert ours <= ref * ABOVE_DPACC
    assert ours >= low


@pytest.mark.parametrize(("seed", "delta"), [(0, 1e-5), (1, 1e-9), (2, 1e-6)])
def test_pld_mixed_laplace_gaussian_within_dp_accounting(seed: int, delta: float) -> None:
    rng = np.random.default_rng(seed)
    ours: list[PrivacyEvent] = []
    ref: list[dp_accounting.DpEvent] = []
    for _ in range(60):
        if rng.random() < 0.5:
            lam = float(rng.uniform(5, 30))
            ours.append(LaplaceEvent(lam))
            ref.append(dp_accounting.LaplaceDpEvent(lam))
        else:
            s = float(rng.uniform(3, 30))
            ours.append(GaussianEvent(s))
            ref.append(dp_accounting.GaussianDpEvent(s))
    got = pld_epsilon(ours, delta, with_error=True)
    expected = _dpacc_pld(ref, delta)
    assert got.epsilon <= expected * ABOVE_DPACC
    assert got.epsilon >= expected * (1 - 1e-3)  # both near-exact
    assert got.error is not None and 0 <= got.error < 0.01 * got.epsilon


@pytest.mark.parametrize(("lam", "q", "k", "delta"), [(1.0, 0.01, 1000, 1e-6), (0.5, 0.1, 100, 1e-5)])
def test_pld_sampled_laplace_within_dp_accounting(lam: float, q: float, k: int, delta: float) -> None:
    ours = pld_epsilon([SelfComposedEvent(PoissonSampledEvent(LaplaceEvent(lam), q), k)], delta).epsilon
    acct = PLDAccountant()
    acct.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.LaplaceDpEvent(lam)), k)
    ref = float(acct.get_epsilon(delta))
    assert ref * (1 - 1e-3) <= ours <= ref * ABOVE_DPACC


def test_pld_never_looser_than_rdp_and_tighter_for_laplace() -> None:
    evs: list[PrivacyEvent] = [LaplaceEvent(10.0)] * 100 + [ExponentialEvent(0.1)] * 10
    pld = PldAccountant().compose(evs).epsilon(1e-6)
    rdp = rdp_epsilon(evs, 1e-6)[0]
    assert pld < rdp * 0.97  # RDP overstates Laplace compositions (the audit: up to 9.6 %)


@pytest.mark.parametrize("delta", [1e-6, 1e-9])
def test_pld_exponential_mechanisms_never_looser_than_zcdp_bound(delta: float) -> None:
    # many small exponential mechanisms: ε²/8-zCDP (Cesar & Rogers 2021) is the better
    # bound; few large ones: the bounded-range envelope; the accountant takes the better
    many = [ExponentialEvent(0.1)] * 100
    assert pld_epsilon(many, delta).epsilon <= rdp_epsilon(many, delta)[0] * (1 + 1e-9)
    few = [ExponentialEvent(1.0)] * 3
    assert pld_epsilon(few, delta).epsilon < rdp_epsilon(few, delta)[0]


# --------------------------------------------------------------------------------------
# The pairs' curves
# --------------------------------------------------------------------------------------


def test_bounded_range_envelope_dominates_every_bounded_range_pair() -> None:
    # each ε₀-BR pair with parameter t has L ∈ {t, t − ε₀} with P(L = t) = (e^{ε₀} − e^t)/(e^{ε₀} − 1)
    eps0 = 1.0
    env = _BoundedRange(eps0)
    grid = np.linspace(-1.5, 1.5, 301)
    curve = env.delta(grid)
    worst = np.zeros_like(grid)
    for t in np.linspace(0, eps0, 401):
        p = (math.exp(eps0) - math.exp(t)) / (math.exp(eps0) - 1)
        d_t = p * np.maximum(1 - np.exp(grid - t), 0) + (1 - p) * np.maximum(1 - np.exp(grid - t + eps0), 0)
        worst = np.maximum(worst, d_t)
    assert np.all(curve >= worst - 1e-12)
    assert np.max(curve - worst) < 1e-5  # the envelope is attained (t on a fine grid)
    # symmetric: δ(ε) = 1 − e^ε + e^ε δ(−ε)
    assert np.allclose(curve, 1 - np.exp(grid) + np.exp(grid) * env.delta(-grid), atol=1e-12)


@pytest.mark.parametrize("pair", [_Gaussian(0.8), _Laplace(0.5), _TwoPoint(0.7, 1e-6), _BoundedRange(0.3)])
def test_symmetric_pairs_obey_the_hockey_stick_identity(pair: object) -> None:
    eps = np.linspace(-2, 2, 81)
    d = pair.delta(eps)  # type: ignore[attr-defined]
    dbar = pair.delta_bar(eps)  # type: ignore[attr-defined]
    assert np.allclose(dbar, d - (1 - np.exp(eps)), atol=1e-12)


def test_poisson_pair_curves_match_direct_integration() -> None:
    # remove direction of the sampled Gaussian: δ = E_B[(A/B − e^ε)₊] computed by quadrature
    q, mu = 0.1, 1.0
    pair = _Poisson(_Gaussian(mu), q)
    x = np.linspace(-12, 14, 400001)
    dx = x[1] - x[0]
    b = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    a = (1 - q) * b + q * np.exp(-((x - mu) ** 2) / 2) / math.sqrt(2 * math.pi)
    for eps in [0.0, 0.05, 0.2, 0.5]:
        rem = float(np.sum(np.maximum(a - math.exp(eps) * b, 0)) * dx)
        add = float(np.sum(np.maximum(b - math.exp(eps) * a, 0)) * dx)
        assert pair.delta(np.array([eps]), False)[0] == pytest.approx(rem, rel=1e-6)
        assert pair.delta(np.array([eps]), True)[0] == pytest.approx(add, rel=1e-6, abs=1e-12)


def test_without_replacement_pair_is_the_larger_of_both_directions() -> None:
    base = _Gaussian(1.2)
    wor, poi = _WithoutReplacement(base, 0.05), _Poisson(base, 0.05)
    eps = np.linspace(-1, 2, 61)
    assert np.array_equal(wor.delta(eps), np.maximum(poi.delta(eps, False), poi.delta(eps, True)))


def test_without_replacement_at_least_a_realizable_pair_and_at_most_rdp() -> None:
    # A realizable worst case for fixed-size sampling under substitution: the replaced
    # example's slot filled by one at the midpoint, i.e. dp-accounting's REPLACE_ONE
    # Poisson-style pair at sensitivity C: a lower bound on the true ε.
    q, sigma, steps, delta = 256 / 60000, 1.1, 3516, 1e-5
    ours = pld_epsilon([SelfComposedEvent(SampledWithoutReplacementEvent(GaussianEvent(sigma / 2), q), steps)], delta).epsilon
    acct = PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
    acct.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps))
    assert ours >= float(acct.get_epsilon(delta))
    assert ours <= rdp_epsilon([SelfComposedEvent(SampledWithoutReplacementEvent(GaussianEvent(sigma / 2), q), steps)], delta)[0]


def test_discrete_gaussian_is_not_treated_as_continuous() -> None:
    # The discrete Gaussian's curve lies above the continuous one's (σ = 0.3, Δ = 1, ε = 0:
    # δ = TV = 0.99 vs 0.90, from the two pmfs here), so OpenDP's discrete Gaussian is
    # accounted through its certified ρ-zCDP, never through the continuous pair.
    sigma = 0.3
    ks = np.arange(-50, 51)
    p = np.exp(-(ks**2) / (2 * sigma**2))
    p /= p.sum()
    q = np.exp(-((ks - 1) ** 2) / (2 * sigma**2))
    q /= q.sum()
    tv_discrete = float(np.sum(np.maximum(p - q, 0)))
    tv_continuous = 2 * 0.5 * math.erf(1 / (2 * sigma) / math.sqrt(2))
    assert tv_discrete > tv_continuous + 0.05
    disc = pld_epsilon([GaussianEvent(2.0, discrete=True)] * 5, 1e-6)
    cont = pld_epsilon([GaussianEvent(2.0)] * 5, 1e-6)
    assert disc.epsilon > cont.epsilon  # the certified bound costs more than the idealised one
    assert "Rényi" in disc.method or disc.method == "rdp"


def test_zcdp_part_composes_by_envelope_and_is_never_looser_than_rdp() -> None:
    evs: list[PrivacyEvent] = [LaplaceEvent(20.0)] * 50 + [GaussianEvent(10.0, discrete=True)] * 30 + [ZCDPEvent(0.001)] * 5
    for delta in (1e-6, 1e-9):
        acct = PldAccountant().compose(evs).epsilon(delta)
        assert acct <= rdp_epsilon(evs, delta)[0] * (1 + 1e-12)
        # and the raw PLD value is itself a valid bound: not below the pure-Laplace part alone
        assert pld_epsilon(evs, delta).epsilon >= pld_epsilon([LaplaceEvent(20.0)] * 50, delta).epsilon


# --------------------------------------------------------------------------------------
# The rule through the registry: compose, total_epsilon, the ledger
# --------------------------------------------------------------------------------------


def test_pld_rule_is_registered() -> None:
    assert ACCOUNTANTS[CompositionRule.PLD] is PldAccountant
    assert CompositionRule("pld") is CompositionRule.PLD
    spends = [Spend(LaplaceEvent(10.0), 0.1)] * 20
    assert total_epsilon(spends, "pld", 1e-6) == accountant("pld").compose(spends).epsilon(1e-6)
    assert total_epsilon(spends, "pld", 1e-6) < total_epsilon(spends, "rdp", 1e-6)


def test_ledger_with_a_pld_lifetime_budget_composes_through_the_registry(tmp_path: object) -> None:
    from planner.ledger import Ledger

    led = Ledger(f"sqlite:///{tmp_path}/ledger.db")
    try:
        led.register_dataset("fp", "x", epsilon=3.0, delta=1e-6, rule="pld")
        s1 = [Spend(LaplaceEvent(10.0), 0.1)] * 10
        s2 = [Spend(_rr(0.2), 0.2)] * 5
        led.release("fp", "a", "s", [(f"q{i}", sp) for i, sp in enumerate(s1)], lambda: {f"q{i}": 0 for i in range(10)})
        led.release("fp", "b", "s", [(f"r{i}", sp) for i, sp in enumerate(s2)], lambda: {f"r{i}": 0 for i in range(5)})
        spent = led.status("fp").epsilon_spent
        assert spent == pytest.approx(total_epsilon(s1 + s2, CompositionRule.PLD, 1e-6), rel=1e-12)
        assert spent < total_epsilon(s1 + s2, CompositionRule.BASIC, 1e-6)
        # a release that would overspend under the PLD rule is refused
        big = [Spend(LaplaceEvent(0.2), 5.0)]
        with pytest.raises(Exception, match=r"budget|ε"):
            led.release("fp", "c", "s", [("z", big[0])], lambda: {"z": 0})
    finally:
        led.close()


def test_mixing_sampling_schemes_is_refused() -> None:
    with pytest.raises(BudgetError, match="neighbouring relation"):
        pld_epsilon([PoissonSampledEvent(LaplaceEvent(1.0), 0.1), SampledWithoutReplacementEvent(LaplaceEvent(1.0), 0.1)], 1e-6)


def test_sampled_events_round_trip_through_json() -> None:
    for ev in (PoissonSampledEvent(GaussianEvent(1.1), 0.01), SampledWithoutReplacementEvent(_rr(0.5), 0.2)):
        assert event_from_dict(ev.to_dict()) == ev
    with pytest.raises(BudgetError, match="rate"):
        PoissonSampledEvent(LaplaceEvent(1.0), 1.5)
    with pytest.raises(BudgetError, match="wraps one mechanism"):
        PoissonSampledEvent(PoissonSampledEvent(LaplaceEvent(1.0), 0.5), 0.5)


def test_large_epsilon_exponential_beside_laplace_is_finite() -> None:
    # Found by the allocator's property test: an exponential mechanism at ε₀ = √1000 (its
    # zCDP envelope ρ = ε₀²/8 = 125) composed with a Laplace at the same ε₀ made the envelope's
    # variance NaN (α − 1 underflowed to 0 in ln(1 − 1/α)). The composition is at most the
    # basic sum 2·ε₀ and at least the Laplace alone.
    from planner.privacy.accountants import accountant
    from planner.privacy.events import ExponentialEvent

    e0 = math.sqrt(1000.0)
    eps = accountant(CompositionRule.PLD).compose([LaplaceEvent(e0), ExponentialEvent(e0)]).epsilon(1e-6)
    assert math.isfinite(eps) and e0 <= eps <= 2 * e0 * (1 + 1e-9)


@pytest.mark.parametrize("eps0, k", [(1e4, 1), (1e4, 3), (800.0, 2)])
def test_laplace_far_past_the_grid_is_its_pure_cost(eps0: float, k: int) -> None:
    """k Laplace pairs at ε₀ beyond the grid's ±700 (the allocator's bisection probes such
    scales): the lower end once sat at −ε₀, where e^ε underflows (NaN), and then, with all
    the finite mass at one loss, the grid step came out as 1e-152. Bounds, by hand: the
    loss is ε₀ with probability exactly 1/2 per pair (every x ≤ 0 of Lap(0, 1/ε₀) against
    Lap(1, 1/ε₀)), so kε₀ with probability 2⁻ᵏ and δ(ε) ≥ 2⁻ᵏ(1 − e^{ε−kε₀}): for δ < 2⁻ᵏ,
    ε ≥ kε₀ + ln(1 − 2ᵏδ); basic composition gives ε ≤ kε₀ (the grid alone moves the mass
    past 700 to +∞ and says inf; the accountant keeps the smaller valid bound)."""
    delta = 1e-6
    got = accountant(CompositionRule.PLD).compose([LaplaceEvent(1.0 / eps0)] * k).epsilon(delta)
    assert k * eps0 + math.log1p(-(2.0**k) * delta) - 1e-9 * k * eps0 <= got <= k * eps0 * (1 + 1e-9)


def test_a_hopeless_laplace_beside_a_gaussian_is_finite() -> None:
    """The allocator's brute-force test (pinned Gaussian at θ = 0.0165, PLD, ε = 0.8125)
    bisected the Laplace's θ down to ε₀ ≈ 3e15: the accountant raised a ValueError from
    its grid. The ε is now at least the Laplace's own (ε₀ + ln(1 − 2δ), as above) and never
    above RDP's bound for the pair."""
    events = [LaplaceEvent(1.0 / 3e15), GaussianEvent(5.5)]
    got = accountant(CompositionRule.PLD).compose(events).epsilon(1e-6)
    assert 3e15 * (1 - 1e-12) <= got <= rdp_epsilon(events, 1e-6)[0] * (1 + 1e-9)


def test_a_slowly_decaying_envelope_stays_finite() -> None:
    """461 discrete Gaussians (σ = 0.73, certified through their Rényi envelope) beside 154
    continuous ones at δ = 0.05: the envelope's tail search once ran past e^709 and the grid
    turned into NaN (a ValueError from deep inside). The grid now stops at a loss of 700,
    moving the rest to +∞ (pessimistic): the ε is finite and never above RDP's bound."""
    events = [SelfComposedEvent(GaussianEvent(0.7275793446490277, discrete=True), 461),
              SelfComposedEvent(GaussianEvent(3.2091111526561265), 154)]
    got = pld_epsilon(events, 0.05)
    assert math.isfinite(got.epsilon)
    assert got.epsilon <= rdp_epsilon(events, 0.05)[0] * (1 + 1e-9)


# ----------------------------------------------------------------------------- session-9 fuzz finds
@pytest.mark.parametrize("eps0", [1e-6, 1e-9, 1e-12])
def test_a_tiny_laplace_beside_a_gaussian_keeps_the_grid_small(eps0: float) -> None:
    """A Laplace of ε₀ = 1e-7 beside a Gaussian made the grid step ε₀ (to put its atoms on
    the grid): 15 GB and 206 s; 1e-9 raised MemoryError, 1e-12 ZeroDivisionError. Adding an
    event never lowers ε, and a pure ε₀ raises it by at most ε₀ (basic composition), so the
    answer lies in [ε of the Gaussian alone, that + ε₀ + the grid's own error]."""
    g = GaussianEvent(1.0)
    alone = pld_epsilon([g], 1e-6).epsilon  # one Gaussian: the exact (analytic) path
    res = pld_epsilon([LaplaceEvent(1.0 / eps0), g], 1e-6, with_error=True)
    assert res.points <= 1 << 22  # _MAX_POINTS: the step is not shrunk below the event grids' own
    assert alone <= res.epsilon <= alone + eps0 + max(res.error or 0.0, 1e-9)


@pytest.mark.parametrize(("events", "lower"), [
    # k Laplace pairs of ε₀ alone have loss kε₀ with probability 2^-k (post-processing of the
    # composition): ε ≥ kε₀ + ln(1 − 2^k δ)
    ([LaplaceEvent(1 / 400.0)] * 2 + [GaussianEvent(1.0)], 800.0 + math.log1p(-4e-6)),
    ([LaplaceEvent(1 / 250.0)] * 3 + [GaussianEvent(2.0)], 750.0 + math.log1p(-8e-6)),
    # 40 pure ε = 20 at δ = 1e-6, as randomized response: the loss is 800 with probability
    # P = (e^20/(1 + e^20))^40, so ε ≥ 800 + ln(1 − δ/P) = 799.999999 (KOV's exact value)
    ([PureEvent(20.0)] * 40, 800.0 + math.log1p(-1e-6 / (1.0 / (1.0 + math.exp(-20.0))) ** 40)),
    # was ZeroDivisionError; as randomized response, all 100 losses are ε₀ with probability
    # (e^ε₀/(1 + e^ε₀))^100 ≈ 1 − 6e-12: ε ≥ 100ε₀ = 3039.05 less far under 1
    ([PureEvent(30.390466007105054)] * 100, 3039.0466 - 1.0),
])
def test_compositions_past_e_to_the_709_are_never_understated(events: list[PrivacyEvent], lower: float) -> None:
    """e^L overflows past L = 709.8: the grid's δ read as NaN and ε came out near 709.8 (or
    the solve divided by zero). The optimal accountant now falls back on RDP there."""
    assert accountant("pld").compose(events).epsilon(1e-6) >= lower


def test_sampled_laplace_steps_past_e_to_the_745_agree_with_dp_accounting() -> None:
    """1000 Poisson-sampled Laplace steps (q = 0.876, b = 0.0721): composed losses past
    e^745 made S₂ underflow to 0 and the solve divided by zero. The oracle: dp-accounting's
    PLD (discretisation 1e-2), 11645.35 when this was written; ours is within 0.1 %."""
    ev = PoissonSampledEvent(LaplaceEvent(0.07206970861496177), 0.8761184451177921)
    ours = accountant("pld").compose([ev], count=1000).epsilon(7.156623487204565e-07)
    acct = PLDAccountant(value_discretization_interval=1e-2)
    acct.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.8761184451177921, dp_accounting.LaplaceDpEvent(0.07206970861496177)), 1000))
    theirs = acct.get_epsilon(7.156623487204565e-07)
    assert abs(ours / theirs - 1.0) < 1e-3, (ours, theirs)


def test_zcdp_envelope_tail_searches_share_one_solve_bit_for_bit() -> None:
    """Issue 31: the zCDP envelope's two tail searches ask for the same |ε| ladder (δ above 0,
    δ̄ below reads δ at −ε); the second is answered from :func:`_zcdp_log_delta_of`'s cache,
    with exactly the bits a fresh solve gives (the plan hashes depend on them)."""
    import numpy as np

    from planner.privacy.accountants import pld
    from planner.privacy.accountants.pairs import _search_lower, _search_upper

    env = pld._RenyiEnvelope(rho=0.0123456789)  # a ρ no other test uses: a cold cache
    before = pld._zcdp_log_delta_of.cache_info().hits
    _search_upper(env, False, 1e-20)
    _search_lower(env, False, 1e-20)
    assert pld._zcdp_log_delta_of.cache_info().hits > before
    ladder = np.concatenate([[0.0], np.geomspace(1e-6, 1e4, 47)])
    cached = pld._zcdp_log_delta_of(env.rho, ladder.tobytes())
    assert cached.tobytes() == pld._zcdp_log_delta(env.rho, ladder.copy()).tobytes()
