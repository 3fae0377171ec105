"""Who acts on a ledger: principals as the record knows them, local accounts, sign-in (with
its throttle), and the grants owners give analysts and viewers.

Roles and the policy itself are :mod:`planner.ledger.accounts` (:func:`authorize` is the
one rule). This module applies it to the *record* of the journal
(:mod:`planner.ledger.record`): a role or a grant edited in the table does not change who
may do what, and a decision refuses to go ahead on one (:meth:`Store.prove`).

OpenID Connect principals (``oidc:<e-mail>``) are accepted only by a ledger opened with the
organisation's role map (``oidc_roles``, the ``[planner.roles]`` table the app reads from
``.streamlit/secrets.toml``), and their role is the one that map gives the address, whatever
role the principal claims.

Sign-in throttle
----------------
Each failed sign-in to a local account is recorded in the journal (the name tried and the
client, never the password). An account with :data:`MAX_ACCOUNT_FAILURES` failures in the
last :data:`THROTTLE_WINDOW`, or a client with :data:`MAX_CLIENT_FAILURES`, is refused
without checking the password until the window has passed. NIST SP 800-63B §5.2.2 asks
verifiers to limit consecutive failed attempts (to at most 100); ten per quarter hour keeps
online guessing of a 12-character password hopeless while a user who mistypes is slowed,
not locked out for good.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from sqlmodel import col

from planner.core.errors import AccountError, BudgetError, PermissionDenied
from planner.core.keys import random_hex
from planner.ledger.accounts import (
    LOCAL_OWNER,
    Action,
    GrantInfo,
    Principal,
    Role,
    authorize,
    check_username,
    hash_password,
    normalise_subject,
    password_needs_rehash,
    principal_from_oidc,
    verify_password,
)
from planner.ledger.check import budget_values
from planner.ledger.record import Record
from planner.ledger.records import AccountInfo, account_info, grant_info, role_of
from planner.ledger.store import Store, utcnow
from planner.ledger.tables import AccountRow, DatasetRow, GrantRow, SignInRow, row_dict

__all__ = [
    "ENV_PASSWORD",
    "ENV_PASSWORD_FILE",
    "ENV_USER",
    "MAX_ACCOUNT_FAILURES",
    "MAX_CLIENT_FAILURES",
    "THROTTLE_WINDOW",
    "Actors",
]

#: Credentials of the command line (and scripts) on a ledger with accounts.
ENV_USER: Final = "PLANNER_USER"
ENV_PASSWORD: Final = "PLANNER_PASSWORD"
ENV_PASSWORD_FILE: Final = "PLANNER_PASSWORD_FILE"
#: Failed sign-ins tolerated per account, and per client, within the window.
MAX_ACCOUNT_FAILURES: Final = 10
MAX_CLIENT_FAILURES: Final = 30
THROTTLE_WINDOW: Final = timedelta(minutes=15)
_MAX_CLIENT_CHARS: Final = 100

Row = dict[str, Any]
#: What :meth:`Store.prove` checks: (table, where-clause or None, the record's rows).
Proof = tuple[str, Any, Mapping[int, Row]]


def _client(value: Any) -> str:
    text = str(value if value is not None else "library")[:_MAX_CLIENT_CHARS]
    return "".join(c if c.isprintable() else "?" for c in text) or "?"


_DUMMY: dict[str, str] = {}


def _dummy_hash() -> str:
    """An Argon2 hash to verify against for unknown users (same work as a real check)."""
    if "h" not in _DUMMY:
        _DUMMY["h"] = hash_password(random_hex(16))
    return _DUMMY["h"]


@dataclass
class Actors:
    """Principals, accounts and grants of one ledger (one per :class:`Ledger`)."""

    store: Store
    oidc_roles: Mapping[str, Any] | None = None

    # ------------------------------------------------------------------ principals

    def effective(self, record: Record, actor: Principal) -> Principal:
        """The actor as the record knows it now: a local account's current role (or a
        refusal if it is disabled or gone); an OpenID Connect identity's role from the
        organisation's role map; the local owner only on a ledger without accounts."""
        subject = actor.subject
        if subject.startswith("local:"):
            if record.has_accounts():
                raise PermissionDenied(
                    "this ledger has accounts, so the unauthenticated local owner may no longer "
                    "use it. Sign in with an account."
                )
            return actor
        if subject.startswith("user:"):
            name = subject[5:]
            row = record.account(name)
            if row is None or row.get("disabled"):
                raise PermissionDenied(f"the account {name!r} does not exist or is disabled.")
            return Principal(subject, role_of(row, "account"), actor.display_name, actor.via)
        if subject.startswith("oidc:"):
            if self.oidc_roles is None:
                raise PermissionDenied(
                    f"{subject[:80]} signed in with OpenID Connect, but this ledger was not opened "
                    "with the organisation's role map, so such identities are not accepted. "
                    "Configure [auth] and [planner.roles] in .streamlit/secrets.toml (the app "
                    "passes them), or sign in with a local account."
                )
            mapped = principal_from_oidc({"email": subject[5:], "email_verified": True}, self.oidc_roles)
            return Principal(subject, mapped.role, actor.display_name, actor.via)
        raise PermissionDenied(f"unknown kind of principal {subject[:40]!r}.")

    def grant_of(self, record: Record, ds: Row, subject: str) -> GrantInfo | None:
        row = record.grant(int(ds["id"]), subject)
        return None if row is None else grant_info(row, str(ds["fingerprint"]))

    def authorize(self, record: Record, actor: Principal, action: Action,
                  ds: Row | None = None) -> tuple[Principal, GrantInfo | None]:
        eff = self.effective(record, actor)
        grant = None
        if ds is not None and eff.role is not Role.OWNER:
            grant = self.grant_of(record, ds, eff.subject)
        authorize(eff, action, grant, dataset=str(ds["name"]) if ds is not None else "")
        return eff, grant

    def decide(self, s: Any, record: Record, who: Principal, action: Action, what: str,
               ds: Row | None = None, more: Sequence[Proof] = ()) -> tuple[Principal, GrantInfo | None]:
        """The start of every decision: prove that the rows it reads about the actor (their
        account and grant) and ``more`` agree with the journal, then authorise the actor as
        the record knows them. Proving first: an edited role refuses the decision as an
        edit, not as a lack of permission."""
        self.store.prove(s, what, [*self.proofs(record, who, ds), *more])
        return self.authorize(record, who, action, ds)

    def proofs(self, record: Record, actor: Principal, ds: Row | None = None) -> list[Proof]:
        """What a decision by ``actor`` (on ``ds``) reads about people: their account row
        and their grant rows on the dataset (for :meth:`Store.prove`)."""
        out: list[Proof] = []
        if actor.subject.startswith("user:"):
            name = actor.subject[5:]
            acc = record.account(name)
            out.append(("accounts", col(AccountRow.username) == name,
                        {} if acc is None else {int(acc["id"]): acc}))
        if ds is not None:
            rows = {rid: g for rid, g in record.table("grants").items()
                    if int(g["dataset_id"]) == int(ds["id"]) and g["subject"] == actor.subject}
            out.append(("grants", (col(GrantRow.dataset_id) == int(ds["id"]))
                        & (col(GrantRow.subject) == actor.subject), rows))
        return out

    def implicit(self) -> Principal:
        """The caller of a call that names no actor: the local owner on a ledger without
        accounts; otherwise the account in ``PLANNER_USER`` (password from
        ``PLANNER_PASSWORD`` or the file ``PLANNER_PASSWORD_FILE``)."""
        with self.store.reading() as (_, record):
            if not record.has_accounts():
                return LOCAL_OWNER
        user = os.environ.get(ENV_USER, "").strip()
        if not user:
            raise PermissionDenied(
                f"the ledger at {self.store.url} has accounts, so every call needs a signed-in user. "
                f"Sign in (the app's login), or set {ENV_USER} and {ENV_PASSWORD} (or "
                f"{ENV_PASSWORD_FILE}) for the command line."
            )
        password = os.environ.get(ENV_PASSWORD)
        pfile = os.environ.get(ENV_PASSWORD_FILE, "").strip()
        if password is None and pfile:
            try:
                password = Path(pfile).read_text(encoding="utf-8").rstrip("\n")
            except (OSError, UnicodeDecodeError) as exc:
                raise PermissionDenied(f"cannot read {ENV_PASSWORD_FILE} ({pfile}).") from exc
        if password is None:
            raise PermissionDenied(f"{ENV_USER} is set but neither {ENV_PASSWORD} nor {ENV_PASSWORD_FILE}.")
        return self.authenticate(user, password, client="cli")

    # ------------------------------------------------------------------ accounts

    def create_account(self, who: Principal, username: str, password: str, role: Role | str) -> AccountInfo:
        name = check_username(username)
        try:
            rl = Role(role)
        except ValueError:
            raise AccountError("role must be owner, analyst or viewer.") from None
        pw_hash = hash_password(password)  # before the transaction: it takes ~0.1 s
        with self.store.write() as (s, head):
            record = self.store.verified()
            first = not record.has_accounts()
            if first and who.subject.startswith("local:"):
                eff = who
            else:
                eff, _ = self.decide(s, record, who, Action.MANAGE_ACCOUNTS, "creating an account")
            if first and rl is not Role.OWNER:
                raise AccountError("the first account of a ledger must be an owner.")
            if record.account(name) is not None:
                raise AccountError(f"an account named {name!r} exists already.")
            self.store.prove(s, "creating an account", [
                ("accounts", col(AccountRow.username) == name, {})])
            row = AccountRow(username=name, role=rl.value, password_hash=pw_hash,
                             created_by=eff.subject, created_at=utcnow(), disabled=0)
            s.add(row)
            self.store.commit(s, head, "account.create", None, [row])
            return account_info(_as_dict(row))

    def authenticate(self, username: str, password: str, *, client: str | None = None) -> Principal:
        """The principal of a local account whose password matches (see the module
        docstring for the throttle).

        Raises
        ------
        PermissionDenied
            Unknown user, wrong password or disabled account (one message for all three,
            and the same Argon2 work either way, so it does not tell which); or too many
            recent failures for this account or client (no password is checked then).
        """
        refused = PermissionDenied("unknown user or wrong password.")
        who = _client(client)
        try:
            name = check_username(username)
        except AccountError:
            name = ""
        since = utcnow() - THROTTLE_WINDOW
        with self.store.reading() as (_, record):
            by_account = record.failures_since(since, username=name) if name else []
            by_client = record.failures_since(since, client=who)
            row = record.account(name) if name else None
        for failures, limit, what in ((by_account, MAX_ACCOUNT_FAILURES, "for this account"),
                                      (by_client, MAX_CLIENT_FAILURES, "from this client")):
            if len(failures) >= limit:
                until = sorted(failures)[-limit] + THROTTLE_WINDOW
                raise PermissionDenied(
                    f"too many failed sign-ins {what} ({len(failures)} in the last "
                    f"{int(THROTTLE_WINDOW.total_seconds() // 60)} minutes); sign-in is paused until "
                    f"{until.strftime('%H:%M')} UTC. If this was not you, tell an owner: every "
                    "failure is recorded in the ledger."
                )
        stored = str(row["password_hash"]) if row is not None else _dummy_hash()
        ok = verify_password(stored, password)
        if row is None or not ok or row.get("disabled"):
            self._record_failure(name, who)
            raise refused
        if password_needs_rehash(stored):
            self._set_password_row(name, hash_password(password), "account.rehash")
        return Principal(f"user:{name}", role_of(row, "account"), name, "password")

    def _record_failure(self, name: str, client: str) -> None:
        with self.store.write() as (s, head):
            row = SignInRow(username=name, client=client, created_at=utcnow())
            s.add(row)
            self.store.commit(s, head, "account.signin_failed", None, [row])

    def _set_password_row(self, name: str, pw_hash: str, kind: str, disabled: int | None = None,
                          who: Principal | None = None) -> AccountRow:
        with self.store.write() as (s, head):
            record = self.store.verified()
            acc = record.account(name)
            proofs: list[Proof] = [("accounts", col(AccountRow.username) == name, {} if acc is None else {int(acc["id"]): acc})]
            if who is not None:
                proofs += self.proofs(record, who)
            self.store.prove(s, "changing an account", proofs)
            if acc is None:
                raise AccountError(f"no account named {name!r}.")
            row = s.get(AccountRow, int(acc["id"]))
            assert row is not None
            row.password_hash = pw_hash
            if disabled is not None:
                row.disabled = disabled
            s.add(row)
            self.store.commit(s, head, kind, None, [row])
            return row

    def set_password(self, who: Principal, username: str, new_password: str) -> None:
        name = check_username(username)
        pw_hash = hash_password(new_password)
        with self.store.reading() as (_, record):
            eff = self.effective(record, who)
            if eff.subject != f"user:{name}":
                self.authorize(record, who, Action.MANAGE_ACCOUNTS)
        self._set_password_row(name, pw_hash, "account.password", who=eff)

    def disable_account(self, who: Principal, username: str) -> AccountInfo:
        name = check_username(username)
        with self.store.write() as (s, head):
            record = self.store.verified()
            accounts = dict(record.table("accounts"))
            self.decide(s, record, who, Action.MANAGE_ACCOUNTS, "disabling an account",
                        more=[("accounts", None, accounts)])
            acc = record.account(name)
            if acc is None:
                raise AccountError(f"no account named {name!r}.")
            owners = [a for a in accounts.values() if a["role"] == Role.OWNER.value and not a["disabled"]]
            if acc["role"] == Role.OWNER.value and len(owners) <= 1 and not acc["disabled"]:
                raise AccountError("the last owner cannot be disabled; create another owner first.")
            row = s.get(AccountRow, int(acc["id"]))
            assert row is not None
            row.disabled = 1
            s.add(row)
            self.store.commit(s, head, "account.disable", None, [row])
            return account_info(_as_dict(row))

    def accounts(self, who: Principal) -> list[AccountInfo]:
        with self.store.reading() as (_, record):
            self.authorize(record, who, Action.MANAGE_ACCOUNTS)
            return [account_info(a) for _, a in sorted(record.table("accounts").items())]

    # ------------------------------------------------------------------ grants

    def grant(self, who: Principal, ds_of: Any, subject: str, role: Role | str,
              epsilon: float | None, delta: float | None) -> GrantInfo:
        """``ds_of(record, lock=True)`` finds the dataset row in the record."""
        subj = normalise_subject(subject)
        try:
            rl = Role(role)
        except ValueError:
            raise AccountError("a grant's role is analyst or viewer.") from None
        if rl is Role.OWNER:
            raise AccountError("owners see every dataset; grant analyst or viewer.")
        with self.store.write() as (s, head):
            record = self.store.verified()
            ds = ds_of(record)
            eff, _ = self.decide(s, record, who, Action.GRANT, f"granting {subj} access to dataset {ds['name']!r}",
                                 ds, [*_dataset_proof(ds), *self.proofs(record, Principal(subj, rl, subj, "grant"), ds)])
            eps: float | None = None
            dlt: float | None = None
            if rl is Role.ANALYST:
                if epsilon is None:
                    raise AccountError("an analyst grant needs the ε they may spend (epsilon=...).")
                eps, dlt = budget_values(epsilon, ds["delta"] if delta is None else delta, "the grant's")
                if dlt > float(ds["delta"]):
                    raise BudgetError(
                        f"the grant's δ = {dlt:g} exceeds the dataset's lifetime δ = {float(ds['delta']):g}."
                    )
            now = utcnow()
            rows: list[Any] = []
            old = record.grant(int(ds["id"]), subj)
            if old is not None:
                old_row = s.get(GrantRow, int(old["id"]))
                assert old_row is not None
                old_row.revoked_at, old_row.revoked_by = now, eff.subject
                s.add(old_row)
                rows.append(old_row)
            row = GrantRow(dataset_id=int(ds["id"]), subject=subj, role=rl.value, epsilon=eps, delta=dlt,
                           granted_by=eff.subject, created_at=now)
            s.add(row)
            rows.append(row)
            self.store.commit(s, head, "grant", int(ds["id"]), rows)
            return grant_info(_as_dict(row), str(ds["fingerprint"]))

    def revoke(self, who: Principal, ds_of: Any, subject: str) -> None:
        subj = normalise_subject(subject)
        with self.store.write() as (s, head):
            record = self.store.verified()
            ds = ds_of(record)
            eff, _ = self.decide(s, record, who, Action.GRANT, f"revoking the grant of {subj}", ds,
                                 [*_dataset_proof(ds), *self.proofs(record, Principal(subj, Role.VIEWER, subj, "grant"), ds)])
            old = record.grant(int(ds["id"]), subj)
            if old is None:
                raise AccountError(f"{subj} has no grant on this dataset.")
            row = s.get(GrantRow, int(old["id"]))
            assert row is not None
            row.revoked_at, row.revoked_by = utcnow(), eff.subject
            s.add(row)
            self.store.commit(s, head, "grant.revoke", int(ds["id"]), [row])

    def grants(self, who: Principal, ds_of: Any) -> list[GrantInfo]:
        with self.store.reading() as (_, record):
            ds = ds_of(record)
            eff, _ = self.authorize(record, who, Action.READ, ds)
            return [grant_info(g, str(ds["fingerprint"])) for g in record.grants_of(int(ds["id"]))
                    if eff.role is Role.OWNER or g["subject"] == eff.subject]


def _as_dict(row: Any) -> Row:
    return row_dict(row)[1]


def _dataset_proof(ds: Row) -> list[Proof]:
    return [("datasets", col(DatasetRow.id) == int(ds["id"]), {int(ds["id"]): ds})]
