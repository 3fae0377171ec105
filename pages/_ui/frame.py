"""The app frame's last part: the sidebar's budget block, drawn after the page.

``app.py`` draws the sidebar's dataset block before the page and hands the budget block to
:func:`defer_budget`; it is drawn when the page ends (:func:`flush_budget`) or stops
(:func:`stop`, which every page uses instead of ``st.stop()``: after ``st.stop()`` Streamlit
draws nothing more). So the first page is on screen before the ledger is first opened, and the
budget the sidebar shows includes what the page just did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NoReturn

import streamlit as st

_local = threading.local()  # one script run per thread


def defer_budget(draw: Callable[[], None]) -> None:
    """Remember how to draw the sidebar's budget block for the end of this run."""
    _local.pending = draw


def flush_budget() -> None:
    """Draw the deferred budget block (once per run; nothing when there is none)."""
    draw = getattr(_local, "pending", None)
    _local.pending = None
    if draw is not None:
        draw()


def stop() -> NoReturn:
    """``st.stop()`` after drawing the sidebar's budget block."""
    flush_budget()
    st.stop()
    raise AssertionError("unreachable")  # pragma: no cover - st.stop() does not return
