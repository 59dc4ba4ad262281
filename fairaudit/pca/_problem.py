"""The data of a (fair) PCA problem, computed once and shared by every solver and rank.

For centred data with groups ``A_1 … A_k`` (``m_i`` rows each) the PCA family only needs the
per-group second-moment matrices ``C_i = A_iᵀA_i / m_i`` and their spectra. With them, for a
linear map ``P = U diag(w) Uᵀ`` (``U`` orthonormal, ``w ∈ [0, 1]``):

* ``error_i(P) = ‖A_i − A_i P‖²_F / m_i = tr C_i − Σ_j (2w_j − w_j²) u_jᵀ C_i u_j``;
* ``loss_i(P) = error_i(P) − Σ_{j>d} σ_j(C_i)`` — Samadi et al. 2018, Def. 4.3 averaged as in
  Def. 4.4 — which for a projection (``w = 1``) or for the "affine projection" of Alg. 1
  (``P̄ = 2P − P²``) is the linear function ``c_i(d) − ⟨C_i, P̄⟩`` with ``c_i(d)`` the sum of
  the ``d`` largest eigenvalues of ``C_i``;
* ``variance explained = ‖XP‖²_F / ‖X‖²_F = Σ_j w_j² u_jᵀ C u_j / tr C`` (``C`` the pooled
  ``Σ_i (m_i/m) C_i``; Rathore & Manwani §5.3) and the linear MMD² ``‖(μ_a − μ_b) U diag(w)‖²``
  from the group means.

So a problem is built from :class:`~fairaudit.engine.GroupMoments` (count, mean and scatter per
group, computable chunk by chunk or on a cluster): :meth:`GroupProblem.from_moments`.

**Wide data.** When there are fewer rows than features (``n < d``) every centred row lies in the
row space, of dimension ``s ≤ n``; outside it every ``C_i`` is zero. :meth:`from_data` then works
in an orthonormal basis ``Q`` (``d × s``) of that space: covariances, spectra and every solver
are ``s × s``, and :meth:`lift` maps a solution back (``U = Q U_s``), completing it with
directions outside the row space when a rank above ``s`` is asked for. This is exact for the
whole family: on the complement all group matrices vanish (Fair PCA's relaxation, JEVD's joint
eigenvectors and the weighted covariances of covFairPCA all decouple there), so no ``d × d``
matrix is formed and nothing is approximated.

Building a problem costs ``O(m n²)`` (the scatters; ``O(m² d)`` for wide data) and ``O(k s³)``
(the group spectra) once; every rank of a sweep and every solver reuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from ..engine import GroupMoments
from ..groups import GroupCodes
from ..linalg import LowRankMap, blas_threads, top_eigh

BLAS_THREADS: int | None = 1
"""BLAS threads for the family's eigen-decompositions and fits (``None``: leave BLAS alone).
LAPACK's symmetric eigensolver and QR suffer most when the cores are shared: measured side by
side in one process with two cores busy with other work, ``eigh`` of a 1,000 × 1,000 matrix took
0.37–0.48 s with one OpenBLAS thread and 1.5–10.3 s with two, ``eigh`` of LFW's 1,764 × 1,764
covariance 1.8–1.9 s against 8.5–9.1 s, a QR of 1,764 × 999 0.4 s against 2.6 s; the whole PCA
audit of 1,000,000 × 20 rows (its per-fit leakage classifier included) 5.3–6.4 s against
12.3–13.5 s. The moments' matrix products keep BLAS's own setting."""


def row_space(rows: np.ndarray) -> np.ndarray:
    """An orthonormal basis (``d × s``) of the span of the rows of an ``n × d`` matrix, ``n < d``,
    from the ``n × n`` Gram matrix: its eigenvectors ``V`` with eigenvalues above rounding give
    ``rowsᵀ V Λ^{-1/2}``, re-orthonormalised (directions dropped carry at most rounding-level
    variance). ``O(n² d)`` — no ``d × d`` matrix and no SVD of the rows."""
    gram = rows @ rows.T
    with blas_threads(BLAS_THREADS):
        values, vectors = np.linalg.eigh((gram + gram.T) / 2)
        keep = values > max(float(values.max(initial=0.0)), np.finfo(float).tiny) * rows.shape[0] * np.finfo(float).eps
        if not keep.any():
            return np.eye(rows.shape[1], 1)
        basis = rows.T @ (vectors[:, keep] / np.sqrt(values[keep]))
        return np.linalg.qr(basis)[0]


@dataclass(frozen=True)
class RegroupingRows:
    """Rows in a problem's coordinates, centred at its mean (``Y``), and ``YᵀY``
    (:meth:`GroupProblem.regrouping_rows`)."""

    Y: np.ndarray
    gram: np.ndarray


@dataclass
class GroupProblem:
    """Per-group second moments of centred data, with cached spectra.

    Attributes
    ----------
    covariances : ndarray (k, s, s)
        ``C_i = A_iᵀA_i / m_i`` for the globally centred rows of group ``i``, in problem
        coordinates (``s = n_features``, or the row-space dimension for wide data).
    spectra : ndarray (k, s)
        Eigenvalues of each ``C_i``, descending (clipped at 0).
    eigenvectors : ndarray (k, s, s) or None
        The matching eigenvectors (columns): ``eigenvectors[i][:, :d]`` is group ``i``'s own
        rank-``d`` PCA.
    sizes : ndarray (k,)
        ``m_i``.
    mean : ndarray (n_features,)
        The global mean that was subtracted.
    labels : tuple of str
    offsets : ndarray (k, s)
        Each group's mean minus the global mean, in problem coordinates.
    basis : ndarray (n_features, s) or None
        ``Q``: orthonormal basis of the row space for wide data (``None``: the coordinates are
        the features themselves).

    A stack of problems of the same rows regrouped (:meth:`regroupings`: the gap test's random
    groups) carries a leading axis on ``covariances`` and ``spectra`` (no eigenvectors: no solver
    runs on them); the metrics of a fitted map (:meth:`errors`, :meth:`losses`,
    :meth:`best_errors`) broadcast over it.
    """

    covariances: np.ndarray
    spectra: np.ndarray
    eigenvectors: np.ndarray | None
    sizes: np.ndarray
    mean: np.ndarray
    labels: tuple[str, ...]
    offsets: np.ndarray | None = None
    basis: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_moments(cls, moments: GroupMoments, *, mean=None, basis=None, centre=None) -> GroupProblem:
        """The problem of data summarised by ``moments`` (rows centred by their global mean).

        ``mean`` and ``basis`` are for moments of row-space coordinates (see :meth:`from_data`).
        ``centre`` (in the moments' coordinates) centres the rows at that point instead of their
        own global mean: new rows measured as a map fitted elsewhere sees them, centred at its
        training mean (the audit's held-out rows); without ``mean`` it is also the problem's
        ``mean``.
        """
        if (moments.counts <= 0).any():
            empty = [label for label, n in zip(moments.labels, moments.counts, strict=True) if n <= 0]
            raise ValueError(f"group(s) {', '.join(map(repr, empty))} have no rows")
        covariances = moments.covariances(centre)
        k, s, _ = covariances.shape
        spectra = np.empty((k, s))
        eigenvectors = np.empty((k, s, s))
        with blas_threads(BLAS_THREADS):
            for i, C in enumerate(covariances):
                values, vectors = np.linalg.eigh(C)
                spectra[i] = np.clip(values[::-1], 0.0, None)
                eigenvectors[i] = vectors[:, ::-1]
        return cls(
            covariances,
            spectra,
            eigenvectors,
            moments.counts.astype(float),
            np.asarray(mean if mean is not None else moments.global_mean if centre is None else centre, dtype=float),
            tuple(moments.labels),
            offsets=moments.centred_means(centre),
            basis=basis,
        )

    @classmethod
    def from_data(cls, X: np.ndarray, groups: GroupCodes, *, weights=None, centre=None, basis=None) -> GroupProblem:
        """The problem of the rows of ``X`` (optionally weighted, e.g. bootstrap counts; a weight
        of 0 leaves a row out), centred at their (weighted) mean or at ``centre``
        (:meth:`from_moments`).

        With fewer rows than features the problem is set up in the row space (module docstring);
        ``basis`` reuses the row space of another problem of the *same rows and centre* (e.g. the
        same rows regrouped: only the group moments change), skipping its ``O(n²d)`` rebuild.
        """
        X = np.asarray(X, dtype=float)
        n, d = X.shape
        k = groups.n_groups
        if d <= n:
            moments = GroupMoments.from_rows(X, groups.codes, n_groups=k, weights=weights, labels=groups.labels)
            return cls.from_moments(moments, centre=centre)
        w = None if weights is None else np.asarray(weights, dtype=float)
        if centre is not None:
            mean = np.asarray(centre, dtype=float)
        else:
            mean = X.mean(axis=0) if w is None else w @ X / w.sum()
        centred = X - mean
        basis = row_space(centred) if basis is None else basis
        moments = GroupMoments.from_rows(centred @ basis, groups.codes, n_groups=k, weights=w, labels=groups.labels)
        origin = None if centre is None else np.zeros(basis.shape[1])  # coordinates of rows already centred at ``centre``
        return cls.from_moments(moments, mean=mean, basis=basis, centre=origin)

    def regrouping_rows(self, rows: np.ndarray) -> RegroupingRows:
        """``rows`` ready for :meth:`regroupings`: centred at this problem's mean, in its
        coordinates, with their Gram matrix — worked out once for every batch of regroupings."""
        Y = np.asarray(rows, dtype=float) - self.mean
        if self.basis is not None:
            Y = Y @ self.basis
        return RegroupingRows(Y, Y.T @ Y)

    def regroupings(self, rows: np.ndarray | RegroupingRows, codes: np.ndarray) -> GroupProblem:
        """The problems of this problem's own ``rows`` (the ``X`` it was built from, or
        :meth:`regrouping_rows` of it) under each row of ``codes`` (``B × n``: a regrouping that
        keeps every group's size, e.g. a permutation of the groups), stacked on a leading axis,
        centred at this problem's mean and in its coordinates.

        One Gram matrix per group and regrouping but one — the largest group's is the whole
        rows' minus the others' (``YᵀY`` is computed once) — and the spectra of all ``B × k``
        covariances in one batched ``eigvalsh``; equal to :meth:`from_data` of each regrouping
        up to rounding (``tests/test_pca_gap.py``)."""
        prepared = rows if isinstance(rows, RegroupingRows) else self.regrouping_rows(rows)
        Y, total = prepared.Y, prepared.gram
        codes = np.atleast_2d(np.asarray(codes))
        k, s = self.n_groups, self.dim
        rest = int(np.argmax(self.sizes))  # the largest group: by subtraction
        covariances = np.empty((codes.shape[0], k, s, s))
        for b, regrouped in enumerate(codes):
            others = np.zeros((s, s))
            for g in range(k):
                if g != rest:
                    part = Y[regrouped == g]
                    covariances[b, g] = part.T @ part
                    others += covariances[b, g]
            covariances[b, rest] = total - others
        covariances /= self.sizes[:, None, None]
        with blas_threads(BLAS_THREADS):
            spectra = np.clip(np.linalg.eigvalsh(covariances)[..., ::-1], 0.0, None)
        return GroupProblem(covariances, spectra, None, self.sizes, self.mean, self.labels, basis=self.basis)

    # ------------------------------------------------------------------ sizes
    @property
    def n_groups(self) -> int:
        return self.covariances.shape[-3]

    @property
    def n_features(self) -> int:
        """Features of the data (the maps' dimension)."""
        return self.mean.shape[0]

    @property
    def dim(self) -> int:
        """Dimension of the problem coordinates (``n_features``, or the row space's)."""
        return self.covariances.shape[-1]

    @property
    def null_dim(self) -> int:
        """Directions outside the problem coordinates: variance 0 for every group."""
        return self.n_features - self.dim

    @property
    def pooled(self) -> np.ndarray:
        """The covariance of all rows, ``Σ_i (m_i/m) C_i`` (what vanilla PCA diagonalises)."""
        if "pooled" not in self._cache:
            weights = self.sizes / self.sizes.sum()
            self._cache["pooled"] = np.tensordot(weights, self.covariances, axes=1)
        return self._cache["pooled"]

    @property
    def value_scale(self) -> float:
        """The size of the rows' values, ``‖mean‖ + √(tr C)``: what rounding in the group means is
        relative to (:func:`fairaudit.erasure.mean_difference_basis`)."""
        return float(np.linalg.norm(self.mean)) + float(np.sqrt(max(float(np.trace(self.pooled)), 0.0)))

    @property
    def scale(self) -> float:
        """A natural size for losses: the largest group's total variance ``max_i tr C_i``."""
        return float(max(self.spectra.sum(axis=1).max(), np.finfo(float).tiny))

    # ------------------------------------------------------------------ coordinates
    def lift(self, projection: LowRankMap, rank: int) -> LowRankMap:
        """A map in problem coordinates as a map on the features, completed to ``rank``
        directions by directions of zero variance (outside the row space) when it has fewer."""
        basis = projection.basis if self.basis is None else self.basis @ projection.basis
        missing = rank - basis.shape[1]
        if missing <= 0 or self.null_dim <= 0:
            return LowRankMap(basis, projection.weights)
        return LowRankMap(np.hstack([basis, self._null_directions(missing)]), np.concatenate([projection.weights, np.ones(missing)]))

    def _null_directions(self, count: int) -> np.ndarray:
        """``count`` orthonormal directions orthogonal to the row space (deterministic)."""
        candidates = np.random.default_rng(0).standard_normal((self.n_features, count))
        candidates -= self.basis @ (self.basis.T @ candidates)
        return np.linalg.qr(candidates)[0]

    def reduce(self, projection: LowRankMap) -> LowRankMap:
        """A map on the features in problem coordinates (directions outside the row space carry
        no variance and drop out of every formula here)."""
        if self.basis is None:
            return projection
        return LowRankMap(self.basis.T @ projection.basis, projection.weights)

    def top_eigenvectors(self, M: np.ndarray, r: int, *, v0=None) -> tuple[np.ndarray, np.ndarray]:
        """The top-``r`` eigenpairs (by signed eigenvalue) of the operator that is ``M`` on the
        problem coordinates and 0 outside them. For wide data, eigenvalue-0 directions outside the
        row space rank above negative ones: only eigenvectors that outrank them are returned
        (:meth:`lift` completes the map with such directions)."""
        values, vectors = top_eigh(M, min(r, self.dim), v0=v0)
        count = self._outranking(values, r)
        return values[:count], vectors[:, :count]

    def top_from_decomposition(self, values: np.ndarray, vectors: np.ndarray, r: int) -> np.ndarray:
        """:meth:`top_eigenvectors`' vectors from a whole decomposition of ``M`` (NumPy's ``eigh``:
        ascending eigenvalues), e.g. one of a batch."""
        top = min(r, self.dim)
        values, vectors = values[::-1][:top], vectors[:, ::-1][:, :top]
        return vectors[:, : self._outranking(values, r)]

    def _outranking(self, values: np.ndarray, r: int) -> int:
        """How many of the top eigenpairs (``values`` descending) outrank the eigenvalue-0
        directions outside a wide problem's row space (all of them otherwise)."""
        if self.null_dim > 0:
            return max(int(np.sum(values > 0)), r - self.null_dim)
        return len(values)

    # ------------------------------------------------------------------ Samadi's quantities
    def captured(self, d: int) -> np.ndarray:
        """``c_i(d) = ‖Â_i‖²_F / m_i``: the variance group ``i``'s own rank-``d`` PCA captures."""
        return self.spectra[..., :d].sum(axis=-1)

    @property
    def traces(self) -> np.ndarray:
        """``tr C_i = ‖A_i‖²_F / m_i``."""
        return np.trace(self.covariances, axis1=-2, axis2=-1)

    def best_errors(self, d: int) -> np.ndarray:
        """``‖A_i − Â_i‖²_F / m_i``: the smallest error any rank-``d`` map achieves on group ``i``."""
        return np.clip(self.traces - self.captured(d), 0.0, None)

    def weighted(self, weights: np.ndarray) -> np.ndarray:
        """``M(w) = Σ_i w_i C_i``."""
        return np.tensordot(weights, self.covariances, axes=1)

    def captured_by(self, vectors: np.ndarray) -> np.ndarray:
        """``u_jᵀ C_i u_j`` for each group ``i`` (rows) and column ``u_j`` of ``vectors``."""
        return np.sum((self.covariances @ vectors) * vectors, axis=-2)

    def projection_losses(self, vectors: np.ndarray, d: int) -> np.ndarray:
        """Losses of the projection onto the span of orthonormal ``vectors``."""
        return self.captured(d) - self.captured_by(vectors).sum(axis=1)

    # ------------------------------------------------------------------ any fitted map
    def errors(self, projection: LowRankMap) -> np.ndarray:
        """``error_i`` of a map ``U diag(w) Uᵀ`` (exact identity above)."""
        w = projection.weights
        captured = self.captured_by(projection.basis) @ (2 * w - w * w)
        return self.traces - captured

    def losses(self, projection: LowRankMap, d: int) -> np.ndarray:
        return self.errors(projection) - self.best_errors(d)

    def variance_explained(self, projection: LowRankMap) -> float:
        """``‖X P‖²_F / ‖X‖²_F`` of the centred data (Rathore & Manwani §5.3)."""
        total = float(np.trace(self.pooled))
        if total <= 0:
            return float("nan")
        B = projection.basis
        captured = np.sum((self.pooled @ B) * B, axis=0)
        return float(captured @ projection.weights**2 / total)

    def mean_discrepancy(self, projection: LowRankMap) -> float:
        """Linear-kernel MMD² ``‖(μ_a − μ_b) U diag(w)‖²`` of the representation, the largest
        over pairs of groups (Rathore & Manwani §5.3) — from the group means, no rows needed."""
        means = (self.offsets @ projection.basis) * projection.weights
        return float(max(np.sum((means[a] - means[b]) ** 2) for a, b in combinations(range(self.n_groups), 2)))
