"""A release's answers on screen: one function, :func:`show`, for a fresh release and a
stored one alike (both are a :class:`planner.release.ReleaseResult`).

Per query a card: the headline value with its error bar and the verdict (the engine's
:func:`planner.outputs.results.answer_views`), the chart first; the full table of released
numbers behind an expander; the downloads last.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from planner.outputs import results as R
from planner.planning.advice import Grade

from . import charts, fmt

if TYPE_CHECKING:
    from planner.data.schema import Schema
    from planner.planning.workload import Plan
    from planner.release import ReleaseResult

#: The colour of each grade's badge.
BADGE = {Grade.USABLE: "green", Grade.ROUGH: "orange", Grade.NOISE: "red", Grade.UNJUDGED: "gray"}


def table(result: ReleaseResult) -> pd.DataFrame:
    """One row per released number, as the release CSV has them."""
    return pd.DataFrame(result.rows())


def badge(grade: Grade) -> str:
    """A verdict's grade as a coloured badge (Streamlit markdown)."""
    return f":{BADGE[grade]}-badge[{grade.value}]"


def verdict_block(v: R.Verdict, where: object = None) -> None:
    """A verdict in words: the grade, what the answer supports, the fix, how it was derived."""
    box = where if where is not None else st
    box.markdown(f"{badge(v.grade)} {fmt.plain(v.supports)}")  # type: ignore[attr-defined]
    if v.fix:
        box.caption(fmt.plain(v.fix))  # type: ignore[attr-defined]
    for n in v.notes:
        box.caption(fmt.plain(n))  # type: ignore[attr-defined]


def _card(view: R.AnswerView, page: str) -> None:
    with st.container(border=True):
        head, grade = st.columns([5, 1])
        head.markdown(f"**{fmt.plain(view.title)}** · `{fmt.plain(view.query_id)}`")
        grade.markdown(badge(view.verdict.grade))
        st.markdown(f"### {fmt.plain(view.headline)}")
        df = pd.DataFrame([{"label": n.label or view.query_id, "value": n.value, "low": n.low, "high": n.high}
                           for n in view.numbers])
        if view.chart == "value" and not df.empty and df["low"].notna().any():
            charts.draw(charts.answer_value_chart(df, view.unit))
        elif view.chart == "quantile" and view.bounds is not None and not df.empty:
            charts.draw(charts.answer_quantile_chart(df.dropna(subset=["value"]), *view.bounds,
                                                     view.unit.replace(" units", "")))
        elif view.chart == "sample" and view.bounds is not None:
            left, right = st.columns(2)
            left.caption("Bin counts (noisy, negatives shown as 0 — the sample is drawn from these)")
            charts.draw(charts.answer_value_chart(df, "rows"), left)
            if view.sample:
                right.caption(f"{len(view.sample):,} synthetic values drawn from them (free: post-processing)")
                charts.draw(charts.sample_chart(pd.DataFrame({"value": view.sample}), *view.bounds,
                                                view.title.split(" of ", 1)[-1], max(len(view.numbers), 1)), right)
                count = right.number_input("How many values to download", min_value=1, max_value=len(view.sample),
                                           value=len(view.sample), step=1, key=f"{page}:sample_n:{view.query_id}",
                                           help="Any number up to the values drawn at the release: they are "
                                                "independent draws, so the first ones are a sample of that size.")
                right.download_button("Download the synthetic values (CSV)",
                                      lambda: R.sample_csv(view, int(count)),
                                      file_name=f"{view.query_id}-values.csv", mime="text/csv",
                                      key=f"{page}:sample:{view.query_id}", on_click="ignore")
        verdict_block(view.verdict)


def show(result: ReleaseResult, plan: Plan, schema: Schema, page: str) -> None:
    """The answers of ``result``: a card per query (headline, chart, verdict), the table of
    every released number behind an expander, the warnings and the downloads."""
    for view in R.answer_views(result, plan, schema):
        _card(view, page)
    for w in result.warnings:
        st.warning(w)
    rows = table(result)
    with st.expander(f"Every released number ({len(rows)}), with its cost and predicted error"):
        shown = rows.assign(value=rows["value"].map(fmt.value), label=rows["label"].fillna("").astype(str))
        order = ["query", "kind", "mechanism", "part", "label", "value", "epsilon", "delta", "rmse",
                 "error_bound_95", "unit"]
        st.dataframe(shown[order], hide_index=True, width="stretch", height=35 * (len(shown) + 1) + 3,
                     column_config={c: st.column_config.NumberColumn(format="%.4g") for c in ("epsilon", "delta", "rmse")}
                     | {"error_bound_95": st.column_config.NumberColumn(
                         "±95% error", format="%.4g", help="the true value is within ± this, 19 times in 20"),
                        "rmse": st.column_config.NumberColumn("typical error", format="%.4g")})
    d1, d2 = st.columns(2)
    d1.download_button("Download answers (CSV)", result.to_csv, file_name=f"release-{result.release_id}.csv",
                       mime="text/csv", key=f"{page}:csv", on_click="ignore")
    d2.download_button("Download report (JSON)", lambda: json.dumps(result.report_json(), indent=2, default=str),
                       file_name=f"release-{result.release_id}.json", mime="application/json", key=f"{page}:json",
                       on_click="ignore")


def verdict_table(plan: Plan, schema: Schema) -> None:
    """Before the release: every answer's verdict (data-independent), the same words the
    result will carry: a line per answer, the weak ones first."""
    from planner.planning.advice import verdicts

    vs = verdicts(plan, schema)
    order = {Grade.NOISE: 0, Grade.ROUGH: 1, Grade.UNJUDGED: 2, Grade.USABLE: 3}
    for qid, v in sorted(vs.items(), key=lambda kv: order[kv[1].grade]):
        st.markdown(f"{badge(v.grade)} **{fmt.plain(qid)}** ({fmt.plain(v.error)}): {fmt.plain(v.supports)}"
                    + (f"  \n{fmt.plain(v.fix)}" if v.fix else ""))
    counts = {g: sum(v.grade is g for v in vs.values()) for g in Grade}
    st.caption(" · ".join(f"{n} {g.value}" for g, n in counts.items() if n) + " — judged from public facts only "
               "(the declared bounds, categories and row count, and this plan's noise), never from the data.")


def epsilon_context(epsilon: float | None, rule: str) -> None:
    """ε in context where ε is chosen: what it means for one person, what deployed systems used,
    why the spent total differs from the ε typed (the engine's words, as in the HTML report and
    the command line's output)."""
    from planner.outputs import words

    with st.expander("What does this ε mean for one person, and what have others used?"):
        if epsilon is not None:
            st.markdown(fmt.plain(words.epsilon_meaning(epsilon)))
        st.markdown("**What others used.**\n" + "\n".join(f"- {fmt.plain(d)}" for d in words.DEPLOYED))
        st.markdown("**Why the spent total differs from the ε typed.** " + fmt.plain(words.composition_note(rule)))
