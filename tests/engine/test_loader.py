"""Loader: every bad input gets a clear DataError (no private value), good variants load."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.core.errors import DataError, PlannerError, SchemaError
from planner.data.loader import (
    MAX_MB_ENV,
    check_against_schema,
    column_report,
    load_table,
    max_upload_bytes,
    read_source,
)
from planner.data.schema import Column, ColumnKind, MissingRule, PrivacyUnit, Schema
from planner.data.validate import validate_command

FIX = Path(__file__).resolve().parents[1] / "fixtures"
DATA = Path(__file__).resolve().parents[2] / "data"
SMALL = Schema.load(FIX / "small.schema.json")


# ------------------------------------------------------------------ bad inputs
@pytest.mark.parametrize(
    ("fixture", "pattern"),
    [
        ("empty.csv", r"file 'empty.csv' is empty"),
        ("header_only.csv", r"'header_only.csv' has a header but no data rows"),
        ("no_header.csv", r"first row looks like data, not a header \(all 3 fields are numbers\); add a header row"),
        ("ragged.csv", r"'ragged.csv': line 3 has 2 field\(s\) but the header has 3 \(2 such row\(s\)\)"),
        ("binary.csv", r"'binary.csv' does not look like CSV text"),
        ("utf16.csv", r"UTF-16.*save it as UTF-8"),
        ("dup_columns.csv", r"column name\(s\) \['age'\] appear more than once"),
        ("empty_colname.csv", r"column #2 has an empty name"),
    ],
)
def test_loader_bad_file_messages(fixture: str, pattern: str) -> None:
    with pytest.raises(DataError, match=pattern):
        load_table(FIX / fixture)


def test_loader_ragged_message_has_no_values() -> None:
    with pytest.raises(DataError) as ei:
        load_table(FIX / "ragged.csv")
    assert "41" not in str(ei.value) and "extra" not in str(ei.value)


def test_loader_garbage_text_wrong_encoding() -> None:
    rng = np.random.default_rng(1)
    junk = bytes(rng.integers(1, 32, 4000, dtype=np.uint8).tolist())
    with pytest.raises(DataError, match=r"not readable text|does not look like CSV"):
        load_table(junk, name="junk.csv")


@pytest.mark.parametrize(
    ("payload", "pattern"),
    [
        (b"PK\x03\x04rest-of-zip", "ZIP archive"),
        (b"\x1f\x8b\x08\x00", "gzip"),
        (b"PAR1garbagePAR1", "could not be read as Parquet"),
        (b"PAR1truncated", "not a valid Parquet file"),
        (b"   \n\n  ", "is empty"),
    ],
)
def test_loader_other_formats(payload: bytes, pattern: str) -> None:
    with pytest.raises(DataError, match=pattern):
        load_table(payload, name="x.csv")


def test_loader_text_in_numeric_column_reports_count_not_values() -> None:
    df = load_table(FIX / "text_in_numeric.csv")
    with pytest.raises(DataError) as ei:
        check_against_schema(df, SMALL)
    msg = str(ei.value)
    assert "column 'age' is declared numeric but 2 of 4 row(s) hold text" in msg
    assert "forty" not in msg and "xyzzy" not in msg
    # with allow_invalid the rows are counted instead
    rep = check_against_schema(df, SMALL, allow_invalid=True)
    assert rep["columns"]["age"]["invalid"] == 2 and rep["columns"]["age"]["usable"] == 2


def test_loader_nan_and_inf_are_counted_missing() -> None:
    df = load_table(FIX / "nan_inf.csv")
    rep = check_against_schema(df, SMALL)
    age = rep["columns"]["age"]
    # rows: 30, nan, inf, −inf, empty → 1 usable, 4 missing (dropped by the rule)
    assert (age["usable"], age["missing"], age["dropped"], age["invalid"]) == (1, 4, 4, 0)


def test_loader_id_nulls_rejected() -> None:
    schema = Schema(
        (Column("pid", ColumnKind.IDENTIFIER), *SMALL.columns),
        unit=PrivacyUnit("pid", 2),
    )
    df = load_table(FIX / "id_nulls.csv")
    with pytest.raises(DataError, match=r"identifier column 'pid' has 1 row\(s\) with no value"):
        check_against_schema(df, schema)


def test_loader_declared_column_absent() -> None:
    df = load_table(FIX / "good.tsv")
    schema = Schema((Column("income", ColumnKind.NUMERIC, MissingRule(), 0, 1),))
    with pytest.raises(DataError, match=r"\['income'\] are declared in the schema but not in the data"):
        check_against_schema(df, schema)


def test_loader_boolean_junk_rejected() -> None:
    df = pd.DataFrame({"age": [30], "region": ["A"], "smoker": ["perhaps"]})
    with pytest.raises(DataError, match="declared boolean but 1 of 1"):
        check_against_schema(df, SMALL)


# ------------------------------------------------------------------ bad schemas
@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        ({"lower": 90, "upper": 18}, "column 'age': lower bound 90 must be < upper bound 18; swap them"),
        ({"lower": 18, "upper": 18}, "must be < upper bound"),
        # text is refused as text (session 10: strings went through float(), "Infinity" included)
        ({"upper": "Infinity"}, "upper bound must be a finite number; got str 'Infinity'"),
    ],
)
def test_loader_bad_bounds_in_schema_file(tmp_path: Path, edit: dict[str, object], pattern: str) -> None:
    d = SMALL.to_dict()
    d["columns"][0].update(edit)
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    with pytest.raises(SchemaError, match=pattern):
        validate_command(str(FIX / "good.tsv"), str(p))


@pytest.mark.parametrize(("cats", "pattern"), [([], "non-empty"), (["A", "A"], "duplicated")])
def test_loader_bad_categories_in_schema_file(tmp_path: Path, cats: list[str], pattern: str) -> None:
    d = SMALL.to_dict()
    d["columns"][1]["categories"] = cats
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    with pytest.raises(SchemaError, match=pattern):
        validate_command(str(FIX / "good.tsv"), str(p))


# ------------------------------------------------------------------ good variants
def test_loader_utf8_bom_and_latin1_semicolon() -> None:
    a = load_table(FIX / "utf8_bom.csv")
    b = load_table(FIX / "latin1.csv")
    assert list(a.columns) == list(b.columns) == ["age", "region", "smoker"]
    assert a["region"].tolist() == b["region"].tolist() == ["Zürich", "Genève"]
    assert check_against_schema(b, SMALL)["columns"]["region"]["usable"] == 2


def test_loader_tsv_pipe_and_bytesio() -> None:
    t = load_table(FIX / "good.tsv")
    assert t.shape == (2, 3)
    p = load_table(io.BytesIO(b"age|region|smoker\n30|A|yes\n"), name="p.csv")
    assert list(p.columns) == ["age", "region", "smoker"]
    raw = load_table((FIX / "good.tsv").read_bytes(), name="good.tsv")
    pd.testing.assert_frame_equal(t, raw)


def test_loader_parquet_round_trip(tmp_path: Path) -> None:
    df = pd.DataFrame({"age": [30, 41], "region": ["A", "B"], "smoker": [True, False]})
    p = tmp_path / "t.parquet"
    df.to_parquet(p)
    back = load_table(p)
    assert back["age"].tolist() == [30, 41]
    assert check_against_schema(back, SMALL)["columns"]["smoker"]["usable"] == 2
    assert load_table(p.read_bytes(), name="upload").shape == (2, 3)  # magic bytes, no name


def test_loader_quoted_fields_with_delimiters() -> None:
    df = load_table(b'age,region,smoker\n30,"A, north",yes\n31,"B\nsouth",no\n', name="q.csv")
    assert df.shape == (2, 3)


# ------------------------------------------------------------------ size limit
def test_loader_size_limit_default_and_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(MAX_MB_ENV, raising=False)
    assert max_upload_bytes() == 200 * 1024 * 1024
    monkeypatch.setenv(MAX_MB_ENV, "0.001")  # 1048 bytes
    big = b"age,region,smoker\n" + b"30,A,yes\n" * 200
    with pytest.raises(DataError, match=r"over the 0.001 MB limit; .*PLANNER_MAX_UPLOAD_MB"):
        load_table(big, name="big.csv")
    p = tmp_path / "big.csv"
    p.write_bytes(big)
    with pytest.raises(DataError, match=r"'big.csv' is 0.00173 MB, over"):
        load_table(p)
    with pytest.raises(DataError, match="over the"):
        load_table(io.BytesIO(big))
    assert load_table(big, max_mb=1).shape == (200, 3)  # explicit limit wins
    monkeypatch.setenv(MAX_MB_ENV, "lots")
    with pytest.raises(DataError, match="PLANNER_MAX_UPLOAD_MB must be a number"):
        load_table(big)


def test_loader_missing_path() -> None:
    with pytest.raises(DataError, match=r"cannot read file 'absent\.csv'"):
        read_source(Path("/nonexistent/absent.csv"))


# ------------------------------------------------------------------ property
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_loader_arbitrary_bytes_only_raise_planner_error(data: bytes) -> None:
    try:
        df = load_table(data, name="fuzz.csv")
    except PlannerError:
        return
    assert isinstance(df, pd.DataFrame) and len(df) > 0


_cell = st.text(alphabet=st.sampled_from(list('ab1 2.,;\t"\n\r-eEinfNa|')), max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_cell, min_size=1, max_size=4), min_size=1, max_size=6), st.sampled_from(",;\t|"))
def test_loader_csv_like_bytes_only_raise_planner_error(rows: list[list[str]], sep: str) -> None:
    data = "\n".join(sep.join(r) for r in rows).encode()
    try:
        df = load_table(data, name="fuzz.csv")
    except PlannerError:
        return
    assert len(df) > 0
    schema = Schema((Column(str(df.columns[0]), ColumnKind.NUMERIC, MissingRule(), 0, 1),))
    try:
        rep = column_report(df, schema)
    except PlannerError:
        return
    assert rep["rows"] == len(df)


# ------------------------------------------------------------------ validate
def test_validate_command_census() -> None:
    r = validate_command(str(DATA / "census.csv"), str(DATA / "census.schema.json"))
    assert r["rows"] == 50_000 and r["columns"] == 8
    json.dumps(r)  # JSON-able
    for stats in r["column_report"].values():
        assert stats["usable"] + stats["dropped"] <= stats["rows"]
        assert set(stats) == {"kind", "rows", "usable", "clipped", "invalid", "missing", "replaced", "dropped"}
    assert r["column_report"]["income"]["clipped"] > 0  # incomes above the declared cap
    assert r["fingerprint"].startswith("hmac-sha256:") and r["schema_hash"] == Schema.load(DATA / "census.schema.json").schema_hash()


def test_validate_command_survey_and_errors(tmp_path: Path) -> None:
    r = validate_command(str(DATA / "survey.csv"), str(DATA / "survey.schema.json"))
    assert r["rows"] == 2000 and r["column_report"]["used_doping"]["usable"] == 2000
    with pytest.raises(PlannerError, match=r"text_in_numeric\.csv|declared numeric"):
        validate_command(str(FIX / "text_in_numeric.csv"), str(FIX / "small.schema.json"))
    with pytest.raises(SchemaError, match="cannot open the schema file"):
        validate_command(str(FIX / "good.tsv"), str(tmp_path / "none.json"))


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 1 << 24])
def test_is_utf8_agrees_with_python_decoding_across_chunk_boundaries(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole-file UTF-8 verdict (ASCII chunks skipped by their largest byte, the others
    decoded with a sequence cut at a chunk's end carried over) equals ``bytes.decode``'s,
    with chunks small enough that 2-, 3- and 4-byte sequences straddle every boundary."""
    import mmap

    from planner.data import loader

    monkeypatch.setattr(loader, "_SCAN_CHUNK", chunk)
    cases = [b"", b"abc", "é€😀".encode(), b"ab" + "😀".encode() + b"cd", b"\xff", b"a\x80",
             "é".encode()[:1], b"abc" + "€".encode()[:2], b"ab\xe2\x82\x28", b"\xc0\xaf",
             b"\xed\xa0\x80", "x😀y".encode() * 3]
    for data in cases:
        try:
            data.decode("utf-8")
            want = True
        except UnicodeDecodeError:
            want = False
        assert loader.is_utf8(data) is want, data
    with tempfile.TemporaryFile() as f:  # a memory map, as the SQL sources scan it
        f.write("a,é\n1,😀\n".encode())
        f.flush()
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            assert loader.is_utf8(buf) is True
