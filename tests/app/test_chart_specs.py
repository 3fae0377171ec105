"""The main pages draw their charts through ``pages._ui.charts.draw``, which writes the
Vega-Lite spec without Altair's JSON-schema validation (``charts.Unvalidated``: the validation
was 60-70% of a chart's conversion on every run). The validation is done here instead, on the
charts the pages really draw: every chart drawn on the Planner, the Accuracy page (every census
query, the simulation check included), the Release page (a release of the census workload),
the Ledger, every Learn page and the Training page is valid Vega-Lite, and its spec is the same
with and without the validation."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pages._ui import charts  # noqa: E402
from pages._ui import state as S  # noqa: E402
from tests.app.test_pages import set_lifetime  # noqa: E402


@pytest.fixture(autouse=True)
def _ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def _spec(chart: Any, validate: bool) -> str:
    import altair as alt

    with alt.theme.enable("none"):  # as Streamlit converts (its own theme applies in the browser)
        return json.dumps(chart.to_dict(validate=validate), sort_keys=True, default=str)


def test_every_chart_the_main_pages_draw_is_valid_and_unchanged_by_skipping_the_validation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[tuple[str, Any]] = []
    page = ["start"]
    made = charts.Unvalidated.__init__

    def record(self: charts.Unvalidated, chart: Any) -> None:
        drawn.append((page[0], chart))
        made(self, chart)

    monkeypatch.setattr(charts.Unvalidated, "__init__", record)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    page[0] = "planner"
    at.switch_page("pages/plan_page.py").run()
    at.switch_page("pages/accuracy_page.py").run()
    at.toggle(key=S.widget_key(S.ACC_DATA_VIEW, "accuracy")).set_value(True).run()  # the owner's data views too
    for row in S.CENSUS_WORKLOAD:
        page[0] = f"accuracy {row['kind']}"
        at.session_state[S.ACC_QUERY] = row["id"]
        at.switch_page("pages/accuracy_page.py").run()
        assert not at.exception, [e.value for e in at.exception]
    page[0] = "accuracy simulation"
    at.button(key="acc_simulate").click().run()
    page[0] = "release"
    at.switch_page("pages/release_page.py").run()
    page[0] = "release preview"
    set_lifetime(at, "release", 3.0)
    page[0] = "release"
    at.session_state[S.CONFIRMED] = True
    at.run()
    assert any("Released" in s.value for s in at.success), [e.value for e in at.error]
    page[0] = "ledger"
    at.switch_page("pages/ledger_page.py").run()
    assert not at.exception, [e.value for e in at.exception]

    where = {p.split()[0] for p, _ in drawn}
    assert {"planner", "accuracy", "release", "ledger"} <= where, where
    assert any(p == "accuracy simulation" for p, _ in drawn)
    # the owner's views of the median (quantile check) and the mode (probability of the true mode)
    assert any(p == "accuracy median" for p, _ in drawn) and any(p == "accuracy mode" for p, _ in drawn)
    # the release of the census workload: an answer chart per query but the mode (a category:
    # its card has no chart), 6 of the 7 queries
    assert sum(p == "release" for p, _ in drawn) == len(S.CENSUS_WORKLOAD) - 1
    # before it, the lifetime budget's bar (spent before, this release, left afterwards)
    assert sum(p == "release preview" for p, _ in drawn) >= 1
    for p, chart in drawn:
        checked = _spec(chart, validate=True)  # raises on a spec that is not valid Vega-Lite
        assert checked == _spec(chart, validate=False), p


LEARN_AND_TRAINING = [*sorted(p.name for p in (ROOT / "pages").glob("learn_*.py")), "training_page.py"]


@pytest.mark.parametrize("name", LEARN_AND_TRAINING)
def test_every_chart_of_the_learn_and_training_pages_is_valid_and_drawn_unvalidated(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Their charts go through ``charts.draw`` too (they were validated on every slider step):
    each one the page draws is recorded, valid, and the same spec either way; and the page
    draws nothing else (as many Vega-Lite elements as recorded charts)."""
    drawn: list[Any] = []
    made = charts.Unvalidated.__init__

    def record(self: charts.Unvalidated, chart: Any) -> None:
        drawn.append(chart)
        made(self, chart)

    monkeypatch.setattr(charts.Unvalidated, "__init__", record)
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=120).run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    assert drawn and len(drawn) == len(at.get("vega_lite_chart")), name
    for chart in drawn:
        assert _spec(chart, validate=True) == _spec(chart, validate=False), name
