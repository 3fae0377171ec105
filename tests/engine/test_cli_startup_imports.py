"""``planner release`` on a Parquet file starts reading without pyarrow (issue 17), and the
Parquet footer check DuckDB now makes gives the verdicts the pyarrow one gave.

Start-up (spawn → first statement reading the data, measured, never asserted, by
``tests/benchmarks/bench_backends.py --startup-only``) is mostly imports. The DuckDB route
used to import pyarrow (about 0.05 s and 37 MB) only to read the footer of a Parquet file
before the scan; DuckDB, the engine that reads the file, now reads the footer itself
(:func:`planner.data.sources._check_parquet`, :mod:`planner.data.parquet_footer`). The structural checks run the real command in a
fresh interpreter under ``tests/benchmarks/cli_probe.py``, which records the modules loaded
when the first statement naming the data runs; they fail, naming the module, when pyarrow or
one of the heavy libraries of ``test_lazy_imports.NOT_BEFORE_FIRST_READ`` is back on the path.

The footer checks: the hostile Parquet files of ``tests/fixtures/hostile_files`` get the
same message from the DuckDB reader and from the pyarrow one (kept for installations
without DuckDB), names of nested schemas are compared with pyarrow's, and the one known
class of disagreement (a damaged Arrow schema in the key-value metadata, which only pyarrow
decodes) is pinned, so that it is a decision, not an accident.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from planner.data import parquet_footer
from tests.engine.test_lazy_imports import NOT_BEFORE_FIRST_READ

duckdb = pytest.importorskip("duckdb")

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "tests" / "benchmarks" / "cli_probe.py"
HOSTILE = ROOT / "tests" / "fixtures" / "hostile_files"
sys.path.insert(0, str(HOSTILE))
import make_files  # noqa: E402

#: Not imported by ``planner release`` (DuckDB route) before it reads the first row.
HEAVY = (*NOT_BEFORE_FIRST_READ, "pyarrow")

PLAN: dict[str, Any] = {
    "schema": {
        "version": 1,
        "columns": [
            {"name": "age", "kind": "numeric", "lower": 0, "upper": 100, "missing": {"action": "drop"}},
            {"name": "region", "kind": "categorical", "categories": ["North", "South"],
             "missing": {"action": "drop"}},
        ],
    },
    "budget": {"epsilon": 1.0, "delta": 1e-6, "composition": "zcdp"},
    "lifetime": {"epsilon": 3.0, "delta": 1e-5},
    "queries": [
        {"id": "n", "kind": "count", "mechanism": "laplace"},
        {"id": "age_sum", "kind": "sum", "column": "age", "mechanism": "laplace"},
        {"id": "region", "kind": "histogram", "column": "region", "mechanism": "discrete_gaussian"},
    ],
}


def _parquet(path: Path, rows: int = 1000) -> Path:
    """A Parquet file written by DuckDB: age 18..90, region North/South in turn."""
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT (18 + i % 73)::INTEGER AS age, ['North', 'South'][1 + (i % 2)::INTEGER] AS region "
        f"FROM range({int(rows)}) t(i)) TO '{path}' (FORMAT parquet)"
    )
    con.close()
    return path


def _fresh(code: str, tmp: Path) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter (this worktree first on sys.path); it prints one
    JSON line starting with RESULT, which is returned."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore", PLANNER_HOME=str(tmp / "home"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    out: dict[str, Any] = json.loads(line.removeprefix("RESULT"))
    return out


def _present(modules: list[str], roots: tuple[str, ...]) -> list[str]:
    return sorted({m for m in modules for r in roots if m == r or m.startswith(r + ".")})


def test_parquet_release_reads_its_first_row_before_pyarrow_and_the_heavy_imports(tmp_path: Path) -> None:
    """The whole command, ``planner release --backend duckdb`` on a Parquet file, under the
    benchmark's start-up probe: when the first statement naming the data runs, none of
    HEAVY is loaded; the release then completes (so the probe saw the real route)."""
    data = _parquet(tmp_path / "people.parquet")
    spec = tmp_path / "plan.json"
    spec.write_text(json.dumps(PLAN))
    report = tmp_path / "probe.json"
    env = dict(os.environ, PYTHONWARNINGS="ignore", PLANNER_HOME=str(tmp_path / "home"), BENCH_PLANNER_ROOT=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(PROBE), str(report), "release", "--spec", str(spec), "--data", str(data),
         "--ledger", f"sqlite:///{tmp_path}/ledger.db", "--backend", "duckdb"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["status"] == "done"  # a release was made: the probe watched the route
    probe = json.loads(report.read_text())
    assert probe["first_scan"] is not None
    at_first_read = probe["modules_at_first_read"]
    assert "duckdb" in at_first_read and "planner.data.backends.sql" in at_first_read
    assert _present(at_first_read, HEAVY) == []


def test_parquet_footer_check_needs_no_pyarrow(tmp_path: Path) -> None:
    """Opening Parquet sources (a good file, a truncated one, one whose chunks point past
    its data) on the command line's route gives the footer check's verdicts without
    importing pyarrow."""
    good = _parquet(tmp_path / "good.parquet")
    for name in ("truncated.parquet", "cut_inside.parquet"):
        (tmp_path / name).write_bytes((HOSTILE / name).read_bytes())
    out = _fresh(f"""
import json, sys
from planner.core.errors import DataError
from planner.data.sources import open_cli_source
OUT = {{"good": open_cli_source({str(good)!r}).kind}}
for name in ("truncated.parquet", "cut_inside.parquet"):
    try:
        open_cli_source({str(tmp_path)!r} + "/" + name)
        OUT[name] = "accepted"
    except DataError as exc:
        OUT[name] = str(exc)
OUT["modules"] = sorted(sys.modules)
print("RESULT" + json.dumps(OUT))
""", tmp_path)
    assert out["good"] == "parquet"
    assert make_files.REFUSED["truncated.parquet"] in out["truncated.parquet"]
    assert make_files.REFUSED["cut_inside.parquet"] in out["cut_inside.parquet"]
    assert "duckdb" in out["modules"]  # the footer was read by DuckDB
    assert _present(out["modules"], HEAVY) == []


PARQUET_CASES = sorted(n for n in make_files.KEPT if n.endswith(".parquet"))


@pytest.mark.parametrize("reader", ["duckdb", "pyarrow"])
@pytest.mark.parametrize("name", PARQUET_CASES)
def test_footer_readers_give_the_corpus_its_verdicts(name: str, reader: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Every hostile Parquet file of the corpus gets the message ``make_files.REFUSED``
    expects (or is accepted) from either footer reader."""
    from planner.core.errors import DataError
    from planner.data import sources

    if reader == "pyarrow":
        monkeypatch.setattr(parquet_footer, "duckdb_module", lambda: None)
    path = tmp_path / name
    path.write_bytes((HOSTILE / name).read_bytes())
    # a column's name and its nested type are judged against the declared schema by the
    # backend (their verdicts are checked by test_hostile_files), so the footer reader
    # accepts these files themselves
    by_schema = name.startswith("nested_") or name == "invisible_in_a_name.parquet"
    if name in make_files.REFUSED and not by_schema:
        with pytest.raises(DataError) as err:
            sources._check_parquet((path,), name)
        assert make_files.REFUSED[name] in str(err.value) and name in str(err.value)
    else:
        sources._check_parquet((path,), name)


def test_footer_check_of_a_glob_names_the_bad_file(tmp_path: Path) -> None:
    """Several files: each is checked in order and the error names the bad one."""
    from planner.core.errors import DataError
    from planner.data import sources

    good = _parquet(tmp_path / "a.parquet")
    bad = tmp_path / "b.parquet"
    bad.write_bytes((HOSTILE / "cut_inside.parquet").read_bytes())
    with pytest.raises(DataError, match=r"file 'b\.parquet' could not be read as Parquet"):
        sources._check_parquet((good, bad), "*.parquet")


def test_top_level_names_match_pyarrow_on_nested_schemas(tmp_path: Path) -> None:
    """The column names the DuckDB reader takes from the flattened Parquet schema are
    pyarrow's ``schema_arrow.names`` (the independent reader) for structs, lists and maps."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")

    table = pa.table({
        "s": pa.array([{"x": 1, "y": [1, 2], "z": {"w": "a"}}, {"x": 2, "y": [], "z": {"w": "b"}}]),
        "plain": [1.5, 2.5],
        "l": pa.array([[1], [2, 3]]),
        "m": pa.array([[("k", 1)], [("j", 2)]], type=pa.map_(pa.string(), pa.int64())),
        "": ["e", "f"],
        "dup": [1, 2],
    })
    path = tmp_path / "nested.parquet"
    pq.write_table(table, path)
    con = duckdb.connect()
    names, rows, fits = parquet_footer.footer_by_duckdb(duckdb, con, path, path.stat().st_size - 8 - int(
        pq.ParquetFile(path).metadata.serialized_size), "nested.parquet")
    assert names == pq.ParquetFile(path).schema_arrow.names == ["s", "plain", "l", "m", "", "dup"]
    assert (rows, fits) == (2, True)


@pytest.mark.parametrize("schema", [
    [],  # no root
    [("schema", 2), ("a", None)],  # the root counts a column past the end
    [("schema", 1), ("g", 2), ("a", None)],  # a group counts a child past the end
    [("schema", 1), ("a", None), ("b", None)],  # an element outside the tree
    [("schema", 1), ("g", -1)],  # a negative count
    [("schema", 1), (None, None)],  # a column without a name
])
def test_top_level_names_refuse_a_list_that_is_not_one_tree(schema: list[tuple[Any, Any]]) -> None:

    with pytest.raises(ValueError):
        parquet_footer.top_level_names(schema)


def test_top_level_names_of_a_well_formed_list() -> None:
    """Hand-made: root(3) → a, g(2) → [b, h(1) → c], d gives a, g, d."""

    schema = [("schema", 3), ("a", None), ("g", 2), ("b", None), ("h", 1), ("c", None), ("d", 0)]
    assert parquet_footer.top_level_names(schema) == ["a", "g", "d"]


def _damaged_arrow_schema(path: Path) -> Path:
    """A pyarrow-written file whose ``ARROW:schema`` metadata (base64 of an Arrow IPC
    schema, read by pyarrow only) has one character that is not base64; the Parquet schema
    and every page are intact. Same length, so the footer's length is unchanged."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"age": [20, 30, 40], "region": ["North", "South", "North"]}), path)
    raw = bytearray(path.read_bytes())
    key = raw.index(b"ARROW:schema")
    start = raw.index(base64.b64encode(b"\xff\xff\xff\xff")[:4], key)  # the IPC continuation marker
    raw[start + 8] = ord("!")
    path.write_bytes(bytes(raw))
    return path


def test_damaged_arrow_metadata_is_read_by_duckdb_and_refused_by_pandas(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The known disagreement of the two footer readers, pinned: a file whose only damage is
    the Arrow schema pyarrow keeps in the metadata. DuckDB reads the Parquet schema and the
    pages (intact), so the DuckDB route accepts it and counts its rows; the pandas loader
    reads the rows through pyarrow, which decodes that schema, and refuses it with the
    Parquet message (so the pandas route is never less strict than before)."""
    from planner.core.errors import DataError
    from planner.data import sources
    from planner.data.loader import load_table

    path = _damaged_arrow_schema(tmp_path / "damaged.parquet")
    monkeypatch.setattr(parquet_footer, "duckdb_module", lambda: None)
    with pytest.raises(DataError, match="could not be read as Parquet"):
        sources._check_parquet((path,), "damaged.parquet")  # pyarrow's verdict (the check before)
    monkeypatch.undo()
    sources._check_parquet((path,), "damaged.parquet")  # DuckDB's verdict
    assert duckdb.connect().execute("SELECT count(*), sum(age) FROM read_parquet($p)",
                                    {"p": str(path)}).fetchall() == [(3, 90)]
    with pytest.raises(DataError, match="could not be read as Parquet"):
        load_table(path, name="damaged.parquet")
