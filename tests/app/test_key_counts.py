"""Count by undeclared key in the app, as an owner would do it: upload a generated file,
declare its ZIP column as a key column, build the query in the form, read on the Planner
which keys will be shown, visit the other pages, release (DuckDB, the default engine),
and find the spend (with its key δ) in the ledger. Expected numbers come from the engine (``planner.planning.statistics.keys``),
whose own tests check them by hand and against OpenDP."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import state as S
from planner.privacy.events import ThresholdedEvent
from tests.app.keys import ledger_key
from tests.app.test_pages import declare, set_lifetime
from tests.app.test_persistence import APP, PAGES, _goto, _led

FREQUENT = ["02139", "10001", "94105"]  # leading zero kept: keys are text
RARE = [f"{90000 + i}" for i in range(20)]  # one row each


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def _csv() -> bytes:
    rng = np.random.default_rng(11)
    zips = [*rng.choice(FREQUENT, size=600, p=[0.5, 0.3, 0.2]).tolist(), *RARE]
    amounts = rng.integers(0, 100, size=len(zips))
    return ("zip,amount\n" + "".join(f"{z},{a}\n" for z, a in zip(zips, amounts, strict=True))).encode()


def _release_attempt(at: AppTest) -> None:
    _goto(at, "release_page")
    at.session_state[S.CONFIRMED] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]


def test_key_count_from_upload_to_ledger() -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    # the census sample gets a lifetime budget first: the ledger then holds two datasets
    _goto(at, "plan_page")
    set_lifetime(at, "planner", 1.0, 1e-6)
    _goto(at, "data_page")
    at.radio(key=S.widget_key(S.PICKER, "data")).set_value("upload").run()
    at.file_uploader(key=f"data:uploader:{at.session_state[S.UPLOADER_VERSION]}").upload(
        "shops.csv", _csv(), "text/csv").run()
    at.multiselect(key="data:use").set_value(["zip", "amount"]).run()
    assert "key" in at.selectbox(key="data:col:zip:kind").options
    declare(at, {"zip": {"kind": "key"}, "amount": {"kind": "numeric", "bounds": "0, 100"}}, public_n=600)
    # the query, built in the form: the key count is offered for the key column
    _goto(at, "queries_page")
    at.selectbox(key="qb:kind").set_value("key_count").run()
    at.text_input(key="qb:id").input("zips").run()
    at.selectbox(key="qb:column").set_value("zip").run()
    at.button(key="qb:add").click().run()
    assert any("Added zips" in s.value for s in at.success), [e.value for e in at.error]
    for page in PAGES:  # every other page, then back: the query and the schema stay
        _goto(at, page)
    _goto(at, "plan_page")
    at.number_input(key=S.widget_key(S.EPSILON, "planner")).set_value(1.0).run()
    at.selectbox(key=S.widget_key(S.RULE, "planner")).set_value("zcdp").run()
    text = " ".join(m.value for m in at.markdown)
    assert "zips: which keys will be shown" in text and "A key held by one person is shown with probability" in text
    keep = next(df.value for df in at.dataframe if "chance it is shown" in df.value.columns)
    assert float(keep["chance it is shown"].iloc[0]) < 1e-6  # a 1-row key: at most the key δ (1e-7)
    set_lifetime(at, "planner", 2.0, 1e-6, "zcdp")
    fp = ledger_key(at)
    # DuckDB, the default engine, computes the key counts
    _release_attempt(at)
    assert any(s.value.startswith("Released (release #") for s in at.success), [e.value for e in at.error]
    assert any("computed by the **duckdb** backend" in c.value for c in at.caption)
    (rec,) = _led().releases(fp)
    ans = rec.answers["zips"]
    assert isinstance(ans, dict) and set(FREQUENT) <= set(ans["keys"])  # 120+ rows each: far above the threshold
    assert not set(ans["keys"]) & set(RARE)  # one row each: shown with probability ≤ 1e-7 each
    (spend,) = [s.spend for s in rec.spends if s.query_id == "zips"]
    assert isinstance(spend.event, ThresholdedEvent) and spend.event.delta == pytest.approx(1e-7)
    assert not any(isinstance(s.event, ThresholdedEvent) for s in rec.spends if s.query_id != "zips")
    assert _led().status(fp).epsilon_spent == pytest.approx(1.0, rel=1e-6)
