"""Bringing a ledger written by an earlier version of the planner to the current format.

Format 1 (no accounts, no journal, bare file hashes as keys) becomes the current format in
one transaction on the first open (:func:`migrate_v1`). Formats 2 and 3 lack only nullable
columns and tables that a current ledger adds (the datasets' secret-sample columns; the
record of failed sign-ins): :func:`migrate_columns` adds them after the open's integrity
check passed, in one write transaction, and records the new format in the head.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import inspect
from sqlmodel import col, select

from planner.core.errors import LedgerError
from planner.core.keys import keyed_fingerprint, random_hex
from planner.ledger.accounts import LOCAL_OWNER
from planner.ledger.checkpoint import TABLE as CHECKPOINTS
from planner.ledger.integrity import chain_key
from planner.ledger.store import BEGIN_OPTION, FORMAT_VERSION, Store, utcnow
from planner.ledger.tables import (
    LEDGER_METADATA,
    OPTIONAL,
    TRACKED,
    V1_TABLES,
    AnswerRow,
    BudgetChangeRow,
    DatasetRow,
    HeadRow,
    ReleaseRow,
    ReleaseStatus,
    SpendRow,
    VersionRow,
)

__all__ = ["migrate_columns", "migrate_v1", "missing_columns", "new_dataset_key"]

#: How long a release pending at a format-1 migration keeps its lease.
_V1_LEASE_SECONDS = 30.0


def new_dataset_key() -> str:
    """A dataset's public key: ``ds-`` and 20 random hex digits (nothing about its data)."""
    return "ds-" + random_hex(10)


def missing_columns(store: Store, conn: Any) -> dict[str, list[Any]]:
    """The nullable columns added since format 2 that a table of this ledger lacks."""
    insp = inspect(conn)
    have_tables = set(insp.get_table_names())
    out: dict[str, list[Any]] = {}
    for table, columns in OPTIONAL.items():
        if table not in have_tables:
            continue
        have = {c["name"] for c in insp.get_columns(table)}
        lack = [c for c in LEDGER_METADATA.tables[table].columns if c.name in columns and c.name not in have]
        if lack:
            out[table] = lack
    return out


def migrate_columns(store: Store) -> None:
    """Bring a format-2 or format-3 ledger to the current format: add the datasets' nullable
    sampling columns (``ALTER TABLE … ADD COLUMN``) and any missing table, and record the
    format in the head, in one write transaction. Nothing else changes: existing datasets
    are not samples (NULL; NULL optional columns are not journaled, so every journal entry
    still replays to the tables) and a new table starts empty. Concurrent openers serialise
    on the write lock and find the change made.
    """
    with store.engine.connect() as probe:
        missing = missing_columns(store, probe)
        tables = set(inspect(probe).get_table_names())
        probe.rollback()
    with store.session(write=False) as s:
        head = s.get(HeadRow, 1)
        current = FORMAT_VERSION if head is None else head.format_version
    lacking_tables = [t for t in (*TRACKED, CHECKPOINTS) if t not in tables]
    if not missing and not lacking_tables and current >= FORMAT_VERSION:
        return
    try:
        with store.engine.connect() as conn:
            if store.is_sqlite:
                conn = conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
            with conn.begin():
                if not store.is_sqlite:  # SQLite: BEGIN IMMEDIATE already holds the write lock
                    conn.exec_driver_sql("SELECT id FROM ledger_head WHERE id = 1 FOR UPDATE")
                LEDGER_METADATA.create_all(conn)  # only the tables it lacks
                for table, columns in missing_columns(store, conn).items():
                    for column in columns:
                        ddl = column.type.compile(dialect=store.engine.dialect)
                        conn.exec_driver_sql(f'ALTER TABLE {table} ADD COLUMN "{column.name}" {ddl}')
                conn.exec_driver_sql(
                    f"UPDATE ledger_head SET format_version = {int(FORMAT_VERSION)} "
                    f"WHERE id = 1 AND format_version < {int(FORMAT_VERSION)}"
                )
    except sa_exc.OperationalError as exc:
        raise LedgerError(
            f"the ledger at {store.url} needs new columns and tables (format {FORMAT_VERSION}) "
            f"but could not be changed ({type(exc.orig).__name__}: busy or read-only). Nothing "
            "was changed; open it once with write access."
        ) from exc


def migrate_v1(store: Store, names: set[str]) -> None:
    """Bring a format-1 ledger (no accounts, no journal, bare file hashes as keys) to the
    current format in one transaction: new columns and tables, each dataset's bare hash
    becomes a keyed version and the dataset gets a random public key, every existing row is
    journaled (the chain starts at the migration), releases are attributed to
    ``local:owner``."""
    store.create_missing_tables()  # new tables only; existing ones are left as they are
    insp = inspect(store.engine)
    with store.engine.connect() as conn:
        if store.is_sqlite:
            conn = conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
        with conn.begin():
            for table in ("datasets", "releases", "budget_changes"):
                if table not in names:
                    continue
                have = {c["name"] for c in insp.get_columns(table)}
                for column in LEDGER_METADATA.tables[table].columns:
                    if column.name not in have:
                        ddl = column.type.compile(dialect=store.engine.dialect)
                        conn.exec_driver_sql(f'ALTER TABLE {table} ADD COLUMN "{column.name}" {ddl}')
    with store.session(write=True) as s:
        if s.get(HeadRow, 1) is not None:
            return  # another process migrated first
        head = store.new_head()
        s.add(head)
        s.flush()
        store.ledger_id = head.ledger_id
        store.chain_key = chain_key(store.secret, head.ledger_id)
        rows: list[Any] = []
        now = utcnow()
        for ds in s.exec(select(DatasetRow).order_by(col(DatasetRow.id))).all():
            bare = ds.fingerprint
            ds.fingerprint = new_dataset_key()
            ds.registered_by = ds.registered_by or LOCAL_OWNER.subject
            s.add(ds)
            s.flush()
            assert ds.id is not None
            ver = VersionRow(dataset_id=ds.id, fingerprint=keyed_fingerprint(bare, secret=store.secret),
                             added_by=LOCAL_OWNER.subject, created_at=ds.created_at)
            s.add(ver)
            rows.extend([ds, ver])
        for model in (BudgetChangeRow, ReleaseRow, SpendRow, AnswerRow):
            for r in s.exec(select(model)).all():
                if isinstance(r, ReleaseRow):
                    r.actor = r.actor or LOCAL_OWNER.subject
                    if r.status == ReleaseStatus.PENDING.value:
                        r.lease_expires_at = now + timedelta(seconds=_V1_LEASE_SECONDS)
                    s.add(r)
                rows.append(r)
        store.commit(s, head, "migrate.v1", None, rows)
    if store.is_sqlite:
        with store.engine.connect() as conn:
            # the WAL still holds the pages as they were before the migration
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def open_store(store: Store) -> list[str]:
    """The integrity gate run on every open; creates or migrates when appropriate, and
    builds the verified record. Returns the problems found (empty when usable)."""
    problems: list[str] = []
    marker = store.read_marker(problems)
    if problems:
        return problems
    path = store.path
    if path is not None and not path.exists():
        if marker is not None:
            return [store.forgotten(marker, "missing")]
        store.create_sqlite_file(path)
    problems = store.sqlite_file_problems()
    if problems:
        return problems
    names = store.table_names()
    if path is not None and names:
        problems.extend(store.quick_check())
        if problems:
            return problems
    if "ledger_head" not in names:
        if marker is not None:
            return [store.forgotten(marker, "empty" if not names else "missing its journal")]
        if names & V1_TABLES:
            migrate_v1(store, names)
        else:
            store.create_in_place()
    problems = store.check_head(marker)
    if not problems:
        migrate_columns(store)
    return problems
