"""``planner release`` reads a CSV while its whole-file checks run (issue 17).

The whole-file checks of a CSV (NUL bytes, line lengths, UTF-8: ``planner.data.sources._scan_file``)
are a pass over the file's bytes, about 0.3 s at 1.7 GB. On the release route they run in a
thread of their own (:class:`planner.data.sources.WholeFileCheck`) while DuckDB reads the file,
and :class:`planner.data.backends.BackgroundScan` waits for their verdict before it hands the
backend over. The verdicts on the hostile-file corpus are compared with the synchronous
route's in ``tests/engine/test_hostile_files.py``; here: the order of events (the scan reads
before the check ends), the encoding found only by the check (the file is opened and read
again, and the answers are those of the synchronous route), and an error found by the check
after the scan has finished.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import DataError
from planner.data import sources
from planner.data.backends import BackgroundScan, check_backend, close_backend, make_backend
from planner.data.schema import Column, ColumnKind, MissingRule, Schema
from planner.planning.mechanisms.base import MechanismName as M
from planner.planning.queries import Query, QueryKind
from planner.planning.statistics import exact_aggregates, plan_requests

pytest.importorskip("duckdb")

SCHEMA = Schema((
    Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),
    Column("region", ColumnKind.CATEGORICAL, MissingRule(), categories=("North", "South", "Zürich")),
))
QUERIES = [
    Query("n", QueryKind.COUNT, None, M.LAPLACE),
    Query("age_sum", QueryKind.SUM, "age", M.LAPLACE),
    Query("region", QueryKind.HISTOGRAM, "region", M.LAPLACE),
]


def _rows(n: int) -> bytes:
    """Rows age 20..69, North/South in turn (ASCII), after the header."""
    return b"age,region\n" + b"".join(b"%d,%s\n" % (20 + i % 50, (b"North", b"South")[i % 2]) for i in range(n))


def _answers(engine: Any) -> dict[str, Any]:
    check_backend(engine)
    got = exact_aggregates(engine, QUERIES)
    return {"n": got["n"].value, "age_sum": got["age_sum"].value, "region": list(got["region"].counts),
            "digest": engine.content_digest().hexdigest}


def _synchronous(path: Path) -> dict[str, Any]:
    engine = make_backend("duckdb", sources.open_cli_source(path), SCHEMA)
    try:
        return _answers(engine)
    finally:
        close_backend(engine)


@pytest.fixture(autouse=True)
def _fresh_verdicts() -> None:
    sources._SCANNED.clear()  # every test runs the checks itself


def test_the_scan_reads_while_the_check_is_still_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check is held until the scan has read the data: the scan does read meanwhile
    (``wait_reading``), waits for the verdict before handing over, and then gives the
    synchronous route's answers and digest."""
    path = tmp_path / "people.csv"
    path.write_bytes(_rows(5000))
    expected = _synchronous(path)
    sources._SCANNED.clear()
    go = threading.Event()
    real = sources._scan_file

    def held(p: Path, label: str) -> bool:
        assert go.wait(60), "the scan never started reading"
        return real(p, label)

    monkeypatch.setattr(sources, "_scan_file", held)
    source = sources.open_cli_source(path, defer_check=True)  # returns before the check has run
    assert isinstance(source, sources.FileSource) and source.pending is not None
    scan = BackgroundScan("duckdb", source, SCHEMA, plan_requests(QUERIES, SCHEMA))
    try:
        assert scan.wait_reading(timeout=60)  # DuckDB read the file while the check was held
        assert scan._thread.is_alive()  # and the scan waits for the verdict
    finally:
        go.set()
    engine = scan.result()
    try:
        assert _answers(engine) == expected
    finally:
        close_backend(engine)


def test_a_file_utf8_only_in_its_head_is_read_again_as_the_check_decides(tmp_path: Path) -> None:
    """A Windows-1252 byte past the 64 KiB the head sniff reads: the scan read the file as
    UTF-8, the check says it is not, and the source is opened and read again (Windows-1252,
    as the synchronous route reads it): the same answers, 'Zürich' counted."""
    path = tmp_path / "late.csv"
    path.write_bytes(_rows(8000) + "33,Zürich\n".encode("cp1252"))
    expected = _synchronous(path)
    assert expected["region"] == [4000, 4000, 1]  # rows made above: the last one is Zürich
    sources._SCANNED.clear()
    source = sources.open_cli_source(path, defer_check=True)
    assert isinstance(source, sources.FileSource) and source.paths == (path,)  # read as UTF-8 first
    scan = BackgroundScan("duckdb", source, SCHEMA, plan_requests(QUERIES, SCHEMA))
    engine = scan.result()
    try:
        assert _answers(engine) == expected
    finally:
        close_backend(engine)
    assert scan.source is not source and scan.source.paths != (path,)  # the transcoded copy was read


def test_an_error_the_check_finds_replaces_the_scans_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A NUL byte past the head: the check's message (naming the file and the line), not
    the scan's result, even when the scan finished first."""
    path = tmp_path / "tail.csv"
    path.write_bytes(_rows(8000) + b"30,No\x00rth\n")
    done = threading.Event()
    real = sources._scan_file

    def after_the_scan(p: Path, label: str) -> bool:
        done.wait(60)
        return real(p, label)

    monkeypatch.setattr(sources, "_scan_file", after_the_scan)
    scan = BackgroundScan("duckdb", sources.open_cli_source(path, defer_check=True), SCHEMA,
                          plan_requests(QUERIES, SCHEMA))
    assert scan.wait_reading(timeout=60)
    done.set()
    with pytest.raises(DataError, match=r"file 'tail\.csv' contains binary data \(a NUL byte on line 8,002\)"):
        scan.result()
