"""The Lagrangian dual of an allocation with a separable budget, vectorised over items and
over a batch of totals (the machinery every rule's solver in :mod:`.solvers` uses)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from planner.planning.allocation.model import FloatArray, _weighted
from planner.planning.allocation.workload import _Workload


class _Dual:
    """Lagrangian dual of the allocation, vectorised over items and over a batch of
    parameters (Rényi orders α for RDP, or one row for the other rules).

    For a constraint that is separable — Σᵢ cᵢ(θᵢ) ≤ B — the optimum satisfies, for one
    multiplier μ > 0, θᵢ = argmin_θ wᵢMSEᵢ(θ) + μ cᵢ(θ) (KKT; both terms are convex in
    u = log θ). The per-item problems are solved by safeguarded Newton steps in u
    (derivatives by central differences), μ by a secant search on (log μ, log Σcᵢ), which
    is linear for power-law families. The rules reduce to that form:

    * basic: cᵢ = εᵢ(θᵢ) (pure ε, or a Gaussian's ε at its δᵢ), B = ε;
    * zCDP: cᵢ = ρᵢ(θᵢ), B = the ρ whose (ε, δ) conversion is ε;
    * RDP: at each order α, cᵢ = εᵢ(α) and B(α) = ε − conversion(α) (Canonne, Kamath &
      Steinke 2020, Prop. 12); the feasible set is the union over α, so the optimum is the
      best α — searched on the order grid, then refined;
    * advanced (KOV Thm 3.5): Σ εᵢtanh(εᵢ/2) + h(S), S = Σεᵢ², h the better of the
      theorem's two square-root terms (:func:`~planner.privacy.accounting.kov_root_term`); h is
      replaced by its tangent at the current S (an upper bound, h being concave, so every
      iterate is feasible), cᵢ = εᵢtanh(εᵢ/2) + h′(S)εᵢ², iterated to a fixed point.
    """

    H = 1e-4

    def __init__(self, wl: _Workload, free: npt.NDArray[np.bool_]) -> None:
        self.wl = wl
        self.free = free

    def f(self, theta: FloatArray) -> FloatArray:
        """Weighted MSE wᵢ·MSEᵢ/sᵢ²; θ of shape (..., n)."""
        return _weighted(self.wl.w, self.wl.mse(theta))

    def rdp(self, th: FloatArray, alpha: FloatArray) -> FloatArray:
        return self.wl.rdp(th, alpha)

    def argmin(
        self,
        mu: FloatArray,
        cost: Callable[[FloatArray], FloatArray],
        u: FloatArray,
        rows: npt.NDArray[np.bool_] | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        """θ = argmin f + μ·c per item (free items of the active ``rows`` only change), by
        Newton in log θ.

        Returns ``(u, dtotal)``: u = log θ and, per row, d(Σ_free cᵢ)/d(log μ) at the
        solution (implicit differentiation of the stationarity condition f′ + μc′ = 0:
        du/d(log μ) = −μc′/(f″ + μc″)), which drives the multiplier's Newton step.
        """
        h = self.H
        free = self.free if rows is None else self.free & rows[:, None]
        shifts = np.array([-h, 0.0, h]).reshape((3,) + (1,) * u.ndim)
        dc = d2 = np.zeros_like(u)
        for _ in range(60):
            # the three stencil points in one batch (one call of each cost function)
            th = np.exp(u + shifts)
            fs, cs = self.f(th), cost(th)
            gm, g0, gp = fs + mu * cs
            dc = (cs[2] - cs[0]) / (2 * h)
            d1 = (gp - gm) / (2 * h)
            d2 = (gp - 2 * g0 + gm) / h**2
            with np.errstate(divide="ignore", invalid="ignore"):
                step = np.where(d2 > 0, -d1 / d2, -np.sign(d1) * 0.5)
            step = np.clip(np.nan_to_num(step), -2.0, 2.0)
            step = np.where(free, step, 0.0)
            u = u + step
            if float(np.max(np.abs(step))) < 1e-7:
                break
        with np.errstate(divide="ignore", invalid="ignore"):
            du = np.where(self.free & (d2 > 0), -mu * dc / d2, 0.0)
        return u, np.asarray(np.sum(np.nan_to_num(dc * du), axis=-1, keepdims=True))

    def solve(
        self, cost: Callable[[FloatArray], FloatArray], budget: FloatArray, u0: FloatArray
    ) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """For each row r, the u with Σ_free cᵢ = budget[r] at the KKT point; rows with
        budget ≤ 0 are marked infeasible.

        The multiplier is found by safeguarded Newton on log Σcᵢ − log budget as a function
        of log μ (decreasing): Newton steps from :meth:`argmin`'s derivative, kept inside
        the bracket found so far, bisection or a step of e² outside it.
        """
        free = self.free
        ok = budget > 0
        lb = np.log(np.where(ok, budget, 1.0))[:, None]

        def total(v: FloatArray) -> FloatArray:
            return np.asarray(np.sum(np.where(free, cost(np.exp(v)), 0.0), axis=-1, keepdims=True))

        # μ from the KKT ratio at the start point: μ = −f'(u)/c'(u), median over free items
        h = self.H
        th2 = np.exp(u0 + np.array([-h, h]).reshape((2,) + (1,) * u0.ndim))
        fm, fp = self.f(th2)
        cm, cp = cost(th2)
        df, dc = (fp - fm) / (2 * h), (cp - cm) / (2 * h)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(free & (dc > 0), -df / dc, np.nan)
            lmu = np.log(
                np.clip(
                    np.nan_to_num(np.nanmedian(ratio, axis=-1, keepdims=True), nan=1.0),
                    1e-300,
                    1e300,
                )
            )
        lo = np.full(lmu.shape, -np.inf)  # log μ known to give a total above the budget
        hi = np.full(lmu.shape, np.inf)  # ... and below it
        active = ok.copy()
        u = u0
        u_under = u0.copy()  # the last iterate under budget, for rows that never converge
        for _ in range(100):
            u, dtot = self.argmin(np.exp(lmu), cost, u, active)
            t = total(u)
            with np.errstate(divide="ignore", invalid="ignore"):
                fval = np.log(t) - lb
            u_under = np.where(active[:, None] & (fval < 0), u, u_under)
            lo = np.where(fval > 0, lmu, lo)
            hi = np.where(fval < 0, lmu, hi)
            # A per-item minimiser can jump between two local minima as μ moves (the RDP
            # of a clipped or two-part Laplace is not convex in log θ): the total then
            # skips over the budget and the bracket collapses without converging.
            collapsed = (hi[:, 0] - lo[:, 0]) < 1e-12 * np.maximum(1.0, np.abs(lmu[:, 0]))
            done = np.abs(fval[:, 0]) < 1e-9
            active = active & ~done & ~collapsed
            if not active.any():
                break
            with np.errstate(divide="ignore", invalid="ignore"):
                cand = lmu - np.clip(fval * t / dtot, -8.0, 8.0)
            inside = np.isfinite(cand) & (dtot < 0) & (cand > lo) & (cand < hi)
            bracketed = np.isfinite(lo) & np.isfinite(hi)
            fallback = np.where(bracketed, (lo + hi) / 2, np.where(fval > 0, lmu + 2.0, lmu - 2.0))
            lmu = np.where(active[:, None], np.where(inside, cand, fallback), lmu)
        # rows left over budget (collapsed bracket or out of iterations) take their last
        # iterate under budget: feasible, a little below the budget
        over = ok & ~(np.abs(fval[:, 0]) < 1e-9) & (fval[:, 0] > 0) & np.isfinite(hi[:, 0])
        return np.where(over[:, None], u_under, u), ok
