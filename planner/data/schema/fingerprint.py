"""The fingerprint of a data file: the sha256 of its bytes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from planner.core.errors import DataError


def dataset_fingerprint(path_or_bytes: str | os.PathLike[str] | bytes) -> str:
    """sha256 hex digest of the file's bytes (the ledger's dataset key).

    Examples
    --------
    >>> dataset_fingerprint(b"a,b\\n1,2\\n")[:12]
    '492d5ea49605'
    """
    h = hashlib.sha256()
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        h.update(path_or_bytes)
        return h.hexdigest()
    try:
        with open(path_or_bytes, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise DataError(
            f"cannot read {Path(path_or_bytes).name!r} to fingerprint it ({exc.strerror}); "
            "check the path."
        ) from exc
    return h.hexdigest()
