"""Cached wrappers of deterministic engine calls.

Everything here is a pure function of its (hashable) arguments: loading a file, column
reports, plans, accuracy curves, rule comparisons. NOTHING that draws noise is cached:
releases go through ``planner.release`` from an ``on_click`` callback only.

Arguments whose name starts with ``_`` are not hashed by Streamlit; every such argument
is paired with a hashed key (a fingerprint or a JSON text) that determines it.
"""

from __future__ import annotations

import collections
import functools
import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import streamlit as st

from planner.core.errors import DataError, PlannerError
from planner.data.backends.base import Backend
from planner.data.backends.pandas_backend import PandasBackend
from planner.data.loader import column_report, load_table
from planner.data.requests import Bins
from planner.data.schema import (
    ColumnKind,
    Schema,
    dataset_fingerprint,
    suggest_kinds,
    suggest_whole_numbers,
)
from planner.planning.queries import Query, queries_from_list
from planner.planning.statistics import statistic
from planner.privacy.budget import SplitMode

from . import state as S

if TYPE_CHECKING:  # imported where used: the Data page draws without the optimiser or the ledger
    from planner.ledger import Ledger
    from planner.planning import plan_spec, workload



# ----------------------------------------------------------------------------- loading
@st.cache_data(show_spinner="Loading the sample…", max_entries=4)
def load_sample(name: str) -> tuple[pd.DataFrame, str, str]:
    """(table, schema JSON, fingerprint) of a bundled sample."""
    csv, schema_path = S.SAMPLES[name]
    df = load_table(csv, name=csv.name)
    return df, Schema.load(schema_path).to_json(), dataset_fingerprint(csv)


@st.cache_data(show_spinner="Reading the upload…", max_entries=4)
def load_upload(data: bytes, name: str) -> tuple[pd.DataFrame, str]:
    """(table, fingerprint) of uploaded bytes; raises the engine's DataError on bad input."""
    return load_table(data, name=name), dataset_fingerprint(data)


def server_sources_available() -> bool:
    """True when the engine offers allow-listed server files (``planner.data.sources``)."""
    try:
        import planner.data.sources  # noqa: F401
    except ImportError:
        return False
    return True


def server_files() -> list[str]:
    """CSV/TSV/Parquet files in the allow-listed server directory (names relative to it)."""
    from planner.data import sources

    root = sources.data_dir()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.suffix.lower() in (".csv", ".tsv", ".txt", ".parquet"))


@st.cache_data(max_entries=256)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    return dataset_fingerprint(path)


def granted_server_files() -> list[str]:
    """The server files a non-owner may open: those that are a version of a dataset the
    ledger lets the session's principal read (its grants); no other file is even listed."""
    from planner.data import sources

    root = sources.data_dir()
    led = ledger()
    out = []
    for name in server_files():
        p = root / name
        st_ = p.stat()
        try:
            if led.find_dataset(_file_digest(str(p), st_.st_mtime_ns, st_.st_size)) is not None:
                out.append(name)
        except PlannerError:  # registered but not shared with this principal
            continue
    return out


@st.cache_data(show_spinner="Reading the file…", max_entries=4)
def load_server(spec: str) -> tuple[pd.DataFrame, str]:
    """(table, fingerprint) of one allow-listed server file; DataError outside the directory."""
    from planner.data import sources

    paths = sources.resolve_paths(spec)
    if len(paths) != 1:
        raise DataError(f"{spec!r} names {len(paths)} files; pick exactly one file.")
    return load_table(paths[0], name=paths[0].name), dataset_fingerprint(paths[0])


SPARK_ENV = "PLANNER_SPARK_MASTER"  # set it (e.g. local[2], spark://host:7077) to offer Spark in the app


def backend_choices() -> list[str]:
    """The aggregation engines the app offers: pandas, DuckDB when installed, Spark when
    ``PLANNER_SPARK_MASTER`` is set and PySpark and Java are installed (the default first)."""
    import os

    from planner.data import backends

    found = [b for b in backends.available_backends() if b != "spark" or os.environ.get(SPARK_ENV, "").strip()]
    default = backends.default_backend()
    return [default, *[b for b in found if b != default]]


def backend_name() -> str:
    """The engine that computes a release's exact aggregates: the owner's choice (Data
    page) when it is offered, else the default (DuckDB when installed)."""
    choice = st.session_state.get(S.BACKEND)
    choices = backend_choices()
    return str(choice) if choice in choices else choices[0]


@st.cache_data(max_entries=8)
def suggested_kinds(fingerprint: str, _df: pd.DataFrame) -> dict[str, str]:
    """Kinds suggested from the rows (kinds only: never bounds or categories)."""
    return {k: v.value for k, v in suggest_kinds(_df).items()}


@st.cache_data(max_entries=16)
def suggested_whole_numbers(fingerprint: str, _df: pd.DataFrame) -> frozenset[str]:
    """The numeric columns that hold whole numbers (``suggest_whole_numbers``, of the kinds
    :func:`suggested_kinds` already suggested)."""
    kinds = {k: ColumnKind(v) for k, v in suggested_kinds(fingerprint, _df).items()}
    return suggest_whole_numbers(_df, kinds)


@st.cache_data(max_entries=16)
def report(fingerprint: str, schema_json: str, _df: pd.DataFrame) -> dict[str, Any]:
    """The column report (counts only) of a table under a schema."""
    return column_report(_df, Schema.from_json(schema_json))


@st.cache_resource(max_entries=4)
def frame_backend(fingerprint: str, schema_json: str, _df: pd.DataFrame) -> PandasBackend:
    """Aggregates of the table already in memory, for the owner-only data views."""
    return PandasBackend(_df, Schema.from_json(schema_json))


#: Where a backend reads the table: ``(source, name, upload bytes)``, taken from the session
#: in the script run (a background thread has no session to read).
Source = tuple[str, str, bytes | None]


def _source(data: Active) -> Source:
    ss = st.session_state
    if data.source == "upload":
        return "upload", ss[S.UPLOAD_NAME] or "upload.csv", ss[S.UPLOAD_BYTES]
    if data.source == "server":
        return "server", str(ss[S.ACTIVE]["file"]), None
    return "sample", data.sample or "", None


#: How many opened backends the process keeps (``_open_backend``'s cache).
OPEN_ENTRIES = 4


@st.cache_resource(max_entries=OPEN_ENTRIES)
def _open_backend(fingerprint: str, schema_json: str, kind: str, _src: Source) -> Backend:
    import io
    import os

    from planner.data import backends, sources

    schema = Schema.from_json(schema_json)
    where, name, raw = _src
    src: Any
    if where == "upload":
        src = io.BytesIO(raw or b"")
        src.name = name
    elif where == "server":
        src = sources.open_source(name)
    else:
        path = S.SAMPLES[name][0]
        src = sources.file_source((path,), path.name)
    return backends.make_backend(kind, src, schema, spark_master=os.environ.get(SPARK_ENV) or None)


def backend(fingerprint: str, schema_json: str, kind: str, _data: Active) -> Backend:
    """The exact aggregates behind a release on the ``kind`` engine (the Data page's choice,
    the same :func:`planner.data.backends.make_backend` the command line calls) scanning the file
    itself: the bundled sample, the allow-listed server file, or the upload (spilled to a
    temporary file for DuckDB, deleted when the backend closes). One per file, schema and
    engine for the process (``st.cache_resource``), keyed by the file's fingerprint."""
    return _open_backend(fingerprint, schema_json, kind, _source(_data))


_opening: set[tuple[str, str, str]] = set()  # keys whose open is under way (trimmed when it ends)
#: keys opened lately, as many as the cache keeps (a page run finds them opened: no thread)
_opened: collections.deque[tuple[str, str, str]] = collections.deque(maxlen=OPEN_ENTRIES)
_opening_lock = threading.Lock()


def open_backend_soon(fingerprint: str, schema_json: str, kind: str, data: Active) -> threading.Thread | None:
    """Open :func:`backend` in a background thread (the Release page calls it once a release
    is possible): the engine reads the file while the owner reads the confirmation, not after
    the click. It reads the table only, computes nothing from it and shows nothing; a release
    that comes first waits for it (one computation per key, ``st.cache_resource``'s lock). A
    file that cannot be opened raises again in the release's own call, which shows why.

    Returns the thread started, or None when an open of the same key is under way or ended
    well lately. What is remembered stays bounded: a key is in ``_opening`` only while its
    open runs (taken out when it ends, opened or failed), and the keys opened well are the
    last :data:`OPEN_ENTRIES` (as many as the cache keeps). A failed open is tried again by
    the next call; a key the cache may have dropped is opened by the release's own call."""
    key = (fingerprint, schema_json, kind)
    src = _source(data)  # session-state lookups only, read in the page's own thread
    with _opening_lock:
        if key in _opening or key in _opened:
            return None
        _opening.add(key)

    def run() -> None:
        opened = True
        try:
            _open_backend(fingerprint, schema_json, kind, src)
        except Exception:  # the release's own call raises it again and shows it
            opened = False
        with _opening_lock:
            _opening.discard(key)
            if opened and key not in _opened:
                _opened.append(key)

    thread = threading.Thread(target=run, name="planner-open-backend", daemon=True)
    try:
        thread.start()
    except BaseException:
        with _opening_lock:
            _opening.discard(key)
        raise
    return thread


def data_path(data: Active) -> str:
    """The data file as a generated script names it: a bundled sample by its path in the
    project, a server file by its path in the data directory, an upload by its file name."""
    ss = st.session_state
    if data.source == "sample":
        return str(S.SAMPLES[data.sample or "census"][0].relative_to(S.ROOT))
    if data.source == "server":
        return str(ss[S.ACTIVE]["file"])
    return str(ss[S.UPLOAD_NAME] or "upload.csv")


def ledger() -> Ledger:
    """The ledger acting for the session's principal (``pages._ui.auth.ledger``): every
    page's ledger calls carry who makes them, and the engine checks each one."""
    from . import auth

    return auth.ledger()


@dataclass(frozen=True)
class Active:
    """The dataset the pages work on."""

    name: str
    source: str
    fingerprint: str  # of the file's bytes: the session's caches and drafts only
    df: pd.DataFrame
    schema: Schema | None
    schema_json: str | None
    sample: str | None

    @functools.cached_property
    def ledger_key(self) -> str | None:
        """What the ledger knows this dataset by: the key of its content digest under the
        declared schema (:func:`planner.data.sources.dataset_key`), the same the command line
        computes in its scan, so the same table is one budget in the app and the CLI
        whatever its file format, row order or line endings. ``None`` until a schema is
        declared (the digest covers the declared columns)."""
        ck = self.content
        if ck is None:
            return None
        return resolved_key(ck, self.fingerprint) or ck

    @functools.cached_property
    def content(self) -> str | None:
        """The key of the table's content under the declared schema (what a release records
        as the version it was made on); ``None`` until a schema is declared."""
        if self.schema_json is None:
            return None
        return content_key(self.fingerprint, self.schema_json, self.df)


def resolved_key(content: str, file_fp: str) -> str | None:
    """``planner.ledger.resolve_dataset`` of the table's two digests (content, file bytes),
    remembered for the session once found (a registered dataset's key never changes)."""
    from planner.core.errors import PermissionDenied
    from planner.ledger import resolve_dataset

    memo = st.session_state.setdefault("keep.data.ledger_keys", {})
    if (content, file_fp) in memo:
        return str(memo[(content, file_fp)])
    try:
        key = resolve_dataset(ledger(), (content, file_fp))
    except PermissionDenied:
        return None  # registered but not shared: the pages show the engine's refusal for it
    if key is not None:
        memo[(content, file_fp)] = key
    return key


@st.cache_data(show_spinner=False, max_entries=16)
def content_key(fingerprint: str, schema_json: str, _df: pd.DataFrame) -> str:
    """:func:`planner.data.sources.dataset_key` of the table's content digest (PRIVATE input,
    keyed output: only this key leaves the function)."""
    from planner.data.sources import table_key

    return table_key(_df, Schema.from_json(schema_json))


def active() -> Active:
    """The active dataset (the one the owner last picked); raises PlannerError if unreadable.
    Found once per script run, keyed by everything it is made from (the upload's bytes
    themselves included: :func:`pages._ui.run_memo.once_per_run`)."""
    from pages._ui.run_memo import once_per_run

    ss = st.session_state
    key = (repr(ss[S.ACTIVE]), ss[S.UPLOAD_NAME], ss[S.UPLOAD_BYTES], repr(sorted(ss[S.SCHEMAS].items())))
    return once_per_run("active", key, _active)


def _active() -> Active:
    ss = st.session_state
    act = ss[S.ACTIVE]
    if act.get("source") == "upload" and ss[S.UPLOAD_BYTES] is not None:
        name = ss[S.UPLOAD_NAME] or "upload"
        df, fp = load_upload(ss[S.UPLOAD_BYTES], name)
        sj = ss[S.SCHEMAS].get(fp)
        return Active(name, "upload", fp, df, Schema.from_json(sj) if sj else None, sj, None)
    if act.get("source") == "server" and act.get("file"):
        df, fp = load_server(act["file"])
        sj = ss[S.SCHEMAS].get(fp)
        return Active(act["file"], "server", fp, df, Schema.from_json(sj) if sj else None, sj, None)
    name = act.get("sample") if act.get("sample") in S.SAMPLES else "census"
    df, sj, fp = load_sample(name)
    return Active(f"{name} (sample)", "sample", fp, df, Schema.from_json(sj), sj, name)


def sync_workload(data: Active) -> None:
    """Give a newly active dataset its starting workload (once: edits are kept after that).

    The workload made by ``init_state`` belongs to the session's first dataset; a dataset
    picked later gets its own starting workload once its schema is declared.
    """
    ss = st.session_state
    if ss[S.WORKLOAD_FP] is None:
        ss[S.WORKLOAD_FP] = data.fingerprint
    elif ss[S.WORKLOAD_FP] != data.fingerprint and data.schema is not None:
        rows = S.default_workload(data.sample) if data.sample else S.starter_workload(data.schema.to_dict())
        S.set_workload(rows, data.fingerprint)


# ----------------------------------------------------------------------------- queries
clean_rows = S.clean_rows


def workload_json(rows: list[dict[str, Any]], mode: SplitMode = SplitMode.WEIGHTED) -> str:
    """Canonical JSON of the workload for ``mode`` (the flat query form, options inline):
    targets in target mode, weights otherwise. Raises QueryError for options that are not
    a JSON object."""
    return json.dumps(S.query_dicts(rows, mode), sort_keys=True)


def parse_queries(wl_json: str, schema_json: str) -> tuple[Query, ...]:
    """Validated queries (raises QueryError naming the query)."""
    return queries_from_list(json.loads(wl_json), Schema.from_json(schema_json))


def error_scales(queries: tuple[Query, ...], schema: Schema) -> dict[str, float] | None:
    """A public scale per query (declared bounds and public n): the engine's default."""
    from planner.planning import workload

    return workload.default_error_scales(queries, schema)


# ----------------------------------------------------------------------------- plans
Pins = tuple[tuple[str, float], ...]


#: Plans kept: a Planner run asks for five (one per rule) and plans ten more in the background
#: (:mod:`pages._ui.prefetch`); a plan is a few kB (the census plan's pickle: 3 kB).
SPEC_PLANS = 256


@st.cache_data(max_entries=SPEC_PLANS)
def spec_plan(spec_json: str) -> plan_spec.PlanOutcome:
    """The plan of a PLAN.json document (``planner.planning.plan_spec.build_plan``): exactly what
    ``planner plan`` and ``planner release`` make of the same file."""
    from planner.planning import plan_spec

    return plan_spec.build_plan(plan_spec.parse_plan_spec(json.loads(spec_json)))


def with_rule(spec_json: str, rule: str) -> str:
    """The same PLAN.json document under another composition rule."""
    doc = json.loads(spec_json)
    doc["budget"]["composition"] = rule
    return json.dumps(doc, sort_keys=True)


def compare(spec_json: str) -> dict[str, workload.Plan | PlannerError]:
    """The same plan file under every rule: one cached :func:`spec_plan` per rule (the rule
    on screen is never planned twice); a rule that does not apply gives its error."""
    out: dict[str, workload.Plan | PlannerError] = {}
    for rule in S.RULES:
        try:
            out[rule] = spec_plan(with_rule(spec_json, rule)).plan
        except PlannerError as exc:
            out[rule] = exc
    return out


@st.cache_data(max_entries=64)
def compare_spec(spec_json: str) -> dict[str, dict[str, Any] | str]:
    """``planner.planning.plan_spec.compare_spec``: the same file under every rule, in its mode."""
    from planner.planning import plan_spec

    return plan_spec.compare_spec(plan_spec.parse_plan_spec(json.loads(spec_json)))


@st.cache_data(max_entries=32)
def manual_total(wl_json: str, schema_json: str, delta: float, rule: str, shares: Pins) -> float:
    """The ε a manual split's shares cost under ``rule`` (``workload.manual_total``)."""
    from planner.planning import workload

    return workload.manual_total(parse_queries(wl_json, schema_json), Schema.from_json(schema_json), delta, rule,
                                 dict(shares))


@st.cache_data(max_entries=32)
def item_ids(wl_json: str, schema_json: str) -> list[tuple[str, str, str, bool]]:
    """``(item id, query id, part, gaussian)`` of every share a manual split needs."""
    from planner.planning import workload

    return workload.item_ids(parse_queries(wl_json, schema_json), Schema.from_json(schema_json))


@st.cache_data(max_entries=16)
def equal_shares(wl_json: str, schema_json: str, epsilon: float, delta: float, rule: str) -> dict[str, float]:
    """The equal split's share of every item (where a manual split starts from)."""
    from planner.planning import workload

    p = workload.plan_equal(parse_queries(wl_json, schema_json), Schema.from_json(schema_json), epsilon, delta, rule)
    return {a.id: a.theta for a in p.allocation.items}


@st.cache_resource(max_entries=16)
def prepared(plan_hash: str, _plan: workload.Plan, _schema: Schema) -> Any:
    """The OpenDP measurements of a plan and their costs (``planner.release.prepare``):
    deterministic, no data, no noise; keyed by the plan's hash."""
    from planner import release

    return release.prepare(_plan, _schema)


def curve_epsilons(epsilon: float, points: int = 12) -> tuple[float, ...]:
    return tuple(float(e) for e in np.geomspace(epsilon / 10, epsilon * 10, points))


@st.cache_data(max_entries=32)
def compare_curve(wl_json: str, schema_json: str, epsilons: tuple[float, ...], delta: float,
                  scales: Pins = ()) -> pd.DataFrame:
    from planner.planning import workload

    schema = Schema.from_json(schema_json)
    qs = parse_queries(wl_json, schema_json)
    cur = workload.compare_curve(qs, schema, list(epsilons), delta, dict(scales) or None)
    return pd.DataFrame(
        [{"rule": r, "epsilon": e, "objective": v} for r, vals in cur.items() for e, v in zip(epsilons, vals, strict=True)]
    )


# ----------------------------------------------------------------------------- accuracy
EPS_GRID: tuple[float, ...] = tuple(float(e) for e in np.geomspace(0.01, 10, 31))


@st.cache_data(max_entries=64)
def accuracy_curves(query_json: str, schema_json: str, delta: float, epsilons: tuple[float, ...]) -> tuple[pd.DataFrame, list[str]]:
    """RMSE and 95% bound of one query alone, per applicable mechanism, over ``epsilons``
    (:func:`planner.planning.workload.accuracy_curves`), as a table for the charts."""
    from planner.planning import workload

    schema = Schema.from_json(schema_json)
    q = queries_from_list([json.loads(query_json)], schema)[0]
    points, notes = workload.accuracy_curves(q, schema, delta, epsilons)
    return pd.DataFrame([{"mechanism": p.mechanism, "epsilon": p.epsilon, "RMSE": p.rmse,
                          "95% bound": p.error_bound_95, "unit": p.unit} for p in points]), notes


@st.cache_data(max_entries=64)
def lower_bound_curve(query_json: str, schema_json: str, epsilons: tuple[float, ...]) -> pd.DataFrame | None:
    """√ of the MSE lower bound for unbiased ε-DP mechanisms (linear queries only)."""
    from planner.planning import bounds

    schema = Schema.from_json(schema_json)
    q = queries_from_list([json.loads(query_json)], schema)[0]
    if not statistic(q.kind).linear:
        return None
    sens = q.sensitivity(schema).l1
    b = bounds.unbiased_mse_lower_bound(np.asarray(epsilons), sens)
    return pd.DataFrame({"epsilon": epsilons, "RMSE lower bound (unbiased)": np.sqrt(b.values)})


@st.cache_data(max_entries=16)
def mode_exactness(fingerprint: str, schema_json: str, column: str, epsilons: tuple[float, ...], _df: pd.DataFrame) -> pd.DataFrame:
    """DATA-DEPENDENT: P[ISM = true mode] vs the unbiased upper bound at ¼ε (Garivier 2021)."""
    from planner.planning import bounds
    from planner.planning.mechanisms import ism

    b = frame_backend(fingerprint, schema_json, _df)
    counts = b.result(Bins(column)).as_array()
    d = ism.mode_distance(counts).distance
    chk = bounds.ism_optimality(d, np.asarray(epsilons))
    return pd.DataFrame({
        "epsilon": list(epsilons) * 2,
        "P[exact]": np.concatenate([chk.ism, chk.bound_at_fraction]),
        "curve": ["ISM at ε"] * len(epsilons) + [f"best unbiased at {chk.fraction:g}·ε"] * len(epsilons),
    })


def numeric_kinds() -> tuple[str, ...]:
    return tuple(k.value for k in ColumnKind)


# ----------------------------------------------------------------------------- data-dependent checks
@st.cache_data(max_entries=32, show_spinner="Computing the exact aggregate (once)…")
def exact_aggregate(fingerprint: str, schema_json: str, query_json: str, _df: pd.DataFrame) -> Any:
    """DATA-DEPENDENT: the query's exact aggregate, through the backend. Never shown or exported."""
    q = queries_from_list([json.loads(query_json)], Schema.from_json(schema_json))[0]
    return statistic(q.kind).aggregate(q, frame_backend(fingerprint, schema_json, _df))


@st.cache_data(max_entries=16, show_spinner="Simulating the quantile mechanisms…")
def quantile_check(fingerprint: str, schema_json: str, query_json: str, alpha: float,
                   epsilons: tuple[float, ...], runs: int, seed: int, _df: pd.DataFrame) -> pd.DataFrame:
    """DATA-DEPENDENT: a quantile's error in the column's units (lower bound, EM, ISM), long form."""
    from planner.planning import simulation

    schema = Schema.from_json(schema_json)
    q = queries_from_list([json.loads(query_json)], schema)[0]
    lo, hi = schema.column(q.column or "").bounds
    agg = exact_aggregate(fingerprint, schema_json, query_json, _df)
    chk = simulation.quantile_check(agg, alpha, lo, hi, epsilons, runs, np.random.default_rng(seed),
                                    sensitivity=q.parts(schema)[0].sensitivity.l1)
    eps = list(chk.epsilon)
    return pd.DataFrame({
        "epsilon": eps * 3,
        "RMSE": np.concatenate([chk.lower_bound_rmse, chk.em_rmse, chk.ism_rmse]),
        "curve": (["lower bound, any unbiased mechanism"] * len(eps) + ["exponential mechanism (grid, simulated)"] * len(eps)
                  + ["inverse sensitivity mechanism (simulated)"] * len(eps)),
    })
