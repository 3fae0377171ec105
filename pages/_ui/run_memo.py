"""What one script run asks for several times, found once in that run.

A page run asks for the signed-in principal about eight times (the frame, the sidebar, every
ledger call) and for the active dataset twice (the sidebar and the page); each answer read the
ledger and the secrets, or copied the table out of Streamlit's cache, again.
:func:`once_per_run` keeps the answer for the rest of the run only: it is tied to the run's own
``ScriptRunContext.cursors`` (a new dict at every run's start, held here so it cannot be
mistaken for a later one) and to a key of everything the answer is made from. The next run, a
rerun in the same thread included, asks again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")

_memo = threading.local()  # a fragment run on a worker thread keeps its own


def once_per_run(name: str, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, or its answer from earlier in this script run for the same ``key``.

    Outside a script run (no context), ``compute()`` every time."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None:
        return compute()
    memo = getattr(_memo, name, None)
    if memo is not None and memo[0] is ctx.cursors and memo[1] == key:
        return memo[2]  # type: ignore[no-any-return]
    value = compute()
    setattr(_memo, name, (ctx.cursors, key, value))
    return value
