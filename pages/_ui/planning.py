"""The plan in force: one function the Planner, the Release page and the sidebar all read.

What is shown anywhere is what will be released: every page builds the plan from the same
durable settings (:mod:`pages._ui.state`) through :func:`current_plan`, which writes them as
the PLAN.json document the command line reads (``planner.planning.plan_spec.spec_document``) and
plans that document with ``planner.planning.plan_spec.build_plan`` — so the file the Planner offers
for download plans, on the command line, to exactly the plan on screen. Once a dataset has
a lifetime budget, its composition rule is the rule in force (the ledger composes every
release under it); before that, the rule chosen on the Planner is a what-if.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import streamlit as st

from planner.core.errors import LedgerError, PermissionDenied, PlannerError
from planner.data.schema import Schema
from planner.privacy.accountants.base import as_rule
from planner.privacy.budget import Budget, CompositionRule, SplitMode, check_delta, check_epsilon

from . import cached, prefetch
from . import state as S

if TYPE_CHECKING:  # imported when first used: the Data page draws without the optimiser or the ledger
    from planner.ledger import BudgetStatus, ReleasePreview
    from planner.planning.plan_spec import PlanSpec
    from planner.planning.workload import Plan, TargetResult


@dataclass(frozen=True)
class Settings:
    """The owner's choices for the next release, as the engine will receive them."""

    mode: SplitMode
    epsilon: float
    delta: float
    rule: CompositionRule
    relative: bool
    pins: cached.Pins  # weighted mode: shares held fixed
    manual: cached.Pins  # manual mode: every share
    lifetime: BudgetStatus | None  # the dataset's lifetime budget, if set

    @property
    def rule_fixed(self) -> bool:
        """True when the dataset's lifetime budget fixes the rule."""
        return self.lifetime is not None

    @property
    def budget(self) -> Budget:
        """This release's budget (ε, δ, rule) as the engine's one budget value."""
        return Budget(self.epsilon, self.delta, self.rule)


@dataclass(frozen=True)
class PlanView:
    """The plan in force and how it was made."""

    settings: Settings
    plan: Plan
    target: TargetResult | None
    wl_json: str
    spec_json: str  # the PLAN.json document (schema inline) the plan was made from
    scales: cached.Pins  # the public scales errors are measured against


def budget_access(fingerprint: str | None) -> tuple[BudgetStatus | None, str | None]:
    """(the dataset's lifetime budget and spend, or None when none is set or it is not
    visible to the session's principal; the engine's reason when it is not visible).
    ``fingerprint`` is the dataset's ledger key (``Active.ledger_key``); ``None`` (no schema
    declared yet) has no budget."""
    if fingerprint is None:
        return None, None
    try:
        return cached.ledger().status(fingerprint), None
    except PermissionDenied as exc:
        return None, str(exc)
    except LedgerError:
        return None, None


def lifetime(fingerprint: str | None) -> BudgetStatus | None:
    """The dataset's lifetime budget and spend, or None when none is set yet (or the
    session's principal may not see it)."""
    return budget_access(fingerprint)[0]


def pins_of(raw: Any) -> cached.Pins:
    return tuple(sorted((str(k), float(v)) for k, v in (raw or {}).items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)))


class _Unread:
    """The lifetime budget not read yet (read it from the ledger)."""


UNREAD: Any = _Unread()


def settings(data: cached.Active, status: BudgetStatus | None = UNREAD) -> Settings:
    """The durable settings, validated; the rule is the dataset's once its budget is set.

    ``status``: the dataset's lifetime budget as :func:`lifetime` returned it earlier in the
    same script run (a page reads it once: each read asks the ledger); read here when not given.

    Raises
    ------
    BudgetError
        ε or δ as typed is not a valid privacy parameter (the message names it and the fix).
    """
    ss = st.session_state
    if isinstance(status, _Unread):
        status = lifetime(data.ledger_key)
    eps = check_epsilon(ss[S.EPSILON], "ε (this release)")
    delta = check_delta(ss[S.DELTA], "δ")
    rule = status.rule if status is not None else as_rule(ss[S.RULE])
    mode = S.split_mode(ss[S.MODE])
    return Settings(mode, eps, delta, rule, bool(ss[S.RELATIVE]), pins_of(ss[S.PINS]), pins_of(ss[S.MANUAL]), status)


def scales(s: Settings, wl_json: str, schema_json: str, rows: list[dict[str, Any]]) -> dict[str, float]:
    """The public scales each query's error is measured against: the engine's default scale
    of every query when errors are relative (not in target mode, where a scale turns a
    target into a fraction of it), then the scales typed in the Queries table."""
    out: dict[str, float] = {}
    if s.relative and s.mode is not SplitMode.TARGET:
        schema = Schema.from_json(schema_json)
        out.update(cached.error_scales(cached.parse_queries(wl_json, schema_json), schema) or {})
    out.update(S.row_scales(rows))
    return out


def spec_json(data: cached.Active, schema_json: str, s: Settings, rows: list[dict[str, Any]]) -> tuple[str, str, cached.Pins]:
    """(PLAN.json text, workload JSON, scales) of the durable settings: the document the
    plan in force is made from (schema inline, no lifetime: :func:`download_document` adds it).

    Raises PlannerError (invalid workload, a share naming no query).
    """
    from planner.planning import plan_spec

    wl = cached.workload_json(rows, s.mode)
    qs = cached.parse_queries(wl, schema_json)
    sc = scales(s, wl, schema_json, rows)
    items = {i for i, *_ in cached.item_ids(wl, schema_json)}
    raw = dict(s.manual) if s.mode is SplitMode.MANUAL else dict(s.pins) if s.mode is SplitMode.WEIGHTED else {}
    pins = {k: v for k, v in raw.items() if k in items}  # shares of queries since removed are dropped
    other_key = "weight" if s.mode is SplitMode.TARGET else "target"
    other = {str(r["id"]): {other_key: float(r[other_key])} for r in S.clean_rows(rows)
             if r.get("id") and isinstance(r.get(other_key), (int, float)) and not isinstance(r.get(other_key), bool)
             and math.isfinite(r[other_key]) and r[other_key] > 0}
    doc = plan_spec.spec_document(Schema.from_json(schema_json), s.epsilon, s.delta, s.rule, s.mode, qs,
                                  error_scales=sc or None, pinned=pins or None, dataset_name=data.name,
                                  other_mode=other or None)
    return json.dumps(doc, sort_keys=True), wl, tuple(sorted(sc.items()))


def current_plan(data: cached.Active, schema_json: str, status: BudgetStatus | None = UNREAD) -> PlanView:
    """The plan the owner set up, in the chosen mode (optimal, equal or manual split of ε;
    or the least ε meeting every target). ``status`` as :func:`settings` takes it.

    Raises PlannerError (invalid ε/δ, invalid workload, an unmet target, a manual split
    over its budget) for the page to show.
    """
    s = settings(data, status)
    text, wl, sc = spec_json(data, schema_json, s, st.session_state[S.WORKLOAD])
    outcome = cached.spec_plan(text)
    return PlanView(s, outcome.plan, outcome.target, wl, text, sc)


def download_document(view: PlanView) -> dict[str, Any]:
    """The PLAN.json the Planner offers: the plan in force with the dataset's lifetime
    budget (so that ``planner release`` on the same file spends from the same budget)."""
    doc: dict[str, Any] = json.loads(view.spec_json)
    life = view.settings.lifetime
    if life is not None:
        doc = {**{k: v for k, v in doc.items() if k != "queries"},
               "lifetime": {"epsilon": life.epsilon_total, "delta": life.delta_total}, "queries": doc["queries"]}
    return doc


def parsed_spec(view: PlanView, *, with_lifetime: bool = True) -> PlanSpec:
    """The plan in force as a :class:`planner.planning.plan_spec.PlanSpec` (for code export and reports)."""
    from planner.planning import plan_spec

    return plan_spec.parse_plan_spec(download_document(view) if with_lifetime else json.loads(view.spec_json))


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
        return cached.ledger().preview(data.ledger_key, spends(view, schema))
    except (LedgerError, PermissionDenied):
        return None


def plan_or_error(data: cached.Active, schema_json: str) -> tuple[PlanView | None, str | None]:
    """:func:`current_plan`, or the engine's message when the plan cannot be made."""
    try:
        return current_plan(data, schema_json), None
    except PlannerError as exc:
        return None, str(exc)


def prefetch_neighbours(data: cached.Active, schema_json: str, view: PlanView) -> None:
    """Plan, in the background, what an ε step on the Planner will ask for
    (:mod:`pages._ui.prefetch`): the documents at ε ± the box's step, made by :func:`spec_json`
    exactly as the page will make them, planned by the cached calls the page makes in that
    mode — every rule for the optimal split's comparison (the rule in force first), the plan
    and the per-rule summary for an equal or manual split. The least-ε mode has no ε to step."""
    s = view.settings
    if s.mode is SplitMode.TARGET:
        return
    rows = copy.deepcopy(st.session_state[S.WORKLOAD])  # read here: the thread reads no session state
    texts: dict[float, str] = {}

    def text(eps: float) -> str:
        if eps not in texts:
            texts[eps] = spec_json(data, schema_json, dataclasses.replace(s, epsilon=eps), rows)[0]
        return texts[eps]

    jobs: list[prefetch.Job] = []
    near = prefetch.neighbours(s.epsilon)
    if s.mode is SplitMode.WEIGHTED:
        # the rule in force first (the allocation), the optimal accountant's slow fit last: a job
        # under way when the owner types another ε is the one the page's run shares the CPU with
        order = [s.rule, *sorted((r for r in S.RULES if r != s.rule), key=lambda r: r is CompositionRule.PLD)]
        for rule in order:
            for eps in near:
                jobs.append(lambda e=eps, r=rule: cached.spec_plan(cached.with_rule(text(e), r)))
    else:
        for eps in near:
            jobs += [lambda e=eps: cached.spec_plan(text(e)), lambda e=eps: cached.compare_spec(text(e))]
    prefetch.soon(jobs)
