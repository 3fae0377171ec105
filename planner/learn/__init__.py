"""Engine functions behind the stakeholder demos ("Learn" pages), one module per demo.

Every function here is a thin, vectorised composition of the engine's own mechanism,
bound and accounting functions, so that a demo shows exactly the formulas the planner uses.

.. warning::
   The numpy noise drawn here is for DEMONSTRATION and PLANNING simulations only: it is
   never a released value, it is drawn on synthetic data or on the public sample data, and
   it goes through no floating-point-safe sampler (docs/mathematics.md §9). Releases go through
   ``planner.release`` only. Every simulation takes an explicit ``numpy.random.Generator``
   so a demo is reproducible from its seed.

Demos and the teaching notes they follow (docs/references.md):

1. randomized response — the doping survey (coin design) of Garivier, "How to learn while
   respecting individual privacy?" (ENS de Lyon, 2021); the coin game of the Berkeley Math
   Circle handout "Differential privacy";
2. what an attacker can learn — the differencing attack of Garivier's notes and of Borealis
   AI, "Tutorial #12: Differential privacy I" (2021); the hypothesis-testing reading of DP in
   Wasserman & Zhou, "A statistical framework for differential privacy" (JASA 2010; Yu's
   Purdue slides);
3. the Laplace count — Borealis AI's tutorial #12, figure 3;
4. averaging done right — Borealis AI's tutorial #12, figure 4 (examples 3 and 4);
5. binary majority, exponential mechanism and ISM — Garivier's lecture notes;
6. releasing a distribution — Wasserman & Zhou's Beta(10, 10) simulation (Figure 1);
7. the cost of asking many questions — Gatica-Perez et al., "An introduction to trustworthy
   machine learning" (AIDA, 2022) (composition, RDP).

One module per demo: :mod:`.survey` (1), :mod:`.attacker` (2), :mod:`.laplace_count` (3),
:mod:`.averaging` (4), :mod:`.majority` (5), :mod:`.histogram` (6), :mod:`.composition` (7);
every name is importable from here too. The composition demo composes with the engine's
own accountants (:func:`planner.privacy.accountants.accountant`) under the registered rules.

References
----------
.. [W65] S. L. Warner, "Randomized Response", JASA 60(309), 1965.
.. [DMNS06] Dwork, McSherry, Nissim & Smith, "Calibrating Noise to Sensitivity", TCC 2006.
.. [WZ10] L. Wasserman, S. Zhou, "A Statistical Framework for Differential Privacy",
   JASA 105(489), 2010, arXiv:0811.2501 (in Yu's slides: the hypothesis-testing bound γe^α and
   the Beta(10, 10) simulation).
.. [KOV15] P. Kairouz, S. Oh, P. Viswanath, "The Composition Theorem for Differential
   Privacy", ICML 2015, arXiv:1311.0776, Thm 2.1 (the full (ε, δ) testing region).
.. [DRV10] C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and Differential Privacy",
   FOCS 2010, Thm III.3 (advanced composition, as in the AIDA course notes).
.. [M17] I. Mironov, "Rényi Differential Privacy", CSF 2017, arXiv:1702.07476.
"""

from __future__ import annotations

from planner.learn._common import _COUNT, BoolArray, IntArray
from planner.learn.attacker import (
    DifferencingAttack,
    difference_density,
    difference_likelihood_ratio,
    differencing_attack,
    laplace_count_power,
    membership_power_bound,
    posterior_bounds,
)
from planner.learn.averaging import (
    SEED_004_AVG_EPSILON,
    AveragingDemo,
    averaging_demo,
    averaging_ratio_large_n,
)
from planner.learn.composition import (
    DEMO_RULES,
    AccuracyPerRule,
    CompositionCurves,
    _composed,
    accuracy_per_rule,
    advanced_crossover_k,
    composition_curves,
    drv_crossover_k,
    log_grid,
    per_query_epsilon,
    simulate_count_answers,
)
from planner.learn.histogram import (
    SEED_001_BETA,
    SEED_001_BINS,
    SEED_001_EPSILONS,
    SEED_001_NS,
    SyntheticSample,
    beta_density,
    beta_mise_curve,
    synthetic_sample_demo,
)
from planner.learn.laplace_count import (
    SEED_004_COUNTS,
    SEED_004_EPSILONS,
    LaplaceCountDemo,
    laplace_count_demo,
    laplace_density,
    within_share,
)
from planner.learn.majority import (
    MajorityCurves,
    majority_curves,
)
from planner.learn.survey import (
    SurveyDesign,
    SurveySimulation,
    design_keep_probability,
    repeated_surveys,
    simulate_survey,
)

__all__ = [
    "DEMO_RULES",
    "SEED_001_BETA",
    "SEED_001_BINS",
    "SEED_001_EPSILONS",
    "SEED_001_NS",
    "SEED_004_AVG_EPSILON",
    "SEED_004_COUNTS",
    "SEED_004_EPSILONS",
    "AccuracyPerRule",
    "AveragingDemo",
    "BoolArray",
    "CompositionCurves",
    "DifferencingAttack",
    "IntArray",
    "LaplaceCountDemo",
    "MajorityCurves",
    "SurveyDesign",
    "SurveySimulation",
    "SyntheticSample",
    "accuracy_per_rule",
    "advanced_crossover_k",
    "averaging_demo",
    "averaging_ratio_large_n",
    "beta_density",
    "beta_mise_curve",
    "composition_curves",
    "design_keep_probability",
    "difference_density",
    "difference_likelihood_ratio",
    "differencing_attack",
    "drv_crossover_k",
    "laplace_count_demo",
    "laplace_count_power",
    "laplace_density",
    "log_grid",
    "majority_curves",
    "membership_power_bound",
    "per_query_epsilon",
    "posterior_bounds",
    "repeated_surveys",
    "simulate_count_answers",
    "simulate_survey",
    "synthetic_sample_demo",
    "within_share",
]
_PRIVATE = (_COUNT, _composed)
