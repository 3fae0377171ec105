"""Issue 14: the query builder is generated from each statistic's declaration.

For every registered statistic (``planner.planning.statistics.STATISTICS``, walked here, so a new
statistic is tested with no new test code): the form offers exactly its declared
mechanisms, draws one widget per declared option with the declaration's label and help,
and refuses an invalid value with the engine's message naming the option. The invalid
values come from each option's declared type and bounds (``OptionSpec``), not from a list
kept by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from pages._ui import state as S
from planner.data.schema import Schema
from planner.planning.queries import Query, QueryKind
from planner.planning.statistics import STATISTICS
from planner.planning.statistics.base import OptionSpec, OptionType

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
CENSUS = Schema.load(ROOT / "data" / "census.schema.json")


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_LEDGER_URL", f"sqlite:///{tmp_path}/l.db")


def _queries_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/queries_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _key(kind: str, o: OptionSpec, sub: str = "") -> str:
    return f"qb:opts:{kind}:{o.name}" + (f":{sub}" if sub else "")


def _widget(at: AppTest, key: str) -> Any:
    for getter in (at.checkbox, at.selectbox, at.number_input, at.text_input, at.multiselect):
        try:
            return getter(key=key)
        except KeyError:
            continue
    raise AssertionError(f"no widget with key {key!r} on the Queries page")


def _errors(at: AppTest) -> str:
    return " | ".join(e.value for e in at.error)


def _invalid(o: OptionSpec) -> tuple[str, Any] | None:
    """(how, value) of an invalid value for the option, from its declared type and bounds."""
    if o.type is OptionType.INT and o.minimum is not None:
        return "set", int(o.minimum) - 1
    if o.type is OptionType.FLOAT and o.minimum is not None:
        return "set", float(o.minimum) if o.open_bounds else float(o.minimum) - 1.0
    if o.type is OptionType.FLOATS:
        return "text", "0.5, many"  # not a number
    if o.type is OptionType.COLUMNS:
        names = ["sex", "region", "education", "smoker"]
        if o.max_items < len(names):
            return "set", names[: o.max_items + 1]  # one column too many
        return "set", []  # more may be listed than the census has columns: one too few (none)
    if o.type is OptionType.PREDICATE:
        return "predicate", ("age", ">=", "old")  # a numeric column compared with text
    return None  # BOOL and CHOICE: a checkbox or a closed list cannot hold an invalid value


def _column_for(kind: QueryKind) -> str:
    kinds = STATISTICS[kind].column_kinds
    for name in ("age", "income", "region", "smoker", "sex"):
        if CENSUS.column(name).kind in kinds:
            return name
    return ""


@pytest.mark.parametrize("kind", [k.value for k in STATISTICS])
def test_form_renders_the_declared_options_and_refuses_invalid_values(kind: str) -> None:
    stat = STATISTICS[QueryKind(kind)]
    at = _queries_page()
    at.selectbox(key="qb:kind").set_value(kind).run()
    at.text_input(key="qb:id").input(f"my_{kind}").run()
    col = _column_for(QueryKind(kind))
    if col:
        at.selectbox(key="qb:column").set_value(col).run()
    assert not at.exception, [e.value for e in at.exception]

    # only the declared mechanisms, the first one chosen
    mech = at.selectbox(key="qb:mechanism")
    assert [o.split(" (")[-1].rstrip(")") for o in mech.options] == [m.name.value for m in stat.mechanisms]
    # one widget per declared option, with the declaration's label and help
    for o in stat.options:
        w = _widget(at, _key(kind, o, "on" if o.type is OptionType.PREDICATE else ""))
        assert w.label.startswith(o.label), (o.name, w.label)
        assert o.help in (w.help or ""), (o.name, w.help)

    tested = 0
    for o in stat.options:
        bad = _invalid(o)
        if bad is None:
            continue
        how, value = bad
        if how == "predicate":
            at.checkbox(key=_key(kind, o, "on")).check().run()
            c, op, text = value
            at.selectbox(key=_key(kind, o, "column")).set_value(c).run()
            at.selectbox(key=_key(kind, o, "op")).set_value(op).run()
            at.text_input(key=_key(kind, o, "value")).input(text).run()
        elif how == "text":
            at.text_input(key=_key(kind, o)).input(value).run()
        else:
            _widget(at, _key(kind, o)).set_value(value).run()
        assert not at.exception, [e.value for e in at.exception]
        msg = _errors(at)
        assert f"'{o.name}'" in msg or "filter" in msg, (o.name, msg)
        assert at.button(key="qb:add").disabled  # nothing invalid can be added
        tested += 1
        # put it right again before the next option (a valid value, or blank when optional)
        if how == "predicate":
            at.checkbox(key=_key(kind, o, "on")).uncheck().run()
        elif how == "text":
            at.text_input(key=_key(kind, o)).input("0.25, 0.75" if o.required else "").run()
        elif o.type is OptionType.COLUMNS:
            _widget(at, _key(kind, o)).set_value(["sex"]).run()
        else:
            _widget(at, _key(kind, o)).set_value(o.default if o.required else None).run()
    if tested == 0:  # no option can hold an invalid value: the common fields still refuse one
        at.number_input(key="qb:weight").set_value(-1.0).run()
        assert "weight must be > 0" in _errors(at)
        assert at.button(key="qb:add").disabled
        at.number_input(key="qb:weight").set_value(1.0).run()

    # required options left blank are named too
    for o in stat.options:
        if o.required and o.type is OptionType.FLOATS:
            at.text_input(key=_key(kind, o)).input("").run()
            assert f"needs '{o.name}'" in _errors(at)
            at.text_input(key=_key(kind, o)).input("0.25, 0.75").run()
        elif o.required and o.type is OptionType.INT:
            at.number_input(key=_key(kind, o)).set_value(None).run()
            assert f"needs '{o.name}'" in _errors(at)
            at.number_input(key=_key(kind, o)).set_value(10).run()


def test_an_option_error_is_shown_once_at_its_field_and_nothing_false_beside_it() -> None:
    """Found in the browser (session 10): a blank 'Levels' showed "needs 'alphas'" twice (at the
    field and for the whole query), and levels '0.25, 1.5' showed "must be < 1" beside a false
    "needs 'alphas'": the whole query was checked without the option that had failed."""
    at = _queries_page()
    at.selectbox(key="qb:kind").set_value("quantile").run()
    at.text_input(key="qb:id").input("age_q").run()
    at.selectbox(key="qb:column").set_value("age").run()
    o = STATISTICS[QueryKind.QUANTILE].option("alphas")
    at.text_input(key=_key("quantile", o)).input("").run()
    assert [e.value for e in at.error].count("query 'age_q': a quantile query needs 'alphas' (Levels).") == 1, \
        [e.value for e in at.error]
    assert len(at.error) == 1
    at.text_input(key=_key("quantile", o)).input("0.25, 1.5").run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "must be < 1" in errors[0], errors
    assert at.button(key="qb:add").disabled
    at.text_input(key=_key("quantile", o)).input("0.25, 0.75").run()
    assert not at.error and not at.button(key="qb:add").disabled


# A valid query of every kind through the form, each with its options: the form's row is
# exactly the query the engine reads (Query.from_dict of the flat form), and the workload
# made of them is valid.
VALID: dict[str, dict[str, Any]] = {
    "count": {"column": "", "opts": {"predicate": ("age", ">=", "65")}},
    "sum": {"column": "income"},
    "mean": {"column": "income", "opts": {"mode": "sum_over_count"}},
    "histogram": {"column": "age", "opts": {"bin_edges": "18, 30, 65, 90"}},
    "quantile": {"column": "age", "opts": {"alphas": "0.25, 0.75", "candidates": 73}},
    "median": {"column": "income", "opts": {"step": 1000.0}},
    "mode": {"column": "education", "mechanism": "inverse_sensitivity"},
    "proportion": {"column": "smoker"},
    "synthetic_sample": {"column": "age", "opts": {"bins": 12}},
    "grouped_count": {"column": "", "opts": {"by": ["sex", "region"]}},
    "grouped_sum": {"column": "income", "opts": {"by": ["sex"]}},
    "grouped_mean": {"column": "income", "opts": {"by": ["region"]}},
    "grouped_quantile": {"column": "age", "opts": {"by": ["sex"], "alphas": "0.5"}},
    # no "column": the form shows none for a statistic that takes none (it names its columns in an option)
    "synthetic_data": {"opts": {"columns": ["sex", "region", "age"], "rows": 500, "bins": 6}},
}


def _fill(at: AppTest, kind: str, spec: dict[str, Any]) -> None:
    at.selectbox(key="qb:kind").set_value(kind).run()
    at.text_input(key="qb:id").input(f"q_{kind}").run()
    if "column" in spec:
        at.selectbox(key="qb:column").set_value(spec["column"]).run()
    else:  # a statistic that takes no column shows no column box
        with pytest.raises(KeyError):
            at.selectbox(key="qb:column")
    if "mechanism" in spec:
        at.selectbox(key="qb:mechanism").set_value(spec["mechanism"]).run()
    stat = STATISTICS[QueryKind(kind)]
    for name, value in spec.get("opts", {}).items():
        o = stat.option(name)
        if o.type is OptionType.PREDICATE:
            at.checkbox(key=_key(kind, o, "on")).check().run()
            at.selectbox(key=_key(kind, o, "column")).set_value(value[0]).run()
            at.selectbox(key=_key(kind, o, "op")).set_value(value[1]).run()
            at.text_input(key=_key(kind, o, "value")).input(value[2]).run()
        elif o.type is OptionType.FLOATS:
            at.text_input(key=_key(kind, o)).input(value).run()
        else:
            _widget(at, _key(kind, o)).set_value(value).run()


def test_every_kind_built_in_the_form_is_the_query_the_engine_reads() -> None:
    # a key count needs a column of kind "key", which the census sample does not have
    assert set(VALID) == {k.value for k in STATISTICS} - {"key_count"}, "a new statistic needs a valid example here"
    at = _queries_page()
    for kind, spec in VALID.items():
        _fill(at, kind, spec)
        assert not at.exception, [e.value for e in at.exception]
        assert not at.button(key="qb:add").disabled, (kind, _errors(at))
        at.button(key="qb:add").click().run()
        assert any(f"Added q_{kind}" in s.value for s in at.success), (kind, _errors(at))
    rows = at.session_state[S.WORKLOAD]
    flat = {d["id"]: d for d in S.query_dicts(rows, "weighted")}
    # the options as typed, read back by the engine (expected values: the form's inputs above)
    q = {k: Query.from_dict(flat[f"q_{k}"]) for k in VALID}
    assert q["count"].predicate is not None and q["count"].predicate.to_dict() == {"column": "age", "op": ">=", "value": 65.0}
    assert q["histogram"].bin_edges == (18.0, 30.0, 65.0, 90.0)
    assert q["quantile"].alphas == (0.25, 0.75) and q["quantile"].candidates == 73
    assert q["median"].step == 1000.0
    assert q["mode"].mechanism.value == "inverse_sensitivity"
    assert q["synthetic_sample"].bins == 12
    assert q["grouped_count"].by == ("sex", "region") and q["grouped_quantile"].alphas == (0.5,)
    assert (q["synthetic_data"].option("columns"), q["synthetic_data"].option("rows"),
            q["synthetic_data"].option("bins")) == (("sex", "region", "age"), 500, 6)
    assert any(f"{7 + len(VALID)} valid queries" in s.value for s in at.success)


def test_a_query_loaded_into_the_form_is_edited_in_place() -> None:
    at = _queries_page()
    _fill(at, "quantile", VALID["quantile"])
    at.button(key="qb:add").click().run()
    at.selectbox(key="queries:edit_pick").set_value("q_quantile").run()
    at.button(key="queries:edit_load").click().run()
    assert at.text_input(key="qb:opts:quantile:alphas").value == "0.25, 0.75"
    at.text_input(key="qb:opts:quantile:alphas").input("0.1, 0.5, 0.9").run()
    at.button(key="qb:save").click().run()
    assert not at.exception
    rows = {r["id"]: r for r in S.query_dicts(at.session_state[S.WORKLOAD], "weighted")}
    assert rows["q_quantile"]["alphas"] == [0.1, 0.5, 0.9]
    assert sum(1 for r in at.session_state[S.WORKLOAD] if r.get("id") == "q_quantile") == 1


def test_options_typed_as_json_in_the_table_are_read_and_checked() -> None:
    at = _queries_page()
    rows = [dict(r) for r in at.session_state[S.WORKLOAD]]
    # what the table's on_change writes when a person types into the options cell
    rows.append({"id": "levels", "kind": "quantile", "column": "age", "mechanism": "exponential",
                 "weight": 1.0, "options": '{"alphas": [0.1, 0.9]}'})
    at.session_state[S.WORKLOAD] = rows
    at.run()
    assert any("8 valid queries" in s.value for s in at.success), _errors(at)
    rows[-1]["options"] = '{"alphas": [0.1, 1.5]}'
    at.session_state[S.WORKLOAD] = rows
    at.run()
    assert "option 'alphas' (Levels) must be < 1" in _errors(at)
    rows[-1]["options"] = '{"alphas": [0.1, 0.9'
    at.session_state[S.WORKLOAD] = rows
    at.run()
    assert "options of query 'levels'" in _errors(at) and "not valid JSON" in _errors(at)
