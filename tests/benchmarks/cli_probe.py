"""Run ``planner`` under a probe that reports its start-up (used by ``bench_backends.py``).

    python tests/benchmarks/cli_probe.py REPORT.json release --spec ... --data ...

Writes ``{"first_scan": t, "first_scan_cpu": c, "fingerprint_s": s, "modules_at_first_read": [...]}``
to REPORT.json: the wall-clock time (``time.time()``) of the first statement that reads the
data (DuckDB / Spark: the first SQL naming the source view; pandas: the loader), the
process's CPU seconds until then (``time.process_time()``, the interpreter's start included), the
seconds spent fingerprinting files (a pass over the file's bytes), and the names in
``sys.modules`` at that first statement (``tests/engine/test_cli_startup_imports.py``
checks that no heavy library is among them). Modules are patched as they are imported (a
meta-path hook), so the probe imports nothing the command would not import itself.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("BENCH_PLANNER_ROOT") or Path(__file__).resolve().parents[2]).resolve()
STATE: dict[str, Any] = {"first_scan": None, "first_scan_cpu": None, "fingerprint_s": 0.0,
                         "modules_at_first_read": None}


def _mark() -> None:
    if STATE["first_scan"] is None:
        STATE["first_scan"] = time.time()
        # CPU seconds of the process so far (every thread): start-up's work, which other
        # jobs on the machine do not inflate as they inflate its wall time
        STATE["first_scan_cpu"] = time.process_time()
        STATE["modules_at_first_read"] = sorted(sys.modules)


def _patch(name: str, module: Any) -> None:
    if name == "planner.data.backends.sql":
        run_sql = module.SqlBackend._run_sql

        def _run_sql(self: Any, sql: str, params: Any) -> Any:
            if getattr(self, "_src", "\x00") in sql:
                _mark()
            return run_sql(self, sql, params)

        module.SqlBackend._run_sql = _run_sql
    elif name == "planner.data.loader":
        load_table = module.load_table

        def _load_table(*a: Any, **k: Any) -> Any:
            _mark()
            return load_table(*a, **k)

        module.load_table = _load_table
    elif name == "planner.data.schema":
        fingerprint = module.dataset_fingerprint

        def _fingerprint(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fingerprint(*a, **k)
            finally:
                STATE["fingerprint_s"] += time.perf_counter() - t

        module.dataset_fingerprint = _fingerprint


class _Hook(importlib.abc.MetaPathFinder):
    targets = frozenset({"planner.data.backends.sql", "planner.data.loader", "planner.data.schema"})

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.targets:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        exec_module = loader.exec_module

        def _exec_module(module: Any) -> None:
            exec_module(module)
            _patch(name, module)

        loader.exec_module = _exec_module
        return spec


def main() -> int:
    report, argv = sys.argv[1], sys.argv[2:]
    sys.meta_path.insert(0, _Hook())
    sys.path.insert(0, str(ROOT))
    try:
        from planner.cli import main as cli_main

        return cli_main(argv)
    finally:
        Path(report).write_text(json.dumps(STATE))


if __name__ == "__main__":
    raise SystemExit(main())
