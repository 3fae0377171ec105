"""Plan files both ways, code export and the stakeholder report (Planner and Release pages).

* **Download**: the plan in force as the PLAN.json the command line reads
  (:func:`pages._ui.planning.download_document`; ``planner plan`` on it gives the same
  allocation, ``planner release`` releases the same plan);
* **Upload**: a PLAN.json (from the app or written by hand) restores the session — its
  schema (for an upload or a server file), its queries with their options, mode, ε, δ,
  rule, scales and shares (:func:`restore`);
* **Code**: a Python script and a Jupyter notebook that reproduce the plan and its release
  with the library (``planner.outputs.codegen``);
* **Report**: one self-contained HTML file of the plan or of a release (``planner.outputs.report``).

Downloads are generated when clicked (``st.download_button`` with a callable), from values
captured when the page was drawn: nothing is computed for a button nobody clicks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import streamlit as st

from planner.core.errors import PlanError, PlannerError
from planner.privacy.budget import SplitMode

from . import cached, fmt, planning
from . import state as S

if TYPE_CHECKING:
    from planner.planning.plan_spec import PlanSpec
    from planner.release import ReleaseResult


def slug(name: str) -> str:
    """A file-name-safe form of a dataset name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:60] or "dataset"


# ----------------------------------------------------------------------------- restore
def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    return set(a) == set(b) and all(math.isclose(a[k], b[k], rel_tol=1e-12) for k in a)


def restore(spec: PlanSpec, data: cached.Active) -> list[str]:
    """Make ``spec`` the session's plan on the active dataset; what was done, in words.

    Raises
    ------
    PlanError
        The plan's schema cannot apply to the active dataset (a sample's schema is fixed;
        a file must have every column the plan declares).
    """
    from planner.planning import workload

    ss = st.session_state
    notes: list[str] = []
    fp = data.fingerprint
    if data.schema is None or data.schema.schema_hash() != spec.schema.schema_hash():
        if data.source == "sample":
            raise PlanError(
                f"this plan file declares another schema than the one of {data.name}; a bundled sample's schema "
                "is fixed. Pick the dataset the plan was made for on the Data page, then upload the plan again.")
        absent = [c for c in spec.schema.names if c not in {str(x) for x in data.df.columns}]
        if absent:
            raise PlanError(f"this plan file declares column(s) {', '.join(repr(c) for c in absent[:5])} that {data.name} does not have; pick "
                            "the dataset the plan was made for on the Data page, then upload the plan again.")
        ss[S.SCHEMAS] = dict(ss[S.SCHEMAS], **{fp: spec.schema.to_json()})
        ss[S.DRAFTS] = {k: v for k, v in ss[S.DRAFTS].items() if k != fp}
        notes.append(f"The plan's schema is now the declared schema of {data.name}.")
    mode = SplitMode(spec.mode)
    explicit: dict[str, float] = dict(spec.error_scales)
    if mode is not SplitMode.TARGET:
        # every query at its default public scale is the Planner's "relative errors" switch
        defaults = workload.default_error_scales(spec.queries, spec.schema) or {}
        ss[S.RELATIVE] = bool(explicit) and _same(explicit, defaults)
        if ss[S.RELATIVE]:
            explicit = {}
    rows = [{**S.row_from_query(q, explicit.get(q.id)), **spec.other_mode.get(q.id, {})} for q in spec.queries]
    S.set_workload(rows, fp)
    ss[S.MODE] = mode
    ss[S.EPSILON] = float(spec.epsilon)
    ss[S.DELTA] = float(spec.delta)
    status = planning.lifetime(fp)
    if status is not None and status.rule is not spec.rule:
        notes.append(f"The plan file says {fmt.rule(spec.rule)}, but this dataset's lifetime budget is accounted "
                     f"under {fmt.rule(status.rule)}: the plan in force uses it, so its shares differ "
                     "from the file's.")
    else:
        ss[S.RULE] = spec.rule
    if mode is SplitMode.WEIGHTED:
        ss[S.PINS] = dict(spec.pinned)
    elif mode is SplitMode.MANUAL:
        ss[S.MANUAL] = dict(spec.pinned)
    ss[S.LAST_RESULT] = None
    ss[S.CONFIRM_OPEN] = False
    ss[S.CONFIRMED] = False
    return notes


def upload_form(data: cached.Active, page: str) -> None:
    """A file uploader that restores a PLAN.json into the session."""
    from planner.planning import plan_spec

    ss = st.session_state
    up = st.file_uploader("Restore a plan file (PLAN.json)", type=["json"], key=f"{page}:plan_upload",
                          help="A plan downloaded from this app, or written for `planner plan`: its queries, "
                               "options, mode, budget, rule, scales and shares replace the current plan.")
    if up is not None and up.file_id != ss[S.PLAN_FILE_ID]:
        ss[S.PLAN_FILE_ID] = up.file_id
        try:
            spec = plan_spec.loads_plan_spec(up.getvalue(), f"plan file {up.name!r}")
            notes = restore(spec, data)
        except PlannerError as exc:
            ss[S.PLAN_FILE_NOTE] = {"page": page, "error": f"{up.name} was not applied: {exc}"}
        else:
            ss[S.PLAN_FILE_NOTE] = {"page": page, "ok": (
                f"Restored {up.name}: {len(spec.queries)} queries, {S.MODE_LABELS[SplitMode(spec.mode)]}, "
                f"ε = {spec.epsilon:g}, δ = {spec.delta:g}, {fmt.rule(spec.rule)}.") + "".join(" " + n for n in notes)}
        st.rerun()  # the sidebar (drawn before this page) shows the restored plan
    note = ss[S.PLAN_FILE_NOTE]
    if note and note.get("page") == page:
        ss[S.PLAN_FILE_NOTE] = None  # shown once: the next change to the plan makes it stale
        if note.get("error"):
            st.error(note["error"])
        else:
            st.success(note["ok"])


# ----------------------------------------------------------------------------- downloads
def _deferred(make: Callable[[], str]) -> Callable[[], str]:
    """A download's content, made on click; an engine error becomes a short text file
    saying what went wrong (a download cannot show a message on the page)."""
    def run() -> str:
        try:
            return make()
        except PlannerError as exc:
            return f"The file could not be made: {exc}\n"
    return run


def downloads(data: cached.Active, view: planning.PlanView, page: str,
              release: ReleaseResult | None = None) -> None:
    """The plan file, the script, the notebook and the report, as download buttons."""
    from planner.outputs import codegen, report
    from planner.planning import plan_spec
    from planner.planning.plan_spec import PlanOutcome

    name = slug(data.name)
    doc = planning.download_document(view)
    outcome = PlanOutcome(view.plan, view.target)

    def spec() -> PlanSpec:  # parsed on click only (an equal split re-solves when it is read)
        return plan_spec.parse_plan_spec(doc)

    led = cached.ledger() if view.settings.lifetime is not None else None  # acting for this session
    fp = data.ledger_key

    def ledger_state() -> tuple[Any, list[Any]]:  # read on click: after the page's own release, if any
        if led is None:
            return None, []
        try:
            return led.status(fp), led.history(fp)
        except PlannerError:
            return None, []

    def make_report() -> str:
        status, history = ledger_state()
        return report.plan_report(spec(), outcome=outcome, status=status, history=history, release=release)
    path, backend = cached.data_path(data), cached.backend_name()
    c1, c2, c3, c4 = st.columns(4)
    c1.download_button("Plan file (PLAN.json)", plan_spec.dump_plan_spec(doc), file_name=f"plan-{name}.json",
                       mime="application/json", key=f"{page}:dl_plan", icon=":material/description:",
                       help="The plan as `planner plan --spec` and `planner release --spec` read it; upload it "
                            "here to restore this plan.", on_click="ignore")
    c2.download_button("Python script", _deferred(lambda: codegen.python_script(spec(), path, data.name,
                                                                                  backend=backend)),
                       file_name=f"plan-{name}.py", mime="text/x-python", key=f"{page}:dl_script",
                       icon=":material/code:", on_click="ignore",
                       help="Reproduces this plan (and, with --release, the release) with the planner's library.")
    c3.download_button("Jupyter notebook", _deferred(lambda: codegen.notebook_json(spec(), path, data.name,
                                                                                     backend=backend)),
                       file_name=f"plan-{name}.ipynb", mime="application/x-ipynb+json", key=f"{page}:dl_notebook",
                       icon=":material/menu_book:", on_click="ignore",
                       help="The same steps as the script, as a notebook.")
    what = "release" if release is not None else "plan"
    c4.download_button(f"Report of the {what} (HTML)",
                       _deferred(make_report),
                       file_name=f"{what}-report-{name}.html", mime="text/html", key=f"{page}:dl_report",
                       icon=":material/summarize:", on_click="ignore",
                       help="One self-contained HTML file for stakeholders: questions, ε per answer, predicted "
                            "accuracy with charts, the rule and its alternatives, the guarantee in plain words, "
                            "the ledger." + (" With the released values." if release is not None else ""))
