"""A small memo for the split modes: the same workload, budget and rule give the same split.

The allocators are pure functions of their arguments (no randomness, no clock, no global
state), so a split computed once may be handed out again. ``planner plan`` plans the rule in
force and then compares every rule (the rule in force a second time); the Planner page plans
the rule in force, the comparison, a target search and the "most ε that still fits" search
from the same workloads. Each asks the memo first.

The key is exact: every argument is frozen to a tuple of its type and value, floats by their
bits (``float.hex``: 0.0 and -0.0 differ, NaN equals itself), arrays by dtype, shape and
bytes, dataclasses field by field,
enums by class and value. An argument of any other type is not frozen and the call is not
memoised (it runs as before). Errors are never stored: a refused split is refused again.
The results (frozen dataclasses of tuples) are shared, never copied; nothing mutates them.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, ParamSpec, TypeVar

import numpy as np

P = ParamSpec("P")
R = TypeVar("R")

#: How many results a memo keeps (least recently used dropped first).
MAX_ENTRIES = 256


class _NotFrozen(TypeError):
    """An argument the memo cannot key exactly: the call runs unmemoised."""


def freeze(value: Any) -> Hashable:
    """An exact, hashable key of ``value``.

    Raises
    ------
    TypeError
        For a value of a type the key cannot represent exactly (the caller then does not
        memoise).

    Examples
    --------
    >>> freeze(0.0) == freeze(-0.0), freeze(float("nan")) == freeze(float("nan"))
    (False, True)
    >>> freeze([1, 2.5]) == freeze((1, 2.5))
    True
    """
    if value is None or isinstance(value, (bool, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, enum.Enum):
        return (type(value).__qualname__, freeze(value.value))
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (tuple, list)):
        return ("seq", tuple(freeze(v) for v in value))
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((freeze(k), freeze(v)) for k, v in value.items())))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__,
                tuple(freeze(getattr(value, f.name)) for f in dataclasses.fields(value)))
    raise _NotFrozen(f"cannot key a {type(value).__name__}")


class Memo:
    """An exact memo of the last ``max_entries`` results of pure functions (thread-safe):
    ``memo(fn, *args)`` is ``fn(*args)``, computed once per distinct key (``fn`` and the
    frozen arguments).

    Examples
    --------
    >>> calls = []
    >>> def square(x: float) -> float:
    ...     calls.append(x)
    ...     return x * x
    >>> m = Memo()
    >>> m(square, 3.0), m(square, 3.0), m(square, -0.0), calls
    (9.0, 9.0, 0.0, [3.0, -0.0])
    >>> m.info()
    (1, 2, 2)
    """

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._store: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries
        self._hits = self._misses = 0

    def __call__(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            key = (fn.__module__, fn.__qualname__, freeze(args), freeze(kwargs))
        except _NotFrozen:
            return fn(*args, **kwargs)
        with self._lock:
            if key in self._store:
                self._store.move_to_end(key)
                self._hits += 1
                hit: R = self._store[key]
                return hit
            self._misses += 1
        out = fn(*args, **kwargs)  # an error propagates and is not stored
        with self._lock:
            self._store[key] = out
            while len(self._store) > self._max:
                self._store.popitem(last=False)
        return out

    def clear(self) -> None:
        """Forget every stored result (and the counts)."""
        with self._lock:
            self._store.clear()
            self._hits = self._misses = 0

    def info(self) -> tuple[int, int, int]:
        """(hits, misses, results stored)."""
        with self._lock:
            return self._hits, self._misses, len(self._store)
