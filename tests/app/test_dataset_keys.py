"""One table, one budget across the app and the command line.

The app names a dataset in the ledger by the key of its content under the declared schema
(``planner.data.sources.table_key``), the key ``planner release`` computes in its scan; the hash
of the file's bytes (the app's key before the content digest, and the one server files are
listed by) is linked to the same dataset (``planner.ledger.resolve_dataset``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from planner.core.errors import BudgetExceededError, LedgerError
from planner.data.loader import load_table
from planner.data.schema import Schema, dataset_fingerprint
from planner.data.sources import table_key
from planner.ledger import Ledger, resolve_dataset
from planner.release import cmd_release
from tests.app.keys import ledger_key
from tests.app.test_pages import set_lifetime

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "data" / "census.csv"
SCHEMA = ROOT / "data" / "census.schema.json"


@pytest.fixture()
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    u = f"sqlite:///{tmp_path}/l.db"
    monkeypatch.setenv("PLANNER_LEDGER_URL", u)
    return u


def _spec(tmp_path: Path, epsilon: float, lifetime: float = 2.0) -> Path:
    p = tmp_path / f"plan-{epsilon}.json"
    p.write_text(json.dumps({
        "schema": str(SCHEMA), "budget": {"epsilon": epsilon, "delta": 0.0, "composition": "basic"},
        "lifetime": {"epsilon": lifetime, "delta": 1e-6},
        "queries": [{"id": "n", "kind": "count", "mechanism": "laplace"}],
    }))
    return p


def test_budget_set_in_the_app_is_the_one_the_cli_spends(url: str, tmp_path: Path) -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/plan_page.py").run()
    set_lifetime(at, "planner", 1.5, rule="basic")
    key = ledger_key(at)
    assert key == table_key(load_table(CSV, name=CSV.name), Schema.load(SCHEMA))
    led = Ledger(url)
    (ds,) = led.datasets()
    assert led.find_dataset(key).fingerprint == ds.fingerprint
    # the file's bytes name the same dataset (server files are listed by them)
    assert led.find_dataset(dataset_fingerprint(CSV)).fingerprint == ds.fingerprint
    # the CLI (content digest from its own scan, DuckDB) spends from the app's budget: ε 1 of 1.5,
    # then a second ε 1 is refused (0.5 left), and no second dataset appears
    out = cmd_release(str(_spec(tmp_path, 1.0, 1.5)), str(CSV), url, "duckdb")
    assert out["dataset"]["fingerprint"] == ds.fingerprint
    with pytest.raises(BudgetExceededError):
        cmd_release(str(_spec(tmp_path, 0.9, 1.5)), str(CSV), url, "duckdb")
    assert len(Ledger(url).datasets()) == 1


def test_a_budget_registered_by_the_files_bytes_is_kept_and_linked(url: str, tmp_path: Path) -> None:
    # a ledger written before the content digest: the app registered the file's sha256
    led = Ledger(url)
    old = led.register_dataset(dataset_fingerprint(CSV), "census.csv", 2.0, 1e-6, "basic")
    content = table_key(load_table(CSV, name=CSV.name), Schema.load(SCHEMA))
    assert led.find_dataset(content) is None
    assert resolve_dataset(led, (content, dataset_fingerprint(CSV))) == old.fingerprint
    assert led.find_dataset(content).fingerprint == old.fingerprint  # linked: the CLI finds it
    out = cmd_release(str(_spec(tmp_path, 1.0)), str(CSV), url, "duckdb")
    assert out["dataset"]["fingerprint"] == old.fingerprint
    assert Ledger(url).status(old.fingerprint).epsilon_spent == pytest.approx(1.0)


def test_two_datasets_for_one_table_are_reported(url: str) -> None:
    led = Ledger(url)
    led.register_dataset("a" * 64, "one", 1.0, 0.0, "basic")
    led.register_dataset(hashlib.sha256(b"x").hexdigest(), "two", 1.0, 0.0, "basic")
    with pytest.raises(LedgerError, match="two different datasets"):
        resolve_dataset(led, ("a" * 64, hashlib.sha256(b"x").hexdigest()))
    assert resolve_dataset(led, ("b" * 64,)) is None
