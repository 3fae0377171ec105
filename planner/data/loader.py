"""Reading the private table: CSV / TSV / Parquet from a path or from uploaded bytes.

Every bad input becomes a :class:`~planner.core.errors.DataError` naming the file (and the
column or row number) and a fix. Messages never contain a cell's value: they report
counts and positions only. Anything unexpected from the parsers is also turned into a
``DataError``, so a caller (a page, the CLI) only ever has to catch ``PlannerError``.

CSV handling: encodings UTF-8 (with or without BOM), then Windows-1252 / Latin-1; the
delimiter is sniffed among ``, ; TAB |`` (TAB for ``.tsv`` / ``.tab``); parsing is by
pyarrow (multi-threaded, strict about ragged rows), every column as text so that a cell's
meaning never depends on the other rows of its column. Parquet is detected by its magic
bytes.
"""

from __future__ import annotations

import codecs
import csv
import errno
import io
import math
import os
import re
import stat
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal, NamedTuple, Protocol, cast

from planner.core.errors import DataError, PlannerError
from planner.data import parquet_footer
from planner.data.parquet_footer import bad_parquet
from planner.data.requests import ColumnStats
from planner.data.schema import ColumnKind, Schema

if TYPE_CHECKING:  # pandas is imported where a table is loaded: sniffing a CSV needs none
    import pandas as pd

#: Default upload limit in MB (matches ``server.maxUploadSize`` in .streamlit/config.toml).
DEFAULT_MAX_MB: Final[float] = 200.0
#: Environment variable overriding the limit.
MAX_MB_ENV: Final[str] = "PLANNER_MAX_UPLOAD_MB"

FileFormat = Literal["csv", "tsv", "parquet"]
Source = str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes]

#: At most this many columns are read (Spark's CSV parser stops at 20,480; a wider
#: header is refused before any engine parses it, so memory stays bounded).
MAX_COLUMNS: Final[int] = 10_000
#: At most this many bytes per line of a CSV/TSV file (the header and every row; DuckDB's
#: own limit, ``max_line_size``, is 2 MB: this one is met first by every engine).
MAX_LINE_BYTES: Final[int] = 1 << 20

_DELIMITERS: Final[str] = ",;\t|"
_SAMPLE_BYTES: Final[int] = 1 << 16
_SCAN_CHUNK: Final[int] = 1 << 24
_NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")


def max_upload_bytes(max_mb: float | None = None) -> int:
    """The size limit in bytes: ``max_mb``, else ``$PLANNER_MAX_UPLOAD_MB``, else 200 MB."""
    if max_mb is None:
        env = os.environ.get(MAX_MB_ENV)
        if env is None or not env.strip():
            max_mb = DEFAULT_MAX_MB
        else:
            try:
                max_mb = float(env)
            except ValueError as exc:
                raise DataError(
                    f"{MAX_MB_ENV} must be a number of megabytes; got {env!r}. "
                    "Set it to e.g. 200."
                ) from exc
    if not max_mb > 0 or max_mb == float("inf"):
        raise DataError(f"the upload limit must be > 0 MB and finite; got {max_mb}.")
    return math.ceil(max_mb * 1024 * 1024)


def _too_big(label: str, size: int, limit: int) -> DataError:
    return DataError(
        f"file {label!r} is {size / 1048576:.3g} MB, over the {limit / 1048576:.3g} MB limit; "
        f"use a smaller file (e.g. Parquet, or fewer columns) or raise {MAX_MB_ENV}."
    )


def read_source(source: Source, name: str | None = None, max_mb: float | None = None) -> tuple[bytes, str]:
    """Read a path, bytes or a binary file object into bytes, enforcing the size limit.

    Returns
    -------
    (bytes, str)
        The content and a display name (the file name, never a full private path).
    """
    limit = max_upload_bytes(max_mb)
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        label = name or p.name
        return _read_regular(p, label, limit), label
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        label = name or "upload"
    elif hasattr(source, "read"):
        label = name or str(getattr(source, "name", "") or "upload")
        size_attr = getattr(source, "size", None)
        if isinstance(size_attr, int) and size_attr > limit:
            raise _too_big(label, size_attr, limit)
        if hasattr(source, "seek"):
            try:
                source.seek(0)
            except (OSError, ValueError):
                pass
        raw = source.read(limit + 1)
        if not isinstance(raw, (bytes, bytearray)):
            raise DataError(f"upload {label!r} must be opened in binary mode.")
        data = bytes(raw)
    else:
        raise DataError(f"cannot read data from a {type(source).__name__}; pass a path or bytes.")
    if len(data) > limit:
        raise _too_big(label, len(data), limit)
    return data, label


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, for messages ("a FIFO (named pipe)")."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def not_regular(label: str, mode: int) -> DataError:
    """The error for a data path that is a folder, FIFO, device or socket (never read)."""
    return DataError(
        f"file {label!r} is {file_kind(mode)}, not a regular file; it was not read. Name a "
        "regular CSV, TSV or Parquet file."
    )


def _read_regular(path: Path, label: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; anything else is refused
    unread. Opened with ``O_NONBLOCK`` (a FIFO never waits for a writer) and checked by
    ``fstat`` on the open descriptor (a swap between check and read cannot slip a device
    in); at most ``limit + 1`` bytes are read, so ``/dev/zero`` cannot fill the memory."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_loop(label) from exc
        raise DataError(f"cannot read file {label!r} ({exc.strerror}); check the path.") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(label, st.st_mode)
        if st.st_size > limit:
            raise _too_big(label, st.st_size, limit)
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            block = os.read(fd, min(1 << 24, limit + 1 - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
        if total > limit:
            raise _too_big(label, total, limit)
        return b"".join(chunks)
    except OSError as exc:
        raise DataError(f"cannot read file {label!r} ({exc.strerror}); check the path.") from exc
    finally:
        os.close(fd)


class TextBuffer(Protocol):
    """Bytes or an ``mmap`` of a file: what :func:`check_text_limits` scans."""

    def __len__(self) -> int: ...
    def __getitem__(self, key: slice, /) -> bytes: ...
    def find(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...
    def rfind(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...


def _line_of(buf: TextBuffer, pos: int) -> int:
    """The 1-based line number of byte ``pos`` (counted in chunks: bounded memory)."""
    lines = 1
    for i in range(0, pos, _SCAN_CHUNK):
        lines += buf[i:min(i + _SCAN_CHUNK, pos)].count(b"\n")
    return lines


def too_many_columns(label: str, found: str) -> DataError:
    """The error for a header wider than :data:`MAX_COLUMNS` (the same from every engine)."""
    return DataError(
        f"file {label!r} has too many columns ({found}); at most {MAX_COLUMNS:,} are read. "
        "Keep only the columns the schema declares (e.g. export those columns to a new file)."
    )


def check_text_limits(buf: TextBuffer, label: str, *, nul_free: bool = False) -> None:
    """Refuse a CSV/TSV that holds a NUL byte anywhere, or a line over :data:`MAX_LINE_BYTES`.

    One scan of the whole file (``memchr`` for the NUL byte; for the lines, one backward
    search per :data:`MAX_LINE_BYTES`, so a long file costs about one pass): a binary
    tail after a valid head is refused, never silently read or ignored. A header line
    over the limit that holds more than :data:`MAX_COLUMNS` delimiters is reported as
    too many columns. The pandas loader and the SQL sources (DuckDB, Spark) both call it,
    so every engine gives the same verdict. ``nul_free``: the caller has already seen that
    the buffer holds no NUL byte (:func:`scan_parts`), so the search for one is skipped.
    """
    nul = -1 if nul_free else buf.find(b"\x00")
    if nul >= 0:
        raise DataError(
            f"file {label!r} contains binary data (a NUL byte on line {_line_of(buf, nul):,}); "
            "it is not CSV text. Remove the binary part, or re-export the table as a UTF-8 "
            "CSV or Parquet file."
        )
    n = len(buf)
    start = 0
    while n - start > MAX_LINE_BYTES:
        q = buf.rfind(b"\n", start, start + MAX_LINE_BYTES + 1)
        if q < 0:
            line = _line_of(buf, start)
            if line == 1 or not buf[:start].strip():
                head = buf[start:start + MAX_LINE_BYTES]
                widest = max(head.count(d.encode()) for d in _DELIMITERS) + 1
                if widest > MAX_COLUMNS:
                    raise too_many_columns(
                        label, f"more than {widest - 1:,} in the first {MAX_LINE_BYTES:,} "
                        "bytes of the header"
                    )
            raise DataError(
                f"file {label!r}: line {line:,} is longer than {MAX_LINE_BYTES:,} bytes (the "
                "longest line accepted); a cell that long is not a value a release can use. "
                "Shorten or remove that cell, or check that the file is a CSV with line breaks."
            )
        start = q + 1


def is_utf8(buf: TextBuffer) -> bool:
    """Whether the whole buffer is valid UTF-8 (streamed: an ASCII chunk costs one check).

    A chunk is ASCII when its largest byte is below 0x80 (numpy's maximum over the buffer
    in place: no copy, and without the GIL, so the command line's imports go on
    meanwhile); other chunks are decoded, a sequence cut at a chunk's end carried over.
    """
    return scan_parts([buf], nul=False).utf8


class PartsScan(NamedTuple):
    """What :func:`scan_parts` found in a file's bytes."""

    #: a NUL byte occurs
    has_nul: bool
    #: the whole is UTF-8
    utf8: bool
    #: after the first line, a byte pair that DuckDB's number reader takes for part of a
    #: number and the pandas rules do not (:func:`number_lookalike`); None: not looked for
    lookalike: bool | None


def number_lookalike(seg: Any) -> bool:
    """Whether the bytes ``seg`` (a uint8 array) hold a pair that DuckDB's reading of text
    as DOUBLE accepts inside a number and the cell-reading rules do not.

    DuckDB reads '1_000' as 1000 (an underscore beside a digit), '+-5' as −5 and
    'nan(1)' as NaN, in ``TRY_CAST`` and in a CSV column read as DOUBLE alike; the rules
    read all three as text (:meth:`planner.data.backends.sql.Dialect.number_guard` keeps them
    from the cast). So: '+' followed by '-'; '(' after 'n' or 'N'; '_' beside an ASCII
    digit. Every string DuckDB reads as a number that holds '_', '(' or '+-' has one of
    these pairs (checked when this was written on every string of up to 5 characters over
    '0', '1', '.', 'e', 'E', signs, '_', parentheses, 'n', 'a', 'i', 'f' and a blank that
    holds '_', '(', ')' or '+-', 549,495 strings; ``tests/engine/test_typed_csv.py`` checks
    those of up to 4 characters), so a file without them reads the same both ways.
    The test is on bytes, blind to cells: a pair in any column, or across two cells,
    counts too (the safe side).
    """
    import numpy as np

    if seg.size < 2:
        return False
    plus = np.flatnonzero(seg[:-1] == 0x2B)
    if plus.size and bool((seg[plus + 1] == 0x2D).any()):
        return True
    paren = np.flatnonzero(seg[1:] == 0x28)
    if paren.size and bool(((seg[paren] | 0x20) == 0x6E).any()):  # the byte before: n or N
        return True
    under = np.flatnonzero(seg == 0x5F)
    if under.size:
        before = seg[under[under > 0] - 1]
        after = seg[under[under < seg.size - 1] + 1]
        if bool(((before - 0x30) < 10).any()) or bool(((after - 0x30) < 10).any()):  # uint8 wraps
            return True
    return False


def scan_parts(parts: Iterable[TextBuffer], *, nul: bool = True, lookalikes: bool = False) -> PartsScan:
    """NUL bytes, UTF-8 and, with ``lookalikes``, :func:`number_lookalike` pairs past the
    first line, in the concatenation of ``parts``: consecutive pieces of one file, such as
    the windows of a memory map, each released before the next is made (the decoder's
    state, and the byte before each chunk, are carried from one part to the next).

    Each chunk costs numpy's maximum and, with ``nul``, its minimum over the bytes in
    place: no copy, and without the GIL (the whole-file checks run in a thread while the
    command line imports and plans, :class:`planner.data.sources.WholeFileCheck`); with
    ``lookalikes``, a search for '+', '(' and '_' (``memchr``, holding the GIL for a
    few milliseconds per chunk) and the pairs' test in the chunks holding one. A chunk
    whose maximum is 0x80 or more is decoded (holding the GIL).
    """
    import numpy as np

    decoder = codecs.getincrementaldecoder("utf-8")()
    has_nul = False
    utf8 = True
    found: bool | None = False if lookalikes else None
    body = not lookalikes  # past the first line (the header: names such as 'x_1' are no cells)
    prev = np.zeros(0, dtype=np.uint8)  # the byte before the next chunk

    def done() -> bool:
        return not utf8 and (has_nul or not nul) and found is not False

    for buf in parts:
        view = np.frombuffer(cast(Any, buf), dtype=np.uint8)  # bytes or a memory map
        chunk = seg = view[:0]
        try:
            for i in range(0, len(view), _SCAN_CHUNK):
                if done():
                    break
                chunk = view[i:i + _SCAN_CHUNK]
                if nul and not has_nul and int(chunk.min()) == 0:
                    has_nul = True
                if found is False:
                    start, end = i, i + len(chunk)
                    if not body:
                        nl = buf.find(b"\n", i, end)
                        body = nl >= 0
                        start = nl + 1 if body else end
                    elif prev.size:  # a pair across the chunks' boundary
                        found = number_lookalike(np.concatenate((prev, chunk[:1])))
                    # memchr first (no copy, no temporary): most files hold none of the
                    # three bytes, and a chunk without one holds no pair
                    if found is False and any(buf.find(b, start, end) >= 0 for b in (b"+", b"(", b"_")):
                        seg = view[start:end]
                        found = number_lookalike(seg)
                    prev = chunk[-1:].copy()
                if not utf8 or (not decoder.getstate()[0] and int(chunk.max()) < 0x80):
                    continue
                try:
                    decoder.decode(buf[i:i + _SCAN_CHUNK])
                except UnicodeDecodeError:
                    utf8 = False
        finally:
            del view, chunk, seg  # a memory map cannot close while a view of it exists
        if done():
            break
    if utf8:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            utf8 = False
    return PartsScan(has_nul, utf8, found)


def _guess_format(data: bytes, label: str, file_format: FileFormat | None) -> FileFormat:
    if file_format is not None:
        return file_format
    if data[:4] == b"PAR1":
        return "parquet"
    suffix = Path(label).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".tsv", ".tab"):
        return "tsv"
    return "csv"


def _check_binary(data: bytes, label: str) -> None:
    head = data[:_SAMPLE_BYTES]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DataError(
            f"file {label!r} is UTF-16 (or UTF-32) encoded; save it as UTF-8 CSV and upload again."
        )
    if head.startswith(b"PK\x03\x04"):
        raise DataError(
            f"file {label!r} is a ZIP archive (an Excel .xlsx?); export the sheet as CSV "
            "(UTF-8) or Parquet."
        )
    if head.startswith(b"\x1f\x8b"):
        raise DataError(f"file {label!r} is gzip-compressed; decompress it first.")
    if b"\x00" in head:
        raise DataError(
            f"file {label!r} does not look like CSV text (it contains binary data); upload "
            "a UTF-8 or Latin-1 CSV/TSV, or a Parquet file."
        )


def _decode(data: bytes, label: str) -> tuple[str, str]:
    """Decode as UTF-8 (BOM allowed), else Windows-1252, else Latin-1; reject control junk."""
    text: str | None = None
    encoding = "utf-8"
    for enc in ("utf-8-sig", "cp1252", "latin-1"):
        try:
            text = data.decode(enc)
            encoding = enc
            break
        except UnicodeDecodeError:
            continue
    assert text is not None  # latin-1 decodes any bytes
    check_controls(text[:_SAMPLE_BYTES], label)
    return text, encoding


def check_controls(sample: str, label: str) -> None:
    """Refuse decoded text whose sample is more than 1 % control characters (binary data
    read as Latin-1); the loader and the SQL sources apply it to the same first 64 KiB."""
    if sample:
        bad = sum(
            1 for ch in sample if unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn")
            and ch not in "\t\r\n"
        )
        if bad > max(2, len(sample) // 100):
            raise DataError(
                f"file {label!r} is not readable text in UTF-8 or Latin-1 (wrong encoding, or "
                "binary data); save it as UTF-8 CSV and upload again."
            )


def _sniff_delimiter(text: str, file_format: FileFormat) -> str:
    if file_format == "tsv":
        return "\t"
    lines = [ln for ln in text[:_SAMPLE_BYTES].splitlines()[:50] if ln.strip()]
    if not lines:
        return ","
    sample = "\n".join(lines)
    try:
        d = csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
        if d in _DELIMITERS:
            return d
    except csv.Error:
        pass
    # Fallback: the candidate that appears the same (non-zero) number of times per line.
    best, best_score = ",", 0
    for d in _DELIMITERS:
        counts = [ln.count(d) for ln in lines]
        if counts[0] > 0 and len(set(counts)) == 1 and counts[0] > best_score:
            best, best_score = d, counts[0]
    return best


def _read_header(
    text: str, label: str, file_format: FileFormat
) -> tuple[str, list[str]]:
    """(delimiter, header) of a CSV/TSV text, with the header's checks (duplicate or empty
    names, a first row of numbers); the pandas loader and the SQL sources share it."""
    delimiter = _sniff_delimiter(text, file_format)
    try:
        header = next(csv.reader(io.StringIO(text.lstrip("\r\n")), delimiter=delimiter))
    except (StopIteration, csv.Error) as exc:
        raise DataError(f"file {label!r}: the header row cannot be read; check its quotes.") from exc
    if len(header) > MAX_COLUMNS:
        raise too_many_columns(label, f"{len(header):,} in the header")
    if header and header[0].startswith(BOM):
        raise extra_marks(label, 1 + len(header[0]) - len(header[0].lstrip(BOM)))
    _check_header(header, label)
    if all(_NUMBER.match(h) for h in header):
        raise DataError(
            f"file {label!r}: the first row looks like data, not a header (all "
            f"{len(header)} fields are numbers); add a header row with the column names."
        )
    return delimiter, header


#: The byte-order mark, U+FEFF: at the start of a UTF-8 file, its encoding's signature.
BOM: Final[str] = "\ufeff"


def extra_marks(label: str, marks: int) -> DataError:
    """The error for a text file that starts with more than one byte-order mark.

    The first mark is UTF-8's signature and is read past; a second is a character (ZERO
    WIDTH NO-BREAK SPACE) at the start of the first column's name, which would then not
    be the name the schema declares, while the header shows it. Every route refuses it
    with this message (the header is read by :func:`_read_header` on every route)."""
    return DataError(
        f"file {label!r} starts with {marks} byte-order marks (U+FEFF); a UTF-8 file carries at most "
        "one, and the others would be an invisible part of the first column's name. Save the file "
        "again as UTF-8 (with or without one byte-order mark)."
    )


def _check_header(names: list[str], label: str) -> None:
    if not names:
        raise DataError(f"file {label!r} has no columns; check the file and its delimiter.")
    for i, n in enumerate(names):
        if not str(n).strip():
            raise DataError(
                f"file {label!r}: column #{i + 1} has an empty name; give every column a "
                "header name."
            )
    seen: dict[str, int] = {}
    for n in names:
        seen[str(n)] = seen.get(str(n), 0) + 1
    dups = sorted(n for n, k in seen.items() if k > 1)
    if dups:
        raise DataError(
            f"file {label!r}: column name(s) {dups} appear more than once; give each column "
            "a unique name."
        )


def _ragged_report(text: str, delimiter: str, label: str) -> DataError | None:
    """On a parse failure: find ragged rows (row numbers and counts only)."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        return None
    width = len(header)
    first: int | None = None
    first_n = 0
    bad = 0
    try:
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != width:
                bad += 1
                if first is None:
                    first, first_n = reader.line_num, len(row)
    except csv.Error:
        return DataError(
            f"file {label!r} has a malformed quoted field near line {reader.line_num}; check "
            "quotes in that row."
        )
    if first is None:
        return None
    return DataError(
        f"file {label!r}: line {first} has {first_n} field(s) but the header has {width} "
        f"({bad} such row(s)); fix those rows, or check that the delimiter "
        f"{delimiter!r} is right."
    )


def _read_csv(data: bytes, label: str, file_format: FileFormat) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    _check_binary(data, label)
    check_text_limits(data, label)
    text, encoding = _decode(data, label)
    if not text.strip():
        raise DataError(f"file {label!r} is empty; upload a file with a header row and data.")
    delimiter, header = _read_header(text, label, file_format)
    utf8 = data[3:] if encoding == "utf-8-sig" and data.startswith(b"\xef\xbb\xbf") else data
    if encoding not in ("utf-8-sig", "utf-8"):
        utf8 = text.encode("utf-8")
    try:
        table = pacsv.read_csv(
            io.BytesIO(utf8),
            read_options=pacsv.ReadOptions(use_threads=True, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            # Every column as text: types are read cell by cell later, so one odd cell
            # never changes how the other rows of its column are read.
            convert_options=pacsv.ConvertOptions(
                strings_can_be_null=True,
                column_types={h: pa.string() for h in header},
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowException, ValueError) as exc:
        rag = _ragged_report(text, delimiter, label)
        if rag is not None:
            raise rag from exc
        raise DataError(
            f"file {label!r} could not be parsed as {'TSV' if delimiter == chr(9) else 'CSV'} "
            f"(delimiter {delimiter!r}); check the delimiter, quotes and line endings."
        ) from exc
    if table.num_rows == 0:
        raise no_rows(label)
    df: pd.DataFrame = table.to_pandas()
    return df


def no_rows(label: str) -> DataError:
    """The error for a CSV with a header and no data rows (the same from every engine)."""
    return DataError(
        f"file {label!r} has a header but no data rows; upload a file with at least one row."
    )


def check_parquet_schema(names: list[str], rows: int, label: str) -> None:
    """The Parquet checks every engine shares (read from the footer: no data read): at most
    :data:`MAX_COLUMNS` columns, no empty or duplicated column name, at least one row."""
    if len(names) > MAX_COLUMNS:
        raise too_many_columns(label, f"{len(names):,}")
    _check_header(names, label)
    if rows == 0:
        raise DataError(f"file {label!r} has columns but no rows; upload a file with data.")


def link_loop(label: str) -> DataError:
    """The error for a path that is a loop of symbolic links (every route says this)."""
    return DataError(
        f"file {label!r} is a loop of symbolic links (or a link to a missing file); it was "
        "not read. Name the file itself, or fix the link."
    )


def _read_parquet(data: bytes, label: str) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if data[:4] != b"PAR1" or data[-4:] != b"PAR1" or len(data) < 12:
        raise bad_parquet(label, truncated=True)
    # the footer as every route reads it (DuckDB when installed: pyarrow 26 can abort the
    # process walking a damaged footer's chunk metadata, see planner.data.parquet_footer)
    names, rows, fits = parquet_footer.footer_of_bytes(data, label)
    if not fits:
        raise bad_parquet(label, truncated=False)
    # before reading the rows: pyarrow refuses duplicated names with a vaguer error
    check_parquet_schema(names, rows, label)
    try:
        table = pq.read_table(io.BytesIO(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise bad_parquet(label, truncated=False) from exc
    df: pd.DataFrame = table.to_pandas()
    return df


def load_table(
    source: Source,
    *,
    name: str | None = None,
    max_mb: float | None = None,
    file_format: FileFormat | None = None,
) -> pd.DataFrame:
    """Load a CSV, TSV or Parquet table from a path, bytes or an upload.

    Parameters
    ----------
    source : path, bytes or binary file object
        A file path, the raw bytes, or a file-like object such as Streamlit's upload.
    name : str, optional
        Display name used in messages (default: the file name, or "upload").
    max_mb : float, optional
        Size limit in MB (default ``$PLANNER_MAX_UPLOAD_MB`` or 200).
    file_format : {"csv", "tsv", "parquet"}, optional
        Skip detection (default: Parquet magic bytes, then the extension, else CSV).

    Returns
    -------
    pandas.DataFrame
        CSV/TSV: every column as text (NA for empty cells and the usual NA tokens);
        numbers and booleans are read cell by cell by the backend under the schema.
        Parquet: the file's own types. Nothing is dropped.

    Raises
    ------
    DataError
        Empty file, header only, no header, ragged rows, binary or wrong encoding,
        empty or duplicated column names, file over the limit, unreadable Parquet.
    """
    data, label = read_source(source, name, max_mb)
    try:
        if not data.strip():
            raise DataError(f"file {label!r} is empty; upload a file with a header row and data.")
        fmt = _guess_format(data, label, file_format)
        if fmt == "parquet":
            df = _read_parquet(data, label)
        else:
            df = _read_csv(data, label, fmt)
        df.columns = [str(c) for c in df.columns]
        return df
    except PlannerError:
        raise
    except Exception as exc:  # the parsers' own errors may quote private cells
        raise DataError(
            f"file {label!r} could not be read ({type(exc).__name__}); check that it is a "
            "UTF-8/Latin-1 CSV, a TSV or a Parquet file."
        ) from exc


def column_report(df: pd.DataFrame, schema: Schema) -> dict[str, Any]:
    """Per-column counts (usable / clipped / invalid / missing / replaced / dropped).

    Counts only, never values. Data-dependent: for the data owner (docs/mathematics.md §7).
    Counts are after contribution bounding (``rows_truncated`` rows removed).
    """
    from planner.data.backends.pandas_backend import PandasBackend

    return PandasBackend(df, schema).column_report()


def check_against_schema(
    df: pd.DataFrame, schema: Schema, *, allow_invalid: bool = False
) -> dict[str, Any]:
    """Check a loaded table against its schema and return :func:`column_report`.

    Raises
    ------
    DataError
        A declared column is absent; an identifier column has empty cells; unless
        ``allow_invalid``, a numeric column holds text that is not a number or a boolean
        column holds tokens that are not booleans (the count of rows is reported, not the
        values). NaN, ±inf and empty cells are missing values, handled by the declared
        rule and counted, not errors.
    """
    import pandas as pd

    for col in schema.columns:
        if col.name in df.columns and col.kind is ColumnKind.IDENTIFIER:
            s = df[col.name]
            nulls = int(s.isna().sum())
            if not pd.api.types.is_numeric_dtype(s.dtype):
                nulls += int((s.dropna().astype("string").str.strip() == "").sum())
            if nulls:
                raise DataError(
                    f"identifier column {col.name!r} has {nulls} row(s) with no value; every "
                    "row must name its person. Fill them in or remove those rows."
                )
    report = column_report(df, schema)
    if not allow_invalid:
        refuse_invalid_cells(schema, report)
    return report


def refuse_invalid_cells(schema: Schema, report: Mapping[str, Any]) -> None:
    """DataError for a numeric column holding text or a boolean column holding other
    tokens (counts only, never values); every backend's report is checked by this."""
    cols: Mapping[str, Mapping[str, Any]] = report["columns"]
    for col in schema.columns:
        stats = cols[col.name]
        bad = int(stats["invalid"])
        if bad and col.kind is ColumnKind.NUMERIC:
            raise DataError(
                f"column {col.name!r} is declared numeric but {bad} of {stats['rows']} "
                "row(s) hold text that is not a number; fix those cells (a cell left empty is a "
                "missing value, handled by the column's missing rule: write '?' or 'n/a' cells "
                "empty), or declare the column categorical."
            )
        if bad and col.kind is ColumnKind.BOOLEAN:
            raise DataError(
                f"column {col.name!r} is declared boolean but {bad} of {stats['rows']} "
                "row(s) are not true/false, yes/no or 1/0; fix those cells, or declare "
                "the column categorical."
            )


__all__ = [
    "DEFAULT_MAX_MB",
    "MAX_COLUMNS",
    "MAX_LINE_BYTES",
    "MAX_MB_ENV",
    "ColumnStats",
    "PartsScan",
    "check_against_schema",
    "check_text_limits",
    "column_report",
    "is_utf8",
    "load_table",
    "max_upload_bytes",
    "number_lookalike",
    "read_source",
    "refuse_invalid_cells",
    "scan_parts",
]
