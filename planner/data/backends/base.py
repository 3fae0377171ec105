"""The backend interface: exact, clipped, contribution-bounded aggregates.

A backend holds the private table and answers a few primitive aggregate requests with
small typed values. Mechanisms take these aggregates and never see a DataFrame. Noise,
budget accounting and the choice of what to release happen elsewhere, in one trusted
process (notes/engines.md §6).

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

Every aggregate also carries ``dropped``: the rows left out by the missing-value rule.
The aggregates are exact and therefore *private*: they must never be shown or exported
(MATH.md §7).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError
from planner.data.backends.digest import ContentDigest
from planner.data.schema import Schema
from planner.planning.queries import Predicate, Query

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class CountAggregate:
    """Number of rows (matching a predicate, with a usable value in a column)."""

    value: int
    dropped: int = 0


@dataclass(frozen=True, slots=True)
class SumAggregate:
    """Sum of clip(x, L, U) over the usable rows of a numeric column.

    ``n`` rows contributed (replaced values included), ``clipped`` of them were outside
    [L, U], ``dropped`` were left out by the missing-value rule.
    """

    value: float
    n: int
    clipped: int = 0
    dropped: int = 0


@dataclass(frozen=True, slots=True)
class MeanAggregate:
    """The two parts of a mean: the clipped sum and the count of the same rows.

    ``public_n`` is the schema's declared n when the mean's mode is ``public_n``.
    """

    sum: SumAggregate
    count: CountAggregate
    public_n: int | None = None


@dataclass(frozen=True, slots=True)
class BinCounts:
    """Counts over every declared bin, in declared order (zero bins included).

    ``edges`` are the numeric bin edges (``None`` for categories / booleans); bin i is
    [edges[i], edges[i+1]), the last one closed. ``unbinned`` usable rows fell in no bin
    (an undeclared category without an "other" bin; a clipped value outside the edges).
    """

    labels: tuple[str, ...]
    counts: tuple[int, ...]
    edges: tuple[float, ...] | None = None
    unbinned: int = 0
    dropped: int = 0

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.counts):
            raise QueryError("bin labels and counts must have the same length.")

    @property
    def total(self) -> int:
        return int(sum(self.counts))

    def as_array(self) -> IntArray:
        return np.asarray(self.counts, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class QuantileAggregate:
    """Counts on a declared candidate grid: ``counts[i]`` values have t_i as the smallest
    candidate ≥ the (clipped) value. ``counts_le[i]`` = #{x ≤ t_i}; ``n`` usable values.
    """

    candidates: tuple[float, ...]
    counts: tuple[int, ...]
    dropped: int = 0

    def __post_init__(self) -> None:
        if len(self.candidates) != len(self.counts):
            raise QueryError("quantile candidates and counts must have the same length.")

    @property
    def n(self) -> int:
        return int(sum(self.counts))

    @property
    def counts_le(self) -> IntArray:
        """#{x ≤ t_i} for each candidate (cumulative counts)."""
        return np.cumsum(np.asarray(self.counts, dtype=np.int64))

    def rank_utility(self, alpha: float) -> npt.NDArray[np.float64]:
        """−|#{x ≤ t} − α·n| per candidate (utility sensitivity 1 per record)."""
        return -np.abs(self.counts_le.astype(np.float64) - alpha * self.n)


@dataclass(frozen=True, slots=True)
class KeyCounts:
    """Rows per key of a key column (PRIVATE: which keys exist is itself private; only
    partition selection's thresholded, noisy release of it leaves the process).

    ``keys`` are canonical cell values (:func:`planner.data.backends.cells.canonical_value`),
    sorted; ``dropped`` counts rows whose key is missing."""

    keys: tuple[str, ...]
    counts: tuple[int, ...]
    dropped: int = 0

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.counts):
            raise ValueError("KeyCounts needs one count per key.")

    def as_dict(self) -> dict[str, int]:
        return dict(zip(self.keys, self.counts, strict=True))


@dataclass(frozen=True, slots=True)
class BooleanCounts:
    """True / false counts of a boolean column."""

    n_true: int
    n_false: int
    dropped: int = 0

    @property
    def n(self) -> int:
        return self.n_true + self.n_false


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """Per-column row counts (counts only, never values): what a query on it would use.

    ``usable`` rows enter queries on the column (``replaced`` and ``clipped`` ones
    included; for categorical columns undeclared values only if there is an "other"
    bin); ``missing`` were NULL/NaN/±inf/empty; ``invalid`` were unreadable as the
    declared kind (categorical: undeclared); ``dropped`` = rows the rule removed.
    """

    rows: int
    usable: int
    clipped: int
    invalid: int
    missing: int
    replaced: int
    dropped: int

    def to_dict(self) -> dict[str, int]:
        return {
            "rows": self.rows,
            "usable": self.usable,
            "clipped": self.clipped,
            "invalid": self.invalid,
            "missing": self.missing,
            "replaced": self.replaced,
            "dropped": self.dropped,
        }


@dataclass(frozen=True, slots=True)
class GroupedAggregate:
    """One aggregate per declared group (every combination of the grouping columns'
    declared values, in declared order, empty groups included)."""

    labels: tuple[str, ...]
    groups: tuple[CountAggregate | SumAggregate | MeanAggregate | QuantileAggregate, ...]

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.groups):
            raise QueryError("a grouped aggregate needs one aggregate per group label.")


Aggregate = (
    CountAggregate | SumAggregate | MeanAggregate | BinCounts | QuantileAggregate | BooleanCounts
    | GroupedAggregate | KeyCounts
)


class Backend(ABC):
    """Computes the exact aggregates a plan needs (see the module docstring's contract)."""

    schema: Schema
    #: Whether :meth:`key_counts` is implemented (partition selection checks it before a
    #: release spends anything).
    counts_keys: ClassVar[bool] = False

    # ------------------------------------------------------------------ primitives
    @property
    @abstractmethod
    def rows(self) -> int:
        """Rows after contribution bounding."""

    @property
    @abstractmethod
    def rows_truncated(self) -> int:
        """Rows removed by contribution bounding (beyond c per person)."""

    @abstractmethod
    def count(self, column: str | None = None, predicate: Predicate | None = None) -> CountAggregate:
        """Rows that match ``predicate`` among those the missing-value rule keeps.

        ``dropped`` counts rows removed by the rule of ``column`` or of the predicate's
        column. An undeclared category (no "other" bin) is not dropped: it counts for
        ``count(column)`` and matches no predicate.
        """

    @abstractmethod
    def clipped_sum(self, column: str) -> SumAggregate:
        """Σ clip(x, L, U) over the usable rows of a numeric column."""

    @abstractmethod
    def bin_counts(self, column: str, edges: Sequence[float] | None = None) -> BinCounts:
        """Counts over all declared bins: categories (+ other) / false, true / numeric edges."""

    @abstractmethod
    def candidate_counts(self, column: str, candidates: Sequence[float]) -> QuantileAggregate:
        """Counts of clipped values on an increasing candidate grid covering [L, U]."""

    @abstractmethod
    def boolean_counts(self, column: str) -> BooleanCounts:
        """True and false counts of a boolean column."""

    @abstractmethod
    def column_stats(self, column: str) -> ColumnStats:
        """Usable / clipped / invalid / missing counts of one declared column."""

    def where(self, conditions: Sequence[Predicate]) -> Backend:
        """A view of the same (contribution-bounded) rows restricted to those matching every
        condition: the aggregates of one group of a grouped statistic. Rows dropped by a
        condition column's missing-value rule belong to no group.

        Backends override this (pandas with a row mask; DuckDB and Spark with one
        ``GROUP BY`` per grouping, :meth:`planner.data.backends.sql.SqlBackend.where`); one that
        cannot restrict says so with a clear error.
        """
        raise QueryError(
            f"the {type(self).__name__} cannot restrict rows to a group, so it cannot compute grouped "
            "statistics; use the pandas, DuckDB or Spark backend for this plan."
        )

    def key_counts(self, column: str) -> KeyCounts:
        """Rows per canonical value of a key column, over the contribution-bounded rows
        (rows with a missing key are ``dropped``). Backends override this; one that cannot
        count keys says so."""
        raise QueryError(
            f"the {type(self).__name__} cannot count rows per key yet; release key counts with the "
            "pandas engine (--backend pandas, or 'pandas' on the Data page)."
        )

    @abstractmethod
    def content_digest(self) -> ContentDigest:
        """The table's content digest (:mod:`planner.data.backends.digest`): every row of the
        declared columns, before contribution bounding; identical in every backend.

        PRIVATE, like the aggregates: it must never be shown, logged or exported; only a
        keyed hash of it may leave the process.
        """

    # ------------------------------------------------------------------ derived
    def category_counts(self, column: str) -> BinCounts:
        """Per-category counts of a categorical or boolean column (all declared categories)."""
        return self.bin_counts(column)

    def aggregate(self, query: Query) -> Aggregate:
        """The exact aggregate a query's release needs, as its statistic declares it
        (:meth:`planner.planning.statistics.base.Statistic.aggregate`), validated against the schema."""
        query.validate(self.schema)
        return query.statistic.aggregate(query, self)

    def aggregate_all(self, queries: Iterable[Query]) -> dict[str, Aggregate]:
        """Aggregates of a whole workload, keyed by query id."""
        return {q.id: self.aggregate(q) for q in queries}

    def column_report(self) -> dict[str, Any]:
        """Counts only (data-dependent, for the data owner): rows and per-column stats."""
        return {
            "rows": self.rows + self.rows_truncated,
            "rows_after_bounding": self.rows,
            "rows_truncated": self.rows_truncated,
            "columns": {
                c.name: {"kind": c.kind.value, **self.column_stats(c.name).to_dict()}
                for c in self.schema.columns
            },
        }
