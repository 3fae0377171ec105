"""Which generator at which budget, its planned invocations, its fit.

The ``synthetic_data`` statistic names a mechanism: ``mst``, ``aim`` or ``mst_or_aim``
(the default). ``mst_or_aim`` is MST below a budget and AIM above it, decided by a
data-independent rule on ρ (the statistic's share, in zCDP), the declared public row
count n and a marginal's L2 sensitivity Δ₂ (c rows per person: c under add/remove, √2·c
under substitution):

    AIM when ρ·(n/Δ₂)² ≥ 300, else MST (MST when no public n is declared).

Why ρ·(n/Δ₂)²: a marginal measured with ρ_t has signal-to-noise n·√(2ρ_t)/Δ₂, so both
mechanisms' errors are functions of ρ·(n/Δ₂)² for a given domain. AIM spends
its budget over more, adaptively chosen measurements; when each is too noisy its selections
are close to random and the fixed spanning tree of MST does better. On the tuning table
(Capital Bikeshare 2011, 15 columns of up to 16 values, subsamples of 500, 2,000 and 8,645
rows, ε 0.05 to 1 at δ = 10⁻⁶, 3 seeds each; not one of the benchmark's tables) MST had the
lower average 2-way TVD at ρn² = 22 (by 0.10) and 80 (by 0.027), the two tied at 350
(0.504 against 0.511), and AIM was better at every ρn² from 450 up (by 0.004 to 0.04)
(one row per person, add/remove: Δ₂ = 1).
Both are ρ-zCDP for every ρ, whichever runs: the rule changes accuracy, never the privacy
guarantee. AIM took 2–9× the CPU time of MST in the benchmark's 9 cells (at most 3.8 CPU s,
for 9 to 15 columns; docs/measurements/2026-12-07/aim_time.txt).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from planner.data.schema import Relation
from planner.planning.synth.aim import AIMOptions, aim, aim_events
from planner.planning.synth.domain import Domain
from planner.planning.synth.marginals import MarginalSource
from planner.planning.synth.mst import MSTOptions, SynthFit, mst, mst_events
from planner.planning.synth.privacy import MeasureFn, PlannedInvocation, SelectFn

#: ``mst_or_aim`` runs AIM when ρ·(n/Δ₂)² is at least this (module docstring).
AIM_MIN_RHO_N2 = 300.0


class Generator(StrEnum):
    """The mechanism that fits the synthetic table."""

    MST = "mst"
    AIM = "aim"


def choose(method: str, rho: float, public_n: int | None, l2_sensitivity: float = 1.0) -> Generator:
    """The generator a query's mechanism runs at share ρ (module docstring).

    Examples
    --------
    >>> choose("mst_or_aim", 0.0244, 3000).value, choose("mst_or_aim", 1e-5, 3000).value
    ('aim', 'mst')
    >>> choose("mst_or_aim", 0.0244, 3000, l2_sensitivity=10.0).value  # 0.0244·300² = 2196
    'aim'
    >>> choose("mst_or_aim", 1.0, None).value, choose("aim", 1e-9, None).value
    ('mst', 'aim')
    """
    if method in (Generator.MST, Generator.AIM):
        return Generator(method)
    if public_n is None or rho * (float(public_n) / l2_sensitivity) ** 2 < AIM_MIN_RHO_N2:
        return Generator.MST
    return Generator.AIM


@dataclass(frozen=True, slots=True)
class GeneratorSpec:
    """A generator with everything public its cost and its fit depend on.

    Parameters
    ----------
    generator : Generator
    relation : Relation
        The schema's neighbouring relation.
    rows_per_person : int
        The schema's c.
    rows_hint : float or None
        The declared public row count over a marginal's L2 sensitivity, n/Δ₂ (AIM's number
        of rounds depends on ρ·(n/Δ₂)²; never a private count).
    """

    generator: Generator
    relation: Relation = Relation.ADD_REMOVE
    rows_per_person: int = 1
    rows_hint: float | None = None

    def options(self) -> MSTOptions | AIMOptions:
        if self.generator is Generator.MST:
            return MSTOptions(relation=self.relation, rows_per_person=self.rows_per_person)
        return AIMOptions(relation=self.relation, rows_per_person=self.rows_per_person, rows_hint=self.rows_hint)

    def events(self, rho: float, domain: Domain) -> list[PlannedInvocation]:
        """Every noisy invocation of a fit at ρ, in order (data-independent)."""
        opts = self.options()
        if isinstance(opts, MSTOptions):
            return mst_events(rho, domain, opts)
        return aim_events(rho, domain, opts)

    def fit(self, data: MarginalSource, rho: float, rng: np.random.Generator,
            measure: MeasureFn | None = None, select: SelectFn | None = None) -> SynthFit:
        """Fit the generator to the private marginals (noise from ``measure``/``select``)."""
        opts = self.options()
        if isinstance(opts, MSTOptions):
            return mst(data, rho, options=opts, rng=rng, measure=measure, select=select)
        return aim(data, rho, options=opts, rng=rng, measure=measure, select=select)
