"""The Spark backend: the same SQL as DuckDB, run by Spark SQL on the executors.

Only the small aggregate rows come back to the driver; noise is still drawn in one
trusted place (:mod:`planner.release`). PySpark is imported only when this backend is
chosen; a missing PySpark or Java gives a :class:`~planner.core.errors.PlannerError` that says
what to install. Any master URL works (``local[*]``, ``spark://…``, ``yarn``); the data
paths must be readable by the executors.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from planner.core.errors import DataError, PlannerError
from planner.data.backends.sql import Dialect, Params, SqlBackend
from planner.data.schema import Schema
from planner.data.sources import FileSource, Source, TableSource, open_source

#: Settings of a session this module creates (an existing session is used as it is).
SESSION_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.caseSensitive": "true",
    "spark.sql.session.timeZone": "UTC",
}


class SparkDialect(Dialect):
    """Spark SQL spellings."""

    name = "spark"
    text_type = "STRING"
    cte_hint = ""
    bounded_hint = ""

    def ident(self, name: str) -> str:
        if "\x00" in name:
            raise DataError("a column name contains a NUL character; rename the column.")
        return "`" + name.replace("`", "``") + "`"

    def marker(self, key: str) -> str:
        return ":" + key

    def literal(self, value: str) -> str:
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def matches(self, expr: str, pattern: str) -> str:
        return f"({expr} RLIKE {pattern})"

    def strip(self, expr: str, pattern: str) -> str:
        return f"regexp_replace({expr}, {pattern}, '')"

    def at(self, array: str, index0: str) -> str:
        return f"element_at({array}, CAST(({index0}) + 1 AS INT))"

    def floor(self, expr: str) -> str:
        return f"CAST(floor({expr}) AS DOUBLE)"

    def hash64(self, expr: str) -> str:
        return f"xxhash64({expr})"

    def exact_sum(self, expr: str) -> str:
        # Spark sums BIGINT into a BIGINT (overflow): sum as DECIMAL(38, 0) instead
        return f"sum(CAST(CAST({expr} AS BIGINT) AS DECIMAL(38, 0)))"

    #: Spark proves nothing in the scan: the person check is a GROUP BY of its own
    single_scan = False

    def histogram(self, expr: str, domain: tuple[int, int] | None = None) -> str | None:
        return None

    def bitmap_distinct(self, expr: str, bits: int) -> str | None:
        return None

    def number_guard(self, text: str) -> str:
        # Java's number parsing differs from the pandas rules: every text cell takes
        # the full rules (the number pattern first)
        return "FALSE"

    def in_list(self, expr: str, consts: Sequence[str]) -> str:
        return f"{expr} IN ({', '.join(consts)})"

    # content digest: words are BIGINT as in DuckDB; Spark has no usable hash of them and
    # its ANSI arithmetic refuses to wrap, so the row hash is spelled out on BIGINT values
    # holding the unsigned word's bits, with products of 32-bit and 16-bit pieces (each
    # below 2⁴⁸: no overflow). Every step is a projection layer of its own
    # (:meth:`~planner.data.backends.sql.compile.Compiler.digest_sql`), so an input is a
    # column name, and Spark's common-subexpression elimination computes it once per row.
    native_hash = False

    def xor(self, a: str, b: str) -> str:
        return f"({a} ^ {b})"

    def word_bits(self, x: str) -> str:
        return f"CAST(java_method('java.lang.Double', 'doubleToLongBits', CAST({x} AS DOUBLE)) AS BIGINT)"

    def word_md5(self, text: str) -> str:
        return f"CAST(conv(substr(md5({text}), 1, 16), 16, -10) AS BIGINT)"

    def u_word(self, w: str) -> str:
        return f"CAST({w} AS BIGINT)"

    def u_xorshift(self, u: str, shift: int) -> str:
        return f"({u} ^ shiftrightunsigned({u}, {shift}))"

    def u_xor(self, a: str, b: str) -> str:
        return f"({a} ^ {b})"

    def u_mul(self, u: str, c: int) -> str:
        """u·c mod 2⁶⁴ on BIGINT bits without an overflowing product.

        With u = uh·2³² + ul and c = c₃·2⁴⁸ + c₂·2³² + c₁·2¹⁶ + c₀ (ul, uh < 2³²; cᵢ < 2¹⁶):
        u·c ≡ ul·(c₀ + c₁·2¹⁶) + 2³²·(uh·(c₀ + c₁·2¹⁶) + ul·(c₂ + c₃·2¹⁶)) (mod 2⁶⁴). The low
        product is p₀ + p₁·2¹⁶ with p₀ = ul·c₀, p₁ = ul·c₁; its low 32 bits and carry come
        from s = p₀ + (p₁ mod 2¹⁶)·2¹⁶; the high word only matters mod 2³², so each
        ·2¹⁶ term there keeps its low 16 bits. Every product is below 2⁴⁸ and every sum
        below 2⁵¹; ``shiftleft`` drops the bits above 2⁶⁴ as the wrapping product does.
        """
        c &= (1 << 64) - 1
        c0, c1, c2, c3 = (f"{(c >> s) & 0xFFFF}L" for s in (0, 16, 32, 48))
        ul, uh = f"({u} & 4294967295L)", f"shiftrightunsigned({u}, 32)"
        p1 = f"({ul} * {c1})"
        s = f"({ul} * {c0} + shiftleft({p1} & 65535L, 16))"
        hi = (f"(shiftright({s}, 32) + shiftright({p1}, 16) + {uh} * {c0} + shiftleft(({uh} * {c1}) & 65535L, 16)"
              f" + {ul} * {c2} + shiftleft(({ul} * {c3}) & 65535L, 16))")
        return f"(shiftleft({hi}, 32) | ({s} & 4294967295L))"

    def lane_sum(self, u: str) -> str:
        # BIGINT sums overflow (an error under ANSI): exact as DECIMAL(38, 0) (room for
        # 5·10¹⁸ rows of |value| < 2⁶³), read back mod 2⁶⁴
        return f"sum(CAST({u} AS DECIMAL(38, 0)))"

    def order_key(self, hex_digest: str) -> str:
        # strings compare byte by byte in Spark: the hex text itself is in digest order
        return hex_digest


def java_available() -> bool:
    """Whether a Java runtime can be found (``JAVA_HOME`` or ``java`` on the PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return True
    return shutil.which("java") is not None


def spark_available() -> bool:
    """Whether PySpark is importable and Java is present."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return java_available()


#: The one setting naming the Spark master the planner uses (the app, the command line and
#: the library alike) when no master is passed: ``local[*]``, ``spark://host:7077``, ``yarn``…
MASTER_ENV = "PLANNER_SPARK_MASTER"


def configured_master() -> str | None:
    """The master URL of ``PLANNER_SPARK_MASTER`` (``None`` when unset or blank)."""
    return os.environ.get(MASTER_ENV, "").strip() or None


def get_session(master: str | None = None) -> Any:
    """A Spark session on ``master``, else on ``PLANNER_SPARK_MASTER``, else the active
    session, else a new one on ``local[*]``.

    A process holds one Spark context: when one is running on another master than the one
    asked for, this raises rather than quietly computing somewhere else.

    Raises
    ------
    PlannerError
        PySpark is not installed, Java is absent, the master cannot be reached, or a
        session on another master is already running in this process.
    """
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise PlannerError(
            "the spark backend needs PySpark; install it with pip install '.[spark]' "
            "(and a Java 17+ runtime), or choose --backend duckdb."
        ) from exc
    wanted = (master or "").strip() or configured_master()
    running = SparkContext._active_spark_context
    if running is not None:
        if wanted is not None and str(running.master) != wanted:
            raise PlannerError(
                f"a Spark session on master {running.master!r} is already running in this process, "
                f"so master {wanted!r} cannot be used too (one Spark context per process); "
                f"use one master ({MASTER_ENV} or --spark-master) or stop the other session."
            )
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
    if not java_available():
        raise PlannerError(
            "the spark backend needs a Java runtime (Java 17+); install one (e.g. "
            "apt-get install default-jre-headless) and set JAVA_HOME, or choose --backend duckdb."
        )
    url = wanted or (str(running.master) if running is not None else "local[*]")
    builder = SparkSession.builder.master(url).appName("privacy-budget-planner")
    for k, v in SESSION_CONF.items():
        builder = builder.config(k, v)
    if url.startswith("local"):
        # local mode: the driver is the executor; Spark's 1 GB default runs hash
        # aggregates of 1e7 rows out of memory (AGGREGATE_OUT_OF_MEMORY)
        builder = builder.config("spark.driver.memory", os.environ.get("PLANNER_SPARK_DRIVER_MEMORY", "3g"))
    try:
        return builder.getOrCreate()
    except Exception as exc:
        raise PlannerError(
            f"could not start Spark on master {url!r} ({type(exc).__name__}); "
            "check the master URL and the Java installation."
        ) from exc


class SparkBackend(SqlBackend):
    """Exact aggregates computed by Spark SQL.

    Parameters
    ----------
    source : FileSource, str, pandas.DataFrame, pyarrow.Table or pyspark DataFrame
        A file source (CSV / Parquet paths or glob, see :mod:`planner.data.sources`), a path in
        the allow-listed data directory, or an in-memory table.
    schema : Schema
        The declaration.
    salt : str or None
        Overrides ``schema.salt`` for the contribution-bounding hash.
    spark : SparkSession, optional
        The session to use (default: the active one, or a new one on ``master``).
    master : str, optional
        Master URL for a new session (default ``PLANNER_SPARK_MASTER``, else ``local[*]``;
        see :func:`get_session`).
    """

    kind = "spark"
    dialect = SparkDialect()

    def __init__(
        self,
        source: Source | str | pd.DataFrame | pa.Table | Any,
        schema: Schema,
        salt: str | None = None,
        *,
        spark: Any = None,
        master: str | None = None,
    ) -> None:
        self._spark = spark if spark is not None else get_session(master)
        if isinstance(source, str):
            source = open_source(source)
        self.source = source
        self._views: list[str] = []
        self._kept_view: str | None = None
        self._kept_df: Any = None
        view = f"planner_src_{uuid.uuid4().hex[:12]}"
        csv_text = False
        try:
            if isinstance(source, FileSource):
                df, csv_text = self._read_files(source)
            elif isinstance(source, TableSource):
                raise DataError(
                    "a DuckDB table is read by the duckdb backend; export it to Parquet in the "
                    "data directory to use Spark."
                )
            elif isinstance(source, (pd.DataFrame, pa.Table)):
                from planner.data.backends.duckdb_backend import _as_arrow

                df = self._spark.createDataFrame(_as_arrow(source, schema.names))
            elif hasattr(source, "createOrReplaceTempView"):
                df = source
            else:
                raise DataError(
                    f"cannot read data from a {type(source).__name__}; pass a source, a path in "
                    "the data directory, or a DataFrame."
                )
            df.createOrReplaceTempView(view)
            self._views.append(view)
            names = list(df.columns)
            types = [t for _, t in df.dtypes]
        except PlannerError:
            raise
        except Exception as exc:  # messages may quote private cells
            raise DataError(
                f"Spark could not read the data source ({type(exc).__name__}); check the "
                "file's format, delimiter and quotes."
            ) from exc
        self.source_columns = tuple(names)
        self._setup(schema, view, dict(zip(names, types, strict=True)),
                    csv_text=csv_text, salt=salt, require_rows=isinstance(source, FileSource),
                    label=source.label if isinstance(source, FileSource) else None)

    def _read_files(self, source: FileSource) -> tuple[Any, bool]:
        """(Spark DataFrame, whether its cells are CSV text) of a file source."""
        files = [str(p) for p in source.paths]
        reader = self._spark.read
        if source.kind == "parquet":
            return reader.parquet(*files), False
        multiline = sum(os.path.getsize(f) for f in files) <= (256 << 20)
        df = reader.csv(
            files, header=True, sep=source.delimiter, quote='"', escape='"',
            inferSchema=False, mode="FAILFAST", multiLine=multiline,
            encoding="UTF-8", enforceSchema=False,
        )
        if len(df.columns) != len(source.header):
            raise DataError(
                f"file {source.label!r}: Spark read {len(df.columns)} columns but the "
                f"header has {len(source.header)}; check the delimiter and quotes."
            )
        return df.toDF(*source.header), True

    def _kept_with(self, p: Params, columns: Sequence[int]) -> str:
        """Spark re-computes CTEs: the conformed, bounded rows are cached once, on the executors."""
        if self._kept_view is None:
            q = Params(self.dialect)
            ctes = self._bound.kept_ctes(q, list(range(len(self.schema.columns))), bounded=bool(self._scan.bounded))
            try:
                df = self._spark.sql(f"{ctes} SELECT * FROM kept", args=q.values)
                # eager local checkpoint: later statements scan the rows, not re-plan the SQL
                df = df.localCheckpoint(eager=True)
            except Exception as exc:
                raise DataError(
                    f"Spark could not read the data ({type(exc).__name__}); check the file's "
                    "format, delimiter and quotes."
                ) from exc
            name = f"planner_kept_{uuid.uuid4().hex[:12]}"
            df.createOrReplaceTempView(name)
            self._views.append(name)
            self._kept_df = df
            self._kept_view = name
        return f"WITH kept AS (SELECT * FROM {self._kept_view})"

    def _execute(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._spark.sql(sql, args=params).collect()]

    def close(self) -> None:
        """Drop the temporary views and the cached rows (the session stays up for reuse)."""
        if self._kept_df is not None:
            self._kept_df.unpersist()
            self._kept_df = None
        for v in self._views:
            try:
                self._spark.catalog.dropTempView(v)
            except Exception:  # pragma: no cover - session already stopped
                pass
        self._views.clear()

    def __enter__(self) -> SparkBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["MASTER_ENV", "SparkBackend", "configured_master", "get_session", "java_available", "spark_available"]
