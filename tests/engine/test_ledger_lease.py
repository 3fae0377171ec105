"""Liveness of a pending release is its lease, renewed by a heartbeat, never a process id
(issue 16, finding 5: a release in its own PID namespace was declared dead as soon as
another process opened the ledger, and its answers were lost after its spend).

The lease is 2 s here; the releasing child samples for 6 s, i.e. through three lease
periods, while the parent keeps opening the ledger. Runs on SQLite and PostgreSQL. (With a
1 s lease, four heartbeats in a row lost to a loaded machine's SQLite lock once let the
lease lapse: session 10's CI run, the own-PID-namespace case on SQLite.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from planner.core.errors import LedgerError
from planner.ledger import Ledger, ReleaseStatus

pytestmark = pytest.mark.fault  # each case injects one fault (run summary)

WORKER = Path(__file__).resolve().parent / "ledger_workers" / "lease_worker.py"
REPO = Path(__file__).resolve().parents[2]
FP = "digest-lease"
LEASE = 2.0
SAMPLE_SECONDS = 6.0


@pytest.fixture
def url(ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PLANNER_LEASE_SECONDS", str(LEASE))
    led = Ledger(ledger_url)
    led.register_dataset(FP, "lease", epsilon=1.0, delta=0.0, rule="basic")
    led.close()
    return ledger_url


def _unshare_prefix() -> list[str] | None:
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return None
    probe = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, timeout=30, check=False)
    return [unshare, "--pid", "--fork", "--mount-proc"] if probe.returncode == 0 else None


def _start(prefix: list[str], url: str, started: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [*prefix, sys.executable, str(WORKER), url, FP, "plan-1", str(started), str(SAMPLE_SECONDS)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _watch_while_sampling(url: str, proc: subprocess.Popen[str], started: Path) -> list[str]:
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    seen: list[str] = []
    t0 = time.monotonic()
    t_end = t0 + SAMPLE_SECONDS - 1.0
    last = t0
    while time.monotonic() < t_end:  # about three lease periods
        other = Ledger(url)  # every open runs repair()
        seen.append(str(other.releases(FP)[0].status))
        other.close()
        last = time.monotonic()
        time.sleep(0.25)
    assert last - t0 >= 2 * LEASE  # observed across at least two lease periods
    return seen


@pytest.mark.fault(0)  # a control: nothing fails, the lease must hold
@pytest.mark.parametrize("namespace", ["own_pid_namespace", "plain_process"])
def test_lease_a_release_in_another_pid_namespace_stays_alive(url: str, tmp_path: Path,
                                                              namespace: str) -> None:
    prefix: list[str] = []
    if namespace == "own_pid_namespace":
        got = _unshare_prefix()
        if got is None:
            pytest.skip("unshare --pid needs root and a kernel that allows PID namespaces here")
        prefix = got
    started = tmp_path / "started"
    proc = _start(prefix, url, started)
    seen = _watch_while_sampling(url, proc, started)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    # never declared dead while renewed (at least 3 looks; a loaded machine manages fewer)
    assert len(seen) >= 3 and set(seen) == {"pending"}
    assert json.loads(out.strip().splitlines()[-1]) == {"outcome": "done", "answers": {"q": 7}}
    led = Ledger(url)
    (rec,) = led.releases(FP)
    assert rec.status is ReleaseStatus.DONE and rec.answers == {"q": 7}
    assert led.verify().ok


def test_lease_a_paused_release_loses_its_answers_but_never_its_spend(url: str, tmp_path: Path) -> None:
    """Fault injected: SIGSTOP the releasing process so its heartbeat stops. Its lease
    expires, the next reader marks it spent_no_answers; when it resumes it may not store
    answers (the budget stays spent, nothing is sampled twice)."""
    started = tmp_path / "started"
    proc = _start([], url, started)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        time.sleep(LEASE + 0.5)
        led = Ledger(url)
        (rec,) = led.releases(FP)
        assert rec.status is ReleaseStatus.SPENT_NO_ANSWERS
        assert led.status(FP).epsilon_spent == pytest.approx(0.25)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["outcome"] == "LedgerError" and "no longer pending" in result["message"], err
    led = Ledger(url)
    assert led.status(FP).epsilon_spent == pytest.approx(0.25)
    with pytest.raises(LedgerError, match="will not be sampled again"):
        led.release(FP, "plan-1", "schema", [("q", led.releases(FP)[0].spends[0].spend)], lambda: {"q": 0})
    assert led.verify().ok


def test_lease_decides_not_the_pid(url: str) -> None:
    """A pending row claimed by a pid that does not exist here is alive while its lease
    holds, and dead once it expired (the old rule declared it dead at once)."""
    from planner.ledger import ReleaseRow, SpendRow
    from planner.ledger.liveness import owner_token as _owner_token
    from planner.privacy.events import PureEvent

    led = Ledger(url)

    now = datetime.now(UTC)
    with led.store.write() as (s, head):
        ds_id = led.store.verified().dataset_by_key(led.dataset(FP).fingerprint)["id"]
        row = ReleaseRow(dataset_id=ds_id, plan_hash="foreign", schema_hash="s", created_at=now,
                         status="pending", owner=_owner_token("someone-else").replace(
                             str(os.getpid()), "4194303"), actor="local:owner",
                         lease_expires_at=now + timedelta(seconds=30), heartbeat_at=now)
        s.add(row)
        s.flush()
        sp = SpendRow(release_id=row.id, query_id="q", epsilon=0.1, delta=0.0, rho=0.005,
                      event_json=json.dumps(PureEvent(0.1).to_dict(), sort_keys=True))
        s.add(sp)
        led.store.commit(s, head, "release.reserve", ds_id, [row, sp])
    assert Ledger(url).releases(FP)[0].status is ReleaseStatus.PENDING
    with led.store.write() as (s, head):
        r = s.get(ReleaseRow, row.id)
        r.lease_expires_at = now - timedelta(seconds=1)
        s.add(r)
        s.commit()
    assert Ledger(url).releases(FP)[0].status is ReleaseStatus.SPENT_NO_ANSWERS
