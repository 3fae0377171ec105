"""Backends: exact, clipped, contribution-bounded aggregates over declared domains.

:class:`~planner.backends.base.Backend` is the interface; :class:`PandasBackend` the
default implementation. DuckDB and Spark backends will implement the same interface.
"""

from planner.backends.base import (
    Aggregate,
    Backend,
    BinCounts,
    BooleanCounts,
    ColumnStats,
    CountAggregate,
    MeanAggregate,
    QuantileAggregate,
    SumAggregate,
)
from planner.backends.pandas_backend import PandasBackend, bound_contributions, conform_column

__all__ = [
    "Aggregate",
    "Backend",
    "BinCounts",
    "BooleanCounts",
    "ColumnStats",
    "CountAggregate",
    "MeanAggregate",
    "PandasBackend",
    "QuantileAggregate",
    "SumAggregate",
    "bound_contributions",
    "conform_column",
]
