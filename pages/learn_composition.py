"""Learn: the cost of asking many questions — composition."""

import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `streamlit run pages/...`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd
import streamlit as st

from pages._ui import charts
from pages._ui import demo_charts as dc
from pages._ui import state as S
from pages._ui.guard import guard
from planner.learn import composition as demos
from planner.privacy.accountants import rule as registered_rule


@st.cache_data(show_spinner=False, max_entries=64)
def _curves(epsilon0: float, k_max: int, delta: float) -> demos.CompositionCurves:
    return demos.composition_curves(epsilon0, demos.log_grid(k_max, 30), delta)


@st.cache_data(show_spinner=False, max_entries=64)
def _accuracy(total: float, k_max: int, delta: float) -> demos.AccuracyPerRule:
    return demos.accuracy_per_rule(total, demos.log_grid(k_max, 15), delta)


st.title("The cost of asking many questions")
st.markdown(
    "Every published answer leaks a little, and the leaks add up. The simplest rule (basic "
    "composition) adds the ε of every question; smarter accounting (advanced composition, "
    "Rényi DP) proves a smaller total for many small questions, at the price of a tiny chance "
    "δ that the guarantee fails (Gatica-Perez, Sajadmanesh and Shahin Shamsabadi, *An introduction to trustworthy machine learning*, AIDA course, 2022)."
)

c1, c2, c3 = st.columns(3)
eps0 = c1.select_slider("ε of each question", [0.001, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0], **S.learned("comp_eps0", 0.1),
                        help=dc.EPSILON_HELP)
k_max = c2.select_slider("Up to k questions", [10, 100, 1000, 3000], **S.learned("comp_kmax", 1000))
delta = c3.select_slider("δ (chance the guarantee fails)", [1e-9, 1e-7, 1e-6, 1e-5, 1e-3], **S.learned("comp_delta", 1e-6),
                         help="The advanced and Rényi rules hold except with this tiny probability; "
                              "pick it much smaller than 1 / number of people.")

with guard():
    curves = _curves(float(eps0), int(k_max), float(delta))

charts.draw(dc.composition_chart(curves))
if curves.drv_crossover is None:
    cross = f"With ε = {eps0:g} per question (e^ε ≥ 2) the textbook advanced formula never beats the basic rule."
else:
    cross = (
        f"The textbook advanced formula (Dwork, Rothblum and Vadhan, 2010) beats the basic rule from k = "
        f"{curves.drv_crossover} "
        f"questions on (dashed line); the engine's tighter advanced bound from k = "
        f"{curves.advanced_crossover if curves.advanced_crossover is not None else '—'}."
    )
st.markdown(
    f"**What you see:** the total privacy cost as more questions are asked. {cross} Rényi DP, "
    f"which tracks the Laplace noise exactly, is lower still. For k = {int(curves.k[-1]):,}: "
    f"basic {curves.basic[-1]:.3g}, advanced {curves.advanced[-1]:.3g}, Rényi {curves.rdp[-1]:.3g}."
)

st.subheader("What each rule buys for a fixed budget")
st.markdown(
    "Turn it around: with a fixed total budget, a tighter rule lets each question use a larger "
    "ε, so each answer needs less noise."
)
total = st.select_slider("Total ε to spend", [0.1, 0.5, 1.0, 2.0, 5.0, 10.0], **S.learned("comp_total", 1.0),
                         help=dc.EPSILON_HELP)
with guard():
    acc = _accuracy(float(total), int(k_max), float(delta))
charts.draw(dc.accuracy_chart(acc))
SHORT = {r: registered_rule(r).short for r in demos.DEMO_RULES}
table = pd.DataFrame({"questions k": acc.k})
config: dict[str, object] = {"questions k": st.column_config.NumberColumn(format="%d")}
for r in demos.DEMO_RULES:
    table[f"ε each ({SHORT[r]})"] = acc.per_query[r]
    config[f"ε each ({SHORT[r]})"] = st.column_config.NumberColumn(
        format="%.3g", help=f"ε each question may use under {dc.RULE_LABELS[r]}")
for r in demos.DEMO_RULES:
    table[f"error ({SHORT[r]})"] = acc.rmse[r]
    config[f"error ({SHORT[r]})"] = st.column_config.NumberColumn(
        format="±%.3g", help="Typical error of each count in people (RMSE = √2/ε)")
st.dataframe(table.iloc[:: max(1, len(table) // 6)], hide_index=True, width="stretch", column_config=config)
ks = [int(k) for k in acc.k]
k_pick = st.select_slider("Number of questions k (for the simulated answers below)", ks,
                          **S.learned("comp_kpick", ks[len(ks) // 2], options=ks))
seed = dc.seed_controls("comp")
i = int(list(acc.k).index(k_pick))
g = dc.rng(seed)
answers = {
    dc.RULE_LABELS[r]: demos.simulate_count_answers(500.0, float(acc.per_query[r][i]), 2000, g) for r in demos.DEMO_RULES
}
charts.draw(dc.rule_answers_chart(answers, 500.0))
st.caption(
    f"One count (true value 500) answered {2000:,} times with each rule's ε per question, when "
    f"{k_pick:,} counting questions (Δ = 1, Laplace noise) share ε = {total:g} (δ = {delta:g} for the "
    "advanced and Rényi rules). Typical error (RMSE) = √2/ε people per count. Data-independent "
    "planning numbers."
)
