"""Queries: build a query from its statistic's declaration; the whole workload in a table."""

from __future__ import annotations

import copy
from typing import Any

import pandas as pd
import streamlit as st

from pages._ui import builder, cached
from pages._ui import state as S
from pages._ui.guard import guard
from pages._ui.preamble import require_dataset
from planner.planning.queries import QueryKind
from planner.planning.statistics import STATISTICS
from planner.privacy.budget import SplitMode

st.title("Queries")

data, schema, sj = require_dataset()
ss = st.session_state
PAGE = "queries"
mode = S.split_mode(ss[S.MODE])
uses = "target" if mode is SplitMode.TARGET else "weight"

st.caption(
    "One query per answer to release. Build one with the form (it offers, for each kind of statistic, only the "
    "mechanisms and options that statistic declares), or edit the table below for an overview and bulk changes. "
    f"The Planner is in **{S.MODE_LABELS[mode]}** mode, so the **{uses}** of each query is the one in "
    "use. Edits are kept when you visit other pages."
)

# ----------------------------------------------------------------------------- the builder
with st.container(border=True):
    st.subheader("Build a query")
    ids = [str(r.get("id")) for r in S.clean_rows(ss[S.WORKLOAD]) if r.get("id")]
    if ids:
        e1, e2 = st.columns([3, 1], vertical_alignment="bottom")
        if ss.get("queries:edit_pick") not in ids:
            ss["queries:edit_pick"] = ids[0]
        e1.selectbox("Or edit an existing query in the form", ids, key="queries:edit_pick")
        e2.button("Edit in the form", key="queries:edit_load",
                  on_click=lambda: builder.load(ss["queries:edit_pick"]))
    builder.render(schema, mode)

# ----------------------------------------------------------------------------- the table
st.subheader("All queries")
st.caption("**options** holds each query's own options as JSON (for example `{\"alphas\": [0.1, 0.9]}` for a "
           "quantile query); the form above writes them for you. **scale** (optional) is a public size the "
           "query's error is measured against.")
# The editor shows the durable workload: it is mounted on a copy of it (``queries:base``)
# and every edit is applied to that copy and written back in on_change. A visit to another
# page deletes the editor's state; the next mount starts from the durable workload, edits
# included. A replaced workload (reset, added query, new dataset) gets a fresh editor key.
editor_key = f"queries:editor:{ss[S.EDITOR_VERSION]}"
if editor_key not in ss or "queries:base" not in ss:
    ss["queries:base"] = [dict(r, options=S.options_text(r.get("options")))
                          for r in S.normal_rows(copy.deepcopy(ss[S.WORKLOAD]))]


def _edited() -> None:
    ss[S.WORKLOAD] = S.apply_editor_changes(ss["queries:base"], ss[editor_key])


kinds = [k.value for k in QueryKind]
mechs = sorted({m.name.value for stat in STATISTICS.values() for m in stat.mechanisms})
columns = ["", *schema.names]
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
        "mechanism": st.column_config.SelectboxColumn(
            "mechanism", options=mechs, required=True,
            help="must be one its kind offers (the form lists only those); an invalid pair is refused with a reason"),
        "weight": st.column_config.NumberColumn("weight", min_value=0.0, format="%.3g"),
        "target": st.column_config.NumberColumn("target ±", min_value=0.0, format="%.4g"),
        "scale": st.column_config.NumberColumn("scale", min_value=0.0, format="%.4g",
                                               help="optional public size the error is measured against"),
        "options": st.column_config.TextColumn("options", width="large",
                                               help='the kind\'s own options as JSON, e.g. {"alphas": [0.1, 0.9]}'),
    },
)
rows = ss[S.WORKLOAD]

with guard("The workload is not valid yet: ", stop=False) as g:
    qs = cached.parse_queries(cached.workload_json(rows, mode), sj)
if g.ok:
    st.success(f"{len(qs)} valid queries" + (" (edited)." if S.workload_edited() else "."))


def _reset() -> None:
    S.set_workload(S.default_workload(data.sample) if data.sample else S.starter_workload(schema.to_dict()),
                   data.fingerprint)
    S.notice(PAGE, "The workload is back to its starting point.")


note = S.pop_notice(PAGE)
if note:
    st.success(note)
st.button("Reset to the starting workload", key="queries:reset", on_click=_reset,
          help="Throws away your edits to the workload.")

with st.expander("What each kind offers", expanded=False):
    table: list[dict[str, Any]] = [
        {"kind": k.value, "statistic": s.label, "column": s.column_hint,
         "mechanisms": ", ".join(m.name.value for m in s.mechanisms),
         "options": ", ".join(o.name for o in s.options) or "—"}
        for k, s in STATISTICS.items()]
    st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch")
