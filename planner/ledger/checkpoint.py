"""Checkpoints: the verified record, kept in the ledger so that a new process need not
replay the whole journal.

A process that verified the journal up to entry ``H`` (:mod:`planner.ledger.record`) may
store what it verified in the table ``ledger_checkpoints`` (created with the other tables,
and by :func:`planner.ledger.migrate.migrate_columns` in a ledger made before it existed).
A row is one of two kinds, both bound to ``(H, mac_H)``, the journal's chain value at ``H``:

* **state**: every row the record holds (answers by the digest of their payload), and the
  grants in force (written every :data:`STATE_EVERY` journal entries, and when a process
  opened the ledger with as many entries to replay);
* **summary**: the composed ε the record has read per dataset (status and the budget check
  read these: ``(dataset, subject, rule, δ and sampling) → (number of spends composed,
  ε)``), and a digest of the accounting code that computed them (written after a write
  that added spends, so that the newest budget is there for the next process).

Each row carries ``MAC = HMAC-SHA256(K_c, kind ‖ H ‖ mac_H ‖ body)`` with
``K_c = HMAC(server secret, "planner/ledger-checkpoint/v1" ‖ ledger id)``: the journal's key
machinery (:func:`planner.ledger.integrity.chain_key`) under another label, so a checkpoint
MAC is never a journal MAC and the reverse. The body is canonical JSON
(:func:`planner.ledger.integrity.canonical`); floats of the summary as ``float.hex`` (exact,
and ``inf`` is a value).

Opening with a checkpoint (:func:`load`): the newest state row at or below the head is
used only if (1) its MAC verifies under this ledger's key, (2) its body names this ledger,
``H`` and ``mac_H``, and (3) the journal's entry ``H`` is still there with MAC ``mac_H``
*and* that MAC is the entry's own, recomputed from its stored fields. Then only the entries
after ``H`` are read, each checked to chain to the one before (from ``mac_H``) exactly as
a full replay checks them, and the table row counts are compared with the record as
before. Anything else — a MAC that does not verify, a body that does not parse, an entry
``H`` edited or deleted — and the checkpoint is ignored: the whole journal is replayed, and
whatever that replay finds is refused exactly as without checkpoints. A summary is used
under the same checks (1)–(3) (also when no state checkpoint is, after the full replay),
and only for values whose number of spends equals the record's now (spends are only ever added, so an equal count is the same spends) and whose
code digest is this planner's.

Threat model (issue #27): someone who can write to the database but does not hold the
server secret (:mod:`planner.core.keys`).

* *Forging or editing a checkpoint* (a lower spend, a higher budget, a grant, a role):
  needs ``K_c``, so the MAC fails; the checkpoint is ignored and the full replay decides.
  A checkpoint or a summary **copied from another ledger**, or made under another secret,
  has another key: ignored.
* *An older checkpoint of the same ledger put back*: it was true at its ``H``; entries
  after ``H`` are replayed and verified. It costs time, never correctness. A checkpoint
  cannot be moved to another ``H``: ``H`` and ``mac_H`` are under its MAC.
* *Deleting checkpoints*: the full replay, as before they existed.
* *Editing, forging or deleting entry ``H``*: ``mac_H`` is recomputed from the entry and
  compared, so the checkpoint is ignored and the full replay refuses the broken chain.
  The chain value ``mac_H`` commits to the whole journal up to ``H`` under the journal key
  (each MAC covers the previous one): a different history leading to the same ``mac_H``
  would be a forged MAC.
* *Editing journal entries before ``H``* after the checkpoint was written: the record is
  the checkpoint, which says what those entries said when they were verified, so no
  decision changes (exactly as within one process, :mod:`planner.ledger.record`: an entry
  rewritten after it was verified cannot change what the record says). Such an edit is
  not noticed at open; ``planner ledger verify`` replays the whole journal and names it,
  and if the checkpoints are deleted the open refuses it. This is the one verdict that
  differs from a full replay at every open, and the price of not reading the history.
* *Rolling back or replacing the ledger*, checkpoints included: the head and the machine's
  marker are checked before any checkpoint is read (:class:`planner.ledger.integrity.Marker`),
  as before.
* *Rows of the tables edited, added or deleted*: unchanged — the row counts are compared
  with the record at open, and every decision proves the rows it reads against the record
  (:meth:`planner.ledger.store.Store.prove`).

Checkpoints are written only from a record this process verified (a full replay, or a
verified checkpoint and a verified tail), after the write they follow committed, in a
separate short transaction; they are never journaled (not a ledger table: the row counts
and ``verify`` ignore them), and failing to write one changes nothing but the next open's
time. No spend depends on a checkpoint that was not verified: the budget check reads the
record, and the record takes a checkpoint only after the checks above.

A summary's values are the composition's floats: the composition of the same spends gives
the same float in every process (:mod:`planner.privacy.accountants`), so a status read from
a summary equals one composed afresh. The code digest guards the one exception: a planner
whose accounting code changed composes afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from sqlmodel import Session, col, delete, select

from planner.core.errors import LedgerError
from planner.ledger.integrity import canonical, entry_mac
from planner.ledger.record import Record
from planner.ledger.tables import TRACKED, CheckpointRow, JournalRow
from planner.privacy.sampling import Sampling

__all__ = [
    "KEEP",
    "STATE_EVERY",
    "checkpoint_key",
    "checkpoint_mac",
    "code_digest",
    "load",
    "memo_key",
    "state_body",
    "summary_body",
]

#: A state checkpoint is written once the record is this many journal entries past the
#: newest one (so the replay after a checkpoint reads at most about this many entries).
STATE_EVERY: Final = 64
#: The table.
TABLE: Final = "ledger_checkpoints"
#: How many rows of each kind are kept (older ones are deleted when a new one is written).
KEEP: Final = 2
FORMAT: Final = "privacy-budget-planner/ledger-checkpoint"
VERSION: Final = 1
STATE: Final = "state"
SUMMARY: Final = "summary"
#: Journaled tables in the order their rows are applied (a row only refers to earlier ones).
_ORDER: Final = ("datasets", "dataset_versions", "budget_changes", "releases", "spends", "answers",
                 "accounts", "grants", "sign_in_failures")
assert set(_ORDER) == set(TRACKED)

_code: str | None = None


def checkpoint_key(secret: bytes, ledger_id: str) -> bytes:
    """The checkpoints' MAC key for one ledger (the journal's machinery, another label)."""
    return hmac.new(secret, b"planner/ledger-checkpoint/v1\x00" + ledger_id.encode(), hashlib.sha256).digest()


def checkpoint_mac(key: bytes, kind: str, seq: int, chain: str, body: str) -> str:
    """``HMAC(K_c, kind ‖ H ‖ mac_H ‖ body)`` as hex."""
    return hmac.new(key, f"{kind}\n{seq}\n{chain}\n".encode() + body.encode("utf-8"), hashlib.sha256).hexdigest()


def code_digest() -> str:
    """SHA-256 of the accounting code's source (``planner/privacy``): the summary's values
    are kept only by the planner that computed them."""
    global _code
    if _code is None:
        root = Path(__file__).resolve().parents[1] / "privacy"
        h = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode() + b"\x00" + path.read_bytes() + b"\x00")
        _code = h.hexdigest()
    return _code


def memo_key(delta: float, sampling: Sampling | None) -> str:
    """How a composed ε is kept: the δ it is read at and the sampling it is amplified by."""
    smp = "" if sampling is None else f"{float(sampling.rate).hex()}:{sampling.scheme.value}"
    return f"{float(delta).hex()}|{smp}"


# --------------------------------------------------------------------------- bodies


def state_body(record: Record) -> str:
    """Every row of the record and the grants in force, canonically."""
    rows = {t: [record.rows[t][i] for i in sorted(record.rows.get(t, {}))] for t in _ORDER if record.rows.get(t)}
    grants = sorted([d, s, rid] for (d, s), rid in record.grants_in_force().items())
    return canonical({"format": FORMAT, "version": VERSION, "kind": STATE, "ledger_id": record.ledger_id,
                      "seq": record.seq, "mac": record.mac, "rows": rows, "grants": grants})


def summary_body(record: Record) -> str:
    """The composed ε the record holds for all its spends, canonically."""
    memo = sorted(([ds, subject, rule, key, count, value.hex()]
                   for (ds, subject, rule, key), (count, value) in record.current_memo().items()),
                  key=lambda m: json.dumps(m))
    return canonical({"format": FORMAT, "version": VERSION, "kind": SUMMARY, "ledger_id": record.ledger_id,
                      "seq": record.seq, "mac": record.mac, "code": code_digest(), "memo": memo})


def _state_record(ledger_id: str, key: bytes, data: dict[str, Any]) -> Record:
    record = Record(ledger_id, key)
    rows = data["rows"]
    if not isinstance(rows, dict) or set(rows) - set(_ORDER):
        raise ValueError("rows")
    for table in _ORDER:
        for row in rows.get(table, ()):
            record._put(table, dict(row), stored=True)
    record.set_grants({(int(d), str(s)): int(rid) for d, s, rid in data["grants"]})
    record.take_touched()
    record.seq, record.mac = int(data["seq"]), str(data["mac"])
    return record


# --------------------------------------------------------------------------- reading


def _verified(s: Session, key: bytes, chain_key: bytes, ledger_id: str, kind: str,
              upto: int) -> tuple[CheckpointRow, dict[str, Any]] | None:
    """The newest checkpoint of ``kind`` at or below entry ``upto`` that passes checks
    (1)–(3) of the module docstring, parsed; ``None`` if there is none."""
    ids = s.exec(select(CheckpointRow.id).where(col(CheckpointRow.kind) == kind, col(CheckpointRow.seq) <= upto)
                 .order_by(col(CheckpointRow.seq).desc(), col(CheckpointRow.id).desc()).limit(KEEP)).all()
    for rid in ids:  # newest first, each body read only if the newer one did not verify
        row = s.get(CheckpointRow, rid)
        if row is None:
            continue
        if not hmac.compare_digest(checkpoint_mac(key, kind, row.seq, row.chain_mac, row.body), row.mac):
            continue
        at = s.get(JournalRow, row.seq)
        if at is None or at.mac != row.chain_mac \
                or entry_mac(chain_key, at.seq, at.kind, at.prev, at.body) != at.mac:
            continue
        try:
            data = json.loads(row.body)
        except ValueError:
            continue
        if not isinstance(data, dict) or (data.get("format"), data.get("version"), data.get("kind"),
                                          data.get("ledger_id"), data.get("seq"), data.get("mac")) \
                != (FORMAT, VERSION, kind, ledger_id, row.seq, row.chain_mac):
            continue
        return row, data
    return None


def load(s: Session, secret: bytes, chain_key: bytes, ledger_id: str,
         upto: int) -> tuple[Record | None, dict[tuple[int, str | None, str, str], tuple[int, float]]]:
    """The record as the newest usable state checkpoint at or below entry ``upto`` holds it
    (``None``: replay the whole journal), and the newest usable summary's values (empty if
    none); the caller replays the entries after ``record.seq``, then adds the values (each
    is used only while its count of spends is the record's)."""
    key = checkpoint_key(secret, ledger_id)
    record = None
    found = _verified(s, key, chain_key, ledger_id, STATE, upto)
    if found is not None:
        try:
            record = _state_record(ledger_id, chain_key, found[1])
        except (ValueError, KeyError, TypeError, AttributeError):
            record = None  # a body under a valid MAC that this planner cannot read: replay
    memo: dict[tuple[int, str | None, str, str], tuple[int, float]] = {}
    summary = _verified(s, key, chain_key, ledger_id, SUMMARY, upto)
    if summary is not None and summary[1].get("code") == code_digest():
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            memo = _memo(summary[1]["memo"])
    return record, memo


def _memo(items: Iterable[Any]) -> dict[tuple[int, str | None, str, str], tuple[int, float]]:
    out: dict[tuple[int, str | None, str, str], tuple[int, float]] = {}
    for ds, subject, rule, key, count, value in items:
        out[(int(ds), None if subject is None else str(subject), str(rule), str(key))] = (
            int(count), float.fromhex(str(value)))
    return out


def newest_state(s: Session) -> int:
    """The entry of the newest state checkpoint stored (verified or not; 0 for none): when
    to write the next one."""
    row = s.exec(select(CheckpointRow.seq).where(col(CheckpointRow.kind) == STATE)
                 .order_by(col(CheckpointRow.seq).desc()).limit(1)).first()
    return 0 if row is None else int(row)


# --------------------------------------------------------------------------- writing


def write(session: Any, secret: bytes, record: Record, *, state: bool) -> None:
    """Store a summary (and, if ``state``, a state checkpoint) of ``record``, keeping the
    newest :data:`KEEP` rows of each kind. ``session`` is a context manager giving a write
    session (:meth:`planner.ledger.store.Store.session`); the record's lock is held by the
    caller. Failing to write (busy, read-only, a ledger without the table) is not an error
    of the caller's committed work: the next open replays a little more."""
    key = checkpoint_key(secret, record.ledger_id)
    bodies = [(SUMMARY, summary_body(record))]
    if state:
        bodies.append((STATE, state_body(record)))
    try:
        with session as s:
            for kind, body in bodies:
                s.add(CheckpointRow(kind=kind, seq=record.seq, chain_mac=record.mac, body=body,
                                    mac=checkpoint_mac(key, kind, record.seq, record.mac, body),
                                    created_at=datetime.now(UTC)))
            s.flush()
            for kind, _ in bodies:
                keep = s.exec(select(CheckpointRow.id).where(col(CheckpointRow.kind) == kind)
                              .order_by(col(CheckpointRow.seq).desc(), col(CheckpointRow.id).desc())
                              .limit(KEEP)).all()
                s.exec(delete(CheckpointRow).where(col(CheckpointRow.kind) == kind,
                                                   col(CheckpointRow.id).not_in(list(keep))))
            s.commit()
    except LedgerError:
        return  # busy, read-only or unreachable (the session says which); see above
