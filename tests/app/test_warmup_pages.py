"""``pages._ui.warmup.compile_pages``: the warm-up thread compiles every page the navigation
lists into Streamlit's script cache (what a page's first visit in the process otherwise does),
through the run's own pages manager."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pages._ui import warmup  # noqa: E402


@pytest.fixture(autouse=True)
def _ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def test_every_listed_page_is_compiled_into_the_runs_script_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def capture() -> None:  # what start() hands its thread: the run's pages manager
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        assert ctx is not None
        seen.append(ctx.pages_manager)

    monkeypatch.setattr(warmup, "start", capture)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    pm = seen[-1]
    cache = pm._script_cache  # Streamlit's ScriptCache of this app (its entries keyed by absolute path)
    listed = {str(Path(i["script_path"]).resolve()) for i in pm.get_pages().values()}
    pages = {str(p.resolve()) for p in (ROOT / "pages").glob("*.py")}
    assert pages <= listed  # an owner's navigation lists every page file (the planning, training and Learn pages)
    assert not pages <= set(cache._cache)  # before: only the page just run is compiled
    done = warmup.compile_pages(pm)
    assert {str(Path(p).resolve()) for p in done} == pages
    assert pages <= set(cache._cache)
    # what a later visit asks for is the code compiled here, not compiled again
    data_page = str((ROOT / "pages" / "data_page.py").resolve())
    assert pm.get_page_script_byte_code(data_page) is cache._cache[data_page]
