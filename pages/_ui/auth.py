"""Who is using the app: sign-in, the session's principal, and the ledger acting for it.

The principal of a session (``planner.ledger.accounts.Principal``) is, in this order:

1. the OpenID Connect identity Streamlit signed in (``st.login`` / ``st.user``) when
   ``[auth]`` is configured in ``.streamlit/secrets.toml``, its role from
   ``[planner.roles]`` (``planner.ledger.accounts.principal_from_oidc``);
2. the local account signed in with the form (``Ledger.authenticate``: Argon2id);
3. the unauthenticated local owner, only where ``planner.ledger.accounts.local_session_principal``
   allows it: the app listens on a loopback address, the ledger has no account and no OIDC
   is configured — with a visible notice saying how to expose the app safely.

Otherwise nobody is signed in and the planning pages show the sign-in form only. Every
ledger call of every page goes through :func:`ledger`, a view of the process's ledger that
acts for the principal (``Ledger.with_actor``), so the engine checks the role and the grants
on each call: a page hides what a role cannot use, but what stops an unauthorised spend is
the engine's refusal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from planner.core.errors import PermissionDenied, PlannerError
from planner.ledger.accounts import Principal, Role, local_session_principal, principal_from_oidc

from . import fmt
from .ledger_handle import get_ledger_default, oidc_configured, oidc_roles

if TYPE_CHECKING:
    from planner.ledger import Ledger

PRINCIPAL = "keep.auth.principal"  # the signed-in local account (Principal.to_dict), or absent
ERROR = "keep.auth.error"  # the last sign-in failure, shown once

LOCAL = ("**Single-user mode**: this app listens on this machine only ({address}), and whoever uses it acts as "
         "the ledger's owner.")
EXPOSE = (
    "1. Create an owner account first: `planner account create --user NAME --role owner` (or configure OpenID "
    "Connect sign-in: `[auth]` and `[planner.roles]` in `.streamlit/secrets.toml`).\n"
    "2. Create the analysts' and viewers' accounts and grant them datasets: `planner account create`, "
    "`planner grant`.\n"
    "3. Put the app behind TLS (a reverse proxy), then start it with `--server.address 0.0.0.0`.\n\n"
    "From then on everyone signs in, and each role can do only what the ledger allows it."
)


def bind_address() -> str | None:
    """The address the server listens on (``server.address``; None: every interface)."""
    value = st.get_option("server.address")
    return str(value) if value else None


def _oidc_principal() -> Principal | None:
    try:
        user = st.user.to_dict()
    except Exception:  # no identity in this session
        return None
    if not user.get("is_logged_in"):
        return None
    try:
        return principal_from_oidc(user, oidc_roles())
    except PermissionDenied as exc:
        st.session_state[ERROR] = str(exc)
        return None


def principal() -> Principal | None:
    """The session's principal, or None when someone must sign in first (found once per script
    run: :func:`pages._ui.run_memo.once_per_run`)."""
    from pages._ui.run_memo import once_per_run

    return once_per_run("principal", repr(st.session_state.get(PRINCIPAL)), _principal)


def _principal() -> Principal | None:
    ss = st.session_state
    oidc = oidc_configured()
    if oidc:
        p = _oidc_principal()
        if p is not None:
            return p
    raw = ss.get(PRINCIPAL)
    if isinstance(raw, dict):
        return Principal(raw["subject"], Role(raw["role"]), raw.get("display_name", ""), raw.get("via", "password"))
    try:
        has_accounts = get_ledger_default().has_accounts()
    except PlannerError:
        has_accounts = True  # an unreadable ledger: nobody is implicitly its owner
    return local_session_principal(bind_address(), accounts_configured=has_accounts, oidc_configured=oidc)


def role() -> Role | None:
    p = principal()
    return None if p is None else p.role


def is_owner() -> bool:
    return role() is Role.OWNER


def ledger() -> Ledger:
    """The process's ledger acting for the session's principal (every page's ledger).

    Raises
    ------
    PermissionDenied
        Nobody is signed in.
    """
    p = principal()
    if p is None:
        raise PermissionDenied("sign in first: this ledger needs a signed-in account.")
    return get_ledger_default().with_actor(p)


# ----------------------------------------------------------------------------- sign-in
def _sign_in() -> None:
    ss = st.session_state
    ss[ERROR] = None
    try:
        p = get_ledger_default().authenticate(str(ss.get("auth:user") or "").strip(),
                                             str(ss.get("auth:password") or ""), client=_client())
    except PlannerError as exc:
        ss[ERROR] = str(exc)
    else:
        ss[PRINCIPAL] = p.to_dict()
    ss["auth:password"] = ""


def _client() -> str:
    """Who is signing in, for the engine's throttle of failed sign-ins: the client's address
    as Streamlit sees it (behind a proxy, the proxy's), else this browser session."""
    try:
        address = st.context.ip_address
    except Exception:  # an older Streamlit, or no request in this context
        address = None
    if address:
        return f"ip:{address}"
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return f"session:{ctx.session_id}" if ctx is not None else "app"


def sign_out() -> None:
    """on_click: forget the local account (an OIDC session signs out with ``st.logout``)."""
    st.session_state.pop(PRINCIPAL, None)


def sign_in_page() -> None:
    """What a session nobody signed in to sees instead of the planning pages."""
    ss = st.session_state
    st.title("Sign in")
    oidc = oidc_configured()
    try:
        has_accounts = get_ledger_default().has_accounts()
    except PlannerError as exc:
        st.error(fmt.plain(str(exc)))
        return
    if not oidc and not has_accounts:
        st.error(
            "This app is reachable from other machines "
            f"(server.address = {bind_address() or 'every interface'}) but no sign-in is configured, so nobody "
            "may use it. An administrator must create an owner account (`planner account create --user NAME "
            "--role owner`) or configure OpenID Connect (`[auth]` in `.streamlit/secrets.toml`); or start it "
            "on 127.0.0.1 for one person on this machine.", icon=":material/lock:")
        return
    st.caption("The privacy ledger of this organisation needs to know who spends its budgets: every release records "
               "who made it, and each role may do only what the owners granted.")
    if oidc:
        st.button("Sign in with your organisation's account", type="primary", key="auth:oidc",
                  on_click=st.login, icon=":material/login:")
    if has_accounts:
        with st.form("auth_form", border=True):
            st.text_input("Username", key="auth:user", autocomplete="username")
            st.text_input("Password", type="password", key="auth:password", autocomplete="current-password")
            st.form_submit_button("Sign in", type="primary", on_click=_sign_in)
    if ss.get(ERROR):
        st.error(ss[ERROR])


def sidebar_block() -> None:
    """Who is signed in (and how to sign out), or the loopback notice for the local owner."""
    p = principal()
    if p is None:
        return
    with st.sidebar:
        if p.via == "local":
            st.info(LOCAL.format(address=bind_address() or "?"), icon=":material/info:")
            with st.expander("How to let others use it safely"):
                st.markdown(EXPOSE)
            return
        st.markdown(f"Signed in: **{p.display_name or p.subject}** ({p.role.value})")
        if p.via == "oidc":
            st.button("Sign out", key="auth:signout", on_click=st.logout)
        else:
            st.button("Sign out", key="auth:signout", on_click=sign_out)
