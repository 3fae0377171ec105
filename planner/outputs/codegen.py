"""Code export: a standalone Python script and a Jupyter notebook that reproduce a plan and
its release with this project's library.

DP Wizard's strongest feature is the code it hands over; this goes one step further: the
generated code does not re-implement anything, it calls the same functions the app and the
command line call, step by step, so a reader can follow (and an auditor can rerun) exactly
what the app did:

1. the schema (the owner's public declarations) and the questions, written out in full;
2. the plan in its mode (:func:`planner.planning.workload.plan`, ``plan_equal``, ``plan_manual`` or
   ``plan_for_targets``) — data-independent;
3. the accuracy table and one chart (:mod:`planner.outputs.report`, drawn offline as SVG);
4. with ``--release`` only: load the data on a backend, check the budget in the ledger,
   record the spend, sample once, store, print the answers and the ledger's state
   (:func:`planner.release.release`); first, when a column's bounds came from a DP
   suggestion (its ``bounds_source``), read that release in the ledger and check that it
   gave exactly those bounds (:func:`planner.release.bounds.check_bounds_sources`).

Both are generated from one list of steps (:func:`steps`), so the script and the notebook
say the same thing. Everything written into them is public: the schema, the budget, the
questions and the file's name; never a value of the data.
"""

from __future__ import annotations

import pprint
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from planner.planning.plan_spec import PlanSpec
from planner.planning.workload import SplitMode

__all__ = ["Step", "notebook", "notebook_json", "python_script", "steps"]

_SAFE_NAME: Final = re.compile(r"[^A-Za-z0-9._ ()-]")


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the generated code: a heading, an explanation and its code."""

    title: str
    text: str
    code: str


def _literal(value: Any, indent: int = 4) -> str:
    """A Python literal of a JSON-like value (floats in their shortest exact form)."""
    text = pprint.pformat(value, indent=1, width=96, sort_dicts=False)
    return text.replace("\n", "\n" + " " * indent)


_MODE_WORDS: Final = {
    SplitMode.TARGET: "target mode: the least ε meeting every question's target (95%)",
    SplitMode.EQUAL: "equal split: every answer gets the same ε, the most that fits EPSILON under RULE",
    SplitMode.MANUAL: "manual split: the shares typed in the app (ε, or ρ for Gaussian noise); refused when "
                      "they cost more than EPSILON under RULE",
    SplitMode.WEIGHTED: "weighted: the split that makes Σ weight × (error ÷ scale)² smallest; pinned shares are held",
}


def steps(spec: PlanSpec, data: str, dataset_name: str, backend: str | None = None) -> list[Step]:
    """The steps both the script and the notebook are made of (``backend``: the aggregation
    engine the app used, or None for the default)."""
    bounds = _bounds_step(spec)
    return [
        _IMPORTS,
        _schema_step(spec),
        _questions_step(spec),
        _budget_step(spec, data, dataset_name, backend),
        _plan_step(spec),
        _ACCURACY,
        *([] if bounds is None else [bounds]),
        _release_step(bounds is not None),
    ]


#: The imports (the same for every plan).
_IMPORTS: Final = Step("Imports", "This project's library: the same functions the app and the command line call.",
                       "import json\n"
                       "from pathlib import Path\n\n"
                       "from planner.outputs import report\n"
                       "from planner.planning import workload\n"
                       "from planner.planning.plan_spec import PlanSpec, build_plan\n"
                       "from planner.planning.queries import Query\n"
                       "from planner.release import plan_hash, release_file\n"
                       "from planner.data.schema import Schema")


def _schema_step(spec: PlanSpec) -> Step:
    """1. The schema, written out in full."""
    return Step("1. The schema",
                "The owner's public declarations: columns, bounds, categories, who is protected (the privacy "
                "unit and the neighbouring relation) and the approximate public row count. Nothing here is read "
                "from the data.",
                f"SCHEMA = Schema.from_dict({_literal(spec.schema.to_dict(), 4)})")


def _questions_step(spec: PlanSpec) -> Step:
    """2. The questions, each as ``Query.from_dict``."""
    queries = ",\n    ".join(f"Query.from_dict({_literal(q.to_dict(), 4)})" for q in spec.queries)
    return Step("2. The questions",
                "Each query names its statistic, its column, its mechanism and the options its statistic "
                "declares.",
                f"QUERIES = [\n    {queries},\n]")


def _budget_step(spec: PlanSpec, data: str, dataset_name: str, backend: str | None) -> Step:
    """3. The budget: ε, δ, rule, scales, fixed shares, lifetime, the data file and the backend."""
    m = SplitMode(spec.mode)
    shares = spec.pinned if m in (SplitMode.WEIGHTED, SplitMode.MANUAL) else {}
    lifetime = None if spec.lifetime is None else (float(spec.lifetime[0]), float(spec.lifetime[1]))
    return Step("3. The budget",
                f"Mode: **{m.value}** ({_MODE_WORDS[m]}). ε and δ for this release, the composition rule the "
                "dataset's ledger accounts under, the public scales errors are measured against, the fixed shares, "
                "and the dataset's lifetime budget (registered on the first release if the ledger has none). "
                "Together with the schema and the questions they are the plan file the app downloads.",
                f"MODE = {m.value!r}\n"
                f"EPSILON = {float(spec.epsilon)!r}\n"
                f"DELTA = {float(spec.delta)!r}\n"
                f"RULE = {spec.rule.value!r}\n"
                f"ERROR_SCALES = {_literal(dict(spec.error_scales), 15)}\n"
                f"SHARES = {_literal(dict(shares), 9)}\n"
                f"LIFETIME = {lifetime!r}  # (ε, δ) of all releases together, or None\n"
                f"DATA = {data!r}\n"
                f"DATASET_NAME = {dataset_name!r}\n"
                f"BACKEND = None  # the engine of the exact aggregates: None is DuckDB when installed, else pandas"
                f"{'' if not backend else f'; the app used {backend}'} (all give the same aggregates)\n\n"
                "SPEC = PlanSpec(SCHEMA, EPSILON, DELTA, RULE, MODE, tuple(QUERIES), ERROR_SCALES, SHARES, DATASET_NAME,\n"
                "                LIFETIME)")


def _plan_step(spec: PlanSpec) -> Step:
    """4. The plan in its mode (:func:`_plan_call`)."""
    return Step("4. The plan",
                "Data-independent: it reads the schema, the questions and the budget, never the rows. "
                "`build_plan` is the one function that makes a plan in its mode, for the app, the command line "
                "and this script alike.",
                "outcome = build_plan(SPEC)\n"
                "plan: workload.Plan = outcome.plan\n"
                "print(f\"ε spent: {plan.used_epsilon:.6g} under {plan.allocation.rule.value}; \"\n"
                "      f\"plan hash {plan_hash(plan, SCHEMA)[:16]}…\")")


#: 5. The accuracy table and the chart (the same code for every plan).
_ACCURACY: Final = Step("5. The accuracy table and a chart",
                        "Predicted from public facts: the true value is within ± the 95% error 19 times in 20.",
                        "def accuracy_table(plan: workload.Plan) -> str:\n"
                        '    """The plan\'s predictions as a text table."""\n'
                        "    rows = report.accuracy_rows(plan)\n"
                        "    head = f\"{'answer':<28} {'mechanism':<18} {'ε':>10} {'typical error':>14} {'±95% error':>12}  unit\"\n"
                        "    lines = [head, '-' * len(head)]\n"
                        "    for r in rows:\n"
                        "        lines.append(f\"{r['answer'][:28]:<28} {r['mechanism']:<18} {r['epsilon']:>10.4g} \"\n"
                        "                     f\"{r['rmse']:>14.4g} {r['error_bound_95']:>12.4g}  {r['unit']}\")\n"
                        "    return '\\n'.join(lines)\n\n\n"
                        "print(accuracy_table(plan))\n"
                        "chart_svg = report.render_svg(report.accuracy_chart(plan.predictions))")

def _release_step(check_bounds: bool) -> Step:
    """6. The release and 7. the ledger's state; first the bounds' check when the schema's
    bounds came from DP suggestions (:func:`_bounds_step`)."""
    return Step("6. The release (spends the budget)",
                "The same path as `planner release`: the data is read once (every exact aggregate, the "
                "check of every cell and the content's key), then the ledger checks the budget, records the "
                "spend before any noise is drawn, samples once through OpenDP and stores the answers. "
                "Releasing the same plan again returns the stored answers and spends nothing.",
                "def release_plan(data: str = DATA, ledger_url: str | None = None,\n"
                "                 backend_name: str | None = None) -> dict:\n"
                '    """Release the plan on ``data`` and record it in the ledger; the release report as JSON."""\n'
                + ("    check_suggested_bounds(data, ledger_url, backend_name)  # the bounds are the ledger's DP ones\n"
                   if check_bounds else "")
                + "    result = release_file(SPEC, data, ledger_url, backend_name or BACKEND, outcome=outcome)\n"
                "    print(result.to_csv())\n"
                "    # 7. the ledger's state after the release\n"
                "    print(json.dumps({'epsilon_total': result.epsilon_total, 'epsilon_spent': result.epsilon_spent,\n"
                "                      'epsilon_remaining': result.epsilon_remaining}, indent=2))\n"
                "    return result.report_json()")


def _bounds_step(spec: PlanSpec) -> Step | None:
    """Before the release, when the schema's bounds came from DP suggestions: the check of
    their source in the ledger (:func:`planner.release.bounds.check_bounds_sources`),
    called by ``release_plan``; ``None`` when no bounds came from one."""
    cols = [c for c in spec.schema.columns if c.bounds_source is not None]
    if not cols:
        return None
    said = "; ".join(f"`{c.name}`: release #{c.bounds_source.release_id} (ε = {c.bounds_source.epsilon:g}, levels "
                     f"{c.bounds_source.levels[0]:g}, {c.bounds_source.levels[1]:g})" for c in cols
                     if c.bounds_source is not None)
    return Step("Before the release: the bounds' DP source",
                f"These bounds came from DP quantiles, the suggestion of `planner bounds` or the Data page, "
                f"recorded in the ledger ({said}). `release_plan` first reads those releases in the ledger (it "
                "spends nothing) and checks that their quantiles are exactly the declared bounds, so that no "
                "release runs on bounds the ledger does not account for.",
                "def check_suggested_bounds(data: str = DATA, ledger_url: str | None = None,\n"
                "                           backend_name: str | None = None) -> list:\n"
                '    """Check in the ledger that the DP-suggested bounds are the released ones (reads; spends nothing)."""\n'
                "    from planner.release.bounds import check_bounds_sources\n\n"
                "    checks = check_bounds_sources(SPEC, data, ledger_url=ledger_url, backend=backend_name or BACKEND)\n"
                "    for c in checks:\n"
                "        print(f\"bounds of {c.column!r}: [{c.lower:.15g}, {c.upper:.15g}], the DP quantiles of \"\n"
                "              f\"release #{c.release_id}\")\n"
                "    return checks")


_SCRIPT_MAIN: Final = '''

def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DATA, help="the data file (default: %(default)s)")
    parser.add_argument("--release", action="store_true",
                        help="release the plan: spends the dataset's privacy budget (recorded in the ledger)")
    parser.add_argument("--ledger", default=None, help="SQLAlchemy URL of the ledger (default: $PLANNER_LEDGER_URL)")
    parser.add_argument("--backend", choices=("pandas", "duckdb", "spark"), default=None)
    parser.add_argument("--out", default=None, help="write the plan (and the release) as JSON to this file")
    parser.add_argument("--chart", default="accuracy.svg", help="where to write the accuracy chart (SVG)")
    args = parser.parse_args(argv)
    Path(args.chart).write_text(chart_svg, encoding="utf-8")
    out = {"plan_hash": plan_hash(plan, SCHEMA), "plan": plan.to_dict(), "release": None}
    if args.release:
        from planner.core.errors import PlannerError

        try:
            out["release"] = release_plan(args.data, args.ledger, args.backend)
        except PlannerError as exc:  # the engine's own message: what is wrong and how to fix it
            print(f"error: {exc}", file=sys.stderr)
            return 2
    else:
        print("Plan only: nothing was read from the data and no budget was spent (add --release).")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''


def _header(spec: PlanSpec, dataset_name: str, generated: datetime | None) -> str:
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    return (f"Reproduce the privacy plan for {dataset_name} ({SplitMode(spec.mode).value} split, ε = "
            f"{spec.epsilon:g}, {spec.rule.value} rule), and release it, with the Privacy Budget Planner.\n\n"
            f"Generated by the Privacy Budget Planner on {when}. It needs the planner's library installed "
            "(`pip install -e .` in the project's repository; `pip install -e \".[duckdb]\"` for large files).")


def python_script(spec: PlanSpec, data: str, dataset_name: str, *, backend: str | None = None,
                  generated: datetime | None = None) -> str:
    """A standalone Python script that reproduces ``spec``'s plan and, with ``--release``,
    its release (the file name of the data is ``data``; ``--data`` overrides it).

    Run without arguments it prints the accuracy table and writes the chart: no data is read
    and no budget is spent. ``--out FILE`` writes the plan (and the release) as JSON.
    """
    header = _header(spec, _clean(dataset_name), generated)
    doc = (f'"""{header}\n\n'
           "Usage:\n"
           "    python this_script.py                      # the plan and its accuracy: reads no data, spends nothing\n"
           "    python this_script.py --release --data FILE --ledger sqlite:///ledger.db\n"
           "                                               # spends the plan's ε on the dataset, once\n"
           '"""\n\n')
    body = []
    for s in steps(spec, data, _clean(dataset_name), backend):
        text = s.text.replace("**", "")
        comment = "\n".join("# " + line for line in _wrap(f"{s.title}. {text}"))
        body.append(f"{comment}\n{s.code}")
    return "#!/usr/bin/env python3\n" + doc + "\n\n".join(body) + "\n" + _SCRIPT_MAIN


def notebook(spec: PlanSpec, data: str, dataset_name: str, *, backend: str | None = None,
             generated: datetime | None = None) -> Any:
    """A Jupyter notebook (nbformat v4) of the same steps as :func:`python_script`; the
    release cell runs only when ``RELEASE = True`` is set in it."""
    import nbformat.v4 as nbf

    name = _clean(dataset_name)
    cells = [nbf.new_markdown_cell("# " + _header(spec, name, generated)
                                   + " Open it in Jupyter (`pip install jupyter`, then `jupyter notebook`).")]
    for s in steps(spec, data, name, backend):
        cells.append(nbf.new_markdown_cell(f"## {s.title}\n\n{s.text}"))
        cells.append(nbf.new_code_cell(s.code))
    cells.append(nbf.new_code_cell("from IPython.display import SVG, display\n\n"
                                   "display(SVG(chart_svg))"))
    cells.append(nbf.new_markdown_cell("## Release\n\nSet `RELEASE = True` to spend the budget. Running this "
                                       "cell again afterwards returns the stored answers and spends nothing."))
    cells.append(nbf.new_code_cell("RELEASE = False\n"
                                   "if RELEASE:\n"
                                   "    release_report = release_plan()"))
    nb = nbf.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    return nb


def notebook_json(spec: PlanSpec, data: str, dataset_name: str, *, backend: str | None = None,
                  generated: datetime | None = None) -> str:
    """:func:`notebook` as the text of an ``.ipynb`` file (validated by nbformat)."""
    import nbformat

    nb = notebook(spec, data, dataset_name, backend=backend, generated=generated)
    nbformat.validate(nb)
    return str(nbformat.writes(nb))


def _clean(name: str) -> str:
    """A dataset name safe to put in a string literal and a heading (no quotes or newlines)."""
    return _SAFE_NAME.sub("_", name)[:120] or "the dataset"


def _wrap(text: str, width: int = 96) -> list[str]:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    if cur:
        lines.append(cur)
    return lines
