"""Issue 27, finding 2: one table, one budget — a changed table is a new *version of the
same dataset*, never a fresh lifetime budget by accident.

How "the same dataset" is recognised (the decision these tests encode):

- **By content** where the content is known: the README's rule (*The privacy ledger*: "the
  same table saved with other line endings, reordered, as Parquet instead of CSV, or with an
  extra undeclared column is the same dataset with one budget").
- **By name** where the content is new: a dataset *is a registered name with versions*, and
  names are unique per ledger (issue 27, *What to build*). A plan whose ``dataset_name`` names
  a registered dataset releases on that dataset: its ``lifetime`` block, equal to the
  registered one, confirms the budget and never opens a second one. So the same plan family
  (same ``dataset_name``, same ``lifetime``) run on the table plus one appended row, with one
  value edited, reordered, re-encoded (Latin-1, ``;`` as delimiter, Parquet) or with an extra
  column spends on the one dataset, and the ledger ends with one dataset.
- **By schema** as a hint only: a file whose content and name are both unknown but whose
  declared schema is that of a registered dataset *resembles* it; the command line must
  name that dataset (issue 27: "when a file is unknown but a dataset of that name (or with
  that schema) exists, the CLI and the app say which dataset it resembles and what to do")
  and must not open a second budget for it. Either outcome is accepted here: a refusal
  (exit 2) naming the dataset, or a release recorded on that same dataset.

Every release below uses a distinct plan (its own query id), so a plan is never "reused"
and each one spends its ε = 1 (basic composition: spends add up, by hand) against a lifetime
budget of ε = 3.

Today a CLI release of an appended or edited table declares a second dataset of the same
name (``register_dataset`` does not apply ``declare_dataset``'s unique-name rule), so
ε = 2 is spent on the same 400 people under two budgets.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from planner.cli import main
from planner.core.errors import LedgerError
from planner.ledger import Ledger

REGIONS = ("North", "South", "Zürich")
LIFETIME = 3.0
PER_RELEASE = 1.0


def people(n: int = 400, seed: int = 27) -> list[tuple[str, int, str]]:
    """400 people: a unique pid, an age 18..90, a region (Zürich makes Latin-1 differ from UTF-8)."""
    r = random.Random(seed)
    return [(f"p{i:04d}", r.randint(18, 90), REGIONS[r.randrange(3)]) for i in range(n)]


def csv_text(rows: list[tuple[str, int, str]], delimiter: str = ",", extra: bool = False) -> str:
    head = ["pid", "age", "region"] + (["note"] if extra else [])
    lines = [delimiter.join(head)]
    for i, (p, a, g) in enumerate(rows):
        lines.append(delimiter.join([p, str(a), g] + ([f"note {i}"] if extra else [])))
    return "\n".join(lines) + "\n"


SCHEMA: dict[str, Any] = {
    "version": 1, "relation": "add_remove", "public_n": 400,
    "privacy_unit": {"column": "pid", "max_rows": 1},
    "columns": [
        {"name": "pid", "kind": "identifier"},
        {"name": "age", "kind": "numeric", "lower": 18, "upper": 90, "missing": {"action": "drop"}},
        {"name": "region", "kind": "categorical", "categories": list(REGIONS), "other_bin": False,
         "missing": {"action": "drop"}},
    ],
}


def plan_file(folder: Path, k: int, *, name: str | None = "people") -> Path:
    """Plan ``k``: one count of ε = 1 (query id ``n<k>``, so every plan is distinct), the
    lifetime block ε = 3, and the dataset's name (README, *Command line*: PLAN.json)."""
    doc: dict[str, Any] = {
        "schema": SCHEMA, "budget": {"epsilon": PER_RELEASE, "delta": 0.0, "composition": "basic"},
        "lifetime": {"epsilon": LIFETIME, "delta": 0.0},
        "queries": [{"id": f"n{k}", "kind": "count", "mechanism": "laplace"}],
    }
    if name is not None:
        doc["dataset_name"] = name
    path = folder / f"plan{k}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def write_variant(folder: Path, variant: str) -> Path:
    rows = people()
    if variant == "appended_row":
        path = folder / "people_appended.csv"
        path.write_text(csv_text([*rows, ("p9999", 44, "North")]), encoding="utf-8")
    elif variant == "edited_value":
        edited = list(rows)
        pid, age, region = edited[10]
        edited[10] = (pid, 19 if age != 19 else 20, region)
        path = folder / "people_edited.csv"
        path.write_text(csv_text(edited), encoding="utf-8")
    elif variant == "reordered_rows":
        path = folder / "people_reordered.csv"
        path.write_text(csv_text(list(reversed(rows))), encoding="utf-8")
    elif variant == "latin1":
        path = folder / "people_latin1.csv"
        path.write_bytes(csv_text(rows).encode("latin-1"))
    elif variant == "semicolons":
        path = folder / "people_semicolons.csv"
        path.write_text(csv_text(rows, ";"), encoding="utf-8")
    elif variant == "extra_column":
        path = folder / "people_extra.csv"
        path.write_text(csv_text(rows, extra=True), encoding="utf-8")
    elif variant == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = folder / "people.parquet"
        pq.write_table(pa.table({"pid": [p for p, _, _ in rows], "age": [a for _, a, _ in rows],
                                 "region": [g for _, _, g in rows]}), path)
    else:
        raise AssertionError(variant)
    return path


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def release(plan: Path, data: Path, url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    return run(["release", "--spec", str(plan), "--data", str(data), "--ledger", url], capsys)


def ledger_index(url: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    code, out, err = run(["ledger", "--ledger", url], capsys)
    assert code == 0, err
    datasets: list[dict[str, Any]] = out["datasets"]
    return datasets


@pytest.fixture
def first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """The original table released once through plan 1: (ledger URL, the dataset's key)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    original = tmp_path / "people.csv"
    original.write_text(csv_text(people()), encoding="utf-8")
    code, out, err = release(plan_file(tmp_path, 1), original, url, capsys)
    assert code == 0, err
    assert out["budget"]["epsilon_spent"] == pytest.approx(PER_RELEASE)
    return url, out["dataset"]["fingerprint"]


VARIANTS = ["appended_row", "edited_value", "reordered_rows", "latin1", "semicolons", "parquet", "extra_column"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_changed_or_re_encoded_table_draws_on_the_same_budget(
    variant: str, first: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, key = first
    code, out, err = release(plan_file(tmp_path, 2), write_variant(tmp_path, variant), url, capsys)
    assert code == 0, err
    assert out["dataset"]["fingerprint"] == key, "released on another dataset than the table's own"
    assert out["dataset"]["name"] == "people"
    datasets = ledger_index(url, capsys)
    assert [d["name"] for d in datasets] == ["people"], datasets
    # 1 + 1 under basic composition (hand sum), on the one budget of ε = 3
    assert datasets[0]["epsilon_spent"] == pytest.approx(2 * PER_RELEASE)
    assert datasets[0]["epsilon_total"] == LIFETIME


def test_a_nightly_pipeline_exhausts_one_lifetime_budget_across_versions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The owner's nightly job overwrites people.csv (one more row each night, one value
    corrected on night 3) and releases a new plan each night with the same ``lifetime``
    block: nights 1-3 spend 3 × 1 = 3 = the lifetime budget (hand sum); night 4 is refused
    for budget (exit 2, README *Command line*), and the ledger holds one dataset."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    data = tmp_path / "people.csv"
    rows = people()
    keys = []
    for night in (1, 2, 3, 4):
        if night > 1:
            rows.append((f"p{9000 + night}", 30 + night, "South"))
        if night == 3:
            pid, age, region = rows[5]
            rows[5] = (pid, 19 if age != 19 else 20, region)
        data.write_text(csv_text(rows), encoding="utf-8")
        code, out, err = release(plan_file(tmp_path, night), data, url, capsys)
        if night < 4:
            assert code == 0, (night, err)
            keys.append(out["dataset"]["fingerprint"])
        else:
            assert code == 2, (night, out)
            msg = json.loads(err)["error"]
            assert "remains" in msg or "budget" in msg, msg
    assert len(set(keys)) == 1, "a night's table became a dataset of its own"
    datasets = ledger_index(url, capsys)
    assert len(datasets) == 1, [(d["name"], d["epsilon_spent"]) for d in datasets]
    assert datasets[0]["epsilon_spent"] == pytest.approx(LIFETIME)
    assert datasets[0]["releases"] == 3


def test_an_unknown_file_with_a_registered_schema_names_the_dataset_it_resembles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ``dataset_name`` in the plans: the first file's dataset is named after it
    (``people.csv``, the CLI's default name). A second file, one row appended and named by
    date, has unknown content and an unknown name but the same declared schema: the CLI must
    name ``people.csv`` (in its output or its error) and must not open a second budget."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    original = tmp_path / "people.csv"
    original.write_text(csv_text(people()), encoding="utf-8")
    code, out, err = release(plan_file(tmp_path, 1, name=None), original, url, capsys)
    assert code == 0, err
    assert out["dataset"]["name"] == "people.csv"  # the default name: the file's
    dated = tmp_path / "people_2026-11-29.csv"
    dated.write_text(csv_text([*people(), ("p9999", 44, "North")]), encoding="utf-8")
    code, out, err = release(plan_file(tmp_path, 2, name=None), dated, url, capsys)
    said = json.dumps(out) + err
    assert "people.csv" in said, said
    assert code in (0, 2), err
    datasets = ledger_index(url, capsys)
    assert [d["name"] for d in datasets] == ["people.csv"], datasets
    # refused: nothing more spent; released: on that one budget (1 + 1, by hand)
    assert datasets[0]["epsilon_spent"] == pytest.approx(PER_RELEASE if code == 2 else 2 * PER_RELEASE)


@pytest.mark.parametrize(("first_call", "second_name"), [
    ("register", "people"), ("register", "People"), ("register", " people "), ("declare", "people"),
])
def test_one_name_is_one_dataset(tmp_path: Path, first_call: str, second_name: str) -> None:
    """Two registrations under one name (``declare_dataset``'s rule: case and surrounding
    blanks ignored) never make two datasets: the second call is refused or returns the
    first dataset."""
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        if first_call == "register":
            led.register_dataset("digest-1", "people", LIFETIME, 0.0, "basic")
        else:
            led.declare_dataset("people", LIFETIME, 0.0, "basic", schema_hash="schema-1", digest="digest-1")
        try:
            led.register_dataset("digest-2", second_name, LIFETIME, 0.0, "basic")
        except LedgerError as exc:
            assert "people" in str(exc).casefold(), str(exc)  # names the existing dataset
        same = [d for d in led.datasets() if d.name.strip().casefold() == "people"]
        assert len(same) == 1, [(d.name, d.fingerprint) for d in same]
    finally:
        led.close()
