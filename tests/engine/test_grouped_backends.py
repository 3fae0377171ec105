"""Grouped statistics are computed identically by pandas, DuckDB and Spark.

The SQL backends answer a :class:`~planner.data.requests.Grouped` request with one ``GROUP BY``
per grouping (``planner/data/backends/sql/statement.py``, ``group_statement``); pandas restricts its
bounded rows with a mask (``PandasBackend._grouped``). The aggregates of every group must be
equal, not close: counts, exact sums, column stats and quantile rank counts, on tables with
NULL and undeclared values in the grouping columns and people beyond c rows (contribution
bounding happens before grouping). The tables and helpers are the backend conformance
suite's (``tests/engine/test_backends_conformance.py``); expected values are pandas's, and
the hand-computed ones say where they come from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import QueryError
from planner.data.backends import PandasBackend
from planner.data.backends.base import Backend
from planner.data.backends.duckdb_backend import DuckDBBackend
from planner.data.loader import load_table
from planner.data.requests import (
    Bins,
    Booleans,
    Candidates,
    ClippedSum,
    Count,
    CountAggregate,
    Grouped,
    Predicate,
    PredicateOp,
    Stats,
    SumAggregate,
    group_labels,
)
from planner.data.schema import MissingAction, MissingRule
from planner.data.sources import open_source
from planner.planning.mechanisms.base import MechanismName as M
from planner.planning.queries import Query, QueryKind
from planner.planning.statistics import exact_aggregates, prefetch
from planner.planning.statistics.base import GroupedAggregate
from tests.engine import test_backends_conformance as conformance
from tests.engine.test_backends_conformance import (
    DROP,
    EDGE_CSV,
    TYPED_ROWS,
    assert_identical,
    edge_schema,
    generated,
    generated_schema,
    q,
    three,
    tied_rows,
    tied_schema,
    typed_files,
    typed_schema,
)

#: the conformance suite's fixtures: one Spark session for the test session, a data directory
spark = conformance.spark
data_dir = conformance.data_dir
K = QueryKind
L, E, G = M.LAPLACE, M.EXPONENTIAL, M.GAUSSIAN


def grouped(by_one: str, by_two: tuple[str, str], x: str, tag: str = "") -> list[Query]:
    """Grouped count / sum / mean / quantile by one and by two columns."""
    return [
        q(f"gc{tag}", K.GROUPED_COUNT, None, L, options={"by": [by_one]}),
        q(f"gc_x{tag}", K.GROUPED_COUNT, x, L, options={"by": list(by_two)}),
        q(f"gs{tag}", K.GROUPED_SUM, x, G, options={"by": [by_one]}),
        q(f"gm{tag}", K.GROUPED_MEAN, x, L, options={"by": list(by_two)}),
        q(f"gq{tag}", K.GROUPED_QUANTILE, x, E, options={"by": [by_one], "alphas": [0.25, 0.5], "candidates": 11}),
        q(f"gq2{tag}", K.GROUPED_QUANTILE, x, E, options={"by": list(by_two), "alphas": [0.5], "candidates": 21}),
    ]


def test_grouped_identical_on_generated_data_with_bounding(data_dir: Path, spark: Any) -> None:
    """~3 rows per person cut to c = 2; region has blanks, '', 'Mars' (→ other bin), smoker
    has 'maybe' (invalid → replaced by false), income has NaN, inf, text."""
    generated().to_csv(data_dir / "gen.csv", index=False)
    schema = generated_schema()
    backends = three("gen.csv", schema, spark)
    qs = [*grouped("region", ("region", "smoker"), "income"),
          *grouped("smoker", ("smoker", "region"), "age", "_age")]
    got = assert_identical(backends, qs)
    assert backends["pandas"].rows_truncated > 0
    gc = got["gc"]
    assert isinstance(gc, GroupedAggregate) and gc.labels == ("North", "South", "East", "West", "(other)")
    # the generator writes "west" (another case: undeclared, so the other bin) and never "West"
    counts = [g.value for g in gc.groups if isinstance(g, CountAggregate)]
    assert counts[3] == 0 and all(v > 0 for i, v in enumerate(counts) if i != 3)


@pytest.mark.parametrize("c", [1, 2, 3])
@pytest.mark.parametrize("action", ["drop", "replace"])
def test_grouped_identical_on_the_edge_case_table(data_dir: Path, spark: Any, action: str, c: int) -> None:
    """NULL, NA tokens, blanks and undeclared values in the grouping columns; person 1 has 3
    rows. Spark runs one case (it is slow to start a query); DuckDB every case."""
    (data_dir / "edge.csv").write_text(EDGE_CSV)
    rule = MissingRule(MissingAction.REPLACE, 5.0) if action == "replace" else DROP
    for other in (False, True):
        schema = edge_schema(rule, c, other=other)
        backends: dict[str, Backend] = three("edge.csv", schema, spark) if (c, action, other) == (2, "drop", False) \
            else {"pandas": PandasBackend(load_table(data_dir / "edge.csv"), schema),
                  "duckdb": DuckDBBackend(open_source("edge.csv"), schema)}
        got = assert_identical(backends, grouped("cat", ("cat", "flag"), "x"))
        # the grouped count by cat is the histogram of cat, computed by another route
        hist = backends["pandas"].result(Bins("cat"))
        gc = got["gc"]
        assert isinstance(gc, GroupedAggregate)
        assert tuple(g.value for g in gc.groups if isinstance(g, CountAggregate)) == hist.counts
        if (c, action, other) == (3, "drop", False):
            # hand-computed (the conformance suite's edge table): A ×3, B ×3, C ×2, D ×0
            assert hist.counts == (3, 3, 2, 0)


@pytest.mark.parametrize("c", [1, 2])
def test_grouped_identical_on_typed_parquet_and_csv(data_dir: Path, c: int) -> None:
    """Typed columns take the specialised SQL paths inside groups too: an integer column's
    quantile grid binned per value, boolean and categorical group keys from typed cells."""
    rows = [*TYPED_ROWS, (2, 5.0, 85, "A", True), (2, 6.0, 88, "B", False)]
    typed_files(data_dir, rows)
    schema = typed_schema(c)
    qs = [*grouped("cat", ("cat", "flag"), "n"),
          q("gq_x", K.GROUPED_QUANTILE, "x", E, options={"by": ["flag"], "alphas": [0.5], "candidates": 11})]
    pandas_b = PandasBackend(load_table(data_dir / "typed.csv"), schema)
    for name in ("typed.csv", "typed.parquet"):
        assert_identical({"pandas": pandas_b, "duckdb": DuckDBBackend(open_source(name), schema)}, qs)


@pytest.mark.parametrize("c", [1, 3])
def test_grouped_identical_with_ties_on_the_bounding_cut(data_dir: Path, spark: Any, c: int) -> None:
    """Identical rows straddle the cut (the ranked branch of bounding) before grouping."""
    df = tied_rows()
    df.to_csv(data_dir / "ties.csv", index=False)
    schema = tied_schema(c)
    qs = [*grouped("cat", ("cat", "flag"), "x"),
          q("gs_big", K.GROUPED_SUM, "big", L, options={"by": ["flag"]}),
          q("gm_n", K.GROUPED_MEAN, "n", L, options={"by": ["cat"]})]
    backends = three("ties.csv", schema, spark) if c == 3 else {
        "pandas": PandasBackend(load_table(data_dir / "ties.csv"), schema),
        "duckdb": DuckDBBackend(open_source("ties.csv"), schema)}
    assert_identical(backends, qs)
    assert backends["pandas"].rows_truncated > 0


def test_grouped_requests_of_every_kind_match_pandas(data_dir: Path) -> None:
    """A :class:`Grouped` request holding every kind of request a group can hold (a sum,
    counts with and without a filter, candidate counts, bins, boolean counts, every
    column's stats), by one column and by two: pandas and DuckDB agree group by group, the
    groups come in declared order with the empty ones included."""
    generated().to_csv(data_dir / "gen.csv", index=False)
    schema = generated_schema()
    pandas_b = PandasBackend(load_table(data_dir / "gen.csv"), schema)
    duck = DuckDBBackend(open_source("gen.csv"), schema)
    inner = (ClippedSum("income"), Count("age"), Count(None, Predicate("income", PredicateOp.GT, 50_000.25)),
             Candidates("age", [float(t) for t in range(18, 91)]), Bins("income", (0.0, 50_000.0, 150_000.5)),
             Bins("region"), Booleans("smoker"), *(Stats(c.name) for c in schema.columns))
    for by in (("region",), ("region", "smoker"), ("smoker",)):
        a, b = pandas_b.result(Grouped(inner, by)), duck.result(Grouped(inner, by))
        assert b == a, by
        assert a.labels == group_labels(schema, by) and len(a.results) == len(a.labels)
    by_region = pandas_b.result(Grouped(inner, ("region",)))
    # the generator writes "west" (undeclared: the other bin), never "West": an empty group
    west = by_region.results[by_region.labels.index("West")]
    assert west[0] == SumAggregate(0.0, 0, 0, 0) and west[1] == CountAggregate(0, 0)
    # every kept row with a usable region is in exactly one group (region drops missing ones)
    rows = sum(r[1].value for r in by_region.results)
    assert rows == pandas_b.result(Count("region")).value


def test_grouped_requests_are_checked_against_the_schema(data_dir: Path) -> None:
    """Groups of declared categorical / boolean columns only; no key counts or digests in a
    group; the same refusals from both engines."""
    generated().to_csv(data_dir / "gen.csv", index=False)
    schema = generated_schema()
    for b in (PandasBackend(load_table(data_dir / "gen.csv"), schema), DuckDBBackend(open_source("gen.csv"), schema)):
        with pytest.raises(QueryError, match="column 'age' is numeric; this aggregate needs categorical or boolean"):
            b.result(Grouped((Count(),), ("age",)))
        with pytest.raises(QueryError, match="is not declared"):
            b.result(Grouped((Count(),), ("planet",)))
        with pytest.raises(QueryError, match="needs distinct grouping columns"):
            b.result(Grouped((Count(),), ("region", "region")))
        with pytest.raises(QueryError, match="whole table, not in groups"):
            b.result(Grouped((Grouped((Count(),), ("smoker",)),), ("region",)))


def test_every_group_of_every_grouping_is_one_statement(data_dir: Path) -> None:
    """A plan's grouped statistics add ONE statement together (here two groupings: by
    region, by region × smoker), whatever the number of groupings, groups and statistics."""
    df = generated()
    df["pid"] = range(len(df))  # no bounding: the plain requests are the first statement
    df.to_csv(data_dir / "one.csv", index=False)
    schema = generated_schema(c=1)
    duck = DuckDBBackend(open_source("one.csv"), schema)
    qs = [q("n", K.COUNT, None, L), *grouped("region", ("region", "smoker"), "income")]
    prefetch(duck, qs)
    assert duck.passes == 1 + 1
    before = duck.passes
    got = exact_aggregates(duck, qs)  # all cached: no statement runs again
    assert duck.passes == before
    pandas_b = PandasBackend(load_table(data_dir / "one.csv"), schema)
    assert got == exact_aggregates(pandas_b, qs)
    # bins the batch did not compute for this grouping (age by region): one statement more
    ages = Grouped((Candidates("age", [float(t) for t in range(18, 91)]),), ("region",))
    assert duck.result(ages) == pandas_b.result(ages)
    assert duck.passes == before + 1
