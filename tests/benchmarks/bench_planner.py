"""Planner speed (issue 4): printed, never asserted.

Run: python tests/benchmarks/bench_planner.py [--max-n 1000] [--cli-only] [--baseline DIR] [--repeat N]
Targets on a 2-core machine: 100 mixed queries under RDP < 200 ms; 1000 < 2 s;
the compare-rules curve (50 total-ε values, 20 queries, every rule) < 500 ms.

Issue 31: ``planner plan`` on the bundled census plan (a fresh process each time: wall
seconds, and the seconds inside the process spent planning the rule in force and comparing
every rule), and one ε change of the Planner page measured in the engine (every rule planned
at a new ε, as the page's comparison asks), each beside ``--baseline DIR`` (another checkout,
e.g. ``git archive <commit> | tar -x -C DIR``) measured alternately in the same run, with the
machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
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


_CLI_PROBE = """
import json, sys, time
t0 = time.perf_counter()
from planner.planning import plan_spec
t1 = time.perf_counter()
spec = plan_spec.load_plan_spec(sys.argv[1])
plan_spec.build_plan(spec)
t2 = time.perf_counter()
plan_spec.compare_spec(spec)
t3 = time.perf_counter()
eps = []
for e in (0.7, 1.3, 0.45):  # a Planner ε change: every rule at a new ε
    d = json.loads(json.dumps(plan_spec.spec_document(spec.schema, e, spec.delta, spec.rule, spec.mode, spec.queries,
                                                      error_scales=spec.error_scales or None)))
    s2 = plan_spec.parse_plan_spec(d)
    t = time.perf_counter()
    plan_spec.build_plan(s2)
    plan_spec.compare_spec(s2)
    eps.append(time.perf_counter() - t)
print(json.dumps({"import": t1 - t0, "plan_rule_in_force": t2 - t1, "compare_every_rule": t3 - t2,
                  "eps_change_every_rule": sorted(eps)[1]}))
"""


def cli_plan(root: Path) -> dict[str, float]:
    """``planner plan --spec examples/census_plan.json`` in a fresh process (wall), then the
    same work timed inside a second fresh process by parts."""
    spec = str(ROOT / "examples" / "census_plan.json")
    env = dict(os.environ, PYTHONPATH=str(root))
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from planner.cli import main; raise SystemExit(main())", "plan",
                    "--spec", spec], cwd=root, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t
    out = subprocess.run([sys.executable, "-c", _CLI_PROBE, spec], cwd=root, env=env, check=True,
                         capture_output=True, text=True)
    return {"cli_wall": wall, **json.loads(out.stdout.strip().splitlines()[-1])}


def report_cli(baseline: Path | None, repeat: int) -> None:
    print(f"machine load (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; median of {repeat}, "
          "the tree and the baseline alternating")
    now: list[dict[str, float]] = []
    base: list[dict[str, float]] = []
    for _ in range(repeat):
        now.append(cli_plan(ROOT))
        if baseline is not None:
            base.append(cli_plan(baseline))
    for key in now[0]:
        v = statistics.median(r[key] for r in now)
        line = f"planner plan (census example)  {key:24s} now {v:7.3f} s"
        if base:
            b = statistics.median(r[key] for r in base)
            line += f"   baseline {b:7.3f} s   baseline/now {b / v:5.2f}×"
        print(line)
    print(f"machine load (1 min) at the end: {os.getloadavg()[0]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-n", type=int, default=1000)
    ap.add_argument("--cli-only", action="store_true")
    ap.add_argument("--baseline", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    report_cli(args.baseline.resolve() if args.baseline else None, args.repeat)
    if args.cli_only:
        return
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
