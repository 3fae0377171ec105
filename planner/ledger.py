"""The privacy ledger: every dataset's total budget, every spend, every release.

The ledger is the only durable state of the engine. It keeps, per dataset fingerprint,
the total budget (ε, δ) and composition rule, every release made against it, every spend
(one recorded mechanism invocation, in every currency the accountants need) and the noisy
answers each release produced. Its one non-trivial operation is :meth:`Ledger.release`,
which enforces the order fixed in PRODUCT.md §5:

1. lock the dataset row and read its spends;
2. a release whose plan hash was already answered returns its stored answers (nothing
   is sampled again); one that was committed but lost its answers raises;
3. check that the new spends fit: ``total_epsilon(old + new, rule, δ) ≤ ε``;
4. insert the spends and a *pending* release, **commit**;
5. call ``sample()`` (the only place noise is drawn), outside any transaction;
6. store the answers and mark the release *done* in a second transaction.

A crash between 4 and 6 leaves the spend counted and the release pending; the next open
reports (and repairs) it as ``spent_no_answers``. The budget is never refunded and a plan
is never sampled twice.

Storage
-------
SQLite by default: ``sqlite:///$PLANNER_HOME/ledger.db`` (``~/.privacy-budget-planner``
when ``PLANNER_HOME`` is unset); any SQLAlchemy URL in ``PLANNER_LEDGER_URL`` (or passed to
:class:`Ledger`) overrides it, e.g. ``postgresql+psycopg://user@host/db``. SQLite
connections use WAL, a 30 s busy timeout, ``synchronous=FULL``, foreign keys and
``BEGIN IMMEDIATE`` for every write transaction (SQLAlchemy's documented pysqlite
event recipe); other databases lock the dataset row with ``SELECT … FOR UPDATE``.
Every operation uses its own short :class:`sqlmodel.Session`, so one :class:`Ledger` may be
shared by Streamlit's threads.

Notes
-----
The tables use their own SQLAlchemy registry and metadata (:data:`LEDGER_METADATA`), so
re-importing this module never redefines a table on :data:`sqlmodel.SQLModel.metadata`,
and ``create_all`` only ever touches the ledger tables.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, TypeAlias

from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Integer,
    Text,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import registry as sa_registry
from sqlalchemy.pool import StaticPool
from sqlmodel import Field, Session, SQLModel, col, select
from sqlmodel.sql.expression import SelectOfScalar

from planner.accounting import CompositionRule, Spend, event_rho, total_epsilon
from planner.budget import check_delta, check_epsilon
from planner.errors import BudgetError, BudgetExceededError, LedgerError
from planner.events import PrivacyEvent, event_from_dict

__all__ = [
    "ENV_HOME",
    "ENV_URL",
    "JSON",
    "LEDGER_METADATA",
    "BudgetChange",
    "BudgetStatus",
    "DatasetInfo",
    "HistoryPoint",
    "Ledger",
    "ReleasePreview",
    "ReleaseRecord",
    "ReleaseStatus",
    "SpendRecord",
    "default_ledger_url",
]

JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
"""A JSON value, as stored for answers and exported."""

#: Environment variable holding any SQLAlchemy URL for the ledger.
ENV_URL: Final = "PLANNER_LEDGER_URL"
#: Environment variable naming the planner's home directory (default ledger location).
ENV_HOME: Final = "PLANNER_HOME"
_DEFAULT_HOME: Final = "~/.privacy-budget-planner"

#: SQLite busy timeout: how long a writer waits for the write lock.
BUSY_TIMEOUT_SECONDS: Final = 30.0
#: Relative slack on the budget check, for float noise only (1e-12 of the total).
BUDGET_REL_TOLERANCE: Final = 1e-12
#: A pending release whose owner cannot be checked (another host) is presumed dead after this.
STALE_PENDING_SECONDS: Final = 3600.0
#: How long :meth:`Ledger.release` waits for a concurrent release of the same plan.
WAIT_FOR_SAME_PLAN_SECONDS: Final = 60.0

_BEGIN_OPTION: Final = "planner_sqlite_begin"


class ReleaseStatus(StrEnum):
    """The state of a release.

    ``pending``: the spend is committed and noise is being drawn. ``done``: answers are
    stored. ``spent_no_answers``: the spend is counted but the answers were lost (crash or
    error in sampling); the plan is never sampled again. ``reused``: only in a record
    returned by :meth:`Ledger.release` for a plan answered earlier (never stored).
    """

    PENDING = "pending"
    DONE = "done"
    SPENT_NO_ANSWERS = "spent_no_answers"
    REUSED = "reused"


# --------------------------------------------------------------------------- tables

#: The ledger's own metadata: ``create_all`` on it creates exactly the ledger tables.
_REGISTRY: Final = sa_registry()
LEDGER_METADATA: Final = _REGISTRY.metadata


class _LedgerModel(SQLModel, registry=_REGISTRY):
    """Base of the ledger tables: a private registry, not ``SQLModel.metadata``."""


class DatasetRow(_LedgerModel, table=True):
    """One dataset (by fingerprint) and its fixed total budget."""

    __tablename__ = "datasets"

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(sa_column=Column(Text, nullable=False, unique=True, index=True))
    name: str = Field(sa_column=Column(Text, nullable=False))
    epsilon: float = Field(sa_column=Column(Float, nullable=False))
    delta: float = Field(sa_column=Column(Float, nullable=False))
    rule: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class BudgetChangeRow(_LedgerModel, table=True):
    """A deliberate, recorded raise of a dataset's lifetime budget (never a silent reset)."""

    __tablename__ = "budget_changes"

    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(
        sa_column=Column(Integer, ForeignKey("datasets.id"), nullable=False, index=True)
    )
    old_epsilon: float = Field(sa_column=Column(Float, nullable=False))
    old_delta: float = Field(sa_column=Column(Float, nullable=False))
    new_epsilon: float = Field(sa_column=Column(Float, nullable=False))
    new_delta: float = Field(sa_column=Column(Float, nullable=False))
    reason: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class ReleaseRow(_LedgerModel, table=True):
    """One release of a plan against a dataset (unique per dataset and plan hash)."""

    __tablename__ = "releases"
    __table_args__ = (UniqueConstraint("dataset_id", "plan_hash", name="uq_release_plan"),)

    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(
        sa_column=Column(Integer, ForeignKey("datasets.id"), nullable=False, index=True)
    )
    plan_hash: str = Field(sa_column=Column(Text, nullable=False))
    schema_hash: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    status: str = Field(sa_column=Column(Text, nullable=False))
    owner: str = Field(sa_column=Column(Text, nullable=False))
    answered_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class SpendRow(_LedgerModel, table=True):
    """One mechanism invocation of a release, in every currency."""

    __tablename__ = "spends"

    id: int | None = Field(default=None, primary_key=True)
    release_id: int = Field(
        sa_column=Column(Integer, ForeignKey("releases.id"), nullable=False, index=True)
    )
    query_id: str = Field(sa_column=Column(Text, nullable=False))
    epsilon: float = Field(sa_column=Column(Float, nullable=False))
    delta: float = Field(sa_column=Column(Float, nullable=False))
    rho: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    event_json: str = Field(sa_column=Column(Text, nullable=False))


class AnswerRow(_LedgerModel, table=True):
    """The stored (noisy, released) answer of one query of a release."""

    __tablename__ = "answers"
    __table_args__ = (UniqueConstraint("release_id", "query_id", name="uq_answer_query"),)

    id: int | None = Field(default=None, primary_key=True)
    release_id: int = Field(
        sa_column=Column(Integer, ForeignKey("releases.id"), nullable=False, index=True)
    )
    query_id: str = Field(sa_column=Column(Text, nullable=False))
    payload_json: str = Field(sa_column=Column(Text, nullable=False))


# --------------------------------------------------------------------------- values


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """A registered dataset and its fixed total budget."""

    fingerprint: str
    name: str
    epsilon: float
    delta: float
    rule: CompositionRule
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "fingerprint": self.fingerprint,
            "name": self.name,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rule": str(self.rule),
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class SpendRecord:
    """One recorded spend: the query, its (ε_i, δ_i), its ρ (``inf`` if none) and its event."""

    query_id: str
    epsilon: float
    delta: float
    rho: float
    event: PrivacyEvent

    @property
    def spend(self) -> Spend:
        """The :class:`planner.accounting.Spend` the accountants compose."""
        return Spend(event=self.event, epsilon=self.epsilon, delta=self.delta)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (``rho`` is ``None`` when the event has no zCDP bound)."""
        return {
            "query_id": self.query_id,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": _finite_or_none(self.rho),
            "event": self.event.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class ReleaseRecord:
    """A release with its spends and (if any) its stored answers.

    ``answers`` is ``None`` when none were stored (``pending`` or ``spent_no_answers``).
    """

    release_id: int
    fingerprint: str
    plan_hash: str
    schema_hash: str
    created_at: datetime
    status: ReleaseStatus
    spends: tuple[SpendRecord, ...]
    answers: dict[str, JSON] | None = None
    answered_at: datetime | None = None

    def to_dict(self, *, include_answers: bool = False) -> dict[str, Any]:
        """JSON-able form; answer values only when ``include_answers`` is true."""
        out: dict[str, Any] = {
            "release_id": self.release_id,
            "fingerprint": self.fingerprint,
            "plan_hash": self.plan_hash,
            "schema_hash": self.schema_hash,
            "created_at": self.created_at.isoformat(),
            "answered_at": None if self.answered_at is None else self.answered_at.isoformat(),
            "status": str(self.status),
            "spends": [s.to_dict() for s in self.spends],
        }
        if include_answers:
            out["answers"] = self.answers
        return out


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """What a dataset's budget looks like now.

    ``epsilon_spent`` is ``total_epsilon(all recorded spends, rule, delta_total)``; every
    release counts, including those whose answers were lost.
    """

    fingerprint: str
    name: str
    epsilon_total: float
    delta_total: float
    rule: CompositionRule
    epsilon_spent: float
    epsilon_remaining: float
    releases: int
    releases_without_answers: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (a non-finite value becomes ``None``)."""
        return {
            "fingerprint": self.fingerprint,
            "name": self.name,
            "epsilon_total": self.epsilon_total,
            "delta_total": self.delta_total,
            "rule": str(self.rule),
            "epsilon_spent": _finite_or_none(self.epsilon_spent),
            "epsilon_remaining": _finite_or_none(self.epsilon_remaining),
            "releases": self.releases,
            "releases_without_answers": self.releases_without_answers,
        }


@dataclass(frozen=True, slots=True)
class BudgetChange:
    """One recorded raise of a dataset's lifetime budget."""

    old_epsilon: float
    old_delta: float
    new_epsilon: float
    new_delta: float
    reason: str
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "old_epsilon": self.old_epsilon,
            "old_delta": self.old_delta,
            "new_epsilon": self.new_epsilon,
            "new_delta": self.new_delta,
            "reason": self.reason,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class ReleasePreview:
    """What a release would cost on a dataset, before anything is recorded.

    ``epsilon_release`` is the increase of the composed spend under the dataset's rule
    (``epsilon_after − epsilon_spent``): under basic composition it is the release's own
    ε; under advanced, RDP or zCDP it can be smaller, because the whole history is composed
    together. ``fits`` is exactly the ledger's own check (:meth:`Ledger.release` refuses
    the same spends when it is false).
    """

    fingerprint: str
    rule: CompositionRule
    epsilon_total: float
    delta_total: float
    epsilon_spent: float
    epsilon_release: float
    epsilon_after: float
    fits: bool
    reason: str = ""

    @property
    def epsilon_remaining(self) -> float:
        """What remains before this release."""
        return self.epsilon_total - self.epsilon_spent

    @property
    def epsilon_remaining_after(self) -> float:
        """What would remain after it (negative when it does not fit)."""
        return self.epsilon_total - self.epsilon_after

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (non-finite values become ``None``)."""
        return {
            "fingerprint": self.fingerprint,
            "rule": str(self.rule),
            "epsilon_total": self.epsilon_total,
            "delta_total": self.delta_total,
            "epsilon_spent": _finite_or_none(self.epsilon_spent),
            "epsilon_release": _finite_or_none(self.epsilon_release),
            "epsilon_after": _finite_or_none(self.epsilon_after),
            "epsilon_remaining": _finite_or_none(self.epsilon_remaining),
            "fits": self.fits,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """Cumulative spent ε after one release (for the ledger chart)."""

    release_id: int
    plan_hash: str
    created_at: datetime
    status: ReleaseStatus
    epsilon_spent: float
    epsilon_release: float = field(default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "release_id": self.release_id,
            "plan_hash": self.plan_hash,
            "created_at": self.created_at.isoformat(),
            "status": str(self.status),
            "epsilon_spent": _finite_or_none(self.epsilon_spent),
            "epsilon_release": _finite_or_none(self.epsilon_release),
        }


# --------------------------------------------------------------------------- helpers


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
    home = os.environ.get(ENV_HOME, "").strip() or _DEFAULT_HOME
    path = Path(home).expanduser() / "ledger.db"
    return f"sqlite:///{path}"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    """SQLite returns naive datetimes; every stored time is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _proc_start_time(pid: int) -> str | None:
    """Linux start time (clock ticks since boot) of ``pid``; ``None`` if gone or a zombie.

    Returns ``""`` when ``/proc`` is unavailable (not Linux).
    """
    if not os.path.isdir("/proc/self"):
        return ""
    stat = _read_text(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] == "Z":
        return None
    return fields[19]


_HOST: Final = socket.gethostname()
_BOOT_ID: Final = _read_text("/proc/sys/kernel/random/boot_id")

#: Claims (release nonces) whose ``sample()`` is running in *this* process.
_IN_FLIGHT: set[str] = set()
_IN_FLIGHT_LOCK: Final = threading.Lock()


def _owner_token(nonce: str) -> str:
    pid = os.getpid()
    start = _proc_start_time(pid) or ""
    return json.dumps(
        {"host": _HOST, "boot": _BOOT_ID, "pid": pid, "start": start, "claim": nonce},
        sort_keys=True,
    )


def _owner_alive(owner: str, created_at: datetime) -> bool:
    """Whether the process that created a pending release may still be sampling it.

    Same process: alive iff its claim is in flight. Same host and boot: the pid exists, is
    not a zombie and has the recorded start time (so a reused pid is not mistaken for it).
    Anything else (another host, unreadable token): alive until
    :data:`STALE_PENDING_SECONDS` have passed.
    """
    try:
        info = json.loads(owner)
        host, boot, pid = str(info["host"]), str(info["boot"]), int(info["pid"])
        start, claim = str(info["start"]), str(info["claim"])
    except (ValueError, KeyError, TypeError):
        return (_utcnow() - _aware(created_at)).total_seconds() < STALE_PENDING_SECONDS
    if host == _HOST and boot == _BOOT_ID:
        if pid == os.getpid() and start == (_proc_start_time(pid) or ""):
            with _IN_FLIGHT_LOCK:
                return claim in _IN_FLIGHT
        now_start = _proc_start_time(pid)
        if now_start is None:
            return False
        if now_start and start:
            return now_start == start
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if host == _HOST and boot and _BOOT_ID and boot != _BOOT_ID:
        return False  # the machine rebooted since
    return (_utcnow() - _aware(created_at)).total_seconds() < STALE_PENDING_SECONDS


def _check_text(value: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LedgerError(f"{name} must be a non-empty string; got {value!r}.")
    return value


def _coerce_rule(rule: CompositionRule | str) -> CompositionRule:
    try:
        return CompositionRule(rule)
    except ValueError as exc:
        names = ", ".join(r.value for r in CompositionRule)
        raise BudgetError(f"rule must be one of {names}; got {rule!r}.") from exc


def _compose(spends: Sequence[Spend], rule: CompositionRule, delta: float) -> float:
    """Composed ε of ``spends``; 0 for none, ``inf`` for anything not a number."""
    if not spends:
        return 0.0
    value = float(total_epsilon(spends, rule, delta))
    return math.inf if math.isnan(value) else value


def _remedy(rule: CompositionRule) -> str:
    tighter = {
        CompositionRule.BASIC: "advanced or rdp",
        CompositionRule.ADVANCED: "rdp",
    }.get(rule)
    text = "Lower this release's ε or drop queries from it"
    if tighter is not None:
        text += (
            f"; a tighter composition rule ({tighter}) would charge less, but a dataset's rule "
            "is fixed when its lifetime budget is set"
        )
    return text + "; the lifetime budget itself can only be raised by a recorded decision of its owner."


def _within_budget(composed: float, total: float) -> bool:
    """``composed ≤ total`` up to float noise (relative 1e-12); NaN and inf never fit."""
    return math.isfinite(composed) and composed <= total + BUDGET_REL_TOLERANCE * total


def _preview(ds: DatasetRow, old: Sequence[Spend], new: Sequence[Spend]) -> ReleasePreview:
    """The budget check of a release (one definition: :meth:`Ledger.preview` shows it,
    :meth:`Ledger.release` enforces it)."""
    rule = CompositionRule(ds.rule)
    spent = _compose(old, rule, ds.delta)
    args = (ds.fingerprint, rule, ds.epsilon, ds.delta, spent)
    try:
        after = _compose([*old, *new], rule, ds.delta)
    except BudgetError as exc:
        return ReleasePreview(
            *args, math.inf, math.inf, False,
            f"This release cannot be accounted within the lifetime budget (ε = {ds.epsilon:g}, "
            f"δ = {ds.delta:g}, {rule.value} rule): {exc}",
        )
    release = after - spent
    if _within_budget(after, ds.epsilon):
        return ReleasePreview(*args, release, after, True)
    remaining = ds.epsilon - spent
    return ReleasePreview(
        *args, release, after, False,
        f"This release needs ε = {release:.4g} under the {rule.value} rule, but only "
        f"ε = {max(remaining, 0.0):.4g} of the lifetime budget ε = {ds.epsilon:g} remains "
        f"(short by {release - remaining:.3g}). {_remedy(rule)}",
    )


# --------------------------------------------------------------------------- ledger


class _InProgress:
    """Marker: the same plan is being released by a live process."""


_IN_PROGRESS: Final = _InProgress()


class Ledger:
    """The persistent privacy ledger (SQLite by default, any SQLAlchemy URL).

    Parameters
    ----------
    url : str, optional
        A SQLAlchemy URL. Defaults to :func:`default_ledger_url` (``$PLANNER_LEDGER_URL``
        or ``sqlite:///$PLANNER_HOME/ledger.db``). The tables are created if missing and
        pending releases whose process is gone are marked ``spent_no_answers``.

    Raises
    ------
    LedgerError
        If the URL is invalid, its driver is missing or the database cannot be opened.

    Examples
    --------
    >>> from planner.accounting import Spend
    >>> from planner.events import PureEvent
    >>> ledger = Ledger("sqlite://")
    >>> _ = ledger.register_dataset("fp", "survey", epsilon=1.0, delta=1e-6, rule="basic")
    >>> spend = Spend(event=PureEvent(0.25), epsilon=0.25, delta=0.0)
    >>> rec = ledger.release("fp", "plan-1", "schema-1", [("q1", spend)], lambda: {"q1": 41.7})
    >>> rec.status.value, rec.answers
    ('done', {'q1': 41.7})
    >>> ledger.status("fp").epsilon_remaining
    0.75
    >>> ledger.close()
    """

    def __init__(self, url: str | None = None) -> None:
        raw = default_ledger_url() if url is None else url
        try:
            parsed: URL = make_url(raw)
        except (sa_exc.ArgumentError, ValueError) as exc:
            raise LedgerError(
                f"the ledger URL is not a valid SQLAlchemy URL; got {raw!r}. Set "
                f"{ENV_URL} to e.g. sqlite:///path/to/ledger.db or "
                "postgresql+psycopg://user@host/dbname."
            ) from exc
        self._url = parsed
        self._is_sqlite = parsed.get_backend_name() == "sqlite"
        self._engine = self._make_engine(parsed)
        self._create_tables()
        self.repair()

    # ------------------------------------------------------------------ engine

    @property
    def url(self) -> str:
        """The database URL, password hidden."""
        return self._url.render_as_string(hide_password=True)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for diagnostics and tests)."""
        return self._engine

    def close(self) -> None:
        """Close every pooled connection (call before ``fork``; the ledger stays usable)."""
        self._engine.dispose()

    def _make_engine(self, url: URL) -> Engine:
        shown = url.render_as_string(hide_password=True)
        try:
            if self._is_sqlite:
                database = url.database or ""
                memory = database in ("", ":memory:") or database.startswith("file::memory:")
                if not memory:
                    try:
                        Path(database).expanduser().resolve().parent.mkdir(
                            parents=True, exist_ok=True
                        )
                    except OSError as exc:
                        raise LedgerError(
                            f"cannot create the ledger directory for {shown}: {exc.strerror}. "
                            f"Point {ENV_URL} or {ENV_HOME} at a writable location."
                        ) from exc
                engine = create_engine(
                    url,
                    connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_SECONDS},
                    poolclass=StaticPool if memory else None,
                )
                _install_sqlite_listeners(engine)
                return engine
            return create_engine(url, pool_pre_ping=True)
        except (sa_exc.NoSuchModuleError, ModuleNotFoundError, ImportError) as exc:
            raise LedgerError(
                f"no database driver for the ledger URL {shown}. Install it "
                "(e.g. pip install 'psycopg[binary]' for postgresql+psycopg://) or use a "
                "sqlite:/// URL."
            ) from exc

    def _create_tables(self) -> None:
        try:
            with self._engine.connect() as conn:
                if self._is_sqlite:
                    conn = conn.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
                with conn.begin():
                    LEDGER_METADATA.create_all(conn)
        except sa_exc.IntegrityError:
            # Another process created the tables between the check and the CREATE.
            LEDGER_METADATA.create_all(self._engine)
        except sa_exc.ProgrammingError:
            LEDGER_METADATA.create_all(self._engine)
        except sa_exc.OperationalError as exc:
            raise LedgerError(
                f"cannot open the ledger at {self.url}: {type(exc.orig).__name__}. Check that "
                f"the location is writable and reachable, or set {ENV_URL}."
            ) from exc

    @contextmanager
    def _session(self, *, write: bool) -> Iterator[Session]:
        """One short session; a write session takes SQLite's write lock at BEGIN."""
        with Session(self._engine, expire_on_commit=False) as session:
            if write and self._is_sqlite:
                session.connection(execution_options={_BEGIN_OPTION: "IMMEDIATE"})
            yield session

    # ------------------------------------------------------------------ datasets

    def register_dataset(
        self,
        fingerprint: str,
        name: str,
        epsilon: float,
        delta: float,
        rule: CompositionRule | str,
    ) -> DatasetInfo:
        """Register a dataset's total budget (idempotent for the same budget).

        Parameters
        ----------
        fingerprint : str
            The dataset's fingerprint (the ledger's key).
        name : str
            A display name (kept from the first registration).
        epsilon, delta : float
            The total budget: ε > 0, 0 ≤ δ < 1.
        rule : CompositionRule or str
            The composition rule every spend is composed under.

        Returns
        -------
        DatasetInfo

        Raises
        ------
        BudgetError
            If ε, δ or the rule is invalid.
        LedgerError
            If the fingerprint is registered with a different total budget or rule.
        """
        _check_text(fingerprint, "fingerprint")
        eps = check_epsilon(epsilon)
        dlt = check_delta(delta)
        rl = _coerce_rule(rule)
        for attempt in range(2):
            try:
                with self._session(write=True) as s:
                    row = s.exec(
                        select(DatasetRow).where(col(DatasetRow.fingerprint) == fingerprint)
                    ).first()
                    if row is None:
                        row = DatasetRow(
                            fingerprint=fingerprint,
                            name=str(name),
                            epsilon=eps,
                            delta=dlt,
                            rule=rl.value,
                            created_at=_utcnow(),
                        )
                        s.add(row)
                        s.commit()
                    elif (row.epsilon, row.delta, row.rule) != (eps, dlt, rl.value):
                        raise LedgerError(
                            f"dataset {fingerprint!r} is already registered with total budget "
                            f"ε = {row.epsilon}, δ = {row.delta}, rule {row.rule}; got ε = {eps}, "
                            f"δ = {dlt}, rule {rl.value}. A total budget is fixed once set so "
                            "that earlier spends cannot be outgrown. Register it again with the "
                            "recorded budget, or, if this really is a new dataset, give it its "
                            f"own fingerprint (or its own ledger via {ENV_URL})."
                        )
                    return _dataset_info(row)
            except sa_exc.IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def raise_budget(
        self, fingerprint: str, epsilon: float, delta: float, *, reason: str
    ) -> DatasetInfo:
        """Raise a dataset's lifetime budget: a deliberate action, recorded with its reason.

        The budget can only grow (ε and δ each at least their current value, one of them
        larger), so nothing already spent is ever outgrown; the change is kept in the
        ledger (:meth:`budget_changes`) and exported with it.

        Raises
        ------
        BudgetError
            Invalid ε or δ.
        LedgerError
            Unknown dataset, an empty reason, or a value below the current budget.
        """
        _check_text(fingerprint, "fingerprint")
        eps = check_epsilon(epsilon)
        dlt = check_delta(delta)
        if not isinstance(reason, str) or not reason.strip():
            raise LedgerError(
                "raising a lifetime budget needs a reason (who decided it, and why); "
                "it is recorded in the ledger."
            )
        with self._session(write=True) as s:
            ds = self._dataset_row(s, fingerprint, lock=True)
            assert ds.id is not None
            if eps < ds.epsilon or dlt < ds.delta:
                raise LedgerError(
                    f"a lifetime budget can only be raised: it is ε = {ds.epsilon:g}, "
                    f"δ = {ds.delta:g}; got ε = {eps:g}, δ = {dlt:g}. Spends already recorded "
                    "can never be taken back."
                )
            if (eps, dlt) == (ds.epsilon, ds.delta):
                raise LedgerError(
                    f"the lifetime budget is already ε = {ds.epsilon:g}, δ = {ds.delta:g}; "
                    "give a larger ε or δ to raise it."
                )
            s.add(
                BudgetChangeRow(
                    dataset_id=ds.id, old_epsilon=ds.epsilon, old_delta=ds.delta,
                    new_epsilon=eps, new_delta=dlt, reason=reason.strip(), created_at=_utcnow(),
                )
            )
            ds.epsilon, ds.delta = eps, dlt
            s.add(ds)
            s.commit()
            return _dataset_info(ds)

    def budget_changes(self, fingerprint: str) -> list[BudgetChange]:
        """Every recorded raise of the dataset's lifetime budget, oldest first."""
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            rows = s.exec(
                select(BudgetChangeRow)
                .where(col(BudgetChangeRow.dataset_id) == ds.id)
                .order_by(col(BudgetChangeRow.id))
            ).all()
            return [
                BudgetChange(r.old_epsilon, r.old_delta, r.new_epsilon, r.new_delta, r.reason,
                             _aware(r.created_at))
                for r in rows
            ]

    def preview(self, fingerprint: str, spends: Sequence[Spend]) -> ReleasePreview:
        """What releasing ``spends`` would cost on the dataset, and whether it fits.

        Nothing is recorded. The check is the one :meth:`release` enforces, on the spends
        recorded so far; a concurrent release may still take the budget first, so the
        release itself checks again under its lock.
        """
        ds, releases = self._snapshot(fingerprint)
        old = [sp.spend for rec in releases for sp in rec.spends]
        return _preview(ds, old, list(spends))

    def datasets(self) -> list[DatasetInfo]:
        """Every registered dataset, oldest first."""
        with self._session(write=False) as s:
            rows = s.exec(
                select(DatasetRow).order_by(col(DatasetRow.created_at), col(DatasetRow.id))
            ).all()
            return [_dataset_info(r) for r in rows]

    def dataset(self, fingerprint: str) -> DatasetInfo:
        """One registered dataset; :class:`LedgerError` if unknown."""
        with self._session(write=False) as s:
            return _dataset_info(self._dataset_row(s, fingerprint, lock=False))

    def _dataset_row(self, s: Session, fingerprint: str, *, lock: bool) -> DatasetRow:
        row = s.exec(_dataset_stmt(fingerprint, lock=lock)).first()
        if row is None:
            raise LedgerError(
                f"dataset {fingerprint!r} is not in the ledger at {self.url}. Register its "
                "total budget first (Ledger.register_dataset)."
            )
        return row

    # ------------------------------------------------------------------ reading

    def status(self, fingerprint: str) -> BudgetStatus:
        """The dataset's budget now: total, spent under its rule, remaining, releases.

        Raises
        ------
        LedgerError
            If the dataset is not registered.
        """
        ds, releases = self._snapshot(fingerprint)
        return _status_of(ds, releases)

    def releases(self, fingerprint: str) -> list[ReleaseRecord]:
        """Every release of the dataset, oldest first, with its spends and answers.

        A pending release whose process is gone is reported as ``spent_no_answers``.
        """
        return self._snapshot(fingerprint)[1]

    def history(self, fingerprint: str) -> list[HistoryPoint]:
        """Cumulative spent ε (under the dataset's rule) after each release, in time order."""
        ds, releases = self._snapshot(fingerprint)
        return _history_of(ds, releases)

    def export(self, fingerprint: str, *, include_answers: bool = False) -> dict[str, Any]:
        """The dataset's ledger as a JSON-able dict (one consistent snapshot).

        Parameters
        ----------
        fingerprint : str
            The dataset.
        include_answers : bool, default False
            Include the released answer values. Off by default: the export then holds only
            budgets, spends, events and hashes.

        Returns
        -------
        dict
            ``{"format", "version", "dataset", "status", "releases", "history"}``;
            non-finite floats in budgets become ``None``.
        """
        ds, releases = self._snapshot(fingerprint)
        return {
            "format": "privacy-budget-planner/ledger",
            "version": 1,
            "dataset": _dataset_info(ds).to_dict(),
            "status": _status_of(ds, releases).to_dict(),
            "releases": [r.to_dict(include_answers=include_answers) for r in releases],
            "history": [h.to_dict() for h in _history_of(ds, releases)],
            "budget_changes": [c.to_dict() for c in self.budget_changes(fingerprint)],
        }

    def _snapshot(self, fingerprint: str) -> tuple[DatasetRow, list[ReleaseRecord]]:
        """The dataset row and all its releases, read in one transaction."""
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            return ds, self._load_releases(s, ds)

    def _load_releases(self, s: Session, ds: DatasetRow) -> list[ReleaseRecord]:
        rows = s.exec(
            select(ReleaseRow)
            .where(col(ReleaseRow.dataset_id) == ds.id)
            .order_by(col(ReleaseRow.created_at), col(ReleaseRow.id))
        ).all()
        if not rows:
            return []
        ids = [r.id for r in rows]
        spend_rows = s.exec(
            select(SpendRow).where(col(SpendRow.release_id).in_(ids)).order_by(col(SpendRow.id))
        ).all()
        answer_rows = s.exec(
            select(AnswerRow).where(col(AnswerRow.release_id).in_(ids)).order_by(col(AnswerRow.id))
        ).all()
        spends: dict[int, list[SpendRecord]] = {}
        for sr in spend_rows:
            spends.setdefault(sr.release_id, []).append(_spend_record(sr))
        answers: dict[int, dict[str, JSON]] = {}
        for ar in answer_rows:
            answers.setdefault(ar.release_id, {})[ar.query_id] = json.loads(ar.payload_json)
        out: list[ReleaseRecord] = []
        for r in rows:
            assert r.id is not None
            status = _effective_status(r)
            out.append(
                _release_record(
                    r,
                    ds.fingerprint,
                    status,
                    tuple(spends.get(r.id, ())),
                    answers.get(r.id, {}) if status is ReleaseStatus.DONE else None,
                )
            )
        return out

    # ------------------------------------------------------------------ repair

    def repair(self) -> int:
        """Mark pending releases whose process is gone as ``spent_no_answers``.

        Runs on every open. The spend stays counted; nothing is refunded.

        Returns
        -------
        int
            How many releases were marked.
        """
        with self._session(write=False) as s:
            pending = s.exec(
                select(ReleaseRow).where(col(ReleaseRow.status) == ReleaseStatus.PENDING.value)
            ).all()
            dead = [r.id for r in pending if not _owner_alive(r.owner, r.created_at)]
        if not dead:
            return 0
        marked = 0
        with self._session(write=True) as s:
            rows = s.exec(select(ReleaseRow).where(col(ReleaseRow.id).in_(dead))).all()
            for r in rows:
                if r.status == ReleaseStatus.PENDING.value and not _owner_alive(
                    r.owner, r.created_at
                ):
                    r.status = ReleaseStatus.SPENT_NO_ANSWERS.value
                    r.error = r.error or "the releasing process ended before storing answers"
                    s.add(r)
                    marked += 1
            s.commit()
        return marked

    def integrity_check(self) -> list[str]:
        """Problems found in the ledger (an empty list when it is consistent).

        Runs SQLite's ``PRAGMA integrity_check`` and ``foreign_key_check`` (SQLite only),
        and checks that every release has at least one spend and a known status.
        """
        problems: list[str] = []
        with self._engine.connect() as conn:
            if self._is_sqlite:
                rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA integrity_check")]
                if rows != ["ok"]:
                    problems.extend(f"integrity_check: {r}" for r in rows)
                for fk in conn.exec_driver_sql("PRAGMA foreign_key_check"):
                    problems.append(f"foreign_key_check: {tuple(fk)}")
            conn.rollback()
        with self._session(write=False) as s:
            known = {st.value for st in ReleaseStatus if st is not ReleaseStatus.REUSED}
            with_spends = set(s.exec(select(SpendRow.release_id).distinct()).all())
            for r in s.exec(select(ReleaseRow)).all():
                if r.status not in known:
                    problems.append(f"release {r.id} has unknown status {r.status!r}")
                if r.id not in with_spends:
                    problems.append(f"release {r.id} has no spends")
        return problems

    # ------------------------------------------------------------------ release

    def release(
        self,
        fingerprint: str,
        plan_hash: str,
        schema_hash: str,
        spends: Sequence[tuple[str, Spend]],
        sample: Callable[[], Mapping[str, JSON]],
        *,
        wait_seconds: float = WAIT_FOR_SAME_PLAN_SECONDS,
    ) -> ReleaseRecord:
        """Check the budget, record the spend, sample, store the answers — in that order.

        Parameters
        ----------
        fingerprint : str
            The dataset (registered with :meth:`register_dataset`).
        plan_hash : str
            Identifies the plan; a plan is released at most once per dataset. Releasing the
            same plan hash again returns the stored answers without sampling.
        schema_hash : str
            The schema the plan was made under (recorded).
        spends : sequence of (query_id, Spend)
            One entry per mechanism invocation; query ids must be unique.
        sample : callable
            Draws the noise and returns ``{query_id: answer}`` (JSON values). Called at
            most once, after the spend is committed and outside any transaction.
        wait_seconds : float, default 60
            How long to wait when the same plan is being released right now by another
            thread or process (its answers are then returned, status ``reused``).

        Returns
        -------
        ReleaseRecord
            Status ``done`` (sampled now) or ``reused`` (answered earlier).

        Raises
        ------
        BudgetExceededError
            If the new spends do not fit in what remains under the dataset's rule.
        LedgerError
            If the dataset is unknown, the plan was released before but its answers were
            lost (the budget stays spent; it is never sampled again), or the answers
            cannot be stored.
        Exception
            Whatever ``sample()`` raises propagates; the spend stays counted and the
            release is marked ``spent_no_answers``.
        """
        _check_text(fingerprint, "fingerprint")
        _check_text(plan_hash, "plan_hash")
        _check_text(schema_hash, "schema_hash")
        prepared = _prepare_spends(spends)
        nonce = uuid.uuid4().hex
        deadline = time.monotonic() + max(0.0, float(wait_seconds))
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.add(nonce)
        try:
            while True:
                try:
                    outcome = self._reserve(fingerprint, plan_hash, schema_hash, prepared, nonce)
                except sa_exc.OperationalError as exc:
                    raise LedgerError(
                        f"the ledger at {self.url} could not record the spend of plan "
                        f"{plan_hash!r} ({type(exc.orig).__name__}: it may be busy or "
                        "unreachable). Nothing was spent or sampled; try again."
                    ) from exc
                if not isinstance(outcome, _InProgress):
                    break
                if time.monotonic() >= deadline:
                    raise LedgerError(
                        f"plan {plan_hash!r} on dataset {fingerprint!r} is being released by "
                        f"another session and did not finish within {wait_seconds:g} s. "
                        "Reload in a moment: its stored answers will be shown."
                    )
                time.sleep(0.05)
            if isinstance(outcome, ReleaseRecord):
                return outcome
            release_id = outcome
            try:
                raw_answers = sample()
            except BaseException as exc:
                self._mark_lost(release_id, type(exc).__name__)
                raise
            try:
                payload = _serialise_answers(raw_answers)
            except (TypeError, ValueError) as exc:
                self._mark_lost(release_id, type(exc).__name__)
                raise LedgerError(
                    f"the answers of plan {plan_hash!r} are not JSON values, so they could not "
                    "be stored; the budget stays spent and the plan will not be sampled again. "
                    "Return plain numbers, strings, lists and dicts from sample()."
                ) from exc
            return self._store_answers(release_id, fingerprint, plan_hash, payload)
        finally:
            with _IN_FLIGHT_LOCK:
                _IN_FLIGHT.discard(nonce)

    def _reserve(
        self,
        fingerprint: str,
        plan_hash: str,
        schema_hash: str,
        prepared: list[tuple[str, Spend, str, float | None]],
        nonce: str,
    ) -> int | ReleaseRecord | _InProgress:
        """Transaction 1: lock, dedupe, check the budget, record the spend, commit."""
        with self._session(write=True) as s:
            ds = self._dataset_row(s, fingerprint, lock=True)
            assert ds.id is not None
            existing = s.exec(
                select(ReleaseRow).where(
                    col(ReleaseRow.dataset_id) == ds.id, col(ReleaseRow.plan_hash) == plan_hash
                )
            ).first()
            if existing is not None:
                return self._existing(s, ds, existing, plan_hash, prepared)
            old = [
                _spend_record(r).spend
                for r in s.exec(
                    select(SpendRow)
                    .join(ReleaseRow, col(SpendRow.release_id) == col(ReleaseRow.id))
                    .where(col(ReleaseRow.dataset_id) == ds.id)
                    .order_by(col(SpendRow.id))
                ).all()
            ]
            new = [sp for _, sp, _, _ in prepared]
            preview = _preview(ds, old, new)
            if not preview.fits:
                raise BudgetExceededError(preview.reason)
            row = ReleaseRow(
                dataset_id=ds.id,
                plan_hash=plan_hash,
                schema_hash=schema_hash,
                created_at=_utcnow(),
                status=ReleaseStatus.PENDING.value,
                owner=_owner_token(nonce),
            )
            s.add(row)
            s.flush()
            assert row.id is not None
            for qid, sp, event_json, rho in prepared:
                s.add(
                    SpendRow(
                        release_id=row.id,
                        query_id=qid,
                        epsilon=sp.epsilon,
                        delta=sp.delta,
                        rho=rho,
                        event_json=event_json,
                    )
                )
            release_id = row.id
            s.commit()
            return release_id

    def _existing(
        self,
        s: Session,
        ds: DatasetRow,
        existing: ReleaseRow,
        plan_hash: str,
        prepared: list[tuple[str, Spend, str, float | None]],
    ) -> ReleaseRecord | _InProgress:
        """The plan was released before: reuse its answers, wait for it, or refuse."""
        if existing.status == ReleaseStatus.DONE.value:
            recs = [r for r in self._load_releases(s, ds) if r.release_id == existing.id]
            stored = {sp.query_id for sp in recs[0].spends}
            asked = {qid for qid, _, _, _ in prepared}
            if stored != asked:
                raise LedgerError(
                    f"plan hash {plan_hash!r} was released on dataset {ds.fingerprint!r} with "
                    f"queries {sorted(stored)}, not {sorted(asked)}. The plan hash must "
                    "identify the plan: hash the full plan (queries, mechanisms, ε)."
                )
            rec = recs[0]
            return _release_record_with(rec, ReleaseStatus.REUSED)
        if existing.status == ReleaseStatus.PENDING.value and _owner_alive(
            existing.owner, existing.created_at
        ):
            return _IN_PROGRESS
        if existing.status == ReleaseStatus.PENDING.value:
            existing.status = ReleaseStatus.SPENT_NO_ANSWERS.value
            existing.error = "the releasing process ended before storing answers"
            s.add(existing)
            s.commit()
        raise LedgerError(
            f"plan {plan_hash!r} was already released on dataset {ds.fingerprint!r} "
            f"(release {existing.id}, {_aware(existing.created_at).isoformat()}): its budget was "
            "spent but its answers were lost before they were stored. The spend stays counted "
            "and the plan will not be sampled again, since a second draw would spend the "
            "budget twice. Make a new plan (it will be charged as a new release)."
        )

    def _mark_lost(self, release_id: int, reason: str) -> None:
        """Best effort after ``sample()`` failed: the spend stays, the answers are lost."""
        try:
            with self._session(write=True) as s:
                row = s.get(ReleaseRow, release_id)
                if row is not None and row.status == ReleaseStatus.PENDING.value:
                    row.status = ReleaseStatus.SPENT_NO_ANSWERS.value
                    row.error = f"sampling failed ({reason})"
                    s.add(row)
                    s.commit()
        except sa_exc.SQLAlchemyError:
            # The row stays pending; its claim leaves _IN_FLIGHT, so the next reader
            # reports it as spent_no_answers anyway.
            pass

    def _store_answers(
        self, release_id: int, fingerprint: str, plan_hash: str, payload: dict[str, str]
    ) -> ReleaseRecord:
        """Transaction 2: store every answer and mark the release done, atomically."""
        try:
            with self._session(write=True) as s:
                row = s.get(ReleaseRow, release_id)
                if row is None or row.status != ReleaseStatus.PENDING.value:
                    raise LedgerError(
                        f"release {release_id} of plan {plan_hash!r} is no longer pending; its "
                        "answers were not stored. The budget stays spent."
                    )
                for qid, text in payload.items():
                    s.add(AnswerRow(release_id=release_id, query_id=qid, payload_json=text))
                row.status = ReleaseStatus.DONE.value
                row.answered_at = _utcnow()
                s.add(row)
                s.commit()
        except sa_exc.SQLAlchemyError as exc:
            self._mark_lost(release_id, type(exc).__name__)
            raise LedgerError(
                f"the answers of plan {plan_hash!r} could not be stored in the ledger at "
                f"{self.url} ({type(exc).__name__}); the budget stays spent and the plan will "
                "not be sampled again."
            ) from exc
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            recs = [r for r in self._load_releases(s, ds) if r.release_id == release_id]
        return recs[0]


# --------------------------------------------------------------------------- internals


def _install_sqlite_listeners(engine: Engine) -> None:
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
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = FULL")
            cur.execute("PRAGMA foreign_keys = ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def _dataset_stmt(fingerprint: str, *, lock: bool) -> SelectOfScalar[DatasetRow]:
    """``SELECT`` the dataset row; ``FOR UPDATE`` when locking (a no-op on SQLite, which is
    locked by ``BEGIN IMMEDIATE`` instead)."""
    stmt = select(DatasetRow).where(col(DatasetRow.fingerprint) == fingerprint)
    return stmt.with_for_update() if lock else stmt


def _prepare_spends(
    spends: Sequence[tuple[str, Spend]],
) -> list[tuple[str, Spend, str, float | None]]:
    """Validate the spends and serialise their events before any transaction opens."""
    if len(spends) == 0:
        raise LedgerError("a release needs at least one spend; got none. Add a query to the plan.")
    out: list[tuple[str, Spend, str, float | None]] = []
    seen: set[str] = set()
    for item in spends:
        try:
            qid, sp = item
        except (TypeError, ValueError) as exc:
            raise LedgerError(
                f"spends must be (query_id, Spend) pairs; got {type(item).__name__}."
            ) from exc
        _check_text(qid, "query_id")
        if qid in seen:
            raise LedgerError(f"query_id {qid!r} appears twice in one release; ids must be unique.")
        seen.add(qid)
        if not isinstance(sp, Spend):
            raise LedgerError(f"spend of query {qid!r} must be a Spend; got {type(sp).__name__}.")
        eps = float(sp.epsilon)
        if not (math.isfinite(eps) and eps >= 0.0):
            raise BudgetError(
                f"epsilon of query {qid!r} must be ≥ 0 and finite; got {eps}. Assign a finite ε."
            )
        check_delta(sp.delta, f"delta of query {qid!r}")
        rho = float(event_rho(sp.event))
        out.append((qid, sp, json.dumps(sp.event.to_dict(), sort_keys=True), _finite_or_none(rho)))
    return out


def _serialise_answers(answers: Mapping[str, JSON]) -> dict[str, str]:
    """``{query_id: JSON text}``; ``TypeError``/``ValueError`` if not JSON-able."""
    if not isinstance(answers, Mapping):
        raise TypeError(f"sample() must return a mapping; got {type(answers).__name__}")
    return {str(k): json.dumps(v) for k, v in answers.items()}


def _spend_record(row: SpendRow) -> SpendRecord:
    ev = event_from_dict(json.loads(row.event_json))
    return SpendRecord(
        query_id=row.query_id,
        epsilon=row.epsilon,
        delta=row.delta,
        rho=math.inf if row.rho is None else row.rho,
        event=ev,
    )


def _effective_status(row: ReleaseRow) -> ReleaseStatus:
    status = ReleaseStatus(row.status)
    if status is ReleaseStatus.PENDING and not _owner_alive(row.owner, row.created_at):
        return ReleaseStatus.SPENT_NO_ANSWERS
    return status


def _status_of(ds: DatasetRow, releases: Sequence[ReleaseRecord]) -> BudgetStatus:
    rule = CompositionRule(ds.rule)
    spent = _compose([sp.spend for rec in releases for sp in rec.spends], rule, ds.delta)
    return BudgetStatus(
        fingerprint=ds.fingerprint,
        name=ds.name,
        epsilon_total=ds.epsilon,
        delta_total=ds.delta,
        rule=rule,
        epsilon_spent=spent,
        epsilon_remaining=ds.epsilon - spent,
        releases=len(releases),
        releases_without_answers=sum(
            1 for r in releases if r.status is ReleaseStatus.SPENT_NO_ANSWERS
        ),
    )


def _history_of(ds: DatasetRow, releases: Sequence[ReleaseRecord]) -> list[HistoryPoint]:
    rule = CompositionRule(ds.rule)
    points: list[HistoryPoint] = []
    spends: list[Spend] = []
    before = 0.0
    for rec in releases:
        spends.extend(sp.spend for sp in rec.spends)
        after = _compose(spends, rule, ds.delta)
        points.append(
            HistoryPoint(
                release_id=rec.release_id,
                plan_hash=rec.plan_hash,
                created_at=rec.created_at,
                status=rec.status,
                epsilon_spent=after,
                epsilon_release=after - before,
            )
        )
        before = after
    return points


def _dataset_info(row: DatasetRow) -> DatasetInfo:
    return DatasetInfo(
        fingerprint=row.fingerprint,
        name=row.name,
        epsilon=row.epsilon,
        delta=row.delta,
        rule=CompositionRule(row.rule),
        created_at=_aware(row.created_at),
    )


def _release_record(
    row: ReleaseRow,
    fingerprint: str,
    status: ReleaseStatus,
    spends: tuple[SpendRecord, ...],
    answers: dict[str, JSON] | None,
) -> ReleaseRecord:
    assert row.id is not None
    return ReleaseRecord(
        release_id=row.id,
        fingerprint=fingerprint,
        plan_hash=row.plan_hash,
        schema_hash=row.schema_hash,
        created_at=_aware(row.created_at),
        status=status,
        spends=spends,
        answers=answers,
        answered_at=None if row.answered_at is None else _aware(row.answered_at),
    )


def _release_record_with(rec: ReleaseRecord, status: ReleaseStatus) -> ReleaseRecord:
    return ReleaseRecord(
        release_id=rec.release_id,
        fingerprint=rec.fingerprint,
        plan_hash=rec.plan_hash,
        schema_hash=rec.schema_hash,
        created_at=rec.created_at,
        status=status,
        spends=rec.spends,
        answers=rec.answers,
        answered_at=rec.answered_at,
    )
