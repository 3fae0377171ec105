"""A numeric column declared to hold whole numbers (``"integer": true``): the declaration,
its JSON and hash, the bins a synthetic table cuts it into, their labels, and synthetic
values that are whole numbers inside their bins (issue 30: a synthetic table an owner can
download and use; before, an age of 22.841 and 2.2959 children)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.errors import QueryError, SchemaError
from planner.data.backends import PandasBackend
from planner.data.requests import Bins, MarginalTables, integer_edges, whole_bin_labels
from planner.data.schema import Column, ColumnKind, MissingRule, Schema, suggest_whole_numbers
from planner.planning.queries import queries_from_list
from planner.planning.statistics import exact_aggregates
from planner.planning.statistics.synthetic_data import decode, encode, request
from planner.planning.workload import plan
from planner.release import prepare

ROOT = Path(__file__).resolve().parents[2]
CENSUS = Schema.load(ROOT / "data" / "census.schema.json")


def _whole(schema: Schema, *names: str) -> Schema:
    """``schema`` with ``names`` declared to hold whole numbers, through its JSON (as a file would)."""
    d = json.loads(schema.to_json())
    for c in d["columns"]:
        if c["name"] in names:
            c["integer"] = True
    return Schema.from_dict(d)


# ------------------------------------------------------------------ the declaration
def test_written_only_when_set_so_every_other_schema_keeps_its_json_and_hash() -> None:
    plain = json.loads(CENSUS.to_json())
    assert all("integer" not in c for c in plain["columns"])
    whole = _whole(CENSUS, "age")
    assert whole.column("age").integer and not whole.column("income").integer
    assert next(c for c in json.loads(whole.to_json())["columns"] if c["name"] == "age")["integer"] is True
    assert Schema.from_json(whole.to_json()) == whole
    assert whole.schema_hash() != CENSUS.schema_hash()  # a declaration like the bounds: part of the hash
    # declared false is the same schema as not declared
    d = json.loads(CENSUS.to_json())
    d["columns"][1]["integer"] = False
    assert Schema.from_dict(d).schema_hash() == CENSUS.schema_hash()


def test_refusals_name_the_column_and_the_fix() -> None:
    with pytest.raises(SchemaError, match=r"column 'region'.*numeric columns only.*remove it"):
        Column("region", ColumnKind.CATEGORICAL, MissingRule(), categories=("a",), integer=True)
    with pytest.raises(SchemaError, match=r"column 'x'.*no whole number lies in its bounds \[0.2, 0.8\].*widen"):
        Column("x", ColumnKind.NUMERIC, MissingRule(), 0.2, 0.8, integer=True)
    d = json.loads(CENSUS.to_json())
    d["columns"][1]["integer"] = "yes"
    with pytest.raises(SchemaError, match=r"column 'age': 'integer' must be true or false"):
        Schema.from_dict(d)


def test_suggested_from_the_values_like_the_kinds() -> None:
    df = pd.DataFrame({"age": ["30", "41", ""], "income": ["100.5", "3", "7"], "kids": [1, 2, 0],
                       "region": ["a", "b", "a"]})
    assert suggest_whole_numbers(df) == frozenset({"age", "kids"})


# ------------------------------------------------------------------ the bins
@settings(max_examples=300, deadline=None)
@given(lo=st.floats(-1e6, 1e6), width=st.floats(0.0, 1e4), bins=st.integers(1, 64))
def test_integer_edges_cover_the_bounds_and_every_bin_holds_the_same_run_of_whole_numbers(
    lo: float, width: float, bins: int
) -> None:
    hi = lo + width
    a, b = math.ceil(lo), math.floor(hi)
    if a > b:
        return  # refused by the schema (no whole number in the bounds)
    e = np.asarray(integer_edges(lo, hi, bins))
    assert e[0] <= lo and e[-1] >= hi and np.all(np.diff(e) > 0)
    assert 1 <= e.size - 1 <= bins
    # each whole number a..b falls in exactly one bin, never on an edge, and the bins'
    # runs are consecutive with one width w (the last one may hold fewer)
    held = [[k for k in range(a, b + 1) if e[i] <= k < e[i + 1] or (i == e.size - 2 and k == e[-1])]
            for i in range(e.size - 1)] if b - a < 5000 else None
    if held is not None:
        assert all(h for h in held) and sum(len(h) for h in held) == b - a + 1
        w = len(held[0])
        assert all(len(h) == w for h in held[:-1]) and len(held[-1]) <= w
        assert w == -(-(b - a + 1) // bins)  # the fewest per bin that fits in `bins` bins


def test_few_values_get_one_bin_each_and_labels_name_the_whole_numbers() -> None:
    assert integer_edges(0, 6, 10) == (-0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5)
    col = Column("children", ColumnKind.NUMERIC, MissingRule(), 0, 6, integer=True)
    assert Bins("children", integer_edges(0, 6, 10)).labels(col) == ("0", "1", "2", "3", "4", "5", "6")
    assert Bins("age", integer_edges(18, 90, 10)).labels(col)[:2] == ("18–25", "26–33")
    assert Bins("age", integer_edges(18, 90, 10)).labels(col)[-1] == "90"
    # a column not declared whole keeps its interval labels
    plain = Column("x", ColumnKind.NUMERIC, MissingRule(), 0, 6)
    assert Bins("x", (0.0, 3.0, 6.0)).labels(plain) == ("[0, 3)", "[3, 6]")
    assert whole_bin_labels((0.0, 3.0, 6.0)) == ("0–2", "3–6")


# ------------------------------------------------------------------ the synthetic table
def test_synthetic_values_of_a_whole_number_column_are_whole_numbers_in_their_bins() -> None:
    schema = _whole(CENSUS, "age")
    q = queries_from_list([{"id": "s", "kind": "synthetic_data",
                            "options": {"columns": ["age", "income", "smoker"], "bins": 6, "rows": 3000}}], schema)[0]
    r = request(q, schema)
    assert r.edges[0] == integer_edges(*schema.column("age").bounds, 6)  # cut between whole numbers
    assert r.edges[1] == tuple(np.linspace(*schema.column("income").bounds, 7))  # unchanged
    codes = np.random.default_rng(1).integers(0, 6, size=(5000, 3))
    codes[:, 2] %= 2
    recs = decode(codes, q, schema, np.random.default_rng(2))
    ages = [rec["age"] for rec in recs]
    assert all(isinstance(v, int) for v in ages)
    lo, hi = schema.column("age").bounds
    assert lo <= min(ages) and max(ages) <= hi
    assert not all(isinstance(rec["income"], int) for rec in recs)  # income is not declared whole
    assert (encode(recs, q, schema) == codes).all()  # every value is in the bin it was drawn from
    # each whole number of a bin is drawn: 18–90 holds 73, so 6 bins of ⌈73/6⌉ = 13 and the
    # first bin, 18–30, shows all 13 among its ~830 rows
    first = {a for a, c in zip(ages, codes[:, 0], strict=True) if c == 0}
    assert first == set(range(18, 31))


def test_a_release_of_a_whole_number_column_downloads_whole_numbers() -> None:
    schema = _whole(CENSUS, "age")
    q = queries_from_list([{"kind": "synthetic_data", "options": {"columns": ["age", "sex"], "bins": 8,
                                                                  "rows": 500}}], schema)[0]
    p = plan([q], schema, 2.0, 1e-6, "zcdp")
    item = prepare(p, schema).items[0]
    df = pd.read_csv(ROOT / "data" / "census.csv")
    agg = exact_aggregates(PandasBackend(df, schema), [q])[q.id]
    assert isinstance(agg, MarginalTables)
    recs = item.answer(agg)["records"]
    assert isinstance(recs, list) and len(recs) == 500
    assert all(isinstance(rec["age"], int) and 18 <= rec["age"] <= 90 for rec in recs)  # type: ignore[index]


def _every_numeric_kind() -> list[dict[str, object]]:
    """One query of every statistic that takes a numeric column, on the whole-number age."""
    from planner.planning.statistics import STATISTICS

    qs: list[dict[str, object]] = [
        {"id": "n", "kind": "count", "column": "age"},
        {"id": "s", "kind": "sum", "column": "age"},
        {"id": "m", "kind": "mean", "column": "age"},
        {"id": "h", "kind": "histogram", "column": "age", "options": {"bins": 8}},
        {"id": "q", "kind": "quantile", "column": "age", "options": {"alphas": [0.25, 0.75]}},
        {"id": "md", "kind": "median", "column": "age"},
        {"id": "ss", "kind": "synthetic_sample", "column": "age", "options": {"bins": 8}},
        {"id": "gc", "kind": "grouped_count", "column": "age", "options": {"by": ["sex"]}},
        {"id": "gs", "kind": "grouped_sum", "column": "age", "options": {"by": ["sex"]}},
        {"id": "gm", "kind": "grouped_mean", "column": "age", "options": {"by": ["sex"]}},
        {"id": "gq", "kind": "grouped_quantile", "column": "age", "options": {"by": ["sex"], "alphas": [0.5]}},
    ]
    numeric = {k.value for k, s in STATISTICS.items() if ColumnKind.NUMERIC in s.column_kinds}
    assert {q["kind"] for q in qs} == numeric, "a statistic that takes a numeric column is missing here"
    return qs


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_every_statistic_of_a_whole_number_column_is_released(tmp_path, engine) -> None:
    """The release path end to end (spend, sample, answers) on a column declared to hold whole
    numbers. Before the fix a histogram or synthetic sample of such a column recorded its spend
    and then failed: the backend labelled the bins by their whole numbers ("18–26") and the
    statistic by their intervals ("[18, 27)"), and a release refuses counts whose bins differ."""
    from planner import release as rel
    from planner.data.backends import make_backend
    from planner.data.requests import numeric_bin_labels
    from planner.ledger import Ledger

    schema = _whole(CENSUS, "age")
    qs = queries_from_list(_every_numeric_kind(), schema)
    p = plan(qs, schema, 4.0, 0.0, "basic")
    raw = (ROOT / "data" / "census.csv").read_bytes()
    backend = PandasBackend(pd.read_csv(ROOT / "data" / "census.csv"), schema) if engine == "pandas" else \
        make_backend("duckdb", raw, schema)
    led = Ledger(f"sqlite:///{tmp_path}/l.db")
    out = rel.release(p, schema, backend, led, "census", "census", total_epsilon=4.0, total_delta=0.0, rule="basic")
    got = {a.query_id: a.answer for a in out.answers}
    assert set(got) == {q.id for q in qs}
    edges = np.linspace(18, 90, 9)
    assert numeric_bin_labels(schema.column("age"), edges) == whole_bin_labels(edges)
    assert got["h"]["labels"] == list(whole_bin_labels(edges))  # "18–26", …, "81–90"
    assert got["ss"]["labels"] == got["h"]["labels"]
    sample = got["ss"]["sample"]
    assert len(sample) > 1000  # about the 48,480 rows' noisy total, at most 10,000
    assert all(float(v).is_integer() and 18 <= v <= 90 for v in sample)
    # each value lies in a bin with a positive noisy count (the bins' whole numbers, nothing else)
    first, last = (np.ceil(edges[:-1]), np.append(np.ceil(edges[1:-1]) - 1, 90))
    live = [(a, b) for a, b, c in zip(first, last, got["ss"]["counts"], strict=True) if c > 0]
    assert all(any(a <= v <= b for a, b in live) for v in sample)


def test_a_synthetic_sample_of_a_whole_number_column_needs_bins_at_least_one_wide() -> None:
    schema = _whole(CENSUS, "age")  # [18, 90]: 72 bins of width 1 at most
    queries_from_list([{"id": "ok", "kind": "synthetic_sample", "column": "age", "options": {"bins": 72}}], schema)
    with pytest.raises(QueryError, match=r"column 'age' holds whole numbers.*Use at most 72 bins"):
        queries_from_list([{"id": "x", "kind": "synthetic_sample", "column": "age", "options": {"bins": 73}}], schema)
    # a column not declared to hold whole numbers keeps any number of bins
    queries_from_list([{"id": "y", "kind": "synthetic_sample", "column": "age", "options": {"bins": 500}}], CENSUS)
