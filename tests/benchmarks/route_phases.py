"""Where the release route's time goes outside the scan (prints, never asserts; issue 31).

Run from the repository root (a script, not collected by pytest)::

    python tests/benchmarks/route_phases.py --data FILE --spec PLAN.json [--repeat 3]

``bench_backends.py --dir DIR`` leaves its generated files and plans in DIR (``t<rows>.parquet``,
``plan_t<rows>_c1.json``). Two measurements, each in fresh processes:

* **imports** (``python -X importtime`` on ``planner release`` under ``cli_probe.py``): the
  import self-time of every module, grouped by owner, split at the first statement that reads
  the data (the probe's ``modules_at_first_read``): what start-up pays before the first read,
  and what is imported while the scan runs (on two cores, that CPU is taken from the scan);
* **phases**: the steps of ``release_file`` timed one by one in a child process (wall and
  process CPU, every thread): imports for the scan, scan started, the release machinery
  imported, the plan made (while the scan reads), the scan's result, a new ledger opened,
  the release recorded and sampled, closed. When "plan built" ends after the scan, planning
  is on the critical path.

Medians over ``--repeat`` runs; the load average is printed beside them. Import times are
wall times of the importing thread, inflated by load like everything else; compare shares.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("BENCH_PLANNER_ROOT") or Path(__file__).resolve().parents[2]).resolve()
PROBE = Path(__file__).with_name("cli_probe.py")

#: third-party packages reported on their own line
LIBS = ("numpy", "duckdb", "sqlalchemy", "sqlmodel", "pydantic", "pydantic_core", "opendp", "scipy",
        "pandas", "pyarrow")


def owner(module: str) -> str:
    """The group a module's import time is counted in."""
    if module.startswith(("planner.planning", "planner.privacy")):
        return "planner.planning + privacy"
    if module.startswith("planner.data"):
        return "planner.data"
    if module.startswith("planner.ledger"):
        return "planner.ledger"
    if module.startswith("planner"):
        return "planner (cli, core, release, outputs)"
    top = module.split(".")[0].lstrip("_")
    return top if top in LIBS else "standard library, site, other"


def importtime_run(data: str, spec: str, env: dict[str, str]) -> tuple[dict[str, float], dict[str, float]]:
    """One ``planner release`` under the probe with ``-X importtime``: seconds of import
    self-time per owner, before and after the first read."""
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "probe.json"
        cmd = [sys.executable, "-X", "importtime", str(PROBE), str(report), "release", "--spec", spec,
               "--data", data, "--ledger", f"sqlite:///{d}/ledger.db", "--backend", "duckdb"]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"planner release failed: {proc.stdout[-400:]} {proc.stderr[-400:]}")
        first = set(json.loads(report.read_text())["modules_at_first_read"] or ())
    before: dict[str, float] = {}
    after: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line[len("import time:"):].split("|")
        name = name.strip()
        into = before if name in first else after
        into[owner(name)] = into.get(owner(name), 0.0) + int(self_us) / 1e6
    return before, after


PHASES = r'''
import sys, tempfile, time
T0, C0 = time.perf_counter(), time.process_time()
marks = []
def mark(label): marks.append((label, time.perf_counter() - T0, time.process_time() - C0))
data, spec_path = sys.argv[1], sys.argv[2]
from planner.data.backends import BackgroundScan, close_backend
from planner.data.sources import dataset_key, open_cli_source
from planner.planning.plan_spec import build_plan, load_plan_spec
from planner.planning.statistics import plan_requests
mark("imports for the scan")
spec = load_plan_spec(spec_path)
scan = BackgroundScan("duckdb", open_cli_source(data, defer_check=True), spec.schema,
                      plan_requests(spec.queries, spec.schema))
scan.wait_reading(timeout=10)
mark("scan started (first read)")
from planner.ledger import Ledger
from planner.release import release_spec
mark("release machinery imported")
outcome = build_plan(spec)
mark("plan made")
done_before_plan = not scan._thread.is_alive()
engine = scan.result()
mark("scan's result")
key = dataset_key(engine.content_digest())
d = tempfile.mkdtemp()
ledger = Ledger(f"sqlite:///{d}/ledger.db")
mark("new ledger opened")
release_spec(spec, engine, ledger, key, "bench", outcome=outcome)
mark("released (spend, sample, store)")
ledger.close()
close_backend(engine)
mark("closed")
import json
print(json.dumps({"marks": marks, "scan_done_before_plan": done_before_plan}))
'''


def phases_run(data: str, spec: str, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", PHASES, data, spec], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"phases failed: {proc.stderr[-600:]}")
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bytecode", choices=["as-is", "cached"], default="cached",
                    help="cached: a private PYTHONPYCACHEPREFIX, warmed by one run (as an installed package)")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONWARNINGS="ignore", BENCH_PLANNER_ROOT=str(ROOT), PYTHONPATH=str(ROOT))
    cache = None
    if args.bytecode == "cached":
        cache = tempfile.TemporaryDirectory(prefix="route-phases-pyc-")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache.name
        importtime_run(args.data, args.spec, env)  # warms the cache
    print(f"planner measured: {ROOT}; data {args.data}; bytecode {args.bytecode}; "
          f"{args.repeat} run(s) each, medians")
    loads: list[float] = []
    befores: dict[str, list[float]] = {}
    afters: dict[str, list[float]] = {}
    marks: dict[str, list[tuple[float, float]]] = {}
    plan_late = 0
    for _ in range(args.repeat):
        loads.append(os.getloadavg()[0])
        b, a = importtime_run(args.data, args.spec, env)
        for k, v in b.items():
            befores.setdefault(k, []).append(v)
        for k, v in a.items():
            afters.setdefault(k, []).append(v)
        r = phases_run(args.data, args.spec, env)
        for label, w, c in r["marks"]:
            marks.setdefault(label, []).append((w, c))
        plan_late += bool(r["scan_done_before_plan"])
    print(f"load average before each round: {', '.join(f'{x:.2f}' for x in loads)}; {os.cpu_count()} cores")
    for title, groups in (("imports before the first read", befores), ("imports while the scan reads", afters)):
        print(f"\n{title} (import self-time, s):")
        total = 0.0
        for k, xs in sorted(groups.items(), key=lambda kv: -statistics.median(kv[1])):
            m = statistics.median(xs)
            total += m
            print(f"  {k:42s} {m:6.3f}")
        print(f"  {'total':42s} {total:6.3f}")
    print("\nphases of release_file (wall since start / process CPU since start, every thread):")
    prev_w = prev_c = 0.0
    for label, pairs in marks.items():
        w = statistics.median(x[0] for x in pairs)
        c = statistics.median(x[1] for x in pairs)
        print(f"  {label:34s} wall {w:6.3f} (+{w - prev_w:.3f})  cpu {c:6.3f} (+{c - prev_c:.3f})")
        prev_w, prev_c = w, c
    print(f"  the scan had finished before the plan was made in {plan_late} of {args.repeat} run(s) "
          "(then planning, not the scan, is on the critical path)")
    if cache is not None:
        cache.cleanup()


if __name__ == "__main__":
    main()
