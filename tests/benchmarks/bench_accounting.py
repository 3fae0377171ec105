"""Benchmark: RDP composition of 1000 heterogeneous mechanisms (target < 10 ms).

Run with ``python tests/benchmarks/bench_accounting.py``. Prints medians; asserts nothing
(timings depend on the machine). Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from planner.privacy.accounting import (
    CompositionRule,
    Spend,
    compare_rules,
    pure_epsilon,
    rdp_curve,
    rdp_epsilon,
    rdp_to_epsilon,
    standalone_epsilon,
    total_epsilon,
)
from planner.privacy.events import (
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    RandomizedResponseEvent,
)

N_EVENTS = 1000
REPEATS = 50
DELTA = 1e-6


def mixed_events(n: int, seed: int = 0) -> list[PrivacyEvent]:
    """n mechanisms, a quarter each of Laplace, Gaussian, randomized response and the
    exponential mechanism, every one with its own (random) parameter."""
    rng = np.random.default_rng(seed)
    events: list[PrivacyEvent] = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            events.append(LaplaceEvent(float(rng.uniform(0.5, 20.0))))
        elif kind == 1:
            events.append(GaussianEvent(float(rng.uniform(0.5, 20.0))))
        elif kind == 2:
            events.append(RandomizedResponseEvent(float(rng.uniform(0.55, 0.95))))
        else:
            events.append(ExponentialEvent(float(rng.uniform(0.01, 2.0))))
    return events


def median_ms(fn: Callable[[], object], repeats: int = REPEATS) -> str:
    """Median wall-clock and CPU (process) time of ``fn``, in ms. CPU time is the steadier
    figure on a shared machine."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return f"wall {statistics.median(wall) * 1e3:7.3f} ms   cpu {statistics.median(cpu) * 1e3:7.3f} ms"


def main() -> None:
    events = mixed_events(N_EVENTS)
    curve = rdp_curve(events)
    spends = [Spend(e, standalone_epsilon(e, 1e-9), 1e-9 if pure_epsilon(e) == float("inf") else 0.0) for e in events]
    eps, order = rdp_epsilon(events, DELTA)
    print(f"{N_EVENTS} heterogeneous events (Laplace, Gaussian, RR, exponential), δ = {DELTA:g}")
    print(f"  ε (RDP, refined) = {eps:.6f} at α = {order:.4f}")
    print(f"  rdp_curve (1200 orders)                 median {median_ms(lambda: rdp_curve(events))}")
    print(f"  rdp_to_epsilon (grid only)              median {median_ms(lambda: rdp_to_epsilon(curve, DELTA))}")
    print(f"  rdp_epsilon (compose + convert, refine) median {median_ms(lambda: rdp_epsilon(events, DELTA))}   target < 10 ms")
    print(f"  total_epsilon(rule=RDP) on spends       median {median_ms(lambda: total_epsilon(spends, CompositionRule.RDP, DELTA))}")
    print(f"  compare_rules (all four rules)          median {median_ms(lambda: compare_rules(spends, 1e-3), 10)}")


if __name__ == "__main__":
    main()
