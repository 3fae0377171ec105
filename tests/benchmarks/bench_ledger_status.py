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

**The first status in a new process** (issue 31; what a page view in a fresh server
process and every CLI command pay): a child Python process imports the ledger, opens it
and reads the status once; the child reports the time of its open and of that status, and
the parent the child's wall time (Python start-up and imports included). Three ways, on
the same ledger file:

* ``after``: this tree, with the checkpoints the ledger wrote while it was built
  (:mod:`planner.ledger.checkpoint`: a state every 64 journal entries, a summary after
  each release);
* ``replay``: this tree with the checkpoints deleted first (the whole journal replayed
  and the history composed, as before checkpoints existed), one child only: from 64
  journal entries on, that child also *writes* the checkpoint (its open includes the
  write: what the one process that finds no checkpoint pays); the checkpoints are
  restored afterwards;
* ``before``: the tree given by ``--baseline`` (e.g. a checkout of main), if any.

Each is the median of ``--repeats`` children; the statuses they print must agree.

Run: ``python tests/benchmarks/bench_ledger_status.py [--sizes 10 100 1000] [--rules ...]
[--baseline /path/to/other/tree] [--repeats 5]``.
Timings are printed, never asserted; the machine's load is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
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


#: The child: import, open, one status; its own times as JSON on stdout.
CHILD = """
import json, sys, time
t0 = time.perf_counter()
from planner.ledger import Ledger
t1 = time.perf_counter()
led = Ledger(sys.argv[1])
t2 = time.perf_counter()
st = led.status(sys.argv[2])
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "status": t3 - t2, "spent": st.epsilon_spent.hex()}))
"""


def first_in_new_process(url: str, fp: str, root: Path, repeats: int) -> dict[str, float | str]:
    """Medians over ``repeats`` children running the code under ``root``: open, status,
    open + status, and the child's wall time."""
    env = dict(os.environ, PYTHONPATH=str(root))
    runs: list[dict[str, float | str]] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, url, fp], env=env, cwd=root, check=True,
                             capture_output=True, text=True).stdout
        wall = time.perf_counter() - t0
        runs.append(json.loads(out.strip().splitlines()[-1]) | {"wall": wall})
    spent = {str(r["spent"]) for r in runs}
    assert len(spent) == 1, spent
    med = {k: statistics.median(float(r[k]) for r in runs) for k in ("import", "open", "status", "wall")}
    med["first"] = statistics.median(float(r["open"]) + float(r["status"]) for r in runs)
    return med | {"spent": spent.pop()}


def new_process_rows(rule: str, n: int, url: str, fp: str, baseline: Path | None, repeats: int,
                     base: dict[str, dict[str, float | str]]) -> None:
    """Print the three ways (after, replay, before) of the first status in a new process."""
    from sqlalchemy import create_engine, text

    here = Path(__file__).resolve().parents[2]
    found: dict[str, dict[str, float | str]] = {"after": first_in_new_process(url, fp, here, repeats)}
    eng = create_engine(url)
    with eng.begin() as conn:
        saved = [tuple(r) for r in conn.execute(text(
            "SELECT kind, seq, chain_mac, body, mac, created_at FROM ledger_checkpoints"))]
        conn.execute(text("DELETE FROM ledger_checkpoints"))
    kinds = sorted({f"{k}@{s}" for k, s, *_ in saved})
    try:
        found["replay"] = first_in_new_process(url, fp, here, 1)  # the replay writes a checkpoint
        if baseline is not None:
            with eng.begin() as conn:
                conn.execute(text("DELETE FROM ledger_checkpoints"))
            found["before"] = first_in_new_process(url, fp, baseline, repeats)
    finally:
        with eng.begin() as conn:
            conn.execute(text("DELETE FROM ledger_checkpoints"))
            for row in saved:
                conn.execute(text("INSERT INTO ledger_checkpoints (kind, seq, chain_mac, body, mac, created_at) "
                                  "VALUES (:k, :s, :c, :b, :m, :t)"),
                             dict(zip("kscbmt", row, strict=True)))
        eng.dispose()
    agree = len({str(v["spent"]) for v in found.values()}) == 1
    for way, m in found.items():
        b = base.setdefault(way, m)
        print(f"{rule:8s} {n:6d} releases, new process, {way:6s}: open {float(m['open']) * 1e3:7.1f} ms + "
              f"status {float(m['status']) * 1e3:7.1f} ms = {float(m['first']) * 1e3:7.1f} ms "
              f"(×{float(m['first']) / float(b['first']):5.2f})  child wall {float(m['wall']) * 1e3:7.0f} ms "
              f"(×{float(m['wall']) / float(b['wall']):5.2f}; imports {float(m['import']) * 1e3:5.0f} ms)  "
              f"load {os.getloadavg()[0]:.2f}")
    print(f"{rule:8s} {n:6d} releases, new process: checkpoints {', '.join(kinds) or 'none'}; "
          f"statuses {'agree' if agree else 'DIFFER: ' + str({k: v['spent'] for k, v in found.items()})}")


def run(rule: str, sizes: list[int], folder: Path, baseline: Path | None = None, repeats: int = 5) -> None:
    url = f"sqlite:///{folder / f'ledger-{rule}.db'}"
    led = Ledger(url)
    info = led.register_dataset(f"digest-{rule}", f"bench-{rule}", 1000.0, 1e-3, rule)
    done = 0
    base: dict[str, float] = {}
    new_base: dict[str, dict[str, float | str]] = {}
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
        new_process_rows(rule, n, url, info.fingerprint, baseline, repeats, new_base)
    led.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--rules", nargs="+", default=["basic", "advanced", "rdp", "zcdp", "pld"])
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another tree of the planner (e.g. a checkout of main) to time as 'before'")
    ap.add_argument("--repeats", type=int, default=5, help="new processes per measurement (median)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("PLANNER_HOME", d)
        for rule in args.rules:
            run(rule, sorted(args.sizes), Path(d), args.baseline, args.repeats)


if __name__ == "__main__":
    main()
