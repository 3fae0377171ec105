"""The composition rules, each registered once (:data:`RULES`), and where to find one by name.

A rule is a :class:`~planner.privacy.accountants.base.Rule`: its accountant, what the allocator
needs to know of it (the rule it is optimised under), and its words for people (short
name, full name, a plain explanation, its paper). Each lives in its accountant's module;
:data:`planner.privacy.accountants.RULES` lists them. This module is the short way in::

    from planner.privacy.rules import rule
    rule("pld").full   # 'the optimal accountant: privacy loss distributions (PLD)'
"""

from __future__ import annotations

from planner.privacy.accountants import RULES, rule
from planner.privacy.accountants.base import Rule

__all__ = ["RULES", "Rule", "rule"]
