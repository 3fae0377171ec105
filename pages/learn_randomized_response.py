"""Learn: randomized response — Garivier's doping survey and the Berkeley Math Circle's coin game."""

import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `streamlit run pages/...`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import streamlit as st

from pages._ui import charts
from pages._ui import demo_charts as dc
from pages._ui import state as S
from pages._ui.guard import guard
from planner.learn import survey as demos
from planner.planning.mechanisms import randomized_response as rr

DESIGNS = {
    "Doping survey (Garivier 2021): the truth with probability ½, else a fair coin": demos.SurveyDesign.COIN,
    "Coin game (Berkeley Math Circle 2019): the truth unless both of two coins land heads": demos.SurveyDesign.KEEP,
}


@st.cache_data(show_spinner=False, max_entries=64)
def _simulate(rate: float, n: int, keep: float, seed: int) -> tuple[demos.SurveySimulation, np.ndarray, np.ndarray]:
    g = dc.rng(seed)
    sim = demos.simulate_survey(rate, n, keep, g)
    est, direct = demos.repeated_surveys(rate, n, keep, 2000, g)
    return sim, est, direct


st.title("Randomized response: privacy by coin flip")
st.markdown(
    "Each respondent flips coins in secret and sometimes reports a random answer instead of "
    "the truth. Nobody can be blamed for their answer, yet the share of true “yes” in the "
    "group can still be estimated, because we know exactly how the coins distort it."
)

design_label = st.radio("Survey design", list(DESIGNS), **S.learned("rr_design", next(iter(DESIGNS)), list(DESIGNS)))
design = DESIGNS[design_label]
col1, col2, col3 = st.columns(3)
if design is demos.SurveyDesign.COIN:
    truth_p = col1.slider(
        "Probability of answering truthfully (else a fair coin)", 0.05, 0.95, step=0.05, **S.learned("rr_truth_p", 0.5)
    )
    param = float(truth_p)
else:
    keep_p = col1.slider(
        "Probability p of reporting the truth (two coins: ¾)", 0.55, 0.99, step=0.01, **S.learned("rr_keep_p", 0.75)
    )
    param = float(keep_p)
rate = col2.slider("True rate in the population", 0.0, 1.0, step=0.01, **S.learned("rr_rate", 0.15),
                   help="Share of people whose true answer is “yes” (15 % in the doping survey).")
n = col3.slider("Respondents", 50, 20_000, step=50, **S.learned("rr_n", 1000))
seed = dc.seed_controls("rr")

with guard():
    keep = demos.design_keep_probability(design, param)
    sim, est, direct = _simulate(float(rate), int(n), keep, seed)

m1, m2, m3, m4 = st.columns(4)
m1.metric("Truthful reports p", f"{keep:.1%}", help="Chance that a report is the respondent's true answer.")
m2.metric("Privacy ε", f"{sim.epsilon:.3f}",
          help=f"ε = ln(p/(1−p)); ln 3 ≈ 1.099 for both seed designs. {dc.EPSILON_HELP}")
m3.metric("Estimated rate", f"{sim.estimate:.1%}",
          help=f"{sim.level:.0%} interval: {sim.lower:.1%} to {sim.upper:.1%}")
m4.metric("Respondents needed", f"{sim.data_cost:.1f}×",
          help="(2p − 1)⁻²: how many times more respondents than a direct question, for the same precision")

left, right = st.columns(2)
charts.draw(dc.survey_reports_chart(sim), left)
charts.draw(dc.survey_estimate_chart(sim), right)
st.markdown(
    f"**What you see:** the coins pull the share of “yes” reports towards ½ "
    f"({sim.report_rate:.1%} here); because the coins' odds are known, the correction "
    f"(ȳ − (1 − p))/(2p − 1) recovers {sim.estimate:.1%} (the {sim.n:,} simulated people really "
    f"had {sim.sample_rate:.1%}). The price: about {sim.data_cost:.1f} times as many respondents "
    "for the same precision as asking directly."
)
charts.draw(dc.repeated_surveys_chart(est, direct, sim.true_rate))
st.caption(
    f"Typical error of the estimate over repeated surveys: randomized response ±{sim.rr_sd:.1%} "
    f"(Warner's formula) vs ±{sim.direct_sd:.1%} asking directly. "
    "For readers of Garivier, *How to learn while respecting individual privacy?*, ENS de Lyon, 2021: the slides estimate the rate by 2ȳ − 1; that estimate is "
    "biased by −½; the unbiased one is 2ȳ − ½, used here. "
    f"Data cost at this ε: {float(rr.data_cost_factor(sim.epsilon)):.2f}×. "
    "Simulated data: nothing here is a release."
)
