"""Count by undeclared key: pandas, DuckDB and Spark count the same rows per key label.

Keys as people write them: leading zeros ("02139" is not "2139"), blanks and white space
around a key (trimmed), empty and missing cells (dropped), CSV NA tokens, integers with
and without zeros, and several rows per person cut to c. Typed Parquet keys (integers)
take the SQL engines' integer path. Expected counts are written by hand beside the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from planner.data.backends import PandasBackend
from planner.data.backends.base import Backend, KeyCounts
from planner.data.backends.duckdb_backend import DuckDBBackend
from planner.data.loader import load_table
from planner.data.requests import Keys
from planner.data.schema import Schema
from planner.data.sources import open_source
from tests.engine import test_backends_conformance as conformance
from tests.engine.test_backends_conformance import three

spark = conformance.spark
data_dir = conformance.data_dir

#: person, zip: person 1 has 4 rows (cut to c = 2: the two kept are the backends' common
#: choice), "02139" written three ways, "7" and "007" are different keys, NA / blank rows.
CSV = """pid,zip,x
1,02139,1
1, 02139 ,2
1,02139,3
1,10001,4
2,007,5
3,7,6
4,,7
5,NA,8
6,   ,9
7,94105,10
8,94105,11
"""


def schema(c: int) -> Schema:
    unit = {"column": "pid", "max_rows": c} if c > 1 else {"column": None, "max_rows": 1}
    return Schema.from_dict({"version": 1, "relation": "add_remove", "privacy_unit": unit, "columns": [
        {"name": "pid", "kind": "identifier"},
        {"name": "zip", "kind": "key", "missing": {"action": "drop"}},
        {"name": "x", "kind": "numeric", "lower": 0, "upper": 20, "missing": {"action": "drop"}},
    ]})


def _all_equal(backends: dict[str, Backend]) -> KeyCounts:
    got = {name: b.result(Keys("zip")) for name, b in backends.items()}
    ref = got["pandas"]
    for name, kc in got.items():
        assert kc == ref, (name, kc, ref)
    return ref


def test_key_counts_identical_in_every_engine(data_dir: Path, spark: Any) -> None:
    (data_dir / "k.csv").write_text(CSV)
    kc = _all_equal(three("k.csv", schema(1), spark))
    # by hand, no bounding: 02139 ×3, 10001, 007, 7, 94105 ×2; NA, '' and blanks are missing (3)
    assert kc == KeyCounts(("007", "02139", "10001", "7", "94105"), (1, 3, 1, 1, 2), 3)


@pytest.mark.parametrize("c", [1, 2])
def test_key_counts_after_contribution_bounding(data_dir: Path, c: int) -> None:
    (data_dir / "k.csv").write_text(CSV)
    s = schema(c)
    backends: dict[str, Backend] = {"pandas": PandasBackend(load_table(data_dir / "k.csv"), s, "salt"),
                                    "duckdb": DuckDBBackend(open_source("k.csv"), s, "salt")}
    kc = _all_equal(backends)
    # person 1 keeps c rows of 4: the total over person 1's keys is c (hand count)
    total = sum(kc.counts) + kc.dropped
    assert total == (11 if c == 1 else 11 - 2)  # c = 1 here means no unit: nothing cut


def test_typed_parquet_keys(data_dir: Path) -> None:
    frame = pd.DataFrame({"pid": range(6), "zip": pd.array([2139, 2139, 7, None, 94105, 7], dtype="Int64"),
                          "x": 1.0})
    frame.to_parquet(data_dir / "k.parquet", index=False)
    s = schema(1)
    backends: dict[str, Backend] = {"pandas": PandasBackend(load_table(data_dir / "k.parquet"), s),
                                    "duckdb": DuckDBBackend(open_source("k.parquet"), s)}
    kc = _all_equal(backends)
    assert kc == KeyCounts(("2139", "7", "94105"), (2, 2, 1), 1)  # an integer column has no zeros to keep
