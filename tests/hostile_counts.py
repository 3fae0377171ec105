"""Counts of hostile inputs tried and faults injected, printed at the end of a test run.

A test marked ``@pytest.mark.hostile(n)`` or ``@pytest.mark.fault(n)`` counts ``n``
inputs (default 1, per parametrised case); a property-based test calls
:func:`tried` once per generated example instead. The summary (``tests/conftest.py``)
counts an input as *passed* when the test that tried it passed.
"""

from __future__ import annotations

CURRENT: dict[str, int] = {"hostile": 0, "fault": 0}
TOTALS: dict[str, dict[str, int]] = {
    "hostile": {"tried": 0, "passed": 0},
    "fault": {"tried": 0, "passed": 0},
}


def tried(kind: str, n: int = 1) -> None:
    """Record ``n`` inputs of ``kind`` (``hostile`` or ``fault``) tried by the running test."""
    CURRENT[kind] += n
