"""``planner release`` on DuckDB reads the data once, and keys the dataset by its content.

* one statement over the data: every aggregate of the plan, the column report, the person
  check and the content digest (counted on the backend the route used);
* no separate pass to hash the file (the file hashing functions are made to fail);
* the same table saved as CSV and as Parquet is one dataset in the ledger (one budget),
  and the report carries neither the content digest nor the file's SHA-256.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from planner.core.errors import BudgetExceededError, PlannerError
from planner.data import backends
from planner.data.loader import load_table
from planner.release import cmd_ledger, cmd_release

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "census.csv"
SCHEMA = ROOT / "data" / "census.schema.json"


def spec(tmp_path: Path, epsilon: float, queries: list[dict[str, Any]], name: str = "p.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({
        "schema": str(SCHEMA),
        "budget": {"epsilon": epsilon, "delta": 0.0, "composition": "basic"},
        "lifetime": {"epsilon": 1.0, "delta": 0.0},  # the dataset's whole budget: one plan at ε 1
        "queries": queries,
    }))
    return path


COUNT = [{"id": "n", "kind": "count", "mechanism": "laplace"}]
MORE = [
    {"id": "n", "kind": "count", "mechanism": "laplace"},
    {"id": "region", "kind": "histogram", "column": "region", "mechanism": "laplace"},
    {"id": "income_sum", "kind": "sum", "column": "income", "mechanism": "laplace"},
    {"id": "age_median", "kind": "median", "column": "age", "mechanism": "exponential"},
]


@pytest.fixture()
def engines(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The backends the route builds (to read their pass counters afterwards)."""
    made: list[Any] = []
    make = backends.make_backend

    def spy(*a: Any, **k: Any) -> Any:
        b = make(*a, **k)
        made.append(b)
        return b

    monkeypatch.setattr(backends, "make_backend", spy)
    return made


def test_release_reads_the_data_once_without_hashing_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engines: list[Any]
) -> None:
    import planner.data.schema
    import planner.data.sources

    def no_file_hash(*a: Any, **k: Any) -> str:
        raise AssertionError("the release route hashed the file in a pass of its own")

    monkeypatch.setattr(planner.data.schema, "dataset_fingerprint", no_file_hash)
    monkeypatch.setattr(planner.data.sources, "source_fingerprint", no_file_hash)
    out = cmd_release(str(spec(tmp_path, 1.0, MORE)), str(DATA), f"sqlite:///{tmp_path}/l.db", "duckdb")
    assert out["status"] == "done"
    (engine,) = engines
    assert engine.passes == 1 and engine.unit_check == "bitmap"  # census: one row per person


def test_release_keys_the_dataset_by_content_csv_and_parquet_share_a_budget(tmp_path: Path) -> None:
    typed = load_table(DATA)
    for c in ("age", "income", "hours_worked", "person_id"):
        typed[c] = pd.to_numeric(typed[c])
    parquet = tmp_path / "census.parquet"
    typed.sample(frac=1.0, random_state=3).to_parquet(parquet)  # other row order too
    url = f"sqlite:///{tmp_path}/l.db"
    first = cmd_release(str(spec(tmp_path, 1.0, COUNT)), str(DATA), url, "duckdb")
    assert first["status"] == "done" and first["budget"]["epsilon_remaining"] == pytest.approx(0.0)
    # the Parquet copy is the same dataset: its whole budget is spent, another plan is refused
    with pytest.raises(BudgetExceededError) as refused:
        cmd_release(str(spec(tmp_path, 1.0, MORE, "q.json")), str(parquet), url, "duckdb")
    assert "only ε = 0 of the lifetime budget ε = 1 remains" in str(refused.value)
    # and the first plan on it is the first release again (answers reused, nothing drawn),
    # through pandas too: the digest is the same in every backend
    again = cmd_release(str(spec(tmp_path, 1.0, COUNT, "r.json")), str(parquet), url, "pandas")
    assert again["status"] == "reused" and again["queries"] == first["queries"]
    assert again["dataset"]["fingerprint"] == first["dataset"]["fingerprint"]
    assert len(cmd_ledger(url, None)["datasets"]) == 1


def test_release_report_holds_neither_the_digest_nor_the_file_hash(tmp_path: Path) -> None:
    from planner.data.backends.pandas_backend import table_digest
    from planner.data.schema import Schema

    out = cmd_release(str(spec(tmp_path, 1.0, COUNT)), str(DATA), f"sqlite:///{tmp_path}/l.db", "duckdb")
    text = json.dumps(out)
    digest = table_digest(load_table(DATA), Schema.load(SCHEMA))
    assert digest.hexdigest not in text
    assert hashlib.sha256(DATA.read_bytes()).hexdigest() not in text


def test_release_error_in_the_scan_is_raised_and_planning_errors_stop_the_scan(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("person_id,age\n1,30\n")  # the schema's other columns are absent
    with pytest.raises(PlannerError, match="declared in the schema but not in the data"):
        cmd_release(str(spec(tmp_path, 1.0, COUNT)), str(bad), f"sqlite:///{tmp_path}/l.db", "duckdb")
    with pytest.raises(PlannerError):
        cmd_release(str(spec(tmp_path, -1.0, COUNT)), str(DATA), f"sqlite:///{tmp_path}/l.db", "duckdb")


def test_the_library_release_reads_the_data_once_the_cell_check_included(tmp_path: Path) -> None:
    """``planner.release.release`` (what the Release page calls, on a backend it opened earlier)
    on DuckDB: the check that every cell converts and every exact aggregate in one statement.
    Before the check and the aggregates were read together, the same release took 2 passes."""
    from planner.data.schema import Schema
    from planner.data.sources import file_source
    from planner.ledger import Ledger
    from planner.planning.plan_spec import build_plan, parse_plan_spec
    from planner.release import release

    doc = json.loads(spec(tmp_path, 1.0, MORE).read_text())
    doc["schema"] = json.loads(SCHEMA.read_text())
    plan = build_plan(parse_plan_spec(doc)).plan
    schema = Schema.load(SCHEMA)
    engine = backends.make_backend("duckdb", file_source((DATA,), DATA.name), schema)
    led = Ledger(f"sqlite:///{tmp_path}/l.db")
    try:
        out = release(plan, schema, engine, led, "census-content", "census", total_epsilon=1.0, total_delta=0.0)
        assert out.status == "done"
        assert engine.passes == 1 and engine.unit_check == "bitmap"  # census: one row per person
    finally:
        led.close()
        backends.close_backend(engine)
