"""Synthetic data over many columns: a marginal-based synthetic table (MST or AIM).

The owner names categorical, boolean and numeric columns (numeric ones cut into ``bins``
equal bins over their declared bounds) and how many rows to draw. The release measures
the table's 1- and 2-way marginals with Gaussian noise, chosen and fitted as MST [MMS21] or
a fixed-schedule AIM [MMSM22] do (:mod:`planner.planning.synth`), and draws rows from the
fitted graphical model: a table of records, stored with the release (``answer.records``, a
list of row objects) and downloadable as CSV.

How the rows are drawn (the option ``sampler``, :mod:`planner.planning.synth.sample`):
``stratified`` (the default) rounds each of the model's tables to whole rows — every count
within one of its expected count, by systematic sampling [Mad49] — and deals the values to
the rows in a fresh random order for every table, so each row still follows the model
exactly and no correlation the model lacks is invented; ``iid`` draws every row
independently, which adds the multinomial error of sampling (on the benchmark tables most
of the 2-way error at ε = 4). The answer names the sampler (``answer.sampler``) and the
prediction's sampling term is that sampler's.

Mechanisms: ``mst``, ``aim``, or ``mst_or_aim`` (the default): AIM when ρ·(n/Δ₂)² ≥ 300 for
the statistic's share ρ, the declared public row count n and a marginal's L2 sensitivity Δ₂,
else MST
(:mod:`planner.planning.synth.generator` says how the rule was measured).

Cost. Every noisy invocation is fixed before any data is read
(:func:`planner.planning.synth.mst.mst_events`, :func:`planner.planning.synth.aim.aim_events`):
d Gaussian measurements of the 1-way marginals, then rounds of an exponential-mechanism
selection of a 2-way marginal (OpenDP's noisy max with Gumbel noise, ρ = ε²/8) and its
Gaussian measurement (ρ = Δ₂²/(2σ²)). Each is certified by OpenDP in zCDP and zCDP
composes by adding ρ, adaptively [BS16, Lemma 2.3], so the whole list is ρ-zCDP with
ρ = Σρᵢ, the statistic's share θ (less 10⁻¹²). It is planned, spent and recorded as that:
one allocation item of θ = ρ, one ledger spend of a zCDP Gaussian event of ρ (OpenDP's
samplers are certified through ρ only, which is how every rule accounts such an event:
basic and advanced by the zCDP → (ε, δ) conversion, RDP by αρ, zCDP by ρ, the optimal
accountant through its zCDP bound). The draw lists every OpenDP measurement with the ρ
OpenDP's own map gives, and the release is refused unless their sum is the plan's.

Sensitivity of each marginal (c rows per person): add/remove Δ₁ = Δ₂ = c; substitute
Δ₁ = 2c, Δ₂ = √2·c (:mod:`planner.planning.synth.privacy`). The data are asked as one
request (:class:`planner.data.requests.Marginals`): every 1- and 2-way table over the rows
where every chosen column has a bin, after contribution bounding.

Accuracy. The error of a release is the mean, over its 1-way marginals and its measured
2-way marginals, of the total-variation distance between the synthetic table's marginal
and the real one. Its prediction (:func:`planner.planning.synth.accuracy.release_accuracy`)
is data-independent and an approximation of the EXPECTED error, not a bound: the error of
the model's projection of each noisy table onto non-negative, consistent marginals at a
truth spread evenly over its cells, plus the sampling of the rows by the query's sampler,
for a pair picked as MST
(any pair alike) or AIM (small tables first where its noise penalty is large against the
table's size; :func:`planner.planning.synth.accuracy.aim_pair_weights`) picks them. It is at
most 1; it falls as ρ grows, except where AIM's schedule doubles its rounds (ρ·n² = 7·10⁵:
twice the pairs measured, each with half the budget, so the mean over measured pairs steps
up while the unmeasured pairs, which it does not cover, gain). On the benchmark tables the
realised error was 0.58–0.88 of it for MST and 0.72–1.08 for AIM with the default sampler
(the module :mod:`planner.planning.synth.accuracy` gives the ranges per mechanism). ``bound_kind`` is "model". Pairs that were not measured are as good as the model's
conditional independence: data-dependent, not covered by the prediction (the owner-only
comparison shows them).

Numeric values are drawn uniformly within their synthetic bin (post-processing). A column the
schema declares to hold whole numbers (``"integer": true``) is cut between whole numbers
(:func:`planner.data.requests.integer_edges`) and drawn as one of its bin's whole numbers.

References
----------
.. [MMS21] R. McKenna, G. Miklau, D. Sheldon, "Winning the NIST Contest: A scalable and
   general approach to differentially private synthetic data", J. Privacy and
   Confidentiality 11(3), 2021, arXiv:2108.04978 (Alg. 1; Thm 1).
.. [MMSM22] R. McKenna, B. Mullins, D. Sheldon, G. Miklau, "AIM: An Adaptive and
   Iterative Mechanism for Differentially Private Synthetic Data", PVLDB 15(11), 2022,
   arXiv:2201.12677 (Alg. 2; Thm 1).
.. [Mad49] W. G. Madow, "On the theory of systematic sampling, II", Annals of
   Mathematical Statistics 20(3), 1949.
.. [BS16] M. Bun, T. Steinke, "Concentrated Differential Privacy: Simplifications,
   Extensions, and Lower Bounds", TCC 2016, arXiv:1605.02065.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np

from planner.core.errors import QueryError, ReleaseError, SchemaError
from planner.data import requests as rq
from planner.data.requests import MarginalTables
from planner.data.schema import ColumnKind, Schema
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.queries import Query, QueryKind, QueryPart
from planner.planning.statistics.base import (
    Aggregate,
    AnswerRow,
    FloatArray,
    ItemRelease,
    MechanismSpec,
    OptionSpec,
    OptionType,
    Part,
    Prediction,
    Statistic,
    need_public_n,
    one_draw,
    prediction,
    wrong_aggregate,
)
from planner.planning.synth.accuracy import (
    REALISED_VS_PREDICTED,
    PairRule,
    ReleaseAccuracy,
    release_accuracy,
)
from planner.planning.synth.domain import Domain, IntArray
from planner.planning.synth.generator import Generator, GeneratorSpec, choose
from planner.planning.synth.marginals import TableSource, tvd
from planner.planning.synth.mst import SynthFit
from planner.planning.synth.privacy import (
    ExponentialSelection,
    GaussianMeasurement,
    NumpyNoise,
    PlannedInvocation,
    marginal_sensitivity,
)
from planner.planning.synth.sample import Sampler
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.data.backends.base import Backend
    from planner.planning.allocation import ItemAllocation
    from planner.privacy.noise import Component

M = MechanismName
#: Most synthetic rows one release draws (they are stored with the release).
MAX_SYNTHETIC_RECORDS: Final = 100_000
#: Default number of equal bins of a numeric column.
DEFAULT_BINS: Final = 10
#: Most bins of a numeric column.
MAX_BINS: Final = 100

COLUMNS = OptionSpec("columns", OptionType.COLUMNS, "Columns",
                     "The categorical, boolean and numeric columns of the synthetic table.",
                     required=True, min_items=1, max_items=rq.MAX_MARGINAL_COLUMNS,
                     column_kinds=frozenset({ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN, ColumnKind.NUMERIC}))
ROWS = OptionSpec("rows", OptionType.INT, "Rows",
                  "How many synthetic rows to draw (default: the declared public row count). Any number costs "
                  "the same: the rows are drawn from the noisy model.",
                  minimum=1, maximum=MAX_SYNTHETIC_RECORDS, blank="the public row count")
SAMPLER = OptionSpec("sampler", OptionType.CHOICE, "How the rows are drawn",
                     "stratified: each table of the model is drawn with counts rounded from its expected counts "
                     "and dealt to the rows in a random order (lower error; each row still follows the model); "
                     "iid: every row drawn independently (adds the random error of sampling).",
                     default=Sampler.STRATIFIED.value, choices=tuple(v.value for v in Sampler))
BINS = OptionSpec("bins", OptionType.INT, "Bins per numeric column",
                  "Each numeric column's declared range [L, U] cut into this many equal bins.",
                  default=DEFAULT_BINS, minimum=1, maximum=MAX_BINS)


def request(q: Query, schema: Schema) -> rq.Marginals:
    """The query's one request: every 1- and 2-way table of its columns' bins."""
    cols = tuple(q.option("columns") or ())
    nb = int(q.option("bins") or DEFAULT_BINS)
    edges: list[tuple[float, ...] | None] = []
    for name in cols:
        col = schema.column(name)
        if col.kind is ColumnKind.NUMERIC:
            lo, hi = col.bounds
            if col.integer:  # cut between whole numbers: at most nb bins, one per value when few
                edges.append(rq.integer_edges(lo, hi, nb))
            else:
                edges.append(tuple(float(v) for v in np.linspace(lo, hi, nb + 1)))
        else:
            edges.append(None)
    return rq.Marginals(cols, tuple(edges))


def domain(q: Query, schema: Schema) -> Domain:
    """The public domain of the synthetic table: its columns and their numbers of bins."""
    r = request(q, schema)
    return Domain(r.columns, r.sizes(schema))


def sensitivity(schema: Schema) -> Sensitivity:
    s = marginal_sensitivity(schema.relation, schema.c)
    return Sensitivity(s.l1, s.l2)


def generator(q: Query, schema: Schema, rho: float) -> GeneratorSpec:
    """The generator the query runs at share ρ (MST or AIM; the rule of
    :func:`planner.planning.synth.generator.choose`)."""
    gen = choose(q.mechanism.value, rho, schema.public_n, sensitivity(schema).l2)
    # AIM's rounds depend on the measurements' signal-to-noise n·√(2ρ)/Δ₂: its hint is n/Δ₂
    hint = None if schema.public_n is None else float(schema.public_n) / sensitivity(schema).l2
    return GeneratorSpec(gen, schema.relation, schema.c, hint)


def planned(q: Query, schema: Schema, rho: float) -> tuple[GeneratorSpec, list[PlannedInvocation]]:
    """The generator and its noisy invocations at share ρ (data-independent)."""
    spec = generator(q, schema, rho)
    return spec, spec.events(rho, domain(q, schema))


def rows_of(q: Query, schema: Schema) -> int | None:
    """The rows to draw: the ``rows`` option, else the declared public row count."""
    r = q.option("rows")
    return int(r) if r is not None else schema.public_n


def sampler_of(q: Query) -> Sampler:
    """How the release draws its rows: the ``sampler`` option (default ``stratified``)."""
    return Sampler(q.option("sampler") or SAMPLER.default)


def accuracy(q: Query, schema: Schema, rho: float) -> ReleaseAccuracy:
    """The predicted TVD of the release's 1-way and measured 2-way marginals at share ρ
    (its sampling term that of the query's sampler, which the release and the simulation use)."""
    n = need_public_n(q, schema)
    spec, events = planned(q, schema, rho)
    return release_accuracy(events, domain(q, schema), float(n), float(rows_of(q, schema) or n),
                            pair_rule(spec.generator), sampler_of(q))


def pair_rule(gen: Generator) -> PairRule:
    """Which pairs the prediction assumes measured: AIM's noise penalty favours small tables."""
    return PairRule.FEWER_CELLS if gen is Generator.AIM else PairRule.EVERY_PAIR


def _digits(width: float) -> int:
    """Decimals that keep a value drawn in a bin of ``width`` to about a thousandth of it."""
    return max(0, int(-math.floor(math.log10(width))) + 3) if width > 0 else 6


def decode(codes: IntArray, q: Query, schema: Schema, rng: np.random.Generator) -> list[dict[str, JSON]]:
    """Synthetic records from their bin codes: a category's label, true / false, or a
    number drawn uniformly within its numeric bin — for a column declared to hold whole
    numbers, one of the whole numbers the bin holds, each equally likely (post-processing)."""
    r = request(q, schema)
    cols: list[list[JSON]] = []
    for j, (name, e) in enumerate(zip(r.columns, r.edges, strict=True)):
        col = schema.column(name)
        c = codes[:, j]
        if col.kind is ColumnKind.BOOLEAN:
            cols.append([bool(v) for v in c.tolist()])
        elif e is None:
            labels = col.labels
            cols.append([labels[v] for v in c.tolist()])
        else:
            edges = np.asarray(e, dtype=np.float64)
            if col.integer:  # one of the whole numbers of the bin, each equally likely
                cols.append([int(v) for v in rq.draw_whole_numbers(edges, c, rng.random(c.size))])
                continue
            lo, hi = edges[c], edges[c + 1]
            x = lo + (hi - lo) * rng.random(c.size)
            nd = _digits(float(np.min(np.diff(edges))))
            cols.append([round(float(v), nd) for v in x])
    return [dict(zip(r.columns, vals, strict=True)) for vals in zip(*cols, strict=True)] if cols else []


def encode(records: Sequence[Mapping[str, Any]], q: Query, schema: Schema) -> IntArray:
    """Bin codes of synthetic records (the inverse of :func:`decode`; for checks and the
    owner-only comparison)."""
    r = request(q, schema)
    out = np.zeros((len(records), len(r.columns)), dtype=np.int64)
    for j, (name, e) in enumerate(zip(r.columns, r.edges, strict=True)):
        col = schema.column(name)
        vals = [rec[name] for rec in records]
        if col.kind is ColumnKind.BOOLEAN:
            out[:, j] = [1 if v else 0 for v in vals]
        elif e is None:
            index = {lab: i for i, lab in enumerate(col.labels)}
            out[:, j] = [index[str(v)] for v in vals]
        else:
            edges = np.asarray(e, dtype=np.float64)
            x = np.asarray(vals, dtype=np.float64)
            idx = np.searchsorted(edges, x, side="right") - 1
            out[:, j] = np.clip(idx, 0, edges.size - 2)
    return out


def tables_source(agg: MarginalTables, dom: Domain) -> TableSource:
    """The exact tables of a backend as the mechanisms' source (PRIVATE)."""
    return TableSource(dom, {c: agg.table(c).astype(np.float64) for c in agg.cliques})


def release_errors(records_codes: IntArray, measured: Sequence[Sequence[int]], agg: MarginalTables) -> FloatArray:
    """Per marginal, the TVD between the synthetic rows and the real table: every 1-way
    marginal, then every measured 2-way marginal (each once). DATA-DEPENDENT."""
    from planner.planning.synth.marginals import marginal

    dom = Domain(agg.columns, agg.sizes)
    cliques: list[tuple[int, ...]] = [(j,) for j in range(len(dom))]
    cliques += list(dict.fromkeys(tuple(sorted(int(v) for v in p)) for p in measured if len(p) == 2))
    if records_codes.shape[0] == 0 or agg.rows == 0:
        return np.ones(len(cliques))
    return np.array([tvd(marginal(records_codes, dom, c), agg.table(c).astype(np.float64)) for c in cliques])


class SyntheticData(Statistic):
    kind: ClassVar[QueryKind] = QueryKind.SYNTHETIC_DATA
    label: ClassVar[str] = "Synthetic data"
    summary: ClassVar[str] = ("A synthetic table over several categorical, boolean and binned numeric columns, "
                              "drawn from a model fitted to noisy 1- and 2-way marginals (MST or AIM).")
    mechanisms = (
        MechanismSpec(M.MST_OR_AIM, "MST, or AIM where the budget allows",
                      "AIM when ρ·(n/Δ₂)² ≥ 300 (its measurements are then precise enough to choose well), else MST."),
        MechanismSpec(M.MST, "MST", "1-way marginals, then a spanning tree of 2-way marginals chosen privately "
                                    "(McKenna, Miklau & Sheldon 2021)."),
        MechanismSpec(M.AIM, "AIM", "2-way marginals chosen one round at a time where the model is worst, a fixed "
                                    "number of rounds (McKenna et al. 2022)."),
    )
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({None})
    column_hint: ClassVar[str] = "no 'column': name the columns in the option 'columns'"
    options = (COLUMNS, ROWS, BINS, SAMPLER)

    def check_schema(self, q: Query, schema: Schema) -> None:
        if q.column is not None:
            raise QueryError(f"{q.where}: a synthetic table names its columns in the option 'columns', not in 'column'.")
        for name in q.option("columns") or ():
            try:
                col = schema.column(name)
            except SchemaError as exc:
                raise QueryError(f"{q.where}: option 'columns': {exc}") from exc
            if col.kind not in (ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN, ColumnKind.NUMERIC):
                raise QueryError(
                    f"{q.where}: column {name!r} is {col.kind.value}; a synthetic table takes categorical, boolean "
                    "and numeric columns (an identifier or key column would copy who is in the data)."
                )
        request(q, schema).validate(schema)

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        return (
            "The predicted error is the mean total-variation distance (0 = identical, 1 = disjoint) of the "
            "synthetic table's 1-way marginals and of the 2-way marginals the release measures; it is an "
            f"approximation of the expected error (on real tables the realised error was {REALISED_VS_PREDICTED} "
            "times it), not a guarantee. Pairs of columns that are not measured are only as good as the "
            "model's independence assumptions: that depends on the data and is not predicted.",
            "Numeric columns are cut into equal bins over their declared bounds; a synthetic value is drawn "
            "uniformly within its bin. A column declared to hold whole numbers is cut between whole numbers "
            "(one bin per value when there are no more values than bins) and its synthetic values are whole "
            "numbers.",
            "By default (sampler 'stratified') the rows are drawn so that the counts of each table the model "
            "holds are its expected counts rounded to whole rows, dealt to the rows in a random order: each row "
            "still follows the model, with less random error than drawing every row independently ('iid').",
        )

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        return (QueryPart("synthetic_data", sensitivity(schema), size=len(q.option("columns") or ())),)

    def unit(self, q: Query, schema: Schema) -> str:
        return "TVD of a marginal (0 to 1)"

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        return 1.0  # a TVD is already a fraction of the table

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        # The allocator's power law MSE = coef/ρ, matched to MST's prediction at ρ = 1: where the
        # noise is small against a cell's count (t ≪ 1) the prediction is ∝ σ ∝ 1/√ρ; at small ρ the
        # projection saturates it below 1 and coef/ρ overstates it. The allocation only weighs the
        # items with it: the number shown, in the verdict and in the report is ``accuracy`` itself.
        # the allocator (and the accountants) are imported after a release's first read
        from planner.planning.allocation import Family, Item
        n = need_public_n(q, schema)
        dom = domain(q, schema)
        spec = GeneratorSpec(Generator.MST, schema.relation, schema.c)
        coef = release_accuracy(spec.events(1.0, dom), dom, float(n), None).mean ** 2
        return [Part(q, Item(q.id, Family.DISCRETE_GAUSSIAN, coef, weight=weight, error_scale=scale), "synthetic_data")]

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        spec, events = planned(q, schema, share.theta)
        acc = accuracy(q, schema, share.theta)
        one = [e for e in events if isinstance(e, GaussianMeasurement) and e.round is None]
        two = [e for e in events if isinstance(e, GaussianMeasurement) and e.round is not None]
        sel = [e for e in events if isinstance(e, ExponentialSelection)]
        noise = {"rho": share.theta, "sigma_1way": one[0].sigma,
                 "rounds": float(len(sel)), "tvd_1way": acc.one_way_mean}
        if two:
            noise |= {"sigma_2way": two[0].sigma, "selection_epsilon": sel[0].epsilon, "tvd_2way": acc.two_way_mean}
        scales = {e.label: (e.sigma if isinstance(e, GaussianMeasurement) else e.scale) for e in events}
        return prediction(part, share, noise=noise, scales=scales, rmse=acc.mean, bound=acc.bound_95,
                          unit=self.unit(q, schema), bound_kind="model", mechanism=spec.generator.value)

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (request(q, schema),)

    def aggregate_of(self, q: Query, schema: Schema, results: Sequence[rq.Result]) -> Aggregate:
        if len(results) != 1 or not isinstance(results[0], MarginalTables):
            raise wrong_aggregate(q, results)
        return results[0]

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        from planner.privacy.noise import gaussian, noisy_max_float, post_process_rng

        q = part.query
        rho = share.theta
        spec, events = planned(q, schema, rho)
        dom = domain(q, schema)
        comps: list[Component] = []
        for e in events:
            if isinstance(e, GaussianMeasurement):
                comps.append(gaussian(e.label, e.l2_sensitivity, e.sigma, integer=False, vector=True))
            else:
                comps.append(noisy_max_float(e.label, e.sensitivity, e.scale))
        n_rows = rows_of(q, schema)

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, MarginalTables) or agg.columns != dom.names or agg.sizes != dom.sizes:
                raise wrong_aggregate(q, agg)
            calls = _Invocations(comps)
            rng = post_process_rng()
            fit = spec.fit(tables_source(agg, dom), rho, rng, calls.measure, calls.select)
            calls.check_all_used(q)
            rows = n_rows if n_rows is not None else max(round(fit.total), 1)
            return answer_of(q, schema, spec, fit, rows, rng)

        return ItemRelease(part, share, pred, (one_draw(part, share, comps),), answer, spec.generator.value)

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        if not isinstance(answer, dict):
            return ()
        recs = answer.get("records")
        n = len(recs) if isinstance(recs, list) else 0
        # the table itself is its own download: the answer row says how many rows it holds
        return (AnswerRow("", f"{n:,} synthetic rows (download the table)", None),)

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        """``runs`` planning fits with numpy noise on the exact tables; each run's error is
        the mean TVD of its 1-way and measured 2-way marginals (shape (runs,)). DATA-DEPENDENT."""
        if not isinstance(agg, MarginalTables):
            raise wrong_aggregate(q, agg)
        rho = float(pred.theta)
        spec, _ = planned(q, schema, rho)
        dom = Domain(agg.columns, agg.sizes)
        src = tables_source(agg, dom)
        n_rows = rows_of(q, schema) or max(agg.rows, 1)
        out = np.empty(runs)
        for r in range(runs):
            noise = NumpyNoise(rng)
            fit = spec.fit(src, rho, rng, noise.measure, noise.select)
            codes = fit.sample(n_rows, rng, sampler_of(q))
            out[r] = float(np.mean(release_errors(codes, fit.selected, agg)))
        return out


def answer_of(q: Query, schema: Schema, spec: GeneratorSpec, fit: SynthFit, rows: int,
              rng: np.random.Generator) -> dict[str, JSON]:
    """The released answer: the records and what was measured (all post-processing)."""
    names = list(domain(q, schema).names)
    sampler = sampler_of(q)
    codes = fit.sample(rows, rng, sampler)
    measured: list[JSON] = [[names[a] for a in c] for c in dict.fromkeys(tuple(s) for s in fit.selected)]
    return {
        "generator": spec.generator.value,
        "sampler": sampler.value,
        "columns": list(names),
        "rows": int(rows),
        "estimated_rows": float(round(fit.total, 1)),
        "measured": measured,
        "records": list(decode(codes, q, schema, rng)),
    }


class _Invocations:
    """The planned OpenDP measurements, each invoked once, in the planned order: a fit that
    asks for another invocation, or leaves one unused, is refused (nothing else draws
    noise)."""

    def __init__(self, comps: Sequence[Component]) -> None:
        self._comps = list(comps)
        self._next = 0

    def _take(self, scale: float, kind: str) -> Component:
        if self._next >= len(self._comps):
            raise ReleaseError("the synthetic table asked for more noisy measurements than were planned; nothing "
                               "more is drawn.")
        comp = self._comps[self._next]
        self._next += 1
        if not math.isclose(comp.scale, scale, rel_tol=1e-12) or (kind == "select") != comp.constructor.startswith(
                "make_noisy_max"):
            raise ReleaseError(f"the synthetic table's {kind} #{self._next} does not match the planned measurement "
                               f"{comp.name!r}; nothing more is drawn.")
        return comp

    def measure(self, counts: FloatArray, sigma: float) -> FloatArray:
        x = np.asarray(counts, dtype=np.float64)
        comp = self._take(sigma, "measurement")
        return np.asarray(comp.invoke(x.ravel()), dtype=np.float64).reshape(x.shape)

    def select(self, scores: FloatArray, epsilon: float, sensitivity: float) -> int:
        comp = self._take(2.0 * sensitivity / epsilon, "select")
        return int(comp.invoke(np.asarray(scores, dtype=np.float64)))

    def check_all_used(self, q: Query) -> None:
        if self._next != len(self._comps):
            raise ReleaseError(f"query {q.id!r}: the synthetic table used {self._next} of its {len(self._comps)} "
                               "planned measurements.")


# --------------------------------------------------------------------------- owner-only check
class MarginalComparison:
    """The real table's marginals beside a released synthetic table's. DATA-DEPENDENT.

    Computed from the private rows, so it is not private: for the data owner's eyes only,
    labelled so on screen, and never exported (it has no JSON form, and no report or
    download reads it). Proportions, not counts, are shown; a pair's table is a heat map.

    Attributes
    ----------
    columns : tuple of str
        The synthetic table's columns.
    labels : tuple of tuple of str
        Each column's bin labels.
    one_way_tvd : tuple of float
        Each column's TVD between the real and the synthetic 1-way marginal.
    pair_tvd : dict
        Every pair (i, j), i < j, with its 2-way TVD.
    measured : frozenset of (int, int)
        The pairs the release measured (their TVD is what the prediction covers).
    """

    def __init__(self, real: MarginalTables, synthetic: IntArray, labels: Sequence[Sequence[str]],
                 measured: Sequence[Sequence[int]]) -> None:
        from planner.planning.synth.marginals import marginal

        self.columns = tuple(real.columns)
        self.labels = tuple(tuple(lab) for lab in labels)
        self.measured = frozenset(tuple(sorted(int(v) for v in p)) for p in measured if len(p) == 2)
        dom = Domain(real.columns, real.sizes)
        self._real = {c: real.table(c).astype(np.float64) for c in real.cliques}
        self._synth = {c: marginal(synthetic, dom, c) for c in real.cliques}
        self.rows = int(synthetic.shape[0])

        def safe_tvd(c: tuple[int, ...]) -> float:
            a, b = self._real[c], self._synth[c]
            return tvd(a, b) if a.sum() > 0 and b.sum() > 0 else 1.0

        self.one_way_tvd = tuple(safe_tvd((j,)) for j in range(len(self.columns)))
        self.pair_tvd = {c: safe_tvd(c) for c in real.cliques if len(c) == 2}

    @staticmethod
    def _props(t: FloatArray) -> FloatArray:
        s = float(t.sum())
        return t / s if s > 0 else t

    def one_way(self, j: int) -> list[dict[str, Any]]:
        """Column j's bins: ``{"bin", "table": "real" | "synthetic", "share"}`` rows."""
        out = []
        for table, t in (("real", self._real[(j,)]), ("synthetic", self._synth[(j,)])):
            for lab, v in zip(self.labels[j], self._props(t).tolist(), strict=True):
                out.append({"bin": lab, "table": table, "share": float(v)})
        return out

    def two_way(self, i: int, j: int) -> list[dict[str, Any]]:
        """Pair (i, j)'s cells: ``{"row", "column", "real", "synthetic", "difference"}``."""
        c = (min(i, j), max(i, j))
        real, syn = self._props(self._real[c]), self._props(self._synth[c])
        a, b = self.labels[c[0]], self.labels[c[1]]
        return [{"row": a[r], "column": b[k], "real": float(real[r, k]), "synthetic": float(syn[r, k]),
                 "difference": float(syn[r, k] - real[r, k])}
                for r in range(len(a)) for k in range(len(b))]

    def worst_pair(self) -> tuple[int, int] | None:
        """The pair with the largest 2-way TVD (None with one column)."""
        if not self.pair_tvd:
            return None
        c = max(self.pair_tvd, key=lambda p: self.pair_tvd[p])
        return (c[0], c[1])

    def __repr__(self) -> str:  # never print the private proportions
        return f"MarginalComparison(columns={list(self.columns)}, rows={self.rows}) [data-dependent, owner only]"


def compare_marginals(q: Query, schema: Schema, backend: Backend, answer: JSON) -> MarginalComparison:
    """The owner-only comparison of a released synthetic table with the real one
    (DATA-DEPENDENT: the real marginals come from the private rows, through ``backend``)."""
    records = answer.get("records") if isinstance(answer, dict) else None
    if q.kind is not QueryKind.SYNTHETIC_DATA or not isinstance(answer, dict) or not isinstance(records, list):
        raise QueryError(f"{q.where}: only a released synthetic table can be compared with the real table.")
    real = SyntheticData().aggregate(q, backend)
    assert isinstance(real, MarginalTables)
    r = request(q, schema)
    names = list(r.columns)
    measured_raw = answer.get("measured")
    measured = [[names.index(str(c)) for c in p] for p in measured_raw if isinstance(p, list)] \
        if isinstance(measured_raw, list) else []
    codes = encode([rec for rec in records if isinstance(rec, dict)], q, schema)
    return MarginalComparison(real, codes, [r.labels(schema, j) for j in range(len(names))], measured)
