"""Hostile data files get the SAME verdict from the pandas, DuckDB and Spark backends.

The corpus is ``tests/fixtures/hostile_files`` (small files kept there; huge or special
ones, a FIFO, symbolic links, ``/dev/zero``, 10^6 columns, a 2 GiB NUL tail, made at test
time by its ``make_files.py`` in a temporary data directory). For every file each backend
either refuses it with the same message (naming the file and the fix, no traceback, no
private path) or accepts it with the same aggregates, which are known by construction of
the file. pandas and DuckDB run in a child process with a time limit and report their
peak memory (bounded); Spark runs in this process with a time limit and is skipped only
when Java or PySpark is absent.

The DuckDB verdict is also taken on ``planner release``'s route, where DuckDB reads a CSV
while its whole-file checks (NUL bytes, line lengths, UTF-8) run in another thread
(:class:`planner.data.sources.WholeFileCheck`): it must be the same.

The second part checks that DuckDB is opened with external access off: a database file
in the data directory whose view reads a CSV outside it is refused on the app's route.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import DataError, PlannerError
from planner.data.requests import ClippedSum
from planner.data.schema import Column, ColumnKind, MissingRule, Schema
from planner.data.sources import DATA_DIR_ENV, open_cli_source, open_source
from planner.planning.mechanisms.base import MechanismName as M
from planner.planning.queries import Query, QueryKind
from planner.planning.statistics import exact_aggregates, plan_requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "hostile_files"))
import make_files  # noqa: E402

CASES: list[str] = sorted(make_files.ACCEPTED) + sorted(make_files.REFUSED)
#: seconds a backend may take for one file (a FIFO read would block forever)
TIMEOUT = 120.0
#: peak resident memory of the child that reads a file with pandas and DuckDB (MB); the
#: 10^6-column file took 11 GB before the column limit
MAX_RSS_MB = 1024


def schema() -> Schema:
    return Schema((
        Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),
        Column("region", ColumnKind.CATEGORICAL, MissingRule(), categories=make_files.REGIONS),
    ))


QUERIES = [
    Query("n", QueryKind.COUNT, None, M.LAPLACE),
    Query("age_sum", QueryKind.SUM, "age", M.LAPLACE),
    Query("region", QueryKind.HISTOGRAM, "region", M.LAPLACE),
]


def verdict(kind: str, name: str, spark: Any = None) -> dict[str, Any]:
    """``{"ok": aggregates}`` or ``{"error": message}``; anything but a PlannerError raises."""
    from planner.data.backends import check_backend, close_backend, make_backend

    try:
        if kind == "spark":
            from planner.data.backends.spark_backend import SparkBackend

            engine: Any = SparkBackend(name, schema(), spark=spark)
        elif kind == "deferred":  # planner release's route: DuckDB reads while the whole-file checks run
            from planner.data.backends import BackgroundScan

            engine = BackgroundScan("duckdb", open_source(name, defer_check=True), schema(),
                                    plan_requests(QUERIES, schema())).result()
        else:
            engine = make_backend(kind, name, schema())
        try:
            check_backend(engine)
            got = exact_aggregates(engine, QUERIES)
        finally:
            close_backend(engine)
    except PlannerError as exc:
        return {"error": str(exc)}
    return {"ok": {
        "n": got["n"].value,
        "age_sum": got["age_sum"].value,
        "region": list(got["region"].counts),
    }}


def _child(data: str, name: str) -> None:
    """Run in a child process: the pandas and DuckDB verdicts on one file, as JSON."""
    os.environ[DATA_DIR_ENV] = data
    out = {kind: verdict(kind, name) for kind in ("pandas", "duckdb", "deferred")}
    # this process's own peak (VmHWM belongs to the address space exec created); not
    # getrusage's ru_maxrss, which Linux carries over from the forked copy of the parent, so a
    # large pytest process would be counted as the child's
    hwm = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:"))
    out["max_rss_mb"] = int(hwm.split()[1]) // 1024  # type: ignore[assignment]
    print(json.dumps(out))


def with_timeout(fn: Callable[[], dict[str, Any]], seconds: float = TIMEOUT) -> dict[str, Any]:
    """``fn()`` in a worker thread; a hang fails the test instead of blocking the run."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"no verdict within {seconds} s: the read blocks"
    if "error" in box:
        raise box["error"]
    value: dict[str, Any] = box["value"]
    return value


def check_verdict(name: str, got: dict[str, Any], data: Path, who: str) -> None:
    """The expected verdict: the aggregates by construction, or a clear, clean message."""
    if name in make_files.ACCEPTED:
        assert got == {"ok": make_files.ACCEPTED[name]}, (who, got)
        return
    assert "error" in got, (who, name, got)
    msg = got["error"]
    assert make_files.REFUSED[name] in msg, (who, msg)
    assert repr(name) in msg, (who, msg)  # names the file
    assert "Traceback" not in msg and len(msg) < 600, (who, msg)
    # no private path: not the data directory, not the folder a link leads to
    assert str(data) not in msg and str(data.parent) not in msg, (who, msg)


# ------------------------------------------------------------------ the corpus
@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The data directory holding every hostile file (made once for the module)."""
    base = tmp_path_factory.mktemp("hostile")
    data, outside = base / "data", base / "outside"
    data.mkdir()
    outside.mkdir()
    make_files.build(data, outside)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DATA_DIR_ENV, str(data))
        yield data


@pytest.fixture(scope="module")
def spark() -> Any:
    """The local Spark session, or the test skipped with the reason (:func:`tests.spark_cluster.local_session`)."""
    from tests.spark_cluster import local_session

    return local_session()


def test_corpus_covers_every_case_once() -> None:
    assert not set(make_files.ACCEPTED) & set(make_files.REFUSED)
    assert len(CASES) == 35
    kept = {p.name for p in (ROOT / "tests" / "fixtures" / "hostile_files").iterdir()}
    assert set(make_files.KEPT) <= kept  # rewrite them with make_files.py


@pytest.mark.hostile(2)
@pytest.mark.parametrize("name", CASES)
def test_pandas_and_duckdb_give_the_same_verdict(name: str, corpus: Path) -> None:
    code = ("import sys; from tests.engine.test_hostile_files import _child; "
            "_child(sys.argv[1], sys.argv[2])")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(corpus), name], cwd=ROOT, capture_output=True,
        text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "Traceback" not in proc.stderr
    assert out["max_rss_mb"] < MAX_RSS_MB, out["max_rss_mb"]
    check_verdict(name, out["pandas"], corpus, "pandas")
    check_verdict(name, out["duckdb"], corpus, "duckdb")
    assert out["duckdb"] == out["pandas"]
    # the release route reads a CSV while its whole-file checks run: the same verdict
    assert out["deferred"] == out["duckdb"]


@pytest.mark.hostile
@pytest.mark.parametrize("name", CASES)
def test_spark_gives_the_same_verdict(name: str, corpus: Path, spark: Any) -> None:
    got = with_timeout(lambda: verdict("spark", name, spark))
    check_verdict(name, got, corpus, "spark")
    assert got == with_timeout(lambda: verdict("pandas", name))


# ------------------------------------------------------------------ special paths elsewhere
def _special_paths(tmp: Path) -> dict[str, tuple[str, str]]:
    """Path → (label in the message, fragment): named on the command line or loaded directly."""
    fifo = tmp / "pipe.csv"
    os.mkfifo(fifo)
    loop = tmp / "loop.csv"
    loop.symlink_to(loop)
    folder = tmp / "folder.csv"
    folder.mkdir()
    return {
        "/dev/zero": ("zero", "is a device, not a regular file"),
        str(fifo): ("pipe.csv", "is a FIFO (named pipe), not a regular file"),
        str(folder): ("folder.csv", "is a folder, not a regular file"),
        str(loop): ("loop.csv", "is a loop of symbolic links"),
    }


@pytest.mark.hostile(8)
def test_cli_refuses_special_files_without_blocking(tmp_path: Path) -> None:
    """``planner validate --data`` (the user names any path): same message from both routes."""
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(schema().to_dict()))
    for path, (label, fragment) in _special_paths(tmp_path).items():
        messages = []
        for backend in ("pandas", "duckdb"):
            proc = subprocess.run(
                [sys.executable, "-m", "planner", "validate", "--data", path, "--schema",
                 str(schema_file), "--backend", backend],
                cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT,
            )
            assert proc.returncode == 2, (path, backend, proc.stderr[-1000:])
            assert "Traceback" not in proc.stderr
            message = json.loads(proc.stderr)["error"]
            assert fragment in message and repr(label) in message, (path, backend, message)
            messages.append(message)
        assert messages[0] == messages[1], messages


@pytest.mark.hostile(4)
def test_loader_refuses_special_files_without_blocking(tmp_path: Path) -> None:
    """An upload path handed to the loader directly: refused before it is read."""
    from planner.data.loader import load_table

    for path, (label, fragment) in _special_paths(tmp_path).items():
        def load(p: str = path) -> dict[str, Any]:
            try:
                load_table(p)
            except DataError as exc:
                return {"error": str(exc)}
            return {"ok": True}

        got = with_timeout(load, 30)
        assert fragment in got.get("error", ""), (path, got)
        assert repr(label) in got["error"]


def test_nested_values_in_a_table_in_memory_get_one_verdict(spark: Any) -> None:
    """A DataFrame (the app's uploads, a notebook's table) whose declared column holds
    lists or dicts: refused by every engine with the message files get, not read as the
    lists' text by DuckDB and Spark (which would count every cell as undeclared)."""
    import numpy as np
    import pandas as pd

    from planner.data.backends import PandasBackend
    from planner.data.backends.duckdb_backend import DuckDBBackend
    from planner.data.backends.spark_backend import SparkBackend

    ages = [20, 30, 40]
    frames = {
        "lists": pd.DataFrame({"age": ages, "region": [np.array(["North"]), None, np.array(["South"])]}),
        "dicts": pd.DataFrame({"age": ages, "region": [{"name": "North"}, {"name": "South"}, None]}),
        "numbers in lists": pd.DataFrame({"age": [[20], [30], [40]], "region": ["North", "South", "North"]}),
    }
    for what, frame in frames.items():
        said = []
        for make in (PandasBackend, DuckDBBackend, lambda f, s: SparkBackend(f, s, spark=spark)):
            with pytest.raises(DataError) as exc:
                make(frame, schema())
            said.append(str(exc.value))
        assert said[0] == said[1] == said[2], what
        assert said[0].startswith("the table: column ") and "holds nested values" in said[0], said[0]
    # an undeclared nested column is never read: the table is accepted
    extra = pd.DataFrame({"age": ages, "region": ["North", "South", "North"], "tags": [["a"], [], ["b", "c"]]})
    assert PandasBackend(extra, schema()).result(ClippedSum("age")).value == 90.0
    with DuckDBBackend(extra, schema()) as duck:
        assert duck.result(ClippedSum("age")).value == 90.0


def test_a_second_mark_is_refused_on_upload_too() -> None:
    """An upload (bytes, the app's route) gets the file's message, with the upload's name."""
    from planner.data.backends import make_backend

    data = (_kept_dir() / "two_boms.csv").read_bytes()
    for kind in ("pandas", "duckdb"):
        with pytest.raises(DataError, match=r"starts with 2 byte-order marks"):
            make_backend(kind, data, schema())


def _kept_dir() -> Path:
    return ROOT / "tests" / "fixtures" / "hostile_files"


@pytest.mark.hostile(2)
def test_cli_reads_a_wide_header_to_its_end(tmp_path: Path) -> None:
    """A header past the 64 KiB sample is read whole: no false "duplicate column" (a cut
    "c1234" reads as "c12"), the true duplicate is still found."""
    names = [b"age", b"region"] + [b"column_%05d" % i for i in range(8_998)]
    head = b",".join(names)  # 117 KB
    (tmp_path / "ok.csv").write_bytes(head + b"\n" + b",".join([b"30", b"North"] + [b"0"] * 8_998) + b"\n")
    (tmp_path / "dup.csv").write_bytes(head + b",column_08997\n" + b",".join([b"30", b"North"] + [b"0"] * 8_999) + b"\n")
    src = open_cli_source(tmp_path / "ok.csv")
    assert src.header == tuple(n.decode() for n in names)  # type: ignore[union-attr]
    with pytest.raises(DataError, match=r"\['column_08997'\] appear more than once"):
        open_cli_source(tmp_path / "dup.csv")


# ------------------------------------------------------------------ DuckDB external access
@pytest.fixture()
def duck_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A data directory with ``census.duckdb`` (a table, a view over a CSV outside the
    directory, a view over a CSV inside it) and the outside CSV."""
    duckdb = pytest.importorskip("duckdb")
    data, outside = tmp_path / "data", tmp_path / "outside"
    data.mkdir()
    outside.mkdir()
    secret = outside / "secret.csv"
    secret.write_bytes(make_files.csv_bytes(make_files.rows(10)))
    (data / "inside.csv").write_bytes(make_files.csv_bytes(make_files.rows(10)))
    con = duckdb.connect(str(data / "census.duckdb"))
    con.execute("CREATE TABLE people (age INTEGER, region VARCHAR)")
    con.executemany("INSERT INTO people VALUES (?, ?)", make_files.rows(40))
    con.execute(f"CREATE VIEW leak AS SELECT * FROM read_csv('{secret}')")
    con.execute(f"CREATE VIEW inside AS SELECT * FROM read_csv('{data / 'inside.csv'}')")
    con.execute("CREATE VIEW adults AS SELECT * FROM people WHERE age >= 30")
    con.close()
    monkeypatch.setenv(DATA_DIR_ENV, str(data))
    return data, secret


def _duck(spec: Any) -> dict[str, Any]:
    from planner.data.backends.duckdb_backend import DuckDBBackend

    try:
        with DuckDBBackend(spec, schema()) as b:
            got = exact_aggregates(b, QUERIES)
    except PlannerError as exc:
        return {"error": str(exc)}
    return {"ok": {"n": got["n"].value, "age_sum": got["age_sum"].value,
                   "region": list(got["region"].counts)}}


@pytest.mark.hostile(2)
def test_duckdb_view_reading_outside_the_data_directory_is_refused(duck_dir: tuple[Path, Path]) -> None:
    data, secret = duck_dir
    for spec in ("census.duckdb::leak", open_source("census.duckdb::leak")):
        got = _duck(spec)
        msg = got.get("error", "")
        assert "reads a file outside the source" in msg and "'census.duckdb::leak'" in msg, got
        assert "CREATE TABLE" in msg  # the fix
        assert str(secret) not in msg and "secret" not in msg and str(data) not in msg


@pytest.mark.hostile
def test_duckdb_view_over_a_file_inside_the_directory_is_refused_too(duck_dir: tuple[Path, Path]) -> None:
    """A database reads no file at all: not even one inside the directory (a link there
    could lead anywhere); the CSV itself is the source to name."""
    got = _duck("census.duckdb::inside")
    assert "reads a file outside the source" in got.get("error", ""), got
    assert _duck("inside.csv") == {"ok": make_files.expected(make_files.rows(10))}


def test_duckdb_tables_and_views_over_tables_still_work(duck_dir: tuple[Path, Path]) -> None:
    people = make_files.rows(40)
    assert _duck("census.duckdb::people") == {"ok": make_files.expected(people)}
    assert _duck("census.duckdb::adults") == {"ok": make_files.expected([r for r in people if r[0] >= 30])}


def test_duckdb_connection_is_locked_to_the_source_files(duck_dir: tuple[Path, Path]) -> None:
    """The settings cannot be turned back on, and no other file can be read."""
    duckdb = pytest.importorskip("duckdb")
    from planner.data.backends.duckdb_backend import DuckDBBackend

    data, secret = duck_dir
    with DuckDBBackend("inside.csv", schema()) as b:
        con = b._con
        assert con.sql("SELECT count(*) FROM read_csv($p)", params={"p": str(data / "inside.csv")}).fetchall() == [(10,)]
        with pytest.raises(duckdb.PermissionException):
            con.sql("SELECT * FROM read_csv($p)", params={"p": str(secret)}).fetchall()
        with pytest.raises(duckdb.Error):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error):
            con.execute("SET allowed_directories = ['/']")


def test_cli_route_reads_the_files_the_user_names(duck_dir: tuple[Path, Path]) -> None:
    """The command line names files anywhere: the named CSV is read (with external access
    off); a database view over another file is refused there too."""
    data, secret = duck_dir
    assert _duck(open_cli_source(str(secret))) == {"ok": make_files.expected(make_files.rows(10))}
    got = _duck(open_cli_source(f"{data / 'census.duckdb'}::leak"))
    assert "reads a file outside the source" in got.get("error", ""), got
    assert _duck(open_cli_source(f"{data / 'census.duckdb'}::people")) == {
        "ok": make_files.expected(make_files.rows(40))}
