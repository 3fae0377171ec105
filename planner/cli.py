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
    p = sub.add_parser("validate", help="check a data file against a schema; print per-column counts")
    p.add_argument("--data", required=True, help="CSV, TSV or Parquet file")
    p.add_argument("--schema", required=True, help="schema JSON")
    _backend_args(p)
    p.set_defaults(handler=_cmd_validate)

    p = sub.add_parser("plan", help="split a total budget across a workload (JSON in, JSON out)")
    p.add_argument("--spec", required=True, help="PLAN.json: schema, budget, queries")
    p.set_defaults(handler=_cmd_plan)

    p = sub.add_parser("compose", help="total (ε, δ) of a list of mechanisms under every rule")
    p.add_argument("--spec", required=True, help='MECHS.json: {"delta": ..., "mechanisms": [...]}')
    p.set_defaults(handler=_cmd_compose)

    p = sub.add_parser("release", help="make a differentially private release and record it in the ledger")
    p.add_argument("--spec", required=True, help="PLAN.json")
    p.add_argument("--data", required=True, help="the data file")
    p.add_argument("--ledger", default=None, help="SQLAlchemy URL of the ledger (default: $PLANNER_LEDGER_URL)")
    _backend_args(p)
    p.set_defaults(handler=_cmd_release)

    p = sub.add_parser("ledger", help="show datasets, budgets and releases recorded in the ledger")
    p.add_argument("--ledger", default=None, help="SQLAlchemy URL of the ledger (default: $PLANNER_LEDGER_URL)")
    p.add_argument("--dataset", default=None, help="a dataset fingerprint")
    p.set_defaults(handler=_cmd_ledger)


def _backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend", choices=("pandas", "duckdb", "spark"), default=None,
        help="aggregation engine (default: duckdb if installed, else pandas)",
    )
    p.add_argument("--spark-master", default=None, help="Spark master URL (default local[*])")


def _cmd_validate(args: argparse.Namespace) -> Any:
    from planner.validate import validate_command

    return validate_command(args.data, args.schema, args.backend, args.spark_master)


def _cmd_plan(args: argparse.Namespace) -> Any:
    from planner.plan_spec import plan_command

    return plan_command(args.spec)


def _cmd_compose(args: argparse.Namespace) -> Any:
    from planner.plan_spec import compose_command

    return compose_command(args.spec)


def _cmd_release(args: argparse.Namespace) -> Any:
    # The data is read while the release machinery (OpenDP, the ledger, the optimiser) is
    # imported and the plan is made: only the spec is needed to start the scan.
    from planner.backends import BackgroundScan, default_backend
    from planner.plan_spec import load_plan_spec
    from planner.sources import open_cli_source

    spec = load_plan_spec(args.spec)
    kind = (args.backend or default_backend()).strip().lower()
    scan = BackgroundScan(kind, open_cli_source(args.data), spec.schema, spec.queries,
                          spark_master=args.spark_master)
    try:
        from planner.release import cmd_release
    except BaseException:
        scan.cancel()
        raise
    return cmd_release(args.spec, args.data, args.ledger, args.backend, args.spark_master, scan=scan)


def _cmd_ledger(args: argparse.Namespace) -> Any:
    from planner.release import cmd_ledger

    return cmd_ledger(args.ledger, args.dataset)


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
