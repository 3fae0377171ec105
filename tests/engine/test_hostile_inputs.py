"""Hostile plan and mechanism specs, budget values and command lines (issue 16, finding 8):
each gets a clear message naming the field, the constraint and the fix: no traceback, no
hang, no unbounded memory. The corpus is kept in tests/fixtures/hostile_specs
(make_corpus.py writes it; expected.json gives each file's message fragment).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from planner.cli import main
from planner.core.errors import BudgetError, PlannerError
from planner.core.exports import csv_text, safe_cell
from planner.core.strict_json import MAX_SPEC_BYTES, read_json_file
from planner.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "hostile_specs"
EXPECTED: dict[str, str] = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.hostile
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_spec_corpus_every_file_gets_a_clear_error(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    command = "plan" if name.startswith("plan_") else "compose"
    code, out, err = _cli([command, "--spec", str(CORPUS / name)], capsys)
    assert code == 2, (out[:300], err[:300])
    message = json.loads(err)["error"]
    assert EXPECTED[name] in message, message
    assert "Traceback" not in err and len(message) < 2000


def test_hostile_corpus_is_complete() -> None:
    files = {p.name for p in CORPUS.iterdir() if p.name.startswith(("plan_", "mech_"))}
    assert files == set(EXPECTED)  # regenerate with make_corpus.py after adding a case


# ------------------------------------------------------------------ not regular files


@pytest.mark.hostile(6)
def test_hostile_spec_paths_that_are_not_regular_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(tmp_path / "loop.json")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_SPEC_BYTES + 1))
    cases = {
        "/dev/zero": "device",
        str(tmp_path): "directory",
        str(loop): "cannot open",
        str(tmp_path / "missing.json"): "cannot open",
        str(big): "at most",
    }
    for path, frag in cases.items():
        t0 = time.monotonic()
        code, _, err = _cli(["plan", "--spec", path], capsys)
        assert code == 2 and frag in json.loads(err)["error"], (path, err)
        assert time.monotonic() - t0 < 10
    # the reader refuses before reading: /dev/zero would otherwise never end
    with pytest.raises(PlannerError, match="device"):
        read_json_file("/dev/zero", "plan")


@pytest.mark.hostile
def test_hostile_fifo_spec_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)  # nobody ever writes to it: a blocking open would hang forever
    res = subprocess.run([sys.executable, "-m", "planner", "plan", "--spec", str(fifo)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert res.returncode == 2 and "FIFO" in json.loads(res.stderr)["error"]


# ------------------------------------------------------------------ budget values in the engine


@pytest.mark.hostile(11)
def test_hostile_budget_values_in_the_ledger_are_strict(tmp_path: Path) -> None:
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    bad: list[tuple[Any, Any, str]] = [
        (True, 0.0, "boolean"), ("1", 0.0, "string"), (1e308, 0.0, "±2**53"), (10**400, 0.0, "±2**53"),
        (float("inf"), 0.0, "finite"), (float("nan"), 0.0, "finite"), (2000.0, 0.0, "at most 1000"),
        (1.0, True, "boolean"), (1.0, "0", "string"),
    ]
    for eps, dlt, frag in bad:
        with pytest.raises(BudgetError, match=frag.replace("*", r"\*")):
            led.register_dataset("d", "x", eps, dlt, "basic")
    assert led.datasets() == []  # nothing registered
    ds = led.register_dataset("d", "x", 1.0, 0.0, "basic")
    with pytest.raises(BudgetError, match="boolean"):
        led.raise_budget(ds.fingerprint, True, 0.0, reason="r")
    with pytest.raises(BudgetError, match="string"):
        led.grant(ds.fingerprint, "ana", "analyst", epsilon="0.5")  # type: ignore[arg-type]
    assert led.status(ds.fingerprint).releases == 0


# ------------------------------------------------------------------ the CLI's output path


@pytest.mark.fault
def test_hostile_stdout_closed_early_release_completes_quietly(tmp_path: Path) -> None:
    """`planner release … | head -c0`: the release completes and is recorded, the CLI
    exits 0 without a BrokenPipeError traceback."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    err = tmp_path / "stderr.txt"
    cmd = (f"{sys.executable} -m planner release --spec {ROOT / 'examples/census_plan.json'} "
           f"--data {ROOT / 'data/census.csv'} --ledger {url} --backend pandas 2>{err} | head -c0; "
           "exit ${PIPESTATUS[0]}")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=env, check=False)
    assert res.returncode == 0, err.read_text()
    assert err.read_text() == ""  # quiet: no traceback, no message
    led = Ledger(url)
    (ds,) = led.datasets()
    (rec,) = led.releases(ds.fingerprint)
    assert str(rec.status) == "done" and rec.answers


@pytest.mark.fault
def test_hostile_internal_error_prints_no_details(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import planner.planning.plan_spec as ps

    def boom(path: str) -> Any:
        raise TypeError("secret value 41.7 in a traceback")

    monkeypatch.setattr(ps, "plan_command", boom)
    monkeypatch.delenv("PLANNER_DEBUG", raising=False)
    code, _, err = _cli(["plan", "--spec", "x.json"], capsys)
    assert code == 3
    msg = json.loads(err)["error"]
    assert "TypeError" in msg and "41.7" not in msg and "Traceback" not in err


@pytest.mark.hostile(5)
def test_hostile_cli_arguments_give_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["release"], ["ledger", "wipe"], ["--nope"], ["grant", "--dataset", "x"], []):
        code = main(argv)
        capsys.readouterr()
        assert code == 2


def test_hostile_grant_epsilon_from_the_command_line_is_strict(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    led = Ledger(url)
    ds = led.register_dataset("d", "x", 1.0, 0.0, "basic")
    led.close()
    for value, frag in (("true", "boolean"), ('"1"', "string"), ("1e400", "beyond"), ("abc", "not valid JSON")):
        code, _, err = _cli(["grant", "--ledger", url, "--dataset", ds.fingerprint, "--to", "ana",
                             "--role", "analyst", "--epsilon", value], capsys)
        assert code == 2 and frag in json.loads(err)["error"], err


# ------------------------------------------------------------------ spreadsheet-safe CSV


@pytest.mark.hostile(7)
def test_hostile_csv_cells_cannot_become_formulas() -> None:
    text = csv_text(["label", "value"], [
        ["=HYPERLINK(\"http://x\",\"y\")", -3.5], ["+1+cmd", 2], ["-2+3", -1], ["@SUM(A1)", 0.0],
        ["\tx", 1], ["\rx", 1], ["-7", -7],
    ])
    lines = text.splitlines()
    assert lines[1].startswith("\"'=HYPERLINK")  # the apostrophe makes it text
    assert lines[2] == "'+1+cmd,2" and lines[3] == "'-2+3,-1" and lines[4] == "'@SUM(A1),0.0"
    assert lines[-1] == "-7,-7"  # numbers (and numeric text) stay numbers
    assert safe_cell(-3.5) == -3.5 and safe_cell("ok") == "ok"


def test_hostile_release_csv_escapes_category_labels() -> None:
    from planner.planning.statistics.base import AnswerRow
    from planner.release import QueryAnswer, ReleaseResult

    ans = QueryAnswer(query_id="=cmd", kind="histogram", mechanism="discrete_laplace",
                      answer={"labels": ["=1+1", "North"], "counts": [-3, 12]}, epsilon=0.5, delta=0.0,
                      rho=0.125, opendp=(), predictions=(), schema_hash="s",
                      rows=(AnswerRow("", "=1+1", -3), AnswerRow("", "North", 12)))
    res = ReleaseResult("ds-x", "n", "p", "s", "basic", "done", 1, (ans,), 1.0, 0.0, 0.5, 0.5)  # type: ignore[arg-type]
    rows = res.to_csv().splitlines()
    assert rows[1].startswith("'=cmd,") and ",'=1+1,-3," in rows[1]
    assert ",North,12," in rows[2]
