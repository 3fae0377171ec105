"""A workload's costs, vectorised over θ: the accountants' own kernels on the items' events.

:class:`_Workload` holds the items of one allocation as arrays, and computes per item the
MSE, the standalone ε, ρ and RDP curve at any θ (each the accountant's vectorised kernel,
so no composition formula exists twice); :func:`_assigned` gives the (εᵢ, δᵢ) each emitted
event is recorded with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import cast

import numpy as np
import numpy.typing as npt

from planner.planning.allocation.model import (
    EMISSIONS,
    Emission,
    Family,
    FloatArray,
    Item,
    _mean_split,
    _weighted_sum,
    item_events,
)
from planner.privacy.accountants import rule as rule_of
from planner.privacy.accountants.basic import epsilon_array
from planner.privacy.accountants.pure import pure_epsilon
from planner.privacy.accountants.rdp import rdp_array
from planner.privacy.accountants.zcdp import rho_array, zcdp_epsilon
from planner.privacy.budget import CompositionRule
from planner.privacy.events import GaussianEvent, PrivacyEvent


@dataclass(frozen=True)
class _Workload:
    items: tuple[Item, ...]
    fam: tuple[Family, ...]
    w: FloatArray  # wᵢ/sᵢ²
    gauss: npt.NDArray[np.bool_]
    split: FloatArray  # MEAN_LAPLACE sum share (1 elsewhere)
    delta_i: float  # δ given to each Gaussian item under basic/advanced
    delta_prime: float  # advanced composition slack δ'
    masks: dict[Family, npt.NDArray[np.bool_]] = field(default_factory=dict)

    @classmethod
    def build(
        cls, items: Sequence[Item], rule: CompositionRule, delta: float, gauss_delta_share: float
    ) -> _Workload:
        fam = tuple(i.family for i in items)
        gauss = np.array([i.is_gaussian for i in items], dtype=bool)
        n_g = int(gauss.sum())
        # The rules that compose assigned pairs give each Gaussian its own δᵢ (advanced: a
        # share of δ, the rest is its slack δ′); (1 − 1e-12): Σδᵢ must not exceed δ by a
        # rounding error.
        r = rule_of(rule)
        if r.reads_assigned:
            share = (gauss_delta_share if n_g else 0.0) if r.slack_delta else 1.0
            delta_i = delta * share / n_g * (1 - 1e-12) if n_g else 0.0
            delta_prime = delta * (1.0 - share) if r.slack_delta else 0.0
        else:
            delta_i, delta_prime = 0.0, 0.0
        masks = {f: np.array([x is f for x in fam], dtype=bool) for f in Family}
        return cls(
            items=tuple(items),
            fam=fam,
            w=np.array([i.weight / i.error_scale**2 for i in items], dtype=np.float64),
            gauss=gauss,
            split=np.array(
                [_mean_split(i) if i.family is Family.MEAN_LAPLACE else 1.0 for i in items]
            ),
            delta_i=delta_i,
            delta_prime=delta_prime,
            masks=masks,
        )

    @cached_property
    def groups(self) -> list[tuple[Emission, npt.NDArray[np.intp]]]:
        """Each emission of each family, with the columns of the items that emit it."""
        out = []
        for f in Family:
            cols = np.flatnonzero(self.masks[f])
            if not cols.size:
                continue
            for j, em in enumerate(EMISSIONS[f]):
                if f is Family.MEAN_LAPLACE and j == 1:
                    cols = cols[self.split[cols] < 1.0]  # a mean whose count part is free
                    if not cols.size:
                        continue
                out.append((em, cols))
        return out

    @cached_property
    def inv_sq(self) -> npt.NDArray[np.intp]:
        m = self.masks
        return np.flatnonzero(m[Family.LAPLACE] | m[Family.EXPONENTIAL] | m[Family.PURE] | m[Family.MEAN_LAPLACE])

    @cached_property
    def coef(self) -> FloatArray:
        return np.array([i.coef for i in self.items], dtype=np.float64)

    @cached_property
    def sens(self) -> FloatArray:
        return np.array([i.sensitivity for i in self.items], dtype=np.float64)

    def _params(self, em: Emission, cols: npt.NDArray[np.intp], th: FloatArray) -> FloatArray:
        return np.asarray(em.param(th[..., cols], self.split[cols]), dtype=np.float64)

    def mse(self, theta: FloatArray) -> FloatArray:
        """Per-item MSE (:func:`item_mse`, vectorised); θ of shape (..., n)."""
        th = np.asarray(theta, dtype=np.float64)
        out = np.empty_like(th)
        c, s = self.coef, self.sens
        with np.errstate(over="ignore", divide="ignore"):
            i = self.inv_sq
            out[..., i] = c[i] / th[..., i] ** 2
            i = np.flatnonzero(self.masks[Family.DISCRETE_LAPLACE])
            out[..., i] = c[i] / (2.0 * np.sinh(th[..., i] / (2.0 * s[i])) ** 2)
            i = np.flatnonzero(self.gauss)
            out[..., i] = c[i] / th[..., i]
        return out

    def rdp(self, th: FloatArray, alpha: FloatArray) -> FloatArray:
        """Per-item RDP at orders ``alpha`` (shape (A, 1)), θ of shape (..., A, n): the RDP
        accountant's kernel on each emitted event, summed per item."""
        out = np.zeros_like(th)
        for em, cols in self.groups:
            out[..., cols] += rdp_array(em.kind, self._params(em, cols, th), alpha)
        return out

    def objective(self, theta: FloatArray) -> float:
        return _weighted_sum(self.w, self.mse(theta))

    def eps_i(self, theta: FloatArray) -> FloatArray:
        """Per-item standalone ε (Gaussians at their δᵢ): the basic accountant's kernel,
        summed over each item's events; θ of shape (..., n)."""
        th = np.asarray(theta, dtype=np.float64)
        out = np.zeros_like(th)
        for em, cols in self.groups:
            out[..., cols] += epsilon_array(em.kind, self._params(em, cols, th), self.delta_i, discrete=em.discrete)
        return out

    def rho_i(self, theta: FloatArray) -> FloatArray:
        """Per-item ρ: the zCDP accountant's kernel, summed over each item's events."""
        th = np.asarray(theta, dtype=np.float64)
        out = np.zeros_like(th)
        for em, cols in self.groups:
            out[..., cols] += rho_array(em.kind, self._params(em, cols, th))
        return out

    def pure_total(self, theta: FloatArray) -> float:
        return math.inf if self.gauss.any() else float(theta.sum())

    def zcdp_epsilon(self, theta: FloatArray, delta: float) -> float:
        """The zCDP accountant's ε of the items' events at θ: each pure event (a mean's sum
        and count separately) by its ρ or its ε (:func:`~planner.privacy.accountants.zcdp.zcdp_epsilon`
        on the kernels' per-event ε and ρ, exactly what the accountant computes)."""
        th = np.asarray(theta, dtype=np.float64)
        pe: list[FloatArray] = []
        pr: list[FloatArray] = []
        other = 0.0
        for em, cols in self.groups:
            x = self._params(em, cols, th)
            rho = rho_array(em.kind, x)
            if em.kind is GaussianEvent:
                other += float(rho.sum())
            else:
                pe.append(epsilon_array(em.kind, x))
                pr.append(rho)
        eps = np.concatenate(pe) if pe else np.zeros(0)
        rhos = np.concatenate(pr) if pr else np.zeros(0)
        return zcdp_epsilon(eps, rhos, other, delta)


def _assigned(
    wl: _Workload, theta: FloatArray, delta: float
) -> list[list[tuple[PrivacyEvent, float, float]]]:
    """Per item, the events it emits at θ with the (εᵢ, δᵢ) each is assigned: pure events
    at their ε; a Gaussian at its δᵢ (the whole δ under RDP/zCDP, where the pair only
    describes the query on its own), its ε from the event's own conversion, computed for all
    Gaussian items in one vectorised call (the exact fit calls this many times)."""
    events = [item_events(item, float(theta[k])) for k, item in enumerate(wl.items)]
    d_i = wl.delta_i if wl.delta_i > 0 else delta
    out: list[list[tuple[PrivacyEvent, float, float]]] = [
        [] if item.is_gaussian else [(e, pure_epsilon(e), 0.0) for e in evs]
        for item, evs in zip(wl.items, events, strict=True)
    ]
    for discrete in (False, True):
        ks = [
            k
            for k, item in enumerate(wl.items)
            if item.is_gaussian and (item.family is Family.DISCRETE_GAUSSIAN) is discrete
        ]
        if not ks:
            continue
        ev = [cast(GaussianEvent, events[k][0]) for k in ks]
        # the basic accountant's standalone ε of a Gaussian at δᵢ, vectorised
        eps = epsilon_array(GaussianEvent, np.array([e.noise_multiplier for e in ev]), d_i, discrete=discrete)
        for k, e, x in zip(ks, ev, eps, strict=True):
            # A very noisy Gaussian can be (0, δ)-DP on its own; any larger ε is also valid.
            out[k] = [(e, max(float(x), 1e-300), d_i)]
    return out
