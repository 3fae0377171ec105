"""The whole-file CSV checks read through windows of the file (``planner.data.sources._scan_file``)
give exactly the verdicts of the same checks on the whole file in memory
(:func:`planner.data.loader.check_text_limits`, :func:`planner.data.loader.is_utf8`), whatever the
window size: the windows only bound the memory (issue 17: a 1.7 GB CSV held 1.6 GB of
resident memory through one whole-file map; now two windows at most).

The windows are shrunk to one or a few pages so that NUL bytes, line ends, over-long lines
and multi-byte characters fall on and across their edges.
"""

from __future__ import annotations

import mmap
import random
from pathlib import Path

import pytest

from planner.core.errors import DataError
from planner.data import sources
from planner.data.loader import MAX_LINE_BYTES, check_text_limits, is_utf8

PAGE = mmap.ALLOCATIONGRANULARITY


def _verdict_in_memory(data: bytes) -> str:
    try:
        check_text_limits(data, "t.csv")
    except DataError as exc:
        return f"refused: {exc}"
    return f"utf8={is_utf8(data)}"


def _verdict_by_windows(path: Path) -> str:
    sources._SCANNED.clear()
    try:
        return f"utf8={sources._scan_file(path, 't.csv')}"
    except DataError as exc:
        return f"refused: {exc}"


def _case(rng: random.Random) -> bytes:
    """A CSV-like file of a few pages: lines of ASCII and multi-byte characters, sometimes a
    NUL byte, an invalid UTF-8 byte, or a line over the limit, placed near page edges."""
    pieces: list[bytes] = [b"a,b,c\n"]
    size = rng.choice([PAGE - 3, 2 * PAGE + 1, 5 * PAGE + 7, 9 * PAGE])
    while sum(map(len, pieces)) < size:
        cell = rng.choice([b"12", b"x" * rng.randint(1, 300), "é".encode(), "😀".encode(), "名".encode()])
        pieces.append(cell + (b"\n" if rng.random() < 0.3 else b","))
    data = bytearray(b"".join(pieces))
    near_edge = [k * PAGE + d for k in range(1, len(data) // PAGE + 1) for d in (-2, -1, 0, 1)]
    near_edge = [p for p in near_edge if 0 < p < len(data)]
    kind = rng.choice(["clean", "clean", "nul", "bad_utf8", "cut_utf8", "long_line"])
    if kind == "nul":
        data[rng.choice(near_edge or [1])] = 0
    elif kind == "bad_utf8":
        data[rng.choice(near_edge or [1])] = 0xFF
    elif kind == "cut_utf8":  # a 4-byte character split by a page edge
        at = rng.choice(near_edge or [1])
        data[at:at] = "😀".encode()
    elif kind == "long_line":
        at = rng.choice(near_edge or [1])
        # a line of exactly the limit, one under or one over it
        data[at:at] = b"\n" + b"y" * (MAX_LINE_BYTES + rng.randint(-1, 1)) + b"\n"
    return bytes(data)


@pytest.mark.parametrize("pages", [1, 2, 3])
def test_windowed_checks_give_the_in_memory_verdict(pages: int, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "_WINDOW", pages * PAGE)
    rng = random.Random(17 + pages)
    verdicts: set[str] = set()
    for i in range(60):
        data = _case(rng)
        path = tmp_path / f"c{i}.csv"
        path.write_bytes(data)
        expected = _verdict_in_memory(data)
        assert _verdict_by_windows(path) == expected, i
        verdicts.add(expected)
    # the cases reached every kind of verdict (not only clean files)
    assert any(v.startswith("utf8=True") for v in verdicts)
    assert any(v.startswith("utf8=False") for v in verdicts)
    assert any("binary data" in v for v in verdicts)
    assert any("longer than" in v for v in verdicts)
    assert sum(v.startswith("utf8=") for v in verdicts) > 1


def test_a_windowed_search_never_maps_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every map made while scanning a file of 40 windows is at most one window long."""
    monkeypatch.setattr(sources, "_WINDOW", PAGE)
    path = tmp_path / "big.csv"
    path.write_bytes(b"a,b\n" + b"1,2\n" * (10 * PAGE))
    lengths: list[int] = []
    real = mmap.mmap

    def spy(fileno: int, length: int, *a: object, **k: object) -> mmap.mmap:
        lengths.append(length)
        return real(fileno, length, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(sources.mmap, "mmap", spy)
    sources._SCANNED.clear()
    assert sources._scan_file(path, "big.csv") is True
    assert len(lengths) >= 40 and max(lengths) <= PAGE
