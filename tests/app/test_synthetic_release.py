"""AppTest: a synthetic table released from the Release page (issue 30): its preview and
CSV download, stored rows shown again on a reload, and the owner-only comparison off by
default and labelled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import state as S
from tests.app.keys import ledger_key

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
WORKLOAD = [{"id": "synth", "kind": "synthetic_data", "column": None, "mechanism": "mst", "weight": 1.0,
             "target": None, "options": {"columns": ["age", "sex", "region"], "rows": 250, "bins": 6}}]


@pytest.fixture(autouse=True)
def _ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def _run(at: AppTest, page: str | None = None) -> AppTest:
    if page is not None:
        at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_release_page_previews_downloads_and_compares_a_synthetic_table() -> None:
    at = AppTest.from_file(APP, default_timeout=180)
    _run(at)
    at.session_state[S.WORKLOAD] = [dict(r) for r in WORKLOAD]
    at.session_state[S.RULE] = "zcdp"
    _run(at, "release_page")
    at.number_input(key="release:lifetime_eps").set_value(3.0)
    at.number_input(key="release:lifetime_delta").set_value(1e-5)
    at.button(key="release:lifetime_set").click()
    _run(at)
    at.session_state[S.CONFIRMED] = True
    _run(at)
    assert not at.error, [e.value for e in at.error]
    assert any("Released" in s.value for s in at.success)
    assert any(h.value == "Synthetic table: synth" for h in at.subheader)
    frames = [d.value for d in at.dataframe if list(d.value.columns) == ["age", "sex", "region"]]
    assert frames and len(frames[0]) == 20  # the first rows
    labels = [b.label for b in at.get("download_button")]
    assert "Download the synthetic table synth (CSV)" in labels
    from pages._ui.cached import ledger

    spent = ledger().status(ledger_key(at))
    assert spent.releases == 1
    # the owner-only comparison: off by default, then labelled and drawn
    tog = at.toggle(key="release:synthetic:synth:compare")
    assert tog.value is False
    assert not any("not private" in e.value for e in at.error)
    tog.set_value(True)
    _run(at)
    assert any("not private, do not share" in e.value for e in at.error)
    specs = [json.dumps(json.loads(c.proto.spec)) for c in at.get("vega_lite_chart")]
    assert any('"rect"' in sp for sp in specs) and any('"xOffset"' in sp for sp in specs)
    # a fresh session (a reload) shows the stored rows and spends nothing
    at2 = AppTest.from_file(APP, default_timeout=180)
    _run(at2)
    at2.session_state[S.WORKLOAD] = [dict(r) for r in WORKLOAD]
    at2.session_state[S.RULE] = "zcdp"
    _run(at2, "release_page")
    assert any("already released" in s.value for s in at2.success)
    assert any(h.value == "Synthetic table: synth" for h in at2.subheader)
    assert ledger().status(ledger_key(at2)).releases == 1
