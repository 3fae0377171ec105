"""One way for a page to show the engine's own errors: :func:`guard`.

The engine raises :class:`planner.core.errors.PlannerError` with a message that names the
field, the constraint and the fix, never a private value; a page shows that message and goes
on (or stops). Anything else is a bug and is left to Streamlit's exception view.

    with guard("Fix the workload on the Queries page first: "):
        queries = cached.parse_queries(wl, sj)          # on error: st.error, then the page stops

    with guard(stop=False, where=left) as g:
        solved = engine_call()
    if g.ok:
        left.metric(...)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import streamlit as st

from planner.core.errors import PlannerError

from . import fmt, frame


@dataclass
class Outcome:
    """What happened inside a :func:`guard` block: ``error`` is the engine's message, if any."""

    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@contextmanager
def guard(prefix: str = "", *, stop: bool = True, where: Any = None, show: str = "error",
          on_error: Callable[[str], None] | None = None) -> Iterator[Outcome]:
    """Run a block of engine calls; on a :class:`PlannerError` show its message and stop the page.

    Parameters
    ----------
    prefix : str
        Words put before the engine's message ("The plan cannot be made yet: ").
    stop : bool, default True
        Stop the page after the message (:func:`pages._ui.frame.stop`); with ``False`` the
        page goes on after the block and ``Outcome.ok`` says whether the block finished.
    where : Streamlit container, optional
        Where the message goes (a column, the sidebar); the page by default.
    show : {"error", "warning", "info", "none"}
        How the message is shown (``"none"``: not shown, e.g. when ``on_error`` keeps it).
    on_error : callable, optional
        Called with the message instead of or before showing it (a callback that keeps the
        message in session state for the next run).
    """
    out = Outcome()
    try:
        yield out
    except PlannerError as exc:
        out.error = str(exc)
        if on_error is not None:
            on_error(out.error)
        if show != "none":
            getattr(where if where is not None else st, show)(prefix + fmt.plain(out.error))
        if stop:
            frame.stop()
