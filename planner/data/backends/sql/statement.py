"""The one-scan statement: every slot of a plan computed in one pass over the data.

The first statement over the data (DuckDB) computes everything asked of it at once: every
aggregate of a plan, the column report, the content digest
(:mod:`planner.data.backends.digest`) and the proof that nobody has more than c rows
(:mod:`planner.data.backends.sql.bounding`). Scalars and bin counts are one ungrouped
aggregate; a bin key with few values is counted by one ``count_if`` per value, a larger one
by ``histogram`` (a pass of its own over the needed columns of a Parquet file, or
``histogram_exact`` in the same pass for CSV, which would otherwise be parsed again):
:meth:`OneScan.one_aggregate`. Spark gets the person check first and the bins as a
``GROUPING SETS`` aggregate next to the scalars (:meth:`OneScan.grouping_sets`). The 1- and
2-way tables of a synthetic table (:class:`~planner.data.requests.Marginals`) are bin keys
too: one joint key per table, counted in the same single aggregate on DuckDB
(:meth:`OneScan.marginal_keys`), one ``GROUPING SETS`` statement of their own on Spark
(:meth:`OneScan.marginal_counts`). The groups of every grouped request are one more
statement, whatever their number
(:meth:`OneScan.group_statement`); key counts one ``GROUP BY`` key each
(:meth:`OneScan.key_counts`).

Values of slots already computed are kept (:attr:`OneScan.values`): asking again runs
nothing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from planner.core.errors import DataError, QueryError
from planner.data.backends.cells import canonical_value
from planner.data.backends.sql.bins import SMALL_DOMAIN, Binner, BinPlan
from planner.data.backends.sql.bounding import Bounding, units_proven
from planner.data.backends.sql.compile import (
    BinsSlot,
    Compiler,
    DigestSlot,
    InGroup,
    Inner,
    KeysSlot,
    MarginalsSlot,
    RowsSlot,
    Slot,
    default,
)
from planner.data.backends.sql.dialect import Engine, Layer, Params, chain
from planner.data.backends.sql.reading import CellReader
from planner.data.requests import KeyCounts


class ScanEngine(Engine, Protocol):
    """What the statement needs of a SQL backend besides running statements: the ``WITH``
    prefix of the kept rows (Spark caches them on its executors)."""

    def _kept_with(self, p: Params, columns: Sequence[int]) -> str: ...


class OneScan:
    """Runs slots, normally all in ONE statement over one scan (module docstring).

    Parameters
    ----------
    compiler, bins, bounding
        The request compiler, the bin keys and contribution bounding of this source.
    engine : ScanEngine
        Runs the statements.
    require_rows : bool
        Refuse a source with a header and no data rows (files).
    bits : int
        Bits of the bitmap that proves nobody has two rows
        (:func:`~planner.data.backends.sql.bounding.bitmap_bits`).
    """

    def __init__(self, compiler: Compiler, bins: Binner, bounding: Bounding, engine: ScanEngine, *,
                 require_rows: bool, bits: int, one_pass_bins: bool) -> None:
        self.compiler = compiler
        self.bins = bins
        self.bounding = bounding
        self.reader: CellReader = compiler.reader
        self.schema = compiler.schema
        self.dialect = compiler.dialect
        self.engine = engine
        self.require_rows = require_rows
        self.bitmap_bits = bits
        #: count bins inside the single pass (reading the source again is dear: CSV)
        self.one_pass_bins = one_pass_bins
        #: the value of every slot computed so far
        self.values: dict[Slot, Any] = {}
        # rows before bounding and whether anybody has more than c rows: unknown until the
        # first statement (single scan), or checked at once (engines that cannot prove it there)
        self.total: int = -1
        self.bounded: bool | None = None
        #: how "nobody has more than c rows" was decided: "bitmap" (in the first
        #: statement), "grouping" (a pass by person), None (no person column / not yet)
        self.unit_check: str | None = None
        if self.schema.unit.column is None:
            self.bounded = False
        elif not self.dialect.single_scan:
            self.unit_check = "grouping"
            self.total, self.bounded = bounding.check_units()
            if require_rows and self.total == 0:
                raise DataError(
                    "the data has a header but no data rows; use a file with at least one row."
                )

    def compute(self, slots: Iterable[Slot]) -> None:
        """Compute the slots not computed yet."""
        todo = [r for r in dict.fromkeys(slots) if r not in self.values]
        if todo:
            self.run(todo)

    def run(self, reqs: Iterable[Slot]) -> None:
        """Compute requests, normally in ONE statement and one scan of the data.

        The first statement of a single-scan engine (DuckDB) reads every row once and
        computes, next to the requests, the proof that nobody has more than c rows
        (:func:`~planner.data.backends.sql.bounding.units_proven`). When the proof fails, the exact check by person runs
        (:meth:`Bounding.check_units`); when someone is over c, the requests are computed again
        over the bounded rows (the content digest stays: it covers every row).
        """
        reqs = list(reqs)
        # marginal tables: in the one statement where the engine counts bin keys in one
        # aggregate (DuckDB's histogram), else a GROUPING SETS statement of their own (Spark)
        own = (InGroup, KeysSlot) if self.dialect.histogram("x") is not None else (InGroup, KeysSlot, MarginalsSlot)
        later = [r for r in reqs if isinstance(r, own)]
        if later:  # the whole-table requests first: they decide whether bounding is needed
            plain = [r for r in reqs if not isinstance(r, own)]
            if plain or self.bounded is None:
                self.run(plain)
            in_group = [r for r in later if isinstance(r, InGroup)]
            if in_group:
                self.run_groups(in_group)
            for r in later:
                if isinstance(r, KeysSlot):  # a GROUP BY key of its own
                    self.values[r] = self.key_counts(r.k)
                elif isinstance(r, MarginalsSlot):  # a GROUP BY GROUPING SETS of its own
                    self.values[r] = self.marginal_counts(r)
            return
        todo: list[Slot] = list(dict.fromkeys([RowsSlot(), *reqs]))
        if self.bounded is None:
            res, units = self.statement(todo, bounded=False, unit_check=True)
            total = int(res[RowsSlot()])
            nulls, n_int, distinct = units
            unit = self.schema.unit.column
            if nulls:
                raise DataError(
                    f"identifier column {unit!r} has {nulls} row(s) with no value; every row "
                    "must name its person. Fill them in or remove those rows."
                )
            if self.require_rows and total == 0:
                raise DataError(
                    "the data has a header but no data rows; use a file with at least one row."
                )
            self.total = total
            if units_proven(total, n_int, distinct):
                self.unit_check, self.bounded = "bitmap", False
            else:
                self.unit_check, self.bounded = "grouping", self.bounding.check_units()[1]
            if self.bounded:
                res = {r: v for r, v in res.items() if isinstance(r, DigestSlot)}
            self.values.update(res)
            todo = [r for r in todo if r not in self.values]
            if not todo:
                return
        digest = [r for r in todo if isinstance(r, DigestSlot)]
        if digest and (self.bounded or not self.dialect.single_scan):
            # every row, not the bounded ones (and on Spark, not its cached bounded view)
            res, _ = self.statement([RowsSlot(), *digest], bounded=False, unit_check=False)
            self.values.update({r: v for r, v in res.items() if isinstance(r, DigestSlot)})
            todo = [r for r in todo if not isinstance(r, DigestSlot)]
        res, _ = self.statement(todo, bounded=bool(self.bounded), unit_check=False)
        self.values.update(res)
        if self.require_rows and self.values[RowsSlot()] == 0 and self.total <= 0:
            raise DataError("the data has a header but no data rows; use a file with at least one row.")

    def statement(self, todo: list[Slot], *, bounded: bool, unit_check: bool
                   ) -> tuple[dict[Slot, Any], tuple[int, int, int]]:
        """One statement computing ``todo`` (and, with ``unit_check``, the counts that
        prove nobody has more than c rows: NULL ids, plain-integer ids, distinct ones).

        Without bounding the rows are the conformed cells, read in a single pass: one
        ungrouped aggregate holds every scalar (counts, exact sums, the digest's lane
        sums) and, where the engine has ``histogram`` (DuckDB), every bin count too
        (:meth:`one_aggregate`). Elsewhere (Spark) the bins are a ``GROUPING SETS``
        aggregate next to it (:meth:`grouping_sets`; the engine caches the bounded
        rows). Each derived value is computed once, in its own projection layer, and
        referenced by name.
        """
        d = self.dialect
        digest = any(isinstance(r, DigestSlot) for r in todo)
        used = self.compiler.used_columns(todo)
        uk = None
        unit = self.schema.unit.column
        if unit_check and unit is not None:
            uk = self.schema.names.index(unit)
            used.add(uk)
        else:
            unit_check = False
        p = Params(d)
        if bounded:
            ctes = self.engine._kept_with(p, sorted(used))
        else:
            cells = self.reader.cells_sql(p, sorted(used), pid=False, unit_int=unit_check, atoms=digest)
            ctes = f"WITH kept AS {d.cte_hint}({cells})"
        layers: list[Layer] = [Layer() for _ in range(7)]  # sums ×3, bin guess/index, digest
        aggs, slots = self.compiler.scalar_aggs([r for r in todo if not isinstance(r, (BinsSlot, MarginalsSlot))],
                                                p, layers)
        unit_at = len(aggs)
        if unit_check and uk is not None:
            bitmap = d.bitmap_distinct("iv", self.bitmap_bits)
            aggs += [self.compiler.one(f"m{uk}"), "count(iv)", bitmap if bitmap is not None else "0"]
        plan = self.bins.plan([r for r in todo if isinstance(r, BinsSlot)], pair_ranks=True)
        keys = self.bins.keys(plan, p, layers)
        marg = [r for r in todo if isinstance(r, MarginalsSlot)]
        tables: dict[Slot, Any] = {}
        if d.histogram("x") is not None:
            layers[5].cols += [(f"gk{j}", e) for j, e in enumerate(keys)]
            domains = [(-2, 2 * len(g.edges or ()) - 3) if g in plan.ranks else self.bins.domain(g)
                       for g in plan.groups]
            named = [(f"gk{j}", dm) for j, dm in enumerate(domains)]
            joint = self.marginal_keys(marg, p, layers, len(plan.groups))
            named += [(name, dm) for _, name, dm in joint]
            scalar_row, counted = self.one_aggregate(ctes, p, aggs, layers, named)
            grouped = counted[:len(plan.groups)]
            for slot, found in self.read_marginals(marg, joint, counted[len(plan.groups):]).items():
                tables[slot] = found
        else:
            scalar_row, grouped = self.grouping_sets(ctes, p, aggs, layers, keys)
        res = self.compiler.slot_results(slots, scalar_row)
        res.update(tables)
        for g, counts in zip(plan.groups, grouped, strict=True):
            if g in plan.ranks:
                res[g], res[plan.ranks[g]] = self.bins.split_ranks(counts)
            else:
                res[g] = counts
        self.bins.from_values(plan, res)
        units = (0, 0, 0)
        if unit_check:
            units = tuple(0 if v is None else int(v) for v in scalar_row[unit_at:unit_at + 3])  # type: ignore[assignment]
        return res, units

    def one_aggregate(self, ctes: str, p: Params, aggs: list[str], layers: list[Layer],
                       keys: Sequence[tuple[str, tuple[int, int]]]
                       ) -> tuple[tuple[Any, ...], list[dict[int, int]]]:
        """(scalar row, counts per bin key) from ONE ungrouped aggregate (DuckDB).

        ``keys`` are the key columns (already in ``layers``) with the range of their
        values. A key with a few values is counted by one ``count_if`` per value in the same
        aggregate (a comparison per row); a larger one by a ``histogram`` (DuckDB counts
        it in a pass of its own, or in this one: :meth:`Dialect.histogram`).
        """
        d = self.dialect
        src = chain("kept", layers)
        domains = [dm for _, dm in keys]
        small = [dm[1] - dm[0] < SMALL_DOMAIN for dm in domains]
        one_pass = [self.one_pass_bins and dm[1] - dm[0] < 4096 for dm in domains]
        hist_cols: list[str] = []
        at: list[int] = []
        for j, (name, (lo, hi)) in enumerate(keys):
            at.append(len(aggs) + len(hist_cols))
            if small[j]:
                hist_cols += [d.count_if(f"{name} = {v}") for v in range(lo, hi + 1)]
            else:
                hist_cols.append(d.histogram(name, domains[j] if one_pass[j] else None) or "")
        row = self.engine._run_sql(f"{ctes} SELECT {', '.join(aggs + hist_cols)} FROM {src} z", p)[0]
        grouped: list[dict[int, int]] = []
        for j, (lo, hi) in enumerate(domains):
            if small[j]:
                counts = {v: int(c) for v, c in zip(range(lo, hi + 1), row[at[j]:at[j] + hi - lo + 1],
                                                    strict=True) if c}
            else:
                counts = {int(k_): int(v_) for k_, v_ in (row[at[j]] or {}).items() if v_}
                if any(not lo <= k_ <= hi for k_ in counts):  # cannot happen: keys are clamped
                    raise QueryError("internal error: a bin key fell outside its range.")
            grouped.append(counts)
        return tuple(row[:len(aggs)]), grouped

    def marginal_keys(self, slots: Sequence[MarginalsSlot], p: Params, layers: list[Layer], first: int
                      ) -> list[tuple[MarginalsSlot, str, tuple[int, int]]]:
        """The joint bin key of every table of each :class:`MarginalsSlot`, as columns of
        two projection layers appended to ``layers``: each column's bin key
        (:meth:`Binner.key_sql`, by its edges), whether the row has a bin in every column,
        then per table the mixed-radix index of its cells (−1 for an incomplete row).
        Returns (slot, key column, range of the key) per table, in the slot's clique order
        (every column, then every pair). Their counts are bin counts like any other: one
        aggregate of the single statement."""
        out: list[tuple[MarginalsSlot, str, tuple[int, int]]] = []
        if not slots:
            return out
        flags, joints = Layer(), Layer()
        j = first
        for m, slot in enumerate(slots):
            names, sizes = [], []
            for k, e in zip(slot.ks, slot.edges, strict=True):
                g = BinsSlot(k, edges=e)
                guess, idx, key = self.bins.key_sql(g, p, j)
                if guess is not None:
                    layers[3].add(f"gg{j}", guess)
                if idx is not None:
                    layers[4].add(f"gi{j}", idx)
                layers[5].add(f"mk{j}", key)
                names.append(f"mk{j}")
                sizes.append(len(e) - 1 if e is not None else self._labels(k))
                j += 1
            flags.add(f"mc{m}", " AND ".join(f"{nm} >= 0" for nm in names))
            cliques = [(i,) for i in range(len(names))] + list(itertools.combinations(range(len(names)), 2))
            for t, c in enumerate(cliques):
                expr = names[c[0]] if len(c) == 1 else f"{names[c[0]]} * {sizes[c[1]]} + {names[c[1]]}"
                joints.add(f"gm{m}_{t}", f"CASE WHEN mc{m} THEN {expr} ELSE -1 END")
                out.append((slot, f"gm{m}_{t}", (-1, math.prod(sizes[i] for i in c) - 1)))
        layers += [flags, joints]
        return out

    def _labels(self, k: int) -> int:
        """The number of bins of categorical or boolean column k."""
        return len(self.schema.columns[k].labels)

    def read_marginals(self, slots: Sequence[MarginalsSlot],
                       joint: Sequence[tuple[MarginalsSlot, str, tuple[int, int]]],
                       counted: Sequence[dict[int, int]],
                       ) -> dict[MarginalsSlot, dict[tuple[int, ...], dict[tuple[int, ...], int]]]:
        """Each slot's counts per clique and bin codes, from the counts of its joint keys."""
        out: dict[MarginalsSlot, dict[tuple[int, ...], dict[tuple[int, ...], int]]] = {s_: {} for s_ in slots}
        seen: dict[MarginalsSlot, int] = {}
        for (slot, _, _), counts in zip(joint, counted, strict=True):
            t = seen.get(slot, 0)
            seen[slot] = t + 1
            d = len(slot.ks)
            cliques = [(i,) for i in range(d)] + list(itertools.combinations(range(d), 2))
            c = cliques[t]
            sizes = [len(e) - 1 if e is not None else self._labels(k) for k, e in zip(slot.ks, slot.edges, strict=True)]
            shape = tuple(sizes[i] for i in c)
            out[slot][c] = {tuple(int(v) for v in np.unravel_index(key, shape)): n
                            for key, n in counts.items() if key >= 0}
        return out

    def grouping_sets(self, ctes: str, p: Params, aggs: list[str], layers: list[Layer],
                       keys: list[str]) -> tuple[tuple[Any, ...], list[dict[int, int]]]:
        """(scalar row, counts per bin key) where the engine has no ``histogram`` (Spark):
        the scalars once over all rows, ``UNION ALL`` the bin counts per grouping set."""
        nk = len(keys)
        scalar_src = chain("kept", layers[:3] + layers[6:])
        inner = chain("kept", layers[3:5])
        if keys:
            inner = f"(SELECT *, {', '.join(f'{e} AS gk{j}' for j, e in enumerate(keys))} FROM {inner} y)"
            key_cols = [f"gk{j}" for j in range(nk)]
            # scalars once over all rows; bin counts per grouping set (count only)
            nulls = ", ".join(f"CAST(NULL AS BIGINT) AS {c}" for c in key_cols)
            sets = ", ".join(f"({c})" for c in key_cols)
            zeros = ", ".join(f"CAST(NULL AS DECIMAL(38, 0)) AS s{j}" for j in range(1, len(aggs)))
            sql = (
                f"{ctes} SELECT {nulls}, "
                f"{', '.join(f'CAST({a} AS DECIMAL(38, 0)) AS s{j}' for j, a in enumerate(aggs))} "
                f"FROM {scalar_src} sc UNION ALL "
                f"SELECT {', '.join(key_cols)}, CAST(count(*) AS DECIMAL(38, 0)) AS s0"
                f"{', ' + zeros if zeros else ''} FROM {inner} z GROUP BY GROUPING SETS ({sets})"
            )
        else:
            sql = f"{ctes} SELECT {', '.join(aggs)} FROM {scalar_src} sc"
        grouped: list[dict[int, int]] = [{} for _ in keys]
        scalar_row: tuple[Any, ...] | None = None
        for row in self.engine._run_sql(sql, p):
            which = [j for j in range(nk) if row[j] is not None]
            if not which:
                scalar_row = tuple(row[nk:])
            else:
                grouped[which[0]][int(row[which[0]])] = int(row[nk])
        return (scalar_row if scalar_row is not None else tuple([0] * len(aggs))), grouped

    def key_counts(self, k: int) -> KeyCounts:
        """Rows per key label over the bounded rows: one ``GROUP BY`` of the key column's
        value (its label, as :class:`~planner.data.backends.sql.reading.CellReader` reads a
        key); the NULL group is the missing keys. A statement of its own, after the first
        (which decides whether to bound)."""
        p = Params(self.dialect)
        ctes = self.engine._kept_with(p, [k])
        rows = self.engine._run_sql(f"{ctes} SELECT CASE WHEN u{k} THEN v{k} END AS key_, count(*) FROM kept GROUP BY 1", p)
        counts: dict[str, int] = {}
        dropped = 0
        for key, n in rows:
            if key is None:
                dropped += int(n)
                continue
            label = canonical_value(key) if isinstance(key, float) else str(key)
            if label:
                counts[label] = counts.get(label, 0) + int(n)
        keys = tuple(sorted(counts))
        return KeyCounts(keys, tuple(counts[x] for x in keys), dropped)

    def marginal_counts(self, slot: MarginalsSlot) -> dict[tuple[int, ...], dict[tuple[int, ...], int]]:
        """Every 1- and 2-way table of the columns' bin keys, over the bounded rows where every
        key is a bin (:class:`~planner.data.requests.Marginals`): ONE statement,
        ``SELECT keys, count(*) FROM kept WHERE every key ≥ 0 GROUP BY GROUPING SETS ((k₀),
        …, (k₀, k₁), …)``, after the first (which decides whether to bound). A key is the
        bin index of :meth:`Binner.key_sql` (numeric columns by their edges, never per value:
        the tables need each row's own bin of every column at once); a row's grouping set
        is the set of its non-NULL keys."""
        p = Params(self.dialect)
        ctes = self.engine._kept_with(p, sorted(set(slot.ks)))
        layers = [Layer() for _ in range(6)]
        d = len(slot.ks)
        for j, (k, e) in enumerate(zip(slot.ks, slot.edges, strict=True)):
            guess, idx, key = self.bins.key_sql(BinsSlot(k, edges=e), p, j)
            if guess is not None:
                layers[3].add(f"gg{j}", guess)
            if idx is not None:
                layers[4].add(f"gi{j}", idx)
            layers[5].add(f"gk{j}", key)
        cols = [f"gk{j}" for j in range(d)]
        cliques = [(j,) for j in range(d)] + list(itertools.combinations(range(d), 2))
        sets = ", ".join("(" + ", ".join(cols[j] for j in c) + ")" for c in cliques)
        where = " AND ".join(f"{c} >= 0" for c in cols)
        sql = (f"{ctes} SELECT {', '.join(cols)}, count(*) FROM {chain('kept', layers)} z "
               f"WHERE {where} GROUP BY GROUPING SETS ({sets})")
        out: dict[tuple[int, ...], dict[tuple[int, ...], int]] = {c: {} for c in cliques}
        for row in self.engine._run_sql(sql, p):
            clique = tuple(j for j in range(d) if row[j] is not None)
            if clique in out:
                out[clique][tuple(int(row[j]) for j in clique)] = int(row[d])
        return out

    def run_groups(self, reqs: Sequence[InGroup]) -> None:
        """Compute in-group requests: every group of every grouping in ONE statement.

        Groups that hold no row get the values of an empty table (zero counts and sums).
        """
        bys = list(dict.fromkeys(r.by for r in reqs))
        inners = list(dict.fromkeys([RowsSlot(), *(r.req for r in reqs)]))
        binned = {by: {r.req for r in reqs if r.by == by and isinstance(r.req, BinsSlot)} for by in bys}
        found = self.group_statement(bys, inners, binned)
        for by in bys:
            domains = [range(len(self.schema.columns[key].labels)) for key in by]
            # only what this grouping asked for: its statement computed no other bins
            mine = list(dict.fromkeys([RowsSlot(), *(r.req for r in reqs if r.by == by)]))
            for codes in itertools.product(*domains):
                got = found.get((by, codes), {})
                for inner in mine:
                    self.values[InGroup(by, codes, inner)] = got.get(inner, default(inner))
        for r in reqs:  # codes outside the declared values (none from grouped statistics)
            self.values.setdefault(r, default(r.req))

    def group_statement(self, bys: Sequence[tuple[int, ...]],
                         inners: Sequence[Inner],
                         binned: dict[tuple[int, ...], set[BinsSlot]],
                         ) -> dict[tuple[tuple[int, ...], tuple[int, ...]], dict[Slot, Any]]:
        """Per grouping ``by`` and group (key values ``codes``), the values of ``inners``.

        ONE statement: ``SELECT keys, aggregates FROM kept GROUP BY GROUPING SETS ((keys of
        a grouping), (keys of a grouping, bin key₁), …)`` for every grouping at once (bin
        keys only with the groupings that ask for them, ``binned``): the
        scalar requests (row, count, exact-sum and column-stat aggregates, the same SQL as
        :meth:`statement`) per group, and the bin counts per group and bin. A key is −1
        on a row in no group of it (not usable; a condition that does not hold): those
        groups are read past. Rows are bounded first (``kept``), exactly as for the whole
        table, so a group holds the same rows as the pandas backend's view.
        """
        d = self.dialect
        p = Params(d)
        keys = list(dict.fromkeys(key for by in bys for key in by))
        used = self.compiler.used_columns([*keys, *inners])
        if self.bounded:
            ctes = self.engine._kept_with(p, sorted(used))
        else:
            ctes = f"WITH kept AS {d.cte_hint}({self.reader.cells_sql(p, sorted(used), pid=False)})"
        layers = [Layer() for _ in range(6)]  # sums ×3, bin guess, bin index, keys
        aggs, slots = self.compiler.scalar_aggs([r for r in inners if not isinstance(r, BinsSlot)], p, layers)
        plan = self.bins.plan([r for r in inners if isinstance(r, BinsSlot)], pair_ranks=False)
        layers[5].cols += [(f"gk{j}", key_sql) for j, key_sql in enumerate(self.bins.keys(plan, p, layers))]
        gcols = [f"gw{i}" for i in range(len(keys))]
        for col_, key in zip(gcols, keys, strict=True):
            layers[5].add(col_, f"CASE WHEN u{key} THEN v{key} ELSE -1 END")
        kcols = [f"gk{j}" for j in range(len(plan.groups))]
        # a grouping set per distinct set of keys (two groupings may share one)
        at = {by: [keys.index(key) for key in by] for by in bys}
        patterns: dict[frozenset[int], list[tuple[int, ...]]] = {}
        for by in bys:
            patterns.setdefault(frozenset(at[by]), []).append(by)
        sets: list[str] = []
        for pat, pat_bys in patterns.items():
            cols = [gcols[i] for i in sorted(pat)]
            need = {plan.by_value.get(g, g) for by in pat_bys for g in binned.get(by, set())}
            sets += [", ".join(cols)] + [", ".join([*cols, c]) for c, g in zip(kcols, plan.groups, strict=True)
                                         if g in need]
        sql = (f"{ctes} SELECT {', '.join([*gcols, *kcols, *aggs])} FROM {chain('kept', layers)} z "
               f"GROUP BY GROUPING SETS ({', '.join(f'({s_})' for s_ in sets)})")
        out = self.read_groups(self.engine._run_sql(sql, p), len(gcols), plan, slots, at, patterns)
        for res in out.values():
            for g in plan.groups:
                res.setdefault(g, {})
            self.bins.from_values(plan, res)
        return out

    def read_groups(self, rows: Sequence[tuple[Any, ...]], nw: int, plan: BinPlan,
                     slots: Sequence[tuple[Slot, int, int]],
                     at: dict[tuple[int, ...], list[int]],
                     patterns: dict[frozenset[int], list[tuple[int, ...]]],
                     ) -> dict[tuple[tuple[int, ...], tuple[int, ...]], dict[Slot, Any]]:
        """The rows of :meth:`group_statement` as values per (grouping, group codes): a
        row's grouping set is the set of its non-NULL group keys (``nw`` of them); a row
        with a bin key holds that bin's count, the others the scalar aggregates."""
        nk = len(plan.groups)
        out: dict[tuple[tuple[int, ...], tuple[int, ...]], dict[Slot, Any]] = {}
        for row in rows:
            pat = frozenset(i for i in range(nw) if row[i] is not None)
            which = [j for j in range(nk) if row[nw + j] is not None]
            for by in patterns.get(pat, []):
                codes = tuple(int(row[i]) for i in at[by])
                if any(c < 0 for c in codes):
                    continue  # rows in no group of this grouping
                res = out.setdefault((by, codes), {})
                if which:
                    counts = res.setdefault(plan.groups[which[0]], {})
                    counts[int(row[nw + which[0]])] = 0 if row[nw + nk] is None else int(row[nw + nk])
                    continue
                res.update(self.compiler.slot_results(slots, row[nw + nk:]))
        return out

