"""Plan and mechanism specifications as JSON files: the ``planner plan`` and
``planner compose`` commands.

PLAN.json::

    {"schema": {...} | "path/to/schema.json",
     "budget": {"epsilon": 1.0, "delta": 1e-6, "composition": "basic|advanced|rdp|zcdp"},
     "mode": "weighted" | "target",                      (default: weighted)
     "queries": [{"id": "n", "kind": "count", "mechanism": "discrete_laplace",
                  "weight": 1, "target": 50, "scale": 50000, "pinned": 0.1}, ...]}

``scale`` (optional) measures the query's error relative to a public scale; ``pinned``
(optional) fixes the query's share (ε for pure mechanisms, ρ for Gaussian ones).

MECHS.json::

    {"delta": 1e-6, "mechanisms": [
        {"mechanism": "laplace", "epsilon": 0.1, "count": 100},
        {"mechanism": "gaussian", "sigma": 2.0, "sensitivity": 1.0, "count": 10},
        {"mechanism": "randomized_response", "epsilon": 1.0986},
        {"mechanism": "exponential", "epsilon": 0.5},
        {"mechanism": "zcdp", "rho": 0.01}]}
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.accounting import CompositionRule, Spend, compare_rules
from planner.budget import check_delta, check_epsilon
from planner.errors import PlanError, PlannerError
from planner.events import (
    ApproxEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    ZCDPEvent,
)
from planner.queries import Query, queries_from_list
from planner.schema import Schema

_EXTRA_KEYS = ("scale", "pinned")


@dataclass(frozen=True, slots=True)
class PlanSpec:
    """A parsed PLAN.json."""

    schema: Schema
    epsilon: float
    delta: float
    rule: CompositionRule
    mode: str
    queries: tuple[Query, ...]
    error_scales: dict[str, float]
    pinned: dict[str, float]
    dataset_name: str | None


def _read_json(path: str | Path, what: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(f"cannot read the {what} file {str(path)!r}: {exc.strerror}. Check the path.") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"the {what} file {str(path)!r} is not valid JSON (line {exc.lineno}): {exc.msg}.") from exc


def parse_plan_spec(data: Any, base_dir: Path | None = None) -> PlanSpec:
    """Validate a PLAN.json document (already parsed) into a :class:`PlanSpec`."""
    if not isinstance(data, dict):
        raise PlanError("a plan spec must be a JSON object with 'schema', 'budget' and 'queries'.")
    for key in ("schema", "budget", "queries"):
        if key not in data:
            raise PlanError(f"the plan spec is missing {key!r}; see `planner plan --help` and the README.")
    raw_schema = data["schema"]
    if isinstance(raw_schema, str):
        path = Path(raw_schema)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        schema = Schema.load(path)
    else:
        schema = Schema.from_dict(raw_schema)
    budget = data["budget"]
    if not isinstance(budget, dict):
        raise PlanError("'budget' must be an object such as {\"epsilon\": 1, \"delta\": 1e-6, \"composition\": \"rdp\"}.")
    epsilon = check_epsilon(budget.get("epsilon", math.nan))
    delta = check_delta(budget.get("delta", 0.0))
    try:
        rule = CompositionRule(budget.get("composition", "basic"))
    except ValueError as exc:
        raise PlanError(
            f"budget.composition must be one of basic, advanced, rdp, zcdp; got {budget.get('composition')!r}."
        ) from exc
    mode = data.get("mode", "weighted")
    if mode not in ("weighted", "target"):
        raise PlanError(f"'mode' must be 'weighted' or 'target'; got {mode!r}.")
    raw_queries = data["queries"]
    if not isinstance(raw_queries, list) or not raw_queries:
        raise PlanError("'queries' must be a non-empty list.")
    scales: dict[str, float] = {}
    pinned: dict[str, float] = {}
    cleaned = []
    for i, q in enumerate(raw_queries):
        if not isinstance(q, dict):
            raise PlanError(f"queries[{i}] must be an object.")
        q = dict(q)
        qid = str(q.get("id", f"#{i}"))
        for key, store in (("scale", scales), ("pinned", pinned)):
            if key in q:
                value = q.pop(key)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
                    raise PlanError(f"query {qid!r}: {key!r} must be a positive number; got {value!r}.")
                store[qid] = float(value)
        cleaned.append(q)
    queries = queries_from_list(cleaned, schema)
    name = data.get("dataset_name")
    return PlanSpec(schema, epsilon, delta, rule, mode, queries, scales, pinned, str(name) if name else None)


def load_plan_spec(path: str | Path) -> PlanSpec:
    """Read and validate PLAN.json (a schema given as a path is relative to the spec's folder)."""
    return parse_plan_spec(_read_json(path, "plan"), Path(path).parent)


def plan_command(path: str | Path) -> dict[str, Any]:
    """``planner plan --spec PLAN.json``: the allocation, and the same workload under every rule."""
    # imported here: reading a spec (``planner release``'s first step) needs no optimiser
    from planner.workload import compare, plan, plan_for_targets

    spec = load_plan_spec(path)
    if spec.mode == "target":
        res = plan_for_targets(spec.queries, spec.schema, spec.delta, spec.rule, spec.error_scales or None)
        others: dict[str, float | str] = {}
        for rule in CompositionRule:
            if rule is spec.rule:
                continue
            try:
                others[rule.value] = plan_for_targets(spec.queries, spec.schema, spec.delta, rule, spec.error_scales or None).total_epsilon
            except PlannerError as exc:
                others[rule.value] = str(exc)
        return {"mode": "target", **res.to_dict(), "total_epsilon_under_other_rules": others}
    main = plan(spec.queries, spec.schema, spec.epsilon, spec.delta, spec.rule, spec.error_scales or None, spec.pinned or None)
    out: dict[str, Any] = {"mode": "weighted", **main.to_dict()}
    comparison = compare(spec.queries, spec.schema, spec.epsilon, spec.delta, spec.error_scales or None)
    out["comparison"] = {
        rule: {
            "used_epsilon": p.allocation.used_epsilon,
            "objective": p.allocation.objective,
            "rmse": {pr.id: pr.rmse for pr in p.predictions},
        }
        for rule, p in comparison.items()
    }
    return out


def _mechanism_events(entry: Any, i: int) -> tuple[PrivacyEvent, int]:
    if not isinstance(entry, dict) or "mechanism" not in entry:
        raise PlanError(f"mechanisms[{i}] must be an object with a 'mechanism' name.")
    kind = entry["mechanism"]
    count = entry.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise PlanError(f"mechanisms[{i}].count must be a whole number ≥ 1; got {count!r}.")
    try:
        if kind == "laplace":
            if "scale" in entry:
                return LaplaceEvent(float(entry["scale"]) / float(entry.get("sensitivity", 1.0))), count
            return LaplaceEvent(1.0 / check_epsilon(entry["epsilon"])), count
        if kind == "gaussian":
            return GaussianEvent(float(entry["sigma"]) / float(entry.get("sensitivity", 1.0))), count
        if kind == "discrete_gaussian":
            return GaussianEvent(float(entry["sigma"]) / float(entry.get("sensitivity", 1.0)), discrete=True), count
        if kind in ("pure", "discrete_laplace"):
            return PureEvent(float(entry["epsilon"])), count
        if kind == "exponential":
            return ExponentialEvent(float(entry["epsilon"])), count
        if kind == "randomized_response":
            if "keep_probability" in entry:
                return RandomizedResponseEvent(float(entry["keep_probability"])), count
            e = check_epsilon(entry["epsilon"])
            return RandomizedResponseEvent(math.exp(e) / (1 + math.exp(e))), count
        if kind == "zcdp":
            return ZCDPEvent(float(entry["rho"])), count
        if kind == "approx":
            return ApproxEvent(float(entry["epsilon"]), float(entry["delta"])), count
    except KeyError as exc:
        raise PlanError(f"mechanisms[{i}] ({kind}) is missing {exc.args[0]!r}.") from exc
    except (TypeError, ValueError) as exc:
        if isinstance(exc, PlannerError):
            raise
        raise PlanError(f"mechanisms[{i}] ({kind}) has a non-numeric parameter.") from exc
    raise PlanError(
        f"mechanisms[{i}]: unknown mechanism {kind!r}; use laplace, gaussian, discrete_gaussian, "
        "discrete_laplace, pure, exponential, randomized_response, zcdp or approx."
    )


def compose_command(path: str | Path) -> dict[str, Any]:
    """``planner compose --spec MECHS.json``: total (ε, δ) under basic, advanced, RDP, zCDP.

    Mechanisms without a pure ε (Gaussian, zCDP) need a share of δ under basic and
    advanced composition: under basic each of the k such invocations gets δ/k; under
    advanced they share δ/2 and the other half is the slack δ'. RDP and zCDP convert the
    composed curve at the total δ.
    """
    data = _read_json(path, "mechanisms")
    if not isinstance(data, dict) or not isinstance(data.get("mechanisms"), list) or not data["mechanisms"]:
        raise PlanError('the spec must be {"delta": ..., "mechanisms": [ ... ]} with at least one mechanism.')
    delta = check_delta(data.get("delta", 0.0))
    events: list[PrivacyEvent] = []
    for i, entry in enumerate(data["mechanisms"]):
        ev, count = _mechanism_events(entry, i)
        events.extend([ev] * count)
    approx = [e for e in events if not math.isfinite(e.pure_epsilon)]
    results: dict[str, Any] = {}
    for rule in CompositionRule:
        if approx and delta == 0.0:
            results[rule.value] = {"epsilon": math.inf, "delta": 0.0, "note": "mechanisms without a pure ε need δ > 0"}
            continue
        share = delta if rule is CompositionRule.BASIC else delta / 2
        d_i = share / len(approx) * (1 - 1e-12) if approx else 0.0
        spends = []
        for e in events:
            if math.isfinite(e.pure_epsilon):
                spends.append(Spend(e, e.pure_epsilon, 0.0))
            elif rule in (CompositionRule.BASIC, CompositionRule.ADVANCED):
                spends.append(Spend(e, max(e.approx_epsilon(d_i), 1e-300), d_i))
            else:
                spends.append(Spend(e, 1e300, delta))
        try:
            eps = compare_rules(spends, delta)[rule]
        except PlannerError as exc:
            results[rule.value] = {"epsilon": None, "delta": delta, "note": str(exc)}
            continue
        results[rule.value] = {"epsilon": eps, "delta": delta}
    # Basic composition is always a valid account too: never report advanced above it.
    basic, adv = results.get("basic", {}).get("epsilon"), results.get("advanced", {}).get("epsilon")
    if isinstance(basic, float) and isinstance(adv, float) and basic < adv:
        results["advanced"] = {"epsilon": basic, "delta": delta, "note": "basic composition is tighter here"}
    return {"mechanisms": len(events), "delta": delta, "total": results}
