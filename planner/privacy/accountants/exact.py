"""Exact running sums: what lets an accountant add one release's spends to a composed
history and read the same number as composing everything at once.

:class:`ExactSum` keeps the *partials* of Shewchuk's algorithm (the non-overlapping
expansion :func:`math.fsum` builds internally): the exact real sum of every value added so
far, in a few floats. Its :attr:`~ExactSum.value` is :func:`math.fsum` of the partials, the
exact sum rounded once; :func:`math.fsum` of all the values is the same exact sum rounded
the same way, so the two are the same float whatever the order and grouping of the
additions.

References
----------
.. [S97] J. R. Shewchuk, "Adaptive Precision Floating-Point Arithmetic and Fast Robust
   Geometric Predicates", Discrete & Computational Geometry 18, 1997 (the expansion sum;
   the algorithm of CPython's ``math.fsum``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class ExactSum:
    """The exact sum of the floats added so far (immutable: :meth:`add` returns a new one).

    ``partials`` is a Shewchuk expansion of the finite values; ``special`` holds the sum of
    the infinite ones (``inf``, ``-inf`` or NaN), 0.0 while there is none.

    Examples
    --------
    >>> s = ExactSum().add([1e100, 1.0]).add([-1e100])
    >>> s.value  # math.fsum([1e100, 1.0, -1e100])
    1.0
    >>> ExactSum().add([0.1] * 10).value == math.fsum([0.1] * 10)
    True
    """

    partials: tuple[float, ...] = ()
    special: float = 0.0
    count: int = 0

    def add(self, values: Iterable[float]) -> ExactSum:
        """A new sum holding ``values`` as well."""
        partials = list(self.partials)
        special = self.special
        n = self.count
        for v in values:
            x = float(v)
            n += 1
            if not math.isfinite(x):
                special += x
                continue
            i = 0
            for y in partials:  # Shewchuk's grow-expansion, as in math.fsum
                if abs(x) < abs(y):
                    x, y = y, x
                hi = x + y
                lo = y - (hi - x)
                if lo:
                    partials[i] = lo
                    i += 1
                x = hi
            partials[i:] = [x]
        return ExactSum(tuple(partials), special, n)

    @property
    def value(self) -> float:
        """The exact sum rounded to the nearest float (``math.fsum`` of every value added)."""
        if self.special != 0.0 or math.isnan(self.special):
            return self.special
        return math.fsum(self.partials)


__all__ = ["EMPTY_SUM", "ExactSum"]

#: The empty sum (a shared immutable default).
EMPTY_SUM: Final[ExactSum] = ExactSum()
