"""The release transaction: check the budget, record the spend, sample, store the answers —
in that order, and never twice.

1. lock the ledger head, catch the record up, and prove that the rows this decision reads
   (the dataset, its releases and spends, the actor's account and grant) agree with the
   journal (:meth:`planner.ledger.store.Store.prove`);
2. a release whose plan hash was already answered returns its stored answers (nothing is
   sampled again); one that was committed but lost its answers raises;
3. check that the new spends fit the dataset's budget (and, for an analyst, the budget
   granted to them): :func:`planner.ledger.check.preview`, on the record's composition;
4. insert the spends and a *pending* release holding a **lease**, journal it, **commit**;
5. call ``sample()`` (the only place noise is drawn), outside any transaction, while a
   heartbeat renews the lease (:mod:`planner.ledger.liveness`);
6. store the answers and mark the release *done* in a second, journaled transaction.

A crash between 4 and 6 leaves the spend counted and the release pending; once its lease
expires the next reader reports it, and the next writer records it, as
``spent_no_answers``. The budget is never refunded and a plan is never sampled twice.

Every failure says what happened to the spend: before step 4 commits, nothing was spent;
after it, the spend is recorded and stays counted, whatever else fails.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from sqlalchemy import exc as sa_exc
from sqlmodel import Session

from planner.core.errors import BudgetError, BudgetExceededError, LedgerError, PlannerError
from planner.core.strict_json import JSON
from planner.ledger.accounts import Action, Principal
from planner.ledger.datasets import Datasets, check_text
from planner.ledger.liveness import Heartbeat, alive, claim, owner_token, settle
from planner.ledger.people import Actors
from planner.ledger.reading import check_release, history_proofs, release_records
from planner.ledger.record import VERSION_SEPARATOR, Record
from planner.ledger.records import ReleaseRecord, with_status
from planner.ledger.store import Store, utcnow
from planner.ledger.tables import AnswerRow, ReleaseRow, ReleaseStatus, SpendRow
from planner.privacy.accounting import Spend, event_rho
from planner.privacy.budget import check_delta

__all__ = ["WAIT_FOR_SAME_PLAN_SECONDS", "Releaser"]

#: How long a release waits for a concurrent release of the same plan.
WAIT_FOR_SAME_PLAN_SECONDS: Final = 60.0

Row = dict[str, Any]
Prepared = list[tuple[str, Spend, str, float | None]]

#: What every failure after the spend's commit says about it.
SPENT: Final = ("The spend of this release is recorded and stays counted; the plan will not be sampled "
                "again (it shows as spent, no answers).")


class _InProgress:
    """Marker: the same plan is being released by a live process."""


_IN_PROGRESS: Final = _InProgress()


def prepare_spends(spends: Sequence[tuple[str, Spend]]) -> Prepared:
    """Validate the spends and serialise their events before any transaction opens."""
    if isinstance(spends, (str, bytes)) or not isinstance(spends, Sequence):
        raise LedgerError(f"spends must be a list of (query_id, Spend) pairs; got {type(spends).__name__}.")
    if len(spends) == 0:
        raise LedgerError("a release needs at least one spend; got none. Add a query to the plan.")
    out: Prepared = []
    seen: set[str] = set()
    for item in spends:
        try:
            qid, sp = item
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"spends must be (query_id, Spend) pairs; got {type(item).__name__}.") from exc
        check_text(qid, "query_id")
        if qid in seen:
            raise LedgerError(f"query_id {qid!r} appears twice in one release; ids must be unique.")
        seen.add(qid)
        if not isinstance(sp, Spend):
            raise LedgerError(f"spend of query {qid!r} must be a Spend; got {type(sp).__name__}.")
        eps = sp.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (math.isfinite(eps) and eps >= 0.0):
            raise BudgetError(f"epsilon of query {qid!r} must be a number ≥ 0 and finite. Assign a finite ε.")
        if isinstance(sp.delta, bool):
            raise BudgetError(f"delta of query {qid!r} must be a number, not a boolean.")
        check_delta(sp.delta, f"delta of query {qid!r}")
        rho = float(event_rho(sp.event))
        out.append((qid, sp, json.dumps(sp.event.to_dict(), sort_keys=True), rho if math.isfinite(rho) else None))
    return out


def _with_spent(exc: PlannerError) -> PlannerError:
    """The same error saying what happened to the spend (it was committed before sampling)."""
    try:
        return type(exc)(f"{exc} {SPENT}")
    except TypeError:  # an error type with another constructor: the generic one
        return LedgerError(f"{exc} {SPENT}")


def _serialise_answers(answers: Mapping[str, JSON]) -> dict[str, str]:
    """``{query_id: JSON text}``; ``TypeError``/``ValueError`` if not JSON-able."""
    if not isinstance(answers, Mapping):
        raise TypeError(f"sample() must return a mapping; got {type(answers).__name__}")
    return {str(k): json.dumps(v) for k, v in answers.items()}


@dataclass
class Releaser:
    """The release transaction of one ledger."""

    store: Store
    actors: Actors
    datasets: Datasets
    lease_seconds: float

    def release(self, who: Principal, fingerprint: Any, plan_hash: Any, schema_hash: Any,
                spends: Sequence[tuple[str, Spend]], sample: Callable[[], Mapping[str, JSON]], *,
                wait_seconds: Any = WAIT_FOR_SAME_PLAN_SECONDS, digest: str | None = None,
                rows: int | None = None) -> ReleaseRecord:
        """See :meth:`planner.ledger.Ledger.release`."""
        ref = check_text(fingerprint, "fingerprint")
        ph = check_text(plan_hash, "plan_hash")
        sh = check_text(schema_hash, "schema_hash")
        dg = None if digest is None else check_text(digest, "digest")
        prepared = prepare_spends(spends)
        nonce = uuid.uuid4().hex
        try:
            wait = float(wait_seconds)
        except (TypeError, ValueError):
            wait = WAIT_FOR_SAME_PLAN_SECONDS
        deadline = time.monotonic() + max(0.0, wait if math.isfinite(wait) else 0.0)
        claim(nonce)
        settled = False
        release_id: int | None = None
        try:
            while True:
                outcome = self._reserve(ref, ph, sh, prepared, nonce, who, dg, rows)
                if not isinstance(outcome, _InProgress):
                    break
                if time.monotonic() >= deadline:
                    raise LedgerError(
                        f"plan {ph!r} is being released on this dataset by another session and did "
                        f"not finish within {wait:g} s; nothing was spent by this call. Reload in a "
                        "moment: its stored answers will be shown."
                    )
                time.sleep(0.05)
            if isinstance(outcome, ReleaseRecord):
                settled = True
                return outcome
            release_id = outcome
            try:
                if self.store.memory:  # one process, one connection: liveness is the claim
                    raw_answers = sample()
                else:
                    with Heartbeat(lambda: self._renew_lease(outcome), self.lease_seconds, outcome):
                        raw_answers = sample()
            except PlannerError as exc:
                settled = self._mark_lost(release_id, type(exc).__name__)
                raise _with_spent(exc) from exc
            except BaseException as exc:
                settled = self._mark_lost(release_id, type(exc).__name__)
                raise
            try:
                payload = _serialise_answers(raw_answers)
            except (TypeError, ValueError) as exc:
                settled = self._mark_lost(release_id, type(exc).__name__)
                raise LedgerError(
                    f"the answers of plan {ph!r} are not JSON values, so they could not be stored. "
                    f"{SPENT} Return plain numbers, strings, lists and dicts from sample()."
                ) from exc
            rec = self._store_answers(release_id, ph, payload)
            settled = True
            return rec
        finally:
            settle(nonce, forget=settled or release_id is None)

    def _reserve(self, ref: str, plan_hash: str, schema_hash: str, prepared: Prepared, nonce: str,
                 who: Principal, digest: str | None, rows: int | None) -> int | ReleaseRecord | _InProgress:
        """Transaction 1: lock, prove, dedupe, check the budget, record the spend, commit."""
        with self.store.write(checkpoint_after=False) as (s, head):
            record = self.store.verified()
            ds = self.datasets.row(record, ref)
            eff, grant = self.actors.decide(s, record, who, Action.RELEASE, f"this release on dataset {ds['name']!r}",
                                            ds, self._proofs(record, ds, digest))
            ds_id = int(ds["id"])
            journal: list[Any] = []
            version_id: int | None = None
            if digest is not None:
                ver, added = self.datasets.version_in(s, record, ds, digest, rows, schema_hash, eff)
                if added:
                    s.flush()
                    journal.append(ver)
                version_id = int(ver["id"]) if isinstance(ver, dict) else ver.id
            earlier = record.releases_by_plan(ds_id, plan_hash)
            same = [r for r in earlier if digest is None or r.get("version_id") in (None, version_id)]
            if same:  # this plan on this content: its stored answers (never a second draw)
                if journal:
                    s.rollback()
                return self._existing(s, head, record, ds, same[0], plan_hash, prepared)
            # a plan is released once per content version: the same plan on new content is a
            # new release, spending again (the new content's answers are new answers)
            stored_hash = plan_hash if not earlier else f"{plan_hash}{VERSION_SEPARATOR}{version_id}"
            new = [sp for _, sp, _, _ in prepared]
            verdict = check_release(record, ds, eff, grant, new)
            if not verdict.fits:
                raise BudgetExceededError(verdict.reason + " Nothing was spent.")
            now = utcnow()
            row = ReleaseRow(dataset_id=ds_id, plan_hash=stored_hash, schema_hash=schema_hash, created_at=now,
                             status=ReleaseStatus.PENDING.value, owner=owner_token(nonce), actor=eff.subject,
                             version_id=version_id, lease_expires_at=now + timedelta(seconds=self.lease_seconds),
                             heartbeat_at=now)
            s.add(row)
            s.flush()
            assert row.id is not None
            journal.append(row)
            for qid, sp, event_json, rho in prepared:
                sr = SpendRow(release_id=row.id, query_id=qid, epsilon=sp.epsilon, delta=sp.delta, rho=rho,
                              event_json=event_json)
                s.add(sr)
                journal.append(sr)
            release_id = row.id
            self.store.commit(s, head, "release.reserve", ds_id, journal)
            return release_id

    def _proofs(self, record: Record, ds: Row, digest: str | None) -> list[Any]:
        """The rows a release decision reads besides the actor's: the dataset, its budget
        changes, its releases and their spends, and the version of the content released."""
        out: list[Any] = list(history_proofs(record, ds))
        if digest is not None:
            out += self.datasets._version_proof(record, self.datasets.keyed(digest))
        return out

    def _existing(self, s: Session, head: Any, record: Record, ds: Row, existing: Row, plan_hash: str,
                  prepared: Prepared) -> ReleaseRecord | _InProgress:
        """The plan was released before: reuse its answers, wait for it, or refuse."""
        rid = int(existing["id"])
        row = s.get(ReleaseRow, rid)
        assert row is not None
        recs = release_records(s, record, ds, only=rid)
        status = recs[0].status
        if status is ReleaseStatus.DONE:
            stored = {sp.query_id for sp in recs[0].spends}
            asked = {qid for qid, _, _, _ in prepared}
            if stored != asked:
                raise LedgerError(
                    f"plan hash {plan_hash!r} was released on dataset {ds['name']!r} with "
                    f"queries {sorted(stored)}, not {sorted(asked)}; nothing was spent by this call. "
                    "The plan hash must identify the plan: hash the full plan (queries, mechanisms, ε)."
                )
            return with_status(recs[0], ReleaseStatus.REUSED)
        if row.status == ReleaseStatus.PENDING.value and alive(row):
            return _IN_PROGRESS
        if row.status == ReleaseStatus.PENDING.value:
            row.status = ReleaseStatus.SPENT_NO_ANSWERS.value
            row.error = "the releasing process stopped renewing its lease before storing answers"
            s.add(row)
            self.store.commit(s, head, "release.lost", int(ds["id"]), [row])
        raise LedgerError(
            f"plan {plan_hash!r} was already released on dataset {ds['name']!r} "
            f"(release {rid}, {recs[0].created_at.isoformat()}): its budget was "
            "spent but its answers were lost before they were stored. The spend stays counted "
            "and the plan will not be sampled again, since a second draw would spend the "
            "budget twice; nothing more was spent by this call. Make a new plan (it will be "
            "charged as a new release)."
        )

    def _renew_lease(self, release_id: int) -> None:
        """Heartbeat: push the lease of a pending release forward (not journaled)."""
        with self.store.session(write=True) as s:
            row = s.get(ReleaseRow, release_id)
            if row is None or row.status != ReleaseStatus.PENDING.value:
                return
            now = utcnow()
            row.heartbeat_at = now
            row.lease_expires_at = now + timedelta(seconds=self.lease_seconds)
            s.add(row)
            s.commit()

    def _mark_lost(self, release_id: int, reason: str) -> bool:
        """Best effort after ``sample()`` failed: the spend stays, the answers are lost.

        Returns whether the release is now recorded as lost."""
        try:
            with self.store.write(after_commit=SPENT) as (s, head):
                row = s.get(ReleaseRow, release_id)
                if row is not None and row.status == ReleaseStatus.PENDING.value:
                    row.status = ReleaseStatus.SPENT_NO_ANSWERS.value
                    row.error = f"sampling failed ({reason})"
                    s.add(row)
                    self.store.commit(s, head, "release.lost", row.dataset_id, [row])
                return True
        except (PlannerError, sa_exc.SQLAlchemyError):
            # The row stays pending; this process still knows the claim is not in flight,
            # and everyone else sees its lease expire.
            return False

    def _store_answers(self, release_id: int, plan_hash: str, payload: dict[str, str]) -> ReleaseRecord:
        """Transaction 2: store every answer and mark the release done, atomically."""
        try:
            with self.store.write(after_commit=SPENT) as (s, head):
                row = s.get(ReleaseRow, release_id)
                if row is None or row.status != ReleaseStatus.PENDING.value:
                    raise LedgerError(
                        f"release {release_id} of plan {plan_hash!r} is no longer pending (its "
                        f"lease expired before the answers were ready); its answers were not stored. {SPENT}"
                    )
                journal: list[Any] = []
                for qid, text in payload.items():
                    ar = AnswerRow(release_id=release_id, query_id=qid, payload_json=text)
                    s.add(ar)
                    journal.append(ar)
                row.status = ReleaseStatus.DONE.value
                row.answered_at = utcnow()
                s.add(row)
                journal.append(row)
                dataset_id = row.dataset_id
                self.store.commit(s, head, "release.answer", dataset_id, journal)
        except (PlannerError, sa_exc.SQLAlchemyError) as exc:
            self._mark_lost(release_id, type(exc).__name__)
            if isinstance(exc, LedgerError) and SPENT in str(exc):
                raise
            raise LedgerError(
                f"the answers of plan {plan_hash!r} could not be stored in the ledger at "
                f"{self.store.url} ({type(exc).__name__}: the disk may be full or the database "
                f"unwritable). {SPENT}"
            ) from exc
        with self.store.reading() as (s, record):
            ds = record.row("datasets", dataset_id)
            assert ds is not None
            return release_records(s, record, ds, only=release_id)[0]
