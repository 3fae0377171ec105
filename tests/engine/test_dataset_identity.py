"""One table, one budget: a dataset is a registered name with versions.

A file that comes back changed (rows appended, a value edited, rows reordered, re-encoded,
more columns) is a new version of the same dataset and spends the same lifetime budget; a
second budget exists only through a deliberate declaration with a new, unique name (issue
27: the same plan on the same table plus one row opened a fresh budget).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from planner.cli import main
from planner.core.errors import LedgerError
from planner.ledger import Ledger
from planner.privacy.accounting import Spend
from planner.privacy.events import PureEvent

SCHEMA = {
    "version": 1, "relation": "add_remove", "public_n": 400,
    "privacy_unit": {"column": "pid", "max_rows": 1},
    "columns": [
        {"name": "pid", "kind": "identifier"},
        {"name": "age", "kind": "numeric", "lower": 0, "upper": 100, "missing": {"action": "drop"}},
    ],
}


def pure(eps: float) -> Spend:
    return Spend(PureEvent(eps), eps, 0.0)


# ------------------------------------------------------------------ the library


def test_identity_new_content_under_a_known_name_is_a_version(tmp_path: Path) -> None:
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    a = led.register_dataset("digest-1", "people", 1.0, 0.0, "basic", schema_hash="s1")
    b = led.register_dataset("digest-2", "People ", 1.0, 0.0, "basic", schema_hash="s1")  # same name, case ignored
    assert a.fingerprint == b.fingerprint and len(led.datasets()) == 1
    assert len(led.versions(a.fingerprint)) == 2


def test_identity_same_schema_under_another_name_is_refused_with_advice(tmp_path: Path) -> None:
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    a = led.register_dataset("digest-1", "people", 1.0, 0.0, "basic", schema_hash="s1")
    with pytest.raises(LedgerError) as info:
        led.register_dataset("digest-2", "people-2026-11-28.csv", 1.0, 0.0, "basic", schema_hash="s1")
    msg = str(info.value)
    assert "'people'" in msg and a.fingerprint in msg and "dataset_name" in msg and "declare" in msg
    ident = led.identify("digest-2", name="people-2026-11-28.csv", schema_hash="s1")
    assert ident.dataset is None and [d.fingerprint for d in ident.resembles] == [a.fingerprint]
    # the deliberate act: a new, unique name
    c = led.declare_dataset("people (second cohort)", 1.0, 0.0, "basic", schema_hash="s1", digest="digest-2")
    assert c.fingerprint != a.fingerprint and len(led.datasets()) == 2
    with pytest.raises(LedgerError, match="registered already"):
        led.declare_dataset("PEOPLE", 1.0, 0.0, "basic", schema_hash="s9")


def test_identity_a_version_spends_the_same_budget(tmp_path: Path) -> None:
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    a = led.register_dataset("digest-1", "people", 1.0, 0.0, "basic")
    led.release("digest-1", "p1", "s", [("q", pure(0.6))], lambda: {"q": 1})
    b = led.register_dataset("digest-2", "people", 1.0, 0.0, "basic")
    from planner.core.errors import BudgetExceededError

    with pytest.raises(BudgetExceededError):  # 0.6 + 0.6 > 1 on the one budget
        led.release("digest-2", "p2", "s", [("q", pure(0.6))], lambda: {"q": 2})
    assert b.fingerprint == a.fingerprint and led.status(a.fingerprint).epsilon_spent == pytest.approx(0.6)


def test_identity_names_are_printable(tmp_path: Path) -> None:
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    for bad in ("a\x00b", "a\x1bb", "x\ufffe", "tab\there"):
        with pytest.raises(LedgerError, match="unprintable character"):
            led.register_dataset("digest", bad, 1.0, 0.0, "basic")


# ------------------------------------------------------------------ the command line


def _people(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"pid": np.arange(n), "age": rng.integers(18, 90, n)})


def _plan(tmp: Path, epsilon: float, name: str | None = None) -> Path:
    spec: dict[str, Any] = {
        "schema": SCHEMA,
        "budget": {"epsilon": epsilon, "delta": 0.0, "composition": "basic"},
        "lifetime": {"epsilon": 1.0, "delta": 0.0},
        "queries": [{"id": "n", "kind": "count", "mechanism": "laplace", "weight": 1}],
    }
    if name:
        spec["dataset_name"] = name
    p = tmp / f"plan-{epsilon}-{name}.json"
    p.write_text(json.dumps(spec))
    return p


def _release(capsys: pytest.CaptureFixture[str], plan: Path, data: Path, url: str) -> tuple[int, dict[str, Any]]:
    code = main(["release", "--spec", str(plan), "--data", str(data), "--ledger", url, "--backend", "pandas"])
    out, err = capsys.readouterr()
    return code, json.loads(out if code == 0 else err)


@pytest.mark.parametrize("change", ["appended row", "edited value", "reordered", "latin-1 semicolons",
                                    "parquet", "extra column"])
def test_identity_a_changed_file_draws_on_the_same_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          change: str) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    df = _people(400)
    first = tmp_path / "people.csv"
    df.to_csv(first, index=False)
    code, out = _release(capsys, _plan(tmp_path, 0.6, "people"), first, url)
    assert code == 0, out
    later = df.copy()
    if change == "appended row":
        later = pd.concat([later, pd.DataFrame({"pid": [400], "age": [50]})], ignore_index=True)
    elif change == "edited value":
        later.loc[7, "age"] = 99
    elif change == "reordered":
        later = later.iloc[::-1]
    elif change == "extra column":
        later["income"] = 1000
    second = tmp_path / "again" / ("people.parquet" if change == "parquet" else "people.csv")
    second.parent.mkdir()
    if change == "parquet":
        later.to_parquet(second, index=False)
    elif change == "latin-1 semicolons":
        later.to_csv(second, index=False, sep=";", encoding="latin-1")
    else:
        later.to_csv(second, index=False)
    # 0.6 + 0.5 > the lifetime 1: another plan on the changed file is refused on the one budget
    code, out = _release(capsys, _plan(tmp_path, 0.5, "people"), second, url)
    assert code == 2 and "only ε = 0.4" in out["error"], out
    code, out = _release(capsys, _plan(tmp_path, 0.4, "people"), second, url)
    assert code == 0, out
    led = Ledger(url)
    (only,) = led.datasets()
    assert led.status(only.fingerprint).epsilon_spent == pytest.approx(1.0)
    # the first plan again on the changed file: new content is a new release (refused, the
    # budget is spent); on content the ledger knows, the stored answers (nothing sampled)
    code, out = _release(capsys, _plan(tmp_path, 0.6, "people"), second, url)
    same_content = change in ("reordered", "latin-1 semicolons", "parquet", "extra column")
    assert (code, out.get("status")) == ((0, "reused") if same_content else (2, None)), out


def test_identity_an_unnamed_changed_file_is_told_which_dataset_it_resembles(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    df = _people(400)
    (tmp_path / "people.csv").write_text(df.to_csv(index=False))
    code, out = _release(capsys, _plan(tmp_path, 0.5), tmp_path / "people.csv", url)
    assert code == 0, out
    nightly = tmp_path / "people-2026-11-29.csv"  # the nightly export under another file name
    pd.concat([df, pd.DataFrame({"pid": [400], "age": [50]})]).to_csv(nightly, index=False)
    code, out = _release(capsys, _plan(tmp_path, 0.5), nightly, url)
    assert code == 2 and "'people.csv'" in out["error"] and "same schema" in out["error"], out
    assert len(Ledger(url).datasets()) == 1  # no second budget was opened
    # the CLI says the same before anything is released
    code = main(["dataset", "identify", "--spec", str(_plan(tmp_path, 0.5)), "--data", str(nightly),
                 "--ledger", url, "--backend", "pandas"])
    ident = json.loads(capsys.readouterr().out)
    assert code == 0 and ident["dataset"] is None and ident["resembles"][0]["name"] == "people.csv"
    # declaring it deliberately, under its own name, is the one way to a second budget
    code = main(["dataset", "declare", "--name", "people, second cohort", "--epsilon", "1", "--rule", "basic",
                 "--spec", str(_plan(tmp_path, 0.5)), "--data", str(nightly), "--ledger", url,
                 "--backend", "pandas"])
    assert code == 0, capsys.readouterr()
    capsys.readouterr()
    code, out = _release(capsys, _plan(tmp_path, 0.5), nightly, url)
    assert code == 0 and out["dataset"]["name"] == "people, second cohort", out
