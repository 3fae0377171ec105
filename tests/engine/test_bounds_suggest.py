"""The DP bounds suggestion: a public grid, a plan of quantiles released through the one
release path (ledger: check → spend → sample → store; a rerun reuses), bounds as
post-processing, and the schema's record of where the bounds came from."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from planner.cli import main
from planner.core.errors import BudgetExceededError, PlannerError, QueryError, SchemaError
from planner.data.schema import BoundsSource, Column, ColumnKind, MissingRule, Schema
from planner.ledger import Ledger
from planner.planning import bounds_suggest as bs
from planner.planning.plan_spec import load_plan_spec, spec_document
from planner.release.bounds import suggest_bounds_file

N = 20_000
SEED = 20261128


def _incomes() -> np.ndarray:
    """Lognormal incomes (median e^10 ≈ 22,000; σ = 1), seed fixed."""
    return np.random.default_rng(SEED).lognormal(10.0, 1.0, N)


def _schema(public_n: int | None = N) -> Schema:
    return Schema((Column("income", ColumnKind.NUMERIC, MissingRule(), 0.0, 1.0),
                   Column("region", ColumnKind.CATEGORICAL, MissingRule(), categories=("a", "b"))),
                  public_n=public_n)


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path, str]:
    x = _incomes()
    data = tmp_path / "incomes.csv"
    data.write_text("income,region\n" + "".join(f"{v:.2f},{'ab'[i % 2]}\n" for i, v in enumerate(x)))
    doc = spec_document(_schema(), 1.0, 0.0, "basic", "weighted",
                        [{"id": "n", "kind": "count", "column": None, "mechanism": "laplace"}],
                        lifetime=(3.0, 0.0), dataset_name="incomes")
    spec = tmp_path / "PLAN.json"
    spec.write_text(json.dumps(doc))
    return spec, data, f"sqlite:///{tmp_path / 'ledger.db'}"


def _rank_gap(x: np.ndarray, t: float, alpha: float) -> float:
    """The rank distance (rows) from α·n to the ranks [#{x < t}, #{x ≤ t}] candidate t holds:
    the quantile statistic's score (planner.planning.statistics.quantile), by hand."""
    n = len(x)
    lt, le = float(np.sum(x < t)), float(np.sum(x <= t))
    return max(lt - alpha * n, alpha * n - le, 0.0)


# ----------------------------------------------------------------------------- grid and plan


def test_magnitude_grid_is_public_log_scale_with_zero() -> None:
    g = bs.magnitude_grid(1e6)
    assert g.values[0] == 0.0 and g.values[-1] == 1e6 and (g.lower, g.upper) == (0.0, 1e6)
    pos = np.array(g.values[1:])
    # 20 per decade over 6 decades, 4 significant digits: ratios 10^(1/20) up to rounding
    assert len(pos) == 6 * 20 + 1
    assert np.allclose(pos[1:] / pos[:-1], 10 ** (1 / 20), rtol=2e-3)
    s = bs.magnitude_grid(100.0, signed=True, decades=2, per_decade=1)
    assert s.values == (-100.0, -10.0, -1.0, 0.0, 1.0, 10.0, 100.0)


def test_plan_uses_the_coarse_range_as_bounds_and_predicts_rank_error() -> None:
    sp = bs.plan_suggestion(_schema(), "income", 0.5, magnitude=1e6)
    col = sp.schema.column("income")
    assert col.bounds == (0.0, 1e6) and col.bounds_source is None
    assert sp.query.options["grid"] == sp.grid.values
    # each level gets ε/2 under basic composition; the prediction is the quantile statistic's:
    # union bound (2Δ/ε_level)·ln(k/β)/n with Δ = max(α, 1 − α) = 0.99 (add/remove), by hand
    k = len(sp.grid.values)
    expected = 2 * 0.99 / 0.25 * math.log(k / 0.05) / N
    for p in sp.predictions:
        assert p.rank_bound_95 == pytest.approx(expected, rel=1e-9)
    assert "ε = 0.5" in sp.words()


@pytest.mark.hostile(8)
def test_bad_input_names_the_field() -> None:
    s = _schema()
    cases = [
        (dict(column="region", epsilon=0.1, magnitude=1e6), "not numeric"),
        (dict(column="nope", epsilon=0.1, magnitude=1e6), "'nope' is not declared"),
        (dict(column="income", epsilon=0.1, magnitude=0.0), "magnitude must be > 0"),
        (dict(column="income", epsilon=0.1, magnitude=-5.0), "magnitude must be > 0"),
        (dict(column="income", epsilon=0.0, magnitude=1e6), "epsilon must be > 0"),
        (dict(column="income", epsilon=-1.0, magnitude=1e6), "epsilon must be > 0"),
        (dict(column="income", epsilon=0.1), "magnitude"),
        (dict(column="income", epsilon=0.1, magnitude=1e6, levels=(0.9, 0.1)), "levels"),
    ]
    for kw, words in cases:
        with pytest.raises(QueryError, match=words):
            bs.plan_suggestion(s, **kw)  # type: ignore[arg-type]
    with pytest.raises(QueryError, match="public_n"):
        bs.plan_suggestion(_schema(None), "income", 0.1, magnitude=1e6)


def test_bounds_from_quantiles_widens_a_collapsed_pair() -> None:
    g = bs.range_grid(0.0, 100.0, scale="linear", points=101)
    assert bs.bounds_from_quantiles(40.0, 40.0, g) == (39.0, 41.0)
    assert bs.bounds_from_quantiles(0.0, 0.0, g) == (0.0, 1.0)


# ----------------------------------------------------------------------------- the release


def test_suggestion_contains_the_mass_and_is_recorded_once(files: tuple[Path, Path, str]) -> None:
    spec, data, url = files
    x = _incomes()
    levels = (0.005, 0.995)
    out = suggest_bounds_file(str(spec), str(data), "income", epsilon=1.0, levels=levels, magnitude=1e6,
                              ledger_url=url, backend="pandas")
    assert out.status == "done"
    r = out.plan.rank_bound_95
    grid = np.array(out.plan.grid.values)
    xc = np.clip(np.round(x, 2), 0.0, 1e6)  # the values as written and clipped to the coarse range
    for t, a in ((out.lower, levels[0]), (out.upper, levels[1])):
        assert t in grid  # a released candidate of the public grid
        # 95% union bound (exponential mechanism, McSherry & Talwar 2007): the released
        # candidate's rank gap exceeds the best candidate's by at most r·n
        best = min(_rank_gap(xc, float(g), a) for g in grid)
        assert _rank_gap(xc, t, a) <= best + r * N
        # in the column's units: between the grid neighbours of the true (α ∓ r)-quantiles
        q_lo, q_hi = np.quantile(xc, [max(a - r, 0), min(a + r, 1)], method="inverted_cdf")
        assert grid[max(np.searchsorted(grid, q_lo) - 1, 0)] <= t <= grid[min(np.searchsorted(grid, q_hi), len(grid) - 1)]
    assert np.mean((xc >= out.lower) & (xc <= out.upper)) >= 1 - 2 * (levels[0] + r) - 1e-12
    # the bound values came from OpenDP's report-noisy-max
    ans = out.result.answer(bs.QUERY_ID)
    assert len(ans.opendp) == 2
    assert all(c["constructor"].startswith("make_noisy_max") for d in ans.opendp for c in d["opendp"])
    assert {float(v) for v in out.quantiles().values()} == {out.lower, out.upper}
    # spent once, against the lifetime budget
    led = Ledger(url)
    try:
        st = led.status(out.result.fingerprint)
        assert st.epsilon_spent == pytest.approx(1.0, rel=1e-6) and st.releases == 1
        assert st.epsilon_remaining == pytest.approx(2.0, rel=1e-6)
    finally:
        led.close()
    again = suggest_bounds_file(str(spec), str(data), "income", epsilon=1.0, levels=levels, magnitude=1e6,
                                ledger_url=url, backend="pandas")
    assert again.status == "reused" and (again.lower, again.upper) == (out.lower, out.upper)
    led = Ledger(url)
    try:
        st = led.status(out.result.fingerprint)
        assert st.releases == 1 and st.epsilon_spent == pytest.approx(1.0, rel=1e-6)
    finally:
        led.close()
    # more than what remains is refused, nothing spent
    with pytest.raises(BudgetExceededError):
        suggest_bounds_file(str(spec), str(data), "income", epsilon=2.5, magnitude=1e6, ledger_url=url,
                            backend="pandas")
    # the schema records where the bounds came from
    sch = out.apply(load_plan_spec(str(spec)).schema)
    col = sch.column("income")
    assert col.bounds == (out.lower, out.upper)
    assert col.bounds_source == BoundsSource("dp_quantiles", out.result.release_id, out.epsilon_spent,  # type: ignore[arg-type]
                                             levels, (0.0, 1e6), min(r, 1.0))
    assert Schema.from_dict(json.loads(json.dumps(sch.to_dict()))) == sch


def test_cli_bounds_prints_the_suggestion_and_spend(files: tuple[Path, Path, str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    spec, data, url = files
    rc = main(["bounds", "--spec", str(spec), "--data", str(data), "--column", "income", "--magnitude", "1e6",
               "--epsilon", "0.5", "--ledger", url, "--backend", "pandas"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lower"] < out["upper"] and out["status"] == "done"
    assert out["spent"]["epsilon"] == pytest.approx(0.5, rel=1e-6)
    assert out["budget"]["epsilon_spent"] == pytest.approx(0.5, rel=1e-6)
    # by default tuned for a mean of the column at the plan's whole ε = 1 (the file holds no
    # mean): σ₁ = 2 (Laplace on the centred sum, Δ = w/2, and on the count, Δ = 1 scaled by
    # w/2, each at ε/2: √2·(w/2)·(2/ε)·√2 = 2w/ε), m* = σ₁ = 2 rows, level 1 − 2/20,000
    assert out["bounds_source"]["kind"] == "dp_quantiles" and out["bounds_source"]["levels"] == [0.0, 0.9999]
    assert out["prediction"]["purpose"]["basis"] == "the plan's whole ε: it holds no mean of 'income' yet"
    assert "Levels tuned for a mean of 'income'" in out["prediction"]["words"]
    # quantiles keep the fixed levels; a sum at a given ε: σ₁ = √2·1/0.5 (Laplace, Δ = U),
    # m* = 2.83 rows, 1.4e-4 of n after rounding to two digits
    for args, levels in ((["--for", "quantile"], [0.01, 0.99]),
                         (["--for", "sum", "--for-epsilon", "0.5"], [0.0, 0.99986])):
        rc = main(["bounds", "--spec", str(spec), "--data", str(data), "--column", "income", "--magnitude", "1e6",
                   "--epsilon", "0.1", "--ledger", url, "--backend", "pandas", *args])
        assert rc == 0
        assert json.loads(capsys.readouterr().out)["bounds_source"]["levels"] == levels
    rc = main(["bounds", "--spec", str(spec), "--data", str(data), "--column", "income", "--magnitude", "1e6",
               "--epsilon", "0.1", "--ledger", url, "--backend", "pandas", "--for", "sum", "--levels", "0", "0.9"])
    assert rc == 2 and "not both" in capsys.readouterr().err
    rc = main(["bounds", "--spec", str(spec), "--data", str(data), "--column", "region", "--magnitude", "1e6",
               "--epsilon", "0.5", "--ledger", url, "--backend", "pandas"])
    assert rc == 2 and "not numeric" in capsys.readouterr().err


# ----------------------------------------------------------------------------- schema field


def test_bounds_source_keeps_the_hash_of_schemas_without_it() -> None:
    s = _schema()
    d = s.to_dict()
    assert all("bounds_source" not in c for c in d["columns"])
    assert Schema.from_dict(d).schema_hash() == s.schema_hash()
    with_src = bs.apply_bounds(s, "income", 10.0, 100.0, BoundsSource("dp_quantiles", 1, 0.1, (0.01, 0.99)))  # type: ignore[arg-type]
    assert with_src.schema_hash() != bs.apply_bounds(s, "income", 10.0, 100.0, None).schema_hash()


@pytest.mark.hostile(9)
def test_bounds_source_is_validated_strictly() -> None:
    base = {"name": "x", "kind": "numeric", "lower": 0, "upper": 1, "missing": {"action": "drop"}}
    good = {"kind": "dp_quantiles", "release_id": 1, "epsilon": 0.1, "levels": [0.01, 0.99]}
    for bad, words in [({**good, "kind": "guess"}, "kind"), ({**good, "release_id": 0}, "release_id"),
                       ({**good, "epsilon": -1}, "epsilon"), ({**good, "extra": 1}, "unknown"),
                       ({**good, "levels": [0.5]}, "levels"),
                       ({**good, "purpose": {"statistic": "median", "epsilon": 1}}, "purpose.statistic"),
                       ({**good, "purpose": {"statistic": "mean"}}, "exactly 'statistic'"),
                       ({**good, "purpose": {"statistic": "sum", "epsilon": 0}}, "purpose.epsilon"),
                       ({**good, "purpose": "mean"}, "exactly 'statistic'")]:
        with pytest.raises(SchemaError, match=words):
            Column.from_dict({**base, "bounds_source": bad})
    with pytest.raises(SchemaError, match="numeric columns only"):
        Column.from_dict({"name": "c", "kind": "categorical", "categories": ["a"], "missing": {"action": "drop"},
                          "bounds_source": good})


def test_bounds_source_purpose_round_trips_and_changes_the_hash() -> None:
    s = _schema()
    fixed = BoundsSource("dp_quantiles", 1, 0.1, (0.0, 0.999))  # type: ignore[arg-type]
    tuned = BoundsSource("dp_quantiles", 1, 0.1, (0.0, 0.999), None, None, "sum", 0.5)  # type: ignore[arg-type]
    assert "purpose" not in fixed.to_dict()
    assert tuned.to_dict()["purpose"] == {"statistic": "sum", "epsilon": 0.5}
    assert BoundsSource.from_dict(json.loads(json.dumps(tuned.to_dict()))) == tuned
    a = bs.apply_bounds(s, "income", 10.0, 100.0, fixed).schema_hash()
    b = bs.apply_bounds(s, "income", 10.0, 100.0, tuned).schema_hash()
    assert a != b


# ----------------------------------------------------------------------------- clipping bias


def test_clipping_bias_bound_is_a_bound_on_the_data() -> None:
    x = np.clip(_incomes(), 0, 1e6)
    lo, hi = np.quantile(x, [0.01, 0.99])
    b = bs.clipping_bias_bound(lo, hi, outer=(0.0, 1e6), below=0.01 + 1e-4, above=0.01 + 1e-4)
    real = bs.clipping_on_data(x, lo, hi)
    assert b.mean_low <= real.mean_bias <= b.mean_high
    assert real.label == bs.DATA_DEPENDENT and real.below + real.above == pytest.approx(0.02 * N, abs=2)
    # worst case without an outer range: unbounded, said so
    assert math.isinf(bs.clipping_bias_bound(lo, hi).mean_abs)


def test_column_clipping_bias_reads_the_bounds_source() -> None:
    src = BoundsSource("dp_quantiles", 3, 0.1, (0.01, 0.99), (0.0, 1000.0), 0.02)  # type: ignore[arg-type]
    s = bs.apply_bounds(_schema(), "income", 10.0, 500.0, src)
    b = bs.column_clipping_bias(s, "income")
    # by hand: below ≤ 0.01 + 0.02, above ≤ 0.01 + 0.02; −0.03·(1000 − 500), +0.03·(10 − 0)
    assert (b.mean_low, b.mean_high) == (pytest.approx(-15.0), pytest.approx(0.3))
    with pytest.raises(PlannerError, match="not numeric"):
        bs.column_clipping_bias(s, "region")


def _run_generated(spec: object, data: Path, tmp_path: Path, *argv: str) -> tuple[int, dict[str, object]]:
    """Generate the script for ``spec`` and run its ``main`` with ``argv`` (in process)."""
    from planner.outputs import codegen

    code = codegen.python_script(spec, str(data), "incomes", backend="pandas")  # type: ignore[arg-type]
    ns: dict[str, object] = {"__name__": "generated"}
    exec(compile(code, "generated", "exec"), ns)  # defines everything; the plan only, nothing spent
    main_fn = ns["main"]
    assert callable(main_fn)
    return int(main_fn([*argv, "--chart", str(tmp_path / "chart.svg")])), ns


def test_generated_script_checks_suggested_bounds_before_releasing(files: tuple[Path, Path, str], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from planner.planning.plan_spec import parse_plan_spec

    spec_path, data, url = files
    mean = {"id": "m", "kind": "mean", "column": "income", "mechanism": "laplace"}
    doc = json.loads(spec_path.read_text())
    spec = parse_plan_spec({**doc, "queries": [*doc["queries"], mean]})
    # no bounds from a DP query: no bounds step at all (nothing defined and left uncalled)
    _, ns = _run_generated(spec, data, tmp_path)
    assert "check_suggested_bounds" not in ns and "suggest_bounds" not in ns
    # bounds suggested (tuned for the plan's mean), declared with their source
    out = suggest_bounds_file(spec, str(data), "income", epsilon=0.2, magnitude=1e6, ledger_url=url,
                              backend="pandas")
    assert out.plan.tuned is not None and out.plan.tuned.purpose.basis == "the plan's share for 'm'"
    # the schema records what the levels were tuned for: the plan's mean 'm' and its ε share
    # (the purpose the suggestion computed, read back from the applied schema's JSON)
    src = Schema.from_dict(json.loads(json.dumps(out.apply(spec.schema).to_dict()))).column("income").bounds_source
    assert src is not None and src.tuned_for == "mean"
    assert src.tuned_epsilon == out.plan.tuned.purpose.epsilon and 0 < src.tuned_epsilon < spec.epsilon
    # the tuned suggestion spends its ε once, recorded like any release; asked again it is reused
    again = suggest_bounds_file(spec, str(data), "income", epsilon=0.2, magnitude=1e6, ledger_url=url,
                                backend="pandas")
    assert (out.status, again.status) == ("done", "reused") and (again.lower, again.upper) == (out.lower, out.upper)
    led = Ledger(url)
    try:
        st = led.status(out.result.fingerprint)
        assert st.releases == 1 and st.epsilon_spent == pytest.approx(0.2, rel=1e-6)
    finally:
        led.close()
    tuned = parse_plan_spec({**spec.to_dict(), "schema": out.apply(spec.schema).to_dict()})
    # the notebook's release cell calls the same check (the same steps as the script)
    from planner.outputs import codegen

    nb = codegen.notebook_json(tuned, str(data), "incomes")
    assert "check_suggested_bounds(data, ledger_url, backend_name)" in nb
    assert "check_suggested_bounds" not in codegen.notebook_json(spec, str(data), "incomes")
    capsys.readouterr()
    rc, ns = _run_generated(tuned, data, tmp_path, "--release", "--ledger", url, "--out", str(tmp_path / "o.json"))
    assert rc == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"the DP quantiles of release #{out.result.release_id}" in printed
    assert json.loads((tmp_path / "o.json").read_text())["release"]["status"] == "done"
    led = Ledger(url)
    try:  # the suggestion and the plan: two releases; the check spent nothing
        st = led.status(out.result.fingerprint)
        assert st.releases == 2 and st.epsilon_spent == pytest.approx(0.2 + 1.0, rel=1e-6)
    finally:
        led.close()
    # bounds that are not the released ones, or a ledger without the release: refused before any spend
    lo, hi = out.lower, out.upper
    moved = parse_plan_spec({**tuned.to_dict(), "schema": bs.apply_bounds(tuned.schema, "income", lo, 2 * hi,
                                                                          out.source).to_dict()})
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    for sp, ledger, said in ((moved, url, f"gave [{lo:g}, {hi:g}]"), (tuned, fresh, "does not hold")):
        rc, _ = _run_generated(sp, data, tmp_path, "--release", "--ledger", ledger)
        assert rc == 2 and said in capsys.readouterr().err
    led = Ledger(url)
    try:
        assert led.status(out.result.fingerprint).releases == 2
    finally:
        led.close()
    led = Ledger(fresh)
    try:
        assert led.datasets() == []
    finally:
        led.close()


@pytest.mark.hostile(4)
def test_quantile_grid_option_is_checked() -> None:
    from planner.planning.queries import Query
    from planner.planning.statistics.quantile import candidate_grid

    s = _schema()
    q = Query("q", "quantile", "income", "exponential", options={"alphas": [0.5], "grid": [0.0, 0.25, 1.0]})
    assert candidate_grid(q, s).tolist() == [0.0, 0.25, 1.0]
    with pytest.raises(QueryError, match="strictly increasing"):
        Query("q", "quantile", "income", "exponential", options={"alphas": [0.5], "grid": [0.0, 0.5, 0.5]})
    with pytest.raises(QueryError, match="not candidates and grid"):
        Query("q", "quantile", "income", "exponential", options={"alphas": [0.5], "grid": [0.0, 1.0], "candidates": 5})
    with pytest.raises(QueryError, match="outside the column's declared bounds"):
        candidate_grid(Query("q", "quantile", "income", "exponential", options={"alphas": [0.5], "grid": [0.0, 2.0]}), s)
    with pytest.raises(QueryError, match="2 to"):
        Query("q", "quantile", "income", "exponential", options={"alphas": [0.5], "grid": [0.5]})


def test_one_sided_levels_keep_the_coarse_end_and_release_one_quantile() -> None:
    sp = bs.plan_suggestion(_schema(), "income", 0.2, magnitude=1e6, levels=(0, 0.999))
    assert sp.query.alphas == (0.999,)
    assert [p.epsilon for p in sp.plan.predictions] == [pytest.approx(0.2)]  # the whole ε on the upper bound
    assert bs.bounds_from_answers((0.0, 0.999), {0.999: 5000.0}, sp.grid) == (0.0, 5000.0)
    with pytest.raises(QueryError, match="levels"):
        bs.plan_suggestion(_schema(), "income", 0.2, magnitude=1e6, levels=(0, 1))
