"""The dataset's lifetime budget: set once, on its own; raised only by a recorded decision.

Every release spends part of the lifetime budget (``planner.ledger``). It is set by an
explicit action of the owner (:func:`set_form`), never by a release; it can never be
lowered, and raising it (:func:`raise_form`) is recorded in the ledger with its reason.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from planner.core.errors import PlannerError
from planner.ledger import resolve_dataset
from planner.privacy.accountants import rule as registered_rule
from planner.privacy.budget import CompositionRule

from . import cached, charts, fmt
from . import state as S

if TYPE_CHECKING:
    from planner.ledger import BudgetStatus, ReleasePreview

STATEMENT = (
    "The **lifetime budget** is the total privacy loss this dataset may ever suffer, over all its "
    "releases. Every release spends part of it and nothing is ever refunded. Once set it cannot be "
    "lowered; it can only be **raised by a deliberate decision that is recorded in the ledger** with its "
    "reason (Ledger page). Every release of this dataset is accounted under the composition rule chosen here."
)

_ERROR = "keep.lifetime.error"
#: The lifetime form's values: ``None`` follows the Planner's current value until the owner
#: types another one (durable, so a visit to another page keeps what was typed).
DRAFT = "keep.lifetime.draft"


def _draft() -> dict[str, Any]:
    ss = st.session_state
    if DRAFT not in ss:
        ss[DRAFT] = {"epsilon": None, "delta": None, "rule": None}
    return dict(ss[DRAFT])


def _values() -> tuple[float | None, float, CompositionRule]:
    """(ε, δ, rule) the form shows: what the owner typed, else the Planner's δ and rule."""
    ss = st.session_state
    d = _draft()
    delta = d["delta"] if d["delta"] is not None else ss[S.DELTA]
    rule = d["rule"] if d["rule"] is not None else ss[S.RULE]
    return d["epsilon"], float(delta) if isinstance(delta, (int, float)) else 1e-6, CompositionRule(rule) if rule in S.RULES else CompositionRule.RDP


def _typed(field: str, wk: str) -> None:
    ss = st.session_state
    ss[DRAFT] = dict(_draft(), **{field: ss[wk]})


def _set(page: str, fingerprint: str, file_fp: str, name: str, sampling: Any = None) -> None:
    """on_click: register the lifetime budget shown in the form."""
    ss = st.session_state
    ss[_ERROR] = None
    for field, suffix in (("epsilon", "eps"), ("delta", "delta"), ("rule", "rule")):
        wk = f"{page}:lifetime_{suffix}"
        if wk in ss and ss[wk] != _values()[("epsilon", "delta", "rule").index(field)]:
            _typed(field, wk)  # a field edited in the same interaction as the click
    eps, delta, rule = _values()
    if eps is None:
        ss[_ERROR] = {"page": page, "text": "Type the lifetime ε: the total this dataset may ever spend."}
        return
    try:
        led = cached.ledger()
        led.register_dataset(fingerprint, name, eps, delta, rule, sampling=sampling)
        resolve_dataset(led, (fingerprint, file_fp))  # the file's bytes name it too (server file lists)
    except PlannerError as exc:
        ss[_ERROR] = {"page": page, "text": str(exc)}
        return
    ss[S.RULE] = rule
    ss[DRAFT] = {"epsilon": None, "delta": None, "rule": None}
    S.notice(page, f"Lifetime budget set: ε = {eps:g}, δ = {delta:g}, {rule} rule.")


def _join(page: str, dataset_key: str, content: str, file_fp: str) -> None:
    """on_click: record this file as a new version of a registered dataset (same budget)."""
    ss = st.session_state
    ss[_ERROR] = None
    try:
        led = cached.ledger()
        led.add_version(dataset_key, content)
        resolve_dataset(led, (content, file_fp))
    except PlannerError as exc:
        ss[_ERROR] = {"page": page, "text": str(exc)}
        return
    S.notice(page, "This file is now a version of that dataset: its releases draw on the same lifetime budget.")


def _declare(page: str, content: str, file_fp: str, schema_hash: str, sampling: Any = None) -> None:
    """on_click: declare a separate dataset for this file, under a new unique name (owners)."""
    ss = st.session_state
    ss[_ERROR] = None
    eps, delta, rule = ss.get(f"{page}:declare_eps"), ss.get(f"{page}:declare_delta"), ss.get(f"{page}:declare_rule")
    name = str(ss.get(f"{page}:declare_name") or "").strip()
    if eps is None or not name or delta is None or rule not in S.RULES:
        ss[_ERROR] = {"page": page, "text": "Type the new dataset's name and its lifetime ε."}
        return
    rule = CompositionRule(rule)
    try:
        led = cached.ledger()
        led.declare_dataset(name, eps, delta, rule, schema_hash=schema_hash, digest=content, sampling=sampling)
        resolve_dataset(led, (content, file_fp))
    except PlannerError as exc:
        ss[_ERROR] = {"page": page, "text": str(exc)}
        return
    ss[S.RULE] = rule
    S.notice(page, f"Dataset {name!r} declared with its own lifetime budget ε = {eps:g}, δ = {delta:g}, {rule} rule.")


def _identity_choice(data: cached.Active, page: str) -> bool:
    """When this file is new to the ledger but a dataset of its name (or with its schema)
    has a lifetime budget, say which and offer what to do; True when shown (then the form
    that would register a new budget is not)."""
    assert data.ledger_key is not None and data.schema is not None
    try:
        ident = cached.ledger().identify(data.ledger_key, name=data.name, schema_hash=data.schema.schema_hash())
    except PlannerError:
        return False
    if ident.known or (ident.dataset is None and not ident.resembles):
        return False
    alike = [ident.dataset] if ident.dataset is not None else list(ident.resembles)
    first = alike[0]
    if ident.dataset is not None:
        st.info(f"This file is new to the ledger, and a dataset named **{fmt.plain(first.name)}** already has a "
                f"lifetime budget (ε = {first.epsilon:g}). A table that comes back with rows added or edited, "
                "re-encoded or with more columns is a new version of the same dataset and draws on the same "
                "budget.", icon=":material/merge:")
    else:
        st.warning(fmt.plain(ident.advice), icon=":material/merge:")
    for ds in alike:
        st.button(f"Release it as a new version of {ds.name}", type="primary", key=f"{page}:join:{ds.fingerprint}",
                  on_click=_join, args=(page, ds.fingerprint, data.ledger_key, data.fingerprint))
    from . import auth

    if auth.is_owner():
        with st.expander("It is a different table about other people: declare a separate dataset"):
            st.caption("A second lifetime budget is a deliberate, recorded decision: give the dataset its own name. "
                       "Use it only when this table is not a version of the one above.")
            st.text_input("New dataset's name (unique)", key=f"{page}:declare_name")
            _, delta, rule = _values()
            c1, c2, c3 = st.columns(3)
            c1.number_input("Its lifetime ε", step=0.5, format="%g", key=f"{page}:declare_eps", value=None,
                            placeholder="e.g. 2")
            c2.number_input("Its lifetime δ", step=1e-7, format="%g", key=f"{page}:declare_delta", value=delta)
            c3.selectbox("Composition rule", S.RULES, key=f"{page}:declare_rule", index=S.RULES.index(rule),
                         format_func=rule_label)
            st.button("Declare the separate dataset", key=f"{page}:declare", on_click=_declare,
                      args=(page, data.ledger_key, data.fingerprint, data.schema.schema_hash(), data.schema.sampling))
    return True


def set_form(data: cached.Active, page: str) -> None:
    """The fields and the button that set a dataset's lifetime budget (while none is set);
    for a session that is not an owner, who may set it (the engine refuses anyone else)."""
    from . import auth, planning

    ss = st.session_state
    if data.ledger_key is None:
        st.info("Declare this dataset's schema on the Data page first: its budget belongs to the declared "
                "columns' content (the same table in another file format or row order shares it).",
                icon=":material/info:")
        return
    _, denied = planning.budget_access(data.ledger_key)
    if denied:
        st.warning(denied, icon=":material/lock:")
        return
    if not auth.is_owner():
        st.info("Only an owner of the organisation sets a dataset's lifetime budget and grants analysts a share of "
                "it. Ask an owner to register this dataset and grant you a budget on it.", icon=":material/lock:")
        return
    if data.schema is not None and _identity_choice(data, page):
        err = ss.get(_ERROR)
        if err and err.get("page") == page:
            st.error(fmt.plain(err["text"]))
        return
    st.markdown(STATEMENT)
    eps, delta, rule = _values()
    ss[f"{page}:lifetime_eps"] = eps
    ss[f"{page}:lifetime_delta"] = delta
    ss[f"{page}:lifetime_rule"] = rule
    with st.container(border=True):
        c1, c2, c3 = st.columns(3)
        c1.number_input("Lifetime ε (all releases together)", step=0.5, format="%g",
                        key=f"{page}:lifetime_eps", placeholder="e.g. 2",
                        on_change=_typed, args=("epsilon", f"{page}:lifetime_eps"),
                        help="Several releases fit in it; each one spends part of it.")
        c2.number_input("Lifetime δ", step=1e-7, format="%g", key=f"{page}:lifetime_delta",
                        on_change=_typed, args=("delta", f"{page}:lifetime_delta"),
                        help="The small chance the guarantee fails, for all releases together; keep it far below "
                             "1 ÷ the number of people. Follows the Planner's δ until you type another.")
        c3.selectbox("Composition rule for every release", S.RULES, key=f"{page}:lifetime_rule",
                     format_func=rule_label, on_change=_typed, args=("rule", f"{page}:lifetime_rule"),
                     help="How the ledger adds up the cost of this dataset's releases; fixed with the budget. "
                          "Follows the Planner's rule until you pick another.")
        st.button("Set the lifetime budget", type="primary", key=f"{page}:lifetime_set",
                  on_click=_set, args=(page, data.ledger_key, data.fingerprint, data.name,
                                              data.schema.sampling if data.schema is not None else None))
    err = ss.get(_ERROR)
    if err and err.get("page") == page:
        st.error(fmt.plain(err["text"]))


def metrics(status: BudgetStatus) -> None:
    """Lifetime ε, spent so far, remaining (one row of metrics)."""
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Lifetime ε", f"{status.epsilon_total:g}", help=f"δ = {status.delta_total:g} for all releases together")
    c2.metric("Spent so far", fmt.eps(status.epsilon_spent), help=f"composed under {fmt.rule(status.rule)}")
    c3.metric("Remaining", fmt.eps(max(status.epsilon_remaining, 0.0)))
    c4.metric("Releases", status.releases)


def preview_metrics(pv: ReleasePreview) -> None:
    """Spent so far / this release / remaining afterwards, from the ledger's own check."""
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Lifetime ε", f"{pv.epsilon_total:g}", help=f"δ = {pv.delta_total:g}, {fmt.rule(pv.rule)}")
    c2.metric("Spent so far", fmt.eps(pv.epsilon_spent))
    c3.metric("This release", fmt.eps(pv.epsilon_release) if pv.fits else f"{pv.epsilon_release:.4g}",
              help=f"How much the spent total grows, composed under {fmt.rule(pv.rule)} with what was spent "
                   "before (under basic composition, exactly this release's ε).")
    if pv.fits:
        c4.metric("Remaining afterwards", fmt.eps(max(pv.epsilon_remaining_after, 0.0)))
    else:
        c4.metric("Remaining now", fmt.eps(max(pv.epsilon_remaining, 0.0)), help="This release does not fit in it.")


def preview_bar(pv: ReleasePreview) -> None:
    """The same numbers as :func:`preview_metrics`, as one bar a layperson reads at a glance."""
    parts = [pv.epsilon_spent, pv.epsilon_release, max(pv.epsilon_remaining_after, 0.0)]
    df = pd.DataFrame({"part": list(charts.BUDGET_PARTS), "epsilon": parts, "order": [0, 1, 2]})
    charts.draw(charts.budget_bar(df[df["epsilon"] > 0], pv.epsilon_total))


def composed_note(pv: ReleasePreview, own_epsilon: float, own_delta: float) -> str:
    """Why "this release" differs from the plan's own ε, when it does: the ledger composes
    the release with what was spent before, under the lifetime rule and δ ("" otherwise)."""
    if math.isclose(pv.epsilon_release, own_epsilon, rel_tol=1e-6, abs_tol=1e-12):
        return ""
    before = ", with what was spent before," if pv.epsilon_spent > 0 else ""
    return (f"On its own this plan costs ε = {fmt.eps(own_epsilon)} (δ = {own_delta:g}); the ledger accounts it under "
            f"{fmt.rule(pv.rule)} at the lifetime δ = {pv.delta_total:g}{before} so the spent total grows by "
            f"ε = {fmt.eps(pv.epsilon_release)}.")


def _raise(fingerprint: str) -> None:
    ss = st.session_state
    ss[_ERROR] = None
    try:
        cached.ledger().raise_budget(fingerprint, ss["ledger:raise_eps"], ss["ledger:raise_delta"],
                                     reason=ss.get("ledger:raise_reason") or "")
    except PlannerError as exc:
        ss[_ERROR] = {"page": "ledger", "text": str(exc)}
        return
    ss["ledger:raise_reason"] = ""
    S.notice("ledger", f"Lifetime budget raised to ε = {ss['ledger:raise_eps']:g}, δ = {ss['ledger:raise_delta']:g}; "
                       "the decision and its reason are recorded below.")


def raise_form(status: BudgetStatus) -> None:
    """Raise the lifetime budget: a deliberate action, recorded with its reason."""
    ss = st.session_state
    if ss.get("ledger:raise_for") != status.fingerprint:  # seed from the current budget, once per dataset
        ss["ledger:raise_for"] = status.fingerprint
        ss["ledger:raise_eps"] = float(status.epsilon_total)
        ss["ledger:raise_delta"] = float(status.delta_total)
    with st.form("ledger_raise_form"):
        st.markdown("Raising the lifetime budget weakens the promise made to the people in this dataset. Do it only "
                    "as a decision you can justify; it is recorded with the reason and shown in the ledger export.")
        c1, c2 = st.columns(2)
        c1.number_input("New lifetime ε", step=0.5, format="%g", key="ledger:raise_eps")
        c2.number_input("New lifetime δ", step=1e-7, format="%g", key="ledger:raise_delta")
        st.text_input("Reason (who decided, and why)", key="ledger:raise_reason",
                      placeholder="e.g. ethics board decision 2026-11, second publication approved")
        st.form_submit_button("Raise the lifetime budget", key="ledger:raise", on_click=_raise,
                              args=(status.fingerprint,))
    err = ss.get(_ERROR)
    if err and err.get("page") == "ledger":
        st.error(fmt.plain(err["text"]))


def over_budget(pv: ReleasePreview) -> str:
    """Why a release does not fit, in plain words: the ledger's own check and reason."""
    return pv.reason


def rule_label(rule: str) -> str:
    """A rule as the selectors show it: its name and gist from the rule registry."""
    return registered_rule(rule).label
