"""Issue 29 in a real browser: a first-time owner's panel file (several rows per person, a
log wage, a yes/no and a categorical column whose categories hold commas, missing values)
from upload to a release that reads as results, with settings changed, every other page
visited and the values checked on the way back, and the release checked in the ledger.

A full-page screenshot of every step goes to ``test-output/screenshots/`` (``50-…``).
"""

from __future__ import annotations

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
    sidebar_text,
    tour,
    upload_file,
    wait_for_run,
)

pytestmark = pytest.mark.e2e

OCCUPATIONS = ["Craftsmen, Foremen and kindred", "Professional, Technical and kindred", "Laborers"]


def panel_csv(path: Path, people: int = 120, years: int = 8) -> Path:
    """A made-up wage panel: person id, year, log wage, union (yes/no), occupation; about one
    cell in twelve missing."""
    g = np.random.default_rng(29)
    lines = ["nr,year,lwage,union,occupation"]
    for p in range(people):
        occ = OCCUPATIONS[p % 3]
        for y in range(1980, 1980 + years):
            lw = "" if g.random() < 0.08 else f"{float(np.clip(g.normal(1.6, 0.5), 0.0, 4.9)):.3f}"
            un = "" if g.random() < 0.08 else ("yes" if g.random() < 0.25 else "no")
            oc = "" if g.random() < 0.08 else f'"{occ}"'
            lines.append(f"{1000 + p},{y},{lw},{un},{oc}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_first_time_owner_releases_a_panel_file_that_reads_as_results(
    page: Any, app_url: str, app_ledger_url: str, tmp_path: Path
) -> None:
    rng = random.Random(29)
    page.goto(app_url)
    wait_for_run(page)
    expect_title(page, "Data and schema")

    # --- upload the panel and say what is public
    csv = panel_csv(tmp_path / "panel.csv")
    upload_file(page, csv)
    multiselect_add(page, "Columns to declare", ["nr", "lwage", "union", "occupation"])
    choose(page, "nr: kind", "identifier")
    fill(page, "lwage: public bounds L, U", "0, 5")
    choose(page, "occupation: kind", "categorical")
    fill(page, "occupation: public categories", ", ".join(f'"{o}"' for o in OCCUPATIONS))
    choose(page, "Privacy unit", "nr")
    fill(page, "Max rows per person", "8")
    fill(page, "Public (approximate) row count, 0 if none", "960")
    shot(page, "50-panel-schema-form")
    page.get_by_role("button", name="Save schema").click()
    wait_for_run(page)
    page.get_by_text("Schema saved: 4 column(s) declared").wait_for()
    no_error(page)
    page.get_by_text("keeps 8 of them, chosen by a fixed pseudo-random order").first.wait_for()
    shot(page, "51-panel-schema-saved")

    # --- the guided path shows every question with a verdict
    open_page(page, "Start here")
    page.get_by_text("5. Release").first.wait_for()
    assert "usable" in page.get_by_test_id("stMain").inner_text()
    no_exception(page)
    shot(page, "52-panel-guide")

    # --- two questions: the quartiles of the log wage, the mean log wage by occupation
    open_page(page, "Queries")
    choose(page, "kind", "Quantiles (quantile)")
    fill(page, "id", "lwage_quartiles")
    choose(page, "column", "lwage")
    fill(page, "Levels", "0.25, 0.75")
    page.get_by_role("button", name="Add the query").click()
    wait_for_run(page)
    page.get_by_text("Added lwage_quartiles.").wait_for()
    choose(page, "kind", "Mean by group (grouped_mean)")
    fill(page, "id", "lwage_by_occupation")
    choose(page, "column", "lwage")
    multiselect_add(page, "Group by", ["occupation"])
    page.get_by_role("button", name="Add the query").click()
    wait_for_run(page)
    page.get_by_text("Added lwage_by_occupation.").wait_for()
    no_error(page)  # the form starts fresh: nothing carried over, nothing to complain about
    shot(page, "53-panel-queries")

    # --- the Planner: ε, δ and the lifetime budget
    open_page(page, "Planner")
    fill(page, "ε for this release", "1")
    fill(page, "δ", "1e-7")
    fill(page, "Lifetime ε (all releases together)", "3")
    page.get_by_role("button", name="Set the lifetime budget").click()
    wait_for_run(page)
    page.get_by_text("Fits the lifetime budget").wait_for()
    page.get_by_text("What each answer can support").first.wait_for()
    no_error(page)
    shot(page, "54-panel-planner")
    tour(page, rng, "55-panel", ["panel.csv", "ε = 1, δ = 1e-07"])
    open_page(page, "Planner")
    assert page.get_by_label("ε for this release", exact=True).input_value() == "1"
    assert page.get_by_label("δ", exact=True).input_value() == "1e-7"
    assert "panel.csv" in sidebar_text(page)

    # --- release: a card per question, the quartiles as two released values, verdicts
    release_now(page, "56-panel-release")
    main = page.get_by_test_id("stMain").inner_text()
    assert re.search(r"25% point: [\d.]+; 75% point: [\d.]+", main), main[:2000]
    assert "these 3 group means can be told apart only if they truly differ by more than" in main
    assert re.search(r"\b(usable|rough|mostly noise)\b", main)

    # --- the ledger: one release of this dataset, spending exactly ε = 1 under its rule
    led = Ledger(app_ledger_url)
    try:
        (ds,) = [d for d in led.datasets() if d.name.startswith("panel.csv")]
        (rec,) = led.releases(ds.fingerprint)
        queries = {s.query_id.split(":")[0] for s in rec.spends}
        assert {"lwage_quartiles", "lwage_by_occupation"} <= queries
        assert total_epsilon([s.spend for s in rec.spends], ds.rule, 1e-7) == pytest.approx(1.0, rel=1e-6)
        assert led.status(ds.fingerprint).releases == 1
    finally:
        led.close()
    open_page(page, "Ledger")
    page.get_by_text(re.compile(r"Release #\d+ ")).first.wait_for()
    no_exception(page)
    shot(page, "57-panel-ledger")
