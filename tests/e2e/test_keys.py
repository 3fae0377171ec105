"""Count by undeclared key in a real browser (Playwright, headless Chromium).

An owner uploads a file the test generates (shop sales with a ZIP code the owner cannot
list), declares the ZIP column as a key column, builds a count by key in the form, changes
ε and the rule on the Planner, reads which keys will be shown, visits every page and comes
back, releases on the default engine, and the test checks in the ledger that the release is
the plan that was set, that the spend carries the key δ, and that the rare ZIP codes held
by one person each were not shown. Screenshots: ``test-output/screenshots/6*-keys-*``.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pages._ui import state as S
from planner import release as rel
from planner.data.schema import Schema
from planner.ledger import Ledger
from planner.privacy.accounting import total_epsilon
from planner.privacy.events import ThresholdedEvent
from tests.e2e.test_flow import (
    PLAN_PAGES,
    choose,
    expect_title,
    expected_plan,
    fill,
    multiselect_add,
    no_error,
    no_exception,
    open_page,
    release_now,
    shot,
    upload_file,
    wait_for_run,
)

pytestmark = pytest.mark.e2e

FREQUENT = ["02139", "10001", "94105", "60601"]
RARE = [f"{30000 + 7 * i:05d}" for i in range(25)]


def shops_csv(path: Path) -> Path:
    rng = np.random.default_rng(2026)
    zips = [*rng.choice(FREQUENT, size=800, p=[0.4, 0.3, 0.2, 0.1]).tolist(), *RARE]
    amounts = rng.integers(1, 500, size=len(zips))
    path.write_text("zip,amount\n" + "".join(f"{z},{a}\n" for z, a in zip(zips, amounts, strict=True)))
    return path


def test_key_count_flow(page: Any, app_url: str, app_ledger_url: str, tmp_path: Path) -> None:
    rng = random.Random(11)
    page.goto(app_url)
    wait_for_run(page)
    expect_title(page, "Data and schema")
    upload_file(page, shops_csv(tmp_path / "shops.csv"))
    multiselect_add(page, "Columns to declare", ["zip", "amount"])
    choose(page, "zip: kind", "key")
    fill(page, "amount: public bounds L, U", "0, 500")
    fill(page, "Public (approximate) row count, 0 if none", "800")
    page.get_by_role("button", name="Save schema").click()
    wait_for_run(page)
    page.get_by_text("Schema saved: 2 column(s) declared").wait_for()
    no_error(page)
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download schema JSON").click()
    schema = Schema.from_json(Path(dl.value.path()).read_text())
    assert schema.column("zip").kind.value == "key"
    shot(page, "60-keys-schema")

    open_page(page, "Queries")
    choose(page, "kind", "Count by key (keys not declared) (key_count)")
    fill(page, "id", "zips")
    choose(page, "column", "zip")
    fill(page, "Key δ (optional)", "0.0000002")  # not the default (1e-7): the setting must reach the release
    button = page.get_by_role("button", name="Add the query")
    assert button.is_enabled(), page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    button.click()
    wait_for_run(page)
    page.get_by_text("Added zips.").wait_for()
    shot(page, "61-keys-query")

    rows = [dict(r) for r in S.starter_workload(schema.to_dict())]
    rows.append({"id": "zips", "kind": "key_count", "column": "zip", "mechanism": "discrete_laplace",
                 "weight": 1.0, "key_delta": 2e-7})

    open_page(page, "Planner")
    fill(page, "ε for this release", "1")
    choose(page, "Composition rule (what-if)", "zcdp (zero-concentrated DP)")
    for p in rng.sample(PLAN_PAGES, len(PLAN_PAGES)):  # every page, then back
        open_page(page, p)
    open_page(page, "Planner")
    page.get_by_text("zips: which keys will be shown.").wait_for()
    page.get_by_text(re.compile(r"a key needs about \d+ rows to be shown 19 times in 20")).first.wait_for()
    fill(page, "Lifetime ε (all releases together)", "3")
    page.get_by_role("button", name="Set the lifetime budget").click()
    wait_for_run(page)
    no_exception(page)
    shot(page, "62-keys-planner")
    release_now(page, "63-keys-release")

    led = Ledger(app_ledger_url)
    ds = next(d for d in led.datasets() if d.name.startswith("shops"))
    rec = led.releases(ds.fingerprint)[-1]
    spend = next(s for s in rec.spends if s.query_id == "zips")
    assert isinstance(spend.event, ThresholdedEvent) and spend.event.delta == pytest.approx(2e-7)
    ans = rec.answers["zips"]
    assert isinstance(ans, dict)
    assert set(FREQUENT[:3]) <= set(ans["keys"])  # 80+ rows each, far above any threshold here
    assert not set(ans["keys"]) & set(RARE)
    # the released plan is the one set on the screen: this workload at ε = 1 under zCDP
    expected = expected_plan(schema, rows, "weighted", 1.0, 1e-6, "zcdp")
    assert rec.plan_hash == rel.plan_hash(expected, schema), "the released plan is not the one that was set"
    assert total_epsilon([s.spend for s in rec.spends], "zcdp", 1e-6) == pytest.approx(1.0, rel=1e-9)
