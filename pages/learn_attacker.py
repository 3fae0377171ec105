"""Learn: what an attacker can learn — the differencing attack and the testing view."""

import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `streamlit run pages/...`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import math

import streamlit as st

from pages._ui import charts
from pages._ui import demo_charts as dc
from pages._ui import state as S
from pages._ui.guard import guard
from planner.learn import attacker as demos


@st.cache_data(show_spinner=False, max_entries=64)
def _attack(target: int, epsilon: float, prior: float, seed: int) -> demos.DifferencingAttack:
    people = dc.census_person_ids()
    return demos.differencing_attack(
        people["smoker"].to_numpy(), target, epsilon, prior, 2000, dc.rng(seed)
    )


st.title("What an attacker can learn")
st.markdown(
    "Two harmless-looking counts — “how many smoke?” and “how many smoke, not counting X?” — "
    "reveal X exactly when answered exactly (Garivier, *How to learn while respecting individual privacy?*, ENS de Lyon, 2021; Borealis AI, *Tutorial #12: Differential privacy I: Introduction*, 2021). With the Laplace mechanism "
    "the attacker only gets evidence, and never more than a factor e^ε."
)

people = dc.census_person_ids()
c1, c2, c3 = st.columns(3)
first_smoker = int(people.index[people["smoker"] == 1][0]) if people["smoker"].any() else 0
target = c1.number_input(
    "Target X (row of the census sample)", 0, len(people) - 1, **S.learned("atk_target", first_smoker)
)
epsilon = c2.select_slider(
    "ε of each count", options=[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0], **S.learned("atk_eps", 0.5),
    help=dc.EPSILON_HELP,
)
prior = c3.slider("Attacker's prior that X smokes", 0.01, 0.99, step=0.01, **S.learned("atk_prior", 0.19),
                  help="0.19 is about the public smoking rate")
seed = dc.seed_controls("atk")

with guard():
    res = _attack(int(target), float(epsilon), float(prior), seed)
    lo, hi = demos.posterior_bounds(res.prior, res.epsilon)

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
n3.metric("Attacker's belief X smokes", f"{res.posterior[0]:.1%}", help=f"before the answers: {res.prior:.0%}")
st.markdown(
    f"**What you see:** each answer now carries random noise of typical size {res.scale:.3g} people. "
    f"Whatever the answers, the attacker's odds move by at most a factor e^ε = {res.bound:.3g}: "
    f"from {res.prior:.0%} before, the belief stays between {float(lo):.1%} and {float(hi):.1%}. "
    f"Both questions together cost ε = {res.total_epsilon:g} (only the first involves X)."
)
left, right = st.columns(2)
charts.draw(dc.posterior_chart(res.posterior, float(lo), float(hi), res.prior), left)
charts.draw(
    dc.likelihood_ratio_chart(res.epsilon, res.scale, res.noisy_total - res.noisy_without), right)

st.subheader("3. The same guarantee as a hypothesis test")
st.caption("After Wasserman and Zhou, *A statistical framework for differential privacy*, JASA 2010 (as presented by Yang Yu, Purdue, 2015).")
st.markdown(
    "Read DP as a test: an attacker must decide “X is in the data” or not. If they accept "
    "wrongly accusing a share γ of absent people, how often can they catch X when X is there?"
)
delta = st.select_slider(
    "δ (small chance that the ε guarantee fails)", options=[0.0, 1e-6, 1e-3, 0.01, 0.05],
    **S.learned("atk_delta", 0.0), help="Approximate DP allows the guarantee to fail with probability δ; 0 = pure DP.",
)
with guard(stop=False):
    charts.draw(dc.power_chart(float(epsilon), float(delta)))
st.markdown(
    f"**What you see:** no test can rise above the limit curves. At ε = {epsilon:g}, accepting 5 % "
    f"false alarms buys at most a {min(1.0, 0.05 * math.exp(float(epsilon)) + float(delta)):.1%} chance "
    "of detecting X (γ·e^ε + δ, capped at 100 %); the best test against a noisy count reaches "
    "that limit for small γ. The closer the curves stay to blind guessing, the better X is protected."
)
