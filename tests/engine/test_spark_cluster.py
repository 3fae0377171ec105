"""Spark on a standalone cluster: conformance and a release (issue #31).

``scripts/test`` starts a master and one worker on 127.0.0.1 (``tests/spark_cluster.py``)
and exports ``PLANNER_TEST_SPARK_MASTER``; a run of pytest alone starts one for the session
(the ``spark_cluster_master`` fixture of ``tests/conftest.py``); when none can be started,
these tests are skipped with the reason. One Spark session on the cluster serves the whole
module; it is stopped at the end so the other modules find their ``local[2]`` session
(a process holds one Spark context).

The conformance cases are those of ``test_backends_conformance.py``, run with the cluster's
session: pandas, DuckDB and Spark-on-the-cluster return identical aggregates. Which ones:
the generated table with contribution bounding and odd cells (every statistic kind; the
executors, not the driver, read the file). The release, of a typed Parquet file,
goes through the one release path (:func:`planner.release.release_file`, the path of
``planner release``) with ``backend="spark"``; the same plan on the same file through
DuckDB into the same ledger is then a reuse of that release: Spark's content identity,
computed on the executors, is DuckDB's, so the ledger sees one dataset and spends once.

The master is one setting, ``PLANNER_SPARK_MASTER``, read when no master is passed (the
app, ``planner … --backend spark`` without ``--spark-master``, the library).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import PlannerError
from tests.engine import test_backends_conformance as conformance

#: the conformance suite's data directory (allow-listed, private to each test)
data_dir = conformance.data_dir


@pytest.fixture(scope="module")
def cluster(spark_cluster_master: str) -> Iterator[Any]:
    """One Spark session on the cluster for this module, stopped after it."""
    from planner.data.backends.spark_backend import java_available

    if not java_available():
        pytest.skip("no Java runtime: Spark tests need Java 17+ (apt-get install default-jre-headless)")
    pytest.importorskip("pyspark")
    from pyspark import SparkContext

    from tests.spark_cluster import session_on

    session = session_on(spark_cluster_master)
    try:
        yield session
    finally:
        if SparkContext._active_spark_context is session.sparkContext:
            session.stop()


def test_the_session_runs_on_the_cluster(cluster: Any, spark_cluster_master: str) -> None:
    """The session's master is the cluster's, and an executor of the worker is registered
    (a standalone master runs no task in the driver)."""
    assert str(cluster.sparkContext.master) == spark_cluster_master
    # a job waits for an executor (they register a moment after the session starts)
    assert cluster.range(1000).selectExpr("sum(id)").collect()[0][0] == 999 * 1000 // 2
    executors = cluster.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    assert len(executors) >= 2, "the cluster session has no executor besides the driver"


def test_conformance_generated_data_with_bounding(data_dir: Path, cluster: Any) -> None:
    conformance.test_backends_identical_on_generated_data_with_bounding(data_dir, cluster)


QUERIES: list[dict[str, Any]] = [
    {"id": "n", "kind": "count", "mechanism": "discrete_laplace"},
    {"id": "income_sum", "kind": "sum", "column": "income", "mechanism": "laplace"},
    {"id": "income_mean", "kind": "mean", "column": "income", "mechanism": "laplace"},
    {"id": "region", "kind": "histogram", "column": "region", "mechanism": "discrete_laplace"},
    {"id": "income_median", "kind": "median", "column": "income", "mechanism": "exponential",
     "candidates": 201},
]


def test_release_on_the_cluster_then_reused_by_duckdb(data_dir: Path, cluster: Any, tmp_path: Path) -> None:
    import numpy as np
    import pandas as pd
    from pyspark import SparkContext

    from planner.release import cmd_ledger, release_file

    # typed Parquet (the conformance case above reads a CSV): 3,000 rows, ~3 per person
    # (bounding to c = 2 cuts some), every cell valid (a release refuses text in a number)
    rng = np.random.default_rng(31)
    n = 3000
    pd.DataFrame({
        "pid": rng.integers(0, n // 3, n).astype(str), "age": rng.integers(10, 100, n),
        "income": np.round(rng.lognormal(10, 1.2, n), 2),
        "region": rng.choice(["North", "South", "East", "West", "Mars"], n),
        "smoker": rng.choice([True, False], n),
    }).to_parquet(data_dir / "gen.parquet")
    schema = conformance.generated_schema().to_dict()
    schema["public_n"] = n  # the table's size, public (a mean's error needs it)
    schema_path = tmp_path / "gen.schema.json"
    schema_path.write_text(json.dumps(schema))
    spec = {"schema": str(schema_path), "budget": {"epsilon": 1.0, "delta": 0.0, "composition": "basic"},
            "queries": QUERIES, "lifetime": {"epsilon": 2.0, "delta": 0.0}, "dataset_name": "generated"}
    plan = tmp_path / "PLAN.json"
    plan.write_text(json.dumps(spec))
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    master = str(cluster.sparkContext.master)

    out = release_file(str(plan), str(data_dir / "gen.parquet"), ledger, backend="spark",
                       spark_master=master).report_json()
    assert SparkContext._active_spark_context is cluster.sparkContext  # in this session, not a new one
    assert out["status"] == "done"
    assert [q["query"] for q in out["queries"]] == [q["id"] for q in QUERIES]
    # basic composition: the release spends the plan's ε = 1 of the lifetime 2
    assert out["budget"]["epsilon_spent"] == pytest.approx(1.0, rel=1e-9)

    again = release_file(str(plan), str(data_dir / "gen.parquet"), ledger, backend="duckdb").report_json()
    assert again["status"] == "reused", "DuckDB saw another dataset or plan than Spark on the cluster"
    assert again["queries"] == out["queries"] and again["dataset"] == out["dataset"]
    assert cmd_ledger(ledger, out["dataset"]["fingerprint"])["status"]["releases"] == 1


def test_the_master_is_one_setting(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``PLANNER_SPARK_MASTER`` names the master when none is passed (the command line's
    ``--spark-master`` passes one); a session on another master than the one asked for is
    refused, never used quietly."""
    from planner.data.backends.spark_backend import MASTER_ENV, get_session

    master = str(cluster.sparkContext.master)
    monkeypatch.setenv(MASTER_ENV, master)
    assert get_session().sparkContext is cluster.sparkContext
    other = "local[2]"
    monkeypatch.setenv(MASTER_ENV, other)
    with pytest.raises(PlannerError, match=r"already running.*cannot be used too") as err:
        get_session()
    assert master in str(err.value) and other in str(err.value)
    # an explicit master (--spark-master) wins over the setting
    assert get_session(master).sparkContext is cluster.sparkContext
    monkeypatch.delenv(MASTER_ENV)
    with pytest.raises(PlannerError, match="cannot be used too"):
        get_session(other)
