"""``pages._ui.run_memo.once_per_run``: an answer is kept for the rest of one script run and
for the same key only; the next run (a rerun included) asks again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pages._ui.run_memo import once_per_run  # noqa: E402


def _script() -> None:
    import streamlit as st

    from pages._ui.run_memo import once_per_run

    calls = st.session_state.setdefault("calls", [])

    def compute(tag: str) -> str:
        calls.append(tag)
        return f"answer {tag}"

    a = once_per_run("t", "k1", lambda: compute("k1"))
    b = once_per_run("t", "k1", lambda: compute("k1"))  # same run, same key: kept
    c = once_per_run("t", "k2", lambda: compute("k2"))  # another key: asked
    st.write(a, b, c)


def test_kept_for_one_run_and_one_key_only() -> None:
    at = AppTest.from_function(_script).run()
    assert not at.exception
    assert at.session_state["calls"] == ["k1", "k2"]
    at.run()  # the next run asks again, even for the key the last run ended with
    assert at.session_state["calls"] == ["k1", "k2", "k1", "k2"]


def test_outside_a_run_every_call_computes() -> None:
    seen: list[int] = []
    for _ in range(3):
        once_per_run("t", "k", lambda: seen.append(1))
    assert len(seen) == 3


def test_a_rerun_in_the_same_thread_asks_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Streamlit runs back-to-back reruns in one thread; each run's context gets a new
    ``cursors`` dict at its start (``ScriptRunContext.reset``), which is what ties the answer
    to one run. Two runs are simulated here in this one thread."""
    import streamlit.runtime.scriptrunner as sr

    class Ctx:
        def __init__(self) -> None:
            self.cursors: dict[int, object] = {}

    seen: list[int] = []
    first = Ctx()
    monkeypatch.setattr(sr, "get_script_run_ctx", lambda: first)
    for _ in range(2):
        once_per_run("t2", "k", lambda: seen.append(1))
    assert len(seen) == 1  # one run: computed once
    first.cursors = {}  # the same context object reset for the next run
    once_per_run("t2", "k", lambda: seen.append(1))
    assert len(seen) == 2
