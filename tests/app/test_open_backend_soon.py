"""``pages._ui.cached.open_backend_soon``: one open at a time per key, and what it remembers
stays bounded (a key is held only while its open runs; the keys opened well are the last
``OPEN_ENTRIES``, as many as the backend cache keeps)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pages._ui import cached  # noqa: E402


def _data(fp: str) -> cached.Active:
    # a bundled sample: its source is read from the Active itself, not from a session
    return cached.Active("census (sample)", "sample", fp, pd.DataFrame(), None, None, "census")


@pytest.fixture
def opener(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A stand-in for the cached open: it waits for ``go`` and fails for keys in ``fail``."""
    state: dict[str, Any] = {"go": threading.Event(), "fail": set(), "calls": []}

    def fake(fingerprint: str, schema_json: str, kind: str, src: Any) -> object:
        state["calls"].append(fingerprint)
        assert state["go"].wait(10)
        if fingerprint in state["fail"]:
            raise OSError("cannot open")
        return object()

    monkeypatch.setattr(cached, "_open_backend", fake)
    monkeypatch.setattr(cached, "_opening", set())
    monkeypatch.setattr(cached, "_opened", cached.collections.deque(maxlen=cached.OPEN_ENTRIES))
    return state


def test_a_key_is_held_while_its_open_runs_and_trimmed_when_it_ends(opener: dict[str, Any]) -> None:
    t = cached.open_backend_soon("fp-1", "{}", "duckdb", _data("fp-1"))
    assert t is not None
    assert ("fp-1", "{}", "duckdb") in cached._opening
    # a second call while the first open runs starts nothing
    assert cached.open_backend_soon("fp-1", "{}", "duckdb", _data("fp-1")) is None
    opener["go"].set()
    t.join(10)
    assert not t.is_alive()
    assert cached._opening == set()
    assert list(cached._opened) == [("fp-1", "{}", "duckdb")]
    # opened: a later page run starts no thread
    assert cached.open_backend_soon("fp-1", "{}", "duckdb", _data("fp-1")) is None
    assert opener["calls"] == ["fp-1"]


def test_a_failed_open_is_trimmed_and_tried_again(opener: dict[str, Any]) -> None:
    opener["fail"].add("bad")
    opener["go"].set()
    t = cached.open_backend_soon("bad", "{}", "duckdb", _data("bad"))
    assert t is not None
    t.join(10)
    assert cached._opening == set() and list(cached._opened) == []
    t2 = cached.open_backend_soon("bad", "{}", "duckdb", _data("bad"))  # tried again, not remembered as open
    assert t2 is not None
    t2.join(10)
    assert opener["calls"] == ["bad", "bad"]
    assert cached._opening == set()


def test_what_is_remembered_stays_bounded(opener: dict[str, Any]) -> None:
    opener["go"].set()
    n = 3 * cached.OPEN_ENTRIES
    for i in range(n):
        t = cached.open_backend_soon(f"fp-{i}", "{}", "duckdb", _data(f"fp-{i}"))
        assert t is not None
        t.join(10)
    assert cached._opening == set()
    # the last OPEN_ENTRIES keys, in the order they were opened
    assert list(cached._opened) == [(f"fp-{i}", "{}", "duckdb") for i in range(n - cached.OPEN_ENTRIES, n)]
    # the oldest is forgotten: asked again, it is opened again (the cache may have dropped it too)
    assert cached.open_backend_soon("fp-0", "{}", "duckdb", _data("fp-0")) is not None
