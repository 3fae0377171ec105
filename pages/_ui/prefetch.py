"""Plan the next ε the owner is likely to choose while they read the Planner.

An ε change on the Planner plans the workload under every composition rule at the new ε,
for the rule comparison; nothing cached can answer it, and the optimal accountant's fit alone
costs 0.25–0.35 s of CPU (docs/measurements/2026-12-07/planner_eps.txt). The ε box steps by
:data:`EPSILON_STEP`: its + and − buttons (and the arrow keys) send ε ± step, computed in the
browser on the step's decimal grid (:func:`neighbours`). So after each Planner run one
background thread per process plans the same plan file at those neighbouring ε, through the
same cached functions the page calls (:func:`pages._ui.cached.compare`, which plans each rule
with :func:`pages._ui.cached.spec_plan`); a step to a neighbour then finds every rule planned.

What it computes and what it cannot change:

* plans only — deterministic functions of a PLAN.json text: no data, no noise, no ledger, no
  Streamlit element, no session state (the settings and the workload are copied on the page's
  thread). The texts are made by :func:`pages._ui.planning.spec_json`, the function that makes
  the page's own document, so a neighbour's text is the very key the page asks for after the
  step (a test checks it).
* the page's own call for a document returns the cached object; while the thread is planning
  it, the page waits for that computation instead of repeating it (``st.cache_data``'s lock per
  key): the result is the one the page would have made. A plan the thread could not make is
  not cached; the page's own call makes it again and shows the engine's message.
* the newest request replaces an older one not yet started, and a request older than the
  newest stops between two rules: an owner who types another ε does not wait for plans of ε
  they left. At most one thread plans at a time, and it starts a plan only while no script
  run of any session is under way (it waits for the page it was asked from to finish, and
  gives way to the next click between two plans; a plan under way is not interrupted).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Final

#: The Planner's ε box step (its + and − buttons).
EPSILON_STEP: Final[float] = 0.1
#: The background thread's name.
THREAD: Final[str] = "planner-prefetch"

_lock = threading.Lock()
_wake = threading.Condition(_lock)
Job = Callable[[], object]  # one cached call (one plan); the thread makes them in order
_pending: list[tuple[int, tuple[Job, ...]]] = []  # the newest request only
_generation = 0  # bumped by every request: a request older than the newest stops between plans
_idle = threading.Event()
_idle.set()
_thread: threading.Thread | None = None


def _js_round(x: float) -> int:
    """JavaScript's ``Math.round``: the nearest integer, halves towards +∞."""
    n = math.floor(x)
    return n + 1 if x - n >= 0.5 else n


def _decimals(step: float) -> int:
    """How many decimals ``step`` shows (the frontend reads them off its string: 0.1 → 1)."""
    text = repr(step)
    if "e-" in text:
        mantissa, exp = text.split("e-")
        return len(mantissa.partition(".")[2]) + int(exp)
    return len(text.partition(".")[2].rstrip("0")) if "." in text else 0


def neighbours(epsilon: float, step: float = EPSILON_STEP) -> list[float]:
    """The ε the box's + and − (or ↑ and ↓) send next from ``epsilon``, the values above 0.

    Streamlit 1.67's number input steps on the grid of the step's decimals: with d of them it
    sends (round(ε·10^d) ± round(step·10^d)) / 10^d, ``Math.round`` in IEEE doubles (read from
    its frontend bundle, ``NumberInput``; the browser test of the step checks it). So from
    0.73 the buttons send 0.8 and 0.6 (7.3 rounds to 7), from 1.15 they send 1.3 and 1.1.

    >>> neighbours(1.0)
    [1.1, 0.9]
    >>> neighbours(0.73)
    [0.8, 0.6]
    >>> neighbours(1.15)
    [1.3, 1.1]
    >>> neighbours(0.1)
    [0.2]
    """
    d = _decimals(step)
    if d == 0:
        up, down = epsilon + step, epsilon - step
    else:
        scale = 10**d
        a, o = _js_round(epsilon * scale), _js_round(step * scale)
        up, down = (a + o) / scale, (a - o) / scale
    return [v for v in (up, down) if v > 0 and v != epsilon]


def soon(jobs: Sequence[Job]) -> None:
    """Call each of ``jobs``, in order, in the background thread (see the module's docstring).
    Each must call deterministic cached functions only, read no session state and draw nothing."""
    global _generation, _thread
    if not jobs:
        return
    with _lock:
        _generation += 1
        _pending[:] = [(_generation, tuple(jobs))]
        _idle.clear()
        if _thread is None or not _thread.is_alive():
            _quiet()
            _thread = threading.Thread(target=_run, name=THREAD, daemon=True)
            _thread.start()
        _wake.notify()


def current(generation: int) -> bool:
    """True while no newer request has come."""
    with _lock:
        return generation == _generation


def wait(timeout: float | None = None) -> bool:
    """Block until every request so far has been planned (tests and benchmarks); True when idle."""
    return _idle.wait(timeout)


#: The name Streamlit gives the thread of a script run (``ScriptRunner.start``); it ends with its runs.
SCRIPT_THREAD: Final[str] = "ScriptRunner.scriptThread"


def _after_page_runs(generation: int) -> bool:
    """Wait while any session's script run is under way (the owner is waiting for it: a plan
    made beside it takes CPU and the interpreter's lock from it); True when the request is
    still the newest, False when a newer one replaced it."""
    while current(generation):
        if not any(t.name == SCRIPT_THREAD and t.is_alive() for t in threading.enumerate()):
            return True
        time.sleep(0.02)
    return False


class _NotThisThread(logging.Filter):
    """Drop this thread's records: a cached call outside a script run warns "missing
    ScriptRunContext" (and "No runtime found" in a bare process), which here is expected."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != THREAD


_filter = _NotThisThread()


def _quiet() -> None:
    from streamlit.runtime.caching import cache_data_api
    from streamlit.runtime.scriptrunner_utils import script_run_context

    for module in (cache_data_api, script_run_context):
        logging.getLogger(module.__name__).addFilter(_filter)  # a filter added twice is kept once


def _run() -> None:
    while True:
        with _lock:
            while not _pending:
                _idle.set()
                _wake.wait()
            generation, jobs = _pending.pop()
        for job in jobs:
            if not _after_page_runs(generation):
                break
            try:
                job()
            except Exception:  # not cached: the page's own call makes it again and shows why
                continue
