"""The split modes' memo (planner.planning.allocation.memo): a split asked for again is the
one already made, exactly; nothing else is ever handed out."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

from planner.core.errors import PlanError
from planner.planning.allocation import Family, Item, allocate, allocate_equal, plan_targets
from planner.planning.allocation.memo import Memo, freeze
from planner.planning.allocation.model import Target
from planner.planning.allocation.modes import SPLITS
from planner.privacy.budget import Budget, CompositionRule

ITEMS = [Item("a", Family.LAPLACE, 2.0), Item("b", Family.LAPLACE, 2.0, weight=8.0),
         Item("g", Family.GAUSSIAN, 3.0, weight=2.0)]


@pytest.fixture(autouse=True)
def _fresh_memo() -> Iterator[None]:
    SPLITS.clear()
    yield
    SPLITS.clear()


@pytest.mark.parametrize("rule", ["basic", "rdp", "zcdp"])
def test_a_split_asked_again_is_the_same_split(rule: str) -> None:
    first = allocate(ITEMS, 1.0, 1e-6, rule)
    again = allocate(tuple(ITEMS), Budget(1.0, 1e-6, CompositionRule(rule)))  # a tuple and a Budget: the same key
    assert again is first
    assert SPLITS.info()[:2] == (1, 1)
    SPLITS.clear()
    fresh = allocate(ITEMS, 1.0, 1e-6, rule)  # computed again from nothing: equal field by field
    assert fresh is not first and fresh == first


def test_every_argument_is_part_of_the_key() -> None:
    base = allocate(ITEMS, 1.0, 1e-6, "rdp")
    others = [allocate(ITEMS, 1.1, 1e-6, "rdp"), allocate(ITEMS, 1.0, 1e-7, "rdp"),
              allocate(ITEMS, 1.0, 1e-6, "zcdp"), allocate(ITEMS, 1.0, 1e-6, "rdp", 10),
              allocate([dataclasses.replace(ITEMS[0], weight=1.5), *ITEMS[1:]], 1.0, 1e-6, "rdp"),
              allocate([dataclasses.replace(ITEMS[0], pinned=0.1), *ITEMS[1:]], 1.0, 1e-6, "rdp")]
    assert all(o is not base for o in others)
    assert SPLITS.info() == (0, 7, 7)


def test_the_key_is_exact() -> None:
    assert freeze(0.0) != freeze(-0.0)  # equal as numbers, not as bits
    assert freeze(float("nan")) == freeze(float("nan"))
    assert freeze(1) != freeze(1.0) and freeze(True) != freeze(1)
    assert freeze([1.0, "a"]) == freeze((1.0, "a"))
    assert freeze(CompositionRule.RDP) != freeze("rdp")
    with pytest.raises(TypeError):
        freeze(object())


def test_an_argument_without_an_exact_key_is_not_memoised() -> None:
    m = Memo()
    calls: list[int] = []

    def f(x: object) -> int:
        calls.append(1)
        return 7

    assert m(f, np.int64(3)) == 7 and m(f, np.int64(3)) == 7
    assert len(calls) == 2 and m.info() == (0, 0, 0)


def test_a_refused_split_is_refused_again_and_never_stored() -> None:
    over = [dataclasses.replace(ITEMS[0], pinned=5.0), dataclasses.replace(ITEMS[1], pinned=5.0)]
    for _ in range(2):
        with pytest.raises(PlanError, match="more than the total"):
            allocate(over, 1.0, 0.0, "basic")
    assert SPLITS.info() == (0, 2, 0)


def test_the_memo_keeps_its_last_entries_only() -> None:
    m = Memo(max_entries=2)
    for x in (1.0, 2.0, 3.0):
        m(abs, x)
    m(abs, 1.0)  # dropped (least recently used): computed again
    assert m.info() == (0, 4, 2)


def test_equal_split_and_targets_are_memoised_too() -> None:
    e1 = allocate_equal(ITEMS, 1.0, 1e-6, "rdp")
    assert allocate_equal(ITEMS, 1.0, 1e-6, "rdp") is e1
    targets = {"a": Target(10.0), "b": Target(5.0), "g": Target(20.0)}
    t1 = plan_targets(ITEMS, targets, 1e-6, "rdp")
    t1.cost_shares["a"] = -1.0  # the caller's own copy of the one mutable field
    t2 = plan_targets(ITEMS, targets, 1e-6, "rdp")
    assert t2.cost_shares["a"] != -1.0 and t2.items is t1.items
    assert SPLITS.info()[:2] == (2, 2)


def test_planner_plan_plans_the_rule_in_force_once() -> None:
    """``planner plan``: the rule in force, then every rule; the second is the memo's."""
    from planner.planning.plan_spec import build_plan, compare_spec, parse_plan_spec
    from planner.planning.workload import compare

    doc = {"schema": {"version": 1, "columns": [{"name": "age", "kind": "numeric", "lower": 0, "upper": 100,
                                                "missing": {"action": "drop"}}]},
           "budget": {"epsilon": 1.0, "delta": 1e-6, "composition": "basic"},
           "queries": [{"id": "n", "kind": "count", "mechanism": "laplace"},
                       {"id": "s", "kind": "sum", "column": "age", "mechanism": "laplace", "weight": 3}]}
    spec = parse_plan_spec(doc)
    in_force = build_plan(spec).plan
    hits = SPLITS.info()[0]
    compare_spec(spec)
    assert SPLITS.info()[0] == hits + 1  # the rule in force, not planned a second time
    assert compare(spec.queries, spec.schema, 1.0, 1e-6)["basic"].allocation is in_force.allocation


def test_the_optimal_rule_reuses_the_rdp_solve_and_plans_the_same() -> None:
    """PLD is optimised under RDP: after the RDP split at the same ε its first dual solve is
    the memo's, and the split equals the one made with empty memos."""
    from planner.planning.allocation.solvers import DUALS

    DUALS.clear()
    alone = allocate(ITEMS, 1.0, 1e-6, "pld")
    SPLITS.clear()
    DUALS.clear()
    allocate(ITEMS, 1.0, 1e-6, "rdp")
    hits = DUALS.info()[0]
    after = allocate(ITEMS, 1.0, 1e-6, "pld")
    assert DUALS.info()[0] == hits + 1
    assert after == alone and after is not alone


def test_a_memoised_solve_is_the_callers_own_array() -> None:
    from planner.planning.allocation.solvers import DUALS, _dual_allocation
    from planner.planning.allocation.workload import _Workload

    wl = _Workload.build(ITEMS, CompositionRule.RDP, 1e-6, 1.0)
    free, start = np.ones(3, dtype=bool), np.ones(3)
    a = _dual_allocation(wl, CompositionRule.RDP, 1.0, 1e-6, free, start)
    a[:] = -1.0
    b = _dual_allocation(wl, CompositionRule.RDP, 1.0, 1e-6, free, start)
    assert DUALS.info()[0] >= 1 and np.all(b > 0)
