"""Picking the active dataset and drafting its schema (Data page helpers).

The active dataset (``state.ACTIVE``) changes only when the owner picks another one; a
switch that would replace an edited workload waits for the owner's go-ahead
(``state.PENDING``). The schema the owner is typing is a draft kept per dataset
(``state.DRAFTS``), so it survives a visit to another page; saving it validates the whole
declaration and lists every problem at once (``planner.data.schema.SchemaProblems``).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import streamlit as st

from planner.core.errors import PlannerError
from planner.core.strict_json import MAX_MAGNITUDE
from planner.data.schema import (
    ColumnKind,
    MissingAction,
    Relation,
    Schema,
    SchemaProblems,
    format_text_list,
    parse_text_list,
)
from planner.privacy.sampling import SamplingScheme

from . import state as S

UNIT_ROW = "(one row per person)"


# ----------------------------------------------------------------------------- switching
def _clear_release_state() -> None:
    ss = st.session_state
    ss[S.LAST_RESULT] = None
    ss[S.LAST_RELEASE_ID] = None
    ss[S.RELEASE_ERROR] = None
    ss[S.CONFIRM_OPEN] = False
    ss[S.CONFIRMED] = False


def same_as_active(target: dict[str, Any], upload_bytes: bytes | None = None) -> bool:
    ss = st.session_state
    act = ss[S.ACTIVE]
    if target.get("source") == "upload":
        return act.get("source") == "upload" and upload_bytes is not None and upload_bytes == ss[S.UPLOAD_BYTES]
    return bool(act == target)


def describe(target: dict[str, Any], upload_name: str | None = None) -> str:
    if target["source"] == "sample":
        return f"the {target['sample']} sample"
    if target["source"] == "server":
        return str(target["file"])
    return upload_name or "the upload"


def request_switch(target: dict[str, Any], upload: dict[str, Any] | None = None) -> None:
    """Make ``target`` active, or ask first when that would replace an edited workload."""
    ss = st.session_state
    if same_as_active(target, upload["bytes"] if upload else None):
        ss[S.PENDING] = None
        return
    if S.workload_edited():
        ss[S.PENDING] = {"target": target, "upload": upload,
                         "label": describe(target, upload["name"] if upload else None)}
        return
    apply_switch(target, upload)


def apply_switch(target: dict[str, Any], upload: dict[str, Any] | None = None) -> None:
    ss = st.session_state
    if upload is not None:
        ss[S.UPLOAD_NAME] = upload["name"]
        ss[S.UPLOAD_BYTES] = upload["bytes"]
        ss[S.UPLOAD_FILE_ID] = upload["file_id"]
    ss[S.ACTIVE] = copy.deepcopy(target)
    ss[S.PENDING] = None
    _clear_release_state()


def confirm_switch() -> None:
    """on_click: the owner agreed to replace the edited workload."""
    p = st.session_state[S.PENDING]
    if p:
        apply_switch(p["target"], p["upload"])


def cancel_switch() -> None:
    """on_click: keep the active dataset (and clear a file waiting in the uploader)."""
    ss = st.session_state
    p = ss[S.PENDING]
    if p and p.get("upload"):
        ss[S.UPLOADER_VERSION] += 1
        ss[S.UPLOAD_FILE_ID] = None
    ss[S.PENDING] = None


# ----------------------------------------------------------------------------- schema draft
def draft_from_schema(schema: Schema | None, kinds: dict[str, str],
                      whole: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A draft the form can edit: the saved declaration, or the suggested kinds (and which
    numeric columns hold whole numbers) only."""
    cols: dict[str, dict[str, Any]] = {name: {"kind": kind, "bounds": "", "categories": "", "integer": name in whole}
                                       for name, kind in kinds.items()}
    if schema is None:
        return {"use": [], "columns": cols, "relation": Relation.ADD_REMOVE.value, "unit": UNIT_ROW, "max_rows": 1, "public_n": 0,
                "sample_rate": 0.0}
    for c in schema.columns:
        entry = cols.setdefault(c.name, {"kind": c.kind.value, "bounds": "", "categories": ""})
        entry["kind"] = c.kind.value
        entry["integer"] = c.integer
        if c.lower is not None and c.upper is not None:
            entry["bounds"] = f"{c.lower:g}, {c.upper:g}"
            if c.bounds_source is not None:  # kept while the bounds are the suggested ones
                entry["bounds"] = f"{c.lower:.15g}, {c.upper:.15g}"
                entry["suggested"] = entry["bounds"]
                entry["bounds_source"] = c.bounds_source.to_dict()
        if c.categories:
            entry["categories"] = format_text_list(c.categories)
        if c.missing.action is MissingAction.REPLACE and c.missing.value is not None:
            v = c.missing.value
            entry["missing"] = ("true" if v else "false") if isinstance(v, bool) else (
                f"{v:g}" if isinstance(v, float) else str(v))
    return {"use": [c.name for c in schema.columns], "columns": cols, "relation": schema.relation.value,
            "unit": schema.unit.column or UNIT_ROW, "max_rows": schema.unit.max_rows,
            "public_n": schema.public_n or 0,
            "sample_rate": schema.sampling.rate if schema.sampling is not None else 0.0}


def draft(fingerprint: str, schema: Schema | None, kinds: dict[str, str],
          whole: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The durable draft of a dataset's schema (created on first use)."""
    drafts = st.session_state[S.DRAFTS]
    if fingerprint not in drafts:
        drafts[fingerprint] = draft_from_schema(schema, kinds, whole)
    return dict(drafts[fingerprint])


def missing_rule(name: str, kind: str, text: str, problems: list[str]) -> dict[str, Any]:
    """The column's missing-value rule from the form's text: blank drops the row from the
    answers on this column; a value replaces the missing cell (a number for a numeric column,
    true/false for a boolean one, a declared category for a categorical one)."""
    t = text.strip()
    if not t:
        return {"action": "drop"}
    if kind == ColumnKind.NUMERIC:
        try:
            value: Any = float(t)
        except ValueError:
            problems.append(f"column {name!r}: the value that replaces a missing cell must be a number; got {t[:30]!r}.")
            return {"action": "drop"}
        if not math.isfinite(value):
            problems.append(f"column {name!r}: the value that replaces a missing cell must be a finite number.")
            return {"action": "drop"}
        return {"action": "replace", "value": value}
    if kind == ColumnKind.BOOLEAN:
        if t.lower() not in ("true", "false"):
            problems.append(f"column {name!r}: the value that replaces a missing cell must be true or false.")
            return {"action": "drop"}
        return {"action": "replace", "value": t.lower() == "true"}
    return {"action": "replace", "value": t}


def spec_from_draft(d: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The schema JSON the draft declares, and the problems found reading the form's text.

    Only the columns in ``d["use"]`` are declared; the others are ignored by every query.
    """
    problems: list[str] = []
    columns = []
    for name in d["use"]:
        c = d["columns"].get(name, {"kind": "numeric", "bounds": "", "categories": ""})
        entry: dict[str, Any] = {"name": name, "kind": c["kind"]}
        if c["kind"] != ColumnKind.IDENTIFIER:
            entry["missing"] = missing_rule(name, c["kind"], c.get("missing") or "", problems)
        if c["kind"] == ColumnKind.NUMERIC:
            text = (c.get("bounds") or "").strip()
            if text:
                parts = [p.strip() for p in text.replace(";", ",").split(",")]
                try:
                    if len(parts) != 2:
                        raise ValueError
                    entry["lower"], entry["upper"] = float(parts[0]), float(parts[1])
                    huge = [t for t, v in zip(parts, (entry["lower"], entry["upper"]), strict=True)
                            if math.isinf(v) and "inf" not in t.lower()]
                    if huge:
                        problems.append(f"column {name!r}: the bound {huge[0][:30]!r} is beyond the largest "
                                        "number a float holds (about 1.8e308); declare a finite public bound.")
                        continue
                    past = [t for t, v in zip(parts, (entry["lower"], entry["upper"]), strict=True)
                            if math.isfinite(v) and abs(v) > MAX_MAGNITUDE]
                    if past:  # saved, it would be a schema file no page could read back
                        problems.append(f"column {name!r}: the bound {past[0][:30]!r} is past ±2**53 "
                                        f"(±{MAX_MAGNITUDE:.4g}), the largest a schema file holds; declare a "
                                        "realistic public bound.")
                        continue
                except ValueError:
                    problems.append(f"column {name!r}: bounds must be two numbers 'L, U' (e.g. 0, 120); "
                                    f"got {text!r}.")
                    continue
            if c.get("bounds_source") and text == c.get("suggested"):  # the DP suggestion, untouched
                entry["bounds_source"] = c["bounds_source"]
            if c.get("integer"):
                entry["integer"] = True
        if c["kind"] == ColumnKind.CATEGORICAL:
            try:
                entry["categories"] = parse_text_list(c.get("categories") or "")
            except ValueError as exc:
                problems.append(f"column {name!r}: categories: {exc}")
                continue
        columns.append(entry)
    unit = d.get("unit") or UNIT_ROW
    spec = {
        "version": 1, "relation": d.get("relation", Relation.ADD_REMOVE.value),
        "privacy_unit": {"column": None if unit == UNIT_ROW else unit, "max_rows": int(d.get("max_rows") or 1)},
        "public_n": int(d.get("public_n") or 0) or None, "columns": columns,
    }
    rate = float(d.get("sample_rate") or 0.0)
    if rate > 0:  # a secret sample: the scheme follows the relation (poisson ↔ add/remove)
        spec["sampling"] = {"rate": rate, "scheme": (SamplingScheme.POISSON if spec["relation"] == Relation.ADD_REMOVE
                                                       else SamplingScheme.WITHOUT_REPLACEMENT).value}
    return spec, problems


def validate_draft(d: dict[str, Any]) -> tuple[Schema | None, list[str]]:
    """The schema the draft declares, or every problem in it (form text and declaration)."""
    if not d["use"]:
        return None, ["no column is used yet: pick the columns your queries need (the others are ignored)."]
    spec, problems = spec_from_draft(d)
    try:
        schema = Schema.from_dict(spec)
    except SchemaProblems as exc:
        return None, problems + list(exc.problems)
    except PlannerError as exc:
        return None, [*problems, str(exc)]
    if problems:
        return None, problems
    return schema, []


def schema_json_text(schema: Schema) -> str:
    return schema.to_json()


def load_schema_file(raw: bytes) -> tuple[Schema, bool]:
    """A schema JSON file the owner uploads, or a plan file (PLAN.json holds its schema):
    (the schema, whether it came from a plan file). Raises the engine's SchemaError for a
    file that is neither."""
    from planner.planning.plan_spec import loads_plan_spec

    try:
        return Schema.from_json(raw), False
    except PlannerError as not_a_schema:
        try:
            return loads_plan_spec(raw).schema, True
        except PlannerError:
            raise not_a_schema from None


def dumps(d: dict[str, Any]) -> str:
    return json.dumps(d, sort_keys=True)
