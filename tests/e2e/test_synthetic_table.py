"""Issue 30 in a real browser: a data owner asks for a synthetic table of 10 columns.

The test makes up a household survey (10 columns, 2,000 rows, correlated: income with
education and hours, employment with age), uploads it, declares all ten columns in the
Data page's form, adds a synthetic table over the ten columns in the Queries page's form
(1,000 rows), reads the predicted closeness on the Accuracy page, sets ε, δ and a lifetime
budget on the Planner, visits every page twice and comes back, releases, and checks:

* the Release page previews the synthetic rows and offers them as a CSV whose 1,000 rows
  hold only declared values (categories, yes/no, numbers inside the declared bounds);
* the owner-only comparison of the real and synthetic breakdowns is off until asked for,
  and is labelled as computed from the raw rows;
* the ledger holds one release of this dataset, spending the plan's ε under its rule; a
  reload shows the same stored rows and spends nothing more.

Screenshots: ``test-output/screenshots/8*-synthetic-*``.
"""

from __future__ import annotations

import csv
import io
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner.ledger import Ledger
from planner.privacy.accounting import total_epsilon
from tests.e2e.test_flow import (
    choose,
    expect_title,
    fill,
    multiselect_add,
    no_error,
    no_exception,
    open_page,
    release_now,
    shot,
    tour,
    upload_file,
    wait_for_run,
)

pytestmark = pytest.mark.e2e

REGIONS = ["North", "South", "East", "West"]
EDUCATION = ["none", "school", "college", "degree", "postgraduate"]
TENURE = ["own", "rent", "other"]
#: (column, kind, public bounds or categories) as the owner declares them in the form.
DECLARED: list[tuple[str, str, str]] = [
    ("age", "numeric", "18, 90"),
    ("income", "numeric", "0, 200000"),
    ("hours", "numeric", "0, 80"),
    ("children", "numeric", "0, 6"),
    ("region", "categorical", ", ".join(REGIONS)),
    ("sex", "categorical", "female, male"),
    ("education", "categorical", ", ".join(EDUCATION)),
    ("employed", "boolean", ""),
    ("smoker", "boolean", ""),
    ("tenure", "categorical", ", ".join(TENURE)),
]
ROWS = 2000
SYNTHETIC_ROWS = 1000
#: The numeric columns the file holds as whole numbers: the Data page ticks "whole numbers"
#: for them (suggested from the column type) and the synthetic values must be whole numbers.
WHOLE = {"age", "income", "hours", "children"}


def household_csv(path: Path, n: int = ROWS) -> Path:
    """A made-up household survey with dependent columns (not a bundled sample)."""
    g = np.random.default_rng(30)
    age = g.integers(18, 91, n)
    edu = np.minimum(g.poisson(1.6, n), 4)
    employed = g.random(n) < np.where(age > 66, 0.15, 0.8)
    hours = np.where(employed, np.clip(g.normal(38, 8, n), 1, 80), 0).round()
    income = np.clip(g.lognormal(9.6 + 0.25 * edu + 0.01 * hours, 0.5, n), 0, 200_000).round()
    children = np.minimum(g.poisson(np.where((age > 25) & (age < 60), 1.6, 0.4)), 6)
    region = g.integers(0, 4, n)
    sex = g.random(n) < 0.5
    smoker = g.random(n) < 0.2
    tenure = np.where(g.random(n) < np.clip((age - 18) / 60, 0.1, 0.85), 0, g.integers(1, 3, n))
    lines = ["age,income,hours,children,region,sex,education,employed,smoker,tenure"]
    for i in range(n):
        lines.append(",".join([
            str(age[i]), str(int(income[i])), str(int(hours[i])), str(children[i]), REGIONS[region[i]],
            "female" if sex[i] else "male", EDUCATION[edu[i]], "yes" if employed[i] else "no",
            "yes" if smoker[i] else "no", TENURE[tenure[i]],
        ]))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_synthetic_table_of_ten_columns_from_upload_to_download(
    page: Any, app_url: str, app_ledger_url: str, tmp_path: Path
) -> None:
    rng = random.Random(30)
    page.goto(app_url)
    wait_for_run(page)
    expect_title(page, "Data and schema")

    # --- upload the survey and declare its ten columns
    data = household_csv(tmp_path / "household.csv")
    upload_file(page, data)
    multiselect_add(page, "Columns to declare", [c for c, _, _ in DECLARED])
    for name, kind, public in DECLARED:
        choose(page, f"{name}: kind", kind)
        if kind == "numeric":
            fill(page, f"{name}: public bounds L, U", public)
        elif kind == "categorical":
            fill(page, f"{name}: public categories", public)
    numeric = [c for c, k, _ in DECLARED if k == "numeric"]
    ticks = page.get_by_label("whole numbers", exact=True)
    assert ticks.count() == len(numeric)
    for i, name in enumerate(numeric):  # suggested from the file's whole-number columns, shown ticked
        assert ticks.nth(i).is_checked() == (name in WHOLE), name
    fill(page, "Public (approximate) row count, 0 if none", str(ROWS))
    shot(page, "80-synthetic-schema-form")
    page.get_by_role("button", name="Save schema").click()
    wait_for_run(page)
    page.get_by_text("Schema saved: 10 column(s) declared").wait_for()
    no_error(page)
    assert page.get_by_text("[0, 6], whole numbers").count() == 1

    # --- the question: a synthetic table over all ten columns
    open_page(page, "Queries")
    choose(page, "kind", "Synthetic data (synthetic_data)")
    fill(page, "id", "household_synth")
    multiselect_add(page, "Columns", [c for c, _, _ in DECLARED])
    fill(page, "Rows (optional)", str(SYNTHETIC_ROWS))
    shot(page, "81-synthetic-query-form")
    page.get_by_role("button", name="Add the query").click()
    wait_for_run(page)
    page.get_by_text("Added household_synth.").wait_for()
    no_error(page)
    shot(page, "82-synthetic-queries")

    # --- before release: how close the breakdowns will be
    open_page(page, "Accuracy")
    choose(page, "Query", "household_synth (synthetic_data, mst_or_aim)")
    no_exception(page)
    shot(page, "83-synthetic-accuracy")

    # --- the Planner: ε, δ and the lifetime budget
    open_page(page, "Planner")
    fill(page, "ε for this release", "2")
    fill(page, "δ", "1e-6")
    fill(page, "Lifetime ε (all releases together)", "5")
    page.get_by_role("button", name="Set the lifetime budget").click()
    wait_for_run(page)
    page.get_by_text("Fits the lifetime budget").wait_for()
    no_error(page)
    shot(page, "84-synthetic-planner")
    tour(page, rng, "85-synthetic", ["household.csv", "ε = 2, δ = 1e-06"])
    open_page(page, "Planner")
    assert page.get_by_label("ε for this release", exact=True).input_value() == "2"

    # --- release: a card headlined by the rows, the rows previewed and downloadable
    release_now(page, "86-synthetic-release")
    main = page.get_by_test_id("stMain").inner_text()
    assert f"{SYNTHETIC_ROWS:,} synthetic rows (download the table)" in main, main[:3000]
    page.get_by_text("Synthetic table: household_synth").wait_for()
    first = download_text(page)
    check_records(list(csv.DictReader(io.StringIO(first))))

    # --- the owner-only comparison: off until asked for, labelled as read from the raw rows
    toggle = page.get_by_text("Compare with the real table (owner only: reads your raw data)")
    toggle.click()
    wait_for_run(page)
    compared = page.get_by_test_id("stMain").inner_text()
    assert re.search(r"data-dependent|raw data|raw rows", compared, re.IGNORECASE)
    page.get_by_test_id("stVegaLiteChart").last.scroll_into_view_if_needed()
    no_exception(page)
    shot(page, "87-synthetic-compared")

    # --- the ledger: one release of this dataset, spending ε = 2 under its rule
    led = Ledger(app_ledger_url)
    try:
        (ds,) = [d for d in led.datasets() if d.name.startswith("household.csv")]
        (rec,) = led.releases(ds.fingerprint)
        assert {s.query_id.split(":")[0] for s in rec.spends} >= {"household_synth"}
        assert total_epsilon([s.spend for s in rec.spends], ds.rule, 1e-6) == pytest.approx(2.0, rel=1e-6)
        stored = led.stored_release(ds.fingerprint, rec.plan_hash)
        assert stored is not None
    finally:
        led.close()

    # --- other pages and back: the stored rows, nothing sampled again
    with page.expect_download() as plan_dl:
        page.get_by_role("button", name="Plan file (PLAN.json)").click()
    plan_file = tmp_path / "PLAN.json"
    plan_file.write_bytes(Path(plan_dl.value.path()).read_bytes())
    open_page(page, "Ledger")
    open_page(page, "Release")
    page.get_by_text("Synthetic table: household_synth").wait_for()
    assert download_text(page) == first

    # --- a new browser session (the tab closed): the same file and the saved plan file bring
    # back the stored release; nothing is sampled or spent again
    page.reload()
    wait_for_run(page)
    open_page(page, "Data")
    upload_file(page, data)
    open_page(page, "Planner")
    page.get_by_test_id("stFileUploader").filter(has_text="Restore a plan file").locator(
        'input[type="file"]').set_input_files(str(plan_file))
    wait_for_run(page)
    page.get_by_text("Restored PLAN.json").wait_for()
    open_page(page, "Release")
    shot(page, "88-synthetic-release-new-session")
    page.get_by_text("Synthetic table: household_synth").wait_for()
    assert "already released" in page.get_by_test_id("stMain").inner_text()
    assert download_text(page) == first
    led = Ledger(app_ledger_url)
    try:
        assert led.status(ds.fingerprint).releases == 1
    finally:
        led.close()
    open_page(page, "Ledger")
    page.get_by_text(re.compile(r"Release #\d+ ")).first.wait_for()
    no_exception(page)
    shot(page, "89-synthetic-ledger")


def download_text(page: Any) -> str:
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download the synthetic table household_synth (CSV)").click()
    return Path(dl.value.path()).read_text()


def check_records(records: list[dict[str, str]]) -> None:
    """The downloaded synthetic rows: as many as asked, the ten declared columns, and only
    declared values — whole numbers inside the bounds for the whole-number columns, numbers
    inside the bounds for the others, declared categories, true/false."""
    assert len(records) == SYNTHETIC_ROWS
    assert list(records[0]) == [c for c, _, _ in DECLARED]
    for name, kind, public in DECLARED:
        values = [r[name] for r in records]
        if kind == "numeric":
            lo, hi = (float(v) for v in public.split(","))
            nums = [float(v) for v in values]
            assert all(lo <= v <= hi for v in nums), name
            if name in WHOLE:
                assert all(re.fullmatch(r"-?\d+", v) for v in values), (name, values[:5])
        elif kind == "categorical":
            assert set(values) <= {c.strip() for c in public.split(",")}, name
        else:
            assert set(values) <= {"true", "false", "True", "False"}, (name, set(values))
