"""Datasets: registered names with lifetime budgets, and the content versions of each.

One table, one budget
---------------------
A dataset is a *registered name* (unique in the ledger, compared without case) with a
lifetime budget. Its content may change: a file that comes back with rows appended, a value
edited, rows reordered, re-encoded or with more columns is a new **version of the same
dataset** and draws on the same budget. Versions are known by the keyed fingerprint of
their content digest (:func:`planner.core.keys.keyed_fingerprint`), never a bare hash.

How a file finds its dataset (:meth:`Datasets.identify`, used by every release):

1. content already recorded as a version: that version's dataset;
2. otherwise a dataset of the name the plan gives (the file's name by default): the
   content becomes a new version of it — same budget;
3. otherwise, a dataset declared with the same schema exists: *refused*, naming that
   dataset and what to do (release under its name; or, for a genuinely different table,
   declare a new dataset deliberately). A plan's ``lifetime`` block never opens a second
   budget by accident;
4. otherwise the first release registers the dataset with the plan's lifetime budget.

A second budget exists only through an owner's explicit, recorded act that gives it a new,
unique name (:meth:`Datasets.declare`; ``planner dataset declare``; the Data page).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col

from planner.core.errors import LedgerError
from planner.core.keys import keyed_fingerprint
from planner.core.names import check_name
from planner.ledger.accounts import Action, Principal
from planner.ledger.check import budget_values
from planner.ledger.migrate import new_dataset_key
from planner.ledger.people import Actors
from planner.ledger.record import Record
from planner.ledger.records import (
    BudgetChange,
    DatasetInfo,
    VersionInfo,
    budget_change,
    dataset_info,
    sampling_of,
    version_info,
)
from planner.ledger.store import Store, utcnow
from planner.ledger.tables import BudgetChangeRow, DatasetRow, VersionRow, row_dict
from planner.privacy.accountants.base import as_rule
from planner.privacy.accounting import CompositionRule
from planner.privacy.sampling import Sampling

__all__ = ["MAX_TEXT_CHARS", "Datasets", "Identity", "check_text"]

#: Longest stored text accepted from a caller (names, reasons, hashes).
MAX_TEXT_CHARS = 1000

Row = dict[str, Any]
Proof = tuple[str, Any, Mapping[int, Row]]


def check_text(value: Any, name: str, *, max_chars: int = MAX_TEXT_CHARS) -> str:
    """A non-empty string of printable characters (:func:`planner.core.names.check_name`)."""
    if not isinstance(value, str) or not value.strip():
        shown = "an empty string" if isinstance(value, str) else f"a {type(value).__name__}"
        raise LedgerError(f"{name} must be a non-empty string; got {shown}.")
    return check_name(value, name, error=LedgerError, max_chars=max_chars)


def _check_sampling(sampling: Any) -> Sampling | None:
    if sampling is None or isinstance(sampling, Sampling):
        return sampling
    raise LedgerError(
        f"sampling must be a planner.privacy.sampling.Sampling or None; got {type(sampling).__name__}. "
        "Pass the schema's declaration (Schema.sampling)."
    )


def _rows(rows: Any) -> int | None:
    if rows is None:
        return None
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0 or rows > 2**53:
        raise LedgerError("rows must be a whole number ≥ 0.")
    return rows


def _sampling_words(x: Sampling | None) -> str:
    return "not a sample" if x is None else f"a secret {x.scheme.value} sample at rate {x.rate:g}"


def _sampling_columns(sampling: Sampling | None) -> dict[str, Any]:
    if sampling is None:
        return {"sampling_rate": None, "sampling_scheme": None}
    return {"sampling_rate": sampling.rate, "sampling_scheme": sampling.scheme.value}


@dataclass(frozen=True, slots=True)
class Identity:
    """Which dataset a table belongs to, as :meth:`Datasets.identify` finds it.

    ``dataset`` is set when the content is a known version (``known``) or the name names a
    dataset (the content would become a new version of it); ``resembles`` lists datasets
    declared with the same schema when neither holds, with ``advice`` saying what to do.
    """

    dataset: DatasetInfo | None
    known: bool
    resembles: tuple[DatasetInfo, ...] = ()
    advice: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": None if self.dataset is None else self.dataset.to_dict(), "known": self.known,
                "resembles": [d.to_dict() for d in self.resembles], "advice": self.advice}


@dataclass
class Datasets:
    """Datasets, versions and lifetime budgets of one ledger."""

    store: Store
    actors: Actors
    _keyed_cache: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ lookups

    def keyed(self, digest: str) -> str:
        k = self._keyed_cache.get(digest)
        if k is None:
            k = keyed_fingerprint(digest, secret=self.store.secret)
            if len(self._keyed_cache) < 4096:
                self._keyed_cache[digest] = k
        return k

    def find(self, record: Record, ref: str) -> Row | None:
        """The dataset row a reference names: its key (``ds-…``) or a digest of a version."""
        return record.dataset_by_key(ref) or record.dataset_by_version(self.keyed(ref))

    def row(self, record: Record, ref: Any) -> Row:
        text = check_text(ref, "fingerprint")
        ds = self.find(record, text)
        if ds is None:
            raise LedgerError(
                f"the dataset is not in the ledger at {self.store.url} (looked up by key and by content "
                "fingerprint). Register its lifetime budget first (Ledger.register_dataset), or "
                "add this file as a version of a registered dataset."
            )
        return ds

    @staticmethod
    def proof(ds: Row) -> list[Proof]:
        return [("datasets", col(DatasetRow.id) == int(ds["id"]), {int(ds["id"]): ds})]

    def _names_proof(self, record: Record) -> list[Proof]:
        return [("datasets", None, dict(record.table("datasets")))]

    def _version_proof(self, record: Record, fp: str) -> list[Proof]:
        ver = record.version(fp)
        return [("dataset_versions", col(VersionRow.fingerprint) == fp,
                 {} if ver is None else {int(ver["id"]): ver})]

    def _one_named(self, record: Record, name: str) -> Row | None:
        named = record.datasets_named(name)
        if len(named) > 1:
            keys = ", ".join(str(d["fingerprint"]) for d in named)
            raise LedgerError(
                f"{len(named)} datasets are named {name!r} ({keys}), written by an earlier version of "
                "the planner: a name must name one dataset. Release on one of them by its key, "
                "and ask an owner to rename the others."
            )
        return named[0] if named else None

    # ------------------------------------------------------------------ identity

    def identify(self, who: Principal, digest: str, name: str | None = None,
                 schema_hash: str | None = None) -> Identity:
        """Which dataset this content belongs to (see the module docstring); nothing is
        recorded."""
        dg = check_text(digest, "digest")
        with self.store.reading() as (_, record):
            eff = self.actors.effective(record, who)
            return self._identify(record, eff, dg, name, schema_hash)

    def _identify(self, record: Record, eff: Principal, digest: str, name: str | None,
                  schema_hash: str | None) -> Identity:
        ds = self.find(record, digest)
        if ds is not None:
            self.actors.authorize(record, eff, Action.READ, ds)
            return Identity(dataset_info(ds), True)
        if name:
            named = self._one_named(record, check_text(name, "the dataset's name", max_chars=200))
            if named is not None:
                self.actors.authorize(record, eff, Action.READ, named)
                return Identity(dataset_info(named), False)
        if schema_hash:
            alike = tuple(dataset_info(d) for d in record.datasets_with_schema(schema_hash))
            if alike:
                first = alike[0]
                others = "" if len(alike) == 1 else f" (and {len(alike) - 1} more with that schema)"
                return Identity(None, False, alike, (
                    f"this table is new to the ledger, but dataset {first.name!r} ({first.fingerprint}) "
                    f"was declared with the same schema{others}. If it is a new version of that table "
                    "(rows appended or edited, re-encoded, more columns), release it under that "
                    f"dataset's name (\"dataset_name\": {first.name!r} in PLAN.json, or pick it on the "
                    "Data page): it draws on the same lifetime budget. Only if it is a different table "
                    "about other people may an owner declare a new dataset for it, with its own "
                    "unique name (`planner dataset declare`, or the Data page)."
                ))
        return Identity(None, False)

    # ------------------------------------------------------------------ registering

    def register(self, who: Principal, ref: Any, name: Any, epsilon: Any, delta: Any,
                 rule: CompositionRule | str, *, schema_hash: str | None = None, rows: int | None = None,
                 sampling: Sampling | None = None) -> DatasetInfo:
        """Register a lifetime budget for this content (idempotent): see
        :meth:`planner.ledger.Ledger.register_dataset`."""
        dg = check_text(ref, "fingerprint")
        label = check_text(name, "the dataset's name", max_chars=200)
        eps, dlt = budget_values(epsilon, delta, "the lifetime budget's")
        rl = as_rule(rule)
        sh = None if schema_hash is None else check_text(schema_hash, "schema_hash")
        smp = _check_sampling(sampling)
        with self.store.write() as (s, head):
            record = self.store.verified()
            self.store.prove(s, f"registering dataset {label!r}", self.actors.proofs(record, who))
            eff = self.actors.effective(record, who)
            ident = self._identify(record, eff, dg, label, sh)
            if ident.dataset is not None:
                ds = self.find(record, ident.dataset.fingerprint)
                assert ds is not None
                self._same_budget(ds, eps, dlt, rl, smp)
                if ident.known:
                    return ident.dataset
                fp = self.keyed(dg)
                eff, _ = self.actors.decide(s, record, who, Action.ADD_VERSION,
                                            f"adding a version to dataset {ds['name']!r}", ds,
                                            [*self.proof(ds), *self._version_proof(record, fp)])
                ver = VersionRow(dataset_id=int(ds["id"]), fingerprint=fp, rows=_rows(rows), schema_hash=sh,
                                 added_by=eff.subject, created_at=utcnow())
                s.add(ver)
                self.store.commit(s, head, "version.add", int(ds["id"]), [ver])
                return ident.dataset
            if ident.resembles:
                raise LedgerError(ident.advice)
            eff, _ = self.actors.authorize(record, eff, Action.DECLARE)
            return self._declare(s, head, record, eff, label, eps, dlt, rl, sh, dg, rows, smp)

    def _same_budget(self, ds: Row, eps: float, dlt: float, rl: CompositionRule, smp: Sampling | None) -> None:
        recorded = sampling_of(ds)
        if recorded != smp:
            raise LedgerError(
                f"dataset {ds['name']!r} ({ds['fingerprint']}) is registered as {_sampling_words(recorded)}; got "
                f"{_sampling_words(smp)}. The sampling declaration is fixed with the lifetime budget (it "
                "decides what every recorded spend costs the population). Use the schema the dataset "
                "was registered with, or declare a new dataset deliberately."
            )
        if (float(ds["epsilon"]), float(ds["delta"]), ds["rule"]) != (eps, dlt, rl.value):
            raise LedgerError(
                f"dataset {ds['name']!r} ({ds['fingerprint']}) is already registered with "
                f"lifetime budget ε = {ds['epsilon']}, δ = {ds['delta']}, rule {ds['rule']}; got "
                f"ε = {eps}, δ = {dlt}, rule {rl.value}. A lifetime budget is fixed once "
                "set so that earlier spends cannot be outgrown; an owner may raise it "
                "(a recorded decision). One table has one budget, whatever bytes it "
                "arrives in."
            )

    def declare(self, who: Principal, name: Any, epsilon: Any, delta: Any, rule: CompositionRule | str, *,
                schema_hash: Any, digest: str | None = None, rows: int | None = None,
                sampling: Sampling | None = None) -> DatasetInfo:
        """Declare a new dataset deliberately (owners only): see
        :meth:`planner.ledger.Ledger.declare_dataset`."""
        label = check_text(name, "the dataset's name", max_chars=200)
        eps, dlt = budget_values(epsilon, delta, "the lifetime budget's")
        rl = as_rule(rule)
        sh = check_text(schema_hash, "schema_hash")
        smp = _check_sampling(sampling)
        dg = None if digest is None else check_text(digest, "digest")
        with self.store.write() as (s, head):
            record = self.store.verified()
            eff, _ = self.actors.decide(s, record, who, Action.DECLARE, f"declaring dataset {label!r}")
            if dg is not None:
                known = self.find(record, dg)
                if known is not None:
                    raise LedgerError(
                        f"this content is already a version of dataset {known['name']!r}: one table has "
                        "one budget. Release on that dataset, or have an owner raise its budget."
                    )
            return self._declare(s, head, record, eff, label, eps, dlt, rl, sh, dg, rows, smp)

    def _declare(self, s: Any, head: Any, record: Record, eff: Principal, label: str, eps: float, dlt: float,
                 rl: CompositionRule, sh: str | None, dg: str | None, rows: int | None,
                 smp: Sampling | None) -> DatasetInfo:
        proofs = [*self._names_proof(record), *self.actors.proofs(record, eff)]
        if dg is not None:
            proofs += self._version_proof(record, self.keyed(dg))
        self.store.prove(s, f"declaring dataset {label!r}", proofs)
        existing = record.datasets_named(label)
        if existing:
            other = existing[0]
            raise LedgerError(
                f"a dataset named {label!r} is registered already ({other['fingerprint']}). A "
                "changed file is a new version of it (same budget); to start a new "
                "budget deliberately, give the new dataset its own name."
            )
        now = utcnow()
        ds = DatasetRow(fingerprint=new_dataset_key(), name=label, epsilon=eps, delta=dlt,
                        rule=rl.value, created_at=now, schema_hash=sh, registered_by=eff.subject,
                        **_sampling_columns(smp))
        s.add(ds)
        s.flush()
        assert ds.id is not None
        out: list[Any] = [ds]
        if dg is not None:
            ver = VersionRow(dataset_id=ds.id, fingerprint=self.keyed(dg), rows=_rows(rows),
                             schema_hash=sh, added_by=eff.subject, created_at=now)
            s.add(ver)
            out.append(ver)
        self.store.commit(s, head, "dataset.declare", ds.id, out)
        return dataset_info(row_dict(ds)[1])

    def add_version(self, who: Principal, ref: Any, digest: Any, *, rows: int | None = None,
                    schema_hash: str | None = None) -> VersionInfo:
        """Record ``digest`` as a content version of a registered dataset (same budget)."""
        dg = check_text(digest, "digest")
        sh = None if schema_hash is None else check_text(schema_hash, "schema_hash")
        with self.store.write() as (s, head):
            record = self.store.verified()
            ds = self.row(record, ref)
            fp = self.keyed(dg)
            eff, _ = self.actors.decide(s, record, who, Action.ADD_VERSION, f"adding a version to dataset {ds['name']!r}",
                                        ds, [*self.proof(ds), *self._version_proof(record, fp)])
            ver, added = self.version_in(s, record, ds, dg, rows, sh, eff)
            if added:
                self.store.commit(s, head, "version.add", int(ds["id"]), [ver])
            return version_info(row_dict(ver)[1] if isinstance(ver, VersionRow) else ver, str(ds["fingerprint"]))

    def version_in(self, s: Any, record: Record, ds: Row, digest: str, rows: int | None,
                   schema_hash: str | None, eff: Principal) -> tuple[VersionRow | Row, bool]:
        """The version row of ``digest`` on ``ds`` (added to the session if new);
        refused if the content is a version of another dataset."""
        fp = self.keyed(digest)
        ver = record.version(fp)
        if ver is not None:
            if int(ver["dataset_id"]) != int(ds["id"]):
                other = record.row("datasets", int(ver["dataset_id"]))
                raise LedgerError(
                    f"this content is a version of dataset {other['name'] if other else '?'!r}, not of "
                    f"{ds['name']!r}: one table has one budget. Release on the dataset it belongs to."
                )
            return ver, False
        row = VersionRow(dataset_id=int(ds["id"]), fingerprint=fp, rows=_rows(rows), schema_hash=schema_hash,
                         added_by=eff.subject, created_at=utcnow())
        s.add(row)
        return row, True

    # ------------------------------------------------------------------ budgets

    def raise_budget(self, who: Principal, ref: Any, epsilon: Any, delta: Any, reason: Any) -> DatasetInfo:
        check_text(ref, "fingerprint")
        eps, dlt = budget_values(epsilon, delta, "the lifetime budget's")
        if not isinstance(reason, str) or not reason.strip():
            raise LedgerError(
                "raising a lifetime budget needs a reason (who decided it, and why); "
                "it is recorded in the ledger."
            )
        why = check_text(reason.strip(), "reason")
        with self.store.write() as (s, head):
            record = self.store.verified()
            ds = self.row(record, ref)
            changes = {int(c["id"]): c for c in record.changes_of(int(ds["id"]))}
            eff, _ = self.actors.decide(
                s, record, who, Action.RAISE, f"raising the lifetime budget of dataset {ds['name']!r}", ds,
                [*self.proof(ds), ("budget_changes", col(BudgetChangeRow.dataset_id) == int(ds["id"]), changes)])
            cur_eps, cur_dlt = float(ds["epsilon"]), float(ds["delta"])
            if eps < cur_eps or dlt < cur_dlt:
                raise LedgerError(
                    f"a lifetime budget can only be raised: it is ε = {cur_eps:g}, "
                    f"δ = {cur_dlt:g}; got ε = {eps:g}, δ = {dlt:g}. Spends already recorded "
                    "can never be taken back."
                )
            if (eps, dlt) == (cur_eps, cur_dlt):
                raise LedgerError(
                    f"the lifetime budget is already ε = {cur_eps:g}, δ = {cur_dlt:g}; "
                    "give a larger ε or δ to raise it."
                )
            change = BudgetChangeRow(
                dataset_id=int(ds["id"]), old_epsilon=cur_eps, old_delta=cur_dlt,
                new_epsilon=eps, new_delta=dlt, reason=why, created_at=utcnow(),
                changed_by=eff.subject,
            )
            s.add(change)
            row = s.get(DatasetRow, int(ds["id"]))
            assert row is not None
            row.epsilon, row.delta = eps, dlt
            s.add(row)
            self.store.commit(s, head, "dataset.raise", int(ds["id"]), [row, change])
            return dataset_info(row_dict(row)[1])

    # ------------------------------------------------------------------ reading

    def budget_changes(self, who: Principal, ref: Any) -> list[BudgetChange]:
        with self.store.reading() as (_, record):
            ds = self.row(record, ref)
            self.actors.authorize(record, who, Action.READ, ds)
            return [budget_change(c) for c in record.changes_of(int(ds["id"]))]

    def find_dataset(self, who: Principal, digest: Any) -> DatasetInfo | None:
        dg = check_text(digest, "digest")
        with self.store.reading() as (_, record):
            ds = record.dataset_by_version(self.keyed(dg))
            if ds is None:
                self.actors.effective(record, who)
                return None
            self.actors.authorize(record, who, Action.READ, ds)
            return dataset_info(ds)

    def versions(self, who: Principal, ref: Any) -> list[VersionInfo]:
        with self.store.reading() as (_, record):
            ds = self.row(record, ref)
            self.actors.authorize(record, who, Action.READ, ds)
            return [version_info(v, str(ds["fingerprint"])) for v in record.versions_of(int(ds["id"]))]

    def datasets(self, who: Principal) -> list[DatasetInfo]:
        with self.store.reading() as (_, record):
            eff = self.actors.effective(record, who)
            rows = record.datasets()
            if eff.role.value == "owner":
                return [dataset_info(r) for r in rows]
            mine = record.datasets_granted_to(eff.subject)
            return [dataset_info(r) for r in rows if int(r["id"]) in mine]

    def dataset(self, who: Principal, ref: Any) -> DatasetInfo:
        with self.store.reading() as (_, record):
            ds = self.row(record, ref)
            self.actors.authorize(record, who, Action.READ, ds)
            return dataset_info(ds)

