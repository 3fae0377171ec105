"""Import the modules the other pages need while the owner reads the first one.

The first page (Data) needs neither the optimiser, OpenDP nor Altair; the other pages do, and
importing them costs about a second on a first visit. From the first run on, one background
thread per server process imports them, so the first visit to the Planner, Accuracy or
Release page does not wait for it. It imports modules only: no Streamlit call, no
data, no noise.
"""

from __future__ import annotations

import importlib
import threading

#: The engine imports SciPy in the functions that use it (start-up of the CLI and of this page),
#: so it is named here: the Planner's and Accuracy's first run would import it otherwise.
MODULES = ("altair", "planner.workload", "planner.allocation", "scipy.optimize", "scipy.special", "scipy.fft",
           "planner.bounds", "planner.simulation", "planner.release", "pages._ui.charts")

_started = threading.Event()


def _import_all() -> None:
    for name in MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional engine module missing in this build: the page says so when visited
            continue


def start() -> None:
    """Start the import thread once per process (idempotent)."""
    if not _started.is_set():
        _started.set()
        threading.Thread(target=_import_all, name="planner-warmup", daemon=True).start()
