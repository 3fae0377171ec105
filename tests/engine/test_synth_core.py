"""The synthetic-data engine (planner/planning/synth): inference, sampling, the mechanisms'
planned invocations, and the accuracy formulas against Monte Carlo.

Expected numbers: hand calculations in each test (σ = Δ₂√(d/(2fρ)), E|N(0, σ²)| = σ√(2/π)),
brute-force marginals of small models, and Monte Carlo with fixed seeds within 5 standard
errors (docs/engineering.md §2).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from planner.core.errors import QueryError
from planner.planning.synth.accuracy import (
    combined_tvd,
    measurement_tvd,
    release_accuracy,
    sampling_tvd,
    sampling_tvd_bound,
)
from planner.planning.synth.aim import AIMOptions, aim, aim_events
from planner.planning.synth.domain import Domain
from planner.planning.synth.generator import Generator, GeneratorSpec, choose
from planner.planning.synth.inference import (
    NoisyMarginal,
    estimate,
    estimate_total,
    junction_tree,
    model_cells,
    project,
)
from planner.planning.synth.marginals import RecordSource, TableSource, average_tvd, marginal, tvd
from planner.planning.synth.mst import ORIGINAL_SPLIT, MSTOptions, mst, mst_events
from planner.planning.synth.privacy import (
    BUDGET_SLACK,
    ExponentialSelection,
    GaussianMeasurement,
    NumpyNoise,
    marginal_sensitivity,
    total_rho,
)
from planner.planning.synth.sample import sample_model

DOM = Domain.from_sizes([3, 4, 6, 2, 5])


def _data(n: int = 3000, seed: int = 0) -> np.ndarray:
    """Columns that depend on each other along a chain (a spanning tree can hold them)."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, len(DOM)), dtype=np.int64)
    x[:, 0] = rng.integers(0, 3, n)
    x[:, 1] = (x[:, 0] + rng.integers(0, 2, n)) % 4
    x[:, 2] = (2 * x[:, 1] + rng.integers(0, 2, n)) % 6
    x[:, 3] = rng.integers(0, 2, n)
    x[:, 4] = (x[:, 2] + x[:, 3] + rng.integers(0, 2, n)) % 5
    return x


def _uniform(seed: int, n: int = 500) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, k, n) for k in DOM.sizes], axis=1)


def _correlated(n: int, sizes: list[int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.zeros((n, len(sizes)), dtype=np.int64)
    x[:, 0] = rng.integers(0, sizes[0], n)
    for j in range(1, len(sizes)):
        x[:, j] = (x[:, j - 1] + x[:, max(0, j - 2)] + rng.integers(0, 2, n)) % sizes[j]
    return x


# ---------------------------------------------------------------- inference
@pytest.mark.parametrize(
    "cliques",
    [
        [(0, 1), (1, 2), (2, 3), (3, 4)],  # a tree (MST)
        [(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (1, 4)],  # cycles: triangulated junction tree
        [(0,), (1,), (2,), (3,), (4,)],  # independent
    ],
)
def test_inference_recovers_measured_marginals_without_noise(cliques: list[tuple[int, ...]]) -> None:
    dom = Domain.from_sizes([3, 4, 2, 5, 3])
    x = _correlated(5000, list(dom.sizes), 0)
    ms = [NoisyMarginal(c, marginal(x, dom, c), 1e-3) for c in cliques]
    model = estimate(dom, ms, iters=3000, tol=0.0)
    assert model.total == pytest.approx(5000, rel=1e-6)
    for c in cliques:
        assert np.abs(model.marginal(c) - marginal(x, dom, c)).max() < 0.5  # counts
    for j in range(len(dom)):
        assert tvd(model.marginal((j,)), marginal(x, dom, (j,))) < 1e-4


def test_inference_of_noisy_measurements_is_closer_to_the_truth_than_the_raw_tables() -> None:
    dom = Domain.from_sizes([4, 4, 4])
    x = _correlated(3000, list(dom.sizes), 1)
    rng = np.random.default_rng(2)
    cl = [(0, 1), (1, 2), (0,), (1,), (2,)]
    ms = [NoisyMarginal(c, marginal(x, dom, c) + rng.normal(0, 20, dom.shape(c)), 20.0) for c in cl]
    model = estimate(dom, ms)
    for m in ms:
        fit = model.marginal(m.clique)
        assert (fit >= 0).all()
        truth = marginal(x, dom, m.clique)
        assert np.linalg.norm(fit - truth) < np.linalg.norm(m.values - truth)


def test_projection_across_cliques_is_the_chain_rule_by_brute_force() -> None:
    dom = Domain.from_sizes([3, 3, 3, 3])
    x = _correlated(4000, list(dom.sizes), 3)
    cl = [(0, 1), (1, 2), (2, 3)]
    model = estimate(dom, [NoisyMarginal(c, marginal(x, dom, c), 1e-3) for c in cl], iters=2000, tol=0.0)
    p01 = model.marginal((0, 1)) / model.total
    p12 = model.marginal((1, 2)) / model.total
    p23 = model.marginal((2, 3)) / model.total
    c21 = p12 / p12.sum(axis=1, keepdims=True)
    c32 = p23 / p23.sum(axis=1, keepdims=True)
    brute = np.einsum("ab,bc,cd->ad", p01, c21, c32)  # Σ p(0,1) p(2|1) p(3|2)
    assert np.allclose(model.marginal((0, 3)) / model.total, brute, atol=1e-10)
    for pair in itertools.combinations(range(4), 2):
        assert model.marginal(pair).sum() == pytest.approx(model.total)


def test_memory_guard_refuses_an_oversized_clique_before_allocating_it() -> None:
    dom = Domain.from_sizes([100, 100, 100, 2])
    with pytest.raises(QueryError, match="max_cells"):
        junction_tree(dom, [(0, 1), (1, 2), (0, 2)], max_cells=500_000)
    ms = [NoisyMarginal(c, np.zeros(dom.shape(c)), 1.0) for c in [(0, 1), (1, 2), (0, 2)]]
    with pytest.raises(QueryError, match="max_cells"):
        estimate(dom, ms, max_cells=500_000)
    assert model_cells(dom, [(0, 1), (1, 2)]) == 20_002  # 100·100 twice + the lone column of 2
    jt = junction_tree(dom, [(0, 1), (1, 2)], max_cells=20_000)
    with pytest.raises(QueryError, match="max_cells"):
        project(jt, [np.full(dom.shape(c), 1.0 / dom.cells(c)) for c in jt.cliques], (0, 2), max_cells=5_000)


def test_total_estimate_is_inverse_variance_weighted() -> None:
    ms = [NoisyMarginal((0,), np.array([40.0, 60.0]), 2.0), NoisyMarginal((0, 1), np.full((2, 2), 30.0), 1.0)]
    # totals 100 (variance 2·2² = 8) and 120 (variance 4·1² = 4): (100/8 + 120/4)/(1/8 + 1/4)
    assert estimate_total(ms) == pytest.approx((100 / 8 + 120 / 4) / (1 / 8 + 1 / 4))


# ---------------------------------------------------------------- sampling
def _tvd_p(counts: np.ndarray, p: np.ndarray) -> float:
    return 0.5 * float(np.abs(counts / counts.sum() - p).sum())


def test_sampler_invents_no_correlation_between_independent_columns() -> None:
    """Each pair's 2-way TVD between N synthetic rows and the model equals that of N direct
    multinomial draws from the model's 2-way marginal, pair by pair, within 5 s.e. (a
    sampler that gives columns a shared within-group order fails by ~0.3)."""
    dom = Domain.from_sizes([4, 5, 3, 6])
    rng = np.random.default_rng(0)
    probs = [rng.dirichlet(np.ones(k)) for k in dom.sizes]
    ms = [NoisyMarginal((j,), 1e5 * p, 1e-2) for j, p in enumerate(probs)]
    for a, b in [(0, 1), (1, 2)]:
        ms.append(NoisyMarginal((a, b), 1e5 * np.outer(probs[a], probs[b]), 1e-2))
    model = estimate(dom, ms, iters=500, tol=0.0)
    n_rows, reps = 800, 150
    pairs = list(itertools.combinations(range(len(dom)), 2))
    ours = np.empty((reps, len(pairs)))
    ref = np.empty((reps, len(pairs)))
    exact = {p: model.marginal(p) / model.total for p in pairs}
    for r in range(reps):
        s = sample_model(model, n_rows, rng)
        for i, p in enumerate(pairs):
            ours[r, i] = _tvd_p(marginal(s, dom, p), exact[p])
            ref[r, i] = _tvd_p(rng.multinomial(n_rows, exact[p].ravel()).astype(float), exact[p].ravel())
    for i in range(len(pairs)):
        d = ours[:, i] - ref[:, i]
        se = d.std(ddof=1) / np.sqrt(reps)
        assert abs(d.mean()) <= 5 * se, (pairs[i], ours[:, i].mean(), ref[:, i].mean(), se)


def test_sampler_draws_any_number_of_exchangeable_rows() -> None:
    dom = Domain.from_sizes([3, 3])
    rng = np.random.default_rng(1)
    y = np.array([[30.0, 10.0, 0.0], [5.0, 20.0, 5.0], [0.0, 10.0, 20.0]])
    model = estimate(dom, [NoisyMarginal((0, 1), y, 1e-2)], iters=500)
    s = sample_model(model, 20_000, rng)
    assert tvd(marginal(s[:10_000], dom, (0, 1)), marginal(s[10_000:], dom, (0, 1))) < 0.03
    for v in range(3):  # within each value of column 0, column 1 is not sorted
        assert (np.diff(s[s[:, 0] == v, 1]) != 0).mean() > 0.3
    assert sample_model(model, 0, rng).shape == (0, 2)
    assert sample_model(model, 7, rng).shape == (7, 2)
    assert tvd(marginal(s, dom, (0, 1)), y) < 0.02


# ---------------------------------------------------------------- the mechanisms
class Recorder:
    """Wraps the numpy noise and records every invocation's parameters."""

    def __init__(self, seed: int) -> None:
        self.noise = NumpyNoise(np.random.default_rng(seed))
        self.calls: list[tuple[object, ...]] = []

    def measure(self, x: np.ndarray, sigma: float) -> np.ndarray:
        self.calls.append(("G", sigma))
        return self.noise.measure(x, sigma)

    def select(self, s: np.ndarray, eps: float, sens: float) -> int:
        self.calls.append(("E", eps, sens))
        return self.noise.select(s, eps, sens)


def _planned(events: list[object]) -> list[tuple[object, ...]]:
    return [("G", e.sigma) if isinstance(e, GaussianMeasurement) else ("E", e.epsilon, e.sensitivity)  # type: ignore[union-attr]
            for e in events]


@pytest.mark.parametrize("rho", [0.01, 0.3, 2.0])
@pytest.mark.parametrize("opts", [MSTOptions(), MSTOptions(split=ORIGINAL_SPLIT),
                                  MSTOptions(relation="substitute", rows_per_person=3)])  # type: ignore[arg-type]
def test_mst_invokes_exactly_its_planned_list_whatever_the_data(rho: float, opts: MSTOptions) -> None:
    plan = mst_events(rho, DOM, opts)
    for seed in range(3):  # three datasets, different selections, the same invocations
        rec = Recorder(seed)
        fit = mst(RecordSource(_uniform(seed), DOM), rho, options=opts, rng=np.random.default_rng(seed),
                  measure=rec.measure, select=rec.select)
        assert rec.calls == _planned(list(plan))
        assert fit.events == plan
    assert total_rho(plan) == pytest.approx(rho * (1 - BUDGET_SLACK), rel=1e-12)
    assert total_rho(plan) <= rho


def test_mst_split_is_the_declared_one_and_thirds_give_the_original() -> None:
    rho, d = 0.6, len(DOM)
    r = rho * (1 - BUDGET_SLACK)
    for split in [ORIGINAL_SPLIT, (0.25, 0.1, 0.65), (0.5, 0.05, 0.45)]:
        ev = mst_events(rho, DOM, MSTOptions(split=split))
        one = sum(e.rho for e in ev if isinstance(e, GaussianMeasurement) and e.round is None)
        sel = sum(e.rho for e in ev if isinstance(e, ExponentialSelection))
        two = sum(e.rho for e in ev if isinstance(e, GaussianMeasurement) and e.round is not None)
        assert (one, sel, two) == pytest.approx(tuple(f * r for f in split), rel=1e-12)
        assert sum(isinstance(e, ExponentialSelection) for e in ev) == d - 1
    # the original MST (McKenna et al. 2021): σ = √(3d/(2ρ)) per 1-way, ε = √(8ρ/(3(d−1))) per round
    ev = mst_events(rho, DOM, MSTOptions(split=ORIGINAL_SPLIT))
    assert ev[0].sigma == pytest.approx(math.sqrt(3 * d / (2 * r)))  # type: ignore[union-attr]
    assert ev[d].epsilon == pytest.approx(math.sqrt(8 * r / (3 * (d - 1))))  # type: ignore[union-attr]


@pytest.mark.parametrize("rho", [0.02, 1.0])
def test_aim_invokes_exactly_its_planned_list_whatever_the_data(rho: float) -> None:
    opts = AIMOptions(rounds=6, round_iters=20, final_iters=50)
    plan = aim_events(rho, DOM, opts)
    for seed in range(2):
        rec = Recorder(seed)
        fit = aim(RecordSource(_uniform(seed), DOM), rho, options=opts, rng=np.random.default_rng(seed),
                  measure=rec.measure, select=rec.select)
        assert rec.calls == _planned(list(plan))
        assert fit.events == plan
    r = rho * (1 - BUDGET_SLACK)
    one = sum(e.rho for e in plan if isinstance(e, GaussianMeasurement) and e.round is None)
    sel = sum(e.rho for e in plan if isinstance(e, ExponentialSelection))
    assert one == pytest.approx(opts.one_way_fraction * r)
    assert sel == pytest.approx((1 - opts.one_way_fraction) * opts.selection_fraction * r)
    assert total_rho(plan) == pytest.approx(r, rel=1e-12)


def test_sensitivities_scale_with_c_and_the_relation() -> None:
    assert (marginal_sensitivity("add_remove", 4).l1, marginal_sensitivity("add_remove", 4).l2) == (4.0, 4.0)
    s = marginal_sensitivity("substitute", 2)
    assert (s.l1, s.l2) == (4.0, pytest.approx(2 * math.sqrt(2)))
    a = mst_events(0.5, DOM, MSTOptions(rows_per_person=1))
    b = mst_events(0.5, DOM, MSTOptions(rows_per_person=3))
    assert [e.rho for e in a] == pytest.approx([e.rho for e in b])  # σ scales with Δ₂ = c: same ρ
    assert b[0].sigma == pytest.approx(3 * a[0].sigma)  # type: ignore[union-attr]
    assert all(e.sensitivity == 3.0 for e in b if isinstance(e, ExponentialSelection))
    # c rows of one person in one cell move the count vector by c in one coordinate: ‖v‖₂ = c
    v = np.zeros(8)
    v[3] = 5
    assert np.linalg.norm(v, 2) == marginal_sensitivity("add_remove", 5).l2
    with pytest.raises(QueryError, match="rows_per_person"):
        marginal_sensitivity("add_remove", 0)


@pytest.mark.parametrize("algo", ["mst", "aim"])
def test_mechanisms_are_reproducible_and_beat_independence_at_a_large_budget(algo: str) -> None:
    x = _data()
    src = RecordSource(x, DOM)

    def run(seed: int) -> object:
        r = np.random.default_rng(seed)
        if algo == "mst":
            return mst(src, 5.0, rng=r)
        return aim(src, 5.0, rng=r, options=AIMOptions(rounds=6, round_iters=50, final_iters=300))

    a, b = run(3), run(3)
    sa, sb = a.sample(500, np.random.default_rng(4)), b.sample(500, np.random.default_rng(4))  # type: ignore[attr-defined]
    assert (sa == sb).all() and a.selected == b.selected  # type: ignore[attr-defined]
    s = a.sample(20_000, np.random.default_rng(5))  # type: ignore[attr-defined]
    assert s.shape == (20_000, len(DOM)) and s.min() >= 0 and (s.max(axis=0) < np.array(DOM.sizes)).all()
    perm = np.random.default_rng(6)
    indep = np.stack([perm.permutation(x[:, j]) for j in range(len(DOM))], axis=1)
    assert average_tvd(x, s, DOM, 2) < 0.5 * average_tvd(x, indep, DOM, 2)
    assert a.total == pytest.approx(len(x), rel=0.05)  # type: ignore[attr-defined]


def test_mechanisms_read_the_same_marginals_from_tables_as_from_records() -> None:
    """A release reads exact tables (a backend's), tests read records: the same fit."""
    x = _data(2000, 1)
    tables = {c: marginal(x, DOM, c) for c in itertools.combinations(range(len(DOM)), 2)}
    fa = mst(RecordSource(x, DOM), 1.0, rng=np.random.default_rng(0))
    fb = mst(TableSource(DOM, tables), 1.0, rng=np.random.default_rng(0))
    assert fa.selected == fb.selected
    assert (fa.sample(100, np.random.default_rng(1)) == fb.sample(100, np.random.default_rng(1))).all()


def test_bad_inputs_are_refused_with_the_parameter_named() -> None:
    src = RecordSource(_data(100), DOM)
    with pytest.raises(QueryError, match="rho"):
        mst(src, 0.0, rng=np.random.default_rng(0))
    with pytest.raises(QueryError, match="codes outside"):
        RecordSource(_data(100) + 10, DOM)
    with pytest.raises(QueryError, match="split"):
        MSTOptions(split=(0.5, 0.5, 0.5))
    with pytest.raises(QueryError, match="one_way_fraction"):
        AIMOptions(one_way_fraction=1.0)


def test_one_column_table_spends_everything_on_its_one_way_marginal() -> None:
    dom = Domain.from_sizes([4])
    x = np.random.default_rng(0).integers(0, 4, (1000, 1))
    fit = mst(RecordSource(x, dom), 1.0, rng=np.random.default_rng(0))
    assert len(fit.events) == 1 and fit.events[0].rho == pytest.approx(1.0)
    assert fit.sample(10, np.random.default_rng(0)).shape == (10, 1)


def test_aim_respects_the_model_size_cap() -> None:
    src = RecordSource(_data(), DOM)
    cap = sum(DOM.sizes) + 30  # room for about one small pair beyond the 1-way cells
    fit = aim(src, 5.0, rng=np.random.default_rng(0),
              options=AIMOptions(rounds=5, max_model_cells=cap, round_iters=20, final_iters=50, compress=False))
    assert fit.model.tree.total_cells <= cap
    assert len(fit.selected) == 5
    fit = aim(src, 1.0, rng=np.random.default_rng(0),
              options=AIMOptions(rounds=3, max_model_cells=sum(DOM.sizes), round_iters=10, final_iters=20,
                                 compress=False))
    assert all(len(c) == 1 for c in fit.selected) and fit.model.tree.total_cells == sum(DOM.sizes)


def test_generator_choice_is_a_rule_on_rho_n_squared() -> None:
    assert choose("mst_or_aim", 300.0 / 1000**2, 1000) is Generator.AIM  # at the threshold
    assert choose("mst_or_aim", 299.0 / 1000**2, 1000) is Generator.MST
    assert choose("mst_or_aim", 10.0, None) is Generator.MST  # no public n: MST
    spec = GeneratorSpec(Generator.AIM, rows_hint=3000)
    assert spec.events(0.311, DOM) == aim_events(0.311, DOM, AIMOptions(rows_hint=3000))
    assert GeneratorSpec(Generator.MST).events(0.3, DOM) == mst_events(0.3, DOM)


# ---------------------------------------------------------------- accuracy formulas
R = 2000


def _within(mc: np.ndarray, predicted: float, k: float = 5.0) -> None:
    se = mc.std(ddof=1) / np.sqrt(mc.size)
    assert abs(mc.mean() - predicted) <= k * se, (mc.mean(), predicted, se)


@pytest.mark.parametrize(("k", "sigma"), [(4, 3.0), (16, 25.0), (256, 17.7)])
def test_measurement_term_is_exact(k: int, sigma: float) -> None:
    rng = np.random.default_rng(k)
    noise = rng.normal(0, sigma, (R, k))
    _within(0.5 * np.abs(noise).sum(axis=1) / 3000, float(measurement_tvd(sigma, 3000, k)))


@pytest.mark.parametrize(("k", "n_rows"), [(8, 5000), (16, 3000)])
def test_sampling_term_at_the_uniform_distribution(k: int, n_rows: int) -> None:
    rng = np.random.default_rng(k * n_rows)
    p = np.full(k, 1.0 / k)
    _within(0.5 * np.abs(rng.multinomial(n_rows, p, size=R) / n_rows - p).sum(axis=1), float(sampling_tvd(k, n_rows)))


def test_sampling_bound_holds_for_skewed_distributions() -> None:
    rng = np.random.default_rng(7)
    for k, n_rows in [(5, 50), (16, 300), (64, 1000)]:
        p = rng.dirichlet(np.full(k, 0.3))
        mc = 0.5 * np.abs(rng.multinomial(n_rows, p, size=R) / n_rows - p).sum(axis=1)
        assert mc.mean() <= float(sampling_tvd_bound(k, n_rows))


@pytest.mark.parametrize(("k", "sigma", "n_rows"), [(8, 20.0, 5000), (16, 30.0, 3000), (4, 10.0, 100_000)])
def test_combined_prediction_against_noise_clip_normalise_and_draw(k: int, sigma: float, n_rows: int) -> None:
    rng = np.random.default_rng(int(sigma) + k)
    n = 10_000
    x = np.full(k, n / k)
    mc = np.empty(R)
    for r in range(R):
        y = np.maximum(x + rng.normal(0, sigma, k), 0.0)
        s = rng.multinomial(n_rows, y / y.sum()) / n_rows
        mc[r] = 0.5 * np.abs(s - x / n).sum()
    _within(mc, float(combined_tvd(sigma, n, k, n_rows)))


def test_release_prediction_uses_the_planned_sigmas_and_the_largest_pairs() -> None:
    dom = Domain.from_sizes([4, 16, 9])
    for rho in (0.0066, 0.0244, 0.311):
        ev = mst_events(rho, dom)
        s1, s2 = ev[0].sigma, ev[-1].sigma  # type: ignore[union-attr]
        acc = release_accuracy(ev, dom, 3000, 3000)
        assert acc.one_way[1] == pytest.approx(float(combined_tvd(s1, 3000, 16, 3000)))
        # MST measures d − 1 = 2 pairs: the prediction takes 16·9 and 4·16 cells
        assert acc.two_way == pytest.approx((float(combined_tvd(s2, 3000, 144, 3000)),
                                             float(combined_tvd(s2, 3000, 64, 3000))))
        assert acc.mean == pytest.approx(np.mean(acc.one_way + acc.two_way))
    small = release_accuracy(mst_events(0.01, dom), dom, 3000, None)
    large = release_accuracy(mst_events(1.0, dom), dom, 3000, None)
    assert large.mean < small.mean  # more budget, less error
