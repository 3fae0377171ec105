"""Issue 31: the Planner plans ε ± the box's step in the background, so that a step finds
every rule of the comparison planned; what the page then shows is what it would have made.

The counter below counts ``plan_spec.build_plan`` (the one function every cached plan calls):
after the prefetch, a step to a neighbour calls it zero times; a change to an ε that is not a
neighbour calls it once per rule (the control that shows the counter counts).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from pages._ui import prefetch
from pages._ui import state as S
from planner.planning import plan_spec
from planner.privacy.budget import CompositionRule

ROOT = Path(__file__).resolve().parents[2]
EPS = S.widget_key(S.EPSILON, "planner")
MODE = S.widget_key(S.MODE, "planner")


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def test_neighbours_are_the_browsers_steps():
    # Streamlit 1.67's NumberInput: (Math.round(v·10) ± 1) / 10 for a step of 0.1, worked by hand;
    # tests/e2e/test_flow.py clicks the real buttons on the Planner and reads what the page got
    assert prefetch.neighbours(1.0) == [1.1, 0.9]
    assert prefetch.neighbours(1.1) == [1.2, 1.0]  # not 1.1 + 0.1 = 1.2000000000000002
    assert prefetch.neighbours(0.73) == [0.8, 0.6]  # round(7.3) = 7
    assert prefetch.neighbours(1.15) == [1.3, 1.1]  # 1.15·10 = 11.5 in doubles, rounds up
    assert prefetch.neighbours(0.1) == [0.2]  # 0.1 − 0.1 = 0 is not a valid ε
    assert prefetch.neighbours(0.04) == [0.1]  # round(0.4) = 0: + sends 0.1, − sends −0.1
    assert prefetch.neighbours(2.0, step=1.0) == [3.0, 1.0]  # a whole step: plain ± (no decimals)
    assert prefetch.neighbours(0.5, step=0.25) == [0.75, 0.25]


def _counting(monkeypatch) -> list[float]:
    """The ε of every plan the page's own run makes (the background thread's are not counted)."""
    calls: list[float] = []
    real = plan_spec.build_plan

    def counted(spec):
        if threading.current_thread().name != prefetch.THREAD:
            calls.append(spec.epsilon)
        return real(spec)

    monkeypatch.setattr(plan_spec, "build_plan", counted)
    return calls


def _planner() -> AppTest:
    st.cache_data.clear()  # nothing planned by an earlier test
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("pages/plan_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _table(at: AppTest) -> list[str]:
    return [df.value.to_csv() for df in at.dataframe]


@pytest.mark.parametrize("mode", ["weighted", "equal"])
def test_a_step_finds_the_comparison_planned(monkeypatch, mode):
    at = _planner()
    at.radio(key=MODE).set_value(mode).run()
    at.number_input(key=EPS).set_value(0.73).run()
    assert prefetch.wait(120), "the prefetch did not finish"
    calls = _counting(monkeypatch)

    step = prefetch.neighbours(0.73)[0]  # what + sends
    at.number_input(key=EPS).set_value(step).run()
    assert not at.exception, [e.value for e in at.exception]
    assert calls == [], f"planned again at the step: {calls}"
    shown = _table(at)
    assert prefetch.wait(120)

    # the same page with nothing cached: the same tables (the prefetched plans are the page's own)
    st.cache_data.clear()
    calls.clear()
    at.run()
    assert not at.exception
    assert calls and all(e == step for e in calls)
    assert _table(at) == shown

    # control: an ε that is not a neighbour is planned on the page, once per rule
    assert prefetch.wait(120)
    calls.clear()
    at.number_input(key=EPS).set_value(0.77).run()
    assert not at.exception
    expected = len(CompositionRule) if mode == "weighted" else 1
    assert [e for e in calls if e == 0.77][:expected] == [0.77] * expected


def test_the_target_mode_has_no_step(monkeypatch):
    at = _planner()
    assert prefetch.wait(120)
    at.radio(key=MODE).set_value("target").run()
    assert not at.exception
    assert prefetch.wait(120)
    calls = _counting(monkeypatch)
    at.run()
    assert calls == []  # nothing planned in the background either: nothing changes with ε


def test_a_newer_request_stops_an_older_one_between_jobs():
    assert prefetch.wait(120)
    done: list[str] = []
    started, release = threading.Event(), threading.Event()

    def first() -> None:
        started.set()
        assert release.wait(60)
        done.append("a1")

    prefetch.soon([first, lambda: done.append("a2"), lambda: done.append("a3")])
    assert started.wait(60)
    assert not prefetch.wait(0)  # busy
    prefetch.soon([lambda: done.append("b1"), lambda: 1 / 0, lambda: done.append("b3")])
    release.set()
    assert prefetch.wait(60)
    # a1 was under way and ends; a2 and a3 are dropped; a job that fails does not stop the others
    assert done == ["a1", "b1", "b3"]
