"""The cell-reading rules every backend shares (numbers, NA tokens, canonical values, booleans).

Pure Python and numpy only: the SQL backends compile these rules into SQL and must not
import pandas to do so (the command line starts faster without it). The pandas backend
applies them to DataFrames (:mod:`planner.data.backends.pandas_backend`).
"""

from __future__ import annotations

import hashlib
import math
import re
from fractions import Fraction
from typing import Final

import numpy as np

from planner.core.errors import DataError
from planner.data.schema import FALSE_TOKENS, TRUE_TOKENS, Column

#: Text tokens read as missing in a numeric column (case-insensitive, stripped).
NUMERIC_NA_TOKENS: Final[frozenset[str]] = frozenset({"nan", "na", "n/a", "null", "none", "-nan", "+nan"})

_NUMBER_RE = r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|(?i:inf|infinity|nan))"
_NUMBER = re.compile(rf"^{_NUMBER_RE}$")
_INT = re.compile(r"^[+-]?\d+$")

TWO53: Final[float] = 2.0**53
#: Clipped values of this magnitude or more cannot be summed exactly by the SQL backends.
MAX_EXACT_ABS: Final[float] = 2.0**62


def canonical_value(v: object) -> str | None:
    """The canonical string of one cell (``None`` for a missing cell).

    Stripped text, except numbers, written the same whatever their type: integers
    without sign or leading zeros ("+007", 7 and 7.0 → "7"), other finite numbers in
    shortest form ("2.50" → "2.5"), ±inf as "inf" / "-inf", NaN as missing.

    Examples
    --------
    >>> [canonical_value(v) for v in ["+007", 7.0, " 2.50 ", True, "A", float("nan")]]
    ['7', '7', '2.5', 'True', 'A', None]
    """
    if v is None or type(v).__name__ == "NAType":  # pandas.NA, without importing pandas
        return None
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        x = float(v)
    else:
        text = str(v).strip()
        if _INT.match(text):
            return str(int(text))
        if not _NUMBER.match(text):
            return text
        x = float(text)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == math.floor(x) and abs(x) < 2.0**53:
        return str(int(x))
    return repr(x)


def _canonical_categories(column: Column) -> dict[str, int]:
    """Canonical value → index of a column's declared categories.

    Raises
    ------
    DataError
        Two declared categories denote the same value (e.g. '1' and '1.0').
    """
    lookup: dict[str, int] = {}
    for i, c in enumerate(column.categories or ()):
        key = canonical_value(c)
        if key is None or key in lookup:
            raise DataError(
                f"column {column.name!r}: two declared categories denote the same value "
                "(e.g. '1' and '1.0'); keep one of them."
            )
        lookup[key] = i
    return lookup


#: Lower-cased canonical boolean tokens → 1 (true) / 0 (false).
_BOOL_LOOKUP: dict[str, int] = {
    **{t.lower(): 1 for t in TRUE_TOKENS if canonical_value(t) == t},
    **{t.lower(): 0 for t in FALSE_TOKENS if canonical_value(t) == t},
}


def sum_from_parts(ih: int, il: int, f1: int, f2: int) -> float:
    """The correctly rounded float of Σ s·(ih·2⁵³ + il + f1·2⁻⁵³ + f2·2⁻¹⁰⁶) (signed sums)."""
    num = ((ih * 2**53 + il) * 2**53 + f1) * 2**53 + f2
    return float(Fraction(num, 2**106))


def salt_key(salt: str) -> str:
    """The 16-character hash key derived from a schema salt (prefix of every row's hash input)."""
    return hashlib.sha256(salt.encode("utf-8")).hexdigest()[:16]


__all__ = [
    "MAX_EXACT_ABS",
    "NUMERIC_NA_TOKENS",
    "TWO53",
    "canonical_value",
    "salt_key",
    "sum_from_parts",
]
