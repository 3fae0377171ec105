"""Number formatting for display (no arithmetic beyond rounding for the eye)."""

from __future__ import annotations

import math
from typing import Any

from planner.core.markdown import (
    md_literal as plain,  # names and engine messages shown, never formatted
)

__all__ = ["answer_rows", "eps", "plain", "value"]


def eps(value: float) -> str:
    """A budget for display: 4 significant digits, and 0 for float dust (|x| < 1e-9)."""
    return "0" if abs(value) < 1e-9 else f"{value:.4g}"


def value(v: Any) -> str:
    """A released value for a table: numbers to 6 significant digits, text as is."""
    if isinstance(v, bool) or v is None:
        return "" if v is None else str(v)
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(x):
        return str(x)
    return f"{x:,.0f}" if abs(x) >= 1e6 else f"{x:,.6g}"


def answer_rows(answers: dict[str, Any]) -> list[dict[str, str]]:
    """Stored answers (the ledger's JSON) as rows a table shows: one per released number,
    labelled by its bin, group or quantile level."""
    out: list[dict[str, str]] = []

    def one(qid: str, part: str, ans: Any) -> None:
        if isinstance(ans, dict) and isinstance(ans.get("parts"), dict):
            for k, sub in ans["parts"].items():
                one(qid, str(k), sub)
            return
        vals = ans.get("counts", ans.get("values")) if isinstance(ans, dict) else None
        if isinstance(ans, dict) and isinstance(ans.get("labels"), list) and isinstance(vals, list):
            for lab, v in zip(ans["labels"], vals, strict=False):  # bins (counts) or groups (values)
                out.append({"query": qid, "part": part, "label": str(lab), "value": value(v)})
            return
        v = ans.get("value") if isinstance(ans, dict) else ans
        out.append({"query": qid, "part": part, "label": "", "value": value(v)})

    for qid, ans in answers.items():
        one(str(qid), "", ans)
    return out


def rule(name: object) -> str:
    """A composition rule in words, never a bare acronym (the engine's words:
    :func:`planner.outputs.words.rule_name`)."""
    from planner.outputs.words import rule_name

    return rule_name(str(getattr(name, "value", name)))
