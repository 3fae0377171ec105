"""Issue 27, finding 1: a decision taken on rows edited in place (the journal untouched)
must be refused at the decision, not only reported by ``planner ledger verify``.

Setup (the same for every case, on SQLite and on the live PostgreSQL of ``ledger_url``):
datasets A and B (lifetime ε = 2, δ = 0, basic composition), an owner ``olga`` and an
analyst ``ana`` granted ε = 0.5 on A; the owner releases ε = 1.0 on A and ε = 0.1 on B,
``ana`` releases ε = 0.25 on A, and the owner raises A's budget to ε = 2.5 (one
``budget_changes`` row). So A has spent 1.25 of 2.5 (hand sum, basic rule) and every
decision below fits: without an edit each one succeeds (the ``none`` control).

Then one plain SQL ``UPDATE`` (the edit the issue's tester made):

- ``spend_lowered``: the ε of A's spends divided by 100 (column and event alike);
- ``lifetime_raised``: A's lifetime ε set to 100;
- ``releases_swapped``: A's and B's releases swapped (``releases.dataset_id``);
- ``grant_raised``: ana's grant ε set to 100;
- ``role_to_owner``: ana's account role set to ``owner``;
- ``budget_change_edited``: A's budget-change row rewritten (``new_epsilon``, ``reason``).

and the next decision that reads the edited rows (release, grant or raise) is made with a
ledger object opened after the edit (``fresh``; refusing at the open is accepted) and with
the one opened before it (``same``). It must raise ``LedgerIntegrityError`` (README, *The
privacy ledger*: "an emptied, truncated or edited ledger is refused with a clear message")
naming the table and the row or column that disagrees and how to recover
(``planner ledger verify``, a backup), and nothing may be written: every table's row count
and the journal's length are what they were before the call. ``verify_ledger`` keeps
flagging each edit (it does today).

Today every decision succeeds on the edited rows: the open check compares the journal's
chain and row counts only (``Ledger._chain_problems``), never the values a decision reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from planner.core.errors import LedgerIntegrityError, PermissionDenied
from planner.ledger import Ledger, verify_ledger
from planner.ledger.accounts import Principal, Role

pytestmark = pytest.mark.fault  # each case injects one edit (run summary)


def pure(eps: float) -> Any:
    """A pure-DP spend of ``eps``. The ONE import outside planner.ledger/errors/accounts/cli
    (re-point it when the modules move): planner.privacy.accounting.Spend, planner.privacy.events.PureEvent."""
    from planner.privacy.accounting import Spend
    from planner.privacy.events import PureEvent

    return Spend(event=PureEvent(eps), epsilon=eps, delta=0.0)


PW = "correct horse battery staple"
OLGA = Principal("user:olga", Role.OWNER, "olga")
ANA = Principal("user:ana", Role.ANALYST, "ana")
TABLES = ("datasets", "dataset_versions", "budget_changes", "releases", "spends", "answers",
          "accounts", "grants", "journal")


@dataclass
class World:
    url: str
    a: str  # dataset A's key
    b: str
    a_id: int
    b_id: int
    ledger: Ledger  # opened before the edit (the "same" object)


def _sql(url: str, statement: str, **params: Any) -> None:
    eng = create_engine(url)
    try:
        with eng.begin() as conn:
            conn.execute(text(statement), params)
    finally:
        eng.dispose()


def _counts(url: str) -> dict[str, int]:
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in TABLES}
    finally:
        eng.dispose()


def _dataset_id(url: str, key: str) -> int:
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            return int(conn.execute(text("SELECT id FROM datasets WHERE fingerprint = :k"), {"k": key}).scalar_one())
    finally:
        eng.dispose()


@pytest.fixture
def world(ledger_url: str) -> Iterator[World]:
    led = Ledger(ledger_url)
    a = led.register_dataset("digest-a", "survey-a", 2.0, 0.0, "basic")
    b = led.register_dataset("digest-b", "survey-b", 2.0, 0.0, "basic")
    led.create_account("olga", PW, "owner")  # the first account: made by the local owner
    led.create_account("ana", PW, "analyst", actor=OLGA)
    led.grant(a.fingerprint, "ana", "analyst", epsilon=0.5, actor=OLGA)
    led.release(a.fingerprint, "a-owner-1", "s", [("q", pure(1.0))], lambda: {"q": 1}, actor=OLGA)
    led.release(a.fingerprint, "a-ana-1", "s", [("q", pure(0.25))], lambda: {"q": 2}, actor=ANA)
    led.release(b.fingerprint, "b-owner-1", "s", [("q", pure(0.1))], lambda: {"q": 3}, actor=OLGA)
    led.raise_budget(a.fingerprint, 2.5, 0.0, reason="steering group, 2026-11", actor=OLGA)
    w = World(ledger_url, a.fingerprint, b.fingerprint, _dataset_id(ledger_url, a.fingerprint),
              _dataset_id(ledger_url, b.fingerprint), led)
    yield w
    led.close()


# ------------------------------------------------------------------ the edits


def _lower_spends(w: World) -> None:
    eng = create_engine(w.url)
    try:
        with eng.begin() as conn:
            rows = conn.execute(text(
                "SELECT id, epsilon, event_json FROM spends WHERE release_id IN "
                "(SELECT id FROM releases WHERE dataset_id = :a)"), {"a": w.a_id}).all()
            assert rows
            for sid, eps, ev in rows:
                event = json.loads(ev)
                event["epsilon"] = float(event["epsilon"]) / 100
                conn.execute(text("UPDATE spends SET epsilon = :e, event_json = :j WHERE id = :i"),
                             {"e": float(eps) / 100, "j": json.dumps(event, sort_keys=True), "i": sid})
    finally:
        eng.dispose()


EDITS: dict[str, Callable[[World], None]] = {
    "none": lambda w: None,
    "spend_lowered": _lower_spends,
    "lifetime_raised": lambda w: _sql(w.url, "UPDATE datasets SET epsilon = 100.0 WHERE id = :a", a=w.a_id),
    "releases_swapped": lambda w: _sql(
        w.url, "UPDATE releases SET dataset_id = CASE WHEN dataset_id = :a THEN :b ELSE :a END "
               "WHERE dataset_id IN (:a, :b)", a=w.a_id, b=w.b_id),
    "grant_raised": lambda w: _sql(
        w.url, "UPDATE grants SET epsilon = 100.0 WHERE subject = 'user:ana' AND revoked_at IS NULL"),
    "role_to_owner": lambda w: _sql(w.url, "UPDATE accounts SET role = 'owner' WHERE username = 'ana'"),
    "budget_change_edited": lambda w: _sql(
        w.url, "UPDATE budget_changes SET new_epsilon = 100.0, reason = 'board decision' WHERE dataset_id = :a",
        a=w.a_id),
}

#: what the refusal must name: (the table, the column(s) edited)
NAMES: dict[str, tuple[str, str]] = {
    "spend_lowered": (r"spend", r"epsilon|event"),
    "lifetime_raised": (r"dataset", r"epsilon"),
    "releases_swapped": (r"release", r"dataset_id|dataset"),
    "grant_raised": (r"grant", r"epsilon"),
    "role_to_owner": (r"account", r"role"),
    "budget_change_edited": (r"budget.?change", r"new_epsilon|reason"),
}

# ------------------------------------------------------------------ the decisions


def _release_owner(led: Ledger, w: World) -> Any:
    return led.release(w.a, "a-owner-2", "s", [("q", pure(0.25))], lambda: {"q": 4}, actor=OLGA)


def _release_ana(led: Ledger, w: World) -> Any:
    return led.release(w.a, "a-ana-2", "s", [("q", pure(0.1))], lambda: {"q": 5}, actor=ANA)


def _grant_owner(led: Ledger, w: World) -> Any:
    return led.grant(w.a, "ana", "analyst", epsilon=0.75, actor=OLGA)


def _raise_owner(led: Ledger, w: World) -> Any:
    # above the edited ε = 100 too, so that today the raise goes through on the edited row
    return led.raise_budget(w.a, 200.0, 0.0, reason="second steering group", actor=OLGA)


def _raise_ana(led: Ledger, w: World) -> Any:
    return led.raise_budget(w.a, 200.0, 0.0, reason="I decided", actor=ANA)


def _grant_ana(led: Ledger, w: World) -> Any:
    return led.grant(w.a, "vic", "viewer", actor=ANA)


DECISIONS: dict[str, Callable[[Ledger, World], Any]] = {
    "release_by_owner": _release_owner, "release_by_analyst": _release_ana,
    "grant_by_owner": _grant_owner, "raise_by_owner": _raise_owner,
    "raise_by_analyst": _raise_ana, "grant_by_analyst": _grant_ana,
}

#: each edit with the decisions that read the edited rows
CASES: list[tuple[str, str]] = [
    ("spend_lowered", "release_by_owner"), ("spend_lowered", "release_by_analyst"),
    ("lifetime_raised", "release_by_owner"), ("lifetime_raised", "grant_by_owner"),
    ("lifetime_raised", "raise_by_owner"),
    ("releases_swapped", "release_by_owner"),
    ("grant_raised", "release_by_analyst"), ("grant_raised", "grant_by_owner"),
    ("role_to_owner", "release_by_analyst"), ("role_to_owner", "raise_by_analyst"),
    ("role_to_owner", "grant_by_analyst"),
    ("budget_change_edited", "raise_by_owner"), ("budget_change_edited", "release_by_owner"),
]


def _decide(w: World, which: str, decision: str) -> Any:
    if which == "same":
        return DECISIONS[decision](w.ledger, w)
    led = Ledger(w.url)  # a refusal here, at the open, is a refusal too
    try:
        return DECISIONS[decision](led, w)
    finally:
        led.close()


@pytest.mark.fault(0)  # not a fault: the control
@pytest.mark.parametrize("which", ["fresh", "same"])
@pytest.mark.parametrize("decision", ["release_by_owner", "release_by_analyst", "grant_by_owner",
                                      "raise_by_owner", "raise_by_analyst", "grant_by_analyst"])
def test_without_an_edit_the_decision_is_taken(world: World, decision: str, which: str) -> None:
    """The control: on the untouched ledger each decision does what it always did (the
    analyst's raise and grant are refused for their role, not for integrity)."""
    assert verify_ledger(world.url).ok
    if decision in ("raise_by_analyst", "grant_by_analyst"):
        with pytest.raises(PermissionDenied, match="only an owner"):
            _decide(world, which, decision)
        return
    before = _counts(world.url)
    _decide(world, which, decision)
    assert _counts(world.url)["journal"] > before["journal"]  # the decision was recorded


@pytest.mark.parametrize("which", ["fresh", "same"])
@pytest.mark.parametrize(("edit", "decision"), CASES)
def test_an_edited_row_is_refused_at_the_decision(world: World, edit: str, decision: str, which: str) -> None:
    EDITS[edit](world)
    before = _counts(world.url)
    table, column = NAMES[edit]
    # verify flags it (it does today)
    problems = verify_ledger(world.url).problems
    assert any(re.search(table, p) for p in problems), problems

    with pytest.raises(LedgerIntegrityError) as info:
        _decide(world, which, decision)
    msg = str(info.value)
    assert re.search(table, msg, re.I), f"the refusal does not name the table ({table}): {msg}"
    assert re.search(column, msg) or re.search(r"\brow\b|\bid\b", msg), \
        f"the refusal names neither the row nor the column ({column}): {msg}"
    assert "planner ledger verify" in msg and re.search(r"backup|restore", msg, re.I), msg
    assert _counts(world.url) == before  # nothing spent, granted or raised; nothing journaled
