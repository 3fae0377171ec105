"""Ledger fixtures: every concurrency, crash and corruption test runs on SQLite and on a
live PostgreSQL server.

``ledger_url`` is parametrised ``sqlite`` / ``postgresql``. The PostgreSQL case gets a
fresh database of its own in the throwaway cluster that ``scripts/test`` started
(``PLANNER_TEST_PG_URL``); when that variable is unset, a cluster is started here for
the session (``tests/pg_cluster.py``). Only when no server can be started are the
PostgreSQL cases skipped, with the reason.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import pg_cluster

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """URL of the cluster's ``postgres`` database (a superuser connection)."""
    url = os.environ.get("PLANNER_TEST_PG_URL", "").strip()
    if url:
        yield url
        return
    reason = os.environ.get("PLANNER_TEST_PG_SKIP_REASON", "").strip()
    if reason:
        pytest.skip(f"PostgreSQL could not be started by scripts/test: {reason}")
    directory = Path(tempfile.mkdtemp(prefix="planner-pg-"))
    directory.chmod(0o755)
    try:
        url = pg_cluster.start(directory / "cluster")
    except (RuntimeError, OSError) as exc:
        pytest.skip(f"PostgreSQL could not be started: {exc}")
    try:
        yield url
    finally:
        pg_cluster.stop(directory / "cluster")


def _fresh_database(admin_url: str) -> tuple[str, str]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"ledger_{uuid.uuid4().hex[:16]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False), name


def _drop_database(admin_url: str, name: str) -> None:
    from sqlalchemy import create_engine, text

    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    url, name = _fresh_database(pg_admin_url)
    try:
        yield url
    finally:
        _drop_database(pg_admin_url, name)


@pytest.fixture(params=BACKENDS)
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL where no ledger exists yet: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url
