"""A ledger that cannot forget silently (issue 16, finding 4): faults injected into the
database, the journal, the marker and the secret must each give a clear refusal or a
verify report naming the problem, never a silent reset and never a traceback.

Every test that can runs on SQLite and on a live PostgreSQL server (``ledger_url``).
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from planner.cli import main
from planner.core.errors import LedgerError, LedgerIntegrityError
from planner.ledger import Ledger, ReleaseStatus, verify_ledger
from planner.privacy.accounting import Spend
from planner.privacy.events import PureEvent

pytestmark = pytest.mark.fault  # each case injects one fault (run summary)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DIGEST = "synthetic-digest-0001"


def pure(eps: float) -> Spend:
    return Spend(event=PureEvent(eps), epsilon=eps, delta=0.0)


def _populated(url: str, releases: int = 2) -> str:
    led = Ledger(url)
    ds = led.register_dataset(DIGEST, "survey", 1.0, 0.0, "basic")
    for i in range(releases):
        led.release(ds.fingerprint, f"plan-{i}", "s", [("q", pure(0.1))], lambda i=i: {"q": i})
    led.close()
    return ds.fingerprint


def _sql(url: str, *statements: str) -> None:
    led = Ledger(url, _gate=False)
    with led.engine.connect() as conn:
        with conn.begin():
            for st in statements:
                conn.exec_driver_sql(st)
    led.close()


def _sqlite_path(url: str) -> Path:
    return Path(url[len("sqlite:///"):])


def _verify_cli(url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["ledger", "verify", "--ledger", url])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.fault(0)  # not a fault: a control
def test_integrity_a_healthy_ledger_verifies(ledger_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _populated(ledger_url)
    code, rep = _verify_cli(ledger_url, capsys)
    assert code == 0 and rep["ok"] and rep["problems"] == []
    # 1 dataset declaration + 2 × (reserve + answer) = 5 journal entries (by hand)
    assert rep["entries"] == 5 and rep["head_seq"] == 5 and rep["marker_seq"] == 5
    assert rep["checked"]["spends"] == 2 and rep["checked"]["answers"] == 2


# ------------------------------------------------------------------ emptied / replaced


def test_integrity_zero_length_file_is_refused_not_a_new_ledger(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _populated(url)
    _sqlite_path(url).write_bytes(b"")
    for wal in ("-wal", "-shm"):
        Path(f"{_sqlite_path(url)}{wal}").unlink(missing_ok=True)
    with pytest.raises(LedgerIntegrityError, match="empty"):
        Ledger(url)
    assert _sqlite_path(url).stat().st_size == 0  # nothing was created in its place
    code, rep = _verify_cli(url, capsys)
    assert code == 1 and "empty" in rep["problems"][0]


def test_integrity_deleted_and_recreated_ledger_is_refused(ledger_url: str) -> None:
    _populated(ledger_url)
    if ledger_url.startswith("sqlite"):
        path = _sqlite_path(ledger_url)
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            p.unlink(missing_ok=True)
    else:
        _sql(ledger_url, "DROP SCHEMA public CASCADE", "CREATE SCHEMA public")
    with pytest.raises(LedgerIntegrityError, match="forgotten"):
        Ledger(ledger_url)


def test_integrity_replaced_ledger_is_refused(ledger_url: str, tmp_path: Path) -> None:
    if not ledger_url.startswith("sqlite"):
        _populated(ledger_url)
        _sql(ledger_url, "UPDATE ledger_head SET ledger_id = 'another-ledger'")
    else:
        other = f"sqlite:///{tmp_path / 'other.db'}"
        _populated(other, 0)
        _populated(ledger_url)
        shutil.copy(_sqlite_path(other), _sqlite_path(ledger_url))
        for wal in ("-wal", "-shm"):
            Path(f"{_sqlite_path(ledger_url)}{wal}").unlink(missing_ok=True)
    with pytest.raises(LedgerIntegrityError, match="replaced"):
        Ledger(ledger_url)


def test_integrity_restored_older_backup_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    fp = _populated(url, 1)
    backup = tmp_path / "backup.db"
    import sqlite3

    src, dst = sqlite3.connect(_sqlite_path(url)), sqlite3.connect(backup)
    src.backup(dst)  # an ordinary online backup
    src.close()
    dst.close()
    led = Ledger(url)
    led.release(fp, "plan-after-backup", "s", [("q", pure(0.5))], lambda: {"q": 9})
    led.close()
    shutil.copy(backup, _sqlite_path(url))
    for wal in ("-wal", "-shm"):
        Path(f"{_sqlite_path(url)}{wal}").unlink(missing_ok=True)
    with pytest.raises(LedgerIntegrityError, match="older backup") as info:
        Ledger(url)
    assert "delete the marker" in str(info.value)  # the deliberate way out is named


def test_integrity_journal_tail_removed_is_refused(ledger_url: str) -> None:
    _populated(ledger_url)
    _sql(ledger_url, "DELETE FROM journal WHERE seq = (SELECT MAX(seq) FROM journal)")
    with pytest.raises(LedgerIntegrityError, match="lost journal entries"):
        Ledger(ledger_url)


def test_integrity_rolled_back_head_is_refused_by_the_marker(ledger_url: str) -> None:
    _populated(ledger_url)
    # a consistent-looking rollback: drop the last entry and move the head back to it
    _sql(ledger_url,
         "DELETE FROM journal WHERE seq = 5",
         "UPDATE ledger_head SET seq = 4, mac = (SELECT mac FROM journal WHERE seq = 4)")
    with pytest.raises(LedgerIntegrityError, match="truncated or restored"):
        Ledger(ledger_url)


# ------------------------------------------------------------------ tampering


def test_integrity_deleted_spend_is_detected(ledger_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _populated(ledger_url)
    _sql(ledger_url, "DELETE FROM spends WHERE id = (SELECT MAX(id) FROM spends)")
    with pytest.raises(LedgerIntegrityError, match="does not account for"):
        Ledger(ledger_url)  # refused before anything could be spent on the smaller sum
    code, rep = _verify_cli(ledger_url, capsys)
    assert code == 1
    assert any("table spends" in p and "missing" in p for p in rep["problems"])


def test_integrity_edited_spend_is_detected(ledger_url: str) -> None:
    _populated(ledger_url)
    _sql(ledger_url, "UPDATE spends SET epsilon = 0.0")
    led = Ledger(ledger_url)  # same row counts: the open check passes, verify compares values
    problems = led.integrity_check()
    assert any("table spends" in p and "epsilon" in p for p in problems)


def test_integrity_edited_journal_breaks_the_chain(ledger_url: str) -> None:
    _populated(ledger_url)
    _sql(ledger_url, "UPDATE journal SET body = REPLACE(body, '0.1', '0.0') WHERE seq = 2")
    problems = verify_ledger(ledger_url).problems
    assert any("journal entry 2" in p and "chain" in p for p in problems)
    with pytest.raises(LedgerIntegrityError, match="broken at entry 2"):
        Ledger(ledger_url)


def test_integrity_forged_rows_added_outside_are_detected(ledger_url: str) -> None:
    _populated(ledger_url)
    _sql(ledger_url, "INSERT INTO budget_changes (dataset_id, old_epsilon, old_delta, new_epsilon, "
                     "new_delta, reason, created_at) VALUES (1, 1.0, 0.0, 100.0, 0.0, 'x', "
                     "'2026-01-01 00:00:00')")
    assert any("table budget_changes" in p and "not in the journal" in p
               for p in verify_ledger(ledger_url).problems)
    with pytest.raises(LedgerIntegrityError, match="budget_changes"):
        Ledger(ledger_url)


# ------------------------------------------------------------------ garbage stored values


@pytest.mark.parametrize("status", ["weird", "", "reused"])
def test_integrity_unknown_status_is_a_message(ledger_url: str, status: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    fp = _populated(ledger_url)
    before = Ledger(ledger_url).status(fp)
    _sql(ledger_url, f"UPDATE releases SET status = '{status}' WHERE id = 1")
    led = Ledger(ledger_url)
    # the history as stored is refused, naming the row and column that disagree with the journal
    with pytest.raises(LedgerIntegrityError, match=r"row 1 differs from the journal in column\(s\) status") as info:
        led.releases(fp)
    assert "Traceback" not in str(info.value)
    code = main(["ledger", "--ledger", ledger_url, "--dataset", fp])
    err = capsys.readouterr().err
    assert code == 2 and "differs from the journal" in json.loads(err)["error"]
    assert any("unknown status" in p for p in led.integrity_check())
    assert led.status(fp) == before  # the budget is read from the journal, which the edit did not touch


@pytest.mark.parametrize("garbage", [
    "not json", "[]", '{"event": "nope"}', '{"event": "laplace"}',
    '{"event": "laplace", "noise_multiplier": "x"}', "[" * 5000 + "]" * 5000,
    '{"event": "self_composed", "count": 2, "inner": ' * 300 + "{}" + "}" * 300,
])
def test_integrity_garbage_event_is_a_message(ledger_url: str, garbage: str) -> None:
    fp = _populated(ledger_url)
    led = Ledger(ledger_url, _gate=False)
    with led.engine.connect() as conn:
        with conn.begin():
            from sqlalchemy import text

            conn.execute(text("UPDATE spends SET event_json = :g WHERE id = 1"), {"g": garbage})
    led.close()
    led = Ledger(ledger_url)
    with pytest.raises(LedgerIntegrityError, match=r"differs from the journal in column\(s\) event_json"):
        led.releases(fp)
    with pytest.raises(LedgerIntegrityError):  # a release never spends on an unreadable ledger
        led.release(fp, "new", "s", [("q", pure(0.1))], lambda: {"q": 1})
    assert led.integrity_check()


def test_integrity_corrupted_sqlite_file_is_a_message(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _populated(url, 3)
    path = _sqlite_path(url)
    led = Ledger(url)
    with led.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    led.close()
    data = bytearray(path.read_bytes())
    for off in range(4096, len(data), 97):  # every page after the header, many bytes
        data[off] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerError) as info:
        Ledger(url)
    assert "damaged" in str(info.value) or "not a readable database" in str(info.value)
    code, rep = _verify_cli(url, capsys)
    assert code == 1 and rep["problems"]


@pytest.mark.parametrize("keep", [0.5, 0.1])
def test_integrity_truncated_sqlite_file_is_a_message(tmp_path: Path, keep: float) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _populated(url, 9)
    led = Ledger(url)
    with led.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    led.close()
    path = _sqlite_path(url)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(LedgerError):
        Ledger(url)


def test_integrity_garbage_file_is_a_message(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    path.write_bytes(b"this is not a database, just text\n" * 200)
    with pytest.raises(LedgerIntegrityError, match=r"not a readable database|damaged"):
        Ledger(f"sqlite:///{path}")


def test_integrity_other_secret_is_refused(ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _populated(ledger_url)
    monkeypatch.setenv("PLANNER_SECRET", "x" * 64)
    with pytest.raises(LedgerIntegrityError, match="another server secret"):
        Ledger(ledger_url)


def test_integrity_damaged_marker_is_refused(ledger_url: str) -> None:
    _populated(ledger_url)
    marker = Ledger(ledger_url).marker_path
    assert marker is not None
    marker.write_text("{garbage")
    with pytest.raises(LedgerIntegrityError, match=r"marker .* is damaged"):
        Ledger(ledger_url)


def test_integrity_missing_head_is_refused(ledger_url: str) -> None:
    _populated(ledger_url)
    _sql(ledger_url, "DELETE FROM ledger_head")
    with pytest.raises(LedgerIntegrityError):
        Ledger(ledger_url)


# ------------------------------------------------------------------ migration, secrets


@pytest.mark.fault(0)  # not a fault: a control
def test_integrity_format_1_ledger_is_migrated_and_verifies(tmp_path: Path) -> None:
    """A ledger written by the previous version (its code kept in tests/fixtures/ledger_v1)
    is migrated on open: nothing forgotten, the bare file hash no longer stored."""
    url = f"sqlite:///{tmp_path / 'v1.db'}"
    v1 = runpy.run_path(str(FIXTURES / "ledger_v1" / "ledger_v1.py"), run_name="ledger_v1")
    old = v1["Ledger"](url)
    bare = "ab" * 32  # what v1 stored: a bare SHA-256 of the file
    old.register_dataset(bare, "census.csv", 3.0, 1e-6, "basic")
    old.release(bare, "plan-a", "s", [("q", pure(0.5))], lambda: {"q": 11})
    old.raise_budget(bare, 4.0, 1e-6, reason="board decision")
    old.close()

    led = Ledger(url)
    assert led.verify().ok, led.verify().problems
    st = led.status(bare)  # the old key still finds the dataset (as a keyed version)
    assert (st.epsilon_total, st.epsilon_spent, st.releases) == (4.0, 0.5, 1)
    (rec,) = led.releases(bare)
    assert rec.actor == "local:owner" and rec.answers == {"q": 11}
    export = json.dumps(led.export(bare))
    assert bare not in export
    raw = _sqlite_path(url).read_bytes() + Path(f"{_sqlite_path(url)}-wal").read_bytes()
    assert bare.encode() not in raw  # nowhere in the database either (secure_delete, checkpoint)
    assert led.budget_changes(bare)[0].reason == "board decision"


@pytest.mark.fault(2)
def test_integrity_secret_file_is_created_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.core import keys

    monkeypatch.delenv("PLANNER_SECRET", raising=False)
    monkeypatch.delenv("PLANNER_SECRET_FILE", raising=False)
    monkeypatch.setenv("PLANNER_HOME", str(tmp_path / "home"))
    secret = keys.server_secret()
    path = tmp_path / "home" / "secret.key"
    assert len(secret) == 64 and (path.stat().st_mode & 0o777) == 0o600
    path.chmod(0o644)
    keys._CACHE.clear()
    with pytest.raises(LedgerError, match="chmod 600"):
        keys.server_secret()
    monkeypatch.setenv("PLANNER_SECRET", "short")
    with pytest.raises(LedgerError, match="at least 32"):
        keys.server_secret()


@pytest.mark.fault(0)  # not a fault: a control
def test_integrity_exports_carry_no_bare_hash(ledger_url: str) -> None:
    import hashlib

    content = b"age,income\n30,100\n"
    bare = hashlib.sha256(content).hexdigest()
    led = Ledger(ledger_url)
    ds = led.register_dataset(bare, "t", 1.0, 0.0, "basic")
    led.release(bare, "p", "s", [("q", pure(0.1))], lambda: {"q": 1})
    text = json.dumps(led.export(ds.fingerprint, include_answers=True)) + json.dumps(
        [d.to_dict() for d in led.datasets()]) + json.dumps([v.to_dict() for v in led.versions(bare)])
    assert bare not in text
    assert led.versions(bare)[0].fingerprint.startswith("hmac-sha256:")


def test_integrity_verify_cli_runs_in_a_fresh_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _populated(url)
    _sql(url, "UPDATE answers SET payload_json = '999'")
    env = dict(os.environ)
    res = subprocess.run([sys.executable, "-m", "planner", "ledger", "verify", "--ledger", url],
                         capture_output=True, text=True, timeout=120, env=env,
                         cwd=Path(__file__).resolve().parents[2], check=False)
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert any("table answers" in p for p in json.loads(res.stdout)["problems"])


def test_integrity_status_counts_after_repair_are_journaled(ledger_url: str) -> None:
    fp = _populated(ledger_url, 0)
    led = Ledger(ledger_url)
    with pytest.raises(RuntimeError):
        led.release(fp, "boom", "s", [("q", pure(0.2))], lambda: (_ for _ in ()).throw(RuntimeError("x")))
    (rec,) = led.releases(fp)
    assert rec.status is ReleaseStatus.SPENT_NO_ANSWERS
    assert led.verify().ok
