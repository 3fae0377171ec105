"""Domain compression from noisy 1-way marginals (MST's ``compress_domain``).

Categories whose noisy count is below ``threshold``·σ are merged into one "rare" category
per column [MMS21, §3.2]; later marginals are measured over the compressed domain (fewer
cells, so less total noise), and synthetic records are mapped back by drawing, inside the
rare category, an original category with probability ∝ max(ŷ_v, 0) + τ (τ > 0 spreads
mass uniformly when every noisy count is ≤ 0). Everything here reads only noisy outputs:
post-processing.

References
----------
.. [MMS21] R. McKenna, G. Miklau, D. Sheldon, "Winning the NIST Contest: A scalable and
   general approach to differentially private synthetic data", J. Privacy and
   Confidentiality 11(3), 2021, arXiv:2108.04978, §3.2 ("compress domain").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.planning.synth.domain import Domain, FloatArray, IntArray
from planner.planning.synth.inference import NoisyMarginal
from planner.planning.synth.sample import Sampler, stratified_rows


@dataclass(frozen=True)
class Compression:
    """Per-column maps from original codes to compressed codes, and back.

    Attributes
    ----------
    original, compressed : Domain
    maps : tuple of ndarray
        ``maps[j][v]`` is the compressed code of original code v of column j.
    rare : tuple of ndarray
        Original codes merged into the last compressed code of column j (empty: none).
    rare_weights : tuple of ndarray
        Probability of each code in ``rare[j]`` when decoding.
    """

    original: Domain
    compressed: Domain
    maps: tuple[IntArray, ...]
    rare: tuple[IntArray, ...]
    rare_weights: tuple[FloatArray, ...]

    def encode(self, records: IntArray) -> IntArray:
        """Original codes → compressed codes (column by column)."""
        return np.stack([self.maps[j][records[:, j]] for j in range(len(self.maps))], axis=1)

    def encode_counts(self, j: int, counts: FloatArray, axis: int = 0) -> FloatArray:
        """Sum the counts of a table along ``axis`` (column j) into compressed codes."""
        k = self.compressed.sizes[j]
        moved = np.moveaxis(np.asarray(counts, dtype=np.float64), axis, 0)
        out = np.zeros((k, *moved.shape[1:]))
        np.add.at(out, self.maps[j], moved)
        return np.moveaxis(out, 0, axis)

    def decode(self, records: IntArray, rng: np.random.Generator,
               sampler: Sampler | str = Sampler.STRATIFIED) -> IntArray:
        """Compressed codes → original codes; rare codes drawn from ``rare_weights``, by
        the records' ``sampler`` (:mod:`planner.planning.synth.sample`): i.i.d., or the
        systematic rounding of the rare records' count over the weights, dealt in a random
        order (the model makes the original code independent of the other columns given
        the rare code, which the random order keeps)."""
        how = Sampler(sampler)
        out = np.empty_like(records)
        for j, mp in enumerate(self.maps):
            k = self.compressed.sizes[j]
            inv = np.zeros(k, dtype=np.int64)
            for v, c in enumerate(mp):
                inv[c] = v  # unique for supported codes
            col = inv[records[:, j]]
            if self.rare[j].size:
                hit = records[:, j] == k - 1
                h = int(hit.sum())
                if how is Sampler.IID:
                    col[hit] = rng.choice(self.rare[j], size=h, p=self.rare_weights[j])
                else:
                    col[hit] = self.rare[j][stratified_rows(self.rare_weights[j][None, :], np.zeros(h, np.int64), rng)]
            out[:, j] = col
        return out


def identity(domain: Domain) -> Compression:
    """No compression."""
    e = np.zeros(0, dtype=np.int64)
    return Compression(
        domain, domain, tuple(np.arange(k, dtype=np.int64) for k in domain.sizes), tuple(e for _ in domain.sizes),
        tuple(np.zeros(0) for _ in domain.sizes),
    )


def compress(
    domain: Domain, noisy_one_way: Sequence[FloatArray], sigmas: Sequence[float], threshold: float = 3.0,
    smoothing: float = 1.0,
) -> tuple[Compression, list[NoisyMarginal]]:
    """Compress every column and re-express its 1-way measurement on the new domain.

    Parameters
    ----------
    domain : Domain
    noisy_one_way : sequence of ndarray
        Noisy 1-way counts of each column (same order as the domain).
    sigmas : sequence of float
        Their noise standard deviations.
    threshold : float
        A category is kept when its noisy count is ≥ threshold·σ (MST uses 3).
    smoothing : float
        τ, in units of σ, added to max(ŷ, 0) for the decoding weights of rare codes.

    Returns
    -------
    Compression, list of NoisyMarginal
        The maps, and the 1-way measurements over the compressed domain: kept cells with
        their σ, the rare cell as the sum of the merged noisy counts with σ·√m.

    Examples
    --------
    >>> c, ms = compress(Domain.from_sizes([4]), [np.array([50.0, 1.0, 40.0, -2.0])], [10.0])
    >>> c.compressed.sizes, c.maps[0].tolist(), ms[0].values.tolist()
    ((3,), [0, 2, 1, 2], [50.0, 40.0, -1.0])
    """
    maps, rare, weights, sizes, meas = [], [], [], [], []
    for j, (y, s) in enumerate(zip(noisy_one_way, sigmas, strict=True)):
        y = np.asarray(y, dtype=np.float64)
        keep = y >= threshold * s
        if keep.all() or (~keep).sum() < 2:
            maps.append(np.arange(y.size, dtype=np.int64))
            rare.append(np.zeros(0, dtype=np.int64))
            weights.append(np.zeros(0))
            sizes.append(y.size)
            meas.append(NoisyMarginal((j,), y, s))
            continue
        kept = np.flatnonzero(keep)
        merged = np.flatnonzero(~keep)
        mp = np.full(y.size, kept.size, dtype=np.int64)
        mp[kept] = np.arange(kept.size)
        w = np.maximum(y[merged], 0.0) + smoothing * s
        maps.append(mp)
        rare.append(merged)
        weights.append(w / w.sum())
        sizes.append(kept.size + 1)
        vals = np.append(y[kept], y[merged].sum())
        sig = np.append(np.full(kept.size, s), s * np.sqrt(merged.size))
        meas.append(NoisyMarginal((j,), vals, sig))
    comp = Domain(domain.names, tuple(sizes))
    return Compression(domain, comp, tuple(maps), tuple(rare), tuple(weights)), meas
