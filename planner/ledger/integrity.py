"""How the ledger notices that it was emptied, truncated, rolled back or tampered with.

Three mechanisms, each documented where it is defined:

1. **The journal** (:func:`entry_mac`): every change to a ledger table (a dataset
   declared, a budget raised, a version added, a release reserved, answered or lost, an
   account or grant written) is appended, in the same transaction, as a journal entry
   holding the changed rows. Entries are chained:

       mac_n = HMAC-SHA256(K, n ‖ kind_n ‖ mac_{n−1} ‖ body_n),   mac_0 = 64 zeros,
       K = HMAC(server secret, "planner/ledger-chain/v1" ‖ ledger id),

   and the newest ``(n, mac_n)`` is kept in the one-row table ``ledger_head``. Changing,
   removing or reordering an entry breaks the chain; forging one needs the server
   secret (:mod:`planner.core.keys`), which the database does not hold.
2. **The projection** (:func:`replay` and :func:`compare`): replaying the journal
   gives the content every ledger table must have; a row added, removed or changed
   outside the planner (say, a spend deleted to win back budget) is reported.
3. **The marker** (:class:`Marker`), kept outside the database in
   ``$PLANNER_HOME/ledger-markers/<hash of the ledger URL>.json``: the ledger's id and
   the newest ``(n, mac_n)`` this machine saw. A ledger that is empty, replaced by
   another, or has fewer entries (truncated, restored from an older backup) than the
   marker records is refused with a message, never silently started over. Retiring a
   ledger deliberately means deleting its marker (the message names the file).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from planner.core.errors import LedgerIntegrityError
from planner.core.keys import random_hex

__all__ = [
    "GENESIS_MAC",
    "Marker",
    "MarkerState",
    "VerifyReport",
    "canonical",
    "canonical_value",
    "compare",
    "entry_mac",
    "replay",
]

GENESIS_MAC: Final = "0" * 64
MARKER_FORMAT: Final = "privacy-budget-planner/ledger-marker"


def canonical_value(value: Any) -> Any:
    """A column value in the one form journaled and compared (UTC ISO times)."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC).isoformat()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def canonical(obj: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces, ASCII): the bytes that are MACed."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


def chain_key(secret: bytes, ledger_id: str) -> bytes:
    """The journal's MAC key for one ledger."""
    return hmac.new(secret, b"planner/ledger-chain/v1\x00" + ledger_id.encode(), hashlib.sha256).digest()


def entry_mac(key: bytes, seq: int, kind: str, prev: str, body: str) -> str:
    """``HMAC(K, seq ‖ kind ‖ prev ‖ body)`` as hex."""
    msg = f"{seq}\n{kind}\n{prev}\n".encode() + body.encode("utf-8")
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- projection

State = dict[str, dict[Any, dict[str, Any]]]


def replay(bodies: Iterable[Mapping[str, Any]]) -> State:
    """The table content the journal implies: ``{table: {row id: row}}``."""
    state: State = {}
    for body in bodies:
        rows = body.get("rows", {})
        if not isinstance(rows, Mapping):
            raise ValueError("journal body without a rows object")
        for table, items in rows.items():
            if not isinstance(items, list):
                raise ValueError("journal rows must be lists")
            tab = state.setdefault(str(table), {})
            for row in items:
                if not isinstance(row, Mapping) or "id" not in row:
                    raise ValueError("journal row without an id")
                tab[row["id"]] = dict(row)
    return state


def compare(expected: State, actual: State, tables: Iterable[str]) -> list[str]:
    """Differences between the replayed journal and the tables, one line each.

    Lines name the table, the row id and the kind of difference, never a value.
    """
    problems: list[str] = []
    for table in tables:
        exp, act = expected.get(table, {}), actual.get(table, {})
        missing = sorted(set(exp) - set(act), key=str)
        extra = sorted(set(act) - set(exp), key=str)
        changed = sorted((k for k in set(exp) & set(act) if exp[k] != act[k]), key=str)
        if missing:
            problems.append(f"table {table}: {len(missing)} journaled row(s) missing "
                            f"(ids {_ids(missing)}): rows were deleted outside the planner")
        if extra:
            problems.append(f"table {table}: {len(extra)} row(s) not in the journal "
                            f"(ids {_ids(extra)}): rows were added outside the planner")
        for k in changed[:20]:
            cols = sorted(c for c in set(exp[k]) | set(act[k]) if exp[k].get(c) != act[k].get(c))
            problems.append(f"table {table}: row {k} differs from the journal in column(s) "
                            f"{', '.join(cols)}: changed outside the planner")
        if len(changed) > 20:
            problems.append(f"table {table}: {len(changed) - 20} more changed row(s)")
    return problems


def _ids(ids: list[Any]) -> str:
    shown = ", ".join(str(i) for i in ids[:10])
    return shown + (", …" if len(ids) > 10 else "")


# --------------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What ``planner ledger verify`` found.

    ``ok`` is true exactly when ``problems`` is empty. ``checked`` counts what was
    examined (journal entries, rows per table).
    """

    url: str
    ledger_id: str | None
    entries: int
    head_seq: int | None
    marker: str | None
    marker_seq: int | None
    problems: tuple[str, ...]
    checked: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems

    def without_counts(self) -> VerifyReport:
        """The report as a caller who is not an owner sees it: the problems (which name
        tables and rows, never values), not how many datasets, accounts, grants and journal
        entries the ledger holds."""
        return VerifyReport(self.url, self.ledger_id, 0, None, self.marker, None, self.problems, {})

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "format": "privacy-budget-planner/ledger-verify",
            "version": 1,
            "ok": self.ok,
            "url": self.url,
            "ledger_id": self.ledger_id,
            "entries": self.entries,
            "head_seq": self.head_seq,
            "marker": self.marker,
            "marker_seq": self.marker_seq,
            "problems": list(self.problems),
            "checked": dict(self.checked),
        }


# --------------------------------------------------------------------------- marker


@dataclass(frozen=True, slots=True)
class MarkerState:
    """What a marker file records."""

    ledger_id: str
    seq: int
    mac: str


class Marker:
    """The witness of one ledger kept outside its database (see the module docstring).

    Parameters
    ----------
    identity : str
        The ledger's location (SQLite: its absolute path; otherwise the URL without its
        password); hashed into the file name.
    shown : str
        The location as shown in messages.
    home : Path
        ``$PLANNER_HOME``.
    """

    def __init__(self, identity: str, shown: str, home: Path) -> None:
        digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:32]
        self.path = home / "ledger-markers" / f"{digest}.json"
        self.shown = shown

    def read(self) -> MarkerState | None:
        """The recorded state; ``None`` if there is no marker.

        Raises
        ------
        LedgerIntegrityError
            The marker exists but cannot be read as one (it is written atomically, so a
            damaged marker means it was changed by hand).
        """
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise LedgerIntegrityError(self._damaged(type(exc).__name__)) from exc
        try:
            data = json.loads(text)
            if data.get("format") != MARKER_FORMAT:
                raise ValueError("format")
            state = MarkerState(str(data["ledger_id"]), int(data["seq"]), str(data["mac"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LedgerIntegrityError(self._damaged("not a marker")) from exc
        if state.seq < 0 or len(state.mac) != 64:
            raise LedgerIntegrityError(self._damaged("out of range"))
        return state

    def _damaged(self, why: str) -> str:
        return (
            f"the integrity marker {self.path} of the ledger at {self.shown} is damaged ({why}). "
            "It is written atomically by the planner, so it was changed by hand. Run "
            "`planner ledger verify`; if the ledger itself is sound and you trust it, delete the "
            "marker and it is written again."
        )

    def advance(self, ledger_id: str, seq: int, mac: str) -> None:
        """Record ``(seq, mac)`` if it is newer than what is recorded (never goes back).

        Concurrent writers take an exclusive ``flock`` on a lock file beside the marker;
        the marker is replaced atomically (write, fsync, rename). Failures to write the
        marker are not fatal to the caller's committed work; they are retried next time.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock_path = self.path.with_suffix(".lock")
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return
        try:
            with contextlib.suppress(ImportError, OSError):
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = self.read()
            except LedgerIntegrityError:
                return  # never overwrite a damaged marker: the open check reports it
            if current is not None and current.ledger_id == ledger_id and current.seq >= seq:
                return
            if current is not None and current.ledger_id != ledger_id:
                return  # another ledger's marker: the open check refuses, never overwrite
            payload = json.dumps({
                "format": MARKER_FORMAT,
                "version": 1,
                "url": self.shown,
                "ledger_id": ledger_id,
                "seq": seq,
                "mac": mac,
                "updated_at": datetime.now(UTC).isoformat(),
            }, indent=2)
            tmp = self.path.with_name(f".{self.path.name}.{random_hex(4)}")
            try:
                wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    os.write(wfd, payload.encode())
                    os.fsync(wfd)
                finally:
                    os.close(wfd)
                os.replace(tmp, self.path)
            except OSError:
                with contextlib.suppress(OSError):
                    tmp.unlink()
        finally:
            os.close(fd)
