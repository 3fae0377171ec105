"""Benchmark: the same 10-query plan through pandas, DuckDB and Spark (prints, never asserts).

Run from the repository root (a script, not collected by pytest)::

    python tests/benchmarks/bench_backends.py [--rows 1e6 1e7] [--with-5e7] [--no-spark]
        [--rows-per-person 3 --max-rows 2] [--backends duckdb] [--formats parquet]
        [--memory-limit 2GB]

Generates tables (person_id, age, income, region, sex) with DuckDB itself into a temporary
directory, as CSV and Parquet (``--rows-per-person k``: person i // k owns row i, so with
``--max-rows c`` < k every person is over the bound and contribution bounding ranks every
row: the worst case of the bounding path), then runs every backend in its own subprocess (so peak
memory, ``ru_maxrss``, is per run) and prints:

* ``aggregates``: read the data + contribution-bounding check + the exact aggregates of a
  10-query plan (pandas: load the file, then compute; DuckDB / Spark: SQL on the file;
  DuckDB issues 3 statements for these files: min/max of the integer person ids, a bitmap
  of them (nobody has 2 rows), then every aggregate in one statement);
* ``release``: the release step on top, reusing those aggregates (OpenDP measurements
  built, the spend and the answers written to a fresh SQLite ledger, noise drawn), and
  the end-to-end total;
* ``noise``: the noise draws alone (``PreparedRelease.sample`` on the computed aggregates),
  and ``noise / aggr``, their share of the aggregate time (issue #8: under 5 % at 1e7);
* the ratio of the DuckDB route to pandas load-then-compute.

Every worker is a fresh process, so the release step includes one-time start-up work
(SQLAlchemy and the ledger tables, the first OpenDP calls) that a long-running app pays once.

Spark runs ``local[*]``; its JVM start-up is reported separately, and the JVM's peak memory
(VmHWM of the JVM process, Linux only) next to the Python worker's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

QUERIES = [
    {"id": "n", "kind": "count", "mechanism": "laplace"},
    {"id": "n_female", "kind": "count", "mechanism": "discrete_laplace",
     "predicate": {"column": "sex", "op": "==", "value": "female"}},
    {"id": "income_sum", "kind": "sum", "column": "income", "mechanism": "laplace"},
    {"id": "income_mean", "kind": "mean", "column": "income", "mechanism": "laplace"},
    {"id": "region", "kind": "histogram", "column": "region", "mechanism": "discrete_gaussian"},
    {"id": "sex", "kind": "histogram", "column": "sex", "mechanism": "laplace"},
    {"id": "age_hist", "kind": "histogram", "column": "age", "mechanism": "laplace", "bins": 8},
    {"id": "age_median", "kind": "median", "column": "age", "mechanism": "exponential"},
    {"id": "income_q90", "kind": "quantile", "column": "income", "mechanism": "exponential",
     "alphas": [0.9], "candidates": 1001},
    {"id": "region_mode", "kind": "mode", "column": "region", "mechanism": "exponential"},
]
SCHEMA = {
    "version": 1,
    "relation": "add_remove",
    "privacy_unit": {"column": "person_id", "max_rows": 1},
    "salt": "bench",
    "columns": [
        {"name": "person_id", "kind": "identifier", "missing": {"action": "drop"}},
        {"name": "age", "kind": "numeric", "lower": 18, "upper": 90, "missing": {"action": "drop"}},
        {"name": "income", "kind": "numeric", "lower": 0, "upper": 200000, "missing": {"action": "drop"}},
        {"name": "region", "kind": "categorical", "missing": {"action": "drop"},
         "categories": ["North", "South", "East", "West", "Central", "Overseas"]},
        {"name": "sex", "kind": "categorical", "missing": {"action": "drop"},
         "categories": ["female", "male"]},
    ],
}


def generate(folder: Path, rows: int, per_person: int = 1) -> dict[str, Path]:
    """CSV and Parquet files of ``rows`` rows, written by DuckDB (deterministic hash data).

    Person ``i // per_person`` owns row i.
    """
    import duckdb

    stem = f"t{rows}" if per_person == 1 else f"t{rows}_p{per_person}"
    csv_path, pq_path = folder / f"{stem}.csv", folder / f"{stem}.parquet"
    if csv_path.exists() and pq_path.exists():
        return {"csv": csv_path, "parquet": pq_path}
    con = duckdb.connect()
    select = f"""
        SELECT i // {int(per_person)} AS person_id,
               (18 + hash(i) % 73)::INTEGER AS age,
               round((hash(i * 7) % 20000000) / 100.0, 2) AS income,
               ['North', 'South', 'East', 'West', 'Central'][1 + (hash(i * 3) % 5)::INTEGER] AS region,
               ['female', 'male'][1 + (hash(i * 5) % 2)::INTEGER] AS sex
        FROM range({rows}) t(i)"""
    con.execute(f"COPY ({select}) TO '{csv_path}' (HEADER)")  # bench-owned temp paths
    con.execute(f"COPY ({select}) TO '{pq_path}' (FORMAT parquet)")
    con.close()
    return {"csv": csv_path, "parquet": pq_path}


# ------------------------------------------------------------------ worker (one subprocess)
def worker(kind: str, path: Path, max_rows: int = 1, memory_limit: str | None = None) -> dict[str, Any]:
    from planner.backends import PandasBackend, close_backend
    from planner.ledger import Ledger
    from planner.loader import load_table
    from planner.queries import queries_from_list
    from planner.release import PreparedRelease, release
    from planner.schema import Schema
    from planner.sources import open_source
    from planner.workload import plan as make_plan

    schema = Schema.from_dict({  # t<rows>[_p<k>].csv
        **SCHEMA, "public_n": int(path.stem[1:].split("_")[0]),
        "privacy_unit": {"column": "person_id", "max_rows": max_rows},
    })
    qs = queries_from_list(QUERIES, schema)
    the_plan = make_plan(qs, schema, 1.0, 1e-6, "zcdp")
    out: dict[str, Any] = {}
    spark = None
    if kind == "spark":
        from planner.backends.spark_backend import get_session

        t = time.perf_counter()
        spark = get_session("local[*]")
        spark.range(1).count()
        out["jvm_start_s"] = time.perf_counter() - t
    t0 = time.perf_counter()
    if kind == "pandas":
        df = load_table(path, max_mb=1e6)
        out["load_s"] = time.perf_counter() - t0
        backend: Any = PandasBackend(df, schema)
    elif kind == "duckdb":
        from planner.backends.duckdb_backend import DuckDBBackend

        backend = DuckDBBackend(open_source(path.name), schema, memory_limit=memory_limit)
    else:
        from planner.backends.spark_backend import SparkBackend

        backend = SparkBackend(open_source(path.name), schema, spark=spark)
    if hasattr(backend, "prefetch"):
        backend.prefetch(qs)
    aggregates = backend.aggregate_all(qs)
    out["aggregates_s"] = time.perf_counter() - t0
    out["rows_kept"] = backend.rows
    computed = _Computed(schema, aggregates)  # the release reuses them (pandas would recompute)
    sample = PreparedRelease.sample

    def timed_sample(self: PreparedRelease, b: Any) -> Any:
        t = time.perf_counter()
        try:
            return sample(self, b)
        finally:
            out["noise_s"] = time.perf_counter() - t

    PreparedRelease.sample = timed_sample  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as d:
        ledger = Ledger(f"sqlite:///{d}/ledger.db")
        t1 = time.perf_counter()
        release(the_plan, schema, computed, ledger, "bench-" + path.name, "bench",  # type: ignore[arg-type]
                total_epsilon=1.0, total_delta=1e-6, rule="zcdp")
        out["release_step_s"] = time.perf_counter() - t1
        ledger.close()
    PreparedRelease.sample = sample  # type: ignore[method-assign]
    out["end_to_end_s"] = out["aggregates_s"] + out["release_step_s"]
    out["noise_share"] = out["noise_s"] / out["aggregates_s"]
    close_backend(backend)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if spark is not None:
        from pyspark import SparkContext

        gw = SparkContext._gateway
        proc = getattr(gw, "proc", None) if gw is not None else None
        if proc is not None:
            out["jvm_peak_rss_mb"] = _peak_rss_mb_of_tree(proc.pid)
        spark.stop()
    return out


class _Computed:
    """The aggregates already computed, served to the release (what ``release`` reads)."""

    def __init__(self, schema: Any, aggregates: dict[str, Any]) -> None:
        self.schema = schema
        self._aggregates = aggregates

    def aggregate(self, query: Any) -> Any:
        return self._aggregates[query.id]


def _peak_rss_mb_of_tree(pid: int) -> float:
    """Largest VmHWM (peak RSS) among a process and its descendants (Linux /proc)."""
    best = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                best = max(best, int(line.split()[1]) / 1024)
        todo.extend(int(c) for c in children)
    return best


def run(kind: str, path: Path, data_dir: Path, max_rows: int = 1,
        memory_limit: str | None = None) -> dict[str, Any]:
    env = dict(os.environ, PLANNER_DATA_DIR=str(data_dir), PYTHONWARNINGS="ignore")
    extra = ["--max-rows", str(max_rows)] + (["--memory-limit", memory_limit] if memory_limit else [])
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", kind, str(path), *extra],
        capture_output=True, text=True, env=env, timeout=3600,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout)[-400:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="*", type=float, default=[1e6, 1e7])
    ap.add_argument("--with-5e7", action="store_true", help="also 5e7 rows (about 1.3 GB of CSV)")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--rows-per-person", type=int, default=1,
                    help="rows per person in the generated tables (default 1: unique ids)")
    ap.add_argument("--max-rows", type=int, default=1,
                    help="the schema's max_rows c per person (default 1)")
    ap.add_argument("--backends", nargs="*", choices=["pandas", "duckdb", "spark"], default=None,
                    help="backends to run (default: all; --no-spark drops spark)")
    ap.add_argument("--formats", nargs="*", choices=["csv", "parquet"], default=["csv", "parquet"])
    ap.add_argument("--memory-limit", default=None, help="DuckDB memory_limit, e.g. 2GB")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temporary dir)")
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], Path(args.worker[1]), args.max_rows,
                                args.memory_limit)))
        return
    sizes = [int(r) for r in args.rows] + ([50_000_000] if args.with_5e7 else [])
    kinds = args.backends or (["pandas", "duckdb"] + ([] if args.no_spark else ["spark"]))
    if args.no_spark and "spark" in kinds:
        kinds.remove("spark")
    tmp = tempfile.TemporaryDirectory(prefix="bench-backends-")
    folder = Path(args.dir) if args.dir else Path(tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"cores: {os.cpu_count()}; data in {folder}; {args.rows_per_person} row(s) per person, "
          f"max_rows c = {args.max_rows}"
          + (f"; DuckDB memory_limit {args.memory_limit}" if args.memory_limit else ""))
    header = (f"{'rows':>10} {'format':>8} {'backend':>8} {'aggregates s':>13} {'release s':>10} "
              f"{'end-to-end s':>13} {'noise s':>8} {'noise/aggr':>10} {'peak MB':>8}  extra")
    for n in sizes:
        t = time.perf_counter()
        files = {fmt: p for fmt, p in generate(folder, n, args.rows_per_person).items()
                 if fmt in args.formats}
        sizes_mb = ", ".join(f"{fmt} {p.stat().st_size / 1e6:.0f} MB" for fmt, p in files.items())
        print(f"\n# {n:.0e} rows generated in {time.perf_counter() - t:.1f} s ({sizes_mb})")
        print(header)
        results: dict[tuple[str, str], dict[str, Any]] = {}
        for fmt, path in files.items():
            for kind in kinds:
                r = run(kind, path, folder, args.max_rows, args.memory_limit)
                results[(fmt, kind)] = r
                if "error" in r:
                    print(f"{n:>10.0e} {fmt:>8} {kind:>8}  ERROR {r['error']!r}")
                    continue
                extra = []
                extra.append(f"kept {r['rows_kept']:,} rows")
                if "load_s" in r:
                    extra.append(f"load {r['load_s']:.2f} s")
                if "jvm_start_s" in r:
                    extra.append(f"JVM start {r['jvm_start_s']:.1f} s (not included)")
                if "jvm_peak_rss_mb" in r:
                    extra.append(f"JVM peak {r['jvm_peak_rss_mb']:.0f} MB")
                print(f"{n:>10.0e} {fmt:>8} {kind:>8} {r['aggregates_s']:>13.2f} "
                      f"{r['release_step_s']:>10.2f} {r['end_to_end_s']:>13.2f} "
                      f"{r['noise_s']:>8.3f} {r['noise_share']:>10.1%} "
                      f"{r['peak_rss_mb']:>8.0f}  {', '.join(extra)}")
        for fmt in files:
            p, d = results.get((fmt, "pandas"), {}), results.get((fmt, "duckdb"), {})
            if "aggregates_s" in p and "aggregates_s" in d:
                print(f"  {fmt}: DuckDB route / pandas load-then-compute = "
                      f"{d['aggregates_s'] / p['aggregates_s']:.2f}× time, "
                      f"{d['peak_rss_mb'] / p['peak_rss_mb']:.2f}× peak memory")
    tmp.cleanup()


if __name__ == "__main__":
    main()
