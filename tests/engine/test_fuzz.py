"""Property-based fuzzing (hypothesis) of the spec parsers, the ledger's stored-event
parsing and the command line's argument and exit path, with a bounded budget for CI.

Property: for any input, the code under test either succeeds or raises a
:class:`~planner.core.errors.PlannerError` (a clear message); nothing else escapes, and the CLI
returns one of its documented exit statuses. Seeds: every file of the hostile-spec corpus
(tests/fixtures/hostile_specs) and the examples, mutated byte-wise; regressions found are
pinned with ``@example``. Budget: ``PLANNER_FUZZ_EXAMPLES`` examples per property
(default 150), no deadline; each example is counted in the run's hostile-input summary.
"""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from planner.cli import EXIT_ERROR, EXIT_INTERNAL, EXIT_OK, EXIT_PROBLEM, main
from planner.core.errors import LedgerIntegrityError, PlannerError
from planner.core.strict_json import loads_strict
from planner.ledger.records import parse_event as _parse_event
from planner.planning.plan_spec import parse_plan_spec
from tests import hostile_counts

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "hostile_specs"
SEEDS: list[bytes] = sorted(
    [p.read_bytes()[:20_000] for p in CORPUS.glob("*.json") if p.name != "expected.json"]
    + [p.read_bytes() for p in (ROOT / "examples").glob("*.json")]
)
EXAMPLES = int(os.environ.get("PLANNER_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def mutated_seed(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 8))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "dup"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8)) or b"["
        elif op == "delete" and data:
            del data[pos: pos + draw(st.integers(1, 16))]
        elif op == "dup" and data:
            data[pos:pos] = data[pos: pos + draw(st.integers(1, 64))]
    return bytes(data)


@FUZZ
@given(st.one_of(mutated_seed(), st.binary(max_size=2000)))
@example(b"[" * 100_000)
@example(b'{"a": 1e999999}')
@example(b'{"a": -0}')
def test_fuzz_strict_json_only_clear_errors(raw: bytes) -> None:
    hostile_counts.tried("hostile")
    try:
        loads_strict(raw.decode("utf-8", errors="replace"), "fuzzed spec")
    except PlannerError:
        pass


def _plan_with(path: list[str], value: Any) -> dict[str, Any]:
    base: dict[str, Any] = json.loads((ROOT / "examples" / "census_plan.json").read_text())
    base["schema"] = str(ROOT / "data" / "census.schema.json")
    node: Any = base
    for key in path[:-1]:
        node = node[key] if not isinstance(node, list) else node[0]
    if isinstance(node, list):
        node[0] = value
    else:
        node[path[-1]] = value
    return base


PLAN_PATHS = [
    ["budget", "epsilon"], ["budget", "delta"], ["budget", "composition"], ["lifetime", "epsilon"],
    ["lifetime", "delta"], ["mode"], ["dataset_name"], ["queries"], ["budget"], ["lifetime"],
    ["queries", "0", "scale"], ["queries", "0", "weight"], ["queries", "0", "target"],
    ["queries", "0", "pinned"], ["queries", "0", "id"], ["extra"],
]


@FUZZ
@given(st.sampled_from(PLAN_PATHS), json_values)
@example(["budget", "epsilon"], True)
@example(["budget", "epsilon"], "1")
@example(["budget", "epsilon"], 1e308)
@example(["lifetime", "epsilon"], 10**400)
@example(["queries", "0", "scale"], float("nan"))
def test_fuzz_plan_spec_fields_only_clear_errors(path: list[str], value: Any) -> None:
    hostile_counts.tried("hostile")
    doc = _plan_with(path, value)
    text = json.dumps(doc, allow_nan=True)
    try:
        spec = parse_plan_spec(loads_strict(text, "plan"), ROOT / "examples")
    except PlannerError:
        return
    # what was accepted is typed and bounded
    assert isinstance(spec.epsilon, float) and 0 < spec.epsilon <= 1000
    assert isinstance(spec.delta, float) and 0 <= spec.delta < 1


mechanism_entries = st.fixed_dictionaries(
    {"mechanism": st.sampled_from(["laplace", "gaussian", "discrete_gaussian", "pure", "discrete_laplace",
                                   "exponential", "randomized_response", "zcdp", "approx", "other"])},
    optional={k: json_scalars for k in ("epsilon", "delta", "sigma", "scale", "sensitivity", "rho",
                                        "keep_probability", "count")},
)


@FUZZ
@given(st.lists(mechanism_entries, min_size=1, max_size=4), json_scalars)
def test_fuzz_mechanism_specs_only_clear_errors(tmp_path_factory: Any, entries: list[dict[str, Any]],
                                                delta: Any) -> None:
    hostile_counts.tried("hostile")
    path = tmp_path_factory.mktemp("mech") / "m.json"
    path.write_text(json.dumps({"delta": delta, "mechanisms": entries}, allow_nan=True))
    from planner.planning.plan_spec import compose_command

    try:
        out = compose_command(path)
    except PlannerError:
        return
    assert set(out["total"]) == {"basic", "advanced", "rdp", "zcdp"}


event_dicts = st.fixed_dictionaries(
    {"event": st.sampled_from(["laplace", "pure", "exponential", "randomized_response", "gaussian",
                               "zcdp", "approx", "self_composed", "bogus"])},
    optional={k: json_values for k in ("noise_multiplier", "epsilon", "keep_probability", "discrete",
                                       "rho", "delta", "inner", "count")},
)


@FUZZ
@given(st.one_of(event_dicts.map(lambda d: json.dumps(d, allow_nan=True)), st.text(max_size=300),
                 mutated_seed().map(lambda b: b.decode("utf-8", errors="replace"))))
@example('{"event": "self_composed", "count": 2, "inner": ' * 2000 + "{}" + "}" * 2000)
@example('{"event": "self_composed", "count": 1e400, "inner": {"event": "pure", "epsilon": 1}}')
def test_fuzz_stored_event_parsing_only_integrity_errors(text: str) -> None:
    hostile_counts.tried("hostile")
    try:
        ev = _parse_event(text, "the event of spend 1")
    except LedgerIntegrityError as exc:
        assert "cannot be read" in str(exc)
        return
    assert isinstance(ev.to_dict(), dict)


ARG_WORDS = ["plan", "compose", "release", "ledger", "validate", "account", "grant", "verify", "show",
             "create", "list", "--spec", "--data", "--ledger", "--dataset", "--user", "--role", "--to",
             "--epsilon", "--delta", "--backend", "owner", "viewer", "analyst", "pandas", "sqlite://",
             "true", "1e400", "-1", "", "\x00", "/dev/zero", "/nonexistent", "--help", "--revoke",
             str(CORPUS / "plan_epsilon_true.json"), str(ROOT / "examples" / "mechanisms.json")]


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(ARG_WORDS), st.text(max_size=12)), max_size=8))
@example(["ledger", "verify", "--ledger", "sqlite://"])
@example(["compose", "--spec", str(ROOT / "examples" / "mechanisms.json")])
def test_fuzz_cli_arguments_and_exit_path(argv: list[str]) -> None:
    hostile_counts.tried("hostile")
    if "\x00" in "".join(argv):  # the OS cannot pass NUL in an argument
        argv = [a.replace("\x00", "") for a in argv]
    os.environ.pop("PLANNER_NEW_PASSWORD", None)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    assert code in (EXIT_OK, EXIT_PROBLEM, EXIT_ERROR), (argv, err.getvalue()[-500:])
    assert code != EXIT_INTERNAL
    assert "Traceback" not in err.getvalue()
    text = err.getvalue().strip()
    if text.startswith("{"):
        assert "error" in json.loads(text)
