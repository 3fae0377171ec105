"""Schema declaration: validation messages, JSON round trip, hash, suggestions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.errors import DataError, SchemaError
from planner.data.schema import (
    OTHER_LABEL,
    SCHEMA_VERSION,
    Column,
    ColumnKind,
    MissingAction,
    MissingRule,
    PrivacyUnit,
    Relation,
    Schema,
    SchemaProblems,
    dataset_fingerprint,
    suggest_kinds,
)

DATA = Path(__file__).resolve().parents[2] / "data"
DROP = MissingRule()


def num(name: str = "age", lo: float = 0, hi: float = 100, **kw: object) -> Column:
    return Column(name, ColumnKind.NUMERIC, kw.pop("missing", DROP), lo, hi, **kw)  # type: ignore[arg-type]


def cat(name: str = "region", cats: tuple[str, ...] = ("A", "B"), **kw: object) -> Column:
    return Column(name, ColumnKind.CATEGORICAL, kw.pop("missing", DROP), categories=cats, **kw)  # type: ignore[arg-type]


def full_schema() -> Schema:
    return Schema(
        (
            Column("pid", ColumnKind.IDENTIFIER),
            num("age", 18, 90),
            num("income", 0, 250_000, missing=MissingRule(MissingAction.REPLACE, 0.0)),
            cat("region", ("North", "South"), other_bin=True),
            Column("smoker", ColumnKind.BOOLEAN, MissingRule(MissingAction.REPLACE, False)),
        ),
        relation=Relation.SUBSTITUTE,
        unit=PrivacyUnit("pid", 3),
        public_n=1000,
        salt="s1",
    )


# ------------------------------------------------------------------ column validation
def test_schema_swapped_bounds_message_names_column_and_fix() -> None:
    with pytest.raises(SchemaError, match=r"column 'age': lower bound 90 must be < upper bound 18; swap them"):
        num("age", 90, 18)


def test_schema_equal_bounds_rejected() -> None:
    with pytest.raises(SchemaError, match="must be < upper bound"):
        num("age", 5, 5)


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_schema_nonfinite_bounds_rejected(bad: float) -> None:
    with pytest.raises(SchemaError, match=r"column 'age'.*finite"):
        num("age", bad, 10) if bad != float("inf") else num("age", 0, bad)


def test_schema_numeric_needs_bounds() -> None:
    with pytest.raises(SchemaError, match="needs public bounds"):
        Column("x", ColumnKind.NUMERIC, DROP)


def test_schema_text_bound_rejected() -> None:
    with pytest.raises(SchemaError, match="finite number"):
        Column("x", ColumnKind.NUMERIC, DROP, "a", 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("lower", ["0", "1_000", " 5 ", "-1e300"])
def test_schema_bounds_written_as_text_are_refused_as_in_a_spec_file(lower: str) -> None:
    """Fuzzing (session 10): bounds given as JSON strings went through float(), around the
    strict reader's number rules: "1_000" was 1000, and "-1e300" crashed planning."""
    doc = {"version": 1, "columns": [{"name": "x", "kind": "numeric", "lower": lower, "upper": 100,
                                      "missing": {"action": "drop"}}]}
    with pytest.raises(SchemaError, match=r"column 'x': lower bound must be a finite number; got str"):
        Schema.from_dict(doc)


def test_schema_bounds_on_categorical_rejected() -> None:
    with pytest.raises(SchemaError, match="bounds apply to numeric columns only"):
        Column("r", ColumnKind.CATEGORICAL, DROP, 0, 1, categories=("a",))


def test_schema_empty_category_list_rejected() -> None:
    with pytest.raises(SchemaError, match=r"column 'region'.*non-empty public category list"):
        cat("region", ())


def test_schema_duplicate_categories_named() -> None:
    with pytest.raises(SchemaError, match=r"duplicated categories \['A'\]"):
        cat("region", ("A", "B", "A"))


def test_schema_duplicates_after_strip_rejected() -> None:
    with pytest.raises(SchemaError, match="duplicated"):
        cat("region", ("A", " A"))


def test_schema_empty_category_label_rejected() -> None:
    with pytest.raises(SchemaError, match="category #2 is empty"):
        cat("region", ("A", "  "))


def test_schema_other_label_reserved() -> None:
    with pytest.raises(SchemaError, match="reserved"):
        cat("region", ("A", OTHER_LABEL), other_bin=True)


def test_schema_replace_needs_value_and_drop_forbids_it() -> None:
    with pytest.raises(SchemaError, match="needs a public replacement"):
        MissingRule(MissingAction.REPLACE)
    with pytest.raises(SchemaError, match="takes no replacement"):
        MissingRule(MissingAction.DROP, 3.0)
    with pytest.raises(SchemaError, match="must be one of"):
        MissingRule("impute")  # type: ignore[arg-type]


def test_schema_replace_value_checked_against_kind() -> None:
    with pytest.raises(SchemaError, match="must be one of the declared categories"):
        cat("region", ("A",), missing=MissingRule(MissingAction.REPLACE, "Z"))
    with pytest.raises(SchemaError, match="true or false"):
        Column("b", ColumnKind.BOOLEAN, MissingRule(MissingAction.REPLACE, "yes"))
    with pytest.raises(SchemaError, match="finite"):
        num("x", missing=MissingRule(MissingAction.REPLACE, float("nan")))
    with pytest.raises(SchemaError, match="identifier column cannot replace"):
        Column("id", ColumnKind.IDENTIFIER, MissingRule(MissingAction.REPLACE, "x"))


def test_schema_unit_validation() -> None:
    with pytest.raises(SchemaError, match="needs an identifier column"):
        PrivacyUnit(None, 2)
    with pytest.raises(SchemaError, match="max_rows must be between 1"):
        PrivacyUnit("pid", 0)
    with pytest.raises(SchemaError, match="not declared"):
        Schema((num(),), unit=PrivacyUnit("pid", 1))
    with pytest.raises(SchemaError, match="kind 'identifier'"):
        Schema((num("pid"),), unit=PrivacyUnit("pid", 1))


def test_schema_duplicate_columns_and_public_n() -> None:
    with pytest.raises(SchemaError, match=r"\['age'\] are declared more than once"):
        Schema((num(), num()))
    with pytest.raises(SchemaError, match="public_n"):
        Schema((num(),), public_n=0)
    with pytest.raises(SchemaError, match="at least one column"):
        Schema(())


def test_schema_c_is_max_rows() -> None:
    assert full_schema().c == 3
    assert Schema((num(),)).c == 1


# ------------------------------------------------------------------ JSON
def test_schema_json_round_trip() -> None:
    s = full_schema()
    d = s.to_dict()
    assert d["version"] == SCHEMA_VERSION
    assert Schema.from_dict(json.loads(json.dumps(d))) == s
    assert Schema.from_json(s.to_json()) == s


def test_schema_save_load_round_trip(tmp_path: Path) -> None:
    s = full_schema()
    p = tmp_path / "s.json"
    s.save(p)
    assert Schema.load(p) == s
    assert Schema.load(p).schema_hash() == s.schema_hash()


def test_schema_hash_ignores_key_order_and_changes_with_content() -> None:
    s = full_schema()
    d = s.to_dict()
    shuffled = json.loads(json.dumps(d, sort_keys=True))
    shuffled = dict(reversed(list(shuffled.items())))
    assert Schema.from_dict(shuffled).schema_hash() == s.schema_hash()
    # integers and floats for bounds hash the same (they normalise to floats)
    d2 = json.loads(json.dumps(d))
    d2["columns"][1]["lower"] = 18
    assert Schema.from_dict(d2).schema_hash() == s.schema_hash()
    d2["columns"][1]["lower"] = 19
    assert Schema.from_dict(d2).schema_hash() != s.schema_hash()
    # it is the sha256 of the canonical JSON
    canon = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert s.schema_hash() == hashlib.sha256(canon.encode()).hexdigest()


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda d: d.pop("version"), "no 'version'"),
        (lambda d: d.update(version=99), "version 99 is not supported"),
        (lambda d: d.update(extra=1), r"unknown schema key\(s\) \['extra'\]"),
        (lambda d: d["columns"][1].pop("missing"), "explicit missing-value rule"),
        (lambda d: d["columns"][1].pop("kind"), "missing 'kind'"),
        (lambda d: d["columns"][1].update(kind="date"), "kind must be one of"),
        (lambda d: d["columns"][1].update(lower=100), "column 'age': lower bound 100 must be < upper bound 90; swap them"),
        (lambda d: d["columns"][3].update(categories=[]), "non-empty public category list"),
        (lambda d: d["columns"][3].update(categories="North"), "'categories' must be a list"),
        (lambda d: d.update(relation="neighbours"), "relation must be one of"),
        (lambda d: d.update(privacy_unit={"column": "pid", "max_rows": "3"}), "max_rows"),
        (lambda d: d.update(columns="x"), "'columns' list"),
        (lambda d: d["columns"][1].update(missing="drop"), "'missing' must be an object"),
    ],
)
def test_schema_from_dict_errors(mutate: object, pattern: str) -> None:
    d = full_schema().to_dict()
    mutate(d)  # type: ignore[operator]
    with pytest.raises(SchemaError, match=pattern):
        Schema.from_dict(d)


def test_schema_from_dict_lists_every_problem_at_once() -> None:
    # Issue 12: a form with three wrong columns and a wrong row count shows four problems
    # in one message, each naming its column or field and the fix (not only the first).
    d = full_schema().to_dict()
    d["columns"][1].update(lower=100)  # age: 100 > 90
    d["columns"][2].update(lower=None)  # income: no lower bound
    d["columns"][3].update(categories=[])  # region: empty list
    d["public_n"] = 0
    with pytest.raises(SchemaProblems) as err:
        Schema.from_dict(d)
    probs = err.value.problems
    assert len(probs) == 4, probs
    assert "column 'age'" in probs[0] and "swap them" in probs[0]
    assert "column 'income'" in probs[1] and "needs public bounds" in probs[1]
    assert "column 'region'" in probs[2] and "non-empty public category list" in probs[2]
    assert "public_n must be a whole number" in probs[3]
    assert str(err.value).startswith("4 problems in the schema: (1) column 'age'")
    assert isinstance(err.value, SchemaError)  # pages and the CLI catch it as before


def test_schema_problems_report_a_broken_unit_column_once() -> None:
    # The privacy unit names 'pid'; when pid's own declaration is wrong, that is the one
    # problem reported for it (not also "privacy unit column 'pid' is not declared").
    d = full_schema().to_dict()
    d["columns"][0].update(kind="date")
    d["columns"][1].pop("missing")
    with pytest.raises(SchemaProblems) as err:
        Schema.from_dict(d)
    assert len(err.value.problems) == 2, err.value.problems
    assert "column 'pid': kind must be one of" in err.value.problems[0]
    assert "column 'age'" in err.value.problems[1]


def test_schema_one_problem_keeps_its_own_message() -> None:
    d = full_schema().to_dict()
    d["columns"][1].update(lower=100)
    with pytest.raises(SchemaProblems) as err:
        Schema.from_dict(d)
    assert str(err.value) == "column 'age': lower bound 100 must be < upper bound 90; swap them."


def test_schema_load_bad_files(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text("{not json", encoding="utf-8")
    with pytest.raises(SchemaError, match=r"bad.json.*not valid JSON \(line 1"):
        Schema.load(p)
    with pytest.raises(SchemaError, match=r"cannot open the schema file .absent.json."):
        Schema.load(tmp_path / "absent.json")
    p.write_text("[]", encoding="utf-8")
    with pytest.raises(SchemaError, match="JSON object"):
        Schema.load(p)


def test_schema_sample_schemas_load() -> None:
    for name in ("census", "survey"):
        s = Schema.load(DATA / f"{name}.schema.json")
        assert s.to_dict()["version"] == 1


# ------------------------------------------------------------------ suggestions
def test_suggest_kinds_returns_kinds_only() -> None:
    df = pd.DataFrame(
        {
            "person_id": [1, 2, 3, 4],
            "age": [30, 41.5, 50, 60],
            "region": ["N", "S", "N", "S"],
            "smoker": ["yes", "no", "no", "yes"],
            "flag": [0, 1, 1, 0],
            "ok": [True, False, True, True],
        }
    )
    kinds = suggest_kinds(df)
    assert kinds == {
        "person_id": ColumnKind.IDENTIFIER,
        "age": ColumnKind.NUMERIC,
        "region": ColumnKind.CATEGORICAL,
        "smoker": ColumnKind.BOOLEAN,
        "flag": ColumnKind.BOOLEAN,
        "ok": ColumnKind.BOOLEAN,
    }
    assert all(isinstance(v, ColumnKind) for v in kinds.values())


def test_suggest_kinds_many_distinct_text_is_identifier() -> None:
    df = pd.DataFrame({"name": [f"n{i}" for i in range(200)]})
    assert suggest_kinds(df) == {"name": ColumnKind.IDENTIFIER}


def test_suggest_kinds_many_repeated_text_values_are_keys() -> None:
    # 150 cities, each on two rows: too many to list as categories, not one per person
    df = pd.DataFrame({"city": [f"c{i // 2}" for i in range(300)]})
    assert suggest_kinds(df) == {"city": ColumnKind.KEY}


def test_suggest_kinds_numbers_with_no_value_markers_are_numeric() -> None:
    """Session 9's browser check: an age column of a UCI-style file, '?' on 10% of rows,
    was suggested `key` (90% numbers is under the 95% threshold; 60 distinct values)."""
    ages = [str(20 + i % 60) for i in range(270)] + ["?"] * 20 + ["NA"] * 5 + [" - "] * 5
    df = pd.DataFrame({"age": ages, "city": [f"c{i // 2}" for i in range(300)]})
    assert suggest_kinds(df) == {"age": ColumnKind.NUMERIC, "city": ColumnKind.KEY}
    # markers alone are not numbers: nothing but '?' and 'NA' stays text (categorical, 2 values)
    assert suggest_kinds(pd.DataFrame({"x": ["?", "NA"] * 10})) == {"x": ColumnKind.CATEGORICAL}


def test_no_schema_function_reads_bounds_from_rows() -> None:
    """Bounds/categories cannot be produced from data: there is no such function."""
    import planner.data.schema as m

    public = [n for n in dir(m) if not n.startswith("_")]
    assert not [n for n in public if "infer" in n.lower() or "from_data" in n.lower()]


# ------------------------------------------------------------------ fingerprint
def test_dataset_fingerprint_bytes_and_path_agree(tmp_path: Path) -> None:
    b = b"a,b\n1,2\n"
    p = tmp_path / "x.csv"
    p.write_bytes(b)
    assert dataset_fingerprint(b) == dataset_fingerprint(p) == hashlib.sha256(b).hexdigest()
    with pytest.raises(DataError, match="cannot read"):
        dataset_fingerprint(tmp_path / "absent.csv")


# ------------------------------------------------------------------ property
_name = st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=8)


@st.composite
def schemas(draw: st.DrawFn) -> Schema:
    names = draw(st.lists(_name, min_size=1, max_size=5, unique=True))
    cols = []
    for n in names:
        kind = draw(st.sampled_from([ColumnKind.NUMERIC, ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN]))
        if kind is ColumnKind.NUMERIC:
            lo = draw(st.floats(-1e6, 1e6))
            hi = lo + draw(st.floats(1e-3, 1e6))
            cols.append(Column(n, kind, DROP, lo, hi))
        elif kind is ColumnKind.CATEGORICAL:
            cats = draw(st.lists(_name, min_size=1, max_size=5, unique=True))
            cols.append(Column(n, kind, DROP, categories=tuple(cats), other_bin=draw(st.booleans())))
        else:
            cols.append(Column(n, kind, MissingRule(MissingAction.REPLACE, draw(st.booleans()))))
    return Schema(
        tuple(cols),
        relation=draw(st.sampled_from(list(Relation))),
        public_n=draw(st.none() | st.integers(1, 10**6)),
        salt=draw(st.text(max_size=10)),
    )


@settings(max_examples=60, deadline=None)
@given(schemas())
def test_schema_json_round_trip_property(s: Schema) -> None:
    back = Schema.from_json(s.to_json())
    assert back == s
    assert back.schema_hash() == s.schema_hash()
    assert np.isfinite([c.lower for c in s.columns if c.lower is not None]).all()


def test_schema_files_are_read_strictly(tmp_path: Path) -> None:
    # issue 16: a schema file obeys the spec-file limits (duplicate keys, non-finite
    # numbers, depth, not a regular file) with a message, never a traceback
    p = tmp_path / "dup.json"
    p.write_text('{"version": 1, "version": 1, "columns": []}', encoding="utf-8")
    with pytest.raises(SchemaError, match="twice in one object"):
        Schema.load(p)
    p.write_text('{"version": 1, "columns": [{"name": "x", "kind": "numeric", "lower": 0, "upper": NaN}]}')
    with pytest.raises(SchemaError, match="non-finite"):
        Schema.load(p)
    with pytest.raises(SchemaError, match=r"regular file|not a file"):
        Schema.load(tmp_path)


# ----------------------------------------------------------------------------- text lists
# The Data page edits a column's categories (and a filter's list of values) as one line of
# text; a category may hold a comma or a quote (issue found in the session-9 browser check:
# "Smith, John" came back as two categories, also when loaded from a schema JSON).
_ITEM = st.text(alphabet=st.sampled_from(list('ab ,"xé')), min_size=1, max_size=8).map(str.strip).filter(bool)


@given(st.lists(_ITEM, max_size=6))
@settings(max_examples=300, deadline=None)
def test_a_list_of_categories_survives_the_one_line_form(items):
    from planner.data.schema import format_text_list, parse_text_list

    assert parse_text_list(format_text_list(items)) == items


@pytest.mark.parametrize(("text", "items"), [
    # typed by hand: commas split, quotes keep a comma, "" is one quote, blanks are dropped
    ("A, B, C", ["A", "B", "C"]),
    ('"Smith, John", "He said ""hi""", plain', ["Smith, John", 'He said "hi"', "plain"]),
    ('He said "hi", x', ['He said "hi"', "x"]),  # a quote inside an unquoted item is kept
    ('"a" , b,, ,', ["a", "b"]),
    ("", []),
])
def test_a_typed_list_reads_as_a_person_means_it(text, items):
    from planner.data.schema import parse_text_list

    assert parse_text_list(text) == items


@pytest.mark.parametrize(("text", "says"), [('"Smith, John', "not closed"), ('"a"b, c', "comma must follow")])
def test_a_malformed_list_says_what_to_fix(text, says):
    from planner.data.schema import parse_text_list

    with pytest.raises(ValueError, match=says):
        parse_text_list(text)
