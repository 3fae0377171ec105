"""A throwaway PostgreSQL cluster on 127.0.0.1 for the ledger tests.

``python tests/pg_cluster.py start DIR`` runs Debian's ``initdb`` in ``DIR`` (as the
``postgres`` user when run as root, since PostgreSQL refuses to run as root), starts the
server with ``pg_ctl`` on a free port listening on 127.0.0.1 only (its socket in
``DIR`` too), and prints the SQLAlchemy URL of its ``postgres`` database on stdout.
``python tests/pg_cluster.py stop DIR`` stops it. ``scripts/test`` does both and exports
the URL as ``PLANNER_TEST_PG_URL``; the test fixtures start one themselves when that is
unset (a developer running pytest alone). On failure the reason is printed on stderr
and the exit status is 1; the fixtures then skip the PostgreSQL cases, saying why.

The server runs with ``fsync=off``: the tests kill *clients* (the releasing processes),
never the server, so the server's own durability is not what is tested.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

USER = "planner"


def pg_bin() -> Path | None:
    """The directory of Debian's PostgreSQL server binaries (newest version), if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    return Path(which).resolve().parent if which else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser is None:
        raise RuntimeError("running as root and 'runuser' is missing, so initdb cannot run")
    return [runuser, "-u", "postgres", "--", *cmd]


def start(directory: Path) -> str:
    """Start a cluster in ``directory``; return its URL. Raises RuntimeError saying why not."""
    binaries = pg_bin()
    if binaries is None:
        raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
    directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        try:
            shutil.chown(directory, user="postgres")
        except (LookupError, PermissionError) as exc:
            raise RuntimeError(f"running as root but no 'postgres' user to run the server: {exc}") from exc
        directory.chmod(0o700)
    data = directory / "data"
    port = _free_port()
    init = subprocess.run(
        _as_server_user([str(binaries / "initdb"), "-D", str(data), "-U", USER, "--auth=trust",
                         "-E", "UTF8", "--no-sync"]),
        capture_output=True, text=True, timeout=180, check=False,
    )
    if init.returncode != 0:
        raise RuntimeError(f"initdb failed: {init.stderr.strip()[-500:]}")
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {directory} -c fsync=off -c max_connections=200"
    ctl = subprocess.run(
        _as_server_user([str(binaries / "pg_ctl"), "-D", str(data), "-l", str(directory / "server.log"),
                         "-w", "-t", "60", "-o", opts, "start"]),
        capture_output=True, text=True, timeout=120, check=False,
    )
    if ctl.returncode != 0:
        log = (directory / "server.log")
        tail = log.read_text(errors="replace")[-500:] if log.exists() else ctl.stderr[-500:]
        raise RuntimeError(f"pg_ctl start failed: {tail.strip()}")
    return f"postgresql+psycopg://{USER}@127.0.0.1:{port}/postgres"


def stop(directory: Path) -> None:
    """Stop the cluster in ``directory`` (quietly if it is not running)."""
    binaries = pg_bin()
    if binaries is None or not (directory / "data").exists():
        return
    subprocess.run(
        _as_server_user([str(binaries / "pg_ctl"), "-D", str(directory / "data"), "-m", "immediate",
                         "-w", "stop"]),
        capture_output=True, text=True, timeout=120, check=False,
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: pg_cluster.py start|stop DIR", file=sys.stderr)
        return 2
    directory = Path(argv[1])
    if argv[0] == "stop":
        stop(directory)
        return 0
    try:
        print(start(directory))
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
