"""Per-group first and second moments, computed chunk by chunk and merged exactly.

The PCA family — vanilla PCA, Fair PCA, JEVD-PCA, covFairPCA — and its per-group metrics (error,
loss, variance explained, linear MMD²) depend on the data only through, for each group ``g``,

* the (weighted) row count ``n_g``,
* the mean ``μ_g``,
* the centred scatter ``S_g = Σ_{x ∈ g} w_x (x − μ_g)(x − μ_g)ᵀ``.

:class:`GroupMoments` holds these three arrays. Two summaries of disjoint row sets merge exactly
with the pairwise update of Chan, Golub & LeVeque (1979)::

    n = n_a + n_b,   δ = μ_b − μ_a,   μ = μ_a + δ n_b / n,   S = S_a + S_b + δ δᵀ n_a n_b / n

which is associative and numerically stable (no ``Σ x xᵀ − n μ μᵀ`` cancellation), so any
chunking of the rows — a file read in blocks, the partitions of a distributed data set — gives
the same moments up to rounding. Within one chunk the scatter is computed two-pass (mean first,
then the centred product).

Bootstrap replicates of data that are never held whole (the dask engine) use the Poisson
bootstrap: every row gets an independent Poisson(1) weight per replicate, so each partition draws
its own weights and a replicate's moments merge like any others
(:meth:`GroupMoments.poisson_replicates`). As ``n`` grows, a group's Poisson weights are the
multinomial counts of a resample of it (Hanley & MacGibbon 2006; Chamandy et al. 2012).

References
----------
T. F. Chan, G. H. Golub, R. J. LeVeque. "Updating formulae and a pairwise algorithm for computing
sample variances". Technical Report STAN-CS-79-773, Stanford University, 1979.
J. A. Hanley, B. MacGibbon. "Creating non-parametric bootstrap samples using Poisson
frequencies". Computer Methods and Programs in Biomedicine 83(1), 2006.
N. Chamandy, O. Muralidharan, A. Najmi, S. Naidu. "Estimating uncertainty for massive data
streams". Google technical report, 2012.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

CHUNK_ROWS = 65_536
"""Rows per block when :meth:`GroupMoments.from_rows` walks a large in-memory matrix: bounds the
temporary copies (a gathered, centred block per group) to a few MB per feature."""


REPLICATE_BLOCK_VALUES = 1 << 21
"""Values per temporary block of :meth:`GroupMoments.poisson_replicates` (the rows' pairwise
products): 16 MB, whatever the number of features."""


def pairwise_tree(items: list, combine):
    """``items`` reduced pairwise, level by level, by ``combine(a, b)`` (a merge here, a delayed or
    submitted one in the dask engine): a fixed tree, so the rounding is the same whatever order
    the parts arrive in (errors O(log p)), and each input can be freed once merged."""
    while len(items) > 1:
        items = [combine(items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
    return items[0]


@dataclass(frozen=True)
class GroupMoments:
    """Count, mean and centred scatter of each group's rows.

    Attributes
    ----------
    counts : ndarray (k,)
        Row counts ``n_g`` (sums of row weights when weights were given).
    means : ndarray (k, d)
        Group means ``μ_g`` (zeros for an empty group).
    scatter : ndarray (k, d, d)
        ``S_g = Σ w (x − μ_g)(x − μ_g)ᵀ`` (symmetric, positive semi-definite).
    labels : tuple of str
        Group names, in code order.
    """

    counts: np.ndarray
    means: np.ndarray
    scatter: np.ndarray
    labels: tuple[str, ...]

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(cls, n_groups: int, n_features: int, labels=None) -> GroupMoments:
        return cls(
            np.zeros(n_groups),
            np.zeros((n_groups, n_features)),
            np.zeros((n_groups, n_features, n_features)),
            _labels(labels, n_groups),
        )

    @classmethod
    def from_rows(cls, X, codes, *, n_groups: int | None = None, weights=None, labels=None, blocks: RowBlocks | None = None) -> GroupMoments:
        """The moments of the rows of ``X`` grouped by ``codes`` (integers ``0 … k−1``).

        ``weights`` (optional, one non-negative number per row) weights every row: e.g. the
        multinomial counts of a bootstrap resample, which then never has to be materialised.
        A large ``X`` is processed in blocks of :data:`CHUNK_ROWS` rows merged exactly.
        ``blocks``: those blocks' group order, found once (:class:`RowBlocks`) for passes over
        the same rows with new weights — the same moments, bit for bit.
        """
        X = np.asarray(X, dtype=float)
        codes = np.asarray(codes, dtype=np.intp)
        if X.ndim != 2 or codes.shape != (X.shape[0],):
            raise ValueError(f"X must be 2-D with one code per row; got X {X.shape}, codes {codes.shape}")
        k = int(n_groups if n_groups is not None else (codes.max() + 1 if codes.size else 0))
        if codes.size and (codes.min() < 0 or codes.max() >= k):
            raise ValueError(f"group codes must lie in 0 … {k - 1}")
        if weights is not None:
            weights = np.asarray(weights, dtype=float)
            if weights.shape != codes.shape or (weights < 0).any() or not np.isfinite(weights).all():
                raise ValueError("weights must be finite, non-negative and one per row")
        if blocks is None or blocks.n_rows != codes.shape[0] or blocks.n_groups != k:
            blocks = RowBlocks.of(codes, k)
        parts = [
            cls._from_block(X[s : s + CHUNK_ROWS], k, None if weights is None else weights[s : s + CHUNK_ROWS], labels, order, bounds)
            for s, order, bounds in zip(range(0, X.shape[0], CHUNK_ROWS), blocks.orders, blocks.bounds, strict=True)
        ]
        return cls.merge_all(parts) if parts else cls.empty(k, X.shape[1], labels)

    @classmethod
    def _from_block(cls, X, k, weights, labels, order, bounds) -> GroupMoments:
        d = X.shape[1]
        counts = np.zeros(k)
        means = np.zeros((k, d))
        scatter = np.zeros((k, d, d))
        for g in range(k):
            rows = order[bounds[g] : bounds[g + 1]]
            if rows.size == 0:
                continue
            block = X[rows]
            if weights is None:
                counts[g] = rows.size
                means[g] = block.mean(axis=0)
                centred = block - means[g]
                scatter[g] = centred.T @ centred
            else:
                w = weights[rows]
                counts[g] = w.sum()
                if counts[g] == 0:
                    continue
                means[g] = w @ block / counts[g]
                centred = block - means[g]
                scatter[g] = (centred * w[:, None]).T @ centred
            scatter[g] = (scatter[g] + scatter[g].T) / 2
        return cls(counts, means, scatter, _labels(labels, k))

    @classmethod
    def from_grouped(cls, X, bounds, *, labels=None) -> GroupMoments:
        """The moments of rows already sorted by group: group ``g`` is ``X[bounds[g]:bounds[g + 1]]``.

        The same two-pass blocks of :data:`CHUNK_ROWS` rows merged exactly as :meth:`from_rows`,
        on views of ``X`` (no gathered copy of each group's rows)."""
        X = np.asarray(X, dtype=float)
        merged = []
        for g in range(len(bounds) - 1):
            parts = []
            for start in range(int(bounds[g]), int(bounds[g + 1]), CHUNK_ROWS):
                block = X[start : min(start + CHUNK_ROWS, int(bounds[g + 1]))]
                mean = block.mean(axis=0)
                centred = block - mean
                product = centred.T @ centred
                parts.append(cls(np.array([float(block.shape[0])]), mean[None, :], ((product + product.T) / 2)[None], ("0",)))
            merged.append(cls.merge_all(parts) if parts else None)
        return cls._of_groups(merged, X.shape[1], labels)

    @classmethod
    def _of_groups(cls, merged: list, d: int, labels=None) -> GroupMoments:
        """Group ``g`` the one group of ``merged[g]`` (``None``: an empty group)."""
        k = len(merged)
        counts, means, scatter = np.zeros(k), np.zeros((k, d)), np.zeros((k, d, d))
        for g, found in enumerate(merged):
            if found is not None:
                counts[g], means[g], scatter[g] = found.counts[0], found.means[0], found.scatter[0]
        return cls(counts, means, scatter, _labels(labels, k))

    @classmethod
    def poisson_replicates(cls, X, bounds, rng: np.random.Generator, replicates: int) -> GroupMoments:
        """``replicates`` Poisson-bootstrap replicates of :meth:`from_grouped`'s moments at once:
        group ``b·k + g`` holds group ``g``'s moments in replicate ``b``, each row weighted by an
        independent Poisson(1) draw (from ``rng``, group by group in row order: the same rows and
        seed give the same weights).

        Each block of rows is centred at its own (unweighted) mean, so the weighted scatters are
        one matrix product of the weights with the rows' pairwise products, ``W (y_i y_iᵀ)`` (the
        upper triangle), less the small correction of the weighted mean; blocks merge exactly
        (:meth:`merge`) as they come, so memory holds one block's ``B`` scatters besides the result. Cost: ``replicates · rows · d(d+1)/2`` multiply-adds, as many weighted
        passes would take, in one BLAS call per block."""
        X = np.asarray(X, dtype=float)
        k, d, B = len(bounds) - 1, X.shape[1], int(replicates)
        upper = np.triu_indices(d)
        step = max(16, min(CHUNK_ROWS, REPLICATE_BLOCK_VALUES // max(len(upper[0]), B)))
        counts, means, scatter = np.zeros((B, k)), np.zeros((B, k, d)), np.zeros((B, k, d, d))
        for g in range(k):
            merged = None  # merged block by block: one block's B × d × d scatters in memory at a time
            for start in range(int(bounds[g]), int(bounds[g + 1]), step):
                block = X[start : min(start + step, int(bounds[g + 1]))]
                part = cls._weighted_replicates(block, rng.poisson(1.0, (B, block.shape[0])).astype(float), upper)
                merged = part if merged is None else merged.merge(part)
            if merged is not None:
                counts[:, g], means[:, g], scatter[:, g] = merged.counts, merged.means, merged.scatter
        return cls(counts.reshape(B * k), means.reshape(B * k, d), scatter.reshape(B * k, d, d), _labels(None, B * k))

    @classmethod
    def _weighted_replicates(cls, block: np.ndarray, W: np.ndarray, upper) -> GroupMoments:
        """The moments of ``block`` under each row of weights ``W`` (``B × m``): ``B`` groups."""
        B, d = W.shape[0], block.shape[1]
        centre = block.mean(axis=0)
        Y = block - centre
        counts = W.sum(axis=1)
        shifts = np.divide(W @ Y, counts[:, None], out=np.zeros((B, d)), where=counts[:, None] > 0)
        second = W @ _upper_products(Y)
        scatter = np.empty((B, d, d))
        scatter[:, upper[0], upper[1]] = second
        scatter[:, upper[1], upper[0]] = second
        scatter -= counts[:, None, None] * (shifts[:, :, None] * shifts[:, None, :])
        means = np.where(counts[:, None] > 0, centre + shifts, 0.0)
        return cls(counts, means, np.where(counts[:, None, None] > 0, scatter, 0.0), _labels(None, B))

    def replicate(self, b: int, n_groups: int, labels=None) -> GroupMoments:
        """Replicate ``b`` of :meth:`poisson_replicates`' stacked moments (``n_groups`` per replicate)."""
        return self._part(slice(b * n_groups, (b + 1) * n_groups), labels)

    def _part(self, groups: slice, labels=None) -> GroupMoments:
        """The moments of a contiguous range of these groups."""
        return GroupMoments(self.counts[groups], self.means[groups], self.scatter[groups], _labels(labels, len(self.counts[groups])))

    @classmethod
    def from_chunks(cls, chunks: Iterable[tuple], *, n_groups: int, labels=None) -> GroupMoments:
        """Moments of a stream of ``(X_chunk, codes_chunk)`` or ``(X_chunk, codes_chunk, weights)``."""
        parts = [cls.from_rows(*chunk[:2], n_groups=n_groups, weights=chunk[2] if len(chunk) > 2 else None, labels=labels)
                 for chunk in chunks]
        if not parts:
            raise ValueError("no chunks: the moments of an empty stream are undefined")
        return cls.merge_all(parts)

    # ------------------------------------------------------------------ merging
    def merge(self, other: GroupMoments) -> GroupMoments:
        """The moments of the union of the two row sets (Chan et al.'s pairwise update)."""
        if self.scatter.shape != other.scatter.shape:
            raise ValueError(f"cannot merge moments of shapes {self.scatter.shape} and {other.scatter.shape}")
        n_a, n_b = self.counts, other.counts
        n = n_a + n_b
        share_b = np.divide(n_b, n, out=np.zeros_like(n), where=n > 0)
        delta = other.means - self.means
        means = self.means + delta * share_b[:, None]
        cross = np.divide(n_a * n_b, n, out=np.zeros_like(n), where=n > 0)
        scatter = self.scatter + other.scatter + cross[:, None, None] * (delta[:, :, None] * delta[:, None, :])
        labels = self.labels if self.labels == other.labels else _labels(None, len(n))
        return GroupMoments(n, means, scatter, labels)

    @staticmethod
    def merge_all(parts: Iterable[GroupMoments]) -> GroupMoments:
        """Merge many summaries (pairwise tree order keeps rounding errors at O(log p))."""
        parts = list(parts)
        if not parts:
            raise ValueError("nothing to merge")
        return pairwise_tree(parts, GroupMoments.merge)

    def regroup(self, group_of, n_groups: int, labels=None) -> GroupMoments:
        """The moments of ``n_groups`` new groups, each the union of some of these: ``group_of[i]``
        is the new group of group ``i`` (``-1``: left out) — e.g. the dask engine's keys
        (combinations of raw sensitive values) gathered into the audit's groups. Each new group's
        members merge in a pairwise tree (:meth:`merge_all`), in their order here."""
        group_of = np.asarray(group_of)
        merged = []
        for g in range(n_groups):
            members = np.flatnonzero(group_of == g)
            merged.append(GroupMoments.merge_all(self._part(slice(i, i + 1)) for i in members) if members.size else None)
        return GroupMoments._of_groups(merged, self.n_features, labels)

    # ------------------------------------------------------------------ derived quantities
    @property
    def n_groups(self) -> int:
        return self.counts.shape[0]

    @property
    def n_features(self) -> int:
        return self.means.shape[1]

    @property
    def total(self) -> float:
        return float(self.counts.sum())

    @property
    def global_mean(self) -> np.ndarray:
        """``μ = Σ_g n_g μ_g / n``."""
        return self.counts @ self.means / max(self.total, np.finfo(float).tiny)

    def covariances(self, centre=None) -> np.ndarray:
        """``C_g = A_gᵀA_g / n_g`` for the rows of group ``g`` centred by the *global* mean
        (the PCA family's convention, Samadi et al. 2018 §6): ``S_g / n_g + (μ_g − μ)(μ_g − μ)ᵀ``;
        by ``centre`` instead of ``μ`` when given (rows measured against a mean fitted elsewhere)."""
        offsets = self.centred_means(centre)
        counts = np.where(self.counts > 0, self.counts, 1.0)
        C = self.scatter / counts[:, None, None] + offsets[:, :, None] * offsets[:, None, :]
        return (C + np.swapaxes(C, 1, 2)) / 2

    def centred_means(self, centre=None) -> np.ndarray:
        """``μ_g − μ``: each group's mean relative to the global mean (or to ``centre``)."""
        return self.means - (self.global_mean if centre is None else np.asarray(centre, dtype=float))

    def affine(self, shift: np.ndarray, scale: np.ndarray) -> GroupMoments:
        """The moments of ``(x − shift) · scale`` (per-feature shift and scale)."""
        shift = np.asarray(shift, dtype=float)
        scale = np.asarray(scale, dtype=float)
        return GroupMoments(
            self.counts.copy(),
            (self.means - shift) * scale,
            self.scatter * scale[None, :, None] * scale[None, None, :],
            self.labels,
        )

    def allclose(self, other: GroupMoments, *, rtol: float = 1e-9, atol: float = 1e-9) -> bool:
        """Equal up to rounding (scatter compared relative to its largest entry)."""
        scale = max(1.0, float(np.abs(self.scatter).max(initial=0.0)))
        return (
            np.allclose(self.counts, other.counts, rtol=rtol, atol=atol)
            and np.allclose(self.means, other.means, rtol=rtol, atol=atol)
            and np.allclose(self.scatter / scale, other.scatter / scale, rtol=rtol, atol=atol)
        )


@dataclass(frozen=True)
class RowBlocks:
    """The blocks of :data:`CHUNK_ROWS` rows that :meth:`GroupMoments.from_rows` walks, each
    with its rows in group order (a stable sort of the block's codes) and where each group
    starts: found once for many passes over the same rows (every bootstrap replicate reweights
    them; the sorts were a quarter of a replicate's moments at 1,000,000 rows)."""

    orders: tuple[np.ndarray, ...]
    bounds: tuple[np.ndarray, ...]
    n_rows: int
    n_groups: int

    @classmethod
    def of(cls, codes, n_groups: int) -> RowBlocks:
        codes = np.asarray(codes, dtype=np.intp)
        orders, bounds = [], []
        for s in range(0, codes.shape[0], CHUNK_ROWS):
            block = codes[s : s + CHUNK_ROWS]
            order = np.argsort(block, kind="stable")
            bounds.append(np.searchsorted(block[order], np.arange(n_groups + 1)))
            orders.append(order.astype(np.int32))  # block-relative: half the memory of intp
        return cls(tuple(orders), tuple(bounds), int(codes.shape[0]), int(n_groups))


def _upper_products(Y: np.ndarray) -> np.ndarray:
    """``Y[:, i] · Y[:, j]`` for ``i ≤ j`` in :func:`numpy.triu_indices` order, one column
    slice at a time (a gather by index is 25× slower)."""
    m, d = Y.shape
    Y = np.asfortranarray(Y)
    products = np.empty((m, d * (d + 1) // 2), order="F")
    start = 0
    for i in range(d):
        np.multiply(Y[:, i : i + 1], Y[:, i:], out=products[:, start : start + d - i])
        start += d - i
    return products


def _labels(labels, k: int) -> tuple[str, ...]:
    if labels is None:
        return tuple(str(g) for g in range(k))
    labels = tuple(str(label) for label in labels)
    if len(labels) != k:
        raise ValueError(f"{len(labels)} labels for {k} groups")
    return labels
