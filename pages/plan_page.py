"""Planner: this release's budget, split across the workload, within the dataset's lifetime budget."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from pages._ui import cached, charts, fmt, frame, lifetime, planfiles, planning, results
from pages._ui import state as S
from pages._ui.guard import guard
from pages._ui.preamble import require_dataset
from planner.core.errors import PlannerError
from planner.planning import advice
from planner.planning.queries import QueryKind
from planner.planning.statistics.keys import keep_table
from planner.privacy.budget import SplitMode

st.title("Planner")
st.caption("Decide how much privacy budget the next release spends and how it is split across the queries. "
           "Everything on this page is data-independent: it reads the schema, ε and δ, never the rows.")

PAGE = "planner"
data, schema, sj = require_dataset(restore=PAGE)
ss = st.session_state

# ----------------------------------------------------------------------------- lifetime budget
st.subheader("Lifetime budget of this dataset")
status = planning.lifetime(data.ledger_key)
note = S.pop_notice(PAGE)
if note:
    st.success(note)
if status is None:
    st.info("No lifetime budget is set for this dataset yet. Set it once, before the first release; "
            "until then the composition rule below is a what-if.", icon=":material/info:")
    with st.expander("Set the lifetime budget", expanded=True):
        lifetime.set_form(data, PAGE)
else:
    lifetime.metrics(status)
    st.caption(f"Every release of this dataset is accounted under **{fmt.rule(status.rule)}**. The lifetime "
               "budget can only be raised by a recorded decision (Ledger page).")

# ----------------------------------------------------------------------------- settings
st.subheader("The next release")


def _mode_changed() -> None:
    """Entering the manual split starts from the equal split of the current ε (every share
    typed is then the owner's)."""
    if S.split_mode(ss[S.MODE]) is not SplitMode.MANUAL:
        return
    try:
        s0 = planning.settings(data)  # a callback: read now, not the previous run's status
        wl0 = cached.workload_json(ss[S.WORKLOAD], SplitMode.MANUAL)
        start = cached.equal_shares(wl0, sj, s0.epsilon, s0.delta, s0.rule)
    except PlannerError:
        return
    ss[S.MANUAL] = {**start, **{k: v for k, v in ss[S.MANUAL].items() if k in start}}


mode = S.split_mode(ss[S.MODE])
c1, c2, c3 = st.columns(3)
c1.number_input("ε for this release", step=0.1, format="%g", **S.bind(S.EPSILON, PAGE),
                disabled=mode is SplitMode.TARGET,
                help="How much of the lifetime budget this release may spend (in a manual split: the most the "
                     "shares may cost). Smaller ε = stronger privacy = more noise.")
c2.number_input("δ", step=1e-7, format="%g", **S.bind(S.DELTA, PAGE),
                help="A small chance that the guarantee fails; 0 for pure ε-DP. Keep it far below 1 ÷ rows.")
if status is None:
    c3.selectbox("Composition rule (what-if)", S.RULES, **S.bind(S.RULE, PAGE, options=S.RULES),
                 format_func=lifetime.rule_label,
                 help="How the privacy costs of the answers are added up. Fixed for good when you set the "
                      "dataset's lifetime budget.")
else:
    c3.markdown(f"Composition rule  \n**{fmt.rule(status.rule)}**  \n:small[fixed by the lifetime budget]")
st.radio("How the budget is split", S.MODES, horizontal=True,
         **S.bind(S.MODE, PAGE, options=S.MODES, then=_mode_changed),
         format_func=S.MODE_LABELS.__getitem__,
         help="optimal split: spend ε, giving more precision to heavier queries (weights) · equal split: the same "
              "ε for every answer · manual split: type each answer's share · meet targets: the least ε that meets "
              "every query's ±target (Queries page)")
st.toggle("Measure each error relative to a public size (declared bounds × public row count)",
          **S.bind(S.RELATIVE, PAGE), disabled=mode is not SplitMode.WEIGHTED,
          help="Optimal split only. On: a count off by 100 and a mean income off by 100 are not the same mistake; "
               "each error is divided by a public size of its answer before the split is optimised. A scale typed "
               "for a query (Queries page) is used for that query either way.")
with guard(stop=False, show="none"):
    results.epsilon_context(None if mode is SplitMode.TARGET else planning.settings(data, status).epsilon,
                            status.rule.value if status is not None else str(ss[S.RULE]))
if mode is SplitMode.WEIGHTED and ss[S.RELATIVE] and schema.public_n is None:
    st.info("**Errors are compared as they are**: the public sizes need a public row count, and this dataset "
            "declares none. A sum over a wide range then weighs far more than a count and takes most of ε. "
            "Declare the public (approximate) row count on the Data page, or type a scale for a query on the "
            "Queries page.", icon=":material/straighten:")

manual_refused = False  # the manual split's own box already says it costs more than ε
if mode is SplitMode.MANUAL:
    st.markdown("**The manual split**: type each answer's share. It started from the equal split; "
                "the planner adds the shares up under the rule and refuses a split that costs more than ε.")
    with guard("The workload is not valid yet: "):
        wl_m = cached.workload_json(ss[S.WORKLOAD], SplitMode.MANUAL)
        items = cached.item_ids(wl_m, sj)
    shares = dict(ss[S.MANUAL])
    man_key = f"planner:manual:{ss[S.EDITOR_VERSION]}:{len(items)}"
    if man_key not in ss:
        ss["planner:manual_base"] = [{"item": i, "query": q, "part": part, "currency": "ρ" if g else "ε",
                                      "share": shares.get(i)} for i, q, part, g in items]

    def _manual() -> None:
        rows_m = S.apply_editor_changes(ss["planner:manual_base"], ss[man_key])
        ss[S.MANUAL] = {r["item"]: float(r["share"]) for r in rows_m
                        if r.get("share") is not None and pd.notna(r.get("share"))}

    st.data_editor(pd.DataFrame(ss["planner:manual_base"]), key=man_key, on_change=_manual, hide_index=True,
                   width="stretch", disabled=["item", "query", "part", "currency"],
                   column_config={"share": st.column_config.NumberColumn(
                       "share", min_value=0.0, format="%.6g",
                       help="ε for pure mechanisms; ρ (zero-concentrated DP) for Gaussian noise")})
    with guard(stop=False) as g:
        s_now = planning.settings(data, status)
        total = cached.manual_total(wl_m, sj, s_now.delta, s_now.rule, planning.pins_of(ss[S.MANUAL]))
    if g.ok:
        fits = s_now.budget.fits(total)  # the one test of fitting: the ledger's
        manual_refused = not fits
        (st.success if fits else st.error)(
            f"These shares cost **ε = {total:.6g}** under **{fmt.rule(s_now.rule)}**, "
            + (f"within the ε = {s_now.epsilon:g} set above." if fits else
               f"more than the ε = {s_now.epsilon:g} set above: lower some shares or raise ε."),
            icon=":material/functions:")

with guard(stop=False, show="none" if manual_refused else "error") as made:
    view = planning.current_plan(data, sj, status)  # the lifetime budget read once, above
if not made.ok:
    st.subheader("Restore a plan file")
    planfiles.upload_form(data, PAGE)
    frame.stop()
plan, s = view.plan, view.settings
a = plan.allocation
mode = s.mode

# ----------------------------------------------------------------------------- warnings
for w in a.warnings:
    st.warning(w)
qs = cached.parse_queries(view.wl_json, sj)
noisy = advice.noise_warnings(plan.predictions, cached.error_scales(qs, schema))
if noisy:
    st.warning("At this budget some answers will be mostly noise: " + "; ".join(noisy)
               + ". Raise ε, give these queries more weight, or drop queries.", icon=":material/blur_on:")

# ----------------------------------------------------------------------------- what each answer can support
st.subheader("What each answer can support")
results.verdict_table(plan, schema)

# ----------------------------------------------------------------------------- the plan
if view.target is not None:
    res = view.target
    m1, m2, m3 = st.columns(3)
    m1.metric("Least ε meeting every target", f"{res.population_epsilon:.4g}", help=f"under {fmt.rule(s.rule)}, δ = {s.delta:g}")
    m2.metric("Hardest target", res.binding, help="the query whose target needs the most budget")
    m3.metric("Queries", len({p.query_id for p in plan.predictions}))
    st.caption("This is the plan the Release page releases: each query gets exactly the share that meets its target.")
else:
    m1, m2, _ = st.columns(3)
    m1.metric("ε this release spends", f"{a.used_epsilon:.4g}", help=f"of the ε = {a.epsilon:g} you set, composed under {fmt.rule(s.rule)}")
    m2.metric("Queries", len({p.query_id for p in plan.predictions}))
    if mode is SplitMode.EQUAL:
        st.caption("Equal split: every answer gets the same ε, the most that fits the ε you set under the rule. "
                   "Weights are not used.")
    elif mode is SplitMode.MANUAL:
        st.caption("Manual split: every share as you typed it above.")
    else:
        how = {"closed form": "exact optimum (closed form)", "dual": "optimum found numerically",
               "equal split": "equal split (the best split here)",
               "pinned": "every share fixed by hand"}.get(a.method, a.method)
        st.caption(f"The split gives each query the share of ε that makes the weighted errors smallest overall "
                   f"({how}; never worse than an equal split). To make one answer more precise, raise its weight on "
                   "the Queries page; to make all of them more precise, raise ε.")

pv = planning.preview(data, view, schema)
if pv is not None:
    if pv.fits:
        composed = lifetime.composed_note(pv, a.used_epsilon, a.delta)  # the Release page's words
        st.success(f"Fits the lifetime budget: this release spends ε = {fmt.eps(pv.epsilon_release)} of the "
                   f"{fmt.eps(max(pv.epsilon_remaining, 0.0))} that remain; "
                   f"{fmt.eps(max(pv.epsilon_remaining_after, 0.0))} will remain afterwards." + (f" {composed}" if composed else ""),
                   icon=":material/check_circle:")
    else:
        st.error(lifetime.over_budget(pv), icon=":material/block:")
        if mode in (SplitMode.WEIGHTED, SplitMode.EQUAL) and pv.epsilon_remaining > 0:
            def _fit(remaining: float = pv.epsilon_remaining, total: float = pv.epsilon_total) -> None:
                def fits(e: float) -> bool:
                    doc = json.loads(view.spec_json)
                    doc["budget"]["epsilon"] = e
                    text = json.dumps(doc, sort_keys=True)
                    try:
                        ss_plan = cached.spec_plan(text).plan
                    except PlannerError:
                        return False
                    v = planning.PlanView(s, ss_plan, None, view.wl_json, text, view.scales)
                    p2 = planning.preview(data, v, schema)
                    return p2 is not None and p2.fits

                best = advice.largest_fitting_epsilon(fits, max(remaining, 1e-9) * 1e-3, total)
                if best is None:
                    S.notice(PAGE, "Not even a tiny ε fits what remains: drop queries, or raise the lifetime budget "
                                   "(Ledger page).")
                else:
                    ss[S.EPSILON] = best
                    S.notice(PAGE, f"ε for this release set to {best:g}, the most that fits what remains.")

            st.button("Plan with the most ε that still fits", key="planner:fit", on_click=_fit)

st.subheader("Allocation")
st.caption("Each query's share of the budget and the error it is predicted to have: the true answer is within "
           "± the 95% error 19 times in 20; the typical error (RMSE) is smaller. Both in the unit shown.")
table = charts.prediction_table(plan.predictions)
charts.draw(charts.allocation_chart(table, "share ε"))
st.dataframe(table, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.4g")
                            for c in ("share ε", "δ", "ρ", "typical error", "±95% error")}
             | {"ρ": st.column_config.NumberColumn("ρ", format="%.4g", help="the Gaussian share in zero-concentrated DP"),
                "noise": st.column_config.TextColumn("noise", width="medium", help="scale of the noise added (Laplace b, "
                                                     "Gaussian σ) or the selection mechanism's ε and candidates")})

for pred in (p for p in plan.predictions if p.kind == QueryKind.KEY_COUNT):
    st.markdown(f"**{fmt.plain(pred.query_id)}: which keys will be shown.** Keys are not declared, so a key is shown only when "
                f"its noisy count reaches the threshold ({pred.noise['threshold']:.0f} rows). A key held by one person "
                f"is shown with probability {pred.noise['key_delta']:.2g}, within the key δ of {pred.delta:.2g} this "
                "query spends besides its ε; "
                f"a key needs about {pred.noise['rows_shown_95pct']:.0f} rows to be shown 19 times in 20.")
    st.dataframe(pd.DataFrame([{"rows in the key": k, "chance it is shown": f"{pr:.3g}"}
                               for k, pr in keep_table(pred)]), hide_index=True)

if mode is SplitMode.WEIGHTED:
    with st.expander("Fix some shares by hand (optional)"):
        st.caption("A fixed share is not optimised: the rest of the budget is split among the other queries. "
                   "Shares are ε, or ρ (zero-concentrated DP) for Gaussian noise. Leave blank to optimise.")
        pins = dict(ss[S.PINS])
        pin_df = pd.DataFrame([{"item": p.id, "query": p.query_id, "mechanism": p.mechanism,
                                "fixed share": pins.get(p.id)} for p in plan.predictions])
        pin_key = f"planner:pins:{ss[S.EDITOR_VERSION]}"
        if pin_key not in ss:
            ss["planner:pins_base"] = pin_df.to_dict("records")

        def _pins() -> None:
            rows = S.apply_editor_changes(ss["planner:pins_base"], ss[pin_key])
            ss[S.PINS] = {r["item"]: float(r["fixed share"]) for r in rows if pd.notna(r.get("fixed share"))}

        st.data_editor(pd.DataFrame(ss["planner:pins_base"]), key=pin_key, on_change=_pins, hide_index=True,
                       width="stretch", disabled=["item", "query", "mechanism"],
                       column_config={"fixed share": st.column_config.NumberColumn(min_value=0.0, format="%.4g")})

# ----------------------------------------------------------------------------- rules
@st.fragment
def _rules_curve(wl_json: str, schema_json: str, epsilon: float, delta: float, scales: cached.Pins) -> None:
    """The toggle and the curve of every rule across ε: a fragment, so that showing or hiding
    the curve reruns these two elements only, not the page (its plans, comparison and files)."""
    st.toggle("Plot each rule's errors across ε", **S.bind(S.SHOW_CURVE, PAGE))
    if ss[S.SHOW_CURVE]:
        with guard(stop=False) as g:
            with st.spinner("Optimising the split at 12 budgets under every rule…"):
                curve = cached.compare_curve(wl_json, schema_json, cached.curve_epsilons(epsilon), delta, scales)
        if g.ok:
            charts.draw(charts.rules_chart(curve, epsilon))
            st.caption("Lower is better. Rules that buy the same accuracy draw their lines on top of one another.")


st.subheader("Which composition rule buys the smallest errors?")
st.caption("A composition rule (an accountant) adds up the privacy cost of many answers. Some rules prove a smaller "
           "total for the same noise, so the same budget buys smaller errors — but not for every workload. "
           "What-if only: " + ("the rule in force is the dataset's." if s.rule_fixed else
                               "the rule is fixed when the lifetime budget is set."))
if mode is SplitMode.WEIGHTED:
    cmp = advice.compare_rules(cached.compare(view.spec_json), s.rule, s.delta, fixed=s.rule_fixed)
    st.markdown(cmp.headline)
    if cmp.why:
        st.caption(cmp.why)
    marker = " ← in force" if s.rule_fixed else " ← chosen above"
    st.dataframe(pd.DataFrame([{"rule": lifetime.rule_label(r.rule) + (marker if r.rule == s.rule else ""),
                                "typical error vs the best rule": None if r.factor is None else f"×{r.factor:.3f}",
                                "ε used": r.used_epsilon, "note": r.note} for r in cmp.rows]),
                 hide_index=True, width="stretch",
                 column_config={"ε used": st.column_config.NumberColumn(format="%.4g")})
    _rules_curve(view.wl_json, sj, s.epsilon, s.delta, view.scales)
elif mode in (SplitMode.EQUAL, SplitMode.MANUAL):
    from planner.outputs import report

    rows_r = report.rule_rows(s.rule, cached.compare_spec(view.spec_json))
    marker = " ← in force" if s.rule_fixed else " ← chosen above"
    if mode is SplitMode.EQUAL:
        st.markdown("The same equal split under each rule: a tighter rule gives every answer a larger share of the "
                    "same ε, so smaller errors.")
    else:
        st.markdown("The same shares cost a different ε under each rule (their errors do not change).")
    st.dataframe(pd.DataFrame([{"rule": lifetime.rule_label(r["rule"]) + (marker if r["in_force"] else ""),
                                **({"typical error vs the best rule": None if r["factor"] is None
                                    else f"×{r['factor']:.3f}"} if mode is SplitMode.EQUAL else {}),
                                "ε used": r["epsilon"], "note": r["note"]} for r in rows_r]),
                 hide_index=True, width="stretch",
                 column_config={"ε used": st.column_config.NumberColumn(format="%.4g")})
else:
    rows: list[dict[str, object]] = []
    least: dict[str, float | PlannerError] = {}
    per_rule = cached.compare(view.spec_json)
    for rule in S.RULES:
        try:
            got = per_rule[rule]
            if isinstance(got, PlannerError):
                raise got
            least[rule] = float(got.used_epsilon)
            rows.append({"rule": lifetime.rule_label(rule) + ((" ← in force" if s.rule_fixed else " ← chosen above")
                                                              if rule == s.rule else ""),
                         "least ε meeting every target": least[rule], "note": ""})
        except PlannerError as exc:
            least[rule] = exc
            rows.append({"rule": lifetime.rule_label(rule), "least ε meeting every target": None,
                         "note": f"does not apply: {exc}"})
    st.markdown(advice.compare_target_rules(least, s.rule, fixed=s.rule_fixed))
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={"least ε meeting every target": st.column_config.NumberColumn(format="%.4g")})

# ----------------------------------------------------------------------------- files
st.subheader("Plan files, code and report")
st.caption("Download this plan as the PLAN.json the command line reads (`planner plan --spec`, `planner release "
           "--spec`), as a Python script or a notebook that reproduce it with the planner's library, or as a "
           "report for stakeholders; upload a plan file to restore a plan.")
planfiles.downloads(data, view, PAGE)
planfiles.upload_form(data, PAGE)

# the ε the box's + and − send next, planned while the owner reads (nothing drawn, nothing released)
planning.prefetch_neighbours(data, sj, view)
