"""The released answers' charts: one shared scale per unit, median and mode included."""

from __future__ import annotations

import json

import pandas as pd

from pages._ui import charts

# The columns of ReleaseResult.to_csv(); values made up, errors as a plan would predict them.
ROWS = [
    ("people", "count", "laplace", "", "", 50021.2, 65.75, "rows"),
    ("region_counts", "histogram", "laplace", "", "North", 10936.1, 19.91, "rows per bin"),
    ("region_counts", "histogram", "laplace", "", "South", 12448.4, 19.91, "rows per bin"),
    ("income_total", "sum", "laplace", "", "", 1.75e9, 1.035e7, "income units"),
    ("income_mean", "mean", "laplace", "", "", 36120.3, 225.7, "income units"),
    ("age_median", "median", "exponential", "", "", 46.44, 0.0055, "rank, fraction of n"),
    ("education_mode", "mode", "exponential", "", "", "secondary", 22.89, "rows (utility gap)"),
    ("smoker_share", "proportion", "laplace", "", "", 0.186, 0.0013, "proportion"),
]


def _table() -> pd.DataFrame:
    df = pd.DataFrame(ROWS, columns=["query", "kind", "mechanism", "part", "label", "value", "error_bound_95", "unit"])
    return df.assign(alpha=[None, None, None, None, None, 0.5, None, None])


def test_answers_grouped_one_chart_per_unit_with_median_and_mode():
    groups = charts.answer_groups(_table())
    kinds_units = [(k, u) for k, u, _ in groups]
    assert ("gap", "rows") in kinds_units  # the mode
    assert ("rank", "rank") in kinds_units  # the median
    values = {u: list(g["item"]) for k, u, g in groups if k == "value"}
    # the count and the histogram's bins are all rows: one chart, one scale
    assert values["rows"] == ["people", "region_counts · North", "region_counts · South"]
    # a total and an average of income share a unit but not a magnitude: two charts
    assert values["income units, totals"] == ["income_total"]
    assert values["income units, averages"] == ["income_mean"]
    assert values["proportion"] == ["smoker_share"]
    shown = sum(len(g) for _, _, g in groups)
    assert shown == len(ROWS)  # every released number is drawn once, none dropped, no empty row


def test_each_unit_chart_has_one_shared_x_scale_and_error_bars():
    for kind, unit, grp in charts.answer_groups(_table()):
        spec = charts.answers_chart(kind, unit, grp).to_dict()
        text = json.dumps(spec)
        assert "facet" not in spec and "resolve" not in text  # one panel, one scale for the unit
        if kind in ("value", "rank"):
            assert '"errorbar"' in text
            assert sum(len(v) for v in spec["datasets"].values()) == len(grp)  # one point per answer
    rank = next(g for k, _, g in charts.answer_groups(_table()) if k == "rank")
    assert list(rank["shown"]) == ["46.44"]  # the released median is written on its chart
