"""The content digest of a table: an order-free hash of its declared cells, computed in the scan.

The ledger keys a budget to a dataset. A hash of the file's bytes changes when the same
table is saved with other line endings, in another row order, as Parquet instead of CSV,
or with an extra column, and reading the file once more only to hash it is a pass of its
own. The content digest is instead computed by every backend inside the aggregate scan
(:meth:`~planner.data.backends.base.Backend.content_digest`) and is identical across pandas,
DuckDB and Spark for the same table.

Construction (version 1)
------------------------
1. Every declared cell becomes one or two 64-bit **words**, a function of its
   *normalised* value only (the value the cell-reading rules of
   :mod:`planner.data.backends.base` give it). T_* are fixed tag constants, ⊕ is xor.

   ========================================  ==========================================
   cell                                      word(s)
   ========================================  ==========================================
   numeric column: a number x (±inf too;     ``bits(x)`` (IEEE-754; −0 as +0), ``0``
   an integer column is read as a double)
   numeric column: missing (NULL, NaN,       ``bits(0.0)``, ``T_MISS``
   empty, blank, NA tokens)
   numeric column: text t that is no         ``bits(0.0)``, ``md5₆₄(t) ⊕ T_TXT``
   number (stripped)
   any other column: missing                 ``T_MISS``
   boolean column: a token (0 / 1)           ``b ⊕ T_BOOL``
   otherwise an integer k, |k| < 2⁶³         ``k ⊕ T_INT`` ("+007", 7, 7.0 → 7; exact)
   (canonical value)
   otherwise another number x                ``bits(x) ⊕ T_FLT``
   otherwise text t (stripped; an integer    ``md5₆₄(t) ⊕ T_TXT``
   beyond 2⁶³ as its canonical digits)
   ========================================  ==========================================

   md5₆₄(t) is the first 8 bytes of the md5 of the UTF-8 text, big-endian.
2. Every row gets a 64-bit **row hash** of its words, the declared columns taken in
   the order of their sorted names: with M the MurmurHash3 64-bit finaliser variant
   ``x ⊕= x ≫ 32; x ·= C; x ⊕= x ≫ 32; x ·= C; x ⊕= x ≫ 32`` (C = 0xd6e8feb86659fd93,
   arithmetic mod 2⁶⁴), ``h = M(w₀)`` then ``h = ((h ⊕ (h ≫ 32))·C) ⊕ M(wᵢ)`` for each
   next word. (This is DuckDB's ``hash(w₀, w₁, …)``: the DuckDB backend computes it with
   that function after checking that it still is, else with the arithmetic.)
3. Two lane sums over the rows, ``S₁ = Σ h`` and ``S₂ = Σ M(h ⊕ K)`` mod 2⁶⁴; the digest
   is SHA-256 over the version, the sorted declared names, the row count, S₁ and S₂.

Properties (each is a test in ``tests/engine/test_backends_conformance.py``):

* identical in every backend: integer arithmetic mod 2⁶⁴, IEEE bits and md5;
* invariant to row order (sums), to line endings, a missing final newline, CSV versus
  Parquet holding the same typed values (words depend on normalised values only), to the
  order and presence of undeclared columns (only declared names enter);
* changes when one declared cell changes, deterministically: distinct normalised values
  have distinct words (up to an md5₆₄ collision of two texts), and M and the combining
  step are bijections of one word given the others, so h changes, hence S₁ and S₂. A
  change of the row count changes the final hash. Changes of several rows at once
  cancel in both sums only by a 64-bit coincidence.

The digest is **private**: it is a function of the data, so anyone holding it can test a
guess about a cell. It never leaves the process; :class:`ContentDigest` hides it from
``repr``. Whatever is stored or exported must be a keyed hash (HMAC) of it.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from planner.data.backends.cells import _INT, _NUMBER

U64 = npt.NDArray[np.uint64]

VERSION: Final[int] = 1
MASK64: Final[int] = (1 << 64) - 1
#: The multiplier of DuckDB's MurmurHash64 and of its hash-combining step.
MURMUR: Final[int] = 0xD6E8FEB86659FD93


def _const(label: str) -> int:
    return int.from_bytes(hashlib.md5(f"planner-digest-v{VERSION}:{label}".encode()).digest()[:8], "big")


T_MISS: Final[int] = _const("missing")
T_BOOL: Final[int] = _const("boolean")
T_INT: Final[int] = _const("integer")
T_FLT: Final[int] = _const("float")
T_TXT: Final[int] = _const("text")
#: xor-ed into the row hash before the second lane's M
K_LANE2: Final[int] = _const("lane2")


def md5_64(text: str) -> int:
    """The first 8 bytes of md5(UTF-8 text), big-endian."""
    return int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "big")


def double_bits(x: npt.NDArray[np.float64]) -> U64:
    """IEEE-754 bits of doubles (−0 as +0), as unsigned 64-bit integers."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64) + 0.0).view(np.uint64)


def number_words(x: npt.NDArray[np.float64]) -> U64:
    """Words of numbers in a categorical / identifier column (NaN: missing): ``k ⊕ T_INT``
    for integers below 2⁵³, else ``bits(x) ⊕ T_FLT``."""
    x = np.asarray(x, dtype=np.float64)
    out = double_bits(x) ^ np.uint64(T_FLT)
    intlike = np.isfinite(x) & (np.abs(x) < 2.0**53)
    intlike[intlike] = x[intlike] == np.floor(x[intlike])
    ints = np.where(intlike, x, 0.0).astype(np.int64)
    out[intlike] = ints[intlike].view(np.uint64) ^ np.uint64(T_INT)
    out[np.isnan(x)] = np.uint64(T_MISS)
    return out


def text_word(text: str | None) -> int:
    """The word of one stripped text cell read by its canonical value (an integer,
    another number, or text), as in categorical and identifier columns."""
    if text is None or text == "":
        return T_MISS
    if _INT.match(text):
        k = int(text)
        if -(1 << 63) <= k < (1 << 63):
            return (k & MASK64) ^ T_INT
        return md5_64(str(k)) ^ T_TXT
    if _NUMBER.match(text):
        return int(number_words(np.asarray([float(text)], dtype=np.float64))[0])
    return md5_64(text) ^ T_TXT


def murmur(x: U64) -> U64:
    """M, elementwise (wrapping uint64 arithmetic)."""
    x = np.asarray(x, dtype=np.uint64).copy()
    x ^= x >> np.uint64(32)
    x *= np.uint64(MURMUR)
    x ^= x >> np.uint64(32)
    x *= np.uint64(MURMUR)
    x ^= x >> np.uint64(32)
    return x


def row_hashes(words: Sequence[U64]) -> U64:
    """The row hash of per-row words (in order): ``M(w₀)``, then the combining step."""
    h = murmur(words[0])
    for w in words[1:]:
        h = ((h ^ (h >> np.uint64(32))) * np.uint64(MURMUR)) ^ murmur(w)
    return h


def lane_sums(h: U64) -> tuple[int, int]:
    """S₁ = Σ h and S₂ = Σ M(h ⊕ K) mod 2⁶⁴."""
    if h.size == 0:
        return 0, 0
    s2 = murmur(h ^ np.uint64(K_LANE2))
    return int(h.sum(dtype=np.uint64)), int(s2.sum(dtype=np.uint64))


def finish(names: Sequence[str], rows: int, s1: int, s2: int) -> ContentDigest:
    """The digest of a table from its row count and lane sums (see the module docstring)."""
    h = hashlib.sha256()
    h.update(f"planner-content-digest-v{VERSION}\x00".encode())
    for name in sorted(names):
        h.update(name.encode("utf-8") + b"\x00")
    h.update(struct.pack(">QQQ", rows, s1 & MASK64, s2 & MASK64))
    return ContentDigest(rows, h.hexdigest())


@dataclass(frozen=True, slots=True)
class ContentDigest:
    """Row count and hex digest of a table's declared content (PRIVATE: never exported).

    ``hexdigest`` is 64 hex characters; it is left out of ``repr`` so that it cannot end
    up in a log or a traceback by accident. Store or export only a keyed hash of it.
    """

    rows: int
    hexdigest: str = field(repr=False)


__all__ = [
    "K_LANE2",
    "MASK64",
    "MURMUR",
    "T_BOOL",
    "T_FLT",
    "T_INT",
    "T_MISS",
    "T_TXT",
    "VERSION",
    "ContentDigest",
    "double_bits",
    "finish",
    "lane_sums",
    "md5_64",
    "murmur",
    "number_words",
    "row_hashes",
    "text_word",
]
