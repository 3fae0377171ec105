"""Splitting a total privacy budget across a workload (MATH.md §6).

Each query of a workload is reduced to an :class:`Item`: a *noise family* (how its
error depends on its privacy parameter θ, and which privacy events it emits), its
sensitivity, an importance weight and an optional error scale (so a count and a mean can
share a budget fairly). θ is the query's pure ε for pure mechanisms and its zCDP ρ for
Gaussian ones.

Weighted mode minimises Σ wᵢ·MSEᵢ(θᵢ)/sᵢ² subject to the composed budget ≤ (ε, δ)
under a :class:`~planner.accounting.CompositionRule`:

* closed forms where they exist — Laplace-type under basic composition,
  εᵢ ∝ (wᵢ cᵢ)^{1/3} (cᵢ = MSE·ε²), and Gaussian under zCDP, ρᵢ ∝ √(wᵢ cᵢ);
* otherwise SLSQP on log θ starting from the rule's surrogate closed form, with the exact
  composed ε as the constraint (RDP: the envelope gradient at the optimal order).

Every answer is then scaled by one common factor, by bisection on the exact accountant
(:func:`planner.accounting.total_epsilon`, the function the ledger uses), so the budget
is met to within 1e-9 relative and never exceeded; and it is compared with the equal
split, the better of the two being returned.

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

import numpy as np
import numpy.typing as npt
from scipy import optimize, special

from planner import divergences as dv
from planner.accounting import CompositionRule, Spend, total_epsilon, zcdp_to_approx_epsilon
from planner.budget import DEFAULT_ORDERS, check_delta, check_epsilon
from planner.errors import PlanError
from planner.events import (
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
)

FloatArray = npt.NDArray[np.float64]


class Family(StrEnum):
    """How a query's error depends on its privacy parameter θ, and what it costs."""

    LAPLACE = "laplace"  # θ = ε; MSE = c/ε²; one Laplace event, b = Δ/ε
    DISCRETE_LAPLACE = "discrete_laplace"  # θ = ε; MSE = f/(2 sinh²(ε/(2Δ))); pure ε
    EXPONENTIAL = "exponential"  # θ = ε; MSE = c/ε²; exponential mechanism (ε²/8-zCDP)
    PURE = "pure"  # θ = ε; MSE = c/ε²; any other ε-DP mechanism
    RANDOMIZED_RESPONSE = "randomized_response"  # θ = ε; MSE = 1/(4n tanh²(ε/2)) (worst π)
    MEAN_LAPLACE = "mean_laplace"  # θ = ε split between a Laplace sum and a Laplace count
    GAUSSIAN = "gaussian"  # θ = ρ; MSE = c/ρ; σ = Δ₂/√(2ρ)
    DISCRETE_GAUSSIAN = "discrete_gaussian"  # θ = ρ; MSE ≤ c/ρ (Canonne et al. 2020)


_PURE_FAMILIES = frozenset(
    {
        Family.LAPLACE,
        Family.DISCRETE_LAPLACE,
        Family.EXPONENTIAL,
        Family.PURE,
        Family.RANDOMIZED_RESPONSE,
        Family.MEAN_LAPLACE,
    }
)
_GAUSS_FAMILIES = frozenset({Family.GAUSSIAN, Family.DISCRETE_GAUSSIAN})


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
        multiplier f; for RANDOMIZED_RESPONSE the declared n.
    sensitivity : float
        Δ₁ (DISCRETE_LAPLACE); for MEAN_LAPLACE the sum's Δ (a). Unused otherwise.
    weight, error_scale : float
        Importance wᵢ ≥ 0 and the scale sᵢ > 0 the error is measured against.
    part_b : float
        MEAN_LAPLACE only: the count part's Δ times the bound on |mean| (b).
    pinned : float or None
        A fixed θ (the owner's "hold"); the rest is optimised around it.
    """

    id: str
    family: Family
    coef: float
    sensitivity: float = 1.0
    weight: float = 1.0
    error_scale: float = 1.0
    part_b: float = 0.0
    pinned: float | None = None

    def __post_init__(self) -> None:
        for name in ("coef", "sensitivity", "error_scale"):
            v = float(getattr(self, name))
            if not math.isfinite(v) or v <= 0:
                raise PlanError(f"query {self.id!r}: {name} must be > 0 and finite; got {v}.")
        if not math.isfinite(self.weight) or self.weight < 0:
            raise PlanError(f"query {self.id!r}: weight must be ≥ 0; got {self.weight}. Use 0 to ignore a query's error.")
        if self.pinned is not None and (not math.isfinite(self.pinned) or self.pinned <= 0):
            raise PlanError(f"query {self.id!r}: a pinned share must be > 0; got {self.pinned}.")

    @property
    def is_gaussian(self) -> bool:
        return self.family in _GAUSS_FAMILIES


# --------------------------------------------------------------------------------------
# Family formulas (vectorised over θ for one item)
# --------------------------------------------------------------------------------------


def _mean_split(item: Item) -> float:
    """Share of a MEAN_LAPLACE ε given to the sum: a^{2/3}/(a^{2/3}+b^{2/3}).

    Minimising 2a²/ε_s² + 2b²/ε_c² subject to ε_s + ε_c = ε (Lagrange) gives
    ε_s ∝ a^{2/3}, ε_c ∝ b^{2/3} and MSE = 2(a^{2/3}+b^{2/3})³/ε² (seed 004 ex. 4 with
    the split optimised, delta method for noisy sum / noisy count).
    """
    a = item.sensitivity ** (2 / 3)
    b = item.part_b ** (2 / 3)
    return a / (a + b) if b > 0 else 1.0


def item_mse(item: Item, theta: npt.ArrayLike) -> FloatArray:
    """Predicted MSE of the item at privacy parameter θ (vectorised)."""
    t = np.asarray(theta, dtype=np.float64)
    f = item.family
    if f in (Family.LAPLACE, Family.EXPONENTIAL, Family.PURE, Family.MEAN_LAPLACE):
        return np.asarray(item.coef / t**2, dtype=np.float64)
    if f is Family.DISCRETE_LAPLACE:
        # Var of P(k) ∝ e^{−|k|/s}, s = Δ/ε: 2e^{−1/s}/(1−e^{−1/s})² = 1/(2 sinh²(ε/(2Δ))).
        return np.asarray(item.coef / (2.0 * np.sinh(t / (2.0 * item.sensitivity)) ** 2), dtype=np.float64)
    if f is Family.RANDOMIZED_RESPONSE:
        # 2p−1 = tanh(ε/2) for p = e^ε/(1+e^ε); worst-case Var = 1/(4n(2p−1)²) (MATH §3, π = 1/2).
        return np.asarray(1.0 / (4.0 * item.coef * np.tanh(t / 2.0) ** 2), dtype=np.float64)
    return np.asarray(item.coef / t, dtype=np.float64)


def item_events(item: Item, theta: float) -> list[PrivacyEvent]:
    """The privacy events the item emits at θ (what the ledger will record)."""
    f = item.family
    if f is Family.LAPLACE:
        return [LaplaceEvent(1.0 / theta)]
    if f is Family.MEAN_LAPLACE:
        share = _mean_split(item)
        if share >= 1.0:
            return [LaplaceEvent(1.0 / theta)]
        return [LaplaceEvent(1.0 / (theta * share)), LaplaceEvent(1.0 / (theta * (1.0 - share)))]
    if f is Family.EXPONENTIAL:
        return [ExponentialEvent(theta)]
    if f is Family.RANDOMIZED_RESPONSE:
        return [RandomizedResponseEvent(math.exp(theta) / (1.0 + math.exp(theta)))]
    if f in (Family.PURE, Family.DISCRETE_LAPLACE):
        return [PureEvent(theta)]
    return [GaussianEvent(1.0 / math.sqrt(2.0 * theta), discrete=f is Family.DISCRETE_GAUSSIAN)]


# --------------------------------------------------------------------------------------
# Vectorised workload costs
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
    def build(cls, items: Sequence[Item], rule: CompositionRule, delta: float, gauss_delta_share: float) -> _Workload:
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
            split=np.array([_mean_split(i) if i.family is Family.MEAN_LAPLACE else 1.0 for i in items]),
            delta_i=delta_i,
            delta_prime=delta_prime,
            masks=masks,
        )

    def mse(self, theta: FloatArray) -> FloatArray:
        out = np.empty_like(theta)
        for k, item in enumerate(self.items):
            out[k] = item_mse(item, theta[k])
        return out

    def objective(self, theta: FloatArray) -> float:
        return float(np.dot(self.w, self.mse(theta)))

    # per-item basic-composition ε (Gaussian items at their δᵢ)
    def eps_i(self, theta: FloatArray) -> FloatArray:
        eps = theta.copy()
        if self.gauss.any():
            rho = theta[self.gauss]
            cont = self.masks[Family.GAUSSIAN][self.gauss]
            g_eps = np.empty_like(rho)
            if cont.any():
                g_eps[cont] = dv.analytic_gaussian_epsilon(self.delta_i, np.sqrt(2.0 * rho[cont]))
            if (~cont).any():
                g_eps[~cont] = zcdp_to_approx_epsilon(rho[~cont], self.delta_i)
            eps[self.gauss] = g_eps
        return eps

    def rho_i(self, theta: FloatArray) -> FloatArray:
        rho = theta**2 / 2.0
        rho[self.masks[Family.EXPONENTIAL]] = theta[self.masks[Family.EXPONENTIAL]] ** 2 / 8.0
        m = self.masks[Family.MEAN_LAPLACE]
        if m.any():
            s = self.split[m]
            rho[m] = (theta[m] * s) ** 2 / 2.0 + (theta[m] * (1 - s)) ** 2 / 2.0
        rho[self.gauss] = theta[self.gauss]
        return rho

    def rdp_matrix(self, theta: FloatArray, orders: FloatArray) -> FloatArray:
        """Per-item RDP curves, shape (n, len(orders))."""
        a = orders[None, :]
        t = theta[:, None]
        out = np.empty((theta.size, orders.size))
        m = self.masks
        for fam_, fn in (
            (Family.LAPLACE, lambda x: dv.laplace_rdp(1.0 / x, a)),
            (Family.EXPONENTIAL, lambda x: dv.exponential_rdp(x, a)),
            (Family.PURE, lambda x: dv.pure_dp_rdp(x, a)),
            (Family.DISCRETE_LAPLACE, lambda x: dv.pure_dp_rdp(x, a)),
            (Family.RANDOMIZED_RESPONSE, lambda x: dv.pure_dp_rdp(x, a)),
            (Family.GAUSSIAN, lambda x: x * a),
            (Family.DISCRETE_GAUSSIAN, lambda x: x * a),
        ):
            if m[fam_].any():
                out[m[fam_]] = fn(t[m[fam_]])
        mm = m[Family.MEAN_LAPLACE]
        if mm.any():
            s = self.split[mm][:, None]
            tt = t[mm]
            part_c = np.where(s < 1.0, dv.laplace_rdp(1.0 / (tt * np.maximum(1.0 - s, 1e-300)), a), 0.0)
            out[mm] = dv.laplace_rdp(1.0 / (tt * s), a) + part_c
        return out

    def pure_total(self, theta: FloatArray) -> float:
        return math.inf if self.gauss.any() else float(theta.sum())


def _rdp_conversion(orders: FloatArray, delta: float) -> FloatArray:
    """The improved RDP → (ε, δ) conversion term (Canonne, Kamath & Steinke 2020, Prop. 12;
    MATH.md §5): ε = ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1)."""
    return np.asarray(np.log((orders - 1) / orders) - (math.log(delta) + np.log(orders)) / (orders - 1))


def _advanced(eps: FloatArray, delta_prime: float) -> float:
    """Kairouz–Oh–Viswanath 2015 Thm 3.5 heterogeneous bound, min with basic (MATH §5)."""
    basic = float(eps.sum())
    if delta_prime <= 0:
        return basic
    kov = float(np.sum(eps * np.tanh(eps / 2.0))) + math.sqrt(2.0 * math.log(1.0 / delta_prime) * float(np.sum(eps**2)))
    return min(basic, kov)


class _Cost:
    """Fast composed ε of a workload under a rule, with its gradient in log θ."""

    def __init__(self, wl: _Workload, rule: CompositionRule, delta: float) -> None:
        self.wl, self.rule, self.delta = wl, rule, delta
        self.orders = np.asarray(DEFAULT_ORDERS[::4])
        self.conv = _rdp_conversion(self.orders, delta) if delta > 0 else None

    def value(self, theta: FloatArray) -> float:
        wl = self.wl
        if self.rule is CompositionRule.BASIC:
            return float(wl.eps_i(theta).sum())
        if self.rule is CompositionRule.ADVANCED:
            return _advanced(wl.eps_i(theta), wl.delta_prime)
        if self.rule is CompositionRule.ZCDP:
            rho = float(wl.rho_i(theta).sum())
            if self.delta == 0:
                return wl.pure_total(theta)
            return min(float(zcdp_to_approx_epsilon(rho, self.delta)), wl.pure_total(theta))
        if self.conv is None:
            return wl.pure_total(theta)
        curve = wl.rdp_matrix(theta, self.orders).sum(axis=0) + self.conv
        return min(float(curve.min()), wl.pure_total(theta))

    def grad_log(self, theta: FloatArray) -> FloatArray:
        """∂ cost / ∂ log θᵢ by central differences, component-wise (cost is separable at
        a fixed order / fixed sums, so all partials come from two vector evaluations)."""
        h = 1e-6
        up, dn = theta * math.exp(h), theta * math.exp(-h)
        wl = self.wl
        if self.rule is CompositionRule.BASIC:
            return (wl.eps_i(up) - wl.eps_i(dn)) / (2 * h)
        if self.rule is CompositionRule.ADVANCED:
            e0 = wl.eps_i(theta)
            de = (wl.eps_i(up) - wl.eps_i(dn)) / (2 * h)
            basic = float(e0.sum())
            if wl.delta_prime <= 0 or _advanced(e0, wl.delta_prime) >= basic:
                return de
            s2 = float(np.sum(e0**2))
            lg = math.log(1.0 / wl.delta_prime)
            d_kov = np.tanh(e0 / 2) + e0 / (2 * np.cosh(e0 / 2) ** 2) + math.sqrt(2 * lg) * e0 / math.sqrt(s2)
            return np.asarray(d_kov * de)
        if self.rule is CompositionRule.ZCDP:
            rho = float(wl.rho_i(theta).sum())
            drho = (wl.rho_i(up) - wl.rho_i(dn)) / (2 * h)
            d_eps = (float(zcdp_to_approx_epsilon(rho * (1 + 1e-7), self.delta)) - float(zcdp_to_approx_epsilon(rho * (1 - 1e-7), self.delta))) / (2e-7 * rho)
            return np.asarray(drho * d_eps)
        assert self.conv is not None
        curve = wl.rdp_matrix(theta, self.orders).sum(axis=0) + self.conv
        k = int(np.argmin(curve))
        o = self.orders[k : k + 1]
        return np.asarray((wl.rdp_matrix(up, o) - wl.rdp_matrix(dn, o))[:, 0] / (2 * h))


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
    method: str
    items: tuple[ItemAllocation, ...]
    warnings: tuple[str, ...] = ()

    def spends(self) -> list[tuple[str, Spend]]:
        return [(it.id, s) for it in self.items for s in it.spends]


def _finish(
    wl: _Workload, theta: FloatArray, rule: CompositionRule, epsilon: float, delta: float, method: str, warnings: tuple[str, ...]
) -> Allocation:
    rho_i = wl.rho_i(theta)
    mse = wl.mse(theta)
    items = []
    for k, item in enumerate(wl.items):
        spends = tuple(_spends_of(item, float(theta[k]), wl, delta))
        items.append(
            ItemAllocation(
                id=item.id,
                family=item.family,
                theta=float(theta[k]),
                epsilon=float(sum(x.epsilon for x in spends)),
                delta=float(sum(x.delta for x in spends)),
                rho=float(rho_i[k]),
                rmse=float(math.sqrt(mse[k])),
                weighted_mse=float(wl.w[k] * mse[k]),
                spends=spends,
            )
        )
    alloc = Allocation(rule, epsilon, delta, 0.0, float(np.dot(wl.w, mse)), method, tuple(items), warnings)
    used = float(total_epsilon([s for _, s in alloc.spends()], rule, delta))
    return replace(alloc, used_epsilon=used)


# --------------------------------------------------------------------------------------
# The optimiser
# --------------------------------------------------------------------------------------


def _validate(items: Sequence[Item], epsilon: float, delta: float, rule: CompositionRule) -> None:
    if not items:
        raise PlanError("the workload is empty; add at least one query.")
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise PlanError("query ids must be unique; rename the duplicates.")
    check_epsilon(epsilon)
    check_delta(delta)
    if any(i.is_gaussian for i in items) and delta == 0.0:
        raise PlanError("Gaussian mechanisms need δ > 0; set a δ such as 1e-6 or switch those queries to Laplace.")
    if rule is CompositionRule.ZCDP and delta == 0.0 and any(i.is_gaussian for i in items):
        raise PlanError("zCDP with δ = 0 cannot convert to (ε, δ); set δ > 0.")


def plan_warnings(epsilon: float, delta: float, n: int | None) -> tuple[str, ...]:
    """Legal but risky budgets (MATH.md §1; issue 4 item 5)."""
    out = []
    if epsilon > 10:
        out.append(f"total ε = {epsilon:g} is above 10: the guarantee is very weak (e^ε ≈ {math.exp(min(epsilon, 700)):.3g}).")
    if n is not None and n > 0 and delta >= 1.0 / n:
        out.append(f"δ = {delta:g} is at least 1/n = {1.0 / n:.3g}: a mechanism could publish a whole record; use δ ≪ 1/n.")
    return tuple(out)


def _scale_to_budget(
    cost: Callable[[FloatArray], float], theta: FloatArray, free: npt.NDArray[np.bool_], target: float, width: float = 1.0
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
            raise PlanError("the pinned shares alone exceed the total budget; lower them or raise ε.")
    while g(hi) <= 0:
        hi *= 2.0
        if hi > 700:
            return at(hi)
    root = float(optimize.brentq(g, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=200))
    step = 1e-14
    while g(root) > 0:
        root -= step
        step *= 2.0
    return at(root)


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
        elif item.family is Family.RANDOMIZED_RESPONSE:
            c[k] = 1.0 / item.coef  # small-ε limit of 1/(4n tanh²(ε/2))
        else:
            c[k] = item.coef
    w = np.maximum(wl.w, 1e-12 * max(float(wl.w.max()), 1e-300))
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


def _closed_form_applies(wl: _Workload, rule: CompositionRule) -> bool:
    fams = set(wl.fam)
    inv_sq = {Family.LAPLACE, Family.EXPONENTIAL, Family.PURE, Family.MEAN_LAPLACE}
    if rule is CompositionRule.BASIC and fams <= inv_sq:
        return True
    return rule is CompositionRule.ZCDP and fams <= _GAUSS_FAMILIES


def _slsqp(wl: _Workload, cost: _Cost, theta0: FloatArray, free: npt.NDArray[np.bool_], epsilon: float) -> FloatArray:
    """Minimise Σ wᵢ MSEᵢ over log θ of the free items with the exact composed ε ≤ budget."""
    base = theta0.copy()
    scale = max(wl.objective(theta0), 1e-300)

    def full(u: FloatArray) -> FloatArray:
        t = base.copy()
        t[free] = np.exp(u)
        return t

    def fun(u: FloatArray) -> float:
        return wl.objective(full(u)) / scale

    def jac(u: FloatArray) -> FloatArray:
        t = full(u)
        h = 1e-6
        up, dn = t.copy(), t.copy()
        up[free] *= math.exp(h)
        dn[free] *= math.exp(-h)
        return np.asarray(wl.w[free] * (wl.mse(up)[free] - wl.mse(dn)[free]) / (2 * h) / scale)

    def con(u: FloatArray) -> float:
        return (epsilon - cost.value(full(u))) / epsilon

    def con_jac(u: FloatArray) -> FloatArray:
        return np.asarray(-cost.grad_log(full(u))[free] / epsilon)

    res = optimize.minimize(
        fun,
        np.log(theta0[free]),
        jac=jac,
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": con, "jac": con_jac}],
        options={"maxiter": 200, "ftol": 1e-12},
    )
    return full(np.asarray(res.x, dtype=np.float64))


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
    _validate(items, epsilon, delta, rule)
    warnings = plan_warnings(epsilon, delta, n)
    if rule is CompositionRule.ADVANCED and any(i.is_gaussian for i in items):
        # δ' is chosen by the optimiser: search the share of δ given to the Gaussians.
        best: Allocation | None = None
        for share in (0.25, 0.5, 0.75):
            cand = _allocate_once(items, epsilon, delta, rule, share, warnings)
            if best is None or cand.objective < best.objective:
                best = cand
        assert best is not None
        return best
    return _allocate_once(items, epsilon, delta, rule, 1.0, warnings)


def _allocate_once(
    items: Sequence[Item], epsilon: float, delta: float, rule: CompositionRule, gauss_share: float, warnings: tuple[str, ...]
) -> Allocation:
    wl = _Workload.build(items, rule, delta, gauss_share)
    cost = _Cost(wl, rule, delta)
    free = np.array([i.pinned is None for i in items], dtype=bool)
    pinned_theta = np.array([i.pinned if i.pinned is not None else 1.0 for i in items], dtype=np.float64)

    def exact(theta: FloatArray) -> float:
        if rule in (CompositionRule.RDP, CompositionRule.ZCDP):
            events = [e for k, item in enumerate(items) for e in item_events(item, float(theta[k]))]
            return float(total_epsilon([Spend(e, _placeholder_epsilon(e), _placeholder_delta(e, delta)) for e in events], rule, delta))
        spends = [s for k, item in enumerate(items) for s in _spends_of(item, float(theta[k]), wl, delta)]
        return float(total_epsilon(spends, rule, delta))

    def fit(theta: FloatArray) -> FloatArray:
        # The fast cost uses the same formulas as the accountant for basic, advanced and
        # zCDP; a narrow exact pass then lands on the ledger's own number.
        if rule is not CompositionRule.RDP:
            theta = _scale_to_budget(cost.value, theta, free, epsilon)
        return _scale_to_budget(exact, theta, free, epsilon, width=1e-6)

    if not free.any():
        used = exact(pinned_theta)
        if used > epsilon:  # never over budget, not even by a rounding error
            raise PlanError(f"the pinned shares cost ε = {used:.6g}, more than the total {epsilon:g}; lower a pinned share.")
        return _finish(wl, pinned_theta, rule, epsilon, delta, "pinned", warnings)

    shape = _surrogate(wl, rule)
    start = np.where(free, shape, pinned_theta)
    start = _scale_to_budget(cost.value, start, free, epsilon)
    method = "closed form"
    theta = start
    if not _closed_form_applies(wl, rule) or not free.all():
        method = "SLSQP"
        cand = _slsqp(wl, cost, start, free, epsilon)
        if np.all(np.isfinite(cand)) and wl.objective(_scale_to_budget(cost.value, cand, free, epsilon)) < wl.objective(start):
            theta = cand
    theta = fit(theta)
    equal = fit(np.where(free, 1.0, pinned_theta))
    if wl.objective(equal) < wl.objective(theta):
        theta, method = equal, "equal split"
    return _finish(wl, theta, rule, epsilon, delta, method, warnings)


def _placeholder_epsilon(event: PrivacyEvent) -> float:
    """RDP and zCDP composition read only the event; any valid (ε, δ) claim will do here."""
    return event.pure_epsilon if math.isfinite(event.pure_epsilon) else 1e300


def _placeholder_delta(event: PrivacyEvent, delta: float) -> float:
    return 0.0 if math.isfinite(event.pure_epsilon) else delta


def _spends_of(item: Item, theta: float, wl: _Workload, delta: float) -> list[Spend]:
    events = item_events(item, theta)
    if item.is_gaussian:
        e = events[0]
        # Under RDP/zCDP the (εᵢ, δᵢ) pair only describes the query on its own (at δ).
        d_i = wl.delta_i if wl.delta_i > 0 else delta
        # A very noisy Gaussian can be (0, δ)-DP on its own; any larger ε is also valid.
        return [Spend(e, max(e.approx_epsilon(d_i), 1e-300), d_i)]
    return [Spend(e, e.pure_epsilon, 0.0) for e in events]


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
    mse = item_mse(item, theta)
    if item.family is Family.LAPLACE:
        return np.asarray(np.sqrt(mse / 2.0) * math.log(1.0 / beta))  # b ln(1/β), MSE = 2b²
    if item.is_gaussian or item.family is Family.RANDOMIZED_RESPONSE:
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
            raise PlanError(f"query {item.id!r}: the confidence 1−β needs 0 < β < 1; got β = {tg.beta}.")
        lo, hi = 1e-12, 1.0
        while _error_bound(item, np.array([hi]), tg.beta)[0] > bound:
            hi *= 2.0
            if hi > 1e15:
                raise PlanError(f"query {item.id!r}: the target ±{bound:g} cannot be met at any budget.")
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if _error_bound(item, np.array([mid]), tg.beta)[0] <= bound:
                hi = mid
            else:
                lo = mid
            if hi / lo - 1 < 1e-13:
                break
        theta[k] = hi  # the upper end: the target is met
    _validate(items, 1.0, delta, rule)
    wl = _Workload.build(items, rule, delta, 0.5)
    alloc = _finish(wl, theta, rule, 1.0, delta, "targets", ())
    used = alloc.used_epsilon
    # The share of each query: the drop in total ε if that query were removed.
    shares: dict[str, float] = {}
    for k, item in enumerate(items):
        rest = [s for j, it in enumerate(alloc.items) if j != k for s in it.spends]
        without = float(total_epsilon(rest, rule, delta)) if rest else 0.0
        shares[item.id] = used - without
    binding = max(shares, key=lambda key: shares[key])
    return TargetPlan(rule, delta, used, binding, alloc.items, shares)


# --------------------------------------------------------------------------------------
# Comparing rules
# --------------------------------------------------------------------------------------


def applicable_rules(items: Sequence[Item], delta: float) -> list[CompositionRule]:
    """Rules that can account for this workload at δ (Gaussians need δ > 0)."""
    rules = [CompositionRule.BASIC, CompositionRule.ADVANCED, CompositionRule.RDP, CompositionRule.ZCDP]
    if delta == 0.0:
        return [CompositionRule.BASIC] if any(i.is_gaussian for i in items) is False else []
    return rules


def compare_rules(items: Sequence[Item], epsilon: float, delta: float, n: int | None = None) -> dict[CompositionRule, Allocation]:
    """The same workload optimised under every applicable rule."""
    return {r: allocate(items, epsilon, delta, r, n) for r in applicable_rules(items, delta)}


def error_curve(
    items: Sequence[Item], epsilons: npt.ArrayLike, delta: float, rule: CompositionRule | str
) -> FloatArray:
    """Total weighted error (Σ wᵢ MSEᵢ/sᵢ², the objective) of the optimal split at each total ε."""
    rule = CompositionRule(rule)
    return np.array([allocate(items, float(e), delta, rule).objective for e in np.asarray(epsilons, dtype=np.float64)])
