"""Checking everything a ledger holds (``planner ledger verify``), without refusing to open it.

Run on request, and on a ledger that failed to open: the SQLite file and its own integrity
check, the ledger's tables, every stored value, the head and the server secret, the
journal's MAC chain, the tables against the journal's replay (every row, every column), and
this machine's marker. Each problem is a line of the report naming the table, row and
column, never a value. A ledger-wide count of what was checked is for owners only
(:meth:`planner.ledger.Ledger.verify` strips it for anyone else).

Decisions do not wait for this: each one proves the rows it reads against the journal
(:meth:`planner.ledger.store.Store.prove`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlmodel import Session, col, select

from planner.core.errors import LedgerError, LedgerIntegrityError, PlannerError
from planner.core.keys import secret_check, secret_source
from planner.ledger.integrity import (
    GENESIS_MAC,
    Marker,
    MarkerState,
    VerifyReport,
    canonical_value,
    chain_key,
    compare,
    entry_mac,
    replay,
)
from planner.ledger.migrate import missing_columns
from planner.ledger.records import answer_value, spend_record, status_value
from planner.ledger.store import Store, default_ledger_url, home, url_identity
from planner.ledger.tables import (
    LEDGER_METADATA,
    MODELS,
    OPTIONAL,
    TRACKED,
    V1_TABLES,
    VOLATILE,
    AnswerRow,
    HeadRow,
    JournalRow,
    ReleaseRow,
    SpendRow,
    row_dict,
)

__all__ = ["run", "verify_ledger"]

#: Tables a ledger of an older format may lack until it is opened once (then created empty).
_NEWER_TABLES = frozenset({"sign_in_failures"})


class _VerifyAborted(Exception):
    """A check found a problem that stops the verification (already in the problem list)."""


def run(store: Store) -> VerifyReport:
    """The checks of :meth:`Ledger.verify` (also run on a ledger that failed to open).

    In order, each stopping the rest when it fails: the SQLite file, the database's own
    integrity and the ledger's tables (:func:`_check_database`), the stored rows and
    their values (:func:`_read_ledger_rows`), the head record and the server secret
    (:func:`_check_head_secret`); then the journal's MAC chain
    (:func:`_check_journal_chain`), the head against the journal's end and the tables
    against the journal's replay (:func:`_check_replay`), and the machine's marker
    (:func:`_check_marker`).
    """
    problems: list[str] = list(store.sqlite_file_problems())
    marker = store.read_marker(problems)
    checked: dict[str, int] = {}
    marker_path = None if store.marker is None else str(store.marker.path)
    marker_seq = None if marker is None else marker.seq

    def report(ledger_id: str | None, entries: int, head_seq: int | None) -> VerifyReport:
        return VerifyReport(store.url, ledger_id, entries, head_seq, marker_path, marker_seq,
                            tuple(problems), dict(checked))

    if problems:
        return report(None, 0, None)
    try:
        _check_database(store, marker, problems)
        head, journal, actual = _read_ledger_rows(store, problems, checked)
    except _VerifyAborted:
        return report(None, 0, None)
    if head is None:
        problems.append("the head record is missing")
        return report(None, len(journal), None)
    checked["journal"] = len(journal)
    if not _check_head_secret(store, head, problems):
        return report(head.ledger_id, len(journal), head.seq)
    bodies = _check_journal_chain(chain_key(store.secret, head.ledger_id), journal, problems)
    if bodies is not None:
        _check_replay(head, journal, bodies, actual, problems)
    if marker is not None:
        _check_marker(marker, head, journal, problems)
    return report(head.ledger_id, len(journal), head.seq)


def _check_database(store: Store, marker: MarkerState | None, problems: list[str]) -> None:
    """The database can be read, passes SQLite's own integrity and foreign-key checks, and
    holds every table of the ledger.

    Raises
    ------
    _VerifyAborted
        After adding the problem, when the rest cannot be checked.
    """
    try:
        names = store.table_names()
    except PlannerError as exc:
        problems.append(str(exc))
        raise _VerifyAborted from None
    if store.is_sqlite and not store.memory and names:
        _check_sqlite_integrity(store, problems)
    missing = [t for t in ("ledger_head", "journal", *TRACKED) if t not in names and t not in _NEWER_TABLES]
    if not names:
        problems.append("there is no ledger here (no tables)" + (
            f", but this machine recorded ledger {marker.ledger_id} with {marker.seq} entries here"
            if marker is not None else ""))
        raise _VerifyAborted
    if missing:
        problems.append(f"tables missing: {', '.join(missing)} (a ledger of format 1 is migrated by "
                        "opening it once)" if "ledger_head" in missing and names >= V1_TABLES
                        else f"tables missing: {', '.join(missing)}")
        raise _VerifyAborted


def _check_sqlite_integrity(store: Store, problems: list[str]) -> None:
    """SQLite's ``PRAGMA integrity_check`` and ``PRAGMA foreign_key_check`` find nothing.

    Raises
    ------
    _VerifyAborted
        When the database cannot even be checked (it is damaged).
    """
    try:
        with store.engine.connect() as conn:
            rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA integrity_check")]
            fks = list(conn.exec_driver_sql("PRAGMA foreign_key_check"))
            conn.rollback()
        if rows != ["ok"]:
            problems.extend(f"SQLite integrity_check: {r}" for r in rows[:20])
        if fks:
            problems.append(f"SQLite foreign_key_check: {len(fks)} row(s) point at missing rows")
    except sa_exc.DatabaseError as exc:
        problems.append(f"the database cannot be checked ({type(exc.orig).__name__}): it is damaged")
        raise _VerifyAborted from None


def _read_ledger_rows(
    store: Store, problems: list[str], checked: dict[str, int]
) -> tuple[HeadRow | None, Sequence[JournalRow], dict[str, dict[Any, dict[str, Any]]]]:
    """The head, the journal and every tracked table's rows (by id, as the journal's replay
    writes them), counting each table's rows in ``checked``; the stored values are checked
    to parse on the way (:func:`_check_stored_values`).

    Raises
    ------
    _VerifyAborted
        When the ledger cannot be read.
    """
    try:
        with store.engine.connect() as probe:
            lacking = missing_columns(store, probe)  # a format-2 ledger not opened since
            absent = _NEWER_TABLES - set(inspect(probe).get_table_names())
            probe.rollback()
        with store.session(write=False) as s:
            head = s.get(HeadRow, 1)
            journal = s.exec(select(JournalRow).order_by(col(JournalRow.seq))).all()
            actual = {table: _table_rows(s, table, model, lacking, checked)
                      for table, model in MODELS.items() if table not in absent}
            _check_stored_values(s, problems)
    except PlannerError as exc:
        problems.append(str(exc))
        raise _VerifyAborted from None
    return head, journal, actual


def _table_rows(
    s: Session, table: str, model: Any, lacking: dict[str, list[Any]], checked: dict[str, int]
) -> dict[Any, dict[str, Any]]:
    """One table's rows by id, as canonical dicts; counted in ``checked``."""
    rows: dict[Any, dict[str, Any]] = {}
    if table in lacking:  # read the columns it has (the lacking ones are NULL)
        cols = [c for c in LEDGER_METADATA.tables[table].columns
                if c not in lacking[table] and c.name not in VOLATILE.get(table, ())]
        raw = s.connection().execute(select(*cols)).mappings().all()
        checked[table] = len(raw)
        for m in raw:
            d = {k: canonical_value(v) for k, v in m.items()
                 if not (k in OPTIONAL.get(table, ()) and v is None)}
            rows[d["id"]] = d
        return rows
    rows_: Sequence[Any] = s.exec(select(model)).all()
    checked[table] = len(rows_)
    for r in rows_:
        _, d = row_dict(r)
        rows[d["id"]] = d
    return rows


def _check_stored_values(s: Session, problems: list[str]) -> None:
    """Stored events, release statuses and answers parse."""
    for sr in s.exec(select(SpendRow)).all():
        try:
            spend_record(row_dict(sr)[1])
        except LedgerIntegrityError as exc:
            problems.append(str(exc).split(":")[0] + ": unreadable")
    for rr in s.exec(select(ReleaseRow)).all():
        try:
            status_value(row_dict(rr)[1])
        except LedgerIntegrityError:
            problems.append(f"release {rr.id} has an unknown status")
    for ar in s.exec(select(AnswerRow)).all():
        try:
            answer_value(row_dict(ar)[1])
        except LedgerIntegrityError:
            problems.append(f"the answer of release {ar.release_id} ({ar.query_id!r}) is not JSON")


def _check_head_secret(store: Store, head: HeadRow, problems: list[str]) -> bool:
    """The ledger was created with this server's secret (else its journal cannot be checked)."""
    if head.secret_check != secret_check(secret=store.secret):
        problems.append(f"the ledger was created with another server secret than the one from "
                        f"{secret_source()}; the journal cannot be checked")
        return False
    return True


def _check_journal_chain(
    key: bytes, journal: Sequence[JournalRow], problems: list[str]
) -> list[dict[str, Any]] | None:
    """The journal's entries are numbered 1, 2, … without gaps, each one's MAC chains to the
    one before (from :data:`GENESIS_MAC`), and each body is a JSON object.

    Returns the bodies in order, or None (after adding the problem) at the first broken
    entry.
    """
    prev = GENESIS_MAC
    bodies: list[dict[str, Any]] = []
    for i, e in enumerate(journal, start=1):
        if e.seq != i:
            problems.append(f"journal entry {i} is missing (next is {e.seq}): entries were deleted")
            return None
        if e.prev != prev or entry_mac(key, e.seq, e.kind, prev, e.body) != e.mac:
            problems.append(f"journal entry {e.seq} ({e.kind}) does not match its chain: it was "
                            "changed, forged or reordered")
            return None
        try:
            body = json.loads(e.body)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            problems.append(f"journal entry {e.seq} is not readable")
            return None
        bodies.append(body)
        prev = e.mac
    return bodies


def _check_replay(
    head: HeadRow,
    journal: Sequence[JournalRow],
    bodies: list[dict[str, Any]],
    actual: dict[str, dict[Any, dict[str, Any]]],
    problems: list[str],
) -> None:
    """The head records the journal's last entry, and replaying the journal gives the
    tracked tables as stored."""
    last = (journal[-1].seq, journal[-1].mac) if journal else (0, GENESIS_MAC)
    if last != (head.seq, head.mac):
        problems.append(f"the head records entry {head.seq} but the journal ends at {last[0]}: "
                        "entries were lost")
    try:
        expected = replay(bodies)
        problems.extend(compare(expected, actual, TRACKED))
    except ValueError as exc:
        problems.append(f"the journal cannot be replayed ({exc})")


def _check_marker(
    marker: MarkerState, head: HeadRow, journal: Sequence[JournalRow], problems: list[str]
) -> None:
    """This machine's marker agrees with the ledger: the same ledger, not truncated or
    rolled back, and the entry it records unchanged."""
    if marker.ledger_id != head.ledger_id:
        problems.append(f"the marker records ledger {marker.ledger_id}, this is {head.ledger_id}: "
                        "the ledger was replaced")
    elif marker.seq > head.seq:
        problems.append(f"the marker records {marker.seq} entries, the ledger has {head.seq}: it "
                        "was truncated or rolled back")
    elif marker.seq > 0:
        at = next((e for e in journal if e.seq == marker.seq), None)
        if at is None or at.mac != marker.mac:
            problems.append(f"journal entry {marker.seq} is not the one the marker records: the "
                            "ledger was rewritten")


def verify_ledger(url: str | None = None) -> VerifyReport:
    """Verify the ledger at ``url`` without refusing to open it (``planner ledger verify``).

    Nothing is created or repaired: a location without a ledger is reported as such.
    """
    raw = default_ledger_url() if url is None else url
    try:
        parsed = make_url(raw)
    except (sa_exc.ArgumentError, ValueError) as exc:
        raise LedgerError("the ledger URL is not a valid SQLAlchemy URL.") from exc
    if parsed.get_backend_name() == "sqlite":
        identity, memory = url_identity(parsed)
        path = Path(parsed.database or "").expanduser()
        if not memory and not path.exists():
            marker = Marker(identity, parsed.render_as_string(hide_password=True), home())
            try:
                state = marker.read()
            except LedgerIntegrityError as exc:
                state = None
                extra = [str(exc)]
            else:
                extra = []
            problems = [f"there is no ledger file at {path}", *extra]
            if state is not None:
                problems[0] += (f", but this machine recorded ledger {state.ledger_id} with "
                                f"{state.seq} entries there: it was deleted")
            return VerifyReport(parsed.render_as_string(hide_password=True), None, 0, None,
                                str(marker.path), None if state is None else state.seq,
                                tuple(problems))
    store = Store(raw)
    try:
        return run(store)
    finally:
        store.close()


