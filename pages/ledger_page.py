"""Ledger: every dataset's lifetime budget, what was spent and when, and recorded raises."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from pages._ui import auth, cached, charts, fmt, frame, lifetime
from pages._ui import state as S
from pages._ui.guard import guard
from planner.core.errors import PlannerError

S.init_state()
ss = st.session_state
PAGE = "ledger"

st.title("Ledger")
st.caption("Every release is recorded here before any noise is drawn; nothing is ever refunded or forgotten.")

with guard():
    led = cached.ledger()
    datasets = led.datasets()
if not datasets:
    st.info("No dataset has a lifetime budget yet: set one on the Planner or the Release page." if auth.is_owner()
            else "No dataset has been shared with you yet: an owner shares one with `planner grant`.")
    frame.stop()

labels = {d.fingerprint: f"{d.name} (since {d.created_at:%Y-%m-%d %H:%M})" for d in datasets}
if ss[S.LEDGER_DATASET] not in labels:
    try:  # the active dataset, by the key the ledger knows it by (its content, not its file)
        key = cached.active().ledger_key
        active_fp = led.dataset(key).fingerprint if key is not None else None
    except PlannerError:  # not registered yet, or not readable by this account
        active_fp = None
    ss[S.LEDGER_DATASET] = active_fp if active_fp in labels else datasets[0].fingerprint
fp = st.selectbox("Dataset", list(labels), format_func=labels.__getitem__,
                  **S.bind(S.LEDGER_DATASET, PAGE, options=list(labels)))

status = led.status(fp)
lifetime.metrics(status)
st.caption(f"Composition rule: **{fmt.rule(status.rule)}**, fixed with the lifetime budget (δ = {status.delta_total:g}).")

note = S.pop_notice(PAGE)
if note:
    st.success(note)
if auth.is_owner():
    with st.expander("Raise the lifetime budget (a recorded decision)"):
        lifetime.raise_form(status)
changes = led.budget_changes(fp)
if changes:
    st.markdown("**Recorded raises of the lifetime budget**")
    st.dataframe(pd.DataFrame([{"when": c.created_at.strftime("%Y-%m-%d %H:%M"), "ε from": c.old_epsilon,
                                "ε to": c.new_epsilon, "δ from": c.old_delta, "δ to": c.new_delta,
                                "reason": c.reason} for c in changes]),
                 hide_index=True, width="stretch", height=35 * (len(changes) + 1) + 3)

history = led.history(fp)
if history:
    from planner.outputs.report import ledger_points

    pts = ledger_points(status, history, label=lambda h: f"#{h.release_id} {h.created_at:%m-%d %H:%M}")
    charts.draw(charts.history_chart(pd.DataFrame(pts)))

st.subheader("Releases")
grew = {h.release_id: h.epsilon_release for h in history}  # the spent total's growth, under the rule
for rec in reversed(led.releases(fp)):
    spent = f" · ε {fmt.eps(grew[rec.release_id])} ({fmt.rule(status.rule)})" if rec.release_id in grew else ""
    with st.expander(f"Release #{rec.release_id} · {rec.created_at:%Y-%m-%d %H:%M:%S} · "
                     f"{len({s.query_id.split(':')[0] for s in rec.spends})} queries{spent} · {rec.status.value}",
                     expanded=rec.release_id == ss.get(S.LAST_RELEASE_ID)):
        if rec.answers:
            st.markdown("**Released answers** (noisy by design; what anyone this dataset is shared with may see)")
            st.dataframe(pd.DataFrame(fmt.answer_rows(rec.answers)), hide_index=True, width="stretch",
                         height=min(35 * (len(fmt.answer_rows(rec.answers)) + 1) + 3, 420))
        st.caption(f"Each answer's own cost; the spent total composes all of them under {fmt.rule(status.rule)}."
                   + (f" Released by {rec.actor}." if getattr(rec, "actor", None) else ""))
        spends = pd.DataFrame([{k: v for k, v in s.to_dict().items() if k != "event"}
                               | {"mechanism": str(s.event.to_dict().get("event", ""))} for s in rec.spends])
        st.dataframe(spends.rename(columns={"query_id": "query", "epsilon": "ε", "delta": "δ", "rho": "ρ (zCDP)"}),
                     hide_index=True, width="stretch", height=35 * (len(spends) + 1) + 3,
                     column_config={"ρ (zCDP)": st.column_config.NumberColumn(
                         help="the same cost in zero-concentrated DP, which composes tightly across releases")})

st.download_button("Export ledger JSON", json.dumps(led.export(fp), indent=2, default=str),
                   file_name=f"ledger-{status.name}.json", mime="application/json", key="ledger:export", on_click="ignore")
