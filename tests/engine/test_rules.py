"""The rule registry (each composition rule registered once) and the one budget value.

Expected values are the registry's own declarations and hand calculations of the 1e-12
tolerance; the allocator's use of the registry is covered by test_allocation.py.
"""

from __future__ import annotations

import math

import pytest

from planner.core.errors import BudgetError
from planner.planning.allocation import Family, Item, allocate, applicable_rules, solver_for
from planner.privacy.accountants import ACCOUNTANTS, RULES, accountant, rule
from planner.privacy.budget import (
    BUDGET_TOLERANCE,
    Budget,
    CompositionRule,
    as_budget,
    within_budget,
)


def test_every_rule_is_registered_once_with_its_words() -> None:
    assert tuple(RULES) == tuple(CompositionRule)
    for name, r in RULES.items():
        assert r.name is name and ACCOUNTANTS[name] is r.accountant and type(accountant(name)) is r.accountant
        for words in (r.short, r.full, r.gist, r.explanation, r.source):
            assert words.strip() and ".md" not in words and "seed" not in words.lower()
        assert r.label == f"{name.value} ({r.gist})"
        # the full name expands the short one: the acronym appears in it, or the name itself
        assert r.short in r.full or r.short == name.value


def test_acronyms_are_expanded() -> None:
    assert rule("rdp").full == "Rényi differential privacy (RDP)"
    assert rule("zcdp").full == "zero-concentrated differential privacy (zCDP)"
    assert rule("pld").full.endswith("(PLD)") and "privacy loss distributions" in rule("pld").full


def test_a_rule_without_a_solver_is_optimised_as_its_surrogate() -> None:
    """PLD has no solver of its own: the allocator optimises it as RDP and fits it to the
    PLD accountant (its ε is never above RDP's at the same budget)."""
    assert rule("pld").optimised_as is CompositionRule.RDP
    assert solver_for("pld") is solver_for("rdp")
    items = [Item("a", Family.LAPLACE, 2.0), Item("b", Family.GAUSSIAN, 2.0, weight=3.0)]
    pld = allocate(items, Budget(1.0, 1e-6, "pld"))
    rdp = allocate(items, Budget(1.0, 1e-6, "rdp"))
    assert pld.budget.fits(pld.used_epsilon) and pld.objective <= rdp.objective * (1 + 1e-9)


def test_rules_offered_at_zero_delta_come_from_the_registry() -> None:
    pure = [Item("a", Family.LAPLACE, 2.0)]
    assert applicable_rules(pure, 0.0) == [n for n, r in RULES.items() if r.listed_at_zero_delta] == [
        CompositionRule.BASIC]
    assert applicable_rules(pure, 1e-6) == list(CompositionRule)


def test_one_fits_with_one_tolerance() -> None:
    """A cost fits iff cost ≤ total + 1e-12·total and finite (the ledger's test)."""
    b = Budget(2.0, 1e-6, "rdp")
    edge = 2.0 + BUDGET_TOLERANCE * 2.0
    assert b.fits(edge) and within_budget(edge, 2.0)
    assert not b.fits(math.nextafter(edge, math.inf))
    assert not b.fits(math.inf) and not b.fits(math.nan)
    assert b.with_epsilon(3.0) == Budget(3.0, 1e-6, "rdp")


def test_budget_travels_or_the_loose_triple_but_not_both() -> None:
    b = Budget(1.0, 1e-6, "zcdp")
    assert as_budget(b) is b and as_budget(1.0, 1e-6, "zcdp") == b and as_budget(2.0) == Budget(2.0)
    with pytest.raises(BudgetError, match="Budget alone"):
        as_budget(b, 1e-6)
    with pytest.raises(BudgetError, match="rule must be one of"):
        as_budget(1.0, 0.0, "nope")
    items = [Item("a", Family.LAPLACE, 2.0), Item("b", Family.LAPLACE, 2.0, weight=8.0)]
    assert [i.theta for i in allocate(items, b).items] == [i.theta for i in allocate(items, 1.0, 1e-6, "zcdp").items]
