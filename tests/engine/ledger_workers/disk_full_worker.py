"""Run one ``planner`` command with the files this process writes capped at a size (a
full disk, as SQLite sees it: ``SQLITE_FULL``, "database or disk is full").

Usage: ``python disk_full_worker.py LIMIT_BYTES COMMAND ARGS...`` (the command line of
``planner``). ``RLIMIT_FSIZE`` caps every file this process writes (the ledger's WAL
among them) at LIMIT_BYTES; ``SIGXFSZ`` is ignored so that a write past the cap fails with
``EFBIG`` instead of killing the process. The exit status is the command's.

Run it with ``PYTHONDONTWRITEBYTECODE=1`` (no bytecode written under the cap).
"""

from __future__ import annotations

import resource
import signal
import sys


def main(argv: list[str]) -> int:
    limit, args = int(argv[0]), argv[1:]
    from planner.cli import main as planner_main  # imported before the cap

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return planner_main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
