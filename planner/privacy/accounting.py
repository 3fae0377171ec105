"""Composition of privacy spends: the entry points the planner, the ledger and the CLI use.

The formulas live in :mod:`planner.privacy.accountants` (one module per rule: basic, advanced,
RDP, zCDP); this module gathers the public functions in one place and adds the two
operations that are not a composition rule: group privacy and amplification by
subsampling.

* :func:`total_epsilon` — the composed ε of recorded spends under a rule;
* :func:`compare_rules` — the same spends under every rule;
* :func:`group_privacy`, :func:`subsample_pure`.

References
----------
.. [DR14] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy",
   FnT-TCS 2014, Thm 2.2 (group privacy, pure).
.. [V17] S. Vadhan, "The Complexity of Differential Privacy", 2017, Lemma 2.2.
.. [BBG18] B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling: Tight
   Analyses via Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647, Thm 9.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from planner.core.errors import BudgetError
from planner.privacy.accountants import ACCOUNTANTS, accountant, total_epsilon
from planner.privacy.accountants.advanced import (
    advanced_best,
    advanced_epsilon,
    advanced_total,
    drv_epsilon,
    kov_root_term,
)
from planner.privacy.accountants.base import Spend
from planner.privacy.accountants.basic import (
    basic_total,
    compose_basic,
    compose_parallel,
    standalone_epsilon,
)
from planner.privacy.accountants.pure import pure_epsilon
from planner.privacy.accountants.rdp import event_rdp, rdp_curve, rdp_epsilon, rdp_to_epsilon
from planner.privacy.accountants.zcdp import conversion, event_rho, zcdp_rho, zcdp_to_approx_epsilon
from planner.privacy.budget import DEFAULT_ORDERS, CompositionRule, check_delta, check_epsilon

__all__ = [
    "ACCOUNTANTS",
    "DEFAULT_ORDERS",
    "CompositionRule",
    "Spend",
    "accountant",
    "advanced_best",
    "advanced_epsilon",
    "advanced_total",
    "compare_rules",
    "compose_basic",
    "compose_parallel",
    "conversion",
    "drv_epsilon",
    "event_rdp",
    "event_rho",
    "group_privacy",
    "kov_root_term",
    "pure_epsilon",
    "rdp_curve",
    "rdp_epsilon",
    "rdp_to_epsilon",
    "standalone_epsilon",
    "subsample_pure",
    "total_assigned_epsilon",
    "total_epsilon",
    "zcdp_rho",
    "zcdp_to_approx_epsilon",
]


def total_assigned_epsilon(epsilons: np.ndarray, deltas: np.ndarray, rule: CompositionRule, delta: float) -> float:
    """:func:`total_epsilon` under the basic or advanced rule, from the spends' assigned
    (εᵢ, δᵢ) as arrays (what those two rules read; the planner's exact fit calls this
    without building :class:`Spend` records)."""
    if rule is CompositionRule.ADVANCED:
        return advanced_best(epsilons, deltas, delta)[0]
    if rule is not CompositionRule.BASIC:
        raise BudgetError(
            f"assigned (ε, δ) pairs compose under the basic and advanced rules only; got {rule.value}."
        )
    return basic_total(np.asarray(epsilons, dtype=np.float64), np.asarray(deltas, dtype=np.float64), check_delta(delta))


def compare_rules(spends: Sequence[Spend], delta: float) -> dict[CompositionRule, float]:
    """ε of ``spends`` at δ under every rule; inf where a rule does not apply.

    Examples
    --------
    >>> from planner.privacy.events import LaplaceEvent
    >>> out = compare_rules([Spend(LaplaceEvent(1.0), 1.0)], 0.0)
    >>> out[CompositionRule.BASIC], out[CompositionRule.RDP], out[CompositionRule.ZCDP]
    (1.0, 1.0, 1.0)
    """
    d = check_delta(delta)
    out: dict[CompositionRule, float] = {}
    for rule in ACCOUNTANTS:
        try:
            out[rule] = total_epsilon(spends, rule, d)
        except BudgetError:
            out[rule] = math.inf
    return out


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """Privacy for groups of k records: (ε, δ) becomes (kε, k e^{(k−1)ε} δ).

    Returns δ capped at 1 (a δ of 1 promises nothing). docs/mathematics.md §5;
    Garivier, "How to learn while respecting individual privacy?" (ENS de Lyon, 2021);
    Gatica-Perez et al., "An introduction to trustworthy machine learning" (AIDA, 2022).

    References
    ----------
    C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", Thm 2.2
    (pure); S. Vadhan, "The Complexity of Differential Privacy", 2017, Lemma 2.2
    (the (ε, δ) form; k e^{(k−1)ε} δ bounds its Σⱼ e^{jε} δ).

    Examples
    --------
    >>> group_privacy(0.5, 0.0, 3)
    (1.5, 0.0)
    >>> eps, d = group_privacy(1.0, 1e-6, 2)  # (2·1, 2·e^1·1e-6)
    >>> eps, round(d / 1e-6, 9)
    (2.0, 5.436563657)
    """
    eps = check_epsilon(epsilon)
    dl = check_delta(delta)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise BudgetError(
            f"k must be an integer ≥ 1 (records per group); got {k!r}. Use the most rows one "
            "person can contribute."
        )
    n = int(k)
    if dl == 0.0:
        return n * eps, 0.0
    log_d = math.log(n) + (n - 1) * eps + math.log(dl)
    return n * eps, 1.0 if log_d >= 0.0 else math.exp(log_d)


def subsample_pure(epsilon: float, q: float) -> float:
    """Amplification by Poisson subsampling at rate q of an ε-DP mechanism.

    Returns ln(1 + q(e^ε − 1)) (computed as log1p(q·expm1(ε))).

    References
    ----------
    B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling: Tight
    Analyses via Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647, Thm 9
    (docs/mathematics.md §5; the AIDA course notes).

    Examples
    --------
    >>> round(subsample_pure(math.log(3.0), 0.5), 12)  # ln(1 + 0.5·(3 − 1)) = ln 2
    0.69314718056
    """
    eps = check_epsilon(epsilon)
    try:
        rate = float(q)
    except (TypeError, ValueError) as exc:
        raise BudgetError(f"q must be a sampling rate in (0, 1]; got {q!r}.") from exc
    if not (0.0 < rate <= 1.0):
        raise BudgetError(
            f"q must be a sampling rate in (0, 1]; got {rate}. Use q = 1 for no sampling."
        )
    return math.log1p(rate * math.expm1(eps))
