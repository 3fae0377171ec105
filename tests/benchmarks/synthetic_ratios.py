"""Realised ÷ predicted TVD of the synthetic releases a ``bench_synthetic.py --json FILE`` run
recorded (issue 30; docs/measurements/2026-12-07b/aim_prediction.txt). A script: it prints.

For each of our cells: the 1-way TVD, the measured 2-way TVD (the pairs the release measured,
as the benchmark's note gives them) and the release's mean over both, each against the plan's
prediction at the cell's ρ, recomputed with this checkout's code.

Run: python tests/benchmarks/synthetic_ratios.py RUN.json --data DIR
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_synthetic as B

from planner.planning.queries import Query
from planner.planning.statistics.synthetic_data import accuracy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--data", type=Path, default=B.DATA)
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.run.read_text().splitlines() if line.strip()]
    tables: dict[str, B.Table] = {}
    r1, r2, rm = [], [], []
    for r in (r for r in rows if r["method"].startswith("ours")):
        t = tables.get(r["table"]) or tables.setdefault(r["table"], B.load_table(r["table"], args.data, None, 0))
        schema = B.product_schema(t)
        mech = re.search(r"generator (\w+)", r["note"]).group(1)  # type: ignore[union-attr]
        q = Query.from_dict(B.product_query(t, mech, r["sampler"]))
        rho = float(re.search(r"ρ = ([0-9.e-]+)", r["note"]).group(1))  # type: ignore[union-attr]
        m = int(re.search(r"(\d+) 2-way measured", r["note"]).group(1))  # type: ignore[union-attr]
        real2 = float(re.search(r"realised ([0-9.]+)", r["note"]).group(1))  # type: ignore[union-attr]
        d = len(t.sizes)
        real1 = float(np.mean(r["tvd1"]))
        realised = (d * real1 + m * real2) / (d + m)
        acc = accuracy(q, schema, rho)
        r1.append(real1 / acc.one_way_mean)
        r2.append(real2 / acc.two_way_mean)
        rm.append(realised / acc.mean)
        print(f"{r['table']:9s} {r['eps']:3g} {mech}: 1-way {real1:.4f}/{acc.one_way_mean:.4f} = {r1[-1]:.2f}; "
              f"measured 2-way {real2:.4f}/{acc.two_way_mean:.4f} = {r2[-1]:.2f}; "
              f"mean {realised:.4f}/{acc.mean:.4f} = {rm[-1]:.2f}")
    print(f"ranges: 1-way {min(r1):.2f}–{max(r1):.2f}; measured 2-way {min(r2):.2f}–{max(r2):.2f}; "
          f"release mean {min(rm):.2f}–{max(rm):.2f}")


if __name__ == "__main__":
    main()
