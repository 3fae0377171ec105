"""A statistical privacy audit: a Clopper–Pearson lower bound on ε (or δ) from samples.

The procedure of docs/mathematics.md §10:

1. draw ``n_sel`` outputs on each of two neighbouring datasets x, x';
2. over an event family — threshold events {T ≥ t}, {T ≤ t} at 64 pooled quantiles for
   real outputs, point events {T = v} for discrete ones — and both directions (x over
   x', x' over x), pick the one maximising a loose (α = 0.05) CP lower bound on
   ln(p₁/p₀) (or on δ = p₁ − e^ε p₀);
3. draw ``n_test`` FRESH outputs per dataset and, for that single event, report
   ε_lb = ln(CP_lower(k₁, n; α/2) / CP_upper(k₀, n; α/2)) with α = 1e-6
   (δ_lb = CP_lower(k₁) − e^ε CP_upper(k₀) for (ε, δ) mechanisms);
4. the mechanism FAILS iff ε_lb > ε_claimed (δ_lb > δ_claimed).

A correct mechanism fails with probability ≤ α for every seed (the event is chosen on
independent samples and one hypothesis is tested). Samplers take ``(size, rng)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

Sampler = Callable[[int, np.random.Generator], np.ndarray]

N_QUANTILES = 64


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided (1−α) Clopper–Pearson lower bound on a binomial proportion."""
    return 0.0 if k <= 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided (1−α) Clopper–Pearson upper bound on a binomial proportion."""
    return 1.0 if k >= n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))


@dataclass(frozen=True)
class Event:
    """{out ≥ t} (kind 'ge'), {out ≤ t} ('le') or {out = t} ('eq'); ``flip`` swaps x and x'."""

    kind: str
    threshold: float
    flip: bool

    def count(self, out: np.ndarray) -> int:
        if self.kind == "ge":
            return int(np.count_nonzero(out >= self.threshold))
        if self.kind == "le":
            return int(np.count_nonzero(out <= self.threshold))
        return int(np.count_nonzero(out == self.threshold))


@dataclass(frozen=True)
class AuditResult:
    """The test-stage outcome. ``bound`` is ε_lb (or δ_lb for a δ-audit)."""

    bound: float
    claimed: float
    event: Event
    k1: int
    k0: int
    n: int

    @property
    def flagged(self) -> bool:
        return self.bound > self.claimed


def _events(pooled: np.ndarray, discrete: bool) -> list[Event]:
    if discrete:
        values = np.unique(pooled)
        return [Event("eq", float(v), f) for v in values for f in (False, True)]
    qs = np.unique(np.quantile(pooled, np.linspace(0, 1, N_QUANTILES + 2)[1:-1]))
    return [Event(kind, float(t), f) for t in qs for kind in ("ge", "le") for f in (False, True)]


def _counts(ev: Event, a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """(k₁, k₀): counts on the numerator and the denominator dataset."""
    ka, kb = ev.count(a), ev.count(b)
    return (kb, ka) if ev.flip else (ka, kb)


def _eps_stat(k1: int, k0: int, n: int, alpha: float) -> float:
    lo, hi = cp_lower(k1, n, alpha / 2), cp_upper(k0, n, alpha / 2)
    return -math.inf if lo <= 0.0 else math.log(lo / hi)


def _delta_stat(k1: int, k0: int, n: int, alpha: float, eps: float) -> float:
    return cp_lower(k1, n, alpha / 2) - math.exp(eps) * cp_upper(k0, n, alpha / 2)


def _audit(
    sample_x: Sampler,
    sample_xp: Sampler,
    claimed: float,
    rng: np.random.Generator,
    stat: Callable[[int, int, int, float], float],
    discrete: bool,
    n_sel: int,
    n_test: int,
    alpha: float,
) -> AuditResult:
    sel_a, sel_b = np.asarray(sample_x(n_sel, rng)), np.asarray(sample_xp(n_sel, rng))
    best, best_ev = -math.inf, None
    for ev in _events(np.concatenate([sel_a, sel_b]), discrete):
        k1, k0 = _counts(ev, sel_a, sel_b)
        s = stat(k1, k0, n_sel, 0.05)
        if s > best or best_ev is None:
            best, best_ev = s, ev
    assert best_ev is not None
    test_a, test_b = np.asarray(sample_x(n_test, rng)), np.asarray(sample_xp(n_test, rng))
    k1, k0 = _counts(best_ev, test_a, test_b)
    return AuditResult(stat(k1, k0, n_test, alpha), claimed, best_ev, k1, k0, n_test)


def audit_epsilon(
    sample_x: Sampler,
    sample_xp: Sampler,
    eps_claimed: float,
    rng: np.random.Generator,
    *,
    discrete: bool = False,
    n_sel: int = 20_000,
    n_test: int = 200_000,
    alpha: float = 1e-6,
) -> AuditResult:
    """ε-audit of a pure-DP mechanism on one neighbouring pair (both directions)."""
    return _audit(sample_x, sample_xp, eps_claimed, rng, _eps_stat, discrete, n_sel, n_test, alpha)


def audit_delta(
    sample_x: Sampler,
    sample_xp: Sampler,
    eps: float,
    delta_claimed: float,
    rng: np.random.Generator,
    *,
    discrete: bool = False,
    n_sel: int = 20_000,
    n_test: int = 200_000,
    alpha: float = 1e-6,
) -> AuditResult:
    """δ-audit of an (ε, δ)-DP mechanism at the claimed ε: flags δ_lb > δ_claimed."""

    def stat(k1: int, k0: int, n: int, a: float) -> float:
        return _delta_stat(k1, k0, n, a, eps)

    return _audit(sample_x, sample_xp, delta_claimed, rng, stat, discrete, n_sel, n_test, alpha)
