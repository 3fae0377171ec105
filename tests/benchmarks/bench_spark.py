"""Benchmark: the Spark route on a standalone cluster against a hand-written Spark SQL job
(prints, never asserts; issue #31).

Run from the repository root (a script, not collected by pytest)::

    python tests/benchmarks/bench_spark.py [--rows 1e7] [--repeat 3] [--master spark://HOST:PORT]
        [--worker-memory 4g] [--executor-memory 3g] [--cores 2] [--dir DIR] [--out FILE]

Without ``--master`` it starts its own master and worker on 127.0.0.1
(``tests/spark_cluster.py``) and stops them at the end. The table is the one of
``bench_backends.py`` (person_id, age, income, region, sex; one row per person, written as
Parquet by DuckDB), and so is the plan (10 statistics: counts, a sum, a mean, three
histograms, a median, a 0.9-quantile over 1,001 candidates, a mode). One driver process
(this one) and one Spark session on the cluster serve every measurement, alternating run
by run so both sides see the same load:

* ``hand-written``: one Spark SQL job a person would write for the same aggregates — the
  person check (``count(DISTINCT person_id) = count(*)``: nobody over c = 1 row), then one
  statement with ``GROUPING SETS`` for the scalars and the per-key counts (region, sex,
  whole ages, the income candidate index), clipped and NULL/NaN/±inf-dropped as the
  schema says; the histograms, the median's and the quantile's candidate counts are
  binned from the per-key counts in Python. Its sums are plain float sums (the route's
  are exact), so if anything it is favoured. Its aggregates are compared with the route's;
* ``route``: what ``planner release --backend spark`` computes before the ledger, timed
  from opening the source to the aggregates in hand: backend set-up (the file's schema),
  the person check, every aggregate of the plan and — as the release computes it, in the
  same background scan — the dataset's content digest that keys the ledger ("route as
  released"); "route, aggregates only" is the same backend asked for the aggregates alone.

After the timed runs the Spark route's content digest is compared with DuckDB's digest of the
same file (equal or not is printed, never the digest: it is private).

Ratios printed: route as released ÷ hand-written (goal ≤ 1.5) and aggregates only ÷ hand-written,
medians of ``--repeat`` runs with the minimum beside them, with the 1-minute load average
before and after.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import bench_backends as bb  # noqa: E402  (the table, the plan, the grids, the comparison)

from tests import spark_cluster  # noqa: E402


def handwritten(spark: Any, path: Path) -> dict[str, Any]:
    """The same aggregates as one hand-written Spark SQL job (after the person check)."""

    g = bb._grids()
    src = f"parquet.`{path}`"
    t0 = time.perf_counter()
    n_rows, n_people = spark.sql(f"SELECT count(*), count(DISTINCT person_id) FROM {src}").collect()[0]
    if n_rows != n_people:  # pragma: no cover - the generated table has one row per person
        raise SystemExit("the generated table has a person with two rows; the hand-written job assumes c = 1")
    cats = " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(bb.REGIONS))
    cells = f"""SELECT
        CASE WHEN age IS NOT NULL AND NOT isnan(age) AND abs(age) != double('inf')
             THEN least(greatest(CAST(age AS DOUBLE), 18D), 90D) END AS age,
        CASE WHEN income IS NOT NULL AND NOT isnan(income) AND abs(income) != double('inf')
             THEN least(greatest(CAST(income AS DOUBLE), 0D), 200000D) END AS income,
        CASE trim(region) {cats} END AS region,
        CASE trim(sex) WHEN 'female' THEN 0 WHEN 'male' THEN 1 END AS sex,
        coalesce(trim(sex), '') = '' AS sex_missing
      FROM {src}"""
    # the income grid linspace(0, 200000, 1001) has step 200: the smallest candidate >= x is ceil(x / 200)
    rows = spark.sql(f"""WITH c AS ({cells}),
        k AS (SELECT region, sex, sex_missing, income, CAST(age AS BIGINT) AS age_k,
                     CAST(ceil(income / 200) AS BIGINT) AS income_k FROM c)
        SELECT grouping_id(region, sex, age_k, income_k) AS gid, region, sex, age_k, income_k,
               count(*) AS n, count_if(NOT sex_missing) AS n_sex, count_if(sex = 0) AS n_female,
               sum(income) AS s, count(income) AS n_income
        FROM k GROUP BY GROUPING SETS ((), (region), (sex), (age_k), (income_k))""").collect()
    scal: tuple[Any, ...] = ()
    parts: list[dict[int, int]] = [{}, {}, {}, {}]
    for r in rows:
        gid = int(r["gid"])
        if gid == 15:  # the empty grouping set: every row
            scal = (r["n"], r["n_sex"], r["n_female"], r["s"], r["n_income"])
            continue
        which = {7: 0, 11: 1, 13: 2, 14: 3}[gid]  # the one column grouped by
        key = r[1 + which]
        if key is not None:
            parts[which][int(key)] = int(r["n"])
    out = bb.hand_finish(g, scal, *parts)
    return {"s": time.perf_counter() - t0, "aggregates": out}


def route(spark: Any, path: Path, master: str, identity: bool = True) -> dict[str, Any]:
    """What ``planner release --backend spark`` computes before the ledger (in this driver):
    with ``identity`` as the release does it (:class:`~planner.data.backends.BackgroundScan`:
    the aggregates and the content digest that keys the ledger), else the aggregates alone
    (the same backend, no digest asked for)."""
    from planner.data.backends import BackgroundScan, check_backend, close_backend, make_backend
    from planner.data.schema import Schema
    from planner.data.sources import open_cli_source
    from planner.planning.queries import queries_from_list
    from planner.planning.statistics import exact_aggregates, plan_requests

    schema = Schema.from_dict(bb.schema_dict(path, 1))
    qs = queries_from_list(bb.QUERIES, schema)
    t0 = time.perf_counter()
    source = open_cli_source(str(path), defer_check=True)
    if identity:
        engine = BackgroundScan("spark", source, schema, plan_requests(qs, schema), spark_master=master).result()
    else:
        engine = make_backend("spark", source, schema, spark_master=master)
    check_backend(engine)
    aggregates = exact_aggregates(engine, qs)
    digest = engine.content_digest() if identity else None
    out = {"s": time.perf_counter() - t0, "aggregates": bb._route_aggregates(aggregates), "digest": digest}
    close_backend(engine)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default=None, help="an existing master (default: start one here)")
    ap.add_argument("--worker-memory", default="4g")
    ap.add_argument("--executor-memory", default="3g")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--dir", default=None, help="folder for the generated table (kept between runs)")
    ap.add_argument("--out", default=None, help="also write the printed lines to this file")
    args = ap.parse_args()
    # a SIGTERM (timeout, kill) unwinds like an exception, so the cluster started here is stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    rows = int(args.rows)
    folder = Path(args.dir or tempfile.mkdtemp(prefix="bench-spark-"))
    folder.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    path = bb.generate(folder, rows)["parquet"]
    say(f"table: {rows:.0e} rows, Parquet {path.stat().st_size / 1e6:.0f} MB "
        f"(generated or reused in {time.perf_counter() - t:.1f} s)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYSPARK_SUBMIT_ARGS"] = (f"--conf spark.executor.memory={args.executor_memory} "
                                         f"--conf spark.driver.host=127.0.0.1 pyspark-shell")
    cluster_dir = None
    master = args.master
    if master is None:
        cluster_dir = Path(tempfile.mkdtemp(prefix="bench-spark-cluster-")) / "c"
        t = time.perf_counter()
        master = spark_cluster.start(cluster_dir, args.worker_memory, args.cores)
        say(f"cluster: {master}, one worker ({args.worker_memory}, {args.cores} cores), "
            f"executor memory {args.executor_memory}; started in {time.perf_counter() - t:.1f} s")
    try:
        from planner.data.backends.spark_backend import get_session

        t = time.perf_counter()
        spark = get_session(master)
        spark.range(1).count()
        say(f"driver session on the cluster: {time.perf_counter() - t:.1f} s (not in the times below)")
        # warm-up (JIT, the file in the page cache, the executor's class loading): one run
        # of the hand-written job and of the route's aggregates (the same scans, no digest)
        warm_h, warm_r = handwritten(spark, path), route(spark, path, master, identity=False)
        say(f"warm-up: hand-written {warm_h['s']:.2f} s, route without identity {warm_r['s']:.2f} s")
        names = ("hand-written", "route, aggregates only", "route as released (+ identity)")
        times: dict[str, list[float]] = {k: [] for k in names}
        agree: dict[str, bool] = {}
        load0 = os.getloadavg()[0]
        for _ in range(args.repeat):
            h = handwritten(spark, path)
            a = route(spark, path, master, identity=False)
            r = route(spark, path, master, identity=True)
            for k, x in zip(names, (h, a, r), strict=True):
                times[k].append(x["s"])
            for k, x in zip(names[1:], (a, r), strict=True):
                agree[k] = bb._agree(h["aggregates"], x["aggregates"])
        load1 = os.getloadavg()[0]
        # the content identity must be the same value in every engine (one table, one
        # budget): the Spark route's digest against DuckDB's of the same file (compared
        # here, never printed: the digest is private)
        from planner.data.backends import make_backend
        from planner.data.schema import Schema
        from planner.data.sources import open_cli_source

        duck = make_backend("duckdb", open_cli_source(str(path)), Schema.from_dict(bb.schema_dict(path, 1)))
        same = duck.content_digest() == r["digest"]
        duck.close()
        say(f"content identity of the Spark route = DuckDB's on the same file: {'yes' if same else 'NO'}")
        med = {k: statistics.median(v) for k, v in times.items()}
        say("aggregates of the route and the hand-written job: "
            + ", ".join(f"{k}: {'agree' if v else 'DIFFER'}" for k, v in agree.items()))
        say(f"load average (1 min) before / after the timed runs: {load0:.2f} / {load1:.2f} on {os.cpu_count()} cores")
        for k, v in times.items():
            say(f"  {k:32s} median {med[k]:7.2f} s  (min {min(v):.2f} s; runs {', '.join(f'{x:.2f}' for x in v)})")
        hw = med[names[0]]
        say(f"ratio route as released ÷ hand-written: {med[names[2]] / hw:.2f}× (goal ≤ 1.5); "
            f"route, aggregates only ÷ hand-written: {med[names[1]] / hw:.2f}×; the content identity alone: "
            f"{med[names[2]] - med[names[1]]:.2f} s of {med[names[2]]:.2f} s")
        spark.stop()
    finally:
        if cluster_dir is not None:
            spark_cluster.stop(cluster_dir)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
