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
synthetic_data          :mod:`.synthetic_data` (a synthetic table over many columns: MST, AIM)
grouped_*               :mod:`.grouped`
key_count               :mod:`.keys` (partition selection over undeclared keys)
======================  ===========================================================

A new statistic is one module here with a :class:`~planner.planning.statistics.base.Statistic`
subclass and one :class:`~planner.planning.queries.QueryKind` member: the module registers the
class as it is imported (every module of this package is), and planning, release, simulation
and the app's forms read it from :data:`STATISTICS` (``docs/engineering.md`` §6).
Its exact aggregate is asked of the backends as requests (:mod:`planner.data.requests`):
:func:`plan_requests` gathers a plan's, :func:`exact_aggregates` evaluates them together.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from planner.core.errors import QueryError
from planner.data.requests import Request
from planner.data.schema import Schema
from planner.planning.mechanisms.base import MechanismName
from planner.planning.queries import Query, QueryKind, register
from planner.planning.statistics.base import DECLARED, Aggregate, Statistic

if TYPE_CHECKING:
    from planner.data.backends.base import Backend

# Every module of this package declares its statistics as it is imported (registration by
# the statistic's module: :data:`~planner.planning.statistics.base.DECLARED`); modules whose
# name starts with "_" are helpers.
for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_") and _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")

_missing = [k.value for k in QueryKind if k not in DECLARED]
if _missing:  # pragma: no cover - a kind named but no module declares it
    raise ImportError(f"no statistic module declares the kind(s) {_missing}; add a Statistic subclass with that kind.")

#: Every registered statistic, by kind, in :class:`QueryKind`'s order (the order forms list them).
STATISTICS: Final[Mapping[QueryKind, Statistic]] = MappingProxyType({k: DECLARED[k]() for k in QueryKind})


for _s in STATISTICS.values():
    register(_s)


def statistic(kind: QueryKind | str) -> Statistic:
    """The statistic of ``kind``; :class:`QueryError` listing the kinds otherwise."""
    try:
        return STATISTICS[QueryKind(kind)]
    except (ValueError, KeyError) as exc:
        raise QueryError(f"unknown kind of query {kind!r}; expected one of {[k.value for k in STATISTICS]}.") from exc


def valid_mechanisms() -> dict[QueryKind, frozenset[MechanismName]]:
    """The mechanisms each kind offers."""
    return {k: frozenset(s.mechanism_names) for k, s in STATISTICS.items()}


# ------------------------------------------------------------------ exact aggregates
def plan_requests(queries: Iterable[Query], schema: Schema) -> tuple[Request[Any], ...]:
    """Every request the queries' releases need (:meth:`Statistic.requests`), each once,
    in order: what a backend computes in one pass for the plan (validated first)."""
    out: dict[Request[Any], None] = {}
    for q in queries:
        q.validate(schema)
        out.update(dict.fromkeys(statistic(q.kind).requests(q, schema)))
    return tuple(out)


def prefetch(backend: Backend, queries: Iterable[Query], *, report: bool = False, digest: bool = False) -> None:
    """Compute every aggregate of the queries ahead, in one pass where the engine allows
    (:meth:`Backend.prefetch`): a plan the backend cannot compute is refused here."""
    backend.prefetch(plan_requests(queries, backend.schema), report=report, digest=digest)


def exact_aggregates(backend: Backend, queries: Iterable[Query]) -> dict[str, Aggregate]:
    """Each query's exact aggregate (PRIVATE: never shown or exported), keyed by query id:
    every request of the plan evaluated together (one statement on a SQL engine), then
    put together by each statistic (:meth:`Statistic.aggregate_of`)."""
    qs = list(queries)
    schema = backend.schema
    asked = {q.id: statistic(q.kind).requests(q, schema) for q in qs}
    flat = plan_requests(qs, schema)
    results = dict(zip(flat, backend.evaluate(flat), strict=True))
    return {q.id: statistic(q.kind).aggregate_of(q, schema, [results[r] for r in asked[q.id]]) for q in qs}


__all__ = ["STATISTICS", "Statistic", "exact_aggregates", "plan_requests", "prefetch", "statistic",
           "valid_mechanisms"]
