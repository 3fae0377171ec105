"""The Release page shows, before the click, the lifetime budget as one bar: spent before,
this release, left afterwards, with the lifetime total as a rule. The bar must read the same
numbers as the metrics beside it (both come from the ledger's own preview), and a release
that does not fit must show its part past the total, not a "left afterwards" part."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pages._ui import charts, fmt  # noqa: E402
from pages._ui import state as S  # noqa: E402
from tests.app.test_pages import set_lifetime  # noqa: E402


@pytest.fixture(autouse=True)
def _ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


@pytest.fixture
def bars(monkeypatch: pytest.MonkeyPatch) -> list[tuple[pd.DataFrame, float]]:
    seen: list[tuple[pd.DataFrame, float]] = []
    made = charts.budget_bar

    def record(df: pd.DataFrame, total: float) -> Any:
        seen.append((df.copy(), total))
        return made(df, total)

    monkeypatch.setattr(charts, "budget_bar", record)
    return seen


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _parts(df: pd.DataFrame) -> dict[str, float]:
    return {str(p): float(e) for p, e in zip(df["part"], df["epsilon"], strict=True)}


def test_the_bar_reads_the_metrics_numbers_before_and_after_a_first_spend(bars: list[Any]) -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    at.switch_page("pages/plan_page.py").run()
    at.number_input(key=S.widget_key(S.EPSILON, "planner")).set_value(1.0).run()
    at.switch_page("pages/release_page.py").run()
    assert not bars  # no lifetime budget yet: no bar, the form instead
    set_lifetime(at, "release", 3.0, rule="basic")  # basic composition: the parts add up to the total
    df, total = bars[-1]
    parts, shown = _parts(df), _metrics(at)
    assert total == 3.0  # the lifetime ε just set
    # nothing spent yet: no "spent before" part
    assert set(parts) == {"this release", "left afterwards"}
    assert fmt.eps(parts["this release"]) == shown["This release"]
    assert fmt.eps(parts["left afterwards"]) == shown["Remaining afterwards"]
    assert parts["this release"] + parts["left afterwards"] == pytest.approx(3.0)
    first = parts["this release"]

    at.session_state[S.CONFIRMED] = True
    at.run()
    assert any("Released" in s.value for s in at.success), [e.value for e in at.error]
    # a new plan (ε 1.5) on the Planner, then back: the first release spent, this one more, the rest left
    at.switch_page("pages/plan_page.py").run()
    at.number_input(key=S.widget_key(S.EPSILON, "planner")).set_value(1.5).run()
    at.switch_page("pages/release_page.py").run()
    df, total = bars[-1]
    parts, shown = _parts(df), _metrics(at)
    assert list(df["part"]) == list(charts.BUDGET_PARTS)
    assert fmt.eps(parts["spent before"]) == shown["Spent so far"]
    assert fmt.eps(parts["this release"]) == shown["This release"]
    assert fmt.eps(parts["left afterwards"]) == shown["Remaining afterwards"]
    assert parts["spent before"] == pytest.approx(first)  # what the first preview said it would cost
    assert parts["this release"] > first  # a larger ε than the first plan's
    assert sum(parts.values()) == pytest.approx(3.0)  # basic: spent + this release + left = the total

    # a plan that does not fit (ε 2.5, more than is left): no "left afterwards", the release past the rule
    at.switch_page("pages/plan_page.py").run()
    at.number_input(key=S.widget_key(S.EPSILON, "planner")).set_value(2.5).run()
    at.switch_page("pages/release_page.py").run()
    df, total = bars[-1]
    parts = _parts(df)
    assert set(parts) == {"spent before", "this release"}
    assert parts["spent before"] + parts["this release"] > total
    assert any("short by" in e.value for e in at.error), [e.value for e in at.error]  # the refusal, in words
