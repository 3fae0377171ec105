"""The Data page's "suggest bounds" panel: DP quantiles over a public coarse grid, released
through the engine's one release path (:func:`planner.release.bounds.suggest_bounds`) after
a confirmation stating the ε, written into the schema form with their source."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import streamlit as st

from pages._ui import cached, fmt
from pages._ui import state as S
from pages._ui.guard import guard
from planner.core.errors import QueryError

if TYPE_CHECKING:  # the engine is imported when a panel opens: the Data page's first run stays light
    from planner.planning import bounds_suggest as bs

#: durable (no widget uses them): the column whose panel is open, the pending confirmation,
#: the last outcome
OPEN, CONFIRM = "data:suggest_state:col", "data:suggest_state:confirming"
OUTCOME, ERROR = "data:suggest_state:outcome", "data:suggest_state:error"
#: widgets
RANGE, SIGNED, EPS, LEVELS = "data:suggest:range", "data:suggest:signed", "data:suggest:eps", "data:suggest:levels"
FOR, FOR_EPS = "data:suggest:for", "data:suggest:for_eps"
DEFAULT_EPS = 0.05
#: what the bounds may be for, in words (the default first); FIXED: no downstream mean or sum, so
#: the owner's fixed quantile levels
FIXED = "fixed levels"
PURPOSES = {"mean": "a mean of this column (levels tuned to it)", "sum": "a sum of this column (levels tuned to it)",
            FIXED: "quantiles or histograms (fixed levels)"}


def open_panel(name: str) -> None:
    ss = st.session_state
    ss[OPEN], ss[CONFIRM], ss[ERROR] = name, False, None


def _close() -> None:
    st.session_state[OPEN] = None
    st.session_state[CONFIRM] = False


def _plan(data: cached.Active, name: str) -> bs.SuggestionPlan:
    from pages._ui import planning
    from planner.planning import bounds_suggest as bs

    ss = st.session_state
    if data.schema is None or name not in data.schema.names:
        raise QueryError(f"save the schema with {name!r} declared numeric first (any public bounds: the "
                            "suggestion replaces them); then set the lifetime budget on the Planner page.")
    status = planning.lifetime(data.ledger_key)
    if status is None:
        raise QueryError("this dataset has no lifetime budget yet: set it on the Planner or Release page first "
                         "(the suggestion's ε is spent from it).")
    coarse = bs.parse_coarse(ss.get(RANGE) or "")
    what = ss.get(FOR) or "mean"
    fixed = what == FIXED
    return bs.plan_suggestion(data.schema, name, float(ss.get(EPS) or DEFAULT_EPS),
                              levels=bs.parse_levels(ss.get(LEVELS) or "0.01, 0.99") if fixed else None,
                              purpose=None if fixed else _purpose(data, name, what),
                              magnitude=coarse.get("magnitude"), lower=coarse.get("lower"), upper=coarse.get("upper"),
                              signed=bool(ss.get(SIGNED)), rule=status.rule)


def _purpose(data: cached.Active, name: str, what: str) -> Any:
    """The mean or sum the bounds are for, at the ε typed, else at its share in the plan in
    force (else the plan's whole ε; the engine's words say which)."""
    from pages._ui import planning
    from planner.planning.bounds_purpose import Purpose, Statistic, downstream_purpose

    typed = st.session_state.get(FOR_EPS)
    if typed:
        return Purpose(Statistic(what), float(typed), basis="given")
    assert data.schema is not None
    view, err = planning.plan_or_error(data, data.schema.to_json())
    if view is None:
        raise QueryError(f"the ε the {what} will spend: the plan cannot be made ({err}); type that ε here.")
    return downstream_purpose(view.plan, name, what, fallback_epsilon=view.plan.epsilon)


def _release(data: cached.Active, fp: str) -> None:
    """on_click: release the suggestion (check → spend → sample → store) and write it into
    the schema form with its source."""
    from planner.release.bounds import suggest_bounds

    ss = st.session_state
    ss[CONFIRM], ss[ERROR] = False, None
    name = ss[OPEN]
    with guard(stop=False, show="none", on_error=lambda msg: ss.__setitem__(ERROR, msg)):
        sp = _plan(data, name)
        engine = cached.backend(data.fingerprint, sp.schema.to_json(), cached.backend_name(), data)
        out = suggest_bounds(sp, engine, cached.ledger(), data.content or data.ledger_key or "", data.name)
        text = f"{out.lower:.15g}, {out.upper:.15g}"
        drafts = ss[S.DRAFTS]
        dd = dict(drafts[fp])
        cols = dict(dd["columns"])
        cols[name] = dict(cols.get(name, {"kind": "numeric", "bounds": "", "categories": ""}), bounds=text,
                          suggested=text, bounds_source=out.source.to_dict())
        drafts[fp] = dict(dd, columns=cols)
        ss[OUTCOME] = {"column": name, "text": text, "status": out.status, "release_id": out.result.release_id,
                       "epsilon": out.epsilon_spent, "remaining": out.result.epsilon_remaining}


def panel(data: cached.Active, fp: str) -> None:
    """The open column's panel (owners only; the caller checks)."""
    ss = st.session_state
    name = ss.get(OPEN)
    if not name:
        return
    with st.container(border=True):
        st.markdown(f"**Suggest bounds for {fmt.plain(name)} from DP quantiles**: spends a small ε of the lifetime "
                    "budget, recorded in the ledger like any release. The candidates are a public grid over a "
                    "coarse range you give (never read from the rows).")
        if RANGE not in ss:
            ss[RANGE] = "1e6"
        if EPS not in ss:
            ss[EPS] = DEFAULT_EPS
        if LEVELS not in ss:
            ss[LEVELS] = "0.01, 0.99"
        if FOR not in ss:
            ss[FOR] = "mean"
        f1, f2 = st.columns([3, 2])
        f1.selectbox("What the bounds are for", list(PURPOSES), format_func=PURPOSES.__getitem__, key=FOR,
                     help="A mean or a sum needs its largest values clipped only a little: the levels are chosen for "
                          "its ε and the public row count, balancing clipping bias against its noise. Quantiles and "
                          "histograms need bounds holding most of the mass: fixed levels.")
        if ss[FOR] != FIXED:
            f2.number_input(f"ε the {ss[FOR]} will spend (empty: its share in your plan)", min_value=0.0001,
                            value=None, step=0.1, format="%g", key=FOR_EPS)
        c1, c2, c3, c4 = st.columns([3, 1, 1, 2])
        c1.text_input("Values up to about M (one number), or a public range A, B", key=RANGE,
                      help="One number: a log-scale grid from 0 to M (20 candidates per decade). Two numbers: a "
                           "grid over [A, B]. Values beyond it are clipped to it.")
        c2.checkbox("negative values too", key=SIGNED, help="With one number: the grid runs from −M to M.")
        c3.number_input("ε to spend", min_value=0.001, step=0.01, format="%g", key=EPS)
        if ss[FOR] == FIXED:
            c4.text_input("quantile levels low, high", key=LEVELS,
                          help="0 (or 1) keeps the coarse range's own end as the bound and spends nothing on it. For "
                               "a mean or a sum, choose it above instead: the levels are then tuned to it. See the "
                               "clipping bias on the Accuracy page.")
        with guard(stop=False, show="warning") as g:
            sp = _plan(data, name)
        if g.ok:
            st.caption(fmt.plain(sp.words()))
            if not ss.get(CONFIRM):
                b1, b2 = st.columns(2)
                b1.button(f"Suggest bounds… (spends ε = {fmt.eps(sp.epsilon)})", key="data:suggest:open",
                          type="primary", on_click=lambda: ss.__setitem__(CONFIRM, True))
                b2.button("Close", key="data:suggest:close", on_click=_close)
            else:
                st.warning(f"This spends **ε = {fmt.eps(sp.epsilon)}** of the lifetime budget of "
                           f"**{fmt.plain(data.name)}**, recorded before any noise is drawn; it cannot be undone. "
                           "Asking the same suggestion again shows the stored one and spends nothing.")
                d1, d2 = st.columns(2)
                d1.button("Confirm: spend it", key="data:suggest:confirm", type="primary", on_click=_release,
                          args=(data, fp))
                d2.button("Cancel", key="data:suggest:cancel", on_click=lambda: ss.__setitem__(CONFIRM, False))
        if ss.get(ERROR):
            st.error(fmt.plain(ss[ERROR]))
        out: dict[str, Any] | None = ss.get(OUTCOME)
        if out and out["column"] == name:
            how = ("released now" if out["status"] == "done" else "the stored suggestion: nothing spent again")
            st.success(f"Suggested bounds **{out['text']}** (release #{out['release_id']}, ε = "
                       f"{fmt.eps(out['epsilon'])}, {how}; ε {fmt.eps(max(out['remaining'], 0.0))} of the lifetime "
                       "budget remains). Written into the form with their source: save the schema to use them.")
