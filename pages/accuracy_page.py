"""Accuracy: predicted error of one query against ε for every applicable mechanism."""

from __future__ import annotations

import json

import numpy as np
import streamlit as st

from pages._ui import cached, charts
from pages._ui import state as S
from planner.errors import PlannerError
from planner.queries import QueryKind

S.init_state()
ss = st.session_state

st.title("Accuracy against ε")

try:
    data = cached.active()
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
cached.sync_workload(data)
if data.schema is None:
    st.info("Declare a schema on the Data page first.")
    st.stop()

wl = cached.workload_json(ss[S.WORKLOAD], ss[S.MODE])
try:
    queries = cached.parse_queries(wl, data.schema_json or "")
except PlannerError as exc:
    st.error(f"Fix the workload on the Queries page first: {exc}")
    st.stop()
if not queries:
    st.info("The workload is empty: add queries on the Queries page.")
    st.stop()
by_id = {q.id: q for q in queries}
if ss[S.ACC_QUERY] not in by_id:
    ss[S.ACC_QUERY] = queries[0].id

qid = st.selectbox("Query", list(by_id), key=S.ACC_QUERY)
query = by_id[qid]
eps = st.select_slider("ε", options=[float(f"{e:.3g}") for e in np.geomspace(0.01, 10, 31)], key=S.ACC_EPS)
delta = float(ss[S.DELTA])
st.caption(f"δ = {delta:g} for the Gaussian mechanisms (set on the Planner page). "
           "Everything on this chart is data-independent: schema, ε, δ and the declared public n.")

qdict = query.to_dict()
qjson = json.dumps(qdict, sort_keys=True)
grid = tuple(sorted(set(cached.EPS_GRID) | {float(eps)}))
curves, notes = cached.accuracy_curves(qjson, data.schema_json or "", delta, grid)
lower = cached.lower_bound_curve(qjson, data.schema_json or "", grid)
if curves.empty:
    st.warning("No mechanism of this query has an accuracy prediction.")
else:
    unit = str(curves["unit"].iloc[0])
    st.altair_chart(charts.accuracy_chart(curves, lower, float(eps), unit), width="stretch")
    at = curves[curves["epsilon"] == float(eps)]
    cols = st.columns(max(len(at), 1))
    for col, (_, r) in zip(cols, at.iterrows(), strict=False):
        col.metric(f"{r['mechanism']} RMSE", f"{r['RMSE']:.4g}", help=f"95% bound ±{r['95% bound']:.4g} {unit}")
        col.caption(f"95% bound ±{r['95% bound']:.4g} {unit}")
    if lower is not None:
        lb = lower[lower["epsilon"] == float(eps)]["RMSE lower bound (unbiased)"]
        st.metric("RMSE lower bound, any unbiased ε-DP mechanism", f"{float(lb.iloc[0]):.4g}")
for n in notes:
    st.caption(f"ℹ️ {n}")

st.divider()
st.toggle("Show data-dependent views (owner only)", key=S.ACC_DATA_VIEW)
if ss[S.ACC_DATA_VIEW]:
    st.error("⚠️ **Computed from your raw data — not private, do not share.** "
             "These views are never exported with a release (MATH.md §7).")
    if query.kind is QueryKind.MODE and query.column:
        try:
            dfp = cached.mode_exactness(data.fingerprint, data.schema_json or "", query.column, grid, data.df)
        except PlannerError as exc:
            st.error(str(exc))
        else:
            st.markdown("**P[released mode = true mode]**: inverse sensitivity mechanism at ε against "
                        "the best any unbiased mechanism can do at a fraction of ε (seed 000).")
            st.altair_chart(charts.probability_chart(dfp, float(eps)), width="stretch")
    else:
        st.info("Data-dependent views exist for mode queries (ISM P[exact]); pick a mode query.")
