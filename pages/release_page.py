"""Release: the plan in force, checked against what remains, released once, shown with error bars.

The release happens only in the confirm button's ``on_click`` callback (or, for AppTest,
when the ``CONFIRMED`` flag is set: AppTest loses clicks inside ``st.dialog``). A rerun or a reload shows the stored
answers: the ledger returns them for the same plan hash without sampling again.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages._ui import cached, fmt, frame, lifetime, planfiles, planning, results, synthetic
from pages._ui import state as S
from pages._ui.guard import guard
from pages._ui.preamble import require_dataset
from planner import release as rel
from planner.privacy.budget import SplitMode

st.title("Release")

data, schema, sj = require_dataset()
ss = st.session_state
PAGE = "release"

with guard("The plan cannot be made yet: ", stop=False) as made:
    view = planning.current_plan(data, sj)
if not made.ok:
    st.page_link("pages/plan_page.py", label="Fix it on the Planner", icon=":material/calculate:")
    frame.stop()
plan, s = view.plan, view.settings
a = plan.allocation
led = cached.ledger()
plan_hash = rel.plan_hash(plan, schema)

# ------------------------------------------------------------------------- the plan in force
SPLIT_WORDS = {SplitMode.WEIGHTED: "split by weight", SplitMode.EQUAL: "split equally",
               SplitMode.MANUAL: "split by hand", SplitMode.TARGET: "the least ε meeting every target"}
mode_txt = (f"the least ε meeting every target, **ε = {a.used_epsilon:.4g}**" if view.target is not None
            else f"**ε = {a.used_epsilon:.4g}**, " + SPLIT_WORDS[s.mode])
st.markdown(f"**The plan in force** (set on the Queries and Planner pages): {mode_txt}, δ = {a.delta:g}, "
            f"**{fmt.rule(a.rule)}**, {len({p.query_id for p in plan.predictions})} queries on **{fmt.plain(data.name)}**.")
rows_by_id = {r.get("id"): r for r in S.clean_rows(ss[S.WORKLOAD])}
st.dataframe(pd.DataFrame([{
    "query": p.query_id, "kind": p.kind, "mechanism": p.mechanism,
    ("target ±" if view.target is not None else "weight"):
        rows_by_id.get(p.query_id, {}).get("target" if view.target is not None else "weight"),
    "ε share": p.epsilon, "±95% error": p.error_bound_95, "unit": p.unit} for p in plan.predictions]),
    hide_index=True, width="stretch", height=35 * (len(plan.predictions) + 1) + 3,
    column_config={c: st.column_config.NumberColumn(format="%.4g") for c in ("ε share", "±95% error", "weight", "target ±")})
with st.expander("What each answer can support (judged before the release, from public facts only)",
                 expanded=True):
    results.verdict_table(plan, schema)


# ------------------------------------------------------------------------- actions
def _do_release() -> None:
    """on_click: release the plan in force through the engine's one release path
    (checks → spend recorded → sample → store: ``planner.release.release``)."""
    ss[S.CONFIRM_OPEN] = False
    ss[S.CONFIRMED] = False
    ss[S.RELEASE_ERROR] = None
    with guard(stop=False, show="none", on_error=lambda msg: ss.__setitem__(S.RELEASE_ERROR, msg)):
        v = planning.current_plan(data, sj)  # exactly what the page shows (same durable settings)
        engine = cached.backend(data.fingerprint, sj, cached.backend_name(), data)
        # recorded on this content version of the dataset
        result = rel.release(v.plan, schema, engine, led, data.content or data.ledger_key, data.name)
        ss[S.LAST_RESULT] = (data.fingerprint, result)  # the result names the dataset by its key (ds-…)
        ss[S.LAST_RELEASE_ID] = result.release_id


def _open() -> None:
    ss[S.CONFIRM_OPEN] = True


def _cancel() -> None:
    ss[S.CONFIRM_OPEN] = False


if ss[S.CONFIRMED]:  # AppTest drives the dialog through this flag (it loses clicks inside st.dialog)
    _do_release()
if ss[S.RELEASE_ERROR]:
    st.error(fmt.plain(ss[S.RELEASE_ERROR]))

last = ss[S.LAST_RESULT]
result = last[1] if last is not None and last[0] == data.fingerprint and last[1].plan_hash == plan_hash else None
fresh = result is not None
if result is None and s.lifetime is not None:  # released before on this content: shown, never drawn again
    result = rel.stored(plan, schema, led, data.ledger_key, digest=data.content,
                        prepared=cached.prepared(plan_hash, plan, schema))

# ------------------------------------------------------------------------- before the release
if result is None:
    st.subheader("Lifetime budget")
    note = S.pop_notice(PAGE)
    if note:
        st.success(note)
    if s.lifetime is None:
        st.info("This dataset has no lifetime budget yet, so nothing can be released. Set it first: it is the total "
                "all releases of this dataset may ever spend.", icon=":material/info:")
        lifetime.set_form(data, PAGE)
        st.button("Release…", type="primary", key="release:open", disabled=True,
                  help="Set the lifetime budget first.")
        frame.stop()
    pv = planning.preview(data, view, schema)
    if pv is None:  # the budget is visible but this principal may not spend it (the engine's word)
        with guard(stop=False, show="warning"):
            led.preview(data.ledger_key, planning.spends(view, schema))
        st.button("Release…", type="primary", key="release:open", disabled=True,
                  help="The ledger does not let you release on this dataset.")
        frame.stop()
    composed = lifetime.composed_note(pv, plan.used_epsilon, a.delta)
    lifetime.preview_metrics(pv)
    lifetime.preview_bar(pv)
    if composed:
        st.caption(composed)
    if not pv.fits:
        st.error(lifetime.over_budget(pv), icon=":material/block:")
        st.page_link("pages/plan_page.py", label="Lower ε or change the plan on the Planner", icon=":material/calculate:")
        st.button("Release…", type="primary", key="release:open", disabled=True,
                  help="This release does not fit what remains of the lifetime budget.")
        frame.stop()
    # the engine opens the file while the owner reads the confirmation (nothing is computed from it)
    cached.open_backend_soon(data.fingerprint, sj, cached.backend_name(), data)
    st.button("Release…", type="primary", key="release:open", on_click=_open)
    if ss[S.CONFIRM_OPEN]:
        # A click inside a dialog reruns the dialog only; st.rerun() then redraws the whole
        # page (closing the dialog), so the answers appear at once.
        @st.dialog("Confirm the release", on_dismiss=_cancel)
        def _confirm() -> None:
            st.markdown(f"This spends **ε = {fmt.eps(pv.epsilon_release)}** of the lifetime budget of "
                        f"**{fmt.plain(data.name)}** ({fmt.rule(pv.rule)}, δ = {a.delta:g}). "
                        f"Remaining afterwards: **ε = {fmt.eps(max(pv.epsilon_remaining_after, 0.0))}** "
                        f"of {pv.epsilon_total:g}." + (f" {composed}" if composed else ""))
            st.warning("This cannot be undone: the spend is recorded before any noise is drawn.")
            d1, d2 = st.columns(2)
            if d1.button("Confirm release", type="primary", key="release:confirm"):
                _do_release()
                st.rerun()
            if d2.button("Cancel", key="release:cancel"):
                _cancel()
                st.rerun()

        _confirm()
    frame.stop()


# ------------------------------------------------------------------------- the answers
if fresh:
    status = planning.lifetime(data.ledger_key)
    st.success(f"Released (release #{result.release_id}). These answers are stored; a rerun shows them again. "
               + (f"ε {fmt.eps(max(status.epsilon_remaining, 0.0))} of the lifetime {status.epsilon_total:g} remains."
                  if status else ""))
elif result.status in ("done", "reused"):
    st.success(f"This plan was already released (release #{result.release_id}); showing the stored answers. "
               "Nothing is sampled again and nothing more is spent.")
else:
    st.warning(f"Release #{result.release_id} is recorded as **{result.status}**: the budget was spent but "
               "no answers were stored. It is never sampled again, and the spend is never refunded.")
    frame.stop()
results.show(result, plan, schema, PAGE)
synthetic.show({a.query_id: a.answer for a in result.answers}, {p.query.id: p.query for p in plan.parts}, schema, sj,
               data, result.release_id)
st.caption(f"Exact aggregates computed by the **{cached.backend_name()}** backend; the noise was added by OpenDP.")
st.markdown("**The released plan as files**: the plan file, a script and a notebook that reproduce it, and a "
            "report of this release for stakeholders.")
planfiles.downloads(data, view, PAGE, release=result)
