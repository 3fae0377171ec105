"""The declared schema: what is public about a sensitive table.

A :class:`Schema` says, per column, its kind (numeric, categorical, boolean, identifier),
the public bounds [L, U] of a numeric column, the public category list of a categorical
one, and an explicit missing-value rule; and, for the whole table, the neighbouring
relation, the privacy unit and an optional public row count. Everything here is declared
by the data owner: no function in this package reads bounds or categories from rows
(:func:`suggest_kinds` looks at the data but only ever returns *kinds*).

One module per idea; every name is imported from here (``from planner.data.schema import X``):

- :mod:`~planner.data.schema.column`: one column's declaration and its checks (kinds, the
  missing-value rule, bounds, categories, where DP-suggested bounds came from);
- :mod:`~planner.data.schema.table`: the whole table (relation, privacy unit, public row
  count, secret-sample rate), its JSON form, its file and its hash;
- :mod:`~planner.data.schema.suggest`: kinds suggested from a loaded table;
- :mod:`~planner.data.schema.text_list`: a list of labels typed on one line;
- :mod:`~planner.data.schema.fingerprint`: the sha256 of a data file's bytes.

References
----------
docs/mathematics.md §1–2 (neighbouring relation, privacy unit, sensitivities from the declared schema).
"""

from planner.data.schema.column import (
    FALSE_TOKENS,
    OTHER_LABEL,
    TRUE_TOKENS,
    BoundsFor,
    BoundsSource,
    BoundsSourceKind,
    Column,
    ColumnKind,
    MissingAction,
    MissingRule,
    Scalar,
)
from planner.data.schema.fingerprint import dataset_fingerprint
from planner.data.schema.suggest import suggest_kinds, suggest_whole_numbers
from planner.data.schema.table import (
    SCHEMA_VERSION,
    PrivacyUnit,
    Relation,
    Schema,
    SchemaProblems,
    sampling_from_dict,
)
from planner.data.schema.text_list import format_text_list, parse_text_list

__all__ = [
    "FALSE_TOKENS",
    "OTHER_LABEL",
    "SCHEMA_VERSION",
    "TRUE_TOKENS",
    "BoundsFor",
    "BoundsSource",
    "BoundsSourceKind",
    "Column",
    "ColumnKind",
    "MissingAction",
    "MissingRule",
    "PrivacyUnit",
    "Relation",
    "Scalar",
    "Schema",
    "SchemaProblems",
    "dataset_fingerprint",
    "format_text_list",
    "parse_text_list",
    "sampling_from_dict",
    "suggest_kinds",
    "suggest_whole_numbers",
]
