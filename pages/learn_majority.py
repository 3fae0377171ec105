"""Learn: the majority vote — exponential mechanism, ISM and lower bounds (Garivier 2021)."""

import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `streamlit run pages/...`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st

from pages._ui import charts
from pages._ui import demo_charts as dc
from pages._ui import state as S
from pages._ui.guard import guard
from planner.learn import majority as demos


@st.cache_data(show_spinner=False, max_entries=64)
def _curves(epsilon: float, n: int) -> demos.MajorityCurves:
    return demos.majority_curves(epsilon, n)


@st.cache_data(show_spinner=False, max_entries=64)
def _votes(epsilon: float, n: int, s: int, seed: int) -> tuple[float, float]:
    """Simulated share of correct answers (EM and ISM for 2 outputs) over 1000 votes."""
    c = _curves(epsilon, n)
    g = dc.rng(seed)
    return float((g.random(1000) < c.exponential[s]).mean()), float((g.random(1000) < c.better[s]).mean())


st.title("Who won the vote? Majority with privacy")
st.markdown(
    "n people vote yes or no, and s of them say yes. A private mechanism announces the winner "
    "but must sometimes get it wrong on purpose, most often when the vote is close (Garivier, *How to learn while respecting individual privacy?*, ENS de Lyon, 2021). "
    "The inverse sensitivity mechanism (ISM) counts how many votes would have to change to flip "
    "the result; it is provably close to the best any private mechanism can do."
)

c1, c2 = st.columns(2)
eps = c1.select_slider("ε", [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0], **S.learned("maj_eps", 0.1),
                        help=dc.EPSILON_HELP)
n = c2.select_slider("Number of voters n (odd)", [11, 21, 51, 101, 201, 501, 1001], **S.learned("maj_n", 101))
with guard():
    curves = _curves(float(eps), int(n))

charts.draw(dc.majority_chart(curves))
matches = "matches" if curves.quarter_matches else "does NOT match"
st.markdown(
    f"**What you see:** near a tie every mechanism is close to a coin toss; far from it, all "
    f"announce the right winner. The general ISM at ε {matches} the best possible at ε/4 (its "
    f"curve lies on the dashed one: “1/4-optimal”); the two-outcome ISM, Garivier's “better "
    f"mechanism”, {'matches' if curves.half_matches else 'does NOT match'} the best possible at "
    "ε/2. The exponential mechanism is slightly below the two-outcome ISM everywhere."
)

s = st.slider("Try one vote: number of “yes” votes s", 0, int(n),
              **S.learned("maj_s", int(n) // 2 + 3, options=range(int(n) + 1)))
seed = dc.seed_controls("maj")
em_sim, ism_sim = _votes(float(eps), int(n), int(s), seed)
m1, m2, m3 = st.columns(3)
m1.metric("Exponential mechanism right", f"{curves.exponential[s]:.1%}",
          help=f"Chance of announcing the right winner; simulated over 1000 runs: {em_sim:.1%}")
m2.metric("ISM (two outcomes) right", f"{curves.better[s]:.1%}",
          help=f"Chance of announcing the right winner; simulated over 1000 runs: {ism_sim:.1%}")
m3.metric("Best possible at ε", f"{curves.unbiased_bound[s]:.1%}",
          help="No unbiased ε-DP mechanism is right more often than this.")
st.caption(
    f"Simulated over 1000 announcements: exponential mechanism correct {em_sim:.1%}, ISM {ism_sim:.1%}. "
    "These accuracies depend on the exact count s (data-dependent); this page uses made-up votes."
)
