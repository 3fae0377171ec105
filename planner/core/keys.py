"""The server secret, and the keyed fingerprints made with it.

Nothing that leaves the system (an export, the command line's output, a page) carries a
bare hash of the data: a bare SHA-256 of a file lets anyone who knows all of it but one
value test guesses about that value offline. What the ledger stores and shows instead is

    fingerprint = HMAC-SHA256(secret, purpose ‖ 0x00 ‖ digest)

which nobody without the server secret can compute, so it cannot be used to test a guess.

Where the secret comes from (first that is set):

1. ``PLANNER_SECRET``: the secret itself (at least 32 characters; e.g. 64 hex digits from
   ``python -c "import secrets; print(secrets.token_hex(32))"``).
2. ``PLANNER_SECRET_FILE``: a file holding it.
3. ``$PLANNER_HOME/secret.key`` (``~/.privacy-budget-planner/secret.key``), created on
   first use with 32 random bytes (hex) and permissions 0600.

A secret file readable by group or others is refused. Every process that opens the same
ledger (several app servers, the command line) must use the same secret: the ledger keeps
an HMAC check value of it and refuses a different one, since fingerprints made with
another secret would silently start a second budget for the same data. Back the secret
up together with the ledger: without it the ledger can still be read with SQL, but the
planner refuses to open it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import threading
from pathlib import Path
from typing import Final

from planner.core.errors import LedgerError

__all__ = [
    "ENV_SECRET",
    "ENV_SECRET_FILE",
    "MIN_SECRET_CHARS",
    "keyed",
    "keyed_fingerprint",
    "random_hex",
    "secret_check",
    "secret_source",
    "server_secret",
]

ENV_SECRET: Final = "PLANNER_SECRET"
ENV_SECRET_FILE: Final = "PLANNER_SECRET_FILE"
MIN_SECRET_CHARS: Final = 32
_FILE_NAME: Final = "secret.key"

_LOCK = threading.Lock()
_CACHE: dict[str, bytes] = {}


def _home() -> Path:
    home = os.environ.get("PLANNER_HOME", "").strip() or "~/.privacy-budget-planner"
    return Path(home).expanduser()


def secret_source() -> str:
    """Where the secret is read from (for messages; never the secret itself)."""
    if os.environ.get(ENV_SECRET, "").strip():
        return f"${ENV_SECRET}"
    path = os.environ.get(ENV_SECRET_FILE, "").strip()
    return str(Path(path).expanduser()) if path else str(_home() / _FILE_NAME)


def _check_secret(value: str, where: str) -> bytes:
    value = value.strip()
    if len(value) < MIN_SECRET_CHARS:
        raise LedgerError(
            f"the server secret from {where} has {len(value)} characters; at least "
            f"{MIN_SECRET_CHARS} are needed. Generate one with "
            "python -c \"import secrets; print(secrets.token_hex(32))\"."
        )
    return value.encode("utf-8")


def _read_secret_file(path: Path) -> bytes:
    try:
        st = path.stat()
    except OSError as exc:
        raise LedgerError(f"cannot read the server secret file {path}: {exc.strerror}.") from exc
    if not stat.S_ISREG(st.st_mode):
        raise LedgerError(f"the server secret file {path} is not a regular file.")
    if st.st_mode & 0o077:
        raise LedgerError(
            f"the server secret file {path} can be read by other users (mode "
            f"{stat.S_IMODE(st.st_mode):o}); run chmod 600 on it."
        )
    try:
        return _check_secret(path.read_text(encoding="utf-8", errors="strict"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"cannot read the server secret file {path} as text.") from exc


def _create_secret_file(path: Path) -> None:
    """Create ``path`` with a new secret, atomically (a racing process keeps the winner's)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LedgerError(
            f"cannot create {path.parent} for the server secret: {exc.strerror}. Set "
            f"{ENV_SECRET} or {ENV_SECRET_FILE}, or point PLANNER_HOME at a writable folder."
        ) from exc
    tmp = path.with_name(f".{_FILE_NAME}.{os.getpid()}.{random_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (random_hex(32) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if another process created it first: keep theirs
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def random_hex(nbytes: int) -> str:
    """``nbytes`` bytes from the operating system's CSPRNG, as hex: key material and
    identifiers (the server secret, dataset keys, temporary names), never noise. The one
    place outside :mod:`planner.release` that takes randomness (its test says so)."""
    return secrets.token_hex(nbytes)


def server_secret() -> bytes:
    """The server secret (see the module docstring for where it comes from).

    Raises
    ------
    LedgerError
        Too short, unreadable, or a secret file readable by other users.
    """
    env = os.environ.get(ENV_SECRET, "")
    if env.strip():
        return _check_secret(env, f"${ENV_SECRET}")
    file_env = os.environ.get(ENV_SECRET_FILE, "").strip()
    path = Path(file_env).expanduser() if file_env else _home() / _FILE_NAME
    key = str(path.resolve()) if path.exists() else str(path)
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None and path.exists():
            return cached
        if not path.exists():
            if file_env:
                raise LedgerError(f"{ENV_SECRET_FILE} names {path}, which does not exist.")
            _create_secret_file(path)
        value = _read_secret_file(path)
        _CACHE[str(path.resolve())] = value
        return value


def keyed(purpose: str, value: str, *, secret: bytes | None = None) -> str:
    """HMAC-SHA256 of ``purpose ‖ 0x00 ‖ value`` under the server secret, as hex."""
    key = server_secret() if secret is None else secret
    return hmac.new(key, purpose.encode() + b"\x00" + value.encode("utf-8"), hashlib.sha256).hexdigest()


def keyed_fingerprint(digest: str, *, secret: bytes | None = None) -> str:
    """The keyed fingerprint of a content digest (or of a legacy file hash).

    This is what the ledger stores and exports; the digest itself never leaves the
    process that computed it.

    Examples
    --------
    >>> keyed_fingerprint("abc", secret=b"k" * 32)[:28]
    'hmac-sha256:8ffa19a5ab584964'
    """
    return "hmac-sha256:" + keyed("planner/content-digest/v1", digest, secret=secret)


def secret_check(*, secret: bytes | None = None) -> str:
    """A value the ledger stores to recognise its secret (reveals nothing about it)."""
    return keyed("planner/secret-check/v1", "ledger", secret=secret)
