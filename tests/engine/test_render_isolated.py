"""The report's charts are drawn in a worker process of their own (issue 27: a control
character in a name made the native chart renderer abort the whole server process).

Names with control characters are refused where they enter (planner.core.names); data
values in a chart are escaped; and whatever still kills the renderer kills only its worker.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from planner.core.errors import PlannerError
from planner.outputs import render

SPEC = {"data": {"values": [{"a": "x", "b": 1}]}, "mark": "bar",
        "encoding": {"x": {"field": "a", "type": "nominal"}, "y": {"field": "b", "type": "quantitative"}}}


def test_render_escapes_unprintable_text_before_the_renderer_sees_it() -> None:
    hostile = {**SPEC, "data": {"values": [{"a": "x\x00y\x1bz\x0c\ufffe", "b": 1}]}}
    svg = render.render_svg(hostile)
    assert svg.startswith("<svg") and "\\u0000" in svg and "\x00" not in svg


def test_render_a_dead_renderer_is_a_message_and_is_replaced() -> None:
    render.render_svg(SPEC)  # the worker is up
    worker = render._WORKER[0]

    def kill_soon() -> None:
        time.sleep(0.05)
        os.kill(worker.pid, signal.SIGABRT)  # what a native panic does

    big = [SPEC] * 400  # long enough to be killed while drawing
    threading.Thread(target=kill_soon).start()
    with pytest.raises(PlannerError, match="renderer stopped"):
        render.render_svgs(big)
    # this process lives on, and the next report gets a new renderer
    assert render.render_svg(SPEC).startswith("<svg")
    assert render._WORKER[0].pid != worker.pid
