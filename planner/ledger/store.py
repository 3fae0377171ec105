"""Where the ledger lives: the database engine, short sessions, the write transaction that
journals every change, opening (creation, migration, the integrity gate) and the verified
record every decision reads.

Storage
-------
SQLite by default: ``sqlite:///$PLANNER_HOME/ledger.db`` (``~/.privacy-budget-planner``
when ``PLANNER_HOME`` is unset); any SQLAlchemy URL in ``PLANNER_LEDGER_URL`` (or passed to
:class:`planner.ledger.Ledger`) overrides it, e.g. ``postgresql+psycopg://user@host/db``.
SQLite connections use WAL, a 30 s busy timeout, ``synchronous=FULL``, foreign keys and
``BEGIN IMMEDIATE`` for every write transaction (SQLAlchemy's documented pysqlite event
recipe); a new connection's switch to WAL, for which SQLite does not call the busy handler,
is tried again for up to the same busy timeout (:func:`switch_to_wal`). On other databases
every write transaction first locks the one ``ledger_head`` row with ``SELECT … FOR UPDATE``.
Every operation uses its own short :class:`sqlmodel.Session`, so one store may be shared by
Streamlit's threads.

Creating a ledger is atomic for every other opener
--------------------------------------------------
Tables, head record and marker appear together, so an opener never meets a half-made ledger
(and never calls a ledger that is still being created "damaged"):

* **SQLite file**: the new ledger is built complete in a temporary file beside the target
  (tables and head in one transaction, closed cleanly), then linked into place with
  ``os.link``, which fails if the target exists. Exactly one creator wins; every other one
  discards its file and opens the winner's. No process ever connects to the target path
  before it exists, so the target is never an empty file in the making: an empty file
  there was emptied, and is refused.
* **PostgreSQL** (any server database): tables and head are created in one transaction
  holding a transaction-level advisory lock; DDL is transactional, so other openers see
  either nothing (and wait on the lock, then find the ledger made) or all of it.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine, create_engine, event, func, inspect, text
from sqlalchemy import exc as sa_exc
from sqlalchemy import select as sa_select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, col, select

from planner.core.errors import LedgerError, LedgerIntegrityError, PlannerError
from planner.core.keys import secret_check, secret_source, server_secret
from planner.ledger import checkpoint
from planner.ledger.integrity import (
    GENESIS_MAC,
    Marker,
    MarkerState,
    canonical,
    canonical_value,
    chain_key,
    compare,
    entry_mac,
)
from planner.ledger.record import Entry, Record
from planner.ledger.tables import (
    LEDGER_METADATA,
    MODELS,
    OPTIONAL,
    TRACKED,
    VOLATILE,
    HeadRow,
    JournalRow,
    row_dict,
)

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "ENV_HOME",
    "ENV_URL",
    "FORMAT_VERSION",
    "Store",
    "default_ledger_url",
    "home",
    "url_identity",
    "utcnow",
]

#: Environment variable holding any SQLAlchemy URL for the ledger.
ENV_URL: Final = "PLANNER_LEDGER_URL"
#: Environment variable naming the planner's home directory (default ledger location).
ENV_HOME: Final = "PLANNER_HOME"
_DEFAULT_HOME: Final = "~/.privacy-budget-planner"
#: The ledger's storage format (1: before accounts and the journal; 2: before secret
#: samples; 3: before the record of failed sign-ins). Older formats are migrated on open.
FORMAT_VERSION: Final = 4
#: SQLite busy timeout: how long a writer waits for the write lock (and a new connection for
#: the lock its switch to WAL needs: :func:`switch_to_wal`).
BUSY_TIMEOUT_SECONDS: Final = 30.0
#: SQLite's primary result codes for a lock held by another connection (SQLITE_BUSY = 5,
#: SQLITE_LOCKED = 6, SQLite's documentation "Result and Error Codes"); an extended code such as
#: SQLITE_BUSY_RECOVERY keeps its primary code in its low 8 bits.
_LOCK_CODES: Final = frozenset({5, 6})
BEGIN_OPTION: Final = "planner_sqlite_begin"
#: The PostgreSQL advisory lock key taken while a ledger is created ("planner" in ASCII).
_CREATE_LOCK: Final = 0x706C616E6E6572


def home() -> Path:
    return Path(os.environ.get(ENV_HOME, "").strip() or _DEFAULT_HOME).expanduser()


def default_ledger_url() -> str:
    """The ledger URL: ``$PLANNER_LEDGER_URL``, else a SQLite file under the planner home.

    Returns
    -------
    str
        ``$PLANNER_LEDGER_URL`` if set and non-empty; otherwise
        ``sqlite:///<home>/ledger.db`` with ``<home>`` = ``$PLANNER_HOME`` or
        ``~/.privacy-budget-planner``.

    Examples
    --------
    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"PLANNER_LEDGER_URL": "sqlite:////tmp/x.db"}):
    ...     default_ledger_url()
    'sqlite:////tmp/x.db'
    """
    url = os.environ.get(ENV_URL, "").strip()
    if url:
        return url
    return f"sqlite:///{home() / 'ledger.db'}"


def utcnow() -> datetime:
    return datetime.now(UTC)


def url_identity(url: URL) -> tuple[str, bool]:
    """The marker identity of a ledger URL, and whether it is an in-memory database."""
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:") \
                or "mode=memory" in str(url.query):
            return "", True
        return "sqlite:" + str(Path(database).expanduser().resolve()), False
    return url.set(password=None).render_as_string(hide_password=True), False


def parse_url(raw: Any) -> URL:
    if not isinstance(raw, str):
        raise LedgerError(f"the ledger URL must be a string; got {type(raw).__name__}.")
    try:
        return make_url(raw)
    except (sa_exc.ArgumentError, ValueError) as exc:
        raise LedgerError(
            "the ledger URL is not a valid SQLAlchemy URL. Set "
            f"{ENV_URL} to e.g. sqlite:///path/to/ledger.db or "
            "postgresql+psycopg://user@host/dbname."
        ) from exc


def is_lock_error(exc: BaseException) -> bool:
    """Whether ``exc`` (a ``sqlite3`` error, or SQLAlchemy's wrapper of one) is SQLite's
    "database is locked": a lock another connection holds, not a fault of the file.

    Python's ``sqlite3`` raises it as an ``OperationalError``, a kind of ``DatabaseError``
    (as is "file is not a database"), so only its result code tells them apart."""
    orig = getattr(exc, "orig", exc)
    code = getattr(orig, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in _LOCK_CODES


def error_name(exc: BaseException) -> str:
    """The DB-API error's class and, from SQLite, its result code's name (``OperationalError,
    SQLITE_BUSY``): what went wrong, never a value of the ledger (for its messages)."""
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlite_errorname", None)
    return f"{type(orig).__name__}, {code}" if isinstance(code, str) else type(orig).__name__


def switch_to_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode = WAL`` on a new connection, tried again while another connection
    holds the lock it needs, for up to :data:`BUSY_TIMEOUT_SECONDS`.

    Why the busy timeout alone does not wait here: switching a file in rollback-journal mode to
    WAL (a new ledger file is linked into place in that mode) takes the exclusive lock from
    inside the read transaction that read the file's header, and SQLite does not call the busy
    handler for such an upgrade. It returns SQLITE_BUSY at once, so that two connections each
    holding a read lock and wanting the other's cannot deadlock (SQLite's documentation of
    ``sqlite3_busy_handler``). Several openers meeting a new ledger at once each run this
    switch; all but one failed at once, and the open said "cannot open the ledger". The failed
    statement released its read lock, so the connection that is switching finishes; tried again,
    the statement finds the file in WAL already and needs no write lock. Any other error (a file
    that is not a database) is raised at once.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    pause = 0.001
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.fetchall()
            return
        except Exception as exc:
            if not is_lock_error(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.05)


def _unsynced(dbapi_connection: Any, _record: Any) -> None:
    """A connection that never waits for the disk (``PRAGMA synchronous = OFF``): only for
    building a new ledger file no one else opens, synced once by :func:`_fsync`."""
    cur = dbapi_connection.cursor()
    try:
        cur.execute("PRAGMA synchronous = OFF")
    finally:
        cur.close()


def _fsync(path: Path) -> None:
    """Write ``path``'s data to the disk (what each synced commit would have done)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def install_sqlite_listeners(engine: Engine) -> None:
    """SQLAlchemy's documented pysqlite recipe: we emit BEGIN ourselves.

    pysqlite's own transaction handling is switched off (``isolation_level = None``) so
    that the ``begin`` hook can emit ``BEGIN IMMEDIATE`` for write transactions (taking
    the write lock up front, waiting up to the busy timeout) and ``BEGIN`` for reads.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cur = dbapi_connection.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
            switch_to_wal(cur)
            cur.execute("PRAGMA synchronous = FULL")
            cur.execute("PRAGMA foreign_keys = ON")
            # Overwrite deleted and replaced content with zeros (a migrated bare file hash
            # must not linger in free pages).
            cur.execute("PRAGMA secure_delete = ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get(BEGIN_OPTION, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


class Store:
    """One ledger database: its engine, sessions, journal and verified record.

    Parameters
    ----------
    url : str
        A SQLAlchemy URL.
    """

    def __init__(self, url: str) -> None:
        self.parsed = parse_url(url)
        self.is_sqlite = self.parsed.get_backend_name() == "sqlite"
        identity, memory = url_identity(self.parsed)
        self.memory = memory
        self.marker = None if memory else Marker(identity, self.url, home())
        self.secret = server_secret()
        self.ledger_id: str | None = None
        self.chain_key: bytes | None = None
        self.record: Record | None = None
        #: table → row id → (the row as the database returned it, the journal's row it was
        #: proven equal to): see :meth:`prove`
        self._proven: dict[str, dict[Any, tuple[tuple[Any, ...], dict[str, Any]]]] = {}
        #: the journal entry of the newest state checkpoint this process knows of
        self.state_seq = 0
        #: whether the record was loaded from a checkpoint (:mod:`planner.ledger.checkpoint`)
        self.from_checkpoint = False
        #: brings the record's composed budgets of these datasets up to date before a
        #: summary is written (set by the reading side: :func:`planner.ledger.reading.refresh`)
        self.refresh: Callable[[Record, set[int] | None], None] | None = None
        self.engine = self._make_engine(self.parsed)

    @property
    def url(self) -> str:
        """The database URL, password hidden."""
        return self.parsed.render_as_string(hide_password=True)

    @property
    def path(self) -> Path | None:
        """The SQLite file (``None`` in memory or on a server database)."""
        if not self.is_sqlite or self.memory:
            return None
        return Path(self.parsed.database or "").expanduser()

    # ------------------------------------------------------------------ engine

    def _make_engine(self, url: URL) -> Engine:
        shown = url.render_as_string(hide_password=True)
        try:
            if self.is_sqlite:
                return self._sqlite_engine(url)
            return create_engine(url, pool_pre_ping=True)
        except (sa_exc.NoSuchModuleError, ModuleNotFoundError, ImportError) as exc:
            raise LedgerError(
                f"no database driver for the ledger URL {shown}. Install it "
                "(e.g. pip install 'psycopg[binary]' for postgresql+psycopg://) or use a "
                "sqlite:/// URL."
            ) from exc
        except sa_exc.ArgumentError as exc:
            raise LedgerError(f"the ledger URL {shown} cannot be used: {exc}.") from exc

    def _sqlite_engine(self, url: URL) -> Engine:
        if not self.memory:
            path = Path(url.database or "").expanduser()
            try:
                path.resolve().parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerError(
                    f"cannot create the ledger directory for {self.url}: {exc.strerror}. "
                    f"Point {ENV_URL} or {ENV_HOME} at a writable location."
                ) from exc
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_SECONDS},
            poolclass=StaticPool if self.memory else None,
        )
        install_sqlite_listeners(engine)
        return engine

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def session(self, *, write: bool, after_commit: str = "") -> Iterator[Session]:
        """One short session; a write session takes SQLite's write lock at BEGIN.

        Database errors become :class:`LedgerError` (busy, unreachable, full) or
        :class:`LedgerIntegrityError` (a damaged file), never a raw traceback. The message
        says what happened to the caller's change: nothing, unless ``after_commit`` says
        what was committed before this session began (a release's spend).
        """
        try:
            with Session(self.engine, expire_on_commit=False) as session:
                if write and self.is_sqlite:
                    session.connection(execution_options={BEGIN_OPTION: "IMMEDIATE"})
                yield session
        except sa_exc.IntegrityError:
            raise
        except sa_exc.OperationalError as exc:
            done = after_commit or "Nothing was changed by this call; try again."
            raise LedgerError(
                f"the ledger at {self.url} could not be read or written "
                f"({error_name(exc)}: it may be busy, unreachable, full or read-only). {done}"
            ) from exc
        except sa_exc.DatabaseError as exc:
            done = after_commit or "Nothing was changed."
            raise LedgerIntegrityError(
                f"the ledger at {self.url} is damaged ({error_name(exc)}). {done} Run "
                "`planner ledger verify` and restore the ledger from a backup."
            ) from exc

    @contextmanager
    def write(self, *, after_commit: str = "", checkpoint_after: bool = True) -> Iterator[tuple[Session, HeadRow]]:
        """A write transaction holding the ledger head (serialises every writer), with the
        record caught up to the head under the same lock; then, unless
        ``checkpoint_after`` is false (a release's reservation: nothing may delay its
        sampling, the answer's write does it), the checkpoints due (:meth:`_after_write`)."""
        record = self.verified()
        # The record's lock before the database's: a thread never holds a connection (or
        # the write lock) while it waits for another thread of this process.
        with record.lock, self.session(write=True, after_commit=after_commit) as s:
            head = s.exec(select(HeadRow).where(col(HeadRow.id) == 1).with_for_update()).first()
            if head is None:
                raise LedgerIntegrityError(
                    f"the ledger at {self.url} has lost its head record; nothing was changed. "
                    "Run `planner ledger verify`."
                )
            self._catch_up(s, head, record)
            yield s, head
        if checkpoint_after:
            self._after_write(record)

    def _after_write(self, record: Record) -> None:
        """After a write committed: a summary of the composed budgets if it added spends,
        and a state checkpoint every :data:`~planner.ledger.checkpoint.STATE_EVERY` entries
        (:mod:`planner.ledger.checkpoint`), each in its own short transaction."""
        touched = record.take_touched()
        state = record.seq - self.state_seq >= checkpoint.STATE_EVERY
        if (not touched and not state) or self.memory:
            return
        with record.lock:
            self._refresh(record, None if state else touched)
            checkpoint.write(self.session(write=True), self.secret, record, state=state)
            if state:
                self.state_seq = record.seq

    def commit(self, s: Session, head: HeadRow, kind: str, dataset_id: int | None,
               rows: Sequence[Any]) -> None:
        """Journal ``rows`` (already added) as one entry, advance the head, commit, then
        apply the entry to the record and advance the marker."""
        s.flush()
        grouped: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            table, data = row_dict(r)
            grouped.setdefault(table, []).append(data)
        body = canonical({"rows": grouped})
        key = self.key()
        seq = head.seq + 1
        prev = head.mac
        mac = entry_mac(key, seq, kind, prev, body)
        s.add(JournalRow(seq=seq, kind=kind, dataset_id=dataset_id, body=body, prev=prev,
                         mac=mac, created_at=utcnow()))
        head.seq, head.mac = seq, mac
        s.add(head)
        s.commit()
        if self.record is not None and self.record.seq == seq - 1:
            self.record.apply(Entry(seq, kind, prev, body, mac))
        if self.marker is not None:
            self.marker.advance(head.ledger_id, seq, mac)

    def key(self) -> bytes:
        if self.chain_key is None:
            raise LedgerIntegrityError("the ledger was not opened; its chain key is unknown.")
        return self.chain_key

    # ------------------------------------------------------------------ the record

    def verified(self) -> Record:
        if self.record is None:
            raise LedgerIntegrityError("the ledger was not opened; its journal was not verified.")
        return self.record

    @contextmanager
    def reading(self) -> Iterator[tuple[Session, Record]]:
        """A read session and the record caught up to the head it sees (held locked)."""
        record = self.verified()
        # The lock first: a writer of this process applies its entry to the record under the
        # lock after its commit, so a head read after taking the lock is never behind it.
        with record.lock, self.session(write=False) as s:
            head = s.get(HeadRow, 1)
            if head is None:
                raise LedgerIntegrityError(
                    f"the ledger at {self.url} has lost its head record. Run `planner ledger verify`."
                )
            self._catch_up(s, head, record)
            yield s, record

    def _catch_up(self, s: Session, head: HeadRow, record: Record) -> None:
        """Apply the journal entries written since the record's last one (verifying each
        link); refuse a head that went back or a journal that no longer leads to it."""
        if (head.seq, head.mac) == (record.seq, record.mac):
            return
        if head.ledger_id != record.ledger_id or head.seq < record.seq:
            raise LedgerIntegrityError(
                f"the ledger at {self.url} went back: its head records entry {head.seq} of ledger "
                f"{head.ledger_id}, but this process already verified entry {record.seq} of "
                f"ledger {record.ledger_id}. It was restored from an older copy or replaced; "
                "nothing was changed. Run `planner ledger verify` and restore the newest backup."
            )
        rows = s.exec(select(JournalRow).where(col(JournalRow.seq) > record.seq,
                                               col(JournalRow.seq) <= head.seq)
                      .order_by(col(JournalRow.seq))).all()
        for r in rows:
            record.apply(Entry(r.seq, r.kind, r.prev, r.body, r.mac))
        if (record.seq, record.mac) != (head.seq, head.mac):
            raise LedgerIntegrityError(
                f"the ledger at {self.url} lost journal entries: its head records entry "
                f"{head.seq}, its journal leads to entry {record.seq}. It was truncated or "
                "edited; nothing was changed. Restore it from a backup."
            )

    def prove(self, s: Session, what: str, checks: Iterable[tuple[str, Any, Mapping[int, dict[str, Any]]]]) -> None:
        """Refuse a decision whose inputs were edited outside the planner.

        ``checks`` are ``(table, where-clause, rows the record holds for it)``: the table's
        rows matching the clause must be exactly the record's (same ids, same values).

        Raises
        ------
        LedgerIntegrityError
            Naming each table, row and column that disagrees with the journal, what was
            refused (``what``), and how to recover.
        """
        problems: list[str] = []
        newly: list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]] = []
        for table, where, expected in checks:
            memo = self._proven.setdefault(table, {})
            keys, rows = raw_rows(s, table, where)
            at = keys.index("id")
            seen: set[Any] = set()
            actual: dict[Any, dict[str, Any]] = {}
            fresh: dict[Any, tuple[Any, ...]] = {}
            for raw in rows:
                i = raw[at]
                seen.add(i)
                hit = memo.get(i)
                if hit is not None and hit[0] == raw and hit[1] == expected.get(i):
                    continue  # these very values were proven equal to this very journal row
                fresh[i] = raw
            typed = processed_rows(s, table, fresh) if fresh else {}
            for i, raw in fresh.items():
                actual[i] = journal_row(table, keys, typed[i])
                newly.append((table, i, raw, expected.get(i, {})))
            open_rows = {i: v for i, v in expected.items() if i in actual or i not in seen}
            if table == "answers":
                open_rows = {k: _comparable(table, v) for k, v in open_rows.items()}
                actual = {k: _comparable(table, v) for k, v in actual.items()}
            problems.extend(compare({table: open_rows}, {table: actual}, (table,)))
        if problems:
            raise LedgerIntegrityError(
                f"{what} was refused: the ledger at {self.url} disagrees with its own journal — "
                + "; ".join(problems[:6]) + ("; …" if len(problems) > 6 else "") + ". Nothing was "
                "changed. The journal is the record (it cannot be edited without the server "
                "secret): run `planner ledger verify` for the full list, then restore the ledger "
                "from a backup, or restore the rows as the journal has them."
            )
        for table, i, raw, row in newly:
            self._proven[table][i] = (raw, dict(row))

    # ------------------------------------------------------------------ open

    def busy(self, exc: BaseException) -> LedgerError:
        """A lock another connection held past the busy timeout while the ledger was opened:
        a busy ledger, never a damaged one."""
        return LedgerError(
            f"the ledger at {self.url} is busy: another connection held its lock for more than "
            f"{BUSY_TIMEOUT_SECONDS:g} s while it was being opened ({error_name(exc)}). "
            "Nothing was changed; try again."
        )

    def cannot_open(self, exc: BaseException) -> LedgerError:
        """The ledger's location could not be opened (unwritable, unreachable)."""
        return LedgerError(
            f"cannot open the ledger at {self.url}: {error_name(exc)}. Check that "
            f"the location is writable and reachable, or set {ENV_URL}."
        )

    def table_names(self) -> set[str]:
        try:
            return set(inspect(self.engine).get_table_names())
        except sa_exc.OperationalError as exc:
            if is_lock_error(exc):
                raise self.busy(exc) from exc
            raise self.cannot_open(exc) from exc
        except sa_exc.DatabaseError as exc:
            raise LedgerIntegrityError(
                f"the ledger at {self.url} is not a readable database ({error_name(exc)}: "
                "corrupt, truncated or not a ledger). Nothing was changed. Restore it from a "
                "backup; run `planner ledger verify` for details."
            ) from exc

    def sqlite_file_problems(self) -> list[str]:
        path = self.path
        if path is None or not path.exists():
            return []
        if not path.is_file():
            return [f"the ledger location {path} is not a regular file."]
        if path.stat().st_size == 0:
            return [
                f"the ledger file {path} exists but is empty (0 bytes). A ledger is never empty "
                "once created (it is created complete, then put in place), so it was truncated "
                "or replaced: every earlier spend would be forgotten. Restore it from a backup; "
                "if this really is meant to be a new ledger, delete the empty file first."
            ]
        return []

    def read_marker(self, problems: list[str]) -> MarkerState | None:
        if self.marker is None:
            return None
        try:
            return self.marker.read()
        except LedgerIntegrityError as exc:
            problems.append(str(exc))
            return None

    def forgotten(self, marker: MarkerState, what: str) -> str:
        return (
            f"the ledger at {self.url} is {what}, but this machine recorded ledger "
            f"{marker.ledger_id} there with {marker.seq} journal entries (marker "
            f"{self.marker.path if self.marker else ''}). Every earlier spend would be "
            "forgotten, so it is refused. Restore the ledger from a backup; only if you "
            "retired it deliberately, delete the marker."
        )

    def quick_check(self) -> list[str]:
        try:
            with self.engine.connect() as conn:
                rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check")]
                conn.rollback()
        except sa_exc.DatabaseError as exc:
            if is_lock_error(exc):  # SQLite's busy error is a DatabaseError too
                raise self.busy(exc) from exc
            return [f"the ledger at {self.url} cannot be checked ({error_name(exc)}): "
                    "it is damaged. Restore it from a backup."]
        if rows != ["ok"]:
            return [f"the ledger at {self.url} is damaged (SQLite quick_check: {len(rows)} "
                    "problem(s)). Restore it from a backup; `planner ledger verify` lists them."]
        return []

    def new_head(self) -> HeadRow:
        return HeadRow(id=1, ledger_id=uuid.uuid4().hex, format_version=FORMAT_VERSION,
                       secret_check=secret_check(secret=self.secret), seq=0, mac=GENESIS_MAC,
                       created_at=utcnow())

    def create_sqlite_file(self, path: Path) -> None:
        """Build a complete new ledger beside ``path`` and link it into place (atomic for
        every other opener: see the module docstring); a creator that loses the race
        discards its file and opens the winner's."""
        tmp = path.with_name(f".{path.name}.new-{uuid.uuid4().hex[:12]}")
        engine = create_engine(f"sqlite:///{tmp}", connect_args={"timeout": BUSY_TIMEOUT_SECONDS})
        # No file is ever reached at ``tmp`` by another opener, and a crash while it is built
        # leaves only a stray file: its writes need no sync each (pysqlite runs every CREATE
        # of create_all as its own transaction, about 25 synced commits, 0.2-0.5 s on this
        # disk). It is made durable once, by os.fsync, before it is linked into place.
        event.listen(engine, "connect", _unsynced)
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql("PRAGMA journal_mode = DELETE")
                LEDGER_METADATA.create_all(conn)
            with Session(engine) as s:
                s.add(self.new_head())
                s.commit()
            engine.dispose()
            _fsync(tmp)
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process created it first: open theirs
            except OSError as exc:
                raise LedgerError(
                    f"cannot create the ledger at {self.url}: {exc.strerror}. Check that the "
                    f"location is writable, or set {ENV_URL}."
                ) from exc
        except sa_exc.OperationalError as exc:
            raise LedgerError(
                f"cannot create the ledger at {self.url}: {error_name(exc)}. Check that "
                f"the location is writable, or set {ENV_URL}."
            ) from exc
        finally:
            engine.dispose()
            for suffix in ("", "-journal", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    Path(f"{tmp}{suffix}").unlink()

    def create_in_place(self) -> None:
        """Tables and head in one transaction (in memory, or a server database under an
        advisory lock); an opener that finds them made meanwhile uses them."""
        try:
            with self.engine.connect() as conn:
                if self.is_sqlite:
                    conn = conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
                with conn.begin():
                    self._creation_lock(conn)
                    LEDGER_METADATA.create_all(conn)
                    have = conn.execute(text("SELECT count(*) FROM ledger_head")).scalar_one()
                    if not have:
                        h = self.new_head()
                        conn.execute(HeadRow.__table__.insert().values(  # type: ignore[attr-defined]
                            id=h.id, ledger_id=h.ledger_id, format_version=h.format_version,
                            secret_check=h.secret_check, seq=h.seq, mac=h.mac, created_at=h.created_at))
        except sa_exc.OperationalError as exc:
            raise self.cannot_open(exc) from exc

    def create_missing_tables(self) -> None:
        """Tables of a newer format that an older ledger lacks (``create_all`` creates only
        missing ones), in one write transaction."""
        with self.engine.connect() as conn:
            if self.is_sqlite:
                conn = conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
            with conn.begin():
                self._creation_lock(conn)
                LEDGER_METADATA.create_all(conn)

    def _creation_lock(self, conn: Any) -> None:
        """On PostgreSQL, the transaction-level advisory lock every creator and migrator
        takes (SQLite: ``BEGIN IMMEDIATE`` already serialises them)."""
        if self.engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _CREATE_LOCK})

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """A read session whose every statement sees one snapshot of the database (SQLite's
        read transaction does; PostgreSQL needs REPEATABLE READ, its default READ COMMITTED
        gives each statement its own)."""
        with self.session(write=False) as s:
            if self.engine.dialect.name == "postgresql":
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            yield s

    def check_head(self, marker: MarkerState | None) -> list[str]:
        with self.snapshot() as s:
            head = s.get(HeadRow, 1)
            if head is None:
                return [f"the ledger at {self.url} has no head record: it is damaged or was "
                        "emptied. Restore it from a backup."]
            last = s.exec(select(JournalRow).order_by(col(JournalRow.seq).desc()).limit(1)).first()
            at_marker = None
            if marker is not None and 0 < marker.seq <= head.seq:
                at_marker = s.get(JournalRow, marker.seq)
        if head.format_version > FORMAT_VERSION:
            return [f"the ledger at {self.url} has format {head.format_version}, newer than this "
                    f"planner understands ({FORMAT_VERSION}). Upgrade the planner."]
        if head.secret_check != secret_check(secret=self.secret):
            return [f"the ledger at {self.url} was created with another server secret than the "
                    f"one from {secret_source()}. Fingerprints made with this secret would not "
                    "match, so it is refused. Set PLANNER_SECRET (or PLANNER_SECRET_FILE) to the "
                    "organisation's secret."]
        self.ledger_id = head.ledger_id
        self.chain_key = chain_key(self.secret, head.ledger_id)
        problems: list[str] = []
        if (last is None and head.seq != 0) or (last is not None and (last.seq, last.mac) != (head.seq, head.mac)):
            problems.append(
                f"the ledger at {self.url} lost journal entries: its head records entry "
                f"{head.seq}, its journal ends at {0 if last is None else last.seq}. It was "
                "truncated or edited; restore it from a backup."
            )
        if marker is not None:
            problems.extend(self._marker_problems(marker, head, at_marker))
        if not problems:
            problems.extend(self._build_record(head))
        if not problems and self.marker is not None:
            self.marker.advance(head.ledger_id, head.seq, head.mac)
        return problems

    def _marker_problems(self, marker: MarkerState, head: HeadRow, at_marker: JournalRow | None) -> list[str]:
        mpath = self.marker.path if self.marker else ""
        if marker.ledger_id != head.ledger_id:
            return [
                f"the ledger at {self.url} is not the one this machine recorded there (marker "
                f"{mpath}: ledger {marker.ledger_id}, found {head.ledger_id}). It was replaced; "
                "every spend recorded in the other would be forgotten. Restore it; only if "
                "the replacement is deliberate, delete the marker."
            ]
        if marker.seq > head.seq:
            return [
                f"the ledger at {self.url} has {head.seq} journal entries, but this machine "
                f"saw {marker.seq} (marker {mpath}). It was truncated or restored from an "
                f"older backup: the spends after entry {head.seq} would be forgotten. Restore "
                "the newest backup; only if you accept losing them, delete the marker."
            ]
        if marker.seq > 0 and (at_marker is None or at_marker.mac != marker.mac):
            return [
                f"the ledger at {self.url} was rewritten: its journal entry {marker.seq} is not "
                f"the one this machine saw (marker {mpath}). Run `planner ledger verify` and "
                "restore the ledger from a backup."
            ]
        return []

    def _build_record(self, head: HeadRow) -> list[str]:
        """Read the whole journal once, verifying every link, into the record; then check
        each table's row count against it (a row deleted or added outside the planner).
        Values edited in place are refused at the decision that reads them
        (:meth:`prove`) and listed by ``verify``.

        The head, the journal and the counts are read in one snapshot (SQLite's read
        transaction; REPEATABLE READ on PostgreSQL), so a release committed meanwhile by
        another process is either wholly in what is read or wholly not.

        With a checkpoint that verifies (:mod:`planner.ledger.checkpoint`), only the
        entries after it are read. A checkpoint only ever speeds up an open that passes:
        if anything is found with one, the whole journal is replayed without it and that
        replay's verdict is the one returned, as if there were no checkpoints.
        """
        names = self.table_names()
        problems = self._build(head, names, checkpoint.TABLE in names)
        if problems and self.from_checkpoint:
            problems = self._build(head, names, False)
        return problems

    def _build(self, head: HeadRow, names: set[str], use: bool) -> list[str]:
        """:meth:`_build_record`'s work, from a checkpoint if ``use`` and one verifies
        (then :attr:`from_checkpoint` is set)."""
        self.from_checkpoint = False
        with self.snapshot() as s:
            now = s.get(HeadRow, 1)
            if now is None or now.ledger_id != head.ledger_id or now.seq < head.seq:
                return [f"the ledger at {self.url} changed identity or went back while it was being opened. "
                        "Run `planner ledger verify` and restore it from a backup."]
            record: Record | None = None
            memo: dict[tuple[int, str | None, str, str], tuple[int, float]] = {}
            if use:
                record, memo = checkpoint.load(s, self.secret, self.key(), head.ledger_id, now.seq)
                self.state_seq = checkpoint.newest_state(s)
                self.from_checkpoint = record is not None
            if record is None:  # no usable checkpoint: the whole journal
                record = Record(head.ledger_id, self.key())
            try:
                for e in s.exec(select(JournalRow).where(col(JournalRow.seq) > record.seq,
                                                         col(JournalRow.seq) <= now.seq)
                                .order_by(col(JournalRow.seq))):
                    record.apply(Entry(e.seq, e.kind, e.prev, e.body, e.mac))
            except LedgerIntegrityError:
                return [f"the journal of the ledger at {self.url} is broken at entry {record.seq + 1}: "
                        "entries were changed, forged or deleted outside the planner. Nothing "
                        "was changed now; run `planner ledger verify` and restore the ledger "
                        "from a backup."]
            if (record.seq, record.mac) != (now.seq, now.mac):
                return [f"the ledger at {self.url} lost journal entries: its head records entry "
                        f"{now.seq}, its journal leads to entry {record.seq}. It was truncated or "
                        "edited; restore it from a backup."]
            counts = {t: s.exec(select(func.count()).select_from(MODELS[t])).one() if t in names else 0
                      for t in TRACKED}
        wrong = [t for t in TRACKED if counts[t] != len(record.table(t))]
        if wrong:
            return [f"the ledger at {self.url} has rows that the journal does not account for "
                    f"(tables {', '.join(wrong)}): rows were deleted or added outside the planner, "
                    "which could forget spends. Nothing was changed now; run `planner ledger "
                    "verify` for details and restore the ledger from a backup."]
        record.take_touched()
        record.memo.update(memo)
        self.record = record
        if checkpoint.TABLE in names and not self.memory and record.seq - self.state_seq >= checkpoint.STATE_EVERY:
            with record.lock:
                self._refresh(record, None)
                checkpoint.write(self.session(write=True), self.secret, record, state=True)
            self.state_seq = record.seq
        return []

    def _refresh(self, record: Record, datasets: set[int] | None) -> None:
        """:attr:`refresh`, if set; a budget that cannot be composed (a rule that cannot
        account for a recorded spend) is left out of the summary, and said by the status
        that reads it."""
        if self.refresh is None:
            return
        with contextlib.suppress(PlannerError):
            self.refresh(record, datasets)


def raw_rows(s: Session, table: str, where: Any = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The column names the journal keeps for ``table`` and its rows matching ``where``,
    as the database returns them (plain tuples; :func:`journal_row` gives the journal's form).

    Why a release can prove its history without re-reading it into the journal's form: a
    row's journal form is a function of the values the database returns, so values once
    proven equal to a journal row stay proven while both are unchanged; :meth:`Store.prove`
    re-derives the form only for rows whose values or journal row changed (or are new).
    Every row is still read and compared on every decision: an in-place edit changes the
    values returned, and is caught."""
    tab = LEDGER_METADATA.tables[table]
    skip = VOLATILE.get(table, frozenset())
    cols = [c for c in tab.columns if c.name not in skip]
    stmt = sa_select(*cols)
    if where is not None:
        stmt = stmt.where(where)
    result = s.connection().execute(stmt)
    # the driver's own tuples: the values as stored, without SQLAlchemy's per-row processing
    # (:func:`journal_row` reads them through :func:`processed_rows` when it needs the form)
    return [c.name for c in cols], [tuple(r) for r in result.cursor.fetchall()]


def processed_rows(s: Session, table: str, ids: Collection[Any]) -> dict[Any, tuple[Any, ...]]:
    """The rows of ``table`` with these ids, as SQLAlchemy types them (datetimes, booleans),
    in the columns of :func:`raw_rows`."""
    tab = LEDGER_METADATA.tables[table]
    skip = VOLATILE.get(table, frozenset())
    cols = [c for c in tab.columns if c.name not in skip]
    at = [c.name for c in cols].index("id")
    out: dict[Any, tuple[Any, ...]] = {}
    ordered = sorted(ids)
    for start in range(0, len(ordered), 500):
        stmt = sa_select(*cols).where(tab.c.id.in_(ordered[start:start + 500]))
        out.update({r[at]: tuple(r) for r in s.connection().execute(stmt)})
    return out


def journal_row(table: str, keys: Sequence[str], raw: Sequence[Any]) -> dict[str, Any]:
    """One row of :func:`raw_rows` in the journal's form (canonical values, unset optional
    columns left out)."""
    optional = OPTIONAL.get(table, frozenset())
    return {k: canonical_value(v) for k, v in zip(keys, raw, strict=True) if not (k in optional and v is None)}


def journal_form(s: Session, table: str, where: Any = None) -> Iterator[dict[str, Any]]:
    """The rows of ``table`` (matching ``where``) as the journal holds them (the columns
    :func:`planner.ledger.tables.row_dict` keeps, canonical values), read as plain rows: a
    release proves thousands of them, and building ORM objects for each cost most of it."""
    tab = LEDGER_METADATA.tables[table]
    skip = VOLATILE.get(table, frozenset())
    optional = OPTIONAL.get(table, frozenset())
    stmt = sa_select(*[c for c in tab.columns if c.name not in skip])
    if where is not None:
        stmt = stmt.where(where)
    for m in s.connection().execute(stmt).mappings():
        yield {k: canonical_value(v) for k, v in m.items() if not (k in optional and v is None)}


def _comparable(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A row as the record holds it (an answer by the digest of its payload)."""
    if table == "answers" and "payload_json" in row:
        from planner.ledger.records import payload_digest

        row = {k: v for k, v in row.items() if k != "payload_json"} | {
            "payload_sha256": payload_digest(str(row["payload_json"]))}
    return row

