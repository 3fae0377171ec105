"""Contribution bounding in SQL: at most c rows per person, the same rows as pandas keeps.

Whether anybody has more than c rows is proven inside the first statement when every
person id is a plain integer: their residues modulo 2^bits are distinct (a bitmap,
:meth:`~planner.data.backends.sql.dialect.Dialect.bitmap_distinct`, sized from the row
count of the Parquet metadata or a CSV estimate, :func:`bitmap_bits`), so the ids are
(:func:`units_proven`). Otherwise a ``GROUP BY`` person counts rows
(:meth:`Bounding.check_units`), and only when somebody is over c are the requests
computed again over the bounded rows (:meth:`Bounding.kept_ctes`).

Those rows of people over c are ordered by ``md5(salt_key | row key)``, the same text and
md5 as :func:`~planner.data.backends.pandas_backend.bound_contributions`, so every engine
keeps the same rows. DuckDB ranks a narrow relation (person, digest as an unsigned
128-bit integer: the hex order) with a window that spills, stores each person's c-th
smallest digest, and keeps the rows at or below it in one filtering pass
(:meth:`Bounding.thresholds`); ties on the cut (identical rows) are ranked apart. Spark
ranks the rows themselves (:meth:`Bounding.kept_ranked`).
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.core.errors import DataError
from planner.data.backends.cells import salt_key
from planner.data.backends.sql.dialect import Engine, Params, concat
from planner.data.backends.sql.reading import CellReader


def bitmap_bits(expected_rows: int | None) -> int:
    """Bits of the unit-check bitmap: 2^bits ≥ 2 × the expected rows (2¹⁶ … 2²⁸).

    A larger table than expected only makes the check inconclusive (then the exact
    check by person runs); 2²⁸ bits are 32 MB per thread.

    >>> bitmap_bits(10_000_000), bitmap_bits(None), bitmap_bits(10)
    (25, 21, 16)
    """
    n = expected_rows if expected_rows is not None and expected_rows > 0 else 1 << 20
    return min(max((2 * n - 1).bit_length(), 16), 28)


def units_proven(total: int, n_int: int, distinct: int) -> bool:
    """Whether the unit check proves that nobody has more than one row (hence ≤ c)."""
    return total == 0 or (n_int == total and distinct == total)


class Bounding:
    """The bounded rows of a source as SQL, and the checks that decide whether to bound.

    Parameters
    ----------
    reader : CellReader
        The source's conformed cells.
    engine : Engine
        Runs statements, and keeps the thresholds' rows in the engine where it can.
    salt : str
        The salt of the bounding order.
    uid : str
        Names the engine-side relation of this backend's thresholds.
    """

    def __init__(self, reader: CellReader, engine: Engine, salt: str, uid: str) -> None:
        self.reader = reader
        self.schema = reader.schema
        self.dialect = reader.dialect
        self.engine = engine
        self.salt = salt
        self.uid = uid
        self._thr: tuple[str, bool] | None = None

    def kept_ctes(self, p: Params, columns: Sequence[int], *, bounded: bool) -> str:
        """``WITH`` clauses ending in ``kept``: the conformed rows after contribution bounding.

        Without bounding only ``columns`` are conformed (an unused join is not free).
        With bounding, the per-person thresholds are computed once over a narrow relation
        and stored (:meth:`thresholds`); ``kept`` is then a single filtering pass: the
        rows of people with at most c rows, and the rows of the others whose order key
        (:meth:`order_key_sql`) is at most their c-th smallest. Only when the c-th and
        the (c+1)-th smallest order keys of somebody are equal (identical rows straddle
        the cut) are that person's rows ranked by ``row_number()``, in a second branch.
        """
        d = self.dialect
        if not bounded:
            return f"WITH kept AS {d.cte_hint}({self.reader.cells_sql(p, columns, pid=False)})"
        stored = self.thresholds()
        if stored is None:
            return self.kept_ranked(p)
        thr, ties = stored
        cells = self.reader.cells_sql(p)
        schema = self.schema
        okey = self.order_key_sql(p)
        cols = ", ".join(
            [f"{x}{k}" for k in range(len(schema.columns)) for x in ("u", "v", "m", "i", "cl", "d")]
            + ["pid"]
        )
        kept = (
            f"SELECT {cols} FROM flagged WHERE th_ IS NULL OR (NOT tie_ AND {okey} <= th_)"
        )
        if ties:
            c = p(schema.unit.max_rows)
            kept += (
                f" UNION ALL SELECT {cols} FROM (SELECT flagged.*, row_number() OVER "
                f"(PARTITION BY pid ORDER BY {okey}) AS rn_ FROM flagged WHERE tie_) t "
                f"WHERE rn_ <= {c}"
            )
        return (
            f"WITH flagged AS {d.cte_hint}(SELECT cells.*, b_.th AS th_, b_.tie AS tie_ "
            f"FROM ({cells}) cells LEFT JOIN {thr} b_ ON cells.pid = b_.tpid), "
            f"kept AS {d.bounded_hint}({kept})"
        )

    def kept_ranked(self, p: Params) -> str:
        """``kept`` by ranking the rows of the people over c (wide rows, one statement).

        The engine ranks whole rows (Spark: its plan optimizer expands the row key of
        a filter on it beyond its memory; it sorts and spills by itself).
        """
        schema = self.schema
        c = p(schema.unit.max_rows)
        cols = ", ".join(
            [f"{x}{k}" for k in range(len(schema.columns)) for x in ("u", "v", "m", "i", "cl", "d")]
            + ["pid"]
        )
        return (
            f"WITH cells AS ({self.reader.cells_sql(p)}), "
            f"over_ AS (SELECT pid AS opid FROM cells GROUP BY pid HAVING count(*) > {c}), "
            f"flagged AS (SELECT cells.*, over_.opid IS NOT NULL AS isover FROM cells "
            f"LEFT JOIN over_ ON cells.pid = over_.opid), "
            f"kept AS (SELECT {cols} FROM flagged WHERE NOT isover UNION ALL "
            f"SELECT {cols} FROM (SELECT flagged.*, row_number() OVER (PARTITION BY pid "
            f"ORDER BY {self.order_key_sql(p)}) AS rn_ FROM flagged WHERE isover) t "
            f"WHERE rn_ <= {c})"
        )

    def order_key_sql(self, p: Params) -> str:
        """The bounding order of a conformed row: ``md5(salt_key | row key)`` in hex order.

        The text is :func:`~planner.data.backends.pandas_backend.row_key_parts` joined by "|"
        after the salt key, as in
        :func:`~planner.data.backends.pandas_backend.bound_contributions`, which orders by the
        digest's two big-endian 64-bit halves: the order of the 32-digit lowercase hex
        text (:meth:`Dialect.order_key`).
        """
        schema = self.schema
        unit_k = schema.names.index(schema.unit.column or "")
        parts = [p(salt_key(self.salt))]
        sep = p("|")
        for k, col in enumerate(schema.columns):
            if k != unit_k:
                parts += [sep, *self.reader.row_key(k, col)]
        return self.dialect.order_key(f"md5({concat(parts)})")

    def thresholds(self) -> tuple[str, bool] | None:
        """(stored relation, whether any tie straddles the cut) of the bounding thresholds;
        None when the engine cannot store them (the backend's ``_store``).

        One row per person with more than c rows: ``tpid``, ``th`` (the c-th smallest
        order key of their rows) and ``tie`` (whether the (c+1)-th smallest is equal to
        it). Ranked over a narrow relation (person, order key) and stored by the engine
        (the backend's ``_store``), so the aggregate statements never rank wide rows.
        Keeping every row with a key ≤ ``th`` keeps exactly the c first rows of the order of
        :func:`~planner.data.backends.pandas_backend.bound_contributions` when there is no tie;
        rows with equal keys have equal row keys, hence are alike for every query.
        """
        if self._thr is None:
            d = self.dialect
            p = Params(d)
            c = self.schema.unit.max_rows
            pc, pc1 = p(c), p(c + 1)
            okey = self.order_key_sql(p)
            uk = self.schema.names.index(self.schema.unit.column or "")
            # the person ids are conformed in a scan of their own: a relation read twice
            # would be held in memory until the people over c are known
            sql = (
                f"WITH over_ AS (SELECT pid AS opid FROM ({self.reader.cells_sql(p, [uk])}) q "
                f"GROUP BY pid HAVING count(*) > {pc}), "
                f"ranked AS (SELECT pid AS rpid, h_, row_number() OVER (PARTITION BY pid "
                f"ORDER BY h_) AS rn_ FROM (SELECT pid, {okey} AS h_ FROM ({self.reader.cells_sql(p)}) cells "
                f"JOIN over_ ON cells.pid = over_.opid) hq) "
                f"SELECT rpid AS tpid, max(CASE WHEN rn_ = {pc} THEN h_ END) AS th, "
                f"COALESCE(max(CASE WHEN rn_ = {pc1} THEN h_ END) = "
                f"max(CASE WHEN rn_ = {pc} THEN h_ END), FALSE) AS tie "
                f"FROM ranked GROUP BY rpid"
            )
            name = f"planner_bound_{self.uid}"
            if not self.engine._store(name, sql, p):
                return None
            ties = self.engine._run_sql(f"SELECT count(*) FROM {name} WHERE tie", Params(d))
            self._thr = (name, bool(ties[0][0]))
        return self._thr

    def check_units(self) -> tuple[int, bool]:
        """(rows before bounding, whether some person has more than c rows), exactly:
        a ``GROUP BY`` person (a pass of its own; the single-scan proof came first)."""
        p = Params(self.dialect)
        unit = self.schema.unit.column
        if unit is None:
            return -1, False  # no bounding: nothing is truncated (total = rows)
        uk = self.schema.names.index(unit)
        cells = self.reader.cells_sql(p, [uk])
        c = p(self.schema.unit.max_rows)
        # grouped by a 64-bit hash of the person: small keys, and a collision can only
        # over-count (then the exact, per-person bounding runs; it is never skipped wrongly)
        rows = self.engine._run_sql(
            f"SELECT sum(n), sum(CASE WHEN isnull_ THEN n ELSE 0 END), "
            f"sum(CASE WHEN NOT isnull_ AND n > {c} THEN 1 ELSE 0 END) "
            f"FROM (SELECT {self.dialect.hash64('pid')} AS h_, pid IS NULL AS isnull_, count(*) AS n "
            f"FROM ({cells}) q GROUP BY {self.dialect.hash64('pid')}, pid IS NULL) g",
            p,
        )
        total, nulls, over = (int(v or 0) for v in rows[0])
        if nulls:
            raise DataError(
                f"identifier column {unit!r} has {nulls} row(s) with no value; every row "
                "must name its person. Fill them in or remove those rows."
            )
        return total, over > 0

