"""Plan and mechanism specifications as JSON files: the ``planner plan`` and
``planner compose`` commands.

PLAN.json::

    {"schema": {...} | "path/to/schema.json",
     "budget": {"epsilon": 1.0, "delta": 1e-6, "composition": "basic|advanced|rdp|zcdp"},
     "mode": "weighted" | "target" | "equal" | "manual",   (default: weighted)
     "lifetime": {"epsilon": 3.0, "delta": 1e-5},        (optional: the dataset's lifetime budget)
     "dataset_name": "census",                           (optional)
     "queries": [{"id": "n", "kind": "count", "mechanism": "discrete_laplace",
                  "weight": 1, "target": 50, "scale": 50000, "pinned": 0.1},
                 {"id": "q", "kind": "quantile", "column": "age", "mechanism": "exponential",
                  "alphas": [0.1, 0.9], "pinned": {"quantile@0.1": 0.05, "quantile@0.9": 0.05}},
                 ...]}

``budget`` is what this plan spends (in target mode, only its δ and rule are read: the
planner finds the least ε). ``lifetime`` is read by ``planner release`` only: the dataset's
whole budget, set once (under ``budget.composition``) and then spent by release after
release; a release on a dataset without one is refused. A query's own options (``alphas``,
``bin_edges``, ``predicate``, ``by``…) are those its statistic declares
(:mod:`planner.planning.statistics`). ``scale`` (optional) measures the query's error relative to a
public scale (in target mode its target is then a fraction of that scale); ``pinned`` fixes
the query's share (ε for pure mechanisms, ρ for Gaussian ones): a number, or for a query
released in several parts (quantile levels) an object ``{part: share}``.

The modes (:class:`planner.planning.workload.SplitMode`):

* ``weighted`` — the optimal split of ``budget.epsilon`` for the weights (pinned shares
  are held and the rest is optimised around them);
* ``target`` — the least ε meeting every query's ``target``;
* ``equal`` — every query part gets the same ε, the most that fits ``budget.epsilon``;
* ``manual`` — every share is given as ``pinned``; refused when they cost more than
  ``budget.epsilon`` under the rule.

:func:`build_plan` makes the plan of a :class:`PlanSpec` in every mode (the app, the
command line and the generated scripts all call it); :func:`spec_document` writes a
PLAN.json that this parser reads back to the same plan.

MECHS.json::

    {"delta": 1e-6, "mechanisms": [
        {"mechanism": "laplace", "epsilon": 0.1, "count": 100},
        {"mechanism": "gaussian", "sigma": 2.0, "sensitivity": 1.0, "count": 10},
        {"mechanism": "randomized_response", "epsilon": 1.0986},
        {"mechanism": "exponential", "epsilon": 0.5},
        {"mechanism": "zcdp", "rho": 0.01},
        {"mechanism": "gaussian", "sigma": 1.1, "sampling_rate": 0.004, "count": 14063}]}

``sampling_rate`` (any mechanism, optional) runs each invocation on its own fresh random
sample of the data at that rate: Poisson sampling under add/remove neighbours, or with
``"sampling": "without_replacement"`` fixed-size samples under substitute neighbours (the
mechanism's parameters are then relative to the substitution sensitivity). One composition
uses one sampling scheme.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from planner.core.errors import PlanError, PlannerError
from planner.core.names import check_name
from planner.core.strict_json import (
    MAX_SPEC_BYTES,
    loads_strict,
    read_json_file,
    strict_delta,
    strict_epsilon,
    strict_int,
    strict_number,
    value_class,
)
from planner.data.schema import Schema
from planner.planning.queries import Query, default_ids, queries_from_list
from planner.privacy.budget import CompositionRule, SplitMode
from planner.privacy.events import (
    ApproxEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
    check_noise_multiplier,
)

if TYPE_CHECKING:
    from planner.planning.workload import Plan, TargetResult

# The planning machinery (planner.planning.workload: the allocator, the accountants, NumPy's
# linear algebra; ~0.08 s of imports) is imported where a function needs it, not here:
# ``planner release`` reads its spec with this module and starts the scan before it
# imports the rest (tests/engine/test_lazy_imports.py).

_EXTRA_KEYS = ("scale", "pinned")
#: The fields of PLAN.json (anything else is a typo worth reporting).
PLAN_KEYS: Final = frozenset({"schema", "budget", "mode", "lifetime", "queries", "dataset_name"})
BUDGET_KEYS: Final = frozenset({"epsilon", "delta", "composition"})
LIFETIME_KEYS: Final = frozenset({"epsilon", "delta"})
#: At most this many queries in one plan (each becomes a mechanism invocation).
MAX_QUERIES: Final = 1000
#: At most this many characters in a dataset name.
MAX_NAME_CHARS: Final = 200
#: At most this many invocations in one MECHS.json (the sum of every ``count``).
MAX_INVOCATIONS: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class PlanSpec:
    """A parsed PLAN.json.

    ``pinned`` maps allocation item ids (a query id, or ``"<query>:<part>"`` for a query
    released in parts) to fixed shares: the file's pins in weighted mode, every share in
    manual mode, none in equal and target mode. Reading a file plans nothing: every mode is
    applied by :func:`build_plan`, the one place that makes a spec's plan.
    """

    schema: Schema
    epsilon: float
    delta: float
    rule: CompositionRule
    mode: SplitMode
    queries: tuple[Query, ...]
    error_scales: dict[str, float]
    pinned: dict[str, float]
    dataset_name: str | None
    lifetime: tuple[float, float] | None = None
    #: Per query, the value its other mode uses (the target in a weighted, equal or manual
    #: plan; the weight in a target plan): kept in the file so that switching mode finds it,
    #: never part of the plan (nor of its hash).
    other_mode: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The PLAN.json document of this spec (schema inline); :func:`parse_plan_spec`
        reads it back to an equal spec."""
        return spec_document(self.schema, self.epsilon, self.delta, self.rule, self.mode, self.queries,
                             error_scales=self.error_scales,
                             pinned=self.pinned if self.mode in (SplitMode.WEIGHTED, SplitMode.MANUAL) else None,
                             lifetime=self.lifetime, dataset_name=self.dataset_name, other_mode=self.other_mode)


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    """The plan a spec makes (releasable as is) and, in target mode, how it was found."""

    plan: Plan
    target: TargetResult | None = None


def build_plan(spec: PlanSpec) -> PlanOutcome:
    """The plan of ``spec`` in its mode: what the app shows, ``planner plan`` prints,
    ``planner release`` and the generated scripts release.

    Raises
    ------
    PlannerError
        An invalid workload, an unmet target, a manual split over its budget (naming its
        total), a share naming no query.
    """
    from planner.planning.workload import plan, plan_equal, plan_for_targets, plan_manual

    scales = spec.error_scales or None
    if spec.mode == SplitMode.TARGET:
        res = plan_for_targets(spec.queries, spec.schema, spec.delta, spec.rule, scales)
        return PlanOutcome(res.plan, res)
    if spec.mode == SplitMode.EQUAL:
        return PlanOutcome(plan_equal(spec.queries, spec.schema, spec.epsilon, spec.delta, spec.rule, scales))
    if spec.mode == SplitMode.MANUAL:
        return PlanOutcome(plan_manual(spec.queries, spec.schema, spec.epsilon, spec.delta, spec.rule,
                                       spec.pinned, scales))
    return PlanOutcome(plan(spec.queries, spec.schema, spec.epsilon, spec.delta, spec.rule, scales,
                            spec.pinned or None))


def spec_document(
    schema: Schema,
    epsilon: float,
    delta: float,
    rule: CompositionRule | str,
    mode: SplitMode | str,
    queries: Any,
    *,
    error_scales: dict[str, float] | None = None,
    pinned: dict[str, float] | None = None,
    lifetime: tuple[float, float] | None = None,
    dataset_name: str | None = None,
    other_mode: dict[str, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """A PLAN.json document (schema inline) that :func:`parse_plan_spec` reads back.

    ``queries`` are :class:`~planner.planning.queries.Query` objects (or their JSON form); in target
    mode each keeps its ``target`` and drops its weight, in the other modes the reverse.
    ``pinned`` maps item ids to shares (written per query: a number, or ``{part: share}``
    for a query released in parts). ``other_mode`` maps a query id to the value its other
    mode uses (``{"target": 500}`` in a weighted plan, ``{"weight": 2}`` in a target plan):
    written as the query's ``other_mode`` and read back, never planned. Numbers are written as Python's shortest repr, which
    reads back to the same float, so the file plans exactly what was planned.

    Raises
    ------
    PlanError
        A share names no allocation item of the queries.
    """
    from planner.planning.workload import item_ids

    m = SplitMode(mode)
    qs = [q if isinstance(q, Query) else Query.from_dict(q) for q in queries]
    drop = "weight" if m is SplitMode.TARGET else "target"
    pins = dict(pinned or {})
    by_query: dict[str, dict[str, float]] = {}
    single: dict[str, float] = {}
    if pins:
        for item, qid, part, _ in item_ids(qs, schema):
            if item in pins:
                if item == qid:
                    single[qid] = pins.pop(item)
                else:
                    by_query.setdefault(qid, {})[part] = pins.pop(item)
        if pins:
            raise PlanError(f"shares name unknown queries {sorted(pins)}; use the query ids of the plan.")
    out_queries = []
    for q in qs:
        d = {k: v for k, v in q.to_dict().items() if k != drop}
        if q.id in (error_scales or {}):
            d["scale"] = float((error_scales or {})[q.id])
        if q.id in single:
            d["pinned"] = float(single[q.id])
        elif q.id in by_query:
            d["pinned"] = {k: float(v) for k, v in by_query[q.id].items()}
        kept = {k: float(v) for k, v in (other_mode or {}).get(q.id, {}).items() if k == drop}
        if kept:
            d["other_mode"] = kept
        out_queries.append(d)
    doc: dict[str, Any] = {"schema": schema.to_dict(), "budget": {
        "epsilon": float(epsilon), "delta": float(delta), "composition": CompositionRule(rule).value},
        "mode": m.value}
    if lifetime is not None:
        doc["lifetime"] = {"epsilon": float(lifetime[0]), "delta": float(lifetime[1])}
    if dataset_name:
        doc["dataset_name"] = str(dataset_name)[:MAX_NAME_CHARS]
    doc["queries"] = out_queries
    return doc


def dump_plan_spec(doc: dict[str, Any]) -> str:
    """The text of a PLAN.json document (indented, UTF-8, ending with a newline)."""
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def loads_plan_spec(raw: bytes | str, what: str = "plan file") -> PlanSpec:
    """Parse PLAN.json bytes (an upload) as strictly as a file on disk: size, UTF-8,
    depth, duplicate keys, finite numbers (:mod:`planner.core.strict_json`); a schema given as a
    path is refused (an upload has no folder to read it from)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    if len(raw) > MAX_SPEC_BYTES:
        raise PlanError(f"the {what} has {len(raw)} bytes; at most {MAX_SPEC_BYTES} are accepted.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError(f"the {what} is not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON.") from None
    data = loads_strict(text, what, error=PlanError)
    if isinstance(data, dict) and isinstance(data.get("schema"), str):
        raise PlanError(f"the {what} names its schema by a path; a plan file given here must hold its schema "
                        "inline (download the plan from the app, or paste the schema in).")
    return parse_plan_spec(data)


def _read_json(path: str | Path, what: str) -> Any:
    """Read a spec file strictly (regular file, size, UTF-8, depth, finite numbers):
    :func:`planner.core.strict_json.read_json_file`."""
    return read_json_file(path, what, error=PlanError)


def _unknown_keys(obj: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        shown = ", ".join(repr(k[:40]) for k in unknown[:5])
        raise PlanError(f"{where} has unknown field(s) {shown}; the fields are {', '.join(sorted(allowed))}.")


def _text(value: Any, name: str, *, max_chars: int = MAX_NAME_CHARS) -> str:
    if not isinstance(value, str):
        raise PlanError(f"{name} must be a string; got {value_class(value)}.")
    if len(value) > max_chars:
        raise PlanError(f"{name} has {len(value)} characters; at most {max_chars} are accepted.")
    return value


def _positive(value: Any, name: str) -> float:
    return strict_number(value, name, error=PlanError, minimum=0.0, exclusive_minimum=True,
                         remedy="It must be a positive number.")


def parse_plan_spec(data: Any, base_dir: Path | None = None) -> PlanSpec:
    """Validate a PLAN.json document (already parsed) into a :class:`PlanSpec`."""
    if not isinstance(data, dict):
        raise PlanError("a plan spec must be a JSON object with 'schema', 'budget' and 'queries'.")
    for key in ("schema", "budget", "queries"):
        if key not in data:
            raise PlanError(f"the plan spec is missing {key!r}; see `planner plan --help` and the README.")
    _unknown_keys(data, PLAN_KEYS, "the plan spec")
    schema = _parse_schema(data["schema"], base_dir)
    mode, epsilon, delta, rule = _parse_budget(data)
    cleaned, scales, pinned, other_mode = _parse_queries(data["queries"], mode)
    queries = queries_from_list(cleaned, schema)
    if mode is SplitMode.MANUAL:
        _check_manual_shares(queries, schema, pinned)
    if mode is SplitMode.EQUAL:  # the equal split is made by build_plan; a share has no meaning here
        pinned = {}
    name = data.get("dataset_name")
    if name is not None:
        name = _text(name, "'dataset_name'")
        if name.strip():
            check_name(name, "'dataset_name'", error=PlanError)
    lifetime = _parse_lifetime(data["lifetime"]) if "lifetime" in data else None
    return PlanSpec(schema, epsilon, delta, rule, mode, queries, scales, pinned, str(name) if name else None, lifetime,
                    other_mode)


def _parse_schema(raw_schema: Any, base_dir: Path | None) -> Schema:
    """The plan's ``schema``: inline, or the path of a schema file (relative to ``base_dir``)."""
    if isinstance(raw_schema, str):
        path = Path(_text(raw_schema, "'schema' (a path)", max_chars=4096))
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        # Same limits as the plan itself (regular file, size, depth, finite numbers).
        return Schema.from_dict(_read_json(path, "schema"))
    if isinstance(raw_schema, dict):
        return Schema.from_dict(raw_schema)
    raise PlanError(f"'schema' must be an object or the path of a schema file; got {value_class(raw_schema)}.")


def _parse_budget(data: dict[str, Any]) -> tuple[SplitMode, float, float, CompositionRule]:
    """The plan's ``mode`` and its ``budget``: (mode, ε, δ, rule). ε may be left out in
    target mode only (the planner finds it); it then reads as 1."""
    budget = data["budget"]
    if not isinstance(budget, dict):
        raise PlanError("'budget' must be an object such as {\"epsilon\": 1, \"delta\": 1e-6, \"composition\": \"rdp\"}.")
    _unknown_keys(budget, BUDGET_KEYS, "'budget'")
    mode = data.get("mode", "weighted")
    modes = [m.value for m in SplitMode]
    if not isinstance(mode, str) or mode not in modes:
        raise PlanError(f"'mode' must be one of {', '.join(modes)}; got "
                        f"{value_class(mode) if not isinstance(mode, str) else repr(mode[:40])}.")
    if "epsilon" not in budget and mode != SplitMode.TARGET:
        raise PlanError(f"budget.epsilon is missing: a {mode} plan splits this ε across its queries.")
    epsilon = strict_epsilon(budget.get("epsilon", 1.0), "budget.epsilon", error=PlanError)
    delta = strict_delta(budget.get("delta", 0.0), "budget.delta", error=PlanError)
    composition = _text(budget.get("composition", "basic"), "budget.composition")
    try:
        rule = CompositionRule(composition)
    except ValueError as exc:
        raise PlanError(
            f"budget.composition must be one of {', '.join(r.value for r in CompositionRule)}; got {composition[:40]!r}."
        ) from exc
    return SplitMode(mode), epsilon, delta, rule


def _parse_queries(
    raw_queries: Any, mode: SplitMode
) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, float], dict[str, dict[str, float]]]:
    """The plan's ``queries``: each query's own fields (for
    :func:`~planner.planning.queries.queries_from_list`) with ``scale``, ``pinned`` and
    ``other_mode`` taken out, the scales by query id, the shares by allocation item id and
    the other mode's values by query id."""
    if not isinstance(raw_queries, list) or not raw_queries:
        raise PlanError("'queries' must be a non-empty list.")
    if len(raw_queries) > MAX_QUERIES:
        raise PlanError(f"'queries' has {len(raw_queries)} entries; at most {MAX_QUERIES} are accepted in one plan.")
    scales: dict[str, float] = {}
    pinned: dict[str, float] = {}
    other: dict[str, dict[str, float]] = {}
    cleaned = []
    for i, q in enumerate(default_ids(raw_queries)):  # a query may name only its kind (and options)
        if not isinstance(q, dict):
            raise PlanError(f"queries[{i}] must be an object.")
        q = dict(q)
        raw_id = q.get("id", f"#{i}")
        qid = _text(raw_id, f"queries[{i}].id") if "id" in q else raw_id
        for key in ("weight", "target"):
            if q.get(key) is not None:
                strict_number(q[key], f"query {qid!r}: {key!r}", error=PlanError, minimum=0.0,
                              exclusive_minimum=True)
        if "scale" in q:
            scales[qid] = _positive(q.pop("scale"), f"query {qid!r}: 'scale'")
        if "pinned" in q:
            _parse_pinned(q.pop("pinned"), qid, mode, pinned)
        if "other_mode" in q:
            other[qid] = _parse_other_mode(q.pop("other_mode"), qid, mode)
        cleaned.append(q)
    return cleaned, scales, pinned, other


def _parse_other_mode(raw: Any, qid: str, mode: str) -> dict[str, float]:
    """A query's ``other_mode``: ``{"target": t}`` outside target mode, ``{"weight": w}`` in it."""
    key = "weight" if mode is SplitMode.TARGET else "target"
    if not isinstance(raw, dict) or set(raw) - {key}:
        raise PlanError(f"query {qid!r}: 'other_mode' holds the value the other mode uses; in a {mode} plan "
                        f"that is {{\"{key}\": number}}.")
    return {key: _positive(raw[key], f"query {qid!r}: other_mode {key}")} if key in raw else {}


def _parse_pinned(raw_pin: Any, qid: str, mode: SplitMode, pinned: dict[str, float]) -> None:
    """One query's ``pinned`` (a share, or ``{part: share}``), added to ``pinned`` by item id."""
    if mode is SplitMode.TARGET:
        raise PlanError(f"query {qid!r}: 'pinned' has no effect in target mode (each target fixes its "
                        "query's share); remove it or use another mode.")
    if isinstance(raw_pin, dict):
        if not raw_pin or len(raw_pin) > 1000:
            raise PlanError(f"query {qid!r}: 'pinned' as an object maps each part (e.g. "
                            "\"quantile@0.5\") to its share; give 1 to 1000 parts.")
        for part, value in raw_pin.items():
            pinned[f"{qid}:{_text(part, f'query {qid!r}: a part of pinned')}"] = _positive(
                value, f"query {qid!r}: 'pinned' of part {part[:40]!r}")
    else:
        pinned[qid] = _positive(raw_pin, f"query {qid!r}: 'pinned'")


def _check_manual_shares(queries: tuple[Query, ...], schema: Schema, pinned: dict[str, float]) -> None:
    """A manual plan pins every allocation item."""
    from planner.planning.workload import item_ids

    missing = [item for item, *_ in item_ids(queries, schema) if item not in pinned]
    if missing:
        shown = ", ".join(repr(m[:60]) for m in missing[:5])
        raise PlanError(f"a manual plan gives every query its share as 'pinned'; missing for {shown}"
                        f"{' …' if len(missing) > 5 else ''}.")


def _parse_lifetime(life: Any) -> tuple[float, float]:
    """The plan's ``lifetime``: the dataset's whole (ε, δ)."""
    if not isinstance(life, dict) or "epsilon" not in life:
        raise PlanError(
            "'lifetime' must be an object such as {\"epsilon\": 3, \"delta\": 1e-5}: the "
            "dataset's whole budget, spent release after release."
        )
    _unknown_keys(life, LIFETIME_KEYS, "'lifetime'")
    return (
        strict_epsilon(life["epsilon"], "lifetime.epsilon", error=PlanError),
        strict_delta(life.get("delta", 0.0), "lifetime.delta", error=PlanError),
    )


def load_plan_spec(path: str | Path) -> PlanSpec:
    """Read and validate PLAN.json (a schema given as a path is relative to the spec's folder)."""
    return parse_plan_spec(_read_json(path, "plan"), Path(path).parent)


def compare_spec(spec: PlanSpec) -> dict[str, dict[str, Any] | str]:
    """What the same spec would give under every composition rule (the rule in force
    included): per rule the ε it spends and, where the split changes with the rule, the
    objective and each item's RMSE; the engine's message where a rule does not apply.

    * weighted — the optimal split of the same ε under each rule;
    * equal — the equal split of the same ε under each rule;
    * manual — the ε the same shares cost under each rule (their errors do not change);
    * target — the least ε meeting every target under each rule.
    """
    from planner.planning.workload import compare, manual_total, plan_equal, plan_for_targets

    out: dict[str, dict[str, Any] | str] = {}
    scales = spec.error_scales or None
    if spec.mode == SplitMode.WEIGHTED:
        for rule, p in compare(spec.queries, spec.schema, spec.epsilon, spec.delta, scales).items():
            out[rule] = _summary(p)
    for rule in CompositionRule:
        if rule.value in out or spec.mode == SplitMode.WEIGHTED:
            continue
        try:
            if spec.mode == SplitMode.TARGET:
                res = plan_for_targets(spec.queries, spec.schema, spec.delta, rule, scales)
                out[rule.value] = {"used_epsilon": res.population_epsilon, "binding": res.binding}
            elif spec.mode == SplitMode.EQUAL:
                out[rule.value] = _summary(plan_equal(spec.queries, spec.schema, spec.epsilon, spec.delta, rule,
                                                      scales))
            else:
                out[rule.value] = {"used_epsilon": manual_total(spec.queries, spec.schema, spec.delta, rule,
                                                                spec.pinned)}
        except PlannerError as exc:
            out[rule.value] = str(exc)
    return out


def _summary(p: Plan) -> dict[str, Any]:
    return {"used_epsilon": p.used_epsilon, "objective": p.allocation.objective,
            "rmse": {pr.id: pr.rmse for pr in p.predictions}}


def plan_command(path: str | Path) -> dict[str, Any]:
    """``planner plan --spec PLAN.json``: the allocation, and the same workload under every rule."""
    spec = load_plan_spec(path)
    outcome = build_plan(spec)
    cmp = compare_spec(spec)
    if outcome.target is not None:
        others = {r: (v["used_epsilon"] if isinstance(v, dict) else v) for r, v in cmp.items()
                  if r != spec.rule.value}
        return {"mode": "target", **outcome.target.to_dict(), "total_epsilon_under_other_rules": others}
    out: dict[str, Any] = {"mode": spec.mode, **outcome.plan.to_dict()}
    out["comparison"] = cmp
    return out


_MECH_KEYS: Final = {
    "laplace": ({"epsilon", "scale", "sensitivity"}),
    "gaussian": ({"sigma", "sensitivity"}),
    "discrete_gaussian": ({"sigma", "sensitivity"}),
    "pure": ({"epsilon"}),
    "discrete_laplace": ({"epsilon"}),
    "exponential": ({"epsilon"}),
    "randomized_response": ({"epsilon", "keep_probability"}),
    "zcdp": ({"rho"}),
    "approx": ({"epsilon", "delta"}),
}
#: Fields any mechanism entry may carry (fresh sampling of each invocation).
_SAMPLING_KEYS: Final = {"sampling_rate", "sampling"}


def _mechanism_events(entry: Any, i: int) -> tuple[PrivacyEvent, int]:
    if not isinstance(entry, dict) or "mechanism" not in entry:
        raise PlanError(f"mechanisms[{i}] must be an object with a 'mechanism' name.")
    kind = entry["mechanism"]
    if not isinstance(kind, str) or kind not in _MECH_KEYS:
        shown = repr(kind[:40]) if isinstance(kind, str) else value_class(kind)
        raise PlanError(
            f"mechanisms[{i}]: unknown mechanism {shown}; use laplace, gaussian, discrete_gaussian, "
            "discrete_laplace, pure, exponential, randomized_response, zcdp or approx."
        )
    _unknown_keys(entry, frozenset(_MECH_KEYS[kind] | {"mechanism", "count"} | _SAMPLING_KEYS),
                  f"mechanisms[{i}] ({kind})")
    count = strict_int(entry.get("count", 1), f"mechanisms[{i}].count", minimum=1,
                       maximum=MAX_INVOCATIONS, error=PlanError)
    where = f"mechanisms[{i}] ({kind})"
    event = _mechanism_event(entry, kind, where)
    if "sampling" in entry and "sampling_rate" not in entry:
        raise PlanError(f"{where}: 'sampling' needs a 'sampling_rate' (the fraction of the data each invocation sees).")
    if "sampling_rate" in entry:
        rate = strict_number(entry["sampling_rate"], f"{where}.sampling_rate", error=PlanError, minimum=0.0,
                             maximum=1.0, exclusive_minimum=True,
                             remedy="It is the fraction of the records each invocation sees, in (0, 1].")
        scheme = entry.get("sampling", "poisson")
        if scheme not in ("poisson", "without_replacement"):
            shown = repr(scheme[:40]) if isinstance(scheme, str) else value_class(scheme)
            raise PlanError(f"{where}.sampling must be 'poisson' or 'without_replacement'; got {shown}.")
        cls = PoissonSampledEvent if scheme == "poisson" else SampledWithoutReplacementEvent
        event = cls(event, rate)
    return event, count


def _mechanism_event(entry: dict[str, Any], kind: str, where: str) -> PrivacyEvent:
    """The event of one (unsampled) mechanism entry."""

    def need(key: str) -> Any:
        if key not in entry:
            raise PlanError(f"{where} is missing {key!r}.")
        return entry[key]

    def positive(key: str, default: float | None = None) -> float:
        value = need(key) if default is None or key in entry else default
        return strict_number(value, f"{where}.{key}", error=PlanError, minimum=0.0, exclusive_minimum=True)

    def eps(key: str = "epsilon") -> float:
        return strict_epsilon(need(key), f"{where}.{key}", error=PlanError)

    if kind == "laplace":
        if "scale" in entry:
            return LaplaceEvent(positive("scale") / positive("sensitivity", 1.0))
        return LaplaceEvent(1.0 / eps())
    if kind in ("gaussian", "discrete_gaussian"):
        return GaussianEvent(check_noise_multiplier(positive("sigma") / positive("sensitivity", 1.0),
                                                    f"{where}: sigma / sensitivity"),
                             discrete=kind == "discrete_gaussian")
    if kind in ("pure", "discrete_laplace"):
        return PureEvent(eps())
    if kind == "exponential":
        return ExponentialEvent(eps())
    if kind == "randomized_response":
        if "keep_probability" in entry:
            p = strict_number(entry["keep_probability"], f"{where}.keep_probability", error=PlanError,
                              minimum=0.5, maximum=1.0, exclusive_maximum=True)
            return RandomizedResponseEvent(p)
        e = eps()
        return RandomizedResponseEvent(1.0 / (1.0 + math.exp(-e)))
    if kind == "zcdp":
        return ZCDPEvent(positive("rho"))
    return ApproxEvent(eps(), strict_delta(need("delta"), f"{where}.delta", error=PlanError))


def compose_command(path: str | Path) -> dict[str, Any]:
    """``planner compose --spec MECHS.json``: total (ε, δ) under every rule — basic, advanced,
    RDP, zCDP and the optimal accountant (privacy loss distributions, "pld").

    Mechanisms without a pure ε (Gaussian, zCDP) need a share of δ under basic and
    advanced composition: under basic each of the k such invocations gets δ/k; under
    advanced they share δ/2 and the other half is the slack δ'. RDP, zCDP and PLD compose
    the events themselves at the total δ. The "pld" entry also gives the method and an
    estimate of its discretisation error (:func:`planner.privacy.accountants.pld.pld_epsilon`).
    """
    from planner.core.errors import BudgetError
    from planner.privacy.accountants.pld import check_relations
    from planner.privacy.accounting import pure_epsilon

    delta, entries = _read_mechanisms(path)
    events = [ev for ev, count in entries for _ in range(count)]
    # the rules that read events take k invocations as one self-composed event
    # (an (ε, δ) mechanism stays one event per invocation: RDP adds those up by basic composition)
    grouped = [g for ev, count in entries
               for g in ([ev] * count if isinstance(ev, ApproxEvent) else [ev if count == 1 else SelfComposedEvent(ev, count)])]
    try:
        check_relations(grouped)
    except BudgetError as exc:
        raise PlanError(str(exc)) from exc
    pure = {e: pure_epsilon(e) for e in set(events) | set(grouped)}
    n_approx = sum(1 for e in events if not math.isfinite(pure[e]))
    results = {rule.value: _composed_total(rule, events, grouped, pure, n_approx, delta)
               for rule in CompositionRule}
    # Basic composition is always a valid account too: never report advanced above it.
    basic, adv = results.get("basic", {}).get("epsilon"), results.get("advanced", {}).get("epsilon")
    if isinstance(basic, float) and isinstance(adv, float) and basic < adv:
        results["advanced"] = {"epsilon": basic, "delta": delta, "note": "basic composition is tighter here"}
    _describe_pld(results.get(CompositionRule.PLD.value, {}), grouped, delta)
    return {"mechanisms": len(events), "delta": delta, "total": results}


def _read_mechanisms(path: str | Path) -> tuple[float, list[tuple[PrivacyEvent, int]]]:
    """MECHS.json's δ and its mechanisms, each as (event, invocations)."""
    data = _read_json(path, "mechanisms")
    if not isinstance(data, dict) or not isinstance(data.get("mechanisms"), list) or not data["mechanisms"]:
        raise PlanError('the spec must be {"delta": ..., "mechanisms": [ ... ]} with at least one mechanism.')
    _unknown_keys(data, frozenset({"delta", "mechanisms"}), "the mechanisms spec")
    delta = strict_delta(data.get("delta", 0.0), "delta", error=PlanError)
    entries: list[tuple[PrivacyEvent, int]] = []
    total = 0
    for i, entry in enumerate(data["mechanisms"]):
        ev, count = _mechanism_events(entry, i)
        total += count
        if total > MAX_INVOCATIONS:
            raise PlanError(
                f"the mechanisms add up to more than {MAX_INVOCATIONS} invocations; compose at most "
                "that many at once."
            )
        entries.append((ev, count))
    return delta, entries


def _composed_total(
    rule: CompositionRule,
    events: list[PrivacyEvent],
    grouped: list[PrivacyEvent],
    pure: dict[PrivacyEvent, float],
    n_approx: int,
    delta: float,
) -> dict[str, Any]:
    """The total (ε, δ) of the mechanisms under one rule, as :func:`compose_command` reports it.

    Basic and advanced take every invocation (``events``) with its pure ε, or, without one,
    its standalone ε at an equal share of δ (all of δ under basic, half under advanced,
    less 1e-12 relative); the other rules take the self-composed events (``grouped``) at
    the total δ. ``pure`` holds each event's pure ε (inf for none); ``n_approx`` of the
    invocations have none.
    """
    from planner.core.errors import BudgetError
    from planner.privacy.accountants import total_epsilon
    from planner.privacy.accounting import Spend, standalone_epsilon

    if n_approx and delta == 0.0:
        return {"epsilon": math.inf, "delta": 0.0, "note": "mechanisms without a pure ε need δ > 0"}
    share = delta if rule is CompositionRule.BASIC else delta / 2
    # an (ε, δ) mechanism brings its own δ; the others without a pure ε share what is left
    own = [e.delta for e in events if isinstance(e, ApproxEvent) and not math.isfinite(pure[e])]
    n_share = n_approx - len(own)
    left = share - math.fsum(own)
    d_i = left / n_share * (1 - 1e-12) if n_share else 0.0
    if rule in (CompositionRule.BASIC, CompositionRule.ADVANCED) and (left < 0 or (n_share and left <= 0)):
        return {"epsilon": None, "delta": delta,
                "note": f"the (ε, δ) mechanisms' own δ ({math.fsum(own):.3g}) leave nothing of the δ this rule "
                        f"gives mechanisms without a pure ε ({share:.3g}: "
                        f"{'all' if rule is CompositionRule.BASIC else 'half'} of δ); raise δ"}
    standalone: dict[PrivacyEvent, float] = {}
    spends = []
    if rule in (CompositionRule.BASIC, CompositionRule.ADVANCED):
        for e in events:
            if math.isfinite(pure[e]):
                spends.append(Spend(e, pure[e], 0.0))
            elif isinstance(e, ApproxEvent):
                spends.append(Spend(e, e.epsilon, e.delta))
            else:
                if e not in standalone:
                    standalone[e] = max(standalone_epsilon(e, d_i), 1e-300)
                spends.append(Spend(e, standalone[e], d_i))
    else:
        spends = [Spend(e, pure[e], 0.0) if math.isfinite(pure[e]) else Spend(e, 1e300, delta) for e in grouped]
    try:
        eps = float(total_epsilon(spends, rule, delta))
    except BudgetError as exc:  # the rule cannot account for these mechanisms at this δ: say why
        return {"epsilon": math.inf, "delta": delta, "note": str(exc)}
    except PlannerError as exc:
        return {"epsilon": None, "delta": delta, "note": str(exc)}
    return {"epsilon": eps, "delta": delta}


def _describe_pld(best: dict[str, Any], grouped: list[PrivacyEvent], delta: float) -> None:
    """Add to the optimal rule's finite total its method and discretisation error estimate
    (:func:`planner.privacy.accountants.pld.pld_epsilon`), and a note where the Rényi DP bound it
    reports is tighter than the PLD's own."""
    from planner.privacy.accountants.pld import pld_epsilon

    if isinstance(best.get("epsilon"), float) and math.isfinite(best["epsilon"]):
        raw = pld_epsilon(grouped, delta, with_error=delta > 0)
        best["method"] = raw.method
        if raw.error is not None:
            best["error_estimate"] = raw.error
        if best["epsilon"] < raw.epsilon:
            best["note"] = "the Rényi DP bound is tighter here; the optimal rule reports the least valid bound"
