"""Issue 16 in the app: who may spend, see or list a dataset.

Each role is driven through the app (AppTest): the unauthenticated local owner only on a
loopback address of a ledger without accounts (with the notice saying how to expose the app
safely); a local account signed in with the form; an OpenID Connect identity mapped by
``[planner.roles]``. What stops an unauthorised spend is checked to be the engine's refusal:
the release is forced through the page's own release path (the confirm flag, not a button),
and the ledger records nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import auth
from pages._ui import state as S
from planner.data.backends import make_backend
from planner.data.loader import load_table
from planner.data.schema import Schema
from planner.data.sources import open_cli_source, table_key
from planner.ledger import Ledger
from planner.ledger.accounts import Principal, Role
from planner.planning.workload import plan as make_plan
from planner.release import release
from tests.app.test_pages import set_lifetime

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
CENSUS_CSV = ROOT / "data" / "census.csv"
SURVEY_CSV = ROOT / "data" / "survey.csv"
# the ledger key the app and the CLI compute for the census sample (content digest)
CENSUS_FP = table_key(load_table(CENSUS_CSV, name=CENSUS_CSV.name), Schema.load(CENSUS_CSV.with_suffix('.schema.json')))
PASSWORD = "correct horse battery staple"
OWNER = Principal("user:olivia", Role.OWNER)


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    u = f"sqlite:///{tmp_path}/l.db"
    monkeypatch.setenv("PLANNER_LEDGER_URL", u)
    return u


def _organisation(url: str, analyst_epsilon: float | None = 0.6) -> Ledger:
    """An owner, an analyst granted ``analyst_epsilon`` on the census sample, an analyst with
    no grant, and a viewer the census is shared with; the survey registered but shared with
    nobody, with one release."""
    led = Ledger(url)
    led.create_account("olivia", PASSWORD, "owner")
    for name, role in (("ana", "analyst"), ("bo", "analyst"), ("vic", "viewer")):
        led.create_account(name, PASSWORD, role, actor=OWNER)
    led.register_dataset(CENSUS_FP, "census (sample)", 3.0, 1e-5, "rdp", actor=OWNER)
    if analyst_epsilon is not None:
        led.grant(CENSUS_FP, "ana", "analyst", epsilon=analyst_epsilon, actor=OWNER)
    led.grant(CENSUS_FP, "vic", "viewer", actor=OWNER)
    survey = Schema.load(ROOT / "data" / "survey.schema.json")
    sp = make_plan(__import__("planner.planning.queries", fromlist=["queries_from_list"]).queries_from_list(
        [{"id": "respondents", "kind": "count", "mechanism": "laplace"}], survey), survey, 0.5, 0.0, "rdp")
    release(sp, survey, make_backend("pandas", open_cli_source(str(SURVEY_CSV)), survey), led.with_actor(OWNER),
            table_key(load_table(SURVEY_CSV, name=SURVEY_CSV.name), Schema.load(SURVEY_CSV.with_suffix('.schema.json'))), "survey (sample)", total_epsilon=2.0, total_delta=1e-6, rule="rdp")
    return led


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _sign_in(at: AppTest, user: str, password: str = PASSWORD) -> AppTest:
    at.text_input(key="auth:user").input(user)
    at.text_input(key="auth:password").input(password)
    at.button[0].click().run()  # the form's submit button
    assert not at.exception, [e.value for e in at.exception]
    return at


def _goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _texts(at: AppTest) -> str:
    return " | ".join(x.value for x in [*at.error, *at.warning, *at.info, *at.success, *at.caption])


# ----------------------------------------------------------------------------- who is the principal
def test_local_owner_on_loopback_sees_how_to_expose_the_app_safely(url: str) -> None:
    at = _app()
    notice = " ".join(i.value for i in at.sidebar.info)
    assert "listens on this machine only (127.0.0.1)" in notice and "acts as the ledger's owner" in notice
    how = at.sidebar.expander[0]
    assert how.label == "How to let others use it safely"
    steps = " ".join(m.value for m in how.markdown)
    assert "--server.address 0.0.0.0" in steps and "planner account create" in steps and "[auth]" in steps
    assert at.title[0].value == "Data and schema"


def test_reachable_without_sign_in_configured_nobody_gets_in(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "bind_address", lambda: "0.0.0.0")
    at = _app()
    assert at.title[0].value == "Sign in"
    assert any("reachable from other machines" in e.value and "no sign-in is configured" in e.value for e in at.error)
    assert not any(k.key == "auth:user" for k in at.text_input)
    # no planning page exists for this session (a deep link lands on the sign-in page)
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/data_page.py")


def test_a_ledger_with_accounts_needs_a_signed_in_account(url: str) -> None:
    _organisation(url)
    at = _app()
    assert at.title[0].value == "Sign in"
    _sign_in(at, "ana", "wrong password, wrong")
    assert at.title[0].value == "Sign in" and any("password" in e.value.lower() for e in at.error)
    _sign_in(at, "ana")
    assert at.title[0].value == "Data and schema"
    assert "Signed in: **ana** (analyst)" in [m.value for m in at.sidebar.markdown]
    assert not at.sidebar.info  # no loopback-owner notice once people sign in


# ----------------------------------------------------------------------------- analyst
def test_analyst_releases_within_the_grant_and_the_engine_refuses_beyond_it(url: str) -> None:
    led = _organisation(url)
    at = _sign_in(_app(), "ana")
    _goto(at, "data_page")
    assert "shown to owners only" in _texts(at)  # the column report reads the raw rows
    _goto(at, "plan_page")
    assert not any(b.key == "planner:lifetime_set" for b in at.button)  # only owners set lifetime budgets
    at.number_input(key=S.widget_key(S.EPSILON, "planner")).set_value(0.4).run()
    _goto(at, "release_page")
    at.session_state[S.CONFIRMED] = True
    at.run()
    assert not at.error, [e.value for e in at.error]
    recs = led.with_actor(OWNER).releases(CENSUS_FP)
    assert len(recs) == 1 and recs[0].actor == "user:ana"
    # a second release of 0.4 would take the analyst's own spends past the 0.6 granted
    _goto(at, "plan_page")
    at.number_input(key=S.widget_key(S.EPSILON, "planner")).set_value(0.41).run()
    _goto(at, "release_page")
    assert any(b.key == "release:open" and b.disabled for b in at.button)  # the page says so…
    at.session_state[S.CONFIRMED] = True  # …and forcing the release path, the engine refuses
    at.run()
    assert any("above the ε = 0.6 an owner granted them" in e.value for e in at.error), [e.value for e in at.error]
    assert len(led.with_actor(OWNER).releases(CENSUS_FP)) == 1


def test_analyst_without_a_grant_is_stopped_by_the_engine_not_by_a_hidden_button(url: str) -> None:
    led = _organisation(url)
    at = _sign_in(_app(), "bo")
    _goto(at, "release_page")
    at.session_state[S.CONFIRMED] = True  # the page's own release path, whatever the buttons show
    at.run()
    assert any("bo" in e.value and ("not shared" in e.value or "no budget granted" in e.value) for e in at.error), \
        [e.value for e in at.error]
    assert led.with_actor(OWNER).releases(CENSUS_FP) == []
    assert led.with_actor(OWNER).status(CENSUS_FP).epsilon_spent == 0.0


def test_analyst_lists_only_the_server_files_granted(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "census.csv").write_bytes(CENSUS_CSV.read_bytes())
    (data_dir / "survey.csv").write_bytes(SURVEY_CSV.read_bytes())
    (data_dir / "secret.csv").write_text("a,b\n1,2\n")
    monkeypatch.setenv("PLANNER_DATA_DIR", str(data_dir))
    _organisation(url)
    at = _sign_in(_app(), "ana")
    at.radio(key=S.widget_key(S.PICKER, "data")).set_value("server").run()
    assert at.selectbox(key="data:server_file").options == ["census.csv"]  # not survey (not shared), not secret


# ----------------------------------------------------------------------------- viewer
def test_viewer_sees_only_the_released_answers_and_ledger_shared_with_them(url: str) -> None:
    led = _organisation(url)
    census = Schema.load(ROOT / "data" / "census.schema.json")
    from planner.planning.queries import queries_from_list

    p = make_plan(queries_from_list([{"id": "people", "kind": "count", "mechanism": "laplace"}], census),
                  census, 0.5, 0.0, "rdp")
    release(p, census, make_backend("pandas", open_cli_source(str(CENSUS_CSV)), census), led.with_actor(OWNER), CENSUS_FP,
            "census (sample)")
    at = _sign_in(_app(), "vic")
    assert at.title[0].value == "Ledger"
    box = at.selectbox(key=S.widget_key(S.LEDGER_DATASET, "ledger"))
    assert len(box.options) == 1 and box.options[0].startswith("census")  # the survey is not listed
    answers = next(d.value for d in at.dataframe if "query" in d.value.columns and "value" in d.value.columns)
    assert list(answers["query"]) == ["people"]
    assert not any(e.label == "Raise the lifetime budget (a recorded decision)" for e in at.expander)
    for page in ("data_page", "plan_page", "release_page"):  # no planning page exists for a viewer
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            at.switch_page(f"pages/{page}.py")


# ----------------------------------------------------------------------------- OpenID Connect
def _oidc(at: AppTest, email: str, roles: dict[str, Any]) -> None:
    at.secrets["auth"] = {"redirect_uri": "https://planner.example.org/oauth2callback", "cookie_secret": "x" * 64,
                          "client_id": "id", "client_secret": "secret",
                          "server_metadata_url": "https://login.example.org/.well-known/openid-configuration"}
    at.secrets["planner"] = {"roles": roles}
    at.user = {"email": email, "email_verified": True, "is_logged_in": True, "name": "Dana"}


def test_oidc_identity_gets_its_role_and_releases_as_itself(url: str) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    _oidc(at, "DPO@example.org", {"owners": ["dpo@example.org"], "viewers": ["*@example.org"]})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Data and schema"
    assert any("Signed in: **Dana** (owner)" in m.value for m in at.sidebar.markdown)
    assert not at.sidebar.info  # OIDC configured: no unauthenticated local owner
    _goto(at, "plan_page")
    set_lifetime(at, "planner", 2.0)
    _goto(at, "release_page")
    at.session_state[S.CONFIRMED] = True
    at.run()
    assert not at.error, [e.value for e in at.error]
    led = Ledger(url, oidc_roles={"owners": ["dpo@example.org"]})  # as the app opens it
    rec = led.with_actor(Principal("oidc:dpo@example.org", Role.OWNER)).releases(CENSUS_FP)[-1]
    assert rec.actor == "oidc:dpo@example.org"


def test_oidc_identity_without_a_role_is_not_let_in(url: str) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    _oidc(at, "someone@elsewhere.org", {"owners": ["dpo@example.org"]})
    at.run()
    assert at.title[0].value == "Sign in"
    assert any(b.key == "auth:oidc" for b in at.button)
    assert any("has no role in this planner" in e.value for e in at.error)
