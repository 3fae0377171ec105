"""Release: the plan in force, checked against what remains, released once, shown with error bars.

The release happens only in the confirm button's ``on_click`` callback (or, for AppTest,
when the ``CONFIRMED`` flag is set: AppTest loses clicks inside ``st.dialog``). A rerun or a reload shows the stored
answers: the ledger returns them for the same plan hash without sampling again.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pandas as pd
import streamlit as st

from pages._ui import cached, charts, fmt, frame, lifetime, planfiles, planning, synthetic
from pages._ui import state as S
from pages._ui.preamble import require_dataset
from planner import release as rel
from planner.core.errors import PlannerError
from planner.data.backends import check_backend
from planner.planning.statistics import exact_aggregates

st.title("Release")

data, schema, sj = require_dataset()
ss = st.session_state
PAGE = "release"

try:
    view = planning.current_plan(data, sj)
except PlannerError as exc:
    st.error(f"The plan cannot be made yet: {fmt.plain(str(exc))}")
    st.page_link("pages/plan_page.py", label="Fix it on the Planner", icon=":material/calculate:")
    frame.stop()
plan, s = view.plan, view.settings
a = plan.allocation
led = cached.ledger()
plan_hash = rel.plan_hash(plan, schema)

# ------------------------------------------------------------------------- the plan in force
mode_txt = (f"the least ε meeting every target, **ε = {a.used_epsilon:.4g}**" if view.target is not None
            else f"**ε = {a.used_epsilon:.4g}**, " + {"weighted": "split by weight", "equal": "split equally",
                                                    "manual": "split by hand"}.get(s.mode, s.mode))
st.markdown(f"**The plan in force** (set on the Queries and Planner pages): {mode_txt}, δ = {a.delta:g}, "
            f"**{a.rule.value}** rule, {len({p.query_id for p in plan.predictions})} queries on **{fmt.plain(data.name)}**.")
rows_by_id = {r.get("id"): r for r in S.clean_rows(ss[S.WORKLOAD])}
st.dataframe(pd.DataFrame([{
    "query": p.query_id, "kind": p.kind, "mechanism": p.mechanism,
    ("target ±" if view.target is not None else "weight"):
        rows_by_id.get(p.query_id, {}).get("target" if view.target is not None else "weight"),
    "ε share": p.epsilon, "±95% error": p.error_bound_95, "unit": p.unit} for p in plan.predictions]),
    hide_index=True, width="stretch", height=35 * (len(plan.predictions) + 1) + 3,
    column_config={c: st.column_config.NumberColumn(format="%.4g") for c in ("ε share", "±95% error", "weight", "target ±")})


# ------------------------------------------------------------------------- actions
def _do_release() -> None:
    """on_click: release the plan in force through the engine (check → record → sample → store)."""
    ss[S.CONFIRM_OPEN] = False
    ss[S.CONFIRMED] = False
    ss[S.RELEASE_ERROR] = None
    try:
        v = planning.current_plan(data, sj)  # exactly what the page shows (same durable settings)
        engine = cached.backend(data.fingerprint, sj, cached.backend_name(), data)
        # Every exact aggregate first, as `planner release` does: a plan this backend cannot
        # compute is refused here, before the ledger records any spend.
        exact_aggregates(engine, cached.parse_queries(v.wl_json, sj))
        # ... and the same refusal of unreadable cells as `planner release` and the scripts
        check_backend(engine)
        # the content key: the release is recorded on this version of the dataset
        result = rel.release(v.plan, schema, engine, led, data.content or data.ledger_key, data.name)
    except PlannerError as exc:
        ss[S.RELEASE_ERROR] = str(exc)
        return
    ss[S.LAST_RESULT] = (data.fingerprint, result)  # the result names the dataset by its key (ds-…)
    ss[S.LAST_RELEASE_ID] = result.release_id


def _open() -> None:
    ss[S.CONFIRM_OPEN] = True


def _cancel() -> None:
    ss[S.CONFIRM_OPEN] = False


stored = None
if s.lifetime is not None:  # this plan on this content, released before: shown, never drawn again
    stored = led.stored_release(data.ledger_key, plan_hash, digest=data.content)

if ss[S.CONFIRMED]:  # AppTest drives the dialog through this flag (it loses clicks inside st.dialog)
    _do_release()

if ss[S.RELEASE_ERROR]:
    st.error(fmt.plain(ss[S.RELEASE_ERROR]))

last = ss[S.LAST_RESULT]
result = last[1] if last is not None and last[0] == data.fingerprint and last[1].plan_hash == plan_hash else None

# ------------------------------------------------------------------------- before the release
if result is None and stored is None:
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
        try:
            led.preview(data.ledger_key, planning.spends(view, schema))
        except PlannerError as exc:
            st.warning(str(exc), icon=":material/lock:")
        st.button("Release…", type="primary", key="release:open", disabled=True,
                  help="The ledger does not let you release on this dataset.")
        frame.stop()
    composed = lifetime.composed_note(pv, plan.used_epsilon, a.delta)
    lifetime.preview_metrics(pv)
    if composed:
        st.caption(composed)
    if not pv.fits:
        st.error(lifetime.over_budget(pv), icon=":material/block:")
        st.page_link("pages/plan_page.py", label="Lower ε or change the plan on the Planner", icon=":material/calculate:")
        st.button("Release…", type="primary", key="release:open", disabled=True,
                  help="This release does not fit what remains of the lifetime budget.")
        frame.stop()
    st.button("Release…", type="primary", key="release:open", on_click=_open)
    if ss[S.CONFIRM_OPEN]:
        # A click inside a dialog reruns the dialog only; st.rerun() then redraws the whole
        # page (closing the dialog), so the answers appear at once.
        @st.dialog("Confirm the release", on_dismiss=_cancel)
        def _confirm() -> None:
            st.markdown(f"This spends **ε = {fmt.eps(pv.epsilon_release)}** of the lifetime budget of "
                        f"**{fmt.plain(data.name)}** ({pv.rule.value} rule, δ = {a.delta:g}). "
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
def _alphas() -> dict[tuple[str, str], float]:
    """(query, part) → quantile level, from the plan's parts ("quantile@0.5")."""
    out: dict[tuple[str, str], float] = {}
    for p in plan.predictions:
        if p.part.startswith("quantile@"):
            level = float(p.part.split("@", 1)[1])
            out[(p.query_id, p.part)] = level
            out.setdefault((p.query_id, ""), level)
    return out


def _show_answers(table: pd.DataFrame) -> None:
    levels = _alphas()
    table = table.assign(alpha=[levels.get((str(q), str(pt) if pd.notna(pt) else ""))
                                for q, pt in zip(table["query"], table.get("part", [""] * len(table)), strict=True)])
    shown = table.assign(value=table["value"].map(fmt.value), label=table["label"].fillna("").astype(str))
    order = ["query", "kind", "mechanism", "label", "value", "epsilon", "delta", "rmse", "error_bound_95", "unit"]
    shown = shown[[c for c in order if c in shown.columns]]
    st.dataframe(shown, hide_index=True, width="stretch", height=35 * (len(shown) + 1) + 3,
                 column_config={c: st.column_config.NumberColumn(format="%.4g") for c in ("epsilon", "delta", "rmse")}
                 | {"error_bound_95": st.column_config.NumberColumn("±95% error", format="%.4g",
                                                                    help="the true value is within ± this, 19 times in 20"),
                    "rmse": st.column_config.NumberColumn("typical error", format="%.4g")})
    st.markdown("**Released values with their 95% error bars**, one chart per unit so that answers in the same "
                "unit share one scale.")
    for kind, unit, grp in charts.answer_groups(table):
        st.altair_chart(charts.answers_chart(kind, unit, grp), width="stretch")


if result is None:
    st.success(f"This plan was already released (release #{stored.release_id}); showing the stored answers. "
               "Nothing is sampled again and nothing more is spent.")
    if stored.answers:
        st.button("Prepare the CSV and JSON downloads", key="release:reload", on_click=_do_release,
                  help="Returns the stored answers from the ledger; spends nothing and samples nothing.")
        rows: list[dict[str, Any]] = []
        preds = {p.query_id: p for p in plan.predictions}
        for qid, ans in stored.answers.items():
            p = preds.get(qid)
            base = {"query": qid, "kind": p.kind if p else "", "mechanism": p.mechanism if p else "", "part": "",
                    "rmse": p.rmse if p else None, "error_bound_95": p.error_bound_95 if p else None,
                    "unit": p.unit if p else ""}
            vals = ans.get("counts", ans.get("values")) if isinstance(ans, dict) else None
            if isinstance(ans, dict) and isinstance(ans.get("labels"), list) and isinstance(vals, list):
                rows += [base | {"label": str(lab), "value": v} for lab, v in zip(ans["labels"], vals, strict=False)]
            else:
                rows.append(base | {"label": "", "value": ans.get("value") if isinstance(ans, dict) else ans})
        _show_answers(pd.DataFrame(rows))
        synthetic.show(stored.answers, {p.query.id: p.query for p in plan.parts}, schema, sj, data, stored.release_id)
    else:
        st.warning(f"Release #{stored.release_id} is recorded as **{stored.status}**: the budget was spent but "
                   "no answers were stored. It is never sampled again, and the spend is never refunded.")
    frame.stop()

status = planning.lifetime(data.ledger_key)
st.success(f"Released (release #{result.release_id}). These answers are stored; a rerun shows them again. "
           + (f"ε {fmt.eps(max(status.epsilon_remaining, 0.0))} of the lifetime {status.epsilon_total:g} remains."
              if status else ""))
csv_text = result.to_csv()
_show_answers(pd.read_csv(io.StringIO(csv_text), dtype={"label": str, "part": str}))
synthetic.show({a.query_id: a.answer for a in result.answers}, {p.query.id: p.query for p in plan.parts}, schema, sj,
               data, result.release_id)
for w in result.warnings:
    st.warning(w)
st.caption(f"Exact aggregates computed by the **{cached.backend_name()}** backend; the noise was added by OpenDP.")
d1, d2 = st.columns(2)
d1.download_button("Download answers (CSV)", csv_text, file_name=f"release-{result.release_id}.csv",
                   mime="text/csv", key="release:csv", on_click="ignore")
d2.download_button("Download report (JSON)", json.dumps(result.report_json(), indent=2, default=str),
                   file_name=f"release-{result.release_id}.json", mime="application/json", key="release:json",
                   on_click="ignore")
st.markdown("**The released plan as files**: the plan file, a script and a notebook that reproduce it, and a "
            "report of this release for stakeholders.")
planfiles.downloads(data, view, PAGE, release=result)
