"""pandas, DuckDB and Spark return IDENTICAL aggregates on the same data.

Every query kind runs through all three backends on ``data/census.csv``, on a generated
table (floats, duplicate people beyond c, odd cells) and on an edge-case table; the
aggregates (dataclasses of ints and floats) must be equal, not close. Expected values of
the edge-case table are hand-computed from the cell-reading rules of
``planner/backends/base.py``.

Spark runs in local mode with one session for the whole test session; the tests are
skipped (with the reason printed) only when no Java runtime is present.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from planner.backends import PandasBackend, available_backends, make_backend
from planner.backends.base import Backend, BinCounts, SumAggregate
from planner.backends.duckdb_backend import DuckDBBackend
from planner.backends.pandas_backend import bound_contributions
from planner.loader import load_table
from planner.mechanisms.base import MechanismName as M
from planner.queries import MeanMode, Predicate, PredicateOp, Query, QueryKind
from planner.schema import Column, ColumnKind, MissingAction, MissingRule, PrivacyUnit, Schema
from planner.sources import DATA_DIR_ENV, open_source

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
DROP = MissingRule()


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session (≈5 s to start) for every Spark test."""
    from planner.backends.spark_backend import java_available

    if not java_available():
        print("SKIP spark tests: no Java runtime (install default-jre-headless)")
        pytest.skip("no Java runtime: Spark tests need Java 17+ (apt-get install default-jre-headless)")
    pytest.importorskip("pyspark")
    from planner.backends.spark_backend import get_session

    session = get_session("local[2]")
    yield session


@pytest.fixture()
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private allow-listed data directory."""
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv(DATA_DIR_ENV, str(d))
    return d


def three(source: str, schema: Schema, spark: Any, salt: str | None = None) -> dict[str, Backend]:
    """The three backends over one file of the data directory (pandas via the loader)."""
    from planner.backends.spark_backend import SparkBackend

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
    expected = ref.aggregate_all(queries)
    report = ref.column_report()
    for name, b in backends.items():
        if name == ref_name:
            continue
        got = b.aggregate_all(queries)
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
    assert duck.aggregate_all(qs) == pandas_b.aggregate_all(qs)


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
    ]


def test_backends_identical_on_generated_data_with_bounding(data_dir: Path, spark: Any) -> None:
    df = generated()
    df.to_csv(data_dir / "gen.csv", index=False)
    schema = generated_schema()
    backends = three("gen.csv", schema, spark)
    got = assert_identical(backends, generated_queries())
    assert backends["pandas"].rows_truncated > 0  # people beyond c = 2 rows were cut
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
        duck = DuckDBBackend(open_source("rows.csv"), schema).clipped_sum("x")
        pand = PandasBackend(load_table(data_dir / "rows.csv"), schema).clipped_sum("x")
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
    from planner.backends.spark_backend import SparkBackend

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
        a = PandasBackend(frame, schema).aggregate_all(qs)
        b = DuckDBBackend(frame, schema).aggregate_all(qs)
        assert a == b
    k = PandasBackend(text, schema).aggregate_all(qs)["k"]
    assert isinstance(k, BinCounts) and k.counts == (2, 1, 2, 1)  # 1e400 overflows to inf


def test_whitespace_rule_matches_pyarrow() -> None:
    """The SQL trim pattern strips exactly what pyarrow's utf8_trim_whitespace strips."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from planner.backends.sql import WHITESPACE

    chars = [chr(i) for i in range(0x3100)]
    stripped = pc.utf8_trim_whitespace(pa.array([f"{ch}a{ch}" for ch in chars])).to_pylist()
    pyarrow_ws = {ch for ch, s in zip(chars, stripped, strict=True) if s == "a"}
    assert pyarrow_ws == set(WHITESPACE)


def test_csv_null_tokens_match_pyarrow() -> None:
    import pyarrow.csv as pacsv

    from planner.backends.sql import CSV_NULL_TOKENS

    assert set(CSV_NULL_TOKENS) == set(pacsv.ConvertOptions().null_values)


def test_make_backend_names_and_uploads(data_dir: Path) -> None:
    (data_dir / "edge.csv").write_text(EDGE_CSV)
    schema = edge_schema(DROP)
    assert {"pandas", "duckdb"} <= set(available_backends())
    a = make_backend("pandas", "edge.csv", schema).aggregate_all(edge_queries())
    b = make_backend("duckdb", "edge.csv", schema)
    c = make_backend("duckdb", EDGE_CSV.encode(), schema)  # an upload, spilled to a temp file
    assert b.aggregate_all(edge_queries()) == a == c.aggregate_all(edge_queries())
    c.close()  # type: ignore[attr-defined]


def test_spark_session_available_or_clear_error() -> None:
    from planner.backends.spark_backend import java_available

    if shutil.which("java") is None and not java_available():
        from planner.errors import PlannerError

        with pytest.raises(PlannerError, match="Java"):
            make_backend("spark", "census.csv", Schema.load(DATA / "census.schema.json"))
