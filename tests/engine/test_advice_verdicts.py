"""Issue 29: a verdict for every answer, in the owner's units, from public facts only.

Expected numbers: Monte Carlo of the noise itself with numpy (independent of the closed
forms under test; tolerances ≥ 5 standard errors), and hand calculations stated beside each.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.data.schema import Schema
from planner.planning import advice, workload
from planner.planning.queries import queries_from_list

PANEL = Schema.from_dict({
    "version": 1, "relation": "add_remove", "public_n": 4360,
    "privacy_unit": {"column": "nr", "max_rows": 8},
    "columns": [
        {"name": "nr", "kind": "identifier", "missing": {"action": "drop"}},
        {"name": "wage", "kind": "numeric", "lower": 0, "upper": 5, "missing": {"action": "drop"}},
        {"name": "ethn", "kind": "categorical", "categories": ["black", "hisp", "other"], "missing": {"action": "drop"}},
        {"name": "occ", "kind": "categorical", "categories": ["a, b", "c", "d", "e"], "missing": {"action": "drop"}},
    ]})


def _plan(queries, epsilon):
    qs = queries_from_list(queries, PANEL)
    return workload.plan(qs, PANEL, epsilon, 0.0, "basic", workload.default_error_scales(qs, PANEL))


def test_laplace_difference_quantile_matches_monte_carlo() -> None:
    rng = np.random.default_rng(7)
    d = np.abs(rng.laplace(0, 2.0, 400_000) - rng.laplace(0, 2.0, 400_000))
    t = advice.laplace_difference_quantile(2.0)
    frac = float(np.mean(d > t))
    se = math.sqrt(0.05 * 0.95 / d.size)
    assert abs(frac - 0.05) < 5 * se


def test_gaussian_difference_quantile_matches_monte_carlo() -> None:
    rng = np.random.default_rng(8)
    d = np.abs(rng.normal(0, 3.0, 400_000) - rng.normal(0, 3.0, 400_000))
    frac = float(np.mean(d > advice.gaussian_difference_quantile(3.0)))
    assert abs(frac - 0.05) < 5 * math.sqrt(0.05 * 0.95 / d.size)


@pytest.mark.parametrize(("k", "gap"), [(2, 1.0), (4, 2.5), (7, 4.0)])
def test_mode_chance_is_the_exponential_mechanisms_chance_in_the_worst_case(k: int, gap: float) -> None:
    """Gumbel report-noisy-max simulated with numpy: the true mode leads every rival by ``gap``."""
    rng = np.random.default_rng(k)
    scores = np.array([gap] + [0.0] * (k - 1))
    runs = 200_000
    wins = np.argmax(scores + rng.gumbel(0, 1.5, (runs, k)), axis=1) == 0
    p = float(advice.mode_chance(gap, k, 1.5))
    assert abs(wins.mean() - p) < 5 * math.sqrt(p * (1 - p) / runs)


def test_mode_chance_with_exponential_noise_is_a_lower_bound() -> None:
    rng = np.random.default_rng(3)
    k, gap, s, runs = 5, 3.0, 1.0, 200_000
    scores = np.array([gap] + [0.0] * (k - 1))
    wins = (np.argmax(scores + rng.exponential(s, (runs, k)), axis=1) == 0).mean()
    bound = float(advice.mode_chance(gap, k, s, gumbel=False))
    assert bound <= wins + 5 * math.sqrt(wins * (1 - wins) / runs)
    # and the gap for a 90% chance gives that chance back
    g = advice.mode_gap_for_chance(0.9, k, s, gumbel=False)
    assert float(advice.mode_chance(g, k, s, gumbel=False)) == pytest.approx(0.9)


def test_group_means_get_a_sentence_about_telling_them_apart() -> None:
    """The issue's case: three mean wages by ethnicity at ε = 1 (by hand: the sentence names
    the three groups and a difference in wage units)."""
    p = _plan([{"id": "wage_by_ethn", "kind": "grouped_mean", "column": "wage", "mechanism": "laplace", "by": ["ethn"]}], 1.0)
    v = advice.verdicts(p, PANEL)["wage_by_ethn"]
    assert "these 3 group means can be told apart only if they truly differ by more than" in v.supports
    assert "income" not in v.supports and v.grade in set(advice.Grade)


def test_grades_follow_the_budget() -> None:
    q = [{"id": "n", "kind": "count", "mechanism": "laplace"}]
    assert advice.verdicts(_plan(q, 1.0), PANEL)["n"].grade is advice.Grade.USABLE  # ±8·3/… rows of 4,360
    tiny = advice.verdicts(_plan(q, 1e-4), PANEL)["n"]
    assert tiny.grade is advice.Grade.NOISE and "raise this release's ε" in tiny.fix


def test_a_quantile_is_explained_in_the_columns_units_with_its_assumption() -> None:
    p = _plan([{"id": "med", "kind": "median", "column": "wage", "mechanism": "exponential"}], 0.5)
    v = advice.verdicts(p, PANEL)["med"]
    assert "median lands between the true" in v.supports and "wage units if the values were spread evenly" in v.supports
    assert any("grid of step" in n for n in v.notes) and any("whole range (5 units)" in n for n in v.notes)


def test_a_mode_is_a_chance_of_being_right_as_a_function_of_its_lead() -> None:
    p = _plan([{"id": "occ_mode", "kind": "mode", "column": "occ", "mechanism": "exponential"}], 1.0)
    v = advice.verdicts(p, PANEL)["occ_mode"]
    pred = p.predictions[0]
    # basic composition: exponential noise (permute-and-flip), the union bound
    g = advice.mode_gap_for_chance(0.9, 4, pred.noise["exponential_scale"], gumbel=False)
    assert f"{g:,.3g}" in v.supports and "at least 90%" in v.supports


def test_without_a_public_row_count_the_verdict_says_what_to_declare() -> None:
    schema = Schema.from_dict({**PANEL.to_dict(), "public_n": None})
    qs = queries_from_list([{"id": "n", "kind": "count", "mechanism": "laplace"}], schema)
    v = advice.verdicts(workload.plan(qs, schema, 1.0, 0.0, "basic"), schema)["n"]
    assert v.grade is advice.Grade.UNJUDGED and "public row count" in v.fix


def test_a_synthetic_table_is_judged_as_a_distance_predicted_by_a_model() -> None:
    """A synthetic table's error is a TVD from a model of the release (bound_kind "model"):
    the verdict names the distance and says it is an approximation, not a guarantee, with
    the realised/predicted range measured on real tables (accuracy.REALISED_VS_PREDICTED)."""
    from planner.planning.synth.accuracy import REALISED_VS_PREDICTED

    qs = queries_from_list([{"id": "syn", "kind": "synthetic_data", "mechanism": "mst",
                             "options": {"columns": ["ethn", "occ", "wage"], "bins": 4}}], PANEL)
    # Gaussian measurements: δ > 0, zCDP as the statistic is planned
    p = workload.plan(qs, PANEL, 1.0, 1e-6, "zcdp", workload.default_error_scales(qs, PANEL))
    pred = p.predictions[0]
    assert pred.bound_kind == "model"
    v = advice.verdicts(p, PANEL)["syn"]
    assert "total-variation distance" in v.supports and "not a guarantee" in v.supports
    assert REALISED_VS_PREDICTED in v.supports and "not measure are not covered" in v.supports
    assert advice._fmt(pred.error_bound_95) in v.supports
    # graded on the distance's whole range (0 to 1), as the planner's public size 1 gives it
    want = advice._grade(pred.error_bound_95, advice.USABLE_AT, advice.ROUGH_AT)
    assert v.grade is want
    assert "fewer columns or fewer bins" in v.fix or v.grade is advice.Grade.USABLE


def test_a_model_based_error_says_it_is_not_a_guarantee() -> None:
    """A mean over the public row count under add/remove has bound_kind "model"
    (statistics/mean.py: biased if the table holds another number of rows): its verdict
    carries the model caveat; a count's exact Laplace bound does not."""
    p = _plan([{"id": "m", "kind": "mean", "column": "wage", "mechanism": "laplace", "options": {"mode": "public_n"}},
               {"id": "n", "kind": "count", "mechanism": "laplace"}], 1.0)
    kinds = {pr.query_id: pr.bound_kind for pr in p.predictions}
    v = advice.verdicts(p, PANEL)
    assert kinds["m"] == "model" and advice.MODEL_CAVEAT.strip() in v["m"].supports
    assert kinds["n"] == "exact" and advice.MODEL_CAVEAT.strip() not in v["n"].supports
