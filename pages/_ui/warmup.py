"""Import the modules the other pages need while the owner reads the first one, and (for
``python serve.py``) the first page's own modules before the server takes its first visitor.

The first page (Data) needs neither the optimiser, OpenDP nor Altair; the other pages do, and
importing them costs about a second on a first visit. From the first run on, one background
thread per server process imports them, so the first visit to the Planner, Accuracy or
Release page does not wait for it. That thread imports modules only: no Streamlit call,
no data, no noise. :func:`preload` imports the first page's modules and opens the ledger;
it reads no data either.

The same thread also compiles every page script the navigation lists into Streamlit's script
cache (what a page's first visit in the process otherwise does: read the file, rewrite it for
Streamlit's "magic" and compile it; 60 ms of CPU for the Data page, 5-15 ms for the others),
through the run's own pages manager (``PagesManager.get_page_script_byte_code``).

Both end with :func:`freeze`: Streamlit runs a full garbage collection after every script run
(``runner.postScriptGC``), which walks every object the process tracks — about 200,000 once
pandas, SciPy, Altair, SQLAlchemy and the engine are imported, 0.1 s or more of every click,
page switch and slider step on a 2-core machine, during which the server sends nothing. The
objects of the imported modules live as long as the process, so they are moved out of the
collector's sight once (``gc.freeze``); what a page run creates is still collected after it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

#: The engine imports SciPy in the functions that use it (start-up of the CLI and of this page),
#: so it is named here: the Planner's and Accuracy's first run would import it otherwise.
MODULES = ("altair", "planner.planning.workload", "planner.planning.allocation", "scipy.optimize", "scipy.special", "scipy.fft",
           "planner.planning.bounds", "planner.planning.simulation", "planner.release", "pages._ui.charts")

#: What the first page (Data, on the census sample) and the app's frame import on their first
#: run: pandas and PyArrow for the table, SQLAlchemy/SQLModel for the ledger (the sign-in check
#: and the sidebar's budget), the engine's loader, digest and ledger, and the page helpers.
#: ``tests/app/test_serve.py`` fails if the first run imports any engine or page module
#: missing from this list.
FIRST_PAGE = (
    "pandas", "pyarrow", "pyarrow.csv", "pyarrow.pandas_compat", "pyarrow.vendored.version", "sqlalchemy", "sqlmodel",
    "planner.ledger", "planner.data.loader", "planner.data.sources", "planner.data.backends.pandas_backend", "planner.data.backends.sql",
    "planner.data.backends.spark_backend", "pages._ui.auth", "pages._ui.cached", "pages._ui.datasets", "pages._ui.frame",
    "pages._ui.preamble", "pages._ui.run_memo", "pages._ui.sidebar", "pages._ui.state", "pages._ui.guard",
    "pages._ui.suggest",
    "planner.outputs.words",
)

_started = threading.Event()


@contextlib.contextmanager
def _quiet(*modules: ModuleType) -> Iterator[None]:
    """Raise the level of these Streamlit modules' loggers to ERROR for the block."""
    logs = [logging.getLogger(m.__name__) for m in modules]
    levels = [log.level for log in logs]
    for log in logs:
        log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for log, level in zip(logs, levels, strict=True):
            log.setLevel(level)


def preload() -> None:
    """Import :data:`FIRST_PAGE` now, in the calling thread (``serve.py``, before the server
    starts): the first visitor's page then runs without paying for them. A module that
    fails to import raises here, at start-up, rather than on the first page. The process's
    ledger is opened too (its tables created on a first start).

    Before its server exists, Streamlit warns "No runtime found" for every ``st.cache_data``
    defined (the decorator checks its options against a throw-away store; the store it
    caches in is looked up at each call, once the runtime runs) and "missing
    ScriptRunContext" for a cached call outside a script run. Both are silenced here only.
    """
    # imported first: a Streamlit module's logger gets its level when the module is imported
    from streamlit.runtime.caching import cache_data_api
    from streamlit.runtime.scriptrunner_utils import script_run_context

    from planner.core.errors import PlannerError

    with _quiet(cache_data_api, script_run_context):
        for name in FIRST_PAGE:
            importlib.import_module(name)
        from . import ledger_handle

        try:
            ledger_handle.get_ledger_default()  # one ledger per process and URL (st.cache_resource): opened now
        except PlannerError:
            pass  # not cached: the first page opens it again and shows the engine's message
    freeze()


def freeze() -> None:
    """Collect what is garbage now, then move every surviving object (the imported modules,
    their classes and functions, the process's ledger) into the collector's permanent
    generation, so the full collection Streamlit runs after each script run no longer walks
    them (``gc.freeze``; an object frozen still goes when nothing refers to it, only a cycle
    among frozen objects is not looked for)."""
    gc.collect()
    gc.freeze()


def compile_pages(pages_manager: Any) -> list[str]:
    """Compile every page script ``pages_manager`` lists (``st.navigation``'s pages) into its
    script cache; returns the paths compiled. A page that does not compile is skipped here:
    its own visit compiles it again and Streamlit shows the error there."""
    done = []
    for info in pages_manager.get_pages().values():
        path = str(info.get("script_path") or "")
        if not path.endswith(".py") or not Path(path).is_file():
            continue
        try:
            pages_manager.get_page_script_byte_code(path)
        except Exception:  # shown on the page's own visit, which compiles it again
            continue
        done.append(path)
    return done


def _import_all(pages_manager: Any = None) -> None:
    if pages_manager is not None:
        compile_pages(pages_manager)
    for name in MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional engine module missing in this build: the page says so when visited
            continue
    freeze()


def start() -> None:
    """Start the import thread once per process (idempotent); called at the end of a script
    run, whose pages manager lists the pages to compile."""
    if not _started.is_set():
        _started.set()
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx(suppress_warning=True)
        pages_manager = getattr(ctx, "pages_manager", None)
        threading.Thread(target=_import_all, args=(pages_manager,), name="planner-warmup", daemon=True).start()
