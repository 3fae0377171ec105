"""Privacy accounting of the mechanisms: sensitivities and the planned noisy invocations.

Every mechanism in this package is a fixed sequence of two kinds of invocations, listed
*before* any data is read by :func:`planner.planning.synth.mst.mst_events` and
:func:`planner.planning.synth.aim.aim_events`:

* :class:`GaussianMeasurement` — one marginal's full contingency table plus independent
  N(0, σ²) noise per cell; ρ = Δ₂²/(2σ²) [BS16, Prop. 1.6];
* :class:`ExponentialSelection` — the exponential mechanism over candidate marginals with
  a utility of sensitivity Δ_u, i.e. P(r) ∝ exp(ε·u_r/(2Δ_u)); ε-DP and ε-bounded range,
  hence ρ = ε²/8 [CR21, Lemma 3.2 with BS16's zCDP] (OpenDP's ``make_noisy_max`` with
  Gumbel noise of scale 2Δ_u/ε under ``zero_concentrated_divergence`` reports the same ρ).

Which marginal a selection picks (and so which marginal the next Gaussian measurement
reads) depends on the data; the *cost* of every invocation does not: the list is a
function of ρ, the domain's number of columns and the options only. Composition: ρ adds
[BS16, Lemma 2.3] (adaptive composition included), so Σρᵢ of the list is the mechanism's ρ.

Sensitivities (a person may own up to ``c`` rows; rows past ``c`` are dropped before any
marginal is computed). A person changes a marginal's count vector by v:

=============================  =========  ==========  ===================================
neighbouring relation          Δ₁ = ‖v‖₁  Δ₂ = ‖v‖₂   worst case
=============================  =========  ==========  ===================================
add/remove one person          c          c           all c rows in one cell
substitute one person          2c         √2·c        c rows leave cell a, c enter cell b
=============================  =========  ==========  ===================================

Add/remove: v ≥ 0 with Σv ≤ c, so ‖v‖₂ ≤ ‖v‖₁ ≤ c, with equality when the c rows share a
cell (they can: nothing stops one person's rows having equal codes), so L2 scales by c,
not √c. Substitution: v = a − b with a, b ≥ 0, Σa, Σb ≤ c, so ‖v‖₁ ≤ 2c and
‖v‖₂² = ‖a‖² + ‖b‖² − 2a·b ≤ 2c². Every selection utility here is
u_r = ‖M_r(x) − M̂_r‖₁ − b_r with M̂_r and b_r computed from earlier *noisy* outputs only,
so |u_r(x) − u_r(x′)| ≤ ‖M_r(x) − M_r(x′)‖₁ ≤ Δ₁ (triangle inequality). A marginal over
compressed columns (:mod:`.compress`) sums cells of the original one, which does not
increase either norm of v.

References
----------
.. [BS16] M. Bun, T. Steinke, "Concentrated Differential Privacy: Simplifications,
   Extensions, and Lower Bounds", TCC 2016, arXiv:1605.02065 (Prop. 1.6 Gaussian,
   Lemma 2.3 composition).
.. [CR21] M. Cesar, R. Rogers, "Bounding, Concentrating, and Truncating: Unifying Privacy
   Loss Composition for Data Analytics", ALT 2021, arXiv:2004.07223 (bounded range).
.. [MS20] R. McKenna, D. Sheldon, "Permute-and-Flip: A new mechanism for differentially
   private selection", NeurIPS 2020 (the Gumbel-max trick is the exponential mechanism).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from planner.core.errors import QueryError
from planner.data.schema import Relation
from planner.planning.synth.domain import FloatArray
from planner.privacy.events import ExponentialEvent, GaussianEvent, PrivacyEvent

#: Relative slack kept unspent so that upward-rounded privacy maps (OpenDP rounds every
#: map toward less privacy) never exceed the budget: Σρᵢ = ρ·(1 − BUDGET_SLACK).
BUDGET_SLACK = 1e-12

#: ``measure(true_counts, sigma) -> noisy_counts`` — adds N(0, σ²) to every cell
#: (σ a scalar). The only step that reads the data's counts for a measurement.
MeasureFn = Callable[[FloatArray, float], FloatArray]
#: ``select(scores, epsilon, sensitivity) -> index`` — the exponential mechanism,
#: P(i) ∝ exp(ε·scores[i]/(2·sensitivity)).
SelectFn = Callable[[FloatArray, float, float], int]


@dataclass(frozen=True, slots=True)
class Sensitivity:
    """L1 and L2 sensitivity of one marginal's count vector.

    Examples
    --------
    >>> s = marginal_sensitivity(Relation.SUBSTITUTE, rows_per_person=3)
    >>> s.l1, round(s.l2, 6)
    (6.0, 4.242641)
    """

    l1: float
    l2: float


def marginal_sensitivity(relation: Relation | str = Relation.ADD_REMOVE, rows_per_person: int = 1) -> Sensitivity:
    """Sensitivity of a full contingency table of one marginal (module table).

    Parameters
    ----------
    relation : Relation or str
        ``"add_remove"`` or ``"substitute"`` (one person).
    rows_per_person : int
        c ≥ 1, the most rows one person contributes (enforced upstream by dropping rows).

    Returns
    -------
    Sensitivity
        Add/remove: Δ₁ = Δ₂ = c. Substitute: Δ₁ = 2c, Δ₂ = √2·c.

    Examples
    --------
    >>> marginal_sensitivity("add_remove", 4)
    Sensitivity(l1=4.0, l2=4.0)
    """
    if isinstance(rows_per_person, bool) or int(rows_per_person) != rows_per_person or rows_per_person < 1:
        raise QueryError(f"rows_per_person must be a whole number ≥ 1; got {rows_per_person!r}.")
    c = int(rows_per_person)
    if Relation(relation) is Relation.ADD_REMOVE:
        return Sensitivity(float(c), float(c))
    return Sensitivity(2.0 * c, math.sqrt(2.0) * c)


@dataclass(frozen=True, slots=True)
class GaussianMeasurement:
    """One Gaussian measurement of a marginal: N(0, σ²) added to every cell.

    ``clique`` is the measured columns when fixed in advance, or ``None`` when the
    marginal is the one chosen by the selection of round ``round`` (the choice is
    data-dependent, the cost is not).

    Notes
    -----
    ρ = Δ₂²/(2σ²) [BS16, Prop. 1.6]; as a planner event, a Gaussian of noise multiplier
    σ/Δ₂ drawn by OpenDP's 2^k-grid sampler (certified through ρ-zCDP only: ``discrete``).
    """

    label: str
    sigma: float
    l2_sensitivity: float
    clique: tuple[str, ...] | None = None
    round: int | None = None

    @property
    def rho(self) -> float:
        """ρ = Δ₂²/(2σ²)."""
        return self.l2_sensitivity**2 / (2.0 * self.sigma**2)

    def event(self) -> GaussianEvent:
        """The planner's event for this invocation."""
        return GaussianEvent(self.sigma / self.l2_sensitivity, discrete=True)


@dataclass(frozen=True, slots=True)
class ExponentialSelection:
    """One exponential-mechanism selection among candidate marginals.

    Notes
    -----
    P(r) ∝ exp(ε·u_r/(2Δ_u)); ε-DP and ε-bounded range, so ρ = ε²/8 [CR21]. Released as
    report-noisy-max with Gumbel noise of scale 2Δ_u/ε [MS20].
    """

    label: str
    epsilon: float
    sensitivity: float
    round: int

    @property
    def rho(self) -> float:
        """ρ = ε²/8."""
        return self.epsilon**2 / 8.0

    @property
    def scale(self) -> float:
        """The Gumbel scale 2Δ_u/ε of the noisy max that releases it."""
        return 2.0 * self.sensitivity / self.epsilon

    def event(self) -> ExponentialEvent:
        """The planner's event for this invocation."""
        return ExponentialEvent(self.epsilon)


PlannedInvocation = GaussianMeasurement | ExponentialSelection


def total_rho(events: Sequence[PlannedInvocation]) -> float:
    """Σρᵢ: the zCDP of the composition [BS16, Lemma 2.3].

    Examples
    --------
    >>> total_rho([GaussianMeasurement("a", 1.0, 1.0), ExponentialSelection("b", 2.0, 1.0, 0)])
    1.0
    """
    return float(math.fsum(e.rho for e in events))


def planner_events(events: Sequence[PlannedInvocation]) -> list[PrivacyEvent]:
    """The invocations as the planner's privacy events, in order."""
    return [e.event() for e in events]


def sigma_for(rho: float, l2: float) -> float:
    """σ = Δ₂/√(2ρ), the Gaussian scale that costs exactly ρ.

    Examples
    --------
    >>> sigma_for(0.5, 1.0)
    1.0
    """
    return l2 / math.sqrt(2.0 * check_rho(rho))


def epsilon_for(rho: float) -> float:
    """ε = √(8ρ), the exponential mechanism's ε that costs exactly ρ.

    Examples
    --------
    >>> epsilon_for(0.125)
    1.0
    """
    return math.sqrt(8.0 * check_rho(rho))


def check_rho(rho: float) -> float:
    """``rho`` as a float; :class:`QueryError` naming the constraint otherwise."""
    r = float(rho)
    if not (r > 0 and math.isfinite(r)):
        raise QueryError(f"rho must be > 0 and finite; got {rho!r}. Give the synthetic table a positive share.")
    return r


class NumpyNoise:
    """Planning/test noise: numpy Gaussian and the Gumbel-max exponential mechanism.

    Not for releases (floating-point Gaussian and Gumbel samplers are not exact, Mironov
    2012); releases pass OpenDP measurements (:func:`planner.privacy.noise.gaussian`,
    :func:`planner.privacy.noise.noisy_max_float`).

    Parameters
    ----------
    rng : numpy.random.Generator
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def measure(self, true_counts: FloatArray, sigma: float) -> FloatArray:
        """``true_counts`` + N(0, σ²) per cell."""
        x = np.asarray(true_counts, dtype=np.float64)
        return np.asarray(x + self.rng.normal(0.0, sigma, size=x.shape), dtype=np.float64)

    def select(self, scores: FloatArray, epsilon: float, sensitivity: float) -> int:
        """argmax_i ε·scores[i]/(2Δ) + Gumbel(0, 1): P(i) ∝ exp(ε·scores[i]/(2Δ)) [MS20]."""
        s = np.asarray(scores, dtype=np.float64)
        if s.ndim != 1 or s.size == 0:
            raise QueryError("select needs a non-empty 1-d array of scores.")
        z = epsilon * s / (2.0 * sensitivity) + self.rng.gumbel(size=s.size)
        return int(np.argmax(z))
