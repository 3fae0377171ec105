"""Accounts and roles, enforced by the engine (issue 16: "anyone who reaches the port owns
every budget").

Expected ε values are hand sums under basic composition (ε adds up).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import AccountError, BudgetExceededError, PermissionDenied
from planner.ledger import Ledger
from planner.ledger.accounts import (
    LOCAL_OWNER,
    SECRETS_TOML_EXAMPLE,
    Action,
    GrantInfo,
    Principal,
    Role,
    authorize,
    hash_password,
    is_loopback,
    local_session_principal,
    normalise_subject,
    principal_from_oidc,
    verify_password,
)
from planner.privacy.accounting import Spend
from planner.privacy.events import PureEvent

PW = "correct horse battery staple"


def pure(eps: float) -> Spend:
    return Spend(event=PureEvent(eps), epsilon=eps, delta=0.0)


@pytest.fixture
def org(tmp_path: Path) -> dict[str, Any]:
    """A ledger with an owner, an analyst, a viewer and an outsider; one dataset."""
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ds = led.register_dataset("digest-survey", "survey", 2.0, 0.0, "basic")
    led.create_account("olga", PW, "owner")  # first account: by the local owner, must be an owner
    owner = led.authenticate("olga", PW)
    for name, role in (("ana", "analyst"), ("vic", "viewer"), ("eve", "analyst")):
        led.create_account(name, PW, role, actor=owner)
    ana, vic, eve = (led.authenticate(n, PW) for n in ("ana", "vic", "eve"))
    led.grant(ds.fingerprint, "ana", "analyst", epsilon=0.5, actor=owner)
    led.grant(ds.fingerprint, "vic", "viewer", actor=owner)
    yield {"led": led, "ds": ds, "owner": owner, "ana": ana, "vic": vic, "eve": eve}
    led.close()


def test_accounts_passwords_are_argon2id_and_checked() -> None:
    h = hash_password(PW)
    assert h.startswith("$argon2id$")  # memory-hard (RFC 9106), PHC string
    assert "m=65536" in h  # 64 MiB (RFC 9106 low-memory profile)
    assert verify_password(h, PW) and not verify_password(h, PW + "x")
    assert not verify_password("garbage", PW) and not verify_password(h, None)
    with pytest.raises(AccountError, match="at least 12"):
        hash_password("short")


@pytest.mark.hostile(3)
def test_accounts_authenticate_refuses_without_telling_which(org: dict[str, Any]) -> None:
    led = org["led"]
    msgs = set()
    for user, pw in (("olga", "wrong password!!"), ("nobody", PW), ("Bad Name", PW)):
        with pytest.raises(PermissionDenied) as info:
            led.authenticate(user, pw)
        msgs.add(str(info.value))
    assert msgs == {"unknown user or wrong password."}


@pytest.mark.hostile(2)
def test_accounts_local_owner_is_refused_once_accounts_exist(org: dict[str, Any]) -> None:
    led, ds = org["led"], org["ds"]
    with pytest.raises(PermissionDenied, match="has accounts"):
        led.status(ds.fingerprint)  # no actor, no PLANNER_USER: nobody is implicitly owner
    with pytest.raises(PermissionDenied, match="unauthenticated local owner"):
        led.status(ds.fingerprint, actor=LOCAL_OWNER)
    assert led.has_accounts()


def test_accounts_first_account_must_be_an_owner(tmp_path: Path) -> None:
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    with pytest.raises(AccountError, match="first account"):
        led.create_account("ana", PW, "analyst")
    assert not led.has_accounts()


def test_accounts_analyst_releases_only_within_the_grant(org: dict[str, Any]) -> None:
    led, ds, ana = org["led"], org["ds"], org["ana"]
    rec = led.release(ds.fingerprint, "p1", "s", [("q", pure(0.3))], lambda: {"q": 1}, actor=ana)
    assert rec.actor == "user:ana"
    # grant ε = 0.5: 0.3 spent, another 0.3 would make 0.6 > 0.5 (hand sum) → refused
    pv = led.preview(ds.fingerprint, [pure(0.3)], actor=ana)
    assert not pv.fits and pv.limit == "grant" and pv.grant_epsilon == 0.5
    assert pv.grant_spent_after == pytest.approx(0.6)
    with pytest.raises(BudgetExceededError, match="granted them"):
        led.release(ds.fingerprint, "p2", "s", [("q", pure(0.3))], lambda: {"q": 2}, actor=ana)
    # 0.2 more fits exactly (0.3 + 0.2 = 0.5)
    led.release(ds.fingerprint, "p3", "s", [("q", pure(0.2))], lambda: {"q": 3}, actor=ana)
    # the owner's own releases do not count against the analyst's grant, but do against the dataset
    led.release(ds.fingerprint, "p4", "s", [("q", pure(1.0))], lambda: {"q": 4}, actor=org["owner"])
    assert led.status(ds.fingerprint, actor=org["owner"]).epsilon_spent == pytest.approx(1.5)
    releases = led.releases(ds.fingerprint, actor=org["vic"])
    assert [r.actor for r in releases] == ["user:ana", "user:ana", "user:olga"]
    assert [r["actor"] for r in led.export(ds.fingerprint, actor=org["vic"])["releases"]] == [
        "user:ana", "user:ana", "user:olga"]


@pytest.mark.hostile(6)
def test_accounts_viewer_reads_but_cannot_spend_or_manage(org: dict[str, Any]) -> None:
    led, ds, vic = org["led"], org["ds"], org["vic"]
    assert led.status(ds.fingerprint, actor=vic).epsilon_total == 2.0
    assert [d.name for d in led.datasets(actor=vic)] == ["survey"]
    with pytest.raises(PermissionDenied, match="viewer"):
        led.release(ds.fingerprint, "p", "s", [("q", pure(0.1))], lambda: {"q": 1}, actor=vic)
    for call in (
        lambda: led.raise_budget(ds.fingerprint, 3.0, 0.0, reason="x", actor=vic),
        lambda: led.register_dataset("other", "other", 1.0, 0.0, "basic", actor=vic),
        lambda: led.grant(ds.fingerprint, "eve", "viewer", actor=vic),
        lambda: led.accounts(actor=vic),
        lambda: led.create_account("mal", PW, "owner", actor=vic),
    ):
        with pytest.raises(PermissionDenied, match="only an owner"):
            call()


@pytest.mark.hostile(6)
def test_accounts_outsider_can_neither_list_nor_see_nor_spend(org: dict[str, Any]) -> None:
    led, ds, eve = org["led"], org["ds"], org["eve"]
    assert led.datasets(actor=eve) == []  # not even the name
    for call in (
        lambda: led.status(ds.fingerprint, actor=eve),
        lambda: led.export(ds.fingerprint, actor=eve),
        lambda: led.releases(ds.fingerprint, actor=eve),
        lambda: led.preview(ds.fingerprint, [pure(0.1)], actor=eve),
        lambda: led.release(ds.fingerprint, "p", "s", [("q", pure(0.1))], lambda: {}, actor=eve),
        lambda: led.find_dataset("digest-survey", actor=eve),
    ):
        with pytest.raises(PermissionDenied):
            call()
    assert led.status(ds.fingerprint, actor=org["owner"]).releases == 0


def test_accounts_revoked_and_disabled_lose_access(org: dict[str, Any]) -> None:
    led, ds, owner, ana = org["led"], org["ds"], org["owner"], org["ana"]
    led.revoke(ds.fingerprint, "ana", actor=owner)
    with pytest.raises(PermissionDenied, match="no budget granted"):
        led.release(ds.fingerprint, "p", "s", [("q", pure(0.1))], lambda: {"q": 1}, actor=ana)
    led.disable_account("vic", actor=owner)
    with pytest.raises(PermissionDenied, match="disabled"):
        led.status(ds.fingerprint, actor=org["vic"])  # an old session of a disabled account
    with pytest.raises(PermissionDenied):
        led.authenticate("vic", PW)
    with pytest.raises(AccountError, match="last owner"):
        led.disable_account("olga", actor=owner)


@pytest.mark.hostile
def test_accounts_role_is_read_from_the_store_not_trusted_from_the_principal(org: dict[str, Any]) -> None:
    led, ds = org["led"], org["ds"]
    forged = Principal("user:eve", Role.OWNER, "eve", "password")  # eve is an analyst
    with pytest.raises(PermissionDenied):
        led.raise_budget(ds.fingerprint, 5.0, 0.0, reason="mine now", actor=forged)


def test_accounts_cli_user_from_environment(org: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    led, ds = org["led"], org["ds"]
    monkeypatch.setenv("PLANNER_USER", "ana")
    monkeypatch.setenv("PLANNER_PASSWORD", PW)
    cli = Ledger(led.url)
    assert cli.status(ds.fingerprint).epsilon_total == 2.0
    rec = cli.release(ds.fingerprint, "cli", "s", [("q", pure(0.1))], lambda: {"q": 1})
    assert rec.actor == "user:ana"
    monkeypatch.setenv("PLANNER_PASSWORD", "wrong wrong wrong")
    with pytest.raises(PermissionDenied, match="wrong password"):
        Ledger(led.url).status(ds.fingerprint)


def test_accounts_with_actor_binds_a_session(org: dict[str, Any]) -> None:
    led, ds = org["led"], org["ds"]
    mine = led.with_actor(org["vic"])
    assert mine.status(ds.fingerprint).name == "survey"
    with pytest.raises(PermissionDenied):
        mine.release(ds.fingerprint, "p", "s", [("q", pure(0.1))], lambda: {"q": 1})


def test_accounts_single_user_ledger_acts_for_the_local_owner(tmp_path: Path) -> None:
    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    ds = led.register_dataset("d", "x", 1.0, 0.0, "basic")
    assert ds.registered_by == "local:owner"
    rec = led.release("d", "p", "s", [("q", pure(0.5))], lambda: {"q": 1})
    assert rec.actor == "local:owner"


# ------------------------------------------------------------------ OIDC and sessions

ROLES = {"owners": ["dpo@example.org"], "analysts": ["Ana@Example.org"], "viewers": ["*@example.org"]}


@pytest.mark.hostile(5)
def test_accounts_oidc_claims_map_to_principals() -> None:
    p = principal_from_oidc({"email": "DPO@example.org", "email_verified": True, "name": "D"}, ROLES)
    assert (p.subject, p.role, p.via) == ("oidc:dpo@example.org", Role.OWNER, "oidc")
    assert principal_from_oidc({"email": "ana@example.org"}, ROLES).role is Role.ANALYST
    assert principal_from_oidc({"email": "zed@example.org"}, ROLES).role is Role.VIEWER
    for claims, why in (
        ({"email": "mallory@evil.org"}, "no role"),
        ({"email": "dpo@example.org", "email_verified": False}, "not verified"),
        ({"sub": "123"}, "no e-mail"),
        ({"is_logged_in": False, "email": "dpo@example.org"}, "not signed in"),
        ({"email": "x@notexample.org"}, "no role"),  # "*@example.org" is not a suffix match
    ):
        with pytest.raises(PermissionDenied, match=why):
            principal_from_oidc(claims, ROLES)
    assert "[planner.roles]" in SECRETS_TOML_EXAMPLE and "[auth]" in SECRETS_TOML_EXAMPLE


def test_accounts_oidc_principal_needs_a_grant_too(org: dict[str, Any]) -> None:
    led = Ledger(org["led"].url, oidc_roles=ROLES)  # the app opens it with [planner.roles]
    ds = org["ds"]
    p = principal_from_oidc({"email": "ana@example.org"}, ROLES)
    with pytest.raises(PermissionDenied, match="no budget granted"):
        led.release(ds.fingerprint, "p", "s", [("q", pure(0.1))], lambda: {"q": 1}, actor=p)
    led.grant(ds.fingerprint, "Ana@Example.org", "analyst", epsilon=0.2, actor=org["owner"])
    rec = led.release(ds.fingerprint, "p", "s", [("q", pure(0.1))], lambda: {"q": 1}, actor=p)
    assert rec.actor == "oidc:ana@example.org"


def test_accounts_local_session_rule_only_on_loopback() -> None:
    # the rule: local owner iff loopback bind AND no accounts AND no OIDC
    assert local_session_principal("127.0.0.1", accounts_configured=False) is LOCAL_OWNER
    assert local_session_principal("::1", accounts_configured=False) is LOCAL_OWNER
    assert local_session_principal("localhost", accounts_configured=False) is LOCAL_OWNER
    for addr in ("0.0.0.0", "", None, "::", "192.168.1.5", "planner.example.org"):
        assert local_session_principal(addr, accounts_configured=False) is None
    assert local_session_principal("127.0.0.1", accounts_configured=True) is None
    assert local_session_principal("127.0.0.1", accounts_configured=False, oidc_configured=True) is None
    assert is_loopback("127.8.9.10") and not is_loopback("not an address")


def test_accounts_streamlit_config_binds_to_loopback() -> None:
    import tomllib

    cfg = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit/config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert is_loopback(cfg["server"]["address"])


def test_accounts_authorize_is_the_one_rule() -> None:
    g = GrantInfo("ds-x", "user:a", Role.ANALYST, 1.0, 0.0, "user:o", "")
    v = GrantInfo("ds-x", "user:v", Role.VIEWER, None, None, "user:o", "")
    analyst = Principal("user:a", Role.ANALYST)
    viewer = Principal("user:v", Role.VIEWER)
    authorize(analyst, Action.RELEASE, g)
    authorize(viewer, Action.READ, v)
    with pytest.raises(PermissionDenied):
        authorize(viewer, Action.RELEASE, v)
    with pytest.raises(PermissionDenied):
        authorize(analyst, Action.RELEASE, v)  # a viewer grant does not allow spending
    with pytest.raises(PermissionDenied, match="not signed in"):
        authorize(None, Action.READ, g)
    assert normalise_subject("Ana@Example.org") == "oidc:ana@example.org"
    assert normalise_subject("ana") == "user:ana"
