"""Strict, bounded reading of the JSON documents users give the engine (plan and
mechanism specs), and strict typing of the numbers in them and in budget values.

One definition of each input limit lives here:

=====================  ==========================================================
limit                  value and reason
=====================  ==========================================================
file type              regular files only: a FIFO, a device (``/dev/zero``), a
                       socket or a directory is refused *before* anything is read
                       (opened with ``O_NONBLOCK``, checked with ``fstat``).
size                   :data:`MAX_SPEC_BYTES` (4 MiB); larger files are refused
                       after reading at most one byte past the cap.
encoding               UTF-8 (a leading BOM is tolerated); anything else is
                       refused with the byte offset of the first bad byte, and so
                       is a JSON escape of half a UTF-16 pair (no UTF-8 holds it).
nesting depth          :data:`MAX_DEPTH` (64) arrays/objects, checked by a linear
                       scan before parsing (so no ``RecursionError``).
duplicate keys         refused (the second value would silently win).
non-finite numbers     ``NaN``, ``Infinity`` and overflowing literals (``1e400``)
                       are refused.
magnitude              every number must satisfy ``|x| ≤ 2**53`` (
                       :data:`MAX_MAGNITUDE`): beyond it float64 no longer holds
                       whole numbers exactly, sums over rows overflow sooner and
                       no privacy parameter or bound is meaningful.
ε                      ``0 < ε ≤`` :data:`MAX_EPSILON` (1000): ``e^ε`` overflows a
                       float above 709, and an ε above a few tens already offers
                       no protection.
number type            a number field holds a JSON number: ``true`` or ``"1"`` is
                       refused, never converted.
=====================  ==========================================================

Every error names the field, the constraint, the *class* of the value found (never a
private value: specs are public, but the same helpers read budget values typed in
pages) and the remedy.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TypeAlias

from planner.core.errors import InputLimitError, PlannerError

__all__ = [
    "JSON",
    "MAX_DEPTH",
    "MAX_EPSILON",
    "MAX_MAGNITUDE",
    "MAX_SPEC_BYTES",
    "check_depth",
    "loads_strict",
    "read_json_file",
    "read_regular_file",
    "strict_delta",
    "strict_epsilon",
    "strict_int",
    "strict_number",
    "value_class",
]

JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
"""A JSON value (answers as stored and exported, plan files as read)."""

#: Largest spec file read (bytes).
MAX_SPEC_BYTES: Final = 4 * 1024 * 1024
#: Deepest nesting of arrays and objects accepted.
MAX_DEPTH: Final = 64
#: Largest magnitude of any number in a spec: 2**53, the last integer float64 holds exactly.
MAX_MAGNITUDE: Final = float(2**53)
#: Largest ε accepted anywhere a budget is typed or read.
MAX_EPSILON: Final = 1000.0


def value_class(value: Any) -> str:
    """A description of ``value``'s class that never shows a private value.

    Examples
    --------
    >>> value_class(True), value_class("1"), value_class(1e400), value_class(None)
    ('a boolean', 'a string', 'an infinite number', 'null')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a whole number too large" if abs(value) > MAX_MAGNITUDE else "a whole number"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "an infinite number"
        return "a number too large" if abs(value) > MAX_MAGNITUDE else "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


# --------------------------------------------------------------------------- files


def read_regular_file(
    path: str | os.PathLike[str],
    what: str,
    *,
    max_bytes: int = MAX_SPEC_BYTES,
    error: type[PlannerError] = InputLimitError,
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; refuse anything else unread.

    The file is opened with ``O_NONBLOCK`` (so opening a FIFO does not wait for a
    writer) and checked with ``fstat`` on the open descriptor (so a swap between check
    and read cannot slip a device in); at most ``max_bytes + 1`` bytes are read.

    Raises
    ------
    error
        Missing or unreadable file, not a regular file, or larger than ``max_bytes``.
    """
    name = Path(path).name or str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise error(f"cannot open the {what} file {name!r}: {reason}. Check the path.") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a directory" if stat.S_ISDIR(st.st_mode)
                else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "not a regular file"
            )
            raise error(
                f"the {what} file {name!r} is {kind}, not a regular file; it was not read. "
                "Give the path of a regular JSON file."
            )
        if st.st_size > max_bytes:
            raise error(
                f"the {what} file {name!r} has {st.st_size} bytes; at most {max_bytes} are "
                "accepted. A spec this large is not a plan: check the file."
            )
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            try:
                block = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            except OSError as exc:
                raise error(
                    f"cannot read the {what} file {name!r}: {exc.strerror or type(exc).__name__}."
                ) from exc
            if not block:
                break
            chunks.append(block)
            total += len(block)
        if total > max_bytes:
            raise error(
                f"the {what} file {name!r} grew past {max_bytes} bytes while being read; "
                "at most that many are accepted."
            )
        return b"".join(chunks)
    finally:
        os.close(fd)


def _decode(raw: bytes, what: str, name: str, error: type[PlannerError]) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"the {what} file {name!r} is not UTF-8 text (byte {exc.start} cannot be decoded). "
            "Save it as UTF-8."
        ) from exc


# --------------------------------------------------------------------------- parsing


def check_depth(text: str, what: str, *, max_depth: int = MAX_DEPTH,
                error: type[PlannerError] = InputLimitError) -> None:
    """Refuse JSON text nesting arrays/objects deeper than ``max_depth`` (a linear scan,
    strings skipped), before the recursive parser could exhaust the stack."""
    depth = 0
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                raise error(
                    f"the {what} nests arrays/objects more than {max_depth} levels deep; "
                    "a plan needs a handful. Flatten the document."
                )
        elif ch in "]}":
            depth -= 1


def _reject_constant(token: str) -> Any:
    raise _NonFinite(token)


class _NonFinite(ValueError):
    pass


class _Duplicate(ValueError):
    pass


class _TooLarge(ValueError):
    pass


def _parse_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _TooLarge(token)
    return value


def _parse_int(token: str) -> int | float:
    # Python refuses int() of more than 4300 digits with a ValueError; anything
    # past 2**53 is refused later by the magnitude walk, so keep the digits short.
    digits = token.lstrip("-")
    if len(digits) > 20:
        raise _TooLarge(token)
    return int(token)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _check_text(s: str, at: str, what: str, error: type[PlannerError]) -> None:
    """Refuse a string holding half of a UTF-16 pair (the JSON escape "\\ud83d" alone): it
    parses, but no UTF-8 file, hash or database can hold it, so it would fail later."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(
            f"field {at or '(top level)'!r} in the {what} holds an unpaired UTF-16 surrogate (a \\u escape "
            f"of half a character, at position {exc.start}); write the character itself, or both halves of its pair."
        ) from None


def _walk_magnitudes(value: Any, where: str, what: str, error: type[PlannerError]) -> None:
    stack: list[tuple[Any, str]] = [(value, where)]

    def join(at: str, key: str) -> str:
        return key if not at else f"{at}.{key}"

    while stack:
        v, at = stack.pop()
        if isinstance(v, str):
            _check_text(v, at, what, error)
            continue
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, (int, float)):
            if abs(v) > MAX_MAGNITUDE:
                raise error(
                    f"field {at or '(top level)'!r} in the {what} is {value_class(v)}: numbers must lie within "
                    f"±2**53 (±{MAX_MAGNITUDE:.4g}). Use a realistic bound or parameter."
                )
            continue
        if isinstance(v, dict):
            for k in v:
                _check_text(k, join(at, "(a key)"), what, error)
            stack.extend((item, join(at, str(k))) for k, item in v.items())
        elif isinstance(v, list):
            stack.extend((item, f"{at}[{i}]") for i, item in enumerate(v))


def loads_strict(
    text: str, what: str, *, max_depth: int = MAX_DEPTH, error: type[PlannerError] = InputLimitError
) -> Any:
    """Parse JSON text strictly: bounded depth, no duplicate keys, finite numbers within
    ±2**53, text that UTF-8 can hold (no unpaired surrogate); a leading BOM is dropped.

    Examples
    --------
    >>> loads_strict('{"epsilon": 1.0}', "plan")
    {'epsilon': 1.0}
    >>> loads_strict('{"epsilon": NaN}', "plan")
    Traceback (most recent call last):
    ...
    planner.core.errors.InputLimitError: the plan holds a non-finite number (NaN); use a finite number.
    """
    text = text.removeprefix("\ufeff")  # a byte-order mark (Windows editors write one), as on disk
    check_depth(text, what, max_depth=max_depth, error=error)
    try:
        data = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
            object_pairs_hook=_pairs,
        )
    except _NonFinite as exc:
        raise error(f"the {what} holds a non-finite number ({exc}); use a finite number.") from None
    except _TooLarge as exc:
        raise error(
            f"the {what} holds a number written with {len(str(exc))} characters that lies beyond "
            f"±2**53 (±{MAX_MAGNITUDE:.4g}); use a realistic bound or parameter."
        ) from None
    except _Duplicate as exc:
        raise error(
            f"the {what} has the key {str(exc)!r} twice in one object; JSON readers disagree on "
            "which value wins. Keep one."
        ) from None
    except json.JSONDecodeError as exc:
        raise error(
            f"the {what} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}."
        ) from None
    except RecursionError:  # pragma: no cover - check_depth runs first
        raise error(f"the {what} nests too deeply; flatten it.") from None
    _walk_magnitudes(data, "", what, error)
    return data


def read_json_file(
    path: str | os.PathLike[str],
    what: str,
    *,
    max_bytes: int = MAX_SPEC_BYTES,
    max_depth: int = MAX_DEPTH,
    error: type[PlannerError] = InputLimitError,
) -> Any:
    """Read a JSON spec file under every limit in the module docstring."""
    name = Path(path).name or str(path)
    raw = read_regular_file(path, what, max_bytes=max_bytes, error=error)
    text = _decode(raw, what, name, error)
    return loads_strict(text, f"{what} file {name!r}", max_depth=max_depth, error=error)


# --------------------------------------------------------------------------- numbers


def strict_number(
    value: Any,
    name: str,
    *,
    error: type[PlannerError] = InputLimitError,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
    remedy: str = "",
) -> float:
    """``value`` as a float if it is a real number (not a bool, not a string) in range.

    Examples
    --------
    >>> strict_number(2, "weight", minimum=0)
    2.0
    >>> strict_number(True, "epsilon")
    Traceback (most recent call last):
    ...
    planner.core.errors.InputLimitError: epsilon must be a number; got a boolean. Write a number without quotes.
    """
    tail = f" {remedy}" if remedy else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"{name} must be a number; got {value_class(value)}. Write a number without quotes.{tail}")
    if isinstance(value, int) and abs(value) > MAX_MAGNITUDE:
        raise error(f"{name} must lie within ±2**53; got {value_class(value)}.{tail}")
    v = float(value)
    if not math.isfinite(v):
        raise error(f"{name} must be finite; got {value_class(v)}.{tail}")
    if abs(v) > MAX_MAGNITUDE:
        raise error(f"{name} must lie within ±2**53; got {value_class(v)}.{tail}")
    if minimum is not None and (v < minimum or (exclusive_minimum and v == minimum)):
        op = ">" if exclusive_minimum else "≥"
        raise error(f"{name} must be {op} {minimum:g}; got {v:g}.{tail}")
    if maximum is not None and (v > maximum or (exclusive_maximum and v == maximum)):
        op = "<" if exclusive_maximum else "≤"
        raise error(f"{name} must be {op} {maximum:g}; got {v:g}.{tail}")
    return v


def strict_int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None,
               error: type[PlannerError] = InputLimitError) -> int:
    """``value`` if it is a whole JSON number (not a bool, not a string, not 2.0) in range."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{name} must be a whole number; got {value_class(value)}.")
    if abs(value) > MAX_MAGNITUDE:
        raise error(f"{name} must lie within ±2**53; got {value_class(value)}.")
    if minimum is not None and value < minimum:
        raise error(f"{name} must be ≥ {minimum}; got {value}.")
    if maximum is not None and value > maximum:
        raise error(f"{name} must be ≤ {maximum}; got {value}.")
    return value


def strict_epsilon(value: Any, name: str = "epsilon", *, error: type[PlannerError] | None = None) -> float:
    """A privacy budget ε: a JSON number with ``0 < ε ≤ MAX_EPSILON``."""
    from planner.core.errors import BudgetError

    return strict_number(
        value, name, error=error or BudgetError, minimum=0.0, exclusive_minimum=True,
        maximum=MAX_EPSILON,
        remedy=f"Pick a positive privacy budget of at most {MAX_EPSILON:g}.",
    )


def strict_delta(value: Any, name: str = "delta", *, error: type[PlannerError] | None = None) -> float:
    """δ: a JSON number with ``0 ≤ δ < 1``."""
    from planner.core.errors import BudgetError

    return strict_number(
        value, name, error=error or BudgetError, minimum=0.0, maximum=1.0, exclusive_maximum=True,
        remedy="δ is a probability, usually far below 1/n (e.g. 1e-6).",
    )
