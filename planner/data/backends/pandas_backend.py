"""The default backend: exact aggregates on a pandas DataFrame, fully vectorised.

Implements the contract of :mod:`planner.data.backends.base`. Each declared column is
*conformed* once (missing-value rule applied, values clipped / mapped to declared bins)
and cached as numpy arrays; every aggregate is then a mask, a ``bincount`` or a
``searchsorted``: the same shape as one ``GROUP BY`` over the declared grid in SQL.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from planner.core.errors import DataError, QueryError
from planner.data import requests as rq
from planner.data.backends import digest as dg
from planner.data.backends.base import Backend, absent_columns, nested_column, refuse_keys
from planner.data.backends.cells import (
    _BOOL_LOOKUP,
    _NUMBER_RE,
    NUMERIC_NA_TOKENS,
    TWO53,
    _canonical_categories,
    canonical_value,
    salt_key,
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
from planner.data.schema import (
    Column,
    ColumnKind,
    MissingAction,
    Schema,
)

BoolArray = npt.NDArray[np.bool_]

_NUMERIC_OPS: dict[PredicateOp, Callable[[Any, Any], Any]] = {
    PredicateOp.EQ: operator.eq,
    PredicateOp.NE: operator.ne,
    PredicateOp.LT: operator.lt,
    PredicateOp.LE: operator.le,
    PredicateOp.GT: operator.gt,
    PredicateOp.GE: operator.ge,
}
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]



@dataclass(frozen=True, slots=True)
class Conformed:
    """One column after the missing-value rule: per row ``usable`` and ``values``.

    ``values``: clipped floats (numeric), bin codes (categorical: index into
    ``Column.labels``, −1 for no bin; boolean: 0 false / 1 true), or 0 (identifier).
    ``dropped``: rows the missing-value rule removes (``usable`` also excludes
    undeclared categories that have no bin; those are not "dropped").
    """

    usable: BoolArray
    values: FloatArray | IntArray
    stats: ColumnStats
    dropped: BoolArray
    #: per row: 0 ok, 1 missing, 2 invalid / undeclared, 3 clipped (numeric); None if unknown
    status: IntArray | None = None


_ID_INT_RE = r"^[+-]?\d{1,18}$"


def _is_number_dtype(s: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(s.dtype)) and not pd.api.types.is_bool_dtype(s.dtype)


def _arrow_text(series: pd.Series) -> pa.Array:
    """Each cell as a stripped string (null for NA), cell by cell, as an Arrow array."""
    s = series if isinstance(series.dtype, pd.StringDtype) else series.astype("string")
    arr = pa.array(s)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return pc.utf8_trim_whitespace(arr)


def _np_bool(arr: pa.Array | pa.ChunkedArray) -> BoolArray:
    """A writable numpy bool array (nulls as False)."""
    return np.array(arr.fill_null(False).to_numpy(zero_copy_only=False), dtype=np.bool_)


def _missing_mask(series: pd.Series) -> BoolArray:
    """NULL / NaN / empty or blank string, cell by cell."""
    if _is_number_dtype(series):
        return np.array(series.isna().to_numpy(dtype=bool), dtype=np.bool_)
    t = _arrow_text(series)
    return np.array(_np_bool(pc.is_null(t)) | _np_bool(pc.equal(t, "")), dtype=np.bool_)


#: What :func:`pandas.api.types.infer_dtype` says of a column that holds no nested value.
_FLAT = frozenset({"string", "empty", "integer", "floating", "mixed-integer-float", "boolean", "decimal",
                   "complex", "bytes", "datetime64", "datetime", "date", "timedelta64", "timedelta", "time",
                   "period", "interval", "categorical"})


def nested_columns(df: pd.DataFrame, names: Sequence[str]) -> list[str]:
    """The columns among ``names`` whose cells hold nested values: lists, arrays, tuples
    or dicts (Arrow's list, struct and map columns as pandas holds them). Only columns of
    Python objects can; a column of text or numbers is never scanned cell by cell."""
    out = []
    for name in names:
        s = df[name]
        if s.dtype != object or pd.api.types.infer_dtype(s, skipna=True) in _FLAT:
            continue
        if bool(s.map(lambda v: isinstance(v, (list, tuple, dict, np.ndarray)), na_action="ignore").any()):
            out.append(name)
    return out


def parse_numbers(series: pd.Series) -> tuple[FloatArray, BoolArray]:
    """Cell-by-cell numbers: (values, parsed). Unparsed cells are NaN with parsed False.

    The result for a cell depends on that cell only, never on the column's dtype or on
    other rows (a neighbouring file with one text cell must not change how the other
    cells are read). Accepted text: optional sign, digits, decimal point, exponent,
    ``inf``/``infinity``/``nan`` (any case), surrounding blanks. Booleans are not numbers.
    """
    if _is_number_dtype(series):
        x = np.array(series.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
        return x, ~np.isnan(x)
    t = _arrow_text(series)
    ok_arr = pc.match_substring_regex(t, rf"^{_NUMBER_RE}$").fill_null(False)
    valid = pc.if_else(ok_arr, t, pa.scalar(None, type=t.type))
    x = np.array(pc.cast(valid, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    return x, _np_bool(ok_arr)


def _factorize(series: pd.Series) -> tuple[list[object], IntArray]:
    """(unique cells, code per row with −1 for NA): canonicalise the few uniques, not every row."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        return list(uniques), np.asarray(codes, dtype=np.int64)
    enc = pc.dictionary_encode(_arrow_text(series))
    idx = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return list(enc.dictionary.to_pylist()), idx


def key_label(cell: object) -> str | None:
    """The released label of a key cell: text trimmed of white space as written ("02139"
    keeps its zero), a typed number in canonical form (7.0 → "7"); None when missing."""
    if isinstance(cell, str):
        return cell.strip() or None
    return canonical_value(cell)


def _canonical_codes(
    series: pd.Series, lookup: dict[str, int], missing_code: int = -1, other_code: int = -2,
    *, lower: bool = False,
) -> IntArray:
    """Per row: ``lookup[canonical cell]``; ``missing_code`` for missing, ``other_code`` else."""
    uniques, idx = _factorize(series)
    table = np.empty(len(uniques) + 1, dtype=np.int64)
    for i, u in enumerate(uniques):
        c = canonical_value(u)
        if c is not None and lower:
            c = c.lower()
        table[i] = missing_code if c is None or c == "" else lookup.get(c, other_code)
    table[-1] = missing_code  # idx == −1 (NA) picks the last entry
    return table[idx]


def identifier_codes(series: pd.Series) -> IntArray:
    """One code per person (canonical identifier); −1 for a missing identifier."""
    if pd.api.types.is_integer_dtype(series.dtype) and not series.isna().any():
        return np.asarray(pd.factorize(series)[0], dtype=np.int64)
    if not _is_number_dtype(series) and not pd.api.types.is_bool_dtype(series.dtype):
        t = _arrow_text(series)
        nonempty = pc.and_(pc.is_valid(t), pc.not_equal(t, ""))
        is_int = pc.match_substring_regex(t, _ID_INT_RE)
        if pc.all(pc.or_(pc.invert(nonempty.fill_null(False)), is_int.fill_null(False))).as_py():
            # all identifiers are integers: "007" and "7" are the same person
            ints = pc.cast(pc.if_else(nonempty, t, pa.scalar(None, type=t.type)), pa.int64())
            s = pd.Series(ints.to_numpy(zero_copy_only=False))
            codes = np.asarray(pd.factorize(s, use_na_sentinel=True)[0], dtype=np.int64)
            return np.where(_np_bool(nonempty), codes, -1)
    uniques, idx = _factorize(series)
    canon = [canonical_value(u) for u in uniques]
    keys = pd.Index(["" if c is None else c for c in canon])
    group = np.asarray(pd.factorize(keys)[0], dtype=np.int64)
    group[np.asarray([c is None or c == "" for c in canon], dtype=bool)] = -1
    table = np.append(group, -1)
    return np.asarray(table[idx], dtype=np.int64)


def conform_column(series: pd.Series, column: Column) -> Conformed:
    """Apply the column's declared rule to raw values, cell by cell (vectorised).

    Parameters
    ----------
    series : pandas.Series
        The raw column as loaded (strings from CSV, typed values from Parquet or memory).
    column : Column
        Its declaration.

    Returns
    -------
    Conformed
    """
    kind = column.kind
    if kind is ColumnKind.NUMERIC:
        return _conform_numeric(series, column)
    if kind is ColumnKind.CATEGORICAL:
        return _conform_categorical(series, column)
    if kind is ColumnKind.BOOLEAN:
        return _conform_boolean(series, column)
    return _conform_identifier(series)


def _conform_numeric(series: pd.Series, column: Column) -> Conformed:
    """:func:`conform_column` for a numeric column: parse, apply the missing rule, clip."""
    n = len(series)
    rule = column.missing
    lo, hi = column.bounds
    if _is_number_dtype(series):
        x = np.array(series.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
        if bool(np.isfinite(x).all()):  # typed, every cell a finite number: nothing missing or invalid
            none = np.zeros(n, dtype=bool)
            out = (x < lo) | (x > hi)
            return Conformed(
                np.ones(n, dtype=bool), np.clip(x, lo, hi),
                _stats(n, ~none, int(np.count_nonzero(out)), none, none, rule.action), none,
                _status(none, none, out),
            )
    missing = _missing_mask(series)
    x, parsed = parse_numbers(series)
    missing |= np.isinf(x) | (parsed & np.isnan(x))
    unparsed = ~parsed & ~missing
    if unparsed.any():
        tok = pc.utf8_lower(_arrow_text(series[unparsed]))
        na = _np_bool(pc.is_in(tok, value_set=pa.array(sorted(NUMERIC_NA_TOKENS))))
        missing[np.flatnonzero(unparsed)[na]] = True
    invalid = ~parsed & ~missing
    bad = missing | invalid
    if rule.action is MissingAction.REPLACE:
        x = np.where(bad, float(rule.value), x)  # type: ignore[arg-type]
        usable = np.ones(n, dtype=bool)
    else:
        usable = ~bad
    out = usable & ((x < lo) | (x > hi))
    clipped = int(np.count_nonzero(out))
    values: FloatArray | IntArray = np.clip(np.where(usable, x, lo), lo, hi)
    return Conformed(
        usable, values, _stats(n, usable, clipped, invalid, missing, rule.action), ~usable,
        _status(missing, invalid, out),
    )


def _conform_categorical(series: pd.Series, column: Column) -> Conformed:
    """:func:`conform_column` for a categorical column: codes of the declared labels, the
    undeclared ones to the "other" bin (or dropped), the missing rule applied."""
    n = len(series)
    rule = column.missing
    labels = column.labels
    codes = _canonical_codes(series, _canonical_categories(column), -1, -2)
    missing = codes == -1
    undeclared = codes == -2
    codes[undeclared] = len(labels) - 1 if column.other_bin else -1
    if rule.action is MissingAction.REPLACE:
        codes[missing] = labels.index(str(rule.value))
    usable = codes >= 0
    n_missing = int(missing.sum())
    return Conformed(
        usable, codes,
        ColumnStats(
            rows=n,
            usable=int(usable.sum()),
            clipped=0,
            invalid=int(undeclared.sum()),
            missing=n_missing,
            replaced=n_missing if rule.action is MissingAction.REPLACE else 0,
            dropped=n_missing if rule.action is MissingAction.DROP else 0,
        ),
        missing if rule.action is MissingAction.DROP else np.zeros(n, dtype=bool),
        _status(missing, undeclared),
    )


def _conform_boolean(series: pd.Series, column: Column) -> Conformed:
    """:func:`conform_column` for a boolean column: 0/1 codes, the missing rule applied."""
    n = len(series)
    rule = column.missing
    if series.dtype == np.bool_:  # numpy bools: no missing cell; True reads as "true" (1), False as 0
        none = np.zeros(n, dtype=bool)
        return Conformed(
            np.ones(n, dtype=bool), np.asarray(series.to_numpy(dtype=np.int64), dtype=np.int64),
            _stats(n, ~none, 0, none, none, rule.action), none, _status(none, none),
        )
    codes = _canonical_codes(series, _BOOL_LOOKUP, -1, -2, lower=True)
    missing = codes == -1
    invalid = codes == -2
    bad = missing | invalid
    b = codes == 1
    if rule.action is MissingAction.REPLACE:
        b = np.where(bad, bool(rule.value), b)
        usable = np.ones(n, dtype=bool)
    else:
        usable = ~bad
    vals = np.where(usable, b, False).astype(np.int64)
    return Conformed(
        usable, vals, _stats(n, usable, 0, invalid, missing, rule.action), ~usable,
        _status(missing, invalid),
    )


def _conform_identifier(series: pd.Series) -> Conformed:
    """:func:`conform_column` for an identifier column: usable where the identifier is present."""
    n = len(series)
    usable = identifier_codes(series) >= 0
    zeros = np.zeros(n, dtype=np.int64)
    n_miss = int(n - usable.sum())
    return Conformed(usable, zeros, ColumnStats(n, n - n_miss, 0, 0, n_miss, 0, n_miss), ~usable)


def _status(missing: BoolArray, invalid: BoolArray, clipped: BoolArray | None = None) -> IntArray:
    """Per-row status code: 1 missing, 2 invalid, 3 clipped, else 0."""
    st = missing.astype(np.int64)
    if invalid.any():
        st[invalid & ~missing] = 2
    if clipped is not None and clipped.any():
        st[clipped & (st == 0)] = 3
    return st


def _stats(
    n: int, usable: BoolArray, clipped: int, invalid: BoolArray, missing: BoolArray,
    action: MissingAction,
) -> ColumnStats:
    bad = int(np.count_nonzero(invalid | missing))
    return ColumnStats(
        rows=n,
        usable=int(np.count_nonzero(usable)),
        clipped=clipped,
        invalid=int(np.count_nonzero(invalid)),
        missing=int(np.count_nonzero(missing)),
        replaced=bad if action is MissingAction.REPLACE else 0,
        dropped=bad if action is MissingAction.DROP else 0,
    )


def canonical_words(series: pd.Series) -> npt.NDArray[np.uint64]:
    """Per row, the digest word of a cell read by :func:`canonical_value` (categorical and
    identifier columns; boolean cells that are not tokens), see
    :mod:`planner.data.backends.digest`. Typed columns are converted in bulk; text is
    classified once per distinct value.
    """
    n = len(series)
    dt = series.dtype
    if pd.api.types.is_integer_dtype(dt) and not (
        pd.api.types.is_unsigned_integer_dtype(dt) and n and bool((series.dropna() >= 1 << 63).any())
    ):
        na = np.asarray(series.isna().to_numpy(dtype=bool), dtype=bool)
        v = np.asarray(series.to_numpy(dtype=np.int64, na_value=0), dtype=np.int64)
        out = v.view(np.uint64) ^ np.uint64(dg.T_INT)
        out[na] = np.uint64(dg.T_MISS)
        return out
    if pd.api.types.is_float_dtype(dt):
        return dg.number_words(series.to_numpy(dtype=np.float64, na_value=np.nan))
    uniques, idx = _factorize(series)
    table = np.empty(len(uniques) + 1, dtype=np.uint64)
    for i, u in enumerate(uniques):
        table[i] = dg.text_word(None if u is None else str(u))
    table[-1] = np.uint64(dg.T_MISS)
    return np.asarray(table[idx], dtype=np.uint64)


def cell_words(series: pd.Series, column: Column) -> list[npt.NDArray[np.uint64]]:
    """Per row, the digest word(s) of a declared cell (:mod:`planner.data.backends.digest`): a
    function of the cell's normalised value under the column's kind only."""
    kind = column.kind
    if kind is ColumnKind.NUMERIC:
        x, parsed = parse_numbers(series)
        missing = _missing_mask(series) | (parsed & np.isnan(x))
        unparsed = ~parsed & ~missing
        if unparsed.any():
            tok = pc.utf8_lower(_arrow_text(series[unparsed]))
            na = _np_bool(pc.is_in(tok, value_set=pa.array(sorted(NUMERIC_NA_TOKENS))))
            missing[np.flatnonzero(unparsed)[na]] = True
        number = parsed & ~missing
        value = dg.double_bits(np.where(number, x, 0.0))
        tag = np.zeros(len(series), dtype=np.uint64)
        invalid = ~parsed & ~missing
        if invalid.any():
            tag[invalid] = canonical_words(series[invalid])
        tag[missing] = np.uint64(dg.T_MISS)
        return [value, tag]
    if kind is ColumnKind.BOOLEAN:
        codes = _canonical_codes(series, _BOOL_LOOKUP, -1, -2, lower=True)
        out = np.where(codes > 0, 1, 0).astype(np.uint64) ^ np.uint64(dg.T_BOOL)
        invalid = codes == -2
        if invalid.any():
            out[invalid] = canonical_words(series[invalid])
        out[codes == -1] = np.uint64(dg.T_MISS)
        return [np.asarray(out, dtype=np.uint64)]
    return [canonical_words(series)]


def table_digest(df: pd.DataFrame, schema: Schema) -> dg.ContentDigest:
    """The content digest of a table's declared columns (every row, before bounding)."""
    words: list[npt.NDArray[np.uint64]] = []
    for name in sorted(schema.names):
        words += cell_words(df[name], schema.column(name))
    h = dg.row_hashes(words) if len(df) else np.zeros(0, dtype=np.uint64)
    s1, s2 = dg.lane_sums(h)
    return dg.finish(schema.names, len(df), s1, s2)


def float_parts(x: FloatArray) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    """Exact integer parts of finite floats: x = s·(ih·2⁵³ + il + f1·2⁻⁵³ + f2·2⁻¹⁰⁶).

    Every operation is exact in IEEE double arithmetic (power-of-two scaling, ``floor``,
    Sterbenz subtraction), so SQL engines compute the same integers from the same value.
    Bits of |x| below 2⁻¹⁰⁶ (only present when |x| < 2⁻⁵³) are dropped: see
    :func:`truncate_tiny`. Requires |x| < 2⁶².

    Examples
    --------
    >>> [int(p[0]) for p in float_parts(np.array([-2.5]))]
    [-1, 0, 2, 4503599627370496, 0]
    """
    s = np.where(x < 0, -1, 1).astype(np.int64)
    a = np.abs(x)
    i = np.floor(a)
    f = a - i
    ih = np.floor(i / TWO53)
    il = i - ih * TWO53
    f53 = f * TWO53
    f1 = np.floor(f53)
    f2 = np.floor((f53 - f1) * TWO53)
    return s, ih.astype(np.int64), il.astype(np.int64), f1.astype(np.int64), f2.astype(np.int64)


def truncate_tiny(x: FloatArray) -> FloatArray:
    """x with the bits below 2⁻¹⁰⁶ dropped (toward zero): what :func:`float_parts` keeps."""
    tiny = np.abs(x) < 2.0**-53
    if not tiny.any():
        return x
    t = np.sign(x) * np.floor(np.abs(x) * 2.0**106) / 2.0**106
    return np.where(tiny, t, x)


def exact_sum(values: FloatArray) -> float:
    """The correctly rounded sum of :func:`truncate_tiny` (values), order-independent.

    Every backend returns this same float for the same multiset of clipped values
    (the SQL backends from exact integer sums of :func:`float_parts`, see
    :func:`sum_from_parts`), so float summation order never makes them differ. The
    result is the one :func:`math.fsum` returns (both are the correctly rounded exact
    sum), computed by :func:`_exact_sum_by_exponent` in a few vectorised passes.
    """
    x = truncate_tiny(np.asarray(values, dtype=np.float64))
    if x.size == 0:
        return 0.0
    head = x[:64]  # a float column usually shows a fraction at once: skip the full check
    if np.array_equal(head, np.floor(head)) and np.array_equal(x, np.floor(x)) \
            and float(np.abs(x).sum()) < TWO53:
        # integers with Σ|x| < 2⁵³: every partial sum is an exact integer (+ 0.0: no −0)
        return float(x.sum()) + 0.0
    return _exact_sum_by_exponent(x)


#: Rows per pass of :func:`_exact_sum_by_exponent`: 2²⁵ halves of at most 2²⁷ sum to
#: less than 2⁵³ in magnitude, so every float partial sum of a pass is an exact integer.
_EXACT_CHUNK = 1 << 25


def _exact_sum_by_exponent(x: FloatArray) -> float:
    """Σ x exactly, rounded once to the nearest float (ties to even); x finite.

    Notes
    -----
    Each x = m·2ᵉ with 0.5 ≤ |m| < 1 (``numpy.frexp``), so M = m·2⁵³ is an integer and
    x = M·2^(e−53). M splits exactly into h = ⌊m·2²⁶⌋ (|h| ≤ 2²⁶) and
    l = (m·2²⁶ − h)·2²⁷ ∈ [0, 2²⁷), both integers: M = h·2²⁷ + l (power-of-two scaling,
    ``floor`` and the subtraction of a float's integer part are exact). Per exponent e,
    Σh and Σl over at most 2²⁵ rows stay below 2⁵³ in magnitude, so ``numpy.bincount``'s
    float accumulation of them is exact whatever its order. The per-exponent integer
    sums are combined as Python integers (exact), and the one rounding is Python's
    correctly rounded int → float conversion or int / int division. Same result as
    :func:`math.fsum` (also correctly rounded; Shewchuk 1997), about five times faster
    on 10⁶ values.

    References
    ----------
    Shewchuk, J. R. (1997). Adaptive precision floating-point arithmetic and fast robust
    geometric predicates. Discrete & Computational Geometry 18, 305–363.
    """
    m, e = np.frexp(x)
    m *= 2.0**26  # in place (fresh arrays): t = m·2²⁶
    hi = np.floor(m)
    m -= hi
    m *= 2.0**27  # now l = (t − h)·2²⁷
    e0 = int(e.min())
    idx = (e - e0).astype(np.intp)
    total = 0
    for start in range(0, x.size, _EXACT_CHUNK):
        part = slice(start, start + _EXACT_CHUNK)
        hs = np.bincount(idx[part], weights=hi[part])
        ls = np.bincount(idx[part], weights=m[part])
        for k in np.flatnonzero((hs != 0) | (ls != 0)).tolist():
            total += ((int(hs[k]) << 27) + int(ls[k])) << k
    shift = e0 - 53
    return float(total << shift) if shift >= 0 else total / (1 << -shift)


def numeric_row_key(usable: BoolArray, values: FloatArray) -> list[str]:
    """Per row, the hash-key text of a conformed numeric cell ("x" when not usable)."""
    s, ih, il, f1, f2 = float_parts(np.where(usable, values, 0.0))
    out = []
    for ok, sg, a, b, c, d in zip(usable.tolist(), s.tolist(), ih.tolist(), il.tolist(),
                                  f1.tolist(), f2.tolist(), strict=True):
        out.append(f"{'-' if sg < 0 else ''}{a}:{b}:{c}:{d}" if ok else "x")
    return out


def row_key_parts(conf: Conformed, column: Column) -> list[str]:
    """Per row, the text that stands for one conformed cell in the bounding hash.

    The cell's status (:class:`Conformed` ``status``: 0 ok, 1 missing, 2 invalid, 3
    clipped) then ":", then: numeric: the exact parts of the clipped value
    (:func:`float_parts`) or "x"; categorical: the bin code (−1 for no bin); boolean:
    "0"/"1" or "x"; identifier (not the privacy unit): "1"/"0" (usable). Rows with the
    same key are alike for every query *and* every count of the column report, so the
    tie-break by position never changes a result. The SQL backends build the same text.
    """
    u = np.asarray(conf.usable, dtype=bool)
    if column.kind is ColumnKind.NUMERIC:
        body = numeric_row_key(u, np.asarray(conf.values, dtype=np.float64))
    elif column.kind is ColumnKind.CATEGORICAL:
        body = [str(v) for v in np.asarray(conf.values, dtype=np.int64).tolist()]
    elif column.kind is ColumnKind.BOOLEAN:
        v = np.asarray(conf.values, dtype=np.int64)
        body = [str(b) if ok else "x" for ok, b in zip(u.tolist(), v.tolist(), strict=True)]
    else:
        body = ["1" if ok else "0" for ok in u.tolist()]
    status = conf.status if conf.status is not None else np.where(u, 0, 1)
    return [f"{s}:{b}" for s, b in zip(np.asarray(status).tolist(), body, strict=True)]


def bound_contributions(df: pd.DataFrame, schema: Schema, salt: str | None = None) -> BoolArray:
    """Rows kept by contribution bounding: at most c per person, deterministic.

    A person is a canonical identifier (:func:`canonical_value`: "007" and 7 are the
    same person). The rows of a person with more than c rows are ordered by
    ``md5(salt_key | key(col₁) | key(col₂) | …)`` (hex), the key of each declared column
    being its *conformed* value (:func:`row_key_parts`, so the order never depends on
    how the file's column types were inferred), then by position, which only breaks
    ties between rows that are identical for every query; the first c are kept. The
    DuckDB and Spark backends compute the same md5 in SQL, so all three keep the same
    rows. The order of one person's rows never depends on another person's rows, so
    adding or removing a person leaves everyone else's kept rows unchanged.

    Raises
    ------
    DataError
        If the identifier column holds missing values.
    """
    n = len(df)
    unit = schema.unit
    if unit.column is None:
        return np.ones(n, dtype=bool)
    codes = identifier_codes(df[unit.column])
    null = int(np.count_nonzero(codes < 0))
    if null:
        raise DataError(
            f"identifier column {unit.column!r} has {null} row(s) with no value; every row "
            "must name its person. Fill them in or remove those rows."
        )
    c = unit.max_rows
    per_person = np.bincount(codes) if n else np.zeros(0, dtype=np.int64)
    if n == 0 or int(per_person.max()) <= c:
        return np.ones(n, dtype=bool)
    over = np.flatnonzero(per_person[codes] > c)  # rows of people over the bound
    sub = df.iloc[over]
    keys: list[list[str]] = [[salt_key(schema.salt if salt is None else salt)] * len(over)]
    for col in schema.columns:
        if col.name == unit.column or col.name not in df.columns:
            continue
        keys.append(row_key_parts(conform_column(sub[col.name], col), col))
    digests = [hashlib.md5("|".join(parts).encode("utf-8")).digest() for parts in zip(*keys, strict=True)]
    raw = np.frombuffer(b"".join(digests), dtype=">u8").reshape(-1, 2)
    hi, lo = raw[:, 0].astype(np.uint64), raw[:, 1].astype(np.uint64)
    oc = codes[over]
    order = np.lexsort((over, lo, hi, oc))
    sc = oc[order]
    start = np.r_[True, sc[1:] != sc[:-1]]
    m = len(over)
    first = np.maximum.accumulate(np.where(start, np.arange(m), 0))
    rank = np.arange(m) - first
    keep = np.ones(n, dtype=bool)
    keep[over[order]] = rank < c
    return keep


class PandasBackend(Backend):
    """Exact aggregates of a pandas DataFrame under a schema.

    Parameters
    ----------
    df : pandas.DataFrame
        The private table (every declared column must be present).
    schema : Schema
        The declaration.
    salt : str or None
        Overrides ``schema.salt`` for the contribution-bounding hash.
    label : str or None
        The file the table was read from (named in messages).

    Raises
    ------
    DataError
        If a declared column is absent or holds nested values, or the identifier column
        has missing values.

    Examples
    --------
    >>> from planner.data.requests import ClippedSum
    >>> from planner.data.schema import Column, ColumnKind, MissingRule, Schema
    >>> s = Schema((Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),))
    >>> b = PandasBackend(pd.DataFrame({"age": [30, 150, None]}), s)
    >>> b.result(ClippedSum("age"))
    SumAggregate(value=130.0, n=2, clipped=1, dropped=1)
    """

    counts_keys: ClassVar[bool] = True

    def __init__(self, df: pd.DataFrame, schema: Schema, salt: str | None = None, *,
                 label: str | None = None) -> None:
        absent = absent_columns(schema.names, [str(c) for c in df.columns], label)
        if absent is not None:
            raise absent
        nested = nested_columns(df, schema.names)
        if nested:
            raise nested_column(label, nested[0])
        self.schema = schema
        self._all = df
        keep = bound_contributions(df, schema, salt)
        self._truncated = int(len(df) - keep.sum())
        self._df = df.loc[keep, list(schema.names)].reset_index(drop=True) if self._truncated \
            else df[list(schema.names)]
        self._cache: dict[str, Conformed] = {}
        self._sorted: dict[str, FloatArray] = {}
        self._digest: dg.ContentDigest | None = None
        self._whole = True  # False in a group's view: keys are counted over the whole table only

    @property
    def rows(self) -> int:
        return len(self._df)

    @property
    def rows_truncated(self) -> int:
        return self._truncated

    def conformed(self, column: str) -> Conformed:
        """The conformed column (cached)."""
        if column not in self._cache:
            col = self.schema.column(column)
            self._cache[column] = conform_column(self._df[column], col)
        return self._cache[column]

    def _usable_sorted(self, column: str) -> FloatArray:
        """The usable conformed values of a numeric column, sorted (cached).

        Counting them on a grid is then one ``searchsorted`` of the grid (k lookups) in
        place of one of every value (n lookups): the same comparisons, so the same
        counts, in a fraction of the time (a quantile reads two grids of one column).
        """
        if column not in self._sorted:
            conf = self.conformed(column)
            x = np.asarray(conf.values, dtype=np.float64)
            if conf.stats.usable != x.size:
                x = x[conf.usable]
            self._sorted[column] = np.sort(x)
        return self._sorted[column]

    # ------------------------------------------------------------------ the evaluator
    def evaluate(self, requests: Sequence[Request[Any]]) -> tuple[Result, ...]:
        """Each request walked on the conformed arrays (a mask, a ``bincount`` or a
        ``searchsorted`` each)."""
        for r in requests:
            r.validate(self.schema)
        return tuple(self._evaluate(r) for r in requests)

    def _evaluate(self, r: Request[Any]) -> Result:
        if isinstance(r, rq.Count):
            return self._count(r.column, r.where)
        if isinstance(r, rq.ClippedSum):
            return self._clipped_sum(r.column)
        if isinstance(r, rq.Bins):
            return self._bins(r)
        if isinstance(r, rq.Candidates):
            return self._candidates(r)
        if isinstance(r, rq.Booleans):
            return self._booleans(r.column)
        if isinstance(r, rq.Keys):
            return self._keys(r.column)
        if isinstance(r, rq.Stats):
            return self.conformed(r.column).stats
        if isinstance(r, rq.Grouped):
            return self._grouped(r)
        if isinstance(r, rq.Marginals):
            return self._marginals(r)
        raise rq.unknown(r)

    def _predicate_mask(self, p: Predicate) -> BoolArray:
        col = self.schema.column(p.column)
        conf = self.conformed(p.column)
        v = conf.values
        op = p.op
        m: BoolArray
        if col.kind is ColumnKind.NUMERIC:
            x = np.asarray(v, dtype=np.float64)
            consts = np.asarray([float(c) for c in p.values], dtype=np.float64)
            k = float(consts[0])
            if op is PredicateOp.IN:
                m = np.isin(x, consts)
            else:
                m = np.asarray(_NUMERIC_OPS[op](x, k), dtype=np.bool_)
        elif col.kind in (ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN):
            wanted = p.codes(col)
            codes = np.asarray(v, dtype=np.int64)
            if op is PredicateOp.EQ:
                m = codes == wanted[0]
            elif op is PredicateOp.NE:
                m = codes != wanted[0]
            elif op is PredicateOp.IN:
                m = np.isin(codes, wanted)
            else:
                raise QueryError(f"operator {op.value!r} does not apply to column {col.name!r}.")
        else:
            raise QueryError(f"a predicate on identifier column {col.name!r} is not allowed.")
        return m & conf.usable

    def _count(self, column: str | None, predicate: Predicate | None) -> CountAggregate:
        usable = np.ones(self.rows, dtype=bool)
        if column is not None:
            usable &= ~self.conformed(column).dropped
        if predicate is not None:
            usable &= ~self.conformed(predicate.column).dropped
        dropped = int(self.rows - usable.sum())
        m = usable if predicate is None else usable & self._predicate_mask(predicate)
        return CountAggregate(int(np.count_nonzero(m)), dropped)

    def _keys(self, column: str) -> KeyCounts:
        if not self.counts_keys or not self._whole:
            raise refuse_keys(self)
        conf = self.conformed(column)
        series = self._df[column][conf.usable]
        uniques, idx = _factorize(series)
        labels = [key_label(u) for u in uniques]
        per_unique = np.bincount(idx[idx >= 0], minlength=len(uniques))
        counts: dict[str, int] = {}
        for lab, n in zip(labels, per_unique.tolist(), strict=True):
            if lab is not None and lab != "" and n:
                counts[lab] = counts.get(lab, 0) + int(n)
        keys = tuple(sorted(counts))
        return KeyCounts(keys, tuple(counts[k] for k in keys), conf.stats.dropped)

    def _clipped_sum(self, column: str) -> SumAggregate:
        conf = self.conformed(column)
        vals = np.asarray(conf.values, dtype=np.float64)
        if conf.stats.usable != vals.size:
            vals = vals[conf.usable]
        return SumAggregate(
            exact_sum(vals), int(vals.size), conf.stats.clipped, conf.stats.dropped
        )

    def _bins(self, r: rq.Bins) -> BinCounts:
        col = self.schema.column(r.column)
        conf = self.conformed(r.column)
        labels = r.labels(col)
        if r.edges is not None:
            e = np.asarray(r.edges, dtype=np.float64)
            xs = self._usable_sorted(r.column)
            # bin i = [e_i, e_{i+1}), the last one closed: #{x < e_{i+1}} − #{x < e_i}
            below = np.searchsorted(xs, e, side="left")
            below[-1] = np.searchsorted(xs, e[-1], side="right")
            counts = np.diff(below)
            return BinCounts(
                labels, tuple(int(c) for c in counts), r.edges,
                int(xs.size - (below[-1] - below[0])), conf.stats.dropped,
            )
        codes = np.asarray(conf.values, dtype=np.int64)[conf.usable]
        counts = np.bincount(codes, minlength=len(labels))
        unbinned = int(conf.stats.invalid if col.kind is ColumnKind.CATEGORICAL and not col.other_bin else 0)
        return BinCounts(labels, tuple(int(c) for c in counts), None, unbinned, conf.stats.dropped)

    def _candidates(self, r: rq.Candidates) -> QuantileAggregate:
        grid = np.asarray(r.grid, dtype=np.float64)
        conf = self.conformed(r.column)
        if np.all(np.isfinite(grid)):
            # the values counted at t_i are those with t_{i−1} < x ≤ t_i (every clipped x ≤ U ≤ t_k)
            counts = np.diff(np.searchsorted(self._usable_sorted(r.column), grid, side="right"), prepend=0)
        else:
            x = np.asarray(conf.values, dtype=np.float64)[conf.usable]
            counts = np.bincount(np.searchsorted(grid, x, side="left"), minlength=grid.size)
        return QuantileAggregate(r.grid, tuple(int(c) for c in counts), conf.stats.dropped)

    def _booleans(self, column: str) -> BooleanCounts:
        conf = self.conformed(column)
        v = np.asarray(conf.values)
        if conf.stats.usable != v.size:
            v = v[conf.usable]
        t = int(np.count_nonzero(v))
        return BooleanCounts(t, int(v.size - t), conf.stats.dropped)

    def _bin_codes(self, column: str, edges: tuple[float, ...] | None) -> tuple[IntArray, BoolArray]:
        """Each row's bin of ``column`` (a category's index, 0 / 1, or the numeric bin of
        ``edges`` as :meth:`_bins` counts it) and whether it has one."""
        conf = self.conformed(column)
        if edges is None:
            codes = np.asarray(conf.values, dtype=np.int64)
            return codes, np.asarray(conf.usable & (codes >= 0), dtype=np.bool_)
        e = np.asarray(edges, dtype=np.float64)
        x = np.asarray(conf.values, dtype=np.float64)
        idx = np.searchsorted(e, x, side="right") - 1
        idx[x == e[-1]] = e.size - 2  # the last bin is closed
        ok = conf.usable & (idx >= 0) & (idx < e.size - 1)
        return np.asarray(idx, dtype=np.int64), np.asarray(ok, dtype=np.bool_)

    def _marginals(self, r: rq.Marginals) -> rq.MarginalTables:
        """Every 1- and 2-way table over the rows complete in all the columns: one
        ``bincount`` of the cells' flat index per table."""
        sizes = r.sizes(self.schema)
        complete = np.ones(self.rows, dtype=bool)
        codes = []
        for name, e in zip(r.columns, r.edges, strict=True):
            c, ok = self._bin_codes(name, e)
            codes.append(c)
            complete &= ok
        kept = [c[complete] for c in codes]
        tables = []
        for clique in r.cliques:
            shape = tuple(sizes[j] for j in clique)
            flat = kept[clique[0]] if len(clique) == 1 else np.ravel_multi_index(tuple(kept[j] for j in clique), shape)
            counts = np.bincount(flat, minlength=int(np.prod(shape)))
            tables.append(tuple(int(v) for v in counts))
        n = int(np.count_nonzero(complete))
        return rq.MarginalTables(r.columns, sizes, r.cliques, tuple(tables), n, self.rows - n)

    def _grouped(self, r: rq.Grouped) -> GroupResults:
        """Each group's requests on a view of the (bounded) rows in the group: the rows
        whose usable codes of the ``by`` columns are the group's."""
        cols = [self.conformed(name) for name in r.by]
        out: list[tuple[Result, ...]] = []
        for codes in r.codes(self.schema):
            mask = np.ones(self.rows, dtype=bool)
            for conf, code in zip(cols, codes, strict=True):
                mask &= conf.usable & (np.asarray(conf.values, dtype=np.int64) == code)
            view = self._view(mask)
            out.append(tuple(view._evaluate(inner) for inner in r.requests))
        return GroupResults(r.labels(self.schema), tuple(out))

    def _view(self, mask: BoolArray) -> PandasBackend:
        """The rows (already contribution-bounded) where ``mask`` holds, as a backend."""
        view = object.__new__(type(self))
        view.schema = self.schema
        view._truncated = 0
        view._df = self._df.loc[mask].reset_index(drop=True)
        view._cache = {}
        view._sorted = {}
        view._whole = False
        return view

    def content_digest(self) -> dg.ContentDigest:
        """:func:`table_digest` of every row (before contribution bounding)."""
        if self._digest is None:
            self._digest = table_digest(self._all, self.schema)
        return self._digest
