"""The statistics registry: one module per kind of query, each holding its whole story.

======================  ===========================================================
kind                    module
======================  ===========================================================
count                   :mod:`.count`
sum                     :mod:`.sum`
mean                    :mod:`.mean`
histogram               :mod:`.histogram`
quantile, median        :mod:`.quantile`
mode                    :mod:`.mode`
proportion              :mod:`.proportion`
synthetic_sample        :mod:`.synthetic`
grouped_*               :mod:`.grouped`
key_count               :mod:`.keys` (partition selection over undeclared keys)
======================  ===========================================================

A new statistic is one module with a :class:`~planner.planning.statistics.base.Statistic`
subclass, one :class:`~planner.planning.queries.QueryKind` member and one line in
:data:`STATISTICS`; planning, release, simulation, the backends and the app's forms read
it from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from planner.core.errors import QueryError
from planner.planning.mechanisms.base import MechanismName
from planner.planning.queries import QueryKind
from planner.planning.statistics.base import Statistic
from planner.planning.statistics.count import Count
from planner.planning.statistics.grouped import (
    GroupedCount,
    GroupedMean,
    GroupedQuantile,
    GroupedSum,
)
from planner.planning.statistics.histogram import Histogram
from planner.planning.statistics.keys import KeyCount
from planner.planning.statistics.mean import Mean
from planner.planning.statistics.mode import Mode
from planner.planning.statistics.proportion import Proportion
from planner.planning.statistics.quantile import Median, Quantile
from planner.planning.statistics.sum import Sum
from planner.planning.statistics.synthetic import SyntheticSample

#: Every registered statistic, by kind.
STATISTICS: Final[Mapping[QueryKind, Statistic]] = MappingProxyType({
    s.kind: s for s in (Count(), Sum(), Mean(), Histogram(), Quantile(), Median(), Mode(), Proportion(),
                        SyntheticSample(), GroupedCount(), GroupedSum(), GroupedMean(), GroupedQuantile(),
                        KeyCount())
})


def statistic(kind: QueryKind | str) -> Statistic:
    """The statistic of ``kind``; :class:`QueryError` listing the kinds otherwise."""
    try:
        return STATISTICS[QueryKind(kind)]
    except (ValueError, KeyError) as exc:
        raise QueryError(f"unknown kind of query {kind!r}; expected one of {[k.value for k in STATISTICS]}.") from exc


def valid_mechanisms() -> dict[QueryKind, frozenset[MechanismName]]:
    """The mechanisms each kind offers."""
    return {k: frozenset(s.mechanism_names) for k, s in STATISTICS.items()}


__all__ = ["STATISTICS", "Statistic", "statistic", "valid_mechanisms"]
