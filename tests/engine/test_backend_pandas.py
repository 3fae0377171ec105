"""PandasBackend: exact aggregates on small hand-made frames (hand-computed expectations)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner.core.errors import DataError, QueryError
from planner.data.backends import (
    BinCounts,
    BooleanCounts,
    CountAggregate,
    PandasBackend,
    QuantileAggregate,
    SumAggregate,
    bound_contributions,
)
from planner.data.requests import Bins, Booleans, Candidates, ClippedSum, Count
from planner.data.schema import (
    OTHER_LABEL,
    Column,
    ColumnKind,
    MissingAction,
    MissingRule,
    PrivacyUnit,
    Relation,
    Schema,
)
from planner.planning.mechanisms.base import MechanismName as M
from planner.planning.queries import MeanMode, Predicate, PredicateOp, Query, QueryKind
from planner.planning.statistics import exact_aggregates, statistic
from planner.planning.statistics.base import MeanAggregate

DROP = MissingRule()


def edge_schema(other_bin: bool = False, income_rule: MissingRule = DROP) -> Schema:
    return Schema(
        (
            Column("income", ColumnKind.NUMERIC, income_rule, 0, 200_000),
            Column("region", ColumnKind.CATEGORICAL, DROP, categories=("A", "B", "C"), other_bin=other_bin),
            Column("smoker", ColumnKind.BOOLEAN, DROP),
        )
    )


def edge_frame() -> pd.DataFrame:
    """notes/engines.md §3 edge-case probe, plus a boolean column."""
    return pd.DataFrame(
        {
            "income": [100, -50, np.inf, np.nan, None, 300_000],
            "region": ["A", "A", "B", "B", "Z", "B"],
            "smoker": ["yes", "no", "TRUE", "0", None, "maybe"],
        }
    )


def test_backend_edge_probe_drop_rule() -> None:
    b = PandasBackend(edge_frame(), edge_schema())
    # drop NULL and NaN AND ±inf (missing): rows 100, −50→0, 300000→200000
    assert b.result(ClippedSum("income")) == SumAggregate(value=200_100.0, n=3, clipped=2, dropped=3)
    # declared-join histogram: A2 B3 C0, the undeclared Z in no bin
    assert b.result(Bins("region")) == BinCounts(("A", "B", "C"), (2, 3, 0), None, unbinned=1, dropped=0)
    assert b.result(Booleans("smoker")) == BooleanCounts(n_true=2, n_false=2, dropped=2)


def test_backend_replace_rule_and_other_bin() -> None:
    b = PandasBackend(
        edge_frame(), edge_schema(True, MissingRule(MissingAction.REPLACE, 50.0))
    )
    # 100 + 0 + 50 (inf) + 50 (NaN) + 50 (None) + 200000
    assert b.result(ClippedSum("income")) == SumAggregate(200_250.0, 6, clipped=2, dropped=0)
    assert b.result(Bins("region")) == BinCounts(("A", "B", "C", OTHER_LABEL), (2, 3, 0, 1))
    st = b.column_stats("income")
    assert (st.usable, st.missing, st.invalid, st.replaced, st.dropped) == (6, 3, 0, 3, 0)


def test_backend_text_in_numeric_is_invalid_and_counted() -> None:
    df = pd.DataFrame({"income": ["10", " 20 ", "abc", "", "nan", "NULL", "-inf"]})
    s = Schema((Column("income", ColumnKind.NUMERIC, DROP, 0, 100),))
    b = PandasBackend(df, s)
    st = b.column_stats("income")
    assert (st.usable, st.invalid, st.missing, st.dropped) == (2, 1, 4, 5)
    assert b.result(ClippedSum("income")).value == 30.0


def test_backend_counts_with_predicates() -> None:
    df = pd.DataFrame(
        {
            "age": [10, 20, 30, 40, None, 150],
            "region": ["A", "B", "Z", "A", "B", None],
        }
    )
    s = Schema(
        (
            Column("age", ColumnKind.NUMERIC, DROP, 0, 100),
            Column("region", ColumnKind.CATEGORICAL, DROP, categories=("A", "B")),
        )
    )
    b = PandasBackend(df, s)
    assert b.result(Count()) == CountAggregate(6, 0)
    assert b.result(Count("age")) == CountAggregate(5, 1)
    # clipped ages 10 20 30 40 100 (None dropped): ≥ 30 → 30, 40, 100
    assert b.result(Count(where=Predicate("age", PredicateOp.GE, 30))) == CountAggregate(3, 1)
    assert b.result(Count(where=Predicate("age", PredicateOp.GT, 100))).value == 0  # clipped
    assert b.result(Count(where=Predicate("age", PredicateOp.IN, (10.0, 40.0)))).value == 2
    # region: Z undeclared (no bin) matches nothing, not even !=; None dropped
    assert b.result(Count(where=Predicate("region", PredicateOp.NE, "A"))) == CountAggregate(2, 1)
    assert b.result(Count(where=Predicate("region", PredicateOp.EQ, "A"))).value == 2
    # column + predicate: rows with usable age and usable region: 0,1,2,3 → A, B, A? (row 2 Z)
    assert b.result(Count("age", Predicate("region", PredicateOp.IN, ("A", "B")))) == CountAggregate(3, 2)


def test_backend_numeric_bins_and_quantile_grid() -> None:
    df = pd.DataFrame({"x": [0, 1, 4.9, 5, 10, 12, -3, None]})
    s = Schema((Column("x", ColumnKind.NUMERIC, DROP, 0, 10),))
    b = PandasBackend(df, s)
    # clipped: 0 1 4.9 5 10 10 0 ; bins [0,5) [5,10]
    h = b.result(Bins("x", [0, 5, 10]))
    assert h.counts == (4, 3) and h.labels == ("[0, 5)", "[5, 10]") and h.dropped == 1
    # grid 0, 5, 10: smallest candidate ≥ x: 0→0, 1→5, 4.9→5, 5→5, 10→10, 10→10, 0→0
    qa = b.result(Candidates("x", [0, 5, 10]))
    assert qa == QuantileAggregate((0.0, 5.0, 10.0), (2, 3, 2), 1)
    np.testing.assert_array_equal(qa.counts_le, [2, 5, 7])
    assert qa.n == 7
    # rank utility for alpha = 0.5: −|counts_le − 3.5|
    np.testing.assert_allclose(qa.rank_utility(0.5), [-1.5, -1.5, -3.5])
    with pytest.raises(QueryError, match="cover the declared bounds"):
        b.result(Candidates("x", [1, 5, 10]))
    with pytest.raises(QueryError, match="need declared bin edges"):
        b.result(Bins("x"))


def test_backend_categorical_numbers_as_strings() -> None:
    df = pd.DataFrame({"grade": [1, 2, 2, 3.0, None]})
    s = Schema((Column("grade", ColumnKind.CATEGORICAL, DROP, categories=("1", "2", "3")),))
    assert PandasBackend(df, s).result(Bins("grade")).counts == (1, 2, 1)


def test_backend_boolean_from_numbers_and_bools() -> None:
    s = Schema((Column("b", ColumnKind.BOOLEAN, DROP),))
    assert PandasBackend(pd.DataFrame({"b": [1, 0, 1, 2, None]}), s).result(Booleans("b")) == BooleanCounts(2, 1, 2)
    assert PandasBackend(pd.DataFrame({"b": [True, False, True]}), s).result(Booleans("b")) == BooleanCounts(2, 1, 0)
    assert PandasBackend(pd.DataFrame({"b": [True, None]}), s).result(Booleans("b")) == BooleanCounts(1, 0, 1)


def test_backend_aggregate_dispatch() -> None:
    df = pd.DataFrame({"age": [20, 30, 40, None], "region": ["A", "B", "A", "A"], "sm": [1, 0, 1, 1]})
    s = Schema(
        (
            Column("age", ColumnKind.NUMERIC, DROP, 0, 100),
            Column("region", ColumnKind.CATEGORICAL, DROP, categories=("A", "B", "C")),
            Column("sm", ColumnKind.BOOLEAN, DROP),
        ),
        relation=Relation.SUBSTITUTE,
        public_n=4,
    )
    b = PandasBackend(df, s)
    qs = [
        Query("c", QueryKind.COUNT, None, M.LAPLACE),
        Query("s", QueryKind.SUM, "age", M.LAPLACE),
        Query("m", QueryKind.MEAN, "age", M.LAPLACE),
        Query("mp", QueryKind.MEAN, "age", M.GAUSSIAN, mode=MeanMode.PUBLIC_N),
        Query("h", QueryKind.HISTOGRAM, "region", M.LAPLACE),
        Query("md", QueryKind.MEDIAN, "age", M.EXPONENTIAL, candidates=11),
        Query("mo", QueryKind.MODE, "region", M.EXPONENTIAL),
        Query("p", QueryKind.PROPORTION, "sm", M.LAPLACE),
        Query("ss", QueryKind.SYNTHETIC_SAMPLE, "age", M.PERTURBED_HISTOGRAM, bins=2),
    ]
    out = exact_aggregates(b, qs)
    assert out["c"] == CountAggregate(4, 0)
    assert out["s"] == SumAggregate(90.0, 3, 0, 1)
    assert out["m"] == MeanAggregate(SumAggregate(90.0, 3, 0, 1), CountAggregate(3, 1), None)
    assert isinstance(out["mp"], MeanAggregate) and out["mp"].public_n == 4
    assert out["h"] == BinCounts(("A", "B", "C"), (3, 1, 0))
    md = out["md"]
    assert isinstance(md, QuantileAggregate) and md.counts[2:5] == (1, 1, 1) and md.n == 3
    assert out["p"] == BooleanCounts(3, 1, 0)
    ss = out["ss"]
    assert isinstance(ss, BinCounts) and ss.counts == (3, 0) and ss.edges == (0.0, 50.0, 100.0)
    with pytest.raises(QueryError, match="needs a numeric column"):
        bad = Query("bad", QueryKind.SUM, "region", M.LAPLACE)
        statistic(bad.kind).aggregate(bad, b)


def test_backend_column_report_counts_only() -> None:
    b = PandasBackend(edge_frame(), edge_schema())
    r = b.column_report()
    assert r["rows"] == 6 and r["rows_truncated"] == 0
    assert r["columns"]["income"] == {
        "kind": "numeric", "rows": 6, "usable": 3, "clipped": 2, "invalid": 0,
        "missing": 3, "replaced": 0, "dropped": 3,
    }
    assert r["columns"]["region"]["invalid"] == 1  # undeclared 'Z'
    assert r["columns"]["smoker"]["invalid"] == 1  # 'maybe'
    flat = repr(r)
    assert "300000" not in flat and "maybe" not in flat and "'Z'" not in flat


def test_backend_missing_declared_column() -> None:
    with pytest.raises(DataError, match=r"\['smoker'\] are declared in the schema but not in the data"):
        PandasBackend(edge_frame().drop(columns="smoker"), edge_schema())


# ------------------------------------------------------------------ contribution bounding
def person_schema(c: int, salt: str = "s") -> Schema:
    return Schema(
        (
            Column("pid", ColumnKind.IDENTIFIER),
            Column("x", ColumnKind.NUMERIC, DROP, 0, 100),
        ),
        unit=PrivacyUnit("pid", c),
        salt=salt,
    )


def person_frame() -> pd.DataFrame:
    return pd.DataFrame({"pid": ["a"] * 5 + ["b"] * 2 + ["c"], "x": [1, 2, 3, 4, 5, 10, 20, 30]})


def test_bounding_keeps_at_most_c_rows_per_person() -> None:
    df = person_frame()
    keep = bound_contributions(df, person_schema(2))
    kept = df[keep]
    assert kept.groupby("pid").size().to_dict() == {"a": 2, "b": 2, "c": 1}
    b = PandasBackend(df, person_schema(2))
    assert b.rows == 5 and b.rows_truncated == 3
    assert b.result(Count()).value == 5


def test_bounding_is_deterministic_and_order_independent() -> None:
    df = person_frame()
    s = person_schema(2)
    k1 = df[bound_contributions(df, s)].sort_values(["pid", "x"]).reset_index(drop=True)
    shuffled = df.sample(frac=1.0, random_state=7).reset_index(drop=True)
    k2 = shuffled[bound_contributions(shuffled, s)].sort_values(["pid", "x"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(k1, k2)
    # same call twice: same rows
    np.testing.assert_array_equal(bound_contributions(df, s), bound_contributions(df, s))


def test_bounding_unaffected_by_other_people() -> None:
    df = person_frame()
    s = person_schema(2)
    more = pd.concat([df, pd.DataFrame({"pid": ["d"] * 4, "x": [7, 8, 9, 10]})], ignore_index=True)
    a1 = df[bound_contributions(df, s)]
    a2 = more[bound_contributions(more, s)]
    assert sorted(a1[a1.pid == "a"].x) == sorted(a2[a2.pid == "a"].x)


def test_bounding_salt_changes_choice_but_not_count() -> None:
    df = pd.DataFrame({"pid": ["a"] * 40, "x": np.arange(40)})
    chosen = {
        tuple(sorted(df[bound_contributions(df, person_schema(3, salt))].x))
        for salt in ("s1", "s2", "s3", "s4")
    }
    assert len(chosen) > 1  # different salts pick different rows …
    assert all(len(c) == 3 for c in chosen)  # … always exactly c
    override = bound_contributions(df, person_schema(3, "s1"), salt="s2")
    np.testing.assert_array_equal(override, bound_contributions(df, person_schema(3, "s2")))


def test_bounding_rejects_null_ids() -> None:
    df = pd.DataFrame({"pid": ["a", None, " "], "x": [1, 2, 3]})
    with pytest.raises(DataError, match=r"identifier column 'pid' has 2 row\(s\) with no value"):
        PandasBackend(df, person_schema(1))


def test_bounding_row_unit_keeps_all() -> None:
    s = Schema((Column("x", ColumnKind.NUMERIC, DROP, 0, 1),))
    assert bound_contributions(pd.DataFrame({"x": [1, 1, 1]}), s).all()


# ------------------------------------------------------------------ cell-by-cell reading
def test_backend_cells_read_independently_of_column_dtype() -> None:
    """A cell means the same whether its column was typed float, int, object or text,
    so one odd cell in a neighbouring table never changes how other rows are read."""
    s = Schema(
        (
            Column("g", ColumnKind.CATEGORICAL, DROP, categories=("1", "2.5", "A")),
            Column("x", ColumnKind.NUMERIC, DROP, 0, 10),
            Column("b", ColumnKind.BOOLEAN, DROP),
        )
    )
    typed = pd.DataFrame({"g": [1.0, 2.5, np.nan], "x": [1, 2, None], "b": [1.0, 0.0, 1.0]})
    text = pd.DataFrame({"g": ["+01", " 2.50 ", "zzz"], "x": ["1", "2.0", "oops"], "b": ["1.0", "no", "maybe"]})
    mixed = pd.DataFrame({"g": [1, "2.5", "A"], "x": [1, "2", None], "b": [True, "0", None]}, dtype=object)
    for df in (typed, text, mixed):
        b = PandasBackend(df, s)
        assert b.result(Bins("g")).counts[:2] == (1, 1)
        assert b.result(ClippedSum("x")).value == 3.0
        assert b.result(Booleans("b")).n_true >= 1 and b.result(Booleans("b")).n_false == 1


def test_backend_identifier_canonical_and_bounding_stable_under_dtype_change() -> None:
    s = person_schema(1)
    ints = pd.DataFrame({"pid": [7, 7, 8], "x": [1.0, 2.0, 3.0]})
    text = pd.DataFrame({"pid": ["007", "7", "8"], "x": ["1", "2", "3"]})
    k1, k2 = bound_contributions(ints, s), bound_contributions(text, s)
    np.testing.assert_array_equal(k1, k2)
    assert int(k1.sum()) == 2
    # adding a person with a text id keeps everyone else's choice
    more = pd.DataFrame({"pid": ["007", "7", "8", "x9"], "x": ["1", "2", "3", "4"]})
    np.testing.assert_array_equal(bound_contributions(more, s)[:3], k2)


def _fsum_oracle(x: np.ndarray) -> float:
    """math.fsum (Shewchuk's correctly rounded summation, an independent algorithm) of the
    values exact_sum keeps (bits below 2⁻¹⁰⁶ dropped by truncate_tiny)."""
    import math

    from planner.data.backends.pandas_backend import truncate_tiny

    return math.fsum(truncate_tiny(np.asarray(x, dtype=np.float64)).tolist())


@pytest.mark.parametrize("chunk", [None, 7])
def test_exact_sum_is_the_correctly_rounded_sum(chunk: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """exact_sum (per-exponent integer sums) equals math.fsum bit for bit on sums built to
    defeat float summation: cancellation, mixed magnitudes, subnormals, ties to even; with
    chunk 7 the per-pass partial sums are combined across many passes."""
    import planner.data.backends.pandas_backend as pb

    if chunk is not None:
        monkeypatch.setattr(pb, "_EXACT_CHUNK", chunk)
    rng = np.random.default_rng(2026)
    cases: list[np.ndarray] = [
        np.array([0.3, 0.1, 1e-9]),  # 0.400000001 exactly rounded (Python's sum gives …05)
        np.array([1e16, 1.0, -1e16, -1.0]),  # exact zero
        np.array([2.0**53, 1.0, 1.0]),  # 2⁵³ + 2 exactly; summed left to right, 2⁵³
        np.array([1.0, 2.0**-53, 2.0**-106]),  # a tie in the last bit, broken by the tiny term
        np.array([5e-324, 5e-324, -2.0**-1022]),
        np.array([-0.0, -0.0]),
        np.array([2.0**55 + 8, -(2.0**58), 0.1, 3.5e17, -1.25, 2.0**60, -7.0, 2.0**53 + 2]),
        np.rint(rng.normal(0, 1e6, 500)),  # whole numbers, Σ|x| < 2⁵³: the integer path
        np.array([2.0**52, 2.0**52, -1.0, 3.0]),  # whole numbers, Σ|x| ≥ 2⁵³: not the integer path
        np.array([*np.zeros(70), 0.5]),  # whole numbers in the first 64 only
    ]
    for i in range(300):
        n = int(rng.integers(1, 60))
        kind = i % 4
        if kind == 0:
            x = rng.normal(size=n) * 10.0 ** rng.integers(-30, 30, n)
        elif kind == 1:
            x = np.clip(np.exp(rng.normal(10.6, 0.75, n)), 0, 200_000)
        elif kind == 2:
            x = rng.choice([1e16, -1e16, 1.0, -1.0, 0.5, 2.0**-60, 3.0, 1e-300], n)
        else:
            half = rng.normal(size=n) * 2.0 ** rng.integers(-200, 60, n)
            x = np.concatenate([half, -half, rng.normal(size=2)])  # near-total cancellation
        cases.append(x)
    for x in cases:
        got = pb.exact_sum(x)
        assert got == _fsum_oracle(x), x


def test_grid_counts_match_a_count_by_hand_with_ties() -> None:
    """bin_counts with edges and candidate_counts (both from one sorted copy of the column)
    against a plain Python count, on values that sit exactly on edges and candidates, a
    clipped value at the closed top edge, and a dropped row."""
    rng = np.random.default_rng(7)
    vals = [*rng.integers(-2, 13, 400).astype(float).tolist(), 2.5, 7.25, None, 10.0]
    s = Schema((Column("x", ColumnKind.NUMERIC, DROP, 0, 10),))
    b = PandasBackend(pd.DataFrame({"x": vals}), s)
    xs = [min(max(v, 0.0), 10.0) for v in vals if v is not None]
    for edges in ([0.0, 2.5, 5.0, 7.5, 10.0], [1.0, 3.0, 9.0], [0.0, 10.0], [-5.0, 0.0, 10.0, 20.0]):
        h = b.result(Bins("x", edges))
        m = len(edges) - 1
        want = [sum(1 for v in xs if edges[j] <= v < edges[j + 1] or (j == m - 1 and v == edges[-1]))
                for j in range(m)]
        assert h.counts == tuple(want)
        assert h.unbinned == len(xs) - sum(want) and h.dropped == 1
    for grid in ([0.0, 2.5, 5.0, 7.5, 10.0], [float(t) for t in range(11)], [-1.0, 4.0, 10.0, 11.0]):
        qa = b.result(Candidates("x", grid))
        want = [sum(1 for v in xs if v <= t and (i == 0 or v > grid[i - 1])) for i, t in enumerate(grid)]
        assert qa.counts == tuple(want) and qa.dropped == 1


@pytest.mark.parametrize("rule", [DROP, MissingRule(MissingAction.REPLACE, False)])
def test_numpy_bool_column_reads_like_its_text(rule: MissingRule) -> None:
    """A numpy bool column (read without the per-value lookup) conforms exactly as the same
    cells written as text "True"/"False" (read through the canonical lookup)."""
    from planner.data.backends.pandas_backend import conform_column

    rng = np.random.default_rng(3)
    flags = rng.random(50) < 0.3
    col = Column("f", ColumnKind.BOOLEAN, rule)
    fast = conform_column(pd.Series(flags), col)
    text = conform_column(pd.Series([str(bool(v)) for v in flags], dtype=object), col)
    np.testing.assert_array_equal(fast.values, text.values)
    np.testing.assert_array_equal(fast.usable, text.usable)
    assert fast.stats == text.stats
    np.testing.assert_array_equal(fast.status, text.status)
    assert fast.values.tolist() == [int(v) for v in flags]


@pytest.mark.parametrize("rule", [DROP, MissingRule(MissingAction.REPLACE, 5.0)])
def test_typed_finite_numbers_conform_like_their_text(rule: MissingRule) -> None:
    """A float or integer column with only finite numbers (read without the missing-value
    scan) conforms exactly as the same cells written as text (the general path)."""
    from planner.data.backends.pandas_backend import conform_column

    rng = np.random.default_rng(5)
    col = Column("x", ColumnKind.NUMERIC, rule, 0, 100)
    for cells in (rng.normal(50, 40, 200), rng.integers(-20, 130, 200)):
        fast = conform_column(pd.Series(cells), col)
        text = conform_column(pd.Series([repr(v) for v in cells.tolist()], dtype=object), col)
        for f in ("usable", "values", "dropped", "status"):
            np.testing.assert_array_equal(getattr(fast, f), getattr(text, f))
        assert fast.stats == text.stats and fast.stats.clipped > 0
