"""Monte Carlo checks of the planner's predictions on the data's exact aggregate.

DATA-DEPENDENT (docs/mathematics.md §7): every function here takes an *exact* aggregate computed from
the private rows, so its output is not private. It is for the data owner's eyes only and
must never enter an exported release or a stakeholder view.

The draws are numpy **planning simulations** (each statistic's ``simulate``, from the
helpers of :mod:`planner.planning.mechanisms`), seeded through a caller-supplied
:class:`numpy.random.Generator`; they are never a released value (releases draw noise
through OpenDP in :mod:`planner.privacy.noise`).

For one query at a total ε (the query alone, as on the Accuracy page), :func:`simulate_query`
plans the query with :func:`planner.planning.workload.plan`, then runs the planned mechanism
``runs`` times on the exact aggregate, with the planned noise parameters and the
release's own post-processing, and measures the error in the same unit as the
prediction (each statistic's ``simulate``; its module docstring says what is measured).

The empirical RMSE comes with its standard error (delta method on the mean squared error:
se(√m) ≈ sd(e²) / (2√m·√runs)).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError
from planner.data.requests import QuantileAggregate
from planner.data.schema import Schema
from planner.planning.bounds import quantile_mse_lower_bound
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms import ism
from planner.planning.mechanisms._validate import count as _count
from planner.planning.mechanisms._validate import epsilons as _epsilons
from planner.planning.mechanisms.base import MechanismName
from planner.planning.queries import Query
from planner.planning.statistics import statistic
from planner.planning.statistics.base import Aggregate
from planner.planning.workload import Prediction, plan

FloatArray = npt.NDArray[np.float64]
M = MechanismName

#: Most simulation runs per ε accepted (keeps a page responsive).
MAX_RUNS = 100_000


@dataclass(frozen=True, slots=True)
class SimulatedAccuracy:
    """Empirical against predicted error of one planned item at one total ε. DATA-DEPENDENT."""

    epsilon: float
    item: str
    mechanism: str
    unit: str
    predicted_rmse: float
    empirical_rmse: float
    standard_error: float
    runs: int


@dataclass(frozen=True, slots=True)
class QuantileCheck:
    """Quantile accuracy in the column's own units, per ε. DATA-DEPENDENT.

    ``lower_bound_rmse`` is √ of the instance-specific MSE lower bound for unbiased ε-DP
    mechanisms (:func:`planner.planning.bounds.quantile_mse_lower_bound`); ``em_rmse`` and
    ``ism_rmse`` are the empirical RMSE of the exponential mechanism on the declared grid
    and of the continuous inverse sensitivity mechanism
    (:func:`planner.planning.mechanisms.ism.sample_quantile`).
    """

    epsilon: FloatArray
    true_value: float
    lower_bound_rmse: FloatArray
    em_rmse: FloatArray
    ism_rmse: FloatArray
    runs: int


def _rmse(errors: npt.ArrayLike) -> tuple[float, float]:
    """(√mean e², its standard error) over all draws (the first axis is the run).

    NaN marks an answer that was not shown (a key below the partition-selection threshold,
    :mod:`planner.planning.statistics.keys`): it has no error and is left out, as are runs that
    showed nothing."""
    e2 = np.square(np.asarray(errors, dtype=np.float64))
    flat = e2.reshape(e2.shape[0] if e2.ndim else 1, -1)
    shown = ~np.isnan(flat)
    some = shown.any(axis=1)
    per_run = np.where(shown, flat, 0.0).sum(axis=1)[some] / shown.sum(axis=1)[some]
    runs = int(per_run.size)
    if runs == 0:
        return math.nan, math.nan
    m = float(per_run.mean())
    if m <= 0.0 or runs < 2:
        return math.sqrt(max(m, 0.0)), 0.0
    se = float(per_run.std(ddof=1)) / math.sqrt(runs) / (2.0 * math.sqrt(m))
    return math.sqrt(m), se


def grid_values(agg: QuantileAggregate) -> FloatArray:
    """The data as the quantile mechanisms see it: each value at its grid candidate.

    DATA-DEPENDENT. ``counts[i]`` values sit at candidate t_i (the smallest t ≥ x).

    Examples
    --------
    >>> grid_values(QuantileAggregate((0.0, 1.0, 2.0), (1, 0, 2))).tolist()
    [0.0, 2.0, 2.0]
    """
    return np.repeat(np.asarray(agg.candidates, dtype=np.float64), np.asarray(agg.counts, dtype=np.int64))


def simulate_errors(
    pred: Prediction, query: Query, schema: Schema, agg: Aggregate, runs: int, rng: np.random.Generator
) -> FloatArray:
    """``runs`` planning draws of the error of one planned item, shape (runs, …). DATA-DEPENDENT.

    The statistic's own simulation of what its release draws (:meth:`Statistic.simulate`),
    in the unit of ``pred``.

    Raises
    ------
    QueryError
        If the aggregate does not match the query's kind, or ``runs`` is not in
        [1, :data:`MAX_RUNS`].
    """
    n_runs = _count(runs, "runs")
    if n_runs > MAX_RUNS:
        raise QueryError(f"runs must be ≤ {MAX_RUNS}; got {n_runs}. Use fewer simulation runs.")
    return statistic(query.kind).simulate(pred, query, schema, agg, n_runs, rng)


def simulate_query(
    query: Query,
    schema: Schema,
    agg: Aggregate,
    epsilons: Sequence[float],
    delta: float,
    runs: int,
    rng: np.random.Generator,
    progress: Callable[[int, int], None] | None = None,
) -> list[SimulatedAccuracy]:
    """Empirical and predicted RMSE of a query alone, at each total ε. DATA-DEPENDENT.

    Each ε is planned as on the Accuracy page (:func:`planner.planning.workload.plan`, one query,
    basic composition) and simulated ``runs`` times. ``progress(done, total)`` is called
    after each ε.

    Examples
    --------
    >>> from planner.data.requests import CountAggregate
    >>> from planner.planning.queries import queries_from_list
    >>> from planner.data.schema import Schema
    >>> s = Schema.from_json('{"version": 1, "public_n": 100, "columns": '
    ...                    '[{"name": "x", "kind": "numeric", "lower": 0, "upper": 1, '
    ...                    '"missing": {"action": "drop"}}]}')
    >>> q = queries_from_list([{"id": "n", "kind": "count", "mechanism": "laplace",
    ...                         "nonnegative_integer": False}], s)[0]
    >>> r = simulate_query(q, s, CountAggregate(100), [1.0], 0.0, 20000, np.random.default_rng(0))
    >>> r[0].predicted_rmse  # √2·Δ/ε, by hand
    1.4142135623730951
    >>> abs(r[0].empirical_rmse - r[0].predicted_rmse) < 5 * r[0].standard_error
    True
    """
    eps = [float(e) for e in np.asarray(_epsilons(list(epsilons)), dtype=np.float64).reshape(-1)]
    out: list[SimulatedAccuracy] = []
    for i, e in enumerate(eps):
        p = plan([query], schema, e, delta, "basic")
        for pred in p.predictions:
            emp, se = _rmse(simulate_errors(pred, query, schema, agg, runs, rng))
            label = pred.mechanism if len(p.predictions) == 1 else f"{pred.mechanism} ({pred.part})"
            out.append(SimulatedAccuracy(e, pred.id, label, pred.unit, pred.rmse, emp, se, int(runs)))
        if progress is not None:
            progress(i + 1, len(eps))
    return out


def quantile_check(
    agg: QuantileAggregate,
    alpha: float,
    lower: float,
    upper: float,
    epsilons: Sequence[float],
    runs: int,
    rng: np.random.Generator,
    sensitivity: float = 1.0,
) -> QuantileCheck:
    """The α-quantile's error in the column's units: instance lower bound, EM and ISM. DATA-DEPENDENT.

    The data are the grid values of ``agg`` (:func:`grid_values`), which is what the
    release's exponential mechanism sees. The lower bound holds for unbiased mechanisms
    under substitution (docs/mathematics.md §4); the EM and the ISM are biased, so they may beat it.

    Examples
    --------
    >>> agg = QuantileAggregate((0.0, 1.0, 2.0, 3.0, 4.0), (0, 10, 20, 10, 0))
    >>> c = quantile_check(agg, 0.5, 0.0, 4.0, [0.5, 5.0], 2000, np.random.default_rng(1))
    >>> c.true_value
    2.0
    >>> bool(c.em_rmse[1] < c.em_rmse[0])  # more ε, less error
    True
    """
    if not 0.0 < float(alpha) < 1.0:
        raise QueryError(f"alpha must be in (0, 1); got {alpha}.")
    n_runs = _count(runs, "runs")
    eps = np.asarray(_epsilons(list(epsilons)), dtype=np.float64).reshape(-1)
    data = grid_values(agg)
    if data.size == 0:
        raise QueryError("the quantile check needs at least one usable value in the column.")
    grid = np.asarray(agg.candidates, dtype=np.float64)
    j = ism.quantile_index(data.size, float(alpha))
    true = float(data[j - 1])
    lb = np.sqrt(quantile_mse_lower_bound(data, eps, float(alpha), lower, upper).values)
    util = agg.rank_utility(float(alpha))
    em_r = np.empty(eps.size)
    ism_r = np.empty(eps.size)
    for i, e in enumerate(eps):
        idx = em.simulate(util, float(e), n_runs, rng, sensitivity=sensitivity)
        em_r[i] = math.sqrt(float(np.mean((grid[idx] - true) ** 2)))
        draws = ism.sample_quantile(data, float(e), float(alpha), lower, upper, n_runs, rng)
        ism_r[i] = math.sqrt(float(np.mean((draws - true) ** 2)))
    return QuantileCheck(eps, true, np.asarray(lb, dtype=np.float64), em_r, ism_r, n_runs)
