"""The SQL engines' spellings and the pieces every statement is written with.

:class:`Dialect` holds the few spellings that differ between DuckDB (the default) and
Spark SQL; :class:`Params` binds every value a statement uses (nothing from a file or a
schema reaches SQL as raw text); :class:`Layer` and :func:`chain` build the projection
layers in which each derived value is computed once, then used by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from planner.core.errors import DataError
from planner.data.backends.cells import _NUMBER_RE

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

NUMBER_PATTERN: Final[str] = f"^(?:{_NUMBER_RE})$"
INT_PATTERN: Final[str] = r"^[+-]?[0-9]+$"
TWO53: Final[float] = 2.0**53
TWO53_SQL: Final[str] = "9007199254740992"
#: 2⁶⁴ − 1: ``x & MASK`` is x mod 2⁶⁴ (integer division by 2⁶⁴ is far slower in DuckDB)
MASK64_SQL: Final[str] = str((1 << 64) - 1)
INF_SQL: Final[str] = "CAST('Infinity' AS DOUBLE)"

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

    def lane_sum(self, u: str) -> str:
        """The sum of a lane's unsigned values, exact or mod 2⁶⁴ (read back mod 2⁶⁴):
        HUGEINT values sum into a 128-bit result."""
        return f"sum({u})"


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


def nested_type(engine_type: str) -> bool:
    """Whether an engine column type holds nested values: a list or array, a struct, a map
    or a union (DuckDB ``VARCHAR[]``, ``INTEGER[3]``, ``STRUCT(…)``, ``MAP(…)``,
    ``UNION(…)``; Spark ``array<…>``, ``struct<…>``, ``map<…>``).

    Examples
    --------
    >>> [nested_type(t) for t in ("VARCHAR[]", "STRUCT(a INTEGER)", "map<string,bigint>", "VARCHAR", "DECIMAL(9,2)")]
    [True, True, True, False, False]
    """
    t = engine_type.strip().lower()
    return t.endswith("]") or t.startswith(("struct", "map", "union", "array"))


def concat(pieces: Sequence[str]) -> str:
    """``concat`` of text pieces that are never NULL (then it is ``||``), adjacent
    string literals merged: one call instead of a chain of intermediate strings.

    >>> concat(["a1", "':'", "'0'", "b"])
    "concat(a1, ':0', b)"
    """
    merged: list[str] = []
    for x in pieces:
        if merged and is_literal(x) and is_literal(merged[-1]):
            merged[-1] = merged[-1][:-1] + x[1:]
        else:
            merged.append(x)
    return merged[0] if len(merged) == 1 else f"concat({', '.join(merged)})"


def is_literal(x: str) -> bool:
    return len(x) >= 2 and x[0] == x[-1] == "'" and "'" not in x[1:-1]


@dataclass
class Layer:
    cols: list[tuple[str, str]] = field(default_factory=list)

    def add(self, alias: str, expr: str) -> None:
        self.cols.append((alias, expr))


def chain(base: str, layers: Sequence[Layer]) -> str:
    """``base`` under one ``SELECT *, …`` projection per non-empty layer, in order."""
    for layer in layers:
        if layer.cols:
            cols = ", ".join(f"{e} AS {a}" for a, e in layer.cols)
            base = f"(SELECT *, {cols} FROM {base} s)"
    return base


class Engine(Protocol):
    """What the statement builders need of a SQL backend: run a statement, keep the rows of
    one in the engine (:meth:`planner.data.backends.sql.backend.SqlBackend._store`)."""

    def _run_sql(self, sql: str, params: Params) -> list[tuple[Any, ...]]: ...

    def _store(self, name: str, sql: str, params: Params) -> bool: ...
