"""A release that SIGKILLs its own process at a chosen moment (crash-safety tests).

Usage: ``python crash_worker.py MODE URL FINGERPRINT PLAN MARKER``

Modes
-----
kill_before_commit   die inside the spend transaction, before it commits
kill_in_sample       die inside sample(): spend committed, no answers
kill_after_answers   die right after the answers commit, before release() returns
rerun                release the same plan again (sample() creates MARKER) and print
                     the outcome and the budget status as JSON
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from planner.core.errors import LedgerError
from planner.ledger import Ledger
from planner.privacy.accounting import Spend
from planner.privacy.events import PureEvent

EPSILON = 0.25


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    mode, url, fingerprint, plan, marker = argv
    ledger = Ledger(url)
    spend = Spend(event=PureEvent(EPSILON), epsilon=EPSILON, delta=0.0)
    sampled = {"yes": False}

    def sample() -> dict[str, Any]:
        sampled["yes"] = True
        Path(marker).write_text("sampled")
        if mode == "kill_in_sample":
            _die()
        return {"q": 12.5}

    if mode == "kill_before_commit":
        event.listen(Session, "before_commit", lambda _s: _die())
    elif mode == "kill_after_answers":
        event.listen(Session, "after_commit", lambda _s: _die() if sampled["yes"] else None)

    if mode == "rerun":
        try:
            rec = ledger.release(fingerprint, plan, "schema", [("q", spend)], sample)
            outcome: dict[str, Any] = {"outcome": str(rec.status), "answers": rec.answers}
        except LedgerError as exc:
            outcome = {"outcome": "LedgerError", "message": str(exc)}
        outcome["status"] = ledger.status(fingerprint).to_dict()
        outcome["releases"] = [str(r.status) for r in ledger.releases(fingerprint)]
        print(json.dumps(outcome))
        return 0

    ledger.release(fingerprint, plan, "schema", [("q", spend)], sample)
    return 3  # not reached in the kill modes


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
