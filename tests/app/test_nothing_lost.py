"""Issue 29, "nothing lost": what is set on a page is in the plan file and comes back from it;
a restored or edited workload is never replaced silently when the schema is saved again; the
Learn demos keep every control (the seed too); the query builder starts fresh; the ledger
chart steps at a raise."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import planning
from pages._ui import state as S
from planner.data.schema import Schema
from planner.planning import plan_spec
from planner.release import plan_hash
from tests.app.test_pages import declare
from tests.app.test_persistence import PEOPLE, _upload

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
CENSUS = Schema.load(ROOT / "data" / "census.schema.json")


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    return at


def _goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _plan_file(at: AppTest) -> str:
    """The PLAN.json the Planner offers for the session's settings (``planning.spec_json``,
    the document the download button holds, less the lifetime)."""
    ss = at.session_state
    s = planning.Settings(str(ss[S.MODE]), float(ss[S.EPSILON]), float(ss[S.DELTA]), str(ss[S.RULE]),
                          False, (), (), None)
    text, _, _ = planning.spec_json(SimpleNamespace(name="census (sample)"), CENSUS.to_json(), s, ss[S.WORKLOAD])
    return plan_spec.dump_plan_spec(json.loads(text))


def test_per_query_targets_are_in_the_plan_file_and_come_back() -> None:
    """The census workload carries a target per query while the Planner is in the optimal
    split (weights): today the file drops every target, and a restored session has none."""
    at = _goto(_app(), "plan_page")
    targets = {r["id"]: r["target"] for r in S.CENSUS_WORKLOAD}
    text = _plan_file(at)
    spec = plan_spec.parse_plan_spec(json.loads(text))
    assert {q: v["target"] for q, v in spec.other_mode.items()} == targets
    # the plan (and its hash) ignore them
    bare = json.loads(text)
    bare["queries"] = [{k: v for k, v in q.items() if k != "other_mode"} for q in bare["queries"]]
    plain = plan_spec.parse_plan_spec(bare)
    assert plan_hash(plan_spec.build_plan(spec).plan, CENSUS) == plan_hash(plan_spec.build_plan(plain).plan, CENSUS)
    # restored in a new session whose targets were blanked: they come back
    fresh = _goto(_app(), "plan_page")
    fresh.session_state[S.WORKLOAD] = [dict(r, target=None) for r in fresh.session_state[S.WORKLOAD]]
    fresh.file_uploader(key="planner:plan_upload").upload("PLAN.json", text.encode(), "application/json").run()
    assert not fresh.exception, [e.value for e in fresh.exception]
    assert {r["id"]: r["target"] for r in fresh.session_state[S.WORKLOAD]} == targets


def test_saving_the_schema_again_keeps_an_edited_or_restored_workload() -> None:
    at = _upload(_app(), "people.csv", PEOPLE)
    declare(at, {"age": {"bounds": "18, 90"}, "city": {"kind": "categorical", "cats": "A, B, C"}}, public_n=200)
    starter = [r["id"] for r in at.session_state[S.WORKLOAD]]
    assert starter == ["rows", "age_mean", "city_histogram"]
    # a restored plan becomes the workload (as planfiles.restore does: the new unedited origin)
    restored = [dict(r) for r in at.session_state[S.WORKLOAD]] + [
        {"id": "age_median", "kind": "median", "column": "age", "mechanism": "exponential", "weight": 1.0,
         "target": None, "scale": None, "options": {}}]
    S_fp = at.session_state[S.WORKLOAD_FP]
    at.session_state[S.WORKLOAD] = restored
    at.session_state[S.WORKLOAD_ORIGIN] = restored
    at.session_state[S.WORKLOAD_FP] = S_fp
    _goto(at, "data_page")
    # the owner widens a bound and saves the schema again
    at.text_input(key="data:col:age:bounds").input("16, 95")
    at.button(key="data:schema_save").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [r["id"] for r in at.session_state[S.WORKLOAD]] == [*starter, "age_median"]  # today: the starter again
    assert any("queries are kept" in s.value for s in at.success)


def test_a_learn_demos_seed_survives_a_visit_to_another_page() -> None:
    at = _goto(_app(), "learn_laplace_count")
    at.number_input(key="lc_seed").set_value(777).run()
    _goto(at, "plan_page")
    _goto(at, "learn_laplace_count")
    assert at.number_input(key="lc_seed").value == 777  # today: back to 2024


def test_the_builder_starts_fresh_after_a_query_is_added() -> None:
    at = _goto(_app(), "queries_page")
    at.selectbox(key="qb:kind").set_value("grouped_mean").run()
    at.selectbox(key="qb:column").set_value("income").run()
    by = next(w for w in at.multiselect if w.key.startswith("qb:opts:grouped_mean:by"))
    by.set_value(["region"]).run()
    at.text_input(key="qb:id").input("income_by_region").run()
    at.button(key="qb:add").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(r["id"] == "income_by_region" for r in at.session_state[S.WORKLOAD])
    assert at.selectbox(key="qb:kind").value == "count"  # a fresh form
    at.selectbox(key="qb:kind").set_value("grouped_mean").run()
    by = next(w for w in at.multiselect if w.key.startswith("qb:opts:grouped_mean:by"))
    assert by.value == []  # today: ["region"] carries over into the next query


def test_the_ledger_chart_steps_at_a_raise(tmp_path: Path) -> None:
    from planner.ledger import Ledger
    from planner.outputs.report import ledger_points
    from planner.privacy.accounting import Spend
    from planner.privacy.events import LaplaceEvent

    led = Ledger(f"sqlite:///{tmp_path}/chart.db")
    try:
        fp = "cd1-" + "a" * 64
        led.register_dataset(fp, "t", 1.0, 0.0, "basic")
        spend = Spend(event=LaplaceEvent(2.0), epsilon=0.5, delta=0.0)
        led.release(fp, "p1", "s", [("q", spend)], lambda: {"q": 1.0})
        led.raise_budget(fp, 3.0, 0.0, reason="a second wave of questions")
        led.release(fp, "p2", "s", [("q", spend)], lambda: {"q": 1.0})
        pts = ledger_points(led.status(fp), led.history(fp))
    finally:
        led.close()
    budget = [(p["step"], p["epsilon"]) for p in pts if p["series"] == "lifetime budget"]
    assert budget == [("start", 1.0), ("#1", 1.0), ("#2", 3.0)]  # today: 3.0 from the start
