"""Browser fixtures: the app served on 127.0.0.1 and Debian's headless Chromium.

The server runs with ``PLANNER_HOME`` and ``PLANNER_LEDGER_URL`` in a temporary folder, so
the tests never touch a real ledger. Chromium is the system one (``/usr/bin/chromium``);
Playwright never downloads a browser here. Without it (or without the ``playwright``
package) every e2e test is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM = os.environ.get("PLANNER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]


def _skip_reason() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the 'playwright' Python package is not installed (pip install playwright)"
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set PLANNER_CHROMIUM)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: The ledger the served app writes to (set by ``app_url``); tests read it to check spends.
SERVED: dict[str, str] = {}


@pytest.fixture(scope="session")
def app_ledger_url(app_url: str) -> str:
    """The SQLAlchemy URL of the ledger the served app writes to."""
    return SERVED["ledger_url"]


@contextmanager
def served_app(home: Path, env: dict[str, str]) -> Iterator[str]:
    """``python serve.py`` (the README's command) on a free port, until the block ends; its
    output goes to ``home/streamlit.log``. Yields the app's URL once it answers."""
    port = _free_port()
    log = open(home / "streamlit.log", "wb")  # closed in the teardown
    proc = subprocess.Popen(
        [sys.executable, "serve.py", "--server.headless", "true",  # the README's command
         "--server.address", "127.0.0.1", "--server.port", str(port),
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError("streamlit did not start:\n" + (home / "streamlit.log").read_text()[-3000:])
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = _skip_reason()
    if reason:
        print(f"\nSKIPPING e2e: {reason}")
        pytest.skip(reason)
    home = tmp_path_factory.mktemp("planner_home")
    SERVED["ledger_url"] = f"sqlite:///{home}/ledger.db"
    # The served app and this test process read the same ledger, so they share one planner
    # home (its server secret and integrity markers), as every process of one organisation must.
    env = dict(os.environ, PLANNER_HOME=os.environ["PLANNER_HOME"], PLANNER_LEDGER_URL=SERVED["ledger_url"])
    with served_app(home, env) as url:
        yield url


@pytest.fixture(scope="session")
def browser(app_url: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[object]:
    rep = yield
    if rep.when == "call":
        item.stash[_FAILED] = rep.failed
    return rep


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def page(browser: object, request: pytest.FixtureRequest) -> Iterator[object]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    try:
        yield pg
    finally:
        if request.node.stash.get(_FAILED, False):  # what the browser showed when it failed
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            pg.screenshot(path=str(SCREENSHOTS / f"FAILED-{request.node.name}.png"), full_page=True)
        ctx.close()
