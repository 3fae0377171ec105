"""The privacy ledger: datasets and their lifetime budgets, every spend, every release,
who made it, and proof that nothing was forgotten.

The ledger is the only durable state of the engine. It keeps registered datasets (a
name, a schema hash, a lifetime budget (ε, δ) and composition rule), the keyed
fingerprints of their content *versions*, every release made against a dataset (with the
principal who made it), every spend (one mechanism invocation, in every currency the
accountants need), the noisy answers each release produced, the organisation's local
accounts and the grants owners gave analysts and viewers. Its one non-trivial operation
is :meth:`Ledger.release`, which enforces the order fixed in PRODUCT.md §5:

1. lock the ledger head and the dataset and read its spends;
2. a release whose plan hash was already answered returns its stored answers (nothing
   is sampled again); one that was committed but lost its answers raises;
3. check that the new spends fit the dataset's budget (and, for an analyst, the budget
   granted to them): ``total_epsilon(old + new, rule, δ) ≤ ε`` (:func:`_preview`, the one
   definition of the check; :meth:`Ledger.preview` shows it);
4. insert the spends and a *pending* release holding a **lease**, journal it, **commit**;
5. call ``sample()`` (the only place noise is drawn), outside any transaction, while a
   heartbeat thread renews the lease;
6. store the answers and mark the release *done* in a second, journaled transaction.

A crash between 4 and 6 leaves the spend counted and the release pending; once its lease
expires (nobody renews it) the next reader reports and repairs it as
``spent_no_answers``. The budget is never refunded and a plan is never sampled twice.
Liveness is the lease alone, never a process id: a release running in another PID
namespace, container or host stays alive as long as its heartbeat renews the lease.

Who may do what is decided by :func:`planner.ledger.accounts.authorize`; every method that
spends, registers, raises, grants, lists or reads takes an ``actor``
(:class:`planner.ledger.accounts.Principal`). A ledger without accounts is a single-user ledger
whose caller is :data:`planner.ledger.accounts.LOCAL_OWNER`; once an account exists, callers must
sign in (an explicit ``actor``, or ``PLANNER_USER``/``PLANNER_PASSWORD`` for the command
line).

Secret samples (:mod:`planner.privacy.sampling`): a dataset registered with a sampling declaration
(the table is a secret random sample of a population at a public rate q) has a lifetime
budget for the *population*. Every check composes all its recorded spends on the sample at
δ/q under the dataset's rule and amplifies the composed total *once*:
ε_pop = ln(1 + q(e^ε − 1)), δ_pop = q·(δ/q) (Balle, Barthe & Gaboardi 2018, Thms 9–10;
:func:`planner.privacy.sampling.sampled_total_epsilon`). Amplifying each release separately and
adding the results would be wrong: every release reads the same sample.

Integrity (:mod:`planner.ledger.integrity`): every change is journaled in a hash chain
keyed with the server secret, the journal's replay must equal the tables, and a marker
outside the database records the newest entry seen, so an emptied, truncated, rolled
back or edited ledger is refused with a message (:meth:`Ledger.verify`,
``planner ledger verify``).

Storage
-------
SQLite by default: ``sqlite:///$PLANNER_HOME/ledger.db`` (``~/.privacy-budget-planner``
when ``PLANNER_HOME`` is unset); any SQLAlchemy URL in ``PLANNER_LEDGER_URL`` (or passed to
:class:`Ledger`) overrides it, e.g. ``postgresql+psycopg://user@host/db`` (tested against a
live PostgreSQL server by the test command). SQLite connections use WAL, a 30 s busy
timeout, ``synchronous=FULL``, foreign keys and ``BEGIN IMMEDIATE`` for every write
transaction (SQLAlchemy's documented pysqlite event recipe); on other databases every
write transaction first locks the one ``ledger_head`` row with ``SELECT … FOR UPDATE``.
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
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

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
    inspect,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import registry as sa_registry
from sqlalchemy.pool import StaticPool
from sqlmodel import Field, Session, SQLModel, col, select
from sqlmodel.sql.expression import SelectOfScalar

from planner.core.errors import (
    AccountError,
    BudgetError,
    BudgetExceededError,
    LedgerError,
    LedgerIntegrityError,
    PermissionDenied,
    PlannerError,
)
from planner.core.keys import (
    keyed_fingerprint,
    random_hex,
    secret_check,
    secret_source,
    server_secret,
)
from planner.core.strict_json import JSON, check_depth, strict_delta, strict_epsilon
from planner.ledger.accounts import (
    LOCAL_OWNER,
    Action,
    GrantInfo,
    Principal,
    Role,
    authorize,
    check_username,
    hash_password,
    normalise_subject,
    password_needs_rehash,
    verify_password,
)
from planner.ledger.integrity import (
    GENESIS_MAC,
    Marker,
    MarkerState,
    VerifyReport,
    canonical,
    canonical_value,
    chain_key,
    compare,
    entry_mac,
    replay,
)
from planner.privacy.accounting import CompositionRule, Spend, event_rho, total_epsilon
from planner.privacy.budget import check_delta, check_epsilon
from planner.privacy.events import PrivacyEvent, event_from_dict
from planner.privacy.sampling import Sampling, SamplingScheme, sampled_total_epsilon

__all__ = [
    "ENV_HOME",
    "ENV_LEASE",
    "ENV_PASSWORD",
    "ENV_PASSWORD_FILE",
    "ENV_URL",
    "ENV_USER",
    "FORMAT_VERSION",
    "JSON",
    "LEDGER_METADATA",
    "AccountInfo",
    "BudgetChange",
    "BudgetStatus",
    "DatasetInfo",
    "HistoryPoint",
    "Ledger",
    "ReleasePreview",
    "ReleaseRecord",
    "ReleaseStatus",
    "SpendRecord",
    "VerifyReport",
    "VersionInfo",
    "default_ledger_url",
    "verify_ledger",
]


#: Environment variable holding any SQLAlchemy URL for the ledger.
ENV_URL: Final = "PLANNER_LEDGER_URL"
#: Environment variable naming the planner's home directory (default ledger location).
ENV_HOME: Final = "PLANNER_HOME"
#: Lease of a pending release, in seconds (renewed every quarter of it while sampling).
ENV_LEASE: Final = "PLANNER_LEASE_SECONDS"
#: Credentials of the command line (and scripts) on a ledger with accounts.
ENV_USER: Final = "PLANNER_USER"
ENV_PASSWORD: Final = "PLANNER_PASSWORD"
ENV_PASSWORD_FILE: Final = "PLANNER_PASSWORD_FILE"
_DEFAULT_HOME: Final = "~/.privacy-budget-planner"

#: The ledger's storage format (1: before accounts and the journal; 2: before secret
#: samples, i.e. without the datasets' sampling columns). Older formats are migrated on open.
FORMAT_VERSION: Final = 3
#: SQLite busy timeout: how long a writer waits for the write lock.
BUSY_TIMEOUT_SECONDS: Final = 30.0
#: Relative slack on the budget check, for float noise only (1e-12 of the total).
BUDGET_REL_TOLERANCE: Final = 1e-12
#: Default lease of a pending release; it is dead once the lease expired unrenewed.
LEASE_SECONDS: Final = 30.0
#: How long :meth:`Ledger.release` waits for a concurrent release of the same plan.
WAIT_FOR_SAME_PLAN_SECONDS: Final = 60.0
#: Longest stored text accepted from a caller (names, reasons, hashes).
MAX_TEXT_CHARS: Final = 1000

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
    """One registered dataset and its lifetime budget.

    ``fingerprint`` is the dataset's public key (``ds-`` and 20 random hex digits): it
    names the dataset in exports and calls and says nothing about its content.
    """

    __tablename__ = "datasets"

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(sa_column=Column(Text, nullable=False, unique=True, index=True))
    name: str = Field(sa_column=Column(Text, nullable=False))
    epsilon: float = Field(sa_column=Column(Float, nullable=False))
    delta: float = Field(sa_column=Column(Float, nullable=False))
    rule: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    schema_hash: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    registered_by: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # format 3: the secret-sample declaration given at registration (both NULL: not a sample)
    sampling_rate: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    sampling_scheme: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class VersionRow(_LedgerModel, table=True):
    """One content version of a dataset: the keyed fingerprint of its content digest."""

    __tablename__ = "dataset_versions"

    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(
        sa_column=Column(Integer, ForeignKey("datasets.id"), nullable=False, index=True)
    )
    fingerprint: str = Field(sa_column=Column(Text, nullable=False, unique=True, index=True))
    rows: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    schema_hash: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    added_by: str = Field(sa_column=Column(Text, nullable=False))
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
    changed_by: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class ReleaseRow(_LedgerModel, table=True):
    """One release of a plan against a dataset (unique per dataset and plan hash).

    ``owner`` (the claim token), ``lease_expires_at`` and ``heartbeat_at`` are liveness
    bookkeeping: they change while sampling and are not journaled.
    """

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
    actor: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    version_id: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    lease_expires_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    heartbeat_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )


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


class AccountRow(_LedgerModel, table=True):
    """A local account of the organisation (password hashed with Argon2id)."""

    __tablename__ = "accounts"

    id: int | None = Field(default=None, primary_key=True)
    username: str = Field(sa_column=Column(Text, nullable=False, unique=True, index=True))
    role: str = Field(sa_column=Column(Text, nullable=False))
    password_hash: str = Field(sa_column=Column(Text, nullable=False))
    created_by: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    disabled: int = Field(default=0, sa_column=Column(Integer, nullable=False))


class GrantRow(_LedgerModel, table=True):
    """An owner's grant on a dataset to a subject (analyst budget, or viewer share)."""

    __tablename__ = "grants"

    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(
        sa_column=Column(Integer, ForeignKey("datasets.id"), nullable=False, index=True)
    )
    subject: str = Field(sa_column=Column(Text, nullable=False, index=True))
    role: str = Field(sa_column=Column(Text, nullable=False))
    epsilon: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    delta: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    granted_by: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    revoked_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    revoked_by: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class JournalRow(_LedgerModel, table=True):
    """One entry of the chained journal (:mod:`planner.ledger.integrity`)."""

    __tablename__ = "journal"

    seq: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    kind: str = Field(sa_column=Column(Text, nullable=False))
    dataset_id: int | None = Field(default=None, sa_column=Column(Integer, nullable=True, index=True))
    body: str = Field(sa_column=Column(Text, nullable=False))
    prev: str = Field(sa_column=Column(Text, nullable=False))
    mac: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class HeadRow(_LedgerModel, table=True):
    """The ledger's identity and the newest journal entry (one row, ``id = 1``); every
    write transaction locks it first."""

    __tablename__ = "ledger_head"

    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    ledger_id: str = Field(sa_column=Column(Text, nullable=False))
    format_version: int = Field(sa_column=Column(Integer, nullable=False))
    secret_check: str = Field(sa_column=Column(Text, nullable=False))
    seq: int = Field(sa_column=Column(Integer, nullable=False))
    mac: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


#: Tables whose content the journal replays (liveness columns excluded).
_TRACKED: Final = ("datasets", "dataset_versions", "budget_changes", "releases", "spends",
                   "answers", "accounts", "grants")
_VOLATILE: Final = {"releases": frozenset({"owner", "lease_expires_at", "heartbeat_at"})}
#: Nullable columns added after format 2: journaled only when set, so a row that does not
#: use them has the same journal form as before they existed (old entries still replay).
_OPTIONAL: Final = {"datasets": frozenset({"sampling_rate", "sampling_scheme"})}
_V1_TABLES: Final = frozenset({"datasets", "releases", "spends", "answers"})


# --------------------------------------------------------------------------- values


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """A registered dataset and its lifetime budget.

    ``fingerprint`` is the dataset's public key (``ds-…``): the name by which every
    :class:`Ledger` method finds it. It carries nothing about the data.
    """

    fingerprint: str
    name: str
    epsilon: float
    delta: float
    rule: CompositionRule
    created_at: datetime
    schema_hash: str | None = None
    registered_by: str = ""
    sampling: Sampling | None = None

    @property
    def key(self) -> str:
        """The dataset's public key (same as ``fingerprint``)."""
        return self.fingerprint

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "fingerprint": self.fingerprint,
            "name": self.name,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rule": str(self.rule),
            "created_at": self.created_at.isoformat(),
            "schema_hash": self.schema_hash,
            "registered_by": self.registered_by,
            "sampling": None if self.sampling is None else self.sampling.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One content version of a dataset.

    ``fingerprint`` is keyed (HMAC-SHA256 with the server secret): it identifies the
    version inside the organisation and cannot be used to test a guess about the data.
    """

    dataset: str
    fingerprint: str
    rows: int | None
    schema_hash: str | None
    added_by: str
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "dataset": self.dataset,
            "fingerprint": self.fingerprint,
            "rows": self.rows,
            "schema_hash": self.schema_hash,
            "added_by": self.added_by,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class AccountInfo:
    """A local account (never its password hash)."""

    username: str
    role: Role
    disabled: bool
    created_by: str
    created_at: datetime

    @property
    def subject(self) -> str:
        """``user:<username>``."""
        return f"user:{self.username}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"username": self.username, "subject": self.subject, "role": self.role.value,
                "disabled": self.disabled, "created_by": self.created_by,
                "created_at": self.created_at.isoformat()}


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
        """The :class:`planner.privacy.accounting.Spend` the accountants compose."""
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
    ``actor`` is the subject of the principal who made the release; ``version`` the keyed
    fingerprint of the content version it was made on (``None`` if not given).
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
    actor: str = ""
    version: str | None = None

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
            "actor": self.actor,
            "version": self.version,
            "spends": [s.to_dict() for s in self.spends],
        }
        if include_answers:
            out["answers"] = self.answers
        return out


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """What a dataset's budget looks like now.

    ``epsilon_spent`` is ``total_epsilon(all recorded spends, rule, delta_total)``; every
    release counts, including those whose answers were lost. For a secret sample
    (``sampling`` set) it is the population's ε: the spends composed on the sample at
    δ/q (``epsilon_spent_sample``), amplified once (:func:`planner.privacy.sampling.sampled_total_epsilon`).
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
    sampling: Sampling | None = None
    epsilon_spent_sample: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (a non-finite value becomes ``None``)."""
        out = {
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
        if self.sampling is not None:
            out["sampling"] = self.sampling.to_dict()
            out["epsilon_spent_sample"] = (None if self.epsilon_spent_sample is None
                                           else _finite_or_none(self.epsilon_spent_sample))
        return out


@dataclass(frozen=True, slots=True)
class BudgetChange:
    """One recorded raise of a dataset's lifetime budget."""

    old_epsilon: float
    old_delta: float
    new_epsilon: float
    new_delta: float
    reason: str
    created_at: datetime
    changed_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "old_epsilon": self.old_epsilon,
            "old_delta": self.old_delta,
            "new_epsilon": self.new_epsilon,
            "new_delta": self.new_delta,
            "reason": self.reason,
            "created_at": self.created_at.isoformat(),
            "changed_by": self.changed_by,
        }


@dataclass(frozen=True, slots=True)
class ReleasePreview:
    """What a release would cost on a dataset, before anything is recorded.

    ``epsilon_release`` is the increase of the composed spend under the dataset's rule
    (``epsilon_after − epsilon_spent``): under basic composition it is the release's own
    ε; under advanced, RDP or zCDP it can be smaller, because the whole history is composed
    together. ``fits`` is exactly the ledger's own check (:meth:`Ledger.release` refuses
    the same spends when it is false). For an analyst, ``grant_epsilon`` is the budget an
    owner granted them and ``grant_spent_after`` their own spends composed with this
    release; ``limit`` says which budget refused (``"dataset"`` or ``"grant"``). For a
    secret sample (``sampling`` set) every ε here is the population's, the composed spends
    amplified once.
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
    limit: str = ""
    grant_epsilon: float | None = None
    grant_spent_after: float | None = None
    sampling: Sampling | None = None

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
            "limit": self.limit,
            "grant_epsilon": self.grant_epsilon,
            "grant_spent_after": None if self.grant_spent_after is None
            else _finite_or_none(self.grant_spent_after),
            "sampling": None if self.sampling is None else self.sampling.to_dict(),
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


def _home() -> Path:
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
    return f"sqlite:///{_home() / 'ledger.db'}"


def _lease_seconds(value: float | None) -> float:
    raw: Any = value
    if raw is None:
        text = os.environ.get(ENV_LEASE, "").strip()
        if not text:
            return LEASE_SECONDS
        try:
            raw = float(text)
        except ValueError as exc:
            raise LedgerError(f"{ENV_LEASE} must be a number of seconds; got a non-number.") from exc
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not (0.2 <= float(raw) <= 3600):
        raise LedgerError(f"the lease of a pending release must be 0.2 to 3600 seconds; got {raw!r}.")
    return float(raw)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    """SQLite returns naive datetimes; every stored time is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


_HOST: Final = socket.gethostname()

#: Claims (release nonces) created by this process, and those whose sample() is running.
_MY_CLAIMS: set[str] = set()
_IN_FLIGHT: set[str] = set()
_IN_FLIGHT_LOCK: Final = threading.Lock()


def _owner_token(nonce: str) -> str:
    """The claim of a pending release (diagnostics: host and pid are never used to decide
    liveness; only the claim nonce and the lease are)."""
    return json.dumps({"host": _HOST, "pid": os.getpid(), "claim": nonce}, sort_keys=True)


def _claim_of(owner: str) -> str:
    try:
        info = json.loads(owner)
        return str(info["claim"]) if isinstance(info, dict) else ""
    except (ValueError, KeyError, TypeError):
        return ""


def _alive(row: ReleaseRow) -> bool:
    """Whether a pending release may still be sampling: by its lease, never a pid.

    A claim made by this very process is alive exactly while its ``sample()`` runs
    (known without waiting). Any other claim is alive while its lease has not expired;
    its process renews the lease every quarter of it while sampling.
    """
    claim = _claim_of(row.owner)
    with _IN_FLIGHT_LOCK:
        if claim and claim in _MY_CLAIMS:
            return claim in _IN_FLIGHT
    if row.lease_expires_at is None:
        return False
    return _aware(row.lease_expires_at) > _utcnow()


def _check_text(value: Any, name: str, *, max_chars: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str) or not value.strip():
        shown = "an empty string" if isinstance(value, str) else f"a {type(value).__name__}"
        raise LedgerError(f"{name} must be a non-empty string; got {shown}.")
    if len(value) > max_chars:
        raise LedgerError(f"{name} has {len(value)} characters; at most {max_chars} are accepted.")
    if "\x00" in value:
        raise LedgerError(f"{name} contains a NUL character; remove it.")
    return value


def _coerce_rule(rule: CompositionRule | str) -> CompositionRule:
    try:
        return CompositionRule(rule)
    except ValueError as exc:
        names = ", ".join(r.value for r in CompositionRule)
        shown = repr(rule[:40]) if isinstance(rule, str) else type(rule).__name__
        raise BudgetError(f"rule must be one of {names}; got {shown}.") from exc


def _budget(epsilon: Any, delta: Any, what: str) -> tuple[float, float]:
    """Strict budget values: JSON-number types only (no bool, no str), finite, in range."""
    eps = check_epsilon(strict_epsilon(epsilon, f"{what} epsilon"), f"{what} epsilon")
    dlt = check_delta(strict_delta(delta, f"{what} delta"), f"{what} delta")
    return eps, dlt


def _compose(spends: Sequence[Spend], rule: CompositionRule, delta: float,
             sampling: Sampling | None = None) -> float:
    """Composed ε of ``spends``; 0 for none, ``inf`` for anything not a number.

    With ``sampling`` (a secret sample at rate q) the population's ε: the spends composed
    on the sample at δ/q, then amplified once, ln(1 + q(e^ε − 1))
    (:func:`planner.privacy.sampling.sampled_total_epsilon`; Balle, Barthe & Gaboardi 2018).
    """
    if not spends:
        return 0.0
    if sampling is None:
        value = float(total_epsilon(spends, rule, delta))
    else:
        value = float(sampled_total_epsilon(spends, rule, delta, sampling))
    return math.inf if math.isnan(value) else value


def _sampling_of(row: DatasetRow) -> Sampling | None:
    """The secret-sample declaration recorded with a dataset (``None``: not a sample).

    Raises
    ------
    LedgerIntegrityError
        One column set without the other, or values no registration could have written.
    """
    rate, scheme = row.sampling_rate, row.sampling_scheme
    if rate is None and scheme is None:
        return None
    where = f"the sampling declaration of dataset {row.id}"
    if rate is None or scheme is None:
        raise LedgerIntegrityError(_garbage(where, "rate and scheme must be set together"))
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        raise LedgerIntegrityError(_garbage(where, "the rate is not a number"))
    try:
        return Sampling(float(rate), SamplingScheme(scheme))
    except (BudgetError, ValueError):
        raise LedgerIntegrityError(_garbage(where, "not a rate in (0, 1] and a known scheme")) from None


def _check_sampling(sampling: Any) -> Sampling | None:
    if sampling is None or isinstance(sampling, Sampling):
        return sampling
    raise LedgerError(
        f"sampling must be a planner.privacy.sampling.Sampling or None; got {type(sampling).__name__}. "
        "Pass the schema's declaration (Schema.sampling)."
    )


def _sampling_columns(sampling: Sampling | None) -> dict[str, Any]:
    """The dataset row's sampling columns (both ``None`` when the table is the population)."""
    if sampling is None:
        return {"sampling_rate": None, "sampling_scheme": None}
    return {"sampling_rate": sampling.rate, "sampling_scheme": sampling.scheme.value}


def _same_sampling(row: DatasetRow, sampling: Sampling | None) -> None:
    """Refuse registering a dataset again with another sampling declaration."""
    recorded = _sampling_of(row)
    if recorded == sampling:
        return

    def shown(x: Sampling | None) -> str:
        return "not a sample" if x is None else f"a secret {x.scheme.value} sample at rate {x.rate:g}"

    raise LedgerError(
        f"dataset {row.name!r} ({row.fingerprint}) is registered as {shown(recorded)}; got "
        f"{shown(sampling)}. The sampling declaration is fixed with the lifetime budget (it "
        "decides what every recorded spend costs the population). Use the schema the dataset "
        "was registered with, or declare a new dataset deliberately."
    )


def _sampling_words(sampling: Sampling | None) -> str:
    if sampling is None:
        return ""
    return (f" (population ε: the table is a secret {sampling.scheme.value} sample at rate "
            f"q = {sampling.rate:g}, so the spends composed on the sample are amplified once)")


def _remedy(rule: CompositionRule) -> str:
    """What to do when a release does not fit (true for every workload and rule: the rule is
    fixed with the lifetime budget, and whether a tighter one would charge less depends on
    the workload)."""
    return ("Lower this release's ε (the Planner can pick the most that fits) or drop queries from it; "
            "the lifetime budget itself can only be raised by a recorded decision of its owner.")


def _within_budget(composed: float, total: float) -> bool:
    """``composed ≤ total`` up to float noise (relative 1e-12); NaN and inf never fit."""
    return math.isfinite(composed) and composed <= total + BUDGET_REL_TOLERANCE * total


def _preview(
    ds: DatasetRow,
    old: Sequence[Spend],
    new: Sequence[Spend],
    *,
    grant: GrantInfo | None = None,
    own_old: Sequence[Spend] = (),
) -> ReleasePreview:
    """The budget check of a release (one definition: :meth:`Ledger.preview` shows it,
    :meth:`Ledger.release` enforces it).

    The dataset check: the composed spends of every release so far plus this one must fit
    the lifetime budget. For an analyst (``grant`` given, role analyst), also: their own
    spends plus this one, composed under the same rule at the grant's δ, must fit the ε
    an owner granted them.
    """
    rule = CompositionRule(ds.rule)
    smp = _sampling_of(ds)
    spent = _compose(old, rule, ds.delta, smp)
    args = (ds.fingerprint, rule, ds.epsilon, ds.delta, spent)
    try:
        after = _compose([*old, *new], rule, ds.delta, smp)
    except BudgetError as exc:
        return ReleasePreview(
            *args, math.inf, math.inf, False,
            f"This release cannot be accounted within the lifetime budget (ε = {ds.epsilon:g}, "
            f"δ = {ds.delta:g}, {rule.value} rule{_sampling_words(smp)}): {exc}", "dataset",
            sampling=smp,
        )
    release = after - spent
    if not _within_budget(after, ds.epsilon):
        remaining = ds.epsilon - spent
        return ReleasePreview(
            *args, release, after, False,
            f"This release needs ε = {release:.4g} under the {rule.value} rule{_sampling_words(smp)}, "
            f"but only ε = {max(remaining, 0.0):.4g} of the lifetime budget ε = {ds.epsilon:g} remains "
            f"(short by {release - remaining:.3g}). {_remedy(rule)}", "dataset", sampling=smp,
        )
    if grant is None or grant.role is not Role.ANALYST or grant.epsilon is None:
        return ReleasePreview(*args, release, after, True, sampling=smp)
    g_delta = ds.delta if grant.delta is None else grant.delta
    try:
        own_after = _compose([*own_old, *new], rule, g_delta, smp)
    except BudgetError as exc:
        return ReleasePreview(
            *args, release, after, False,
            f"This release cannot be accounted within the budget granted to {grant.subject} "
            f"(ε = {grant.epsilon:g}, δ = {g_delta:g}): {exc} Ask an owner for a larger grant.",
            "grant", grant.epsilon, math.inf, sampling=smp,
        )
    if _within_budget(own_after, grant.epsilon):
        return ReleasePreview(*args, release, after, True, "", "", grant.epsilon, own_after, sampling=smp)
    own_spent = _compose(list(own_old), rule, g_delta, smp)
    return ReleasePreview(
        *args, release, after, False,
        f"This release would bring the spends of {grant.subject} on this dataset to "
        f"ε = {own_after:.4g}{_sampling_words(smp)}, above the ε = {grant.epsilon:g} an owner "
        f"granted them (already spent: {own_spent:.4g}). Lower this release's ε, or ask an owner "
        "to raise your grant.", "grant", grant.epsilon, own_after, sampling=smp,
    )


def _parse_event(text: str, where: str) -> PrivacyEvent:
    """A stored event; :class:`LedgerIntegrityError` (never a traceback) if it is garbage."""
    try:
        check_depth(text, where, error=LedgerIntegrityError)
        data = json.loads(text)
        if not isinstance(data, dict):
            raise LedgerIntegrityError(f"{where} is not an object")
        return event_from_dict(data)
    except LedgerIntegrityError as exc:
        raise LedgerIntegrityError(_garbage(where, str(exc))) from None
    except (PlannerError, TypeError, ValueError, AttributeError, RecursionError, OverflowError) as exc:
        raise LedgerIntegrityError(_garbage(where, type(exc).__name__)) from None


def _garbage(where: str, why: str) -> str:
    return (
        f"{where} cannot be read ({why}): the ledger was changed outside the planner or is "
        "damaged. Nothing was spent. Run `planner ledger verify` and restore the ledger from "
        "a backup."
    )


def _status_value(row: ReleaseRow) -> ReleaseStatus:
    try:
        status = ReleaseStatus(row.status)
    except ValueError:
        status = None
    if status is None or status is ReleaseStatus.REUSED:
        shown = repr(row.status[:20]) if isinstance(row.status, str) else "a non-text value"
        raise LedgerIntegrityError(_garbage(f"the status of release {row.id} ({shown})",
                                            "unknown status"))
    return status


def _effective_status(row: ReleaseRow) -> ReleaseStatus:
    status = _status_value(row)
    if status is ReleaseStatus.PENDING and not _alive(row):
        return ReleaseStatus.SPENT_NO_ANSWERS
    return status


def _spend_record(row: SpendRow) -> SpendRecord:
    where = f"the event of spend {row.id} (release {row.release_id})"
    ev = _parse_event(row.event_json, where)
    for name, value in (("epsilon", row.epsilon), ("delta", row.delta)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                or value < 0:
            raise LedgerIntegrityError(_garbage(f"the {name} of spend {row.id}", "not a finite number ≥ 0"))
    return SpendRecord(
        query_id=row.query_id,
        epsilon=float(row.epsilon),
        delta=float(row.delta),
        rho=math.inf if row.rho is None else float(row.rho),
        event=ev,
    )


def _answer_value(row: AnswerRow) -> JSON:
    try:
        value: JSON = json.loads(row.payload_json)
        return value
    except (ValueError, TypeError, RecursionError):
        raise LedgerIntegrityError(
            _garbage(f"the answer of query {row.query_id!r} of release {row.release_id}", "not JSON")
        ) from None


def _status_of(ds: DatasetRow, releases: Sequence[ReleaseRecord]) -> BudgetStatus:
    rule = CompositionRule(ds.rule)
    smp = _sampling_of(ds)
    every = [sp.spend for rec in releases for sp in rec.spends]
    spent = _compose(every, rule, ds.delta, smp)
    on_sample = None
    if smp is not None:
        on_sample = _compose(every, rule, smp.base_delta(ds.delta))
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
        sampling=smp,
        epsilon_spent_sample=on_sample,
    )


def _history_of(ds: DatasetRow, releases: Sequence[ReleaseRecord]) -> list[HistoryPoint]:
    rule = CompositionRule(ds.rule)
    smp = _sampling_of(ds)
    points: list[HistoryPoint] = []
    spends: list[Spend] = []
    before = 0.0
    for rec in releases:
        spends.extend(sp.spend for sp in rec.spends)
        after = _compose(spends, rule, ds.delta, smp)
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
    try:
        rule = CompositionRule(row.rule)
    except ValueError:
        raise LedgerIntegrityError(_garbage(f"the rule of dataset {row.id}", "unknown rule")) from None
    return DatasetInfo(
        fingerprint=row.fingerprint,
        name=row.name,
        epsilon=row.epsilon,
        delta=row.delta,
        rule=rule,
        created_at=_aware(row.created_at),
        schema_hash=row.schema_hash,
        registered_by=row.registered_by or "",
        sampling=_sampling_of(row),
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
        actor=rec.actor,
        version=rec.version,
    )


def _row_dict(row: Any) -> tuple[str, dict[str, Any]]:
    """``(table, {column: canonical value})`` of an ORM row, liveness columns left out."""
    table = row.__table__
    skip = _VOLATILE.get(table.name, frozenset())
    optional = _OPTIONAL.get(table.name, frozenset())
    return table.name, {
        c.name: canonical_value(getattr(row, c.name)) for c in table.columns
        if c.name not in skip and not (c.name in optional and getattr(row, c.name) is None)
    }


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
            # Overwrite deleted and replaced content with zeros (a migrated bare file hash
            # must not linger in free pages).
            cur.execute("PRAGMA secure_delete = ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def _dataset_stmt(fingerprint: str, *, lock: bool) -> SelectOfScalar[DatasetRow]:
    """``SELECT`` the dataset row by its key; ``FOR UPDATE`` when locking (a no-op on
    SQLite, which is locked by ``BEGIN IMMEDIATE`` instead)."""
    stmt = select(DatasetRow).where(col(DatasetRow.fingerprint) == fingerprint)
    return stmt.with_for_update() if lock else stmt


def _prepare_spends(
    spends: Sequence[tuple[str, Spend]],
) -> list[tuple[str, Spend, str, float | None]]:
    """Validate the spends and serialise their events before any transaction opens."""
    if isinstance(spends, (str, bytes)) or not isinstance(spends, Sequence):
        raise LedgerError(f"spends must be a list of (query_id, Spend) pairs; got {type(spends).__name__}.")
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
        eps = sp.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (
            math.isfinite(eps) and eps >= 0.0
        ):
            raise BudgetError(
                f"epsilon of query {qid!r} must be a number ≥ 0 and finite. Assign a finite ε."
            )
        if isinstance(sp.delta, bool):
            raise BudgetError(f"delta of query {qid!r} must be a number, not a boolean.")
        check_delta(sp.delta, f"delta of query {qid!r}")
        rho = float(event_rho(sp.event))
        out.append((qid, sp, json.dumps(sp.event.to_dict(), sort_keys=True), _finite_or_none(rho)))
    return out


def _serialise_answers(answers: Mapping[str, JSON]) -> dict[str, str]:
    """``{query_id: JSON text}``; ``TypeError``/``ValueError`` if not JSON-able."""
    if not isinstance(answers, Mapping):
        raise TypeError(f"sample() must return a mapping; got {type(answers).__name__}")
    return {str(k): json.dumps(v) for k, v in answers.items()}


def _url_identity(url: URL) -> tuple[str, bool]:
    """The marker identity of a ledger URL, and whether it is an in-memory database."""
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:") \
                or "mode=memory" in str(url.query):
            return "", True
        return "sqlite:" + str(Path(database).expanduser().resolve()), False
    return url.set(password=None).render_as_string(hide_password=True), False


class _InProgress:
    """Marker: the same plan is being released by a live process."""


_IN_PROGRESS: Final = _InProgress()


class _Heartbeat:
    """Renews a pending release's lease every quarter of it until stopped."""

    def __init__(self, ledger: Ledger, release_id: int) -> None:
        self._ledger = ledger
        self._release_id = release_id
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"planner-lease-{release_id}", daemon=True
        )

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=max(5.0, self._ledger.lease_seconds))

    def _run(self) -> None:
        period = self._ledger.lease_seconds / 4
        while not self._stop.wait(period):
            try:
                self._ledger._renew_lease(self._release_id)
            except Exception:  # a missed beat only shortens the lease
                continue


# --------------------------------------------------------------------------- ledger


class Ledger:
    """The persistent privacy ledger (SQLite by default, any SQLAlchemy URL).

    Parameters
    ----------
    url : str, optional
        A SQLAlchemy URL. Defaults to :func:`default_ledger_url` (``$PLANNER_LEDGER_URL``
        or ``sqlite:///$PLANNER_HOME/ledger.db``). A new ledger is created where none
        exists; a ledger made by an earlier version (format 1) is migrated; pending
        releases whose lease expired are marked ``spent_no_answers``.
    actor : Principal, optional
        The default actor of every call that does not pass its own. Without one, a
        ledger without accounts acts for :data:`~planner.ledger.accounts.LOCAL_OWNER`, and a
        ledger with accounts for the account named by ``PLANNER_USER`` (password in
        ``PLANNER_PASSWORD`` or the file ``PLANNER_PASSWORD_FILE``), else refuses.
    lease_seconds : float, optional
        Lease of a pending release (default ``$PLANNER_LEASE_SECONDS`` or 30 s).

    Raises
    ------
    LedgerError
        If the URL is invalid, its driver is missing or the database cannot be opened.
    LedgerIntegrityError
        If a ledger existed here and is now empty, truncated, rolled back, replaced,
        corrupt, or made with another server secret.

    Examples
    --------
    >>> from planner.privacy.accounting import Spend
    >>> from planner.privacy.events import PureEvent
    >>> ledger = Ledger("sqlite://")
    >>> info = ledger.register_dataset("digest-1", "survey", epsilon=1.0, delta=1e-6, rule="basic")
    >>> spend = Spend(event=PureEvent(0.25), epsilon=0.25, delta=0.0)
    >>> rec = ledger.release("digest-1", "plan-1", "schema-1", [("q1", spend)], lambda: {"q1": 41.7})
    >>> rec.status.value, rec.answers, rec.actor
    ('done', {'q1': 41.7}, 'local:owner')
    >>> ledger.status(info.fingerprint).epsilon_remaining
    0.75
    >>> ledger.close()
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        actor: Principal | None = None,
        lease_seconds: float | None = None,
        _gate: bool = True,
    ) -> None:
        raw = default_ledger_url() if url is None else url
        if not isinstance(raw, str):
            raise LedgerError(f"the ledger URL must be a string; got {type(raw).__name__}.")
        try:
            parsed: URL = make_url(raw)
        except (sa_exc.ArgumentError, ValueError) as exc:
            raise LedgerError(
                "the ledger URL is not a valid SQLAlchemy URL. Set "
                f"{ENV_URL} to e.g. sqlite:///path/to/ledger.db or "
                "postgresql+psycopg://user@host/dbname."
            ) from exc
        if actor is not None and not isinstance(actor, Principal):
            raise PermissionDenied(f"actor must be a Principal; got {type(actor).__name__}.")
        self._url = parsed
        self._is_sqlite = parsed.get_backend_name() == "sqlite"
        self._default_actor = actor
        self._implicit: Principal | None = None
        self.lease_seconds = _lease_seconds(lease_seconds)
        identity, memory = _url_identity(parsed)
        self._memory = memory
        self._marker = None if memory else Marker(identity, self.url, _home())
        self._secret = server_secret()
        self._ledger_id: str | None = None
        self._chain_key: bytes | None = None
        self._engine = self._make_engine(parsed)
        if _gate:
            problems = self._open()
            if problems:
                raise LedgerIntegrityError(" ".join(problems))
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

    @property
    def ledger_id(self) -> str | None:
        """The ledger's identity (a random id fixed when it was created)."""
        return self._ledger_id

    @property
    def marker_path(self) -> Path | None:
        """Where this machine keeps the ledger's integrity marker (``None`` in memory)."""
        return None if self._marker is None else self._marker.path

    def close(self) -> None:
        """Close every pooled connection (call before ``fork``; the ledger stays usable)."""
        self._engine.dispose()

    def with_actor(self, actor: Principal) -> Ledger:
        """The same ledger (same connections) acting for ``actor`` by default.

        For a page: ``led = cached_ledger.with_actor(session_principal)``.
        """
        if not isinstance(actor, Principal):
            raise PermissionDenied(f"actor must be a Principal; got {type(actor).__name__}.")
        clone = object.__new__(Ledger)
        clone.__dict__.update(self.__dict__)
        clone._default_actor = actor
        clone._implicit = None
        return clone

    def _make_engine(self, url: URL) -> Engine:
        shown = url.render_as_string(hide_password=True)
        try:
            if self._is_sqlite:
                database = url.database or ""
                if not self._memory:
                    path = Path(database).expanduser()
                    try:
                        path.resolve().parent.mkdir(parents=True, exist_ok=True)
                    except OSError as exc:
                        raise LedgerError(
                            f"cannot create the ledger directory for {shown}: {exc.strerror}. "
                            f"Point {ENV_URL} or {ENV_HOME} at a writable location."
                        ) from exc
                engine = create_engine(
                    url,
                    connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_SECONDS},
                    poolclass=StaticPool if self._memory else None,
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
        except sa_exc.ArgumentError as exc:
            raise LedgerError(f"the ledger URL {shown} cannot be used: {exc}.") from exc

    @contextmanager
    def _session(self, *, write: bool) -> Iterator[Session]:
        """One short session; a write session takes SQLite's write lock at BEGIN.

        Database errors become :class:`LedgerError` (busy, unreachable) or
        :class:`LedgerIntegrityError` (a damaged file), never a raw traceback.
        """
        try:
            with Session(self._engine, expire_on_commit=False) as session:
                if write and self._is_sqlite:
                    session.connection(execution_options={_BEGIN_OPTION: "IMMEDIATE"})
                yield session
        except sa_exc.IntegrityError:
            raise
        except sa_exc.OperationalError as exc:
            raise LedgerError(
                f"the ledger at {self.url} could not be read or written "
                f"({type(exc.orig).__name__}: it may be busy, unreachable or read-only). Nothing "
                "was changed by this call; try again."
            ) from exc
        except sa_exc.DatabaseError as exc:
            raise LedgerIntegrityError(
                f"the ledger at {self.url} is damaged ({type(exc.orig).__name__}). Nothing was "
                "changed. Run `planner ledger verify` and restore the ledger from a backup."
            ) from exc

    @contextmanager
    def _write(self) -> Iterator[tuple[Session, HeadRow]]:
        """A write transaction holding the ledger head (serialises every writer)."""
        with self._session(write=True) as s:
            head = s.exec(select(HeadRow).where(col(HeadRow.id) == 1).with_for_update()).first()
            if head is None:
                raise LedgerIntegrityError(
                    f"the ledger at {self.url} has lost its head record; nothing was changed. "
                    "Run `planner ledger verify`."
                )
            yield s, head

    def _commit(self, s: Session, head: HeadRow, kind: str, dataset_id: int | None,
                rows: Sequence[Any]) -> None:
        """Journal ``rows`` (already added) as one entry, advance the head, commit, and
        advance the marker."""
        s.flush()
        grouped: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            table, data = _row_dict(r)
            grouped.setdefault(table, []).append(data)
        body = canonical({"rows": grouped})
        key = self._key()
        seq = head.seq + 1
        mac = entry_mac(key, seq, kind, head.mac, body)
        s.add(JournalRow(seq=seq, kind=kind, dataset_id=dataset_id, body=body, prev=head.mac,
                         mac=mac, created_at=_utcnow()))
        head.seq, head.mac = seq, mac
        s.add(head)
        s.commit()
        if self._marker is not None:
            self._marker.advance(head.ledger_id, seq, mac)

    def _key(self) -> bytes:
        if self._chain_key is None:
            raise LedgerIntegrityError("the ledger was not opened; its chain key is unknown.")
        return self._chain_key

    # ------------------------------------------------------------------ open / create

    def _table_names(self) -> set[str]:
        try:
            return set(inspect(self._engine).get_table_names())
        except sa_exc.OperationalError as exc:
            raise LedgerError(
                f"cannot open the ledger at {self.url}: {type(exc.orig).__name__}. Check that "
                f"the location is writable and reachable, or set {ENV_URL}."
            ) from exc
        except sa_exc.DatabaseError as exc:
            raise LedgerIntegrityError(
                f"the ledger at {self.url} is not a readable database ({type(exc.orig).__name__}: "
                "corrupt, truncated or not a ledger). Nothing was changed. Restore it from a "
                "backup; run `planner ledger verify` for details."
            ) from exc

    def _sqlite_file_problems(self) -> list[str]:
        if not self._is_sqlite or self._memory:
            return []
        path = Path(self._url.database or "").expanduser()
        if not path.exists():
            return []
        if not path.is_file():
            return [f"the ledger location {path} is not a regular file."]
        if path.stat().st_size == 0:
            time.sleep(0.2)  # a process creating the ledger right now writes its header at once
        if path.exists() and path.stat().st_size == 0:
            return [
                f"the ledger file {path} exists but is empty (0 bytes). A ledger is never empty "
                "once created, so it was truncated or replaced: every earlier spend would be "
                "forgotten. Restore it from a backup; if this really is meant to be a new "
                "ledger, delete the empty file first."
            ]
        return []

    def _open(self) -> list[str]:
        """The integrity gate run on every open; creates or migrates when appropriate.

        Returns the problems found (empty when the ledger may be used).
        """
        problems = self._sqlite_file_problems()
        if problems:
            return problems
        marker = self._read_marker(problems)
        if problems:
            return problems
        names = self._table_names()
        if self._is_sqlite and not self._memory and names:
            problems.extend(self._quick_check())
            if problems:
                return problems
        if "ledger_head" not in names:
            if marker is not None:
                what = "empty" if not names else "missing its journal"
                return [
                    f"the ledger at {self.url} is {what}, but this machine recorded ledger "
                    f"{marker.ledger_id} there with {marker.seq} journal entries (marker "
                    f"{self._marker.path if self._marker else ''}). Every earlier spend would be "
                    "forgotten, so it is refused. Restore the ledger from a backup; only if you "
                    "retired it deliberately, delete the marker."
                ]
            if names & _V1_TABLES:
                self._migrate_v1(names)
            else:
                self._create()
        problems = self._check_head(marker)
        if not problems:
            self._migrate_columns()
        return problems

    def _read_marker(self, problems: list[str]) -> MarkerState | None:
        if self._marker is None:
            return None
        try:
            return self._marker.read()
        except LedgerIntegrityError as exc:
            problems.append(str(exc))
            return None

    def _quick_check(self) -> list[str]:
        try:
            with self._engine.connect() as conn:
                rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check")]
                conn.rollback()
        except sa_exc.DatabaseError as exc:
            return [f"the ledger at {self.url} cannot be checked ({type(exc.orig).__name__}): "
                    "it is damaged. Restore it from a backup."]
        if rows != ["ok"]:
            return [f"the ledger at {self.url} is damaged (SQLite quick_check: {len(rows)} "
                    "problem(s)). Restore it from a backup; `planner ledger verify` lists them."]
        return []

    def _create_all(self) -> None:
        try:
            with self._engine.connect() as conn:
                if self._is_sqlite:
                    conn = conn.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
                with conn.begin():
                    LEDGER_METADATA.create_all(conn)
        except (sa_exc.IntegrityError, sa_exc.ProgrammingError):
            # Another process created the tables between the check and the CREATE.
            LEDGER_METADATA.create_all(self._engine)
        except sa_exc.OperationalError as exc:
            raise LedgerError(
                f"cannot open the ledger at {self.url}: {type(exc.orig).__name__}. Check that "
                f"the location is writable and reachable, or set {ENV_URL}."
            ) from exc

    def _create(self) -> None:
        """A new, empty ledger: tables and a head with a fresh identity."""
        self._create_all()
        try:
            with self._session(write=True) as s:
                if s.get(HeadRow, 1) is None:
                    s.add(HeadRow(id=1, ledger_id=uuid.uuid4().hex, format_version=FORMAT_VERSION,
                                  secret_check=secret_check(secret=self._secret), seq=0,
                                  mac=GENESIS_MAC, created_at=_utcnow()))
                    s.commit()
        except sa_exc.IntegrityError:
            pass  # another process created the head first: use theirs

    def _check_head(self, marker: MarkerState | None) -> list[str]:
        with self._session(write=False) as s:
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
        if head.secret_check != secret_check(secret=self._secret):
            return [f"the ledger at {self.url} was created with another server secret than the "
                    f"one from {secret_source()}. Fingerprints made with this secret would not "
                    "match, so it is refused. Set PLANNER_SECRET (or PLANNER_SECRET_FILE) to the "
                    "organisation's secret."]
        self._ledger_id = head.ledger_id
        self._chain_key = chain_key(self._secret, head.ledger_id)
        problems: list[str] = []
        if (last is None and head.seq != 0) or (last is not None and (last.seq, last.mac) != (head.seq, head.mac)):
            problems.append(
                f"the ledger at {self.url} lost journal entries: its head records entry "
                f"{head.seq}, its journal ends at {0 if last is None else last.seq}. It was "
                "truncated or edited; restore it from a backup."
            )
        if marker is not None:
            mpath = self._marker.path if self._marker else ""
            if marker.ledger_id != head.ledger_id:
                problems.append(
                    f"the ledger at {self.url} is not the one this machine recorded there (marker "
                    f"{mpath}: ledger {marker.ledger_id}, found {head.ledger_id}). It was replaced; "
                    "every spend recorded in the other would be forgotten. Restore it; only if "
                    "the replacement is deliberate, delete the marker."
                )
            elif marker.seq > head.seq:
                problems.append(
                    f"the ledger at {self.url} has {head.seq} journal entries, but this machine "
                    f"saw {marker.seq} (marker {mpath}). It was truncated or restored from an "
                    "older backup: the spends after entry "
                    f"{head.seq} would be forgotten. Restore the newest backup; only if you accept "
                    "losing them, delete the marker."
                )
            elif marker.seq > 0 and (at_marker is None or at_marker.mac != marker.mac):
                problems.append(
                    f"the ledger at {self.url} was rewritten: its journal entry {marker.seq} is not "
                    f"the one this machine saw (marker {mpath}). Run `planner ledger verify` and "
                    "restore the ledger from a backup."
                )
        if not problems:
            problems.extend(self._chain_problems(head))
        if not problems and self._marker is not None:
            self._marker.advance(head.ledger_id, head.seq, head.mac)
        return problems

    def _chain_problems(self, head: HeadRow) -> list[str]:
        """The open-time check: the whole journal chain, and each table's row count
        against the journal's (a row deleted or added outside the planner). Values edited
        in place are found by :meth:`verify`, which compares every column."""
        from sqlalchemy import func

        key = self._key()
        prev = GENESIS_MAC
        ids: dict[str, set[Any]] = {t: set() for t in _TRACKED}
        with self._session(write=False) as s:
            for n, e in enumerate(s.exec(select(JournalRow).order_by(col(JournalRow.seq))), start=1):
                if e.seq != n or e.prev != prev or entry_mac(key, e.seq, e.kind, prev, e.body) != e.mac:
                    return [f"the journal of the ledger at {self.url} is broken at entry {n}: "
                            "entries were changed, forged or deleted outside the planner. Nothing "
                            "was changed now; run `planner ledger verify` and restore the ledger "
                            "from a backup."]
                prev = e.mac
                try:
                    rows = json.loads(e.body)["rows"]
                    for table, items in rows.items():
                        ids.setdefault(table, set()).update(r["id"] for r in items)
                except (ValueError, KeyError, TypeError, AttributeError):
                    return [f"journal entry {n} of the ledger at {self.url} is unreadable."]
            counts = {t: s.exec(select(func.count()).select_from(_MODELS[t])).one() for t in _TRACKED}
        wrong = [t for t in _TRACKED if counts[t] != len(ids[t])]
        if wrong:
            return [f"the ledger at {self.url} has rows that the journal does not account for "
                    f"(tables {', '.join(wrong)}): rows were deleted or added outside the planner, "
                    "which could forget spends. Nothing was changed now; run `planner ledger "
                    "verify` for details and restore the ledger from a backup."]
        return []

    def _missing_columns(self, conn: Any) -> dict[str, list[Any]]:
        """The nullable columns added since format 2 that a table of this ledger lacks."""
        insp = inspect(conn)
        out: dict[str, list[Any]] = {}
        for table, columns in _OPTIONAL.items():
            have = {c["name"] for c in insp.get_columns(table)}
            lack = [c for c in LEDGER_METADATA.tables[table].columns if c.name in columns and c.name not in have]
            if lack:
                out[table] = lack
        return out

    def _migrate_columns(self) -> None:
        """Bring a format-2 ledger to format 3 after its integrity check passed: add the
        datasets' nullable sampling columns (``ALTER TABLE … ADD COLUMN``, the way
        :meth:`_migrate_v1` adds columns) and record format 3 in the head, in one write
        transaction. Nothing else changes: existing datasets are not samples (NULL), and
        since NULL optional columns are not journaled (:data:`_OPTIONAL`), every journal
        entry still replays to the tables. Concurrent openers serialise on the write lock
        and find the columns already there.
        """
        with self._engine.connect() as probe:
            missing = self._missing_columns(probe)
            probe.rollback()
        with self._session(write=False) as s:
            head = s.get(HeadRow, 1)
            current = FORMAT_VERSION if head is None else head.format_version
        if not missing and current >= FORMAT_VERSION:
            return
        try:
            with self._engine.connect() as conn:
                if self._is_sqlite:
                    conn = conn.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
                with conn.begin():
                    if not self._is_sqlite:  # SQLite: BEGIN IMMEDIATE already holds the write lock
                        conn.exec_driver_sql("SELECT id FROM ledger_head WHERE id = 1 FOR UPDATE")
                    for table, columns in self._missing_columns(conn).items():
                        for column in columns:
                            ddl = column.type.compile(dialect=self._engine.dialect)
                            conn.exec_driver_sql(f'ALTER TABLE {table} ADD COLUMN "{column.name}" {ddl}')
                    conn.exec_driver_sql(
                        f"UPDATE ledger_head SET format_version = {int(FORMAT_VERSION)} "
                        f"WHERE id = 1 AND format_version < {int(FORMAT_VERSION)}"
                    )
        except sa_exc.OperationalError as exc:
            raise LedgerError(
                f"the ledger at {self.url} needs two new columns for secret samples (format "
                f"{FORMAT_VERSION}) but could not be changed ({type(exc.orig).__name__}: busy or "
                "read-only). Nothing was changed; open it once with write access."
            ) from exc

    def _migrate_v1(self, names: set[str]) -> None:
        """Bring a format-1 ledger (no accounts, no journal, bare file hashes as keys) to
        format 2 in one transaction: new columns and tables, each dataset's bare hash
        becomes a keyed version and the dataset gets a random public key, every existing
        row is journaled (the chain starts at the migration), releases are attributed to
        ``local:owner``."""
        self._create_all()  # new tables only; existing ones are left as they are
        insp = inspect(self._engine)
        with self._engine.connect() as conn:
            if self._is_sqlite:
                conn = conn.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
            with conn.begin():
                for table in ("datasets", "releases", "budget_changes"):
                    if table not in names:
                        continue
                    have = {c["name"] for c in insp.get_columns(table)}
                    for column in LEDGER_METADATA.tables[table].columns:
                        if column.name not in have:
                            ddl = column.type.compile(dialect=self._engine.dialect)
                            conn.exec_driver_sql(
                                f'ALTER TABLE {table} ADD COLUMN "{column.name}" {ddl}'
                            )
        with self._session(write=True) as s:
            if s.get(HeadRow, 1) is not None:
                return  # another process migrated first
            head = HeadRow(id=1, ledger_id=uuid.uuid4().hex, format_version=FORMAT_VERSION,
                           secret_check=secret_check(secret=self._secret), seq=0,
                           mac=GENESIS_MAC, created_at=_utcnow())
            s.add(head)
            s.flush()
            self._ledger_id = head.ledger_id
            self._chain_key = chain_key(self._secret, head.ledger_id)
            rows: list[Any] = []
            now = _utcnow()
            for ds in s.exec(select(DatasetRow).order_by(col(DatasetRow.id))).all():
                bare = ds.fingerprint
                ds.fingerprint = _new_dataset_key()
                ds.registered_by = ds.registered_by or LOCAL_OWNER.subject
                s.add(ds)
                s.flush()
                assert ds.id is not None
                ver = VersionRow(dataset_id=ds.id, fingerprint=keyed_fingerprint(bare, secret=self._secret),
                                 added_by=LOCAL_OWNER.subject, created_at=ds.created_at)
                s.add(ver)
                rows.extend([ds, ver])
            for model in (BudgetChangeRow, ReleaseRow, SpendRow, AnswerRow):
                for r in s.exec(select(model)).all():
                    if isinstance(r, ReleaseRow):
                        r.actor = r.actor or LOCAL_OWNER.subject
                        if r.status == ReleaseStatus.PENDING.value:
                            r.lease_expires_at = now + timedelta(seconds=self.lease_seconds)
                        s.add(r)
                    rows.append(r)
            self._commit(s, head, "migrate.v1", None, rows)
        if self._is_sqlite:
            with self._engine.connect() as conn:
                # the WAL still holds the pages as they were before the migration
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    # ------------------------------------------------------------------ actors

    def has_accounts(self) -> bool:
        """Whether the ledger has any local account (then nobody is implicitly its owner)."""
        with self._session(write=False) as s:
            return s.exec(select(AccountRow.id).limit(1)).first() is not None

    def _implicit_actor(self) -> Principal:
        if self._implicit is not None:
            return self._implicit
        if not self.has_accounts():
            return LOCAL_OWNER
        user = os.environ.get(ENV_USER, "").strip()
        if not user:
            raise PermissionDenied(
                f"the ledger at {self.url} has accounts, so every call needs a signed-in user. "
                f"Sign in (the app's login), or set {ENV_USER} and {ENV_PASSWORD} (or "
                f"{ENV_PASSWORD_FILE}) for the command line."
            )
        password = os.environ.get(ENV_PASSWORD)
        pfile = os.environ.get(ENV_PASSWORD_FILE, "").strip()
        if password is None and pfile:
            try:
                password = Path(pfile).read_text(encoding="utf-8").rstrip("\n")
            except (OSError, UnicodeDecodeError) as exc:
                raise PermissionDenied(f"cannot read {ENV_PASSWORD_FILE} ({pfile}).") from exc
        if password is None:
            raise PermissionDenied(f"{ENV_USER} is set but neither {ENV_PASSWORD} nor {ENV_PASSWORD_FILE}.")
        self._implicit = self.authenticate(user, password)
        return self._implicit

    def _actor(self, actor: Principal | None) -> Principal:
        if actor is not None:
            if not isinstance(actor, Principal):
                raise PermissionDenied(f"actor must be a Principal; got {type(actor).__name__}.")
            return actor
        if self._default_actor is not None:
            return self._default_actor
        return self._implicit_actor()

    def _effective(self, s: Session, actor: Principal) -> Principal:
        """The actor as the ledger knows it now: a local account's current role (or a
        refusal if it is disabled or gone); the local owner only on a ledger without
        accounts."""
        if actor.subject.startswith("local:"):
            if s.exec(select(AccountRow.id).limit(1)).first() is not None:
                raise PermissionDenied(
                    "this ledger has accounts, so the unauthenticated local owner may no longer "
                    "use it. Sign in with an account."
                )
            return actor
        if actor.subject.startswith("user:"):
            name = actor.subject[5:]
            row = s.exec(select(AccountRow).where(col(AccountRow.username) == name)).first()
            if row is None or row.disabled:
                raise PermissionDenied(f"the account {name!r} does not exist or is disabled.")
            try:
                role = Role(row.role)
            except ValueError:
                raise LedgerIntegrityError(_garbage(f"the role of account {row.id}", "unknown role")) from None
            return Principal(actor.subject, role, actor.display_name, actor.via)
        if actor.subject.startswith("oidc:"):
            return actor
        raise PermissionDenied(f"unknown kind of principal {actor.subject[:40]!r}.")

    def _grant_row(self, s: Session, ds: DatasetRow, subject: str) -> GrantRow | None:
        return s.exec(
            select(GrantRow)
            .where(col(GrantRow.dataset_id) == ds.id, col(GrantRow.subject) == subject,
                   col(GrantRow.revoked_at).is_(None))
            .order_by(col(GrantRow.id).desc())
        ).first()

    def _authorize(self, s: Session, actor: Principal, action: Action,
                   ds: DatasetRow | None = None) -> tuple[Principal, GrantInfo | None]:
        eff = self._effective(s, actor)
        grant = None
        if ds is not None and eff.role is not Role.OWNER:
            row = self._grant_row(s, ds, eff.subject)
            grant = None if row is None else _grant_info(row, ds)
        authorize(eff, action, grant, dataset=ds.name if ds is not None else "")
        return eff, grant

    # ------------------------------------------------------------------ accounts

    def create_account(self, username: str, password: str, role: Role | str, *,
                       actor: Principal | None = None) -> AccountInfo:
        """Create a local account (owners only; the first account must be an owner, and
        from then on the ledger has no implicit local owner)."""
        name = check_username(username)
        try:
            rl = Role(role)
        except ValueError:
            raise AccountError("role must be owner, analyst or viewer.") from None
        pw_hash = hash_password(password)  # before the transaction: it takes ~0.1 s
        who = self._actor(actor)
        with self._write() as (s, head):
            first = s.exec(select(AccountRow.id).limit(1)).first() is None
            if first and who.subject.startswith("local:"):
                eff = who
            else:
                eff, _ = self._authorize(s, who, Action.MANAGE_ACCOUNTS)
            if first and rl is not Role.OWNER:
                raise AccountError("the first account of a ledger must be an owner.")
            if s.exec(select(AccountRow).where(col(AccountRow.username) == name)).first() is not None:
                raise AccountError(f"an account named {name!r} exists already.")
            row = AccountRow(username=name, role=rl.value, password_hash=pw_hash,
                             created_by=eff.subject, created_at=_utcnow(), disabled=0)
            s.add(row)
            self._commit(s, head, "account.create", None, [row])
            return _account_info(row)

    def authenticate(self, username: str, password: str) -> Principal:
        """The principal of a local account whose password matches.

        Raises
        ------
        PermissionDenied
            Unknown user, wrong password or disabled account (one message for all three,
            and the same Argon2 work either way, so it does not tell which).
        """
        refused = PermissionDenied("unknown user or wrong password.")
        try:
            name = check_username(username)
        except AccountError:
            raise refused from None
        with self._session(write=False) as s:
            row = s.exec(select(AccountRow).where(col(AccountRow.username) == name)).first()
        stored = row.password_hash if row is not None else _DUMMY_HASH()
        ok = verify_password(stored, password)
        if row is None or not ok or row.disabled:
            raise refused
        if password_needs_rehash(row.password_hash):
            self._set_password_row(name, hash_password(password), "account.rehash")
        try:
            role = Role(row.role)
        except ValueError:
            raise LedgerIntegrityError(_garbage(f"the role of account {row.id}", "unknown role")) from None
        return Principal(f"user:{name}", role, name, "password")

    def _set_password_row(self, name: str, pw_hash: str, kind: str, disabled: int | None = None) -> AccountRow:
        with self._write() as (s, head):
            row = s.exec(select(AccountRow).where(col(AccountRow.username) == name)).first()
            if row is None:
                raise AccountError(f"no account named {name!r}.")
            row.password_hash = pw_hash
            if disabled is not None:
                row.disabled = disabled
            s.add(row)
            self._commit(s, head, kind, None, [row])
            return row

    def set_password(self, username: str, new_password: str, *, actor: Principal | None = None) -> None:
        """Change a password (the account itself, or an owner)."""
        name = check_username(username)
        pw_hash = hash_password(new_password)
        who = self._actor(actor)
        with self._session(write=False) as s:
            eff = self._effective(s, who)
        if eff.subject != f"user:{name}":
            with self._session(write=False) as s:
                self._authorize(s, who, Action.MANAGE_ACCOUNTS)
        self._set_password_row(name, pw_hash, "account.password")

    def disable_account(self, username: str, *, actor: Principal | None = None) -> AccountInfo:
        """Disable an account (owners only; it can no longer sign in or act)."""
        name = check_username(username)
        who = self._actor(actor)
        with self._write() as (s, head):
            self._authorize(s, who, Action.MANAGE_ACCOUNTS)
            row = s.exec(select(AccountRow).where(col(AccountRow.username) == name)).first()
            if row is None:
                raise AccountError(f"no account named {name!r}.")
            owners = s.exec(select(AccountRow).where(col(AccountRow.role) == Role.OWNER.value,
                                                     col(AccountRow.disabled) == 0)).all()
            if row.role == Role.OWNER.value and len(owners) <= 1 and not row.disabled:
                raise AccountError("the last owner cannot be disabled; create another owner first.")
            row.disabled = 1
            s.add(row)
            self._commit(s, head, "account.disable", None, [row])
            return _account_info(row)

    def accounts(self, *, actor: Principal | None = None) -> list[AccountInfo]:
        """Every local account (owners only)."""
        who = self._actor(actor)
        with self._session(write=False) as s:
            self._authorize(s, who, Action.MANAGE_ACCOUNTS)
            return [_account_info(r) for r in s.exec(select(AccountRow).order_by(col(AccountRow.id))).all()]

    # ------------------------------------------------------------------ grants

    def grant(self, fingerprint: str, subject: str, role: Role | str, *,
              epsilon: float | None = None, delta: float | None = None,
              actor: Principal | None = None) -> GrantInfo:
        """Grant ``subject`` access to a dataset (owners only).

        ``role="analyst"`` with ``epsilon`` (and optionally ``delta``, default the
        dataset's): the analyst may release on the dataset while their own spends, composed
        under its rule, stay within ``epsilon``. ``role="viewer"``: they may read its ledger
        and released answers. A new grant replaces the subject's previous one.
        """
        subj = normalise_subject(subject)
        try:
            rl = Role(role)
        except ValueError:
            raise AccountError("a grant's role is analyst or viewer.") from None
        if rl is Role.OWNER:
            raise AccountError("owners see every dataset; grant analyst or viewer.")
        who = self._actor(actor)
        with self._write() as (s, head):
            ds = self._dataset_row(s, fingerprint, lock=True)
            eff, _ = self._authorize(s, who, Action.GRANT, ds)
            eps: float | None = None
            dlt: float | None = None
            if rl is Role.ANALYST:
                if epsilon is None:
                    raise AccountError("an analyst grant needs the ε they may spend (epsilon=...).")
                eps, dlt = _budget(epsilon, ds.delta if delta is None else delta, "the grant's")
                if dlt > ds.delta:
                    raise BudgetError(
                        f"the grant's δ = {dlt:g} exceeds the dataset's lifetime δ = {ds.delta:g}."
                    )
            now = _utcnow()
            rows: list[Any] = []
            old = self._grant_row(s, ds, subj)
            if old is not None:
                old.revoked_at, old.revoked_by = now, eff.subject
                s.add(old)
                rows.append(old)
            assert ds.id is not None
            row = GrantRow(dataset_id=ds.id, subject=subj, role=rl.value, epsilon=eps, delta=dlt,
                           granted_by=eff.subject, created_at=now)
            s.add(row)
            rows.append(row)
            self._commit(s, head, "grant", ds.id, rows)
            return _grant_info(row, ds)

    def revoke(self, fingerprint: str, subject: str, *, actor: Principal | None = None) -> None:
        """Revoke ``subject``'s grant on a dataset (owners only). Spends stay counted."""
        subj = normalise_subject(subject)
        who = self._actor(actor)
        with self._write() as (s, head):
            ds = self._dataset_row(s, fingerprint, lock=True)
            eff, _ = self._authorize(s, who, Action.GRANT, ds)
            row = self._grant_row(s, ds, subj)
            if row is None:
                raise AccountError(f"{subj} has no grant on this dataset.")
            row.revoked_at, row.revoked_by = _utcnow(), eff.subject
            s.add(row)
            self._commit(s, head, "grant.revoke", ds.id, [row])

    def grants(self, fingerprint: str, *, actor: Principal | None = None) -> list[GrantInfo]:
        """The active grants on a dataset (owners see all; others their own)."""
        who = self._actor(actor)
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            eff, _ = self._authorize(s, who, Action.READ, ds)
            rows = s.exec(select(GrantRow).where(col(GrantRow.dataset_id) == ds.id,
                                                 col(GrantRow.revoked_at).is_(None))
                          .order_by(col(GrantRow.id))).all()
            return [_grant_info(r, ds) for r in rows
                    if eff.role is Role.OWNER or r.subject == eff.subject]

    # ------------------------------------------------------------------ datasets

    def register_dataset(
        self,
        fingerprint: str,
        name: str,
        epsilon: float,
        delta: float,
        rule: CompositionRule | str,
        *,
        schema_hash: str | None = None,
        rows: int | None = None,
        sampling: Sampling | None = None,
        actor: Principal | None = None,
    ) -> DatasetInfo:
        """Register a dataset's lifetime budget (idempotent for the same budget).

        Parameters
        ----------
        fingerprint : str
            A content digest of the data (or a legacy file hash), or an existing
            dataset's key. If it names a registered dataset (or one of its versions), that
            dataset is returned when the budget matches; otherwise a new dataset is
            declared with this content as its first version (only the keyed fingerprint is
            stored).
        name : str
            A display name (kept from the first registration).
        epsilon, delta : float
            The lifetime budget: 0 < ε ≤ 1000, 0 ≤ δ < 1 (JSON numbers; not booleans or
            strings).
        rule : CompositionRule or str
            The composition rule every spend is composed under.
        schema_hash : str, optional
            The schema the dataset is declared with (recorded).
        rows : int, optional
            Row count of this version (recorded).
        sampling : Sampling, optional
            The schema's declaration that the table is a secret random sample of a
            population at a public rate (:attr:`planner.data.schema.Schema.sampling`). The
            lifetime budget is then the *population's*, and every check amplifies the
            composed spends once (:func:`planner.privacy.sampling.sampled_total_epsilon`). Fixed at
            registration, like the budget and the rule.
        actor : Principal, optional
            Who registers (an owner; anyone who may read the dataset for the idempotent
            case).

        Returns
        -------
        DatasetInfo
            ``fingerprint`` is the dataset's public key (``ds-…``).

        Raises
        ------
        BudgetError
            If ε, δ or the rule is invalid.
        LedgerError
            If the dataset is registered with a different lifetime budget, rule or
            sampling declaration.
        PermissionDenied
            If the actor may not declare datasets.
        """
        ref = _check_text(fingerprint, "fingerprint")
        label = _check_text(name, "name", max_chars=200)
        eps, dlt = _budget(epsilon, delta, "the lifetime budget's")
        rl = _coerce_rule(rule)
        sh = None if schema_hash is None else _check_text(schema_hash, "schema_hash")
        smp = _check_sampling(sampling)
        who = self._actor(actor)
        with self._write() as (s, head):
            row = self._find_dataset(s, ref)
            if row is not None:
                self._authorize(s, who, Action.READ, row)
                _same_sampling(row, smp)
                if (row.epsilon, row.delta, row.rule) != (eps, dlt, rl.value):
                    raise LedgerError(
                        f"dataset {row.name!r} ({row.fingerprint}) is already registered with "
                        f"lifetime budget ε = {row.epsilon}, δ = {row.delta}, rule {row.rule}; got "
                        f"ε = {eps}, δ = {dlt}, rule {rl.value}. A lifetime budget is fixed once "
                        "set so that earlier spends cannot be outgrown; an owner may raise it "
                        "(a recorded decision). One table has one budget, whatever bytes it "
                        "arrives in."
                    )
                return _dataset_info(row)
            eff, _ = self._authorize(s, who, Action.DECLARE)
            now = _utcnow()
            ds = DatasetRow(fingerprint=_new_dataset_key(), name=label, epsilon=eps, delta=dlt,
                            rule=rl.value, created_at=now, schema_hash=sh, registered_by=eff.subject,
                            **_sampling_columns(smp))
            s.add(ds)
            s.flush()
            assert ds.id is not None
            ver = VersionRow(dataset_id=ds.id, fingerprint=self._keyed(ref), rows=_rows(rows),
                             schema_hash=sh, added_by=eff.subject, created_at=now)
            s.add(ver)
            self._commit(s, head, "dataset.declare", ds.id, [ds, ver])
            return _dataset_info(ds)

    def declare_dataset(
        self,
        name: str,
        epsilon: float,
        delta: float,
        rule: CompositionRule | str,
        *,
        schema_hash: str,
        digest: str | None = None,
        rows: int | None = None,
        sampling: Sampling | None = None,
        actor: Principal | None = None,
    ) -> DatasetInfo:
        """Declare a new dataset deliberately (owners only): its own name and budget.

        A changed file of a registered dataset is not a new dataset: it is a new version of
        the same budget (:meth:`add_version`, or ``digest=`` on :meth:`release`). This call
        is the one deliberate way to start a new budget, so it refuses a name already in
        use and content that is already a version of another dataset. ``sampling``: as in
        :meth:`register_dataset` (the table is a secret sample; the budget is the
        population's).
        """
        label = _check_text(name, "name", max_chars=200)
        eps, dlt = _budget(epsilon, delta, "the lifetime budget's")
        rl = _coerce_rule(rule)
        sh = _check_text(schema_hash, "schema_hash")
        smp = _check_sampling(sampling)
        dg = None if digest is None else _check_text(digest, "digest")
        who = self._actor(actor)
        with self._write() as (s, head):
            eff, _ = self._authorize(s, who, Action.DECLARE)
            for other in s.exec(select(DatasetRow)).all():
                if other.name.strip().casefold() == label.strip().casefold():
                    raise LedgerError(
                        f"a dataset named {label!r} is registered already ({other.fingerprint}). A "
                        "changed file is a new version of it (same budget); to start a new "
                        "budget deliberately, give the new dataset its own name."
                    )
            if dg is not None:
                self._refuse_known_version(s, dg)
            now = _utcnow()
            ds = DatasetRow(fingerprint=_new_dataset_key(), name=label, epsilon=eps, delta=dlt,
                            rule=rl.value, created_at=now, schema_hash=sh, registered_by=eff.subject,
                            **_sampling_columns(smp))
            s.add(ds)
            s.flush()
            assert ds.id is not None
            rows_out: list[Any] = [ds]
            if dg is not None:
                ver = VersionRow(dataset_id=ds.id, fingerprint=self._keyed(dg), rows=_rows(rows),
                                 schema_hash=sh, added_by=eff.subject, created_at=now)
                s.add(ver)
                rows_out.append(ver)
            self._commit(s, head, "dataset.declare", ds.id, rows_out)
            return _dataset_info(ds)

    def _refuse_known_version(self, s: Session, digest: str) -> None:
        ver = s.exec(select(VersionRow).where(col(VersionRow.fingerprint) == self._keyed(digest))).first()
        if ver is not None:
            other = s.get(DatasetRow, ver.dataset_id)
            raise LedgerError(
                f"this content is already a version of dataset {other.name if other else '?'!r}: one "
                "table has one budget. Release on that dataset, or have an owner raise its budget."
            )

    def add_version(self, fingerprint: str, digest: str, *, rows: int | None = None,
                    schema_hash: str | None = None, actor: Principal | None = None) -> VersionInfo:
        """Record ``digest`` as a content version of a registered dataset (same budget).

        Idempotent for a digest already recorded on this dataset; refused for one recorded
        on another dataset. Owners, and analysts granted a budget on the dataset, may add
        versions.
        """
        dg = _check_text(digest, "digest")
        sh = None if schema_hash is None else _check_text(schema_hash, "schema_hash")
        who = self._actor(actor)
        with self._write() as (s, head):
            ds = self._dataset_row(s, fingerprint, lock=True)
            eff, _ = self._authorize(s, who, Action.ADD_VERSION, ds)
            ver, added = self._version_in(s, ds, dg, rows, sh, eff)
            if added:
                self._commit(s, head, "version.add", ds.id, [ver])
            return _version_info(ver, ds)

    def _version_in(self, s: Session, ds: DatasetRow, digest: str, rows: int | None,
                    schema_hash: str | None, eff: Principal) -> tuple[VersionRow, bool]:
        fp = self._keyed(digest)
        ver = s.exec(select(VersionRow).where(col(VersionRow.fingerprint) == fp)).first()
        if ver is not None:
            if ver.dataset_id != ds.id:
                other = s.get(DatasetRow, ver.dataset_id)
                raise LedgerError(
                    f"this content is a version of dataset {other.name if other else '?'!r}, not of "
                    f"{ds.name!r}: one table has one budget. Release on the dataset it belongs to."
                )
            return ver, False
        assert ds.id is not None
        ver = VersionRow(dataset_id=ds.id, fingerprint=fp, rows=_rows(rows), schema_hash=schema_hash,
                         added_by=eff.subject, created_at=_utcnow())
        s.add(ver)
        return ver, True

    def find_dataset(self, digest: str, *, actor: Principal | None = None) -> DatasetInfo | None:
        """The registered dataset this content (digest) is a version of, or ``None``."""
        dg = _check_text(digest, "digest")
        who = self._actor(actor)
        with self._session(write=False) as s:
            ver = s.exec(select(VersionRow).where(col(VersionRow.fingerprint) == self._keyed(dg))).first()
            if ver is None:
                self._effective(s, who)
                return None
            ds = s.get(DatasetRow, ver.dataset_id)
            if ds is None:
                raise LedgerIntegrityError(_garbage(f"version {ver.id}", "its dataset is missing"))
            self._authorize(s, who, Action.READ, ds)
            return _dataset_info(ds)

    def versions(self, fingerprint: str, *, actor: Principal | None = None) -> list[VersionInfo]:
        """Every content version of a dataset, oldest first (keyed fingerprints only)."""
        who = self._actor(actor)
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            self._authorize(s, who, Action.READ, ds)
            rows = s.exec(select(VersionRow).where(col(VersionRow.dataset_id) == ds.id)
                          .order_by(col(VersionRow.id))).all()
            return [_version_info(v, ds) for v in rows]

    def raise_budget(
        self, fingerprint: str, epsilon: float, delta: float, *, reason: str,
        actor: Principal | None = None,
    ) -> DatasetInfo:
        """Raise a dataset's lifetime budget: a deliberate action of an owner, recorded
        with its reason and who made it.

        The budget can only grow (ε and δ each at least their current value, one of them
        larger), so nothing already spent is ever outgrown; the change is kept in the
        ledger (:meth:`budget_changes`) and exported with it.

        Raises
        ------
        BudgetError
            Invalid ε or δ.
        LedgerError
            Unknown dataset, an empty reason, or a value below the current budget.
        PermissionDenied
            The actor is not an owner.
        """
        _check_text(fingerprint, "fingerprint")
        eps, dlt = _budget(epsilon, delta, "the lifetime budget's")
        if not isinstance(reason, str) or not reason.strip():
            raise LedgerError(
                "raising a lifetime budget needs a reason (who decided it, and why); "
                "it is recorded in the ledger."
            )
        why = _check_text(reason.strip(), "reason")
        who = self._actor(actor)
        with self._write() as (s, head):
            ds = self._dataset_row(s, fingerprint, lock=True)
            eff, _ = self._authorize(s, who, Action.RAISE, ds)
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
            change = BudgetChangeRow(
                dataset_id=ds.id, old_epsilon=ds.epsilon, old_delta=ds.delta,
                new_epsilon=eps, new_delta=dlt, reason=why, created_at=_utcnow(),
                changed_by=eff.subject,
            )
            s.add(change)
            ds.epsilon, ds.delta = eps, dlt
            s.add(ds)
            self._commit(s, head, "dataset.raise", ds.id, [ds, change])
            return _dataset_info(ds)

    def budget_changes(self, fingerprint: str, *, actor: Principal | None = None) -> list[BudgetChange]:
        """Every recorded raise of the dataset's lifetime budget, oldest first."""
        who = self._actor(actor)
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            self._authorize(s, who, Action.READ, ds)
            return self._budget_changes(s, ds)

    def _budget_changes(self, s: Session, ds: DatasetRow) -> list[BudgetChange]:
        rows = s.exec(
            select(BudgetChangeRow)
            .where(col(BudgetChangeRow.dataset_id) == ds.id)
            .order_by(col(BudgetChangeRow.id))
        ).all()
        return [
            BudgetChange(r.old_epsilon, r.old_delta, r.new_epsilon, r.new_delta, r.reason,
                         _aware(r.created_at), r.changed_by or "")
            for r in rows
        ]

    def preview(self, fingerprint: str, spends: Sequence[Spend], *,
                actor: Principal | None = None) -> ReleasePreview:
        """What releasing ``spends`` would cost on the dataset, and whether it fits.

        Nothing is recorded. The check is the one :meth:`release` enforces, on the spends
        recorded so far (and, for an analyst, on their grant); a concurrent release may
        still take the budget first, so the release itself checks again under its lock.
        """
        who = self._actor(actor)
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            eff, grant = self._authorize(s, who, Action.PREVIEW, ds)
            old, own = self._spends_of(s, ds, eff.subject)
        return _preview(ds, old, list(spends), grant=grant, own_old=own)

    def datasets(self, *, actor: Principal | None = None) -> list[DatasetInfo]:
        """The registered datasets the actor may see, oldest first (owners: all; others:
        those granted or shared with them)."""
        who = self._actor(actor)
        with self._session(write=False) as s:
            eff = self._effective(s, who)
            rows = s.exec(
                select(DatasetRow).order_by(col(DatasetRow.created_at), col(DatasetRow.id))
            ).all()
            if eff.role is Role.OWNER:
                return [_dataset_info(r) for r in rows]
            mine = {g.dataset_id for g in s.exec(
                select(GrantRow).where(col(GrantRow.subject) == eff.subject,
                                       col(GrantRow.revoked_at).is_(None))).all()}
            return [_dataset_info(r) for r in rows if r.id in mine]

    def dataset(self, fingerprint: str, *, actor: Principal | None = None) -> DatasetInfo:
        """One registered dataset (by key, or by a digest of one of its versions);
        :class:`LedgerError` if unknown."""
        who = self._actor(actor)
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            self._authorize(s, who, Action.READ, ds)
            return _dataset_info(ds)

    def _keyed(self, digest: str) -> str:
        return keyed_fingerprint(digest, secret=self._secret)

    def _find_dataset(self, s: Session, ref: str, *, lock: bool = False) -> DatasetRow | None:
        row = s.exec(_dataset_stmt(ref, lock=lock)).first()
        if row is not None:
            return row
        ver = s.exec(select(VersionRow).where(col(VersionRow.fingerprint) == self._keyed(ref))).first()
        if ver is None:
            return None
        stmt = select(DatasetRow).where(col(DatasetRow.id) == ver.dataset_id)
        return s.exec(stmt.with_for_update() if lock else stmt).first()

    def _dataset_row(self, s: Session, fingerprint: str, *, lock: bool) -> DatasetRow:
        ref = _check_text(fingerprint, "fingerprint")
        row = self._find_dataset(s, ref, lock=lock)
        if row is None:
            raise LedgerError(
                f"the dataset is not in the ledger at {self.url} (looked up by key and by content "
                "fingerprint). Register its lifetime budget first (Ledger.register_dataset), or "
                "add this file as a version of a registered dataset."
            )
        return row

    # ------------------------------------------------------------------ reading

    def status(self, fingerprint: str, *, actor: Principal | None = None) -> BudgetStatus:
        """The dataset's budget now: total, spent under its rule, remaining, releases.

        Raises
        ------
        LedgerError
            If the dataset is not registered.
        """
        ds, releases = self._snapshot(fingerprint, actor)
        return _status_of(ds, releases)

    def releases(self, fingerprint: str, *, actor: Principal | None = None) -> list[ReleaseRecord]:
        """Every release of the dataset, oldest first, with its spends and answers.

        A pending release whose lease expired is reported as ``spent_no_answers``.
        """
        return self._snapshot(fingerprint, actor)[1]

    def history(self, fingerprint: str, *, actor: Principal | None = None) -> list[HistoryPoint]:
        """Cumulative spent ε (under the dataset's rule) after each release, in time order."""
        ds, releases = self._snapshot(fingerprint, actor)
        return _history_of(ds, releases)

    def export(self, fingerprint: str, *, include_answers: bool = False,
               actor: Principal | None = None) -> dict[str, Any]:
        """The dataset's ledger as a JSON-able dict (one consistent snapshot).

        Parameters
        ----------
        fingerprint : str
            The dataset.
        include_answers : bool, default False
            Include the released answer values. Off by default: the export then holds only
            budgets, spends, events, keyed fingerprints and who released.

        Returns
        -------
        dict
            ``{"format", "version", "dataset", "versions", "status", "releases", "history",
            "budget_changes"}``; non-finite floats in budgets become ``None``. No bare hash
            of the data: versions are keyed fingerprints.
        """
        who = self._actor(actor)
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            self._authorize(s, who, Action.READ, ds)
            releases = self._load_releases(s, ds)
            changes = self._budget_changes(s, ds)
            vers = s.exec(select(VersionRow).where(col(VersionRow.dataset_id) == ds.id)
                          .order_by(col(VersionRow.id))).all()
            versions = [_version_info(v, ds).to_dict() for v in vers]
        return {
            "format": "privacy-budget-planner/ledger",
            "version": 2,
            "ledger_id": self._ledger_id,
            "dataset": _dataset_info(ds).to_dict(),
            "versions": versions,
            "status": _status_of(ds, releases).to_dict(),
            "releases": [r.to_dict(include_answers=include_answers) for r in releases],
            "history": [h.to_dict() for h in _history_of(ds, releases)],
            "budget_changes": [c.to_dict() for c in changes],
        }

    def _snapshot(self, fingerprint: str, actor: Principal | None) -> tuple[DatasetRow, list[ReleaseRecord]]:
        """The dataset row and all its releases, read in one transaction."""
        who = self._actor(actor)
        with self._session(write=False) as s:
            ds = self._dataset_row(s, fingerprint, lock=False)
            self._authorize(s, who, Action.READ, ds)
            return ds, self._load_releases(s, ds)

    def _spends_of(self, s: Session, ds: DatasetRow, subject: str) -> tuple[list[Spend], list[Spend]]:
        """Every recorded spend on the dataset, and those of releases made by ``subject``."""
        rows = s.exec(
            select(SpendRow, ReleaseRow.actor)
            .join(ReleaseRow, col(SpendRow.release_id) == col(ReleaseRow.id))
            .where(col(ReleaseRow.dataset_id) == ds.id)
            .order_by(col(SpendRow.id))
        ).all()
        every: list[Spend] = []
        own: list[Spend] = []
        for sr, who in rows:
            sp = _spend_record(sr).spend
            every.append(sp)
            if who == subject:
                own.append(sp)
        return every, own

    def _load_releases(self, s: Session, ds: DatasetRow, only: int | None = None) -> list[ReleaseRecord]:
        """The dataset's releases in order, or only release ``only`` (one release's record
        without reading every earlier release's spends and answers)."""
        query = select(ReleaseRow).where(col(ReleaseRow.dataset_id) == ds.id)
        if only is not None:
            query = query.where(col(ReleaseRow.id) == only)
        rows = s.exec(query.order_by(col(ReleaseRow.created_at), col(ReleaseRow.id))).all()
        if not rows:
            return []
        ids = [r.id for r in rows]
        spend_rows = s.exec(
            select(SpendRow).where(col(SpendRow.release_id).in_(ids)).order_by(col(SpendRow.id))
        ).all()
        answer_rows = s.exec(
            select(AnswerRow).where(col(AnswerRow.release_id).in_(ids)).order_by(col(AnswerRow.id))
        ).all()
        versions = {v.id: v.fingerprint for v in s.exec(
            select(VersionRow).where(col(VersionRow.dataset_id) == ds.id)).all()}
        spends: dict[int, list[SpendRecord]] = {}
        for sr in spend_rows:
            spends.setdefault(sr.release_id, []).append(_spend_record(sr))
        answers: dict[int, dict[str, JSON]] = {}
        for ar in answer_rows:
            answers.setdefault(ar.release_id, {})[ar.query_id] = _answer_value(ar)
        out: list[ReleaseRecord] = []
        for r in rows:
            assert r.id is not None
            status = _effective_status(r)
            its = tuple(spends.get(r.id, ()))
            if not its:
                raise LedgerIntegrityError(_garbage(f"release {r.id}", "it has no spends"))
            out.append(
                ReleaseRecord(
                    release_id=r.id,
                    fingerprint=ds.fingerprint,
                    plan_hash=r.plan_hash,
                    schema_hash=r.schema_hash,
                    created_at=_aware(r.created_at),
                    status=status,
                    spends=its,
                    answers=answers.get(r.id, {}) if status is ReleaseStatus.DONE else None,
                    answered_at=None if r.answered_at is None else _aware(r.answered_at),
                    actor=r.actor or "",
                    version=None if r.version_id is None else versions.get(r.version_id),
                )
            )
        return out

    # ------------------------------------------------------------------ repair / verify

    def repair(self) -> int:
        """Mark pending releases whose lease expired as ``spent_no_answers`` (journaled).

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
            dead = [r.id for r in pending if not _alive(r)]
        if not dead:
            return 0
        marked: list[ReleaseRow] = []
        with self._write() as (s, head):
            rows = s.exec(select(ReleaseRow).where(col(ReleaseRow.id).in_(dead))).all()
            for r in rows:
                if r.status == ReleaseStatus.PENDING.value and not _alive(r):
                    r.status = ReleaseStatus.SPENT_NO_ANSWERS.value
                    r.error = r.error or "the releasing process stopped renewing its lease before storing answers"
                    s.add(r)
                    marked.append(r)
            if marked:
                self._commit(s, head, "release.lost", None, marked)
        return len(marked)

    def integrity_check(self) -> list[str]:
        """Problems found in the ledger (an empty list when it is consistent): the
        problems of :meth:`verify`."""
        return list(self.verify().problems)

    def verify(self, *, actor: Principal | None = None) -> VerifyReport:
        """Check everything: the journal chain, the head, the marker, the replay of the
        journal against every table, stored events and statuses, and (SQLite) the database
        file's own integrity check.

        Never raises for a problem it finds; each one is a line of the report.
        """
        if actor is not None or self._default_actor is not None:
            who = self._actor(actor)
            with self._session(write=False) as s:
                self._authorize(s, who, Action.VERIFY)
        return _verify(self)

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
        digest: str | None = None,
        rows: int | None = None,
        actor: Principal | None = None,
    ) -> ReleaseRecord:
        """Check the budget, record the spend, sample, store the answers — in that order.

        Parameters
        ----------
        fingerprint : str
            The dataset: its key, or a content digest of one of its versions.
        plan_hash : str
            Identifies the plan; a plan is released at most once per dataset. Releasing the
            same plan hash again returns the stored answers without sampling.
        schema_hash : str
            The schema the plan was made under (recorded).
        spends : sequence of (query_id, Spend)
            One entry per mechanism invocation; query ids must be unique.
        sample : callable
            Draws the noise and returns ``{query_id: answer}`` (JSON values). Called at
            most once, after the spend is committed and outside any transaction, while a
            heartbeat renews the release's lease.
        wait_seconds : float, default 60
            How long to wait when the same plan is being released right now by another
            thread or process (its answers are then returned, status ``reused``).
        digest : str, optional
            The content digest of the data being released. It is recorded as a version of
            the dataset (same budget) if new, and refused if it is a version of another
            dataset.
        rows : int, optional
            Row count of that version (recorded with a new version).
        actor : Principal, optional
            Who releases: an owner, or an analyst within their grant.

        Returns
        -------
        ReleaseRecord
            Status ``done`` (sampled now) or ``reused`` (answered earlier); ``actor`` is
            who released.

        Raises
        ------
        BudgetExceededError
            If the new spends do not fit in what remains under the dataset's rule (or the
            analyst's grant).
        PermissionDenied
            If the actor may not release on this dataset.
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
        dg = None if digest is None else _check_text(digest, "digest")
        prepared = _prepare_spends(spends)
        who = self._actor(actor)
        nonce = uuid.uuid4().hex
        try:
            wait = float(wait_seconds)
        except (TypeError, ValueError):
            wait = WAIT_FOR_SAME_PLAN_SECONDS
        deadline = time.monotonic() + max(0.0, wait if math.isfinite(wait) else 0.0)
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.add(nonce)
            _MY_CLAIMS.add(nonce)
        settled = False
        release_id: int | None = None
        try:
            while True:
                outcome = self._reserve(fingerprint, plan_hash, schema_hash, prepared, nonce, who,
                                        dg, rows)
                if not isinstance(outcome, _InProgress):
                    break
                if time.monotonic() >= deadline:
                    raise LedgerError(
                        f"plan {plan_hash!r} is being released on this dataset by another "
                        f"session and did not finish within {wait:g} s. Reload in a moment: its "
                        "stored answers will be shown."
                    )
                time.sleep(0.05)
            if isinstance(outcome, ReleaseRecord):
                settled = True
                return outcome
            release_id = outcome
            try:
                if self._memory:  # one process, one connection: liveness is _IN_FLIGHT
                    raw_answers = sample()
                else:
                    with _Heartbeat(self, release_id):
                        raw_answers = sample()
            except BaseException as exc:
                settled = self._mark_lost(release_id, type(exc).__name__)
                raise
            try:
                payload = _serialise_answers(raw_answers)
            except (TypeError, ValueError) as exc:
                settled = self._mark_lost(release_id, type(exc).__name__)
                raise LedgerError(
                    f"the answers of plan {plan_hash!r} are not JSON values, so they could not "
                    "be stored; the budget stays spent and the plan will not be sampled again. "
                    "Return plain numbers, strings, lists and dicts from sample()."
                ) from exc
            rec = self._store_answers(release_id, plan_hash, payload, who)
            settled = True
            return rec
        finally:
            with _IN_FLIGHT_LOCK:
                _IN_FLIGHT.discard(nonce)
                if settled or release_id is None:
                    _MY_CLAIMS.discard(nonce)

    def _reserve(
        self,
        fingerprint: str,
        plan_hash: str,
        schema_hash: str,
        prepared: list[tuple[str, Spend, str, float | None]],
        nonce: str,
        who: Principal,
        digest: str | None,
        rows: int | None,
    ) -> int | ReleaseRecord | _InProgress:
        """Transaction 1: lock, dedupe, check the budget, record the spend, journal, commit."""
        with self._write() as (s, head):
            ds = self._dataset_row(s, fingerprint, lock=True)
            eff, grant = self._authorize(s, who, Action.RELEASE, ds)
            assert ds.id is not None
            existing = s.exec(
                select(ReleaseRow).where(
                    col(ReleaseRow.dataset_id) == ds.id, col(ReleaseRow.plan_hash) == plan_hash
                )
            ).first()
            if existing is not None:
                return self._existing(s, head, ds, existing, plan_hash, prepared)
            journal: list[Any] = []
            version_id = None
            if digest is not None:
                ver, added = self._version_in(s, ds, digest, rows, schema_hash, eff)
                if added:
                    s.flush()
                    journal.append(ver)
                version_id = ver.id
            old, own = self._spends_of(s, ds, eff.subject)
            new = [sp for _, sp, _, _ in prepared]
            preview = _preview(ds, old, new, grant=grant, own_old=own)
            if not preview.fits:
                raise BudgetExceededError(preview.reason)
            now = _utcnow()
            row = ReleaseRow(
                dataset_id=ds.id,
                plan_hash=plan_hash,
                schema_hash=schema_hash,
                created_at=now,
                status=ReleaseStatus.PENDING.value,
                owner=_owner_token(nonce),
                actor=eff.subject,
                version_id=version_id,
                lease_expires_at=now + timedelta(seconds=self.lease_seconds),
                heartbeat_at=now,
            )
            s.add(row)
            s.flush()
            assert row.id is not None
            journal.append(row)
            for qid, sp, event_json, rho in prepared:
                sr = SpendRow(
                    release_id=row.id,
                    query_id=qid,
                    epsilon=sp.epsilon,
                    delta=sp.delta,
                    rho=rho,
                    event_json=event_json,
                )
                s.add(sr)
                journal.append(sr)
            release_id = row.id
            self._commit(s, head, "release.reserve", ds.id, journal)
            return release_id

    def _existing(
        self,
        s: Session,
        head: HeadRow,
        ds: DatasetRow,
        existing: ReleaseRow,
        plan_hash: str,
        prepared: list[tuple[str, Spend, str, float | None]],
    ) -> ReleaseRecord | _InProgress:
        """The plan was released before: reuse its answers, wait for it, or refuse."""
        status = _status_value(existing)
        if status is ReleaseStatus.DONE:
            recs = self._load_releases(s, ds, only=existing.id)
            stored = {sp.query_id for sp in recs[0].spends}
            asked = {qid for qid, _, _, _ in prepared}
            if stored != asked:
                raise LedgerError(
                    f"plan hash {plan_hash!r} was released on dataset {ds.name!r} with "
                    f"queries {sorted(stored)}, not {sorted(asked)}. The plan hash must "
                    "identify the plan: hash the full plan (queries, mechanisms, ε)."
                )
            return _release_record_with(recs[0], ReleaseStatus.REUSED)
        if status is ReleaseStatus.PENDING and _alive(existing):
            return _IN_PROGRESS
        if status is ReleaseStatus.PENDING:
            existing.status = ReleaseStatus.SPENT_NO_ANSWERS.value
            existing.error = "the releasing process stopped renewing its lease before storing answers"
            s.add(existing)
            self._commit(s, head, "release.lost", ds.id, [existing])
        raise LedgerError(
            f"plan {plan_hash!r} was already released on dataset {ds.name!r} "
            f"(release {existing.id}, {_aware(existing.created_at).isoformat()}): its budget was "
            "spent but its answers were lost before they were stored. The spend stays counted "
            "and the plan will not be sampled again, since a second draw would spend the "
            "budget twice. Make a new plan (it will be charged as a new release)."
        )

    def _renew_lease(self, release_id: int) -> None:
        """Heartbeat: push the lease of a pending release forward (not journaled)."""
        with self._session(write=True) as s:
            row = s.get(ReleaseRow, release_id)
            if row is None or row.status != ReleaseStatus.PENDING.value:
                return
            now = _utcnow()
            row.heartbeat_at = now
            row.lease_expires_at = now + timedelta(seconds=self.lease_seconds)
            s.add(row)
            s.commit()

    def _mark_lost(self, release_id: int, reason: str) -> bool:
        """Best effort after ``sample()`` failed: the spend stays, the answers are lost.

        Returns whether the release is now recorded as lost."""
        try:
            with self._write() as (s, head):
                row = s.get(ReleaseRow, release_id)
                if row is not None and row.status == ReleaseStatus.PENDING.value:
                    row.status = ReleaseStatus.SPENT_NO_ANSWERS.value
                    row.error = f"sampling failed ({reason})"
                    s.add(row)
                    self._commit(s, head, "release.lost", row.dataset_id, [row])
                return True
        except (PlannerError, sa_exc.SQLAlchemyError):
            # The row stays pending; this process still knows the claim is not in flight,
            # and everyone else sees its lease expire.
            return False

    def _store_answers(
        self, release_id: int, plan_hash: str, payload: dict[str, str], who: Principal
    ) -> ReleaseRecord:
        """Transaction 2: store every answer and mark the release done, atomically."""
        try:
            with self._write() as (s, head):
                row = s.get(ReleaseRow, release_id)
                if row is None or row.status != ReleaseStatus.PENDING.value:
                    raise LedgerError(
                        f"release {release_id} of plan {plan_hash!r} is no longer pending (its "
                        "lease expired before the answers were ready); its answers were not "
                        "stored. The budget stays spent."
                    )
                journal: list[Any] = []
                for qid, text in payload.items():
                    ar = AnswerRow(release_id=release_id, query_id=qid, payload_json=text)
                    s.add(ar)
                    journal.append(ar)
                row.status = ReleaseStatus.DONE.value
                row.answered_at = _utcnow()
                s.add(row)
                journal.append(row)
                dataset_id = row.dataset_id
                self._commit(s, head, "release.answer", dataset_id, journal)
        except (sa_exc.SQLAlchemyError, LedgerIntegrityError) as exc:
            self._mark_lost(release_id, type(exc).__name__)
            raise LedgerError(
                f"the answers of plan {plan_hash!r} could not be stored in the ledger at "
                f"{self.url} ({type(exc).__name__}); the budget stays spent and the plan will "
                "not be sampled again."
            ) from exc
        with self._session(write=False) as s:
            ds = s.get(DatasetRow, dataset_id)
            assert ds is not None
            recs = self._load_releases(s, ds, only=release_id)
        return recs[0]


# --------------------------------------------------------------------------- more helpers


def _new_dataset_key() -> str:
    return "ds-" + random_hex(10)


def _rows(rows: Any) -> int | None:
    if rows is None:
        return None
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0 or rows > 2**53:
        raise LedgerError("rows must be a whole number ≥ 0.")
    return rows


def _account_info(row: AccountRow) -> AccountInfo:
    try:
        role = Role(row.role)
    except ValueError:
        raise LedgerIntegrityError(_garbage(f"the role of account {row.id}", "unknown role")) from None
    return AccountInfo(row.username, role, bool(row.disabled), row.created_by, _aware(row.created_at))


def _grant_info(row: GrantRow, ds: DatasetRow) -> GrantInfo:
    try:
        role = Role(row.role)
    except ValueError:
        raise LedgerIntegrityError(_garbage(f"the role of grant {row.id}", "unknown role")) from None
    return GrantInfo(ds.fingerprint, row.subject, role, row.epsilon, row.delta, row.granted_by,
                     _aware(row.created_at).isoformat())


def _version_info(row: VersionRow, ds: DatasetRow) -> VersionInfo:
    return VersionInfo(ds.fingerprint, row.fingerprint, row.rows, row.schema_hash, row.added_by,
                       _aware(row.created_at))


_DUMMY: dict[str, str] = {}


def _DUMMY_HASH() -> str:
    """An Argon2 hash to verify against for unknown users (same work as a real check)."""
    if "h" not in _DUMMY:
        _DUMMY["h"] = hash_password(random_hex(16))
    return _DUMMY["h"]


_MODELS: Final = {
    "datasets": DatasetRow, "dataset_versions": VersionRow, "budget_changes": BudgetChangeRow,
    "releases": ReleaseRow, "spends": SpendRow, "answers": AnswerRow, "accounts": AccountRow,
    "grants": GrantRow,
}


class _VerifyAborted(Exception):
    """A check found a problem that stops the verification (already in the problem list)."""


def _verify(ledger: Ledger) -> VerifyReport:
    """The checks of :meth:`Ledger.verify` (also run on a ledger that failed to open).

    In order, each stopping the rest when it fails: the SQLite file, the database's own
    integrity and the ledger's tables (:func:`_check_database`), the stored rows and
    their values (:func:`_read_ledger_rows`), the head record and the server secret
    (:func:`_check_head_secret`); then the journal's MAC chain
    (:func:`_check_journal_chain`), the head against the journal's end and the tables
    against the journal's replay (:func:`_check_replay`), and the machine's marker
    (:func:`_check_marker`).
    """
    problems: list[str] = list(ledger._sqlite_file_problems())
    marker = ledger._read_marker(problems)
    checked: dict[str, int] = {}
    marker_path = None if ledger._marker is None else str(ledger._marker.path)
    marker_seq = None if marker is None else marker.seq

    def report(ledger_id: str | None, entries: int, head_seq: int | None) -> VerifyReport:
        return VerifyReport(ledger.url, ledger_id, entries, head_seq, marker_path, marker_seq,
                            tuple(problems), dict(checked))

    if problems:
        return report(None, 0, None)
    try:
        _check_database(ledger, marker, problems)
        head, journal, actual = _read_ledger_rows(ledger, problems, checked)
    except _VerifyAborted:
        return report(None, 0, None)
    if head is None:
        problems.append("the head record is missing")
        return report(None, len(journal), None)
    checked["journal"] = len(journal)
    if not _check_head_secret(ledger, head, problems):
        return report(head.ledger_id, len(journal), head.seq)
    bodies = _check_journal_chain(chain_key(ledger._secret, head.ledger_id), journal, problems)
    if bodies is not None:
        _check_replay(head, journal, bodies, actual, problems)
    if marker is not None:
        _check_marker(marker, head, journal, problems)
    return report(head.ledger_id, len(journal), head.seq)


def _check_database(ledger: Ledger, marker: MarkerState | None, problems: list[str]) -> None:
    """The database can be read, passes SQLite's own integrity and foreign-key checks, and
    holds every table of the ledger.

    Raises
    ------
    _VerifyAborted
        After adding the problem, when the rest cannot be checked.
    """
    try:
        names = ledger._table_names()
    except PlannerError as exc:
        problems.append(str(exc))
        raise _VerifyAborted from None
    if ledger._is_sqlite and not ledger._memory and names:
        _check_sqlite_integrity(ledger, problems)
    missing = [t for t in ("ledger_head", "journal", *_TRACKED) if t not in names]
    if not names:
        problems.append("there is no ledger here (no tables)" + (
            f", but this machine recorded ledger {marker.ledger_id} with {marker.seq} entries here"
            if marker is not None else ""))
        raise _VerifyAborted
    if missing:
        problems.append(f"tables missing: {', '.join(missing)} (a ledger of format 1 is migrated by "
                        "opening it once)" if "ledger_head" in missing and names >= _V1_TABLES
                        else f"tables missing: {', '.join(missing)}")
        raise _VerifyAborted


def _check_sqlite_integrity(ledger: Ledger, problems: list[str]) -> None:
    """SQLite's ``PRAGMA integrity_check`` and ``PRAGMA foreign_key_check`` find nothing.

    Raises
    ------
    _VerifyAborted
        When the database cannot even be checked (it is damaged).
    """
    try:
        with ledger.engine.connect() as conn:
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
    ledger: Ledger, problems: list[str], checked: dict[str, int]
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
        with ledger.engine.connect() as probe:
            lacking = ledger._missing_columns(probe)  # a format-2 ledger not opened since
            probe.rollback()
        with ledger._session(write=False) as s:
            head = s.get(HeadRow, 1)
            journal = s.exec(select(JournalRow).order_by(col(JournalRow.seq))).all()
            actual = {table: _table_rows(s, table, model, lacking, checked)
                      for table, model in _MODELS.items()}
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
                if c not in lacking[table] and c.name not in _VOLATILE.get(table, ())]
        raw = s.connection().execute(select(*cols)).mappings().all()
        checked[table] = len(raw)
        for m in raw:
            d = {k: canonical_value(v) for k, v in m.items()
                 if not (k in _OPTIONAL.get(table, ()) and v is None)}
            rows[d["id"]] = d
        return rows
    rows_: Sequence[Any] = s.exec(select(model)).all()
    checked[table] = len(rows_)
    for r in rows_:
        _, d = _row_dict(r)
        rows[d["id"]] = d
    return rows


def _check_stored_values(s: Session, problems: list[str]) -> None:
    """Stored events, release statuses and answers parse."""
    for sr in s.exec(select(SpendRow)).all():
        try:
            _spend_record(sr)
        except LedgerIntegrityError as exc:
            problems.append(str(exc).split(":")[0] + ": unreadable")
    for rr in s.exec(select(ReleaseRow)).all():
        try:
            _status_value(rr)
        except LedgerIntegrityError:
            problems.append(f"release {rr.id} has an unknown status")
    for ar in s.exec(select(AnswerRow)).all():
        try:
            _answer_value(ar)
        except LedgerIntegrityError:
            problems.append(f"the answer of release {ar.release_id} ({ar.query_id!r}) is not JSON")


def _check_head_secret(ledger: Ledger, head: HeadRow, problems: list[str]) -> bool:
    """The ledger was created with this server's secret (else its journal cannot be checked)."""
    if head.secret_check != secret_check(secret=ledger._secret):
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
        problems.extend(compare(expected, actual, _TRACKED))
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
        identity, memory = _url_identity(parsed)
        path = Path(parsed.database or "").expanduser()
        if not memory and not path.exists():
            marker = Marker(identity, parsed.render_as_string(hide_password=True), _home())
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
    led = Ledger(raw, _gate=False)
    try:
        return _verify(led)
    finally:
        led.close()


def resolve_dataset(ledger: Ledger, digests: Sequence[str]) -> str | None:
    """The key (``ds-…``) of the registered dataset any of ``digests`` is a version of, or
    ``None``; the other digests are recorded as versions of it on the way.

    The web app knows a table by two digests: the key of its content under the declared
    schema (:func:`planner.data.sources.table_key`, what ``planner release`` computes in its
    scan) and the hash of the file's bytes (the key it had before the content digest, and
    the one a server file is listed by). Whichever the ledger knows names the dataset, and
    linking the other keeps one table one budget: a ledger written by an earlier version
    keeps its spends, the command line finds the app's dataset, and declaring more columns
    of the same file does not open a second budget.

    Raises
    ------
    LedgerError
        The digests name two different datasets, or the principal may not read the
        dataset (:class:`~planner.core.errors.PermissionDenied`).
    """
    found: dict[str, str] = {}
    for d in digests:
        info = ledger.find_dataset(d)
        if info is not None:
            found[d] = info.fingerprint
    keys = set(found.values())
    if not keys:
        return None
    if len(keys) > 1:
        raise LedgerError(
            "this table's content and its file are registered as two different datasets; ask an owner to "
            "retire one of them (one table has one budget)."
        )
    (key,) = keys
    try:
        for d in digests:
            if d not in found:
                ledger.add_version(key, d)
    except PermissionDenied:  # a reader who may not add versions: the dataset is found all the same
        pass
    return key
