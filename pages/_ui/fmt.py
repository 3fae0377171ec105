"""Number formatting for display (no arithmetic beyond rounding for the eye)."""

from __future__ import annotations

import math
from typing import Any


def eps(value: float) -> str:
    """A budget for display: 4 significant digits, and 0 for float dust (|x| < 1e-9)."""
    return "0" if abs(value) < 1e-9 else f"{value:.4g}"


def value(v: Any) -> str:
    """A released value for a table: numbers to 6 significant digits, text as is."""
    if isinstance(v, bool) or v is None:
        return "" if v is None else str(v)
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(x):
        return str(x)
    return f"{x:,.0f}" if abs(x) >= 1e6 else f"{x:,.6g}"
