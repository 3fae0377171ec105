"""The ledger's tables (SQLModel, on a private registry) and the one form in which a row is
journaled and compared.

Every table except the head and the journal is *tracked*: each change to one of its rows is
appended to the journal in the same transaction (:mod:`planner.ledger.store`), and the
journal's replay must equal the table (:mod:`planner.ledger.verify`). The release rows'
liveness columns (who holds the lease, until when) change while sampling and are not
journaled (:data:`VOLATILE`).

The tables use their own SQLAlchemy registry and metadata (:data:`LEDGER_METADATA`), so
re-importing this module never redefines a table on :data:`sqlmodel.SQLModel.metadata`,
and ``create_all`` only ever touches the ledger tables.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from sqlalchemy import Column, DateTime, Float, ForeignKey, Integer, Text, UniqueConstraint
from sqlalchemy.orm import registry as sa_registry
from sqlmodel import Field, SQLModel

from planner.ledger.integrity import canonical_value

__all__ = [
    "LEDGER_METADATA",
    "MODELS",
    "OPTIONAL",
    "TRACKED",
    "V1_TABLES",
    "VOLATILE",
    "AccountRow",
    "AnswerRow",
    "BudgetChangeRow",
    "CheckpointRow",
    "DatasetRow",
    "GrantRow",
    "HeadRow",
    "JournalRow",
    "ReleaseRow",
    "ReleaseStatus",
    "SignInRow",
    "SpendRow",
    "VersionRow",
    "row_dict",
]


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




class SignInRow(_LedgerModel, table=True):
    """A failed sign-in to a local account (format 4): the evidence the throttle counts.

    ``username`` is the name tried (an unknown one too: guessing names is an attack as
    well), ``client`` who tried (the app's client address, or ``"cli"``), never the
    password. Successful sign-ins are not recorded.
    """

    __tablename__ = "sign_in_failures"

    id: int | None = Field(default=None, primary_key=True)
    username: str = Field(sa_column=Column(Text, nullable=False, index=True))
    client: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


#: Tables whose content the journal replays (liveness columns excluded).
TRACKED: Final = ("datasets", "dataset_versions", "budget_changes", "releases", "spends",
                  "answers", "accounts", "grants", "sign_in_failures")
VOLATILE: Final = {"releases": frozenset({"owner", "lease_expires_at", "heartbeat_at"})}
#: Nullable columns added after format 2: journaled only when set, so a row that does not
#: use them has the same journal form as before they existed (old entries still replay).
OPTIONAL: Final = {"datasets": frozenset({"sampling_rate", "sampling_scheme"})}
V1_TABLES: Final = frozenset({"datasets", "releases", "spends", "answers"})


#: The model of each tracked table.
MODELS: Final[dict[str, Any]] = {
    "datasets": DatasetRow, "dataset_versions": VersionRow, "budget_changes": BudgetChangeRow,
    "releases": ReleaseRow, "spends": SpendRow, "answers": AnswerRow, "accounts": AccountRow,
    "grants": GrantRow, "sign_in_failures": SignInRow,
}


def row_dict(row: Any) -> tuple[str, dict[str, Any]]:
    """``(table, {column: canonical value})`` of an ORM row, liveness columns left out:
    the form a row is journaled in and compared with."""
    table = row.__table__
    skip = VOLATILE.get(table.name, frozenset())
    optional = OPTIONAL.get(table.name, frozenset())
    return table.name, {
        c.name: canonical_value(getattr(row, c.name)) for c in table.columns
        if c.name not in skip and not (c.name in optional and getattr(row, c.name) is None)
    }


class CheckpointRow(_LedgerModel, table=True):
    """A MAC-keyed checkpoint of the verified record at journal entry ``seq``
    (:mod:`planner.ledger.checkpoint`): not journaled, only ever trusted after its checks."""

    __tablename__ = "ledger_checkpoints"

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(sa_column=Column(Text, nullable=False))
    seq: int = Field(sa_column=Column(Integer, nullable=False, index=True))
    chain_mac: str = Field(sa_column=Column(Text, nullable=False))
    body: str = Field(sa_column=Column(Text, nullable=False))
    mac: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
