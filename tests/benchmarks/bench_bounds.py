"""Benchmark: a DP mean with bounds from the DP bounds suggestion against the best bounds
chosen with hindsight, at the same total ε (issue 30).

Run from the repository root (a script, not collected by pytest; it prints, it never
asserts)::

    python tests/benchmarks/bench_bounds.py [--runs 200] [--eps-total 1] [--eps-suggest 0.1]
        [--levels 0.01 0.99]... [--lognormal-magnitude 2e6] [--data FILE --column C --magnitude M]...

Columns: a seeded log-normal income column (n = 20,000, median e^10, σ = 1; public
magnitude ``--lognormal-magnitude``, default 10^7, ten times its largest value), and every
``--data FILE --column C --magnitude M`` given (e.g. ``income`` of ``data/census.csv``,
magnitude 10^6); without ``--data``, the ``wage`` column of ISLR's Wage table bundled in
``tests/benchmarks/data/`` (n = 3,000, magnitude 500). Data files are read by path; nothing
is copied into the repository.

For each column, with n rows (declared as the public n):

* **suggested** — the suggestion (:func:`planner.planning.bounds_suggest.plan_suggestion`,
  log grid over [0, M]) spends ``--eps-suggest``; each run draws it again through its OpenDP
  measurements (:func:`planner.release.prepare` → ``sample`` on the exact aggregates: what
  a release draws), then a DP mean (the planner's default mechanism) spends the rest,
  ε_total − ε_suggest, with the suggested bounds. Error² of a run = clipping bias² (the
  clipped mean − the true mean, on the rows) + the mean's predicted noise MSE (the
  planner's RMSE²); the reported error is the root of its average over the runs.
* **hindsight** — the best pair of TRUE quantiles (levels 0–0.05 × 0.9–1, a grid search on
  the rows, not private) as bounds, with the mean spending the whole ε_total.

By default the suggestion's levels are tuned for the mean (:mod:`planner.planning.bounds_purpose`:
the mean that spends ε_total − ε_suggest over the public n); ``--levels`` adds fixed ones.

Printed per column: both errors (in the column's units; the suggested one ± its Monte Carlo
standard error), their ratio (goal ≤ 1.5), the share of runs whose bounds clip more than 5%
of the rows, the hindsight levels and the hindsight with L = 0 (what a lower bound at the
coarse range's end can reach), the rows above the released U (10th/50th/90th percentile over
the runs), and the error with the TRUE quantiles at the suggestion's levels (what the level
alone costs, without the selection's error).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from planner.data.backends.pandas_backend import PandasBackend
from planner.data.schema import Column, ColumnKind, MissingRule, Schema
from planner.planning import bounds_suggest as bs
from planner.planning.bounds_purpose import Purpose, Statistic
from planner.planning.queries import Query
from planner.planning.workload import plan
from planner.release import prepare

LO_LEVELS = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
HI_LEVELS = (0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 0.9999, 1.0)


def _schema(lo: float, hi: float, n: int) -> Schema:
    return Schema((Column("x", ColumnKind.NUMERIC, MissingRule(), lo, hi),), public_n=n)


def mean_rmse(lo: float, hi: float, n: int, eps: float) -> float:
    """The planner's predicted noise RMSE of a DP mean of x clipped to [lo, hi] at ε."""
    p = plan([Query("m", "mean", "x", None)], _schema(lo, hi, n), eps, 0.0, "basic")
    return float(math.sqrt(sum(pr.rmse**2 for pr in p.predictions)))


def bias(x: np.ndarray, lo: float, hi: float) -> float:
    return float(np.mean(np.clip(x, lo, hi)) - np.mean(x))


def hindsight(x: np.ndarray, eps: float, lo_levels: tuple[float, ...] = LO_LEVELS) -> tuple[float, tuple[float, float]]:
    best = (math.inf, (0.0, 1.0))
    for a in lo_levels:
        for b in HI_LEVELS:
            lo, hi = (float(v) for v in np.quantile(x, [a, b]))
            if not lo < hi:
                continue
            err = math.sqrt(bias(x, lo, hi) ** 2 + mean_rmse(lo, hi, len(x), eps) ** 2)
            if err < best[0]:
                best = (err, (a, b))
    return best


def suggested(x: np.ndarray, magnitude: float, eps_total: float, eps_s: float, levels: tuple[float, float] | None,
              runs: int) -> dict[str, Any]:
    """``levels`` None: tuned for the mean that spends the rest, ε_total − ε_s."""
    n = len(x)
    purpose = None if levels is not None else Purpose(Statistic.MEAN, eps_total - eps_s)
    sp = bs.plan_suggestion(_schema(0.0, 1.0, n), "x", eps_s, levels=levels, magnitude=magnitude, purpose=purpose)
    levels = sp.levels
    backend = PandasBackend(pd.DataFrame({"x": x}), sp.schema)
    prepared = prepare(sp.plan, sp.schema)
    aggs = prepared.aggregates(backend)
    sq, clipped_much, pairs, above = [], 0, [], []
    for _ in range(runs):
        ans = prepared.sample(backend, aggs)[bs.QUERY_ID]
        assert isinstance(ans, dict)
        parts = ans["parts"] if "parts" in ans else {f"quantile@{ans['alpha']:g}": ans}
        assert isinstance(parts, dict)
        released = {a: float(parts[f"quantile@{a:g}"]["value"]) for a in bs.released_levels(levels)}
        lo, hi = bs.bounds_from_answers(levels, released, sp.grid)
        pairs.append((lo, hi))
        above.append(int(np.sum(x > hi)))
        sq.append(bias(x, lo, hi) ** 2 + mean_rmse(lo, hi, n, eps_total - eps_s) ** 2)
        clipped_much += bs.clipping_on_data(x, lo, hi).clipped_fraction > 0.05
    rmse = math.sqrt(float(np.mean(sq)))
    # Monte Carlo standard error of the root (delta method on the mean of the squares)
    se = float(np.std(sq, ddof=1)) / math.sqrt(runs) / (2 * rmse) if runs > 1 and rmse > 0 else math.nan
    return {"rmse": rmse, "se": se, "clipped_much": clipped_much / runs,
            "median_bounds": tuple(float(v) for v in np.median(np.array(pairs), axis=0)),
            "rank_bound_95": sp.rank_bound_95, "levels": sp.levels,
            "above": tuple(int(v) for v in np.percentile(above, [10, 50, 90])),
            "exact": exact_at(x, sp.levels, sp.grid.lower, eps_total - eps_s)}


def exact_at(x: np.ndarray, levels: tuple[float, float], coarse_lower: float, eps: float) -> float:
    """The error with the TRUE quantiles at ``levels`` as bounds (no selection error; a level 0
    is the coarse range's lower end) and the mean at ε: what the level alone costs."""
    lo = coarse_lower if levels[0] == 0 else float(np.quantile(x, levels[0], method="inverted_cdf"))
    hi = float(np.quantile(x, levels[1], method="inverted_cdf"))
    return math.sqrt(bias(x, lo, hi) ** 2 + mean_rmse(lo, hi, len(x), eps) ** 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--eps-total", type=float, default=1.0)
    ap.add_argument("--eps-suggest", type=float, default=0.1)
    ap.add_argument("--levels", type=float, nargs=2, action="append", default=None,
                    help="fixed quantile levels of the suggestion (repeatable; default: none, only the levels tuned "
                         "for the mean; the 2026-11-28 run used 0.01 0.99, 0 0.999 and 0 0.9995; 0 keeps the coarse "
                         "range's lower end 0 and spends the whole ε on the upper bound)")
    ap.add_argument("--no-tuned", action="store_true", help="leave out the levels tuned for the mean")
    ap.add_argument("--data", action="append", default=[])
    ap.add_argument("--column", action="append", default=[])
    ap.add_argument("--magnitude", action="append", type=float, default=[])
    ap.add_argument("--lognormal-magnitude", type=float, default=1e7,
                    help="the public magnitude given for the log-normal column (its largest value is ~1e6)")
    args = ap.parse_args()
    cols: list[tuple[str, np.ndarray, float]] = [
        ("lognormal income (n=20000, seed 20261128)", np.random.default_rng(20261128).lognormal(10.0, 1.0, 20_000),
         args.lognormal_magnitude)]
    wage = Path(__file__).resolve().parent / "data" / "Wage.csv"  # bundled by the synthetic-data benchmark
    extra = list(zip(args.data, args.column, args.magnitude, strict=True))
    if not extra and wage.exists():
        extra = [(str(wage), "wage", 500.0)]  # wages in $1000s, all below ~320: "up to about 500"
    for path, col, mag in extra:
        v = pd.to_numeric(pd.read_csv(path)[col], errors="coerce").to_numpy(dtype=float)
        cols.append((f"{path.split('/')[-1]}:{col} (n={np.isfinite(v).sum()})", v[np.isfinite(v)], mag))
    configs: list[tuple[float, float] | None] = [] if args.no_tuned else [None]
    configs += [(float(v[0]), float(v[1])) for v in args.levels or []]
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"ε_total = {args.eps_total:g}, suggestion ε = {args.eps_suggest:g}, {args.runs} runs; error = "
          "sqrt(clipping bias² + noise MSE) of the DP mean, in the column's units")
    for name, x, mag in cols:
        x = np.clip(x, -mag, mag)  # the public coarse range every bound lies in
        best, lv = hindsight(x, args.eps_total)
        best0, lv0 = hindsight(x, args.eps_total, (0.0,))
        print(f"- {name}, magnitude {mag:g}: hindsight {best:.4g} at true quantiles {lv}; with L = 0 "
              f"{best0:.4g} at {lv0} (ratio to hindsight {best0 / best:.3g})")
        for levels in configs:
            t0 = time.perf_counter()
            s = suggested(x, mag, args.eps_total, args.eps_suggest, levels, args.runs)
            how = "tuned for the mean" if levels is None else "fixed"
            print(f"    {how}: levels {s['levels'][0]:g}, {s['levels'][1]:g}: suggested {s['rmse']:.4g} ± {s['se']:.2g} (median bounds "
                  f"{s['median_bounds'][0]:.4g}, {s['median_bounds'][1]:.4g}; >5% clipped in "
                  f"{100 * s['clipped_much']:.3g}% of runs; predicted 95% rank error {100 * s['rank_bound_95']:.3g}% "
                  f"of n; rows above U 10/50/90%: {s['above']}) | ratio {s['rmse'] / best:.3g} ± {s['se'] / best:.2g} | exact quantiles at these levels: "
                  f"{s['exact']:.4g}, ratio {s['exact'] / best:.3g} | {time.perf_counter() - t0:.1f} s")

if __name__ == "__main__":
    main()
