"""The root-finders: Brent's method (SciPy's own routine, without importing
:mod:`scipy.optimize`), and bisection on a monotone predicate, scalar, vectorised and over
the integers.

Every bracketing search of the engine goes through here, so each is written once:
:func:`brentq` for a root of a continuous function, :func:`bisect` and :func:`bisect_array`
for the crossing of a monotone yes/no question (the feasible end of a budget, a target met),
:func:`bisect_integer` and :func:`least_integer` over the whole numbers.

Brent's method
--------------

``planner release`` solves one equation to scale a plan's noise to its budget
(:func:`planner.planning.allocation._scale_to_budget`). ``from scipy import optimize`` costs 0.3-0.5 s
of CPU on this machine: the package imports linear programming, the global optimisers and
SciPy's array-API layer, which walks every lazy submodule of NumPy (``numpy.f2py`` alone is
0.2 s). On two cores that time is taken from the scan of the data, which runs at the same
time (issue 17).

The root is kept **bit for bit**. The θ's of a plan enter its ``plan_hash``, which makes a
re-run of the same PLAN.json return the stored answers instead of releasing (and spending)
again. A root finder of our own would move θ in its last bits after an upgrade, and an
old plan would then be released a second time. So this module calls SciPy's compiled
routine itself: the extension module ``scipy/optimize/_zeros`` is loaded from its file,
without running the package's ``__init__``. ``scipy.optimize.brentq`` adds only argument
checks and a wrapper that raises on a NaN function value; :func:`brentq` does the same.

If the compiled module cannot be found or loaded (another SciPy layout), the public
:func:`scipy.optimize.brentq` is called: the same routine, the same root, only the import is slower.
``tests/engine/test_rootfind.py`` checks that the loaded routine is used with the
installed SciPy and gives the public function's roots bit for bit.

References
----------
R. P. Brent, *Algorithms for Minimization without Derivatives*, Prentice-Hall, 1973,
chapter 4 (the method). SciPy, ``scipy.optimize.brentq`` (the implementation called).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

#: The smallest relative tolerance SciPy accepts (4 ulp at 1).
MIN_RTOL = 4 * 2.220446049250313e-16


@cache
def compiled_brentq() -> Callable[..., Any] | None:
    """SciPy's compiled ``_brentq``, loaded from ``scipy/optimize/_zeros`` without importing
    :mod:`scipy.optimize`; None when it cannot be loaded (then :func:`brentq` calls the
    public function)."""
    name = "scipy.optimize._zeros"
    try:
        spec = importlib.util.find_spec("scipy")  # locates the package; imports nothing
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(next(iter(spec.submodule_search_locations))) / "optimize"
        path = next((folder / f"_zeros{s}" for s in importlib.machinery.EXTENSION_SUFFIXES
                     if (folder / f"_zeros{s}").is_file()), None)
        if path is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        module_spec = importlib.util.spec_from_loader(name, loader, origin=str(path))
        if module_spec is None:
            return None
        had = name in sys.modules
        module = importlib.util.module_from_spec(module_spec)
        loader.exec_module(module)
        if not had:  # a later `import scipy.optimize` loads its own copy, as it always would
            sys.modules.pop(name, None)
        routine = getattr(module, "_brentq", None)
    except (ImportError, OSError):
        return None
    return routine if callable(routine) else None


def brentq(f: Callable[[float], float], a: float, b: float, *, xtol: float, rtol: float = MIN_RTOL,
           maxiter: int = 100) -> float:
    """A root of ``f`` in [a, b], where f(a) and f(b) differ in sign: exactly the root
    ``scipy.optimize.brentq(f, a, b, xtol=xtol, rtol=rtol, maxiter=maxiter)`` returns.

    Raises ValueError when the signs do not differ, a tolerance is below SciPy's minimum or
    f returns NaN, and RuntimeError when ``maxiter`` iterations do not converge — SciPy's
    exceptions for the same cases.

    Examples
    --------
    >>> round(brentq(lambda x: x * x - 2.0, 0.0, 2.0, xtol=1e-14), 12)
    1.414213562373
    """
    if xtol <= 0:
        raise ValueError(f"xtol too small ({xtol:g} <= 0)")
    if rtol < MIN_RTOL:
        raise ValueError(f"rtol too small ({rtol:g} < {MIN_RTOL:g})")
    routine = compiled_brentq()
    if routine is None:
        from scipy import optimize

        return float(optimize.brentq(f, a, b, xtol=xtol, rtol=rtol, maxiter=maxiter))

    def checked(x: float) -> float:  # scipy.optimize.brentq's NaN check, message without the value
        fx = f(x)
        if math.isnan(fx):
            raise ValueError("the function value is NaN; the root finder cannot continue.")
        return fx

    return float(routine(checked, a, b, xtol, rtol, int(maxiter), (), False, True))


def bisect(high: Callable[[float], bool], lo: float, hi: float, *, iterations: int, geometric: bool = False,
           done: Callable[[float, float], bool] | None = None) -> tuple[float, float]:
    """Shrink [lo, hi] around the point where the monotone question ``high`` turns true.

    Each step asks ``high(mid)`` at mid = (lo + hi)/2 (or √(lo·hi) with ``geometric``, for a
    positive bracket spanning decades) and keeps the half holding the crossing: hi = mid
    when true, else lo = mid. Stops after ``iterations`` steps, or after a step when
    ``done(lo, hi)``. Returns the final (lo, hi): ``high`` was false at every lo it set and
    true at every hi (so the caller keeps the feasible end it needs).

    The steps are the classic loop's, in the same order with the same midpoints, so a
    result is the same float as the hand-written loop it replaces.

    Examples
    --------
    >>> lo, hi = bisect(lambda x: x * x >= 2.0, 0.0, 2.0, iterations=60)
    >>> round(lo, 12), hi - lo < 1e-15
    (1.414213562373, True)
    """
    for _ in range(iterations):
        mid = math.sqrt(lo * hi) if geometric else (lo + hi) / 2.0
        if high(mid):
            hi = mid
        else:
            lo = mid
        if done is not None and done(lo, hi):
            break
    return lo, hi


def bisect_array(high: Callable[[Any], Any], lo: Any, hi: Any, *, iterations: int,
                 done: Callable[[Any, Any], bool] | None = None,
                 midpoint: Callable[[Any, Any], Any] | None = None) -> tuple[Any, Any]:
    """:func:`bisect` on NumPy arrays of brackets at once: ``high`` maps an array of
    midpoints to an array of booleans; every bracket takes the same number of steps,
    stopping early after a step when ``done(lo, hi)`` (one bool for all). Midpoints are
    (lo + hi)/2, or ``midpoint(lo, hi)`` (e.g. ⌊(lo + hi)/2⌋ for a search over the integers).

    Examples
    --------
    >>> import numpy as np
    >>> lo, hi = bisect_array(lambda x: x * x >= np.array([2.0, 9.0]), np.zeros(2), np.full(2, 4.0), iterations=60)
    >>> [round(float(x), 9) for x in lo]
    [1.414213562, 3.0]
    """
    import numpy as np

    for _ in range(iterations):
        mid = (lo + hi) / 2.0 if midpoint is None else midpoint(lo, hi)
        up = high(mid)
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
        if done is not None and done(lo, hi):
            break
    return lo, hi


def bisect_integer(high: Callable[[int], bool], lo: int, hi: int) -> tuple[int, int]:
    """:func:`bisect` over the whole numbers: shrink [lo, hi] to two neighbours (hi − lo ≤ 1)
    around the point where the monotone ``high`` turns true, at mid = ⌊(lo + hi)/2⌋.

    Examples
    --------
    >>> bisect_integer(lambda n: n * n >= 50, 0, 100)
    (7, 8)
    """
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if high(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def least_integer(holds: Callable[[int], bool], start: int = 1, limit: int | None = None) -> int | None:
    """The least whole number n ≥ ``start`` with ``holds(n)``, for a question that, once true,
    stays true (monotone): doubling from ``start`` until it holds, then bisection between
    the last two. None when it does not hold at ``limit`` (checked first, when given).

    Examples
    --------
    >>> least_integer(lambda n: n * n >= 50)
    8
    >>> least_integer(lambda n: n > 10, limit=5) is None
    True
    """
    if limit is not None and not holds(limit):
        return None
    lo, hi = start - 1, start  # holds(lo) is false (or lo is below start)
    while not holds(hi):
        lo, hi = hi, hi * 2 if limit is None else min(hi * 2, limit)
    return bisect_integer(holds, lo, hi)[1]
