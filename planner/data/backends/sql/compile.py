"""The request compiler of the SQL engines: requests in, the parts of one statement out.

A request (:mod:`planner.data.requests`) is compiled into *slots*: the few primitive
values the one-scan statement computes (:mod:`planner.data.backends.sql.statement`): the
row count, a column's flag counts, a filtered count, an exact clipped sum, the counts of
one bin key, the content digest's lane sums, key counts, and any of these within one
group. Equal slots asked by several requests are computed once. :meth:`Compiler.needs`
maps a request to its slots, :meth:`Compiler.scalar_aggs` writes each scalar slot's
aggregate expressions, :meth:`Compiler.finish` reads the request's result back from the
slots' values. A new kind of aggregate is a branch of :meth:`~Compiler.needs` and
:meth:`~Compiler.finish` here (with a slot and its aggregate SQL when it needs a new
primitive).

How each rule of the backend contract is compiled:

* **Sums** are exact: each clipped value is split into integers
  (:func:`~planner.data.backends.pandas_backend.float_parts`: the integer part, and two
  53-bit fractional parts unless the column is integer-valued), summed exactly (HUGEINT
  in DuckDB, DECIMAL(38, 0) in Spark) and rounded once in Python, which is the float
  pandas returns too (:meth:`Compiler.sum_sql`).
* **Filters** compare the clipped value or the bin code of a usable cell
  (:meth:`Compiler.predicate_sql`); every constant is a bound parameter.
* **Column stats** count the flags of :mod:`~planner.data.backends.sql.reading`'s cells;
  ``usable`` is derived, not counted per row (:meth:`Compiler.usable`).
* **The content digest** (:mod:`planner.data.backends.digest`) is two lane sums of a
  64-bit hash of every row's words: the engine's own ``hash()`` where it is the digest's
  (checked on fixed words first, :meth:`Compiler.native_hash`), else the same arithmetic
  spelled out (:meth:`Compiler.digest_sql`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.core.errors import DataError, QueryError
from planner.data import requests as rq
from planner.data.backends import digest as dg
from planner.data.backends.cells import sum_from_parts
from planner.data.backends.sql.dialect import Engine, Layer, Params
from planner.data.backends.sql.reading import CellReader
from planner.data.requests import (
    BinCounts,
    BooleanCounts,
    ColumnStats,
    CountAggregate,
    GroupResults,
    KeyCounts,
    MarginalTables,
    Predicate,
    PredicateOp,
    QuantileAggregate,
    Request,
    Result,
    SumAggregate,
)
from planner.data.schema import ColumnKind, MissingAction


# ------------------------------------------------------------------ slots
@dataclass(frozen=True, slots=True)
class StatsSlot:
    k: int


@dataclass(frozen=True, slots=True)
class RowsSlot:
    pass


@dataclass(frozen=True, slots=True)
class CountSlot:
    k: int | None
    predicate: Predicate | None


@dataclass(frozen=True, slots=True)
class SumSlot:
    k: int


@dataclass(frozen=True, slots=True)
class BinsSlot:
    """A grouping request: per-key row counts of one binning of column k."""

    k: int
    edges: tuple[float, ...] | None = None  # numeric histogram edges
    grid: tuple[float, ...] | None = None  # quantile candidates


@dataclass(frozen=True, slots=True)
class DigestSlot:
    """The content digest's row count and lane sums (every row, before bounding)."""


@dataclass(frozen=True, slots=True)
class KeysSlot:
    """Rows per key of key column k (a ``GROUP BY`` of its own:
    :meth:`~planner.data.backends.sql.statement.OneScan.key_counts`)."""

    k: int


#: The slots a group can hold (the digest and key counts cover the whole table only).
Inner = StatsSlot | RowsSlot | CountSlot | SumSlot | BinsSlot


@dataclass(frozen=True, slots=True)
class InGroup:
    """A request over the rows of one group (:class:`~planner.data.requests.Grouped`).

    ``by`` are the grouping columns: a row's key for column k is its usable code (the
    category index, or 0 / 1), −1 when not usable (in no group). ``codes`` are the group's
    key values, one per column. Every group of one ``by`` is computed by one ``GROUP BY``
    (:meth:`~planner.data.backends.sql.statement.OneScan.run_groups`).
    """

    by: tuple[int, ...]
    codes: tuple[int, ...]
    req: Inner


@dataclass(frozen=True, slots=True)
class MarginalsSlot:
    """Every 1- and 2-way table of the bin keys of columns ``ks`` (numeric ones over
    ``edges``), over the rows where every key is a bin: one ``GROUP BY GROUPING SETS`` of
    its own (:meth:`~planner.data.backends.sql.statement.OneScan.marginal_counts`). Its value
    maps each clique (sorted positions in ``ks``) to the counts per tuple of bin codes."""

    ks: tuple[int, ...]
    edges: tuple[tuple[float, ...] | None, ...]


Slot = Inner | DigestSlot | KeysSlot | InGroup | MarginalsSlot


def in_group(by: tuple[int, ...], codes: tuple[int, ...], inner: Slot) -> InGroup:
    """``inner`` over the rows of one group (only row, count, sum, stats and bins requests
    are computed in groups: :meth:`planner.data.requests.Grouped.validate`)."""
    if isinstance(inner, (DigestSlot, KeysSlot, InGroup, MarginalsSlot)):
        raise QueryError("the content digest, key counts and marginal tables cover the whole table, not one group of it.")
    return InGroup(by, codes, inner)


def default(req: Slot) -> Any:
    if isinstance(req, InGroup):
        return default(req.req)
    if isinstance(req, BinsSlot):
        return {}
    if isinstance(req, RowsSlot):
        return 0
    if isinstance(req, CountSlot):
        return (0, 0)
    if isinstance(req, DigestSlot):
        return (0, 0, 0)
    return (0, 0, 0, 0)


class Compiler:
    """Compiles requests into slots and slots into aggregate SQL (module docstring).

    Parameters
    ----------
    reader : CellReader
        The source's cells (their flags, words and value types).
    engine : Engine
        Runs the one small statement that checks the engine's ``hash()`` (no data read).
    """

    def __init__(self, reader: CellReader, engine: Engine) -> None:
        self.reader = reader
        self.schema = reader.schema
        self.dialect = reader.dialect
        self.engine = engine
        self._hash_native: bool | None = None

    def k(self, column: str) -> int:
        """The index of a declared column."""
        return self.schema.names.index(column)

    def needs(self, r: Request[Any]) -> list[Slot]:
        """The internal requests a request is computed from (each computed once, in the
        statement of every request asked together)."""
        if isinstance(r, rq.Count):
            return [RowsSlot(), CountSlot(None if r.column is None else self.k(r.column), r.where)]
        if isinstance(r, rq.ClippedSum):
            return [RowsSlot(), SumSlot(self.k(r.column)), StatsSlot(self.k(r.column))]
        if isinstance(r, rq.Bins):
            return [RowsSlot(), BinsSlot(self.k(r.column), edges=r.edges), StatsSlot(self.k(r.column))]
        if isinstance(r, rq.Candidates):
            return [RowsSlot(), BinsSlot(self.k(r.column), grid=r.grid), StatsSlot(self.k(r.column))]
        if isinstance(r, rq.Booleans):
            return [RowsSlot(), BinsSlot(self.k(r.column)), StatsSlot(self.k(r.column))]
        if isinstance(r, rq.Keys):
            return [KeysSlot(self.k(r.column))]
        if isinstance(r, rq.Stats):
            return [RowsSlot(), StatsSlot(self.k(r.column))]
        if isinstance(r, rq.Grouped):
            by = tuple(self.k(n) for n in r.by)
            return [in_group(by, codes, inner) for codes in r.codes(self.schema)
                    for sub in r.requests for inner in self.needs(sub)]
        if isinstance(r, rq.Marginals):
            return [RowsSlot(), self.marginals_slot(r)]
        raise rq.unknown(r)

    def marginals_slot(self, r: rq.Marginals) -> MarginalsSlot:
        return MarginalsSlot(tuple(self.k(n) for n in r.columns), r.edges)

    def finish(self, r: Request[Any], get: Callable[[Slot], Any]) -> Result:
        """The result of a request from the values of its internal requests (``get``)."""
        if isinstance(r, rq.Count):
            value, usable = get(CountSlot(None if r.column is None else self.k(r.column), r.where))
            return CountAggregate(int(value), int(get(RowsSlot()) - usable))
        if isinstance(r, rq.ClippedSum):
            ih, il, f1, f2 = get(SumSlot(self.k(r.column)))
            st = self.stats(self.k(r.column), get)
            return SumAggregate(sum_from_parts(ih, il, f1, f2), st.usable, st.clipped, st.dropped)
        if isinstance(r, rq.Bins):
            k = self.k(r.column)
            col = self.schema.columns[k]
            counts, st = get(BinsSlot(k, edges=r.edges)), self.stats(k, get)
            labels = r.labels(col)
            if r.edges is not None:
                return BinCounts(labels, tuple(counts.get(i, 0) for i in range(len(labels))), r.edges,
                                 counts.get(-2, 0), st.dropped)
            unbinned = st.invalid if col.kind is ColumnKind.CATEGORICAL and not col.other_bin else 0
            return BinCounts(labels, tuple(counts.get(i, 0) for i in range(len(labels))), None, unbinned,
                             st.dropped)
        if isinstance(r, rq.Candidates):
            k = self.k(r.column)
            counts = get(BinsSlot(k, grid=r.grid))
            return QuantileAggregate(r.grid, tuple(counts.get(i, 0) for i in range(len(r.grid))),
                                     self.stats(k, get).dropped)
        if isinstance(r, rq.Booleans):
            k = self.k(r.column)
            counts = get(BinsSlot(k))
            return BooleanCounts(counts.get(1, 0), counts.get(0, 0), self.stats(k, get).dropped)
        if isinstance(r, rq.Keys):
            keys: KeyCounts = get(KeysSlot(self.k(r.column)))
            return keys
        if isinstance(r, rq.Stats):
            return self.stats(self.k(r.column), get)
        if isinstance(r, rq.Grouped):
            by = tuple(self.k(n) for n in r.by)

            def within(codes: tuple[int, ...]) -> Callable[[Slot], Any]:
                return lambda inner: get(in_group(by, codes, inner))

            return GroupResults(r.labels(self.schema), tuple(
                tuple(self.finish(sub, within(codes)) for sub in r.requests) for codes in r.codes(self.schema)))
        if isinstance(r, rq.Marginals):
            return self.marginal_tables(r, get(self.marginals_slot(r)), int(get(RowsSlot())))
        raise rq.unknown(r)

    def marginal_tables(self, r: rq.Marginals, found: dict[tuple[int, ...], dict[tuple[int, ...], int]],
                        rows: int) -> MarginalTables:
        """The tables of a :class:`~planner.data.requests.Marginals` request from the counts
        per clique and bin codes (:meth:`~planner.data.backends.sql.statement.OneScan.marginal_counts`)."""
        sizes = r.sizes(self.schema)
        tables = []
        for clique in r.cliques:
            shape = tuple(sizes[j] for j in clique)
            flat = np.zeros(int(np.prod(shape)), dtype=np.int64)
            for codes, c in found.get(clique, {}).items():
                if any(not 0 <= v < k for v, k in zip(codes, shape, strict=True)):
                    raise QueryError("internal error: a bin key fell outside its column's bins.")
                flat[int(np.ravel_multi_index(codes, shape))] += c
            tables.append(tuple(int(v) for v in flat))
        n = int(sum(found.get((0,), {}).values()))
        return MarginalTables(r.columns, sizes, r.cliques, tuple(tables), n, rows - n)

    def stats(self, k: int, get: Callable[[Slot], Any]) -> ColumnStats:
        """Column k's stats from the row count and its flag counts."""
        col = self.schema.columns[k]
        rows, (usable, clipped, invalid, missing) = get(RowsSlot()), get(StatsSlot(k))
        replace = col.missing.action is MissingAction.REPLACE
        if col.kind is ColumnKind.CATEGORICAL:
            return ColumnStats(rows, usable, 0, invalid, missing,
                               missing if replace else 0, 0 if replace else missing)
        if col.kind in (ColumnKind.IDENTIFIER, ColumnKind.KEY):
            return ColumnStats(rows, rows - missing, 0, 0, missing, 0, missing)
        bad = invalid + missing
        return ColumnStats(rows, usable, clipped, invalid, missing,
                           bad if replace else 0, 0 if replace else bad)

    def used_columns(self, reqs: Iterable[Slot | int]) -> set[int]:
        """The columns that slots (their column ``k``, a count's filter column) and grouping
        keys (a column k) read."""
        used: set[int] = set()
        for r in reqs:
            if isinstance(r, int):
                used.add(r)
                continue
            if isinstance(r, MarginalsSlot):
                used.update(r.ks)
                continue
            k = getattr(r, "k", None)
            if k is not None:
                used.add(k)
            if isinstance(r, CountSlot) and r.predicate is not None:
                used.add(self.schema.names.index(r.predicate.column))
        return used

    def one(self, cond: str) -> str:
        """The aggregate counting the rows where ``cond`` holds."""
        return "count(*)" if cond == "TRUE" else self.dialect.count_if(cond)

    def scalar_aggs(self, reqs: Sequence[Slot], p: Params, layers: list[Layer]
                     ) -> tuple[list[str], list[tuple[Slot, int, int]]]:
        """(aggregates, slots) of the scalar requests: ``count(*)`` first, then each
        request's aggregates; a slot is (request, index of its first aggregate, width).
        Exact sums add their parts to ``layers[:3]``, the digest its row hash from
        ``layers[6]`` on (:meth:`digest_sql`)."""
        aggs: list[str] = ["count(*)"]
        slots: list[tuple[Slot, int, int]] = []
        never = self.reader.never_flags()
        for r in reqs:
            start = len(aggs)
            if isinstance(r, RowsSlot):
                slots.append((r, 0, 1))
                continue
            if isinstance(r, StatsSlot):
                k = r.k
                # usable = rows − dropped − unbinned: derived (_usable), not counted per row
                aggs += ["0"] + ["0" if f"{x}{k}" in never else self.one(f"{x}{k}") for x in ("cl", "i", "m")]
            elif isinstance(r, CountSlot):
                keep = [f"NOT d{r.k}"] if r.k is not None else []
                if r.predicate is not None:
                    keep.append(f"NOT d{self.schema.names.index(r.predicate.column)}")
                usable = " AND ".join(keep) if keep else "TRUE"
                m = usable if r.predicate is None else f"{usable} AND {self.predicate_sql(r.predicate, p)}"
                aggs += [self.one(m), self.one(usable)]
            elif isinstance(r, SumSlot):
                aggs += self.sum_sql(r.k, p, layers[:3])
            elif isinstance(r, DigestSlot):
                aggs += self.digest_sql(layers)
            slots.append((r, start, len(aggs) - start))
        return aggs, slots

    def slot_results(self, slots: Sequence[tuple[Slot, int, int]], row: Sequence[Any]
                      ) -> dict[Slot, Any]:
        """The value of each scalar request from its slot of the aggregate row."""
        res: dict[Slot, Any] = {}
        rows_here = int(row[0] or 0)
        for r, start, width in slots:
            vals = [0 if v is None else int(v) for v in row[start:start + width]]
            if isinstance(r, StatsSlot):
                vals[0] = self.usable(r.k, rows_here, vals[2], vals[3])
            if isinstance(r, DigestSlot):
                res[r] = (rows_here, vals[0] % (1 << 64), vals[1] % (1 << 64))
            else:
                res[r] = vals[0] if isinstance(r, RowsSlot) else tuple(vals)
        return res

    def usable(self, k: int, rows: int, invalid: int, missing: int) -> int:
        """Rows that enter queries on column k (``u``), from the row, invalid and missing
        counts: what the missing-value rule drops, and undeclared categories without an
        "other" bin, are the only rows left out."""
        col = self.schema.columns[k]
        replace = col.missing.action is MissingAction.REPLACE
        if col.kind in (ColumnKind.IDENTIFIER, ColumnKind.KEY):
            return rows - missing
        if col.kind is ColumnKind.CATEGORICAL:
            return rows - (0 if replace else missing) - (0 if col.other_bin else invalid)
        return rows if replace else rows - missing - invalid

    def sum_sql(self, k: int, p: Params, layers: list[Layer]) -> list[str]:
        """The four exact-sum aggregates of column k (ih, il, f1, f2 of ``float_parts``).

        Adds the per-row parts to three projection layers over ``kept``. The integer part
        floor(|x|) < 2⁶² is summed whole (as ``il``; ``ih`` is 0): a BIGINT per row, summed
        exactly (:meth:`Dialect.exact_sum`), gives the same total ih·2⁵³ + il. The
        fractional parts are the constant 0 when the column is integer-valued
        (:meth:`CellReader.int_valued`), and the sign is left out when L ≥ 0: every clipped value
        lies in [L, U], so neither changes a result.
        """
        d = self.dialect
        lo, _hi = self.schema.columns[k].bounds
        signed = lo < 0
        two = "CAST(9007199254740992 AS DOUBLE)"
        layers[0].add(f"sa{k}", f"CASE WHEN u{k} THEN abs(v{k}) END")  # NULL: not summed
        if signed:
            layers[0].add(f"sg{k}", f"CASE WHEN v{k} < 0 THEN -1 ELSE 1 END")
        layers[1].add(f"si{k}", d.floor(f"sa{k}"))
        parts: list[str | None] = [None, f"si{k}", None, None]
        if not self.reader.int_valued(k):
            layers[1].add(f"sf{k}", f"(sa{k} - {d.floor(f'sa{k}')}) * {two}")
            layers[2].add(f"s1{k}", d.floor(f"sf{k}"))
            parts[2] = f"s1{k}"
            parts[3] = d.floor(f"(sf{k} - s1{k}) * {two}")
        return [
            "0" if e is None else d.exact_sum(f"sg{k} * {e}" if signed else e) for e in parts
        ]

    def predicate_sql(self, pr: Predicate, p: Params) -> str:
        k = self.schema.names.index(pr.column)
        col = self.schema.columns[k]
        op = pr.op
        if col.kind is ColumnKind.NUMERIC:
            consts = [float(c) for c in pr.values]
            if op is PredicateOp.IN:
                cond = f"v{k} IN ({p.many(consts)})"
            else:
                cond = f"v{k} {op.value if op is not PredicateOp.EQ else '='} {p(consts[0])}"
                if op is PredicateOp.NE:
                    cond = f"v{k} <> {p(consts[0])}"
        elif col.kind in (ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN):
            wanted = pr.codes(col)
            if op is PredicateOp.EQ:
                cond = f"v{k} = {p(wanted[0])}"
            elif op is PredicateOp.NE:
                cond = f"v{k} <> {p(wanted[0])}"
            elif op is PredicateOp.IN:
                cond = f"v{k} IN ({p.many(wanted)})"
            else:
                raise QueryError(f"operator {op.value!r} does not apply to column {col.name!r}.")
        else:
            raise QueryError(f"a predicate on identifier column {col.name!r} is not allowed.")
        return f"(u{k} AND {cond})"

    def native_hash(self) -> bool:
        """Whether the engine's ``hash()`` of the words is the digest's row hash.

        Checked once per backend on fixed words (negative integers, −0, ±inf, a
        subnormal, several words) against :func:`planner.data.backends.digest.row_hashes`: a
        release of the engine that hashes differently falls back to the arithmetic.
        """
        if self._hash_native is None:
            d = self.dialect
            ok = False
            if d.native_hash:
                rows = [(2.5, -3, 7), (-0.0, (1 << 63) - 1, -(1 << 63)), (float("inf"), 0, 1),
                        (5e-324, -1, 12345678901234567)]
                p = Params(d)
                exprs = []
                for x, b, c in rows:
                    hx = d.hash_words([f"CAST({p(x)} AS DOUBLE)", f"CAST({p(b)} AS BIGINT)",
                                       f"CAST({p(c)} AS BIGINT)"])
                    exprs += [hx, d.hash_words([d.xor(hx, f"CAST({dg.K_LANE2} AS UBIGINT)")])]
                try:
                    got = [int(v) for v in self.engine._run_sql(f"SELECT {', '.join(exprs)}", p)[0]]
                except DataError:
                    got = []
                words = [dg.double_bits(np.asarray([r[0] for r in rows]))] + [
                    np.asarray([r[i] for r in rows], dtype=np.int64).view(np.uint64) for i in (1, 2)]
                h = dg.row_hashes(words)
                want = [int(v) for pair in zip(h, dg.murmur(h ^ np.uint64(dg.K_LANE2)), strict=True)
                        for v in pair]
                ok = got == want
            self._hash_native = ok
        return self._hash_native

    def digest_sql(self, layers: list[Layer]) -> list[str]:
        """The two lane sums of the content digest (:mod:`planner.data.backends.digest`) over the
        words of the cells; adds the row-hash steps as projection layers from ``layers[6]``."""
        d = self.dialect
        words = self.reader.digest_words()
        while len(layers) < 7:
            layers.append(Layer())
        if self.native_hash():
            layers[6].add("dh0", d.hash_words([w for w, _ in words]))
            layers.append(Layer([("dh1", d.hash_words([d.xor("dh0", f"CAST({dg.K_LANE2} AS UBIGINT)")]))]))
            return ["sum(dh0)", "sum(dh1)"]
        # the same arithmetic spelled out, on unsigned 64-bit values
        def layer(cols: list[tuple[str, str]]) -> None:
            layers.append(Layer(cols))

        names = []
        cols = []
        for i, (w, is_double) in enumerate(words):
            src = d.word_bits(f"CASE WHEN {w} = 0 THEN CAST(0 AS DOUBLE) ELSE {w} END") if is_double else w
            cols.append((f"du{i}", d.u_word(src)))
            names.append(f"du{i}")
        layers[6].cols += cols

        def murmur(ins: list[str], tag: str) -> list[str]:
            # three layers: a deep chain of nested selects is more than Spark's analyzer
            # resolves (its expressions inline column names only)
            a = [f"{tag}a{i}" for i in range(len(ins))]
            b = [f"{tag}b{i}" for i in range(len(ins))]
            c = [f"{tag}c{i}" for i in range(len(ins))]
            layer([(o, d.u_mul(d.u_xorshift(x, 32), dg.MURMUR)) for o, x in zip(a, ins, strict=True)])
            layer([(o, d.u_mul(d.u_xorshift(x, 32), dg.MURMUR)) for o, x in zip(b, a, strict=True)])
            layer([(o, d.u_xorshift(x, 32)) for o, x in zip(c, b, strict=True)])
            return c

        m = murmur(names, "dm")
        h = m[0]
        for i in range(1, len(m)):
            layer([(f"dc{i}", d.u_xor(d.u_mul(d.u_xorshift(h, 32), dg.MURMUR), m[i]))])
            h = f"dc{i}"
        layer([("dg0", d.u_xor(h, d.u_word(self.reader.word(dg.K_LANE2))))])
        g = murmur(["dg0"], "dn")[0]
        return [d.lane_sum(h), d.lane_sum(g)]

