"""Backends: exact, clipped, contribution-bounded aggregates over declared domains.

:class:`~planner.data.backends.base.Backend` is the interface. Three implementations return
identical aggregates on the same data (``tests/engine/test_backends_conformance.py``):

* :class:`PandasBackend`: a DataFrame in memory (the reference implementation);
* :class:`~planner.data.backends.duckdb_backend.DuckDBBackend`: SQL on CSV / Parquet files
  scanned in place, a DataFrame, or a DuckDB table (the default when duckdb is installed);
* :class:`~planner.data.backends.spark_backend.SparkBackend`: the same SQL on a Spark cluster.

:func:`make_backend` builds one by name; the DuckDB and Spark modules are imported only
when chosen.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, Final, Literal

from planner.core.errors import DataError, PlannerError
from planner.data.backends.base import Backend
from planner.data.requests import (
    BinCounts,
    BooleanCounts,
    ColumnStats,
    CountAggregate,
    QuantileAggregate,
    Request,
    SumAggregate,
)
from planner.data.schema import Schema

if TYPE_CHECKING:
    import pandas as pd

    from planner.data.backends.pandas_backend import (
        PandasBackend,
        bound_contributions,
        conform_column,
    )

#: imported on first use (pandas): the DuckDB route starts without it
_LAZY: Final[frozenset[str]] = frozenset({"PandasBackend", "bound_contributions", "conform_column"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from planner.data.backends import pandas_backend

        return getattr(pandas_backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

BackendKind = Literal["pandas", "duckdb", "spark"]
#: Every backend name, in order of preference for the default.
BACKENDS: Final[tuple[str, ...]] = ("pandas", "duckdb", "spark")


def available_backends() -> tuple[str, ...]:
    """Backends usable here: pandas always; duckdb if importable; spark if PySpark and Java are.

    Examples
    --------
    >>> "pandas" in available_backends()
    True
    """
    out = ["pandas"]
    if importlib.util.find_spec("duckdb") is not None:
        out.append("duckdb")
    if importlib.util.find_spec("pyspark") is not None:
        from planner.data.backends.spark_backend import java_available

        if java_available():
            out.append("spark")
    return tuple(out)


def default_backend() -> str:
    """``duckdb`` if it is importable, else ``pandas``."""
    return "duckdb" if importlib.util.find_spec("duckdb") is not None else "pandas"


def _load_frame(source: Any) -> tuple[pd.DataFrame, str | None]:
    """(a pandas DataFrame of a source, the name of its file for messages); files are
    loaded with the planner's loader."""
    import pandas as pd

    from planner.data.loader import load_table
    from planner.data.sources import FileSource, TableSource, open_source

    if isinstance(source, pd.DataFrame):
        return source, None
    if isinstance(source, (str, os.PathLike)):
        source = open_source(source)
    if isinstance(source, FileSource):
        frames = [
            load_table(p, name=source.label if len(source.files) == 1 else p.name)
            for p in source.files
        ]
        return (frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)), source.label
    if isinstance(source, TableSource):
        raise DataError(
            "a DuckDB table is read by the duckdb backend; choose --backend duckdb."
        )
    if isinstance(source, (bytes, bytearray, memoryview)) or hasattr(source, "read"):
        label = str(getattr(source, "name", "") or "upload")
        return load_table(source, name=label), label
    raise DataError(
        f"cannot read data from a {type(source).__name__}; pass a path in the data "
        "directory, a source, a DataFrame or an upload."
    )


def make_backend(
    kind: str,
    source: Any,
    schema: Schema,
    *,
    spark_master: str | None = None,
    salt: str | None = None,
    typed_csv: bool = False,
) -> Backend:
    """A backend of the given kind over ``source``.

    Parameters
    ----------
    kind : {"pandas", "duckdb", "spark"}
        The engine.
    source : str, FileSource, TableSource, DataFrame, bytes or a binary file object
        A string is a path or glob inside the allow-listed data directory
        (:func:`planner.data.sources.open_source`), or ``DB.duckdb::table``. Bytes / uploads
        are loaded by pandas, or spilled to a temporary file for DuckDB
        (deleted when the backend is closed).
    schema : Schema
        The declaration.
    spark_master : str, optional
        Master URL of a new Spark session (default ``PLANNER_SPARK_MASTER``, else the
        active session, else ``local[*]``: :func:`~planner.data.backends.spark_backend.get_session`).
    salt : str, optional
        Overrides ``schema.salt`` for contribution bounding.
    typed_csv : bool
        DuckDB: read a CSV's numeric columns as numbers for the first ``prefetch`` (see
        :class:`~planner.data.backends.duckdb_backend.DuckDBBackend`); other engines ignore it.

    Raises
    ------
    PlannerError
        Unknown kind, or the engine is not installed (with what to install).
    """
    name = str(kind).strip().lower()
    if name == "pandas":
        from planner.data.backends.pandas_backend import PandasBackend

        frame, label = _load_frame(source)
        return PandasBackend(frame, schema, salt, label=label)
    if name == "duckdb":
        from planner.data.backends.duckdb_backend import DuckDBBackend

        if isinstance(source, (bytes, bytearray, memoryview)) or hasattr(source, "read"):
            return _spilled(source, schema, salt)
        return DuckDBBackend(source, schema, salt, typed_csv=typed_csv)
    if name == "spark":
        from planner.data.backends.spark_backend import SparkBackend

        if isinstance(source, (bytes, bytearray, memoryview)) or hasattr(source, "read"):
            return SparkBackend(_load_frame(source)[0], schema, salt, master=spark_master)
        return SparkBackend(source, schema, salt, master=spark_master)
    raise PlannerError(f"backend must be one of {list(BACKENDS)}; got {kind!r}.")


def _spilled(upload: bytes | bytearray | memoryview | IO[bytes], schema: Schema,
             salt: str | None) -> Backend:
    """A DuckDB backend over an upload spilled to a temporary file (removed on close)."""
    from planner.data.backends.duckdb_backend import DuckDBBackend
    from planner.data.sources import spill_upload

    ctx = spill_upload(upload)
    src = ctx.__enter__()
    try:
        backend = DuckDBBackend(src, schema, salt)
    except BaseException:
        ctx.__exit__(None, None, None)
        raise
    close = backend.close

    def close_and_delete() -> None:
        close()
        ctx.__exit__(None, None, None)

    backend.close = close_and_delete  # type: ignore[method-assign]
    return backend


class BackgroundScan:
    """A backend built and filled in a worker thread: every aggregate a plan requests, the
    column report and the content digest, in one pass over the data (one statement where
    the engine allows it).

    The command line starts it as soon as the plan spec is read and imports the release
    machinery and plans meanwhile: DuckDB and Spark release the GIL while they scan.
    :meth:`result` waits and returns the backend (or raises the scan's error); the caller
    then owns it and closes it (:func:`close_backend`). :meth:`cancel` stops a scan whose
    result is no longer wanted. A source whose whole-file checks are still running
    (:class:`planner.data.sources.WholeFileCheck`) is read meanwhile; their verdict is awaited
    before the backend is handed over: an error replaces the scan's result, and a file
    found not to be UTF-8 past its head is opened again as the checks decide and read
    again (:attr:`source` is then the new source).

    DuckDB reads a CSV's numeric columns as numbers here (``typed_csv``, see
    :class:`~planner.data.backends.duckdb_backend.DuckDBBackend`), unless the checks have found
    a number look-alike ('1_000'); found only while the scan read, the scan is discarded
    and the file read again as text.

    Parameters
    ----------
    kind, source, schema, spark_master
        As for :func:`make_backend`.
    requests : sequence of Request
        Every aggregate the plan needs (:mod:`planner.data.requests`; a plan's queries give
        theirs through :func:`planner.planning.statistics.plan_requests`), computed in the
        same pass.
    """

    #: the name of the scan's thread
    THREAD = "planner-scan"

    def __init__(self, kind: str, source: Any, schema: Schema, requests: Sequence[Request[Any]], *,
                 spark_master: str | None = None) -> None:
        self.kind = kind
        self.source = source
        self._engine: Backend | None = None
        self._error: BaseException | None = None
        self._reading = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(schema, tuple(requests), spark_master), name=self.THREAD,
            daemon=True,
        )
        self._thread.start()

    def _run(self, schema: Schema, requests: tuple[Request[Any], ...], spark_master: str | None) -> None:
        try:
            try:
                self._engine = self._scan(self.source, schema, requests, spark_master)
            except BaseException as exc:
                self._error = exc
            pending = getattr(self.source, "pending", None)
            if pending is None:
                return
            # The source was opened with its whole-file checks still running
            # (planner.data.sources.WholeFileCheck): their verdict decides before the scan's.
            try:
                reopen = pending.verdict()
            except BaseException as exc:
                self._discard()
                self._error = exc
                return
            from planner.data.sources import file_source, numbers_plain

            if reopen:  # a file read as UTF-8 is not UTF-8 further on: read it as the check decides
                self._discard()
                self._error = None
                self.source = file_source(self.source.files, self.source.label)
                self._engine = self._scan(self.source, schema, requests, spark_master)
            elif getattr(self._engine, "typed", ()) and not numbers_plain(self.source):
                # numbers read as DOUBLE, and the checks found a cell DuckDB reads as a
                # number and the rules as text ('1_000'): read the file again as text
                self._discard()
                self._error = None
                self._engine = self._scan(self.source, schema, requests, spark_master, typed=False)
        except BaseException as exc:  # re-raised by result(), in the caller's thread
            self._error = exc
        finally:
            self._reading.set()

    def _scan(self, source: Any, schema: Schema, requests: tuple[Request[Any], ...], spark_master: str | None,
              *, typed: bool = True) -> Backend:
        """A backend of ``source`` with every request computed (``typed``: DuckDB may read a
        CSV's numeric columns as numbers)."""
        if self.kind.strip().lower() == "pandas":  # pandas reads the file in make_backend
            self._reading.set()
        engine = make_backend(self.kind, source, schema, spark_master=spark_master, typed_csv=typed)
        self._engine = engine
        from planner.data.backends.sql import SqlBackend

        if isinstance(engine, SqlBackend):
            engine.on_read = self._reading.set
        engine.prefetch(requests, report=True, digest=True)
        return engine

    def _discard(self) -> None:
        """Close the backend of a scan whose result will not be used."""
        if self._engine is not None:
            close_backend(self._engine)
            self._engine = None

    def wait_reading(self, timeout: float | None = None) -> bool:
        """Wait until the scan's engine has started reading the data (or the scan ended).

        The command line imports the release machinery after this: DuckDB and Spark
        release the GIL while they read, whereas setting the scan up (importing the
        engine, compiling the statement) needs it. Returns whether reading started
        within ``timeout``.
        """
        return self._reading.wait(timeout)

    def result(self) -> Backend:
        """The filled backend (waits for the scan); the scan's error, raised here."""
        self._thread.join()
        if self._error is not None:
            if self._engine is not None:
                close_backend(self._engine)
            raise self._error
        assert self._engine is not None
        return self._engine

    def cancel(self) -> None:
        """Stop the scan (DuckDB: interrupt the statement) and release the backend."""
        con = getattr(self._engine, "_con", None)
        if con is not None and self._thread.is_alive():
            try:
                con.interrupt()
            except Exception:  # pragma: no cover - the statement may just have finished
                pass
        self._thread.join()
        if self._engine is not None:
            close_backend(self._engine)


def check_backend(backend: Backend, *, allow_invalid: bool = False) -> dict[str, Any]:
    """:func:`planner.data.loader.check_against_schema` for any backend: its column report.

    Raises
    ------
    DataError
        Unless ``allow_invalid``, a numeric column holding text that is not a number or a
        boolean column holding tokens that are not booleans (counts only, never values).
    """
    from planner.data.loader import refuse_invalid_cells

    report = backend.column_report()
    if not allow_invalid:
        refuse_invalid_cells(backend.schema, report)
    return report


def close_backend(backend: Backend) -> None:
    """Release a backend's engine resources (no-op for pandas)."""
    close = getattr(backend, "close", None)
    if callable(close):
        close()


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendKind",
    "BackgroundScan",
    "BinCounts",
    "BooleanCounts",
    "ColumnStats",
    "CountAggregate",
    "PandasBackend",
    "QuantileAggregate",
    "SumAggregate",
    "available_backends",
    "bound_contributions",
    "check_backend",
    "close_backend",
    "conform_column",
    "default_backend",
    "make_backend",
]
