"""Benchmark: the sampling error alone of the two samplers of ``synthetic_data`` (issue 30).

A script, not collected by pytest: it prints, it never asserts. For each table, mechanism
(MST, AIM) and ε, one model is fitted with the planning simulation's numpy noise (seed 0,
the calls of ``bench_synthetic.py --noise numpy``); then N rows (N = the table's rows) are
drawn ``--draws`` times by each sampler, and each draw's TVD against the MODEL's own
marginals (not the real table's: the model's error is left out) is averaged over the 1-way
marginals and over the measured 2-way marginals. Beside them, the prediction's sampling terms
(:func:`planner.planning.synth.accuracy.sampling_tvd` for i.i.d. rows,
:func:`~planner.planning.synth.accuracy.stratified_sampling_tvd` for stratified ones, k̄ the
mean column size) averaged over the same marginals, and the model's clique sizes.

Run from the repository root::

    python tests/benchmarks/bench_synthetic_sampling.py --data DIR --tables wage fair bikeshare
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for p in (ROOT, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import bench_synthetic as bench  # type: ignore[import-not-found]  # noqa: E402


def _tvd(counts: np.ndarray, model: np.ndarray) -> float:
    return 0.5 * float(np.abs(counts / counts.sum() - model / model.sum()).sum())


def run(table: str, data: Path, mechanism: str, eps: float, draws: int) -> str:
    from planner.data.backends import PandasBackend
    from planner.data.requests import MarginalTables
    from planner.planning.queries import Query
    from planner.planning.statistics import statistic
    from planner.planning.statistics.synthetic_data import planned, tables_source
    from planner.planning.synth.accuracy import sampling_tvd, stratified_sampling_tvd
    from planner.planning.synth.domain import Domain
    from planner.planning.synth.marginals import marginal
    from planner.planning.synth.privacy import NumpyNoise
    from planner.planning.synth.sample import Sampler, sample_model

    t = bench.load_table(table, data)
    schema = bench.product_schema(t)
    q = Query.from_dict(bench.product_query(t, mechanism))
    q.validate(schema)
    agg = statistic(q.kind).aggregate(q, PandasBackend(bench.product_frame(t), schema))
    assert isinstance(agg, MarginalTables)
    rho, _ = bench.planned_rho(t, eps, mechanism)
    spec, _ = planned(q, schema, rho)
    rng = np.random.default_rng(0)
    noise = NumpyNoise(rng)
    fit = spec.fit(tables_source(agg, Domain(agg.columns, agg.sizes)), rho, rng, noise.measure, noise.select)
    model = fit.model
    dom = model.domain
    n = int(t.codes.shape[0])
    one = [(j,) for j in range(len(dom))]
    two = list(dict.fromkeys(tuple(sorted(c)) for c in fit.selected if len(c) == 2))
    exact = {c: model.marginal(c) for c in one + two}
    got = {}
    for s in Sampler:
        v1, v2 = [], []
        for _ in range(draws):
            x = sample_model(model, n, rng, s)
            v1.append(np.mean([_tvd(marginal(x, dom, c), exact[c]) for c in one]))
            v2.append(np.mean([_tvd(marginal(x, dom, c), exact[c]) for c in two]))
        got[s] = (float(np.mean(v1)), float(np.mean(v2)))
    kbar = float(np.mean(dom.sizes))
    iid = (float(np.mean([sampling_tvd(dom.cells(c), n) for c in one])),
           float(np.mean([sampling_tvd(dom.cells(c), n) for c in two])))
    strat = (float(np.mean([stratified_sampling_tvd([dom.sizes[a] for a in c], n, kbar) for c in one])),
             float(np.mean([stratified_sampling_tvd([dom.sizes[a] for a in c], n, kbar) for c in two])))
    cl = sorted((len(c) for c in model.tree.cliques), reverse=True)
    g_i, g_s = got[Sampler.IID], got[Sampler.STRATIFIED]
    return (f"| {table} | {mechanism} | {eps:g} | {cl} | {g_i[0]:.5f} | {iid[0]:.5f} | {g_s[0]:.5f} | {strat[0]:.5f} "
            f"| {g_s[0] / strat[0]:.2f} | {g_i[1]:.5f} | {iid[1]:.5f} | {g_s[1]:.5f} | {strat[1]:.5f} "
            f"| {g_s[1] / strat[1]:.2f} | {g_s[1] / g_i[1]:.2f} |")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=bench.DATA)
    ap.add_argument("--tables", nargs="+", default=["wage", "fair", "bikeshare"])
    ap.add_argument("--eps", nargs="+", type=float, default=[1.0, 4.0])
    ap.add_argument("--draws", type=int, default=20)
    a = ap.parse_args(argv)
    load = os.getloadavg()
    print(f"# sampling error alone, {a.draws} draws of N rows per model; load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f}")
    print("| table | mech | ε | clique sizes | 1-way iid | pred iid | 1-way strat | pred strat | ratio "
          "| 2-way iid | pred iid | 2-way strat | pred strat | ratio | strat / iid (2-way) |")
    print("|" + "---|" * 16)
    for table in a.tables:
        for mech in ("mst", "aim"):
            for eps in a.eps:
                print(run(table, a.data, mech, eps, a.draws), flush=True)
    end = os.getloadavg()
    print(f"# load average at the end {end[0]:.1f} {end[1]:.1f} {end[2]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
