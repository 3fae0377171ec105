"""Print (not assert) the AppTest render time of every "Learn" demo page.

Run: ``python tests/benchmarks/bench_learn.py [page ...]``. Each page is measured in its own
fresh Python process, so "cold" includes the first import of the page's modules and empty
caches, as on a freshly started server. "warm" is a second session with the same inputs (the
caches are full); "run again" clicks the page's button, which draws a new seed, so the
seed-keyed caches miss: that is what a presenter waits for; "heaviest controls" then moves every
expensive control to its most expensive value at once. The target (issue text) is
< 2 s for every page except the Monte Carlo simulation, which shows a progress bar instead.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PAGES = {
    "learn_randomized_response": "rr",
    "learn_attacker": "atk",
    "learn_laplace_count": "lc",
    "learn_averaging": "avg",
    "learn_majority": "maj",
    "learn_histogram": "hist",
    "learn_composition": "comp",
}

# The most expensive setting of each page's controls (a cache miss on every widget).
HEAVIEST: dict[str, dict[str, object]] = {
    "learn_randomized_response": {"rr_n": 20_000},
    "learn_attacker": {"atk_eps": 0.01, "atk_delta": 0.05},
    "learn_laplace_count": {"lc_big": 1_000_000, "lc_eps": [0.01, 5.0, 10.0]},
    "learn_averaging": {"avg_n": 30_000, "avg_eps": 0.001, "avg_clamp": False},
    "learn_majority": {"maj_n": 1001, "maj_eps": 2.0},
    "learn_histogram": {"hist_reps": 200, "hist_eps": 0.01},
    "learn_composition": {"comp_kmax": 3000, "comp_delta": 1e-9, "comp_total": 10.0},
}


def measure(page: str) -> str:
    """One page, in this process: cold run, warm run, 'Run again' click (seconds)."""
    sys.path.insert(0, str(ROOT))
    import logging

    from streamlit.testing.v1 import AppTest

    logging.getLogger("streamlit").setLevel(logging.ERROR)  # "no runtime" warnings

    path = str(ROOT / "pages" / f"{page}.py")
    t0 = time.perf_counter()
    at = AppTest.from_file(path, default_timeout=600).run()
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    at2 = AppTest.from_file(path, default_timeout=600).run()
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    at2.button(key=f"{PAGES[page]}_run_again").click().run()
    again = time.perf_counter() - t0
    for key, value in HEAVIEST[page].items():
        at2.session_state[key] = value
    t0 = time.perf_counter()
    at2.run()
    heavy = time.perf_counter() - t0
    errs = [e.value for e in at.exception] + [e.value for e in at2.exception]
    return (f"{page:27s} cold {cold:5.2f} s  warm {warm:5.2f} s  run again {again:5.2f} s  "
            f"heaviest controls {heavy:5.2f} s"
            + (f"   ERRORS: {errs}" if errs else ""))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(measure(sys.argv[2]), flush=True)
    else:
        for page in sys.argv[1:] or list(PAGES):
            subprocess.run([sys.executable, __file__, "--one", page], check=False)
