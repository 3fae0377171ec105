"""A release's answers on screen: one function, :func:`show`, for a fresh release and a
stored one alike (both are a :class:`planner.release.ReleaseResult`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from . import charts, fmt

if TYPE_CHECKING:
    from planner.data.schema import Schema
    from planner.planning.workload import Plan
    from planner.release import ReleaseResult


def table(result: ReleaseResult) -> pd.DataFrame:
    """One row per released number, as the release CSV has them."""
    return pd.DataFrame(result.rows())


def show(result: ReleaseResult, plan: Plan, schema: Schema, page: str) -> None:
    """The answers of ``result``: the table, one chart per unit, the warnings and the downloads."""
    rows = table(result)
    levels = [float(p.split("@", 1)[1]) if str(p).startswith("quantile@") else None for p in rows["part"]]
    rows = rows.assign(alpha=levels)
    shown = rows.assign(value=rows["value"].map(fmt.value), label=rows["label"].fillna("").astype(str))
    order = ["query", "kind", "mechanism", "part", "label", "value", "epsilon", "delta", "rmse", "error_bound_95",
             "unit"]
    st.dataframe(shown[order], hide_index=True, width="stretch", height=35 * (len(shown) + 1) + 3,
                 column_config={c: st.column_config.NumberColumn(format="%.4g") for c in ("epsilon", "delta", "rmse")}
                 | {"error_bound_95": st.column_config.NumberColumn("±95% error", format="%.4g",
                                                                    help="the true value is within ± this, 19 times in 20"),
                    "rmse": st.column_config.NumberColumn("typical error", format="%.4g")})
    st.markdown("**Released values with their 95% error bars**, one chart per unit so that answers in the same "
                "unit share one scale.")
    for kind, unit, grp in charts.answer_groups(rows):
        st.altair_chart(charts.answers_chart(kind, unit, grp), width="stretch")
    for w in result.warnings:
        st.warning(w)
    d1, d2 = st.columns(2)
    d1.download_button("Download answers (CSV)", result.to_csv, file_name=f"release-{result.release_id}.csv",
                       mime="text/csv", key=f"{page}:csv", on_click="ignore")
    d2.download_button("Download report (JSON)", lambda: json.dumps(result.report_json(), indent=2, default=str),
                       file_name=f"release-{result.release_id}.json", mime="application/json", key=f"{page}:json",
                       on_click="ignore")
