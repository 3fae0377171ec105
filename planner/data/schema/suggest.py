"""A suggested kind per column, for the owner's convenience only.

:func:`suggest_kinds` looks at a loaded table's dtypes and distinct counts and returns
*kinds* only, never bounds or categories: those are public declarations the owner makes
(:mod:`planner.data.schema.column`). :func:`suggest_whole_numbers` says which numeric columns
hold whole numbers, a type like the kind.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from planner.data.schema.column import FALSE_TOKENS, TRUE_TOKENS, ColumnKind

if TYPE_CHECKING:  # imported by suggest_kinds only: the CLI starts without pandas
    import pandas as pd

_ID_NAME = re.compile(r"(^id$|_id$|^id_|identifier|uuid)", re.IGNORECASE)


#: Text that files use for "no value" ("?" in the UCI files, "NA", "-"): not counted
#: against a column being numeric when kinds are suggested.
_NO_VALUE_TOKENS = frozenset({"", "?", "-", ".", "na", "n/a", "nan", "null", "none"})


def _mostly_numbers(values: pd.Series) -> bool:
    """More than 95% of the values that are not a "no value" marker parse as numbers."""
    import pandas as pd

    text = values.astype(str).str.strip()
    present = values[~text.str.lower().isin(_NO_VALUE_TOKENS)]
    return len(present) > 0 and bool(pd.to_numeric(present, errors="coerce").notna().mean() > 0.95)


def suggest_kinds(df: pd.DataFrame, max_categories: int = 50) -> dict[str, ColumnKind]:
    """Suggest a kind per column, for the owner's convenience only.

    Looks at dtypes and distinct counts; returns kinds only, never bounds or categories
    (those are public declarations the owner makes).

    Parameters
    ----------
    df : pandas.DataFrame
        The loaded table.
    max_categories : int
        A text column with at most this many distinct values is suggested categorical.

    Returns
    -------
    dict of str to ColumnKind

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"person_id": [1, 2], "age": [30, 40.5], "ok": [True, False]})
    >>> {k: v.value for k, v in suggest_kinds(df).items()}
    {'person_id': 'identifier', 'age': 'numeric', 'ok': 'boolean'}
    """
    import pandas as pd

    out: dict[str, ColumnKind] = {}
    for name in df.columns:
        s = df[name]
        key = str(name)
        nonnull = s.dropna()
        if pd.api.types.is_bool_dtype(s.dtype):
            out[key] = ColumnKind.BOOLEAN
            continue
        nunique = int(nonnull.nunique())
        unique_ids = len(nonnull) > 0 and nunique == len(nonnull)
        if _ID_NAME.search(key) and (unique_ids or nunique > max_categories):
            out[key] = ColumnKind.IDENTIFIER
            continue
        if pd.api.types.is_numeric_dtype(s.dtype):
            if nunique <= 2 and set(nonnull.unique().tolist()) <= {0, 1}:
                out[key] = ColumnKind.BOOLEAN
            else:
                out[key] = ColumnKind.NUMERIC
            continue
        tokens = set(nonnull.astype(str).str.strip().str.lower().unique().tolist())
        if tokens and tokens <= (TRUE_TOKENS | FALSE_TOKENS) and len(tokens) <= 2:
            out[key] = ColumnKind.BOOLEAN
        elif _mostly_numbers(nonnull):
            out[key] = ColumnKind.NUMERIC
        elif nunique <= max_categories:
            out[key] = ColumnKind.CATEGORICAL
        elif unique_ids:
            out[key] = ColumnKind.IDENTIFIER  # every value once: one per person, most likely
        else:
            out[key] = ColumnKind.KEY  # many values, repeated (a city, a product): keys not listed
    return out


def suggest_whole_numbers(df: pd.DataFrame, kinds: dict[str, ColumnKind] | None = None) -> frozenset[str]:
    """The columns suggested numeric whose values that read as numbers are all whole numbers
    (an integer column, a CSV column of integers with empty cells, text such as "42"), for
    the owner's convenience only, like the kinds: the owner ticks or unticks "whole numbers"
    and saves.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [30, 41, 52], "kids": ["1", "", "3"], "hours": [37.5, 40.0, 8.0],
    ...                    "ok": [True, False, True]})
    >>> sorted(suggest_whole_numbers(df))
    ['age', 'kids']
    """
    import numpy as np
    import pandas as pd

    kinds = suggest_kinds(df) if kinds is None else kinds
    out: set[str] = set()
    for name in df.columns:
        key = str(name)
        if kinds.get(key) is not ColumnKind.NUMERIC:
            continue
        s = df[name]
        if pd.api.types.is_integer_dtype(s.dtype):
            out.add(key)
            continue
        if not pd.api.types.is_numeric_dtype(s.dtype):
            s = pd.to_numeric(s.astype(str).str.strip(), errors="coerce")
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        v = v[np.isfinite(v)]
        if v.size and bool(np.all(v == np.floor(v))):
            out.add(key)
    return frozenset(out)
