"""I.i.d. records from a fitted graphical model, by ancestral sampling on its junction tree.

Each record is drawn independently: the root clique's columns jointly from β_root, then, in
breadth-first order, each clique's new columns from p(x_{C∖S} | x_S) = β_C/β_S given the
separator values already drawn for that record. Records are therefore i.i.d. draws from p
exactly (up to floating point), with no shared ordering between columns — unlike
Private-PGM 1.1's default ``synthetic_data(method="round")``, which rounds n̂·p(x_C∖S | x_S)
to integer counts per separator group and so gives every column the same within-group
order.

References
----------
.. [KF09] D. Koller, N. Friedman, *Probabilistic Graphical Models*, §12.1.1 (forward
   sampling), §10.2 (calibrated clique trees: p(x) = Π β_C / Π β_S).
"""

from __future__ import annotations

import numpy as np

from planner.core.errors import QueryError
from planner.planning.synth.domain import FloatArray, IntArray
from planner.planning.synth.inference import GraphicalModel


def _categorical_rows(cond: FloatArray, group: IntArray, rng: np.random.Generator) -> IntArray:
    """For each record r, an index j drawn with probability cond[group[r], j].

    Inverse CDF in one ``searchsorted``: row g's CDF is shifted by g, so the record with
    group g and uniform u finds its index in the concatenated, increasing array.
    """
    g, k = cond.shape
    tot = cond.sum(axis=1, keepdims=True)
    p = np.divide(cond, tot, out=np.full_like(cond, 1.0 / k), where=tot > 0)
    cdf = np.cumsum(p, axis=1)
    cdf[:, -1] = 1.0
    flat = (cdf + np.arange(g, dtype=np.float64)[:, None]).ravel()
    u = rng.random(group.shape[0])
    pos = np.searchsorted(flat, group + u, side="right")
    return np.asarray(np.clip(pos - group * k, 0, k - 1), dtype=np.int64)


def sample_model(model: GraphicalModel, rows: int, rng: np.random.Generator) -> IntArray:
    """Draw ``rows`` i.i.d. records from ``model``.

    Parameters
    ----------
    model : GraphicalModel
    rows : int
        Number of synthetic records (any number: this is post-processing).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int64, shape (rows, columns)
    """
    n = int(rows)
    if n < 0:
        raise QueryError(f"rows must be ≥ 0; got {rows}.")
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
        idx = _categorical_rows(t, grp, rng)
        if new:
            cols = np.unravel_index(idx, dom.shape(new))
            for a, v in zip(new, cols, strict=True):
                out[:, a] = v
    return out
