"""Training budget: the privacy of DP-SGD under the Rényi and the optimal accountant."""

import sys
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `streamlit run pages/...`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from pages._ui import charts, fmt
from pages._ui.guard import guard
from planner.planning import dpsgd
from planner.privacy.budget import CompositionRule
from planner.privacy.sampling import SamplingScheme

#: Durable values (keys no widget uses) and their defaults: widget state is dropped when
#: the page is not rendered, these survive a visit to another page. δ = 1e-6 ≪ 1/N = 1.7e-5
#: at N = 60,000, as the page itself advises.
DEFAULTS: dict[str, Any] = {
    "train.n": 60000, "train.batch": 256, "train.epochs": 60.0, "train.sigma": 1.1,
    "train.delta": 1e-6, "train.scheme": SamplingScheme.POISSON, "train.target": 2.0,
}
RDP, PLD = CompositionRule.RDP, CompositionRule.PLD  # the two accountants of a training run (dpsgd.ACCOUNTANTS)
ACCOUNTANT_LABELS = {RDP: "Rényi DP (moments accountant)", PLD: "optimal (privacy loss distributions)"}
COLOURS = {RDP: "#9aa4b1", PLD: "#1f6feb"}
SCHEME_LABELS = {SamplingScheme.POISSON: "Poisson sampling",
                 SamplingScheme.WITHOUT_REPLACEMENT: "fixed size, without replacement"}

ss = st.session_state
for key, default in DEFAULTS.items():
    ss.setdefault(key, default)


def _widget_key(durable: str) -> str:
    return durable.replace(".", "_") + "_w"


def _keep(durable: str) -> None:
    ss[durable] = ss[_widget_key(durable)]


def _seed(durable: str) -> str:
    """The widget's key, seeded from the durable value before the widget is drawn."""
    wk = _widget_key(durable)
    if wk not in ss:
        ss[wk] = ss[durable]
    return wk


@st.cache_data(show_spinner=False, max_entries=64)
def _privacy(n: int, batch: int, epochs: float, sigma: float, delta: float, scheme: SamplingScheme) -> dpsgd.TrainingPrivacy:
    run = dpsgd.TrainingRun.from_batch(n=n, batch=batch, epochs=epochs, sigma=sigma, delta=delta, scheme=scheme)
    return dpsgd.training_epsilon(run, with_error=True)


@st.cache_data(show_spinner=False, max_entries=64)
def _curve(n: int, batch: int, epochs: float, sigma: float, delta: float, scheme: SamplingScheme) -> pd.DataFrame:
    run = dpsgd.TrainingRun.from_batch(n=n, batch=batch, epochs=epochs, sigma=sigma, delta=delta, scheme=scheme)
    grid = np.unique(np.round(np.geomspace(max(min(1.0, epochs), 0.1), max(2.0 * epochs, 2.0), 14), 2))
    curve = dpsgd.epsilon_curve(run, grid)
    return pd.DataFrame([
        {"epochs": e, "ε": eps, "accountant": ACCOUNTANT_LABELS[rule]}
        for rule in dpsgd.ACCOUNTANTS for e, eps in zip(curve["epochs"], curve[rule], strict=True)
    ])


@st.cache_data(show_spinner=False, max_entries=64)
def _solve(kind: str, n: int, batch: int, epochs: float, sigma: float, delta: float, scheme: SamplingScheme,
           target: float) -> dpsgd.Solution:
    run = dpsgd.TrainingRun.from_batch(n=n, batch=batch, epochs=epochs, sigma=sigma, delta=delta, scheme=scheme)
    return dpsgd.solve_sigma(run, target) if kind == "sigma" else dpsgd.solve_epochs(run, target)


st.title("Training budget (DP-SGD)")
st.markdown(
    "Differentially private stochastic gradient descent (Abadi et al. 2016; Gatica-Perez, Sajadmanesh & "
    "Shahin Shamsabadi, *An introduction to trustworthy machine learning*, AIDA course, 2022) trains on "
    "random batches, clips every example's gradient to a norm C and adds Gaussian noise of standard "
    "deviation σ·C to each batch's sum. Each step is a sampled Gaussian mechanism; the training run "
    "composes thousands of them. This page computes what the whole run costs in ε under two "
    "accountants: Rényi DP (Mironov, Talwar & Zhang 2019, the usual *moments accountant*) and the "
    "optimal one, which composes the exact privacy loss distributions (Koskela, Jälkö & Honkela 2020; "
    "Doroshenko et al. 2022). Both are valid guarantees; the optimal one is never larger."
)

c1, c2, c3 = st.columns(3)
c1.number_input("Training examples N", min_value=1, max_value=10**9, step=1000, key=_seed("train.n"),
                on_change=_keep, args=("train.n",))
c2.number_input("Batch size B (expected)", min_value=1, max_value=10**9, step=16, key=_seed("train.batch"),
                on_change=_keep, args=("train.batch",),
                help="With Poisson sampling each example joins a batch with probability q = B/N.")
c3.number_input("Epochs", min_value=0.01, max_value=10_000.0, step=1.0, key=_seed("train.epochs"),
                on_change=_keep, args=("train.epochs",), help="Steps = ⌈epochs · N / B⌉.")
c4, c5, c6 = st.columns(3)
c4.number_input("Noise multiplier σ", min_value=0.01, max_value=1000.0, step=0.05, format="%.3f",
                key=_seed("train.sigma"), on_change=_keep, args=("train.sigma",),
                help="Noise standard deviation divided by the clipping norm C.")
c5.number_input("δ", min_value=1e-12, max_value=0.1, step=1e-6, format="%.1e", key=_seed("train.delta"),
                on_change=_keep, args=("train.delta",), help="Keep δ much smaller than 1/N.")
c6.radio("Batches", list(SamplingScheme), key=_seed("train.scheme"), on_change=_keep,
         args=("train.scheme",), horizontal=True, format_func=SCHEME_LABELS.__getitem__,
         help="Poisson: add/remove-one neighbours (the standard analysis). Fixed size: substitute-one "
              "neighbours, whose sensitivity is 2C.")

args = (int(ss["train.n"]), int(ss["train.batch"]), float(ss["train.epochs"]), float(ss["train.sigma"]),
        float(ss["train.delta"]), SamplingScheme(ss["train.scheme"]))
with guard():
    priv = _privacy(*args)
    curve = _curve(*args)

m1, m2, m3, m4 = st.columns(4)
m1.metric("ε, Rényi DP", fmt.eps(priv.epsilon[RDP]))
m2.metric("ε, optimal accountant", fmt.eps(priv.epsilon[PLD]),
          delta=f"−{fmt.eps(priv.epsilon[RDP] - priv.epsilon[PLD])}", delta_color="inverse",
          help="Privacy loss distributions, discretised pessimistically: never below the exact ε. "
               + (f"Discretisation error estimate: {priv.pld_error:.2g}." if priv.pld_error is not None else ""))
m3.metric("Steps", f"{priv.run.steps:,}", help=f"sampling rate q = {priv.run.sampling_rate:.4g}")
m4.metric("Computed in", f"{priv.seconds * 1000:.0f} ms")
st.caption(
    f"The Rényi bound overstates this run's cost by {priv.saving:.1%}: the optimal accountant certifies "
    f"the same training at ε = {fmt.eps(priv.epsilon[PLD])} (δ = {priv.run.delta:g})."
)

chart = (
    alt.Chart(curve, title=alt.TitleParams("ε against epochs", subtitle="same N, batch, σ and δ"))
    .mark_line(point=True)
    .encode(
        x=alt.X("epochs:Q", scale=alt.Scale(type="log"), title="epochs"),
        y=alt.Y("ε:Q", title="ε"),
        color=alt.Color("accountant:N", scale=alt.Scale(domain=list(ACCOUNTANT_LABELS.values()),
                                                        range=[COLOURS[r] for r in ACCOUNTANT_LABELS]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=["accountant:N", alt.Tooltip("epochs:Q", format=".3g"), alt.Tooltip("ε:Q", format=".4g")],
    )
)
charts.draw(chart)

st.subheader("Plan for a target ε")
st.number_input("Target ε", min_value=0.01, max_value=100.0, step=0.1, key=_seed("train.target"),
                on_change=_keep, args=("train.target",))
target = float(ss["train.target"])
left, right = st.columns(2)
with guard(stop=False, where=left):
    by_sigma = _solve("sigma", *args, target)
    left.metric("Least σ at these epochs", f"{by_sigma.run.sigma:.4g}",
                help=f"ε = {fmt.eps(by_sigma.privacy.epsilon[PLD])} with the optimal accountant; "
                     f"Rényi DP would need more noise for the same target.")
    left.caption(f"Rényi DP at that σ: ε = {fmt.eps(by_sigma.privacy.epsilon[RDP])}.")
with guard(stop=False, where=right):
    by_epochs = _solve("epochs", *args, target)
    shown = by_epochs.to_dict()["epochs"]
    right.metric("Most epochs at this σ", f"{shown:,}" if isinstance(shown, int) else f"{shown:.3g}",
                 help=f"{by_epochs.run.steps:,} steps; ε = {fmt.eps(by_epochs.privacy.epsilon[PLD])} "
                      "with the optimal accountant.")
    right.caption(f"Rényi DP at those epochs: ε = {fmt.eps(by_epochs.privacy.epsilon[RDP])}.")

st.subheader("What to know")
st.markdown("\n".join(f"- {line}" for line in dpsgd.guidance(priv.run)))
st.caption("Planning numbers only: computed from N, the batch size, epochs, σ and δ, never from data.")
