"""Altair chart builders (pure functions of DataFrames; no engine calls, no arithmetic)."""

from __future__ import annotations

import altair as alt
import pandas as pd


def accuracy_chart(curves: pd.DataFrame, lower: pd.DataFrame | None, epsilon: float, unit: str) -> alt.LayerChart:
    """RMSE (solid) and 95% bound (dashed) per mechanism against ε, log–log, with a rule at ε."""
    long = curves.melt(id_vars=["mechanism", "epsilon"], value_vars=["RMSE", "95% bound"],
                       var_name="measure", value_name="error")
    # a log axis cannot show 0 (e.g. a discrete mechanism's 95% bound at large ε): drop those points
    long = long[long["error"] > 0]
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε (privacy budget of this query, log scale)")
    y = alt.Y("error:Q", scale=alt.Scale(type="log"), title=f"error ({unit}, log scale)")
    base = alt.Chart(long).mark_line().encode(
        x=x, y=y, color=alt.Color("mechanism:N"),
        strokeDash=alt.StrokeDash("measure:N", title="measure"),
        tooltip=["mechanism", "measure", alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("error:Q", format=".4g")],
    )
    layers: list[alt.Chart] = [base]
    if lower is not None:
        lb = lower.rename(columns={"RMSE lower bound (unbiased)": "error"}).assign(mechanism="lower bound (unbiased ε-DP)")
        lb = lb[lb["error"] > 0]
        layers.append(alt.Chart(lb).mark_line(color="black", strokeDash=[2, 2]).encode(
            x=x, y=y, tooltip=[alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("error:Q", format=".4g")]))
    layers.append(alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x=x, tooltip=[alt.Tooltip("epsilon:Q", title="chosen ε", format=".3g")]))
    return alt.layer(*layers).properties(height=380)


def probability_chart(df: pd.DataFrame, epsilon: float) -> alt.LayerChart:
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε")
    line = alt.Chart(df).mark_line().encode(
        x=x, y=alt.Y("P[exact]:Q", scale=alt.Scale(domain=[0, 1]), title="P[released mode = true mode]"),
        color=alt.Color("curve:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["curve", alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("P[exact]:Q", format=".3f")])
    rule = alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x=x, tooltip=[alt.Tooltip("epsilon:Q", title="chosen ε", format=".3g")])
    return alt.layer(line, rule).properties(height=300)


def allocation_chart(table: pd.DataFrame, value: str = "ε") -> alt.Chart:
    """Bar per query part: its share of the budget."""
    return alt.Chart(table).mark_bar().encode(
        y=alt.Y("id:N", sort=None, title="query", axis=alt.Axis(labelLimit=220, labelOverlap=False)),
        x=alt.X(f"{value}:Q", title=f"{value} (share of the total budget)"),
        color=alt.Color("mechanism:N"),
        tooltip=[alt.Tooltip(c) for c in table.columns if c != "noise scale"],
    ).properties(height=alt.Step(26))


def rules_chart(df: pd.DataFrame, epsilon: float) -> alt.LayerChart:
    """Total weighted error of the optimal split against total ε, one line per rule."""
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="total ε")
    lines = alt.Chart(df).mark_line(point=True).encode(
        x=x, y=alt.Y("objective:Q", scale=alt.Scale(type="log"), title="total weighted error"),
        color="rule:N", tooltip=["rule", alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("objective:Q", format=".4g")])
    rule = alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x=x, tooltip=[alt.Tooltip("epsilon:Q", title="chosen ε", format=".3g")])
    return alt.layer(lines, rule).properties(height=320)


def answers_chart(table: pd.DataFrame) -> alt.FacetChart:
    """Released values with ±95% error bars (from the release CSV), one panel per query.

    Rows whose error is in the value's own units are drawn (count, sum, mean, histogram
    bins, proportions); the bar is value ± error_bound_95 (a Vega-Lite calculate).
    """
    df = table.copy()
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    df["error_bound_95"] = pd.to_numeric(df["error_bound_95"], errors="coerce")
    unit = df["unit"].astype(str)
    df = df[df["value"].notna() & df["error_bound_95"].notna()
            & ~unit.str.contains("rank") & ~unit.str.contains("utility")]
    part = df["part"].astype("string").fillna("") if "part" in df.columns else ""
    df = df.assign(item=(df["label"].astype("string").fillna("") + " " + part).str.strip())
    df.loc[df["item"] == "", "item"] = df["query"]
    base = alt.Chart()
    y = alt.Y("item:N", sort=None, title=None)
    bars = base.mark_errorbar(ticks=True, color="#3b5bdb", thickness=2).encode(
        x=alt.X("lower:Q", title="released value ± 95% bound", scale=alt.Scale(zero=False)), x2="upper:Q", y=y)
    points = base.mark_point(filled=True, size=60, color="black").encode(
        x=alt.X("value:Q", scale=alt.Scale(zero=False)), y=y,
        tooltip=["query", "item", alt.Tooltip("value:Q", format=".4g"), alt.Tooltip("error_bound_95:Q", format=".4g"), "unit"])
    return alt.layer(bars, points, data=df).transform_calculate(
        lower="datum.value - datum.error_bound_95", upper="datum.value + datum.error_bound_95",
    ).properties(width=700).facet(
        row=alt.Row("query:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelFontWeight="bold")),
    ).resolve_scale(x="independent", y="independent")


def history_chart(df: pd.DataFrame) -> alt.Chart:
    """Spent ε after each release against the total (columns step, order, series, epsilon)."""
    return alt.Chart(df).mark_line(point=True, interpolate="step-after").encode(
        x=alt.X("step:N", sort=alt.SortField("order"), title="after release", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("epsilon:Q", title="ε (privacy budget)"),
        color=alt.Color("series:N", title=None, scale=alt.Scale(domain=["spent", "total"], range=["#3b5bdb", "#adb5bd"])),
        tooltip=["series", "step", alt.Tooltip("epsilon:Q", format=".4g")]).properties(height=260)


def simulation_chart(pred: pd.DataFrame, sim: pd.DataFrame, epsilon: float, unit: str) -> alt.LayerChart:
    """Predicted RMSE (line) against the simulated RMSE on the data (points with ±2 s.e. bars)."""
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε (privacy budget of this query)")
    y_title = f"RMSE ({unit})"
    line = alt.Chart(pred).mark_line().encode(
        x=x, y=alt.Y("RMSE:Q", scale=alt.Scale(type="log"), title=y_title),
        color=alt.Color("mechanism:N", title="mechanism"),
        tooltip=["mechanism", alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("RMSE:Q", format=".4g")])
    positive = sim[sim["empirical RMSE"] > 0]
    bars = alt.Chart(positive).mark_rule(color="black").encode(
        x=x, y=alt.Y("low:Q", scale=alt.Scale(type="log"), title=y_title), y2="high:Q")
    pts = alt.Chart(positive).mark_point(filled=True, size=70, color="black", shape="diamond").encode(
        x=x, y=alt.Y("empirical RMSE:Q", scale=alt.Scale(type="log"), title=y_title),
        tooltip=[alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("empirical RMSE:Q", format=".4g"),
                 alt.Tooltip("predicted RMSE:Q", format=".4g"), "runs"])
    rule = alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x=x, tooltip=[alt.Tooltip("epsilon:Q", title="chosen ε", format=".3g")])
    return alt.layer(line, bars, pts, rule).properties(height=340, title="Predicted (line) vs simulated on your data (points)")


def quantile_check_chart(df: pd.DataFrame, epsilon: float, column: str) -> alt.LayerChart:
    """A quantile's RMSE in the column's units against ε: lower bound and two simulated mechanisms."""
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε (privacy budget of this query)")
    data = df[df["RMSE"] > 0]
    lines = alt.Chart(data).mark_line(point=True).encode(
        x=x, y=alt.Y("RMSE:Q", scale=alt.Scale(type="log"), title=f"RMSE ({column} units)"),
        color=alt.Color("curve:N", title=None, legend=alt.Legend(orient="bottom", direction="vertical")),
        strokeDash=alt.condition("indexof(datum.curve, 'lower bound') >= 0", alt.value([4, 3]), alt.value([1, 0])),
        tooltip=["curve", alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("RMSE:Q", format=".4g")])
    rule = alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x=x, tooltip=[alt.Tooltip("epsilon:Q", title="chosen ε", format=".3g")])
    return alt.layer(lines, rule).properties(height=340)
