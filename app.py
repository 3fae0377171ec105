"""Privacy Budget Planner — the Streamlit entry: page config, state, navigation, sidebar."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pages._ui.sidebar import render_sidebar
from pages._ui.state import init_state

ROOT = Path(__file__).resolve().parent

st.set_page_config(page_title="Privacy Budget Planner", page_icon="🔒", layout="wide")
init_state()

# url_path differs from every file stem (STYLE.md: st.navigation + a pages/ folder).
PLAN_PAGES = [
    st.Page("pages/data_page.py", title="Data", icon="📄", url_path="data", default=True),
    st.Page("pages/queries_page.py", title="Queries", icon="❓", url_path="queries"),
    st.Page("pages/accuracy_page.py", title="Accuracy", icon="📈", url_path="accuracy"),
    st.Page("pages/plan_page.py", title="Planner", icon="🧮", url_path="planner"),
    st.Page("pages/release_page.py", title="Release", icon="🚀", url_path="release"),
    st.Page("pages/ledger_page.py", title="Ledger", icon="📒", url_path="ledger"),
]


def _learn_pages() -> list[st.Page]:
    pages = []
    for path in sorted((ROOT / "pages").glob("learn_*.py")):
        stem = path.stem
        title = stem.removeprefix("learn_").replace("_", " ").capitalize()
        pages.append(st.Page(f"pages/{path.name}", title=title, icon="🎓", url_path=stem.replace("_", "-")))
    return pages


sections: dict[str, list[st.Page]] = {"Plan and release": PLAN_PAGES}
learn = _learn_pages()
if learn:
    sections["Learn"] = learn

nav = st.navigation(sections)
render_sidebar()
nav.run()
