"""One release in a child process, started together with its rivals by a barrier.

Used by ``test_ledger_concurrency.py`` through :mod:`multiprocessing` (fork or spawn);
importable by module name so the spawn start method can find it.
"""

from __future__ import annotations

import time
from typing import Any

from planner.core.errors import BudgetExceededError
from planner.ledger import Ledger
from planner.privacy.accounting import Spend
from planner.privacy.events import PureEvent


def race_release(
    url: str, fingerprint: str, plan_hash: str, epsilon: float, barrier: Any, results: Any
) -> None:
    """Open the ledger, wait for every rival, release one plan, report the outcome."""
    outcome = "error"
    detail = ""
    try:
        ledger = Ledger(url)
        spend = Spend(event=PureEvent(epsilon), epsilon=epsilon, delta=0.0)

        def sample() -> dict[str, Any]:
            time.sleep(0.01)  # widen the window between the spend commit and the answers
            return {"q": plan_hash}

        barrier.wait(timeout=60)
        try:
            rec = ledger.release(fingerprint, plan_hash, "schema", [("q", spend)], sample)
            outcome = str(rec.status)
        except BudgetExceededError:
            outcome = "exceeded"
        ledger.close()
    except BaseException as exc:  # report, never hang the parent
        detail = f"{type(exc).__name__}: {exc}"
    results.put((plan_hash, outcome, detail))
