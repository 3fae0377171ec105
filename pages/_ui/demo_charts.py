"""Streamlit/Altair helpers for the "Learn" demo pages only.

Chart builders take plain engine results (``planner.learn``) and return Altair charts;
the few widgets shared by every demo (seed + "Run again") live here too. Cached helpers
cache deterministic work or demo simulations keyed by their seed: demos release nothing,
so caching them leaks nothing; nothing here ever draws noise for a release.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from planner import learn as demos
from planner.learn import composition
from planner.privacy.accountants import rule as registered_rule
from planner.privacy.budget import CompositionRule

ROOT = Path(__file__).resolve().parents[2]
CENSUS_CSV = ROOT / "data" / "census.csv"
CENSUS_SCHEMA = ROOT / "data" / "census.schema.json"

DEFAULT_SEED = 2024

#: Shown as the help of every ε control: the one idea a non-expert needs.
EPSILON_HELP = (
    "ε (epsilon) is the privacy budget: how much one person's data may change what is "
    "published. Smaller ε means more noise, so more privacy and less accuracy."
)
#: Labels of long legends are never cut (Vega-Lite's default cuts them at 160 px).
#: Streamlit fits the whole box (title, legend, axes) into ``height`` when a chart
#: stretches; "fit-x" stretches the width only, so ``height`` is the plot's own height
#: and a long legend under it never squeezes the plot.
_AUTOSIZE = alt.AutoSizeParams(type="fit-x", contains="padding")
_LEGEND_BOTTOM: dict[str, Any] = {"orient": "bottom", "direction": "vertical", "labelLimit": 0, "title": None}

#: Each compared rule's label, from the rule registry (its full name), and the textbook
#: advanced-composition formula the composition demo draws beside them.
RULE_LABELS = {r: registered_rule(r).full for r in composition.DEMO_RULES}
DRV_LABEL = "advanced, textbook formula (Dwork–Rothblum–Vadhan)"
#: One colour per curve, the same on every chart of the composition demo.
RULE_COLOURS = dict(zip((RULE_LABELS[CompositionRule.BASIC], DRV_LABEL, RULE_LABELS[CompositionRule.ADVANCED],
                         RULE_LABELS[CompositionRule.RDP]), ("#7f7f7f", "#f58518", "#4c78a8", "#54a24b"), strict=True))


# ----------------------------------------------------------------------------- widgets


def seed_controls(prefix: str, default: int = DEFAULT_SEED) -> int:
    """A seed number input and a "Run again" button that draws a new seed (on_click)."""
    key = f"{prefix}_seed"
    if key not in st.session_state:
        st.session_state[key] = default

    def _new_seed() -> None:
        old = int(st.session_state[key])
        new = secrets.randbelow(1_000_000)
        st.session_state[key] = new if new != old else (old + 1) % 1_000_000

    left, right = st.columns([3, 1], vertical_alignment="bottom")
    left.number_input(
        "Random seed (the simulation is reproducible from it)",
        min_value=0,
        max_value=2**31 - 1,
        step=1,
        key=key,
    )
    right.button("Run again", key=f"{prefix}_run_again", on_click=_new_seed, width="stretch")
    return int(st.session_state[key])


def rng(seed: int) -> np.random.Generator:
    """A fresh generator for a demo simulation (never for a release)."""
    return np.random.default_rng(int(seed))


# -------------------------------------------------------------------------------- data


@st.cache_data(show_spinner=False)
def census_column(column: str) -> np.ndarray[Any, Any]:
    """One column of the synthetic census sample, missing values dropped (schema: drop)."""
    df = pd.read_csv(CENSUS_CSV, usecols=[column])
    s = df[column].dropna()
    if s.dtype == object:
        s = s.astype(str).str.lower().map({"true": 1, "false": 0}).dropna()
    return np.asarray(s.to_numpy())


@st.cache_data(show_spinner=False)
def census_person_ids() -> pd.DataFrame:
    """person_id and smoker (missing smoker dropped), for the differencing attack."""
    df = pd.read_csv(CENSUS_CSV, usecols=["person_id", "smoker"]).dropna()
    df["smoker"] = df["smoker"].astype(str).str.lower().eq("true").astype(np.int64)
    return df.reset_index(drop=True)


@st.cache_data(show_spinner=False)
def census_bounds(column: str) -> tuple[float, float]:
    """Declared [lower, upper] of a numeric census column (from the schema, not the rows)."""
    schema = json.loads(CENSUS_SCHEMA.read_text(encoding="utf-8"))
    for col in schema["columns"]:
        if col["name"] == column:
            return float(col["lower"]), float(col["upper"])
    raise KeyError(column)


# ------------------------------------------------------------------------------ charts
#
# Streamlit fits a chart's whole box (plot, axes, legend) into its height, so charts with a
# legend under the plot get extra height. Histogram bars carry an explicit zero baseline
# (``y2``): with ``x``/``x2`` ranges and no baseline Vega-Lite draws thin ticks, not bars.


def _hist_df(values: np.ndarray[Any, Any], bins: int, lo: float, hi: float) -> pd.DataFrame:
    counts, edges = np.histogram(values, bins=bins, range=(lo, hi))
    return pd.DataFrame({"start": edges[:-1], "end": edges[1:], "count": counts, "zero": 0})


def _x_range(lo: float, hi: float, title: str, fmt: str | None = None) -> alt.X:
    """A quantitative x on exactly [lo, hi]: never stretched to include 0."""
    axis = alt.Axis(format=fmt) if fmt else alt.Axis()
    return alt.X("start:Q", title=title, scale=alt.Scale(domain=[lo, hi], zero=False, nice=False), axis=axis)


def _title(text: str, subtitle: str | None = None) -> alt.TitleParams:
    return alt.TitleParams(text, subtitle=subtitle or alt.Undefined, anchor="start")


def survey_estimate_chart(sim: demos.SurveySimulation) -> alt.LayerChart:
    """The corrected estimate with its interval, beside the true rate and the raw yes-share."""
    pts = pd.DataFrame(
        {
            "what": ["true rate (unknown in real life)", "raw share of “yes” reports", "corrected estimate"],
            "value": [sim.true_rate, sim.report_rate, sim.estimate],
            "lower": [sim.true_rate, sim.report_rate, sim.lower],
            "upper": [sim.true_rate, sim.report_rate, sim.upper],
        }
    )
    y = alt.Y("what:N", title=None, sort=None, axis=alt.Axis(labelLimit=0))
    x = alt.X("lower:Q", title="share of the population", scale=alt.Scale(domain=[0, 1]),
              axis=alt.Axis(format="%"))
    bars = alt.Chart(pts).mark_rule(strokeWidth=3, color="black").encode(x=x, x2="upper:Q", y=y)
    dots = alt.Chart(pts).mark_point(filled=True, size=140, opacity=1).encode(
        x="value:Q", y=y,
        color=alt.Color("what:N", legend=None, scale=alt.Scale(domain=list(pts["what"]),
                                                                range=["#2ca02c", "#7f7f7f", "#d62728"])),
        tooltip=[alt.Tooltip("what:N"), alt.Tooltip("value:Q", format=".1%"),
                 alt.Tooltip("lower:Q", format=".1%"), alt.Tooltip("upper:Q", format=".1%")],
    )
    return (bars + dots).properties(autosize=_AUTOSIZE,
        height=alt.Step(40), title=_title("What we learn about the group",
                                 f"black line: {sim.level:.0%} interval of the corrected estimate")
    )


def survey_reports_chart(sim: demos.SurveySimulation) -> alt.Chart:
    """How many truly-yes / truly-no respondents reported yes / no."""
    truth = np.asarray(sim.truth)
    reports = np.asarray(sim.reports)
    rows = [
        {"true answer": f"truly {t}", "report": f"says {r}",
         "people": int(np.sum((truth == ti) & (reports == ri)))}
        for t, ti in (("yes", 1), ("no", 0)) for r, ri in (("yes", 1), ("no", 0))
    ]
    return (
        alt.Chart(pd.DataFrame(rows))
        .mark_bar()
        .encode(
            x=alt.X("people:Q", title="respondents"),
            y=alt.Y("true answer:N", title=None, sort=["truly yes", "truly no"]),
            color=alt.Color("report:N", scale=alt.Scale(domain=["says yes", "says no"], range=["#e45756", "#4c78a8"]),
                            legend=alt.Legend(orient="bottom", title="what they report")),
            order=alt.Order("report:N", sort="descending"),
            tooltip=["true answer", "report", "people"],
        )
        .properties(autosize=_AUTOSIZE, height=alt.Step(45), title=_title("What the respondents said",
                                             "the collector sees only the colours, never the truth"))
    )


def repeated_surveys_chart(rr_est: np.ndarray[Any, Any], direct: np.ndarray[Any, Any], truth: float) -> alt.LayerChart:
    """Estimates over many repeated surveys: randomized response vs asking directly."""
    lo = float(min(np.quantile(rr_est, 0.001), np.quantile(direct, 0.001), truth))
    hi = float(max(np.quantile(rr_est, 0.999), np.quantile(direct, 0.999), truth))
    pad = 0.05 * (hi - lo) + 1e-9
    lo, hi = lo - pad, hi + pad
    a = _hist_df(rr_est, 50, lo, hi).assign(method="randomized response (private)")
    b = _hist_df(direct, 50, lo, hi).assign(method="asking directly (no privacy)")
    bars = alt.Chart(pd.concat([a, b])).mark_bar(opacity=0.55, binSpacing=0).encode(
        x=_x_range(lo, hi, "estimated share of the population", fmt="%"),
        x2="end:Q",
        y=alt.Y("count:Q", title="number of surveys", stack=None),
        y2="zero:Q",
        color=alt.Color("method:N", legend=alt.Legend(**_LEGEND_BOTTOM),
                        scale=alt.Scale(range=["#7f7f7f", "#e45756"])),
    )
    rule = alt.Chart(pd.DataFrame({"start": [truth]})).mark_rule(color="black", strokeDash=[4, 3]).encode(x="start:Q")
    return (bars + rule).properties(autosize=_AUTOSIZE,
        height=220, title=_title("2,000 repeated surveys of the same size", "dashed line: the true rate")
    )


def likelihood_ratio_chart(epsilon: float, scale: float, observed: np.ndarray[Any, Any]) -> alt.LayerChart:
    """Likelihood ratio of "X smokes" vs "X does not" as a function of the observed difference."""
    d = np.linspace(-8 * scale, 8 * scale + 1, 400)
    df = pd.DataFrame({"difference": d, "ratio": demos.difference_likelihood_ratio(d, scale)})
    line = alt.Chart(df).mark_line(color="#4c78a8", strokeWidth=2).encode(
        x=alt.X("difference:Q", title="difference between the two noisy answers"),
        y=alt.Y("ratio:Q", title="evidence for “X smokes” (×, log scale)",
                scale=alt.Scale(type="log", domain=[float(np.exp(-epsilon)) / 1.3, float(np.exp(epsilon)) * 1.3])),
    )
    bounds = pd.DataFrame({"y": [np.exp(epsilon), np.exp(-epsilon)],
                           "label": [f"limit e^ε = {np.exp(epsilon):.3g}", f"limit e^−ε = {np.exp(-epsilon):.3g}"]})
    rules = alt.Chart(bounds).mark_rule(color="firebrick", strokeDash=[5, 3]).encode(y="y:Q", tooltip=["label"])
    labels = alt.Chart(bounds).mark_text(align="left", dx=4, dy=-6, color="firebrick").encode(
        y="y:Q", x=alt.datum(float(d[0])), text="label:N"
    )
    obs = pd.DataFrame({"difference": observed[:200], "ratio": demos.difference_likelihood_ratio(observed[:200], scale)})
    pts = alt.Chart(obs).mark_circle(size=18, opacity=0.5, color="gray").encode(x="difference:Q", y="ratio:Q")
    return (line + rules + labels + pts).properties(autosize=_AUTOSIZE,
        height=240, title=_title("The evidence never passes e^ε", "grey dots: simulated pairs of answers")
    )


def posterior_chart(posterior: np.ndarray[Any, Any], lo: float, hi: float, prior: float) -> alt.LayerChart:
    """Histogram of the attacker's posterior over repeated noisy answers, with its bounds."""
    df = _hist_df(posterior, 50, 0.0, 1.0)
    bars = alt.Chart(df).mark_bar(binSpacing=0, color="#4c78a8").encode(
        x=_x_range(0.0, 1.0, "attacker's belief that X smokes", fmt="%"),
        x2="end:Q",
        y=alt.Y("count:Q", title="repetitions"),
        y2="zero:Q",
    )
    marks = pd.DataFrame({"start": [prior, lo, hi],
                          "what": ["belief before the answers", "lowest belief possible", "highest belief possible"]})
    rules = alt.Chart(marks).mark_rule(strokeDash=[5, 3], strokeWidth=2).encode(
        x="start:Q",
        color=alt.Color("what:N", legend=alt.Legend(**_LEGEND_BOTTOM), sort=None,
                        scale=alt.Scale(range=["black", "firebrick", "darkorange"])),
        tooltip=["what", alt.Tooltip("start:Q", format=".1%")],
    )
    return (bars + rules).properties(autosize=_AUTOSIZE,
        height=240, title=_title("The attacker's belief after the answers", "2,000 repetitions of the two questions")
    )


def power_chart(epsilon: float, delta: float) -> alt.Chart:
    """Power of a level-γ membership test: Wasserman and Zhou's bound, the full bound, the Laplace count."""
    g = np.linspace(0.0, 1.0, 201)
    frames = [
        pd.DataFrame({"level": g, "power": demos.membership_power_bound(g, epsilon, delta),
                      "curve": "simple limit γ·e^ε + δ (Wasserman and Zhou)"}),
        pd.DataFrame({"level": g, "power": demos.membership_power_bound(g, epsilon, delta, tight=True),
                      "curve": "exact limit for any ε-DP release (Kairouz et al.)"}),
        pd.DataFrame({"level": g, "power": demos.laplace_count_power(g, epsilon),
                      "curve": "best possible test against a noisy count (δ = 0)"}),
        pd.DataFrame({"level": g, "power": g, "curve": "blind guessing"}),
    ]
    return (
        alt.Chart(pd.concat(frames))
        .mark_line(strokeWidth=2)
        .encode(
            x=alt.X("level:Q", title="false-alarm rate γ (innocent people wrongly accused)",
                    axis=alt.Axis(format="%")),
            y=alt.Y("power:Q", title="chance of detecting X", scale=alt.Scale(domain=[0, 1]),
                    axis=alt.Axis(format="%")),
            color=alt.Color("curve:N", sort=None, legend=alt.Legend(**_LEGEND_BOTTOM)),
            strokeDash=alt.StrokeDash("curve:N", sort=None, legend=None),
            tooltip=["curve", alt.Tooltip("level:Q", format=".1%"), alt.Tooltip("power:Q", format=".1%")],
        )
        .properties(autosize=_AUTOSIZE, height=300, title=_title("Can a test tell whether X is in the data?"))
    )


_EPS_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c"]


def laplace_count_chart(demo: demos.LaplaceCountDemo, index: int) -> alt.LayerChart:
    """Noisy-count densities (exact) for one true count at each ε, with the ±10 % band."""
    c = float(demo.counts[index])
    span = max(8.0 * float(demo.scales.max()), 2.0 * demo.tolerance * c)
    lo, hi = c - span, c + span
    x = np.linspace(lo, hi, 600)
    labels = [f"ε = {e:g}" for e in demo.epsilons]
    colour = alt.Scale(domain=labels, range=_EPS_COLOURS[: len(labels)])
    df = pd.concat(
        pd.DataFrame({"start": x, "density": demos.laplace_density(x, c, float(b)), "ε": lab})
        for lab, b in zip(labels, demo.scales, strict=True)
    )
    band = alt.Chart(pd.DataFrame({"start": [c * (1 - demo.tolerance)], "end": [c * (1 + demo.tolerance)]})).mark_rect(
        opacity=0.15, color="green"
    ).encode(x="start:Q", x2="end:Q")
    lines = alt.Chart(df).mark_line(strokeWidth=2).encode(
        x=_x_range(lo, hi, "published (noisy) count, people"),
        y=alt.Y("density:Q", title="how likely (probability density)"),
        color=alt.Color("ε:N", scale=colour, legend=alt.Legend(orient="top", title=None)),
    )
    hist_frames = []
    width = (hi - lo) / 60
    for j, lab in enumerate(labels):
        draws = demo.draws[index, j]
        h = _hist_df(draws[np.abs(draws - c) <= span], 60, lo, hi)
        h["density"] = h["count"] / (demo.draws.shape[-1] * width)
        h["ε"] = lab
        hist_frames.append(h)
    hist = alt.Chart(pd.concat(hist_frames)).mark_bar(opacity=0.2, binSpacing=0).encode(
        x="start:Q", x2="end:Q", y=alt.Y("density:Q", stack=None), y2="zero:Q",
        color=alt.Color("ε:N", scale=colour, legend=alt.Legend(orient="top", title=None)),
    )
    return (band + hist + lines).properties(autosize=_AUTOSIZE,
        height=240,
        title=_title(f"True count {c:,.0f}", f"green band: within ±{demo.tolerance:.0%} of the truth"),
    )


def averaging_chart(
    values: np.ndarray[Any, Any], truth: float, title: str, unit: str = "", how: str = ""
) -> alt.LayerChart:
    """Histogram of one mechanism's outputs with the true mean."""
    lo, hi = np.quantile(values, [0.005, 0.995])
    lo, hi = float(min(lo, truth)), float(max(hi, truth))
    if hi <= lo:
        hi = lo + 1.0
    df = _hist_df(values[(values >= lo) & (values <= hi)], 50, lo, hi)
    bars = alt.Chart(df).mark_bar(binSpacing=0, color="#4c78a8").encode(
        x=_x_range(lo, hi, f"published average{f' ({unit})' if unit else ''}", fmt="~s"),
        x2="end:Q",
        y=alt.Y("count:Q", title="simulated releases"),
        y2="zero:Q",
    )
    rule = alt.Chart(pd.DataFrame({"start": [truth]})).mark_rule(color="firebrick", strokeWidth=2).encode(x="start:Q")
    return (bars + rule).properties(autosize=_AUTOSIZE, height=220, title=_title(title, f"{how}; red line: the true average" if how else "red line: the true average"))


def majority_chart(c: demos.MajorityCurves) -> alt.Chart:
    """P[correct] against s for every mechanism and bound of Garivier's lecture."""
    series = {
        "exponential mechanism": (c.exponential, "solid"),
        "ISM for two outcomes (Garivier's “better mechanism”)": (c.better, "solid"),
        "ISM, general form": (c.ism, "solid"),
        "best any unbiased mechanism can do at ε": (c.unbiased_bound, "solid"),
        "best possible at ε/2 (dashed)": (c.bound_half, "dashed"),
        "best possible at ε/4 (dashed)": (c.bound_quarter, "dashed"),
    }
    df = pd.concat(
        pd.DataFrame({"s": c.s, "p_correct": v, "curve": k, "style": st_}) for k, (v, st_) in series.items()
    )
    return (
        alt.Chart(df)
        .mark_line(strokeWidth=2)
        .encode(
            x=alt.X("s:Q", title="number of “yes” votes s", scale=alt.Scale(nice=False)),
            y=alt.Y("p_correct:Q", title="chance the announced winner is right",
                    scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
            color=alt.Color("curve:N", sort=list(series), legend=alt.Legend(**_LEGEND_BOTTOM)),
            strokeDash=alt.StrokeDash("style:N", legend=None,
                                      scale=alt.Scale(domain=["solid", "dashed"], range=[[1, 0], [6, 4]])),
            tooltip=["curve", "s", alt.Tooltip("p_correct:Q", title="chance right", format=".1%")],
        )
        .properties(autosize=_AUTOSIZE, height=300, title=_title("How often each mechanism announces the right winner",
                                             "worst near a tie (s = n/2), almost always right far from it"))
    )


def mise_chart(curve: Any, title: str) -> alt.LayerChart:
    """MISE against the number of bins (log scales), with ±2 s.e. bands."""
    frames = []
    for name, mean, se in (
        ("raw histogram (not private)", curve.raw, curve.raw_se),
        ("noisy histogram (private)", curve.perturbed, curve.perturbed_se),
        ("synthetic sample drawn from it (private)", curve.smoothed, curve.smoothed_se),
    ):
        frames.append(pd.DataFrame({"bins": curve.bins, "MISE": mean, "lo": np.maximum(mean - 2 * se, 1e-6),
                                    "hi": mean + 2 * se, "method": name}))
    df = pd.concat(frames)
    bins = np.asarray(curve.bins, dtype=float)
    x = alt.X("bins:Q", title="number of bins (log scale)",
              scale=alt.Scale(type="log", domain=[float(bins.min()), float(bins.max())], nice=False))
    palette = alt.Scale(domain=list(df["method"].unique()), range=["#7f7f7f", "#e45756", "#4c78a8"])
    colour = alt.Color("method:N", sort=None, legend=alt.Legend(**_LEGEND_BOTTOM), scale=palette)
    line = alt.Chart(df).mark_line(point=True).encode(
        x=x, y=alt.Y("MISE:Q", title="error of the shape (MISE, log scale)", scale=alt.Scale(type="log")),
        color=colour,
        tooltip=["method", "bins", alt.Tooltip("MISE:Q", format=".4f")],
    )
    band = alt.Chart(df).mark_area(opacity=0.15).encode(
        x=x, y="lo:Q", y2="hi:Q", fill=alt.Fill("method:N", scale=palette, legend=None)
    )
    return (band + line).properties(autosize=_AUTOSIZE,
        height=280, title=_title(title, "lower is better; shaded: ± 2 standard errors of the simulation")
    )


def sample_chart(points: np.ndarray[Any, Any], title: str) -> alt.LayerChart:
    """Density histogram of a sample on [0, 1] with the true Beta(10, 10) density."""
    m = 30
    h = _hist_df(points, m, 0.0, 1.0)
    h["density"] = h["count"] / (max(len(points), 1) / m)
    bars = alt.Chart(h).mark_bar(binSpacing=0, opacity=0.8, color="#4c78a8").encode(
        x=_x_range(0.0, 1.0, "value (simulated data between 0 and 1)"),
        x2="end:Q",
        y=alt.Y("density:Q", title="density"),
        y2="zero:Q",
    )
    xs = np.linspace(0.0, 1.0, 200)
    dens = alt.Chart(pd.DataFrame({"start": xs, "density": demos.beta_density(xs)})).mark_line(
        color="black", strokeDash=[4, 3]
    ).encode(x="start:Q", y="density:Q")
    return (bars + dens).properties(autosize=_AUTOSIZE, height=200, title=_title(title, "dashed: the true shape"))


def composition_chart(c: composition.CompositionCurves) -> alt.LayerChart:
    """Total ε against the number of queries k, per rule (log-log)."""
    series = {
        RULE_LABELS[CompositionRule.BASIC]: c.basic,
        DRV_LABEL: c.drv,
        RULE_LABELS[CompositionRule.ADVANCED]: c.advanced,
        RULE_LABELS[CompositionRule.RDP]: c.rdp,
    }
    df = pd.concat(pd.DataFrame({"k": c.k, "total ε": v, "rule": k}) for k, v in series.items())
    lines = alt.Chart(df).mark_line(strokeWidth=2).encode(
        x=alt.X("k:Q", title="number of questions k (log scale)", scale=alt.Scale(type="log")),
        y=alt.Y("total ε:Q", title="total privacy cost ε (log scale)", scale=alt.Scale(type="log")),
        color=alt.Color("rule:N", sort=list(series), legend=alt.Legend(**_LEGEND_BOTTOM),
                        scale=alt.Scale(domain=list(series), range=[RULE_COLOURS[k] for k in series])),
        tooltip=["rule", "k", alt.Tooltip("total ε:Q", format=".4g")],
    )
    layers: list[Any] = [lines]
    if c.drv_crossover is not None:
        layers.append(
            alt.Chart(pd.DataFrame({"k": [c.drv_crossover]})).mark_rule(strokeDash=[4, 3], color="gray").encode(x="k:Q")
        )
    return alt.layer(*layers).properties(autosize=_AUTOSIZE,
        height=300, title=_title(f"Total cost of k questions at ε = {c.epsilon0:g} each",
                                 f"δ = {c.delta:g} for the advanced and Rényi rules")
    )


def accuracy_chart(acc: composition.AccuracyPerRule) -> alt.Chart:
    """Per-query Laplace RMSE against k for a fixed total ε, per rule (log-log)."""
    df = pd.concat(
        pd.DataFrame({"k": acc.k, "RMSE": acc.rmse[r], "ε per query": acc.per_query[r], "rule": RULE_LABELS[r]})
        for r in composition.DEMO_RULES
    )
    return (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X("k:Q", title="number of questions k (log scale)", scale=alt.Scale(type="log")),
            y=alt.Y("RMSE:Q", title="typical error of each count (± people, log scale)", scale=alt.Scale(type="log")),
            color=alt.Color("rule:N", sort=list(RULE_LABELS.values()), legend=alt.Legend(**_LEGEND_BOTTOM),
                            scale=alt.Scale(domain=list(RULE_LABELS.values()),
                                            range=[RULE_COLOURS[k] for k in RULE_LABELS.values()])),
            tooltip=["rule", "k", alt.Tooltip("ε per query:Q", format=".4g"),
                     alt.Tooltip("RMSE:Q", title="typical error (RMSE)", format=".4g")],
        )
        .properties(autosize=_AUTOSIZE, height=280, title=_title(f"Error of each answer when k questions share ε = {acc.total_epsilon:g}"))
    )


def rule_answers_chart(answers: dict[str, np.ndarray[Any, Any]], truth: float) -> alt.LayerChart:
    """Histograms of simulated noisy answers to one count under each rule's per-query ε."""
    allv = np.concatenate(list(answers.values()))
    lo, hi = (float(q) for q in np.quantile(allv, [0.005, 0.995]))
    frames = [_hist_df(v[(v >= lo) & (v <= hi)], 60, lo, hi).assign(rule=k) for k, v in answers.items()]
    bars = alt.Chart(pd.concat(frames)).mark_bar(opacity=0.45, binSpacing=0).encode(
        x=_x_range(lo, hi, "noisy answer (people)"),
        x2="end:Q",
        y=alt.Y("count:Q", title="simulated answers", stack=None),
        y2="zero:Q",
        color=alt.Color("rule:N", sort=list(answers), legend=alt.Legend(**_LEGEND_BOTTOM),
                        scale=alt.Scale(domain=list(answers), range=[RULE_COLOURS.get(k, "black") for k in answers])),
    )
    rule = alt.Chart(pd.DataFrame({"start": [truth]})).mark_rule(color="black", strokeDash=[4, 3]).encode(x="start:Q")
    return (bars + rule).properties(autosize=_AUTOSIZE, height=240, title=_title("What the answers look like",
                                                             f"dashed line: the true count {truth:g}"))
