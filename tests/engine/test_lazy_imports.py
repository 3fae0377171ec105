"""Structural checks that start-up stays light: heavy libraries are imported where they are used.

Two targets hinge on Python import time (measured, never asserted, by
``tests/benchmarks/bench_backends.py`` and ``tests/benchmarks/bench_app.py --browser``):

* issue 17: ``planner release`` starts reading the data ≤ 0.5 s after it is launched. Before
  the first row is read it needs the plan spec, the schema and the scan engine (numpy, DuckDB)
  only; SciPy (~0.3 s: the optimiser and special functions), SQLAlchemy/SQLModel (the ledger,
  ~0.4 s), OpenDP and pandas are imported while the scan runs or when first used;
* issue 12: the app's first page (Data) drawn in ≤ 2 s. It needs pandas and the ledger (the
  sidebar's lifetime budget), but not SciPy, Altair or OpenDP's scikit-learn/numpy/Polars
  extras (``opendp.prelude`` imports them all; ``planner.privacy.noise`` imports OpenDP's own modules).

Each check runs in a fresh interpreter (this process has imported everything already) and
fails, naming the module, when one of them creeps back onto the path (a module-level
``from scipy import special``, ``import opendp.prelude``, ...). The fix is to import it in the
function that uses it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Imported at most when used: none of them is needed before a release reads its first row.
#: The allocator and the accountants (with numpy.ma, which NumPy loads on the accountants'
#: first ``np.unique``) are needed only to make the plan, which the CLI does while the scan
#: reads: about 0.04 s of CPU before the first read on this machine (issue 31,
#: docs/measurements/2026-12-07/route_startup.txt).
NOT_BEFORE_FIRST_READ = ("scipy", "sqlalchemy", "sqlmodel", "opendp", "pandas", "polars", "sklearn",
                         "altair", "streamlit", "planner.planning.allocation", "planner.privacy.accountants",
                         "planner.privacy.accounting", "numpy.ma")


def _loaded_after(code: str, timeout: float = 180.0) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter (this worktree first on sys.path); it ends by
    storing a dict in ``OUT``, printed as JSON with the sorted names in sys.modules."""
    script = textwrap.dedent(code) + textwrap.dedent("""
        import json as _json, sys as _sys
        OUT["modules"] = sorted(_sys.modules)
        print("RESULT" + _json.dumps(OUT))
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    out: dict[str, object] = json.loads(line.removeprefix("RESULT"))
    return out


def _present(modules: object, roots: tuple[str, ...]) -> list[str]:
    assert isinstance(modules, list)
    return sorted({m for m in modules for r in roots if m == r or m.startswith(r + ".")})


def test_planner_cli_imports_no_numerical_library() -> None:
    """``planner --help`` and the parser: argparse and the planner's own light modules only."""
    out = _loaded_after("""
        import planner.cli
        planner.cli.build_parser()
        OUT = {}
    """)
    assert _present(out["modules"], (*NOT_BEFORE_FIRST_READ, "numpy", "duckdb", "pyarrow")) == []


@pytest.mark.skipif(importlib.util.find_spec("duckdb") is None, reason="duckdb is not installed")
def test_release_reads_its_first_row_before_the_heavy_imports() -> None:
    """The steps of ``planner.cli._cmd_release`` up to the scan reading the data (the
    bundled census sample and plan, DuckDB): nothing in NOT_BEFORE_FIRST_READ is imported
    by then. The release machinery is imported by the CLI only after this point, while the
    scan runs."""
    out = _loaded_after("""
        from planner.data.backends import BackgroundScan, close_backend
        from planner.planning.plan_spec import load_plan_spec
        from planner.data.sources import open_cli_source
        from planner.planning.statistics import plan_requests

        spec = load_plan_spec("examples/census_plan.json")
        scan = BackgroundScan("duckdb", open_cli_source("data/census.csv"), spec.schema,
                              plan_requests(spec.queries, spec.schema))
        OUT = {"reading": scan.wait_reading(timeout=120)}
        import sys
        OUT["at_first_read"] = sorted(sys.modules)
        close_backend(scan.result())
    """)
    assert out["reading"] is True
    assert "duckdb" in out["at_first_read"]  # the check looked at the real scan
    assert _present(out["at_first_read"], NOT_BEFORE_FIRST_READ) == []


def test_reading_a_plan_spec_imports_no_planning_machinery() -> None:
    """``load_plan_spec`` runs before the scan starts: the optimiser's entry points
    (planner.planning.workload, ~0.08 s with its imports) are imported only when a function plans.
    (The statistics, which the scan needs, import the allocator's types only when a plan is made.)"""
    out = _loaded_after("""
        from planner.planning.plan_spec import load_plan_spec

        spec = load_plan_spec("examples/census_plan.json")
        OUT = {"mode": str(spec.mode)}
    """)
    assert out["mode"] == "weighted"
    assert _present(out["modules"], ("planner.planning.workload",)) == []


def test_release_module_needs_no_scipy_and_no_opendp_extras() -> None:
    """``planner.release`` is imported by the CLI while it scans and by the app's planning
    pages: it brings the ledger (SQLAlchemy) and OpenDP's core, but neither SciPy nor OpenDP's
    extras and Polars."""
    out = _loaded_after("""
        import planner.release
        OUT = {}
    """)
    assert _present(out["modules"], ("scipy", "opendp.extras", "opendp.prelude", "polars", "sklearn",
                                     "altair", "streamlit")) == []
    assert _present(out["modules"], ("opendp.measurements",)) != []  # the check saw OpenDP loaded


def test_app_first_page_needs_no_scipy_altair_or_opendp_extras() -> None:
    """The app's first run (Data page and sidebar, as a browser's first visit) with the
    warm-up thread off (it imports the other pages' modules after the first page, on
    purpose): no SciPy, Altair or OpenDP extras. pandas and SQLAlchemy are expected (the
    page shows the table; the sidebar reads the lifetime budget from the ledger)."""
    out = _loaded_after("""
        import logging, os, sys, tempfile
        os.environ["PLANNER_LEDGER_URL"] = f"sqlite:///{tempfile.mkdtemp()}/ledger.db"
        logging.getLogger("streamlit").setLevel(logging.ERROR)
        from streamlit.testing.v1 import AppTest
        import pages._ui.warmup as warmup
        warmup.start = lambda: None
        at = AppTest.from_file(os.path.join(os.getcwd(), "app.py"), default_timeout=120)
        at.run()
        OUT = {"errors": [str(e.value) for e in at.exception] + [str(e.value) for e in at.error],
               "markdown": " ".join(str(m.value) for m in at.sidebar.markdown)}
    """)
    assert out["errors"] == []
    assert "Lifetime budget" in str(out["markdown"])  # the sidebar drew its ledger block
    assert _present(out["modules"], ("pandas", "sqlalchemy")) != []  # the run did load the page
    assert _present(out["modules"], ("scipy", "altair", "opendp.extras", "opendp.prelude", "polars",
                                     "sklearn")) == []
