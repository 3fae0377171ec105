"""One boundary for names: what a column name, a category label, a query id, a dataset or
an account name may hold.

A name is shown on pages, written into reports, charts, CSV files, generated scripts and
notebooks, and stored in the ledger. A control character in one (a NUL, an escape, a form
feed) or a code point that is no character at all (U+FFFE) has no meaning there, and some
renderers abort the whole process on one (the chart renderer did). So names are checked
once, where they enter: every character must be printable in Python's sense
(:meth:`str.isprintable`: not a control, format, surrogate, private-use or unassigned code
point, and no separator but the plain space). The message names the field and the
position of the first bad character, never the rest of the name.

Data values themselves are not names: they are kept as they are, and anything that shows
one escapes it first (:func:`shown`).
"""

from __future__ import annotations

import unicodedata
from typing import Any, Final

from planner.core.errors import PlannerError

__all__ = ["LAYOUT", "MAX_NAME_CHARS", "bad_character", "check_name", "shown"]

#: Longest name accepted anywhere.
MAX_NAME_CHARS: Final = 200


#: Line breaks and tabs a name read from a file's header may hold (a quoted CSV header can
#: hold a line break): every renderer here writes them as spaces, so they are kept.
LAYOUT: Final = frozenset("\t\n\r\u2028\u2029")


def bad_character(text: str, *, layout: bool = False) -> int | None:
    """The index of the first character a name may not hold, or ``None`` (with ``layout``,
    the line breaks and tabs of :data:`LAYOUT` are allowed).

    Examples
    --------
    >>> bad_character("age group"), bad_character("a\\x00b"), bad_character("x\\ufffe")
    (None, 1, 1)
    >>> bad_character("income\\n(EUR)"), bad_character("income\\n(EUR)", layout=True)
    (6, None)
    """
    for i, c in enumerate(text):
        if c != " " and not c.isprintable() and not (layout and c in LAYOUT):
            return i
    return None


def _describe(c: str) -> str:
    name = unicodedata.name(c, "")
    return f"U+{ord(c):04X}" + (f" ({name.lower()})" if name else "")


def check_name(value: Any, field: str, *, error: type[PlannerError] = PlannerError,
               max_chars: int = MAX_NAME_CHARS, layout: bool = False) -> str:
    """``value`` if it is a usable name; otherwise ``error`` naming ``field`` and the fix.
    ``layout``: also accept line breaks and tabs (:data:`LAYOUT`), for names that come from
    a file's header (column names, category labels).

    Examples
    --------
    >>> check_name("income", "column name")
    'income'
    >>> check_name("in\\x1bcome", "column name")
    Traceback (most recent call last):
    ...
    planner.core.errors.PlannerError: column name holds an unprintable character (U+001B) at position 3; names may hold printable characters and spaces only. Rename it without control characters.
    """
    if not isinstance(value, str):
        raise error(f"{field} must be text; got {type(value).__name__}.")
    if not value.strip():
        raise error(f"{field} is empty; give it a name.")
    if len(value) > max_chars:
        raise error(f"{field} has {len(value)} characters; at most {max_chars} are accepted.")
    i = bad_character(value, layout=layout)
    if i is not None:
        raise error(
            f"{field} holds an unprintable character ({_describe(value[i])}) at position {i + 1}; "
            "names may hold printable characters and spaces only. Rename it without control characters."
        )
    return value


def shown(text: str) -> str:
    """``text`` with every unprintable character written as ``\\uXXXX`` (for showing data
    values, which are kept as they are, in places that cannot hold such characters).

    Examples
    --------
    >>> shown("a\\x00b\\tc")
    'a\\\\u0000b\\\\u0009c'
    """
    return "".join(c if c == " " or c.isprintable() else f"\\u{ord(c):04x}" for c in text)
