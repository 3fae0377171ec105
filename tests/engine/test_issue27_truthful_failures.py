"""Issue 27, findings 4 and 7: every error path says what happened to the spend, and numeric
extremes end with exit 2 and a message.

Finding 4 (a failure message that is not true). A release whose answers cannot be stored
because the disk is full, after its spend was committed, exits 2 today saying "Nothing was
changed by this call; try again" (``Ledger._session``'s message for any
``OperationalError``), though the spend is recorded and the release ends "spent, no
answers" (README, *The privacy ledger*). The disk is filled for real: the command runs in a
child process whose files are capped with ``RLIMIT_FSIZE``
(``ledger_workers/disk_full_worker.py``), at a size that the spend's transaction fits in
and the answers' does not. The answers are a 2,000-bin histogram (about 70 kB of JSON,
written twice: the answers table and the journal), the cap 96 kB, and the dataset is
registered beforehand by an uncapped release, so the capped process writes only the
spend (a few pages of the WAL) and then the answers.

Finding 7 (extreme numbers as internal errors). ``planner compose`` with a Gaussian of
σ = 1e-300 and ``planner dpsgd --sigma 1e-300`` exit 3 ("internal error
(ZeroDivisionError)") today; the README (*Command line*) gives exit 2 and a message to an
input the planner cannot use, and the engine's messages name the parameter
(``planner/core/errors.py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from planner.cli import main
from planner.ledger import Ledger, ReleaseStatus

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().parent / "ledger_workers" / "disk_full_worker.py"
BINS = 2000
CAP_BYTES = 96 * 1024
LEASE = 1.0


def _write_plan(folder: Path, name: str, query: dict[str, Any]) -> Path:
    cats = [f"c{i:05d}" for i in range(BINS)]
    doc = {
        "schema": {"version": 1, "relation": "add_remove", "public_n": 400,
                   "privacy_unit": {"column": "pid", "max_rows": 1},
                   "columns": [{"name": "pid", "kind": "identifier"},
                               {"name": "cat", "kind": "categorical", "categories": cats, "other_bin": False,
                                "missing": {"action": "drop"}}]},
        "budget": {"epsilon": 1.0, "delta": 0.0, "composition": "basic"},
        "lifetime": {"epsilon": 3.0, "delta": 0.0},
        "dataset_name": "wide",
        "queries": [query],
    }
    path = folder / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _env(home: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""), PYTHONDONTWRITEBYTECODE="1",
               PLANNER_HOME=home, PLANNER_LEASE_SECONDS=str(LEASE))
    env.pop("PLANNER_DEBUG", None)
    return env


@pytest.mark.fault
def test_a_full_disk_after_the_spend_says_the_spend_was_recorded(tmp_path: Path) -> None:
    data = tmp_path / "wide.csv"
    data.write_text("pid,cat\n" + "".join(f"p{i},c{(i * 7) % BINS:05d}\n" for i in range(400)), encoding="utf-8")
    count = _write_plan(tmp_path, "count.json", {"id": "n", "kind": "count", "mechanism": "laplace"})
    hist = _write_plan(tmp_path, "hist.json", {"id": "h", "kind": "histogram", "column": "cat", "mechanism": "laplace"})
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    env = _env(os.environ["PLANNER_HOME"])

    def planner(*args: str, cap: int | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, str(WORKER), str(cap), *args] if cap else [sys.executable, "-m", "planner", *args]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)

    first = planner("release", "--spec", str(count), "--data", str(data), "--ledger", url)
    assert first.returncode == 0, first.stderr  # the dataset is registered, ε = 1 spent
    key = json.loads(first.stdout)["dataset"]["fingerprint"]

    full = planner("release", "--spec", str(hist), "--data", str(data), "--ledger", url, cap=CAP_BYTES)
    assert full.returncode == 2, (full.returncode, full.stdout[:300], full.stderr[-800:])
    assert "Traceback" not in full.stderr
    time.sleep(LEASE + 0.5)  # the capped process is gone: its lease has expired
    led = Ledger(url)
    try:
        records = led.releases(key)
        # the fault struck after the spend was committed (else this case tests nothing)
        assert len(records) == 2, "the spend itself was not recorded: the cap is too small for this check"
        assert records[1].status is ReleaseStatus.SPENT_NO_ANSWERS
        assert led.status(key).epsilon_spent == pytest.approx(2.0)  # 1 + 1, basic rule (hand sum)
    finally:
        led.close()

    msg = json.loads(full.stderr.strip().splitlines()[-1])["error"]
    assert "Nothing was changed" not in msg and "try again" not in msg, msg
    assert re.search(r"spen[dt]", msg) and re.search(r"recorded|counted|stays spent|was spent", msg), msg
    assert re.search(r"no answers|spent_no_answers|not (been )?stored|could not be stored|lost", msg), msg

    # and a retry is refused as the README says (the plan is never sampled twice)
    again = planner("release", "--spec", str(hist), "--data", str(data), "--ledger", url)
    assert again.returncode == 2, again.stdout[:300]
    assert "answers were lost" in json.loads(again.stderr)["error"]


# ------------------------------------------------------------------ numeric extremes


@pytest.mark.hostile
@pytest.mark.parametrize("mechanism", [
    {"mechanism": "gaussian", "sigma": 1e-300, "sensitivity": 1.0},
    {"mechanism": "gaussian", "sigma": 5e-324, "sensitivity": 1.0},
    {"mechanism": "gaussian", "sigma": 1e-300, "sensitivity": 1.0, "count": 10},
    {"mechanism": "gaussian", "sigma": 1e-300, "sensitivity": 1.0, "sampling_rate": 0.01},
    {"mechanism": "discrete_gaussian", "sigma": 1e-300, "sensitivity": 1},
], ids=["gaussian", "gaussian_subnormal", "gaussian_x10", "gaussian_sampled", "discrete_gaussian"])
def test_compose_with_a_vanishing_sigma_is_a_message(mechanism: dict[str, Any], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANNER_DEBUG", raising=False)
    spec = tmp_path / "mechs.json"
    spec.write_text(json.dumps({"delta": 1e-6, "mechanisms": [mechanism]}))
    code = main(["compose", "--spec", str(spec)])
    _, err = capsys.readouterr()
    assert code == 2, err
    msg = json.loads(err)["error"]
    assert "internal error" not in msg
    assert re.search(r"sigma|σ", msg), f"the message does not name σ: {msg}"


@pytest.mark.hostile
@pytest.mark.parametrize("extra", [
    ["--epochs", "1"], ["--steps", "10"], ["--epochs", "1", "--accountant", "rdp"],
    ["--epochs", "1", "--scheme", "without_replacement"], ["--target-epsilon", "2", "--solve", "epochs"],
], ids=["epochs", "steps", "rdp", "without_replacement", "solve_epochs"])
def test_dpsgd_with_a_vanishing_sigma_is_a_message(extra: list[str], capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANNER_DEBUG", raising=False)
    code = main(["dpsgd", "--n", "60000", "--batch", "256", "--sigma", "1e-300", "--delta", "1e-5", *extra])
    out, err = capsys.readouterr()
    assert code == 2, (code, out[:300], err[-300:])
    msg = json.loads(err.strip().splitlines()[-1])["error"]
    assert "internal error" not in msg
    assert re.search(r"sigma|σ", msg), f"the message does not name σ: {msg}"
