"""The preamble every planning page shares: state, the active dataset, its schema."""

from __future__ import annotations

import streamlit as st

from planner.core.errors import PlannerError
from planner.data.schema import Schema

from . import cached, fmt, frame, planfiles
from . import state as S


def require_planner() -> None:
    """Stop the page unless someone who may plan (an owner or an analyst) is signed in (a
    page reached by a deep link or a test, not only through the navigation)."""
    from planner.ledger.accounts import Role

    from . import auth

    r = auth.role()
    if r is None:
        st.info("Sign in first.", icon=":material/login:")
        frame.stop()
    if r is Role.VIEWER:
        st.info("As a viewer you see the released answers and the ledger of the datasets shared with you, on the "
                "Ledger page.", icon=":material/visibility:")
        frame.stop()


def require_dataset(restore: str | None = None) -> tuple[cached.Active, Schema, str]:
    """Init state, load the active dataset and give it its workload.

    Returns ``(data, schema, schema_json)``. Stops the page with a pointer to the Data
    page when the active file cannot be read (the Data page shows why, once) or while no
    schema has been declared yet; with ``restore`` (the page's name), also the form that
    restores a saved plan file, which holds the schema (an owner who comes back with the
    file and the PLAN.json of an earlier session).
    """
    S.init_state()
    require_planner()
    try:
        data = cached.active()
    except PlannerError:
        st.warning("The active file cannot be read; the Data page says why.")
        st.page_link("pages/data_page.py", label="Go to the Data page", icon=":material/table_view:")
        frame.stop()
    if data.schema is None or data.schema_json is None:
        st.info(f"Declare the schema of **{fmt.plain(data.name)}** on the Data page first"
                + (", or restore a plan file you saved (it holds the schema)." if restore else "."))
        st.page_link("pages/data_page.py", label="Go to the Data page", icon=":material/table_view:")
        if restore is not None:
            planfiles.upload_form(data, restore)
        frame.stop()
    cached.sync_workload(data)
    return data, data.schema, data.schema_json
