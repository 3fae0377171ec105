"""The privacy ledger: datasets and their lifetime budgets, every spend, every release,
who made it, and proof that nothing was forgotten.

The ledger is the only durable state of the engine. It keeps registered datasets (a unique
name, a schema hash, a lifetime budget (ε, δ) and composition rule), the keyed fingerprints
of their content *versions*, every release made against a dataset (with the principal who
made it), every spend (one mechanism invocation, in every currency the accountants need),
the noisy answers each release produced, the organisation's local accounts and the grants
owners gave analysts and viewers.

:class:`Ledger` is the library's entry point: a thin façade over the package's parts, each
one idea —

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
``tables``         the SQLModel tables and the journal form of a row
``records``        the values callers see (frozen, JSON-able) and how each is read
``integrity``      the keyed hash chain of the journal, its replay, the machine's marker
``store``          engine, sessions, the journaled write, atomic creation, the open gate
``record``         the verified replay of the journal every decision reads (incremental)
``checkpoint``     the record kept MAC-keyed in the ledger, so a new process replays only
                   the journal after it
``migrate``        bringing older formats up to date
``check``          the budget check of a release, a pure function
``people``         principals, accounts, sign-in and its throttle, grants
``datasets``       datasets, versions, lifetime budgets; one table, one budget
``reading``        status, releases, history, export
``liveness``       leases and heartbeats of pending releases
``tx``             the release transaction
``verify``         the full offline check (``planner ledger verify``)
=================  ==========================================================================

Trust. Every change is journaled in a hash chain keyed with the server secret; every
decision (a release, a grant, a raise, an account change) is taken on the record of that
journal, and refused when a table row it reads disagrees with it — so write access to the
database alone cannot lower a spend, raise a budget or a grant, move a release or promote an
account. An emptied, truncated, rolled back or replaced ledger is refused on open.

Order of a release (:mod:`planner.ledger.tx`): check the budget → record the spend
atomically → sample → store the answers → show them; a plan is never sampled twice and the
budget is never refunded.

Who may do what is decided by :func:`planner.ledger.accounts.authorize`; every method that
spends, registers, raises, grants, lists or reads takes an ``actor``
(:class:`planner.ledger.accounts.Principal`). A ledger without accounts is a single-user
ledger whose caller is :data:`planner.ledger.accounts.LOCAL_OWNER`; once an account exists,
callers must sign in (an explicit ``actor``, or ``PLANNER_USER``/``PLANNER_PASSWORD`` for the
command line).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine
from sqlmodel import col, select

from planner.core.errors import LedgerError, LedgerIntegrityError, PermissionDenied
from planner.core.strict_json import JSON
from planner.ledger import migrate
from planner.ledger.accounts import GrantInfo, Principal, Role
from planner.ledger.datasets import MAX_TEXT_CHARS, Datasets, Identity
from planner.ledger.integrity import VerifyReport
from planner.ledger.liveness import ENV_LEASE, LEASE_SECONDS, alive, lease_seconds
from planner.ledger.people import ENV_PASSWORD, ENV_PASSWORD_FILE, ENV_USER, Actors
from planner.ledger.reading import Reader
from planner.ledger.reading import refresh as refresh_budgets
from planner.ledger.records import (
    AccountInfo,
    BudgetChange,
    BudgetStatus,
    DatasetInfo,
    HistoryPoint,
    ReleasePreview,
    ReleaseRecord,
    SpendRecord,
    VersionInfo,
)
from planner.ledger.store import (
    BUSY_TIMEOUT_SECONDS,
    ENV_HOME,
    ENV_URL,
    FORMAT_VERSION,
    Store,
    default_ledger_url,
)
from planner.ledger.tables import LEDGER_METADATA, ReleaseRow, ReleaseStatus, SpendRow
from planner.ledger.tx import WAIT_FOR_SAME_PLAN_SECONDS, Releaser
from planner.ledger.verify import run as _verify_store
from planner.ledger.verify import verify_ledger
from planner.privacy.accounting import CompositionRule, Spend
from planner.privacy.budget import BUDGET_TOLERANCE
from planner.privacy.sampling import Sampling

__all__ = [
    "BUDGET_REL_TOLERANCE",
    "BUSY_TIMEOUT_SECONDS",
    "ENV_HOME",
    "ENV_LEASE",
    "ENV_PASSWORD",
    "ENV_PASSWORD_FILE",
    "ENV_URL",
    "ENV_USER",
    "FORMAT_VERSION",
    "JSON",
    "LEASE_SECONDS",
    "LEDGER_METADATA",
    "MAX_TEXT_CHARS",
    "WAIT_FOR_SAME_PLAN_SECONDS",
    "AccountInfo",
    "BudgetChange",
    "BudgetStatus",
    "DatasetInfo",
    "HistoryPoint",
    "Identity",
    "Ledger",
    "ReleasePreview",
    "ReleaseRecord",
    "ReleaseRow",
    "ReleaseStatus",
    "SpendRecord",
    "SpendRow",
    "VerifyReport",
    "VersionInfo",
    "default_ledger_url",
    "resolve_dataset",
    "verify_ledger",
]

#: Relative slack on every budget check: the one tolerance of :meth:`planner.privacy.budget.Budget.fits`.
BUDGET_REL_TOLERANCE: Final = BUDGET_TOLERANCE


class Ledger:
    """The persistent privacy ledger (SQLite by default, any SQLAlchemy URL).

    Parameters
    ----------
    url : str, optional
        A SQLAlchemy URL. Defaults to :func:`default_ledger_url` (``$PLANNER_LEDGER_URL``
        or ``sqlite:///$PLANNER_HOME/ledger.db``). A new ledger is created where none
        exists (atomically for every other opener); a ledger made by an earlier version is
        migrated; pending releases whose lease expired are marked ``spent_no_answers``.
    actor : Principal, optional
        The default actor of every call that does not pass its own. Without one, a
        ledger without accounts acts for :data:`~planner.ledger.accounts.LOCAL_OWNER`, and a
        ledger with accounts for the account named by ``PLANNER_USER`` (password in
        ``PLANNER_PASSWORD`` or the file ``PLANNER_PASSWORD_FILE``), else refuses.
    lease_seconds : float, optional
        Lease of a pending release (default ``$PLANNER_LEASE_SECONDS`` or 30 s).
    oidc_roles : mapping, optional
        The organisation's OpenID Connect role map (``[planner.roles]`` of
        ``.streamlit/secrets.toml``). Without it, ``oidc:`` principals are refused; with it,
        their role is the one the map gives their address.

    Raises
    ------
    LedgerError
        If the URL is invalid, its driver is missing or the database cannot be opened.
    LedgerIntegrityError
        If a ledger existed here and is now empty, truncated, rolled back, replaced,
        corrupt, or made with another server secret.

    Examples
    --------
    >>> from planner.privacy.accounting import Spend
    >>> from planner.privacy.events import PureEvent
    >>> ledger = Ledger("sqlite://")
    >>> info = ledger.register_dataset("digest-1", "survey", epsilon=1.0, delta=1e-6, rule="basic")
    >>> spend = Spend(event=PureEvent(0.25), epsilon=0.25, delta=0.0)
    >>> rec = ledger.release("digest-1", "plan-1", "schema-1", [("q1", spend)], lambda: {"q1": 41.7})
    >>> rec.status.value, rec.answers, rec.actor
    ('done', {'q1': 41.7}, 'local:owner')
    >>> ledger.status(info.fingerprint).epsilon_remaining
    0.75
    >>> ledger.close()
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        actor: Principal | None = None,
        lease_seconds: float | None = None,
        oidc_roles: Mapping[str, Any] | None = None,
        _gate: bool = True,
    ) -> None:
        if actor is not None and not isinstance(actor, Principal):
            raise PermissionDenied(f"actor must be a Principal; got {type(actor).__name__}.")
        if oidc_roles is not None and not isinstance(oidc_roles, Mapping):
            raise LedgerError(f"oidc_roles must be a mapping (the [planner.roles] table); got {type(oidc_roles).__name__}.")
        self._store = Store(default_ledger_url() if url is None else url)
        self.lease_seconds = lease_seconds_of(lease_seconds)
        self._default_actor = actor
        self._implicit: Principal | None = None
        self._actors = Actors(self._store, None if oidc_roles is None else dict(oidc_roles))
        self._datasets = Datasets(self._store, self._actors)
        self._reader = Reader(self._store, self._actors, self._datasets)
        self._releaser = Releaser(self._store, self._actors, self._datasets, self.lease_seconds)
        self._store.refresh = refresh_budgets
        if _gate:
            problems = migrate.open_store(self._store)
            if problems:
                raise LedgerIntegrityError(" ".join(problems))
            self.repair()

    # ------------------------------------------------------------------ engine

    @property
    def url(self) -> str:
        """The database URL, password hidden."""
        return self._store.url

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for diagnostics and tests)."""
        return self._store.engine

    @property
    def store(self) -> Store:
        """The ledger's storage (for diagnostics and tests)."""
        return self._store

    @property
    def ledger_id(self) -> str | None:
        """The ledger's identity (a random id fixed when it was created)."""
        return self._store.ledger_id

    @property
    def marker_path(self) -> Path | None:
        """Where this machine keeps the ledger's integrity marker (``None`` in memory)."""
        return None if self._store.marker is None else self._store.marker.path

    def close(self) -> None:
        """Close every pooled connection (call before ``fork``; the ledger stays usable)."""
        self._store.close()

    def with_actor(self, actor: Principal) -> Ledger:
        """The same ledger (same connections and record) acting for ``actor`` by default.

        For a page: ``led = cached_ledger.with_actor(session_principal)``.
        """
        if not isinstance(actor, Principal):
            raise PermissionDenied(f"actor must be a Principal; got {type(actor).__name__}.")
        clone = object.__new__(Ledger)
        clone.__dict__.update(self.__dict__)
        clone._default_actor = actor
        clone._implicit = None
        return clone

    def _actor(self, actor: Principal | None) -> Principal:
        if actor is not None:
            if not isinstance(actor, Principal):
                raise PermissionDenied(f"actor must be a Principal; got {type(actor).__name__}.")
            return actor
        if self._default_actor is not None:
            return self._default_actor
        if self._implicit is None or self.has_accounts():
            self._implicit = self._actors.implicit()
        return self._implicit

    # ------------------------------------------------------------------ accounts

    def has_accounts(self) -> bool:
        """Whether the ledger has any local account (then nobody is implicitly its owner)."""
        with self._store.reading() as (_, record):
            return record.has_accounts()

    def create_account(self, username: str, password: str, role: Role | str, *,
                       actor: Principal | None = None) -> AccountInfo:
        """Create a local account (owners only; the first account must be an owner, and
        from then on the ledger has no implicit local owner)."""
        who = self._default_actor if actor is None and self._default_actor is not None else actor
        if who is None:
            who = self._actor(None) if self.has_accounts() else self._actors.implicit()
        return self._actors.create_account(who, username, password, role)

    def authenticate(self, username: str, password: str, *, client: str | None = None) -> Principal:
        """The principal of a local account whose password matches; ``client`` names who
        tries (the app's client address), for the sign-in throttle
        (:mod:`planner.ledger.people`).

        Raises
        ------
        PermissionDenied
            Unknown user, wrong password or disabled account (one message for all three),
            or too many recent failures for this account or client.
        """
        return self._actors.authenticate(username, password, client=client)

    def set_password(self, username: str, new_password: str, *, actor: Principal | None = None) -> None:
        """Change a password (the account itself, or an owner)."""
        self._actors.set_password(self._actor(actor), username, new_password)

    def disable_account(self, username: str, *, actor: Principal | None = None) -> AccountInfo:
        """Disable an account (owners only; it can no longer sign in or act)."""
        return self._actors.disable_account(self._actor(actor), username)

    def accounts(self, *, actor: Principal | None = None) -> list[AccountInfo]:
        """Every local account (owners only)."""
        return self._actors.accounts(self._actor(actor))

    # ------------------------------------------------------------------ grants

    def grant(self, fingerprint: str, subject: str, role: Role | str, *,
              epsilon: float | None = None, delta: float | None = None,
              actor: Principal | None = None) -> GrantInfo:
        """Grant ``subject`` access to a dataset (owners only).

        ``role="analyst"`` with ``epsilon`` (and optionally ``delta``, default the
        dataset's): the analyst may release on the dataset while their own spends, composed
        under its rule, stay within ``epsilon``. ``role="viewer"``: they may read its ledger
        and released answers. A new grant replaces the subject's previous one.
        """
        return self._actors.grant(self._actor(actor), self._ds(fingerprint), subject, role, epsilon, delta)

    def revoke(self, fingerprint: str, subject: str, *, actor: Principal | None = None) -> None:
        """Revoke ``subject``'s grant on a dataset (owners only). Spends stay counted."""
        self._actors.revoke(self._actor(actor), self._ds(fingerprint), subject)

    def grants(self, fingerprint: str, *, actor: Principal | None = None) -> list[GrantInfo]:
        """The active grants on a dataset (owners see all; others their own)."""
        return self._actors.grants(self._actor(actor), self._ds(fingerprint))

    def _ds(self, fingerprint: str) -> Callable[[Any], dict[str, Any]]:
        return lambda record: self._datasets.row(record, fingerprint)

    # ------------------------------------------------------------------ datasets

    def register_dataset(
        self,
        fingerprint: str,
        name: str,
        epsilon: float,
        delta: float,
        rule: CompositionRule | str,
        *,
        schema_hash: str | None = None,
        rows: int | None = None,
        sampling: Sampling | None = None,
        actor: Principal | None = None,
    ) -> DatasetInfo:
        """Register a dataset's lifetime budget (idempotent for the same budget).

        Parameters
        ----------
        fingerprint : str
            A content digest of the data (or a legacy file hash), or an existing
            dataset's key. If it names a registered dataset (or one of its versions), that
            dataset is returned when the budget matches. New content joins the dataset
            registered under ``name`` as a new version (same budget); only if there is none
            (and none was declared with the same schema) is a new dataset registered with
            this content as its first version (only the keyed fingerprint is stored).
        name : str
            The dataset's name, unique in the ledger (case ignored).
        epsilon, delta : float
            The lifetime budget: 0 < ε ≤ 1000, 0 ≤ δ < 1 (JSON numbers; not booleans or
            strings).
        rule : CompositionRule or str
            The composition rule every spend is composed under.
        schema_hash : str, optional
            The schema the dataset is declared with (recorded).
        rows : int, optional
            Row count of this version (recorded).
        sampling : Sampling, optional
            The schema's declaration that the table is a secret random sample of a
            population at a public rate (:attr:`planner.data.schema.Schema.sampling`). The
            lifetime budget is then the *population's*, and every check amplifies the
            composed spends once (:func:`planner.privacy.sampling.sampled_total_epsilon`). Fixed at
            registration, like the budget and the rule.
        actor : Principal, optional
            Who registers (an owner; anyone who may read the dataset for the idempotent
            case).

        Returns
        -------
        DatasetInfo
            ``fingerprint`` is the dataset's public key (``ds-…``).

        Raises
        ------
        BudgetError
            If ε, δ or the rule is invalid.
        LedgerError
            If the dataset is registered with a different lifetime budget, rule or
            sampling declaration; or the content is new, names no registered dataset, and a
            dataset was declared with the same schema (one table, one budget:
            :mod:`planner.ledger.datasets`).
        PermissionDenied
            If the actor may not declare datasets.
        """
        return self._datasets.register(self._actor(actor), fingerprint, name, epsilon, delta, rule,
                                       schema_hash=schema_hash, rows=rows, sampling=sampling)

    def declare_dataset(
        self,
        name: str,
        epsilon: float,
        delta: float,
        rule: CompositionRule | str,
        *,
        schema_hash: str,
        digest: str | None = None,
        rows: int | None = None,
        sampling: Sampling | None = None,
        actor: Principal | None = None,
    ) -> DatasetInfo:
        """Declare a new dataset deliberately (owners only): its own name and budget.

        A changed file of a registered dataset is not a new dataset: it is a new version of
        the same budget (:meth:`add_version`, or ``digest=`` on :meth:`release`). This call
        is the one deliberate way to start a new budget, so it refuses a name already in
        use and content that is already a version of another dataset. ``sampling``: as in
        :meth:`register_dataset` (the table is a secret sample; the budget is the
        population's).
        """
        return self._datasets.declare(self._actor(actor), name, epsilon, delta, rule, schema_hash=schema_hash,
                                      digest=digest, rows=rows, sampling=sampling)

    def identify(self, digest: str, *, name: str | None = None, schema_hash: str | None = None,
                 actor: Principal | None = None) -> Identity:
        """Which dataset a table's content belongs to, before anything is recorded: a known
        version's dataset, the dataset named ``name`` (the content would become its new
        version), or none — with the datasets declared with the same schema it resembles
        and what to do (:mod:`planner.ledger.datasets`)."""
        return self._datasets.identify(self._actor(actor), digest, name, schema_hash)

    def add_version(self, fingerprint: str, digest: str, *, rows: int | None = None,
                    schema_hash: str | None = None, actor: Principal | None = None) -> VersionInfo:
        """Record ``digest`` as a content version of a registered dataset (same budget).

        Idempotent for a digest already recorded on this dataset; refused for one recorded
        on another dataset. Owners, and analysts granted a budget on the dataset, may add
        versions.
        """
        return self._datasets.add_version(self._actor(actor), fingerprint, digest, rows=rows,
                                          schema_hash=schema_hash)

    def find_dataset(self, digest: str, *, actor: Principal | None = None) -> DatasetInfo | None:
        """The registered dataset this content (digest) is a version of, or ``None``."""
        return self._datasets.find_dataset(self._actor(actor), digest)

    def versions(self, fingerprint: str, *, actor: Principal | None = None) -> list[VersionInfo]:
        """Every content version of a dataset, oldest first (keyed fingerprints only)."""
        return self._datasets.versions(self._actor(actor), fingerprint)

    def raise_budget(self, fingerprint: str, epsilon: float, delta: float, *, reason: str,
                     actor: Principal | None = None) -> DatasetInfo:
        """Raise a dataset's lifetime budget: a deliberate action of an owner, recorded
        with its reason and who made it.

        The budget can only grow (ε and δ each at least their current value, one of them
        larger), so nothing already spent is ever outgrown; the change is kept in the
        ledger (:meth:`budget_changes`) and exported with it.

        Raises
        ------
        BudgetError
            Invalid ε or δ.
        LedgerError
            Unknown dataset, an empty reason, or a value below the current budget.
        PermissionDenied
            The actor is not an owner.
        """
        return self._datasets.raise_budget(self._actor(actor), fingerprint, epsilon, delta, reason)

    def budget_changes(self, fingerprint: str, *, actor: Principal | None = None) -> list[BudgetChange]:
        """Every recorded raise of the dataset's lifetime budget, oldest first."""
        return self._datasets.budget_changes(self._actor(actor), fingerprint)

    def datasets(self, *, actor: Principal | None = None) -> list[DatasetInfo]:
        """The registered datasets the actor may see, oldest first (owners: all; others:
        those granted or shared with them)."""
        return self._datasets.datasets(self._actor(actor))

    def dataset(self, fingerprint: str, *, actor: Principal | None = None) -> DatasetInfo:
        """One registered dataset (by key, or by a digest of one of its versions);
        :class:`LedgerError` if unknown."""
        return self._datasets.dataset(self._actor(actor), fingerprint)

    # ------------------------------------------------------------------ reading

    def preview(self, fingerprint: str, spends: Sequence[Spend], *,
                actor: Principal | None = None) -> ReleasePreview:
        """What releasing ``spends`` would cost on the dataset, and whether it fits.

        Nothing is recorded. The check is the one :meth:`release` enforces, on the spends
        recorded so far (and, for an analyst, on their grant); a concurrent release may
        still take the budget first, so the release itself checks again under its lock.
        """
        return self._reader.preview(self._actor(actor), fingerprint, spends)

    def status(self, fingerprint: str, *, actor: Principal | None = None) -> BudgetStatus:
        """The dataset's budget now: total, spent under its rule, remaining, releases.

        Flat in the history: the record composes each spend once.

        Raises
        ------
        LedgerError
            If the dataset is not registered.
        """
        return self._reader.status(self._actor(actor), fingerprint)

    def releases(self, fingerprint: str, *, actor: Principal | None = None) -> list[ReleaseRecord]:
        """Every release of the dataset, oldest first, with its spends and answers.

        A pending release whose lease expired is reported as ``spent_no_answers``.
        """
        return self._reader.releases(self._actor(actor), fingerprint)

    def stored_release(self, fingerprint: str, plan_hash: str, *, digest: str | None = None,
                       actor: Principal | None = None) -> ReleaseRecord | None:
        """The release of plan ``plan_hash`` on this content (``digest``, a version of the
        dataset; any version when ``None``), or ``None``: what a rerun shows instead of
        sampling. A plan is released once per content version of its dataset."""
        return self._reader.stored(self._actor(actor), fingerprint, plan_hash, digest)

    def history(self, fingerprint: str, *, actor: Principal | None = None) -> list[HistoryPoint]:
        """Cumulative spent ε (under the dataset's rule) after each release, in time order,
        with the lifetime ε in force at each."""
        return self._reader.history(self._actor(actor), fingerprint)

    def export(self, fingerprint: str, *, include_answers: bool = False,
               actor: Principal | None = None) -> dict[str, Any]:
        """The dataset's ledger as a JSON-able dict (one consistent snapshot).

        Parameters
        ----------
        fingerprint : str
            The dataset.
        include_answers : bool, default False
            Include the released answer values. Off by default: the export then holds only
            budgets, spends, events, keyed fingerprints and who released.

        Returns
        -------
        dict
            ``{"format", "version", "dataset", "versions", "status", "releases", "history",
            "budget_changes"}``; non-finite floats in budgets become ``None``. No bare hash
            of the data: versions are keyed fingerprints.
        """
        return self._reader.export(self._actor(actor), fingerprint, include_answers)

    # ------------------------------------------------------------------ repair / verify

    def repair(self) -> int:
        """Record pending releases whose lease expired as ``spent_no_answers`` (journaled).

        Runs on every open. The spend stays counted; nothing is refunded.

        Returns
        -------
        int
            How many releases were marked.
        """
        with self._store.session(write=False) as s:
            pending = s.exec(select(ReleaseRow).where(col(ReleaseRow.status) == ReleaseStatus.PENDING.value)).all()
            dead = [r.id for r in pending if not alive(r)]
        if not dead:
            return 0
        marked: list[ReleaseRow] = []
        with self._store.write() as (s, head):
            for r in s.exec(select(ReleaseRow).where(col(ReleaseRow.id).in_(dead))).all():
                if r.status == ReleaseStatus.PENDING.value and not alive(r):
                    r.status = ReleaseStatus.SPENT_NO_ANSWERS.value
                    r.error = r.error or "the releasing process stopped renewing its lease before storing answers"
                    s.add(r)
                    marked.append(r)
            if marked:
                self._store.commit(s, head, "release.lost", None, marked)
        return len(marked)

    def integrity_check(self) -> list[str]:
        """Problems found in the ledger (an empty list when it is consistent): the
        problems of :meth:`verify`."""
        return list(_verify_store(self._store).problems)

    def verify(self, *, actor: Principal | None = None) -> VerifyReport:
        """Check everything: the journal chain, the head, the marker, the replay of the
        journal against every table, stored events and statuses, and (SQLite) the database
        file's own integrity check.

        Never raises for a problem it finds; each one is a line of the report. Anyone may
        verify; only owners see how many datasets, accounts, grants and entries the ledger
        holds (:meth:`VerifyReport.without_counts` for everyone else).
        """
        report = _verify_store(self._store)
        if not self._is_owner(actor):
            return report.without_counts()
        return report

    def _is_owner(self, actor: Principal | None) -> bool:
        try:
            who = self._actor(actor)
            with self._store.reading() as (_, record):
                return self._actors.effective(record, who).role is Role.OWNER
        except (PermissionDenied, LedgerError):
            return False

    # ------------------------------------------------------------------ release

    def release(
        self,
        fingerprint: str,
        plan_hash: str,
        schema_hash: str,
        spends: Sequence[tuple[str, Spend]],
        sample: Callable[[], Mapping[str, JSON]],
        *,
        wait_seconds: float = WAIT_FOR_SAME_PLAN_SECONDS,
        digest: str | None = None,
        rows: int | None = None,
        actor: Principal | None = None,
    ) -> ReleaseRecord:
        """Check the budget, record the spend, sample, store the answers — in that order.

        Parameters
        ----------
        fingerprint : str
            The dataset: its key, or a content digest of one of its versions.
        plan_hash : str
            Identifies the plan; a plan is released at most once per dataset. Releasing the
            same plan hash again returns the stored answers without sampling.
        schema_hash : str
            The schema the plan was made under (recorded).
        spends : sequence of (query_id, Spend)
            One entry per mechanism invocation; query ids must be unique.
        sample : callable
            Draws the noise and returns ``{query_id: answer}`` (JSON values). Called at
            most once, after the spend is committed and outside any transaction, while a
            heartbeat renews the release's lease.
        wait_seconds : float, default 60
            How long to wait when the same plan is being released right now by another
            thread or process (its answers are then returned, status ``reused``).
        digest : str, optional
            The content digest of the data being released. It is recorded as a version of
            the dataset (same budget) if new, and refused if it is a version of another
            dataset.
        rows : int, optional
            Row count of that version (recorded with a new version).
        actor : Principal, optional
            Who releases: an owner, or an analyst within their grant.

        Returns
        -------
        ReleaseRecord
            Status ``done`` (sampled now) or ``reused`` (answered earlier); ``actor`` is
            who released.

        Raises
        ------
        BudgetExceededError
            If the new spends do not fit in what remains under the dataset's rule (or the
            analyst's grant).
        PermissionDenied
            If the actor may not release on this dataset.
        LedgerError
            If the dataset is unknown, the plan was released before but its answers were
            lost (the budget stays spent; it is never sampled again), or the answers
            cannot be stored (the message then says the spend is recorded).
        LedgerIntegrityError
            If a row this decision reads (the dataset, its releases and spends, the actor's
            account or grant) disagrees with the journal: it was edited outside the planner.
        Exception
            Whatever ``sample()`` raises propagates; the spend stays counted and the
            release is marked ``spent_no_answers``.
        """
        return self._releaser.release(self._actor(actor), fingerprint, plan_hash, schema_hash, spends, sample,
                                      wait_seconds=wait_seconds, digest=digest, rows=rows)


def lease_seconds_of(value: float | None) -> float:
    return lease_seconds(value)


def resolve_dataset(ledger: Ledger, digests: Sequence[str]) -> str | None:
    """The key (``ds-…``) of the registered dataset any of ``digests`` is a version of, or
    ``None``; the other digests are recorded as versions of it on the way.

    The web app knows a table by two digests: the key of its content under the declared
    schema (:func:`planner.data.sources.table_key`, what ``planner release`` computes in its
    scan) and the hash of the file's bytes (the key it had before the content digest, and
    the one a server file is listed by). Whichever the ledger knows names the dataset, and
    linking the other keeps one table one budget: a ledger written by an earlier version
    keeps its spends, the command line finds the app's dataset, and declaring more columns
    of the same file does not open a second budget.

    Raises
    ------
    LedgerError
        The digests name two different datasets, or the principal may not read the
        dataset (:class:`~planner.core.errors.PermissionDenied`).
    """
    found: dict[str, str] = {}
    for d in digests:
        info = ledger.find_dataset(d)
        if info is not None:
            found[d] = info.fingerprint
    keys = set(found.values())
    if not keys:
        return None
    if len(keys) > 1:
        raise LedgerError(
            "this table's content and its file are registered as two different datasets; ask an owner to "
            "retire one of them (one table has one budget)."
        )
    (key,) = keys
    try:
        for d in digests:
            if d not in found:
                ledger.add_version(key, d)
    except PermissionDenied:  # a reader who may not add versions: the dataset is found all the same
        pass
    return key
