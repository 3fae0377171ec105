"""Privacy Budget Planner — the Streamlit entry: page config, state, navigation, sidebar."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pages._ui import auth, frame
from pages._ui.sidebar import render_budget, render_sidebar
from pages._ui.state import init_state
from pages._ui.warmup import start as warm_up
from planner.ledger.accounts import Role

ROOT = Path(__file__).resolve().parent

st.set_page_config(page_title="Privacy Budget Planner", page_icon=":material/lock:", layout="wide")
init_state()

# Who is using the app decides which pages exist for them (pages._ui.auth): nobody signed in
# sees the sign-in page; a viewer the ledger of what was shared with them; an analyst and an
# owner every planning page. The engine checks every ledger call again (the principal is
# passed with each one), so a page that is not listed is a convenience, not the protection.
principal = auth.principal()
# url_path differs from every file stem: with st.navigation beside a pages/ folder, a stem
# used as a URL path would collide with Streamlit's automatic page of the same file.
if principal is None:
    PLAN_PAGES = [st.Page(auth.sign_in_page, title="Sign in", icon=":material/login:", url_path="sign-in",
                          default=True)]
elif principal.role is Role.VIEWER:
    PLAN_PAGES = [st.Page("pages/ledger_page.py", title="Ledger", icon=":material/receipt_long:", url_path="ledger",
                          default=True)]
else:
    PLAN_PAGES = [
        st.Page("pages/guide_page.py", title="Start here", icon=":material/flag:", url_path="start"),
        st.Page("pages/data_page.py", title="Data", icon=":material/table_view:", url_path="data", default=True),
        st.Page("pages/queries_page.py", title="Queries", icon=":material/help:", url_path="queries"),
        st.Page("pages/accuracy_page.py", title="Accuracy", icon=":material/show_chart:", url_path="accuracy"),
        st.Page("pages/plan_page.py", title="Planner", icon=":material/calculate:", url_path="planner"),
        st.Page("pages/release_page.py", title="Release", icon=":material/rocket_launch:", url_path="release"),
        st.Page("pages/ledger_page.py", title="Ledger", icon=":material/receipt_long:", url_path="ledger"),
    ]


#: Sidebar titles of the Learn pages (a page not listed gets its file stem, capitalised).
LEARN_TITLES = {
    "learn_randomized_response": "Randomized response",
    "learn_laplace_count": "The Laplace count",
    "learn_attacker": "Differencing attack",
    "learn_averaging": "Averaging done right",
    "learn_majority": "Majority and the ISM",
    "learn_histogram": "Releasing a distribution",
    "learn_composition": "Many questions",
}


def _learn_pages() -> list[st.Page]:
    found = {p.stem: p for p in (ROOT / "pages").glob("learn_*.py")}
    order = [s for s in LEARN_TITLES if s in found] + sorted(set(found) - set(LEARN_TITLES))
    return [
        st.Page(f"pages/{found[stem].name}", icon=":material/school:", url_path=stem.replace("_", "-"),
                title=LEARN_TITLES.get(stem, stem.removeprefix("learn_").replace("_", " ").capitalize()))
        for stem in order
    ]


sections: dict[str, list[st.Page]] = {"Plan and release": PLAN_PAGES}
if principal is not None and principal.role is not Role.VIEWER:
    # planning numbers only (no data, no ledger): DP-SGD under the Rényi and optimal accountants
    sections["Machine learning"] = [st.Page("pages/training_page.py", title="Training budget (DP-SGD)",
                                            icon=":material/model_training:", url_path="training")]
learn = _learn_pages()
if learn:
    sections["Learn"] = learn

nav = st.navigation(sections, expanded=True)
auth.sidebar_block()
if principal is not None and principal.role is not Role.VIEWER:
    box, active = render_sidebar()
    frame.defer_budget(lambda: render_budget(box, active))  # drawn when the page ends or stops (frame.stop)
try:
    nav.run()
    frame.flush_budget()
finally:  # no Streamlit call in it, so it also runs when the page stops early
    warm_up()  # import what the other pages need while the owner reads this one
