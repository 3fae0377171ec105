"""Closed-form privacy curves of the basic noise families, vectorised.

These are the formulas both the mechanisms (calibration) and the accountants
(composition) need. Every function broadcasts over numpy arrays.

References
----------
.. [M17] I. Mironov, "Rényi Differential Privacy", CSF 2017, arXiv:1702.07476, Table II.
.. [BW18] B. Balle, Y.-X. Wang, "Improving the Gaussian Mechanism for Differential Privacy:
   Analytical Calibration and Optimal Denoising", ICML 2018, arXiv:1805.06530, Thm 8.
.. [KOV15] P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential
   Privacy", ICML 2015, arXiv:1311.0776, Thm 2.4 (every ε-DP pair is a post-processing
   of binary randomized response).
.. [CR21] M. Cesar, R. Rogers, "Bounding, Concentrating, and Truncating: Unifying Privacy
   Loss Composition for Data Analytics", ALT 2021, arXiv:2004.07223 (the exponential
   mechanism is ε²/8-zCDP).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core.rootfind import bisect_array

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).

FloatArray = npt.NDArray[np.float64]

_BISECT_ITERS = 90


def laplace_rdp(noise_multiplier: npt.ArrayLike, orders: npt.ArrayLike) -> FloatArray:
    """RDP ε(α) of the Laplace mechanism with scale b = λ·Δ₁ (λ = ``noise_multiplier``).

    Notes
    -----
    ε(α) = 1/(α−1) · ln[ α/(2α−1) · e^{(α−1)/λ} + (α−1)/(2α−1) · e^{−α/λ} ]   [M17, Table II],
    computed in log space. Broadcasts λ against α.

    Examples
    --------
    >>> round(float(laplace_rdp(1.0, 2.0)), 6)  # ln(2/3·e + 1/3·e^{-2}), by hand
    0.619124
    """
    lam = np.asarray(noise_multiplier, dtype=np.float64)
    a = np.asarray(orders, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        t1 = np.log(a / (2 * a - 1)) + (a - 1) / lam
        t2 = np.log((a - 1) / (2 * a - 1)) - a / lam
        out = np.logaddexp(t1, t2) / (a - 1)
    # Never exceed the pure ε = 1/λ (a Laplace mechanism is 1/λ-DP; D_α ≤ D_∞).
    return np.asarray(np.minimum(np.maximum(out, 0.0), 1.0 / lam), dtype=np.float64)


def pure_dp_rdp(epsilon: npt.ArrayLike, orders: npt.ArrayLike) -> FloatArray:
    """Tightest RDP curve valid for *every* ε-DP mechanism.

    Notes
    -----
    By [KOV15, Thm 2.4] any ε-DP pair (P, Q) is a post-processing of binary randomized
    response with keep probability p = e^ε/(1+e^ε); Rényi divergence obeys the
    data-processing inequality, so D_α(P‖Q) ≤ D_α(RR_p‖RR_{1−p}):

        ε(α) = 1/(α−1) · ln[(e^{αε} + e^{(1−α)ε}) / (1 + e^ε)]
             = 1/(α−1) · log1p( expm1(αε) · (−expm1((1−α)ε)) / (1+e^ε) ),

    the second form being exact for small ε (no cancellation). It is ≤ min(ε, αε²/2),
    the bound quoted in docs/mathematics.md §5, and is clipped to that bound.

    Examples
    --------
    >>> float(pure_dp_rdp(1.0, 1e6)) <= 1.0
    True
    """
    eps, a = np.broadcast_arrays(np.asarray(epsilon, dtype=np.float64), np.asarray(orders, dtype=np.float64))
    out = np.empty(eps.shape)
    small = a * eps < 30.0  # each form only where it applies (no overflowing intermediates)
    e, o = eps[small], a[small]
    out[small] = np.log1p(np.expm1(o * e) * (-np.expm1((1 - o) * e)) / (1 + np.exp(e))) / (o - 1)
    e, o = eps[~small], a[~small]
    out[~small] = (np.logaddexp(o * e, (1 - o) * e) - np.logaddexp(0.0, e)) / (o - 1)
    bound = np.minimum(eps, a * eps**2 / 2.0)
    return np.asarray(np.clip(out, 0.0, bound), dtype=np.float64)


def randomized_response_rdp(keep_probability: npt.ArrayLike, orders: npt.ArrayLike) -> FloatArray:
    """RDP of binary randomized response reporting the truth with probability p ≥ 1/2.

    Notes
    -----
    ε(α) = 1/(α−1) · ln[p^α(1−p)^{1−α} + (1−p)^α p^{1−α}]  (docs/mathematics.md §5; [M17, Table II]).
    With ε = ln(p/(1−p)) this equals :func:`pure_dp_rdp` (RR is the extremal ε-DP pair).
    """
    p = np.asarray(keep_probability, dtype=np.float64)
    with np.errstate(divide="ignore"):
        eps = np.log(p) - np.log1p(-p)
    return pure_dp_rdp(eps, orders)


def gaussian_rdp(noise_multiplier: npt.ArrayLike, orders: npt.ArrayLike) -> FloatArray:
    """RDP of the Gaussian mechanism with σ = s·Δ₂: ε(α) = α/(2s²) [M17, Prop. 7]."""
    s = np.asarray(noise_multiplier, dtype=np.float64)
    a = np.asarray(orders, dtype=np.float64)
    return np.asarray(a / (2.0 * s**2), dtype=np.float64)


def exponential_rdp(epsilon: npt.ArrayLike, orders: npt.ArrayLike) -> FloatArray:
    """RDP of an ε-DP exponential mechanism: min(pure bound, αε²/8) — bounded range [CR21]."""
    eps = np.asarray(epsilon, dtype=np.float64)
    a = np.asarray(orders, dtype=np.float64)
    return np.asarray(np.minimum(pure_dp_rdp(eps, a), a * eps**2 / 8.0), dtype=np.float64)


def analytic_gaussian_delta(epsilon: npt.ArrayLike, mu: npt.ArrayLike) -> FloatArray:
    """Exact δ(ε) of the Gaussian mechanism with μ = Δ₂/σ [BW18, Thm 8].

    Notes
    -----
    δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ); the second term is computed as
    exp(ε + log Φ(·)) so large ε does not overflow.

    Examples
    --------
    >>> round(float(analytic_gaussian_delta(0.0, 1.0)), 6)  # 2Φ(1/2) − 1, by hand
    0.382925
    """
    from planner.core import special
    eps = np.asarray(epsilon, dtype=np.float64)
    m = np.asarray(mu, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        first = special.ndtr(m / 2 - eps / m)
        second = np.exp(eps + special.log_ndtr(-m / 2 - eps / m))
    return np.asarray(np.maximum(first - second, 0.0), dtype=np.float64)


def analytic_gaussian_epsilon(delta: npt.ArrayLike, mu: npt.ArrayLike) -> FloatArray:
    """Least ε with δ(ε) ≤ δ for a Gaussian of μ = Δ₂/σ, by vectorised bisection.

    Returns the upper end of the final bracket, so the answer never understates ε.
    """
    d = np.asarray(delta, dtype=np.float64)
    m = np.asarray(mu, dtype=np.float64)
    d, m = np.broadcast_arrays(d, m)
    lo = np.zeros(d.shape)
    hi = np.maximum(m * m / 2 + m * np.sqrt(2 * np.log(1.25 / np.maximum(d, 1e-300))), 1.0)
    # grow hi until δ(hi) ≤ δ
    for _ in range(200):
        bad = analytic_gaussian_delta(hi, m) > d
        if not np.any(bad):
            break
        hi = np.where(bad, hi * 2, hi)
    lo, hi = bisect_array(lambda mid: analytic_gaussian_delta(mid, m) <= d, lo, hi, iterations=_BISECT_ITERS)
    return np.asarray(np.where(analytic_gaussian_delta(0.0, m) <= d, 0.0, hi), dtype=np.float64)


def analytic_gaussian_sigma(
    epsilon: npt.ArrayLike, delta: npt.ArrayLike, sensitivity: npt.ArrayLike = 1.0
) -> FloatArray:
    """Smallest σ making the Gaussian mechanism (ε, δ)-DP [BW18, Thm 8], vectorised.

    Bisection on log σ; returns the upper end of the final bracket (never too little noise).

    Examples
    --------
    >>> s = float(analytic_gaussian_sigma(1.0, 1e-5))
    >>> bool(analytic_gaussian_delta(1.0, 1.0 / s) <= 1e-5)
    True
    """
    eps = np.asarray(epsilon, dtype=np.float64)
    d = np.asarray(delta, dtype=np.float64)
    sens = np.asarray(sensitivity, dtype=np.float64)
    eps, d, sens = np.broadcast_arrays(eps, d, sens)
    # σ/Δ bracket: the classical σ = Δ√(2 ln(1.25/δ))/ε is an upper bound for ε ≤ 1,
    # and a lower bound of 1e-6 is far below any useful calibration.
    lo = np.full(eps.shape, np.log(1e-8))
    hi = np.log(np.maximum(np.sqrt(2 * np.log(1.25 / np.maximum(d, 1e-300))) / eps, 1.0) * 4)
    for _ in range(200):
        bad = analytic_gaussian_delta(eps, np.exp(-hi)) > d
        if not np.any(bad):
            break
        hi = np.where(bad, hi + 1.0, hi)
    lo, hi = bisect_array(lambda mid: analytic_gaussian_delta(eps, np.exp(-mid)) <= d, lo, hi, iterations=_BISECT_ITERS)
    return np.asarray(np.exp(hi) * sens, dtype=np.float64)
