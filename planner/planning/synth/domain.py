"""Discrete domains: column names and their (public) numbers of categories.

A record is a tuple of integer codes, column ``j`` taking values in ``{0, …, k_j − 1}``.
The domain is part of the public schema (declared by the data owner, never read from the
rows), so everything computed from it alone is data-independent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError

#: Integer-coded records, shape (rows, columns).
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
#: A set of columns, as sorted column indices.
Clique = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Domain:
    """Column names and numbers of categories of a discrete table.

    Parameters
    ----------
    names : tuple of str
        Column names, unique.
    sizes : tuple of int
        Number of categories of each column (≥ 1).

    Examples
    --------
    >>> d = Domain(("age", "sex"), (4, 2))
    >>> d.cells((0, 1)), d.shape((1,)), d.index("sex")
    (8, (2,), 1)
    """

    names: tuple[str, ...]
    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        names = tuple(str(n) for n in self.names)
        sizes = tuple(int(s) for s in self.sizes)
        if len(names) != len(sizes):
            raise QueryError(
                f"names and sizes must have the same length; got {len(names)} names and "
                f"{len(sizes)} sizes."
            )
        if len(set(names)) != len(names):
            raise QueryError("column names must be unique; rename the repeated columns.")
        if any(s < 1 for s in sizes):
            raise QueryError(f"every column needs at least one category; got sizes {sizes}.")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "sizes", sizes)

    @classmethod
    def from_sizes(cls, sizes: Sequence[int], names: Sequence[str] | None = None) -> Domain:
        """A domain with the given sizes and names ``c0, c1, …`` unless given."""
        nm = tuple(names) if names is not None else tuple(f"c{j}" for j in range(len(sizes)))
        return cls(nm, tuple(int(s) for s in sizes))

    def __len__(self) -> int:
        return len(self.sizes)

    def index(self, name: str) -> int:
        """Position of column ``name``."""
        try:
            return self.names.index(name)
        except ValueError:
            raise QueryError(f"no column named {name!r}; columns are {list(self.names)}.") from None

    def clique(self, cols: Iterable[int | str]) -> Clique:
        """Sorted, de-duplicated column indices of ``cols`` (names or indices)."""
        out: set[int] = set()
        for c in cols:
            j = self.index(c) if isinstance(c, str) else int(c)
            if not 0 <= j < len(self.sizes):
                raise QueryError(f"column index {j} out of range for {len(self.sizes)} columns.")
            out.add(j)
        return tuple(sorted(out))

    def shape(self, clique: Sequence[int]) -> tuple[int, ...]:
        """Table shape of a marginal over ``clique``."""
        return tuple(self.sizes[j] for j in clique)

    def cells(self, clique: Sequence[int]) -> int:
        """Number of cells of a marginal over ``clique`` (Π k_j; 1 for the empty clique)."""
        return math.prod(self.sizes[j] for j in clique)

    def check_records(self, records: npt.ArrayLike) -> IntArray:
        """``records`` as an int64 array of shape (rows, columns), every code in range.

        Raises
        ------
        ValueError
            If the shape is wrong or a code is outside ``{0, …, k_j − 1}`` (the message
            names the column, not the value).
        """
        x = np.asarray(records)
        if x.ndim != 2 or x.shape[1] != len(self.sizes):
            raise QueryError(
                f"records must have shape (rows, {len(self.sizes)}); got {x.shape}."
            )
        if x.size and not np.issubdtype(x.dtype, np.integer):
            raise QueryError("records must be integer codes; encode categories first.")
        x = x.astype(np.int64, copy=False)
        if x.size:
            lo = x.min(axis=0)
            hi = x.max(axis=0)
            for j, (a, b) in enumerate(zip(lo, hi, strict=True)):
                if a < 0 or b >= self.sizes[j]:
                    raise QueryError(
                        f"column {self.names[j]!r} has codes outside 0..{self.sizes[j] - 1}; "
                        "clip or re-encode it against the declared domain."
                    )
        return x
