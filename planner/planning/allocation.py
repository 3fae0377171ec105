"""Splitting a total privacy budget across a workload (MATH.md §6).

Each query of a workload is reduced to an :class:`Item`: a *noise family* (how its
error depends on its privacy parameter θ, and which privacy events it emits), its
sensitivity, an importance weight and an optional error scale (so a count and a mean can
share a budget fairly). θ is the query's pure ε for pure mechanisms and its zCDP ρ for
Gaussian ones.

Weighted mode minimises Σ wᵢ·MSEᵢ(θᵢ)/sᵢ² subject to the composed budget ≤ (ε, δ)
under a :class:`~planner.privacy.accounting.CompositionRule`:

* closed forms where they exist — Laplace-type under basic composition,
  εᵢ ∝ (wᵢ cᵢ)^{1/3} (cᵢ = MSE·ε²), and Gaussian under zCDP, ρᵢ ∝ √(wᵢ cᵢ);
* otherwise SLSQP on log θ starting from the rule's surrogate closed form, with the exact
  composed ε as the constraint (RDP: the envelope gradient at the optimal order).

Every answer is then scaled by one common factor, by bisection on the exact accountant
(:func:`planner.privacy.accounting.total_epsilon`, the function the ledger uses), so the budget
is met to within 1e-9 relative and never exceeded; and it is compared with the equal
split, the better of the two being returned.

The optimal rule (``pld``, privacy loss distributions) has no separable surrogate, so the
allocation is *optimised under the RDP surrogate and fitted exactly to the PLD accountant*:
the RDP-optimal shares are scaled by the one factor that makes their PLD cost equal the
budget. The PLD accountant never charges more than RDP, so that factor is ≥ 1: every share
grows, every error shrinks, and the answer is never worse than the RDP rule's. It is not
the PLD optimum (which would need the PLD's gradient), only its RDP-shaped approximation:
on 25 random two-query workloads its weighted error was at most 0.16% above a brute-force
search of the split (``tests/engine/test_allocation.py``). The accountant's grid moves with
the shares, so the PLD cost of the scaled shares is not continuous: the fit lands within
~1e-7 of the budget (never above it) rather than 1e-9, and where the cost jumps across the
budget it keeps the feasible side, up to ~2e-4 below (fuzzing found 1.4e-4 in 2 of 2,736
random workloads).

Target mode returns, for per-query error targets, the least θ meeting each target and the
total ε this costs under the rule.

References
----------
.. [L21] MATH.md §6 (closed forms); the Lagrangian of Σ wᵢcᵢ/εᵢ² + λΣεᵢ gives
   εᵢ³ = 2wᵢcᵢ/λ; of Σ wᵢcᵢ/ρᵢ + λΣρᵢ gives ρᵢ² = wᵢcᵢ/λ.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from typing import Final, cast

import numpy as np
import numpy.typing as npt

from planner.core.errors import PlanError
from planner.core.rootfind import brentq

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py). The one
# root found on the release path uses SciPy's compiled routine without importing
# scipy.optimize (planner/core/rootfind.py).
from planner.privacy.accountants import accountant, total_epsilon
from planner.privacy.accountants.advanced import advanced_total, kov_root_term
from planner.privacy.accountants.base import Spend
from planner.privacy.accountants.basic import epsilon_array
from planner.privacy.accountants.pure import pure_epsilon
from planner.privacy.accountants.rdp import rdp_array, rdp_epsilon
from planner.privacy.accountants.zcdp import (
    conversion,
    rho_array,
    zcdp_epsilon,
    zcdp_to_approx_epsilon,
)
from planner.privacy.accounting import total_assigned_epsilon
from planner.privacy.budget import DEFAULT_ORDERS, CompositionRule, check_delta, check_epsilon
from planner.privacy.events import (
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
    ThresholdedEvent,
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


# --------------------------------------------------------------------------------------
# Family formulas (vectorised over θ for one item)
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Vectorised workload costs: the accountants' own kernels on the items' events
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Workload:
    items: tuple[Item, ...]
    fam: tuple[Family, ...]
    w: FloatArray  # wᵢ/sᵢ²
    gauss: npt.NDArray[np.bool_]
    split: FloatArray  # MEAN_LAPLACE sum share (1 elsewhere)
    delta_i: float  # δ given to each Gaussian item under basic/advanced
    delta_prime: float  # advanced composition slack δ'
    masks: dict[Family, npt.NDArray[np.bool_]] = field(default_factory=dict)

    @classmethod
    def build(
        cls, items: Sequence[Item], rule: CompositionRule, delta: float, gauss_delta_share: float
    ) -> _Workload:
        fam = tuple(i.family for i in items)
        gauss = np.array([i.is_gaussian for i in items], dtype=bool)
        n_g = int(gauss.sum())
        # (1 − 1e-12): Σδᵢ must not exceed δ by a rounding error.
        if rule is CompositionRule.BASIC:
            delta_i = delta / n_g * (1 - 1e-12) if n_g else 0.0
            delta_prime = 0.0
        elif rule is CompositionRule.ADVANCED:
            share = gauss_delta_share if n_g else 0.0
            delta_i = delta * share / n_g * (1 - 1e-12) if n_g else 0.0
            delta_prime = delta * (1.0 - share)
        else:
            delta_i, delta_prime = 0.0, 0.0
        masks = {f: np.array([x is f for x in fam], dtype=bool) for f in Family}
        return cls(
            items=tuple(items),
            fam=fam,
            w=np.array([i.weight / i.error_scale**2 for i in items], dtype=np.float64),
            gauss=gauss,
            split=np.array(
                [_mean_split(i) if i.family is Family.MEAN_LAPLACE else 1.0 for i in items]
            ),
            delta_i=delta_i,
            delta_prime=delta_prime,
            masks=masks,
        )

    @cached_property
    def groups(self) -> list[tuple[Emission, npt.NDArray[np.intp]]]:
        """Each emission of each family, with the columns of the items that emit it."""
        out = []
        for f in Family:
            cols = np.flatnonzero(self.masks[f])
            if not cols.size:
                continue
            for j, em in enumerate(EMISSIONS[f]):
                if f is Family.MEAN_LAPLACE and j == 1:
                    cols = cols[self.split[cols] < 1.0]  # a mean whose count part is free
                    if not cols.size:
                        continue
                out.append((em, cols))
        return out

    @cached_property
    def inv_sq(self) -> npt.NDArray[np.intp]:
        m = self.masks
        return np.flatnonzero(m[Family.LAPLACE] | m[Family.EXPONENTIAL] | m[Family.PURE] | m[Family.MEAN_LAPLACE])

    @cached_property
    def coef(self) -> FloatArray:
        return np.array([i.coef for i in self.items], dtype=np.float64)

    @cached_property
    def sens(self) -> FloatArray:
        return np.array([i.sensitivity for i in self.items], dtype=np.float64)

    def _params(self, em: Emission, cols: npt.NDArray[np.intp], th: FloatArray) -> FloatArray:
        return np.asarray(em.param(th[..., cols], self.split[cols]), dtype=np.float64)

    def mse(self, theta: FloatArray) -> FloatArray:
        """Per-item MSE (:func:`item_mse`, vectorised); θ of shape (..., n)."""
        th = np.asarray(theta, dtype=np.float64)
        out = np.empty_like(th)
        c, s = self.coef, self.sens
        with np.errstate(over="ignore", divide="ignore"):
            i = self.inv_sq
            out[..., i] = c[i] / th[..., i] ** 2
            i = np.flatnonzero(self.masks[Family.DISCRETE_LAPLACE])
            out[..., i] = c[i] / (2.0 * np.sinh(th[..., i] / (2.0 * s[i])) ** 2)
            i = np.flatnonzero(self.gauss)
            out[..., i] = c[i] / th[..., i]
        return out

    def rdp(self, th: FloatArray, alpha: FloatArray) -> FloatArray:
        """Per-item RDP at orders ``alpha`` (shape (A, 1)), θ of shape (..., A, n): the RDP
        accountant's kernel on each emitted event, summed per item."""
        out = np.zeros_like(th)
        for em, cols in self.groups:
            out[..., cols] += rdp_array(em.kind, self._params(em, cols, th), alpha)
        return out

    def objective(self, theta: FloatArray) -> float:
        return _weighted_sum(self.w, self.mse(theta))

    def eps_i(self, theta: FloatArray) -> FloatArray:
        """Per-item standalone ε (Gaussians at their δᵢ): the basic accountant's kernel,
        summed over each item's events; θ of shape (..., n)."""
        th = np.asarray(theta, dtype=np.float64)
        out = np.zeros_like(th)
        for em, cols in self.groups:
            out[..., cols] += epsilon_array(em.kind, self._params(em, cols, th), self.delta_i, discrete=em.discrete)
        return out

    def rho_i(self, theta: FloatArray) -> FloatArray:
        """Per-item ρ: the zCDP accountant's kernel, summed over each item's events."""
        th = np.asarray(theta, dtype=np.float64)
        out = np.zeros_like(th)
        for em, cols in self.groups:
            out[..., cols] += rho_array(em.kind, self._params(em, cols, th))
        return out

    def pure_total(self, theta: FloatArray) -> float:
        return math.inf if self.gauss.any() else float(theta.sum())

    def zcdp_epsilon(self, theta: FloatArray, delta: float) -> float:
        """The zCDP accountant's ε of the items' events at θ: each pure event (a mean's sum
        and count separately) by its ρ or its ε (:func:`~planner.privacy.accountants.zcdp.zcdp_epsilon`
        on the kernels' per-event ε and ρ, exactly what the accountant computes)."""
        th = np.asarray(theta, dtype=np.float64)
        pe: list[FloatArray] = []
        pr: list[FloatArray] = []
        other = 0.0
        for em, cols in self.groups:
            x = self._params(em, cols, th)
            rho = rho_array(em.kind, x)
            if em.kind is GaussianEvent:
                other += float(rho.sum())
            else:
                pe.append(epsilon_array(em.kind, x))
                pr.append(rho)
        eps = np.concatenate(pe) if pe else np.zeros(0)
        rhos = np.concatenate(pr) if pr else np.zeros(0)
        return zcdp_epsilon(eps, rhos, other, delta)


class _Cost:
    """Fast composed ε of a workload under a rule: the accountants' own functions (for
    RDP on a coarser order grid, so never below the exact value)."""

    def __init__(self, wl: _Workload, rule: CompositionRule, delta: float) -> None:
        self.wl, self.rule, self.delta = wl, _surrogate_rule(rule), delta
        self.orders = np.asarray(DEFAULT_ORDERS[::4])
        self.conv = conversion(self.orders, 0.0, math.log(delta)) if delta > 0 else None

    def value(self, theta: FloatArray) -> float:
        wl = self.wl
        if self.rule is CompositionRule.BASIC:
            return float(wl.eps_i(theta).sum())
        if self.rule is CompositionRule.ADVANCED:
            return advanced_total(wl.eps_i(theta), wl.delta_prime)
        if self.rule is CompositionRule.ZCDP:
            return wl.zcdp_epsilon(theta, self.delta)
        if self.conv is None:
            return wl.pure_total(theta)
        th = np.broadcast_to(theta, (self.orders.size, theta.size))
        curve = wl.rdp(th, self.orders[:, None]).sum(axis=1) + self.conv
        return min(float(curve.min()), wl.pure_total(theta))


# --------------------------------------------------------------------------------------
# Public results
# --------------------------------------------------------------------------------------


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


def _finish(
    wl: _Workload,
    theta: FloatArray,
    rule: CompositionRule,
    epsilon: float,
    delta: float,
    method: Method,
    warnings: tuple[str, ...],
) -> Allocation:
    rho_i = wl.rho_i(theta)
    mse = wl.mse(theta)
    weighted = _weighted(wl.w, mse)
    items = []
    assigned = _assigned(wl, theta, delta)  # δ here is what is left once key releases are reserved
    for k, item in enumerate(wl.items):
        spends = tuple(Spend(e, x, d) for e, x, d in assigned[k])
        if item.delta > 0.0:
            first = spends[0]
            spends = (Spend(ThresholdedEvent(first.event, item.delta), first.epsilon, first.delta + item.delta),
                      *spends[1:])
        items.append(
            ItemAllocation(
                id=item.id,
                family=item.family,
                theta=float(theta[k]),
                epsilon=float(sum(x.epsilon for x in spends)),
                delta=float(sum(x.delta for x in spends)),
                rho=float(rho_i[k]),
                rmse=float(math.sqrt(mse[k])),
                weighted_mse=float(weighted[k]),
                spends=spends,
            )
        )
    total_delta = delta + reserved_delta(wl.items)
    alloc = Allocation(
        rule, epsilon, total_delta, 0.0, float(np.sum(weighted)), method, tuple(items), warnings
    )
    used = float(total_epsilon([s for _, s in alloc.spends()], rule, total_delta))
    return replace(alloc, used_epsilon=used)


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


# --------------------------------------------------------------------------------------
# The optimiser
# --------------------------------------------------------------------------------------


def _validate(items: Sequence[Item], epsilon: float, delta: float, rule: CompositionRule) -> None:
    if not items:
        raise PlanError("the workload is empty; add at least one query.")
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        dups = sorted({i for i in ids if ids.count(i) > 1})
        raise PlanError(f"item ids must be unique; {dups} appear more than once: rename the queries they name.")
    check_epsilon(epsilon)
    check_delta(delta)
    if any(i.is_gaussian for i in items) and delta == 0.0:
        raise PlanError(
            "Gaussian mechanisms need δ > 0; set a δ such as 1e-6 or switch those queries to Laplace."
        )
    if rule is CompositionRule.ZCDP and delta == 0.0 and any(i.is_gaussian for i in items):
        raise PlanError("zCDP with δ = 0 cannot convert to (ε, δ); set δ > 0.")


def plan_warnings(epsilon: float, delta: float, n: int | None) -> tuple[str, ...]:
    """Legal but risky budgets (MATH.md §1; issue 4 item 5)."""
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


def _unreachable(free: npt.NDArray[np.bool_], target: float) -> PlanError:
    """Why no factor brings the cost down to the budget: the pinned shares, or (nothing
    pinned) an accountant whose bound has a floor above it (RDP's orders stop at 4e5: about
    3.4e-5 at δ = 1e-12, found by fuzzing in session 9)."""
    if not bool(np.all(free)):
        return PlanError("the pinned shares alone exceed the total budget; lower them or raise ε.")
    return PlanError(f"ε = {target:g} is below the least ε this rule can certify for these queries at this δ, "
                     "however little each one gets; raise ε or δ, or choose the zcdp or basic rule.")


def _scale_to_budget(
    cost: Callable[[FloatArray], float],
    theta: FloatArray,
    free: npt.NDArray[np.bool_],
    target: float,
    width: float = 1.0,
) -> FloatArray:
    """Multiply the free θ by one factor so the exact cost equals target (never above).

    Brent's method on the log factor (the cost is increasing in it), then a few ulp-sized
    steps down until the cost is ≤ target: the result is feasible and within ~1e-12 of it.
    """
    def at(log_f: float) -> FloatArray:
        t = theta.copy()
        t[free] = theta[free] * math.exp(log_f)
        return t

    def g(log_f: float) -> float:
        return cost(at(log_f)) - target

    lo, hi = -width, width
    while g(lo) > 0:
        lo *= 2.0
        if lo < -700:
            raise _unreachable(free, target)
    while g(hi) <= 0:
        hi *= 2.0
        if hi > 700:
            return at(hi)
    root = brentq(g, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=200)
    step = 1e-14
    while g(root) > 0:
        root -= step
        step *= 2.0
    return at(root)


def _scale_by_secant(
    cost: Callable[[FloatArray], float],
    theta: FloatArray,
    free: npt.NDArray[np.bool_],
    target: float,
    rel_tol: float = 1e-9,
    max_evals: int = 14,
) -> FloatArray:
    """:func:`_scale_to_budget` for an expensive cost (the PLD accountant): regula falsi
    (Illinois) on (log factor, ln cost), started from a secant step, stopping when the
    feasible end is within ``rel_tol`` of the target or after ``max_evals`` costs.

    The result is always feasible (cost ≤ target): the feasible end of the bracket.
    """

    def at(u: float) -> FloatArray:
        t = theta.copy()
        t[free] = theta[free] * math.exp(u)
        return t

    log_t = math.log(target)

    def g(u: float) -> float:
        c = cost(at(u))
        return (math.log(c) if c > 0 else -math.inf) - log_t

    u_ok, g_ok = 0.0, g(0.0)
    evals = 1
    while g_ok > 0:  # over budget: step down (PLD ≤ RDP makes this rare)
        u_ok -= max(g_ok, 1e-3) * 2.0
        g_ok = g(u_ok)
        evals += 1
        if u_ok < -700:
            raise _unreachable(free, target)
    # find an over-budget point by secant steps (slope ≥ ~0.5 for every family)
    u_bad, g_bad = math.nan, math.nan
    slope = 1.0
    while not math.isfinite(u_bad):
        # a cost of 0 (δ covers the whole difference, under PLD) has no log: step up e-fold
        u_new = u_ok - g_ok / slope * 1.02 + 1e-12 if math.isfinite(g_ok) else u_ok + 1.0
        g_new = g(u_new)
        evals += 1
        if g_new > 0:
            u_bad, g_bad = u_new, g_new
        else:
            if u_new > u_ok and g_new > g_ok:
                slope = max((g_new - g_ok) / (u_new - u_ok), 1e-3)
            u_ok, g_ok = u_new, g_new
            if -g_ok <= rel_tol:
                return at(u_ok)
        if evals > 60:
            return at(u_ok)
    w_ok, w_bad = g_ok, g_bad  # Illinois weights (the true values stay in g_ok, g_bad)
    side = 0
    while evals < max_evals and -g_ok > rel_tol and u_bad - u_ok > 1e-14:
        width = u_bad - u_ok
        u = u_ok - w_ok * width / (w_bad - w_ok) if math.isfinite(w_ok) else u_ok + width / 2.0
        u = min(max(u, u_ok + width * 1e-3), u_bad - width * 1e-3)
        gu = g(u)
        evals += 1
        if gu > 0:
            u_bad, g_bad, w_bad = u, gu, gu
            if side == 1:
                w_ok /= 2.0
            side = 1
        else:
            u_ok, g_ok, w_ok = u, gu, gu
            if side == -1:
                w_bad /= 2.0
            side = -1
    return at(u_ok)


def _weighted(w: FloatArray, mse: FloatArray) -> FloatArray:
    """wᵢ·MSEᵢ (θ of any leading shape), a weight-0 item counting 0 whatever its MSE (its
    share may be ~0 and its MSE ∞: 0·∞ made the objective NaN, found by fuzzing in session 9)."""
    return np.asarray(w * np.where(w > 0, mse, 0.0), dtype=np.float64)


def _weighted_sum(w: FloatArray, mse: FloatArray) -> float:
    """Σ wᵢ·MSEᵢ (:func:`_weighted`)."""
    return float(np.sum(_weighted(w, mse)))


def _surrogate(wl: _Workload, rule: CompositionRule) -> FloatArray:
    """Closed-form shape of the allocation (exact for single-family workloads).

    Basic: pure θᵢ ∝ (wᵢcᵢ)^{1/3}; Gaussian items use the zCDP form ρᵢ ∝ √(wᵢcᵢ), their
    ρ scale tied to the pure ones by ρ = ε²/2. Other rules: ρᵢ ∝ √(wᵢ kᵢ) with kᵢ the
    MSE·ρ constant (pure: cᵢ/2, exponential: cᵢ/8).
    """
    c = np.empty(len(wl.items))
    for k, item in enumerate(wl.items):
        if item.family is Family.DISCRETE_LAPLACE:
            c[k] = 2.0 * item.sensitivity**2 * item.coef  # small-ε limit of f/(2 sinh²(ε/2Δ))
        else:
            c[k] = item.coef
    # a zero weight still needs a positive share: give it a tiny one (only zero weights —
    # relative error scales make real weights span many decades)
    w = np.where(wl.w > 0, wl.w, 1e-12 * max(float(wl.w.max()), 1e-300))
    theta = np.empty(len(wl.items))
    pure = ~wl.gauss
    if rule in (CompositionRule.BASIC, CompositionRule.ADVANCED):
        theta[pure] = (w[pure] * c[pure]) ** (1 / 3)
        theta[wl.gauss] = np.sqrt(w[wl.gauss] * c[wl.gauss])
    else:
        kk = c.copy()
        kk[pure] = c[pure] / 2.0
        kk[wl.masks[Family.EXPONENTIAL]] = c[wl.masks[Family.EXPONENTIAL]] / 8.0
        rho = np.sqrt(w * kk)
        theta[pure] = np.sqrt(2.0 * rho[pure])
        theta[wl.masks[Family.EXPONENTIAL]] = np.sqrt(8.0 * rho[wl.masks[Family.EXPONENTIAL]])
        theta[wl.gauss] = rho[wl.gauss]
    return theta


def _surrogate_rule(rule: CompositionRule) -> CompositionRule:
    """The rule whose fast cost and dual stand in for ``rule`` while optimising (PLD: RDP)."""
    return CompositionRule.RDP if rule is CompositionRule.PLD else rule


def _closed_form_applies(wl: _Workload, rule: CompositionRule) -> bool:
    fams = set(wl.fam)
    inv_sq = {Family.LAPLACE, Family.EXPONENTIAL, Family.PURE, Family.MEAN_LAPLACE}
    if rule is CompositionRule.BASIC and fams <= inv_sq:
        return True
    return rule is CompositionRule.ZCDP and fams <= _GAUSS_FAMILIES


class _Dual:
    """Lagrangian dual of the allocation, vectorised over items and over a batch of
    parameters (Rényi orders α for RDP, or one row for the other rules).

    For a constraint that is separable — Σᵢ cᵢ(θᵢ) ≤ B — the optimum satisfies, for one
    multiplier μ > 0, θᵢ = argmin_θ wᵢMSEᵢ(θ) + μ cᵢ(θ) (KKT; both terms are convex in
    u = log θ). The per-item problems are solved by safeguarded Newton steps in u
    (derivatives by central differences), μ by a secant search on (log μ, log Σcᵢ), which
    is linear for power-law families. The rules reduce to that form:

    * basic: cᵢ = εᵢ(θᵢ) (pure ε, or a Gaussian's ε at its δᵢ), B = ε;
    * zCDP: cᵢ = ρᵢ(θᵢ), B = the ρ whose (ε, δ) conversion is ε;
    * RDP: at each order α, cᵢ = εᵢ(α) and B(α) = ε − conversion(α) (Canonne, Kamath &
      Steinke 2020, Prop. 12); the feasible set is the union over α, so the optimum is the
      best α — searched on the order grid, then refined;
    * advanced (KOV Thm 3.5): Σ εᵢtanh(εᵢ/2) + h(S), S = Σεᵢ², h the better of the
      theorem's two square-root terms (:func:`~planner.privacy.accounting.kov_root_term`); h is
      replaced by its tangent at the current S (an upper bound, h being concave, so every
      iterate is feasible), cᵢ = εᵢtanh(εᵢ/2) + h′(S)εᵢ², iterated to a fixed point.
    """

    H = 1e-4

    def __init__(self, wl: _Workload, free: npt.NDArray[np.bool_]) -> None:
        self.wl = wl
        self.free = free

    def f(self, theta: FloatArray) -> FloatArray:
        """Weighted MSE wᵢ·MSEᵢ/sᵢ²; θ of shape (..., n)."""
        return _weighted(self.wl.w, self.wl.mse(theta))

    def rdp(self, th: FloatArray, alpha: FloatArray) -> FloatArray:
        return self.wl.rdp(th, alpha)

    def argmin(
        self,
        mu: FloatArray,
        cost: Callable[[FloatArray], FloatArray],
        u: FloatArray,
        rows: npt.NDArray[np.bool_] | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        """θ = argmin f + μ·c per item (free items of the active ``rows`` only change), by
        Newton in log θ.

        Returns ``(u, dtotal)``: u = log θ and, per row, d(Σ_free cᵢ)/d(log μ) at the
        solution (implicit differentiation of the stationarity condition f′ + μc′ = 0:
        du/d(log μ) = −μc′/(f″ + μc″)), which drives the multiplier's Newton step.
        """
        h = self.H
        free = self.free if rows is None else self.free & rows[:, None]
        shifts = np.array([-h, 0.0, h]).reshape((3,) + (1,) * u.ndim)
        dc = d2 = np.zeros_like(u)
        for _ in range(60):
            # the three stencil points in one batch (one call of each cost function)
            th = np.exp(u + shifts)
            fs, cs = self.f(th), cost(th)
            gm, g0, gp = fs + mu * cs
            dc = (cs[2] - cs[0]) / (2 * h)
            d1 = (gp - gm) / (2 * h)
            d2 = (gp - 2 * g0 + gm) / h**2
            with np.errstate(divide="ignore", invalid="ignore"):
                step = np.where(d2 > 0, -d1 / d2, -np.sign(d1) * 0.5)
            step = np.clip(np.nan_to_num(step), -2.0, 2.0)
            step = np.where(free, step, 0.0)
            u = u + step
            if float(np.max(np.abs(step))) < 1e-7:
                break
        with np.errstate(divide="ignore", invalid="ignore"):
            du = np.where(self.free & (d2 > 0), -mu * dc / d2, 0.0)
        return u, np.asarray(np.sum(np.nan_to_num(dc * du), axis=-1, keepdims=True))

    def solve(
        self, cost: Callable[[FloatArray], FloatArray], budget: FloatArray, u0: FloatArray
    ) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """For each row r, the u with Σ_free cᵢ = budget[r] at the KKT point; rows with
        budget ≤ 0 are marked infeasible.

        The multiplier is found by safeguarded Newton on log Σcᵢ − log budget as a function
        of log μ (decreasing): Newton steps from :meth:`argmin`'s derivative, kept inside
        the bracket found so far, bisection or a step of e² outside it.
        """
        free = self.free
        ok = budget > 0
        lb = np.log(np.where(ok, budget, 1.0))[:, None]

        def total(v: FloatArray) -> FloatArray:
            return np.asarray(np.sum(np.where(free, cost(np.exp(v)), 0.0), axis=-1, keepdims=True))

        # μ from the KKT ratio at the start point: μ = −f'(u)/c'(u), median over free items
        h = self.H
        th2 = np.exp(u0 + np.array([-h, h]).reshape((2,) + (1,) * u0.ndim))
        fm, fp = self.f(th2)
        cm, cp = cost(th2)
        df, dc = (fp - fm) / (2 * h), (cp - cm) / (2 * h)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(free & (dc > 0), -df / dc, np.nan)
            lmu = np.log(
                np.clip(
                    np.nan_to_num(np.nanmedian(ratio, axis=-1, keepdims=True), nan=1.0),
                    1e-300,
                    1e300,
                )
            )
        lo = np.full(lmu.shape, -np.inf)  # log μ known to give a total above the budget
        hi = np.full(lmu.shape, np.inf)  # ... and below it
        active = ok.copy()
        u = u0
        u_under = u0.copy()  # the last iterate under budget, for rows that never converge
        for _ in range(100):
            u, dtot = self.argmin(np.exp(lmu), cost, u, active)
            t = total(u)
            with np.errstate(divide="ignore", invalid="ignore"):
                fval = np.log(t) - lb
            u_under = np.where(active[:, None] & (fval < 0), u, u_under)
            lo = np.where(fval > 0, lmu, lo)
            hi = np.where(fval < 0, lmu, hi)
            # A per-item minimiser can jump between two local minima as μ moves (the RDP
            # of a clipped or two-part Laplace is not convex in log θ): the total then
            # skips over the budget and the bracket collapses without converging.
            collapsed = (hi[:, 0] - lo[:, 0]) < 1e-12 * np.maximum(1.0, np.abs(lmu[:, 0]))
            done = np.abs(fval[:, 0]) < 1e-9
            active = active & ~done & ~collapsed
            if not active.any():
                break
            with np.errstate(divide="ignore", invalid="ignore"):
                cand = lmu - np.clip(fval * t / dtot, -8.0, 8.0)
            inside = np.isfinite(cand) & (dtot < 0) & (cand > lo) & (cand < hi)
            bracketed = np.isfinite(lo) & np.isfinite(hi)
            fallback = np.where(bracketed, (lo + hi) / 2, np.where(fval > 0, lmu + 2.0, lmu - 2.0))
            lmu = np.where(active[:, None], np.where(inside, cand, fallback), lmu)
        # rows left over budget (collapsed bracket or out of iterations) take their last
        # iterate under budget: feasible, a little below the budget
        over = ok & ~(np.abs(fval[:, 0]) < 1e-9) & (fval[:, 0] > 0) & np.isfinite(hi[:, 0])
        return np.where(over[:, None], u_under, u), ok


def _dual_allocation(
    wl: _Workload,
    rule: CompositionRule,
    epsilon: float,
    delta: float,
    free: npt.NDArray[np.bool_],
    start: FloatArray,
) -> FloatArray:
    """The allocation by the dual method (see :class:`_Dual`); θ of shape (n,)."""
    return np.asarray(
        _dual_batch(wl, rule, np.array([epsilon]), delta, free, start)[0], dtype=np.float64
    )


_PINNED_OVER_BUDGET: Final = "the pinned shares alone use the whole budget; lower them or raise ε."


def _dual_batch(
    wl: _Workload,
    rule: CompositionRule,
    epsilons: FloatArray,
    delta: float,
    free: npt.NDArray[np.bool_],
    start: FloatArray,
) -> FloatArray:
    """Optimal θ for each total ε in ``epsilons`` (one row each), shape (E, n).

    ``start`` (shape (n,)) holds the pinned items' θ and a starting shape for the others.
    Dispatches on the rule: :func:`_dual_basic` (also RDP at δ = 0), :func:`_dual_zcdp`,
    :func:`_dual_advanced` and :class:`_RdpOrderSearch`.
    """
    d = _Dual(wl, free)
    u0 = np.broadcast_to(np.log(start), (epsilons.size, start.size)).copy()
    if rule is CompositionRule.BASIC or (rule is CompositionRule.RDP and delta == 0.0):
        return _dual_basic(d, epsilons, start, u0)
    if rule is CompositionRule.ZCDP:
        return _dual_zcdp(d, epsilons, delta, start, u0)
    if rule is CompositionRule.ADVANCED:
        return _dual_advanced(d, epsilons, delta, start)
    return _RdpOrderSearch(d, epsilons, delta, start).run(u0)


def _dual_basic(d: _Dual, epsilons: FloatArray, start: FloatArray, u0: FloatArray) -> FloatArray:
    """Basic composition: cᵢ = εᵢ(θᵢ) (pure ε, or a Gaussian's ε at its δᵢ) and
    B = ε − Σ_pinned εᵢ; shape (E, n).

    Raises
    ------
    PlanError
        If the pinned items alone use the whole budget of some row.
    """
    wl = d.wl

    def c_basic(th: FloatArray) -> FloatArray:
        return wl.eps_i(th)

    budget = epsilons - float(c_basic(start[None, :])[0][~d.free].sum())
    u, ok = d.solve(c_basic, budget, u0)
    if not ok.all():
        raise PlanError(_PINNED_OVER_BUDGET)
    return np.asarray(np.exp(u))


def _dual_zcdp(
    d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray, u0: FloatArray
) -> FloatArray:
    """zCDP: cᵢ = ρᵢ(θᵢ) and B = the ρ whose (ε, δ) conversion is ε, less the pinned ρᵢ;
    shape (E, n).

    The zCDP accountant counts pure events by ε where that is cheaper
    (:func:`~planner.privacy.accountants.zcdp.zcdp_epsilon`), so two more splits are feasible: all
    by basic composition (all-pure workloads), and pure items by ε beside Gaussians by ρ
    (:func:`_zcdp_hybrid`, the best division of ε between them). The better of the
    feasible splits is returned, row by row.

    Raises
    ------
    PlanError
        If the pinned items alone use the whole budget of some row.
    """
    wl, free = d.wl, d.free

    def c_z(th: FloatArray) -> FloatArray:
        return wl.rho_i(th)

    budget = _rho_for_epsilon(epsilons, delta) - float(wl.rho_i(start)[~free].sum())
    u, ok = d.solve(c_z, budget, u0)
    if not ok.all():
        raise PlanError(_PINNED_OVER_BUDGET)
    theta = np.exp(u)
    if not wl.gauss.any():
        cand = _dual_batch(wl, CompositionRule.BASIC, epsilons, delta, free, start)
    elif free.all() and not wl.gauss.all():
        cand = _zcdp_hybrid(wl, epsilons, delta, start)
    else:
        return np.asarray(theta)
    better = np.sum(d.f(cand), axis=1) < np.sum(d.f(theta), axis=1)
    return np.asarray(np.where(better[:, None], cand, theta))


def _dual_advanced(d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray) -> FloatArray:
    """Advanced composition (Kairouz, Oh & Viswanath 2015, Thm 3.5); shape (E, n).

    The accountant takes min(basic, KOV), so the basic split is always feasible too: the
    KOV split (:func:`_kov_allocation`) is kept only in the rows where it solved and is
    better.
    """
    wl = d.wl
    basic = _dual_batch(wl, CompositionRule.BASIC, epsilons, delta, d.free, start)
    if wl.delta_prime <= 0:
        return basic
    kov, solved = _kov_allocation(wl, d, epsilons, basic)
    better = solved & (np.sum(d.f(kov), axis=1) < np.sum(d.f(basic), axis=1))
    return np.asarray(np.where(better[:, None], kov, basic))


class _RdpOrderSearch:
    """RDP allocation: the optimum over Rényi orders α, for a batch of total ε.

    At each order α the constraint is separable, cᵢ = εᵢ(α) and B(α) = ε − conversion(α)
    (Canonne, Kamath & Steinke 2020, Prop. 12), and the feasible set is the union over α,
    so the optimum is the best α. A coarse batch of orders for every ε (:meth:`coarse`),
    then bisection in log(α − 1) between the best one and the neighbour it points to
    (:meth:`refine`). The direction is the sign of dV/dα, V(α) the optimal objective at
    order α: by the envelope theorem dV/dα = μ·∂/∂α[Σᵢ εᵢ(α; θ*) + conversion(α)] at the
    solution θ*(α), μ > 0, so it is read off the cost at fixed θ (a central difference,
    no extra solve).
    """

    def __init__(self, d: _Dual, epsilons: FloatArray, delta: float, start: FloatArray) -> None:
        self.d = d
        self.epsilons = epsilons
        self.delta = delta
        self.start = start
        self.log_delta = math.log(delta)
        self.n_e = epsilons.size

    def conv(self, orders: FloatArray) -> FloatArray:
        """The RDP → (ε, δ) conversion term at each order (:func:`conversion`)."""
        return conversion(orders, 0.0, self.log_delta)

    def solve_at(
        self, alpha: FloatArray, u_start: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Solve every row at its order (``alpha`` shape (R,)); returns (u, objective, dV/dα sign)."""
        d, start = self.d, self.start
        a = alpha[:, None]
        n_r = alpha.size
        eps_r = self.epsilons[np.arange(n_r) % self.n_e]
        fixed_r = np.sum(
            np.where(~d.free, d.rdp(np.broadcast_to(start, (n_r, start.size)).copy(), a), 0.0),
            axis=1,
        )
        u, ok = d.solve(lambda th: d.rdp(th, a), eps_r - self.conv(alpha) - fixed_r, u_start)
        obj = np.where(ok, np.sum(d.f(np.exp(u)), axis=1), np.inf)
        x, h = np.log(alpha - 1.0), 1e-4
        ap, am = 1.0 + np.exp(x + h), 1.0 + np.exp(x - h)
        th = np.exp(u)
        slope = (d.rdp(th, ap[:, None]).sum(axis=1) + self.conv(ap)) - (
            d.rdp(th, am[:, None]).sum(axis=1) + self.conv(am)
        )
        return u, obj, slope

    def run(self, u0: FloatArray) -> FloatArray:
        """θ for each total ε, shape (E, n): the best order, then the basic split where it
        is better (all pure: RDP's ε is min(conversion, Σε), so the basic split is
        feasible too) or where no order was feasible."""
        best_obj, best_u = self.refine(*self.coarse(u0))
        theta = np.exp(best_u)
        d = self.d
        wl = d.wl
        if not wl.gauss.any() or not np.all(np.isfinite(best_obj)):
            basic = _dual_batch(
                wl, CompositionRule.BASIC, self.epsilons, self.delta, d.free, self.start
            )
            better = np.sum(d.f(basic), axis=1) < np.where(
                np.isfinite(best_obj), np.sum(d.f(theta), axis=1), np.inf
            )
            theta = np.where(better[:, None], basic, theta)
        return np.asarray(theta)

    def coarse(
        self, u0: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """Solve on every 120th order of :data:`DEFAULT_ORDERS`; returns, per ε row, the best
        objective and its u, the bracket (lo, hi) in x = log(α − 1) that the slope's sign
        points to, the slopes at its ends, and x at the best coarse order."""
        n_e = self.n_e
        coarse = np.asarray(DEFAULT_ORDERS[::120])
        n_a = coarse.size
        # rows ordered (order, ε) so that row r has ε index r % n_e
        u, obj, slope = self.solve_at(np.repeat(coarse, n_e), np.tile(u0, (n_a, 1)))
        obj, slope, u = obj.reshape(n_a, n_e), slope.reshape(n_a, n_e), u.reshape(n_a, n_e, -1)
        rows = np.arange(n_e)
        k = np.argmin(obj, axis=0)
        xs = np.log(coarse - 1.0)
        up = slope[k, rows] < 0  # V still falling at the best order: the optimum lies above it
        k_lo = np.where(up, k, np.maximum(k - 1, 0))
        k_hi = np.where(up, np.minimum(k + 1, n_a - 1), k)
        return (
            obj[k, rows], u[k, rows], xs[k_lo], xs[k_hi],
            slope[k_lo, rows], slope[k_hi, rows], xs[k],
        )

    def refine(
        self,
        best_obj: FloatArray,
        best_u: FloatArray,
        lo: FloatArray,
        hi: FloatArray,
        s_lo: FloatArray,
        s_hi: FloatArray,
        x_best: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        """Six steps of regula falsi on the slope where it changes sign over the bracket,
        else bisection, kept a tenth of the bracket away from its ends; returns the best
        objective and u found, per ε row."""
        for _ in range(6):
            with np.errstate(divide="ignore", invalid="ignore"):
                mid = lo - s_lo * (hi - lo) / (s_hi - s_lo)
            width = hi - lo
            mid = np.where((s_lo < 0) & (s_hi > 0) & np.isfinite(mid), mid, lo + width / 2)
            mid = np.clip(mid, lo + width / 10, hi - width / 10)
            u_m, obj_m, slope_m = self.solve_at(1.0 + np.exp(mid), best_u)
            improve = obj_m < best_obj
            best_obj = np.where(improve, obj_m, best_obj)
            best_u = np.where(improve[:, None], u_m, best_u)
            # infeasible at mid: move towards the best order found so far
            go_up = np.where(np.isfinite(obj_m), slope_m < 0, mid < x_best)
            lo, s_lo = np.where(go_up, mid, lo), np.where(go_up, slope_m, s_lo)
            hi, s_hi = np.where(go_up, hi, mid), np.where(go_up, s_hi, slope_m)
        return best_obj, best_u


def _pld_error_curve(
    items: Sequence[Item], eps: FloatArray, delta: float, free: npt.NDArray[np.bool_]
) -> FloatArray:
    """The optimal rule's error curve.

    Its allocations are the RDP-optimal shares rescaled to the PLD budget
    (:func:`allocate`), so the RDP-optimal allocation at total E_R *is* the PLD rule's
    allocation at total E_P = its PLD cost (≤ E_R). The curve solves RDP on a grid of E_R
    reaching past the largest ε asked for, computes each row's PLD cost with the
    accountant, and interpolates ln(objective) against ln E_P (both increase along the
    grid) at each ln ε: exact at the grid's points, interpolated between them.
    """
    rdp = CompositionRule.RDP
    wl = _Workload.build(items, rdp, delta, 1.0)
    shape = np.where(free, _surrogate(wl, rdp), [i.pinned or 1.0 for i in items])
    lo, hi = float(eps.min()), float(eps.max())
    top = hi * 1.25
    acct = accountant(CompositionRule.PLD)
    for _ in range(6):
        grid = np.geomspace(lo, top, max(eps.size, 10) + 6)
        start = _scale_to_budget(_Cost(wl, rdp, delta).value, shape, free, float(np.median(grid)))
        theta = _dual_batch(wl, rdp, grid, delta, free, start)
        objective = np.sum(_Dual(wl, free).f(theta), axis=1)
        e_pld = np.array([
            acct.compose([e for k, item in enumerate(items) for e in item_events(item, float(row[k]))]).epsilon(delta)
            for row in theta
        ])
        if float(e_pld.max()) >= hi:
            break
        top *= 1.5
    order = np.argsort(e_pld)
    return np.asarray(np.exp(np.interp(np.log(eps), np.log(e_pld[order]), np.log(objective[order]))), dtype=np.float64)


def _zcdp_hybrid(wl: _Workload, epsilons: FloatArray, delta: float, start: FloatArray) -> FloatArray:
    """Pure items by basic composition and Gaussian items by zCDP, with the best division
    s·ε | (1 − s)·ε of each total ε between them; shape (E, n).

    Feasible under the zCDP rule: its accountant charges at most Σ pure εᵢ + ε_z(Σ Gaussian
    ρᵢ) (:func:`~planner.privacy.accountants.zcdp.zcdp_epsilon`, the candidate with every pure event
    by ε). s is searched on a grid of 25 values, then by golden section between the best
    one's neighbours; each sub-workload is solved by the dual, all ε rows in one batch.
    """
    pure = ~wl.gauss
    items_p = [it for it, p in zip(wl.items, pure, strict=True) if p]
    items_g = [it for it, p in zip(wl.items, pure, strict=True) if not p]
    wl_p = _Workload.build(items_p, CompositionRule.BASIC, delta, 1.0)
    wl_g = _Workload.build(items_g, CompositionRule.ZCDP, delta, 1.0)
    free_p, free_g = np.ones(len(items_p), dtype=bool), np.ones(len(items_g), dtype=bool)
    n_e = epsilons.size

    def solve(shares: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """For shares (S, E): θ of the pure and Gaussian items and the objective, per row."""
        th_p = _dual_batch(wl_p, CompositionRule.BASIC, (shares * epsilons).ravel(), delta, free_p, start[pure])
        th_g = _dual_batch(wl_g, CompositionRule.ZCDP, ((1.0 - shares) * epsilons).ravel(), delta, free_g, start[~pure])
        obj = np.sum(_weighted(wl_p.w, wl_p.mse(th_p)), axis=1) + np.sum(_weighted(wl_g.w, wl_g.mse(th_g)), axis=1)
        return th_p, th_g, obj.reshape(shares.shape)

    grid = np.linspace(0.02, 0.98, 25)
    shares = np.broadcast_to(grid[:, None], (grid.size, n_e))
    _, _, obj = solve(shares)
    k = np.argmin(obj, axis=0)
    # Golden-section search between the best grid value's neighbours. The objective is
    # convex in s (each part is the minimum of a convex objective under a budget that is
    # linear in s, a convex function of that budget), hence unimodal: the bracket keeps
    # the minimum. 30 steps shrink it by 0.618³⁰ ≈ 5e-7 (s within 4e-8; the objective,
    # flat at its minimum, within ~1e-12 relative).
    lo = grid[np.maximum(k - 1, 0)].astype(np.float64)
    hi = grid[np.minimum(k + 1, grid.size - 1)].astype(np.float64)
    g = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = solve(x1[None, :])[2][0], solve(x2[None, :])[2][0]
    for _ in range(30):
        left = f1 <= f2  # the minimum lies in [lo, x2]: x1 becomes the new upper probe
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        # the surviving probe: x1 moves up to x2's slot (left) or x2 down to x1's
        x_keep, f_keep = np.where(left, x1, x2), np.where(left, f1, f2)
        x1, f1, x2, f2 = x_keep, f_keep, x_keep, f_keep
        x_new = np.where(left, hi - g * (hi - lo), lo + g * (hi - lo))
        f_new = solve(x_new[None, :])[2][0]
        x1, f1 = np.where(left, x_new, x1), np.where(left, f_new, f1)
        x2, f2 = np.where(left, x2, x_new), np.where(left, f2, f_new)
    cands = np.stack([grid[k], x1, x2])  # (3, E): the best grid value and the final pair
    th_p, th_g, obj_c = solve(cands)
    best = np.argmin(obj_c, axis=0)
    rows = np.arange(n_e)
    th_p = th_p.reshape(3, n_e, len(items_p))
    th_g = th_g.reshape(3, n_e, len(items_g))
    theta = np.empty((n_e, len(wl.items)))
    theta[:, pure] = th_p[best, rows]
    theta[:, ~pure] = th_g[best, rows]
    return theta


def _kov_allocation(
    wl: _Workload, d: _Dual, epsilons: FloatArray, start: FloatArray
) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Advanced composition (KOV Thm 3.5) with the square root linearised at the current
    S = Σεᵢ² of each row (see :class:`_Dual`), iterated to a fixed point; shape (E, n).

    Every solved iterate is feasible whatever the start (the tangent of the concave square
    root lies above it). Returns ``(θ, solved)``: rows where no linearisation left room
    for the free items (``solved`` False) keep ``start``, which the caller must replace.
    """
    fixed = ~d.free
    theta = start.copy()
    solved = np.zeros(epsilons.size, dtype=bool)
    live = np.ones(epsilons.size, dtype=bool)
    eps_rows = wl.eps_i

    for _ in range(30):
        e = eps_rows(theta)
        s_sq = np.maximum(np.sum(e**2, axis=1, keepdims=True), 1e-300)
        root, slope = kov_root_term(s_sq, wl.delta_prime)

        def c_adv(th: FloatArray, slope: FloatArray = slope) -> FloatArray:
            ee = eps_rows(th)
            return np.asarray(ee * np.tanh(ee / 2) + slope * ee**2)

        fixed_cost = np.sum(np.where(fixed, c_adv(theta), 0.0), axis=1, keepdims=True)
        # h(S′) ≤ h(S) + h′(S)(S′ − S): T′ + h′(S)·S′ ≤ ε − h(S) + h′(S)·S
        b = (epsilons[:, None] - root + slope * s_sq - fixed_cost)[:, 0]
        live &= b > 0  # no room left at this linearisation: keep the last feasible iterate
        if not live.any():
            break
        u, _ = d.solve(c_adv, np.where(live, b, -1.0), np.log(theta))
        new = np.where(live[:, None], np.exp(u), theta)
        solved |= live
        change = np.max(np.abs(np.log(new / theta)), axis=1)
        theta = new
        live &= change >= 1e-10
        if not live.any():
            break
    return theta, solved


def _rho_for_epsilon(epsilon: npt.ArrayLike, delta: float) -> FloatArray:
    """The ρ whose zCDP → (ε, δ) conversion equals each ε (vectorised bisection on the
    accountant's own conversion; the lower end, so converting back never exceeds ε)."""
    eps = np.atleast_1d(np.asarray(epsilon, dtype=np.float64))
    if eps.size == 1 and math.isfinite(eps[0]) and eps[0] >= 0.0:
        return np.full(eps.shape, _rho_for_one_epsilon(float(eps[0]), delta))
    lo = np.zeros_like(eps)
    hi = np.maximum(eps, 1.0)
    while np.any(zcdp_to_approx_epsilon(hi, delta) < eps):
        hi = np.where(zcdp_to_approx_epsilon(hi, delta) < eps, hi * 2.0, hi)
    for _ in range(200):
        mid = (lo + hi) / 2
        ok = zcdp_to_approx_epsilon(mid, delta) <= eps
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
        if np.all(hi - lo <= 1e-15 * hi):
            break
    return lo


def _rho_for_one_epsilon(eps: float, delta: float) -> float:
    """:func:`_rho_for_epsilon` of one finite ε ≥ 0, in Python floats: the same bisection,
    the same midpoints (``(lo + hi) / 2`` is correctly rounded either way) and the same
    conversion bits (:func:`zcdp_to_approx_epsilon` of one value), hence the same ρ, bit for
    bit, without NumPy's per-call cost on one-element arrays (the zCDP split converts
    thousands of single values per plan)."""

    def conv(rho: float) -> float:
        return float(zcdp_to_approx_epsilon(rho, delta))

    lo, hi = 0.0, max(eps, 1.0)
    while conv(hi) < eps:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if conv(mid) <= eps:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return lo


def allocate(
    items: Sequence[Item],
    epsilon: float,
    delta: float = 0.0,
    rule: CompositionRule | str = CompositionRule.BASIC,
    n: int | None = None,
) -> Allocation:
    """Weighted mode: the split of (ε, δ) minimising Σ wᵢ·MSEᵢ/sᵢ² under ``rule``.

    Returns an :class:`Allocation` whose exact composed ε (the ledger's accountant) is
    ≤ ``epsilon`` and ≥ ``epsilon``·(1 − 1e-9), and whose objective is never above the
    equal split's.

    Examples
    --------
    Two Laplace counts of weights 1 and 8 under basic composition at ε = 3: εᵢ ∝ wᵢ^{1/3},
    i.e. 1 : 2, so ε = (1, 2) (MATH.md §6, by hand):

    >>> a = allocate([Item("a", Family.LAPLACE, 2.0), Item("b", Family.LAPLACE, 2.0, weight=8.0)], 3.0)
    >>> [round(i.theta, 9) for i in a.items]
    [1.0, 2.0]
    """
    rule = CompositionRule(rule)
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    warnings = plan_warnings(epsilon, delta, n)
    delta = free_delta(items, delta)
    _validate(items, epsilon, delta, rule)
    if all(i.pinned is not None for i in items):
        # A manual split: every θ is fixed; only the share of δ left to Gaussians (advanced
        # composition) is chosen, the one that makes the composed ε smallest.
        share, used = _pinned_best(items, delta, rule)
        if used > epsilon:  # never over budget, not even by a rounding error
            raise PlanError(
                f"the shares cost ε = {used:.6g} under the {rule.value} rule, more than the total "
                f"{epsilon:g}; lower some shares or raise ε."
            )
        return _allocate_once(items, epsilon, delta, rule, share, warnings)
    if rule is CompositionRule.ADVANCED and any(i.is_gaussian for i in items):
        # δ' is chosen by the optimiser: search the share of δ given to the Gaussians.
        best: Allocation | None = None
        for share in (0.25, 0.5, 0.75, 1.0):  # 1.0: δ' = 0, the basic split
            cand = _allocate_once(items, epsilon, delta, rule, share, warnings)
            if best is None or cand.objective < best.objective:
                best = cand
        assert best is not None
        return best
    return _allocate_once(items, epsilon, delta, rule, 1.0, warnings)


def _allocate_once(
    items: Sequence[Item],
    epsilon: float,
    delta: float,
    rule: CompositionRule,
    gauss_share: float,
    warnings: tuple[str, ...],
) -> Allocation:
    wl = _Workload.build(items, rule, delta, gauss_share)
    cost = _Cost(wl, rule, delta)
    free = np.array([i.pinned is None for i in items], dtype=bool)
    pinned_theta = np.array(
        [i.pinned if i.pinned is not None else 1.0 for i in items], dtype=np.float64
    )

    def exact(theta: FloatArray) -> float:
        return _exact_cost(wl, rule, delta, theta)

    def fit(theta: FloatArray) -> FloatArray:
        # The fast cost uses the accountant's formulas (for RDP on a coarser order grid, so
        # never below the exact value); a narrow exact pass then lands on the ledger's number.
        theta = _scale_to_budget(cost.value, theta, free, epsilon)
        if rule is CompositionRule.PLD:  # the RDP fit leaves room (PLD ≤ RDP): scale up
            return _scale_by_secant(exact, theta, free, epsilon)
        return _scale_to_budget(exact, theta, free, epsilon, width=1e-6)

    if not free.any():
        used = exact(pinned_theta)
        if used > epsilon:  # never over budget, not even by a rounding error
            raise PlanError(
                f"the pinned shares cost ε = {used:.6g}, more than the total {epsilon:g}; lower a pinned share."
            )
        return _finish(wl, pinned_theta, rule, epsilon, delta, Method.PINNED, warnings)

    shape = _surrogate(wl, rule)
    start = np.where(free, shape, pinned_theta)
    start = _scale_to_budget(cost.value, start, free, epsilon)
    method = Method.CLOSED_FORM
    theta = start
    # One free item: its error falls as θ grows, so the best is all the budget that is left.
    if int(free.sum()) > 1 and (not _closed_form_applies(wl, rule) or not free.all()):
        method = Method.DUAL
        cand = _dual_allocation(wl, _surrogate_rule(rule), epsilon, delta, free, start)
        if np.all(np.isfinite(cand)) and np.all(cand > 0):
            # a pinned share is the owner's number, exactly (the dual works in log θ)
            theta = np.where(free, cand, pinned_theta)
    reshaped = None
    if rule is CompositionRule.PLD and method is Method.DUAL:
        reshaped = _pld_reshaped(wl, exact, epsilon, delta, free, start, theta, pinned_theta)
    theta = fit(theta)
    if reshaped is not None:  # both now cost exactly ε under PLD: keep the better
        reshaped = fit(reshaped)
        if wl.objective(reshaped) < wl.objective(theta):
            theta = reshaped
    equal = fit(np.where(free, 1.0, pinned_theta))
    if wl.objective(equal) < wl.objective(theta):
        theta, method = equal, Method.EQUAL_SPLIT
    return _finish(wl, theta, rule, epsilon, delta, method, warnings)


def _pld_reshaped(
    wl: _Workload,
    exact: Callable[[FloatArray], float],
    epsilon: float,
    delta: float,
    free: npt.NDArray[np.bool_],
    start: FloatArray,
    theta: FloatArray,
    pinned_theta: FloatArray,
) -> FloatArray:
    """Under the optimal rule: the RDP-optimal allocation at the RDP total E_R whose PLD
    cost is ``epsilon`` (not the RDP-optimal shape at ε scaled up uniformly).

    Why: PLD ≤ RDP leaves room after the RDP solve at ε. Scaling every share by one factor
    fills it, but the RDP-optimal split at a larger total E_R is a better use of that room
    (it is optimal for the surrogate at its own total), and it is the allocation the error
    curve (:func:`_pld_error_curve`) describes. E_R is found by the secant method on
    ln(PLD cost) against ln E_R (near-linear: slope ≈ 1), at most 4 dual solves; the caller's
    exact fit then lands it on the budget, and keeps whichever of this and the uniformly
    scaled ``theta`` has the lower objective at the same PLD cost.
    """
    def at(e_r: float) -> FloatArray:
        cand = _dual_allocation(wl, CompositionRule.RDP, e_r, delta, free, start)
        return np.where(free, cand, pinned_theta)

    log_t = math.log(epsilon)
    c0 = exact(theta)
    if not c0 > 0:  # δ covers the whole difference (PLD ε = 0 here): the caller's fit scales up
        return theta
    x0, g0 = log_t, math.log(c0) - log_t  # theta is the RDP solution at ε: g0 ≤ 0
    x1 = x0 - g0 if g0 < -1e-12 else x0
    if x1 == x0:
        return theta
    best, best_gap = theta, abs(g0)
    for _ in range(4):
        cand = at(math.exp(x1))
        if not (np.all(np.isfinite(cand)) and np.all(cand > 0)):
            break
        c1 = exact(cand)
        if not c1 > 0:
            break
        g1 = math.log(c1) - log_t
        if abs(g1) < best_gap:
            best, best_gap = cand, abs(g1)
        if abs(g1) <= 1e-4 or g1 == g0:  # the caller's exact fit removes the rest (a uniform 1e-4)
            break
        x0, g0, x1 = x1, g1, x1 - g1 * (x1 - x0) / (g1 - g0)
    return best


def _exact_cost(wl: _Workload, rule: CompositionRule, delta: float, theta: FloatArray) -> float:
    """The composed ε of the items at θ, by the ledger's own accountant.

    The accountant's own functions: ``total_epsilon`` is ``rdp_epsilon`` under RDP and the
    ρ conversion under zCDP; calling them on the events skips building Spend records.
    """
    if rule is CompositionRule.RDP:
        return float(
            rdp_epsilon(
                [e for k, item in enumerate(wl.items) for e in item_events(item, float(theta[k]))],
                delta,
            )[0]
        )
    if rule is CompositionRule.ZCDP:  # the accountant's zcdp_epsilon on the kernels' ρ
        return wl.zcdp_epsilon(theta, delta)
    if rule is CompositionRule.PLD:  # the optimal accountant itself (the ledger's number)
        evs = [e for k, item in enumerate(wl.items) for e in item_events(item, float(theta[k]))]
        return float(accountant(rule).compose(evs).epsilon(delta))
    # basic / advanced read the assigned (εᵢ, δᵢ): total_epsilon without the Spend records
    pairs = [p for per_item in _assigned(wl, theta, delta) for p in per_item]
    eps = np.array([x for _, x, _ in pairs], dtype=np.float64)
    dls = np.array([d for _, _, d in pairs], dtype=np.float64)
    return float(total_assigned_epsilon(eps, dls, rule, delta))


# --------------------------------------------------------------------------------------
# Equal and manual splits
# --------------------------------------------------------------------------------------


def _theta_for_share(wl: _Workload, share: float, delta: float) -> FloatArray:
    """θ of every item whose standalone ε (:class:`ItemAllocation` ``epsilon``: a pure
    item's ε, a Gaussian's ε at its δᵢ) equals ``share``.

    Pure items: θ = ε. Gaussian items: the ρ whose standalone ε is ``share``, by bisection
    on log ρ (that ε grows with ρ), all Gaussian items at once.
    """
    theta = np.full(len(wl.items), float(share), dtype=np.float64)
    gauss = np.flatnonzero(wl.gauss)
    if gauss.size == 0:
        return theta

    def eps_at(rho: FloatArray) -> FloatArray:
        t = theta.copy()
        t[gauss] = rho
        pairs = _assigned(wl, t, delta)
        return np.array([sum(x for _, x, _ in pairs[k]) for k in gauss], dtype=np.float64)

    lo = np.full(gauss.size, -80.0)
    hi = np.full(gauss.size, 30.0)
    for _ in range(90):  # 110 / 2⁹⁰: far below a float's resolution of log ρ
        mid = (lo + hi) / 2.0
        over = eps_at(np.exp(mid)) > share
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    theta[gauss] = np.exp(lo)  # the lower end: the item's ε never exceeds the share
    return theta


def allocate_equal(
    items: Sequence[Item],
    epsilon: float,
    delta: float = 0.0,
    rule: CompositionRule | str = CompositionRule.BASIC,
    n: int | None = None,
) -> Allocation:
    """Equal split: every item gets the same standalone ε, the largest whose composition
    under ``rule`` fits ``epsilon``.

    Each item's standalone ε is the one :class:`ItemAllocation` reports (a pure item's ε;
    a Gaussian item's ε at its δᵢ); the common value s is found by bisection on the exact
    accountant, so the composed ε is ≤ ``epsilon`` and within 1e-9 relative of it. Weights
    and error scales do not change the split; they only enter the reported objective.
    Pinned shares are ignored (an equal split fixes every share).

    Notes
    -----
    Under basic composition of pure mechanisms Σᵢ s = ε, so s = ε/k for k items. Under
    RDP and zCDP the items compose to less than their sum, so s > ε/k. Under advanced
    composition with Gaussian items, the share of δ left to the Gaussians is searched as in
    :func:`allocate` and the largest s is kept.

    Examples
    --------
    Four Laplace counts under basic composition at ε = 2: each gets 2/4 (by hand):

    >>> a = allocate_equal([Item(k, Family.LAPLACE, 2.0) for k in "abcd"], 2.0)
    >>> [round(i.epsilon, 9) for i in a.items], a.method.value
    ([0.5, 0.5, 0.5, 0.5], 'equal')
    """
    rule = CompositionRule(rule)
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    items = [replace(i, pinned=None) if i.pinned is not None else i for i in items]
    warnings = plan_warnings(epsilon, delta, n)
    delta = free_delta(items, delta)
    _validate(items, epsilon, delta, rule)
    shares = (0.25, 0.5, 0.75, 1.0) if rule is CompositionRule.ADVANCED and any(
        i.is_gaussian for i in items) else (1.0,)
    best: tuple[float, _Workload, FloatArray] | None = None
    for gauss_share in shares:
        wl = _Workload.build(items, rule, delta, gauss_share)

        def over(log_s: float, wl: _Workload = wl) -> bool:
            return _exact_cost(wl, rule, delta, _theta_for_share(wl, math.exp(log_s), delta)) > epsilon

        lo, hi = math.log(epsilon / len(items)) - 1.0, math.log(epsilon) + 1.0
        while over(lo):
            lo -= 2.0
            if lo < -700:
                raise PlanError("no equal share fits this budget; raise ε or drop queries.")
        while not over(hi):
            hi += 1.0
            if hi > 700:
                break
        for _ in range(200):
            mid = (lo + hi) / 2.0
            if over(mid):
                hi = mid
            else:
                lo = mid
            if hi - lo < 1e-13:
                break
        if best is None or lo > best[0]:
            best = (lo, wl, _theta_for_share(wl, math.exp(lo), delta))
    assert best is not None
    _, wl, theta = best
    return _finish(wl, theta, rule, epsilon, delta, Method.EQUAL, warnings)


def pinned_cost(items: Sequence[Item], delta: float = 0.0,
                rule: CompositionRule | str = CompositionRule.BASIC) -> float:
    """The composed ε under ``rule`` of items whose every share is fixed (a manual split):
    what :func:`allocate` checks a fully pinned workload against its budget with.

    Examples
    --------
    Three Laplace counts with ε 0.1, 0.2 and 0.3 under basic composition cost 0.6:

    >>> round(pinned_cost([Item(k, Family.LAPLACE, 2.0, pinned=p) for k, p in zip("abc", (0.1, 0.2, 0.3))]), 12)
    0.6
    """
    rule = CompositionRule(rule)
    delta = free_delta(items, delta)
    missing = [i.id for i in items if i.pinned is None]
    if missing:
        raise PlanError(f"a manual split needs a share for every query; missing for {missing}.")
    _validate(items, 1.0, delta, rule)
    return _pinned_best(items, delta, rule)[1]


def _pinned_best(items: Sequence[Item], delta: float, rule: CompositionRule) -> tuple[float, float]:
    """(share of δ left to Gaussians, composed ε) of a fully pinned workload: the share
    (advanced composition with Gaussians: 0.25, 0.5, 0.75 or 1) that makes ε smallest."""
    theta = np.array([float(i.pinned or 0.0) for i in items], dtype=np.float64)
    shares = (0.25, 0.5, 0.75, 1.0) if rule is CompositionRule.ADVANCED and any(
        i.is_gaussian for i in items) else (1.0,)
    costs = [(_exact_cost(_Workload.build(items, rule, delta, sh), rule, delta, theta), sh) for sh in shares]
    used, share = min(costs)
    return share, used


def _assigned(
    wl: _Workload, theta: FloatArray, delta: float
) -> list[list[tuple[PrivacyEvent, float, float]]]:
    """Per item, the events it emits at θ with the (εᵢ, δᵢ) each is assigned: pure events
    at their ε; a Gaussian at its δᵢ (the whole δ under RDP/zCDP, where the pair only
    describes the query on its own), its ε from the event's own conversion, computed for all
    Gaussian items in one vectorised call (the exact fit calls this many times)."""
    events = [item_events(item, float(theta[k])) for k, item in enumerate(wl.items)]
    d_i = wl.delta_i if wl.delta_i > 0 else delta
    out: list[list[tuple[PrivacyEvent, float, float]]] = [
        [] if item.is_gaussian else [(e, pure_epsilon(e), 0.0) for e in evs]
        for item, evs in zip(wl.items, events, strict=True)
    ]
    for discrete in (False, True):
        ks = [
            k
            for k, item in enumerate(wl.items)
            if item.is_gaussian and (item.family is Family.DISCRETE_GAUSSIAN) is discrete
        ]
        if not ks:
            continue
        ev = [cast(GaussianEvent, events[k][0]) for k in ks]
        # the basic accountant's standalone ε of a Gaussian at δᵢ, vectorised
        eps = epsilon_array(GaussianEvent, np.array([e.noise_multiplier for e in ev]), d_i, discrete=discrete)
        for k, e, x in zip(ks, ev, eps, strict=True):
            # A very noisy Gaussian can be (0, δ)-DP on its own; any larger ε is also valid.
            out[k] = [(e, max(float(x), 1e-300), d_i)]
    return out


# --------------------------------------------------------------------------------------
# Target mode
# --------------------------------------------------------------------------------------


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


def plan_targets(
    items: Sequence[Item],
    targets: dict[str, Target],
    delta: float = 0.0,
    rule: CompositionRule | str = CompositionRule.BASIC,
) -> TargetPlan:
    """Target mode: the least θᵢ meeting each query's target, and the total ε it costs.

    Each target fixes a least θᵢ (errors fall as θ grows and composition is monotone in
    each θᵢ), so the least total is the composition of those θᵢ; every target then holds
    with equality. ``binding`` names the query whose target costs the most budget.
    """
    rule = CompositionRule(rule)
    delta = check_delta(delta)
    missing = [i.id for i in items if i.id not in targets]
    if missing:
        raise PlanError(f"target mode needs a target for every query; missing for {missing}.")
    theta = np.empty(len(items))
    for k, item in enumerate(items):
        tg = targets[item.id]
        if tg.min_theta is not None:
            theta[k] = tg.min_theta
            continue
        bound = tg.bound * (item.error_scale if tg.relative else 1.0)
        if not (bound > 0 and math.isfinite(bound)):
            raise PlanError(f"query {item.id!r}: the target must be > 0; got {tg.bound}.")
        if not (0 < tg.beta < 1):
            raise PlanError(
                f"query {item.id!r}: the confidence 1−β needs 0 < β < 1; got β = {tg.beta}."
            )
        lo, hi = 1e-12, 1.0
        while _error_bound(item, np.array([hi]), tg.beta)[0] > bound:
            hi *= 2.0
            if hi > 1e15:
                raise PlanError(
                    f"query {item.id!r}: the target ±{bound:g} cannot be met at any budget."
                )
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if _error_bound(item, np.array([mid]), tg.beta)[0] <= bound:
                hi = mid
            else:
                lo = mid
            if hi / lo - 1 < 1e-13:
                break
        theta[k] = hi  # the upper end: the target is met
    total_delta, delta = delta, free_delta(items, delta)
    _validate(items, 1.0, delta, rule)
    wl = _Workload.build(items, rule, delta, 0.5)
    alloc = _finish(wl, theta, rule, 1.0, delta, Method.TARGETS, ())
    used = alloc.used_epsilon
    # The share of each query: the drop in total ε if that query were removed.
    shares: dict[str, float] = {}
    for k, item in enumerate(items):
        rest = [s for j, it in enumerate(alloc.items) if j != k for s in it.spends]
        without = float(total_epsilon(rest, rule, total_delta)) if rest else 0.0
        shares[item.id] = used - without
    binding = max(shares, key=lambda key: shares[key])
    return TargetPlan(rule, total_delta, used, binding, alloc.items, shares)


# --------------------------------------------------------------------------------------
# Comparing rules
# --------------------------------------------------------------------------------------


def applicable_rules(items: Sequence[Item], delta: float) -> list[CompositionRule]:
    """Rules that can account for this workload at δ (Gaussians need δ > 0)."""
    rules = [
        CompositionRule.BASIC,
        CompositionRule.ADVANCED,
        CompositionRule.RDP,
        CompositionRule.ZCDP,
        CompositionRule.PLD,
    ]
    if delta == 0.0:
        return [CompositionRule.BASIC] if any(i.is_gaussian for i in items) is False else []
    return rules


def compare_rules(
    items: Sequence[Item], epsilon: float, delta: float, n: int | None = None
) -> dict[CompositionRule, Allocation]:
    """The same workload optimised under every applicable rule."""
    return {r: allocate(items, epsilon, delta, r, n) for r in applicable_rules(items, delta)}


def error_curve(
    items: Sequence[Item], epsilons: npt.ArrayLike, delta: float, rule: CompositionRule | str
) -> FloatArray:
    """Total weighted error (Σ wᵢ MSEᵢ/sᵢ², the objective) of the optimal split at each total ε.

    All ε are solved as one batch by the dual method; each point is the true objective of
    an allocation whose composed ε (the accountant's formulas; at a fixed Rényi order the
    conversion is exact) is within 1e-9 relative of that total. It skips the final exact
    fit of :func:`allocate`, so a point can sit a little above ``allocate(...).objective``,
    or below it by at most the 1e-9 tolerance's effect (~2e-9 relative).
    """
    rule = CompositionRule(rule)
    eps = np.asarray(epsilons, dtype=np.float64)
    for e in eps:
        check_epsilon(float(e))
    delta = free_delta(items, delta)
    _validate(items, float(eps.min()), delta, rule)
    free = np.array([i.pinned is None for i in items], dtype=bool)

    def solved_at(share: float, r: CompositionRule) -> tuple[_Workload, FloatArray]:
        wl = _Workload.build(items, rule, delta, share)
        shape = np.where(free, _surrogate(wl, rule), [i.pinned or 1.0 for i in items])
        start = _scale_to_budget(_Cost(wl, rule, delta).value, shape, free, float(np.median(eps)))
        return wl, _dual_batch(wl, r, eps, delta, free, start)

    if rule is CompositionRule.PLD:
        return _pld_error_curve(items, eps, delta, free)
    if not (rule is CompositionRule.ADVANCED and any(i.is_gaussian for i in items)):
        wl, theta = solved_at(1.0, rule)
        return np.asarray(np.sum(_Dual(wl, free).f(theta), axis=1))
    # Advanced with Gaussians: δ' is searched as in allocate(). Share 1 (δ' = 0) is the
    # basic split, feasible and better than basic at any smaller share (larger εᵢ), so it
    # is solved once and starts the KOV iteration at the other shares.
    wl1, basic = solved_at(1.0, CompositionRule.BASIC)
    best = np.sum(_Dual(wl1, free).f(basic), axis=1)
    for share in (0.25, 0.5, 0.75):
        wl = _Workload.build(items, rule, delta, share)
        d = _Dual(wl, free)
        kov, solved = _kov_allocation(wl, d, eps, basic)
        best = np.minimum(best, np.where(solved, np.sum(d.f(kov), axis=1), np.inf))
    return np.asarray(best)
