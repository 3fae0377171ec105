"""A first visitor who opens a page's own URL (a bookmark of /planner) on a freshly started
server sees that page, with no "Page not found" dialog over it.

Streamlit runs the first script run of a server with a ``pages/`` folder as a version-1
multipage app until ``st.navigation`` switches that mode off, and a deep link then gets
the dialog (streamlit/streamlit#9992); ``serve.py`` switches the mode off at start. This
test starts its own server: the session-wide one has served other sessions already.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, _skip_reason, served_app

IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


@pytest.mark.parametrize(("path", "title"), [("planner", "Planner"), ("release", "Release")])
def test_a_deep_link_on_a_fresh_server_opens_its_page_without_a_dialog(path: str, title: str,
                                                                       tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    env = dict(os.environ, PLANNER_HOME=str(tmp_path), PLANNER_LEDGER_URL=f"sqlite:///{tmp_path}/ledger.db")
    with served_app(tmp_path, env) as url, sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            pg: Any = b.new_page(viewport={"width": 1400, "height": 1000})
            pg.goto(f"{url}/{path}")
            pg.get_by_role("heading", level=1).filter(has_text=title).first.wait_for(timeout=60_000)
            pg.wait_for_timeout(300)
            pg.wait_for_selector(IDLE, timeout=60_000)
            pg.wait_for_timeout(500)  # the dialog, when it came, came with the first run's messages
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            pg.screenshot(path=str(SCREENSHOTS / f"70-deep-link-{path}.png"), full_page=True)
            assert pg.get_by_text("Page not found").count() == 0
            assert pg.get_by_role("dialog").count() == 0
        finally:
            b.close()
