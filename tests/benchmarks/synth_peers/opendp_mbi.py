"""Peer for ``bench_synthetic.py``: OpenDP's ``opendp.extras.mbi`` MST or AIM (run in the
peer's own interpreter, never the product's; needs ``opendp[mbi]``, which pulls JAX).

    python opendp_mbi.py IN.npz OUT.npz {mst,aim} RHO SEED

``IN.npz`` holds the benchmark's discretised table: ``records`` (int codes, rows × cols),
``sizes`` and ``names``. The release is OpenDP's Context API at ρ-zCDP, one row per person
(``contributions=1``, add/remove), every column's keys declared (the whole public domain:
no budget goes to key discovery). One fit is sampled twice, ``n`` rows each: ``round``
(mbi 1.1's default sampler, randomized rounding) and ``sample`` (i.i.d. draws). OpenDP's
contingency table adds a null category to every column; a null is written as -1.

OpenDP 0.14–0.16 can refuse the query at the exact budget ("insufficient budget for
query", opendp/opendp#2789). For MST the refusal comes from its own split: the selection's
budget is cut into ``num_selections`` equal parts whose sum, rounded up, exceeds the part
(seen on fair at every ρ down to 10 % below the exact budget, 2026-12-07). So MST runs with
that split shrunk by 1e-9 relative (``prior`` in ``opendp.extras.mbi._mst``, which rounds a
share down by one ulp, then takes 1e-9 off): it spends at most the query's ρ, and the note
says so. If the query is still refused, its ρ is shrunk by 1e-9, 1e-8, … relative and the
refusals are reported in ``note`` (their time is not counted in ``fit_seconds``).

``OUT.npz``: ``round``, ``sample`` (codes), ``fit_seconds``, ``round_seconds``,
``sample_seconds`` (wall; imports and loading excluded), the same three as
``*_cpu_seconds`` (``time.process_time``: this process's CPU time over all its threads, so
a fit timed on a loaded machine can be compared fairly), ``versions`` (the packages that did
the work) and ``note``.
"""

import sys
import time

import numpy as np


def _versions(*names: str) -> str:
    from importlib.metadata import version

    return ", ".join(f"{n} {version(n)}" for n in names)


def main() -> None:
    src, dst, algo, rho_s, seed_s = sys.argv[1:6]
    rho, seed = float(rho_s), int(seed_s)
    data = np.load(src)
    x = np.asarray(data["records"], dtype=np.int64)
    sizes = [int(k) for k in data["sizes"]]
    names = [str(v) for v in data["names"]]
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    np.random.seed(seed)  # noqa: NPY002 -- mbi samples from numpy's global generator
    frame = pl.LazyFrame({name: x[:, j] for j, name in enumerate(names)})
    keys = {name: list(range(k)) for name, k in zip(names, sizes, strict=True)}
    algorithm = dp.mbi.MST() if algo == "mst" else dp.mbi.AIM()
    patched = ""
    if algo == "mst":
        from opendp.extras.mbi import _mst

        exact_prior = _mst.__dict__["prior"]
        _mst.__dict__["prior"] = lambda x: exact_prior(x) * (1.0 - 1e-9)
        patched = "MST's internal budget split shrunk by 1e-9 relative (opendp#2789); "
    refusals: list[str] = []
    last = ""
    table = None
    query_rho = rho
    for attempt in range(10):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            ctx = dp.Context.compositor(data=frame, privacy_unit=dp.unit_of(contributions=1),
                                        privacy_loss=dp.loss_of(rho=rho))
            table = ctx.query(rho=query_rho).select(*names).contingency_table(keys=keys, algorithm=algorithm).release()
            break
        except Exception as exc:  # only the budget refusal (opendp#2789) is retried
            if "budget" not in str(exc).lower():
                raise
            refusals.append(f"{query_rho!r} ({time.perf_counter() - t0:.0f} s)")
            last = " ".join(str(exc).split())[:300]
            query_rho = rho * (1.0 - 1e-9 * 10.0**attempt)
    if table is None:
        raise SystemExit(f"OpenDP refused every budget: {refusals}; last refusal: {last}")
    fit_seconds, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
    note = patched + (f"opendp#2789: refused at rho {', '.join(refusals)}; released at {query_rho!r}"
                      if refusals else "")
    out: dict[str, object] = {"fit_seconds": fit_seconds, "fit_cpu_seconds": fit_cpu, "note": note,
                              "versions": _versions("opendp", "mbi", "jax", "jaxlib", "polars", "numpy")}
    for method in ("round", "sample"):
        t1, c1 = time.perf_counter(), time.process_time()
        syn = table.synthesize(rows=x.shape[0], method=method)
        out[method + "_seconds"] = time.perf_counter() - t1
        out[method + "_cpu_seconds"] = time.process_time() - c1
        out[method] = np.stack([syn[name].fill_null(-1).to_numpy().astype(np.int64) for name in names], axis=1)
    np.savez(dst, **out)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
