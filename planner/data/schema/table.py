"""The whole table's declaration: the :class:`Schema` value, its JSON form and its hash.

A :class:`Schema` holds the declared columns (:mod:`planner.data.schema.column`) and, for the
whole table, the neighbouring relation, the privacy unit and an optional public row count.
It is read from and written to JSON (``version`` :data:`SCHEMA_VERSION`), checked as a whole
(:class:`SchemaProblems` lists every problem at once) and identified by
:meth:`Schema.schema_hash`, the sha256 of its canonical JSON that plans and the ledger record.

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
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from planner.core.errors import SchemaError
from planner.data.schema.column import Column, ColumnKind

if TYPE_CHECKING:  # imported at run time only when a schema declares sampling (numpy)
    from planner.privacy.sampling import Sampling

#: Version of the schema JSON format written by :meth:`Schema.to_dict`.
SCHEMA_VERSION: Final[int] = 1

_MAX_ROWS_PER_UNIT: Final[int] = 1_000_000


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


class Relation(StrEnum):
    """The neighbouring relation (docs/mathematics.md §1)."""

    ADD_REMOVE = "add_remove"
    SUBSTITUTE = "substitute"


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
