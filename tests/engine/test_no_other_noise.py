"""Only :mod:`planner.privacy.noise` draws released noise, and only through OpenDP.

AST-level checks over the source tree (docs/mathematics.md §9; docs/engineering.md §3: one place draws released
noise):

* no module under ``planner/`` other than ``noise.py`` imports OpenDP or calls an
  OpenDP measurement constructor;
* no module under ``planner/`` other than ``noise.py`` creates a random generator or uses
  a global one (planning simulators take a ``numpy.random.Generator`` from the caller);
* ``noise.py`` does not import the mechanisms' numpy samplers, and its numpy generators
  are post-processing only (the synthetic sample drawn from a released histogram);
* no statistic's ``release`` (the code that builds measurements and post-processes their
  outputs) touches a numpy generator or a planning sampler: numpy noise never reaches a
  released value;
* ``enable_features`` is only ever called with ``"contrib"``, anywhere in the project,
  and at run time the enabled set is exactly ``{"contrib"}``.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLANNER = ROOT / "planner"
RELEASE = PLANNER / "privacy" / "noise.py"
STATISTICS = PLANNER / "planning" / "statistics"
#: Key material and identifiers (server secret, dataset keys), never noise: the one other
#: module that takes randomness from the operating system's CSPRNG.
KEYS = PLANNER / "core" / "keys.py"

#: OpenDP measurement constructors (and their ``then_`` forms): anything that draws noise.
MEASUREMENT_NAMES = (
    "make_laplace", "then_laplace", "make_gaussian", "then_gaussian", "make_geometric",
    "then_geometric", "make_noisy_max", "then_noisy_max", "make_noisy_top_k", "then_noisy_top_k",
    "make_report_noisy_max_gumbel", "then_report_noisy_max_gumbel", "make_private_quantile",
    "then_private_quantile", "make_randomized_response", "make_randomized_response_bool",
    "make_randomized_response_bitvec", "then_randomized_response_bitvec", "make_user_measurement",
    "make_laplace_threshold", "then_laplace_threshold", "make_alp_queryable", "make_private_expr",
    "make_private_lazyframe", "make_base_laplace", "make_base_gaussian", "make_base_discrete_laplace",
)
#: Ways to get randomness other than a Generator handed in by the caller.
RNG_CALLS = ("default_rng", "RandomState", "Generator", "SeedSequence", "PCG64", "urandom", "token_bytes", "randbits")
RNG_MODULES = ("random", "secrets")


def _modules() -> Iterator[Path]:
    yield from sorted(PLANNER.rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _call_name(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


@pytest.mark.parametrize("path", [p for p in _modules() if p not in (RELEASE, KEYS)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_other_module_uses_opendp_or_draws_noise(path: Path) -> None:
    tree = _tree(path)
    where = path.relative_to(ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                root = a.name.split(".")[0]
                assert root != "opendp", f"{where}: imports OpenDP; only planner/privacy/noise.py may"
                assert root not in RNG_MODULES, f"{where}: imports {a.name!r} (randomness)"
        elif isinstance(node, ast.ImportFrom):
            mod = (node.module or "").split(".")[0]
            assert mod != "opendp", f"{where}: imports from OpenDP; only planner/privacy/noise.py may"
            assert mod not in RNG_MODULES, f"{where}: imports from {node.module!r} (randomness)"
        elif isinstance(node, ast.Call):
            name = _call_name(node)
            assert name not in MEASUREMENT_NAMES, f"{where}:{node.lineno}: calls OpenDP's {name}"
            assert name not in RNG_CALLS, (
                f"{where}:{node.lineno}: creates randomness ({name}); take a numpy Generator from the caller"
            )
            dotted = _dotted(node.func)
            assert not dotted.startswith(("np.random.", "numpy.random.")), (
                f"{where}:{node.lineno}: uses numpy's global RNG ({dotted})"
            )


def test_release_imports_no_numpy_sampler() -> None:
    """``noise.py`` imports nothing from ``planner.planning.mechanisms`` that takes a generator,
    and no whole mechanism module (whose samplers would then be reachable)."""
    import importlib

    tree = _tree(RELEASE)
    checked = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("planner.planning.mechanisms") for a in node.names)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("planner.planning.mechanisms"):
            mod = importlib.import_module(node.module or "")
            for a in node.names:
                obj = getattr(mod, a.name)
                assert not inspect.ismodule(obj), f"release.py imports the module {a.name!r}"
                if callable(obj) and not inspect.isclass(obj):
                    params = inspect.signature(obj).parameters
                    assert "rng" not in params, f"noise.py imports the sampler {a.name!r}"
                    assert not a.name.startswith(("sample", "simulate", "draw", "perturb")), a.name
                checked += 1
    assert checked == 0  # noise.py needs nothing from the mechanisms


def test_release_generator_only_in_post_processing() -> None:
    tree = _tree(RELEASE)
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                name = _call_name(node)
                if name in RNG_CALLS or _dotted(node.func).startswith(("np.random.", "numpy.random.")):
                    assert fn.name.startswith("post_process"), f"noise.py:{node.lineno}: randomness outside post-processing"
    # the module level draws nothing
    for node in tree.body:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                assert _call_name(sub) not in RNG_CALLS


def _all_sources() -> Iterator[Path]:
    for base in ("planner", "pages", "tests", "scripts", "examples"):
        d = ROOT / base
        if d.is_dir():
            yield from sorted(d.rglob("*.py"))
    app = ROOT / "app.py"
    if app.is_file():
        yield app


def test_enable_features_only_contrib() -> None:
    found = 0
    for path in _all_sources():
        try:
            tree = _tree(path)
        except SyntaxError:  # pragma: no cover - not our file to judge
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _call_name(node) == "enable_features":
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                assert not node.keywords, f"{where}: enable_features with keywords"
                assert len(node.args) == 1, f"{where}: enable_features must enable exactly 'contrib'"
                arg = node.args[0]
                assert isinstance(arg, ast.Constant) and arg.value == "contrib", (
                    f"{where}: enable_features({ast.unparse(arg)}); only \"contrib\" is allowed"
                )
                found += 1
    assert found >= 1  # noise.py's own


def test_enabled_features_at_runtime_are_contrib_only() -> None:
    import opendp.mod

    import planner.privacy.noise  # noqa: F401  (enables contrib on import)

    assert opendp.mod.GLOBAL_FEATURES == {"contrib"}


#: Names that reach numpy randomness or a planning sampler.
_PLANNING_ONLY = ("rng", "simulate", "report_noisy_max", "sample_points", "perturb_counts", "random")


@pytest.mark.parametrize("path", sorted(STATISTICS.glob("*.py")), ids=lambda p: p.name)
def test_statistic_release_never_touches_numpy_noise(path: Path) -> None:
    """In every statistic, the ``release`` method and the functions it defines use OpenDP
    components (through planner.privacy.noise) only: no generator, no planning sampler."""
    tree = _tree(path)
    releases = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "release"]
    for fn in releases:
        for node in ast.walk(fn):
            if isinstance(node, ast.Name):
                assert node.id not in _PLANNING_ONLY, f"{path.name}:{node.lineno}: release uses {node.id!r}"
            if isinstance(node, ast.Attribute):
                assert node.attr not in _PLANNING_ONLY, f"{path.name}:{node.lineno}: release uses .{node.attr}"
    if path.name not in ("__init__.py", "base.py", "_additive.py"):
        assert releases, f"{path.name} declares no release"


def test_keys_module_takes_randomness_only_for_key_material() -> None:
    """planner/core/keys.py is exempt above only for secrets.token_hex (key material); it must
    not import OpenDP or numpy's generators."""
    tree = _tree(KEYS)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "opendp" not in imported and "numpy" not in imported and "random" not in imported
    calls = {_call_name(n) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert calls & set(RNG_CALLS) == set()  # only secrets.token_hex
