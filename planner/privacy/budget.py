"""Privacy budgets and costs as immutable, validated values.

* :class:`Budget` — a total (ε, δ) and the :class:`CompositionRule` its spends compose
  under: the one budget value passed to planning, allocation, release and the ledger, with
  the one test of fitting (:meth:`Budget.fits`, :data:`BUDGET_TOLERANCE`).
* :class:`RDPCurve` — Rényi DP (Mironov 2017): ε(α) on a grid of orders α > 1.
* :func:`check_epsilon`, :func:`check_delta` — the validation every ε and δ goes through.

Constructors validate and raise :class:`~planner.core.errors.BudgetError` with a message that
names the parameter, the constraint, the value and a remedy.

The shared order grid :data:`DEFAULT_ORDERS` is dense and log-spaced (fractional orders
included) so that RDP → (ε, δ) conversion minimised over it is within a fraction of a
percent of the continuous minimum; the accountant refines the minimum continuously.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError

FloatArray = npt.NDArray[np.float64]

#: Dense grid of Rényi orders: 1.001 … 1e5, log-spaced in (α − 1), 1200 points.
DEFAULT_ORDERS: Final[FloatArray] = 1.0 + np.geomspace(1e-3, 1e5, 1200)
DEFAULT_ORDERS.setflags(write=False)


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Validate a privacy-loss parameter ε: finite and > 0.

    Examples
    --------
    >>> check_epsilon(0.5)
    0.5
    """
    try:
        value = float(epsilon)
    except (TypeError, ValueError) as exc:
        raise BudgetError(
            f"{name} must be a number; got {epsilon!r}. Pick a positive privacy budget."
        ) from exc
    if not math.isfinite(value) or value <= 0.0:
        raise BudgetError(f"{name} must be > 0 and finite; got {value}. Pick a positive privacy budget.")
    return value


def check_delta(delta: float, name: str = "delta") -> float:
    """Validate δ: 0 ≤ δ < 1.

    Examples
    --------
    >>> check_delta(1e-6)
    1e-06
    """
    try:
        value = float(delta)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"{name} must be a number in [0, 1); got {delta!r}.") from exc
    if not math.isfinite(value) or value < 0.0 or value >= 1.0:
        raise BudgetError(
            f"{name} must satisfy 0 ≤ {name} < 1; got {value}. "
            "Use a small value such as 1e-6 (well below 1/n), or 0 for pure DP."
        )
    return value


class SplitMode(StrEnum):
    """How a plan splits its budget across the queries (PLAN.json's ``mode``; the
    functions are in :mod:`planner.planning.workload`)."""

    WEIGHTED = "weighted"  # the optimal split for the queries' weights (workload.plan)
    TARGET = "target"  # the least ε meeting every query's target (workload.plan_for_targets)
    EQUAL = "equal"  # every query part gets the same ε (workload.plan_equal)
    MANUAL = "manual"  # every share typed by the owner (workload.plan_manual)


class CompositionRule(StrEnum):
    """How the costs of several mechanisms add up (docs/mathematics.md §5); one accountant class each
    in :mod:`planner.privacy.accountants`."""

    BASIC = "basic"
    ADVANCED = "advanced"
    RDP = "rdp"
    ZCDP = "zcdp"
    #: The optimal accountant: privacy loss distributions composed by FFT
    #: (:mod:`planner.privacy.accountants.pld`).
    PLD = "pld"


#: Relative slack of every budget comparison: float noise only (1e-12 of the total), so a
#: composed cost that equals the budget up to rounding fits, and nothing larger does. The one
#: tolerance of the planner, the pages and the ledger (:meth:`Budget.fits`).
BUDGET_TOLERANCE: Final[float] = 1e-12


def within_budget(cost: float, total: float) -> bool:
    """Whether a composed ``cost`` fits a total ε: cost ≤ total + 1e-12·total and finite.

    The one test of fitting (:meth:`Budget.fits` calls it), rounded toward more privacy: the
    slack is float noise only, NaN and inf never fit.

    Examples
    --------
    >>> within_budget(1.0 + 1e-13, 1.0), within_budget(1.0 + 1e-11, 1.0), within_budget(float("nan"), 1.0)
    (True, False, False)
    """
    c = float(cost)
    return math.isfinite(c) and c <= total + BUDGET_TOLERANCE * total


@dataclass(frozen=True, slots=True)
class Budget:
    """A privacy budget: total (ε, δ) and the rule its spends are composed under.

    The one value passed to planning, allocation, release and the ledger (the Tumult model:
    a frozen, validated budget with one tolerance, applied toward privacy): the planning
    entry points take a Budget where they took (ε, δ, rule), and whether a cost fits is
    :meth:`fits`, everywhere.

    Examples
    --------
    >>> b = Budget(1.0, 1e-6, "rdp")
    >>> b.rule
    <CompositionRule.RDP: 'rdp'>
    >>> b.fits(1.0 + 1e-13), b.fits(1.001)
    (True, False)
    """

    epsilon: float
    delta: float = 0.0
    rule: CompositionRule = CompositionRule.BASIC

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))
        try:
            object.__setattr__(self, "rule", CompositionRule(self.rule))
        except ValueError as exc:
            raise BudgetError(
                f"rule must be one of {', '.join(r.value for r in CompositionRule)}; got {self.rule!r}."
            ) from exc

    def fits(self, cost: float) -> bool:
        """Whether a composed ε ``cost`` fits: cost ≤ ε·(1 + 1e-12) (:func:`within_budget`,
        the ledger's test); NaN and inf never fit."""
        return within_budget(cost, self.epsilon)

    def with_epsilon(self, epsilon: float) -> Budget:
        """The same δ and rule with another total ε (a what-if, or what remains)."""
        return Budget(epsilon, self.delta, self.rule)

    def to_dict(self) -> dict[str, float | str]:
        """The JSON form used by PLAN.json: ``{"epsilon", "delta", "composition"}``."""
        return {"epsilon": self.epsilon, "delta": self.delta, "composition": self.rule.value}


def as_budget(epsilon: Budget | float, delta: float | None = None, rule: CompositionRule | str | None = None) -> Budget:
    """A :class:`Budget` from a Budget, or from a loose (ε, δ, rule) (δ 0 and basic by default).

    Planning entry points take ``Budget | float`` where they took ε: a Budget carries its δ
    and rule, and giving them again is refused (two sources of one value).

    Raises
    ------
    BudgetError
        A Budget given with a δ or a rule beside it; an invalid ε, δ or rule.

    Examples
    --------
    >>> as_budget(Budget(1.0, 1e-6, "rdp")).rule.value, as_budget(2.0).delta
    ('rdp', 0.0)
    """
    if isinstance(epsilon, Budget):
        if delta is not None or rule is not None:
            raise BudgetError("pass a Budget alone, or ε with its δ and rule; not a Budget and a δ or rule beside it.")
        return epsilon
    try:
        named = CompositionRule.BASIC if rule is None else CompositionRule(rule)
    except ValueError as exc:
        raise BudgetError(
            f"rule must be one of {', '.join(r.value for r in CompositionRule)}; got {rule!r}."
        ) from exc
    return Budget(epsilon, 0.0 if delta is None else delta, named)


@dataclass(frozen=True, slots=True)
class RDPCurve:
    """Rényi DP: ε(α) at each order α > 1 (Mironov 2017, Def. 4).

    ``eps_inf`` is the order-∞ value (the max divergence, i.e. a pure-DP ε) when the
    mechanism has one, else ``inf``; it lets pure mechanisms compose to exactly their
    basic-composition sum under RDP accounting.
    """

    orders: tuple[float, ...]
    epsilons: tuple[float, ...]
    eps_inf: float = field(default=math.inf)

    def __post_init__(self) -> None:
        if len(self.orders) == 0 or len(self.orders) != len(self.epsilons):
            raise BudgetError(
                f"an RDP curve needs as many ε values as orders; got {len(self.orders)} "
                f"orders and {len(self.epsilons)} values."
            )
        o = np.asarray(self.orders, dtype=np.float64)
        e = np.asarray(self.epsilons, dtype=np.float64)
        if np.any(~(o > 1.0)):
            raise BudgetError("RDP orders must all be > 1; use orders such as 1.5, 2, 8, 64.")
        if np.any(np.isnan(e)) or np.any(e < 0.0):
            raise BudgetError("RDP ε(α) values must be ≥ 0 (inf allowed); got a negative or NaN value.")
        if math.isnan(self.eps_inf) or self.eps_inf <= 0.0:
            raise BudgetError(f"eps_inf must be > 0 (inf allowed); got {self.eps_inf}.")

    @property
    def order_array(self) -> FloatArray:
        return np.asarray(self.orders, dtype=np.float64)

    @property
    def epsilon_array(self) -> FloatArray:
        return np.asarray(self.epsilons, dtype=np.float64)

    def __add__(self, other: RDPCurve) -> RDPCurve:
        """Composition: RDP adds order by order (Mironov 2017, Prop. 1)."""
        if self.orders != other.orders:
            raise BudgetError("RDP curves on different order grids cannot be added; use DEFAULT_ORDERS.")
        return RDPCurve(
            self.orders,
            tuple((self.epsilon_array + other.epsilon_array).tolist()),
            self.eps_inf + other.eps_inf,
        )

