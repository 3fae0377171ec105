"""What is asked of the table: :class:`Query`, its kinds, and row filters.

One :class:`Query` carrier covers every kind of statistic: its id, kind, column,
mechanism, weight or target, and the kind's own options. Each kind's options,
mechanisms, sensitivity, prediction and release are declared by its statistic module
(:mod:`planner.planning.statistics`); a query validates itself through that module. It
round-trips through JSON (:meth:`Query.to_dict`, :meth:`Query.from_dict`) in the flat
form the command line reads::

    {"id": "q1", "kind": "mean", "column": "income", "mechanism": "laplace",
     "mode": "sum_over_count", "weight": 2}

Sensitivities come from the schema only (bounds, categories, relation, privacy unit and
a declared public n), never from the data (docs/mathematics.md §2, §7). A query may have several
*parts* released separately (a mean as noisy sum / noisy count; one exponential
mechanism per quantile level); :meth:`Query.parts` lists them, each with its own
sensitivity (the table is in each statistic's module docstring).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from planner.core.errors import QueryError, SchemaError
from planner.core.names import check_name
from planner.data.requests import Predicate, PredicateOp, PredicateValue, bin_labels
from planner.data.schema import OTHER_LABEL, ColumnKind, Schema
from planner.planning.mechanisms.base import MechanismName, Sensitivity

#: Default number of quantile candidates when neither ``candidates`` nor ``step`` is given.
DEFAULT_CANDIDATES: Final[int] = 1001
#: Largest candidate grid / number of bins a query may declare.
MAX_GRID: Final[int] = 1_000_000


class QueryKind(StrEnum):
    """Every kind of query (one statistic module each, :mod:`planner.planning.statistics`)."""

    COUNT = "count"
    SUM = "sum"
    MEAN = "mean"
    HISTOGRAM = "histogram"
    QUANTILE = "quantile"
    MEDIAN = "median"
    MODE = "mode"
    PROPORTION = "proportion"
    SYNTHETIC_SAMPLE = "synthetic_sample"
    GROUPED_COUNT = "grouped_count"
    GROUPED_SUM = "grouped_sum"
    GROUPED_MEAN = "grouped_mean"
    GROUPED_QUANTILE = "grouped_quantile"
    KEY_COUNT = "key_count"
    SYNTHETIC_DATA = "synthetic_data"


class MeanMode(StrEnum):
    """How a mean is released."""

    SUM_OVER_COUNT = "sum_over_count"
    PUBLIC_N = "public_n"


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


class Options(Mapping[str, Any]):
    """A query's validated options: an immutable, hashable mapping (lists as tuples)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items: tuple[tuple[str, Any], ...] = tuple(sorted((items or {}).items()))

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Options) and self._items == other._items

    def __repr__(self) -> str:
        return f"Options({dict(self._items)!r})"


class Kind(Protocol):
    """What a query needs of its kind's statistic to check itself: the part of
    :class:`planner.planning.statistics.base.Statistic` a :class:`Query` reads (the
    statistics register themselves, :func:`register`; a query never imports them)."""

    @property
    def kind(self) -> QueryKind: ...
    @property
    def mechanism_names(self) -> tuple[MechanismName, ...]: ...
    @property
    def column_kinds(self) -> frozenset[ColumnKind | None]: ...
    @property
    def column_hint(self) -> str: ...
    @property
    def default_mechanism(self) -> MechanismName: ...
    def check_mechanism(self, mechanism: MechanismName, where: str) -> None: ...
    def parse_options(self, raw: Mapping[str, Any], where: str) -> dict[str, Any]: ...
    def check(self, q: Query, schema: Schema) -> None: ...
    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]: ...


#: Every kind's statistic, registered by :mod:`planner.planning.statistics` when it is
#: imported (``planner.planning`` imports it first, so the registry is full before any query).
_KINDS: dict[QueryKind, Kind] = {}


def register(statistic: Kind) -> None:
    """Register the statistic of a kind (:mod:`planner.planning.statistics` does, once each)."""
    _KINDS[statistic.kind] = statistic


def kind_of(kind: QueryKind) -> Kind:
    """The registered statistic of ``kind``; :class:`QueryError` when none is."""
    try:
        return _KINDS[kind]
    except KeyError:
        raise QueryError(
            f"no statistic is registered for {kind.value!r} queries; import planner.planning.statistics."
        ) from None


class Query:
    """One query of a plan: what is asked, with which mechanism, and its kind's options.

    Parameters
    ----------
    id : str
        Unique name within a plan.
    kind : QueryKind
        Which statistic (:mod:`planner.planning.statistics`).
    column : str or None
        The column queried (optional for ``count``).
    mechanism : MechanismName or None
        One of the statistic's mechanisms; ``None`` for the statistic's best default
        (:attr:`planner.planning.statistics.base.Statistic.default_mechanism`).
    weight : float or None
        Importance in the allocation (default 1 when neither weight nor target is given).
    target : float or None
        Target error (in the answer's units, 95%) for the inverse planning mode.
    options : mapping, optional
        The kind's options, validated by its statistic (e.g. ``{"alphas": [0.1, 0.9]}``);
        they may also be given as keyword arguments.

    Raises
    ------
    QueryError
        Naming the query, the field and the fix.
    """

    __slots__ = ("column", "id", "kind", "mechanism", "options", "target", "weight")

    id: str
    kind: QueryKind
    column: str | None
    mechanism: MechanismName
    weight: float | None
    target: float | None
    options: Options

    def __init__(
        self,
        id: str,
        kind: QueryKind | str,
        column: str | None,
        mechanism: MechanismName | str | None,
        weight: float | None = None,
        target: float | None = None,
        options: Mapping[str, Any] | None = None,
        **more: Any,
    ) -> None:
        if not isinstance(id, str) or not id.strip():
            raise QueryError("every query needs a non-empty string 'id'.")
        check_name(id, "query id", error=QueryError)
        where = f"query {id!r}"
        if ":" in id:
            # a query's answers and ledger spends are named "<id>:<part>" (a mean's "m:sum"), so
            # an id with a colon could name another query's part
            raise QueryError(f"{where}: an id may not hold ':' (the planner names a query's parts "
                             "'<id>:<part>', e.g. 'm:sum' for the sum of a mean 'm'); use '_' or '-' instead.")
        try:
            k = QueryKind(kind)
        except ValueError as exc:
            raise QueryError(f"{where}: kind must be one of {[q.value for q in QueryKind]}; got {kind!r}.") from exc
        stat = kind_of(k)
        try:
            mech = stat.default_mechanism if mechanism is None else MechanismName(mechanism)
        except ValueError as exc:
            valid = ", ".join(m.value for m in stat.mechanism_names)
            raise QueryError(f"{where}: unknown mechanism {mechanism!r}; valid for {k.value}: {valid}.") from exc
        stat.check_mechanism(mech, where)
        if column is not None and (not isinstance(column, str) or not column):
            raise QueryError(f"{where}: 'column' must be a column name.")
        if column is None and None not in stat.column_kinds:
            raise QueryError(f"{where}: a {k.value} query needs a 'column' ({stat.column_hint}).")
        w = _opt_float(weight, "weight", where)
        t = _opt_float(target, "target", where)
        if w is not None and t is not None:
            raise QueryError(f"{where}: give either a 'weight' or a 'target', not both.")
        raw = {**(dict(options) if options is not None else {}), **{a: b for a, b in more.items() if b is not None}}
        opts = Options(stat.parse_options(raw, where))
        for name, value in (("id", id), ("kind", k), ("column", column), ("mechanism", mech),
                            ("weight", w), ("target", t), ("options", opts)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Query is immutable; use Query.replace to change {name!r}.")

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state: dict[str, Any]) -> None:  # pickling (Streamlit's caches)
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def _key(self) -> tuple[Any, ...]:
        return (self.id, self.kind, self.column, self.mechanism, self.weight, self.target, self.options)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Query) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Query({self.id!r}, {self.kind.value!r}, {self.column!r}, {self.mechanism.value!r}"
                f"{', ' + repr(dict(self.options)) if self.options else ''})")

    def replace(self, **changes: Any) -> Query:
        """A copy with some fields changed (options merged; a None option removes it)."""
        opts = dict(self.options)
        for k, v in dict(changes.pop("options", {}) or {}).items():
            if v is None:
                opts.pop(k, None)
            else:
                opts[k] = v
        fields = {"id": self.id, "kind": self.kind, "column": self.column, "mechanism": self.mechanism,
                  "weight": self.weight, "target": self.target} | changes
        return Query(options=opts, **fields)

    # ------------------------------------------------------------------ options
    def option(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)

    @property
    def predicate(self) -> Predicate | None:
        p = self.options.get("predicate")
        return p if isinstance(p, Predicate) else None

    @property
    def mode(self) -> MeanMode | None:
        m = self.options.get("mode")
        return MeanMode(m) if m is not None else None

    @property
    def alphas(self) -> tuple[float, ...] | None:
        if self.kind is QueryKind.MEDIAN:
            return (0.5,)
        a = self.options.get("alphas")
        return tuple(a) if a is not None else None

    @property
    def candidates(self) -> int | None:
        return self.options.get("candidates")

    @property
    def step(self) -> float | None:
        return self.options.get("step")

    @property
    def bin_edges(self) -> tuple[float, ...] | None:
        e = self.options.get("bin_edges")
        return tuple(e) if e is not None else None

    @property
    def bins(self) -> int | None:
        return self.options.get("bins")

    @property
    def by(self) -> tuple[str, ...]:
        return tuple(self.options.get("by", ()))

    # ------------------------------------------------------------------ schema checks
    @property
    def where(self) -> str:
        return f"query {self.id!r}"

    def validate(self, schema: Schema) -> None:
        """Check the query against the schema; :class:`QueryError` naming the fix if not valid."""
        kind_of(self.kind).check(self, schema)

    def parts(self, schema: Schema) -> tuple[QueryPart, ...]:
        """Separately released parts, each with its sensitivity under ``schema``.

        Examples
        --------
        >>> from planner.data.schema import Column, ColumnKind, MissingRule, Schema
        >>> s = Schema((Column("income", ColumnKind.NUMERIC, MissingRule(), 0, 1000),))
        >>> q = Query("m", QueryKind.MEAN, "income", MechanismName.LAPLACE)
        >>> [(p.name, p.sensitivity.l1) for p in q.parts(s)]  # the centred sum Σ(x − 500): 500
        [('sum', 500.0), ('count', 1.0)]
        """
        self.validate(schema)
        return kind_of(self.kind).parts(self, schema)

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
        for k, v in self.options.items():
            if isinstance(v, Predicate):
                out[k] = v.to_dict()
            elif isinstance(v, tuple):
                out[k] = list(v)
            else:
                out[k] = v
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Query:
        """Read the JSON form; :class:`QueryError` naming the query if malformed.

        Only ``kind`` is required: without an ``id`` the query is named after its kind and
        column (:func:`default_ids`), without a ``mechanism`` it uses its statistic's best
        default.

        Examples
        --------
        >>> q = Query.from_dict({"kind": "synthetic_data", "options": {"columns": ["age", "sex"], "rows": 100}})
        >>> q.id, q.mechanism.value
        ('synthetic_data', 'mst_or_aim')
        """
        if not isinstance(data, Mapping):
            raise QueryError("every query must be an object with at least its 'kind'.")
        if "id" not in data:
            data = default_ids([data])[0]
        qid = data.get("id")
        where = f"query {qid!r}"
        if "kind" not in data:
            raise QueryError(f"{where}: missing 'kind'.")
        common = {"id", "kind", "column", "mechanism", "weight", "target", "options"}
        options = {k: v for k, v in data.items() if k not in common}
        nested = data.get("options")  # the Queries table's form: {"options": {"alphas": [...]}}
        if nested is not None:
            if not isinstance(nested, Mapping):
                raise QueryError(f"{where}: 'options' must be an object of option names and values, "
                                 'e.g. {"alphas": [0.1, 0.9]}.')
            both = sorted(set(nested) & set(options))
            if both:
                raise QueryError(f"{where}: {both} given both inside 'options' and beside it; keep one.")
            options = {**options, **nested}
        return cls(
            id=qid,
            kind=data["kind"],
            column=data.get("column"),
            mechanism=data.get("mechanism"),
            weight=data.get("weight"),
            target=data.get("target"),
            options=options,
        )


def default_ids(items: Sequence[Any]) -> list[Any]:
    """The queries with an ``id`` given to those that name none: their kind, and column if
    any (``"mean_income"``), then ``_2``, ``_3``, … where that is taken. Entries that are not
    objects, or that name their id, are returned as they are.

    Examples
    --------
    >>> [d["id"] for d in default_ids([{"kind": "count"}, {"kind": "count"}, {"id": "count_2", "kind": "sum"}])]
    ['count', 'count_3', 'count_2']
    """
    taken = {d["id"] for d in items if isinstance(d, Mapping) and isinstance(d.get("id"), str)}
    out: list[Any] = []
    for d in items:
        if not isinstance(d, Mapping) or "id" in d:
            out.append(d)
            continue
        kind, col = d.get("kind"), d.get("column")
        base = "_".join(str(x) for x in (kind, col) if isinstance(x, str) and x) or "query"
        name, i = base, 1
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        taken.add(name)
        out.append({**d, "id": name})
    return out


def queries_from_list(items: Sequence[Any], schema: Schema | None = None) -> tuple[Query, ...]:
    """Read a JSON list of queries; ids must be unique; validated against ``schema`` if given.
    Queries without an ``id`` get one (:func:`default_ids`)."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise QueryError("'queries' must be a list of query objects.")
    qs = tuple(Query.from_dict(d) for d in default_ids(items))
    ids = [q.id for q in qs]
    dups = sorted({i for i in ids if ids.count(i) > 1})
    if dups:
        raise QueryError(f"query ids {dups} are used more than once; give each query its own id.")
    if schema is not None:
        for q in qs:
            q.validate(schema)
    return qs


def __getattr__(name: str) -> Any:
    """``VALID_MECHANISMS`` and ``VALID_COLUMN_KINDS``, read from the registry on first use."""
    if name == "VALID_MECHANISMS":
        return {k: frozenset(s.mechanism_names) for k, s in _KINDS.items()}
    if name == "VALID_COLUMN_KINDS":
        return {k: s.column_kinds for k, s in _KINDS.items()}
    raise AttributeError(name)


__all__ = [
    "DEFAULT_CANDIDATES",
    "OTHER_LABEL",
    "ColumnKind",
    "Kind",
    "MeanMode",
    "Options",
    "Predicate",
    "PredicateOp",
    "PredicateValue",
    "Query",
    "QueryKind",
    "QueryPart",
    "SchemaError",
    "bin_labels",
    "default_ids",
    "queries_from_list",
]
