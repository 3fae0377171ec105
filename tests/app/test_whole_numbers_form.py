"""The Data page's "whole numbers" tick: suggested for a new draft, read back from a saved
schema, written to the schema only for a numeric column (``pages/_ui/datasets.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from pages._ui import datasets
from planner.data.schema import Schema

CENSUS = Schema.load(Path(__file__).resolve().parents[2] / "data" / "census.schema.json")


def test_suggested_ticks_reach_the_schema_for_numeric_columns_only() -> None:
    kinds = {"age": "numeric", "income": "numeric", "region": "categorical"}
    d = datasets.draft_from_schema(None, kinds, frozenset({"age"}))
    assert [d["columns"][c]["integer"] for c in kinds] == [True, False, False]
    d["use"] = list(kinds)
    d["columns"]["age"]["bounds"] = "18, 90"
    d["columns"]["income"]["bounds"] = "0, 1e6"
    d["columns"]["region"].update(categories="a, b", integer=True)  # a tick left from when it was numeric
    spec, problems = datasets.spec_from_draft(d)
    assert problems == []
    assert {c["name"]: c.get("integer") for c in spec["columns"]} == {"age": True, "income": None, "region": None}
    schema = Schema.from_dict(spec)
    assert schema.column("age").integer and not schema.column("income").integer


def test_a_saved_declaration_is_shown_ticked_and_saved_again_unchanged() -> None:
    raw = json.loads(CENSUS.to_json())
    next(c for c in raw["columns"] if c["name"] == "age")["integer"] = True
    saved = Schema.from_dict(raw)
    d = datasets.draft_from_schema(saved, {})
    assert d["columns"]["age"]["integer"] is True and d["columns"]["income"]["integer"] is False
    spec, problems = datasets.spec_from_draft(d)
    assert problems == []
    again = Schema.from_dict(dict(spec, salt=raw["salt"]))  # the form does not carry the sample's salt
    assert again.column("age").integer and again.schema_hash() == saved.schema_hash()
