"""Bins: the per-row bin key of every grouping request, and the counts binned in Python.

Bin counts, candidate counts and boolean counts are all counts per value of one *bin key*
per row (−1: not usable; −2: outside the edges), counted by the one-scan statement
(:mod:`planner.data.backends.sql.statement`). :class:`Binner` writes the keys.

* **Evenly spaced edges and grids**: a bin index is computed from the quotient
  (x − e₀)/w; where it is near an integer (ties included) it is corrected against the
  actual edge values (computed as ``i·step + e₀`` when that reproduces every edge bit for
  bit, else read from an array parameter), so ties on edges follow ``searchsorted``
  exactly (:meth:`Binner._far`). Other edges: one comparison per edge.
* **Small integer-valued columns** (at most :data:`MAX_VALUE_GROUPS` possible values)
  are counted per value and binned in Python by ``searchsorted`` itself
  (:meth:`Binner.value_counted`, :meth:`Binner.of_values`).
* **A quantile's two requests** (candidate counts on a grid, bin counts over
  ``[*grid, top]``) are counted with one joint key (:meth:`Binner.rank_pairs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import numpy as np

from planner.core.errors import QueryError
from planner.data.backends.sql.compile import BinsSlot, Slot
from planner.data.backends.sql.dialect import Dialect, Layer, Params
from planner.data.backends.sql.reading import CellReader
from planner.data.schema import ColumnKind

#: Integer-valued numeric columns with at most this many values are binned per value.
MAX_VALUE_GROUPS: Final[int] = 1 << 16
#: Bin keys with fewer values than this are counted by one comparison per key and row.
SMALL_DOMAIN: Final[int] = 12


def uniform_guess_ok(edges: np.ndarray, side: str) -> bool:
    """Whether ``floor/ceil((x − e₀)/w)`` is within one of searchsorted for all x in range."""
    if edges.size < 2:
        return False
    w = float(edges[1] - edges[0])
    if not w > 0:
        return False
    lo_pts = np.nextafter(edges, -np.inf)
    pts = np.concatenate([edges, lo_pts, np.nextafter(edges, np.inf)])
    pts = pts[(pts >= edges[0]) & (pts <= edges[-1])]
    q = (pts - edges[0]) / w
    if side == "right":
        guess = np.clip(np.floor(q), 0, edges.size - 2)
        truth = np.searchsorted(edges, pts, side="right") - 1
    else:
        guess = np.clip(np.ceil(q), 0, edges.size - 1)
        truth = np.searchsorted(edges, pts, side="left")
    return bool(np.all(np.abs(guess - truth) <= 1))


def arithmetic_step(edges: np.ndarray) -> float | None:
    """A step with ``edges[i] == i·step + edges[0]`` exactly for every i but the last, if any.

    Both IEEE operations round the same way in numpy, DuckDB and Spark (no fused
    multiply-add across separate SQL operators), so SQL computes these edges bit for bit.
    ``numpy.linspace`` grids and the grids of a declared step have this form, and so do
    the edges ``[*grid, top]`` of a histogram paired with a quantile's candidates
    (:meth:`Binner.rank_pairs`), whose step is the grid's own, (grid[-1] − grid[0]) /
    (n − 2): neither the whole span's nor the first difference.

    Examples
    --------
    >>> arithmetic_step(np.linspace(18, 90, 1001)) == (90 - 18) / 1000
    True
    >>> grid = np.linspace(18, 90, 1001)
    >>> arithmetic_step(np.append(grid, 90 + (grid[1] - grid[0]))) == (90 - 18) / 1000
    True
    >>> arithmetic_step(np.array([0.0, 1.0, 3.0, 4.0])) is None
    True
    """
    n = edges.size
    if n < 2:
        return None
    i = np.arange(n - 1, dtype=np.float64)
    steps = [(edges[-1] - edges[0]) / (n - 1), edges[1] - edges[0]]
    if n > 2:
        steps.append((edges[-2] - edges[0]) / (n - 2))
    for step in steps:
        if step > 0 and np.isfinite(step) and np.array_equal(i * step + edges[0], edges[:-1]):
            return float(step)
    return None


@dataclass(frozen=True)
class BinPlan:
    """How a statement counts its grouping requests (:meth:`Binner.plan`)."""

    #: the requests as asked
    wanted: tuple[BinsSlot, ...]
    #: request → the per-value request it is binned from in Python (:meth:`Binner.value_counted`)
    by_value: dict[BinsSlot, BinsSlot]
    #: the requests counted by a bin key each (deduplicated; paired candidates left out)
    groups: tuple[BinsSlot, ...]
    #: histogram → the candidate counts counted with it by one joint key (:meth:`Binner.rank_pairs`)
    ranks: dict[BinsSlot, BinsSlot]


class Binner:
    """The bin keys of a source's grouping requests (module docstring)."""

    def __init__(self, reader: CellReader) -> None:
        self.reader = reader
        self.schema = reader.schema
        self.dialect: Dialect = reader.dialect

    def value_counted(self, k: int) -> bool:
        """Whether bins of column k are counted per distinct value and binned in Python.

        For an integer-valued column with at most :data:`MAX_VALUE_GROUPS` possible values
        (``U − L + 1``), one ``GROUP BY`` value serves every histogram and quantile grid
        of the column, and :func:`numpy.searchsorted` bins the few values exactly as the
        pandas backend bins the rows.
        """
        if not self.reader.int_valued(k):
            return False
        lo, hi = self.schema.columns[k].bounds
        return hi - lo + 1 <= MAX_VALUE_GROUPS

    def plan(self, wanted: Sequence[BinsSlot], *, pair_ranks: bool) -> BinPlan:
        """Which bin keys count the grouping requests ``wanted`` (see :class:`BinPlan`)."""
        # bins of small integer-valued columns: counted per value, binned in Python
        by_value = {g: BinsSlot(g.k) for g in wanted
                    if (g.edges is not None or g.grid is not None) and self.value_counted(g.k)}
        groups = list(dict.fromkeys(by_value.get(g, g) for g in wanted))
        # a quantile's candidate counts and the bins of [*grid, top] (its rank counts): one key
        ranks = self.rank_pairs(groups) if pair_ranks else {}
        groups = [g for g in groups if g not in ranks.values()]
        return BinPlan(tuple(wanted), by_value, tuple(groups), ranks)

    def keys(self, plan: BinPlan, p: Params, layers: list[Layer]) -> list[str]:
        """The key expression of each counted request (``gk{j}``); its quotient and
        index columns go to ``layers[3]`` and ``layers[4]`` (:meth:`key_sql`)."""
        keys: list[str] = []
        for j, g in enumerate(plan.groups):
            guess, idx, key = self.key_sql(g, p, j, rank=g in plan.ranks)
            keys.append(key)
            if guess is not None:
                layers[3].add(f"gg{j}", guess)
            if idx is not None:
                layers[4].add(f"gi{j}", idx)
        return keys

    def from_values(self, plan: BinPlan, res: dict[Slot, Any]) -> None:
        """The requests counted per value (:meth:`value_counted`), binned in Python."""
        for g in plan.wanted:
            if g in plan.by_value:
                res[g] = self.of_values(g, res[plan.by_value[g]])

    def of_values(self, g: BinsSlot, values: dict[int, int]) -> dict[int, int]:
        """Bin counts of request g from the counts per usable value (see :meth:`value_counted`).

        The same :func:`numpy.searchsorted` rules as the pandas backend: histogram bin i
        is [e_i, e_{i+1}) with the last bin closed, −2 outside the edges; a quantile
        candidate is the smallest t ≥ x.
        """
        lo = self.schema.columns[g.k].bounds[0]
        pairs = [(v, c) for v, c in values.items() if v >= lo]  # lo − 1: not usable
        x = np.asarray([v for v, _ in pairs], dtype=np.float64)
        n = np.asarray([c for _, c in pairs], dtype=np.int64)
        if g.edges is not None:
            e = np.asarray(g.edges, dtype=np.float64)
            idx = np.searchsorted(e, x, side="right") - 1
            idx[x == e[-1]] = e.size - 2  # the last bin is closed
            idx[(idx < 0) | (idx >= e.size - 1)] = -2
        else:
            idx = np.searchsorted(np.asarray(g.grid, dtype=np.float64), x, side="left")
        out: dict[int, int] = {}
        for i, c in zip(idx.tolist(), n.tolist(), strict=True):
            out[i] = out.get(i, 0) + c
        return out

    def key_sql(self, g: BinsSlot, p: Params, j: int, *, rank: bool = False
                     ) -> tuple[str | None, str | None, str]:
        """(quotient, index, key) of a grouping request: the per-row bin key (−1: not
        usable; −2: outside the edges). With ``rank`` (a histogram over ``[*grid, top]``
        paired with candidate counts on ``grid``, :meth:`rank_pairs`) the key is their
        joint key: 2·b + t with b the histogram's bin (e_b ≤ x < e_{b+1}, the last closed)
        and t = 0 where x = e_b exactly, 1 elsewhere; the smallest candidate ≥ x is then
        b + t (:meth:`split_ranks`).

        Evenly spaced edges: the key is read from the quotient q = (x − e₀)/w (column
        ``gg{j}``) and the guess floor(q) (ceil for a quantile grid) clamped to the bins
        (column ``gi{j}``, computed once per row: the correcting branch reads it up to
        seven times, 0.1 s per 10⁷ rows of integer data on a 0.072 grid); where q is far
        from an integer the guess is the bin and x lies on no edge; the few rows near an
        edge (ties included) take a branch that corrects the guess against the actual
        edge values (``CASE`` evaluates it on those rows only; :meth:`_far`). Other
        edges: an exact bin index (column ``gi{j}``) from one comparison per edge. Each
        of the three is a projection layer of its own. The range tests (−2, the closed
        last bin) are left out where every clipped value lies in [e₀, e_last) (the
        declared bounds).

        Edge values are read from the edge array parameter, or, when every edge but the
        last equals ``i·step + e₀`` exactly in IEEE arithmetic (the grids of
        ``numpy.linspace`` and of a declared step), computed by that same formula in
        SQL: cheaper than an array lookup per row, and bit-identical.
        """
        k = g.k
        v = f"v{k}"
        col = self.schema.columns[k]
        if g.edges is None and g.grid is None:
            if col.kind is ColumnKind.NUMERIC:  # per value (:meth:`value_counted`)
                below = p(int(col.bounds[0]) - 1)
                return None, None, f"CASE WHEN u{k} THEN CAST({v} AS BIGINT) ELSE {below} END"
            return None, None, f"CASE WHEN u{k} THEN {v} ELSE -1 END"
        if g.edges is not None:
            return self._edges_key_sql(g.edges, k, p, j, rank=rank)
        return self._grid_key_sql(g.grid or (), k, p, j)

    def _edges_key_sql(self, edges: tuple[float, ...], k: int, p: Params, j: int, *, rank: bool
                       ) -> tuple[str | None, str | None, str]:
        """:meth:`key_sql` of a histogram over ``edges`` of numeric column k."""
        d = self.dialect
        v = f"v{k}"
        gg, gi = f"gg{j}", f"gi{j}"
        e = np.asarray(edges, dtype=np.float64)
        nb = e.size - 1
        lo, hi = self.schema.columns[k].bounds
        ranges = ""
        # a usable v is clipped to [lo, hi] (a replacement value is clipped too);
        # parameters are bound only where the SQL uses them
        if not float(e[0]) <= lo <= hi < float(e[-1]):
            first, last = p(float(e[0])), p(float(e[-1]))
            ranges = (f"WHEN {v} = {last} THEN {2 * nb - 1 if rank else nb - 1} "
                      f"WHEN {v} < {first} OR {v} > {last} THEN -2 ")
        edge_fn: list[Callable[[str], str]] = []

        def edge(i: str) -> str:
            if not edge_fn:
                edge_fn.append(self._edge_fn(e, p))
            return edge_fn[0](i)

        def keyed(i: str) -> str:  # the key of bin index i (an expression)
            if not rank:
                return i
            return f"2 * {i} + CASE WHEN {v} = {edge(i)} THEN 0 ELSE 1 END"

        if uniform_guess_ok(e, "right"):
            w, e0 = p(float(e[1] - e[0])), p(float(e[0]))
            guess = gi  # computed once per row (column gi{j}): the branches below read it often
            exact = (
                f"({guess} - CASE WHEN {v} < {edge(guess)} THEN 1 ELSE 0 END "
                f"+ CASE WHEN {v} >= {edge(f'{guess} + 1')} THEN 1 ELSE 0 END)"
            )
            far = self._far(gg, e)
            # far from an edge: x is on none (t = 1 in the joint key)
            fast = "" if far is None else f"WHEN {far} THEN {f'2 * {guess} + 1' if rank else guess} "
            key = f"CASE WHEN NOT u{k} THEN -1 {ranges}{fast}ELSE {keyed(exact)} END"
            return f"({v} - {e0}) / {w}", f"CAST(least(greatest({d.floor(gg)}, 0), {nb - 1}) AS BIGINT)", key
        if e.size > 2000:
            raise QueryError("more than 2000 irregular bin edges; use evenly spaced bins.")
        whens = " ".join(f"WHEN {v} < {p(float(x))} THEN {i - 1}" for i, x in enumerate(e))
        return None, f"CASE {whens} ELSE {nb} END", f"CASE WHEN NOT u{k} THEN -1 {ranges}ELSE {keyed(gi)} END"

    def _grid_key_sql(self, candidates: tuple[float, ...], k: int, p: Params, j: int
                      ) -> tuple[str | None, str | None, str]:
        """:meth:`key_sql` of quantile ``candidates`` on numeric column k: the index
        of the smallest candidate ≥ x."""
        d = self.dialect
        v = f"v{k}"
        gg, gi = f"gg{j}", f"gi{j}"
        grid = np.asarray(candidates, dtype=np.float64)
        n = grid.size
        if n == 1:
            return None, None, f"CASE WHEN NOT u{k} THEN -1 ELSE 0 END"
        if uniform_guess_ok(grid, "left"):
            w, t0 = p(float(grid[1] - grid[0])), p(float(grid[0]))
            guess = gi  # computed once per row (column gi{j})
            cand = self._edge_fn(grid, p)
            exact = (
                f"{guess} - CASE WHEN {guess} = 0 THEN 0 WHEN {cand(f'{guess} - 1')} >= {v} THEN 1 "
                f"ELSE 0 END "
                f"+ CASE WHEN {cand(guess)} < {v} THEN 1 ELSE 0 END"
            )
            far = self._far(gg, grid)
            fast = "" if far is None else f"WHEN {far} THEN {guess} "
            return (f"({v} - {t0}) / {w}", f"CAST(least(greatest(-{d.floor(f'-{gg}')}, 0), {n - 1}) AS BIGINT)",
                    f"CASE WHEN NOT u{k} THEN -1 {fast}ELSE {exact} END")
        if n > 2000:
            raise QueryError(
                "more than 2000 irregular quantile candidates; use an evenly spaced grid."
            )
        whens = " ".join(f"WHEN {v} <= {p(float(x))} THEN {i}" for i, x in enumerate(grid))
        return None, f"CASE {whens} ELSE {n} END", f"CASE WHEN NOT u{k} THEN -1 ELSE {gi} END"

    def rank_pairs(self, groups: Sequence[BinsSlot]) -> dict[BinsSlot, BinsSlot]:
        """``{bins: candidates}``: histogram requests over edges ``[*grid, top]`` whose
        column also has candidate counts on ``grid`` (a quantile's
        rank counts ask for both: :class:`~planner.data.requests.Candidates` and
        :class:`~planner.data.requests.Bins`), where the grid covers the column's bounds. Each pair is counted
        with one key (``key_sql(rank=True)``): one histogram, not two (DuckDB reads the
        source again for every ``histogram`` of a large domain)."""
        have = set(groups)
        out: dict[BinsSlot, BinsSlot] = {}
        for g in groups:
            if g.edges is None or len(g.edges) < 3:
                continue
            c = BinsSlot(g.k, grid=g.edges[:-1])
            lo, hi = self.schema.columns[g.k].bounds
            if c in have and c.grid is not None and c.grid[0] <= lo and c.grid[-1] >= hi:
                out[g] = c
        return out

    @staticmethod
    def split_ranks(counts: dict[int, int]) -> tuple[dict[int, int], dict[int, int]]:
        """(histogram counts, candidate counts) from the counts of the joint key of :meth:`key_sql`."""
        bins: dict[int, int] = {}
        cands: dict[int, int] = {}
        for key, c in counts.items():
            if key < 0:
                if key != -1:  # the grid covers the bounds: a clipped value is inside
                    raise QueryError("internal error: a clipped value fell outside the candidate grid.")
                bins[-1] = bins.get(-1, 0) + c
                cands[-1] = cands.get(-1, 0) + c
                continue
            b, t = divmod(key, 2)
            bins[b] = bins.get(b, 0) + c
            cands[b + t] = cands.get(b + t, 0) + c
        return bins, cands

    def _far(self, q: str, e: np.ndarray) -> str | None:
        """The test that the quotient q = (x − e₀)/w is far from an integer, or None when
        the edges are too far from a uniform grid for the test to prove anything.

        Far means more than δ away, with δ twice the bound on how far q can be from the
        exact quotient (two roundings: |q|·2⁻⁵², |q| ≤ n) plus how far any edge is from
        e₀ + i·w (computed exactly, as fractions): then x and every edge compare as the
        exact quotient and i do, so x is on no edge and the guess (floor, or ceil for a
        quantile grid) is the index ``searchsorted`` gives. Rows near an edge (ties
        included) take the corrected branch; ``CASE`` evaluates it on those rows only.
        """
        n = e.size
        w = Fraction(float(e[1])) - Fraction(float(e[0]))
        dev = max(abs(Fraction(float(t)) - (Fraction(float(e[0])) + i * w)) for i, t in enumerate(e)) / w
        delta = 2 * (n * 2.0**-52 + float(dev)) + 2.0**-40
        if not delta < 1e-6:  # edges too far from a uniform grid: always correct
            return None
        return f"abs({q} - round({q})) > {delta!r}"

    def domain(self, g: BinsSlot) -> tuple[int, int]:
        """The range of a grouping request's key (see :meth:`key_sql`)."""
        col = self.schema.columns[g.k]
        if g.edges is None and g.grid is None:
            if col.kind is ColumnKind.NUMERIC:
                lo, hi = col.bounds
                return int(lo) - 1, int(hi)
            return -1, len(col.labels) if col.kind is ColumnKind.CATEGORICAL else 1
        if g.edges is not None:
            return -2, len(g.edges) - 1
        return -1, len(g.grid or ())

    def _edge_fn(self, e: np.ndarray, p: Params) -> Callable[[str], str]:
        """SQL of edge ``e[i]`` for an index expression i in [0, len(e) − 1]."""
        d = self.dialect
        step = arithmetic_step(e)
        if step is None:
            arr = p([float(x) for x in e])
            return lambda i: d.at(arr, i)
        e0, st, last, n1 = p(float(e[0])), p(step), p(float(e[-1])), e.size - 1
        return lambda i: (
            f"(CASE WHEN {i} >= {n1} THEN {last} ELSE CAST({i} AS DOUBLE) * {st} + {e0} END)"
        )

