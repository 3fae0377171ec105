"""The sidebar frame: the active dataset, who is protected, the lifetime budget, the plan in force.

Everything here reads the same durable state the pages use (``pages._ui.state``), so what
the sidebar says is what the Planner plans and the Release page releases. The dataset block
is drawn before the page, the budget block after it (``pages._ui.frame``): the first page is on
screen before the ledger is first opened, and the budget shown includes what the page did.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from planner.core.errors import PlannerError
from planner.data.schema import Relation
from planner.privacy.budget import SplitMode

from . import cached, fmt, planning
from . import state as S


def render_sidebar() -> tuple[Any, cached.Active | None]:
    """The active dataset and who is protected; returns a container for :func:`render_budget`."""
    with st.sidebar:
        st.markdown("### Active dataset")
        try:
            data = cached.active()
        except PlannerError:
            # the Data page shows the reason (once); the sidebar only says where to look
            st.warning("The active file cannot be read: see the Data page.")
            return st.container(), None
        cached.sync_workload(data)
        source = {"sample": "bundled sample", "upload": "your upload", "server": "file on this server"}[data.source]
        st.markdown(f"**{fmt.plain(data.name)}**  \n{source}")
        if data.schema is None:
            st.warning("No schema declared yet: declare one on the Data page.")
            return st.container(), None
        unit = data.schema.unit
        unit_txt = "one row" if unit.column is None else f"one person ({unit.column}, ≤ {unit.c} rows)"
        relation = {Relation.ADD_REMOVE: "add or remove one", Relation.SUBSTITUTE: "replace one"}[data.schema.relation]
        st.markdown(f"Protects: **{unit_txt}**  \nNeighbours: **{relation}**",
                    help="What the guarantee hides: one privacy unit added or removed (add/remove), "
                         "or one replaced by another (substitute).")
        return st.container(), data


def render_budget(box: Any, data: cached.Active | None) -> None:
    """The dataset's lifetime budget and the settings of the next release."""
    if data is None:
        return
    ss = st.session_state
    with box:
        status = planning.lifetime(data.ledger_key)
        st.markdown("### Lifetime budget")
        if status is None:
            st.caption("Not set yet (Planner or Release page).")
        else:
            st.markdown(f"ε **{fmt.eps(max(status.epsilon_remaining, 0.0))}** left of {status.epsilon_total:g}  \n"
                        f"{status.releases} release(s) · {fmt.rule(status.rule)}")
        st.markdown("### Next release")
        try:
            s = planning.settings(data, status)
        except PlannerError:
            st.caption("ε or δ is not valid yet: see the Planner.")
            return
        what = "least ε meeting every target" if s.mode is SplitMode.TARGET else f"ε = {s.epsilon:g}"
        st.markdown(f"{what}, δ = {s.delta:g}  \n{fmt.rule(s.rule)} · {len(S.clean_rows(ss[S.WORKLOAD]))} queries"
                    + (" (edited)" if S.workload_edited() else ""))
