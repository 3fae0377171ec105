"""Issue 12: what the owner sets stays set, on every page, and is what gets released.

Each test sets values through the widgets (as a person would), visits every other page,
comes back, and checks that the widget still shows the value and that the Release page and
the ledger use it. Releases are checked in the ledger: the recorded spends, composed under
the dataset's rule, equal the plan's ε, and the release's plan hash equals the hash of the
plan the engine makes from the values that were set (``planner.release.plan_hash``).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import state as S
from planner import release as rel
from planner.data.schema import Schema
from planner.planning import workload
from planner.planning.queries import queries_from_list
from planner.privacy.accounting import total_epsilon
from tests.app.keys import ledger_key
from tests.app.test_pages import declare, set_lifetime

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
PAGES = ["data_page", "queries_page", "accuracy_page", "plan_page", "release_page", "ledger_page"]
CENSUS_SCHEMA = Schema.load(ROOT / "data" / "census.schema.json")
HEX = re.compile(r"[0-9a-f]{12,}")


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def _goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _tour(at: AppTest, start: str) -> None:
    """Visit every other page (a widget's state is deleted when its page is not drawn)."""
    for p in PAGES:
        if p != start:
            _goto(at, p)
    _goto(at, start)


def _w(durable: str, page: str) -> str:
    return S.widget_key(durable, page)


def _led():
    from pages._ui.cached import ledger

    return ledger()


def _fp(at: AppTest) -> str:
    return ledger_key(at)


def _messages(at: AppTest) -> str:
    return " ".join(e.value for e in [*at.error, *at.warning, *at.info, *at.success])


# ----------------------------------------------------------------------------- planner
def test_planner_settings_survive_a_visit_to_every_page():
    at = _goto(_app(), "plan_page")
    at.number_input(key=_w(S.EPSILON, "planner")).set_value(0.5).run()
    at.number_input(key=_w(S.DELTA, "planner")).set_value(1e-7).run()
    at.selectbox(key=_w(S.RULE, "planner")).set_value("zcdp").run()
    at.toggle(key=_w(S.RELATIVE, "planner")).set_value(False).run()
    at.radio(key=_w(S.MODE, "planner")).set_value("target").run()
    assert not at.error, [e.value for e in at.error]
    for _ in range(2):
        _tour(at, "plan_page")
        assert at.number_input(key=_w(S.EPSILON, "planner")).value == 0.5
        assert at.number_input(key=_w(S.DELTA, "planner")).value == 1e-7
        assert at.selectbox(key=_w(S.RULE, "planner")).value == "zcdp"
        assert at.toggle(key=_w(S.RELATIVE, "planner")).value is False
        assert at.radio(key=_w(S.MODE, "planner")).value == "target"
    sidebar = " ".join(m.value for m in at.sidebar.markdown)
    assert "least ε meeting every target" in sidebar and "zero-concentrated differential privacy (zCDP)" in sidebar and "δ = 1e-07" in sidebar
    _goto(at, "release_page")
    header = next(m.value for m in at.markdown if m.value.startswith("**The plan in force**"))
    assert "least ε meeting every target" in header and "**zero-concentrated differential privacy (zCDP)**" in header and "δ = 1e-07" in header


def test_accuracy_choices_survive_a_visit_to_every_page():
    at = _goto(_app(), "accuracy_page")
    at.selectbox(key=_w(S.ACC_QUERY, "accuracy")).set_value("age_median").run()
    from pages._ui.cached import EPS_GRID

    chosen = EPS_GRID[5]
    at.select_slider(key=_w(S.ACC_EPS, "accuracy")).set_value(chosen).run()
    assert not at.exception
    _tour(at, "accuracy_page")
    assert at.selectbox(key=_w(S.ACC_QUERY, "accuracy")).value == "age_median"
    assert at.select_slider(key=_w(S.ACC_EPS, "accuracy")).value == chosen
    assert any(f"typical error at ε = {chosen:.3g}" in c.value for c in at.caption)


def test_invalid_epsilon_and_delta_show_a_message_naming_them():
    at = _goto(_app(), "plan_page")
    at.number_input(key=_w(S.EPSILON, "planner")).set_value(0.0).run()
    assert at.error and "ε (this release) must be > 0" in at.error[0].value
    at.number_input(key=_w(S.EPSILON, "planner")).set_value(1.0).run()
    at.number_input(key=_w(S.DELTA, "planner")).set_value(1.5).run()
    assert at.error and "δ must satisfy 0 ≤ δ < 1" in at.error[0].value
    _goto(at, "release_page")  # the Release page says the same, and offers no release
    assert at.error and "δ must satisfy" in at.error[0].value
    assert not any(b.key == "release:open" for b in at.button)


def test_tiny_epsilon_warns_that_answers_will_be_noise():
    at = _goto(_app(), "plan_page")
    assert not any("mostly noise" in w.value for w in at.warning)
    at.number_input(key=_w(S.EPSILON, "planner")).set_value(0.001).run()
    noisy = [w.value for w in at.warning if "mostly noise" in w.value]
    # census, ε = 0.001 split by the planner: the count's 95% error alone is about ±66/0.001 ≈ ±65,000
    # rows (Allocation table at ε = 1: ±65.75, scaling as 1/ε), more than half of the public n = 50,000.
    assert noisy and "people" in noisy[0]


def test_pinned_shares_survive_and_are_what_the_release_plans():
    at = _goto(_app(), "plan_page")
    # the pins editor's on_change writes exactly this (AppTest cannot type into a data_editor)
    at.session_state[S.PINS] = {"people": 0.2}
    at.run()
    _tour(at, "plan_page")
    table = at.dataframe[0].value  # the allocation table
    assert float(table.loc[table["id"] == "people", "share ε"].iloc[0]) == 0.2
    pins = at.dataframe[1].value
    assert float(pins.loc[pins["item"] == "people", "fixed share"].iloc[0]) == 0.2
    set_lifetime(at, "planner", 2.0, rule="rdp")
    _release(at)
    rec = _led().releases(_fp(at))[-1]
    qs = queries_from_list([{k: v for k, v in r.items() if k != "target" and v is not None}
                            for r in S.CENSUS_WORKLOAD], CENSUS_SCHEMA)
    expected = workload.plan(qs, CENSUS_SCHEMA, 1.0, 1e-6, "rdp", workload.default_error_scales(qs, CENSUS_SCHEMA),
                             {"people": 0.2})
    assert rec.plan_hash == rel.plan_hash(expected, CENSUS_SCHEMA)
    assert [s.epsilon for s in rec.spends if s.query_id == "people"] == [0.2]


# ----------------------------------------------------------------------------- queries
def test_added_query_and_edited_weight_survive_and_reach_the_release():
    at = _goto(_app(), "queries_page")
    at.selectbox(key="qb:kind").set_value("mean").run()  # the form redraws for the kind picked
    at.text_input(key="qb:id").input("hours_mean").run()
    at.selectbox(key="qb:column").set_value("hours_worked").run()
    at.selectbox(key="qb:mechanism").set_value("laplace").run()
    at.number_input(key="qb:weight").set_value(3.0).run()
    at.button(key="qb:add").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    # a weight edit in the table: the editor's on_change writes exactly this (AppTest cannot
    # type into a data_editor, docs/engineering.md §4); the browser test types it for real
    rows = [dict(r) for r in at.session_state[S.WORKLOAD]]
    rows[2]["weight"] = 10.0  # income_mean
    at.session_state[S.WORKLOAD] = rows
    for _ in range(2):
        _tour(at, "queries_page")
        table = at.dataframe[0].value
        assert list(table["id"])[-1] == "hours_mean"
        assert float(table.loc[table["id"] == "income_mean", "weight"].iloc[0]) == 10.0
        assert any("8 valid queries (edited)" in s.value for s in at.success)
    _goto(at, "plan_page")
    set_lifetime(at, "planner", 2.0, rule="rdp")
    _goto(at, "release_page")
    at.session_state[S.CONFIRMED] = True
    at.run()
    assert not at.error, [e.value for e in at.error]
    rec = _led().releases(_fp(at))[-1]
    assert {s.query_id.split(":")[0] for s in rec.spends} >= {"hours_mean", "income_mean"}
    # the plan hash recorded is the one of the plan made from the values set on the pages
    qs = queries_from_list(S.query_dicts(rows, "weighted"), CENSUS_SCHEMA)
    expected = workload.plan(qs, CENSUS_SCHEMA, 1.0, 1e-6, "rdp", workload.default_error_scales(qs, CENSUS_SCHEMA))
    assert rec.plan_hash == rel.plan_hash(expected, CENSUS_SCHEMA)


# ----------------------------------------------------------------------------- data
def _upload(at: AppTest, name: str, data: bytes) -> AppTest:
    _goto(at, "data_page")
    at.radio(key=_w(S.PICKER, "data")).set_value("upload").run()
    at.file_uploader(key=f"data:uploader:{at.session_state[S.UPLOADER_VERSION]}").upload(name, data, "text/csv").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


PEOPLE = b"person_id,age,city,smoker\n" + b"".join(
    f"{i},{20 + i % 60},{'ABC'[i % 3]},{'yes' if i % 4 == 0 else 'no'}\n".encode() for i in range(200))


def test_upload_stays_active_on_every_page_until_another_is_picked():
    at = _upload(_app(), "people.csv", PEOPLE)
    declare(at, {"age": {"bounds": "18, 90"}, "city": {"kind": "categorical", "cats": "A, B, C"}}, public_n=200)
    assert not at.error, [e.value for e in at.error]
    for _ in range(2):
        for page in PAGES:
            _goto(at, page)
            sidebar = " ".join(m.value for m in at.sidebar.markdown)
            assert "people.csv" in sidebar and "your upload" in sidebar, page
    _goto(at, "queries_page")
    ids = list(at.dataframe[0].value["id"])
    assert ids == ["rows", "age_mean", "city_histogram"]  # the starting workload for the declared columns
    _goto(at, "data_page")
    assert at.multiselect(key="data:use").value == ["age", "city"]  # the declaration is still in the form
    assert at.text_input(key="data:col:age:bounds").value == "18, 90"
    # another dataset, then back to the upload: its schema and workload are where they were left
    at.radio(key=_w(S.PICKER, "data")).set_value("sample").run()
    at.selectbox(key="data:sample").set_value("census").run()  # the starter workload is unedited: no question
    assert at.session_state[S.ACTIVE] == {"source": "sample", "sample": "census"}
    at.radio(key=_w(S.PICKER, "data")).set_value("upload").run()
    at.button(key="data:reupload").click().run()
    assert at.session_state[S.ACTIVE] == {"source": "upload"}
    assert at.multiselect(key="data:use").value == ["age", "city"]


def test_relative_errors_without_a_public_row_count_say_so_and_name_the_fix():
    """The toggle "relative to a public size" is on by default; without a public row count
    the engine has no public sizes (planner.planning.workload.default_error_scales is None) and the
    split compares absolute errors: the Planner says so and names the field to fill."""
    def said(at: AppTest) -> list[str]:
        return [i.value for i in at.info if "compared as they are" in i.value]

    at = _goto(_app(), "plan_page")
    assert said(at) == []  # the census sample declares n = 50,000
    at = _upload(at, "people.csv", PEOPLE)
    declare(at, {"age": {"bounds": "18, 90"}, "city": {"kind": "categorical", "cats": "A, B, C"}})
    _goto(at, "plan_page")
    shown = said(at)
    assert len(shown) == 1 and "public (approximate) row count on the Data page" in shown[0]
    at.toggle(key=_w(S.RELATIVE, "planner")).set_value(False).run()  # off: nothing to say
    assert said(at) == []
    _goto(at, "data_page")
    at.number_input(key="data:public_n").set_value(200)
    at.button(key="data:schema_save").click().run()
    _goto(at, "plan_page")
    at.toggle(key=_w(S.RELATIVE, "planner")).set_value(True).run()
    assert said(at) == []  # declared: the errors are relative


def test_switching_dataset_asks_before_discarding_an_edited_workload():
    at = _goto(_app(), "queries_page")
    rows = [dict(r) for r in at.session_state[S.WORKLOAD]][:3]  # an edit: four queries dropped
    at.session_state[S.WORKLOAD] = rows
    _goto(at, "data_page")
    at.selectbox(key="data:sample").set_value("survey").run()
    assert any("You edited the workload" in w.value for w in at.warning)
    assert at.session_state[S.ACTIVE] == {"source": "sample", "sample": "census"}  # not switched yet
    at.button(key="data:switch_cancel").click().run()
    assert at.session_state[S.ACTIVE]["sample"] == "census"
    assert at.session_state[S.WORKLOAD] == rows
    at.selectbox(key="data:sample").set_value("survey").run()
    at.button(key="data:switch_confirm").click().run()
    assert at.session_state[S.ACTIVE]["sample"] == "survey"
    _goto(at, "queries_page")
    assert list(at.dataframe[0].value["id"]) == [r["id"] for r in S.SURVEY_WORKLOAD]
    # an unedited workload switches without asking
    _goto(at, "data_page")
    at.selectbox(key="data:sample").set_value("census").run()
    assert at.session_state[S.ACTIVE]["sample"] == "census"
    assert not any("You edited the workload" in w.value for w in at.warning)


def test_bad_upload_error_shows_once_and_keeps_the_active_dataset():
    at = _upload(_app(), "ragged.csv", b"a,b,c\n1,2,3\n4,5\n6,7,8,9\n")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("ragged.csv cannot be used:"), errors
    assert not at.sidebar.error
    assert at.session_state[S.ACTIVE] == {"source": "sample", "sample": "census"}
    _goto(at, "plan_page")  # other pages keep working on the census sample, and show no error
    assert not at.error, [e.value for e in at.error]


def test_schema_problems_are_listed_all_at_once():
    at = _upload(_app(), "people.csv", PEOPLE)
    declare(at, {"age": {"bounds": "90, 18"}, "city": {"kind": "categorical", "cats": ""},
                 "smoker": {"kind": "numeric", "bounds": "zero, one"}})
    assert len(at.error) == 1
    text = at.error[0].value
    assert "3 problems to fix" in text
    assert "column 'age'" in text and "swap them" in text
    assert "column 'city'" in text and "category list" in text
    assert "column 'smoker'" in text and "two numbers" in text


# ----------------------------------------------------------------------------- budget
def test_lifetime_budget_is_set_once_and_raised_only_with_a_recorded_reason():
    at = _goto(_app(), "plan_page")
    assert any("No lifetime budget" in i.value for i in at.info)
    assert any("raised by a deliberate decision that is recorded" in m.value for m in at.markdown)
    set_lifetime(at, "planner", 2.0, 1e-6, "basic")
    fp = _fp(at)
    status = _led().status(fp)
    assert (status.epsilon_total, status.delta_total, status.rule.value) == (2.0, 1e-6, "basic")
    # the rule in force is now the dataset's: the selector is gone, the page states it
    assert not any(s.key == _w(S.RULE, "planner") for s in at.selectbox)
    assert any("accounted under **basic composition**" in c.value for c in at.caption)
    _goto(at, "ledger_page")
    at.number_input(key="ledger:raise_eps").set_value(3.0)
    at.button(key="ledger:raise").click().run()
    assert at.error and "needs a reason" in at.error[0].value
    assert _led().status(fp).epsilon_total == 2.0
    at.number_input(key="ledger:raise_eps").set_value(3.0)
    at.text_input(key="ledger:raise_reason").input("board decision 12, second publication")
    at.button(key="ledger:raise").click().run()
    assert not at.error, [e.value for e in at.error]
    assert _led().status(fp).epsilon_total == 3.0
    assert [c.reason for c in _led().budget_changes(fp)] == ["board decision 12, second publication"]
    assert "board decision 12" in " ".join(str(v) for v in at.dataframe[0].value["reason"])


def test_over_budget_release_is_disabled_with_the_reason_in_plain_words():
    at = _goto(_app(), "plan_page")
    at.selectbox(key=_w(S.RULE, "planner")).set_value("basic").run()
    set_lifetime(at, "planner", 0.3, 1e-6, "basic")
    # ε = 1 > 0.3: the Planner says so at once and offers to plan within what remains
    assert at.error and "needs ε = 1 under the basic rule" in at.error[0].value
    _goto(at, "release_page")
    button = at.button(key="release:open")
    assert button.disabled
    reason = at.error[0].value
    assert "needs ε = 1 under the basic rule, but only ε = 0.3 of the lifetime budget ε = 0.3 remains" in reason
    assert "Lower this release's ε" in reason and "drop queries" in reason
    assert "tighter" not in reason  # basic, advanced and RDP charge the same here (rule comparison above)
    assert not HEX.search(reason) and "−" not in reason and "-0." not in reason
    assert _led().status(_fp(at)).releases == 0
    # the Planner's button finds the most that fits: ε = 0.3 under basic (the whole remainder)
    _goto(at, "plan_page")
    at.button(key="planner:fit").click().run()
    assert at.session_state[S.EPSILON] == pytest.approx(0.3, rel=1e-3)
    assert at.session_state[S.EPSILON] <= 0.3
    assert any("Fits the lifetime budget" in s.value for s in at.success)
    _goto(at, "release_page")
    assert not at.button(key="release:open").disabled


def _release(at: AppTest) -> None:
    _goto(at, "release_page")
    assert not at.button(key="release:open").disabled, _messages(at)
    at.session_state[S.CONFIRMED] = True
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(s.value.startswith("Released (release #") for s in at.success)


def _release_census_plan(epsilon: float, rule: str, lifetime: float) -> tuple[AppTest, str]:
    """ε and the rule set on the Planner, the lifetime budget set under that rule, every page
    visited, then the release: (the session, the dataset's ledger key)."""
    at = _goto(_app(), "plan_page")
    at.number_input(key=_w(S.EPSILON, "planner")).set_value(epsilon).run()
    at.selectbox(key=_w(S.RULE, "planner")).set_value(rule).run()
    set_lifetime(at, "planner", lifetime, 1e-6, rule)
    _tour(at, "plan_page")
    fp = _fp(at)
    _release(at)
    return at, fp


def _census_weighted_plan(epsilon: float, rule: str) -> workload.Plan:
    """The engine's plan of the census starting workload (weights, relative errors)."""
    rows = [{k: v for k, v in r.items() if k != "target" and v is not None} for r in S.CENSUS_WORKLOAD]
    qs = queries_from_list(rows, CENSUS_SCHEMA)
    return workload.plan(qs, CENSUS_SCHEMA, epsilon, 1e-6, rule, workload.default_error_scales(qs, CENSUS_SCHEMA))


def test_releases_spend_exactly_the_plan_under_the_rule_until_the_budget_is_used_up():
    at, fp = _release_census_plan(0.5, "zcdp", 1.2)
    led = _led()
    first = led.releases(fp)[-1]
    plan1 = _census_weighted_plan(0.5, "zcdp")
    assert first.plan_hash == rel.plan_hash(plan1, CENSUS_SCHEMA)
    # the ledger's spend of this release, composed under zCDP, is the plan's ε (0.5)
    assert total_epsilon([s.spend for s in first.spends], "zcdp", 1e-6) == pytest.approx(0.5, rel=1e-9)
    assert led.status(fp).epsilon_spent == pytest.approx(0.5, rel=1e-9)
    # target mode: the released plan is the one that meets every target at the least ε
    _goto(at, "plan_page")
    at.radio(key=_w(S.MODE, "planner")).set_value("target").run()
    _tour(at, "plan_page")
    _release(at)
    second = led.releases(fp)[-1]
    qs_t = queries_from_list([{k: v for k, v in r.items() if k != "weight"} for r in S.CENSUS_WORKLOAD], CENSUS_SCHEMA)
    res = workload.plan_for_targets(qs_t, CENSUS_SCHEMA, 1e-6, "zcdp")
    assert second.plan_hash == rel.plan_hash(res.plan, CENSUS_SCHEMA)
    assert total_epsilon([s.spend for s in second.spends], "zcdp", 1e-6) == pytest.approx(res.total_epsilon, rel=1e-9)
    # a third release at ε = 1.2 (the whole lifetime budget on its own) no longer fits beside the
    # two already spent: refused before anything is recorded
    _goto(at, "plan_page")
    at.radio(key=_w(S.MODE, "planner")).set_value("weighted").run()
    at.number_input(key=_w(S.EPSILON, "planner")).set_value(1.2).run()
    _goto(at, "release_page")
    assert at.button(key="release:open").disabled
    assert led.status(fp).releases == 2


def _gaussian_census_plan(epsilon: float) -> AppTest:
    """The census starting workload with Gaussian noise, at ``epsilon`` under zCDP (Planner page)."""
    at = _goto(_app(), "plan_page")
    gauss = {"count": "discrete_gaussian", "histogram": "discrete_gaussian", "sum": "gaussian", "mean": "gaussian"}
    at.session_state[S.WORKLOAD] = [dict(r, mechanism=gauss.get(r["kind"], r["mechanism"]))
                                    for r in S.CENSUS_WORKLOAD]
    at.number_input(key=_w(S.EPSILON, "planner")).set_value(epsilon).run()
    at.selectbox(key=_w(S.RULE, "planner")).set_value("zcdp").run()
    return at


def test_a_second_gaussian_release_under_zcdp_says_why_it_spends_less_than_its_own_epsilon():
    """Found in the browser (session 9): the Release header said ε = 0.5 while "This release"
    and the confirmation said 0.27, with no word on why. Gaussian noise composes by ρ, so a
    second release grows the spent total by less than its own ε; the page now says so."""
    at = _gaussian_census_plan(0.5)
    set_lifetime(at, "planner", 2.0, 1e-6, "zcdp")
    _goto(at, "release_page")
    assert not [c.value for c in at.caption if "On its own this plan costs" in c.value]  # nothing composes yet
    _release(at)
    _goto(at, "plan_page")
    at.number_input(key=_w(S.EPSILON, "planner")).set_value(0.4).run()
    _goto(at, "release_page")
    notes = [c.value for c in at.caption if "On its own this plan costs" in c.value]
    grows = next(m.value for m in at.metric if m.label == "This release")
    assert len(notes) == 1, notes
    assert "costs ε = 0.4 " in notes[0] and "under zero-concentrated differential privacy (zCDP)" in notes[0] and f"grows by ε = {grows}." in notes[0]
    # what the ledger then records: the spent total grows by the shown amount, less than 0.4
    before = _led().status(_fp(at)).epsilon_spent
    _release(at)
    growth = _led().status(_fp(at)).epsilon_spent - before
    assert float(grows) == pytest.approx(growth, abs=5e-5) and growth < 0.4


def test_a_first_release_at_a_larger_lifetime_delta_is_explained_without_earlier_releases():
    """Found in the browser (session 10): with the lifetime δ 1e-5 above the plan's 1e-6, the
    Planner said a first release spent less "because the rule composes it with the earlier
    releases"; there were none. The lifetime δ is the reason, and both pages now say so."""
    at = _gaussian_census_plan(1.0)
    set_lifetime(at, "planner", 3.0, 1e-5, "zcdp")
    (fits,) = [s.value for s in at.success if s.value.startswith("Fits the lifetime budget")]
    assert "at the lifetime δ = 1e-05 so the spent total grows by" in fits, fits
    assert "earlier releases" not in fits and "spent before" not in fits
    _goto(at, "release_page")
    (note,) = [c.value for c in at.caption if "On its own this plan costs" in c.value]
    assert "costs ε = 1 (δ = 1e-06)" in note and "spent before" not in note, note


# ----------------------------------------------------------------------------- wide files
def test_wide_upload_is_usable_columns_ignored_by_default_and_bulk_declared(capsys):
    rng = np.random.default_rng(3)
    n_rows, n_cols = 500, 300
    header = ",".join(f"v{i:03d}" for i in range(n_cols))
    body = "\n".join(",".join(str(int(x)) for x in row) for row in rng.integers(0, 100, (n_rows, n_cols)))
    at = _app()
    t0 = time.perf_counter()
    _upload(at, "wide.csv", (header + "\n" + body + "\n").encode())
    t_upload = time.perf_counter() - t0
    assert not at.error, [e.value for e in at.error]
    assert at.multiselect(key="data:use").value == []  # every column ignored until a query needs it
    widgets_before = len(at.text_input)
    at.multiselect(key="data:bulk_cols").set_value([f"v{i:03d}" for i in range(40)])
    at.selectbox(key="data:bulk_kind").set_value("numeric")
    at.text_input(key="data:bulk_bounds").input("0, 100")
    t0 = time.perf_counter()
    at.button(key="data:bulk_apply").click().run()
    at.button(key="data:schema_save").click().run()
    t_save = time.perf_counter() - t0
    assert not at.exception and not at.error, [e.value for e in at.error]
    fp = at.session_state[S.WORKLOAD_FP]
    schema = Schema.from_json(at.session_state[S.SCHEMAS][fp] if fp in at.session_state[S.SCHEMAS]
                              else next(iter(at.session_state[S.SCHEMAS].values())))
    assert len(schema.columns) == 40 and all(c.bounds == (0.0, 100.0) for c in schema.columns)
    assert any("40 column(s) declared; 260 other column(s) of the file are ignored" in c.value for c in at.caption)
    t0 = time.perf_counter()
    _goto(at, "plan_page")
    t_plan = time.perf_counter() - t0
    assert not at.error, [e.value for e in at.error]
    with capsys.disabled():
        print(f"\n300-column upload: first run {t_upload:.2f} s ({widgets_before} text inputs drawn); "
              f"bulk declare + save {t_save:.2f} s; Planner {t_plan:.2f} s")


def test_a_secret_sample_declared_on_the_data_page_is_planned_and_spent_for_the_population():
    # PEOPLE as a secret Poisson sample at rate 0.1 (add/remove): the Data page's field writes
    # "sampling" into the schema; the lifetime budget is registered with it; the release spends
    # the plan's base (sample) budget and the ledger counts its population cost, amplified once
    # (planner.privacy.sampling: ln(1 + q(e^ε − 1)), BBG18 Thm 9), never more than ε = 1.
    import math

    at = _upload(_app(), "people.csv", PEOPLE)
    at.number_input(key="data:sample_rate").set_value(0.1)
    declare(at, {"age": {"kind": "numeric", "bounds": "0, 100"}})
    fp = at.session_state[S.WORKLOAD_FP]
    schema = Schema.from_json(at.session_state[S.SCHEMAS][fp])
    assert schema.sampling is not None and schema.sampling.rate == 0.1
    _tour(at, "data_page")  # the declaration survives a tour
    assert at.number_input(key="data:sample_rate").value == 0.1
    _goto(at, "plan_page")
    at.number_input(key=_w(S.EPSILON, "planner")).set_value(1.0).run()
    set_lifetime(at, "planner", 1.0, delta=1e-6, rule="basic")
    assert _led().status(ledger_key(at)).sampling is not None
    _release(at)
    status = _led().status(ledger_key(at))
    spent_sample = status.epsilon_spent_sample
    assert spent_sample > 1.0  # the sample may spend more than ε: base ε = ln(1 + (e − 1)/0.1) ≈ 2.94
    assert status.epsilon_spent == pytest.approx(math.log1p(0.1 * math.expm1(spent_sample)), rel=1e-9)
    assert status.epsilon_spent <= 1.0 + 1e-9


def test_the_optimal_accountant_is_a_lifetime_rule_and_the_release_spends_under_it():
    """The optimal accountant (``pld``) is offered wherever a rule is chosen: planned,
    set as the dataset's lifetime rule, released; the ledger composes the release's spends
    under it to the plan's ε."""
    assert "pld" in S.RULES
    _, fp = _release_census_plan(0.5, "pld", 1.2)
    led = _led()
    assert led.status(fp).rule.value == "pld"
    rel_ = led.releases(fp)[-1]
    plan = _census_weighted_plan(0.5, "pld")
    assert rel_.plan_hash == rel.plan_hash(plan, CENSUS_SCHEMA)
    spent = total_epsilon([s.spend for s in rel_.spends], "pld", 1e-6)
    assert spent <= 0.5 * (1 + 1e-9) and spent == pytest.approx(0.5, rel=1e-6)
    assert led.status(fp).epsilon_spent == pytest.approx(spent, rel=1e-12)
