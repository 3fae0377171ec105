"""Issue 14: equal and manual splits, PLAN.json in every mode both ways, code export, report.

Expected numbers say where they come from: hand calculations for the equal and manual
splits under basic composition; the ledger's own accountant (``total_epsilon``) for the
other rules; the engine's ``build_plan`` for what a file, the CLI or a generated script
must reproduce (they are separate code paths reading the same document).
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

from planner.cli import main as cli_main
from planner.core.errors import PlanError, PlannerError, QueryError, SchemaError
from planner.data.schema import Schema
from planner.outputs import codegen, report
from planner.planning import workload
from planner.planning.allocation import Family, Item, allocate_equal, pinned_cost
from planner.planning.plan_spec import (
    build_plan,
    compare_spec,
    dump_plan_spec,
    load_plan_spec,
    loads_plan_spec,
    parse_plan_spec,
    spec_document,
)
from planner.planning.queries import Query, QueryKind
from planner.planning.statistics import STATISTICS
from planner.privacy.accounting import total_epsilon
from planner.privacy.budget import CompositionRule
from planner.release import plan_hash

ROOT = Path(__file__).resolve().parents[2]
CENSUS = Schema.load(ROOT / "data" / "census.schema.json")
CENSUS_CSV = ROOT / "data" / "census.csv"

#: One query of every registered kind, with options (census schema).
EVERY_KIND = [
    Query("people_65", "count", None, "laplace", predicate={"column": "age", "op": ">=", "value": 65}),
    Query("income_total", "sum", "income", "laplace"),
    Query("income_mean", "mean", "income", "gaussian", weight=2.0),
    Query("age_bins", "histogram", "age", "discrete_laplace", bin_edges=[18, 30, 65, 90]),
    Query("age_q", "quantile", "age", "exponential", alphas=[0.1, 0.9], candidates=145),
    Query("income_median", "median", "income", "exponential", step=1000.0),
    Query("education_mode", "mode", "education", "exponential"),
    Query("smoker_share", "proportion", "smoker", "laplace"),
    Query("age_synth", "synthetic_sample", "age", "perturbed_histogram", bins=12),
    Query("by_sex", "grouped_count", None, "laplace", by=["sex"]),
    Query("income_by_sex", "grouped_sum", "income", "laplace", by=["sex"]),
    Query("income_by_region", "grouped_mean", "income", "laplace", by=["region"]),
    Query("age_median_by_sex", "grouped_quantile", "age", "exponential", by=["sex"], alphas=[0.5]),
    Query("synth", "synthetic_data", None, "mst", columns=["age", "sex", "region", "smoker"], bins=6, rows=300,
          sampler="iid"),  # the non-default sampler: plan files and the generated script carry it
]


def test_every_kind_is_covered() -> None:
    # a key count needs a column of kind "key", which the census sample does not have: its
    # plan file round trip is tests/engine/test_partition_selection.py::test_plan_file_round_trip
    assert {q.kind for q in EVERY_KIND} == set(STATISTICS) - {QueryKind.KEY_COUNT}


# --------------------------------------------------------------------------- equal split
def test_equal_split_basic_pure_is_epsilon_over_k() -> None:
    # by hand: 5 pure items under basic composition at ε = 2 get 0.4 each
    items = [Item(f"q{i}", Family.LAPLACE, 2.0, weight=float(i + 1)) for i in range(5)]
    a = allocate_equal(items, 2.0)
    assert [it.epsilon for it in a.items] == pytest.approx([0.4] * 5, rel=1e-9)
    assert a.used_epsilon <= 2.0


@pytest.mark.parametrize("rule", ["basic", "advanced", "rdp", "zcdp"])
def test_equal_split_is_equal_and_spends_the_budget_exactly(rule: str) -> None:
    p = workload.plan_equal(EVERY_KIND, CENSUS, 1.0, 1e-6, rule)
    eps = [a.epsilon for a in p.allocation.items]
    assert max(eps) == pytest.approx(min(eps), rel=1e-9)  # every item's standalone ε is the same
    spent = total_epsilon([s for _, s in p.allocation.spends()], rule, 1e-6)  # the ledger's accountant
    assert spent <= 1.0 and spent == pytest.approx(1.0, rel=1e-9)
    assert p.allocation.method.value == "equal"


def test_equal_split_ignores_weights_but_reports_their_objective() -> None:
    a = workload.plan_equal([EVERY_KIND[0], EVERY_KIND[1]], CENSUS, 1.0, 0.0, "basic")
    b = workload.plan_equal([EVERY_KIND[0], EVERY_KIND[1].replace(weight=9.0)], CENSUS, 1.0, 0.0, "basic")
    assert [x.theta for x in a.allocation.items] == [x.theta for x in b.allocation.items]
    assert b.allocation.objective > a.allocation.objective


# --------------------------------------------------------------------------- manual split
def test_manual_total_basic_is_the_sum() -> None:
    # by hand: 0.1 + 0.2 + 0.3 under basic composition
    items = [Item(k, Family.LAPLACE, 2.0, pinned=v) for k, v in zip("abc", (0.1, 0.2, 0.3), strict=True)]
    assert pinned_cost(items) == pytest.approx(0.6, rel=1e-12)


def _manual_shares() -> dict[str, float]:
    shares = {}
    for item, _q, _part, gauss in workload.item_ids(EVERY_KIND, CENSUS):
        shares[item] = 0.001 if gauss else 0.05  # ρ for the Gaussian mean, ε otherwise
    return shares


@pytest.mark.parametrize("rule", ["basic", "advanced", "rdp", "zcdp"])
def test_manual_split_keeps_every_share_and_its_total_is_the_ledgers(rule: str) -> None:
    shares = _manual_shares()
    total = workload.manual_total(EVERY_KIND, CENSUS, 1e-6, rule, shares)
    p = workload.plan_manual(EVERY_KIND, CENSUS, 5.0, 1e-6, rule, shares)
    assert {a.id: a.theta for a in p.allocation.items} == shares
    spent = total_epsilon([s for _, s in p.allocation.spends()], rule, 1e-6)
    assert total == pytest.approx(spent, rel=1e-12) == pytest.approx(p.allocation.used_epsilon, rel=1e-12)


def test_manual_split_over_budget_is_refused_with_its_total() -> None:
    shares = _manual_shares()
    total = workload.manual_total(EVERY_KIND, CENSUS, 1e-6, "basic", shares)
    with pytest.raises(PlanError, match=rf"cost ε = {total:.6g} under the basic rule, more than the total 0.1"):
        workload.plan_manual(EVERY_KIND, CENSUS, 0.1, 1e-6, "basic", shares)


def test_manual_split_names_a_missing_share() -> None:
    shares = _manual_shares()
    del shares["age_q:quantile@0.9"]
    with pytest.raises(QueryError, match=r"type one for \['age_q:quantile@0.9'\]"):
        workload.plan_manual(EVERY_KIND, CENSUS, 5.0, 1e-6, "rdp", shares)


# --------------------------------------------------------------------------- PLAN.json both ways
def _doc(mode: str, **kw: Any) -> dict[str, Any]:
    qs = EVERY_KIND if mode != "target" else [
        q.replace(weight=None, target=t) for q, t in zip(EVERY_KIND, (
            200, 5e7, 3000, 300, 0.05, 0.05, 300, 0.05, 300, 300, 2e7, 5000, 0.05, 0.2), strict=True)]
    pins = kw.pop("pinned", _manual_shares() if mode == "manual" else None)
    return spec_document(CENSUS, 1.0, 1e-6, kw.pop("rule", "rdp"), mode, qs, pinned=pins, dataset_name="census",
                         **kw)


def _thetas(p: workload.Plan) -> dict[str, float]:
    return {a.id: a.theta for a in p.allocation.items}


@pytest.mark.parametrize("mode", ["weighted", "equal", "manual", "target"])
def test_plan_file_round_trip_plans_the_same(mode: str) -> None:
    extra: dict[str, Any] = {}
    if mode == "weighted":
        extra = {"pinned": {"people_65": 0.02, "age_q:quantile@0.1": 0.03},
                 "error_scales": workload.default_error_scales(EVERY_KIND, CENSUS)}
    doc = _doc(mode, **extra)
    first = build_plan(parse_plan_spec(doc))
    text = dump_plan_spec(doc)
    spec = loads_plan_spec(text)
    again = build_plan(spec)
    assert _thetas(again.plan) == _thetas(first.plan)  # exactly: floats are written in their shortest repr
    assert plan_hash(again.plan, spec.schema) == plan_hash(first.plan, CENSUS)
    assert parse_plan_spec(json.loads(dump_plan_spec(spec.to_dict()))) == spec  # the writer reads back equal
    if mode == "weighted":
        assert _thetas(again.plan)["people_65"] == 0.02 and _thetas(again.plan)["age_q:quantile@0.1"] == 0.03


@pytest.mark.parametrize("mode", ["weighted", "equal", "manual", "target"])
def test_cli_plan_on_the_file_gives_the_same_allocation(mode: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(mode)
    path = tmp_path / "PLAN.json"
    path.write_text(dump_plan_spec(doc))
    assert cli_main(["plan", "--spec", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = build_plan(parse_plan_spec(doc)).plan
    got = {q["id"]: q["epsilon"] for q in out["queries"]}
    assert got == {p.id: p.epsilon for p in expected.predictions}
    assert out["mode"] == mode


def test_cli_release_of_an_equal_plan_releases_exactly_the_equal_split(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``planner release`` pins what the parser resolved: the equal split, not an optimal one."""
    qs = [q for q in EVERY_KIND if not q.kind.value.startswith("grouped")]  # DuckDB: no grouped statistics yet
    doc = spec_document(CENSUS, 0.5, 1e-6, "rdp", "equal", qs, lifetime=(2.0, 1e-5), dataset_name="census")
    path = tmp_path / "PLAN.json"
    path.write_text(dump_plan_spec(doc))
    url = f"sqlite:///{tmp_path}/ledger.db"
    assert cli_main(["release", "--spec", str(path), "--data", str(CENSUS_CSV), "--ledger", url]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = workload.plan_equal(qs, CENSUS, 0.5, 1e-6, "rdp")
    assert out["plan_hash"] == plan_hash(expected, CENSUS)


def test_plan_file_pins_a_part_and_refuses_what_it_cannot_plan() -> None:
    doc = _doc("manual")
    q = next(d for d in doc["queries"] if d["id"] == "age_q")
    assert q["pinned"] == {"quantile@0.1": 0.05, "quantile@0.9": 0.05}
    del q["pinned"]["quantile@0.9"]
    with pytest.raises(PlanError, match=r"missing for 'age_q:quantile@0.9'"):
        parse_plan_spec(doc)
    t = _doc("target")
    t["queries"][0]["pinned"] = 0.1
    with pytest.raises(PlanError, match="'pinned' has no effect in target mode"):
        parse_plan_spec(t)
    with pytest.raises(PlanError, match="'mode' must be one of"):
        parse_plan_spec({**_doc("equal"), "mode": "optimal"})


def test_uploaded_plan_files_are_read_strictly() -> None:
    with pytest.raises(PlanError, match="names its schema by a path"):
        loads_plan_spec(json.dumps({**_doc("equal"), "schema": "census.schema.json"}))
    with pytest.raises(PlanError, match="not UTF-8"):
        loads_plan_spec(b'{"schema": "\xff"}')
    with pytest.raises(PlanError, match="twice"):
        loads_plan_spec('{"mode": "equal", "mode": "manual"}')
    with pytest.raises(PlanError, match="bytes; at most"):
        loads_plan_spec(b" " * (4 * 1024 * 1024 + 1))


def test_uploads_read_a_byte_order_mark_and_refuse_half_a_surrogate_pair() -> None:
    """Fuzzing (session 10): a file saved with a BOM loaded from disk but not as an upload;
    a \\ud83d escape alone parsed, planned, then crashed hashing and release (UnicodeEncodeError)."""
    doc = json.dumps(_doc("equal"))
    assert loads_plan_spec(b"\xef\xbb\xbf" + doc.encode()) == loads_plan_spec(doc)
    schema = json.dumps(_doc("equal")["schema"]).encode()
    assert Schema.from_json(b"\xef\xbb\xbf" + schema) == Schema.from_json(schema)
    first_id = _doc("equal")["queries"][0]["id"]
    half = doc.replace(f'"id": "{first_id}"', f'"id": "{first_id}\\ud83d"', 1)
    with pytest.raises(PlanError, match=r"field 'queries\[0\]\.id' .* unpaired UTF-16 surrogate"):
        loads_plan_spec(half)
    # both halves of the pair are one character, as any other
    pair = doc.replace(f'"id": "{first_id}"', f'"id": "{first_id}\\ud83d\\ude00"', 1)
    assert loads_plan_spec(pair).queries[0].id == first_id + "\U0001F600"
    with pytest.raises(SchemaError, match=r"field 'columns\[0\]\.\(a key\)'"):
        Schema.from_json('{"version": 1, "columns": [{"\\udc00": 1}]}')


def test_the_example_plan_file_still_plans() -> None:
    spec = load_plan_spec(ROOT / "examples" / "census_plan.json")
    assert spec.mode == "weighted" and build_plan(spec).plan.allocation.used_epsilon == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("mode", ["weighted", "equal", "manual", "target"])
def test_compare_spec_gives_every_rule(mode: str) -> None:
    spec = parse_plan_spec(_doc(mode))
    cmp = compare_spec(spec)
    assert set(cmp) == {r.value for r in CompositionRule}  # every rule, the optimal one included
    inforce = cmp["rdp"]
    assert isinstance(inforce, dict)
    assert inforce["used_epsilon"] == pytest.approx(build_plan(spec).plan.allocation.used_epsilon, rel=1e-9)
    if mode == "manual":  # the same shares under basic cost their sum of ε (by hand: ε shares + Gaussian ε)
        basic = cmp["basic"]
        assert isinstance(basic, dict)
        assert basic["used_epsilon"] == pytest.approx(workload.manual_total(
            spec.queries, CENSUS, 1e-6, "basic", spec.pinned), rel=1e-12)


# --------------------------------------------------------------------------- code export
def _run(script: Path, *args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PLANNER_HOME=str(home))
    env.pop("PLANNER_LEDGER_URL", None)
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_generated_code_carries_a_non_default_option() -> None:
    """The synthetic table's sampler="iid" (EVERY_KIND) is written into the script and the notebook,
    so they release what the plan says (the default, "stratified", would draw other rows)."""
    spec = parse_plan_spec(_doc("weighted"))
    assert "'sampler': 'iid'" in codegen.python_script(spec, str(CENSUS_CSV), "census (sample)", backend="pandas")
    assert "'sampler': 'iid'" in codegen.notebook_json(spec, str(CENSUS_CSV), "census (sample)")


@pytest.mark.parametrize("mode", ["weighted", "equal", "manual", "target"])
def test_generated_script_reproduces_the_plan(mode: str, tmp_path: Path) -> None:
    spec = parse_plan_spec(_doc(mode))
    script = tmp_path / "plan.py"
    script.write_text(codegen.python_script(spec, str(CENSUS_CSV), "census (sample)", backend="pandas"))
    res = _run(script, "--out", "out.json", cwd=tmp_path, home=tmp_path / "home")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    expected = build_plan(spec).plan
    assert out["plan_hash"] == plan_hash(expected, CENSUS)
    assert {q["id"]: q["epsilon"] for q in out["plan"]["queries"]} == {p.id: p.epsilon for p in expected.predictions}
    assert "±95% error" in res.stdout and "Plan only" in res.stdout
    assert (tmp_path / "accuracy.svg").read_text().startswith("<svg")


@pytest.mark.parametrize("name", ["sales 100%.csv", "q%(x)s.csv"])
def test_generated_script_help_survives_a_percent_in_the_file_name(name: str, tmp_path: Path) -> None:
    """Fuzzing (session 10): the data file's name went into an argparse help string, where
    '%' starts a format specifier, so `--help` crashed for an upload named 'sales 100%.csv'."""
    spec = parse_plan_spec(_doc("weighted"))
    script = tmp_path / "plan.py"
    script.write_text(codegen.python_script(spec, name, "census (sample)", backend="pandas"))
    res = _run(script, "--help", cwd=tmp_path, home=tmp_path / "home")
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"(default: {name})" in " ".join(res.stdout.split())


def test_generated_script_releases_the_plan_and_records_it(tmp_path: Path) -> None:
    spec = parse_plan_spec(_doc("equal", lifetime=(3.0, 1e-5)))
    script = tmp_path / "plan.py"
    script.write_text(codegen.python_script(spec, str(CENSUS_CSV), "census (sample)", backend="pandas"))
    url = f"sqlite:///{tmp_path}/ledger.db"
    res = _run(script, "--release", "--ledger", url, "--out", "out.json", cwd=tmp_path, home=tmp_path / "home")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    expected = build_plan(spec).plan
    assert out["release"]["plan_hash"] == out["plan_hash"] == plan_hash(expected, CENSUS)
    assert {q["query"] for q in out["release"]["queries"]} == {q.id for q in EVERY_KIND}
    assert '"epsilon_total": 3.0' in res.stdout  # the ledger's state printed after the release
    again = _run(script, "--release", "--ledger", url, "--out", "again.json", cwd=tmp_path, home=tmp_path / "home")
    assert again.returncode == 0 and json.loads((tmp_path / "again.json").read_text())["release"]["status"] == "reused"


def test_generated_script_refuses_a_plan_its_backend_cannot_compute_before_spending(tmp_path: Path) -> None:
    # a median on candidates 7 apart over [0, 250000]: 35,715 candidates, the last interval
    # shorter, which the SQL backends refuse (more than 2000 irregular edges); pandas computes it
    qs = [Query("people", "count", None, "laplace"), Query("income_median", "median", "income", "exponential",
                                                          step=7.0)]
    spec = parse_plan_spec(spec_document(CENSUS, 1.0, 1e-6, "rdp", "equal", qs, dataset_name="census",
                                         lifetime=(3.0, 1e-5)))
    script = tmp_path / "plan.py"
    script.write_text(codegen.python_script(spec, str(CENSUS_CSV), "census (sample)", backend="duckdb"))
    url = f"sqlite:///{tmp_path}/ledger.db"
    res = _run(script, "--release", "--ledger", url, cwd=tmp_path, home=tmp_path / "home")
    assert res.returncode == 2 and "irregular" in res.stderr and "Traceback" not in res.stderr
    # refused before anything was recorded: no dataset registered, nothing spent
    from planner.ledger import Ledger

    led = Ledger(url)
    try:
        assert led.datasets() == []
    finally:
        led.close()


def test_notebook_is_valid_and_its_cells_reproduce_the_plan(tmp_path: Path) -> None:
    import nbformat

    spec = parse_plan_spec(_doc("manual"))
    text = codegen.notebook_json(spec, str(CENSUS_CSV), "census (sample)")
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    code = "\n\n".join(c.source for c in nb.cells if c.cell_type == "code" and "IPython" not in c.source)
    ns: dict[str, Any] = {}
    exec(compile(code, "notebook", "exec"), ns)  # the cells in order, in one namespace (RELEASE = False)
    assert plan_hash(ns["plan"], CENSUS) == plan_hash(build_plan(spec).plan, CENSUS)
    assert ns["chart_svg"].startswith("<svg") and ns["RELEASE"] is False


def test_generated_code_holds_no_private_value() -> None:
    spec = parse_plan_spec(_doc("weighted"))
    text = codegen.python_script(spec, "census.csv", 'census"; import os; os.system("x")')
    assert 'import os; os.system' not in text.replace("_", " ")  # the name cannot break out of its literal
    compile(text, "plan.py", "exec")
    assert "6a8c0fd9" not in text  # no fingerprint of the data


# --------------------------------------------------------------------------- report
def _released(tmp_path: Path) -> tuple[Any, Any, Any]:
    from planner.data.backends import make_backend
    from planner.ledger import Ledger
    from planner.release import release

    qs = EVERY_KIND[:8]
    spec = parse_plan_spec(spec_document(CENSUS, 1.0, 1e-6, "rdp", "weighted", qs, dataset_name="census"))
    plan = build_plan(spec).plan
    led = Ledger(f"sqlite:///{tmp_path}/l.db")
    res = release(plan, CENSUS, make_backend("pandas", str(CENSUS_CSV), CENSUS), led, "fp-census", "census",
                  total_epsilon=3.0, total_delta=1e-5)
    return spec, res, led


def test_report_is_self_contained_and_says_what_the_issue_asks(tmp_path: Path) -> None:
    spec, res, led = _released(tmp_path)
    status = led.status(res.fingerprint)
    html = report.plan_report(spec, status=status, history=led.history(res.fingerprint), release=res)
    # no network: no script, no external resource (the SVG namespace URIs are identifiers, never fetched)
    assert "<script" not in html.lower() and "@import" not in html
    assert not re.search(r'(?:src|href)\s*=\s*["\']?(?:https?:)?//', html)
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", html)
    assert html.count("<svg") >= 5  # ε per answer, accuracy, rules, answers, ledger
    for q in spec.queries:
        assert q.id in html
    for p in res.rows():  # every released value
        if isinstance(p["value"], float):
            assert f"{p['value']:,.4g}" in html
    assert "Rényi differential privacy (RDP) (in force)" in html  # the rule registry's full name
    # every rule by its full name, never its code (the report once printed a bare "pld")
    visible = re.sub(r"<[^>]+>", " ", html)
    assert "the optimal accountant: privacy loss distributions (PLD)" in visible
    assert not re.search(r"\b(pld|rdp|zcdp)\b", visible)
    assert "Aurélien Garivier, <i>How to learn while respecting individual privacy?" in html
    assert "e<sup>ε</sup>" in html and "δ = 1e-06" in html
    assert f"{status.epsilon_total:,.4g}" in html and "Release #" in html
    assert "fp-census" not in html and res.fingerprint not in html  # no key of the data


def test_plan_report_before_any_release_says_so() -> None:
    spec = parse_plan_spec(_doc("equal"))
    html = report.plan_report(spec)
    assert "Nothing has been released by this plan yet" in html and "No lifetime budget is registered" in html
    assert "an equal share for every answer" in html


def test_report_escapes_names() -> None:
    qs = [Query("<b>x</b>", "count", None, "laplace")]
    spec = parse_plan_spec(spec_document(CENSUS, 1.0, 0.0, "basic", "weighted", qs, dataset_name="<script>"))
    html = report.plan_report(spec)
    assert "<script>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html


@pytest.mark.parametrize("column", ["income\n(EUR)", "income\r\n(EUR)", "income\u2028(EUR)"])
def test_a_line_break_in_a_column_name_keeps_the_report_and_its_charts(column: str) -> None:
    """Fuzzing (session 10): a numeric column named with a line break (legal in a quoted CSV
    header) broke every chart: Vega-Lite copies an axis title into an expression, where a
    raw line break is a parse error, so the report (and the generated script) failed."""
    doc = {"schema": {"version": 1, "relation": "add_remove", "public_n": 1000,
                      "privacy_unit": {"column": None, "max_rows": 1},
                      "columns": [{"name": column, "kind": "numeric", "lower": 0, "upper": 100,
                                   "missing": {"action": "drop"}}]},
           "budget": {"epsilon": 1.0, "delta": 1e-6, "composition": "basic"},
           "queries": [{"id": "s", "kind": "sum", "column": column, "mechanism": "laplace"},
                       {"id": "m", "kind": "mean", "column": column, "mechanism": "laplace"}]}
    spec = parse_plan_spec(doc)
    assert {p.unit for p in build_plan(spec).plan.predictions} == {"income (EUR) units"}
    html = report.plan_report(spec)
    assert "income (EUR) units" in html and "<svg" in html


def test_report_chart_failure_is_a_planner_error() -> None:
    with pytest.raises(PlannerError, match="could not be drawn"):
        report.render_svg({"mark": "nonsense-mark", "data": {"values": []}})


def test_generated_script_releases_after_the_install_it_names_without_duckdb(tmp_path: Path) -> None:
    """Issue 29: the script the app generates (where DuckDB computed the aggregates) runs its
    release after ``pip install -e .``, which does not install DuckDB: here DuckDB cannot be
    imported at all (a finder refuses it), as on such an install."""
    block = tmp_path / "noduck"
    block.mkdir()
    (block / "sitecustomize.py").write_text(
        "import importlib.util, sys\n"
        "_real = importlib.util.find_spec\n"
        "def _find_spec(name, package=None):  # as on an install without DuckDB\n"
        "    return None if name.split('.')[0] == 'duckdb' else _real(name, package)\n"
        "importlib.util.find_spec = _find_spec\n"
        "class _NoDuck:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'duckdb':\n"
        "            raise ModuleNotFoundError(\"No module named 'duckdb'\", name='duckdb')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _NoDuck())\n")
    spec = parse_plan_spec(_doc("weighted", lifetime=(3.0, 1e-5)))
    text = codegen.python_script(spec, str(CENSUS_CSV), "census (sample)", backend="duckdb")
    assert "pip install -e ." in text  # the install it names
    script = tmp_path / "plan.py"
    script.write_text(text)
    env = dict(os.environ, PYTHONPATH=f"{block}{os.pathsep}{ROOT}", PLANNER_HOME=str(tmp_path / "home"))
    env.pop("PLANNER_LEDGER_URL", None)
    res = subprocess.run([sys.executable, str(script), "--release", "--ledger", f"sqlite:///{tmp_path}/l.db",
                          "--out", "out.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["release"]["status"] == "done" and out["release"]["plan_hash"] == out["plan_hash"]
