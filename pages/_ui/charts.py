"""Altair chart builders (pure functions of DataFrames; no engine calls, no arithmetic)."""

from __future__ import annotations

import altair as alt
import pandas as pd


def accuracy_chart(curves: pd.DataFrame, lower: pd.DataFrame | None, epsilon: float, unit: str) -> alt.LayerChart:
    """RMSE (solid) and 95% bound (dashed) per mechanism against ε, log–log, with a rule at ε."""
    long = curves.melt(id_vars=["mechanism", "epsilon"], value_vars=["RMSE", "95% bound"],
                       var_name="measure", value_name="error")
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε")
    y = alt.Y("error:Q", scale=alt.Scale(type="log"), title=f"error ({unit})")
    base = alt.Chart(long).mark_line().encode(
        x=x, y=y, color=alt.Color("mechanism:N"),
        strokeDash=alt.StrokeDash("measure:N", title="measure"),
        tooltip=["mechanism", "measure", alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("error:Q", format=".4g")],
    )
    layers: list[alt.Chart] = [base]
    if lower is not None:
        lb = lower.rename(columns={"RMSE lower bound (unbiased)": "error"}).assign(mechanism="lower bound (unbiased ε-DP)")
        layers.append(alt.Chart(lb).mark_line(color="black", strokeDash=[2, 2]).encode(
            x=x, y=y, tooltip=[alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("error:Q", format=".4g")]))
    layers.append(alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x="epsilon:Q"))
    return alt.layer(*layers).properties(height=380)


def probability_chart(df: pd.DataFrame, epsilon: float) -> alt.LayerChart:
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε")
    line = alt.Chart(df).mark_line().encode(x=x, y=alt.Y("P[exact]:Q", scale=alt.Scale(domain=[0, 1])), color="curve:N")
    rule = alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x="epsilon:Q")
    return alt.layer(line, rule).properties(height=300)


def allocation_chart(table: pd.DataFrame, value: str = "ε") -> alt.Chart:
    """Bar per query part: its share of the budget."""
    return alt.Chart(table).mark_bar().encode(
        y=alt.Y("id:N", sort=None, title="query"),
        x=alt.X(f"{value}:Q", title=value),
        color=alt.Color("mechanism:N"),
        tooltip=list(table.columns),
    ).properties(height=max(120, 28 * len(table)))


def rules_chart(df: pd.DataFrame, epsilon: float) -> alt.LayerChart:
    """Total weighted error of the optimal split against total ε, one line per rule."""
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="total ε")
    lines = alt.Chart(df).mark_line(point=True).encode(
        x=x, y=alt.Y("objective:Q", scale=alt.Scale(type="log"), title="total weighted error"),
        color="rule:N", tooltip=["rule", alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("objective:Q", format=".4g")])
    rule = alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x="epsilon:Q")
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
    df = df.assign(item=(df["label"].astype("string").fillna("") + " " + df["part"].astype("string").fillna("")).str.strip())
    df.loc[df["item"] == "", "item"] = df["query"]
    base = alt.Chart()
    y = alt.Y("item:N", sort=None, title=None)
    bars = base.mark_errorbar(ticks=True).encode(x=alt.X("lower:Q", title="released value ± 95% bound"), x2="upper:Q", y=y)
    points = base.mark_point(filled=True, size=60, color="black").encode(
        x="value:Q", y=y,
        tooltip=["query", "item", alt.Tooltip("value:Q", format=".4g"), alt.Tooltip("error_bound_95:Q", format=".4g"), "unit"])
    return alt.layer(bars, points, data=df).transform_calculate(
        lower="datum.value - datum.error_bound_95", upper="datum.value + datum.error_bound_95",
    ).properties(width=700).facet(
        row=alt.Row("query:N", title=None)).resolve_scale(x="independent", y="independent")


def history_chart(df: pd.DataFrame) -> alt.LayerChart:
    """Spent ε over time against the total (columns time, series, epsilon)."""
    return alt.Chart(df).mark_line(point=True, interpolate="step-after").encode(
        x=alt.X("time:T", title="time"), y=alt.Y("epsilon:Q", title="ε"), color="series:N",
        tooltip=["series", "time:T", alt.Tooltip("epsilon:Q", format=".4g")]).properties(height=300)
