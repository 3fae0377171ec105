"""Issue 14 in a real browser: everything the engine can do, the browser can do; and a plan
leaves the app as files people use.

One owner, on the survey sample: picks the pandas engine, builds one query of **every**
registered kind through the form (a filtered count, quantiles at two levels, a numeric
histogram with edges, a synthetic sample, a grouped mean…), plans in each split mode,
downloads the plan file, then in a **fresh browser context** restores it, releases it and
downloads the script and the release report. The test then checks, outside the browser:

* ``planner plan`` on the downloaded file gives the allocation the ledger recorded;
* the release in the ledger is exactly the plan of the file (its plan hash);
* the downloaded script runs and makes the same plan (same hash);
* the report is one self-contained HTML file (Chromium loads it with every network request
  blocked and none attempted) — and a screenshot of it is taken.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from planner import release as rel
from planner.cli import main as cli_main
from planner.ledger import Ledger
from planner.planning.plan_spec import build_plan, load_plan_spec
from planner.planning.queries import QueryKind
from planner.planning.statistics import STATISTICS
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.test_flow import (
    choose,
    expect_title,
    fill,
    multiselect_add,
    no_error,
    no_exception,
    open_page,
    shot,
    wait_for_run,
)

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]

#: One query of every kind on the survey sample: (kind, id, column, mechanism, target, form
#: steps for its options). The survey (substitute relation) also allows a mean over the
#: public row count, so the mean exercises a choice option.
FORM: list[tuple[str, str, str, str | None, str, list[tuple[str, ...]]]] = [
    ("count", "n_long_hours", "(none: every row)", None, "50",
     [("check", "Filter: only rows matching a condition"), ("select", "Filter: column", "training_hours"),
      ("select", "Filter: comparison", ">="), ("fill", "Filter: value", "20")]),
    ("sum", "hours_total", "training_hours", None, "2000", []),
    ("mean", "hours_avg", "training_hours", "gaussian", "2", [("select", "How the mean is released", "public_n")]),
    ("histogram", "hours_bins", "training_hours", None, "50", [("fill", "Bin edges (optional)", "0, 5, 10, 20, 40")]),
    ("quantile", "hours_quartiles", "training_hours", None, "0.05", [("fill", "Levels", "0.25, 0.75")]),
    ("median", "hours_median", "training_hours", None, "0.05", []),
    ("mode", "sport_mode", "sport", "inverse_sensitivity", "100", []),
    ("proportion", "doping_rate", "used_doping", "discrete_laplace", "0.05", []),
    ("synthetic_sample", "hours_synth", "training_hours", None, "50", [("fill", "Number of bins", "8")]),
    ("grouped_count", "by_sport", "(none: every row)", None, "50", [("multi", "Group by", "sport")]),
    ("grouped_sum", "hours_by_sex", "training_hours", None, "2000", [("multi", "Group by", "sex")]),
    ("grouped_mean", "hours_by_age", "training_hours", None, "5", [("multi", "Group by", "age_group")]),
    ("grouped_quantile", "hours_median_by_sex", "training_hours", None, "0.1",
     [("multi", "Group by", "sex"), ("fill", "Levels", "0.5")]),
]
START = 4  # queries of the survey's starting workload


def _kind_text(kind: str) -> str:
    return f"{STATISTICS[QueryKind(kind)].label} ({kind})"


def _mech_text(kind: str, mech: str) -> str:
    label = next(m.label for m in STATISTICS[QueryKind(kind)].mechanisms if m.name.value == mech)
    return f"{label} ({mech})"


def _download(page: Any, button: str, into: Path) -> Path:
    with page.expect_download(timeout=120_000) as dl:
        page.get_by_role("button", name=button, exact=True).click()
    target = into / dl.value.suggested_filename
    dl.value.save_as(str(target))
    return target


def _build(page: Any) -> None:
    for kind, qid, column, mech, target, steps in FORM:
        choose(page, "kind", _kind_text(kind))
        fill(page, "id", qid)
        choose(page, "column", column)
        if mech:
            choose(page, "mechanism", _mech_text(kind, mech))
        fill(page, "target ±", target)
        for step in steps:
            if step[0] == "check":
                page.get_by_text(step[1], exact=True).click()
                wait_for_run(page)
            elif step[0] == "select":
                choose(page, step[1], step[2])
            elif step[0] == "fill":
                fill(page, step[1], step[2])
            elif step[0] == "multi":
                multiselect_add(page, step[1], [step[2]])
                wait_for_run(page)
        if kind in ("count", "quantile", "grouped_mean"):
            shot(page, f"50-builder-{kind}")
        button = page.get_by_role("button", name="Add the query")
        assert button.is_enabled(), page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
        button.click()
        wait_for_run(page)
        page.get_by_text(f"Added {qid}.").wait_for()
        no_exception(page)


def test_every_kind_through_the_form_every_mode_plan_file_fresh_session_release_script_report(
    browser: Any, app_url: str, app_ledger_url: str, tmp_path: Path
) -> None:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    page.goto(app_url)
    wait_for_run(page)
    expect_title(page, "Data and schema")
    choose(page, "Sample dataset", "survey")
    page.get_by_text("Active dataset: survey (sample)").wait_for()
    choose(page, "Engine computing a release's exact aggregates", "pandas (in memory)")

    # --- one query of every kind, through the form
    open_page(page, "Queries")
    _build(page)
    page.get_by_text(f"{START + len(FORM)} valid queries (edited)").wait_for()
    no_error(page)
    shot(page, "51-queries-every-kind")

    # --- every split mode on the Planner
    open_page(page, "Planner")
    fill(page, "Lifetime ε (all releases together)", "10")
    page.get_by_role("button", name="Set the lifetime budget").click()
    wait_for_run(page)
    page.get_by_text("Lifetime budget set: ε = 10").wait_for()
    for mode, expect in (("optimal split", "ε this release spends"), ("equal split", "Equal split: every answer"),
                         ("meet targets", "Least ε meeting every target"), ("manual split", "These shares cost")):
        page.get_by_text(mode, exact=True).click()
        wait_for_run(page)
        page.get_by_text(expect).first.wait_for()
        no_exception(page)
        no_error(page)
        shot(page, f"52-planner-{mode.split()[0]}")
    plan_file = _download(page, "Plan file (PLAN.json)", tmp_path)
    doc = json.loads(plan_file.read_text())
    assert doc["mode"] == "manual" and len(doc["queries"]) == START + len(FORM)
    assert doc["lifetime"] == {"epsilon": 10.0, "delta": 1e-06}
    ctx.close()

    # --- a fresh browser context (a new session): restore the file, release it
    ctx2 = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = ctx2.new_page()
    page.set_default_timeout(60_000)
    page.goto(app_url)
    wait_for_run(page)
    expect_title(page, "Data and schema")
    choose(page, "Sample dataset", "survey")
    page.get_by_text("Active dataset: survey (sample)").wait_for()
    choose(page, "Engine computing a release's exact aggregates", "pandas (in memory)")
    open_page(page, "Planner")
    page.get_by_test_id("stFileUploader").filter(has_text="Restore a plan file").locator(
        'input[type="file"]').set_input_files(str(plan_file))
    wait_for_run(page)
    page.get_by_text(re.compile(rf"Restored {re.escape(plan_file.name)}: {START + len(FORM)} queries, manual split")).wait_for()
    page.get_by_text("These shares cost").first.wait_for()
    no_error(page)
    shot(page, "53-planner-restored-in-a-fresh-session")

    open_page(page, "Release")
    page.get_by_role("button", name="Release…").click()
    wait_for_run(page)
    page.get_by_role("dialog").get_by_role("button", name="Confirm release").click()
    wait_for_run(page)
    page.get_by_text(re.compile(r"Released \(release #\d+\)")).wait_for(timeout=120_000)
    no_exception(page)
    no_error(page)
    shot(page, "54-release-of-the-restored-plan")
    # one after the other, as a person does: a download that reran the page dropped the
    # deferred files of the buttons after it, and the report's click did nothing (session 9)
    answers = _download(page, "Download answers (CSV)", tmp_path)
    report_json = _download(page, "Download report (JSON)", tmp_path)
    script = _download(page, "Python script", tmp_path)
    notebook = _download(page, "Jupyter notebook", tmp_path)
    report = _download(page, "Report of the release (HTML)", tmp_path)
    assert answers.read_text().splitlines()[0].startswith("query")
    assert json.loads(report_json.read_text())["release_id"] == int(re.search(r"\d+", answers.name).group())
    ctx2.close()

    # --- the ledger recorded exactly the file's plan
    spec = load_plan_spec(plan_file)
    plan = build_plan(spec).plan
    led = Ledger(app_ledger_url)
    survey = next(d for d in led.datasets() if d.name.startswith("survey"))
    rec = led.releases(survey.fingerprint)[-1]
    assert rec.plan_hash == rel.plan_hash(plan, spec.schema)
    assert set(rec.answers) == {q["id"] for q in doc["queries"]}

    # --- browser → file → `planner plan`: the same allocation the ledger recorded
    out_file = tmp_path / "cli.json"
    env_out = subprocess.run([sys.executable, "-m", "planner", "plan", "--spec", str(plan_file)], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
    assert env_out.returncode == 0, env_out.stderr
    out_file.write_text(env_out.stdout)
    cli: dict[str, float] = {}
    for q in json.loads(env_out.stdout)["queries"]:  # per query (a quantile query has one item per level)
        cli[q["query"]] = cli.get(q["query"], 0.0) + q["epsilon"]
    recorded: dict[str, float] = {}
    for sp in rec.spends:
        recorded[sp.query_id.split(":")[0]] = recorded.get(sp.query_id.split(":")[0], 0.0) + sp.epsilon
    assert recorded == pytest.approx(cli, rel=1e-12)
    assert cli_main(["plan", "--spec", str(plan_file)]) == 0  # in-process too (same parser)

    # --- the downloaded script runs and agrees with the app
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(script), "--out", "script.json"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads((tmp_path / "script.json").read_text())["plan_hash"] == rec.plan_hash
    import nbformat

    nbformat.validate(nbformat.reads(notebook.read_text(), as_version=4))

    # --- the report: self-contained (every request blocked; none attempted), screenshotted
    html = report.read_text()
    assert "<script" not in html.lower() and html.count("<svg") >= 5
    for q in doc["queries"]:
        assert q["id"] in html
    ctx3 = browser.new_context(viewport={"width": 1100, "height": 1000})
    requests: list[str] = []
    ctx3.route(re.compile(r"^(?!file:).*"), lambda route: (requests.append(route.request.url), route.abort()))
    rp = ctx3.new_page()
    rp.goto(report.resolve().as_uri())
    rp.wait_for_timeout(500)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    rp.screenshot(path=str(SCREENSHOTS / "55-release-report.png"), full_page=True)
    ctx3.close()
    assert requests == [], requests
