"""Issue 29: ε in context — the same engine words in the HTML report and the command line's
output; rule names never as a bare acronym; no Python list in a plan file's messages."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from planner.core.errors import PlanError
from planner.outputs import report, words
from planner.planning.plan_spec import load_plan_spec, parse_plan_spec

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "examples" / "census_plan.json"


def test_epsilon_meaning_states_the_factor_and_the_belief_bound() -> None:
    text = words.epsilon_meaning(1.0)
    assert "2.72 times" in text  # e¹ = 2.718…
    # a 1% guess rises to at most 0.01e/(0.99 + 0.01e) = 2.67% (by hand), a 50% guess to e/(1 + e) = 73.1%
    assert "2.67%" in text and "73.1%" in text
    assert words.belief_after(0.5, math.log(3)) == pytest.approx(0.75)


def test_the_census_budget_is_converted_by_the_planners_own_conversion() -> None:
    from planner.privacy.accountants.zcdp import zcdp_to_approx_epsilon

    eps = float(zcdp_to_approx_epsilon(2.63, 1e-10))
    assert f"ρ = 2.63, about ε = {eps:.1f} at δ = 10⁻¹⁰" in words.DEPLOYED[0]


def test_the_report_carries_the_same_words_and_no_bare_rule_acronym() -> None:
    spec = load_plan_spec(str(PLAN))
    html = report.plan_report(spec)
    assert words.epsilon_meaning(spec.epsilon).split(",")[0] in html
    assert "Abowd" in html and "local differential" in html
    text = re.sub(r"<[^>]+>", " ", html)
    assert not re.search(r"(^|[\s(,])(pld|rdp|zcdp)([\s),.;]|$)", text), \
        re.search(r".{40}(?:pld|rdp|zcdp).{40}", text)


def test_the_cli_release_output_carries_the_context(tmp_path: Path) -> None:
    from contextlib import redirect_stdout
    from io import StringIO

    from planner.cli import main

    buf = StringIO()
    with redirect_stdout(buf):
        rc = main(["release", "--spec", str(PLAN), "--data", str(ROOT / "data" / "census.csv"), "--backend",
                   "pandas", "--ledger", f"sqlite:///{tmp_path}/l.db"])
    assert rc == 0
    out = json.loads(buf.getvalue())
    assert out["context"]["epsilon_meaning"] == words.epsilon_meaning(1.0)
    assert out["context"]["rule"] == words.rule_name("rdp") and "Rényi" in out["context"]["rule"]
    assert all(q["verdict"]["grade"] in ("usable", "rough", "mostly noise", "not judged") for q in out["queries"])


def test_plan_file_messages_hold_no_python_list() -> None:
    doc = json.loads(PLAN.read_text())
    doc["schema"] = json.loads((ROOT / "data" / "census.schema.json").read_text())
    for bad in ({**doc, "colour": 1}, {**doc, "mode": "optimal"}, {**doc, "budget": {**doc["budget"], "composition": "x"}}):
        with pytest.raises(PlanError) as exc:
            parse_plan_spec(bad)
        assert "[" not in str(exc.value) and "]" not in str(exc.value), str(exc.value)
