"""Plain-words advice from the engine's own results, for the Planner and Release pages.

Each function reads engine results only — plans, predictions, the ledger's check — and
turns them into a sentence an owner can act on. No privacy decision is taken here: the
ledger and the planner decide; these functions compare their numbers.

* :func:`compare_rules` — which rule buys the smallest errors for a workload, by how much,
  and why (from :func:`planner.planning.workload.compare`'s plans);
* :func:`compare_target_rules` — the same in target mode (least ε per rule);
* :func:`noise_warnings` — answers that will be mostly noise;
* :func:`largest_fitting_epsilon` — the largest release ε the ledger's own check accepts;
* :func:`verdicts` — for every answer, before release and on the result: usable, rough or
  mostly noise, what it can support in the owner's units (group differences that can be
  told apart, a quantile's rank error as points of the column, a mode's chance of being
  right as a function of its lead) and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.core.errors import PlannerError
from planner.core.markdown import md_literal
from planner.core.rootfind import bisect, brentq
from planner.data.schema import Schema
from planner.planning.queries import Query
from planner.planning.synth.accuracy import REALISED_VS_PREDICTED
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


# ----------------------------------------------------------------------------- verdicts
#
# A verdict per answer, from public facts only (the declared schema, the plan's noise and a
# public size of each answer): what the answer can support, in the owner's units, and what
# to change when it cannot. The same verdict is shown before the release (Planner, Release)
# and on the result (Release page, HTML report, the command line's output).

#: 95% two-sided: P(|noise| > e) = 5%.
CONFIDENCE = 0.95
#: A released category counts as "right most of the time" at this chance.
MODE_CHANCE = 0.9
#: The thresholds of the grades, as a fraction of an answer's public size.
USABLE_AT, ROUGH_AT = 0.1, 0.5
#: For answers already on a 0-1 scale (proportions, ranks as a fraction of the rows).
USABLE_AT_UNIT, ROUGH_AT_UNIT = 0.05, 0.25


class Grade(StrEnum):
    """How much an answer can bear, before anyone sees it."""

    USABLE = "usable"
    ROUGH = "rough"
    NOISE = "mostly noise"
    UNJUDGED = "not judged"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One answer's verdict: the grade, the error in the owner's units, what it can support,
    the fix when it cannot, and how the error in units was derived (one line each)."""

    query_id: str
    grade: Grade
    error: str
    supports: str
    fix: str = ""
    notes: tuple[str, ...] = ()

    def sentence(self) -> str:
        """The verdict in one paragraph (the grade, what it supports, the fix)."""
        text = f"{self.grade.value.capitalize()}: {self.supports}"
        return text + (f" {self.fix}" if self.fix else "")

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query_id, "grade": self.grade.value, "error": self.error, "supports": self.supports,
                "fix": self.fix, "notes": list(self.notes)}


def laplace_difference_quantile(scale: float, level: float = CONFIDENCE) -> float:
    """The ``level`` quantile of |X − Y| for X, Y independent Laplace(0, ``scale``).

    Notes
    -----
    X − Y has density (1/(4b))(1 + |t|/b) e^{−|t|/b}, so P(|X − Y| > t) = e^{−t/b}(1 + t/(2b));
    the quantile solves e^{−u}(1 + u/2) = 1 − level for u = t/b (by Brent's method).

    Examples
    --------
    >>> round(laplace_difference_quantile(1.0), 3)   # e^{-4.113}·(1 + 2.0565) = 0.0500
    4.113
    """
    target = 1.0 - level
    u = brentq(lambda x: math.exp(-x) * (1.0 + x / 2.0) - target, 0.0, 100.0, xtol=1e-12)
    return float(u) * scale


def gaussian_difference_quantile(sigma: float, level: float = CONFIDENCE) -> float:
    """The ``level`` quantile of |X − Y| for X, Y independent N(0, σ²): z·σ·√2.

    Examples
    --------
    >>> round(gaussian_difference_quantile(1.0), 4)   # 1.95996 · √2
    2.7718
    """
    return float(NormalDist().inv_cdf(0.5 + level / 2.0)) * sigma * math.sqrt(2.0)


def difference_to_tell_apart(pred: Prediction) -> tuple[float, str]:
    """How far apart two of this answer's released numbers (two bins, two groups) must truly
    be for the released order to be right 19 times in 20, and how that was found.

    Laplace noise: the 95% quantile of the difference of two independent draws
    (:func:`laplace_difference_quantile`); Gaussian noise: z·σ·√2. Other answers (a ratio of
    two noisy numbers, a bound that is an upper bound): twice the ±95% error, a safe margin
    (the released order is then right at least 9 times in 10 by the union bound).
    """
    lap = pred.noise.get("laplace_scale")
    sig = pred.noise.get("sigma")
    if lap is not None and pred.bound_kind == "exact":
        return laplace_difference_quantile(lap), "the 95% quantile of the difference of two Laplace noises"
    if sig is not None and pred.bound_kind == "exact":
        return gaussian_difference_quantile(sig), "the 95% quantile of the difference of two Gaussian noises"
    return 2.0 * pred.error_bound_95, "twice the ±95% error (a safe margin: the order is then right 9 times in 10)"


def mode_chance(gap: float | npt.ArrayLike, categories: int, noise_scale: float, *, gumbel: bool = True,
                rows_per_score: float = 1.0) -> npt.NDArray[np.float64]:
    """The least chance that the released category is the true most common one when it
    leads the runner-up by ``gap`` rows (data-independent: the worst case for that gap).

    Notes
    -----
    The selection adds noise of scale s to each category's score (its count, or minus the
    rows to change for the ISM; ``rows_per_score`` rows per score unit). Gumbel noise is the
    exponential mechanism: P[true] = 1 / (1 + Σ_j e^{−(u* − u_j)/s}), smallest when all K − 1
    others trail by the same gap g/r: 1 / (1 + (K − 1) e^{−g/(r·s)}). Exponential noise
    (permute-and-flip): a rival j wins over the true one only if E_j − E* > g_j, which for
    independent Exp(s) has chance ½ e^{−g_j/s}; by the union bound
    P[true] ≥ 1 − ((K − 1)/2) e^{−g/(r·s)}.

    References
    ----------
    F. McSherry and K. Talwar, "Mechanism design via differential privacy", FOCS 2007;
    R. McKenna and D. Sheldon, "Permute-and-Flip", NeurIPS 2020 (exponential noise).

    Examples
    --------
    Two categories, Gumbel scale 1, a lead of ln 9 rows: 1 / (1 + 1/9) = 0.9.

    >>> round(float(mode_chance(math.log(9), 2, 1.0)), 12)
    0.9
    """
    g = np.maximum(np.asarray(gap, dtype=np.float64), 0.0) / (rows_per_score * noise_scale)
    k = max(int(categories), 1)
    if k == 1:
        return np.ones_like(g)
    if gumbel:
        return np.asarray(1.0 / (1.0 + (k - 1) * np.exp(-g)), dtype=np.float64)
    return np.asarray(np.clip(1.0 - 0.5 * (k - 1) * np.exp(-g), 0.0, 1.0), dtype=np.float64)


def mode_gap_for_chance(chance: float, categories: int, noise_scale: float, *, gumbel: bool = True,
                        rows_per_score: float = 1.0) -> float:
    """The lead (in rows) over the runner-up at which :func:`mode_chance` reaches ``chance``.

    Examples
    --------
    >>> round(mode_gap_for_chance(0.9, 2, 1.0), 4)   # ln 9
    2.1972
    """
    k = max(int(categories), 2)
    odds = (k - 1) * chance / (1.0 - chance) if gumbel else 0.5 * (k - 1) / (1.0 - chance)
    return max(0.0, math.log(odds)) * rows_per_score * noise_scale


@dataclass(frozen=True, slots=True)
class QuantileUnits:
    """What a quantile's rank error means in the column's units (data-independent).

    The released value lies between the true ``level_low``- and ``level_high``-quantiles
    (19 times in 20), give or take one grid ``step``; ``even_spread`` is that rank error in
    units if the values were spread evenly over the declared bounds (an assumption: the data
    may pile up anywhere, and then the worst case is the whole range ``span``).
    """

    alpha: float
    rank_error: float
    level_low: float
    level_high: float
    step: float
    span: float
    even_spread: float


def quantile_units(alpha: float, rank_error: float, lower: float, upper: float, step: float) -> QuantileUnits:
    """A quantile's 95% rank error (a fraction of the rows) in the column's units.

    Examples
    --------
    The median with a ±10% rank error on ages [18, 90] and a grid step of 1 year: between the
    true 40th and 60th percentiles; ±7.2 years if ages were spread evenly (0.1 × 72).

    >>> u = quantile_units(0.5, 0.1, 18, 90, 1.0)
    >>> (round(u.level_low, 2), round(u.level_high, 2), round(u.even_spread, 2))
    (0.4, 0.6, 7.2)
    """
    r = min(max(rank_error, 0.0), 1.0)
    span = float(upper - lower)
    return QuantileUnits(alpha, r, max(0.0, alpha - r), min(1.0, alpha + r), float(step), span,
                         min(r * span, span))


def _grade(relative: float, usable: float, rough: float) -> Grade:
    return Grade.USABLE if relative <= usable else Grade.ROUGH if relative <= rough else Grade.NOISE


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:,.3g}"


def _unit(pred: Prediction) -> str:
    return pred.unit.replace(" per bin", "").replace(" per group", "")


_FIX_MORE = ("To sharpen it: raise this release's ε, give this answer more weight (or a target) so the planner gives "
             "it a larger share, ")


def _fix(grade: Grade, extra: str) -> str:
    if grade in (Grade.USABLE, Grade.UNJUDGED):
        return ""
    return _FIX_MORE + extra + ", or drop answers you do not need so the others get more of the budget."


def verdict(preds: Sequence[Prediction], q: Query, schema: Schema, scale: float | None) -> Verdict:
    """The verdict of one query from its predictions (one per part) and its public size
    ``scale`` (:func:`planner.planning.workload.default_error_scales`; ``None`` when no
    public row count is declared)."""
    p = max(preds, key=lambda x: x.error_bound_95)
    kind = q.kind.value
    if p.unit.startswith("rank"):
        return _quantile_verdict(preds, q, schema)
    if p.unit.startswith("rows (gap"):
        return _mode_verdict(p, q, schema, scale)
    e = p.error_bound_95
    unit = _unit(p)
    err = f"±{_fmt(e)} {unit}"
    if p.unit == "proportion":
        grade = _grade(e, USABLE_AT_UNIT, ROUGH_AT_UNIT)
        supports = (f"the released share is within ±{e:.2g} (±{100 * e:.3g} percentage points) of the true share "
                    "19 times in 20" + (", more than the whole 0 to 1 range: it says nothing." if e >= 1 else "."))
        return Verdict(q.id, grade, err, supports, _fix(grade, "measure a rarer or commoner event with a count"))
    if kind == "synthetic_data":
        return _synthetic_verdict(p, q, err)
    many = kind in ("histogram", "synthetic_sample") or kind.startswith("grouped") or kind == "count_by_key"
    if scale is None:
        return Verdict(q.id, Grade.UNJUDGED, err, f"each released number is within {err} of the truth 19 times in "
                       "20; whether that is small cannot be judged without a public row count.",
                       "Declare an approximate public row count on the Data page to get a verdict.")
    grade = _grade(e / scale, USABLE_AT, ROUGH_AT)
    size = f"{_fmt(scale)} {unit}"
    if many:
        d, how = difference_to_tell_apart(p)
        what = {"histogram": "bin counts", "synthetic_sample": "bin counts", "count_by_key": "key counts"}.get(
            kind, kind.replace("grouped_", "group ").replace("count", "counts").replace("mean", "means")
            .replace("sum", "sums").replace("quantile", "quantiles"))
        from planner.planning.statistics import statistic

        count = max(part.size for part in statistic(q.kind).parts(q, schema))
        these = f"these {count} {what}" if count > 1 else f"two {what}"
        supports = (f"each released number is within {err} of the truth 19 times in 20 (a typical one is about "
                    f"{size}); {these} can be told apart only if they truly differ by more than "
                    f"{_fmt(d)} {unit}.")
        return Verdict(q.id, grade, err, supports, _fix(grade, "merge bins or groups (fewer, larger ones)"),
                       (f"Difference needed: {how}.",))
    supports = (f"the released value is within {err} of the truth 19 times in 20, "
                f"{100 * e / scale:.2g}% of its public size ({size}).")
    if p.bound_kind == "at most":
        supports += " The error shown is an upper bound."
    elif p.bound_kind == "model":
        supports += MODEL_CAVEAT
    return Verdict(q.id, grade, err, supports, _fix(grade, "declare tighter bounds for the column"))


#: Said of an error predicted by a model of the release (``Prediction.bound_kind == "model"``):
#: an approximation of its spread, not a guarantee like a noise distribution's quantile.
MODEL_CAVEAT = " The error shown comes from a model of this release: an approximation, not a guarantee."


def _synthetic_verdict(p: Prediction, q: Query, err: str) -> Verdict:
    """A synthetic table: its error is a distance between distributions (TVD, 0 to 1), judged
    on its whole range (public size 1, as :func:`planner.planning.workload.default_error_scales`
    gives it), and predicted by a model (:mod:`planner.planning.synth.accuracy`), which the
    sentence says, with how far the realised error went from it on real tables."""
    e = p.error_bound_95
    grade = _grade(e, USABLE_AT, ROUGH_AT)
    supports = (f"the synthetic table's one-column and measured two-column breakdowns are predicted to differ from "
                f"the real table's by at most {_fmt(e)} in total-variation distance (0 = identical, 1 = nothing in "
                "common) 19 times in 20. This comes from a model of the noise and the fit: an approximation, not a "
                f"guarantee (on real tables the realised error was {REALISED_VS_PREDICTED} times the predicted "
                "average). Pairs of columns the release does not measure are not covered.")
    return Verdict(q.id, grade, err, supports, _fix(grade, "use fewer columns or fewer bins per numeric column"))


def _quantile_verdict(preds: Sequence[Prediction], q: Query, schema: Schema) -> Verdict:
    from planner.planning.statistics.quantile import candidate_grid

    col = schema.column(q.column or "")
    lo, hi = col.bounds
    grid = candidate_grid(q, schema)
    step = float(np.max(np.diff(grid))) if len(grid) > 1 else float(hi - lo)
    worst = max(p.error_bound_95 for p in preds)
    grade = _grade(worst, USABLE_AT_UNIT, ROUGH_AT_UNIT)
    lines = []
    for p in preds:
        alpha = float(p.part.split("@", 1)[1]) if "@" in p.part else 0.5
        u = quantile_units(alpha, p.error_bound_95, lo, hi, step)
        lines.append(f"the {_level_name(alpha)} lands between the true {_pct(u.level_low)} and {_pct(u.level_high)} "
                     f"points of {q.column} (±{_fmt(u.even_spread)} {q.column} units if the values were spread "
                     f"evenly over [{_fmt(lo)}, {_fmt(hi)}])")
    supports = "19 times in 20, " + "; ".join(lines) + "."
    notes = (f"Released on a grid of step {_fmt(step)}: even with no noise the answer is off by up to one step.",
             "In units, the worst case needs an assumption about the data: without one, values may pile up "
             f"anywhere, and a rank error can then cover the whole range ({_fmt(hi - lo)} units).")
    err = f"±{100 * worst:.3g}% of the rows in rank"
    return Verdict(q.id, grade, err, supports, _fix(grade, "use a coarser grid (fewer candidates)"), notes)


def _level_name(alpha: float) -> str:
    return "median" if alpha == 0.5 else f"{_pct(alpha)} point"


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"


def _mode_verdict(p: Prediction, q: Query, schema: Schema, scale: float | None) -> Verdict:
    from planner.planning.statistics.histogram import labels
    from planner.planning.statistics.mode import _gap_factor

    k = len(labels(q, schema))
    gumbel = "gumbel_scale" in p.noise
    s = p.noise.get("gumbel_scale", p.noise.get("exponential_scale", math.nan))
    r = _gap_factor(q, schema)
    g = mode_gap_for_chance(MODE_CHANCE, k, s, gumbel=gumbel, rows_per_score=r)
    supports = (f"the released category is the true most common one with a chance of at least "
                f"{MODE_CHANCE:.0%} when it leads the runner-up by {_fmt(g)} rows or more (of {k} categories); "
                "with a smaller lead it may name the runner-up.")
    err = f"right ≥ {MODE_CHANCE:.0%} of the time at a lead of {_fmt(g)} rows"
    note = ("Worst case for that lead: every other category trails by the same amount "
            + ("(the exponential mechanism's exact chance)." if gumbel else "(a union bound over the rivals)."))
    if scale is None:
        return Verdict(q.id, Grade.UNJUDGED, err, supports,
                       "Declare an approximate public row count on the Data page to get a verdict.", (note,))
    grade = _grade(g / scale, USABLE_AT, ROUGH_AT)
    return Verdict(q.id, grade, err, supports, _fix(grade, "merge rare categories"), (note,))


def verdicts(plan: Plan, schema: Schema) -> dict[str, Verdict]:
    """A verdict for every query of ``plan`` (data-independent: the schema, the plan's noise
    and the public sizes :func:`planner.planning.workload.default_error_scales` gives)."""
    from planner.planning.workload import default_error_scales

    by_query: dict[str, list[Prediction]] = {}
    for pr in plan.predictions:
        by_query.setdefault(pr.query_id, []).append(pr)
    queries = {p.query.id: p.query for p in plan.parts}
    scales = default_error_scales(list(queries.values()), schema) or {}
    return {qid: verdict(preds, queries[qid], schema, scales.get(qid)) for qid, preds in by_query.items()}
