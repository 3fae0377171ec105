"""SciPy's special functions, the compiled ones without :mod:`scipy.special`'s package body.

``from scipy import special`` costs about 0.2 s of CPU and 16 MB of memory, most of it for
SciPy's array-API layer (it copies NumPy's namespace, which imports ``numpy.f2py``) that
the planner never uses. ``planner release`` needs two special functions on its way (the
normal quantile of a Gaussian error bound, ``erfc`` in a discrete Gaussian's tail), and
pays that import while DuckDB reads the data on the same two cores.

``from planner.core import special`` then ``special.ndtri(...)`` gives SciPy's own ufunc object:
:data:`UFUNCS` are taken from the compiled module ``scipy.special._ufuncs``, loaded without
running ``scipy/special/__init__.py`` (about 20 ms, :func:`preload`); every other name
(``logsumexp``, a Python function of SciPy's array-API layer) is looked up on
:mod:`scipy.special` itself. The objects are SciPy's, so every value is SciPy's bit for bit
(``tests/engine/test_special.py`` checks the identity), and a later ``import scipy.special``
uses the very same compiled module.

How the compiled module is loaded
---------------------------------
Its initialisation imports its sibling modules (``_ufuncs_cxx``, ``_special_ufuncs``, ...)
by their absolute names, which would run the package's body first. For the time of that
import (about 20 ms), a bare package module stands in for ``scipy.special`` in
:data:`sys.modules` (pointing at the same folder), and is removed afterwards; the loaded
submodules stay. Another thread importing ``scipy.special`` (or ``scipy.stats``, which
does) meanwhile would be handed the stand-in: Python looks ``sys.modules`` up without any
lock. So :func:`preload` only does it when every other live Python thread is one known
never to import SciPy (``planner release`` passes its scan and whole-file-check threads),
and the facade uses the compiled module only after a successful :func:`preload`; anywhere
else (the app, the tests, any other caller) it is ``scipy.special`` itself.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: The compiled special functions the planner calls (ufuncs of ``scipy.special._ufuncs``).
UFUNCS = frozenset({"ndtri", "ndtr", "erfc", "expit", "logit", "betaln"})

_lock = threading.Lock()
_preloaded: list[types.ModuleType] = []


def preload(quiet_threads: Iterable[str] = ()) -> bool:
    """Load ``scipy.special._ufuncs`` now, without the package's body, if ``scipy.special``
    is not imported and every other live Python thread is named in ``quiet_threads``
    (threads whose code never imports SciPy). Returns whether the compiled functions are
    now what the facade hands out."""
    with _lock:
        if _preloaded:
            return True
        me = threading.current_thread()
        if any(t is not me and t.name not in set(quiet_threads) for t in threading.enumerate()):
            return False
        module = _load_alone()
        if module is None:
            return False
        _preloaded.append(module)
        return True


def _load_alone() -> types.ModuleType | None:
    import _imp

    name, package = "scipy.special._ufuncs", "scipy.special"
    if package in sys.modules:
        return None
    try:
        importlib.import_module("scipy")  # the package itself (light)
        spec = importlib.util.find_spec("scipy")
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = str(Path(next(iter(spec.submodule_search_locations))) / "special")
    except ImportError:
        return None
    _imp.acquire_lock()  # no other thread starts an import meanwhile
    try:
        if package in sys.modules:
            return None
        stand_in = types.ModuleType(package)
        stand_in.__path__ = [folder]
        stand_in.__package__ = package
        stand_in.__spec__ = importlib.machinery.ModuleSpec(package, None, is_package=True)
        stand_in.__spec__.submodule_search_locations = [folder]
        sys.modules[package] = stand_in
        try:
            module = importlib.import_module(name)
        finally:
            if sys.modules.get(package) is stand_in:
                del sys.modules[package]
        return module if all(hasattr(module, f) for f in UFUNCS) else None
    except Exception:  # any SciPy layout this does not know: the public module instead
        return None  # (submodules loaded before the failure are complete: they may stay)
    finally:
        _imp.release_lock()


def __getattr__(name: str) -> Any:
    """SciPy's ``scipy.special.<name>``: from the compiled module when :func:`preload` has
    loaded it and ``scipy.special`` is not imported, else from the package."""
    if name.startswith("__"):
        raise AttributeError(name)
    if name in UFUNCS and _preloaded and "scipy.special" not in sys.modules:
        return getattr(_preloaded[0], name)
    from scipy import special

    return getattr(special, name)
