"""Start here: the guided path for a first-time owner.

Upload → say what is public → pick the questions → see what is usable → release, one step
at a time, each with where it stands and the page that does it. The expert controls
(composition rule, mechanism, split mode, neighbouring relation) are not on this path: they
keep their defaults, chosen so that a first release is sound — each statistic's default
mechanism, the optimal split with errors measured against each answer's public size, the
dataset's rule once its lifetime budget is set — and the expert pages keep every control.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from pages._ui import cached, fmt, frame, planning, results
from pages._ui import state as S
from pages._ui.guard import guard
from pages._ui.preamble import require_planner
from planner.privacy.budget import SplitMode

st.title("Start here")
S.init_state()
require_planner()
ss = st.session_state
PAGE = "guide"

st.markdown("Five steps from a table to a private release. Each step says where you stand and links to the page "
            "that does it; the expert controls (composition rule, mechanisms, how the budget is split, the "
            "neighbouring relation) stay folded away on their own pages, with sensible presets.")


def step(n: int, title: str, done: bool) -> Any:
    box = st.container(border=True)
    box.markdown(f"{':green-badge[done]' if done else ':orange-badge[to do]'} **{n}. {title}**")
    return box


# 1. the data
with guard(stop=False) as read:
    data = cached.active()
box = step(1, "Upload your table", read.ok)
if not read.ok:
    box.page_link("pages/data_page.py", label="Pick or upload a table on the Data page", icon=":material/table_view:")
    frame.stop()
box.markdown(f"The active table is **{fmt.plain(data.name)}**. Upload another one (CSV or Parquet) on the Data page; "
             "it stays private — nothing here is computed from it until you release.")
box.page_link("pages/data_page.py", label="Data page", icon=":material/table_view:")

# 2. what is public
schema = data.schema
box = step(2, "Say what is public about it", schema is not None)
if schema is None:
    box.markdown("Declare each column you will ask about: its kind, and for numbers a public lower and upper "
                 "bound (values outside are moved to the bound), for categories the list of categories. Say who is "
                 "protected (one row, or one person who may have several rows, by an ID column) and, if you can, "
                 "an approximate public row count. None of this is read from the rows.")
    box.page_link("pages/data_page.py", label="Declare the schema on the Data page", icon=":material/edit_note:")
    frame.stop()
unit = "one row" if schema.unit.column is None else f"one person ({schema.unit.column}, at most {schema.unit.c} rows each)"
box.markdown(f"{len(schema.columns)} columns declared; each answer protects **{fmt.plain(unit)}**; public row count: "
             + (f"**{schema.public_n:,}**." if schema.public_n is not None else
                "**not declared** — declare an approximate one so that each answer can be judged."))
box.page_link("pages/data_page.py", label="Change the schema on the Data page", icon=":material/edit_note:")

# 3. the questions
cached.sync_workload(data)
rows = S.clean_rows(ss[S.WORKLOAD])
box = step(3, "Pick the questions", bool(rows))
box.markdown(f"{len(rows)} question(s): " + ", ".join(f"`{fmt.plain(str(r.get('id')))}`" for r in rows[:12])
             + (" …" if len(rows) > 12 else "") + ". Add, edit or drop them on the Queries page; each statistic "
             "starts with its best default mechanism.")
box.page_link("pages/queries_page.py", label="Queries page", icon=":material/help:")

# 4. what is usable
sj = data.schema_json
if sj is None:
    frame.stop()
with guard(stop=False) as made:
    view = planning.current_plan(data, sj)
box = step(4, "See what is usable", made.ok)
if not made.ok:
    box.page_link("pages/plan_page.py", label="Fix the plan on the Planner", icon=":material/calculate:")
    frame.stop()
with box:
    st.number_input("ε for this release (smaller: more privacy, more noise)", step=0.1, format="%g",
                    **S.bind(S.EPSILON, PAGE), disabled=view.settings.mode is SplitMode.TARGET)
    results.epsilon_context(None if view.settings.mode is SplitMode.TARGET else view.settings.epsilon, view.settings.rule)
    results.verdict_table(view.plan, schema)
    st.page_link("pages/plan_page.py", label="Expert settings on the Planner (rule, split, shares)",
                 icon=":material/tune:")

# 5. release
status = view.settings.lifetime
box = step(5, "Release", status is not None and status.releases > 0)
box.markdown("Set the dataset's lifetime budget once (the total all its releases may ever spend), then release: "
             "the spend is recorded before any noise is drawn, and a reload shows the stored answers."
             if status is None else
             f"Lifetime budget ε = {status.epsilon_total:g}; ε {fmt.eps(max(status.epsilon_remaining, 0.0))} remains "
             f"after {status.releases} release(s).")
box.page_link("pages/release_page.py", label="Release page", icon=":material/rocket_launch:")
