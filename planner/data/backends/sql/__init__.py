"""One request compiler for the SQL engines (DuckDB, Spark SQL): the pandas contract in SQL.

:class:`SqlBackend` implements :class:`~planner.data.backends.base.Backend` by compiling the
schema and the requested aggregates (:mod:`planner.data.requests`) into SQL that runs where
the data is (a file scanned in place by DuckDB, executors of a Spark cluster); only small
aggregate rows come back. The two engines differ in a handful of spellings only
(:class:`Dialect`). One module per idea:

=====================  ===================================================================
module                 what it holds
=====================  ===================================================================
:mod:`.dialect`        the engines' spellings, bound parameters, projection layers
:mod:`.reading`        cell reading: each declared column's cells as conformed SQL
:mod:`.compile`        the request compiler: requests → slots → aggregate SQL → results
:mod:`.bins`           the per-row bin keys of bins, candidate grids and booleans
:mod:`.bounding`       contribution bounding: the person check and the kept rows
:mod:`.statement`      the one-scan statement (and the grouped one, and key counts)
:mod:`.backend`        :class:`SqlBackend`, the API the engines subclass
=====================  ===================================================================

Safety: every column name is quoted by :meth:`Dialect.ident` (quotes doubled), every
value (bounds, categories, edges, salt, replacement values, filter constants) is a bound
parameter; file names never reach SQL text (sources are registered as views under
generated names).
"""

from __future__ import annotations

from planner.data.backends.sql.backend import SqlBackend
from planner.data.backends.sql.bins import MAX_VALUE_GROUPS, arithmetic_step, uniform_guess_ok
from planner.data.backends.sql.dialect import (
    CSV_NULL_TOKENS,
    TRIM_PATTERN,
    WHITESPACE,
    Dialect,
    Params,
    type_class,
)

__all__ = [
    "CSV_NULL_TOKENS",
    "MAX_VALUE_GROUPS",
    "TRIM_PATTERN",
    "WHITESPACE",
    "Dialect",
    "Params",
    "SqlBackend",
    "arithmetic_step",
    "type_class",
    "uniform_guess_ok",
]
