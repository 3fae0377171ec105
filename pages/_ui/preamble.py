"""The preamble every planning page shares: state, the active dataset, its schema."""

from __future__ import annotations

import streamlit as st

from planner.errors import PlannerError
from planner.schema import Schema

from . import cached
from . import state as S


def require_dataset() -> tuple[cached.Active, Schema, str]:
    """Init state, load the active dataset and sync the workload to it.

    Returns ``(data, schema, schema_json)``. Stops the page with ``st.error`` on a bad
    upload and with ``st.info`` while no schema has been declared yet.
    """
    S.init_state()
    try:
        data = cached.active()
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    cached.sync_workload(data)
    if data.schema is None or data.schema_json is None:
        st.info("Declare a schema on the Data page first.")
        st.stop()
    return data, data.schema, data.schema_json
