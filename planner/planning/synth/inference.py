"""Private-PGM-style estimation: a graphical model fitted to noisy marginals.

Given noisy marginals y_m = M_{r_m}(x) + N(0, σ_m²) we look for the distribution p over the
full domain, scaled to a total n̂, that minimises the Gaussian negative log-likelihood

    L(μ) = Σ_m ‖μ_{r_m} − y_m‖² / (2σ_m²),    μ_r = n̂ · Σ_{x ∉ r} p,

over the marginal polytope [MSM19, eq. (2)]. The minimiser can be taken in the
exponential family of a junction tree whose cliques cover every r_m [MSM19, Thm 1], so p is
kept as log-potentials θ_C on the junction tree's maximal cliques and fitted by entropic
mirror descent, θ ← θ − η ∇_μ L(μ(θ)) [MSM19, Alg. 1], accelerated with momentum and
adaptive restart [BT09, OC15], with μ(θ) from exact belief propagation (sum-product,
rescaled) and η chosen by backtracking (Armijo) line search.

Everything here is post-processing of noisy measurements: no data is read.

References
----------
.. [MSM19] R. McKenna, D. Sheldon, G. Miklau, "Graphical-model based estimation and
   inference for differential privacy", ICML 2019, arXiv:1901.09136 (Thm 1; Alg. 1).
.. [KF09] D. Koller, N. Friedman, *Probabilistic Graphical Models*, MIT Press 2009,
   §9.4.3 (min-fill elimination), §10.2 (clique trees, sum-product calibration).
.. [BT09] A. Beck, M. Teboulle, "A Fast Iterative Shrinkage-Thresholding Algorithm for
   Linear Inverse Problems", SIAM J. Imaging Sci. 2(1), 2009 (FISTA momentum).
.. [OC15] B. O'Donoghue, E. Candès, "Adaptive Restart for Accelerated Gradient Schemes",
   Found. Comput. Math. 15, 2015 (function-value restart).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from planner.core.errors import QueryError
from planner.planning.synth.domain import Clique, Domain, FloatArray

#: Default cap on the cells of one junction-tree clique (8 MB of float64 per table).
DEFAULT_MAX_CELLS = 1_000_000


@dataclass(frozen=True, slots=True)
class NoisyMarginal:
    """One noisy measurement: a marginal over ``clique`` plus Gaussian noise.

    Parameters
    ----------
    clique : tuple of int
        Sorted column indices.
    values : ndarray
        Noisy counts, shaped ``domain.shape(clique)``.
    sigma : float or ndarray
        Noise standard deviation, a scalar or one per cell (broadcastable to ``values``).
    """

    clique: Clique
    values: FloatArray
    sigma: float | FloatArray

    def __post_init__(self) -> None:
        c = tuple(int(j) for j in self.clique)
        if list(c) != sorted(set(c)):
            raise QueryError(f"clique must be sorted, without repeats; got {self.clique}.")
        s = np.asarray(self.sigma, dtype=np.float64)
        if not np.all(s > 0) or not np.all(np.isfinite(s)):
            raise QueryError("sigma must be > 0 and finite in every cell.")
        object.__setattr__(self, "clique", c)
        object.__setattr__(self, "values", np.asarray(self.values, dtype=np.float64))


# --------------------------------------------------------------------------- junction tree


def _log_cells(domain: Domain, attrs: Iterable[int]) -> float:
    return float(sum(math.log(domain.sizes[a]) for a in attrs))


def _triangulate(domain: Domain, cliques: Sequence[Clique]) -> list[Clique]:
    """Maximal cliques of a triangulation by greedy min-weight elimination [KF09, §9.4.3].

    Eliminates next the column whose elimination clique has the fewest cells (ties: fewest
    fill-in edges, then lowest index).
    """
    d = len(domain)
    logs = [math.log(k) for k in domain.sizes]
    adj: list[set[int]] = [set() for _ in range(d)]
    for c in cliques:
        for a in c:
            adj[a].update(b for b in c if b != a)
    remaining = set(range(d))
    found: list[frozenset[int]] = []
    while remaining:
        best: tuple[float, int, int] | None = None
        for v in remaining:
            nb = adj[v] & remaining
            w = logs[v] + sum(map(logs.__getitem__, nb))
            if best is not None and w > best[0] + 1e-12:
                continue
            fill = sum(len(nb - adj[a]) - 1 for a in nb) // 2
            key = (w, fill, v)
            if best is None or key < best:
                best = key
        assert best is not None
        v = best[2]
        nb = adj[v] & remaining
        found.append(frozenset(nb | {v}))
        for a in nb:
            adj[a].update(b for b in nb if b != a)
        remaining.discard(v)
    maximal = [c for c in found if not any(c < o for o in found)]
    out: list[Clique] = []
    for cm in maximal:
        t = tuple(sorted(cm))
        if t not in out:
            out.append(t)
    return out


@dataclass(frozen=True)
class JunctionTree:
    """A junction (clique) tree over a domain, rooted at clique 0.

    Attributes
    ----------
    cliques : tuple of Clique
        Maximal cliques of a triangulation of the measured cliques' graph.
    parent : tuple of int
        Parent of each clique (−1 for the root).
    order : tuple of int
        Cliques in breadth-first order from the root.
    """

    domain: Domain
    cliques: tuple[Clique, ...]
    parent: tuple[int, ...]
    order: tuple[int, ...]
    children: tuple[tuple[int, ...], ...] = field(repr=False)

    def separator(self, i: int) -> Clique:
        """Columns shared by clique ``i`` and its parent (empty for the root)."""
        p = self.parent[i]
        if p < 0:
            return ()
        return tuple(sorted(set(self.cliques[i]) & set(self.cliques[p])))

    def host(self, clique: Sequence[int]) -> int:
        """Index of the smallest junction-tree clique containing ``clique``, or −1."""
        s = set(clique)
        best, size = -1, math.inf
        for i, c in enumerate(self.cliques):
            if s <= set(c):
                n = self.domain.cells(c)
                if n < size:
                    best, size = i, n
        return best

    @property
    def total_cells(self) -> int:
        """Σ cells of the cliques: the model's size in float64 entries."""
        return sum(self.domain.cells(c) for c in self.cliques)

    @cached_property
    def _plan(self) -> _Plan:
        """Per-tree constants of belief propagation, computed once per tree."""
        return _make_plan(self)


def model_cells(domain: Domain, cliques: Iterable[Sequence[int]]) -> int:
    """Σ cells of the junction tree that covers ``cliques`` (no size check).

    Examples
    --------
    >>> model_cells(Domain.from_sizes([2, 3, 4]), [(0, 1), (1, 2)])
    18
    """
    cl = [tuple(sorted(c)) for c in cliques]
    return sum(domain.cells(c) for c in _triangulate(domain, cl))


def junction_tree(domain: Domain, cliques: Iterable[Sequence[int]], max_cells: int = DEFAULT_MAX_CELLS) -> JunctionTree:
    """Build a junction tree whose cliques cover every column and every given clique.

    Parameters
    ----------
    domain : Domain
    cliques : iterable of sequences of int
        Column sets that must each lie inside one junction-tree clique.
    max_cells : int
        Largest allowed number of cells of one junction-tree clique.

    Raises
    ------
    QueryError
        If a clique of the triangulation would exceed ``max_cells`` (memory guard).

    Notes
    -----
    Triangulate by greedy min-weight elimination, keep the maximal elimination cliques, and
    join them by a maximum-weight spanning tree on separator sizes (Kruskal), which has the
    running-intersection property [KF09, Thm 10.4]. Disconnected parts are joined through
    empty separators.

    Examples
    --------
    >>> jt = junction_tree(Domain.from_sizes([2, 2, 2]), [(0, 1), (1, 2)])
    >>> sorted(jt.cliques), jt.separator(1)
    ([(0, 1), (1, 2)], (1,))
    """
    cl = [tuple(sorted(set(int(a) for a in c))) for c in cliques]
    tri = _triangulate(domain, cl)
    for c in tri:
        n = domain.cells(c)
        if n > max_cells:
            names = [domain.names[a] for a in c]
            raise QueryError(
                f"the model needs a clique over {names} with {n:,} cells, more than max_cells="
                f"{max_cells:,}; measure fewer or smaller marginals, coarsen those columns, or "
                "raise max_cells if the memory is there."
            )
    # largest clique first: it becomes the root
    tri.sort(key=lambda c: (-domain.cells(c), c))
    m = len(tri)
    edges = sorted(
        ((len(set(tri[i]) & set(tri[j])), i, j) for i in range(m) for j in range(i + 1, m)),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    comp = list(range(m))

    def find(a: int) -> int:
        while comp[a] != a:
            comp[a] = comp[comp[a]]
            a = comp[a]
        return a

    nbrs: list[list[int]] = [[] for _ in range(m)]
    for _, i, j in edges:
        a, b = find(i), find(j)
        if a != b:
            comp[a] = b
            nbrs[i].append(j)
            nbrs[j].append(i)
    parent = [-1] * m
    order = [0]
    seen = {0}
    k = 0
    while k < len(order):
        i = order[k]
        k += 1
        for j in nbrs[i]:
            if j not in seen:
                seen.add(j)
                parent[j] = i
                order.append(j)
    children = tuple(tuple(j for j in order if parent[j] == i) for i in range(m))
    return JunctionTree(domain, tuple(tri), tuple(parent), tuple(order), children)


# --------------------------------------------------------------------------- factor helpers


def _expand_shape(domain: Domain, sub: Clique, full: Clique) -> tuple[int, ...]:
    """Shape that broadcasts a table over ``sub`` (⊆ ``full``, both sorted) to ``full``."""
    s = set(sub)
    return tuple(domain.sizes[a] if a in s else 1 for a in full)


def _axes_not_in(sub: Clique, full: Clique) -> tuple[int, ...]:
    s = set(sub)
    return tuple(i for i, a in enumerate(full) if a not in s)


# --------------------------------------------------------------------------- the model


@dataclass
class GraphicalModel:
    """A distribution p(x) ∝ exp(Σ_C θ_C(x_C)) on a junction tree, scaled to ``total`` rows.

    Attributes
    ----------
    tree : JunctionTree
    potentials : list of ndarray
        Log-potentials θ_C, one per junction-tree clique.
    total : float
        Estimated number of rows n̂.
    beliefs : list of ndarray
        Calibrated clique marginals (probabilities, each summing to 1).
    """

    tree: JunctionTree
    potentials: list[FloatArray]
    total: float
    beliefs: list[FloatArray] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.beliefs:
            self.beliefs = belief_propagation(self.tree, self.potentials)

    @property
    def domain(self) -> Domain:
        """The model's domain."""
        return self.tree.domain

    def marginal(self, clique: Sequence[int]) -> FloatArray:
        """Model counts n̂·p(x_C) over any column set ``clique`` (sorted), by variable
        elimination on the calibrated tree when no single clique contains it."""
        c = tuple(sorted(int(a) for a in clique))
        return self.total * project(self.tree, self.beliefs, c)


@dataclass(frozen=True, slots=True)
class _Edge:
    child: int
    parent: int
    child_axes: tuple[int, ...]  # axes of the child's table summed out for the message up
    parent_axes: tuple[int, ...]  # axes of the parent's table summed out for the message down
    in_parent: tuple[int, ...]  # shape broadcasting a separator table into the parent
    in_child: tuple[int, ...]  # ... into the child


def _schedule(tree: JunctionTree) -> tuple[_Edge, ...]:
    d = tree.domain
    out = []
    for i in reversed(tree.order):
        p = tree.parent[i]
        if p < 0:
            continue
        s, c, cp = tree.separator(i), tree.cliques[i], tree.cliques[p]
        out.append(_Edge(i, p, _axes_not_in(s, c), _axes_not_in(s, cp), _expand_shape(d, s, cp), _expand_shape(d, s, c)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Plan:
    """A junction tree's cliques laid end to end in one flat float64 vector (θ, beliefs and
    gradients are views of such vectors), and its message schedule."""

    shapes: tuple[tuple[int, ...], ...]
    bounds: tuple[tuple[int, int], ...]  # [start, stop) of each clique in the flat vector
    starts: npt.NDArray[np.intp]
    sizes: npt.NDArray[np.intp]
    total: int
    sched: tuple[_Edge, ...]

    def views(self, flat: FloatArray) -> list[FloatArray]:
        """Each clique's table as a view of ``flat``."""
        return [flat[a:b].reshape(sh) for (a, b), sh in zip(self.bounds, self.shapes, strict=True)]


def _make_plan(tree: JunctionTree) -> _Plan:
    shapes = tuple(tree.domain.shape(c) for c in tree.cliques)
    sizes = [math.prod(sh) for sh in shapes]
    starts = [0]
    for n in sizes[:-1]:
        starts.append(starts[-1] + n)
    bounds = tuple((a, a + n) for a, n in zip(starts, sizes, strict=True))
    return _Plan(shapes, bounds, np.array(starts, dtype=np.intp), np.array(sizes, dtype=np.intp), sum(sizes), _schedule(tree))


def _flatten(plan: _Plan, tables: Sequence[FloatArray]) -> FloatArray:
    """The tables (one per clique, in order) as one new flat float64 vector."""
    if len(tables) != len(plan.shapes):
        raise QueryError(f"expected {len(plan.shapes)} clique tables; got {len(tables)}.")
    flat = np.empty(plan.total)
    for (a, b), sh, t in zip(plan.bounds, plan.shapes, tables, strict=True):
        flat[a:b].reshape(sh)[...] = t
    return flat


def belief_propagation(tree: JunctionTree, potentials: Sequence[FloatArray]) -> list[FloatArray]:
    """Calibrated clique marginals of p ∝ exp(Σθ_C) by sum-product on the tree [KF09, §10.2].

    Notes
    -----
    φ_C = exp(θ_C − max θ_C). Upward pass (leaves first): β_C ← φ_C Π_{children} m,
    m_{C→P}(x_S) = Σ_{x_{C∖S}} β_C, normalised to sum 1. Downward pass (root first):
    m_{P→C} = Σ_{x_{P∖S}} β_P / m_{C→P} (0 where m_{C→P} = 0, where β_C vanishes anyway),
    β_C ← β_C · m_{P→C}. Each β_C is finally normalised to sum 1. Messages and running
    products are rescaled, so nothing under/overflows for a θ range below ~700 nats within
    a clique; a clique that still underflows to all zeros yields NaN beliefs, which the
    estimator's line search rejects (it then halves the step).

    Examples
    --------
    >>> jt = junction_tree(Domain.from_sizes([2, 2]), [(0, 1)])
    >>> [b.tolist() for b in belief_propagation(jt, [np.log(np.array([[1.0, 3.0], [2.0, 2.0]]))])]
    [[[0.125, 0.375], [0.25, 0.25]]]
    """
    plan = tree._plan
    return _bp_flat(plan, _flatten(plan, potentials))


def _bp_flat(plan: _Plan, theta: FloatArray) -> list[FloatArray]:
    """:func:`belief_propagation` of the potentials laid out flat by ``plan`` (``theta`` is
    not modified). The beliefs are views of one new flat vector.

    Every float is computed as by one table per clique: maxima are exact in any grouping,
    and the element-wise operations (subtract, exp, multiply, divide) give each element the
    same value whatever the array it sits in; every sum is taken over the same table, shape
    and axes as before (tests/engine/test_synth_identity.py checks the bits).
    """
    sched = plan.sched
    add, big = np.add.reduce, np.maximum.reduce  # what ndarray.sum and ndarray.max call
    # φ_C = exp(θ_C − max θ_C), one exp over all cliques
    flat = np.empty(plan.total)
    for (lo, hi), top in zip(plan.bounds, np.maximum.reduceat(theta, plan.starts).tolist(), strict=True):
        np.subtract(theta[lo:hi], top, out=flat[lo:hi])
    np.exp(flat, out=flat)
    acc = plan.views(flat)
    up: list[FloatArray] = []
    for e in sched:
        msg = add(acc[e.child], axis=e.child_axes) if e.child_axes else acc[e.child].copy()
        tot = add(msg, axis=None)
        msg = msg / tot if tot > 0 else msg
        up.append(msg)
        a = acc[e.parent]
        np.multiply(a, msg.reshape(e.in_parent), out=a)
        top = big(a, axis=None)
        if 0.0 < top < 1e-100:  # keep the running product away from underflow
            a /= top
    scratch = np.empty(max(plan.sizes) if len(plan.sizes) else 0)
    for k in range(len(sched) - 1, -1, -1):
        e = sched[k]
        u = up[k].reshape(e.in_parent)
        a = acc[e.parent]
        pos = u > 0
        if pos.all():
            q = np.divide(a, u, out=scratch[: a.size].reshape(a.shape))
        else:
            q = np.divide(a, u, out=np.zeros_like(a), where=pos)
        msg = add(q, axis=e.parent_axes) if e.parent_axes else q
        tot = add(msg, axis=None)
        msg = msg / tot if tot > 0 else msg
        c = acc[e.child]
        np.multiply(c, msg.reshape(e.in_child), out=c)
    for i, b in enumerate(acc):
        z = add(b, axis=None)
        if z > 0:
            b /= z
        else:
            acc[i] = np.full_like(b, np.nan)
    return acc


def project(tree: JunctionTree, beliefs: Sequence[FloatArray], clique: Clique, max_cells: int = DEFAULT_MAX_CELLS) -> FloatArray:
    """p(x_C) for any sorted column set C from calibrated beliefs (probabilities).

    Notes
    -----
    p(x) = β_root Π_{C≠root} β_C/β_{S_C} on a calibrated tree. Root the tree at a clique
    holding one wanted column, drop every subtree that introduces no wanted column (its
    conditionals sum to 1), and eliminate bottom-up with ``numpy.einsum``.
    """
    d = tree.domain
    h = tree.host(clique)
    if h >= 0:
        return np.asarray(np.sum(beliefs[h], axis=_axes_not_in(clique, tree.cliques[h])))
    want = set(clique)
    m = len(tree.cliques)
    nbrs: list[list[int]] = [[] for _ in range(m)]
    for i, p in enumerate(tree.parent):
        if p >= 0:
            nbrs[i].append(p)
            nbrs[p].append(i)
    root = next(i for i, c in enumerate(tree.cliques) if clique[0] in c)
    parent = [-1] * m
    order = [root]
    seen = {root}
    k = 0
    while k < len(order):
        i = order[k]
        k += 1
        for j in nbrs[i]:
            if j not in seen:
                seen.add(j)
                parent[j] = i
                order.append(j)
    kids: list[list[int]] = [[] for _ in range(m)]
    for j in order:
        if parent[j] >= 0:
            kids[parent[j]].append(j)
    sub_vars: list[set[int]] = [set(c) for c in tree.cliques]
    for i in reversed(order):
        if parent[i] >= 0:
            sub_vars[parent[i]] |= sub_vars[i]
    msgs: dict[int, tuple[FloatArray, Clique]] = {}
    for i in reversed(order):
        c = tree.cliques[i]
        p = parent[i]
        sep = tuple(sorted(set(c) & set(tree.cliques[p]))) if p >= 0 else ()
        if p >= 0 and not ((sub_vars[i] - set(sep)) & want):
            continue
        # conditional p(x_{C∖S} | x_S) (root: the joint belief)
        f = beliefs[i]
        if p >= 0:
            ps = np.sum(f, axis=_axes_not_in(sep, c), keepdims=True)
            f = np.divide(f, ps, out=np.zeros_like(f), where=ps > 0)
        ops: list[object] = [f, list(c)]
        scope = set(c)
        for j in kids[i]:
            if j in msgs:
                mv, ms = msgs[j]
                ops += [mv, list(ms)]
                scope |= set(ms)
        keep = tuple(sorted((set(sep) | want) & scope))
        if d.cells(keep) > max_cells:
            raise QueryError(
                f"projecting onto {[d.names[a] for a in clique]} needs an intermediate table of "
                f"{d.cells(keep):,} cells (> max_cells={max_cells:,})."
            )
        # einsum sublists need small integers: relabel columns locally
        labels = {a: n for n, a in enumerate(sorted(scope))}
        args: list[object] = []
        for t in range(0, len(ops), 2):
            args += [ops[t], [labels[a] for a in ops[t + 1]]]  # type: ignore[attr-defined]
        args.append([labels[a] for a in keep])
        msgs[i] = (np.asarray(np.einsum(*args)), keep)  # type: ignore[call-overload]
    res, scope_r = msgs[root]
    res = np.sum(res, axis=_axes_not_in(clique, scope_r))
    return np.asarray(res, dtype=np.float64)


# --------------------------------------------------------------------------- estimation


@dataclass(frozen=True, slots=True)
class _Term:
    host: int
    axes: tuple[int, ...]
    expand: tuple[int, ...]
    y: FloatArray
    w: FloatArray  # 1/σ² per cell


def estimate_total(measurements: Sequence[NoisyMarginal]) -> float:
    """Inverse-variance weighted mean of the measurements' noisy totals (at least 1).

    Notes
    -----
    Σ y_m ~ N(n, Σ_cells σ_m²), independent across m; the weighted mean with weights
    1/Var(Σ y_m) is the minimum-variance unbiased combination (post-processing).

    Examples
    --------
    >>> ms = [NoisyMarginal((0,), np.array([4.0, 6.0]), 1.0), NoisyMarginal((1,), np.array([12.0]), 1.0)]
    >>> estimate_total(ms)  # (10/2 + 12/1) / (1/2 + 1)
    11.333333333333334
    """
    num = den = 0.0
    for m in measurements:
        var = float(np.sum(np.broadcast_to(np.asarray(m.sigma, dtype=np.float64) ** 2, m.values.shape)))
        num += float(m.values.sum()) / var
        den += 1.0 / var
    if den == 0.0:
        raise QueryError("estimate_total needs at least one measurement.")
    return max(num / den, 1.0)


def _warm_potentials(tree: JunctionTree, old: GraphicalModel) -> list[FloatArray]:
    """θ on ``tree`` (which must cover every clique of ``old.tree``) reproducing ``old``:
    log p_old = Σ_C log β_C − Σ_S log β_S, each term added to a clique that contains it."""
    d = tree.domain
    theta = [np.zeros(d.shape(c)) for c in tree.cliques]
    tiny = 1e-300
    ot = old.tree
    for i, c in enumerate(ot.cliques):
        h = tree.host(c)
        theta[h] += np.log(np.maximum(old.beliefs[i], tiny)).reshape(_expand_shape(d, c, tree.cliques[h]))
        if ot.parent[i] >= 0:
            s = ot.separator(i)
            bs = old.beliefs[i].sum(axis=_axes_not_in(s, c)) if len(s) < len(c) else old.beliefs[i]
            hs = tree.host(s)
            theta[hs] -= np.log(np.maximum(bs, tiny)).reshape(_expand_shape(d, s, tree.cliques[hs]))
    return theta


def estimate(
    domain: Domain,
    measurements: Sequence[NoisyMarginal],
    *,
    total: float | None = None,
    cliques: Iterable[Sequence[int]] = (),
    iters: int = 2000,
    tol: float = 0.1,
    rtol: float = 0.0,
    warm_start: GraphicalModel | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    accelerate: bool = True,
) -> GraphicalModel:
    """Fit a graphical model to noisy marginals by mirror descent [MSM19, Alg. 1].

    Parameters
    ----------
    domain : Domain
    measurements : sequence of NoisyMarginal
    total : float, optional
        Public row count; estimated from the measurements when ``None``.
    cliques : iterable of column sets, optional
        Extra column sets the model must hold jointly.
    iters : int
        Maximum mirror-descent iterations.
    tol : float
        Stop when the loss decreased by less than ``tol`` over 10 iterations. The loss is a
        Gaussian negative log-likelihood (nats), so 0.1 nats is far below the fit's noise.
    rtol : float
        Also stop when the loss decreased by less than ``rtol`` times its value over 10
        iterations (a relative convergence stop; 0: ``tol`` alone).
    warm_start : GraphicalModel, optional
        Start from this model: the new junction tree also covers its cliques, and θ is
        set so that the fit starts at exactly the old distribution.
    max_cells : int
        Memory guard on every junction-tree clique (QueryError if exceeded).
    accelerate : bool
        Nesterov/FISTA momentum on θ with adaptive (function-value) restart [BT09, OC15]:
        about 10× fewer iterations than plain mirror descent for the same loss.

    Returns
    -------
    GraphicalModel

    Notes
    -----
    Minimises L(μ) = Σ_m ‖μ_{r_m} − y_m‖²/(2σ_m²) over μ = n̂·p(θ). Each step is
    θ_C ← θ_C − η Σ_{m hosted by C} expand(∇_{μ_r} L), μ ← BP(θ), accepted when
    L(μ_new) ≤ L(μ) − ½⟨∇L, μ − μ_new⟩ (else η halves; after an accepted step η grows).
    With ``accelerate`` the step is taken from the extrapolated point
    y = θ_k + ((t_k − 1)/t_{k+1})(θ_k − θ_{k−1}), t_{k+1} = (1 + √(1 + 4t_k²))/2, and the
    momentum is dropped whenever the loss goes up.

    Examples
    --------
    With no noise worth speaking of, the fit returns the measured marginals:

    >>> d = Domain.from_sizes([2, 2])
    >>> y = np.array([[30.0, 10.0], [20.0, 40.0]])
    >>> m = estimate(d, [NoisyMarginal((0, 1), y, 1e-3)], iters=500)
    >>> np.round(m.marginal((0, 1)), 3).tolist()
    [[30.0, 10.0], [20.0, 40.0]]
    """
    if not measurements:
        raise QueryError("estimate needs at least one measurement.")
    need = [m.clique for m in measurements] + [tuple(sorted(set(int(a) for a in c))) for c in cliques]
    n_hat = float(total) if total is not None else estimate_total(measurements)
    tree: JunctionTree | None = None
    if warm_start is not None and all(warm_start.tree.host(c) >= 0 for c in need):
        tree = warm_start.tree
        theta = _flatten(tree._plan, warm_start.potentials)
    else:
        extra = list(warm_start.tree.cliques) if warm_start is not None else []
        tree = junction_tree(domain, need + extra, max_cells=max_cells)
        if warm_start is not None:
            theta = _flatten(tree._plan, _warm_potentials(tree, warm_start))
        else:
            theta = np.zeros(tree._plan.total)
    plan = tree._plan
    # θ, its gradient and the momentum point are flat vectors laid out by ``plan`` (one
    # element-wise operation per step instead of one per clique: the same floats)
    terms = []
    for m in measurements:
        if m.values.shape != domain.shape(m.clique):
            raise QueryError(
                f"measurement over {m.clique} has shape {m.values.shape}; expected {domain.shape(m.clique)}."
            )
        h = tree.host(m.clique)
        w = np.broadcast_to(1.0 / np.asarray(m.sigma, dtype=np.float64) ** 2, m.values.shape)
        terms.append(
            _Term(h, _axes_not_in(m.clique, tree.cliques[h]), _expand_shape(domain, m.clique, tree.cliques[h]), m.values, np.array(w))
        )

    y_flat = np.concatenate([t.y.ravel() for t in terms])
    w_flat = np.concatenate([t.w.ravel() for t in terms])
    bounds = np.cumsum([0] + [t.y.size for t in terms])
    spans = [(int(bounds[k]), int(bounds[k + 1])) for k in range(len(terms))]
    hosts = [t.host for t in terms]
    sum_axes = [t.axes for t in terms]
    expands = [t.expand for t in terms]

    add = np.add.reduce  # what ndarray.sum calls

    def evaluate(beliefs: list[FloatArray]) -> tuple[float, FloatArray, FloatArray]:
        """Loss, ∇_μ L per measured cell (flat) and μ."""
        mu = np.concatenate(
            [(add(beliefs[h], axis=ax) if ax else beliefs[h]).ravel() for h, ax in zip(hosts, sum_axes, strict=True)]
        )
        mu *= n_hat
        r = mu - y_flat
        g = w_flat * r
        loss = 0.5 * float(g @ r)
        return loss, g, mu

    def gradient(g: FloatArray) -> FloatArray:
        """∇_θ: each measurement's ∇_μ L expanded into its host clique (flat). Built only
        for the points a step is taken from, not for every trial point."""
        grad = np.zeros(plan.total)
        gv = plan.views(grad)
        for h, (lo, hi), ex in zip(hosts, spans, expands, strict=True):
            gv[h] += g[lo:hi].reshape(ex)
        return grad

    beliefs = _bp_flat(plan, theta)
    loss, grads, mus = evaluate(beliefs)
    eta = 1.0 / (n_hat * max(float(np.max(t.w)) for t in terms)) * max(domain.cells(c) for c in tree.cliques)
    history = [loss]
    # accelerated: y is the extrapolated point (θ + momentum); plain MD keeps y = θ
    y_theta, y_beliefs, y_loss, y_grads, y_mus = theta, beliefs, loss, grads, mus
    t_k = 1.0
    for _ in range(iters):
        y_grad = gradient(y_grads)  # y_grads holds ∇_μ L at y, i.e. w·(μ_y − y)
        for _ls in range(30):
            cand = y_theta - eta * y_grad
            b2 = _bp_flat(plan, cand)
            l2, g2, mus2 = evaluate(b2)
            dec = float(y_grads @ (y_mus - mus2))
            if np.isfinite(l2) and l2 <= y_loss - 0.5 * dec:
                break
            eta *= 0.5
        else:
            break
        if accelerate and l2 > loss:
            # adaptive restart [OC15]: drop the momentum, step again from θ
            y_theta, y_beliefs, y_loss, y_grads, y_mus = theta, beliefs, loss, grads, mus
            t_k = 1.0
            continue
        prev = theta
        theta, beliefs, loss, grads, mus = cand, b2, l2, g2, mus2
        eta *= 1.5 if not accelerate else 1.1
        history.append(loss)
        if len(history) > 10 and history[-11] - loss <= max(tol, rtol * loss):
            break
        if accelerate:
            t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t_k * t_k))
            beta = (t_k - 1.0) / t_next
            t_k = t_next
            if beta > 0:
                y_theta = theta + beta * (theta - prev)
                y_beliefs = _bp_flat(plan, y_theta)
                y_loss, y_grads, y_mus = evaluate(y_beliefs)
                if not np.isfinite(y_loss):
                    y_theta, y_beliefs, y_loss, y_grads, y_mus = theta, beliefs, loss, grads, mus
                    t_k = 1.0
                continue
        y_theta, y_beliefs, y_loss, y_grads, y_mus = theta, beliefs, loss, grads, mus
    model = GraphicalModel(tree, plan.views(theta), n_hat, beliefs)
    return model
