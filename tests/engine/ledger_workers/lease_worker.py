"""A release whose sample() takes a while (the lease tests).

Usage: ``python lease_worker.py URL FINGERPRINT PLAN STARTED SECONDS``

Creates STARTED when sample() begins, sleeps SECONDS inside sample() (its heartbeat keeps
renewing the lease), then prints the outcome as JSON: ``{"outcome": status}`` or
``{"outcome": "LedgerError", "message": ...}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from planner.core.errors import LedgerError
from planner.ledger import Ledger
from planner.privacy.accounting import Spend
from planner.privacy.events import PureEvent


def main(argv: list[str]) -> int:
    url, fingerprint, plan, started, seconds = argv
    ledger = Ledger(url)
    spend = Spend(event=PureEvent(0.25), epsilon=0.25, delta=0.0)

    def sample() -> dict[str, Any]:
        Path(started).write_text("sampling")
        time.sleep(float(seconds))
        return {"q": 7}

    try:
        rec = ledger.release(fingerprint, plan, "schema", [("q", spend)], sample)
        print(json.dumps({"outcome": str(rec.status), "answers": rec.answers}))
    except LedgerError as exc:
        print(json.dumps({"outcome": "LedgerError", "message": str(exc)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
