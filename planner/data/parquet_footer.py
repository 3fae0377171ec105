"""Reading a Parquet file's footer without reading its rows: the checks every route shares.

:func:`planner.data.sources._check_parquet` (the command line and the app's DuckDB and Spark
routes) and :func:`planner.data.loader.load_table` (the pandas route, and every upload the app
shows) read the footer the same way: with DuckDB when it is installed, else with pyarrow.

Why DuckDB first: it is the default route's engine, so ``planner release`` never imports
pyarrow (issue 17), and DuckDB refuses a damaged footer with an error where pyarrow 26 can
abort the whole process: walking the column-chunk metadata of a footer whose size
statistics are inconsistent ("Repetition level histogram size mismatch") throws a C++
exception through a function that may not throw, which ends the interpreter (a 4.7 kB
upload would stop the app's server). ``pyarrow.parquet.read_table`` raises an ordinary
error on the same file, so the rows are still read by pyarrow after DuckDB's check.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Final

from planner.core.errors import DataError


def bad_parquet(label: str, truncated: bool) -> DataError:
    """The error for a Parquet file that cannot be read (the same from every engine)."""
    if truncated:
        return DataError(
            f"file {label!r} is not a valid Parquet file (missing Parquet markers; truncated "
            "or another format); re-export it as Parquet or CSV."
        )
    return DataError(
        f"file {label!r} could not be read as Parquet (corrupt or unsupported); re-export it."
    )


def parquet_chunks_fit(metadata: Any, size: int) -> bool:
    """Whether every column chunk the footer lists lies between the leading marker and the
    footer (a file cut inside, or spliced, points past its data: every engine's later
    read would fail, each with its own words). Metadata only: no page is read."""
    end = size - 8 - int(metadata.serialized_size)
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and chunk.dictionary_page_offset:
                start = min(start, chunk.dictionary_page_offset)
            if start < 4 or start + chunk.total_compressed_size > end:
                return False
    return True


def duckdb_module() -> Any:
    """:mod:`duckdb`, or ``None`` when it is not installed."""
    try:
        import duckdb
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return duckdb


def footer_connection(duckdb: Any, paths: tuple[Path, ...]) -> Any:
    """An in-memory DuckDB connection that may open ``paths`` and no other file."""
    con = duckdb.connect(config={"threads": 1})
    try:
        con.execute("SET allowed_paths = $p", {"p": [str(p) for p in paths]})
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


#: a column chunk that starts before the leading marker or ends past the footer's start
#: ($end); the sums in HUGEINT, so that no offset overflows (same test as
#: :func:`parquet_chunks_fit`)
CHUNKS_OUTSIDE: Final[str] = """
    SELECT count(*) FROM (
        SELECT CASE WHEN dictionary_page_offset IS NOT NULL AND dictionary_page_offset <> 0
                    THEN least(data_page_offset, dictionary_page_offset)
                    ELSE data_page_offset END AS start, total_compressed_size AS size
        FROM parquet_metadata($p))
    WHERE start IS NULL OR size IS NULL OR start < 4 OR start::HUGEINT + size::HUGEINT > $end
"""


def footer_by_duckdb(duckdb: Any, con: Any, path: Path, end: int, label: str
                      ) -> tuple[list[str], int, bool]:
    """(column names, row count, whether every chunk fits before ``end``) of a Parquet
    file, read by DuckDB from its footer; :func:`~planner.data.loader.bad_parquet` if DuckDB
    cannot parse the footer."""
    p = {"p": str(path)}
    try:
        meta = con.execute("SELECT num_rows FROM parquet_file_metadata($p)", p).fetchall()
        schema = con.execute("SELECT name, num_children FROM parquet_schema($p)", p).fetchall()
        outside = con.execute(CHUNKS_OUTSIDE, {**p, "end": end}).fetchall()
        if len(meta) != 1 or meta[0][0] is None:
            raise ValueError("one file, one row count")
        names = top_level_names(schema)
    except (duckdb.Error, ValueError, OverflowError) as exc:  # messages may quote the file: not shown
        raise bad_parquet(label, truncated=False) from exc
    return names, int(meta[0][0]), int(outside[0][0]) == 0


def top_level_names(schema: list[tuple[Any, Any]]) -> list[str]:
    """The column names of a Parquet schema listed depth first as (name, children): the
    root's children, each one's subtree skipped (as pyarrow's ``schema_arrow.names``).

    Raises
    ------
    ValueError
        The list is not one tree (a count past its end, a negative count, elements left
        over, a missing name).
    """
    if not schema:
        raise ValueError("no schema root")

    def children(i: int) -> int:
        n = schema[i][1]
        n = 0 if n is None else int(n)
        if n < 0:
            raise ValueError("a negative child count")
        return n

    names: list[str] = []
    i = 1
    for _ in range(children(0)):
        if i >= len(schema) or schema[i][0] is None:
            raise ValueError("a column past the schema's end, or without a name")
        names.append(str(schema[i][0]))
        pending = 1  # elements of this column's subtree not yet skipped
        while pending:
            if i >= len(schema):
                raise ValueError("a subtree past the schema's end")
            pending += children(i) - 1
            i += 1
    if i != len(schema):
        raise ValueError("schema elements outside the root's tree")
    return names


def footer_by_pyarrow(path: Path, size: int, label: str) -> tuple[list[str], int, bool]:
    """:func:`footer_by_duckdb` read by pyarrow (DuckDB is not installed)."""
    return _pyarrow_footer(path, size, label)


def footer_of_bytes(data: bytes, label: str) -> tuple[list[str], int, bool]:
    """(column names, row count, whether every chunk fits) of a Parquet file held in memory
    (an upload), read as :func:`planner.data.sources._check_parquet` reads a file: by DuckDB,
    from a private temporary copy removed at once, or by pyarrow without DuckDB. The
    caller has checked both ``PAR1`` markers. Raises :func:`~planner.data.loader.bad_parquet`."""
    duckdb = duckdb_module()
    size = len(data)
    if duckdb is None:
        return _pyarrow_footer(data, size, label)
    fd, name = tempfile.mkstemp(prefix="planner-footer-", suffix=".parquet")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        path = Path(name)
        con = footer_connection(duckdb, (path,))
        try:
            end = size - 8 - int.from_bytes(data[-8:-4], "little")
            return footer_by_duckdb(duckdb, con, path, end, label)
        finally:
            con.close()
    finally:
        os.unlink(name)


def _pyarrow_footer(source: Any, size: int, label: str) -> tuple[list[str], int, bool]:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(io.BytesIO(source) if isinstance(source, bytes) else source)
        names, rows = [str(n) for n in meta.schema_arrow.names], meta.metadata.num_rows
        fits = parquet_chunks_fit(meta.metadata, size)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise bad_parquet(label, truncated=False) from exc
    return names, rows, fits
