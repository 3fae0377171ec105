"""Accuracy: predicted error of one query against ε for every applicable mechanism."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from pages._ui import auth, cached, charts, fmt, frame
from pages._ui import state as S
from pages._ui.guard import guard
from pages._ui.preamble import require_dataset
from planner.planning import bounds_suggest, simulation
from planner.planning.queries import QueryKind

SIM_RUNS = 2000  # planning draws per ε
SIM_SEED = 20261122  # fixed: the check is reproducible
SIM_POINTS = 11  # ε values simulated (every third point of the grid)
#: a synthetic table's run is a whole model fit (0.1 to a few seconds): fewer runs
SIM_RUNS_BY_KIND = {QueryKind.SYNTHETIC_DATA: 20}

st.title("Accuracy against ε")
st.caption("How far off each answer is likely to be, for one query on its own, as the privacy "
           "budget ε grows (smaller ε = stronger privacy = more noise). **RMSE** is the typical "
           "error; the **95% bound** is exceeded only 1 time in 20.")

data, schema, sj = require_dataset()
ss = st.session_state
PAGE = "accuracy"

with guard("Fix the workload on the Queries page first: "):
    wl = cached.workload_json(ss[S.WORKLOAD], ss[S.MODE])
    queries = cached.parse_queries(wl, sj)
if not queries:
    st.info("The workload is empty: add queries on the Queries page.")
    frame.stop()
by_id = {q.id: q for q in queries}
# Nothing below changes the ledger or the workload: the sidebar's budget block is drawn now,
# and the rest of the page is a fragment, so a slider step or a query change reruns only it
# (not the app's frame, the sidebar and this page's preamble).
frame.flush_budget()


@st.fragment
def _views() -> None:
    """The query's accuracy, its clipping bias and the owner's data-dependent checks (reruns on its own)."""
    if ss[S.ACC_QUERY] not in by_id:
        ss[S.ACC_QUERY] = queries[0].id
    c1, c2 = st.columns([1, 2])
    qid = c1.selectbox("Query", list(by_id), **S.bind(S.ACC_QUERY, PAGE, options=list(by_id)),
                       format_func=lambda i: f"{i} ({by_id[i].kind.value}, {by_id[i].mechanism.value})")
    query = by_id[qid]
    # The slider moves along the grid the curves are computed on: a step only redraws (the
    # curves of a query are computed once, cached), it never recomputes them.
    grid = cached.EPS_GRID
    if ss[S.ACC_EPS] not in grid:
        ss[S.ACC_EPS] = min(grid, key=lambda g: abs(g - float(ss[S.ACC_EPS])))
    eps = float(c2.select_slider("ε for this query", options=list(grid), format_func=lambda e: f"{e:.3g}",
                                 **S.bind(S.ACC_EPS, PAGE, options=grid)))
    delta = float(ss[S.DELTA])
    st.caption(f"δ = {delta:g} for the Gaussian mechanisms (set on the Planner page). "
               "Everything on this chart is data-independent: schema, ε, δ and the declared public n.")

    qjson = json.dumps(query.to_dict(), sort_keys=True)
    curves, notes = cached.accuracy_curves(qjson, sj, delta, grid)
    lower = cached.lower_bound_curve(qjson, sj, grid)
    unit = str(curves["unit"].iloc[0]) if not curves.empty else ""
    if curves.empty:
        st.warning("No mechanism of this query has an accuracy prediction.")
    else:
        charts.draw(charts.accuracy_chart(curves, lower, eps, unit))
        at = curves[curves["epsilon"] == eps]
        cols = st.columns(max(len(at), 1))
        for col, (_, r) in zip(cols, at.iterrows(), strict=False):
            col.metric(str(r["mechanism"]), f"{r['RMSE']:.4g}", help=f"typical error (RMSE) at ε = {eps:.3g}, in {unit}")
            col.caption(f"typical error at ε = {eps:.3g}; within ±{r['95% bound']:.4g} {unit} 19 times in 20")
        if lower is not None:
            lb = lower[lower["epsilon"] == eps]["RMSE lower bound (unbiased)"]
            st.metric("Least typical error any unbiased ε-DP mechanism can reach", f"{float(lb.iloc[0]):.4g}",
                      help="No mechanism whose answers are right on average can do better at this ε "
                           "(the lower bound in Garivier, How to learn while respecting individual privacy?, "
                           "ENS de Lyon, 2021).")
            if not at.empty:
                from planner.outputs.words import lower_bound_gap

                st.caption(fmt.plain(lower_bound_gap(float(at["RMSE"].min()), float(lb.iloc[0]))))
    for n in notes:
        st.caption(f"ℹ️ {n}")

    # ------------------------------------------------------------------ clipping bias beside the noise
    clip = bounds_suggest.clipping_view(query, schema)
    if clip is not None:
        st.markdown("**Clipping bias beside the noise** (data-independent)")
        k1, k2 = st.columns(2)
        noise = curves[curves["epsilon"] == eps]["RMSE"] if not curves.empty else None
        k1.metric("Noise: typical error (RMSE)", "—" if noise is None or noise.empty else f"{float(noise.min()):.4g}",
                  help=f"at ε = {eps:.3g}, in {unit}")
        k2.metric("Clipping bias: at most", f"{max(abs(clip.low), abs(clip.high)):.4g}" if clip.bounded else "unbounded",
                  help="How far clipping into the declared bounds can move the answer, whatever ε.")
        st.caption(fmt.plain(clip.words))

    # ------------------------------------------------------------------ data-dependent (owner only)
    st.divider()
    st.subheader("Check against your data (owner only)")
    if not auth.is_owner():
        st.caption("🔒 These views read the raw rows; they are shown to owners only.")
        frame.stop()
    st.toggle("Show data-dependent views (computed from your raw data)", **S.bind(S.ACC_DATA_VIEW, PAGE),
              help="Off by default. These views read the private rows: they are not private and are never exported.")
    if not ss[S.ACC_DATA_VIEW]:
        st.caption("Off: everything above is computed from public facts only.")
        frame.stop()

    st.error("⚠️ **Computed from your raw data — not private, do not share.** "
             "These views are never exported with a release.")

    if clip is not None and clip.column in data.df.columns:
        on_rows = bounds_suggest.clipping_on_data(bounds_suggest.column_values(data.df[clip.column]),
                                                  clip.bias.lower, clip.bias.upper)
        st.markdown("**Clipping on your data**")
        st.caption(fmt.plain(on_rows.words(clip.column)))

    # --- Monte Carlo check of the prediction for the query's own mechanism
    runs = SIM_RUNS_BY_KIND.get(query.kind, SIM_RUNS)
    st.markdown(f"**Check by simulation** — runs the **{query.mechanism.value}** mechanism of `{query.id}` "
                f"{runs:,} times at each of {SIM_POINTS} values of ε on the exact answer of your data "
                "(numpy planning draws, seeded; no value is released and no budget is spent), and plots "
                "the measured error beside the prediction.")
    sim_key = (data.fingerprint, sj, qjson, delta)
    if st.button("Check by simulation", key="acc_simulate"):
        with guard(stop=False) as g:
            agg = cached.exact_aggregate(data.fingerprint, sj, qjson, data.df)
            bar = st.progress(0.0, text="Simulating…")
            sim_eps = cached.EPS_GRID[::3]
            res = simulation.simulate_query(
                query, schema, agg, sim_eps, delta, runs, np.random.default_rng(SIM_SEED),
                progress=lambda done, total: bar.progress(done / total, text=f"Simulating… ε {done}/{total}"),
            )
            bar.empty()
        if g.ok:
            ss[S.ACC_SIM] = {"key": sim_key, "rows": [
                {"mechanism": r.mechanism, "epsilon": r.epsilon, "empirical RMSE": r.empirical_rmse,
                 "low": max(r.empirical_rmse - 2 * r.standard_error, 0.0), "high": r.empirical_rmse + 2 * r.standard_error,
                 "predicted RMSE": r.predicted_rmse, "runs": r.runs} for r in res]}
    sim_state = ss.get(S.ACC_SIM)
    if sim_state and sim_state["key"] == sim_key:
        sim_df = pd.DataFrame(sim_state["rows"])
        pred = curves[curves["mechanism"].isin(set(sim_df["mechanism"]))]
        charts.draw(charts.simulation_chart(pred, sim_df, float(eps), unit))
        zeros = int((sim_df["empirical RMSE"] <= 0).sum())
        if zeros:
            st.caption(f"At {zeros} of the {len(sim_df)} simulated ε the measured error was exactly 0 in every run "
                       "(the mechanism always returned the exact answer); a log axis cannot draw those points.")
        st.caption("Line: the planner's prediction (data-independent). Points: the error measured on your data, "
                   "with ±2 standard errors. Mode errors are a gap in rows, predicted as an upper bound; "
                   "median errors are ranks from the exact answer.")
        with st.expander("Simulation table"):
            st.dataframe(sim_df, hide_index=True, width="stretch",
                         column_config={c: st.column_config.NumberColumn(format="%.4g")
                                        for c in ("epsilon", "empirical RMSE", "low", "high", "predicted RMSE")})

    # --- views that only exist for some kinds
    if query.kind is QueryKind.MODE and query.column:
        with guard(stop=False) as g:
            dfp = cached.mode_exactness(data.fingerprint, sj, query.column, grid, data.df)
        if g.ok:
            st.markdown("**Chance that the released mode is the true mode**: the inverse sensitivity mechanism "
                        "at ε against the best any unbiased mechanism can do at a fraction of ε (Garivier, "
                        "*How to learn while respecting individual privacy?*, ENS de Lyon, 2021).")
            charts.draw(charts.probability_chart(dfp, float(eps)))
    elif query.kind in (QueryKind.MEDIAN, QueryKind.QUANTILE) and query.column:
        alphas = list(query.alphas or (0.5,)) if query.kind is QueryKind.QUANTILE else [0.5]
        if ss[S.ACC_ALPHA] not in alphas:
            ss[S.ACC_ALPHA] = alphas[0]
        alpha = float(alphas[0]) if len(alphas) == 1 else float(
            st.selectbox("Quantile level", alphas, **S.bind(S.ACC_ALPHA, PAGE, options=alphas)))
        with guard(stop=False) as g:
            qc = cached.quantile_check(data.fingerprint, sj, qjson, alpha, cached.EPS_GRID[::3], 500, SIM_SEED, data.df)
        if g.ok:
            st.markdown(f"**Error of the {alpha:g}-quantile in {query.column} units on your data**: the least RMSE "
                        "any unbiased ε-DP mechanism can reach on this instance, against the exponential mechanism "
                        "(what the release uses) and the inverse sensitivity mechanism, both simulated (500 runs per ε).")
            charts.draw(charts.quantile_check_chart(qc, float(eps), str(query.column)))
    else:
        st.caption("Mode, median and quantile queries also get an instance-specific view here (ISM, lower bounds).")


_views()
