"""Spreadsheet-safe CSV cells for every CSV the engine exports.

A spreadsheet opening a CSV treats a cell that starts with ``=``, ``+``, ``-``, ``@``, a
tab or a carriage return as a formula (CSV / formula injection, OWASP). Text cells that
start so are written with a leading apostrophe, which spreadsheets show as text and do not
evaluate. Numbers stay numbers: an ``int`` or ``float`` (``-3.2`` included) and text that is
a plain decimal number are written unchanged.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

__all__ = ["FORMULA_PREFIXES", "csv_text", "safe_cell"]

#: First characters a spreadsheet may evaluate.
FORMULA_PREFIXES: Final = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER: Final = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """The cell as written: numbers unchanged, formula-like text prefixed with ``'``.

    Examples
    --------
    >>> [safe_cell(v) for v in (-3.5, "=1+1", "-2", "@SUM(A1)", "ok", None)]
    [-3.5, "'=1+1", '-2', "'@SUM(A1)", 'ok', None]
    """
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    if text.startswith(FORMULA_PREFIXES) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """CSV text (``\\n`` line ends) whose every cell went through :func:`safe_cell`."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([safe_cell(h) for h in header])
    for row in rows:
        w.writerow([safe_cell(v) for v in row])
    return buf.getvalue()
