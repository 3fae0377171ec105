"""The training-budget planner: the privacy of DP-SGD, and the inverse problems.

DP-SGD (Abadi et al. 2016; Gatica-Perez, Sajadmanesh & Shahin Shamsabadi, "An introduction
to trustworthy machine learning", AIDA course, November 2022) runs T steps; each draws a
batch by Poisson sampling (every example independently with probability q = B/N), clips
each example's gradient to norm C, sums them and adds N(0, σ²C²I). Each step is a
Poisson-sampled Gaussian mechanism of noise multiplier σ (the noise's standard deviation
over the add/remove sensitivity C), so the run is the T-fold composition of
:class:`~planner.privacy.events.PoissonSampledEvent` (:class:`~planner.privacy.events.GaussianEvent` (σ), q).

This module turns (N, batch or q, epochs or steps, σ, δ) into ε under the Rényi DP and the
optimal (privacy loss distribution) accountants side by side — both through the accountant
registry, so the numbers are the ones the rest of the product uses — and solves the inverse
problems: the least σ for a target ε at given epochs, and the most epochs for a target ε at
given σ. Every number is data-independent (planning only).

Conventions: steps = ⌈epochs·N/B⌉ (a started epoch is trained to its end); with
``scheme="without_replacement"`` batches have exactly B examples drawn uniformly, the
neighbouring relation is substitute-one and the noise multiplier relative to its
sensitivity 2C is σ/2.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from planner.core.errors import BudgetError, PlanError
from planner.core.rootfind import bisect_integer
from planner.privacy.accountants import accountant
from planner.privacy.accountants.pld import pld_epsilon
from planner.privacy.budget import CompositionRule, check_delta, check_epsilon
from planner.privacy.events import (
    GaussianEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    check_noise_multiplier,
)
from planner.privacy.sampling import SamplingScheme

#: The accountants compared (the registry's names).
ACCOUNTANTS: Final[tuple[CompositionRule, ...]] = (CompositionRule.RDP, CompositionRule.PLD)
#: Largest number of steps accepted (a sanity limit, far beyond any training run).
MAX_STEPS: Final[int] = 10_000_000
#: Relative width at which the σ search stops (the answer is the feasible end).
_SIGMA_TOL: Final[float] = 1e-4


def _whole(value: Any, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise PlanError(f"{name} must be a whole number ≥ {minimum}; got {value!r}.")
    v = int(value)
    if v < minimum or (maximum is not None and v > maximum):
        bound = f" and ≤ {maximum:,}" if maximum is not None else ""
        raise PlanError(f"{name} must be ≥ {minimum}{bound}; got {v}.")
    return v


def _positive(value: Any, name: str, remedy: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{name} must be a number > 0; got {value!r}. {remedy}") from exc
    if not (math.isfinite(v) and v > 0):
        raise PlanError(f"{name} must be > 0 and finite; got {v}. {remedy}")
    return v


@dataclass(frozen=True, slots=True)
class TrainingRun:
    """One DP-SGD configuration.

    Parameters
    ----------
    n
        Number of training examples N (public).
    sampling_rate
        q ∈ (0, 1]: the probability that an example enters a step's batch (B/N).
    steps
        Number of noisy gradient steps T.
    sigma
        Noise multiplier σ: the noise's standard deviation divided by the clipping norm C.
    delta
        The δ of the guarantee.
    scheme
        ``poisson`` (the standard analysis, add/remove neighbours) or
        ``without_replacement`` (fixed-size batches, substitute neighbours).

    Use :meth:`from_batch` to give a batch size and epochs instead.

    Examples
    --------
    >>> run = TrainingRun.from_batch(n=60_000, batch=256, epochs=15, sigma=1.1, delta=1e-5)
    >>> run.steps, round(run.sampling_rate, 6)  # ⌈15·60000/256⌉, 256/60000
    (3516, 0.004267)
    """

    n: int
    sampling_rate: float
    steps: int
    sigma: float
    delta: float
    scheme: SamplingScheme = SamplingScheme.POISSON

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", _whole(self.n, "n (dataset size)", 1))
        q = _positive(self.sampling_rate, "sampling_rate", "Use batch / n, e.g. 256/60000.")
        if q > 1.0:
            raise PlanError(f"sampling_rate must be ≤ 1; got {q}. The batch cannot be larger than the dataset.")
        object.__setattr__(self, "sampling_rate", q)
        object.__setattr__(self, "steps", _whole(self.steps, "steps", 1, MAX_STEPS))
        sigma = _positive(self.sigma, "sigma (noise multiplier)",
                          "σ is the noise standard deviation over the clipping norm, e.g. 1.0.")
        try:
            object.__setattr__(self, "sigma", check_noise_multiplier(sigma, "sigma (noise multiplier)"))
        except BudgetError as exc:
            raise PlanError(str(exc)) from exc
        try:
            d = check_delta(self.delta)
        except Exception as exc:
            raise PlanError(str(exc)) from exc
        if d == 0.0:
            raise PlanError("delta must be > 0 for DP-SGD (the Gaussian noise has no pure ε); use δ ≪ 1/n, e.g. 1e-5.")
        object.__setattr__(self, "delta", d)
        try:
            object.__setattr__(self, "scheme", SamplingScheme(self.scheme))
        except ValueError as exc:
            raise PlanError(f"scheme must be poisson or without_replacement; got {self.scheme!r}.") from exc

    @classmethod
    def from_batch(
        cls,
        n: int,
        batch: int | None = None,
        epochs: float | None = None,
        sigma: float = 1.0,
        delta: float = 1e-5,
        *,
        sampling_rate: float | None = None,
        steps: int | None = None,
        scheme: SamplingScheme | str = SamplingScheme.POISSON,
    ) -> TrainingRun:
        """Build from a batch size (or sampling rate) and epochs (or steps).

        Raises
        ------
        PlanError
            Neither or both of batch / sampling_rate, or of epochs / steps; bad values.
        """
        n = _whole(n, "n (dataset size)", 1)
        if (batch is None) == (sampling_rate is None):
            raise PlanError("give either batch (the expected batch size) or sampling_rate (q = batch / n), not both.")
        if batch is not None:
            b = _whole(batch, "batch", 1)
            if b > n:
                raise PlanError(f"batch must be ≤ n; got batch = {b} for n = {n}. Use a smaller batch.")
            q = b / n
        else:
            q = _positive(sampling_rate, "sampling_rate", "Use batch / n, e.g. 256/60000.")
        if (epochs is None) == (steps is None):
            raise PlanError("give either epochs or steps (the number of noisy gradient steps), not both.")
        if epochs is not None:
            e = _positive(epochs, "epochs", "Train for at least a fraction of an epoch.")
            t = math.ceil(e / q - 1e-9)
        else:
            t = _whole(steps, "steps", 1, MAX_STEPS)
        if t > MAX_STEPS:
            raise PlanError(f"that is {t:,} steps; at most {MAX_STEPS:,} are accepted. Use fewer epochs or a larger batch.")
        return cls(n, q, t, sigma, delta, SamplingScheme(scheme))

    @property
    def epochs(self) -> float:
        """Passes over the data: steps · q."""
        return self.steps * self.sampling_rate

    @property
    def batch(self) -> float:
        """The expected batch size q·N."""
        return self.sampling_rate * self.n

    def step_event(self) -> PrivacyEvent:
        """One step: the sampled Gaussian mechanism (σ/2 relative to 2C under substitution)."""
        if self.scheme is SamplingScheme.POISSON:
            return PoissonSampledEvent(GaussianEvent(self.sigma), self.sampling_rate)
        return SampledWithoutReplacementEvent(GaussianEvent(self.sigma / 2.0), self.sampling_rate)

    def events(self, steps: int | None = None) -> list[PrivacyEvent]:
        """The run as privacy events (what a ledger would record)."""
        return [SelfComposedEvent(self.step_event(), self.steps if steps is None else int(steps))]

    def with_(self, **changes: Any) -> TrainingRun:
        from dataclasses import replace

        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class TrainingPrivacy:
    """ε of a run under each accountant, and what it took to compute."""

    run: TrainingRun
    epsilon: dict[str, float]
    seconds: float
    pld_error: float | None = None

    @property
    def saving(self) -> float:
        """How much larger the RDP ε is than the optimal one (relative)."""
        rdp, pld = self.epsilon["rdp"], self.epsilon["pld"]
        return rdp / pld - 1.0 if pld > 0 and math.isfinite(rdp) else math.nan

    def to_dict(self) -> dict[str, Any]:
        """The ``planner dpsgd`` output: steps, sampling_rate, epsilon per accountant, seconds."""
        return {
            "steps": self.run.steps,
            "sampling_rate": self.run.sampling_rate,
            "epsilon": dict(self.epsilon),
            "seconds": self.seconds,
        }


def _epsilon(run: TrainingRun, rule: CompositionRule, steps: int | None = None) -> float:
    return float(accountant(rule).compose(run.events(steps)).epsilon(run.delta))


def training_epsilon(run: TrainingRun, *, with_error: bool = False) -> TrainingPrivacy:
    """ε of ``run`` under the RDP and the optimal (PLD) accountants, timed.

    Both come from the accountant registry (:func:`planner.privacy.accountants.accountant`): "rdp"
    is the Rényi accountant (Mironov, Talwar & Zhang 2019 for the sampled Gaussian), "pld"
    the optimal one (never above RDP). ``with_error`` adds the PLD discretisation error
    estimate (:class:`~planner.privacy.accountants.pld.PldResult`).

    Examples
    --------
    >>> run = TrainingRun.from_batch(n=10_000, batch=100, epochs=10, sigma=2.0, delta=1e-5)
    >>> p = training_epsilon(run)
    >>> p.epsilon["pld"] < p.epsilon["rdp"]
    True
    """
    t0 = time.perf_counter()
    eps = {rule.value: _epsilon(run, rule) for rule in ACCOUNTANTS}
    err = pld_epsilon(run.events(), run.delta, with_error=True).error if with_error else None
    return TrainingPrivacy(run, eps, time.perf_counter() - t0, err)


def epsilon_curve(run: TrainingRun, epochs: Sequence[float] | npt.ArrayLike) -> dict[str, list[float]]:
    """ε against epochs for each accountant (the chart of the training page): one run per
    value of ``epochs`` (steps = ⌈epochs/q⌉), other settings as in ``run``."""
    ep = np.asarray(epochs, dtype=np.float64).ravel()
    if ep.size == 0 or not np.all(np.isfinite(ep)) or np.any(ep <= 0):
        raise PlanError("epochs must be a non-empty list of positive numbers.")
    out: dict[str, list[float]] = {"epochs": ep.tolist()}
    steps = [max(1, math.ceil(float(e) / run.sampling_rate - 1e-9)) for e in ep]
    for rule in ACCOUNTANTS:
        out[rule.value] = [_epsilon(run, rule, s) for s in steps]
    return out


@dataclass(frozen=True, slots=True)
class Solution:
    """The answer to an inverse problem: the solved run and its ε under each accountant."""

    solved: str
    run: TrainingRun
    privacy: TrainingPrivacy
    target_epsilon: float
    rule: CompositionRule

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"solve": self.solved}
        if self.solved == "sigma":
            out["sigma"] = self.run.sigma
        else:  # whole epochs when at least one fits (steps = ⌈epochs/q⌉), else a fraction
            e = self.run.epochs
            out["epochs"] = math.floor(e + 1e-6) if e >= 1.0 else e
        out.update(self.privacy.to_dict())
        out["target_epsilon"] = self.target_epsilon
        out["accountant"] = self.rule.value
        return out


def _illinois(f: Any, lo: float, hi: float, f_lo: float, f_hi: float, done: Any) -> tuple[float, float]:
    """Shrink a bracket [lo, hi] of an increasing-or-decreasing f with f(lo) > 0 ≥ f(hi)
    (sign convention) by the Illinois variant of regula falsi until ``done(lo, hi)``;
    returns the final (lo, hi). Every hi visited satisfies f(hi) ≤ 0."""
    side = 0
    for _ in range(100):
        if done(lo, hi):
            break
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo) if f_hi != f_lo else (lo + hi) / 2.0
        width = hi - lo
        mid = min(max(mid, lo + width / 64.0), hi - width / 64.0)  # stay well inside
        f_mid = f(mid)
        if f_mid > 0:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi /= 2.0
            side = -1
        else:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo /= 2.0
            side = 1
    return lo, hi


def solve_sigma(run: TrainingRun, target_epsilon: float, rule: CompositionRule | str = CompositionRule.PLD) -> Solution:
    """The least noise multiplier σ whose ε (under ``rule``) is at most ``target_epsilon``,
    all else as in ``run`` (its σ is ignored).

    ε decreases in σ. The σ the RDP accountant needs is feasible for the optimal one too
    (RDP is never tighter), so it ends the bracket; the search is a safeguarded regula falsi
    (Illinois) on ln σ that stops when the bracket is 1e-4 wide and returns its upper end,
    whose ε is within the target.

    Raises
    ------
    PlanError
        A target ≤ 0, or one no σ ≤ 10⁴ reaches.
    """
    target = _target(target_epsilon)
    r = CompositionRule(rule)

    def excess(u: float, rr: CompositionRule = r) -> float:
        return _epsilon(run.with_(sigma=math.exp(u)), rr) - target

    def bracket(rr: CompositionRule, hi: float, step: float) -> tuple[float, float, float, float]:
        f_hi = excess(hi, rr)
        while f_hi > 0:
            hi += step
            step *= 2.0
            if hi > math.log(1e4):
                raise PlanError(f"no noise multiplier up to 10⁴ brings ε down to {target:g}; train fewer steps or raise the target.")
            f_hi = excess(hi, rr)
        lo = hi - step
        f_lo = excess(lo, rr)
        while f_lo <= 0:
            hi, f_hi = lo, f_lo
            step *= 2.0
            lo -= step
            if lo < math.log(1e-3):
                return lo, hi, f_lo, f_hi
            f_lo = excess(lo, rr)
        return lo, hi, f_lo, f_hi

    def done(lo: float, hi: float) -> bool:
        return hi - lo <= _SIGMA_TOL

    if r is CompositionRule.PLD:  # bracket with the cheaper RDP accountant first
        lo, hi, f_lo, f_hi = bracket(CompositionRule.RDP, 0.0, math.log(2.0))
        _, hi = _illinois(lambda u: excess(u, CompositionRule.RDP), lo, hi, f_lo, f_hi, lambda a, b: b - a <= 1e-3)
        lo, hi, f_lo, f_hi = bracket(r, hi, 0.1)
    else:
        lo, hi, f_lo, f_hi = bracket(r, 0.0, math.log(2.0))
    if f_lo <= 0:  # even σ = 10⁻³ meets the target
        return _solution("sigma", run.with_(sigma=math.exp(hi)), target, r)
    _, hi = _illinois(excess, lo, hi, f_lo, f_hi, done)
    return _solution("sigma", run.with_(sigma=math.exp(hi)), target, r)


def solve_epochs(run: TrainingRun, target_epsilon: float, rule: CompositionRule | str = CompositionRule.PLD) -> Solution:
    """The most steps whose ε (under ``rule``) is at most ``target_epsilon`` at ``run``'s σ,
    rounded down to whole epochs when at least one fits (else the most steps).

    ε increases with the number of steps. The steps RDP allows are feasible for the optimal
    accountant too, so they start the bracket; regula falsi on the number of steps narrows
    it, and a last bisection finds the exact integer.

    Raises
    ------
    PlanError
        A target that not even one step meets.
    """
    target = _target(target_epsilon)
    r = CompositionRule(rule)

    def excess(steps: float, rr: CompositionRule = r) -> float:  # > 0: too many steps
        return _epsilon(run, rr, max(1, round(steps))) - target

    if excess(1) > 0:
        raise PlanError(
            f"even one step costs more than ε = {target:g} at σ = {run.sigma:g}; raise σ or the target."
        )
    start = 1
    if r is CompositionRule.PLD:  # RDP's answer is feasible here too
        start = solve_epochs_steps(run, target, CompositionRule.RDP)
    lo, hi = start, max(2 * start, 2)
    while excess(hi) <= 0:
        lo, hi = hi, hi * 2
        if hi > MAX_STEPS:
            return _solution("epochs", run.with_(steps=MAX_STEPS), target, r)
    # regula falsi on the continuous step count, then exact integer bisection
    f_lo, f_hi = excess(lo), excess(hi)
    flo, fhi = _illinois(lambda t: -excess(t), float(lo), float(hi), -f_lo, -f_hi, lambda a, b: b - a <= max(8.0, 1e-3 * a))
    lo_i, hi_i = max(lo, math.floor(flo)), min(hi, math.ceil(fhi) + 1)
    if excess(lo_i) > 0:
        lo_i = lo
    if excess(hi_i) <= 0:
        hi_i = hi
    lo_i, hi_i = bisect_integer(lambda n: not excess(n) <= 0, lo_i, hi_i)
    whole = math.floor(lo_i * run.sampling_rate + 1e-9)
    steps = lo_i
    if whole >= 1:
        steps = min(lo_i, math.ceil(whole / run.sampling_rate - 1e-9))
    return _solution("epochs", run.with_(steps=steps), target, r)


def solve_epochs_steps(run: TrainingRun, target: float, rule: CompositionRule) -> int:
    """The most steps meeting ``target`` under ``rule`` (1 if none does), by doubling and
    bisection (used to start the optimal accountant's search from RDP's answer)."""
    if _epsilon(run, rule, 1) > target:
        return 1
    lo, hi = 1, 2
    while _epsilon(run, rule, hi) <= target:
        lo, hi = hi, hi * 2
        if hi > MAX_STEPS:
            return MAX_STEPS
    return bisect_integer(lambda n: not _epsilon(run, rule, n) <= target, lo, hi)[0]


def _target(value: float) -> float:
    try:
        return check_epsilon(value, "target_epsilon")
    except Exception as exc:
        raise PlanError(str(exc)) from exc


def _solution(kind: str, run: TrainingRun, target: float, rule: CompositionRule) -> Solution:
    return Solution(kind, run, training_epsilon(run), target, rule)


def dpsgd_command(
    n: Any,
    *,
    batch: Any = None,
    sampling_rate: Any = None,
    epochs: Any = None,
    steps: Any = None,
    sigma: Any = None,
    delta: Any = 1e-5,
    target_epsilon: Any = None,
    solve: str | None = None,
    scheme: str = SamplingScheme.POISSON.value,
    accountant_rule: str = CompositionRule.PLD.value,
) -> dict[str, Any]:
    """``planner dpsgd``: ε of a run under RDP and the optimal accountant, or (with
    ``target_epsilon`` and ``solve``) the least σ or the most epochs meeting a target.

    Forward output: ``{"steps", "sampling_rate", "epsilon": {"rdp", "pld"}, "seconds"}``;
    solving adds ``"solve"``, the solved ``"sigma"`` or ``"epochs"``, ``"target_epsilon"``
    and ``"accountant"`` (the rule the target is met under), and ``"seconds"`` is the
    whole search.

    Raises
    ------
    PlanError
        A missing or contradictory argument, named by its flag, with the fix.
    """
    t0 = time.perf_counter()
    if (target_epsilon is None) != (solve is None):
        raise PlanError("--target-epsilon and --solve go together: --target-epsilon X --solve sigma|epochs.")
    if solve is not None and solve not in ("sigma", "epochs"):
        raise PlanError(f"--solve must be sigma or epochs; got {solve!r}.")
    if solve != "sigma" and sigma is None:
        raise PlanError("--sigma is missing: the noise multiplier (noise std / clipping norm), e.g. 1.0.")
    if solve == "epochs" and epochs is None and steps is None:
        epochs = 1.0  # placeholder: the search sets the number of steps
    if epochs is None and steps is None:
        raise PlanError("give --epochs E or --steps T: how long the training runs.")
    run = TrainingRun.from_batch(
        n, batch, None if steps is not None else epochs, 1.0 if sigma is None else sigma, delta,
        sampling_rate=sampling_rate, steps=steps, scheme=scheme,
    )
    if solve is None:
        return training_epsilon(run).to_dict()
    try:
        rule = CompositionRule(accountant_rule)
    except ValueError as exc:
        raise PlanError(f"--accountant must be rdp or pld; got {accountant_rule!r}.") from exc
    if rule not in ACCOUNTANTS:
        raise PlanError(f"--accountant must be rdp or pld; got {accountant_rule!r}.")
    sol = solve_sigma(run, target_epsilon, rule) if solve == "sigma" else solve_epochs(run, target_epsilon, rule)
    out = sol.to_dict()
    out["seconds"] = time.perf_counter() - t0
    return out


def guidance(run: TrainingRun) -> list[str]:
    """What a practitioner should know about this configuration (plain sentences).

    Covers δ against 1/N, what the clipping norm does and does not change, the sampling
    assumption, and what the optimal accountant saves over RDP (computed).
    """
    out: list[str] = []
    inv_n = 1.0 / run.n
    ratio = run.delta / inv_n
    if ratio >= 1.0:
        out.append(
            f"δ = {run.delta:g} is at least 1/N = {inv_n:.3g}: a mechanism that publishes one random "
            "training example in full meets that δ. Use δ ≪ 1/N (e.g. 1/(10·N) or smaller)."
        )
    elif ratio > 0.1:
        out.append(
            f"δ = {run.delta:g} is {ratio:.2g} × 1/N: keep δ well below 1/N = {inv_n:.3g}, e.g. "
            f"δ ≤ {0.1 * inv_n:.1g}."
        )
    else:
        out.append(f"δ = {run.delta:g} is well below 1/N = {inv_n:.3g}, as it should be.")
    out.append(
        "The clipping norm C does not change ε: the guarantee depends only on σ (the noise's "
        "standard deviation divided by C), the sampling rate and the number of steps. C changes "
        "accuracy: a small C clips more gradients (bias) and the noise on the averaged gradient "
        f"is σ·C/B = {run.sigma:g}·C/{run.batch:.4g} (variance)."
    )
    if run.scheme is SamplingScheme.POISSON:
        out.append(
            f"The guarantee assumes Poisson sampling: each step includes every example "
            f"independently with probability q = {run.sampling_rate:.4g}, so batch sizes vary around "
            f"{run.batch:.4g}. Shuffling the data into fixed batches is a different mechanism, not "
            "covered by this analysis."
        )
    else:
        out.append(
            "Fixed-size batches drawn uniformly without replacement are analysed under the "
            "substitute-one relation (one example replaced, N public), whose sensitivity is 2C."
        )
    return out


__all__ = [
    "ACCOUNTANTS",
    "Solution",
    "TrainingPrivacy",
    "TrainingRun",
    "dpsgd_command",
    "epsilon_curve",
    "guidance",
    "solve_epochs",
    "solve_sigma",
    "training_epsilon",
]
