"""Test-wide settings: a private PLANNER_HOME so the server secret and the ledgers'
integrity markers of a test run never land in the user's real home.

``.ci/run`` sets PLANNER_HOME to a fresh directory already; a developer's run gets one
per session here (unless PLANNER_HOME is set, which is then honoured).
"""

from __future__ import annotations

import os
import tempfile

if not os.environ.get("PLANNER_HOME", "").strip():
    os.environ["PLANNER_HOME"] = tempfile.mkdtemp(prefix="planner-home-")
