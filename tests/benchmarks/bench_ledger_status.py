"""Benchmark: the ledger's budget status and a release as the history grows.

For every composition rule, a dataset on a fresh SQLite ledger receives releases of mixed
mechanisms (a Laplace count, a Gaussian sum, an exponential-mechanism median); after 10,
100 and 1,000 of them this prints the median time of

* ``Ledger.status()`` on the ledger that made the releases (the app's case: one process,
  many page views), and on a freshly opened one (the first view of a new process, which
  reads the journal once);
* one more release (check, spend, sample, store);

and the ratio of each to its value after 10 releases (the goal: status within 2×). It
also checks that the status equals the one-shot composition of every recorded spend.

Run: ``python tests/benchmarks/bench_ledger_status.py [--sizes 10 100 1000] [--rules ...]``.
Timings are printed, never asserted; the machine's load is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from planner.ledger import Ledger
from planner.privacy.accounting import Spend, total_epsilon
from planner.privacy.events import ExponentialEvent, GaussianEvent, LaplaceEvent

DELTA = 1e-6


def spends(i: int) -> list[tuple[str, Spend]]:
    """One release: three mechanisms, each with the (ε, δ) it was calibrated for."""
    lap = LaplaceEvent(200.0)  # ε = 1/200
    gau = GaussianEvent(80.0)
    exp = ExponentialEvent(0.004)
    from planner.privacy.accounting import standalone_epsilon

    return [
        (f"count-{i}", Spend(lap, 0.005)),
        (f"sum-{i}", Spend(gau, standalone_epsilon(gau, 1e-9), 1e-9)),
        (f"median-{i}", Spend(exp, 0.004)),
    ]


def median_time(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(rule: str, sizes: list[int], folder: Path) -> None:
    url = f"sqlite:///{folder / f'ledger-{rule}.db'}"
    led = Ledger(url)
    info = led.register_dataset(f"digest-{rule}", f"bench-{rule}", 1000.0, 1e-3, rule)
    done = 0
    base: dict[str, float] = {}
    for n in sizes:
        while done < n:
            led.release(info.fingerprint, f"plan-{done}", "s", spends(done), lambda: {"x": 1})
            done += 1
        warm = median_time(lambda: led.status(info.fingerprint), 30)
        fresh_led = Ledger(url)
        t0 = time.perf_counter()
        fresh_led.status(info.fingerprint)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        led.release(info.fingerprint, f"extra-{n}", "s", spends(10**6 + n), lambda: {"x": 1})
        one_release = time.perf_counter() - t0
        done += 1
        st = led.status(info.fingerprint)
        every = [sp.spend for rec in led.releases(info.fingerprint) for sp in rec.spends]
        exact = total_epsilon(every, rule, DELTA * 1000)
        agree = abs(st.epsilon_spent - exact) <= 1e-9 * max(1.0, exact)
        if n == sizes[0]:
            base = {"warm": warm, "first": first, "release": one_release}
        print(f"{rule:8s} {n:6d} releases: status {warm * 1e3:8.3f} ms (×{warm / base['warm']:5.2f})  "
              f"first status of a new process {first * 1e3:8.1f} ms (×{first / base['first']:5.2f})  "
              f"one release {one_release * 1e3:7.1f} ms (×{one_release / base['release']:5.2f})  "
              f"spent {st.epsilon_spent:.6g} {'= one-shot composition' if agree else f'≠ one-shot {exact:.6g}'}")
        fresh_led.close()
    led.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--rules", nargs="+", default=["basic", "advanced", "rdp", "zcdp", "pld"])
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("PLANNER_HOME", d)
        for rule in args.rules:
            run(rule, sorted(args.sizes), Path(d))


if __name__ == "__main__":
    main()
