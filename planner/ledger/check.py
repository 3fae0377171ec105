"""The budget check of a release: one pure function, no database.

:func:`preview` is the one definition of whether a release fits: :meth:`Ledger.preview`
shows it, and the release transaction enforces it on the record of the journal
(:mod:`planner.ledger.tx`). It takes the spends already recorded *composed* (an
accountant, :mod:`planner.privacy.accountants`), so checking a release composes only the
release's own spends onto the history, whatever its length.

The dataset check: every release so far plus this one, composed under the dataset's rule
at its δ, must fit its lifetime ε. For an analyst, also: their own spends plus this one,
composed under the same rule at the grant's δ, must fit the ε an owner granted them.
"Fits" is :meth:`planner.privacy.budget.Budget.fits` (one tolerance, toward privacy).

Secret samples (:mod:`planner.privacy.sampling`): a dataset registered with a sampling
declaration (the table is a secret random sample of a population at a public rate q) has a
lifetime budget for the *population*. The spends are composed on the sample at δ/q and the
composed total amplified *once*: ε_pop = ln(1 + q(e^ε − 1)), δ_pop = q·(δ/q) (Balle, Barthe
& Gaboardi 2018, Thms 9–10). Amplifying each release separately and adding the results
would be wrong: every release reads the same sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from planner.core.errors import BudgetError
from planner.core.strict_json import strict_delta, strict_epsilon
from planner.ledger.accounts import GrantInfo, Role
from planner.ledger.records import ReleasePreview
from planner.privacy.accountants import Accountant, accountant
from planner.privacy.accounting import CompositionRule, Spend
from planner.privacy.budget import Budget, check_delta, check_epsilon
from planner.privacy.sampling import Sampling, sampled_epsilon

__all__ = ["Lifetime", "budget_values", "composed_epsilon", "preview"]


def budget_values(epsilon: Any, delta: Any, what: str) -> tuple[float, float]:
    """Strict budget values: JSON-number types only (no bool, no str), finite, in range."""
    eps = check_epsilon(strict_epsilon(epsilon, f"{what} epsilon"), f"{what} epsilon")
    dlt = check_delta(strict_delta(delta, f"{what} delta"), f"{what} delta")
    return eps, dlt


@dataclass(frozen=True, slots=True)
class Lifetime:
    """A dataset's lifetime budget as the check reads it."""

    key: str
    epsilon: float
    delta: float
    rule: CompositionRule
    sampling: Sampling | None = None

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta, self.rule)


def composed_epsilon(acct: Accountant, delta: float, sampling: Sampling | None = None) -> float:
    """The ε of the spends ``acct`` holds at total δ (0 for none; ``inf`` for anything that
    is not a number): :func:`planner.privacy.sampling.sampled_epsilon`, the population's ε
    when the table is a secret sample.

    Examples
    --------
    >>> from planner.privacy.events import LaplaceEvent
    >>> acct = accountant("basic").compose([Spend(LaplaceEvent(1.0), 1.0)])
    >>> composed_epsilon(acct, 0.0), composed_epsilon(accountant("basic"), 0.0)
    (1.0, 0.0)
    """
    if not acct.events:
        return 0.0
    value = float(sampled_epsilon(acct, delta, sampling))
    return math.inf if math.isnan(value) else value


def _words(sampling: Sampling | None) -> str:
    if sampling is None:
        return ""
    return (f" (population ε: the table is a secret {sampling.scheme.value} sample at rate "
            f"q = {sampling.rate:g}, so the spends composed on the sample are amplified once)")


_REMEDY = ("Lower this release's ε (the Planner can pick the most that fits) or drop queries from it; "
           "the lifetime budget itself can only be raised by a recorded decision of its owner.")


def preview(
    life: Lifetime,
    old: Accountant,
    new: Sequence[Spend],
    *,
    spent: float | None = None,
    grant: GrantInfo | None = None,
    own: Accountant | None = None,
) -> ReleasePreview:
    """What releasing ``new`` costs on a dataset whose recorded spends ``old`` composes, and
    whether it fits (see the module docstring).

    ``spent`` is ``composed_epsilon(old, life.delta, life.sampling)`` when the caller has it
    already. ``grant`` and ``own`` (the analyst's own spends composed) apply the grant check.

    Examples
    --------
    >>> from planner.privacy.events import LaplaceEvent
    >>> life = Lifetime("ds-1", 1.0, 0.0, CompositionRule.BASIC)
    >>> old = accountant("basic").compose([Spend(LaplaceEvent(4.0), 0.25)])
    >>> p = preview(life, old, [Spend(LaplaceEvent(2.0), 0.5)])
    >>> p.fits, p.epsilon_spent, p.epsilon_release, p.epsilon_remaining_after
    (True, 0.25, 0.5, 0.25)
    >>> preview(life, old, [Spend(LaplaceEvent(1.0), 1.0)]).fits
    False
    """
    rule, smp = life.rule, life.sampling
    before = composed_epsilon(old, life.delta, smp) if spent is None else spent
    args = (life.key, rule, life.epsilon, life.delta, before)
    try:
        after = composed_epsilon(old.compose(list(new)), life.delta, smp) if new else before
    except BudgetError as exc:
        return ReleasePreview(
            *args, math.inf, math.inf, False,
            f"This release cannot be accounted within the lifetime budget (ε = {life.epsilon:g}, "
            f"δ = {life.delta:g}, {rule.value} rule{_words(smp)}): {exc}", "dataset", sampling=smp,
        )
    release = after - before
    if not life.budget.fits(after):
        remaining = life.epsilon - before
        return ReleasePreview(
            *args, release, after, False,
            f"This release needs ε = {release:.4g} under the {rule.value} rule{_words(smp)}, "
            f"but only ε = {max(remaining, 0.0):.4g} of the lifetime budget ε = {life.epsilon:g} remains "
            f"(short by {release - remaining:.3g}). {_REMEDY}", "dataset", sampling=smp,
        )
    if grant is None or grant.role is not Role.ANALYST or grant.epsilon is None:
        return ReleasePreview(*args, release, after, True, sampling=smp)
    g_delta = life.delta if grant.delta is None else grant.delta
    mine = own if own is not None else accountant(rule)
    try:
        own_after = composed_epsilon(mine.compose(list(new)), g_delta, smp)
    except BudgetError as exc:
        return ReleasePreview(
            *args, release, after, False,
            f"This release cannot be accounted within the budget granted to {grant.subject} "
            f"(ε = {grant.epsilon:g}, δ = {g_delta:g}): {exc} Ask an owner for a larger grant.",
            "grant", grant.epsilon, math.inf, sampling=smp,
        )
    if Budget(grant.epsilon, g_delta, rule).fits(own_after):
        return ReleasePreview(*args, release, after, True, "", "", grant.epsilon, own_after, sampling=smp)
    own_spent = composed_epsilon(mine, g_delta, smp)
    return ReleasePreview(
        *args, release, after, False,
        f"This release would bring the spends of {grant.subject} on this dataset to "
        f"ε = {own_after:.4g}{_words(smp)}, above the ε = {grant.epsilon:g} an owner "
        f"granted them (already spent: {own_spent:.4g}). Lower this release's ε, or ask an owner "
        "to raise your grant.", "grant", grant.epsilon, own_after, sampling=smp,
    )
