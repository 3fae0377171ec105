"""Privacy events: frozen records of what one mechanism invocation was, and nothing else.

Modelled on Google dp_accounting's ``dp_event.py``: a mechanism *describes* itself as an
immutable event (its kind and its parameters); the accountants in
:mod:`planner.privacy.accountants` read events and hold every formula (pure ε, ρ, RDP curves,
conversions to (ε, δ)). This module has no mathematics beyond validating parameters, so a
new accountant is one new module there, and a new mechanism is one new record here plus
one kernel per accountant that supports it.

Every event round-trips through :meth:`to_dict` / :func:`event_from_dict` (the ledger
stores events as JSON).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from planner.core.errors import BudgetError
from planner.privacy.budget import check_delta, check_epsilon


def _positive(value: float, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"{name} must be a number > 0; got {value!r}.") from exc
    if not math.isfinite(v) or v <= 0:
        raise BudgetError(f"{name} must be > 0 and finite; got {v}.")
    return v


class PrivacyEvent(ABC):
    """Base of every event record (no behaviour beyond serialisation)."""

    __slots__ = ()
    #: The ``"event"`` tag of the JSON form.
    tag: ClassVar[str] = ""
    #: The name of the event's one scalar parameter ("" for events with none), which the
    #: accountants' vectorised kernels take as an array.
    parameter: ClassVar[str] = ""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The JSON form, ``{"event": tag, <parameters>}``."""


@dataclass(frozen=True, slots=True)
class LaplaceEvent(PrivacyEvent):
    """Continuous Laplace noise of scale b = λ·Δ₁ (``noise_multiplier`` λ = b/Δ₁)."""

    tag: ClassVar[str] = "laplace"
    parameter: ClassVar[str] = "noise_multiplier"
    noise_multiplier: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive(self.noise_multiplier, "noise_multiplier"))

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "noise_multiplier": self.noise_multiplier}


@dataclass(frozen=True, slots=True)
class PureEvent(PrivacyEvent):
    """Any ε-DP mechanism with no tighter description (discrete Laplace, noisy max with
    exponential noise, ...)."""

    tag: ClassVar[str] = "pure"
    parameter: ClassVar[str] = "epsilon"
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "epsilon": self.epsilon}


@dataclass(frozen=True, slots=True)
class ExponentialEvent(PrivacyEvent):
    """An ε-DP exponential mechanism (or report-noisy-max with Gumbel noise): a
    bounded-range mechanism, which the accountants use (ρ = ε²/8 rather than ε²/2)."""

    tag: ClassVar[str] = "exponential"
    parameter: ClassVar[str] = "epsilon"
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "epsilon": self.epsilon}


@dataclass(frozen=True, slots=True)
class RandomizedResponseEvent(PrivacyEvent):
    """Binary randomized response keeping the truth with probability p ∈ (1/2, 1)."""

    tag: ClassVar[str] = "randomized_response"
    parameter: ClassVar[str] = "keep_probability"
    keep_probability: float

    def __post_init__(self) -> None:
        try:
            p = float(self.keep_probability)
        except (TypeError, ValueError) as exc:
            raise BudgetError(f"keep_probability must be a number in (0.5, 1); got {self.keep_probability!r}.") from exc
        if not (0.5 < p < 1.0):
            raise BudgetError(
                f"keep_probability must be in (0.5, 1); got {p}. p = 0.5 is pure noise and p = 1 is no privacy."
            )
        object.__setattr__(self, "keep_probability", p)

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "keep_probability": self.keep_probability}


#: The least noise multiplier σ/Δ₂ accepted where a person types σ (``planner compose``,
#: ``planner dpsgd``). A Gaussian mechanism is ρ-zCDP with ρ = Δ₂²/(2σ²) (Bun & Steinke
#: 2016, "Concentrated Differential Privacy", Prop. 1.6): at σ/Δ₂ = 1e-6, ρ = 5·10¹¹ and
#: ε ≥ ρ, so the mechanism protects nobody; below about 1e-154, σ² underflows to zero and
#: the arithmetic of every accountant divides by it. Refused with a message instead.
MIN_NOISE_MULTIPLIER: float = 1e-6


def check_noise_multiplier(value: float, name: str = "sigma (σ / sensitivity)") -> float:
    """``value`` as a float if it is a usable Gaussian noise multiplier σ/Δ₂; otherwise a
    :class:`BudgetError` naming σ.

    Examples
    --------
    >>> check_noise_multiplier(1.1)
    1.1
    >>> check_noise_multiplier(1e-300)
    Traceback (most recent call last):
    ...
    planner.core.errors.BudgetError: sigma (σ / sensitivity) is 1e-300; it must be at least 1e-06. Below that the Gaussian mechanism's privacy loss ε exceeds 10¹¹: it protects nobody, and the accountants cannot compute it. Use a noise multiplier of about 0.5 or more.
    """
    v = _positive(value, name)
    if v < MIN_NOISE_MULTIPLIER:
        raise BudgetError(
            f"{name} is {v:.3g}; it must be at least {MIN_NOISE_MULTIPLIER:g}. Below that the Gaussian "
            "mechanism's privacy loss ε exceeds 10¹¹: it protects nobody, and the accountants cannot "
            "compute it. Use a noise multiplier of about 0.5 or more."
        )
    return v


@dataclass(frozen=True, slots=True)
class GaussianEvent(PrivacyEvent):
    """Gaussian noise σ = s·Δ₂ (``noise_multiplier`` s = σ/Δ₂).

    ``discrete=True`` marks OpenDP's samplers (the discrete Gaussian, and the float
    Gaussian sampled on a 2^k grid), certified through ρ-zCDP only (Canonne, Kamath &
    Steinke 2020, arXiv:2004.00010, Thm 4); ``False`` an idealised continuous Gaussian,
    whose exact (ε, δ) curve is the analytic Gaussian (Balle & Wang 2018).
    """

    tag: ClassVar[str] = "gaussian"
    parameter: ClassVar[str] = "noise_multiplier"
    noise_multiplier: float
    discrete: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive(self.noise_multiplier, "noise_multiplier"))
        object.__setattr__(self, "discrete", bool(self.discrete))

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "noise_multiplier": self.noise_multiplier, "discrete": self.discrete}


@dataclass(frozen=True, slots=True)
class ZCDPEvent(PrivacyEvent):
    """Any ρ-zCDP mechanism with no tighter description."""

    tag: ClassVar[str] = "zcdp"
    parameter: ClassVar[str] = "rho"
    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_epsilon(self.rho, "rho"))

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "rho": self.rho}


@dataclass(frozen=True, slots=True)
class ApproxEvent(PrivacyEvent):
    """An (ε, δ)-DP mechanism with no tighter description: composes under basic and
    advanced composition only (δ = 0 makes it a pure event)."""

    tag: ClassVar[str] = "approx"
    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "epsilon": self.epsilon, "delta": self.delta}


@dataclass(frozen=True, slots=True)
class ThresholdedEvent(PrivacyEvent):
    """``event``, except on an outcome of probability at most ``delta``: a thresholded
    release of keys that are not declared (DP partition selection).

    Precisely: for every pair of neighbours x, x′ the output distributions are mixtures
    M(x) = (1 − δ)·A + δ·B and M(x′) = (1 − δ)·A′ + δ·B′ where (A, A′) is a pair that
    ``event`` describes (Bun & Steinke 2016, Definition 8.1, "approximate zCDP"). Such a
    δ composes by addition under every rule, so each accountant accounts for ``event`` and
    reserves Σδ of the total (:class:`planner.privacy.accountants.base.Accountant`); the proof for
    the thresholded count is in :mod:`planner.planning.statistics.keys`.
    """

    tag: ClassVar[str] = "thresholded"
    event: PrivacyEvent
    delta: float

    def __post_init__(self) -> None:
        if not isinstance(self.event, PrivacyEvent) or isinstance(self.event, ThresholdedEvent):
            raise BudgetError(f"event must be one mechanism's privacy event; got {type(self.event).__name__}.")
        d = check_delta(self.delta)
        if d <= 0.0:
            raise BudgetError("a thresholded event needs δ > 0 (the chance a rare key crosses the threshold).")
        object.__setattr__(self, "delta", d)

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "inner": self.event.to_dict(), "delta": self.delta}


@dataclass(frozen=True, slots=True)
class SelfComposedEvent(PrivacyEvent):
    """``count`` independent runs of the same event, as one event (dp_accounting's
    ``SelfComposedDpEvent``)."""

    tag: ClassVar[str] = "self_composed"
    event: PrivacyEvent
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, PrivacyEvent):
            raise BudgetError(f"event must be a privacy event; got {type(self.event).__name__}.")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise BudgetError(f"count must be a whole number ≥ 1; got {self.count!r}.")

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "inner": self.event.to_dict(), "count": self.count}


@dataclass(frozen=True, slots=True)
class ComposedEvent(PrivacyEvent):
    """Several events run one after another, as one event (dp_accounting's
    ``ComposedDpEvent``)."""

    tag: ClassVar[str] = "composed"
    events: tuple[PrivacyEvent, ...]

    def __post_init__(self) -> None:
        evs = tuple(self.events)
        if not evs or not all(isinstance(e, PrivacyEvent) for e in evs):
            raise BudgetError("a composed event needs at least one privacy event, and only privacy events.")
        object.__setattr__(self, "events", evs)

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "events": [e.to_dict() for e in self.events]}


#: Events a sampled event may wrap: one mechanism invocation with a known privacy curve or
#: Rényi bound (not a composition, and not already sampled).
_SAMPLEABLE: tuple[type[PrivacyEvent], ...] = (
    LaplaceEvent, PureEvent, ExponentialEvent, RandomizedResponseEvent, GaussianEvent, ZCDPEvent, ApproxEvent,
)


def _rate(value: Any) -> float:
    try:
        q = float(value)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"rate must be a sampling rate in (0, 1]; got {value!r}.") from exc
    if not (math.isfinite(q) and 0.0 < q <= 1.0):
        raise BudgetError(
            f"rate must be a sampling rate in (0, 1]; got {q}. Use the public fraction of the "
            "population (or of the dataset) that one run sees; 1 means no sampling."
        )
    return q


def _sampleable(event: Any, kind: str) -> PrivacyEvent:
    if not isinstance(event, _SAMPLEABLE):
        shown = type(event).__name__
        raise BudgetError(
            f"a {kind} event wraps one mechanism (Laplace, Gaussian, pure, exponential, randomized "
            f"response, zCDP or (ε, δ)); got {shown}. Sample once, then compose the sampled events."
        )
    return event


@dataclass(frozen=True, slots=True)
class PoissonSampledEvent(PrivacyEvent):
    """``event`` run on a Poisson sample: every record enters independently with probability
    ``rate`` (dp_accounting's ``PoissonSampledDpEvent``).

    The amplification is accounted under the **add/remove-one** neighbouring relation
    (Balle, Barthe & Gaboardi 2018; Zhu, Dong & Wang 2022, Thm 11): ``event``'s parameters
    are relative to the add/remove sensitivity (in DP-SGD, σ/C with C the clipping norm).
    """

    tag: ClassVar[str] = "poisson_sampled"
    event: PrivacyEvent
    rate: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "event", _sampleable(self.event, "Poisson-sampled"))
        object.__setattr__(self, "rate", _rate(self.rate))

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "inner": self.event.to_dict(), "rate": self.rate}


@dataclass(frozen=True, slots=True)
class SampledWithoutReplacementEvent(PrivacyEvent):
    """``event`` run on a uniformly random subset of fixed size m = ``rate``·n drawn without
    replacement (dp_accounting's ``SampledWithoutReplacementDpEvent``).

    The amplification is accounted under the **substitute-one** neighbouring relation (n is
    public): ``event``'s parameters are relative to the substitution sensitivity (in DP-SGD,
    σ/(2C) with C the clipping norm). Balle, Barthe & Gaboardi 2018; Wang, Balle &
    Kasiviswanathan 2019.
    """

    tag: ClassVar[str] = "sampled_without_replacement"
    event: PrivacyEvent
    rate: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "event", _sampleable(self.event, "sampled-without-replacement"))
        object.__setattr__(self, "rate", _rate(self.rate))

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.tag, "inner": self.event.to_dict(), "rate": self.rate}


#: The sampled event classes (each wraps one mechanism event).
SAMPLED_EVENTS: tuple[type[PrivacyEvent], ...] = (PoissonSampledEvent, SampledWithoutReplacementEvent)


def flatten(events: Any) -> list[PrivacyEvent]:
    """The leaf events of a sequence of events (composed events unpacked, in order).

    Self-composed events stay whole: accountants multiply their cost by the count.
    """
    out: list[PrivacyEvent] = []
    for e in events:
        if isinstance(e, ComposedEvent):
            out.extend(flatten(e.events))
        else:
            out.append(e)
    return out


#: Event classes by their JSON tag.
EVENT_TYPES: Mapping[str, type[PrivacyEvent]] = {
    cls.tag: cls
    for cls in (LaplaceEvent, PureEvent, ExponentialEvent, RandomizedResponseEvent, GaussianEvent,
                ZCDPEvent, ApproxEvent, ThresholdedEvent, SelfComposedEvent, ComposedEvent, PoissonSampledEvent,
                SampledWithoutReplacementEvent)
}


def event_from_dict(data: Any, _depth: int = 0) -> PrivacyEvent:
    """Rebuild an event from :meth:`PrivacyEvent.to_dict` output (ledger storage, CLI input).

    Raises
    ------
    BudgetError
        Not an object, an unknown ``"event"`` tag, a missing field or a bad value.
    """
    if _depth > 32:
        raise BudgetError("privacy events are nested too deeply (more than 32 levels).")
    if not isinstance(data, Mapping):
        raise BudgetError(f"a privacy event must be a JSON object; got {type(data).__name__}.")
    kind = data.get("event")
    try:
        if kind == "laplace":
            return LaplaceEvent(data["noise_multiplier"])
        if kind == "pure":
            return PureEvent(data["epsilon"])
        if kind == "exponential":
            return ExponentialEvent(data["epsilon"])
        if kind == "randomized_response":
            return RandomizedResponseEvent(data["keep_probability"])
        if kind == "gaussian":
            return GaussianEvent(data["noise_multiplier"], bool(data.get("discrete", False)))
        if kind == "zcdp":
            return ZCDPEvent(data["rho"])
        if kind == "approx":
            return ApproxEvent(data["epsilon"], data["delta"])
        if kind == "thresholded":
            return ThresholdedEvent(event_from_dict(data["inner"], _depth + 1), data["delta"])
        if kind == "self_composed":
            return SelfComposedEvent(event_from_dict(data["inner"], _depth + 1), data["count"])
        if kind == "poisson_sampled":
            return PoissonSampledEvent(event_from_dict(data["inner"], _depth + 1), data["rate"])
        if kind == "sampled_without_replacement":
            return SampledWithoutReplacementEvent(event_from_dict(data["inner"], _depth + 1), data["rate"])
        if kind == "composed":
            inner = data["events"]
            if not isinstance(inner, list):
                raise BudgetError("a composed event's 'events' must be a list.")
            return ComposedEvent(tuple(event_from_dict(e, _depth + 1) for e in inner))
    except KeyError as exc:
        raise BudgetError(f"privacy event {kind!r} is missing the field {exc.args[0]!r}.") from exc
    raise BudgetError(
        f"unknown privacy event {kind!r}; expected one of {', '.join(sorted(EVENT_TYPES))}."
    )


__all__ = [
    "EVENT_TYPES",
    "SAMPLED_EVENTS",
    "ApproxEvent",
    "ComposedEvent",
    "ExponentialEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "PoissonSampledEvent",
    "PrivacyEvent",
    "PureEvent",
    "RandomizedResponseEvent",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ThresholdedEvent",
    "ZCDPEvent",
    "event_from_dict",
    "flatten",
]
