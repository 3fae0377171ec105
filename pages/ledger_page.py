"""Ledger: every registered dataset's budget, spend over time and releases."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from pages._ui import cached, charts, fmt
from pages._ui import state as S
from planner.errors import PlannerError

S.init_state()
ss = st.session_state

st.title("Ledger")

try:
    led = cached.ledger()
    datasets = led.datasets()
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
if not datasets:
    st.info("No dataset has been registered yet: the first release registers its budget.")
    st.stop()

labels = {d.fingerprint: f"{d.name} · {d.fingerprint[:12]}" for d in datasets}
if ss[S.LEDGER_DATASET] not in labels:
    active_fp = ss.get(S.ACTIVE_FP)
    ss[S.LEDGER_DATASET] = active_fp if active_fp in labels else datasets[0].fingerprint
fp = st.selectbox("Dataset", list(labels), format_func=labels.__getitem__, key=S.LEDGER_DATASET)

status = led.status(fp)
c1, c2, c3, c4 = st.columns(4)
c1.metric("Total ε", f"{status.epsilon_total:g}", help=f"δ = {status.delta_total:g}")
c2.metric("Spent ε", fmt.eps(status.epsilon_spent))
c3.metric("Remaining ε", fmt.eps(status.epsilon_remaining))
c4.metric("Releases", status.releases)
st.caption(f"Composition rule: **{status.rule.value}** · every spend is recorded before any noise is drawn; "
           "the budget is never refunded.")

history = led.history(fp)
if history:
    pts = [{"step": "registered", "order": 0, "series": "spent", "epsilon": 0.0}]
    pts += [{"step": f"#{i} {h.created_at:%m-%d %H:%M}", "order": i, "series": "spent", "epsilon": h.epsilon_spent}
            for i, h in enumerate(history, start=1)]
    pts += [dict(p, series="total", epsilon=status.epsilon_total) for p in list(pts)]
    st.altair_chart(charts.history_chart(pd.DataFrame(pts)), width="stretch")

st.subheader("Releases")
for rec in led.releases(fp):
    with st.expander(f"Release #{rec.release_id} · {rec.created_at:%Y-%m-%d %H:%M:%S} · {rec.status.value}",
                     expanded=rec.release_id == ss.get(S.LAST_RELEASE_ID)):
        st.caption(f"plan hash `{rec.plan_hash[:16]}…`")
        spends = pd.DataFrame([{k: v for k, v in s.to_dict().items() if k != "event"}
                               | {"mechanism": str(s.event.to_dict().get("event", ""))} for s in rec.spends])
        st.dataframe(spends.rename(columns={"query_id": "query", "epsilon": "ε", "delta": "δ", "rho": "ρ (zCDP)"}),
                     hide_index=True, width="stretch",
                     column_config={"ρ (zCDP)": st.column_config.NumberColumn(
                         help="the same cost in zero-concentrated DP, which composes tightly across releases")})

st.download_button("Export ledger JSON", json.dumps(led.export(fp), indent=2, default=str),
                   file_name=f"ledger-{fp[:12]}.json", mime="application/json", key="ledger_export")
