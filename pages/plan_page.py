"""Planner: split a total budget across the workload under a composition rule."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._ui import cached, charts
from pages._ui import state as S
from planner.errors import PlannerError

S.init_state()
ss = st.session_state

st.title("Planner")

try:
    data = cached.active()
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
cached.sync_workload(data)
if data.schema is None:
    st.info("Declare a schema on the Data page first.")
    st.stop()
sj = data.schema_json or ""
wl = cached.workload_json(ss[S.WORKLOAD], ss[S.MODE])

c1, c2, c3, c4 = st.columns(4)
c1.number_input("Total ε", min_value=0.001, max_value=100.0, step=0.1, format="%.3f", key=S.EPSILON)
c2.number_input("Total δ", min_value=0.0, max_value=0.1, step=1e-7, format="%.1e", key=S.DELTA)
c3.selectbox("Composition rule", S.RULES, key=S.RULE,
             help="basic: Σε · advanced: Kairouz–Oh–Viswanath · rdp: Rényi DP · zcdp: zero-concentrated DP")
c4.radio("Mode", ["weighted", "target"], key=S.MODE, horizontal=True,
         help="weighted: spend the total, minimising Σ weight·error² · target: least ε meeting every target")
st.toggle("Weigh errors relative to a public scale (declared bounds × public n)", key=S.RELATIVE)
eps, delta, rule = float(ss[S.EPSILON]), float(ss[S.DELTA]), str(ss[S.RULE])


def prediction_table(preds) -> pd.DataFrame:
    return pd.DataFrame([
        {"id": p.id, "query": p.query_id, "kind": p.kind, "mechanism": p.mechanism,
         "share ε": p.epsilon, "δ": p.delta, "ρ": p.rho,
         "noise scale": ", ".join(f"{k} {v:.4g}" for k, v in p.noise.items()),
         "RMSE": p.rmse, "95% bound": p.error_bound_95, "unit": p.unit}
        for p in preds
    ])


try:
    if ss[S.MODE] == "target":
        res = cached.targets(wl, sj, delta, rule)
        m1, m2 = st.columns(2)
        m1.metric("Least total ε meeting every target", f"{res.total_epsilon:.4g}")
        m2.metric("Binding query", res.binding)
        table = prediction_table(res.predictions)
        st.info("Set total ε to this value in weighted mode to release this plan.")
    else:
        p = cached.plan(wl, sj, eps, delta, rule, bool(ss[S.RELATIVE]))
        a = p.allocation
        m1, m2, m3 = st.columns(3)
        m1.metric("ε used under " + a.rule.value, f"{a.used_epsilon:.6g}", help=f"of total ε = {a.epsilon:g}")
        m2.metric("Total weighted error", f"{a.objective:.4g}")
        m3.metric("Method", a.method)
        for w in a.warnings:
            st.warning(w)
        table = prediction_table(p.predictions)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()

st.subheader("Allocation")
st.altair_chart(charts.allocation_chart(table, "share ε"), width="stretch")
st.dataframe(table, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.4g")
                            for c in ("share ε", "δ", "ρ", "RMSE", "95% bound")})

st.subheader("Which accountant buys the most accuracy?")
if ss[S.MODE] == "weighted":
    try:
        cmp = cached.compare(wl, sj, eps, delta, bool(ss[S.RELATIVE]))
        st.dataframe(cmp, hide_index=True, width="stretch")
        st.toggle("Plot each rule's error across total ε (12 plans per rule; cached, slow the first time)",
                  key=S.SHOW_CURVE)
        if ss[S.SHOW_CURVE]:
            with st.spinner("Optimising the split at 12 budgets under every rule…"):
                curve = cached.compare_curve(wl, sj, cached.curve_epsilons(eps), delta, bool(ss[S.RELATIVE]))
            st.altair_chart(charts.rules_chart(curve, eps), width="stretch")
    except PlannerError as exc:
        st.error(str(exc))
else:
    st.caption("The comparison of rules is shown in weighted mode.")
