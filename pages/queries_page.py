"""Queries: the workload in an editable table, validated against the schema."""

from __future__ import annotations

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

st.caption(
    "One row per statistic to release. **weight** is its importance in the weighted plan; "
    "**target** is the ±error (95%, in the answer's units) wanted in target mode."
)
kinds = [k.value for k in QueryKind]
mechs = sorted({m.value for ms in VALID_MECHANISMS.values() for m in ms})
columns = ["", *schema.names]
base = pd.DataFrame(ss[S.WORKLOAD_BASE], columns=["id", "kind", "column", "mechanism", "weight", "target"])
edited = st.data_editor(
    base,
    key=S.EDITOR,
    num_rows="dynamic",
    hide_index=True,
    width="stretch",
    column_config={
        "id": st.column_config.TextColumn("id", required=True),
        "kind": st.column_config.SelectboxColumn("kind", options=kinds, required=True),
        "column": st.column_config.SelectboxColumn("column", options=columns),
        "mechanism": st.column_config.SelectboxColumn("mechanism", options=mechs, required=True),
        "weight": st.column_config.NumberColumn("weight", min_value=0.0, format="%.3g"),
        "target": st.column_config.NumberColumn("target", min_value=0.0, format="%.4g"),
    },
)
rows = edited.to_dict("records")
ss[S.WORKLOAD] = rows

c1, c2 = st.columns([1, 1])
if c1.button("Reset to the default workload", key="queries_reset"):
    S.reset_workload(data.sample)
    st.rerun()

try:
    qs = cached.parse_queries(cached.workload_json(rows, ss[S.MODE]), sj)
except PlannerError as exc:
    st.error(f"The workload is not valid yet: {exc}")
else:
    st.success(f"{len(qs)} valid queries.")

with st.expander("Valid mechanisms per kind", expanded=False):
    st.dataframe(
        pd.DataFrame([{"kind": k.value, "mechanisms": ", ".join(sorted(m.value for m in v))}
                      for k, v in VALID_MECHANISMS.items()]),
        hide_index=True, width="stretch",
    )
