"""The owner's flows in a real browser (Playwright driving headless Chromium).

``test_owner_flow_keeps_every_setting_and_releases_the_plan_set`` is issue 12's test: an
owner uploads a CSV the test generates, declares its schema in the form, edits a query's
weight and adds a query, sets ε, δ, rule and then target mode on the Planner, visits every
page in a shuffled order twice after each change, releases, and the test checks in the
ledger that what was released is exactly the plan that was set: the release's plan hash
equals the hash of the plan the engine makes from those values, and its recorded spends,
composed under the rule, equal the plan's ε. ``test_sample_flow`` walks the bundled census
sample through the owner-only views, the rule comparison, a release and a reload.

A full-page screenshot of every step goes to ``test-output/screenshots/``. Run alone with
``pytest tests/e2e -m e2e``.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pages._ui import prefetch
from pages._ui import state as S
from planner import release as rel
from planner.data.schema import Schema
from planner.ledger import Ledger
from planner.planning import workload
from planner.planning.queries import queries_from_list
from planner.privacy.accounting import total_epsilon
from planner.privacy.rules import rule as rule_of
from tests.e2e.conftest import SCREENSHOTS

pytestmark = pytest.mark.e2e

IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
ROOT = Path(__file__).resolve().parents[2]
LEARN_PAGES = [  # (url path, sidebar title) — the Learn pages app.py builds from pages/learn_*.py
    (p.stem.replace("_", "-"), p.stem) for p in sorted((ROOT / "pages").glob("learn_*.py"))
]
PLAN_PAGES = ["Data", "Queries", "Accuracy", "Planner", "Release", "Ledger"]
TITLES = {"Data": "Data and schema", "Accuracy": "Accuracy against ε"}


# ----------------------------------------------------------------------------- helpers
def wait_for_run(page: Any, timeout: float = 90_000) -> None:
    """Wait until Streamlit has finished the rerun the last action started."""
    page.wait_for_timeout(250)  # let the action reach the server and flip the state to running
    page.wait_for_selector(IDLE, timeout=timeout)
    page.wait_for_timeout(150)


def open_page(page: Any, title: str) -> None:
    """Click a page in the sidebar navigation."""
    nav = page.get_by_test_id("stSidebarNav")
    nav.get_by_role("link", name=re.compile(rf"^\W*{re.escape(title)}$")).click()
    wait_for_run(page)
    expect_title(page, TITLES.get(title, title))


def expect_title(page: Any, text: str) -> None:
    page.get_by_role("heading", level=1).filter(has_text=text).first.wait_for()


def choose(page: Any, label: str, option: str) -> None:
    """Pick ``option`` in the selectbox labelled exactly ``label`` (typed, so an option far
    down a long list is found)."""
    box = page.get_by_test_id("stSelectbox").filter(
        has=page.get_by_test_id("stWidgetLabel").get_by_text(label, exact=True)).first
    box.click()
    page.keyboard.type(option[:40])
    page.get_by_role("option", name=option, exact=True).click()
    wait_for_run(page)


def fill(page: Any, label: str, value: str) -> None:
    """Type ``value`` into the text or number input labelled ``label`` and commit it."""
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")
    wait_for_run(page)


def multiselect_add(page: Any, label: str, options: list[str]) -> None:
    ms = page.get_by_test_id("stMultiSelect").filter(has_text=label).first
    for option in options:
        ms.locator("input").click()
        ms.locator("input").fill(option)
        page.get_by_role("option", name=option, exact=True).click()
        wait_for_run(page)
    page.keyboard.press("Escape")


def grid_edit(page: Any, row: int, col: int, text: str) -> None:
    """Type ``text`` into a cell of the first data editor (row 0 = first data row, col 0 =
    the first column after the row markers): the grid is a canvas, so it is driven with the
    keyboard from its first cell, as a person using the keyboard would. Like a person, it
    looks at the cell afterwards and types again if the keystrokes landed elsewhere (the
    canvas can move under the pointer while a rerun redraws the page); the app's handling of
    the edit is checked by the caller, never here."""
    for _ in range(3):
        grid = page.get_by_test_id("stDataFrame").first
        grid.scroll_into_view_if_needed()  # the query form sits above the table on the Queries page
        wait_for_run(page)
        page.wait_for_timeout(300)
        box = grid.bounding_box()
        page.mouse.click(box["x"] + 100, box["y"] + 35 + 17)
        for _ in range(col):
            page.keyboard.press("ArrowRight")
        for _ in range(row):
            page.keyboard.press("ArrowDown")
        page.keyboard.press("Enter")
        page.wait_for_timeout(200)
        page.keyboard.press("Control+a")
        page.keyboard.type(text, delay=40)
        page.keyboard.press("Enter")
        wait_for_run(page)
        for _ in range(20):
            if grid_cell(page, row, col + 1) == text:
                return
            page.wait_for_timeout(250)
    raise AssertionError(f"could not type {text!r} into row {row}, column {col} of the table")


def grid_cell(page: Any, row: int, col: int) -> str:
    """The text of a data-editor cell (the grid's accessible table; col 1 = first column)."""
    return page.locator(f"#glide-cell-{col}-{row}").first.inner_text()


def upload_file(page: Any, path: Path) -> None:
    """Upload ``path`` on the Data page, as a person does, and wait until it is the active dataset."""
    page.get_by_text("Upload a file").click()
    wait_for_run(page)
    page.get_by_test_id("stFileUploader").first.locator('input[type="file"]').set_input_files(str(path))
    wait_for_run(page)
    page.get_by_text(f"Active dataset: {path.name}").wait_for()


def no_exception(page: Any) -> None:
    assert page.get_by_test_id("stException").count() == 0, page.get_by_test_id("stException").first.inner_text()


def no_error(page: Any) -> None:
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, errors.first.inner_text()


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


def sidebar_text(page: Any) -> str:
    return page.get_by_test_id("stSidebarUserContent").inner_text()


def tour(page: Any, rng: random.Random, tag: str, expect_in_sidebar: list[str]) -> None:
    """Visit every page in a shuffled order, twice; the sidebar must show the settings each time."""
    for lap in (1, 2):
        order = PLAN_PAGES[:]
        rng.shuffle(order)
        print(f"{tag} lap {lap}: {' → '.join(order)}")
        for title in order:
            open_page(page, title)
            no_exception(page)
            side = sidebar_text(page)
            for text in expect_in_sidebar:
                assert text in side, (title, text, side)
            if lap == 1:
                shot(page, f"{tag}-{title.lower()}")


def people_csv(path: Path, n: int = 400) -> Path:
    """A table the test makes up (not a bundled sample): age, income, region, smoker."""
    g = np.random.default_rng(12)
    regions = np.array(["North", "South", "East", "West"])
    lines = ["age,income,region,smoker"]
    for age, inc, reg, smk in zip(g.integers(18, 91, n), g.integers(0, 150_000, n), g.integers(0, 4, n),
                                  g.random(n) < 0.25, strict=True):
        lines.append(f"{age},{inc},{regions[reg]},{'yes' if smk else 'no'}")
    path.write_text("\n".join(lines) + "\n")
    return path


def expected_plan(schema: Schema, rows: list[dict[str, Any]], mode: str, epsilon: float, delta: float,
                  rule: str) -> workload.Plan:
    """The plan the engine makes from the values the test set (what must have been released)."""
    drop = "target" if mode == "weighted" else "weight"
    qs = queries_from_list([{k: v for k, v in r.items() if k != drop and v is not None} for r in rows], schema)
    if mode == "target":
        return workload.plan_for_targets(qs, schema, delta, rule).plan
    return workload.plan(qs, schema, epsilon, delta, rule, workload.default_error_scales(qs, schema))


def release_now(page: Any, name: str) -> None:
    open_page(page, "Release")
    page.get_by_role("button", name="Release…").click()
    wait_for_run(page)
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("This spends").wait_for()
    shot(page, f"{name}-confirm")
    dialog.get_by_role("button", name="Confirm release").click()
    wait_for_run(page)
    page.get_by_text(re.compile(r"Released \(release #\d+\)")).wait_for()
    page.get_by_test_id("stVegaLiteChart").first.wait_for()
    no_exception(page)
    no_error(page)
    shot(page, f"{name}-answers")


# ----------------------------------------------------------------------------- issue 12
def test_owner_flow_keeps_every_setting_and_releases_the_plan_set(
    page: Any, app_url: str, app_ledger_url: str, tmp_path: Path
) -> None:
    rng = random.Random(20261123)
    page.goto(app_url)
    wait_for_run(page)
    expect_title(page, "Data and schema")
    shot(page, "30-data-start")

    # --- upload a CSV the test made, and declare its schema in the form
    csv = people_csv(tmp_path / "people.csv")
    upload_file(page, csv)
    page.get_by_role("heading", name="Declare the schema").wait_for()
    multiselect_add(page, "Columns to declare", ["age", "income", "region", "smoker"])
    fill(page, "age: public bounds L, U", "18, 90")
    fill(page, "income: public bounds L, U", "0, 200000")
    fill(page, "region: public categories", "North, South, East, West")
    fill(page, "Public (approximate) row count, 0 if none", "400")
    shot(page, "31-data-schema-form")
    page.get_by_role("button", name="Save schema").click()
    wait_for_run(page)
    page.get_by_text("Schema saved: 4 column(s) declared").wait_for()
    no_error(page)
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download schema JSON").click()
    schema = Schema.from_json(Path(dl.value.path()).read_text())
    assert [c.name for c in schema.columns] == ["age", "income", "region", "smoker"]
    shot(page, "32-data-schema-saved")

    # --- edit a weight in the table, add a query with the form
    open_page(page, "Queries")
    rows = [dict(r) for r in S.starter_workload(schema.to_dict())]
    assert [r["id"] for r in rows] == ["rows", "age_mean", "income_mean", "region_histogram", "smoker_proportion"]
    page.get_by_text("5 valid queries").wait_for()
    grid_edit(page, row=2, col=4, text="10")  # income_mean's weight
    rows[2]["weight"] = 10.0
    choose(page, "kind", "Median (median)")
    fill(page, "id", "age_median")
    choose(page, "column", "age")
    choose(page, "mechanism", "Exponential mechanism (exponential)")
    fill(page, "weight", "2")
    fill(page, "target ±", "0.2")
    page.get_by_role("button", name="Add the query").click()
    wait_for_run(page)
    rows.append({"id": "age_median", "kind": "median", "column": "age", "mechanism": "exponential",
                 "weight": 2.0, "target": 0.2})
    page.get_by_text("6 valid queries (edited)").wait_for()
    assert grid_cell(page, 2, 5) == "10"
    no_error(page)
    shot(page, "33-queries-edited")

    # --- set ε, δ and the rule on the Planner, and the lifetime budget
    open_page(page, "Planner")
    # ε by the box's − button, from a value off its 0.1 grid: what the background planning of
    # the neighbours (pages/_ui/prefetch.py) predicts the browser sends is what the page gets
    fill(page, "ε for this release", "0.55")
    page.get_by_test_id("stNumberInput").filter(has_text="ε for this release").get_by_test_id(
        "stNumberInputStepDown").click()
    wait_for_run(page)
    assert prefetch.neighbours(0.55) == [0.7, 0.5]
    assert page.get_by_label("ε for this release", exact=True).input_value() == "0.5"
    fill(page, "δ", "1e-7")
    choose(page, "Composition rule (what-if)", "zcdp (zero-concentrated DP)")
    fill(page, "Lifetime ε (all releases together)", "4")
    page.get_by_role("button", name="Set the lifetime budget").click()
    wait_for_run(page)
    page.get_by_text("Lifetime budget set: ε = 4, δ = 1e-07, zcdp rule.").wait_for()
    page.get_by_text("Fits the lifetime budget").wait_for()
    no_error(page)
    shot(page, "34-planner-set")

    settings = ["people.csv", "ε = 0.5, δ = 1e-07", "zero-concentrated differential privacy (zCDP) · 6 queries (edited)"]
    tour(page, rng, "35-weighted", settings)

    # the values are still on the pages that set them
    open_page(page, "Planner")
    assert page.get_by_label("ε for this release", exact=True).input_value() == "0.5"
    assert page.get_by_label("δ", exact=True).input_value() == "1e-7"
    page.get_by_text("accounted under zero-concentrated differential privacy (zCDP)").first.wait_for()
    open_page(page, "Queries")
    assert grid_cell(page, 2, 5) == "10" and grid_cell(page, 5, 1) == "age_median"

    release_now(page, "36-weighted-release")
    led = Ledger(app_ledger_url)
    # the served app's ledger is shared by the e2e tests: this test's dataset, by its name
    (fp,) = [d.fingerprint for d in led.datasets() if d.name.startswith("people.csv")]
    first = led.releases(fp)[-1]
    plan1 = expected_plan(schema, rows, "weighted", 0.5, 1e-7, "zcdp")
    assert first.plan_hash == rel.plan_hash(plan1, schema), "the released plan is not the one that was set"
    assert total_epsilon([s.spend for s in first.spends], "zcdp", 1e-7) == pytest.approx(0.5, rel=1e-9)
    assert {s.query_id.split(":")[0] for s in first.spends} == {r["id"] for r in rows}

    # --- target mode: targets typed in the table, the mode set on the Planner
    open_page(page, "Queries")
    targets = {"rows": "40", "age_mean": "5", "income_mean": "20000", "region_histogram": "40",
               "smoker_proportion": "0.1"}
    for i, (qid, t) in enumerate(targets.items()):
        grid_edit(page, row=i, col=5, text=t)
        rows[i]["target"] = float(t)
        assert rows[i]["id"] == qid
    no_error(page)
    open_page(page, "Planner")
    page.get_by_text("meet targets").click()
    wait_for_run(page)
    page.get_by_test_id("stMetric").filter(has_text="Least ε meeting every target").wait_for()
    no_error(page)
    shot(page, "37-planner-target-mode")
    tour(page, rng, "38-target", ["people.csv", "least ε meeting every target", "zero-concentrated differential privacy (zCDP) · 6 queries"])

    release_now(page, "39-target-release")
    second = led.releases(fp)[-1]
    plan2 = expected_plan(schema, rows, "target", 0.5, 1e-7, "zcdp")
    assert second.plan_hash == rel.plan_hash(plan2, schema), "the released plan is not the target plan"
    assert total_epsilon([s.spend for s in second.spends], "zcdp", 1e-7) == pytest.approx(
        plan2.allocation.used_epsilon, rel=1e-9)
    status = led.status(fp)
    assert status.releases == 2 and status.epsilon_total == 4.0

    open_page(page, "Ledger")
    page.get_by_text(re.compile(r"Release #2 ")).first.wait_for()
    no_exception(page)
    shot(page, "40-ledger")


# ----------------------------------------------------------------------------- the census sample
def test_sample_flow(page: Any, app_url: str, app_ledger_url: str) -> None:
    page.goto(app_url)
    wait_for_run(page)
    expect_title(page, "Data and schema")
    page.get_by_text("census (sample)").first.wait_for()
    no_exception(page)
    shot(page, "01-data-census-sample")

    open_page(page, "Queries")
    page.get_by_text("7 valid queries").wait_for()
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

    open_page(page, "Planner")
    labels = {"basic": "basic (add up every ε)", "advanced": "advanced (Kairouz–Oh–Viswanath)",
              "zcdp": "zcdp (zero-concentrated DP)", "rdp": "rdp (Rényi DP)"}
    for rule in ("basic", "advanced", "zcdp", "rdp"):
        choose(page, "Composition rule (what-if)", labels[rule])
        # the sidebar names the rule in use in words (the registry's), beside the workload
        page.get_by_text(re.compile(re.escape(rule_of(rule).full) + r" · \d+ queries")).first.wait_for()
        page.get_by_test_id("stMetric").filter(has_text="ε this release spends").wait_for()
        no_exception(page)
        no_error(page)
    page.get_by_text("For this workload").wait_for()
    page.get_by_text("Plot each rule's errors across ε").click()
    wait_for_run(page)
    page.get_by_test_id("stVegaLiteChart").nth(1).wait_for()
    no_exception(page)
    shot(page, "06-planner")

    open_page(page, "Release")
    assert page.get_by_role("button", name="Release…").is_disabled()  # no lifetime budget yet
    fill(page, "Lifetime ε (all releases together)", "2")
    page.get_by_role("button", name="Set the lifetime budget").click()
    wait_for_run(page)
    page.get_by_text("Remaining afterwards").wait_for()
    release_now(page, "08-release")

    open_page(page, "Ledger")
    page.get_by_text(re.compile(r"Release #\d+ ")).first.wait_for()  # ids are the ledger's, across datasets
    no_exception(page)
    shot(page, "09-ledger")
    led = Ledger(app_ledger_url)
    census = [d for d in led.datasets() if d.name.startswith("census")]
    assert len(census) == 1
    spent = led.status(census[0].fingerprint).epsilon_spent
    assert spent == pytest.approx(1.0, rel=1e-9)  # ε = 1 under rdp, the Planner's defaults

    # a reload of the Release page (a new session) shows the stored release and spends nothing
    page.goto(f"{app_url}/release")
    wait_for_run(page)
    page.get_by_text("already released").wait_for()
    assert page.get_by_role("button", name="Release…").count() == 0
    no_exception(page)
    shot(page, "10-release-after-reload")
    assert led.status(census[0].fingerprint).epsilon_spent == spent
    assert len(led.releases(census[0].fingerprint)) == 1


@pytest.mark.parametrize("url_path,stem", LEARN_PAGES)
def test_learn_page_renders(page: Any, app_url: str, url_path: str, stem: str) -> None:
    page.goto(f"{app_url}/{url_path}")
    wait_for_run(page)
    page.get_by_role("heading", level=1).first.wait_for()
    no_exception(page)
    shot(page, f"20-{stem.replace('_', '-')}")

