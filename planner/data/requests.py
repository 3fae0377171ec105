"""What a statistic may ask of the data, and what comes back: requests as frozen values.

A statistic (:mod:`planner.planning.statistics`) never calls into an engine: it names the
exact aggregates it needs as *requests*, small frozen values that say what to count or sum
over which declared column, and a backend (:mod:`planner.data.backends`) evaluates them.
The pandas backend evaluates each request on its arrays; the SQL backends compile every
request of a plan into one statement over one scan of the data (Tumult Analytics' idea:
query expressions as data, walked by each engine's compiler).

==================  ===========================================  =======================
request             what                                          result
==================  ===========================================  =======================
:class:`Count`      rows (matching a row filter)                  :class:`CountAggregate`
:class:`ClippedSum` Σ clip(x, L, U) of a numeric column           :class:`SumAggregate`
:class:`Bins`       counts over every declared bin / edge         :class:`BinCounts`
:class:`Candidates` counts on a declared candidate grid           :class:`QuantileAggregate`
:class:`Booleans`   true / false counts of a boolean column       :class:`BooleanCounts`
:class:`Keys`       rows per key of an undeclared-key column      :class:`KeyCounts`
:class:`Stats`      usable / clipped / invalid / missing counts   :class:`ColumnStats`
:class:`Grouped`    requests in every group of declared columns   :class:`GroupResults`
:class:`Marginals`  every 1- and 2-way table of several columns'  :class:`MarginalTables`
                    bins, over the rows complete in all of them
==================  ===========================================  =======================

Every request is checked against the schema (:meth:`Request.validate`) by the backend
before it is evaluated; every value in it (a column name, bin edges, a filter's constants)
comes from the declaration, never from the data. The results are exact and therefore
*private*: they must never be shown or exported (only a release's noisy answers are).

A new kind of aggregate is a request class here (with its result, if new), one branch of
each backend's compiler (:meth:`planner.data.backends.pandas_backend.PandasBackend.evaluate`,
:mod:`planner.data.backends.sql.compile`) and the statistic that asks for it.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError, SchemaError
from planner.data.schema import Column, ColumnKind, Schema

IntArray = npt.NDArray[np.int64]


# ------------------------------------------------------------------ the row filter
class PredicateOp(StrEnum):
    """Comparison operators of a row filter."""

    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    IN = "in"


PredicateValue = float | str | bool | tuple[float | str | bool, ...]


@dataclass(frozen=True, slots=True)
class Predicate:
    """A declarative row filter on a declared column using public constants only.

    Numeric columns compare the clipped value clip(x, L, U); categorical columns compare
    the declared label (an undeclared value without an "other" bin matches nothing, not
    even ``!=``); boolean columns take ``==`` / ``!=`` with true or false. Rows whose
    value the missing-value rule drops match nothing (and are counted as dropped).
    """

    column: str
    op: PredicateOp
    value: PredicateValue

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "op", PredicateOp(self.op))
        except ValueError as exc:
            raise QueryError(
                f"predicate operator must be one of {[o.value for o in PredicateOp]}; "
                f"got {self.op!r}."
            ) from exc
        if isinstance(self.value, list):
            object.__setattr__(self, "value", tuple(self.value))

    @property
    def values(self) -> tuple[float | str | bool, ...]:
        """The constant(s) as a tuple (one element unless ``op`` is ``in``)."""
        return self.value if isinstance(self.value, tuple) else (self.value,)

    def validate(self, schema: Schema, where: str) -> None:
        """Check the predicate against the schema; :class:`QueryError` if it does not fit."""
        try:
            col = schema.column(self.column)
        except SchemaError as exc:
            raise QueryError(f"{where}: predicate {exc}") from exc
        if col.kind is ColumnKind.IDENTIFIER:
            raise QueryError(
                f"{where}: a predicate on identifier column {col.name!r} would single out "
                "people; filter on a numeric, categorical or boolean column."
            )
        if col.kind is ColumnKind.KEY:
            raise QueryError(
                f"{where}: a predicate on key column {col.name!r} would test an undeclared value; "
                "filter on a numeric, categorical or boolean column."
            )
        if self.op is PredicateOp.IN:
            if not isinstance(self.value, tuple) or len(self.value) == 0:
                raise QueryError(f"{where}: operator 'in' needs a non-empty list of constants.")
        elif isinstance(self.value, tuple):
            raise QueryError(f"{where}: operator {self.op.value!r} needs a single constant.")
        vals = self.values
        if col.kind is ColumnKind.NUMERIC:
            for v in vals:
                if isinstance(v, (bool, str)) or not math.isfinite(float(v)):
                    raise QueryError(
                        f"{where}: predicate on numeric column {col.name!r} needs finite "
                        "numbers as constants."
                    )
        elif col.kind is ColumnKind.CATEGORICAL:
            if self.op not in (PredicateOp.EQ, PredicateOp.NE, PredicateOp.IN):
                raise QueryError(
                    f"{where}: categorical column {col.name!r} takes ==, != or in; got "
                    f"{self.op.value!r}."
                )
            labels = set(col.labels)
            for v in vals:
                if not isinstance(v, str) or v not in labels:
                    raise QueryError(
                        f"{where}: predicate constants on {col.name!r} must be declared "
                        "categories; add the category to the schema or fix the predicate."
                    )
        elif col.kind is ColumnKind.BOOLEAN:
            if self.op not in (PredicateOp.EQ, PredicateOp.NE, PredicateOp.IN):
                raise QueryError(
                    f"{where}: boolean column {col.name!r} takes ==, != or in; got "
                    f"{self.op.value!r}."
                )
            if not all(isinstance(v, bool) for v in vals):
                raise QueryError(
                    f"{where}: predicate constants on boolean column {col.name!r} must be "
                    "true or false."
                )

    def codes(self, column: Column) -> list[int]:
        """The constants as bin codes of a categorical (label index) or boolean (0 / 1)
        column: what every backend compares a conformed cell with."""
        if column.kind is ColumnKind.BOOLEAN:
            return [int(bool(c)) for c in self.values]
        return [column.labels.index(str(c)) for c in self.values]

    def to_dict(self) -> dict[str, Any]:
        value: Any = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"column": self.column, "op": self.op.value, "value": value}

    @classmethod
    def from_dict(cls, data: Any, where: str = "query") -> Predicate:
        if not isinstance(data, Mapping) or set(data) != {"column", "op", "value"}:
            raise QueryError(
                f'{where}: a predicate is {{"column": ..., "op": ..., "value": ...}} with '
                "exactly those keys."
            )
        value = data["value"]
        if isinstance(value, list):
            value = tuple(value)
        ok = (float, int, str, bool)
        if isinstance(value, tuple):
            if not all(isinstance(v, ok) for v in value):
                raise QueryError(f"{where}: predicate constants must be numbers, strings or booleans.")
        elif not isinstance(value, ok):
            raise QueryError(f"{where}: predicate constants must be numbers, strings or booleans.")
        if not isinstance(data["column"], str):
            raise QueryError(f"{where}: predicate 'column' must be a column name.")
        return cls(data["column"], data["op"], value)


def bin_labels(edges: npt.ArrayLike) -> tuple[str, ...]:
    """Labels of numeric bins: half-open ``[a, b)``, the last one closed ``[a, b]``.

    The one place the label format is defined; every backend uses it.

    Examples
    --------
    >>> bin_labels([0, 10, 20])
    ('[0, 10)', '[10, 20]')
    """
    e = np.asarray(edges, dtype=np.float64)
    return tuple(f"[{a:g}, {b:g}{']' if i == e.size - 2 else ')'}" for i, (a, b) in enumerate(itertools.pairwise(e)))


def whole_numbers_of_bins(edges: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The first and last whole number each bin holds (bin i = [e_i, e_{i+1}), the last one
    closed): ⌈e_i⌉ and ⌈e_{i+1}⌉ − 1 (⌊e_{i+1}⌋ for the last bin); first > last for a bin that
    holds none. The one definition :func:`whole_bin_labels` and a synthetic table's values use.

    >>> [list(map(int, v)) for v in whole_numbers_of_bins([-0.5, 0.5, 2.5, 6.5])]
    [[0, 1, 3], [0, 2, 6]]
    """
    e = np.asarray(edges, dtype=np.float64)
    last = np.ceil(e[1:]) - 1.0
    last[-1] = np.floor(e[-1])
    return np.ceil(e[:-1]), last


def draw_whole_numbers(edges: npt.ArrayLike, bins: npt.ArrayLike, u: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """For each drawn bin index in ``bins``, one of the whole numbers that bin holds
    (:func:`whole_numbers_of_bins`), each equally likely, from uniforms ``u`` in [0, 1): the
    bin's first whole number + ⌊u·m⌋, m of them; capped at m − 1, since u·m may round up to
    m in floating point. Every drawn bin must hold one. The one rule a synthetic sample and a
    synthetic table's values use.

    >>> draw_whole_numbers([-0.5, 0.5, 2.5, 6.5], [2, 2, 1, 0], [0.0, 0.99, 0.5, 0.7]).tolist()
    [3.0, 6.0, 2.0, 0.0]
    """
    first, last = whole_numbers_of_bins(edges)
    idx = np.asarray(bins, dtype=np.intp)
    m = (last - first + 1.0)[idx]
    return first[idx] + np.minimum(np.floor(np.asarray(u, dtype=np.float64) * m), m - 1.0)


def whole_bin_labels(edges: npt.ArrayLike) -> tuple[str, ...]:
    """Labels of numeric bins of a column of whole numbers: the whole numbers each bin holds
    (:func:`whole_numbers_of_bins`), ``"18–24"`` or ``"6"``; a bin that holds no whole number
    keeps its interval label (:func:`bin_labels`).

    Examples
    --------
    >>> whole_bin_labels([-0.5, 0.5, 2.5, 6.5])
    ('0', '1–2', '3–6')
    >>> whole_bin_labels([0, 10, 20])
    ('0–9', '10–20')
    >>> whole_bin_labels([0, 0.4, 0.8, 1])
    ('0', '[0.4, 0.8)', '1')
    """
    first, last = whole_numbers_of_bins(edges)
    return tuple(
        interval if a > b else f"{int(a):d}" if a == b else f"{int(a):d}–{int(b):d}"
        for a, b, interval in zip(first.tolist(), last.tolist(), bin_labels(edges), strict=True)
    )


def numeric_bin_labels(column: Column, edges: npt.ArrayLike) -> tuple[str, ...]:
    """The labels of numeric bins of ``column``: the whole numbers each bin holds for a column
    declared to hold them (:func:`whole_bin_labels`), else the intervals (:func:`bin_labels`).
    The one definition of the labels a backend's bin counts carry and a statistic releases
    (:class:`Bins`, ``planner.planning.statistics.histogram.labels``): a release checks that
    the two agree before it answers."""
    return whole_bin_labels(edges) if column.integer else bin_labels(edges)


def integer_edges(lower: float, upper: float, bins: int) -> tuple[float, ...]:
    """At most ``bins`` bins over [lower, upper] for a column of whole numbers, each holding
    the same number w of consecutive whole numbers (the last one fewer when they do not
    divide evenly): the edges sit halfway between whole numbers, so no whole number lies on
    an edge and every bin holds at least one. With a = ⌈lower⌉, b = ⌊upper⌋ and m = b − a + 1
    whole numbers, w = ⌈m / bins⌉ and there are ⌈m / w⌉ bins; the outer edges are widened to
    the bounds where those are further out, so the bins cover [lower, upper] (a clipped value
    always has a bin).

    Proof that the edges increase: the last inner edge a − ½ + (k − 1)w, k = ⌈m/w⌉, is below
    a − ½ + m = b + ½, the last edge, since (k − 1)w < m.

    Examples
    --------
    >>> integer_edges(0, 6, 10)  # 7 whole numbers, one bin each
    (-0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5)
    >>> integer_edges(18, 90, 10)  # 73 whole numbers, 8 in each bin: 18–25, …, 82–89, 90
    (17.5, 25.5, 33.5, 41.5, 49.5, 57.5, 65.5, 73.5, 81.5, 89.5, 90.5)
    >>> integer_edges(0.2, 2.7, 4)  # bounds that are not whole numbers: 1 and 2
    (0.2, 1.5, 2.7)
    """
    a, b = math.ceil(lower), math.floor(upper)
    m = b - a + 1
    if m < 1 or bins < 1:
        raise QueryError(f"no whole number lies in [{lower:g}, {upper:g}], or no bin was asked for.")
    w = -(-m // bins)
    k = -(-m // w)
    inner = [a - 0.5 + j * w for j in range(1, k)]
    return (min(a - 0.5, float(lower)), *(float(v) for v in inner), max(b + 0.5, float(upper)))


# ------------------------------------------------------------------ results
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
class GroupResults:
    """The results of a :class:`Grouped` request: for every group (``labels``, in declared
    order), the results of its requests, in the order they were asked."""

    labels: tuple[str, ...]
    results: tuple[tuple[Result, ...], ...]

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.results):
            raise QueryError("grouped results need one entry per group label.")


@dataclass(frozen=True, slots=True)
class MarginalTables:
    """Counts of every combination of the bins of each column and of each pair of columns
    (PRIVATE), over the rows where every one of ``columns`` falls in a declared bin.

    ``sizes`` are the columns' numbers of bins; ``cliques`` the tables, as sorted column
    indices (every single column, then every pair, in lexicographic order); ``counts`` each
    table's cells flattened in C order (the last column varies fastest). ``rows`` rows were
    counted; ``dropped`` rows (after contribution bounding) were left out because a column
    had no bin for them (the missing-value rule dropped it, or an undeclared category with
    no "other" bin).
    """

    columns: tuple[str, ...]
    sizes: tuple[int, ...]
    cliques: tuple[tuple[int, ...], ...]
    counts: tuple[tuple[int, ...], ...]
    rows: int
    dropped: int = 0

    def __post_init__(self) -> None:
        if len(self.cliques) != len(self.counts) or len(self.columns) != len(self.sizes):
            raise QueryError("marginal tables need one count vector per clique and one size per column.")
        for c, v in zip(self.cliques, self.counts, strict=True):
            if len(v) != math.prod(self.sizes[j] for j in c):
                raise QueryError(f"the marginal table over {c} has {len(v)} cells; expected the product of its sizes.")

    def table(self, clique: Sequence[int]) -> IntArray:
        """The counts over ``clique`` (sorted column indices), shaped by the columns' sizes."""
        key = tuple(int(j) for j in clique)
        try:
            i = self.cliques.index(key)
        except ValueError as exc:
            raise QueryError(f"no marginal table over columns {key} was computed.") from exc
        return np.asarray(self.counts[i], dtype=np.int64).reshape(tuple(self.sizes[j] for j in key))


Result = (
    CountAggregate | SumAggregate | BinCounts | QuantileAggregate | BooleanCounts | KeyCounts | ColumnStats
    | GroupResults | MarginalTables
)


# ------------------------------------------------------------------ requests
R = TypeVar("R", covariant=True)


class Request(ABC, Generic[R]):
    """One exact aggregate asked of a backend; ``R`` is its result's type."""

    __slots__ = ()
    #: What the request is called in messages.
    what: ClassVar[str] = "aggregate"

    @abstractmethod
    def validate(self, schema: Schema) -> None:
        """:class:`QueryError` naming the column and the fix when the request does not fit
        the declaration (backends check every request before evaluating it)."""


def declared(schema: Schema, name: str, what: str, *kinds: ColumnKind) -> Column:
    """The declared column ``name`` (of one of ``kinds``); :class:`QueryError` otherwise."""
    try:
        col = schema.column(name)
    except SchemaError as exc:
        raise QueryError(f"{what}: {exc}") from exc
    if kinds and col.kind not in kinds:
        raise QueryError(
            f"column {name!r} is {col.kind.value}; this aggregate needs "
            f"{' or '.join(k.value for k in kinds)}."
        )
    return col


def _floats(values: Sequence[float] | npt.NDArray[np.float64]) -> tuple[float, ...]:
    return tuple(float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1))


@dataclass(frozen=True, slots=True)
class Count(Request[CountAggregate]):
    """Rows that match ``where`` among those the missing-value rule keeps.

    ``dropped`` counts rows removed by the rule of ``column`` or of the filter's column.
    An undeclared category (no "other" bin) is not dropped: it counts for
    ``Count(column)`` and matches no filter.
    """

    column: str | None = None
    where: Predicate | None = None
    what: ClassVar[str] = "count"

    def validate(self, schema: Schema) -> None:
        if self.column is not None:
            declared(schema, self.column, self.what)
        if self.where is not None:
            self.where.validate(schema, self.what)


@dataclass(frozen=True, slots=True)
class ClippedSum(Request[SumAggregate]):
    """Σ clip(x, L, U) over the usable rows of a numeric column."""

    column: str
    what: ClassVar[str] = "sum"

    def validate(self, schema: Schema) -> None:
        declared(schema, self.column, self.what, ColumnKind.NUMERIC)


@dataclass(frozen=True, slots=True)
class Bins(Request[BinCounts]):
    """Counts over all declared bins: categories (+ other), false / true, or the bins
    [e_i, e_{i+1}) of numeric ``edges`` (the last one closed)."""

    column: str
    edges: tuple[float, ...] | None = None
    what: ClassVar[str] = "bin counts"

    def __post_init__(self) -> None:
        if self.edges is not None:
            object.__setattr__(self, "edges", _floats(self.edges))

    def validate(self, schema: Schema) -> None:
        col = declared(schema, self.column, self.what, ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN,
                       ColumnKind.NUMERIC)
        if col.kind is not ColumnKind.NUMERIC:
            if self.edges is not None:
                raise QueryError(f"column {self.column!r} is {col.kind.value}; its bins are declared, not edges.")
            return
        if self.edges is None:
            raise QueryError(f"bin counts of numeric column {self.column!r} need declared bin edges.")
        e = np.asarray(self.edges, dtype=np.float64)
        if e.size < 2 or np.any(np.diff(e) <= 0) or not np.all(np.isfinite(e)):
            raise QueryError("bin edges must be at least 2 strictly increasing finite numbers.")

    def labels(self, column: Column) -> tuple[str, ...]:
        """The labels of the bins, in order: the column's declared ones, or
        :func:`numeric_bin_labels` of the edges."""
        if self.edges is None:
            return column.labels
        return numeric_bin_labels(column, self.edges)


@dataclass(frozen=True, slots=True)
class Candidates(Request[QuantileAggregate]):
    """Counts of clipped values on an increasing candidate ``grid`` covering [L, U]: a
    value x is counted at the smallest candidate t ≥ x."""

    column: str
    grid: tuple[float, ...]
    what: ClassVar[str] = "candidate counts"

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", _floats(self.grid))

    def validate(self, schema: Schema) -> None:
        col = declared(schema, self.column, self.what, ColumnKind.NUMERIC)
        lo, hi = col.bounds
        g = np.asarray(self.grid, dtype=np.float64)
        if g.size < 1 or np.any(np.diff(g) <= 0):
            raise QueryError("quantile candidates must be a strictly increasing list.")
        if g[0] > lo or g[-1] < hi:
            raise QueryError(
                f"quantile candidates must cover the declared bounds [{lo:g}, {hi:g}] of {self.column!r}."
            )


@dataclass(frozen=True, slots=True)
class Booleans(Request[BooleanCounts]):
    """True and false counts of a boolean column."""

    column: str
    what: ClassVar[str] = "boolean counts"

    def validate(self, schema: Schema) -> None:
        declared(schema, self.column, self.what, ColumnKind.BOOLEAN)


@dataclass(frozen=True, slots=True)
class Keys(Request[KeyCounts]):
    """Rows per canonical value of a key column, over the contribution-bounded rows (rows
    with a missing key are ``dropped``). Over the whole table only: never in a group."""

    column: str
    what: ClassVar[str] = "key counts"

    def validate(self, schema: Schema) -> None:
        declared(schema, self.column, self.what, ColumnKind.KEY)


@dataclass(frozen=True, slots=True)
class Stats(Request[ColumnStats]):
    """Usable / clipped / invalid / missing counts of one declared column."""

    column: str
    what: ClassVar[str] = "column stats"

    def validate(self, schema: Schema) -> None:
        declared(schema, self.column, self.what)


#: Most groups a :class:`Grouped` request may have (the product of its columns' values).
MAX_GROUPS = 10_000


@dataclass(frozen=True, slots=True)
class Grouped(Request[GroupResults]):
    """``requests`` evaluated in every group of the ``by`` columns: every combination of
    their declared values (categories, the "other" bin when declared, false / true), in
    declared order, empty groups included. Rows whose grouping value the missing-value
    rule drops, or whose category is undeclared without an "other" bin, are in no group.
    Contribution bounding happens before grouping.
    """

    requests: tuple[Request[Any], ...]
    by: tuple[str, ...]
    what: ClassVar[str] = "grouped aggregate"

    def __post_init__(self) -> None:
        object.__setattr__(self, "requests", tuple(self.requests))
        object.__setattr__(self, "by", tuple(self.by))

    def validate(self, schema: Schema) -> None:
        if not self.by or len(set(self.by)) != len(self.by):
            raise QueryError("a grouped aggregate needs distinct grouping columns.")
        for name in self.by:
            declared(schema, name, "group by", ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN)
        if math.prod(len(schema.column(n).labels) for n in self.by) > MAX_GROUPS:
            raise QueryError(f"more than {MAX_GROUPS} groups; group by fewer values.")
        for r in self.requests:
            if isinstance(r, (Keys, Grouped, Marginals)):
                raise QueryError(f"{r.what} are computed over the whole table, not in groups.")
            r.validate(schema)

    def labels(self, schema: Schema) -> tuple[str, ...]:
        """Every group's label ("North · female"), in declared order."""
        return group_labels(schema, self.by)

    def codes(self, schema: Schema) -> tuple[tuple[int, ...], ...]:
        """Every group as the bin codes of its ``by`` columns (:meth:`Predicate.codes`)."""
        return tuple(itertools.product(*(range(len(schema.column(n).labels)) for n in self.by)))


def group_labels(schema: Schema, by: Sequence[str]) -> tuple[str, ...]:
    """Every group of the ``by`` columns: "North · female", in declared order (the last
    column varies fastest)."""
    return tuple(" · ".join(combo) for combo in itertools.product(*(schema.column(n).labels for n in by)))


#: Most columns of one :class:`Marginals` request.
MAX_MARGINAL_COLUMNS = 64
#: Most cells of all the tables of one :class:`Marginals` request.
MAX_MARGINAL_CELLS = 4_000_000


@dataclass(frozen=True, slots=True)
class Marginals(Request[MarginalTables]):
    """Every 1- and 2-way table of the bins of ``columns`` (categories, false / true, or
    the bins [e_i, e_{i+1}) of a numeric column's ``edges``, the last one closed), over the
    contribution-bounded rows where every one of the columns falls in a bin: the same rows
    for every table, so the tables agree with each other (each 1-way table is its pairs'
    sum). ``edges`` holds one entry per column: the numeric edges, or ``None``.
    """

    columns: tuple[str, ...]
    edges: tuple[tuple[float, ...] | None, ...]
    what: ClassVar[str] = "marginal tables"

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(self.columns))
        object.__setattr__(self, "edges", tuple(None if e is None else _floats(e) for e in self.edges))

    def validate(self, schema: Schema) -> None:
        if not self.columns or len(set(self.columns)) != len(self.columns):
            raise QueryError("marginal tables need distinct columns.")
        if len(self.columns) != len(self.edges):
            raise QueryError("marginal tables need one entry of edges per column (None for categories).")
        if len(self.columns) > MAX_MARGINAL_COLUMNS:
            raise QueryError(f"marginal tables take at most {MAX_MARGINAL_COLUMNS} columns; got {len(self.columns)}.")
        for name, e in zip(self.columns, self.edges, strict=True):
            col = declared(schema, name, self.what, ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN, ColumnKind.NUMERIC)
            Bins(name, e).validate(schema)
            if e is not None:
                lo, hi = col.bounds
                if e[0] > lo or e[-1] < hi:
                    raise QueryError(f"the bins of {name!r} must cover its declared bounds [{lo:g}, {hi:g}].")
        sizes = self.sizes(schema)
        cells = sum(a * b for a, b in itertools.combinations(sizes, 2)) + sum(sizes)
        if cells > MAX_MARGINAL_CELLS:
            raise QueryError(
                f"the 1- and 2-way tables of these columns hold {cells:,} cells, more than {MAX_MARGINAL_CELLS:,}; "
                "use fewer bins, fewer categories or fewer columns."
            )

    def sizes(self, schema: Schema) -> tuple[int, ...]:
        """Each column's number of bins."""
        return tuple(len(self.labels(schema, j)) for j in range(len(self.columns)))

    def labels(self, schema: Schema, j: int) -> tuple[str, ...]:
        """The labels of column j's bins, in order."""
        return Bins(self.columns[j], self.edges[j]).labels(schema.column(self.columns[j]))

    @property
    def cliques(self) -> tuple[tuple[int, ...], ...]:
        """Every single column, then every pair, as sorted indices."""
        d = len(self.columns)
        return tuple((j,) for j in range(d)) + tuple(itertools.combinations(range(d), 2))


AnyRequest = Count | ClippedSum | Bins | Candidates | Booleans | Keys | Stats | Grouped | Marginals


def unknown(request: object) -> QueryError:
    """The error of a backend given a request it has no compiler for."""
    return QueryError(f"{type(request).__name__} is not a request this backend can evaluate.")


__all__ = [
    "MAX_GROUPS",
    "AnyRequest",
    "BinCounts",
    "Bins",
    "BooleanCounts",
    "Booleans",
    "Candidates",
    "ClippedSum",
    "ColumnStats",
    "Count",
    "CountAggregate",
    "GroupResults",
    "Grouped",
    "KeyCounts",
    "Keys",
    "MarginalTables",
    "Marginals",
    "Predicate",
    "PredicateOp",
    "PredicateValue",
    "QuantileAggregate",
    "Request",
    "Result",
    "Stats",
    "SumAggregate",
    "bin_labels",
    "declared",
    "draw_whole_numbers",
    "group_labels",
    "integer_edges",
    "numeric_bin_labels",
    "unknown",
    "whole_bin_labels",
    "whole_numbers_of_bins",
]
