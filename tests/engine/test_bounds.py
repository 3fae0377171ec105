"""Tests of planner.planning.bounds (docs/mathematics.md §4): exact sups, discrete bounds, ISM optimality."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.planning import bounds
from planner.planning.mechanisms import ism


def _brute_linear(eps: float, delta: float, kmax: int = 200_000) -> tuple[float, int]:
    k = np.arange(1, kmax + 1, dtype=np.float64)
    logt = 2 * np.log(k * delta) - np.log(4) - np.logaddexp(0, 2 * k * eps)
    i = int(np.argmax(logt))
    return float(np.exp(logt[i])), i + 1


def test_x0_solves_the_stationarity_equation() -> None:
    # d/dx [x²/(1+eˣ)] = 0  ⇔  (x − 2)eˣ = 2; x₀ ≈ 2.2178 (hand: (0.2178)·e^{2.2178} = 1.9999)
    assert (bounds.X0 - 2) * math.exp(bounds.X0) == pytest.approx(2.0, rel=1e-14)
    assert bounds.X0 == pytest.approx(2.2178, abs=1e-4)


@pytest.mark.parametrize("eps", [1e-4, 3e-3, 0.01, 0.0731, 0.25, 0.5, 1.0, 1.1089, 2.0, 5.0, 40.0])
def test_linear_mse_bound_is_exact_sup_over_integer_k(eps: float) -> None:
    got = bounds.unbiased_mse_lower_bound(eps, 3.0)
    want, k = _brute_linear(eps, 3.0)  # brute force over k = 1 … 200000
    assert float(got.values[()]) == pytest.approx(want, rel=1e-12)
    assert got.argmax_k is not None and int(got.argmax_k[()]) == k
    assert not got.data_dependent


def test_linear_mse_bound_by_hand() -> None:
    # ε = 1/2, Δ = 1: k=1: 1/(4(1+e)) = 0.06724, k=2: 4/(4(1+e²)) = 0.11920, k=3: 9/(4(1+e³)) = 0.10657
    b = bounds.unbiased_mse_lower_bound(0.5, 1.0)
    assert float(b.values[()]) == pytest.approx(1 / (1 + math.e**2))


def test_linear_mse_bound_beats_seed_corollary_for_small_epsilon() -> None:
    # Garivier, "How to learn while respecting individual privacy?" (ENS de Lyon, 2021): Δ²/(68ε²) for ε ≤ 1/2 (a simplification); the exact sup is larger
    eps = np.geomspace(1e-4, 0.5, 300)
    exact = bounds.unbiased_mse_lower_bound(eps, 1.0).values
    assert np.all(exact >= bounds.seed_corollary_mse_bound(eps, 1.0))
    # small-ε limit: x₀²/(16(1+e^{x₀})) ε⁻² ≈ 1/(33.14 ε²)
    c = bounds.X0**2 / (16 * (1 + math.exp(bounds.X0)))
    assert float(exact[0]) * 1e-8 == pytest.approx(c, rel=1e-3)


@settings(max_examples=50, deadline=None)
@given(e1=st.floats(1e-3, 20.0), f=st.floats(1.001, 3.0), d=st.floats(1e-3, 1e3))
def test_linear_mse_bound_decreases_in_epsilon(e1: float, f: float, d: float) -> None:
    v = bounds.unbiased_mse_lower_bound([e1, e1 * f], d).values
    assert v[1] < v[0]


def test_quantile_modulus_by_hand() -> None:
    x = [1.0, 2.0, 4.0, 7.0, 9.0]  # median x_(3) = 4, bounds [0, 10]
    mod = bounds.quantile_modulus(x, 0.5, 0.0, 10.0)
    # k=1: max(7−4, 4−2) = 3; k=2: max(9−4, 4−1) = 5; k=3: max(10−4, 4−0) = 6 (saturated)
    assert mod.tolist() == [3.0, 5.0, 6.0]


def test_quantile_mse_bound_equals_brute_force_and_is_data_dependent() -> None:
    rng = np.random.default_rng(3)
    x = rng.beta(2, 5, size=301)
    eps = np.array([0.01, 0.1, 1.0, 3.0])
    got = bounds.quantile_mse_lower_bound(x, eps, 0.5, 0.0, 1.0)
    mod = bounds.quantile_modulus(x, 0.5, 0.0, 1.0)
    k = np.arange(1, 5001)
    full = np.concatenate([mod, np.full(k.size - mod.size, mod[-1])])
    for i, e in enumerate(eps):
        brute = np.max(full**2 / (4 * (1 + np.exp(np.minimum(2 * k * e, 700)))))
        assert got.values[i] == pytest.approx(brute, rel=1e-12)
    assert got.data_dependent


def test_modulus_bound_with_leading_zeros_ties() -> None:
    # ties at the median: Δ_f(x,1) = 0 — the bound must still find the first positive k
    x = [5.0] * 9
    mod = bounds.quantile_modulus(x, 0.5, 0.0, 10.0)
    # nine equal points: x_(5±k) = 5 until k = 5 reaches the padding L = 0 / U = 10 (by hand)
    assert mod.tolist() == [0.0, 0.0, 0.0, 0.0, 5.0]
    q = bounds.quantile_mse_lower_bound(x, 1.0, 0.5, 0.0, 10.0)
    assert float(q.values[()]) == pytest.approx(25 / (4 * (1 + math.exp(10))))  # k = 5 only
    b = bounds.mse_lower_bound_from_modulus([0.5], [0.0, 0.0, 2.0, 2.0])
    # k = 3: 4/(4(1+e³)) = 0.047426; k = 4: 4/(4(1+e⁴)) = 0.01799
    assert float(b.values[0]) == pytest.approx(1 / (1 + math.e**3))


def test_discrete_upper_bound_and_ism_exact_by_hand() -> None:
    d = [0, 1, 1, 3]
    eps = 0.7
    ub = bounds.unbiased_discrete_upper_bound(d, eps)
    assert float(ub.values[()]) == pytest.approx(1 / (1 + 2 * math.exp(-1.4) + math.exp(-4.2)))
    ie = bounds.ism_exact(d, eps)
    assert float(ie.values[()]) == pytest.approx(1 / (1 + 2 * math.exp(-0.35) + math.exp(-1.05)))
    assert ub.data_dependent and ie.data_dependent


def test_quarter_optimality_holds_with_equality_garivier() -> None:
    d = ism.mode_distance([12, 9, 9, 3, 0]).distance
    eps = np.geomspace(0.01, 5, 40)
    chk = bounds.ism_optimality(d, eps)
    assert chk.fraction == 0.25 and np.all(chk.holds)
    np.testing.assert_allclose(chk.ism, chk.bound_at_fraction, rtol=1e-12)  # 1/Σe^{−εD/2} both sides
    # and the ISM is strictly below the unbiased bound at the same ε (no free lunch)
    assert np.all(chk.ism < bounds.unbiased_discrete_upper_bound(d, eps).values)


def test_half_optimality_for_two_outputs() -> None:
    d = ism.majority_distance(8, 11).distance
    chk = bounds.ism_optimality(d, [0.1, 1.0])
    assert chk.fraction == 0.5 and np.all(chk.holds)


def test_em_utility_bound_flag_and_value() -> None:
    b = bounds.em_utility_bound(1.0, 100, 0.05)
    assert float(b.values[()]) == pytest.approx(2 * math.log(2000))  # (2/ε) ln(|T|/β)
    assert not b.data_dependent


def test_majority_accuracy_ordering() -> None:
    eps = np.geomspace(0.01, 3, 50)
    for s in (0, 4, 5, 6, 11):
        m = bounds.majority_accuracy(eps, s, 11)
        assert m.data_dependent
        assert np.all(m.better >= m.exponential - 1e-15)  # Garivier's lecture notes: "Better"
        assert np.all(m.unbiased_upper >= m.better - 1e-15)  # better is unbiased ⇒ below the bound
