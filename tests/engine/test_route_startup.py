"""The release route's fixed costs outside the scan (issue 31), kept without a change of
behaviour: what the shortcuts of ``docs/measurements/2026-12-07/route_startup.txt`` rely on.

* A new SQLite ledger is built in a temporary file whose writes are not synced one by one
  (pysqlite commits each CREATE of the tables on its own); the file is synced once, before
  it is linked into place, and the ledger's own connections keep ``synchronous = FULL``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from planner.ledger import Ledger


def test_new_ledger_file_is_synced_before_it_is_linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary file that becomes the ledger is fsynced before ``os.link`` puts it in
    place: a crash after the link finds every table and the head on the disk."""
    events: list[tuple[str, str]] = []
    real_fsync, real_link = os.fsync, os.link

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def link(src: str | Path, dst: str | Path) -> None:
        events.append(("link", str(src)))
        real_link(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    Ledger(f"sqlite:///{tmp_path}/ledger.db").close()
    linked = [src for what, src in events if what == "link" and Path(src).parent == tmp_path]  # not the secret's
    assert len(linked) == 1 and Path(linked[0]).name.startswith(".ledger.db.new-")
    assert ("fsync", linked[0]) in events[: events.index(("link", linked[0]))]
    assert not any(p.name.startswith(".ledger.db.new-") for p in tmp_path.iterdir())  # the temporary file is gone


def test_the_ledgers_own_connections_stay_fully_synced(tmp_path: Path) -> None:
    """Only the building connection skips the syncs: the ledger, once created (and when
    opened again), writes with ``synchronous = FULL`` (2) in WAL mode."""
    url = f"sqlite:///{tmp_path}/ledger.db"
    for _ in range(2):  # created, then opened
        led = Ledger(url)
        try:
            with led.engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        finally:
            led.close()
