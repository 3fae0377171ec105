"""One query compiler for the SQL engines (DuckDB, Spark SQL): the pandas contract in SQL.

:class:`SqlBackend` implements :class:`~planner.backends.base.Backend` by compiling the
schema and the requested aggregates into SQL that runs where the data is (a file scanned
in place by DuckDB, executors of a Spark cluster); only small aggregate rows come back.
The two engines differ in a handful of spellings only (:class:`Dialect`).

How each rule of the contract (``planner/backends/base.py``) is compiled:

* **Cells** are read exactly like :func:`~planner.backends.pandas_backend.parse_numbers`
  and :func:`~planner.backends.pandas_backend.canonical_value`: CSV cells arrive as text
  (pyarrow's NA tokens become NULL, as in the pandas loader), are trimmed of Unicode
  white space by a regular expression, matched against the same number pattern, then
  ``TRY_CAST`` to DOUBLE. Typed cells (Parquet, DataFrames) skip the text steps: an
  integer or floating column is cast to DOUBLE and only NULL / NaN / ±inf are checked.
  Categorical, boolean and identifier cells are reduced to a *canonical key* (``'n'`` +
  normalised integer digits or number, ``'t'`` + text) by one SQL expression applied both
  to the cells (once per distinct cell) and to the declared categories (a registered
  lookup table joined in), so equality of keys is equality of canonical values.
* **Missing rule** as explicit ``CASE`` expressions; ``least``/``greatest`` are never
  applied to a cell (they turn NULL into a bound and NaN into the upper bound,
  engines.md §3), only to a bin index guessed from a usable (finite) value.
* **Contribution bounding**: whether anybody has more than c rows is decided first. When
  every person id is an integer (an integer column, or text that is exactly an integer's
  digits), DuckDB counts the distinct ids with a bitmap of [min, max]
  (:meth:`SqlBackend._check_units_by_bitmap`); otherwise a ``GROUP BY`` person counts
  rows. Only the rows of people over c are ordered by ``md5(salt_key | row key)``, the
  same text and md5 as :func:`~planner.backends.pandas_backend.bound_contributions`, so
  every engine keeps the same rows. DuckDB ranks a narrow relation (person, digest as
  an unsigned 128-bit integer: the hex order) with a window that spills, stores each
  person's c-th smallest digest, and keeps the rows at or below it in one filtering pass
  (:meth:`SqlBackend._thresholds`); ties on the cut (identical rows) are ranked apart.
  Spark ranks the rows themselves (:meth:`SqlBackend._kept_ranked`).
* **Sums** are exact: each clipped value is split into integers
  (:func:`~planner.backends.pandas_backend.float_parts`: the integer part, and two
  53-bit fractional parts unless the column is integer-valued), summed exactly (HUGEINT
  in DuckDB, DECIMAL(38, 0) in Spark) and rounded once in Python, which is the float
  pandas returns too.
* **Bins and quantile grids**: one ``GROUP BY GROUPING SETS`` over every requested bin
  key, next to one ungrouped aggregate for all scalars: one statement per plan. A bin
  index is guessed arithmetically and corrected against the actual edge values (computed
  as ``i·step + e₀`` when that reproduces every edge bit for bit, else read from an
  array parameter), so ties on edges follow ``searchsorted`` exactly. An integer-valued
  column with at most :data:`MAX_VALUE_GROUPS` possible values is instead counted per
  value and binned in Python by ``searchsorted`` itself.
* Every derived value is computed once in a projection layer of its own and then used
  by name: written out several times inside a ``CASE`` it would be evaluated several
  times per row.

Safety: every column name is quoted by :meth:`Dialect.ident` (quotes doubled), every
value (bounds, categories, edges, salt, replacement values, predicate constants) is a
bound parameter; file names never reach SQL text (sources are registered as views under
generated names).
"""

from __future__ import annotations

import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from planner.backends.base import (
    Aggregate,
    Backend,
    BinCounts,
    BooleanCounts,
    ColumnStats,
    CountAggregate,
    QuantileAggregate,
    SumAggregate,
)
from planner.backends.pandas_backend import (
    _BOOL_LOOKUP,
    _NUMBER_RE,
    MAX_EXACT_ABS,
    NUMERIC_NA_TOKENS,
    _canonical_categories,
    salt_key,
    sum_from_parts,
)
from planner.errors import DataError, QueryError
from planner.queries import Predicate, PredicateOp, Query, bin_labels
from planner.schema import Column, ColumnKind, MissingAction, Schema

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

NUMBER_PATTERN: Final[str] = f"^(?:{_NUMBER_RE})$"
INT_PATTERN: Final[str] = r"^[+-]?[0-9]+$"
_TWO53: Final[float] = 2.0**53
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

    def distinct_ints(self, expr: str, lo: str, hi: str) -> str | None:
        """The number of distinct values of a BIGINT expression known to lie in [lo, hi].

        DuckDB sets one bit per value (``bitstring_agg``): hi − lo + 1 bits per thread,
        against a hash table of every distinct value. ``None``: the engine has no such
        aggregate (the caller groups by value instead).
        """
        return f"bit_count(bitstring_agg({expr}, {lo}, {hi}))"


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


_Request = _Stats | _Rows | _Count | _Sum | _Bins


def _default(req: _Request) -> Any:
    if isinstance(req, _Bins):
        return {}
    if isinstance(req, _Rows):
        return 0
    if isinstance(req, _Count):
        return (0, 0)
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
    ``numpy.linspace`` grids and the grids of a declared step have this form.

    Examples
    --------
    >>> _arithmetic_step(np.linspace(18, 90, 1001)) == (90 - 18) / 1000
    True
    >>> _arithmetic_step(np.array([0.0, 1.0, 3.0, 4.0])) is None
    True
    """
    n = edges.size
    if n < 2:
        return None
    i = np.arange(n - 1, dtype=np.float64)
    for step in ((edges[-1] - edges[0]) / (n - 1), edges[1] - edges[0]):
        if step > 0 and np.isfinite(step) and np.array_equal(i * step + edges[0], edges[:-1]):
            return float(step)
    return None


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


class SqlBackend(Backend):
    """Exact aggregates computed by a SQL engine (see the module docstring).

    Subclasses provide the engine: :meth:`_execute` (SQL + named parameters → rows),
    :meth:`_register` (a small table under a generated name) and the source view with
    its column types. Aggregates are computed lazily and cached; :meth:`prefetch`
    computes everything a workload needs in one statement.
    """

    dialect: Dialect = Dialect()
    kind: str = "sql"

    def _setup(self, schema: Schema, source_view: str, column_types: dict[str, str],
               *, csv_text: bool, salt: str | None = None, require_rows: bool = False) -> None:
        absent = [n for n in schema.names if n not in column_types]
        if absent:
            raise DataError(
                f"column(s) {absent} are declared in the schema but not in the data; "
                f"fix the schema or the file (the file has {len(column_types)} columns)."
            )
        self.schema = schema
        self._src = source_view
        self._types = {n: type_class(column_types[n]) for n in schema.names}
        self._csv = csv_text
        self._salt = schema.salt if salt is None else salt
        self._cache: dict[_Request, Any] = {}
        self._collect: set[_Request] | None = None
        self._uid = uuid.uuid4().hex[:12]
        self._cat_views: dict[int, str] = {}
        for k, col in enumerate(schema.columns):
            if col.kind is ColumnKind.CATEGORICAL:
                _canonical_categories(col)  # duplicates → the same DataError as pandas
                name = f"planner_cat_{self._uid}_{k}"
                cats = list(col.categories or ())
                self._register(name, {"raw": cats, "code": list(range(len(cats)))})
                self._cat_views[k] = name
        for col in schema.columns:
            if col.kind is ColumnKind.NUMERIC:
                lo, hi = col.bounds
                if max(abs(lo), abs(hi)) >= MAX_EXACT_ABS:
                    raise QueryError(
                        f"column {col.name!r}: bounds beyond ±2^62 cannot be summed exactly "
                        f"by the {self.kind} backend; use the pandas backend or smaller bounds."
                    )
        self._require_rows = require_rows
        self._thr: tuple[str, bool] | None = None
        self._total, self._bounding = self._check_units()
        if require_rows and self._total == 0:
            raise DataError("the data has a header but no data rows; use a file with at least one row.")

    # ------------------------------------------------------------------ engine hooks
    @abstractmethod
    def _execute(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement; rows as tuples."""

    @abstractmethod
    def _register(self, name: str, columns: dict[str, list[Any]]) -> None:
        """Register a small table (public declared values only) under a generated name."""

    def _store(self, name: str, sql: str, params: Params) -> bool:
        """Compute a statement once and keep its rows in the engine under ``name``.

        The rows are private (bounding thresholds): they stay in the engine, never in Python.
        Returns False where the engine keeps nothing (this default): contribution bounding
        then ranks whole rows in one statement (:meth:`_kept_ranked`). DuckDB stores; on
        Spark the narrow plan ran the plan optimizer out of heap, so it ranks rows.
        """
        return False

    def _run_sql(self, sql: str, params: Params) -> list[tuple[Any, ...]]:
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
    def _col(self, column: str, *kinds: ColumnKind) -> tuple[int, Column]:
        col = self.schema.column(column)
        if kinds and col.kind not in kinds:
            raise QueryError(
                f"column {column!r} is {col.kind.value}; this aggregate needs "
                f"{' or '.join(k.value for k in kinds)}."
            )
        return self.schema.columns.index(col), col

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
            return f"CASE WHEN {raw} IN ({p.consts(CSV_NULL_TOKENS)}) THEN NULL ELSE {trimmed} END"
        return trimmed

    def _map_sql(self, k: int, p: Params) -> str:
        """Per DISTINCT raw value of a categorical / boolean column: its code.

        ``mr`` the raw value, ``mc`` the code: −1 missing, −2 undeclared / not a boolean,
        else the category index (boolean: 0 false, 1 true). Canonicalising the few
        distinct values instead of every row is what makes the scan cheap.
        """
        col = self.schema.columns[k]
        tc = self._types[col.name]
        src = self.dialect.ident(col.name)
        t = self._text("r", tc, p) if tc in ("text", "other") else "r"
        key = self._canon("t", "text" if tc in ("text", "other") else tc, p)
        base = (
            f"SELECT r, {key} AS key FROM (SELECT r, {t} AS t FROM "
            f"(SELECT DISTINCT {src} AS r FROM {self._src}) d0) d1"
        )
        if col.kind is ColumnKind.CATEGORICAL:
            view = self._cat_views[k]
            return (
                f"SELECT d2.r AS mr, CASE WHEN d2.key IS NULL THEN -1 WHEN c.code IS NULL THEN -2 "
                f"ELSE c.code END AS mc FROM ({base}) d2 LEFT JOIN (SELECT "
                f"{self._canon('raw', 'text', p)} AS ck, code FROM {view}) c ON d2.key = c.ck"
            )
        t_keys = [("n" if v.isdigit() else "t") + v for v, c in _BOOL_LOOKUP.items() if c == 1]
        f_keys = [("n" if v.isdigit() else "t") + v for v, c in _BOOL_LOOKUP.items() if c == 0]
        return (
            f"SELECT r AS mr, CASE WHEN key IS NULL THEN -1 WHEN lower(key) IN ({p.consts(t_keys)}) "
            f"THEN 1 WHEN lower(key) IN ({p.consts(f_keys)}) THEN 0 ELSE -2 END AS mc FROM ({base}) d3"
        )

    def _num_canon(self, x: str, p: Params) -> str:
        d = self.dialect
        return (
            f"CASE WHEN {x} IS NULL OR {d.is_nan(x)} THEN NULL "
            f"WHEN {x} = {_INF} THEN 'ninf' WHEN {x} = -{_INF} THEN 'n-inf' "
            f"WHEN abs({x}) < {p(_TWO53)} AND {x} % 1 = 0 "
            f"THEN 'n' || CAST(CAST({x} AS BIGINT) AS {d.text_type}) "
            f"ELSE 'f' || CAST({x} AS {d.text_type}) END"
        )

    def _cells_sql(self, p: Params, columns: Sequence[int] | None = None, *, pid: bool = True) -> str:
        """SELECT of the conformed columns u{k} v{k} m{k} i{k} cl{k} d{k} (+ pid) over the source."""
        d = self.dialect
        schema = self.schema
        ks = sorted(set(range(len(schema.columns)) if columns is None else columns))
        unit = schema.unit.column if pid else None
        if unit is not None:
            uk = schema.names.index(unit)
            if uk not in ks:
                ks.append(uk)
        if not ks:
            return f"SELECT 1 AS one_ FROM {self._src}"
        a_layer, b_layer, c_layer, e_layer, e2_layer = _Layer(), _Layer(), _Layer(), _Layer(), _Layer()
        joins: list[tuple[int, str]] = []
        for k in ks:
            col = schema.columns[k]
            src = d.ident(col.name)
            tc = self._types[col.name]
            if col.kind in (ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN):
                a_layer.add(f"a{k}", src)  # conformed once per distinct value (_map_sql)
                joins.append((k, self._map_sql(k, p)))
            elif tc in ("text", "other"):
                a_layer.add(f"a{k}", self._text(src, tc, p))
                tc = "text"
            else:
                a_layer.add(f"a{k}", src)
            a = f"a{k}"
            if col.kind is ColumnKind.NUMERIC:
                lo, hi = col.bounds
                inf = _INF
                if tc == "text":
                    b_layer.add(
                        f"isn{k}", f"COALESCE({a} IS NOT NULL AND {d.matches(a, p.const(NUMBER_PATTERN))}, FALSE)"
                    )
                    b_layer.add(f"{a}", a)
                    c_layer.add(f"xr{k}", f"CASE WHEN isn{k} THEN TRY_CAST({a} AS DOUBLE) END")
                    c_layer.add(
                        f"na{k}",
                        f"CASE WHEN isn{k} OR {a} IS NULL THEN FALSE "
                        f"ELSE lower({a}) IN ({p.consts(sorted(NUMERIC_NA_TOKENS))}) END",
                    )
                    miss = (
                        f"({a} IS NULL OR {a} = '' OR na{k} OR (isn{k} AND (xr{k} IS NULL OR "
                        f"{d.is_nan(f'xr{k}')} OR abs(xr{k}) = {inf})))"
                    )
                    inv = f"({a} IS NOT NULL AND {a} <> '' AND NOT isn{k} AND NOT na{k})"
                elif tc == "bool":
                    b_layer.add(a, a)
                    c_layer.add(f"xr{k}", "CAST(NULL AS DOUBLE)")
                    miss, inv = f"({a} IS NULL)", f"({a} IS NOT NULL)"
                else:
                    b_layer.add(a, a)
                    c_layer.add(f"xr{k}", f"CAST({a} AS DOUBLE)")
                    miss = f"(xr{k} IS NULL OR {d.is_nan(f'xr{k}')} OR abs(xr{k}) = {inf})"
                    inv = "FALSE"
                bad = f"(m{k} OR i{k})"
                if col.missing.action is MissingAction.REPLACE:
                    rep = p(float(col.missing.value))  # type: ignore[arg-type]
                    x = f"CASE WHEN {bad} THEN {rep} ELSE xr{k} END"
                    usable = "TRUE"
                else:
                    x = f"CASE WHEN {bad} THEN NULL ELSE xr{k} END"
                    usable = f"NOT {bad}"
                plo, phi = p(float(lo)), p(float(hi))
                e_layer.add(f"m{k}", miss)
                e_layer.add(f"i{k}", inv)
                e2_layer.add(f"u{k}", usable)
                e2_layer.add(f"x{k}", x)
                e2_layer.add(f"lo{k}", plo)
                e2_layer.add(f"hi{k}", phi)
                continue
            if col.kind is ColumnKind.CATEGORICAL:
                labels = col.labels
                other = p(len(labels) - 1) if col.other_bin else p(-1)
                missing_code = (
                    p(labels.index(str(col.missing.value)))
                    if col.missing.action is MissingAction.REPLACE else p(-1)
                )
                craw = f"cr{k}"
                e_layer.add(f"m{k}", f"{craw} = -1")
                e_layer.add(f"i{k}", f"{craw} = -2")
                e_layer.add(
                    f"x{k}",
                    f"CAST(CASE WHEN {craw} = -2 THEN {other} WHEN {craw} = -1 THEN {missing_code} "
                    f"ELSE {craw} END AS BIGINT)",
                )
                continue
            if col.kind is ColumnKind.BOOLEAN:
                bk = f"cr{k}"
                e_layer.add(f"m{k}", f"{bk} = -1")
                e_layer.add(f"i{k}", f"{bk} = -2")
                if col.missing.action is MissingAction.REPLACE:
                    rep = p(1 if col.missing.value else 0)
                    e_layer.add(f"x{k}", f"CAST(CASE WHEN {bk} < 0 THEN {rep} ELSE {bk} END AS BIGINT)")
                    e_layer.add(f"u{k}", "TRUE")
                else:
                    e_layer.add(f"x{k}", f"CAST(CASE WHEN {bk} < 0 THEN 0 ELSE {bk} END AS BIGINT)")
                    e_layer.add(f"u{k}", f"{bk} >= 0")
                continue
            b_layer.add(f"key{k}", self._canon(a, tc, p))
            # identifier
            e_layer.add(f"m{k}", f"key{k} IS NULL")
            e_layer.add(f"i{k}", "FALSE")
            e_layer.add(f"u{k}", f"key{k} IS NOT NULL")
            e_layer.add(f"x{k}", "CAST(0 AS BIGINT)")
            e_layer.add(f"key{k}", f"key{k}")
        # final layer: v, cl, d per column (+ pid)
        f_layer = _Layer()
        for k in ks:
            col = schema.columns[k]
            f_layer.add(f"m{k}", f"m{k}")
            f_layer.add(f"i{k}", f"i{k}")
            if col.kind is ColumnKind.NUMERIC:
                f_layer.add(f"u{k}", f"u{k}")
                f_layer.add(
                    f"v{k}",
                    f"CASE WHEN x{k} < lo{k} THEN lo{k} WHEN x{k} > hi{k} THEN hi{k} ELSE x{k} END",
                )
                f_layer.add(f"cl{k}", f"(u{k} AND (x{k} < lo{k} OR x{k} > hi{k}))")
                f_layer.add(f"d{k}", f"NOT u{k}")
            elif col.kind is ColumnKind.CATEGORICAL:
                f_layer.add(f"u{k}", f"x{k} >= 0")
                f_layer.add(f"v{k}", f"x{k}")
                f_layer.add(f"cl{k}", "FALSE")
                drop = col.missing.action is MissingAction.DROP
                f_layer.add(f"d{k}", f"m{k}" if drop else "FALSE")
            else:
                f_layer.add(f"u{k}", f"u{k}")
                f_layer.add(f"v{k}", f"x{k}")
                f_layer.add(f"cl{k}", "FALSE")
                f_layer.add(f"d{k}", f"NOT u{k}")
        if unit is not None:
            f_layer.add("pid", f"key{schema.names.index(unit)}")

        def sel(layer: _Layer, inner: str, keep_star: bool = True) -> str:
            cols = ", ".join(f"{e} AS {a}" for a, e in layer.cols)
            star = "*, " if keep_star else ""
            return f"SELECT {star}{cols} FROM ({inner}) q"

        q = f"SELECT {', '.join(f'{e} AS {a}' for a, e in a_layer.cols)} FROM {self._src}"
        # layer b replaces a-columns for text numerics only by re-selecting them: plain SELECT
        b_cols = [c for c in b_layer.cols if c[0] != c[1]]
        if b_cols:
            q = sel(_Layer(b_cols), q)
        if joins:
            picks = ", ".join(f"COALESCE(j{k}.mc, -1) AS cr{k}" for k, _ in joins)
            jsql = " ".join(f"LEFT JOIN ({m}) j{k} ON q.a{k} = j{k}.mr" for k, m in joins)
            q = f"SELECT q.*, {picks} FROM ({q}) q {jsql}"
        if c_layer.cols:
            q = sel(c_layer, q)
        e_cols = [c for c in e_layer.cols if c[0] != c[1]]
        q = sel(_Layer(e_cols), q)
        if e2_layer.cols:
            q = sel(e2_layer, q)
        return sel(f_layer, q, keep_star=False)

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

        The text is :func:`~planner.backends.pandas_backend.row_key_parts` joined by "|"
        after the salt key, as in
        :func:`~planner.backends.pandas_backend.bound_contributions`, which orders by the
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
        :func:`~planner.backends.pandas_backend.bound_contributions` when there is no tie;
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
        """SQL of :func:`~planner.backends.pandas_backend.row_key_parts` for column k.

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
        """SQL of :func:`~planner.backends.pandas_backend.float_parts` (as DOUBLE expressions)."""
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
        """(rows before bounding, whether some person has more than c rows)."""
        p = Params(self.dialect)
        unit = self.schema.unit.column
        if unit is None:
            return -1, False  # no bounding: nothing is truncated (total = rows)
        fast = self._check_units_by_bitmap(unit)
        if fast is not None:
            return fast
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

    def _check_units_by_bitmap(self, unit: str) -> tuple[int, bool] | None:
        """:meth:`_check_units` without grouping by person, when every id is an integer.

        If every person id is an integer in plain form (an integer column, or text that is
        exactly an integer's decimal digits), the canonical keys of two ids are equal
        exactly when the integers are, so the people are distinct exactly when the number
        of distinct integers (one bit per value of [min, max], :meth:`Dialect.distinct_ints`)
        equals the number of rows; then nobody has more than c ≥ 1 rows. ``None`` (the
        caller groups by person) when an id is missing or not a plain integer, the range
        is too wide for a bitmap, the engine has none, or someone has 2 ≤ rows and c > 1.
        """
        d = self.dialect
        if d.distinct_ints("x", "0", "0") is None:
            return None
        tc = self._types[unit]
        a = d.ident(unit)
        p = Params(d)
        if tc == "int":
            ints = f"SELECT TRY_CAST({a} AS BIGINT) AS iv FROM {self._src}"
        elif tc == "text":
            # a plain integer prints back as its own text: "7", "-12" (not "007", "+7", "7.0")
            ints = (
                f"SELECT CASE WHEN CAST(b AS {d.text_type}) = t THEN b END AS iv FROM "
                f"(SELECT t, TRY_CAST(t AS BIGINT) AS b FROM "
                f"(SELECT {self._text(a, 'text', p)} AS t FROM {self._src}) q0) q1"
            )
        else:
            return None
        total, n_int, lo, hi = self._run_sql(
            f"SELECT count(*), count(iv), min(iv), max(iv) FROM ({ints}) q", p
        )[0]
        if not total:
            return 0, False
        if n_int != total:
            return None
        width = int(hi) - int(lo) + 1
        if width > min(1 << 30, 8 * int(total) + (1 << 20)):
            return None  # sparse ids: a bitmap of the range would be large
        distinct_sql = d.distinct_ints("iv", p(int(lo)), p(int(hi)))
        distinct = int(self._run_sql(f"SELECT {distinct_sql} FROM ({ints}) q", p)[0][0])
        if distinct == total:
            return int(total), False
        if self.schema.unit.max_rows == 1:
            return int(total), True
        return None

    # ------------------------------------------------------------------ execution
    def _values(self, reqs: Sequence[_Request]) -> list[Any]:
        missing = [r for r in reqs if r not in self._cache]
        if missing:
            if self._collect is not None:
                self._collect.update(missing)
                return [self._cache.get(r, _default(r)) for r in reqs]
            self._run(missing)
        return [self._cache[r] for r in reqs]

    def _run(self, reqs: Iterable[_Request]) -> None:
        """Compute requests in ONE statement (plus the base stats of every column).

        The statement reads ``kept`` twice: one ungrouped aggregate for every scalar
        (counts, exact sums) and one ``GROUPING SETS`` aggregate for every bin request
        (DuckDB streams both from one scan). Each derived value is computed once, in
        its own projection layer, and referenced by name: an expression written out
        several times inside a ``CASE`` is evaluated several times per row.
        """
        d = self.dialect
        todo: list[_Request] = list(dict.fromkeys([_Rows(), *reqs]))
        scalars = [r for r in todo if not isinstance(r, _Bins)]
        groups = [r for r in todo if isinstance(r, _Bins)]
        used: set[int] = set()
        for r in todo:
            if isinstance(r, (_Stats, _Sum, _Bins)):
                used.add(r.k)
            elif isinstance(r, _Count):
                if r.k is not None:
                    used.add(r.k)
                if r.predicate is not None:
                    used.add(self.schema.names.index(r.predicate.column))
        p = Params(d)
        ctes = self._kept_with(p, sorted(used))
        aggs: list[str] = ["count(*)"]
        slots: list[tuple[_Request, int, int]] = []  # request, first agg index, width
        sum_layers: list[_Layer] = [_Layer(), _Layer(), _Layer()]

        def one(cond: str) -> str:
            return "count(*)" if cond == "TRUE" else d.count_if(cond)

        for r in scalars:
            start = len(aggs)
            if isinstance(r, _Rows):
                slots.append((r, 0, 1))
                continue
            if isinstance(r, _Stats):
                k = r.k
                aggs += [one(f"u{k}"), one(f"cl{k}"), one(f"i{k}"), one(f"m{k}")]
            elif isinstance(r, _Count):
                keep = ["TRUE"]
                if r.k is not None:
                    keep.append(f"NOT d{r.k}")
                if r.predicate is not None:
                    keep.append(f"NOT d{self.schema.names.index(r.predicate.column)}")
                usable = " AND ".join(keep[1:]) if len(keep) > 1 else "TRUE"
                m = usable if r.predicate is None else f"{usable} AND {self._predicate_sql(r.predicate, p)}"
                aggs += [one(m), one(usable)]
            elif isinstance(r, _Sum):
                aggs += self._sum_sql(r.k, p, sum_layers)
            slots.append((r, start, len(aggs) - start))
        scalar_src = "kept"
        for layer in sum_layers:
            if layer.cols:
                cols = ", ".join(f"{e} AS {a}" for a, e in layer.cols)
                scalar_src = f"(SELECT *, {cols} FROM {scalar_src} s)"
        # bins of small integer-valued columns: counted per value, binned in Python
        by_value = {g: _Bins(g.k) for g in groups
                    if (g.edges is not None or g.grid is not None) and self._value_counted(g.k)}
        wanted = groups
        groups = list(dict.fromkeys(by_value.get(g, g) for g in groups))
        keys: list[str] = []
        layers: list[_Layer] = [_Layer(), _Layer()]  # guessed bin index, exact bin index
        for j, g in enumerate(groups):
            guess, idx, key = self._bin_key_sql(g, p, j)
            keys.append(key)
            if guess is not None:
                layers[0].add(f"gg{j}", guess)
            if idx is not None:
                layers[1].add(f"gi{j}", idx)
        inner = "SELECT * FROM kept"
        for layer in layers:
            if layer.cols:
                cols = ", ".join(f"{e} AS {a}" for a, e in layer.cols)
                inner = f"SELECT *, {cols} FROM ({inner}) y"
        if keys:
            inner = f"SELECT *, {', '.join(f'{e} AS gk{j}' for j, e in enumerate(keys))} FROM ({inner}) y"
        key_cols = [f"gk{j}" for j in range(len(keys))]
        if keys:
            # scalars once over all rows; bin counts per grouping set (count only), one statement
            nulls = ", ".join(f"CAST(NULL AS BIGINT) AS {c}" for c in key_cols)
            sets = ", ".join(f"({c})" for c in key_cols)
            zeros = ", ".join(f"CAST(NULL AS DECIMAL(38, 0)) AS s{j}" for j in range(1, len(aggs)))
            sql = (
                f"{ctes} SELECT {nulls}, {', '.join(f'CAST({a} AS DECIMAL(38, 0)) AS s{j}' for j, a in enumerate(aggs))} "
                f"FROM {scalar_src} sc UNION ALL "
                f"SELECT {', '.join(key_cols)}, CAST(count(*) AS DECIMAL(38, 0)) AS s0"
                f"{', ' + zeros if zeros else ''} FROM ({inner}) z GROUP BY GROUPING SETS ({sets})"
            )
        else:
            sql = f"{ctes} SELECT {', '.join(aggs)} FROM {scalar_src} sc"
        rows = self._run_sql(sql, p)
        nk = len(keys)
        grouped: list[dict[int, int]] = [{} for _ in groups]
        scalar_row: tuple[Any, ...] | None = None
        for row in rows:
            which = [j for j in range(nk) if row[j] is not None]
            if not which:
                scalar_row = tuple(row[nk:])
            else:
                grouped[which[0]][int(row[which[0]])] = int(row[nk])
        if scalar_row is None:  # no rows at all (cannot happen: () always yields one row)
            scalar_row = tuple([0] * len(aggs))
        for r, start, width in slots:
            vals = [0 if v is None else int(v) for v in scalar_row[start:start + width]]
            self._cache[r] = vals[0] if isinstance(r, _Rows) else tuple(vals)
        for g, counts in zip(groups, grouped, strict=True):
            self._cache[g] = counts
        for g in wanted:
            if g in by_value:
                self._cache[g] = self._bins_of_values(g, self._cache[by_value[g]])
        if self._require_rows and self._cache[_Rows()] == 0 and self._total <= 0:
            raise DataError("the data has a header but no data rows; use a file with at least one row.")

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
        k, col = self._col(pr.column)
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
            if col.kind is ColumnKind.BOOLEAN:
                wanted = [int(bool(c)) for c in pr.values]
            else:
                wanted = [col.labels.index(str(c)) for c in pr.values]
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

    def _bin_key_sql(self, g: _Bins, p: Params, j: int) -> tuple[str | None, str | None, str]:
        """(guess, index, key) of a grouping request: the per-row bin key (−1: not usable;
        −2: outside the edges), computed from an exact bin index (column ``gi{j}``),
        itself corrected from a guessed index (column ``gg{j}``) when the edges are evenly
        spaced. Each of the three is a projection layer of its own.

        Edge values are read from the edge array parameter, or, when every edge but the
        last equals ``i·step + e₀`` exactly in IEEE arithmetic (the grids of
        ``numpy.linspace`` and of a declared step), computed by that same formula in
        SQL: cheaper than an array lookup per row, and bit-identical.
        """
        d = self.dialect
        k = g.k
        v = f"v{k}"
        gg, gi = f"gg{j}", f"gi{j}"
        if g.edges is None and g.grid is None:
            if self.schema.columns[k].kind is ColumnKind.NUMERIC:  # per value (_value_counted)
                below = p(int(self.schema.columns[k].bounds[0]) - 1)
                return None, None, f"CASE WHEN u{k} THEN CAST({v} AS BIGINT) ELSE {below} END"
            return None, None, f"CASE WHEN u{k} THEN {v} ELSE -1 END"
        if g.edges is not None:
            e = np.asarray(g.edges, dtype=np.float64)
            nb = e.size - 1
            first, last = p(float(e[0])), p(float(e[-1]))
            key = (
                f"CASE WHEN NOT u{k} THEN -1 WHEN {v} = {last} THEN {nb - 1} "
                f"WHEN {v} < {first} OR {v} > {last} THEN -2 ELSE {gi} END"
            )
            if _uniform_guess_ok(e, "right"):
                w, e0 = p(float(e[1] - e[0])), p(float(e[0]))
                floor = d.floor(f"({v} - {e0}) / {w}")
                guess = f"CAST(least(greatest({floor}, 0), {nb - 1}) AS BIGINT)"
                edge = self._edge_fn(e, p)
                idx = (
                    f"{gg} - CASE WHEN {v} < {edge(gg)} THEN 1 ELSE 0 END "
                    f"+ CASE WHEN {v} >= {edge(f'{gg} + 1')} THEN 1 ELSE 0 END"
                )
                return guess, idx, key
            if e.size > 2000:
                raise QueryError("more than 2000 irregular bin edges; use evenly spaced bins.")
            whens = " ".join(f"WHEN {v} < {p(float(x))} THEN {i - 1}" for i, x in enumerate(e))
            return None, f"CASE {whens} ELSE {nb} END", key
        grid = np.asarray(g.grid, dtype=np.float64)
        n = grid.size
        if n == 1:
            return None, None, f"CASE WHEN NOT u{k} THEN -1 ELSE 0 END"
        key = f"CASE WHEN NOT u{k} THEN -1 ELSE {gi} END"
        if _uniform_guess_ok(grid, "left"):
            w, t0 = p(float(grid[1] - grid[0])), p(float(grid[0]))
            ceil = f"-{d.floor(f'({t0} - {v}) / {w}')}"
            guess = f"CAST(least(greatest({ceil}, 0), {n - 1}) AS BIGINT)"
            edge = self._edge_fn(grid, p)
            idx = (
                f"{gg} - CASE WHEN {gg} = 0 THEN 0 WHEN {edge(f'{gg} - 1')} >= {v} THEN 1 "
                f"ELSE 0 END "
                f"+ CASE WHEN {edge(gg)} < {v} THEN 1 ELSE 0 END"
            )
            return guess, idx, key
        if n > 2000:
            raise QueryError(
                "more than 2000 irregular quantile candidates; use an evenly spaced grid."
            )
        whens = " ".join(f"WHEN {v} <= {p(float(x))} THEN {i}" for i, x in enumerate(grid))
        return None, f"CASE {whens} ELSE {n} END", key

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

    # ------------------------------------------------------------------ Backend API
    @property
    def rows(self) -> int:
        return int(self._values([_Rows()])[0])

    @property
    def rows_truncated(self) -> int:
        return 0 if self._total < 0 else self._total - self.rows

    def column_stats(self, column: str) -> ColumnStats:
        k, col = self._col(column)
        rows, (usable, clipped, invalid, missing) = self._values([_Rows(), _Stats(k)])
        replace = col.missing.action is MissingAction.REPLACE
        if col.kind is ColumnKind.CATEGORICAL:
            return ColumnStats(rows, usable, 0, invalid, missing,
                               missing if replace else 0, 0 if replace else missing)
        if col.kind is ColumnKind.IDENTIFIER:
            return ColumnStats(rows, rows - missing, 0, 0, missing, 0, missing)
        bad = invalid + missing
        return ColumnStats(rows, usable, clipped, invalid, missing,
                           bad if replace else 0, 0 if replace else bad)

    def count(self, column: str | None = None, predicate: Predicate | None = None) -> CountAggregate:
        k = None
        if column is not None:
            k, _ = self._col(column)
        if predicate is not None:
            predicate.validate(self.schema, "count")
        rows, (value, usable) = self._values([_Rows(), _Count(k, predicate)])
        return CountAggregate(int(value), int(rows - usable))

    def clipped_sum(self, column: str) -> SumAggregate:
        k, _ = self._col(column, ColumnKind.NUMERIC)
        (ih, il, f1, f2), _st = self._values([_Sum(k), _Stats(k)])
        stats = self.column_stats(column)
        return SumAggregate(sum_from_parts(ih, il, f1, f2), stats.usable, stats.clipped, stats.dropped)

    def bin_counts(self, column: str, edges: Sequence[float] | None = None) -> BinCounts:
        k, col = self._col(column, ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN, ColumnKind.NUMERIC)
        if col.kind is ColumnKind.NUMERIC:
            if edges is None:
                raise QueryError(f"bin counts of numeric column {column!r} need declared bin edges.")
            e = np.asarray(edges, dtype=np.float64)
            if e.ndim != 1 or e.size < 2 or np.any(np.diff(e) <= 0) or not np.all(np.isfinite(e)):
                raise QueryError("bin edges must be at least 2 strictly increasing finite numbers.")
            req = _Bins(k, edges=tuple(float(x) for x in e))
            counts, _ = self._values([req, _Stats(k)])
            stats = self.column_stats(column)
            labels = bin_labels(e)
            return BinCounts(
                labels, tuple(counts.get(i, 0) for i in range(e.size - 1)),
                tuple(float(v) for v in e), counts.get(-2, 0), stats.dropped,
            )
        if edges is not None:
            raise QueryError(f"column {column!r} is {col.kind.value}; its bins are declared, not edges.")
        labels = col.labels
        counts, _ = self._values([_Bins(k), _Stats(k)])
        stats = self.column_stats(column)
        unbinned = stats.invalid if col.kind is ColumnKind.CATEGORICAL and not col.other_bin else 0
        return BinCounts(labels, tuple(counts.get(i, 0) for i in range(len(labels))), None,
                         unbinned, stats.dropped)

    def candidate_counts(self, column: str, candidates: Sequence[float]) -> QuantileAggregate:
        k, col = self._col(column, ColumnKind.NUMERIC)
        lo, hi = col.bounds
        grid = np.asarray(candidates, dtype=np.float64)
        if grid.ndim != 1 or grid.size < 1 or np.any(np.diff(grid) <= 0):
            raise QueryError("quantile candidates must be a strictly increasing list.")
        if grid[0] > lo or grid[-1] < hi:
            raise QueryError(
                f"quantile candidates must cover the declared bounds [{lo:g}, {hi:g}] of {column!r}."
            )
        counts, _ = self._values([_Bins(k, grid=tuple(float(x) for x in grid)), _Stats(k)])
        stats = self.column_stats(column)
        return QuantileAggregate(
            tuple(float(v) for v in grid), tuple(counts.get(i, 0) for i in range(grid.size)),
            stats.dropped,
        )

    def boolean_counts(self, column: str) -> BooleanCounts:
        k, _ = self._col(column, ColumnKind.BOOLEAN)
        counts, _ = self._values([_Bins(k), _Stats(k)])
        stats = self.column_stats(column)
        return BooleanCounts(counts.get(1, 0), counts.get(0, 0), stats.dropped)

    def column_report(self) -> dict[str, Any]:
        self._values([_Rows(), *(_Stats(k) for k in range(len(self.schema.columns)))])
        return super().column_report()

    # ------------------------------------------------------------------ batching
    def prefetch(self, queries: Iterable[Query]) -> None:
        """Compute every aggregate the queries need in one statement (one pass)."""
        self._collect = set()
        try:
            for q in queries:
                self.aggregate(q)
            todo = self._collect
        finally:
            self._collect = None
        if todo:
            self._run(todo)

    def aggregate_all(self, queries: Iterable[Query]) -> dict[str, Aggregate]:
        qs = list(queries)
        self.prefetch(qs)
        return {q.id: self.aggregate(q) for q in qs}
