"""Racers that open a ledger that does not exist yet, register its one dataset and release
(issue 32). Used by ``test_issue32_new_ledger_race.py`` through :mod:`multiprocessing`
(fork or spawn); importable by module name so the spawn start method can find it.

Each racer opens its own :class:`~planner.ledger.Ledger` (so every one of them may be the
one that creates it), registers the dataset with the same lifetime budget (idempotent),
and releases its own plan. Outcomes: ``"done"``, ``"exceeded"`` (refused for budget), or
``"<ExceptionType>: <message>"`` for anything else.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from planner.core.errors import BudgetExceededError
from planner.ledger import Ledger


def pure(eps: float) -> Any:
    """A pure-DP spend. The ONE import outside planner.ledger/errors/accounts/cli (re-point it
    when the modules move): planner.privacy.accounting.Spend, planner.privacy.events.PureEvent."""
    from planner.privacy.accounting import Spend
    from planner.privacy.events import PureEvent

    return Spend(event=PureEvent(eps), epsilon=eps, delta=0.0)


def race_once(url: str, fingerprint: str, plan_hash: str, epsilon: float, total: float) -> str:
    """One racer: open (perhaps create), register, release; its outcome."""
    try:
        ledger = Ledger(url)
        try:
            ledger.register_dataset(fingerprint, "race", total, 0.0, "basic")

            def sample() -> dict[str, Any]:
                time.sleep(0.01)
                return {"q": plan_hash}

            try:
                rec = ledger.release(fingerprint, plan_hash, "schema", [("q", pure(epsilon))], sample)
                return str(rec.status)
            except BudgetExceededError:
                return "exceeded"
        finally:
            ledger.close()
    except BaseException as exc:  # report, never hang the parent
        return f"{type(exc).__name__}: {exc}"


def race_threads(url: str, fingerprint: str, plans: list[str], epsilon: float, total: float,
                 start: Any = None) -> list[tuple[str, str]]:
    """``len(plans)`` threads of this process, released together; ``start`` (a barrier of
    every process) is passed first, so that every racer of every process opens at once."""
    outcomes: list[tuple[str, str]] = []
    lock = threading.Lock()
    gate = threading.Barrier(len(plans))

    def run(plan: str) -> None:
        gate.wait(timeout=120)
        got = race_once(url, fingerprint, plan, epsilon, total)
        with lock:
            outcomes.append((plan, got))

    if start is not None:
        start.wait(timeout=120)
    threads = [threading.Thread(target=run, args=(p,)) for p in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    return outcomes


def race_process(url: str, fingerprint: str, plans: list[str], epsilon: float, total: float,
                 start: Any, results: Any) -> None:
    """A child process of the race: its threads' outcomes are put on ``results``."""
    try:
        got = race_threads(url, fingerprint, plans, epsilon, total, start)
    except BaseException as exc:
        got = [(p, f"{type(exc).__name__}: {exc}") for p in plans]
    results.put(got)
