"""Issue 31: the Planner made faster plans exactly what main planned, bit for bit.

The stored file ``tests/fixtures/identity/planner_main_1c149e4.json`` was written by
``tests/benchmarks/planner_identity.py dump`` on main at commit 1c149e4 (before the ε-change
speed-ups): 90 plans (3 documents × 3 modes × 2 ε × 5 rules; θ and used ε as ``float.hex``
and the plan hash, or the engine's refusal) and 18 rule comparisons (``compare_spec``'s JSON).
This checkout must reproduce every one of them exactly: a saved PLAN.json's hash identifies a
release for retries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.planner_identity import differences

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "identity" / "planner_main_1c149e4.json"


@pytest.mark.slow
def test_plans_and_comparisons_identical_to_main() -> None:
    stored = json.loads(STORED.read_text())
    assert len(stored["plans"]) == 90 and len(stored["comparisons"]) == 18
    assert differences(stored) == []
