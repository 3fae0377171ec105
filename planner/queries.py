"""What is asked of the table, and its sensitivity under the declared schema.

One frozen :class:`Query` with a :class:`QueryKind` covers every query the planner knows.
It round-trips through JSON (:meth:`Query.to_dict`, :meth:`Query.from_dict`) in the form
the command line reads::

    {"id": "q1", "kind": "mean", "column": "income", "mechanism": "laplace",
     "mode": "sum_over_count", "weight": 2}

Sensitivities come from the schema only (bounds, categories, relation, privacy unit and
a declared public n), never from the data (MATH.md §2, §7). A query may have several
*parts* released separately (a mean as noisy sum / noisy count; one exponential mechanism
per quantile level); :meth:`Query.parts` lists them, each with its own sensitivity.

Sensitivity table (c = rows per privacy unit; c = 1 and the replace rule give MATH.md §2)
-----------------------------------------------------------------------------------------
========================  ==========================  ===================================
query                     add/remove (L1 / L2)        substitute (L1 / L2)
========================  ==========================  ===================================
count, proportion         c / c                       c / c
sum of clip(x, L, U)      c·max(|L|, |U|)             replace rule: max(U, cU) − min(L, cL)
                                                      drop rule: max(0, cU) − min(0, cL)
mean, public n            — (QueryError)              substitute sum sensitivity / n
mean, sum / count         parts: sum and count        parts: sum and count
histogram, synthetic      c / c                       2c / √2·c
quantile, median, mode    utility sensitivity c       utility sensitivity c
========================  ==========================  ===================================

Notes
-----
* Substitute and the missing-value rule: MATH.md §2's U − L assumes both records
  contribute a value in [L, U]. Under the ``drop`` rule a record whose value is missing
  contributes nothing, so substituting it by a record at U (or L) moves the sum by up
  to max(0, U) − min(0, L): the sensitivity is max(0, cU) − min(0, cL). This equals
  c·(U − L) when L ≤ 0 ≤ U, and is larger otherwise (e.g. [10, 20]: 20, not 10). With
  the ``replace`` rule every row contributes and the tighter form below applies.
* Substitute with c > 1: a person owning a ∈ [1, c] rows is replaced by one owning
  b ∈ [1, c] rows, so a clipped sum moves from [min(L, aL), max(U, aU)] to the same range
  for b; the largest change is max(U, cU) − min(L, cL). This is larger than c·(U − L) when
  L > 0 (e.g. L = 10, U = 20, c = 2: a person with one row at 10 replaced by one with two
  rows at 20 moves the sum by 30, not 20), so the plain "× c" rule would be unsafe there.
* Histograms: one person's c rows can all fall in one bin, so the L2 sensitivity is c,
  not √c (√c holds only when a person's rows fall in distinct bins, which the schema
  cannot promise). Substitute: a rows leave bins and b rows enter others: L1 ≤ a + b ≤ 2c,
  L2 ≤ √(a² + b²) ≤ √2·c (all of each side in one bin).
* Quantile / mode: the rank utility −|#{x ≤ t} − α·n| and the count utility move by at
  most 1 per record under both relations (under add/remove #{x ≤ t} moves by 0 or 1 and
  α·n by α), hence c per unit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from planner.errors import QueryError, SchemaError
from planner.mechanisms.base import MechanismName, Sensitivity
from planner.schema import OTHER_LABEL, Column, ColumnKind, MissingAction, Relation, Schema

FloatArray = npt.NDArray[np.float64]

#: Default number of quantile candidates when neither ``candidates`` nor ``step`` is given.
DEFAULT_CANDIDATES: Final[int] = 1001
#: Largest candidate grid / number of bins a query may declare.
MAX_GRID: Final[int] = 1_000_000


class QueryKind(StrEnum):
    """Every kind of query."""

    COUNT = "count"
    SUM = "sum"
    MEAN = "mean"
    HISTOGRAM = "histogram"
    QUANTILE = "quantile"
    MEDIAN = "median"
    MODE = "mode"
    PROPORTION = "proportion"
    SYNTHETIC_SAMPLE = "synthetic_sample"


class MeanMode(StrEnum):
    """How a mean is released."""

    SUM_OVER_COUNT = "sum_over_count"
    PUBLIC_N = "public_n"


class PredicateOp(StrEnum):
    """Comparison operators of a count predicate."""

    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    IN = "in"


M = MechanismName
#: Mechanisms valid for each kind of query.
VALID_MECHANISMS: Final[dict[QueryKind, frozenset[MechanismName]]] = {
    QueryKind.COUNT: frozenset({M.LAPLACE, M.GAUSSIAN, M.DISCRETE_LAPLACE, M.DISCRETE_GAUSSIAN}),
    QueryKind.SUM: frozenset({M.LAPLACE, M.GAUSSIAN}),
    QueryKind.MEAN: frozenset({M.LAPLACE, M.GAUSSIAN}),
    QueryKind.HISTOGRAM: frozenset(
        {M.LAPLACE, M.GAUSSIAN, M.DISCRETE_LAPLACE, M.DISCRETE_GAUSSIAN}
    ),
    QueryKind.QUANTILE: frozenset({M.EXPONENTIAL, M.INVERSE_SENSITIVITY}),
    QueryKind.MEDIAN: frozenset({M.EXPONENTIAL, M.INVERSE_SENSITIVITY}),
    QueryKind.MODE: frozenset({M.EXPONENTIAL, M.REPORT_NOISY_MAX, M.INVERSE_SENSITIVITY}),
    QueryKind.PROPORTION: frozenset({M.RANDOMIZED_RESPONSE, M.LAPLACE, M.DISCRETE_LAPLACE}),
    QueryKind.SYNTHETIC_SAMPLE: frozenset({M.PERTURBED_HISTOGRAM, M.SMOOTHED_HISTOGRAM}),
}

#: Column kinds each query kind accepts (``None`` in the set: no column needed).
VALID_COLUMN_KINDS: Final[dict[QueryKind, frozenset[ColumnKind | None]]] = {
    QueryKind.COUNT: frozenset({None, *ColumnKind}),
    QueryKind.SUM: frozenset({ColumnKind.NUMERIC}),
    QueryKind.MEAN: frozenset({ColumnKind.NUMERIC}),
    QueryKind.HISTOGRAM: frozenset(
        {ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN, ColumnKind.NUMERIC}
    ),
    QueryKind.QUANTILE: frozenset({ColumnKind.NUMERIC}),
    QueryKind.MEDIAN: frozenset({ColumnKind.NUMERIC}),
    QueryKind.MODE: frozenset({ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN}),
    QueryKind.PROPORTION: frozenset({ColumnKind.BOOLEAN}),
    QueryKind.SYNTHETIC_SAMPLE: frozenset({ColumnKind.NUMERIC}),
}

_SUGGEST = {
    QueryKind.SUM: "a numeric column",
    QueryKind.MEAN: "a numeric column",
    QueryKind.HISTOGRAM: "a categorical, boolean or numeric (with bin edges) column",
    QueryKind.QUANTILE: "a numeric column",
    QueryKind.MEDIAN: "a numeric column",
    QueryKind.MODE: "a categorical or boolean column (or a histogram for numbers)",
    QueryKind.PROPORTION: "a boolean column (or a count with a predicate)",
    QueryKind.SYNTHETIC_SAMPLE: "a numeric column",
    QueryKind.COUNT: "any declared column",
}

PredicateValue = float | str | bool | tuple[float | str | bool, ...]


@dataclass(frozen=True, slots=True)
class Predicate:
    """A declarative row filter on a declared column using public constants only.

    Numeric columns compare the clipped value clip(x, L, U); categorical columns compare
    the declared label (an undeclared value without an "other" bin matches nothing, not
    even ``!=``); boolean columns take ``==`` / ``!=`` with true or false. Rows whose
    value the missing-value rule drops match nothing (and are counted as dropped).
    """

    column: str
    op: PredicateOp
    value: PredicateValue

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "op", PredicateOp(self.op))
        except ValueError as exc:
            raise QueryError(
                f"predicate operator must be one of {[o.value for o in PredicateOp]}; "
                f"got {self.op!r}."
            ) from exc
        if isinstance(self.value, list):
            object.__setattr__(self, "value", tuple(self.value))

    @property
    def values(self) -> tuple[float | str | bool, ...]:
        """The constant(s) as a tuple (one element unless ``op`` is ``in``)."""
        return self.value if isinstance(self.value, tuple) else (self.value,)

    def validate(self, schema: Schema, where: str) -> None:
        """Check the predicate against the schema; :class:`QueryError` if it does not fit."""
        try:
            col = schema.column(self.column)
        except SchemaError as exc:
            raise QueryError(f"{where}: predicate {exc}") from exc
        if col.kind is ColumnKind.IDENTIFIER:
            raise QueryError(
                f"{where}: a predicate on identifier column {col.name!r} would single out "
                "people; filter on a numeric, categorical or boolean column."
            )
        if self.op is PredicateOp.IN:
            if not isinstance(self.value, tuple) or len(self.value) == 0:
                raise QueryError(f"{where}: operator 'in' needs a non-empty list of constants.")
        elif isinstance(self.value, tuple):
            raise QueryError(f"{where}: operator {self.op.value!r} needs a single constant.")
        vals = self.values
        if col.kind is ColumnKind.NUMERIC:
            for v in vals:
                if isinstance(v, (bool, str)) or not math.isfinite(float(v)):
                    raise QueryError(
                        f"{where}: predicate on numeric column {col.name!r} needs finite "
                        "numbers as constants."
                    )
        elif col.kind is ColumnKind.CATEGORICAL:
            if self.op not in (PredicateOp.EQ, PredicateOp.NE, PredicateOp.IN):
                raise QueryError(
                    f"{where}: categorical column {col.name!r} takes ==, != or in; got "
                    f"{self.op.value!r}."
                )
            labels = set(col.labels)
            for v in vals:
                if not isinstance(v, str) or v not in labels:
                    raise QueryError(
                        f"{where}: predicate constants on {col.name!r} must be declared "
                        "categories; add the category to the schema or fix the predicate."
                    )
        elif col.kind is ColumnKind.BOOLEAN:
            if self.op not in (PredicateOp.EQ, PredicateOp.NE, PredicateOp.IN):
                raise QueryError(
                    f"{where}: boolean column {col.name!r} takes ==, != or in; got "
                    f"{self.op.value!r}."
                )
            if not all(isinstance(v, bool) for v in vals):
                raise QueryError(
                    f"{where}: predicate constants on boolean column {col.name!r} must be "
                    "true or false."
                )

    def to_dict(self) -> dict[str, Any]:
        value: Any = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"column": self.column, "op": self.op.value, "value": value}

    @classmethod
    def from_dict(cls, data: Any, where: str = "query") -> Predicate:
        if not isinstance(data, Mapping) or set(data) != {"column", "op", "value"}:
            raise QueryError(
                f'{where}: a predicate is {{"column": ..., "op": ..., "value": ...}} with '
                "exactly those keys."
            )
        value = data["value"]
        if isinstance(value, list):
            value = tuple(value)
        ok = (float, int, str, bool)
        if isinstance(value, tuple):
            if not all(isinstance(v, ok) for v in value):
                raise QueryError(f"{where}: predicate constants must be numbers, strings or booleans.")
        elif not isinstance(value, ok):
            raise QueryError(f"{where}: predicate constants must be numbers, strings or booleans.")
        if not isinstance(data["column"], str):
            raise QueryError(f"{where}: predicate 'column' must be a column name.")
        return cls(data["column"], data["op"], value)


def bin_labels(edges: npt.ArrayLike) -> tuple[str, ...]:
    """Labels of numeric bins: half-open ``[a, b)``, the last one closed ``[a, b]``.

    The one place the label format is defined; every backend uses it.

    Examples
    --------
    >>> bin_labels([0, 10, 20])
    ('[0, 10)', '[10, 20]')
    """
    e = np.asarray(edges, dtype=np.float64)
    return tuple(f"[{a:g}, {b:g}{']' if i == e.size - 2 else ')'}" for i, (a, b) in enumerate(itertools.pairwise(e)))


@dataclass(frozen=True, slots=True)
class QueryPart:
    """One separately released piece of a query.

    Attributes
    ----------
    name : str
        ``"count"``, ``"sum"``, ``"mean"``, ``"histogram"``, ``"quantile@0.5"``, ...
    sensitivity : Sensitivity
        L1 / L2 sensitivity (for exponential-type mechanisms: the utility sensitivity).
    size : int
        How many numbers the part releases (bins of a histogram; 1 otherwise).
    utility : bool
        True if ``sensitivity`` is a utility sensitivity (quantile, median, mode).
    """

    name: str
    sensitivity: Sensitivity
    size: int = 1
    utility: bool = False


def _opt_float(value: Any, what: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise QueryError(f"{where}: {what} must be a number; got {value!r}.")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise QueryError(f"{where}: {what} must be > 0 and finite; got {v}.")
    return v


@dataclass(frozen=True, slots=True)
class Query:
    """One query of a plan.

    Parameters
    ----------
    id : str
        Unique name within a plan.
    kind : QueryKind
    column : str or None
        The column queried (optional for ``count``).
    mechanism : MechanismName
        Must be in ``VALID_MECHANISMS[kind]``.
    weight : float or None
        Importance in the allocation (default 1 when neither weight nor target is given).
    target : float or None
        Target error (in the answer's units) for the inverse planning mode.
    predicate : Predicate or None
        ``count`` only.
    mode : MeanMode or None
        ``mean`` only; defaults to ``sum_over_count``.
    alphas : tuple of float or None
        ``quantile`` only: levels in (0, 1). ``median`` is ``alphas = (0.5,)``.
    candidates : int or None
        Quantile / median: number of equally spaced candidates over [L, U] (≥ 2).
    step : float or None
        Quantile / median: candidate spacing (alternative to ``candidates``).
    bin_edges : tuple of float or None
        Numeric histogram: declared, strictly increasing edges covering [L, U].
    bins : int or None
        Numeric histogram or synthetic sample: number of equal-width bins over [L, U].
    """

    id: str
    kind: QueryKind
    column: str | None
    mechanism: MechanismName
    weight: float | None = None
    target: float | None = None
    predicate: Predicate | None = None
    mode: MeanMode | None = None
    alphas: tuple[float, ...] | None = None
    candidates: int | None = None
    step: float | None = None
    bin_edges: tuple[float, ...] | None = None
    bins: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise QueryError("every query needs a non-empty string 'id'.")
        where = f"query {self.id!r}"
        try:
            kind = QueryKind(self.kind)
        except ValueError as exc:
            raise QueryError(
                f"{where}: kind must be one of {[k.value for k in QueryKind]}; got {self.kind!r}."
            ) from exc
        object.__setattr__(self, "kind", kind)
        try:
            mech = MechanismName(self.mechanism)
        except ValueError as exc:
            raise QueryError(
                f"{where}: unknown mechanism {self.mechanism!r}; valid for {kind.value}: "
                f"{sorted(m.value for m in VALID_MECHANISMS[kind])}."
            ) from exc
        object.__setattr__(self, "mechanism", mech)
        if mech not in VALID_MECHANISMS[kind]:
            raise QueryError(
                f"{where}: mechanism {mech.value!r} does not apply to a {kind.value} query; "
                f"pick one of {sorted(m.value for m in VALID_MECHANISMS[kind])}."
            )
        if self.column is not None and (not isinstance(self.column, str) or not self.column):
            raise QueryError(f"{where}: 'column' must be a column name.")
        if self.column is None and kind is not QueryKind.COUNT:
            raise QueryError(f"{where}: a {kind.value} query needs a 'column'.")
        w = _opt_float(self.weight, "weight", where)
        t = _opt_float(self.target, "target", where)
        if w is not None and t is not None:
            raise QueryError(f"{where}: give either a 'weight' or a 'target', not both.")
        object.__setattr__(self, "weight", w)
        object.__setattr__(self, "target", t)
        self._check_options(kind, where)

    def _check_options(self, kind: QueryKind, where: str) -> None:
        def forbid(name: str, allowed: str) -> None:
            if getattr(self, name) is not None:
                raise QueryError(f"{where}: '{name}' applies to {allowed} queries only.")

        if kind is not QueryKind.COUNT:
            forbid("predicate", "count")
        elif self.predicate is not None and not isinstance(self.predicate, Predicate):
            raise QueryError(f"{where}: 'predicate' must be a Predicate.")
        if kind is QueryKind.MEAN:
            try:
                mode = MeanMode(self.mode or MeanMode.SUM_OVER_COUNT)
            except ValueError as exc:
                raise QueryError(
                    f"{where}: mean mode must be one of {[m.value for m in MeanMode]}; "
                    f"got {self.mode!r}."
                ) from exc
            object.__setattr__(self, "mode", mode)
        else:
            forbid("mode", "mean")
        if kind is QueryKind.QUANTILE:
            alphas = self.alphas
            if alphas is None or len(alphas) == 0:
                raise QueryError(f"{where}: a quantile query needs 'alphas', e.g. [0.25, 0.75].")
            clean: list[float] = []
            for a in alphas:
                if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 < a < 1:
                    raise QueryError(f"{where}: every alpha must be a number in (0, 1); got {a!r}.")
                clean.append(float(a))
            if len(set(clean)) != len(clean):
                raise QueryError(f"{where}: alphas must not repeat.")
            object.__setattr__(self, "alphas", tuple(clean))
        elif kind is QueryKind.MEDIAN:
            if self.alphas is not None and tuple(self.alphas) != (0.5,):
                raise QueryError(f"{where}: a median has alpha 0.5; use a quantile query for others.")
            object.__setattr__(self, "alphas", (0.5,))
        else:
            forbid("alphas", "quantile")
        if kind in (QueryKind.QUANTILE, QueryKind.MEDIAN):
            if self.candidates is not None and self.step is not None:
                raise QueryError(f"{where}: give 'candidates' or 'step', not both.")
            if self.candidates is not None:
                n = self.candidates
                if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_GRID:
                    raise QueryError(
                        f"{where}: 'candidates' must be a whole number in [2, {MAX_GRID}]; got {n!r}."
                    )
            object.__setattr__(self, "step", _opt_float(self.step, "step", where))
        else:
            forbid("candidates", "quantile or median")
            forbid("step", "quantile or median")
        if kind in (QueryKind.HISTOGRAM, QueryKind.SYNTHETIC_SAMPLE):
            if self.bins is not None:
                b = self.bins
                if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_GRID:
                    raise QueryError(f"{where}: 'bins' must be a whole number in [1, {MAX_GRID}]; got {b!r}.")
            if self.bin_edges is not None:
                if kind is QueryKind.SYNTHETIC_SAMPLE:
                    raise QueryError(f"{where}: a synthetic sample takes 'bins', not 'bin_edges'.")
                if self.bins is not None:
                    raise QueryError(f"{where}: give 'bins' or 'bin_edges', not both.")
                edges = []
                for e in self.bin_edges:
                    if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e):
                        raise QueryError(f"{where}: bin edges must be finite numbers.")
                    edges.append(float(e))
                if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
                    raise QueryError(
                        f"{where}: bin edges must be at least 2 strictly increasing numbers."
                    )
                object.__setattr__(self, "bin_edges", tuple(edges))
            if kind is QueryKind.SYNTHETIC_SAMPLE and self.bins is None:
                raise QueryError(f"{where}: a synthetic sample needs a declared number of 'bins'.")
        else:
            forbid("bins", "histogram or synthetic_sample")
            forbid("bin_edges", "histogram")

    # ------------------------------------------------------------------ schema checks
    @property
    def where(self) -> str:
        return f"query {self.id!r}"

    def validate(self, schema: Schema) -> None:
        """Check the query against the schema; :class:`QueryError` naming the fix if not valid."""
        where = self.where
        col: Column | None = None
        if self.column is not None:
            try:
                col = schema.column(self.column)
            except SchemaError as exc:
                raise QueryError(f"{where}: {exc}") from exc
        ckind = col.kind if col is not None else None
        if ckind not in VALID_COLUMN_KINDS[self.kind]:
            raise QueryError(
                f"{where}: column {self.column!r} is {ckind.value if ckind else 'missing'}; a "
                f"{self.kind.value} query needs {_SUGGEST[self.kind]}."
            )
        if self.predicate is not None:
            self.predicate.validate(schema, where)
        if self.kind is QueryKind.MEAN and self.mode is MeanMode.PUBLIC_N:
            if schema.relation is not Relation.SUBSTITUTE:
                raise QueryError(
                    f"{where}: 'mean with public n' is defined under the substitute relation "
                    "only (n changes under add/remove); use mode 'sum_over_count' or switch "
                    "the schema's relation to 'substitute'."
                )
            if schema.public_n is None:
                raise QueryError(
                    f"{where}: 'mean with public n' needs the schema's public_n; declare it "
                    "or use mode 'sum_over_count'."
                )
        if self.kind is QueryKind.HISTOGRAM and ckind is ColumnKind.NUMERIC:
            if self.bin_edges is None and self.bins is None:
                raise QueryError(
                    f"{where}: a histogram of numeric column {self.column!r} needs declared "
                    "'bin_edges' or a number of 'bins'."
                )
            if self.bin_edges is not None and col is not None:
                lo, hi = col.bounds
                if self.bin_edges[0] > lo or self.bin_edges[-1] < hi:
                    raise QueryError(
                        f"{where}: bin edges must cover the declared bounds [{lo:g}, {hi:g}] "
                        f"of {col.name!r}; extend the first/last edge."
                    )
        elif self.kind is QueryKind.HISTOGRAM and (self.bin_edges is not None or self.bins is not None):
            raise QueryError(
                f"{where}: 'bins'/'bin_edges' apply to numeric columns; the bins of "
                f"{self.column!r} are its declared categories."
            )
        if self.kind in (QueryKind.QUANTILE, QueryKind.MEDIAN):
            self.candidate_grid(schema)

    # ------------------------------------------------------------------ grids
    def candidate_grid(self, schema: Schema) -> FloatArray:
        """The declared candidate grid of a quantile / median over [L, U] (increasing).

        ``candidates`` k gives ``linspace(L, U, k)``; ``step`` s gives L, L + s, … and U
        (U appended if the last step falls short); neither gives ``DEFAULT_CANDIDATES``.
        """
        if self.kind not in (QueryKind.QUANTILE, QueryKind.MEDIAN) or self.column is None:
            raise QueryError(f"{self.where}: only quantile and median queries have candidates.")
        lo, hi = schema.column(self.column).bounds
        if self.step is not None:
            k = math.floor((hi - lo) / self.step + 1e-9)
            if k + 2 > MAX_GRID:
                raise QueryError(
                    f"{self.where}: step {self.step:g} gives more than {MAX_GRID} candidates "
                    f"over [{lo:g}, {hi:g}]; use a larger step."
                )
            grid = lo + self.step * np.arange(k + 1, dtype=np.float64)
            if grid[-1] < hi:
                grid = np.append(grid[grid < hi], hi)
            return np.asarray(grid, dtype=np.float64)
        n = self.candidates if self.candidates is not None else DEFAULT_CANDIDATES
        return np.linspace(lo, hi, n, dtype=np.float64)

    def edges(self, schema: Schema) -> FloatArray | None:
        """Bin edges of a numeric histogram / synthetic sample (``None`` for categories)."""
        if self.column is None or self.kind not in (QueryKind.HISTOGRAM, QueryKind.SYNTHETIC_SAMPLE):
            return None
        col = schema.column(self.column)
        if col.kind is not ColumnKind.NUMERIC:
            return None
        if self.bin_edges is not None:
            return np.asarray(self.bin_edges, dtype=np.float64)
        lo, hi = col.bounds
        nb = self.bins if self.bins is not None else 1
        return np.linspace(lo, hi, nb + 1, dtype=np.float64)

    def labels(self, schema: Schema) -> tuple[str, ...]:
        """Labels of the released bins (histogram, synthetic sample, mode)."""
        e = self.edges(schema)
        if e is not None:
            return bin_labels(e)
        if self.column is None:
            raise QueryError(f"{self.where}: a {self.kind.value} query has no bins.")
        return schema.column(self.column).labels

    # ------------------------------------------------------------------ sensitivity
    def parts(self, schema: Schema) -> tuple[QueryPart, ...]:
        """Separately released parts, each with its sensitivity under ``schema``.

        Examples
        --------
        >>> from planner.schema import Column, ColumnKind, MissingRule, Schema
        >>> s = Schema((Column("income", ColumnKind.NUMERIC, MissingRule(), 0, 1000),))
        >>> q = Query("m", QueryKind.MEAN, "income", MechanismName.LAPLACE)
        >>> [(p.name, p.sensitivity.l1) for p in q.parts(s)]
        [('sum', 1000.0), ('count', 1.0)]
        """
        self.validate(schema)
        c = schema.c
        sub = schema.relation is Relation.SUBSTITUTE
        count_s = Sensitivity(c, c)
        kind = self.kind
        if kind in (QueryKind.COUNT, QueryKind.PROPORTION):
            return (QueryPart(kind.value, count_s),)
        if kind in (QueryKind.SUM, QueryKind.MEAN):
            assert self.column is not None
            column = schema.column(self.column)
            lo, hi = column.bounds
            if sub and column.missing.action is MissingAction.REPLACE:
                # every row contributes: a ∈ [1, c] rows → Σ ∈ [min(L, cL), max(U, cU)]
                d = max(hi, c * hi) - min(lo, c * lo)
            elif sub:
                # the drop rule may leave a unit with 0 usable rows: Σ ∈ [min(0, cL), max(0, cU)]
                d = max(0.0, c * hi) - min(0.0, c * lo)
            else:
                d = c * max(abs(lo), abs(hi))
            if d == 0:
                raise QueryError(f"{self.where}: the declared bounds give a zero sensitivity.")
            if kind is QueryKind.SUM:
                return (QueryPart("sum", Sensitivity(d, d)),)
            if self.mode is MeanMode.PUBLIC_N:
                assert schema.public_n is not None
                dn = d / schema.public_n
                return (QueryPart("mean", Sensitivity(dn, dn)),)
            return (QueryPart("sum", Sensitivity(d, d)), QueryPart("count", count_s))
        if kind in (QueryKind.HISTOGRAM, QueryKind.SYNTHETIC_SAMPLE):
            size = len(self.labels(schema))
            hist_s = Sensitivity(2 * c, math.sqrt(2) * c) if sub else Sensitivity(c, c)
            return (QueryPart(kind.value, hist_s, size=size),)
        if kind in (QueryKind.QUANTILE, QueryKind.MEDIAN):
            assert self.alphas is not None
            return tuple(
                QueryPart(f"quantile@{a:g}", Sensitivity(c, c), utility=True) for a in self.alphas
            )
        # MODE
        return (QueryPart("mode", Sensitivity(c, c), size=len(self.labels(schema)), utility=True),)

    def sensitivity(self, schema: Schema) -> Sensitivity:
        """The sensitivity shared by all parts; :class:`QueryError` if the parts differ.

        A mean as sum / count has two different sensitivities: use :meth:`parts`.
        """
        ps = self.parts(schema)
        first = ps[0].sensitivity
        if any(p.sensitivity != first for p in ps[1:]):
            raise QueryError(
                f"{self.where}: this {self.kind.value} has parts with different "
                f"sensitivities ({', '.join(p.name for p in ps)}); use parts()."
            )
        return first

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (only the options that are set)."""
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind.value,
            "column": self.column,
            "mechanism": self.mechanism.value,
        }
        if self.weight is not None:
            out["weight"] = self.weight
        if self.target is not None:
            out["target"] = self.target
        if self.predicate is not None:
            out["predicate"] = self.predicate.to_dict()
        if self.mode is not None:
            out["mode"] = self.mode.value
        if self.alphas is not None and self.kind is QueryKind.QUANTILE:
            out["alphas"] = list(self.alphas)
        for name in ("candidates", "step", "bins"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.bin_edges is not None:
            out["bin_edges"] = list(self.bin_edges)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Query:
        """Read the JSON form; :class:`QueryError` naming the query if malformed."""
        if not isinstance(data, Mapping):
            raise QueryError("every query must be an object with 'id', 'kind' and 'mechanism'.")
        qid = data.get("id")
        where = f"query {qid!r}"
        allowed = {
            "id", "kind", "column", "mechanism", "weight", "target", "predicate", "mode",
            "alphas", "candidates", "step", "bin_edges", "bins",
        }
        unknown = set(data) - allowed
        if unknown:
            raise QueryError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}.")
        for key in ("id", "kind", "mechanism"):
            if key not in data:
                raise QueryError(f"{where}: missing {key!r}.")
        pred = data.get("predicate")

        def seq(name: str) -> tuple[Any, ...] | None:
            v = data.get(name)
            if v is None:
                return None
            if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
                raise QueryError(f"{where}: {name!r} must be a list of numbers.")
            return tuple(v)

        return cls(
            id=qid,  # type: ignore[arg-type]
            kind=data["kind"],
            column=data.get("column"),
            mechanism=data["mechanism"],
            weight=data.get("weight"),
            target=data.get("target"),
            predicate=Predicate.from_dict(pred, where) if pred is not None else None,
            mode=data.get("mode"),
            alphas=seq("alphas"),
            candidates=data.get("candidates"),
            step=data.get("step"),
            bin_edges=seq("bin_edges"),
            bins=data.get("bins"),
        )


def queries_from_list(items: Sequence[Any], schema: Schema | None = None) -> tuple[Query, ...]:
    """Read a JSON list of queries; ids must be unique; validated against ``schema`` if given."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise QueryError("'queries' must be a list of query objects.")
    qs = tuple(Query.from_dict(d) for d in items)
    ids = [q.id for q in qs]
    dups = sorted({i for i in ids if ids.count(i) > 1})
    if dups:
        raise QueryError(f"query ids {dups} are used more than once; give each query its own id.")
    if schema is not None:
        for q in qs:
            q.validate(schema)
    return qs


__all__ = [
    "DEFAULT_CANDIDATES",
    "OTHER_LABEL",
    "VALID_COLUMN_KINDS",
    "VALID_MECHANISMS",
    "MeanMode",
    "Predicate",
    "PredicateOp",
    "Query",
    "QueryKind",
    "QueryPart",
    "queries_from_list",
]
