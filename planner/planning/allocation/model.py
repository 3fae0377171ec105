"""The allocator's vocabulary: queries as items of a noise family, their errors and events,
and the results (an allocation, a target plan).

Each query of a workload is reduced to an :class:`Item`: a *noise family* (how its error
depends on its privacy parameter θ, and which privacy events it emits), its sensitivity, an
importance weight and an optional error scale (so a count and a mean can share a budget
fairly). θ is the query's pure ε for pure mechanisms and its zCDP ρ for Gaussian ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import PlanError
from planner.privacy.accountants.base import Spend
from planner.privacy.budget import Budget, CompositionRule, check_delta
from planner.privacy.events import (
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
)

FloatArray = npt.NDArray[np.float64]


class Family(StrEnum):
    """How a query's error depends on its privacy parameter θ, and what it costs."""

    LAPLACE = "laplace"  # θ = ε; MSE = c/ε²; one Laplace event, b = Δ/ε
    DISCRETE_LAPLACE = "discrete_laplace"  # θ = ε; MSE = f/(2 sinh²(ε/(2Δ))); pure ε
    EXPONENTIAL = "exponential"  # θ = ε; MSE = c/ε²; exponential mechanism (ε²/8-zCDP)
    PURE = "pure"  # θ = ε; MSE = c/ε²; any other ε-DP mechanism
    MEAN_LAPLACE = "mean_laplace"  # θ = ε split between a Laplace sum and a Laplace count
    GAUSSIAN = "gaussian"  # θ = ρ; MSE = c/ρ; σ = Δ₂/√(2ρ)
    DISCRETE_GAUSSIAN = "discrete_gaussian"  # θ = ρ; MSE ≤ c/ρ (Canonne et al. 2020)


class Method(StrEnum):
    """How an allocation was found (shown to people in words by the app)."""

    CLOSED_FORM = "closed form"  # the exact optimum of a single-family workload
    DUAL = "dual"  # the Lagrangian dual, solved numerically
    EQUAL_SPLIT = "equal split"  # the equal split was better than the optimiser's answer
    EQUAL = "equal"  # the owner chose an equal split (:func:`allocate_equal`)
    PINNED = "pinned"  # every share was fixed by the owner (a manual split)
    TARGETS = "targets"  # target mode: the least shares meeting every target


_INV_SQ_FAMILIES = frozenset({Family.LAPLACE, Family.EXPONENTIAL, Family.PURE, Family.MEAN_LAPLACE})


_GAUSS_FAMILIES = frozenset({Family.GAUSSIAN, Family.DISCRETE_GAUSSIAN})


@dataclass(frozen=True, slots=True)
class Emission:
    """One privacy event an item of a family emits: its kind and its parameter as a
    function of θ (for a mean as sum / count, of θ and the sum's share ``split``)."""

    kind: type[PrivacyEvent]
    param: Callable[[FloatArray, FloatArray], FloatArray]
    discrete: bool = False


def _mean_count(t: FloatArray, sp: FloatArray) -> FloatArray:
    return np.asarray(1.0 / (t * np.maximum(1.0 - sp, 1e-300)), dtype=np.float64)


#: The events each family emits at θ (what the ledger records; the accountants' kernels
#: read them). A mean as sum / count with a split of 1 (no count part) emits one event;
#: its count emission is skipped where ``split`` is 1.
EMISSIONS: Final[dict[Family, tuple[Emission, ...]]] = {
    Family.LAPLACE: (Emission(LaplaceEvent, lambda t, sp: 1.0 / t),),
    Family.DISCRETE_LAPLACE: (Emission(PureEvent, lambda t, sp: t),),
    Family.PURE: (Emission(PureEvent, lambda t, sp: t),),
    Family.EXPONENTIAL: (Emission(ExponentialEvent, lambda t, sp: t),),
    Family.MEAN_LAPLACE: (
        Emission(LaplaceEvent, lambda t, sp: 1.0 / (t * sp)),
        Emission(LaplaceEvent, _mean_count),
    ),
    Family.GAUSSIAN: (Emission(GaussianEvent, lambda t, sp: 1.0 / np.sqrt(2.0 * t)),),
    Family.DISCRETE_GAUSSIAN: (Emission(GaussianEvent, lambda t, sp: 1.0 / np.sqrt(2.0 * t), discrete=True),),
}


@dataclass(frozen=True, slots=True)
class Item:
    """One query as the allocator sees it.

    Parameters
    ----------
    id : str
        The query's id.
    family : Family
        Noise family.
    coef : float
        The family's accuracy constant: MSE = coef/ε² (LAPLACE, EXPONENTIAL, PURE,
        MEAN_LAPLACE) or coef/ρ (GAUSSIAN families); for DISCRETE_LAPLACE the variance
        multiplier f.
    sensitivity : float
        Δ₁ (DISCRETE_LAPLACE); for MEAN_LAPLACE the sum's Δ (a). Unused otherwise.
    weight, error_scale : float
        Importance wᵢ ≥ 0 and the scale sᵢ > 0 the error is measured against.
    part_b : float
        MEAN_LAPLACE only: the count part's Δ times the bound on |mean| (b).
    pinned : float or None
        A fixed θ (the owner's "hold"); the rest is optimised around it.
    delta : float
        A fixed δ the item spends besides θ: the chance that a thresholded key release
        (DP partition selection) shows a key of a few rows. It is reserved from the total
        δ before the split (every rule composes it by addition), and the item's first event
        is recorded as a :class:`~planner.privacy.events.ThresholdedEvent` carrying it.
    """

    id: str
    family: Family
    coef: float
    sensitivity: float = 1.0
    weight: float = 1.0
    error_scale: float = 1.0
    part_b: float = 0.0
    pinned: float | None = None
    delta: float = 0.0

    def __post_init__(self) -> None:
        for name in ("coef", "sensitivity", "error_scale"):
            v = float(getattr(self, name))
            if not math.isfinite(v) or v <= 0:
                raise PlanError(f"query {self.id!r}: {name} must be > 0 and finite; got {v}.")
        if not math.isfinite(self.weight) or self.weight < 0:
            raise PlanError(
                f"query {self.id!r}: weight must be ≥ 0; got {self.weight}. Use 0 to ignore a query's error."
            )
        if self.pinned is not None and (not math.isfinite(self.pinned) or self.pinned <= 0):
            raise PlanError(f"query {self.id!r}: a pinned share must be > 0; got {self.pinned}.")
        if not (0.0 <= self.delta < 1.0) or (self.delta > 0.0 and self.is_gaussian):
            raise PlanError(f"query {self.id!r}: a fixed δ must be in [0, 1) on a pure item; got {self.delta}.")

    @property
    def is_gaussian(self) -> bool:
        return self.family in _GAUSS_FAMILIES


def _mean_split(item: Item) -> float:
    """Share of a MEAN_LAPLACE ε given to the sum: a^{2/3}/(a^{2/3}+b^{2/3}).

    Minimising 2a²/ε_s² + 2b²/ε_c² subject to ε_s + ε_c = ε (Lagrange:
    −4a²/ε_s³ + λ = −4b²/ε_c³ + λ ⇒ ε_s/ε_c = (a/b)^{2/3}) gives ε_s ∝ a^{2/3},
    ε_c ∝ b^{2/3} and MSE = 2(a^{2/3}+b^{2/3})³/ε² (Borealis AI's tutorial, example 4,
    with the split optimised; delta method for noisy sum / noisy count).
    """
    a = item.sensitivity ** (2 / 3)
    b = item.part_b ** (2 / 3)
    return a / (a + b) if b > 0 else 1.0


def item_mse(item: Item, theta: npt.ArrayLike) -> FloatArray:
    """Predicted MSE of the item at privacy parameter θ (vectorised)."""
    t = np.asarray(theta, dtype=np.float64)
    f = item.family
    if f in _INV_SQ_FAMILIES:
        return np.asarray(item.coef / t**2, dtype=np.float64)
    if f is Family.DISCRETE_LAPLACE:
        # Var of P(k) ∝ e^{−|k|/s}, s = Δ/ε: 2e^{−1/s}/(1−e^{−1/s})² = 1/(2 sinh²(ε/(2Δ))).
        return np.asarray(
            item.coef / (2.0 * np.sinh(t / (2.0 * item.sensitivity)) ** 2), dtype=np.float64
        )
    return np.asarray(item.coef / t, dtype=np.float64)


def _emissions(item: Item) -> tuple[Emission, ...]:
    ems = EMISSIONS[item.family]
    if item.family is Family.MEAN_LAPLACE and _mean_split(item) >= 1.0:
        return ems[:1]
    return ems


def item_events(item: Item, theta: float) -> list[PrivacyEvent]:
    """The privacy events the item emits at θ (what the ledger will record)."""
    t = np.array(float(theta))
    sp = np.array(_mean_split(item) if item.family is Family.MEAN_LAPLACE else 1.0)
    out: list[PrivacyEvent] = []
    for em in _emissions(item):
        x = float(em.param(t, sp))
        out.append(GaussianEvent(x, discrete=em.discrete) if em.kind is GaussianEvent else em.kind(x))  # type: ignore[call-arg]
    return out


@dataclass(frozen=True, slots=True)
class ItemAllocation:
    """One query's share: θ (ε or ρ), its standalone (ε, δ), ρ, error and ledger records."""

    id: str
    family: Family
    theta: float
    epsilon: float
    delta: float
    rho: float
    rmse: float
    weighted_mse: float
    spends: tuple[Spend, ...]

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        return tuple(s.event for s in self.spends)


@dataclass(frozen=True, slots=True)
class Allocation:
    """A workload's split of a total budget under one rule."""

    rule: CompositionRule
    epsilon: float
    delta: float
    used_epsilon: float
    objective: float
    method: Method
    items: tuple[ItemAllocation, ...]
    warnings: tuple[str, ...] = ()

    def spends(self) -> list[tuple[str, Spend]]:
        return [(it.id, s) for it in self.items for s in it.spends]

    @property
    def budget(self) -> Budget:
        """The budget this allocation splits (total ε, total δ, rule)."""
        return Budget(self.epsilon, self.delta, self.rule)


def reserved_delta(items: Sequence[Item]) -> float:
    """Σ of the items' fixed δ (key releases), reserved from the total before the split."""
    return math.fsum(i.delta for i in items)


def free_delta(items: Sequence[Item], delta: float) -> float:
    """The δ left for the split once the items' fixed δ is reserved; :class:`PlanError`
    saying what to change when the key releases alone need more than ``delta``."""
    d = check_delta(delta)
    r = reserved_delta(items)
    if r > d * (1.0 + 1e-9):
        keys = [i.id for i in items if i.delta > 0.0]
        raise PlanError(
            f"the key releases of {keys} need δ = {r:.3g} in all, more than the total δ = {d:.3g}; "
            "raise δ or lower those queries' key δ."
        )
    return max(d - r, 0.0)


def plan_warnings(epsilon: float, delta: float, n: int | None) -> tuple[str, ...]:
    """Legal but risky budgets (docs/mathematics.md §1; issue 4 item 5)."""
    out = []
    if epsilon > 10:
        out.append(
            f"total ε = {epsilon:g} is above 10: the guarantee is very weak (e^ε ≈ {math.exp(min(epsilon, 700)):.3g})."
        )
    if n is not None and n > 0 and delta >= 1.0 / n:
        out.append(
            f"δ = {delta:g} is at least 1/n = {1.0 / n:.3g}: a mechanism could publish a whole record; use δ ≪ 1/n."
        )
    return tuple(out)


def _weighted(w: FloatArray, mse: FloatArray) -> FloatArray:
    """wᵢ·MSEᵢ (θ of any leading shape), a weight-0 item counting 0 whatever its MSE (its
    share may be ~0 and its MSE ∞: 0·∞ made the objective NaN, found by fuzzing in session 9)."""
    return np.asarray(w * np.where(w > 0, mse, 0.0), dtype=np.float64)


def _weighted_sum(w: FloatArray, mse: FloatArray) -> float:
    """Σ wᵢ·MSEᵢ (:func:`_weighted`)."""
    return float(np.sum(_weighted(w, mse)))


@dataclass(frozen=True, slots=True)
class Target:
    """An error target: |error| ≤ ``bound`` with probability ≥ 1 − ``beta``.

    ``relative=True`` reads ``bound`` as a fraction of the item's error scale (e.g. 0.02
    for "within 2% of the declared scale").
    """

    bound: float
    beta: float = 0.05
    relative: bool = False
    min_theta: float | None = None  # the least θ meeting the target, when the caller knows it


@dataclass(frozen=True, slots=True)
class TargetPlan:
    """The least budget meeting every target."""

    rule: CompositionRule
    delta: float
    total_epsilon: float
    binding: str
    items: tuple[ItemAllocation, ...]
    cost_shares: dict[str, float]


def _error_bound(item: Item, theta: FloatArray, beta: float) -> FloatArray:
    """(1−β) error bound of the item at θ: exact for Laplace and Gaussian noise, the normal
    approximation for randomized response, and Chebyshev (√(MSE/β)) otherwise."""
    from planner.core import special
    mse = item_mse(item, theta)
    if item.family is Family.LAPLACE:
        return np.asarray(np.sqrt(mse / 2.0) * math.log(1.0 / beta))  # b ln(1/β), MSE = 2b²
    if item.is_gaussian:
        return np.asarray(np.sqrt(mse) * special.ndtri(1.0 - beta / 2.0))
    return np.asarray(np.sqrt(mse / beta))
