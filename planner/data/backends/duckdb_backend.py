"""The DuckDB backend: exact aggregates computed in SQL where the data lies.

CSV and Parquet files (or globs of them) are scanned in place, never loaded into pandas;
a pandas DataFrame or an Arrow table the app already holds is scanned through DuckDB's
replacement scan; a table of a DuckDB database file is read in read-only mode. The SQL
comes from :mod:`planner.data.backends.sql` (one statement per plan with
:meth:`~planner.data.backends.sql.SqlBackend.prefetch`).

Notes
-----
``tests/benchmarks/bench_backends.py`` measures the route against the same aggregates as
hand-written DuckDB SQL and against a bare scan of the file, in one run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from planner.core.errors import DataError, PlannerError
from planner.data.backends.base import nested_column
from planner.data.backends.sql import Params, SqlBackend
from planner.data.schema import Schema
from planner.data.sources import FileSource, Source, TableSource, estimate_csv_rows, open_source

if TYPE_CHECKING:  # pandas and pyarrow are imported only for in-memory sources
    import pandas as pd
    import pyarrow as pa

    from planner.data.requests import Request


#: DuckDB's CSV read buffer: 8 MiB, four times its longest line (``max_line_size``, 2 MB;
#: ours, :data:`planner.data.loader.MAX_LINE_BYTES`, is 1 MiB). DuckDB's default (16 MB per
#: buffer, several held per thread) made the release statement's peak RSS 197-228 MB at
#: 1e7 CSV rows; 8 MiB: 145-153 MB, as fast (tests/benchmarks/bench_backends.py).
CSV_BUFFER_BYTES: int = 8 << 20


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise PlannerError(
            "the duckdb backend needs the duckdb package; install it with "
            "pip install '.[duckdb]' or choose --backend pandas."
        ) from exc
    return duckdb


def duckdb_available() -> bool:
    """Whether :mod:`duckdb` can be imported."""
    try:
        import duckdb  # noqa: F401
    except ImportError:  # pragma: no cover
        return False
    return True


class DuckDBBackend(SqlBackend):
    """Exact aggregates of a file, glob, DataFrame or DuckDB table, computed by DuckDB.

    Parameters
    ----------
    source : FileSource, TableSource, str, pandas.DataFrame or pyarrow.Table
        A :mod:`planner.data.sources` source; a string is resolved inside the allow-listed
        data directory (:func:`planner.data.sources.open_source`).
    schema : Schema
        The declaration.
    salt : str or None
        Overrides ``schema.salt`` for the contribution-bounding hash.
    threads, memory_limit : optional
        DuckDB settings (default: all cores; ``PLANNER_DUCKDB_MEMORY_LIMIT`` if set, else
        DuckDB's default of 80% of RAM). Past the limit DuckDB spills to a private
        temporary directory.
    typed_csv : bool
        Read a CSV's numeric columns as DOUBLE where that gives what the cell-reading
        rules give (:meth:`typed_columns`), for one :meth:`prefetch` of the column report
        and the content digest: that statement reads every declared cell, so once it has
        succeeded no later one can meet a cell DuckDB cannot convert. If it fails, the
        file is read as text again and the statement repeated (:attr:`read_as`). The
        release route's scan (:class:`planner.data.backends.BackgroundScan`) asks for it.

    Examples
    --------
    >>> from planner.data.schema import Column, ColumnKind, MissingRule, Schema
    >>> s = Schema((Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),))
    >>> import pandas as pd
    >>> from planner.data.requests import ClippedSum
    >>> b = DuckDBBackend(pd.DataFrame({"age": ["30", "150", None]}), s)
    >>> b.result(ClippedSum("age"))
    SumAggregate(value=130.0, n=2, clipped=1, dropped=1)
    """

    kind = "duckdb"

    def __init__(
        self,
        source: Source | str | pd.DataFrame | pa.Table,
        schema: Schema,
        salt: str | None = None,
        *,
        threads: int | None = None,
        memory_limit: str | None = None,
        typed_csv: bool = False,
    ) -> None:
        duckdb = _duckdb()
        if isinstance(source, str):
            source = open_source(source)
        self.source = source
        #: the numeric columns read as DOUBLE from CSV text (empty: every cell is read as text)
        self.typed: tuple[str, ...] = self.typed_columns(source, schema) if typed_csv else ()
        #: how the CSV cells were read: "typed" (:attr:`typed` as DOUBLE), "text", or
        #: "text after typed" (the typed statement failed and was repeated on text)
        self.read_as = "typed" if self.typed else "text"
        self._typed_proven = False
        self._declared = schema.names
        view = f"planner_src_{uuid.uuid4().hex[:12]}"
        if isinstance(source, TableSource):
            self._con = duckdb.connect(str(source.database), read_only=True)
        else:
            self._con = duckdb.connect()
        self._configure(duckdb, source, threads, memory_limit)
        try:
            names, types, expected, csv_text = self._open(source, view)
        except PlannerError:
            self.close()
            raise
        except duckdb.PermissionException as exc:  # its message names the outside path
            self.close()
            raise DataError(
                f"data source {getattr(source, 'label', 'table')!r} reads a file outside the "
                "source (a view or macro over read_csv, read_parquet or another file); "
                "reading other files through a database is refused. Store the rows in a "
                "table of the database (CREATE TABLE ... AS SELECT ...), or name the data "
                "file itself as the source."
            ) from exc
        except Exception as exc:  # messages may quote private cells
            self.close()
            raise DataError(
                f"DuckDB could not read the data source ({type(exc).__name__}); check the "
                "file's format, delimiter and quotes."
            ) from exc
        self.source_columns = tuple(names)
        self._setup_args = (schema, csv_text, salt, isinstance(source, FileSource), expected)
        label = source.label if isinstance(source, (FileSource, TableSource)) else None
        try:
            self._setup(schema, self._src, dict(zip(names, types, strict=True)),
                        csv_text=csv_text, salt=salt, require_rows=isinstance(source, FileSource),
                        expected_rows=expected, label=label)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def typed_columns(source: object, schema: Schema) -> tuple[str, ...]:
        """The CSV columns DuckDB may read as DOUBLE: the declared numeric columns (not
        the privacy unit's), when the file's whole-file checks found no number look-alike
        (:func:`planner.data.sources.numbers_plain`) or are still running (their verdict then
        decides, :class:`planner.data.backends.BackgroundScan`).

        DuckDB's CSV reader, asked for DOUBLE, accepts exactly the cells that
        ``TRY_CAST(… AS DOUBLE)`` of their text reads, with the same value, and refuses
        the others (``tests/engine/test_typed_csv.py``: 40,000 random cells, bit for bit;
        600,000 more when this was written);
        the text route casts with ``TRY_CAST`` wherever :meth:`Dialect.number_guard`
        allows, which is every cell of a file without a look-alike. Cells the rules read
        otherwise (blanks, NA tokens, text) make the typed read fail, and the statement is
        repeated on text; when the file's first rows already hold one
        (:func:`planner.data.sources.head_numbers_plain`), it is read as text at once. Reading
        numbers instead of text saves the cast of every cell
        (measured at 1e7 rows: CPU 5.3 → 4.3 s for the release statement).
        """
        from planner.data.schema import ColumnKind
        from planner.data.sources import head_numbers_plain, numbers_plain

        if not isinstance(source, FileSource) or source.kind == "parquet":
            return ()
        if not (source.pending is not None or numbers_plain(source)):
            return ()
        unit = schema.unit.column
        names = tuple(c.name for c in schema.columns
                      if c.kind is ColumnKind.NUMERIC and c.name != unit and c.name in source.header)
        # a refused cell already in the file's head (an NA token): text at once, no wasted pass
        return names if head_numbers_plain(source, names) else ()

    def prefetch(self, requests: Sequence[Request[Any]] = (), *, report: bool = False,
                 digest: bool = False) -> None:
        """:meth:`SqlBackend.prefetch`; with :attr:`typed` columns, the statement that
        proves every cell converts (``report`` and ``digest``: it reads them all), and on
        failure the same on the file read as text."""
        if not self.typed or self._typed_proven:
            super().prefetch(requests, report=report, digest=digest)
            return
        qs = list(requests)
        if not (report and digest):  # a statement that skips a column proves nothing of it
            self._read_as_text()
            super().prefetch(qs, report=report, digest=digest)
            return
        try:
            super().prefetch(qs, report=report, digest=digest)
            self._typed_proven = True  # every declared cell has been read: later statements are safe
        except DataError as exc:
            duckdb = _duckdb()
            cause = exc.__cause__
            if not isinstance(cause, duckdb.Error) or isinstance(cause, duckdb.InterruptException):
                raise
            # a cell DuckDB does not read as DOUBLE (its message, which quotes the cell,
            # is dropped): the rules decide, on the text
            self._read_as_text()
            self.read_as = "text after typed"
            super().prefetch(qs, report=report, digest=digest)

    def _read_as_text(self) -> None:
        """Read every CSV cell as text from now on: the view again, the compiler set up
        again (the statements so far are still counted in :attr:`passes`)."""
        assert isinstance(self.source, FileSource)
        self.typed = ()
        self.read_as = "text"
        passes, on_read = self.passes, self.on_read
        self._con.execute(f"DROP VIEW IF EXISTS {self._src}")
        names, types, _, _ = self._open(self.source, self._src)
        schema, csv_text, salt, require_rows, expected = self._setup_args
        self._setup(schema, self._src, dict(zip(names, types, strict=True)), csv_text=csv_text,
                    salt=salt, require_rows=require_rows, expected_rows=expected, label=self.source.label)
        self.passes, self.on_read = passes, on_read

    def _configure(self, duckdb: Any, source: Source | pd.DataFrame | pa.Table,
                   threads: int | None, memory_limit: str | None) -> None:
        """Settings of the connection, locked at the end: no order kept, a private spill
        directory, threads and memory limit, and no file but the source's."""
        # only aggregates come back: no order to keep, and less held in memory
        self._con.execute("SET preserve_insertion_order = false")
        self._con.execute("SET enable_progress_bar = false")
        # spilling (bounding ranks every row of the people over c) goes to a private
        # temporary directory, never next to the data or into the working directory
        self._spill = tempfile.mkdtemp(prefix="planner-duckdb-")
        # removed by close(), or when the backend is collected without one
        self._remove_spill = weakref.finalize(self, shutil.rmtree, self._spill, ignore_errors=True)
        self._con.execute("SET temp_directory = $d", {"d": self._spill})
        if threads is not None:
            self._con.execute("SET threads = $t", {"t": int(threads)})
        if memory_limit is None:
            memory_limit = os.environ.get("PLANNER_DUCKDB_MEMORY_LIMIT") or None
        if memory_limit is not None:
            try:
                self._con.execute("SET memory_limit = $m", {"m": str(memory_limit)})
            except duckdb.Error as exc:
                self.close()
                raise PlannerError(
                    f"DuckDB memory limit {memory_limit!r} is not valid ({type(exc).__name__}); "
                    "use a size such as '2GB' or '500MB' (PLANNER_DUCKDB_MEMORY_LIMIT)."
                ) from exc
        # external access off: the source's own files are the only ones DuckDB may open
        # (a view or macro in a database file cannot read anything outside); the settings
        # are then locked (issue 16, finding 6)
        allowed = [str(p) for p in source.paths] if isinstance(source, FileSource) else []
        self._con.execute("SET allowed_paths = $p", {"p": allowed})
        self._con.execute("SET enable_external_access = false")
        self._con.execute("SET lock_configuration = true")

    def _open(self, source: Source | pd.DataFrame | pa.Table, view: str
              ) -> tuple[list[str], list[str], int | None, bool]:
        """Make the source readable as ``self._src``: (column names, engine types, expected
        rows, whether the cells are CSV text). Errors are the caller's to translate."""
        if isinstance(source, FileSource):
            files = [str(p) for p in source.paths]
            csv_text = source.kind != "parquet"
            if not csv_text:
                rel = self._con.read_parquet(files)
                # row count from the files' metadata: no data read
                expected: int | None = int(rel.aggregate("count(*)").fetchall()[0][0])
            else:
                typed = set(self.typed)
                rel = self._con.read_csv(
                    files, header=True, sep=source.delimiter, quotechar='"', escapechar='"',
                    null_padding=False, strict_mode=True, auto_detect=False,
                    columns={h: "DOUBLE" if h in typed else "VARCHAR" for h in source.header},
                    buffer_size=CSV_BUFFER_BYTES,
                )
                expected = estimate_csv_rows(source)
            rel.create_view(view)
            self._src = view
            return list(rel.columns), [str(t) for t in rel.dtypes], expected, csv_text
        if isinstance(source, TableSource):
            rows = self._con.execute(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_name = $t ORDER BY table_schema = 'main' DESC",
                {"t": source.table},
            ).fetchall()
            if not rows:
                raise DataError(
                    f"table {source.table!r} does not exist in {source.database.name!r}; "
                    "check the table name."
                )
            src = f"{self.dialect.ident(rows[0][0])}.{self.dialect.ident(rows[0][1])}"
            rel = self._con.sql(f"SELECT * FROM {src}")
            names, types = list(rel.columns), [str(t) for t in rel.dtypes]
            expected = int(self._con.sql(f"SELECT count(*) FROM {src}").fetchall()[0][0])
            self._src = src
            return names, types, expected, False
        frame = _as_arrow(source, self._declared)
        self._con.register(view, frame)
        types = [str(t) for t in self._con.sql(f"SELECT * FROM {view}").dtypes]
        self._src = view
        return list(frame.column_names), types, frame.num_rows, False

    def _execute(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._con.execute(sql, params).fetchall()
        return rows

    def _store(self, name: str, sql: str, params: Params) -> bool:
        self._run_sql(f"CREATE TEMP TABLE {name} AS {sql}", params)
        return True

    def close(self) -> None:
        """Close the DuckDB connection."""
        con = getattr(self, "_con", None)
        if con is not None:
            con.close()
        remove = getattr(self, "_remove_spill", None)
        if remove is not None:
            remove()

    def __enter__(self) -> DuckDBBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_arrow(frame: pd.DataFrame | pa.Table, declared: Sequence[str] = ()) -> pa.Table:
    """An Arrow table whose text columns are strings, cell by cell as pandas reads them.

    Object columns (mixed values) become strings exactly as the pandas backend reads
    them (``astype("string")``): 7 → "7", NaN → NULL. A ``declared`` column whose cells
    are nested values (lists, dicts) is refused first, as the pandas backend refuses it
    (:func:`~planner.data.backends.base.nested_column`), rather than read as their text.
    """
    import pandas as pd
    import pyarrow as pa

    from planner.data.backends.pandas_backend import nested_columns

    if isinstance(frame, pa.Table):
        return frame
    if not isinstance(frame, pd.DataFrame):
        raise DataError(
            f"cannot read data from a {type(frame).__name__}; pass a source, a path in the "
            "data directory, or a DataFrame."
        )
    df = frame.copy(deep=False)
    df.columns = [str(c) for c in df.columns]
    nested = nested_columns(df, [n for n in declared if n in df.columns])
    if nested:
        raise nested_column(None, nested[0])
    for c in df.columns:
        if df[c].dtype == object or isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype("string")
    return pa.Table.from_pandas(df, preserve_index=False)


__all__ = ["DuckDBBackend", "duckdb_available"]

