"""Learn demo: Binary majority: exponential mechanism, ISM and the bounds (Garivier).

Part of :mod:`planner.learn` (one module per demo); see its docstring for the
warning on the numpy noise drawn here (demonstration only, never released).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.core.errors import QueryError
from planner.learn._common import IntArray
from planner.planning.mechanisms import _validate as v
from planner.planning.mechanisms import exponential as em
from planner.planning.mechanisms import ism
from planner.planning.mechanisms.base import FloatArray

# scipy is imported in the functions that use it (~0.3 s): `planner release` and the app's first
# page need none of it before the data is read (tests/engine/test_lazy_imports.py).


@dataclass(frozen=True, slots=True)
class MajorityCurves:
    """P[correct] against s = Σxᵢ for n = 2k + 1 voters at one ε (Garivier, "How to learn
    while respecting individual privacy?", ENS de Lyon, 2021)."""

    n: int
    epsilon: float
    s: IntArray
    exponential: FloatArray  # 1/(1 + e^{−|2s−n|ε/2})
    better: FloatArray  # 1/(1 + e^{−rε}), r = (|2s−n|+1)/2: the ISM with |T| = 2 (no /2)
    ism: FloatArray  # the general ISM (with /2): 1/(1 + e^{−rε/2})
    unbiased_bound: FloatArray  # 1/(1 + e^{−(|2s−n|+1)ε}) at ε
    bound_quarter: FloatArray  # the same bound at ε/4 (1/4-optimality)
    bound_half: FloatArray  # the same bound at ε/2 (1/2-optimality when |T| = 2)
    quarter_matches: bool  # ISM(ε) == bound(ε/4) at every s (to 1e-12)
    half_matches: bool  # better(ε) == bound(ε/2) at every s
    data_dependent: bool = True


def majority_curves(epsilon: float, n: int) -> MajorityCurves:
    """The binary-majority formulas of Garivier's lecture notes for every s ∈ {0, …, n}.

    Notes
    -----
    Uses :mod:`planner.planning.mechanisms.exponential` (EM, better mechanism, unbiased bound) and
    :func:`planner.planning.mechanisms.ism.exact_probability` on :func:`ism.majority_distance`.
    The general ISM's 1/Σ e^{−εD/2} equals the unbiased bound 1/Σ e^{−2(ε/4)D} term by
    term, so "ISM at ε beats every unbiased ε/4-DP mechanism" holds with equality here.

    Examples
    --------
    >>> c = majority_curves(1.0, 11)
    >>> round(float(c.exponential[6]), 6), round(float(c.better[6]), 6)  # s = 6: hand values
    (0.622459, 0.731059)
    >>> c.quarter_matches and c.half_matches
    True
    """
    nn = v.count(n, "n")
    if nn % 2 != 1:
        raise QueryError(f"n must be odd (n = 2k + 1) for a strict majority; got {nn}.")
    eps = float(v.epsilons(epsilon))
    s = np.arange(nn + 1, dtype=np.int64)
    p_ism = np.array([
        float(ism.exact_probability(ism.majority_distance(int(si), nn).distance, eps, halve=True)[()])
        for si in s
    ])
    better = em.majority_better_correct(eps, s, nn)
    q = em.majority_unbiased_upper_bound(eps / 4.0, s, nn)
    h = em.majority_unbiased_upper_bound(eps / 2.0, s, nn)
    return MajorityCurves(
        n=nn,
        epsilon=eps,
        s=s,
        exponential=em.majority_em_correct(eps, s, nn),
        better=better,
        ism=np.asarray(p_ism, dtype=np.float64),
        unbiased_bound=em.majority_unbiased_upper_bound(eps, s, nn),
        bound_quarter=q,
        bound_half=h,
        quarter_matches=bool(np.allclose(p_ism, q, rtol=1e-12, atol=0.0)),
        half_matches=bool(np.allclose(better, h, rtol=1e-12, atol=0.0)),
    )
