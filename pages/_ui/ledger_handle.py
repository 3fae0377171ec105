"""The process's ledger, opened once per ledger URL and sign-in configuration.

:func:`get_ledger_default` is the ledger at ``$PLANNER_LEDGER_URL`` (or the default), opened
with the OpenID Connect role map of ``secrets.toml`` when that sign-in is configured; Streamlit
keeps one per process, URL and role map (``st.cache_resource``). It acts for nobody in
particular: :mod:`pages._ui.auth` signs people in with it and gives every page a view of it
acting for the session's principal (``pages._ui.auth.ledger``). The sign-in configuration it
is opened with (:func:`oidc_configured`, :func:`oidc_roles`) is read here, so this module
imports no other page helper.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import streamlit as st

if TYPE_CHECKING:  # imported where used: the Data page draws without the ledger
    from planner.ledger import Ledger


def _secrets() -> Mapping[str, Any]:
    try:
        return st.secrets.to_dict() if hasattr(st.secrets, "to_dict") else dict(st.secrets)
    except Exception:  # no secrets.toml (Streamlit raises its own FileNotFoundError subclass)
        return {}


def oidc_configured() -> bool:
    """True when ``[auth]`` is configured (Streamlit's built-in OpenID Connect sign-in)."""
    return isinstance(_secrets().get("auth"), Mapping)


def oidc_roles() -> Mapping[str, Any]:
    """``[planner.roles]`` of ``secrets.toml``: owners, analysts, viewers by e-mail."""
    planner = _secrets().get("planner")
    roles = planner.get("roles") if isinstance(planner, Mapping) else None
    return roles if isinstance(roles, Mapping) else {}


@st.cache_resource
def get_ledger(url: str | None, oidc_roles: str | None = None) -> Ledger:
    """One ledger per process, URL and OpenID Connect role map (JSON; ``None`` when sign-in
    by OpenID Connect is not configured, and then the engine refuses ``oidc:`` principals)."""
    import json

    from planner.ledger import Ledger

    return Ledger(url, oidc_roles=None if oidc_roles is None else json.loads(oidc_roles))


def get_ledger_default() -> Ledger:
    """The process's ledger (``$PLANNER_LEDGER_URL`` or the default), acting for nobody in
    particular: only :mod:`pages._ui.auth` uses it directly (to sign in)."""
    import json
    import os

    roles = json.dumps(dict(oidc_roles()), sort_keys=True, default=list) if oidc_configured() else None
    return get_ledger(os.environ.get("PLANNER_LEDGER_URL"), roles)
