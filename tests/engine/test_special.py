"""``planner.core.special``: SciPy's compiled special functions without ``scipy.special``'s package body.

The facade must give SciPy's own objects (so every value is SciPy's, bit for bit), load
them without SciPy's array-API layer (the 0.2 s and 16 MB it exists to save on the release
path) only when no other thread could meet the stand-in package, and leave a later
``import scipy.special`` fully working. Each check runs in a fresh interpreter, where
nothing has imported SciPy yet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fresh(code: str, timeout: float = 120.0) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_preloaded_functions_are_scipys_own_without_the_package() -> None:
    """After :func:`preload` (one thread alive) every name of UFUNCS comes from the compiled
    module while ``scipy.special`` and its array-API layer are not imported; after
    ``import scipy.special`` the package hands out the very same objects, and its Python
    functions (logsumexp) work through the facade too."""
    got = _fresh(
        "import json, sys\n"
        "from planner.core import special\n"
        "ok = special.preload()\n"
        "objs = {n: getattr(special, n) for n in sorted(special.UFUNCS)}\n"
        "before = ['scipy.special' in sys.modules, 'scipy._lib._array_api' in sys.modules]\n"
        "z = float(special.ndtri(0.975))\n"
        "import scipy.special as sp\n"
        "same = {n: o is getattr(sp, n) for n, o in objs.items()}\n"
        "print(json.dumps({'ok': ok, 'before': before, 'same': same, 'z': z,\n"
        "                  'lse': float(sp.logsumexp([0.0, 0.0])), 'facade_lse': float(special.logsumexp([0.0, 0.0]))}))\n"
    )
    assert got["ok"] is True and got["before"] == [False, False]
    assert got["same"] == {n: True for n in ("betaln", "erfc", "expit", "logit", "ndtr", "ndtri")}
    assert got["z"] == 1.959963984540054  # SciPy's ndtri(0.975), as scipy.special.ndtri prints it
    assert got["lse"] == got["facade_lse"] == pytest.approx(0.6931471805599453)  # ln 2


def test_without_preload_the_facade_is_scipy_special() -> None:
    """No preload (the app, the tests, any other caller): the facade imports
    ``scipy.special`` and hands out its attributes; with ``scipy.special`` imported,
    preload does nothing more."""
    got = _fresh(
        "import json, sys\n"
        "from planner.core import special\n"
        "f = special.ndtri\n"
        "import scipy.special as sp\n"
        "print(json.dumps({'same': f is sp.ndtri, 'array_api': 'scipy._lib._array_api' in sys.modules,\n"
        "                  'preload': special.preload()}))\n"
    )
    assert got == {"same": True, "array_api": True, "preload": False}


def test_preload_refuses_while_another_thread_could_import() -> None:
    """A live thread not named as quiet (one that could import ``scipy.special`` and be
    handed the stand-in) makes preload refuse; named as quiet, it proceeds."""
    got = _fresh(
        "import json, threading\n"
        "from planner.core import special\n"
        "stop = threading.Event()\n"
        "t = threading.Thread(target=stop.wait, name='other'); t.start()\n"
        "refused = special.preload()\n"
        "allowed = special.preload(quiet_threads=('other',))\n"
        "stop.set(); t.join()\n"
        "print(json.dumps({'refused': refused, 'allowed': allowed}))\n"
    )
    assert got == {"refused": False, "allowed": True}


def test_planner_release_does_not_import_scipys_array_api_layer(tmp_path: Path) -> None:
    """End to end: ``planner release`` of a plan whose predictions need ndtri and erfc (a
    discrete Gaussian histogram with σ ≥ 64, a Laplace count) reads the compiled functions
    only; its answers are those of the same release in an interpreter that imported
    ``scipy.special`` first (predictions equal: the same functions)."""
    data = tmp_path / "d.csv"
    data.write_text("g\n" + "".join(f"{'ab'[i % 2]}\n" for i in range(200)))
    spec = tmp_path / "plan.json"
    spec.write_text(json.dumps({
        "schema": {"version": 1, "relation": "add_remove", "columns": [
            {"name": "g", "kind": "categorical", "categories": ["a", "b"], "missing": {"action": "drop"}}],
            "public_n": 200},
        "budget": {"epsilon": 0.01, "delta": 1e-6, "composition": "zcdp"},
        "lifetime": {"epsilon": 1.0, "delta": 1e-5},
        "queries": [{"id": "h", "kind": "histogram", "column": "g", "mechanism": "discrete_gaussian"},
                    {"id": "n", "kind": "count", "mechanism": "laplace"}],
        "dataset_name": "t"}))
    runs = {}
    for first in ("", "import scipy.special\n"):
        ledger = tmp_path / f"l{len(runs)}.db"
        runs[bool(first)] = _fresh(
            first
            + "import io, json, sys, contextlib\n"
            "from planner.cli import main\n"
            "buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            f"    rc = main(['release', '--spec', {str(spec)!r}, '--data', {str(data)!r}, '--ledger', "
            f"'sqlite:///{ledger}', '--backend', 'duckdb'])\n"
            "res = json.loads(buf.getvalue())\n"
            "print(json.dumps({'rc': rc, 'array_api': 'scipy._lib._array_api' in sys.modules,\n"
            "                  'preds': [q['predictions'] for q in res['queries']]}))\n"
        )
    assert runs[False]["rc"] == runs[True]["rc"] == 0
    assert runs[False]["array_api"] is False and runs[True]["array_api"] is True
    assert runs[False]["preds"] == runs[True]["preds"]
