"""The inverse sensitivity mechanism (ISM) for median/quantiles, mode and binary majority.

Everything here takes the EXACT data and is DATA-DEPENDENT (docs/mathematics.md §7): the results are
for the data owner's eyes only, and every result type carries ``data_dependent = True``.
Planning simulators use numpy; releases go through OpenDP.

The inverse sensitivity D_f(x, t) is the least number of records to *substitute*
(Hamming neighbours, n fixed) so that f becomes t. The ISM is the exponential mechanism
with utility −D_f (ΔD_f = 1): P(t) ∝ exp(−ε D_f(x,t)/2), and with |T| = 2 the /2 can go.

References
----------
.. [AD20] H. Asi, J. Duchi, "Near Instance-Optimality in Differential Privacy",
   arXiv:2005.10630, 2020, §3 (the inverse sensitivity mechanism) and §4.2 (median).
.. [G] A. Garivier, "How to learn while respecting individual privacy? An introduction to
   differential privacy", lecture, ENS de Lyon, 2021 ("Inverse Sensitivity Mechanism",
   "1/4-Optimality of the ISM").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.core.errors import QueryError
from planner.core.rootfind import bisect_array
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms.base import FloatArray
from planner.privacy.events import ExponentialEvent

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class InverseSensitivity:
    """D_f(x, t) for each candidate output t. DATA-DEPENDENT."""

    candidates: FloatArray
    distance: IntArray
    data_dependent: bool = True


@dataclass(frozen=True, slots=True)
class QuantileIntervals:
    """The n + 1 intervals [edges[i], edges[i+1]] between sorted clipped points, with the
    D_f of every t strictly inside interval i (i points below t). DATA-DEPENDENT."""

    edges: FloatArray
    distance: IntArray
    data_dependent: bool = True


@dataclass(frozen=True, slots=True)
class ISMProbabilities:
    """ISM output law over the candidates, one row per ε, and P[ISM(x) = f(x)]. DATA-DEPENDENT."""

    epsilon: FloatArray
    probabilities: FloatArray
    exact: FloatArray
    data_dependent: bool = True


def event(epsilon: float) -> ExponentialEvent:
    """The ISM is an exponential mechanism: ``ExponentialEvent(ε)``."""
    return ExponentialEvent(float(epsilon))


def quantile_index(n: int, q: float) -> int:
    """1-based order-statistic index j = min(n, max(1, ⌈q·n⌉)) defining the q-quantile x_(j).

    For odd n = 2k + 1 and q = 1/2 this is the median x_(k+1); for even n, the lower median.

    Examples
    --------
    >>> quantile_index(11, 0.5), quantile_index(10, 0.5), quantile_index(10, 0.0)
    (6, 5, 1)
    """
    nn = v.count(n, "n")
    if not (0.0 <= float(q) <= 1.0):
        raise QueryError(f"q must be in [0, 1]; got {q}. Use 0.5 for the median.")
    return min(nn, max(1, math.ceil(float(q) * nn - 1e-12)))


def _sorted_clipped(data: npt.ArrayLike, lower: float, upper: float) -> FloatArray:
    x = np.asarray(data, dtype=np.float64).reshape(-1)
    lo, hi = float(lower), float(upper)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise QueryError(f"bounds must satisfy lower < upper (finite); got [{lo}, {hi}]. Declare the column's range.")
    if x.size == 0:
        raise QueryError("the column has no rows; the ISM needs at least one record.")
    if np.any(np.isnan(x)):
        raise QueryError("the column contains NaN; impute or drop missing values before the ISM.")
    return np.sort(np.clip(x, lo, hi))


def quantile_distance(
    data: npt.ArrayLike, candidates: npt.ArrayLike, q: float, lower: float, upper: float
) -> InverseSensitivity:
    """D_f(x, t) for the q-quantile f(x) = x_(j) at arbitrary candidates t. DATA-DEPENDENT.

    Notes
    -----
    With a = #{xᵢ < t} and b = #{xᵢ ≤ t} (clipped data), f(x') = t needs a' ≤ j − 1 and
    b' ≥ j; each substitution moves a or b by at most one, and moving records to t
    achieves it, so D_f(x, t) = max(0, a − j + 1, j − b). O((n + |T|) log n).

    Examples
    --------
    >>> quantile_distance([1, 2, 3, 4, 5], [3.0, 3.5, 0.5, 6.0], 0.5, 0, 10).distance.tolist()
    [0, 1, 3, 3]
    """
    x = _sorted_clipped(data, lower, upper)
    t = np.asarray(candidates, dtype=np.float64).reshape(-1)
    j = quantile_index(x.size, q)
    a = np.searchsorted(x, t, side="left")
    b = np.searchsorted(x, t, side="right")
    d = np.maximum(0, np.maximum(a - j + 1, j - b)).astype(np.int64)
    return InverseSensitivity(t, d)


def quantile_intervals(data: npt.ArrayLike, q: float, lower: float, upper: float) -> QuantileIntervals:
    """The n + 1 intervals between sorted clipped points and D_f inside each. DATA-DEPENDENT.

    Notes
    -----
    Edges L = e₀ ≤ x_(1) ≤ … ≤ x_(n) ≤ e_{n+1} = U. Inside interval i (i points below t):
    D = i − j + 1 if i ≥ j, else j − i [AD20, §4.2]. Points exactly on the data (where D
    can be 0) have Lebesgue measure zero for the continuous ISM.
    """
    x = _sorted_clipped(data, lower, upper)
    j = quantile_index(x.size, q)
    edges = np.concatenate([[float(lower)], x, [float(upper)]])
    i = np.arange(x.size + 1, dtype=np.int64)
    d = np.where(i >= j, i - j + 1, j - i).astype(np.int64)
    return QuantileIntervals(edges, d)


def sample_quantile(
    data: npt.ArrayLike,
    epsilon: float,
    q: float,
    lower: float,
    upper: float,
    size: int,
    rng: np.random.Generator,
) -> FloatArray:
    """Planning draws of the continuous ISM quantile on [L, U]. DATA-DEPENDENT.

    Notes
    -----
    Density ∝ exp(−ε D_f(x,t)/2) on [L, U]: pick interval i with probability
    ∝ (e_{i+1} − e_i)·exp(−ε Dᵢ/2) (log space), then t uniform inside it. ε-DP for data
    clipped to [L, U] [AD20, Prop. 3.1 with the Lebesgue base measure].
    """
    from planner.core import special
    eps = float(v.epsilons(epsilon))
    iv = quantile_intervals(data, q, lower, upper)
    width = np.diff(iv.edges)
    with np.errstate(divide="ignore"):
        logw = np.log(width) - eps * iv.distance / 2.0
    logp = logw - special.logsumexp(logw)
    p = np.exp(logp)
    p /= p.sum()
    n = v.count(size, "size")
    idx = rng.choice(p.size, size=n, p=p)
    return np.asarray(iv.edges[idx] + rng.random(n) * width[idx], dtype=np.float64)


def mode_distance(counts: npt.ArrayLike) -> InverseSensitivity:
    """D_f(x, t) for the mode over K declared categories, under substitution. DATA-DEPENDENT.

    Notes
    -----
    f(x) = argmaxⱼ cⱼ with ties broken towards the *smallest index*. Making t the mode
    with k substitutions: every move should take a record into t (it raises c_t and
    lowers one competitor). t wins iff c'ⱼ ≤ c_t + k − [j < t] for every j ≠ t (strict
    for earlier categories because of the tie-break), so k moves suffice iff
    Σ_{j≠t} max(0, cⱼ − (c_t + k − [j < t])) ≤ k (the reductions the competitors need
    fit in the k moves; the other moves take records from anywhere outside t). The left
    side decreases and the right side increases in k, so D_f(x,t) is the least such k,
    found by bisection on k ∈ [0, n − c_t]. O(K² log n).

    Examples
    --------
    By hand for counts (5, 3, 0): t = 1 needs 2 moves (one move gives (4, 4, 0), a tie
    that category 0 wins); t = 2 needs 4 (after 3 moves c₂ = 3 but 0 and 1 would need 3 + 1
    reductions).

    >>> mode_distance([5, 3, 0]).distance.tolist()
    [0, 2, 4]
    """
    c = np.asarray(counts, dtype=np.float64).reshape(-1)
    if c.size == 0 or np.any(c < 0) or np.any(c % 1 != 0):
        raise QueryError("counts must be a non-empty array of non-negative integers.")
    k_cat = c.size
    n = float(c.sum())
    idx = np.arange(k_cat)
    earlier = (idx[None, :] < idx[:, None]).astype(np.float64)  # [t, j] = 1 if j < t
    other = idx[None, :] != idx[:, None]

    def feasible(k: FloatArray) -> npt.NDArray[np.bool_]:
        cap = c[:, None] + k[:, None] - earlier
        need = np.where(other, np.maximum(0.0, c[None, :] - cap), 0.0).sum(axis=1)
        return np.asarray(need <= k)

    lo = np.full(k_cat, -1.0)  # infeasible (k = -1 is never allowed)
    hi = np.maximum(n - c, 0.0)
    hi = np.where(feasible(np.zeros(k_cat)), 0.0, hi)
    def bracketed(a: FloatArray, b: FloatArray) -> bool:
        return not bool(np.any(b - a > 1))

    if not bracketed(lo, hi):  # integer bisection: 128 steps outlast any count below 2¹²⁸
        lo, hi = bisect_array(feasible, lo, hi, iterations=128, done=bracketed,
                              midpoint=lambda a, b: np.floor((a + b) / 2.0))
    return InverseSensitivity(idx.astype(np.float64), hi.astype(np.int64))


def majority_distance(s: int, n: int) -> InverseSensitivity:
    """D_f for binary majority f = 1{s > n/2}, n = 2k + 1 odd: 0 at f(x), (|2s − n| + 1)/2 at 1 − f(x).

    DATA-DEPENDENT. [G]: D_f(x, 1 − f(x)) = |s − n/2| + 1/2.

    Examples
    --------
    >>> majority_distance(6, 11).distance.tolist()  # s = 6 > 5.5: f = 1; one flip to 0
    [1, 0]
    """
    nn = v.count(n, "n")
    ss = v.count(s, "s", 0)
    if nn % 2 != 1 or ss > nn:
        raise QueryError(f"binary majority needs odd n and 0 ≤ s ≤ n; got n = {nn}.")
    r = (abs(2 * ss - nn) + 1) // 2
    d = np.array([r, 0] if 2 * ss > nn else [0, r], dtype=np.int64)
    return InverseSensitivity(np.array([0.0, 1.0]), d)


def _halve(n_outputs: int, halve: bool | None) -> float:
    if halve is None:
        halve = n_outputs != 2
    return 2.0 if halve else 1.0


def exact_probability(
    distance: npt.ArrayLike, epsilon: npt.ArrayLike, halve: bool | None = None
) -> FloatArray:
    """P[ISM(x) = f(x)] = 1/Σₜ e^{−ε D_f(x,t)/2} (without /2 when |T| = 2 by default).

    ``halve=None`` chooses /2 unless there are exactly two outputs. DATA-DEPENDENT.

    Examples
    --------
    >>> round(float(exact_probability([0, 1], 1.0)[()]), 6)  # |T| = 2: 1/(1 + e^{-1})
    0.731059
    """
    from planner.core import special
    d = np.asarray(distance, dtype=np.float64).reshape(-1)
    eps = v.epsilons(epsilon)
    div = _halve(d.size, halve)
    return np.asarray(np.exp(-special.logsumexp(-eps[..., None] * d / div, axis=-1)), dtype=np.float64)


def probabilities(
    dist: InverseSensitivity, epsilon: npt.ArrayLike, halve: bool | None = None
) -> ISMProbabilities:
    """The ISM law P(t) ∝ exp(−ε D_f(x,t)/2) over the candidates, vectorised over ε.

    Notes
    -----
    ε-DP because ΔD_f = 1 (exponential mechanism with u = −D_f) [AD20; G]; with
    exactly two outputs exp(−ε D_f) is already ε-DP (a remark in [G]), which is the
    default ``halve=None``. The output f(x) has D = 0, so P[ISM = f(x)] = 1/Σₜ e^{−εD/2}.
    """
    from planner.core import special
    d = dist.distance.astype(np.float64)
    eps = v.epsilons(epsilon)
    div = _halve(d.size, halve)
    logits = -eps[..., None] * d / div
    logp = logits - special.logsumexp(logits, axis=-1, keepdims=True)
    return ISMProbabilities(eps, np.exp(logp), exact_probability(d, eps, halve))


def sample(
    dist: InverseSensitivity,
    epsilon: float,
    size: int,
    rng: np.random.Generator,
    halve: bool | None = None,
) -> FloatArray:
    """Planning draws of the discrete ISM (returns candidate values). DATA-DEPENDENT."""
    p = probabilities(dist, float(v.epsilons(epsilon)), halve).probabilities.reshape(-1)
    p = p / p.sum()
    idx = rng.choice(p.size, size=v.count(size, "size"), p=p)
    return np.asarray(dist.candidates[idx], dtype=np.float64)
