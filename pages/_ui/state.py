"""Every session-state key the app uses, in one place, and the rule that keeps them.

Streamlit deletes a widget's state when the page that draws the widget is not rendered
(measured with Streamlit 1.67). So the owner's choices live under **durable keys**
(prefix ``keep.``) that no widget uses; every widget has its own key per page
(:func:`widget_key`), is seeded from the durable value before it is drawn, and writes
back in ``on_change`` (:func:`bind`). No page resets another page's choices, and a value
shown anywhere (sidebar, Planner, Release) is read from the same durable key.

Call :func:`init_state` at the top of ``app.py`` and of every page script: it only sets
keys that are missing, so reruns and deep links never reset the owner's work.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from planner.data.schema import ColumnKind
from planner.planning.mechanisms.base import MechanismName
from planner.planning.queries import QueryKind
from planner.privacy.budget import CompositionRule, SplitMode

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = ROOT / "data"

#: Bundled samples: display name -> (csv path, schema path).
SAMPLES: dict[str, tuple[Path, Path]] = {
    "census": (DATA_DIR / "census.csv", DATA_DIR / "census.schema.json"),
    "survey": (DATA_DIR / "survey.csv", DATA_DIR / "survey.schema.json"),
}

#: Prefix of every durable key: no widget key ever starts with it.
KEEP = "keep."

# --- data ---------------------------------------------------------------------------
#: The active dataset: {"source": "sample", "sample": name} | {"source": "upload"} |
#: {"source": "server", "file": relative path}. It changes only when the owner picks another.
ACTIVE = "keep.data.active"
PICKER = "keep.data.picker"  # which picker the Data page shows: "sample", "upload" or "server"
UPLOAD_NAME = "keep.data.upload_name"  # file name of the active upload (or None)
UPLOAD_BYTES = "keep.data.upload_bytes"  # the uploaded bytes (kept for the cached loader)
UPLOAD_FILE_ID = "keep.data.upload_file_id"  # the uploader's id of the last file handled
UPLOADER_VERSION = "keep.data.uploader_version"  # bumped to clear the uploader widget
UPLOAD_ERROR = "keep.data.upload_error"  # message of the last rejected upload (shown once, on Data)
SCHEMAS = "keep.data.schemas"  # {fingerprint: schema JSON} declared for uploads and server files
DRAFTS = "keep.data.drafts"  # {fingerprint: schema draft} the owner is typing on the Data page
PENDING = "keep.data.pending_switch"  # a dataset switch waiting for the owner's go-ahead
BACKEND = "keep.data.backend"  # the engine computing a release's exact aggregates (None: the default)

# --- queries ------------------------------------------------------------------------
WORKLOAD = "keep.queries.workload"  # list of dicts (id, kind, column, mechanism, weight, target, scale,
#                                     options: {the statistic's own options})
WORKLOAD_ORIGIN = "keep.queries.origin"  # the default the workload started from (edit detection)
WORKLOAD_FP = "keep.queries.fingerprint"  # the dataset the workload belongs to
EDITOR_VERSION = "keep.queries.editor_version"  # bumped when the workload is replaced
BUILDER = "keep.queries.builder"  # the query builder's draft (pages._ui.builder)

# --- planner ------------------------------------------------------------------------
EPSILON = "keep.plan.epsilon"  # ε of the next release (weighted mode)
DELTA = "keep.plan.delta"
RULE = "keep.plan.rule"  # the what-if rule until the dataset's lifetime budget fixes it
MODE = "keep.plan.mode"  # "weighted", "equal", "manual" or "target" (planner.planning.workload.SplitMode)
RELATIVE = "keep.plan.relative"  # measure errors relative to a public scale
PINS = "keep.plan.pins"  # {item id: fixed share θ} (ε, or ρ for Gaussian noise), weighted mode
MANUAL = "keep.plan.manual"  # {item id: share θ} of the manual split
PLAN_FILE_ID = "keep.plan.file_id"  # the uploader's id of the last plan file applied
PLAN_FILE_NOTE = "keep.plan.file_note"  # what restoring the last plan file did (shown once, on the Planner)
SHOW_CURVE = "keep.plan.show_curve"  # compute the rules-across-ε comparison

# --- accuracy -----------------------------------------------------------------------
ACC_QUERY = "keep.acc.query"
ACC_EPS = "keep.acc.epsilon"
ACC_DATA_VIEW = "keep.acc.data_dependent"
ACC_ALPHA = "keep.acc.alpha"
ACC_SIM = "keep.acc.simulation"  # last Monte Carlo check: {"key": inputs, "rows": [...]} (owner only)

# --- release ------------------------------------------------------------------------
CONFIRM_OPEN = "keep.release.confirm_open"  # the confirm dialog is shown
CONFIRMED = "keep.release.confirmed"  # the owner confirmed (AppTest sets this directly)
LAST_RELEASE_ID = "keep.release.last_id"
LAST_RESULT = "keep.release.last_result"
RELEASE_ERROR = "keep.release.error"

# --- ledger -------------------------------------------------------------------------
LEDGER_DATASET = "keep.ledger.dataset"
NOTICE = "keep.notice"  # a one-off success message for the next run ({"page": ..., "text": ...})

#: The engine's composition rules, as enums (``planner.privacy.budget.CompositionRule``), in the
#: rule registry's order (``planner.privacy.accountants.RULES`` checks the two agree): the optimal accountant (``pld``, privacy loss distributions) last.
RULES: tuple[CompositionRule, ...] = tuple(CompositionRule)
#: The split modes, as enums (``planner.privacy.budget.SplitMode``).
MODES: tuple[SplitMode, ...] = tuple(SplitMode)
MODE_LABELS: dict[SplitMode, str] = {SplitMode.WEIGHTED: "optimal split", SplitMode.EQUAL: "equal split",
                                     SplitMode.MANUAL: "manual split", SplitMode.TARGET: "meet targets"}


def split_mode(value: object) -> SplitMode:
    """The split mode a durable value names (:data:`MODE`), the optimal split when it names none."""
    return SplitMode(str(value)) if value in MODES else SplitMode.WEIGHTED

CENSUS_WORKLOAD: list[dict[str, Any]] = [
    {"id": "people", "kind": "count", "column": None, "mechanism": "laplace", "weight": 1.0, "target": 500.0},
    {"id": "income_total", "kind": "sum", "column": "income", "mechanism": "laplace", "weight": 1.0, "target": 2.0e7},
    {"id": "income_mean", "kind": "mean", "column": "income", "mechanism": "laplace", "weight": 2.0, "target": 1000.0},
    {"id": "age_median", "kind": "median", "column": "age", "mechanism": "exponential", "weight": 1.0, "target": 0.01},
    {"id": "region_counts", "kind": "histogram", "column": "region", "mechanism": "laplace", "weight": 1.0, "target": 500.0},
    {"id": "education_mode", "kind": "mode", "column": "education", "mechanism": "exponential", "weight": 1.0, "target": 500.0},
    {"id": "smoker_share", "kind": "proportion", "column": "smoker", "mechanism": "laplace", "weight": 1.0, "target": 0.01},
]

SURVEY_WORKLOAD: list[dict[str, Any]] = [
    {"id": "respondents", "kind": "count", "column": None, "mechanism": "laplace", "weight": 1.0, "target": 50.0},
    {"id": "doping_share", "kind": "proportion", "column": "used_doping", "mechanism": "laplace", "weight": 2.0, "target": 0.1},
    {"id": "sport_counts", "kind": "histogram", "column": "sport", "mechanism": "laplace", "weight": 1.0, "target": 50.0},
    {"id": "hours_mean", "kind": "mean", "column": "training_hours", "mechanism": "laplace", "weight": 1.0, "target": 2.0},
]

GENERIC_WORKLOAD: list[dict[str, Any]] = [
    {"id": "rows", "kind": "count", "column": None, "mechanism": "laplace", "weight": 1.0, "target": None},
]

WORKLOAD_COLUMNS = ("id", "kind", "column", "mechanism", "weight", "target", "scale", "options")
#: The fields of a workload row that are not the statistic's own options.
COMMON = ("id", "kind", "column", "mechanism", "weight", "target", "scale")


def default_workload(sample: str | None) -> list[dict[str, Any]]:
    """A sensible starting workload for a bundled sample (a bare count otherwise)."""
    src = {"census": CENSUS_WORKLOAD, "survey": SURVEY_WORKLOAD}.get(sample or "", GENERIC_WORKLOAD)
    return copy.deepcopy(src)


def starter_workload(schema_dict: dict[str, Any]) -> list[dict[str, Any]]:
    """A first workload for an uploaded table: the row count and one statistic per declared
    column (mean of a numeric column when a public row count is declared, else its sum;
    the histogram of a categorical one; the share of a boolean one). A starting point the
    owner edits on the Queries page; it does no arithmetic and reads no data."""
    rows = copy.deepcopy(GENERIC_WORKLOAD)
    has_n = schema_dict.get("public_n") is not None
    for col in schema_dict.get("columns", []):
        name, kind = col["name"], col["kind"]
        stat: QueryKind | None
        if kind == ColumnKind.NUMERIC:
            stat = QueryKind.MEAN if has_n else QueryKind.SUM
        elif kind == ColumnKind.CATEGORICAL:
            stat = QueryKind.HISTOGRAM
        elif kind == ColumnKind.BOOLEAN:
            stat = QueryKind.PROPORTION if has_n else None
        else:
            stat = None
        if stat is not None:
            rows.append({"id": f"{name}_{stat.value}", "kind": stat.value, "column": name,
                         "mechanism": MechanismName.LAPLACE.value,
                         "weight": 1.0, "target": None})
    return rows


_DEFAULTS: dict[str, Any] = {
    ACTIVE: {"source": "sample", "sample": "census"},
    PICKER: "sample",
    UPLOAD_NAME: None,
    UPLOAD_BYTES: None,
    UPLOAD_FILE_ID: None,
    UPLOADER_VERSION: 0,
    UPLOAD_ERROR: None,
    SCHEMAS: {},
    DRAFTS: {},
    PENDING: None,
    WORKLOAD_FP: None,
    EDITOR_VERSION: 0,
    EPSILON: 1.0,
    DELTA: 1e-6,
    RULE: CompositionRule.RDP,
    MODE: SplitMode.WEIGHTED,
    RELATIVE: True,
    PINS: {},
    MANUAL: {},
    PLAN_FILE_ID: None,
    PLAN_FILE_NOTE: None,
    BACKEND: None,
    SHOW_CURVE: False,
    ACC_QUERY: None,
    ACC_EPS: 1.0,
    ACC_DATA_VIEW: False,
    ACC_ALPHA: None,
    ACC_SIM: None,
    CONFIRM_OPEN: False,
    CONFIRMED: False,
    LAST_RELEASE_ID: None,
    LAST_RESULT: None,
    RELEASE_ERROR: None,
    LEDGER_DATASET: None,
    NOTICE: None,
}


def init_state() -> None:
    """Set every missing durable key to its default (idempotent)."""
    ss = st.session_state
    for key, value in _DEFAULTS.items():
        if key not in ss:
            ss[key] = copy.deepcopy(value)
    if WORKLOAD not in ss:
        active = ss[ACTIVE]
        ss[WORKLOAD] = default_workload(active.get("sample") if active.get("source") == "sample" else None)
    if WORKLOAD_ORIGIN not in ss:
        ss[WORKLOAD_ORIGIN] = copy.deepcopy(ss[WORKLOAD])


# ----------------------------------------------------------------------------- widgets
def widget_key(durable: str, page: str) -> str:
    """The key of the widget that shows ``durable`` on ``page`` (never a durable key)."""
    return f"{page}:{durable.removeprefix(KEEP)}"


def _write_back(wk: str, durable: str, then: Callable[[], None] | None) -> None:
    st.session_state[durable] = copy.deepcopy(st.session_state[wk])
    if then is not None:
        then()


def learned_key(name: str) -> str:
    """The durable key under which the Learn control ``name`` keeps its value."""
    return f"{KEEP}learn.{name}"


def learned(name: str, default: Any, options: Sequence[Any] | None = None) -> dict[str, Any]:
    """Keyword arguments for a Learn demo's control that keeps its value across pages.

    The widget keeps its own key ``name``; the value lasts under ``keep.learn.<name>``
    (a key no widget uses), seeded with ``default`` the first time, exactly as
    :func:`bind` does for the planning pages. Pass no ``value=``/``index=``/``default=``.
    """
    durable = learned_key(name)
    ss = st.session_state
    if durable not in ss:
        ss[durable] = copy.deepcopy(default)
    if options is not None and ss[durable] not in list(options):
        ss[durable] = copy.deepcopy(default)
    ss[name] = copy.deepcopy(ss[durable])
    return {"key": name, "on_change": _write_back, "args": (name, durable, None)}


def bind(durable: str, page: str, *, options: Sequence[Any] | None = None,
         then: Callable[[], None] | None = None) -> dict[str, Any]:
    """Keyword arguments that make a widget a view of a durable value.

    Seeds the widget's own key from the durable value (so the widget shows it, also after
    a visit to another page deleted the widget's state) and writes the widget's value back
    in ``on_change``; ``then`` runs after the write. Pass ``options`` for a choice widget:
    a durable value that is not an option leaves the widget at its first option. Never pass
    ``value=``/``index=`` as well (Streamlit warns about two sources of a value).
    """
    ss = st.session_state
    wk = widget_key(durable, page)
    value = ss[durable]
    if options is None or value in list(options):
        ss[wk] = copy.deepcopy(value)
    return {"key": wk, "on_change": _write_back, "args": (wk, durable, then)}


# ----------------------------------------------------------------------------- workload
def _canonical(rows: list[dict[str, Any]]) -> str:
    return json.dumps([{k: r.get(k) for k in WORKLOAD_COLUMNS} for r in normal_rows(clean_rows(rows))],
                      sort_keys=True, default=str)


def same_workload(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """True when two workloads hold the same queries (blank rows and formatting aside)."""
    return _canonical(a) == _canonical(b)


def workload_edited() -> bool:
    """True when the workload differs from the default it started from."""
    ss = st.session_state
    return _canonical(ss[WORKLOAD]) != _canonical(ss[WORKLOAD_ORIGIN])


def set_workload(rows: list[dict[str, Any]], fingerprint: str | None) -> None:
    """Replace the workload (a new dataset, a reset): it becomes the new unedited origin."""
    ss = st.session_state
    ss[WORKLOAD] = copy.deepcopy(rows)
    ss[WORKLOAD_ORIGIN] = copy.deepcopy(rows)
    ss[WORKLOAD_FP] = fingerprint
    ss[EDITOR_VERSION] += 1
    ss[PINS] = {}
    ss[MANUAL] = {}
    ss[ACC_QUERY] = None
    ss[ACC_SIM] = None


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def clean_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Editor rows → query rows: blank cells dropped, weight/target/scale as floats (a cell
    that is not a number is kept as typed, for the engine to name), empty options dropped."""
    out = []
    for r in rows:
        d: dict[str, Any] = {}
        for k, v in r.items():
            if _blank(v) or (k == "options" and v == {}):
                continue
            if k in ("weight", "target", "scale") and isinstance(v, (int, float)) and not isinstance(v, bool):
                d[k] = float(v)
            else:
                d[k] = v.strip() if isinstance(v, str) else v
        if d:
            out.append(d)
    return out


def normal_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with every option under ``options`` (a row may carry options at its top level,
    as the flat JSON form of a query does)."""
    out = []
    for r in rows:
        d = {k: v for k, v in r.items() if k in COMMON}
        opts = r.get("options")
        if isinstance(opts, str):
            from planner.core.errors import PlannerError
            from planner.core.strict_json import loads_strict

            try:
                parsed = loads_strict(opts, "options") if opts.strip() else {}
            except PlannerError:
                parsed = None  # kept as typed: query_dicts names the problem
            if isinstance(parsed, dict):
                opts = parsed
        extra = {k: v for k, v in r.items() if k not in COMMON and k != "options"}
        if isinstance(opts, dict):
            extra = {**extra, **opts}
        elif opts is not None:
            d["options"] = opts  # text that is not a JSON object: query_dicts names the problem
        if extra:
            d["options"] = extra if "options" not in d else d["options"]
        out.append(d)
    return out


def options_text(options: Any) -> str:
    """A row's options as the JSON the table shows (``""`` for none)."""
    if options is None or options == {}:
        return ""
    if isinstance(options, str):
        return options
    return json.dumps(options, sort_keys=True, ensure_ascii=False)


def query_dicts(rows: list[dict[str, Any]], mode: SplitMode | str) -> list[dict[str, Any]]:
    """The flat JSON form of each query (``planner.planning.queries.Query.from_dict``): options
    inline, no ``scale``; the target in target mode, the weight otherwise.

    Raises
    ------
    QueryError
        A row's options are not a JSON object (the message names the query).
    """
    from planner.core.errors import QueryError
    from planner.core.strict_json import loads_strict

    drop = "weight" if SplitMode(mode) is SplitMode.TARGET else "target"
    out = []
    for r in normal_rows(clean_rows(rows)):
        opts = r.get("options") or {}
        if isinstance(opts, str):
            try:
                opts = loads_strict(opts, f"options of query {r.get('id')!r}", error=QueryError)
            except QueryError as exc:
                raise QueryError(f"{exc} Write them as a JSON object, e.g. {{\"alphas\": [0.1, 0.9]}}.") from None
        if not isinstance(opts, dict):
            raise QueryError(f"query {r.get('id')!r}: the options must be a JSON object such as "
                             '{"alphas": [0.1, 0.9]}.')
        clash = sorted(set(opts) & set(COMMON))
        if clash:
            raise QueryError(f"query {r.get('id')!r}: {clash} are columns of the table, not options; "
                             "remove them from the options.")
        d = {k: v for k, v in r.items() if k not in ("options", "scale", drop)}
        out.append({**d, **opts})
    return out


def row_scales(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The public scales typed for some queries (``scale`` column)."""
    return {str(r["id"]): float(r["scale"]) for r in clean_rows(rows)
            if "id" in r and isinstance(r.get("scale"), float)}


def row_from_query(q: Any, scale: float | None = None) -> dict[str, Any]:
    """A workload row of a :class:`planner.planning.queries.Query` (its options nested)."""
    d = q.to_dict()
    row = {k: d.get(k) for k in ("id", "kind", "column", "mechanism", "weight", "target")}
    opts = {k: v for k, v in d.items() if k not in COMMON}
    row["scale"] = scale
    row["options"] = opts
    return row


def apply_editor_changes(rows: list[dict[str, Any]], changes: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows a ``st.data_editor`` shows: ``rows`` with its recorded edits applied.

    ``changes`` is the editor's state ``{"edited_rows": {i: {col: value}}, "added_rows":
    [{col: value}], "deleted_rows": [i]}`` (row positions refer to ``rows``).

    Examples
    --------
    >>> apply_editor_changes([{"id": "a", "weight": 1.0}, {"id": "b", "weight": 1.0}],
    ...     {"edited_rows": {"0": {"weight": 10.0}}, "added_rows": [{"id": "c"}], "deleted_rows": [1]})
    [{'id': 'a', 'weight': 10.0}, {'id': 'c'}]
    """
    out = [dict(r) for r in rows]
    for i, edit in (changes.get("edited_rows") or {}).items():
        idx = int(i)
        if 0 <= idx < len(out):
            out[idx].update(edit)
    deleted = {int(i) for i in changes.get("deleted_rows") or []}
    out = [r for i, r in enumerate(out) if i not in deleted]
    out += [dict(r) for r in changes.get("added_rows") or []]
    return out


def notice(page: str, text: str) -> None:
    """Leave a success message for the next run of ``page`` (shown once)."""
    st.session_state[NOTICE] = {"page": page, "text": text}


def pop_notice(page: str) -> str | None:
    """The message left for ``page``, removed so that it shows once."""
    ss = st.session_state
    n = ss.get(NOTICE)
    if n and n.get("page") == page:
        ss[NOTICE] = None
        return str(n["text"])
    return None
