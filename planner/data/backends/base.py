"""The backend interface: exact, clipped, contribution-bounded aggregates.

A backend holds the private table and evaluates *requests* (:mod:`planner.data.requests`:
frozen values naming a count, a clipped sum, bin counts…) into small typed results; it
knows nothing of queries or statistics. Mechanisms take these results and never see a
DataFrame. Noise, budget accounting and the choice of what to release happen elsewhere,
in one trusted process (notes/engines.md §6).

Contract every backend (pandas, DuckDB, Spark) must meet identically:

1. **Contribution bounding** first: with a person-level privacy unit, at most c rows per
   person are kept, ordered by a salted hash of the row's declared values (ties, i.e.
   identical rows, by position), before any aggregate. SQL:
   ``row_number() OVER (PARTITION BY id ORDER BY hash(cols, salt)) <= c``. Which of a
   person's rows are kept may differ between engines (different hash functions); every
   choice is valid, because it depends on that person's rows only.
2. **Missing and invalid values** follow the column's declared :class:`MissingRule`:
   missing = NULL, NaN, ±inf, empty / whitespace-only string (and the text tokens
   ``nan``, ``na``, ``n/a``, ``null``, ``none`` in a numeric column); invalid = text that
   is not a number (numeric) or not a boolean token (boolean). ``drop`` leaves the row out
   of every aggregate on that column; ``replace`` substitutes the declared value. For a
   categorical column an *undeclared* value is not missing: it goes to the "other" bin if
   declared, else to no bin. Strings are compared after stripping surrounding blanks.
3. **Clipping** to the declared [L, U] before summing, binning or ranking.
4. **Declared domains only**: bin counts over ALL declared bins, zeros included, in the
   declared order; nothing else is returned.
5. **Quantile grids**: a value x (clipped) is counted at the smallest candidate t ≥ x.
   For an equally spaced grid this is ``ceil((x − L)/step)`` in SQL.
6. **One verdict per table**: a declared column missing from the data (or present only
   under a name with an invisible character, :func:`absent_columns`), or holding nested
   values (:func:`nested_column`), is refused by every backend with the same message.

Every aggregate also carries ``dropped``: the rows left out by the missing-value rule.
The aggregates are exact and therefore *private*: they must never be shown or exported
(docs/mathematics.md §7).
"""

from __future__ import annotations

import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

from planner.core.errors import DataError, QueryError
from planner.data.backends.digest import ContentDigest
from planner.data.requests import (
    BinCounts,
    BooleanCounts,
    ColumnStats,
    CountAggregate,
    GroupResults,
    KeyCounts,
    QuantileAggregate,
    Request,
    Result,
    Stats,
    SumAggregate,
)
from planner.data.schema import Schema

R = TypeVar("R")


class Backend(ABC):
    """Evaluates the exact aggregates a plan requests (see the module docstring's contract).

    One abstract evaluator, :meth:`evaluate`, compiles or walks every kind of request; a
    new kind of aggregate adds a branch to it, not a method to this interface.
    """

    schema: Schema
    #: Whether :class:`~planner.data.requests.Keys` requests are evaluated (partition
    #: selection checks it before a release spends anything).
    counts_keys: ClassVar[bool] = False

    @property
    @abstractmethod
    def rows(self) -> int:
        """Rows after contribution bounding."""

    @property
    @abstractmethod
    def rows_truncated(self) -> int:
        """Rows removed by contribution bounding (beyond c per person)."""

    @abstractmethod
    def evaluate(self, requests: Sequence[Request[Any]]) -> tuple[Result, ...]:
        """The exact result of each request, in order.

        Each request is checked against the schema first
        (:meth:`~planner.data.requests.Request.validate`): :class:`QueryError` naming the
        column and the fix when it does not fit.
        """

    def prefetch(self, requests: Sequence[Request[Any]] = (), *, report: bool = False,
                 digest: bool = False) -> None:
        """Compute ``requests`` ahead (and with ``report`` the column report's counts, with
        ``digest`` the content digest), in one pass over the data where the engine allows:
        later :meth:`evaluate` calls for them read the results kept. This default simply
        computes them."""
        self.evaluate(requests)
        if report:
            self.column_report()
        if digest:
            self.content_digest()

    def result(self, request: Request[R]) -> R:
        """The result of one request (:meth:`evaluate`), typed as the request says."""
        out: Any = self.evaluate((request,))[0]
        return out  # type: ignore[no-any-return]

    @abstractmethod
    def content_digest(self) -> ContentDigest:
        """The table's content digest (:mod:`planner.data.backends.digest`): every row of the
        declared columns, before contribution bounding; identical in every backend.

        PRIVATE, like the aggregates: it must never be shown, logged or exported; only a
        keyed hash of it may leave the process.
        """

    def column_stats(self, column: str) -> ColumnStats:
        """Usable / clipped / invalid / missing counts of one declared column."""
        return self.result(Stats(column))

    def column_report(self) -> dict[str, Any]:
        """Counts only (data-dependent, for the data owner): rows and per-column stats."""
        stats = self.evaluate([Stats(c.name) for c in self.schema.columns])
        return {
            "rows": self.rows + self.rows_truncated,
            "rows_after_bounding": self.rows,
            "rows_truncated": self.rows_truncated,
            "columns": {
                c.name: {"kind": c.kind.value, **s.to_dict()}
                for c, s in zip(self.schema.columns, stats, strict=True)
                if isinstance(s, ColumnStats)
            },
        }


def _visible(name: str) -> str:
    """``name`` without its invisible format characters (Unicode category Cf: byte-order
    marks, zero-width spaces and joiners, direction marks)."""
    return "".join(ch for ch in name if unicodedata.category(ch) != "Cf")


def absent_columns(declared: Sequence[str], present: Sequence[str], label: str | None = None) -> DataError | None:
    """The error for declared columns the data does not have (``None`` when it has them all).

    A name present with an invisible character in it (a stray byte-order mark, a
    zero-width space) looks like the declared one on every screen: the message says so,
    and how to fix it, rather than that the column is not there. Every backend raises
    this one message (column names are public: they are the schema's); ``label`` names
    the file."""
    absent = [n for n in declared if n not in present]
    if not absent:
        return None
    where = f"file {label!r}: " if label else ""
    near = {_visible(p): p for p in present if _visible(p) != p}
    for name in absent:
        if name in near:
            hidden = ", ".join(f"U+{ord(ch):04X}" for ch in near[name] if unicodedata.category(ch) == "Cf")
            return DataError(
                f"{where}column {name!r} is declared in the schema, and the data has it as {near[name]!r}: its "
                f"name holds an invisible character ({hidden}). Rename the column in the file (retype its "
                "header name), or declare it with that name."
            )
    return DataError(
        f"{where}column(s) {absent} are declared in the schema but not in the data; "
        f"fix the schema or the file (the file has {len(present)} columns)."
    )


def nested_column(label: str | None, column: str) -> DataError:
    """The error for a declared column whose cells are nested values (a list, a record or a
    map per cell, as Parquet and Arrow store them): the planner reads one value per cell.
    The same message from every backend, whatever the nested type's engine spelling."""
    where = f"file {label!r}" if label else "the table"
    return DataError(
        f"{where}: column {column!r} holds nested values (a list, record or map in each cell), not one "
        "value per cell. Flatten it when you export the file (one row per element, or one column per "
        "field), or store it as text, or leave the column out of the schema."
    )


def refuse_keys(backend: Backend) -> QueryError:
    """The error of a backend that cannot count rows per key."""
    return QueryError(
        f"the {type(backend).__name__} cannot count rows per key yet; release key counts with the "
        "pandas engine (--backend pandas, or 'pandas' on the Data page)."
    )


__all__ = [
    "Backend",
    "BinCounts",
    "BooleanCounts",
    "ColumnStats",
    "CountAggregate",
    "GroupResults",
    "KeyCounts",
    "QuantileAggregate",
    "SumAggregate",
    "absent_columns",
    "nested_column",
    "refuse_keys",
]
