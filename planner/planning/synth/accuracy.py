"""Data-independent predictions of the TVD of a synthetic table's measured marginals.

Inputs are public only: the planned invocations (their σ's), the declared domain sizes, a
public row count n and the number N of synthetic rows. Every prediction is an expected
total-variation distance (TVD) between a marginal of the synthetic table and the real one,
in [0, 1], increasing in σ (so decreasing and continuous in the budget ρ, σ ∝ 1/√ρ).

Raw noise (EXACT). For a table of k cells measured as y = x + N(0, σ²I), normalised by n,
E[½ Σ|y_i − x_i|]/n = ½·k·σ·√(2/π)/n, since E|N(0, σ²)| = σ√(2/π) [JKB94]
(:func:`measurement_tvd`). It grows without bound as σ grows: it is not what is released.

The fitted model's post-processing (APPROXIMATION). The model's marginal is non-negative
and sums to the estimated total, and its margins agree with the other measurements:
Private-PGM's estimate is a Euclidean projection of the noisy measurements onto the
consistent marginals [MSM19, §4]. We predict the error of that projection for one table:

* consistency: with the table's 1-way margins pinned by the other measurements, the noise
  left in a k_a×k_b table is its projection on the interaction subspace, per cell variance
  σ²(1 − 1/k_a)(1 − 1/k_b) (the orthogonal projector that removes row and column means); a
  1-way table of k cells keeps σ²(1 − 1/k) once its total is fixed. We write σ_e for the
  noise left per cell and t = k·σ_e/n (the noise in units of a uniform cell's count n/k);
* non-negativity: the Euclidean projection of y onto {q ≥ 0, Σq = n} is
  q_i = max(y_i − λ, 0), λ chosen so that Σq = n [Michelot 1986; Duchi et al. 2008]. At the
  truth spread evenly over the cells, x_i = n/k (the PUBLIC ASSUMPTION of this module: the sampling term's worst
  case, and the largest error of the truths we compared — cell counts drawn as a
  flat-Dirichlet table of the same total give 3–15 % less; sparser real tables less still), and
  for many cells (the law of large numbers fixes λ), in units of n/k: X = max(1 − μ + tW, 0)
  with W ~ N(0, 1) and μ = λk/n solving E X = 1. With g(m) = E(m − tW)⁺ = m·Φ(m/t) + t·φ(m/t)
  (the normal partial expectation [JKB94]) that is g(1 − μ) = 1, and, since E X = 1,
  TVD = ½E|X − 1| = E(1 − X)⁺ = E[min(1, (μ − tW)⁺)], so

      TVD_proj(t) = g(μ) − g(μ − 1)         (:func:`projected_tvd`).

  g is 1-Lipschitz, so TVD_proj ≤ 1; TVD_proj(t) = ½·t·√(2/π) + o(t) as t → 0 (the raw
  table's error: a dense table is not changed by the projection) and → 1 as t → ∞ (the
  projection keeps a few noise spikes), increasing in t in between (checked on
  10⁻⁴ ≤ t ≤ 10⁴). It is a closed form in t = kσ_e/n alone, for many cells (the tests
  compare it with the exact projection of 2,000 cells). The raw ½·t·√(2/π) is the k·σ
  scaling the old prediction used: at t = 2 the projection gives 0.52 instead of 0.80, at
  t = 10 0.83 instead of 3.99.
* sampling, i.i.d. rows (``sampler="iid"``): N rows drawn independently from the model add
  the multinomial error of each cell, ≈ ½√(2/π)√((k − 1)/N) at the uniform distribution
  (normal approximation; it is ≤ ½√((k − 1)/N) for every distribution, by Jensen and
  Cauchy–Schwarz) (:func:`sampling_tvd`).
* sampling, stratified rows (``sampler="stratified"``, the default;
  :mod:`planner.planning.synth.sample`): within each separator group of each clique the
  counts are the systematic rounding of their expected counts, so a clique cell's count
  given its separator count m_s is m_s·p_j + e_j with a rounding error e_j ∈ {−f_j, 1 − f_j}
  (f_j the fractional part of m_s·p_j): E e_j = 0, Var e_j = f_j(1 − f_j), E|e_j| =
  2f_j(1 − f_j) — about 1/3 when the cells' expected counts N/k are ≥ 1 (f spread evenly),
  at most 2x for a cell of expected count x < 1. Rounding errors of different groups are
  independent. We take the cells' expected counts as those of a flat-Dirichlet table
  (x·Exp(1) for mean x; an evenly spread truth would give every cell the same f, an
  artefact), so the variance of one rounding is v(x) = E f(1 − f) in closed form
  (:func:`rounding_variance`: → 1/6 for x ≫ 1, ≈ x for x ≪ 1). A marginal's cell then
  carries the roundings that sum into it, plus its separator count's error shared out
  over the new column's cells, in the shape of MST's model (a tree of pairs, each column
  drawn given one other column of k̄ values, k̄ the mean column size): a 1-way cell sums
  k̄ groups' roundings, V₁ = k̄·v(N/(k̄k_a)); a measured pair's cell is one rounding plus
  the separator's error, V₂ = v(N/(k_ak_b)) + ½(V₁(k_a)/k_b² + V₁(k_b)/k_a²). The TVD is
  ½·k·√(2/π)·√V/N (normal approximation; for one rounding at x ≫ 1 it gives 0.326 against
  the exact 1/3), capped by the i.i.d. term: no integer count of mean x has a variance
  below f(1 − f), so given the separator counts the rounding's variance is at most the
  multinomial's (:func:`stratified_sampling_tvd`). Checked against the sampler on a tree
  of pairs (the tests) and on models fitted to the benchmark tables: for MST the pure
  sampling TVD (the synthetic marginal against the model's own;
  ``tests/benchmarks/bench_synthetic_sampling.py``) of the measured pairs was 0.78–1.01 of
  the term and of the 1-way marginals 0.90–1.18; AIM's cliques hold 3–5 columns, a cell of
  a pair or a column then sums several roundings, and the realised term was 1.0–5.8× this
  one (still 0.07–0.34 of the realised i.i.d. sampling TVD), a part the prediction leaves
  out (docs/measurements/2026-12-07/synthetic_sampler.txt).

Independent, nearly normal per-cell errors add in quadrature (E|A + B| = √(2/π)√(a² + b²)
for normal A, B); so a marginal's TVD is predicted as √(a² + b²(1 − a²)) for the
projection's a and the sampling's b, the quadrature sum shrunk where a nears 1 so that it
stays ≤ 1 (:func:`marginal_tvd`). The sampling term is the sampler's the release uses: the
statistic passes its ``sampler`` option to the plan's prediction, the release and the
simulation alike.

Which pairs (APPROXIMATION). The release's private selections choose which 2-way marginals
are measured, so a data-independent prediction assumes how they choose:

* MST picks a spanning tree on the pairs' dependence, whatever their size: the prediction
  for a measured pair is the mean over every pair (a pair picked at random);
* AIM's quality score is the model's L1 error on a candidate pair, E_r, less the pair's
  expected measurement noise p_r = √(2/π)·σ_t·k_r, linear in its cells k_r [MMSM22, §4.2].
  Without the data, take the E_r of the pairs the model has not measured as independent of
  their size and Gumbel-distributed with scale τ·n (τ·n: the L1 error of a typical unmeasured
  pair, twice its TVD from the model, in rows). Then the pair with the highest score is r with
  probability ∝ exp(−p_r/(τ·n)) (the Gumbel-max property: the argmax of E_r − p_r is a softmax
  of −p_r/(τn)); the exponential mechanism's own noise, of scale 2Δ₁/ε_t, is small beside τn
  on these tables and is left out. The prediction for a measured pair is the mean over every
  pair with those weights (:func:`aim_pair_weights`). The weights flatten as ε grows (σ_t
  falls): at a small ε AIM keeps to small tables, at a large one it measures pairs about as
  large as the average pair — measured at ε = 4: 122 cells a measured pair on Bikeshare,
  128 the average pair (docs/measurements/2026-12-07b/aim_prediction.txt). τ = 0.15
  (:data:`AIM_UNMEASURED_L1`, a typical TVD of 7.5 %) is calibrated on the three benchmark
  tables below; the weights 1/k_r used before, with no dependence on ε, were optimistic by
  up to 1.47× at ε = 4 and pessimistic at ε = 0.5.

The release's error is the mean over its d 1-way marginals and its m measured 2-way
marginals (m = d − 1 for MST, the number of rounds for AIM, at most the number of pairs).
A 2-way marginal that was *not* measured is as good as the model's conditional
independence is for those columns: that is data-dependent and not predicted.

Validation. On the benchmark tables (ISLR Wage, 3,000 × 11; Fair's affairs survey,
6,366 × 9; Capital Bikeshare 2011, 8,645 × 15; ε 0.5, 1, 4; the release path with OpenDP
noise, AIM with 25 warm-started iterations a round; 3 repetitions a cell;
docs/measurements/2026-12-07/synthetic_sampler.txt), realised / predicted was:

* stratified rows (the default): the mean measured 2-way TVD 0.56–0.97 for MST, the 1-way
  TVD 0.59–0.74, the release's mean over both 0.58–0.88. For AIM, with the pair weights
  above (docs/measurements/2026-12-07b/aim_prediction.txt), the release's mean over both
  0.72–1.04 on the run τ was calibrated on, where the 1/k_r weights gave 0.72–1.47 on the
  same releases (0.77–1.61 in the earlier run), and 0.72–1.08 on a second run with fresh
  noise (measured 2-way 0.76–1.44, 1-way 0.52–1.04: at ε ≤ 1 the pairs are under-predicted
  and the columns over-predicted, and the mean is what is shown). The tables are the ones
  τ was calibrated on;
* i.i.d. rows (measured with the 1/k_r weights): the measured 2-way TVD 0.57–0.94 (MST) and
  0.79–1.27 (AIM), the 1-way TVD 0.53–0.87 and 0.60–0.83; the mean over both 0.59–0.90 and
  0.78–1.18.

Below 1 the truths are sparser than uniform, and a column's 1-way marginal also gains from
every 2-way measurement holding it. The tests check the prediction against Monte Carlo of
the release path within a band, for both samplers. The old prediction (the raw k·σ scaling
on the pairs with the most cells) was 1.8–11× the realised error and exceeded 1 on small
tables.

References
----------
.. [JKB94] N. L. Johnson, S. Kotz, N. Balakrishnan, *Continuous Univariate
   Distributions*, vol. 1, 2nd ed., Wiley 1994, ch. 13 (E|X| = σ√(2/π), Var|X| =
   σ²(1 − 2/π) for X ~ N(0, σ²); the partial expectation E(m − X)⁺).
.. [MSM19] R. McKenna, D. Sheldon, G. Miklau, "Graphical-model based estimation and
   inference for differential privacy", ICML 2019, arXiv:1901.09136 (§4: the estimate
   minimises the L2 distance of its marginals to the noisy measurements over the
   marginal polytope).
.. [MMSM22] R. McKenna, B. Mullins, D. Sheldon, G. Miklau, "AIM: An Adaptive and
   Iterative Mechanism for Differentially Private Synthetic Data", PVLDB 15(11), 2022,
   arXiv:2201.12677 (§4.2: the quality score's noise penalty).
.. [Mic86] C. Michelot, "A finite algorithm for finding the projection of a point onto
   the canonical simplex of R^n", J. Optimization Theory and Applications 50(1), 1986.
.. [DSSC08] J. Duchi, S. Shalev-Shwartz, Y. Singer, T. Chandra, "Efficient projections
   onto the ℓ1-ball for learning in high dimensions", ICML 2008 (the projection onto the
   simplex is a shift and a clip at 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from planner.core import special
from planner.core.rootfind import bisect_array
from planner.planning.synth.domain import Domain, FloatArray
from planner.planning.synth.privacy import (
    ExponentialSelection,
    GaussianMeasurement,
    PlannedInvocation,
)
from planner.planning.synth.sample import Sampler

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
#: Realised ÷ predicted mean TVD of a release on the benchmark tables with the default sampler
#: (module docstring, "Validation": MST 0.58–0.88, AIM 0.72–1.08), in words for the pages.
REALISED_VS_PREDICTED = "about 0.6 to 1.1"
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


def rounding_variance(x: npt.ArrayLike) -> FloatArray:
    """v(x) = E f(1 − f), f the fractional part of a cell's expected count X = x·U, U ~ Exp(1).

    The variance of one cell's systematic rounding error is f(1 − f) (and its E|e| is
    2f(1 − f)) for the fractional part f of its expected count
    (:func:`planner.planning.synth.sample.systematic_counts`). A truth spread exactly evenly
    would give every cell the same f, an artefact; the cells of a flat-Dirichlet table of
    mean x are ≈ x·Exp(1), whose fractional part has density a·e^(−af)/(1 − e^(−a)) on
    [0, 1), a = 1/x, so

        v(x) = (a − 2 + (a + 2)e^(−a)) / (a²(1 − e^(−a)))

    → 1/6 for x ≫ 1 (f spread evenly: E|e| → 1/3) and ≈ x for x ≪ 1 (E|e| ≈ 2x).

    Examples
    --------
    >>> [round(float(v), 4) for v in rounding_variance([0.01, 1.0, 100.0])]
    [0.0098, 0.164, 0.1667]
    """
    a = 1.0 / np.asarray(x, dtype=float)
    small = a < 1e-2  # the closed form's cancellation; there v = 1/6 + O(a²)
    b = np.where(small, 1.0, a)
    v = (b - 2.0 + (b + 2.0) * np.exp(-b)) / (b * b * -np.expm1(-b))
    return np.asarray(np.where(small, 1.0 / 6.0, v))


def stratified_sampling_tvd(sizes: Sequence[int], n_synth: float, other: float) -> float:
    """Predicted E TVD that the ``stratified`` sampler adds to a measured marginal (module docstring).

    Parameters
    ----------
    sizes : sequence of int
        k_a (a 1-way marginal) or k_a, k_b (a measured pair).
    n_synth : float
        N, the synthetic rows.
    other : float
        k̄, the cells of the separator a column is drawn given (the mean size of the
        other columns).

    Notes
    -----
    Per cell, the variance V of the count's error; the TVD is ½·k·√(2/π)·√V/N, at most
    the i.i.d. term :func:`sampling_tvd`. A 1-way marginal of k_a cells sums k̄ separator
    groups' independent roundings, each of expected count N/(k̄·k_a):
    V₁(k_a) = k̄·v(N/(k̄·k_a)) (:func:`rounding_variance`). A pair of k_a·k_b cells is a
    clique's table given one of its columns: one rounding of expected count N/(k_a·k_b)
    per cell, plus the separator count's error shared out over the other column's cells:
    V₂ = v(N/(k_a·k_b)) + ½(V₁(k_a)/k_b² + V₁(k_b)/k_a²).

    Examples
    --------
    >>> t = stratified_sampling_tvd([4, 4], 10_000, 4.0)  # one rounding per cell: ≈ ½·16·0.33/10⁴
    >>> 0.00025 < t < 0.0003 < float(sampling_tvd(16, 10_000))
    True
    """
    n = float(n_synth)
    k = [float(v) for v in sizes]

    def one(ka: float) -> float:
        return float(other * rounding_variance(n / (other * ka)))

    if len(k) == 1:
        var = one(k[0])
    else:
        ka, kb = k
        var = float(rounding_variance(n / (ka * kb))) + 0.5 * (one(ka) / kb**2 + one(kb) / ka**2)
    cells = float(np.prod(k))
    return min(0.5 * cells * SQRT_2_OVER_PI * math.sqrt(var) / n, float(sampling_tvd(cells, n)))


def _partial(m: FloatArray, t: FloatArray) -> FloatArray:
    """g(m) = E(m − tW)⁺ = m·Φ(m/t) + t·φ(m/t) for W ~ N(0, 1) [JKB94]."""
    z = m / t
    return np.asarray(m * special.ndtr(z) + t * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi))


def projected_tvd(t: npt.ArrayLike) -> FloatArray:
    """E TVD of a Gaussian-noised table projected onto the simplex, at the uniform truth.

    Parameters
    ----------
    t : array_like
        k·σ_e/n: the noise left per cell in units of a uniform cell's count n/k (≥ 0).

    Returns
    -------
    ndarray
        g(μ) − g(μ − 1) with g(1 − μ) = 1 (module docstring), in [0, 1), increasing in t.

    Notes
    -----
    μ is found by bisection on [0, 1 + 40t] (g(1) ≥ 1 and g(1 − μ) decreases in μ; at
    μ = 1 + 40t, g(1 − μ) < t·φ(40) ≈ 0), 80 halvings (relative width 2⁻⁸⁰).

    Examples
    --------
    >>> float(projected_tvd(0.0))
    0.0
    >>> small = float(projected_tvd(1e-3))  # a dense table: the raw error ½·t·√(2/π)
    >>> bool(abs(small - 0.5e-3 * SQRT_2_OVER_PI) < 1e-12)
    True
    >>> [round(float(v), 4) for v in projected_tvd([1.0, 2.0, 10.0])]
    [0.3507, 0.5244, 0.8294]
    """
    tt = np.atleast_1d(np.asarray(t, dtype=float))
    out = np.zeros_like(tt)
    pos = tt > 0
    if np.any(pos):
        tp = tt[pos]
        lo, hi = bisect_array(lambda mu: _partial(1.0 - mu, tp) <= 1.0, np.zeros_like(tp), 1.0 + 40.0 * tp,
                              iterations=80)
        mu = 0.5 * (lo + hi)
        out[pos] = np.clip(_partial(mu, tp) - _partial(mu - 1.0, tp), 0.0, 1.0)
    return out.reshape(np.shape(t))


def marginal_tvd(sigma: npt.ArrayLike, n: float, sizes: Sequence[int], n_synth: float | None,
                 sampler: Sampler | str = Sampler.STRATIFIED, other: float | None = None) -> FloatArray:
    """Predicted E TVD of one synthetic marginal over columns of ``sizes`` (module docstring).

    Parameters
    ----------
    sigma : array_like
        Gaussian σ of the marginal's measurement (counts).
    n : float
        Public row count of the real table.
    sizes : sequence of int
        The sizes k_a (one column) or k_a, k_b (a pair) of the marginal's columns.
    n_synth : float or None
        N, the number of synthetic rows; ``None`` for the model itself (N → ∞).
    sampler : Sampler or str
        How the rows are drawn (:mod:`planner.planning.synth.sample`): ``"stratified"``
        (the default) or ``"iid"``.
    other : float, optional
        k̄ of :func:`stratified_sampling_tvd` (default: the mean of ``sizes``).

    Notes
    -----
    k = Πk_a, σ_e = σ·√Π(1 − 1/k_a), a = TVD_proj(k·σ_e/n) (:func:`projected_tvd`),
    b = min(1, ½√(2/π)√((k − 1)/N)) for i.i.d. rows, :func:`stratified_sampling_tvd` for
    stratified ones; the prediction is √(a² + b²(1 − a²)) ≤ 1.

    Examples
    --------
    >>> a = float(marginal_tvd(10.0, 1000.0, [4], None))  # t = 4·10·√(3/4)/1000
    >>> bool(a == float(projected_tvd(40 * math.sqrt(0.75) / 1000)))
    True
    >>> float(marginal_tvd(1e6, 10.0, [16, 16], 10.0)) <= 1.0
    True
    """
    s = np.asarray(sigma, dtype=float)
    kbar = float(np.mean(sizes)) if other is None else float(other)
    return _marginal_tvds(s.ravel(), n, [list(sizes)] * s.size, n_synth, sampler, kbar).reshape(s.shape)


def _marginal_tvds(sigmas: FloatArray, n: float, sizes: Sequence[Sequence[int]], n_synth: float | None,
                   sampler: Sampler | str, other: float) -> FloatArray:
    """:func:`marginal_tvd` of many marginals at once (σ_i with ``sizes[i]``; one bisection)."""
    k = np.array([float(np.prod(z)) for z in sizes])
    shrink = np.sqrt([float(np.prod([1.0 - 1.0 / v for v in z])) for z in sizes])
    a = projected_tvd(k * sigmas * shrink / n)
    if n_synth is None:
        b = np.zeros_like(k)
    elif Sampler(sampler) is Sampler.IID:
        b = np.minimum(1.0, sampling_tvd(k, n_synth))
    else:
        b = np.minimum(1.0, [stratified_sampling_tvd(z, n_synth, other) for z in sizes])
    return np.asarray(np.sqrt(a * a + b * b * (1.0 - a * a)))


class PairRule(StrEnum):
    """How the prediction weighs the pairs a release's selections may measure."""

    #: MST: a spanning tree on the pairs' dependence, whatever their size (every pair alike).
    EVERY_PAIR = "every_pair"
    #: AIM: the quality score penalises a pair by its expected noise, ∝ its cells
    #: (:func:`aim_pair_weights`).
    FEWER_CELLS = "fewer_cells"


#: τ of AIM's pair weights (module docstring, "Which pairs"): the L1 error of the model on a
#: typical unmeasured pair as a fraction of n (twice a TVD of 7.5 %), calibrated on the
#: benchmark tables (Wage, fair, Bikeshare at ε 0.5, 1, 4).
AIM_UNMEASURED_L1 = 0.15


def aim_pair_weights(cells: npt.ArrayLike, sigma: float, n: float) -> FloatArray:
    """The chance AIM measures each pair in a round, predicted without the data: a softmax of
    −√(2/π)·σ_t·k_r/(τ·n) over the pairs (module docstring, "Which pairs").

    Parameters
    ----------
    cells : array_like
        k_r, the cells of each pair.
    sigma : float
        σ_t, the Gaussian σ of a round's measurement (counts).
    n : float
        The public row count.

    Examples
    --------
    At σ_t = 30 and n = 3,000 (a small ε) the exponents are 0.7979·30·k/450 = 0.0532·k:
    0.213, 0.851 and 13.6, so the weights are ∝ 1, e^−0.638 = 0.528 and e^−13.4 ≈ 0;
    at σ_t = 3 (a large ε), 0.00532·k: ∝ 1, 0.938 and 0.261.

    >>> w = aim_pair_weights([4, 16, 256], 30.0, 3000.0)  # at a small ε: small tables first
    >>> [round(float(v), 3) for v in w], round(float(w.sum()), 12)
    ([0.654, 0.346, 0.0], 1.0)
    >>> [round(float(v), 3) for v in aim_pair_weights([4, 16, 256], 3.0, 3000.0)]  # a large ε: flatter
    [0.455, 0.426, 0.119]
    """
    k = np.asarray(cells, dtype=np.float64)
    x = SQRT_2_OVER_PI * float(sigma) * k / (AIM_UNMEASURED_L1 * float(n))
    w = np.exp(-(x - x.min()))  # shifted: the same weights, no underflow at a tiny n
    return np.asarray(w / w.sum(), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class ReleaseAccuracy:
    """Predicted TVD of the marginals a release measures (data-independent, approximate).

    Attributes
    ----------
    one_way : tuple of float
        Each column's 1-way marginal.
    two_way : tuple of float
        Every pair (i, j), i < j in column order, as if measured (:func:`marginal_tvd`).
    pair_weights : tuple of float
        Each pair's weight in the mean of a measured pair (summing to 1; :class:`PairRule`).
    mean : float
        The mean over the d 1-way marginals and the m measured 2-way marginals (each at the
        weighted pair mean): the predicted error of a release, in [0, 1].
    bound_95 : float
        A 95% bound on that mean (:func:`release_accuracy`), at most 1.
    measured_pairs : int
        m, how many 2-way marginals a release measures (at most).
    """

    one_way: tuple[float, ...]
    two_way: tuple[float, ...]
    pair_weights: tuple[float, ...]
    mean: float
    bound_95: float
    measured_pairs: int

    @property
    def one_way_mean(self) -> float:
        return float(np.mean(self.one_way)) if self.one_way else math.nan

    @property
    def two_way_mean(self) -> float:
        """The predicted TVD of a measured pair (the weighted mean over the pairs)."""
        if not self.two_way or not self.measured_pairs:
            return math.nan
        return float(np.dot(self.two_way, self.pair_weights))


def release_accuracy(events: Sequence[PlannedInvocation], domain: Domain, n: float,
                     n_synth: float | None, pairs: PairRule = PairRule.EVERY_PAIR,
                     sampler: Sampler | str = Sampler.STRATIFIED) -> ReleaseAccuracy:
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
    pairs : PairRule
        Which pairs the selections are assumed to measure: ``EVERY_PAIR`` for MST,
        ``FEWER_CELLS`` for AIM (module docstring).
    sampler : Sampler or str
        How the release draws its rows (``"stratified"``, the default, or ``"iid"``): the
        sampling term of :func:`marginal_tvd`, with k̄ the mean column size of ``domain``.

    Notes
    -----
    Each 1-way marginal j: :func:`marginal_tvd` at σ₁ and k_j. Each pair (i, j):
    :func:`marginal_tvd` at the 2-way σ (σ₂ for MST, σ_t for AIM) and (k_i, k_j); a measured
    pair's prediction is their mean weighted by ``pairs``. The release measures m 2-way
    marginals (MST: d − 1; AIM: one per round, at most the number of pairs). The mean is
    (Σ_j one_j + m·two)/(d + m). The 95% bound treats each marginal's TVD as normal with
    the coefficient of variation of a sum of k half-normals, √((π/2 − 1)/k) [JKB94], and
    the marginals as perfectly correlated (the worst case for the spread of their mean):
    mean + z₀.₉₅·(Σ_j one_j·√((π/2 − 1)/k_j) + m·Σ_r w_r·two_r·√((π/2 − 1)/k_r))/(d + m),
    capped at 1.

    Examples
    --------
    >>> from planner.planning.synth.mst import mst_events
    >>> dom = Domain.from_sizes([4, 4, 2])
    >>> acc = release_accuracy(mst_events(1.0, dom), dom, 1000, None)
    >>> len(acc.one_way), len(acc.two_way), acc.measured_pairs, 1 >= acc.bound_95 > acc.mean > 0
    (3, 3, 2, True)
    """
    gauss = [e for e in events if isinstance(e, GaussianMeasurement)]
    one = [e for e in gauss if e.round is None]
    two = [e for e in gauss if e.round is not None]
    sizes = [int(k) for k in domain.sizes]
    d = len(sizes)
    index = [(i, j) for i in range(d) for j in range(i + 1, d)]
    m = min(len(two), len(index))
    shapes: list[list[int]] = [[k] for k in sizes]
    sig = [e.sigma for e in one]
    if two and index:
        shapes += [[sizes[i], sizes[j]] for i, j in index]
        sig += [two[0].sigma] * len(index)
    vals = _marginal_tvds(np.array(sig, dtype=float), n, shapes, n_synth, sampler,
                          float(np.mean(sizes)) if sizes else 1.0)
    cells = np.array([float(np.prod(z)) for z in shapes])
    spreads = vals * np.sqrt((math.pi / 2.0 - 1.0) / cells)
    one_tvd = [float(v) for v in vals[:d]]
    two_tvd = [float(v) for v in vals[d:]]
    total, spread = float(np.sum(vals[:d])), float(np.sum(spreads[:d]))
    weights: list[float] = []
    if two_tvd:
        cells_r = np.array([float(sizes[i] * sizes[j]) for i, j in index])
        w = (np.full(cells_r.size, 1.0 / cells_r.size) if pairs is PairRule.EVERY_PAIR
             else aim_pair_weights(cells_r, two[0].sigma, n))
        weights = [float(v) for v in w]
        total += m * float(np.dot(w, vals[d:]))
        spread += m * float(np.dot(w, spreads[d:]))
    mean = total / (d + m)
    return ReleaseAccuracy(tuple(one_tvd), tuple(two_tvd), tuple(weights), mean,
                           min(1.0, mean + Z95 * spread / (d + m)), m)


def selections(events: Sequence[PlannedInvocation]) -> list[ExponentialSelection]:
    """The exponential-mechanism selections of a planned list, in order."""
    return [e for e in events if isinstance(e, ExponentialSelection)]
