"""One declared column: its kind, its missing-value rule, its public bounds or categories.

A :class:`Column` says its kind (numeric, categorical, boolean, identifier, key), the public
bounds [L, U] of a numeric column, the public category list of a categorical one, and an
explicit missing-value rule; a :class:`BoundsSource` records that a numeric column's bounds
came from a differentially private query. Everything here is declared by the data owner:
nothing in this module reads bounds or categories from rows.

The missing-value rule is data (:class:`MissingRule`), not engine behaviour, so that every
backend (pandas today, DuckDB and Spark later) applies the *same* rule: a value is
*missing* if it is NULL, NaN, ±inf or an empty (whitespace-only) string, and *invalid* if it
cannot be read as the declared kind (text in a numeric column, a token that is not a
boolean). Missing and invalid values are both handled by the rule: ``drop`` removes the
row from every query on that column, ``replace`` substitutes the declared public value.
Backends count both separately so that nothing is dropped silently.

References
----------
docs/mathematics.md §2 (sensitivities from the declared bounds and categories).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from planner.core.errors import SchemaError
from planner.core.names import check_name

#: Label of the optional catch-all bin of a categorical column.
OTHER_LABEL: Final[str] = "(other)"

#: Case-insensitive tokens read as True / False in a boolean column (after stripping).
TRUE_TOKENS: Final[frozenset[str]] = frozenset({"true", "t", "yes", "y", "1", "1.0"})
FALSE_TOKENS: Final[frozenset[str]] = frozenset({"false", "f", "no", "n", "0", "0.0"})

_MAX_CATEGORIES: Final[int] = 100_000

Scalar = float | str | bool


class ColumnKind(StrEnum):
    """What a column holds."""

    NUMERIC = "numeric"
    CATEGORICAL = "categorical"
    BOOLEAN = "boolean"
    IDENTIFIER = "identifier"
    #: Text keys whose values are NOT declared (a ZIP code, a product id): released only
    #: by partition selection (:mod:`planner.planning.statistics.keys`), which shows a key only when
    #: its noisy count crosses a threshold.
    KEY = "key"


class MissingAction(StrEnum):
    """What a backend does with a missing or invalid value."""

    DROP = "drop"
    REPLACE = "replace"


@dataclass(frozen=True, slots=True)
class MissingRule:
    """How missing (NULL, NaN, ±inf, empty string) and invalid values are handled.

    Parameters
    ----------
    action : MissingAction
        ``drop``: the row is left out of every query on this column (and counted).
        ``replace``: the value becomes ``value``, a declared public constant.
    value : float, str, bool or None
        The replacement; required for ``replace`` and forbidden for ``drop``. It is checked
        against the column (finite number, declared category, boolean) by :class:`Column`.

    Examples
    --------
    >>> MissingRule(MissingAction.REPLACE, 0.0).to_dict()
    {'action': 'replace', 'value': 0.0}
    """

    action: MissingAction = MissingAction.DROP
    value: Scalar | None = None

    def __post_init__(self) -> None:
        try:
            action = MissingAction(self.action)
        except ValueError as exc:
            raise SchemaError(
                f"missing-value action must be one of {[a.value for a in MissingAction]}; "
                f"got {self.action!r}. Use 'drop' or 'replace'."
            ) from exc
        object.__setattr__(self, "action", action)
        if action is MissingAction.DROP and self.value is not None:
            raise SchemaError(
                "missing-value action 'drop' takes no replacement value; remove 'value' "
                "or use action 'replace'."
            )
        if action is MissingAction.REPLACE and self.value is None:
            raise SchemaError(
                "missing-value action 'replace' needs a public replacement 'value'; "
                "declare one, or use action 'drop'."
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        out: dict[str, Any] = {"action": self.action.value}
        if self.action is MissingAction.REPLACE:
            out["value"] = self.value
        return out

    @classmethod
    def from_dict(cls, data: Any, column: str = "?") -> MissingRule:
        """Read the JSON form; raise :class:`SchemaError` naming ``column`` if malformed."""
        if not isinstance(data, Mapping):
            raise SchemaError(
                f"column {column!r}: 'missing' must be an object such as "
                '{"action": "drop"} or {"action": "replace", "value": 0}.'
            )
        unknown = set(data) - {"action", "value"}
        if unknown:
            raise SchemaError(
                f"column {column!r}: unknown key(s) {sorted(unknown)} in 'missing'; "
                "allowed keys are 'action' and 'value'."
            )
        if "action" not in data:
            raise SchemaError(f"column {column!r}: 'missing' needs an 'action' ('drop' or 'replace').")
        value = data.get("value")
        if value is not None and not isinstance(value, (int, float, str, bool)):
            raise SchemaError(
                f"column {column!r}: the missing-value replacement must be a number, a "
                "string or a boolean."
            )
        if isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        try:
            return cls(data["action"], value)
        except SchemaError as exc:
            raise SchemaError(f"column {column!r}: {exc}") from exc


def _finite_float(value: Any, what: str) -> float:
    """A declared number: a real number (not text, not a boolean), finite. (A schema *file*
    also keeps every number within ±2**53, :data:`planner.core.strict_json.MAX_MAGNITUDE`; a
    schema made in code may declare larger bounds, and the backends sum them exactly.)"""
    if isinstance(value, bool):
        raise SchemaError(f"{what} must be a finite number; got a boolean. Declare a number.")
    if not isinstance(value, numbers.Real):
        # text such as "1_000" or " 5 " would pass float(), around the strict reader's rules
        raise SchemaError(f"{what} must be a finite number; got {type(value).__name__} {str(value)[:40]!r}. "
                          "Write a number, without quotes.")
    v = float(value)
    if not math.isfinite(v):
        raise SchemaError(f"{what} must be finite; got {v}. Declare a finite public bound.")
    return v


class BoundsFor(StrEnum):
    """The statistic a column's DP-suggested bounds were tuned for (the suggestion's purpose,
    :mod:`planner.planning.bounds_purpose`)."""

    MEAN = "mean"
    SUM = "sum"


class BoundsSourceKind(StrEnum):
    """Where a numeric column's declared bounds came from, when not typed by the owner."""

    DP_QUANTILES = "dp_quantiles"  # released DP quantiles over a public coarse grid


@dataclass(frozen=True, slots=True)
class BoundsSource:
    """A record that a numeric column's bounds came from a differentially private query.

    Written by the bounds suggestion (:mod:`planner.planning.bounds_suggest`): the bounds
    are the DP quantiles at ``levels`` released as ledger release ``release_id`` for
    ``epsilon``, over the public coarse range ``coarse`` the candidates were drawn from.
    Every field is public (the release is recorded in the ledger).

    Parameters
    ----------
    kind : BoundsSourceKind
        ``dp_quantiles`` (the only kind).
    release_id : int
        The ledger's release id (≥ 1).
    epsilon : float
        The ε the release spent (> 0, finite).
    levels : tuple of float
        The two quantile levels (0 ≤ low < high ≤ 1; a level 0 or 1 means that bound is the
        coarse range's own end, released by no query).
    coarse : tuple of float or None
        The public coarse range [A, B] the candidate grid covered, when recorded.
    rank_error_95 : float or None
        The suggestion's predicted 95% rank error (a fraction of n, in [0, 1]), when recorded.
    tuned_for : BoundsFor or None
        When the levels were tuned to a purpose: the statistic (mean or sum) they were tuned
        for; ``None`` for fixed levels.
    tuned_epsilon : float or None
        With ``tuned_for``: the ε that statistic was to spend (> 0, finite).
    """

    kind: BoundsSourceKind
    release_id: int
    epsilon: float
    levels: tuple[float, float]
    coarse: tuple[float, float] | None = None
    rank_error_95: float | None = None
    tuned_for: BoundsFor | None = None
    tuned_epsilon: float | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", BoundsSourceKind(self.kind))
        except ValueError as exc:
            raise SchemaError(f"bounds_source.kind must be one of {[k.value for k in BoundsSourceKind]}; "
                              f"got {self.kind!r}.") from exc
        rid = self.release_id
        if isinstance(rid, bool) or not isinstance(rid, int) or rid < 1:
            raise SchemaError(f"bounds_source.release_id must be a whole number ≥ 1 (the ledger's release id); "
                              f"got {rid!r}.")
        eps = _finite_float(self.epsilon, "bounds_source.epsilon")
        if not eps > 0:
            raise SchemaError(f"bounds_source.epsilon must be > 0 (the ε the suggestion spent); got {eps:g}.")
        object.__setattr__(self, "epsilon", eps)
        lv = self.levels
        if isinstance(lv, (str, bytes)) or not isinstance(lv, Sequence) or len(lv) != 2:
            raise SchemaError("bounds_source.levels must be two quantile levels [low, high], e.g. [0.01, 0.99].")
        lo, hi = (_finite_float(v, "bounds_source.levels") for v in lv)
        if not (0 <= lo < hi <= 1 and (lo > 0 or hi < 1)):
            raise SchemaError(f"bounds_source.levels must satisfy 0 ≤ low < high ≤ 1 (0 or 1: the coarse range's "
                              f"own end), one of them inside (0, 1); got [{lo:g}, {hi:g}].")
        object.__setattr__(self, "levels", (lo, hi))
        if self.coarse is not None:
            cr = self.coarse
            if isinstance(cr, (str, bytes)) or not isinstance(cr, Sequence) or len(cr) != 2:
                raise SchemaError("bounds_source.coarse must be the public range [A, B] the grid covered.")
            a, b = (_finite_float(v, "bounds_source.coarse") for v in cr)
            if not a < b:
                raise SchemaError(f"bounds_source.coarse must have A < B; got [{a:g}, {b:g}].")
            object.__setattr__(self, "coarse", (a, b))
        if self.rank_error_95 is not None:
            r = _finite_float(self.rank_error_95, "bounds_source.rank_error_95")
            if not 0 <= r <= 1:
                raise SchemaError(f"bounds_source.rank_error_95 must be a fraction of n in [0, 1]; got {r:g}.")
            object.__setattr__(self, "rank_error_95", r)
        if (self.tuned_for is None) != (self.tuned_epsilon is None):
            raise SchemaError("bounds_source.purpose needs both 'statistic' and 'epsilon' (the statistic the "
                              "levels were tuned for and the ε it was to spend).")
        if self.tuned_for is not None:
            try:
                object.__setattr__(self, "tuned_for", BoundsFor(self.tuned_for))
            except ValueError as exc:
                raise SchemaError(f"bounds_source.purpose.statistic must be one of {[k.value for k in BoundsFor]}; "
                                  f"got {self.tuned_for!r}.") from exc
            te = _finite_float(self.tuned_epsilon, "bounds_source.purpose.epsilon")
            if not te > 0:
                raise SchemaError(f"bounds_source.purpose.epsilon must be > 0 (the ε the {self.tuned_for.value} "
                                  f"was to spend); got {te:g}.")
            object.__setattr__(self, "tuned_epsilon", te)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "release_id": self.release_id, "epsilon": self.epsilon,
                               "levels": list(self.levels)}
        if self.coarse is not None:
            out["coarse"] = list(self.coarse)
        if self.rank_error_95 is not None:
            out["rank_error_95"] = self.rank_error_95
        if self.tuned_for is not None:
            out["purpose"] = {"statistic": self.tuned_for.value, "epsilon": self.tuned_epsilon}
        return out

    @classmethod
    def from_dict(cls, data: Any, column: str = "?") -> BoundsSource:
        """Read the JSON form strictly; :class:`SchemaError` naming the column and the field."""
        where = f"column {column!r}: bounds_source"
        if not isinstance(data, Mapping):
            raise SchemaError(f"{where} must be an object with 'kind', 'release_id', 'epsilon' and 'levels'.")
        allowed = {"kind", "release_id", "epsilon", "levels", "coarse", "rank_error_95", "purpose"}
        unknown = set(data) - allowed
        missing = {"kind", "release_id", "epsilon", "levels"} - set(data)
        if unknown or missing:
            raise SchemaError(f"{where}: {'unknown key(s) ' + str(sorted(unknown)) if unknown else ''}"
                              f"{'; ' if unknown and missing else ''}"
                              f"{'missing key(s) ' + str(sorted(missing)) if missing else ''}; "
                              f"allowed keys are {sorted(allowed)}.")
        purpose = data.get("purpose")
        if purpose is not None and (not isinstance(purpose, Mapping) or set(purpose) != {"statistic", "epsilon"}):
            raise SchemaError(f"{where}.purpose must be an object with exactly 'statistic' (mean or sum) and "
                              f"'epsilon', e.g. {{\"statistic\": \"mean\", \"epsilon\": 1.0}}.")
        try:
            return cls(data["kind"], data["release_id"], data["epsilon"], data["levels"], data.get("coarse"),
                       data.get("rank_error_95"), None if purpose is None else purpose["statistic"],
                       None if purpose is None else purpose["epsilon"])
        except SchemaError as exc:
            raise SchemaError(f"column {column!r}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Column:
    """One declared column.

    Parameters
    ----------
    name : str
        The column's name in the file (non-empty).
    kind : ColumnKind
        numeric, categorical, boolean or identifier.
    missing : MissingRule
        The explicit missing-value rule. Identifier columns must use ``drop`` (an
        identifier column holding nulls is rejected by the loader).
    lower, upper : float or None
        Public bounds of a numeric column: finite, ``lower < upper``. Required for numeric
        columns and forbidden for the others. Values are clipped into [lower, upper].
    categories : tuple of str or None
        Public category list of a categorical column: non-empty, no duplicates, no empty
        label. Required for categorical columns and forbidden for the others.
    other_bin : bool
        Categorical only: undeclared values go to an extra bin labelled
        :data:`OTHER_LABEL` instead of to no bin.
    bounds_source : BoundsSource or None
        Numeric only: the DP query the bounds came from (:class:`BoundsSource`); written to
        JSON only when set, so a column without it keeps its JSON and the schema its hash.
    integer : bool
        Numeric only: the column holds whole numbers (an age in years, a number of children),
        a public fact the owner declares like the bounds. What is drawn from the column's bins
        is then whole numbers too (a synthetic table's values, its bins' labels "18–24"), and
        a synthetic table cuts it between whole numbers
        (:func:`planner.data.requests.integer_edges`). Written to JSON
        (``"integer": true``) only when set, so every other column keeps its JSON and the
        schema its hash. Released values are never rounded by it: a mean stays a mean.
    """

    name: str
    kind: ColumnKind
    missing: MissingRule = field(default_factory=MissingRule)
    lower: float | None = None
    upper: float | None = None
    categories: tuple[str, ...] | None = None
    other_bin: bool = False
    bounds_source: BoundsSource | None = None
    integer: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SchemaError("every column needs a non-empty name; give the column a name.")
        name = self.name
        try:
            kind = ColumnKind(self.kind)
        except ValueError as exc:
            raise SchemaError(
                f"column {name!r}: kind must be one of {[k.value for k in ColumnKind]}; "
                f"got {self.kind!r}."
            ) from exc
        object.__setattr__(self, "kind", kind)
        if not isinstance(self.missing, MissingRule):
            raise SchemaError(f"column {name!r}: 'missing' must be a MissingRule.")
        if self.bounds_source is not None:
            if kind is not ColumnKind.NUMERIC:
                raise SchemaError(f"column {name!r}: 'bounds_source' applies to numeric columns only, this one "
                                  f"is {kind.value}; remove it.")
            if not isinstance(self.bounds_source, BoundsSource):
                raise SchemaError(f"column {name!r}: 'bounds_source' must be a BoundsSource.")
        if not isinstance(self.integer, bool):
            raise SchemaError(f"column {name!r}: 'integer' must be true or false (whether the column holds whole "
                              f"numbers); got {self.integer!r}.")
        if self.integer and kind is not ColumnKind.NUMERIC:
            raise SchemaError(f"column {name!r}: 'integer' (whole numbers) applies to numeric columns only, this one "
                              f"is {kind.value}; remove it.")
        if kind is ColumnKind.NUMERIC:
            self._check_numeric()
        else:
            if self.lower is not None or self.upper is not None:
                raise SchemaError(
                    f"column {name!r}: bounds apply to numeric columns only, this one is "
                    f"{kind.value}; remove 'lower'/'upper' or declare the column numeric."
                )
        if kind is ColumnKind.CATEGORICAL:
            self._check_categorical()
        else:
            if self.categories is not None:
                raise SchemaError(
                    f"column {name!r}: a category list applies to categorical columns only, "
                    f"this one is {kind.value}; remove 'categories' or declare it categorical."
                )
            if self.other_bin:
                raise SchemaError(
                    f"column {name!r}: 'other_bin' applies to categorical columns only."
                )
        self._check_missing(kind)

    def _check_numeric(self) -> None:
        name = self.name
        if self.lower is None or self.upper is None:
            raise SchemaError(
                f"column {name!r}: a numeric column needs public bounds 'lower' and 'upper'; "
                "declare the range every value is known to lie in (e.g. age 0 to 120). "
                "Bounds are never read from the data."
            )
        lo = _finite_float(self.lower, f"column {name!r}: lower bound")
        hi = _finite_float(self.upper, f"column {name!r}: upper bound")
        if not lo < hi:
            fix = "swap them" if lo > hi else "widen the range"
            raise SchemaError(
                f"column {name!r}: lower bound {lo:g} must be < upper bound {hi:g}; {fix}."
            )
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)
        if self.integer and math.ceil(lo) > math.floor(hi):
            raise SchemaError(f"column {name!r}: no whole number lies in its bounds [{lo:g}, {hi:g}], yet it is "
                              "declared to hold whole numbers; widen the bounds or untick 'whole numbers'.")

    def _check_categorical(self) -> None:
        name = self.name
        cats = self.categories
        if cats is None or isinstance(cats, str) or len(cats) == 0:
            raise SchemaError(
                f"column {name!r}: a categorical column needs a non-empty public category "
                "list; declare every possible value (categories are never read from the data)."
            )
        if len(cats) > _MAX_CATEGORIES:
            raise SchemaError(
                f"column {name!r}: {len(cats)} categories is more than the limit "
                f"{_MAX_CATEGORIES}; group rare values or use an 'other' bin."
            )
        out: list[str] = []
        for i, c in enumerate(cats):
            if not isinstance(c, str):
                raise SchemaError(
                    f"column {name!r}: category #{i + 1} must be a string; write numbers "
                    'as strings, e.g. "1".'
                )
            s = c.strip()
            if not s:
                raise SchemaError(
                    f"column {name!r}: category #{i + 1} is empty; empty cells are missing "
                    "values, handled by the missing-value rule. Remove it."
                )
            out.append(s)
        seen: set[str] = set()
        dups = sorted({c for c in out if c in seen or seen.add(c)})  # type: ignore[func-returns-value]
        if dups:
            raise SchemaError(
                f"column {name!r}: duplicated categories {dups}; list each category once."
            )
        if self.other_bin and OTHER_LABEL in seen:
            raise SchemaError(
                f"column {name!r}: the category {OTHER_LABEL!r} is reserved for the 'other' "
                "bin; rename it or set other_bin to false."
            )
        object.__setattr__(self, "categories", tuple(out))
        object.__setattr__(self, "other_bin", bool(self.other_bin))

    def _check_missing(self, kind: ColumnKind) -> None:
        rule = self.missing
        name = self.name
        if rule.action is MissingAction.DROP:
            return
        v = rule.value
        if kind is ColumnKind.IDENTIFIER:
            raise SchemaError(
                f"column {name!r}: an identifier column cannot replace missing values "
                "(rows of one person would merge); use action 'drop' and fix the file."
            )
        if kind is ColumnKind.KEY:
            raise SchemaError(
                f"column {name!r}: a key column cannot replace missing values (the replacement "
                "would become a key of its own); use action 'drop'."
            )
        if kind is ColumnKind.NUMERIC:
            fv = _finite_float(v, f"column {name!r}: the missing-value replacement")
            object.__setattr__(self, "missing", MissingRule(MissingAction.REPLACE, fv))
        elif kind is ColumnKind.CATEGORICAL:
            assert self.categories is not None
            if not isinstance(v, str) or v.strip() not in self.categories:
                raise SchemaError(
                    f"column {name!r}: the missing-value replacement must be one of the "
                    "declared categories; add it to the list or pick a declared one."
                )
            object.__setattr__(self, "missing", MissingRule(MissingAction.REPLACE, v.strip()))
        elif kind is ColumnKind.BOOLEAN and not isinstance(v, bool):
            raise SchemaError(
                f"column {name!r}: the missing-value replacement of a boolean column must "
                "be true or false."
            )

    # ------------------------------------------------------------------ helpers
    @property
    def bounds(self) -> tuple[float, float]:
        """(L, U) of a numeric column; :class:`SchemaError` otherwise."""
        if self.kind is not ColumnKind.NUMERIC or self.lower is None or self.upper is None:
            raise SchemaError(f"column {self.name!r} is {self.kind.value}, it has no bounds.")
        return (self.lower, self.upper)

    @property
    def labels(self) -> tuple[str, ...]:
        """Bin labels of a categorical (categories, then the other bin) or boolean column."""
        if self.kind is ColumnKind.CATEGORICAL and self.categories is not None:
            return self.categories + ((OTHER_LABEL,) if self.other_bin else ())
        if self.kind is ColumnKind.BOOLEAN:
            return ("false", "true")
        raise SchemaError(f"column {self.name!r} is {self.kind.value}, it has no categories.")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the inverse of :meth:`from_dict`)."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind.value}
        if self.kind is ColumnKind.NUMERIC:
            out["lower"] = self.lower
            out["upper"] = self.upper
            if self.bounds_source is not None:  # only when set: the hash of other schemas is unchanged
                out["bounds_source"] = self.bounds_source.to_dict()
            if self.integer:  # only when set, likewise
                out["integer"] = True
        if self.kind is ColumnKind.CATEGORICAL:
            out["categories"] = list(self.categories or ())
            out["other_bin"] = self.other_bin
        out["missing"] = self.missing.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Column:
        """Read the JSON form; :class:`SchemaError` with the column's name if malformed."""
        if not isinstance(data, Mapping):
            raise SchemaError("every entry of 'columns' must be an object with 'name' and 'kind'.")
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise SchemaError("every column needs a non-empty string 'name'.")
        check_name(name, "column name", error=SchemaError, layout=True)
        allowed = {"name", "kind", "lower", "upper", "categories", "other_bin", "missing", "bounds_source", "integer"}
        unknown = set(data) - allowed
        if unknown:
            raise SchemaError(
                f"column {name!r}: unknown key(s) {sorted(unknown)}; allowed keys are "
                f"{sorted(allowed)}."
            )
        if "kind" not in data:
            raise SchemaError(
                f"column {name!r}: missing 'kind'; use one of {[k.value for k in ColumnKind]}."
            )
        kind = data["kind"]
        if kind != ColumnKind.IDENTIFIER and "missing" not in data:
            raise SchemaError(
                f"column {name!r}: every column needs an explicit missing-value rule, e.g. "
                '"missing": {"action": "drop"}.'
            )
        missing = MissingRule.from_dict(data.get("missing", {"action": "drop"}), name)
        cats = data.get("categories")
        if cats is not None and (isinstance(cats, str) or not isinstance(cats, Sequence)):
            raise SchemaError(f"column {name!r}: 'categories' must be a list of strings.")
        for c in cats or ():
            if isinstance(c, str):
                check_name(c, f"column {name!r}: category label", error=SchemaError, layout=True)
        other = data.get("other_bin", False)
        if not isinstance(other, bool):
            raise SchemaError(f"column {name!r}: 'other_bin' must be true or false.")
        whole = data.get("integer", False)
        if not isinstance(whole, bool):
            raise SchemaError(f"column {name!r}: 'integer' must be true or false (whether the column holds whole "
                              "numbers).")
        return cls(
            name=name,
            kind=kind,
            missing=missing,
            lower=data.get("lower"),
            upper=data.get("upper"),
            categories=tuple(cats) if cats is not None else None,
            other_bin=other,
            bounds_source=None if data.get("bounds_source") is None
            else BoundsSource.from_dict(data["bounds_source"], name),
            integer=whole,
        )
