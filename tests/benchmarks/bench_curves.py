"""Benchmark: 20 queries × 200 ε accuracy curves (RMSE + 95% bound), mixed mechanisms.

Run with ``python tests/benchmarks/bench_curves.py``. Prints; never asserts (target < 50 ms
for a full redraw, the work the dashboard does on every slider move). Not collected by
pytest (the file name does not start with ``test_``).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from anywhere

from planner.planning.mechanisms import (
    DISCRETE_GAUSSIAN,
    DISCRETE_LAPLACE,
    GAUSSIAN,
    LAPLACE,
    Sensitivity,
)
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms import randomized_response as rr
from planner.planning.mechanisms.gaussian import _rho_cached, _unit_sigma_cached

EPS = np.geomspace(0.01, 10.0, 200)
DELTA = 1e-6
BETA = 0.05


def _additive(mech, sens: Sensitivity, delta: float) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:  # type: ignore[no-untyped-def]
    def curve(eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = mech.scale_for(eps, sens, delta)
        return mech.rmse(s), mech.error_bound(s, BETA)

    return curve


def _em_quantile(k: int, n: int) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    return lambda eps: (em.quantile_rank_rmse(eps, k, n), em.quantile_rank_error_bound(eps, k, BETA))


def _rr(n: int) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    return lambda eps: (rr.worst_case_rmse(eps, n), rr.worst_case_error_bound(eps, n, BETA))


def queries() -> list[tuple[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]]]:
    rng = np.random.default_rng(0)
    out: list[tuple[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]]] = []
    kinds = ["laplace", "gaussian", "discrete_laplace", "discrete_gaussian", "em_quantile", "rr"]
    for i in range(20):
        kind = kinds[i % len(kinds)]
        d = float(rng.uniform(0.5, 100.0))
        sens = Sensitivity(d, d * 0.7)
        if kind == "laplace":
            f = _additive(LAPLACE, sens, 0.0)
        elif kind == "gaussian":
            f = _additive(GAUSSIAN, sens, DELTA)
        elif kind == "discrete_laplace":
            f = _additive(DISCRETE_LAPLACE, Sensitivity(1.0, 1.0), 0.0)
        elif kind == "discrete_gaussian":
            f = _additive(DISCRETE_GAUSSIAN, Sensitivity(2.0, 2.0**0.5), DELTA)
        elif kind == "em_quantile":
            f = _em_quantile(int(rng.integers(50, 500)), int(rng.integers(1000, 10**6)))
        else:
            f = _rr(int(rng.integers(100, 10**5)))
        out.append((kind, f))
    return out


def run_all(qs: list[tuple[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]]]) -> None:
    for _, f in qs:
        f(EPS)


def main() -> None:
    qs = queries()
    _rho_cached.cache_clear()
    _unit_sigma_cached.cache_clear()
    t0 = time.perf_counter()
    run_all(qs)
    cold = time.perf_counter() - t0
    times = []
    for _ in range(30):
        t0 = time.perf_counter()
        run_all(qs)
        times.append(time.perf_counter() - t0)
    print(f"20 queries x {EPS.size} eps (RMSE + 95% bound), mixed mechanisms:")
    print(f"  cold (first call, empty caches): {cold * 1e3:8.2f} ms")
    print(f"  warm median of 30 redraws:       {statistics.median(times) * 1e3:8.2f} ms  (target < 50 ms)")
    per: dict[str, list[float]] = {}
    for kind, f in qs:
        reps = []
        for _ in range(10):
            t0 = time.perf_counter()
            f(EPS)
            reps.append(time.perf_counter() - t0)
        per.setdefault(kind, []).append(statistics.median(reps))
    for kind, ts in per.items():
        print(f"  {kind:18s} median per query: {statistics.median(ts) * 1e3:7.3f} ms  (x{len(ts)})")
    _rho_cached.cache_clear()
    t0 = time.perf_counter()
    DISCRETE_GAUSSIAN.scale_for(EPS, Sensitivity(1.0, 1.0), DELTA)
    print(f"  discrete_gaussian calibration without cache: {(time.perf_counter() - t0) * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
