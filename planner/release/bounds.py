"""Releasing a bounds suggestion through the one release path.

:func:`suggest_bounds` releases the plan of :func:`planner.planning.bounds_suggest.plan_suggestion`
with :func:`planner.release.release`: the budget is checked, the spend recorded in the
ledger against the dataset's lifetime budget, the quantiles sampled by OpenDP and stored;
the same suggestion asked again (same column, grid, levels and ε on the same content)
returns the stored quantiles and spends nothing. The bounds are post-processing of the
released quantiles. ``planner bounds`` and the Data page call it.

What the bounds are for. ``planner bounds``, the Data page and :func:`suggest_bounds_file`
tune the quantile levels to the statistic the bounds are for
(:mod:`planner.planning.bounds_purpose`): by default a mean of the column, at the ε the
plan file gives its first mean of that column (else the plan's whole ε, and the words
say so); ``purpose="sum"`` for a sum; fixed ``levels`` (or ``purpose="quantile"``: the
default 0.01, 0.99) for quantiles and histograms.

:func:`check_bounds_sources` is what the generated script runs before a release: for each
column whose bounds came from a suggestion, it reads that release in the ledger (spending
nothing) and checks that its quantiles give exactly the declared bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from planner.core.errors import PlannerError, QueryError
from planner.data.backends.base import Backend
from planner.data.schema import BoundsSource, Schema
from planner.ledger import Ledger
from planner.planning.bounds_purpose import Purpose, Statistic, downstream_purpose
from planner.planning.bounds_suggest import (
    QUERY_ID,
    GridScale,
    SuggestionPlan,
    bounds_from_answers,
    bounds_source,
    plan_suggestion,
    range_grid,
)
from planner.planning.plan_spec import PlanSpec
from planner.privacy.budget import CompositionRule
from planner.release import ReleaseResult, release

__all__ = ["BoundsCheck", "BoundsSuggestion", "check_bounds_sources", "cmd_bounds", "purpose_for_spec",
           "suggest_bounds", "suggest_bounds_file"]

#: What the bounds may be said to be for: a statistic the levels are tuned to, or quantiles
#: (the fixed default levels).
PURPOSES = ("mean", "sum", "quantile")


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
    purpose: Purpose | str | None = None,
    purpose_epsilon: float | None = None,
) -> BoundsSuggestion:
    """A bounds suggestion from a plan file and a data file (what ``planner bounds`` calls):
    the file's schema, rule, dataset name and lifetime budget. The levels are tuned to
    ``purpose`` (:func:`purpose_for_spec`; by default a mean of the column) unless fixed
    ``levels`` are given."""
    from planner.data.backends import check_backend, close_backend, default_backend, make_backend
    from planner.data.sources import FileSource, dataset_key, open_cli_source
    from planner.planning.plan_spec import load_plan_spec

    if isinstance(spec, str):
        spec = load_plan_spec(spec)
    tuned = purpose_for_spec(spec, column, purpose, purpose_epsilon, levels)
    plan = plan_suggestion(spec.schema, column, epsilon, levels=levels, magnitude=magnitude, signed=signed,
                           lower=lower, upper=upper, scale=scale, rule=spec.rule, purpose=tuned)
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
               scale: str, ledger_url: str | None, backend: str | None, purpose: str | None = None,
               purpose_epsilon: float | None = None) -> dict[str, Any]:
    """``planner bounds``: the suggestion as JSON (bounds, source, spend, budget after it)."""
    return suggest_bounds_file(spec, data_path, column, epsilon=epsilon, levels=levels, magnitude=magnitude,
                               signed=signed, lower=lower, upper=upper, scale=scale, ledger_url=ledger_url,
                               backend=backend, purpose=purpose, purpose_epsilon=purpose_epsilon).to_dict()


def purpose_for_spec(spec: PlanSpec, column: str, purpose: Purpose | str | None, purpose_epsilon: float | None,
                     levels: Sequence[Any] | None) -> Purpose | None:
    """What a suggestion from a plan file tunes its levels to (public: the plan is made
    before any data is read). ``None`` (fixed levels) when ``levels`` are given or the
    purpose is ``"quantile"``; else a mean (the default) or a sum of ``column`` spending
    ``purpose_epsilon``, or, without it, the ε the file's plan gives its first such query
    on the column, or the plan's whole ε when it holds none (:func:`downstream_purpose`).
    """
    if isinstance(purpose, Purpose):
        return purpose
    what = "mean" if purpose is None else str(purpose).strip().lower()
    if what not in PURPOSES:
        raise QueryError(f"purpose (what the bounds are for) must be one of {list(PURPOSES)}; got {purpose!r}.")
    if levels is not None:
        if purpose is not None and what != "quantile":
            raise QueryError(f"give either fixed levels or what the bounds are for ({what!r}, which chooses the "
                             "levels), not both.")
        return None
    if what == "quantile":
        return None
    stat = Statistic(what)
    if purpose_epsilon is not None:
        return Purpose(stat, purpose_epsilon, basis="given")
    from planner.planning.plan_spec import build_plan

    try:
        the_plan = build_plan(spec).plan
    except PlannerError as exc:
        raise QueryError(f"tuning the bounds to a {what} needs the ε it will spend: the plan file's plan cannot be "
                         f"made ({exc}); give that ε (--for-epsilon).") from exc
    return downstream_purpose(the_plan, column, stat, fallback_epsilon=the_plan.epsilon)


@dataclass(frozen=True)
class BoundsCheck:
    """A column's declared bounds, checked against the suggestion release they came from."""

    column: str
    release_id: int
    lower: float
    upper: float

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "release_id": self.release_id, "lower": self.lower, "upper": self.upper}


def _released_bounds(src: BoundsSource, answer: Any) -> tuple[float, float]:
    """[L, U] from a stored suggestion answer (one level: ``{"alpha", "value"}``; two:
    ``{"parts": {"quantile@α": …}}``), as :func:`suggest_bounds` made them."""
    if not isinstance(answer, dict):
        raise PlannerError("the stored suggestion holds no quantiles.")
    parts = answer.get("parts") if "parts" in answer else {f"quantile@{answer.get('alpha', 0.5):g}": answer}
    if not isinstance(parts, dict):
        raise PlannerError("the stored suggestion holds no quantiles.")
    released: dict[float, float] = {}
    for a in src.levels:
        part = parts.get(f"quantile@{a:g}")
        if isinstance(part, dict) and isinstance(part.get("value"), (int, float)):
            released[a] = float(part["value"])
    coarse = src.coarse or (0.0, 1.0)
    # the grid only matters when the two quantiles collapsed; the default log grid over the coarse range
    return bounds_from_answers(src.levels, released, range_grid(coarse[0], coarse[1]))


def check_bounds_sources(spec: PlanSpec | str, data_path: str, *, ledger_url: str | None = None,
                         backend: str | None = None, spark_master: str | None = None) -> list[BoundsCheck]:
    """For each column of ``spec``'s schema whose bounds came from a DP suggestion
    (``bounds_source``): read that release in the ledger (spends nothing) and check that
    its quantiles give exactly the declared bounds. What the generated script runs before
    a release.

    Raises
    ------
    PlannerError
        The ledger holds no such release for this data, or it gives other bounds — naming
        the column, the release and the fix.
    """
    import math

    from planner.data.backends import check_backend, close_backend, default_backend, make_backend
    from planner.data.sources import dataset_key, open_cli_source
    from planner.planning.plan_spec import load_plan_spec

    if isinstance(spec, str):
        spec = load_plan_spec(spec)
    cols = [c for c in spec.schema.columns if c.bounds_source is not None]
    if not cols:
        return []
    source = open_cli_source(data_path)
    engine = make_backend((backend or default_backend()).strip().lower(), source, spec.schema,
                          spark_master=spark_master)
    try:
        check_backend(engine)
        key = dataset_key(engine.content_digest())
    finally:
        close_backend(engine)
    ledger = Ledger(ledger_url)
    try:
        info = ledger.find_dataset(key)
        records = {} if info is None else {r.release_id: r for r in ledger.releases(info.fingerprint)}
    finally:
        ledger.close()
    out: list[BoundsCheck] = []
    for c in cols:
        src = c.bounds_source
        assert src is not None
        rec = records.get(src.release_id)
        answers = None if rec is None else rec.answers
        if answers is None or QUERY_ID not in answers:
            raise PlannerError(f"the bounds of {c.name!r} are recorded as the DP quantiles of release "
                               f"#{src.release_id}, which this ledger does not hold (answered) for this data: use the "
                               "ledger and the data the suggestion was made on, or type the bounds by hand (which "
                               "drops their DP source).")
        lo, hi = _released_bounds(src, answers[QUERY_ID])
        if not (math.isclose(lo, c.bounds[0], rel_tol=1e-12, abs_tol=1e-12)
                and math.isclose(hi, c.bounds[1], rel_tol=1e-12, abs_tol=1e-12)):
            raise PlannerError(f"the bounds of {c.name!r} are declared [{c.bounds[0]:g}, {c.bounds[1]:g}] but release "
                               f"#{src.release_id}, recorded as their source, gave [{lo:g}, {hi:g}]: declare the "
                               "released bounds, or type your own (which drops their DP source).")
        out.append(BoundsCheck(c.name, src.release_id, lo, hi))
    return out
