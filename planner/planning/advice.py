"""Plain-words advice from the engine's own results, for the Planner and Release pages.

Each function reads engine results only — plans, predictions, the ledger's check — and
turns them into a sentence an owner can act on. No privacy decision is taken here: the
ledger and the planner decide; these functions compare their numbers.

* :func:`compare_rules` — which rule buys the smallest errors for a workload, by how much,
  and why (from :func:`planner.planning.workload.compare`'s plans);
* :func:`compare_target_rules` — the same in target mode (least ε per rule);
* :func:`noise_warnings` — answers that will be mostly noise;
* :func:`largest_fitting_epsilon` — the largest release ε the ledger's own check accepts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from planner.core.errors import PlannerError
from planner.core.markdown import md_literal
from planner.core.rootfind import bisect
from planner.planning.workload import Plan, Prediction
from planner.privacy.accountants import rule as rule_of

#: Two rules whose typical errors differ by less than this factor are called equal.
TIE = 1.005

_GAUSSIAN = ("gaussian", "discrete_gaussian")



def _name(rule: str) -> str:
    """A rule as the advice names it: its short name from the rule registry ("PLD")."""
    return rule_of(rule).short


_PLD_SOURCE = ("Koskela, Jälkö and Honkela, *Computing tight differential privacy guarantees using FFT*, 2020; "
               "Doroshenko et al., *Connect the dots: tighter discrete approximations of privacy loss "
               "distributions*, 2022")


@dataclass(frozen=True)
class RuleRow:
    rule: str
    factor: float | None  # typical error ÷ the best rule's typical error (None: not applicable)
    used_epsilon: float | None
    note: str


@dataclass(frozen=True)
class RuleComparison:
    rows: tuple[RuleRow, ...]
    best: tuple[str, ...]
    headline: str
    why: str


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _only_pld_gains(rows: list[RuleRow], best: tuple[str, ...]) -> bool:
    """The optimal accountant alone is best and every other rule ties with basic."""
    by = {r.rule: r.factor for r in rows if r.factor is not None}
    base = by.get("basic")
    return (best == ("pld",) and base is not None
            and all(f * TIE >= base for r, f in by.items() if r != "pld"))


def _why(rows: list[RuleRow], best: tuple[str, ...], worse: list[RuleRow], queries: int, gaussian: int,
         delta: float) -> str:
    """Why the best rules win for this workload (the caption under the headline)."""
    zcdp_worse = any(r.rule == "zcdp" for r in worse)
    pld_note = ""
    if _only_pld_gains(rows, best):
        gain = next(r.factor for r in rows if r.rule == "basic")
        return (f"The optimal accountant composes the exact privacy loss of the {queries} answers together "
                f"({_PLD_SOURCE}). Allowing the δ = {delta:g} of this release, it proves a total a little below "
                f"the sum of their ε, so the same budget buys errors {gain:.2f}× smaller; for so few "
                f"{'pure-ε ' if not gaussian else ''}answers the other rules prove no better than that sum.")
    if "pld" in best and len(best) > 1:
        pld_note = (" The optimal accountant (privacy loss distributions) is never looser than any of them; "
                    "here it ties with the best.")
    elif best == ("pld",):
        pld_note = (" The optimal accountant composes the exact privacy loss of the answers together, so it "
                    f"proves the smallest total of all ({_PLD_SOURCE}).")
    if not gaussian and "basic" in best:
        why = (f"All {queries} queries here use pure-ε noise (Laplace noise, the "
               "exponential mechanism), and for so few answers adding up their ε (basic composition) is already as tight "
               "as the other rules. The tighter accountants pay off with many more answers, or with Gaussian "
               "noise.")
        if zcdp_worse:
            why += (f" zCDP measures each pure-ε answer as ρ = ε²/2 and pays again when it converts the total "
                    f"back to ε at δ = {delta:g}; with few answers that costs more than it saves "
                    "(Bun and Steinke, *Concentrated differential privacy*, 2016).")
        return why
    if gaussian and "basic" not in best:
        return (f"{gaussian} of the {queries} queries use Gaussian noise, whose privacy loss Rényi DP and "
                "zCDP measure exactly (Mironov, *Rényi differential privacy*, 2017; Bun and Steinke, 2016), "
                "while basic composition must charge every Gaussian answer a full (ε, δ)." + pld_note)
    if "basic" not in best:
        return (f"With {queries} queries, the privacy losses of many independent noisy answers partly cancel: "
                "the tighter rules bound the total by roughly √k times one answer's cost instead of k times "
                "(Kairouz, Oh and Viswanath, *The composition theorem for differential privacy*, 2015; "
                "Mironov, 2017)." + pld_note)
    return ("Basic composition is as tight as the other rules here: the Gaussian answers are too few for the "
            "tighter accounting of their privacy loss to pay off.")


def compare_rules(plans: dict[str, Plan | PlannerError], rule_in_force: str, delta: float,
                  *, fixed: bool = True) -> RuleComparison:
    """Which rule buys the smallest errors for this workload, by how much, and why.
    ``fixed``: the dataset's rule (its lifetime budget is set), else the rule chosen for a what-if.

    The planner minimises Σ weight × (error ÷ scale)² (the allocation's ``objective``);
    √(objective ÷ best objective) is how much larger a rule's typical error is.
    """
    ok = {r: p for r, p in plans.items() if isinstance(p, Plan)}
    if not ok:
        return RuleComparison((), (), "No composition rule applies to this workload.", "")
    best_obj = min(p.allocation.objective for p in ok.values())
    rows: list[RuleRow] = []
    for rule, p in plans.items():
        if isinstance(p, Plan):
            f = math.sqrt(p.allocation.objective / best_obj) if best_obj > 0 else 1.0
            rows.append(RuleRow(rule, f, p.used_epsilon, ""))
        else:
            rows.append(RuleRow(rule, None, None, f"does not apply: {p}"))
    best = tuple(r.rule for r in rows if r.factor is not None and r.factor <= TIE)
    worse = [r for r in rows if r.factor is not None and r.factor > TIE]
    head = (f"For this workload, **{_join([_name(r) for r in best])}** give{'s' if len(best) == 1 else ''} "
            "the smallest errors")
    if len(best) > 1:
        head += " (within 0.5% of each other)"
    if worse:  # rules with the same factor (to the digits shown) in one phrase
        by_factor: dict[str, list[str]] = {}
        for r in worse:
            by_factor.setdefault(f"{r.factor:.2f}", []).append(f"**{_name(r.rule)}**")
        head += "; " + "; ".join(f"under {_join(names)} they are **{f}×** larger" for f, names in by_factor.items())
    head += "."
    forced = next((r for r in rows if r.rule == rule_in_force), None)
    if forced is not None and forced.factor is not None and forced.factor > TIE:
        head += f" {_the_rule(fixed)}, {_name(rule_in_force)}, is not the best one here."

    any_plan = next(iter(ok.values()))
    preds = any_plan.predictions
    queries = len({p.query_id for p in preds})
    gaussian = [p.query_id for p in preds if p.mechanism in _GAUSSIAN]
    why = _why(rows, best, worse, queries, len(set(gaussian)), delta)
    return RuleComparison(tuple(rows), best, head, why)


def compare_target_rules(least: dict[str, float | PlannerError], rule_in_force: str, *, fixed: bool = True) -> str:
    """Target mode: which rule meets every target with the least ε, and how much more the others need."""
    ok = {r: e for r, e in least.items() if isinstance(e, float)}
    if not ok:
        return "No composition rule applies to this workload."
    best_eps = min(ok.values())
    best = [r for r, e in ok.items() if e <= best_eps * TIE]
    worse = [(r, e / best_eps) for r, e in ok.items() if e > best_eps * TIE]
    text = (f"To meet every target, **{_join([_name(r) for r in best])}** need{'s' if len(best) == 1 else ''} the least ε "
            f"(**{best_eps:.4g}**)")
    if worse:
        text += "; " + "; ".join(f"**{_name(r)}** needs **{f:.2f}×** as much" for r, f in worse)
    text += "."
    if rule_in_force not in best and rule_in_force in ok:
        text += f" {_the_rule(fixed)}, {_name(rule_in_force)}, is not the cheapest here."
    return text


def _the_rule(fixed: bool) -> str:
    return "The rule in force" if fixed else "The rule chosen above"


def noise_warnings(preds: tuple[Prediction, ...], scales: dict[str, float] | None) -> list[str]:
    """Answers whose 95% error is at least half their public size: they will be mostly noise.

    ``scales`` are the engine's public magnitudes per query (``default_error_scales``:
    declared bounds × public row count); ranks and proportions are compared with ½.
    """
    out: list[str] = []
    seen: set[str] = set()
    for p in preds:
        if p.query_id in seen:
            continue
        if p.unit.startswith("rank"):
            if p.error_bound_95 >= 0.25:
                out.append(f"**{md_literal(p.query_id)}** may land anywhere within ±{min(p.error_bound_95, 1.0):.0%} of the rows "
                           "around the true rank")
                seen.add(p.query_id)
        elif p.unit == "proportion":
            if p.error_bound_95 >= 0.25:
                out.append(f"**{md_literal(p.query_id)}** is uncertain by ±{p.error_bound_95:.2g} (on a 0–1 scale)")
                seen.add(p.query_id)
        elif scales and p.query_id in scales and p.error_bound_95 >= 0.5 * scales[p.query_id]:
            out.append(f"**{md_literal(p.query_id)}** (±{p.error_bound_95:,.4g} {md_literal(p.unit)}) is uncertain by at least half of its "
                       f"public size ({scales[p.query_id]:,.4g})")
            seen.add(p.query_id)
    return out


def largest_fitting_epsilon(fits: Callable[[float], bool], low: float, high: float, rel_tol: float = 1e-3) -> float | None:
    """The largest ε in [low, high] with ``fits(ε)`` (``fits`` is the ledger's own check of
    the plan made at ε; it is monotone: a larger ε spends more), rounded down to 4
    significant digits; None when not even ``low`` fits."""
    if not fits(low):
        return None
    if fits(high):
        return _round_down(high, fits)
    lo, hi = low, high

    def close(a: float, b: float) -> bool:
        return b / a - 1 <= rel_tol

    if not close(lo, hi):  # 2,000 geometric steps outlast any bracket of floats
        lo, hi = bisect(lambda mid: not fits(mid), lo, hi, iterations=2000, geometric=True, done=close)
    return _round_down(lo, fits)


def _round_down(value: float, fits: Callable[[float], bool]) -> float:
    digits = 3 - math.floor(math.log10(value))
    r = math.floor(value * 10**digits) / 10**digits
    return r if r > 0 and fits(r) else value
