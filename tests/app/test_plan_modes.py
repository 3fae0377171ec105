"""Issue 14 in the app: split modes, plan files restored, the engine choice, releases of them.

Releases are checked in the ledger against the plan the engine makes from the same values
(``planner.release.plan_hash``); a plan file restored in the app is checked against what
``planner plan`` prints for the same file (the command line, a separate code path).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import state as S
from planner import release as rel
from planner.cli import main as cli_main
from planner.data.schema import Schema
from planner.planning import workload
from planner.planning.plan_spec import dump_plan_spec, spec_document
from planner.planning.queries import Query, queries_from_list
from planner.privacy.accounting import total_epsilon
from tests.app.keys import ledger_key
from tests.app.test_pages import set_lifetime

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
CENSUS = Schema.load(ROOT / "data" / "census.schema.json")
MODE = S.widget_key(S.MODE, "planner")
EPS = S.widget_key(S.EPSILON, "planner")


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def _app(page: str = "plan_page") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _led():
    from pages._ui.cached import ledger

    return ledger()


def _census_queries(mode: str = "weighted") -> list[Query]:
    drop = "target" if mode != "target" else "weight"
    return list(queries_from_list([{k: v for k, v in r.items() if k != drop and v is not None}
                                   for r in S.CENSUS_WORKLOAD], CENSUS))


def _shares(at: AppTest) -> dict[str, float]:
    """The Planner's allocation table (in manual mode the shares editor comes first)."""
    table = next(d.value for d in at.dataframe if "share ε" in d.value.columns)
    return dict(zip(table["id"], table["share ε"], strict=True))


def _release(at: AppTest) -> None:
    _goto(at, "release_page")
    at.session_state[S.CONFIRMED] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_equal_split_gives_every_answer_the_same_share_and_is_what_is_released() -> None:
    at = _app()
    at.radio(key=MODE).set_value("equal").run()
    assert not at.error, [e.value for e in at.error]
    shares = list(_shares(at).values())
    assert max(shares) == pytest.approx(min(shares), rel=1e-6)  # shown rounded to 4 digits in the table
    set_lifetime(at, "planner", 3.0)
    _release(at)
    rec = _led().releases(ledger_key(at))[-1]
    expected = workload.plan_equal(_census_queries(), CENSUS, 1.0, 1e-6, "rdp",
                                   workload.default_error_scales(_census_queries(), CENSUS))
    assert rec.plan_hash == rel.plan_hash(expected, CENSUS)
    assert total_epsilon([s.spend for s in rec.spends], "rdp", 1e-6) == pytest.approx(1.0, rel=1e-9)


def test_manual_split_starts_equal_shows_its_total_and_refuses_an_over_budget_split() -> None:
    at = _app()
    at.radio(key=MODE).set_value("manual").run()
    start = dict(at.session_state[S.MANUAL])
    equal = workload.plan_equal(_census_queries(), CENSUS, 1.0, 1e-6, "rdp")
    assert start == {a.id: a.theta for a in equal.allocation.items}
    assert any("These shares cost **ε = 1** under **Rényi differential privacy (RDP)**" in s.value for s in at.success), \
        [s.value for s in at.success]
    # what the shares editor's on_change writes when a person types (AppTest cannot type into a grid):
    # 0.3 for each of the 7 pure-ε answers costs 7 × 0.3 = 2.1 under basic composition (by hand)
    at.selectbox(key=S.widget_key(S.RULE, "planner")).set_value("basic").run()
    at.session_state[S.MANUAL] = {k: 0.3 for k in start}
    at.run()
    errors = " ".join(e.value for e in at.error)
    assert "These shares cost **ε = 2.1** under **basic composition**, more than the ε = 1 set above" in errors
    # said once (the planner's own refusal said it again, in other words: session-9 browser check)
    assert len([e for e in at.error if "2.1" in e.value]) == 1, [e.value for e in at.error]
    _goto(at, "release_page")
    assert any("cannot be made yet" in e.value and "cost ε = 2.1" in e.value for e in at.error)
    assert not any(b.key == "release:open" for b in at.button)
    # within budget: released exactly as typed
    at.session_state[S.MANUAL] = {k: 0.1 for k in start}
    _goto(at, "plan_page")
    assert any("These shares cost **ε = 0.7** under **basic composition**" in s.value for s in at.success)
    set_lifetime(at, "planner", 3.0, rule="basic")
    _release(at)
    rec = _led().releases(ledger_key(at))[-1]
    per_query: dict[str, float] = {}
    for sp in rec.spends:  # a mean as noisy sum ÷ noisy count records its two parts
        per_query[sp.query_id.split(":")[0]] = per_query.get(sp.query_id.split(":")[0], 0.0) + sp.epsilon
    assert per_query == pytest.approx({r["id"]: 0.1 for r in S.CENSUS_WORKLOAD}, rel=1e-12)
    assert total_epsilon([s.spend for s in rec.spends], "basic", 1e-6) == pytest.approx(0.7, rel=1e-12)


def test_manual_shares_survive_a_visit_to_every_page() -> None:
    at = _app()
    at.radio(key=MODE).set_value("manual").run()
    at.session_state[S.MANUAL] = {k: 0.05 for k in at.session_state[S.MANUAL]}
    for page in ("data_page", "queries_page", "accuracy_page", "release_page", "ledger_page", "plan_page"):
        _goto(at, page)
    assert at.radio(key=MODE).value == "manual"
    assert set(_shares(at).values()) == {0.05}


def _every_kind_file(mode: str) -> dict:
    qs = [
        Query("n65", "count", None, "laplace", predicate={"column": "age", "op": ">=", "value": 65}),
        Query("income_mean", "mean", "income", "gaussian", weight=2.0),
        Query("age_bins", "histogram", "age", "laplace", bin_edges=[18, 30, 65, 90]),
        Query("age_q", "quantile", "age", "exponential", alphas=[0.1, 0.9]),
        Query("synth", "synthetic_sample", "age", "perturbed_histogram", bins=8),
        Query("income_by_region", "grouped_mean", "income", "laplace", by=["region"]),
    ]
    pins = {"n65": 0.05, "age_q:quantile@0.1": 0.02} if mode == "weighted" else None
    if mode == "manual":
        pins = {i: (0.002 if g else 0.04) for i, _q, _p, g in workload.item_ids(qs, CENSUS)}
    return spec_document(CENSUS, 0.8, 1e-6, "zcdp", mode, qs, pinned=pins,
                         error_scales={"n65": 5000.0, "income_mean": 30000.0}, dataset_name="census")


@pytest.mark.parametrize("mode", ["weighted", "equal", "manual"])
def test_a_plan_file_from_the_command_line_shows_the_same_plan_in_the_app(mode: str, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    doc = _every_kind_file(mode)
    path = tmp_path / "PLAN.json"
    path.write_text(dump_plan_spec(doc))
    assert cli_main(["plan", "--spec", str(path)]) == 0
    cli = {q["id"]: q["epsilon"] for q in json.loads(capsys.readouterr().out)["queries"]}

    at = _app()
    at.file_uploader(key="planner:plan_upload").upload("PLAN.json", path.read_bytes(), "application/json").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Restored PLAN.json: 6 queries" in s.value for s in at.success), [e.value for e in at.error]
    assert at.radio(key=MODE).value == mode
    assert at.number_input(key=EPS).value == 0.8
    assert at.selectbox(key=S.widget_key(S.RULE, "planner")).value == "zcdp"
    assert _shares(at) == pytest.approx(cli, rel=1e-12)
    # the queries with their options, and the scales typed in the file
    rows = {r["id"]: r for r in at.session_state[S.WORKLOAD]}
    assert rows["age_q"]["options"]["alphas"] == [0.1, 0.9] and rows["n65"]["scale"] == 5000.0
    assert rows["income_by_region"]["options"]["by"] == ["region"]
    # the note describes the file, not the plan once it is changed (session-9 browser check)
    at.number_input(key=EPS).set_value(0.5).run()
    assert not any("Restored PLAN.json" in s.value for s in at.success)


def test_a_plan_file_for_another_schema_is_refused_on_a_sample() -> None:
    doc = _every_kind_file("equal")
    doc["schema"]["columns"][5]["upper"] = 300000  # income bounds differ from the census sample's
    at = _app()
    at.file_uploader(key="planner:plan_upload").upload("other.json", dump_plan_spec(doc).encode(),
                                                       "application/json").run()
    assert any("other.json was not applied" in e.value and "bundled sample's schema is fixed" in e.value
               for e in at.error)
    assert at.radio(key=MODE).value == "weighted"  # nothing changed


def test_a_broken_plan_file_gets_a_message_not_a_traceback() -> None:
    at = _app()
    at.file_uploader(key="planner:plan_upload").upload("bad.json", b'{"schema": {}, "budget": 1,',
                                                       "application/json").run()
    assert not at.exception
    assert any("bad.json was not applied" in e.value and "not valid JSON" in e.value for e in at.error)


# ----------------------------------------------------------------------------- the engine choice
def _grouped_workload(at: AppTest) -> str:
    """Add a grouped mean to the census workload; the dataset's ledger key."""
    _goto(at, "queries_page")
    rows = [dict(r) for r in at.session_state[S.WORKLOAD]]
    rows.append({"id": "income_by_sex", "kind": "grouped_mean", "column": "income", "mechanism": "laplace",
                 "weight": 1.0, "options": {"by": ["sex"]}})
    at.session_state[S.WORKLOAD] = rows
    _goto(at, "plan_page")
    set_lifetime(at, "planner", 3.0)
    return ledger_key(at)


def test_duckdb_the_default_engine_releases_grouped_statistics() -> None:
    at = _app("queries_page")
    fp = _grouped_workload(at)
    _release(at)
    assert any("computed by the **duckdb** backend" in c.value for c in at.caption)
    recs = _led().releases(fp)
    assert len(recs) == 1 and "income_by_sex" in recs[0].answers


def test_engine_choice_reaches_the_release() -> None:
    at = _app("queries_page")
    fp = _grouped_workload(at)
    # pandas, picked on the Data page, computes the aggregates of this release
    _goto(at, "data_page")
    at.selectbox(key=S.widget_key(S.BACKEND, "data")).set_value("pandas").run()
    _release(at)
    assert any("computed by the **pandas** backend" in c.value for c in at.caption)
    recs = _led().releases(fp)
    assert len(recs) == 1 and "income_by_sex" in recs[0].answers


def test_spark_is_offered_only_when_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.data.backends import available_backends

    monkeypatch.delenv("PLANNER_SPARK_MASTER", raising=False)
    at = _app("data_page")
    assert "Spark (the configured cluster)" not in at.selectbox(key=S.widget_key(S.BACKEND, "data")).options
    if "spark" not in available_backends():
        pytest.skip("PySpark or Java is not installed here: Spark cannot be offered (scripts/test installs both)")
    monkeypatch.setenv("PLANNER_SPARK_MASTER", "local[1]")
    at = _app("data_page")
    assert "Spark (the configured cluster)" in at.selectbox(key=S.widget_key(S.BACKEND, "data")).options
