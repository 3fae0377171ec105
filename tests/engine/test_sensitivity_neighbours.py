"""Adversarial neighbours: the backend's aggregates move by at most the declared sensitivity.

For every query kind, a neighbouring table is built by adding / removing one privacy unit
(one row, or one person's rows — more than c of them, so truncation is exercised) or by
substituting one unit, with values at the bounds, beyond them, NaN, ±inf, NULL, text, an
undeclared category. The change of the PandasBackend aggregate is compared with
``Query.parts(schema)`` (docs/mathematics.md §2 and the table in planner/planning/queries.py):

* scalar parts: |Δ| ≤ L1 (= L2);
* histograms: ‖Δ‖₁ ≤ L1 and ‖Δ‖₂ ≤ L2;
* quantile / median: max_t |Δ rank utility| ≤ utility sensitivity, per α;
* mode: max_k |Δ count_k| ≤ utility sensitivity.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.data.backends import (
    BinCounts,
    BooleanCounts,
    CountAggregate,
    PandasBackend,
    QuantileAggregate,
    SumAggregate,
)
from planner.data.requests import ClippedSum
from planner.data.schema import (
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
from planner.planning.statistics import statistic
from planner.planning.statistics.base import Aggregate, MeanAggregate

TOL = 1e-9


def make_schema(
    relation: Relation, c: int, lo: float, hi: float, other_bin: bool, replace: bool,
    person: bool = True,
) -> Schema:
    return Schema(
        (
            Column("pid", ColumnKind.IDENTIFIER),
            Column(
                "x", ColumnKind.NUMERIC,
                MissingRule(MissingAction.REPLACE, (lo + hi) / 2) if replace else MissingRule(),
                lo, hi,
            ),
            Column(
                "cat", ColumnKind.CATEGORICAL,
                MissingRule(MissingAction.REPLACE, "A") if replace else MissingRule(),
                categories=("A", "B", "C"), other_bin=other_bin,
            ),
            Column(
                "flag", ColumnKind.BOOLEAN,
                MissingRule(MissingAction.REPLACE, False) if replace else MissingRule(),
            ),
        ),
        relation=relation,
        unit=PrivacyUnit("pid", c) if person else PrivacyUnit(),
        public_n=100,
        salt="neighbours",
    )


def workload(schema: Schema) -> list[Query]:
    lo, hi = schema.column("x").bounds
    mid = (lo + hi) / 2
    qs = [
        Query("count", QueryKind.COUNT, None, M.LAPLACE),
        Query("count_x", QueryKind.COUNT, "x", M.LAPLACE),
        Query("count_pred_x", QueryKind.COUNT, None, M.GAUSSIAN,
              predicate=Predicate("x", PredicateOp.GE, mid)),
        Query("count_pred_cat", QueryKind.COUNT, "x", M.LAPLACE,
              predicate=Predicate("cat", PredicateOp.IN, ("A", "B"))),
        Query("count_pred_flag", QueryKind.COUNT, None, M.LAPLACE,
              predicate=Predicate("flag", PredicateOp.NE, True)),
        Query("sum", QueryKind.SUM, "x", M.LAPLACE),
        Query("mean", QueryKind.MEAN, "x", M.GAUSSIAN),
        Query("hist_cat", QueryKind.HISTOGRAM, "cat", M.GAUSSIAN),
        Query("hist_x", QueryKind.HISTOGRAM, "x", M.LAPLACE, bins=3),
        Query("hist_flag", QueryKind.HISTOGRAM, "flag", M.DISCRETE_LAPLACE),
        Query("median", QueryKind.MEDIAN, "x", M.EXPONENTIAL, candidates=7),
        Query("quantiles", QueryKind.QUANTILE, "x", M.EXPONENTIAL, alphas=(0.1, 0.25, 0.9)),
        Query("mode", QueryKind.MODE, "cat", M.EXPONENTIAL),
        Query("proportion", QueryKind.PROPORTION, "flag", M.LAPLACE),
        Query("synthetic", QueryKind.SYNTHETIC_SAMPLE, "x", M.PERTURBED_HISTOGRAM, bins=4),
    ]
    qs.append(Query("mean_n", QueryKind.MEAN, "x", M.LAPLACE, mode=MeanMode.PUBLIC_N))
    return qs


def _within(delta: float, bound: float) -> bool:
    return delta <= bound * (1 + TOL) + TOL


def check_query(q: Query, schema: Schema, a: Aggregate, b: Aggregate) -> None:
    parts = {p.name: p for p in q.parts(schema)}
    where = f"{q.id} ({schema.relation.value}, c={schema.c})"
    if isinstance(a, CountAggregate):
        assert isinstance(b, CountAggregate)
        assert _within(abs(a.value - b.value), parts["count"].sensitivity.l1), where
    elif isinstance(a, SumAggregate):
        assert isinstance(b, SumAggregate)
        assert _within(abs(a.value - b.value), parts["sum"].sensitivity.l1), where
    elif isinstance(a, MeanAggregate):
        assert isinstance(b, MeanAggregate)
        # a mean releases the centred sum S − m₀·C, m₀ the bounds' midpoint (planner/planning/statistics/mean.py)
        lo, hi = schema.column("x").bounds
        m0 = (lo + hi) / 2
        ds = abs((a.sum.value - m0 * a.count.value) - (b.sum.value - m0 * b.count.value))
        if q.mode is MeanMode.PUBLIC_N:
            n = schema.public_n
            assert n is not None
            assert _within(ds / n, parts["mean"].sensitivity.l1), where
        else:
            assert _within(ds, parts["sum"].sensitivity.l1), where
            assert _within(abs(a.count.value - b.count.value), parts["count"].sensitivity.l1), where
    elif isinstance(a, BinCounts):
        assert isinstance(b, BinCounts)
        assert a.labels == b.labels  # every declared bin, always
        d = a.as_array() - b.as_array()
        (part,) = parts.values()
        if part.utility:  # mode: count utility per candidate
            assert _within(float(np.abs(d).max()), part.sensitivity.l1), where
        else:
            assert _within(float(np.abs(d).sum()), part.sensitivity.l1), where
            assert _within(float(np.sqrt((d.astype(float) ** 2).sum())), part.sensitivity.l2), where
    elif isinstance(a, QuantileAggregate):
        assert isinstance(b, QuantileAggregate)
        assert q.alphas is not None
        for alpha in q.alphas:
            d = np.abs(a.rank_utility(alpha) - b.rank_utility(alpha)).max()
            assert _within(float(d), parts[f"quantile@{alpha:g}"].sensitivity.l1), where
    elif isinstance(a, BooleanCounts):
        assert isinstance(b, BooleanCounts)
        assert _within(abs(a.n_true - b.n_true), parts["proportion"].sensitivity.l1), where
    else:  # pragma: no cover
        raise AssertionError(type(a))


def check_pair(schema: Schema, d1: pd.DataFrame, d2: pd.DataFrame) -> None:
    b1, b2 = PandasBackend(d1, schema), PandasBackend(d2, schema)
    for q in workload(schema):
        check_query(q, schema, statistic(q.kind).aggregate(q, b1), statistic(q.kind).aggregate(q, b2))


# ------------------------------------------------------------------ deterministic cases
BASE_ROWS: list[dict[str, Any]] = [
    {"pid": 1, "x": 5.0, "cat": "A", "flag": "yes"},
    {"pid": 1, "x": 15.0, "cat": "B", "flag": "no"},
    {"pid": 2, "x": 50.0, "cat": "C", "flag": "no"},
    {"pid": 3, "x": None, "cat": "Z", "flag": None},
    {"pid": 4, "x": 99.0, "cat": "A", "flag": "yes"},
]


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["pid", "x", "cat", "flag"])


ADVERSARIES: dict[str, dict[str, Any]] = {
    "at_upper": {"x": 100.0, "cat": "A", "flag": "yes"},
    "at_lower": {"x": 0.0, "cat": "C", "flag": "no"},
    "beyond_upper": {"x": 1e12, "cat": "B", "flag": True},
    "beyond_lower": {"x": -1e12, "cat": "B", "flag": False},
    "nan": {"x": float("nan"), "cat": None, "flag": None},
    "inf": {"x": float("inf"), "cat": "", "flag": "maybe"},
    "text": {"x": "lots", "cat": "undeclared", "flag": 7},
}


@pytest.mark.parametrize("relation", list(Relation))
@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.parametrize("adversary", list(ADVERSARIES))
@pytest.mark.parametrize("replace", [False, True])
def test_neighbours_adversarial_unit(relation: Relation, c: int, adversary: str, replace: bool) -> None:
    schema = make_schema(relation, c, 0.0, 100.0, other_bin=adversary == "text", replace=replace)
    base = frame(BASE_ROWS)
    # the adversarial unit owns c + 2 identical-looking rows (truncated to c)
    unit_rows = [{"pid": 99, **ADVERSARIES[adversary]} for _ in range(c + 2)]
    if relation is Relation.ADD_REMOVE:
        check_pair(schema, base, frame(BASE_ROWS + unit_rows))
    else:
        # substitute person 2 (one row) and person 1 (two rows) by the adversary
        for victim in (1, 2, 4):
            kept = [r for r in BASE_ROWS if r["pid"] != victim]
            check_pair(schema, base, frame(kept + unit_rows))


def test_neighbours_substitute_sum_bound_is_tight_when_lower_bound_positive() -> None:
    """[10, 20], c = 2: one row at 10 → two rows at 20 moves the sum by 30 = max(U, cU) − min(L, cL).

    The naive c·(U − L) = 20 would understate it (see planner/planning/queries.py).
    """
    schema = make_schema(Relation.SUBSTITUTE, 2, 10.0, 20.0, False, True)
    d1 = frame([{"pid": 1, "x": 10.0, "cat": "A", "flag": "no"}, {"pid": 2, "x": 15, "cat": "A", "flag": "no"}])
    d2 = frame([{"pid": 3, "x": 20.0, "cat": "A", "flag": "no"}] * 2 + [{"pid": 2, "x": 15, "cat": "A", "flag": "no"}])
    q = Query("s", QueryKind.SUM, "x", M.LAPLACE)
    s1 = PandasBackend(d1, schema).result(ClippedSum("x")).value
    s2 = PandasBackend(d2, schema).result(ClippedSum("x")).value
    assert abs(s2 - s1) == 30.0 == q.sensitivity(schema).l1
    check_pair(schema, d1, d2)


def test_neighbours_substitute_drop_rule_missing_value_replaced_at_upper() -> None:
    """[10, 20], drop rule: a row with NaN (contributes 0) → a row at 20 moves the sum by 20.

    docs/mathematics.md §2's U − L = 10 assumes both records contribute; the schema-aware bound is
    max(0, U) − min(0, L) = 20 (see planner/planning/queries.py).
    """
    schema = make_schema(Relation.SUBSTITUTE, 1, 10.0, 20.0, False, False, person=False)
    d1 = frame([{"pid": 1, "x": float("nan"), "cat": "A", "flag": "no"}])
    d2 = frame([{"pid": 2, "x": 20.0, "cat": "A", "flag": "no"}])
    s1 = PandasBackend(d1, schema).result(ClippedSum("x")).value
    s2 = PandasBackend(d2, schema).result(ClippedSum("x")).value
    assert abs(s2 - s1) == 20.0 == Query("s", QueryKind.SUM, "x", M.LAPLACE).sensitivity(schema).l1
    check_pair(schema, d1, d2)


def test_neighbours_add_remove_sum_bound_is_attained() -> None:
    """Adding c rows at U = 100 (bounds [0, 100], c = 3) moves the sum by 300 = c·max(|L|, |U|)."""
    schema = make_schema(Relation.ADD_REMOVE, 3, 0.0, 100.0, False, False)
    base = frame(BASE_ROWS)
    more = frame(BASE_ROWS + [{"pid": 9, "x": 500.0, "cat": "A", "flag": "no"}] * 5)
    d = PandasBackend(more, schema).result(ClippedSum("x")).value - PandasBackend(base, schema).result(ClippedSum("x")).value
    assert d == 300.0 == Query("s", QueryKind.SUM, "x", M.LAPLACE).sensitivity(schema).l1


# ------------------------------------------------------------------ hypothesis
X_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([0.0, 100.0, -50.0, 50.0, 10.0, 20.0, -30.0, -5.0, None, "text", "", " 7 "]),
)
CAT_VALUES = st.sampled_from(["A", "B", "C", "Z", "", None, " A ", "c"])
FLAG_VALUES = st.sampled_from(["yes", "no", True, False, None, "maybe", 1, 0, "TRUE", ""])


@st.composite
def unit_rows(draw: st.DrawFn, pid: int, max_rows: int) -> list[dict[str, Any]]:
    k = draw(st.integers(1, max_rows))
    return [
        {"pid": pid, "x": draw(X_VALUES), "cat": draw(CAT_VALUES), "flag": draw(FLAG_VALUES)}
        for _ in range(k)
    ]


@st.composite
def neighbour_case(draw: st.DrawFn) -> tuple[Schema, pd.DataFrame, pd.DataFrame]:
    relation = draw(st.sampled_from(list(Relation)))
    person = draw(st.booleans())
    c = draw(st.integers(1, 3)) if person else 1
    lo, hi = draw(st.sampled_from([(0.0, 100.0), (-50.0, 50.0), (10.0, 20.0), (-30.0, -5.0)]))
    schema = make_schema(relation, c, lo, hi, draw(st.booleans()), draw(st.booleans()), person)
    max_rows = c + 2 if person else 1
    n_units = draw(st.integers(0, 6))
    units = [draw(unit_rows(pid, max_rows)) for pid in range(1, n_units + 1)]
    new = draw(unit_rows(1000, max_rows))
    if relation is Relation.ADD_REMOVE:
        other = [*units, new]
    elif units:
        victim = draw(st.integers(0, len(units) - 1))
        other = [*units[:victim], new, *units[victim + 1:]]
    else:
        other = units  # nobody to substitute: identical tables
    d1 = frame([r for u in units for r in u])
    d2 = frame([r for u in other for r in u])
    if draw(st.booleans()):
        d1, d2 = d2, d1  # removal as well as addition
    return schema, d1, d2


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neighbour_case())
def test_neighbours_hypothesis(case: tuple[Schema, pd.DataFrame, pd.DataFrame]) -> None:
    schema, d1, d2 = case
    check_pair(schema, d1, d2)


def test_neighbours_sensitivity_values_are_finite() -> None:
    schema = make_schema(Relation.SUBSTITUTE, 3, -30.0, -5.0, True, True)
    for q in workload(schema):
        for p in q.parts(schema):
            assert math.isfinite(p.sensitivity.l1) and p.sensitivity.l1 > 0
