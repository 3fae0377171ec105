"""Benchmark: the release route against hand-written DuckDB SQL and a bare scan (prints, never asserts).

Run from the repository root (a script, not collected by pytest)::

    python tests/benchmarks/bench_backends.py [--rows 1e7] [--with-5e7] [--formats csv parquet]
        [--repeat 3] [--backends pandas spark] [--rows-per-person 3 --max-rows 2]
        [--memory-limit 2GB] [--dir DIR] [--no-cli]
    python tests/benchmarks/bench_backends.py --startup-only [--baseline OTHER_CHECKOUT]
        [--rows 1e7] [--formats parquet csv] [--repeat 7]

Generates tables (person_id, age, income, region, sex) with DuckDB itself, as CSV and
Parquet (``--rows-per-person k``: person i // k owns row i, so with ``--max-rows c`` < k
every person is over the bound and contribution bounding ranks every row). Every
measurement runs in a fresh subprocess (so peak memory, ``ru_maxrss``, is per run), on the
same file, in the same run, for the benchmark's 10-query plan:

* ``bare scan``: one DuckDB statement that reads every value of every column and does
  almost nothing with it (sums of the numbers, longest text) — how fast the file can be read;
* ``hand-written``: the best DuckDB SQL a person would write by hand for the same
  aggregates, with the same clipping, contribution bounding (c = max_rows: a bitmap proof
  that nobody has more than c rows, else ``QUALIFY row_number() … <= c``) and NULL/NaN/±inf
  rules; two shapes, one statement with ``GROUPING SETS`` and one statement per aggregate
  (per-value counts binned in Python where a column has few values), the faster is "best".
  Its sums are plain float sums (the route's are exact): if anything the baseline is
  favoured. Its aggregates are compared with the route's (printed: agree / DIFFER);
* ``route in-process``: what ``planner release`` computes before the ledger, timed from
  opening the source to the aggregates in hand (backend set-up, the data check, every
  aggregate of the plan, and the dataset's content digest where the backend has one);
* ``route CLI``: ``python -m planner release --spec PLAN.json --data FILE`` end to end (a
  fresh SQLite ledger), wall time and the child's peak RSS; then the same command under a
  probe that reports **start-up**: the time from spawning the process to the first
  statement that reads the data, plus any pass over the file to fingerprint it;
* optionally ``pandas`` (load, then compute) and ``spark`` (local[*]) in-process.

``--startup-only`` measures the start-up alone: the probe's runs alternate between this
checkout and ``--baseline`` (e.g. ``git archive main | tar -x -C /tmp/base``), run by run,
so that both see the same load, each with and without a bytecode cache (see below); the
medians, the spread and the load average are printed.

Bytecode. With ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__`` (as in a fresh
editable checkout on this machine), every start compiles the planner's own modules from
source, about 0.1 s of the start-up. An installed package has its bytecode (pip compiles
it on install), so start-up is printed both ways: "as run here" (the environment as it is)
and "bytecode cached" (``PYTHONPYCACHEPREFIX`` pointing at a private cache, warmed by one
run first, never written into the checkout).

The release route's CLI line is measured both ways too: "route, CLI end to end" with the
environment's bytecode setting, "route, CLI, bytecode cached" with a private cache warmed
by one run (how an installed package starts).

Ratios printed for every (rows, format): route CLI ÷ hand-written (goal ≤ 1.5), route
peak RSS ÷ hand-written peak RSS (goal ≤ 1), in-process aggregate ÷ bare scan (goal ≤ 3),
start-up (goal ≤ 0.5 s). Each line also prints the CPU seconds the measurement used (every
thread of the process; the CLI's from ``wait4``), and the CPU ratios aggregate ÷ bare scan
and aggregate ÷ hand-written: on a machine shared with other work, CPU time is far less
disturbed than wall time. Times are the median of ``--repeat`` runs (the machine may be
loaded by others; the minimum is printed too). Each file is read once before its first
measurement, so every measurement reads it from the page cache.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: The checkout whose ``planner`` is measured: this one, or ``$BENCH_PLANNER_ROOT`` (e.g. an
#: older checkout, for a before/after table run by the same benchmark script).
ROOT = Path(os.environ.get("BENCH_PLANNER_ROOT") or Path(__file__).resolve().parents[2]).resolve()

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
REGIONS = ["North", "South", "East", "West", "Central", "Overseas"]
SEXES = ["female", "male"]
SCHEMA = {
    "version": 1,
    "relation": "add_remove",
    "privacy_unit": {"column": "person_id", "max_rows": 1},
    "salt": "bench",
    "columns": [
        {"name": "person_id", "kind": "identifier", "missing": {"action": "drop"}},
        {"name": "age", "kind": "numeric", "lower": 18, "upper": 90, "missing": {"action": "drop"}},
        {"name": "income", "kind": "numeric", "lower": 0, "upper": 200000, "missing": {"action": "drop"}},
        {"name": "region", "kind": "categorical", "missing": {"action": "drop"}, "categories": REGIONS},
        {"name": "sex", "kind": "categorical", "missing": {"action": "drop"}, "categories": SEXES},
    ],
}


def schema_dict(path: Path, max_rows: int) -> dict[str, Any]:
    """The benchmark schema for a generated file ``t<rows>[_p<k>].<ext>``."""
    return {**SCHEMA, "public_n": int(path.stem[1:].split("_")[0]),
            "privacy_unit": {"column": "person_id", "max_rows": max_rows}}


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
    con.execute("SET enable_progress_bar = false")
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


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _duck(memory_limit: str | None) -> Any:
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute("SET preserve_insertion_order = false")
    if memory_limit:
        con.execute("SET memory_limit = $m", {"m": memory_limit})
    return con


def _from(path: Path) -> str:
    """The hand-written source: typed Parquet, or CSV with DuckDB's own type detection."""
    if path.suffix == ".parquet":
        return f"read_parquet('{path}')"
    return f"read_csv('{path}', header = true)"


# ------------------------------------------------------------------ workers (one subprocess each)
def worker_scan(path: Path, memory_limit: str | None) -> dict[str, Any]:
    """One statement reading every value of every column (sums of numbers, longest text)."""
    con = _duck(memory_limit)
    t, c = time.perf_counter(), time.process_time()
    con.execute(
        f"SELECT sum(person_id), sum(age), sum(income), max(length(region)), max(length(sex)) "
        f"FROM {_from(path)}"
    ).fetchall()
    return {"s": time.perf_counter() - t, "cpu_s": time.process_time() - c, "peak_mb": _peak_mb()}


def _grids() -> dict[str, Any]:
    """Edges / candidate grids of the plan, as the planner defines them (numpy only)."""
    import numpy as np

    return {
        "age_edges": np.linspace(18, 90, 9),
        "age_grid": np.linspace(18, 90, 1001),
        "income_grid": np.linspace(0, 200000, 1001),
    }


HAND_SHAPES = ("grouping-sets", "per-aggregate", "one-pass")


def hand_finish(g: dict[str, Any], scal: tuple[Any, ...], region: dict[int, int], sex: dict[int, int],
                age_values: dict[int, int], income_keys: dict[int, int]) -> dict[str, Any]:
    """The hand-written job's aggregates from its grouped counts (``g``: :func:`_grids`): the
    same finishing step for every engine's hand-written query (DuckDB here, Spark SQL in
    ``bench_spark.py``)."""
    import numpy as np

    ages = np.asarray(list(age_values), dtype=np.float64)
    counts = np.asarray(list(age_values.values()), dtype=np.int64)
    idx = np.minimum(np.searchsorted(g["age_edges"], ages, side="right") - 1, 7)
    age_hist = np.bincount(idx, weights=counts, minlength=8).astype(np.int64)
    med = np.bincount(np.searchsorted(g["age_grid"], ages, side="left"), weights=counts,
                      minlength=1001).astype(np.int64)
    q90 = np.zeros(1001, dtype=np.int64)
    for k, c in income_keys.items():
        q90[k] += c
    n, n_sex, n_female, s, n_income = scal
    return {
        "n": int(n), "n_female": [int(n_female), int(n - n_sex)],
        "income_sum": [float(s), int(n_income)],
        "region": [region.get(i, 0) for i in range(len(REGIONS))],
        "sex": [sex.get(i, 0) for i in range(2)],
        "age_hist": age_hist.tolist(), "age_median": med.tolist(), "income_q90": q90.tolist(),
    }


def worker_handwritten(path: Path, shape: str, max_rows: int, memory_limit: str | None) -> dict[str, Any]:
    """The same aggregates as hand-written DuckDB SQL, in one of :data:`HAND_SHAPES`,
    timed end to end (the person check included)."""

    con = _duck(memory_limit)
    src = _from(path)
    g = _grids()
    out: dict[str, Any] = {}

    def kept_source() -> str:
        # contribution bounding: prove nobody has more than c rows (bitmap of the ids),
        # else keep c rows per person in a hash order
        lo, hi, n = con.execute(f"SELECT min(person_id), max(person_id), count(*) FROM {src}").fetchone()
        if max_rows == 1:
            distinct = con.execute(
                f"SELECT bit_count(bitstring_agg(person_id, {int(lo)}, {int(hi)})) FROM {src}"
            ).fetchone()[0]
            if distinct == n:
                return src
        else:
            over = con.execute(
                f"SELECT count(*) FROM (SELECT person_id FROM {src} GROUP BY person_id "
                f"HAVING count(*) > {max_rows})"
            ).fetchone()[0]
            if over == 0:
                return src
        return (f"(SELECT * FROM {src} QUALIFY row_number() OVER (PARTITION BY person_id "
                f"ORDER BY md5(concat_ws('|', age, income, region, sex))) <= {max_rows})")

    def cells(kept: str) -> str:
        cats = " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(REGIONS))
        return f"""SELECT
            CASE WHEN age IS NOT NULL AND NOT isnan(age) AND NOT isinf(age)
                 THEN least(greatest(age::DOUBLE, 18), 90) END AS age,
            CASE WHEN income IS NOT NULL AND NOT isnan(income) AND NOT isinf(income)
                 THEN least(greatest(income::DOUBLE, 0), 200000) END AS income,
            CASE trim(region) {cats} END AS region,
            CASE trim(sex) WHEN 'female' THEN 0 WHEN 'male' THEN 1 END AS sex,
            coalesce(trim(sex), '') = '' AS sex_missing
          FROM {kept}"""

    scal_sql = "count(*), count_if(NOT sex_missing), count_if(sex = 0), sum(income), count(income)"
    # income quantile grid: linspace(0, 200000, 1001) has step 200 (exactly i * 200.0):
    # the smallest candidate >= x is ceil(x / 200)
    ikey = "CAST(ceil(income / 200) AS BIGINT)"
    t, c0 = time.perf_counter(), time.process_time()
    kept = kept_source()
    if shape == "grouping-sets":  # one statement: GROUPING SETS next to the scalars
        rows = con.execute(f"""WITH c AS ({cells(kept)})
            SELECT NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, {scal_sql} FROM c
            UNION ALL
            SELECT region, sex, CAST(age AS BIGINT), {ikey}, count(*), NULL, NULL, NULL, NULL FROM c
            GROUP BY GROUPING SETS ((region), (sex), (CAST(age AS BIGINT)), ({ikey}))""").fetchall()
        parts: list[dict[int, int]] = [{}, {}, {}, {}]
        scal: tuple[Any, ...] = ()
        for r in rows:
            which = [j for j in range(4) if r[j] is not None]
            if not which and r[5] is not None:
                scal = tuple(r[4:])
            elif which:
                parts[which[0]][int(r[which[0]])] = int(r[4])
        res = hand_finish(g, scal, *parts)
    elif shape == "per-aggregate":  # one statement per aggregate (only the columns each needs)
        c = cells(kept)
        scal = con.execute(f"WITH c AS ({c}) SELECT {scal_sql} FROM c").fetchone()

        def grouped(expr: str, where: str) -> dict[int, int]:
            return {int(k): int(v) for k, v in con.execute(
                f"WITH c AS ({c}) SELECT {expr}, count(*) FROM c WHERE {where} GROUP BY 1").fetchall()}

        res = hand_finish(g, scal, grouped("region", "region IS NOT NULL"), grouped("sex", "sex IS NOT NULL"),
                     grouped("CAST(age AS BIGINT)", "age IS NOT NULL"),
                     grouped(ikey, "income IS NOT NULL"))
    else:  # one statement, one aggregate: counts per key as histograms (CSV: of the declared keys)
        csv = path.suffix == ".csv"

        def hist(expr: str, lo: int, hi: int) -> str:
            return f"histogram_exact({expr}, range({lo}, {hi + 1}))" if csv else f"histogram({expr})"

        row = con.execute(f"""SELECT {scal_sql}, {hist('region', 0, 5)}, {hist('sex', 0, 1)},
            {hist('CAST(age AS BIGINT)', 18, 90)}, {hist(ikey, 0, 1000)} FROM ({cells(kept)})""").fetchone()
        maps = [{int(k): int(v) for k, v in (m or {}).items() if k is not None and v and k < 1 << 31}
                for m in row[5:]]
        res = hand_finish(g, tuple(row[:5]), *maps)
    out["s"] = time.perf_counter() - t
    out["cpu_s"] = time.process_time() - c0
    out["aggregates"] = res
    out["peak_mb"] = _peak_mb()
    return out


def _agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Counts equal; float sums equal to 1e-9 relative (the hand-written sums are float sums)."""
    for k in a:
        x, y = a[k], b.get(k)
        if k == "income_sum":
            if x[1] != y[1] or abs(x[0] - y[0]) > 1e-9 * max(1.0, abs(x[0])):
                return False
        elif x != y:
            return False
    return True


def _route_aggregates(aggs: dict[str, Any]) -> dict[str, Any]:
    """The route's aggregates in the hand-written worker's shape."""
    n = aggs["n"]
    nf = aggs["n_female"]
    s = aggs["income_sum"]
    return {
        "n": int(n.value), "n_female": [int(nf.value), int(nf.dropped)],
        "income_sum": [float(s.value), int(s.n)],
        "region": list(aggs["region"].counts), "sex": list(aggs["sex"].counts),
        "age_hist": list(aggs["age_hist"].counts), "age_median": list(aggs["age_median"].counts),
        "income_q90": list(aggs["income_q90"].counts),
    }


def worker_route(kind: str, path: Path, max_rows: int, memory_limit: str | None) -> dict[str, Any]:
    """What ``planner release`` computes before the ledger, in process (imports not timed)."""
    from planner.data.backends import check_backend, close_backend, make_backend
    from planner.data.schema import Schema
    from planner.data.sources import open_cli_source
    from planner.planning.queries import queries_from_list

    schema = Schema.from_dict(schema_dict(path, max_rows))
    qs = queries_from_list(QUERIES, schema)
    out: dict[str, Any] = {}
    spark = None
    if kind == "spark":
        from planner.data.backends.spark_backend import get_session

        t = time.perf_counter()
        spark = get_session("local[*]")
        spark.range(1).count()
        out["jvm_start_s"] = time.perf_counter() - t
    if memory_limit:
        os.environ["PLANNER_DUCKDB_MEMORY_LIMIT"] = memory_limit
    t0, c0 = time.perf_counter(), time.process_time()
    try:  # the route of `planner release`: one pass for aggregates, report and digest
        from planner.data.backends import BackgroundScan

        try:  # as planner release opens it: a CSV's whole-file checks run during the scan
            source = open_cli_source(path, defer_check=True)
        except TypeError:  # a checkout from before the deferred check (a --baseline)
            source = open_cli_source(path)
        try:  # aggregates as requests (issue 28): the planning layer asks, the backend evaluates
            from planner.planning.statistics import exact_aggregates, plan_requests

            engine = BackgroundScan(kind, source, schema, plan_requests(qs, schema)).result()
            check_backend(engine)
            aggregates = exact_aggregates(engine, qs)
        except ImportError:  # a checkout from before: the backend took the queries
            engine = BackgroundScan(kind, source, schema, qs).result()
            check_backend(engine)
            aggregates = engine.aggregate_all(qs)
        out["digest_rows"] = engine.content_digest().rows
    except ImportError:  # the route before issue #17: check, then one statement for the plan
        engine = make_backend(kind, open_cli_source(path), schema)
        check_backend(engine)
        prefetch = getattr(engine, "prefetch", None)
        if callable(prefetch):
            prefetch(qs)
        aggregates = engine.aggregate_all(qs)
    out["s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - c0
    out["passes"] = getattr(engine, "passes", None)
    out["rows_kept"] = engine.rows
    out["aggregates"] = _route_aggregates(aggregates)
    close_backend(engine)
    out["peak_mb"] = _peak_mb()
    if spark is not None:
        from pyspark import SparkContext

        gw = SparkContext._gateway
        proc = getattr(gw, "proc", None) if gw is not None else None
        if proc is not None:
            out["jvm_peak_rss_mb"] = _peak_rss_mb_of_tree(proc.pid)
        spark.stop()
    return out


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


# ------------------------------------------------------------------ the CLI, and its start-up probe
def write_plan(folder: Path, path: Path, max_rows: int) -> Path:
    spec = folder / f"plan_{path.stem}_c{max_rows}.json"
    spec.write_text(json.dumps({
        "schema": schema_dict(path, max_rows),
        "budget": {"epsilon": 1.0, "delta": 1e-6, "composition": "zcdp"},
        "lifetime": {"epsilon": 10.0, "delta": 1e-5},  # a fresh ledger each run: set once
        "queries": QUERIES,
        "dataset_name": "bench",
    }))
    return spec


def run_cli(spec: Path, path: Path, probe: bool, memory_limit: str | None, *, root: Path = ROOT,
            pycache: Path | None = None) -> dict[str, Any]:
    """``python -m planner release`` in a child process: wall time, peak RSS (wait4), and with
    ``probe`` the start-up report of ``cli_probe.py``. ``root``: the checkout measured;
    ``pycache``: a private bytecode cache (``PYTHONPYCACHEPREFIX``), else the environment's
    bytecode setting as it is."""
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "probe.json"
        env = dict(os.environ, PYTHONWARNINGS="ignore", BENCH_PLANNER_ROOT=str(root))
        env.pop("PLANNER_DUCKDB_MEMORY_LIMIT", None)
        if pycache is not None:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(pycache)
        if memory_limit:
            env["PLANNER_DUCKDB_MEMORY_LIMIT"] = memory_limit
        cli = ["release", "--spec", str(spec), "--data", str(path), "--ledger",
               f"sqlite:///{d}/ledger.db", "--backend", "duckdb"]
        cmd = ([sys.executable, str(Path(__file__).with_name("cli_probe.py")), str(report), *cli] if probe
               else [sys.executable, "-m", "planner", *cli])
        out_f, err_f = Path(d) / "stdout", Path(d) / "stderr"
        with out_f.open("wb") as so, err_f.open("wb") as se:
            t0 = time.time()
            proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=so, stderr=se)
            _, status, usage = os.wait4(proc.pid, 0)  # the child's own peak RSS
            wall = time.time() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            return {"error": err_f.read_text(errors="replace")[-600:]}
        stdout = out_f.read_text()
        out: dict[str, Any] = {"s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
                               "peak_mb": usage.ru_maxrss / 1024}
        res = json.loads(stdout)
        out["status"] = res.get("status")
        if probe:
            r = json.loads(report.read_text())
            first = r.get("first_scan")
            out["startup_s"] = (first - t0) if first is not None else None
            out["fingerprint_s"] = r.get("fingerprint_s", 0.0)
            if r.get("first_scan_cpu") is not None:
                out["startup_cpu_s"] = r["first_scan_cpu"]
            out["heavy_at_first_read"] = sorted({m.split(".")[0] for m in r.get("modules_at_first_read") or ()}
                                                & set(HEAVY))
        return out


#: libraries the start-up should not need before the first read (printed when loaded)
HEAVY = ("pyarrow", "pandas", "scipy", "sqlalchemy", "sqlmodel", "opendp", "polars", "sklearn")


def startup_only(files: dict[str, Path], folder: Path, args: argparse.Namespace) -> None:
    """Start-up of this checkout and of ``--baseline``, alternating run by run, as run here
    and with a bytecode cache; medians (min–max) and the load average during the runs."""
    roots = {"this": ROOT}
    if args.baseline:
        roots["baseline"] = Path(args.baseline).resolve()
    caches = {name: folder / f"pycache-{name}" for name in roots}
    modes = {"as run here": False, "bytecode cached": True}
    for path in files.values():
        spec = write_plan(folder, path, args.max_rows)
        for name, root in roots.items():  # warm the page cache and the bytecode caches
            run_cli(spec, path, True, args.memory_limit, root=root, pycache=caches[name])
        got: dict[tuple[str, str], list[float]] = {(n, m): [] for n in roots for m in modes}
        heavy: dict[str, set[str]] = {n: set() for n in roots}
        loads: list[float] = []
        for i in range(args.repeat):
            order = list(roots.items()) if i % 2 == 0 else list(roots.items())[::-1]
            for mode, cached in modes.items():
                for name, root in order:
                    loads.append(os.getloadavg()[0])
                    r = run_cli(spec, path, True, args.memory_limit, root=root,
                                pycache=caches[name] if cached else None)
                    if "error" in r or r.get("startup_s") is None:
                        print(f"  {name}, {mode}: ERROR {r.get('error', r)!r}")
                        continue
                    got[(name, mode)].append(r["startup_s"] + r["fingerprint_s"])
                    heavy[name] |= set(r["heavy_at_first_read"])
        print(f"\n## start-up, {path.name} ({path.stat().st_size / 1e6:.0f} MB), {args.repeat} alternating "
              f"run(s) each; load average during the runs: median {statistics.median(loads):.2f} "
              f"(min {min(loads):.2f}, max {max(loads):.2f}), {os.cpu_count()} cores")
        for (name, mode), xs in got.items():
            if xs:
                print(f"  {name:8s} {mode:16s} median {statistics.median(xs):.3f} s "
                      f"(min {min(xs):.3f}, max {max(xs):.3f})  [{roots[name]}]")
        for name in roots:
            print(f"  {name}: heavy libraries loaded at the first read: {sorted(heavy[name]) or 'none'}")
        if "baseline" in roots:
            for mode in modes:
                a, b = got[("this", mode)], got[("baseline", mode)]
                if a and b:
                    print(f"  {mode}: this ÷ baseline {statistics.median(a) / statistics.median(b):.2f}× "
                          "(goal: start-up ≤ 0.5 s)")




# ------------------------------------------------------------------ driver
def run_worker(args: list[str]) -> dict[str, Any]:
    """One worker in a fresh process; ``process_s`` is the process's wall time from spawn to
    exit (Python's start, the worker's imports, the work): for a hand-written worker, the
    "fresh process" side of issue 31's end-to-end ratio."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("PLANNER_DUCKDB_MEMORY_LIMIT", None)
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, __file__, "--worker", *args], stdout=so, stderr=se,
                                env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own CPU time
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        so.seek(0)
        se.seek(0)
        stdout, stderr = so.read().decode(errors="replace"), se.read().decode(errors="replace")
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (stderr or stdout)[-600:]}
    result: dict[str, Any] = json.loads(lines[-1])
    result["process_s"] = wall
    result["process_cpu_s"] = usage.ru_utime + usage.ru_stime
    return result


def repeated(n: int, fn: Any) -> dict[str, Any]:
    """Median (and min) over n runs of every timing key; the last run's other values."""
    return _merge([fn() for _ in range(n)])


def interleaved(n: int, jobs: dict[str, Any]) -> dict[str, Any]:
    """Run every job once per round, ``n`` rounds, and merge each job's runs as
    :func:`repeated` does; ``loads``: the 1-minute load average before each round."""
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in jobs}
    loads: list[float] = []
    for _ in range(n):
        loads.append(os.getloadavg()[0])
        for k, fn in jobs.items():
            runs[k].append(fn())
    out: dict[str, Any] = {k: _merge(v) for k, v in runs.items()}
    out["loads"] = loads
    return out


def _merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    bad = [r for r in runs if "error" in r]
    if bad:
        return bad[0]
    out = dict(runs[-1])
    for k, v in runs[-1].items():
        if isinstance(v, float) and (k.endswith("_s") or k == "s"):
            vals = [r[k] for r in runs if r.get(k) is not None]
            out[k] = statistics.median(vals)
            out[k + "_min"] = min(vals)
    out["peak_mb"] = max(r["peak_mb"] for r in runs)
    return out


def _warm(path: Path) -> None:
    """Read the file once, so that it is in the page cache before the first measurement
    (with ``--repeat 1``, a bare scan that read a 1.7 GB file from disk made the
    aggregate ÷ scan ratio look better than it is)."""
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="*", type=float, default=[1e7])
    ap.add_argument("--with-5e7", action="store_true", help="also 5e7 rows (1.7 GB of CSV)")
    ap.add_argument("--formats", nargs="*", choices=["csv", "parquet"], default=["parquet", "csv"])
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (median printed)")
    ap.add_argument("--backends", nargs="*", choices=["pandas", "spark"], default=[],
                    help="also time these backends in process")
    ap.add_argument("--rows-per-person", type=int, default=1,
                    help="rows per person in the generated tables (default 1: unique ids)")
    ap.add_argument("--max-rows", type=int, default=1, help="the schema's max_rows c per person")
    ap.add_argument("--memory-limit", default=None, help="DuckDB memory_limit, e.g. 2GB")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI runs")
    ap.add_argument("--hand-shapes", nargs="*", choices=HAND_SHAPES, default=list(HAND_SHAPES),
                    help="hand-written shapes to run (the fastest is the baseline)")
    ap.add_argument("--startup-only", action="store_true",
                    help="measure only the CLI's start-up (alternating with --baseline, if given)")
    ap.add_argument("--baseline", default=None,
                    help="with --startup-only: another checkout to measure in the same run")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temporary dir)")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, path = args.worker[0], Path(args.worker[1])
        ml = args.memory_limit
        if kind == "scan":
            res = worker_scan(path, ml)
        elif kind.startswith("hand:"):
            res = worker_handwritten(path, kind[5:], args.max_rows, ml)
        else:
            res = worker_route(kind, path, args.max_rows, ml)
        print(json.dumps(res))
        return
    sizes = [int(r) for r in args.rows] + ([50_000_000] if args.with_5e7 else [])
    tmp = tempfile.TemporaryDirectory(prefix="bench-backends-")
    folder = Path(args.dir) if args.dir else Path(tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    extra = ["--max-rows", str(args.max_rows)] + (
        ["--memory-limit", args.memory_limit] if args.memory_limit else [])
    print(f"planner measured: {ROOT}; load average {os.getloadavg()[0]:.2f}")
    print(f"cores: {os.cpu_count()}; data in {folder}; {args.rows_per_person} row(s) per person, "
          f"max_rows c = {args.max_rows}; median of {args.repeat} run(s) (min in brackets)"
          + (f"; DuckDB memory_limit {args.memory_limit}" if args.memory_limit else ""))
    summary: list[str] = []
    for n in sizes:
        t = time.perf_counter()
        files = {fmt: p for fmt, p in generate(folder, n, args.rows_per_person).items()
                 if fmt in args.formats}
        print(f"\n# {n:.0e} rows ready in {time.perf_counter() - t:.1f} s")
        if args.startup_only:
            startup_only(files, folder, args)
            continue
        for fmt in args.formats:
            path = files[fmt]
            mb = path.stat().st_size / 1e6
            print(f"\n## {n:.0e} rows {fmt} ({mb:.0f} MB)")
            _warm(path)  # every measurement reads from the page cache, the first one too
            # interleaved (issue 31): each round runs every measurement once, so that all of
            # them see the same load; medians over the rounds
            jobs: dict[str, Any] = {"scan": lambda p=path: run_worker(["scan", str(p), *extra])}
            for sh in args.hand_shapes:
                jobs[f"hand:{sh}"] = lambda p=path, sh=sh: run_worker([f"hand:{sh}", str(p), *extra])
            jobs["route"] = lambda p=path: run_worker(["duckdb", str(p), *extra])
            cache = folder / "pycache-route"
            if not args.no_cli:
                spec = write_plan(folder, path, args.max_rows)
                # as an installed package runs: its bytecode compiled once (pip does it on install)
                run_cli(spec, path, False, args.memory_limit, pycache=cache)  # warms the cache
                jobs["cli"] = lambda s=spec, p=path: run_cli(s, p, False, args.memory_limit)
                jobs["cli_cached"] = lambda s=spec, p=path, c=cache: run_cli(
                    s, p, False, args.memory_limit, pycache=c)
                jobs["probe"] = lambda s=spec, p=path: run_cli(s, p, True, args.memory_limit)
            got = interleaved(args.repeat, jobs)
            scan = got["scan"]
            hands = {sh: got[f"hand:{sh}"] for sh in args.hand_shapes}
            ok_hands = {sh: r for sh, r in hands.items() if "error" not in r}
            hand = (min(ok_hands.values(), key=lambda r: r["s"]) if ok_hands
                    else next(iter(hands.values())))
            route = got["route"]
            others = {k: repeated(1, lambda p=path, k=k: run_worker([k, str(p), *extra]))
                      for k in args.backends}
            cli: dict[str, Any] = got.get("cli", {})
            cli_cached: dict[str, Any] = got.get("cli_cached", {})
            probe: dict[str, Any] = got.get("probe", {})
            loads = got["loads"]

            def line(label: str, r: dict[str, Any], key: str = "s", cpu_key: str = "cpu_s") -> None:
                if "error" in r:
                    print(f"  {label:34s} ERROR {r['error']!r}")
                    return
                mn = f" [{r[key + '_min']:.2f}]" if key + "_min" in r else ""
                cpu = f"  cpu {r[cpu_key]:6.2f} s" if cpu_key in r else ""
                print(f"  {label:34s} {r[key]:7.2f} s{mn:9s} peak {r['peak_mb']:6.0f} MB{cpu}")

            print(f"  load average before each round: {', '.join(f'{x:.2f}' for x in loads)}")
            line("bare scan", scan)
            for sh, r in hands.items():
                line(f"hand-written, {sh}", r)
            if "error" not in hand:
                line("hand-written best, fresh process", hand, "process_s", "process_cpu_s")
            hand_s = hand["s"] if "error" not in hand else float("nan")
            if len({json.dumps(r["aggregates"]) for r in ok_hands.values()}) > 1 and not all(
                _agree(r["aggregates"], hand["aggregates"]) for r in ok_hands.values()
            ):
                print("  !! the hand-written shapes DIFFER")
            line("route, in-process aggregate", route)
            for k, r in others.items():
                line(f"{k}, in-process aggregate", r)
            if "error" not in route and "error" not in hand:
                agree = _agree(route["aggregates"], hand["aggregates"])
                print(f"  route and hand-written aggregates {'agree' if agree else 'DIFFER'}"
                      + (f"; route digest over {route['digest_rows']:,} rows" if "digest_rows" in route else ""))
            if cli:
                line("route, CLI end to end", cli)
            if cli_cached:
                line("route, CLI, bytecode cached", cli_cached)
            ratios = []
            e2e = agg = None
            if cli and "error" not in cli and "error" not in hand:
                # issue 31: a fresh process each side (Python's start and imports included)
                e2e = cli["s"] / hand["process_s"]
                ratios.append(f"#31 end to end: CLI / hand-written fresh process {e2e:.2f}× (goal ≤ 1.5); "
                              f"CPU {cli['cpu_s']:.2f} / {hand['process_cpu_s']:.2f} s = "
                              f"{cli['cpu_s'] / hand['process_cpu_s']:.2f}×")
            if "error" not in route and "error" not in hand:
                agg = route["s"] / hand_s
                ratios.append(f"#31 in-process aggregate (person check and content identity included) / "
                              f"hand-written query {agg:.2f}× (goal ≤ 1.5); CPU "
                              f"{route['cpu_s'] / hand['cpu_s']:.2f}×")
            if cli and "error" not in cli and "error" not in hand:
                cached = (f"; bytecode cached {cli_cached['s'] / hand_s:.2f}×, peak "
                          f"{cli_cached['peak_mb'] / hand['peak_mb']:.2f}×"
                          if cli_cached and "error" not in cli_cached else "")
                ratios.append(f"CLI / hand-written {cli['s'] / hand_s:.2f}× (goal ≤ 1.5){cached}")
                ratios.append(f"CLI peak / hand-written peak {cli['peak_mb'] / hand['peak_mb']:.2f}× (goal ≤ 1)")
            if "error" not in route and "error" not in scan:
                ratios.append(f"in-process aggregate / bare scan {route['s'] / scan['s']:.2f}× (goal ≤ 3)")
                if "cpu_s" in route and "cpu_s" in scan and "cpu_s" in hand:
                    # CPU seconds (every thread) are far less disturbed by other load than wall time
                    ratios.append(f"CPU time: aggregate / bare scan {route['cpu_s'] / scan['cpu_s']:.2f}×, "
                                  f"aggregate / hand-written {route['cpu_s'] / hand['cpu_s']:.2f}×")
            su = None
            if probe and "error" not in probe and probe.get("startup_s") is not None:
                su = probe["startup_s"] + probe["fingerprint_s"]
                ratios.append(f"start-up {su:.2f} s = {probe['startup_s']:.2f} s to the first read "
                              f"+ {probe['fingerprint_s']:.2f} s fingerprinting (#31 goal ≤ 0.35; bytecode as "
                              f"the environment has it, see --startup-only); heavy libraries loaded at the "
                              f"first read: {probe.get('heavy_at_first_read') or 'none'}"
                              + (f"; CPU to the first read {probe['startup_cpu_s']:.2f} s (load-robust; "
                                 "the interpreter's start included)" if "startup_cpu_s" in probe else ""))
            elif probe:
                print(f"  probe: {probe}")
            for r in ratios:
                print("  " + r)
            if cli and "error" not in cli and "error" not in hand:
                summary.append(
                    f"| {n:.0e} {fmt} ({mb:.0f} MB) | {cli['s']:.2f} s, {cli['peak_mb']:.0f} MB "
                    f"| {hand['process_s']:.2f} s ({hand_s:.2f} s query), {hand['peak_mb']:.0f} MB "
                    f"| {'' if e2e is None else f'{e2e:.2f}×'} "
                    f"| {route['s']:.2f} s | {'' if agg is None else f'{agg:.2f}×'} "
                    f"| {'' if su is None else f'{su:.2f} s'} | {statistics.median(loads):.1f} |"
                )
    if summary:
        print("\n| table | route CLI end to end (wall, peak RSS) | best hand-written DuckDB, fresh process "
              "(wall, query, peak RSS) | end to end ratio | route in-process aggregate | aggregate ÷ "
              "hand-written query | start-up | load |")
        print("|---|---|---|---|---|---|---|---|")
        for s in summary:
            print(s)
    tmp.cleanup()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
