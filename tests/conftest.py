"""Test-wide settings: a private PLANNER_HOME so the server secret and the ledgers'
integrity markers of a test run never land in the user's real home; the counts of hostile
inputs tried and faults injected (``tests/hostile_counts.py``) printed after the run.

``.ci/run`` sets PLANNER_HOME to a fresh directory already; a developer's run gets one
per session here (unless PLANNER_HOME is set, which is then honoured).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from tests import hostile_counts

if not os.environ.get("PLANNER_HOME", "").strip():
    os.environ["PLANNER_HOME"] = tempfile.mkdtemp(prefix="planner-home-")


# ------------------------------------------------------------------ hostile-input counts


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hostile(n): the test tries n hostile inputs (summary count)")
    config.addinivalue_line("markers", "fault(n): the test injects n faults (summary count)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    for kind in ("hostile", "fault"):
        hostile_counts.CURRENT[kind] = 0
    try:
        return (yield)
    finally:
        for kind in ("hostile", "fault"):
            mark = item.get_closest_marker(kind)
            if mark is not None and hostile_counts.CURRENT[kind] == 0:
                hostile_counts.CURRENT[kind] = int(mark.args[0]) if mark.args else 1
        item.stash[_COUNTS] = dict(hostile_counts.CURRENT)


_COUNTS = pytest.StashKey[dict[str, int]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    rep = yield
    if rep.when == "call":
        counts = item.stash.get(_COUNTS, {})
        for kind, n in counts.items():
            hostile_counts.TOTALS[kind]["tried"] += n
            if rep.passed:
                hostile_counts.TOTALS[kind]["passed"] += n
    return rep


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    t = hostile_counts.TOTALS
    if t["hostile"]["tried"] or t["fault"]["tried"]:
        terminalreporter.write_line(
            f"hostile inputs tried: {t['hostile']['tried']} ({t['hostile']['passed']} handled as "
            f"specified); faults injected: {t['fault']['tried']} ({t['fault']['passed']} handled "
            "as specified)"
        )


# ------------------------------------------------------------------ a Spark cluster


@pytest.fixture(scope="session")
def spark_cluster_master() -> Iterator[str]:
    """The ``spark://`` URL of a standalone Spark cluster (a master and one worker on
    127.0.0.1): the one ``scripts/test`` started (``PLANNER_TEST_SPARK_MASTER``), else one
    started here for the session (``tests/spark_cluster.py``). When none can be started the
    cluster cases are skipped, with the reason."""
    from pathlib import Path

    url = os.environ.get("PLANNER_TEST_SPARK_MASTER", "").strip()
    if url:
        yield url
        return
    reason = os.environ.get("PLANNER_TEST_SPARK_SKIP_REASON", "").strip()
    if reason:
        pytest.skip(f"the Spark cluster could not be started by scripts/test: {reason}")
    from tests import spark_cluster

    directory = Path(tempfile.mkdtemp(prefix="planner-spark-"))
    try:
        url = spark_cluster.start(directory / "cluster")
    except (RuntimeError, OSError) as exc:
        pytest.skip(f"the Spark cluster could not be started: {exc}")
    try:
        yield url
    finally:
        spark_cluster.stop(directory / "cluster")


# ------------------------------------------------------------------ the Planner's background planning


@pytest.fixture(autouse=True)
def _background_planning_ends_with_its_test() -> Iterator[None]:
    """A Planner page run in an AppTest starts background planning (``pages/_ui/prefetch.py``);
    it ends before the next test starts, so that no test counts or times another's plans."""
    yield
    import sys

    prefetch = sys.modules.get("pages._ui.prefetch")
    if prefetch is not None:
        assert prefetch.wait(300), "the Planner's background planning did not finish within 5 minutes"
