"""The in-process engine: group moments and a stratified row sample of in-memory data.

An *engine* turns the audited data into what the PCA family needs (see
``docs/architecture.md``, "Engines"):

* :meth:`moments` — the :class:`~fairaudit.engine.GroupMoments` of the rows *as scaled for the
  audit*, in one pass over the unscaled matrix: the raw moments are computed block by block and
  the data's scaling (standardize, center, unit_norm, none) is applied to the moments afterwards
  (:func:`scaling_transform`), so no scaled copy of the matrix is ever made;
* :meth:`sample` — a stratified sample of scaled rows for the metrics that need rows (leakage,
  RBF MMD²), with its size stated.

A distributed engine implements the same two methods on partitions (moments per partition
merged with :meth:`GroupMoments.merge`, a sample drawn per partition); estimators and metrics
never know which engine ran.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .moments import GroupMoments, RowBlocks


def scaling_transform(counts, means, within, scaling: str) -> tuple[np.ndarray, np.ndarray]:
    """``(shift, scale)`` with ``scaled = (x − shift) · scale`` for ``scaling``.

    From per-group counts ``(k,)``, means ``(k, d)`` and within-group sums of squares ``(k, d)``
    (the diagonal of each group's scatter) — so a wide matrix needs no ``d × d`` product. Mirrors
    :func:`fairaudit.data.scale_features` exactly (population standard deviation; a constant
    column is left at zero rather than divided by zero): ``standardize`` — shift by the mean,
    divide by the standard deviation; ``center`` — shift only; ``unit_norm`` — divide by the
    column's ℓ2 norm, no shift (Fairer-NMF §6.1); ``none`` — unchanged.
    """
    counts = np.asarray(counts, dtype=float)
    d = means.shape[1]
    if scaling == "none":
        return np.zeros(d), np.ones(d)
    if scaling == "unit_norm":
        norms = np.sqrt(counts @ means**2 + within.sum(axis=0))
        return np.zeros(d), 1.0 / np.where(norms > 0, norms, 1.0)
    total = max(float(counts.sum()), np.finfo(float).tiny)
    mean = counts @ means / total
    if scaling == "center":
        return mean, np.ones(d)
    if scaling == "standardize":
        std = np.sqrt((within.sum(axis=0) + counts @ (means - mean) ** 2) / total)
        return mean, 1.0 / np.where(std > 0, std, 1.0)
    raise ValueError(f"unknown scaling {scaling!r}")


@dataclass(frozen=True)
class RowSample:
    """Scaled rows drawn (stratified by group) for the metrics that need rows."""

    X: np.ndarray
    codes: np.ndarray
    total_rows: int

    @property
    def size(self) -> int:
        return self.X.shape[0]

    @property
    def is_complete(self) -> bool:
        """Every row of the data is in the sample."""
        return self.size == self.total_rows

    def describe(self, labels) -> str:
        counts = np.bincount(self.codes, minlength=len(labels))
        per_group = ", ".join(f"{label}: {int(n):,}" for label, n in zip(labels, counts, strict=True))
        return f"a stratified sample of {self.size:,} of {self.total_rows:,} rows ({per_group})"


@dataclass(frozen=True)
class DataSummary:
    """What an engine hands the PCA family.

    ``moments`` are those of ``(x − shift) · scale`` for every row ``x`` of the data (the data's
    own scaling). For *wide* data (more features than rows) the ``d × d`` moments are not formed:
    ``moments`` is ``None`` and ``rows`` holds the scaled rows instead (the PCA family then works
    in their row space). ``sample`` holds at most ``sample_rows`` rows scaled the same way.
    """

    moments: GroupMoments | None
    sample: RowSample
    shift: np.ndarray
    scale: np.ndarray
    rows: np.ndarray | None = None
    row_groups: object | None = None
    """The groups of ``rows`` (a :class:`~fairaudit.groups.GroupCodes`), when ``rows`` is set."""


def moments_scaling(moments, scaling: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`scaling_transform` from group moments (:class:`GroupMoments`: counts, means and the
    scatters' diagonals)."""
    return scaling_transform(moments.counts, moments.means, np.einsum("kjj->kj", moments.scatter), scaling)


class LocalEngine:
    """The default engine: an in-memory :class:`~fairaudit.data.AuditData`, one pass over
    ``X_raw`` in blocks (:data:`~fairaudit.engine.moments.CHUNK_ROWS` rows)."""

    name = "local"

    def summarise(self, data, *, sample_rows: int, random_state=0, weights=None, scaling=None) -> DataSummary:
        """The moments (or, for wide data, the scaled rows) and a sample of at most
        ``sample_rows`` rows (0: none).

        ``weights`` (optional, one non-negative number per row) weight the rows: 0/1 for a part
        of the data (the training rows of a held-out evaluation), the multinomial counts of a
        bootstrap resample — which is never materialised. The scaling is then estimated from the
        weighted rows, as the data's scaling would be on that sample, unless ``scaling`` =
        ``(shift, scale)`` fixes it (held-out rows scaled as the training rows were). The sample
        is drawn from the rows of positive weight.
        """
        groups = data.groups
        X_raw = self._prescaled(data)
        wide = X_raw.shape[1] > X_raw.shape[0]  # wide: keep the rows, skip the d × d moments
        raw = None if wide else self.raw_moments(X_raw, groups, weights)
        if scaling is None:
            scaling = (scaling_transform(*_feature_statistics(X_raw, groups, weights), data.scaling) if wide
                       else moments_scaling(raw, data.scaling))
        shift, scale = scaling
        sample = self._sample(data, X_raw, sample_rows, random_state, shift, scale, weights)
        if wide:
            return DataSummary(None, sample, shift, scale, (X_raw - shift) * scale, groups)
        return DataSummary(raw.affine(shift, scale), sample, shift, scale)

    def _once(self, name: str, source, compute):
        """``compute()`` kept while ``source`` is the same object: work done once per data set,
        since every bootstrap replicate summarises the same rows again."""
        cached = getattr(self, name, None)
        if cached is None or cached[0] is not source:
            cached = (source, compute())
            setattr(self, name, cached)
        return cached[1]

    def _prescaled(self, data) -> np.ndarray:
        """:func:`_exactly_prescaled`, once per data set (finding the columns' peaks is a pass
        over the whole matrix: 0.37 s of a 0.48-s PCA replicate at 1,000,000 × 20)."""
        return self._once("_prescaled_cache", data.X_raw, lambda: _exactly_prescaled(data))

    def _blocks(self, groups) -> RowBlocks:
        """The row blocks' group order (:class:`RowBlocks`), once per data set."""
        return self._once("_blocks_cache", groups.codes, lambda: RowBlocks.of(groups.codes, groups.n_groups))

    def raw_moments(self, X: np.ndarray, groups, weights=None) -> GroupMoments:
        """The group moments of the (prescaled, unscaled, optionally weighted) rows: one pass in
        blocks, in process; for weighted passes (bootstrap replicates, many per data set) the
        blocks' group order is found once and kept."""
        blocks = None if weights is None else self._blocks(groups)
        return GroupMoments.from_rows(X, groups.codes, n_groups=groups.n_groups, weights=weights, labels=groups.labels, blocks=blocks)

    @staticmethod
    def _sample(data, X, max_rows: int, random_state, shift, scale, weights=None) -> RowSample:
        """At most ``max_rows`` scaled rows (all rows when there are fewer): every row of small
        groups, the large groups subsampled in proportion — the rows the leakage metric would
        draw itself from the whole data with the same seed. With ``weights``, among the rows of
        positive weight (each once)."""
        from ..metrics import _stratified_subsample

        codes = data.groups.codes
        eligible = None if weights is None else np.flatnonzero(np.asarray(weights) > 0)
        candidates = codes if eligible is None else codes[eligible]  # every row: no copy of the codes
        n = candidates.shape[0]
        if max_rows <= 0:
            return RowSample(np.empty((0, data.X_raw.shape[1])), codes[:0], n)
        picked = np.arange(n) if n <= max_rows else _stratified_subsample(candidates, max_rows, random_state)
        rows = picked if eligible is None else eligible[picked]
        return RowSample((X[rows] - shift) * scale, codes[rows], n)


def _exactly_prescaled(data) -> np.ndarray:
    """``data.X_raw``, with columns whose values would overflow the raw moments (above 2⁴⁸⁰)
    divided by a power of two — exact in binary floating point, and invisible after the
    scale-free scalings (``standardize``, ``unit_norm``), so the moments equal those of
    :func:`fairaudit.data.scale_features` (the data boundary's rule, one place:
    ``fairaudit.data._scaling``). Under ``center``/``none`` such values keep their units and are
    refused with the data boundary's message (:meth:`AuditData.matrix`)."""
    from ..data._scaling import check_magnitude, overflow_exponents

    X_raw = data.X_raw
    exponents = overflow_exponents(X_raw)
    if exponents is None:
        return X_raw
    if data.scaling not in ("standardize", "unit_norm"):
        check_magnitude(X_raw, data.feature_names, data.scaling)
        return X_raw
    return np.ldexp(X_raw, -exponents)


def _feature_statistics(X: np.ndarray, groups, weights=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-group counts, means and within-group sums of squares per feature (no ``d × d``),
    each row weighted by ``weights`` when given."""
    k, d = groups.n_groups, X.shape[1]
    w = np.ones(X.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    counts = np.bincount(groups.codes, weights=w, minlength=k)
    means = np.zeros((k, d))
    within = np.zeros((k, d))
    for g in range(k):
        mask = groups.codes == g
        if counts[g] <= 0:
            continue
        block, wg = X[mask], w[mask]
        means[g] = wg @ block / counts[g]
        within[g] = wg @ (block - means[g]) ** 2
    return counts, means, within
