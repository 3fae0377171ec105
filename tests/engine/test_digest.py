"""The content digest's reference implementation against a plain-Python one.

``planner/data/backends/digest.py`` documents the construction; the pandas backend computes it
with numpy (wrapping uint64 arrays). Here the same definition is written out cell by cell
with Python integers, ``struct`` and ``hashlib`` only (an independent implementation), and
must give the same hex digest on a table that touches every row of the definition's table.
"""

from __future__ import annotations

import hashlib
import math
import struct
from typing import Any

import numpy as np
import pandas as pd

from planner.data.backends import digest as dg
from planner.data.backends.pandas_backend import table_digest
from planner.data.schema import Column, ColumnKind, MissingAction, MissingRule, Schema

M64 = (1 << 64) - 1
C = 0xD6E8FEB86659FD93


def tag(label: str) -> int:
    return int.from_bytes(hashlib.md5(f"planner-digest-v1:{label}".encode()).digest()[:8], "big")


def md5_64(text: str) -> int:
    return int.from_bytes(hashlib.md5(text.encode()).digest()[:8], "big")


def bits(x: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", x + 0.0))[0])


def murmur(x: int) -> int:
    x ^= x >> 32
    x = (x * C) & M64
    x ^= x >> 32
    x = (x * C) & M64
    return x ^ (x >> 32)


def canonical_word(v: Any) -> int:
    """Word of a categorical / identifier cell (written from the docstring's table)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return tag("missing")
    if isinstance(v, bool):
        return md5_64(str(v)) ^ tag("text")
    if isinstance(v, int):
        return (v & M64) ^ tag("integer")
    if isinstance(v, float):
        if math.isfinite(v) and v == int(v) and abs(v) < 2**53:
            return (int(v) & M64) ^ tag("integer")
        return bits(v) ^ tag("float")
    t = str(v).strip()
    if t == "":
        return tag("missing")
    try:
        k = int(t)
        return (k & M64) ^ tag("integer") if -(2**63) <= k < 2**63 else md5_64(str(k)) ^ tag("text")
    except ValueError:
        pass
    try:
        return canonical_word(float(t))
    except ValueError:
        return md5_64(t) ^ tag("text")


def words(row: dict[str, Any]) -> list[int]:
    out: list[int] = []
    for name in sorted(row):  # age (numeric), id (identifier), kind (categorical), ok (boolean)
        v = row[name]
        if name == "age":
            if v is None or v == "" or (isinstance(v, float) and math.isnan(v)):
                out += [bits(0.0), tag("missing")]
            elif isinstance(v, float):
                out += [bits(v), 0]
            else:  # text that is no number
                out += [bits(0.0), md5_64(v.strip()) ^ tag("text")]
        elif name == "ok":
            tokens = {"yes": 1, "no": 0, "true": 1, "false": 0}
            if v is None:
                out.append(tag("missing"))
            elif str(v).strip().lower() in tokens:
                out.append(tokens[str(v).strip().lower()] ^ tag("boolean"))
            else:
                out.append(canonical_word(v))
        else:
            out.append(canonical_word(v))
    return out


def plain_digest(rows: list[dict[str, Any]], names: list[str]) -> str:
    s1 = s2 = 0
    for row in rows:
        w = words(row)
        h = murmur(w[0])
        for x in w[1:]:
            h = (((h ^ (h >> 32)) * C) & M64) ^ murmur(x)
        s1 = (s1 + h) & M64
        s2 = (s2 + murmur(h ^ tag("lane2"))) & M64
    out = hashlib.sha256(b"planner-content-digest-v1\x00")
    for n in sorted(names):
        out.update(n.encode() + b"\x00")
    out.update(struct.pack(">QQQ", len(rows), s1, s2))
    return out.hexdigest()


def test_reference_digest_equals_a_plain_python_implementation() -> None:
    rows = [
        {"id": 7, "age": 30.0, "kind": "A", "ok": "yes"},
        {"id": -7, "age": -0.0, "kind": " A ", "ok": "no"},  # −0 is 0; blanks stripped
        {"id": "007", "age": float("inf"), "kind": "Z", "ok": "maybe"},  # '007' is 7; undeclared
        {"id": "P-12", "age": None, "kind": None, "ok": None},
        {"id": 2**62, "age": 2.5, "kind": "7.0", "ok": "TRUE"},  # '7.0' is the integer 7
        {"id": "99999999999999999999", "age": 1e-320, "kind": "2.50", "ok": "false"},
        {"id": 1.5, "age": " abc ", "kind": "", "ok": "2"},  # text in a numeric column
    ]
    schema = Schema(
        (
            Column("id", ColumnKind.IDENTIFIER),
            Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),
            Column("kind", ColumnKind.CATEGORICAL, MissingRule(), categories=("A", "B")),
            Column("ok", ColumnKind.BOOLEAN, MissingRule(MissingAction.REPLACE, False)),
        )
    )
    frame = pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=object) for c in rows[0]})
    got = table_digest(frame, schema)
    assert got.rows == len(rows)
    assert got.hexdigest == plain_digest(rows, list(schema.names))
    # and the order of rows does not matter, while one more row does
    assert table_digest(frame.iloc[::-1].reset_index(drop=True), schema).hexdigest == got.hexdigest
    assert table_digest(pd.concat([frame, frame.iloc[:1]], ignore_index=True), schema).hexdigest != got.hexdigest


def test_murmur_is_duckdbs_hash_of_an_integer() -> None:
    """M is DuckDB's hash() of a 64-bit integer (the values DuckDB 2.0 returned for
    hash(1::UBIGINT) and hash(18::UBIGINT), checked when the digest was written)."""
    assert int(dg.murmur(np.asarray([1, 18], dtype=np.uint64))[0]) == 4717996019076358352 == murmur(1)
    assert murmur(18) == 2159322014455406237
