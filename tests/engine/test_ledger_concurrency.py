"""Concurrent releases never overspend (threads and processes; SQLite in WAL mode and a
live PostgreSQL server, each test parametrised over both by ``ledger_url``).

20 releases of ε = 0.2 each (distinct plan hashes) race for a total budget of ε = 1.0,
which fits exactly 5 under basic composition (5 × 0.2 = 1.0, a hand sum): exactly 5 must
succeed, 15 must get BudgetExceededError, and the ledger must report ε = 1.0 spent.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import BudgetExceededError
from planner.ledger import Ledger, ReleaseStatus
from planner.privacy.accounting import Spend
from planner.privacy.events import PureEvent

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ledger_workers.race import race_release

N_RACERS = 20
COST = 0.2
TOTAL = 1.0
FITS = 5
FP = "sha256:race"


@pytest.fixture
def url(ledger_url: str) -> str:
    url = ledger_url
    led = Ledger(url)
    led.register_dataset(FP, "race", epsilon=TOTAL, delta=0.0, rule="basic")
    led.close()
    return url


def _check_ledger(url: str) -> None:
    led = Ledger(url)
    status = led.status(FP)
    assert status.releases == FITS
    assert status.epsilon_spent == pytest.approx(FITS * COST, rel=1e-12)
    assert status.epsilon_spent <= TOTAL * (1 + 1e-12)
    assert all(r.status is ReleaseStatus.DONE for r in led.releases(FP))
    assert led.integrity_check() == []
    led.close()


@pytest.mark.parametrize("shared", [True, False], ids=["one_ledger", "ledger_per_thread"])
def test_ledger_concurrency_threads_never_overspend(url: str, shared: bool) -> None:
    common = Ledger(url) if shared else None
    barrier = threading.Barrier(N_RACERS)
    outcomes: list[str] = []
    lock = threading.Lock()

    def racer(i: int) -> None:
        led = common if common is not None else Ledger(url)
        spend = Spend(event=PureEvent(COST), epsilon=COST, delta=0.0)

        def sample() -> dict[str, Any]:
            time.sleep(0.01)
            return {"q": i}

        barrier.wait(timeout=30)
        try:
            led.release(FP, f"plan-{i}", "schema", [("q", spend)], sample)
            result = "done"
        except BudgetExceededError:
            result = "exceeded"
        except Exception as exc:
            result = f"{type(exc).__name__}: {exc}"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(N_RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert Counter(outcomes) == {"done": FITS, "exceeded": N_RACERS - FITS}
    _check_ledger(url)


def _start_method() -> str:
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def test_ledger_concurrency_processes_never_overspend(url: str) -> None:
    ctx = mp.get_context(_start_method())
    barrier = ctx.Barrier(N_RACERS)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=race_release, args=(url, FP, f"plan-{i}", COST, barrier, results))
        for i in range(N_RACERS)
    ]
    for p in procs:
        p.start()
    got = [results.get(timeout=90) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert all(detail == "" for _, _, detail in got), [d for _, _, d in got if d]
    assert Counter(outcome for _, outcome, _ in got) == {"done": FITS, "exceeded": N_RACERS - FITS}
    assert all(p.exitcode == 0 for p in procs)
    _check_ledger(url)


def test_ledger_concurrency_same_plan_is_sampled_once(url: str) -> None:
    """Two tabs clicking the same plan: one samples, the other gets the stored answers."""
    led = Ledger(url)
    calls: list[int] = []
    barrier = threading.Barrier(4)
    results: list[Any] = []
    lock = threading.Lock()
    spend = Spend(event=PureEvent(COST), epsilon=COST, delta=0.0)

    def sample() -> dict[str, Any]:
        with lock:
            calls.append(1)
        time.sleep(0.3)  # the others arrive while this release is pending
        return {"q": 42}

    def click() -> None:
        barrier.wait(timeout=30)
        rec = led.release(FP, "same-plan", "schema", [("q", spend)], sample)
        with lock:
            results.append(rec)

    threads = [threading.Thread(target=click) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(calls) == 1
    assert sorted(str(r.status) for r in results) == ["done", "reused", "reused", "reused"]
    assert all(r.answers == {"q": 42} for r in results)
    assert led.status(FP).epsilon_spent == pytest.approx(COST)
