"""OpenDP's own privacy loss equals the planner's, for every query kind × mechanism × rule.

For every measurement :func:`planner.release.prepare` builds, OpenDP's ``meas.map(d_in)``
at the schema's sensitivity is compared with the cost the plan predicted for that spend:
pure ε (``max_divergence``) or ρ (``zero_concentrated_divergence``), and for Gaussians
the (ε, δ) from OpenDP's ``make_zCDP_to_approxDP`` at the spend's δ. They must agree to
relative 1e-9 (float rounding only), and the spend the ledger records must never be
below OpenDP's figure. Expected values are OpenDP's (an independent implementation of the
calibration); the planner's come from :mod:`planner.planning.allocation`.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from planner.data.schema import Relation, Schema
from planner.planning.queries import queries_from_list
from planner.planning.workload import plan
from planner.privacy.accounting import CompositionRule, event_rho, pure_epsilon
from planner.privacy.events import ExponentialEvent, GaussianEvent, PureEvent
from planner.release import Draw, PreparedRelease, prepare

ROOT = Path(__file__).resolve().parents[2]
REL = 1e-9

#: Every query kind × mechanism that releases (the smoothed histogram is planning-only).
WORKLOAD = [
    {"id": "c_lap", "kind": "count", "mechanism": "laplace"},
    {"id": "c_dlap", "kind": "count", "mechanism": "discrete_laplace",
     "predicate": {"column": "sex", "op": "==", "value": "female"}},
    {"id": "c_g", "kind": "count", "mechanism": "gaussian"},
    {"id": "c_dg", "kind": "count", "mechanism": "discrete_gaussian"},
    {"id": "s_lap", "kind": "sum", "column": "income", "mechanism": "laplace"},
    {"id": "s_g", "kind": "sum", "column": "income", "mechanism": "gaussian"},
    {"id": "m_lap", "kind": "mean", "column": "age", "mechanism": "laplace"},
    {"id": "m_g", "kind": "mean", "column": "age", "mechanism": "gaussian"},
    {"id": "h_lap", "kind": "histogram", "column": "region", "mechanism": "laplace"},
    {"id": "h_dlap", "kind": "histogram", "column": "region", "mechanism": "discrete_laplace"},
    {"id": "h_g", "kind": "histogram", "column": "education", "mechanism": "gaussian"},
    {"id": "h_dg", "kind": "histogram", "column": "age", "mechanism": "discrete_gaussian", "bins": 8},
    {"id": "med", "kind": "median", "column": "age", "mechanism": "exponential"},
    {"id": "qt", "kind": "quantile", "column": "income", "mechanism": "exponential",
     "alphas": [0.1, 0.9], "candidates": 501},
    {"id": "mode_e", "kind": "mode", "column": "education", "mechanism": "exponential"},
    {"id": "mode_r", "kind": "mode", "column": "region", "mechanism": "exponential"},
    {"id": "mode_i", "kind": "mode", "column": "region", "mechanism": "inverse_sensitivity"},
    {"id": "p_lap", "kind": "proportion", "column": "smoker", "mechanism": "laplace"},
    {"id": "p_dl", "kind": "proportion", "column": "smoker", "mechanism": "discrete_laplace"},
    {"id": "syn", "kind": "synthetic_sample", "column": "age", "mechanism": "perturbed_histogram", "bins": 12},
]
#: Mean with public n needs the substitute relation.
SUBSTITUTE_WORKLOAD = [
    {"id": "mp_lap", "kind": "mean", "column": "age", "mechanism": "laplace", "mode": "public_n"},
    {"id": "mp_g", "kind": "mean", "column": "income", "mechanism": "gaussian", "mode": "public_n"},
    {"id": "h_sub", "kind": "histogram", "column": "region", "mechanism": "discrete_gaussian"},
    {"id": "p_sub", "kind": "proportion", "column": "smoker", "mechanism": "discrete_laplace"},
    {"id": "med_sub", "kind": "median", "column": "hours_worked", "mechanism": "exponential", "candidates": 81},
]


def _schema(relation: Relation = Relation.ADD_REMOVE) -> Schema:
    s = Schema.load(ROOT / "data" / "census.schema.json")
    if relation is Relation.ADD_REMOVE:
        return s
    d = s.to_dict()
    d["relation"] = relation.value
    return Schema.from_dict(d)


def _prepared(rule: CompositionRule, workload: list[dict[str, object]], relation: Relation) -> PreparedRelease:
    schema = _schema(relation)
    p = plan(queries_from_list(workload, schema), schema, 2.0, 1e-6, rule)
    return prepare(p, schema)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b))


def _check(d: Draw, rule: CompositionRule) -> None:
    ev = d.planner.event
    if d.pure:
        # OpenDP certifies ε; the planner's event states its pure ε (an ExponentialEvent
        # released by permute-and-flip, a randomized-response proportion by the discrete
        # Laplace: both ε-DP at that ε)
        assert _close(d.opendp_epsilon, pure_epsilon(ev)), (d.key, d.opendp_epsilon, pure_epsilon(ev))
        assert pure_epsilon(d.recorded.event) >= d.opendp_epsilon
        assert d.recorded.epsilon >= d.opendp_epsilon
        assert d.recorded.delta == 0.0
        # ε-DP ⇒ ε²/2-zCDP [BS16 Prop 1.4]; what zCDP/RDP composition will use
        assert event_rho(d.recorded.event) >= d.opendp_epsilon**2 / 2.0 * (1 - 1e-15)
    else:
        assert _close(d.opendp_rho, event_rho(ev)), (d.key, d.opendp_rho, event_rho(ev))
        assert event_rho(d.recorded.event) >= d.opendp_rho
        if isinstance(ev, GaussianEvent) and d.planner.delta > 0:
            assert _close(d.opendp_epsilon, d.planner.epsilon), (d.key, d.opendp_epsilon, d.planner.epsilon)
            assert d.recorded.epsilon >= d.opendp_epsilon
            assert d.recorded.delta == d.planner.delta
    # the recorded spend costs the planner's figure up to rounding: never much more
    assert _close(d.recorded.epsilon, d.planner.epsilon)


@pytest.mark.parametrize("rule", list(CompositionRule))
def test_release_opendp_costs_equal_planner_add_remove(rule: CompositionRule) -> None:
    prep = _prepared(rule, WORKLOAD, Relation.ADD_REMOVE)
    keys = {d.key for d in prep.draws}
    assert {"m_lap:sum", "m_lap:count", "qt:quantile@0.1", "qt:quantile@0.9", "syn"} <= keys
    for d in prep.draws:
        _check(d, rule)


@pytest.mark.parametrize("rule", list(CompositionRule))
def test_release_opendp_costs_equal_planner_substitute(rule: CompositionRule) -> None:
    for d in _prepared(rule, SUBSTITUTE_WORKLOAD, Relation.SUBSTITUTE).draws:
        _check(d, rule)


@pytest.mark.parametrize("rule", list(CompositionRule))
def test_release_selection_measure_follows_rule(rule: CompositionRule) -> None:
    """PF (max divergence, PureEvent) under basic/advanced; Gumbel (zCDP, ExponentialEvent)
    under rdp/zcdp and the optimal accountant (pld), the rules that account the exponential
    mechanism as bounded range; the ISM mode is PF (PureEvent) under every rule."""
    prep = _prepared(rule, [q for q in WORKLOAD if q["kind"] in ("median", "mode")], Relation.ADD_REMOVE)
    zc = rule in (CompositionRule.RDP, CompositionRule.ZCDP, CompositionRule.PLD)
    for d in prep.draws:
        if d.key == "mode_i":
            assert d.pure and isinstance(d.recorded.event, PureEvent)
        elif zc:
            assert not d.pure and isinstance(d.recorded.event, ExponentialEvent)
            assert _close(d.opendp_rho, pure_epsilon(d.planner.event)**2 / 8.0)
        else:
            assert d.pure and isinstance(d.recorded.event, PureEvent)


@pytest.mark.parametrize(("relation", "d_in"), [(Relation.ADD_REMOVE, 9), (Relation.SUBSTITUTE, 10)])
def test_release_quantile_d_in_is_the_score_sensitivity(relation: Relation, d_in: int) -> None:
    """α = 0.1 = 1/10: integer scores −|10·#{x ≤ t} − n|; L∞ sensitivity c·max(a, b − a) =
    max(1, 9) = 9 under add/remove, c·b = 10 under substitution (planner/planning/statistics/quantile.py)."""
    prep = _prepared(CompositionRule.BASIC, [q for q in WORKLOAD if q["id"] == "qt"], relation)
    by_key = {d.key: d for d in prep.draws}
    comp = by_key["qt:quantile@0.1"].components[0]
    assert comp.d_in == d_in
    assert math.isclose(comp.scale, 2 * d_in / pure_epsilon(by_key["qt:quantile@0.1"].planner.event), rel_tol=1e-12)


def test_a_secret_sample_at_a_rate_below_delta_records_the_epsilon_it_planned(tmp_path: Path) -> None:
    """Fuzzing (session 10): a sample drawn at rate q ≤ δ is accounted at δ/q capped near 1,
    where the planner's zCDP conversion went below OpenDP's α ≥ 1.01 and planned ε = 1 for
    a release the ledger then recorded at ε 22.2 (OpenDP's figure, the larger). The ledger's
    total, amplified to the population, must be the plan's ε."""
    import numpy as np
    import pandas as pd

    from planner.data.backends import make_backend
    from planner.ledger import Ledger
    from planner.planning.plan_spec import build_plan, parse_plan_spec
    from planner.release import release

    doc = {"schema": {"version": 1, "relation": "add_remove", "public_n": 1000,
                      "privacy_unit": {"column": None, "max_rows": 1},
                      "sampling": {"rate": 1e-10, "scheme": "poisson"},
                      "columns": [{"name": "x", "kind": "numeric", "lower": 0, "upper": 100,
                                   "missing": {"action": "drop"}}]},
           "budget": {"epsilon": 1.0, "delta": 1e-6, "composition": "basic"},
           "queries": [{"id": "s", "kind": "sum", "column": "x", "mechanism": "laplace"},
                       {"id": "g", "kind": "sum", "column": "x", "mechanism": "gaussian"}]}
    spec = parse_plan_spec(doc)
    the_plan = build_plan(spec).plan
    assert the_plan.used_epsilon == pytest.approx(1.0, rel=1e-9)
    df = pd.DataFrame({"x": np.random.default_rng(0).uniform(0, 100, 200)})
    led = Ledger(f"sqlite:///{tmp_path}/l.db")
    res = release(the_plan, spec.schema, make_backend("pandas", df, spec.schema), led, "fp-x", "ds",
                  total_epsilon=30.0, total_delta=1e-6, rule="basic")
    assert led.status(res.fingerprint).epsilon_spent == pytest.approx(the_plan.used_epsilon, rel=1e-9)
