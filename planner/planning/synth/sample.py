"""Records from a fitted graphical model, by ancestral sampling on its junction tree.

Both samplers walk the cliques in breadth-first order from the root: the root clique's
columns are drawn jointly from β_root, then each clique C's new columns C∖S from
p(x_{C∖S} | x_S) = β_C/β_S given the separator values S already drawn for each record.
They differ in how one clique's new columns are drawn for the records of a separator
group (the records sharing one value s of the separator, m_s of them):

* ``iid`` — each record independently (inverse CDF): the records are i.i.d. draws from p
  exactly (up to floating point), and each cell's count carries the multinomial sampling
  error, of order √(m_s·p_j) [KF09, §12.1.1];
* ``stratified`` (the default) — controlled rounding: the group's counts over the new
  columns' cells are the systematic rounding of the expected counts m_s·p_j (each count is
  ⌊m_s·p_j⌋ or ⌈m_s·p_j⌉, they sum to m_s exactly, :func:`stratified_rows`), and the values
  so counted are dealt to the group's records in a uniformly random order, drawn afresh
  for every clique. Each record's law is still exactly p, the records are exchangeable
  (not independent), and every count of a clique's table is within one of its expected
  count given the separator counts: the sampling error is a rounding error (< 1 per cell)
  instead of √(m·p).

Why the fresh random order matters. Given the separator value s, the model makes the new
columns C∖S independent of every column drawn before (the junction tree's running
intersection property: the earlier columns lie on the other side of S [KF09, §10.2]).
Dealing the new values in a uniformly random permutation of the group's records,
independent of everything drawn before, keeps that: given everything drawn before, a record
of group s gets the value j with probability E[c_j]/m_s = p(j | s) (the counts c are unbiased,
:func:`systematic_counts`), whatever its earlier values. By induction over the cliques each
record's joint law is then Π β_C / Π β_S, the model's p, as for i.i.d. records; what differs
is only the dependence between records (their counts are rounded, not drawn). Private-PGM 1.1's default
``synthetic_data(method="round")`` rounds the same counts but lays them out in one fixed
order within each group for every clique, so columns drawn in different cliques line up
and correlations the model does not have are invented (issue 30 measured its 2-way error as
worse than the trivial independent baseline).

The output's rows are in a random order: the root clique's values are dealt in a uniformly
random permutation of all rows, so the table's law is invariant under any permutation of its
rows.

References
----------
.. [KF09] D. Koller, N. Friedman, *Probabilistic Graphical Models*, §12.1.1 (forward
   sampling), §10.2 (calibrated clique trees: p(x) = Π β_C / Π β_S; running intersection).
.. [Mad49] W. G. Madow, "On the theory of systematic sampling, II", Annals of
   Mathematical Statistics 20(3), 1949 (one random start, then every unit of the
   cumulated sizes: each unit drawn with probability proportional to its size).
.. [Coc77] W. G. Cochran, *Sampling Techniques*, 3rd ed., Wiley 1977, ch. 8 (systematic
   sampling).
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from planner.core.errors import QueryError
from planner.planning.synth.domain import FloatArray, IntArray
from planner.planning.synth.inference import GraphicalModel


class Sampler(StrEnum):
    """How the records are drawn from the fitted model (module docstring)."""

    #: Controlled (systematic) rounding of each clique's expected counts, dealt in a random order.
    STRATIFIED = "stratified"
    #: Independent records (multinomial counts).
    IID = "iid"


def _conditional(cond: FloatArray) -> FloatArray:
    """Rows of ``cond`` normalised to probabilities (a zero row: uniform)."""
    k = cond.shape[1]
    tot = cond.sum(axis=1, keepdims=True)
    return np.asarray(np.divide(cond, tot, out=np.full_like(cond, 1.0 / k), where=tot > 0), dtype=np.float64)


def _categorical_rows(cond: FloatArray, group: IntArray, rng: np.random.Generator) -> IntArray:
    """For each record r, an index j drawn with probability cond[group[r], j] (i.i.d.).

    Inverse CDF in one ``searchsorted``: row g's CDF is shifted by g, so the record with
    group g and uniform u finds its index in the concatenated, increasing array.
    """
    g, k = cond.shape
    cdf = np.cumsum(_conditional(cond), axis=1)
    cdf[:, -1] = 1.0
    flat = (cdf + np.arange(g, dtype=np.float64)[:, None]).ravel()
    u = rng.random(group.shape[0])
    pos = np.searchsorted(flat, group + u, side="right")
    return np.asarray(np.clip(pos - group * k, 0, k - 1), dtype=np.int64)


def systematic_counts(expected: FloatArray, rng: np.random.Generator) -> IntArray:
    """Integer counts c with Σ_j c_gj = Σ_j x_gj, each c_gj ∈ {⌊x_gj⌋, ⌈x_gj⌉}, E c_gj = x_gj.

    Parameters
    ----------
    expected : ndarray, shape (g, k)
        Expected counts x_gj ≥ 0 of each group g; every row sums to a whole number m_g.
    rng : numpy.random.Generator
        One uniform start u_g per group.

    Returns
    -------
    ndarray of int64, shape (g, k)

    Notes
    -----
    Systematic sampling [Mad49; Coc77, ch. 8]: with the cumulated X_j = x_1 + … + x_j
    (X_0 = 0, X_k = m) and one uniform u ∈ [0, 1), c_j = ⌊X_j + u⌋ − ⌊X_{j−1} + u⌋, the
    number of the points u, u + 1, …, u + m − 1 in [X_{j−1}, X_j). So Σ_j c_j = ⌊m + u⌋ − ⌊u⌋ = m.

    *Each count is a floor or a ceiling.* Write x_j = ⌊x_j⌋ + f_j; the interval
    [X_{j−1}, X_j) has length x_j, so it holds ⌊x_j⌋ or ⌊x_j⌋ + 1 of the unit-spaced points.

    *Unbiased.* E⌊X + u⌋ = X for every real X: with X = i + φ (i whole, φ ∈ [0, 1)),
    ⌊X + u⌋ = i + 1 exactly when u ≥ 1 − φ, probability φ, else i; so E⌊X + u⌋ = i + φ. Hence E c_j = X_j − X_{j−1} = x_j, and the
    rounding error e_j = c_j − x_j takes 1 − f_j with probability f_j and −f_j otherwise:
    E|e_j| = 2f_j(1 − f_j), Var e_j = f_j(1 − f_j), the least variance of any
    whole-number variable of mean x_j (so at most the multinomial's).

    Floating point: the cumulated sums are capped at m (they can exceed it by an ulp) and
    the last one is set to m, so the counts are ≥ 0 and sum to m exactly.

    Examples
    --------
    >>> c = systematic_counts(np.array([[0.5, 1.25, 2.25], [0.0, 0.0, 3.0]]), np.random.default_rng(0))
    >>> c.sum(axis=1).tolist(), bool((c[0] >= [0, 1, 2]).all() and (c[0] <= [1, 2, 3]).all()), c[1].tolist()
    ([4, 3], True, [0, 0, 3])
    """
    g = expected.shape[0]
    m = np.rint(expected.sum(axis=1))
    cum = np.minimum(np.cumsum(expected, axis=1), m[:, None])
    cum[:, -1] = m
    fl = np.floor(cum + rng.random((g, 1)))
    return np.asarray(np.diff(fl, axis=1, prepend=0.0), dtype=np.int64)


def stratified_rows(cond: FloatArray, group: IntArray, rng: np.random.Generator) -> IntArray:
    """For each record r, an index j such that the records of each group g hold the
    systematic rounding of m_g·p_gj (:func:`systematic_counts`), p_g = cond[g] normalised,
    m_g the number of records in group g, dealt to those records in a uniformly random
    order (independent of everything drawn before).

    Notes
    -----
    *Each record's law is p_g.* Given the group's counts c, the random order makes the
    record's value j with probability c_j/m_g; E c_j = m_g·p_gj, so P(value j) = p_gj.

    *Conditional independence.* The permutation is drawn afresh here, independent of the
    record's earlier columns, so given its group (the separator value) the record's new
    value is independent of them (module docstring).
    """
    g, k = cond.shape
    n = group.shape[0]
    m = np.bincount(group, minlength=g).astype(np.float64)
    counts = systematic_counts(_conditional(cond) * m[:, None], rng)
    values = np.repeat(np.tile(np.arange(k, dtype=np.int64), g), counts.ravel())  # grouped by g, in g order
    order = np.lexsort((np.asarray(rng.random(n)), group))  # the records by group, in a random order within each
    out = np.empty(n, dtype=np.int64)
    out[order] = values
    return out


def sample_model(model: GraphicalModel, rows: int, rng: np.random.Generator,
                 sampler: Sampler | str = Sampler.STRATIFIED) -> IntArray:
    """Draw ``rows`` records from ``model`` (module docstring).

    Parameters
    ----------
    model : GraphicalModel
    rows : int
        Number of synthetic records (any number: this is post-processing).
    rng : numpy.random.Generator
    sampler : Sampler or str
        ``"stratified"`` (controlled rounding per clique, the default) or ``"iid"``.

    Returns
    -------
    ndarray of int64, shape (rows, columns)
        Rows in a random order.
    """
    n = int(rows)
    if n < 0:
        raise QueryError(f"rows must be ≥ 0; got {rows}.")
    try:
        how = Sampler(sampler)
    except ValueError:
        raise QueryError(f"sampler must be one of {[s.value for s in Sampler]}; got {sampler!r}.") from None
    draw = stratified_rows if how is Sampler.STRATIFIED else _categorical_rows
    tree = model.tree
    dom = tree.domain
    out = np.zeros((n, len(dom)), dtype=np.int64)
    for i in tree.order:
        c = tree.cliques[i]
        s = tree.separator(i)
        new = tuple(a for a in c if a not in s)
        b = model.beliefs[i]
        # axes: separator first, then the new columns
        perm = [c.index(a) for a in s] + [c.index(a) for a in new]
        t = np.transpose(b, perm).reshape(dom.cells(s), dom.cells(new))
        if s:
            grp = np.ravel_multi_index(tuple(out[:, a] for a in s), dom.shape(s)).astype(np.int64)
        else:
            grp = np.zeros(n, dtype=np.int64)
        idx = draw(t, grp, rng)
        if new:
            cols = np.unravel_index(idx, dom.shape(new))
            for a, v in zip(new, cols, strict=True):
                out[:, a] = v
    return out
