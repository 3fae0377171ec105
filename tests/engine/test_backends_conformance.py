"""pandas, DuckDB and Spark return IDENTICAL aggregates on the same data.

Every query kind runs through all three backends on ``data/census.csv``, on a generated
table (floats, duplicate people beyond c, odd cells) and on an edge-case table; the
aggregates (dataclasses of ints and floats) must be equal, not close. Expected values of
the edge-case table are hand-computed from the cell-reading rules of
``planner/data/backends/base.py``.

Spark runs in local mode with one session for the whole test session; the tests are
skipped (with the reason printed) only when no Java runtime is present. A selection of
them also runs on a standalone cluster (``test_spark_cluster.py``).
"""

from __future__ import annotations

import io
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from planner.core.errors import DataError
from planner.data.backends import PandasBackend, available_backends, make_backend
from planner.data.backends.base import Backend, BinCounts, SumAggregate
from planner.data.backends.duckdb_backend import DuckDBBackend
from planner.data.backends.pandas_backend import bound_contributions
from planner.data.backends.sql import arithmetic_step
from planner.data.loader import load_table
from planner.data.requests import Bins, Candidates, ClippedSum, Count, MarginalTables
from planner.data.schema import Column, ColumnKind, MissingAction, MissingRule, PrivacyUnit, Schema
from planner.data.sources import DATA_DIR_ENV, open_source
from planner.planning.mechanisms.base import MechanismName as M
from planner.planning.queries import MeanMode, Predicate, PredicateOp, Query, QueryKind
from planner.planning.statistics import exact_aggregates, prefetch
from planner.planning.statistics.histogram import edges as bin_edges

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
DROP = MissingRule()


# ------------------------------------------------------------------ fixtures
@pytest.fixture()
def spark() -> Any:
    """The local Spark session, or the test skipped with the reason (:func:`tests.spark_cluster.local_session`)."""
    from tests.spark_cluster import local_session

    return local_session()


@pytest.fixture()
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private allow-listed data directory."""
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv(DATA_DIR_ENV, str(d))
    return d


def three(source: str, schema: Schema, spark: Any, salt: str | None = None) -> dict[str, Backend]:
    """The three backends over one file of the data directory (pandas via the loader)."""
    from planner.data.backends.spark_backend import SparkBackend

    src = open_source(source)
    frame = load_table(src.files[0]) if len(src.files) == 1 else pd.concat(  # type: ignore[union-attr]
        [load_table(p) for p in src.files], ignore_index=True  # type: ignore[union-attr]
    )
    return {
        "pandas": PandasBackend(frame, schema, salt),
        "duckdb": DuckDBBackend(src, schema, salt),
        "spark": SparkBackend(src, schema, salt, spark=spark),
    }


def assert_identical(backends: dict[str, Backend], queries: list[Query]) -> dict[str, Any]:
    """Every aggregate, the row counts and the column report equal across backends."""
    ref_name = "pandas"
    ref = backends[ref_name]
    expected = exact_aggregates(ref, queries)
    report = ref.column_report()
    for name, b in backends.items():
        if name == ref_name:
            continue
        got = exact_aggregates(b, queries)
        for q in queries:
            assert got[q.id] == expected[q.id], f"{name} differs from pandas on {q.id}"
        assert (b.rows, b.rows_truncated) == (ref.rows, ref.rows_truncated), name
        assert b.column_report() == report, name
    return expected


def q(id_: str, kind: QueryKind, column: str | None, mech: M, **kw: Any) -> Query:
    return Query(id_, kind, column, mech, **kw)


# ------------------------------------------------------------------ census
def census_queries() -> list[Query]:
    L, E, G = M.LAPLACE, M.EXPONENTIAL, M.PERTURBED_HISTOGRAM
    return [
        q("n", QueryKind.COUNT, None, L),
        q("n_old", QueryKind.COUNT, None, L, predicate=Predicate("age", PredicateOp.GE, 65)),
        q("n_north", QueryKind.COUNT, None, L,
          predicate=Predicate("region", PredicateOp.IN, ("North", "Overseas"))),
        q("n_smoke", QueryKind.COUNT, "income", L, predicate=Predicate("smoker", PredicateOp.EQ, True)),
        q("n_not_f", QueryKind.COUNT, None, L, predicate=Predicate("sex", PredicateOp.NE, "female")),
        q("n_age_eq", QueryKind.COUNT, None, L, predicate=Predicate("age", PredicateOp.EQ, 40)),
        q("income_sum", QueryKind.SUM, "income", L),
        q("income_mean", QueryKind.MEAN, "income", L),
        q("hours_mean_pub", QueryKind.MEAN, "hours_worked", L, mode=MeanMode.PUBLIC_N),
        q("region", QueryKind.HISTOGRAM, "region", L),
        q("education", QueryKind.HISTOGRAM, "education", M.DISCRETE_GAUSSIAN),
        # integer ages on integer edges: every tie on an edge goes right (last bin closed)
        q("age_hist", QueryKind.HISTOGRAM, "age", L, bins=9),
        q("age_edges", QueryKind.HISTOGRAM, "age", L, bin_edges=(18, 25, 40, 41, 65, 90)),
        q("income_hist", QueryKind.HISTOGRAM, "income", L, bins=7),
        q("age_median", QueryKind.MEDIAN, "age", E),
        q("income_q", QueryKind.QUANTILE, "income", E, alphas=(0.1, 0.9), candidates=501),
        q("hours_q", QueryKind.QUANTILE, "hours_worked", E, alphas=(0.5,), step=7.0),
        q("mode_region", QueryKind.MODE, "region", E),
        q("smokers", QueryKind.PROPORTION, "smoker", L),
        q("synth_age", QueryKind.SYNTHETIC_SAMPLE, "age", G, bins=12),
        q("synth_income", QueryKind.SYNTHETIC_SAMPLE, "income", G, bins=20),
        # every 1- and 2-way table of a synthetic table's columns (integer ages binned by
        # their edges, never per value: each row needs its own bin of every column)
        q("synth_table", QueryKind.SYNTHETIC_DATA, None, M.MST,
          columns=["age", "sex", "region", "income", "smoker"], bins=9),
    ]


def census_schema() -> Schema:
    """data/census.schema.json under the substitute relation (so 'mean with public n' is valid)."""
    import json

    d = json.loads((DATA / "census.schema.json").read_text())
    d["relation"] = "substitute"
    return Schema.from_dict(d)


def test_backends_identical_on_census(spark: Any) -> None:
    schema = census_schema()
    got = assert_identical(three("census.csv", schema, spark), census_queries())
    assert got["n"].value == 50_000  # data/README.md: 50,000 rows, one per person
    assert isinstance(got["region"], BinCounts) and len(got["region"].counts) == 6
    assert got["region"].counts[-1] == 0  # "Overseas" is declared but absent: a zero bin
    tables = got["synth_table"]
    assert isinstance(tables, MarginalTables) and tables.rows + tables.dropped == 50_000
    assert tables.table((0, 1)).sum() == tables.rows  # every table holds the same rows


def test_backends_identical_on_census_parquet(data_dir: Path) -> None:
    """Parquet keeps the file's own types (ints, floats): same aggregates as the CSV."""
    schema = census_schema()
    df = load_table(DATA / "census.csv")
    typed = df.copy()
    for c in ("age", "income", "hours_worked", "person_id"):
        typed[c] = pd.to_numeric(typed[c])
    typed.to_parquet(data_dir / "census.parquet")
    pandas_b = PandasBackend(df, schema)
    duck = DuckDBBackend(open_source("census.parquet"), schema)
    qs = census_queries()
    assert exact_aggregates(duck, qs) == exact_aggregates(pandas_b, qs)


# ------------------------------------------------------------------ generated data
def generated(n: int = 4000, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pid = rng.integers(0, n // 3, n)  # ~3 rows per person: bounding to c = 2 matters
    income = np.round(rng.lognormal(10, 1.2, n), 2).astype(object)
    age = rng.integers(10, 100, n).astype(object)
    region = rng.choice(["North", "South", " East ", "west", "", "Mars"], n).astype(object)
    smoker = rng.choice(["yes", "no", "1", "0", "TRUE", "maybe", ""], n).astype(object)
    # sprinkle odd cells (fixed positions, from a seeded generator)
    odd = rng.choice(n, 60, replace=False)
    cells = ["", "NaN", "inf", "-inf", "abc", "+007", " 7.0 ", "1e3", "n/a", "-0", "1e400"]
    for i, j in enumerate(odd):
        income[j] = cells[i % len(cells)]
        age[j] = cells[(i + 3) % len(cells)]
    return pd.DataFrame(
        {"pid": [f"{p:05d}" if p % 2 else str(p) for p in pid], "age": age, "income": income,
         "region": region, "smoker": smoker}
    )


def generated_schema(c: int = 2, income_rule: MissingRule = DROP) -> Schema:
    return Schema(
        (
            Column("pid", ColumnKind.IDENTIFIER),
            Column("age", ColumnKind.NUMERIC, MissingRule(MissingAction.REPLACE, 40.0), 18, 90),
            Column("income", ColumnKind.NUMERIC, income_rule, 0, 150_000.5),
            Column("region", ColumnKind.CATEGORICAL, DROP,
                   categories=("North", "South", "East", "West"), other_bin=True),
            Column("smoker", ColumnKind.BOOLEAN, MissingRule(MissingAction.REPLACE, False)),
        ),
        unit=PrivacyUnit("pid", c),
        salt="conformance",
    )


def generated_queries() -> list[Query]:
    L, E = M.LAPLACE, M.EXPONENTIAL
    return [
        q("n", QueryKind.COUNT, None, L),
        q("n_rich", QueryKind.COUNT, None, L, predicate=Predicate("income", PredicateOp.GT, 50_000.25)),
        q("n_young", QueryKind.COUNT, "income", L, predicate=Predicate("age", PredicateOp.LT, 30)),
        q("n_other", QueryKind.COUNT, None, L, predicate=Predicate("region", PredicateOp.EQ, "(other)")),
        q("sum", QueryKind.SUM, "income", L),
        q("mean", QueryKind.MEAN, "income", L),
        q("age_mean", QueryKind.MEAN, "age", L),
        q("region", QueryKind.HISTOGRAM, "region", L),
        q("income_hist", QueryKind.HISTOGRAM, "income", L, bin_edges=(0, 0.5, 1000, 20_000.25, 150_000.5)),
        q("age_hist", QueryKind.HISTOGRAM, "age", L, bins=6),
        q("median", QueryKind.MEDIAN, "income", E, candidates=1001),
        q("age_q", QueryKind.QUANTILE, "age", E, alphas=(0.25,), step=1.0),
        q("mode", QueryKind.MODE, "region", E),
        q("smoker", QueryKind.PROPORTION, "smoker", L),
        # a row missing in one column (income dropped) is in no table; replaced ages and
        # smokers, the other bin of region and clipped incomes are in all of them
        q("synth", QueryKind.SYNTHETIC_DATA, None, M.AIM, columns=["age", "income", "region", "smoker"], bins=7),
    ]


def test_backends_identical_on_generated_data_with_bounding(data_dir: Path, spark: Any) -> None:
    df = generated()
    df.to_csv(data_dir / "gen.csv", index=False)
    schema = generated_schema()
    backends = three("gen.csv", schema, spark)
    got = assert_identical(backends, generated_queries())
    assert backends["pandas"].rows_truncated > 0  # people beyond c = 2 rows were cut
    tables = got["synth"]
    assert isinstance(tables, MarginalTables) and tables.dropped > 0 and tables.rows > 0  # missing incomes
    assert (tables.table((0, 3)).sum(axis=1) == tables.table((0,))).all()  # a pair sums to its column
    s = got["sum"]
    assert isinstance(s, SumAggregate) and s.value != round(s.value)  # a float sum, equal bit for bit


def test_backends_keep_the_same_rows(data_dir: Path) -> None:
    """Same salt → same kept rows: the sum of unique floats identifies the kept set."""
    rng = np.random.default_rng(3)
    n = 3000
    x = rng.uniform(0, 1000, n)  # all distinct: any other kept set has another sum
    df = pd.DataFrame({"pid": rng.integers(0, 300, n).astype(str), "x": [repr(float(v)) for v in x]})
    df.to_csv(data_dir / "rows.csv", index=False)
    for c, salt in [(1, "a"), (3, "a"), (3, "b")]:
        schema = Schema(
            (Column("pid", ColumnKind.IDENTIFIER), Column("x", ColumnKind.NUMERIC, DROP, 0, 1000)),
            unit=PrivacyUnit("pid", c), salt=salt,
        )
        keep = bound_contributions(load_table(data_dir / "rows.csv"), schema)
        expected = float(np.asarray([float(v) for v in df.x])[keep].sum())
        duck = DuckDBBackend(open_source("rows.csv"), schema).result(ClippedSum("x"))
        pand = PandasBackend(load_table(data_dir / "rows.csv"), schema).result(ClippedSum("x"))
        assert duck == pand
        assert duck.n == int(keep.sum()) <= 300 * c
        assert duck.value == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------ edge cases
EDGE_CSV = (
    "pid,x,cat,flag\n"
    "1,100,A,yes\n"       # plain
    "1,-50,A,no\n"        # below L → clipped to 0
    "1,300000,B,1\n"      # above U; person 1 has 3 rows > c = 2
    "2,,B,0\n"            # NULL (empty cell)
    "3,NaN,Z,TRUE\n"      # NaN (CSV NA token); undeclared category
    "4,inf,,maybe\n"      # +inf; empty category; not a boolean
    "5,-inf, B ,f\n"      # −inf; category with blanks
    "6,abc,NA,\n"         # text in numeric; NA token category; empty boolean
    "7,+007,b,Y\n"        # "+007" = 7; category case differs (undeclared)
    "8, 7.0 ,C,n\n"       # blanks around a number
    "9,1e3,\"A\",T\n"     # exponent; quoted category
    "010,n/a,C,no\n"      # numeric NA token; id "010" = person 10
)


def edge_schema(rule: MissingRule, c: int = 2, other: bool = False) -> Schema:
    cat_rule = MissingRule(MissingAction.REPLACE, "C") if rule.action is MissingAction.REPLACE else DROP
    flag_rule = MissingRule(MissingAction.REPLACE, True) if rule.action is MissingAction.REPLACE else DROP
    return Schema(
        (
            Column("pid", ColumnKind.IDENTIFIER),
            Column("x", ColumnKind.NUMERIC, rule, 0, 200_000),
            Column("cat", ColumnKind.CATEGORICAL, cat_rule, categories=("A", "B", "C", "D"), other_bin=other),
            Column("flag", ColumnKind.BOOLEAN, flag_rule),
        ),
        unit=PrivacyUnit("pid", c),
        salt="edge",
    )


def edge_queries() -> list[Query]:
    L, E = M.LAPLACE, M.EXPONENTIAL
    return [
        q("n", QueryKind.COUNT, None, L),
        q("n_x", QueryKind.COUNT, "x", L),
        q("n_b", QueryKind.COUNT, None, L, predicate=Predicate("cat", PredicateOp.EQ, "B")),
        q("n_notb", QueryKind.COUNT, None, L, predicate=Predicate("cat", PredicateOp.NE, "B")),
        q("n_x7", QueryKind.COUNT, None, L, predicate=Predicate("x", PredicateOp.LE, 7)),
        q("sum", QueryKind.SUM, "x", L),
        q("mean", QueryKind.MEAN, "x", L),
        q("cat", QueryKind.HISTOGRAM, "cat", L),
        q("x_hist", QueryKind.HISTOGRAM, "x", L, bin_edges=(0, 7, 100, 1000, 200_000)),
        q("x_med", QueryKind.MEDIAN, "x", E, candidates=11),
        q("flag", QueryKind.PROPORTION, "flag", L),
        q("synth", QueryKind.SYNTHETIC_DATA, None, M.MST, columns=["x", "cat", "flag"], bins=3),
    ]


@pytest.mark.parametrize("c", [1, 2, 3])
@pytest.mark.parametrize("action", ["drop", "replace"])
def test_edge_case_table_identical_in_every_backend(
    data_dir: Path, spark: Any, action: str, c: int
) -> None:
    (data_dir / "edge.csv").write_text(EDGE_CSV)
    rule = MissingRule(MissingAction.REPLACE, 5.0) if action == "replace" else DROP
    schema = edge_schema(rule, c)
    backends = three("edge.csv", schema, spark) if c == 2 else {
        "pandas": PandasBackend(load_table(data_dir / "edge.csv"), schema),
        "duckdb": DuckDBBackend(open_source("edge.csv"), schema),
    }
    got = assert_identical(backends, edge_queries())
    if c == 3 and action == "drop":
        # hand-computed: no truncation (person 1 has 3 rows); usable x = 100, −50→0,
        # 300000→200000, +007→7, " 7.0 "→7, 1e3→1000 (6 rows); NULL, NaN, ±inf, n/a are
        # missing (5), "abc" is invalid (1): dropped = 6.
        assert got["sum"] == SumAggregate(201_114.0, 6, 2, 6)
        # cat: A ×3 (one quoted), B ×3 (" B " stripped), C ×2, D ×0; Z, "b" undeclared; "", NA missing
        assert got["cat"] == BinCounts(("A", "B", "C", "D"), (3, 3, 2, 0), None, 2, 2)


def test_edge_case_other_bin_and_dataframe_source(spark: Any) -> None:
    """A DataFrame source (object columns) reads cells like the loader's text."""
    import io

    df = pd.read_csv(io.StringIO(EDGE_CSV), dtype=str, keep_default_na=False)
    df = df.replace({"": None})
    schema = edge_schema(DROP, 2, other=True)
    from planner.data.backends.spark_backend import SparkBackend

    backends = {
        "pandas": PandasBackend(df, schema),
        "duckdb": DuckDBBackend(df, schema),
        "spark": SparkBackend(df, schema, spark=spark),
    }
    assert_identical(backends, edge_queries())


def test_typed_dataframe_numbers_and_text_agree() -> None:
    """+007, 7 and 7.0 all mean 7 (typed or text), in a category and in a numeric column."""
    schema = Schema(
        (
            Column("k", ColumnKind.CATEGORICAL, DROP, categories=("7", "2.5", "inf", "x")),
            Column("v", ColumnKind.NUMERIC, DROP, 0, 10),
        )
    )
    text = pd.DataFrame({"k": ["+007", "7.0", "2.50", "Infinity", "x ", "1e400", "nan"],
                         "v": ["+007", "7.0", "2.50", "1e1", "x", "1e-400", "nan"]})
    typed = pd.DataFrame({"k": [7, 7.0, 2.5, np.inf, None, np.inf, np.nan],
                          "v": [7, 7.0, 2.5, 10.0, None, 0.0, np.nan]})
    qs = [q("k", QueryKind.HISTOGRAM, "k", M.LAPLACE), q("s", QueryKind.SUM, "v", M.LAPLACE)]
    for frame in (text, typed):
        a = exact_aggregates(PandasBackend(frame, schema), qs)
        b = exact_aggregates(DuckDBBackend(frame, schema), qs)
        assert a == b
    k = exact_aggregates(PandasBackend(text, schema), qs)["k"]
    assert isinstance(k, BinCounts) and k.counts == (2, 1, 2, 1)  # 1e400 overflows to inf


def test_whitespace_rule_matches_pyarrow() -> None:
    """The SQL trim pattern strips exactly what pyarrow's utf8_trim_whitespace strips."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from planner.data.backends.sql import WHITESPACE

    chars = [chr(i) for i in range(0x3100)]
    stripped = pc.utf8_trim_whitespace(pa.array([f"{ch}a{ch}" for ch in chars])).to_pylist()
    pyarrow_ws = {ch for ch, s in zip(chars, stripped, strict=True) if s == "a"}
    assert pyarrow_ws == set(WHITESPACE)


def test_csv_null_tokens_match_pyarrow() -> None:
    import pyarrow.csv as pacsv

    from planner.data.backends.sql import CSV_NULL_TOKENS

    assert set(CSV_NULL_TOKENS) == set(pacsv.ConvertOptions().null_values)


def test_make_backend_names_and_uploads(data_dir: Path) -> None:
    (data_dir / "edge.csv").write_text(EDGE_CSV)
    schema = edge_schema(DROP)
    assert {"pandas", "duckdb"} <= set(available_backends())
    a = exact_aggregates(make_backend("pandas", "edge.csv", schema), edge_queries())
    b = make_backend("duckdb", "edge.csv", schema)
    c = make_backend("duckdb", EDGE_CSV.encode(), schema)  # an upload, spilled to a temp file
    assert exact_aggregates(b, edge_queries()) == a == exact_aggregates(c, edge_queries())
    c.close()  # type: ignore[attr-defined]


def test_spark_session_available_or_clear_error() -> None:
    from planner.data.backends.spark_backend import java_available

    if shutil.which("java") is None and not java_available():
        from planner.core.errors import PlannerError

        with pytest.raises(PlannerError, match="Java"):
            make_backend("spark", "census.csv", Schema.load(DATA / "census.schema.json"))


# ------------------------------------------------------------------ typed Parquet = CSV text
# The SQL compiler specialises on the engine's column types (planner/data/backends/sql/reading.py):
# integer person ids are checked for duplicates with a bitmap, integer-valued columns are
# binned per value in Python and summed without fractional parts, evenly spaced edges
# are computed arithmetically. The same cells as typed Parquet and as CSV text must give
# the same aggregates as pandas (the reference) in every backend.
TYPED_ROWS: list[tuple[Any, ...]] = [
    # pid, x (float), n (int), cat, flag
    (1, 100.0, 30, "A", True),
    (1, -50.0, 17, "A", False),            # x below L → 0; n below L → 18
    (2, 300_000.0, 95, " B ", True),       # above U → U (both); blanks around a category
    (3, None, None, "Z", None),            # NULL everywhere; undeclared category
    (4, float("nan"), 27, "", False),      # NaN; n on the edge 27; empty category
    (5, float("inf"), 90, None, True),     # +inf; n = U (last edge, closed)
    (6, float("-inf"), 18, "C", False),    # −inf; n = L (first edge)
    (7, 7.0, 45, "B", True),               # on the x edge 7 and the n edge 45
    (8, 0.1, 63, "b", None),               # a fraction; "b" is undeclared (case)
    (9, 1e-320, 81, "A", True),            # subnormal: its bits sit in the f2 part
    (10, 200_000.0, 54, "C", False),       # x = U exactly; n on the edge 54
    (11, 123.456, 36, "D", True),
]
TYPED_HEADER = "pid,x,n,cat,flag\n"


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)  # nan, inf, -inf, 1e-320: the loader's and the engines' tokens
    s = str(v)
    return f'"{s}"' if s.strip() != s else s


def typed_files(folder: Path, rows: list[tuple[Any, ...]], stem: str = "typed") -> None:
    """The same rows as CSV text and as Parquet with int64 / float64 / string / bool columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = [",".join(_csv_cell(v) for v in r) for r in rows]
    (folder / f"{stem}.csv").write_text(TYPED_HEADER + "\n".join(lines) + "\n")
    cols = list(zip(*rows, strict=True))
    table = pa.table({
        "pid": pa.array(cols[0], type=pa.int64()),
        "x": pa.array(cols[1], type=pa.float64()),
        "n": pa.array(cols[2], type=pa.int64()),
        "cat": pa.array(cols[3], type=pa.string()),
        "flag": pa.array(cols[4], type=pa.bool_()),
    })
    pq.write_table(table, folder / f"{stem}.parquet")


def typed_schema(c: int = 1, rule: MissingRule = DROP) -> Schema:
    replace = rule.action is MissingAction.REPLACE
    n_rule = MissingRule(MissingAction.REPLACE, 40.0) if replace else DROP
    return Schema(
        (
            Column("pid", ColumnKind.IDENTIFIER),
            Column("x", ColumnKind.NUMERIC, rule, 0, 200_000),
            Column("n", ColumnKind.NUMERIC, n_rule, 18, 90),
            Column("cat", ColumnKind.CATEGORICAL, DROP, categories=("A", "B", "C", "D", "E")),
            Column("flag", ColumnKind.BOOLEAN, DROP),
        ),
        unit=PrivacyUnit("pid", c),
        salt="typed",
    )


def typed_queries() -> list[Query]:
    L, E = M.LAPLACE, M.EXPONENTIAL
    return [
        q("count", QueryKind.COUNT, None, L),
        q("count_x", QueryKind.COUNT, "x", L),
        q("n_ge", QueryKind.COUNT, None, L, predicate=Predicate("n", PredicateOp.GE, 45)),
        q("x_sum", QueryKind.SUM, "x", L),
        q("x_mean", QueryKind.MEAN, "x", L),
        q("n_sum", QueryKind.SUM, "n", L),
        q("cat", QueryKind.HISTOGRAM, "cat", L),
        q("flag", QueryKind.PROPORTION, "flag", L),
        # float column: evenly spaced edges (computed in SQL), irregular edges (CASE chain)
        q("x_hist", QueryKind.HISTOGRAM, "x", L, bins=4),
        q("x_edges", QueryKind.HISTOGRAM, "x", L, bin_edges=(0, 7, 100, 1000, 200_000)),
        q("x_med", QueryKind.MEDIAN, "x", E, candidates=11),
        # integer column: binned per value; edges at 18, 27, …, 90 and irregular ones
        q("n_hist", QueryKind.HISTOGRAM, "n", L, bins=8),
        q("n_edges", QueryKind.HISTOGRAM, "n", L, bin_edges=(18, 45, 54, 60, 90)),
        q("n_med", QueryKind.MEDIAN, "n", E, candidates=73),
        q("n_q", QueryKind.QUANTILE, "n", E, alphas=(0.25,), step=9.0),
        q("synth", QueryKind.SYNTHETIC_DATA, None, M.MST, columns=["x", "n", "cat", "flag"], bins=8),
    ]


@pytest.mark.parametrize("c", [1, 2])
@pytest.mark.parametrize("action", ["drop", "replace"])
def test_typed_parquet_and_csv_identical_in_every_backend(
    data_dir: Path, spark: Any, action: str, c: int
) -> None:
    rows = [*TYPED_ROWS, (2, 5.0, 85, "A", True), (2, 6.0, 88, "B", False)]  # person 2: 3 rows
    typed_files(data_dir, rows)
    rule = MissingRule(MissingAction.REPLACE, 5.0) if action == "replace" else DROP
    schema = typed_schema(c, rule)
    qs = typed_queries()
    csv = three("typed.csv", schema, spark)
    parquet = three("typed.parquet", schema, spark)
    expected = assert_identical(csv, qs)
    assert assert_identical(parquet, qs) == expected
    assert parquet["duckdb"].column_report() == csv["pandas"].column_report()
    # person 1 has 2 rows and person 2 has 3: c = 1 cuts 1 + 2 rows, c = 2 cuts 0 + 1
    assert csv["pandas"].rows_truncated == {1: 3, 2: 1}[c]
    # edges inside [L, U] (only through bin_counts): values outside them are "unbinned"
    for col, edges in [("n", (20.0, 45.0, 54.0, 60.0)), ("x", (1.0, 7.0, 100.0))]:
        want = csv["pandas"].result(Bins(col, edges))
        assert want.unbinned > 0
        for b in (*csv.values(), *parquet.values()):
            assert b.result(Bins(col, edges)) == want
    if action == "drop" and c == 2:
        # hand-computed from the rows: the NULL n is dropped; edges 18, 27, …, 90; usable
        # n of persons 1, 3–11: 30, 18 (17 clipped), 27, 90, 18, 45, 63, 81, 54, 36, and 2
        # of person 2's 90 (95 clipped), 85, 88 (whichever is cut, all in [81, 90])
        s = expected["n_sum"]
        assert isinstance(s, SumAggregate) and (s.n, s.dropped) == (12, 1)
        hist = expected["n_hist"]
        assert isinstance(hist, BinCounts)
        assert hist.counts == (2, 2, 1, 1, 1, 1, 0, 4)


def test_typed_parquet_takes_the_specialised_paths(data_dir: Path) -> None:
    """The typed file really exercises the person check, per-value bins and integer sums."""
    from planner.data.backends.sql import arithmetic_step

    typed_files(data_dir, TYPED_ROWS)
    schema = typed_schema(1)
    qs = typed_queries()
    duck = DuckDBBackend(open_source("typed.parquet"), schema)
    text = DuckDBBackend(open_source("typed.csv"), schema)
    k_x, k_n = schema.names.index("x"), schema.names.index("n")
    # person 1 has two rows > c = 1: the bitmap in the first statement cannot prove
    # "nobody over c", so a pass by person runs (int ids, and plain-digit text ids)
    for b in (duck, text):
        assert exact_aggregates(b, qs) is not None
        assert b.unit_check == "grouping" and b.rows_truncated == 1
    assert duck._bins.value_counted(k_n) and not duck._bins.value_counted(k_x)
    assert not text._bins.value_counted(k_n)  # CSV text: the SQL bin keys
    assert arithmetic_step(bin_edges(typed_queries()[8], schema)) == 50_000.0  # type: ignore[arg-type]
    assert exact_aggregates(duck, qs) == exact_aggregates(text, qs)
    # without person 1's second row nobody is over c: proven inside the one statement
    typed_files(data_dir, TYPED_ROWS[1:], "unique")
    for name in ("unique.parquet", "unique.csv"):
        b = DuckDBBackend(open_source(name), schema)
        prefetch(b, qs, report=True, digest=True)
        assert (b.unit_check, b.passes, b.rows_truncated) == ("bitmap", 1, 0)


def test_person_check_bitmap_agrees_with_grouping(data_dir: Path) -> None:
    """Bitmap proof (one pass) or the pass by person, for unique, duplicate, odd and
    sparse ids: the same rows as pandas either way."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def backend(ids: list[Any], c: int, as_text: bool = False) -> DuckDBBackend:
        x = [float(i) for i in range(len(ids))]
        typ = pa.string() if as_text else pa.int64()
        pq.write_table(pa.table({"pid": pa.array(ids, type=typ), "x": x}), data_dir / "ids.parquet")
        schema = Schema(
            (Column("pid", ColumnKind.IDENTIFIER), Column("x", ColumnKind.NUMERIC, DROP, 0, 100)),
            unit=PrivacyUnit("pid", c), salt="ids",
        )
        return DuckDBBackend(open_source("ids.parquet"), schema)

    cases: list[tuple[list[Any], int, str, int]] = [
        # ids, c, how the check decides, rows truncated (by hand)
        ([5, 3, 4, -2], 1, "bitmap", 0),
        ([5, 3, 5, -2], 1, "grouping", 1),  # 5 twice > c = 1
        ([5, 3, 5, -2], 2, "grouping", 0),  # duplicates but none over c = 2
        (["7", "-12", "0", "007x"], 1, "grouping", 0),  # a text id that is no integer
        (["7", "-12", "0"], 1, "bitmap", 0),  # plain-digit text ids
        (["7", "007"], 1, "grouping", 1),  # the same person
        ([0, 1 << 40], 1, "grouping", 0),  # equal residues mod the bitmap's 2^16 bits
        ([0, 1 << 40, 7], 1, "grouping", 0),
    ]
    for ids, c, how, cut in cases:
        b = backend(ids, c, isinstance(ids[0], str))
        p = PandasBackend(load_table(data_dir / "ids.parquet"), b.schema)
        assert b.result(ClippedSum("x")) == p.result(ClippedSum("x"))
        assert (b.rows, b.rows_truncated) == (p.rows, p.rows_truncated) == (len(ids) - cut, cut)
        assert b.unit_check == how, ids
    with pytest.raises(DataError, match="no value"):  # a NULL id, found in the first statement
        backend([1, None, 2], 1).result(Count())


@pytest.mark.parametrize(
    ("xs", "bound"),
    [
        # integer parts beyond 2^53 (up to the 2^62 limit), signed, clipped (2^61 → 2^60)
        ([2.0**55 + 8, -(2.0**58), 0.1, 3.5e17, -1.25, 2.0**61, -7.0, 2.0**53 + 2], 2.0**60),
        # a small total: its last bits come from the f2 parts (bits below 2^-53). The
        # exact sum 0.400000001 differs from both the float sum 0.40000000100000005 and
        # the sum without f2, 0.4000000009999999 (computed with fractions.Fraction)
        ([0.3, 0.1, 1e-9], 1.0),
    ],
)
def test_exact_sums_identical_in_every_backend(
    data_dir: Path, spark: Any, xs: list[float], bound: float
) -> None:
    import math

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"pid": list(range(len(xs))), "x": xs}), data_dir / "s.parquet")
    (data_dir / "s.csv").write_text("pid,x\n" + "".join(f"{i},{v!r}\n" for i, v in enumerate(xs)))
    x = Column("x", ColumnKind.NUMERIC, DROP, -bound, bound)
    pid = Column("pid", ColumnKind.IDENTIFIER)
    schema = Schema((pid, x), unit=PrivacyUnit("pid", 1), salt="sums")
    qs = [q("s", QueryKind.SUM, "x", M.LAPLACE)]
    got = assert_identical(three("s.parquet", schema, spark), qs)
    assert assert_identical(three("s.csv", schema, spark), qs) == got
    s = got["s"]
    # math.fsum: an independent, correctly rounded sum of the clipped values
    assert isinstance(s, SumAggregate)
    assert s.value == math.fsum(min(max(v, -bound), bound) for v in xs)
    if bound == 1.0:  # the values above: exact, unlike Python's float sum
        assert (s.value, sum(xs)) == (0.400000001, 0.40000000100000005)


def testarithmetic_step_recognises_linspace_and_step_grids() -> None:
    from planner.data.backends.sql import arithmetic_step

    # numpy.linspace computes i·step + start (the last point is set to stop)
    assert arithmetic_step(np.linspace(18, 90, 1001)) == (90 - 18) / 1000
    assert arithmetic_step(np.linspace(0, 200_000, 1001)) == 200.0
    # a declared step: L + step·i, with U appended
    grid = np.append(18 + 7.0 * np.arange(11, dtype=np.float64), 90.0)
    assert arithmetic_step(grid) == 7.0
    # one edge one ulp off: no formula (the edge array is read instead)
    e = np.linspace(0, 1, 11)
    e[4] = np.nextafter(e[4], 1)
    assert arithmetic_step(e) is None
    assert arithmetic_step(np.array([0.0, 1.0, 3.0, 4.0])) is None


def test_edges_read_from_the_array_identical_in_every_backend(data_dir: Path, spark: Any) -> None:
    """Evenly spaced but not ``i·step + e₀`` edges: ties one ulp either side of every edge."""
    e = np.linspace(0, 1, 11)
    e[4] = np.nextafter(e[4], 1)  # still evenly spaced enough for the guess, not arithmetic
    from planner.data.backends.sql import arithmetic_step, uniform_guess_ok

    assert arithmetic_step(e) is None
    assert uniform_guess_ok(e, "right") and uniform_guess_ok(e, "left")
    xs = sorted({float(v) for t in e for v in (np.nextafter(t, -1), t, np.nextafter(t, 2))})
    lines = "".join(f"{i},{v!r}\n" for i, v in enumerate(xs))
    (data_dir / "ties.csv").write_text("pid,x\n" + lines)
    schema = Schema(
        (Column("pid", ColumnKind.IDENTIFIER), Column("x", ColumnKind.NUMERIC, DROP, 0, 1)),
        unit=PrivacyUnit("pid", 1), salt="ties",
    )
    qs = [
        q("h", QueryKind.HISTOGRAM, "x", M.LAPLACE, bin_edges=tuple(float(v) for v in e)),
        q("h10", QueryKind.HISTOGRAM, "x", M.LAPLACE, bins=10),
    ]
    backends = three("ties.csv", schema, spark)
    got = assert_identical(backends, qs)
    # by hand: an edge and the float above it open its bin, the float below closes the
    # previous one; −5e-324 clips to 0 (first bin), 1 + ulp clips to 1 (last bin, closed)
    h = got["h"]
    assert isinstance(h, BinCounts) and h.counts == (4, *[3] * 8, 5) and h.unbinned == 0
    # the same edges as quantile candidates (read from the array too): t_i counts the
    # values in (t_{i-1}, t_i]: the float above t_{i-1}, the float below t_i and t_i itself;
    # t_0 = 0 counts 0 and −5e-324 (clipped), t_10 = 1 also counts 1 + ulp (clipped)
    want = backends["pandas"].result(Candidates("x", e.tolist()))
    assert want.counts == (2, *[3] * 9, 4)
    for b in backends.values():
        assert b.result(Candidates("x", e.tolist())) == want


def test_grid_ties_on_arithmetic_edges_identical_in_every_backend(data_dir: Path, spark: Any) -> None:
    """``numpy.linspace`` grids (edges computed as i·step + e₀ in SQL): every grid point,
    one ulp either side, and the midpoints (far from every edge: the SQL backends' cheap
    branch) binned as pandas bins them, for a histogram whose last edge is the upper
    bound (range tests kept) and for a median, whose candidate counts and histogram over
    ``[*grid, top]`` share one key (top above the bound: range tests left out)."""
    grid = np.linspace(0, 1, 11)
    assert arithmetic_step(grid) is not None and arithmetic_step(np.append(grid, 1.1)) is not None
    xs = sorted({float(v) for t in grid for v in (np.nextafter(t, -1), t, np.nextafter(t, 2), t + 0.05)})
    lines = "".join(f"{i},{v!r}\n" for i, v in enumerate(xs))
    (data_dir / "grid.csv").write_text("pid,x\n" + lines)
    schema = Schema(
        (Column("pid", ColumnKind.IDENTIFIER), Column("x", ColumnKind.NUMERIC, DROP, 0, 1)),
        unit=PrivacyUnit("pid", 1), salt="grid",
    )
    E = M.EXPONENTIAL
    qs = [
        q("h10", QueryKind.HISTOGRAM, "x", M.LAPLACE, bins=10),
        q("med", QueryKind.MEDIAN, "x", E, candidates=11),
        q("q", QueryKind.QUANTILE, "x", E, alphas=(0.25,), candidates=11),
    ]
    backends = three("grid.csv", schema, spark)
    got = assert_identical(backends, qs)
    # by hand (edges 0, 0.1, …, 1 as linspace computes them): bin i holds e_i, the float
    # above it, the midpoint and the float below e_{i+1}; −5e-324 clips to 0 (bin 0);
    # the last bin also holds 1 and everything above it clipped to 1 (1 + ulp, 1.05)
    h = got["h10"]
    assert isinstance(h, BinCounts) and h.counts == (5, *[4] * 8, 7) and h.unbinned == 0
    # candidates t_i count (t_{i-1}, t_i]: the float above t_{i-1}, the midpoint below t_i,
    # the float below t_i and t_i itself; t_0 counts 0 and −5e-324; t_10 also 1 + ulp, 1.05
    want = backends["pandas"].result(Candidates("x", grid.tolist()))
    assert want.counts == (2, *[4] * 9, 6)
    for b in backends.values():
        assert b.result(Candidates("x", grid.tolist())) == want


# ------------------------------------------------------------------ bounding: ties, NULL, NaN
def tied_rows(seed: int = 11) -> pd.DataFrame:
    """People with 1–7 rows drawn from few distinct values: identical rows, ties on the cut.

    Columns: ``n`` integers (negative bound: signed row keys), ``x`` text numbers with
    NULL, NaN, ±inf and junk, ``big`` beyond 2⁵³ (the high integer part of the row key),
    ``cat`` with NULL and an undeclared value, ``flag`` with NULL, ``ref`` a second
    identifier with NULL. About half the people repeat one row (every column equal).
    """
    rng = np.random.default_rng(seed)
    rows: list[tuple[Any, ...]] = []
    for person in range(80):
        k = int(rng.integers(1, 8))
        pid = f"{person:03d}" if person % 3 else str(person)  # "007" and "7": one canonical id
        repeat = person % 2 == 0
        first = None
        for _ in range(k):
            row = (
                pid,
                int(rng.choice([-12, -3, 0, 4, 9, 15])) if rng.random() > 0.1 else None,
                str(rng.choice(["1.5", "2", "", "NaN", "inf", "-inf", "abc", "7.25", "1e3"])),
                float(rng.choice([2.0**53 + 2, -3.5, 1e15 + 0.5, 0.0])) if rng.random() > 0.1 else None,
                rng.choice(["A", "B", "Z", None]),
                rng.choice(["yes", "no", None]),
                rng.choice(["r1", "r2", None]),
            )
            if repeat and first is not None and rng.random() < 0.8:
                row = first
            first = first or row
            rows.append(row)
    return pd.DataFrame(rows, columns=["pid", "n", "x", "big", "cat", "flag", "ref"])


def tied_schema(c: int) -> Schema:
    return Schema(
        (
            Column("pid", ColumnKind.IDENTIFIER),
            Column("n", ColumnKind.NUMERIC, MissingRule(MissingAction.REPLACE, 1.0), -10, 10),
            Column("x", ColumnKind.NUMERIC, DROP, 0, 500.5),
            Column("big", ColumnKind.NUMERIC, DROP, -1e16, 1e16),
            Column("cat", ColumnKind.CATEGORICAL, DROP, categories=("A", "B", "C"), other_bin=True),
            Column("flag", ColumnKind.BOOLEAN, DROP),
            Column("ref", ColumnKind.IDENTIFIER),
        ),
        unit=PrivacyUnit("pid", c),
        salt="ties",
    )


def tied_queries() -> list[Query]:
    L, E = M.LAPLACE, M.EXPONENTIAL
    return [
        q("n", QueryKind.COUNT, None, L),
        q("n_x", QueryKind.COUNT, "x", L),
        q("n_neg", QueryKind.COUNT, None, L, predicate=Predicate("n", PredicateOp.LT, 0)),
        q("sum_n", QueryKind.SUM, "n", L),
        q("sum_x", QueryKind.SUM, "x", L),
        q("sum_big", QueryKind.SUM, "big", L),
        q("cat", QueryKind.HISTOGRAM, "cat", L),
        q("n_hist", QueryKind.HISTOGRAM, "n", L, bins=4),
        q("x_med", QueryKind.MEDIAN, "x", E, candidates=21),
        q("flag", QueryKind.PROPORTION, "flag", L),
    ]


@pytest.mark.parametrize("c", [1, 2, 3])
def test_bounding_with_ties_and_missing_cells_identical_in_every_backend(
    data_dir: Path, spark: Any, c: int
) -> None:
    """Kept rows agree (pandas, DuckDB, Spark; CSV and typed Parquet) when identical rows,
    NULL and NaN cells sit on both sides of the cut; the tie branch is exercised."""
    df = tied_rows()
    df.to_csv(data_dir / "ties.csv", index=False)
    typed = df.copy()
    typed["n"] = typed["n"].astype("Int64")  # an integer column: integer-valued row keys
    typed.to_parquet(data_dir / "ties.parquet")
    schema = tied_schema(c)
    qs = tied_queries()
    csv = three("ties.csv", schema, spark)
    expected = assert_identical(csv, qs)
    pandas_b = csv["pandas"]
    assert pandas_b.rows_truncated > 0
    duck = csv["duckdb"]
    assert isinstance(duck, DuckDBBackend)
    # some person's c-th and (c+1)-th rows are identical: the ranked branch runs
    assert duck._scan.bounded and duck._bound.thresholds()[1]
    parquet = {"pandas": pandas_b, "duckdb": DuckDBBackend(open_source("ties.parquet"), schema)}
    assert assert_identical(parquet, qs) == expected
    # the kept rows themselves: per kept row key, the same number of rows
    keep = bound_contributions(load_table(data_dir / "ties.csv"), schema)
    assert pandas_b.rows == int(keep.sum())


def test_bounding_without_ties_takes_the_single_pass(data_dir: Path) -> None:
    """Distinct rows: no tie on the cut, so ``kept`` is one filtering pass (no ranking)."""
    rng = np.random.default_rng(5)
    n = 900
    df = pd.DataFrame({"pid": rng.integers(0, 200, n).astype(str),
                       "x": [repr(float(v)) for v in rng.uniform(-50, 50, n)]})
    df.to_csv(data_dir / "distinct.csv", index=False)
    for c in (1, 2, 3):
        schema = Schema(
            # nothing clipped: every row key distinct (clipped values would tie)
            (Column("pid", ColumnKind.IDENTIFIER), Column("x", ColumnKind.NUMERIC, DROP, -60, 60)),
            unit=PrivacyUnit("pid", c), salt="single",
        )
        duck = DuckDBBackend(open_source("distinct.csv"), schema)
        assert duck.rows_truncated > 0  # the first statement finds people over c
        assert duck._scan.bounded and not duck._bound.thresholds()[1]
        pand = PandasBackend(load_table(data_dir / "distinct.csv"), schema)
        assert duck.result(ClippedSum("x")) == pand.result(ClippedSum("x"))
        assert (duck.rows, duck.rows_truncated) == (pand.rows, pand.rows_truncated)


def test_duckdb_memory_limit_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.core.errors import PlannerError

    schema = Schema((Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),))
    frame = pd.DataFrame({"age": ["30", "150", None]})
    monkeypatch.setenv("PLANNER_DUCKDB_MEMORY_LIMIT", "300MB")
    with DuckDBBackend(frame, schema) as b:
        # DuckDB reports 300 MB (10^6 bytes each) in MiB: 300e6 / 2^20 = 286.1
        assert b._con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "286.1 MiB"
        assert b.result(ClippedSum("age")).value == 130.0  # 30 + 150 clipped to 100
    monkeypatch.setenv("PLANNER_DUCKDB_MEMORY_LIMIT", "lots")
    with pytest.raises(PlannerError, match="PLANNER_DUCKDB_MEMORY_LIMIT"):
        DuckDBBackend(frame, schema)


# ------------------------------------------------------------------ content digest
# planner/data/backends/digest.py: the dataset's content digest, computed in the scan. Every
# backend must give the same hex digest for the same table (a); it must not change with
# row order, line endings, a final newline, CSV versus Parquet, undeclared columns (b);
# and it must change when any declared cell does (c).
def digests(source: str, schema: Schema, spark: Any = None) -> dict[str, str]:
    """Hex digest per backend (DuckDB twice: its hash() and the arithmetic spelled out)."""
    src = open_source(source)
    frames = [load_table(p) for p in src.files]  # type: ignore[union-attr]
    frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    out = {"pandas": PandasBackend(frame, schema).content_digest().hexdigest}
    duck = DuckDBBackend(src, schema)
    out["duckdb"] = duck.content_digest().hexdigest
    assert duck._compiler.native_hash()  # DuckDB's hash() is the digest's row hash (self-test)
    arith = DuckDBBackend(src, schema)
    arith._hash_native = False
    out["duckdb arithmetic"] = arith.content_digest().hexdigest
    if spark is not None:
        from planner.data.backends.spark_backend import SparkBackend

        out["spark"] = SparkBackend(src, schema, spark=spark).content_digest().hexdigest
    return out


def one_digest(d: dict[str, str]) -> str:
    assert len(set(d.values())) == 1, d
    return next(iter(d.values()))


def test_content_digest_identical_in_every_backend(data_dir: Path, spark: Any) -> None:
    """(a) on the edge-case table (NULL, NaN, ±inf, text in numbers, NA tokens, undeclared
    and blank-padded categories, boolean spellings) and the typed table as CSV and Parquet."""
    (data_dir / "edge.csv").write_text(EDGE_CSV)
    one_digest(digests("edge.csv", edge_schema(DROP), spark))
    typed_files(data_dir, TYPED_ROWS)
    one_digest(digests("typed.csv", typed_schema(1), spark))
    one_digest(digests("typed.parquet", typed_schema(1), spark))


def test_content_digest_identical_on_generated_and_tied_tables(data_dir: Path) -> None:
    """(a) for pandas and DuckDB on larger tables: odd cells, duplicate people, identical rows."""
    generated().to_csv(data_dir / "gen.csv", index=False)
    one_digest(digests("gen.csv", generated_schema()))
    df = tied_rows()
    df.to_csv(data_dir / "ties.csv", index=False)
    typed = df.copy()
    typed["n"] = typed["n"].astype("Int64")
    typed.to_parquet(data_dir / "ties.parquet")
    assert one_digest(digests("ties.csv", tied_schema(2))) == one_digest(
        digests("ties.parquet", tied_schema(2))
    )


def test_content_digest_ignores_row_order(data_dir: Path) -> None:
    text = EDGE_CSV.splitlines()
    (data_dir / "a.csv").write_text("\n".join(text) + "\n")
    (data_dir / "b.csv").write_text("\n".join([text[0], *reversed(text[1:])]) + "\n")
    schema = edge_schema(DROP)
    assert one_digest(digests("a.csv", schema)) == one_digest(digests("b.csv", schema))


def test_content_digest_ignores_line_endings_and_the_final_newline(data_dir: Path) -> None:
    lines = EDGE_CSV.splitlines()
    (data_dir / "lf.csv").write_text("\n".join(lines) + "\n")
    (data_dir / "crlf.csv").write_bytes(("\r\n".join(lines) + "\r\n").encode())
    (data_dir / "nofinal.csv").write_text("\n".join(lines))
    schema = edge_schema(DROP)
    want = one_digest(digests("lf.csv", schema))
    assert one_digest(digests("crlf.csv", schema)) == want
    assert one_digest(digests("nofinal.csv", schema)) == want


def test_content_digest_same_for_csv_and_parquet_of_the_same_values(data_dir: Path, spark: Any) -> None:
    """Typed Parquet (int64, float64 with NaN/±inf/subnormal, strings with blanks, bool with
    NULL) and its CSV text ("true", "nan", quoted " B ") hold the same normalised values."""
    typed_files(data_dir, TYPED_ROWS)
    schema = typed_schema(1)
    assert one_digest(digests("typed.csv", schema, spark)) == one_digest(
        digests("typed.parquet", schema, spark)
    )


def test_content_digest_ignores_undeclared_columns(data_dir: Path) -> None:
    df = pd.read_csv(io.StringIO(EDGE_CSV), dtype=str, keep_default_na=False)
    df.to_csv(data_dir / "plain.csv", index=False)
    wide = df.assign(extra=[f"secret {i}" for i in range(len(df))], other=1.5)
    wide[["extra", "flag", "cat", "other", "x", "pid"]].to_csv(data_dir / "wide.csv", index=False)
    changed = wide.assign(extra="something else")
    changed[["extra", "flag", "cat", "other", "x", "pid"]].to_csv(data_dir / "wide2.csv", index=False)
    schema = edge_schema(DROP)
    want = one_digest(digests("plain.csv", schema))
    assert one_digest(digests("wide.csv", schema)) == want
    assert one_digest(digests("wide2.csv", schema)) == want


def _changed_cells(rows: list[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
    """One table per declared cell of ``rows`` with that cell changed: a number by a small
    step, text by one character, a missing cell made present, a present one missing."""
    out = []
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            if v is None:
                new: Any = [5, 1.25, 40, "A", True][j]
            elif isinstance(v, bool):
                new = not v
            elif isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
                new = 1.5 if math.isnan(v) else -v  # NaN is missing like NULL: make it present
            elif isinstance(v, (int, float)):
                new = v + 1 if j != 1 else float(np.nextafter(v, np.inf))  # x: one ulp
            else:
                new = v + "x"
            changed = list(row)
            changed[j] = new
            out.append([*rows[:i], tuple(changed), *rows[i + 1:]])
    return out


def test_content_digest_changes_when_any_declared_cell_changes(data_dir: Path) -> None:
    """(c) for every one of the typed table's 60 cells, in Parquet (pandas and DuckDB), and
    for whole-row and swap changes; the row order stays the same in every variant."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = typed_schema(1)

    def write(rows: list[tuple[Any, ...]], name: str) -> None:
        cols = list(zip(*rows, strict=True))
        pq.write_table(pa.table({
            "pid": pa.array(cols[0], type=pa.int64()), "x": pa.array(cols[1], type=pa.float64()),
            "n": pa.array(cols[2], type=pa.int64()), "cat": pa.array(cols[3], type=pa.string()),
            "flag": pa.array(cols[4], type=pa.bool_()),
        }), data_dir / name)

    write(TYPED_ROWS, "base.parquet")
    base = one_digest(digests("base.parquet", schema))
    variants = _changed_cells(TYPED_ROWS)
    assert len(variants) == 12 * 5
    seen = {base}
    for v, rows in enumerate(variants):
        write(rows, f"v{v}.parquet")
        d = one_digest(digests(f"v{v}.parquet", schema))
        assert d not in seen, f"cell change #{v} left the digest unchanged"
        seen.add(d)
    swapped = list(TYPED_ROWS)
    a, b = swapped[0], swapped[1]  # swap the x values of two rows: same column multiset
    swapped[0], swapped[1] = (a[0], b[1], *a[2:]), (b[0], a[1], *b[2:])
    write(swapped, "swap.parquet")
    write([*TYPED_ROWS, TYPED_ROWS[0]], "dup.parquet")  # one row twice
    write(TYPED_ROWS[1:], "drop.parquet")
    for name in ("swap.parquet", "dup.parquet", "drop.parquet"):
        assert one_digest(digests(name, schema)) not in seen, name


def test_content_digest_changes_with_text_cells_of_a_csv(data_dir: Path) -> None:
    """(c) for text the fast paths do not read: an undeclared category, invalid text in a
    numeric or boolean column, a blank becoming a value, a new spelling of a category."""
    schema = edge_schema(DROP)
    (data_dir / "edge.csv").write_text(EDGE_CSV)
    base = one_digest(digests("edge.csv", schema))
    for old, new in [("3,NaN,Z,", "3,NaN,Y,"), ("6,abc,", "6,abd,"), (",maybe\n", ",perhaps\n"),
                     ("2,,B", "2,5,B"), ("4,inf,,", "4,inf,A,"), ("010,n/a", "011,n/a"),
                     ("5,-inf, B ,", "5,-inf,B2,")]:
        assert old in EDGE_CSV
        (data_dir / "changed.csv").write_text(EDGE_CSV.replace(old, new, 1))
        assert one_digest(digests("changed.csv", schema)) != base, (old, new)
    # the same normalised values: "010" is person 10, " B " is category B, "NA" is missing
    for old, new in [("010,n/a", "10,n/a"), ("5,-inf, B ,", "5,-inf,B,"), ("6,abc,NA,", "6,abc,,")]:
        (data_dir / "same.csv").write_text(EDGE_CSV.replace(old, new, 1))
        assert one_digest(digests("same.csv", schema)) == base, (old, new)


def test_content_digest_is_private_in_repr() -> None:
    from planner.data.backends.digest import ContentDigest

    d = ContentDigest(3, "ab" * 32)
    assert "ab" * 4 not in repr(d) and repr(d) == "ContentDigest(rows=3)"


def test_csv_fast_paths_read_odd_cells_like_pandas(data_dir: Path) -> None:
    """The fast paths' guard (planner/data/backends/sql/dialect.py: Dialect.number_guard) on every one-
    and two-character string over the characters a number can contain and the ones
    DuckDB's cast also takes ('_', '(', signs, blanks, letters), and on 4,000 numbers
    with one or two characters inserted, replaced or removed (a fixed seed): pandas and
    DuckDB agree on every count, sum and digest, in a numeric, a
    categorical and an identifier column."""
    import csv
    import itertools
    import random

    alphabet = "0123456789.eE+-_( ainfx"
    cells = ["".join(p) for n in (1, 2) for p in itertools.product(alphabet, repeat=n)]
    cells += ["1_000", "nan(1)", "+-1", " +-1", "1e400", "1e-400", "-0", "+007", "7.", ".5e1",
              "Infinity", "-inf", "NaN", "NA", "none", "N/A", "\u00a07", "7\u2003", "0x10",
              "-nan", "-nan(1)", "-NaN", "-Infinity", "-1_0", "-.5", "/5", "-+5", "5\u0301", "-iNf"]
    rng = random.Random(17)
    extra = alphabet + "/)NIF\t\u00a0\u0301"
    for _ in range(4000):
        c = (rng.choice(["", "-", "-", "+", "."]) + str(rng.randint(0, 10**rng.randint(1, 9)))
             + rng.choice(["", "", "." + str(rng.randint(0, 999)), "e" + str(rng.randint(-400, 400))]))
        for _ in range(rng.choice([1, 1, 2])):
            i = rng.randint(0, len(c))
            op = rng.randint(0, 2)
            c = (c[:i] + rng.choice(extra) + c[i:] if op == 0 else
                 c[:max(i - 1, 0)] + rng.choice(extra) + c[i:] if op == 1 else c[:max(i - 1, 0)] + c[i:])
        cells.append(c)
    with (data_dir / "odd.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["pid", "x", "cat"])
        for i, c in enumerate(cells):
            w.writerow([c if i % 2 else str(i), c, c])
    schema = Schema(
        (
            Column("pid", ColumnKind.IDENTIFIER),
            Column("x", ColumnKind.NUMERIC, DROP, -1e6, 1e6),
            Column("cat", ColumnKind.CATEGORICAL, DROP, categories=("7", "1", "inf", "a", "e")),
        ),
        salt="odd",
    )
    qs = [q("s", QueryKind.SUM, "x", M.LAPLACE), q("c", QueryKind.HISTOGRAM, "cat", M.LAPLACE)]
    frame = load_table(data_dir / "odd.csv")
    pand = PandasBackend(frame, schema)
    duck = DuckDBBackend(open_source("odd.csv"), schema)
    assert exact_aggregates(duck, qs) == exact_aggregates(pand, qs)
    assert duck.column_report() == pand.column_report()
    assert duck.content_digest().hexdigest == pand.content_digest().hexdigest
    assert pand.column_stats("x").invalid > 100 and pand.column_stats("x").usable > 100
