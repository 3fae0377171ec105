"""From queries to a plan: what the planner optimises and what it predicts, per query.

:func:`build_items` turns each :class:`~planner.queries.Query` (with its mechanism and the
schema's sensitivities) into allocation :class:`~planner.allocation.Item` s; :func:`plan`
allocates a total budget and returns, per query, its share of the budget, the noise scale
and the predicted RMSE and 95% error bound in the query's own units. Everything here is
data-independent (MATH.md §7): it reads the schema, the queries, ε and δ, and the
declared public row count — never the data.

Error models (per query, as a function of its share θ):

* count / sum / histogram bin / mean with public n: the additive noise itself
  (:mod:`planner.mechanisms.laplace`, :mod:`planner.mechanisms.gaussian`).
* mean as noisy sum / noisy count: delta method, error ≈ (N_sum − m·N_count)/n with
  m = max(|L|, |U|) the worst-case mean and n the declared row count; the budget is split
  between the two parts optimally (:func:`planner.allocation._mean_split`).
* quantile / median (exponential mechanism or ISM, rank utility): rank error as a fraction
  of n, RMSE under the uniform-spacing model of
  :func:`planner.mechanisms.exponential.quantile_rank_rmse`, bound
  :func:`~planner.mechanisms.exponential.quantile_rank_error_bound`.
* mode: the utility gap in rows, (2Δu/ε)(ln|T| + s) at confidence 1 − e^{−s}
  (:func:`~planner.mechanisms.exponential.utility_gap`); its "RMSE" is the s = 1 value,
  an upper bound on the expected gap.
* proportion by randomized response: the worst-case (π = ½) standard error
  1/(2√n·tanh(ε/2)) (MATH.md §3).
* synthetic sample (perturbed histogram): the per-bin Laplace noise on the counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize

from planner.accounting import CompositionRule, pure_epsilon
from planner.allocation import (
    Allocation,
    Family,
    Item,
    ItemAllocation,
    Target,
    allocate,
    applicable_rules,
    error_curve,
    plan_targets,
    plan_warnings,
)
from planner.errors import QueryError
from planner.mechanisms import exponential as em
from planner.mechanisms import randomized_response as rr
from planner.mechanisms.base import MechanismName
from planner.mechanisms.registry import additive
from planner.queries import MeanMode, Query, QueryKind
from planner.schema import Schema

M = MechanismName
_BETA = 0.05
# Released Gaussian noise is OpenDP's, which certifies ρ-zCDP (it samples a discrete
# Gaussian on a fine grid); its (ε, δ) is therefore taken from the zCDP conversion, as
# OpenDP's make_zCDP_to_approxDP does, not from the analytic Gaussian of an idealised
# continuous sampler. Both Gaussian mechanisms plan as the DISCRETE_GAUSSIAN family.
_ADDITIVE_FAMILY = {
    M.LAPLACE: Family.LAPLACE,
    M.DISCRETE_LAPLACE: Family.DISCRETE_LAPLACE,
    M.GAUSSIAN: Family.DISCRETE_GAUSSIAN,
    M.DISCRETE_GAUSSIAN: Family.DISCRETE_GAUSSIAN,
}


def _need_n(query: Query, schema: Schema) -> int:
    if schema.public_n is None:
        raise QueryError(
            f"query {query.id!r}: predicting a {query.kind.value}'s error needs the public row count; "
            "declare 'public_n' (an approximate, public number of rows) in the schema."
        )
    return schema.public_n


def _unit(query: Query, schema: Schema) -> str:
    k = query.kind
    if k in (QueryKind.COUNT,):
        return "rows"
    if k in (QueryKind.HISTOGRAM, QueryKind.SYNTHETIC_SAMPLE):
        return "rows per bin"
    if k in (QueryKind.QUANTILE, QueryKind.MEDIAN):
        return "rank, fraction of n"
    if k is QueryKind.MODE:
        return "rows (utility gap)"
    if k is QueryKind.PROPORTION:
        return "proportion"
    return f"{query.column} units"


def default_error_scales(queries: Sequence[Query], schema: Schema) -> dict[str, float] | None:
    """A public magnitude per query, so relative errors can share one budget fairly.

    Data-independent (MATH.md §7): from the declared bounds and the public row count n
    only. count → n; sum → n·(|L|+|U|)/2; mean → (|L|+|U|)/2; histogram, mode and
    synthetic sample → n per bin. Quantiles (already a fraction of n) and proportions
    (in [0, 1]) keep scale 1. ``None`` when n is not declared.
    """
    n = schema.public_n
    if n is None:
        return None
    out: dict[str, float] = {}
    for q in queries:
        k = q.kind
        if k is QueryKind.COUNT:
            out[q.id] = float(n)
        elif k in (QueryKind.SUM, QueryKind.MEAN):
            lo, hi = schema.column(q.column or "").bounds
            mid = (abs(lo) + abs(hi)) / 2 or 1.0
            out[q.id] = mid * (n if k is QueryKind.SUM else 1.0)
        elif k in (QueryKind.HISTOGRAM, QueryKind.MODE, QueryKind.SYNTHETIC_SAMPLE):
            out[q.id] = float(n) / max(len(q.labels(schema)), 1)
    return out


@dataclass(frozen=True, slots=True)
class Part:
    """One allocation item of a query (a quantile query has one per level)."""

    query: Query
    item: Item
    label: str


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
        s = float(scales.get(q.id, 1.0))
        qparts = q.parts(schema)
        mech = q.mechanism
        kind = q.kind
        if kind is QueryKind.MEAN and q.mode is not MeanMode.PUBLIC_N:
            n = _need_n(q, schema)
            a = qparts[0].sensitivity.l1
            col = schema.column(q.column or "")
            m = max(abs(col.bounds[0]), abs(col.bounds[1]))
            b = m * qparts[1].sensitivity.l1
            if mech is M.LAPLACE:
                coef = 2.0 * (a ** (2 / 3) + b ** (2 / 3)) ** 3 / n**2
                item = Item(q.id, Family.MEAN_LAPLACE, coef, sensitivity=a, weight=w, error_scale=s, part_b=b)
            else:
                a2 = qparts[0].sensitivity.l2
                b2 = m * qparts[1].sensitivity.l2
                item = Item(q.id, Family.DISCRETE_GAUSSIAN, (a2 + b2) ** 2 / (2.0 * n**2), weight=w, error_scale=s)
            parts.append(Part(q, item, q.id))
            continue
        if kind in (QueryKind.QUANTILE, QueryKind.MEDIAN):
            n = _need_n(q, schema)
            for p in qparts:
                pid = q.id if len(qparts) == 1 else f"{q.id}:{p.name}"
                # Laplace limit of the rank error, 2√2/ε ranks (exponential.quantile_rank_rmse)
                coef = 8.0 * p.sensitivity.l1**2 / n**2
                parts.append(Part(q, Item(pid, Family.EXPONENTIAL, coef, weight=w, error_scale=s), p.name))
            continue
        p = qparts[0]
        if kind is QueryKind.MODE:
            k = p.size
            coef = (2.0 * p.sensitivity.l1 * (math.log(k) + 1.0)) ** 2
            fam = Family.EXPONENTIAL if mech is not M.INVERSE_SENSITIVITY else Family.PURE
            parts.append(Part(q, Item(q.id, fam, coef, weight=w, error_scale=s), p.name))
            continue
        if kind is QueryKind.PROPORTION:
            n = _need_n(q, schema)
            if mech is M.RANDOMIZED_RESPONSE:
                raise QueryError(f"query {q.id!r}: randomized response is not released (temporary).")
            if mech is M.LAPLACE:
                item = Item(q.id, Family.LAPLACE, 2.0 * p.sensitivity.l1**2 / n**2, weight=w, error_scale=s)
            else:
                item = Item(q.id, Family.DISCRETE_LAPLACE, 1.0 / n**2, sensitivity=p.sensitivity.l1, weight=w, error_scale=s)
            parts.append(Part(q, item, p.name))
            continue
        if kind is QueryKind.SYNTHETIC_SAMPLE:
            if mech is not M.PERTURBED_HISTOGRAM:
                raise QueryError(
                    f"query {q.id!r}: the planner predicts the perturbed histogram's error only; "
                    "use mechanism 'perturbed_histogram' (the smoothed histogram is shown on the Learn pages)."
                )
            parts.append(Part(q, Item(q.id, Family.LAPLACE, 2.0 * p.sensitivity.l1**2, weight=w, error_scale=s), p.name))
            continue
        # count, sum, histogram, mean with public n: additive noise on one number per bin
        add_fam = _ADDITIVE_FAMILY.get(mech)
        if add_fam is None:
            raise QueryError(f"query {q.id!r}: mechanism {mech.value!r} is not additive noise.")
        fam = add_fam
        if fam is Family.LAPLACE:
            item = Item(q.id, fam, 2.0 * p.sensitivity.l1**2, weight=w, error_scale=s)
        elif fam is Family.DISCRETE_LAPLACE:
            item = Item(q.id, fam, 1.0, sensitivity=p.sensitivity.l1, weight=w, error_scale=s)
        else:
            item = Item(q.id, fam, p.sensitivity.l2**2 / 2.0, weight=w, error_scale=s)
        parts.append(Part(q, item, p.name))
    return parts


@dataclass(frozen=True, slots=True)
class Prediction:
    """Data-independent accuracy of one allocation item at its share."""

    id: str
    query_id: str
    kind: str
    mechanism: str
    part: str
    epsilon: float
    delta: float
    rho: float
    noise: dict[str, float]
    rmse: float
    error_bound_95: float
    unit: str
    theta: float = math.nan
    currency: str = "epsilon"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "query": self.query_id,
            "kind": self.kind,
            "mechanism": self.mechanism,
            "part": self.part,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "noise": self.noise,
            "rmse": self.rmse,
            "error_bound_95": self.error_bound_95,
            "unit": self.unit,
            "optimised": {"currency": self.currency, "value": self.theta},
        }


def _laplace_difference_bound(b1: float, b2: float, beta: float) -> float:
    """t with P(|X₁ + X₂| > t) = β for independent Laplace(b₁), Laplace(b₂).

    P(|X₁+X₂| > t) = (b₁²e^{−t/b₁} − b₂²e^{−t/b₂})/(b₁² − b₂²) for b₁ ≠ b₂ (the
    convolution of two Laplace densities), and (1 + t/(2b))e^{−t/b} when equal.
    """
    if b2 <= 0:
        return b1 * math.log(1.0 / beta)
    if abs(b1 - b2) <= 1e-9 * max(b1, b2):
        b = (b1 + b2) / 2

        def tail(t: float) -> float:
            return (1 + t / (2 * b)) * math.exp(-t / b) - beta

    else:

        def tail(t: float) -> float:
            return (b1**2 * math.exp(-t / b1) - b2**2 * math.exp(-t / b2)) / (b1**2 - b2**2) - beta

    hi = (b1 + b2) * math.log(2.0 / beta) + 1.0
    return float(optimize.brentq(tail, 0.0, hi, xtol=1e-12 * hi))


def predict(part: Part, share: ItemAllocation, schema: Schema) -> Prediction:
    """RMSE and 95% error bound of one item at its allocated share (data-independent)."""
    q, item = part.query, part.item
    theta = share.theta
    qparts = q.parts(schema)
    noise: dict[str, float]
    mech = q.mechanism
    if q.kind is QueryKind.MEAN and q.mode is not MeanMode.PUBLIC_N:
        n = _need_n(q, schema)
        col = schema.column(q.column or "")
        m = max(abs(col.bounds[0]), abs(col.bounds[1]))
        if item.family is Family.MEAN_LAPLACE:
            eps_s = pure_epsilon(share.spends[0].event)
            eps_c = pure_epsilon(share.spends[1].event) if len(share.spends) > 1 else math.inf
            b_s = qparts[0].sensitivity.l1 / eps_s
            b_c = qparts[1].sensitivity.l1 / eps_c
            noise = {"sum_laplace_scale": b_s, "count_laplace_scale": b_c}
            rmse = math.sqrt(2 * b_s**2 + 2 * (m * b_c) ** 2) / n
            bound = _laplace_difference_bound(b_s, m * b_c, _BETA) / n
        else:
            a2, b2 = qparts[0].sensitivity.l2, m * qparts[1].sensitivity.l2
            rho_s, rho_c = theta * a2 / (a2 + b2), theta * b2 / (a2 + b2)
            sig_s = qparts[0].sensitivity.l2 / math.sqrt(2 * rho_s)
            sig_c = qparts[1].sensitivity.l2 / math.sqrt(2 * rho_c)
            noise = {"sum_sigma": sig_s, "count_sigma": sig_c, "rho_sum": rho_s, "rho_count": rho_c}
            rmse = math.sqrt(sig_s**2 + (m * sig_c) ** 2) / n
            bound = 1.959963984540054 * rmse
    elif q.kind in (QueryKind.QUANTILE, QueryKind.MEDIAN):
        n = _need_n(q, schema)
        k = len(q.candidate_grid(schema))
        alpha = float(part.label.split("@")[1]) if "@" in part.label else 0.5
        noise = {"epsilon": theta, "candidates": float(k)}
        rmse = float(em.quantile_rank_rmse(theta, k, n, alpha)) / n
        bound = float(em.quantile_rank_error_bound(theta, k, _BETA)) / n
    elif q.kind is QueryKind.MODE:
        p = qparts[0]
        noise = {"epsilon": theta, "temperature": 2 * p.sensitivity.l1 / theta}
        rmse = float(em.utility_gap(theta, p.size, 1.0, p.sensitivity.l1))
        bound = float(em.utility_gap(theta, p.size, math.log(1 / _BETA), p.sensitivity.l1))
    elif q.kind is QueryKind.PROPORTION and mech is M.RANDOMIZED_RESPONSE:
        n = _need_n(q, schema)
        noise = {"keep_probability": float(rr.keep_probability(theta))}
        rmse = float(rr.worst_case_rmse(theta, n))
        bound = float(rr.worst_case_error_bound(theta, n, _BETA))
    else:
        p = qparts[0]
        name = M.LAPLACE if q.kind is QueryKind.SYNTHETIC_SAMPLE else mech
        mech_obj = additive(name)
        if mech_obj.pure:
            scale = p.sensitivity.l1 / theta
            noise = {"laplace_scale": scale}
        else:
            scale = p.sensitivity.l2 / math.sqrt(2 * theta)
            noise = {"sigma": scale}
        div = float(_need_n(q, schema)) if q.kind is QueryKind.PROPORTION else 1.0
        rmse = float(mech_obj.rmse(scale)) / div
        bound = float(mech_obj.error_bound(scale, _BETA)) / div
    return Prediction(
        id=item.id,
        query_id=q.id,
        kind=q.kind.value,
        mechanism=mech.value,
        part=part.label,
        epsilon=share.epsilon,
        delta=share.delta,
        rho=share.rho,
        noise=noise,
        rmse=rmse,
        error_bound_95=bound,
        unit=_unit(q, schema),
        theta=theta,
        currency="rho" if item.is_gaussian else "epsilon",
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """A workload's allocation under one rule, with per-item predictions."""

    allocation: Allocation
    parts: tuple[Part, ...]
    predictions: tuple[Prediction, ...]

    def to_dict(self) -> dict[str, Any]:
        a = self.allocation
        return {
            "rule": a.rule.value,
            "epsilon": a.epsilon,
            "delta": a.delta,
            "used_epsilon": a.used_epsilon,
            "objective": a.objective,
            "method": a.method,
            "warnings": list(a.warnings),
            "queries": [p.to_dict() for p in self.predictions],
        }


def _predictions(parts: Sequence[Part], alloc: Allocation | Sequence[ItemAllocation], schema: Schema) -> tuple[Prediction, ...]:
    shares = alloc.items if isinstance(alloc, Allocation) else tuple(alloc)
    return tuple(predict(p, s, schema) for p, s in zip(parts, shares, strict=True))


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
    alloc = allocate(items, epsilon, delta, rule, schema.public_n)
    return Plan(alloc, tuple(parts), _predictions(parts, alloc, schema))


def _pin(item: Item, value: float | None) -> Item:
    if value is None:
        return item
    return Item(item.id, item.family, item.coef, item.sensitivity, item.weight, item.error_scale, item.part_b, value)


@dataclass(frozen=True, slots=True)
class TargetResult:
    """Target mode's answer: the least total ε meeting every target, as a releasable plan.

    ``plan`` is the allocation that meets each target exactly (the θ found per query), so
    releasing ``plan`` releases what target mode promised; its ``allocation.epsilon`` and
    ``used_epsilon`` are ``total_epsilon``.
    """

    total_epsilon: float
    delta: float
    rule: CompositionRule
    binding: str
    cost_shares: dict[str, float]
    predictions: tuple[Prediction, ...]
    plan: Plan

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.value,
            "total_epsilon": self.total_epsilon,
            "delta": self.delta,
            "binding": self.binding,
            "cost_shares": self.cost_shares,
            "queries": [p.to_dict() for p in self.predictions],
        }


def plan_for_targets(
    queries: Sequence[Query],
    schema: Schema,
    delta: float,
    rule: CompositionRule | str,
    relative_scales: dict[str, float] | None = None,
) -> TargetResult:
    """Target mode: the least total ε meeting every query's ``target`` (95%, its units).

    A query whose id is in ``relative_scales`` reads its target as a fraction of that scale.
    """
    parts = build_items(queries, schema, relative_scales)
    targets: dict[str, Target] = {}
    for p in parts:
        t = p.query.target
        if t is None:
            raise QueryError(f"query {p.query.id!r}: target mode needs a 'target' for every query.")
        relative = relative_scales is not None and p.query.id in relative_scales
        targets[p.item.id] = _target_in_item_units(p, schema, float(t), relative)
    res = plan_targets([p.item for p in parts], targets, delta, rule)
    preds = _predictions(parts, res.items, schema)
    alloc = Allocation(
        res.rule, res.total_epsilon, delta, res.total_epsilon,
        float(sum(it.weighted_mse for it in res.items)), "targets", res.items,
        plan_warnings(res.total_epsilon, delta, schema.public_n),
    )
    return TargetResult(res.total_epsilon, delta, res.rule, res.binding, res.cost_shares, preds,
                        Plan(alloc, tuple(parts), preds))


def _target_in_item_units(part: Part, schema: Schema, target: float, relative: bool) -> Target:
    """The allocator's error bound is Chebyshev-style for some families; use the exact
    prediction instead by converting the target to a required θ directly."""
    want = target * (part.item.error_scale if relative else 1.0)
    lo, hi = 1e-9, 1.0

    def bound(theta: float) -> float:
        share = ItemAllocation(part.item.id, part.item.family, theta, theta, 0.0, 0.0, 0.0, 0.0, _share_spends(part.item, theta))
        return predict(part, share, schema).error_bound_95

    while bound(hi) > want:
        hi *= 2.0
        if hi > 1e9:
            raise QueryError(f"query {part.query.id!r}: the target ±{want:g} cannot be met at any budget.")
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if bound(mid) <= want:
            hi = mid
        else:
            lo = mid
        if hi / lo - 1 < 1e-12:
            break
    return Target(bound=want, beta=_BETA, relative=False, min_theta=hi)


def _share_spends(item: Item, theta: float) -> tuple[Any, ...]:
    from planner.accounting import Spend
    from planner.allocation import item_events

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
    for rule in applicable_rules(items, delta):
        alloc = allocate(items, epsilon, delta, rule, schema.public_n)
        out[rule.value] = Plan(alloc, tuple(parts), _predictions(parts, alloc, schema))
    return out


def compare_curve(
    queries: Sequence[Query],
    schema: Schema,
    epsilons: Sequence[float],
    delta: float,
    error_scales: dict[str, float] | None = None,
) -> dict[str, list[float]]:
    """Total weighted error (the planner's objective) of the optimal split at each total ε, per rule."""
    parts = build_items(queries, schema, error_scales)
    items = [p.item for p in parts]
    out: dict[str, list[float]] = {}
    for rule in applicable_rules(items, delta):
        out[rule.value] = [float(x) for x in error_curve(items, np.asarray(epsilons, dtype=float), delta, rule)]
    return out
