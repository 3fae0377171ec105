"""Issue 29: a release read as results (planner.outputs.results), fresh or stored alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.data.backends.pandas_backend import PandasBackend
from planner.data.loader import load_table
from planner.data.schema import Schema
from planner.ledger import Ledger
from planner.outputs.results import answer_views, sample_csv, text_summary
from planner.planning import workload
from planner.planning.queries import queries_from_list
from planner.release import release, stored

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Schema.load(ROOT / "data" / "census.schema.json")
QUERIES = [
    {"id": "n", "kind": "count", "mechanism": "laplace"},
    {"id": "ages", "kind": "quantile", "column": "age", "mechanism": "exponential", "alphas": [0.25, 0.75]},
    {"id": "age_sample", "kind": "synthetic_sample", "column": "age", "mechanism": "perturbed_histogram",
     "bins": 72},
    {"id": "edu", "kind": "mode", "column": "education", "mechanism": "exponential"},
]


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("views")
    qs = queries_from_list(QUERIES, SCHEMA)
    # a tiny ε on purpose: the sample's noisy bin counts go negative in some bins
    plan = workload.plan(qs, SCHEMA, 0.002, 0.0, "basic", workload.default_error_scales(qs, SCHEMA))
    led = Ledger(f"sqlite:///{tmp / 'l.db'}")
    backend = PandasBackend(load_table(str(ROOT / "data" / "census.csv")), SCHEMA)
    fresh = release(plan, SCHEMA, backend, led, "cd1-" + "b" * 64, "census", total_epsilon=1.0, rule="basic")
    again = stored(plan, SCHEMA, led, fresh.fingerprint)
    yield plan, fresh, again
    led.close()


def test_fresh_and_stored_results_read_the_same(released) -> None:  # type: ignore[no-untyped-def]
    plan, fresh, again = released
    assert again is not None and again.release_id == fresh.release_id
    assert answer_views(fresh, plan, SCHEMA) == answer_views(again, plan, SCHEMA)


def test_a_quantile_shows_each_level_in_the_columns_units(released) -> None:  # type: ignore[no-untyped-def]
    plan, fresh, _ = released
    v = next(x for x in answer_views(fresh, plan, SCHEMA) if x.query_id == "ages")
    assert [n.label for n in v.numbers] == ["25% point", "75% point"]
    assert all(18 <= float(n.value) <= 90 for n in v.numbers)  # within the declared range
    assert all(n.low is None for n in v.numbers)  # a rank error is not an error in years
    assert v.chart == "quantile" and v.bounds == (18.0, 90.0) and "25% point: " in v.headline


def test_the_synthetic_sample_is_delivered_as_values_with_non_negative_counts(released) -> None:  # type: ignore[no-untyped-def]
    plan, fresh, _ = released
    raw = fresh.answer("age_sample").answer["counts"]
    assert min(raw) < 0  # the case this test is about: a noisy bin count below zero
    v = next(x for x in answer_views(fresh, plan, SCHEMA) if x.query_id == "age_sample")
    assert [n.value for n in v.numbers] == [max(float(c), 0.0) for c in raw]
    assert all(float(n.value) >= 0 and n.low >= 0 for n in v.numbers)
    assert len(v.sample) == len(fresh.answer("age_sample").answer["sample"]) > 0
    assert all(18 <= x <= 90 for x in v.sample)
    lines = sample_csv(v, 3).splitlines()
    assert lines[0] == "age_sample" and [float(x) for x in lines[1:]] == list(v.sample[:3])


def test_every_answer_carries_its_verdict_in_the_summary(released) -> None:  # type: ignore[no-untyped-def]
    plan, fresh, _ = released
    lines = text_summary(answer_views(fresh, plan, SCHEMA))
    assert len(lines) == 4 and all(any(g in line for g in ("Usable", "Rough", "Mostly noise")) for line in lines)
    assert all(a.verdict is not None and a.verdict["grade"] for a in fresh.answers)  # also in the release JSON


def test_a_synthetic_table_is_headlined_by_its_rows_and_its_predicted_distance(tmp_path: Path) -> None:
    """A synthetic table is not a number: its card read "— ± 0.04 TVD of a marginal". The
    headline now says how many rows it holds and how far its breakdowns are predicted to be
    from the real table's (the plan's own 95% figure, printed by format_value)."""
    from planner.outputs.results import format_value

    qs = queries_from_list([{"id": "syn", "kind": "synthetic_data", "mechanism": "mst",
                             "options": {"columns": ["sex", "region", "age"], "rows": 1500, "bins": 4}}], SCHEMA)
    plan = workload.plan(qs, SCHEMA, 1.0, 1e-6, "zcdp", workload.default_error_scales(qs, SCHEMA))
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        backend = PandasBackend(load_table(str(ROOT / "data" / "census.csv")), SCHEMA)
        fresh = release(plan, SCHEMA, backend, led, "cd1-" + "c" * 64, "census", total_epsilon=2.0, total_delta=1e-5,
                        rule="zcdp")
        v = next(x for x in answer_views(fresh, plan, SCHEMA) if x.query_id == "syn")
    finally:
        led.close()
    e = plan.predictions[0].error_bound_95
    assert v.headline.startswith("1,500 synthetic rows")  # the rows asked for
    assert f"within {format_value(e)} of the real table's" in v.headline and "total-variation" in v.headline
    assert "—" not in v.headline
