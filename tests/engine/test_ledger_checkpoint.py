"""Checkpoints of the verified record (issue 31, :mod:`planner.ledger.checkpoint`): a new
process loads the newest checkpoint and replays only the journal after it, and gives the
same answers and the same verdicts as a full replay.

Each case forces checkpoints on a small ledger by lowering
:data:`planner.ledger.checkpoint.STATE_EVERY` (the store reads it at every write), and
compares what a checkpointed open says with what the same ledger says once its
checkpoints are deleted (the full replay, as before checkpoints existed). Edits are plain
SQL, as someone with write access to the database but not the server secret could make.
Every case runs on SQLite and on the live PostgreSQL of the test command (``ledger_url``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from planner.core.errors import LedgerIntegrityError, PlannerError
from planner.ledger import Ledger, checkpoint
from planner.ledger.integrity import canonical
from planner.ledger.record import Record
from planner.privacy.accounting import Spend, standalone_epsilon
from planner.privacy.events import ExponentialEvent, GaussianEvent, LaplaceEvent
from planner.privacy.sampling import Sampling

pytestmark = pytest.mark.fault  # each tamper case injects one fault (run summary)

PW = "correct horse battery staple"
RULES = ("basic", "advanced", "rdp", "zcdp", "pld")


def _sql(url: str, *statements: str, **params: Any) -> None:
    eng = create_engine(url)
    try:
        with eng.begin() as conn:
            for s in statements:
                conn.execute(text(s), params)
    finally:
        eng.dispose()


def _query(url: str, statement: str) -> list[Any]:
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            return list(conn.execute(text(statement)))
    finally:
        eng.dispose()


def _spends(i: int) -> list[tuple[str, Spend]]:
    """A release of three mechanisms (the benchmark's mix): Laplace, Gaussian, exponential."""
    gau = GaussianEvent(80.0 + i)
    return [(f"count-{i}", Spend(LaplaceEvent(200.0), 0.005)),
            (f"sum-{i}", Spend(gau, standalone_epsilon(gau, 1e-9), 1e-9)),
            (f"median-{i}", Spend(ExponentialEvent(0.004), 0.004))]


@pytest.fixture
def every(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A state checkpoint after every journal entry."""
    monkeypatch.setattr(checkpoint, "STATE_EVERY", 1)
    yield


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The journal entries verified and applied by records from now on."""
    seen: list[int] = []
    original = Record.apply

    def spy(self: Record, entry: Any) -> None:
        seen.append(entry.seq)
        original(self, entry)

    monkeypatch.setattr(Record, "apply", spy)
    return seen


def _history(url: str) -> dict[str, Any]:
    """One dataset per rule (a secret sample under RDP as well), an owner and an analyst
    with a grant, releases by both, a raise, a revoked and re-given grant, a failed
    sign-in: every kind of row the record holds."""
    led = Ledger(url)
    led.create_account("olga", PW, "owner")
    owner = led.authenticate("olga", PW)
    led.create_account("ana", PW, "analyst", actor=owner)
    ana = led.authenticate("ana", PW)
    with pytest.raises(PlannerError):  # a refused sign-in: recorded
        led.authenticate("ana", "wrong password")
    fps: dict[str, str] = {}
    for rule in RULES:
        fps[rule] = led.register_dataset(f"digest-{rule}", f"set-{rule}", 100.0, 1e-3, rule, actor=owner).fingerprint
    fps["sample"] = led.register_dataset("digest-sample", "set-sample", 100.0, 1e-3, "rdp",
                                         sampling=Sampling(0.1), actor=owner).fingerprint
    for name, fp in fps.items():
        led.grant(fp, "ana", "analyst", epsilon=50.0, actor=owner)
        for i in range(3):
            led.release(fp, f"plan-{name}-{i}", "s", _spends(i), lambda: {"x": 1}, actor=owner)
        led.release(fp, f"plan-{name}-ana", "s", _spends(7), lambda: {"x": 2}, actor=ana)
        led.raise_budget(fp, 120.0, 1e-3, reason="more", actor=owner)
    led.revoke(fps["basic"], "ana", actor=owner)
    led.grant(fps["basic"], "ana", "analyst", epsilon=20.0, actor=owner)
    led.close()
    return {"fps": fps, "owner": owner, "ana": ana}


def _statuses(url: str, world: dict[str, Any]) -> dict[str, Any]:
    led = Ledger(url)
    try:
        return {name: (led.status(fp, actor=world["owner"]), led.status(fp, actor=world["ana"]),
                       led.preview(fp, [s for _, s in _spends(9)], actor=world["ana"]))
                for name, fp in world["fps"].items()}
    finally:
        led.close()


def _drop_checkpoints(url: str) -> None:
    _sql(url, "DELETE FROM ledger_checkpoints")


def _verdict(url: str) -> tuple[str, str]:
    try:
        led = Ledger(url)
    except LedgerIntegrityError as exc:
        return "refused", str(exc)
    led.close()
    return "opened", ""


# ------------------------------------------------------------------ the same answers


def test_checkpoint_is_written_and_a_new_process_replays_only_after_it(
        ledger_url: str, every: None, applied: list[int]) -> None:
    world = _history(ledger_url)
    (head,) = _query(ledger_url, "SELECT seq FROM ledger_head")[0]
    kinds = {r[0]: r[1] for r in _query(ledger_url, "SELECT kind, max(seq) FROM ledger_checkpoints GROUP BY kind")}
    assert kinds == {"state": head, "summary": head}  # STATE_EVERY = 1: at the head
    applied.clear()
    Ledger(ledger_url).close()
    assert applied == []  # nothing before the checkpoint was re-read
    led = Ledger(ledger_url)
    led.release(world["fps"]["rdp"], "plan-more", "s", _spends(11), lambda: {"x": 3}, actor=world["owner"])
    led.close()
    applied.clear()
    Ledger(ledger_url).close()
    assert applied == []
    # the newest state deleted: the one before it, and the entries after it
    _sql(ledger_url, "DELETE FROM ledger_checkpoints WHERE kind = 'state' AND seq = "
                     "(SELECT max(seq) FROM ledger_checkpoints WHERE kind = 'state')")
    (older,) = _query(ledger_url, "SELECT max(seq) FROM ledger_checkpoints WHERE kind = 'state'")[0]
    applied.clear()
    Ledger(ledger_url).close()
    assert applied == list(range(older + 1, head + 3))  # the release: reserve and answer


def test_checkpoint_record_equals_the_full_replay(ledger_url: str, every: None) -> None:
    _history(ledger_url)
    with_ckpt = Ledger(ledger_url)
    _drop_checkpoints(ledger_url)
    full = Ledger(ledger_url)
    a, b = with_ckpt.store.verified(), full.store.verified()
    skip = {"_key", "lock", "_spend_cache", "_composed", "memo", "_touched"}

    def held(r: Record) -> dict[str, Any]:
        out = {k: v for k, v in vars(r).items() if k not in skip}
        # a status group emptied by a later status change is kept by the replay (an empty
        # set), absent from a checkpoint's: both read as no release with that status
        out["_by_status"] = {ds: {st: ids for st, ids in groups.items() if ids}
                             for ds, groups in out["_by_status"].items()}
        return out

    mine, theirs = held(a), held(b)
    assert mine.keys() == theirs.keys()
    for k in mine:
        assert mine[k] == theirs[k], k
    with_ckpt.close()
    full.close()


def test_checkpoint_status_is_the_same_under_every_rule(ledger_url: str, every: None) -> None:
    """Status (owner's and analyst's) and the budget check of a next release, with the
    checkpoint's summary and composed afresh: equal floats, under every rule."""
    world = _history(ledger_url)
    summary = json.loads(_query(ledger_url, "SELECT body FROM ledger_checkpoints WHERE kind = 'summary' "
                                            "ORDER BY seq DESC LIMIT 1")[0][0])
    assert {m[2] for m in summary["memo"]} == set(RULES)  # every rule's budget is in it
    with_ckpt = _statuses(ledger_url, world)
    _drop_checkpoints(ledger_url)
    afresh = _statuses(ledger_url, world)
    assert with_ckpt == afresh
    sample = afresh["sample"][0]
    assert sample.epsilon_spent_sample is not None and sample.epsilon_spent < sample.epsilon_spent_sample


def test_checkpoint_status_reads_the_summary_without_composing(
        ledger_url: str, every: None, monkeypatch: pytest.MonkeyPatch) -> None:
    world = _history(ledger_url)
    led = Ledger(ledger_url)

    def refuse(*_: Any) -> Any:
        raise AssertionError("composed the history")

    monkeypatch.setattr(Record, "composed", refuse)
    st = led.status(world["fps"]["pld"], actor=world["owner"])
    assert st.releases == 4
    led.close()


# ------------------------------------------------------------------ the same verdicts


def _secret() -> bytes:
    from planner.core.keys import server_secret

    return server_secret()


def _resign(url: str, row_id: int, body: str, key: bytes) -> None:
    (kind, seq, chain) = _query(url, f"SELECT kind, seq, chain_mac FROM ledger_checkpoints WHERE id = {row_id}")[0]
    _sql(url, "UPDATE ledger_checkpoints SET body = :b, mac = :m WHERE id = :i",
         b=body, m=checkpoint.checkpoint_mac(key, kind, seq, chain, body), i=row_id)


def _newest(url: str, kind: str) -> tuple[int, str]:
    rid, body = _query(url, f"SELECT id, body FROM ledger_checkpoints WHERE kind = '{kind}' "
                            "ORDER BY seq DESC, id DESC LIMIT 1")[0]
    return int(rid), str(body)


def _forged(body: str) -> str:
    """The state with every dataset's lifetime ε raised to 10⁶ (and its raises' too)."""
    data = json.loads(body)
    for row in data["rows"]["datasets"]:
        row["epsilon"] = 1e6
    for row in data["rows"].get("budget_changes", []):
        row["new_epsilon"] = 1e6
    return canonical(data)


def _true_status(url: str, world: dict[str, Any]) -> Any:
    return Ledger(url).status(world["fps"]["basic"], actor=world["owner"])


@pytest.mark.parametrize("forgery", ["edited", "other_key", "other_ledger", "summary_edited"])
def test_checkpoint_forged_is_ignored_and_the_journal_replayed(
        ledger_url: str, every: None, applied: list[int], forgery: str) -> None:
    """A checkpoint (or summary) edited without the key, signed with another secret, or
    made for another ledger: ignored; the whole journal is replayed and the status is the
    true one."""
    world = _history(ledger_url)
    truth = _true_status(ledger_url, world)
    rid, body = _newest(ledger_url, "state")
    if forgery == "edited":
        _sql(ledger_url, "UPDATE ledger_checkpoints SET body = :b WHERE id = :i", b=_forged(body), i=rid)
    elif forgery == "other_key":
        (lid,) = _query(ledger_url, "SELECT ledger_id FROM ledger_head")[0]
        _resign(ledger_url, rid, _forged(body), checkpoint.checkpoint_key(b"another secret" * 3, lid))
    elif forgery == "other_ledger":
        _resign(ledger_url, rid, _forged(body), checkpoint.checkpoint_key(_secret(), "f" * 32))
    else:
        srid, sbody = _newest(ledger_url, "summary")
        data = json.loads(sbody)
        for m in data["memo"]:
            m[5] = (0.0).hex()
        _sql(ledger_url, "UPDATE ledger_checkpoints SET body = :b WHERE id = :i", b=canonical(data), i=srid)
    (head,) = _query(ledger_url, "SELECT seq FROM ledger_head")[0]
    applied.clear()
    led = Ledger(ledger_url)
    st = led.status(world["fps"]["basic"], actor=world["owner"])
    assert st == truth and st.epsilon_total == 120.0  # the raise in _history
    if forgery != "summary_edited":
        # the newest state was refused; the next newest kept (KEEP = 2) is genuine: used,
        # and only the entry after it replayed; never the forged one
        assert applied in (list(range(1, head + 1)), [head])
    led.close()


def test_checkpoint_right_key_wrong_ledger_state_is_the_only_trust(ledger_url: str, every: None) -> None:
    """Control for the forgery cases: the same edited body signed with *this* ledger's
    checkpoint key (which needs the server secret) would be believed — so it is the MAC,
    not anything else, that keeps a forged checkpoint out."""
    world = _history(ledger_url)
    _sql(ledger_url, "DELETE FROM ledger_checkpoints WHERE kind = 'summary'")
    rid, body = _newest(ledger_url, "state")
    (lid,) = _query(ledger_url, "SELECT ledger_id FROM ledger_head")[0]
    _resign(ledger_url, rid, _forged(body), checkpoint.checkpoint_key(_secret(), lid))
    st = Ledger(ledger_url).status(world["fps"]["basic"], actor=world["owner"])
    assert st.epsilon_total == 1e6


@pytest.mark.parametrize("edit", [
    "UPDATE journal SET body = body || ' ' WHERE seq = {h}",
    "UPDATE journal SET mac = '{z}' WHERE seq = {h}",
    "DELETE FROM journal WHERE seq = {h}",
])
def test_checkpoint_whose_journal_entry_was_edited_gives_the_full_replays_verdict(
        ledger_url: str, every: None, applied: list[int], edit: str) -> None:
    """The checkpoint's entry H edited (body or MAC) or deleted: the checkpoint is not
    trusted, and the verdict is the one the same ledger gets with no checkpoint."""
    world = _history(ledger_url)
    led = Ledger(ledger_url)  # one more release, so that H is below the head
    led.release(world["fps"]["basic"], "plan-tail", "s", _spends(5), lambda: {"x": 5}, actor=world["owner"])
    led.close()
    (head,) = _query(ledger_url, "SELECT seq FROM ledger_head")[0]
    _sql(ledger_url, f"DELETE FROM ledger_checkpoints WHERE seq = {head}")
    rid, _ = _newest(ledger_url, "state")
    (h,) = _query(ledger_url, f"SELECT seq FROM ledger_checkpoints WHERE id = {rid}")[0]
    assert h < head
    _sql(ledger_url, edit.format(h=h, z="0" * 64))
    applied.clear()
    with_ckpt = _verdict(ledger_url)
    assert with_ckpt[0] == "refused"
    assert applied[:1] == [1]  # the whole journal, from its first entry
    _drop_checkpoints(ledger_url)
    assert _verdict(ledger_url) == with_ckpt


@pytest.mark.parametrize("edit", [
    "DELETE FROM spends WHERE id = (SELECT max(id) FROM spends)",
    "INSERT INTO budget_changes (dataset_id, old_epsilon, old_delta, new_epsilon, new_delta, reason, "
    "created_at) VALUES (1, 1.0, 0.0, 100.0, 0.0, 'x', '2026-01-01 00:00:00')",
    "DELETE FROM journal WHERE seq = (SELECT max(seq) FROM journal)",
    "DELETE FROM ledger_checkpoints",
    "UPDATE journal SET body = body || ' ' WHERE seq = (SELECT max(seq) FROM journal)",
])
def test_checkpoint_changes_no_verdict_of_the_open(ledger_url: str, every: None, edit: str) -> None:
    """Rows deleted or added outside the planner, the journal's tail removed, the
    checkpoints deleted, the newest entry rewritten: the same verdict with a checkpoint at
    the head as without any."""
    _history(ledger_url)
    led = Ledger(ledger_url)
    led.close()
    _sql(ledger_url, edit)
    with_ckpt = _verdict(ledger_url)
    _drop_checkpoints(ledger_url)
    assert _verdict(ledger_url) == with_ckpt
    if "ledger_checkpoints" not in edit:
        assert with_ckpt[0] == "refused"


def test_checkpoint_edited_rows_are_still_refused_at_the_decision(ledger_url: str, every: None) -> None:
    """A spend lowered in its table after a checkpoint: the record (from the checkpoint)
    still says what the journal said, and the next release is refused naming the row."""
    world = _history(ledger_url)
    _sql(ledger_url, "UPDATE spends SET epsilon = 0.0")
    led = Ledger(ledger_url)
    with pytest.raises(LedgerIntegrityError, match="table spends"):
        led.release(world["fps"]["basic"], "plan-x", "s", _spends(8), lambda: {"x": 1}, actor=world["owner"])
    _drop_checkpoints(ledger_url)
    led = Ledger(ledger_url)
    with pytest.raises(LedgerIntegrityError, match="table spends"):
        led.release(world["fps"]["basic"], "plan-x", "s", _spends(8), lambda: {"x": 1}, actor=world["owner"])


def test_checkpoint_an_older_one_put_back_costs_only_time(ledger_url: str, every: None) -> None:
    world = _history(ledger_url)
    old = _query(ledger_url, "SELECT kind, seq, chain_mac, body, mac, created_at FROM ledger_checkpoints")
    led = Ledger(ledger_url)
    for i in range(3):
        led.release(world["fps"]["zcdp"], f"plan-late-{i}", "s", _spends(i), lambda: {"x": 1}, actor=world["owner"])
    led.close()
    truth = _statuses(ledger_url, world)
    _drop_checkpoints(ledger_url)
    for row in old:
        _sql(ledger_url, "INSERT INTO ledger_checkpoints (kind, seq, chain_mac, body, mac, created_at) "
                         "VALUES (:k, :s, :c, :b, :m, :t)", k=row[0], s=row[1], c=row[2], b=row[3], m=row[4], t=row[5])
    assert _statuses(ledger_url, world) == truth


def test_checkpoint_mac_is_not_a_journal_mac() -> None:
    """Domain separation: the checkpoint key and the journal key differ for one secret and
    ledger, and a checkpoint MAC covers its kind."""
    from planner.ledger.integrity import chain_key

    secret, lid = b"s" * 32, "a" * 32
    assert checkpoint.checkpoint_key(secret, lid) != chain_key(secret, lid)
    assert checkpoint.checkpoint_key(secret, lid) == hmac.new(
        secret, b"planner/ledger-checkpoint/v1\x00" + lid.encode(), hashlib.sha256).digest()
    key = checkpoint.checkpoint_key(secret, lid)
    assert checkpoint.checkpoint_mac(key, "state", 3, "0" * 64, "{}") != checkpoint.checkpoint_mac(
        key, "summary", 3, "0" * 64, "{}")


def test_checkpoint_default_cadence(ledger_url: str) -> None:
    """Without the fixture: no state checkpoint while the journal is shorter than
    STATE_EVERY entries (the open replays it, as before), then one at the first write past
    it; a summary after every release."""
    led = Ledger(ledger_url)
    fp = led.register_dataset("digest", "x", 100.0, 1e-3, "basic").fingerprint

    def states() -> list[int]:
        return [r[0] for r in _query(ledger_url, "SELECT seq FROM ledger_checkpoints WHERE kind = 'state'")]

    i = 0
    while True:
        (head,) = _query(ledger_url, "SELECT seq FROM ledger_head")[0]
        if head >= checkpoint.STATE_EVERY:
            break
        assert states() == []
        led.release(fp, f"p{i}", "s", [("q", Spend(LaplaceEvent(100.0), 0.01))], lambda: {"q": 1})
        i += 1
    # entry 1 registers the dataset, then each release is two entries: a reservation
    # (which never delays its sampling for a checkpoint) and the answer, whose write
    # reached STATE_EVERY and wrote it
    assert states() == [head]
    assert _query(ledger_url, "SELECT count(*) FROM ledger_checkpoints WHERE kind = 'summary'")[0][0] >= 1
    led.close()


def test_checkpoint_an_entry_before_it_edited_is_named_by_verify(ledger_url: str, every: None) -> None:
    """The one verdict a checkpoint changes (the module docstring's threat model): an entry
    *before* the checkpoint rewritten afterwards is not read at open, so the open passes on
    the record the checkpoint holds (what that entry said when it was verified: the budget
    is the true one); ``verify`` replays the whole journal and names the entry, and without
    the checkpoints the open refuses it."""
    world = _history(ledger_url)
    truth = _statuses(ledger_url, world)
    _sql(ledger_url, "UPDATE journal SET body = body || ' ' WHERE seq = 3")
    assert _statuses(ledger_url, world) == truth
    from planner.ledger import verify_ledger

    assert any("journal entry 3" in p for p in verify_ledger(ledger_url).problems)
    _drop_checkpoints(ledger_url)
    verdict = _verdict(ledger_url)
    assert verdict[0] == "refused" and "broken at entry 3" in verdict[1]


def test_checkpoint_any_refusal_is_the_full_replays(ledger_url: str, every: None) -> None:
    """An entry before the checkpoint edited *and* one after it: the open finds the second
    from the checkpoint, then replays the whole journal, so the refusal names the first,
    exactly as without checkpoints."""
    world = _history(ledger_url)
    (h,) = _query(ledger_url, "SELECT max(seq) FROM ledger_checkpoints WHERE kind = 'state'")[0]
    led = Ledger(ledger_url)
    led.release(world["fps"]["basic"], "plan-tail", "s", _spends(5), lambda: {"x": 5}, actor=world["owner"])
    led.close()
    _sql(ledger_url, f"DELETE FROM ledger_checkpoints WHERE seq > {h}",
         "UPDATE journal SET body = body || ' ' WHERE seq = 3",
         f"UPDATE journal SET body = body || ' ' WHERE seq = {h + 1}")
    with_ckpt = _verdict(ledger_url)
    assert with_ckpt[0] == "refused" and "broken at entry 3" in with_ckpt[1]
    _drop_checkpoints(ledger_url)
    assert _verdict(ledger_url) == with_ckpt
