"""Count by undeclared key (DP partition selection, ``planner.planning.statistics.keys``).

Oracles: hand calculations of the discrete Laplace tail (written beside each number),
OpenDP's own privacy map (at threshold − 1, see the module docstring), and Monte Carlo
of the real OpenDP release (the keep rate of a key is measured, not assumed).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.core.errors import BudgetError, PlanError, QueryError
from planner.data.backends.base import KeyCounts
from planner.data.backends.pandas_backend import PandasBackend
from planner.data.requests import Keys
from planner.data.schema import Schema
from planner.ledger import Ledger
from planner.planning.allocation import Family, Item, allocate
from planner.planning.mechanisms.base import MechanismName as M
from planner.planning.queries import Query, QueryKind
from planner.planning.statistics.keys import (
    keep_probability,
    keep_table,
    key_delta_at,
    key_sensitivity,
    key_threshold,
)
from planner.planning.workload import plan
from planner.privacy.accountants import Spend, accountant
from planner.privacy.accountants.basic import standalone_epsilon
from planner.privacy.budget import CompositionRule
from planner.privacy.events import (
    GaussianEvent,
    LaplaceEvent,
    PureEvent,
    ThresholdedEvent,
    event_from_dict,
)
from planner.privacy.noise import laplace_threshold
from planner.release import prepare, release

RULES = list(CompositionRule)


def schema(relation: str = "add_remove", c: int = 1) -> Schema:
    unit = {"column": "pid", "max_rows": c} if c > 1 else {"column": None, "max_rows": 1}
    return Schema.from_dict({
        "version": 1, "relation": relation, "public_n": 1000, "privacy_unit": unit,
        "columns": [
            {"name": "zip", "kind": "key", "missing": {"action": "drop"}},
            {"name": "x", "kind": "numeric", "lower": 0, "upper": 10, "missing": {"action": "drop"}},
            {"name": "pid", "kind": "identifier"},
        ],
    })


def key_query(**opts: float) -> Query:
    return Query("zips", QueryKind.KEY_COUNT, "zip", M.DISCRETE_LAPLACE, options=dict(opts))


# ---------------------------------------------------------------- the threshold and its δ


def test_threshold_by_hand() -> None:
    # scale 2, (1, 1, 1): P[Z ≥ m] = e^{−m/2}/(1 + e^{−1/2}); m = 19 gives 4.659e-5 ≤ 5e-5,
    # m = 18 gives 7.68e-5 > 5e-5, so T = 1 + 19 = 20
    assert key_threshold(2.0, 5e-5, (1, 1, 1)) == 20
    assert key_delta_at(2.0, 20, (1, 1, 1)) == pytest.approx(math.exp(-9.5) / (1 + math.exp(-0.5)), rel=1e-12)
    # l0 = 3 keys: 1 − (1 − p)³
    p = math.exp(-9.5) / (1 + math.exp(-0.5))
    assert key_delta_at(2.0, 20, (3, 3, 1)) == pytest.approx(1 - (1 - p) ** 3, rel=1e-9)


def test_sensitivity_per_relation() -> None:
    assert key_sensitivity(schema("add_remove", 3)) == (3, 3, 3)
    assert key_sensitivity(schema("substitute", 3)) == (6, 6, 3)


@pytest.mark.parametrize("scale", [0.7, 2.0, 13.5])
@pytest.mark.parametrize("d_in", [(1, 1, 1), (3, 3, 3), (6, 6, 3)])
@pytest.mark.parametrize("target", [1e-9, 1e-6, 1e-3])
def test_threshold_is_the_least_whose_delta_fits_and_opendp_agrees(scale: float, d_in: tuple[int, int, int],
                                                                    target: float) -> None:
    t = key_threshold(scale, target, d_in)
    assert key_delta_at(scale, t, d_in) <= target
    if t - 1 > d_in[2]:
        assert key_delta_at(scale, t - 1, d_in) > target * (1 - 1e-6)
    comp = laplace_threshold("keys", d_in, scale, t)
    # OpenDP's map at T − 1 (its arithmetic over the event that really shows a key) is the
    # planner's δ; it never exceeds the key δ planned
    assert comp.delta == pytest.approx(key_delta_at(scale, t, d_in), rel=1e-6)
    assert comp.delta <= target
    # OpenDP 0.16's own δ at T is the tail one integer further (opendp#2922): smaller
    assert comp.delta_opendp < comp.delta
    assert comp.cost == pytest.approx(d_in[1] / scale, rel=1e-12)  # ε = l1/s


def test_the_keep_rate_of_a_released_key_is_the_planned_delta_not_opendps() -> None:
    """A key of 1 row at scale 2 and threshold 3 is shown with P[Z ≥ 2] = e^{−1}/(1 + e^{−1/2})
    = 0.2290 (by hand). OpenDP 0.16 reports δ = P[Z ≥ 3] = 0.1389; the release shows the key
    far more often than that, at the rate the planner charges."""
    comp = laplace_threshold("keys", (1, 1, 1), 2.0, 3)
    runs = 20_000
    shown = sum("k" in comp.invoke({"k": 1}) for _ in range(runs)) / runs
    se = math.sqrt(0.229 * 0.771 / runs)
    assert abs(shown - comp.delta) < 5 * se, (shown, comp.delta)
    assert comp.delta == pytest.approx(math.exp(-1) / (1 + math.exp(-0.5)), rel=1e-9)
    assert shown > comp.delta_opendp + 10 * se


@pytest.mark.parametrize("rows", [1, 3, 5, 8])
def test_keep_probability_matches_the_release(rows: int) -> None:
    comp = laplace_threshold("keys", (1, 1, 1), 1.5, 5)
    runs = 6000
    shown = sum("k" in comp.invoke({"k": rows}) for _ in range(runs)) / runs
    p = keep_probability(1.5, 5, rows)
    assert abs(shown - p) < 5 * math.sqrt(max(p * (1 - p), 1e-4) / runs), (rows, shown, p)


# ---------------------------------------------------------------- accounting


def test_thresholded_event_round_trips_and_is_refused_without_delta() -> None:
    e = ThresholdedEvent(PureEvent(0.5), 1e-6)
    assert event_from_dict(e.to_dict()) == e
    with pytest.raises(BudgetError, match="δ > 0"):
        ThresholdedEvent(PureEvent(0.5), 0.0)
    with pytest.raises(BudgetError, match="not a guarantee"):
        Spend(e, 0.5, 1e-7)  # claims less δ than the event needs


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.value)
def test_every_rule_reserves_the_key_delta_and_accounts_for_the_inner_event(rule: CompositionRule) -> None:
    # (inner events at δ − Σδᵢ) is the composed cost of the thresholded ones at δ
    g = GaussianEvent(10.0)
    others = [Spend(LaplaceEvent(2.0), 0.5), Spend(g, standalone_epsilon(g, 5e-6), 5e-6)]
    wrapped = [Spend(ThresholdedEvent(PureEvent(0.3), 2e-6), 0.3, 2e-6), *others]
    inner = [Spend(PureEvent(0.3), 0.3, 0.0), *others]
    got = accountant(rule).compose(wrapped).epsilon(1e-5)
    if rule in (CompositionRule.BASIC, CompositionRule.ADVANCED):  # the assigned pairs carry δᵢ
        want = accountant(rule).compose([Spend(PureEvent(0.3), 0.3, 2e-6), *others]).epsilon(1e-5)
    else:
        want = accountant(rule).compose(inner).epsilon(1e-5 - 2e-6)
    assert got == pytest.approx(want, rel=1e-12)
    with pytest.raises(BudgetError):
        accountant(rule).compose([Spend(ThresholdedEvent(PureEvent(0.3), 2e-5), 0.3, 2e-5)]).epsilon(1e-5)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.value)
def test_allocation_reserves_the_key_delta(rule: CompositionRule) -> None:
    items = [Item("k", Family.DISCRETE_LAPLACE, 1.0, sensitivity=1.0, delta=1e-6), Item("c", Family.LAPLACE, 2.0),
             Item("g", Family.GAUSSIAN, 1.0)]
    a = allocate(items, 1.0, 1e-5, rule)
    assert a.used_epsilon == pytest.approx(1.0, rel=1e-6) and a.used_epsilon <= 1.0
    assert a.delta == 1e-5
    k = a.items[0]
    assert isinstance(k.spends[0].event, ThresholdedEvent) and k.spends[0].event.delta == 1e-6
    assert k.delta == pytest.approx(1e-6)
    with pytest.raises(PlanError, match="raise δ"):
        allocate(items, 1.0, 5e-7, rule)


# ---------------------------------------------------------------- data, plan and release


def test_pandas_key_counts_after_contribution_bounding() -> None:
    s = schema(c=2)
    df = pd.DataFrame({
        "zip": ["02139", " 02139", "A", None, "", "B", "B", "B"],
        "x": 1.0,
        "pid": [1, 2, 3, 4, 5, 6, 6, 6],  # person 6 has 3 rows: 2 are kept
    })
    kc = PandasBackend(df, s, salt="t").result(Keys("zip"))
    assert kc == KeyCounts(("02139", "A", "B"), (2, 1, 2), 2)  # "02139" keeps its zero; 2 missing keys


def test_key_counts_are_refused_on_other_columns_and_predicates() -> None:
    s = schema()
    with pytest.raises(QueryError, match="key column"):
        Query("z", QueryKind.KEY_COUNT, "x", M.DISCRETE_LAPLACE).validate(s)
    with pytest.raises(QueryError, match="key column"):
        Query("n", QueryKind.COUNT, None, M.LAPLACE, predicate={"column": "zip", "op": "==", "value": "A"}).validate(s)


@pytest.mark.parametrize("relation", ["add_remove", "substitute"])
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.value)
def test_plan_and_release_describe_the_same_noise_threshold_and_cost(relation: str, rule: CompositionRule) -> None:
    s = schema(relation, 3)
    p = plan([key_query(key_delta=1e-7), Query("n", QueryKind.COUNT, None, M.LAPLACE)], s, 1.0, 1e-6, rule)
    item = next(i for i in prepare(p, s).items if i.part.query.id == "zips")
    pred = item.prediction
    (comp,) = item.components
    d_in = key_sensitivity(s)
    assert comp.scale == pytest.approx(pred.scales["keys"], rel=1e-12)
    assert comp.threshold == int(pred.noise["threshold"])  # type: ignore[attr-defined]
    assert comp.cost == pytest.approx(d_in[1] / pred.scales["keys"], rel=1e-9)
    (d,) = item.draws
    assert isinstance(d.recorded.event, ThresholdedEvent)
    assert d.recorded.event.delta == pytest.approx(1e-7)  # the real δ fits the planned key δ
    assert comp.delta <= 1e-7  # type: ignore[attr-defined]
    assert pred.noise["key_delta"] == pytest.approx(comp.delta, rel=1e-6)  # type: ignore[attr-defined]
    table = dict(keep_table(pred))
    assert table[int(pred.noise["rows_shown_95pct"])] >= 0.95


def test_release_shows_large_keys_with_the_predicted_noise_and_hides_a_lone_key() -> None:
    s = schema()
    p = plan([key_query(key_delta=1e-6)], s, 1.0, 1e-6, "basic")
    item = prepare(p, s).items[0]
    t = int(item.prediction.noise["threshold"])
    agg = KeyCounts(("big", "lone"), (1000, 1), 0)
    runs = 3000
    errs, lone = [], 0
    for _ in range(runs):
        out = item.answer(agg)
        shown = dict(zip(out["keys"], out["counts"], strict=True))
        assert all(v >= t for v in shown.values())
        errs.append(shown["big"] - 1000)
        lone += "lone" in shown
    e = np.asarray(errs)
    rmse = math.sqrt(float((e**2).mean()))
    se = float((e**2).std(ddof=1)) / math.sqrt(runs) / (2 * rmse)
    assert abs(rmse - item.prediction.rmse) < 5 * se
    assert lone == 0  # shown with probability ≤ 1e-6 per run


def test_release_through_the_ledger_records_the_key_delta(tmp_path: Path) -> None:
    s = schema()
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"zip": [*rng.choice(["A", "B", "C"], size=3000, p=[0.6, 0.3, 0.1]).tolist(), "rare"],
                       "x": 1.0, "pid": range(3001)})
    p = plan([key_query(key_delta=1e-7), Query("n", QueryKind.COUNT, None, M.LAPLACE)], s, 1.0, 1e-6, "zcdp")
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    rel = release(p, s, PandasBackend(df, s), ledger, "ds", "owner", total_epsilon=1.0, total_delta=1e-6)
    ans = next(a for a in rel.answers if a.query_id == "zips")
    assert isinstance(ans.answer, dict)
    keys = ans.answer["keys"]
    assert isinstance(keys, list) and {"A", "B", "C"} <= set(keys) <= {"A", "B", "C", "rare"}
    assert ans.delta == pytest.approx(1e-7)  # the key δ, recorded with the spend
    st = ledger.status("ds")
    assert 0.99 <= st.epsilon_spent <= 1.0 + 1e-9 and st.releases == 1
    again = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}").status("ds")  # the stored events read back
    assert again.epsilon_spent == pytest.approx(st.epsilon_spent, rel=1e-12)


def test_plan_file_round_trip() -> None:
    from planner.planning.plan_spec import (
        build_plan,
        dump_plan_spec,
        loads_plan_spec,
        spec_document,
    )
    from planner.release import plan_hash

    s = schema("substitute", 3)
    qs = [key_query(key_delta=2e-7), Query("n", QueryKind.COUNT, None, M.LAPLACE)]
    doc = spec_document(s, 1.0, 1e-6, "pld", "weighted", qs, dataset_name="keys")
    spec = loads_plan_spec(dump_plan_spec(doc))
    again = build_plan(spec)
    assert spec.queries[0].option("key_delta") == 2e-7
    assert plan_hash(again.plan, spec.schema) == plan_hash(plan(qs, s, 1.0, 1e-6, "pld"), s)


def test_an_engine_without_key_counts_is_refused_before_anything_is_spent(tmp_path: Path) -> None:
    class NoKeys(PandasBackend):  # an engine that cannot count keys (every shipped one can)
        counts_keys = False

    s = schema()
    backend = NoKeys(pd.DataFrame({"zip": ["A"] * 50 + ["B"], "x": 1.0, "pid": range(51)}), s)
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    p = plan([key_query()], s, 1.0, 1e-6, "basic")
    with pytest.raises(QueryError, match=r"cannot count rows per key.*Nothing was spent"):
        release(p, s, backend, ledger, "ds", "owner", total_epsilon=1.0, total_delta=1e-6)
    # refused before the dataset is even registered: no budget, no release, no spend
    assert ledger.datasets() == []
