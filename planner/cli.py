"""The command line: JSON in, JSON out.

Subcommands are registered by :func:`build_parser`; each handler returns a JSON-able
object or raises :class:`~planner.core.errors.PlannerError`, which is printed as
``{"error": message}`` on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from planner import __version__
from planner.core.errors import AccountError, PlannerError

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
    _register_planning(sub)
    _register_ledger(sub)


def _register_planning(sub: Any) -> None:
    """The subcommands that need no ledger: validate, plan, compose, dpsgd."""
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

    p = sub.add_parser("dpsgd", help="privacy of a DP-SGD training run under RDP and the optimal accountant; "
                       "or the least σ / most epochs for a target ε")
    p.add_argument("--n", required=True, help="number of training examples N")
    p.add_argument("--batch", default=None, help="expected batch size B (the sampling rate is B/N)")
    p.add_argument("--sampling-rate", default=None, help="sampling rate q instead of --batch")
    p.add_argument("--epochs", default=None, help="passes over the data (steps = ceil(epochs·N/B))")
    p.add_argument("--steps", default=None, help="number of noisy gradient steps instead of --epochs")
    p.add_argument("--sigma", default=None, help="noise multiplier σ (noise std / clipping norm)")
    p.add_argument("--delta", default="1e-5", help="δ of the guarantee (default 1e-5; keep it ≪ 1/N)")
    p.add_argument("--target-epsilon", default=None, help="with --solve: the ε to reach")
    p.add_argument("--solve", choices=("sigma", "epochs"), default=None,
                   help="sigma: the least σ for the target; epochs: the most epochs at --sigma")
    p.add_argument("--scheme", choices=("poisson", "without_replacement"), default="poisson",
                   help="poisson (add/remove neighbours, default) or fixed-size batches without replacement "
                        "(substitute neighbours)")
    p.add_argument("--accountant", choices=("pld", "rdp"), default="pld",
                   help="the accountant the target is met under (default pld, the optimal one)")
    p.set_defaults(handler=_cmd_dpsgd)


def _register_ledger(sub: Any) -> None:
    """The subcommands that read or write the ledger: release, ledger, account, grant."""
    p = sub.add_parser("release", help="make a differentially private release and record it in the ledger")
    p.add_argument("--spec", required=True, help="PLAN.json")
    p.add_argument("--data", required=True, help="the data file")
    p.add_argument("--ledger", default=None, help="SQLAlchemy URL of the ledger (default: $PLANNER_LEDGER_URL)")
    _backend_args(p)
    p.set_defaults(handler=_cmd_release)

    p = sub.add_parser("bounds", help="suggest a numeric column's bounds from DP quantiles over a public coarse "
                       "grid (spends a small ε, recorded in the ledger)")
    p.add_argument("--spec", required=True, help="PLAN.json (schema, rule, dataset name, lifetime budget)")
    p.add_argument("--data", required=True, help="the data file")
    p.add_argument("--column", required=True, help="the numeric column")
    p.add_argument("--magnitude", default=None, help="values up to about this (a log-scale grid from 0; e.g. 1e6)")
    p.add_argument("--signed", action="store_true", help="with --magnitude: values may be negative too")
    p.add_argument("--lower", default=None, help="a public coarse range's lower end (with --upper)")
    p.add_argument("--upper", default=None, help="a public coarse range's upper end (with --lower)")
    p.add_argument("--scale", choices=("log", "linear"), default="log", help="the grid over --lower/--upper")
    p.add_argument("--epsilon", required=True, help="the ε the suggestion spends, e.g. 0.05")
    p.add_argument("--for", dest="purpose", choices=("mean", "sum", "quantile"), default=None,
                   help="what the bounds are for (default: mean): the levels are tuned to a mean or a sum of the "
                        "column at its ε; 'quantile' keeps the fixed levels (0.01 0.99) that quantiles and "
                        "histograms need")
    p.add_argument("--for-epsilon", dest="purpose_epsilon", default=None,
                   help="the ε that mean or sum will spend (default: its share in the plan file, else the plan's "
                        "whole ε)")
    p.add_argument("--levels", nargs=2, default=None, metavar=("LOW", "HIGH"),
                   help="fixed quantile levels of the bounds instead (e.g. 0.01 0.99)")
    p.add_argument("--ledger", default=None, help="SQLAlchemy URL of the ledger (default: $PLANNER_LEDGER_URL)")
    _backend_args(p)
    p.set_defaults(handler=_cmd_bounds)

    p = sub.add_parser("ledger", help="show datasets, budgets and releases recorded in the ledger; "
                       "`planner ledger verify` checks its integrity (exit status 1 on a problem)")
    p.add_argument("action", nargs="?", choices=("show", "verify"), default="show",
                   help="show (default) or verify")
    p.add_argument("--ledger", default=None, help="SQLAlchemy URL of the ledger (default: $PLANNER_LEDGER_URL)")
    p.add_argument("--dataset", default=None, help="a dataset key (ds-…) or content fingerprint")
    p.set_defaults(handler=_cmd_ledger)

    p = sub.add_parser("account", help="local accounts of the organisation (owners only; the first "
                       "account, an owner, may be created on a ledger without accounts)")
    p.add_argument("action", choices=("create", "list", "disable", "passwd"))
    p.add_argument("--ledger", default=None, help="SQLAlchemy URL of the ledger (default: $PLANNER_LEDGER_URL)")
    p.add_argument("--user", default=None, help="the account's name")
    p.add_argument("--role", choices=("owner", "analyst", "viewer"), default=None)
    p.set_defaults(handler=_cmd_account)

    p = sub.add_parser("dataset", help="datasets and their lifetime budgets: `list`, or `declare` a new dataset "
                       "deliberately (owners; its own unique name and budget)")
    p.add_argument("action", choices=("list", "declare", "identify"))
    p.add_argument("--ledger", default=None, help="SQLAlchemy URL of the ledger (default: $PLANNER_LEDGER_URL)")
    p.add_argument("--name", default=None, help="the new dataset's name (unique in the ledger)")
    p.add_argument("--epsilon", default=None, help="its lifetime ε")
    p.add_argument("--delta", default="0", help="its lifetime δ (default 0)")
    p.add_argument("--rule", type=_rule, default=None,
                   help="the composition rule every spend is composed under (basic, rdp, pld, ...: "
                   "planner.privacy.budget.CompositionRule)")
    p.add_argument("--spec", default=None, help="PLAN.json or a schema JSON: the declared schema")
    p.add_argument("--data", default=None, help="declare: the data file (recorded as the first version); "
                   "identify: the file to look up")
    _backend_args(p)
    p.set_defaults(handler=_cmd_dataset)

    p = sub.add_parser("grant", help="grant an analyst a budget (or share with a viewer) on a dataset")
    p.add_argument("--ledger", default=None, help="SQLAlchemy URL of the ledger (default: $PLANNER_LEDGER_URL)")
    p.add_argument("--dataset", required=True, help="the dataset key (ds-…)")
    p.add_argument("--to", required=True, dest="subject", help="a username or an e-mail address (OIDC)")
    p.add_argument("--role", choices=("analyst", "viewer"), required=True)
    p.add_argument("--epsilon", default=None, help="the ε an analyst may spend (a number)")
    p.add_argument("--delta", default=None, help="the δ an analyst may spend (default: the dataset's)")
    p.add_argument("--revoke", action="store_true", help="revoke the subject's grant instead")
    p.set_defaults(handler=_cmd_grant)


def _rule(text: str) -> str:
    """A composition rule's name, checked against the engine's rules (the one list of them)."""
    from planner.privacy.budget import CompositionRule

    try:
        return CompositionRule(text).value
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid rule {text!r}: choose one of {', '.join(r.value for r in CompositionRule)}") from None


def _backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend", choices=("pandas", "duckdb", "spark"), default=None,
        help="aggregation engine (default: duckdb if installed, else pandas)",
    )
    p.add_argument("--spark-master", default=None,
                   help="Spark master URL (default: PLANNER_SPARK_MASTER, else local[*])")


def _cmd_validate(args: argparse.Namespace) -> Any:
    from planner.data.validate import validate_command

    return validate_command(args.data, args.schema, args.backend, args.spark_master)


def _cmd_plan(args: argparse.Namespace) -> Any:
    from planner.planning.plan_spec import plan_command

    return plan_command(args.spec)


def _cmd_compose(args: argparse.Namespace) -> Any:
    from planner.planning.plan_spec import compose_command

    return compose_command(args.spec)


def _cmd_dpsgd(args: argparse.Namespace) -> Any:
    from planner.planning.dpsgd import dpsgd_command

    def num(name: str) -> float | None:
        return _number(getattr(args, name.replace("-", "_")), name)

    return dpsgd_command(
        num("n"), batch=num("batch"), sampling_rate=num("sampling-rate"), epochs=num("epochs"),
        steps=num("steps"), sigma=num("sigma"), delta=num("delta"), target_epsilon=num("target-epsilon"),
        solve=args.solve, scheme=args.scheme, accountant_rule=args.accountant,
    )


def _cmd_release(args: argparse.Namespace) -> Any:
    # The data is read while the release machinery (OpenDP, the ledger, the optimiser) is
    # imported and the plan is made: only the spec is needed to start the scan.
    from planner.data.backends import BackgroundScan, default_backend
    from planner.data.sources import WholeFileCheck, open_cli_source
    from planner.planning.plan_spec import load_plan_spec
    from planner.planning.statistics import plan_requests

    spec = load_plan_spec(args.spec)
    kind = (args.backend or default_backend()).strip().lower()
    # the whole-file checks of a CSV run while the scan reads it (planner.data.sources.WholeFileCheck)
    scan = BackgroundScan(kind, open_cli_source(args.data, defer_check=True), spec.schema,
                          plan_requests(spec.queries, spec.schema), spark_master=args.spark_master)
    try:
        scan.wait_reading(timeout=10.0)  # the imports below would hold the GIL the set-up needs
        from planner.core import special

        # SciPy's compiled special functions without scipy.special's 0.2 s import: safe now,
        # while the only other threads are the scan's and the check's (they never import SciPy)
        special.preload(quiet_threads=(BackgroundScan.THREAD, WholeFileCheck.THREAD))
        from planner.release import cmd_release
    except BaseException:
        scan.cancel()
        raise
    out = cmd_release(spec, args.data, args.ledger, args.backend, args.spark_master, scan=scan)
    from planner.outputs.words import context
    from planner.privacy.budget import SplitMode

    # ε in context: the same words as the app and the HTML report
    out["context"] = context(None if spec.mode is SplitMode.TARGET else spec.epsilon, spec.rule.value)
    return out


def _cmd_bounds(args: argparse.Namespace) -> Any:
    from planner.release.bounds import cmd_bounds

    levels = None if args.levels is None else [_number(v, "levels") for v in args.levels]
    return cmd_bounds(args.spec, args.data, args.column, epsilon=_number(args.epsilon, "epsilon"),
                      levels=levels, magnitude=_number(args.magnitude, "magnitude"), signed=args.signed,
                      lower=_number(args.lower, "lower"), upper=_number(args.upper, "upper"), scale=args.scale,
                      ledger_url=args.ledger, backend=args.backend, purpose=args.purpose,
                      purpose_epsilon=_number(args.purpose_epsilon, "for-epsilon"))


def _cmd_ledger(args: argparse.Namespace) -> Any:
    if args.action == "verify":
        from planner.ledger import Ledger, verify_ledger

        report = verify_ledger(args.ledger)
        if report.ok:  # counts are for owners: the caller is known only on a sound ledger
            led = Ledger(args.ledger)
            try:
                report = led.verify()
            finally:
                led.close()
        else:
            report = report.without_counts()
        return CommandResult(report.to_dict(), EXIT_OK if report.ok else EXIT_PROBLEM)
    from planner.release import cmd_ledger

    return cmd_ledger(args.ledger, args.dataset)


def _new_password() -> str:
    """The new password: ``$PLANNER_NEW_PASSWORD`` or a prompt (never an argument, which
    other users could read in the process list)."""
    import os

    value = os.environ.get("PLANNER_NEW_PASSWORD")
    if value is not None:
        return value
    if not sys.stdin.isatty():
        raise AccountError("set PLANNER_NEW_PASSWORD, or run on a terminal to be asked for the password.")
    import getpass

    first = getpass.getpass("new password: ")
    if getpass.getpass("again: ") != first:
        raise AccountError("the two passwords differ.")
    return first


def _cmd_account(args: argparse.Namespace) -> Any:
    from planner.ledger import Ledger

    led = Ledger(args.ledger)
    try:
        if args.action == "list":
            return {"accounts": [a.to_dict() for a in led.accounts()]}
        if not args.user:
            raise AccountError(f"`planner account {args.action}` needs --user NAME.")
        if args.action == "create":
            if not args.role:
                raise AccountError("`planner account create` needs --role owner|analyst|viewer.")
            return led.create_account(args.user, _new_password(), args.role).to_dict()
        if args.action == "disable":
            return led.disable_account(args.user).to_dict()
        led.set_password(args.user, _new_password())
        return {"user": args.user, "password": "changed"}
    finally:
        led.close()


def _number(text: str | None, name: str) -> float | None:
    from planner.core.strict_json import loads_strict, strict_number

    if text is None:
        return None
    return strict_number(loads_strict(text, f"--{name}"), f"--{name}")


def _cmd_dataset(args: argparse.Namespace) -> Any:
    from planner.release import cmd_dataset

    return cmd_dataset(args.action, args.ledger, name=args.name, epsilon=_number(args.epsilon, "epsilon"),
                       delta=_number(args.delta, "delta"), rule=args.rule, spec=args.spec, data=args.data,
                       backend=args.backend, spark_master=args.spark_master)


def _cmd_grant(args: argparse.Namespace) -> Any:
    from planner.ledger import Ledger

    led = Ledger(args.ledger)
    try:
        if args.revoke:
            led.revoke(args.dataset, args.subject)
            return {"dataset": args.dataset, "subject": args.subject, "revoked": True}
        return led.grant(args.dataset, args.subject, args.role, epsilon=_number(args.epsilon, "epsilon"),
                         delta=_number(args.delta, "delta")).to_dict()
    finally:
        led.close()


#: Exit statuses: 0 success, 1 ``planner ledger verify`` found a problem, 2 a clear error
#: (bad input, refused operation), 3 an internal error (a bug; no details are printed,
#: since they could carry private values; set PLANNER_DEBUG=1 to see the traceback).
EXIT_OK, EXIT_PROBLEM, EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _emit(stream: Any, text: str) -> bool:
    """Write ``text`` and a newline; ``False`` if the reader went away (EPIPE)."""
    try:
        stream.write(text + "\n")
        stream.flush()
    except BrokenPipeError:
        _silence(stream)
        return False
    except (OSError, ValueError):  # closed or unwritable stream: nothing more to say
        return False
    return True


def _silence(stream: Any) -> None:
    """After EPIPE, point the stream at /dev/null so the interpreter's final flush is
    quiet (the recipe of the Python documentation, 'Note on SIGPIPE')."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; print its JSON result on stdout or ``{"error": ...}`` on stderr.

    A reader that closes stdout early (``planner release … | head -c0``) does not turn a
    completed command into a traceback: the work (a release recorded in the ledger) is
    done, the output is dropped and the exit status stays 0.
    """
    import os

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors (argparse prints them)
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    except BrokenPipeError:
        _silence(sys.stdout)
        return EXIT_OK
    handler: Handler = args.handler
    try:
        result = handler(args)
    except PlannerError as exc:
        _emit(sys.stderr, json.dumps({"error": str(exc)}))
        return EXIT_ERROR
    except KeyboardInterrupt:
        _emit(sys.stderr, json.dumps({"error": "interrupted"}))
        return EXIT_INTERRUPTED
    except RecursionError:
        _emit(sys.stderr, json.dumps({"error": "the input nests too deeply to be processed."}))
        return EXIT_ERROR
    except MemoryError:
        _emit(sys.stderr, json.dumps({"error": "out of memory: the input is too large."}))
        return EXIT_ERROR
    except Exception as exc:
        if os.environ.get("PLANNER_DEBUG", "").strip() not in ("", "0"):
            raise
        _emit(sys.stderr, json.dumps({
            "error": f"internal error ({type(exc).__name__}); this is a bug. Its details are not "
                     "shown because they could contain private values; rerun with PLANNER_DEBUG=1 "
                     "on a trusted terminal to see them."
        }))
        return EXIT_INTERNAL
    status = EXIT_OK
    if isinstance(result, CommandResult):
        status, result = result.status, result.payload
    _emit(sys.stdout, json.dumps(result, indent=2, default=str))
    return status


class CommandResult:
    """A handler's JSON payload with a non-zero exit status (e.g. verify found a problem)."""

    __slots__ = ("payload", "status")

    def __init__(self, payload: Any, status: int) -> None:
        self.payload = payload
        self.status = status
