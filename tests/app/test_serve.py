"""``python serve.py`` (the README's way to start the app) imports the first page's modules
before the server takes its first visitor (``pages._ui.warmup.FIRST_PAGE``), so a first visit
pays only for the page's own work (issue 12: the first page drawn in ≤ 2 s, measured by
``tests/benchmarks/bench_app.py --browser``, never asserted here).

These checks keep that list true as the pages change: after ``preload()`` the app's first run
(Data page and sidebar on the census sample) must import no engine, page, pandas, PyArrow or
ledger module of its own. The browser tests (``tests/e2e``) start the app with ``serve.py``.
"""

from __future__ import annotations

from tests.engine.test_lazy_imports import _loaded_after, _present

#: Modules whose import on a first visit is what ``serve.py`` exists to avoid.
HEAVY = ("planner", "pages", "pandas", "pyarrow", "sqlalchemy", "sqlmodel", "pydantic")


def test_first_run_after_preload_imports_nothing_heavy() -> None:
    out = _loaded_after("""
        import logging, os, sys, tempfile
        home = tempfile.mkdtemp()
        os.environ["PLANNER_LEDGER_URL"] = f"sqlite:///{home}/ledger.db"
        logging.getLogger("streamlit").setLevel(logging.ERROR)
        import streamlit, streamlit.testing.v1  # the server's own modules, there before any preload
        from pages._ui import warmup
        warmup.preload()
        ledger_opened = os.path.exists(f"{home}/ledger.db")
        before = set(sys.modules)
        warmup.start = lambda: None  # the other pages' warm-up thread imports their modules on purpose
        at = streamlit.testing.v1.AppTest.from_file(os.path.join(os.getcwd(), "app.py"), default_timeout=120)
        at.run()
        OUT = {"errors": [str(e.value) for e in at.exception] + [str(e.value) for e in at.error],
               "markdown": " ".join(str(m.value) for m in at.sidebar.markdown),
               "new": sorted(set(sys.modules) - before), "ledger_opened": ledger_opened}
    """)
    assert out["errors"] == []
    assert "Lifetime budget" in str(out["markdown"])  # the first run drew the sidebar's ledger block
    assert out["ledger_opened"] is True  # preload opened (and created) the process's ledger
    assert _present(out["new"], HEAVY) == [], _present(out["new"], HEAVY)


def test_the_check_sees_a_module_missing_from_the_list() -> None:
    """Without the preload the same first run imports every one of them: the check above is
    not vacuous."""
    out = _loaded_after("""
        import logging, os, sys, tempfile
        os.environ["PLANNER_LEDGER_URL"] = f"sqlite:///{tempfile.mkdtemp()}/ledger.db"
        logging.getLogger("streamlit").setLevel(logging.ERROR)
        import streamlit, streamlit.testing.v1
        before = set(sys.modules)
        from pages._ui import warmup
        warmup.start = lambda: None
        at = streamlit.testing.v1.AppTest.from_file(os.path.join(os.getcwd(), "app.py"), default_timeout=120)
        at.run()
        OUT = {"new": sorted(set(sys.modules) - before)}
    """)
    found = {m.split(".")[0] for m in _present(out["new"], HEAVY)}
    assert found == set(HEAVY)


def test_preload_with_an_unusable_ledger_still_starts() -> None:
    """A ledger that cannot be opened must not stop the server: the first page opens it
    again and shows the engine's message (the AppTest pages test that message)."""
    out = _loaded_after("""
        import os, tempfile
        blocker = os.path.join(tempfile.mkdtemp(), "a-file")
        open(blocker, "w").close()  # the ledger's folder would have to be inside a file
        os.environ["PLANNER_LEDGER_URL"] = f"sqlite:///{blocker}/ledger.db"
        from planner.core.errors import LedgerError
        from planner.ledger import Ledger
        try:
            Ledger(os.environ["PLANNER_LEDGER_URL"])
            fails = False
        except LedgerError:
            fails = True
        from pages._ui import warmup
        warmup.preload()
        OUT = {"returned": True, "ledger_fails": fails}
    """)
    assert out["ledger_fails"] is True  # the case is the one meant
    assert out["returned"] is True
