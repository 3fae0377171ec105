"""The logic of ``planner validate --data FILE --schema SCHEMA.json``.

Loads the schema and the table, checks one against the other and returns a JSON-able
report of counts (never values). The report is data-dependent: it is for the data owner
and must not be shared with a release (docs/mathematics.md §7).
"""

from __future__ import annotations

from typing import Any

from planner.core.keys import keyed_fingerprint
from planner.data.loader import check_against_schema, load_table, read_source
from planner.data.schema import Schema, dataset_fingerprint


def validate_command(
    data_path: str, schema_path: str, backend: str | None = None, spark_master: str | None = None
) -> dict[str, Any]:
    """Validate a data file against a schema file.

    Parameters
    ----------
    data_path : str
        CSV, TSV or Parquet file.
    schema_path : str
        Schema JSON file.

    Returns
    -------
    dict
        ``data`` (file name), ``fingerprint`` (the file's *keyed* fingerprint,
        HMAC-SHA256 with the server secret, :func:`planner.core.keys.keyed_fingerprint`: it
        matches the ledger's version fingerprints and cannot be used to test a guess about
        the data, unlike a bare hash), ``schema_hash``,
        ``relation``, ``privacy_unit``, ``rows``, ``columns``, ``undeclared_columns``,
        ``rows_after_bounding``, ``rows_truncated`` and ``column_report`` (per declared
        column: kind, rows, usable, clipped, invalid, missing, replaced, dropped).

    Raises
    ------
    PlannerError
        A :class:`~planner.core.errors.SchemaError` or :class:`~planner.core.errors.DataError`
        whose message names the file or column and the fix.
    """
    from planner.data.backends import check_backend, close_backend, default_backend, make_backend
    from planner.data.sources import FileSource, open_cli_source, source_fingerprint

    schema = Schema.load(schema_path)
    kind = (backend or default_backend()).strip().lower()
    if kind == "pandas":
        data, label = read_source(data_path)
        df = load_table(data, name=label)
        report = check_against_schema(df, schema)
        return {
            "data": label,
            "backend": kind,
            "fingerprint": keyed_fingerprint(dataset_fingerprint(data)),
            "schema_hash": schema.schema_hash(),
            "relation": schema.relation.value,
            "privacy_unit": schema.unit.to_dict(),
            "rows": len(df),
            "columns": len(df.columns),
            "undeclared_columns": [c for c in df.columns if c not in schema.names],
            "rows_after_bounding": report["rows_after_bounding"],
            "rows_truncated": report["rows_truncated"],
            "column_report": report["columns"],
        }
    source = open_cli_source(data_path)
    engine = make_backend(kind, source, schema, spark_master=spark_master)
    try:
        report = check_backend(engine)
        names: tuple[str, ...] = getattr(engine, "source_columns", schema.names)
    finally:
        close_backend(engine)
    label = source.files[0].name if isinstance(source, FileSource) and len(source.files) == 1 else source.label
    return {
        "data": label,
        "backend": kind,
        "fingerprint": keyed_fingerprint(source_fingerprint(source)),
        "schema_hash": schema.schema_hash(),
        "relation": schema.relation.value,
        "privacy_unit": schema.unit.to_dict(),
        "rows": report["rows"],
        "columns": len(names),
        "undeclared_columns": [c for c in names if c not in schema.names],
        "rows_after_bounding": report["rows_after_bounding"],
        "rows_truncated": report["rows_truncated"],
        "column_report": report["columns"],
    }
