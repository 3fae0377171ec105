"""Print (not assert) where the server's time goes in the runs a browser waits for.

Run: ``python tests/benchmarks/profile_served.py [--root DIR] [--out DIR] [--top N] [--cpu | --time-only] [--direct] [--no-wait]``
(``--direct``: the Release page is opened first, not reached from the Accuracy page; ``--no-wait``: the
confirmation is opened as soon as the budget is shown, without waiting 1.5 s for the backend to open).

The app is served as the README says (``python serve.py``), with every script run of
Streamlit's script thread (a full run, a fragment run, a dialog's run) under ``cProfile``
(``ScriptRunner._run_script`` wrapped; its stats written one file per run; with ``--cpu`` the
profile's clock is the script thread's CPU time, which a loaded machine does not inflate,
but which leaves out the threads DuckDB computes in; with ``--time-only`` no profiler runs and
only each run's wall and CPU seconds are printed). Headless
Chromium (Playwright) then plans on the Accuracy page, opens the Release page through the
navigation, sets a lifetime budget, confirms the release, and switches between the main
pages; every WebSocket frame the browser receives is timed with the browser's clock (a
wrapper installed before the page's own code runs). For each timed action it prints the
action's wall time (browser clock, from the action until the last frame of its runs), the
frames and bytes received, each server run's wall and CPU seconds (the script thread's, and
the whole server process's over the run: DuckDB's threads, the event loop), and the functions with
the largest cumulative time in those runs (``--top``). Nothing is asserted.
"""

from __future__ import annotations

import json
import os
import pstats
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_app import IDLE, _chromium, _drawn, _free_port, _healthy

#: Runs inside the served process: every script run profiled, one stats file per run.
LAUNCHER = r'''
import cProfile, json, os, sys, time, threading
from pathlib import Path
from streamlit.runtime.scriptrunner import script_runner as _sr

OUT = Path(os.environ["PROFILE_OUT"])
_orig = _sr.ScriptRunner._run_script
_n = [0]

def _run_script(self, rerun_data):
    _n[0] += 1
    n = _n[0]
    # PROFILE_CLOCK=cpu: the script thread's CPU time (what a loaded machine does not inflate)
    # PROFILE_CLOCK=off: the runs timed only, no profiler
    clock = os.environ.get("PROFILE_CLOCK")
    prof = None if clock == "off" else cProfile.Profile(time.thread_time) if clock == "cpu" else cProfile.Profile()
    t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    if prof is not None:
        prof.enable()
    try:
        return _orig(self, rerun_data)
    finally:
        wall, cpu, pcpu = time.perf_counter() - t0, time.thread_time() - c0, time.process_time() - p0
        if prof is not None:
            prof.disable()
            prof.dump_stats(str(OUT / f"run{n:03d}.prof"))
        with open(OUT / "runs.jsonl", "a") as f:
            f.write(json.dumps({"n": n, "end": time.time(), "wall": wall, "cpu": cpu, "process_cpu": pcpu,
                                "fragment": bool(rerun_data.fragment_id_queue),
                                "page": rerun_data.page_script_hash or ""}) + "\n")

_sr.ScriptRunner._run_script = _run_script
sys.argv = ["serve.py", *sys.argv[1:]]
sys.path.insert(0, os.getcwd())
import runpy
runpy.run_path("serve.py", run_name="__main__")
'''

#: Every WebSocket message the page receives, with the browser's clock and its size.
FRAMES = """() => {
  window.__frames = [];
  const Orig = window.WebSocket;
  window.WebSocket = function (...a) {
    const ws = new Orig(...a);
    ws.addEventListener('message', ev => {
      const n = ev.data instanceof ArrayBuffer ? ev.data.byteLength : (ev.data.size || ev.data.length || 0);
      window.__frames.push([performance.now(), n]);
    });
    return ws;
  };
  window.WebSocket.prototype = Orig.prototype;
  Object.assign(window.WebSocket, Orig);
}"""


def _serve(root: Path, home: str, out: Path) -> tuple[subprocess.Popen[bytes], str]:

    port = _free_port()
    launcher = Path(home) / "launch_profiled.py"
    launcher.write_text(LAUNCHER)
    env = dict(os.environ, PLANNER_HOME=home, PLANNER_LEDGER_URL=f"sqlite:///{home}/l.db", PYTHONPATH=str(root),
               PROFILE_OUT=str(out))
    proc = subprocess.Popen(
        [sys.executable, str(launcher), "--server.headless", "true", "--server.address", "127.0.0.1",
         "--server.port", str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=open(Path(home) / "server.err", "wb"))
    return proc, _healthy(port)


def _runs(out: Path) -> list[dict[str, Any]]:
    p = out / "runs.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def _settle(pg: Any) -> None:
    pg.wait_for_timeout(400)
    pg.wait_for_selector(IDLE, timeout=120_000)
    pg.wait_for_timeout(600)  # the runs' stats are written after the run ends


def timed(pg: Any, out: Path, label: str, action: Any, wait: Any) -> dict[str, Any]:
    """Do ``action``, wait with ``wait``; the action's frames and server runs."""
    _settle(pg)
    seen = len(_runs(out))
    t0 = float(pg.evaluate("() => performance.now()"))
    action()
    wait()
    t_shown = float(pg.evaluate("() => performance.now()"))
    _settle(pg)
    frames = pg.evaluate("t0 => window.__frames.filter(f => f[0] > t0)", t0)
    runs = _runs(out)[seen:]
    last = max((f[0] for f in frames), default=t0)
    return {"label": label, "shown_s": (t_shown - t0) / 1000, "last_frame_s": (last - t0) / 1000,
            "frames": len(frames), "bytes": sum(f[1] for f in frames), "runs": runs}


def drive(url: str, out: Path, direct: bool = False) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    got: list[dict[str, Any]] = []
    with sync_playwright() as p:
        b = _chromium(p)
        pg = b.new_page(viewport={"width": 1400, "height": 1000})
        pg.add_init_script(f"({FRAMES})()")
        nav = pg.get_by_test_id("stSidebarNav")

        def go(name: str) -> Any:
            return lambda: nav.get_by_role("link", name=name).click()

        def heading(name: str) -> Any:
            return lambda: pg.get_by_role("heading", name=name, level=1).wait_for(timeout=120_000)

        if direct:  # the Release page opened first, as bench_app's browser_release does
            pg.goto(f"{url}/release")
            _drawn(pg)
        else:
            pg.goto(f"{url}/accuracy")
            _drawn(pg)
            pg.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=120_000)

        if not direct:
            got.append(timed(pg, out, "switch Accuracy -> Release", go("Release"), heading("Release")))
        box = pg.get_by_label("Lifetime ε (all releases together)", exact=True)
        box.fill("2")
        box.press("Enter")
        _settle(pg)
        pg.get_by_role("button", name="Set the lifetime budget").click()
        pg.get_by_text("Remaining afterwards").wait_for(timeout=120_000)
        _settle(pg)
        if "--no-wait" not in sys.argv:
            pg.wait_for_timeout(1500)  # the backend's open (started by the page) has finished
        got.append(timed(pg, out, "open the confirmation", lambda: pg.get_by_role("button", name="Release…").click(),
                         lambda: pg.get_by_role("dialog").get_by_text("This spends").wait_for(timeout=120_000)))

        def answers() -> None:
            pg.get_by_text(re.compile(r"Released \(release #\d+\)")).wait_for(timeout=120_000)
            pg.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=120_000)
        got.append(timed(pg, out, "confirm release -> answers",
                         lambda: pg.get_by_role("dialog").get_by_role("button", name="Confirm release").click(), answers))
        for a, bname in (("Release", "Ledger"), ("Ledger", "Data"), ("Data", "Queries"), ("Queries", "Accuracy"),
                         ("Accuracy", "Planner"), ("Planner", "Release"), ("Release", "Data"), ("Data", "Release")):
            got.append(timed(pg, out, f"switch {a} -> {bname}", go(bname), heading(bname)))
        b.close()
    return got


def report(got: list[dict[str, Any]], out: Path, top: int) -> None:
    for g in got:
        print(f"\n## {g['label']}: shown {g['shown_s']:.3f} s, last frame {g['last_frame_s']:.3f} s, "
              f"{g['frames']} frames / {g['bytes'] / 1024:.1f} KB")
        for r in g["runs"]:
            print(f"#   server run {r['n']}: {'fragment' if r['fragment'] else 'full'} wall {r['wall']:.3f} s "
                  f"CPU {r['cpu']:.3f} s (process {r.get('process_cpu', float('nan')):.3f} s)")
        files = [str(out / f"run{r['n']:03d}.prof") for r in g["runs"]]
        if not files or top <= 0:
            continue
        st = pstats.Stats(*files)
        st.sort_stats("cumulative")
        rows = []
        for func, (_cc, _nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
            fname, line, name = func
            if "/planner/" in fname or "/pages/" in fname or "app.py" in fname or "altair" in fname \
                    or name in ("collect", "_run_script", "marshall", "_enqueue_forward_msg", "to_dict",
                                "altair_chart", "dataframe", "validate"):
                rows.append((ct, tt, f"{Path(fname).parent.name}/{Path(fname).name}:{line}({name})"))
        for ct, tt, where in sorted(rows, reverse=True)[:top]:
            print(f"#     {ct:7.3f} s cum {tt:7.3f} s own  {where}")


def main(argv: list[str]) -> int:
    root = Path(argv[argv.index("--root") + 1]).resolve() if "--root" in argv else Path(__file__).resolve().parents[2]
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 25
    if "--cpu" in argv:  # the profiles count the script thread's CPU time, not wall time
        os.environ["PROFILE_CLOCK"] = "cpu"
    if "--time-only" in argv:  # no profiler: each run's wall and CPU seconds only
        os.environ["PROFILE_CLOCK"] = "off"
        top = 0
    home = tempfile.mkdtemp()
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else Path(home) / "prof"
    out.mkdir(parents=True, exist_ok=True)
    print(f"# root {root}; machine load (1 min) {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; stats in {out}")
    proc, url = _serve(root, home, out)
    try:
        got = drive(url, out, direct="--direct" in argv)
    finally:
        proc.terminate()
        proc.wait()
    report(got, out, top)
    print(f"# machine load (1 min) at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
