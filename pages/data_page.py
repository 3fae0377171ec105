"""Data: pick the active dataset, declare its schema, see the owner-only column report."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from pages._ui import auth, cached, datasets, fmt, frame, suggest
from pages._ui import state as S
from pages._ui.guard import guard
from pages._ui.preamble import require_planner
from planner.core.errors import PlannerError
from planner.data.loader import refuse_invalid_cells
from planner.data.schema import ColumnKind, Relation, format_text_list
from planner.outputs import words

S.init_state()
require_planner()
ss = st.session_state
PAGE = "data"

st.title("Data and schema")
st.page_link("pages/guide_page.py", label="New here? Start here: five steps from a table to a private release",
             icon=":material/flag:")

# ----------------------------------------------------------------------------- the active dataset
try:
    data: cached.Active | None = cached.active()
    active_error = None
except PlannerError as exc:  # an upload that was readable once is always readable: defensive
    data, active_error = None, str(exc)

if data is not None:
    where = {"sample": "bundled sample", "upload": "your upload", "server": "file on this server"}[data.source]
    st.success(f"Active dataset: **{fmt.plain(data.name)}** ({where}). Every page works on it until you pick another one here.",
               icon=":material/check_circle:")
elif active_error:
    st.error(fmt.plain(active_error))

pending = ss[S.PENDING]
if pending:
    with st.container(border=True):
        st.warning(
            f"You edited the workload of the active dataset ({len(S.clean_rows(ss[S.WORKLOAD]))} queries). "
            f"Switching to **{pending['label']}** replaces it with a starting workload for that dataset.",
            icon=":material/warning:")
        b1, b2 = st.columns(2)
        b1.button(f"Switch to {pending['label']} and replace the workload", key="data:switch_confirm",
                  on_click=datasets.confirm_switch, type="primary")
        b2.button("Keep the current dataset and workload", key="data:switch_cancel", on_click=datasets.cancel_switch)

# ----------------------------------------------------------------------------- pickers
SOURCES = {"sample": "Bundled sample", "upload": "Upload a file", "server": "A file on this server"}
options = ["sample", "upload"] + (["server"] if cached.server_sources_available() else [])
if ss[S.PICKER] not in options:
    ss[S.PICKER] = "sample"
picker = st.radio("Pick a dataset from", options, horizontal=True, format_func=SOURCES.__getitem__,
                  **S.bind(S.PICKER, PAGE, options=options))
act = ss[S.ACTIVE]


def _pick_sample() -> None:
    name = ss["data:sample"]
    if name is not None:
        datasets.request_switch({"source": "sample", "sample": name})


def _pick_server() -> None:
    name = ss["data:server_file"]
    if name is not None:
        datasets.request_switch({"source": "server", "file": name})


if picker == "sample":
    ss["data:sample"] = act.get("sample") if act.get("source") == "sample" else None
    st.selectbox("Sample dataset", list(S.SAMPLES), key="data:sample", index=None, placeholder="Pick a sample",
                 on_change=_pick_sample, help="Synthetic data (CC0), see data/README.md.")
elif picker == "upload":
    up = st.file_uploader("CSV, TSV or Parquet", type=["csv", "tsv", "txt", "parquet"],
                          key=f"data:uploader:{ss[S.UPLOADER_VERSION]}")
    st.caption("An upload lasts as long as this browser tab: after a reload, upload the same file again. Its "
               "lifetime budget and releases stay in the ledger and are found again once the same file has the same "
               "schema (load the schema JSON you downloaded; the plan file restores the plan).")
    if up is not None and up.file_id != ss[S.UPLOAD_FILE_ID]:
        raw = up.getvalue()
        try:
            cached.load_upload(raw, up.name)  # read once (cached); a bad file never becomes active
        except PlannerError as exc:
            ss[S.UPLOAD_ERROR] = {"file_id": up.file_id, "text": f"{up.name} cannot be used: {exc}"}
        else:
            ss[S.UPLOAD_ERROR] = None
            ss[S.UPLOAD_FILE_ID] = up.file_id
            datasets.request_switch({"source": "upload"}, {"name": up.name, "bytes": raw, "file_id": up.file_id})
            st.rerun()  # the sidebar (drawn before this page) then shows the new dataset
    err = ss[S.UPLOAD_ERROR]
    if err and up is not None and up.file_id == err["file_id"]:
        st.error(fmt.plain(err["text"]) + (" The active dataset is unchanged." if data is not None else ""))
    elif err and up is None:
        ss[S.UPLOAD_ERROR] = None
    if ss[S.UPLOAD_BYTES] is not None and act.get("source") != "upload":
        st.button(f"Make your earlier upload, {ss[S.UPLOAD_NAME]}, the active dataset again", key="data:reupload",
                  on_click=datasets.request_switch, args=({"source": "upload"},
                                                          {"name": ss[S.UPLOAD_NAME], "bytes": ss[S.UPLOAD_BYTES],
                                                           "file_id": ss[S.UPLOAD_FILE_ID]}))
elif picker == "server":
    files = []
    with guard(stop=False):
        files = cached.server_files() if auth.is_owner() else cached.granted_server_files()
    if files:
        ss["data:server_file"] = act.get("file") if act.get("source") == "server" and act.get("file") in files else None
        st.selectbox("File in the server's data directory", files, key="data:server_file", index=None,
                     placeholder="Pick a file", on_change=_pick_server,
                     help="Only files inside the allow-listed directory (PLANNER_DATA_DIR) can be opened; "
                          "the file never passes through the browser.")
    elif not files:
        st.info("The server's data directory (`PLANNER_DATA_DIR`) holds no CSV, TSV or Parquet file.")

if data is None:
    frame.stop()
if pending:
    frame.stop()
engines = cached.backend_choices()
ENGINE_WORDS = {"duckdb": "DuckDB (scans the file in place; the default)", "pandas": "pandas (in memory)",
                "spark": "Spark (the configured cluster)"}
if ss[S.BACKEND] not in engines:
    ss[S.BACKEND] = engines[0]
st.selectbox("Engine computing a release's exact aggregates", engines,
             format_func=lambda b: ENGINE_WORDS.get(b, b), **S.bind(S.BACKEND, PAGE, options=engines),
             help="The same engines as `planner release --backend`: they compute identical clipped aggregates; the "
                  "noise is always added afterwards, by OpenDP. Spark is offered when the server sets "
                  "PLANNER_SPARK_MASTER. Grouped statistics (by region, by region × sex) work in every engine; "
                  "DuckDB and Spark compute all groups of a grouping in one GROUP BY.")

# ----------------------------------------------------------------------------- schema for uploads
if data.source in ("upload", "server"):
    fp = data.fingerprint
    kinds = cached.suggested_kinds(fp, data.df)
    whole = cached.suggested_whole_numbers(fp, data.df)
    d = datasets.draft(fp, data.schema, kinds, whole)
    all_cols = [str(c) for c in data.df.columns]

    def _set(field: str, wk: str) -> None:
        ss[S.DRAFTS][fp] = dict(ss[S.DRAFTS][fp], **{field: ss[wk]})

    def _set_col(name: str, field: str, wk: str) -> None:
        dd = ss[S.DRAFTS][fp]
        cols = dict(dd["columns"])
        cols[name] = dict(cols.get(name, {"kind": kinds.get(name, "numeric"), "bounds": "", "categories": ""}),
                          **{field: ss[wk]})
        ss[S.DRAFTS][fp] = dict(dd, columns=cols)

    def _flush() -> None:
        """Copy every draft widget's current value into the draft (a button's callback may
        run before the on_change of a field edited in the same interaction)."""
        dd = dict(ss[S.DRAFTS][fp])
        for field in ("use", "relation", "unit", "max_rows", "public_n", "sample_rate"):
            if f"data:{field}" in ss:
                dd[field] = ss[f"data:{field}"]
        cols = dict(dd["columns"])
        for name in dd["use"]:
            entry = dict(cols.get(name, {"kind": kinds.get(name, "numeric"), "bounds": "", "categories": ""}))
            for field, suffix in (("kind", "kind"), ("bounds", "bounds"), ("categories", "cats"),
                                  ("missing", "missing"), ("integer", "whole")):
                if f"data:col:{name}:{suffix}" in ss:
                    entry[field] = ss[f"data:col:{name}:{suffix}"]
            cols[name] = entry
        ss[S.DRAFTS][fp] = dict(dd, columns=cols)

    def _use_all() -> None:
        _flush()
        ss[S.DRAFTS][fp] = dict(ss[S.DRAFTS][fp], use=list(all_cols))

    def _bulk_apply() -> None:
        _flush()
        dd = ss[S.DRAFTS][fp]
        chosen = list(ss.get("data:bulk_cols") or [])
        if not chosen:
            return
        cols = dict(dd["columns"])
        for name in chosen:
            entry = dict(cols.get(name, {"kind": "numeric", "bounds": "", "categories": ""}))
            entry["kind"] = ss["data:bulk_kind"]
            if ss["data:bulk_kind"] == ColumnKind.NUMERIC:
                entry["bounds"] = ss.get("data:bulk_bounds") or ""
            if ss["data:bulk_kind"] == ColumnKind.CATEGORICAL:
                entry["categories"] = ss.get("data:bulk_cats") or ""
            cols[name] = entry
        use = list(dd["use"]) + [c for c in chosen if c not in dd["use"]]
        ss[S.DRAFTS][fp] = dict(dd, columns=cols, use=use)
        ss["data:bulk_cols"] = []

    def _bulk_select(kind: str) -> None:
        ss["data:bulk_cols"] = [c for c in all_cols if kinds.get(c) == kind]

    def _save() -> None:
        _flush()
        _commit()

    def _commit() -> None:
        schema, problems = datasets.validate_draft(ss[S.DRAFTS][fp])
        absent = [c for c in ss[S.DRAFTS][fp]["use"] if c not in all_cols]
        if absent:
            schema, problems = None, [*problems, *(f"column {c!r} is declared but is not in this file; remove it "
                                                   "from the schema or pick the file that has it." for c in absent)]
        if schema is None:
            ss["data:schema_problems"] = {"fp": fp, "problems": problems}
            return
        ss["data:schema_problems"] = None
        prev = ss[S.SCHEMAS].get(fp)
        ss[S.SCHEMAS] = dict(ss[S.SCHEMAS], **{fp: schema.to_json()})
        # the starting workload follows the schema only while it is the one made from the
        # previous schema, untouched; a restored or edited workload is never replaced silently
        auto = prev is None or S.same_workload(ss[S.WORKLOAD], S.starter_workload(json.loads(prev)))
        kept = ""
        if ss[S.WORKLOAD_FP] != fp or (auto and not S.workload_edited()):
            S.set_workload(S.starter_workload(schema.to_dict()), fp)
        else:
            names = set(schema.names)
            stale = [str(r.get("id")) for r in S.clean_rows(ss[S.WORKLOAD])
                     if r.get("column") and r.get("column") not in names]
            kept = (f" Your {len(S.clean_rows(ss[S.WORKLOAD]))} queries are kept"
                    + (f"; {', '.join(stale[:5])} ask(s) about columns no longer declared: fix or drop them on "
                       "the Queries page." if stale else "."))
        S.notice(PAGE, f"Schema saved: {len(schema.columns)} column(s) declared, "
                       f"{len(all_cols) - len(schema.columns)} ignored." + kept)

    st.subheader("Declare the schema")
    st.warning(
        "Bounds and categories are **public declarations** you make from outside knowledge "
        "(a questionnaire, a code book, the law). They are never filled in from the rows: "
        "bounds or categories read from the private data would themselves leak it. "
        "Only the column *kinds* below (and whether a number column holds whole numbers) are suggested "
        "from the data, for your convenience.",
        icon=":material/policy:")

    schema_up = st.file_uploader("…or load a schema JSON you saved earlier", type=["json"],
                                 key=f"data:schema_upload:{ss[S.UPLOADER_VERSION]}")
    if schema_up is not None and ss.get("data:schema_loaded") != schema_up.file_id:
        ss["data:schema_loaded"] = schema_up.file_id
        with guard(f"{schema_up.name}: ", stop=False) as g:
            loaded, from_plan = datasets.load_schema_file(schema_up.getvalue())
        if g.ok:
            ss[S.DRAFTS][fp] = datasets.draft_from_schema(loaded, kinds, whole)
            _commit()
            saved = S.pop_notice(PAGE)  # "Schema saved: …", when the file's columns fit this one
            if saved and from_plan:
                saved += (f" {schema_up.name} is a plan file: its schema is the one declared. To restore its "
                          "queries and budget too, upload it on the Planner page (Restore a plan file).")
            if saved:
                S.notice(PAGE, saved)
            st.rerun()

    st.markdown(f"**1. Columns your queries will use** ({len(all_cols)} in the file). The others are ignored: "
                "no query can read them and they need no declaration.")
    ss["data:use"] = [c for c in d["use"] if c in all_cols]
    u1, u2 = st.columns([5, 1], vertical_alignment="bottom")
    u1.multiselect("Columns to declare", all_cols, key="data:use", on_change=_set, args=("use", "data:use"),
                   placeholder="Pick columns (type to search)")
    u2.button(f"Use all {len(all_cols)}", key="data:use_all", on_click=_use_all, width="stretch")

    with st.expander("Declare many columns at once", expanded=len(all_cols) > 20):
        st.caption("Pick columns (or all columns suggested as one kind), give them one kind and the same public "
                   "bounds or categories, then apply. They are added to the columns in use.")
        q1, q2, q3 = st.columns(3)
        q1.button("Select the columns suggested numeric", key="data:bulk_numeric", on_click=_bulk_select,
                  args=("numeric",), width="stretch")
        q2.button("…suggested categorical", key="data:bulk_categorical", on_click=_bulk_select,
                  args=("categorical",), width="stretch")
        q3.button("…suggested boolean", key="data:bulk_boolean", on_click=_bulk_select, args=("boolean",),
                  width="stretch")
        st.multiselect("Columns", all_cols, key="data:bulk_cols", placeholder="Pick columns")
        k1, k2, k3 = st.columns([1, 1, 2])
        if ss.get("data:bulk_kind") not in [k.value for k in ColumnKind]:
            ss["data:bulk_kind"] = "numeric"
        k1.selectbox("Kind", [k.value for k in ColumnKind], key="data:bulk_kind")
        k2.text_input("Public bounds L, U", key="data:bulk_bounds", placeholder="numeric: 0, 100")
        k3.text_input("Public categories", key="data:bulk_cats", placeholder="categorical: a, b, c",
                      help='Separated by commas; write a category that holds a comma in double quotes, '
                           '"Smith, John" (a quote inside it doubled: "say ""hi"", then").')
        st.button("Apply to the selected columns", key="data:bulk_apply", on_click=_bulk_apply)

    used = [c for c in d["use"] if c in all_cols]
    if used:
        st.markdown(f"**2. What is public about each of the {len(used)} column(s) in use**")
        kind_values = [k.value for k in ColumnKind]
        owner = auth.is_owner()
        h1, h2, h3, h4, h5, h6 = st.columns([2, 2, 2, 4, 2, 1])
        h1.caption("column")
        h2.caption("kind (suggested from the data; `key`: values you cannot list, released by threshold)")
        h3.caption("public bounds L, U (numeric; tick *whole numbers* for an age in years, a number of "
                   "children: a synthetic table then draws whole numbers)")
        h4.caption('public categories (categorical; quote one that holds a comma: "Smith, John")')
        h5.caption("a missing value: blank drops the row from this column's answers; a value replaces it")
        h6.caption("bounds from DP quantiles (owner)" if owner else "")
        for name in used:
            entry = d["columns"].get(name, {"kind": kinds.get(name, "numeric"), "bounds": "", "categories": ""})
            c1, c2, c3, c4, c5, c6 = st.columns([2, 2, 2, 4, 2, 1])
            c1.markdown(f"**{fmt.plain(name)}**")
            kk, bk, ck = f"data:col:{name}:kind", f"data:col:{name}:bounds", f"data:col:{name}:cats"
            ss[kk] = entry["kind"] if entry["kind"] in kind_values else "numeric"
            ss[bk] = entry.get("bounds", "")
            ss[ck] = entry.get("categories", "")
            c2.selectbox(f"{name}: kind", kind_values, key=kk, label_visibility="collapsed",
                         on_change=_set_col, args=(name, "kind", kk))
            c3.text_input(f"{name}: public bounds L, U", key=bk, placeholder="numeric: L, U",
                          label_visibility="collapsed",
                          on_change=_set_col, args=(name, "bounds", bk),
                          disabled=entry["kind"] != ColumnKind.NUMERIC)
            if entry["kind"] == ColumnKind.NUMERIC:
                wk = f"data:col:{name}:whole"
                ss[wk] = bool(entry.get("integer", False))
                c3.checkbox("whole numbers", key=wk, on_change=_set_col, args=(name, "integer", wk))
            c4.text_input(f"{name}: public categories", key=ck, placeholder="categorical: a, b, c",
                          label_visibility="collapsed",
                          on_change=_set_col, args=(name, "categories", ck),
                          disabled=entry["kind"] != ColumnKind.CATEGORICAL)
            mk = f"data:col:{name}:missing"
            ss[mk] = entry.get("missing", "")
            c5.text_input(f"{name}: value for a missing cell", key=mk, placeholder="drop the row",
                          label_visibility="collapsed", on_change=_set_col, args=(name, "missing", mk),
                          disabled=entry["kind"] == ColumnKind.IDENTIFIER)
            if owner and entry["kind"] == ColumnKind.NUMERIC:
                c6.button("suggest", key=f"data:col:{name}:suggest", on_click=suggest.open_panel, args=(name,),
                          help="Suggest this column's bounds from DP quantiles over a public coarse range "
                               "(spends a small ε, recorded in the ledger).")
        if owner and ss.get(suggest.OPEN) in used:
            suggest.panel(data, fp)

    st.markdown("**3. Who is protected**")
    r1, r2, r3, r4 = st.columns(4)
    ss["data:relation"] = Relation(d["relation"])
    r1.radio("Neighbouring relation", list(Relation), key="data:relation",
             format_func={Relation.ADD_REMOVE: "add/remove one person (the size is secret)",
                          Relation.SUBSTITUTE: "replace one person (the size is public)"}.__getitem__,
             on_change=_set, args=("relation", "data:relation"),
             help="What the privacy guarantee hides: whether one privacy unit is in the table at all "
                  "(add/remove), or what its values are (substitute).")
    id_cols = [datasets.UNIT_ROW] + [n for n in used if d["columns"].get(n, {}).get("kind") == ColumnKind.IDENTIFIER]
    ss["data:unit"] = d["unit"] if d["unit"] in id_cols else datasets.UNIT_ROW
    r2.selectbox("Privacy unit", id_cols, key="data:unit", on_change=_set, args=("unit", "data:unit"),
                 help="Declare a column of kind 'identifier' in use to protect people with several rows.")
    ss["data:max_rows"] = int(d["max_rows"])
    r3.number_input("Max rows per person", min_value=1, step=1, key="data:max_rows",
                    on_change=_set, args=("max_rows", "data:max_rows"),
                    help="Contribution bounding: a person with more rows keeps this many, chosen by a fixed "
                         "pseudo-random order; the others are left out of every answer.")
    ss["data:public_n"] = int(d["public_n"])
    r4.number_input("Public (approximate) row count, 0 if none", min_value=0, step=1, key="data:public_n",
                    on_change=_set, args=("public_n", "data:public_n"),
                    help="A row count you may publish (e.g. from a census); needed to predict the error of "
                         "means, medians and proportions.")
    ss["data:sample_rate"] = float(d.get("sample_rate") or 0.0)
    st.number_input("Secret sample: the public rate at which this table was drawn from its population (0 if it "
                    "is not a secret random sample)", min_value=0.0, max_value=1.0, step=0.01, format="%g",
                    key="data:sample_rate", on_change=_set, args=("sample_rate", "data:sample_rate"),
                    help="Only if the rows are a random draw from a larger population and nobody outside "
                         "learns who was drawn (Poisson draws under add/remove, a fixed-size draw under "
                         "replace-one). Your ε then protects everyone in the population, and the planner may "
                         "spend the larger budget the sampling allows (Balle, Barthe & Gaboardi 2018).")
    st.button("Save schema", type="primary", key="data:schema_save", on_click=_save)
    probs = ss.get("data:schema_problems")
    if probs and probs.get("fp") == fp:
        n = len(probs["problems"])
        st.error(f"The schema cannot be saved yet: {n} problem{'s' if n > 1 else ''} to fix.\n\n"
                 + "\n".join(f"- {fmt.plain(p)}" for p in probs["problems"]))
    note = S.pop_notice(PAGE)
    if note:
        st.success(note)
    data = cached.active()
    if data.schema is None:
        st.info("Save a schema to continue: the other pages need it.")
        frame.stop()
    elif datasets.validate_draft(ss[S.DRAFTS][fp])[0] != data.schema:
        st.caption("The form above has changes that are not saved yet; the pages use the saved schema.")

schema = data.schema
assert schema is not None
# ----------------------------------------------------------------------------- public facts
st.subheader("What is public")
unit = schema.unit
c1, c2, c3 = st.columns(3)
c1.metric("Neighbouring relation", {Relation.ADD_REMOVE: "add or remove one", Relation.SUBSTITUTE: "replace one"}[schema.relation],
          help="add_remove: the guarantee hides whether one privacy unit is in the table at all; "
               "substitute: it hides what one unit's values are (the table size is public).")
c2.metric("Privacy unit", "row" if unit.column is None else unit.column,
          help="Whose presence the guarantee protects: one row, or one person identified by this column.")
c3.metric("Declared public n", "—" if schema.public_n is None else f"{schema.public_n:,}",
          help="An approximate row count you declare as public; used to predict the error of means, "
               "medians and proportions.")
if unit.column is not None:
    st.caption(f"Each person (`{unit.column}`) contributes at most **{unit.c}** row(s); extra rows are left out "
               "before any answer is computed.")
decl = pd.DataFrame([
    {"column": c.name, "kind": c.kind.value,
     "bounds": (f"[{c.lower:g}, {c.upper:g}]" + (", whole numbers" if c.integer else "") + (
         f" (DP quantiles, release #{c.bounds_source.release_id}, ε {c.bounds_source.epsilon:.3g}"
         + (f"; tuned for a {c.bounds_source.tuned_for.value} at ε {c.bounds_source.tuned_epsilon:.3g}"
            if c.bounds_source.tuned_for is not None and c.bounds_source.tuned_epsilon is not None else "") + ")"
         if c.bounds_source is not None else "")) if c.kind is ColumnKind.NUMERIC else "",
     "categories": format_text_list(c.categories or ()) if c.kind is ColumnKind.CATEGORICAL else "",
     "missing": c.missing.action.value}
    for c in schema.columns
])
ignored = len(data.df.columns) - len(schema.columns)
if ignored > 0:
    st.caption(f"{len(schema.columns)} column(s) declared; {ignored} other column(s) of the file are ignored.")
# A few rows draw as a plain table (no grid to load: the first page is drawn sooner).
if len(decl) <= 30:  # st.table reads Markdown in its cells: the typed names are shown as typed
    st.table(decl.assign(column=decl["column"].map(fmt.plain), categories=decl["categories"].map(fmt.plain))
             .set_index("column"))
else:
    st.dataframe(decl, hide_index=True, width="stretch")
st.caption("missing: what happens to a missing value (drop the row, or replace it by a declared value).")
st.download_button("Download schema JSON", schema.to_json(), file_name="schema.json",
                   mime="application/json", key="data:schema_download", on_click="ignore")

# ----------------------------------------------------------------------------- owner-only report
st.subheader("Column report")
if not auth.is_owner():
    st.caption("🔒 The column report (counts computed from the raw data) is shown to owners only.")
    frame.stop()
st.caption("🔒 **Visible to you only — computed from your raw data.** Counts only; never exported.")
with guard():
    rep: dict[str, Any] = cached.report(data.fingerprint, data.schema_json or "", data.df)
c1, c2, c3 = st.columns(3)
c1.metric("Rows", f"{rep['rows']:,}")
c2.metric("Columns", f"{len(data.df.columns)}")
c3.metric("Rows after contribution bounding", f"{rep['rows_after_bounding']:,}")
st.caption(fmt.plain(words.bounding_words(schema)))
effect = words.bounding_effect(schema, int(rep["rows"]), int(rep["rows_after_bounding"]))
if effect:
    st.warning(fmt.plain(effect), icon=":material/content_cut:")
report_df = pd.DataFrame([{"column": k, **{f: v.get(f) for f in ("kind", "usable", "clipped", "invalid", "missing",
                                                                   "replaced", "dropped")}}
                          for k, v in rep["columns"].items()])
if len(report_df) <= 30:
    st.table(report_df.assign(column=report_df["column"].map(fmt.plain)).set_index("column"))
else:
    st.dataframe(report_df, hide_index=True, width="stretch")
st.caption("usable: rows that enter answers on this column · clipped: values outside the declared bounds, moved to "
           "the bound · invalid: unreadable as the declared kind, or an undeclared category.")
# the refusal a release makes (app, command line and scripts alike)
with guard("A release of this file will be refused until this is fixed: ", stop=False, show="warning"):
    refuse_invalid_cells(schema, rep)
