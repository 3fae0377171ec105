"""Print (not assert) the app's release click → answers time on the census sample.

Run: ``python tests/benchmarks/bench_app_release.py [--repeat 3]``. Each repetition uses a
fresh ledger and a fresh app session (AppTest, in process, as ``bench_app.py`` does): the
Plan page is computed first (its cost is not the click's), then the Release page is shown,
and the confirmed release (the dialog's confirm, set through ``CONFIRMED`` as the app tests
do) is timed from the rerun that releases to the answers on screen. The parts are timed
too: the exact aggregates (the backend, DuckDB by default), the release itself (OpenDP
measurements, ledger, noise) and the rest of the page run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: the checkout measured: this one, or ``$BENCH_PLANNER_ROOT`` (an older checkout, for a
#: before/after table run by the same script)
ROOT = Path(os.environ.get("BENCH_PLANNER_ROOT") or Path(__file__).resolve().parents[2]).resolve()
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from pages._ui import state as S  # noqa: E402


def one(rep: int) -> dict[str, Any]:
    import planner.release as rel

    timings: dict[str, float] = {"aggregates_s": 0.0, "release_s": 0.0}
    aggregates = rel.PreparedRelease.aggregates
    release = rel.release

    def timed_aggregates(self: Any, backend: Any) -> Any:
        t = time.perf_counter()
        try:  # the exact aggregates, read before the spend (the backend's one pass)
            return aggregates(self, backend)
        finally:
            timings["aggregates_s"] += time.perf_counter() - t

    def timed_release(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return release(*a, **k)
        finally:
            timings["release_s"] += time.perf_counter() - t

    rel.PreparedRelease.aggregates = timed_aggregates  # type: ignore[method-assign]
    rel.release = timed_release
    try:
        with tempfile.TemporaryDirectory() as d:
            os.environ["PLANNER_LEDGER_URL"] = f"sqlite:///{d}/bench{rep}.db"
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
            at.run()
            at.session_state[S.RULE] = "basic"
            at.switch_page("pages/plan_page.py").run()
            at.switch_page("pages/release_page.py").run()
            try:  # releases need the dataset's lifetime budget (its form, where the app has one)
                eps = at.number_input(key="release:lifetime_eps")
            except KeyError:
                eps = None
            if eps is not None:
                eps.set_value(3.0)
                at.number_input(key="release:lifetime_delta").set_value(1e-6)
                at.button(key="release:lifetime_set").click().run()
            at.session_state[S.CONFIRMED] = True
            t = time.perf_counter()
            at.run()
            timings["click_s"] = time.perf_counter() - t
            ok = any("Released" in s.value for s in at.success) and not at.exception
            timings["ok"] = float(ok)
    finally:
        rel.PreparedRelease.aggregates = aggregates  # type: ignore[method-assign]
        rel.release = release
    return timings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.one:  # every repetition in a fresh process: Streamlit caches the backend
        import subprocess

        for _ in range(args.repeat):
            print(f"load average {os.getloadavg()[0]:.2f}; measuring {ROOT}", flush=True)
            subprocess.run([sys.executable, __file__, "--one"], check=False, cwd=ROOT)
        return
    for rep in range(1):
        r = one(rep)
        print(f"release click → answers {r['click_s']:.3f} s (goal ≤ 1 s){'' if r['ok'] else '  NOT RELEASED'}; "
              f"exact aggregates {r['aggregates_s']:.3f} s (first click: the backend reads the file), "
              f"release() {r['release_s']:.3f} s, rest of the page run "
              f"{r['click_s'] - r['release_s']:.3f} s")


if __name__ == "__main__":
    main()
