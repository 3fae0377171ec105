"""A release read as results: per query a headline value with its error bar and a verdict.

One definition serves the Release page, the HTML report and the command line's output:
:func:`answer_views` turns a :class:`planner.release.ReleaseResult` (fresh or stored: the
same value) and the plan it released into one :class:`AnswerView` per query, in the order of
the plan. Everything here is post-processing of released values and public facts (the
schema, the plan's predictions): nothing reads the data.

* every released number carries its ±95% interval (``low``/``high``) where the error is in
  the answer's own units; a quantile's error is a rank error, so its numbers carry none and
  its verdict says what the rank error means in the column's units;
* a synthetic sample's bin counts are shown clamped at zero (post-processing, as the sample
  is drawn from them: Wasserman & Zhou 2010) and its values are delivered
  (:func:`sample_csv`);
* the verdict is :func:`planner.planning.advice.verdicts` of the plan — the same words
  before the release and on the result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planner.planning.advice import Verdict, verdicts
from planner.planning.statistics import statistic

if TYPE_CHECKING:
    from planner.data.schema import Schema
    from planner.planning.statistics.base import Prediction
    from planner.planning.workload import Plan
    from planner.release import QueryAnswer, ReleaseResult

__all__ = ["AnswerView", "Number", "answer_views", "format_value", "sample_csv", "text_summary"]


@dataclass(frozen=True, slots=True)
class Number:
    """One released number: its label (a bin, a group, a quantile level), its value and the
    ±95% interval around it (``None`` where the error is not in the value's units)."""

    label: str
    value: float | str | None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, slots=True)
class AnswerView:
    """One query's released answer as people read it.

    ``chart`` says how to draw it: ``"value"`` (numbers ± error on one scale), ``"quantile"``
    (released values on the column's declared range), ``"category"`` (a released category),
    ``"sample"`` (a synthetic sample: its bin counts and values).
    """

    query_id: str
    title: str
    kind: str
    unit: str
    headline: str
    verdict: Verdict
    numbers: tuple[Number, ...]
    chart: str
    bounds: tuple[float, float] | None = None
    sample: tuple[float, ...] = field(default=())


def format_value(v: float | str | None) -> str:
    """A released value for people: 4 significant digits (whole numbers with separators)."""
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if not math.isfinite(v):
        return str(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def _title(q: Any) -> str:
    base = statistic(q.kind).label
    by = q.option("by") if hasattr(q, "option") else None
    text = f"{base} of {q.column}" if q.column else base
    if by:
        text += " by " + ", ".join(str(b) for b in by)
    return text


def _level(part: str) -> str:
    if "@" not in part:
        return ""
    a = float(part.split("@", 1)[1])
    return "median" if a == 0.5 else f"{100 * a:.3g}% point"


def _numbers(a: QueryAnswer, preds: Sequence[Prediction], clamp: bool) -> tuple[Number, ...]:
    by_part = {p.part: p for p in preds}
    out = []
    for r in a.rows:
        p = by_part.get(r.part) or (preds[0] if preds else None)
        v = r.value
        if clamp and isinstance(v, (int, float)):
            v = max(float(v), 0.0)
        label = " · ".join(x for x in (_level(r.part), r.label) if x)
        e = p.error_bound_95 if p is not None and not p.unit.startswith(("rank", "rows (gap")) else None
        if isinstance(v, (int, float)) and e is not None and math.isfinite(e):
            lo, hi = float(v) - e, float(v) + e
            if clamp:
                lo = max(lo, 0.0)
            out.append(Number(label, float(v), lo, hi))
        else:
            out.append(Number(label, v))
    return tuple(out)


def _headline(kind: str, unit: str, nums: tuple[Number, ...], pred: Prediction | None) -> str:
    if not nums:
        return "no answer stored"
    if kind in ("quantile", "median", "grouped_quantile"):
        return "; ".join(f"{n.label or 'value'}: {format_value(n.value)}" for n in nums[:6]) + (
            " …" if len(nums) > 6 else "")
    if kind == "mode":
        return f"{format_value(nums[0].value)}"
    if kind == "synthetic_data":  # a table, not a number: its size, and how far its breakdowns may be
        e = (f"; its breakdowns predicted within {format_value(pred.error_bound_95)} of the real table's "
             "(total-variation distance, 0 to 1)") if pred is not None else ""
        return f"{nums[0].label}{e}"
    if len(nums) == 1:
        e = f" ± {format_value(pred.error_bound_95)}" if pred is not None else ""
        return f"{format_value(nums[0].value)}{e} {unit}".strip()
    e = f" ± {format_value(pred.error_bound_95)}" if pred is not None else ""
    top = max((n for n in nums if isinstance(n.value, float)), key=lambda n: float(n.value or 0), default=None)
    lead = f"; largest: {top.label} {format_value(top.value)}" if top is not None else ""
    return f"{len(nums)} numbers, each{e} {unit}{lead}"


def answer_views(result: ReleaseResult, plan: Plan, schema: Schema) -> list[AnswerView]:
    """One :class:`AnswerView` per released query, in the plan's order."""
    verdict_of = verdicts(plan, schema)
    preds_of: dict[str, list[Prediction]] = {}
    for p in plan.predictions:
        preds_of.setdefault(p.query_id, []).append(p)
    query_of = {p.query.id: p.query for p in plan.parts}
    out = []
    for a in result.answers:
        q = query_of.get(a.query_id)
        preds = preds_of.get(a.query_id, [])
        if q is None or a.query_id not in verdict_of:
            continue
        pred = max(preds, key=lambda x: x.error_bound_95) if preds else None
        unit = (pred.unit if pred else "").replace(" per bin", "").replace(" per group", "")
        kind = a.kind
        sample = kind == "synthetic_sample"
        nums = _numbers(a, preds, clamp=sample)
        bounds = None
        chart = "value"
        if kind in ("quantile", "median", "grouped_quantile"):
            chart = "quantile"
            bounds = schema.column(q.column or "").bounds
            unit = f"{q.column} units"
        elif kind == "mode":
            chart = "category"
        elif sample:
            chart = "sample"
            bounds = schema.column(q.column or "").bounds
        values: tuple[float, ...] = ()
        drawn = a.answer.get("sample") if isinstance(a.answer, dict) else None
        if sample and isinstance(drawn, list):
            values = tuple(float(v) for v in drawn if isinstance(v, (int, float)))
        out.append(AnswerView(a.query_id, _title(q), kind, unit, _headline(kind, unit, nums, pred),
                              verdict_of[a.query_id], nums, chart, bounds, values))
    return out


def sample_csv(view: AnswerView, count: int | None = None) -> str:
    """The synthetic sample's values as a one-column CSV (header: the query id): all of them,
    or the first ``count`` — the values are independent draws from the released histogram, so
    any first ``count`` of them are a synthetic sample of that size (post-processing: free).

    Examples
    --------
    >>> v = AnswerView("ages", "", "synthetic_sample", "", "", None, (), "sample", (0.0, 1.0),  # type: ignore[arg-type]
    ...                (0.25, 0.5, 0.75))
    >>> sample_csv(v, 2).splitlines()
    ['ages', '0.25', '0.5']
    """
    from planner.core.exports import csv_text

    values = view.sample if count is None else view.sample[:max(int(count), 0)]
    return csv_text([view.query_id], [[v] for v in values])


def text_summary(views: Sequence[AnswerView]) -> list[str]:
    """The results in plain lines (the command line's ``summary``): per query its headline
    and its verdict."""
    return [f"{v.query_id} ({v.title}): {v.headline}. {v.verdict.sentence()}" for v in views]
