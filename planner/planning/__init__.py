"""Planning: queries and their statistics, mechanisms' calibration and accuracy, the
workload, the allocator, bounds, simulations, advice and plan files. Imports only the
layers below.

A :class:`~planner.planning.queries.Query` checks itself through its kind's statistic
without importing the statistics: they register themselves in
:mod:`planner.planning.queries` when :mod:`planner.planning.statistics` is imported, which
is done here, first, so that every query of every caller finds its statistic.
"""

from planner.planning import statistics as statistics  # registers every kind's statistic
