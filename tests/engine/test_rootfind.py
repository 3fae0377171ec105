"""``planner.core.rootfind.brentq``: SciPy's compiled Brent routine without importing scipy.optimize.

The oracle is the public ``scipy.optimize.brentq`` of the installed SciPy: the root must be
the same float, bit for bit (a plan's θ enter its ``plan_hash``; see the module docstring),
and the errors the same kinds. The import check runs in a fresh interpreter, where
``scipy.optimize`` has not been imported by another test.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from planner.core import rootfind

optimize = pytest.importorskip("scipy.optimize")

ROOT = Path(__file__).resolve().parents[2]


def test_the_compiled_routine_loads_with_the_installed_scipy() -> None:
    """The fast path is the one taken here: if a SciPy upgrade moves ``_zeros._brentq``,
    this fails instead of the release silently paying the import again."""
    assert rootfind.compiled_brentq() is not None


def _cases(n: int) -> list[tuple[str, float, float, float, float, float]]:
    """(kind, p, q, a, b, xtol): random bracketed equations of the shapes the planner solves
    (a cost minus a target along a log factor; a tail probability minus β), plus polynomials."""
    rng = random.Random(20261124)  # fixed seed: the same cases every run
    out = []
    for i in range(n):
        kind = ("exp", "tail", "poly")[i % 3]
        p, q = rng.uniform(0.05, 5.0), rng.uniform(-1.0, 1.0)
        xtol = (1e-14, 1e-12, 2e-12, 1e-9)[i % 4]
        out.append((kind, p, q, -8.0, 8.0, xtol))
    return out


def _f(kind: str, p: float, q: float):  # type: ignore[no-untyped-def]
    if kind == "exp":  # cost(θ·e^x) − target: increasing
        return lambda x: p * math.exp(x) + 0.3 * math.exp(0.5 * x) - (1.0 + q * 0.5)
    if kind == "tail":  # a Laplace-difference tail minus β: decreasing
        return lambda x: (1 + abs(x) / (2 * p)) * math.exp(-abs(x) / p) - (0.05 + 0.04 * q)
    return lambda x: x**3 - p * x - q


def test_roots_equal_scipy_optimize_brentq_bit_for_bit() -> None:
    """600 bracketed equations (three shapes, four tolerances): the same float as
    ``scipy.optimize.brentq`` with the same arguments (the oracle)."""
    checked = 0
    for kind, p, q, a, b, xtol in _cases(600):
        f = _f(kind, p, q)
        lo, hi = (0.0, 60.0) if kind == "tail" else (a, b)
        if (f(lo) > 0) == (f(hi) > 0):
            continue
        for maxiter in (100, 200):
            ours = rootfind.brentq(f, lo, hi, xtol=xtol, rtol=4 * 2.220446049250313e-16, maxiter=maxiter)
            theirs = optimize.brentq(f, lo, hi, xtol=xtol, rtol=4 * 2.220446049250313e-16, maxiter=maxiter)
            assert ours.hex() == float(theirs).hex(), (kind, p, q, xtol)
            checked += 1
    assert checked > 800  # most cases are bracketed: the comparison ran


def test_errors_are_scipys() -> None:
    """No sign change, a NaN, too few iterations, bad tolerances: the exceptions SciPy
    raises for the same calls (ValueError, ValueError, RuntimeError, ValueError)."""
    with pytest.raises(ValueError):
        optimize.brentq(lambda x: x * x + 1.0, -1.0, 1.0)
    with pytest.raises(ValueError):
        rootfind.brentq(lambda x: x * x + 1.0, -1.0, 1.0, xtol=1e-12)
    with pytest.raises(ValueError, match="NaN"):
        rootfind.brentq(lambda x: math.nan if x > 0.3 else x - 0.5, 0.0, 1.0, xtol=1e-12)
    with pytest.raises(RuntimeError):
        optimize.brentq(lambda x: x**3 - 2.0, 0.0, 2.0, xtol=1e-15, maxiter=2)
    with pytest.raises(RuntimeError):
        rootfind.brentq(lambda x: x**3 - 2.0, 0.0, 2.0, xtol=1e-15, maxiter=2)
    with pytest.raises(ValueError, match="xtol"):
        rootfind.brentq(lambda x: x, -1.0, 1.0, xtol=0.0)
    with pytest.raises(ValueError, match="rtol"):
        rootfind.brentq(lambda x: x, -1.0, 1.0, xtol=1e-12, rtol=1e-17)


def test_release_path_solves_without_importing_scipy_optimize() -> None:
    """In a fresh interpreter: a zCDP plan (it scales θ with the root finder) is made
    without ``scipy.optimize`` being imported, and its θ are those of the same plan made
    after ``scipy.optimize.brentq`` replaces the fast path (bit for bit)."""
    code = """
import json, sys
from planner.planning.plan_spec import load_plan_spec
from planner.planning.workload import plan
from planner.planning import allocation
from planner.core import rootfind
spec = load_plan_spec("examples/census_plan.json")
def make():
    p = plan(spec.queries, spec.schema, spec.epsilon, spec.delta, "zcdp", spec.error_scales or None)
    return [float(it.theta).hex() for it in p.allocation.items]
calls = []
real = rootfind.brentq
def counted(*a, **k):
    calls.append(1)
    return real(*a, **k)
rootfind.brentq = counted
fast = make()
loaded = sorted(m for m in sys.modules if m == "scipy.optimize" or m.startswith("scipy.optimize."))
from scipy import optimize
rootfind.compiled_brentq.cache_clear()
rootfind.compiled_brentq = lambda: None  # the public function from here on
slow = make()
print("RESULT" + json.dumps({"fast": fast, "slow": slow, "loaded": loaded, "calls": len(calls)}))
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")).removeprefix("RESULT"))
    assert out["calls"] > 0  # the plan did scale θ with the root finder
    assert out["loaded"] == []
    assert out["fast"] == out["slow"]
