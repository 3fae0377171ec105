"""The engine's error types.

Every error the engine raises on bad input is a :class:`PlannerError` subclass whose
message names the parameter or column, the constraint, the offending *public* value
(never a private data value) and a remedy. Pages catch ``PlannerError`` and show its
message; anything else is a bug.
"""

from __future__ import annotations


class PlannerError(ValueError):
    """Base class of every error the engine reports to a user."""


class BudgetError(PlannerError):
    """An invalid privacy parameter (ε ≤ 0, δ outside [0, 1), ...)."""


class BudgetExceededError(PlannerError):
    """A plan or release needs more budget than remains."""


class SchemaError(PlannerError):
    """An invalid schema declaration (bounds, categories, privacy unit)."""


class DataError(PlannerError):
    """A file or column that cannot be used as declared."""


class QueryError(PlannerError):
    """A query that does not fit the schema or the mechanism."""


class PlanError(PlannerError):
    """An invalid plan specification (weights, targets, pinned shares)."""


class ReleaseError(PlannerError):
    """A plan that cannot be released as asked (rule mismatch, unsupported query, ...)."""


class LedgerError(PlannerError):
    """A ledger inconsistency or an unusable ledger location."""


class LedgerIntegrityError(LedgerError):
    """The ledger is empty, truncated, corrupt or tampered with where one existed.

    Raised instead of silently starting over: every spend recorded before must stay
    counted (docs/engineering.md §5). The message names what was found and how to restore.
    """


class PermissionDenied(PlannerError):
    """The acting principal's role or grants do not allow this ledger operation."""


class AccountError(PlannerError):
    """An account operation that cannot be done as asked (unknown user, weak password, ...)."""


class InputLimitError(PlannerError):
    """An input outside the limits the engine accepts (size, depth, magnitude, file type)."""
