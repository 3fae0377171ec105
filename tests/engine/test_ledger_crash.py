"""Crash safety: a release whose process is SIGKILLed at the worst moments.

A child process (``ledger_workers/crash_worker.py``) releases one plan of ε = 0.25 against
a budget of ε = 1.0 and kills itself (SIGKILL: no cleanup, no checkpoint, on SQLite the WAL
file left behind) at one of three moments. A fresh process and a fresh :class:`Ledger` must
then find a consistent, verified database and the same budget accounting, and a re-run of
the same plan must never sample again once its spend was committed (docs/engineering.md §5). Every
test runs on SQLite and on a live PostgreSQL server (``ledger_url``). The lease of a
pending release is 1 s here (``PLANNER_LEASE_SECONDS``), so a killed release is known dead
once 1 s passed without a heartbeat.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planner.ledger import Ledger, ReleaseStatus

pytestmark = pytest.mark.fault  # each case injects one fault (run summary)

WORKER = Path(__file__).resolve().parent / "ledger_workers" / "crash_worker.py"
REPO = Path(__file__).resolve().parents[2]
FP = "sha256:crash"
COST = 0.25  # crash_worker.EPSILON
LEASE = 1.0


def _run(mode: str, url: str, marker: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, str(WORKER), mode, url, FP, "plan-1", str(marker)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _rerun(url: str, marker: Path) -> dict[str, Any]:
    proc = _run("rerun", url, marker)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture
def url(ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("PLANNER_LEASE_SECONDS", str(LEASE))
    led = Ledger(ledger_url)
    led.register_dataset(FP, "crash", epsilon=1.0, delta=0.0, rule="basic")
    led.close()
    yield ledger_url


def _stored_statuses(url: str) -> list[str]:
    led = Ledger(url)
    with led.engine.connect() as conn:
        out = [str(r[0]) for r in conn.exec_driver_sql("SELECT status FROM releases")]
    led.close()
    return out


def _fresh_checks(url: str) -> dict[str, Any]:
    """Open anew: verified integrity, WAL still on (SQLite), and the accounting as a dict."""
    led = Ledger(url)
    assert led.integrity_check() == []
    if url.startswith("sqlite"):
        with led.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    status = led.status(FP).to_dict()
    led.close()
    return status


def test_ledger_crash_inside_sample_keeps_spend_and_never_resamples(
    url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "sampled-1"
    proc = _run("kill_in_sample", url, marker)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert marker.exists()  # it died inside sample(), after the spend was committed
    if url.startswith("sqlite:///"):
        assert Path(f"{url[len('sqlite:///'):]}-wal").exists()  # no clean close: recovery runs
    # Within its lease the release still counts as running (liveness is the lease, not a pid)
    (rec,) = Ledger(url).releases(FP)
    assert rec.status is ReleaseStatus.PENDING
    time.sleep(LEASE + 0.3)  # nobody renews the lease any more

    status = _fresh_checks(url)
    assert status["epsilon_spent"] == pytest.approx(COST)  # the spend is counted
    assert status["releases"] == 1
    assert status["releases_without_answers"] == 1
    (rec,) = Ledger(url).releases(FP)
    assert rec.status is ReleaseStatus.SPENT_NO_ANSWERS
    assert rec.answers is None
    assert _stored_statuses(url) == ["spent_no_answers"]  # repaired on open, not only reported

    marker2 = tmp_path / "sampled-2"
    out = _rerun(url, marker2)
    assert out["outcome"] == "LedgerError"
    assert "answers were lost" in out["message"] and "will not be sampled again" in out["message"]
    assert not marker2.exists()  # never sampled again
    assert out["status"] == status  # a new process reports identical accounting
    assert out["releases"] == ["spent_no_answers"]
    assert _fresh_checks(url) == status


def test_ledger_crash_after_answers_returns_stored_answers(url: str, tmp_path: Path) -> None:
    proc = _run("kill_after_answers", url, tmp_path / "sampled-1")
    assert proc.returncode == -signal.SIGKILL, proc.stderr

    status = _fresh_checks(url)
    assert status["epsilon_spent"] == pytest.approx(COST)
    assert status["releases"] == 1 and status["releases_without_answers"] == 0
    (rec,) = Ledger(url).releases(FP)
    assert rec.status is ReleaseStatus.DONE and rec.answers == {"q": 12.5}

    marker2 = tmp_path / "sampled-2"
    out = _rerun(url, marker2)
    assert out["outcome"] == "reused" and out["answers"] == {"q": 12.5}
    assert not marker2.exists()
    assert out["status"] == status
    assert _fresh_checks(url) == status


def test_ledger_crash_before_spend_commit_records_nothing(url: str, tmp_path: Path) -> None:
    marker = tmp_path / "sampled-1"
    proc = _run("kill_before_commit", url, marker)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not marker.exists()  # nothing was sampled

    status = _fresh_checks(url)
    assert status["epsilon_spent"] == 0.0 and status["releases"] == 0

    marker2 = tmp_path / "sampled-2"
    out = _rerun(url, marker2)  # nothing was spent, so the plan may be released now
    assert out["outcome"] == "done" and marker2.exists()
    assert out["status"]["epsilon_spent"] == pytest.approx(COST)
    assert _fresh_checks(url) == out["status"]
