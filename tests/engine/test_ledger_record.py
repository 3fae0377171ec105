"""The record of the journal: what the budget says comes from it, it catches up with other
processes incrementally, a rewritten journal entry is refused, and reading the budget is
flat in the history.

Each edit below is a plain SQL ``UPDATE`` with the journal left alone (what someone with
write access to the database, but not the server secret, can do). The matrix of every edit
against every decision that reads it is ``test_issue27_tamper_at_decision.py``. Every case
here runs on SQLite and on the live PostgreSQL of the test command where it takes
``ledger_url``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text

from planner.core.errors import LedgerIntegrityError
from planner.ledger import Ledger
from planner.ledger.accounts import Role
from planner.privacy.accounting import Spend, total_epsilon
from planner.privacy.events import GaussianEvent, LaplaceEvent, PureEvent

PW = "correct horse battery staple"


def pure(eps: float) -> Spend:
    return Spend(PureEvent(eps), eps, 0.0)


def _sql(url: str, *statements: str) -> None:
    """Edit the database directly, as a person with write access could."""
    eng = create_engine(url)
    try:
        with eng.begin() as conn:
            for s in statements:
                conn.execute(text(s))
    finally:
        eng.dispose()


@pytest.fixture
def org(ledger_url: str) -> dict[str, Any]:
    """An owner and an analyst (granted ε 0.5) on a dataset of lifetime ε 1, with one
    release of ε 0.3 by the owner."""
    led = Ledger(ledger_url)
    ds = led.register_dataset("digest-a", "a", 1.0, 0.0, "basic")
    other = led.register_dataset("digest-b", "b", 1.0, 0.0, "basic")
    led.create_account("olga", PW, "owner")
    owner = led.authenticate("olga", PW)
    led.create_account("ana", PW, "analyst", actor=owner)
    ana = led.authenticate("ana", PW)
    led.grant(ds.fingerprint, "ana", "analyst", epsilon=0.5, actor=owner)
    led.release(ds.fingerprint, "plan-1", "s", [("q", pure(0.3))], lambda: {"q": 1}, actor=owner)
    led.release(other.fingerprint, "plan-1", "s", [("q", pure(0.9))], lambda: {"q": 2}, actor=owner)
    return {"url": ledger_url, "led": led, "ds": ds, "other": other, "owner": owner, "ana": ana}


def test_record_edits_do_not_change_what_the_budget_says(org: dict[str, Any]) -> None:
    _sql(org["url"], "UPDATE spends SET epsilon = 0.0001", "UPDATE datasets SET epsilon = 1000")
    st = Ledger(org["url"]).status(org["ds"].fingerprint, actor=org["owner"])
    # by hand: lifetime 1, one release of 0.3 under basic composition
    assert (st.epsilon_total, st.epsilon_spent, st.epsilon_remaining) == (1.0, pytest.approx(0.3), pytest.approx(0.7))


def test_record_the_owner_role_edit_gives_no_owner_power(org: dict[str, Any]) -> None:
    _sql(org["url"], "UPDATE accounts SET role = 'owner' WHERE username = 'ana'")
    led = Ledger(org["url"])
    with pytest.raises(LedgerIntegrityError, match="table accounts"):
        led.create_account("mallory", PW, "owner", actor=org["ana"])
    assert [a.username for a in Ledger(org["url"]).accounts(actor=org["owner"])] == ["olga", "ana"]


def test_record_catches_up_with_another_process(ledger_url: str) -> None:
    """Two Ledger objects (as two processes): what one records, the other's record reads
    next, with no re-read of the history."""
    a, b = Ledger(ledger_url), Ledger(ledger_url)
    ds = a.register_dataset("digest", "x", 1.0, 0.0, "basic")
    assert b.status(ds.fingerprint).epsilon_spent == 0.0
    a.release(ds.fingerprint, "p1", "s", [("q", pure(0.25))], lambda: {"q": 1})
    assert b.status(ds.fingerprint).epsilon_spent == pytest.approx(0.25)
    b.release(ds.fingerprint, "p2", "s", [("q", pure(0.5))], lambda: {"q": 2})
    assert a.status(ds.fingerprint).epsilon_spent == pytest.approx(0.75)


def test_record_a_journal_entry_rewritten_after_open_is_refused(ledger_url: str) -> None:
    led = Ledger(ledger_url)
    ds = led.register_dataset("digest", "x", 1.0, 0.0, "basic")
    led.release(ds.fingerprint, "p1", "s", [("q", pure(0.25))], lambda: {"q": 1})
    other = Ledger(ledger_url)
    other.release(ds.fingerprint, "p2", "s", [("q", pure(0.25))], lambda: {"q": 2})
    # the newest entry (p2's answers) is rewritten without the secret: its MAC no longer chains
    _sql(ledger_url, "UPDATE journal SET body = replace(body, '\"done\"', '\"pending\"') "
                     "WHERE seq = (SELECT max(seq) FROM journal)")
    with pytest.raises(LedgerIntegrityError, match="does not follow entry"):
        led.status(ds.fingerprint)


def test_record_status_reads_a_constant_number_of_rows(tmp_path: Path) -> None:
    """Flat in history: after 60 releases, a status reads as many statements as after 1
    (the record composed each spend once, when it was recorded)."""
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    ds = led.register_dataset("digest", "x", 100.0, 1e-6, "rdp")
    gau = GaussianEvent(50.0)

    def count_statements() -> int:
        seen: list[str] = []

        def note(conn: Any, cursor: Any, statement: str, *a: Any) -> None:
            seen.append(statement)

        event.listen(led.engine, "before_cursor_execute", note)
        try:
            led.status(ds.fingerprint)
        finally:
            event.remove(led.engine, "before_cursor_execute", note)
        return len(seen)

    from planner.privacy.accounting import standalone_epsilon

    def one(i: int) -> None:
        led.release(ds.fingerprint, f"p{i}", "s",
                    [("g", Spend(gau, standalone_epsilon(gau, 1e-9), 1e-9)), ("l", Spend(LaplaceEvent(100.0), 0.01))],
                    lambda: {"g": 1, "l": 2})

    one(0)
    first = count_statements()
    for i in range(1, 60):
        one(i)
    assert count_statements() == first
    every = [sp.spend for rec in led.releases(ds.fingerprint) for sp in rec.spends]
    assert led.status(ds.fingerprint).epsilon_spent == pytest.approx(total_epsilon(every, "rdp", 1e-6), rel=1e-12)


def test_record_an_answer_edited_in_the_table_is_not_shown(ledger_url: str) -> None:
    led = Ledger(ledger_url)
    ds = led.register_dataset("digest", "x", 1.0, 0.0, "basic")
    led.release(ds.fingerprint, "p1", "s", [("q", pure(0.25))], lambda: {"q": 41.7})
    _sql(ledger_url, "UPDATE answers SET payload_json = '12.5'")
    with pytest.raises(LedgerIntegrityError, match="stored answer 1 of release 1 is not the one journaled"):
        Ledger(ledger_url).releases(ds.fingerprint)


def test_record_role_is_the_records_not_the_principals(org: dict[str, Any]) -> None:
    """A principal object claiming another role is judged by the ledger's record."""
    from planner.core.errors import PermissionDenied
    from planner.ledger.accounts import Principal

    forged = Principal("user:ana", Role.OWNER, "ana", "password")
    with pytest.raises(PermissionDenied):
        org["led"].raise_budget(org["ds"].fingerprint, 2.0, 0.0, reason="r", actor=forged)
