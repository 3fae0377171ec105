"""The record: the ledger as its verified journal says it is.

Every decision that spends or grants is taken on this record, never on a table row as it
happens to be stored. The journal (:mod:`planner.ledger.integrity`) holds every row ever
written, in a hash chain keyed with the server secret; the record is its replay, kept in
memory and brought up to date *incrementally*:

* on open, the whole journal is read once, each entry's MAC checked against the chain
  (what the open check always did) and its rows applied — or, when the ledger holds a
  checkpoint that verifies (:mod:`planner.ledger.checkpoint`), the record it holds is
  loaded and only the entries after it are read and checked;
* before every read or decision, :meth:`Record.catch_up` reads only the entries written
  since (by this process or another), checks that each chains to the last one verified,
  and applies them. Nothing earlier is re-read: the record already holds it, and an
  entry rewritten after it was verified cannot change what the record says.

So a database user who edits a spend, a budget, a grant or a role in place, without the
secret, cannot change a decision: the record does not read tables. And because a silent
edit must not go unnoticed either, every decision also compares the table rows it
concerns with the record (:func:`planner.ledger.store.Store.prove`) and refuses, naming
the table, row and columns, when they differ.

Reading the budget is flat in the history: each dataset keeps its spends composed under
its rule (:meth:`Record.composed`), and a new release composes only its own spends onto
that (what the accountants allow; :mod:`planner.privacy.accountants`).

Answers are not held in memory (a synthetic table can be large): the record keeps the
SHA-256 of each stored answer, and answers read from the table are checked against it.
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from planner.core.errors import LedgerIntegrityError
from planner.ledger.integrity import GENESIS_MAC, entry_mac
from planner.ledger.records import SpendRecord, parse_time, payload_digest, spend_record
from planner.privacy.accountants import Accountant, accountant
from planner.privacy.accounting import CompositionRule, Spend

__all__ = ["Entry", "Record"]

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Entry:
    """One journal entry as stored (what :meth:`Record.apply` verifies)."""

    seq: int
    kind: str
    prev: str
    body: str
    mac: str


def name_key(name: str) -> str:
    """How dataset names are compared: case and surrounding blanks ignored."""
    return " ".join(name.split()).casefold()


@dataclass(frozen=True, slots=True)
class _Composed:
    """One dataset's spends (or one principal's on it) composed so far (the accountant
    keeps its answers by δ)."""

    count: int
    acct: Accountant


class Record:
    """The verified replay of one ledger's journal (see the module docstring).

    Not thread-safe by itself: :class:`planner.ledger.store.Store` holds :attr:`lock`
    around every catch-up and every read of it.
    """

    def __init__(self, ledger_id: str, key: bytes) -> None:
        self.ledger_id = ledger_id
        self._key = key
        self.seq = 0
        self.mac = GENESIS_MAC
        self.lock = threading.RLock()
        self.rows: dict[str, dict[int, Row]] = {}
        self._ds_by_key: dict[str, int] = {}
        self._ds_by_name: dict[str, list[int]] = {}
        self._ds_by_schema: dict[str, list[int]] = {}
        self._version_by_fp: dict[str, int] = {}
        self._versions_of: dict[int, list[int]] = {}
        self._changes_of: dict[int, list[int]] = {}
        self._releases_of: dict[int, list[int]] = {}
        self._releases_by_plan: dict[tuple[int, str], list[int]] = {}
        self._by_status: dict[int, dict[str, set[int]]] = {}
        self._spends_of_release: dict[int, list[int]] = {}
        self._spends_of: dict[tuple[int, str | None], list[int]] = {}
        self._answers_of: dict[int, list[int]] = {}
        self._account_by_name: dict[str, int] = {}
        self._grant_of: dict[tuple[int, str], int] = {}
        self._failures: list[tuple[datetime, str, str]] = []
        self._spend_cache: dict[int, SpendRecord] = {}
        self._composed: dict[tuple[int, str | None, CompositionRule], _Composed] = {}
        #: Composed ε already read, by (dataset, subject, rule, δ and sampling key): the
        #: number of spends it composed and the value (see :meth:`spent_epsilon`); seeded
        #: from a verified checkpoint summary (:mod:`planner.ledger.checkpoint`).
        self.memo: dict[tuple[int, str | None, str, str], tuple[int, float]] = {}
        #: Datasets whose spends grew since the last :meth:`take_touched`.
        self._touched: set[int] = set()

    # ------------------------------------------------------------------ building

    def apply(self, entry: Entry) -> None:
        """Verify that ``entry`` is the next link of the chain and apply its rows.

        Raises
        ------
        LedgerIntegrityError
            The entry does not follow the last one verified (a gap, a rewrite or a forgery:
            its MAC needs the server secret), or its body is not a journal body.
        """
        n = self.seq + 1
        if entry.seq != n or entry.prev != self.mac or entry_mac(self._key, entry.seq, entry.kind,
                                                                  entry.prev, entry.body) != entry.mac:
            raise LedgerIntegrityError(
                f"journal entry {entry.seq} does not follow entry {self.seq} of the chain this "
                "process verified: entries were changed, forged or deleted outside the planner. "
                "Nothing was changed now; run `planner ledger verify` and restore the ledger from "
                "a backup."
            )
        try:
            rows = json.loads(entry.body)["rows"]
            if not isinstance(rows, Mapping):
                raise TypeError("rows")
            for table, items in rows.items():
                for raw in items:
                    self._put(str(table), dict(raw))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LedgerIntegrityError(
                f"journal entry {entry.seq} cannot be read ({type(exc).__name__}): the ledger is "
                "damaged. Run `planner ledger verify` and restore it from a backup."
            ) from None
        self.seq, self.mac = entry.seq, entry.mac

    def _put(self, table: str, row: Row, *, stored: bool = False) -> None:
        """Apply one journaled row (``stored``: a row in the record's own form, an answer
        already by its digest, as a checkpoint holds it)."""
        rid = int(row["id"])
        if table == "answers" and not stored:
            row = {k: v for k, v in row.items() if k != "payload_json"} | {
                "payload_sha256": payload_digest(str(row["payload_json"]))}
        tab = self.rows.setdefault(table, {})
        new = rid not in tab
        if table == "releases":
            groups = self._by_status.setdefault(int(row["dataset_id"]), {})
            if not new:
                groups.get(str(tab[rid].get("status")), set()).discard(rid)
            groups.setdefault(str(row.get("status")), set()).add(rid)
        tab[rid] = row
        if table == "datasets" and new:
            self._ds_by_key[str(row["fingerprint"])] = rid
            self._ds_by_name.setdefault(name_key(str(row["name"])), []).append(rid)
            if row.get("schema_hash"):
                self._ds_by_schema.setdefault(str(row["schema_hash"]), []).append(rid)
        elif table == "dataset_versions" and new:
            self._version_by_fp[str(row["fingerprint"])] = rid
            _insort(self._versions_of.setdefault(int(row["dataset_id"]), []), rid)
        elif table == "budget_changes" and new:
            _insort(self._changes_of.setdefault(int(row["dataset_id"]), []), rid)
        elif table == "releases" and new:
            ds = int(row["dataset_id"])
            _insort(self._releases_of.setdefault(ds, []), rid)
            self._releases_by_plan.setdefault((ds, plan_of(str(row["plan_hash"]))), []).append(rid)
        elif table == "spends" and new:
            rel = self.rows.get("releases", {}).get(int(row["release_id"]))
            if rel is None:
                raise KeyError("a spend of a release the journal does not hold")
            _insort(self._spends_of_release.setdefault(int(row["release_id"]), []), rid)
            ds = int(rel["dataset_id"])
            self._touched.add(ds)
            for who in (None, rel.get("actor") or ""):
                _insort(self._spends_of.setdefault((ds, who), []), rid)
        elif table == "answers" and new:
            _insort(self._answers_of.setdefault(int(row["release_id"]), []), rid)
        elif table == "accounts":
            self._account_by_name[str(row["username"])] = rid
        elif table == "grants":
            key = (int(row["dataset_id"]), str(row["subject"]))
            if row.get("revoked_at") is None:
                if key not in self._grant_of or self._grant_of[key] < rid:
                    self._grant_of[key] = rid
            elif self._grant_of.get(key) == rid:
                del self._grant_of[key]
        elif table == "sign_in_failures" and new:
            at = parse_time(row["created_at"], f"sign-in failure {rid}")
            self._failures.append((at, str(row["username"]), str(row["client"])))

    # ------------------------------------------------------------------ lookups

    def row(self, table: str, rid: int) -> Row | None:
        return self.rows.get(table, {}).get(rid)

    def table(self, table: str) -> Mapping[int, Row]:
        return self.rows.get(table, {})

    def dataset_by_key(self, key: str) -> Row | None:
        rid = self._ds_by_key.get(key)
        return None if rid is None else self.rows["datasets"][rid]

    def dataset_by_version(self, keyed_fingerprint: str) -> Row | None:
        vid = self._version_by_fp.get(keyed_fingerprint)
        if vid is None:
            return None
        return self.rows["datasets"].get(int(self.rows["dataset_versions"][vid]["dataset_id"]))

    def version(self, keyed_fingerprint: str) -> Row | None:
        vid = self._version_by_fp.get(keyed_fingerprint)
        return None if vid is None else self.rows["dataset_versions"][vid]

    def datasets_named(self, name: str) -> list[Row]:
        return [self.rows["datasets"][i] for i in self._ds_by_name.get(name_key(name), ())]

    def datasets_with_schema(self, schema_hash: str) -> list[Row]:
        return [self.rows["datasets"][i] for i in self._ds_by_schema.get(schema_hash, ())]

    def datasets(self) -> list[Row]:
        return sorted(self.table("datasets").values(), key=lambda d: (str(d["created_at"]), int(d["id"])))

    def versions_of(self, ds: int) -> list[Row]:
        return [self.rows["dataset_versions"][i] for i in self._versions_of.get(ds, ())]

    def changes_of(self, ds: int) -> list[Row]:
        return [self.rows["budget_changes"][i] for i in self._changes_of.get(ds, ())]

    def releases_of(self, ds: int) -> list[Row]:
        rows = [self.rows["releases"][i] for i in self._releases_of.get(ds, ())]
        return sorted(rows, key=lambda r: (str(r["created_at"]), int(r["id"])))

    def release_ids_of(self, ds: int) -> Sequence[int]:
        return self._releases_of.get(ds, ())

    def release_ids_with(self, ds: int, status: str) -> set[int]:
        """The dataset's releases whose journaled status is ``status`` (kept as entries are
        applied, so counting them does not read the history)."""
        return self._by_status.get(ds, {}).get(status, set())

    def releases_by_plan(self, ds: int, plan_hash: str) -> list[Row]:
        """The dataset's releases of this plan, oldest first (one per content version)."""
        return [self.rows["releases"][rid] for rid in self._releases_by_plan.get((ds, plan_hash), ())]

    def spend_ids_of_release(self, rid: int) -> Sequence[int]:
        return self._spends_of_release.get(rid, ())

    def spend_ids_of(self, ds: int) -> Sequence[int]:
        return self._spends_of.get((ds, None), ())

    def answer_ids_of(self, rid: int) -> Sequence[int]:
        return self._answers_of.get(rid, ())

    def account(self, username: str) -> Row | None:
        rid = self._account_by_name.get(username)
        return None if rid is None else self.rows["accounts"][rid]

    def has_accounts(self) -> bool:
        return bool(self._account_by_name)

    def grant(self, ds: int, subject: str) -> Row | None:
        rid = self._grant_of.get((ds, subject))
        return None if rid is None else self.rows["grants"][rid]

    def grants_of(self, ds: int) -> list[Row]:
        return sorted((self.rows["grants"][rid] for (d, _), rid in self._grant_of.items() if d == ds),
                      key=lambda g: int(g["id"]))

    def grants_in_force(self) -> dict[tuple[int, str], int]:
        """``(dataset, subject) → grant id`` of every grant in force (what a checkpoint keeps:
        which of a subject's grant rows is in force follows from the order they were written)."""
        return dict(self._grant_of)

    def set_grants(self, grants: Mapping[tuple[int, str], int]) -> None:
        """The grants in force, as :meth:`grants_in_force` gave them (a checkpoint's)."""
        if any(rid not in self.rows.get("grants", {}) for rid in grants.values()):
            raise KeyError("a grant in force that the record does not hold")
        self._grant_of = dict(grants)

    def datasets_granted_to(self, subject: str) -> set[int]:
        return {d for (d, s) in self._grant_of if s == subject}

    def failures_since(self, since: datetime, *, username: str | None = None,
                       client: str | None = None) -> list[datetime]:
        """Times of recorded failed sign-ins since ``since`` for one username or client."""
        return [at for at, u, c in reversed(self._failures) if at >= since
                and (username is None or u == username) and (client is None or c == client)]

    # ------------------------------------------------------------------ spends

    def spend_record(self, sid: int) -> SpendRecord:
        """The recorded spend ``sid``, parsed once."""
        sp = self._spend_cache.get(sid)
        if sp is None:
            sp = spend_record(self.rows["spends"][sid])
            self._spend_cache[sid] = sp
        return sp

    def spend(self, sid: int) -> Spend:
        return self.spend_record(sid).spend

    def spends(self, ds: int, subject: str | None = None) -> list[Spend]:
        """Every spend recorded on dataset ``ds`` (by ``subject`` only, if given), oldest first."""
        return [self.spend(i) for i in self._spends_of.get((ds, subject), ())]

    def composed(self, ds: int, rule: CompositionRule, subject: str | None = None) -> tuple[int, Accountant]:
        """The dataset's spends (``subject``'s only, if given) composed under ``rule``:
        ``(how many, accountant)``. Only the spends recorded since the last call are
        composed now.

        Raises
        ------
        BudgetError
            The rule cannot account for a recorded spend.
        """
        ids = self._spends_of.get((ds, subject), ())
        key = (ds, subject, rule)
        have = self._composed.get(key)
        if have is None:
            have = _Composed(0, accountant(rule))
        if have.count < len(ids):
            more = [self.spend(i) for i in ids[have.count:]]
            have = _Composed(len(ids), have.acct.compose(more))
            self._composed[key] = have
        return have.count, have.acct

    def has_composed(self, ds: int, rule: CompositionRule, subject: str | None = None) -> bool:
        """Whether this process composed the dataset's spends under ``rule`` already."""
        return (ds, subject, rule) in self._composed

    def spent_epsilon(self, ds: int, rule: CompositionRule, subject: str | None, key: str,
                      value: Callable[[Accountant], float]) -> float:
        """``value`` of the dataset's composed spends (``subject``'s only, if given), kept by
        ``key`` (the δ and sampling it reads at, :func:`planner.ledger.checkpoint.memo_key`)
        with the number of spends it composed: read again while no spend was added, it costs
        nothing — also in a new process that loaded the value from a verified checkpoint,
        where it spares composing the whole history for a budget status.

        Spends are only ever added to the record, so an equal count means the same spends.
        """
        n = len(self._spends_of.get((ds, subject), ()))
        k = (ds, subject, str(rule), key)
        hit = self.memo.get(k)
        if hit is not None and hit[0] == n:
            return hit[1]
        count, acct = self.composed(ds, rule, subject)
        out = value(acct)
        self.memo[k] = (count, out)
        return out

    def current_memo(self) -> dict[tuple[int, str | None, str, str], tuple[int, float]]:
        """The kept values that still describe every recorded spend of their dataset."""
        return {k: v for k, v in self.memo.items()
                if v[0] == len(self._spends_of.get((k[0], k[1]), ()))}

    def take_touched(self) -> set[int]:
        """The datasets whose spends grew since the last call (then forgotten)."""
        out, self._touched = self._touched, set()
        return out



#: How a plan released again on another content version of its dataset is stored: the
#: plan's hash, this separator and the version's id (a plan is released once per version).
VERSION_SEPARATOR = "/v"


def plan_of(stored: str) -> str:
    """The plan hash of a stored release key (:data:`VERSION_SEPARATOR`)."""
    return stored.split(VERSION_SEPARATOR, 1)[0]


def _insort(ids: list[int], rid: int) -> None:
    if not ids or ids[-1] < rid:
        ids.append(rid)
    elif rid not in ids:
        bisect.insort(ids, rid)


def entries(rows: Iterator[Any]) -> Iterator[Entry]:
    """Journal rows (ORM or mappings) as :class:`Entry` values."""
    for r in rows:
        yield Entry(int(r.seq), str(r.kind), str(r.prev), str(r.body), str(r.mac))
