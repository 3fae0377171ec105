"""The Spark spelling of the content digest's 64-bit arithmetic (issue #31).

Spark's ANSI SQL refuses an overflowing BIGINT product, so :class:`SparkDialect` spells
u·C mod 2⁶⁴ with 32- and 16-bit pieces (:meth:`SparkDialect.u_mul`). These tests run
that SQL in Spark (ANSI on, so a product that overflowed would raise) and compare it
with Python's exact ``(u * c) % 2**64`` — the reference, computed here, not copied. The
whole digest is compared across pandas, DuckDB and Spark in
``tests/engine/test_backends_conformance.py``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from planner.data.backends import digest as dg

MASK = (1 << 64) - 1


@pytest.fixture(scope="module")
def spark() -> Any:
    """The local Spark session, or the test skipped with the reason (:func:`tests.spark_cluster.local_session`)."""
    from tests.spark_cluster import local_session

    return local_session()


def signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


#: the extremes of every 16- and 32-bit piece, and values from a fixed seed
EDGES = [0, 1, 2, MASK, 1 << 63, (1 << 63) - 1, (1 << 63) + 1, 1 << 32, (1 << 32) - 1, (1 << 32) + 1,
         0xFFFF, 0xFFFF0000, 0xFFFF00000000, 0xFFFF000000000000, 0x0000FFFFFFFF0000, dg.MURMUR, dg.K_LANE2]
rng = random.Random(31)
VALUES = EDGES + [rng.getrandbits(64) for _ in range(2000)]
CONSTS = [dg.MURMUR, MASK, 1 << 63, 0xFFFF0000FFFF0000, 3]


def test_spark_runs_in_ansi_mode(spark: Any) -> None:
    """The arithmetic below is tested where an overflowing product raises."""
    assert spark.conf.get("spark.sql.ansi.enabled").lower() == "true"
    with pytest.raises(Exception, match=r"(?i)overflow"):
        spark.sql(f"SELECT CAST({(1 << 62)} AS BIGINT) * 4L").collect()


def test_u_mul_is_the_wrapping_product_in_spark(spark: Any) -> None:
    from planner.data.backends.spark_backend import SparkDialect

    d = SparkDialect()
    df = spark.createDataFrame([(i, signed(u)) for i, u in enumerate(VALUES)], "i INT, u BIGINT")
    df.createOrReplaceTempView("u_mul_cases")
    exprs = ", ".join(f"{d.u_mul('u', c)} AS m{j}" for j, c in enumerate(CONSTS))
    got = {r["i"]: r for r in spark.sql(f"SELECT i, {exprs} FROM u_mul_cases").collect()}
    for i, u in enumerate(VALUES):
        for j, c in enumerate(CONSTS):
            assert got[i][f"m{j}"] & MASK == (u * c) & MASK, (hex(u), hex(c))


def test_murmur_spelled_in_spark_is_the_reference(spark: Any) -> None:
    """M(u) of :func:`planner.data.backends.digest.murmur` from the dialect's steps, and the
    lane sum read back mod 2⁶⁴ (a sum far beyond 2⁶³)."""
    from planner.data.backends.spark_backend import SparkDialect

    d = SparkDialect()
    spark.createDataFrame([(signed(u),) for u in VALUES], "u BIGINT").createOrReplaceTempView("murmur_cases")
    a = d.u_mul(d.u_xorshift("u", 32), dg.MURMUR)
    b = d.u_mul(d.u_xorshift("a", 32), dg.MURMUR)
    sql = (f"SELECT {d.lane_sum('m')} AS s, collect_list(m) AS ms FROM "
           f"(SELECT {d.u_xorshift('b', 32)} AS m FROM (SELECT {b} AS b FROM (SELECT {a} AS a FROM murmur_cases)))")
    row = spark.sql(sql).collect()[0]
    want = dg.murmur(np.asarray(VALUES, dtype=np.uint64))
    assert sorted(int(m) & MASK for m in row["ms"]) == sorted(int(v) for v in want)
    assert int(row["s"]) % (1 << 64) == int(want.sum(dtype=np.uint64))
