"""Charts drawn to SVG offline, in a process of their own.

The report's charts are drawn by vl-convert (Vega and Vega-Lite compiled into a native
library). A native library can abort the whole process on input it does not expect — the
renderer did on a control character in a label — and inside the app's server that process
is everyone's. So drawing happens in one worker process (``python -m
planner.outputs.render``, started on first use and reused, fed JSON lines on a pipe):
if it dies, the report says its charts could not be drawn, the worker is started afresh
for the next report, and the server goes on.

Text is also made printable before it reaches the renderer (:func:`planner.core.names.shown`):
names are refused with control characters where they enter, but a data value (a category
label seen in a file) is kept as it is and is escaped here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

from planner.core.errors import PlannerError
from planner.core.names import shown

__all__ = ["printable", "render_svg", "render_svgs", "serve"]

#: How long one report's charts may take to draw.
TIMEOUT_SECONDS: Final = 120.0

_LOCK = threading.Lock()
_WORKER: list[subprocess.Popen[bytes]] = []


def printable(value: Any) -> Any:
    """``value`` (a JSON-like specification) with every string made printable."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, Mapping):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable(v) for v in value]
    return value


def _draw(specs: list[dict[str, Any]]) -> list[str]:
    """In the worker: each specification drawn, or an error marker per failed one."""
    import vl_convert as vlc

    out = []
    for spec in specs:
        try:
            svg = str(vlc.vegalite_to_svg(spec))
            out.append(svg[svg.index("<svg"):] if "<svg" in svg else svg)
        except Exception as exc:  # vl-convert raises ValueError with the Vega message
            out.append(f"\x00error:{type(exc).__name__}")
    return out


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The worker's loop: one JSON list of specifications per line in, one JSON list of
    drawings per line out (``python -m planner.outputs.render``)."""
    for line in stdin:
        stdout.write(json.dumps(_draw(json.loads(line))).encode() + b"\n")
        stdout.flush()


def _worker() -> subprocess.Popen[bytes]:
    if not _WORKER or _WORKER[0].poll() is not None:
        _WORKER.clear()
        # the worker imports this very planner (not whichever one its sys.path finds first)
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
        _WORKER.append(subprocess.Popen([sys.executable, "-m", "planner.outputs.render"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env))
    return _WORKER[0]


def _reset() -> None:
    if _WORKER:
        w = _WORKER.pop()
        w.kill()
        w.wait()


def _ask(specs: list[dict[str, Any]]) -> list[str]:
    w = _worker()
    assert w.stdin is not None and w.stdout is not None
    result: list[bytes] = []

    def read() -> None:
        assert w.stdout is not None
        result.append(w.stdout.readline())

    w.stdin.write(json.dumps(specs).encode() + b"\n")
    w.stdin.flush()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(TIMEOUT_SECONDS)
    if reader.is_alive():
        raise TimeoutError
    if not result or not result[0]:
        raise BrokenPipeError
    drawn: list[str] = json.loads(result[0])
    return drawn


def render_svgs(specs: Sequence[Mapping[str, Any]]) -> list[str]:
    """SVG drawings of Vega-Lite specifications, drawn in the renderer's own process.

    Raises
    ------
    PlannerError
        vl-convert is not installed, a specification cannot be drawn, or the renderer
        stopped (it is restarted for the next call; nothing else is affected).
    """
    try:
        import vl_convert  # noqa: F401  (installed? the worker imports it again)
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise PlannerError("the report's charts need vl-convert-python (pip install vl-convert-python).") from exc
    clean = [printable(dict(s)) for s in specs]
    with _LOCK:
        try:
            drawn = _ask(clean)
        except (BrokenPipeError, OSError, ValueError):
            _reset()
            raise PlannerError(
                "the report's charts could not be drawn: the chart renderer stopped (it is started afresh "
                "for the next report; nothing else was affected)."
            ) from None
        except TimeoutError:
            _reset()
            raise PlannerError(f"the report's charts took longer than {TIMEOUT_SECONDS:g} s to draw.") from None
    for svg in drawn:
        if svg.startswith("\x00error:"):
            raise PlannerError(f"a chart of the report could not be drawn ({svg[7:]}).")
    return drawn


def render_svg(spec: Mapping[str, Any]) -> str:
    """One specification drawn (:func:`render_svgs`)."""
    return render_svgs([spec])[0]


if __name__ == "__main__":  # the worker process
    serve(sys.stdin.buffer, sys.stdout.buffer)
