"""AppTest: the Data page's "suggest bounds" (a confirmation stating ε, one spend in the
ledger, the suggestion written into the schema form with its source) and the Accuracy
page's clipping bias beside the noise."""

from __future__ import annotations

import numpy as np

from pages._ui import state as S
from pages._ui import suggest
from tests.app.test_pages import PICKER, UPLOADER, _app, _goto, _status, declare, set_lifetime

N = 2000


def _csv() -> bytes:
    x = np.random.default_rng(20261128).lognormal(10.0, 1.0, N)
    return ("income,city\n" + "".join(f"{v:.2f},{'AB'[i % 2]}\n" for i, v in enumerate(x))).encode()


def test_suggest_bounds_confirms_spends_once_and_fills_the_form(tmp_path) -> None:
    at = _goto(_app(), "data_page")
    at.radio(key=PICKER).set_value("upload").run()
    at.file_uploader(key=UPLOADER).upload("incomes.csv", _csv(), "text/csv").run()
    declare(at, {"income": {"bounds": "0, 1000000"}, "city": {"kind": "categorical", "cats": "A, B"}}, public_n=N)
    assert not at.error, [e.value for e in at.error]
    _goto(at, "plan_page")
    set_lifetime(at, "planner", 2.0, 0.0)
    _goto(at, "data_page")
    assert not any(b.key == "data:col:city:suggest" for b in at.button)  # numeric columns only
    at.button(key="data:col:income:suggest").click().run()
    at.text_input(key=suggest.RANGE).input("1e6").run()
    at.number_input(key=suggest.EPS).set_value(0.5).run()
    assert any("Spends ε = 0.5" in c.value for c in at.caption)  # the prediction, before anything is spent
    # by default the levels are tuned for a mean of the column, at its ε in the plan in force
    assert any("Levels tuned for a mean of 'income'" in c.value for c in at.caption)
    # for quantiles or histograms: the fixed levels
    at.selectbox(key=suggest.FOR).set_value(suggest.FIXED).run()
    assert any("Releases the 0.01 and 0.99 quantile(s)" in c.value for c in at.caption)
    assert not any("Levels tuned" in c.value for c in at.caption)
    at.selectbox(key=suggest.FOR).set_value("mean").run()
    # a mean at ε = 1 typed: σ₁ = 2 (the default mean, n × its std per unit of U − L: 2/ε),
    # m* = 2 rows of the public n = 2,000 → the upper bound at level 1 − 2/2000 = 0.999
    at.number_input(key=suggest.FOR_EPS).set_value(1.0).run()
    assert any("that will spend ε = 1 (given)" in c.value and "upper bound at level 0.999" in c.value
               for c in at.caption)
    assert _status(at).releases == 0
    at.button(key="data:suggest:open").click().run()
    assert any("This spends **ε = 0.5**" in w.value for w in at.warning)
    assert _status(at).releases == 0  # nothing spent before the confirmation
    at.button(key="data:suggest:confirm").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    st1 = _status(at)
    assert st1.releases == 1 and abs(st1.epsilon_spent - 0.5) < 1e-9
    text = at.text_input(key="data:col:income:bounds").value
    lo, hi = (float(v) for v in text.split(","))
    assert 0 <= lo < hi <= 1e6
    # asked again: the stored suggestion, nothing spent
    at.button(key="data:suggest:open").click().run()
    at.button(key="data:suggest:confirm").click().run()
    assert any("nothing spent again" in s.value for s in at.success)
    assert _status(at).releases == 1
    # saved, the schema records where the bounds came from
    at.button(key="data:schema_save").click().run()
    assert not at.error, [e.value for e in at.error]
    from planner.data.schema import Schema

    fp = next(iter(at.session_state[S.SCHEMAS]))
    col = Schema.from_json(at.session_state[S.SCHEMAS][fp]).column("income")
    assert col.bounds == (lo, hi) and col.bounds_source is not None
    assert col.bounds_source.levels == (0.0, 0.999) and abs(col.bounds_source.epsilon - 0.5) < 1e-9
    # edited by hand, the bounds lose their DP source
    at.text_input(key="data:col:income:bounds").input("0, 5000").run()
    at.button(key="data:schema_save").click().run()
    col = Schema.from_json(at.session_state[S.SCHEMAS][fp]).column("income")
    assert col.bounds == (0.0, 5000.0) and col.bounds_source is None


def test_accuracy_shows_clipping_bias_beside_the_noise() -> None:
    at = _goto(_app(), "accuracy_page")
    means = [o for o in at.selectbox(key=S.widget_key(S.ACC_QUERY, "accuracy")).options if "mean" in o or "sum" in o]
    assert means, "the census sample's starting workload holds a mean or a sum"
    at.selectbox(key=S.widget_key(S.ACC_QUERY, "accuracy")).set_value(means[0].split(" ")[0]).run()
    assert not at.exception
    assert any(m.label == "Clipping bias: at most" for m in at.metric)
    assert any("may move the" in c.value and "by any amount" in c.value for c in at.caption)
    # the data-dependent clipping is shown with the owner-only view only, labelled
    assert not any("On your raw rows" in c.value for c in at.caption)
    at.toggle(key=S.widget_key(S.ACC_DATA_VIEW, "accuracy")).set_value(True).run()
    assert any("On your raw rows" in c.value for c in at.caption)
    assert any("not private, do not share" in e.value for e in at.error)
