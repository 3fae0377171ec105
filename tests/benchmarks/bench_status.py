"""Benchmark: the budget status of a dataset as its history grows (issue 31, "flat in history").

A ledger keeps one composed accountant per dataset and adds each release's spends to it. This
prints, under every rule, after 10, 100 and 1,000 releases of a mixed history (1–4 spends per
release: Laplace, Gaussian, exponential, randomized response, pure, zCDP, thresholded):

* ``recompose``: composing the whole history again and reading ε (what ``Ledger.status()``
  did per call before incremental composition);
* ``+1 release``: composing one more release onto the kept accountant;
* ``+1 & epsilon``: that, and reading ε of the new accountant (nothing kept yet);
* ``again``: reading ε a second time (the answer is kept);

and the ratio of the 1,000-release time to the 10-release time for the incremental path
(``+1 release`` then ``epsilon``). Two histories: releases drawn from a few plans (a
dataset released daily with the same handful of plans), and every parameter distinct.

Run with ``python tests/benchmarks/bench_status.py [--quick]``. Prints medians; asserts
nothing (timings depend on the machine and its load, printed beside them). Not collected by
pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from planner.privacy.accountants import Accountant, Spend, accountant, total_epsilon
from planner.privacy.accountants.basic import standalone_epsilon
from planner.privacy.budget import CompositionRule
from planner.privacy.events import (
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    ThresholdedEvent,
    ZCDPEvent,
)

DELTA = 1e-5
SIZES = (10, 100, 1000)


def releases(n: int, seed: int, distinct: bool) -> list[list[Spend]]:
    """``n`` releases of 1–4 spends (fixed seed)."""
    rng = random.Random(seed)

    def pick(xs: list[float]) -> float:
        return rng.uniform(min(xs), max(xs)) if distinct else rng.choice(xs)

    out: list[list[Spend]] = []
    for _ in range(n):
        rel: list[Spend] = []
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(7)
            ev: PrivacyEvent
            if k == 0:
                ev = LaplaceEvent(pick([2.0, 4.0, 10.0]))
                rel.append(Spend(ev, 1 / ev.noise_multiplier))
            elif k == 1:
                ev = GaussianEvent(pick([3.0, 5.0, 8.0]))
                rel.append(Spend(ev, standalone_epsilon(ev, 1e-9), 1e-9))
            elif k == 2:
                ev = ExponentialEvent(pick([0.1, 0.3]))
                rel.append(Spend(ev, ev.epsilon))
            elif k == 3:
                ev = RandomizedResponseEvent(pick([0.55, 0.6]))
                rel.append(Spend(ev, standalone_epsilon(ev, 0.0)))
            elif k == 4:
                ev = PureEvent(pick([0.05, 0.2]))
                rel.append(Spend(ev, ev.epsilon))
            elif k == 5:
                ev = ZCDPEvent(pick([0.001, 0.01]))
                rel.append(Spend(ev, standalone_epsilon(ev, 1e-9), 1e-9))
            else:
                ev = ThresholdedEvent(LaplaceEvent(pick([5.0, 20.0])), 1e-10)
                rel.append(Spend(ev, 1 / ev.event.noise_multiplier, 1e-10))
        out.append(rel)
    return out


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def build(rule: CompositionRule, rels: list[list[Spend]]) -> Accountant:
    acct = accountant(rule)
    for rel in rels:
        acct = acct.compose(rel)
    return acct


def run(distinct: bool, quick: bool) -> None:
    print(f"\nhistory: {'every parameter distinct' if distinct else 'releases from a few plans'}")
    print(f"{'rule':9} {'releases':>8} {'recompose':>11} {'+1 release':>11} {'+1 & epsilon':>13} {'again':>11}")
    rels = releases(max(SIZES) + 1, 31, distinct)
    for rule in CompositionRule:
        incremental: dict[int, float] = {}
        for n in SIZES:
            if quick and n == 1000 and rule is CompositionRule.PLD and distinct:
                continue
            every = [s for r in rels[:n] for s in r]
            reps = 3 if n == 1000 else 7
            recompose = median_ms(lambda every=every, rule=rule: total_epsilon(every, rule, DELTA), reps)  # type: ignore[misc]
            acct = build(rule, rels[:n])
            nxt = rels[n]
            plus_ms = median_ms(lambda acct=acct, nxt=nxt: acct.compose(nxt), reps)
            both_ms = median_ms(lambda acct=acct, nxt=nxt: acct.compose(nxt).epsilon(DELTA), reps)
            acct.epsilon(DELTA)
            again_ms = median_ms(lambda acct=acct: acct.epsilon(DELTA), reps)
            incremental[n] = both_ms
            print(f"{rule.value:9} {n:8d} {recompose:9.2f}ms {plus_ms:9.2f}ms {both_ms:11.2f}ms {again_ms:9.4f}ms")
        if 1000 in incremental and 10 in incremental:
            print(f"{'':9} {'':8} ratio 1000/10 of '+1 & epsilon': {incremental[1000] / incremental[10]:.2f}×")


def main() -> None:
    quick = "--quick" in sys.argv
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; δ = {DELTA}")
    run(False, quick)
    run(True, quick)


if __name__ == "__main__":
    main()
