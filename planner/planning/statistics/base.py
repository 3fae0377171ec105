"""The :class:`Statistic` protocol: one class holds a query kind's whole story.

A statistic declares, in one module (DP Wizard's ``Statistic`` idea; OpenDP's one folder
per constructor):

* its **options** (:class:`OptionSpec`: typed, validated, with the label and help a form
  needs) and the **mechanisms** valid for it (:class:`MechanismSpec`);
* its **sensitivity** under each neighbouring relation and rows-per-person bound c
  (:meth:`Statistic.parts`);
* its **allocation items** and its **accuracy prediction** (:meth:`items`,
  :meth:`predict`);
* the **exact aggregate** it needs, asked of a backend as requests
  (:mod:`planner.data.requests`: :meth:`requests`) and put together from their results
  (:meth:`aggregate_of`);
* the **OpenDP measurements** of its release and their post-processing
  (:meth:`release`, through :mod:`planner.privacy.noise`);
* its **planning simulation** (:meth:`simulate`, numpy draws from a caller's generator).

``workload``, ``release`` and ``simulation`` loop over the registry
(:mod:`planner.planning.statistics`); the consistency test walks every statistic × mechanism ×
relation × c and checks that the planned noise scale is the OpenDP measurement's and the
planned cost is OpenDP's privacy map.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError, SchemaError
from planner.data.requests import (
    BinCounts,
    BooleanCounts,
    CountAggregate,
    KeyCounts,
    MarginalTables,
    Predicate,
    QuantileAggregate,
    Request,
    Result,
    SumAggregate,
)
from planner.data.schema import Column, ColumnKind, Schema
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.queries import Query, QueryKind, QueryPart
from planner.privacy.budget import CompositionRule
from planner.privacy.events import ThresholdedEvent

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.data.backends.base import Backend
    from planner.planning.allocation import Item, ItemAllocation
    from planner.privacy.noise import Component, Draw

FloatArray = npt.NDArray[np.float64]
#: Confidence of every error bound the planner shows: 95%.
BETA = 0.05


@dataclass(frozen=True, slots=True)
class MeanAggregate:
    """The two parts of a mean: the clipped sum and the count of the same rows.

    ``public_n`` is the schema's declared n when the mean's mode is ``public_n``.
    """

    sum: SumAggregate
    count: CountAggregate
    public_n: int | None = None


@dataclass(frozen=True, slots=True)
class GroupedAggregate:
    """One aggregate per declared group (every combination of the grouping columns'
    declared values, in declared order, empty groups included)."""

    labels: tuple[str, ...]
    groups: tuple[CountAggregate | SumAggregate | MeanAggregate | QuantileAggregate, ...]

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.groups):
            raise QueryError("a grouped aggregate needs one aggregate per group label.")


#: A statistic's exact aggregate: what its release and its simulation read (PRIVATE).
Aggregate = (
    CountAggregate | SumAggregate | MeanAggregate | BinCounts | QuantileAggregate | BooleanCounts
    | GroupedAggregate | KeyCounts | MarginalTables
)
#: The backends' results a statistic's aggregate may be as it is.
PLAIN: tuple[type, ...] = (CountAggregate, SumAggregate, BinCounts, QuantileAggregate, BooleanCounts, KeyCounts,
                           MarginalTables)


class OptionType(StrEnum):
    """How an option is typed (and how a form draws it)."""

    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    FLOATS = "floats"  # a list of numbers
    CHOICE = "choice"  # one of ``choices``
    PREDICATE = "predicate"  # a row filter (:class:`~planner.planning.queries.Predicate`)
    COLUMNS = "columns"  # a list of declared column names


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option a statistic takes: its JSON key, type, default, label and help.

    ``minimum``/``maximum`` bound numbers (exclusive when ``open_bounds``), ``min_items``
    and ``max_items`` lists; ``choices`` is the closed set of a CHOICE; ``column_kinds``
    the kinds of declared column a COLUMNS option may list (what a form offers); ``blank``
    says what an optional option left blank means when that is not a fixed ``default`` (a
    synthetic table's rows: "the public row count").
    """

    name: str
    type: OptionType
    label: str
    help: str
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    open_bounds: bool = False
    min_items: int = 1
    max_items: int = 1_000_000
    column_kinds: frozenset[ColumnKind] = frozenset({ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN})
    blank: str | None = None

    def parse(self, value: Any, where: str) -> Any:
        """The value, validated and normalised (tuples for lists); :class:`QueryError`
        naming the option, the constraint and the fix otherwise."""
        name = f"{where}: option {self.name!r} ({self.label})"
        t = self.type
        if t is OptionType.BOOL:
            if not isinstance(value, bool):
                raise QueryError(f"{name} must be true or false; got {type(value).__name__}.")
            return value
        if t is OptionType.CHOICE:
            if not isinstance(value, str) or value not in self.choices:
                raise QueryError(f"{name} must be one of {list(self.choices)}; got {value!r}.")
            return value
        if t is OptionType.PREDICATE:
            return value if isinstance(value, Predicate) else Predicate.from_dict(value, where)
        if t is OptionType.COLUMNS:
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise QueryError(f"{name} must be a list of column names; got {type(value).__name__}.")
            cols = tuple(value)
            if not (self.min_items <= len(cols) <= self.max_items) or not all(isinstance(c, str) and c for c in cols):
                raise QueryError(
                    f"{name} must list {self.min_items} to {self.max_items} column names; got {len(cols)}."
                )
            if len(set(cols)) != len(cols):
                raise QueryError(f"{name} must not repeat a column.")
            return cols
        if t is OptionType.FLOATS:
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise QueryError(f"{name} must be a list of numbers; got {type(value).__name__}.")
            nums = tuple(self._number(v, name) for v in value)
            if not (self.min_items <= len(nums) <= self.max_items):
                raise QueryError(f"{name} needs {self.min_items} to {self.max_items} numbers; got {len(nums)}.")
            return nums
        num = self._number(value, name)
        if t is OptionType.INT:
            if isinstance(value, float) and not value.is_integer():
                raise QueryError(f"{name} must be a whole number; got {value!r}.")
            return int(num)
        return num

    def _number(self, value: Any, name: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise QueryError(f"{name} must be a number; got {type(value).__name__}.")
        v = float(value)
        if not math.isfinite(v):
            raise QueryError(f"{name} must be a finite number; got {v}.")
        lo, hi, strict = self.minimum, self.maximum, self.open_bounds
        if lo is not None and (v <= lo if strict else v < lo):
            raise QueryError(f"{name} must be {'>' if strict else '≥'} {lo:g}; got {v:g}.")
        if hi is not None and (v >= hi if strict else v > hi):
            raise QueryError(f"{name} must be {'<' if strict else '≤'} {hi:g}; got {v:g}.")
        return v

    def to_dict(self) -> dict[str, Any]:
        """The declaration as JSON (what a form generator reads)."""
        out: dict[str, Any] = {"name": self.name, "type": self.type.value, "label": self.label,
                               "help": self.help, "required": self.required}
        if self.default is not None:
            out["default"] = list(self.default) if isinstance(self.default, tuple) else self.default
        for key in ("choices",):
            if getattr(self, key):
                out[key] = list(getattr(self, key))
        for key in ("minimum", "maximum"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True, slots=True)
class MechanismSpec:
    """A mechanism a statistic can be released with, as a person sees it."""

    name: MechanismName
    label: str
    help: str = ""


@dataclass(frozen=True, slots=True)
class Part:
    """One allocation item of a query (a quantile query has one per level)."""

    query: Query
    item: Item
    label: str


@dataclass(frozen=True, slots=True)
class Prediction:
    """Data-independent accuracy of one allocation item at its share.

    ``scales`` maps each OpenDP component the release builds (by name: ``"count"``,
    ``"bins"``, ``"scores"``…) to the noise scale the plan predicts for it; the release
    builds exactly those (the consistency test checks it). ``noise`` describes the noise
    in words for people (e.g. ``{"laplace_scale": 2.0}``). ``bound_kind`` says whether
    the RMSE and 95% bound are the release's own (``"exact"``) or a guaranteed upper bound
    (``"at most"``: mode gaps, proportions under add/remove).
    """

    id: str
    query_id: str
    kind: str
    mechanism: str
    part: str
    epsilon: float
    delta: float
    rho: float
    noise: dict[str, float]
    rmse: float
    error_bound_95: float
    unit: str
    theta: float = math.nan
    currency: str = "epsilon"
    scales: dict[str, float] = field(default_factory=dict)
    bound_kind: str = "exact"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "query": self.query_id,
            "kind": self.kind,
            "mechanism": self.mechanism,
            "part": self.part,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "noise": self.noise,
            "rmse": self.rmse,
            "error_bound_95": self.error_bound_95,
            "bound": self.bound_kind,
            "unit": self.unit,
            "optimised": {"currency": self.currency, "value": self.theta},
        }


Answer = Callable[["Aggregate"], dict[str, "JSON"]]


@dataclass(frozen=True, slots=True)
class AnswerRow:
    """One released number (or label) of an answer: its part (a quantile level), its label
    (a bin), the released value, and the raw noisy value when the value was post-processed."""

    part: str
    label: str
    value: float | str | None
    noisy: float | None = None


@dataclass(frozen=True)
class ItemRelease:
    """Everything one allocation item's release needs, built without data: its OpenDP
    draws (with their recorded spends) and the function that turns the exact aggregate
    into released, post-processed answers."""

    part: Part
    share: ItemAllocation
    prediction: Prediction
    draws: tuple[Draw, ...]
    answer: Answer
    mechanism: str

    @property
    def components(self) -> tuple[Component, ...]:
        return tuple(c for d in self.draws for c in d.components)


def one_draw(part: Part, share: ItemAllocation, components: Sequence[Component], index: int = 0,
             key: str | None = None) -> Draw:
    """The ledger spend of one of the item's planned events, released by ``components``."""
    from planner.privacy.noise import draw  # OpenDP is imported on the first release only

    return draw(key or share.id, share.id, part.query.id, share.spends[index], components)


def share_epsilon(share: ItemAllocation, index: int = 0) -> float:
    """The pure ε of the item's ``index``-th planned event (what a pure component is
    calibrated to)."""
    from planner.privacy.accounting import pure_epsilon  # the accountants: after the first read

    event = share.spends[index].event
    return pure_epsilon(event.event if isinstance(event, ThresholdedEvent) else event)


def need_public_n(query: Query, schema: Schema) -> int:
    """The declared public row count (needed to predict a mean, a quantile or a
    proportion); :class:`QueryError` saying how to declare it."""
    if schema.public_n is None:
        raise QueryError(
            f"query {query.id!r}: predicting a {query.kind.value}'s error needs the public row count; "
            "declare 'public_n' (an approximate, public number of rows) in the schema."
        )
    return schema.public_n


def column_units(q: Query, tail: str = "units") -> str:
    """The unit of an answer in a column's own units, ``"<column> units"``, on one line:
    a column name may hold a line break (legal in a quoted CSV header), and a unit is an
    axis title, where Vega-Lite copies it into an expression a raw line break cannot be in
    (every chart of the report failed)."""
    return f"{' '.join((q.column or '').split())} {tail}"


def prediction(part: Part, share: ItemAllocation, *, noise: dict[str, float], scales: dict[str, float],
               rmse: float, bound: float, unit: str, bound_kind: str = "exact",
               mechanism: str | None = None) -> Prediction:
    """A :class:`Prediction` for ``part`` at ``share`` (the shared bookkeeping). ``mechanism``:
    the one the release runs where the query names a choice made at this share (a synthetic
    table's ``mst_or_aim`` is MST or AIM by its budget); by default the query's."""
    q = part.query
    return Prediction(
        id=part.item.id, query_id=q.id, kind=q.kind.value, mechanism=mechanism or q.mechanism.value, part=part.label,
        epsilon=share.epsilon, delta=share.delta, rho=share.rho, noise=noise, rmse=float(rmse),
        error_bound_95=float(bound), unit=unit, theta=share.theta,
        currency="rho" if part.item.is_gaussian else "epsilon", scales=scales, bound_kind=bound_kind,
    )


#: Every statistic class, by the kind it declares: a class that sets its own ``kind`` is
#: registered when its module is imported (:meth:`Statistic.__init_subclass__`), so a new
#: statistic is its module and its :class:`~planner.planning.queries.QueryKind` member, with no
#: list to extend (:data:`planner.planning.statistics.STATISTICS` imports every module of the package).
DECLARED: dict[QueryKind, type[Statistic]] = {}


class Statistic(ABC):
    """One kind of query, declared in one place (see the module docstring)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind is None:  # an intermediate class (a shared base such as the grouped statistics')
            return
        seen = DECLARED.get(kind)
        if seen is not None and (seen.__module__, seen.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"two statistics declare the kind {kind.value!r}: {seen.__qualname__} and {cls.__qualname__}.")
        DECLARED[kind] = cls

    kind: ClassVar[QueryKind]
    label: ClassVar[str]
    summary: ClassVar[str]
    mechanisms: ClassVar[tuple[MechanismSpec, ...]]
    column_kinds: ClassVar[frozenset[ColumnKind | None]]
    column_hint: ClassVar[str]
    options: ClassVar[tuple[OptionSpec, ...]] = ()
    #: Mechanism names this kind does not offer, with the message that says what to use.
    not_offered: ClassVar[Mapping[MechanismName, str]] = {}
    #: True when the MSE lower bound for unbiased mechanisms applies (linear queries).
    linear: ClassVar[bool] = False
    #: The mechanism a query that names none uses (None: the first of :attr:`mechanisms`).
    default: ClassVar[MechanismName | None] = None

    # ------------------------------------------------------------------ declaration
    @property
    def mechanism_names(self) -> tuple[MechanismName, ...]:
        return tuple(m.name for m in self.mechanisms)

    @property
    def default_mechanism(self) -> MechanismName:
        """The best default for a query that names no mechanism: pure (a plan may have
        δ = 0), exact on integer data, and the statistic's most accurate at a given ε where
        that does not depend on the data."""
        return self.default if self.default is not None else self.mechanisms[0].name

    def option(self, name: str) -> OptionSpec:
        for o in self.options:
            if o.name == name:
                return o
        raise QueryError(f"a {self.kind.value} query has no option {name!r}.")

    def parse_options(self, raw: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Validated options (defaults filled in); unknown keys and missing required
        options are :class:`QueryError` naming them."""
        names = {o.name for o in self.options}
        unknown = sorted(set(raw) - names)
        if unknown:
            allowed = f"it takes {sorted(names)}" if names else "it takes none"
            raise QueryError(f"{where}: a {self.kind.value} query has no option(s) {unknown}; {allowed}.")
        out: dict[str, Any] = {}
        for o in self.options:
            if raw.get(o.name) is None:
                if o.required:
                    raise QueryError(f"{where}: a {self.kind.value} query needs {o.name!r} ({o.label}).")
                if o.default is not None:
                    out[o.name] = o.default
                continue
            out[o.name] = o.parse(raw[o.name], where)
        self.check_options(out, where)
        return out

    def check_options(self, opts: dict[str, Any], where: str) -> None:  # noqa: B027 (optional hook)
        """Checks across options (override)."""

    def check_mechanism(self, mechanism: MechanismName, where: str) -> None:
        if mechanism in self.not_offered:
            raise QueryError(f"{where}: {self.not_offered[mechanism]}")
        if mechanism not in self.mechanism_names:
            valid = ", ".join(m.value for m in self.mechanism_names)
            raise QueryError(
                f"{where}: mechanism {mechanism.value!r} is not valid for a {self.kind.value} query; use one of {valid}."
            )

    def check(self, q: Query, schema: Schema) -> None:
        """Check the query against the schema (column kind, then :meth:`check_schema`)."""
        col = column_of(q, schema) if q.column is not None else None
        ckind = col.kind if col is not None else None
        if ckind not in self.column_kinds:
            raise QueryError(
                f"{q.where}: column {q.column!r} is {ckind.value if ckind else 'missing'}; a "
                f"{self.kind.value} query needs {self.column_hint}."
            )
        self.check_schema(q, schema)

    def check_schema(self, q: Query, schema: Schema) -> None:  # noqa: B027 (optional hook)
        """Checks of the options against the schema (override)."""

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        """Plain-words notes for the pages about this query's mechanisms (override)."""
        return ()

    def check_backend(self, q: Query, backend: Backend) -> None:  # noqa: B027 (optional hook)
        """Refuse, before any budget is spent, a backend that cannot compute this query's
        aggregate (override)."""

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        """The released numbers of a stored answer, one row each (override for answers
        with bins or parts)."""
        if not isinstance(answer, dict):
            return ()
        v = answer.get("value")
        noisy = answer.get("noisy")
        return (AnswerRow("", "", v if isinstance(v, (int, float, str)) else None,
                          float(noisy) if isinstance(noisy, (int, float)) else None),)

    # ------------------------------------------------------------------ sensitivity and plan
    @abstractmethod
    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        """The separately released parts, each with its sensitivity under ``schema``."""

    @abstractmethod
    def unit(self, q: Query, schema: Schema) -> str:
        """The unit of the predicted error."""

    def error_scale(self, q: Query, schema: Schema) -> float | None:
        """A public magnitude the error can be measured against (relative error), from the
        declared bounds and public n only; None when there is none."""
        return None

    @abstractmethod
    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        """The allocation items of the query."""

    @abstractmethod
    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        """RMSE and 95% error bound of one item at its allocated share under ``rule``
        (data-independent)."""

    # ------------------------------------------------------------------ data and release
    @abstractmethod
    def requests(self, q: Query, schema: Schema) -> tuple[Request[Any], ...]:
        """The exact aggregates the release needs, asked of a backend
        (:mod:`planner.data.requests`; data-independent)."""

    def aggregate_of(self, q: Query, schema: Schema, results: Sequence[Result]) -> Aggregate:
        """The statistic's exact aggregate from the results of its :meth:`requests`, in
        their order (private: never shown or exported). By default the one result as it
        is; override to put several together."""
        if len(results) != 1 or not isinstance(results[0], PLAIN):
            raise wrong_aggregate(q, results)
        out: Aggregate = results[0]  # type: ignore[assignment]
        return out

    def aggregate(self, q: Query, backend: Backend) -> Aggregate:
        """The exact aggregate the release needs, evaluated by ``backend`` (validated
        against its schema first)."""
        q.validate(backend.schema)
        return self.aggregate_of(q, backend.schema, backend.evaluate(self.requests(q, backend.schema)))

    @abstractmethod
    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        """The item's OpenDP measurements and the post-processing of their outputs."""

    @abstractmethod
    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        """``runs`` planning draws of the released answer's error, in the prediction's unit
        (shape (runs, …)). Numpy draws from the caller's generator: never released."""


def column_of(q: Query, schema: Schema) -> Column:
    """The query's declared column; :class:`QueryError` naming the query otherwise."""
    try:
        return schema.column(q.column or "")
    except SchemaError as exc:
        raise QueryError(f"{q.where}: {exc}") from exc


def wrong_aggregate(q: Query, agg: object) -> QueryError:
    return QueryError(f"query {q.id!r}: the aggregate {type(agg).__name__} does not fit a {q.kind.value}.")


def scaled_sensitivity(s: Sensitivity, divisor: float) -> Sensitivity:
    return Sensitivity(s.l1 / divisor, s.l2 / divisor)
