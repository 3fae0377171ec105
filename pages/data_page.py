"""Data: pick a sample or upload a table, declare its schema, see the owner-only column report."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from pages._ui import cached
from pages._ui import state as S
from planner.errors import PlannerError
from planner.schema import ColumnKind, Schema

S.init_state()
ss = st.session_state

st.title("Data and schema")

SOURCES = {"sample": "Bundled sample", "upload": "Upload a file", "server": "A file on this server"}
options = ["sample", "upload"] + (["server"] if cached.server_sources_available() else [])
if ss[S.SOURCE] not in options:
    ss[S.SOURCE] = "sample"
source = st.radio("Source", options, horizontal=True, key=S.SOURCE, format_func=SOURCES.__getitem__)

if source == "sample":
    st.selectbox("Sample dataset", list(S.SAMPLES), key=S.SAMPLE,
                 help="Synthetic data (CC0), see data/README.md.")
elif source == "upload":
    up = st.file_uploader("CSV, TSV or Parquet", type=["csv", "tsv", "txt", "parquet"], key="data_uploader")
    if up is not None:
        data_bytes = up.getvalue()
        if ss[S.UPLOAD_BYTES] != data_bytes or ss[S.UPLOAD_NAME] != up.name:
            ss[S.UPLOAD_BYTES] = data_bytes
            ss[S.UPLOAD_NAME] = up.name
            ss[S.UPLOAD_SCHEMA] = None
            st.rerun()  # the sidebar (drawn before this page) then shows the new dataset
    if ss[S.UPLOAD_BYTES] is None:
        st.info("Upload a file, or switch back to a bundled sample.")
        st.stop()
elif source == "server":
    try:
        files = cached.server_files()
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    if not files:
        st.info("The server's data directory (`PLANNER_DATA_DIR`) holds no CSV, TSV or Parquet file.")
        st.stop()
    if ss[S.SERVER_FILE] not in files:
        ss[S.SERVER_FILE] = None
    st.selectbox("File in the server's data directory", files, key=S.SERVER_FILE, index=None,
                 placeholder="Pick a file",
                 help="Only files inside the allow-listed directory (PLANNER_DATA_DIR) can be opened; "
                      "the file never passes through the browser.")
    if ss[S.SERVER_FILE] is None:
        st.stop()

try:
    data = cached.active()
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
cached.sync_workload(data)

st.caption(f"Active: **{data.name}** · fingerprint `{data.fingerprint[:16]}…` · "
           f"exact aggregates computed by the **{cached.backend_name()}** backend")

# --------------------------------------------------------------------- schema for uploads
schema_key = S.SERVER_SCHEMA if data.source == "server" else S.UPLOAD_SCHEMA
if data.source in ("upload", "server"):
    st.subheader("Declare the schema")
    st.warning(
        "Bounds and categories are **public declarations** you make from outside knowledge "
        "(a questionnaire, a code book, the law). They are never filled in from the rows: "
        "bounds or categories read from the private data would themselves leak it. "
        "Only the column *kinds* below are suggested from the data, for your convenience."
    )
    schema_file = st.file_uploader("…or load a schema JSON", type=["json"], key="data_schema_uploader")
    if schema_file is not None:
        try:
            ss[schema_key] = Schema.from_json(schema_file.getvalue()).to_json()
        except PlannerError as exc:
            st.error(str(exc))
    kinds = cached.suggested_kinds(data.fingerprint, data.df)
    kind_values = [k.value for k in ColumnKind]
    with st.form("schema_form"):
        rel = st.radio("Neighbouring relation", ["add_remove", "substitute"], horizontal=True, key="schema_relation",
                       format_func=lambda r: {"add_remove": "add/remove one person (the size is secret)",
                                              "substitute": "replace one person (the size is public)"}[r],
                       help="What the privacy guarantee hides: whether one privacy unit is in the table at all "
                            "(add/remove), or what its values are (substitute).")
        h1, h2, h3, h4 = st.columns([2, 2, 2, 4])
        h1.caption("column")
        h2.caption("kind (suggested)")
        h3.caption("public bounds L, U (numeric)")
        h4.caption("public categories (categorical)")
        cols_spec = []
        for name in data.df.columns:
            c1, c2, c3, c4 = st.columns([2, 2, 2, 4])
            c1.markdown(f"**{name}**")
            kind = c2.selectbox("kind", kind_values, index=kind_values.index(kinds.get(str(name), "categorical")),
                                key=f"schema_kind_{name}", label_visibility="collapsed")
            lower = c3.text_input("lower, upper", key=f"schema_bounds_{name}", placeholder="numeric: L, U",
                                  label_visibility="collapsed")
            cats = c4.text_input("categories", key=f"schema_cats_{name}", placeholder="categorical: a, b, c",
                                 label_visibility="collapsed")
            cols_spec.append((str(name), kind, lower, cats))
        id_cols = ["(one row per person)"] + [n for n, k, _, _ in cols_spec if k == "identifier"]
        unit_col = st.selectbox("Privacy unit", id_cols, key="schema_unit")
        max_rows = st.number_input("Max rows per person", min_value=1, value=1, step=1, key="schema_max_rows")
        public_n = st.number_input("Public (approximate) row count, 0 if none", min_value=0, value=0, step=1,
                                   key="schema_public_n")
        submitted = st.form_submit_button("Save schema", key="schema_save")
    if submitted:
        columns = []
        for name, kind, bounds_txt, cats_txt in cols_spec:
            entry: dict = {"name": name, "kind": kind}
            if kind != "identifier":
                entry["missing"] = {"action": "drop"}
            if kind == "numeric" and bounds_txt.strip():
                parts = [p.strip() for p in bounds_txt.split(",")]
                try:
                    entry["lower"], entry["upper"] = (float(parts[0]), float(parts[1]))
                except (ValueError, IndexError):
                    st.error(f"column {name!r}: bounds must be two numbers 'L, U'; got {bounds_txt!r}.")
                    st.stop()
            if kind == "categorical":
                entry["categories"] = [c.strip() for c in cats_txt.split(",") if c.strip()]
            columns.append(entry)
        spec = {
            "version": 1, "relation": rel,
            "privacy_unit": {"column": None if unit_col.startswith("(") else unit_col, "max_rows": int(max_rows)},
            "public_n": int(public_n) or None, "columns": columns,
        }
        try:
            ss[schema_key] = Schema.from_json(json.dumps(spec)).to_json()
            S.reset_workload(None)
            st.rerun()
        except PlannerError as exc:
            st.error(str(exc))
    try:
        data = cached.active()
    except PlannerError as exc:
        st.error(str(exc))
        st.stop()
    if data.schema is None:
        st.info("Save a schema to continue.")
        st.stop()

schema = data.schema
assert schema is not None
# --------------------------------------------------------------------- public facts
st.subheader("What is public")
unit = schema.unit
c1, c2, c3 = st.columns(3)
c1.metric("Neighbouring relation", schema.relation.value,
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
     "bounds": f"[{c.lower:g}, {c.upper:g}]" if c.kind is ColumnKind.NUMERIC else "",
     "categories": ", ".join(c.categories or ()) if c.kind is ColumnKind.CATEGORICAL else "",
     "missing": c.missing.action.value}
    for c in schema.columns
])
st.dataframe(decl, hide_index=True, width="stretch",
             column_config={"categories": st.column_config.TextColumn(width="large"),
                            "missing": st.column_config.TextColumn(help="what happens to a missing value: "
                                                                   "drop the row, or replace it by a declared value")})
st.download_button("Download schema JSON", schema.to_json(), file_name="schema.json",
                   mime="application/json", key="data_schema_download")

# --------------------------------------------------------------------- owner-only report
st.subheader("Column report")
st.caption("🔒 **Visible to you only — computed from your raw data.** Counts only; never exported.")
try:
    rep = cached.report(data.fingerprint, data.schema_json or "", data.df)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()
c1, c2, c3 = st.columns(3)
c1.metric("Rows", f"{rep['rows']:,}")
c2.metric("Columns", f"{len(data.df.columns)}")
c3.metric("Rows after contribution bounding", f"{rep['rows_after_bounding']:,}")
st.dataframe(
    pd.DataFrame([{"column": k, **{f: v.get(f) for f in ("kind", "usable", "clipped", "invalid", "missing", "replaced", "dropped")}}
                  for k, v in rep["columns"].items()]),
    hide_index=True, width="stretch",
    column_config={"usable": st.column_config.NumberColumn(help="rows that enter answers on this column"),
                   "clipped": st.column_config.NumberColumn(help="values outside the declared bounds, moved to the bound"),
                   "invalid": st.column_config.NumberColumn(help="unreadable as the declared kind, or an undeclared category")},
)
