"""The record of the journal: every decision is taken on it, and a decision whose table rows
were edited in place is refused; reading the budget is flat in the history.

Each edit below is a plain SQL ``UPDATE`` with the journal left alone (what someone with
write access to the database, but not the server secret, can do). Before this design, the
next release or grant went ahead on the edited row (issue 27); ``verify`` flagged it only
on request. Every case runs on SQLite and on the live PostgreSQL of the test command.
"""

from __future__ import annotations

from collections.abc import Callable
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


EDITS: dict[str, tuple[str, str]] = {
    # name: (SQL, the table the refusal must name)
    "spend lowered": ("UPDATE spends SET epsilon = 0.01 WHERE id = 1", "spends"),
    "lifetime raised": ("UPDATE datasets SET epsilon = 100 WHERE id = 1", "datasets"),
    "releases swapped": ("UPDATE releases SET dataset_id = 3 - dataset_id", "releases"),
    "grant raised": ("UPDATE grants SET epsilon = 50", "grants"),
    "role to owner": ("UPDATE accounts SET role = 'owner' WHERE username = 'ana'", "accounts"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("fresh", [True, False], ids=["new-ledger-object", "open-ledger-object"])
def test_record_an_edited_row_refuses_the_decision(org: dict[str, Any], edit: str, fresh: bool) -> None:
    sql, table = EDITS[edit]
    led: Ledger = org["led"]
    before = led.status(org["ds"].fingerprint, actor=org["owner"])
    _sql(org["url"], sql)
    if fresh:
        led = Ledger(org["url"])
    decisions: list[Callable[[], Any]] = [
        lambda: led.release(org["ds"].fingerprint, "plan-2", "s", [("q", pure(0.1))], lambda: {"q": 3},
                            actor=org["ana"]),
        lambda: led.release(org["ds"].fingerprint, "plan-3", "s", [("q", pure(0.1))], lambda: {"q": 3},
                            actor=org["owner"]),
        lambda: led.grant(org["ds"].fingerprint, "ana", "analyst", epsilon=0.6, actor=org["owner"]),
        lambda: led.raise_budget(org["ds"].fingerprint, 2.0, 0.0, reason="r", actor=org["owner"]),
    ]
    refused = 0
    for decide in decisions:
        try:
            decide()
        except LedgerIntegrityError as exc:
            msg = str(exc)
            assert f"table {table}" in msg and "disagrees with its own journal" in msg, msg
            assert "planner ledger verify" in msg and "backup" in msg
            refused += 1
    # the release and every decision reading the edited row are refused (the role edit is
    # read by every decision of ana's; the lifetime and swap by every decision on the dataset)
    assert refused >= 1
    assert led.status(org["ds"].fingerprint, actor=org["owner"]) == before  # the journal's truth
    assert not Ledger(org["url"]).verify().ok


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
    with pytest.raises(LedgerIntegrityError, match="differs from the journal in column.s. payload_sha256"):
        Ledger(ledger_url).releases(ds.fingerprint)


def test_record_role_is_the_records_not_the_principals(org: dict[str, Any]) -> None:
    """A principal object claiming another role is judged by the ledger's record."""
    from planner.core.errors import PermissionDenied
    from planner.ledger.accounts import Principal

    forged = Principal("user:ana", Role.OWNER, "ana", "password")
    with pytest.raises(PermissionDenied):
        org["led"].raise_budget(org["ds"].fingerprint, 2.0, 0.0, reason="r", actor=forged)
