"""Which 2-way marginals AIM measures at a given ε, against what its prediction assumes
(issue 30; docs/measurements/2026-12-07b/aim_prediction.txt). A script: it prints, never asserts.

For each benchmark table: one release by the release path's generator and fit with numpy noise
(seeded; :class:`~planner.planning.synth.privacy.NumpyNoise`), stratified rows; the mean cells of
the pairs AIM measured, of every pair, and of a pair weighted 1/k (the prediction's
:class:`~planner.planning.synth.accuracy.PairRule` for AIM); the predicted TVD of a measured pair
(the weighted mean), the prediction for the pairs actually measured, and their realised TVD.

Run: python tests/benchmarks/bench_aim_pairs.py --data DIR [--eps 4] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_synthetic as B

from planner.data.backends import PandasBackend
from planner.planning.queries import Query
from planner.planning.statistics import statistic
from planner.planning.statistics.synthetic_data import accuracy, planned, tables_source
from planner.planning.synth.domain import Domain
from planner.planning.synth.privacy import NumpyNoise
from planner.planning.workload import plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=B.DATA)
    ap.add_argument("--eps", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tables", nargs="+", default=["bikeshare", "fair", "wage"])
    args = ap.parse_args()
    for name in args.tables:
        t = B.load_table(name, args.data, None, 0)
        schema = B.product_schema(t)
        q = Query.from_dict(B.product_query(t, "aim", "stratified"))
        q.validate(schema)
        agg = statistic(q.kind).aggregate(q, PandasBackend(B.product_frame(t), schema))
        rho = float(plan([q], schema, args.eps, B.DELTA, "zcdp").allocation.items[0].theta)
        acc = accuracy(q, schema, rho)
        d = len(t.sizes)
        index = [(i, j) for i in range(d) for j in range(i + 1, d)]
        cells = {c: t.sizes[c[0]] * t.sizes[c[1]] for c in index}
        predicted = dict(zip(index, acc.two_way, strict=True))
        rng = np.random.default_rng(args.seed)
        spec, _ = planned(q, schema, rho)
        noise = NumpyNoise(rng)
        fit = spec.fit(tables_source(agg, Domain(agg.columns, agg.sizes)), rho, rng, noise.measure, noise.select)
        codes = fit.sample(t.codes.shape[0], rng, "stratified")
        sel = [tuple(sorted(int(v) for v in c)) for c in fit.selected if len(c) == 2]
        real = [B.tvd(B.marginal(t.codes, t.sizes, c), B.marginal(codes, t.sizes, c)) for c in sel]
        print(f"{name} ε={args.eps:g}: {len(sel)} pairs measured, mean cells {np.mean([cells[c] for c in sel]):.0f} "
              f"(all pairs {np.mean(list(cells.values())):.0f}, "
              f"1/k-weighted {np.dot(acc.pair_weights, [cells[c] for c in index]):.0f})")
        print(f"   predicted weighted mean {acc.two_way_mean:.4f}; predicted for the measured pairs "
              f"{np.mean([predicted[c] for c in sel]):.4f}; realised {np.mean(real):.4f}")


if __name__ == "__main__":
    main()
