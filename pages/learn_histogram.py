"""Learn: releasing a distribution — Wasserman and Zhou's perturbed-histogram simulation."""

import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `streamlit run pages/...`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st

from pages._ui import charts
from pages._ui import demo_charts as dc
from pages._ui import state as S
from pages._ui.guard import guard
from planner.learn import histogram as demos
from planner.planning.mechanisms.histogram import MiseCurve


@st.cache_data(show_spinner=False, max_entries=32)
def _sample(n: int, epsilon: float, m: int, seed: int) -> demos.SyntheticSample:
    return demos.synthetic_sample_demo(n, epsilon, m, dc.rng(seed))


def _mise(n: int, epsilon: float, reps: int, seed: int) -> MiseCurve:
    """Monte Carlo with a progress bar; results kept per (n, ε, reps, seed) in session state."""
    cache = st.session_state.setdefault("hist_mise_cache", {})
    key = (n, epsilon, reps, seed)
    if key not in cache:
        bar = st.progress(0.0, text="Running the Monte Carlo simulation…")

        def _tick(done: int, total: int) -> None:
            bar.progress(done / total, text=f"Monte Carlo repetition {done} of {total}")

        cache[key] = demos.beta_mise_curve(n, epsilon, dc.rng(seed), reps=reps, progress=_tick)
        bar.empty()
    curve: MiseCurve = cache[key]
    return curve


st.title("Releasing a whole distribution")
st.markdown(
    "Instead of one number, publish a whole histogram: add random noise to every bar, set "
    "negative bars to zero, and draw as many synthetic (made-up but realistic) points from it "
    "as you like (Wasserman and Zhou, *A statistical framework for differential privacy*, JASA 2010 (as presented by Yang Yu, Purdue, 2015)). The data are simulated from a bell-shaped Beta(10, 10) curve, as "
    "in that paper."
)

c1, c2, c3 = st.columns(3)
n = c1.select_slider("Sample size n", list(demos.SEED_001_NS), **S.learned("hist_n", 1000))
eps = c2.select_slider("ε", [*demos.SEED_001_EPSILONS[::-1], 1.0], **S.learned("hist_eps", 0.1), help=dc.EPSILON_HELP)
m = c3.slider("Bins for the synthetic sample", 5, 100, **S.learned("hist_m", 20))
reps = st.select_slider(
    "Simulation repetitions (more: smoother curves, slower)", [10, 25, 50, 100, 200], **S.learned("hist_reps", 50)
)
seed = dc.seed_controls("hist")

with guard():
    sample = _sample(int(n), float(eps), int(m), seed)
    curve = _mise(int(n), float(eps), int(reps), seed)

left, right = st.columns(2)
charts.draw(dc.sample_chart(sample.real, f"Real sample ({n:,} points)"), left)
charts.draw(
    dc.sample_chart(sample.synthetic, f"Synthetic sample (ε = {eps:g}, {m} bins)"), right)
st.markdown(
    "**What you see:** on the left the real data, on the right made-up points drawn from the "
    "noisy histogram; both should follow the dashed true shape. Below, how far each method's "
    "shape is from the truth, averaged over many simulated datasets (MISE: mean integrated "
    "squared error; lower is better)."
)
charts.draw(
    dc.mise_chart(curve, f"Error of the estimated shape vs number of bins (n = {n:,}, ε = {eps:g})"))
st.markdown(
    "The private histograms are always further from the truth than the raw one, and their "
    "error grows with the number of bins (more bins, more noisy bars). Smaller ε or smaller n "
    "make it worse: Wasserman and Zhou's conclusion is that the constants in the error matter, not only "
    "its rate."
)
st.caption(
    f"Monte Carlo over {curve.reps} simulated datasets (data-independent); noise variance 8/ε² per "
    "bar. Nothing here is a release."
)
