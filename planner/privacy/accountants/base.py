"""What every accountant shares: the :class:`Accountant` interface, :class:`Spend`, and the
rounding rules that keep every reported ε on the safe side.

An accountant adds up privacy events under one composition rule (Google dp_accounting's
model: events are data, :mod:`planner.privacy.events`; accountants hold the formulas). Each rule
is one class in its own module:

============  =====================================================  =====================
rule          what it composes                                       module
============  =====================================================  =====================
basic         the (εᵢ, δᵢ) each spend was assigned: (Σεᵢ, Σδᵢ)       :mod:`.basic`
advanced      the same pairs, Kairouz–Oh–Viswanath (never > basic)   :mod:`.advanced`
rdp           the events' Rényi curves, order by order               :mod:`.rdp`
zcdp          the events' ρ (pure parts also by their ε)             :mod:`.zcdp`
pld           the events' privacy loss distributions, by FFT         :mod:`.pld`
============  =====================================================  =====================

Accountants are immutable: ``compose`` returns a new accountant holding more spends (at
the cost of the new ones only), and ``epsilon(delta)`` reads the composed cost. The allocator calls the same modules'
vectorised kernels directly, so no conversion or composition formula exists twice.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError
from planner.privacy.accountants.exact import EMPTY_SUM, ExactSum
from planner.privacy.accountants.pure import REL_TOL, claim_is_refuted, pure_epsilon
from planner.privacy.budget import CompositionRule, check_delta, check_epsilon
from planner.privacy.events import PrivacyEvent, ThresholdedEvent

FloatArray = npt.NDArray[np.float64]
#: Relative round-up applied to the result of every numerical conversion (≈ 8 ulps).
ROUND_UP: Final[float] = 2.0**-50


def round_up(value: float) -> float:
    """Round a computed privacy loss up by a few ulps (toward more privacy loss)."""
    return value + abs(value) * ROUND_UP


def as_epsilons(values: npt.ArrayLike, name: str = "epsilons") -> FloatArray:
    """A 1-D float array of finite ε > 0, or a BudgetError naming the first bad entry."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"{name} must be a sequence of numbers; got {values!r}.") from exc
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise BudgetError(f"{name} must be one-dimensional; got shape {arr.shape}.")
    bad = np.flatnonzero(~(np.isfinite(arr) & (arr > 0.0)))
    if bad.size:
        i = int(bad[0])
        raise BudgetError(
            f"{name}[{i}] must be > 0 and finite; got {arr[i]}. Every mechanism needs a positive ε."
        )
    return arr


def as_deltas(values: npt.ArrayLike | None, size: int, name: str = "deltas") -> FloatArray:
    """A 1-D float array of δ ∈ [0, 1) of the given length (zeros if ``values`` is None)."""
    if values is None:
        return np.zeros(size)
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"{name} must be a sequence of numbers; got {values!r}.") from exc
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.shape != (size,):
        raise BudgetError(f"{name} must have one entry per epsilon ({size}); got shape {arr.shape}.")
    bad = np.flatnonzero(~((arr >= 0.0) & (arr < 1.0)))
    if bad.size:
        i = int(bad[0])
        raise BudgetError(f"{name}[{i}] must satisfy 0 ≤ δ < 1; got {arr[i]}.")
    return arr


def as_rule(rule: CompositionRule | str) -> CompositionRule:
    """The rule named ``rule``; :class:`BudgetError` listing the valid ones otherwise."""
    try:
        return CompositionRule(rule)
    except ValueError as exc:
        raise BudgetError(
            f"rule must be one of {', '.join(r.value for r in CompositionRule)}; got {rule!r}."
        ) from exc


@dataclass(frozen=True, slots=True)
class Spend:
    """One recorded mechanism invocation: its event and the (εᵢ, δᵢ) it was assigned.

    Parameters
    ----------
    event
        What the mechanism was; RDP and zCDP composition read it.
    epsilon, delta
        The (εᵢ, δᵢ) it was assigned; basic and advanced composition read these.

    Raises
    ------
    BudgetError
        If ε ≤ 0, δ ∉ [0, 1), ``event`` is not a privacy event, or (ε, δ) is provably
        not a guarantee of the event (e.g. (0.5, 0) for a Laplace event of ε = 1, or
        δ = 0 for a Gaussian): :func:`planner.privacy.accountants.basic.claim_is_refuted`.

    Examples
    --------
    >>> from planner.privacy.events import LaplaceEvent
    >>> Spend(LaplaceEvent(2.0), 0.5, 0.0).epsilon
    0.5
    """

    event: PrivacyEvent
    epsilon: float
    delta: float = field(default=0.0)

    def __post_init__(self) -> None:
        if not isinstance(self.event, PrivacyEvent):
            raise BudgetError(
                f"event must be a privacy event (LaplaceEvent, GaussianEvent, ...); "
                f"got {type(self.event).__name__}."
            )
        eps = check_epsilon(self.epsilon)
        d = check_delta(self.delta)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", d)
        if claim_is_refuted(self.event, eps, d):
            raise BudgetError(
                f"(epsilon, delta) = ({eps}, {d}) is not a guarantee of {self.event!r}: the "
                "mechanism costs more. Record the (ε, δ) the mechanism was calibrated for."
            )


class _Log:
    """The events and assigned pairs composed so far, as a chain of batches: extending it
    costs the new batch only; :meth:`flat` joins the batches once and keeps the result."""

    __slots__ = ("_flat", "assigned_tail", "events_tail", "parent", "size")

    def __init__(self, parent: _Log | None = None, events: tuple[PrivacyEvent, ...] = (),
                 assigned: tuple[tuple[float, float] | None, ...] = ()) -> None:
        self.parent = parent
        self.events_tail = events
        self.assigned_tail = assigned
        self.size: int = (parent.size if parent is not None else 0) + len(events)
        self._flat: tuple[tuple[PrivacyEvent, ...], tuple[tuple[float, float] | None, ...]] | None = None

    def extend(self, events: tuple[PrivacyEvent, ...], assigned: tuple[tuple[float, float] | None, ...]) -> _Log:
        return _Log(self, events, assigned) if events else self

    def flat(self) -> tuple[tuple[PrivacyEvent, ...], tuple[tuple[float, float] | None, ...]]:
        if self._flat is None:
            chain: list[_Log] = []
            node: _Log | None = self
            while node is not None:
                chain.append(node)
                node = node.parent
            evs: list[PrivacyEvent] = []
            prs: list[tuple[float, float] | None] = []
            for part in reversed(chain):
                evs.extend(part.events_tail)
                prs.extend(part.assigned_tail)
            self._flat = (tuple(evs), tuple(prs))
        return self._flat


_EMPTY_LOG: Final = _Log()


@dataclass(frozen=True, eq=False)
class Accountant(ABC):
    """Adds up spends under one composition rule, one release at a time.

    ``compose`` takes :class:`Spend` records or bare events; a bare event is assigned its
    pure ε (δᵢ = 0) when it has one, else it carries no assignment, which basic and
    advanced composition cannot use (:meth:`supports` says so).

    **Incremental composition.** An accountant is an immutable value holding, besides the
    spends, the running *summary* its rule reads (the exact sums of basic and advanced
    composition, RDP's curve summed over the order grid, zCDP's ρ, the PLD's groups of
    identical dominating pairs). ``acct.compose(more)`` costs the new spends only and
    returns a new accountant (``acct`` itself is unchanged and still valid); its
    ``epsilon(delta)`` reads the summary and keeps each answer, so asking again is free.
    An accountant composed release by release gives the float that composing every spend
    at once gives (``tests/engine/test_incremental.py`` checks it under every rule):
    every running sum is exact (:class:`~planner.privacy.accountants.exact.ExactSum`) or
    taken in the order the one-shot composition takes it.

    A :class:`~planner.privacy.events.ThresholdedEvent` is held as its inner event, and its δ is
    added to ``reserved``: the rules that read events (RDP, zCDP, PLD) account for the
    inner events at δ − reserved (:meth:`event_delta`). Basic and advanced composition read
    the assigned (εᵢ, δᵢ), which carry the δ already.

    Proof that reserving is sound. Each thresholded release is a mixture
    (1 − δᵢ)·Aᵢ + δᵢ·Bᵢ on both neighbours, with (Aᵢ, Aᵢ′) described by the inner event.
    The joint output of all releases is then (1 − δ_r)·A + δ_r·B with δ_r = 1 − Π(1 − δᵢ)
    ≤ Σδᵢ, where A is the composition of the Aᵢ (Bun & Steinke 2016, Lemma 8.2's argument).
    If A's composition is (ε, δ₀)-DP, then for every set S,
    P[M(x) ∈ S] ≤ (1 − δ_r)·P[A ∈ S] + δ_r ≤ (1 − δ_r)(e^ε P[A′ ∈ S]) + δ₀ + δ_r
    ≤ e^ε P[M(x′) ∈ S] + δ₀ + Σδᵢ. ∎
    """

    rule: ClassVar[CompositionRule]
    #: Why an event is not supported, in words (the error message names it).
    unsupported: ClassVar[str] = "it needs an (ε, δ) assigned to every spend"
    _log: _Log = field(default=_EMPTY_LOG, repr=False)
    #: Σδ of the thresholded events composed (see the class docstring), exactly.
    _reserved: ExactSum = field(default=EMPTY_SUM, repr=False)
    #: Answers already read, by δ (the accountant is immutable, so they stay true).
    _answers: dict[float, float] = field(default_factory=dict, repr=False)

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        """Every event composed, in order (thresholded ones as their inner event)."""
        return self._log.flat()[0]

    @property
    def assigned(self) -> tuple[tuple[float, float] | None, ...]:
        """The assigned (εᵢ, δᵢ) of each event, or None where none was given."""
        return self._log.flat()[1]

    @property
    def reserved(self) -> float:
        """Σδ of the thresholded events composed."""
        return self._reserved.value

    def __len__(self) -> int:
        """The number of events composed."""
        return self._log.size

    @abstractmethod
    def supports(self, event: PrivacyEvent, assigned: tuple[float, float] | None = None) -> bool:
        """Whether this rule can account for ``event`` (with that assignment)."""

    @abstractmethod
    def _epsilon(self, delta: float) -> float:
        """The composed ε at a checked total δ (what :meth:`epsilon` keeps)."""

    @abstractmethod
    def _grow(self, events: tuple[PrivacyEvent, ...], assigned: tuple[tuple[float, float] | None, ...],
              ) -> dict[str, Any]:
        """The rule's summary fields once ``events`` (with their assignments) are added."""

    def epsilon(self, delta: float) -> float:
        """The composed ε at total δ (``inf`` where the rule cannot reach δ).

        Raises
        ------
        BudgetError
            An invalid δ, or one the rule cannot account at (e.g. basic composition with
            Σδᵢ > δ).
        """
        d = check_delta(delta)
        known = self._answers.get(d)
        if known is None:
            known = self._epsilon(d)
            self._answers[d] = known
        return known

    def compose(self, items: Iterable[Spend | PrivacyEvent], count: int = 1) -> Self:
        """A new accountant holding these spends (``count`` times each) as well; costs the
        new spends only.

        Raises
        ------
        BudgetError
            If an item is not a spend or an event, or the rule cannot account for it.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise BudgetError(f"count must be a whole number ≥ 1; got {count!r}.")
        evs: list[PrivacyEvent] = []
        pairs: list[tuple[float, float] | None] = []
        reserved: list[float] = []
        for it in items:
            pair: tuple[float, float] | None
            if isinstance(it, Spend):
                ev, pair = it.event, (it.epsilon, it.delta)
            elif isinstance(it, PrivacyEvent):
                pe = pure_epsilon(it)
                ev, pair = it, ((pe, 0.0) if math.isfinite(pe) else None)
            else:
                raise BudgetError(f"accountants compose spends or privacy events; got {type(it).__name__}.")
            if isinstance(ev, ThresholdedEvent):
                reserved.append(ev.delta)
                if pair is None:  # a bare thresholded event: its inner pure ε and its δ
                    inner = pure_epsilon(ev.event)
                    pair = (inner, ev.delta) if math.isfinite(inner) else None
                ev = ev.event
            if not self.supports(ev, pair):
                raise BudgetError(
                    f"the {self.rule.value} rule cannot account for {ev!r}: {self.unsupported}. "
                    "Use another composition rule for this set of spends."
                )
            evs.append(ev)
            pairs.append(pair)
        new_evs, new_pairs = tuple(evs) * count, tuple(pairs) * count
        if not new_evs:
            return self
        return type(self)(_log=self._log.extend(new_evs, new_pairs),
                          _reserved=self._reserved.add(reserved * count),
                          **self._grow(new_evs, new_pairs))

    def event_delta(self, delta: float) -> float:
        """The δ left for the composed events once the thresholded releases' Σδ is
        reserved (what RDP, zCDP and PLD convert at).

        Raises
        ------
        BudgetError
            If the thresholded releases alone need more than ``delta``.
        """
        d = check_delta(delta)
        reserved = self.reserved
        if reserved > d * (1.0 + REL_TOL):
            raise BudgetError(
                f"the key releases (partition selection) need δ = {reserved:.6g}, more than the total "
                f"δ = {d:.6g}; raise δ or lower the queries' key δ."
            )
        return max(d - reserved, 0.0)


def spends_of(items: Sequence[Spend]) -> list[Spend]:
    """Validate a sequence of spends (a clear error for anything else)."""
    out = list(items)
    for s in out:
        if not isinstance(s, Spend):
            raise BudgetError(f"expected Spend records; got {type(s).__name__}.")
    return out


@dataclass(frozen=True, slots=True)
class Rule:
    """A composition rule, registered once: its accountant, what the allocator needs to
    know of it, and its words for people.

    Each rule's module defines its ``RULE``; :data:`planner.privacy.accountants.RULES` lists
    them (one line each). The allocator, the report, the advice, the app's labels and the
    Learn pages read these fields; nothing else names a rule's words.

    Parameters
    ----------
    name
        The rule's :class:`~planner.privacy.budget.CompositionRule` (its name in PLAN.json,
        the ledger and the command line).
    accountant
        The :class:`Accountant` class that composes spends under the rule.
    short
        The short name people read in prose ("RDP").
    full
        The full name, acronym expanded ("Rényi differential privacy (RDP)").
    gist
        A few words beside the rule's name in a selector ("Rényi DP").
    explanation
        One plain sentence for a data owner: what the rule adds up and when it pays off.
    source
        The paper the rule comes from (authors, title, venue, year).
    surrogate
        The rule whose separable cost the allocator optimises under: the rule itself when
        the allocator has a solver for it (:mod:`planner.planning.allocation.solvers`), else
        a rule it never charges more than (PLD: RDP); the shares are then fitted to this
        rule's own accountant.
    listed_at_zero_delta
        Whether the rule is offered when δ = 0 (at δ = 0 every rule but basic composition
        gives basic composition's number).
    reads_assigned
        Whether the rule composes the (εᵢ, δᵢ) assigned to each spend (basic, advanced)
        rather than the events: the allocator then gives every Gaussian its own δᵢ.
    slack_delta
        Whether the rule also spends a δ′ beyond Σδᵢ (advanced composition): the allocator
        searches the division of δ between the Gaussians' δᵢ and δ′.
    """

    name: CompositionRule
    accountant: type[Accountant]
    short: str
    full: str
    gist: str
    explanation: str
    source: str
    surrogate: CompositionRule | None = None
    listed_at_zero_delta: bool = False
    reads_assigned: bool = False
    slack_delta: bool = False

    @property
    def optimised_as(self) -> CompositionRule:
        """The rule the allocator optimises under (:attr:`surrogate`, else this rule)."""
        return self.surrogate if self.surrogate is not None else self.name

    @property
    def label(self) -> str:
        """The rule's name (as PLAN.json and the command line spell it) and its gist, for a
        selector: "rdp (Rényi DP)"."""
        return f"{self.name.value} ({self.gist})"
