"""AIM with a fixed schedule: adaptive choice of 2-way marginals, data-independent cost.

The mechanism follows AIM [MMSM22, Alg. 2] for the workload of all 2-way marginals, with
one change that makes its privacy cost a fixed list: AIM's *budget annealing* (doubling
the per-round budget when the model stops improving, so the number of rounds depends on
the data) is replaced by a fixed number of rounds T with equal per-round cost. Selection
outcomes still adapt to the data; the cost of every invocation does not.

1. measure every 1-way marginal with σ₁ (a fraction f₁ of ρ); compress rare categories
   (post-processing, :mod:`planner.planning.synth.compress`); fit a model;
2. for t = 1..T: among all pairs r whose addition keeps the model within
   ``max_model_cells`` cells (if none does: among the single columns), select with the exponential mechanism (ε_t) on the utility
   u_r = ‖M_r(x) − M̂_r‖₁ − √(2/π)·σ_t·n_r (n_r = cells of r: the expected L1 noise of
   measuring it, AIM's bias/variance trade-off [MMSM22, §4.2]); measure it with σ_t;
   refit the model (warm start);
3. fit to all measurements and draw the records (:mod:`planner.planning.synth.sample`).

Notes
-----
Iterations. The reference implementations run a fixed number of mirror-descent
iterations for every estimate, intermediate and final: Private-PGM's AIM
(``mechanisms/aim.py``, ``max_iters=1000``) and OpenDP's (``mbi.estimation.mirror_descent``,
``iters=1000``). Here each estimate is warm-started from the previous one and accelerated
(:func:`~planner.planning.synth.inference.estimate`), so the iterations of the rounds add
up: after each round at most ``round_iters`` = 25, and the last fit at most
``final_iters`` = 500, stopping once 10 iterations lower the loss L (a Gaussian negative
log-likelihood) by less than ``final_rtol`` = 1 % of L. The intermediate models serve only
the next selection's scores and the next round's start. Past that stop the last fit
descends slowly: on Bikeshare at ε = 4 (seed 0, 50 round iterations) its 268 further
iterations lowered L by 4.9 % (723.9 → 688.6) and did not lower the 2-way TVD.
Measured on Capital Bikeshare 2011 (the tuning table; numpy noise, 5 seeds) at ε = 4
against the previous 50 round iterations and no relative stop: belief-propagation work 414 →
174 million cell updates, mean 2-way TVD 0.0532 → 0.0524; in the 8 other benchmark cells
the mean moved by at most 0.0012 either way, about one standard error of the difference
(docs/measurements/2026-12-07/aim_time.txt). Neither number
changes a privacy event: the schedule (:func:`aim_events`) is the same.

References
----------
.. [MMSM22] R. McKenna, B. Mullins, D. Sheldon, G. Miklau, "AIM: An Adaptive and
   Iterative Mechanism for Differentially Private Synthetic Data", PVLDB 15(11), 2022,
   arXiv:2201.12677, Alg. 2, §4.2 (quality score), Thm 1 (privacy).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from planner.core.errors import QueryError
from planner.data.schema import Relation
from planner.planning.synth.compress import compress, identity
from planner.planning.synth.domain import Domain
from planner.planning.synth.inference import DEFAULT_MAX_CELLS, NoisyMarginal, estimate, model_cells
from planner.planning.synth.marginals import CompressedSource, MarginalSource
from planner.planning.synth.mst import SynthFit, _defaults
from planner.planning.synth.privacy import (
    BUDGET_SLACK,
    ExponentialSelection,
    GaussianMeasurement,
    MeasureFn,
    PlannedInvocation,
    SelectFn,
    check_rho,
    epsilon_for,
    marginal_sensitivity,
    sigma_for,
)


@dataclass(frozen=True, slots=True)
class AIMOptions:
    """Options of :func:`aim` (public; the cost depends on these, ρ and d only).

    Parameters
    ----------
    rounds : int or None
        T, the number of select-and-measure rounds; ``None``: :func:`default_rounds`.
    rows_hint : float or None
        A public approximate row count, used only by :func:`default_rounds`.
    one_way_fraction : float
        f₁, the fraction of ρ spent on the 1-way measurements.
    selection_fraction : float
        f_s, the fraction of each round's budget spent on its selection.
    relation, rows_per_person
        Neighbouring relation and c (see :mod:`planner.planning.synth.privacy`).
    compress, compress_threshold
        Merge categories whose noisy 1-way count is below threshold·σ₁.
    max_model_cells : int
        Candidates that would make the junction tree larger than this are skipped.
    round_iters, final_iters : int
        Most mirror-descent iterations after each round, and at the end (module Notes).
    final_rtol : float
        The last fit also stops when 10 iterations lower its loss by less than this fraction
        (:func:`~planner.planning.synth.inference.estimate`'s ``rtol``; module Notes).
    max_cells : int
        Memory guard on one junction-tree clique.
    """

    rounds: int | None = None
    rows_hint: float | None = None
    one_way_fraction: float = 0.3
    selection_fraction: float = 0.1
    relation: Relation = Relation.ADD_REMOVE
    rows_per_person: int = 1
    compress: bool = True
    compress_threshold: float = 2.0
    max_model_cells: int = 200_000
    round_iters: int = 25
    final_iters: int = 500
    final_rtol: float = 0.01
    max_cells: int = DEFAULT_MAX_CELLS

    def __post_init__(self) -> None:
        if self.rounds is not None and int(self.rounds) < 1:
            raise QueryError(f"rounds must be ≥ 1 or None; got {self.rounds}.")
        for name in ("one_way_fraction", "selection_fraction"):
            v = float(getattr(self, name))
            if not 0.0 < v < 1.0:
                raise QueryError(f"{name} must be in (0, 1); got {v}.")
        if not (0.0 <= float(self.final_rtol) < 1.0):
            raise QueryError(f"final_rtol must be in [0, 1) (0: no relative stop); got {self.final_rtol}.")
        object.__setattr__(self, "relation", Relation(self.relation))


def default_rounds(n_columns: int, rho: float, rows_hint: float | None = None) -> int:
    """T: d rounds, or 2d when the budget is large relative to the table's public size.

    Parameters
    ----------
    n_columns : int
    rho : float
    rows_hint : float, optional
        A PUBLIC approximate row count (declared, never read from the data); it changes
        only the schedule, never the privacy guarantee. ``None``: T = d.

    Notes
    -----
    Signal-to-noise of a marginal measured with ρ_t is n·√(2ρ_t) per unit of Δ₂, so the
    schedule depends on ρ·n²: T = d when ρ·n² < 7·10⁵, else 2d (picked on the Bikeshare
    tuning table, where the switch fell between ρn² = 5·10⁵ and 1.8·10⁶; three rounds per
    column never helped there or elsewhere and cost up to 4× the time).

    Examples
    --------
    >>> default_rounds(11, 0.0244), default_rounds(11, 0.0244, 3000), default_rounds(11, 0.311, 3000)
    (11, 11, 22)
    """
    d = max(1, int(n_columns))
    if rows_hint is None or rho * float(rows_hint) ** 2 < 7e5:
        return d
    return 2 * d


def aim_events(rho: float, domain: Domain, options: AIMOptions = AIMOptions()) -> list[PlannedInvocation]:
    """Every noisy invocation of :func:`aim`, in order, with its cost (data-independent).

    Notes
    -----
    With ρ' = ρ(1 − 10⁻¹²), d columns, T rounds, f₁ and f_s from ``options``:
    σ₁ = Δ₂√(d/(2f₁ρ')); per round ρ_t = (1 − f₁)ρ'/T, ε_t = √(8f_sρ_t),
    σ_t = Δ₂/√(2(1 − f_s)ρ_t); the utility's sensitivity is Δ₁ (one pair's L1 distance;
    the noise penalty is data-independent). Σρᵢ = ρ' [BS16, Lemma 2.3].

    Examples
    --------
    >>> ev = aim_events(1.0, Domain.from_sizes([2, 2]), AIMOptions(rounds=2, one_way_fraction=0.5))
    >>> [type(e).__name__[0] for e in ev], round(sum(e.rho for e in ev), 6)
    (['G', 'G', 'E', 'G', 'E', 'G'], 1.0)
    """
    r = check_rho(rho) * (1.0 - BUDGET_SLACK)
    d = len(domain)
    sens = marginal_sensitivity(options.relation, options.rows_per_person)
    events: list[PlannedInvocation] = []
    if d == 1:
        s1 = sigma_for(r, sens.l2)
        return [GaussianMeasurement(f"1-way {domain.names[0]}", s1, sens.l2, (domain.names[0],))]
    f1 = options.one_way_fraction
    s1 = sigma_for(f1 * r / d, sens.l2)
    for j in range(d):
        events.append(GaussianMeasurement(f"1-way {domain.names[j]}", s1, sens.l2, (domain.names[j],)))
    t_rounds = options.rounds if options.rounds is not None else default_rounds(d, r, options.rows_hint)
    rt = (1.0 - f1) * r / t_rounds
    eps = epsilon_for(options.selection_fraction * rt)
    sig = sigma_for((1.0 - options.selection_fraction) * rt, sens.l2)
    for t in range(t_rounds):
        events.append(ExponentialSelection(f"AIM round {t + 1} selection", eps, sens.l1, t))
        events.append(GaussianMeasurement(f"2-way chosen in round {t + 1}", sig, sens.l2, None, t))
    return events


def aim(
    data: MarginalSource,
    rho: float,
    *,
    options: AIMOptions = AIMOptions(),
    rng: np.random.Generator,
    measure: MeasureFn | None = None,
    select: SelectFn | None = None,
) -> SynthFit:
    """Fit fixed-schedule AIM to the private table's marginals under ρ-zCDP (parameters as
    :func:`planner.planning.synth.mst.mst`)."""
    domain = data.domain
    events = aim_events(rho, domain, options)
    meas_fn, sel_fn = _defaults(measure, select, rng)
    d = len(domain)
    one = [e for e in events if isinstance(e, GaussianMeasurement) and e.round is None]
    ys = [meas_fn(data.marginal((j,)), e.sigma) for j, e in enumerate(one)]
    if options.compress:
        comp, ms = compress(domain, ys, [e.sigma for e in one], options.compress_threshold)
    else:
        comp = identity(domain)
        ms = [NoisyMarginal((j,), y, e.sigma) for j, (y, e) in enumerate(zip(ys, one, strict=True))]
    cdom = comp.compressed
    truth = CompressedSource(data, comp)
    model = estimate(cdom, ms, iters=options.final_iters, max_cells=options.max_cells)
    selected: list[tuple[int, ...]] = []
    pairs = list(itertools.combinations(range(d), 2))
    rounds = [e for e in events if isinstance(e, ExponentialSelection)]
    meas = [e for e in events if isinstance(e, GaussianMeasurement) and e.round is not None]
    coef = math.sqrt(2.0 / math.pi)
    for sel, mea in zip(rounds, meas, strict=True):
        cliques = list(model.tree.cliques)
        cand: list[tuple[int, ...]] = [
            p for p in pairs if model.tree.host(p) >= 0 or model_cells(cdom, [*cliques, p]) <= options.max_model_cells
        ]
        if not cand:  # no pair fits the cap: re-measure a column (always in the model)
            cand = [(j,) for j in range(d)]
        scores = np.array(
            [float(np.abs(truth.marginal(p) - model.marginal(p)).sum()) - coef * mea.sigma * cdom.cells(p)
             for p in cand]
        )
        r = cand[sel_fn(scores, sel.epsilon, sel.sensitivity)]
        selected.append(r)
        ms.append(NoisyMarginal(r, meas_fn(truth.marginal(r), mea.sigma), mea.sigma))
        model = estimate(cdom, ms, iters=options.round_iters, warm_start=model, max_cells=options.max_cells)
    model = estimate(
        cdom, ms, iters=options.final_iters, rtol=options.final_rtol, warm_start=model, max_cells=options.max_cells
    )
    return SynthFit(model, comp, events, ms, selected)
