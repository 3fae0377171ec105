"""The ledger's values as callers see them (frozen, JSON-able), and how each is read from a
row in its journal form (:func:`planner.ledger.tables.row_dict`).

Rows reach these readers from the verified record of the journal
(:mod:`planner.ledger.record`), never straight from a table a decision could be fooled by.
A value no planner could have written (an unknown status or rule, an event that does not
parse) is :class:`~planner.core.errors.LedgerIntegrityError` naming where it is, never a
traceback.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from planner.core.errors import BudgetError, LedgerIntegrityError, PlannerError
from planner.core.strict_json import JSON, check_depth
from planner.ledger.accounts import GrantInfo, Role
from planner.ledger.tables import ReleaseStatus
from planner.privacy.accounting import CompositionRule, Spend
from planner.privacy.events import PrivacyEvent, event_from_dict
from planner.privacy.sampling import Sampling, SamplingScheme

__all__ = [
    "AccountInfo",
    "BudgetChange",
    "BudgetStatus",
    "DatasetInfo",
    "HistoryPoint",
    "ReleasePreview",
    "ReleaseRecord",
    "SpendRecord",
    "VersionInfo",
]


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
    #: The lifetime ε in force when the release was made (a raise steps it up).
    epsilon_total: float = field(default=math.nan)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "release_id": self.release_id,
            "plan_hash": self.plan_hash,
            "created_at": self.created_at.isoformat(),
            "status": str(self.status),
            "epsilon_spent": _finite_or_none(self.epsilon_spent),
            "epsilon_release": _finite_or_none(self.epsilon_release),
            "epsilon_total": _finite_or_none(self.epsilon_total),
        }




# --------------------------------------------------------------------------- reading rows


def garbage(where: str, why: str) -> str:
    """The message for a stored value no planner could have written."""
    return (
        f"{where} cannot be read ({why}): the ledger was changed outside the planner or is "
        "damaged. Nothing was spent. Run `planner ledger verify` and restore the ledger from "
        "a backup."
    )


def parse_time(value: Any, where: str) -> datetime:
    """A journaled time (UTC ISO text, :func:`planner.ledger.integrity.canonical_value`)."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise LedgerIntegrityError(garbage(where, "not a time")) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _number(value: Any, where: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise LedgerIntegrityError(garbage(where, "not a finite number ≥ 0"))
    return float(value)


def parse_event(text: Any, where: str) -> PrivacyEvent:
    """A stored event; :class:`LedgerIntegrityError` (never a traceback) if it is garbage."""
    try:
        if not isinstance(text, str):
            raise LedgerIntegrityError(f"{where} is not text")
        check_depth(text, where, error=LedgerIntegrityError)
        data = json.loads(text)
        if not isinstance(data, dict):
            raise LedgerIntegrityError(f"{where} is not an object")
        return event_from_dict(data)
    except LedgerIntegrityError as exc:
        raise LedgerIntegrityError(garbage(where, str(exc))) from None
    except (PlannerError, TypeError, ValueError, AttributeError, RecursionError, OverflowError) as exc:
        raise LedgerIntegrityError(garbage(where, type(exc).__name__)) from None


def rule_of(d: Mapping[str, Any]) -> CompositionRule:
    try:
        return CompositionRule(d["rule"])
    except (ValueError, KeyError):
        raise LedgerIntegrityError(garbage(f"the rule of dataset {d.get('id')}", "unknown rule")) from None


def sampling_of(d: Mapping[str, Any]) -> Sampling | None:
    """The secret-sample declaration recorded with a dataset (``None``: not a sample).

    Raises
    ------
    LedgerIntegrityError
        One column set without the other, or values no registration could have written.
    """
    rate, scheme = d.get("sampling_rate"), d.get("sampling_scheme")
    if rate is None and scheme is None:
        return None
    where = f"the sampling declaration of dataset {d.get('id')}"
    if rate is None or scheme is None:
        raise LedgerIntegrityError(garbage(where, "rate and scheme must be set together"))
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        raise LedgerIntegrityError(garbage(where, "the rate is not a number"))
    try:
        return Sampling(float(rate), SamplingScheme(scheme))
    except (BudgetError, ValueError):
        raise LedgerIntegrityError(garbage(where, "not a rate in (0, 1] and a known scheme")) from None


def dataset_info(d: Mapping[str, Any]) -> DatasetInfo:
    return DatasetInfo(
        fingerprint=str(d["fingerprint"]),
        name=str(d["name"]),
        epsilon=float(d["epsilon"]),
        delta=float(d["delta"]),
        rule=rule_of(d),
        created_at=parse_time(d["created_at"], f"dataset {d.get('id')}"),
        schema_hash=d.get("schema_hash"),
        registered_by=d.get("registered_by") or "",
        sampling=sampling_of(d),
    )


def version_info(v: Mapping[str, Any], dataset_key: str) -> VersionInfo:
    return VersionInfo(dataset_key, str(v["fingerprint"]), v.get("rows"), v.get("schema_hash"),
                       str(v["added_by"]), parse_time(v["created_at"], f"version {v.get('id')}"))


def role_of(d: Mapping[str, Any], what: str) -> Role:
    try:
        return Role(d["role"])
    except (ValueError, KeyError):
        raise LedgerIntegrityError(garbage(f"the role of {what} {d.get('id')}", "unknown role")) from None


def account_info(a: Mapping[str, Any]) -> AccountInfo:
    return AccountInfo(str(a["username"]), role_of(a, "account"), bool(a["disabled"]),
                       str(a["created_by"]), parse_time(a["created_at"], f"account {a.get('id')}"))


def grant_info(g: Mapping[str, Any], dataset_key: str) -> GrantInfo:
    return GrantInfo(dataset_key, str(g["subject"]), role_of(g, "grant"), g.get("epsilon"), g.get("delta"),
                     str(g["granted_by"]), parse_time(g["created_at"], f"grant {g.get('id')}").isoformat())


def budget_change(c: Mapping[str, Any]) -> BudgetChange:
    return BudgetChange(float(c["old_epsilon"]), float(c["old_delta"]), float(c["new_epsilon"]),
                        float(c["new_delta"]), str(c["reason"]),
                        parse_time(c["created_at"], f"budget change {c.get('id')}"), c.get("changed_by") or "")


def status_value(r: Mapping[str, Any]) -> ReleaseStatus:
    """A stored release status (``reused`` is never stored)."""
    raw = r.get("status")
    try:
        status = ReleaseStatus(str(raw))
    except ValueError:
        status = None
    if status is None or status is ReleaseStatus.REUSED:
        shown = repr(raw[:20]) if isinstance(raw, str) else "a non-text value"
        raise LedgerIntegrityError(garbage(f"the status of release {r.get('id')} ({shown})", "unknown status"))
    return status


def spend_record(d: Mapping[str, Any]) -> SpendRecord:
    where = f"the event of spend {d.get('id')} (release {d.get('release_id')})"
    ev = parse_event(d.get("event_json"), where)
    eps = _number(d.get("epsilon"), f"the epsilon of spend {d.get('id')}")
    dlt = _number(d.get("delta"), f"the delta of spend {d.get('id')}")
    rho = d.get("rho")
    assert eps is not None and dlt is not None
    return SpendRecord(query_id=str(d["query_id"]), epsilon=eps, delta=dlt,
                       rho=math.inf if rho is None or isinstance(rho, str) else float(rho), event=ev)


def answer_value(d: Mapping[str, Any]) -> JSON:
    try:
        value: JSON = json.loads(d["payload_json"])
        return value
    except (ValueError, TypeError, KeyError, RecursionError):
        raise LedgerIntegrityError(
            garbage(f"the answer of query {d.get('query_id')!r} of release {d.get('release_id')}", "not JSON")
        ) from None


def payload_digest(text: str) -> str:
    """What the record keeps of a stored answer: its SHA-256, enough to prove that the
    answer shown is the one journaled without holding every answer in memory."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def with_status(rec: ReleaseRecord, status: ReleaseStatus) -> ReleaseRecord:
    return ReleaseRecord(rec.release_id, rec.fingerprint, rec.plan_hash, rec.schema_hash, rec.created_at,
                         status, rec.spends, rec.answers, rec.answered_at, rec.actor, rec.version)
