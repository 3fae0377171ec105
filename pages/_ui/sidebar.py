"""The sidebar frame: active dataset, relation, privacy unit and budget spent/remaining."""

from __future__ import annotations

import streamlit as st

from planner.errors import PlannerError

from . import cached, fmt


def render_sidebar() -> None:
    with st.sidebar:
        st.markdown("### Active dataset")
        try:
            data = cached.active()
        except PlannerError as exc:
            st.error(str(exc))
            return
        st.markdown(f"**{data.name}**  \n`{data.fingerprint[:12]}`")
        if data.schema is None:
            st.warning("No schema declared yet: declare one on the Data page.")
            return
        unit = data.schema.unit
        unit_txt = "one row" if unit.column is None else f"one person ({unit.column}, ≤ {unit.c} rows)"
        st.markdown(f"Relation: **{data.schema.relation.value}**  \nPrivacy unit: **{unit_txt}**",
                    help="What the guarantee hides: one privacy unit added or removed (add_remove) "
                         "or one replaced by another (substitute).")
        try:
            led = cached.ledger()
            status = led.status(data.fingerprint)
        except PlannerError:
            st.caption("Budget: not registered yet (no release so far).")
            return
        st.metric("ε spent", fmt.eps(status.epsilon_spent), help=f"rule: {status.rule.value}")
        st.metric("ε remaining", fmt.eps(status.epsilon_remaining), help=f"of total ε = {status.epsilon_total:g}, δ = {status.delta_total:g}")
        st.caption(f"{status.releases} release(s) recorded.")
