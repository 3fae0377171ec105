"""One query compiler for the SQL engines (DuckDB, Spark SQL): the pandas contract in SQL.

:class:`SqlBackend` implements :class:`~planner.data.backends.base.Backend` by compiling the
schema and the requested aggregates into SQL that runs where the data is (a file scanned
in place by DuckDB, executors of a Spark cluster); only small aggregate rows come back.
The two engines differ in a handful of spellings only (:class:`Dialect`).

How each rule of the contract (``planner/data/backends/base.py``) is compiled:

* **One scan.** The first statement over the data (DuckDB) computes everything asked of
  it at once: every aggregate of a plan, the column report, the content digest
  (:mod:`planner.data.backends.digest`) and the proof that nobody has more than c rows. Scalars
  and bin counts are one ungrouped aggregate; a bin key with few values is counted by
  one ``count_if`` per value, a larger one by ``histogram`` (a pass of its own over the
  needed columns of a Parquet file, or ``histogram_exact`` in the same pass for CSV,
  which would otherwise be parsed again). Spark gets the person check first and the
  bins as a ``GROUPING SETS`` aggregate next to the scalars.
* **Cells** are read exactly like :func:`~planner.data.backends.pandas_backend.parse_numbers`
  and :func:`~planner.data.backends.cells.canonical_value`. Most text cells take a fast
  path that gives the same verdict without the full rules: a number made of digits,
  '.', 'e' and signs is cast directly (:meth:`Dialect.number_guard` excludes what
  DuckDB's cast reads beyond the number pattern), a category or boolean token equal to a
  declared spelling is matched as it is (:meth:`SqlBackend._fast_strings`), an integer id
  that prints back as its own text is that integer. The other cells (blanks, NA tokens,
  odd numbers, undeclared values) go through the full rules: pyarrow's NA tokens become
  NULL as in the pandas loader, Unicode white space is trimmed, the number pattern is
  matched, and categorical, boolean and identifier cells are reduced to a *canonical
  key* (``'n'`` + integer digits, ``'f'`` + number, ``'t'`` + text) by the SQL that also
  keys the declared categories (:meth:`SqlBackend._declared_keys`). ``CASE`` evaluates a
  branch only on its rows, so those rules cost only where they are needed. Typed cells
  (Parquet, DataFrames) skip the text steps.
* **Missing rule** as explicit expressions; a dropped cell's value is left as it is and
  never read: sums, bins, predicates and row keys all test the usable flag first.
* **Contribution bounding**: whether anybody has more than c rows is proven inside the
  first statement when every person id is a plain integer: their residues modulo
  2^bits are distinct (a bitmap, :meth:`Dialect.bitmap_distinct`, sized from the row
  count of the Parquet metadata or a CSV estimate), so the ids are. Otherwise a
  ``GROUP BY`` person counts rows (:meth:`SqlBackend._check_units`), and only when
  somebody is over c are the requests computed again over the bounded rows. Those
  rows of people over c are ordered by ``md5(salt_key | row key)``, the same text and
  md5 as :func:`~planner.data.backends.pandas_backend.bound_contributions`, so every engine
  keeps the same rows. DuckDB ranks a narrow relation (person, digest as an unsigned
  128-bit integer: the hex order) with a window that spills, stores each person's c-th
  smallest digest, and keeps the rows at or below it in one filtering pass
  (:meth:`SqlBackend._thresholds`); ties on the cut (identical rows) are ranked apart.
  Spark ranks the rows themselves (:meth:`SqlBackend._kept_ranked`).
* **Sums** are exact: each clipped value is split into integers
  (:func:`~planner.data.backends.pandas_backend.float_parts`: the integer part, and two
  53-bit fractional parts unless the column is integer-valued), summed exactly (HUGEINT
  in DuckDB, DECIMAL(38, 0) in Spark) and rounded once in Python, which is the float
  pandas returns too.
* **Bins and quantile grids**: a bin index is computed from the quotient
  (x − e₀)/w; where it is near an integer (ties included) it is corrected against the
  actual edge values (computed as ``i·step + e₀`` when that reproduces every edge bit for
  bit, else read from an array parameter), so ties on edges follow ``searchsorted``
  exactly (:meth:`SqlBackend._far`). An integer-valued column with at most
  :data:`MAX_VALUE_GROUPS` possible values is instead counted per value and binned in
  Python by ``searchsorted`` itself.
* Every derived value is computed once in a projection layer of its own and then used
  by name: written out several times inside a ``CASE`` it would be evaluated several
  times per row.

Safety: every column name is quoted by :meth:`Dialect.ident` (quotes doubled), every
value (bounds, categories, edges, salt, replacement values, predicate constants) is a
bound parameter; file names never reach SQL text (sources are registered as views under
generated names).
"""

from __future__ import annotations

import itertools
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar, Final

import numpy as np

from planner.core.errors import DataError, QueryError
from planner.data import requests as rq
from planner.data.backends import digest as dg
from planner.data.backends.base import Backend
from planner.data.backends.cells import (
    _BOOL_LOOKUP,
    _NUMBER_RE,
    MAX_EXACT_ABS,
    NUMERIC_NA_TOKENS,
    _canonical_categories,
    canonical_value,
    salt_key,
    sum_from_parts,
)
from planner.data.requests import (
    BinCounts,
    BooleanCounts,
    ColumnStats,
    CountAggregate,
    GroupResults,
    KeyCounts,
    Predicate,
    PredicateOp,
    QuantileAggregate,
    Request,
    Result,
    SumAggregate,
)
from planner.data.schema import Column, ColumnKind, MissingAction, Schema

#: pyarrow's default CSV null tokens: the pandas loader reads these cells as NULL.
CSV_NULL_TOKENS: Final[tuple[str, ...]] = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
    "1.#QNAN", "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null",
)
#: Unicode White_Space plus U+001C–U+001F: what pyarrow's ``utf8_trim_whitespace`` strips.
_WS: Final[str] = (
    r"[\x{0009}-\x{000D}\x{001C}-\x{0020}\x{0085}\x{00A0}\x{1680}\x{2000}-\x{200A}"
    r"\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]"
)
TRIM_PATTERN: Final[str] = f"^{_WS}+|{_WS}+$"
#: The same characters as a set (a cheap first/last-character test before the regex).
WHITESPACE: Final[str] = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)

#: Integer-valued numeric columns with at most this many values are binned per value.
MAX_VALUE_GROUPS: Final[int] = 1 << 16
#: Bin keys with fewer values than this are counted by one comparison per key and row.
SMALL_DOMAIN: Final[int] = 12

NUMBER_PATTERN: Final[str] = f"^(?:{_NUMBER_RE})$"
INT_PATTERN: Final[str] = r"^[+-]?[0-9]+$"
_TWO53: Final[float] = 2.0**53
_TWO53_INT: Final[int] = 1 << 53
_TWO53_SQL: Final[str] = "9007199254740992"
#: 2⁶⁴ − 1: ``x & MASK`` is x mod 2⁶⁴ (integer division by 2⁶⁴ is far slower in DuckDB)
MASK64_SQL: Final[str] = str((1 << 64) - 1)
_INF: Final[str] = "CAST('Infinity' AS DOUBLE)"

TypeClass = str  # "text" | "int" | "float" | "bool" | "other"


class Dialect:
    """The few spellings that differ between engines (DuckDB's by default)."""

    name = "duckdb"
    text_type = "VARCHAR"
    #: ``kept`` is read twice (scalars, bin counts): recompute it rather than hold it in memory
    cte_hint = "NOT MATERIALIZED "
    #: ... except after bounding (an md5 per row): DuckDB streams a materialized CTE to
    #: both readers at once (measured: 0.4 GB peak at 1e7 rows, against 1.3 GB and the
    #: hashing done twice without the hint)
    bounded_hint = "MATERIALIZED "

    def ident(self, name: str) -> str:
        """A quoted identifier: the name can never end the quote."""
        if "\x00" in name:
            raise DataError("a column name contains a NUL character; rename the column.")
        return '"' + name.replace('"', '""') + '"'

    def marker(self, key: str) -> str:
        return "$" + key

    def literal(self, value: str) -> str:
        """A string literal of a *code constant* (patterns, tokens); schema values are parameters."""
        return "'" + value.replace("'", "''") + "'"

    def matches(self, expr: str, pattern: str) -> str:
        return f"regexp_matches({expr}, {pattern})"

    def strip(self, expr: str, pattern: str) -> str:
        return f"regexp_replace({expr}, {pattern}, '', 'g')"

    def at(self, array: str, index0: str) -> str:
        """Element ``index0`` (0-based) of an array parameter."""
        return f"list_extract({array}, ({index0}) + 1)"

    def floor(self, expr: str) -> str:
        """floor as DOUBLE."""
        return f"floor({expr})"

    def is_nan(self, expr: str) -> str:
        return f"isnan({expr})"

    def hash64(self, expr: str) -> str:
        """A 64-bit hash (grouping key only; never an order or a released value)."""
        return f"hash({expr})"

    def count_if(self, cond: str) -> str:
        """Rows where ``cond`` is true (NULL counts as false)."""
        return f"count_if({cond})"

    def order_key(self, hex_digest: str) -> str:
        """A value ordered exactly as the 32-digit lowercase hex text of an md5 digest.

        DuckDB: the digest as one unsigned 128-bit integer (``'0x' || hex`` cast to
        UHUGEINT: big-endian, the value of the hex digits). Fixed-width lowercase hex
        compares byte by byte as its value does ('0' < … < '9' < 'a' < … < 'f'), so the
        order is the same, with 16 bytes per key instead of a 32-character string.
        """
        return f"CAST('0x' || {hex_digest} AS UHUGEINT)"

    def exact_sum(self, expr: str) -> str:
        """The exact sum of an integer-valued DOUBLE expression (|each value| < 2⁶²).

        DuckDB sums BIGINT into a 128-bit HUGEINT: exact for any row count.
        """
        return f"sum(CAST({expr} AS BIGINT))"

    #: the first statement reads every row once and proves nobody is over c there (DuckDB)
    single_scan = True

    def histogram(self, expr: str, domain: tuple[int, int] | None = None) -> str | None:
        """Counts per value of a BIGINT expression as one aggregate (a map), or ``None``
        where the engine has none (the bins are then a ``GROUPING SETS`` aggregate).

        DuckDB plans ``histogram(x)`` as a ``GROUP BY`` of its own over the statement's
        input: cheap where reading the input again is (Parquet), but a CSV file would be
        parsed again, or buffered whole. With ``domain`` = (lo, hi), every value of x in
        [lo, hi], the counts are one aggregate of the single pass (``histogram_exact``; a
        value outside lands in another key, which the caller checks).
        """
        if domain is None:
            return f"histogram({expr})"
        return f"histogram_exact({expr}, range({domain[0]}, {domain[1] + 1}))"

    def bitmap_distinct(self, expr: str, bits: int) -> str | None:
        """How many distinct values a BIGINT expression takes modulo 2^bits.

        DuckDB sets one bit per residue (``bitstring_agg``: 2^bits bits per thread). If
        the count equals the number of rows, the values are distinct (equal values have
        equal residues): no person has two rows. ``None``: the engine has no bitmap.
        """
        m = 1 << bits
        # x & (2^bits − 1) is x mod 2^bits for negative x too (two's complement)
        return f"bit_count(bitstring_agg(({expr}) & {m - 1}, 0, {m - 1}))"

    def number_guard(self, text: str) -> str:
        """True only for text that ``TRY_CAST(… AS DOUBLE)`` reads as the pandas rules do.

        DuckDB's cast reads the number pattern's strings (blanks around them trimmed)
        with the same value, and also '1_000', 'nan(1)' and '+-1'. Text without '_', '('
        and '+-' is read exactly as the rules read it (fuzz-tested against pyarrow on all
        one- and two-character strings and 300,000 random ones, and end to end in
        ``tests/engine/test_backends_conformance.py``). Three substring tests cost less
        than one regular expression.
        """
        return (f"(NOT contains({text}, '_') AND NOT contains({text}, '(') "
                f"AND NOT contains({text}, '+-'))")

    def in_list(self, expr: str, consts: Sequence[str]) -> str:
        """``expr`` is one of the constant literals. A ``CASE``: DuckDB turns ``IN`` lists
        (and ``list_contains``) into a join that every row goes through, even where the
        test sits in a branch that only a few rows take."""
        whens = " ".join(f"WHEN {c} THEN TRUE" for c in consts)
        return f"(CASE {expr} {whens} ELSE FALSE END)"

    # content digest (planner/data/backends/digest.py): words are BIGINT (the two's complement
    # of the unsigned word) or, for a numeric column's value, the DOUBLE itself
    def xor(self, a: str, b: str) -> str:
        return f"xor({a}, {b})"

    def word_bits(self, x: str) -> str:
        """The IEEE-754 bits of a DOUBLE as BIGINT."""
        return f"CAST(CAST(CAST({x} AS DOUBLE) AS BIT) AS BIGINT)"

    def word_md5(self, text: str) -> str:
        """md5₆₄ of text as BIGINT (the first 16 hex digits, two's complement)."""
        return (f"CAST(CAST(CAST('0x' || left(md5({text}), 16) AS UBIGINT) AS HUGEINT) - CASE WHEN "
                f"left(md5({text}), 1) >= '8' THEN {1 << 64} ELSE 0 END AS BIGINT)")

    #: DuckDB's hash() of BIGINT / DOUBLE words is the digest's row hash (checked first)
    native_hash = True

    def hash_words(self, words: Sequence[str]) -> str:
        return f"hash({', '.join(words)})"

    # the same arithmetic spelled out (Spark; DuckDB if its hash() ever changes):
    # unsigned 64-bit values as HUGEINT in [0, 2⁶⁴)
    def u_word(self, w: str) -> str:
        return f"(CAST({w} AS HUGEINT) & {MASK64_SQL})"

    def u_xorshift(self, u: str, shift: int) -> str:
        return f"xor({u}, {u} >> {shift})"

    def u_xor(self, a: str, b: str) -> str:
        return f"xor({a}, {b})"

    def u_mul(self, u: str, c: int) -> str:
        """u·c mod 2⁶⁴ (the product fits UHUGEINT; masking, not %, which is far slower)."""
        return (f"CAST((CAST({u} AS UHUGEINT) * CAST({int(c)} AS UHUGEINT)) & "
                f"CAST({MASK64_SQL} AS UHUGEINT) AS HUGEINT)")


class Params:
    """Bound parameters of one statement: values never enter SQL text."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.values: dict[str, Any] = {}
        self._by_value: dict[tuple[type, Any], str] = {}

    def __call__(self, value: Any) -> str:
        hashable = tuple(value) if isinstance(value, list) else value
        k = (type(value), hashable)
        if k not in self._by_value:
            key = f"p{len(self.values)}"
            self.values[key] = value
            self._by_value[k] = key
        return self.dialect.marker(self._by_value[k])

    def many(self, values: Iterable[Any]) -> str:
        return ", ".join(self(v) for v in values)

    def const(self, value: str) -> str:
        """A code constant (a pattern, a token) as a literal, so engines can fold it."""
        return self.dialect.literal(value)

    def consts(self, values: Iterable[str]) -> str:
        return ", ".join(self.const(v) for v in values)


# ------------------------------------------------------------------ requests
@dataclass(frozen=True, slots=True)
class _Stats:
    k: int


@dataclass(frozen=True, slots=True)
class _Rows:
    pass


@dataclass(frozen=True, slots=True)
class _Count:
    k: int | None
    predicate: Predicate | None


@dataclass(frozen=True, slots=True)
class _Sum:
    k: int


@dataclass(frozen=True, slots=True)
class _Bins:
    """A grouping request: per-key row counts of one binning of column k."""

    k: int
    edges: tuple[float, ...] | None = None  # numeric histogram edges
    grid: tuple[float, ...] | None = None  # quantile candidates


@dataclass(frozen=True, slots=True)
class _Digest:
    """The content digest's row count and lane sums (every row, before bounding)."""


@dataclass(frozen=True, slots=True)
class _Keys:
    """Rows per key of key column k (a ``GROUP BY`` of its own: :meth:`SqlBackend._key_counts`)."""

    k: int


@dataclass(frozen=True, slots=True)
class _InGroup:
    """A request over the rows of one group (:class:`~planner.data.requests.Grouped`).

    ``by`` are the grouping columns: a row's key for column k is its usable code (the
    category index, or 0 / 1), −1 when not usable (in no group). ``codes`` are the group's
    key values, one per column. Every group of one ``by`` is computed by one ``GROUP BY``
    (:meth:`SqlBackend._run_groups`).
    """

    by: tuple[int, ...]
    codes: tuple[int, ...]
    req: _Stats | _Rows | _Count | _Sum | _Bins


_Request = _Stats | _Rows | _Count | _Sum | _Bins | _Digest | _Keys | _InGroup
_Inner = _Stats | _Rows | _Count | _Sum | _Bins


def _in_group(by: tuple[int, ...], codes: tuple[int, ...], inner: _Request) -> _InGroup:
    """``inner`` over the rows of one group (only row, count, sum, stats and bins requests
    are computed in groups: :meth:`planner.data.requests.Grouped.validate`)."""
    if not isinstance(inner, (_Stats, _Rows, _Count, _Sum, _Bins)):
        raise QueryError("the content digest and key counts cover the whole table, not one group of it.")
    return _InGroup(by, codes, inner)


def _default(req: _Request) -> Any:
    if isinstance(req, _InGroup):
        return _default(req.req)
    if isinstance(req, _Bins):
        return {}
    if isinstance(req, _Rows):
        return 0
    if isinstance(req, _Count):
        return (0, 0)
    if isinstance(req, _Digest):
        return (0, 0, 0)
    return (0, 0, 0, 0)


def type_class(engine_type: str) -> TypeClass:
    """Coarse class of an engine column type (DuckDB or Spark spelling)."""
    t = engine_type.strip().lower()
    if t in ("varchar", "string", "text") or t.startswith(("varchar", "char")):
        return "text"
    if t in ("boolean", "bool"):
        return "bool"
    if t in ("tinyint", "smallint", "integer", "int", "bigint", "hugeint", "utinyint",
             "usmallint", "uinteger", "ubigint", "uhugeint", "long", "short", "byte"):
        return "int"
    if t in ("double", "float", "real") or t.startswith("decimal"):
        return "float"
    return "other"


def _concat(pieces: Sequence[str]) -> str:
    """``concat`` of text pieces that are never NULL (then it is ``||``), adjacent
    string literals merged: one call instead of a chain of intermediate strings.

    >>> _concat(["a1", "':'", "'0'", "b"])
    "concat(a1, ':0', b)"
    """
    merged: list[str] = []
    for x in pieces:
        if merged and _is_literal(x) and _is_literal(merged[-1]):
            merged[-1] = merged[-1][:-1] + x[1:]
        else:
            merged.append(x)
    return merged[0] if len(merged) == 1 else f"concat({', '.join(merged)})"


def _is_literal(x: str) -> bool:
    return len(x) >= 2 and x[0] == x[-1] == "'" and "'" not in x[1:-1]


def _uniform_guess_ok(edges: np.ndarray, side: str) -> bool:
    """Whether ``floor/ceil((x − e₀)/w)`` is within one of searchsorted for all x in range."""
    if edges.size < 2:
        return False
    w = float(edges[1] - edges[0])
    if not w > 0:
        return False
    lo_pts = np.nextafter(edges, -np.inf)
    pts = np.concatenate([edges, lo_pts, np.nextafter(edges, np.inf)])
    pts = pts[(pts >= edges[0]) & (pts <= edges[-1])]
    q = (pts - edges[0]) / w
    if side == "right":
        guess = np.clip(np.floor(q), 0, edges.size - 2)
        truth = np.searchsorted(edges, pts, side="right") - 1
    else:
        guess = np.clip(np.ceil(q), 0, edges.size - 1)
        truth = np.searchsorted(edges, pts, side="left")
    return bool(np.all(np.abs(guess - truth) <= 1))


def _arithmetic_step(edges: np.ndarray) -> float | None:
    """A step with ``edges[i] == i·step + edges[0]`` exactly for every i but the last, if any.

    Both IEEE operations round the same way in numpy, DuckDB and Spark (no fused
    multiply-add across separate SQL operators), so SQL computes these edges bit for bit.
    ``numpy.linspace`` grids and the grids of a declared step have this form, and so do
    the edges ``[*grid, top]`` of a histogram paired with a quantile's candidates
    (:meth:`SqlBackend._rank_pairs`), whose step is the grid's own, (grid[-1] − grid[0]) /
    (n − 2): neither the whole span's nor the first difference.

    Examples
    --------
    >>> _arithmetic_step(np.linspace(18, 90, 1001)) == (90 - 18) / 1000
    True
    >>> grid = np.linspace(18, 90, 1001)
    >>> _arithmetic_step(np.append(grid, 90 + (grid[1] - grid[0]))) == (90 - 18) / 1000
    True
    >>> _arithmetic_step(np.array([0.0, 1.0, 3.0, 4.0])) is None
    True
    """
    n = edges.size
    if n < 2:
        return None
    i = np.arange(n - 1, dtype=np.float64)
    steps = [(edges[-1] - edges[0]) / (n - 1), edges[1] - edges[0]]
    if n > 2:
        steps.append((edges[-2] - edges[0]) / (n - 2))
    for step in steps:
        if step > 0 and np.isfinite(step) and np.array_equal(i * step + edges[0], edges[:-1]):
            return float(step)
    return None


def _bitmap_bits(expected_rows: int | None) -> int:
    """Bits of the unit-check bitmap: 2^bits ≥ 2 × the expected rows (2¹⁶ … 2²⁸).

    A larger table than expected only makes the check inconclusive (then the exact
    check by person runs); 2²⁸ bits are 32 MB per thread.

    >>> _bitmap_bits(10_000_000), _bitmap_bits(None), _bitmap_bits(10)
    (25, 21, 16)
    """
    n = expected_rows if expected_rows is not None and expected_rows > 0 else 1 << 20
    return min(max((2 * n - 1).bit_length(), 16), 28)


def _units_proven(total: int, n_int: int, distinct: int) -> bool:
    """Whether the unit check proves that nobody has more than one row (hence ≤ c)."""
    return total == 0 or (n_int == total and distinct == total)


@dataclass
class _Compiled:
    """The conformed relation as SQL: a chain of projections ending in ``kept``."""

    sql: str
    params: Params


@dataclass
class _Layer:
    cols: list[tuple[str, str]] = field(default_factory=list)

    def add(self, alias: str, expr: str) -> None:
        self.cols.append((alias, expr))


def _chain(base: str, layers: Sequence[_Layer]) -> str:
    """``base`` under one ``SELECT *, …`` projection per non-empty layer, in order."""
    for layer in layers:
        if layer.cols:
            cols = ", ".join(f"{e} AS {a}" for a, e in layer.cols)
            base = f"(SELECT *, {cols} FROM {base} s)"
    return base


@dataclass(frozen=True)
class _BinPlan:
    """How a statement counts its grouping requests (:meth:`SqlBackend._bin_plan`)."""

    #: the requests as asked
    wanted: tuple[_Bins, ...]
    #: request → the per-value request it is binned from in Python (``_value_counted``)
    by_value: dict[_Bins, _Bins]
    #: the requests counted by a bin key each (deduplicated; paired candidates left out)
    groups: tuple[_Bins, ...]
    #: histogram → the candidate counts counted with it by one joint key (``_rank_pairs``)
    ranks: dict[_Bins, _Bins]


class SqlBackend(Backend):
    """Exact aggregates computed by a SQL engine (see the module docstring).

    Subclasses provide the engine: :meth:`_execute` (SQL + named parameters → rows) and
    the source view with its column types. Aggregates are computed lazily and cached;
    :meth:`prefetch` computes everything a workload needs in one statement (and, with
    ``report`` / ``digest``, the column report and the content digest in the same scan).
    """

    dialect: Dialect = Dialect()
    kind: str = "sql"

    def _setup(self, schema: Schema, source_view: str, column_types: dict[str, str],
               *, csv_text: bool, salt: str | None = None, require_rows: bool = False,
               expected_rows: int | None = None) -> None:
        absent = [n for n in schema.names if n not in column_types]
        if absent:
            raise DataError(
                f"column(s) {absent} are declared in the schema but not in the data; "
                f"fix the schema or the file (the file has {len(column_types)} columns)."
            )
        self.schema = schema
        self._src = source_view
        #: statements that read the data so far (the release route needs one)
        self.passes = 0
        self._types = {n: type_class(column_types[n]) for n in schema.names}
        self._csv = csv_text
        self._salt = schema.salt if salt is None else salt
        self._cache: dict[_Request, Any] = {}
        self._uid = uuid.uuid4().hex[:12]
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
        self._cat_keys = self._declared_keys()
        self._hash_native: bool | None = None
        #: count bins inside the single pass (reading the source again is dear: CSV)
        self._one_pass_bins = csv_text
        self._require_rows = require_rows
        self._thr: tuple[str, bool] | None = None
        #: bits of the modular bitmap that proves nobody has two rows (single-scan engines)
        self._bitmap_bits = _bitmap_bits(expected_rows)
        # rows before bounding and whether anybody has more than c rows: unknown until the
        # first statement (single scan), or checked now (engines that cannot prove it there)
        self._total: int = -1
        self._bounding: bool | None = None
        #: how "nobody has more than c rows" was decided: "bitmap" (in the first
        #: statement), "grouping" (a pass by person), None (no person column / not yet)
        self.unit_check: str | None = None
        if self.schema.unit.column is None:
            self._bounding = False
        elif not self.dialect.single_scan:
            self.unit_check = "grouping"
            self._total, self._bounding = self._check_units()
            if require_rows and self._total == 0:
                raise DataError(
                    "the data has a header but no data rows; use a file with at least one row."
                )

    # ------------------------------------------------------------------ engine hooks
    @abstractmethod
    def _execute(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement; rows as tuples."""

    def _store(self, name: str, sql: str, params: Params) -> bool:
        """Compute a statement once and keep its rows in the engine under ``name``.

        The rows are private (bounding thresholds): they stay in the engine, never in Python.
        Returns False where the engine keeps nothing (this default): contribution bounding
        then ranks whole rows in one statement (:meth:`_kept_ranked`). DuckDB stores; on
        Spark the narrow plan ran the plan optimizer out of heap, so it ranks rows.
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

    # ------------------------------------------------------------------ compiler
    def _canon(self, a: str, tc: TypeClass, p: Params) -> str:
        """The canonical key of a cell (NULL when missing) — see the module docstring."""
        d = self.dialect
        if tc == "int":
            return f"CASE WHEN {a} IS NULL THEN NULL ELSE 'n' || CAST({a} AS {d.text_type}) END"
        if tc == "bool":
            return f"CASE WHEN {a} IS NULL THEN NULL WHEN {a} THEN 'tTrue' ELSE 'tFalse' END"
        if tc == "float":
            return self._num_canon(f"CAST({a} AS DOUBLE)", p)
        digits = d.strip(a, p.const(r"^[+-]?0*"))
        return (
            f"CASE WHEN {a} IS NULL OR {a} = '' THEN NULL "
            f"WHEN instr({p.const('+-.0123456789iInN')}, left({a}, 1)) = 0 THEN 't' || {a} "
            f"WHEN {d.matches(a, p.const('^(?:0|[1-9][0-9]*)$'))} THEN 'n' || {a} "
            f"WHEN {d.matches(a, p.const(INT_PATTERN))} THEN 'n' || CASE WHEN {digits} = '' THEN '0' "
            f"WHEN {a} LIKE '-%' THEN '-' || {digits} ELSE {digits} END "
            f"WHEN {d.matches(a, p.const(NUMBER_PATTERN))} THEN "
            f"{self._num_canon(f'TRY_CAST({a} AS DOUBLE)', p)} "
            f"ELSE 't' || {a} END"
        )

    def _text(self, raw: str, tc: TypeClass, p: Params) -> str:
        """A text cell trimmed of Unicode white space; CSV NA tokens (and NULL) → NULL."""
        d = self.dialect
        if tc == "other":
            raw = f"CAST({raw} AS {d.text_type})"
        ws = p.const(WHITESPACE)
        trimmed = (
            f"CASE WHEN instr({ws}, left({raw}, 1)) > 0 OR instr({ws}, right({raw}, 1)) > 0 "
            f"THEN {d.strip(raw, p.const(TRIM_PATTERN))} ELSE {raw} END"
        )
        if self._csv and tc == "text":
            return (f"CASE WHEN {self.dialect.in_list(raw, [p.const(t) for t in CSV_NULL_TOKENS])} THEN NULL "
                    f"ELSE {trimmed} END")
        return trimmed

    def _num_canon(self, x: str, p: Params) -> str:
        d = self.dialect
        return (
            f"CASE WHEN {x} IS NULL OR {d.is_nan(x)} THEN NULL "
            f"WHEN {x} = {_INF} THEN 'ninf' WHEN {x} = -{_INF} THEN 'n-inf' "
            f"WHEN abs({x}) < {p(_TWO53)} AND {x} % 1 = 0 "
            f"THEN 'n' || CAST(CAST({x} AS BIGINT) AS {d.text_type}) "
            f"ELSE 'f' || CAST({x} AS {d.text_type}) END"
        )

    def _declared_keys(self) -> dict[int, list[str | None]]:
        """Per categorical column, the canonical key of each declared category, computed
        by the engine with the same SQL as the cells' keys (one small statement, no data).
        """
        p = Params(self.dialect)
        exprs: list[str] = []
        owners: list[int] = []
        for k, col in enumerate(self.schema.columns):
            if col.kind is ColumnKind.CATEGORICAL:
                for c in col.categories or ():
                    exprs.append(self._canon(p(str(c).strip(WHITESPACE)), "text", p))
                    owners.append(k)
        out: dict[int, list[str | None]] = {}
        if not exprs:
            return out
        row = self._run_sql(f"SELECT {', '.join(exprs)}", p)[0]
        for k, key in zip(owners, row, strict=True):
            out.setdefault(k, []).append(None if key is None else str(key))
        return out

    def _fast_strings(self, k: int) -> list[tuple[str, int]]:
        """(raw text, code) pairs that stand for a declared value of column k exactly as
        they are: the slow path (trim, NA tokens, canonical key) gives them that code, so
        a cell equal to one skips it (``CASE a WHEN …``: one comparison per cell).
        """
        col = self.schema.columns[k]
        out: list[tuple[str, int]] = []
        if col.kind is ColumnKind.CATEGORICAL:
            for i, (c, key) in enumerate(zip(col.categories or (), self._cat_keys[k], strict=True)):
                s = str(c).strip(WHITESPACE)
                if key is not None and s and not (self._csv and s in CSV_NULL_TOKENS):
                    out.append((s, i))
        else:  # boolean tokens, in the spellings files use
            spellings = {v for t in _BOOL_LOOKUP for v in (t, t.upper(), t.capitalize())}
            for s in sorted(spellings | {"1.0", "0.0"}):
                canon = canonical_value(s)
                code = None if canon is None else _BOOL_LOOKUP.get(canon.lower())
                if code is not None and not (self._csv and s in CSV_NULL_TOKENS):
                    out.append((s, code))
        return out

    def _word(self, u: int) -> str:
        """A constant word as a BIGINT literal (two's complement)."""
        signed = u - (1 << 64) if u >= 1 << 63 else u
        return f"CAST({signed} AS BIGINT)"

    def _key_word(self, key: str) -> str:
        """The digest word of a canonical key (``'n'`` integer / ``'f'`` number / ``'t'``
        text; NULL: missing): :func:`planner.data.backends.digest.text_word` in SQL."""
        d = self.dialect
        rest = f"substr({key}, 2)"
        flt = self._word(dg.T_FLT)
        return (
            f"CASE WHEN {key} IS NULL THEN {self._word(dg.T_MISS)} "
            f"WHEN {key} = 'ninf' THEN {d.xor(d.word_bits(_INF), flt)} "
            f"WHEN {key} = 'n-inf' THEN {d.xor(d.word_bits(f'-{_INF}'), flt)} "
            f"WHEN substr({key}, 1, 1) = 'n' THEN COALESCE("
            f"{d.xor(f'TRY_CAST({rest} AS BIGINT)', self._word(dg.T_INT))}, "
            f"{d.xor(d.word_md5(rest), self._word(dg.T_TXT))}) "
            f"WHEN substr({key}, 1, 1) = 'f' THEN {d.xor(d.word_bits(f'CAST({rest} AS DOUBLE)'), flt)} "
            f"ELSE {d.xor(d.word_md5(rest), self._word(dg.T_TXT))} END"
        )

    def _number_word(self, x: str) -> str:
        """Word of a number x (DOUBLE, not NaN) in a categorical / identifier column:
        :func:`planner.data.backends.digest.number_words`."""
        d = self.dialect
        return (
            f"CASE WHEN abs({x}) < {_TWO53_SQL} AND {x} = {d.floor(x)} "
            f"THEN {d.xor(f'CAST({x} AS BIGINT)', self._word(dg.T_INT))} "
            f"ELSE {d.xor(d.word_bits(x), self._word(dg.T_FLT))} END"
        )

    def _cells_sql(self, p: Params, columns: Sequence[int] | None = None, *, pid: bool = True,
                   unit_int: bool = False, atoms: bool = False) -> str:
        """SELECT of the conformed cells over the source.

        Per column k: ``u`` usable, ``v`` value (clipped number / bin code), ``m`` missing,
        ``i`` invalid, ``cl`` clipped, ``d`` dropped by the missing-value rule; with
        ``pid`` the person's canonical key; with ``unit_int`` ``iv``, the person id as an
        integer where it is one in plain form (NULL otherwise); with ``atoms`` the digest
        words of every declared column (:mod:`planner.data.backends.digest`): ``wv{k}`` and
        ``wt{k}`` for a numeric one, ``w{k}`` for the others.

        Text cells take a fast path where the engine can read them exactly as the
        pandas rules do without them: a number made of digits, '.', 'e' and signs cast
        directly (:meth:`Dialect.number_guard`), a category or boolean token equal to a
        declared spelling (:meth:`_fast_strings`), an integer id of digits. The others
        (blanks, NA tokens, odd numbers, undeclared values) go through the full rules:
        Unicode trimming, the number pattern, canonical keys. Each derived value lives in
        a projection layer of its own and ``CASE`` evaluates a branch only on its rows.
        """
        d = self.dialect
        schema = self.schema
        ks = sorted(set(range(len(schema.columns)) if columns is None or atoms else columns))
        unit = schema.unit.column if (pid or unit_int) else None
        uk = schema.names.index(unit) if unit is not None else None
        if uk is not None and uk not in ks:
            ks.append(uk)
        if not ks:
            return f"SELECT 1 AS one_ FROM {self._src}"
        L = [_Layer() for _ in range(9)]  # raw, fast, text, key, derived, state, flags, rule, final
        out: list[str] = []
        for k in ks:
            col = schema.columns[k]
            src = d.ident(col.name)
            tc = self._types[col.name]
            a = f"a{k}"
            if tc == "other":
                L[0].add(a, f"CAST({src} AS {d.text_type})")
                tc = "text"
            else:
                L[0].add(a, src)
            if col.kind is ColumnKind.NUMERIC:
                self._numeric_cells(k, col, tc, p, L, atoms)
            elif col.kind in (ColumnKind.IDENTIFIER, ColumnKind.KEY):
                self._identifier_cells(k, tc, p, L, atoms, pid=k == uk and pid, iv=k == uk and unit_int,
                                       label=col.kind is ColumnKind.KEY)
            else:
                self._coded_cells(k, col, tc, p, L, atoms)
            out += [f"{x}{k}" for x in ("u", "v", "m", "i", "cl", "d")]
            if atoms:
                out += [f"wv{k}", f"wt{k}"] if col.kind is ColumnKind.NUMERIC else [f"w{k}"]
        if uk is not None and pid:
            out.append("pid")
        if uk is not None and unit_int:
            out.append("iv")
        q = f"SELECT {', '.join(f'{e} AS {n}' for n, e in L[0].cols)} FROM {self._src}"
        for layer in L[1:]:
            if layer.cols:
                cols = ", ".join(f"{e} AS {n}" for n, e in layer.cols)
                q = f"SELECT *, {cols} FROM ({q}) q"
        return f"SELECT {', '.join(out)} FROM ({q}) q"

    def _numeric_cells(self, k: int, col: Column, tc: TypeClass, p: Params,
                       L: list[_Layer], atoms: bool) -> None:
        """Layers of a numeric column: the number ``xr`` (NULL if none), ``mi`` missing,
        ``inv`` invalid (text that is no number), then the rule (replace / drop) and
        clipping. ``v`` and ``cl`` are only read where ``u`` holds (sums, bins, predicates
        and row keys all test it first), so a dropped cell's value is left as it is."""
        d = self.dialect
        a = f"a{k}"

        def nan_or_inf(x: str) -> str:
            return f"({d.is_nan(x)} OR abs({x}) = {_INF})"

        invalid: str | None = None
        if tc == "text":
            L[1].add(f"fx{k}", f"CASE WHEN {d.number_guard(a)} THEN TRY_CAST({a} AS DOUBLE) END")
            L[2].add(f"t{k}", f"CASE WHEN fx{k} IS NULL THEN {self._text(a, 'text', p)} END")
            L[3].add(f"isn{k}", f"CASE WHEN fx{k} IS NULL AND t{k} IS NOT NULL THEN "
                                f"{d.matches(f't{k}', p.const(NUMBER_PATTERN))} END")
            L[4].add(f"xs{k}", f"CASE WHEN isn{k} THEN TRY_CAST(t{k} AS DOUBLE) END")
            L[4].add(f"na{k}", f"CASE WHEN fx{k} IS NULL AND t{k} IS NOT NULL AND NOT isn{k} THEN "
                               f"{d.in_list(f'lower(t{k})', [p.const(t) for t in sorted(NUMERIC_NA_TOKENS)])} END")
            L[5].add(f"xr{k}", f"COALESCE(fx{k}, xs{k})")
            L[5].add(f"in{k}", f"COALESCE(fx{k} IS NULL AND t{k} IS NOT NULL AND t{k} <> '' "
                               f"AND NOT isn{k} AND NOT na{k}, FALSE)")
            L[6].add(f"mi{k}", f"CASE WHEN xr{k} IS NULL THEN NOT in{k} ELSE {nan_or_inf(f'xr{k}')} END")
            invalid = d.xor(d.word_md5(f"t{k}"), self._word(dg.T_TXT))
        elif tc == "bool":  # a boolean cell is no number: invalid unless NULL
            L[5].add(f"xr{k}", "CAST(NULL AS DOUBLE)")
            L[5].add(f"in{k}", f"{a} IS NOT NULL")
            L[6].add(f"mi{k}", f"{a} IS NULL")
            invalid = (f"CASE WHEN {a} THEN {self._word(dg.text_word('True'))} "
                       f"ELSE {self._word(dg.text_word('False'))} END")
        elif tc == "int":
            L[5].add(f"xr{k}", f"CAST({a} AS DOUBLE)")
            L[6].add(f"mi{k}", f"{a} IS NULL")
        else:  # float
            L[5].add(f"xr{k}", f"CAST({a} AS DOUBLE)")
            L[6].add(f"mi{k}", f"xr{k} IS NULL OR {nan_or_inf(f'xr{k}')}")
        bad = f"(mi{k} OR in{k})" if invalid is not None else f"mi{k}"
        if atoms:  # the value (0.0 unless a number: NaN is missing) and a tag, 0 for numbers
            if tc == "int":
                L[6].add(f"wv{k}", f"COALESCE(xr{k}, CAST(0 AS DOUBLE))")
                L[6].add(f"wt{k}", f"CASE WHEN {a} IS NULL THEN {self._word(dg.T_MISS)} "
                                   f"ELSE CAST(0 AS BIGINT) END")
            else:
                number = f"(xr{k} IS NOT NULL AND NOT {d.is_nan(f'xr{k}')})"
                tag = (f"WHEN in{k} THEN {invalid} " if invalid is not None else "")
                L[6].add(f"wv{k}", f"CASE WHEN {number} THEN xr{k} ELSE CAST(0 AS DOUBLE) END")
                L[6].add(f"wt{k}", f"CASE WHEN {number} THEN CAST(0 AS BIGINT) {tag}"
                                   f"ELSE {self._word(dg.T_MISS)} END")
        lo, hi = col.bounds
        if col.missing.action is MissingAction.REPLACE:
            rep = p(float(col.missing.value))  # type: ignore[arg-type]
            L[7].add(f"x{k}", f"CASE WHEN {bad} THEN {rep} ELSE xr{k} END")
            L[7].add(f"u{k}", "TRUE")
        else:
            L[7].add(f"x{k}", f"xr{k}")
            L[7].add(f"u{k}", f"NOT {bad}")
        L[7].add(f"m{k}", f"mi{k}")
        L[7].add(f"i{k}", f"in{k}" if invalid is not None else "FALSE")
        plo, phi = p(float(lo)), p(float(hi))
        L[8].add(f"v{k}", f"least(greatest(x{k}, {plo}), {phi})")
        L[8].add(f"cl{k}", f"(u{k} AND (x{k} < {plo} OR x{k} > {phi}))")
        L[8].add(f"d{k}", f"NOT u{k}")

    def _coded_cells(self, k: int, col: Column, tc: TypeClass, p: Params,
                     L: list[_Layer], atoms: bool) -> None:
        """Layers of a categorical or boolean column: code ``cr`` (−1 missing, −2
        undeclared / not a token, else the category index or 0 / 1) and digest word ``w``."""
        categorical = col.kind is ColumnKind.CATEGORICAL
        if categorical:
            consts = [self._word(dg.text_word(canonical_value(c) or "")) for c in col.categories or ()]
        else:
            consts = [self._word(v ^ dg.T_BOOL) for v in (0, 1)]
        key, first, known, other = self._coded_read(k, col, tc, p, L, consts)
        if key is not None:
            match = self._coded_match(k, key, categorical, p)
            L[5].add(f"cr{k}", f"CASE {first}WHEN {key} IS NULL THEN -1 {match} ELSE -2 END")
        if atoms:
            if categorical or tc in ("int", "bool"):
                L[6].add(f"w{k}", f"CASE {known}ELSE {other} END")
            else:  # boolean text / float: tokens are 0 / 1, other cells read like categories
                L[6].add(f"w{k}", f"CASE {known}WHEN cr{k} = 1 THEN {consts[1]} "
                                  f"WHEN cr{k} = 0 THEN {consts[0]} ELSE {other} END")
        self._coded_rule(k, col, L)

    def _coded_read(self, k: int, col: Column, tc: TypeClass, p: Params, L: list[_Layer],
                    consts: list[str]) -> tuple[str | None, str, str, str]:
        """The reading of a categorical or boolean column's cells by engine type.

        Adds ``cr{k}`` where the type decides the code alone (int, bool); else the cell's
        canonical key ``key{k}``, matched by :meth:`_coded_match`. Returns (the key column
        or None, a ``WHEN`` deciding the code before the key, the ``WHEN`` branches of
        the digest word known without the key, the word of the other cells).
        """
        d = self.dialect
        a = f"a{k}"
        categorical = col.kind is ColumnKind.CATEGORICAL
        keys = self._cat_keys[k] if categorical else []
        miss = self._word(dg.T_MISS)
        if tc == "text":
            fast = self._fast_strings(k)
            whens = " ".join(f"WHEN {p.const(s_)} THEN {c}" for s_, c in fast)
            L[1].add(f"fc{k}", f"CASE WHEN {a} IS NULL THEN -1 ELSE CASE {a} {whens} END END"
                     if whens else f"CASE WHEN {a} IS NULL THEN -1 END")
            L[2].add(f"t{k}", f"CASE WHEN fc{k} IS NULL THEN {self._text(a, 'text', p)} END")
            L[3].add(f"key{k}", f"CASE WHEN fc{k} IS NULL THEN {self._canon(f't{k}', 'text', p)} END")
            # declared values and tokens by their (constant) word, the others by their key
            known = (f"WHEN fc{k} = -1 THEN {miss} WHEN fc{k} IS NOT NULL THEN CASE fc{k} "
                     + " ".join(f"WHEN {i} THEN {c}" for i, c in enumerate(consts)) + " END ")
            return f"key{k}", f"WHEN fc{k} IS NOT NULL THEN fc{k} ", known, self._key_word(f"key{k}")
        if tc == "int":
            known = f"WHEN {a} IS NULL THEN {miss} "
            if categorical:
                ints = [(int(key_[1:]), i) for i, key_ in enumerate(keys)
                        if key_ is not None and key_[:1] == "n" and key_[1:].lstrip("-").isdigit()]
                whens = " ".join(f"WHEN {p(v)} THEN {i}" for v, i in ints)
                code = f"CASE {a} {whens} ELSE -2 END" if ints else "-2"
            else:
                code = f"CASE {a} WHEN 1 THEN 1 WHEN 0 THEN 0 ELSE -2 END"
                known += f"WHEN {a} = 1 THEN {consts[1]} WHEN {a} = 0 THEN {consts[0]} "
            L[5].add(f"cr{k}", f"CASE WHEN {a} IS NULL THEN -1 ELSE {code} END")
            return None, "", known, d.xor(f"CAST({a} AS BIGINT)", self._word(dg.T_INT))
        if tc == "bool":
            w_true, w_false = self._word(dg.text_word("True")), self._word(dg.text_word("False"))
            if categorical:
                whens = " ".join(f"WHEN {a} = {'TRUE' if key_ == 'tTrue' else 'FALSE'} THEN {i}"
                                 for i, key_ in enumerate(keys) if key_ in ("tTrue", "tFalse"))
                L[5].add(f"cr{k}", f"CASE WHEN {a} IS NULL THEN -1 {whens} ELSE -2 END")
            else:
                L[5].add(f"cr{k}", f"CASE WHEN {a} IS NULL THEN -1 WHEN {a} THEN 1 ELSE 0 END")
                w_true, w_false = consts[1], consts[0]
            known = f"WHEN {a} IS NULL THEN {miss} WHEN {a} THEN {w_true} WHEN NOT {a} THEN {w_false} "
            return None, "", known, miss
        # float: the canonical key of every cell (numbers in a categorical column)
        L[3].add(f"key{k}", self._canon(a, "float", p))
        return f"key{k}", "", f"WHEN {a} IS NULL OR {d.is_nan(a)} THEN {miss} ", self._number_word(a)

    def _coded_match(self, k: int, key: str, categorical: bool, p: Params) -> str:
        """``WHEN`` branches giving the code of a canonical key: the declared category's
        index, or 1 / 0 for a boolean token."""
        d = self.dialect
        if categorical:
            return " ".join(f"WHEN {key} = {p(ck)} THEN {i}" for i, ck in enumerate(self._cat_keys[k])
                            if ck is not None)
        t_keys = [("n" if v.isdigit() else "t") + v for v, c in _BOOL_LOOKUP.items() if c == 1]
        f_keys = [("n" if v.isdigit() else "t") + v for v, c in _BOOL_LOOKUP.items() if c == 0]
        return (f"WHEN {d.in_list(f'lower({key})', [p.const(t) for t in t_keys])} THEN 1 "
                f"WHEN {d.in_list(f'lower({key})', [p.const(t) for t in f_keys])} THEN 0")

    def _coded_rule(self, k: int, col: Column, L: list[_Layer]) -> None:
        """The missing-value rule of a coded column: value ``x``/``v``, flags ``u``, ``m``,
        ``i``, ``cl``, ``d`` from the code ``cr`` (categories: undeclared → the "other"
        bin, or not usable)."""
        cr = f"cr{k}"
        L[7].add(f"m{k}", f"{cr} = -1")
        L[7].add(f"i{k}", f"{cr} = -2")
        L[7].add(f"cl{k}", "FALSE")
        if col.kind is ColumnKind.CATEGORICAL:
            labels = col.labels
            other_bin = len(labels) - 1 if col.other_bin else -1
            missing_code = (labels.index(str(col.missing.value))
                            if col.missing.action is MissingAction.REPLACE else -1)
            L[6].add(f"x{k}", f"CAST(CASE WHEN {cr} = -2 THEN {other_bin} WHEN {cr} = -1 THEN "
                              f"{missing_code} ELSE {cr} END AS BIGINT)")
            L[7].add(f"u{k}", f"x{k} >= 0")
            L[7].add(f"v{k}", f"x{k}")
            L[7].add(f"d{k}", f"{cr} = -1" if col.missing.action is MissingAction.DROP else "FALSE")
            return
        if col.missing.action is MissingAction.REPLACE:
            rep = 1 if col.missing.value else 0
            L[6].add(f"x{k}", f"CAST(CASE WHEN {cr} < 0 THEN {rep} ELSE {cr} END AS BIGINT)")
            L[6].add(f"ub{k}", "TRUE")
        else:
            L[6].add(f"x{k}", f"CAST(CASE WHEN {cr} < 0 THEN 0 ELSE {cr} END AS BIGINT)")
            L[6].add(f"ub{k}", f"{cr} >= 0")
        L[7].add(f"u{k}", f"ub{k}")
        L[7].add(f"v{k}", f"x{k}")
        L[7].add(f"d{k}", f"NOT ub{k}")

    def _identifier_cells(self, k: int, tc: TypeClass, p: Params, L: list[_Layer], atoms: bool,
                          *, pid: bool, iv: bool, label: bool = False) -> None:
        """Layers of an identifier column: present or missing; the canonical key ``pid``
        (bounding), the plain integer ``iv`` (the unit check), the digest word ``w``.

        A key column (``label``) is read the same way, and its value ``v`` is the key's
        label as :func:`planner.data.backends.pandas_backend.key_label` writes it: text trimmed
        as written ("02139" keeps its zero), an integer in digits, a float as a DOUBLE
        (put in canonical form by :meth:`key_counts`)."""
        d = self.dialect
        a = f"a{k}"
        t_int = self._word(dg.T_INT)
        if tc == "text":
            # an integer written in canonical form (its digits print back as the text):
            # DuckDB's cast also reads '0x10', '1_000', '7.5' and ' 7' as integers
            L[1].add(f"ti{k}", f"TRY_CAST({a} AS BIGINT)")
            L[2].add(f"fi{k}", f"CASE WHEN CAST(ti{k} AS {d.text_type}) = {a} THEN ti{k} END")
            L[3].add(f"t{k}", f"CASE WHEN fi{k} IS NULL THEN {self._text(a, 'text', p)} END")
            L[4].add(f"key{k}", f"CASE WHEN fi{k} IS NULL THEN {self._canon(f't{k}', 'text', p)} END")
            present = f"(fi{k} IS NOT NULL OR key{k} IS NOT NULL)"
            shown = f"CASE WHEN fi{k} IS NOT NULL THEN {a} ELSE t{k} END"
            canon = f"CASE WHEN fi{k} IS NOT NULL THEN 'n' || CAST(fi{k} AS {d.text_type}) ELSE key{k} END"
            plain = f"fi{k}"
            word = (f"CASE WHEN fi{k} IS NOT NULL THEN {d.xor(f'fi{k}', t_int)} "
                    f"ELSE {self._key_word(f'key{k}')} END")
        elif tc == "int":  # an integer is its own canonical value: no text per row
            present = f"{a} IS NOT NULL"
            shown = f"CAST({a} AS {d.text_type})"
            canon = self._canon(a, tc, p)
            plain = a
            word = (f"CASE WHEN {a} IS NULL THEN {self._word(dg.T_MISS)} "
                    f"ELSE {d.xor(f'CAST({a} AS BIGINT)', t_int)} END")
        else:
            L[3].add(f"key{k}", self._canon(a, tc, p))
            present = f"key{k} IS NOT NULL"
            shown = f"CAST({a} AS DOUBLE)" if tc == "float" else \
                f"CASE WHEN {a} IS NULL THEN NULL WHEN {a} THEN 'True' ELSE 'False' END"
            canon = f"key{k}"
            plain = "CAST(NULL AS BIGINT)"
            if tc == "float":
                word = (f"CASE WHEN {a} IS NULL OR {d.is_nan(a)} THEN {self._word(dg.T_MISS)} "
                        f"ELSE {self._number_word(a)} END")
            else:
                word = self._key_word(f"key{k}")
        L[5].add(f"ok{k}", present)
        if atoms:
            L[6].add(f"w{k}", word)
        if pid:
            L[6].add("pid", canon)
        if iv:
            L[6].add("iv", plain)
        L[7].add(f"u{k}", f"ok{k}")
        L[7].add(f"v{k}", shown if label else "CAST(0 AS BIGINT)")
        L[7].add(f"m{k}", f"NOT ok{k}")
        L[7].add(f"i{k}", "FALSE")
        L[7].add(f"cl{k}", "FALSE")
        L[7].add(f"d{k}", f"NOT ok{k}")

    def _conformed_ks(self) -> list[int]:
        return list(range(len(self.schema.columns)))

    def _kept_with(self, p: Params, columns: Sequence[int]) -> str:
        """The ``WITH … kept AS (…)`` prefix of an aggregate statement (engines may cache)."""
        return self._kept_ctes(p, columns)

    def _kept_ctes(self, p: Params, columns: Sequence[int]) -> str:
        """``WITH`` clauses ending in ``kept``: the conformed rows after contribution bounding.

        Without bounding only ``columns`` are conformed (an unused join is not free).
        With bounding, the per-person thresholds are computed once over a narrow relation
        and stored (:meth:`_thresholds`); ``kept`` is then a single filtering pass: the
        rows of people with at most c rows, and the rows of the others whose order key
        (:meth:`_order_key_sql`) is at most their c-th smallest. Only when the c-th and
        the (c+1)-th smallest order keys of somebody are equal (identical rows straddle
        the cut) are that person's rows ranked by ``row_number()``, in a second branch.
        """
        d = self.dialect
        if not self._bounding:
            return f"WITH kept AS {d.cte_hint}({self._cells_sql(p, columns, pid=False)})"
        stored = self._thresholds()
        if stored is None:
            return self._kept_ranked(p)
        thr, ties = stored
        cells = self._cells_sql(p)
        schema = self.schema
        okey = self._order_key_sql(p)
        cols = ", ".join(
            [f"{x}{k}" for k in range(len(schema.columns)) for x in ("u", "v", "m", "i", "cl", "d")]
            + ["pid"]
        )
        kept = (
            f"SELECT {cols} FROM flagged WHERE th_ IS NULL OR (NOT tie_ AND {okey} <= th_)"
        )
        if ties:
            c = p(schema.unit.max_rows)
            kept += (
                f" UNION ALL SELECT {cols} FROM (SELECT flagged.*, row_number() OVER "
                f"(PARTITION BY pid ORDER BY {okey}) AS rn_ FROM flagged WHERE tie_) t "
                f"WHERE rn_ <= {c}"
            )
        return (
            f"WITH flagged AS {d.cte_hint}(SELECT cells.*, b_.th AS th_, b_.tie AS tie_ "
            f"FROM ({cells}) cells LEFT JOIN {thr} b_ ON cells.pid = b_.tpid), "
            f"kept AS {d.bounded_hint}({kept})"
        )

    def _kept_ranked(self, p: Params) -> str:
        """``kept`` by ranking the rows of the people over c (wide rows, one statement).

        The engine ranks whole rows (Spark: its plan optimizer expands the row key of
        a filter on it beyond its memory; it sorts and spills by itself).
        """
        schema = self.schema
        c = p(schema.unit.max_rows)
        cols = ", ".join(
            [f"{x}{k}" for k in range(len(schema.columns)) for x in ("u", "v", "m", "i", "cl", "d")]
            + ["pid"]
        )
        return (
            f"WITH cells AS ({self._cells_sql(p)}), "
            f"over_ AS (SELECT pid AS opid FROM cells GROUP BY pid HAVING count(*) > {c}), "
            f"flagged AS (SELECT cells.*, over_.opid IS NOT NULL AS isover FROM cells "
            f"LEFT JOIN over_ ON cells.pid = over_.opid), "
            f"kept AS (SELECT {cols} FROM flagged WHERE NOT isover UNION ALL "
            f"SELECT {cols} FROM (SELECT flagged.*, row_number() OVER (PARTITION BY pid "
            f"ORDER BY {self._order_key_sql(p)}) AS rn_ FROM flagged WHERE isover) t "
            f"WHERE rn_ <= {c})"
        )

    def _order_key_sql(self, p: Params) -> str:
        """The bounding order of a conformed row: ``md5(salt_key | row key)`` in hex order.

        The text is :func:`~planner.data.backends.pandas_backend.row_key_parts` joined by "|"
        after the salt key, as in
        :func:`~planner.data.backends.pandas_backend.bound_contributions`, which orders by the
        digest's two big-endian 64-bit halves: the order of the 32-digit lowercase hex
        text (:meth:`Dialect.order_key`).
        """
        schema = self.schema
        unit_k = schema.names.index(schema.unit.column or "")
        parts = [p(salt_key(self._salt))]
        sep = p("|")
        for k, col in enumerate(schema.columns):
            if k != unit_k:
                parts += [sep, *self._row_key(k, col)]
        return self.dialect.order_key(f"md5({_concat(parts)})")

    def _thresholds(self) -> tuple[str, bool] | None:
        """(stored relation, whether any tie straddles the cut) of the bounding thresholds;
        None when the engine cannot store them (:meth:`_store`).

        One row per person with more than c rows: ``tpid``, ``th`` (the c-th smallest
        order key of their rows) and ``tie`` (whether the (c+1)-th smallest is equal to
        it). Ranked over a narrow relation (person, order key) and stored by the engine
        (:meth:`_store`), so the aggregate statements never rank wide rows. Keeping every
        row with a key ≤ ``th`` keeps exactly the c first rows of the order of
        :func:`~planner.data.backends.pandas_backend.bound_contributions` when there is no tie;
        rows with equal keys have equal row keys, hence are alike for every query.
        """
        if self._thr is None:
            d = self.dialect
            p = Params(d)
            c = self.schema.unit.max_rows
            pc, pc1 = p(c), p(c + 1)
            okey = self._order_key_sql(p)
            uk = self.schema.names.index(self.schema.unit.column or "")
            # the person ids are conformed in a scan of their own: a relation read twice
            # would be held in memory until the people over c are known
            sql = (
                f"WITH over_ AS (SELECT pid AS opid FROM ({self._cells_sql(p, [uk])}) q "
                f"GROUP BY pid HAVING count(*) > {pc}), "
                f"ranked AS (SELECT pid AS rpid, h_, row_number() OVER (PARTITION BY pid "
                f"ORDER BY h_) AS rn_ FROM (SELECT pid, {okey} AS h_ FROM ({self._cells_sql(p)}) cells "
                f"JOIN over_ ON cells.pid = over_.opid) hq) "
                f"SELECT rpid AS tpid, max(CASE WHEN rn_ = {pc} THEN h_ END) AS th, "
                f"COALESCE(max(CASE WHEN rn_ = {pc1} THEN h_ END) = "
                f"max(CASE WHEN rn_ = {pc} THEN h_ END), FALSE) AS tie "
                f"FROM ranked GROUP BY rpid"
            )
            name = f"planner_bound_{self._uid}"
            if not self._store(name, sql, p):
                return None
            ties = self._run_sql(f"SELECT count(*) FROM {name} WHERE tie", Params(d))
            self._thr = (name, bool(ties[0][0]))
        return self._thr

    def _row_key(self, k: int, col: Column) -> list[str]:
        """SQL of :func:`~planner.data.backends.pandas_backend.row_key_parts` for column k.

        Pieces of text to be concatenated (:func:`_concat`): the status, then the body.
        """
        t = self.dialect.text_type
        status = f"CASE WHEN m{k} THEN '1:' WHEN i{k} THEN '2:' WHEN cl{k} THEN '3:' ELSE '0:' END"
        if col.kind is ColumnKind.NUMERIC:
            # parts known at compile time are literals (the same text, less work per row):
            # a usable value lies in [L, U], so ih = 0 when max(|L|, |U|) < 2⁵³, there is
            # no sign when L ≥ 0, and f1 = f2 = 0 when the column is integer-valued
            lo, hi = col.bounds
            _sign, ih, il, f1, f2 = self._parts_sql(f"v{k}")
            exprs: list[str | None] = [ih, il, f1, f2]
            if max(abs(lo), abs(hi)) < _TWO53:
                exprs[0] = None
            if self._int_valued(k):
                exprs[2] = exprs[3] = None
            nums: list[str] = [] if lo >= 0 else [f"CASE WHEN v{k} < 0 THEN '-' ELSE '' END"]
            for j, e in enumerate(exprs):
                if j:
                    nums.append("':'")
                nums.append("'0'" if e is None else f"CAST(CAST({e} AS BIGINT) AS {t})")
            body = f"CASE WHEN u{k} THEN {_concat(nums)} ELSE 'x' END"
        elif col.kind is ColumnKind.CATEGORICAL:
            body = f"CAST(v{k} AS {t})"
        elif col.kind is ColumnKind.BOOLEAN:
            body = f"CASE WHEN u{k} THEN CAST(v{k} AS {t}) ELSE 'x' END"
        else:
            body = f"CASE WHEN u{k} THEN '1' ELSE '0' END"
        return [status, body]

    def _parts_sql(self, v: str) -> tuple[str, str, str, str, str]:
        """SQL of :func:`~planner.data.backends.pandas_backend.float_parts` (as DOUBLE expressions)."""
        d = self.dialect
        two = "CAST(9007199254740992 AS DOUBLE)"
        a = f"abs({v})"
        i = d.floor(a)
        f = f"({a} - {i})"
        ih = d.floor(f"{i} / {two}")
        il = f"({i} - {ih} * {two})"
        f1 = d.floor(f"{f} * {two}")
        f2 = d.floor(f"(({f} * {two}) - {f1}) * {two}")
        sign = f"(CASE WHEN {v} < 0 THEN -1 ELSE 1 END)"
        return sign, ih, il, f1, f2

    def _check_units(self) -> tuple[int, bool]:
        """(rows before bounding, whether some person has more than c rows), exactly:
        a ``GROUP BY`` person (a pass of its own; the single-scan proof came first)."""
        p = Params(self.dialect)
        unit = self.schema.unit.column
        if unit is None:
            return -1, False  # no bounding: nothing is truncated (total = rows)
        uk = self.schema.names.index(unit)
        cells = self._cells_sql(p, [uk])
        c = p(self.schema.unit.max_rows)
        # grouped by a 64-bit hash of the person: small keys, and a collision can only
        # over-count (then the exact, per-person bounding runs; it is never skipped wrongly)
        rows = self._run_sql(
            f"SELECT sum(n), sum(CASE WHEN isnull_ THEN n ELSE 0 END), "
            f"sum(CASE WHEN NOT isnull_ AND n > {c} THEN 1 ELSE 0 END) "
            f"FROM (SELECT {self.dialect.hash64('pid')} AS h_, pid IS NULL AS isnull_, count(*) AS n "
            f"FROM ({cells}) q GROUP BY {self.dialect.hash64('pid')}, pid IS NULL) g",
            p,
        )
        total, nulls, over = (int(v or 0) for v in rows[0])
        if nulls:
            raise DataError(
                f"identifier column {unit!r} has {nulls} row(s) with no value; every row "
                "must name its person. Fill them in or remove those rows."
            )
        return total, over > 0

    # ------------------------------------------------------------------ execution
    def _run(self, reqs: Iterable[_Request]) -> None:
        """Compute requests, normally in ONE statement and one scan of the data.

        The first statement of a single-scan engine (DuckDB) reads every row once and
        computes, next to the requests, the proof that nobody has more than c rows
        (:meth:`_units_proven`). When the proof fails, the exact check by person runs
        (:meth:`_check_units`); when someone is over c, the requests are computed again
        over the bounded rows (the content digest stays: it covers every row).
        """
        reqs = list(reqs)
        later = [r for r in reqs if isinstance(r, (_InGroup, _Keys))]
        if later:  # the whole-table requests first: they decide whether bounding is needed
            plain = [r for r in reqs if not isinstance(r, (_InGroup, _Keys))]
            if plain or self._bounding is None:
                self._run(plain)
            in_group = [r for r in later if isinstance(r, _InGroup)]
            if in_group:
                self._run_groups(in_group)
            for r in later:
                if isinstance(r, _Keys):  # a GROUP BY key of its own
                    self._cache[r] = self._key_counts(r.k)
            return
        todo: list[_Request] = list(dict.fromkeys([_Rows(), *reqs]))
        if self._bounding is None:
            res, units = self._statement(todo, bounded=False, unit_check=True)
            total = int(res[_Rows()])
            nulls, n_int, distinct = units
            unit = self.schema.unit.column
            if nulls:
                raise DataError(
                    f"identifier column {unit!r} has {nulls} row(s) with no value; every row "
                    "must name its person. Fill them in or remove those rows."
                )
            if self._require_rows and total == 0:
                raise DataError(
                    "the data has a header but no data rows; use a file with at least one row."
                )
            self._total = total
            if _units_proven(total, n_int, distinct):
                self.unit_check, self._bounding = "bitmap", False
            else:
                self.unit_check, self._bounding = "grouping", self._check_units()[1]
            if self._bounding:
                res = {r: v for r, v in res.items() if isinstance(r, _Digest)}
            self._cache.update(res)
            todo = [r for r in todo if r not in self._cache]
            if not todo:
                return
        digest = [r for r in todo if isinstance(r, _Digest)]
        if digest and (self._bounding or not self.dialect.single_scan):
            # every row, not the bounded ones (and on Spark, not its cached bounded view)
            res, _ = self._statement([_Rows(), *digest], bounded=False, unit_check=False)
            self._cache.update({r: v for r, v in res.items() if isinstance(r, _Digest)})
            todo = [r for r in todo if not isinstance(r, _Digest)]
        res, _ = self._statement(todo, bounded=bool(self._bounding), unit_check=False)
        self._cache.update(res)
        if self._require_rows and self._cache[_Rows()] == 0 and self._total <= 0:
            raise DataError("the data has a header but no data rows; use a file with at least one row.")

    def _statement(self, todo: list[_Request], *, bounded: bool, unit_check: bool
                   ) -> tuple[dict[_Request, Any], tuple[int, int, int]]:
        """One statement computing ``todo`` (and, with ``unit_check``, the counts that
        prove nobody has more than c rows: NULL ids, plain-integer ids, distinct ones).

        Without bounding the rows are the conformed cells, read in a single pass: one
        ungrouped aggregate holds every scalar (counts, exact sums, the digest's lane
        sums) and, where the engine has ``histogram`` (DuckDB), every bin count too
        (:meth:`_one_aggregate`). Elsewhere (Spark) the bins are a ``GROUPING SETS``
        aggregate next to it (:meth:`_grouping_sets`; the engine caches the bounded
        rows). Each derived value is computed once, in its own projection layer, and
        referenced by name.
        """
        d = self.dialect
        digest = any(isinstance(r, _Digest) for r in todo)
        used = self._used_columns(todo)
        uk = None
        unit = self.schema.unit.column
        if unit_check and unit is not None:
            uk = self.schema.names.index(unit)
            used.add(uk)
        else:
            unit_check = False
        p = Params(d)
        if bounded:
            ctes = self._kept_with(p, sorted(used))
        else:
            cells = self._cells_sql(p, sorted(used), pid=False, unit_int=unit_check, atoms=digest)
            ctes = f"WITH kept AS {d.cte_hint}({cells})"
        layers: list[_Layer] = [_Layer() for _ in range(7)]  # sums ×3, bin guess/index, digest
        aggs, slots = self._scalar_aggs([r for r in todo if not isinstance(r, _Bins)], p, layers)
        unit_at = len(aggs)
        if unit_check and uk is not None:
            bitmap = d.bitmap_distinct("iv", self._bitmap_bits)
            aggs += [self._one(f"m{uk}"), "count(iv)", bitmap if bitmap is not None else "0"]
        plan = self._bin_plan([r for r in todo if isinstance(r, _Bins)], pair_ranks=True)
        keys = self._bin_keys(plan, p, layers)
        if d.histogram("x") is not None:
            scalar_row, grouped = self._one_aggregate(ctes, p, aggs, layers, keys, plan)
        else:
            scalar_row, grouped = self._grouping_sets(ctes, p, aggs, layers, keys)
        res = self._slot_results(slots, scalar_row)
        for g, counts in zip(plan.groups, grouped, strict=True):
            if g in plan.ranks:
                res[g], res[plan.ranks[g]] = self._split_ranks(counts)
            else:
                res[g] = counts
        self._bins_from_values(plan, res)
        units = (0, 0, 0)
        if unit_check:
            units = tuple(0 if v is None else int(v) for v in scalar_row[unit_at:unit_at + 3])  # type: ignore[assignment]
        return res, units

    def _used_columns(self, reqs: Iterable[_Request | int]) -> set[int]:
        """The columns that requests (and grouping keys: a column k) read."""
        used: set[int] = set()
        for r in reqs:
            if isinstance(r, int):
                used.add(r)
            elif isinstance(r, (_Stats, _Sum, _Bins)):
                used.add(r.k)
            elif isinstance(r, _Count):
                if r.k is not None:
                    used.add(r.k)
                if r.predicate is not None:
                    used.add(self.schema.names.index(r.predicate.column))
        return used

    def _one(self, cond: str) -> str:
        """The aggregate counting the rows where ``cond`` holds."""
        return "count(*)" if cond == "TRUE" else self.dialect.count_if(cond)

    def _scalar_aggs(self, reqs: Sequence[_Request], p: Params, layers: list[_Layer]
                     ) -> tuple[list[str], list[tuple[_Request, int, int]]]:
        """(aggregates, slots) of the scalar requests: ``count(*)`` first, then each
        request's aggregates; a slot is (request, index of its first aggregate, width).
        Exact sums add their parts to ``layers[:3]``, the digest its row hash from
        ``layers[6]`` on (:meth:`_digest_sql`)."""
        aggs: list[str] = ["count(*)"]
        slots: list[tuple[_Request, int, int]] = []
        never = self._never_flags()
        for r in reqs:
            start = len(aggs)
            if isinstance(r, _Rows):
                slots.append((r, 0, 1))
                continue
            if isinstance(r, _Stats):
                k = r.k
                # usable = rows − dropped − unbinned: derived (_usable), not counted per row
                aggs += ["0"] + ["0" if f"{x}{k}" in never else self._one(f"{x}{k}") for x in ("cl", "i", "m")]
            elif isinstance(r, _Count):
                keep = [f"NOT d{r.k}"] if r.k is not None else []
                if r.predicate is not None:
                    keep.append(f"NOT d{self.schema.names.index(r.predicate.column)}")
                usable = " AND ".join(keep) if keep else "TRUE"
                m = usable if r.predicate is None else f"{usable} AND {self._predicate_sql(r.predicate, p)}"
                aggs += [self._one(m), self._one(usable)]
            elif isinstance(r, _Sum):
                aggs += self._sum_sql(r.k, p, layers[:3])
            elif isinstance(r, _Digest):
                aggs += self._digest_sql(layers)
            slots.append((r, start, len(aggs) - start))
        return aggs, slots

    def _slot_results(self, slots: Sequence[tuple[_Request, int, int]], row: Sequence[Any]
                      ) -> dict[_Request, Any]:
        """The value of each scalar request from its slot of the aggregate row."""
        res: dict[_Request, Any] = {}
        rows_here = int(row[0] or 0)
        for r, start, width in slots:
            vals = [0 if v is None else int(v) for v in row[start:start + width]]
            if isinstance(r, _Stats):
                vals[0] = self._usable(r.k, rows_here, vals[2], vals[3])
            if isinstance(r, _Digest):
                res[r] = (rows_here, vals[0] % (1 << 64), vals[1] % (1 << 64))
            else:
                res[r] = vals[0] if isinstance(r, _Rows) else tuple(vals)
        return res

    def _bin_plan(self, wanted: Sequence[_Bins], *, pair_ranks: bool) -> _BinPlan:
        """Which bin keys count the grouping requests ``wanted`` (see :class:`_BinPlan`)."""
        # bins of small integer-valued columns: counted per value, binned in Python
        by_value = {g: _Bins(g.k) for g in wanted
                    if (g.edges is not None or g.grid is not None) and self._value_counted(g.k)}
        groups = list(dict.fromkeys(by_value.get(g, g) for g in wanted))
        # a quantile's candidate counts and the bins of [*grid, top] (rank_counts): one key
        ranks = self._rank_pairs(groups) if pair_ranks else {}
        groups = [g for g in groups if g not in ranks.values()]
        return _BinPlan(tuple(wanted), by_value, tuple(groups), ranks)

    def _bin_keys(self, plan: _BinPlan, p: Params, layers: list[_Layer]) -> list[str]:
        """The key expression of each counted request (``gk{j}``); its quotient and
        index columns go to ``layers[3]`` and ``layers[4]`` (:meth:`_bin_key_sql`)."""
        keys: list[str] = []
        for j, g in enumerate(plan.groups):
            guess, idx, key = self._bin_key_sql(g, p, j, rank=g in plan.ranks)
            keys.append(key)
            if guess is not None:
                layers[3].add(f"gg{j}", guess)
            if idx is not None:
                layers[4].add(f"gi{j}", idx)
        return keys

    def _bins_from_values(self, plan: _BinPlan, res: dict[_Request, Any]) -> None:
        """The requests counted per value (:meth:`_value_counted`), binned in Python."""
        for g in plan.wanted:
            if g in plan.by_value:
                res[g] = self._bins_of_values(g, res[plan.by_value[g]])

    def _one_aggregate(self, ctes: str, p: Params, aggs: list[str], layers: list[_Layer],
                       keys: list[str], plan: _BinPlan
                       ) -> tuple[tuple[Any, ...], list[dict[int, int]]]:
        """(scalar row, counts per bin key) from ONE ungrouped aggregate (DuckDB).

        A key with a few values is counted by one ``count_if`` per value in the same
        aggregate (a comparison per row); a larger one by a ``histogram`` (DuckDB counts
        it in a pass of its own, or in this one: :meth:`Dialect.histogram`).
        """
        d = self.dialect
        layers[5].cols += [(f"gk{j}", e) for j, e in enumerate(keys)]
        src = _chain("kept", layers)
        domains = [(-2, 2 * len(g.edges or ()) - 3) if g in plan.ranks else self._bin_domain(g)
                   for g in plan.groups]
        small = [dm[1] - dm[0] < SMALL_DOMAIN for dm in domains]
        one_pass = [self._one_pass_bins and dm[1] - dm[0] < 4096 for dm in domains]
        hist_cols: list[str] = []
        at: list[int] = []
        for j, (lo, hi) in enumerate(domains):
            at.append(len(aggs) + len(hist_cols))
            if small[j]:
                hist_cols += [d.count_if(f"gk{j} = {v}") for v in range(lo, hi + 1)]
            else:
                hist_cols.append(d.histogram(f"gk{j}", domains[j] if one_pass[j] else None) or "")
        row = self._run_sql(f"{ctes} SELECT {', '.join(aggs + hist_cols)} FROM {src} z", p)[0]
        grouped: list[dict[int, int]] = []
        for j, (lo, hi) in enumerate(domains):
            if small[j]:
                counts = {v: int(c) for v, c in zip(range(lo, hi + 1), row[at[j]:at[j] + hi - lo + 1],
                                                    strict=True) if c}
            else:
                counts = {int(k_): int(v_) for k_, v_ in (row[at[j]] or {}).items() if v_}
                if any(not lo <= k_ <= hi for k_ in counts):  # cannot happen: keys are clamped
                    raise QueryError("internal error: a bin key fell outside its range.")
            grouped.append(counts)
        return tuple(row[:len(aggs)]), grouped

    def _grouping_sets(self, ctes: str, p: Params, aggs: list[str], layers: list[_Layer],
                       keys: list[str]) -> tuple[tuple[Any, ...], list[dict[int, int]]]:
        """(scalar row, counts per bin key) where the engine has no ``histogram`` (Spark):
        the scalars once over all rows, ``UNION ALL`` the bin counts per grouping set."""
        nk = len(keys)
        scalar_src = _chain("kept", layers[:3] + layers[6:])
        inner = _chain("kept", layers[3:5])
        if keys:
            inner = f"(SELECT *, {', '.join(f'{e} AS gk{j}' for j, e in enumerate(keys))} FROM {inner} y)"
            key_cols = [f"gk{j}" for j in range(nk)]
            # scalars once over all rows; bin counts per grouping set (count only)
            nulls = ", ".join(f"CAST(NULL AS BIGINT) AS {c}" for c in key_cols)
            sets = ", ".join(f"({c})" for c in key_cols)
            zeros = ", ".join(f"CAST(NULL AS DECIMAL(38, 0)) AS s{j}" for j in range(1, len(aggs)))
            sql = (
                f"{ctes} SELECT {nulls}, "
                f"{', '.join(f'CAST({a} AS DECIMAL(38, 0)) AS s{j}' for j, a in enumerate(aggs))} "
                f"FROM {scalar_src} sc UNION ALL "
                f"SELECT {', '.join(key_cols)}, CAST(count(*) AS DECIMAL(38, 0)) AS s0"
                f"{', ' + zeros if zeros else ''} FROM {inner} z GROUP BY GROUPING SETS ({sets})"
            )
        else:
            sql = f"{ctes} SELECT {', '.join(aggs)} FROM {scalar_src} sc"
        grouped: list[dict[int, int]] = [{} for _ in keys]
        scalar_row: tuple[Any, ...] | None = None
        for row in self._run_sql(sql, p):
            which = [j for j in range(nk) if row[j] is not None]
            if not which:
                scalar_row = tuple(row[nk:])
            else:
                grouped[which[0]][int(row[which[0]])] = int(row[nk])
        return (scalar_row if scalar_row is not None else tuple([0] * len(aggs))), grouped

    def _usable(self, k: int, rows: int, invalid: int, missing: int) -> int:
        """Rows that enter queries on column k (``u``), from the row, invalid and missing
        counts: what the missing-value rule drops, and undeclared categories without an
        "other" bin, are the only rows left out."""
        col = self.schema.columns[k]
        replace = col.missing.action is MissingAction.REPLACE
        if col.kind in (ColumnKind.IDENTIFIER, ColumnKind.KEY):
            return rows - missing
        if col.kind is ColumnKind.CATEGORICAL:
            return rows - (0 if replace else missing) - (0 if col.other_bin else invalid)
        return rows if replace else rows - missing - invalid

    def _never_flags(self) -> set[str]:
        """Flag columns that are FALSE by construction (counted as 0, not per row)."""
        out: set[str] = set()
        for k, col in enumerate(self.schema.columns):
            if col.kind is not ColumnKind.NUMERIC:
                out.add(f"cl{k}")
            if col.kind in (ColumnKind.IDENTIFIER, ColumnKind.KEY) or (
                col.kind is ColumnKind.NUMERIC and self._types[col.name] in ("int", "float")
            ):
                out.add(f"i{k}")
        return out

    def _digest_words(self) -> list[tuple[str, bool]]:
        """(column, is a DOUBLE) of the digest's words: the declared columns by sorted name."""
        out: list[tuple[str, bool]] = []
        for name in sorted(self.schema.names):
            k = self.schema.names.index(name)
            if self.schema.columns[k].kind is ColumnKind.NUMERIC:
                out += [(f"wv{k}", True), (f"wt{k}", False)]
            else:
                out.append((f"w{k}", False))
        return out

    def _native_hash(self) -> bool:
        """Whether the engine's ``hash()`` of the words is the digest's row hash.

        Checked once per backend on fixed words (negative integers, −0, ±inf, a
        subnormal, several words) against :func:`planner.data.backends.digest.row_hashes`: a
        release of the engine that hashes differently falls back to the arithmetic.
        """
        if self._hash_native is None:
            d = self.dialect
            ok = False
            if d.native_hash:
                rows = [(2.5, -3, 7), (-0.0, (1 << 63) - 1, -(1 << 63)), (float("inf"), 0, 1),
                        (5e-324, -1, 12345678901234567)]
                p = Params(d)
                exprs = []
                for x, b, c in rows:
                    hx = d.hash_words([f"CAST({p(x)} AS DOUBLE)", f"CAST({p(b)} AS BIGINT)",
                                       f"CAST({p(c)} AS BIGINT)"])
                    exprs += [hx, d.hash_words([d.xor(hx, f"CAST({dg.K_LANE2} AS UBIGINT)")])]
                try:
                    got = [int(v) for v in self._run_sql(f"SELECT {', '.join(exprs)}", p)[0]]
                except DataError:
                    got = []
                words = [dg.double_bits(np.asarray([r[0] for r in rows]))] + [
                    np.asarray([r[i] for r in rows], dtype=np.int64).view(np.uint64) for i in (1, 2)]
                h = dg.row_hashes(words)
                want = [int(v) for pair in zip(h, dg.murmur(h ^ np.uint64(dg.K_LANE2)), strict=True)
                        for v in pair]
                ok = got == want
            self._hash_native = ok
        return self._hash_native

    def _digest_sql(self, layers: list[_Layer]) -> list[str]:
        """The two lane sums of the content digest (:mod:`planner.data.backends.digest`) over the
        words of the cells; adds the row-hash steps as projection layers from ``layers[6]``."""
        d = self.dialect
        words = self._digest_words()
        while len(layers) < 7:
            layers.append(_Layer())
        if self._native_hash():
            layers[6].add("dh0", d.hash_words([w for w, _ in words]))
            layers.append(_Layer([("dh1", d.hash_words([d.xor("dh0", f"CAST({dg.K_LANE2} AS UBIGINT)")]))]))
            return ["sum(dh0)", "sum(dh1)"]
        # the same arithmetic spelled out, on unsigned 64-bit values
        def layer(cols: list[tuple[str, str]]) -> None:
            layers.append(_Layer(cols))

        names = []
        cols = []
        for i, (w, is_double) in enumerate(words):
            src = d.word_bits(f"CASE WHEN {w} = 0 THEN CAST(0 AS DOUBLE) ELSE {w} END") if is_double else w
            cols.append((f"du{i}", d.u_word(src)))
            names.append(f"du{i}")
        layers[6].cols += cols

        def murmur(ins: list[str], tag: str) -> list[str]:
            # three layers: a deep chain of nested selects is more than Spark's analyzer
            # resolves (its expressions inline column names only)
            a = [f"{tag}a{i}" for i in range(len(ins))]
            b = [f"{tag}b{i}" for i in range(len(ins))]
            c = [f"{tag}c{i}" for i in range(len(ins))]
            layer([(o, d.u_mul(d.u_xorshift(x, 32), dg.MURMUR)) for o, x in zip(a, ins, strict=True)])
            layer([(o, d.u_mul(d.u_xorshift(x, 32), dg.MURMUR)) for o, x in zip(b, a, strict=True)])
            layer([(o, d.u_xorshift(x, 32)) for o, x in zip(c, b, strict=True)])
            return c

        m = murmur(names, "dm")
        h = m[0]
        for i in range(1, len(m)):
            layer([(f"dc{i}", d.u_xor(d.u_mul(d.u_xorshift(h, 32), dg.MURMUR), m[i]))])
            h = f"dc{i}"
        layer([("dg0", d.u_xor(h, d.u_word(self._word(dg.K_LANE2))))])
        g = murmur(["dg0"], "dn")[0]
        return [f"sum({h})", f"sum({g})"]

    def _int_valued(self, k: int) -> bool:
        """Whether every usable clipped value of numeric column k is an integer.

        True when the engine column has an integer type and the bounds (and the
        replacement value, if any) are integers: clipping and replacing keep integers.
        """
        col = self.schema.columns[k]
        if col.kind is not ColumnKind.NUMERIC or self._types[col.name] != "int":
            return False
        vals: list[float] = [float(b) for b in col.bounds]
        if col.missing.action is MissingAction.REPLACE:
            vals.append(float(col.missing.value))  # type: ignore[arg-type]
        return all(v.is_integer() for v in vals)

    def _value_counted(self, k: int) -> bool:
        """Whether bins of column k are counted per distinct value and binned in Python.

        For an integer-valued column with at most :data:`MAX_VALUE_GROUPS` possible values
        (``U − L + 1``), one ``GROUP BY`` value serves every histogram and quantile grid
        of the column, and :func:`numpy.searchsorted` bins the few values exactly as the
        pandas backend bins the rows.
        """
        if not self._int_valued(k):
            return False
        lo, hi = self.schema.columns[k].bounds
        return hi - lo + 1 <= MAX_VALUE_GROUPS

    def _sum_sql(self, k: int, p: Params, layers: list[_Layer]) -> list[str]:
        """The four exact-sum aggregates of column k (ih, il, f1, f2 of ``float_parts``).

        Adds the per-row parts to three projection layers over ``kept``. The integer part
        floor(|x|) < 2⁶² is summed whole (as ``il``; ``ih`` is 0): a BIGINT per row, summed
        exactly (:meth:`Dialect.exact_sum`), gives the same total ih·2⁵³ + il. The
        fractional parts are the constant 0 when the column is integer-valued
        (:meth:`_int_valued`), and the sign is left out when L ≥ 0: every clipped value
        lies in [L, U], so neither changes a result.
        """
        d = self.dialect
        lo, _hi = self.schema.columns[k].bounds
        signed = lo < 0
        two = "CAST(9007199254740992 AS DOUBLE)"
        layers[0].add(f"sa{k}", f"CASE WHEN u{k} THEN abs(v{k}) END")  # NULL: not summed
        if signed:
            layers[0].add(f"sg{k}", f"CASE WHEN v{k} < 0 THEN -1 ELSE 1 END")
        layers[1].add(f"si{k}", d.floor(f"sa{k}"))
        parts: list[str | None] = [None, f"si{k}", None, None]
        if not self._int_valued(k):
            layers[1].add(f"sf{k}", f"(sa{k} - {d.floor(f'sa{k}')}) * {two}")
            layers[2].add(f"s1{k}", d.floor(f"sf{k}"))
            parts[2] = f"s1{k}"
            parts[3] = d.floor(f"(sf{k} - s1{k}) * {two}")
        return [
            "0" if e is None else d.exact_sum(f"sg{k} * {e}" if signed else e) for e in parts
        ]

    def _predicate_sql(self, pr: Predicate, p: Params) -> str:
        k = self.schema.names.index(pr.column)
        col = self.schema.columns[k]
        op = pr.op
        if col.kind is ColumnKind.NUMERIC:
            consts = [float(c) for c in pr.values]
            if op is PredicateOp.IN:
                cond = f"v{k} IN ({p.many(consts)})"
            else:
                cond = f"v{k} {op.value if op is not PredicateOp.EQ else '='} {p(consts[0])}"
                if op is PredicateOp.NE:
                    cond = f"v{k} <> {p(consts[0])}"
        elif col.kind in (ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN):
            wanted = pr.codes(col)
            if op is PredicateOp.EQ:
                cond = f"v{k} = {p(wanted[0])}"
            elif op is PredicateOp.NE:
                cond = f"v{k} <> {p(wanted[0])}"
            elif op is PredicateOp.IN:
                cond = f"v{k} IN ({p.many(wanted)})"
            else:
                raise QueryError(f"operator {op.value!r} does not apply to column {col.name!r}.")
        else:
            raise QueryError(f"a predicate on identifier column {col.name!r} is not allowed.")
        return f"(u{k} AND {cond})"

    def _bins_of_values(self, g: _Bins, values: dict[int, int]) -> dict[int, int]:
        """Bin counts of request g from the counts per usable value (see :meth:`_value_counted`).

        The same :func:`numpy.searchsorted` rules as the pandas backend: histogram bin i
        is [e_i, e_{i+1}) with the last bin closed, −2 outside the edges; a quantile
        candidate is the smallest t ≥ x.
        """
        lo = self.schema.columns[g.k].bounds[0]
        pairs = [(v, c) for v, c in values.items() if v >= lo]  # lo − 1: not usable
        x = np.asarray([v for v, _ in pairs], dtype=np.float64)
        n = np.asarray([c for _, c in pairs], dtype=np.int64)
        if g.edges is not None:
            e = np.asarray(g.edges, dtype=np.float64)
            idx = np.searchsorted(e, x, side="right") - 1
            idx[x == e[-1]] = e.size - 2  # the last bin is closed
            idx[(idx < 0) | (idx >= e.size - 1)] = -2
        else:
            idx = np.searchsorted(np.asarray(g.grid, dtype=np.float64), x, side="left")
        out: dict[int, int] = {}
        for i, c in zip(idx.tolist(), n.tolist(), strict=True):
            out[i] = out.get(i, 0) + c
        return out

    def _bin_key_sql(self, g: _Bins, p: Params, j: int, *, rank: bool = False
                     ) -> tuple[str | None, str | None, str]:
        """(quotient, index, key) of a grouping request: the per-row bin key (−1: not
        usable; −2: outside the edges). With ``rank`` (a histogram over ``[*grid, top]``
        paired with candidate counts on ``grid``, :meth:`_rank_pairs`) the key is their
        joint key: 2·b + t with b the histogram's bin (e_b ≤ x < e_{b+1}, the last closed)
        and t = 0 where x = e_b exactly, 1 elsewhere; the smallest candidate ≥ x is then
        b + t (:meth:`_split_ranks`).

        Evenly spaced edges: the key is read from the quotient q = (x − e₀)/w (column
        ``gg{j}``) and the guess floor(q) (ceil for a quantile grid) clamped to the bins
        (column ``gi{j}``, computed once per row: the correcting branch reads it up to
        seven times, 0.1 s per 10⁷ rows of integer data on a 0.072 grid); where q is far
        from an integer the guess is the bin and x lies on no edge; the few rows near an
        edge (ties included) take a branch that corrects the guess against the actual
        edge values (``CASE`` evaluates it on those rows only; :meth:`_far`). Other
        edges: an exact bin index (column ``gi{j}``) from one comparison per edge. Each
        of the three is a projection layer of its own. The range tests (−2, the closed
        last bin) are left out where every clipped value lies in [e₀, e_last) (the
        declared bounds).

        Edge values are read from the edge array parameter, or, when every edge but the
        last equals ``i·step + e₀`` exactly in IEEE arithmetic (the grids of
        ``numpy.linspace`` and of a declared step), computed by that same formula in
        SQL: cheaper than an array lookup per row, and bit-identical.
        """
        k = g.k
        v = f"v{k}"
        col = self.schema.columns[k]
        if g.edges is None and g.grid is None:
            if col.kind is ColumnKind.NUMERIC:  # per value (_value_counted)
                below = p(int(col.bounds[0]) - 1)
                return None, None, f"CASE WHEN u{k} THEN CAST({v} AS BIGINT) ELSE {below} END"
            return None, None, f"CASE WHEN u{k} THEN {v} ELSE -1 END"
        if g.edges is not None:
            return self._edges_key_sql(g.edges, k, p, j, rank=rank)
        return self._grid_key_sql(g.grid or (), k, p, j)

    def _edges_key_sql(self, edges: tuple[float, ...], k: int, p: Params, j: int, *, rank: bool
                       ) -> tuple[str | None, str | None, str]:
        """:meth:`_bin_key_sql` of a histogram over ``edges`` of numeric column k."""
        d = self.dialect
        v = f"v{k}"
        gg, gi = f"gg{j}", f"gi{j}"
        e = np.asarray(edges, dtype=np.float64)
        nb = e.size - 1
        lo, hi = self.schema.columns[k].bounds
        ranges = ""
        # a usable v is clipped to [lo, hi] (a replacement value is clipped too);
        # parameters are bound only where the SQL uses them
        if not float(e[0]) <= lo <= hi < float(e[-1]):
            first, last = p(float(e[0])), p(float(e[-1]))
            ranges = (f"WHEN {v} = {last} THEN {2 * nb - 1 if rank else nb - 1} "
                      f"WHEN {v} < {first} OR {v} > {last} THEN -2 ")
        edge_fn: list[Callable[[str], str]] = []

        def edge(i: str) -> str:
            if not edge_fn:
                edge_fn.append(self._edge_fn(e, p))
            return edge_fn[0](i)

        def keyed(i: str) -> str:  # the key of bin index i (an expression)
            if not rank:
                return i
            return f"2 * {i} + CASE WHEN {v} = {edge(i)} THEN 0 ELSE 1 END"

        if _uniform_guess_ok(e, "right"):
            w, e0 = p(float(e[1] - e[0])), p(float(e[0]))
            guess = gi  # computed once per row (column gi{j}): the branches below read it often
            exact = (
                f"({guess} - CASE WHEN {v} < {edge(guess)} THEN 1 ELSE 0 END "
                f"+ CASE WHEN {v} >= {edge(f'{guess} + 1')} THEN 1 ELSE 0 END)"
            )
            far = self._far(gg, e)
            # far from an edge: x is on none (t = 1 in the joint key)
            fast = "" if far is None else f"WHEN {far} THEN {f'2 * {guess} + 1' if rank else guess} "
            key = f"CASE WHEN NOT u{k} THEN -1 {ranges}{fast}ELSE {keyed(exact)} END"
            return f"({v} - {e0}) / {w}", f"CAST(least(greatest({d.floor(gg)}, 0), {nb - 1}) AS BIGINT)", key
        if e.size > 2000:
            raise QueryError("more than 2000 irregular bin edges; use evenly spaced bins.")
        whens = " ".join(f"WHEN {v} < {p(float(x))} THEN {i - 1}" for i, x in enumerate(e))
        return None, f"CASE {whens} ELSE {nb} END", f"CASE WHEN NOT u{k} THEN -1 {ranges}ELSE {keyed(gi)} END"

    def _grid_key_sql(self, candidates: tuple[float, ...], k: int, p: Params, j: int
                      ) -> tuple[str | None, str | None, str]:
        """:meth:`_bin_key_sql` of quantile ``candidates`` on numeric column k: the index
        of the smallest candidate ≥ x."""
        d = self.dialect
        v = f"v{k}"
        gg, gi = f"gg{j}", f"gi{j}"
        grid = np.asarray(candidates, dtype=np.float64)
        n = grid.size
        if n == 1:
            return None, None, f"CASE WHEN NOT u{k} THEN -1 ELSE 0 END"
        if _uniform_guess_ok(grid, "left"):
            w, t0 = p(float(grid[1] - grid[0])), p(float(grid[0]))
            guess = gi  # computed once per row (column gi{j})
            cand = self._edge_fn(grid, p)
            exact = (
                f"{guess} - CASE WHEN {guess} = 0 THEN 0 WHEN {cand(f'{guess} - 1')} >= {v} THEN 1 "
                f"ELSE 0 END "
                f"+ CASE WHEN {cand(guess)} < {v} THEN 1 ELSE 0 END"
            )
            far = self._far(gg, grid)
            fast = "" if far is None else f"WHEN {far} THEN {guess} "
            return (f"({v} - {t0}) / {w}", f"CAST(least(greatest(-{d.floor(f'-{gg}')}, 0), {n - 1}) AS BIGINT)",
                    f"CASE WHEN NOT u{k} THEN -1 {fast}ELSE {exact} END")
        if n > 2000:
            raise QueryError(
                "more than 2000 irregular quantile candidates; use an evenly spaced grid."
            )
        whens = " ".join(f"WHEN {v} <= {p(float(x))} THEN {i}" for i, x in enumerate(grid))
        return None, f"CASE {whens} ELSE {n} END", f"CASE WHEN NOT u{k} THEN -1 ELSE {gi} END"

    def _rank_pairs(self, groups: Sequence[_Bins]) -> dict[_Bins, _Bins]:
        """``{bins: candidates}``: histogram requests over edges ``[*grid, top]`` whose
        column also has candidate counts on ``grid`` (:func:`planner.planning.statistics.quantile.rank_counts`
        asks for both), where the grid covers the column's bounds. Each pair is counted
        with one key (``_bin_key_sql(rank=True)``): one histogram, not two (DuckDB reads the
        source again for every ``histogram`` of a large domain)."""
        have = set(groups)
        out: dict[_Bins, _Bins] = {}
        for g in groups:
            if g.edges is None or len(g.edges) < 3:
                continue
            c = _Bins(g.k, grid=g.edges[:-1])
            lo, hi = self.schema.columns[g.k].bounds
            if c in have and c.grid is not None and c.grid[0] <= lo and c.grid[-1] >= hi:
                out[g] = c
        return out

    @staticmethod
    def _split_ranks(counts: dict[int, int]) -> tuple[dict[int, int], dict[int, int]]:
        """(histogram counts, candidate counts) from the counts of the joint key of :meth:`_bin_key_sql`."""
        bins: dict[int, int] = {}
        cands: dict[int, int] = {}
        for key, c in counts.items():
            if key < 0:
                if key != -1:  # the grid covers the bounds: a clipped value is inside
                    raise QueryError("internal error: a clipped value fell outside the candidate grid.")
                bins[-1] = bins.get(-1, 0) + c
                cands[-1] = cands.get(-1, 0) + c
                continue
            b, t = divmod(key, 2)
            bins[b] = bins.get(b, 0) + c
            cands[b + t] = cands.get(b + t, 0) + c
        return bins, cands

    def _far(self, q: str, e: np.ndarray) -> str | None:
        """The test that the quotient q = (x − e₀)/w is far from an integer, or None when
        the edges are too far from a uniform grid for the test to prove anything.

        Far means more than δ away, with δ twice the bound on how far q can be from the
        exact quotient (two roundings: |q|·2⁻⁵², |q| ≤ n) plus how far any edge is from
        e₀ + i·w (computed exactly, as fractions): then x and every edge compare as the
        exact quotient and i do, so x is on no edge and the guess (floor, or ceil for a
        quantile grid) is the index ``searchsorted`` gives. Rows near an edge (ties
        included) take the corrected branch; ``CASE`` evaluates it on those rows only.
        """
        n = e.size
        w = Fraction(float(e[1])) - Fraction(float(e[0]))
        dev = max(abs(Fraction(float(t)) - (Fraction(float(e[0])) + i * w)) for i, t in enumerate(e)) / w
        delta = 2 * (n * 2.0**-52 + float(dev)) + 2.0**-40
        if not delta < 1e-6:  # edges too far from a uniform grid: always correct
            return None
        return f"abs({q} - round({q})) > {delta!r}"

    def _bin_domain(self, g: _Bins) -> tuple[int, int]:
        """The range of a grouping request's key (see :meth:`_bin_key_sql`)."""
        col = self.schema.columns[g.k]
        if g.edges is None and g.grid is None:
            if col.kind is ColumnKind.NUMERIC:
                lo, hi = col.bounds
                return int(lo) - 1, int(hi)
            return -1, len(col.labels) if col.kind is ColumnKind.CATEGORICAL else 1
        if g.edges is not None:
            return -2, len(g.edges) - 1
        return -1, len(g.grid or ())

    def _edge_fn(self, e: np.ndarray, p: Params) -> Callable[[str], str]:
        """SQL of edge ``e[i]`` for an index expression i in [0, len(e) − 1]."""
        d = self.dialect
        step = _arithmetic_step(e)
        if step is None:
            arr = p([float(x) for x in e])
            return lambda i: d.at(arr, i)
        e0, st, last, n1 = p(float(e[0])), p(step), p(float(e[-1])), e.size - 1
        return lambda i: (
            f"(CASE WHEN {i} >= {n1} THEN {last} ELSE CAST({i} AS DOUBLE) * {st} + {e0} END)"
        )

    # ------------------------------------------------------------------ the request compiler
    def _k(self, column: str) -> int:
        return self.schema.names.index(column)

    def _needs(self, r: Request[Any]) -> list[_Request]:
        """The internal requests a request is computed from (each computed once, in the
        statement of every request asked together)."""
        if isinstance(r, rq.Count):
            return [_Rows(), _Count(None if r.column is None else self._k(r.column), r.where)]
        if isinstance(r, rq.ClippedSum):
            return [_Rows(), _Sum(self._k(r.column)), _Stats(self._k(r.column))]
        if isinstance(r, rq.Bins):
            return [_Rows(), _Bins(self._k(r.column), edges=r.edges), _Stats(self._k(r.column))]
        if isinstance(r, rq.Candidates):
            return [_Rows(), _Bins(self._k(r.column), grid=r.grid), _Stats(self._k(r.column))]
        if isinstance(r, rq.Booleans):
            return [_Rows(), _Bins(self._k(r.column)), _Stats(self._k(r.column))]
        if isinstance(r, rq.Keys):
            return [_Keys(self._k(r.column))]
        if isinstance(r, rq.Stats):
            return [_Rows(), _Stats(self._k(r.column))]
        if isinstance(r, rq.Grouped):
            by = tuple(self._k(n) for n in r.by)
            return [_in_group(by, codes, inner) for codes in r.codes(self.schema)
                    for sub in r.requests for inner in self._needs(sub)]
        raise rq.unknown(r)

    def _finish(self, r: Request[Any], get: Callable[[_Request], Any]) -> Result:
        """The result of a request from the values of its internal requests (``get``)."""
        if isinstance(r, rq.Count):
            value, usable = get(_Count(None if r.column is None else self._k(r.column), r.where))
            return CountAggregate(int(value), int(get(_Rows()) - usable))
        if isinstance(r, rq.ClippedSum):
            ih, il, f1, f2 = get(_Sum(self._k(r.column)))
            st = self._stats(self._k(r.column), get)
            return SumAggregate(sum_from_parts(ih, il, f1, f2), st.usable, st.clipped, st.dropped)
        if isinstance(r, rq.Bins):
            k = self._k(r.column)
            col = self.schema.columns[k]
            counts, st = get(_Bins(k, edges=r.edges)), self._stats(k, get)
            labels = r.labels(col)
            if r.edges is not None:
                return BinCounts(labels, tuple(counts.get(i, 0) for i in range(len(labels))), r.edges,
                                 counts.get(-2, 0), st.dropped)
            unbinned = st.invalid if col.kind is ColumnKind.CATEGORICAL and not col.other_bin else 0
            return BinCounts(labels, tuple(counts.get(i, 0) for i in range(len(labels))), None, unbinned,
                             st.dropped)
        if isinstance(r, rq.Candidates):
            k = self._k(r.column)
            counts = get(_Bins(k, grid=r.grid))
            return QuantileAggregate(r.grid, tuple(counts.get(i, 0) for i in range(len(r.grid))),
                                     self._stats(k, get).dropped)
        if isinstance(r, rq.Booleans):
            k = self._k(r.column)
            counts = get(_Bins(k))
            return BooleanCounts(counts.get(1, 0), counts.get(0, 0), self._stats(k, get).dropped)
        if isinstance(r, rq.Keys):
            keys: KeyCounts = get(_Keys(self._k(r.column)))
            return keys
        if isinstance(r, rq.Stats):
            return self._stats(self._k(r.column), get)
        if isinstance(r, rq.Grouped):
            by = tuple(self._k(n) for n in r.by)

            def in_group(codes: tuple[int, ...]) -> Callable[[_Request], Any]:
                return lambda inner: get(_in_group(by, codes, inner))

            return GroupResults(r.labels(self.schema), tuple(
                tuple(self._finish(sub, in_group(codes)) for sub in r.requests) for codes in r.codes(self.schema)))
        raise rq.unknown(r)

    def _stats(self, k: int, get: Callable[[_Request], Any]) -> ColumnStats:
        """Column k's stats from the row count and its flag counts."""
        col = self.schema.columns[k]
        rows, (usable, clipped, invalid, missing) = get(_Rows()), get(_Stats(k))
        replace = col.missing.action is MissingAction.REPLACE
        if col.kind is ColumnKind.CATEGORICAL:
            return ColumnStats(rows, usable, 0, invalid, missing,
                               missing if replace else 0, 0 if replace else missing)
        if col.kind in (ColumnKind.IDENTIFIER, ColumnKind.KEY):
            return ColumnStats(rows, rows - missing, 0, 0, missing, 0, missing)
        bad = invalid + missing
        return ColumnStats(rows, usable, clipped, invalid, missing,
                           bad if replace else 0, 0 if replace else bad)

    # ------------------------------------------------------------------ Backend API
    counts_keys: ClassVar[bool] = True

    def evaluate(self, requests: Sequence[Request[Any]]) -> tuple[Result, ...]:
        """Every request compiled into one statement over one scan (those not yet computed:
        results are kept), then each result read from it."""
        self.prefetch(requests)
        return tuple(self._finish(r, self._cache.__getitem__) for r in requests)

    def prefetch(self, requests: Sequence[Request[Any]] = (), *, report: bool = False,
                 digest: bool = False) -> None:
        """Compute every request in one statement (one pass); with ``report`` the column
        report's counts and with ``digest`` the content digest too, in the same scan."""
        for r in requests:
            r.validate(self.schema)
        todo = [n for r in requests for n in self._needs(r)]
        if report:
            todo += [_Rows(), *(_Stats(k) for k in range(len(self.schema.columns)))]
        if digest:
            todo.append(_Digest())
        self._compute(todo)

    def _compute(self, reqs: Iterable[_Request]) -> None:
        todo = [r for r in dict.fromkeys(reqs) if r not in self._cache]
        if todo:
            self._run(todo)

    @property
    def rows(self) -> int:
        self._compute([_Rows()])
        return int(self._cache[_Rows()])

    @property
    def rows_truncated(self) -> int:
        rows = self.rows  # the first statement also learns the rows before bounding
        return 0 if self._total < 0 else self._total - rows

    def column_report(self) -> dict[str, Any]:
        self.prefetch(report=True)
        return super().column_report()

    def content_digest(self) -> dg.ContentDigest:
        """The content digest (:mod:`planner.data.backends.digest`) of every row, computed in the
        engine; in the same scan as the aggregates when requested with :meth:`prefetch`."""
        self._compute([_Digest()])
        rows, s1, s2 = self._cache[_Digest()]
        return dg.finish(self.schema.names, rows, s1, s2)

    def _key_counts(self, k: int) -> KeyCounts:
        """Rows per key label over the bounded rows: one ``GROUP BY`` of the key column's
        value (its label, :meth:`_identifier_cells`); the NULL group is the missing keys.
        A statement of its own, after the first (which decides whether to bound)."""
        p = Params(self.dialect)
        ctes = self._kept_with(p, [k])
        rows = self._run_sql(f"{ctes} SELECT CASE WHEN u{k} THEN v{k} END AS key_, count(*) FROM kept GROUP BY 1", p)
        counts: dict[str, int] = {}
        dropped = 0
        for key, n in rows:
            if key is None:
                dropped += int(n)
                continue
            label = canonical_value(key) if isinstance(key, float) else str(key)
            if label:
                counts[label] = counts.get(label, 0) + int(n)
        keys = tuple(sorted(counts))
        return KeyCounts(keys, tuple(counts[x] for x in keys), dropped)

    # ------------------------------------------------------------------ groups
    def _run_groups(self, reqs: Sequence[_InGroup]) -> None:
        """Compute in-group requests: every group of every grouping in ONE statement.

        Groups that hold no row get the values of an empty table (zero counts and sums).
        """
        bys = list(dict.fromkeys(r.by for r in reqs))
        inners = list(dict.fromkeys([_Rows(), *(r.req for r in reqs)]))
        binned = {by: {r.req for r in reqs if r.by == by and isinstance(r.req, _Bins)} for by in bys}
        found = self._group_statement(bys, inners, binned)
        for by in bys:
            domains = [range(len(self.schema.columns[key].labels)) for key in by]
            # only what this grouping asked for: its statement computed no other bins
            mine = list(dict.fromkeys([_Rows(), *(r.req for r in reqs if r.by == by)]))
            for codes in itertools.product(*domains):
                got = found.get((by, codes), {})
                for inner in mine:
                    self._cache[_InGroup(by, codes, inner)] = got.get(inner, _default(inner))
        for r in reqs:  # codes outside the declared values (none from grouped statistics)
            self._cache.setdefault(r, _default(r.req))

    def _group_statement(self, bys: Sequence[tuple[int, ...]],
                         inners: Sequence[_Stats | _Rows | _Count | _Sum | _Bins],
                         binned: dict[tuple[int, ...], set[_Bins]],
                         ) -> dict[tuple[tuple[int, ...], tuple[int, ...]], dict[_Request, Any]]:
        """Per grouping ``by`` and group (key values ``codes``), the values of ``inners``.

        ONE statement: ``SELECT keys, aggregates FROM kept GROUP BY GROUPING SETS ((keys of
        a grouping), (keys of a grouping, bin key₁), …)`` for every grouping at once (bin
        keys only with the groupings that ask for them, ``binned``): the
        scalar requests (row, count, exact-sum and column-stat aggregates, the same SQL as
        :meth:`_statement`) per group, and the bin counts per group and bin. A key is −1
        on a row in no group of it (not usable; a condition that does not hold): those
        groups are read past. Rows are bounded first (``kept``), exactly as for the whole
        table, so a group holds the same rows as the pandas backend's view.
        """
        d = self.dialect
        p = Params(d)
        keys = list(dict.fromkeys(key for by in bys for key in by))
        used = self._used_columns([*keys, *inners])
        if self._bounding:
            ctes = self._kept_with(p, sorted(used))
        else:
            ctes = f"WITH kept AS {d.cte_hint}({self._cells_sql(p, sorted(used), pid=False)})"
        layers = [_Layer() for _ in range(6)]  # sums ×3, bin guess, bin index, keys
        aggs, slots = self._scalar_aggs([r for r in inners if not isinstance(r, _Bins)], p, layers)
        plan = self._bin_plan([r for r in inners if isinstance(r, _Bins)], pair_ranks=False)
        layers[5].cols += [(f"gk{j}", key_sql) for j, key_sql in enumerate(self._bin_keys(plan, p, layers))]
        gcols = [f"gw{i}" for i in range(len(keys))]
        for col_, key in zip(gcols, keys, strict=True):
            layers[5].add(col_, f"CASE WHEN u{key} THEN v{key} ELSE -1 END")
        kcols = [f"gk{j}" for j in range(len(plan.groups))]
        # a grouping set per distinct set of keys (two groupings may share one)
        at = {by: [keys.index(key) for key in by] for by in bys}
        patterns: dict[frozenset[int], list[tuple[int, ...]]] = {}
        for by in bys:
            patterns.setdefault(frozenset(at[by]), []).append(by)
        sets: list[str] = []
        for pat, pat_bys in patterns.items():
            cols = [gcols[i] for i in sorted(pat)]
            need = {plan.by_value.get(g, g) for by in pat_bys for g in binned.get(by, set())}
            sets += [", ".join(cols)] + [", ".join([*cols, c]) for c, g in zip(kcols, plan.groups, strict=True)
                                         if g in need]
        sql = (f"{ctes} SELECT {', '.join([*gcols, *kcols, *aggs])} FROM {_chain('kept', layers)} z "
               f"GROUP BY GROUPING SETS ({', '.join(f'({s_})' for s_ in sets)})")
        out = self._read_groups(self._run_sql(sql, p), len(gcols), plan, slots, at, patterns)
        for res in out.values():
            for g in plan.groups:
                res.setdefault(g, {})
            self._bins_from_values(plan, res)
        return out

    def _read_groups(self, rows: Sequence[tuple[Any, ...]], nw: int, plan: _BinPlan,
                     slots: Sequence[tuple[_Request, int, int]],
                     at: dict[tuple[int, ...], list[int]],
                     patterns: dict[frozenset[int], list[tuple[int, ...]]],
                     ) -> dict[tuple[tuple[int, ...], tuple[int, ...]], dict[_Request, Any]]:
        """The rows of :meth:`_group_statement` as values per (grouping, group codes): a
        row's grouping set is the set of its non-NULL group keys (``nw`` of them); a row
        with a bin key holds that bin's count, the others the scalar aggregates."""
        nk = len(plan.groups)
        out: dict[tuple[tuple[int, ...], tuple[int, ...]], dict[_Request, Any]] = {}
        for row in rows:
            pat = frozenset(i for i in range(nw) if row[i] is not None)
            which = [j for j in range(nk) if row[nw + j] is not None]
            for by in patterns.get(pat, []):
                codes = tuple(int(row[i]) for i in at[by])
                if any(c < 0 for c in codes):
                    continue  # rows in no group of this grouping
                res = out.setdefault((by, codes), {})
                if which:
                    counts = res.setdefault(plan.groups[which[0]], {})
                    counts[int(row[nw + which[0]])] = 0 if row[nw + nk] is None else int(row[nw + nk])
                    continue
                res.update(self._slot_results(slots, row[nw + nk:]))
        return out
