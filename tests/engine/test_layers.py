"""The house plan: ``planner/`` is built in layers, each importing only the layers below it,
with no import circle among the engine's own modules (function-level imports included).

=========  ===========================================================================
layer      what it holds
=========  ===========================================================================
core       errors, special functions, root finding, strict JSON, safe text and CSV cells
privacy    budgets, events, accountants and rules, sampling, the OpenDP noise
data       schema, loading, sources, backends (exact aggregates)
planning   queries, statistics, mechanisms, workload, allocation, bounds, plan files
ledger     the spend ledger: tables, the budget decision, the release transaction, accounts
release    the one release path (plan → check → spend → sample → record → result)
outputs    the HTML report, the generated script and notebook
learn      the live demos
cli        the command line (top)
=========  ===========================================================================

The ledger sits above planning in this order but needs only core and privacy: it records
spends, it does not plan them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLANNER = ROOT / "planner"
#: Each layer's rank: a module may import its own layer and lower ranks only.
LAYERS = {"core": 0, "privacy": 1, "data": 2, "planning": 3, "ledger": 4, "release": 5,
          "outputs": 6, "learn": 6, "cli": 7, "__main__": 8, "__init__": 0}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path) -> set[str]:
    """Every planner module ``path`` imports (top-level and inside functions)."""
    mod = _module(path)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in out if m == "planner" or m.startswith("planner.")}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _graph() -> dict[str, set[str]]:
    files = sorted(PLANNER.rglob("*.py"))
    known = {_module(f) for f in files}

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for f in files:
        m = _module(f)
        graph[m] = {r for t in _imports(f) if (r := resolve(t)) and r != m and not m.startswith(r + ".")}
    return graph


def test_every_planner_module_belongs_to_a_layer() -> None:
    """A new top-level module must be given a place in the house plan (this table)."""
    unplaced = sorted(m for m in _graph() if _layer(m) not in LAYERS)
    assert unplaced == [], f"modules outside every layer: {unplaced}"


def test_layers_import_only_downward() -> None:
    upward = sorted(
        f"{m} -> {d}"
        for m, deps in _graph().items()
        for d in deps
        if d != "planner" and LAYERS.get(_layer(d), 99) > LAYERS.get(_layer(m), -1)
    )
    assert upward == [], "imports from a higher layer:\n" + "\n".join(upward)


def test_no_import_circle_in_the_engine() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    assert circles == [], "import circles:\n" + "\n".join(", ".join(c) for c in circles)
