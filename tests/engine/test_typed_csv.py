"""The release scan reads a CSV's numeric columns as DOUBLE (issue 17).

``planner release`` asks DuckDB for the numeric columns of a CSV as numbers instead of text
(:meth:`planner.data.backends.duckdb_backend.DuckDBBackend.typed_columns`): the text route's cast
of every cell is DuckDB's own ``TRY_CAST``, which the conformance tests pin to the cell-
reading rules; the typed read must therefore (1) accept a cell only where ``TRY_CAST``
does, with the same value, bit for bit, (2) fail (and the statement be repeated on text)
wherever the rules read a cell otherwise, and (3) never be used on a file holding a
number look-alike ('1_000', '+-5', 'nan(1)'), which DuckDB reads as a number and the rules
as text. The oracles: DuckDB's ``TRY_CAST`` on the same text, the pandas backend (the rules
themselves), and the text route of the same scan.
"""

from __future__ import annotations

import csv
import itertools
import math
import random
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner.data import sources
from planner.data.backends import BackgroundScan, PandasBackend, close_backend, make_backend
from planner.data.loader import load_table, number_lookalike, scan_parts
from planner.data.schema import Column, ColumnKind, MissingRule, PrivacyUnit, Schema
from planner.planning.mechanisms.base import MechanismName as M
from planner.planning.queries import Query, QueryKind
from planner.planning.statistics import exact_aggregates, plan_requests, prefetch, statistic

duckdb = pytest.importorskip("duckdb")

DROP = MissingRule()
SCHEMA = Schema(
    (
        Column("pid", ColumnKind.IDENTIFIER),
        Column("x", ColumnKind.NUMERIC, DROP, -1e6, 1e6),
        Column("y", ColumnKind.NUMERIC, DROP, 0, 100),
        Column("cat", ColumnKind.CATEGORICAL, DROP, categories=("a", "b", "7")),
    ),
    unit=PrivacyUnit("pid", 1),
    salt="typed",
)
QUERIES = [
    Query("n", QueryKind.COUNT, None, M.LAPLACE),
    Query("xs", QueryKind.SUM, "x", M.LAPLACE),
    Query("ym", QueryKind.MEAN, "y", M.LAPLACE),
    Query("yh", QueryKind.HISTOGRAM, "y", M.LAPLACE, bins=7),
    Query("xq", QueryKind.MEDIAN, "x", M.EXPONENTIAL),
    Query("cat", QueryKind.HISTOGRAM, "cat", M.LAPLACE),
]
#: the lookalike rule restated as a regular expression over one cell (the oracle of the
#: byte test below)
LOOKALIKE = re.compile(r"\+-|[nN]\(|[0-9]_|_[0-9]")


@pytest.fixture(autouse=True)
def _fresh_verdicts() -> None:
    sources._SCANNED.clear()


def _bits(v: float | None) -> Any:
    if v is None:
        return None
    return "nan" if math.isnan(v) else struct.pack("<d", v)


def _cells(seed: int, n: int) -> list[str]:
    """Random strings over a number's characters, blanks and letters, and numbers printed
    in many ways (exponents, 17 and 25 digits, signs, padding, subnormals, huge)."""
    rng = random.Random(seed)
    alpha = list("0123456789") * 3 + list(".eE+-_ infINFaAnNyY()\t\x0b\x0c") + ["\u00a0", "0x", "nan", "inf", ","]
    out = ["".join(rng.choice(alpha) for _ in range(rng.randint(0, 10))) for _ in range(n)]
    for _ in range(n):
        x = rng.choice([rng.uniform(-1e6, 1e6), rng.expovariate(1e-3),
                        struct.unpack("<d", rng.randbytes(8))[0], float(rng.randint(-10**18, 10**18))])
        s = rng.choice([repr(x), f"{x:.17g}", f"{x:.3f}", f"{x:e}", f"{x:.25g}"])
        out.append(rng.choice(["", " ", "+", "0"]) + s + rng.choice(["", " ", "0"]))
    return out


def test_duckdb_reads_a_double_column_as_try_cast_reads_its_text(tmp_path: Path) -> None:
    """(1): 40,000 cells (seed 5) in one CSV, read once as DOUBLE (refused cells kept out
    by ``ignore_errors``) and once as text: every accepted cell is a cell ``TRY_CAST``
    reads, to the same bits; every accepted cell holding '_', '(' or '+-' holds a look-
    alike pair; and the typed read does refuse cells (blanks, text) and accept most."""
    cells = _cells(5, 20_000)
    path = tmp_path / "cells.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["i", "x"])
        for i, c in enumerate(cells):
            w.writerow([i, c])
    con = duckdb.connect()
    opts = ("header=true, sep=',', quote='\"', escape='\"', null_padding=false, strict_mode=true, "
            "auto_detect=false")
    text = dict(con.execute(f"SELECT CAST(i AS BIGINT), x FROM read_csv('{path}', {opts}, "
                            "columns={'i': 'VARCHAR', 'x': 'VARCHAR'})").fetchall())
    assert len(text) == len(cells)
    typed = con.execute(f"SELECT CAST(i AS BIGINT), x FROM read_csv('{path}', {opts}, "
                        "columns={'i': 'VARCHAR', 'x': 'DOUBLE'}, ignore_errors=true)").fetchall()
    # TRY_CAST of the text from a table (over read_csv DuckDB 2.0 pushes the cast into the reader)
    import pyarrow as pa

    keys = sorted(text)
    con.register("t", pa.table({"i": keys, "s": [text[k] for k in keys]}))
    cast = dict(con.execute("SELECT i, TRY_CAST(s AS DOUBLE) FROM t").fetchall())
    checked = 0
    for i, v in typed:
        s = text[i]
        if s is not None and ("_" in s or "(" in s or "+-" in s):
            assert LOOKALIKE.search(s), f"cell {s!r} is read as a number without a look-alike pair"
            assert number_lookalike(np.frombuffer(s.encode(), dtype=np.uint8))
            continue
        assert _bits(v) == _bits(cast[i]), f"cell {s!r}: typed {v!r}, TRY_CAST {cast[i]!r}"
        checked += 1
    assert checked > 15_000 and len(typed) < len(cells) - 5_000  # both sides exercised


def test_every_number_with_underscore_paren_or_plus_minus_has_a_pair() -> None:
    """(3): every string of up to 4 characters over digits, '.', 'e', signs, '_', '(',
    ')', 'n', 'a' and a blank that ``TRY_CAST`` (and so the typed read, test above)
    takes for a number, and that holds '_', '(' or '+-', holds a look-alike pair."""
    import pyarrow as pa

    alpha = "01.e+-_()na "
    strs = ["".join(p) for n in range(1, 5) for p in itertools.product(alpha, repeat=n)]
    strs = [s for s in strs if "_" in s or "(" in s or "+-" in s] + ["nan(1)", "NaN(x)", "-nan()", "1_000", "+-1e5"]
    con = duckdb.connect()
    con.register("t", pa.table({"s": strs}))
    accepted = [r[0] for r in con.execute("SELECT s FROM t WHERE TRY_CAST(s AS DOUBLE) IS NOT NULL").fetchall()]
    assert {"nan(1)", "1_000", "+-1e5"} <= set(accepted)
    for s in accepted:
        assert number_lookalike(np.frombuffer(s.encode(), dtype=np.uint8)), s


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_lookalike_pairs_are_found_across_parts_and_not_in_the_header(chunk: int) -> None:
    """The byte test through :func:`scan_parts`: a pair cut between two parts is found;
    the header line is not tested ('x_1' is a name); a file without a pair is plain."""
    def scan(data: bytes) -> bool | None:
        parts = [data[i:i + chunk] for i in range(0, len(data), chunk)]
        return scan_parts(parts, lookalikes=True).lookalike

    assert scan(b"x_1,y\n1,2\n3,4\n") is False
    assert scan(b"x,y\n1,ab_c\n3,(4)\n5,+ -\n") is False
    for body in (b"1_000,2\n", b"1,2_\n", b"1,_5\n", b"+-5,1\n", b"nan(1),2\n", b"1,NaN()\n", b"a,b\n1,2\n7_8\n"):
        assert scan(b"x,y\n" + body) is True, body
    assert scan_parts([b"x,y\n1_0\n"]).lookalike is None  # not asked for


def _write(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["pid", "x", "y", "cat", "extra_1"])
        w.writerows(rows)


def _clean_rows(n: int, seed: int) -> list[list[str]]:
    """Numbers the rules and DuckDB read alike, written in odd ways (exponents, signs,
    padding, quotes, -0, inf, nan, empty), odd categorical and identifier cells."""
    rng = random.Random(seed)
    forms = ["1e3", "-0", "+7", " 12 ", ".5", "5.", "1E-3", "inf", "-Infinity", "nan", "", "0012.50",
             "123456789012345678901", "1e400", "-1e-400", "2.5e+02", "\t3"]
    cats = ["a", "b", "7", " a", "A", "", "NA", "x_y", "+", "nan", "07", "b ", "(a)"]
    rows = []
    for i in range(n):
        x = rng.choice(forms) if i % 3 == 0 else repr(rng.uniform(-2e6, 2e6))
        y = rng.choice(forms) if i % 5 == 0 else str(rng.randint(-10, 110))
        pid = str(i // 2) if i % 7 else f"p{i}"
        rows.append([pid, x, y, rng.choice(cats), "q_x"])
    return rows


def _scan(path: Path, *, typed: bool, defer: bool) -> Any:
    sources._SCANNED.clear()
    src = sources.open_cli_source(path, defer_check=defer)
    scan = BackgroundScan("duckdb", src, SCHEMA, plan_requests(QUERIES, SCHEMA))
    if not typed:
        scan.result()  # wait; then the text route on the same source
        close_backend(scan._engine)  # type: ignore[arg-type]
        engine = make_backend("duckdb", sources.open_cli_source(path), SCHEMA)
        prefetch(engine, QUERIES, report=True, digest=True)
        return engine
    return scan.result()


def _answers(engine: Any) -> tuple[Any, ...]:
    aggs = {q.id: statistic(q.kind).aggregate(q, engine) for q in QUERIES}
    return aggs, engine.column_report(), engine.content_digest().hexdigest


@pytest.mark.parametrize("defer", [False, True])
def test_the_typed_scan_gives_the_text_route_and_pandas_answers(tmp_path: Path, defer: bool) -> None:
    """(1) end to end: a file of odd but readable numbers is read typed (``read_as``), in one
    pass, and every aggregate, the column report and the content digest equal the text
    route's and the pandas backend's (the rules)."""
    path = tmp_path / "clean.csv"
    _write(path, _clean_rows(3000, 1))
    typed = _scan(path, typed=True, defer=defer)
    text = _scan(path, typed=False, defer=False)
    try:
        assert (typed.read_as, typed.typed, text.read_as) == ("typed", ("x", "y"), "text")
        assert typed.passes == text.passes  # people with two rows: bounding reads again
        passes = typed.passes
        exact_aggregates(typed, QUERIES)  # later statements keep the proven typed read
        prefetch(typed, QUERIES)
        assert (typed.read_as, typed.passes) == ("typed", passes)
        assert _answers(typed) == _answers(text)
        pand = PandasBackend(load_table(path), SCHEMA)
        assert _answers(typed) == _answers(pand)
    finally:
        close_backend(typed)
        close_backend(text)


@pytest.mark.parametrize("bad", ["NA", "  ", "n/a", "abc", "1,5", "\u00a07"])
def test_a_refused_cell_in_the_head_sends_the_scan_to_text_at_once(tmp_path: Path, bad: str) -> None:
    """A cell the typed read would refuse, in the file's first rows: the scan reads text
    from the start (no wasted typed pass), with the rules' answers."""
    rows = _clean_rows(3000, 7)
    rows[5][2] = bad
    path = tmp_path / "early.csv"
    _write(path, rows)
    engine = _scan(path, typed=True, defer=True)
    text = _scan(path, typed=False, defer=False)
    try:
        assert (engine.read_as, engine.typed, engine.passes) == ("text", (), text.passes)
        assert _answers(engine) == _answers(PandasBackend(load_table(path), SCHEMA)) == _answers(text)
    finally:
        close_backend(engine)
        close_backend(text)


@pytest.mark.parametrize("bad", ["NA", "  ", "n/a", "abc", "1,5", "\u00a07"])
def test_a_cell_the_typed_read_refuses_makes_the_scan_read_text(tmp_path: Path, bad: str) -> None:
    """(2): one cell DuckDB does not read as DOUBLE (an NA token, a blank, text, a number
    with a no-break space), near the end: the statement is repeated on text (two passes,
    ``read_as``), with the rules' answers; DuckDB's message, which quotes the cell, is
    not what the caller sees."""
    rows = _clean_rows(3000, 2)
    rows[-3][1] = bad
    path = tmp_path / "late.csv"
    _write(path, rows)
    typed = _scan(path, typed=True, defer=True)
    text = _scan(path, typed=False, defer=False)
    try:
        assert (typed.read_as, typed.typed) == ("text after typed", ())
        assert typed.passes == text.passes + 1  # the failed typed statement counts
        pand = PandasBackend(load_table(path), SCHEMA)
        assert _answers(typed) == _answers(pand) == _answers(text)
    finally:
        close_backend(typed)
        close_backend(text)


@pytest.mark.parametrize("cell", ["1_000", "+-5", "nan(1)"])
def test_a_lookalike_keeps_or_sends_the_scan_to_text(tmp_path: Path, cell: str) -> None:
    """(3): a number look-alike in a numeric column, which DuckDB would read as a number.
    Checked before the scan, the file is read as text at once; checked while it reads
    (``planner release``), the typed scan is discarded once the verdict says so and the
    file read again as text. Both give the rules' answers (the cell is text: invalid)."""
    rows = _clean_rows(2000, 3)
    rows[1500][0:2] = ["solo", cell]  # a person of one row: kept by bounding
    path = tmp_path / "lookalike.csv"
    _write(path, rows)
    pand = PandasBackend(load_table(path), SCHEMA)
    assert pand.column_stats("x").invalid == 1
    for defer in (False, True):
        engine = _scan(path, typed=True, defer=defer)
        try:
            assert (engine.read_as, engine.typed) == ("text", ())
            assert _answers(engine) == _answers(pand)
        finally:
            close_backend(engine)


def test_prefetch_without_report_and_digest_reads_text(tmp_path: Path) -> None:
    """A typed backend whose first statement would not read every declared cell (no
    report, no digest) reads text: a later statement must never meet a cell that DuckDB
    cannot convert (its error would quote it)."""
    path = tmp_path / "clean.csv"
    _write(path, _clean_rows(500, 4))
    src = sources.open_cli_source(path)
    engine = make_backend("duckdb", src, SCHEMA, typed_csv=True)
    try:
        assert engine.typed == ("x", "y")
        prefetch(engine, QUERIES[:2])
        assert (engine.read_as, engine.typed) == ("text", ())
    finally:
        close_backend(engine)


def test_a_line_at_the_length_limit_is_read_through_the_smaller_buffer(tmp_path: Path) -> None:
    """DuckDB reads CSV through 8 MiB buffers (``CSV_BUFFER_BYTES``, less memory than its
    default): a line just under :data:`planner.data.loader.MAX_LINE_BYTES` (a long categorical
    cell) is still read, typed and as text, with the pandas backend's answers."""
    from planner.data.backends.duckdb_backend import CSV_BUFFER_BYTES
    from planner.data.loader import MAX_LINE_BYTES

    assert CSV_BUFFER_BYTES >= 4 * (2 << 20)  # DuckDB's max_line_size is 2 MB
    rows = _clean_rows(400, 6)
    rows[200][3] = "z" * (MAX_LINE_BYTES - 100)
    path = tmp_path / "long.csv"
    _write(path, rows)
    pand = PandasBackend(load_table(path), SCHEMA)
    for typed in (True, False):
        engine = _scan(path, typed=typed, defer=True)
        try:
            assert engine.read_as == ("typed" if typed else "text")
            assert _answers(engine) == _answers(pand)
        finally:
            close_backend(engine)
