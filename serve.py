"""Start the dashboard: ``python serve.py [options]`` is ``streamlit run app.py [options]``
with the first page's modules imported before the server takes its first visitor.

A first visit to a freshly started ``streamlit run app.py`` waits for pandas, SQLAlchemy,
SQLModel and the engine to be imported (about 0.7 s of a 2.3 s first page on a 2-core
machine); here they are imported once, at start-up, in the server's own process, where every
session's script run finds them (``pages._ui.warmup.FIRST_PAGE``). Options are Streamlit's
(``--server.port 8502``, ``--server.address 0.0.0.0``); the configuration in
``.streamlit/config.toml`` applies as with ``streamlit run``.
"""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")


def main(argv: list[str]) -> int:
    from pages._ui.warmup import preload

    preload()
    from streamlit import delta_generator
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    # Streamlit warns once per process when its elements are used outside ``streamlit run``;
    # deciding that walks the first script run's whole stack with ``inspect`` (0.1 s of the
    # first page). This process is a ``streamlit run``, so the check is marked done.
    delta_generator._use_warning_has_been_displayed = True
    # With a pages/ folder beside app.py, Streamlit runs the first script run of the server's
    # first session as a version-1 multipage app (each pages/*.py a page) until app.py's
    # st.navigation switches that mode off, so a first visitor who opens a page's own URL
    # (a bookmark of /planner) gets "Page not found" over the right page (streamlit#9992).
    # This app always navigates with st.navigation: the mode is off from the start.
    PagesManager.uses_pages_directory = False

    sys.argv = ["streamlit", "run", str(APP), *argv]
    try:
        cli.main(prog_name="streamlit")
    except SystemExit as exc:  # click ends the process this way; keep its status
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
