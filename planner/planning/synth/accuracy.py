"""Data-independent predictions of the TVD of a synthetic table's measured marginals.

Inputs are public only: the planned invocations (their σ's), the declared domain sizes, a
public row count n and the number N of synthetic rows. For one marginal of k cells
measured with Gaussian noise σ, and N synthetic rows drawn i.i.d. from an estimate q:

* measurement term (EXACT for the raw noisy table y = x + N(0, σ²I), normalised by n):
  E[½ Σ|y_i − x_i|]/n = ½·k·σ·√(2/π)/n, since E|N(0, σ²)| = σ√(2/π) [JKB94];
* sampling term: E[½ Σ|p̂_i − q_i|] for the empirical p̂ of N i.i.d. draws from q is
  ≤ ½ Σ √(q_i(1 − q_i)/N) ≤ ½ √((k − 1)/N) (Jensen, then Cauchy–Schwarz: an UPPER BOUND
  for every q), and ≈ ½ √(2/π) Σ √(q_i(1 − q_i)/N) (normal APPROXIMATION), whose largest
  value over q is at the uniform q (a Schur-concave sum), ½ √(2/π) √((k − 1)/N);
* combined (APPROXIMATION): the synthetic marginal's error in cell i is the error of the
  normalised estimate q_i = y_i/Σy plus the independent sampling error. At the uniform
  truth, q_i − p_i ≈ (N_i − p_i ΣN_l)/n has variance (1 − 1/k)σ²/n² and the sampling
  error variance q_i(1 − q_i)/N = (1 − 1/k)/(kN), so (uniform: again the worst case)
  E TVD ≈ ½·k·√(2/π)·√((1 − 1/k)(σ²/n² + 1/(kN))).

What the fitted model adds is post-processing that these formulas ignore: projection to
non-negative, consistent marginals (which only shrinks the raw table's error in L2, and in
practice in L1 too, most on sparse tables), domain compression, and for a column the
extra information of every 2-way measurement holding it. So for our mechanisms the
predictions are **conservative approximations, not guarantees**: on the benchmark tables
(ISLR Wage, Fair's affairs survey; ε 0.5 to 4) the realised 1-way TVD was 50–80 % of the
prediction and the measured 2-way TVD 25–70 %. A 2-way marginal that was *not* measured is
as good as the model's conditional independence is for those columns: that is data-
dependent and these predictions do not cover it.

References
----------
.. [JKB94] N. L. Johnson, S. Kotz, N. Balakrishnan, *Continuous Univariate
   Distributions*, vol. 1, 2nd ed., Wiley 1994, ch. 13 (E|X| = σ√(2/π), Var|X| =
   σ²(1 − 2/π) for X ~ N(0, σ²)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.planning.synth.domain import Domain, FloatArray
from planner.planning.synth.privacy import (
    ExponentialSelection,
    GaussianMeasurement,
    PlannedInvocation,
)

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
#: z of a one-sided 95% normal bound.
Z95 = 1.6448536269514722


def measurement_tvd(sigma: npt.ArrayLike, n: float, cells: npt.ArrayLike) -> FloatArray:
    """E TVD of a raw Gaussian-noised table against the truth, normalised by n (exact).

    Notes
    -----
    ½ Σ_i E|N(0, σ²)|/n = ½·k·σ·√(2/π)/n.

    Examples
    --------
    >>> float(measurement_tvd(10.0, 1000.0, 4)) == 0.5 * 4 * 10 * math.sqrt(2 / math.pi) / 1000
    True
    """
    return np.asarray(0.5 * np.asarray(cells, dtype=float) * np.asarray(sigma, dtype=float) * SQRT_2_OVER_PI / n)


def sampling_tvd_bound(cells: npt.ArrayLike, n_synth: float) -> FloatArray:
    """Upper bound ½√((k − 1)/N) on E TVD of N i.i.d. draws against their distribution.

    Examples
    --------
    >>> float(sampling_tvd_bound(5, 100))
    0.1
    """
    k = np.asarray(cells, dtype=float)
    return np.asarray(0.5 * np.sqrt((k - 1.0) / n_synth))


def sampling_tvd(cells: npt.ArrayLike, n_synth: float) -> FloatArray:
    """Normal approximation ½√(2/π)√((k − 1)/N) at the uniform distribution (its worst case).

    Examples
    --------
    >>> round(float(sampling_tvd(2, 10_000)), 6)  # ½·√(2/π)·√(1/10⁴)
    0.003989
    """
    return np.asarray(SQRT_2_OVER_PI * sampling_tvd_bound(cells, n_synth))


def combined_tvd(sigma: npt.ArrayLike, n: float, cells: npt.ArrayLike, n_synth: float | None) -> FloatArray:
    """Approximate E TVD of a synthetic marginal: noise and sampling per cell in quadrature.

    Parameters
    ----------
    sigma : array_like
        Gaussian σ of the measurement (counts).
    n : float
        Public row count of the real table.
    cells : array_like
        k, the number of cells of the marginal.
    n_synth : float or None
        N, the number of synthetic rows; ``None`` for the model itself (N → ∞).

    Notes
    -----
    ½·k·√(2/π)·√((1 − 1/k)(σ²/n² + 1/(kN))) (module docstring; uniform worst case).

    Examples
    --------
    >>> bool(np.isclose(combined_tvd(10.0, 1000.0, 4, None), measurement_tvd(10.0, 1000.0, 4) * math.sqrt(3 / 4)))
    True
    """
    k = np.asarray(cells, dtype=float)
    s = np.asarray(sigma, dtype=float)
    samp = 0.0 if n_synth is None else 1.0 / (k * n_synth)
    return np.asarray(0.5 * k * SQRT_2_OVER_PI * np.sqrt((1.0 - 1.0 / k) * (s**2 / n**2 + samp)))


@dataclass(frozen=True, slots=True)
class ReleaseAccuracy:
    """Predicted TVD of the marginals a release measures (data-independent, approximate).

    Attributes
    ----------
    one_way : tuple of float
        Each column's 1-way marginal (its own 1-way measurement only).
    two_way : tuple of float
        The 2-way marginals the prediction assumes measured, largest first (which pairs
        are measured is decided by the release's private selections; the prediction takes
        the pairs with the most cells, the worst case for the average).
    mean : float
        The mean over ``one_way`` and ``two_way``: the predicted error of a release.
    bound_95 : float
        A 95% bound on that mean (:func:`release_accuracy`).
    measured_pairs : int
        How many 2-way marginals a release measures (at most).
    """

    one_way: tuple[float, ...]
    two_way: tuple[float, ...]
    mean: float
    bound_95: float
    measured_pairs: int

    @property
    def one_way_mean(self) -> float:
        return float(np.mean(self.one_way)) if self.one_way else math.nan

    @property
    def two_way_mean(self) -> float:
        return float(np.mean(self.two_way)) if self.two_way else math.nan


def release_accuracy(events: Sequence[PlannedInvocation], domain: Domain, n: float,
                     n_synth: float | None) -> ReleaseAccuracy:
    """Predicted TVD of a release's 1-way and measured 2-way marginals (data-independent).

    Parameters
    ----------
    events : sequence of planned invocations
        From :func:`planner.planning.synth.mst.mst_events` or
        :func:`planner.planning.synth.aim.aim_events` (their σ's).
    domain : Domain
        The declared domain (sizes only).
    n : float
        Public row count.
    n_synth : float or None
        Synthetic rows drawn (``None``: the model itself).

    Notes
    -----
    Each 1-way marginal j: :func:`combined_tvd` at σ₁ and k_j cells. The release measures
    m 2-way marginals (MST: d − 1, a spanning tree; AIM: one per round, at most the number
    of pairs, and a round may re-measure a pair or a column), each with σ₂ (σ_t for AIM):
    the prediction takes the m pairs with the most cells, so their mean is at least the
    mean over whichever pairs the selections pick. The 95% bound treats each marginal's
    TVD as normal with the coefficient of variation of a sum of k half-normals,
    √((π/2 − 1)/k) [JKB94], and the marginals as perfectly correlated (the worst case for
    the spread of their mean): mean + z₀.₉₅·Σ tvd_i·√((π/2 − 1)/k_i)/M.

    Examples
    --------
    >>> from planner.planning.synth.mst import mst_events
    >>> dom = Domain.from_sizes([4, 4, 2])
    >>> acc = release_accuracy(mst_events(1.0, dom), dom, 1000, None)
    >>> len(acc.one_way), len(acc.two_way), acc.bound_95 > acc.mean > 0
    (3, 2, True)
    """
    gauss = [e for e in events if isinstance(e, GaussianMeasurement)]
    one = [e for e in gauss if e.round is None]
    two = [e for e in gauss if e.round is not None]
    sizes = [int(k) for k in domain.sizes]
    one_tvd = [float(combined_tvd(e.sigma, n, k, n_synth)) for e, k in zip(one, sizes, strict=True)]
    pair_cells = sorted((sizes[i] * sizes[j] for i in range(len(sizes)) for j in range(i + 1, len(sizes))),
                        reverse=True)
    m = min(len(two), len(pair_cells))
    two_tvd = [float(combined_tvd(two[t].sigma, n, pair_cells[t], n_synth)) for t in range(m)]
    vals = one_tvd + two_tvd
    cells = sizes + pair_cells[:m]
    mean = float(np.mean(vals))
    spread = sum(v * math.sqrt((math.pi / 2.0 - 1.0) / k) for v, k in zip(vals, cells, strict=True)) / len(vals)
    return ReleaseAccuracy(tuple(one_tvd), tuple(two_tvd), mean, mean + Z95 * spread, m)


def selections(events: Sequence[PlannedInvocation]) -> list[ExponentialSelection]:
    """The exponential-mechanism selections of a planned list, in order."""
    return [e for e in events if isinstance(e, ExponentialSelection)]
