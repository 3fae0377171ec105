"""Nothing from a file name, a column name or a schema reaches SQL as raw text.

Column names and category values with quotes, semicolons and comment markers are
quoted or bound harmlessly: the aggregates are still right (equal to pandas, which runs
no SQL), no extra statement runs (a canary table survives), and paths outside the data
directory are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from planner.core.errors import DataError, PlannerError
from planner.data.backends import PandasBackend
from planner.data.backends.duckdb_backend import DuckDBBackend
from planner.data.backends.sql import Dialect
from planner.data.loader import load_table
from planner.data.schema import Column, ColumnKind, MissingRule, PrivacyUnit, Schema
from planner.data.sources import DATA_DIR_ENV, open_source
from planner.planning.mechanisms.base import MechanismName as M
from planner.planning.queries import Predicate, PredicateOp, Query, QueryKind
from planner.planning.statistics import exact_aggregates
from tests.engine.test_backends_conformance import spark  # noqa: F401  (session fixture)

NASTY_NAMES = [
    'a"; DROP TABLE canary; --',
    "b`); DROP TABLE canary; --",
    "c' OR '1'='1",
    "d /* comment */",
    "e -- tail",
    "f\"\"g",
]
NASTY_CATS = ["x'; DROP TABLE canary; --", 'y"', "/* z */", "-- w", "v;", "`u`"]


def nasty_schema() -> Schema:
    return Schema(
        (
            Column(NASTY_NAMES[0], ColumnKind.IDENTIFIER),
            Column(NASTY_NAMES[1], ColumnKind.NUMERIC, MissingRule(), 0, 100),
            Column(NASTY_NAMES[2], ColumnKind.CATEGORICAL, MissingRule(), categories=tuple(NASTY_CATS)),
            Column(NASTY_NAMES[3], ColumnKind.BOOLEAN, MissingRule()),
            Column(NASTY_NAMES[4], ColumnKind.NUMERIC, MissingRule(), -1, 1),
        ),
        unit=PrivacyUnit(NASTY_NAMES[0], 1),
        salt="'); DROP TABLE canary; --",
    )


def nasty_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            NASTY_NAMES[0]: ["1", "1", "2", "3", "4'--", "5"],
            NASTY_NAMES[1]: ["10", "20", "30", "1e9", "x'--", ""],
            NASTY_NAMES[2]: [NASTY_CATS[0], NASTY_CATS[1], NASTY_CATS[2], "'; --", NASTY_CATS[5], NASTY_CATS[0]],
            NASTY_NAMES[3]: ["yes", "no", "1", "0", "true", "'--"],
            NASTY_NAMES[4]: ["0.5", "-0.25", "2", "-3", "0", "0.125"],
            NASTY_NAMES[5]: ["unused"] * 6,
        }
    )


def nasty_queries() -> list[Query]:
    L, E = M.LAPLACE, M.EXPONENTIAL
    return [
        Query("n", QueryKind.COUNT, None, L),
        Query("n_cat", QueryKind.COUNT, None, L,
              predicate=Predicate(NASTY_NAMES[2], PredicateOp.IN, (NASTY_CATS[0], NASTY_CATS[3]))),
        Query("sum", QueryKind.SUM, NASTY_NAMES[1], L),
        Query("mean", QueryKind.MEAN, NASTY_NAMES[4], L),
        Query("hist", QueryKind.HISTOGRAM, NASTY_NAMES[2], L),
        Query("med", QueryKind.MEDIAN, NASTY_NAMES[1], E, candidates=11),
        Query("prop", QueryKind.PROPORTION, NASTY_NAMES[3], L),
    ]


@pytest.fixture()
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv(DATA_DIR_ENV, str(d))
    return d


def test_injection_identifiers_are_quoted_with_doubled_quotes() -> None:
    d = Dialect()
    assert d.ident('a"b') == '"a""b"'
    from planner.data.backends.spark_backend import SparkDialect

    assert SparkDialect().ident("a`b") == "`a``b`"
    assert SparkDialect().literal("it's \\d") == "'it\\'s \\\\d'"
    with pytest.raises(DataError, match="NUL"):
        d.ident("a\x00b")


def test_injection_nasty_names_and_values_duckdb(data: Path) -> None:
    df = nasty_frame()
    df.to_csv(data / "nasty; DROP TABLE canary; --.csv", index=False)
    schema = nasty_schema()
    expected = exact_aggregates(PandasBackend(load_table(data / "nasty; DROP TABLE canary; --.csv"), schema), nasty_queries())
    b = DuckDBBackend(open_source("nasty; DROP TABLE canary; --.csv"), schema)
    b._con.execute("CREATE TABLE canary AS SELECT 42 AS v")
    assert exact_aggregates(b, nasty_queries()) == expected
    assert b._con.execute("SELECT v FROM canary").fetchall() == [(42,)]  # no statement ran
    hist = expected["hist"]
    # 6 rows, person "1" cut to c = 1 row, "'; --" undeclared: 4 counted, 1 unbinned
    assert (hist.total, hist.unbinned) == (4, 1)  # type: ignore[union-attr]
    # a DataFrame source with the same names
    assert exact_aggregates(DuckDBBackend(df, schema), nasty_queries()) == expected


def test_injection_nasty_names_and_values_spark(data: Path, spark: Any) -> None:  # noqa: F811
    from planner.data.backends.spark_backend import SparkBackend

    nasty_frame().to_csv(data / "n.csv", index=False)
    schema = nasty_schema()
    expected = exact_aggregates(PandasBackend(load_table(data / "n.csv"), schema), nasty_queries())
    spark.sql("CREATE OR REPLACE TEMP VIEW canary AS SELECT 42 AS v")
    assert exact_aggregates(SparkBackend(open_source("n.csv"), schema, spark=spark), nasty_queries()) == expected
    assert [tuple(r) for r in spark.sql("SELECT v FROM canary").collect()] == [(42,)]


def test_injection_table_name_is_quoted(data: Path) -> None:
    import duckdb

    con = duckdb.connect(str(data / "t.duckdb"))
    con.execute('CREATE TABLE canary AS SELECT 1 AS v')
    con.execute("CREATE TABLE people AS SELECT '1' AS pid")
    con.close()
    schema = Schema((Column("pid", ColumnKind.IDENTIFIER),))
    with pytest.raises(DataError, match="does not exist"):
        DuckDBBackend(open_source("t.duckdb::people; DROP TABLE canary; --"), schema)
    con = duckdb.connect(str(data / "t.duckdb"), read_only=True)
    assert con.execute("SELECT v FROM canary").fetchall() == [(1,)]
    con.close()


@pytest.mark.parametrize("spec", ["../x.csv", "/etc/passwd", "/etc/*", "a/../../x.csv"])
def test_injection_paths_outside_the_data_directory_are_refused(data: Path, spec: str) -> None:
    with pytest.raises(PlannerError, match="refused"):
        DuckDBBackend(spec, nasty_schema())
