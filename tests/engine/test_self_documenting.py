"""The repository documents itself (issue 28): code and docs cite files the repository holds.

Two checks over the source tree:

* no Python file under ``planner/``, ``pages/`` or ``tests/`` (the frozen old-version copies
  under ``tests/fixtures/`` and this file excepted), no ``app.py``/``serve.py`` and no Markdown
  file of the repository mentions a document the repository does not hold: the private notes
  ``MATH.md``, ``STYLE.md``, ``PRODUCT.md``, ``SOURCES.md``, the teaching notes by their file
  numbers ("seed 000" … "seed 004") or a path under ``/work/shared``; teaching notes are cited
  by author and title (``docs/references.md``);
* every ``docs/<name>.md §N`` reference names a file under ``docs/`` that exists and a
  section ``N.`` that is a heading of that file (ranges such as ``§1–2`` and lists such as
  ``§2, §7`` are checked number by number).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve()

#: Documents outside the repository, as they used to be cited.
OUTSIDE = re.compile(
    r"\b(?:MATH|STYLE|PRODUCT|SOURCES)\.md\b"  # the private notes (upper case: docs/references.md is ours)
    r"|\b[Ss]eeds? ?0\d\d\b"  # "seed 000", "seeds 000/004", "Seed 001's"
    r"|/work/shared"  # any path into the shared notes
)
#: A reference into our own docs, with the section numbers that follow it.
DOC_REF = re.compile(
    r"docs/(?P<file>[\w-]+(?:/[\w-]+)*\.md)`?"
    r"(?P<sections>(?:\s*§\s*\d+(?:\s*[–-]\s*\d+)?(?:\s*,)?)*)"
)
SECTION = re.compile(r"(\d+)(?:\s*[–-]\s*(\d+))?")
HEADING = re.compile(r"^#{1,6}\s+(\d+)\.\s", re.MULTILINE)


def _scanned() -> list[Path]:
    files = [p for d in ("planner", "pages", "tests") for p in (ROOT / d).rglob("*.py")]
    files += [ROOT / "app.py", ROOT / "serve.py"]
    files += [p for p in ROOT.rglob("*.md") if not {".git", ".venv", "node_modules"} & set(p.parts)]
    fixtures = ROOT / "tests" / "fixtures"
    return sorted(p for p in files if p.exists() and p.resolve() != HERE and fixtures not in p.parents)


def _outside_mentions(text: str) -> list[str]:
    return [m.group(0) for m in OUTSIDE.finditer(text)]


def _sections(spec: str) -> list[int]:
    out: list[int] = []
    for m in SECTION.finditer(spec):
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        out.extend(range(lo, hi + 1))
    return out


def _bad_references(text: str) -> list[str]:
    """Every ``docs/x.md §N`` in ``text`` whose file or section heading does not exist."""
    bad = []
    for m in DOC_REF.finditer(text):
        path = ROOT / "docs" / m.group("file")
        if not path.is_file():
            bad.append(f"docs/{m.group('file')} (no such file)")
            continue
        headings = {int(h) for h in HEADING.findall(path.read_text(encoding="utf-8"))}
        bad.extend(f"docs/{m.group('file')} §{n} (no such heading)"
                   for n in _sections(m.group("sections")) if n not in headings)
    return bad


def test_no_reference_to_a_document_outside_the_repository() -> None:
    found = {}
    for p in _scanned():
        hits = _outside_mentions(p.read_text(encoding="utf-8"))
        if hits:
            found[str(p.relative_to(ROOT))] = hits
    assert not found, f"cite docs/ or the work by author and title instead: {found}"


def test_every_docs_section_reference_exists() -> None:
    refs, bad = 0, {}
    for p in _scanned():
        text = p.read_text(encoding="utf-8")
        refs += sum(1 for m in DOC_REF.finditer(text) if m.group("sections").strip())
        if b := _bad_references(text):
            bad[str(p.relative_to(ROOT))] = b
    assert not bad, bad
    # the code does cite its own docs (83 section references when this test was written)
    assert refs > 50


@pytest.mark.parametrize(("text", "expected"), [
    ("see MATH.md §3", ["MATH.md"]),
    ("# seed 000: the slides", ["seed 000"]),
    ("seeds 000/004", ["seeds 000"]),
    ("Seed 001's simulation", ["Seed 001"]),
    ("(STYLE.md)", ["STYLE.md"]),
    ("/work/shared/notes/audit.md", ["/work/shared"]),
    ("docs/references.md and a random seed 5", []),
])
def test_outside_pattern_catches_the_old_forms(text: str, expected: list[str]) -> None:
    assert _outside_mentions(text) == expected


def test_reference_checker_catches_a_missing_section_or_file() -> None:
    assert _bad_references("docs/mathematics.md §3") == []
    assert _bad_references("(docs/mathematics.md\n§1–2, §7)") == []
    assert _bad_references("docs/mathematics.md §99") == ["docs/mathematics.md §99 (no such heading)"]
    # (§11 exists since the bounds section; the range must run past the last heading)
    assert _bad_references("docs/mathematics.md §10–12") == ["docs/mathematics.md §12 (no such heading)"]
    assert _bad_references("docs/nowhere.md §1") == ["docs/nowhere.md (no such file)"]
