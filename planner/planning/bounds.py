"""Lower bounds, utility bounds and ISM optimality (docs/mathematics.md §4).

Every result carries ``data_dependent``: True when it was computed from the raw rows
(instance-specific bounds, D_f(x, t), ISM success probabilities — for the data owner only,
never exported, docs/mathematics.md §7), False when it depends only on the schema, ε and public counts.

References
----------
.. [G] A. Garivier, "How to learn while respecting individual privacy? An introduction to
   differential privacy", lecture, ENS de Lyon, 2021: "Lower bound for continuous mechanisms"
   (the sup over k), "Lower Bound for Discrete Mechanisms", "1/4-Optimality of the ISM".
.. [AD20] H. Asi, J. Duchi, "Near Instance-Optimality in Differential Privacy",
   arXiv:2005.10630, 2020, §2 (unbiased lower bound), §3 (ISM).
.. [DR14] C. Dwork, A. Roth, 2014, Thm 3.11 (exponential mechanism utility).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.core.errors import QueryError
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms import ism

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def _solve_x0() -> float:
    """Root of (x − 2)eˣ = 2: the maximiser of x²/(1 + eˣ) on x > 0 (Newton, from x = 2.2)."""
    x = 2.2
    for _ in range(50):
        f = (x - 2.0) * math.exp(x) - 2.0
        fp = (x - 1.0) * math.exp(x)
        x -= f / fp
    return x


#: x₀ ≈ 2.2178: k²/(1 + e^{2kε}) is maximised over real k at k = x₀/(2ε).
X0: Final = _solve_x0()
_K_CHUNK: Final = 4096


@dataclass(frozen=True, slots=True)
class Bound:
    """A bound evaluated on a grid of ε.

    ``argmax_k`` is the maximising k of a sup-over-k bound (else None).
    """

    epsilon: FloatArray
    values: FloatArray
    data_dependent: bool
    description: str
    argmax_k: IntArray | None = None


def unbiased_mse_lower_bound(epsilon: npt.ArrayLike, sensitivity: float) -> Bound:
    """sup_{k ≥ 1} (kΔ)²/(4(1 + e^{2kε})): MSE lower bound for unbiased ε-DP mechanisms on a
    linear query (count, sum, mean) of sensitivity Δ. Data-independent.

    Notes
    -----
    E[(A(x) − f(x))²] ≥ sup_k Δ_f(x,k)²/(4(1 + e^{2kε})) [G; AD20, §2], and Δ_f(x,k) = kΔ
    for linear queries. The sup over integer k is computed *exactly*: ln of
    h(k) = k²/(1 + e^{2εk}) has second derivative −2/k² − 4ε²σ(1−σ) < 0 (σ the logistic
    function at 2εk), so h is log-concave hence unimodal on k > 0, maximised over reals
    at k* = x₀/(2ε) with (x₀ − 2)e^{x₀} = 2, x₀ ≈ 2.2178; the integer maximiser is
    ⌊k*⌋ or ⌈k*⌉ (clamped to k ≥ 1). For small ε the value tends to
    Δ²·x₀²/(16(1 + e^{x₀})ε²) ≈ Δ²/(33.1 ε²) — tighter than [G]'s Δ²/(68ε²).

    Examples
    --------
    >>> b = unbiased_mse_lower_bound(0.5, 1.0)  # k = 2: 4/(4(1 + e²)) = 0.119203, by hand
    >>> round(float(b.values[()]), 6), int(b.argmax_k[()])
    (0.119203, 2)
    """
    eps = v.epsilons(epsilon)
    delta = float(v.positive(sensitivity, "sensitivity"))
    kstar = X0 / (2.0 * eps)
    cands = np.stack([np.maximum(np.floor(kstar), 1.0), np.maximum(np.ceil(kstar), 1.0)])
    log_terms = 2.0 * np.log(cands * delta) - np.log(4.0) - np.logaddexp(0.0, 2.0 * cands * eps)
    best = np.argmax(log_terms, axis=0)
    k = np.take_along_axis(cands, best[None, ...], axis=0)[0]
    val = np.exp(np.take_along_axis(log_terms, best[None, ...], axis=0)[0])
    return Bound(eps, np.asarray(val, dtype=np.float64), False,
                 "MSE lower bound for unbiased mechanisms, linear query", k.astype(np.int64))


def seed_corollary_mse_bound(epsilon: npt.ArrayLike, sensitivity: float) -> FloatArray:
    """[G]'s simplification Δ²/(68ε²) (stated for ε ≤ 1/2; for comparison only)."""
    eps = v.epsilons(epsilon)
    return np.asarray(float(sensitivity) ** 2 / (68.0 * eps**2), dtype=np.float64)


def mse_lower_bound_from_modulus(
    epsilon: npt.ArrayLike, modulus: npt.ArrayLike, data_dependent: bool = True,
    description: str = "MSE lower bound for unbiased mechanisms",
) -> Bound:
    """sup_k Δ_f(x,k)²/(4(1 + e^{2kε})) from the modulus Δ_f(x, k), k = 1 … K.

    ``modulus[k−1]`` = Δ_f(x, k), non-decreasing, and constant for k ≥ K (it has
    saturated — e.g. at the range U − L), so terms beyond K only decrease and the max over
    k ≤ K is the exact sup. Terms with M²/(4(1 + e^{2kε})) below the k₁ term (M the
    largest modulus, k₁ the first k with Δ_f > 0) cannot win and are skipped.
    """
    eps = v.epsilons(epsilon)
    mod = np.asarray(modulus, dtype=np.float64).reshape(-1)
    if mod.size == 0 or np.any(mod < 0) or np.any(np.diff(mod) < -1e-12 * max(1.0, float(mod.max()))):
        raise QueryError("modulus must be a non-empty, non-negative, non-decreasing array.")
    flat = eps.reshape(-1)
    best = np.full(flat.shape, -np.inf)
    arg = np.ones(flat.shape, dtype=np.int64)
    pos = np.flatnonzero(mod > 0)
    if pos.size:
        k1 = int(pos[0]) + 1
        big_m = float(mod.max())
        base = 2 * np.log(mod[k1 - 1]) - np.logaddexp(0.0, 2 * k1 * flat)
        # k with 2 ln M − ln(1 + e^{2kε}) < base cannot win: e^{2kε} > M²e^{−base}
        kcap = np.ceil((2 * np.log(big_m) - base) / (2 * flat)) + 1
        kmax = int(min(mod.size, max(k1, float(np.max(kcap)))))
        for start in range(k1, kmax + 1, _K_CHUNK):
            ks = np.arange(start, min(kmax, start + _K_CHUNK - 1) + 1, dtype=np.float64)
            m = mod[ks.astype(np.int64) - 1]
            with np.errstate(divide="ignore"):
                logt = 2 * np.log(m)[None, :] - np.logaddexp(0.0, 2 * ks[None, :] * flat[:, None])
            i = np.argmax(logt, axis=1)
            cand = logt[np.arange(flat.size), i]
            better = cand > best
            best = np.where(better, cand, best)
            arg = np.where(better, ks[i].astype(np.int64), arg)
    vals = np.where(np.isfinite(best), np.exp(best) / 4.0, 0.0)
    return Bound(eps, np.asarray(vals.reshape(eps.shape), dtype=np.float64), data_dependent,
                 description, arg.reshape(eps.shape))


def quantile_modulus(data: npt.ArrayLike, q: float, lower: float, upper: float) -> FloatArray:
    """Δ_f(x, k), k = 1 … K_sat, for the q-quantile x_(j) under substitution. DATA-DEPENDENT.

    Notes
    -----
    Substituting k records can move x_(j) exactly to anywhere in [x_(j−k), x_(j+k)] (replace
    the k lowest by U, or the k highest by L), with x_(i) = L for i < 1 and U for i > n, so
    Δ_f(x,k) = max(x_(j+k) − x_(j), x_(j) − x_(j−k)); it saturates at K_sat = max(j, n − j + 1).
    """
    x = np.sort(np.clip(np.asarray(data, dtype=np.float64).reshape(-1), float(lower), float(upper)))
    n = x.size
    j = ism.quantile_index(n, q)
    ksat = max(j, n - j + 1)
    k = np.arange(1, ksat + 1)
    padded = np.concatenate([[float(lower)], x, [float(upper)]])  # padded[i] = x_(i), i = 0..n+1
    up = padded[np.minimum(j + k, n + 1)]
    down = padded[np.maximum(j - k, 0)]
    xj = padded[j]
    return np.asarray(np.maximum(up - xj, xj - down), dtype=np.float64)


def quantile_mse_lower_bound(
    data: npt.ArrayLike, epsilon: npt.ArrayLike, q: float, lower: float, upper: float
) -> Bound:
    """Instance-specific MSE lower bound for unbiased ε-DP quantile mechanisms. DATA-DEPENDENT."""
    return mse_lower_bound_from_modulus(
        epsilon, quantile_modulus(data, q, lower, upper), True,
        f"MSE lower bound for unbiased mechanisms, {q}-quantile (data-dependent)",
    )


def unbiased_discrete_upper_bound(distance: npt.ArrayLike, epsilon: npt.ArrayLike) -> Bound:
    """P[A(x) = f(x)] ≤ 1/Σₜ e^{−2εD_f(x,t)} for every unbiased ε-DP A [G]. DATA-DEPENDENT.

    Examples
    --------
    >>> round(float(unbiased_discrete_upper_bound([0, 1], 1.0).values[()]), 6)  # 1/(1+e^{-2})
    0.880797
    """
    from planner.core import special
    d = np.asarray(distance, dtype=np.float64).reshape(-1)
    eps = v.epsilons(epsilon)
    vals = np.exp(-special.logsumexp(-2.0 * eps[..., None] * d, axis=-1))
    return Bound(eps, np.asarray(vals, dtype=np.float64), True,
                 "upper bound on P[exact] for unbiased mechanisms (data-dependent)")


def ism_exact(distance: npt.ArrayLike, epsilon: npt.ArrayLike, halve: bool | None = None) -> Bound:
    """P[ISM(x) = f(x)] = 1/Σₜ e^{−εD_f(x,t)/2} (no /2 when |T| = 2). DATA-DEPENDENT."""
    eps = v.epsilons(epsilon)
    return Bound(eps, ism.exact_probability(distance, eps, halve), True,
                 "ISM probability of the exact answer (data-dependent)")


@dataclass(frozen=True, slots=True)
class OptimalityCheck:
    """ISM at ε versus the unbiased bound at fraction·ε (1/4, or 1/2 when |T| = 2)."""

    epsilon: FloatArray
    ism: FloatArray
    bound_at_fraction: FloatArray
    fraction: float
    holds: BoolArray
    data_dependent: bool = True


def ism_optimality(distance: npt.ArrayLike, epsilon: npt.ArrayLike) -> OptimalityCheck:
    """Check P[ISM_ε(x) = f(x)] ≥ sup over unbiased (fraction·ε)-DP A of P[A(x) = f(x)].

    Notes
    -----
    With /2: 1/Σ e^{−εD/2} equals the bound 1/Σ e^{−2(ε/4)D} — the ISM at ε matches every
    unbiased ε/4-DP mechanism's best ([G], "1/4-Optimality"); with |T| = 2 and no /2:
    1/Σ e^{−εD} = bound at ε/2. ``holds`` allows a relative tolerance of 1e-12.
    """
    d = np.asarray(distance, dtype=np.float64).reshape(-1)
    eps = v.epsilons(epsilon)
    frac = 0.5 if d.size == 2 else 0.25
    p_ism = ism.exact_probability(d, eps)
    bound = unbiased_discrete_upper_bound(d, eps * frac).values
    return OptimalityCheck(eps, p_ism, bound, frac, np.asarray(p_ism >= bound * (1 - 1e-12)))


def em_utility_bound(
    epsilon: npt.ArrayLike, n_candidates: int, beta: float = 0.05, sensitivity: float = 1.0
) -> Bound:
    """(1−β) bound on OPT − u(x, EM(x)): (2Δu/ε)·ln(|T|/β) [DR14, Thm 3.11]. Data-independent."""
    eps = v.epsilons(epsilon)
    return Bound(eps, em.utility_bound(eps, n_candidates, beta, sensitivity), False,
                 "exponential mechanism utility-loss bound")


@dataclass(frozen=True, slots=True)
class MajorityAccuracy:
    """P[correct] for binary majority [G]. DATA-DEPENDENT (uses the exact count s)."""

    epsilon: FloatArray
    exponential: FloatArray
    better: FloatArray
    unbiased_upper: FloatArray
    data_dependent: bool = True


def majority_accuracy(epsilon: npt.ArrayLike, s: int, n: int) -> MajorityAccuracy:
    """The three binary-majority formulas of docs/mathematics.md §3 on a grid of ε. DATA-DEPENDENT."""
    eps = v.epsilons(epsilon)
    return MajorityAccuracy(
        eps,
        em.majority_em_correct(eps, s, n),
        em.majority_better_correct(eps, s, n),
        em.majority_unbiased_upper_bound(eps, s, n),
    )
