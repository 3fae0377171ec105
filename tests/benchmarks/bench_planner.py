"""Planner speed (issue 4): printed, never asserted.

Run: python tests/benchmarks/bench_planner.py [--max-n 1000]
Targets on a 2-core machine: 100 mixed queries under RDP < 200 ms; 1000 < 2 s;
the compare-rules curve (50 total-ε values, 20 queries, every rule) < 500 ms.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from planner.planning.allocation import Family, Item, allocate, applicable_rules, error_curve
from planner.planning.plan_spec import load_plan_spec
from planner.planning.workload import compare_curve
from planner.privacy.accounting import CompositionRule

ROOT = Path(__file__).resolve().parents[2]

FAMS = [
    Family.LAPLACE,
    Family.DISCRETE_GAUSSIAN,
    Family.EXPONENTIAL,
    Family.MEAN_LAPLACE,
    Family.DISCRETE_LAPLACE,
]


def workload(n: int, seed: int = 0) -> list[Item]:
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        fam = FAMS[i % len(FAMS)]
        coef = float(rng.uniform(1, 100))
        part_b = float(rng.uniform(1, 10)) if fam is Family.MEAN_LAPLACE else 0.0
        items.append(Item(f"q{i}", fam, coef, weight=float(rng.uniform(0.5, 5)), part_b=part_b))
    return items


def timed(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-n", type=int, default=1000)
    args = ap.parse_args()
    print("allocation time vs number of mixed queries (median of 3):")
    for rule in CompositionRule:
        times: dict[int, float] = {}
        for n in (10, 20, 50, 100, 200, 500, 1000):
            if n > args.max_n:
                break
            items = workload(n)
            times[n] = timed(
                lambda items=items, rule=rule: allocate(items, 1.0, 1e-6, rule),
                repeat=1 if n >= 500 else 3,
            )
            print(f"  {rule.value:8s} n={n:5d}: {times[n] * 1000:9.1f} ms")
        if 100 in times and 1000 in times:
            # growth exponent k in t ∝ n^k between 100 and 1000 queries
            print(
                f"  {rule.value:8s} growth 100 -> 1000 queries: t ~ n^{np.log10(times[1000] / times[100]):.2f}"
            )
    items = workload(20)
    eps = np.geomspace(0.1, 10, 50)

    def curve() -> None:
        for rule in applicable_rules(items, 1e-6):
            error_curve(items, eps, 1e-6, rule)

    print(
        f"compare-rules curve, 20 queries x 50 total-eps x 4 rules: {timed(curve, 3) * 1000:.0f} ms"
    )
    for rule in applicable_rules(items, 1e-6):
        t = timed(lambda rule=rule: error_curve(items, eps, 1e-6, rule), 3)
        print(f"  {rule.value:8s}: {t * 1000:.0f} ms")
    # the Planner page's curve on the bundled census workload (examples/census_plan.json)
    spec = load_plan_spec(ROOT / "examples" / "census_plan.json")
    t = timed(
        lambda: compare_curve(spec.queries, spec.schema, list(eps), spec.delta, spec.error_scales),
        3,
    )
    print(
        f"compare-rules curve, census example plan ({len(spec.queries)} queries) x 50 total-eps: {t * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
