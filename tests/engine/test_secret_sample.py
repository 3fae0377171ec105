"""A table declared a secret random sample of a population, end to end: schema, planner,
ledger, release and the command line (issue 15, item 2).

Where the expected numbers come from:

* amplification by sampling, Balle, Barthe & Gaboardi 2018 ("Privacy Amplification by
  Subsampling: Tight Analyses via Couplings and Divergences", NeurIPS 2018,
  arXiv:1807.01647), Thm 9 (Poisson, add/remove) and Thm 10 (without replacement,
  substitution): an (ε, δ)-DP analysis of the sample is (ln(1 + q(e^ε − 1)), qδ)-DP for the
  population. Every number written below was worked out by hand with the intermediate
  steps shown and checked with Python's ``decimal`` module at 30 significant digits (an
  independent arbitrary-precision computation, not the planner's float code);
* the census schema's hash before the ``sampling`` field existed: computed by the planner
  at commit e7f5069 (``Schema.load("data/census.schema.json").schema_hash()``).
"""

from __future__ import annotations

import json
import math
import re
import runpy
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from planner.cli import main
from planner.core.errors import (
    BudgetExceededError,
    LedgerError,
    LedgerIntegrityError,
    PlanError,
    SchemaError,
)
from planner.data.schema import Schema
from planner.ledger import FORMAT_VERSION, Ledger, verify_ledger
from planner.planning.queries import queries_from_list
from planner.planning.workload import manual_total, plan, plan_equal, plan_for_targets, plan_manual
from planner.privacy.accounting import Spend
from planner.privacy.events import PureEvent
from planner.privacy.sampling import Sampling, SamplingScheme, sampled_total_epsilon

ROOT = Path(__file__).resolve().parents[2]
CENSUS_SCHEMA = ROOT / "data" / "census.schema.json"
CENSUS = ROOT / "data" / "census.csv"
FIXTURES = ROOT / "tests" / "fixtures"

#: Python's decimal module, 30 digits (see the module docstring).
E_MINUS_1 = 1.71828182845904523536  # e − 1
E_HALF_MINUS_1 = 0.64872127070012814685  # e^0.5 − 1


def census_dict(**sampling: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CENSUS_SCHEMA.read_text(encoding="utf-8"))
    if sampling:
        data["sampling"] = sampling
    return data


def sampled_census(rate: float = 0.05, scheme: str = "poisson") -> Schema:
    return Schema.from_dict(census_dict(rate=rate, scheme=scheme))


QUERIES = [
    {"id": "n", "kind": "count", "mechanism": "laplace"},
    {"id": "age", "kind": "mean", "column": "age", "mechanism": "laplace"},
    {"id": "income", "kind": "sum", "column": "income", "mechanism": "gaussian"},
]


# ---------------------------------------------------------------------- the amplification


def test_poisson_amplification_by_hand() -> None:
    # BBG18 Thm 9, q = 0.01, (ε, δ) = (1, 1e-6):
    #   q(e − 1) = 0.01 × 1.718281828459045 = 0.01718281828459045
    #   ln(1.01718281828459045) = x − x²/2 + x³/3 − … with x = 0.01718281828459045
    #     = 0.01718281828459045 − 0.00014762462 + 0.00000169104 − 0.00000002179 + …
    #     = 0.01703686323617655
    #   δ′ = qδ = 1e-8
    eps, delta = Sampling(0.01).amplify(1.0, 1e-6)
    assert eps == pytest.approx(0.0170368632361765498, rel=1e-13)
    assert delta == pytest.approx(1e-8, rel=1e-15)


def test_without_replacement_amplification_by_hand() -> None:
    # BBG18 Thm 10, q = m/n = 0.2, (ε, δ) = (0.5, 1e-5):
    #   q(e^0.5 − 1) = 0.2 × 0.6487212707001282 = 0.12974425414002563
    #   ln(1.12974425414002563) = 0.12199128333927103;  δ′ = 0.2 × 1e-5 = 2e-6
    s = Sampling(0.2, SamplingScheme.WITHOUT_REPLACEMENT)
    assert s.relation == "substitute"
    eps, delta = s.amplify(0.5, 1e-5)
    assert eps == pytest.approx(0.121991283339271027, rel=1e-13)
    assert delta == pytest.approx(2e-6, rel=1e-15)


def test_base_budget_by_hand_and_round_trip() -> None:
    # The planner's budget on the sample for a population budget (0.5, 1e-7) at q = 0.1:
    #   ε_s = ln(1 + (e^0.5 − 1)/q) = ln(1 + 6.487212707001282) = ln(7.487212707001282)
    #       = 2.0131965930227991;  δ_s = δ/q = 1e-6
    eps_s, delta_s = Sampling(0.1).base_budget(0.5, 1e-7)
    assert eps_s == pytest.approx(2.01319659302279911, rel=1e-13)
    assert delta_s == pytest.approx(1e-6, rel=1e-15)
    back = Sampling(0.1).amplify(eps_s, delta_s)
    assert back[0] <= 0.5 and back[0] == pytest.approx(0.5, rel=1e-14)
    assert back[1] == pytest.approx(1e-7, rel=1e-14)


# ---------------------------------------------------------------------- the schema


def test_schema_round_trips_the_declaration_and_absent_means_not_a_sample() -> None:
    s = sampled_census(0.05, "poisson")
    assert s.sampling == Sampling(0.05) and s.is_sample
    again = Schema.from_json(s.to_json())
    assert again == s and again.schema_hash() == s.schema_hash()
    plain = Schema.load(CENSUS_SCHEMA)
    assert plain.sampling is None and not plain.is_sample
    assert "sampling" not in plain.to_dict()
    # an old schema file keeps its hash (the one computed at commit e7f5069, before the field)
    assert plain.schema_hash() == "f4d2fe3c6608afbdae3da859e301936c27700928fab0d9c124bf329117eb06e4"
    assert s.schema_hash() != plain.schema_hash()
    assert Schema.from_dict(census_dict() | {"sampling": None}) == plain  # null = not a sample
    wor = Schema.from_dict(census_dict(rate=0.3, scheme="without_replacement") | {"relation": "substitute"})
    assert wor.sampling == Sampling(0.3, SamplingScheme.WITHOUT_REPLACEMENT)


@pytest.mark.parametrize(
    ("sampling", "relation", "message"),
    [
        ({"rate": 0}, "add_remove", r"sampling\.rate must be in \(0, 1\]; got 0\.0\. Declare the public fraction"),
        ({"rate": 1.5}, "add_remove", r"sampling\.rate must be in \(0, 1\]; got 1\.5"),
        ({"rate": -0.1}, "add_remove", r"sampling\.rate must be in \(0, 1\]"),
        ({"rate": "0.1"}, "add_remove", r"sampling\.rate must be a number in \(0, 1\]; got a str\. Write it as a number"),
        ({"rate": True}, "add_remove", r"sampling\.rate must be a number in \(0, 1\]; got a bool"),
        ({"scheme": "poisson"}, "add_remove", r"sampling\.rate is missing: declare the public fraction q"),
        ({"rate": 0.1, "seed": 3}, "add_remove", r"'sampling' has unknown key\(s\) \['seed'\]; the keys are 'rate' and 'scheme'"),
        ({"rate": 0.1, "scheme": "stratified"}, "add_remove",
         r"sampling\.scheme must be one of \['poisson', 'without_replacement'\]; got 'stratified'\. Use 'poisson'"),
        ({"rate": 0.1, "scheme": "poisson"}, "substitute",
         r"sampling\.scheme 'poisson' amplifies privacy under the add_remove relation, but the schema declares "
         r"'substitute'\. Use without_replacement sampling, or change the schema's relation"),
        ({"rate": 0.1, "scheme": "without_replacement"}, "add_remove",
         r"sampling\.scheme 'without_replacement' amplifies privacy under the substitute relation, but the schema "
         r"declares 'add_remove'\. Use poisson sampling"),
    ],
)
def test_schema_validation_names_the_field_and_the_fix(sampling: dict[str, Any], relation: str, message: str) -> None:
    data = census_dict() | {"sampling": sampling, "relation": relation}
    with pytest.raises(SchemaError, match=message):
        Schema.from_dict(data)


def test_schema_sampling_must_be_an_object() -> None:
    with pytest.raises(SchemaError, match=r"'sampling' must be an object such as \{\"rate\": 0\.01"):
        Schema.from_dict(census_dict() | {"sampling": 0.1})
    with pytest.raises(SchemaError, match=re.escape("planner.privacy.sampling.Sampling")):
        Schema(Schema.load(CENSUS_SCHEMA).columns, sampling={"rate": 0.1})  # type: ignore[arg-type]


def test_schema_reports_a_sampling_problem_with_the_other_problems() -> None:
    data = census_dict() | {"sampling": {"rate": 2}, "public_n": -1}
    with pytest.raises(SchemaError) as info:
        Schema.from_dict(data)
    text = str(info.value)
    assert "sampling.rate must be in (0, 1]" in text and "public_n must be a whole number" in text


# ---------------------------------------------------------------------- the planner


@pytest.mark.parametrize("rule", ["basic", "rdp", "zcdp", "pld"])
@pytest.mark.parametrize(("rate", "eps", "delta"), [(0.05, 0.5, 1e-7), (0.3, 1.0, 1e-6), (0.002, 0.2, 1e-9)])
def test_planner_spends_exactly_the_owners_epsilon_after_amplification(rule: str, rate: float, eps: float,
                                                                       delta: float) -> None:
    s = sampled_census(rate)
    qs = queries_from_list(QUERIES, s)
    p = plan(qs, s, eps, delta, rule)
    eps_s, delta_s = Sampling(rate).base_budget(eps, delta)
    assert p.allocation.epsilon == eps_s and p.allocation.delta == delta_s
    # the composed shares on the sample, amplified once, are the owner's ε (never above)
    assert p.used_epsilon <= eps * (1 + 1e-12)
    assert p.used_epsilon == pytest.approx(eps, rel=1e-9)
    recorded = sampled_total_epsilon([sp for _, sp in p.allocation.spends()], rule, delta, Sampling(rate))
    assert recorded == pytest.approx(eps, rel=1e-9) and recorded <= eps * (1 + 1e-12)
    # predictions are those of the base allocation: the same as planning the unsampled table at (ε_s, δ_s)
    plain = Schema.load(CENSUS_SCHEMA)
    base = plan(queries_from_list(QUERIES, plain), plain, eps_s, delta_s, rule)
    assert [(x.id, x.epsilon, x.rmse, x.error_bound_95) for x in p.predictions] == [
        (x.id, x.epsilon, x.rmse, x.error_bound_95) for x in base.predictions]


def test_plan_json_shows_the_sample_and_the_population() -> None:
    # q = 0.05, ε = 0.5: ε_s = ln(1 + (e^0.5 − 1)/0.05) = ln(1 + 12.974425414002563) = ln(13.974425414002563)
    #                        = 2.6372289029188
    s = sampled_census(0.05)
    out = plan(queries_from_list(QUERIES, s), s, 0.5, 1e-7, "basic").to_dict()
    assert out["epsilon"] == 0.5 and out["delta"] == 1e-7
    assert out["used_epsilon"] == pytest.approx(0.5, rel=1e-9)
    ss = out["secret_sample"]
    assert (ss["rate"], ss["scheme"], ss["relation"]) == (0.05, "poisson", "add_remove")
    assert ss["sample"]["epsilon"] == pytest.approx(2.6372289029188, rel=1e-12)
    assert ss["sample"]["delta"] == pytest.approx(2e-6, rel=1e-12)  # 1e-7 / 0.05
    assert ss["population"]["epsilon"] == 0.5 and ss["population"]["used_epsilon"] == pytest.approx(0.5, rel=1e-9)
    # the queries' shares are on the sample: under basic composition they add up to ε_s
    assert sum(q["epsilon"] for q in out["queries"]) == pytest.approx(2.6372289029188, rel=1e-9)
    assert "secret_sample" not in plan(queries_from_list(QUERIES, Schema.load(CENSUS_SCHEMA)),
                                       Schema.load(CENSUS_SCHEMA), 0.5, 1e-7, "basic").to_dict()


def test_equal_manual_and_target_modes_are_accounted_for_the_population() -> None:
    s = sampled_census(0.1)
    qs = queries_from_list([q for q in QUERIES if q["mechanism"] == "laplace"], s)
    # equal: two Laplace queries, basic: each gets ε_s/2 with ε_s = ln(1 + (e − 1)/0.1) = ln(18.18281828459045)
    #        = ln 18 + ln(1.01015657136614) = 2.89037175789616 + 0.01010533999323 = 2.90047709788939,
    #        so 1.45023854894469 each
    eq = plan_equal(qs, s, 1.0, 0.0, "basic")
    assert [p.epsilon for p in eq.predictions] == pytest.approx([1.450238548944692792] * 2, rel=1e-9)
    assert eq.used_epsilon == pytest.approx(1.0, rel=1e-9)
    # manual: shares 1.0 + 1.0 on the sample cost ln(1 + 0.1(e² − 1)) = ln(1.638905609893065)
    #         = 0.49402870804 for the population
    shares = {"n": 1.0, "age": 1.0}
    assert manual_total(qs, s, 0.0, "basic", shares) == pytest.approx(0.494028708044178750, rel=1e-12)
    assert plan_manual(qs, s, 0.5, 0.0, "basic", shares).used_epsilon == pytest.approx(0.49402870804, rel=1e-9)
    with pytest.raises(PlanError, match=r"cost ε = 0\.494029 for the population .* more than the budget ε = 0\.4"):
        plan_manual(qs, s, 0.4, 0.0, "basic", shares)
    # target: the same least ε on the sample as the unsampled table, and its amplification for the population
    targeted = queries_from_list([{**q, "target": 50.0} for q in QUERIES if q["mechanism"] == "laplace"], s)
    res = plan_for_targets(targeted, s, 0.0, "basic")
    plain = Schema.load(CENSUS_SCHEMA)
    ref = plan_for_targets(queries_from_list([{**q, "target": 50.0} for q in QUERIES if q["mechanism"] == "laplace"],
                                             plain), plain, 0.0, "basic")
    assert res.total_epsilon == pytest.approx(ref.total_epsilon, rel=1e-12)
    assert res.population_epsilon == pytest.approx(math.log1p(0.1 * math.expm1(ref.total_epsilon)), rel=1e-12)
    assert res.to_dict()["total_epsilon"] == res.population_epsilon
    assert res.plan.used_epsilon == pytest.approx(res.population_epsilon, rel=1e-12)


# ---------------------------------------------------------------------- the ledger


def pure(eps: float) -> Spend:
    return Spend(event=PureEvent(eps), epsilon=eps, delta=0.0)


def test_ledger_composes_first_then_amplifies_once_and_refuses_overspend(ledger_url: str) -> None:
    """q = 0.1, lifetime ε = 1 (basic). Releases of ε = 1 each on the sample.

    Composition first, then amplification (what the ledger does), k releases cost
    ln(1 + 0.1(e^k − 1)):
      k = 1: ln(1 + 0.1 × 1.718281828) = ln(1.1718281828) = 0.158565078740
      k = 2: ln(1 + 0.1 × 6.389056099) = ln(1.6389056099) = 0.494028708044
      k = 3: ln(1 + 0.1 × 19.08553692) = ln(2.9085536923) = 1.067655944683 > 1: refused.
    Amplifying each release separately would charge 0.158565078740 each, so six releases
    (6 × 0.158565078740 = 0.951390472443 ≤ 1) would have been allowed: that understates the
    cost, because every release reads the same secret sample. We do not.
    """
    led = Ledger(ledger_url)
    ds = led.register_dataset("digest-sample", "survey sample", 1.0, 0.0, "basic", sampling=Sampling(0.1))
    assert led.dataset(ds.fingerprint).sampling == Sampling(0.1)
    expected = [0.158565078740429111, 0.494028708044178750]
    for k, want in enumerate(expected, start=1):
        led.release(ds.fingerprint, f"plan-{k}", "s", [("q", pure(1.0))], lambda k=k: {"q": k})
        st = led.status(ds.fingerprint)
        assert st.epsilon_spent == pytest.approx(want, rel=1e-12)
        assert st.epsilon_spent_sample == pytest.approx(float(k), rel=1e-12)  # basic: k × 1.0 on the sample
        assert st.to_dict()["sampling"] == {"rate": 0.1, "scheme": "poisson"}
    per_release = 6 * expected[0]
    assert per_release == pytest.approx(0.951390472442574666, rel=1e-12) and per_release <= 1.0
    preview = led.preview(ds.fingerprint, [pure(1.0)])
    assert not preview.fits
    assert preview.epsilon_after == pytest.approx(1.067655944682648455, rel=1e-12)
    assert "population ε" in preview.reason and "rate q = 0.1" in preview.reason
    sampled: list[int] = []
    with pytest.raises(BudgetExceededError, match=re.escape("secret poisson sample at rate q = 0.1")):
        led.release(ds.fingerprint, "plan-3", "s", [("q", pure(1.0))], lambda: sampled.append(1) or {"q": 3})
    assert sampled == []  # nothing drawn
    st = led.status(ds.fingerprint)
    assert st.releases == 2 and st.epsilon_spent == pytest.approx(expected[1], rel=1e-12)  # nothing forgotten
    # what is left still fits: ε_s with ln(1 + 0.1(e^(2 + ε_s) − 1)) = 1, i.e.
    # e^(2 + ε_s) = 1 + (e − 1)/0.1 = 18.18281828459045, ε_s = ln(18.18281828459045) − 2 = 0.90047709788939
    # (a hair below it, so float rounding cannot tip it over)
    led.release(ds.fingerprint, "plan-3b", "s", [("q", pure(0.9004770978))], lambda: {"q": 4})
    assert led.status(ds.fingerprint).epsilon_spent <= 1.0
    with pytest.raises(BudgetExceededError):
        led.release(ds.fingerprint, "plan-4", "s", [("q", pure(1e-6))], lambda: {"q": 5})
    assert [h.epsilon_spent for h in led.history(ds.fingerprint)][:2] == pytest.approx(expected, rel=1e-12)
    assert led.verify().ok, led.verify().problems
    export = led.export(ds.fingerprint)
    assert export["dataset"]["sampling"] == {"rate": 0.1, "scheme": "poisson"}
    led.close()


def test_ledger_sampling_is_fixed_at_registration(ledger_url: str) -> None:
    led = Ledger(ledger_url)
    ds = led.register_dataset("digest-a", "a", 1.0, 1e-6, "rdp", sampling=Sampling(0.1))
    assert led.register_dataset("digest-a", "a", 1.0, 1e-6, "rdp", sampling=Sampling(0.1)).fingerprint == ds.fingerprint
    with pytest.raises(LedgerError, match=re.escape("registered as a secret poisson sample at rate 0.1; got not a sample")):
        led.register_dataset("digest-a", "a", 1.0, 1e-6, "rdp")
    with pytest.raises(LedgerError, match=re.escape("got a secret poisson sample at rate 0.2")):
        led.register_dataset("digest-a", "a", 1.0, 1e-6, "rdp", sampling=Sampling(0.2))
    plain = led.register_dataset("digest-b", "b", 1.0, 1e-6, "rdp")
    assert plain.sampling is None and led.dataset(plain.fingerprint).to_dict()["sampling"] is None
    with pytest.raises(LedgerError, match=re.escape("must be a planner.privacy.sampling.Sampling")):
        led.register_dataset("digest-c", "c", 1.0, 1e-6, "rdp", sampling={"rate": 0.1})  # type: ignore[arg-type]
    led.close()


def test_ledger_sampled_delta_is_accounted_on_the_sample(ledger_url: str) -> None:
    # Gaussian spends under zCDP on a sample at q = 0.01, population δ = 1e-6: the ledger's ε is
    # the zCDP ε of the composition at δ/q = 1e-4, amplified: the same as sampled_total_epsilon.
    from planner.privacy.events import GaussianEvent

    led = Ledger(ledger_url)
    ds = led.register_dataset("digest-g", "g", 1.0, 1e-6, "zcdp", sampling=Sampling(0.01))
    sp = Spend(event=GaussianEvent(2.0), epsilon=2.0, delta=1e-5)
    led.release(ds.fingerprint, "p", "s", [("q", sp)], lambda: {"q": 1})
    want = sampled_total_epsilon([sp], "zcdp", 1e-6, Sampling(0.01))
    st = led.status(ds.fingerprint)
    assert st.epsilon_spent == pytest.approx(want, rel=1e-12)
    # ρ = Δ²/(2σ²) = 1/8; zCDP → (ρ + 2√(ρ ln(1/δ')), δ') at δ' = 1e-4: 0.125 + 2√(0.125 × 9.2103404) = 2.27101
    # is an upper bound of the accountant's ε on the sample; amplified: ln(1 + 0.01(e^2.27101 − 1)) = 0.0860
    assert st.epsilon_spent_sample is not None and st.epsilon_spent_sample <= 2.2710 + 1e-4
    assert st.epsilon_spent <= math.log1p(0.01 * math.expm1(2.2710 + 1e-4))
    led.close()


# ---------------------------------------------------------------------- an old ledger


def _v2_ledger(url: str) -> tuple[str, Any]:
    """A ledger written by the format-2 code (kept verbatim in tests/fixtures/ledger_v2)."""
    v2 = runpy.run_path(str(FIXTURES / "ledger_v2" / "ledger_v2.py"), run_name="ledger_v2")
    old = v2["Ledger"](url)
    ds = old.register_dataset("digest-old", "census.csv", 2.0, 1e-6, "basic")
    old.release(ds.fingerprint, "plan-a", "s", [("q", pure(0.5))], lambda: {"q": 11})
    old.raise_budget(ds.fingerprint, 3.0, 1e-6, reason="board decision")
    old.close()
    return ds.fingerprint, v2


def test_old_ledger_without_the_new_columns_opens_and_works(ledger_url: str) -> None:
    fp, v2 = _v2_ledger(ledger_url)
    assert v2["FORMAT_VERSION"] == 2
    report = verify_ledger(ledger_url)  # read-only, before the migration: still consistent
    assert report.ok, report.problems
    led = Ledger(ledger_url)
    st = led.status(fp)
    assert (st.epsilon_total, st.epsilon_spent, st.releases) == (3.0, 0.5, 1)
    assert led.dataset(fp).sampling is None and "sampling" not in st.to_dict()
    (rec,) = led.releases(fp)
    assert rec.answers == {"q": 11}
    # it still spends, refuses overspend, and takes a secret sample now
    led.release(fp, "plan-b", "s", [("q", pure(2.5))], lambda: {"q": 12})
    with pytest.raises(BudgetExceededError):
        led.release(fp, "plan-c", "s", [("q", pure(0.01))], lambda: {"q": 13})
    smp = led.register_dataset("digest-new", "sample", 1.0, 0.0, "basic", sampling=Sampling(0.1))
    led.release(smp.fingerprint, "p", "s", [("q", pure(1.0))], lambda: {"q": 1})
    assert led.status(smp.fingerprint).epsilon_spent == pytest.approx(0.158565078740429111, rel=1e-12)
    assert led.verify().ok, led.verify().problems
    led.close()
    # reopened: nothing to migrate again, everything still there
    led = Ledger(ledger_url)
    assert led.status(fp).epsilon_spent == pytest.approx(3.0, rel=1e-12)
    with led.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT format_version FROM ledger_head").scalar() == FORMAT_VERSION == 4
        conn.rollback()
    led.close()
    # the format-2 code now refuses the ledger instead of mis-reading it
    with pytest.raises(LedgerIntegrityError, match="newer than this planner understands"):
        v2["Ledger"](ledger_url)


def test_editing_a_sampling_declaration_outside_the_planner_is_found(tmp_path: Path) -> None:
    # Declaring an existing dataset a 0.1% sample would make every spend look ~1000× cheaper.
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led = Ledger(url)
    ds = led.register_dataset("digest-x", "x", 1.0, 0.0, "basic")
    smp = led.register_dataset("digest-y", "y", 1.0, 0.0, "basic", sampling=Sampling(0.1))
    led.close()
    with sqlite3.connect(tmp_path / "ledger.db") as conn:
        conn.execute("UPDATE datasets SET sampling_rate = 0.001, sampling_scheme = 'poisson' WHERE fingerprint = ?",
                     (ds.fingerprint,))
        conn.execute("UPDATE datasets SET sampling_rate = NULL WHERE fingerprint = ?", (smp.fingerprint,))
    problems = " ".join(verify_ledger(url).problems)
    assert "table datasets: row 1 differs from the journal in column(s) sampling_rate, sampling_scheme" in problems
    assert "row 2 differs from the journal in column(s) sampling_rate" in problems
    led = Ledger(url)
    # the budget is read from the journal: the edit changes nothing it shows ...
    assert led.dataset(ds.fingerprint).sampling is None and led.dataset(smp.fingerprint).sampling == Sampling(0.1)
    # ... and a release on the edited row is refused, naming what disagrees
    with pytest.raises(LedgerIntegrityError, match=r"row 1 differs from the journal in column\(s\) sampling_rate"):
        led.release(ds.fingerprint, "p", "s", [("q", pure(0.1))], lambda: {"q": 1})
    led.close()


# ---------------------------------------------------------------------- release and the CLI


def _spec(schema: dict[str, Any] | str, epsilon: float, lifetime: float) -> dict[str, Any]:
    return {"schema": schema, "budget": {"epsilon": epsilon, "delta": 1e-7, "composition": "rdp"},
            # the lifetime δ is the plan's, so the ledger composes at the δ the plan was made for
            "lifetime": {"epsilon": lifetime, "delta": 1e-7}, "dataset_name": "census sample",
            "queries": [{"id": "people", "kind": "count", "mechanism": "discrete_laplace"},
                        {"id": "age", "kind": "mean", "column": "age", "mechanism": "laplace"},
                        {"id": "region", "kind": "histogram", "column": "region", "mechanism": "discrete_gaussian"}]}


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def test_cli_release_with_a_sampled_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    schema_file = tmp_path / "census.sample.schema.json"
    schema_file.write_text(json.dumps(census_dict(rate=0.05, scheme="poisson")), encoding="utf-8")
    by_path = tmp_path / "plan_path.json"
    by_path.write_text(json.dumps(_spec(schema_file.name, 0.5, 1.0)), encoding="utf-8")

    code, planned, err = _run(["plan", "--spec", str(by_path)], capsys)
    assert code == 0, err
    assert planned["used_epsilon"] == pytest.approx(0.5, rel=1e-9) and planned["used_epsilon"] <= 0.5 * (1 + 1e-12)
    assert planned["secret_sample"]["sample"]["epsilon"] == pytest.approx(
        Sampling(0.05).base_budget(0.5, 1e-7)[0], rel=1e-12)

    args = ["release", "--spec", str(by_path), "--data", str(CENSUS), "--ledger", url, "--backend", "pandas"]
    code, first, err = _run(args, capsys)
    assert code == 0, err
    assert first["status"] == "done"
    budget = first["budget"]
    assert budget["epsilon_total"] == 1.0
    # the recorded spends (OpenDP's costs, ≥ the planner's) amplified once: the plan's 0.5 up to float rounding
    assert budget["epsilon_spent"] == pytest.approx(0.5, rel=1e-6)
    assert budget["secret_sample"]["rate"] == 0.05 and budget["secret_sample"]["scheme"] == "poisson"
    assert budget["secret_sample"]["epsilon_spent_sample"] == pytest.approx(
        Sampling(0.05).base_budget(0.5, 1e-7)[0], rel=1e-6)
    code, second, _ = _run(args, capsys)
    assert code == 0 and second["status"] == "reused"

    # the same data with the schema inline, a second plan of 0.5: on the sample the two compose to about
    # twice ε_s, which amplified is far above the 0.5 left (composition first, then amplification)
    inline = tmp_path / "plan_inline.json"
    inline.write_text(json.dumps(_spec(census_dict(rate=0.05, scheme="poisson"), 0.4999, 1.0)), encoding="utf-8")
    code, _, err = _run(["release", "--spec", str(inline), "--data", str(CENSUS), "--ledger", url,
                         "--backend", "pandas"], capsys)
    assert code == 2 and "population ε" in json.loads(err)["error"]
    # what fits is the population ε that remains, planned through the same amplification
    code, ledger, _ = _run(["ledger", "--ledger", url], capsys)
    (row,) = ledger["datasets"]
    assert row["sampling"] == {"rate": 0.05, "scheme": "poisson"}
    assert row["releases"] == 1 and row["epsilon_spent"] == pytest.approx(0.5, rel=1e-6)

    # a schema that disagrees with the registered declaration is refused by name
    plain_spec = tmp_path / "plan_plain.json"
    plain_spec.write_text(json.dumps(_spec(census_dict(), 0.1, 1.0)), encoding="utf-8")
    code, _, err = _run(["release", "--spec", str(plain_spec), "--data", str(CENSUS), "--ledger", url,
                         "--backend", "pandas"], capsys)
    assert code == 2
    assert "registered as a secret poisson sample at rate 0.05; got not a sample" in json.loads(err)["error"]


def test_report_says_the_table_is_a_secret_sample() -> None:
    from planner.outputs.report import plan_report
    from planner.planning.plan_spec import parse_plan_spec

    spec = parse_plan_spec(_spec(census_dict(rate=0.05, scheme="poisson"), 0.5, 1.0))
    html = plan_report(spec)
    assert "The table is a secret random sample" in html and "q = 0.05" in html
    assert "Balle, Barthe and Gaboardi" in html
    assert "secret random sample" not in plan_report(parse_plan_spec(_spec(census_dict(), 0.5, 1.0)))
