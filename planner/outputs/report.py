"""A stakeholder report: one self-contained HTML file of a plan or a release.

The report says, for people who did not build the plan: which questions are answered, how
much of the privacy budget each one spends, how accurate each answer is predicted to be
(with charts), which composition rule accounts for the budget and what the other rules
would have cost, what the privacy guarantee means in plain words (with its sources), and
what the dataset's ledger holds. A release report adds the released values with their
error bars.

Everything in it is data-independent (schema, budget, queries, predictions) or already
released (noisy answers, the ledger's spends): no exact aggregate, no row count of the
data, no fingerprint of the file.

The file needs no network: the charts are Vega-Lite specifications built here as plain
dicts (:func:`epsilon_chart`, :func:`accuracy_chart`, :func:`rules_chart`,
:func:`ledger_chart`, :func:`answers_chart`) and rendered to inline SVG offline by
vl-convert (:func:`render_svg`, the Vega and Vega-Lite libraries compiled into the
package); the page has no script, no external style sheet, font or image.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from planner.outputs.render import render_svg
from planner.outputs.synthetic import (
    synthetic_columns,
    synthetic_preview,
    synthetic_sampler_words,
    synthetic_tables,
)
from planner.planning.plan_spec import PlanOutcome, PlanSpec, build_plan, compare_spec
from planner.planning.queries import Predicate, Query
from planner.planning.statistics import statistic
from planner.planning.workload import Plan, Prediction, SplitMode
from planner.privacy.accountants import rule as rule_of

if TYPE_CHECKING:
    from planner.data.schema import Schema
    from planner.ledger import BudgetStatus, HistoryPoint
    from planner.release import ReleaseResult

__all__ = [
    "accuracy_chart",
    "accuracy_rows",
    "answers_chart",
    "epsilon_chart",
    "guarantee_text",
    "ledger_chart",
    "plan_report",
    "render_svg",
    "rule_rows",
    "rules_chart",
]

VEGA_LITE: Final = "https://vega.github.io/schema/vega-lite/v5.json"  # an identifier, never fetched
#: Sources the report cites (docs/references.md): author and title.
SOURCES: Final = (
    "Aurélien Garivier, <i>How to learn while respecting individual privacy? An introduction to "
    "differential privacy</i>, lecture, ENS de Lyon, 15 November 2021.",
    "Borealis AI, <i>Tutorial #12: Differential privacy I: Introduction</i> (2021).",
    "Yang Yu, <i>A statistical framework for differential privacy</i> (presenting L. Wasserman and "
    "S. Zhou, JASA 105(489), 2010), Purdue University, 24 November 2015.",
    "Ilya Mironov, <i>Rényi differential privacy</i>, CSF 2017; Mark Bun and Thomas Steinke, "
    "<i>Concentrated differential privacy</i>, TCC 2016; Peter Kairouz, Sewoong Oh and Pramod "
    "Viswanath, <i>The composition theorem for differential privacy</i>, ICML 2015.",
)
#: Cited when the table is a secret sample (amplification by sampling).
SAMPLING_SOURCE: Final = (
    "Borja Balle, Gilles Barthe and Marco Gaboardi, <i>Privacy amplification by subsampling: tight "
    "analyses via couplings and divergences</i>, NeurIPS 2018.")


def rule_words(name: str) -> str:
    """A composition rule as the report names it: its full name from the rule registry
    (:func:`planner.privacy.accountants.rule`), never its code ("pld")."""
    return rule_of(name).full


MODE_WORDS: Final = {
    "weighted": "the split that makes the weighted errors smallest overall",
    "target": "the least ε that meets every question's error target",
    "equal": "an equal share for every answer",
    "manual": "shares typed by hand",
}


# --------------------------------------------------------------------------- charts
# drawn by planner.outputs.render.render_svg: in a worker process, text made printable


def _base(title: str, values: list[dict[str, Any]]) -> dict[str, Any]:
    return {"$schema": VEGA_LITE, "title": title, "data": {"values": values},
            "config": {"font": "sans-serif", "view": {"stroke": None}}, "background": "white"}


def epsilon_chart(predictions: Sequence[Prediction]) -> dict[str, Any]:
    """Bar per released quantity: its share ε of this release's budget."""
    values = [{"item": p.id, "epsilon": p.epsilon, "mechanism": p.mechanism} for p in predictions]
    return _base("Privacy budget (ε) per answer", values) | {
        "mark": "bar", "width": 520, "height": {"step": 22},
        "encoding": {
            "y": {"field": "item", "type": "nominal", "sort": None, "title": None, "axis": {"labelLimit": 260}},
            "x": {"field": "epsilon", "type": "quantitative", "title": "ε share"},
            "color": {"field": "mechanism", "type": "nominal", "title": "mechanism"},
        }}


def accuracy_chart(predictions: Sequence[Prediction]) -> dict[str, Any]:
    """Predicted ±95% error (bar) and typical error (tick) per answer, one panel per unit
    (each with its own scale)."""
    units: dict[str, list[dict[str, Any]]] = {}
    for p in predictions:  # a total and an average of the same column share a unit, not a magnitude
        unit = f"{p.unit}, totals" if p.kind == "sum" else p.unit
        units.setdefault(unit, []).append({"item": p.id, "bound": p.error_bound_95, "rmse": p.rmse})
    panels = []
    for unit, values in units.items():
        y = {"field": "item", "type": "nominal", "sort": None, "title": None, "axis": {"labelLimit": 260}}
        panels.append({
            "title": {"text": f"in {unit}", "anchor": "start", "fontSize": 12}, "data": {"values": values},
            "width": 460, "height": {"step": 22},
            "layer": [
                {"mark": {"type": "bar", "color": "#91a7ff"},
                 "encoding": {"y": y, "x": {"field": "bound", "type": "quantitative", "title": f"± error ({unit})",
                                            "axis": {"tickCount": 6}}}},
                {"mark": {"type": "tick", "color": "black", "thickness": 2},
                 "encoding": {"y": y, "x": {"field": "rmse", "type": "quantitative"}}},
            ]})
    base = _base("Predicted error per answer (95% bound: bar; typical error: tick)", [])
    del base["data"]
    return base | {"vconcat": panels, "spacing": 18}


def rules_chart(rows: Sequence[Mapping[str, Any]], mode: str) -> dict[str, Any]:
    """One bar per composition rule: how much larger its errors are than the best rule's
    (weighted and equal splits), or the ε it charges (manual and target)."""
    errors = mode in (SplitMode.WEIGHTED.value, SplitMode.EQUAL.value)
    field = "factor" if errors else "epsilon"
    values = [{"rule": r.get("label", r["rule"]), field: r[field],
               "in force": "in force" if r["in_force"] else "alternative"}
              for r in rows if r.get(field) is not None]
    title = ("Typical error under each rule, relative to the best rule (1 = best)" if errors
             else "ε charged under each rule")
    return _base(title, values) | {
        "mark": "bar", "width": 420, "height": {"step": 26},
        "encoding": {
            "y": {"field": "rule", "type": "nominal", "sort": None, "title": None, "axis": {"labelLimit": 360}},
            "x": {"field": field, "type": "quantitative", "title": "× the best rule's error" if errors else "ε"},
            "color": {"field": "in force", "type": "nominal", "title": None,
                      "scale": {"domain": ["in force", "alternative"], "range": ["#3b5bdb", "#adb5bd"]}},
        }}


def ledger_points(status: BudgetStatus, history: Sequence[HistoryPoint], *,
                  label: Callable[[HistoryPoint], str] | None = None) -> list[dict[str, Any]]:
    """The ledger chart's points: spent ε after each release and the lifetime ε in force at
    each (``HistoryPoint.epsilon_total``), so that the budget line steps up at a raise instead
    of drawing a raised budget as if it had always applied; a raise after the last release
    adds a last step, "now".

    Examples
    --------
    >>> from types import SimpleNamespace as N
    >>> pts = ledger_points(N(epsilon_total=3.0, epsilon_spent=1.5),
    ...                     [N(release_id=1, epsilon_spent=1.0, epsilon_total=1.0),
    ...                      N(release_id=2, epsilon_spent=1.5, epsilon_total=3.0)])
    >>> [(p["step"], p["epsilon"]) for p in pts if p["series"] == "lifetime budget"]
    [('start', 1.0), ('#1', 1.0), ('#2', 3.0)]
    """
    name = label or (lambda h: f"#{h.release_id}")

    def total(h: HistoryPoint) -> float:
        return float(h.epsilon_total) if math.isfinite(h.epsilon_total) else float(status.epsilon_total)

    def spent(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None

    first = total(history[0]) if history else float(status.epsilon_total)
    pts: list[dict[str, Any]] = [{"step": "start", "order": 0, "series": "spent", "epsilon": 0.0},
                                 {"step": "start", "order": 0, "series": "lifetime budget", "epsilon": first}]
    for i, h in enumerate(history, start=1):
        pts.append({"step": name(h), "order": i, "series": "spent", "epsilon": spent(h.epsilon_spent)})
        pts.append({"step": name(h), "order": i, "series": "lifetime budget", "epsilon": total(h)})
    if history and not math.isclose(total(history[-1]), float(status.epsilon_total), rel_tol=1e-12):
        n = len(history) + 1
        pts.append({"step": "now", "order": n, "series": "spent", "epsilon": spent(status.epsilon_spent)})
        pts.append({"step": "now", "order": n, "series": "lifetime budget", "epsilon": float(status.epsilon_total)})
    return pts


def ledger_chart(status: BudgetStatus, history: Sequence[HistoryPoint]) -> dict[str, Any]:
    """Spent ε after each release against the lifetime budget in force (step lines)."""
    pts = ledger_points(status, history)
    return _base("The dataset's lifetime budget and what its releases spent", pts) | {
        "mark": {"type": "line", "point": True, "interpolate": "step-after"}, "width": 420, "height": 180,
        "encoding": {
            "x": {"field": "step", "type": "nominal", "sort": {"field": "order"}, "title": "after release",
                  "axis": {"labelAngle": 0}},
            "y": {"field": "epsilon", "type": "quantitative", "title": "ε"},
            "color": {"field": "series", "type": "nominal", "title": None,
                      "scale": {"domain": ["spent", "lifetime budget"], "range": ["#3b5bdb", "#adb5bd"]}},
        }}


def answers_chart(rows: Sequence[Mapping[str, Any]], unit: str) -> dict[str, Any]:
    """Released values of one unit with their ±95% error bars."""
    values = [{"item": r["item"], "value": r["value"], "lower": r["value"] - r["error_bound_95"],
               "upper": r["value"] + r["error_bound_95"]} for r in rows]
    return _base(f"Released values ± 95% error ({unit})", values) | {
        "width": 480, "height": {"step": 24},
        "layer": [
            {"mark": {"type": "rule", "color": "#3b5bdb", "strokeWidth": 2},
             "encoding": {"y": {"field": "item", "type": "nominal", "sort": None, "title": None,
                                "axis": {"labelLimit": 300}},
                          "x": {"field": "lower", "type": "quantitative", "title": unit,
                                "scale": {"zero": False}},
                          "x2": {"field": "upper"}}},
            {"mark": {"type": "point", "filled": True, "color": "black", "size": 50},
             "encoding": {"y": {"field": "item", "type": "nominal", "sort": None},
                          "x": {"field": "value", "type": "quantitative"}}},
        ]}


# --------------------------------------------------------------------------- tables and words
def accuracy_rows(plan: Plan) -> list[dict[str, Any]]:
    """One row per released quantity: query, part, mechanism, ε, δ, ρ, typical error,
    ±95% error and its unit (the plan's own predictions)."""
    return [{"answer": p.id, "query": p.query_id, "kind": p.kind, "mechanism": p.mechanism, "part": p.part,
             "epsilon": p.epsilon, "delta": p.delta, "rho": p.rho, "rmse": p.rmse,
             "error_bound_95": p.error_bound_95, "bound": p.bound_kind, "unit": p.unit}
            for p in plan.predictions]


def rule_rows(rule_in_force: str, comparison: Mapping[str, Mapping[str, Any] | str]) -> list[dict[str, Any]]:
    """Per rule: the ε it charges, the typical error relative to the best rule (weighted
    and equal splits) and a note, from :func:`planner.planning.plan_spec.compare_spec`."""
    ok = {r: v for r, v in comparison.items() if isinstance(v, Mapping)}
    objectives = [float(v["objective"]) for v in ok.values() if "objective" in v]
    best = min(objectives) if objectives else None
    out = []
    for rule, v in comparison.items():
        row: dict[str, Any] = {"rule": rule, "label": rule_words(rule), "in_force": rule == rule_in_force,
                               "epsilon": None, "factor": None, "note": ""}
        if isinstance(v, Mapping):
            row["epsilon"] = float(v["used_epsilon"])
            if best is not None and "objective" in v and best > 0:
                row["factor"] = math.sqrt(float(v["objective"]) / best)
        else:
            row["note"] = f"does not apply: {v}"
        out.append(row)
    return out


def secret_sample_text(plan: Plan) -> str:
    """What a plan on a secret sample spends, on the sample and for the population (HTML).

    The queries' shares compose to ε_s on the sample; the sampling amplifies the composed
    total once, ε = ln(1 + q(e^ε_s − 1)) (Balle, Barthe and Gaboardi, "Privacy Amplification
    by Subsampling", 2018).
    """
    smp = plan.sampling
    if smp is None:
        return ""
    a = plan.allocation
    how = ("each member of the population was drawn independently with probability"
           if smp.scheme.value == "poisson" else "a fixed-size uniform draw (without replacement) of a fraction")
    return (
        f"<b>The table is a secret random sample</b> of a larger population ({_e(how)} q = {smp.rate:g}; nobody "
        f"outside knows who was drawn). The answers' shares compose to <b>ε = {_num(a.used_epsilon)}</b>"
        + (f", δ = {a.delta:g}" if a.delta > 0 else "")
        + f" on the sample; because only a secret sample was used, that is <b>ε = {_num(plan.used_epsilon)}</b>"
        + (f", δ = {plan.delta:g}" if plan.delta > 0 else "")
        + " for every member of the population, the budget the ledger counts (Balle, Barthe and Gaboardi)."
    )


def guarantee_text(spec: PlanSpec) -> list[str]:
    """The privacy guarantee of a plan in plain words (paragraphs of HTML), with ε in context
    (:mod:`planner.outputs.words`: the same words the app and the command line show)."""
    from planner.outputs.words import DEPLOYED, composition_note, epsilon_meaning

    s = spec.schema
    eps, delta = spec.epsilon, spec.delta
    unit = ("one row of the table" if s.unit.column is None
            else f"one person (all the rows sharing a value of <b>{html.escape(s.unit.column)}</b>, "
                 f"at most {s.unit.c} of them counted)")
    relation = ("whether or not that person is in the table at all" if s.relation.value == "add_remove"
                else "whatever that person's values are")
    factor = math.exp(min(eps, 700.0))
    sample = "" if s.sampling is None else (
        f" The table is a secret random sample of a population (rate q = {s.sampling.rate:g}): ε and δ here are "
        "the population's, after the amplification by sampling, and hold as long as who was drawn stays secret.")
    out = [
        f"<b>Who is protected.</b> The privacy unit is {unit}. Whatever is published, the chance of seeing "
        f"it changes by at most a factor <b>e<sup>ε</sup></b> depending on {relation}"
        + (f", except with a probability of at most <b>δ = {delta:g}</b>." if delta > 0 else "."),
        f"<b>How much.</b> This plan spends <b>ε = {eps:g}</b> in all (composed under "
        f"{html.escape(rule_words(spec.rule))}): any published outcome is at most "
        f"{factor:,.3g} times more (or less) likely with the person's data than without it. An attacker who "
        "already knows everything about everybody else cannot learn much more about the person than that bound "
        "allows, whatever they know or compute (Garivier; Borealis AI)." + sample,
        "<b>What it does not cover.</b> The guarantee is about individuals, not about the population: "
        "published statistics are meant to reveal facts about the group (that is what they are for). Every later "
        "release of the same data spends more of the dataset's lifetime budget; the ledger adds those costs up "
        "under the rule above and refuses a release that would exceed it. Anything computed from the published "
        "answers alone is covered by the same guarantee (post-processing).",
        "<b>What this ε means for one person.</b> " + html.escape(epsilon_meaning(eps)),
        "<b>Why the spent total differs from the ε typed.</b> " + html.escape(composition_note(spec.rule.value)),
        "<b>What others used.</b> " + " ".join(html.escape(d) for d in DEPLOYED),
        "<b>How accurate.</b> Each answer carries noise calibrated to the most one person can change it "
        "(its sensitivity). The predicted errors come from public facts only — the declared schema and bounds, "
        "ε, δ and the declared public row count — never from the data: the true value lies within the ±95% "
        "error 19 times in 20, and the typical error (RMSE) is smaller (Wasserman and Zhou; Yu).",
    ]
    return out


def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _e(value)
    if not math.isfinite(float(value)):
        return "∞" if value > 0 else "—"
    return f"{float(value):,.{digits}g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = (),
           raw: Sequence[int] = ()) -> str:
    """An HTML table; ``numeric`` columns are numbers, ``raw`` columns are HTML made here."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{_num(v)}</td>' if i in numeric else f"<td>{v}</td>" if i in raw
                         else f"<td>{_e(v)}</td>" for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def describe_options(q: Query) -> str:
    """A query's options in words, from its statistic's declared labels."""
    parts = []
    for o in statistic(q.kind).options:
        v = q.options.get(o.name)
        if v is None:
            continue
        if isinstance(v, Predicate):
            val = ", ".join(map(str, v.values))
            text = f"{v.column} {v.op.value} {'[' + val + ']' if v.op.value == 'in' else val}"
        elif isinstance(v, tuple):
            text = ", ".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v)
        elif isinstance(v, bool):
            text = "yes" if v else "no"
        else:
            text = f"{v:g}" if isinstance(v, float) else str(v)
        parts.append(f"{o.label}: {text}")
    return "; ".join(parts)


def _mechanism_label(q: Query) -> str:
    for m in statistic(q.kind).mechanisms:
        if m.name is q.mechanism:
            return m.label
    return q.mechanism.value


CSS: Final = """
body{font-family:sans-serif;color:#1b1f2a;max-width:1000px;margin:2em auto;padding:0 1em;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em}h2{border-bottom:2px solid #3b5bdb;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.92em}th,td{border:1px solid #ccd2e0;padding:.25em .55em;
text-align:left;vertical-align:top}th{background:#f3f5fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.meta{color:#555}.note{background:#f3f5fa;border-left:4px solid #3b5bdb;padding:.5em .8em}
.warn{background:#fff4e6;border-left:4px solid #f08c00;padding:.5em .8em}figure{margin:1em 0}
figure svg{max-width:100%;height:auto}.headline{font-size:1.4em;font-weight:600;margin:.2em 0}.sources li{margin:.3em 0}
"""


def plan_report(
    spec: PlanSpec,
    *,
    outcome: PlanOutcome | None = None,
    status: BudgetStatus | None = None,
    history: Sequence[HistoryPoint] = (),
    release: ReleaseResult | None = None,
    generated: datetime | None = None,
    title: str | None = None,
) -> str:
    """The stakeholder report of a plan (and of its release, when ``release`` is given) as
    one self-contained HTML document.

    Parameters
    ----------
    spec : PlanSpec
        The plan file's content (schema, budget, mode, queries).
    outcome : PlanOutcome, optional
        :func:`planner.planning.plan_spec.build_plan` of ``spec`` (made here when omitted).
    status, history : optional
        The dataset's ledger (:meth:`planner.ledger.Ledger.status` and ``history``).
    release : ReleaseResult, optional
        The release of this plan: its released values are shown with their error bars.
    generated : datetime, optional
        When the report is made (default: now, UTC).

    Raises
    ------
    PlannerError
        The plan cannot be made, or a chart cannot be drawn.
    """
    outcome = outcome or build_plan(spec)
    plan = outcome.plan
    name = spec.dataset_name or (status.name if status is not None else "the dataset")
    heading = title or (f"Release #{release.release_id} of {name}" if release is not None
                        else f"Privacy plan for {name}")
    out = _head_section(spec, plan, heading, generated, released=release is not None,
                        added=_added_by(release, history))
    out += _questions_section(spec)
    if release is not None:
        out += _release_section(release, plan, spec.schema)
    out += _verdict_section(plan, spec.schema) if release is None else []
    out += _budget_section(plan)
    out += _rules_section(spec, plan)
    out.append("<h2>The privacy guarantee in plain words</h2>")
    out += [f"<p>{p}</p>" for p in guarantee_text(spec)]
    out += _ledger_section(status, history)
    sources = (*SOURCES, SAMPLING_SOURCE) if plan.sampling is not None else SOURCES
    out.append('<h2>Sources</h2><ul class="sources">' + "".join(f"<li>{s}</li>" for s in sources) + "</ul>")
    out.append("</body></html>")
    return "\n".join(out)


def _added_by(release: ReleaseResult | None, history: Sequence[HistoryPoint]) -> float | None:
    """What ``release`` added to the dataset's spent total (the ledger's composition), if known."""
    if release is None:
        return None
    prev = 0.0
    for h in history:
        if h.release_id == release.release_id:
            return float(h.epsilon_spent - prev)
        prev = h.epsilon_spent
    return None


def _head_section(
    spec: PlanSpec, plan: Plan, heading: str, generated: datetime | None, *, released: bool,
    added: float | None = None,
) -> list[str]:
    """The document's head, title, when and how it was made, the ε spent, the secret
    sample (if any) and the plan's warnings."""
    a = plan.allocation
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    n_questions = len({q.id for q in spec.queries})
    out: list[str] = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(heading)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(heading)}</h1>",
        f'<p class="meta">Made with the Privacy Budget Planner on {when}. Mode: {_e(MODE_WORDS[spec.mode])}; '
        f"composition rule: {_e(rule_words(a.rule))}; δ = {a.delta:g}.</p>",
        '<p class="note">' + (
            f"The answers of this release cost <b>ε = {_num(plan.used_epsilon)}</b> on their own "
            f"({n_questions} questions)"
            + ("." if added is None or abs(added - plan.used_epsilon) <= 1e-9 * max(1.0, plan.used_epsilon) else
               f"; composed with the dataset's earlier releases under the rule, they added <b>ε = {_num(added)}</b> "
               "to its spent total (see “Why the spent total differs from the ε typed” below).")
            if released else
            f"This plan spends <b>ε = {_num(plan.used_epsilon)}</b> of the dataset's privacy budget on "
            f"{n_questions} questions. Nothing has been released by this plan yet.") + "</p>",
    ]
    if plan.sampling is not None:
        out.append('<p class="note">' + secret_sample_text(plan) + "</p>")
    for w in a.warnings:
        out.append(f'<p class="warn">{_e(w)}</p>')
    return out


def _questions_section(spec: PlanSpec) -> list[str]:
    """The questions: statistic, column, options, mechanism, and weight or target."""
    return ["<h2>The questions</h2>",
            _table(["question", "statistic", "column", "options", "mechanism",
                    "target ±" if spec.mode is SplitMode.TARGET else "weight"],
                   [[q.id, statistic(q.kind).label, q.column or "(all rows)", describe_options(q), _mechanism_label(q),
                     _num(q.target if spec.mode is SplitMode.TARGET else (q.weight if q.weight is not None else 1.0))]
                    for q in spec.queries])]


def _budget_section(plan: Plan) -> list[str]:
    """Each answer's share of the budget and its predicted accuracy, as a table and two charts."""
    out = ["<h2>Privacy budget and predicted accuracy per answer</h2>",
           "<p>Each released number gets a share of the budget; a larger share means less noise. "
           "The error columns are predictions from public facts (never from the data).</p>"]
    show_delta = any(p.delta > 0 for p in plan.predictions)
    header = ["answer", "mechanism", "ε", *(["δ", "ρ (zCDP)"] if show_delta else []), "typical error",
              "± 95% error", "unit"]
    body = [[p.id, p.mechanism, p.epsilon, *([p.delta, p.rho] if show_delta else []), p.rmse,
             p.error_bound_95 if p.bound_kind == "exact" else f"{_num(p.error_bound_95)} ({p.bound_kind})", p.unit]
            for p in plan.predictions]
    out.append(_table(header, body, numeric=[2, 3, 4, 5, 6] if show_delta else [2, 3, 4]))
    out.append(f"<figure>{render_svg(epsilon_chart(plan.predictions))}</figure>")
    out.append(f"<figure>{render_svg(accuracy_chart(plan.predictions))}</figure>")
    return out


def _rules_section(spec: PlanSpec, plan: Plan) -> list[str]:
    """The composition rule in force and what the same plan costs under the others
    (:func:`planner.planning.plan_spec.compare_spec`), as a table, a sentence and a chart."""
    a = plan.allocation
    out = ["<h2>The composition rule, and what the alternatives would have cost</h2>"]
    rows = rule_rows(spec.rule.value, compare_spec(spec))
    out.append(f"<p>The budget of all the answers together is accounted under "
               f"<b>{_e(rule_words(a.rule))}</b>. The same plan under the other rules:</p>")
    errors = spec.mode in (SplitMode.WEIGHTED, SplitMode.EQUAL)
    out.append(_table(["rule", "ε charged", *(["typical error × the best rule's"] if errors else []), "note"],
                      [[r["label"] + (" (in force)" if r["in_force"] else ""),
                        r["epsilon"], *([r["factor"]] if errors else []), r["note"]] for r in rows],
                      numeric=[1, 2] if errors else [1]))
    out.append(_rule_sentence(rows, spec.mode))
    if any(r.get("factor" if errors else "epsilon") is not None for r in rows):
        out.append(f"<figure>{render_svg(rules_chart(rows, spec.mode))}</figure>")
    return out


def _ledger_section(status: BudgetStatus | None, history: Sequence[HistoryPoint]) -> list[str]:
    """The dataset's ledger: its lifetime budget, what is spent and left, and the history chart."""
    out = ["<h2>The ledger of this dataset</h2>"]
    if status is None:
        out.append("<p>No lifetime budget is registered for this dataset yet: nothing can be released until an "
                   "owner sets one.</p>")
        return out
    remaining = max(status.epsilon_remaining, 0.0) if math.isfinite(status.epsilon_remaining) else 0.0
    out.append(_table(["lifetime ε", "lifetime δ", "rule", "spent so far", "remaining", "releases"],
                      [[status.epsilon_total, status.delta_total, rule_words(status.rule), status.epsilon_spent,
                        remaining, status.releases]], numeric=[0, 1, 3, 4, 5]))
    out.append("<p>Every release is recorded before any noise is drawn; nothing is ever refunded.</p>")
    if history:
        out.append(f"<figure>{render_svg(ledger_chart(status, history))}</figure>")
    return out


def _rule_sentence(rows: Sequence[Mapping[str, Any]], mode: str) -> str:
    key = "factor" if mode in ("weighted", "equal") else "epsilon"
    ok = [r for r in rows if r.get(key) is not None]
    if not ok:
        return "<p>No other rule applies to this plan.</p>"
    best = min(float(r[key]) for r in ok)
    winners = [r["label"] for r in ok if float(r[key]) <= best * 1.005]
    force = next((r for r in ok if r["in_force"]), None)
    what = "the smallest errors" if key == "factor" else "the least ε"
    text = f"<p>{_e(', '.join(winners))} give{'s' if len(winners) == 1 else ''} {what} for this plan."
    if force is not None and force["label"] not in winners:
        worse = (f"{float(force['factor']):.2f}× larger errors" if key == "factor"
                 else f"{float(force['epsilon']) / best:.2f}× the ε")
        text += f" The rule in force, {_e(force['label'])}, costs {worse}; it was fixed when the dataset's lifetime " \
                "budget was set (every release of a dataset is accounted under one rule)."
    return text + "</p>"


def _synthetic_section(result: ReleaseResult, rows: int = 10) -> list[str]:
    """A preview of each released synthetic table: its first rows (the whole table is in
    the release's JSON, ``answer.records``, and its CSV download)."""
    out: list[str] = []
    for qid, ans in synthetic_tables({a.query_id: a.answer for a in result.answers}).items():
        cols = synthetic_columns(ans)
        n = len(ans["records"])
        out.append(f"<h3>Synthetic table {_e(qid)}: the first {min(rows, n)} of {n} rows</h3>")
        out.append(f"<p>Drawn from a model fitted to noisy marginals ({_e(ans.get('generator', ''))}; "
                   f"{_e(synthetic_sampler_words(ans))}); the rows are not real people and may be shared like "
                   "any released value. Numeric values are drawn within their synthetic bin.</p>")
        out.append(_table(cols, [[r.get(c) for c in cols] for r in synthetic_preview(ans, rows)]))
    return out


def _verdict_section(plan: Plan, schema: Schema) -> list[str]:
    """Before any release: what each answer can support (:func:`planner.planning.advice.verdicts`)."""
    from planner.planning.advice import verdicts

    vs = verdicts(plan, schema)
    return ["<h2>What each answer can support</h2>",
            "<p>Judged from public facts only (the declared bounds, categories and row count, and this plan's "
            "noise), never from the data: the same verdicts the released answers carry.</p>",
            _table(["answer", "verdict", "error (in the owner's units)", "what it can support", "to improve it"],
                   [[qid, _grade_html(v.grade.value), v.error, v.supports, v.fix] for qid, v in vs.items()],
                   raw=[1])]


def _grade_html(grade: str) -> str:
    colour = {"usable": "#2b8a3e", "rough": "#e67700", "mostly noise": "#c92a2a"}.get(grade, "#555")
    return f'<b style="color:{colour}">{_e(grade)}</b>'


def _release_section(result: ReleaseResult, plan: Plan, schema: Schema) -> list[str]:
    """Per query a headline value with its error bar and its verdict, its chart, then every
    released number in one table (:func:`planner.outputs.results.answer_views`)."""
    from planner.outputs.results import answer_views

    out = ["<h2>The released answers</h2>",
           f"<p>Release #{result.release_id} ({_e(result.status)}). The released values are noisy by design; "
           "each comes with its predicted 95% error and a verdict on what it can support.</p>"]
    for v in answer_views(result, plan, schema):
        out.append(f"<h3>{_e(v.title)} <code>{_e(v.query_id)}</code> · {_grade_html(v.verdict.grade.value)}</h3>")
        out.append(f'<p class="headline">{_e(v.headline)}</p>')
        out.append(f"<p>{_e(v.verdict.supports)}" + (f" <i>{_e(v.verdict.fix)}</i>" if v.verdict.fix else "")
                   + "</p>")
        vals = [{"item": n.label or v.query_id, "value": float(n.value), "error_bound_95": float(n.high) - float(n.value)}
                for n in v.numbers if isinstance(n.value, float) and n.high is not None]
        if vals and v.chart in ("value", "sample"):
            out.append(f"<figure>{render_svg(answers_chart(vals, v.unit or 'value'))}</figure>")
        if v.chart == "sample":
            out.append(f"<p>The bin counts are shown with negatives as 0, as the sample is drawn from them; "
                       f"{len(v.sample):,} synthetic values were drawn (in the JSON report and the Release page's "
                       "CSV of values).</p>")
        for n in v.verdict.notes:
            out.append(f'<p class="meta">{_e(n)}</p>')
    rows = result.rows()
    out.append("<h3>Every released number</h3>")
    out.append(_table(["question", "part", "label", "released value", "± 95% error", "unit"],
                      [[r["query"], r["part"], r["label"], r["value"], r["error_bound_95"], r["unit"]] for r in rows],
                      numeric=[3, 4]))
    out += _synthetic_section(result)
    for w in result.warnings:
        out.append(f'<p class="warn">{_e(w)}</p>')
    return out
