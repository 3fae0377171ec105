"""AppTest checks of the "Learn" demo pages: each renders standalone and "Run again" reruns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

PAGES = Path(__file__).resolve().parents[2] / "pages"

# page file -> seed-control prefix (every page has a seed input and a "Run again" button)
LEARN_PAGES = {
    "learn_randomized_response.py": "rr",
    "learn_attacker.py": "atk",
    "learn_laplace_count.py": "lc",
    "learn_averaging.py": "avg",
    "learn_majority.py": "maj",
    "learn_histogram.py": "hist",
    "learn_composition.py": "comp",
}

_OUTPUT_TYPES = {"vega_lite_chart", "metric", "markdown", "caption", "dataframe", "arrow_data_frame"}


def _outputs(at: AppTest) -> list[str]:
    """Everything the page shows (charts' Vega-Lite specs and data, metrics, text, tables)."""
    out: list[str] = []

    def walk(node: Any) -> None:
        for child in getattr(node, "children", {}).values():
            if child.type in _OUTPUT_TYPES:
                out.append(f"{child.type}:{child.proto}")
            walk(child)

    walk(at.main)
    return out


def _run(name: str) -> AppTest:
    at = AppTest.from_file(str(PAGES / name), default_timeout=30)
    at.run(timeout=30)
    return at


@pytest.mark.parametrize("name", sorted(LEARN_PAGES))
def test_learn_page_renders_without_exception(name: str) -> None:
    at = _run(name)
    assert not at.exception
    assert not at.error
    assert at.title and at.title[0].value
    assert at.get("vega_lite_chart"), "every demo draws at least one Altair chart"


@pytest.mark.parametrize(("name", "prefix"), sorted(LEARN_PAGES.items()))
def test_run_again_changes_the_seed_and_the_output(name: str, prefix: str) -> None:
    at = _run(name)
    seed_before = at.number_input(key=f"{prefix}_seed").value
    before = _outputs(at)
    at.button(key=f"{prefix}_run_again").click().run(timeout=30)
    assert not at.exception
    assert at.number_input(key=f"{prefix}_seed").value != seed_before
    assert _outputs(at) != before


def test_widgets_all_have_explicit_keys() -> None:
    # docs/engineering.md §4: every widget has an explicit key (AppTest exposes user keys on widgets)
    widget_types = {"button", "slider", "select_slider", "number_input", "multiselect",
                    "selectbox", "radio", "checkbox"}
    for name in LEARN_PAGES:
        at = _run(name)
        found: list[Any] = []

        def walk(node: Any, found: list[Any] = found) -> None:
            for child in getattr(node, "children", {}).values():
                if child.type in widget_types:
                    found.append(child)
                walk(child)

        walk(at.main)
        assert found
        assert all(w.key for w in found), name


def test_laplace_count_table_shows_exact_and_simulated_shares() -> None:
    at = _run("learn_laplace_count.py")
    df = at.dataframe[0].value
    exact = "within ±10 % (formula)"
    assert set(df["true count"]) == {1000, 100}
    assert (df[exact] > 0.99).sum() == 3 and (df[exact] < 0.9).sum() == 3  # the caption of Borealis AI, "Tutorial #12: Differential privacy I" (2021), figure 3


def test_charts_have_axis_titles() -> None:
    at = _run("learn_composition.py")
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        assert "title" in json.dumps(spec.get("encoding", spec.get("layer", spec)))


@pytest.mark.parametrize("name", sorted(LEARN_PAGES))
def test_charts_keep_their_plot_height_and_axis_titles(name: str) -> None:
    # "fit-x": a long legend under a chart must not squeeze its plot (seen in the browser)
    at = _run(name)
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        assert spec.get("autosize", {}).get("type") == "fit-x", name
        assert '"title"' in json.dumps(spec), name


# Each Learn page's controls and a value other than its default: set it, visit another
# page of the app, come back, and the control shows what was set (issue 12: no setting is
# lost on a page switch).
CHANGED = {
    "learn_attacker.py": [("select_slider", "atk_eps", 2.0), ("slider", "atk_prior", 0.5),
                          ("number_input", "atk_target", 3), ("select_slider", "atk_delta", 1e-3)],
    "learn_averaging.py": [("select_slider", "avg_n", 3000), ("checkbox", "avg_clamp", False)],
    "learn_composition.py": [("select_slider", "comp_eps0", 0.5), ("select_slider", "comp_total", 2.0)],
    "learn_histogram.py": [("select_slider", "hist_n", 100), ("slider", "hist_m", 40)],
    "learn_laplace_count.py": [("number_input", "lc_big", 5000)],
    "learn_majority.py": [("select_slider", "maj_n", 51)],
    "learn_randomized_response.py": [("slider", "rr_rate", 0.4), ("slider", "rr_n", 2000)],
}


@pytest.mark.parametrize("page", sorted(CHANGED))
def test_learn_controls_keep_their_values_across_pages(page: str) -> None:
    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=120)
    at.run()
    at.switch_page(f"pages/{page}").run()
    for kind, key, value in CHANGED[page]:
        getattr(at, kind)(key=key).set_value(value).run()
        assert not at.exception, [e.value for e in at.exception]
    at.switch_page("pages/data_page.py").run()
    at.switch_page(f"pages/{page}").run()
    assert not at.exception, [e.value for e in at.exception]
    for kind, key, value in CHANGED[page]:
        assert getattr(at, kind)(key=key).value == value, (page, key)
    assert not any("default value" in w.value for w in at.warning)
