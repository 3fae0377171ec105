"""Data sources: the allow-listed data directory, globs, DuckDB tables, spilled uploads."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd
import pytest

from planner.core.errors import DataError
from planner.data.backends import PandasBackend
from planner.data.backends.duckdb_backend import DuckDBBackend
from planner.data.loader import load_table
from planner.data.requests import ClippedSum, Count
from planner.data.schema import Column, ColumnKind, MissingRule, Schema, dataset_fingerprint
from planner.data.sources import (
    DATA_DIR_ENV,
    FileSource,
    TableSource,
    data_dir,
    open_source,
    resolve_paths,
    source_fingerprint,
    spill_upload,
)
from planner.planning.mechanisms.base import MechanismName as M
from planner.planning.queries import Query, QueryKind
from planner.planning.statistics import exact_aggregates

ROOT = Path(__file__).resolve().parents[2]
CSV = "age,region\n30,A\n150,B\n,A\nabc,C\n"
SCHEMA = Schema(
    (
        Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),
        Column("region", ColumnKind.CATEGORICAL, MissingRule(), categories=("A", "B")),
    )
)
QUERIES = [
    Query("s", QueryKind.SUM, "age", M.LAPLACE),
    Query("h", QueryKind.HISTOGRAM, "region", M.LAPLACE),
]


@pytest.fixture()
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv(DATA_DIR_ENV, str(d))
    return d


def test_sources_default_data_dir_is_the_repository_data_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert data_dir() == (ROOT / "data").resolve()
    src = open_source("census.csv")
    assert isinstance(src, FileSource) and src.kind == "csv" and src.label == "census.csv"
    assert src.header[0] == "person_id"
    # an absolute path inside the directory is accepted too
    assert open_source(str(ROOT / "data" / "census.csv")).files == src.files  # type: ignore[union-attr]
    # the ledger key is the file's sha256, whatever the backend
    assert source_fingerprint(src) == dataset_fingerprint(ROOT / "data" / "census.csv")


@pytest.mark.parametrize(
    "spec",
    ["../secret.csv", "sub/../../secret.csv", "/etc/passwd", "..", "x\x00.csv"],
)
def test_sources_refuse_paths_outside_the_data_directory(data: Path, spec: str) -> None:
    (data.parent / "secret.csv").write_text(CSV)
    with pytest.raises(DataError, match="refused"):
        open_source(spec)


def test_sources_refuse_symlinks_leaving_the_directory(data: Path) -> None:
    secret = data.parent / "secret.csv"
    secret.write_text(CSV)
    os.symlink(secret, data / "link.csv")
    with pytest.raises(DataError, match="leads outside"):
        open_source("link.csv")
    with pytest.raises(DataError, match="leads outside"):
        open_source("*.csv")
    os.symlink(data.parent, data / "up")
    with pytest.raises(DataError, match="leads outside"):
        open_source("up/secret.csv")


def test_sources_symlink_inside_the_directory_is_fine(data: Path) -> None:
    (data / "real.csv").write_text(CSV)
    os.symlink(data / "real.csv", data / "alias.csv")
    assert resolve_paths("alias.csv") == ((data / "real.csv").resolve(),)


def test_sources_missing_file_and_folder(data: Path) -> None:
    with pytest.raises(DataError, match="no data file matches"):
        open_source("nope.csv")
    (data / "sub").mkdir()
    with pytest.raises(DataError, match="folder"):
        open_source("sub")


def test_sources_glob_of_csv_files_is_one_table(data: Path) -> None:
    (data / "part").mkdir()
    (data / "part" / "a.csv").write_text(CSV)
    (data / "part" / "b.csv").write_text("age,region\n20,B\n")
    src = open_source("part/*.csv")
    assert isinstance(src, FileSource) and len(src.paths) == 2 and src.label == "part/*.csv"
    b = DuckDBBackend(src, SCHEMA)
    assert b.result(ClippedSum("age")).value == 30 + 100 + 20
    assert b.rows == 5
    assert len(source_fingerprint(src)) == 64
    (data / "part" / "c.csv").write_text("age;region\n1;A\n")
    with pytest.raises(DataError, match="different header"):
        open_source("part/*.csv")


def test_sources_parquet_and_mixed_formats(data: Path) -> None:
    pd.DataFrame({"age": [30.0, 150.0, None], "region": ["A", "B", "A"]}).to_parquet(data / "t.parquet")
    src = open_source("t.parquet")
    assert isinstance(src, FileSource) and src.kind == "parquet"
    assert DuckDBBackend(src, SCHEMA).result(ClippedSum("age")).value == 130.0
    (data / "t.csv").write_text(CSV)
    with pytest.raises(DataError, match="mixes CSV and Parquet"):
        open_source("t.*")


def test_sources_duckdb_table(data: Path) -> None:
    import duckdb

    con = duckdb.connect(str(data / "db.duckdb"))
    con.execute('CREATE TABLE "my ""table""" AS SELECT * FROM (VALUES (30, \'A\'), (150, \'B\')) t(age, region)')
    con.close()
    src = open_source('db.duckdb::my "table"')
    assert isinstance(src, TableSource)
    b = DuckDBBackend(src, SCHEMA)
    assert b.result(ClippedSum("age")).value == 130.0
    b.close()
    with pytest.raises(DataError, match="does not exist"):
        DuckDBBackend(open_source("db.duckdb::nope"), SCHEMA)
    with pytest.raises(DataError, match="name a table"):
        open_source("db.duckdb")


def test_sources_spill_upload_bytes_and_file_objects(data: Path) -> None:
    expected = exact_aggregates(PandasBackend(load_table(CSV.encode()), SCHEMA), QUERIES)
    with spill_upload(CSV.encode(), "up.csv") as src:
        path = src.paths[0]
        assert path.exists() and src.temporary
        assert exact_aggregates(DuckDBBackend(src, SCHEMA), QUERIES) == expected
    assert not path.exists()  # deleted afterwards
    buf = io.BytesIO()
    pd.DataFrame({"age": [30, 150, None], "region": ["A", "B", "A"]}).to_parquet(buf)
    with spill_upload(io.BytesIO(buf.getvalue()), "up.bin") as src:
        assert src.kind == "parquet"
    with pytest.raises(DataError, match="over the"):
        with spill_upload(b"x" * 2048, "big.csv", max_mb=0.001):
            pass


def test_sources_latin1_csv_is_read_like_the_loader(data: Path) -> None:
    text = "name,region\nJosé,Zürich\nAnaïs,Genève\n"
    (data / "l1.csv").write_bytes(text.encode("cp1252"))
    schema = Schema(
        (Column("region", ColumnKind.CATEGORICAL, MissingRule(), categories=("Zürich", "Genève")),)
    )
    q = [Query("h", QueryKind.HISTOGRAM, "region", M.LAPLACE)]
    src = open_source("l1.csv")
    assert exact_aggregates(DuckDBBackend(src, schema), q) == exact_aggregates(PandasBackend(
        load_table(data / "l1.csv"), schema
    ), q)
    assert source_fingerprint(src) == dataset_fingerprint(data / "l1.csv")  # the original bytes


def test_sources_bad_csv_files_give_data_errors(data: Path) -> None:
    (data / "ragged.csv").write_text("age,region\n1,A,x\n")
    with pytest.raises(DataError):
        DuckDBBackend(open_source("ragged.csv"), SCHEMA).result(Count())
    (data / "dup.csv").write_text("age,age\n1,2\n")
    with pytest.raises(DataError, match="more than once"):
        open_source("dup.csv")
    (data / "hdr.csv").write_text("age,region\n")
    with pytest.raises(DataError, match="no data rows"):
        DuckDBBackend(open_source("hdr.csv"), SCHEMA).result(Count())
    (data / "nocol.csv").write_text("age,other\n1,2\n")
    with pytest.raises(DataError, match="declared in the schema but not in the data"):
        DuckDBBackend(open_source("nocol.csv"), SCHEMA)
