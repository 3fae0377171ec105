"""Planner: split a total budget across the workload under a composition rule."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._ui import cached, charts
from pages._ui import state as S
from pages._ui.preamble import require_dataset
from planner.errors import PlannerError

st.title("Planner")
st.caption("Split one total privacy budget across the whole workload. Everything on this page is "
           "data-independent: it reads the schema, ε and δ, never the rows.")

data, schema, sj = require_dataset()
ss = st.session_state
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
    """One row per released quantity; δ and ρ columns only when some query uses Gaussian noise."""
    df = pd.DataFrame([
        {"id": p.id, "kind": p.kind, "mechanism": p.mechanism, "share ε": p.epsilon, "δ": p.delta, "ρ": p.rho,
         "noise": ", ".join(f"{k.replace('_', ' ')} {v:.4g}" for k, v in p.noise.items()),
         "RMSE": p.rmse, "95% bound": p.error_bound_95, "unit": p.unit}
        for p in preds
    ])
    if not (df["δ"] > 0).any():
        df = df.drop(columns=["δ", "ρ"])
    return df


METHODS = {"closed form": "exact optimum (closed form)", "dual": "optimum found numerically (Lagrange dual)",
           "equal split": "equal split (optimal here)"}

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
        m2.metric("Total weighted error", f"{a.objective:.4g}",
                  help="Σ weight × (RMSE ÷ public scale)²: one number to compare splits and rules; smaller is better.")
        m3.metric("How the split was found", a.method,
                  help=METHODS.get(a.method, "the planner's optimiser; never worse than an equal split"))
        for w in a.warnings:
            st.warning(w)
        table = prediction_table(p.predictions)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()

st.subheader("Allocation")
st.caption("Each query's share of the total ε and the error it is predicted to have. RMSE is the typical "
           "error; the 95% bound is exceeded 1 time in 20; both in the unit shown.")
st.altair_chart(charts.allocation_chart(table, "share ε"), width="stretch")
st.dataframe(table, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.4g")
                            for c in ("share ε", "δ", "ρ", "RMSE", "95% bound")}
             | {"ρ": st.column_config.NumberColumn("ρ", format="%.4g", help="the Gaussian share in zero-concentrated DP"),
                "noise": st.column_config.TextColumn("noise", width="medium", help="scale of the noise added (Laplace b, Gaussian σ) "
                                                     "or the selection mechanism's ε and candidates")})

st.subheader("Which accountant buys the most accuracy?")
st.caption("A composition rule (accountant) adds up the privacy cost of many answers. Tighter rules "
           "(RDP, zCDP) prove the same total ε for less noise, so the same budget buys smaller errors.")
if ss[S.MODE] == "weighted":
    st.toggle("Compare every rule side by side (optimises the split once per rule; cached)",
              key=S.SHOW_COMPARE)
    if ss[S.SHOW_COMPARE]:
        with st.spinner("Optimising the split under every rule…"):
            cmp = cached.compare(wl, sj, eps, delta, bool(ss[S.RELATIVE]))
        st.dataframe(cmp, hide_index=True, width="stretch",
                     column_config={"total weighted error": st.column_config.NumberColumn(
                         format="%.4g", help="Σ weight × (error / scale)²: smaller is better"),
                         "ε used": st.column_config.NumberColumn(format="%.6g")})
        st.toggle("Plot each rule's error across total ε",
                  key=S.SHOW_CURVE)
        if ss[S.SHOW_CURVE]:
            try:
                with st.spinner("Optimising the split at 12 budgets under every rule…"):
                    curve = cached.compare_curve(wl, sj, cached.curve_epsilons(eps), delta, bool(ss[S.RELATIVE]))
            except PlannerError as exc:
                st.error(str(exc))
            else:
                st.altair_chart(charts.rules_chart(curve, eps), width="stretch")
                st.caption("Rules that buy the same accuracy draw their lines on top of one another "
                           "(for pure-DP workloads basic, advanced and RDP often coincide); the table "
                           "above gives each rule's value at your ε.")
else:
    st.caption("The comparison of rules is shown in weighted mode.")
