"""Secret samples: a table that is a random sample of a population drawn at a public rate.

When the owner declares that the table is a *secret* random sample of a larger population
(nobody outside learns who was drawn) at a public rate q, every release on it is protected
twice: by its noise and by the sampling. The whole history of releases runs on the *same*
sample, so the amplification applies once, to the composed cost of everything ever released
(Gatica-Perez, Sajadmanesh & Shahin Shamsabadi, "An introduction to trustworthy machine
learning", AIDA course, November 2022; Balle, Barthe & Gaboardi 2018):

    an (ε, δ)-DP composition run on the sample is (ln(1 + q(e^ε − 1)), q·δ)-DP
    for the population.

This is different from the *per-step* sampling of DP-SGD, where every step draws a fresh
batch: those are events (:class:`~planner.privacy.events.PoissonSampledEvent`) and each step is
amplified separately, before composition. Treating one secret sample as independent
per-query samples would understate the cost.

Two schemes, each valid under its own neighbouring relation (of the population):

* ``poisson`` — each member of the population enters independently with probability q
  (add/remove-one neighbours; Balle et al. 2018, Thm 9);
* ``without_replacement`` — exactly n = q·N members drawn uniformly (substitute-one
  neighbours, N public; Balle et al. 2018, Thm 10).

The planner uses :meth:`Sampling.base_budget` (the budget the releases on the sample may
compose to), the ledger :func:`sampled_total_epsilon` (the population's cost of the recorded
spends); both go through the same accountants as an unsampled table.

References
----------
.. [BBG18] B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling: Tight
   Analyses via Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647, Thms 9–10.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from planner.core.errors import BudgetError
from planner.privacy.budget import CompositionRule, check_delta, check_epsilon

if TYPE_CHECKING:  # the accountants import nothing from here; only the annotation needs them
    from planner.privacy.accountants.base import Accountant

#: The largest δ handed to the composition of the sample (δ/q can exceed 1).
_MAX_BASE_DELTA: Final[float] = 1.0 - 1e-12


class SamplingScheme(StrEnum):
    """How the table was drawn from the population."""

    POISSON = "poisson"
    WITHOUT_REPLACEMENT = "without_replacement"


#: The neighbouring relation each scheme's amplification holds under (the values of
#: :class:`planner.data.schema.Relation`).
RELATION: Final[Mapping[SamplingScheme, str]] = {
    SamplingScheme.POISSON: "add_remove",
    SamplingScheme.WITHOUT_REPLACEMENT: "substitute",
}


@dataclass(frozen=True, slots=True)
class Sampling:
    """The declaration "this table is a secret random sample at rate q".

    Parameters
    ----------
    rate
        The public sampling rate q ∈ (0, 1] (expected sample size / population size).
    scheme
        ``poisson`` (add/remove neighbours) or ``without_replacement`` (substitute).

    Raises
    ------
    BudgetError
        Rate outside (0, 1] or an unknown scheme.

    Examples
    --------
    >>> s = Sampling(0.01)
    >>> s.relation
    'add_remove'
    >>> round(s.amplify(1.0, 1e-6)[0], 6)  # ln(1 + 0.01(e − 1))
    0.017037
    """

    rate: float
    scheme: SamplingScheme = SamplingScheme.POISSON

    def __post_init__(self) -> None:
        try:
            q = float(self.rate)
        except (TypeError, ValueError) as exc:
            raise BudgetError(f"sampling.rate must be a number in (0, 1]; got {self.rate!r}.") from exc
        if not (math.isfinite(q) and 0.0 < q <= 1.0):
            raise BudgetError(
                f"sampling.rate must be in (0, 1]; got {q}. Declare the public fraction of the "
                "population drawn into the table (1 = the whole population)."
            )
        object.__setattr__(self, "rate", q)
        try:
            object.__setattr__(self, "scheme", SamplingScheme(self.scheme))
        except ValueError as exc:
            raise BudgetError(
                f"sampling.scheme must be one of {', '.join(s.value for s in SamplingScheme)}; "
                f"got {self.scheme!r}."
            ) from exc

    @property
    def relation(self) -> str:
        """The neighbouring relation the amplification holds under ("add_remove" or "substitute")."""
        return RELATION[self.scheme]

    def check_relation(self, relation: str) -> None:
        """Refuse a schema whose neighbouring relation does not match the scheme.

        Raises
        ------
        BudgetError
            E.g. Poisson sampling declared on a substitute-one schema.
        """
        if str(relation) != self.relation:
            raise BudgetError(
                f"sampling.scheme {self.scheme.value!r} amplifies privacy under the {self.relation} "
                f"relation, but the schema declares {str(relation)!r}. Use "
                f"{'without_replacement' if self.scheme is SamplingScheme.POISSON else 'poisson'} "
                "sampling, or change the schema's relation."
            )

    def amplify(self, epsilon: float, delta: float) -> tuple[float, float]:
        """The population's (ε′, δ′) of an (ε, δ)-DP composition run on the sample:
        (ln(1 + q(e^ε − 1)), q·δ) [BBG18, Thms 9–10].

        Examples
        --------
        >>> Sampling(1.0).amplify(0.5, 1e-6)
        (0.5, 1e-06)
        """
        eps = float(epsilon)
        if math.isnan(eps) or eps < 0:
            raise BudgetError(f"epsilon must be ≥ 0; got {epsilon}.")
        d = check_delta(delta)
        if not math.isfinite(eps):
            return math.inf, self.rate * d
        if eps < 700:
            return math.log1p(self.rate * math.expm1(eps)), self.rate * d
        # e^ε overflows past 709.78: ln(q·e^ε + (1 − q)) as a log-sum-exp of ln q + ε and ln(1 − q)
        a, b = math.log(self.rate) + eps, (math.log1p(-self.rate) if self.rate < 1 else -math.inf)
        return max(a, b) + math.log1p(math.exp(-abs(a - b))), self.rate * d

    def base_delta(self, delta: float) -> float:
        """The δ the composition on the sample is accounted at for a population δ:
        min(δ/q, 1 − 1e-12) (0 for δ = 0); amplified, it is at most δ.

        Examples
        --------
        >>> Sampling(0.1).base_delta(1e-7), Sampling(0.1).base_delta(0.0)
        (1e-06, 0.0)
        """
        d = check_delta(delta)
        return min(d / self.rate, _MAX_BASE_DELTA) if d > 0 else 0.0

    def base_budget(self, epsilon: float, delta: float) -> tuple[float, float]:
        """The (ε, δ) the releases on the sample may compose to so that the population's cost
        is at most (ε, δ): ε_s = ln(1 + (e^ε − 1)/q), δ_s = min(δ/q, 1 − 1e-12).

        The planner allocates ``base_budget(...)`` with the unchanged accountants;
        :meth:`amplify` maps it back to at most the budget (the map is increasing).

        Examples
        --------
        >>> eps_s, d_s = Sampling(0.1).base_budget(0.5, 1e-7)
        >>> round(eps_s, 6), d_s  # ln(1 + (e^0.5 − 1)/0.1)
        (2.013197, 1e-06)
        >>> round(Sampling(0.1).amplify(eps_s, d_s)[0], 12)
        0.5
        """
        eps = check_epsilon(epsilon)
        d = check_delta(delta)
        with_room = math.log1p(math.expm1(eps) / self.rate) if eps < 700 else eps - math.log(self.rate)
        # the round trip must not exceed ε: step down by a few ulps if rounding overshoots
        while self.amplify(with_room, 0.0)[0] > eps:
            with_room = math.nextafter(with_room, 0.0)
        return with_room, self.base_delta(d)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the schema's ``sampling`` field): ``{"rate": q, "scheme": ...}``."""
        return {"rate": self.rate, "scheme": self.scheme.value}

    @classmethod
    def from_dict(cls, data: Any) -> Sampling:
        """Read the JSON form; :class:`BudgetError` naming the field on anything else."""
        if not isinstance(data, Mapping):
            raise BudgetError('sampling must be an object such as {"rate": 0.01, "scheme": "poisson"}.')
        unknown = sorted(set(data) - {"rate", "scheme"})
        if unknown:
            raise BudgetError(f"sampling has unknown field(s) {unknown[:5]}; the fields are rate and scheme.")
        if "rate" not in data:
            raise BudgetError("sampling.rate is missing: the public fraction of the population in the table.")
        rate = data["rate"]
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            raise BudgetError(f"sampling.rate must be a number in (0, 1]; got {type(rate).__name__}.")
        return cls(float(rate), data.get("scheme", SamplingScheme.POISSON.value))


def sampled_epsilon(acct: Accountant, delta: float, sampling: Sampling | None) -> float:
    """The population's ε of a composed accountant at total δ when the table is a secret
    sample: the accountant's ε at δ/q (:meth:`Sampling.base_delta`) for the composition on
    the sample, amplified once (:meth:`Sampling.amplify`). Without ``sampling``, ``acct``'s ε
    at δ.

    The accountant may have been composed release by release (the ledger keeps one per
    dataset): it keeps its answers by δ, so the base δ is converted once.

    Examples
    --------
    >>> from planner.privacy.accountants import Spend, accountant
    >>> from planner.privacy.events import LaplaceEvent
    >>> acct = accountant("basic").compose([Spend(LaplaceEvent(1.0), 1.0)])
    >>> round(sampled_epsilon(acct, 0.0, Sampling(0.5)), 12)  # ln(1 + (e − 1)/2)
    0.620114506958
    """
    d = check_delta(delta)
    if sampling is None:
        return acct.epsilon(d)
    base_delta = sampling.base_delta(d)
    return sampling.amplify(acct.epsilon(base_delta), base_delta)[0]


def sampled_total_epsilon(
    spends: Sequence[Any], rule: CompositionRule | str, delta: float, sampling: Sampling | None
) -> float:
    """The population's ε of the recorded ``spends`` at total δ when the table is a secret
    sample: :func:`sampled_epsilon` of their composition under ``rule``.

    Without ``sampling`` this is :func:`planner.privacy.accountants.total_epsilon`.

    Examples
    --------
    >>> from planner.privacy.accountants import Spend
    >>> from planner.privacy.events import LaplaceEvent
    >>> spends = [Spend(LaplaceEvent(1.0), 1.0)]
    >>> round(sampled_total_epsilon(spends, "basic", 0.0, Sampling(0.5)), 12)  # ln(1 + (e − 1)/2)
    0.620114506958
    """
    from planner.privacy.accountants import accountant, total_epsilon

    d = check_delta(delta)
    if sampling is None:
        return total_epsilon(spends, rule, d)
    return sampled_epsilon(accountant(rule).compose(spends), d, sampling)


__all__ = ["RELATION", "Sampling", "SamplingScheme", "sampled_epsilon", "sampled_total_epsilon"]
