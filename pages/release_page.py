"""Release: confirm, spend (recorded first), sample once, show the answers with error bars.

The release happens only in the confirm button's ``on_click`` callback (or, for AppTest,
when the ``CONFIRMED`` flag is set, STYLE.md). A rerun or a reload shows the stored
answers: the ledger returns them for the same plan hash without sampling again.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pandas as pd
import streamlit as st

from pages._ui import cached, charts, fmt
from pages._ui import state as S
from pages._ui.preamble import require_dataset
from planner.errors import PlannerError

st.title("Release")

try:
    from planner import release as rel
except ImportError:
    rel = None  # type: ignore[assignment]

data, schema, sj = require_dataset()
ss = st.session_state
eps, delta, rule = float(ss[S.EPSILON]), float(ss[S.DELTA]), str(ss[S.RULE])
try:
    plan = cached.plan(cached.workload_json(ss[S.WORKLOAD], "weighted"), sj, eps, delta, rule, bool(ss[S.RELATIVE]))
except PlannerError as exc:
    st.error(f"Fix the plan first: {exc}")
    st.stop()

led = cached.ledger()


def _status() -> Any | None:
    try:
        return led.status(data.fingerprint)
    except PlannerError:
        return None


def _do_release() -> None:
    """on_click: register the budget (first time), then release through the engine."""
    ss[S.CONFIRM_OPEN] = False
    ss[S.CONFIRMED] = False
    ss[S.RELEASE_ERROR] = None
    st_now = _status()  # a registered dataset keeps its total budget and rule
    try:
        result = rel.release(
            plan, data.schema, cached.backend(data.fingerprint, sj, data), led, data.fingerprint, data.name,
            total_epsilon=st_now.epsilon_total if st_now else eps,
            total_delta=st_now.delta_total if st_now else delta,
            rule=st_now.rule if st_now else rule,
        )
    except PlannerError as exc:
        ss[S.RELEASE_ERROR] = str(exc)
        return
    ss[S.LAST_RESULT] = result
    ss[S.LAST_RELEASE_ID] = _release_id(result)


def _release_id(result: Any) -> Any:
    return getattr(result, "release_id", None)


def _open() -> None:
    ss[S.CONFIRM_OPEN] = True


def _cancel() -> None:
    ss[S.CONFIRM_OPEN] = False


# ------------------------------------------------------------------------- the plan
a = plan.allocation
st.markdown(f"Plan: **{len(plan.predictions)}** released quantities, rule **{a.rule.value}**, "
            f"ε used **{a.used_epsilon:.4g}** of {a.epsilon:g}, δ = {a.delta:g}.")
st.dataframe(pd.DataFrame([{"id": p.id, "mechanism": p.mechanism, "ε": p.epsilon, "δ": p.delta,
                            "RMSE": p.rmse, "95% bound": p.error_bound_95, "unit": p.unit}
                           for p in plan.predictions]), hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.4g") for c in ("ε", "δ", "RMSE", "95% bound")})

status = _status()
if status is None:
    st.info(f"This dataset has no budget in the ledger yet: the first release registers "
            f"total ε = {eps:g}, δ = {delta:g} under {rule}.")
    remaining_after = fmt.eps(eps - a.used_epsilon)
else:
    c1, c2, c3 = st.columns(3)
    c1.metric("Total ε", f"{status.epsilon_total:g}")
    c2.metric("Spent ε", fmt.eps(status.epsilon_spent))
    c3.metric("Remaining ε", fmt.eps(status.epsilon_remaining))
    remaining_after = f"≈ {fmt.eps(status.epsilon_remaining - a.used_epsilon)} (composed under {status.rule.value})"

if rel is None:
    st.warning("The release engine (`planner/release.py`) is not installed in this build yet: "
               "planning works, releasing is disabled.")
    st.stop()

plan_hash = rel.plan_hash(plan, data.schema)
stored = None
for rec in led.releases(data.fingerprint) if status is not None else []:
    if rec.plan_hash == plan_hash:
        stored = rec

if ss[S.CONFIRMED]:  # AppTest drives the dialog through this flag (STYLE.md)
    _do_release()

if ss[S.RELEASE_ERROR]:
    st.error(ss[S.RELEASE_ERROR])

result = ss[S.LAST_RESULT]
if result is not None and getattr(result, "plan_hash", plan_hash) != plan_hash:
    result = None

if result is None and stored is None:
    st.button("Release…", type="primary", key="release_open", on_click=_open)
    if ss[S.CONFIRM_OPEN]:
        # A click inside a dialog reruns the dialog only; st.rerun() then redraws the whole
        # page (closing the dialog), so the answers appear at once.
        @st.dialog("Confirm the release", on_dismiss=_cancel)
        def _confirm() -> None:
            st.markdown(f"This spends **ε = {a.used_epsilon:.4g}, δ = {a.delta:g}** of the dataset's budget "
                        f"({a.rule.value} composition). Remaining afterwards: **{remaining_after}**.")
            st.warning("This cannot be undone: the spend is recorded before any noise is drawn.")
            d1, d2 = st.columns(2)
            if d1.button("Confirm release", type="primary", key="release_confirm"):
                _do_release()
                st.rerun()
            if d2.button("Cancel", key="release_cancel"):
                _cancel()
                st.rerun()

        _confirm()
    st.stop()

# ------------------------------------------------------------------------- the answers
def _answer_rows(answers: dict[str, Any]) -> pd.DataFrame:
    """Released answers (as stored in the ledger) → one row per released number, with its error bar."""
    preds = {p.query_id: p for p in plan.predictions}
    rows = []
    for qid, ans in answers.items():
        p = preds.get(qid)
        base = {"query": qid, "kind": p.kind if p else "", "mechanism": p.mechanism if p else "",
                "rmse": p.rmse if p else None, "error_bound_95": p.error_bound_95 if p else None,
                "unit": p.unit if p else ""}
        if isinstance(ans, dict) and isinstance(ans.get("labels"), list) and isinstance(ans.get("counts"), list):
            rows += [base | {"label": str(lab), "value": v} for lab, v in zip(ans["labels"], ans["counts"], strict=False)]
        else:
            rows.append(base | {"label": "", "value": ans.get("value") if isinstance(ans, dict) else ans})
    return pd.DataFrame(rows)


def _show_answers(table: pd.DataFrame) -> None:
    shown = table.drop(columns=[c for c in ("plan_hash", "schema_hash", "part") if c in table.columns])
    shown = shown.assign(value=shown["value"].map(fmt.value), label=shown["label"].fillna("").astype(str))
    st.dataframe(shown, hide_index=True, width="stretch", height=35 * (len(shown) + 2),
                 column_config={c: st.column_config.NumberColumn(format="%.4g")
                                for c in ("epsilon", "delta", "rmse", "error_bound_95")}
                 | {"error_bound_95": st.column_config.NumberColumn("95% bound", format="%.4g",
                                                                    help="the true value is within ± this, 19 times in 20")})
    st.markdown("**Released values with their 95% error bars** (additive-noise queries; median and mode "
                "errors are in ranks / rows and are listed in the table).")
    st.altair_chart(charts.answers_chart(table), width="stretch")


if result is None:
    st.success(f"This plan was already released (release #{stored.release_id}); showing the stored answers. "
               "Nothing is sampled again.")
    if stored.answers:
        _show_answers(_answer_rows(stored.answers))
    else:
        st.warning(f"Release #{stored.release_id} is recorded as **{stored.status}**: the budget was spent but "
                   "no answers were stored. It is never sampled again, and the spend is never refunded.")
    st.button("Prepare the CSV and JSON downloads", key="release_reload", on_click=_do_release,
              help="Returns the stored answers from the ledger; spends nothing and samples nothing.")
    st.stop()

st.success(f"Released (release #{_release_id(result)}). These answers are stored; a rerun shows them again.")
csv_text = result.to_csv()
_show_answers(pd.read_csv(io.StringIO(csv_text), dtype={"label": str, "part": str}))
for w in result.warnings:
    st.warning(w)
d1, d2 = st.columns(2)
d1.download_button("Download answers (CSV)", csv_text, file_name=f"release-{result.release_id}.csv",
                   mime="text/csv", key="release_csv")
d2.download_button("Download report (JSON)", json.dumps(result.report_json(), indent=2, default=str),
                   file_name=f"release-{result.release_id}.json", mime="application/json", key="release_json")
