"""Benchmark: the ``synthetic_data`` release (MST, AIM) on real public tables, against the
trivial baseline, the sampling floor and, where they are installed, OpenDP ``mbi`` and
SmartNoise (issue 30). A script, not collected by pytest: it prints, it never asserts.

Run from the repository root::

    python tests/benchmarks/bench_synthetic.py                      # every table found, ε 0.5 1 4, 3 reps
    python tests/benchmarks/bench_synthetic.py --quick              # smoke run: one table, ε 1, one rep, 1,000 rows
    python tests/benchmarks/bench_synthetic.py --tables wage fair --data DIR \\
        --peer-python mbi=/venvs/mbi/bin/python --peer-python snsynth=/venvs/snsynth/bin/python
    python tests/benchmarks/bench_synthetic.py --stored-peers tests/benchmarks/data/synthetic_peers_2026-11-28.jsonl

Tables (``tests/benchmarks/data/README.md``: sources, licences, how to download the ones
not in the repository): ISLR *Wage* (3,000 × 11), Fair's affairs survey *fair* (6,366 × 9),
Capital *Bikeshare* 2011 (8,645 × 15). Each is discretised over PUBLIC domains (codebook
categories; numeric columns cut into equal-width bins over bounds from domain knowledge,
never the data's min/max; values outside clipped into the end bins): at most 16 values a
column. Every method below reads the same integer codes.

**The product** runs the release's own path, not a re-implementation: the query
``{"kind": "synthetic_data", "mechanism": "mst" | "aim", "options": {"columns": [...all...],
"rows": n, "sampler": S}}`` (S from ``--sampler``: ``stratified``, the default, or ``iid``;
the rows' ``sampler`` column says which) on a schema declaring every column categorical (its labels are the bins
above), one row per person, add/remove, ``public_n`` = n (these are published tables: their
row counts are public); ``workload.plan`` at (ε, δ = 10⁻⁶) under the zCDP rule (so the
query's share θ is the ρ whose [CKS20] conversion gives ε, the ρ the peers get) →
``release.prepare`` → the prepared item's ``answer(aggregate)`` on the marginal tables the
pandas backend computed. That is the function a release calls after the ledger has
recorded the spend: OpenDP draws every measurement and selection (so repetitions are not
seedable: OpenDP takes its noise from the operating system), the fit and the rows are drawn
by the release's post-processing generator, the answer holds the decoded records, which are
encoded back to bin codes. ``--noise numpy`` runs the planning simulation's path instead
(the same generator and fit, :class:`~planner.planning.synth.privacy.NumpyNoise`, seeded).
Each (table, ε, mechanism) cell runs all its repetitions in one child process of this
interpreter.

**Baselines** (this interpreter, numpy, seeded): the *trivial baseline* spends the same ρ on
the d noisy 1-way histograms (σ = √(d/(2ρ)), clipped at 0, normalised) and draws every
column independently; the *sampling floor* is a bootstrap of the real rows (not private:
what any i.i.d. sample of n rows from the true distribution scores).

**Peers** (``--peer-python NAME=PYTHON``, NAME ``mbi`` or ``snsynth``; a bare PYTHON tries
both): ``synth_peers/opendp_mbi.py`` and ``synth_peers/smartnoise.py`` run in that
interpreter on the same codes (an ``.npz``), MST and AIM, ``--peer-reps`` fits each (default
1: a fit takes minutes), each fit sampled by mbi's default ``round`` sampler and i.i.d.
(``sample``). OpenDP's null category (emitted in a few % of rows) counts as one extra cell
of its column. A peer not given, not installed or failing is printed as such.
``--stored-peers FILE`` prints peer rows measured earlier (JSON lines: ``table``, ``eps``,
``method``, ``sampler``, ``tvd1``, ``tvd2``, ``seconds``, ``peak_mb``) beside the run's own,
labelled as stored.

**Metrics.** TVD = ½Σ|p − q| between normalised marginals of the real and the synthetic
table (n synthetic rows), averaged over every 1-way and every 2-way marginal (all pairs,
measured or not); mean ± standard error over repetitions. *fit+sample s*: wall time of the
answer (ours: measurements, fit, n rows drawn and decoded) or of the peer's fit plus one
sampler, imports and loading excluded; *CPU s*: the same span's CPU time
(``time.process_time``: the process's CPU over all its threads), which a loaded machine
inflates far less than the wall time, so ours and a peer timed under different loads
compare fairly by it. *peak MB*: the child's ``ru_maxrss`` from ``os.wait4`` (the whole
process: interpreter, imports, data, every repetition). ``--write-peers FILE`` appends this
run's peer fits, one JSON line per fit and sampler, in the format ``--stored-peers`` reads.

References
----------
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
   Privacy", NeurIPS 2020, arXiv:2004.00010 (Prop. 12, Cor. 13).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
PEERS = HERE / "synth_peers"
DELTA = 1e-6
RULE = "zcdp"

IntArray = np.ndarray


# ----------------------------------------------------------------------------- tables
@dataclass(frozen=True)
class Cats:
    """A column coded against its declared categories (a value outside them is an error)."""

    values: tuple[Any, ...]

    def code(self, s: pd.Series) -> IntArray:
        lut = {v: i for i, v in enumerate(self.values)}
        codes = s.map(lut)
        if codes.isna().any():
            raise SystemExit(f"column {s.name!r} holds a value outside its declared categories")
        return codes.to_numpy(dtype=np.int64)

    def labels(self) -> list[str]:
        return [str(v) for v in self.values]


@dataclass(frozen=True)
class Bins:
    """A numeric column cut into ``k`` equal-width bins over the public [lo, hi); values
    outside are clipped into the end bins."""

    lo: float
    hi: float
    k: int

    def code(self, s: pd.Series) -> IntArray:
        v = np.floor((s.to_numpy(dtype=np.float64) - self.lo) / (self.hi - self.lo) * self.k)
        return np.clip(v, 0, self.k - 1).astype(np.int64)

    def labels(self) -> list[str]:
        e = np.linspace(self.lo, self.hi, self.k + 1)
        return [f"[{a:g}, {b:g})" for a, b in itertools.pairwise(e)]


Spec = dict[str, Cats | Bins]

WAGE: Spec = {
    "year": Cats(tuple(range(2003, 2010))),  # survey years 2003-2009
    "age": Bins(18, 82, 16),  # working ages, 4-year bins
    "maritl": Cats(("1. Never Married", "2. Married", "3. Widowed", "4. Divorced", "5. Separated")),
    "race": Cats(("1. White", "2. Black", "3. Asian", "4. Other")),
    "education": Cats(("1. < HS Grad", "2. HS Grad", "3. Some College", "4. College Grad", "5. Advanced Degree")),
    "region": Cats(("1. New England", "2. Middle Atlantic", "3. East North Central", "4. West North Central",
                    "5. South Atlantic", "6. East South Central", "7. West South Central", "8. Mountain",
                    "9. Pacific")),  # all nine census divisions (the sample holds one)
    "jobclass": Cats(("1. Industrial", "2. Information")),
    "health": Cats(("1. <=Good", "2. >=Very Good")),
    "health_ins": Cats(("1. Yes", "2. No")),
    "logwage": Bins(3.0, 6.2, 16),  # log(k$/yr): e^3 = 20 k$ .. e^6.2 = 493 k$
    "wage": Bins(0.0, 320.0, 16),  # k$/yr, 20 k$ bins
}
FAIR: Spec = {  # the codebook values of Fair (1978)
    "rate_marriage": Cats((1.0, 2.0, 3.0, 4.0, 5.0)),
    "age": Cats((17.5, 22.0, 27.0, 32.0, 37.0, 42.0)),
    "yrs_married": Cats((0.5, 2.5, 6.0, 9.0, 13.0, 16.5, 23.0)),
    "children": Cats((0.0, 1.0, 2.0, 3.0, 4.0, 5.5)),
    "religious": Cats((1.0, 2.0, 3.0, 4.0)),
    "educ": Cats((9.0, 12.0, 14.0, 16.0, 17.0, 20.0)),
    "occupation": Cats((1.0, 2.0, 3.0, 4.0, 5.0, 6.0)),
    "occupation_husb": Cats((1.0, 2.0, 3.0, 4.0, 5.0, 6.0)),
    "affairs": Bins(0.0, 16.0, 16),  # time spent in affairs, unit bins, clipped at 16
}
BIKESHARE: Spec = {
    "season": Cats((1, 2, 3, 4)),
    "mnth": Cats(("Jan", "Feb", "March", "April", "May", "June", "July", "Aug", "Sept", "Oct", "Nov", "Dec")),
    "day": Bins(1, 369, 16),  # day of the year, 23-day bins
    "hr": Bins(0, 24, 12),  # 2-hour bins
    "holiday": Cats((0, 1)),
    "weekday": Cats(tuple(range(7))),
    "workingday": Cats((0, 1)),
    "weathersit": Cats(("clear", "cloudy/misty", "light rain/snow", "heavy rain/snow")),
    "temp": Bins(0.0, 1.0, 16),  # normalised to [0, 1] by the publisher
    "atemp": Bins(0.0, 1.0, 16),
    "hum": Bins(0.0, 1.0, 16),
    "windspeed": Bins(0.0, 1.0, 16),
    "casual": Bins(0, 400, 16),
    "registered": Bins(0, 960, 16),
    "bikers": Bins(0, 1120, 16),
}
TABLES: dict[str, tuple[str, Spec]] = {
    "wage": ("Wage.csv", WAGE),
    "fair": ("fair.csv", FAIR),
    "bikeshare": ("Bikeshare.csv", BIKESHARE),
}


@dataclass(frozen=True)
class Table:
    name: str
    codes: IntArray  # rows × columns, int64
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    labels: tuple[tuple[str, ...], ...]


def load_table(name: str, data_dir: Path, rows: int | None = None, seed: int = 0) -> Table:
    """The discretised table; ``rows`` keeps a seeded random subset of that many rows."""
    fname, spec = TABLES[name]
    path = data_dir / fname
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: see tests/benchmarks/data/README.md for where to download "
                                f"{fname}, or pass --data DIR")
    df = pd.read_csv(path)
    codes = np.stack([col.code(df[c]) for c, col in spec.items()], axis=1)
    if rows is not None and rows < codes.shape[0]:
        keep = np.sort(np.random.default_rng(seed).choice(codes.shape[0], size=rows, replace=False))
        codes = codes[keep]
    labels = tuple(tuple(col.labels()) for col in spec.values())
    return Table(name, codes, tuple(spec), tuple(len(lab) for lab in labels), labels)


# ----------------------------------------------------------------------------- metrics
def marginal(x: IntArray, sizes: Sequence[int], cols: Sequence[int]) -> np.ndarray:
    k = [sizes[j] for j in cols]
    idx = np.ravel_multi_index(tuple(x[:, j] for j in cols), k)
    return np.bincount(idx, minlength=int(np.prod(k))).astype(np.float64)


def tvd(a: np.ndarray, b: np.ndarray) -> float:
    """½Σ|p − q| between the normalised tables (1 when either is empty)."""
    sa, sb = a.sum(), b.sum()
    return 0.5 * float(np.abs(a / sa - b / sb).sum()) if sa > 0 and sb > 0 else 1.0


def average_tvd(real: IntArray, syn: IntArray, sizes: Sequence[int]) -> tuple[float, float]:
    """Mean TVD over every 1-way and over every 2-way marginal. A synthetic code outside a
    column's domain (OpenDP's null) is counted in one extra cell of that column."""
    syn = np.asarray(syn, dtype=np.int64)
    k = np.asarray(sizes)
    bad = (syn < 0) | (syn >= k[None, :])
    ext = list(sizes)
    if bad.any():
        syn = np.where(bad, k[None, :], syn)
        ext = [int(v) + 1 for v in k]
    d = len(sizes)
    one = [tvd(marginal(real, ext, (j,)), marginal(syn, ext, (j,))) for j in range(d)]
    two = [tvd(marginal(real, ext, (i, j)), marginal(syn, ext, (i, j))) for i in range(d) for j in range(i + 1, d)]
    return float(np.mean(one)), float(np.mean(two)) if two else float("nan")


# ----------------------------------------------------------------------------- the product
def product_schema(t: Table) -> Any:
    from planner.data.schema import Schema

    cols = [{"name": n, "kind": "categorical", "categories": list(lab), "missing": {"action": "drop"}}
            for n, lab in zip(t.names, t.labels, strict=True)]
    return Schema.from_dict({"version": 1, "relation": "add_remove", "public_n": int(t.codes.shape[0]),
                             "privacy_unit": {"column": None, "max_rows": 1}, "columns": cols})


def product_frame(t: Table) -> pd.DataFrame:
    return pd.DataFrame({n: np.asarray(lab, dtype=object)[t.codes[:, j]]
                         for j, (n, lab) in enumerate(zip(t.names, t.labels, strict=True))})


def product_query(t: Table, mechanism: str, sampler: str | None = None) -> dict[str, Any]:
    opts: dict[str, Any] = {"columns": list(t.names), "rows": int(t.codes.shape[0])}
    if sampler is not None:
        opts["sampler"] = sampler
    return {"id": "synthetic", "kind": "synthetic_data", "mechanism": mechanism, "options": opts}


def planned_rho(t: Table, eps: float, mechanism: str = "mst_or_aim") -> tuple[float, str]:
    """The query's share θ (ρ) at (ε, δ) under the zCDP rule, and the generator
    ``mechanism`` runs there (what the plan predicts; no data read)."""
    from planner.planning.queries import Query
    from planner.planning.statistics.synthetic_data import generator
    from planner.planning.workload import plan

    schema = product_schema(t)
    q = Query.from_dict(product_query(t, mechanism))
    q.validate(schema)
    p = plan([q], schema, eps, DELTA, RULE)
    rho = float(p.allocation.items[0].theta)
    return rho, generator(q, schema, rho).generator.value


def product_cell(args: dict[str, Any]) -> None:
    """One (table, ε, mechanism) cell, every repetition, in this (child) process; prints one
    JSON line per repetition."""
    from planner.data.backends import PandasBackend
    from planner.planning.queries import Query
    from planner.planning.statistics import statistic
    from planner.planning.statistics.synthetic_data import accuracy, encode, planned, tables_source
    from planner.planning.synth.domain import Domain
    from planner.planning.synth.privacy import NumpyNoise
    from planner.planning.workload import plan
    from planner.release import prepare

    t = load_table(args["table"], Path(args["data"]), args["rows"], args["subset_seed"])
    schema = product_schema(t)
    q = Query.from_dict(product_query(t, args["mechanism"], args["sampler"]))
    q.validate(schema)
    t0 = time.perf_counter()
    backend = PandasBackend(product_frame(t), schema)
    agg = statistic(q.kind).aggregate(q, backend)
    agg_s = time.perf_counter() - t0
    for rep in range(args["reps"]):
        t0 = time.perf_counter()
        p = plan([q], schema, args["eps"], DELTA, RULE)
        prep = prepare(p, schema)
        (item,) = prep.items
        rho = float(p.allocation.items[0].theta)
        plan_s = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        if args["noise"] == "opendp":
            answer = item.answer(agg)
            codes = encode(answer["records"], q, schema)
            gen, measured = answer["generator"], sum(1 for c in answer["measured"] if len(c) == 2)
        else:
            rng = np.random.default_rng(args["seed"] + rep)
            spec, _ = planned(q, schema, rho)
            noise = NumpyNoise(rng)
            fit = spec.fit(tables_source(agg, Domain(agg.columns, agg.sizes)), rho, rng, noise.measure, noise.select)
            codes = fit.sample(t.codes.shape[0], rng, args["sampler"])
            gen, measured = spec.generator.value, sum(1 for s in fit.selected if len(s) == 2)
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        t1, t2 = average_tvd(t.codes, codes, t.sizes)
        # the plan's data-independent prediction: 1-way and measured 2-way marginals, against
        # the realised error of the same marginals (the pairs this release measured)
        acc = accuracy(q, schema, rho)
        pairs = measured_pairs(answer["measured"], t.names) if args["noise"] == "opendp" else \
            [tuple(sorted(int(v) for v in c)) for c in fit.selected if len(c) == 2]
        real2 = [tvd(marginal(t.codes, t.sizes, c), marginal(codes, t.sizes, c)) for c in dict.fromkeys(pairs)]
        print(json.dumps({"rep": rep, "tvd1": t1, "tvd2": t2, "seconds": secs, "cpu_seconds": cpu,
                          "plan_seconds": plan_s,
                          "aggregate_seconds": agg_s, "rho": rho, "generator": gen, "measured_pairs": measured,
                          "predicted_1way": acc.one_way_mean, "predicted_2way_measured": acc.two_way_mean,
                          "realised_2way_measured": float(np.mean(real2)) if real2 else float("nan")}),
              flush=True)


def measured_pairs(measured: Sequence[Sequence[str]], names: Sequence[str]) -> list[tuple[int, ...]]:
    """The released answer's measured 2-way marginals as column-index pairs."""
    return [tuple(sorted(names.index(c) for c in p)) for p in measured if len(p) == 2]


# ----------------------------------------------------------------------------- children
def run_child(cmd: list[str], timeout: float) -> tuple[int, float, str]:
    """Run ``cmd``; (exit status, peak RSS in MB from os.wait4, its stdout+stderr)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.perf_counter() + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, ru = os.wait4(proc.pid, 0)
                status = -9
                break
            time.sleep(0.1)
        proc.returncode = status
        out.seek(0)
        text = out.read()
    return status, ru.ru_maxrss / 1024.0, text


@dataclass
class Row:
    table: str
    eps: float
    method: str
    sampler: str
    tvd1: list[float]
    tvd2: list[float]
    seconds: list[float]
    peak_mb: float | None
    source: str  # "this run", "stored", ...
    note: str = ""
    cpu_seconds: list[float] = field(default_factory=list)
    versions: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "eps": self.eps, "method": self.method, "sampler": self.sampler,
                "tvd1": self.tvd1, "tvd2": self.tvd2, "seconds": self.seconds, "cpu_seconds": self.cpu_seconds,
                "peak_mb": self.peak_mb, "source": self.source, "note": self.note, "versions": self.versions}


def run_product(t: Table, a: argparse.Namespace, eps: float, mechanism: str) -> Row:
    cell = {"table": t.name, "data": str(a.data), "rows": a.rows, "subset_seed": 0, "eps": eps,
            "mechanism": mechanism, "reps": a.reps, "noise": a.noise, "seed": a.seed, "sampler": a.sampler}
    status, mb, text = run_child([sys.executable, str(Path(__file__).resolve()), "--cell", json.dumps(cell)],
                                 a.timeout)
    reps = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    label = f"ours {mechanism.upper()} ({a.noise} noise)"
    if status != 0 or len(reps) != a.reps:
        return Row(t.name, eps, label, a.sampler, [], [], [], mb, "this run",
                   f"FAILED (exit {status}): {text.strip()[-400:]}")
    gens = sorted({r["generator"] for r in reps})
    note = (f"ρ = {reps[0]['rho']:.6g}, generator {'/'.join(gens)}, {reps[0]['measured_pairs']} 2-way measured; "
            f"predicted 1-way {reps[0]['predicted_1way']:.4f}, measured 2-way "
            f"{reps[0]['predicted_2way_measured']:.4f} (realised "
            f"{np.mean([r['realised_2way_measured'] for r in reps]):.4f}); "
            f"plan+prepare {np.mean([r['plan_seconds'] for r in reps]):.2f} s, "
            f"aggregate {reps[0]['aggregate_seconds']:.2f} s")
    return Row(t.name, eps, label, a.sampler, [r["tvd1"] for r in reps], [r["tvd2"] for r in reps],
               [r["seconds"] for r in reps], mb, "this run", note, [r["cpu_seconds"] for r in reps])


def trivial_baseline(x: IntArray, sizes: Sequence[int], rho: float, rng: np.random.Generator) -> IntArray:
    """ρ spent on the d noisy 1-way histograms (σ = √(d/(2ρ)): d Gaussian measurements of
    sensitivity 1 compose to ρ), clipped at 0, normalised; columns drawn independently."""
    d = len(sizes)
    sigma = math.sqrt(d / (2.0 * rho))
    out = np.empty_like(x)
    for j, k in enumerate(sizes):
        y = np.maximum(marginal(x, sizes, (j,)) + rng.normal(0.0, sigma, k), 0.0)
        p = y / y.sum() if y.sum() > 0 else np.full(k, 1.0 / k)
        out[:, j] = rng.choice(k, size=x.shape[0], p=p)
    return out


def run_baselines(t: Table, a: argparse.Namespace, eps: float, rho: float) -> list[Row]:
    rows = []
    for label, f in (
        ("trivial baseline (independent noisy 1-way)",
         lambda rng: trivial_baseline(t.codes, t.sizes, rho, rng)),
        ("sampling floor (bootstrap, not private)",
         lambda rng: t.codes[rng.integers(0, t.codes.shape[0], t.codes.shape[0])]),
    ):
        r = Row(t.name, eps, label, "iid", [], [], [], None, "this run")
        for rep in range(a.reps):
            rng = np.random.default_rng(a.seed + rep)
            t0 = time.perf_counter()
            syn = f(rng)
            r.seconds.append(time.perf_counter() - t0)
            v1, v2 = average_tvd(t.codes, syn, t.sizes)
            r.tvd1.append(v1)
            r.tvd2.append(v2)
        rows.append(r)
    return rows


# ----------------------------------------------------------------------------- peers
PEER_CODES = {"mbi": "opendp", "snsynth": "sn"}  # the stored file's method prefix
PEER_SCRIPTS = {
    "mbi": ("OpenDP mbi", "opendp_mbi.py", "import opendp.extras.mbi, polars"),
    "snsynth": ("SmartNoise", "smartnoise.py", "import snsynth"),
}


def peer_interpreters(specs: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """``NAME=PYTHON`` (or a bare PYTHON for every peer) → {peer: python}; and why the
    others are not run."""
    given: dict[str, list[str]] = {}
    for s in specs:
        name, sep, py = s.partition("=")
        if sep and name in PEER_SCRIPTS:
            given.setdefault(name, []).append(py)
        elif sep:
            raise SystemExit(f"--peer-python {s!r}: the peer name must be one of {sorted(PEER_SCRIPTS)}")
        else:
            for n in PEER_SCRIPTS:
                given.setdefault(n, []).append(s)
    found: dict[str, str] = {}
    why: list[str] = []
    for name, (label, _script, probe) in PEER_SCRIPTS.items():
        if name not in given:
            why.append(f"{label}: NOT RUN (no --peer-python {name}=PYTHON given)")
            continue
        for py in given[name]:
            if not shutil.which(py) and not Path(py).exists():
                why.append(f"{label}: NOT RUN ({py} does not exist)")
                continue
            ok = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=300)
            if ok.returncode == 0:
                found[name] = py
                break
            why.append(f"{label}: NOT INSTALLED in {py} ({ok.stderr.strip().splitlines()[-1:]})")
    return found, why


def run_peer(t: Table, a: argparse.Namespace, eps: float, rho: float, name: str, py: str, algo: str,
             npz: Path, tmp: Path) -> list[Row]:
    """``--peer-reps`` fits of one peer; each fit's rows are appended to ``--write-peers``
    as soon as it ends (a later failure keeps them)."""
    label, script, _ = PEER_SCRIPTS[name]
    method = f"{label} {algo.upper()}"
    rows = {s: Row(t.name, eps, method, s, [], [], [], None, "this run") for s in ("round", "sample")}
    for rep in range(a.peer_reps):
        out = tmp / f"{t.name}_{eps}_{name}_{algo}_{rep}.npz"
        budget = [repr(rho)] if name == "mbi" else [repr(eps), repr(DELTA)]
        cmd = [py, str(PEERS / script), str(npz), str(out), algo, *budget, str(a.seed + rep)]
        load0 = os.getloadavg()[0]
        w0 = time.perf_counter()
        status, mb, text = run_child(cmd, a.peer_timeout)
        wall, load1 = time.perf_counter() - w0, os.getloadavg()[0]
        record = {"table": t.name, "eps": eps, "rho": rho, "method": f"{PEER_CODES[name]}-{algo}",
                  "seed": a.seed + rep, "peak_mb": mb, "wall": wall, "load_start": load0, "load_end": load1,
                  "date": time.strftime("%Y-%m-%d", time.gmtime())}
        if status != 0 or not out.exists():
            for r in rows.values():
                r.note = f"FAILED (exit {status}): {text.strip()[-300:]}"
            write_peer_rows(a.write_peers, [{**record, "error": text.strip()[-2000:] or f"exit {status}"}])
            return list(rows.values())
        res = np.load(out)
        fit_cpu = float(res["fit_cpu_seconds"]) if "fit_cpu_seconds" in res else float("nan")
        versions = str(res["versions"]) if "versions" in res else ""
        lines = []
        for s, r in rows.items():
            v1, v2 = average_tvd(t.codes, res[s], t.sizes)
            r.tvd1.append(v1)
            r.tvd2.append(v2)
            r.seconds.append(float(res["fit_seconds"] + res[s + "_seconds"]))
            cpu = fit_cpu + float(res[s + "_cpu_seconds"]) if s + "_cpu_seconds" in res else float("nan")
            r.cpu_seconds.append(cpu)
            r.peak_mb = max(r.peak_mb or 0.0, mb)
            r.note = str(res["note"]) or r.note
            r.versions = versions
            invalid = float(np.mean(np.any(np.asarray(res[s]) < 0, axis=1)))
            lines.append({**record, "sampler": s, "seconds": r.seconds[-1], "cpu_seconds": cpu,
                          "fit_seconds": float(res["fit_seconds"]), "fit_cpu_seconds": fit_cpu,
                          "note": str(res["note"]), "versions": versions, "invalid_rows": invalid,
                          "tvd1": v1, "tvd2": v2})
        write_peer_rows(a.write_peers, lines)
    return list(rows.values())


def write_peer_rows(path: Path | None, lines: Sequence[dict[str, Any]]) -> None:
    """Append peer fits to ``path`` (JSON lines, the ``--stored-peers`` format)."""
    if path is not None:
        with path.open("a") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)


PEER_LABELS = {"opendp-mst": "OpenDP mbi MST", "opendp-aim": "OpenDP mbi AIM",
               "sn-mst": "SmartNoise MST", "sn-aim": "SmartNoise AIM"}


def stored_peers(path: Path, tables: Sequence[str], eps: Sequence[float]) -> list[Row]:
    """Peer rows measured earlier (JSON lines), labelled as stored; failed cells kept."""
    out: dict[tuple[str, float, str, str], Row] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r["table"] not in tables or not any(math.isclose(r["eps"], e) for e in eps):
            continue
        key = (r["table"], float(r["eps"]), r["method"], r.get("sampler", "—"))
        row = out.setdefault(key, Row(r["table"], float(r["eps"]), PEER_LABELS.get(r["method"], r["method"]),
                                      r.get("sampler", "—"), [], [], [], r.get("peak_mb"), f"stored ({path.name})"))
        if "error" in r:
            row.note = "FAILED: " + r["error"].strip().splitlines()[-1][:200]
            continue
        row.tvd1.append(float(r["tvd1"]))
        row.tvd2.append(float(r["tvd2"]))
        row.seconds.append(float(r["seconds"]))
        if "cpu_seconds" in r:
            row.cpu_seconds.append(float(r["cpu_seconds"]))
        row.peak_mb = max(row.peak_mb or 0.0, float(r["peak_mb"]))
        row.note = r.get("note", "") or row.note
        row.versions = r.get("versions", "") or row.versions
    return list(out.values())


# ----------------------------------------------------------------------------- printing
def ms(v: Sequence[float], digits: int = 4) -> str:
    if not v:
        return "—"
    m = float(np.mean(v))
    if len(v) == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {float(np.std(v, ddof=1)) / math.sqrt(len(v)):.{digits}f}"


def print_rows(rows: Sequence[Row]) -> None:
    head = ("| table | ε | method | sampler | reps | 1-way TVD | 2-way TVD | fit+sample s | CPU s | peak MB "
            "| source | note |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        mb = f"{r.peak_mb:.0f}" if r.peak_mb is not None else "—"
        print(f"| {r.table} | {r.eps:g} | {r.method} | {r.sampler} | {len(r.tvd2)} | {ms(r.tvd1)} | {ms(r.tvd2)} "
              f"| {ms(r.seconds, 2)} | {ms(r.cpu_seconds, 2)} | {mb} | {r.source} "
              f"| {r.note}{' [' + r.versions + ']' if r.versions else ''} |")


def print_verdict(rows: Sequence[Row]) -> None:
    """Per (table, ε): the goal 2-way TVD ≤ the best peer's, ≤ 1/10 of its time, < 500 MB."""
    print("\nGoal per cell: ours (best of MST/AIM by mean 2-way TVD) at or below the best peer's 2-way TVD "
          "(minimum over peers × samplers), in a tenth of that peer's time, under 500 MB.")
    print("| table | ε | ours (which) | ours s | ours CPU s | ours MB | best peer (which, source) | peer s "
          "| peer CPU s | trivial | floor | TVD ≤ peer | ≤ 1/10 time (wall) | ≤ 1/10 time (CPU) | < 500 MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    cells = sorted({(r.table, r.eps) for r in rows})
    for tab, eps in cells:
        here = [r for r in rows if (r.table, r.eps) == (tab, eps) and r.tvd2]
        ours = [r for r in here if r.method.startswith("ours")]
        peers = [r for r in here if r.method.split()[0] in ("OpenDP", "SmartNoise")]
        triv = [r for r in here if r.method.startswith("trivial")]
        floor = [r for r in here if r.method.startswith("sampling")]
        if not ours:
            continue
        o = min(ours, key=lambda r: float(np.mean(r.tvd2)))
        o2, os_ = float(np.mean(o.tvd2)), float(np.mean(o.seconds))
        oc = float(np.mean(o.cpu_seconds)) if o.cpu_seconds else float("nan")
        omb = max(r.peak_mb or 0.0 for r in ours)
        t_s = ms(triv[0].tvd2) if triv else "—"
        f_s = ms(floor[0].tvd2) if floor else "—"
        if not peers:
            print(f"| {tab} | {eps:g} | {o2:.4f} ({o.method}) | {os_:.2f} | {oc:.2f} | {omb:.0f} "
                  f"| NO PEER MEASURED | — | — | {t_s} | {f_s} | — | — | — | {'yes' if omb < 500 else 'NO'} |")
            continue
        p = min(peers, key=lambda r: float(np.mean(r.tvd2)))
        p2, ps = float(np.mean(p.tvd2)), float(np.mean(p.seconds))
        pc = float(np.mean(p.cpu_seconds)) if p.cpu_seconds else float("nan")
        cpu_ok = "—" if math.isnan(pc) or math.isnan(oc) else \
            f"{'yes' if oc * 10 <= pc else 'NO'} ({pc / oc:.0f}×)"
        print(f"| {tab} | {eps:g} | {o2:.4f} ({o.method}) | {os_:.2f} | {oc:.2f} | {omb:.0f} | {p2:.4f} ({p.method} "
              f"{p.sampler}, {p.source}) | {ps:.1f} | {pc:.1f} | {t_s} | {f_s} | {'yes' if o2 <= p2 else 'NO'} "
              f"| {'yes' if os_ * 10 <= ps else 'NO'} ({ps / os_:.0f}×) | {cpu_ok} | {'yes' if omb < 500 else 'NO'} |")


# ----------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", nargs="+", choices=sorted(TABLES), default=None,
                    help="tables to run (default: every one found in --data)")
    ap.add_argument("--data", type=Path, default=DATA, help=f"folder holding the CSV files (default {DATA})")
    ap.add_argument("--eps", nargs="+", type=float, default=[0.5, 1.0, 4.0], help="ε values (δ = 1e-6)")
    ap.add_argument("--mechanisms", nargs="+", choices=["mst", "aim", "mst_or_aim"], default=["mst", "aim"])
    ap.add_argument("--reps", type=int, default=3, help="repetitions of ours and the baselines (default 3)")
    ap.add_argument("--seed", type=int, default=0, help="first seed of the baselines, numpy noise and peers")
    ap.add_argument("--rows", type=int, default=None, help="keep a seeded random subset of this many rows")
    ap.add_argument("--noise", choices=["opendp", "numpy"], default="opendp",
                    help="opendp: the release path (default); numpy: the planning simulation's path, seeded")
    ap.add_argument("--sampler", choices=["stratified", "iid"], default="stratified",
                    help="how ours draws its rows (the query's 'sampler' option; default stratified)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per cell of ours")
    ap.add_argument("--peer-python", action="append", default=[], metavar="NAME=PYTHON",
                    help="run a peer in that interpreter: mbi=... (opendp[mbi]) or snsynth=... (smartnoise-synth); "
                         "a bare PYTHON tries both. Repeatable.")
    ap.add_argument("--peer-algos", nargs="+", choices=["mst", "aim"], default=["mst", "aim"])
    ap.add_argument("--peer-reps", type=int, default=1, help="fits per peer cell (default 1: minutes each)")
    ap.add_argument("--peer-timeout", type=float, default=3600.0, help="seconds per peer fit")
    ap.add_argument("--stored-peers", type=Path, action="append", default=[],
                    help="JSON lines of peer rows measured earlier, printed beside this run's (labelled stored). "
                         "Repeatable.")
    ap.add_argument("--write-peers", type=Path, default=None,
                    help="append this run's peer fits here (JSON lines, the --stored-peers format)")
    ap.add_argument("--json", type=Path, default=None, help="write every row here")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: one table, ε = 1, one repetition, 1,000 rows (not a reported result)")
    ap.add_argument("--cell", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.cell:
        product_cell(json.loads(a.cell))
        return 0
    if a.quick:
        a.eps, a.reps, a.rows = [1.0], 1, a.rows or 1000
        a.peer_reps = 1
    if a.tables is None:
        a.tables = [t for t, (f, _) in TABLES.items() if (a.data / f).exists()]
        if a.quick:
            a.tables = a.tables[:1]
        if not a.tables:
            print(f"no table found in {a.data}: see tests/benchmarks/data/README.md, or pass --data DIR",
                  file=sys.stderr)
            return 2
    try:
        tables = [load_table(t, a.data, a.rows) for t in a.tables]
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    found, why = peer_interpreters(a.peer_python)
    load = os.getloadavg()
    print(f"# bench_synthetic: tables {a.tables}, ε {a.eps}, δ {DELTA:g}, rule {RULE}, {a.reps} reps, noise {a.noise}, "
          f"our sampler {a.sampler}"
          f"{', rows ' + str(a.rows) if a.rows else ''}; {os.cpu_count()} cores, load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    for w in why:
        print(f"# peer {w}")
    for name, py in found.items():
        print(f"# peer {PEER_SCRIPTS[name][0]}: {py}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench_synthetic_") as tmpdir:
        tmp = Path(tmpdir)
        for t in tables:
            npz = tmp / f"{t.name}.npz"
            np.savez(npz, records=t.codes, sizes=np.array(t.sizes), names=np.array(t.names))
            print(f"# {t.name}: {t.codes.shape[0]} rows × {len(t.names)} columns, sizes {list(t.sizes)}, "
                  f"{len(t.names) * (len(t.names) - 1) // 2} pairs", flush=True)
            for eps in a.eps:
                rho, default_gen = planned_rho(t, eps)
                print(f"#   ε = {eps:g}: ρ = {rho:.6g}; the default mechanism (mst_or_aim) runs {default_gen}",
                      flush=True)
                cell = run_baselines(t, a, eps, rho)
                for m in a.mechanisms:
                    cell.append(run_product(t, a, eps, m))
                for name, py in found.items():
                    for algo in a.peer_algos:
                        cell.extend(run_peer(t, a, eps, rho, name, py, algo, npz, tmp))
                print_rows(cell)
                rows.extend(cell)
    for path in a.stored_peers:
        stored = stored_peers(path, a.tables, a.eps)
        print(f"\n# peer rows measured earlier ({path}; not rerun here)")
        print_rows(stored)
        rows.extend(stored)
    missing = sorted({(t, e) for t in a.tables for e in a.eps}
                     - {(r.table, r.eps) for r in rows if r.method.split()[0] in ("OpenDP", "SmartNoise") and r.tvd2})
    if missing:
        print("\n# NO PEER MEASURED for " + ", ".join(f"{t} ε={e:g}" for t, e in missing))
    print_verdict(rows)
    end = os.getloadavg()
    print(f"\n# load average at the end {end[0]:.1f} {end[1]:.1f} {end[2]:.1f}")
    if a.json is not None:
        a.json.write_text("".join(json.dumps(r.as_dict()) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
