"""Privacy events: what one mechanism invocation costs, in every currency.

Modelled on Google dp_accounting's ``DpEvent`` records: a mechanism *describes* its
privacy loss as an immutable event; accountants (:mod:`planner.accounting`) only add
events up. Every event can state

* ``pure_epsilon`` — its ε under pure DP (``inf`` if it has none);
* ``zcdp_rho`` — its ρ under zCDP (``inf`` if it has none);
* ``rdp(orders)`` — its RDP curve ε(α), vectorised over orders (``inf`` where none);
* ``approx_epsilon(delta)`` — the tightest (ε, δ) known for the event on its own;
* ``delta`` — the δ it needs under basic/advanced composition at that ε (0 if pure).

Events are plain data: the accountants group them by type so that 1000 heterogeneous
events compose in a few vectorised array operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from planner import divergences as dv
from planner.budget import check_delta, check_epsilon
from planner.errors import BudgetError

FloatArray = npt.NDArray[np.float64]


@runtime_checkable
class PrivacyEvent(Protocol):
    """What every event provides."""

    @property
    def pure_epsilon(self) -> float: ...

    @property
    def zcdp_rho(self) -> float: ...

    def rdp(self, orders: npt.ArrayLike) -> FloatArray: ...

    def approx_epsilon(self, delta: float) -> float: ...

    def to_dict(self) -> dict[str, Any]: ...


def _positive(value: float, name: str) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise BudgetError(f"{name} must be > 0 and finite; got {v}.")
    return v


@dataclass(frozen=True, slots=True)
class LaplaceEvent:
    """Continuous Laplace noise of scale b = λ·Δ₁ (``noise_multiplier`` λ = b/Δ₁): (1/λ)-DP."""

    noise_multiplier: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive(self.noise_multiplier, "noise_multiplier"))

    @property
    def pure_epsilon(self) -> float:
        return 1.0 / self.noise_multiplier

    @property
    def zcdp_rho(self) -> float:
        return self.pure_epsilon**2 / 2.0

    def rdp(self, orders: npt.ArrayLike) -> FloatArray:
        return dv.laplace_rdp(self.noise_multiplier, orders)

    def approx_epsilon(self, delta: float) -> float:
        return self.pure_epsilon

    def to_dict(self) -> dict[str, Any]:
        return {"event": "laplace", "noise_multiplier": self.noise_multiplier}


@dataclass(frozen=True, slots=True)
class PureEvent:
    """Any ε-DP mechanism (discrete Laplace, noisy max with exponential noise, ...).

    Its RDP curve is the tightest valid for every ε-DP mechanism
    (:func:`planner.divergences.pure_dp_rdp`).
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    @property
    def pure_epsilon(self) -> float:
        return self.epsilon

    @property
    def zcdp_rho(self) -> float:
        return self.epsilon**2 / 2.0

    def rdp(self, orders: npt.ArrayLike) -> FloatArray:
        return dv.pure_dp_rdp(self.epsilon, orders)

    def approx_epsilon(self, delta: float) -> float:
        return self.epsilon

    def to_dict(self) -> dict[str, Any]:
        return {"event": "pure", "epsilon": self.epsilon}


@dataclass(frozen=True, slots=True)
class ExponentialEvent:
    """An ε-DP exponential mechanism (or report-noisy-max with Gumbel noise).

    Bounded range gives ρ = ε²/8 (Cesar & Rogers 2021, arXiv:2004.07223, Lemma 3.2).
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    @property
    def pure_epsilon(self) -> float:
        return self.epsilon

    @property
    def zcdp_rho(self) -> float:
        return self.epsilon**2 / 8.0

    def rdp(self, orders: npt.ArrayLike) -> FloatArray:
        return dv.exponential_rdp(self.epsilon, orders)

    def approx_epsilon(self, delta: float) -> float:
        return self.epsilon

    def to_dict(self) -> dict[str, Any]:
        return {"event": "exponential", "epsilon": self.epsilon}


@dataclass(frozen=True, slots=True)
class RandomizedResponseEvent:
    """Binary randomized response keeping the truth with probability p ∈ (1/2, 1).

    ε = ln(p/(1−p)) (MATH.md §3).
    """

    keep_probability: float

    def __post_init__(self) -> None:
        p = float(self.keep_probability)
        if not (0.5 < p < 1.0):
            raise BudgetError(
                f"keep_probability must be in (0.5, 1); got {p}. p = 0.5 is pure noise and p = 1 is no privacy."
            )
        object.__setattr__(self, "keep_probability", p)

    @property
    def pure_epsilon(self) -> float:
        p = self.keep_probability
        return math.log(p) - math.log1p(-p)

    @property
    def zcdp_rho(self) -> float:
        return self.pure_epsilon**2 / 2.0

    def rdp(self, orders: npt.ArrayLike) -> FloatArray:
        return dv.randomized_response_rdp(self.keep_probability, orders)

    def approx_epsilon(self, delta: float) -> float:
        return self.pure_epsilon

    def to_dict(self) -> dict[str, Any]:
        return {"event": "randomized_response", "keep_probability": self.keep_probability}


@dataclass(frozen=True, slots=True)
class GaussianEvent:
    """Gaussian noise σ = s·Δ₂ (``noise_multiplier`` s = σ/Δ₂): ρ = 1/(2s²)-zCDP.

    ``discrete=True`` marks the discrete Gaussian (Canonne, Kamath & Steinke 2020,
    arXiv:2004.00010, Thm 4: the same ρ); its (ε, δ) is taken from the zCDP conversion,
    the continuous one's from the exact analytic Gaussian (Balle & Wang 2018, Thm 8).
    """

    noise_multiplier: float
    discrete: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive(self.noise_multiplier, "noise_multiplier"))

    @property
    def pure_epsilon(self) -> float:
        return math.inf

    @property
    def zcdp_rho(self) -> float:
        return 1.0 / (2.0 * self.noise_multiplier**2)

    def rdp(self, orders: npt.ArrayLike) -> FloatArray:
        return dv.gaussian_rdp(self.noise_multiplier, orders)

    def approx_epsilon(self, delta: float) -> float:
        d = check_delta(delta)
        if d == 0.0:
            return math.inf
        if self.discrete:
            from planner.accounting import zcdp_to_approx_epsilon

            return float(zcdp_to_approx_epsilon(self.zcdp_rho, d))
        return float(dv.analytic_gaussian_epsilon(d, 1.0 / self.noise_multiplier))

    def to_dict(self) -> dict[str, Any]:
        return {"event": "gaussian", "noise_multiplier": self.noise_multiplier, "discrete": self.discrete}


@dataclass(frozen=True, slots=True)
class ZCDPEvent:
    """Any ρ-zCDP mechanism: ε(α) = ρα."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_epsilon(self.rho, "rho"))

    @property
    def pure_epsilon(self) -> float:
        return math.inf

    @property
    def zcdp_rho(self) -> float:
        return self.rho

    def rdp(self, orders: npt.ArrayLike) -> FloatArray:
        return np.asarray(self.rho * np.asarray(orders, dtype=np.float64), dtype=np.float64)

    def approx_epsilon(self, delta: float) -> float:
        d = check_delta(delta)
        if d == 0.0:
            return math.inf
        from planner.accounting import zcdp_to_approx_epsilon

        return float(zcdp_to_approx_epsilon(self.rho, d))

    def to_dict(self) -> dict[str, Any]:
        return {"event": "zcdp", "rho": self.rho}


@dataclass(frozen=True, slots=True)
class ApproxEvent:
    """An (ε, δ)-DP mechanism with no tighter description: composes under basic/advanced only."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))

    @property
    def pure_epsilon(self) -> float:
        return self.epsilon if self.delta == 0.0 else math.inf

    @property
    def zcdp_rho(self) -> float:
        return self.epsilon**2 / 2.0 if self.delta == 0.0 else math.inf

    def rdp(self, orders: npt.ArrayLike) -> FloatArray:
        a = np.asarray(orders, dtype=np.float64)
        if self.delta == 0.0:
            return dv.pure_dp_rdp(self.epsilon, a)
        return np.full(a.shape, np.inf)

    def approx_epsilon(self, delta: float) -> float:
        return self.epsilon if delta >= self.delta else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"event": "approx", "epsilon": self.epsilon, "delta": self.delta}


@dataclass(frozen=True, slots=True)
class SelfComposedEvent:
    """``count`` independent runs of the same event, as one event (dp_accounting's
    ``SelfComposedDpEvent``).

    Pure ε, ρ and the RDP curve add up (RDP order by order: Mironov 2017, Prop. 1), so the
    accountant composes k identical mechanisms without a (k × orders) array. The RDP
    curve is k times the accountant's own single-event kernel, with a 1e-9 relative
    allowance for taking k equal terms as one product (never below the sum of k copies).
    """

    event: PrivacyEvent
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, PrivacyEvent):
            raise BudgetError(f"event must be a privacy event; got {type(self.event).__name__}.")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise BudgetError(f"count must be a whole number ≥ 1; got {self.count!r}.")

    @property
    def pure_epsilon(self) -> float:
        return self.count * self.event.pure_epsilon

    @property
    def zcdp_rho(self) -> float:
        return self.count * self.event.zcdp_rho

    def rdp(self, orders: npt.ArrayLike) -> FloatArray:
        from planner.accounting import rdp_curve

        one = rdp_curve([self.event], orders).epsilon_array
        return np.asarray(self.count * one * (1.0 + 1e-9), dtype=np.float64)

    def approx_epsilon(self, delta: float) -> float:
        if math.isfinite(self.pure_epsilon):
            return self.pure_epsilon
        d = check_delta(delta)
        if d == 0.0:
            return math.inf
        from planner.accounting import rdp_epsilon

        return float(rdp_epsilon([self], d)[0])

    def to_dict(self) -> dict[str, Any]:
        return {"event": "self_composed", "inner": self.event.to_dict(), "count": self.count}


def event_from_dict(data: dict[str, Any]) -> PrivacyEvent:
    """Rebuild an event from :meth:`to_dict` output (ledger storage, CLI input)."""
    kind = data.get("event")
    try:
        if kind == "laplace":
            return LaplaceEvent(float(data["noise_multiplier"]))
        if kind == "pure":
            return PureEvent(float(data["epsilon"]))
        if kind == "exponential":
            return ExponentialEvent(float(data["epsilon"]))
        if kind == "randomized_response":
            return RandomizedResponseEvent(float(data["keep_probability"]))
        if kind == "gaussian":
            return GaussianEvent(float(data["noise_multiplier"]), bool(data.get("discrete", False)))
        if kind == "zcdp":
            return ZCDPEvent(float(data["rho"]))
        if kind == "approx":
            return ApproxEvent(float(data["epsilon"]), float(data["delta"]))
        if kind == "self_composed":
            return SelfComposedEvent(event_from_dict(data["inner"]), int(data["count"]))
    except KeyError as exc:
        raise BudgetError(f"privacy event {kind!r} is missing the field {exc.args[0]!r}.") from exc
    raise BudgetError(
        f"unknown privacy event {kind!r}; expected one of laplace, pure, exponential, "
        "randomized_response, gaussian, zcdp, approx, self_composed."
    )
