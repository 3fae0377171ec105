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


def test_accuracy_legend_shows_each_quantile_level_in_full():
    """Found in the browser (session 10): the legend cut 'exponential (quantile@0.25)' and
    '... @0.75' to the same 'exponential (quantile@0…' (Vega-Lite's default 160 px)."""
    curves = pd.DataFrame([{"mechanism": f"exponential (quantile@{a})", "epsilon": e, "RMSE": 0.1 / e,
                            "95% bound": 0.3 / e} for a in (0.25, 0.75) for e in (0.1, 1.0)])
    spec = charts.accuracy_chart(curves, None, 1.0, "rank, fraction of n").to_dict()
    legends = [layer["encoding"]["color"]["legend"] for layer in spec["layer"] if "color" in layer.get("encoding", {})]
    assert legends and all(lg["labelLimit"] >= 400 for lg in legends)
