"""Enums, not strings, across the UI wall (issue 28).

The pages hold and pass the engine's enums (:class:`~planner.privacy.budget.CompositionRule`,
:class:`~planner.privacy.budget.SplitMode`, :class:`~planner.planning.queries.QueryKind`,
:class:`~planner.planning.mechanisms.base.MechanismName`, the schema's kinds and relations,
:class:`~planner.privacy.sampling.SamplingScheme`) and compare with them; a name typed as a
bare string (``if rule == "rdp"``, ``mode="equal"``, ``{"pld": ...}``) is a second copy of the
engine's vocabulary that nothing keeps in step. The engine's words reach people through a
widget's ``format_func`` or a label table keyed by the enum. Strings stay at the boundaries
only: a URL query parameter, a JSON document (PLAN.json, a schema, the workload table's
cells), each converted once.

This is a static scan of ``pages/`` (its syntax trees: nothing is run). It flags, where the
string is one of those enums' values:

* a comparison with it (``==``, ``!=``, ``in``, ``is``; pandas' ``.eq``/``.ne``/``.isin``);
* a keyword argument named after the vocabulary (``rule=``, ``mode=``, ``kind=``, ...);
* a rule, mode, relation or scheme name passed positionally to a call, as a default
  argument, as a dict key or as a subscript (``epsilon["rdp"]``, ``workload_json(rows, "manual")``).

``"target"`` is both a split mode and a column of the workload table (``row["target"]``,
``k in ("weight", "target")``), so it is flagged in a comparison with something named
``mode`` (``s.mode == "target"``) and in keyword arguments only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

from planner.data.schema import ColumnKind, MissingAction, Relation
from planner.planning.mechanisms.base import MechanismName
from planner.planning.queries import QueryKind
from planner.privacy.budget import CompositionRule, SplitMode
from planner.privacy.sampling import SamplingScheme

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "pages"

ENUMS: tuple[type[StrEnum], ...] = (CompositionRule, SplitMode, QueryKind, MechanismName, SamplingScheme,
                                    Relation, ColumnKind, MissingAction)
#: Every value of the engine's vocabulary, with the enum member it names.
VOCABULARY: dict[str, str] = {}
for _enum in ENUMS:
    for _member in _enum:
        VOCABULARY.setdefault(_member.value, f"{_enum.__name__}.{_member.name}")
#: The names that are flagged wherever they appear as a key, a subscript or an argument.
NAMES: frozenset[str] = frozenset(
    {r.value for r in CompositionRule} | {m.value for m in SplitMode if m is not SplitMode.TARGET}
    | {r.value for r in Relation} | {s.value for s in SamplingScheme})
#: Keyword arguments that carry the vocabulary.
KEYWORDS = frozenset({"rule", "mode", "kind", "mechanism", "scheme", "relation", "composition",
                      "accountant_rule", "action"})

#: Files not held to the rule yet, each with the reason. The test fails when a listed file
#: no longer needs its exception, so the list only shrinks.
FILE_EXCEPTIONS: dict[str, str] = {
}
#: Single strings that are another vocabulary which happens to share a value, by file.
LITERAL_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("pages/_ui/results.py", "quantile"): "ResultView.chart (planner.outputs.results): how an answer is "
                                          "drawn ('value', 'quantile', 'category'), not a QueryKind",
}


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    """The string constants of ``node``: itself, or the elements of a tuple, list or set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for elt in node.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                yield elt


def _names_mode(node: ast.AST) -> bool:
    """Whether ``node`` reads something named like a mode (``mode``, ``s.mode``, ``ss[S.MODE]``)."""
    return any((isinstance(n, ast.Name) and "mode" in n.id.lower())
               or (isinstance(n, ast.Attribute) and "mode" in n.attr.lower()) for n in ast.walk(node))


def bare_names(source: str) -> list[tuple[int, str, str]]:
    """(line, string, why) of every bare engine name in ``source`` (module docstring)."""
    tree = ast.parse(source)
    found: list[tuple[int, str, str]] = []

    def flag(const: ast.Constant, why: str, names: frozenset[str] | dict[str, str] = VOCABULARY) -> None:
        if const.value in names:
            found.append((const.lineno, const.value, f"{why} ({VOCABULARY[const.value]})"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = (node.left, *node.comparators)
            for side in sides:
                for c in _strings(side):
                    if c.value != SplitMode.TARGET.value or any(_names_mode(s) for s in sides if s is not side):
                        flag(c, "compared as a string")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("eq", "ne", "isin"):
                for arg in node.args:
                    for c in _strings(arg):
                        flag(c, f"compared as a string (.{func.attr})")
            else:
                for arg in node.args:
                    for c in _strings(arg):
                        flag(c, "passed as a string", NAMES)
            for kw in node.keywords:
                if kw.arg in KEYWORDS:
                    for c in _strings(kw.value):
                        flag(c, f"passed as {kw.arg}= a string")
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    for c in _strings(key):
                        flag(c, "a dict keyed by the string", NAMES)
        elif isinstance(node, ast.Subscript):
            for c in _strings(node.slice):
                flag(c, "looked up by the string", NAMES)
        elif isinstance(node, ast.arguments):
            for default in (*node.defaults, *(d for d in node.kw_defaults if d is not None)):
                for c in _strings(default):
                    flag(c, "a default spelled as a string", NAMES)
    return sorted(found)


def _violations() -> dict[str, list[tuple[int, str, str]]]:
    out: dict[str, list[tuple[int, str, str]]] = {}
    for path in sorted(PAGES.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        hits = [h for h in bare_names(path.read_text(encoding="utf-8")) if (rel, h[1]) not in LITERAL_EXCEPTIONS]
        if hits:
            out[rel] = hits
    return out


def test_the_scan_finds_what_it_looks_for() -> None:
    # Each line below is one way a page could pass the engine a bare name; the scan must see all.
    src = "\n".join([
        'if rule == "rdp": pass',                              # 1 a comparison
        'ok = mode in ("equal", "manual")',                    # 2 membership in a literal tuple
        'plan(qs, schema, 1.0, 0.0, rule="pld")',              # 3 a keyword argument
        'Budget(1.0, 0.0, "zcdp")',                            # 4 a positional argument
        'LABELS = {"basic": "basic composition"}',             # 5 a label table keyed by strings
        'eps = priv.epsilon["rdp"]',                           # 6 a subscript
        'def f(mode: str = "weighted") -> None: pass',         # 7 a default argument
        'df = df[df.kind.eq("sum")]',                          # 8 a pandas comparison
        'if c["kind"] == "numeric": pass',                     # 9 a column kind
        'x = {"target": 1.0}; y = row["target"]',              # 10 a column name: not flagged
        'if rule is CompositionRule.RDP: pass',                # 11 the enum: not flagged
        'if s.mode != "target": pass',                         # 12 the target mode
        'if k in ("weight", "target"): pass',                  # 13 the target column: not flagged
        'if ss[S.MODE] == "target": pass',                     # 14 the target mode, read from state
    ])
    lines = {line for line, _, _ in bare_names(src)}
    assert lines == {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 14}


def test_pages_pass_enums_not_bare_names() -> None:
    found = {f: hits for f, hits in _violations().items() if f not in FILE_EXCEPTIONS}
    report = "\n".join(f"{f}:{line}: {value!r} {why}" for f, hits in found.items() for line, value, why in hits)
    assert not found, (
        "pages hold the engine's enums and compare with them; name the enum member instead (or, for people, "
        "a format_func or a label table keyed by the enum):\n" + report)


def test_every_exception_is_still_needed() -> None:
    found = _violations()
    stale = [f for f in FILE_EXCEPTIONS if f not in found]
    assert not stale, f"these files pass the scan now: remove them from FILE_EXCEPTIONS: {stale}"
    for (f, value), _why in LITERAL_EXCEPTIONS.items():
        hits = bare_names((ROOT / f).read_text(encoding="utf-8"))
        assert any(v == value for _, v, _ in hits), f"{f} no longer uses {value!r}: remove its exception"
