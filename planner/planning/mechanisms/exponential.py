"""The exponential mechanism and report-noisy-max (Gumbel): selection, utility bounds.

Vectorised over ε: a function taking ``epsilon`` of shape (E,) returns shape (E,) or, for
per-candidate quantities, (E, |T|). Planning simulators take a ``numpy.random.Generator``
and are never used for released values (releases go through OpenDP).

References
----------
.. [MT07] F. McSherry, K. Talwar, "Mechanism Design via Differential Privacy", FOCS 2007,
   Thm 6 (privacy) and Thm 8 (utility).
.. [DR14] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014,
   Thm 3.10 and Thm 3.11 (utility: P[u ≤ OPT − (2Δu/ε)(ln|T| + s)] ≤ e^{−s}).
.. [Y77] J. Yellott, "The relationship between Luce's choice axiom, Thurstone's theory of
   comparative judgment, and the double exponential distribution", J. Math. Psych. 1977
   (argmax of utilities + i.i.d. Gumbel noise is the softmax / exponential mechanism).
.. [CR21] M. Cesar, R. Rogers, arXiv:2004.07223, Lemma 3.2 (ε²/8-zCDP, bounded range).
.. [G] A. Garivier, "How to learn while respecting individual privacy? An introduction to
   differential privacy", lecture, ENS de Lyon, 2021 ("Exponential Mechanism", "Example:
   Majority of Binary Observations", "Lower Bound for Discrete Mechanisms").
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.core.errors import QueryError
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms.base import FloatArray
from planner.privacy.events import ExponentialEvent

IntArray = npt.NDArray[np.int64]


def event(epsilon: float) -> ExponentialEvent:
    """The privacy event of one exponential-mechanism (or Gumbel noisy-max) selection."""
    return ExponentialEvent(float(epsilon))


def selection_log_probabilities(
    utilities: npt.ArrayLike, epsilon: npt.ArrayLike, sensitivity: float = 1.0
) -> FloatArray:
    """ln P(t) = εu(t)/(2Δu) − logsumexp_t'(εu(t')/(2Δu)); shape ε.shape + (|T|,).

    Computed in log space (stable for any ε·u).
    """
    from planner.core import special
    u = np.asarray(utilities, dtype=np.float64)
    if u.ndim != 1 or u.size == 0 or not np.all(np.isfinite(u)):
        raise QueryError("utilities must be a non-empty 1-D array of finite numbers.")
    eps = v.epsilons(epsilon)
    du = float(v.positive(sensitivity, "sensitivity", "Use the utility's sensitivity Δu (1 for counts and ranks)."))
    logits = eps[..., None] * u / (2.0 * du)
    return np.asarray(logits - special.logsumexp(logits, axis=-1, keepdims=True), dtype=np.float64)


def selection_probabilities(
    utilities: npt.ArrayLike, epsilon: npt.ArrayLike, sensitivity: float = 1.0
) -> FloatArray:
    """P(t) ∝ exp(ε·u(x,t)/(2Δu)); shape ε.shape + (|T|,).

    Notes
    -----
    Exponential mechanism [MT07, Thm 6; G]: ε-DP for any utility of sensitivity Δu.

    Examples
    --------
    >>> p = selection_probabilities([1.0, 0.0], 2.0)  # e^1/(e^1 + 1) = 0.731059, by hand
    >>> round(float(p[0]), 6)
    0.731059
    """
    return np.asarray(np.exp(selection_log_probabilities(utilities, epsilon, sensitivity)), dtype=np.float64)


def utility_gap(
    epsilon: npt.ArrayLike, n_candidates: int, s: npt.ArrayLike, sensitivity: float = 1.0
) -> FloatArray:
    """v = (2Δu/ε)(ln|T| + s) with P[u(x, A(x)) ≤ OPT − v] ≤ e^{−s}.

    Notes
    -----
    Union bound over the ≤ |T| candidates whose utility is ≤ OPT − v: each has
    probability ≤ e^{−εv/(2Δu)} [DR14, Thm 3.11; G, "Bound on the resulting
    utility"]. Data-independent (needs only |T|, Δu, ε).

    Examples
    --------
    >>> round(float(utility_gap(1.0, 100, 0.0)[()]), 6)  # 2·ln 100 = 9.21034, by hand
    9.21034
    """
    eps = v.epsilons(epsilon)
    k = v.count(n_candidates, "n_candidates")
    du = float(v.positive(sensitivity, "sensitivity"))
    return np.asarray(2.0 * du / eps * (np.log(k) + np.asarray(s, dtype=np.float64)), dtype=np.float64)


def utility_bound(
    epsilon: npt.ArrayLike, n_candidates: int, beta: float = 0.05, sensitivity: float = 1.0
) -> FloatArray:
    """(1−β) bound on OPT − u(x, A(x)): (2Δu/ε)·ln(|T|/β) (``utility_gap`` with s = ln 1/β)."""
    b = v.beta_level(beta)
    return utility_gap(epsilon, n_candidates, np.log(1.0 / b), sensitivity)


def quantile_rank_error_bound(epsilon: npt.ArrayLike, n_candidates: int, beta: float = 0.05) -> FloatArray:
    """(1−β) bound on the *excess* rank error of the EM quantile on a grid of |T| candidates.

    Notes
    -----
    Rank utility u(x, t) = −|#{xᵢ < t} − q·n| has Δu = 1 (one record moves the count by at
    most one), so with probability ≥ 1 − β the selected candidate's rank error exceeds the
    best candidate's by at most (2/ε)·ln(|T|/β). Data-independent. The best candidate's
    own rank error (grid resolution) comes on top.

    Examples
    --------
    >>> round(float(quantile_rank_error_bound(1.0, 100, 0.05)[()]), 4)  # 2 ln 2000
    15.2018
    """
    return utility_bound(epsilon, n_candidates, beta, 1.0)


def quantile_rank_rmse(
    epsilon: npt.ArrayLike, n_candidates: int, n_records: int, q: float = 0.5
) -> FloatArray:
    """Predicted RMSE of the EM quantile in *rank units*, for planning (data-independent).

    Notes
    -----
    Exact under a *uniform-spacing model*: the n records are spread evenly over the |T|
    candidates, so adjacent candidates differ by g = n/(|T| − 1) ranks, and the target
    rank q·n sits at candidate c = round(q(|T| − 1)). Candidate i then has rank error
    g|i − c| and P(i) ∝ exp(−ε g|i − c|/2); the RMSE is √(Σᵢ P(i) g²(i − c)²), summed
    exactly. As g → 0 this tends to the Laplace value 2√2/ε (rank error ~ Laplace(2/ε)).
    Real data with clumps can do worse or better; use the instance-specific ISM views
    (data-dependent) for a given dataset.

    Examples
    --------
    >>> r = float(quantile_rank_rmse(0.01, 10_001, 10_000)[()])  # g = 1: ≈ 2√2/ε = 282.8
    >>> 270 < r < 283
    True
    """
    eps = v.epsilons(epsilon)
    k = v.count(n_candidates, "n_candidates", 2)
    n = v.count(n_records, "n_records")
    if not (0.0 <= float(q) <= 1.0):
        raise QueryError(f"q must be in [0, 1]; got {q}.")
    g = n / (k - 1)
    c = round(float(q) * (k - 1))
    dist = g * np.abs(np.arange(k, dtype=np.float64) - c)
    # the largest weight is 1 (at i = c), so plain exp cannot overflow and the sum is ≥ 1
    w = np.exp(-eps[..., None] * dist / 2.0)
    return np.asarray(np.sqrt((w * dist**2).sum(axis=-1) / w.sum(axis=-1)), dtype=np.float64)


def simulate(
    utilities: npt.ArrayLike,
    epsilon: float,
    size: int,
    rng: np.random.Generator,
    sensitivity: float = 1.0,
) -> IntArray:
    """Planning draws of the EM index by report-noisy-max with Gumbel noise of scale 2Δu/ε.

    Notes
    -----
    argmaxₜ (u(t) + G_t), G_t i.i.d. Gumbel(scale 2Δu/ε), has exactly the law
    P(t) ∝ exp(εu(t)/(2Δu)) [Y77; docs/mathematics.md §3]. Processed in chunks of ≤ 2²² noise draws.
    """
    u = np.asarray(utilities, dtype=np.float64)
    eps = float(v.epsilons(epsilon))
    du = float(v.positive(sensitivity, "sensitivity"))
    n = v.count(size, "size")
    k = u.size
    scale = 2.0 * du / eps
    rows = max(1, (1 << 22) // max(k, 1))
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        noisy = u + rng.gumbel(0.0, scale, size=(stop - start, k))
        out[start:stop] = np.argmax(noisy, axis=1)
    return out


def report_noisy_max(
    scores: npt.ArrayLike, scale: float, size: int, rng: np.random.Generator, noise: str = "gumbel"
) -> IntArray:
    """Planning draws of report-noisy-max: argmaxₜ (score(t) + Zₜ), Zₜ i.i.d. of ``scale``.

    ``noise="gumbel"``: the exponential mechanism, P(t) ∝ exp(score(t)/scale) [Y77];
    ``noise="exponential"``: permute-and-flip (McKenna & Sheldon 2020; Ding et al. 2021,
    report-noisy-max with exponential noise is permute-and-flip), never worse than the
    exponential mechanism in expected score. The release draws the same law through OpenDP
    (:func:`planner.privacy.noise.noisy_max`); these numpy draws are for planning simulations only.
    """
    u = np.asarray(scores, dtype=np.float64)
    s = float(v.positive(scale, "scale"))
    n = v.count(size, "size")
    if noise not in ("gumbel", "exponential"):
        raise QueryError(f"noise must be 'gumbel' or 'exponential'; got {noise!r}.")
    k = u.size
    rows = max(1, (1 << 22) // max(k, 1))
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        z = rng.gumbel(0.0, s, size=(stop - start, k)) if noise == "gumbel" else rng.exponential(s, size=(stop - start, k))
        out[start:stop] = np.argmax(u + z, axis=1)
    return out


# ------------------------------------------------------------------ binary majority (Garivier's lecture notes)


def _majority_margin(s: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    ss = np.asarray(s, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    if np.any(nn < 1) or np.any(nn % 2 != 1):
        raise QueryError("n must be odd (n = 2k + 1) for the binary majority formulas.")
    if np.any(ss < 0) or np.any(ss > nn) or np.any(ss % 1 != 0):
        raise QueryError("s must be an integer count in [0, n].")
    return np.asarray(np.abs(2.0 * ss - nn), dtype=np.float64)


def majority_em_correct(epsilon: npt.ArrayLike, s: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    """P[correct] of the EM with u(x,t) = (2t − 1)(s − n/2): 1/(1 + e^{−|2s−n|ε/2}).

    DATA-DEPENDENT (a function of the exact count s).

    References
    ----------
    [G], "Example: Majority of Binary Observations"; docs/mathematics.md §3.

    Examples
    --------
    >>> round(float(majority_em_correct(1.0, 6, 11)[()]), 6)  # 1/(1+e^{-1/2}) = 0.622459
    0.622459
    """
    from planner.core import special
    eps = v.epsilons(epsilon)
    return np.asarray(special.expit(_majority_margin(s, n) * eps / 2.0), dtype=np.float64)


def majority_better_correct(epsilon: npt.ArrayLike, s: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    """P[correct] of Garivier's "better mechanism" p(k + r) = 1/(1 + e^{−rε}), r = (|2s−n|+1)/2.

    This is the ISM with |T| = 2 (no /2 in the exponent). DATA-DEPENDENT.

    Examples
    --------
    >>> round(float(majority_better_correct(1.0, 6, 11)[()]), 6)  # r = 1: 1/(1+e^{-1})
    0.731059
    """
    from planner.core import special
    eps = v.epsilons(epsilon)
    r = (_majority_margin(s, n) + 1.0) / 2.0
    return np.asarray(special.expit(r * eps), dtype=np.float64)


def majority_unbiased_upper_bound(epsilon: npt.ArrayLike, s: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    """Upper bound on P[correct] of any unbiased ε-DP mechanism: 1/(1 + e^{−(|2s−n|+1)ε}).

    From P[A(x) = f(x)] ≤ 1/Σₜ e^{−2εD_f(x,t)} with D_f(x, 1 − f(x)) = (|2s−n|+1)/2.
    DATA-DEPENDENT.

    Examples
    --------
    >>> round(float(majority_unbiased_upper_bound(1.0, 6, 11)[()]), 6)  # 1/(1+e^{-2})
    0.880797
    """
    from planner.core import special
    eps = v.epsilons(epsilon)
    return np.asarray(special.expit((_majority_margin(s, n) + 1.0) * eps), dtype=np.float64)

