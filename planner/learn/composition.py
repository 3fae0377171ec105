"""Learn demo: The cost of asking many questions (composition; Gatica-Perez et al.).

Part of :mod:`planner.learn` (one module per demo); see its docstring for the
warning on the numpy noise drawn here (demonstration only, never released).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from planner.core.rootfind import bisect, least_integer
from planner.learn._common import _COUNT, IntArray
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms.base import FloatArray, Sensitivity
from planner.planning.mechanisms.laplace import LAPLACE

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.privacy import accounting
from planner.privacy.accountants import RULES, Spend, accountant
from planner.privacy.budget import Budget, CompositionRule, as_budget
from planner.privacy.events import LaplaceEvent, SelfComposedEvent


def drv_crossover_k(epsilon0: float, delta: float) -> int | None:
    """Least k at which DRV's advanced bound ε₀√(2k ln(1/δ)) + kε₀(e^{ε₀} − 1) < kε₀.

    None if it never happens (e^{ε₀} ≥ 2). Found by bisection on
    :func:`planner.privacy.accounting.drv_epsilon` (the gap is a√k − ck: one sign change).
    """
    e0 = float(v.epsilons(epsilon0))
    if math.expm1(e0) >= 1.0:
        return None

    def beats(k: int) -> bool:
        return accounting.drv_epsilon(e0, k, delta) < k * e0

    return least_integer(beats)


def advanced_crossover_k(epsilon0: float, delta: float, k_max: int = 1_000_000) -> int | None:
    """Least k at which the engine's advanced bound (min of DRV and KOV) beats basic.

    Bisection over k on :func:`planner.privacy.accounting.advanced_best`; None if not by ``k_max``.
    """
    e0 = float(v.epsilons(epsilon0))

    def beats(k: int) -> bool:
        return accounting.advanced_best(np.full(k, e0), None, delta)[0] < k * e0 * (1 - 1e-12)

    return least_integer(beats, limit=k_max)


@dataclass(frozen=True, slots=True)
class CompositionCurves:
    """Total ε of k Laplace queries at ε₀ each under each composition rule."""

    k: IntArray
    epsilon0: float
    delta: float
    basic: FloatArray
    drv: FloatArray  # DRV's formula at δ' = δ (as in Gatica-Perez et al., AIDA 2022)
    advanced: FloatArray  # the engine's min(basic, DRV, KOV) at δ' = δ
    rdp: FloatArray  # RDP of k Laplace events, converted at δ
    drv_crossover: int | None
    advanced_crossover: int | None


def _rdp_repeated(e0: float, k: int, delta: float) -> float:
    """RDP total ε of k Laplace queries at ε₀ each, converted at δ (the RDP accountant)."""
    return _composed(CompositionRule.RDP, e0, k, delta)


def composition_curves(epsilon0: float, ks: Sequence[int], delta: float) -> CompositionCurves:
    """Total ε of k queries at ε₀ (Laplace) under basic, advanced (DRV, engine) and RDP.

    The engine's advanced bound is never above DRV's, so its crossover is searched only
    up to DRV's (or 100,000 queries when DRV never beats basic).
    """
    e0 = float(v.epsilons(epsilon0))
    kk = np.asarray(sorted({v.count(k, "k") for k in ks}), dtype=np.int64)
    basic = np.array([accounting.compose_basic(np.full(int(k), e0))[0] for k in kk])
    drv = np.array([accounting.drv_epsilon(e0, int(k), delta) for k in kk])
    adv = np.array([accounting.advanced_best(np.full(int(k), e0), None, delta)[0] for k in kk])
    rdp = np.array([_rdp_repeated(e0, int(k), delta) for k in kk])
    drv_cross = drv_crossover_k(e0, delta)
    return CompositionCurves(
        k=kk,
        epsilon0=e0,
        delta=float(delta),
        basic=np.asarray(basic, dtype=np.float64),
        drv=np.asarray(drv, dtype=np.float64),
        advanced=np.asarray(adv, dtype=np.float64),
        rdp=np.asarray(rdp, dtype=np.float64),
        drv_crossover=drv_cross,
        advanced_crossover=advanced_crossover_k(e0, delta, drv_cross if drv_cross is not None else 100_000),
    )


#: The composition rules the demo compares (the registry's basic, advanced and RDP rules).
DEMO_RULES: Final[tuple[CompositionRule, ...]] = (CompositionRule.BASIC, CompositionRule.ADVANCED, CompositionRule.RDP)


def _composed(rule: CompositionRule | str, e0: float, k: int, delta: float) -> float:
    """Total ε of k Laplace queries at ε₀ each under ``rule``, by the rule's own accountant
    (:func:`planner.privacy.accountants.accountant`): k spends assigned ε₀ for the rules that
    read assigned pairs, the k-fold Laplace event for the others."""
    r = RULES[CompositionRule(rule)]
    if r.reads_assigned:
        return accountant(r.name).compose([Spend(LaplaceEvent(1.0 / e0), e0)], count=k).epsilon(delta)
    return accountant(r.name).compose([SelfComposedEvent(LaplaceEvent(1.0 / e0), k)]).epsilon(delta)


def per_query_epsilon(total: Budget | float, k: int, delta: float | None = None,
                      rule: CompositionRule | str | None = None) -> float:
    """Largest ε₀ such that k Laplace queries at ε₀ compose to ≤ the total ε under the rule.

    ``total`` is a :class:`~planner.privacy.budget.Budget`, or the total ε with its δ and
    rule. Bisection in log ε₀ keeping the feasible end (never over budget); relative
    precision about 1e-6. Basic gives total/k exactly.
    """
    budget = as_budget(float(v.epsilons(total, "total_epsilon")) if not isinstance(total, Budget) else total,
                       delta, rule)
    tot, d, r = budget.epsilon, budget.delta, budget.rule
    kk = v.count(k, "k")
    if r is CompositionRule.BASIC:
        return tot / kk
    lo = tot / kk  # basic: always within budget (every rule is ≤ basic)
    hi = 2.0 * tot
    while _composed(r, hi, kk, d) <= tot:
        lo, hi = hi, 2.0 * hi

    def done(a: float, b: float) -> bool:
        return b / a - 1.0 < 1e-7

    if not done(lo, hi):
        lo, hi = bisect(lambda mid: _composed(r, mid, kk, d) > tot, lo, hi, iterations=40, geometric=True, done=done)
    return lo


@dataclass(frozen=True, slots=True)
class AccuracyPerRule:
    """For a fixed total ε: per-query ε₀ and Laplace RMSE √2·Δ/ε₀ under each rule."""

    k: IntArray
    total_epsilon: float
    delta: float
    sensitivity: float
    per_query: dict[CompositionRule, FloatArray]
    rmse: dict[CompositionRule, FloatArray]


def accuracy_per_rule(
    total_epsilon: float, ks: Sequence[int], delta: float, sensitivity: float = 1.0
) -> AccuracyPerRule:
    """Per-query ε₀ and RMSE of k Laplace queries sharing a total ε, under each rule."""
    kk = np.asarray(sorted({v.count(k, "k") for k in ks}), dtype=np.int64)
    sens = Sensitivity(float(sensitivity), float(sensitivity))
    per: dict[CompositionRule, FloatArray] = {}
    err: dict[CompositionRule, FloatArray] = {}
    for r in DEMO_RULES:
        e0 = np.array([per_query_epsilon(Budget(total_epsilon, delta, r), int(k)) for k in kk])
        per[r] = np.asarray(e0, dtype=np.float64)
        err[r] = LAPLACE.rmse(LAPLACE.scale_for(e0, sens))
    return AccuracyPerRule(kk, float(total_epsilon), float(delta), sens.l1, per, err)


def simulate_count_answers(
    true_count: float, epsilon: float, size: int, rng: np.random.Generator
) -> FloatArray:
    """``size`` demo draws of a count (Δ = 1) answered with Laplace noise at ε (never released)."""
    b = float(LAPLACE.scale_for(epsilon, _COUNT))
    return LAPLACE.simulate(float(true_count), b, v.count(size, "size"), rng)


def log_grid(k_max: int, points: int = 25) -> list[int]:
    """About ``points`` distinct integers from 1 to k_max, evenly spaced on a log scale."""
    km = v.count(k_max, "k_max")
    g = np.unique(np.round(np.logspace(0.0, math.log10(km), v.count(points, "points"))))
    return [int(x) for x in g]
