"""The SQL backends' face: :class:`SqlBackend`, a :class:`~planner.data.backends.base.Backend`
whose requests are compiled into SQL and run where the data is.

A subclass provides the engine (:meth:`SqlBackend._execute`: SQL and named parameters in,
rows out) and the source view with its column types, then calls :meth:`SqlBackend._setup`.
The rest is shared: the cells (:mod:`~planner.data.backends.sql.reading`), the request
compiler (:mod:`~planner.data.backends.sql.compile`), the bins
(:mod:`~planner.data.backends.sql.bins`), contribution bounding
(:mod:`~planner.data.backends.sql.bounding`) and the one-scan statement
(:mod:`~planner.data.backends.sql.statement`).
"""

from __future__ import annotations

import uuid
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from planner.core.errors import DataError, QueryError
from planner.data.backends import digest as dg
from planner.data.backends.base import Backend, absent_columns, nested_column
from planner.data.backends.cells import MAX_EXACT_ABS, _canonical_categories
from planner.data.backends.sql.bins import Binner
from planner.data.backends.sql.bounding import Bounding, bitmap_bits
from planner.data.backends.sql.compile import Compiler, DigestSlot, RowsSlot, Slot, StatsSlot
from planner.data.backends.sql.dialect import Dialect, Params, nested_type, type_class
from planner.data.backends.sql.reading import CellReader
from planner.data.backends.sql.statement import OneScan
from planner.data.requests import Request, Result
from planner.data.schema import ColumnKind, Schema


class SqlBackend(Backend):
    """Exact aggregates computed by a SQL engine (see :mod:`planner.data.backends.sql`).

    Results are computed lazily and kept; :meth:`prefetch` computes everything a plan
    requests in one statement (and, with ``report`` / ``digest``, the column report and
    the content digest in the same scan).
    """

    dialect: Dialect = Dialect()
    kind: str = "sql"
    counts_keys: ClassVar[bool] = True

    def _setup(self, schema: Schema, source_view: str, column_types: dict[str, str],
               *, csv_text: bool, salt: str | None = None, require_rows: bool = False,
               expected_rows: int | None = None, label: str | None = None) -> None:
        """Compile the schema over the source view (``column_types``: the engine type of
        each of its columns; ``label``: the file named in messages)."""
        absent = absent_columns(schema.names, list(column_types), label)
        if absent is not None:
            raise absent
        nested = [n for n in schema.names if nested_type(column_types[n])]
        if nested:
            raise nested_column(label, nested[0])
        self.schema = schema
        self._src = source_view
        #: statements that read the data so far (the release route needs one)
        self.passes = 0
        for col in schema.columns:
            if col.kind is ColumnKind.CATEGORICAL:
                _canonical_categories(col)  # duplicates → the same DataError as pandas
            if col.kind is ColumnKind.NUMERIC:
                lo, hi = col.bounds
                if max(abs(lo), abs(hi)) >= MAX_EXACT_ABS:
                    raise QueryError(
                        f"column {col.name!r}: bounds beyond ±2^62 cannot be summed exactly "
                        f"by the {self.kind} backend; use the pandas backend or smaller bounds."
                    )
        types = {n: type_class(column_types[n]) for n in schema.names}
        self._reader = CellReader(schema, self.dialect, types, csv_text, source_view, self._run_sql)
        self._compiler = Compiler(self._reader, self)
        self._bins = Binner(self._reader)
        self._bound = Bounding(self._reader, self, schema.salt if salt is None else salt, uuid.uuid4().hex[:12])
        self._scan = OneScan(self._compiler, self._bins, self._bound, self, require_rows=require_rows,
                             bits=bitmap_bits(expected_rows), one_pass_bins=csv_text)

    # ------------------------------------------------------------------ engine hooks
    @abstractmethod
    def _execute(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement; rows as tuples."""

    def _store(self, name: str, sql: str, params: Params) -> bool:
        """Compute a statement once and keep its rows in the engine under ``name``.

        The rows are private (bounding thresholds): they stay in the engine, never in Python.
        Returns False where the engine keeps nothing (this default): contribution bounding
        then ranks whole rows in one statement (:meth:`Bounding.kept_ranked`). DuckDB stores;
        on Spark the narrow plan ran the plan optimizer out of heap, so it ranks rows.
        """
        return False

    #: called (no arguments) just before each statement that reads the data: the command
    #: line waits for the first one before importing the release machinery, so that the
    #: imports do not hold the GIL while the scan is being set up
    on_read: Callable[[], None] | None = None

    def _run_sql(self, sql: str, params: Params) -> list[tuple[Any, ...]]:
        if self._src in sql:
            self.passes += 1
            if self.on_read is not None:
                self.on_read()
        try:
            return self._execute(sql, params.values)
        except (DataError, QueryError):
            raise
        except Exception as exc:  # engine messages may quote private cells: never show them
            raise DataError(
                f"the {self.kind} engine could not read or aggregate the data "
                f"({type(exc).__name__}); check the file's format, delimiter and quotes."
            ) from exc

    def _kept_with(self, p: Params, columns: Sequence[int]) -> str:
        """The ``WITH … kept AS (…)`` prefix of an aggregate statement: the conformed rows,
        bounded when somebody has more than c (engines may cache it)."""
        return self._bound.kept_ctes(p, columns, bounded=bool(self._scan.bounded))

    # ------------------------------------------------------------------ Backend API
    def evaluate(self, requests: Sequence[Request[Any]]) -> tuple[Result, ...]:
        """Every request compiled into one statement over one scan (those not computed yet:
        results are kept), then each result read from it."""
        self.prefetch(requests)
        return tuple(self._compiler.finish(r, self._scan.values.__getitem__) for r in requests)

    def prefetch(self, requests: Sequence[Request[Any]] = (), *, report: bool = False,
                 digest: bool = False) -> None:
        """Compute every request in one statement (one pass); with ``report`` the column
        report's counts and with ``digest`` the content digest too, in the same scan."""
        for r in requests:
            r.validate(self.schema)
        todo: list[Slot] = [n for r in requests for n in self._compiler.needs(r)]
        if report:
            todo += [RowsSlot(), *(StatsSlot(k) for k in range(len(self.schema.columns)))]
        if digest:
            todo.append(DigestSlot())
        self._scan.compute(todo)

    @property
    def rows(self) -> int:
        self._scan.compute([RowsSlot()])
        return int(self._scan.values[RowsSlot()])

    @property
    def rows_truncated(self) -> int:
        rows = self.rows  # the first statement also learns the rows before bounding
        return 0 if self._scan.total < 0 else self._scan.total - rows

    @property
    def unit_check(self) -> str | None:
        """How "nobody has more than c rows" was decided: "bitmap" (in the first
        statement), "grouping" (a pass by person), None (no person column / not yet)."""
        return self._scan.unit_check

    def column_report(self) -> dict[str, Any]:
        self.prefetch(report=True)
        return super().column_report()

    def content_digest(self) -> dg.ContentDigest:
        """The content digest (:mod:`planner.data.backends.digest`) of every row, computed in the
        engine; in the same scan as the aggregates when requested with :meth:`prefetch`."""
        self._scan.compute([DigestSlot()])
        rows, s1, s2 = self._scan.values[DigestSlot()]
        return dg.finish(self.schema.names, rows, s1, s2)
