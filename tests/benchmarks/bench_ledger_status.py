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

The ledger is copied at each size (SQLite's backup API) and the sizes are measured
*interleaved* at the end (a child per size and way in turn), so each ratio compares
children run under the same load:

* ``after``: this tree, with the checkpoints the ledger wrote while it was built
  (:mod:`planner.ledger.checkpoint`: a state every 64 journal entries, a summary after
  each release);
* ``replay``: this tree with the checkpoints deleted first (the whole journal replayed
  and the history composed, as before checkpoints existed), one child only: from 64
  journal entries on, that child also *writes* the checkpoint (its open includes the
  write: what the one process that finds no checkpoint pays); the checkpoints are
  restored afterwards;
* ``before``: the tree given by ``--baseline`` (e.g. a checkout of main), if any.

Each is the median of ``--repeats`` children (``replay``: one); the statuses they print
must agree.

Run: ``python tests/benchmarks/bench_ledger_status.py [--sizes 10 100 1000] [--rules ...]
[--baseline /path/to/other/tree] [--repeats 5]``.
Timings are printed, never asserted; the machine's load is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
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


def child(url: str, fp: str, root: Path) -> dict[str, float | str]:
    """One new process running the code under ``root``: its open, status and wall time."""
    env = dict(os.environ, PYTHONPATH=str(root))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, url, fp], env=env, cwd=root, check=True,
                         capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    found: dict[str, float | str] = json.loads(out.strip().splitlines()[-1])
    return found | {"wall": wall, "first": float(found["open"]) + float(found["status"])}


def copy_ledger(src: Path, dst: Path, *, checkpoints: bool) -> str:
    """A copy of the SQLite ledger ``src`` (SQLite's backup API: the WAL included), with or
    without its checkpoints; its URL."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
        if not checkpoints:
            b.execute("DELETE FROM ledger_checkpoints")
    return f"sqlite:///{dst}"


def new_process_table(rule: str, snaps: list[tuple[int, Path, str]], baseline: Path | None, repeats: int) -> None:
    """The first status in a new process at every size, the sizes *interleaved* (one child
    per size and way in turn, ``repeats`` rounds) so that every ratio compares children run
    under the same load; medians."""
    here = Path(__file__).resolve().parents[2]
    ways: dict[str, tuple[Path, bool]] = {"after": (here, True)}
    if baseline is not None:
        ways["before"] = (baseline, False)
    urls = {(n, way): copy_ledger(path, path.with_name(f"{path.stem}-{way}.db"), checkpoints=ckpt)
            for n, path, _ in snaps for way, (_, ckpt) in ways.items()}
    runs: dict[tuple[int, str], list[dict[str, float | str]]] = {k: [] for k in urls}
    loads: list[float] = []
    for _ in range(repeats):
        for n, _, fp in snaps:
            for way, (root, _) in ways.items():
                runs[(n, way)].append(child(urls[(n, way)], fp, root))
        loads.append(os.getloadavg()[0])
    # the replay with no checkpoint: one child each (from 64 journal entries on, it also
    # writes the checkpoint: what the one process that finds none pays)
    for n, path, fp in snaps:
        runs[(n, "replay")] = [child(copy_ledger(path, path.with_name(f"{path.stem}-replay.db"), checkpoints=False),
                                     fp, here)]
    print(f"{rule}: first status in a new process, sizes interleaved, {repeats} rounds; "
          f"load during the rounds {min(loads):.2f}–{max(loads):.2f}")
    for way in ("after", "before", "replay"):
        base = None
        for n, _, _ in snaps:
            got = runs.get((n, way))
            if not got:
                continue
            med = {k: statistics.median(float(r[k]) for r in got) for k in ("open", "status", "first", "wall", "import")}
            base = base or med
            spent = {str(r["spent"]) for r in got}
            print(f"{rule:8s} {n:6d} releases, {way:6s}: open {med['open'] * 1e3:7.1f} ms + status "
                  f"{med['status'] * 1e3:7.1f} ms = {med['first'] * 1e3:7.1f} ms (×{med['first'] / base['first']:5.2f})  "
                  f"child wall {med['wall'] * 1e3:6.0f} ms (×{med['wall'] / base['wall']:5.2f}; imports "
                  f"{med['import'] * 1e3:4.0f} ms)  spent {spent.pop() if len(spent) == 1 else spent}")
    for n, path, _ in snaps:
        with sqlite3.connect(path) as c:
            kinds = [f"{k}@{q}" for k, q in c.execute("SELECT kind, seq FROM ledger_checkpoints ORDER BY seq")]
        every = {str(r["spent"]) for (m, _), got in runs.items() if m == n for r in got}
        print(f"{rule:8s} {n:6d} releases: checkpoints {', '.join(kinds) or 'none'}; statuses of every way "
              f"{'agree' if len(every) == 1 else 'DIFFER'}")


def run(rule: str, sizes: list[int], folder: Path, baseline: Path | None = None, repeats: int = 5) -> None:
    url = f"sqlite:///{folder / f'ledger-{rule}.db'}"
    led = Ledger(url)
    info = led.register_dataset(f"digest-{rule}", f"bench-{rule}", 1000.0, 1e-3, rule)
    done = 0
    base: dict[str, float] = {}
    snaps: list[tuple[int, Path, str]] = []
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
        snap = folder / f"ledger-{rule}-{n}.db"
        copy_ledger(folder / f"ledger-{rule}.db", snap, checkpoints=True)
        snaps.append((n, snap, info.fingerprint))
    led.close()
    new_process_table(rule, snaps, baseline, repeats)


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
