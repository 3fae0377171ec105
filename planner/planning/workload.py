"""From queries to a plan: what the planner optimises and what it predicts, per query.

:func:`build_items` asks each query's statistic (:mod:`planner.planning.statistics`) for its
allocation items; :func:`plan` allocates a total budget and returns, per item, its share,
the noise scale and the predicted RMSE and 95% error bound in the query's own units
(again from the statistic). Everything here is data-independent (docs/mathematics.md §7): it reads
the schema, the queries, ε and δ, and the declared public row count — never the data.

Secret samples. When the schema declares that the table is a secret random sample of a
population at a public rate q (:attr:`planner.data.schema.Schema.sampling`), the owner's ε and δ
are the *population's*. Every plan then allocates the base budget
(ε_s, δ_s) = (ln(1 + (e^ε − 1)/q), δ/q) (:meth:`planner.privacy.sampling.Sampling.base_budget`) with
the unchanged accountants, so that the composed releases, amplified once, cost exactly the
owner's budget: ln(1 + q(e^{ε_s} − 1)) = ε, q·δ_s = δ (Balle, Barthe & Gaboardi 2018, Thms
9–10). The noise, and so every prediction, is that of the base allocation.

References
----------
B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling: Tight Analyses via
Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from planner.core.errors import PlanError, PlannerError, QueryError
from planner.core.rootfind import bisect
from planner.data.schema import Schema
from planner.planning.allocation import (
    Allocation,
    Item,
    ItemAllocation,
    Method,
    Target,
    allocate,
    allocate_equal,
    applicable_rules,
    error_curve,
    pinned_cost,
    plan_targets,
    plan_warnings,
)
from planner.planning.queries import Query
from planner.planning.statistics import statistic
from planner.planning.statistics.base import BETA, Part, Prediction
from planner.privacy.accounting import CompositionRule, pure_epsilon
from planner.privacy.budget import Budget, SplitMode  # SplitMode: re-exported
from planner.privacy.sampling import Sampling

__all__ = [
    "CurvePoint",
    "Part",
    "Plan",
    "Prediction",
    "SplitMode",
    "TargetResult",
    "accuracy_curves",
    "budget_for",
    "build_items",
    "compare",
    "compare_curve",
    "default_error_scales",
    "item_ids",
    "manual_total",
    "plan",
    "plan_equal",
    "plan_for_targets",
    "plan_manual",
    "predict",
    "secret_sample_dict",
]


def default_error_scales(queries: Sequence[Query], schema: Schema) -> dict[str, float] | None:
    """A public magnitude per query, so relative errors can share one budget fairly.

    Data-independent (docs/mathematics.md §7): from the declared bounds and the public row count n
    only, as each statistic declares it (count → n; sum → n·(|L|+|U|)/2; mean →
    (|L|+|U|)/2; histogram, mode and synthetic sample → n per bin; a grouped count, sum or
    mean → the base statistic's in a group of n/G rows, G groups). Quantiles (already a
    fraction of n, or of a group's rows) and proportions (in [0, 1]) keep scale 1. ``None``
    when n is not declared.
    """
    if schema.public_n is None:
        return None
    out: dict[str, float] = {}
    for q in queries:
        scale = statistic(q.kind).error_scale(q, schema)
        if scale is not None:
            out[q.id] = scale
    return out


def build_items(
    queries: Sequence[Query], schema: Schema, error_scales: dict[str, float] | None = None
) -> list[Part]:
    """The allocation items of a workload (one per query, one per level of a quantile query).

    ``error_scales`` maps a query id to the public scale its error is measured against
    (relative error); absent ids use 1 (absolute error).
    """
    scales = error_scales or {}
    parts: list[Part] = []
    for q in queries:
        q.validate(schema)
        w = 1.0 if q.weight is None else float(q.weight)
        mine = statistic(q.kind).items(q, schema, w, float(scales.get(q.id, 1.0)))
        for part in mine:
            _check_weighting(part)
        parts.extend(mine)
    return parts


def _check_weighting(part: Part) -> None:
    """The allocator weighs an item's MSE by weight ÷ scale²: refuse a scale (given, or made
    from tiny declared bounds) for which that leaves the float range, naming the query,
    rather than fail inside the allocator (found by fuzzing: a scale of 1e-200)."""
    it = part.item
    s2 = it.error_scale * it.error_scale
    eff = it.weight / s2 if s2 > 0.0 else math.inf
    # room left for the MSE it multiplies; 0 only for a weight of 0 (an item that counts nothing)
    if not eff < 1e250 or (eff == 0.0 and it.weight > 0.0):
        raise QueryError(
            f"{part.query.where}: its error is measured against a scale of {it.error_scale:g} "
            f"(weight {it.weight:g}); weight ÷ scale² = {eff:g} is beyond what the planner can weigh. "
            "Give the query a 'scale' nearer its answer's size, or declare the column in larger units."
        )


def predict(part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
    """RMSE and 95% error bound of one item at its allocated share (data-independent)."""
    return statistic(part.query.kind).predict(part, share, schema, rule)


@dataclass(frozen=True, slots=True)
class Plan:
    """A workload's allocation under one rule, with per-item predictions.

    ``allocation`` is always in the table's own terms: what the releases compose to under
    the rule (the shares the noise is drawn with). When the schema declares a secret
    sample (``sampling``), that is the *base* budget on the sample and ``budget`` is the
    owner's population (ε, δ); :attr:`epsilon`, :attr:`delta` and :attr:`used_epsilon` are
    the population's (amplified once, :meth:`planner.privacy.sampling.Sampling.amplify`). Without
    sampling the two coincide.
    """

    allocation: Allocation
    parts: tuple[Part, ...]
    predictions: tuple[Prediction, ...]
    sampling: Sampling | None = None
    budget: tuple[float, float] | None = None

    @property
    def epsilon(self) -> float:
        """The plan's total ε for the privacy unit of the population (the owner's budget)."""
        if self.sampling is None or self.budget is None:
            return self.allocation.epsilon
        return self.budget[0]

    @property
    def delta(self) -> float:
        """The plan's total δ for the population."""
        if self.sampling is None or self.budget is None:
            return self.allocation.delta
        return self.budget[1]

    @property
    def used_epsilon(self) -> float:
        """What the plan spends for the population: the allocation's composed ε, amplified
        once when the table is a secret sample, ln(1 + q(e^ε_s − 1))."""
        a = self.allocation
        if self.sampling is None:
            return a.used_epsilon
        return self.sampling.amplify(a.used_epsilon, a.delta)[0]

    def to_dict(self) -> dict[str, Any]:
        """JSON form. ``epsilon``, ``delta`` and ``used_epsilon`` are the population's; a
        secret sample adds ``secret_sample`` with the base (sample) and population budgets
        (the queries' shares are on the sample)."""
        a = self.allocation
        out: dict[str, Any] = {
            "rule": a.rule.value,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "used_epsilon": self.used_epsilon,
            "objective": a.objective,
            "method": a.method,
            "warnings": list(a.warnings),
            "queries": [p.to_dict() for p in self.predictions],
        }
        if self.sampling is not None:
            out["secret_sample"] = secret_sample_dict(self.sampling, a.epsilon, a.delta, a.used_epsilon,
                                                      self.epsilon, self.delta)
        return out


def secret_sample_dict(sampling: Sampling, epsilon_sample: float, delta_sample: float, used_sample: float,
                       epsilon_population: float, delta_population: float) -> dict[str, Any]:
    """What a plan's JSON says about a secret sample: the rate and scheme, and the budget on
    the sample (what the queries' shares compose to) beside the population's.

    Examples
    --------
    >>> s = Sampling(0.1)
    >>> d = secret_sample_dict(s, *s.base_budget(0.5, 1e-7), s.base_budget(0.5, 1e-7)[0], 0.5, 1e-7)
    >>> d["rate"], round(d["sample"]["epsilon"], 6), d["population"]["epsilon"]
    (0.1, 2.013197, 0.5)
    """
    used_pop = sampling.amplify(used_sample, delta_sample)[0]
    return {
        "rate": sampling.rate,
        "scheme": sampling.scheme.value,
        "relation": sampling.relation,
        "sample": {"epsilon": epsilon_sample, "delta": delta_sample, "used_epsilon": used_sample},
        "population": {"epsilon": epsilon_population, "delta": delta_population, "used_epsilon": used_pop},
        "note": ("The table is a secret random sample of a population: the queries' shares compose to the "
                 "sample's ε; amplified once by the sampling, ln(1 + q(e^ε − 1)), they cost the population's ε "
                 "(Balle, Barthe & Gaboardi 2018)."),
    }


def budget_for(schema: Schema, epsilon: float, delta: float) -> tuple[float, float]:
    """The (ε, δ) a plan allocates for the owner's (population) budget: unchanged, or for a
    secret sample the base budget (ln(1 + (e^ε − 1)/q), δ/q) whose amplification is ε
    (:meth:`planner.privacy.sampling.Sampling.base_budget`; Balle, Barthe & Gaboardi 2018).

    Examples
    --------
    >>> from planner.data.schema import Column, ColumnKind, MissingRule, Schema
    >>> col = (Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),)
    >>> budget_for(Schema(col), 0.5, 1e-7)
    (0.5, 1e-07)
    >>> e, d = budget_for(Schema(col, sampling=Sampling(0.1)), 0.5, 1e-7)
    >>> round(e, 6), d  # ln(1 + (e^0.5 − 1)/0.1), 1e-7/0.1
    (2.013197, 1e-06)
    """
    if schema.sampling is None:
        return epsilon, delta
    return schema.sampling.base_budget(epsilon, delta)


def _sampled(alloc: Allocation, parts: Sequence[Part], schema: Schema, epsilon: float, delta: float) -> Plan:
    """The :class:`Plan` of an allocation made with :func:`budget_for`: the warnings speak of
    the population's ε (and of δ on the sample, against the table's own row count)."""
    smp = schema.sampling
    preds = _predictions(parts, alloc, schema, alloc.rule)
    if smp is None:
        return Plan(alloc, tuple(parts), preds)
    alloc = replace(alloc, warnings=plan_warnings(epsilon, alloc.delta, schema.public_n))
    return Plan(alloc, tuple(parts), preds, smp, (float(epsilon), float(delta)))


def _predictions(parts: Sequence[Part], alloc: Allocation | Sequence[ItemAllocation], schema: Schema,
                 rule: CompositionRule) -> tuple[Prediction, ...]:
    shares = alloc.items if isinstance(alloc, Allocation) else tuple(alloc)
    return tuple(predict(p, s, schema, rule) for p, s in zip(parts, shares, strict=True))


def plan(
    queries: Sequence[Query],
    schema: Schema,
    epsilon: float,
    delta: float,
    rule: CompositionRule | str,
    error_scales: dict[str, float] | None = None,
    pinned: dict[str, float] | None = None,
) -> Plan:
    """Weighted mode over a workload: allocate, then predict every query's accuracy.

    ``pinned`` maps an item id to a fixed θ (ε for pure mechanisms, ρ for Gaussian ones).
    """
    parts = build_items(queries, schema, error_scales)
    pins = pinned or {}
    unknown = set(pins) - {p.item.id for p in parts}
    if unknown:
        raise QueryError(f"pinned shares name unknown queries {sorted(unknown)}; use the query ids of the plan.")
    items = [_pin(p.item, pins.get(p.item.id)) for p in parts]
    alloc = allocate(items, *budget_for(schema, epsilon, delta), rule, schema.public_n)
    return _sampled(alloc, parts, schema, epsilon, delta)


def plan_equal(
    queries: Sequence[Query],
    schema: Schema,
    epsilon: float,
    delta: float,
    rule: CompositionRule | str,
    error_scales: dict[str, float] | None = None,
) -> Plan:
    """Equal mode: every allocation item (a query, or one level of a quantile query) gets
    the same standalone ε, the largest that composes to at most ``epsilon`` under ``rule``
    (:func:`planner.planning.allocation.allocate_equal`). Weights and scales do not change it.

    Examples
    --------
    Two counts and a sum under basic composition at ε = 0.9: 0.3 each (by hand):

    >>> from planner.data.schema import Column, ColumnKind, MissingRule, Schema
    >>> s = Schema((Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),))
    >>> qs = [Query("a", "count", None, "laplace"), Query("b", "count", None, "laplace", weight=5),
    ...       Query("c", "sum", "age", "laplace")]
    >>> [round(p.epsilon, 9) for p in plan_equal(qs, s, 0.9, 0.0, "basic").predictions]
    [0.3, 0.3, 0.3]
    """
    parts = build_items(queries, schema, error_scales)
    alloc = allocate_equal([p.item for p in parts], *budget_for(schema, epsilon, delta), rule, schema.public_n)
    return _sampled(alloc, parts, schema, epsilon, delta)


def item_ids(queries: Sequence[Query], schema: Schema) -> list[tuple[str, str, str, bool]]:
    """``(item id, query id, part, gaussian)`` of every allocation item, in plan order: the
    shares a manual split needs (ε, or ρ when ``gaussian``)."""
    return [(p.item.id, p.query.id, p.label, p.item.is_gaussian) for p in build_items(queries, schema)]


def _manual_items(queries: Sequence[Query], schema: Schema, shares: dict[str, float],
                  error_scales: dict[str, float] | None) -> tuple[list[Part], list[Item]]:
    parts = build_items(queries, schema, error_scales)
    ids = {p.item.id for p in parts}
    unknown = sorted(set(shares) - ids)
    if unknown:
        raise QueryError(f"shares name unknown queries {unknown}; use the query ids of the plan.")
    missing = [p.item.id for p in parts if p.item.id not in shares]
    if missing:
        raise QueryError(
            f"a manual split needs a share for every query; type one for {missing} "
            "(ε, or ρ for Gaussian noise)."
        )
    return parts, [_pin(p.item, float(shares[p.item.id])) for p in parts]


def manual_total(queries: Sequence[Query], schema: Schema, delta: float, rule: CompositionRule | str,
                 shares: dict[str, float]) -> float:
    """The ε a manual split costs under ``rule``: its shares composed by the ledger's
    accountant (:func:`planner.planning.allocation.pinned_cost`), whatever the budget.

    For a secret sample (the schema's ``sampling``) the population's ε: the shares composed
    on the sample at δ/q, amplified once (:func:`planner.privacy.sampling.sampled_total_epsilon`).

    Examples
    --------
    >>> from planner.data.schema import Column, ColumnKind, MissingRule, Schema
    >>> s = Schema((Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),))
    >>> qs = [Query("a", "count", None, "laplace"), Query("c", "sum", "age", "laplace")]
    >>> round(manual_total(qs, s, 0.0, "basic", {"a": 0.25, "c": 0.5}), 12)
    0.75
    """
    _, items = _manual_items(queries, schema, shares, None)
    smp = schema.sampling
    if smp is None:
        return pinned_cost(items, delta, rule)
    return smp.amplify(pinned_cost(items, smp.base_delta(delta), rule), smp.base_delta(delta))[0]


def plan_manual(
    queries: Sequence[Query],
    schema: Schema,
    epsilon: float,
    delta: float,
    rule: CompositionRule | str,
    shares: dict[str, float],
    error_scales: dict[str, float] | None = None,
) -> Plan:
    """Manual mode: every item's share as typed (ε, or ρ for Gaussian noise), refused with
    the composed total when it exceeds ``epsilon`` under ``rule``.

    Raises
    ------
    QueryError
        A share is missing or names no item of the plan.
    PlanError
        The shares cost more than ``epsilon`` (the message gives their total).
    """
    parts, items = _manual_items(queries, schema, shares, error_scales)
    if schema.sampling is not None:
        cost = manual_total(queries, schema, delta, rule, shares)
        if not cost <= epsilon * (1 + 1e-12):
            raise PlanError(
                f"the manual shares cost ε = {cost:.6g} for the population (composed on the secret sample "
                f"at rate {schema.sampling.rate:g}, amplified once), more than the budget ε = {epsilon:g}; "
                "lower the shares or raise ε."
            )
    alloc = allocate(items, *budget_for(schema, epsilon, delta), rule, schema.public_n)
    return _sampled(alloc, parts, schema, epsilon, delta)


def plan_budget(queries: Sequence[Query], schema: Schema, budget: Budget,
                error_scales: dict[str, float] | None = None, pinned: dict[str, float] | None = None) -> Plan:
    """:func:`plan` with a :class:`~planner.privacy.budget.Budget` value."""
    return plan(queries, schema, budget.epsilon, budget.delta, budget.rule, error_scales, pinned)


def _pin(item: Item, value: float | None) -> Item:
    return item if value is None else replace(item, pinned=value)


@dataclass(frozen=True, slots=True)
class TargetResult:
    """Target mode's answer: the least total ε meeting every target, as a releasable plan.

    ``plan`` is the allocation that meets each target exactly (the θ found per query), so
    releasing ``plan`` releases what target mode promised; its ``allocation.epsilon`` and
    ``used_epsilon`` are ``total_epsilon``.

    For a secret sample (``sampling`` set) ``total_epsilon`` is on the sample (δ is then the
    sample's δ/q) and :attr:`population_epsilon` is what the plan costs the population, the
    total amplified once.
    """

    total_epsilon: float
    delta: float
    rule: CompositionRule
    binding: str
    cost_shares: dict[str, float]
    predictions: tuple[Prediction, ...]
    plan: Plan
    sampling: Sampling | None = None

    @property
    def population_epsilon(self) -> float:
        """The least ε for the population: ``total_epsilon``, amplified once for a secret sample."""
        if self.sampling is None:
            return self.total_epsilon
        return self.sampling.amplify(self.total_epsilon, self.delta)[0]

    def to_dict(self) -> dict[str, Any]:
        """JSON form; for a secret sample ``total_epsilon`` and ``delta`` are the population's
        and ``secret_sample`` gives the sample's beside them."""
        out: dict[str, Any] = {
            "rule": self.rule.value,
            "total_epsilon": self.population_epsilon,
            "delta": self.plan.delta,
            "binding": self.binding,
            "cost_shares": self.cost_shares,
            "queries": [p.to_dict() for p in self.predictions],
        }
        if self.sampling is not None:
            out["secret_sample"] = secret_sample_dict(self.sampling, self.total_epsilon, self.delta,
                                                      self.total_epsilon, self.population_epsilon,
                                                      self.plan.delta)
        return out


def plan_for_targets(
    queries: Sequence[Query],
    schema: Schema,
    delta: float,
    rule: CompositionRule | str,
    relative_scales: dict[str, float] | None = None,
) -> TargetResult:
    """Target mode: the least total ε meeting every query's ``target`` (95%, its units).

    A query whose id is in ``relative_scales`` reads its target as a fraction of that scale.
    ``delta`` is the owner's (population) δ; for a secret sample the search runs on the
    sample at δ/q and the result's :attr:`TargetResult.population_epsilon` is its cost to
    the population.
    """
    parts = build_items(queries, schema, relative_scales)
    targets: dict[str, Target] = {}
    untargeted = list(dict.fromkeys(p.query.id for p in parts if p.query.target is None))
    if untargeted:
        raise QueryError(
            f"target mode needs a target (the ± error wanted) for every query; {untargeted} "
            f"{'has' if len(untargeted) == 1 else 'have'} none. Type one in the 'target ±' column of the "
            "Queries page (\"target\" in a plan file), or split a set ε instead of meeting targets."
        )
    for p in parts:
        t = p.query.target
        assert t is not None  # every query has one (checked above)
        relative = relative_scales is not None and p.query.id in relative_scales
        targets[p.item.id] = _target_in_item_units(p, schema, float(t), relative, CompositionRule(rule))
    smp = schema.sampling
    base_delta = delta if smp is None else smp.base_delta(delta)
    res = plan_targets([p.item for p in parts], targets, base_delta, rule)
    preds = _predictions(parts, res.items, schema, res.rule)
    pop_eps = res.total_epsilon if smp is None else smp.amplify(res.total_epsilon, base_delta)[0]
    alloc = Allocation(
        res.rule, res.total_epsilon, base_delta, res.total_epsilon,
        float(sum(it.weighted_mse for it in res.items)), Method.TARGETS, res.items,
        plan_warnings(pop_eps, base_delta, schema.public_n),
    )
    the_plan = Plan(alloc, tuple(parts), preds) if smp is None else Plan(
        alloc, tuple(parts), preds, smp, (pop_eps, float(delta)))
    return TargetResult(res.total_epsilon, base_delta, res.rule, res.binding, res.cost_shares, preds,
                        the_plan, smp)


def _target_in_item_units(part: Part, schema: Schema, target: float, relative: bool,
                          rule: CompositionRule) -> Target:
    """The allocator's error bound is Chebyshev-style for some families; use the exact
    prediction instead by converting the target to a required θ directly."""
    want = target * (part.item.error_scale if relative else 1.0)
    lo, hi = 1e-9, 1.0

    def bound(theta: float) -> float:
        share = ItemAllocation(part.item.id, part.item.family, theta, theta, 0.0, 0.0, 0.0, 0.0, _share_spends(part.item, theta))
        return predict(part, share, schema, rule).error_bound_95

    while bound(hi) > want:
        hi *= 2.0
        if hi > 1e9:
            raise QueryError(f"query {part.query.id!r}: the target ±{want:g} cannot be met at any budget.")
    lo, hi = bisect(lambda mid: bound(mid) <= want, lo, hi, iterations=100, geometric=True,
                    done=lambda a, b: b / a - 1 < 1e-12)
    return Target(bound=want, beta=BETA, relative=False, min_theta=hi)


def _share_spends(item: Item, theta: float) -> tuple[Any, ...]:
    from planner.planning.allocation import item_events
    from planner.privacy.accounting import Spend

    return tuple(Spend(e, pure_epsilon(e) if math.isfinite(pure_epsilon(e)) else 1e300, 0.0 if math.isfinite(pure_epsilon(e)) else 1e-300) for e in item_events(item, theta))


def compare(
    queries: Sequence[Query],
    schema: Schema,
    epsilon: float,
    delta: float,
    error_scales: dict[str, float] | None = None,
) -> dict[str, Plan]:
    """The same workload optimised under every applicable rule (issue 4, item 3)."""
    parts = build_items(queries, schema, error_scales)
    items = [p.item for p in parts]
    out: dict[str, Plan] = {}
    eps_b, delta_b = budget_for(schema, epsilon, delta)
    for rule in applicable_rules(items, delta_b):
        alloc = allocate(items, eps_b, delta_b, rule, schema.public_n)
        out[rule.value] = _sampled(alloc, parts, schema, epsilon, delta)
    return out


def compare_curve(
    queries: Sequence[Query],
    schema: Schema,
    epsilons: Sequence[float],
    delta: float,
    error_scales: dict[str, float] | None = None,
) -> dict[str, list[float]]:
    """Total weighted error (the planner's objective) of the optimal split at each total ε, per rule.

    The ε's are the owner's (population) budgets: for a secret sample each is mapped to its
    base budget (:func:`budget_for`) before the split."""
    parts = build_items(queries, schema, error_scales)
    items = [p.item for p in parts]
    out: dict[str, list[float]] = {}
    base = [budget_for(schema, float(e), delta) for e in epsilons]
    delta_b = base[0][1] if base else delta
    xs = np.asarray([e for e, _ in base], dtype=float)
    for rule in applicable_rules(items, delta_b):
        out[rule.value] = [float(x) for x in error_curve(items, xs, delta_b, rule)]
    return out


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One point of a query's accuracy curve: a mechanism (or a comparison) at one ε."""

    mechanism: str
    epsilon: float
    rmse: float
    error_bound_95: float
    unit: str
    released: bool = True  # False for a comparison the release never draws (randomized response)


def accuracy_curves(query: Query, schema: Schema, delta: float,
                    epsilons: Sequence[float]) -> tuple[list[CurvePoint], list[str]]:
    """RMSE and 95% bound of one query alone (the whole ε, basic composition), for every
    mechanism its statistic offers, at each ε; plus the statistic's comparison curves
    (e.g. randomized response for a proportion) and its notes. Data-independent.

    Returns the points and plain-words notes (a mechanism the planner cannot predict says why).
    """
    stat = statistic(query.kind)
    points: list[CurvePoint] = []
    notes = list(stat.notes(query, schema))
    for mech in stat.mechanism_names:
        q = query.replace(mechanism=mech, target=None)
        try:
            for e in epsilons:
                p = plan([q], schema, float(e), delta, CompositionRule.BASIC)
                for pr in p.predictions:
                    label = mech.value if len(p.predictions) == 1 else f"{mech.value} ({pr.part})"
                    points.append(CurvePoint(label, float(e), pr.rmse, pr.error_bound_95, pr.unit))
        except PlannerError as exc:
            notes.append(f"{mech.value}: {exc}")
    comparison = getattr(stat, "comparison", None)
    if callable(comparison):
        try:
            rmse, bound = comparison(query, schema, np.asarray(epsilons, dtype=np.float64))
        except PlannerError as exc:
            notes.append(f"comparison: {exc}")
        else:
            unit = stat.unit(query, schema)
            points += [CurvePoint("randomized response (local model, not released)", float(e), float(r), float(b),
                                  unit, released=False) for e, r, b in zip(epsilons, rmse, bound, strict=True)]
    return points, notes
