"""The accountants: one class per composition rule, and the registry that names them.

Each rule is registered once, as the ``RULE`` (:class:`~planner.privacy.accountants.base.Rule`)
of its module: its accountant, what the allocator needs to know of it, and its words for
people. A new rule is one new module here (its accountant and its ``RULE``), its name in
:class:`planner.privacy.budget.CompositionRule`, and one line in :data:`RULES`; planning, the
ledger, the report, the advice and the app pick it up from there (:func:`rule`).

Composing a history one release at a time (what the ledger keeps per dataset)::

    acct = accountant(rule).compose(spends)      # every recorded spend, once
    acct2 = acct.compose(new_spends)             # costs the new spends only; acct unchanged
    acct2.epsilon(delta)                         # the composed ε; kept, so asking again is free
    sampled_epsilon(acct2, delta, sampling)      # a secret sample: ε at δ/q, amplified once
                                                 # (planner.privacy.sampling)

``acct2.epsilon(delta)`` is the float ``total_epsilon(spends + new_spends, rule, delta)``
returns (``tests/engine/test_incremental.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from planner.privacy.accountants import advanced, basic, pld, rdp, zcdp
from planner.privacy.accountants.advanced import AdvancedAccountant
from planner.privacy.accountants.base import Accountant, Rule, Spend, as_rule
from planner.privacy.accountants.basic import BasicAccountant
from planner.privacy.accountants.pld import PldAccountant
from planner.privacy.accountants.rdp import RdpAccountant
from planner.privacy.accountants.zcdp import ZcdpAccountant
from planner.privacy.budget import CompositionRule, check_delta

#: Every composition rule, in the order people see them (one line per rule).
RULES: Final[Mapping[CompositionRule, Rule]] = MappingProxyType({r.name: r for r in (
    basic.RULE,
    advanced.RULE,
    rdp.RULE,
    zcdp.RULE,
    pld.RULE,
)})
if tuple(RULES) != tuple(CompositionRule):  # pragma: no cover - a rule named but not registered
    raise ImportError(f"every CompositionRule needs one RULE in RULES; registered {list(RULES)}.")

#: The accountant class of every composition rule.
ACCOUNTANTS: Final[Mapping[CompositionRule, type[Accountant]]] = MappingProxyType(
    {name: r.accountant for name, r in RULES.items()})


def rule(name: CompositionRule | str) -> Rule:
    """The registered :class:`~planner.privacy.accountants.base.Rule` named ``name``.

    Examples
    --------
    >>> rule("rdp").full
    'Rényi differential privacy (RDP)'
    >>> rule("pld").short
    'PLD'
    """
    return RULES[as_rule(name)]


def accountant(rule: CompositionRule | str) -> Accountant:
    """An empty accountant for ``rule``.

    Examples
    --------
    >>> from planner.privacy.events import LaplaceEvent
    >>> accountant("basic").compose([LaplaceEvent(2.0), LaplaceEvent(2.0)]).epsilon(0.0)
    1.0
    """
    return ACCOUNTANTS[as_rule(rule)]()


def total_epsilon(spends: Sequence[Spend], rule: CompositionRule | str, delta: float) -> float:
    """The ε the composed ``spends`` cost at total δ under ``rule`` (empty: 0).

    * BASIC: Σεᵢ of the assigned (εᵢ, δᵢ); requires Σδᵢ ≤ δ.
    * ADVANCED: :func:`~planner.privacy.accountants.advanced.advanced_best` with δ' = δ − Σδᵢ.
    * RDP: :func:`~planner.privacy.accountants.rdp.rdp_epsilon` of the events at δ.
    * ZCDP: Σρᵢ converted at δ, pure events by ρ or by ε, whichever is cheaper
      (:func:`~planner.privacy.accountants.zcdp.zcdp_epsilon`).
    * PLD: the privacy loss distributions composed by FFT, never above RDP
      (:func:`~planner.privacy.accountants.pld.pld_epsilon`).

    Raises
    ------
    BudgetError
        Invalid δ or rule; BASIC/ADVANCED with Σδᵢ > δ; ZCDP with an event that has no ρ.

    Examples
    --------
    >>> from planner.privacy.events import LaplaceEvent
    >>> spends = [Spend(LaplaceEvent(2.0), 0.5), Spend(LaplaceEvent(4.0), 0.25)]
    >>> total_epsilon(spends, "basic", 0.0)  # 0.5 + 0.25
    0.75
    """
    d = check_delta(delta)
    acct = accountant(rule)
    if len(spends) == 0:
        return 0.0
    return acct.compose(spends).epsilon(d)


__all__ = [
    "ACCOUNTANTS",
    "RULES",
    "Accountant",
    "AdvancedAccountant",
    "BasicAccountant",
    "CompositionRule",
    "PldAccountant",
    "RdpAccountant",
    "Rule",
    "Spend",
    "ZcdpAccountant",
    "accountant",
    "rule",
    "total_epsilon",
]
