"""Print (not assert) the AppTest rerun time of the Planner and Accuracy pages, 20 queries.

Run: ``python tests/benchmarks/bench_app.py``. The first run fills the caches; the reruns
are what a slider move costs once the plan for those inputs has been computed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from pages._ui import state as S  # noqa: E402


def workload20() -> list[dict]:
    base = S.CENSUS_WORKLOAD
    rows = []
    for i in range(20):
        r = dict(base[i % len(base)])
        r["id"] = f"{r['id']}_{i}"
        r["weight"] = 1.0 + i % 3
        rows.append(r)
    return rows


def bench(page: str, reruns: int = 3) -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.run()
    at.session_state[S.WORKLOAD] = workload20()
    at.session_state[S.WORKLOAD_BASE] = workload20()
    t0 = time.perf_counter()
    at.switch_page(f"pages/{page}.py").run()
    first = time.perf_counter() - t0
    times = []
    for _ in range(reruns):
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
    errs = [e.value for e in at.exception] + [e.value for e in at.error]
    print(f"{page:14s} 20 queries: first run {first:7.2f} s, reruns "
          + ", ".join(f"{t:.3f}" for t in times) + " s" + (f"  ERRORS: {errs}" if errs else ""))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        os.environ["PLANNER_LEDGER_URL"] = f"sqlite:///{d}/bench.db"
        for page in ("plan_page", "accuracy_page"):
            bench(page)
