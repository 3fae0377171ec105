"""Releasing a bounds suggestion through the one release path.

:func:`suggest_bounds` releases the plan of :func:`planner.planning.bounds_suggest.plan_suggestion`
with :func:`planner.release.release`: the budget is checked, the spend recorded in the
ledger against the dataset's lifetime budget, the quantiles sampled by OpenDP and stored;
the same suggestion asked again (same column, grid, levels and ε on the same content)
returns the stored quantiles and spends nothing. The bounds are post-processing of the
released quantiles. ``planner bounds`` and the Data page call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from planner.data.backends.base import Backend
from planner.data.schema import BoundsSource, Schema
from planner.ledger import Ledger
from planner.planning.bounds_suggest import (
    GridScale,
    SuggestionPlan,
    bounds_from_answers,
    bounds_source,
    plan_suggestion,
)
from planner.planning.plan_spec import PlanSpec
from planner.privacy.budget import CompositionRule
from planner.release import ReleaseResult, release

__all__ = ["BoundsSuggestion", "cmd_bounds", "suggest_bounds", "suggest_bounds_file"]


@dataclass(frozen=True)
class BoundsSuggestion:
    """A released bounds suggestion: [lower, upper], where they came from (the schema's
    :class:`~planner.data.schema.BoundsSource`), the plan and the release."""

    column: str
    lower: float
    upper: float
    source: BoundsSource
    plan: SuggestionPlan
    result: ReleaseResult

    @property
    def status(self) -> str:
        """``done`` (sampled now, ε spent) or ``reused`` (stored; nothing spent)."""
        return self.result.status

    @property
    def epsilon_spent(self) -> float:
        """The ε recorded for the suggestion (OpenDP's where larger than the plan's)."""
        return float(self.result.answer(self.plan.query.id).epsilon)

    def quantiles(self) -> dict[str, float]:
        """The released quantiles by level (``"0.01"`` → value)."""
        return {r.part.split("@")[1]: float(r.value) for r in self.result.answer(self.plan.query.id).rows
                if r.value is not None}

    def apply(self, schema: Schema) -> Schema:
        """``schema`` with the column's bounds set to the suggestion and its source recorded."""
        from planner.planning.bounds_suggest import apply_bounds

        return apply_bounds(schema, self.column, self.lower, self.upper, self.source)

    def to_dict(self) -> dict[str, Any]:
        """Public facts only: the suggestion, its spend, the budget after it, its prediction
        and the OpenDP description of the released measurements."""
        rep = self.result.report_json()
        ans = self.result.answer(self.plan.query.id)
        return {
            "format": "privacy-budget-planner/bounds-suggestion",
            "version": 1,
            "column": self.column,
            "lower": self.lower,
            "upper": self.upper,
            "bounds_source": self.source.to_dict(),
            "quantiles": self.quantiles(),
            "status": self.status,
            "release_id": self.result.release_id,
            "spent": {"epsilon": self.epsilon_spent, "delta": float(ans.delta),
                      "note": "nothing spent now: the stored suggestion" if self.status != "done" else
                      "recorded in the ledger against the lifetime budget"},
            "budget": rep["budget"],
            "dataset": rep["dataset"],
            "prediction": self.plan.to_dict(),
            "opendp": list(ans.opendp),
        }


def suggest_bounds(
    suggestion: SuggestionPlan,
    backend: Backend,
    ledger: Ledger,
    fingerprint: str,
    dataset_name: str,
    *,
    total_epsilon: float | None = None,
    total_delta: float | None = None,
    rule: CompositionRule | str | None = None,
) -> BoundsSuggestion:
    """Release ``suggestion`` (check → spend → sample → store; a rerun reuses) and turn its
    quantiles into bounds.

    ``backend`` must read the data under ``suggestion.schema`` (the column's bounds are the
    public coarse range); ``fingerprint``, ``dataset_name`` and the lifetime budget are as
    in :func:`planner.release.release`.
    """
    res = release(suggestion.plan, suggestion.schema, backend, ledger, fingerprint, dataset_name,
                  total_epsilon=total_epsilon, total_delta=total_delta, rule=rule)
    ans = res.answer(suggestion.query.id)
    by_part = {r.part: r.value for r in ans.rows}
    released = {a: float(v) for a in suggestion.levels if (v := by_part.get(f"quantile@{a:g}")) is not None}
    lower, upper = bounds_from_answers(suggestion.levels, released, suggestion.grid)
    src = bounds_source(suggestion, res.release_id, float(ans.epsilon))
    return BoundsSuggestion(suggestion.column, lower, upper, src, suggestion, res)


def suggest_bounds_file(
    spec: PlanSpec | str,
    data_path: str,
    column: str,
    *,
    epsilon: Any,
    levels: Sequence[Any] | None = None,
    magnitude: float | None = None,
    signed: bool = False,
    lower: float | None = None,
    upper: float | None = None,
    scale: GridScale | str = GridScale.LOG,
    ledger_url: str | None = None,
    backend: str | None = None,
    spark_master: str | None = None,
) -> BoundsSuggestion:
    """A bounds suggestion from a plan file and a data file (what ``planner bounds`` and the
    generated script call): the file's schema, rule, dataset name and lifetime budget."""
    from planner.data.backends import check_backend, close_backend, default_backend, make_backend
    from planner.data.sources import FileSource, dataset_key, open_cli_source
    from planner.planning.plan_spec import load_plan_spec

    if isinstance(spec, str):
        spec = load_plan_spec(spec)
    plan = plan_suggestion(spec.schema, column, epsilon, levels=levels, magnitude=magnitude, signed=signed,
                           lower=lower, upper=upper, scale=scale, rule=spec.rule)
    source = open_cli_source(data_path)
    kind = (backend or default_backend()).strip().lower()
    engine = make_backend(kind, source, plan.schema, spark_master=spark_master)
    try:
        check_backend(engine)
        key = dataset_key(engine.content_digest())
        name = spec.dataset_name or (source.files[0].name if isinstance(source, FileSource) and len(source.files) == 1
                                     else source.label)
        ledger = Ledger(ledger_url)
        try:
            life = spec.lifetime
            return suggest_bounds(plan, engine, ledger, key, name,
                                  total_epsilon=None if life is None else life[0],
                                  total_delta=None if life is None else life[1], rule=spec.rule)
        finally:
            ledger.close()
    finally:
        close_backend(engine)


def cmd_bounds(spec: str, data_path: str, column: str, *, epsilon: Any, levels: Sequence[Any] | None,
               magnitude: float | None, signed: bool, lower: float | None, upper: float | None,
               scale: str, ledger_url: str | None, backend: str | None) -> dict[str, Any]:
    """``planner bounds``: the suggestion as JSON (bounds, source, spend, budget after it)."""
    return suggest_bounds_file(spec, data_path, column, epsilon=epsilon, levels=levels, magnitude=magnitude,
                               signed=signed, lower=lower, upper=upper, scale=scale, ledger_url=ledger_url,
                               backend=backend).to_dict()
