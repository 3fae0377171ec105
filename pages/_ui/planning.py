"""The plan in force: one function the Planner, the Release page and the sidebar all read.

What is shown anywhere is what will be released: every page builds the plan from the same
durable settings (:mod:`pages._ui.state`) through :func:`current_plan`. Once a dataset has a
lifetime budget, its composition rule is the rule in force (the ledger composes every
release under it); before that, the rule chosen on the Planner is a what-if.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import streamlit as st

from planner.budget import check_delta, check_epsilon
from planner.errors import LedgerError, PlannerError
from planner.schema import Schema

from . import cached
from . import state as S

if TYPE_CHECKING:  # imported when first used: the Data page draws without the optimiser or the ledger
    from planner.ledger import BudgetStatus, ReleasePreview
    from planner.workload import Plan, TargetResult


@dataclass(frozen=True)
class Settings:
    """The owner's choices for the next release, as the engine will receive them."""

    mode: str
    epsilon: float
    delta: float
    rule: str
    relative: bool
    pins: cached.Pins
    lifetime: BudgetStatus | None  # the dataset's lifetime budget, if set

    @property
    def rule_fixed(self) -> bool:
        """True when the dataset's lifetime budget fixes the rule."""
        return self.lifetime is not None


@dataclass(frozen=True)
class PlanView:
    """The plan in force and how it was made."""

    settings: Settings
    plan: Plan
    target: TargetResult | None
    wl_json: str


def lifetime(fingerprint: str) -> BudgetStatus | None:
    """The dataset's lifetime budget and spend, or None when none is set yet."""
    try:
        return cached.ledger().status(fingerprint)
    except LedgerError:
        return None


def settings(data: cached.Active) -> Settings:
    """The durable settings, validated; the rule is the dataset's once its budget is set.

    Raises
    ------
    BudgetError
        ε or δ as typed is not a valid privacy parameter (the message names it and the fix).
    """
    ss = st.session_state
    status = lifetime(data.fingerprint)
    eps = check_epsilon(ss[S.EPSILON], "ε (this release)")
    delta = check_delta(ss[S.DELTA], "δ")
    rule = status.rule.value if status is not None else str(ss[S.RULE])
    pins = tuple(sorted((str(k), float(v)) for k, v in (ss[S.PINS] or {}).items()))
    return Settings(str(ss[S.MODE]), eps, delta, rule, bool(ss[S.RELATIVE]), pins, status)


def current_plan(data: cached.Active, schema_json: str) -> PlanView:
    """The plan the owner set up: target mode's least-ε plan, or weighted mode's split.

    Raises PlannerError (invalid ε/δ, invalid workload, an unmet target) for the page to show.
    """
    s = settings(data)
    wl = cached.workload_json(st.session_state[S.WORKLOAD], s.mode)
    if s.mode == "target":
        res = cached.targets(wl, schema_json, s.delta, s.rule)
        return PlanView(s, res.plan, res, wl)
    return PlanView(s, cached.plan(wl, schema_json, s.epsilon, s.delta, s.rule, s.relative, s.pins), None, wl)


def spends(view: PlanView, schema: Schema) -> list[Any]:
    """The spends the release of ``view.plan`` would record (``release.prepare(...).spends()``)."""
    from planner import release

    prep = cached.prepared(release.plan_hash(view.plan, schema), view.plan, schema)
    return [s for _, s in prep.spends()]


def preview(data: cached.Active, view: PlanView, schema: Schema) -> ReleasePreview | None:
    """What releasing the plan would cost on the dataset (the ledger's own check); None
    while the dataset has no lifetime budget."""
    if view.settings.lifetime is None:
        return None
    try:
        return cached.ledger().preview(data.fingerprint, spends(view, schema))
    except LedgerError:
        return None


def plan_or_error(data: cached.Active, schema_json: str) -> tuple[PlanView | None, str | None]:
    """:func:`current_plan`, or the engine's message when the plan cannot be made."""
    try:
        return current_plan(data, schema_json), None
    except PlannerError as exc:
        return None, str(exc)
