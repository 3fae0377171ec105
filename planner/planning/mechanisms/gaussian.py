"""Gaussian and discrete Gaussian noise: calibration, privacy events, predicted accuracy.

The continuous Gaussian is calibrated *exactly* with the analytic Gaussian mechanism
(Balle & Wang 2018) — never with the loose textbook σ = Δ√(2 ln(1.25/δ))/ε. The discrete
Gaussian is ρ-zCDP with ρ = Δ₂²/(2σ²) and is calibrated through the zCDP → (ε, δ)
conversion of :mod:`planner.privacy.accounting`.

References
----------
.. [BW18] B. Balle, Y.-X. Wang, "Improving the Gaussian Mechanism for Differential Privacy:
   Analytical Calibration and Optimal Denoising", ICML 2018, arXiv:1805.06530, Thm 8.
.. [DR14] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014,
   Thm A.1 (the textbook σ, valid for ε < 1 only).
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
   Privacy", NeurIPS 2020, arXiv:2004.00010, Thm 4 (ρ = Δ²/(2σ²)-zCDP) and Cor 13
   (conversion to (ε, δ)).
.. [BS16] M. Bun, T. Steinke, "Concentrated Differential Privacy", TCC 2016,
   arXiv:1605.02065, Prop. 1.3 (ρ-zCDP ⇒ (ρ + 2√(ρ ln(1/δ)), δ)-DP).
"""

from __future__ import annotations

import functools
from typing import Final

import numpy as np
import numpy.typing as npt

from planner.core.rootfind import bisect_array
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms.base import FloatArray, MechanismName, Sensitivity

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).
from planner.privacy import divergences as dv
from planner.privacy.events import GaussianEvent, PrivacyEvent

#: Below this σ the discrete Gaussian's moments and tails are summed term by term.
EXACT_SUM_MAX_SIGMA: Final = 64.0
_RHO_BISECT_ITERS: Final = 36


def textbook_gaussian_sigma(
    epsilon: npt.ArrayLike, delta: float, sensitivity: float = 1.0
) -> FloatArray:
    """The classical σ = Δ₂·√(2 ln(1.25/δ))/ε of [DR14, Thm A.1] (for comparison only).

    Valid only for ε < 1; the planner calibrates with :class:`GaussianMechanism` instead.

    Examples
    --------
    >>> round(float(textbook_gaussian_sigma(0.5, 1e-5)[()]), 4)  # 2·√(2 ln 125000), by hand
    9.6896
    """
    eps = v.epsilons(epsilon)
    d = v.delta_positive(delta)
    return np.asarray(sensitivity * np.sqrt(2.0 * np.log(1.25 / d)) / eps, dtype=np.float64)


def _z(beta: float) -> float:
    from planner.core import special
    return float(special.ndtri(1.0 - v.beta_level(beta) / 2.0))


def _repeat_shape(true_value: npt.ArrayLike, size: int) -> tuple[FloatArray, tuple[int, ...]]:
    t = np.asarray(true_value, dtype=np.float64)
    return t, (v.count(size, "size"), *t.shape)


@functools.lru_cache(maxsize=64)
def _unit_sigma_cached(eps_bytes: bytes, shape: tuple[int, ...], delta: float) -> FloatArray:
    eps = np.frombuffer(eps_bytes, dtype=np.float64).reshape(shape)
    out = dv.analytic_gaussian_sigma(eps, delta, 1.0)
    out.setflags(write=False)
    return out


class GaussianMechanism:
    """Continuous Gaussian noise with the least σ giving (ε, δ)-DP (analytic Gaussian).

    Notes
    -----
    (ε, δ) holds iff Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ [BW18, Thm 8];
    σ is found by bisection (:func:`planner.privacy.divergences.analytic_gaussian_sigma`), rounded
    up. RMSE = σ; the (1−β) error bound is σ·z_{1−β/2}.

    References
    ----------
    Balle & Wang 2018, arXiv:1805.06530, Thm 8 and Alg. 1.

    Examples
    --------
    >>> g = GaussianMechanism()
    >>> round(float(g.error_bound(1.0, 0.05)[()]), 4)  # z_{0.975}
    1.96
    """

    @property
    def name(self) -> MechanismName:
        return MechanismName.GAUSSIAN

    @property
    def pure(self) -> bool:
        return False

    @property
    def integer(self) -> bool:
        return False

    def scale_for(
        self, epsilon: npt.ArrayLike, sensitivity: Sensitivity, delta: float = 0.0
    ) -> FloatArray:
        """Least σ with δ_Gauss(ε; Δ₂/σ) ≤ δ."""
        eps = v.epsilons(epsilon)
        d = v.delta_positive(delta)
        # σ is linear in Δ₂ (the bisection is on σ/Δ₂): cache σ at Δ₂ = 1 per (ε grid, δ)
        unit = _unit_sigma_cached(np.ascontiguousarray(eps).tobytes(), eps.shape, d)
        return np.asarray(unit * sensitivity.l2, dtype=np.float64)

    def epsilon_for(
        self, scale: npt.ArrayLike, sensitivity: Sensitivity, delta: float = 0.0
    ) -> FloatArray:
        """Least ε with δ_Gauss(ε; Δ₂/σ) ≤ δ."""
        s = v.positive(scale, "scale")
        d = v.delta_positive(delta)
        return dv.analytic_gaussian_epsilon(d, sensitivity.l2 / s)

    def event(self, scale: float, sensitivity: Sensitivity) -> PrivacyEvent:
        """``GaussianEvent(σ/Δ₂, discrete=False)``."""
        return GaussianEvent(float(scale) / sensitivity.l2, discrete=False)

    def rmse(self, scale: npt.ArrayLike) -> FloatArray:
        """σ."""
        return np.asarray(v.positive(scale, "scale"), dtype=np.float64).copy()

    def error_bound(self, scale: npt.ArrayLike, beta: float = 0.05) -> FloatArray:
        """σ·z_{1−β/2} (exact two-sided normal quantile)."""
        return np.asarray(v.positive(scale, "scale") * _z(beta), dtype=np.float64)

    def simulate(
        self, true_value: npt.ArrayLike, scale: float, size: int, rng: np.random.Generator
    ) -> FloatArray:
        """``size`` planning draws of true_value + N(0, σ²)."""
        t, shape = _repeat_shape(true_value, size)
        s = float(v.positive(scale, "scale"))
        return np.asarray(t + rng.normal(0.0, s, size=shape), dtype=np.float64)


# --------------------------------------------------------------------------- discrete Gaussian


def _dg_weights(sigma: FloatArray, kmax: int) -> tuple[FloatArray, FloatArray]:
    """(k = 0 … kmax, P(k) for each σ row), normalised over |k| ≤ kmax."""
    k = np.arange(0, kmax + 1, dtype=np.float64)
    g = np.exp(-(k[None, :] ** 2) / (2.0 * sigma[:, None] ** 2))
    z = g[:, 0] + 2.0 * g[:, 1:].sum(axis=1)
    return k, g / z[:, None]


def _window(sigma_max: float, m_max: float = 0.0) -> int:
    # Mass beyond m + 12σ is < e^{−72} ≈ 5e-32 relative to the tail at m (and to Z).
    return int(np.ceil(m_max + 12.0 * sigma_max)) + 10


def _dg_tail_large(sigma: FloatArray, a: FloatArray) -> FloatArray:
    """Σ_{k≥a} e^{−k²/2σ²} / Z for σ ≥ 64 by Euler–Maclaurin to the g‴ term.

    The next term is g⁽⁵⁾(a)/30240 ≈ (a/σ²)⁵g(a)/30240: relative error < 1e-9 for tail
    probabilities ≥ 1e-12 (a ≤ 7.2σ).

    Z = σ√(2π) exactly in double precision there (Poisson summation: the correction is
    2Σ_j e^{−2π²σ²j²} < 1e-2000).
    """
    from planner.core import special
    s2 = sigma**2
    g = np.exp(-(a**2) / (2.0 * s2))
    integral = sigma * np.sqrt(np.pi / 2.0) * special.erfc(a / (sigma * np.sqrt(2.0)))
    d1 = -(a / s2) * g
    d3 = (3.0 * a / s2**2 - a**3 / s2**3) * g
    total = integral + g / 2.0 - d1 / 12.0 + d3 / 720.0
    return np.asarray(total / (sigma * np.sqrt(2.0 * np.pi)), dtype=np.float64)


def discrete_gaussian_variance(scale: npt.ArrayLike) -> FloatArray:
    """Exact variance of the discrete Gaussian P(k) ∝ e^{−k²/(2σ²)}.

    Notes
    -----
    For σ < 64 it is Σ_k k² P(k) summed over |k| ≤ 12σ + 10 (the rest is < 1e-29
    relative). For
    σ ≥ 64 it equals σ² in double precision: by Poisson summation the relative deviation
    is O(σ² e^{−2π²σ²}) [CKS20, §2.4] (< 1e-2000). It is always ≤ σ² [CKS20, Prop. 19].

    Examples
    --------
    >>> float(discrete_gaussian_variance(100.0)[()])
    10000.0
    """
    s = v.positive(scale, "scale")
    flat = s.reshape(-1)
    out = flat**2
    small = flat < EXACT_SUM_MAX_SIGMA
    if np.any(small):
        k, w = _dg_weights(flat[small], _window(float(flat[small].max())))
        out = out.copy()
        out[small] = 2.0 * (w * k[None, :] ** 2).sum(axis=1)
    return np.asarray(out.reshape(s.shape), dtype=np.float64)


def discrete_gaussian_tail(scale: npt.ArrayLike, m: npt.ArrayLike) -> FloatArray:
    """P(|X| > m) for the discrete Gaussian of scale σ and integer m ≥ 0.

    Broadcasts σ against m. Exact pmf sums for σ < 64 (window m + 12σ + 10: the mass
    left out is < 1e-29 relative), Euler–Maclaurin above (:func:`_dg_tail_large`).
    """
    s_arr = v.positive(scale, "scale")
    m_arr = np.asarray(m, dtype=np.float64)
    s, mm = np.broadcast_arrays(s_arr, m_arr)
    out = np.empty(s.shape)
    small = s < EXACT_SUM_MAX_SIGMA
    if np.any(small):
        # one pmf table per distinct σ, reverse cumulative sums, then look up every m
        uniq, inv = np.unique(s[small], return_inverse=True)
        ms = mm[small]
        kmax = _window(float(uniq.max()), float(ms.max()))
        _, w = _dg_weights(uniq, kmax)
        rev = np.concatenate([np.cumsum(w[:, ::-1], axis=1)[:, ::-1], np.zeros((uniq.size, 1))], axis=1)
        idx = np.clip(ms + 1.0, 0, kmax + 1).astype(np.int64)
        out[small] = 2.0 * rev[inv.reshape(-1), idx]
    if np.any(~small):
        out[~small] = 2.0 * _dg_tail_large(s[~small], mm[~small] + 1.0)
    return np.asarray(np.clip(out, 0.0, 1.0), dtype=np.float64)


def discrete_gaussian_error_bound(scale: npt.ArrayLike, beta: float = 0.05) -> FloatArray:
    """Smallest integer m with P(|X| > m) ≤ β for the discrete Gaussian of scale σ.

    Notes
    -----
    Σ_{k>m} P(k) ≈ P(|N(0,σ²)| > m + 1/2), so m lies within ±3 of ⌈σ z_{1−β/2} − 1/2⌉;
    the exact tails of those candidates decide.

    Examples
    --------
    >>> int(discrete_gaussian_error_bound(1.0, 0.05)[()])  # P(|X|>2)=0.0177, P(|X|>1)=0.1612
    2
    """
    s = v.positive(scale, "scale")
    b = v.beta_level(beta)
    centre = np.ceil(s * _z(b) - 0.5)
    offsets = np.arange(-3.0, 4.0)
    cands = np.maximum(centre[..., None] + offsets, 0.0)
    ok = discrete_gaussian_tail(s[..., None], cands) <= b
    first = np.argmax(ok, axis=-1)
    m = np.take_along_axis(cands, first[..., None], axis=-1)[..., 0]
    m = np.where(np.any(ok, axis=-1), m, cands[..., -1])
    return np.asarray(m, dtype=np.float64)


def rounded_gaussian_rmse(scale: npt.ArrayLike) -> FloatArray:
    """RMSE of round(N), N ~ N(0, σ²): the error of a Gaussian count rounded to a whole number.

    Notes
    -----
    E[round(N)²] = 2 Σ_{k≥1} k² (Φ((k + ½)/σ) − Φ((k − ½)/σ)), summed exactly over
    k ≤ 12σ + 10 for σ < 64 (the rest is < 1e-29 relative); σ² + 1/12 above, where
    Sheppard's correction is exact in double precision (Poisson summation).

    Examples
    --------
    >>> round(float(rounded_gaussian_rmse(100.0)[()]) ** 2 - 100.0**2, 6)  # 1/12
    0.083333
    """
    from planner.core import special
    s = v.positive(scale, "scale")
    flat = s.reshape(-1)
    out = flat**2 + 1.0 / 12.0
    small = flat < EXACT_SUM_MAX_SIGMA
    if np.any(small):
        sig = flat[small]
        k = np.arange(1, _window(float(sig.max())) + 1, dtype=np.float64)
        hi = special.ndtr((k[None, :] + 0.5) / sig[:, None])
        lo = special.ndtr((k[None, :] - 0.5) / sig[:, None])
        out = out.copy()
        out[small] = 2.0 * ((hi - lo) * k[None, :] ** 2).sum(axis=1)
    return np.asarray(np.sqrt(out.reshape(s.shape)), dtype=np.float64)


def rounded_gaussian_error_bound(scale: npt.ArrayLike, beta: float = 0.05) -> FloatArray:
    """Smallest integer t ≥ 0 with P(|round(N)| > t) ≤ β, N ~ N(0, σ²):
    P(|N| ≥ t + ½) ≤ β gives t = max(0, ⌈σ z_{1−β/2} − ½⌉).

    Examples
    --------
    >>> int(rounded_gaussian_error_bound(1.0, 0.05)[()])  # ⌈1.96 − 0.5⌉
    2
    """
    s = v.positive(scale, "scale")
    return np.asarray(np.maximum(np.ceil(s * _z(v.beta_level(beta)) - 0.5), 0.0), dtype=np.float64)


def _zcdp_epsilon(rho: FloatArray, delta: float) -> FloatArray:
    from planner.privacy.accounting import zcdp_to_approx_epsilon

    return np.asarray(zcdp_to_approx_epsilon(rho, delta), dtype=np.float64)


@functools.lru_cache(maxsize=64)
def _rho_cached(eps_bytes: bytes, shape: tuple[int, ...], delta: float) -> FloatArray:
    eps = np.frombuffer(eps_bytes, dtype=np.float64).reshape(shape)
    out = _rho_bisect(eps, delta)
    out.setflags(write=False)
    return out


def zcdp_rho_for(epsilon: npt.ArrayLike, delta: float) -> FloatArray:
    """Largest ρ whose zCDP → (ε, δ) conversion gives at most ε (vectorised bisection).

    Notes
    -----
    Bracket: ρ_lo = (√(L + ε) − √L)², L = ln(1/δ), solves ρ + 2√(ρL) = ε [BS16, Prop 1.3],
    a looser conversion, so ρ* ≥ ρ_lo; ρ_hi = Δ²/(2σ_G²) with σ_G the analytic Gaussian
    σ at (ε, δ): a Gaussian is exactly ρ-zCDP, so no valid conversion can certify
    more. Bisection on ln ρ returns the lower (valid) end of the final bracket.
    """
    eps = v.epsilons(epsilon)
    d = v.delta_positive(delta)
    # Cached on (ε grid, δ): the dashboard asks for the same grid on every redraw.
    return _rho_cached(np.ascontiguousarray(eps).tobytes(), eps.shape, d).copy()


def _rho_bisect(eps: FloatArray, d: float) -> FloatArray:
    big_l = np.log(1.0 / d)
    lo = (np.sqrt(big_l + eps) - np.sqrt(big_l)) ** 2
    hi = 1.0 / (2.0 * dv.analytic_gaussian_sigma(eps, d) ** 2)
    hi = np.maximum(hi, lo)
    llo, lhi = np.log(lo), np.log(hi) + 1e-12
    llo, lhi = bisect_array(lambda mid: ~(_zcdp_epsilon(np.exp(mid), d) <= eps), llo, lhi, iterations=_RHO_BISECT_ITERS)
    return np.asarray(np.exp(llo), dtype=np.float64)


class DiscreteGaussianMechanism:
    """Discrete Gaussian noise P(k) ∝ exp(−k²/(2σ²)) on integer queries (OpenDP's scale σ).

    Notes
    -----
    ρ = Δ₂²/(2σ²)-zCDP [CKS20, Thm 4]; (ε, δ) through :func:`planner.privacy.accounting.zcdp_to_approx_epsilon`.
    Variance and tails are exact sums of the pmf (see :func:`discrete_gaussian_variance`,
    :func:`discrete_gaussian_error_bound`).

    References
    ----------
    Canonne, Kamath & Steinke 2020, arXiv:2004.00010, Thm 4, Cor 13, Prop 19;
    OpenDP 0.16 ``discrete_gaussian_scale_to_accuracy``.
    """

    @property
    def name(self) -> MechanismName:
        return MechanismName.DISCRETE_GAUSSIAN

    @property
    def pure(self) -> bool:
        return False

    @property
    def integer(self) -> bool:
        return True

    def scale_for(
        self, epsilon: npt.ArrayLike, sensitivity: Sensitivity, delta: float = 0.0
    ) -> FloatArray:
        """σ = Δ₂/√(2ρ*) with ρ* = :func:`zcdp_rho_for` (ε, δ)."""
        rho = zcdp_rho_for(epsilon, delta)
        return np.asarray(sensitivity.l2 / np.sqrt(2.0 * rho), dtype=np.float64)

    def epsilon_for(
        self, scale: npt.ArrayLike, sensitivity: Sensitivity, delta: float = 0.0
    ) -> FloatArray:
        """ε of ρ = Δ₂²/(2σ²) at δ."""
        s = v.positive(scale, "scale")
        d = v.delta_positive(delta)
        return _zcdp_epsilon(sensitivity.l2**2 / (2.0 * s**2), d)

    def event(self, scale: float, sensitivity: Sensitivity) -> PrivacyEvent:
        """``GaussianEvent(σ/Δ₂, discrete=True)``."""
        return GaussianEvent(float(scale) / sensitivity.l2, discrete=True)

    def rmse(self, scale: npt.ArrayLike) -> FloatArray:
        """√Var (exact)."""
        return np.asarray(np.sqrt(discrete_gaussian_variance(scale)), dtype=np.float64)

    def error_bound(self, scale: npt.ArrayLike, beta: float = 0.05) -> FloatArray:
        """Smallest integer m with P(|X| > m) ≤ β (exact)."""
        return discrete_gaussian_error_bound(scale, beta)

    def simulate(
        self, true_value: npt.ArrayLike, scale: float, size: int, rng: np.random.Generator
    ) -> FloatArray:
        """Planning draws by CKS20's rejection sampler (Alg. 3), vectorised in numpy.

        Y ~ discrete Laplace of scale t = ⌊σ⌋ + 1, accepted with probability
        exp(−(|Y| − σ²/t)²/(2σ²)); accepted Y are exactly discrete-Gaussian.
        """
        t, shape = _repeat_shape(true_value, size)
        s = float(v.positive(scale, "scale"))
        lap_t = float(np.floor(s) + 1.0)
        q = -np.expm1(-1.0 / lap_t)
        total = int(np.prod(shape))
        out = np.empty(0, dtype=np.float64)
        while out.size < total:
            need = total - out.size
            batch = int(need * 1.6) + 16
            y = (rng.geometric(q, size=batch) - rng.geometric(q, size=batch)).astype(np.float64)
            accept = rng.random(batch) < np.exp(-((np.abs(y) - s * s / lap_t) ** 2) / (2 * s * s))
            out = np.concatenate([out, y[accept][:need]])
        return np.asarray(t + out.reshape(shape), dtype=np.float64)


GAUSSIAN: Final = GaussianMechanism()
DISCRETE_GAUSSIAN: Final = DiscreteGaussianMechanism()
