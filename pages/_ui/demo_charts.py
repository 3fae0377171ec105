"""Streamlit/Altair helpers for the "Learn" demo pages only.

Chart builders take plain engine results (``planner.demos``) and return Altair charts;
the few widgets shared by every demo (seed + "Run again") live here too. Cached helpers
cache deterministic work or demo simulations keyed by their seed: demos release nothing,
so caching them is allowed (STYLE.md); nothing here ever draws noise for a release.
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

from planner import demos

ROOT = Path(__file__).resolve().parents[2]
CENSUS_CSV = ROOT / "data" / "census.csv"
CENSUS_SCHEMA = ROOT / "data" / "census.schema.json"

DEFAULT_SEED = 2024

RULE_LABELS = {
    demos.Rule.BASIC: "basic (sum of ε)",
    demos.Rule.ADVANCED: "advanced (best of DRV / KOV)",
    demos.Rule.RDP: "Rényi DP (Laplace)",
}


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


def _hist_df(values: np.ndarray[Any, Any], bins: int, lo: float, hi: float) -> pd.DataFrame:
    counts, edges = np.histogram(values, bins=bins, range=(lo, hi))
    return pd.DataFrame({"start": edges[:-1], "end": edges[1:], "count": counts})


def survey_estimate_chart(sim: demos.SurveySimulation) -> alt.Chart:
    """The unbiased estimate with its interval, beside the true rate and the raw yes-share."""
    pts = pd.DataFrame(
        {
            "what": [
                "true rate (what we want)",
                "share of 'yes' reports ȳ (biased)",
                "unbiased estimate (ȳ − (1 − p))/(2p − 1)",
            ],
            "value": [sim.true_rate, sim.report_rate, sim.estimate],
            "lower": [sim.true_rate, sim.report_rate, sim.lower],
            "upper": [sim.true_rate, sim.report_rate, sim.upper],
        }
    )
    y = alt.Y("what:N", title=None, sort=None)
    bars = alt.Chart(pts).mark_rule(strokeWidth=3).encode(
        x=alt.X("lower:Q", title="proportion", scale=alt.Scale(domain=[0, 1])),
        x2="upper:Q",
        y=y,
    )
    dots = alt.Chart(pts).mark_point(filled=True, size=120).encode(
        x="value:Q", y=y, color=alt.Color("what:N", legend=None),
        tooltip=[alt.Tooltip("what:N"), alt.Tooltip("value:Q", format=".3f"),
                 alt.Tooltip("lower:Q", format=".3f"), alt.Tooltip("upper:Q", format=".3f")],
    )
    return (bars + dots).properties(height=160, title=f"{sim.level:.0%} interval of the estimate")


def survey_reports_chart(sim: demos.SurveySimulation) -> alt.Chart:
    """How many true yes / no respondents reported yes / no."""
    df = pd.DataFrame({"truth": sim.truth, "report": sim.reports})
    df["true answer"] = np.where(df["truth"] == 1, "yes", "no")
    df["report"] = np.where(df["report"] == 1, "reports yes", "reports no")
    agg = df.groupby(["true answer", "report"]).size().reset_index(name="people")
    return (
        alt.Chart(agg)
        .mark_bar()
        .encode(
            x=alt.X("people:Q", title="respondents"),
            y=alt.Y("true answer:N", title="true answer"),
            color=alt.Color("report:N", title="report"),
            tooltip=["true answer", "report", "people"],
        )
        .properties(height=140, title="What the respondents said (the collector sees only the colours)")
    )


def repeated_surveys_chart(rr_est: np.ndarray[Any, Any], direct: np.ndarray[Any, Any], truth: float) -> alt.LayerChart:
    """Estimates over many repeated surveys: randomized response vs asking directly."""
    lo = float(min(rr_est.min(), direct.min(), 0.0))
    hi = float(max(rr_est.max(), direct.max(), 1.0))
    a = _hist_df(rr_est, 60, lo, hi).assign(method="randomized response")
    b = _hist_df(direct, 60, lo, hi).assign(method="asking directly (no privacy)")
    df = pd.concat([a, b])
    bars = alt.Chart(df).mark_bar(opacity=0.55, binSpacing=0).encode(
        x=alt.X("start:Q", title="estimated proportion"),
        x2="end:Q",
        y=alt.Y("count:Q", title="surveys", stack=None),
        color=alt.Color("method:N", title=None),
    )
    rule = alt.Chart(pd.DataFrame({"x": [truth]})).mark_rule(color="black", strokeDash=[4, 3]).encode(x="x:Q")
    return (bars + rule).properties(height=220, title="Estimates from 2,000 repeated surveys")


def likelihood_ratio_chart(epsilon: float, scale: float, observed: np.ndarray[Any, Any]) -> alt.LayerChart:
    """Likelihood ratio of "X smokes" vs "X does not" as a function of the observed difference."""
    d = np.linspace(-8 * scale, 8 * scale + 1, 400)
    lr = demos.difference_likelihood_ratio(d, scale)
    df = pd.DataFrame({"difference": d, "ratio": lr})
    line = alt.Chart(df).mark_line().encode(
        x=alt.X("difference:Q", title="difference of the two noisy answers"),
        y=alt.Y("ratio:Q", title="likelihood ratio (smokes : does not)", scale=alt.Scale(type="log")),
    )
    bounds = pd.DataFrame({"y": [np.exp(epsilon), np.exp(-epsilon)], "label": ["e^ε", "e^−ε"]})
    rules = alt.Chart(bounds).mark_rule(color="firebrick", strokeDash=[5, 3]).encode(y="y:Q", tooltip=["label"])
    obs = pd.DataFrame({"difference": observed[:200], "ratio": demos.difference_likelihood_ratio(observed[:200], scale)})
    pts = alt.Chart(obs).mark_circle(size=18, opacity=0.5, color="gray").encode(x="difference:Q", y="ratio:Q")
    return (line + rules + pts).properties(height=260, title="The evidence never exceeds e^ε")


def posterior_chart(posterior: np.ndarray[Any, Any], lo: float, hi: float, prior: float) -> alt.LayerChart:
    """Histogram of the attacker's posterior over repeated noisy answers, with its bounds."""
    df = _hist_df(posterior, 50, 0.0, 1.0)
    bars = alt.Chart(df).mark_bar(binSpacing=0).encode(
        x=alt.X("start:Q", title="attacker's belief that X smokes, after the answers",
                scale=alt.Scale(domain=[0, 1])),
        x2="end:Q",
        y=alt.Y("count:Q", title="repetitions"),
    )
    marks = pd.DataFrame({"x": [lo, hi, prior], "what": ["lowest possible", "highest possible", "prior"]})
    rules = alt.Chart(marks).mark_rule(strokeDash=[5, 3]).encode(
        x="x:Q", color=alt.Color("what:N", title=None), tooltip=["what", alt.Tooltip("x:Q", format=".3f")]
    )
    return (bars + rules).properties(height=240)


def power_chart(epsilon: float, delta: float) -> alt.Chart:
    """Power of a level-γ membership test: seed 001's bound, the full bound, the Laplace count."""
    g = np.linspace(0.0, 1.0, 201)
    frames = [
        pd.DataFrame({"level": g, "power": demos.membership_power_bound(g, epsilon, delta),
                      "curve": "bound min(1, γe^ε + δ) (seed 001)"}),
        pd.DataFrame({"level": g, "power": demos.membership_power_bound(g, epsilon, delta, tight=True),
                      "curve": "full ε-DP bound (Kairouz et al.)"}),
        pd.DataFrame({"level": g, "power": demos.laplace_count_power(g, epsilon),
                      "curve": "best test against a Laplace count (δ = 0)"}),
        pd.DataFrame({"level": g, "power": g, "curve": "guessing (power = level)"}),
    ]
    df = pd.concat(frames)
    return (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=alt.X("level:Q", title="level γ (false-alarm rate of the test)"),
            y=alt.Y("power:Q", title="power (chance of detecting X)", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("curve:N", title=None, legend=alt.Legend(orient="bottom", columns=2)),
            strokeDash=alt.StrokeDash("curve:N", legend=None),
        )
        .properties(height=300, title="Testing 'X is in the data' from a DP release")
    )


def laplace_count_chart(demo: demos.LaplaceCountDemo, index: int) -> alt.LayerChart:
    """Noisy-count densities (exact) for one true count at each ε, with the ±10 % band."""
    c = float(demo.counts[index])
    span = max(8.0 * float(demo.scales.max()), 2.0 * demo.tolerance * c)
    x = np.linspace(c - span, c + span, 600)
    frames = []
    for e, b in zip(demo.epsilons, demo.scales, strict=True):
        frames.append(pd.DataFrame({"noisy count": x, "density": demos.laplace_density(x, c, float(b)),
                                    "ε": f"ε = {e:g}"}))
    df = pd.concat(frames)
    band = alt.Chart(pd.DataFrame({"a": [c * (1 - demo.tolerance)], "b": [c * (1 + demo.tolerance)]})).mark_rect(
        opacity=0.15, color="green"
    ).encode(x="a:Q", x2="b:Q")
    lines = alt.Chart(df).mark_line().encode(
        x=alt.X("noisy count:Q", title="noisy count", scale=alt.Scale(domain=[c - span, c + span])),
        y=alt.Y("density:Q", title="probability density"),
        color=alt.Color("ε:N", title=None),
    )
    hist_frames = []
    for j, e in enumerate(demo.epsilons):
        draws = demo.draws[index, j]
        draws = draws[np.abs(draws - c) <= span]
        h = _hist_df(draws, 60, c - span, c + span)
        width = (2 * span) / 60
        h["density"] = h["count"] / (demo.draws.shape[-1] * width)
        h["ε"] = f"ε = {e:g}"
        hist_frames.append(h)
    hist = alt.Chart(pd.concat(hist_frames)).mark_bar(opacity=0.25, binSpacing=0).encode(
        x="start:Q", x2="end:Q", y=alt.Y("density:Q", stack=None), color=alt.Color("ε:N", title=None)
    )
    return (band + hist + lines).properties(height=260, title=f"True count {c:g} (green: within ±{demo.tolerance:.0%})")


def averaging_chart(values: np.ndarray[Any, Any], truth: float, title: str) -> alt.LayerChart:
    """Histogram of one mechanism's outputs with the true mean."""
    lo, hi = np.quantile(values, [0.005, 0.995])
    lo, hi = float(min(lo, truth)), float(max(hi, truth))
    df = _hist_df(values[(values >= lo) & (values <= hi)], 50, lo, hi)
    bars = alt.Chart(df).mark_bar(binSpacing=0).encode(
        x=alt.X("start:Q", title="released mean", axis=alt.Axis(format="~s")),
        x2="end:Q",
        y=alt.Y("count:Q", title="runs"),
    )
    rule = alt.Chart(pd.DataFrame({"x": [truth]})).mark_rule(color="firebrick", strokeWidth=2).encode(x="x:Q")
    return (bars + rule).properties(height=240, title=title)


def majority_chart(c: demos.MajorityCurves) -> alt.Chart:
    """P[correct] against s for every mechanism and bound of seed 000."""
    series = {
        "exponential mechanism": c.exponential,
        "better mechanism = ISM for 2 outputs": c.better,
        "ISM (general, /2)": c.ism,
        "bound for unbiased mechanisms at ε": c.unbiased_bound,
        "bound at ε/4 (matches the ISM /2)": c.bound_quarter,
        "bound at ε/2 (matches the ISM for 2 outputs)": c.bound_half,
    }
    df = pd.concat(pd.DataFrame({"s": c.s, "P[correct]": v, "curve": k}) for k, v in series.items())
    dashed = ["bound at ε/4 (matches the ISM /2)", "bound at ε/2 (matches the ISM for 2 outputs)"]
    df["style"] = np.where(df["curve"].isin(dashed), "bound at a smaller ε", "mechanism or bound")
    return (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=alt.X("s:Q", title="s = number of 1s among the n voters"),
            y=alt.Y("P[correct]:Q", title="P[the released majority is correct]", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("curve:N", title=None, legend=alt.Legend(orient="bottom", columns=2)),
            strokeDash=alt.StrokeDash("style:N", title=None),
            tooltip=["curve", "s", alt.Tooltip("P[correct]:Q", format=".4f")],
        )
        .properties(height=340)
    )


def mise_chart(curve: Any, title: str) -> alt.LayerChart:
    """MISE against the number of bins (log scales), with ±2 s.e. bands."""
    frames = []
    for name, mean, se in (
        ("raw histogram (not private)", curve.raw, curve.raw_se),
        ("perturbed histogram (ε-DP)", curve.perturbed, curve.perturbed_se),
        ("smoothed histogram, n draws (ε-DP)", curve.smoothed, curve.smoothed_se),
    ):
        frames.append(pd.DataFrame({"bins": curve.bins, "MISE": mean, "lo": np.maximum(mean - 2 * se, 1e-6),
                                    "hi": mean + 2 * se, "method": name}))
    df = pd.concat(frames)
    x = alt.X("bins:Q", title="number of bins m", scale=alt.Scale(type="log"))
    line = alt.Chart(df).mark_line(point=True).encode(
        x=x, y=alt.Y("MISE:Q", title="mean integrated squared error", scale=alt.Scale(type="log")),
        color=alt.Color("method:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["method", "bins", alt.Tooltip("MISE:Q", format=".4f")],
    )
    band = alt.Chart(df).mark_area(opacity=0.15).encode(x=x, y="lo:Q", y2="hi:Q", color="method:N")
    return (band + line).properties(height=280, title=title)


def sample_chart(points: np.ndarray[Any, Any], title: str) -> alt.LayerChart:
    """Density histogram of a sample on [0, 1] with the true Beta(10, 10) density."""
    m = 30
    h = _hist_df(points, m, 0.0, 1.0)
    h["density"] = h["count"] / (max(len(points), 1) / m)
    bars = alt.Chart(h).mark_bar(binSpacing=0, opacity=0.8).encode(
        x=alt.X("start:Q", title="x", scale=alt.Scale(domain=[0, 1])),
        x2="end:Q",
        y=alt.Y("density:Q", title="density"),
    )
    xs = np.linspace(0.0, 1.0, 200)
    dens = alt.Chart(pd.DataFrame({"start": xs, "density": demos.beta_density(xs)})).mark_line(
        color="black", strokeDash=[4, 3]
    ).encode(x="start:Q", y="density:Q")
    return (bars + dens).properties(height=220, title=title)


def composition_chart(c: demos.CompositionCurves) -> alt.LayerChart:
    """Total ε against the number of queries k, per rule (log-log)."""
    series = {
        "basic (sum of ε)": c.basic,
        "advanced, DRV formula (seed 002)": c.drv,
        "advanced (best of DRV / KOV)": c.advanced,
        "Rényi DP (Laplace)": c.rdp,
    }
    df = pd.concat(pd.DataFrame({"k": c.k, "total ε": v, "rule": k}) for k, v in series.items())
    lines = alt.Chart(df).mark_line().encode(
        x=alt.X("k:Q", title="number of queries k", scale=alt.Scale(type="log")),
        y=alt.Y("total ε:Q", title=f"total ε (at δ = {c.delta:g})", scale=alt.Scale(type="log")),
        color=alt.Color("rule:N", title=None, legend=alt.Legend(orient="bottom", columns=2)),
        tooltip=["rule", "k", alt.Tooltip("total ε:Q", format=".4g")],
    )
    layers: list[Any] = [lines]
    if c.drv_crossover is not None:
        layers.append(
            alt.Chart(pd.DataFrame({"k": [c.drv_crossover]})).mark_rule(strokeDash=[4, 3], color="gray").encode(x="k:Q")
        )
    return alt.layer(*layers).properties(height=300)


def accuracy_chart(acc: demos.AccuracyPerRule) -> alt.Chart:
    """Per-query Laplace RMSE against k for a fixed total ε, per rule (log-log)."""
    df = pd.concat(
        pd.DataFrame({"k": acc.k, "RMSE": acc.rmse[r], "ε per query": acc.per_query[r], "rule": RULE_LABELS[r]})
        for r in demos.Rule
    )
    return (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X("k:Q", title="number of queries k", scale=alt.Scale(type="log")),
            y=alt.Y("RMSE:Q", title="error (RMSE) of each count", scale=alt.Scale(type="log")),
            color=alt.Color("rule:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["rule", "k", alt.Tooltip("ε per query:Q", format=".4g"), alt.Tooltip("RMSE:Q", format=".4g")],
        )
        .properties(height=300)
    )


def rule_answers_chart(answers: dict[str, np.ndarray[Any, Any]], truth: float) -> alt.LayerChart:
    """Histograms of simulated noisy answers to one count under each rule's per-query ε."""
    allv = np.concatenate(list(answers.values()))
    lo, hi = np.quantile(allv, [0.005, 0.995])
    frames = [
        _hist_df(v[(v >= lo) & (v <= hi)], 60, float(lo), float(hi)).assign(rule=k) for k, v in answers.items()
    ]
    bars = alt.Chart(pd.concat(frames)).mark_bar(opacity=0.45, binSpacing=0).encode(
        x=alt.X("start:Q", title="noisy answer to one count"),
        x2="end:Q",
        y=alt.Y("count:Q", title="runs", stack=None),
        color=alt.Color("rule:N", title=None, legend=alt.Legend(orient="bottom")),
    )
    rule = alt.Chart(pd.DataFrame({"x": [truth]})).mark_rule(color="black", strokeDash=[4, 3]).encode(x="x:Q")
    return (bars + rule).properties(height=240)
