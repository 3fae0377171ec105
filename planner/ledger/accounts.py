"""Accounts, roles and who may do what with a ledger.

Roles
-----
``owner``
    Declares datasets, sets and raises their lifetime budgets, grants budgets and
    shares, manages accounts, releases, reads every dataset's ledger.
``analyst``
    Plans; releases on a dataset only within the budget an owner granted them on it
    (their own spends, composed under the dataset's rule, never exceed the grant), and
    reads the ledgers of the datasets granted to them.
``viewer``
    Reads the released answers and the ledger of the datasets shared with them.

The role is enforced by the engine: every :class:`planner.ledger.Ledger` method that
spends, registers, raises, grants, lists or reads takes an ``actor`` (a
:class:`Principal`) and raises :class:`~planner.core.errors.PermissionDenied` when the
actor may not do it (:func:`authorize` is the one definition of the rule).

Who is the actor
----------------
* **Local account store** (one organisation): accounts live in the ledger's database,
  passwords hashed with Argon2id (argon2-cffi, RFC 9106 parameters) and checked by
  :meth:`planner.ledger.Ledger.authenticate`.
* **OpenID Connect** through Streamlit's ``st.login`` when ``[auth]`` is configured:
  :func:`principal_from_oidc` turns the identity's claims (``st.user``) and the role map
  ``[planner.roles]`` of ``.streamlit/secrets.toml`` into a principal (see
  :data:`SECRETS_TOML_EXAMPLE`).
* **A single-user ledger** (one without accounts) treats its caller as
  :data:`LOCAL_OWNER`. The app may do so only when it listens on a loopback address:
  :func:`local_session_principal` is that rule. Once a ledger has an account, the engine
  refuses :data:`LOCAL_OWNER` and every caller must sign in.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from planner.core.errors import AccountError, PermissionDenied
from planner.core.names import check_name

__all__ = [
    "LOCAL_OWNER",
    "MIN_PASSWORD_CHARS",
    "SECRETS_TOML_EXAMPLE",
    "Action",
    "GrantInfo",
    "Principal",
    "Role",
    "authorize",
    "check_username",
    "hash_password",
    "is_loopback",
    "local_session_principal",
    "normalise_subject",
    "password_needs_rehash",
    "principal_from_oidc",
    "verify_password",
]

#: Shortest password accepted for a local account (NIST SP 800-63B §5.1.1.2: at least 8;
#: we ask for more since these accounts spend privacy budgets).
MIN_PASSWORD_CHARS: Final = 12
MAX_PASSWORD_CHARS: Final = 1024
_USERNAME_RE: Final = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class Role(StrEnum):
    """A principal's role in the organisation."""

    OWNER = "owner"
    ANALYST = "analyst"
    VIEWER = "viewer"


class Action(StrEnum):
    """What a ledger call does (the unit :func:`authorize` decides on)."""

    DECLARE = "declare a dataset"
    RAISE = "raise a lifetime budget"
    GRANT = "grant or revoke access to a dataset"
    MANAGE_ACCOUNTS = "manage accounts"
    VERIFY = "verify or repair the ledger"
    RELEASE = "release on a dataset"
    PREVIEW = "preview a release"
    ADD_VERSION = "add a version of a dataset"
    READ = "read a dataset's ledger"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is acting.

    Attributes
    ----------
    subject : str
        Stable identifier, recorded with every release: ``user:<name>`` (local account),
        ``oidc:<email>`` (OpenID Connect) or ``local:owner`` (a single-user ledger).
    role : Role
    display_name : str
        For pages; never used for a decision.
    via : str
        How the principal was established: ``password``, ``oidc`` or ``local``.
    """

    subject: str
    role: Role
    display_name: str = ""
    via: str = "password"

    def to_dict(self) -> dict[str, str]:
        """JSON-able form."""
        return {"subject": self.subject, "role": self.role.value,
                "display_name": self.display_name, "via": self.via}


#: The caller of a ledger without accounts (single-user use on one machine).
LOCAL_OWNER: Final = Principal("local:owner", Role.OWNER, "local owner (this machine)", "local")


@dataclass(frozen=True, slots=True)
class GrantInfo:
    """An owner's grant on one dataset: ``analyst`` (may release within ``epsilon``,
    ``delta``) or ``viewer`` (may read)."""

    dataset: str
    subject: str
    role: Role
    epsilon: float | None
    delta: float | None
    granted_by: str
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"dataset": self.dataset, "subject": self.subject, "role": self.role.value,
                "epsilon": self.epsilon, "delta": self.delta, "granted_by": self.granted_by,
                "created_at": self.created_at}


# --------------------------------------------------------------------------- policy


def authorize(actor: Principal | None, action: Action, grant: GrantInfo | None = None,
              *, dataset: str = "") -> None:
    """Allow ``action`` or raise :class:`PermissionDenied` (the one definition of the rule).

    Owners may do everything. An analyst with an ``analyst`` grant on the dataset may
    release, preview, add a version and read it; a ``viewer`` grant (or an analyst grant)
    allows reading. Nobody else may do anything with a dataset.
    """
    if actor is None:
        raise PermissionDenied(
            f"not signed in: to {action.value} this ledger needs a signed-in account. Sign in "
            "(the app's login, or PLANNER_USER and PLANNER_PASSWORD for the command line)."
        )
    if not isinstance(actor, Principal):
        raise PermissionDenied(f"actor must be a Principal; got {type(actor).__name__}.")
    if actor.role is Role.OWNER:
        return
    target = f" {dataset!r}" if dataset else ""
    if action in (Action.READ,) and grant is not None:
        return
    if action in (Action.RELEASE, Action.PREVIEW, Action.ADD_VERSION) and grant is not None \
            and grant.role is Role.ANALYST and actor.role is Role.ANALYST:
        return
    if action in (Action.RELEASE, Action.PREVIEW, Action.ADD_VERSION) and actor.role is Role.ANALYST:
        raise PermissionDenied(
            f"{actor.subject} (analyst) has no budget granted on dataset{target}, so cannot "
            f"{action.value}. Ask an owner to grant you a budget on it."
        )
    if action in (Action.READ, Action.RELEASE, Action.PREVIEW, Action.ADD_VERSION):
        raise PermissionDenied(
            f"{actor.subject} ({actor.role.value}) may not {action.value}{target}: it was not "
            "shared with them. Ask an owner to share it."
        )
    raise PermissionDenied(
        f"{actor.subject} ({actor.role.value}) may not {action.value}: only an owner may. Ask an "
        "owner of the organisation."
    )


# --------------------------------------------------------------------------- local accounts


def check_username(name: Any) -> str:
    """A local account name: 1–64 of ``a-z 0-9 . _ -``, starting with a letter or digit."""
    if not isinstance(name, str) or not _USERNAME_RE.fullmatch(name):
        raise AccountError(
            "a username is 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a "
            "letter or digit."
        )
    return name


def _check_password(password: Any) -> str:
    if not isinstance(password, str):
        raise AccountError("a password must be text.")
    if len(password) < MIN_PASSWORD_CHARS:
        raise AccountError(
            f"a password needs at least {MIN_PASSWORD_CHARS} characters; got {len(password)}. "
            "Use a passphrase of several words."
        )
    if len(password) > MAX_PASSWORD_CHARS:
        raise AccountError(f"a password has at most {MAX_PASSWORD_CHARS} characters.")
    return password


def _hasher() -> Any:
    try:
        from argon2 import PasswordHasher
        from argon2.profiles import RFC_9106_LOW_MEMORY
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise AccountError(
            "local accounts need argon2-cffi (pip install argon2-cffi)."
        ) from exc
    return PasswordHasher.from_parameters(RFC_9106_LOW_MEMORY)


def hash_password(password: str) -> str:
    """Argon2id hash (RFC 9106 low-memory profile: t=3, m=64 MiB, p=4) in PHC format."""
    return str(_hasher().hash(_check_password(password)))


def verify_password(stored_hash: str, password: Any) -> bool:
    """Whether ``password`` matches ``stored_hash`` (``False`` for any malformed input)."""
    from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

    if not isinstance(password, str) or not isinstance(stored_hash, str) \
            or len(password) > MAX_PASSWORD_CHARS:
        return False
    try:
        return bool(_hasher().verify(stored_hash, password))
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def password_needs_rehash(stored_hash: str) -> bool:
    """Whether a stored hash uses weaker parameters than :func:`hash_password` does now."""
    from argon2.exceptions import InvalidHashError

    try:
        return bool(_hasher().check_needs_rehash(stored_hash))
    except InvalidHashError:
        return True


def normalise_subject(subject: str) -> str:
    """``alice`` → ``user:alice``; ``Alice@Example.org`` → ``oidc:alice@example.org``."""
    if not isinstance(subject, str) or not subject.strip():
        raise AccountError("a subject is a username or an e-mail address.")
    s = check_name(subject.strip(), "the grant's subject (a user name or an e-mail address)", error=AccountError)
    if s.startswith(("user:", "oidc:", "local:")):
        kind, _, rest = s.partition(":")
        return f"{kind}:{rest.lower() if kind == 'oidc' else rest}"
    if "@" in s:
        return f"oidc:{s.lower()}"
    return f"user:{check_username(s)}"


# --------------------------------------------------------------------------- OIDC

SECRETS_TOML_EXAMPLE: Final = '''\
# .streamlit/secrets.toml (never commit it; chmod 600)
[auth]
redirect_uri = "https://planner.example.org/oauth2callback"
cookie_secret = "<64 random hex digits>"
client_id = "<from your identity provider>"
client_secret = "<from your identity provider>"
server_metadata_url = "https://login.example.org/.well-known/openid-configuration"

[planner.roles]
# e-mail addresses (case-insensitive) or "*@domain" for everyone of a domain
owners = ["dpo@example.org"]
analysts = ["ana@example.org", "bo@example.org"]
viewers = ["*@example.org"]
'''
"""The shape of ``.streamlit/secrets.toml`` for OpenID Connect sign-in."""


def _matches(email: str, patterns: Iterable[Any]) -> bool:
    for p in patterns:
        if not isinstance(p, str):
            continue
        p = p.strip().lower()
        if p.startswith("*@") and email.endswith(p[1:]):
            return True
        if p == email:
            return True
    return False


def principal_from_oidc(claims: Mapping[str, Any], roles: Mapping[str, Any]) -> Principal:
    """The principal of an OpenID Connect identity (Streamlit's ``st.user``).

    Parameters
    ----------
    claims : mapping
        The identity token's claims: ``email`` (required), ``email_verified`` (when the
        provider sends it, it must be the boolean ``true``: a string is refused),
        ``name``, ``sub``, ``is_logged_in``.
    roles : mapping
        ``[planner.roles]`` from ``secrets.toml``: lists ``owners``, ``analysts``,
        ``viewers`` of addresses or ``*@domain`` patterns. The highest matching role wins.

    Returns
    -------
    Principal
        ``subject = "oidc:<email, lower case>"``, ``via = "oidc"``.

    Raises
    ------
    PermissionDenied
        Not logged in, no e-mail, an unverified e-mail, or an address in no role list.

    Examples
    --------
    >>> p = principal_from_oidc({"email": "Ana@Example.org", "email_verified": True},
    ...                         {"analysts": ["ana@example.org"], "viewers": ["*@example.org"]})
    >>> p.subject, p.role.value
    ('oidc:ana@example.org', 'analyst')
    """
    if not isinstance(claims, Mapping) or claims.get("is_logged_in", True) is not True:
        # strict: only the boolean true (a string "false" or a 0 is not a sign-in)
        raise PermissionDenied("not signed in. Sign in with your organisation's account.")
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email or len(email) > 320:
        raise PermissionDenied(
            "the identity provider sent no e-mail address; the planner maps roles by e-mail. "
            "Ask the administrator to request the 'email' scope."
        )
    verified = claims.get("email_verified", True)
    if verified is not True:  # strict: a string "false" (or "true") is not a boolean claim
        raise PermissionDenied(
            "this e-mail address is not verified (the identity provider's email_verified claim "
            f"is {'false' if verified is False else 'not a boolean'}); verify it, or ask the "
            "administrator to configure the provider to send a boolean email_verified claim."
        )
    email = email.strip().lower()
    if not isinstance(roles, Mapping):
        roles = {}
    for key, role in (("owners", Role.OWNER), ("analysts", Role.ANALYST), ("viewers", Role.VIEWER)):
        listed = roles.get(key, ())
        if isinstance(listed, str):
            listed = [listed]
        if _matches(email, listed if isinstance(listed, Iterable) else ()):
            name = claims.get("name")
            return Principal(f"oidc:{email}", role, name if isinstance(name, str) else email, "oidc")
    raise PermissionDenied(
        f"{email} has no role in this planner. Ask an owner to add the address to "
        "[planner.roles] in .streamlit/secrets.toml."
    )


# --------------------------------------------------------------------------- local sessions


def is_loopback(address: str | None) -> bool:
    """Whether a server bind address only accepts connections from this machine.

    ``127.0.0.0/8``, ``::1`` and ``localhost`` are loopback; an empty or missing address
    (Streamlit's default: every interface), ``0.0.0.0``, ``::`` and any other host are not.

    Examples
    --------
    >>> [is_loopback(a) for a in ("127.0.0.1", "::1", "localhost", "", None, "0.0.0.0")]
    [True, True, True, False, False, False]
    """
    if address is None:
        return False
    a = address.strip().strip("[]").lower()
    if a == "localhost":
        return True
    try:
        return ipaddress.ip_address(a).is_loopback
    except ValueError:
        return False


def local_session_principal(bind_address: str | None, *, accounts_configured: bool,
                            oidc_configured: bool = False) -> Principal | None:
    """The principal of a session nobody signed in to, or ``None`` (sign-in required).

    The rule: :data:`LOCAL_OWNER` only when the app listens on a loopback address
    (:func:`is_loopback`) **and** the ledger has no accounts **and** no OpenID Connect
    sign-in is configured. Anything reachable from another machine, or any ledger with
    accounts, needs a signed-in principal; the engine itself refuses :data:`LOCAL_OWNER`
    on a ledger that has accounts.

    Examples
    --------
    >>> local_session_principal("127.0.0.1", accounts_configured=False) is LOCAL_OWNER
    True
    >>> local_session_principal("0.0.0.0", accounts_configured=False) is None
    True
    """
    if accounts_configured or oidc_configured or not is_loopback(bind_address):
        return None
    return LOCAL_OWNER
