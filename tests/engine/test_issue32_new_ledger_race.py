"""Issue 32: a new ledger opened by many at once is never reported as damaged.

24 racers (24 processes; 24 threads of one process; 8 processes of 3 threads) start
together against a location where no ledger exists yet (a SQLite file that does not exist;
an empty PostgreSQL database). Each opens its own ``Ledger`` (so any of them may create
it), registers the one dataset with the lifetime budget ε = 1 (idempotent), and releases
its own plan of ε = 0.25; 4 × 0.25 = 1 exactly (basic composition, a hand sum), so exactly
4 releases fit. Every racer must end released or refused for budget — never "no head
record: it is damaged or was emptied" (the creator had made the tables but not yet the
head record) nor any other error; exactly 4 are done, the spent total is exactly the
budget, and the new ledger verifies. Each shape runs ``ROUNDS`` times (3 on SQLite, 2 on
PostgreSQL), each time at a new location.

The emptied-ledger refusals stay as they are (``test_ledger_integrity.py``:
``test_integrity_missing_head_is_refused`` and the emptied and truncated cases).
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from planner.ledger import Ledger, ReleaseStatus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ledger_workers.new_ledger_race import race_process, race_threads

RACERS = 24
COST = 0.25
TOTAL = 1.0
FITS = 4  # 4 × 0.25 = 1.0 (hand sum, basic rule)
#: rounds per shape, each at a new location (PostgreSQL's are slower: a server connection each)
ROUNDS = {"sqlite": 3, "postgresql": 2}
FP = "sha256:new-ledger-race"


@pytest.fixture(params=["sqlite", "postgresql"])
def new_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Callable[[], str]]]:
    """(the database, a maker of locations where no ledger exists yet: a new SQLite path, or
    a new empty PostgreSQL database, dropped afterwards)."""
    made: list[str] = []
    if request.param == "sqlite":
        def sqlite() -> str:
            return f"sqlite:///{tmp_path / f'ledger-{uuid.uuid4().hex[:8]}.db'}"

        yield "sqlite", sqlite
        return
    admin_url: str = request.getfixturevalue("pg_admin_url")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")

    def postgresql() -> str:
        name = f"ledger_race_{uuid.uuid4().hex[:12]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        made.append(name)
        return make_url(admin_url).set(database=name).render_as_string(hide_password=False)

    try:
        yield "postgresql", postgresql
    finally:
        with admin.connect() as conn:
            for name in made:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _start_method() -> str:
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def _race(url: str, processes: int, threads: int) -> list[tuple[str, str]]:
    plans = [f"plan-{i}" for i in range(processes * threads)]
    if processes == 1:
        return race_threads(url, FP, plans, COST, TOTAL)
    ctx = mp.get_context(_start_method())
    start = ctx.Barrier(processes)
    results = ctx.Queue()
    procs = [ctx.Process(target=race_process,
                         args=(url, FP, plans[i * threads:(i + 1) * threads], COST, TOTAL, start, results))
             for i in range(processes)]
    for p in procs:
        p.start()
    got = [item for _ in procs for item in results.get(timeout=180)]
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return got


def _check(url: str, got: list[tuple[str, str]], round_: int) -> None:
    others = sorted({o for _, o in got if o not in ("done", "exceeded")})
    assert not others, f"round {round_}: {len(others)} kind(s) of failure, e.g. {others[:3]}"
    assert Counter(o for _, o in got) == {"done": FITS, "exceeded": RACERS - FITS}, (round_, Counter(o for _, o in got))
    led = Ledger(url)
    try:
        st = led.status(FP)
        assert st.releases == FITS and st.epsilon_spent == pytest.approx(TOTAL, rel=1e-12)
        assert st.epsilon_spent <= TOTAL * (1 + 1e-12)
        assert all(r.status is ReleaseStatus.DONE for r in led.releases(FP))
        assert [d.name for d in led.datasets()] == ["race"]
        assert led.verify().ok, led.verify().problems
    finally:
        led.close()


@pytest.mark.fault
@pytest.mark.parametrize(("processes", "threads"), [(RACERS, 1), (1, RACERS), (8, 3)],
                         ids=["24_processes", "24_threads", "8_processes_x_3_threads"])
def test_a_new_ledger_opened_by_many_at_once_is_never_damaged(
    new_location: tuple[str, Callable[[], str]], processes: int, threads: int
) -> None:
    backend, make = new_location
    for round_ in range(1, ROUNDS[backend] + 1):
        url = make()
        got = _race(url, processes, threads)
        assert len(got) == RACERS
        _check(url, got, round_)
