"""Issue 29: the guided path for a first-time owner (Start here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import state as S

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def test_the_guide_walks_the_five_steps_with_a_verdict_for_every_question_and_no_expert_control() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/guide_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(m.value for m in at.markdown)
    for n, title in enumerate(["Upload your table", "Say what is public", "Pick the questions", "See what is usable",
                               "Release"], start=1):
        assert f"**{n}. {title}" in text
    # every question of the census workload carries a verdict, in words
    for r in S.CENSUS_WORKLOAD:
        assert f"**{r['id']}**" in text
    assert "usable" in text
    # the expert controls are not on this path
    labels = [w.label for w in (*at.selectbox, *at.radio, *at.toggle)]
    assert not any("rule" in label.lower() or "split" in label.lower() or "mechanism" in label.lower()
                   for label in labels), labels
    # ε is chosen here, and is the Planner's ε (one durable value)
    at.number_input(key=S.widget_key(S.EPSILON, "guide")).set_value(0.5).run()
    at.switch_page("pages/plan_page.py").run()
    assert at.number_input(key=S.widget_key(S.EPSILON, "planner")).value == 0.5
