"""ε in context, in plain words: one text source for the app, the HTML report and the command line.

* :func:`epsilon_meaning` — what one ε means for one person (the likelihood factor e^ε and
  how far it can move an attacker's belief);
* :data:`DEPLOYED` — what deployed systems used, each with its source;
* :func:`composition_note` — why the spend the ledger composes differs from the ε typed;
* :func:`rule_name` — a composition rule in words, never a bare acronym;
* :func:`bounding_words`, :func:`bounding_effect` — what contribution bounding keeps, and
  what it does to this file and to a declared public row count (the latter owner-only).

Everything here is about ε and the plan (public); nothing reads the data.
"""

from __future__ import annotations

import math
from typing import Final

from planner.core.errors import PlannerError
from planner.data.schema import Schema
from planner.privacy.accountants import rule as registered_rule

__all__ = ["DEPLOYED", "belief_after", "bounding_effect", "bounding_words", "composition_note", "context",
           "epsilon_meaning", "rule_name"]


def rule_name(rule: str) -> str:
    """A composition rule in words, its acronym expanded (the rule registry's full name:
    :func:`planner.privacy.accountants.rule`)."""
    try:
        return registered_rule(str(getattr(rule, "value", rule))).full
    except (KeyError, ValueError, PlannerError):
        return str(rule)


def belief_after(prior: float, epsilon: float) -> float:
    """The most an attacker's belief that a fact about one person holds can rise, from
    ``prior``, after seeing an ε-DP release: p·e^ε / (1 − p + p·e^ε).

    Notes
    -----
    Bayes' rule with a likelihood ratio of at most e^ε between the two worlds (with and
    without the person's true data) gives posterior odds ≤ e^ε × prior odds.

    Examples
    --------
    >>> round(belief_after(0.5, math.log(3)), 2)   # odds 1 → 3
    0.75
    """
    f = math.exp(min(epsilon, 700.0))
    return prior * f / (1.0 - prior + prior * f)


def epsilon_meaning(epsilon: float) -> str:
    """What ``epsilon`` means for one person, in one paragraph."""
    f = math.exp(min(epsilon, 700.0))
    low, high = belief_after(0.01, epsilon), belief_after(0.5, epsilon)
    return (f"At ε = {epsilon:g}, anything published is at most {f:,.3g} times more (or less) likely with any one "
            f"person's data than without it. Someone who thought a fact about that person had a 1% chance of being "
            f"true can believe it at most {100 * low:.3g}% after seeing the release, and a 50% guess can rise to at "
            f"most {100 * high:.3g}%. The smaller ε, the closer these stay to the guess; every release adds to the "
            "person's total loss.")


#: What deployed systems used (sourced; numbers only where the source states them).
DEPLOYED: Final = (
    "The US Census Bureau's 2020 Disclosure Avoidance System released the 2020 Census redistricting data under "
    "zero-concentrated differential privacy with a total budget of ρ = 2.63, about ε = 17.4 at δ = 10⁻¹⁰ by this "
    "planner's conversion, for a whole country's population and with some totals published exactly (J. M. Abowd "
    "et al., \"The 2020 Census Disclosure Avoidance System TopDown Algorithm\", Harvard Data Science Review, 2022).",
    "Large technology companies' telemetry — Apple (Differential Privacy Team, \"Learning with Privacy at Scale\", "
    "2017), Google (Ú. Erlingsson, V. Pihur and A. Korolova, \"RAPPOR\", ACM CCS 2014) and Microsoft (B. Ding, "
    "J. Kulkarni and S. Yekhanin, \"Collecting Telemetry Data Privately\", NeurIPS 2017) — uses local differential "
    "privacy: each device randomises its own report before it is sent (Apple also limits how many reports one person "
    "contributes). A local ε is not comparable to the ε of a release from a table you hold, which adds far less "
    "noise for the same ε.",
)


def composition_note(rule: str) -> str:
    """Why the spend the ledger records differs from the ε typed, under ``rule``."""
    if rule == "basic":
        return ("Under basic composition the ε of every answer, and of every release, simply add up: the ledger's "
                "spent total is the sum of the ε typed.")
    return (f"Under {rule_name(rule)}, the ledger composes the exact privacy loss of all the answers and releases "
            "together, which proves a total smaller than the sum of their ε. So each answer's share is its own ε, "
            "and the shares can add up to more than the release's ε; and a release's own ε is what it costs alone, "
            "while what it adds to the dataset's spent total, composed with the earlier releases, is usually less. "
            "Both numbers are true; the spent total is what counts against the lifetime budget.")


def context(epsilon: float | None, rule: str) -> dict[str, object]:
    """ε in context as JSON (the command line's ``context``; ``epsilon`` None: not known before
    planning, as in target mode)."""
    out: dict[str, object] = {"rule": rule_name(rule), "composition": composition_note(rule),
                              "deployed": list(DEPLOYED)}
    if epsilon is not None:
        out["epsilon_meaning"] = epsilon_meaning(epsilon)
    return out


# ----------------------------------------------------------------------------- contribution bounding
def bounding_words(schema: Schema) -> str:
    """What contribution bounding keeps, in plain words (data-independent)."""
    unit = schema.unit
    if unit.column is None:
        return "Each row is one privacy unit: every row enters the answers."
    c = unit.max_rows
    return (f"One person (one value of {unit.column}) counts at most {c} row{'s' if c != 1 else ''}. A person "
            f"with more rows keeps {c} of them, chosen by a fixed pseudo-random order (a hash of the row's declared "
            "values and the schema's salt: the same rows in every engine, on every run, whoever else is in the "
            "table); their other rows are left out of every answer. A larger bound keeps more rows but multiplies "
            f"the noise each answer needs by the bound.")


def bounding_effect(schema: Schema, rows: int, kept: int) -> str | None:
    """What the bound does to this file (DATA-DEPENDENT, for the owner only: counts of the
    raw rows): how many rows it leaves out, and whether the declared public row count still
    describes the rows that enter the answers. ``None`` when it leaves none out.

    Examples
    --------
    >>> s = Schema.from_dict({"version": 1, "public_n": 4360, "privacy_unit": {"column": "nr", "max_rows": 1},
    ...     "columns": [{"name": "nr", "kind": "identifier"}]})
    >>> print(bounding_effect(s, 4360, 545))  # doctest: +NORMALIZE_WHITESPACE
    The bound leaves out 3,815 of the 4,360 rows (87.5%); 545 rows enter the answers. The declared public
    row count (4,360) counts rows before the bound, so what is computed from it (predicted errors, a mean
    divided by it) describes more rows than enter the answers: declare a count you may publish of the rows
    that remain (at most 1 per person), or raise the bound.
    """
    dropped = rows - kept
    if dropped <= 0:
        return None
    text = (f"The bound leaves out {dropped:,} of the {rows:,} rows ({100 * dropped / max(rows, 1):.3g}%); "
            f"{kept:,} rows enter the answers.")
    n = schema.public_n
    if n is not None and n > kept:
        text += (f" The declared public row count ({n:,}) counts rows before the bound, so what is computed from "
                 "it (predicted errors, a mean divided by it) describes more rows than enter the answers: declare a "
                 f"count you may publish of the rows that remain (at most {schema.unit.max_rows} per person), or "
                 "raise the bound.")
    return text


def lower_bound_gap(best_rmse: float, floor: float) -> str:
    """The lower bound on the typical error, in one line: how far the best offered mechanism
    is from it, and what that gap means.

    Examples
    --------
    >>> lower_bound_gap(11.32, 1.381)[:60]
    'The best mechanism offered here has a typical error 8.2× the'
    """
    ratio = best_rmse / floor if floor > 0 else math.inf
    return (f"The best mechanism offered here has a typical error {ratio:.2g}× the floor. No unbiased mechanism "
            "(one whose answers are right on average) can go below the floor at this ε; the gap is the most a "
            "better unbiased mechanism could win, and the floor itself may not be reachable.")
