"""Queries: validation, JSON round trip, sensitivities per relation and privacy unit.

Every expected sensitivity cites docs/mathematics.md §2 (c = 1) or the hand calculation in the
docstring of planner/planning/queries.py (c > 1).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from planner.core.errors import QueryError
from planner.data.schema import (
    Column,
    ColumnKind,
    MissingAction,
    MissingRule,
    PrivacyUnit,
    Relation,
    Schema,
)
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.queries import (
    VALID_MECHANISMS,
    MeanMode,
    Predicate,
    PredicateOp,
    Query,
    QueryKind,
    queries_from_list,
)
from planner.planning.statistics import STATISTICS
from planner.planning.statistics.histogram import edges, labels
from planner.planning.statistics.quantile import candidate_grid

DROP = MissingRule()
M = MechanismName
K = QueryKind


def schema(
    relation: Relation = Relation.ADD_REMOVE, c: int = 1, lo: float = 18, hi: float = 90,
    public_n: int | None = 1000,
) -> Schema:
    return Schema(
        (
            Column("pid", ColumnKind.IDENTIFIER),
            # replace rule: every row contributes, so docs/mathematics.md §2's substitute U − L applies
            Column("age", ColumnKind.NUMERIC, MissingRule(MissingAction.REPLACE, lo), lo, hi),
            Column("income", ColumnKind.NUMERIC, DROP, -1000, 250_000),
            Column("region", ColumnKind.CATEGORICAL, DROP, categories=("N", "S", "E"), other_bin=True),
            Column("sex", ColumnKind.CATEGORICAL, DROP, categories=("f", "m")),
            Column("smoker", ColumnKind.BOOLEAN, DROP),
        ),
        relation=relation,
        unit=PrivacyUnit("pid", c) if c > 1 else PrivacyUnit(),
        public_n=public_n,
    )


def q(kind: K, column: str | None, mech: M, **kw: Any) -> Query:
    return Query(f"q_{kind.value}", kind, column, mech, **kw)


# ------------------------------------------------------------------ sensitivities, c = 1
AR, SUB = Relation.ADD_REMOVE, Relation.SUBSTITUTE


@pytest.mark.parametrize(
    ("query", "relation", "l1", "l2"),
    [
        # docs/mathematics.md §2: count 1 / 1 under both relations
        (q(K.COUNT, None, M.LAPLACE), AR, 1, 1),
        (q(K.COUNT, None, M.GAUSSIAN), SUB, 1, 1),
        # docs/mathematics.md §2: sum max(|L|,|U|) add/remove; U − L substitute. age [18, 90]
        (q(K.SUM, "age", M.LAPLACE), AR, 90, 90),
        (q(K.SUM, "age", M.LAPLACE), SUB, 72, 72),
        # income [−1000, 250000]: max(|L|,|U|) = 250000; U − L = 251000
        (q(K.SUM, "income", M.GAUSSIAN), AR, 250_000, 250_000),
        (q(K.SUM, "income", M.GAUSSIAN), SUB, 251_000, 251_000),
        # docs/mathematics.md §2: mean with public n (substitute) (U − L)/n = 72/1000
        (q(K.MEAN, "age", M.LAPLACE, mode=MeanMode.PUBLIC_N), SUB, 0.072, 0.072),
        # docs/mathematics.md §2: histogram 1 / 1 add/remove, 2 / √2 substitute
        (q(K.HISTOGRAM, "region", M.LAPLACE), AR, 1, 1),
        (q(K.HISTOGRAM, "region", M.GAUSSIAN), SUB, 2, math.sqrt(2)),
        (q(K.SYNTHETIC_SAMPLE, "age", M.PERTURBED_HISTOGRAM, bins=8), SUB, 2, math.sqrt(2)),
        # rank utility: c·max(α, 1 − α) under add/remove (½ for the median), c under
        # substitution (the proof in planner/planning/statistics/quantile.py); count utility 1
        (q(K.MEDIAN, "age", M.EXPONENTIAL), AR, 0.5, 0.5),
        (q(K.QUANTILE, "age", M.EXPONENTIAL, alphas=(0.1, 0.9)), SUB, 1, 1),
        (q(K.MODE, "region", M.EXPONENTIAL), AR, 1, 1),
        # proportion: as a count
        (q(K.PROPORTION, "smoker", M.LAPLACE), SUB, 1, 1),
    ],
)
def test_queries_sensitivity_row_unit(query: Query, relation: Relation, l1: float, l2: float) -> None:
    s = query.sensitivity(schema(relation))
    assert s.l1 == pytest.approx(l1, rel=1e-12)
    assert s.l2 == pytest.approx(l2, rel=1e-12)


# ------------------------------------------------------------------ sensitivities, c = 3
@pytest.mark.parametrize(
    ("query", "relation", "l1", "l2"),
    [
        (q(K.COUNT, None, M.LAPLACE), AR, 3, 3),  # c · 1
        (q(K.COUNT, None, M.LAPLACE), SUB, 3, 3),
        (q(K.SUM, "age", M.LAPLACE), AR, 270, 270),  # 3 · max(18, 90)
        # substitute, c = 3, [18, 90]: max(U, cU) − min(L, cL) = 270 − 18 = 252
        # (one row at 18 replaced by three rows at 90), larger than c·(U − L) = 216
        (q(K.SUM, "age", M.LAPLACE), SUB, 252, 252),
        # histogram: L1 c, L2 c (rows may share a bin); substitute 2c, √2·c
        (q(K.HISTOGRAM, "region", M.LAPLACE), AR, 3, 3),
        (q(K.HISTOGRAM, "region", M.GAUSSIAN), SUB, 6, 3 * math.sqrt(2)),
        (q(K.MEDIAN, "age", M.EXPONENTIAL), AR, 1.5, 1.5),  # c·max(α, 1 − α) = 3·½
        (q(K.MODE, "sex", M.EXPONENTIAL), SUB, 3, 3),
        (q(K.PROPORTION, "smoker", M.LAPLACE), AR, 3, 3),
        # mean public n, substitute: the centred sum Σ(x − 54) moves by at most c·(U − L) = 3·72
        # (a unit's c rows from 18 to 90), over n: 216 / 1000 (planner/planning/statistics/mean.py, issue 18)
        (q(K.MEAN, "age", M.GAUSSIAN, mode=MeanMode.PUBLIC_N), SUB, 0.216, 0.216),
    ],
)
def test_queries_sensitivity_person_unit(query: Query, relation: Relation, l1: float, l2: float) -> None:
    s = query.sensitivity(schema(relation, c=3))
    assert s.l1 == pytest.approx(l1, rel=1e-12)
    assert s.l2 == pytest.approx(l2, rel=1e-12)


def test_queries_substitute_sum_with_bounds_straddling_zero_is_c_times_range() -> None:
    # [−1000, 250000], c = 3: max(U, 3U) − min(L, 3L) = 750000 + 3000 = 3·251000
    s = q(K.SUM, "income", M.LAPLACE).sensitivity(schema(SUB, c=3))
    assert s.l1 == pytest.approx(3 * 251_000)


def test_queries_substitute_sum_with_drop_rule_counts_an_empty_unit() -> None:
    """Drop rule: a record with a missing value contributes 0, so substituting it by one at
    U moves the sum by U (hand calculation): max(0, cU) − min(0, cL)."""
    s = Schema(
        (Column("x", ColumnKind.NUMERIC, DROP, 10, 20), Column("pid", ColumnKind.IDENTIFIER)),
        relation=SUB,
    )
    assert q(K.SUM, "x", M.LAPLACE).sensitivity(s).l1 == 20  # not U − L = 10
    s3 = Schema(s.columns, relation=SUB, unit=PrivacyUnit("pid", 3))
    assert q(K.SUM, "x", M.LAPLACE).sensitivity(s3).l1 == 60  # max(0, 60) − min(0, 30)
    neg = Schema((Column("x", ColumnKind.NUMERIC, DROP, -30, -5),), relation=SUB)
    assert q(K.SUM, "x", M.LAPLACE).sensitivity(neg).l1 == 30  # max(0, −5) − min(0, −30)
    straddle = Schema((Column("x", ColumnKind.NUMERIC, DROP, -1, 4),), relation=SUB)
    assert q(K.SUM, "x", M.LAPLACE).sensitivity(straddle).l1 == 5  # = U − L when L ≤ 0 ≤ U


def test_queries_mean_sum_over_count_has_two_parts() -> None:
    qq = q(K.MEAN, "age", M.LAPLACE)
    assert qq.mode is MeanMode.SUM_OVER_COUNT
    parts = qq.parts(schema(AR))
    assert [(p.name, p.sensitivity) for p in parts] == [
        # the centred sum Σ(x − m₀), m₀ = (18 + 90)/2: add/remove moves it by at most
        # (U − L)/2 = 36, not max(|L|, |U|) = 90 (planner/planning/statistics/mean.py, issue 18)
        ("sum", Sensitivity(36, 36)),
        ("count", Sensitivity(1, 1)),  # docs/mathematics.md §2 count
    ]
    with pytest.raises(QueryError, match="use parts"):
        qq.sensitivity(schema(AR))


def test_queries_quantile_parts_per_alpha_and_hist_size() -> None:
    parts = q(K.QUANTILE, "age", M.EXPONENTIAL, alphas=(0.25, 0.5, 0.75)).parts(schema())
    assert [p.name for p in parts] == ["quantile@0.25", "quantile@0.5", "quantile@0.75"]
    assert all(p.utility for p in parts)
    h = q(K.HISTOGRAM, "region", M.LAPLACE).parts(schema())[0]
    assert h.size == 4  # 3 categories + other bin
    hb = q(K.HISTOGRAM, "age", M.LAPLACE, bin_edges=(0, 50, 100)).parts(schema())[0]
    assert hb.size == 2


def test_queries_mean_public_n_rules() -> None:
    # valid under add/remove too since issue 18 (the centred sum over a public n)
    q(K.MEAN, "age", M.LAPLACE, mode="public_n").validate(schema(AR))
    with pytest.raises(QueryError, match="needs the schema's public_n"):
        q(K.MEAN, "age", M.LAPLACE, mode="public_n").validate(schema(SUB, public_n=None))


# ------------------------------------------------------------------ mechanisms / kinds
def test_queries_valid_mechanisms_map_matches_brief() -> None:
    assert VALID_MECHANISMS[K.SUM] == {M.LAPLACE, M.GAUSSIAN}
    assert M.DISCRETE_GAUSSIAN in VALID_MECHANISMS[K.COUNT]
    assert M.DISCRETE_LAPLACE in VALID_MECHANISMS[K.HISTOGRAM]
    # issue 13: one name per mechanism (the ISM on a grid is the EM on ranks; Gumbel report
    # noisy max is the EM), and nothing offered that the release does not draw
    assert VALID_MECHANISMS[K.QUANTILE] == {M.EXPONENTIAL}
    assert VALID_MECHANISMS[K.MODE] == {M.EXPONENTIAL, M.INVERSE_SENSITIVITY}
    assert VALID_MECHANISMS[K.PROPORTION] == {M.LAPLACE, M.DISCRETE_LAPLACE}
    assert VALID_MECHANISMS[K.SYNTHETIC_SAMPLE] == {M.PERTURBED_HISTOGRAM}
    assert set(VALID_MECHANISMS) == set(STATISTICS)


@pytest.mark.parametrize(
    ("kind", "col", "mech", "says"),
    [
        (K.PROPORTION, "smoker", M.RANDOMIZED_RESPONSE, "local-model mechanism"),
        (K.MEDIAN, "age", M.INVERSE_SENSITIVITY, "exponential mechanism on ranks"),
        (K.MODE, "region", M.REPORT_NOISY_MAX, "is the exponential mechanism"),
        (K.SYNTHETIC_SAMPLE, "age", M.SMOOTHED_HISTOGRAM, "not released"),
    ],
)
def test_queries_mechanisms_not_offered_say_what_to_use(kind: K, col: str, mech: M, says: str) -> None:
    with pytest.raises(QueryError, match=says):
        q(kind, col, mech, **({"bins": 4} if kind is K.SYNTHETIC_SAMPLE else {}))


@pytest.mark.parametrize(
    ("kind", "col", "mech"),
    [
        (K.SUM, "age", M.EXPONENTIAL),
        (K.SUM, "age", M.DISCRETE_LAPLACE),
        (K.MEDIAN, "age", M.LAPLACE),
        (K.PROPORTION, "smoker", M.GAUSSIAN),
        (K.MODE, "region", M.LAPLACE),
        (K.SYNTHETIC_SAMPLE, "age", M.LAPLACE),
    ],
)
def test_queries_invalid_mechanism_rejected(kind: K, col: str, mech: M) -> None:
    with pytest.raises(QueryError, match=f"is not valid for a {kind.value} query; use one of"):
        Query("x", kind, col, mech, bins=4 if kind is K.SYNTHETIC_SAMPLE else None)


def test_queries_unknown_mechanism_rejected() -> None:
    with pytest.raises(QueryError, match="unknown mechanism 'magic'"):
        Query("x", K.COUNT, None, "magic")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "col", "mech", "pattern"),
    [
        (K.SUM, "region", M.LAPLACE, "column 'region' is categorical; a sum query needs a numeric column"),
        (K.MEAN, "smoker", M.LAPLACE, "is boolean"),
        (K.PROPORTION, "age", M.LAPLACE, "needs a boolean column"),
        (K.MODE, "age", M.EXPONENTIAL, "categorical or boolean"),
        (K.MEDIAN, "pid", M.EXPONENTIAL, "is identifier"),
        (K.SUM, "nope", M.LAPLACE, "column 'nope' is not declared"),
    ],
)
def test_queries_wrong_column_kind(kind: K, col: str, mech: M, pattern: str) -> None:
    with pytest.raises(QueryError, match=pattern):
        Query("x", kind, col, mech).validate(schema())


def test_queries_option_checks() -> None:
    with pytest.raises(QueryError, match="needs 'alphas'"):
        q(K.QUANTILE, "age", M.EXPONENTIAL)
    with pytest.raises(QueryError, match=r"option 'alphas' \(Levels\) must be < 1"):
        q(K.QUANTILE, "age", M.EXPONENTIAL, alphas=(0.5, 1.0))
    # the candidate grid is given one way only (candidates, step, or an explicit public grid)
    with pytest.raises(QueryError, match="give one of 'candidates', 'step' and 'grid', not candidates and step"):
        q(K.MEDIAN, "age", M.EXPONENTIAL, candidates=10, step=1.0)
    with pytest.raises(QueryError, match="either a 'weight' or a 'target'"):
        q(K.COUNT, None, M.LAPLACE, weight=1, target=2)
    with pytest.raises(QueryError, match="weight must be > 0"):
        q(K.COUNT, None, M.LAPLACE, weight=-1)
    with pytest.raises(QueryError, match=r"a sum query has no option\(s\) \['predicate'\]"):
        q(K.SUM, "age", M.LAPLACE, predicate=Predicate("age", PredicateOp.GT, 3))
    with pytest.raises(QueryError, match="a synthetic_sample query needs 'bins'"):
        q(K.SYNTHETIC_SAMPLE, "age", M.PERTURBED_HISTOGRAM)
    with pytest.raises(QueryError, match="strictly increasing"):
        q(K.HISTOGRAM, "age", M.LAPLACE, bin_edges=(0, 0, 100))
    with pytest.raises(QueryError, match="needs declared 'bin_edges'"):
        q(K.HISTOGRAM, "age", M.LAPLACE).validate(schema())
    with pytest.raises(QueryError, match="must cover the declared bounds"):
        q(K.HISTOGRAM, "age", M.LAPLACE, bin_edges=(20, 50, 90)).validate(schema())
    with pytest.raises(QueryError, match="apply to numeric columns"):
        q(K.HISTOGRAM, "region", M.LAPLACE, bins=3).validate(schema())
    with pytest.raises(QueryError, match="needs a 'column'"):
        Query("x", K.SUM, None, M.LAPLACE)


def test_queries_predicate_validation() -> None:
    s = schema()
    ok = [
        Predicate("age", PredicateOp.GE, 18),
        Predicate("region", PredicateOp.IN, ("N", "S")),
        Predicate("region", PredicateOp.EQ, "(other)"),
        Predicate("smoker", PredicateOp.EQ, True),
    ]
    for p in ok:
        q(K.COUNT, None, M.LAPLACE, predicate=p).validate(s)
    bad = [
        (Predicate("pid", PredicateOp.EQ, 7), "single out"),
        (Predicate("region", PredicateOp.EQ, "Z"), "must be declared categories"),
        (Predicate("region", PredicateOp.LT, "N"), "takes ==, != or in"),
        (Predicate("age", PredicateOp.GT, "old"), "finite numbers"),
        (Predicate("age", PredicateOp.IN, ()), "non-empty list"),
        (Predicate("smoker", PredicateOp.EQ, "yes"), "true or false"),
        (Predicate("ghost", PredicateOp.EQ, 1), "not declared"),
    ]
    for p, pattern in bad:
        with pytest.raises(QueryError, match=pattern):
            q(K.COUNT, None, M.LAPLACE, predicate=p).validate(s)
    with pytest.raises(QueryError, match="operator must be one of"):
        Predicate("age", "~", 3)  # type: ignore[arg-type]


# ------------------------------------------------------------------ grids
def test_queries_candidate_grid() -> None:
    s = schema(lo=0, hi=10)
    g = candidate_grid(q(K.MEDIAN, "age", M.EXPONENTIAL, candidates=11), s)
    np.testing.assert_allclose(g, np.arange(11.0))
    g = candidate_grid(q(K.MEDIAN, "age", M.EXPONENTIAL, step=3), s)
    np.testing.assert_allclose(g, [0, 3, 6, 9, 10])  # U appended
    g = candidate_grid(q(K.MEDIAN, "age", M.EXPONENTIAL), s)
    assert g.size == 1001 and g[0] == 0 and g[-1] == 10
    with pytest.raises(QueryError, match="more than"):
        q(K.MEDIAN, "age", M.EXPONENTIAL, step=1e-9).validate(s)
    # (U − L)/step overflowing to inf is the same message, not an OverflowError (fuzzing, session 10)
    with pytest.raises(QueryError, match="use a larger step"):
        q(K.MEDIAN, "age", M.EXPONENTIAL, step=1e-300).validate(schema(lo=0, hi=2.0**53))


def test_queries_equal_width_edges_and_labels() -> None:
    s = schema(lo=0, hi=10)
    qq = q(K.SYNTHETIC_SAMPLE, "age", M.PERTURBED_HISTOGRAM, bins=2)
    np.testing.assert_allclose(edges(qq, s), [0, 5, 10])  # type: ignore[arg-type]
    assert labels(qq, s) == ("[0, 5)", "[5, 10]")
    assert labels(q(K.HISTOGRAM, "smoker", M.LAPLACE), s) == ("false", "true")


# ------------------------------------------------------------------ JSON
def test_queries_json_round_trip() -> None:
    items = [
        {"id": "n", "kind": "count", "column": None, "mechanism": "laplace", "weight": 1,
         "predicate": {"column": "region", "op": "in", "value": ["N", "S"]}},
        {"id": "m", "kind": "mean", "column": "income", "mechanism": "gaussian",
         "mode": "sum_over_count", "target": 500},
        {"id": "q", "kind": "quantile", "column": "age", "mechanism": "exponential",
         "alphas": [0.25, 0.75], "step": 1},
        {"id": "h", "kind": "histogram", "column": "age", "mechanism": "discrete_laplace",
         "bin_edges": [18, 40, 65, 90]},
        {"id": "s", "kind": "synthetic_sample", "column": "age",
         "mechanism": "perturbed_histogram", "bins": 12},
        {"id": "p", "kind": "proportion", "column": "smoker", "mechanism": "discrete_laplace"},
        {"id": "md", "kind": "median", "column": "age", "mechanism": "exponential",
         "candidates": 73},
        {"id": "mo", "kind": "mode", "column": "sex", "mechanism": "inverse_sensitivity"},
    ]
    qs = queries_from_list(items, schema())
    again = queries_from_list(json.loads(json.dumps([x.to_dict() for x in qs])), schema())
    assert again == qs
    assert qs[0].predicate == Predicate("region", PredicateOp.IN, ("N", "S"))
    assert qs[1].weight is None and qs[1].target == 500.0


def test_ids_and_levels_that_would_name_another_answer_are_refused_by_name() -> None:
    """Fuzzing (session 10): answers and ledger spends are named '<id>:<part>', so a count
    'm:sum' beside a mean 'm' planned and was then refused by the ledger at release, and a
    count 'q:quantile@0.1' beside a quantile 'q', or levels 0.5 and 0.5000000000000001
    (both 'quantile@0.5'), were refused with a message naming no query."""
    with pytest.raises(QueryError, match=r"query 'm:sum': an id may not hold ':'"):
        queries_from_list([{"id": "m", "kind": "mean", "column": "age", "mechanism": "laplace"},
                           {"id": "m:sum", "kind": "count", "mechanism": "laplace"}])
    for kind, extra in (("quantile", {}), ("grouped_quantile", {"by": ["sex"]})):
        with pytest.raises(QueryError, match=r"query 'q': alphas must not repeat: 0\.5000000000000001 and 0\.5 are "
                                             "the same level to 6 significant digits"):
            Query.from_dict({"id": "q", "kind": kind, "column": "age", "mechanism": "exponential",
                             "alphas": [0.5, 0.5000000000000001], **extra})
        with pytest.raises(QueryError, match=r"alphas must not repeat: 0\.25 repeats"):
            Query.from_dict({"id": "q", "kind": kind, "column": "age", "mechanism": "exponential",
                             "alphas": [0.25, 0.75, 0.25], **extra})


def test_options_may_be_nested_as_the_queries_table_shows_them() -> None:
    """Found in the browser (session 10): the README and the Queries table write a query's
    options as an object, {"options": {"alphas": [...]}}; a plan file written so was refused."""
    flat = {"id": "q", "kind": "quantile", "column": "age", "mechanism": "exponential", "alphas": [0.1, 0.9]}
    nested = {"id": "q", "kind": "quantile", "column": "age", "mechanism": "exponential",
              "options": {"alphas": [0.1, 0.9]}}
    assert Query.from_dict(nested) == Query.from_dict(flat)
    assert Query.from_dict(nested).to_dict() == Query.from_dict(flat).to_dict()  # written flat
    with pytest.raises(QueryError, match=r"\['alphas'\] given both inside 'options' and beside it"):
        Query.from_dict({**nested, "alphas": [0.5]})
    with pytest.raises(QueryError, match="'options' must be an object"):
        Query.from_dict({**flat, "options": [0.5]})


def test_queries_from_list_errors() -> None:
    with pytest.raises(QueryError, match=r"query ids \['a'\] are used more than once"):
        queries_from_list([
            {"id": "a", "kind": "count", "mechanism": "laplace"},
            {"id": "a", "kind": "count", "mechanism": "laplace"},
        ])
    with pytest.raises(QueryError, match=r"has no option\(s\) \['eps'\]"):
        Query.from_dict({"id": "a", "kind": "count", "mechanism": "laplace", "eps": 1})
    with pytest.raises(QueryError, match="missing 'kind'"):
        Query.from_dict({"id": "a", "mechanism": "laplace"})
    with pytest.raises(QueryError, match="kind must be one of"):
        Query.from_dict({"id": "a", "kind": "variance", "mechanism": "laplace"})
    with pytest.raises(QueryError, match="must be a list"):
        queries_from_list("abc")  # type: ignore[arg-type]


def test_queries_pickle_and_replace_round_trip() -> None:
    # Streamlit's caches pickle plans (and so queries); Query is immutable otherwise
    import pickle

    qq = q(K.QUANTILE, "age", M.EXPONENTIAL, alphas=(0.1, 0.9), candidates=11)
    again = pickle.loads(pickle.dumps(qq))
    assert again == qq and hash(again) == hash(qq) and again.alphas == (0.1, 0.9)
    with pytest.raises(AttributeError, match="immutable"):
        qq.weight = 2.0  # type: ignore[misc]
    moved = qq.replace(weight=2.0, options={"candidates": None, "step": 0.5})
    assert moved.weight == 2.0 and moved.candidates is None and moved.step == 0.5 and qq.weight is None


def test_a_query_naming_only_its_kind_gets_an_id_and_the_best_default_mechanism() -> None:
    """Issue 30: a plan may name only a query's kind (and options); every statistic then
    uses its default: discrete Laplace on integer counts (exact, pure), Laplace on real
    sums, the exponential mechanism on ranks, MST-or-AIM on a synthetic table."""
    from planner.planning.statistics import STATISTICS

    qs = queries_from_list([
        {"kind": "count"}, {"kind": "count"}, {"kind": "mean", "column": "income"},
        {"kind": "median", "column": "age"}, {"kind": "synthetic_data", "options": {"columns": ["age"], "rows": 5}},
        {"id": "count_3", "kind": "histogram", "column": "sex"},
    ])
    assert [q.id for q in qs] == ["count", "count_2", "mean_income", "median_age", "synthetic_data", "count_3"]
    assert [q.mechanism.value for q in qs] == ["discrete_laplace", "discrete_laplace", "laplace", "exponential",
                                               "mst_or_aim", "discrete_laplace"]
    for kind, stat in STATISTICS.items():  # every default is one of the statistic's own mechanisms
        assert stat.default_mechanism in stat.mechanism_names, kind
