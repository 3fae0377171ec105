"""Incremental composition: an accountant composed one release at a time gives the float a
composition of every spend at once gives, under every rule.

The ledger keeps one composed accountant per dataset and adds each release's spends to it
(``acct.compose(new)``); the budget it reports must be the one ``total_epsilon`` of the whole
history reports. Every expected number here is that one-shot composition (computed by the
same library, so the comparison is exact equality: the running sums are exact or taken in
the one-shot order, see :class:`planner.privacy.accountants.base.Accountant`), plus hand
calculations for the exact sums.
"""

from __future__ import annotations

import math
import random

import pytest

from planner.core.errors import BudgetError
from planner.privacy.accountants import ACCOUNTANTS, Spend, accountant, total_epsilon
from planner.privacy.accountants.basic import standalone_epsilon
from planner.privacy.accountants.exact import ExactSum
from planner.privacy.budget import CompositionRule
from planner.privacy.events import (
    ComposedEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ThresholdedEvent,
    ZCDPEvent,
)
from planner.privacy.sampling import Sampling, sampled_epsilon, sampled_total_epsilon


def _spend(rng: random.Random, pick: object) -> Spend:
    """One spend of a random kind with a valid assigned (ε, δ) (every rule accepts it)."""
    choose = pick  # type: ignore[assignment]
    k = rng.randrange(9)
    ev: PrivacyEvent
    if k == 0:
        ev = LaplaceEvent(choose([2.0, 4.0, 10.0]))  # type: ignore[operator]
        return Spend(ev, 1 / ev.noise_multiplier)
    if k == 1:
        ev = GaussianEvent(choose([3.0, 5.0, 8.0]))  # type: ignore[operator]
        return Spend(ev, standalone_epsilon(ev, 1e-9), 1e-9)
    if k == 2:
        ev = ExponentialEvent(choose([0.1, 0.3]))  # type: ignore[operator]
        return Spend(ev, ev.epsilon)
    if k == 3:
        ev = RandomizedResponseEvent(choose([0.55, 0.6]))  # type: ignore[operator]
        return Spend(ev, standalone_epsilon(ev, 0.0))
    if k == 4:
        ev = PureEvent(choose([0.05, 0.2]))  # type: ignore[operator]
        return Spend(ev, ev.epsilon)
    if k == 5:
        ev = ZCDPEvent(choose([0.001, 0.01]))  # type: ignore[operator]
        return Spend(ev, standalone_epsilon(ev, 1e-9), 1e-9)
    if k == 6:
        ev = ThresholdedEvent(LaplaceEvent(choose([5.0, 20.0])), 1e-10)  # type: ignore[operator]
        return Spend(ev, 1 / ev.event.noise_multiplier, 1e-10)
    if k == 7:
        ev = SelfComposedEvent(GaussianEvent(choose([20.0, 40.0]), discrete=True), 3)  # type: ignore[operator]
        return Spend(ev, standalone_epsilon(ev, 1e-9), 1e-9)
    inner = LaplaceEvent(choose([2.0, 4.0]))  # type: ignore[operator]
    ev = ComposedEvent((inner, PureEvent(0.01)))
    return Spend(ev, 1 / inner.noise_multiplier + 0.01)


def _releases(n_spends: int, seed: int, distinct: bool) -> list[list[Spend]]:
    """Releases of 1–4 spends each, ``n_spends`` in all; parameters from a few plans, or all
    distinct (uniform over the same ranges)."""
    rng = random.Random(seed)  # fixed seed: the same history every run

    def choose(xs: list[float]) -> float:
        return rng.uniform(min(xs), max(xs)) if distinct else rng.choice(xs)

    out: list[list[Spend]] = []
    left = n_spends
    while left > 0:
        k = min(rng.randint(1, 4), left)
        out.append([_spend(rng, choose) for _ in range(k)])
        left -= k
    return out


@pytest.fixture(scope="module")
def history() -> list[list[Spend]]:
    return _releases(1000, 20260101, distinct=False)


@pytest.mark.parametrize("rule", list(CompositionRule))
def test_one_release_at_a_time_equals_all_at_once(rule: CompositionRule, history: list[list[Spend]]) -> None:
    """1,000 spends of nine kinds (pure, Laplace, Gaussian, exponential, randomized response,
    zCDP, thresholded, self-composed, composed): composed release by release, the ε at three
    δ is the one-shot composition's float, bit for bit."""
    acct = accountant(rule)
    for rel in history:
        acct = acct.compose(rel)
    every = [s for rel in history for s in rel]
    assert len(acct) == 1000
    for delta in (1e-5, 1e-3):
        assert acct.epsilon(delta) == total_epsilon(every, rule, delta)


@pytest.mark.parametrize("rule", [r for r in CompositionRule if r is not CompositionRule.PLD])
def test_distinct_parameters_one_at_a_time_equal_all_at_once(rule: CompositionRule) -> None:
    """400 spends whose parameters are all different (no two events alike): the same float.
    (PLD runs the same code path as the test above; its FFT per distinct pair makes 400
    distinct pairs slow for a unit test, so it is covered with repeated plans.)"""
    rels = _releases(400, 7, distinct=True)
    acct = accountant(rule)
    for rel in rels:
        acct = acct.compose(rel)
    every = [s for rel in rels for s in rel]
    assert acct.epsilon(1e-5) == total_epsilon(every, rule, 1e-5)


def test_composing_leaves_the_earlier_accountant_unchanged(history: list[list[Spend]]) -> None:
    """Accountants are values: composing more onto one returns another and the first keeps
    its answer (the ledger may hold both while a release is previewed)."""
    for rule in CompositionRule:
        first = accountant(rule).compose(history[0])
        before = first.epsilon(1e-5)
        second = first.compose(history[1])
        third = first.compose(history[2])
        assert first.epsilon(1e-5) == before
        assert len(second) == len(history[0]) + len(history[1])
        assert len(third) == len(history[0]) + len(history[2])
        assert first.events == tuple(s.event if not isinstance(s.event, ThresholdedEvent) else s.event.event
                                     for s in history[0])


def test_secret_sample_from_a_composed_accountant(history: list[list[Spend]]) -> None:
    """``sampled_epsilon`` of an accountant built release by release is
    ``sampled_total_epsilon`` of the whole history (ε at δ/q, amplified once)."""
    every = [s for rel in history[:200] for s in rel]
    smp = Sampling(0.1)
    for rule in CompositionRule:
        acct = accountant(rule)
        for rel in history[:200]:
            acct = acct.compose(rel)
        assert sampled_epsilon(acct, 1e-6, smp) == sampled_total_epsilon(every, rule, 1e-6, smp)
        assert sampled_epsilon(acct, 1e-6, None) == total_epsilon(every, rule, 1e-6)


def test_basic_sum_is_exact_whatever_the_grouping() -> None:
    """Basic composition's Σεᵢ is math.fsum of every εᵢ, whatever the releases: 0.1 ten
    times is 1.0 exactly (a running float sum gives 0.9999999999999999)."""
    acct = accountant("basic")
    for _ in range(10):
        acct = acct.compose([Spend(PureEvent(0.1), 0.1)])
    assert acct.epsilon(0.0) == 1.0 == math.fsum([0.1] * 10)


def test_exact_sum_matches_fsum_for_any_split() -> None:
    """:class:`ExactSum` fed in random batches equals :func:`math.fsum` of all the values
    (2,000 random lists spanning 60 orders of magnitude, signs mixed)."""
    rng = random.Random(11)
    for _ in range(2000):
        xs = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(rng.randint(0, 40))]
        s = ExactSum()
        i = 0
        while i < len(xs):
            k = rng.randint(1, 5)
            s = s.add(xs[i:i + k])
            i += k
        assert s.value == math.fsum(xs)


def test_answers_are_kept_and_errors_still_raised() -> None:
    """ε is kept per δ (the same float again), and a rule that cannot reach δ still says so
    (basic with Σδᵢ above δ) at every reading."""
    acct = accountant("basic").compose([Spend(GaussianEvent(5.0), standalone_epsilon(GaussianEvent(5.0), 1e-6), 1e-6)])
    with pytest.raises(BudgetError, match="deltas sum"):
        acct.epsilon(1e-7)
    with pytest.raises(BudgetError, match="deltas sum"):
        acct.epsilon(1e-7)
    assert acct.epsilon(1e-6) == acct.epsilon(1e-6)


def test_registry_builds_empty_accountants() -> None:
    for rule, cls in ACCOUNTANTS.items():
        acct = accountant(rule)
        assert isinstance(acct, cls) and len(acct) == 0 and acct.epsilon(1e-6) == 0.0


def test_sampled_events_compose_incrementally() -> None:
    """DP-SGD-like steps (Poisson-sampled Gaussians) added in batches: the one-shot float."""
    step = PoissonSampledEvent(GaussianEvent(1.1), 0.01)
    for rule in (CompositionRule.RDP, CompositionRule.ZCDP, CompositionRule.PLD):
        acct = accountant(rule)
        for _ in range(5):
            acct = acct.compose([step], count=20)
        assert acct.epsilon(1e-5) == accountant(rule).compose([step], count=100).epsilon(1e-5)
