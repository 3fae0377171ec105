"""The privacy ledger: budget checks, spends, reuse, export, storage settings.

Expected ε values are hand sums (basic composition adds ε; docs/engineering.md §5 order of
operations) or the accountant's own ``total_epsilon`` on the same spends, which is
what the ledger must agree with.
"""

from __future__ import annotations

import json
import math
import runpy
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateTable
from sqlmodel import SQLModel

from planner.core.errors import BudgetError, BudgetExceededError, LedgerError
from planner.ledger import (
    ENV_HOME,
    ENV_URL,
    LEDGER_METADATA,
    Ledger,
    ReleaseStatus,
    default_ledger_url,
)
from planner.ledger.tables import HeadRow
from planner.privacy.accounting import CompositionRule, Spend, standalone_epsilon, total_epsilon
from planner.privacy.events import GaussianEvent, LaplaceEvent, PureEvent

FP = "sha256:dataset-a"


def pure(eps: float) -> Spend:
    return Spend(event=PureEvent(eps), epsilon=eps, delta=0.0)


def laplace(eps: float) -> Spend:
    return Spend(event=LaplaceEvent(1.0 / eps), epsilon=eps, delta=0.0)


def gaussian(noise_multiplier: float, delta: float) -> Spend:
    ev = GaussianEvent(noise_multiplier)
    return Spend(event=ev, epsilon=standalone_epsilon(ev, delta), delta=delta)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def ledger(url: str) -> Any:
    led = Ledger(url)
    led.register_dataset(FP, "survey", epsilon=1.0, delta=1e-6, rule="basic")
    yield led
    led.close()


class Sampler:
    """A sample() that counts its calls."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls = 0

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        return self.answers


# ----------------------------------------------------------------- release basics


def test_ledger_release_records_spend_and_answers(ledger: Ledger) -> None:
    sampler = Sampler({"count": 1041.0, "mean": 37.2})
    rec = ledger.release(
        FP, "plan-1", "schema-1", [("count", pure(0.3)), ("mean", laplace(0.2))], sampler
    )
    assert rec.status is ReleaseStatus.DONE
    assert rec.answers == {"count": 1041.0, "mean": 37.2}
    assert sampler.calls == 1
    assert [s.query_id for s in rec.spends] == ["count", "mean"]
    st_ = ledger.status(FP)
    # basic composition: 0.3 + 0.2 (hand sum)
    assert st_.epsilon_spent == pytest.approx(0.5, rel=1e-12)
    assert st_.epsilon_remaining == pytest.approx(0.5, rel=1e-12)
    assert st_.releases == 1
    assert st_.rule is CompositionRule.BASIC
    (stored,) = ledger.releases(FP)
    assert stored.answers == rec.answers
    assert stored.spends[1].event == LaplaceEvent(5.0)
    assert stored.spends[0].rho == pytest.approx(0.3**2 / 2)  # ε-DP ⇒ ε²/2-zCDP
    assert ledger.integrity_check() == []


def test_ledger_release_same_plan_reuses_answers_without_sampling(ledger: Ledger) -> None:
    first = ledger.release(FP, "plan-1", "schema-1", [("q", pure(0.4))], Sampler({"q": 7}))
    again = Sampler({"q": 999})
    second = ledger.release(FP, "plan-1", "schema-1", [("q", pure(0.4))], again)
    assert again.calls == 0
    assert second.status is ReleaseStatus.REUSED
    assert second.answers == {"q": 7}
    assert second.release_id == first.release_id
    assert ledger.status(FP).epsilon_spent == pytest.approx(0.4)  # charged once
    assert ledger.status(FP).releases == 1


def test_ledger_release_same_hash_different_queries_is_refused(ledger: Ledger) -> None:
    ledger.release(FP, "plan-1", "schema-1", [("q", pure(0.1))], Sampler({"q": 1}))
    with pytest.raises(LedgerError, match="plan hash must"):
        ledger.release(FP, "plan-1", "schema-1", [("other", pure(0.1))], Sampler({"other": 1}))


def test_ledger_release_over_budget_raises_and_records_nothing(ledger: Ledger) -> None:
    ledger.release(FP, "plan-1", "s", [("q", pure(0.7))], Sampler({"q": 1}))
    sampler = Sampler({"q": 2})
    with pytest.raises(BudgetExceededError) as info:
        ledger.release(FP, "plan-2", "s", [("q", pure(0.5))], sampler)
    msg = str(info.value)
    # requested 0.5, remaining 0.3, short by 0.2 (hand arithmetic); plain words, no hashes
    assert "ε = 0.5 " in msg and "ε = 0.3 " in msg and "short by 0.2" in msg
    assert "Lower this release's ε (the Planner can pick the most that fits) or drop queries" in msg
    assert "plan-2" not in msg and FP not in msg
    assert sampler.calls == 0
    assert ledger.status(FP).releases == 1
    assert ledger.status(FP).epsilon_spent == pytest.approx(0.7)


def test_ledger_release_exact_fit_allowed_within_float_noise(url: str) -> None:
    led = Ledger(url)
    led.register_dataset("fp", "x", epsilon=0.3, delta=0.0, rule="basic")
    # 0.1 + 0.2 = 0.30000000000000004 > 0.3 by 5.6e-17: float noise, within 1e-12 relative
    led.release("fp", "a", "s", [("q1", pure(0.1)), ("q2", pure(0.2))], Sampler({}))
    assert led.status("fp").epsilon_remaining <= 0.0
    with pytest.raises(BudgetExceededError):
        led.release("fp", "b", "s", [("q", pure(1e-9))], Sampler({}))


def test_ledger_release_beyond_tolerance_is_refused(url: str) -> None:
    led = Ledger(url)
    led.register_dataset("fp", "x", epsilon=1.0, delta=0.0, rule="basic")
    with pytest.raises(BudgetExceededError):
        led.release("fp", "a", "s", [("q", pure(1.0 + 1e-9))], Sampler({}))
    led.release("fp", "b", "s", [("q", pure(1.0))], Sampler({}))


def test_ledger_sample_error_keeps_spend_and_never_resamples(ledger: Ledger) -> None:
    def boom() -> dict[str, Any]:
        raise RuntimeError("opendp failed")

    with pytest.raises(RuntimeError, match="opendp failed"):
        ledger.release(FP, "plan-1", "s", [("q", pure(0.25))], boom)
    (rec,) = ledger.releases(FP)
    assert rec.status is ReleaseStatus.SPENT_NO_ANSWERS
    assert rec.answers is None
    assert ledger.status(FP).epsilon_spent == pytest.approx(0.25)  # never refunded
    assert ledger.status(FP).releases_without_answers == 1
    sampler = Sampler({"q": 1})
    with pytest.raises(LedgerError, match="answers were lost") as info:
        ledger.release(FP, "plan-1", "s", [("q", pure(0.25))], sampler)
    assert "will not be sampled again" in str(info.value)
    assert sampler.calls == 0
    assert ledger.status(FP).epsilon_spent == pytest.approx(0.25)


def test_ledger_unserialisable_answers_keep_spend(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="not JSON values"):
        ledger.release(FP, "plan-1", "s", [("q", pure(0.25))], lambda: {"q": object()})  # type: ignore[dict-item]
    assert ledger.releases(FP)[0].status is ReleaseStatus.SPENT_NO_ANSWERS
    assert ledger.status(FP).epsilon_spent == pytest.approx(0.25)


def test_ledger_pending_release_of_live_sampler_is_not_marked_lost(
    ledger: Ledger, url: str
) -> None:
    seen: dict[str, Any] = {}

    def sample() -> dict[str, Any]:
        seen["status"] = ledger.releases(FP)[0].status
        other = Ledger(url)  # a new open runs repair(): must leave a live release alone
        seen["repaired"] = other.repair()
        seen["other_status"] = other.releases(FP)[0].status
        other.close()
        return {"q": 3}

    rec = ledger.release(FP, "plan-1", "s", [("q", pure(0.1))], sample)
    assert seen == {
        "status": ReleaseStatus.PENDING,
        "repaired": 0,
        "other_status": ReleaseStatus.PENDING,
    }
    assert rec.status is ReleaseStatus.DONE


def test_ledger_release_validates_input(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="not in the ledger"):
        ledger.release("unknown", "p", "s", [("q", pure(0.1))], Sampler({}))
    with pytest.raises(LedgerError, match="at least one spend"):
        ledger.release(FP, "p", "s", [], Sampler({}))
    with pytest.raises(LedgerError, match="twice"):
        ledger.release(FP, "p", "s", [("q", pure(0.1)), ("q", pure(0.1))], Sampler({}))
    with pytest.raises(LedgerError, match="plan_hash"):
        ledger.release(FP, "", "s", [("q", pure(0.1))], Sampler({}))
    assert ledger.status(FP).releases == 0


# ----------------------------------------------------------------- composition


def test_ledger_rdp_composes_later_releases_with_earlier_ones(url: str) -> None:
    led = Ledger(url)
    delta = 1e-6
    led.register_dataset("fp", "x", epsilon=10.0, delta=delta, rule=CompositionRule.RDP)
    g1 = gaussian(3.0, 5e-7)
    ev2 = GaussianEvent(4.0, discrete=True)
    g2 = Spend(event=ev2, epsilon=standalone_epsilon(ev2, 5e-7), delta=5e-7)
    led.release("fp", "a", "s", [("q1", g1)], Sampler({"q1": 1}))
    led.release("fp", "b", "s", [("q2", g2)], Sampler({"q2": 2}))
    spent = led.status("fp").epsilon_spent
    # the accountant on both events at once (the stored event JSON round-trips)
    expected = total_epsilon([g1, g2], CompositionRule.RDP, delta)
    assert spent == pytest.approx(expected, rel=1e-12)
    separately = total_epsilon([g1], CompositionRule.RDP, delta) + total_epsilon(
        [g2], CompositionRule.RDP, delta
    )
    assert spent < separately  # composing across releases is tighter than adding
    # a fresh Ledger object reports the same number
    assert Ledger(url).status("fp").epsilon_spent == spent


def test_ledger_history_is_cumulative_in_time_order(ledger: Ledger) -> None:
    for i, eps in enumerate([0.1, 0.2, 0.3]):
        ledger.release(FP, f"plan-{i}", "s", [("q", pure(eps))], Sampler({"q": i}))
    hist = ledger.history(FP)
    assert [h.plan_hash for h in hist] == ["plan-0", "plan-1", "plan-2"]
    # cumulative hand sums 0.1, 0.3, 0.6
    assert [h.epsilon_spent for h in hist] == pytest.approx([0.1, 0.3, 0.6])
    assert [h.epsilon_release for h in hist] == pytest.approx([0.1, 0.2, 0.3])
    assert [h.created_at for h in hist] == sorted(h.created_at for h in hist)


# ----------------------------------------------------------------- datasets


def test_ledger_register_dataset_is_idempotent(ledger: Ledger) -> None:
    again = ledger.register_dataset(FP, "survey (renamed)", epsilon=1.0, delta=1e-6, rule="basic")
    assert again.name == "survey"
    # the dataset's public key is random ("ds-…"), never the content digest it was found by
    assert [d.fingerprint for d in ledger.datasets()] == [again.fingerprint]
    assert again.fingerprint.startswith("ds-") and FP not in again.fingerprint
    assert ledger.dataset(again.fingerprint) == ledger.dataset(FP) == again


def test_ledger_register_dataset_with_other_budget_says_how_to_proceed(ledger: Ledger) -> None:
    with pytest.raises(LedgerError) as info:
        ledger.register_dataset(FP, "survey", epsilon=2.0, delta=1e-6, rule="basic")
    msg = str(info.value)
    assert "ε = 1.0" in msg and "ε = 2.0" in msg
    assert "fixed once set" in msg and "owner may raise it" in msg
    with pytest.raises(LedgerError):
        ledger.register_dataset(FP, "survey", epsilon=1.0, delta=1e-6, rule="rdp")


def test_ledger_register_dataset_validates_budget(ledger: Ledger) -> None:
    with pytest.raises(BudgetError):
        ledger.register_dataset("x", "x", epsilon=-1.0, delta=0.0, rule="basic")
    with pytest.raises(BudgetError):
        ledger.register_dataset("x", "x", epsilon=1.0, delta=1.0, rule="basic")
    with pytest.raises(BudgetError, match="rule must be one of"):
        ledger.register_dataset("x", "x", epsilon=1.0, delta=0.0, rule="pld-someday")


def test_ledger_status_unknown_dataset_raises(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="register_dataset"):
        ledger.status("nope")


# ----------------------------------------------------------------- export


def test_ledger_export_holds_no_answer_values_unless_asked(ledger: Ledger) -> None:
    ledger.release(
        FP, "plan-1", "s", [("median_income", pure(0.3))], Sampler({"median_income": 52341.5})
    )
    exported = ledger.export(FP)
    text = json.dumps(exported, allow_nan=False)
    assert "52341.5" not in text and '"answers"' not in text
    assert exported["status"]["epsilon_spent"] == pytest.approx(0.3)
    assert exported["releases"][0]["spends"][0]["event"] == {"event": "pure", "epsilon": 0.3}
    with_answers = ledger.export(FP, include_answers=True)
    assert with_answers["releases"][0]["answers"] == {"median_income": 52341.5}
    json.dumps(with_answers, allow_nan=False)


def test_ledger_export_of_gaussian_spend_is_strict_json(url: str) -> None:
    led = Ledger(url)
    led.register_dataset("fp", "x", epsilon=5.0, delta=1e-6, rule="zcdp")
    led.release("fp", "a", "s", [("q", gaussian(2.0, 1e-7))], Sampler({"q": 1}))
    exported = led.export("fp")
    json.dumps(exported, allow_nan=False)
    # ρ = 1/(2·2²) = 0.125 (docs/mathematics.md §3: Gaussian zCDP)
    assert exported["releases"][0]["spends"][0]["rho"] == pytest.approx(0.125)


def test_ledger_basic_rule_refuses_delta_overspend(url: str) -> None:
    led = Ledger(url)
    led.register_dataset("fp", "x", epsilon=50.0, delta=1e-6, rule="basic")
    led.release("fp", "a", "s", [("q", gaussian(2.0, 6e-7))], Sampler({"q": 1}))
    with pytest.raises(BudgetExceededError, match="delta"):
        led.release("fp", "b", "s", [("q", gaussian(2.0, 6e-7))], Sampler({"q": 1}))
    assert led.status("fp").releases == 1


# ----------------------------------------------------------------- storage settings


def test_ledger_default_url_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    monkeypatch.setenv(ENV_URL, target)
    assert default_ledger_url() == target
    led = Ledger()
    assert led.url == target
    led.register_dataset("fp", "x", 1.0, 0.0, "basic")
    assert (tmp_path / "elsewhere.db").exists()
    led.close()
    monkeypatch.delenv(ENV_URL)
    monkeypatch.setenv(ENV_HOME, str(tmp_path / "home"))
    assert default_ledger_url() == f"sqlite:///{tmp_path / 'home' / 'ledger.db'}"
    Ledger().close()  # creates the home directory
    assert (tmp_path / "home" / "ledger.db").exists()
    monkeypatch.delenv(ENV_HOME)
    expected = Path("~/.privacy-budget-planner/ledger.db").expanduser()
    assert default_ledger_url() == f"sqlite:///{expected}"


def test_ledger_sqlite_connection_uses_wal_and_busy_timeout(ledger: Ledger) -> None:
    with ledger.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.connection.dbapi_connection.isolation_level is None  # type: ignore[union-attr]


def test_ledger_release_takes_write_lock_with_begin_immediate(ledger: Ledger) -> None:
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(ledger.engine, "before_cursor_execute", record)
    try:
        ledger.release(FP, "plan-1", "s", [("q", pure(0.1))], Sampler({"q": 1}))
    finally:
        event.remove(ledger.engine, "before_cursor_execute", record)
    # every statement that writes runs in a transaction opened with BEGIN IMMEDIATE:
    # transaction 1 (check + spend) and transaction 2 (answers) both write
    mode = ""
    writes_by_mode: dict[str, int] = {}
    for stmt in statements:
        if stmt.startswith("BEGIN"):
            mode = stmt
        elif stmt.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            writes_by_mode[mode] = writes_by_mode.get(mode, 0) + 1
    assert set(writes_by_mode) == {"BEGIN IMMEDIATE"}
    assert sum(1 for stmt in statements if stmt == "BEGIN IMMEDIATE") >= 2


def test_ledger_status_reads_do_not_take_write_lock(ledger: Ledger) -> None:
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(ledger.engine, "before_cursor_execute", record)
    try:
        ledger.status(FP)
    finally:
        event.remove(ledger.engine, "before_cursor_execute", record)
    assert "BEGIN DEFERRED" in statements and "BEGIN IMMEDIATE" not in statements


def test_ledger_postgresql_locks_the_head_row_and_tables_compile() -> None:
    """Every write transaction on a server database first locks the one head row (it
    serialises every writer, as BEGIN IMMEDIATE does on SQLite)."""
    from sqlmodel import col, select

    stmt = select(HeadRow).where(col(HeadRow.id) == 1).with_for_update()
    sql = str(stmt.compile(dialect=postgresql.dialect()))
    assert sql.rstrip().endswith("FOR UPDATE")
    for table in LEDGER_METADATA.sorted_tables:
        CreateTable(table).compile(dialect=postgresql.dialect())
    assert {t.name for t in LEDGER_METADATA.sorted_tables} == {
        "datasets",
        "dataset_versions",
        "releases",
        "spends",
        "answers",
        "budget_changes",
        "accounts",
        "grants",
        "sign_in_failures",
        "journal",
        "ledger_head",
        "ledger_checkpoints",  # not journaled: planner.ledger.checkpoint
    }


def test_ledger_bad_url_or_missing_driver_is_a_ledger_error() -> None:
    with pytest.raises(LedgerError, match="not a valid SQLAlchemy URL"):
        Ledger("not a url")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        with pytest.raises(LedgerError, match="driver") as info:
            Ledger("postgresql+psycopg://alice:s3cret@localhost/ledger")
        assert "s3cret" not in str(info.value)


def test_ledger_tables_are_not_redefined_on_reimport() -> None:
    path = Path(__file__).resolve().parents[2] / "planner" / "ledger" / "tables.py"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = runpy.run_path(str(path), run_name="planner._ledger_reimported")
    assert again["LEDGER_METADATA"] is not LEDGER_METADATA
    assert "releases" not in SQLModel.metadata.tables  # private metadata only


def test_ledger_in_memory_url_works() -> None:
    led = Ledger("sqlite://")
    led.register_dataset("fp", "x", 1.0, 0.0, "basic")
    led.release("fp", "a", "s", [("q", pure(0.5))], Sampler({"q": 1}))
    assert led.status("fp").epsilon_remaining == pytest.approx(0.5)


# ----------------------------------------------------------------- property


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.floats(min_value=0.01, max_value=0.6, allow_nan=False), min_size=1, max_size=12))
def test_ledger_never_overspends(costs: list[float]) -> None:
    led = Ledger("sqlite://")
    led.register_dataset("fp", "x", 1.0, 0.0, "basic")
    accepted: list[float] = []
    for i, c in enumerate(costs):
        try:
            led.release("fp", f"p{i}", "s", [("q", pure(c))], Sampler({"q": i}))
            accepted.append(c)
        except BudgetExceededError:
            assert math.fsum(accepted) + c > 1.0
    status = led.status("fp")
    assert status.epsilon_spent == pytest.approx(math.fsum(accepted), rel=1e-12, abs=1e-15)
    assert status.epsilon_spent <= 1.0 * (1 + 1e-12)
    assert status.releases == len(accepted)
    led.close()


# ---------------------------------------------------------------- lifetime budget (issue 12)


def test_ledger_preview_is_the_release_check(ledger: Ledger) -> None:
    ledger.release(FP, "plan-1", "s", [("q", pure(0.7))], Sampler({"q": 1}))
    ok = ledger.preview(FP, [pure(0.2)])
    # basic rule: spent 0.7, this release 0.2, after 0.9, remaining 0.3 (hand arithmetic)
    assert ok.fits and ok.reason == ""
    assert (ok.epsilon_spent, ok.epsilon_total) == (pytest.approx(0.7), 1.0)
    assert ok.epsilon_release == pytest.approx(0.2) and ok.epsilon_remaining_after == pytest.approx(0.1)
    bad = ledger.preview(FP, [pure(0.5)])
    assert not bad.fits and bad.epsilon_remaining_after == pytest.approx(-0.2)
    assert "short by 0.2" in bad.reason
    with pytest.raises(BudgetExceededError) as info:  # the release refuses exactly what preview refuses
        ledger.release(FP, "plan-2", "s", [("q", pure(0.5))], Sampler({"q": 2}))
    # the same reason, and what happened to the spend (issue 27: every failure says it)
    assert str(info.value) == bad.reason + " Nothing was spent."
    assert ledger.status(FP).releases == 1  # preview recorded nothing


def test_ledger_raise_budget_is_recorded_and_only_raises(ledger: Ledger) -> None:
    ledger.release(FP, "plan-1", "s", [("q", pure(0.9))], Sampler({"q": 1}))
    with pytest.raises(LedgerError, match="reason"):
        ledger.raise_budget(FP, 2.0, 1e-6, reason="  ")
    with pytest.raises(LedgerError, match="can only be raised"):
        ledger.raise_budget(FP, 0.5, 1e-6, reason="oops")
    with pytest.raises(LedgerError, match="already"):
        ledger.raise_budget(FP, 1.0, 1e-6, reason="same")
    info = ledger.raise_budget(FP, 2.0, 1e-6, reason="board decision 2026-11")
    assert info.epsilon == 2.0
    st = ledger.status(FP)
    assert st.epsilon_total == 2.0 and st.epsilon_spent == pytest.approx(0.9)  # nothing forgotten
    (change,) = ledger.budget_changes(FP)
    assert (change.old_epsilon, change.new_epsilon, change.reason) == (1.0, 2.0, "board decision 2026-11")
    assert ledger.export(FP)["budget_changes"][0]["reason"] == "board decision 2026-11"
    # registering again with the old budget is now refused: the recorded budget is 2.0
    with pytest.raises(LedgerError):
        ledger.register_dataset(FP, "survey", epsilon=1.0, delta=1e-6, rule="basic")
