"""Reading a dataset's ledger: its budget now, its releases, their history, the export.

Everything here is read from the record of the journal (:mod:`planner.ledger.record`),
caught up to the head: the budget status composes nothing the record has not composed
before, so it costs the same after ten releases or a thousand. Only what the journal does
not hold is read from the tables: whether a pending release is still alive (its lease),
and the stored answers, each checked against the digest the record keeps of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from planner.core.errors import LedgerIntegrityError
from planner.core.strict_json import JSON
from planner.ledger.accounts import Action, Principal
from planner.ledger.check import Lifetime, composed_epsilon, preview
from planner.ledger.checkpoint import memo_key
from planner.ledger.datasets import Datasets
from planner.ledger.liveness import alive
from planner.ledger.people import Actors
from planner.ledger.record import Record, plan_of
from planner.ledger.records import (
    BudgetStatus,
    HistoryPoint,
    ReleasePreview,
    ReleaseRecord,
    answer_value,
    budget_change,
    dataset_info,
    garbage,
    parse_time,
    payload_digest,
    rule_of,
    sampling_of,
    status_value,
    version_info,
)
from planner.ledger.store import Store
from planner.ledger.tables import (
    AnswerRow,
    BudgetChangeRow,
    DatasetRow,
    ReleaseRow,
    ReleaseStatus,
    SpendRow,
)
from planner.privacy.accounting import Spend

__all__ = ["Reader", "lifetime_of", "refresh"]

Row = dict[str, Any]


def lifetime_of(ds: Row) -> Lifetime:
    return Lifetime(str(ds["fingerprint"]), float(ds["epsilon"]), float(ds["delta"]), rule_of(ds), sampling_of(ds))


def spent(record: Record, ds: Row, life: Lifetime, *, subject: str | None = None) -> float:
    """The composed ε of the dataset's recorded spends (``subject``'s only, if given) at its
    δ, for the population when the table is a secret sample: from the record's composition,
    which composed each spend once (the accountant keeps its answer by δ)."""
    return record.spent_epsilon(int(ds["id"]), life.rule, subject, memo_key(life.delta, life.sampling),
                                lambda acct: composed_epsilon(acct, life.delta, life.sampling))


def spent_on_sample(record: Record, ds: Row, life: Lifetime) -> float | None:
    """For a secret sample, the composed ε on the sample itself (at δ/q), else ``None``."""
    if life.sampling is None:
        return None
    base = life.sampling.base_delta(life.delta)
    return record.spent_epsilon(int(ds["id"]), life.rule, None, memo_key(base, None),
                                lambda acct: composed_epsilon(acct, base))


def refresh(record: Record, datasets: set[int] | None) -> None:
    """Bring the record's composed budgets up to date before a checkpoint summary is
    written (:mod:`planner.ledger.checkpoint`): of these datasets where this process has
    composed their spends already (composing the new spends only), or of every dataset
    (``None``: with a state checkpoint, every :data:`~planner.ledger.checkpoint.STATE_EVERY`
    entries)."""
    for ds_id in sorted(record.table("datasets") if datasets is None else datasets):
        ds = record.row("datasets", ds_id)
        if ds is None:
            continue
        life = lifetime_of(ds)
        if datasets is not None and not record.has_composed(ds_id, life.rule):
            continue
        spent(record, ds, life)
        spent_on_sample(record, ds, life)


@dataclass
class Reader:
    """The read side of one ledger."""

    store: Store
    actors: Actors
    datasets: Datasets

    def status(self, who: Principal, ref: Any) -> BudgetStatus:
        with self.store.reading() as (s, record):
            ds = self.datasets.row(record, ref)
            self.actors.authorize(record, who, Action.READ, ds)
            return self._status(s, record, ds)

    def _status(self, s: Session, record: Record, ds: Row) -> BudgetStatus:
        """From the record alone, but for the liveness of pending releases (read from the
        table, few): nothing here reads or walks the history."""
        life = lifetime_of(ds)
        ds_id = int(ds["id"])
        pending = record.release_ids_with(ds_id, ReleaseStatus.PENDING.value)
        dead = 0
        if pending:
            live = {r.id: r for r in s.exec(select(ReleaseRow).where(col(ReleaseRow.id).in_(sorted(pending)))).all()}
            dead = sum(1 for i in pending if i not in live or not alive(live[i]))
        lost = len(record.release_ids_with(ds_id, ReleaseStatus.SPENT_NO_ANSWERS.value)) + dead
        total = spent(record, ds, life)
        on_sample = spent_on_sample(record, ds, life)
        return BudgetStatus(
            fingerprint=life.key, name=str(ds["name"]), epsilon_total=life.epsilon, delta_total=life.delta,
            rule=life.rule, epsilon_spent=total, epsilon_remaining=life.epsilon - total,
            releases=len(record.release_ids_of(ds_id)), releases_without_answers=lost, sampling=life.sampling,
            epsilon_spent_sample=on_sample,
        )

    def preview(self, who: Principal, ref: Any, spends: Sequence[Spend]) -> ReleasePreview:
        with self.store.reading() as (_, record):
            ds = self.datasets.row(record, ref)
            eff, grant = self.actors.authorize(record, who, Action.PREVIEW, ds)
            return check_release(record, ds, eff, grant, list(spends))

    def releases(self, who: Principal, ref: Any) -> list[ReleaseRecord]:
        with self.store.reading() as (s, record):
            ds = self._history(s, record, who, ref, "reading the releases")
            return release_records(s, record, ds)

    def history(self, who: Principal, ref: Any) -> list[HistoryPoint]:
        with self.store.reading() as (s, record):
            ds = self._history(s, record, who, ref, "reading the history")
            return history_of(record, ds, release_records(s, record, ds, answers=False))

    def _history(self, s: Session, record: Record, who: Principal, ref: Any, what: str) -> Row:
        """The dataset row, once the actor may read it and its releases and spends as
        stored are proven to be the journal's (what a reader of the whole history is shown
        must be what was recorded)."""
        ds = self.datasets.row(record, ref)
        self.actors.authorize(record, who, Action.READ, ds)
        self.store.prove(s, f"{what} of dataset {ds['name']!r}", history_proofs(record, ds))
        return ds

    def stored(self, who: Principal, ref: Any, plan_hash: str, digest: str | None) -> ReleaseRecord | None:
        """The release of this plan on this content (``digest``; any content when ``None``),
        if it was made: what a rerun, a reload or a second tab shows instead of sampling."""
        with self.store.reading() as (s, record):
            ds = self.datasets.row(record, ref)
            self.actors.authorize(record, who, Action.READ, ds)
            version = None if digest is None else record.version(self.datasets.keyed(digest))
            if digest is not None and version is None:
                return None
            for r in record.releases_by_plan(int(ds["id"]), plan_hash):
                if version is None or r.get("version_id") in (None, int(version["id"])):
                    return release_records(s, record, ds, only=int(r["id"]))[0]
            return None

    def export(self, who: Principal, ref: Any, include_answers: bool) -> dict[str, Any]:
        with self.store.reading() as (s, record):
            ds = self._history(s, record, who, ref, "exporting the ledger")
            releases = release_records(s, record, ds, answers=include_answers)
            status = self._status(s, record, ds)
            changes = [budget_change(c).to_dict() for c in record.changes_of(int(ds["id"]))]
            versions = [version_info(v, str(ds["fingerprint"])).to_dict() for v in record.versions_of(int(ds["id"]))]
            history = history_of(record, ds, releases)
        return {
            "format": "privacy-budget-planner/ledger",
            "version": 2,
            "ledger_id": self.store.ledger_id,
            "dataset": dataset_info(ds).to_dict(),
            "versions": versions,
            "status": status.to_dict(),
            "releases": [r.to_dict(include_answers=include_answers) for r in releases],
            "history": [h.to_dict() for h in history],
            "budget_changes": changes,
        }


def statuses_of(s: Session, rows: Sequence[Row]) -> dict[int, ReleaseStatus]:
    """Each release's status, a pending one whose lease expired as ``spent_no_answers``
    (liveness is not journaled: it is read from the table)."""
    out = {int(r["id"]): status_value(r) for r in rows}
    pending = [i for i, st in out.items() if st is ReleaseStatus.PENDING]
    if pending:
        live = {r.id: r for r in s.exec(select(ReleaseRow).where(col(ReleaseRow.id).in_(pending))).all()}
        for i in pending:
            row = live.get(i)
            if row is None or not alive(row):
                out[i] = ReleaseStatus.SPENT_NO_ANSWERS
    return out



def history_proofs(record: Record, ds: Row) -> list[tuple[str, Any, dict[int, Row]]]:
    """The rows that hold a dataset's history: the dataset, its releases and their spends
    (for :meth:`planner.ledger.store.Store.prove`)."""
    ds_id = int(ds["id"])
    releases = {int(r["id"]): r for r in record.releases_of(ds_id)}
    spends = {sid: record.table("spends")[sid] for rid in releases for sid in record.spend_ids_of_release(rid)}
    changes = {int(c["id"]): c for c in record.changes_of(ds_id)}
    return [
        ("datasets", col(DatasetRow.id) == ds_id, {ds_id: ds}),
        ("budget_changes", col(BudgetChangeRow.dataset_id) == ds_id, changes),
        ("releases", col(ReleaseRow.dataset_id) == ds_id, releases),
        ("spends", col(SpendRow.release_id).in_(select(ReleaseRow.id).where(col(ReleaseRow.dataset_id) == ds_id)),
         spends),
    ]


def check_release(record: Record, ds: Row, eff: Principal, grant: Any, new: list[Spend]) -> ReleasePreview:
    """:func:`planner.ledger.check.preview` on the record's composition of the dataset."""
    life = lifetime_of(ds)
    _, old = record.composed(int(ds["id"]), life.rule)
    own = None
    if grant is not None:
        _, own = record.composed(int(ds["id"]), life.rule, eff.subject)
    return preview(life, old, new, spent=spent(record, ds, life), grant=grant, own=own)


def release_records(s: Session, record: Record, ds: Row, *, only: int | None = None,
                    answers: bool = True) -> list[ReleaseRecord]:
    """The dataset's releases in order (or only release ``only``), from the record; stored
    answers read from the table and checked against the record."""
    rows = record.releases_of(int(ds["id"]))
    if only is not None:
        rows = [r for r in rows if int(r["id"]) == only]
    if not rows:
        return []
    statuses = statuses_of(s, rows)
    stored: dict[int, dict[str, JSON]] = {}
    if answers:
        done = [int(r["id"]) for r in rows if statuses[int(r["id"])] is ReleaseStatus.DONE]
        stored = read_answers(s, record, done)
    versions = {int(v["id"]): str(v["fingerprint"]) for v in record.versions_of(int(ds["id"]))}
    out: list[ReleaseRecord] = []
    for r in rows:
        rid = int(r["id"])
        spends = tuple(record.spend_record(i) for i in record.spend_ids_of_release(rid))
        if not spends:
            raise LedgerIntegrityError(garbage(f"release {rid}", "it has no spends"))
        st = statuses[rid]
        vid = r.get("version_id")
        out.append(ReleaseRecord(
            release_id=rid, fingerprint=str(ds["fingerprint"]), plan_hash=plan_of(str(r["plan_hash"])),
            schema_hash=str(r["schema_hash"]), created_at=parse_time(r["created_at"], f"release {rid}"),
            status=st, spends=spends,
            answers=stored.get(rid, {}) if st is ReleaseStatus.DONE and answers else None,
            answered_at=None if r.get("answered_at") is None else parse_time(r["answered_at"], f"release {rid}"),
            actor=str(r.get("actor") or ""), version=None if vid is None else versions.get(int(vid)),
        ))
    return out


def read_answers(s: Session, record: Record, release_ids: Iterable[int]) -> dict[int, dict[str, JSON]]:
    """The stored answers of these releases, each proven to be the one journaled."""
    ids = list(release_ids)
    out: dict[int, dict[str, JSON]] = {}
    if not ids:
        return out
    expected = {aid: record.table("answers")[aid] for rid in ids for aid in record.answer_ids_of(rid)}
    got = s.exec(select(AnswerRow).where(col(AnswerRow.release_id).in_(ids)).order_by(col(AnswerRow.id))).all()
    seen = set()
    for a in got:
        exp = expected.get(int(a.id or 0))
        if exp is None or exp["query_id"] != a.query_id or int(exp["release_id"]) != a.release_id \
                or exp["payload_sha256"] != payload_digest(a.payload_json):
            raise LedgerIntegrityError(
                f"the stored answer {a.id} of release {a.release_id} is not the one journaled: it was "
                "changed outside the planner, so it is not shown. Run `planner ledger verify` and "
                "restore the ledger from a backup."
            )
        seen.add(int(a.id or 0))
        out.setdefault(a.release_id, {})[a.query_id] = answer_value(
            {"payload_json": a.payload_json, "query_id": a.query_id, "release_id": a.release_id})
    if seen != set(expected):
        raise LedgerIntegrityError(
            f"{len(set(expected) - seen)} journaled answer(s) are missing from the ledger's table: they "
            "were deleted outside the planner. Run `planner ledger verify` and restore the ledger "
            "from a backup."
        )
    return out


def history_of(record: Record, ds: Row, releases: Sequence[ReleaseRecord]) -> list[HistoryPoint]:
    """Cumulative spent ε after each release, and the lifetime ε in force when it was made
    (a recorded raise steps it up)."""
    from planner.privacy.accountants import accountant

    life = lifetime_of(ds)
    changes = [budget_change(c) for c in record.changes_of(int(ds["id"]))]
    acct = accountant(life.rule)
    points: list[HistoryPoint] = []
    before = 0.0
    for rec in releases:
        acct = acct.compose([sp.spend for sp in rec.spends])
        after = composed_epsilon(acct, life.delta, life.sampling)
        total = life.epsilon
        for c in reversed(changes):
            if c.created_at > rec.created_at:
                total = c.old_epsilon
        points.append(HistoryPoint(rec.release_id, rec.plan_hash, rec.created_at, rec.status, after,
                                   after - before, total))
        before = after
    return points
