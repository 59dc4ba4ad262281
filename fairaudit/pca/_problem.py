"""The data of a (fair) PCA problem, computed once and shared by every solver and rank.

For centred data with groups ``A_1 … A_k`` (``m_i`` rows each) the PCA family only needs the
per-group second-moment matrices ``C_i = A_iᵀA_i / m_i`` and their spectra. With them, for a
linear map ``P = U diag(w) Uᵀ`` (``U`` orthonormal, ``w ∈ [0, 1]``):

* ``error_i(P) = ‖A_i − A_i P‖²_F / m_i = tr C_i − Σ_j (2w_j − w_j²) u_jᵀ C_i u_j``;
* ``loss_i(P) = error_i(P) − Σ_{j>d} σ_j(C_i)`` — Samadi et al. 2018, Def. 4.3 averaged as in
  Def. 4.4 — which for a projection (``w = 1``) or for the "affine projection" of Alg. 1
  (``P̄ = 2P − P²``) is the linear function ``c_i(d) − ⟨C_i, P̄⟩`` with ``c_i(d)`` the sum of
  the ``d`` largest eigenvalues of ``C_i``.

Building this object costs ``O(m n²)`` (the products ``A_iᵀA_i``) and ``O(k n³)`` (the group
spectra) once; every rank of a sweep and every solver reuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..groups import GroupCodes
from ..linalg import LowRankMap


@dataclass
class GroupProblem:
    """Per-group second moments of centred data, with cached spectra.

    Attributes
    ----------
    covariances : ndarray (k, n, n)
        ``C_i = A_iᵀA_i / m_i`` for the globally centred rows of group ``i``.
    spectra : ndarray (k, n)
        Eigenvalues of each ``C_i``, descending (clipped at 0).
    eigenvectors : ndarray (k, n, n)
        The matching eigenvectors (columns): ``eigenvectors[i][:, :d]`` is group ``i``'s own
        rank-``d`` PCA.
    sizes : ndarray (k,)
        ``m_i``.
    mean : ndarray (n,)
        The global mean that was subtracted.
    """

    covariances: np.ndarray
    spectra: np.ndarray
    eigenvectors: np.ndarray
    sizes: np.ndarray
    mean: np.ndarray
    labels: tuple[str, ...]
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_data(cls, X: np.ndarray, groups: GroupCodes, *, weights=None, mean=None) -> GroupProblem:
        """The problem of the rows of ``X``, optionally weighted (``weights``, one per row, e.g.
        bootstrap counts: ``C_i = Σ_r w_r (x_r − c)(x_r − c)ᵀ / Σ_r w_r``) and centred at a given
        ``mean`` ``c`` (default: the weighted mean of all rows; a fitted map's training mean to
        measure new rows)."""
        X = np.asarray(X, dtype=float)
        w = np.ones(X.shape[0]) if weights is None else np.asarray(weights, dtype=float)
        mean = (w @ X) / w.sum() if mean is None else np.asarray(mean, dtype=float)
        centred = X - mean
        k, n = groups.n_groups, X.shape[1]
        covariances = np.empty((k, n, n))
        sizes = np.bincount(groups.codes, weights=w, minlength=k)
        for i, mask in enumerate(groups.masks()):
            A = centred[mask]
            covariances[i] = (A * w[mask, None]).T @ A / sizes[i]
            covariances[i] = (covariances[i] + covariances[i].T) / 2
        spectra = np.empty((k, n))
        eigenvectors = np.empty((k, n, n))
        for i, C in enumerate(covariances):
            values, vectors = np.linalg.eigh(C)
            spectra[i] = np.clip(values[::-1], 0.0, None)
            eigenvectors[i] = vectors[:, ::-1]
        return cls(covariances, spectra, eigenvectors, sizes, mean, tuple(groups.labels))

    # ------------------------------------------------------------------ sizes
    @property
    def n_groups(self) -> int:
        return self.covariances.shape[0]

    @property
    def n_features(self) -> int:
        return self.covariances.shape[1]

    @property
    def pooled(self) -> np.ndarray:
        """The covariance of all rows, ``Σ_i (m_i/m) C_i`` (what vanilla PCA diagonalises)."""
        if "pooled" not in self._cache:
            weights = self.sizes / self.sizes.sum()
            self._cache["pooled"] = np.tensordot(weights, self.covariances, axes=1)
        return self._cache["pooled"]

    @property
    def scale(self) -> float:
        """A natural size for losses: the largest group's total variance ``max_i tr C_i``."""
        return float(max(self.spectra.sum(axis=1).max(), np.finfo(float).tiny))

    # ------------------------------------------------------------------ Samadi's quantities
    def captured(self, d: int) -> np.ndarray:
        """``c_i(d) = ‖Â_i‖²_F / m_i``: the variance group ``i``'s own rank-``d`` PCA captures."""
        return self.spectra[:, :d].sum(axis=1)

    @property
    def traces(self) -> np.ndarray:
        """``tr C_i = ‖A_i‖²_F / m_i``."""
        return np.trace(self.covariances, axis1=1, axis2=2)

    def best_errors(self, d: int) -> np.ndarray:
        """``‖A_i − Â_i‖²_F / m_i``: the smallest error any rank-``d`` map achieves on group ``i``."""
        return np.clip(self.traces - self.captured(d), 0.0, None)

    def weighted(self, weights: np.ndarray) -> np.ndarray:
        """``M(w) = Σ_i w_i C_i``."""
        return np.tensordot(weights, self.covariances, axes=1)

    def captured_by(self, vectors: np.ndarray) -> np.ndarray:
        """``u_jᵀ C_i u_j`` for each group ``i`` (rows) and column ``u_j`` of ``vectors``."""
        # (C_i U) ⊙ U summed over rows: plain products (einsum's path search cost more than the
        # contraction at these sizes: 1.5 s of 5 s in 10 bootstrap replicates of the default audit)
        return np.sum((self.covariances @ vectors) * vectors, axis=1)

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
