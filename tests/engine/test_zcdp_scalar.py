"""The zCDP conversion's one-value path gives the vectorised path's bits exactly.

θ enters ``plan_hash``, and a PLAN.json run again must find its earlier release, so a faster
path may not move a single bit. The vectorised path (``_zcdp_epsilon_array``, and
``_rho_for_epsilon`` on an array of several values) is the one every call took before
the one-value path existed; the expected values here are that path's own outputs, on the
same machine, for the same inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.core.errors import BudgetError
from planner.planning import allocation
from planner.privacy.accountants import zcdp

RHOS = np.concatenate([
    np.logspace(-14, 9, 461),
    [5e-324, 1e-300, 2.0**-1074 * 3, 0.5, 1.0, 2.0, 1e300, np.nextafter(1.0, 2.0)],
])
DELTAS = [1e-300, 1e-15, 1e-9, 1e-6, 1e-5, 1e-3, 0.1, 0.5, 0.999999]


@pytest.mark.parametrize("delta", DELTAS)
def test_one_value_conversion_is_the_vectorised_bits(delta: float) -> None:
    taken = 0
    for r in RHOS:
        with np.errstate(over="ignore", divide="ignore"):  # ρ near the float range's ends
            want = zcdp._zcdp_epsilon_array(np.array([r]), delta)[0]
        got = zcdp.zcdp_to_approx_epsilon(float(r), delta)
        assert got.shape == ()
        assert float(got).hex() == float(want).hex(), (r, delta)
        taken += zcdp._zcdp_epsilon_one(float(r), delta) is not None
    # the one-value path itself was taken, not only its fallback
    assert taken >= len(RHOS) - 3


def test_one_value_edges_and_shapes() -> None:
    # ρ = 0 costs nothing; ρ = inf and δ = 0 cost everything (the vectorised path's rules)
    assert float(zcdp.zcdp_to_approx_epsilon(0.0, 1e-6)) == 0.0
    assert float(zcdp.zcdp_to_approx_epsilon(math.inf, 1e-6)) == math.inf
    assert float(zcdp.zcdp_to_approx_epsilon(0.5, 0.0)) == math.inf
    # the shape of the argument is kept: (), (1,) and (1, 1)
    for arg in (0.5, [0.5], [[0.5]]):
        assert zcdp.zcdp_to_approx_epsilon(arg, 1e-6).shape == np.shape(arg)
    for bad in (-1.0, math.nan, [-1.0]):
        with pytest.raises(BudgetError, match="rho must be ≥ 0"):
            zcdp.zcdp_to_approx_epsilon(bad, 1e-6)


@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
def test_one_epsilon_bisection_is_the_vectorised_bits(delta: float) -> None:
    epsilons = np.concatenate([np.logspace(-4, 2, 61), [0.0, 1.0, 7.5]])
    for e in epsilons:
        one = allocation._rho_for_epsilon(float(e), delta)
        # two equal values take the vectorised bisection (element by element the same
        # operations as one value; NumPy's exp/log/log1p give each element the same bits
        # whatever its position, see test_numpy_loops_are_positionless)
        both = allocation._rho_for_epsilon(np.array([e, e]), delta)
        assert one.shape == (1,)
        assert float(one[0]).hex() == float(both[0]).hex() == float(both[1]).hex(), (e, delta)


def test_numpy_loops_are_positionless() -> None:
    """What the comparison above relies on: NumPy's exp, log and log1p give an element the
    same bits in a one-element array as inside a long one (they are not the C library's:
    those differ in the last bit for a few per cent of arguments)."""
    rng = np.random.default_rng(18)
    x = rng.uniform(0.01, 40.0, 3000)
    for f in (np.exp, np.log, np.log1p):
        long = f(x)
        single = np.array([zcdp._ufunc_at(f, float(v)) for v in x])
        assert np.array_equal(long, single), f.__name__
