"""Contingency tables (marginals): of integer-coded records, or read from exact tables.

A marginal over a clique C is the vector of counts of each combination of C's codes. The
mechanisms (:mod:`.mst`, :mod:`.aim`) never read records: they read the 1- and 2-way
marginals of the private table through a :class:`MarginalSource`. In a release the source
is the exact tables a backend computed (:class:`TableSource`, from
:class:`planner.data.requests.MarginalTables`); in tests and benchmarks it is a set of
integer-coded records (:class:`RecordSource`). :class:`CompressedSource` re-expresses a
source over a compressed domain (:mod:`.compress`) by summing merged codes.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from planner.core.errors import QueryError
from planner.planning.synth.domain import Clique, Domain, FloatArray, IntArray

if TYPE_CHECKING:
    from planner.planning.synth.compress import Compression


def marginal(records: IntArray, domain: Domain, clique: Sequence[int]) -> FloatArray:
    """Counts of every cell of the marginal over ``clique``, shaped ``domain.shape(clique)``.

    Parameters
    ----------
    records : ndarray of int, shape (rows, columns)
        Integer-coded records (checked against ``domain`` by the caller).
    domain : Domain
        The table's domain.
    clique : sequence of int
        Column indices, in the order of the output axes.

    Returns
    -------
    ndarray of float64
        The contingency table; it sums to the number of rows.

    Notes
    -----
    Cell index of a row = Σ_j x_j Π_{l>j} k_l (C order), then one ``bincount``:
    O(rows · |C|) time and O(Π k_j) memory.

    Examples
    --------
    >>> d = Domain.from_sizes([2, 3])
    >>> x = np.array([[0, 1], [0, 1], [1, 2]])
    >>> marginal(x, d, (0, 1)).tolist()
    [[0.0, 2.0, 0.0], [0.0, 0.0, 1.0]]
    """
    cols = tuple(int(c) for c in clique)
    shape = domain.shape(cols)
    if not cols:
        return np.array(float(records.shape[0]))
    if len(cols) == 1:
        flat = records[:, cols[0]]
    else:
        flat = np.ravel_multi_index(tuple(records[:, c] for c in cols), shape)
    counts = np.bincount(flat, minlength=int(np.prod(shape)))
    return np.asarray(counts.astype(np.float64).reshape(shape), dtype=np.float64)


def tvd(p: FloatArray, q: FloatArray) -> float:
    """Total-variation distance ½ Σ |p/Σp − q/Σq| between two tables of counts.

    Examples
    --------
    >>> tvd(np.array([3.0, 1.0]), np.array([1.0, 1.0]))
    0.25
    """
    a = np.asarray(p, dtype=np.float64).ravel()
    b = np.asarray(q, dtype=np.float64).ravel()
    sa, sb = float(a.sum()), float(b.sum())
    if sa <= 0 or sb <= 0:
        raise QueryError("tvd needs two tables with positive totals.")
    return 0.5 * float(np.abs(a / sa - b / sb).sum())


def all_cliques(n_columns: int, way: int) -> list[Clique]:
    """All ``way``-column subsets of ``range(n_columns)``, in lexicographic order.

    Examples
    --------
    >>> all_cliques(3, 2)
    [(0, 1), (0, 2), (1, 2)]
    """
    return list(itertools.combinations(range(n_columns), way))


def average_tvd(real: IntArray, synthetic: IntArray, domain: Domain, way: int) -> float:
    """Mean TVD over all ``way``-way marginals between two tables over ``domain``.

    Examples
    --------
    >>> d = Domain.from_sizes([2, 2])
    >>> a = np.array([[0, 0], [1, 1]]); b = np.array([[0, 1], [1, 0]])
    >>> average_tvd(a, b, d, 1), average_tvd(a, b, d, 2)
    (0.0, 1.0)
    """
    cl = all_cliques(len(domain), way)
    return float(np.mean([tvd(marginal(real, domain, c), marginal(synthetic, domain, c)) for c in cl]))


class MarginalSource(Protocol):
    """The private table as the mechanisms see it: its 1- and 2-way marginals (PRIVATE)."""

    @property
    def domain(self) -> Domain:
        """The (public) domain the marginals are over."""
        ...

    def marginal(self, clique: Clique) -> FloatArray:
        """Exact counts over ``clique`` (sorted, one or two columns), shaped
        ``domain.shape(clique)``."""
        ...


class RecordSource:
    """Marginals of integer-coded records (tests, benchmarks, the owner-only comparison).

    Examples
    --------
    >>> s = RecordSource(np.array([[0, 1], [1, 1]]), Domain.from_sizes([2, 2]))
    >>> s.marginal((1,)).tolist()
    [0.0, 2.0]
    """

    def __init__(self, records: IntArray, domain: Domain) -> None:
        self._x = domain.check_records(records)
        self._domain = domain

    @property
    def domain(self) -> Domain:
        return self._domain

    @property
    def records(self) -> IntArray:
        return self._x

    def marginal(self, clique: Clique) -> FloatArray:
        return marginal(self._x, self._domain, clique)


class TableSource:
    """Marginals read from exact tables keyed by clique (a backend's
    :class:`~planner.data.requests.MarginalTables`). 1-way tables missing from ``tables``
    are summed from a 2-way table that holds the column.

    Examples
    --------
    >>> d = Domain.from_sizes([2, 3])
    >>> s = TableSource(d, {(0, 1): np.array([[1.0, 0, 2], [0, 4, 0]])})
    >>> s.marginal((1,)).tolist(), s.marginal((0,)).tolist()
    ([1.0, 4.0, 2.0], [3.0, 4.0])
    """

    def __init__(self, domain: Domain, tables: Mapping[Clique, FloatArray]) -> None:
        self._domain = domain
        self._tables: dict[Clique, FloatArray] = {}
        for c, t in tables.items():
            key = tuple(int(j) for j in c)
            arr = np.asarray(t, dtype=np.float64)
            if key != tuple(sorted(set(key))) or arr.shape != domain.shape(key):
                raise QueryError(
                    f"a marginal table over {key} must be sorted and shaped {domain.shape(key)}; "
                    f"got shape {arr.shape}."
                )
            self._tables[key] = arr

    @property
    def domain(self) -> Domain:
        return self._domain

    def marginal(self, clique: Clique) -> FloatArray:
        key = tuple(int(j) for j in clique)
        hit = self._tables.get(key)
        if hit is not None:
            return hit
        if len(key) == 1:
            for c, t in self._tables.items():
                if key[0] in c:
                    axes = tuple(i for i, a in enumerate(c) if a != key[0])
                    return np.asarray(t.sum(axis=axes), dtype=np.float64)
        names = [self._domain.names[j] for j in key if 0 <= j < len(self._domain)]
        raise QueryError(f"no exact marginal over {names} was computed; the release asked for 1- and 2-way "
                         "marginals only.")


class CompressedSource:
    """A source's marginals over a compressed domain: the counts of merged codes summed
    (:meth:`planner.planning.synth.compress.Compression.encode_counts`), cached."""

    def __init__(self, source: MarginalSource, compression: Compression) -> None:
        self._src = source
        self._comp = compression
        self._cache: dict[Clique, FloatArray] = {}

    @property
    def domain(self) -> Domain:
        return self._comp.compressed

    def marginal(self, clique: Clique) -> FloatArray:
        key = tuple(int(j) for j in clique)
        hit = self._cache.get(key)
        if hit is None:
            t = self._src.marginal(key)
            for axis, j in enumerate(key):
                t = self._comp.encode_counts(j, t, axis=axis)
            hit = self._cache[key] = t
        return hit
