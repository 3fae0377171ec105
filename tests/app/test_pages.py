"""AppTest checks of the app frame and the six planning pages on the bundled samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import state as S
from planner.privacy.accountants import rule
from tests.app.keys import ledger_key

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
PAGES = ["data_page", "queries_page", "accuracy_page", "plan_page", "release_page", "ledger_page"]
ACC_VIEW = S.widget_key(S.ACC_DATA_VIEW, "accuracy")
ACC_QUERY = S.widget_key(S.ACC_QUERY, "accuracy")
PICKER = S.widget_key(S.PICKER, "data")
UPLOADER = "data:uploader:0"


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")
    # one Ledger per process and URL: the URL differs per test, so each test gets its own.


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def _goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _status(at: AppTest):
    from pages._ui.cached import ledger

    return ledger().status(ledger_key(at))


def set_lifetime(at: AppTest, page: str, epsilon: float, delta: float = 1e-6, rule: str | None = None) -> AppTest:
    """Set the lifetime budget through the form on ``page`` (planner or release)."""
    at.number_input(key=f"{page}:lifetime_eps").set_value(epsilon)
    at.number_input(key=f"{page}:lifetime_delta").set_value(delta)
    if rule is not None:
        at.selectbox(key=f"{page}:lifetime_rule").set_value(rule)
    at.button(key=f"{page}:lifetime_set").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def declare(at: AppTest, columns: dict[str, dict[str, str]], public_n: int = 0) -> AppTest:
    """On the Data page: use ``columns`` ({name: {"kind":…, "bounds":…, "cats":…}}) and save."""
    at.multiselect(key="data:use").set_value(list(columns)).run()
    for name, spec in columns.items():
        if "kind" in spec:
            at.selectbox(key=f"data:col:{name}:kind").set_value(spec["kind"]).run()
        if "bounds" in spec:
            at.text_input(key=f"data:col:{name}:bounds").input(spec["bounds"])
        if "cats" in spec:
            at.text_input(key=f"data:col:{name}:cats").input(spec["cats"])
    if public_n:
        at.number_input(key="data:public_n").set_value(public_n)
    at.button(key="data:schema_save").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_app_frame_survives_two_reruns():
    at = _app()
    for _ in range(2):
        at.run()
        assert not at.exception
        sidebar_text = " ".join(m.value for m in at.sidebar.markdown)
        assert "census" in sidebar_text and "add or remove one" in sidebar_text
    assert at.title[0].value == "Data and schema"  # the default page, sample loaded at once


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_on_sample(page):
    at = _goto(_app(), page)
    assert not at.error, [e.value for e in at.error]
    assert at.title


def test_data_page_shows_owner_only_counts():
    at = _goto(_app(), "data_page")
    assert any("visible to you only" in c.value.lower() for c in at.caption)
    assert at.metric[0].value == "add or remove one"


def test_queries_page_reports_invalid_row():
    at = _app()
    at.session_state[S.WORKLOAD] = [
        {"id": "bad", "kind": "sum", "column": "sex", "mechanism": "laplace", "weight": 1.0, "target": None}
    ]
    _goto(at, "queries_page")
    assert at.error and "bad" in at.error[0].value


def test_accuracy_curves_are_log_log():
    at = _goto(_app(), "accuracy_page")
    spec = json.dumps(json.loads(at.get("vega_lite_chart")[0].proto.spec))
    assert spec.count('"type": "log"') >= 2


def test_accuracy_data_dependent_view_off_by_default_and_labelled():
    at = _goto(_app(), "accuracy_page")
    assert at.toggle(key=ACC_VIEW).value is False
    assert not any("do not share" in e.value for e in at.error)
    at.selectbox(key=ACC_QUERY).set_value("education_mode").run()
    at.toggle(key=ACC_VIEW).set_value(True).run()
    assert not at.exception
    assert any("not private, do not share" in e.value for e in at.error)


@pytest.mark.parametrize("rule", S.RULES)
def test_plan_under_each_rule(rule):
    at = _app()
    at.session_state[S.RULE] = rule
    _goto(at, "plan_page")
    assert not at.error, [e.value for e in at.error]
    assert at.dataframe  # allocation table and the rules table


def test_target_mode_reports_least_epsilon():
    at = _app()
    at.session_state[S.MODE] = "target"
    _goto(at, "plan_page")
    assert not at.error, [e.value for e in at.error]
    assert any("Least ε meeting every target" in m.label for m in at.metric)


def test_main_flow_release_once_then_ledger():
    at = _app()
    at.session_state[S.RULE] = "basic"
    _goto(at, "plan_page")
    _goto(at, "release_page")
    assert at.button(key="release:open").disabled  # no lifetime budget yet
    set_lifetime(at, "release", 3.0)
    assert not at.button(key="release:open").disabled
    at.session_state[S.CONFIRMED] = True  # the dialog's confirm (docs/engineering.md §4: clicks lost in AppTest)
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Released" in s.value for s in at.success)
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert any("errorbar" in json.dumps(sp) for sp in specs), "answers with error bars"
    assert any(b.label.startswith("Download report") for b in at.get("download_button"))
    rid = at.session_state[S.LAST_RELEASE_ID]
    assert rid is not None
    before = _status(at)
    assert before.releases == 1 and before.epsilon_spent > 0
    # a rerun (and a page revisit) does not spend again
    at.run()
    _goto(at, "release_page")
    after = _status(at)
    assert (after.releases, after.epsilon_spent) == (before.releases, before.epsilon_spent)
    # a fresh session (a reload) shows the stored release and spends nothing
    at2 = _app()
    _goto(at2, "release_page")
    assert any("already released" in s.value for s in at2.success)
    assert _status(at2).releases == 1
    _goto(at, "ledger_page")
    # the release says what it spent, under the dataset's rule (session-9 browser check)
    from pages._ui import fmt

    assert any(f"Release #{rid}" in e.label and f"· ε {fmt.eps(before.epsilon_spent)} ({fmt.rule(before.rule)}) ·" in e.label
               for e in at.expander), [e.label for e in at.expander]


@pytest.mark.parametrize(
    "name,content",
    [("empty.csv", b""), ("ragged.csv", b"a,b,c\n1,2,3\n4,5\n6,7,8,9\n")],
)
def test_bad_upload_shows_error(name, content):
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    at.file_uploader(key=UPLOADER).upload(name, content, "text/csv").run()
    assert not at.exception
    assert at.error, "a bad upload must show st.error"


def test_upload_schema_form_is_not_prefilled():
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    csv = b"person_id,age,city\n1,30,A\n2,41,B\n3,52,A\n"
    at.file_uploader(key=UPLOADER).upload("people.csv", csv, "text/csv").run()
    assert not at.exception and not at.error
    assert any("never filled in from the rows" in w.value for w in at.warning)
    assert at.multiselect(key="data:use").value == []  # columns no query uses are ignored by default
    at.multiselect(key="data:use").set_value(["person_id", "age", "city"]).run()
    assert at.text_input(key="data:col:age:bounds").value == ""
    assert at.selectbox(key="data:col:age:kind").value == "numeric"


def test_upload_schema_form_saves_a_declared_schema():
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    csv = b"person_id,age,city\n1,30,A\n2,41,B\n3,52,A\n"
    at.file_uploader(key=UPLOADER).upload("people.csv", csv, "text/csv").run()
    declare(at, {"age": {"bounds": "18, 90"}, "city": {"kind": "categorical", "cats": "A, B, C"}}, public_n=3)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state[S.SCHEMAS] != {}
    assert any("visible to you only" in c.value.lower() for c in at.caption)
    _goto(at, "plan_page")
    assert not at.error, [e.value for e in at.error]


def test_upload_schema_form_reports_bad_bounds():
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    at.file_uploader(key=UPLOADER).upload("p.csv", b"age\n30\n41\n", "text/csv").run()
    declare(at, {"age": {"bounds": "90, 18"}})
    assert not at.exception
    assert at.error and "age" in at.error[0].value and "swap them" in at.error[0].value


def test_a_bound_past_2_to_the_53_is_refused_in_the_form_and_the_form_stays():
    """Found in the browser (session 10): bounds '0, 1e16' were saved; then the file could not
    be read on any page and the schema form was gone (only a reload got out)."""
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    at.file_uploader(key=UPLOADER).upload("p.csv", b"age\n30\n41\n", "text/csv").run()
    declare(at, {"age": {"bounds": "0, 1e16"}})
    assert not at.exception
    # the message is shown as written: "2**53" escaped so Markdown does not read ** as bold
    assert at.error and "age" in at.error[0].value and "2\\*\\*53" in at.error[0].value, [e.value for e in at.error]
    assert not at.session_state[S.SCHEMAS]  # nothing saved
    declare(at, {"age": {"bounds": "0, 120"}})  # the form is still there, and a fixed bound saves
    assert not at.error, [e.value for e in at.error]
    assert _saved_schema(at)["columns"][0]["upper"] == 120


def test_typed_names_are_shown_as_typed_not_as_markdown():
    """Found in the browser (session 10): a column named '**bold**' showed as a bold 'bold' (and
    an error then named a column 'bold' that does not exist); '[link](http://x)' became a link."""
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    at.file_uploader(key=UPLOADER).upload("md.csv", b"**bold**,[link](http://x)\n1,2\n3,4\n", "text/csv").run()
    declare(at, {"**bold**": {"bounds": "5, 1"}, "[link](http://x)": {"bounds": "0, 9"}})
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "column '\\*\\*bold\\*\\*'" in errors and "swap them" in errors, errors
    heads = [m.value for m in at.markdown]
    assert "**\\*\\*bold\\*\\***" in heads and "**\\[link\\](http://x)**" in heads, heads


def _saved_schema(at: AppTest) -> dict:
    (schema_json,) = at.session_state[S.SCHEMAS].values()
    return json.loads(schema_json) if isinstance(schema_json, str) else schema_json


def test_a_category_holding_a_comma_is_declared_in_quotes_and_survives_a_schema_file():
    """Found in the browser (session 9): "Smith, John" was saved as two categories, from the
    form and from a loaded schema JSON alike, and its rows silently counted as invalid."""
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    csv = b'prod,qty\n"Smith, John",1\n"He said ""hi""",2\nplain,3\n"Smith, John",4\n'
    at.file_uploader(key=UPLOADER).upload("quotes.csv", csv, "text/csv").run()
    declare(at, {"prod": {"kind": "categorical", "cats": '"Smith, John", "He said ""hi""", plain'},
                 "qty": {"bounds": "1, 4"}})
    assert not at.error, [e.value for e in at.error]
    (prod,) = [c for c in _saved_schema(at)["columns"] if c["name"] == "prod"]
    assert prod["categories"] == ["Smith, John", 'He said "hi"', "plain"]
    # the schema file, loaded back, shows the same categories in the form and saves them again
    schema_file = json.dumps({"version": 1, "columns": [
        {"name": "prod", "kind": "categorical", "categories": ["plain", "Smith, John"], "missing": {"action": "drop"}},
        {"name": "qty", "kind": "numeric", "lower": 1, "upper": 4, "missing": {"action": "drop"}}]}).encode()
    at.file_uploader(key="data:schema_upload:0").upload("s.json", schema_file, "application/json").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.text_input(key="data:col:prod:cats").value == 'plain, "Smith, John"'
    at.button(key="data:schema_save").click().run()
    (prod,) = [c for c in _saved_schema(at)["columns"] if c["name"] == "prod"]
    assert prod["categories"] == ["plain", "Smith, John"]


def test_a_plan_file_loaded_as_a_schema_declares_its_schema_and_says_where_the_plan_goes():
    """Found in the browser (session 10): a PLAN.json (which holds its schema) loaded as the
    schema was refused with "the schema has no 'version'", and the Planner, where plans are
    restored, needs a schema first: the file could not be used before typing the schema."""
    schema = {"version": 1, "columns": [
        {"name": "prod", "kind": "categorical", "categories": ["a", "b"], "missing": {"action": "drop"}},
        {"name": "qty", "kind": "numeric", "lower": 1, "upper": 4, "missing": {"action": "drop"}}]}
    doc = {"schema": schema, "budget": {"epsilon": 1.0, "delta": 1e-6, "composition": "zcdp"},
           "queries": [{"id": "n", "kind": "count", "mechanism": "laplace"}]}
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    at.file_uploader(key=UPLOADER).upload("p.csv", b"prod,qty\na,1\nb,4\n", "text/csv").run()
    at.file_uploader(key="data:schema_upload:0").upload("plan.json", json.dumps(doc).encode(), "application/json").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [c["name"] for c in _saved_schema(at)["columns"]] == ["prod", "qty"]
    assert any("plan.json is a plan file" in s.value and "Restore a plan file" in s.value for s in at.success)
    # a file that is neither says what a schema file lacks, as before
    at.file_uploader(key="data:schema_upload:0").upload("x.json", b'{"columns": []}', "application/json").run()
    assert at.error and "x.json" in at.error[0].value


def test_an_unclosed_quote_in_the_categories_is_named_with_the_fix():
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    at.file_uploader(key=UPLOADER).upload("q.csv", b"prod\nA\nB\n", "text/csv").run()
    declare(at, {"prod": {"kind": "categorical", "cats": '"A, B'}})
    assert not at.exception
    assert at.error and "'prod'" in at.error[0].value and "not closed" in at.error[0].value


def test_text_in_a_numeric_column_is_refused_by_the_app_as_by_the_command_line():
    """Found in the browser (session 10): ages with '?' cells released from the app (the
    rows dropped as invalid), while `planner release` and the downloaded script refused the
    same file and plan. The Data page now warns, and the Release page refuses, spending nothing."""
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    rows = "".join(f"{'?' if i % 10 == 0 else 20 + i % 50},{'yes' if i % 3 else 'no'}\n" for i in range(200))
    at.file_uploader(key=UPLOADER).upload("ages.csv", ("age,smoker\n" + rows).encode(), "text/csv").run()
    declare(at, {"age": {"kind": "numeric", "bounds": "0, 100"}, "smoker": {"kind": "boolean"}})
    assert not at.error, [e.value for e in at.error]
    (warn,) = [w.value for w in at.warning if "will be refused" in w.value]
    assert "column 'age' is declared numeric but 20 of 200 row(s) hold text" in warn  # 1 row in 10 is '?'
    _goto(at, "plan_page")
    set_lifetime(at, "planner", 2.0)
    _goto(at, "release_page")
    at.session_state[S.CONFIRMED] = True
    at.run()
    assert not at.exception
    assert any("column 'age' is declared numeric but 20 of 200 row(s) hold text" in e.value for e in at.error)
    assert _status(at).releases == 0 and _status(at).epsilon_spent == 0.0


def test_accuracy_check_by_simulation_overlays_points_and_is_labelled():
    at = _goto(_app(), "accuracy_page")
    assert not any(b.key == "acc_simulate" for b in at.button)  # hidden until the toggle is on
    at.toggle(key=ACC_VIEW).set_value(True).run()
    at.button(key="acc_simulate").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("not private, do not share" in e.value for e in at.error)
    rows = at.session_state[S.ACC_SIM]["rows"]
    assert len(rows) == 11 and all(r["runs"] == 2000 for r in rows)
    # people (count, Laplace): simulated RMSE within 5 s.e. of √2/ε (planner.planning.simulation's own check)
    for r in rows:
        se = (r["high"] - r["empirical RMSE"]) / 2
        assert abs(r["empirical RMSE"] - r["predicted RMSE"]) <= 5 * se + 1e-12
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert any("point" in json.dumps(sp) for sp in specs)


def test_accuracy_median_data_dependent_view_shows_lower_bound():
    at = _goto(_app(), "accuracy_page")
    at.selectbox(key=ACC_QUERY).set_value("age_median").run()
    at.toggle(key=ACC_VIEW).set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("vega_lite_chart")) == 2  # the data-independent curves + the instance view
    assert any("least RMSE any unbiased" in m.value for m in at.markdown)


def test_planner_rule_comparison_names_the_best_rule_for_the_workload():
    at = _goto(_app(), "plan_page")
    rules = at.dataframe[-1].value  # the allocation table, the pins editor, the rules table
    assert [r.split(" ")[0] for r in rules["rule"]] == list(S.RULES)
    # the census workload is pure-ε with 7 queries: basic, advanced, RDP and zCDP buy the same
    # errors (zCDP counts a pure answer by its ε where that is cheaper; it was 1.9× worse when it
    # used ρ = ε²/2 converted back at δ); only the optimal accountant proves a smaller total at
    # δ > 0. The factor on the page is the engine's own comparison of the same plans.
    from planner.data.schema import Schema
    from planner.planning import workload
    from planner.planning.queries import queries_from_list

    schema = Schema.load(S.SAMPLES["census"][1])
    qs = queries_from_list(S.query_dicts(S.default_workload("census"), "weighted"), schema)
    plans = workload.compare(qs, schema, 1.0, 1e-6, workload.default_error_scales(qs, schema))
    best = min(p.allocation.objective for p in plans.values())
    factor = {r: (p.allocation.objective / best) ** 0.5 for r, p in plans.items()}
    assert factor["pld"] == 1.0 and all(1.005 < factor[r] < 1.1 for r in ("basic", "advanced", "rdp", "zcdp"))
    head = next(m.value for m in at.markdown if m.value.startswith("For this workload"))
    assert head.startswith("For this workload, **PLD** gives the smallest errors")
    assert f"**zCDP** they are **{factor['zcdp']:.2f}×** larger" in head
    assert all(f"**{rule(r).short}**" in head for r in S.RULES)
    assert any("optimal accountant composes the exact privacy loss" in c.value for c in at.caption)
    # the curve of every rule across ε: one more chart, no error
    charts_before = len(at.get("vega_lite_chart"))
    at.toggle(key=S.widget_key(S.SHOW_CURVE, "planner")).set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(at.get("vega_lite_chart")) == charts_before + 1


def test_server_file_source_lists_allow_listed_files():
    pytest.importorskip("planner.data.sources")
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("server").run()
    assert not at.exception, [e.value for e in at.exception]
    box = at.selectbox(key="data:server_file")
    assert "census.csv" in box.options
    box.set_value("census.csv").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("never filled in from the rows" in w.value for w in at.warning)
    engine = at.selectbox(key=S.widget_key(S.BACKEND, "data"))
    assert engine.value == "duckdb" and "pandas (in memory)" in engine.options  # the choice, DuckDB by default
    declare(at, {"age": {"bounds": "18, 90"}}, public_n=50_000)
    for page in ("queries_page", "plan_page", "data_page"):  # the server file stays the active dataset
        _goto(at, page)
        sidebar = " ".join(m.value for m in at.sidebar.markdown)
        assert "census.csv" in sidebar and "file on this server" in sidebar, page
    assert at.selectbox(key="data:server_file").value == "census.csv"


def test_million_row_upload_is_read_once_and_pages_stay_usable(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # Issue 6: a 1,000,000-row upload must not freeze the pages: the heavy work (parsing,
    # suggestions, the column report) happens once per upload and is cached. We count the
    # parses; the timings are printed, not asserted.
    import time

    import numpy as np

    from pages._ui import cached

    calls = []
    real = cached.load_table

    def counting(*args, **kwargs):
        if kwargs.get("name") == "big.csv":  # the app also opens the census sample
            calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cached, "load_table", counting)
    rng = np.random.default_rng(1)
    n = 1_000_000
    age = rng.integers(18, 91, n)
    income = rng.integers(0, 200_000, n)
    body = "\n".join(f"{a},{i}" for a, i in zip(age.tolist(), income.tolist(), strict=True))
    data = ("age,income\n" + body + "\n").encode()
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    t0 = time.perf_counter()
    at.file_uploader(key=UPLOADER).upload("big.csv", data, "text/csv").run()
    t_upload = time.perf_counter() - t0
    assert not at.exception and not at.error, [e.value for e in at.error]
    declare(at, {"age": {"bounds": "18, 90"}, "income": {"bounds": "0, 200000"}}, public_n=n)
    assert not at.exception and not at.error, [e.value for e in at.error]
    times = []
    for page in ("queries_page", "plan_page", "data_page"):
        t0 = time.perf_counter()
        _goto(at, page)
        times.append(time.perf_counter() - t0)
        assert not at.exception, page
    assert len(calls) == 1, f"the upload was parsed {len(calls)} times"
    with capsys.disabled():
        print(f"\n1e6-row upload: first run {t_upload:.2f} s; later page runs {', '.join(f'{t:.2f} s' for t in times)}")


def test_sidebar_budget_is_drawn_also_when_a_page_stops_early():
    # the budget block is drawn after the page (pages/_ui/frame.py); a page that stops early
    # (Release without a lifetime budget, the Accuracy page with the owner-only views off)
    # still shows it, because pages stop through frame.stop(), never st.stop()
    for page in ("release_page", "accuracy_page", "data_page"):
        at = _goto(_app(), page)
        titles = [m.value for m in at.sidebar.markdown]
        assert "### Lifetime budget" in titles and "### Next release" in titles, (page, titles)
    bare = [p.name for p in (ROOT / "pages").rglob("*.py")
            if "st.stop()" in p.read_text() and p.name != "frame.py"]
    assert bare == [], f"pages calling st.stop() directly (use frame.stop()): {bare}"
