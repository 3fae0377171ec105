"""Releasing a plan: build its measurements, record the spend, sample once, store.

Every released number comes from an OpenDP measurement built by the query's statistic
(:mod:`planner.planning.statistics`) through :mod:`planner.privacy.noise`, the only module that imports
OpenDP and draws released noise. Mechanisms never see the DataFrame: they are fed the
exact, clipped aggregates a :class:`~planner.data.backends.base.Backend` computes (docs/mathematics.md
§7), and everything after the measurement (ratios, whole numbers, normalising a
histogram, drawing a synthetic sample from it) is post-processing.

Order of a release (docs/engineering.md §5, enforced by :meth:`planner.ledger.Ledger.release`):

1. :func:`prepare` builds every measurement from the plan and the schema alone (no
   data) and asks OpenDP for its privacy loss at the query's sensitivity;
2. the spend recorded for each measurement is the planner's, or OpenDP's when OpenDP's
   is larger (rounding: it always rounds toward less privacy; :func:`planner.privacy.noise.draw`);
3. the ledger checks the budget and records the spends atomically;
4. ``sample()`` computes the aggregates and invokes the measurements;
5. the answers are stored; a second release of the same :func:`plan_hash` returns
   them without sampling.

Secret samples. When the schema declares that the table is a secret random sample of a
population (:attr:`planner.data.schema.Schema.sampling`), the dataset is registered with that
declaration and its lifetime budget is the population's: the ledger composes every recorded
spend on the sample and amplifies the total once (Balle, Barthe & Gaboardi 2018,
arXiv:1807.01647; :func:`planner.privacy.sampling.sampled_total_epsilon`). The noise drawn is that of
the plan's base allocation; the spends recorded are the sample-level costs of that noise.

Known residual. A float sum computed by the backend differs from the exact sum by float
rounding, so its sensitivity can exceed the declared Δ by a relative ~n·2⁻⁵³ (Casacuberta
et al. 2022, "Widespread underestimation of sensitivity in differentially private
libraries"). The backends sum exactly where they can (integers; cents); see the release
report.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.core.errors import LedgerError, PlannerError, ReleaseError
from planner.core.strict_json import JSON
from planner.data.backends import check_backend
from planner.data.backends.base import Backend
from planner.data.schema import Schema
from planner.ledger import Ledger, resolve_dataset
from planner.planning.plan_spec import PlanOutcome, PlanSpec
from planner.planning.queries import Query
from planner.planning.statistics import exact_aggregates, plan_requests, prefetch, statistic
from planner.planning.statistics.base import Aggregate, AnswerRow, ItemRelease
from planner.planning.workload import Plan
from planner.privacy.accounting import CompositionRule, Spend, event_rho
from planner.privacy.noise import Draw
from planner.privacy.sampling import Sampling

__all__ = [
    "Draw",
    "PreparedRelease",
    "QueryAnswer",
    "ReleaseError",
    "ReleaseResult",
    "cmd_ledger",
    "cmd_release",
    "plan_hash",
    "prepare",
    "release",
    "release_file",
    "release_spec",
    "resolve_dataset",
    "stored",
]


def _finite_or_none(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


@dataclass(frozen=True)
class PreparedRelease:
    """Everything about a release that needs no data: measurements, costs, predictions."""

    plan_hash: str
    schema_hash: str
    rule: CompositionRule
    items: tuple[ItemRelease, ...]

    @property
    def draws(self) -> tuple[Draw, ...]:
        return tuple(d for it in self.items for d in it.draws)

    def spends(self) -> list[tuple[str, Spend]]:
        """``(key, recorded spend)`` for :meth:`planner.ledger.Ledger.release`."""
        return [(d.key, d.recorded) for d in self.draws]

    def queries(self) -> list[Query]:
        seen: dict[str, Query] = {}
        for it in self.items:
            seen.setdefault(it.part.query.id, it.part.query)
        return list(seen.values())

    def aggregates(self, backend: Backend) -> dict[str, Aggregate]:
        """Every exact aggregate the release needs, keyed by query id (one pass where the
        backend can: :func:`planner.planning.statistics.exact_aggregates`). PRIVATE:
        computed before the spend so that a plan the backend cannot compute is refused with
        nothing spent, and handed to :meth:`sample` only."""
        return exact_aggregates(backend, self.queries())

    def sample(self, backend: Backend, aggregates: Mapping[str, Aggregate] | None = None) -> dict[str, JSON]:
        """Invoke every measurement on the exact aggregates (draws noise); the aggregates are
        computed through the backend when not given."""
        out: dict[str, JSON] = {}
        aggregates = dict(aggregates or {})
        counts: dict[str, int] = {}
        for it in self.items:
            counts[it.part.query.id] = counts.get(it.part.query.id, 0) + 1
        for it in self.items:
            q = it.part.query
            if q.id not in aggregates:
                aggregates[q.id] = statistic(q.kind).aggregate(q, backend)
            ans = it.answer(aggregates[q.id])
            if counts[q.id] > 1:
                bucket = out.setdefault(q.id, {"parts": {}})
                assert isinstance(bucket, dict) and isinstance(bucket["parts"], dict)
                bucket["parts"][it.part.label] = ans
            else:
                out[q.id] = ans
        return out


def plan_hash(plan: Plan, schema: Schema) -> str:
    """sha256 of the canonical JSON of the plan: queries, schema hash, budget, rule, θ's.

    Examples
    --------
    >>> from planner.data.schema import Column, ColumnKind, MissingRule, Schema
    >>> from planner.planning.workload import plan as make_plan
    >>> s = Schema((Column("age", ColumnKind.NUMERIC, MissingRule(), 0, 100),))
    >>> q = Query("n", "count", None, "laplace")
    >>> p = make_plan([q], s, 1.0, 0.0, "basic")
    >>> plan_hash(p, s) == plan_hash(make_plan([q], s, 1.0, 0.0, "basic"), s)
    True
    """
    seen: dict[str, dict[str, Any]] = {}
    for p in plan.parts:
        seen.setdefault(p.query.id, p.query.to_dict())
    a = plan.allocation
    doc = {
        "queries": list(seen.values()),
        "schema_hash": schema.schema_hash(),
        "budget": {"epsilon": a.epsilon, "delta": a.delta},
        "rule": a.rule.value,
        "theta": {it.id: it.theta for it in a.items},
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prepare(plan: Plan, schema: Schema) -> PreparedRelease:
    """Build every OpenDP measurement of the plan and its cost (no data needed).

    Raises
    ------
    ReleaseError
        If a query cannot be released or the plan and the schema disagree.
    """
    parts, shares, preds = plan.parts, plan.allocation.items, plan.predictions
    if not (len(parts) == len(shares) == len(preds)):
        raise ReleaseError("the plan's parts, shares and predictions do not line up; re-plan.")
    rule = plan.allocation.rule
    items = tuple(statistic(p.query.kind).release(p, s, pr, schema, rule) for p, s, pr in zip(parts, shares, preds, strict=True))
    return PreparedRelease(plan_hash(plan, schema), schema.schema_hash(), rule, items)


@dataclass(frozen=True)
class QueryAnswer:
    """A released query: noisy answer(s), mechanism, cost and predicted accuracy."""

    query_id: str
    kind: str
    mechanism: str
    answer: JSON
    epsilon: float
    delta: float
    rho: float
    opendp: tuple[dict[str, Any], ...]
    predictions: tuple[dict[str, Any], ...]
    schema_hash: str
    notes: tuple[str, ...] = ()
    rows: tuple[AnswerRow, ...] = ()
    verdict: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query_id,
            "kind": self.kind,
            "mechanism": self.mechanism,
            "answer": self.answer,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": _finite_or_none(self.rho),
            "opendp": list(self.opendp),
            "predictions": list(self.predictions),
            "notes": list(self.notes),
            "verdict": self.verdict,
            "schema_hash": self.schema_hash,
        }


@dataclass(frozen=True)
class ReleaseResult:
    """A release: per query answers and costs, plus the dataset's budget after it.

    Holds only data-independent facts (plan, schema hash, costs, predictions) and the
    released noisy values; never an exact aggregate or a row count of the data.
    """

    fingerprint: str
    dataset_name: str
    plan_hash: str
    schema_hash: str
    rule: CompositionRule
    status: str
    release_id: int
    answers: tuple[QueryAnswer, ...]
    epsilon_total: float
    delta_total: float
    epsilon_spent: float
    epsilon_remaining: float
    warnings: tuple[str, ...] = field(default=())
    sampling: Sampling | None = None
    epsilon_spent_sample: float | None = None

    def answer(self, query_id: str) -> QueryAnswer:
        for a in self.answers:
            if a.query_id == query_id:
                return a
        raise ReleaseError(f"no query {query_id!r} in this release.")

    def report_json(self) -> dict[str, Any]:
        """The release as JSON (data-independent facts and noisy values only)."""
        return {
            "format": "privacy-budget-planner/release",
            "version": 1,
            "dataset": {"fingerprint": self.fingerprint, "name": self.dataset_name},
            "plan_hash": self.plan_hash,
            "schema_hash": self.schema_hash,
            "rule": self.rule.value,
            "status": self.status,
            "release_id": self.release_id,
            "budget": {
                "epsilon_total": self.epsilon_total,
                "delta_total": self.delta_total,
                "epsilon_spent": _finite_or_none(self.epsilon_spent),
                "epsilon_remaining": _finite_or_none(self.epsilon_remaining),
                **({} if self.sampling is None else {"secret_sample": {
                    **self.sampling.to_dict(),
                    "epsilon_spent_sample": None if self.epsilon_spent_sample is None
                    else _finite_or_none(self.epsilon_spent_sample),
                    "note": "epsilon_total, epsilon_spent and epsilon_remaining are the population's: the "
                            "spends (each query's epsilon, on the sample) composed, then amplified once by "
                            "the secret sampling (Balle, Barthe & Gaboardi 2018).",
                }}),
            },
            "queries": [a.to_dict() for a in self.answers],
            "warnings": list(self.warnings),
        }

    def rows(self) -> list[dict[str, Any]]:
        """One row per released number (every bin of a histogram, every quantile level),
        typed by each query's statistic, with its cost and predicted accuracy."""
        out: list[dict[str, Any]] = []
        for a in self.answers:
            preds = {p["part"]: p for p in a.predictions}
            for r in a.rows:
                p = preds.get(r.part) or (a.predictions[0] if len(a.predictions) == 1 else {})
                # a quantile level's own share where the query's parts are planned apart
                own = r.part in preds and len(a.predictions) > 1
                out.append({"query": a.query_id, "kind": a.kind, "mechanism": a.mechanism, "part": r.part,
                            "label": r.label, "value": r.value, "noisy": r.noisy,
                            "epsilon": p["epsilon"] if own else a.epsilon,
                            "delta": a.delta, "rmse": p.get("rmse"), "error_bound_95": p.get("error_bound_95"),
                            "bound": p.get("bound"), "unit": p.get("unit", "")})
        return out

    def to_csv(self) -> str:
        """One row per released number (every bin of a histogram, every quantile level), with
        cost and accuracy.

        Spreadsheet-safe (:func:`planner.core.exports.csv_text`): a text cell starting with
        ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (a category label, a query id)
        is prefixed with ``'``; numbers stay numbers.
        """
        from planner.core.exports import csv_text

        cols = ["query", "kind", "mechanism", "part", "label", "value", "noisy", "epsilon", "delta",
                "rmse", "error_bound_95", "unit"]
        rows = [[*("" if r[c] is None else r[c] for c in cols), self.plan_hash, self.schema_hash]
                for r in self.rows()]
        return csv_text([*cols, "plan_hash", "schema_hash"], rows)


def _result(
    prepared: PreparedRelease,
    schema: Schema,
    answers: Mapping[str, JSON],
    ledger: Ledger,
    fingerprint: str,
    dataset_name: str,
    status: str,
    release_id: int,
    warnings: tuple[str, ...],
) -> ReleaseResult:
    from planner.planning.advice import verdict
    from planner.planning.workload import default_error_scales

    out: list[QueryAnswer] = []
    scales = default_error_scales(prepared.queries(), schema) or {}
    for q in prepared.queries():
        its = [it for it in prepared.items if it.part.query.id == q.id]
        draws = [d for it in its for d in it.draws]
        out.append(
            QueryAnswer(
                query_id=q.id,
                kind=q.kind.value,
                mechanism=q.mechanism.value,
                answer=answers.get(q.id),
                epsilon=float(sum(d.recorded.epsilon for d in draws)),
                delta=float(sum(d.recorded.delta for d in draws)),
                rho=float(sum(event_rho(d.recorded.event) for d in draws)),
                opendp=tuple(d.describe() for d in draws),
                predictions=tuple(it.prediction.to_dict() for it in its),
                notes=statistic(q.kind).notes(q, schema),
                rows=statistic(q.kind).answer_rows(q, answers.get(q.id)),
                schema_hash=prepared.schema_hash,
                # data-independent: the schema, the plan's noise and the public sizes
                verdict=verdict([it.prediction for it in its], q, schema, scales.get(q.id)).to_dict(),
            )
        )
    st = ledger.status(fingerprint)
    return ReleaseResult(
        fingerprint, dataset_name, prepared.plan_hash, prepared.schema_hash, prepared.rule, status,
        release_id, tuple(out), st.epsilon_total, st.delta_total, st.epsilon_spent, st.epsilon_remaining,
        warnings, st.sampling, st.epsilon_spent_sample,
    )


def release(
    plan: Plan,
    schema: Schema,
    backend: Backend,
    ledger: Ledger,
    fingerprint: str,
    dataset_name: str,
    *,
    total_epsilon: float | None = None,
    total_delta: float | None = None,
    rule: CompositionRule | str | None = None,
) -> ReleaseResult:
    """Release a plan on a dataset: budget check → spend recorded → sample → answers stored.

    Parameters
    ----------
    plan : Plan
        From :func:`planner.planning.workload.plan`; its rule must be the dataset's rule.
    schema : Schema
        The schema the plan was made under (the backend's schema must be equal).
    backend : Backend
        Computes the exact aggregates (only inside ``sample()``).
    ledger : Ledger
        Where the dataset's total budget and the spends are recorded.
    fingerprint, dataset_name : str
        The dataset's key, or the content digest of the data (recorded as a version of the
        dataset it belongs to), and the dataset's name. New content finds its dataset by
        name, and is refused when it only resembles a registered dataset (same schema,
        another name): :meth:`planner.ledger.Ledger.identify`.
    total_epsilon, total_delta, rule
        The dataset's lifetime budget: registered if the dataset is new, and then it must
        match the recorded one. Omit them to release against the budget already set for the
        dataset (:meth:`planner.ledger.Ledger.register_dataset`); a dataset with no
        lifetime budget is refused, never registered implicitly. A dataset whose schema
        declares a secret sample is registered with that declaration (the budget is then
        the population's), and a release is refused when the schema and the registered
        dataset disagree about it.

    Returns
    -------
    ReleaseResult
        ``status`` ``done`` (sampled now) or ``reused`` (same plan hash answered earlier:
        the stored answers, nothing sampled).

    Raises
    ------
    BudgetExceededError
        The plan's spends do not fit what remains (nothing is sampled).
    ReleaseError, LedgerError, PlannerError
        Rule or schema mismatch; a query that cannot be released; ledger problems.
    """
    if plan.sampling != schema.sampling:
        raise ReleaseError("the plan was made under another sampling declaration than the schema's; re-plan "
                           "with this schema.")
    if backend.schema.schema_hash() != schema.schema_hash():
        raise ReleaseError("the backend's schema differs from the plan's schema; load the data with the plan's schema.")
    prepared = prepare(plan, schema)
    # Before anything is recorded: the backend can compute each query (no data read).
    for q in prepared.queries():
        statistic(q.kind).check_backend(q, backend)
    exact: dict[str, Aggregate] | None = None
    if total_epsilon is not None:
        if _is_new(ledger, fingerprint, dataset_name, schema):  # nothing stored: computed before it is registered
            exact = _read(prepared, backend)
        registered = ledger.register_dataset(
            fingerprint, dataset_name, total_epsilon, 0.0 if total_delta is None else total_delta,
            plan.allocation.rule if rule is None else rule, schema_hash=schema.schema_hash(),
            sampling=schema.sampling,
        )
    else:
        ident = ledger.identify(fingerprint, name=dataset_name, schema_hash=schema.schema_hash())
        if ident.dataset is None:
            raise LedgerError(ident.advice or (
                f"dataset {dataset_name!r} has no lifetime budget yet, so nothing can be released. "
                "Set its lifetime budget first (the total ε and δ it may ever spend): on the "
                "Release page, or with \"lifetime\": {\"epsilon\": ..., \"delta\": ...} in PLAN.json."
            ))
        registered = ident.dataset
    rl = registered.rule if rule is None else CompositionRule(rule)
    if rl is not registered.rule:
        raise ReleaseError(
            f"the dataset's lifetime budget is accounted under the {registered.rule.value} rule, "
            f"not {rl.value}; plan under {registered.rule.value}."
        )
    if registered.sampling != schema.sampling:
        def words(x: Sampling | None) -> str:
            return "not a sample" if x is None else f"a secret {x.scheme.value} sample at rate {x.rate:g}"

        raise ReleaseError(
            f"dataset {dataset_name!r} is registered as {words(registered.sampling)}, but the schema declares "
            f"{words(schema.sampling)}. The sampling declaration is fixed with the lifetime budget; release with "
            "the schema the dataset was registered with."
        )
    if plan.allocation.rule is not rl:
        raise ReleaseError(
            f"the plan was made under the {plan.allocation.rule.value} rule but the dataset's budget "
            f"is composed under {rl.value}; re-plan under {rl.value}."
        )
    # Every exact aggregate before the spend, when the ledger would sample now: a plan the
    # backend cannot compute is refused with nothing spent.
    if exact is None and _will_sample(ledger, registered.fingerprint, fingerprint, prepared):
        exact = _read(prepared, backend)
    record = ledger.release(
        registered.fingerprint,
        prepared.plan_hash,
        prepared.schema_hash,
        prepared.spends(),
        lambda: prepared.sample(backend, exact),
        # the content released is recorded as a version of the dataset (one table, one budget)
        digest=None if fingerprint == registered.fingerprint else fingerprint,
    )
    answers = record.answers or {}
    # the dataset's public key (ds-…), never the data's bare hash (an export must not let
    # anyone test a guess about the data)
    return _result(prepared, schema, answers, ledger, registered.fingerprint, registered.name, record.status.value,
                   record.release_id, plan.allocation.warnings)


def _read(prepared: PreparedRelease, backend: Backend) -> dict[str, Aggregate]:
    """The data is read only for a release that will be sampled (never for one the ledger
    refuses or answers from storage): first the check that the cells every query reads
    convert (a numeric column holding text is refused, with counts only), then every
    exact aggregate — both before anything is recorded.

    On a SQL engine the check's counts and the aggregates come from one statement (one pass
    over the file, as the command line's scan reads them: ``prefetch(..., report=True)``);
    the check still decides before any aggregate is used, and a plan the engine cannot
    compute is still refused before the spend. Other backends compute them in turn."""
    from planner.data.backends.sql import SqlBackend

    if isinstance(backend, SqlBackend):
        prefetch(backend, prepared.queries(), report=True)
    check_backend(backend)
    return prepared.aggregates(backend)


def _is_new(ledger: Ledger, content: str, name: str, schema: Schema) -> bool:
    """True when no dataset holds this content or this name yet (its release is the first)."""
    try:
        return ledger.identify(content, name=name, schema_hash=schema.schema_hash()).dataset is None
    except PlannerError:  # a refusal the registration itself states
        return False


def _will_sample(ledger: Ledger, key: str, content: str, prepared: PreparedRelease) -> bool:
    """True when the ledger would sample this release now (not stored yet on this content,
    and it fits what remains): only then are the exact aggregates computed ahead of the
    spend. Otherwise :meth:`planner.ledger.Ledger.release` returns the stored answers or
    refuses with its own message, and the data is never read."""
    try:
        if ledger.stored_release(key, prepared.plan_hash, digest=None if content == key else content) is not None:
            return False
        return ledger.preview(key, [s for _, s in prepared.spends()]).fits
    except PlannerError:  # a refusal the release itself states
        return False


def release_spec(
    spec: PlanSpec,
    backend: Backend,
    ledger: Ledger,
    fingerprint: str,
    dataset_name: str | None = None,
    *,
    outcome: PlanOutcome | None = None,
) -> ReleaseResult:
    """Release a plan file: its plan in its mode (:func:`planner.planning.plan_spec.build_plan`,
    the one place a mode is applied), then :func:`release` against the file's lifetime budget.

    What ``planner release`` and the generated script call; the Release page calls
    :func:`release` with the plan it shows, which it made with the same ``build_plan``.
    ``dataset_name`` defaults to the file's ``dataset_name``; ``outcome`` is
    ``build_plan(spec)`` when the caller made it already (the command line plans while the
    data is read).
    """
    from planner.planning.plan_spec import build_plan

    name = dataset_name or spec.dataset_name
    if not name:
        raise ReleaseError("the release needs a dataset name: give \"dataset_name\" in the plan file.")
    life = spec.lifetime
    return release((outcome or build_plan(spec)).plan, spec.schema, backend, ledger, fingerprint, name,
                   total_epsilon=None if life is None else life[0],
                   total_delta=None if life is None else life[1], rule=spec.rule)


def stored(plan: Plan, schema: Schema, ledger: Ledger, fingerprint: str, *, digest: str | None = None,
           prepared: PreparedRelease | None = None) -> ReleaseResult | None:
    """The stored release of ``plan`` on this content (``digest``; any version when ``None``)
    as a :class:`ReleaseResult` — the same value a fresh :func:`release` returns, so that one
    renderer shows both — or ``None`` when the plan was not released on it. Reads the ledger
    only: nothing is spent or sampled. ``prepared``: :func:`prepare` of the plan, when the
    caller has it already.
    """
    prepared = prepared or prepare(plan, schema)
    record = ledger.stored_release(fingerprint, prepared.plan_hash, digest=digest)
    if record is None:
        return None
    info = ledger.status(fingerprint)
    return _result(prepared, schema, record.answers or {}, ledger, info.fingerprint, info.name, record.status.value,
                   record.release_id, plan.allocation.warnings)


# --------------------------------------------------------------------------- CLI


def _read_spec(spec_path: str) -> tuple[dict[str, Any], Path]:
    p = Path(spec_path)
    try:
        spec = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReleaseError(f"cannot read the plan file {p.name!r} ({exc.strerror}); check the path.") from exc
    except json.JSONDecodeError as exc:
        raise ReleaseError(f"the plan file {p.name!r} is not valid JSON (line {exc.lineno}).") from exc
    if not isinstance(spec, dict):
        raise ReleaseError("the plan file must hold a JSON object with 'schema', 'budget' and 'queries'.")
    return spec, p.parent


def release_file(
    spec: PlanSpec | str,
    data_path: str,
    ledger_url: str | None = None,
    backend: str | None = None,
    spark_master: str | None = None,
    *,
    scan: Any = None,
    outcome: PlanOutcome | None = None,
) -> ReleaseResult:
    """The one release path from a plan file: read the data once → plan in the file's mode →
    checks → spend recorded → sample → store → the result. ``planner release`` and the
    generated script call it; the Release page calls :func:`release` with the plan on screen.

    ``spec`` is the plan file parsed once by the caller (or its path, parsed here). DATA is
    any path or glob the invoking user can read, or ``DB.duckdb::table``
    (:func:`planner.data.sources.open_cli_source`; the allow-list guards the web app only).
    ``backend``: ``pandas``, ``duckdb`` or ``spark`` (default
    :func:`~planner.data.backends.default_backend`: DuckDB when installed, else pandas).
    ``scan``: a :class:`~planner.data.backends.BackgroundScan` of this spec and data already
    started (the command line starts it before importing this module); the plan is made
    while it reads. The data is read once: every aggregate, the column report and the
    content digest, whose key names the content version in the ledger
    (:func:`planner.data.sources.dataset_key`). ``outcome``: ``build_plan(spec)`` when the
    caller made it already.
    """
    from planner.data.backends import BackgroundScan, close_backend, default_backend
    from planner.data.sources import FileSource, dataset_key, open_cli_source
    from planner.planning.plan_spec import build_plan, load_plan_spec

    if isinstance(spec, str):
        spec = load_plan_spec(spec)
    if scan is None:  # read the data while planning
        kind = (backend or default_backend()).strip().lower()
        scan = BackgroundScan(kind, open_cli_source(data_path, defer_check=True), spec.schema, plan_requests(spec.queries, spec.schema),
                              spark_master=spark_master)
    try:
        outcome = outcome or build_plan(spec)  # while the scan reads the data
        engine = scan.result()
    except BaseException:
        scan.cancel()
        raise
    source = scan.source  # after the scan: a source whose check found another encoding is reopened
    try:
        key = dataset_key(engine.content_digest())
        default_name = source.files[0].name if isinstance(source, FileSource) and len(source.files) == 1 else source.label
        ledger = Ledger(ledger_url)
        try:
            return release_spec(spec, engine, ledger, key, spec.dataset_name or default_name, outcome=outcome)
        finally:
            ledger.close()
    finally:
        close_backend(engine)


def cmd_release(
    spec: PlanSpec | str,
    data_path: str,
    ledger_url: str | None,
    backend: str | None = None,
    spark_master: str | None = None,
    scan: Any = None,
) -> dict[str, Any]:
    """``planner release --spec PLAN.json --data DATA``: :func:`release_file`; the release
    report as JSON, naming the backend under ``"backend"``."""
    from planner.data.backends import default_backend

    out = release_file(spec, data_path, ledger_url, backend, spark_master, scan=scan).report_json()
    out["backend"] = (backend or default_backend()).strip().lower()
    return out


def cmd_ledger(ledger_url: str | None, fingerprint: str | None) -> dict[str, Any]:
    """``planner ledger``: every dataset's budget status, or one dataset's full ledger."""
    ledger = Ledger(ledger_url)
    try:
        if fingerprint is not None:
            return ledger.export(fingerprint)
        return {
            "format": "privacy-budget-planner/ledger-index",
            "version": 1,
            "datasets": [ledger.status(d.fingerprint).to_dict() for d in ledger.datasets()],
        }
    finally:
        ledger.close()


def _schema_of(spec_path: str) -> Schema:
    """The schema declared in a PLAN.json, or a schema JSON itself."""
    from planner.core.strict_json import read_json_file

    doc = read_json_file(spec_path, "plan or schema file")
    if isinstance(doc, dict) and "schema" in doc and "queries" in doc:
        from planner.planning.plan_spec import load_plan_spec

        return load_plan_spec(spec_path).schema
    return Schema.load(spec_path)


def _content_key(data_path: str, schema: Schema, backend: str | None, spark_master: str | None) -> tuple[str, str]:
    """The ledger key of a file's content under ``schema`` (what ``planner release`` records
    as a version) and the file's name."""
    from planner.data.backends import check_backend, close_backend, default_backend, make_backend
    from planner.data.sources import FileSource, dataset_key, open_cli_source

    source = open_cli_source(data_path)
    kind = (backend or default_backend()).strip().lower()
    engine = make_backend(kind, source, schema, spark_master=spark_master)
    try:
        check_backend(engine)
        key = dataset_key(engine.content_digest())
    finally:
        close_backend(engine)
    name = source.files[0].name if isinstance(source, FileSource) and len(source.files) == 1 else source.label
    return key, name


def cmd_dataset(action: str, ledger_url: str | None, *, name: str | None = None, epsilon: float | None = None,
                delta: float | None = 0.0, rule: str | None = None, spec: str | None = None,
                data: str | None = None, backend: str | None = None,
                spark_master: str | None = None) -> dict[str, Any]:
    """``planner dataset list|declare|identify``.

    ``declare`` is the one deliberate way to open a second budget: a new dataset with its own
    unique name, lifetime budget and rule, under the schema of ``spec`` (and, with ``data``,
    that file's content as its first version). ``identify`` says which dataset a file belongs
    to before anything is released (:meth:`planner.ledger.Ledger.identify`).
    """
    ledger = Ledger(ledger_url)
    try:
        if action == "list":
            return {"datasets": [dict(d.to_dict(), status=ledger.status(d.fingerprint).to_dict())
                                 for d in ledger.datasets()]}
        if spec is None:
            raise ReleaseError(f"`planner dataset {action}` needs --spec (a PLAN.json or a schema JSON).")
        schema = _schema_of(spec)
        if action == "identify":
            if data is None:
                raise ReleaseError("`planner dataset identify` needs --data FILE.")
            key, file_name = _content_key(data, schema, backend, spark_master)
            return ledger.identify(key, name=name or file_name, schema_hash=schema.schema_hash()).to_dict()
        if not name or epsilon is None or rule is None:
            raise ReleaseError("`planner dataset declare` needs --name, --epsilon and --rule (and --spec).")
        digest = None
        if data is not None:
            digest, _ = _content_key(data, schema, backend, spark_master)
        info = ledger.declare_dataset(name, epsilon, 0.0 if delta is None else delta, rule,
                                      schema_hash=schema.schema_hash(), digest=digest, sampling=schema.sampling)
        return info.to_dict()
    finally:
        ledger.close()
