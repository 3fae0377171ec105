"""Peer for ``bench_synthetic.py``: SmartNoise Synth's MST or AIM (run in the peer's own
interpreter, never the product's; ``smartnoise-synth`` pulls torch).

    python smartnoise.py IN.npz OUT.npz {mst,aim} EPSILON DELTA SEED

``IN.npz`` is the benchmark's discretised table (``records``, ``sizes``, ``names``).
SmartNoise takes (ε, δ) and converts them to ρ itself with OpenDP's zCDP → (ε, δ) map
(the conversion the product's zCDP rule uses), so both spend the same ρ. Its table
transformer is fitted on a frame of every PUBLIC code of every column, never on the data,
so its domain is the declared one, and no budget goes to preprocessing
(``preprocessor_eps=0``). One fit is sampled twice, ``n`` rows each: ``round`` (mbi 1.1's
default ``synthetic_data``) and ``sample`` (the same model drawn i.i.d.).

``OUT.npz``: ``round``, ``sample`` (codes), ``fit_seconds``, ``round_seconds``,
``sample_seconds`` (wall; imports and loading excluded), the same three as
``*_cpu_seconds`` (``time.process_time``: this process's CPU time over all its threads),
``versions`` (the packages that did the work) and ``note``.
"""

import sys
import time

import numpy as np


class _FixedMethod:
    """The fitted mbi model, its ``synthetic_data`` called with one sampling method (the
    model is a frozen attrs object: wrapped, not patched)."""

    def __init__(self, model, method):
        self._model = model
        self._method = method

    def synthetic_data(self, rows=None):
        return self._model.synthetic_data(rows, method=self._method)

    def __getattr__(self, name):
        return getattr(self._model, name)


def _versions(*names: str) -> str:
    from importlib.metadata import version

    return ", ".join(f"{n} {version(n)}" for n in names)


def main() -> None:
    src, dst, algo, eps_s, delta_s, seed_s = sys.argv[1:7]
    data = np.load(src)
    x = np.asarray(data["records"], dtype=np.int64)
    sizes = [int(k) for k in data["sizes"]]
    names = [str(v) for v in data["names"]]
    import pandas as pd
    from snsynth import Synthesizer
    from snsynth.transform.table import TableTransformer

    np.random.seed(int(seed_s))  # noqa: NPY002 -- mbi samples from numpy's global generator
    frame = pd.DataFrame({name: x[:, j] for j, name in enumerate(names)})
    widest = max(sizes)
    public = pd.DataFrame({name: np.arange(widest) % k for name, k in zip(names, sizes, strict=True)})
    transformer = TableTransformer.create(public, style="cube", categorical_columns=names)
    transformer.fit(public)
    t0, c0 = time.perf_counter(), time.process_time()
    synth = Synthesizer.create(algo, epsilon=float(eps_s), delta=float(delta_s), verbose=False)
    synth.fit(frame, transformer=transformer, preprocessor_eps=0.0)
    out: dict[str, object] = {"fit_seconds": time.perf_counter() - t0, "fit_cpu_seconds": time.process_time() - c0,
                              "note": "", "versions": _versions("smartnoise-synth", "mbi", "opendp", "jax", "torch",
                                                                "numpy")}
    model = synth.synthesizer
    for method in ("round", "sample"):
        synth.synthesizer = _FixedMethod(model, method)
        t1, c1 = time.perf_counter(), time.process_time()
        syn = synth.sample(x.shape[0])
        out[method + "_seconds"] = time.perf_counter() - t1
        out[method + "_cpu_seconds"] = time.process_time() - c1
        out[method] = np.stack([syn[name].to_numpy().astype(np.int64) for name in names], axis=1)
    np.savez(dst, **out)


if __name__ == "__main__":
    main()
