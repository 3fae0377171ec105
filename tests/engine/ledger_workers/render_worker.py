"""Render a plan file the way the app and the generated code do, in a child process, so a
native abort (SIGABRT in the chart renderer) is seen as the child's return code.

Usage: ``python render_worker.py MODE PLAN.json OUT``

Modes
-----
report     ``planner.outputs.report.plan_report`` of the plan; the HTML is written to OUT
script     ``planner.outputs.codegen.python_script`` of the plan, written to OUT and then run in
           this process as ``python OUT --chart OUT.svg`` (plan only: no data, no spend)
notebook   ``planner.outputs.codegen.notebook_json`` of the plan; its code cells (all but the
           IPython display cell; the release cell keeps ``RELEASE = False``) are written
           to OUT as one Python file and run in this process

Exit status 0: done. 2: the planner refused the plan with a message (a ``PlannerError``,
printed as ``{"error": ...}`` on stderr). 3: the generated code failed (its error on
stderr). Anything else (a negative status: a signal) is a crash.
"""

from __future__ import annotations

import json
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any


def _engine() -> tuple[Any, Any, Any, Any, Any]:
    """The ONE helper importing modules outside planner.ledger/errors/accounts/cli
    (re-point it when the modules move): planner.planning.plan_spec.load_plan_spec,
    planner.outputs.report.plan_report, planner.outputs.codegen.python_script / notebook_json."""
    from planner.core.errors import PlannerError
    from planner.outputs.codegen import notebook_json, python_script
    from planner.outputs.report import plan_report
    from planner.planning.plan_spec import load_plan_spec

    return load_plan_spec, plan_report, python_script, notebook_json, PlannerError


def main(argv: list[str]) -> int:
    mode, plan, out = argv
    load_plan_spec, plan_report, python_script, notebook_json, planner_error = _engine()
    try:
        spec = load_plan_spec(plan)
        name = spec.dataset_name or "survey"
        if mode == "report":
            text = plan_report(spec)
        elif mode == "script":
            text = python_script(spec, "data.csv", name)
        elif mode == "notebook":
            nb = json.loads(notebook_json(spec, "data.csv", name))
            text = "\n\n".join("".join(c["source"]) for c in nb["cells"]
                               if c["cell_type"] == "code" and "IPython" not in "".join(c["source"]))
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    except planner_error as exc:
        print(json.dumps({"error": str(exc)}), file=sys.stderr)
        return 2
    Path(out).write_text(text, encoding="utf-8")
    if mode == "report":
        return 0
    sys.argv = [out, "--chart", out + ".svg"] if mode == "script" else [out]
    try:
        runpy.run_path(out, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (0, None):
            print(f"the generated {mode} exited with {exc.code!r}", file=sys.stderr)
            return 3
    except BaseException:
        traceback.print_exc()
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
