"""Benchmark: the product's release path against OpenDP's best pipeline, statistic by statistic.

Issue 18: "for one statistic at one ε, a user who skips this product and calls OpenDP
directly should never get a smaller error". Run from the repository root (a script, not
collected by pytest; it prints, it never asserts)::

    python tests/benchmarks/bench_accuracy_vs_opendp.py [--rows 100000] [--reps 300]
        [--eps 0.01 0.1 1] [--c 1 3] [--only median,mean] [--time-rows 1000000]
        [--no-grid] [--no-headline] [--no-time] [--no-workload] [--json out.json]
        [--confirm-reps 1200] [--quick] [--only-time] [--time-reps 5]

``--only-time`` runs only the time section (about a minute at 1e6 rows).

The reported table is the default run (about 5 minutes on 2 idle cores); ``--quick`` is a
smoke run on a smaller table, not the reported table.

Setting (the issue's): pure ε (basic composition, δ = 0), the add/remove relation
(OpenDP's ``symmetric_distance``), c rows per person (person i // c owns row i, so every
person has exactly c rows: OpenDP's ``d_in = c``). One synthetic table, seeded: a
log-normal ``income`` (float, [0, 200 000]), the same rounded to whole numbers
(``income_int``, declared integer-valued), an integer ``age`` ([0, 120]: many ties on
an integer grid), a skewed ``region`` (8 categories, the two largest 0.5 % of n apart), a
boolean ``flag`` (30 % true). The schema declares ``public_n`` = the true n.

For every statistic, ε and c, both sides answer the same question at the same privacy
cost (the product's recorded ε and OpenDP's own privacy map at d_in = c are printed):

* **product** — the release path: ``workload.plan`` → ``release.prepare`` → the item's
  ``answer(aggregate)`` on the aggregate the pandas backend computed from the table (the
  aggregate is exact and deterministic, so drawing from it again is drawing a new
  release);
* **OpenDP** — the best pipeline OpenDP 0.16 offers for that question, built from its own
  constructors, calibrated by ``binary_search_param`` to ε at d_in = c, and invoked on
  the raw column each repetition (several pipelines where it offers several: the one with
  the smallest MAE on 100 separate pilot repetitions is the reference, then measured on
  fresh repetitions, so picking the luckiest of several does not favour OpenDP; every
  pilot MAE is printed).

Errors: |released − truth| (truth from the clipped data: the sum, the mean, the
proportion, the empirical α-quantile, each bin's count, each group's mean; for the mode
the count gap between the true mode and the released category), pooled over bins/groups.
The table prints, per row, the product's and OpenDP's mean absolute error (MAE) and 90th
percentile (p90), the ratios product ÷ OpenDP with a 95 % bootstrap interval (2000
resamples of the repetitions), and ``WORSE`` where the whole interval of a ratio lies
above 1 (the product is less accurate beyond sampling error). With about 200 intervals,
a few are expected above 1 by chance at exact parity, so a WORSE row is re-run on
``--confirm-reps`` fresh repetitions (default 4 × ``--reps``) and reported "confirmed"
only if it is WORSE again. ``noise P/O`` is the product's noise scale ÷ OpenDP's
calibrated scale, in the released value's units (ranks for quantiles), where both sides
add one noise of one scale: 1.0000 means the same noise distribution (any difference in
the error is sampling), below 1 less noise; "—" where no single scale compares (sum over
count, selection among categories, the Context API).

Then: the issue's headline case (the median at ε = 0.001 on 1e6 rows, 1001 candidates);
time ratios at ``--time-rows`` (both from the same in-memory table, file reading in
neither; the product's whole release: backend, plan, measurements, the budget checked and
the spend recorded in a SQLite ledger, the aggregate, noise, the answer stored; the
dataset's lifetime budget is registered before the timer and timed apart; OpenDP: the
columns taken from the table, building the measurement, calibration included, and
invoking it; each side's steps are printed, see :func:`time_case`); and a workload where the product's optimal split across queries
beats OpenDP's even split (``Context(split_evenly_over=k)``), with the factor.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import opendp.prelude as dp  # noqa: E402

from planner.core.errors import QueryError  # noqa: E402
from planner.data.backends.pandas_backend import PandasBackend  # noqa: E402
from planner.data.schema import Schema  # noqa: E402
from planner.planning.queries import Query  # noqa: E402
from planner.planning.statistics import statistic  # noqa: E402
from planner.planning.workload import plan  # noqa: E402
from planner.release import prepare  # noqa: E402

dp.enable_features("contrib")

try:  # the Context (polars) API: OpenDP's dataframe front end, for grouped statistics
    import polars as pl
except ImportError:  # printed, never silent: the rows that need it say so
    pl = None

INCOME = (0.0, 200_000.0)
AGE = (0.0, 120.0)
REGIONS = tuple(f"r{i}" for i in range(8))
REGION_P = np.array([0.200, 0.195, 0.15, 0.13, 0.12, 0.09, 0.07, 0.045])
REGION_P = REGION_P / REGION_P.sum()
INCOME_CANDIDATES = 1001
AGE_CANDIDATES = 121  # the integers 0..120


# ----------------------------------------------------------------------------- data


def make_table(n: int, c: int, seed: int = 18) -> pd.DataFrame:
    """The synthetic table (module docstring); person i // c owns row i."""
    rng = np.random.default_rng(seed)
    income = np.exp(rng.normal(10.6, 0.75, n))
    age = np.clip(np.rint(rng.normal(44, 16, n)), 0, 120)
    region = rng.choice(np.array(REGIONS), size=n, p=REGION_P)
    return pd.DataFrame({
        "pid": (np.arange(n) // c).astype(np.int64),
        "income": income,
        "income_int": np.rint(income),
        "age": age,
        "region": region,
        "flag": rng.random(n) < 0.3,
    })


def make_schema(c: int, n: int, integer_income: bool = True) -> Schema:
    inc_int: dict[str, Any] = {"name": "income_int", "kind": "numeric", "lower": INCOME[0], "upper": INCOME[1],
                               "missing": {"action": "drop"}}
    if integer_income and _schema_has_integer():
        inc_int["integer"] = True
    cols: list[dict[str, Any]] = [
        {"name": "pid", "kind": "identifier"},
        {"name": "income", "kind": "numeric", "lower": INCOME[0], "upper": INCOME[1], "missing": {"action": "drop"}},
        inc_int,
        {"name": "age", "kind": "numeric", "lower": AGE[0], "upper": AGE[1], "missing": {"action": "drop"},
         **({"integer": True} if _schema_has_integer() else {})},
        {"name": "region", "kind": "categorical", "categories": list(REGIONS), "missing": {"action": "drop"}},
        {"name": "flag", "kind": "boolean", "missing": {"action": "drop"}},
    ]
    unit = {"column": "pid", "max_rows": c} if c > 1 else {"column": None, "max_rows": 1}
    return Schema.from_dict({"version": 1, "relation": "add_remove", "public_n": n, "privacy_unit": unit,
                             "columns": cols})


def _schema_has_integer() -> bool:
    """Whether this checkout's schema accepts the owner's ``integer`` declaration (the
    benchmark runs on checkouts before and after it existed)."""
    from planner.data.schema import Column

    return "integer" in getattr(Column, "__dataclass_fields__", {})


# ----------------------------------------------------------------------------- OpenDP pipelines

F64 = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()
I64 = dp.vector_domain(dp.atom_domain(T="i64")), dp.symmetric_distance()
CODES = list(range(len(REGIONS)))


def region_codes(df: pd.DataFrame) -> np.ndarray:
    """The region as integer codes 0..7 (OpenDP reads an i64 array far faster than a list
    of strings; the counts are the same)."""
    return np.array(pd.Categorical(df["region"], categories=list(REGIONS)).codes, dtype=np.int64)


_SCALES: dict[int, float] = {}  # id(measurement) → the scale calibrate() found for it


def calibrate(make: Callable[[float], Any], c: int, eps: float) -> Any:
    """The measurement ``make(scale)`` at the smallest scale whose privacy map at d_in = c
    is ≤ ε (OpenDP's own binary search); the scale is kept for :func:`scale_of`."""
    scale = dp.binary_search_param(make, d_in=c, d_out=eps, T=float)
    m = make(scale)
    _SCALES[id(m)] = float(scale)
    return m


@dataclass
class Pipeline:
    """One OpenDP pipeline: ``build(eps, c)`` → a function of the inputs → released value.

    ``scale(eps, c)`` (after ``build``): the noise scale OpenDP calibrated, in the released
    value's units (``unit`` divides it: e.g. a sum's scale ÷ public n for a mean), NaN when
    the pipeline has no single scale comparable with the product's."""

    name: str
    build: Callable[[float, int], Callable[[dict[str, Any]], Any]]
    cost: Callable[[float, int], float] = field(default=lambda eps, c: math.nan)
    scale: Callable[[float, int], float] = field(default=lambda eps, c: math.nan)


def _meas_pipeline(name: str, make: Callable[[float], Any], column: str,
                   post: Callable[[Any], Any] = lambda v: v, unit: Callable[[], float] = lambda: 1.0) -> Pipeline:
    cache: dict[tuple[float, int], Any] = {}

    def build(eps: float, c: int) -> Callable[[dict[str, Any]], Any]:
        m = calibrate(make, c, eps)
        cache[(eps, c)] = m
        return lambda inputs: post(m(inputs[column]))

    return Pipeline(name, build, lambda eps, c: float(cache[(eps, c)].map(c)),
                    lambda eps, c: _SCALES[id(cache[(eps, c)])] / unit())


def od_count() -> list[Pipeline]:
    return [_meas_pipeline("make_count >> laplace (discrete)",
                           lambda s: I64 >> dp.t.then_count() >> dp.m.then_laplace(scale=s), "region_code")]


def od_sum_float() -> list[Pipeline]:
    return [_meas_pipeline("clamp >> make_sum(float) >> laplace",
                           lambda s: F64 >> dp.t.then_clamp(INCOME) >> dp.t.then_sum() >> dp.m.then_laplace(scale=s),
                           "income")]


def od_sum_int() -> list[Pipeline]:
    b = (int(INCOME[0]), int(INCOME[1]))
    return [
        _meas_pipeline("clamp >> make_sum(i64) >> laplace (discrete)",
                       lambda s: I64 >> dp.t.then_clamp(b) >> dp.t.then_sum() >> dp.m.then_laplace(scale=s),
                       "income_int_i64"),
        _meas_pipeline("clamp >> make_sum(float) >> laplace",
                       lambda s: F64 >> dp.t.then_clamp(INCOME) >> dp.t.then_sum() >> dp.m.then_laplace(scale=s),
                       "income_int_f64"),
    ]


def _split_sum_count(lo: float, hi: float, column: str, shift: float) -> Pipeline:
    """Noisy Σ(x − shift) ÷ noisy count (each at ε/2: what the Context API's ``dp.mean``
    does), clipped to [L, U]; shift 0 is OpenDP's own (uncentred) sum."""
    cache: dict[tuple[float, int], float] = {}

    def build(eps: float, c: int) -> Callable[[dict[str, Any]], Any]:
        ms = calibrate(lambda s: F64 >> dp.t.then_clamp((lo - shift, hi - shift)) >> dp.t.then_sum()
                       >> dp.m.then_laplace(scale=s), c, eps / 2)
        mc = calibrate(lambda s: F64 >> dp.t.then_count() >> dp.m.then_laplace(scale=s), c, eps / 2)
        cache[(eps, c)] = float(ms.map(c)) + float(mc.map(c))

        def run(inputs: dict[str, Any]) -> float:
            x = inputs[column + ("" if shift == 0 else "_shifted")]
            return float(np.clip(shift + ms(x) / max(mc(x), 1), lo, hi))

        return run

    name = "sum ÷ count (ε/2 each" + (", centred)" if shift else ")")
    return Pipeline(name, build, lambda eps, c: cache[(eps, c)])


def od_mean() -> list[Pipeline]:
    lo, hi = INCOME
    mid = (lo + hi) / 2

    def resize_mean(s: float) -> Any:
        n = _INPUTS["n"]
        return (F64 >> dp.t.then_clamp(INCOME) >> dp.t.then_resize(size=n, constant=mid)
                >> dp.t.then_mean() >> dp.m.then_laplace(scale=s))

    def sum_over_n(s: float) -> Any:
        return F64 >> dp.t.then_clamp((lo - mid, hi - mid)) >> dp.t.then_sum() >> dp.m.then_laplace(scale=s)

    rm = _meas_pipeline("clamp >> resize(public n) >> make_mean >> laplace", resize_mean, "income")
    so = _meas_pipeline("centred sum ÷ public n", sum_over_n, "income_shifted", unit=lambda: float(_INPUTS["n"]))
    base_so = so.build

    def so_build(eps: float, c: int) -> Callable[[dict[str, Any]], Any]:
        f = base_so(eps, c)
        n = _INPUTS["n"]
        return lambda inputs: mid + f(inputs) / n

    so.build = so_build
    return [_split_sum_count(lo, hi, "income", 0.0), rm, so]


def od_proportion() -> list[Pipeline]:
    def make(s: float) -> Any:
        return I64 >> dp.t.then_count_by_categories(categories=[1, 0], null_category=False) \
            >> dp.m.then_laplace(scale=s)

    def post(v: Any) -> float:
        t, f = max(v[0], 0), max(v[1], 0)
        return t / (t + f) if t + f > 0 else 0.5

    cache: dict[str, int] = {}

    def make_sum(s: float) -> Any:
        return (dp.vector_domain(dp.atom_domain(T="i64")), dp.symmetric_distance()) >> dp.t.then_clamp((0, 1)) \
            >> dp.t.then_sum() >> dp.m.then_laplace(scale=s)

    p_sum = _meas_pipeline("make_sum(0/1) ÷ public n", make_sum, "flag_i64")
    base = p_sum.build

    def b2(eps: float, c: int) -> Callable[[dict[str, Any]], Any]:
        f = base(eps, c)
        return lambda inputs: min(max(f(inputs) / inputs["n"], 0.0), 1.0)

    p_sum.build = b2
    del cache
    return [_meas_pipeline("count_by_categories([T, F]) >> laplace, t/(t+f)", make, "flag_i64", post), p_sum]


def od_histogram() -> list[Pipeline]:
    return [_meas_pipeline("make_count_by_categories >> laplace (discrete)",
                           lambda s: I64 >> dp.t.then_count_by_categories(categories=CODES, null_category=False)
                           >> dp.m.then_laplace(scale=s), "region_code", lambda v: np.asarray(v, dtype=np.float64))]


def od_mode() -> list[Pipeline]:
    # make_count_by_categories only outputs L1/L2 distances, and make_noisy_max needs L∞:
    # OpenDP's own route to the mode is the noisy histogram's argmax (post-processing).
    return [_meas_pipeline("count_by_categories >> laplace, argmax",
                           lambda s: I64 >> dp.t.then_count_by_categories(categories=CODES, null_category=False)
                           >> dp.m.then_laplace(scale=s), "region_code", lambda v: REGIONS[int(np.argmax(v))])]


def od_quantile(alpha: float, column: str, candidates: Sequence[float]) -> list[Pipeline]:
    cands = [float(x) for x in candidates]
    bounds = INCOME if column.startswith("income") else AGE
    return [_meas_pipeline(f"clamp >> make_private_quantile(α={alpha:g}, {len(cands)} candidates)",
                           lambda s: F64 >> dp.t.then_clamp(bounds) >> dp.m.then_private_quantile(
                               dp.max_divergence(), candidates=cands, alpha=alpha, scale=s), column)]


def od_grouped_mean() -> list[Pipeline]:
    if pl is None:
        return []
    cache: dict[tuple[float, int], float] = {}

    def build(eps: float, c: int) -> Callable[[dict[str, Any]], Any]:
        lf = _INPUTS["lazy"]
        ctx = dp.Context.compositor(
            data=lf, privacy_unit=dp.unit_of(contributions=c), privacy_loss=dp.loss_of(epsilon=eps),
            split_evenly_over=1,
            margins=[dp.polars.Margin(max_length=_INPUTS["n"]),
                     dp.polars.Margin(by=["region"], invariant="keys", max_groups=len(REGIONS),
                                      max_length=_INPUTS["n"])])
        q = ctx.query().group_by("region").agg(pl.col("income").fill_null(0.0).fill_nan(0.0).dp.mean(INCOME))
        meas = q.resolve()
        cache[(eps, c)] = float(meas.map(c))

        def run(inputs: dict[str, Any]) -> Any:
            out = meas(lf).collect()
            d = dict(zip(out["region"].to_list(), out["income"].to_list(), strict=True))
            return np.array([np.clip(d[r], *INCOME) for r in REGIONS])

        return run

    return [Pipeline("Context: group_by(region).agg(dp.mean) (public keys)", build, lambda e, c: cache[(e, c)])]


_INPUTS: dict[str, Any] = {}


def opendp_inputs(df: pd.DataFrame) -> dict[str, Any]:
    """The columns as OpenDP takes them (numpy arrays; str lists; a polars LazyFrame)."""
    lo, hi = INCOME
    mid = (lo + hi) / 2
    out: dict[str, Any] = {
        "n": len(df),
        "income": np.array(df["income"], dtype=np.float64),
        "income_shifted": np.array(df["income"], dtype=np.float64) - mid,
        "income_int_f64": np.array(df["income_int"], dtype=np.float64),
        "income_int_i64": np.array(df["income_int"], dtype=np.int64),
        "age": np.array(df["age"], dtype=np.float64),
        "region_code": region_codes(df),
        "flag_i64": np.array(df["flag"], dtype=np.int64),
    }
    if pl is not None:
        out["lazy"] = pl.from_pandas(df[["region", "income"]]).lazy()
    return out


# ----------------------------------------------------------------------------- product side


@dataclass
class ProductRun:
    answer: Callable[[Any], dict[str, Any]]
    aggregate: Any
    cost: float
    mechanism: str
    scales: dict[str, float] = field(default_factory=dict)  # component name → OpenDP scale


def product_run(df: pd.DataFrame, schema: Schema, qd: dict[str, Any], eps: float,
                backend: PandasBackend | None = None) -> ProductRun:
    q = Query.from_dict(qd)
    q.validate(schema)
    p = plan([q], schema, eps, 0.0, "basic")
    prep = prepare(p, schema)
    if len(prep.items) != 1:
        raise SystemExit(f"{qd['id']}: expected one item, got {len(prep.items)}")
    it = prep.items[0]
    be = backend if backend is not None else PandasBackend(df, schema)
    agg = statistic(q.kind).aggregate(q, be)
    cost = sum(d.recorded.epsilon for d in it.draws)
    return ProductRun(it.answer, agg, float(cost), it.mechanism, {cp.name: float(cp.scale) for cp in it.components})


# ----------------------------------------------------------------------------- cases


@dataclass
class Case:
    name: str
    query: dict[str, Any]
    pipelines: Callable[[], list[Pipeline]]
    product_value: Callable[[dict[str, Any]], Any]
    truth: Callable[[pd.DataFrame], Any]
    error: Callable[[Any, Any], np.ndarray] = field(default=lambda v, t: np.atleast_1d(np.abs(np.asarray(v, dtype=float) - t)))
    #: The product's query when ``query`` is not offered (before a fix): printed as such.
    fallback: dict[str, Any] | None = None
    #: The product's noise scale in the units of :attr:`Pipeline.scale` (from its
    #: components' scales), None when no single scale compares.
    noise: Callable[[dict[str, float]], float] | None = None


def _clip(df: pd.DataFrame, col: str, b: tuple[float, float]) -> np.ndarray:
    return np.clip(df[col].to_numpy(np.float64), *b)


def _mode_gap(df: pd.DataFrame) -> Callable[[Any, Any], np.ndarray]:
    counts = df["region"].value_counts().reindex(list(REGIONS), fill_value=0).to_numpy()
    return lambda label, _t: np.array([float(counts.max() - counts[REGIONS.index(label)])])


def _denominator(alpha: float) -> int:
    """b of α = a/b: the product's integer scores are b × ranks (OpenDP's scale is in ranks)."""
    from planner.planning.statistics.quantile import alpha_fraction

    return alpha_fraction(alpha).denominator


def cases(df: pd.DataFrame) -> list[Case]:
    inc_cands = np.linspace(*INCOME, INCOME_CANDIDATES)
    age_cands = np.linspace(*AGE, AGE_CANDIDATES)
    hist_truth = df["region"].value_counts().reindex(list(REGIONS), fill_value=0).to_numpy(np.float64)
    out = [
        Case("count", {"id": "n", "kind": "count", "mechanism": "discrete_laplace"}, od_count,
             lambda a: a["value"], lambda d: float(len(d)), noise=lambda sc: sc["count"]),
        Case("sum (float)", {"id": "s", "kind": "sum", "column": "income", "mechanism": "laplace"}, od_sum_float,
             lambda a: a["value"], lambda d: float(_clip(d, "income", INCOME).sum()), noise=lambda sc: sc["sum"]),
        Case("sum (integer)", {"id": "s", "kind": "sum", "column": "income_int", "mechanism": "laplace"}, od_sum_int,
             lambda a: a["value"], lambda d: float(_clip(d, "income_int", INCOME).sum()), noise=lambda sc: sc["sum"]),
        Case("mean (n private)", {"id": "m", "kind": "mean", "column": "income", "mechanism": "laplace"},
             lambda: od_mean()[:1], lambda a: a["value"], lambda d: float(_clip(d, "income", INCOME).mean())),
        Case("mean (public n)", {"id": "m", "kind": "mean", "column": "income", "mechanism": "laplace",
                                 "mode": "public_n"},
             lambda: od_mean()[1:], lambda a: a["value"], lambda d: float(_clip(d, "income", INCOME).mean()),
             fallback={"id": "m", "kind": "mean", "column": "income", "mechanism": "laplace"},
             noise=lambda sc: sc.get("mean", math.nan)),
        Case("proportion", {"id": "p", "kind": "proportion", "column": "flag", "mechanism": "discrete_laplace"},
             od_proportion, lambda a: a["value"], lambda d: float(d["flag"].mean()),
             noise=lambda sc: sc.get("counts", sc.get("count", math.nan))),
        Case("histogram", {"id": "h", "kind": "histogram", "column": "region", "mechanism": "discrete_laplace"},
             od_histogram, lambda a: np.asarray(a["counts"], dtype=np.float64), lambda d: hist_truth,
             noise=lambda sc: sc["bins"]),
        Case("mode", {"id": "mo", "kind": "mode", "column": "region", "mechanism": "exponential"}, od_mode,
             lambda a: a["value"], lambda d: None, _mode_gap(df)),
        Case("mode (ISM)", {"id": "mo", "kind": "mode", "column": "region", "mechanism": "inverse_sensitivity"},
             od_mode, lambda a: a["value"], lambda d: None, _mode_gap(df)),
    ]
    for alpha in (0.1, 0.5, 0.9):
        kind = {"kind": "median"} if alpha == 0.5 else {"kind": "quantile", "alphas": [alpha]}
        out.append(Case(f"quantile {alpha:g} income", {"id": "q", "column": "income", "mechanism": "exponential",
                                                      "candidates": INCOME_CANDIDATES, **kind},
                        lambda a=alpha: od_quantile(a, "income", inc_cands), lambda a: a["value"],
                        lambda d, a=alpha: float(np.quantile(_clip(d, "income", INCOME), a, method="inverted_cdf")),
                        noise=lambda sc, a=alpha: sc["scores"] / _denominator(a)))
    for alpha in (0.1, 0.5, 0.9):
        kind = {"kind": "median"} if alpha == 0.5 else {"kind": "quantile", "alphas": [alpha]}
        out.append(Case(f"quantile {alpha:g} age (ties)", {"id": "q", "column": "age", "mechanism": "exponential",
                                                          "candidates": AGE_CANDIDATES, **kind},
                        lambda a=alpha: od_quantile(a, "age", age_cands), lambda a: a["value"],
                        lambda d, a=alpha: float(np.quantile(_clip(d, "age", AGE), a, method="inverted_cdf")),
                        noise=lambda sc, a=alpha: sc["scores"] / _denominator(a)))
    by = df.groupby("region")["income"].apply(lambda s: float(np.clip(s, *INCOME).mean()))
    g_truth = np.array([by.get(r, np.nan) for r in REGIONS])
    out.append(Case("grouped mean", {"id": "gm", "kind": "grouped_mean", "column": "income", "mechanism": "laplace",
                                     "by": ["region"]}, od_grouped_mean,
                    lambda a: np.asarray(a["values"], dtype=np.float64), lambda d: g_truth))
    return out


# ----------------------------------------------------------------------------- statistics of a row


def bootstrap_ratio(a: np.ndarray, b: np.ndarray, stat: Callable[[np.ndarray], np.ndarray],
                    rng: np.random.Generator, resamples: int = 2000) -> tuple[float, float, float]:
    """stat(a)/stat(b) and its 95 % percentile-bootstrap interval (repetitions resampled;
    ``a``, ``b``: (reps, k) errors, pooled over k inside stat)."""
    ra = a.shape[0]
    rb = b.shape[0]
    ia = rng.integers(0, ra, size=(resamples, ra))
    ib = rng.integers(0, rb, size=(resamples, rb))
    def ratio(sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
        # both exact (0 / 0) is a tie; a positive error against an exact one is infinitely worse
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(sb > 0, sa / np.where(sb > 0, sb, 1.0), np.where(sa > 0, math.inf, 1.0))

    r = ratio(stat(a[ia].reshape(resamples, -1)), stat(b[ib].reshape(resamples, -1)))
    point = float(ratio(stat(a.reshape(1, -1)), stat(b.reshape(1, -1)))[0])
    # "lower"/"higher": actual resampled ratios, so an infinite one (OpenDP exact in every
    # repetition of a resample, the product not) stays inf instead of turning into NaN
    return point, float(np.percentile(r, 2.5, method="lower")), float(np.percentile(r, 97.5, method="higher"))


def mae(x: np.ndarray) -> np.ndarray:
    return np.asarray(x.mean(axis=1))


def p90(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.percentile(x, 90, axis=1))


@dataclass
class Row:
    case: str
    eps: float
    c: int
    product_mechanism: str
    product_cost: float
    opendp: str
    opendp_cost: float
    mae_p: float
    mae_o: float
    mae_ratio: tuple[float, float, float]
    p90_p: float
    p90_o: float
    p90_ratio: tuple[float, float, float]
    others: dict[str, float]
    seconds_p: float
    seconds_o: float
    noise_ratio: float = math.nan  # product's noise scale ÷ the reference pipeline's (same units)
    reps: int = 0
    confirmed: bool | None = None  # a WORSE row re-run on fresh repetitions: still WORSE?

    @property
    def worse(self) -> bool:
        return self.mae_ratio[1] > 1.0 or self.p90_ratio[1] > 1.0


def run_case(case: Case, df: pd.DataFrame, schema: Schema, inputs: dict[str, Any], eps: float, c: int,
             reps: int, rng: np.random.Generator, backend: PandasBackend, pilot: int = 100) -> Row:
    """Both sides ``reps`` times. With several OpenDP pipelines the reference is the one
    with the smallest MAE on ``pilot`` separate repetitions, then measured afresh: taking
    the smallest of several noisy MAEs would bias OpenDP's side downwards."""
    truth = case.truth(df)
    t0 = time.perf_counter()
    try:
        pr = product_run(df, schema, case.query, eps, backend)
    except QueryError:
        if case.fallback is None:
            raise
        pr = product_run(df, schema, case.fallback, eps, backend)
        pr.mechanism = "NOT OFFERED; default mode instead: " + pr.mechanism
    errs_p = np.array([case.error(case.product_value(pr.answer(pr.aggregate)), truth) for _ in range(reps)])
    sec_p = time.perf_counter() - t0
    pipes = case.pipelines()
    if not pipes:
        raise RuntimeError(f"{case.name}: no OpenDP pipeline (polars missing?)")
    others: dict[str, float] = {}
    built: list[tuple[Pipeline, Callable[[dict[str, Any]], Any]]] = []
    for pipe in pipes:
        f = pipe.build(eps, c)
        built.append((pipe, f))
        if len(pipes) > 1:
            others[pipe.name] = float(np.mean([case.error(f(inputs), truth) for _ in range(pilot)]))
    ref, f = min(built, key=lambda pf: others.get(pf[0].name, 0.0))
    t1 = time.perf_counter()
    errs_o = np.array([case.error(f(inputs), truth) for _ in range(reps)])
    sec_o = time.perf_counter() - t1
    if len(pipes) == 1:
        others[ref.name] = float(errs_o.mean())
    noise_p = case.noise(pr.scales) if case.noise is not None else math.nan
    noise_ratio = noise_p / ref.scale(eps, c)
    return Row(case.name, eps, c, pr.mechanism, pr.cost, ref.name, ref.cost(eps, c),
               float(errs_p.mean()), float(errs_o.mean()), bootstrap_ratio(errs_p, errs_o, mae, rng),
               float(np.percentile(errs_p, 90)), float(np.percentile(errs_o, 90)),
               bootstrap_ratio(errs_p, errs_o, p90, rng), others, sec_p, sec_o, noise_ratio, reps)


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.3g}"
    return f"{v:.4g}"


def print_rows(rows: Sequence[Row]) -> None:
    head = (f"{'statistic':<26} {'ε':>6} {'c':>2} {'cost P/O':>13} {'noise P/O':>9} {'MAE prod':>10} {'MAE odp':>10} "
            f"{'MAE ratio [95%]':>22} {'p90 prod':>10} {'p90 odp':>10} {'p90 ratio [95%]':>22}")
    print(head)
    print("-" * len(head))
    for r in rows:
        flag = "  WORSE" if r.worse else ""
        if r.confirmed is not None:
            flag += " (confirmed)" if r.confirmed else " (not confirmed)"
        mr, pr_ = r.mae_ratio, r.p90_ratio
        nr = "—" if math.isnan(r.noise_ratio) else f"{r.noise_ratio:.4f}"
        print(f"{r.case:<26} {r.eps:>6g} {r.c:>2} {r.product_cost:>6.4g}/{r.opendp_cost:<6.4g} {nr:>9} "
              f"{_fmt(r.mae_p):>10} {_fmt(r.mae_o):>10} {mr[0]:>7.3f} [{mr[1]:.3f}, {mr[2]:.3f}] "
              f"{_fmt(r.p90_p):>10} {_fmt(r.p90_o):>10} {pr_[0]:>7.3f} [{pr_[1]:.3f}, {pr_[2]:.3f}]{flag}")
    print()
    print("Pipelines (per statistic; with several OpenDP pipelines, each one's MAE on the pilot repetitions of")
    print("every (ε, c) row in the grid's order — the reference is the smallest, then measured afresh):")
    seen: dict[str, Row] = {}
    pilots: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        seen.setdefault(r.case, r)
        for name, m in r.others.items():
            pilots.setdefault(r.case, {}).setdefault(name, []).append(m)
    for key, r in seen.items():
        print(f"  {key}: product {r.product_mechanism}")
        for name, ms in pilots.get(key, {}).items():
            vals = ", ".join(_fmt(m) for m in ms) if len(pilots[key]) > 1 else "(the only one)"
            print(f"      {name}: {vals}")


# ----------------------------------------------------------------------------- timing


@dataclass
class Timing:
    """Median milliseconds of each timed step (see :func:`time_case`)."""

    product: float  # backend + plan + release
    backend_plan: float  # PandasBackend on the in-memory frame + workload.plan
    release: float  # release(): prepare, ledger check + spend record, aggregates, noise, answers stored
    register: float  # the dataset's lifetime budget registered (once per dataset; NOT in ``product``)
    opendp: float  # inputs + build + invoke, the fastest pipeline
    od_inputs: float  # the columns taken from the in-memory frame as OpenDP reads them
    od_build: float  # constructors + calibration (binary_search_param)
    od_invoke: float  # the measurement invoked on the inputs


def time_case(case: Case, df: pd.DataFrame, schema: Schema, eps: float, c: int, reps: int) -> Timing:
    """Median times of the product's release and of OpenDP's fastest pipeline, per step.

    Both sides start from the same in-memory DataFrame (reading the file is in neither)
    and end with the released value. The product: ``PandasBackend(df, schema)``,
    ``workload.plan``, ``release`` (measurements built, the budget checked and the spend
    recorded in a SQLite ledger, the aggregate computed from the frame — parsing, missing
    values, clipping, the exact sum or grid counts — noise drawn, the answer stored and
    the record read back). The dataset's lifetime budget is registered before the timer
    starts (a once-per-dataset step, timed separately: each repetition needs a new
    dataset, since a plan is released once per dataset). OpenDP: the columns converted
    from the frame to what its constructors read, the measurement built and calibrated
    (``binary_search_param``), and invoked once.
    """
    from planner.ledger import Ledger
    from planner.release import release

    q = Query.from_dict(case.query)
    try:
        q.validate(schema)
    except QueryError:
        if case.fallback is None:
            raise
        q = Query.from_dict(case.fallback)
    pipes = case.pipelines()
    rows: list[list[float]] = []
    with tempfile.TemporaryDirectory() as d:
        ledger = Ledger(f"sqlite:///{d}/ledger.db")
        for i in range(reps + 1):  # the first repetition warms up (imports, caches) and is not counted
            t0 = time.perf_counter()
            ledger.register_dataset(f"bench-{i}", "bench", eps * 2, 0.0, "basic")
            t1 = time.perf_counter()
            backend = PandasBackend(df, schema)
            p = plan([q], schema, eps, 0.0, "basic")
            t2 = time.perf_counter()
            release(p, schema, backend, ledger, f"bench-{i}", "bench", rule="basic")
            t3 = time.perf_counter()
            best: list[float] | None = None
            for pipe in pipes:
                u0 = time.perf_counter()
                inputs = opendp_inputs_for(case, df)
                u1 = time.perf_counter()
                f = pipe.build(eps, c)
                u2 = time.perf_counter()
                f(inputs)
                u3 = time.perf_counter()
                parts = [u3 - u0, u1 - u0, u2 - u1, u3 - u2]
                if best is None or parts[0] < best[0]:
                    best = parts
            assert best is not None
            if i:
                rows.append([t3 - t1, t2 - t1, t3 - t2, t1 - t0, *best])
        ledger.close()
    med = [statistics.median(r[k] for r in rows) * 1e3 for k in range(8)]
    return Timing(*med)


def opendp_inputs_for(case: Case, df: pd.DataFrame) -> dict[str, Any]:
    """Only the inputs the case reads (conversion from the table is part of OpenDP's time)."""
    col = case.query.get("column")
    lo, hi = INCOME
    out: dict[str, Any] = {"n": len(df)}
    if case.name.startswith("count") or case.name in ("histogram", "mode", "mode (ISM)"):
        out["region_code"] = region_codes(df)
    elif case.name == "proportion":
        out["flag_i64"] = np.array(df["flag"], dtype=np.int64)
    elif case.name == "grouped mean":
        out["lazy"] = pl.from_pandas(df[["region", "income"]]).lazy() if pl is not None else None
        _INPUTS.update(out)
    elif col == "income_int":
        out["income_int_i64"] = np.array(df["income_int"], dtype=np.int64)
        out["income_int_f64"] = np.array(df["income_int"], dtype=np.float64)
    elif col is not None:
        x = np.array(df[col], dtype=np.float64)
        out[col] = x
        out[col + "_shifted"] = x - (lo + hi) / 2
    return out


# ----------------------------------------------------------------------------- workload


def workload(df: pd.DataFrame, n: int, eps: float, reps: int, rng: np.random.Generator) -> None:
    """Four queries at a total ε: the product's optimal split vs an even split (what
    ``Context(split_evenly_over=4)`` does), each query's best OpenDP pipeline at ε/4.

    The product plans relative errors (each query's public error scale, as the app does:
    ``workload.default_error_scales``); the objective it minimises is Σ (RMSE / scale)²,
    with a quantile's error in ranks as a fraction of n. Both sides are scored by the same
    objective on the same release errors (the median's value error converted to its rank
    error on the data)."""
    from planner.planning.workload import default_error_scales

    schema = make_schema(1, n)
    inputs = opendp_inputs(df)
    _INPUTS.clear()
    _INPUTS.update(inputs)
    qds = [
        {"id": "n", "kind": "count", "mechanism": "discrete_laplace"},
        {"id": "m", "kind": "mean", "column": "income", "mechanism": "laplace"},
        {"id": "q", "kind": "median", "column": "income", "mechanism": "exponential", "candidates": INCOME_CANDIDATES},
        {"id": "h", "kind": "histogram", "column": "region", "mechanism": "discrete_laplace"},
    ]
    names = {"n": "count", "m": "mean (n private)", "q": "quantile 0.5 income", "h": "histogram"}
    by_id = {k: next(cs for cs in cases(df) if cs.name == v) for k, v in names.items()}
    qs = [Query.from_dict(d) for d in qds]
    scales = default_error_scales(qs, schema) or {}
    p = plan(qs, schema, eps, 0.0, "basic", error_scales=scales)
    prep = prepare(p, schema)
    backend = PandasBackend(df, schema)
    xs = np.sort(np.clip(np.array(df["income"], dtype=np.float64), *INCOME))

    def in_units(qid: str, err: np.ndarray, values: np.ndarray | None) -> np.ndarray:
        if qid != "q":
            return err
        assert values is not None  # rank error of the released median, as a fraction of n
        return np.abs(np.searchsorted(xs, values, side="right") / len(xs) - 0.5)

    print(f"Workload of 4 queries at total ε = {eps:g} (c = 1), the product's relative-error plan vs an even split:")
    print(f"  {'query':<8} {'ε product':>10} {'ε even':>8} {'MAE product':>12} {'MAE OpenDP':>12} {'ratio':>7}   unit")
    obj_p = obj_o = 0.0
    for it, qd in zip(prep.items, qds, strict=True):
        qid = qd["id"]
        cs = by_id[qid]
        truth = cs.truth(df)
        q = it.part.query
        agg = statistic(q.kind).aggregate(q, backend)
        vals_p = [cs.product_value(it.answer(agg)) for _ in range(reps)]
        ep = in_units(qid, np.array([cs.error(v, truth) for v in vals_p]).ravel(),
                      np.array(vals_p, dtype=float) if qid == "q" else None)
        best: np.ndarray | None = None
        for pipe in cs.pipelines():
            f = pipe.build(eps / 4, 1)
            vals_o = [f(inputs) for _ in range(reps)]
            eo = in_units(qid, np.array([cs.error(v, truth) for v in vals_o]).ravel(),
                          np.array(vals_o, dtype=float) if qid == "q" else None)
            if best is None or eo.mean() < best.mean():
                best = eo
        assert best is not None
        scale = scales.get(qid, 1.0)
        obj_p += float(np.mean(ep**2)) / scale**2
        obj_o += float(np.mean(best**2)) / scale**2
        e_share = sum(d.recorded.epsilon for d in it.draws)
        unit = "rank / n" if qid == "q" else it.prediction.unit
        print(f"  {qid:<8} {e_share:>10.4f} {eps / 4:>8.4f} {_fmt(float(ep.mean())):>12} {_fmt(float(best.mean())):>12} "
              f"{float(ep.mean()) / float(best.mean()):>7.3f}   {unit}")
    print(f"  Σ MSE / scale²: product {obj_p:.4g}, even split {obj_o:.4g}: the product's objective is "
          f"{obj_o / obj_p:.2f}× smaller")


# ----------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=float, default=1e5, help="rows of the accuracy grid's table")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    ap.add_argument("--c", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--only", type=str, default="", help="comma-separated case names (substring match)")
    ap.add_argument("--time-rows", type=float, default=1e6)
    ap.add_argument("--time-reps", type=int, default=5)
    ap.add_argument("--headline-rows", type=float, default=1e6)
    ap.add_argument("--no-grid", action="store_true")
    ap.add_argument("--no-headline", action="store_true")
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--no-workload", action="store_true")
    ap.add_argument("--only-time", action="store_true",
                    help="only the time section (same as --no-grid --no-headline --no-workload)")
    ap.add_argument("--json", type=str, default="")
    ap.add_argument("--confirm-reps", type=int, default=0,
                    help="repetitions of the re-run of a WORSE row (default 4 × --reps)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run (2e4 rows, 100 repetitions, 1e5 rows for the headline and times): "
                         "NOT the reported table")
    args = ap.parse_args(argv)
    if args.only_time:
        args.no_grid = args.no_headline = args.no_workload = True
    if args.quick:
        args.rows, args.reps, args.time_rows, args.headline_rows, args.time_reps = 2e4, 100, 1e5, 1e5, 3
        print("QUICK RUN: smaller table and fewer repetitions; not the reported table")
    confirm_reps = args.confirm_reps or 4 * args.reps
    rng = np.random.default_rng(1818)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"on {os.cpu_count()} cores; integer declaration in schema: {_schema_has_integer()}; "
          f"polars: {'yes' if pl is not None else 'NOT INSTALLED (grouped mean skipped)'}")
    rows: list[Row] = []
    confirmations: list[Row] = []
    n = int(args.rows)
    if not args.no_grid:
        print(f"\nAccuracy grid: {n} rows, {args.reps} repetitions per side, pure ε, add/remove\n")
        for c in args.c:
            df = make_table(n, c)
            schema = make_schema(c, n)
            inputs = opendp_inputs(df)
            _INPUTS.clear()
            _INPUTS.update(inputs)
            backend = PandasBackend(df, schema)
            for case in cases(df):
                if only and not any(o in case.name for o in only):
                    continue
                if case.name == "grouped mean" and pl is None:
                    print(f"  {case.name}: skipped (polars not installed)")
                    continue
                for eps in args.eps:
                    row = run_case(case, df, schema, inputs, eps, c, args.reps, rng, backend)
                    rows.append(row)
                    print(f"  done {row.case} ε={eps:g} c={c}: MAE ratio {row.mae_ratio[0]:.3f}, "
                          f"p90 ratio {row.p90_ratio[0]:.3f}{'  WORSE' if row.worse else ''}", flush=True)
                    if row.worse:  # 95 % intervals: about 1 in 20 rows at parity is flagged by chance
                        again = run_case(case, df, schema, inputs, eps, c, confirm_reps, rng, backend)
                        row.confirmed = again.worse
                        confirmations.append(again)
                        print(f"    re-run on {confirm_reps} fresh repetitions: MAE ratio {again.mae_ratio[0]:.3f} "
                              f"[{again.mae_ratio[1]:.3f}, {again.mae_ratio[2]:.3f}], p90 ratio "
                              f"{again.p90_ratio[0]:.3f} [{again.p90_ratio[1]:.3f}, {again.p90_ratio[2]:.3f}]"
                              f"{'  WORSE' if again.worse else '  not worse'}", flush=True)
        print()
        print_rows(rows)
        n_ratios = 2 * len(rows)
        print(f"\nrows WORSE beyond sampling error (95 % interval above 1): {sum(r.worse for r in rows)} of {len(rows)} "
              f"({n_ratios} intervals: about {0.025 * n_ratios:.1f} expected by chance at exact parity); "
              f"confirmed on {confirm_reps} fresh repetitions: {sum(bool(r.confirmed) for r in rows)}")
        if confirmations:
            print("\nThe re-runs:")
            print_rows(confirmations)
    if not args.no_headline:
        hn = int(args.headline_rows)
        print(f"\nHeadline: the income median at ε = 0.001, {hn} rows, {INCOME_CANDIDATES} candidates, c = 1, "
              f"{args.reps} repetitions")
        df = make_table(hn, 1)
        schema = make_schema(1, hn)
        inputs = opendp_inputs(df)
        _INPUTS.clear()
        _INPUTS.update(inputs)
        case = next(cs for cs in cases(df) if cs.name == "quantile 0.5 income")
        row = run_case(case, df, schema, inputs, 0.001, 1, args.reps, rng, PandasBackend(df, schema))
        print_rows([row])
        rows.append(row)
    if not args.no_time:
        tn = int(args.time_rows)
        print(f"\nTime at {tn} rows, ε = 1, c = 1, median of {args.time_reps} repetitions (after one warm-up); "
              f"load {os.getloadavg()[0]:.2f}")
        print("  Both timers start from the same in-memory DataFrame (file reading is in neither) and stop at the")
        print("  released value. product = PandasBackend(df) + plan + release (measurements, budget check and spend")
        print("  recorded in a SQLite ledger, the aggregate from the frame: parsing, missing values, clipping, exact")
        print("  sum / grid counts; noise; answer stored and read back). The dataset's lifetime budget is registered")
        print("  before the timer (once per dataset; 'register' column, not in 'product'). OpenDP = the columns")
        print("  converted from the frame ('inputs') + constructors and binary_search_param calibration ('build') +")
        print("  one invocation ('invoke'), the fastest of its pipelines for the question.")
        print(f"  {'statistic':<26} {'product':>8} {'OpenDP':>8} {'ratio':>6}   {'backend+plan':>12} {'release':>8} "
              f"{'register':>8}   {'inputs':>7} {'build':>7} {'invoke':>7}   (ms)")
        df = make_table(tn, 1)
        schema = make_schema(1, tn)
        _INPUTS.clear()
        _INPUTS.update({"n": tn})
        for case in cases(df):
            if only and not any(o in case.name for o in only):
                continue
            if case.name == "grouped mean" and pl is None:
                continue
            tm = time_case(case, df, schema, 1.0, 1, args.time_reps)
            print(f"  {case.name:<26} {tm.product:>8.1f} {tm.opendp:>8.1f} {tm.product / tm.opendp:>6.2f}   "
                  f"{tm.backend_plan:>12.1f} {tm.release:>8.1f} {tm.register:>8.1f}   {tm.od_inputs:>7.1f} "
                  f"{tm.od_build:>7.1f} {tm.od_invoke:>7.1f}", flush=True)
        print(f"  load average after: {os.getloadavg()[0]:.2f}")
    if not args.no_workload:
        print()
        df = make_table(n, 1)
        workload(df, n, 1.0, args.reps, rng)
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in rows], indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
