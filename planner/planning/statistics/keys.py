"""Count by key over keys that are NOT declared: DP partition selection.

"How many rows per ZIP code" when the owner cannot list the ZIP codes: the keys
themselves are private (a key held by one person reveals that person). The release adds
discrete Laplace noise of scale s to every key's count and shows only the keys whose noisy
count reaches a threshold T (OpenDP's ``make_laplace_threshold``; Rogers 2023, "A
Unifying Privacy Analysis Framework for Unknown Domain Algorithms in Differential
Privacy"; Korolova, Kenthapadi, Mishra & Ntoulas 2009 for the idea). A key with few rows
is rarely shown; the chance that a key held by one person crosses T is the δ this query
costs besides its ε.

Sensitivity (c = rows per privacy unit). A unit's rows touch at most l0 keys, change the
counts by at most l1 in all and by at most l∞ in one key:

=============  =====  =====  =====
relation        l0     l1     l∞
=============  =====  =====  =====
add/remove      c      c      c
substitute      2c     2c     c
=============  =====  =====  =====

Proof. Add/remove: the unit's ≤ c rows each add 1 to one key. Substitute: the removed
rows (≤ c) lower ≤ c keys and the added rows (≤ c) raise ≤ c keys, 2c changes in all;
in one key the change is (added there) − (removed there), between −c and c. ∎

Cost. ε = l1/s (OpenDP's map). δ: a key that only the neighbour holds has a count ≤ l∞
there and is shown with probability P[l∞ + Z ≥ T] = P[Z ≥ T − l∞] = r^{T−l∞}/(1 + r),
r = e^{−1/s} (the discrete Laplace tail, exact); with ≤ l0 such keys,
δ = 1 − (1 − r^{T−l∞}/(1 + r))^{l0}. Conditioned on none of them being shown, the output
is the thresholded noisy counts of the keys both neighbours hold, a post-processing of an
ε-DP vector: the release is a δ-mixture of an ε-DP pair
(:class:`~planner.privacy.events.ThresholdedEvent`), so δ adds up under every rule. OpenDP 0.16's
own map reports the tail P[Z > T − l∞] instead, one integer short (opendp/opendp issue
#2922); the planner charges the correct δ, which is OpenDP's map at T − 1
(:class:`planner.privacy.noise.ThresholdComponent`), and a test measures the keep rate.

The threshold is the least T whose δ is at most the query's key δ (option ``key_delta``).
Prediction: a shown key's count carries discrete Laplace noise of scale s (the RMSE and
95% bound shown); a key of k rows is shown with probability P[k + Z ≥ T]
(:func:`keep_probability`), which the pages show before release. A shown key near the
threshold is biased upwards (it was shown because its noise was high); keys well above T
are not.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np

from planner.core.errors import QueryError
from planner.data import requests as rq
from planner.data.requests import KeyCounts
from planner.data.schema import ColumnKind, Relation, Schema
from planner.planning.mechanisms.base import MechanismName, Sensitivity
from planner.planning.queries import Query, QueryKind, QueryPart
from planner.planning.statistics import _additive as add
from planner.planning.statistics.base import (
    Aggregate,
    AnswerRow,
    FloatArray,
    ItemRelease,
    MechanismSpec,
    OptionSpec,
    OptionType,
    Part,
    Prediction,
    Statistic,
    one_draw,
    share_epsilon,
    wrong_aggregate,
)
from planner.privacy.budget import CompositionRule

if TYPE_CHECKING:
    from planner.core.strict_json import JSON
    from planner.data.backends.base import Backend
    from planner.planning.allocation import ItemAllocation

M = MechanismName
#: Default δ of the key release: the chance a key held by one person is shown.
DEFAULT_KEY_DELTA: Final = 1e-7
#: The threshold is chosen so the key δ holds with this relative room: OpenDP's map rounds
#: its arithmetic up by a few ulps, and the recorded δ must never exceed the planned one.
_MARGIN: Final = 1e-6

KEY_DELTA = OptionSpec(
    "key_delta", OptionType.FLOAT, "Key δ",
    "The chance that a key held by one person is shown (the δ this query spends besides its ε). "
    "Smaller values raise the threshold: fewer rare keys are shown.",
    default=DEFAULT_KEY_DELTA, minimum=0.0, maximum=0.01, open_bounds=True,
)
SPEC: Final = MechanismSpec(
    M.DISCRETE_LAPLACE, "Discrete Laplace with a threshold",
    "Integer noise on every key's count; only keys whose noisy count reaches the threshold are shown "
    "(OpenDP's make_laplace_threshold). Costs ε and the key δ.",
)


def key_sensitivity(schema: Schema) -> tuple[int, int, int]:
    """(l0, l1, l∞) of the key counts under the schema's relation and c (module docstring)."""
    c = schema.c
    return (2 * c, 2 * c, c) if schema.relation is Relation.SUBSTITUTE else (c, c, c)


def _tail(scale: float, m: int) -> float:
    """P[Z ≥ m] for Z discrete Laplace of scale s: r^m/(1 + r) for m ≥ 1 (r = e^{−1/s}),
    1 − r^{1−m}/(1 + r) for m ≤ 0 (symmetry)."""
    lr = -1.0 / scale
    if m >= 1:
        return math.exp(m * lr - math.log1p(math.exp(lr)))
    return -math.expm1((1 - m) * lr - math.log1p(math.exp(lr)))


def key_delta_at(scale: float, threshold: int, d_in: tuple[int, int, int]) -> float:
    """The δ of the key release at ``threshold``: 1 − (1 − P[Z ≥ T − l∞])^{l0}."""
    l0, _, li = d_in
    p = _tail(scale, threshold - li)
    return -math.expm1(l0 * math.log1p(-p)) if p < 1.0 else 1.0


def key_threshold(scale: float, key_delta: float, d_in: tuple[int, int, int]) -> int:
    """The least integer threshold T ≥ l∞ + 1 whose δ is ≤ ``key_delta`` (with a relative
    room of 1e-6 for OpenDP's rounding).

    Examples
    --------
    Scale 2, one row per person, key δ 5e-5: P[Z ≥ m] = e^{−m/2}/(1 + e^{−1/2}) ≤ 5e-5
    first at m = 19 (4.66e-5; m = 18 gives 7.68e-5), so T = 1 + 19 (by hand):

    >>> key_threshold(2.0, 5e-5, (1, 1, 1))
    20
    """
    if not (0.0 < key_delta < 1.0) or not (scale > 0.0 and math.isfinite(scale)):
        raise QueryError(f"the key δ must be in (0, 1) and the scale > 0; got {key_delta}, {scale}.")
    l0, _, li = d_in
    target = key_delta * (1.0 - _MARGIN)
    per_key = -math.expm1(math.log1p(-target) / l0)
    lr = -1.0 / scale
    m = max(math.ceil((math.log(per_key) + math.log1p(math.exp(lr))) / lr), 1)
    while m > 1 and key_delta_at(scale, li + m - 1, d_in) <= target:
        m -= 1
    while key_delta_at(scale, li + m, d_in) > target:
        m += 1
    return li + m


def keep_probability(scale: float, threshold: int, rows: float) -> float:
    """P[a key of ``rows`` rows is shown] = P[rows + Z ≥ T].

    Examples
    --------
    >>> round(keep_probability(2.0, 20, 20), 4)  # P[Z ≥ 0] = 1/(1 + e^{−1/2}), by hand
    0.6225
    """
    return _tail(scale, int(threshold) - math.floor(rows))


def keep_table(pred: Prediction, rows: tuple[int, ...] | None = None) -> list[tuple[int, float]]:
    """(k, P[a key of k rows is shown]) for the prediction's scale and threshold: by default
    1 row, the threshold ± 2 scales, and the least k shown with probability ≥ 95%."""
    s, t = pred.noise["laplace_scale"], int(pred.noise["threshold"])
    if rows is None:
        rows = tuple(sorted({1, max(t - math.ceil(2 * s), 1), t, t + math.ceil(2 * s),
                             int(pred.noise["rows_shown_95pct"])}))
    return [(k, keep_probability(s, t, k)) for k in rows]


def _key_delta(q: Query) -> float:
    v = q.option("key_delta")
    return float(v) if v is not None else DEFAULT_KEY_DELTA


class KeyCount(Statistic):
    """Count by key over undeclared keys (module docstring)."""

    kind: ClassVar[QueryKind] = QueryKind.KEY_COUNT
    label: ClassVar[str] = "Count by key (keys not declared)"
    summary: ClassVar[str] = ("Rows per value of a column whose values you cannot list (ZIP code, product id); "
                              "only keys with enough rows are shown.")
    mechanisms = (SPEC,)
    column_kinds: ClassVar[frozenset[ColumnKind | None]] = frozenset({ColumnKind.KEY})
    column_hint: ClassVar[str] = "a key column (values not declared)"
    options = (KEY_DELTA,)
    linear = False

    def notes(self, q: Query, schema: Schema) -> tuple[str, ...]:
        return (f"Keys of {q.column!r} are not declared: a key is shown only when its noisy count reaches the "
                f"threshold, so a key held by one person is shown with probability at most the key δ "
                f"({_key_delta(q):g}). Shown counts near the threshold lean high.",)

    def parts(self, q: Query, schema: Schema) -> tuple[QueryPart, ...]:
        _, l1, _ = key_sensitivity(schema)
        return (QueryPart("keys", Sensitivity(float(l1), float(l1))),)

    def unit(self, q: Query, schema: Schema) -> str:
        return "rows per shown key"

    def items(self, q: Query, schema: Schema, weight: float, scale: float) -> list[Part]:
        _, l1, _ = key_sensitivity(schema)
        item = add.item(q.id, M.DISCRETE_LAPLACE, Sensitivity(float(l1), float(l1)), weight, scale)
        return [Part(q, replace(item, delta=_key_delta(q)), "keys")]

    def _scale(self, share: ItemAllocation, schema: Schema) -> float:
        return key_sensitivity(schema)[1] / share_epsilon(share)

    def predict(self, part: Part, share: ItemAllocation, schema: Schema, rule: CompositionRule) -> Prediction:
        q = part.query
        s = self._scale(share, schema)
        d_in = key_sensitivity(schema)
        t = key_threshold(s, _key_delta(q), d_in)
        pred = add.predict(part, share, M.DISCRETE_LAPLACE, Sensitivity(float(d_in[1]), float(d_in[1])),
                           self.unit(q, schema), component="keys")
        # shown with the prediction on the pages: the threshold, the key δ, and the rows a
        # key needs to be shown 95% of the time
        k95 = t + next(m for m in range(10**7) if _tail(s, -m) >= 0.95)
        noise = {**pred.noise, "threshold": float(t), "key_delta": key_delta_at(s, t, d_in),
                 "rows_shown_95pct": float(k95)}
        return replace(pred, noise=noise)

    def check_backend(self, q: Query, backend: Backend) -> None:
        if not backend.counts_keys:
            raise QueryError(
                f"{q.where}: the {type(backend).__name__} cannot count rows per key yet; release key counts with "
                "the pandas engine (--backend pandas, or 'pandas' on the Data page). Nothing was spent."
            )

    def requests(self, q: Query, schema: Schema) -> tuple[rq.Request[Any], ...]:
        return (rq.Keys(q.column or ""),)

    def release(self, part: Part, share: ItemAllocation, pred: Prediction, schema: Schema,
                rule: CompositionRule) -> ItemRelease:
        from planner.privacy.noise import (
            laplace_threshold,  # OpenDP is imported on the first release only
        )

        q = part.query
        d_in = key_sensitivity(schema)
        s = self._scale(share, schema)
        t = key_threshold(s, _key_delta(q), d_in)
        comp = laplace_threshold("keys", d_in, s, t)

        def answer(agg: Aggregate) -> dict[str, JSON]:
            if not isinstance(agg, KeyCounts):
                raise wrong_aggregate(q, agg)
            shown = comp.invoke(agg.as_dict())
            keys = sorted(shown)
            return {"keys": list(keys), "counts": [float(shown[k]) for k in keys], "threshold": t}

        return ItemRelease(part, share, pred, (one_draw(part, share, [comp]),), answer, comp.constructor)

    def answer_rows(self, q: Query, answer: JSON) -> tuple[AnswerRow, ...]:
        if not isinstance(answer, dict) or not isinstance(answer.get("keys"), list):
            return ()
        keys, counts = answer["keys"], answer.get("counts")
        assert isinstance(keys, list) and isinstance(counts, list)
        return tuple(AnswerRow("", str(k), float(v) if isinstance(v, (int, float)) else None)
                     for k, v in zip(keys, counts, strict=True))

    def simulate(self, pred: Prediction, q: Query, schema: Schema, agg: Aggregate, runs: int,
                 rng: np.random.Generator) -> FloatArray:
        """The error of each key's count where it is shown, NaN where it is not (shape
        (runs, keys)); numpy draws of the same discrete Laplace noise and threshold."""
        if not isinstance(agg, KeyCounts):
            raise wrong_aggregate(q, agg)
        true = np.asarray(agg.counts, dtype=np.float64)
        noise = add.simulate(M.DISCRETE_LAPLACE, true, pred.scales["keys"], runs, rng)
        shown = true + noise >= pred.noise["threshold"]
        return np.asarray(np.where(shown, noise, np.nan), dtype=np.float64)


__all__ = ["DEFAULT_KEY_DELTA", "KeyCount", "keep_probability", "keep_table", "key_delta_at", "key_sensitivity",
           "key_threshold"]
