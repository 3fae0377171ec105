"""The command line: JSON in, JSON out.

Subcommands are registered by :func:`build_parser`; each handler returns a JSON-able
object or raises :class:`~planner.errors.PlannerError`, which is printed as
``{"error": message}`` on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from planner import __version__
from planner.errors import PlannerError

Handler = Callable[[argparse.Namespace], Any]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="planner",
        description="Privacy Budget Planner: plan, check and make differentially private releases.",
    )
    parser.add_argument("--version", action="version", version=f"planner {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _register(sub)
    return parser


def _register(sub: Any) -> None:
    """Register subcommands; each sets ``handler`` via ``set_defaults``."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        result = handler(args)
    except PlannerError as exc:
        print(json.dumps({"error": str(exc)}), file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str))
    return 0
