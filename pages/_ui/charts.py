"""Altair chart builders (pure functions of DataFrames; no engine calls, no arithmetic), and
:func:`draw`, which puts one on the page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from planner.planning.queries import QueryKind


class Unvalidated:
    """An Altair chart whose Vega-Lite spec is written without Altair's JSON-schema validation.

    ``st.altair_chart`` turns a chart into its spec with ``chart.to_dict()``, which validates
    the whole spec against the Vega-Lite schema on every script run: 60-70% of a chart's
    conversion (5-6 ms of CPU of an answer's 8-12 ms; six answer charts on the Release page,
    one on every Accuracy slider step). The builders here are fixed code and the validation
    changes nothing in the spec, so it is done where it can fail: ``tests/app/test_chart_specs.py``
    validates every chart the main pages draw and checks the spec is the same either way.
    Only ``to_dict`` is offered (all ``st.altair_chart`` asks of a chart)."""

    def __init__(self, chart: alt.TopLevelMixin) -> None:
        self.chart = chart

    def to_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("validate", False)
        return self.chart.to_dict(*args, **kwargs)


def draw(chart: alt.TopLevelMixin, where: Any = None) -> None:
    """``st.altair_chart(chart, width="stretch")`` in ``where`` (a container; the page when
    None), the spec written without validation (:class:`Unvalidated`)."""
    (st if where is None else where).altair_chart(Unvalidated(chart), width="stretch")


def accuracy_chart(curves: pd.DataFrame, lower: pd.DataFrame | None, epsilon: float, unit: str) -> alt.LayerChart:
    """RMSE (solid) and 95% bound (dashed) per mechanism against ε, log–log, with a rule at ε."""
    long = curves.melt(id_vars=["mechanism", "epsilon"], value_vars=["RMSE", "95% bound"],
                       var_name="measure", value_name="error")
    # a log axis cannot show 0 (e.g. a discrete mechanism's 95% bound at large ε): drop those points
    long = long[long["error"] > 0]
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε (privacy budget of this query, log scale)")
    y = alt.Y("error:Q", scale=alt.Scale(type="log"), title=f"error ({unit}, log scale)")
    base = alt.Chart(long).mark_line().encode(
        # long legend labels ("exponential (quantile@0.25)") in full: cut, two levels read the same
        x=x, y=y, color=alt.Color("mechanism:N", legend=alt.Legend(labelLimit=400)),
        strokeDash=alt.StrokeDash("measure:N", title="measure"),
        tooltip=[alt.Tooltip("mechanism"), alt.Tooltip("measure"), alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("error:Q", format=".4g")],
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
        tooltip=[alt.Tooltip("curve"), alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("P[exact]:Q", format=".3f")])
    rule = alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x=x, tooltip=[alt.Tooltip("epsilon:Q", title="chosen ε", format=".3g")])
    return alt.layer(line, rule).properties(height=300)


def prediction_table(preds: Sequence[Any]) -> pd.DataFrame:
    """One row per released quantity (engine predictions as they are; δ and ρ columns only
    when some query uses Gaussian noise)."""
    df = pd.DataFrame([
        {"id": p.id, "kind": p.kind, "mechanism": p.mechanism, "share ε": p.epsilon, "δ": p.delta, "ρ": p.rho,
         "±95% error": p.error_bound_95, "typical error": p.rmse, "unit": p.unit,
         "noise": ", ".join(f"{k.replace('_', ' ')} {v:.4g}" for k, v in p.noise.items())}
        for p in preds
    ])
    if not (df["δ"] > 0).any():
        df = df.drop(columns=["δ", "ρ"])
    return df


def allocation_chart(table: pd.DataFrame, value: str = "ε") -> alt.Chart:
    """Bar per query part: its share of the budget."""
    return alt.Chart(table).mark_bar().encode(
        y=alt.Y("id:N", sort=None, title="query", axis=alt.Axis(labelLimit=220, labelOverlap=False)),
        x=alt.X(f"{value}:Q", title=f"{value} (share of this release's budget)"),
        color=alt.Color("mechanism:N"),
        tooltip=[alt.Tooltip(c) for c in table.columns if c != "noise"],
    ).properties(height=alt.Step(26))


def rules_chart(df: pd.DataFrame, epsilon: float) -> alt.LayerChart:
    """The planner's weighted error of the optimal split against ε, one line per rule."""
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε of the release (log scale)")
    lines = alt.Chart(df).mark_line(point=True).encode(
        x=x, y=alt.Y("objective:Q", scale=alt.Scale(type="log"),
                     title="weighted error (lower is better)"),
        color=alt.Color("rule:N"), tooltip=[alt.Tooltip("rule"), alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("objective:Q", format=".4g")])
    rule = alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x=x, tooltip=[alt.Tooltip("epsilon:Q", title="your ε", format=".3g")])
    return alt.layer(lines, rule).properties(height=320)


# ----------------------------------------------------------------------------- released answers
#: Units that are counts of rows share one scale.
_SAME_UNIT = {"rows per bin": "rows"}


def answer_groups(table: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """Released rows (the release CSV's columns) grouped for charts: ``(kind, unit, rows)``
    with kind ``"value"`` (value ± 95% error on the unit's own scale), ``"rank"`` (median
    and quantiles: the released value's rank ± its rank error) or ``"gap"`` (mode: how many
    rows the released category may be short of the true most common one)."""
    df = table.copy()
    df["label"] = df["label"].astype("string").fillna("") if "label" in df.columns else ""
    part = df["part"].astype("string").fillna("") if "part" in df.columns else ""
    df["item"] = (df["query"].astype(str) + " " + df["label"] + " " + part).str.strip().str.replace(r"\s+", " · ", n=1, regex=True)
    df["unit"] = df["unit"].astype(str)
    df["error_bound_95"] = pd.to_numeric(df["error_bound_95"], errors="coerce")
    out: list[tuple[str, str, pd.DataFrame]] = []
    rank = df["unit"].str.startswith("rank")
    gap = df["unit"].str.contains("utility")
    if gap.any():
        out.append(("gap", "rows", df[gap].assign(shown=df[gap]["value"].astype(str))))
    if rank.any():
        r = df[rank].copy()
        r["alpha"] = pd.to_numeric(r.get("alpha", 0.5), errors="coerce").fillna(0.5)
        r["shown"] = r["value"].map(lambda v: f"{float(v):,.4g}" if _is_number(v) else str(v))
        out.append(("rank", "rank", r))
    rest = df[~rank & ~gap].copy()
    rest["value"] = pd.to_numeric(rest["value"], errors="coerce")
    rest = rest[rest["value"].notna() & rest["error_bound_95"].notna()]
    rest["unit"] = rest["unit"].replace(_SAME_UNIT)
    # a total and an average of the same column share a unit but not a magnitude
    kind = rest["kind"].astype(str) if "kind" in rest.columns else pd.Series("", index=rest.index)
    rest["unit"] = rest["unit"].where(~kind.eq(QueryKind.SUM.value), rest["unit"] + ", totals")
    rest["unit"] = rest["unit"].where(~kind.eq(QueryKind.MEAN.value), rest["unit"] + ", averages")
    for unit, grp in rest.groupby("unit", sort=False):
        out.append(("value", str(unit), grp))
    return out


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def answers_chart(kind: str, unit: str, df: pd.DataFrame) -> alt.LayerChart:
    """One chart per unit: every released number of that unit on one shared scale."""
    y = alt.Y("item:N", sort=None, title=None, axis=alt.Axis(labelLimit=320))
    height = alt.Step(30)
    if kind == "value":
        base = alt.Chart().transform_calculate(
            lower="datum.value - datum.error_bound_95", upper="datum.value + datum.error_bound_95")
        x = alt.X("lower:Q", title=f"released value ± 95% error ({unit})", scale=alt.Scale(zero=False))
        bars = base.mark_errorbar(ticks=True, color="#3b5bdb", thickness=2).encode(x=x, x2=alt.X2("upper:Q"), y=y)
        pts = base.mark_point(filled=True, size=60, color="black").encode(
            x=alt.X("value:Q"), y=y,
            tooltip=[alt.Tooltip("query"), alt.Tooltip("item"), alt.Tooltip("value:Q", format=",.4g"),
                     alt.Tooltip("error_bound_95:Q", title="± 95% error", format=",.4g"), alt.Tooltip("unit")])
        return alt.layer(bars, pts, data=df).properties(height=height, title=f"In {unit}")
    if kind == "rank":
        base = alt.Chart().transform_calculate(
            lower="max(0, datum.alpha - datum.error_bound_95)", upper="min(1, datum.alpha + datum.error_bound_95)")
        x = alt.X("lower:Q", title="share of the rows below the released value (its rank), ± 95% error",
                  scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%"))
        bars = base.mark_errorbar(ticks=True, color="#3b5bdb", thickness=2).encode(x=x, x2=alt.X2("upper:Q"), y=y)
        pts = base.mark_point(filled=True, size=60, color="black").encode(x=alt.X("alpha:Q"), y=y)
        text = base.mark_text(align="left", dx=8, dy=-10).encode(
            x=alt.X("alpha:Q"), y=y, text=alt.Text("shown:N"))
        return alt.layer(bars, pts, text, data=df).properties(height=height, title="Medians and quantiles: where the released "
                                                                          "value ranks")
    base = alt.Chart()
    x = alt.X("error_bound_95:Q", title="at most this many rows fewer than the true most common category (95%)",
              scale=alt.Scale(zero=True))
    bars = base.mark_bar(color="#adb5bd", height=10).encode(x=x, y=y)
    text = base.mark_text(align="left", dx=6).encode(x=alt.X("error_bound_95:Q"), y=y, text=alt.Text("shown:N"))
    return alt.layer(bars, text, data=df).properties(height=height, title="Most common category (mode)")


def history_chart(df: pd.DataFrame) -> alt.Chart:
    """Spent ε after each release against the total (columns step, order, series, epsilon)."""
    return alt.Chart(df).mark_line(point=True, interpolate="step-after").encode(
        x=alt.X("step:N", sort=alt.SortField("order"), title="after release", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("epsilon:Q", title="ε (privacy budget)"),
        color=alt.Color("series:N", title=None, scale=alt.Scale(domain=["spent", "lifetime budget"], range=["#3b5bdb", "#adb5bd"])),
        tooltip=[alt.Tooltip("series"), alt.Tooltip("step"), alt.Tooltip("epsilon:Q", format=".4g")]).properties(height=260)


#: The budget bar's parts, in order, and their colours (spent: the history's blue, as history_chart).
BUDGET_PARTS = ("spent before", "this release", "left afterwards")
_BUDGET_COLOURS = ("#3b5bdb", "#f08c00", "#adb5bd")


def budget_bar(df: pd.DataFrame, total: float) -> alt.LayerChart:
    """One stacked bar of the lifetime budget: what was spent, what this release adds and what
    is left (columns part, epsilon, order; a legend names the parts, a tooltip gives each ε), and
    the lifetime total as a red rule. A release that does not fit shows its part reaching past
    the rule."""
    y = alt.Y("budget:N", axis=None)  # one band: every part stacks on the same row
    bar = alt.Chart(df).transform_calculate(budget="'lifetime'").mark_bar().encode(
        x=alt.X("sum(epsilon):Q", title="ε (privacy budget) of this dataset's lifetime"), y=y,
        order=alt.Order("order:Q"),
        color=alt.Color("part:N", title=None, sort=list(BUDGET_PARTS),
                        scale=alt.Scale(domain=list(BUDGET_PARTS), range=list(_BUDGET_COLOURS)),
                        legend=alt.Legend(orient="top", direction="horizontal")),
        tooltip=[alt.Tooltip("part:N", title=" "), alt.Tooltip("epsilon:Q", title="ε", format=".4g")])
    line = alt.Chart(pd.DataFrame({"total": [total]})).mark_rule(color="#e03131", strokeWidth=3).encode(
        x=alt.X("total:Q"), tooltip=[alt.Tooltip("total:Q", title="lifetime ε", format=".4g")])
    return alt.layer(bar, line).properties(height=alt.Step(34))


def simulation_chart(pred: pd.DataFrame, sim: pd.DataFrame, epsilon: float, unit: str) -> alt.LayerChart:
    """Predicted RMSE (line) against the simulated RMSE on the data (points with ±2 s.e. bars)."""
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε (privacy budget of this query)")
    y_title = f"RMSE ({unit})"
    line = alt.Chart(pred).mark_line().encode(
        x=x, y=alt.Y("RMSE:Q", scale=alt.Scale(type="log"), title=y_title),
        color=alt.Color("mechanism:N", title="mechanism", legend=alt.Legend(labelLimit=400)),
        tooltip=[alt.Tooltip("mechanism"), alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("RMSE:Q", format=".4g")])
    positive = sim[sim["empirical RMSE"] > 0]
    bars = alt.Chart(positive).mark_rule(color="black").encode(
        x=x, y=alt.Y("low:Q", scale=alt.Scale(type="log"), title=y_title), y2=alt.Y2("high:Q"))
    pts = alt.Chart(positive).mark_point(filled=True, size=70, color="black", shape="diamond").encode(
        x=x, y=alt.Y("empirical RMSE:Q", scale=alt.Scale(type="log"), title=y_title),
        tooltip=[alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("empirical RMSE:Q", format=".4g"),
                 alt.Tooltip("predicted RMSE:Q", format=".4g"), alt.Tooltip("runs")])
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
        tooltip=[alt.Tooltip("curve"), alt.Tooltip("epsilon:Q", format=".3g"), alt.Tooltip("RMSE:Q", format=".4g")])
    rule = alt.Chart(pd.DataFrame({"epsilon": [epsilon]})).mark_rule(color="red").encode(x=x, tooltip=[alt.Tooltip("epsilon:Q", title="chosen ε", format=".3g")])
    return alt.layer(lines, rule).properties(height=340)


# ----------------------------------------------------------------------------- one answer
def answer_value_chart(df: pd.DataFrame, unit: str) -> alt.LayerChart:
    """Released numbers of one answer (columns label, value, low, high) with their ±95% bars."""
    y = alt.Y("label:N", sort=None, title=None, axis=alt.Axis(labelLimit=260))
    x_title = f"released value ± 95% error ({unit})" if unit else "released value ± 95% error"
    base = alt.Chart()
    bars = base.mark_errorbar(ticks=True, color="#3b5bdb", thickness=2).encode(
        x=alt.X("low:Q", title=x_title, scale=alt.Scale(zero=False)), x2=alt.X2("high:Q"), y=y)
    pts = base.mark_point(filled=True, size=70, color="black").encode(
        x=alt.X("value:Q"), y=y, tooltip=[alt.Tooltip("label"), alt.Tooltip("value:Q", format=",.4g"),
                                   alt.Tooltip("low:Q", title="95% from", format=",.4g"),
                                   alt.Tooltip("high:Q", title="95% to", format=",.4g")])
    return alt.layer(bars, pts, data=df).properties(height=alt.Step(28) if len(df) > 1 else 70)


def answer_quantile_chart(df: pd.DataFrame, lower: float, upper: float, column: str) -> alt.LayerChart:
    """Released quantiles (columns label, value) as dots where the released values fall on the
    column's declared range [lower, upper]."""
    x = alt.X("value:Q", title=f"{column} (declared range {lower:g} to {upper:g})",
              scale=alt.Scale(domain=[lower, upper]))
    y = alt.Y("label:N", sort=None, title=None, axis=alt.Axis(labelLimit=260))
    rule = alt.Chart().mark_rule(color="#ced4da").encode(y=y, x=alt.datum(lower), x2=alt.datum(upper))
    pts = alt.Chart().mark_point(filled=True, size=90, color="black").encode(
        x=x, y=y, tooltip=[alt.Tooltip("label"), alt.Tooltip("value:Q", format=",.4g")])
    text = alt.Chart().mark_text(align="left", dx=8, dy=-10).encode(
        x=x, y=y, text=alt.Text("value:Q", format=",.4g"))
    return alt.layer(rule, pts, text, data=df).properties(height=alt.Step(34) if len(df) > 1 else 70)


def sample_chart(values: pd.DataFrame, lower: float, upper: float, column: str, bins: int) -> alt.Chart:
    """The synthetic sample's values as a histogram over the declared range."""
    return alt.Chart(values).mark_bar(color="#3b5bdb").encode(
        x=alt.X("value:Q", bin=alt.Bin(extent=[lower, upper], maxbins=max(bins, 1)), title=f"{column} (synthetic values)"),
        y=alt.Y("count():Q", title="synthetic values")).properties(height=220)


def marginal_bars(df: pd.DataFrame, column: str) -> alt.Chart:
    """A column's bins, real beside synthetic (shares), from
    :meth:`planner.planning.statistics.synthetic_data.MarginalComparison.one_way` rows."""
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("bin:N", sort=None, title=column),
        xOffset=alt.XOffset("table:N"),
        y=alt.Y("share:Q", title="share of rows"),
        color=alt.Color("table:N", title=None, scale=alt.Scale(domain=["real", "synthetic"])),
        tooltip=[alt.Tooltip("bin"), alt.Tooltip("table"), alt.Tooltip("share:Q", format=".3f")],
    ).properties(height=260)


def marginal_heatmap(df: pd.DataFrame, row: str, column: str) -> alt.Chart:
    """A pair's cells: synthetic minus real share (a diverging heat map), from
    :meth:`~planner.planning.statistics.synthetic_data.MarginalComparison.two_way` rows."""
    lim = float(df["difference"].abs().max()) or 1e-9
    return alt.Chart(df).mark_rect().encode(
        x=alt.X("column:N", sort=None, title=column),
        y=alt.Y("row:N", sort=None, title=row),
        color=alt.Color("difference:Q", title="synthetic − real",
                        scale=alt.Scale(scheme="redblue", domain=[-lim, lim], reverse=True)),
        tooltip=[alt.Tooltip("row"), alt.Tooltip("column"), alt.Tooltip("real:Q", format=".4f"), alt.Tooltip("synthetic:Q", format=".4f"),
                 alt.Tooltip("difference:Q", format="+.4f")],
    ).properties(height=280)
