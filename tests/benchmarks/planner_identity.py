"""The Planner's results, bit for bit: dump them from one checkout, compare another against them.

Issue 31 asks for a faster Planner with *byte-identical* results: a saved PLAN.json's plan hash
identifies a release for retries, so a speed-up may not move a single bit of a share. This
script plans a fixed set of PLAN.json documents — the bundled census example and the Planner's
census workload (with and without the page's default relative error scales) — in the weighted,
equal and target modes, at ε = 1.0 and 0.35, under every composition rule, and records:

* per plan: every item's θ and the used ε as ``float.hex``, and ``planner.release.plan_hash``
  (or the engine's message when the rule refuses);
* per (document, mode, ε): ``plan_spec.compare_spec``'s JSON (the rule comparison).

Run: ``PYTHONPATH=<checkout> python tests/benchmarks/planner_identity.py dump OUT.json`` on
one checkout (main, for the stored file ``tests/data/planner_identity_main.json``), and
``tests/engine/test_planner_identity.py`` (or ``... compare OUT.json``) on another.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: The Planner's census workload (``pages/_ui/state.py``, CENSUS_WORKLOAD, 2026-12-07), copied so
#: that the stored documents do not change if the page's default does.
PLANNER_CENSUS: list[dict[str, Any]] = [
    {"id": "people", "kind": "count", "column": None, "mechanism": "laplace", "weight": 1.0, "target": 500.0},
    {"id": "income_total", "kind": "sum", "column": "income", "mechanism": "laplace", "weight": 1.0, "target": 2.0e7},
    {"id": "income_mean", "kind": "mean", "column": "income", "mechanism": "laplace", "weight": 2.0, "target": 1000.0},
    {"id": "age_median", "kind": "median", "column": "age", "mechanism": "exponential", "weight": 1.0, "target": 0.01},
    {"id": "region_counts", "kind": "histogram", "column": "region", "mechanism": "laplace", "weight": 1.0,
     "target": 500.0},
    {"id": "education_mode", "kind": "mode", "column": "education", "mechanism": "exponential", "weight": 1.0,
     "target": 500.0},
    {"id": "smoker_share", "kind": "proportion", "column": "smoker", "mechanism": "laplace", "weight": 1.0,
     "target": 0.01},
]
EPSILONS = (1.0, 0.35)
MODES = ("weighted", "equal", "target")


def documents() -> dict[str, dict[str, Any]]:
    """The PLAN.json documents (schema inline) at ε = 1, by "name|mode" (a query keeps its
    target in the target mode, its weight in the others)."""
    from planner.data.schema import Schema
    from planner.planning import plan_spec, workload
    from planner.planning.queries import Query

    out: dict[str, dict[str, Any]] = {}
    ex = plan_spec.load_plan_spec(ROOT / "examples" / "census_plan.json")
    schema = Schema.load(ROOT / "data" / "census.schema.json")
    for mode in MODES:
        out[f"census_example|{mode}"] = plan_spec.spec_document(ex.schema, 1.0, ex.delta, ex.rule, mode, ex.queries,
                                                                error_scales=ex.error_scales or None)
        drop = "weight" if mode == "target" else "target"
        qs = [Query.from_dict({k: v for k, v in r.items() if v is not None and k != drop}) for r in PLANNER_CENSUS]
        rel = workload.default_error_scales(qs, schema)
        out[f"planner_census_relative|{mode}"] = plan_spec.spec_document(schema, 1.0, 1e-6, "rdp", mode, qs,
                                                                         error_scales=rel)
        out[f"planner_census_plain|{mode}"] = plan_spec.spec_document(schema, 1.0, 1e-6, "rdp", mode, qs)
    return out


def _variant(doc: dict[str, Any], eps: float, rule: str | None = None) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    d["budget"]["epsilon"] = eps
    if rule is not None:
        d["budget"]["composition"] = rule
    return d


def run(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every plan and comparison of ``docs`` (see the module docstring)."""
    from planner import release
    from planner.core.errors import PlannerError
    from planner.planning import plan_spec
    from planner.privacy.budget import CompositionRule

    plans: dict[str, Any] = {}
    comparisons: dict[str, Any] = {}
    for name, doc in docs.items():
        for eps in EPSILONS:
            for rule in CompositionRule:
                key = f"{name}|{eps!r}|{rule.value}"
                spec = plan_spec.parse_plan_spec(_variant(doc, eps, rule.value))
                try:
                    p = plan_spec.build_plan(spec).plan
                except PlannerError as exc:
                    plans[key] = {"refused": str(exc)}
                    continue
                a = p.allocation
                plans[key] = {"theta": [it.theta.hex() for it in a.items],
                              "used_epsilon": a.used_epsilon.hex(),
                              "plan_hash": release.plan_hash(p, spec.schema)}
            try:
                cmp: Any = plan_spec.compare_spec(plan_spec.parse_plan_spec(_variant(doc, eps)))
            except PlannerError as exc:
                cmp = {"refused": str(exc)}
            comparisons[f"{name}|{eps!r}"] = json.dumps(cmp, sort_keys=True)
    return {"plans": plans, "comparisons": comparisons}


def differences(stored: dict[str, Any]) -> list[str]:
    """What this checkout plans differently from ``stored`` (a dump): empty when identical."""
    now = run(stored["documents"])
    out = []
    for part in ("plans", "comparisons"):
        for key, want in stored[part].items():
            if now[part].get(key) != want:
                out.append(f"{part} {key}: stored {want!r}, now {now[part].get(key)!r}")
    return out


if __name__ == "__main__":
    cmd, path = sys.argv[1], Path(sys.argv[2])
    if cmd == "dump":
        docs = documents()
        path.write_text(json.dumps({"documents": docs, **run(docs)}, indent=1, sort_keys=True) + "\n")
    else:
        diff = differences(json.loads(path.read_text()))
        print("\n".join(diff) or "identical")
        sys.exit(1 if diff else 0)
