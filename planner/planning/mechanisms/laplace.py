"""Laplace and discrete Laplace noise: calibration, privacy events, predicted accuracy.

Both are pure ε-DP. Everything broadcasts over numpy arrays of ε (or of scales) so that
the dashboard can redraw a whole accuracy curve in one call.

References
----------
.. [DMNS06] C. Dwork, F. McSherry, K. Nissim, A. Smith, "Calibrating Noise to Sensitivity
   in Private Data Analysis", TCC 2006, Prop. 1 (the Laplace mechanism).
.. [GRS12] A. Ghosh, T. Roughgarden, M. Sundararajan, "Universally Utility-Maximizing
   Privacy Mechanisms", SIAM J. Comput. 2012 (the geometric / discrete Laplace mechanism).
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
   Privacy", NeurIPS 2020, arXiv:2004.00010, §1 and Thm 7 (exact samplers; the discrete
   Laplace P(k) ∝ exp(−|k|/t) is (Δ/t)-DP for integer queries of sensitivity Δ).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms.base import FloatArray, MechanismName, Sensitivity
from planner.privacy.events import LaplaceEvent, PrivacyEvent, PureEvent


def _simulate_shape(true_value: npt.ArrayLike, size: int) -> tuple[FloatArray, tuple[int, ...]]:
    t = np.asarray(true_value, dtype=np.float64)
    n = v.count(size, "size")
    return t, (n, *t.shape)


class _LaplaceScale:
    """What the continuous and the discrete Laplace share: ε-DP with scale = Δ₁/ε."""

    @property
    def pure(self) -> bool:
        return True

    def scale_for(
        self, epsilon: npt.ArrayLike, sensitivity: Sensitivity, delta: float = 0.0
    ) -> FloatArray:
        """Scale (b, or t for the discrete version) = Δ₁/ε."""
        return np.asarray(sensitivity.l1 / v.epsilons(epsilon), dtype=np.float64)

    def epsilon_for(
        self, scale: npt.ArrayLike, sensitivity: Sensitivity, delta: float = 0.0
    ) -> FloatArray:
        """ε = Δ₁/scale."""
        return np.asarray(sensitivity.l1 / v.positive(scale, "scale"), dtype=np.float64)


class LaplaceMechanism(_LaplaceScale):
    """Continuous Laplace noise of scale b = Δ₁/ε (docs/mathematics.md §3).

    Notes
    -----
    Density (1/2b)·e^{−|z|/b}; E[z²] = 2b², so RMSE = √2·b; P(|z| > t) = e^{−t/b}, so the
    (1−β) error bound is b·ln(1/β).

    References
    ----------
    Dwork, McSherry, Nissim & Smith 2006, Prop. 1; Garivier, "How to learn while respecting
    individual privacy?" (ENS de Lyon, 2021), "Laplace Mechanism".

    Examples
    --------
    >>> m = LaplaceMechanism()
    >>> float(m.scale_for(0.5, Sensitivity(1.0, 1.0))[()])  # b = 1/0.5, by hand
    2.0
    >>> round(float(m.error_bound(1.0, 0.05)[()]), 6)  # ln 20 = 2.995732, as opendp's helper
    2.995732
    """

    @property
    def name(self) -> MechanismName:
        return MechanismName.LAPLACE

    @property
    def integer(self) -> bool:
        return False

    def event(self, scale: float, sensitivity: Sensitivity) -> PrivacyEvent:
        """``LaplaceEvent(noise_multiplier = b/Δ₁)``."""
        return LaplaceEvent(float(scale) / sensitivity.l1)

    def rmse(self, scale: npt.ArrayLike) -> FloatArray:
        """√2·b."""
        return np.asarray(np.sqrt(2.0) * v.positive(scale, "scale"), dtype=np.float64)

    def error_bound(self, scale: npt.ArrayLike, beta: float = 0.05) -> FloatArray:
        """b·ln(1/β) (exact: P(|z| > b ln(1/β)) = β)."""
        return np.asarray(
            v.positive(scale, "scale") * -np.log(v.beta_level(beta)), dtype=np.float64
        )

    def simulate(
        self, true_value: npt.ArrayLike, scale: float, size: int, rng: np.random.Generator
    ) -> FloatArray:
        """``size`` planning draws of true_value + Laplace(b); shape (size, *true.shape)."""
        t, shape = _simulate_shape(true_value, size)
        b = float(v.positive(scale, "scale"))
        return np.asarray(t + rng.laplace(0.0, b, size=shape), dtype=np.float64)


def discrete_laplace_variance(scale: npt.ArrayLike) -> FloatArray:
    """Exact variance of the discrete Laplace P(k) ∝ e^{−|k|/t}.

    Notes
    -----
    With r = e^{−1/t}: Var = 2r/(1−r)², computed as 2e^{−1/t}/expm1(−1/t)² (no
    cancellation for large t, no overflow for small t). It tends to 2t² as t → ∞.

    Examples
    --------
    >>> import math
    >>> r = math.exp(-1.0)
    >>> round(float(discrete_laplace_variance(1.0)[()]), 9) == round(2 * r / (1 - r) ** 2, 9)
    True
    """
    t = v.positive(scale, "scale")
    a = 1.0 / t
    return np.asarray(2.0 * np.exp(-a) / np.expm1(-a) ** 2, dtype=np.float64)


def discrete_laplace_tail(scale: npt.ArrayLike, m: npt.ArrayLike) -> FloatArray:
    """P(|X| > m) for integer m ≥ 0: 2e^{−(m+1)/t}/(1 + e^{−1/t}) (sum of two geometric tails)."""
    t = v.positive(scale, "scale")
    mm = np.asarray(m, dtype=np.float64)
    return np.asarray(2.0 * np.exp(-(mm + 1.0) / t) / (1.0 + np.exp(-1.0 / t)), dtype=np.float64)


class DiscreteLaplaceMechanism(_LaplaceScale):
    """Discrete Laplace (two-sided geometric) noise P(k) ∝ exp(−|k|/t) on integer queries.

    Parametrised like OpenDP's ``make_laplace`` on an integer domain: scale t, ε = Δ₁/t.

    Notes
    -----
    Var = 2e^{−1/t}/(1 − e^{−1/t})² (exact). Tail P(|X| > m) = 2e^{−(m+1)/t}/(1 + e^{−1/t});
    the error bound is the *smallest integer* m with P(|X| > m) ≤ β, i.e.
    m = max(0, ⌈t·ln(2/(β(1 + e^{−1/t})))⌉ − 1) (checked against the exact tail). OpenDP's
    ``discrete_laplacian_scale_to_accuracy(t, β)`` returns the real solution a of
    P(|X| ≥ a) = β, whose floor is this m.

    References
    ----------
    Ghosh, Roughgarden & Sundararajan 2012; Canonne, Kamath & Steinke 2020,
    arXiv:2004.00010 (exact sampling); OpenDP 0.16 ``discrete_laplacian_scale_to_accuracy``.

    Examples
    --------
    >>> m = DiscreteLaplaceMechanism()
    >>> int(m.error_bound(2.0, 0.05)[()])  # 2e^{-(m+1)/2}/(1+e^{-1/2}) ≤ .05 first at m = 6
    6
    """

    @property
    def name(self) -> MechanismName:
        return MechanismName.DISCRETE_LAPLACE

    @property
    def integer(self) -> bool:
        return True

    def event(self, scale: float, sensitivity: Sensitivity) -> PrivacyEvent:
        """``PureEvent(Δ₁/t)`` (no tighter RDP curve is claimed for the discrete version)."""
        return PureEvent(sensitivity.l1 / float(scale))

    def rmse(self, scale: npt.ArrayLike) -> FloatArray:
        """√Var (exact)."""
        return np.asarray(np.sqrt(discrete_laplace_variance(scale)), dtype=np.float64)

    def error_bound(self, scale: npt.ArrayLike, beta: float = 0.05) -> FloatArray:
        """Smallest integer m with P(|X| > m) ≤ β (exact)."""
        t = v.positive(scale, "scale")
        b = v.beta_level(beta)
        guess = np.ceil(t * np.log(2.0 / (b * (1.0 + np.exp(-1.0 / t))))) - 1.0
        m = np.maximum(guess, 0.0)
        # Fix the rare ±1 from rounding in ceil: the exact tail decides.
        m = np.where(discrete_laplace_tail(t, m) > b, m + 1.0, m)
        m = np.where((m > 0) & (discrete_laplace_tail(t, np.maximum(m - 1.0, 0.0)) <= b), m - 1.0, m)
        return np.asarray(m, dtype=np.float64)

    def simulate(
        self, true_value: npt.ArrayLike, scale: float, size: int, rng: np.random.Generator
    ) -> FloatArray:
        """true_value + (G₁ − G₂), G ~ Geometric(1 − e^{−1/t}) on {0, 1, …} (exact in law)."""
        t, shape = _simulate_shape(true_value, size)
        s = float(v.positive(scale, "scale"))
        q = -np.expm1(-1.0 / s)
        g1 = rng.geometric(q, size=shape) - 1
        g2 = rng.geometric(q, size=shape) - 1
        return np.asarray(t + (g1 - g2), dtype=np.float64)


def rounded_laplace_rmse(scale: npt.ArrayLike) -> FloatArray:
    """RMSE of round(N), N ~ Laplace(b): the error of a Laplace count rounded to a whole number.

    Notes
    -----
    For an integer true count x, round(x + N) − x = round(N). For k ≥ 1,
    P(round(N) = ±k) = P(k − ½ ≤ |N| < k + ½)/2 = e^{−k/b}·sinh(1/(2b)), so with q = e^{−1/b}
    E[round(N)²] = 2 sinh(1/(2b)) Σ_{k≥1} k² q^k = 2 sinh(1/(2b))·q(1 + q)/(1 − q)³, which
    tends to 2b² + 1/12 as b → ∞ (Sheppard's correction).

    Examples
    --------
    >>> round(float(rounded_laplace_rmse(100.0)[()]) ** 2 - 2 * 100.0**2, 3)  # ≈ 1/12
    0.083
    """
    b = v.positive(scale, "scale")
    q = np.exp(-1.0 / b)
    one_minus_q = -np.expm1(-1.0 / b)
    return np.asarray(np.sqrt(2.0 * np.sinh(0.5 / b) * q * (1.0 + q) / one_minus_q**3), dtype=np.float64)


def rounded_laplace_error_bound(scale: npt.ArrayLike, beta: float = 0.05) -> FloatArray:
    """Smallest integer t ≥ 0 with P(|round(N)| > t) ≤ β, N ~ Laplace(b).

    P(|round(N)| > t) = P(|N| ≥ t + ½) = e^{−(t+½)/b}, so t = max(0, ⌈b ln(1/β) − ½⌉).

    Examples
    --------
    >>> int(rounded_laplace_error_bound(1.0, 0.05)[()])  # ⌈ln 20 − ½⌉ = ⌈2.496⌉
    3
    """
    b = v.positive(scale, "scale")
    return np.asarray(np.maximum(np.ceil(b * -np.log(v.beta_level(beta)) - 0.5), 0.0), dtype=np.float64)


LAPLACE: Final = LaplaceMechanism()
DISCRETE_LAPLACE: Final = DiscreteLaplaceMechanism()
