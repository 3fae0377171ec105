"""Learn: what an attacker can learn — the differencing attack and the testing view."""

import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `streamlit run pages/...`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import math

import streamlit as st

from pages._ui import demo_charts as dc
from planner import demos
from planner.errors import PlannerError


@st.cache_data(show_spinner=False, max_entries=64)
def _attack(target: int, epsilon: float, prior: float, seed: int) -> demos.DifferencingAttack:
    people = dc.census_person_ids()
    return demos.differencing_attack(
        people["smoker"].to_numpy(), target, epsilon, prior, 2000, dc.rng(seed)
    )


st.title("What an attacker can learn")
st.markdown(
    "Two harmless-looking counts — “how many smoke?” and “how many smoke, not counting X?” — "
    "reveal X exactly when answered exactly (seeds 000 and 004). With the Laplace mechanism "
    "the attacker only gets evidence, and never more than a factor e^ε."
)

people = dc.census_person_ids()
c1, c2, c3 = st.columns(3)
first_smoker = int(people.index[people["smoker"] == 1][0]) if people["smoker"].any() else 0
target = c1.number_input(
    "Target X (row of the census sample)", 0, len(people) - 1, first_smoker, key="atk_target"
)
epsilon = c2.select_slider(
    "ε of each count", options=[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0], value=0.5, key="atk_eps"
)
prior = c3.slider("Attacker's prior that X smokes", 0.01, 0.99, 0.19, 0.01, key="atk_prior",
                  help="0.19 is about the public smoking rate")
seed = dc.seed_controls("atk")

try:
    res = _attack(int(target), float(epsilon), float(prior), seed)
    lo, hi = demos.posterior_bounds(res.prior, res.epsilon)
except PlannerError as exc:
    st.error(str(exc))
    st.stop()

pid = int(people["person_id"].iloc[int(target)])
st.subheader("1. Exact answers")
e1, e2, e3 = st.columns(3)
e1.metric("How many smoke?", f"{res.exact_total:,}")
e2.metric(f"… not counting person {pid}?", f"{res.exact_without:,}")
e3.metric("Difference: X smokes?", "yes" if res.revealed == 1 else "no")
st.caption("Computed on the synthetic census sample (data-dependent; never shown for a real table).")

st.subheader("2. Answers with Laplace noise")
n1, n2, n3 = st.columns(3)
n1.metric("Noisy: how many smoke?", f"{res.noisy_total[0]:,.1f}")
n2.metric("Noisy: … not counting X?", f"{res.noisy_without[0]:,.1f}")
n3.metric("Attacker's belief X smokes", f"{res.posterior[0]:.3f}", help=f"prior {res.prior:.2f}")
st.markdown(
    f"Each answer carries Laplace noise of scale {res.scale:.3g}. Whatever the answers, the "
    f"attacker's odds move by at most e^ε = {res.bound:.3g}: from a prior of {res.prior:.2f} "
    f"the belief stays between {float(lo):.3f} and {float(hi):.3f}. "
    f"(Both questions cost {res.total_epsilon:g} in all by basic composition; only the first "
    "depends on X.) Below: the belief over 2,000 repetitions of the pair of questions."
)
left, right = st.columns(2)
left.altair_chart(dc.posterior_chart(res.posterior, float(lo), float(hi), res.prior), width="stretch")
right.altair_chart(
    dc.likelihood_ratio_chart(res.epsilon, res.scale, res.noisy_total - res.noisy_without), width="stretch"
)

st.subheader("3. The same guarantee as a hypothesis test (seed 001)")
delta = st.select_slider("δ", options=[0.0, 1e-6, 1e-3, 0.01, 0.05], value=0.0, key="atk_delta")
try:
    st.altair_chart(dc.power_chart(float(epsilon), float(delta)), width="stretch")
except PlannerError as exc:
    st.error(str(exc))
st.markdown(
    f"Any test of “X is in the data” that wrongly accuses an absent person with probability γ "
    f"catches a present one with probability at most γ·e^ε (+ δ), capped at 1: at ε = {epsilon:g}, "
    f"a 5 % false-alarm rate buys at most {min(1.0, 0.05 * math.exp(float(epsilon)) + float(delta)):.1%} power. "
    "The best test against a Laplace count reaches this bound for small γ."
)
