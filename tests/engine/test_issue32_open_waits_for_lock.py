"""Issue 32: opening a ledger waits for a lock another connection holds; it never fails at once.

The cause of the rare "cannot open the ledger … OperationalError" in
``test_issue32_new_ledger_race.py``: a new ledger file is built in rollback-journal mode and
linked into place as it is, and every connection the ledger makes runs ``PRAGMA journal_mode =
WAL`` first. Switching a rollback-mode file to WAL takes the exclusive lock from inside the read
transaction that read the file's header, and SQLite does not call the busy handler for that
upgrade: it returns SQLITE_BUSY ("database is locked") at once, whatever the busy timeout, so
that two connections each holding a read lock and wanting the other's cannot deadlock (SQLite's
documentation of ``sqlite3_busy_handler``: "If SQLite determines that invoking the busy handler
could result in a deadlock, it will go ahead and return SQLITE_BUSY to the application"). When
several openers meet the new file at once, all but the one switching it failed.

Here that lock is held deterministically: a plain ``sqlite3`` connection takes the write
(RESERVED) lock with ``BEGIN IMMEDIATE`` on a new ledger file exactly as a creator links it into
place (``Store.create_sqlite_file``), as the opener that is switching the file to WAL holds it on
the way to its exclusive lock, while a ``Ledger`` opens in another thread. Before the fix the
opener failed at once; now it waits while the lock is held (up to the ledger's busy timeout,
:data:`planner.ledger.store.BUSY_TIMEOUT_SECONDS`) and then opens. A lock held past that bound
is reported as busy (:class:`LedgerError`, "try again"), never as a damaged ledger; a file that
is not a database is still refused at once as not a readable database.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import planner.ledger.store as store_module
from planner.core.errors import LedgerError, LedgerIntegrityError
from planner.ledger import Ledger
from planner.ledger.store import Store

#: how long the test's connection holds the lock: long enough that an opener which did not wait
#: has certainly finished (it failed in well under a millisecond, measured), short for the suite
HOLD = 0.5
#: SQLite's file format: header bytes 18 and 19 (write and read version) are 1 for a
#: rollback-journal database and 2 for WAL (SQLite's documentation, "Database File Format" §1.3)
ROLLBACK, WAL = 1, 2


def _new_ledger_file(tmp_path: Path) -> tuple[str, Path]:
    """A new ledger file exactly as a creator links it into place (nobody has opened it yet)."""
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    store = Store(url)
    try:
        store.create_sqlite_file(path)
    finally:
        store.close()
    return url, path


def _version(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:20]
    return head[18], head[19]


def _open_in_thread(url: str) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            led = Ledger(url)
            out["ok"] = led.verify().ok
            out["journal_mode"] = led.engine.connect().exec_driver_sql("PRAGMA journal_mode").scalar()
            led.close()
        except BaseException as exc:  # reported to the test, never lost in the thread
            out["error"] = exc
        out["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the RESERVED lock: what a connection switching to WAL holds first
    return holder


def test_an_opener_waits_for_the_lock_on_a_new_ledger_file_and_opens(tmp_path: Path) -> None:
    url, path = _new_ledger_file(tmp_path)
    assert _version(path) == (ROLLBACK, ROLLBACK)  # linked into place in rollback mode
    holder = _hold_write_lock(path)
    try:
        thread, out = _open_in_thread(url)
        time.sleep(HOLD)
        # before the fix the opener had already failed ("database is locked" at once)
        assert "error" not in out, out["error"]
        assert thread.is_alive(), out  # it cannot have opened: the lock it needs is held
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    thread.join(timeout=store_module.BUSY_TIMEOUT_SECONDS)
    assert not thread.is_alive()
    assert "error" not in out, out["error"]
    assert out["ok"] is True and out["journal_mode"] == "wal"
    assert out["seconds"] >= HOLD  # it waited for the lock (a lower bound, not a timing claim)
    assert _version(path) == (WAL, WAL)


def test_a_lock_held_past_the_busy_timeout_is_busy_not_damage(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    url, path = _new_ledger_file(tmp_path)
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_SECONDS", HOLD / 5)
    holder = _hold_write_lock(path)
    try:
        with pytest.raises(LedgerError) as info:
            Ledger(url)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not isinstance(info.value, LedgerIntegrityError)  # busy, not damaged
    assert "busy" in str(info.value) and "try again" in str(info.value)
    assert "SQLITE_BUSY" in str(info.value)  # SQLite's own code is named, for a diagnosis
    # nothing was changed, and the file opens once the lock is gone
    assert _version(path) == (ROLLBACK, ROLLBACK)
    led = Ledger(url)
    try:
        assert led.verify().ok
    finally:
        led.close()


def test_a_file_that_is_not_a_database_is_still_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    path.write_bytes(b"this is not a database, just text\n" * 200)
    with pytest.raises(LedgerIntegrityError, match=r"not a readable database.*SQLITE_NOTADB") as info:
        Ledger(f"sqlite:///{path}")
    cause = info.value.__cause__
    orig = getattr(cause, "orig", None)
    # refused for what it is (SQLITE_NOTADB), not after waiting as if it were locked
    assert getattr(orig, "sqlite_errorname", None) == "SQLITE_NOTADB", repr(cause)


def test_a_transient_lock_in_the_quick_check_is_busy_not_damage(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The open's ``PRAGMA quick_check`` on a connection that meets a lock held past the busy
    timeout said "it is damaged. Restore it from a backup" (SQLite's busy error is an
    ``OperationalError``, a kind of ``DatabaseError``); it is a busy ledger, not a damaged one."""
    url, path = _new_ledger_file(tmp_path)
    Ledger(url).close()  # now in WAL mode, and no connection is open
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_SECONDS", HOLD / 5)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")  # WAL without shared memory: an exclusive file lock
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE ledger_head SET seq = seq WHERE id = 1")
    store = Store(url)
    try:
        try:
            with pytest.raises(LedgerError) as info:
                store.quick_check()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert not isinstance(info.value, LedgerIntegrityError)
        assert "busy" in str(info.value)
        assert store.quick_check() == []  # the same file, the lock gone: sound
    finally:
        store.close()
