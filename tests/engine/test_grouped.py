"""Grouped statistics (issue 13): groups, sensitivities against adversarial neighbours,
and a release end to end (every declared group released, one spend for the vector)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from planner.core.errors import QueryError
from planner.data.backends.pandas_backend import PandasBackend
from planner.data.requests import Grouped, QuantileAggregate
from planner.data.schema import Schema
from planner.ledger import Ledger
from planner.planning.queries import Query, QueryKind, queries_from_list
from planner.planning.statistics import statistic
from planner.planning.statistics.base import GroupedAggregate, MeanAggregate
from planner.planning.statistics.grouped import group_labels, grouped_score_sensitivity
from planner.planning.workload import plan
from planner.release import release

K = QueryKind


def schema(relation: str = "add_remove", c: int = 1) -> Schema:
    unit = {"column": "pid", "max_rows": c} if c > 1 else {"column": None, "max_rows": 1}
    return Schema.from_dict({
        "version": 1, "relation": relation, "public_n": 1200, "privacy_unit": unit,
        "columns": [
            {"name": "pid", "kind": "identifier"},
            {"name": "x", "kind": "numeric", "lower": -10, "upper": 100, "missing": {"action": "drop"}},
            {"name": "region", "kind": "categorical", "categories": ["N", "S", "E"], "other_bin": True,
             "missing": {"action": "drop"}},
            {"name": "flag", "kind": "boolean", "missing": {"action": "drop"}},
        ],
    })


def test_groups_are_every_declared_combination_in_order() -> None:
    s = schema()
    q = Query("g", K.GROUPED_COUNT, None, "laplace", options={"by": ["region", "flag"]})
    labels = group_labels(q, s)
    assert len(labels) == 4 * 2  # N, S, E, (other) × false, true
    assert labels[:2] == ("N · false", "N · true")
    # each group as the codes of its columns' declared values: E is region's third, true is 1
    codes = dict(zip(labels, Grouped((), q.by).codes(s), strict=True))
    assert codes["E · true"] == (2, 1)


@pytest.mark.parametrize(
    ("opts", "says"),
    [
        ({"by": ["x"]}, "is numeric; group by a categorical or boolean"),
        ({"by": ["nope"]}, "is not declared"),
        ({"by": ["region", "flag", "region"]}, "1 to 2 column names"),
    ],
)
def test_grouped_options_are_checked(opts: dict[str, Any], says: str) -> None:
    with pytest.raises(QueryError, match=says):
        Query("g", K.GROUPED_SUM, "x", "laplace", options=opts).validate(schema())


# ---------------------------------------------------------------- sensitivity against neighbours


def frame(rows: list[tuple[int, float | None, str | None, str | None]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["pid", "x", "region", "flag"])


BASE = [
    (1, 5.0, "N", "yes"), (1, 50.0, "S", "no"), (2, 90.0, "N", "no"), (3, -4.0, "E", "yes"),
    (4, 70.0, "Z", "yes"), (5, None, "S", "no"), (6, 30.0, "N", None), (6, 100.0, "E", "no"),
]
#: A unit's rows to add, remove or substitute: spread over groups, all in one group, at the bounds.
UNITS = [
    [(9, 100.0, "N", "yes"), (9, 100.0, "S", "no"), (9, -10.0, "E", "yes")],
    [(9, 100.0, "N", "yes"), (9, 100.0, "N", "yes"), (9, 100.0, "N", "yes")],
    [(9, -10.0, "Z", "no"), (9, 1e9, "S", "yes"), (9, float("nan"), "E", "no")],
]


def neighbours(relation: str, c: int) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    base = frame(BASE)
    out = []
    for unit in UNITS:
        rows = unit[:c]
        added = frame(BASE + rows)
        out.append((base, added))
        if relation == "substitute":  # replace one unit (person 1, or one row when c = 1) by the new one
            kept = [r for r in BASE if r[0] != 1] if c > 1 else BASE[1:]
            out.append((base, frame(kept + rows)))
    return out


GROUPED = [
    Query("gc", K.GROUPED_COUNT, None, "laplace", options={"by": ["region", "flag"]}),
    Query("gs", K.GROUPED_SUM, "x", "gaussian", options={"by": ["region"]}),
    Query("gm", K.GROUPED_MEAN, "x", "laplace", options={"by": ["flag"]}),
    Query("gq", K.GROUPED_QUANTILE, "x", "exponential", options={"by": ["region"], "alphas": [0.1, 0.5, 0.75],
                                                                   "candidates": 23}),
]


@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.parametrize("relation", ["add_remove", "substitute"])
def test_grouped_vectors_move_within_their_declared_sensitivity(relation: str, c: int) -> None:
    s = schema(relation, c)
    for d1, d2 in neighbours(relation, c):
        b1, b2 = PandasBackend(d1, s), PandasBackend(d2, s)
        for q in GROUPED:
            a, b = statistic(q.kind).aggregate(q, b1), statistic(q.kind).aggregate(q, b2)
            assert isinstance(a, GroupedAggregate) and isinstance(b, GroupedAggregate)
            assert a.labels == b.labels == group_labels(q, s)  # every group, always
            parts = {p.name: p.sensitivity for p in q.parts(s)}
            if q.kind is K.GROUPED_QUANTILE:
                for alpha in q.alphas or ():
                    # per group: the scores move by at most d/b ranks (each group its own selection)
                    d = parts[f"quantile@{alpha:g}"].l1  # d/b ranks
                    for ga, gb in zip(a.groups, b.groups, strict=True):
                        assert isinstance(ga, QuantileAggregate) and isinstance(gb, QuantileAggregate)
                        moved = np.abs(ga.rank_utility(alpha) - gb.rank_utility(alpha)).max()
                        assert moved <= d + 1e-9, (q.id, alpha, moved, d)
                continue
            if q.kind is K.GROUPED_MEAN:
                sums = np.array([g.sum.value for g in a.groups if isinstance(g, MeanAggregate)]) - \
                    np.array([g.sum.value for g in b.groups if isinstance(g, MeanAggregate)])
                counts = np.array([g.count.value for g in a.groups if isinstance(g, MeanAggregate)]) - \
                    np.array([g.count.value for g in b.groups if isinstance(g, MeanAggregate)])
                sums = sums - sum(s.column("x").bounds) / 2 * counts  # the centred sums are released
                vecs = [(sums, parts["sums"]), (counts.astype(float), parts["counts"])]
            else:
                va = np.array([float(g.value) for g in a.groups])  # type: ignore[union-attr]
                vb = np.array([float(g.value) for g in b.groups])  # type: ignore[union-attr]
                vecs = [(va - vb, next(iter(parts.values())))]
            for dv, sens in vecs:
                assert np.abs(dv).sum() <= sens.l1 * (1 + 1e-12), (q.id, dv, sens)
                assert math.sqrt((dv**2).sum()) <= sens.l2 * (1 + 1e-12), (q.id, dv, sens)


# ---------------------------------------------------------------- release end to end


def test_grouped_release_answers_every_group_and_spends_once(tmp_path: Path) -> None:
    s = schema("add_remove", 1)
    rng = np.random.default_rng(0)
    n = 1200
    df = pd.DataFrame({
        "pid": np.arange(n), "x": rng.uniform(0, 100, n),
        "region": rng.choice(["N", "S"], n),  # E and (other) stay empty: released anyway
        "flag": rng.choice(["yes", "no"], n),
    })
    qs = queries_from_list([
        {"id": "by_region", "kind": "grouped_mean", "column": "x", "mechanism": "laplace", "by": ["region"]},
        {"id": "n_by", "kind": "grouped_count", "mechanism": "discrete_laplace", "by": ["region", "flag"]},
        {"id": "med_by", "kind": "grouped_quantile", "column": "x", "mechanism": "exponential", "by": ["flag"],
         "alphas": [0.5]},
    ], s)
    p = plan(qs, s, 2.0, 0.0, "basic")
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    res = release(p, s, PandasBackend(df, s), led, "fp-grouped", "grouped", total_epsilon=5.0, total_delta=0.0,
                  rule="basic")
    ans = {a.query_id: a for a in res.answers}
    mean = ans["by_region"].answer
    assert isinstance(mean, dict) and mean["labels"] == ["N", "S", "E", "(other)"]
    vals = mean["values"]
    assert isinstance(vals, list) and all(-10 <= v <= 100 for v in vals)  # type: ignore[operator]
    counts = ans["n_by"].answer
    assert isinstance(counts, dict) and len(counts["counts"]) == 8  # type: ignore[arg-type]
    # one spend per planned event (the vector), not one per group: ε used = the plan's
    st = led.status("fp-grouped")
    assert st.epsilon_spent == pytest.approx(p.allocation.used_epsilon, rel=1e-9)
    assert {r["label"] for r in res.rows() if r["query"] == "med_by"} == {"false", "true"}
    led.close()


def test_grouped_mean_plan_from_the_command_line(tmp_path: Path) -> None:
    from planner.cli import main

    spec = {"schema": json.loads(schema().to_json()), "budget": {"epsilon": 1.0, "delta": 1e-6, "composition": "rdp"},
            "queries": [{"id": "m", "kind": "grouped_mean", "column": "x", "mechanism": "gaussian",
                         "by": ["region"], "rows_per_group": 300}]}
    path = tmp_path / "PLAN.json"
    path.write_text(json.dumps(spec))
    assert main(["plan", "--spec", str(path)]) == 0


def test_grouped_quantile_substitution_pays_for_both_groups() -> None:
    # a substitution may remove c rows from one group and add c to another: each group's
    # scores move by c·max(a, b − a), so the per-group calibration is twice that; by hand
    # for c = 2: α = 1/10 → 2·9 = 18 (add/remove), 36 (substitute); α = 1/2 → 2·1 = 2, 4
    sub, ar = schema("substitute", 2), schema("add_remove", 2)
    assert (grouped_score_sensitivity(0.1, ar), grouped_score_sensitivity(0.1, sub)) == (18, 36)
    assert (grouped_score_sensitivity(0.5, ar), grouped_score_sensitivity(0.5, sub)) == (2, 4)


def test_grouped_statistics_have_a_public_scale_so_relative_errors_share_the_budget() -> None:
    """Found in the browser (session 9): with relative errors (the Planner's default) a
    grouped mean had no public scale, so its error stayed in income units while the others
    were fractions, and the optimal split gave it almost all of ε (a count ±53,000 rows on
    700). Scales by hand from the docstring: n = 1200 over G = 4 groups (N, S, E, other) is
    300 rows a group; (|L| + |U|)/2 = (10 + 100)/2 = 55."""
    from planner.planning.workload import default_error_scales

    s = schema()
    qs = queries_from_list([
        {"id": "rows", "kind": "count", "mechanism": "laplace"},
        {"id": "x_mean", "kind": "mean", "column": "x", "mechanism": "laplace"},
        {"id": "x_by_region", "kind": "grouped_mean", "column": "x", "mechanism": "laplace", "by": ["region"]},
        {"id": "sum_by_region", "kind": "grouped_sum", "column": "x", "mechanism": "laplace", "by": ["region"]},
        {"id": "n_by_region", "kind": "grouped_count", "mechanism": "laplace", "by": ["region", "flag"]},
        {"id": "med_by_region", "kind": "grouped_quantile", "column": "x", "mechanism": "exponential",
         "by": ["region"], "alphas": [0.5]},
    ], s)
    scales = default_error_scales(qs, s)
    assert scales is not None
    assert scales["x_by_region"] == 55.0
    assert scales["sum_by_region"] == 300.0 * 55.0
    assert scales["n_by_region"] == 1200 / 8  # 4 regions × 2 flags
    assert "med_by_region" not in scales  # a fraction of a group's rows already
    p = plan(qs, s, 1.0, 1e-6, "rdp", scales)
    eps = {a.id.split(":")[0]: a.epsilon for a in p.allocation.items}
    # no query is starved: each gets at least a twentieth of what an even split would give
    assert min(eps.values()) > 1.0 / len(qs) / 20, eps
    # without a public n there is no scale at all (the Planner then says so)
    assert default_error_scales(qs, Schema.from_dict({**json.loads(s.to_json()), "public_n": None})) is None
