"""The whole flow in a real browser: upload, plan under every rule, release, ledger, reload.

Driven by clicks in headless Chromium (Playwright) against ``streamlit run app.py``; a
full-page screenshot of every page (Learn pages included) goes to
``test-output/screenshots/``. Run alone with ``pytest tests/e2e -m e2e``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import SCREENSHOTS

pytestmark = pytest.mark.e2e

IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
LEARN_PAGES = [  # (url path, sidebar title) — the Learn pages app.py builds from pages/learn_*.py
    (p.stem.replace("_", "-"), p.stem) for p in sorted((Path(__file__).resolve().parents[2] / "pages").glob("learn_*.py"))
]


# ----------------------------------------------------------------------------- helpers
def wait_for_run(page: Any, timeout: float = 90_000) -> None:
    """Wait until Streamlit has finished the rerun the last action started."""
    page.wait_for_timeout(250)  # let the click reach the server and flip the state to running
    page.wait_for_selector(IDLE, timeout=timeout)
    page.wait_for_timeout(150)


def open_page(page: Any, title: str) -> None:
    """Click a page in the sidebar navigation."""
    nav = page.get_by_test_id("stSidebarNav")
    nav.get_by_role("link", name=re.compile(rf"^\W*{re.escape(title)}$")).click()
    wait_for_run(page)
    expect_title(page, title)


def expect_title(page: Any, text: str) -> None:
    page.get_by_role("heading", level=1).filter(has_text=text).first.wait_for()


def choose(page: Any, label: str, option: str) -> None:
    """Pick ``option`` in the selectbox labelled ``label``."""
    page.get_by_test_id("stSelectbox").filter(has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_for_run(page)


def no_exception(page: Any) -> None:
    assert page.get_by_test_id("stException").count() == 0, page.get_by_test_id("stException").first.inner_text()


def shot(page: Any, name: str) -> Path:
    """A full-page screenshot: the viewport is grown to the height of Streamlit's scroll area."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(400)  # charts finish drawing
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
        " return Math.max(m ? m.scrollHeight : 0, document.body.scrollHeight); }"
    )
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": min(max(int(height) + 40, 800), 12_000)})
    page.wait_for_timeout(500)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)
    return path


def ledger_spent(page: Any) -> str:
    metric = page.get_by_test_id("stMetric").filter(has_text="Spent ε").first
    return metric.get_by_test_id("stMetricValue").inner_text()


# ----------------------------------------------------------------------------- the flow
def test_full_flow_from_upload_to_release(page: Any, app_url: str, tmp_path: Path) -> None:
    page.goto(app_url)
    wait_for_run(page)
    expect_title(page, "Data and schema")
    page.get_by_text("census (sample)").first.wait_for()
    no_exception(page)
    shot(page, "01-data-census-sample")

    # --- upload a small CSV and see it loaded (the schema form, never pre-filled)
    csv = tmp_path / "people.csv"
    csv.write_text("person_id,age,city\n1,30,A\n2,41,B\n3,52,A\n4,29,C\n")
    page.get_by_text("Upload a file").click()
    wait_for_run(page)
    page.get_by_test_id("stFileUploader").first.locator('input[type="file"]').set_input_files(str(csv))
    wait_for_run(page)
    page.get_by_text("people.csv").first.wait_for()
    page.get_by_role("heading", name="Declare the schema").wait_for()
    no_exception(page)
    shot(page, "02-data-upload-schema-form")

    # --- back to the sample
    page.get_by_text("Bundled sample").click()
    wait_for_run(page)
    page.get_by_text("census (sample)").first.wait_for()

    # --- keep the default workload
    open_page(page, "Queries")
    page.get_by_text("7 valid queries").wait_for()
    no_exception(page)
    shot(page, "03-queries")

    open_page(page, "Accuracy")
    page.get_by_test_id("stVegaLiteChart").first.wait_for()
    no_exception(page)
    shot(page, "04-accuracy")
    page.get_by_text("Show data-dependent views").click()
    wait_for_run(page)
    page.get_by_text("not private, do not share").wait_for()
    page.get_by_role("button", name="Check by simulation").click()
    wait_for_run(page)
    page.get_by_text("Points: the error measured on your data").wait_for()
    no_exception(page)
    shot(page, "05-accuracy-simulation-owner-only")
    page.get_by_text("Show data-dependent views").click()  # back off: nothing owner-only stays on
    wait_for_run(page)

    # --- plan under each rule (ending on the default, rdp)
    open_page(page, "Planner")
    for rule in ("basic", "advanced", "zcdp", "rdp"):
        choose(page, "Composition rule", rule)
        page.get_by_test_id("stMetric").filter(has_text=f"ε used under {rule}").wait_for()
        no_exception(page)
        assert page.get_by_test_id("stAlert").filter(has_text="rror").count() == 0
    page.get_by_text("Compare every rule side by side").click()
    wait_for_run(page)
    page.get_by_text("Which accountant buys the most accuracy?").wait_for()
    no_exception(page)
    page.get_by_text("Plot each rule's error across total ε").click()
    wait_for_run(page)
    page.get_by_test_id("stVegaLiteChart").nth(1).wait_for()
    no_exception(page)
    shot(page, "06-planner")

    # --- release through the confirm dialog
    open_page(page, "Release")
    page.get_by_role("button", name="Release…").click()
    wait_for_run(page)
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("This spends").wait_for()
    shot(page, "07-release-confirm-dialog")
    dialog.get_by_role("button", name="Confirm release").click()
    wait_for_run(page)
    page.get_by_text(re.compile(r"Released \(release #\d+\)")).wait_for()
    page.get_by_test_id("stVegaLiteChart").first.wait_for()
    page.get_by_role("button", name="Download report (JSON)").wait_for()
    no_exception(page)
    shot(page, "08-release-answers")

    # --- the ledger shows the release
    open_page(page, "Ledger")
    page.get_by_text(re.compile(r"Release #1 ")).first.wait_for()
    spent = ledger_spent(page)
    assert float(spent) > 0
    no_exception(page)
    shot(page, "09-ledger")

    # --- a reload of the Release page shows the stored release and spends nothing
    page.goto(f"{app_url}/release")
    wait_for_run(page)
    page.get_by_text("already released").wait_for()
    assert page.get_by_role("button", name="Release…").count() == 0
    no_exception(page)
    shot(page, "10-release-after-reload")
    open_page(page, "Ledger")
    assert ledger_spent(page) == spent
    assert page.get_by_text(re.compile(r"Release #2 ")).count() == 0


@pytest.mark.parametrize("url_path,stem", LEARN_PAGES)
def test_learn_page_renders(page: Any, app_url: str, url_path: str, stem: str) -> None:
    page.goto(f"{app_url}/{url_path}")
    wait_for_run(page)
    page.get_by_role("heading", level=1).first.wait_for()
    no_exception(page)
    shot(page, f"20-{stem.replace('_', '-')}")
