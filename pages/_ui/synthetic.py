"""Released synthetic tables on the Release page: a preview, the CSV download, and the
owner-only comparison with the real table (labelled, off by default, never exported).

One call from the page, :func:`show`, for a fresh release and for a stored one alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from pages._ui import auth, cached, charts, fmt
from planner.core.errors import PlannerError
from planner.data.schema import Schema
from planner.outputs.synthetic import (
    synthetic_preview,
    synthetic_rows_csv,
    synthetic_sampler_words,
    synthetic_tables,
)
from planner.planning.queries import Query
from planner.planning.statistics.synthetic_data import compare_marginals

PREVIEW_ROWS = 20


def show(answers: Mapping[str, Any] | None, queries: Mapping[str, Query], schema: Schema, schema_json: str,
         data: Any, release_id: int) -> None:
    """Each synthetic table among ``answers``: its first rows, its CSV, and (owners) the check."""
    for qid, ans in synthetic_tables(answers or {}).items():
        recs = ans["records"]
        st.subheader(f"Synthetic table: {qid}")
        st.caption(f"{len(recs):,} rows drawn from a model fitted to noisy marginals "
                   f"({fmt.plain(str(ans.get('generator', '')))}; {synthetic_sampler_words(ans)}): released "
                   "output, safe to share like any "
                   "released value. Numeric values are drawn within their synthetic bin.")
        st.dataframe(pd.DataFrame(synthetic_preview(ans, PREVIEW_ROWS)), hide_index=True, width="stretch")
        st.download_button(f"Download the synthetic table {qid} (CSV)", synthetic_rows_csv(ans),
                           file_name=f"release-{release_id}-{qid}.csv", mime="text/csv",
                           key=f"release:synthetic:{qid}:csv", on_click="ignore")
        q = queries.get(qid)
        if q is not None and auth.is_owner():
            _compare(q, ans, schema, schema_json, data)


def _compare(q: Query, ans: Mapping[str, Any], schema: Schema, schema_json: str, data: Any) -> None:
    """The owner-only comparison: off until asked for, labelled, computed from the raw rows."""
    key = f"release:synthetic:{q.id}:compare"
    if not st.toggle("Compare with the real table (owner only: reads your raw data)", key=key, value=False,
                     help="Off by default. Computed from the private rows: not private, never exported."):
        return
    st.error("⚠️ **Computed from your raw data — not private, do not share.** This comparison is never "
             "exported with a release.")
    try:
        engine = cached.backend(data.fingerprint, schema_json, cached.backend_name(), data)
        cmp = compare_marginals(q, schema, engine, dict(ans))
    except PlannerError as exc:
        st.error(fmt.plain(str(exc)))
        return
    names = list(cmp.columns)
    tv = pd.DataFrame({"column": names, "1-way TVD": cmp.one_way_tvd})
    st.dataframe(tv, hide_index=True, width="stretch",
                 column_config={"1-way TVD": st.column_config.NumberColumn(format="%.4f")})
    col = st.selectbox("Column", names, key=f"{key}:column")
    charts.draw(charts.marginal_bars(pd.DataFrame(cmp.one_way(names.index(col))), col))
    worst = cmp.worst_pair()
    if worst is None:
        return
    pairs = sorted(cmp.pair_tvd, key=lambda p: -cmp.pair_tvd[p])
    pick = st.selectbox("Pair of columns (largest 2-way TVD first; * measured by the release)", pairs,
                        key=f"{key}:pair", format_func=lambda p: f"{names[p[0]]} × {names[p[1]]}: TVD "
                        f"{cmp.pair_tvd[p]:.3f}{' *' if p in cmp.measured else ''}")
    i, j = pick
    charts.draw(charts.marginal_heatmap(pd.DataFrame(cmp.two_way(i, j)), names[i], names[j]))
    st.caption("Pairs marked * were measured by the release: the prediction covers them. The others are only as "
               "good as the model's independence assumptions for this data.")
