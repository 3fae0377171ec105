"""Issue 29, data-owner basics on the Data page: a missing-value rule per column in the form,
and a plain statement of what contribution bounding keeps and what it does to a declared
public row count."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import state as S
from planner.data.schema import Schema
from tests.app.test_persistence import _upload

ROOT = Path(__file__).resolve().parents[2]

#: 100 people × 4 years, a missing wage every 7th row.
PANEL = b"nr,year,wage,union\n" + b"".join(
    f"{p},{y},{'' if (p * 4 + y) % 7 == 0 else 1.5 + (p % 10) / 10},{'yes' if p % 3 == 0 else 'no'}\n".encode()
    for p in range(100) for y in range(4))


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def test_missing_value_rule_and_contribution_bounding_are_declared_and_explained() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at = _upload(at, "panel.csv", PANEL)
    at.multiselect(key="data:use").set_value(["nr", "wage", "union"]).run()
    at.selectbox(key="data:col:nr:kind").set_value("identifier").run()
    at.text_input(key="data:col:wage:bounds").input("0, 5")
    at.text_input(key="data:col:wage:missing").input("0")  # a missing wage counts as 0
    at.selectbox(key="data:col:union:kind").set_value("categorical").run()
    at.text_input(key="data:col:union:cats").input("yes, no")
    at.selectbox(key="data:unit").set_value("nr").run()
    at.number_input(key="data:max_rows").set_value(1)
    at.number_input(key="data:public_n").set_value(400)
    at.button(key="data:schema_save").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    fp = at.session_state[S.WORKLOAD_FP]
    schema = Schema.from_json(at.session_state[S.SCHEMAS][fp])
    wage = schema.column("wage")
    assert wage.missing.action.value == "replace" and wage.missing.value == 0.0  # today: always "drop"
    assert schema.column("union").missing.action.value == "drop"  # blank: drop
    text = " ".join(c.value for c in at.caption)
    assert "keeps 1 of them, chosen by a fixed pseudo-random order" in text
    warn = " ".join(w.value for w in at.warning)
    # 100 people, 4 rows each, at most 1 kept: 300 of the 400 rows left out (by hand)
    assert "leaves out 300 of the 400 rows" in warn and "declared public row count (400)" in warn
