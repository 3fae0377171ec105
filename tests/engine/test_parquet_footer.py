"""A damaged Parquet footer is refused with the engine's message on every route, never by
ending the process (:mod:`planner.data.parquet_footer`).

pyarrow 26 aborts the interpreter (``std::terminate``, exit 134) when it walks the chunk
metadata of ``tests/fixtures/pyarrow_abort/footer_statistics.parquet``: in the app that is
an upload stopping the server. Each check runs in a child process, so that an abort fails
the test instead of ending pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ABORT = ROOT / "tests" / "fixtures" / "pyarrow_abort" / "footer_statistics.parquet"
REFUSAL = "could not be read as Parquet (corrupt or unsupported); re-export it."


def _child(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_fixture_still_aborts_pyarrow() -> None:
    """The case is the one meant: walking the footer with pyarrow ends the process (if a
    pyarrow release fixes this, the fixture no longer tests anything and this fails)."""
    pytest.importorskip("pyarrow")
    proc = _child(f"""
        import pyarrow.parquet as pq
        md = pq.ParquetFile({str(ABORT)!r}).metadata
        for g in range(md.num_row_groups):
            for c in range(md.row_group(g).num_columns):
                md.row_group(g).column(c)
        print("walked")
    """)
    assert proc.returncode != 0 and "walked" not in proc.stdout
    assert "histogram size mismatch" in proc.stderr


@pytest.mark.parametrize("route", ["upload", "file"])
def test_a_footer_that_aborts_pyarrow_does_not_end_the_process(route: str) -> None:
    """An upload (the pandas loader, what the app's Data page reads) gets the Parquet
    refusal (pyarrow's ``read_table`` refuses the statistics after DuckDB's footer check);
    a file opened for the DuckDB route is accepted: its rows are intact and DuckDB does not
    read the damaged statistics (the routes' verdicts differ here, as on the other footers
    only pyarrow decodes: ``test_cli_startup_imports``). The process lives on in both."""
    pytest.importorskip("duckdb")
    if route == "upload":
        call = f"load_table(open({str(ABORT)!r}, 'rb').read(), name='up.parquet')"
        imp = "from planner.data.loader import load_table"
    else:
        call = f"open_cli_source({str(ABORT)!r})"
        imp = "from planner.data.sources import open_cli_source"
    proc = _child(f"""
        {imp}
        from planner.core.errors import DataError
        try:
            {call}
            print("ACCEPTED")
        except DataError as exc:
            print("REFUSED", exc)
        print("ALIVE")
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ALIVE" in proc.stdout
    if route == "upload":
        assert "REFUSED" in proc.stdout and REFUSAL in proc.stdout, proc.stdout
    else:
        assert "ACCEPTED" in proc.stdout, proc.stdout


def test_an_upload_footer_is_read_from_a_private_copy_that_is_removed(tmp_path: Path) -> None:
    """The DuckDB reader of an upload's footer writes a temporary copy (mode 0600) and
    removes it whatever the verdict."""
    pytest.importorskip("duckdb")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import tempfile

    from planner.core.errors import DataError
    from planner.data import parquet_footer

    good = tmp_path / "g.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), good)
    seen: list[tuple[str, int]] = []
    real = parquet_footer.footer_by_duckdb

    def spy(duckdb: object, con: object, path: Path, end: int, label: str) -> tuple[list[str], int, bool]:
        seen.append((str(path), path.stat().st_mode & 0o777))
        return real(duckdb, con, path, end, label)

    mp = pytest.MonkeyPatch()
    mp.setattr(parquet_footer, "footer_by_duckdb", spy)
    try:
        assert parquet_footer.footer_of_bytes(good.read_bytes(), "g.parquet") == (["a"], 3, True)
        data = bytearray(good.read_bytes())
        data[-12:-8] = b"\xff\xff\xff\x7f"  # the footer length points before the file's start
        with pytest.raises(DataError, match="could not be read as Parquet"):
            parquet_footer.footer_of_bytes(bytes(data), "bad.parquet")
    finally:
        mp.undo()
    assert len(seen) == 2 and all(mode == 0o600 for _, mode in seen)
    assert all(not Path(p).exists() and Path(p).parent == Path(tempfile.gettempdir()) for p, _ in seen)
