"""Queries: the workload in an editable table, validated against the schema."""

from __future__ import annotations

import copy
from typing import Any

import pandas as pd
import streamlit as st

from pages._ui import cached
from pages._ui import state as S
from pages._ui.preamble import require_dataset
from planner.errors import PlannerError
from planner.queries import VALID_MECHANISMS, QueryKind

st.title("Queries")

data, schema, sj = require_dataset()
ss = st.session_state
PAGE = "queries"
mode = ss[S.MODE]

st.caption(
    "One row per statistic to release. **weight** is its importance when the Planner splits a budget "
    "(weighted mode); **target** is the ±error (95%, in the answer's units) wanted in target mode. "
    f"The Planner is in **{mode}** mode, so the **{'weight' if mode == 'weighted' else 'target'}** column is "
    "the one in use. Edits are kept when you visit other pages."
)

kinds = [k.value for k in QueryKind]
mechs = sorted({m.value for ms in VALID_MECHANISMS.values() for m in ms})
columns = ["", *schema.names]

# The editor shows the durable workload: it is mounted on a copy of it (``queries:base``)
# and every edit is applied to that copy and written back in on_change. A visit to another
# page deletes the editor's state; the next mount starts from the durable workload, edits
# included. A replaced workload (reset, added query, new dataset) gets a fresh editor key.
editor_key = f"queries:editor:{ss[S.EDITOR_VERSION]}"
if editor_key not in ss or "queries:base" not in ss:
    ss["queries:base"] = copy.deepcopy(ss[S.WORKLOAD])


def _edited() -> None:
    ss[S.WORKLOAD] = S.apply_editor_changes(ss["queries:base"], ss[editor_key])


base = pd.DataFrame(ss["queries:base"], columns=list(S.WORKLOAD_COLUMNS))
st.data_editor(
    base,
    key=editor_key,
    on_change=_edited,
    num_rows="dynamic",
    hide_index=True,
    width="stretch",
    column_config={
        "id": st.column_config.TextColumn("id", required=True, help="a short unique name for the answer"),
        "kind": st.column_config.SelectboxColumn("kind", options=kinds, required=True),
        "column": st.column_config.SelectboxColumn("column", options=columns,
                                                   help="the declared column it reads (none for a row count)"),
        "mechanism": st.column_config.SelectboxColumn("mechanism", options=mechs, required=True),
        "weight": st.column_config.NumberColumn("weight", min_value=0.0, format="%.3g"),
        "target": st.column_config.NumberColumn("target ±", min_value=0.0, format="%.4g"),
    },
)
rows = ss[S.WORKLOAD]

try:
    qs = cached.parse_queries(cached.workload_json(rows, mode), sj)
except PlannerError as exc:
    st.error(f"The workload is not valid yet: {exc}")
else:
    st.success(f"{len(qs)} valid queries" + (" (edited)." if S.workload_edited() else "."))


def _reset() -> None:
    S.set_workload(S.default_workload(data.sample) if data.sample else S.starter_workload(schema.to_dict()),
                   data.fingerprint)
    S.notice(PAGE, "The workload is back to its starting point.")


# ----------------------------------------------------------------------------- add a query
def _add() -> None:
    row: dict[str, Any] = {
        "id": (ss.get("queries:add_id") or "").strip(),
        "kind": ss.get("queries:add_kind"),
        "column": ss.get("queries:add_column") or None,
        "mechanism": ss.get("queries:add_mechanism"),
        "weight": float(ss.get("queries:add_weight") or 1.0),
        "target": ss.get("queries:add_target"),
    }
    ss["queries:add_error"] = None
    if not row["id"]:
        ss["queries:add_error"] = "Give the new query an id (a short unique name, e.g. age_mean)."
        return
    if row["id"] in {r.get("id") for r in S.clean_rows(ss[S.WORKLOAD])}:
        ss["queries:add_error"] = f"A query named {row['id']!r} already exists; pick another id."
        return
    try:
        cached.parse_queries(cached.workload_json([row], "weighted"), sj)
    except PlannerError as exc:
        ss["queries:add_error"] = str(exc)
        return
    ss[S.WORKLOAD] = [*ss[S.WORKLOAD], row]
    ss[S.EDITOR_VERSION] += 1
    ss["queries:add_id"] = ""
    S.notice(PAGE, f"Added {row['id']}.")


with st.expander("Add a query", expanded=True):
    with st.form("queries_add", border=False, enter_to_submit=False):
        a1, a2, a3, a4, a5, a6 = st.columns([2, 2, 2, 2, 1, 1])
        a1.text_input("id", key="queries:add_id", placeholder="e.g. age_mean")
        a2.selectbox("kind", kinds, key="queries:add_kind")
        a3.selectbox("column", columns, key="queries:add_column", format_func=lambda c: c or "(none: count rows)")
        a4.selectbox("mechanism", mechs, key="queries:add_mechanism",
                     help="Valid mechanisms per kind are listed below; an invalid pair is refused with a reason.")
        a5.number_input("weight", min_value=0.0, value=1.0, step=1.0, key="queries:add_weight")
        a6.number_input("target ±", min_value=0.0, value=None, key="queries:add_target")
        st.form_submit_button("Add the query", key="queries:add", on_click=_add)
    if ss.get("queries:add_error"):
        st.error(ss["queries:add_error"])

note = S.pop_notice(PAGE)
if note:
    st.success(note)
st.button("Reset to the starting workload", key="queries:reset", on_click=_reset,
          help="Throws away your edits to the workload.")

with st.expander("Valid mechanisms per kind", expanded=False):
    st.dataframe(
        pd.DataFrame([{"kind": k.value, "mechanisms": ", ".join(sorted(m.value for m in v))}
                      for k, v in VALID_MECHANISMS.items()]),
        hide_index=True, width="stretch",
    )
