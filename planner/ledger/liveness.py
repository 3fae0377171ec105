"""Whether a pending release may still be sampling: by its lease, never a process id.

A release is *pending* between the commit of its spend and the commit of its answers. The
process sampling it holds a **lease** (``lease_expires_at`` on its row) and renews it every
quarter of the lease from a heartbeat thread (:class:`Heartbeat`). Once the lease has
expired unrenewed, the release is dead: the next reader reports it, and the next writer
records it, as ``spent_no_answers`` (the spend stays counted; nothing is refunded and the
plan is never sampled again). A release running in another PID namespace, container or
host stays alive exactly as long as its heartbeat renews the lease.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from planner.core.errors import LedgerError
from planner.ledger.tables import ReleaseRow

__all__ = ["ENV_LEASE", "LEASE_SECONDS", "Heartbeat", "alive", "claim", "lease_seconds", "owner_token", "settle"]

#: Lease of a pending release, in seconds (renewed every quarter of it while sampling).
ENV_LEASE: Final = "PLANNER_LEASE_SECONDS"
#: Default lease of a pending release; it is dead once the lease expired unrenewed.
LEASE_SECONDS: Final = 30.0

_HOST: Final = socket.gethostname()
#: Claims (release nonces) created by this process, and those whose sample() is running.
_MY_CLAIMS: set[str] = set()
_IN_FLIGHT: set[str] = set()
_LOCK: Final = threading.Lock()


def lease_seconds(value: float | None) -> float:
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


def owner_token(nonce: str) -> str:
    """The claim of a pending release (diagnostics: host and pid are never used to decide
    liveness; only the claim nonce and the lease are)."""
    return json.dumps({"host": _HOST, "pid": os.getpid(), "claim": nonce}, sort_keys=True)


def _claim_of(owner: str) -> str:
    try:
        info = json.loads(owner)
        return str(info["claim"]) if isinstance(info, dict) else ""
    except (ValueError, KeyError, TypeError):
        return ""


def claim(nonce: str) -> None:
    """This process is about to release under ``nonce``."""
    with _LOCK:
        _IN_FLIGHT.add(nonce)
        _MY_CLAIMS.add(nonce)


def settle(nonce: str, *, forget: bool) -> None:
    """The release under ``nonce`` stopped sampling here (``forget`` once it is settled)."""
    with _LOCK:
        _IN_FLIGHT.discard(nonce)
        if forget:
            _MY_CLAIMS.discard(nonce)


def alive(row: ReleaseRow) -> bool:
    """Whether a pending release may still be sampling.

    A claim made by this very process is alive exactly while its ``sample()`` runs
    (known without waiting). Any other claim is alive while its lease has not expired.
    """
    c = _claim_of(row.owner)
    with _LOCK:
        if c and c in _MY_CLAIMS:
            return c in _IN_FLIGHT
    if row.lease_expires_at is None:
        return False
    expires = row.lease_expires_at
    expires = expires if expires.tzinfo is not None else expires.replace(tzinfo=UTC)
    return expires > datetime.now(UTC)


class Heartbeat:
    """Renews a pending release's lease every quarter of it until stopped."""

    def __init__(self, renew: Callable[[], None], seconds: float, release_id: int) -> None:
        self._renew = renew
        self._seconds = seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"planner-lease-{release_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=max(5.0, self._seconds))

    def _run(self) -> None:
        while not self._stop.wait(self._seconds / 4):
            try:
                self._renew()
            except Exception:  # a missed beat only shortens the lease
                continue
