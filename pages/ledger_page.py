"""Ledger: every registered dataset's budget, spend over time and releases."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from pages._ui import cached, charts
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
c2.metric("Spent ε", f"{status.epsilon_spent:.4g}")
c3.metric("Remaining ε", f"{status.epsilon_remaining:.4g}")
c4.metric("Releases", status.releases)
st.caption(f"Composition rule: **{status.rule.value}**")

history = led.history(fp)
if history:
    info = led.dataset(fp)
    pts = [{"time": info.created_at, "series": "spent", "epsilon": 0.0}]
    pts += [{"time": h.created_at, "series": "spent", "epsilon": h.epsilon_spent} for h in history]
    pts += [{"time": t, "series": "total", "epsilon": status.epsilon_total}
            for t in (info.created_at, history[-1].created_at)]
    st.altair_chart(charts.history_chart(pd.DataFrame(pts)), width="stretch")

st.subheader("Releases")
for rec in led.releases(fp):
    with st.expander(f"Release #{rec.release_id} · {rec.created_at:%Y-%m-%d %H:%M:%S} · {rec.status.value}",
                     expanded=rec.release_id == ss.get(S.LAST_RELEASE_ID)):
        st.caption(f"plan hash `{rec.plan_hash[:16]}…`")
        st.dataframe(pd.DataFrame([{k: v for k, v in s.to_dict().items() if k != "event"} | {"mechanism": str(s.event.to_dict().get("event", ""))} for s in rec.spends]),
                     hide_index=True, width="stretch")

st.download_button("Export ledger JSON", json.dumps(led.export(fp), indent=2, default=str),
                   file_name=f"ledger-{fp[:12]}.json", mime="application/json", key="ledger_export")
