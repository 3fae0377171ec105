"""Data sources for the SQL backends: allow-listed files, DuckDB tables, spilled uploads.

A source names data *where it lies*: one CSV/TSV/Parquet file, a glob of them, or a table
of a DuckDB database file. Paths are resolved inside one allow-listed data directory
(``$PLANNER_DATA_DIR``, default the repository's ``data/`` folder) and refused otherwise:
``..`` components, absolute paths outside it and symbolic links that resolve outside it
all raise :class:`~planner.core.errors.DataError`. An upload (bytes or a file object) is
*spilled* to a private temporary file that DuckDB scans in place
(:func:`spill_upload`); it is the planner's own file, not a user-supplied path.

CSV files are sniffed exactly like :func:`planner.data.loader.load_table` reads them (same
delimiter sniffing and header checks, on the first 64 KiB); a file that is not UTF-8 is
transcoded to a temporary UTF-8 copy so that every engine reads the same text.
"""

from __future__ import annotations

import atexit
import csv
import hashlib
import io
import mmap
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal

from planner.core.errors import DataError
from planner.data import parquet_footer
from planner.data.backends.cells import _NUMBER_RE
from planner.data.backends.digest import ContentDigest
from planner.data.loader import (
    MAX_LINE_BYTES,
    _check_binary,
    _read_header,
    _too_big,
    check_controls,
    check_parquet_schema,
    check_text_limits,
    link_loop,
    max_upload_bytes,
    no_rows,
    not_regular,
    scan_parts,
)
from planner.data.parquet_footer import bad_parquet

if TYPE_CHECKING:  # annotations only: the command line starts without pandas
    import pandas as pd

    from planner.data.schema import Schema

#: Environment variable naming the allow-listed data directory.
DATA_DIR_ENV: Final[str] = "PLANNER_DATA_DIR"
#: Separator of a DuckDB table source: ``census.duckdb::people``.
TABLE_SEP: Final[str] = "::"

_SAMPLE: Final[int] = 1 << 16
_CSV_EXT: Final[frozenset[str]] = frozenset({".csv", ".tsv", ".tab", ".txt"})
_PARQUET_EXT: Final[frozenset[str]] = frozenset({".parquet", ".pq"})
_DB_EXT: Final[frozenset[str]] = frozenset({".duckdb", ".ddb", ".db"})
_GLOB_CHARS: Final[frozenset[str]] = frozenset("*?[")

_TEMP_DIRS: list[tempfile.TemporaryDirectory[str]] = []


def _cleanup() -> None:
    for t in _TEMP_DIRS:
        t.cleanup()


atexit.register(_cleanup)


def _private_dir() -> Path:
    t = tempfile.TemporaryDirectory(prefix="planner-")
    _TEMP_DIRS.append(t)
    return Path(t.name)


def data_dir() -> Path:
    """The allow-listed data directory (``$PLANNER_DATA_DIR`` or the repository's ``data/``)."""
    env = os.environ.get(DATA_DIR_ENV)
    base = Path(env) if env and env.strip() else Path(__file__).resolve().parents[2] / "data"
    try:
        return base.resolve(strict=True)
    except OSError as exc:
        raise DataError(
            f"the data directory named by {DATA_DIR_ENV} does not exist; create it or point "
            f"{DATA_DIR_ENV} at the folder that holds the data files."
        ) from exc


@dataclass(frozen=True)
class FileSource:
    """One or more CSV/TSV or Parquet files with the same columns.

    ``label`` is what messages show (the pattern relative to the data directory, never
    a full path). CSV files carry the sniffed ``delimiter`` and ``header``.
    """

    kind: Literal["csv", "parquet"]
    paths: tuple[Path, ...]
    label: str
    delimiter: str = ","
    header: tuple[str, ...] = ()
    temporary: bool = False
    _keep: tuple[object, ...] = field(default=(), repr=False, compare=False)
    originals: tuple[Path, ...] = ()
    #: the whole-file checks still running (``open_cli_source(defer_check=True)``), or None
    pending: WholeFileCheck | None = field(default=None, repr=False, compare=False)

    @property
    def files(self) -> tuple[Path, ...]:
        """The files as named (before any transcoding to UTF-8)."""
        return self.originals or self.paths


@dataclass(frozen=True)
class TableSource:
    """A table of a DuckDB database file (read only)."""

    database: Path
    table: str
    label: str


Source = FileSource | TableSource


def _refuse(spec: str, why: str) -> DataError:
    return DataError(
        f"data source {spec!r} is refused: {why}. Sources must name files inside the data "
        f"directory (set {DATA_DIR_ENV} to change it)."
    )


def resolve_paths(spec: str | os.PathLike[str], base: Path | None = None) -> tuple[Path, ...]:
    """Files matching ``spec`` (a path or glob) inside the allow-listed directory.

    Raises
    ------
    DataError
        ``..`` in the path, an absolute path outside the directory, a match that resolves
        (through a symbolic link) outside it, or no matching file.
    """
    root = data_dir() if base is None else base.resolve(strict=True)
    text = os.fspath(spec)
    if not text.strip() or "\x00" in text:
        raise _refuse(text, "the path is empty or contains a NUL character")
    p = Path(text)
    if any(part == ".." for part in p.parts):
        raise _refuse(text, "'..' is not allowed in a data path")
    if not p.is_absolute():
        # "data/census.csv" typed in the repository: relative to the working directory
        # when that lands inside the data directory, else relative to the data directory
        from_cwd = Path(os.path.normpath(Path.cwd() / p))
        if from_cwd.is_relative_to(root) or from_cwd.resolve().is_relative_to(root):
            p = from_cwd
    if p.is_absolute():
        absolute = Path(os.path.normpath(p))
        if not absolute.is_relative_to(root):
            # the path may name the directory through a symbolic link: compare resolved parents
            anchor = Path(*absolute.parts[: next(
                (i for i, part in enumerate(absolute.parts) if _GLOB_CHARS & set(part)),
                len(absolute.parts),
            )])
            try:
                resolved_anchor = anchor.resolve(strict=True)
            except OSError as exc:
                raise _refuse(text, "it is outside the data directory") from exc
            if not resolved_anchor.is_relative_to(root):
                raise _refuse(text, "it is outside the data directory")
            rel = absolute.relative_to(anchor)
            p = resolved_anchor.relative_to(root) / rel
        else:
            p = absolute.relative_to(root)
    pattern = p.as_posix()
    if _GLOB_CHARS & set(pattern):
        matches = sorted(m for m in root.glob(pattern) if m.is_file() or m.is_symlink())
    else:
        candidate = root / p
        matches = [candidate] if candidate.exists() or candidate.is_symlink() else []
    if not matches:
        raise DataError(
            f"no data file matches {pattern!r} in the data directory; check the name "
            f"(files must be inside the folder named by {DATA_DIR_ENV})."
        )
    out: list[Path] = []
    for m in matches:
        try:
            r = m.resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # Python 3.11: RuntimeError on a link loop
            raise link_loop(m.name) from exc
        if not r.is_relative_to(root):
            raise _refuse(text, "a matching file is a link that leads outside the data directory")
        try:
            mode = r.stat().st_mode
        except OSError as exc:
            raise _refuse(text, f"{m.name!r} cannot be read ({exc.strerror})") from exc
        if not stat.S_ISREG(mode):
            # never opened: a FIFO would block, /dev/zero would never end
            raise not_regular(m.name, mode)
        out.append(r)
    return tuple(out)


def _file_kind(path: Path) -> Literal["csv", "parquet"]:
    suffix = path.suffix.lower()
    if suffix in _PARQUET_EXT:
        return "parquet"
    with path.open("rb") as f:
        if f.read(4) == b"PAR1":
            return "parquet"
    return "csv"


def _decode_sample(raw: bytes) -> tuple[str, str]:
    """(text, encoding) of a sample; a multi-byte character cut at the end is tolerated."""
    for cut in range(4):
        try:
            return raw[: len(raw) - cut].decode("utf-8-sig"), "utf-8"
        except UnicodeDecodeError as exc:
            if exc.start < len(raw) - 4:
                break
    for enc in ("cp1252", "latin-1"):
        try:
            return raw.decode(enc), enc
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1"), "latin-1"  # pragma: no cover - latin-1 decodes anything


def _transcode(path: Path, encoding: str) -> tuple[Path, str]:
    """A UTF-8 copy of a text file (streamed), in a private temporary directory, and the
    encoding it was read in.

    ``encoding`` (from the first 64 KiB) when the whole file decodes in it, else Latin-1:
    the pandas loader's choice on the whole file (Windows-1252, else Latin-1), so every
    engine reads the same text.
    """
    out = _private_dir() / (path.stem + ".utf8.csv")
    for enc in dict.fromkeys((encoding, "latin-1")):
        try:
            with path.open("r", encoding=enc, newline="") as src, \
                    out.open("w", encoding="utf-8", newline="") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            return out, enc
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 decodes any bytes")  # pragma: no cover


#: verdicts of :func:`_scan_file` by (device, inode, size, mtime): whether the file is
#: UTF-8 and whether it holds a number look-alike (:func:`planner.data.loader.number_lookalike`);
#: a file the app opens again (plan, then release) is scanned once
_SCANNED: dict[tuple[int, int, int, int], tuple[bool, bool]] = {}


def _file_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def numbers_plain(source: FileSource) -> bool | None:
    """Whether the whole-file checks found no number look-alike in any of the source's
    CSV files (:func:`planner.data.loader.number_lookalike`): then DuckDB may read its numeric
    columns as DOUBLE and get what the cell-reading rules get. None when a file's checks
    have not run (or are still running) or the file changed since."""
    plain = True
    for path in source.files:
        try:
            verdict = _SCANNED.get(_file_key(path.stat()))
        except OSError:
            return None
        if verdict is None:
            return None
        plain = plain and not verdict[1]
    return plain


#: Bytes of a CSV mapped at once by :func:`_scan_file` (a multiple of every platform's
#: mmap granularity): the memory the whole-file checks hold, whatever the file's size.
_WINDOW: Final[int] = 1 << 24


class _FileWindows:
    """A read-only file seen as one buffer (:class:`planner.data.loader.TextBuffer`) but mapped
    :data:`_WINDOW` bytes at a time: a search maps the window it is in and unmaps the one
    before, so the process never holds more than two windows of the file (a whole-file
    memory map puts every page of a 1.7 GB CSV in the process's resident set)."""

    def __init__(self, fileno: int, size: int) -> None:
        self._fd, self._size = fileno, size
        self._at = -1
        self._map: mmap.mmap | None = None

    def __len__(self) -> int:
        return self._size

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map, self._at = None, -1

    def _window(self, w: int) -> mmap.mmap:
        """The window starting at byte ``w`` (a multiple of :data:`_WINDOW`)."""
        if self._at != w or self._map is None:
            self.close()
            self._map = mmap.mmap(self._fd, min(_WINDOW, self._size - w), access=mmap.ACCESS_READ, offset=w)
            self._at = w
        return self._map

    def windows(self) -> Iterator[mmap.mmap]:
        """Every window in order (each unmapped when the next is made)."""
        for w in range(0, self._size, _WINDOW):
            yield self._window(w)
        self.close()

    def _bounds(self, start: int | None, end: int | None) -> tuple[int, int]:
        lo = 0 if start is None else max(start, 0)
        hi = self._size if end is None else min(end, self._size)
        return lo, hi

    def find(self, sub: bytes, start: int | None = None, end: int | None = None, /) -> int:
        if len(sub) != 1:
            raise ValueError("_FileWindows.find searches for one byte")
        lo, hi = self._bounds(start, end)
        while lo < hi:
            w = lo - lo % _WINDOW
            stop = min(hi, w + _WINDOW)
            i = self._window(w).find(sub, lo - w, stop - w)
            if i >= 0:
                return w + i
            lo = stop
        return -1

    def rfind(self, sub: bytes, start: int | None = None, end: int | None = None, /) -> int:
        if len(sub) != 1:
            raise ValueError("_FileWindows.rfind searches for one byte")
        lo, hi = self._bounds(start, end)
        while lo < hi:
            w = (hi - 1) - (hi - 1) % _WINDOW
            first = max(lo, w)
            i = self._window(w).rfind(sub, first - w, hi - w)
            if i >= 0:
                return w + i
            hi = first
        return -1

    def __getitem__(self, key: slice, /) -> bytes:
        lo, hi = self._bounds(key.start, key.stop)
        if key.step not in (None, 1):
            raise ValueError("_FileWindows slices have step 1")
        return os.pread(self._fd, max(hi - lo, 0), lo) if hi > lo else b""


#: A cell DuckDB surely reads as DOUBLE (the rules' number pattern, padded with blanks or
#: tabs), or an empty one.
_PLAIN_NUMBER = re.compile(rf"(?:[ \t]*{_NUMBER_RE}[ \t]*)?")


def head_numbers_plain(source: FileSource, columns: Sequence[str], rows: int = 500) -> bool:
    """Whether every cell of ``columns`` in the first ``rows`` data rows of the source's
    first file (within its first 64 KiB) is empty or a plain number.

    Only a forecast, for speed: a numeric column read as DOUBLE that meets a cell DuckDB
    refuses (an NA token, a blank, text) is read again as text
    (:meth:`planner.data.backends.duckdb_backend.DuckDBBackend.prefetch`); a file whose head
    already holds one is read as text at once, without the wasted typed pass.
    """
    if not columns or source.kind != "csv":
        return True
    try:
        with source.paths[0].open("rb") as f:
            raw = f.read(_SAMPLE)
    except OSError:
        return True
    text = raw.decode("utf-8", errors="replace")
    if len(raw) == _SAMPLE:  # a cut last line is not a cell to judge
        text = text[: text.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(text), delimiter=source.delimiter, quotechar='"')
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        return True
    where = [header.index(c) for c in columns if c in header]
    try:
        for _, row in zip(range(rows), reader, strict=False):
            if any(i < len(row) and not _PLAIN_NUMBER.fullmatch(row[i]) for i in where):
                return False
    except csv.Error:
        return True
    return True


def _scan_file(path: Path, label: str) -> bool:
    """The whole-file checks of a CSV (no NUL byte, no line over the limit; see
    :func:`planner.data.loader.check_text_limits`) through read-only memory maps of the file
    (the page cache, not the process's memory), :data:`_WINDOW` bytes at a time; returns
    whether the whole file is UTF-8. Whether it holds a number look-alike is noted for
    :func:`numbers_plain`."""
    with path.open("rb") as f:
        key = _file_key(os.fstat(f.fileno()))
        if key in _SCANNED:
            return _SCANNED[key][0]
        if key[2] == 0:
            return True
        buf = _FileWindows(f.fileno(), key[2])
        try:
            found = scan_parts(buf.windows(), lookalikes=True)  # without the GIL: see WholeFileCheck
            check_text_limits(buf, label, nul_free=not found.has_nul)
        finally:
            buf.close()
    if len(_SCANNED) > 256:
        _SCANNED.clear()
    _SCANNED[key] = (found.utf8, bool(found.lookalike))
    return found.utf8


class WholeFileCheck:
    """The whole-file checks of a CSV source (:func:`_scan_file` of each file: NUL bytes,
    line lengths, UTF-8), run in a thread of their own while the scan reads the files.

    ``planner release`` opens its source this way (``open_cli_source(defer_check=True)``):
    the check is a pass over the file's bytes (about 0.3 s at 1.7 GB), and the scan need
    not wait for it, because nothing it computes is used before :meth:`verdict`
    (:class:`planner.data.backends.BackgroundScan` asks for it before it hands the backend
    over, and discards the scan when the verdict is an error). The verdicts and messages
    are those of the synchronous check (``tests/engine/test_hostile_files.py`` runs the
    hostile-file corpus both ways; ``tests/engine/test_deferred_check.py`` the order of
    events, a late encoding and a late error).

    Parameters
    ----------
    files : tuple of (path, label, read as UTF-8)
        Each file, the name its messages use, and whether the source reads it as UTF-8
        (its head is UTF-8). Such a file that is not UTF-8 further on must be read as
        Windows-1252 instead, like the synchronous check decides: :meth:`verdict` then
        returns True and the caller opens the source again.
    """

    #: the name of the checks' thread
    THREAD = "planner-whole-file-check"

    def __init__(self, files: tuple[tuple[Path, str, bool], ...]) -> None:
        self._files = files
        self._error: BaseException | None = None
        self._reopen = False
        self._thread = threading.Thread(target=self._run, name=self.THREAD, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for path, label, as_utf8 in self._files:
                if not _scan_file(path, label) and as_utf8:
                    self._reopen = True
        except BaseException as exc:  # re-raised by verdict(), in the caller's thread
            self._error = exc

    def verdict(self) -> bool:
        """Wait for the checks; raise their error (a :class:`~planner.core.errors.DataError`
        naming the file and the fix); return whether the source must be opened again
        because a file read as UTF-8 is not UTF-8 past its head."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._reopen


def sniff_csv(path: Path, label: str, tsv: bool = False, *, whole_file: bool = True
              ) -> tuple[str, tuple[str, ...], str]:
    """(delimiter, header, encoding) of a CSV file, checked like the pandas loader does.

    The whole file is scanned once (NUL bytes, line lengths, UTF-8); the header is read
    to its end (up to :data:`planner.data.loader.MAX_LINE_BYTES`), never cut at the sample.
    With ``whole_file`` False that scan is the caller's (:class:`WholeFileCheck`) and the
    encoding is the head's: a file whose head is UTF-8 is taken as UTF-8 until the scan
    says otherwise.
    """
    with path.open("rb") as f:
        raw = f.read(_SAMPLE)
        if raw.strip() and b"\n" not in raw.lstrip(b"\r\n"):
            raw += f.read(MAX_LINE_BYTES + 1)
        whole = not f.read(1)
    if not raw.strip():
        raise DataError(f"file {label!r} is empty; upload a file with a header row and data.")
    _check_binary(raw, label)
    utf8 = _scan_file(path, label) if whole_file else True
    text, encoding = _decode_sample(raw)
    if not utf8 and encoding == "utf-8":
        # the head is UTF-8, a later byte is not: the loader decodes the whole file as
        # Windows-1252 (or Latin-1); so does the transcoded copy
        try:
            text, encoding = raw.decode("cp1252"), "cp1252"
        except UnicodeDecodeError:
            text, encoding = raw.decode("latin-1"), "latin-1"
    check_controls(text[:_SAMPLE], label)
    delimiter, header = _read_header(text, label, "tsv" if tsv else "csv")
    if whole:
        body = text.lstrip("\r\n").split("\n", 1)
        if '"' not in body[0] and (len(body) == 1 or not body[1].strip()):
            raise no_rows(label)
    return delimiter, tuple(header), encoding


def _check_parquet(paths: tuple[Path, ...], label: str) -> None:
    """The Parquet checks every engine shares, from each file's footer (no rows read).

    Per file, in order: both ``PAR1`` markers; a footer that parses; every column chunk
    the footer lists lies between the leading marker and the footer
    (:func:`planner.data.parquet_footer.parquet_chunks_fit`); the column names and the row count
    (:func:`planner.data.loader.check_parquet_schema`). Errors name ``label`` (one file) or
    the file's name (several).

    The footer is read as :mod:`planner.data.parquet_footer` reads it (DuckDB when installed,
    else pyarrow; why, and what it costs, is said there), the same way the pandas loader
    reads an upload's. A footer DuckDB cannot parse is refused here, in the same words on
    every route, instead of failing later in the scan. The routes still differ on files
    whose only damage is the Arrow schema pyarrow-written files keep in their key-value
    metadata: DuckDB ignores it, while the pandas loader reads the rows with pyarrow, which
    decodes it and refuses the file.
    """
    duckdb = parquet_footer.duckdb_module()
    con: Any = None
    try:
        for p in paths:
            name = label if len(paths) == 1 else p.name
            with p.open("rb") as f:
                head = f.read(4)
                size = os.fstat(f.fileno()).st_size
                f.seek(max(size - 8, 0))
                tail = f.read(8)
            if head != b"PAR1" or tail[-4:] != b"PAR1" or size < 12:
                raise bad_parquet(name, truncated=True)
            if duckdb is None:
                names, rows, fits = parquet_footer.footer_by_pyarrow(p, size, name)
            else:
                if con is None:
                    con = parquet_footer.footer_connection(duckdb, paths)
                footer_bytes = int.from_bytes(tail[:4], "little")
                names, rows, fits = parquet_footer.footer_by_duckdb(duckdb, con, p, size - 8 - footer_bytes, name)
            if not fits:
                raise bad_parquet(name, truncated=False)
            check_parquet_schema(names, rows, name)
    finally:
        if con is not None:
            con.close()


def estimate_csv_rows(source: FileSource) -> int:
    """About how many rows a CSV source has: its size over the mean line length of its
    first 64 KiB (a hint for sizing, never a count; nothing depends on it being right)."""
    total = 0.0
    for p in source.paths:
        try:
            size = p.stat().st_size
            with p.open("rb") as f:
                sample = f.read(_SAMPLE)
        except OSError:
            continue
        lines = max(sample.count(b"\n"), 1)
        total += size / (len(sample) / lines) if sample else 0.0
    return int(total)


def file_source(paths: tuple[Path, ...], label: str, *, temporary: bool = False,
                keep: tuple[object, ...] = (), defer_check: bool = False) -> FileSource:
    """A :class:`FileSource` of already-trusted paths (all CSV or all Parquet).

    With ``defer_check`` the whole-file checks of CSV files run in a thread while the
    caller reads them (the source's ``pending`` :class:`WholeFileCheck`); whoever uses
    what was read must first ask for its verdict. Every message is the synchronous
    route's: a file refused before its checks ran is opened again the synchronous way.
    """
    kinds = {_file_kind(p) for p in paths}
    if len(kinds) != 1:
        raise DataError(f"data source {label!r} mixes CSV and Parquet files; use one format.")
    kind = kinds.pop()
    if kind == "parquet":
        _check_parquet(paths, label)
        return FileSource("parquet", paths, label, temporary=temporary, _keep=keep)
    if not defer_check:
        return _csv_source(paths, label, temporary, keep, defer=False)
    try:
        return _csv_source(paths, label, temporary, keep, defer=True)
    except DataError:
        # An error found before the whole-file checks ran: the synchronous order (those
        # checks first, then the head read in the encoding they decide) gives the message.
        return _csv_source(paths, label, temporary, keep, defer=False)


def _csv_source(paths: tuple[Path, ...], label: str, temporary: bool, keep: tuple[object, ...], *,
                defer: bool) -> FileSource:
    """:func:`file_source` of CSV files (``defer``: the whole-file checks run in a thread)."""
    delimiter: str = ","
    header: tuple[str, ...] = ()
    out: list[Path] = []
    deferred: list[tuple[Path, str, bool]] = []
    for i, p in enumerate(paths):
        d, h, enc = sniff_csv(p, label if len(paths) == 1 else p.name,
                              tsv=p.suffix.lower() in (".tsv", ".tab"), whole_file=not defer)
        deferred.append((p, label if len(paths) == 1 else p.name, enc == "utf-8"))
        if i == 0:
            delimiter, header = d, h
        elif (d, h) != (delimiter, header):
            raise DataError(
                f"data source {label!r}: file {p.name!r} has a different header or delimiter "
                "than the first file; every file of a glob must have the same columns."
            )
        if enc != "utf-8":
            copy, used = _transcode(p, enc)
            if used != enc and i == 0:  # the header as the whole file's encoding reads it
                delimiter, header, _ = sniff_csv(copy, label if len(paths) == 1 else p.name,
                                                 tsv=p.suffix.lower() in (".tsv", ".tab"))
            elif used != enc and sniff_csv(copy, p.name, tsv=p.suffix.lower() in (".tsv", ".tab"))[:2] != (delimiter, header):
                raise DataError(
                    f"data source {label!r}: file {p.name!r} has a different header or "
                    "delimiter than the first file; every file of a glob must have the same "
                    "columns."
                )
            p = copy
        out.append(p)
    pending = WholeFileCheck(tuple(deferred)) if defer else None
    return FileSource("csv", tuple(out), label, delimiter, header, temporary, keep, paths, pending)


def open_source(spec: str | os.PathLike[str], base: Path | None = None, *, defer_check: bool = False) -> Source:
    """The source named by ``spec``: a path or glob, or ``DATABASE.duckdb::TABLE``
    (``defer_check``: see :func:`file_source`).

    Examples
    --------
    >>> open_source("census.csv").label
    'census.csv'
    """
    text = os.fspath(spec)
    if TABLE_SEP in text:
        db_spec, table = text.rsplit(TABLE_SEP, 1)
        if not table.strip():
            raise DataError(f"data source {text!r}: name the table after '{TABLE_SEP}'.")
        paths = resolve_paths(db_spec, base)
        if len(paths) != 1 or paths[0].suffix.lower() not in _DB_EXT:
            raise DataError(
                f"data source {text!r}: a table source is one DuckDB file (.duckdb, .ddb, .db) "
                f"followed by '{TABLE_SEP}' and the table name."
            )
        return TableSource(paths[0], table, f"{paths[0].name}{TABLE_SEP}{table}")
    paths = resolve_paths(text, base)
    for p in paths:
        if p.suffix.lower() in _DB_EXT:
            raise DataError(
                f"data source {text!r} is a database file; name a table: "
                f"'{p.name}{TABLE_SEP}TABLE'."
            )
    root = data_dir() if base is None else base.resolve()
    label = text if _GLOB_CHARS & set(text) else paths[0].name
    if Path(label).is_absolute():
        label = Path(label).relative_to(root).as_posix() if Path(label).is_relative_to(root) else paths[0].name
    return file_source(paths, label, defer_check=defer_check)


def open_cli_source(spec: str | os.PathLike[str], *, defer_check: bool = False) -> Source:
    """A source named on the command line: any path or glob the invoking user can read.

    The allow-listed directory guards the web app, where a browser names a file on the
    server; a command-line user already has the shell, so the path is taken as given
    (made absolute, which also resolves ``..``), or ``DB.duckdb::table``. ``defer_check``:
    see :func:`file_source` (``planner release`` reads a CSV while it is checked).
    """
    text = os.fspath(spec)
    if TABLE_SEP in text:
        db_spec, table = text.rsplit(TABLE_SEP, 1)
        return open_source(f"{os.path.abspath(db_spec)}{TABLE_SEP}{table}", Path(os.sep))
    return open_source(os.path.abspath(text), Path(os.sep), defer_check=defer_check)


@contextmanager
def spill_upload(upload: bytes | bytearray | memoryview | IO[bytes], name: str | None = None,
                 max_mb: float | None = None) -> Iterator[FileSource]:
    """Write an upload to a private temporary file for DuckDB to scan; delete it afterwards.

    The size limit of :func:`planner.data.loader.max_upload_bytes` applies.
    """
    limit = max_upload_bytes(max_mb)
    label = name or str(getattr(upload, "name", "") or "upload")
    folder = Path(tempfile.mkdtemp(prefix="planner-upload-"))
    try:
        if isinstance(upload, (bytes, bytearray, memoryview)):
            data = bytes(upload)
            if len(data) > limit:
                raise _too_big(label, len(data), limit)
            head = data[:4]
        else:
            if hasattr(upload, "seek"):
                try:
                    upload.seek(0)
                except (OSError, ValueError):
                    pass
            data = b""
            head = b""
        suffix = Path(label).suffix.lower()
        if suffix not in _CSV_EXT | _PARQUET_EXT:
            suffix = ".csv"
        target = folder / ("upload" + suffix)
        with target.open("wb") as out:
            if data or isinstance(upload, (bytes, bytearray, memoryview)):
                out.write(data)
            else:
                total = 0
                while True:
                    chunk = upload.read(1 << 20)
                    if not chunk:
                        break
                    if not isinstance(chunk, (bytes, bytearray)):
                        raise DataError(f"upload {label!r} must be opened in binary mode.")
                    if not head:
                        head = bytes(chunk[:4])
                    total += len(chunk)
                    if total > limit:
                        raise _too_big(label, total, limit)
                    out.write(chunk)
        if head == b"PAR1" and suffix != ".parquet":
            target = target.rename(folder / "upload.parquet")
        yield file_source((target,), label, temporary=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def dataset_key(digest: ContentDigest) -> str:
    """The ledger's dataset key, from a table's content digest (computed in the scan).

    Not keyed yet: SHA-256 of the digest under a version tag. Like the file hash it
    replaces, it lets whoever sees it test a guess about the data; the keyed fingerprint
    (HMAC with a server secret, issue 16) is to replace this one function. The digest
    itself never leaves the process.
    """
    return "cd1-" + hashlib.sha256(
        f"planner-dataset-key-v1\x00{digest.rows}\x00{digest.hexdigest}".encode()
    ).hexdigest()


def table_key(df: pd.DataFrame, schema: Schema) -> str:
    """:func:`dataset_key` of a table already in memory (the web app's loaded file): the
    content digest of its declared columns by the pandas backend, equal to the one every
    other backend computes in its scan of the file (tests/engine/test_digest.py), so the
    app and ``planner release`` know the same table as one dataset.

    >>> import pandas as pd
    >>> from planner.data.schema import Schema
    >>> s = Schema.from_dict({"version": 1, "columns": [
    ...     {"name": "age", "kind": "numeric", "lower": 0, "upper": 100, "missing": {"action": "drop"}}]})
    >>> a = table_key(pd.DataFrame({"age": ["30", "41"]}), s)
    >>> a == table_key(pd.DataFrame({"age": ["41", "30"]}), s)  # row order does not matter
    True
    >>> a == table_key(pd.DataFrame({"age": ["30", "42"]}), s)
    False
    """
    from planner.data.backends.pandas_backend import PandasBackend

    return dataset_key(PandasBackend(df, schema).content_digest())


def source_fingerprint(source: Source) -> str:
    """The ledger's dataset key: sha256 of the file's bytes (same as the pandas route).

    Several files: sha256 over their names and digests in order; a DuckDB table: over
    the database file's digest and the table name.
    """
    from planner.data.schema import dataset_fingerprint

    if isinstance(source, TableSource):
        inner = dataset_fingerprint(source.database)
        return hashlib.sha256(f"duckdb-table\x00{source.table}\x00{inner}".encode()).hexdigest()
    if len(source.files) == 1:
        return dataset_fingerprint(source.files[0])
    h = hashlib.sha256(b"files")
    for p in source.files:
        h.update(b"\x00" + p.name.encode("utf-8") + b"\x00" + dataset_fingerprint(p).encode())
    return h.hexdigest()


__all__ = [
    "DATA_DIR_ENV",
    "TABLE_SEP",
    "FileSource",
    "Source",
    "TableSource",
    "data_dir",
    "dataset_key",
    "estimate_csv_rows",
    "file_source",
    "open_cli_source",
    "open_source",
    "resolve_paths",
    "sniff_csv",
    "source_fingerprint",
    "spill_upload",
    "table_key",
]
