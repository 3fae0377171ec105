"""Benchmark: load the census sample and a generated 1,000,000-row CSV, then aggregate.

Run from the repository root (a script, not collected by pytest)::

    python tests/benchmarks/bench_data.py [--rows 1000000]

Prints wall-clock seconds for loading, the schema check (column report) and the exact
aggregates of a 10-query workload through :class:`PandasBackend`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "data"))

import numpy as np  # noqa: E402

from planner.data.backends import PandasBackend  # noqa: E402
from planner.data.loader import check_against_schema, load_table  # noqa: E402
from planner.data.schema import Schema  # noqa: E402
from planner.planning.queries import Query, queries_from_list  # noqa: E402
from planner.planning.statistics import exact_aggregates  # noqa: E402

WORKLOAD = [
    {"id": "n", "kind": "count", "column": None, "mechanism": "laplace"},
    {"id": "adults_65", "kind": "count", "column": None, "mechanism": "discrete_laplace",
     "predicate": {"column": "age", "op": ">=", "value": 65}},
    {"id": "income_sum", "kind": "sum", "column": "income", "mechanism": "laplace"},
    {"id": "income_mean", "kind": "mean", "column": "income", "mechanism": "gaussian"},
    {"id": "region", "kind": "histogram", "column": "region", "mechanism": "discrete_gaussian"},
    {"id": "age_hist", "kind": "histogram", "column": "age", "mechanism": "laplace", "bins": 8},
    {"id": "income_q", "kind": "quantile", "column": "income", "mechanism": "exponential",
     "alphas": [0.1, 0.5, 0.9], "step": 500},
    {"id": "age_median", "kind": "median", "column": "age", "mechanism": "exponential",
     "step": 1},
    {"id": "education_mode", "kind": "mode", "column": "education", "mechanism": "exponential"},
    {"id": "smokers", "kind": "proportion", "column": "smoker", "mechanism": "laplace"},
]


def timed(label: str, fn, *args, **kw):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    print(f"  {label:<34s} {time.perf_counter() - t0:8.3f} s")
    return out


def run(path: Path, schema: Schema, queries: tuple[Query, ...]) -> None:
    print(f"{path.name} ({path.stat().st_size / 1e6:.1f} MB)")
    t0 = time.perf_counter()
    df = timed("load_table", load_table, path, max_mb=2000)
    timed("check_against_schema (report)", check_against_schema, df, schema)
    backend = timed("PandasBackend(df, schema)", PandasBackend, df, schema)
    aggs = timed("exact_aggregates (10 queries)", exact_aggregates, backend, queries)
    print(f"  {'total':<34s} {time.perf_counter() - t0:8.3f} s  ({len(df):,} rows, {len(aggs)} aggregates)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    schema = Schema.load(ROOT / "data" / "census.schema.json")
    queries = queries_from_list(WORKLOAD, schema)
    run(ROOT / "data" / "census.csv", schema, queries)
    import make_samples  # data/make_samples.py

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        big = make_samples.make_census(np.random.default_rng(1), args.rows)
        big["person_id"] = np.arange(1, len(big) + 1)
        p = Path(tmp) / f"census_{args.rows}.csv"
        big.to_csv(p, index=False)
        print(f"(generated {args.rows:,} rows in {time.perf_counter() - t0:.1f} s)")
        run(p, schema, queries)


if __name__ == "__main__":
    main()
