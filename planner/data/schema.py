"""The declared schema: what is public about a sensitive table.

A :class:`Schema` says, per column, its kind (numeric, categorical, boolean, identifier),
the public bounds [L, U] of a numeric column, the public category list of a categorical
one, and an explicit missing-value rule; and, for the whole table, the neighbouring
relation, the privacy unit and an optional public row count. Everything here is declared
by the data owner: no function in this module reads bounds or categories from rows
(:func:`suggest_kinds` looks at the data but only ever returns *kinds*).

The missing-value rule is data (:class:`MissingRule`), not engine behaviour, so that every
backend (pandas today, DuckDB and Spark later) applies the *same* rule: a value is
*missing* if it is NULL, NaN, ±inf or an empty (whitespace-only) string, and *invalid* if it
cannot be read as the declared kind (text in a numeric column, a token that is not a
boolean). Missing and invalid values are both handled by the rule: ``drop`` removes the
row from every query on that column, ``replace`` substitutes the declared public value.
Backends count both separately so that nothing is dropped silently.

A schema may also declare that the table is a *secret* random sample of a larger
population drawn at a public rate (``"sampling": {"rate": q, "scheme": "poisson"}``,
:class:`planner.privacy.sampling.Sampling`): the lifetime budget is then a budget for the
population, and the planner and the ledger account for the amplification by sampling
(Balle, Barthe & Gaboardi 2018). The scheme's neighbouring relation must be the schema's:
Poisson sampling under add/remove, sampling without replacement under substitution.

References
----------
docs/mathematics.md §1–2 (neighbouring relation, privacy unit, sensitivities from the declared schema).
B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling: Tight Analyses via
Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647 (secret samples).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from planner.core.errors import DataError, SchemaError
from planner.core.names import check_name

if TYPE_CHECKING:  # imported by suggest_kinds only: the CLI starts without pandas
    import pandas as pd

    from planner.privacy.sampling import (
        Sampling,  # imported when a schema declares sampling (numpy)
    )

#: Version of the schema JSON format written by :meth:`Schema.to_dict`.
SCHEMA_VERSION: Final[int] = 1

#: Label of the optional catch-all bin of a categorical column.
OTHER_LABEL: Final[str] = "(other)"

#: Case-insensitive tokens read as True / False in a boolean column (after stripping).
TRUE_TOKENS: Final[frozenset[str]] = frozenset({"true", "t", "yes", "y", "1", "1.0"})
FALSE_TOKENS: Final[frozenset[str]] = frozenset({"false", "f", "no", "n", "0", "0.0"})

_MAX_CATEGORIES: Final[int] = 100_000
_MAX_ROWS_PER_UNIT: Final[int] = 1_000_000

Scalar = float | str | bool


class SchemaProblems(SchemaError):
    """Every problem of a schema declaration, reported at once.

    ``problems`` holds one message per problem, each naming the column or field, the
    constraint and the fix. With one problem the message is that problem's message.

    Examples
    --------
    >>> err = SchemaProblems(["column 'a': fix A.", "column 'b': fix B."])
    >>> err.problems
    ("column 'a': fix A.", "column 'b': fix B.")
    >>> str(err)
    "2 problems in the schema: (1) column 'a': fix A. (2) column 'b': fix B."
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        if len(self.problems) == 1:
            text = self.problems[0]
        else:
            text = f"{len(self.problems)} problems in the schema: " + " ".join(
                f"({i}) {p}" for i, p in enumerate(self.problems, start=1)
            )
        super().__init__(text)


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


class Relation(StrEnum):
    """The neighbouring relation (docs/mathematics.md §1)."""

    ADD_REMOVE = "add_remove"
    SUBSTITUTE = "substitute"


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


def format_text_list(items: Sequence[str]) -> str:
    """Items as one editable line, ``a, b, "c, d"``: separated by commas, an item that holds
    a comma or begins with a double quote written in double quotes, a quote inside doubled
    (the quoting of a CSV file). :func:`parse_text_list` reads it back to the same items.

    >>> print(format_text_list(['plain', 'Smith, John', 'He said "hi"', 'say "a", ok']))
    plain, "Smith, John", He said "hi", "say ""a"", ok"
    """
    def one(item: str) -> str:
        if "," in item or item.lstrip().startswith('"'):
            return '"' + item.replace('"', '""') + '"'
        return item

    return ", ".join(one(str(x)) for x in items)


def parse_text_list(text: str) -> list[str]:
    """The items of a line typed as ``a, b, "c, d"``: split at commas outside double
    quotes; an item that begins with a double quote runs to the closing one (``""`` inside
    is one quote), so it may hold commas; the spaces around each item are dropped and empty
    items skipped; a quote elsewhere in an item is kept as typed. Raises ``ValueError``
    (the message says what to fix) on an unclosed quote or text after a closing one.

    >>> parse_text_list('plain, "Smith, John", He said "hi", "say ""a"", ok", ,')
    ['plain', 'Smith, John', 'He said "hi"', 'say "a", ok']
    """
    items: list[str] = []
    i, n = 0, len(text)
    while i <= n:
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] == '"':
            start, i, buf = i, i + 1, []
            while True:
                if i >= n:
                    raise ValueError(f"the quote opened at character {start + 1} is not closed; "
                                     'close it with " (write "" for a quote inside).')
                if text[i] == '"':
                    if text[i + 1:i + 2] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            while i < n and text[i].isspace():
                i += 1
            if i < n and text[i] != ",":
                raise ValueError(f"a comma must follow the quoted item that ends at character {i}; "
                                 'write "" for a quote inside a quoted item.')
            item = "".join(buf).strip()
        else:
            end = text.find(",", i)
            end = n if end < 0 else end
            item, i = text[i:end].strip(), end
        if item:
            items.append(item)
        i += 1  # past the comma
    return items


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
    """

    kind: BoundsSourceKind
    release_id: int
    epsilon: float
    levels: tuple[float, float]
    coarse: tuple[float, float] | None = None
    rank_error_95: float | None = None

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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "release_id": self.release_id, "epsilon": self.epsilon,
                               "levels": list(self.levels)}
        if self.coarse is not None:
            out["coarse"] = list(self.coarse)
        if self.rank_error_95 is not None:
            out["rank_error_95"] = self.rank_error_95
        return out

    @classmethod
    def from_dict(cls, data: Any, column: str = "?") -> BoundsSource:
        """Read the JSON form strictly; :class:`SchemaError` naming the column and the field."""
        where = f"column {column!r}: bounds_source"
        if not isinstance(data, Mapping):
            raise SchemaError(f"{where} must be an object with 'kind', 'release_id', 'epsilon' and 'levels'.")
        allowed = {"kind", "release_id", "epsilon", "levels", "coarse", "rank_error_95"}
        unknown = set(data) - allowed
        missing = {"kind", "release_id", "epsilon", "levels"} - set(data)
        if unknown or missing:
            raise SchemaError(f"{where}: {'unknown key(s) ' + str(sorted(unknown)) if unknown else ''}"
                              f"{'; ' if unknown and missing else ''}"
                              f"{'missing key(s) ' + str(sorted(missing)) if missing else ''}; "
                              f"allowed keys are {sorted(allowed)}.")
        try:
            return cls(data["kind"], data["release_id"], data["epsilon"], data["levels"], data.get("coarse"),
                       data.get("rank_error_95"))
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
    """

    name: str
    kind: ColumnKind
    missing: MissingRule = field(default_factory=MissingRule)
    lower: float | None = None
    upper: float | None = None
    categories: tuple[str, ...] | None = None
    other_bin: bool = False
    bounds_source: BoundsSource | None = None

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
        allowed = {"name", "kind", "lower", "upper", "categories", "other_bin", "missing", "bounds_source"}
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
        )


@dataclass(frozen=True, slots=True)
class PrivacyUnit:
    """Who is protected: one row (``column=None``) or one person via an identifier column.

    Parameters
    ----------
    column : str or None
        The identifier column naming the person who owns each row.
    max_rows : int
        c, the most rows kept per person; rows beyond c are dropped deterministically
        before aggregation (salted-hash order). Must be 1 for row-level privacy.
    """

    column: str | None = None
    max_rows: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.max_rows, bool) or not isinstance(self.max_rows, int):
            raise SchemaError(
                f"privacy unit: max_rows must be a whole number ≥ 1; got {self.max_rows!r}."
            )
        if not 1 <= self.max_rows <= _MAX_ROWS_PER_UNIT:
            raise SchemaError(
                f"privacy unit: max_rows must be between 1 and {_MAX_ROWS_PER_UNIT}; got "
                f"{self.max_rows}. Pick the most rows one person may contribute."
            )
        if self.column is None and self.max_rows != 1:
            raise SchemaError(
                "privacy unit: max_rows > 1 needs an identifier column naming the person; "
                "declare 'column' or set max_rows to 1."
            )
        if self.column is not None and (not isinstance(self.column, str) or not self.column.strip()):
            raise SchemaError("privacy unit: 'column' must be a non-empty column name or null.")

    @property
    def c(self) -> int:
        """Rows per privacy unit (the sensitivity multiplier)."""
        return self.max_rows

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "max_rows": self.max_rows}


def _check_salt(salt: Any) -> str:
    if not isinstance(salt, str) or len(salt) > 256:
        raise SchemaError("'salt' must be a string of at most 256 characters.")
    return salt


_SAMPLING_EXAMPLE: Final = '{"rate": 0.01, "scheme": "poisson"}'


def sampling_from_dict(data: Any) -> Sampling:
    """Read the schema's ``sampling`` field strictly; :class:`SchemaError` naming the field,
    the constraint and the fix otherwise.

    Examples
    --------
    >>> sampling_from_dict({"rate": 0.05}).to_dict()
    {'rate': 0.05, 'scheme': 'poisson'}
    >>> sampling_from_dict({"rate": 0})
    Traceback (most recent call last):
    ...
    planner.core.errors.SchemaError: sampling.rate must be in (0, 1]; got 0.0. Declare the public fraction of the population drawn into the table (1 = the whole population).
    """
    from planner.core.errors import BudgetError
    from planner.privacy.sampling import Sampling, SamplingScheme

    if not isinstance(data, Mapping):
        raise SchemaError(
            f"'sampling' must be an object such as {_SAMPLING_EXAMPLE} (the table is a secret random "
            "sample of a population at that public rate), or left out when the table is the population."
        )
    unknown = sorted(str(k)[:40] for k in set(data) - {"rate", "scheme"})
    if unknown:
        raise SchemaError(f"'sampling' has unknown key(s) {unknown[:5]}; the keys are 'rate' and 'scheme'.")
    if "rate" not in data:
        raise SchemaError(
            "sampling.rate is missing: declare the public fraction q of the population drawn into the "
            f"table, e.g. {_SAMPLING_EXAMPLE}."
        )
    rate = data["rate"]
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        raise SchemaError(
            f"sampling.rate must be a number in (0, 1]; got a {type(rate).__name__}. Write it as a "
            "number, e.g. 0.01 for a 1% sample."
        )
    scheme = data.get("scheme", SamplingScheme.POISSON.value)
    schemes = [m.value for m in SamplingScheme]
    if not isinstance(scheme, str) or scheme not in schemes:
        shown = repr(scheme[:40]) if isinstance(scheme, str) else f"a {type(scheme).__name__}"
        raise SchemaError(
            f"sampling.scheme must be one of {schemes}; got {shown}. Use 'poisson' when each member of the "
            "population entered independently with probability q, 'without_replacement' for a fixed-size "
            "uniform draw."
        )
    try:
        return Sampling(float(rate), SamplingScheme(scheme))
    except BudgetError as exc:
        raise SchemaError(str(exc)) from None


def _sampling_problem(sampling: Any, relation: Any) -> str:
    """The message if ``sampling`` is not a valid declaration for ``relation`` (else "")."""
    from planner.core.errors import BudgetError
    from planner.privacy.sampling import Sampling

    if not isinstance(sampling, Sampling):
        return "'sampling' must be a planner.privacy.sampling.Sampling (or null when the table is the population)."
    try:
        rel = Relation(relation)
    except ValueError:
        return ""  # the relation's own problem is reported
    try:
        sampling.check_relation(rel.value)
    except BudgetError as exc:
        return str(exc)
    return ""


@dataclass(frozen=True, slots=True)
class Schema:
    """The whole declaration.

    Parameters
    ----------
    columns : tuple of Column
        Declared columns; names unique. Columns of the file that are not declared are
        ignored by every query.
    relation : Relation
        add_remove or substitute (docs/mathematics.md §1).
    unit : PrivacyUnit
        Row-level, or person-level with at most c rows per person.
    public_n : int or None
        A declared public row count (after contribution bounding), needed by
        "mean with public n" and some planner warnings.
    salt : str
        Salt of the hash that orders a person's rows for truncation to c rows.
        Determinism only: the guarantee does not depend on it staying secret, because
        truncation of one person's rows never depends on another person's rows.
    sampling : Sampling or None
        ``None``: the table is the population (nothing is amplified). Otherwise the
        declaration that the table is a *secret* random sample of a population at the
        public rate ``sampling.rate``: each privacy unit of the population (a row, or a
        person with all their rows) was drawn independently with probability q
        (``poisson``, add/remove relation) or the table is a uniform draw of q·N units
        without replacement (``without_replacement``, substitute relation; N public), and
        nobody outside learns who was drawn. Every (ε, δ) composition on the table is then
        (ln(1 + q(e^ε − 1)), qδ)-DP for the population [BBG18]_. The scheme's relation
        must equal ``relation``.

    References
    ----------
    .. [BBG18] B. Balle, G. Barthe, M. Gaboardi, "Privacy Amplification by Subsampling:
       Tight Analyses via Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647,
       Thms 9–10.
    """

    columns: tuple[Column, ...]
    relation: Relation = Relation.ADD_REMOVE
    unit: PrivacyUnit = field(default_factory=PrivacyUnit)
    public_n: int | None = None
    salt: str = ""
    sampling: Sampling | None = None

    def __post_init__(self) -> None:
        cols = tuple(self.columns)
        if not cols:
            raise SchemaError("a schema needs at least one column; declare the columns you query.")
        for c in cols:
            if not isinstance(c, Column):
                raise SchemaError("'columns' must hold Column objects.")
        if not isinstance(self.unit, PrivacyUnit):
            raise SchemaError("'unit' must be a PrivacyUnit.")
        problems: list[str] = []
        names = [c.name for c in cols]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            problems.append(f"columns {dups} are declared more than once; declare each once.")
        object.__setattr__(self, "columns", cols)
        try:
            object.__setattr__(self, "relation", Relation(self.relation))
        except ValueError:
            problems.append(
                f"relation must be one of {[r.value for r in Relation]}; got {self.relation!r}."
            )
        if self.unit.column is not None:
            if self.unit.column not in names:
                problems.append(
                    f"privacy unit column {self.unit.column!r} is not declared; add it as an "
                    "identifier column."
                )
            elif self.column(self.unit.column).kind is not ColumnKind.IDENTIFIER:
                problems.append(
                    f"privacy unit column {self.unit.column!r} must be declared with kind "
                    "'identifier'."
                )
        if self.public_n is not None:
            if isinstance(self.public_n, bool) or not isinstance(self.public_n, int) or self.public_n < 1:
                problems.append(
                    f"public_n must be a whole number ≥ 1 or null; got {self.public_n!r}. "
                    "Declare the public row count, or leave it out."
                )
        try:
            object.__setattr__(self, "salt", _check_salt(self.salt))
        except SchemaError as exc:
            problems.append(str(exc))
        if self.sampling is not None:
            problem = _sampling_problem(self.sampling, self.relation)
            if problem:
                problems.append(problem)
        if problems:
            raise SchemaProblems(problems)

    # ------------------------------------------------------------------ access
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def c(self) -> int:
        """Rows per privacy unit (1 for row-level privacy)."""
        return self.unit.c

    def column(self, name: str) -> Column:
        """The declared column ``name``; :class:`SchemaError` naming the declared ones if absent."""
        for c in self.columns:
            if c.name == name:
                return c
        raise SchemaError(
            f"column {name!r} is not declared in the schema; declared columns: "
            f"{list(self.names)}."
        )

    # ------------------------------------------------------------------ JSON
    @property
    def is_sample(self) -> bool:
        """Whether the table is declared a secret random sample of a population."""
        return self.sampling is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form with a ``version`` field (inverse of :meth:`from_dict`).

        ``sampling`` is written only when declared, so a schema without it has the same
        JSON (and :meth:`schema_hash`) as before the field existed.
        """
        out: dict[str, Any] = {
            "version": SCHEMA_VERSION,
            "relation": self.relation.value,
            "privacy_unit": self.unit.to_dict(),
            "public_n": self.public_n,
            "salt": self.salt,
            "columns": [c.to_dict() for c in self.columns],
        }
        if self.sampling is not None:
            out["sampling"] = self.sampling.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Schema:
        """Validate and read the JSON form; :class:`SchemaError` with a remedy if malformed."""
        cols, unit_d = cls._check_envelope(data)
        problems: list[str] = []
        columns: list[Column] = []
        for c in cols:
            try:
                columns.append(Column.from_dict(c))
            except SchemaError as exc:
                problems.append(str(exc))
        try:
            unit = PrivacyUnit(unit_d.get("column"), unit_d.get("max_rows", 1))
        except SchemaError as exc:
            problems.append(str(exc))
            unit = PrivacyUnit()
        sampling = None
        if data.get("sampling") is not None:
            try:
                sampling = sampling_from_dict(data["sampling"])
            except SchemaError as exc:
                problems.append(str(exc))
        if problems:
            cls._raise_problems(data, columns, unit, sampling, problems)
        return cls(
            columns=tuple(columns),
            relation=data.get("relation", Relation.ADD_REMOVE.value),
            unit=unit,
            public_n=data.get("public_n"),
            salt=data.get("salt", ""),
            sampling=sampling,
        )

    @staticmethod
    def _check_envelope(data: Any) -> tuple[Sequence[Any], Mapping[str, Any]]:
        """The checks of :meth:`from_dict` that stop at the first failure (the JSON object, its
        version, its keys, the 'columns' list, the 'privacy_unit' object); returns the raw
        columns and privacy unit."""
        if not isinstance(data, Mapping):
            raise SchemaError("a schema must be a JSON object with 'version' and 'columns'.")
        if "version" not in data:
            raise SchemaError(
                f"the schema has no 'version'; add \"version\": {SCHEMA_VERSION}."
            )
        version = data["version"]
        if isinstance(version, bool) or version != SCHEMA_VERSION:
            raise SchemaError(
                f"schema version {version!r} is not supported; this planner reads version "
                f"{SCHEMA_VERSION}. Re-save the schema with this planner."
            )
        allowed = {"version", "relation", "privacy_unit", "public_n", "salt", "columns", "sampling"}
        unknown = set(data) - allowed
        if unknown:
            raise SchemaError(
                f"unknown schema key(s) {sorted(unknown)}; allowed keys are {sorted(allowed)}."
            )
        cols = data.get("columns")
        if not isinstance(cols, Sequence) or isinstance(cols, str):
            raise SchemaError("the schema needs a 'columns' list.")
        unit_d = data.get("privacy_unit", {"column": None, "max_rows": 1})
        if not isinstance(unit_d, Mapping) or set(unit_d) - {"column", "max_rows"}:
            raise SchemaError(
                "'privacy_unit' must be an object {\"column\": <id column or null>, "
                '"max_rows": <c>}.'
            )
        return cols, unit_d

    @classmethod
    def _raise_problems(
        cls, data: Mapping[str, Any], columns: list[Column], unit: PrivacyUnit,
        sampling: Sampling | None, problems: list[str],
    ) -> NoReturn:
        """Raise :class:`SchemaProblems` with ``problems`` plus the table-level checks."""
        # the table-level checks too, on the columns that could be read (a unit column
        # whose own declaration failed is reported once, above)
        readable = {c.name for c in columns}
        if unit.column is not None and unit.column not in readable:
            unit = PrivacyUnit()
        if columns:
            try:
                cls(columns=tuple(columns), relation=data.get("relation", Relation.ADD_REMOVE.value),
                    unit=unit, public_n=data.get("public_n"), salt=data.get("salt", ""),
                    sampling=sampling)
            except SchemaProblems as exc:
                problems += [p for p in exc.problems if p not in problems]
        raise SchemaProblems(problems)

    def to_json(self, indent: int | None = 2) -> str:
        """The schema as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Schema:
        """Parse JSON text strictly (:func:`planner.core.strict_json.loads_strict`: bounded depth,
        no duplicate keys, finite numbers); :class:`SchemaError` (with the line) if it is not
        valid JSON."""
        from planner.core.strict_json import loads_strict

        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SchemaError("the schema file is not UTF-8 text; save it as UTF-8 JSON.") from exc
        return cls.from_dict(loads_strict(text, "schema", error=SchemaError))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the schema as UTF-8 JSON."""
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Schema:
        """Read a schema JSON file under the spec-file limits (a regular file, at most 4 MiB,
        UTF-8, strict JSON: :func:`planner.core.strict_json.read_json_file`); :class:`SchemaError`
        naming the file otherwise."""
        from planner.core.strict_json import read_json_file

        p = Path(path)
        data = read_json_file(p, "schema", error=SchemaError)
        try:
            return cls.from_dict(data)
        except SchemaError as exc:
            raise SchemaError(f"schema file {p.name!r}: {exc}") from exc

    def schema_hash(self) -> str:
        """sha256 hex digest of the canonical JSON (sorted keys, no whitespace).

        Equal schemas have equal hashes, whatever the order of keys in their files.
        """
        canonical = json.dumps(
            self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------- suggestions
_ID_NAME = re.compile(r"(^id$|_id$|^id_|identifier|uuid)", re.IGNORECASE)


#: Text that files use for "no value" ("?" in the UCI files, "NA", "-"): not counted
#: against a column being numeric when kinds are suggested.
_NO_VALUE_TOKENS = frozenset({"", "?", "-", ".", "na", "n/a", "nan", "null", "none"})


def _mostly_numbers(values: pd.Series) -> bool:
    """More than 95% of the values that are not a "no value" marker parse as numbers."""
    import pandas as pd

    text = values.astype(str).str.strip()
    present = values[~text.str.lower().isin(_NO_VALUE_TOKENS)]
    return len(present) > 0 and bool(pd.to_numeric(present, errors="coerce").notna().mean() > 0.95)


def suggest_kinds(df: pd.DataFrame, max_categories: int = 50) -> dict[str, ColumnKind]:
    """Suggest a kind per column, for the owner's convenience only.

    Looks at dtypes and distinct counts; returns kinds only, never bounds or categories
    (those are public declarations the owner makes).

    Parameters
    ----------
    df : pandas.DataFrame
        The loaded table.
    max_categories : int
        A text column with at most this many distinct values is suggested categorical.

    Returns
    -------
    dict of str to ColumnKind

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"person_id": [1, 2], "age": [30, 40.5], "ok": [True, False]})
    >>> {k: v.value for k, v in suggest_kinds(df).items()}
    {'person_id': 'identifier', 'age': 'numeric', 'ok': 'boolean'}
    """
    import pandas as pd

    out: dict[str, ColumnKind] = {}
    for name in df.columns:
        s = df[name]
        key = str(name)
        nonnull = s.dropna()
        if pd.api.types.is_bool_dtype(s.dtype):
            out[key] = ColumnKind.BOOLEAN
            continue
        nunique = int(nonnull.nunique())
        unique_ids = len(nonnull) > 0 and nunique == len(nonnull)
        if _ID_NAME.search(key) and (unique_ids or nunique > max_categories):
            out[key] = ColumnKind.IDENTIFIER
            continue
        if pd.api.types.is_numeric_dtype(s.dtype):
            if nunique <= 2 and set(nonnull.unique().tolist()) <= {0, 1}:
                out[key] = ColumnKind.BOOLEAN
            else:
                out[key] = ColumnKind.NUMERIC
            continue
        tokens = set(nonnull.astype(str).str.strip().str.lower().unique().tolist())
        if tokens and tokens <= (TRUE_TOKENS | FALSE_TOKENS) and len(tokens) <= 2:
            out[key] = ColumnKind.BOOLEAN
        elif _mostly_numbers(nonnull):
            out[key] = ColumnKind.NUMERIC
        elif nunique <= max_categories:
            out[key] = ColumnKind.CATEGORICAL
        elif unique_ids:
            out[key] = ColumnKind.IDENTIFIER  # every value once: one per person, most likely
        else:
            out[key] = ColumnKind.KEY  # many values, repeated (a city, a product): keys not listed
    return out


def dataset_fingerprint(path_or_bytes: str | os.PathLike[str] | bytes) -> str:
    """sha256 hex digest of the file's bytes (the ledger's dataset key).

    Examples
    --------
    >>> dataset_fingerprint(b"a,b\\n1,2\\n")[:12]
    '492d5ea49605'
    """
    h = hashlib.sha256()
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        h.update(path_or_bytes)
        return h.hexdigest()
    try:
        with open(path_or_bytes, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise DataError(
            f"cannot read {Path(path_or_bytes).name!r} to fingerprint it ({exc.strerror}); "
            "check the path."
        ) from exc
    return h.hexdigest()
