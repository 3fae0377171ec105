"""Learn: the Laplace count — Borealis AI's tutorial #12, figure 3."""

import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `streamlit run pages/...`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd
import streamlit as st

from pages._ui import charts, frame
from pages._ui import demo_charts as dc
from pages._ui import state as S
from pages._ui.guard import guard
from planner.learn import laplace_count as demos

EXACT = "within ±10 % (formula)"
SIMULATED = "within ±10 % (simulated)"
EPS_OPTIONS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]


@st.cache_data(show_spinner=False, max_entries=64)
def _demo(counts: tuple[int, ...], epsilons: tuple[float, ...], seed: int) -> demos.LaplaceCountDemo:
    return demos.laplace_count_demo(counts, epsilons, 20_000, dc.rng(seed))


st.title("The Laplace count")
st.markdown(
    "Adding or removing one person changes a count by at most 1, so random “Laplace” noise "
    "of typical size 1/ε people hides whether any one person is in it (Borealis AI, *Tutorial #12: Differential privacy I: Introduction*, 2021, figure 3). "
    "The same noise is small next to a count of 1000 and large next to a count of 100."
)

c1, c2, c3 = st.columns([2, 1, 1])
eps = c1.multiselect(
    "Up to three values of ε", EPS_OPTIONS, **S.learned("lc_eps", list(demos.SEED_004_EPSILONS)),
    max_selections=3, help=dc.EPSILON_HELP,
)
big = c2.number_input("Large true count (people)", 10, 1_000_000, **S.learned("lc_big", demos.SEED_004_COUNTS[0]))
small = c3.number_input("Small true count (people)", 1, 1_000_000, **S.learned("lc_small", demos.SEED_004_COUNTS[1]))
seed = dc.seed_controls("lc")

if not eps:
    st.info("Pick at least one ε.")
    frame.stop()
with guard():
    demo = _demo((int(big), int(small)), tuple(sorted(float(e) for e in eps)), seed)

left, right = st.columns(2)
charts.draw(dc.laplace_count_chart(demo, 0), left)
charts.draw(dc.laplace_count_chart(demo, 1), right)
st.markdown(
    "**What you see:** each curve shows where the published count is likely to land for one ε "
    "(faint bars: 20,000 simulated publications). The green band is “within 10 % of the truth”: "
    "the large count almost always lands in it, the small one often misses it."
)

rows = []
for i, c in enumerate(demo.counts):
    for j, e in enumerate(demo.epsilons):
        rows.append({
            "true count": int(c),
            "ε": e,
            "noise scale 1/ε": demo.scales[j],
            EXACT: demo.exact_share[i, j],
            SIMULATED: demo.simulated_share[i, j],
        })
st.dataframe(
    pd.DataFrame(rows),
    hide_index=True,
    width="stretch",
    column_config={
        "true count": st.column_config.NumberColumn("true count", format="%d people"),
        "ε": st.column_config.NumberColumn("ε", format="%g", help=dc.EPSILON_HELP),
        "noise scale 1/ε": st.column_config.NumberColumn(
            "noise size 1/ε", format="%.3g people", help="Typical size of the added noise, in people."
        ),
        EXACT: st.column_config.NumberColumn(
            EXACT, format="percent", help="Chance the published count is within ±10 % of the truth: "
            "1 − e^(−0.1·count·ε), by formula."
        ),
        SIMULATED: st.column_config.NumberColumn(
            SIMULATED, format="percent", help="The same share counted over 20,000 simulated publications."
        ),
    },
)
st.caption(
    "The tutorial does not print its three ε; its caption (count 1000: almost always within 10 %; "
    "count 100: regularly outside for all three) holds for ε between about 0.05 and 0.25, "
    "hence the default 0.05, 0.1, 0.2. Simulated answers: nothing here is a release."
)
