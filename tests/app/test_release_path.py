"""Issue 28 item 3: one release path, results fresh or stored rendered by one function.

A released multi-level quantile, shown again after a reload (a new session releasing the
same plan), shows one row per level with its released value, exactly as the fresh release
did; the CLI reads the plan file once and makes the plan in its mode through ``build_plan``;
a release through the library refuses unreadable cells before any spend.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import state as S
from planner.planning import plan_spec
from tests.app.test_pages import set_lifetime

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
QUARTILES = {"id": "age_quartiles", "kind": "quantile", "column": "age", "mechanism": "exponential",
             "weight": 1.0, "target": None, "options": {"alphas": [0.25, 0.75]}}


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def _session() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    rows = [dict(r) for r in S.CENSUS_WORKLOAD if r["kind"] in ("count", "mean")] + [dict(QUARTILES)]
    at.session_state[S.WORKLOAD] = rows
    at.switch_page("pages/release_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _released_rows(at: AppTest) -> pd.DataFrame:
    """The table of released numbers (the one with a 'value' and a 'part' column)."""
    return next(d.value for d in at.dataframe if {"value", "part", "query"} <= set(d.value.columns))


def test_a_multi_level_quantile_shows_one_row_per_level_fresh_and_after_a_reload() -> None:
    at = _session()
    set_lifetime(at, "release", 3.0)
    at.session_state[S.CONFIRMED] = True
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    fresh = _released_rows(at)
    q = fresh[fresh["query"] == "age_quartiles"]
    assert list(q["part"]) == ["quantile@0.25", "quantile@0.75"]

    again = _session()  # a reload: a new session, the same plan, the stored release
    assert not again.error, [e.value for e in again.error]
    assert any("already released" in s.value for s in again.success)
    stored = _released_rows(again)
    s = stored[stored["query"] == "age_quartiles"]
    assert list(s["part"]) == ["quantile@0.25", "quantile@0.75"]  # today: one row, no value
    assert list(s["value"]) == list(q["value"]) and all(v != "" for v in s["value"])
    # nothing was drawn or spent again: one release in the ledger
    from pages._ui.cached import ledger
    from tests.app.keys import ledger_key

    assert len(ledger().releases(ledger_key(again))) == 1


def test_the_cli_reads_the_plan_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = plan_spec.parse_plan_spec

    def counting(*a, **k):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(plan_spec, "parse_plan_spec", counting)
    from planner.cli import main

    spec = ROOT / "examples" / "census_plan.json"
    rc = main(["release", "--spec", str(spec), "--data", str(ROOT / "data" / "census.csv"), "--backend", "pandas",
               "--ledger", f"sqlite:///{tmp_path}/cli.db"])
    assert rc == 0
    assert len(calls) == 1  # today: twice (the command line, then the release module)


def test_an_equal_plan_file_is_planned_by_build_plan_not_at_parse_time() -> None:
    doc = json.loads((ROOT / "examples" / "census_plan.json").read_text())
    doc["schema"] = json.loads((ROOT / "data" / "census.schema.json").read_text())
    doc["mode"] = "equal"
    spec = plan_spec.parse_plan_spec(doc)
    assert spec.pinned == {}  # reading a file plans nothing (today: the equal split is solved here)
    from planner.planning import workload

    made = plan_spec.build_plan(spec).plan.allocation.items
    equal = workload.plan_equal(spec.queries, spec.schema, spec.epsilon, spec.delta, spec.rule,
                                spec.error_scales or None).allocation.items
    assert [(a.id, a.theta) for a in made] == [(a.id, a.theta) for a in equal]  # build_plan makes the equal split


def test_a_release_through_the_library_refuses_unreadable_cells_before_any_spend(tmp_path: Path) -> None:
    from planner.data.backends.pandas_backend import PandasBackend
    from planner.data.schema import Schema
    from planner.ledger import Ledger
    from planner.release import release_spec

    schema = Schema.from_dict({"version": 1, "relation": "add_remove", "public_n": 4, "columns": [
        {"name": "age", "kind": "numeric", "lower": 0, "upper": 100, "missing": {"action": "drop"}}]})
    df = pd.DataFrame({"age": ["30", "41", "?", "55"]})  # '?' for an unknown age: text in a numeric column
    spec = plan_spec.parse_plan_spec({"schema": schema.to_dict(), "budget": {"epsilon": 1.0},
                                      "lifetime": {"epsilon": 2.0}, "dataset_name": "ages",
                                      "queries": [{"id": "n", "kind": "count", "mechanism": "laplace"}]})
    led = Ledger(f"sqlite:///{tmp_path}/l.db")
    try:
        from planner.core.errors import DataError

        with pytest.raises(DataError, match="age"):
            release_spec(spec, PandasBackend(df, schema), led, "ds-ages-content")
        assert all(not led.releases(d.fingerprint) for d in led.datasets())  # nothing spent
    finally:
        led.close()
