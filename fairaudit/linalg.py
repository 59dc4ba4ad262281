"""Small linear-algebra pieces shared by the estimators and the metrics."""

from __future__ import annotations

import contextlib
import functools
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse.linalg


@functools.cache
def _thread_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def blas_threads(limit: int | None, user_api: str | None = "blas"):
    """Context manager limiting BLAS to ``limit`` threads (``None``: leave BLAS alone);
    ``user_api=None`` limits every thread pool (BLAS and OpenMP alike).

    One cached controller: building one looks up the loaded libraries (~5 ms), too slow to
    repeat for every fit (measured 3.4–4.0 ms per call for a fresh ``threadpool_limits``
    against 0.02–0.2 ms). The NMF and CP families set their limits (``BLAS_THREADS``) where
    their thin products are measured.
    """
    if limit is None:
        return contextlib.nullcontext()
    return _thread_controller().limit(limits=limit, user_api=user_api)


DENSE_EIGH_MAX_DIM = 400
"""Up to this size a full ``eigh`` is faster than an iterative solver for a few eigenpairs."""


@dataclass(frozen=True)
class LowRankMap:
    """The linear map ``P = U diag(w) Uᵀ`` (``U`` has orthonormal columns).

    A projection has all weights 1; Samadi et al.'s "affine projection" (Alg. 1, last step) has
    weights in [0, 1]. Applying it to rows costs O(m n r) instead of O(m n²).
    """

    basis: np.ndarray  # (n, r)
    weights: np.ndarray  # (r,)

    @property
    def rank(self) -> int:
        return int(np.count_nonzero(self.weights))

    def coordinates(self, X: np.ndarray) -> np.ndarray:
        """``X U diag(w)``: the r-dimensional representation of the rows of ``X``."""
        return (X @ self.basis) * self.weights

    def dense(self) -> np.ndarray:
        return (self.basis * self.weights) @ self.basis.T


def as_map(P) -> LowRankMap:
    """A :class:`LowRankMap` for ``P`` (symmetric matrix or already a map)."""
    if isinstance(P, LowRankMap):
        return P
    P = np.asarray(P, dtype=float)
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"a projection must be a square matrix, got shape {P.shape}")
    values, vectors = np.linalg.eigh((P + P.T) / 2)
    keep = np.abs(values) > 1e-12 * max(1.0, np.abs(values).max(initial=0.0))
    return LowRankMap(vectors[:, keep], values[keep])


SMALL_EIGH_DIM = 32
"""Up to this size :func:`dense_top_eigh` takes NumPy's full ``eigh`` (LAPACK ``syevd``): for the
PCA family's 10 × 10 problems SciPy's wrapper cost more than the decomposition (a bootstrap
replicate's covFairPCA fits 34 → 17 ms, Fair PCA's 34 → 26 ms on the default sample, in one
process under load; the same eigenpairs to rounding)."""


def dense_top_eigh(M: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenvalues (descending) and eigenvectors of a dense symmetric matrix:
    LAPACK's ``syevr`` on the wanted index range only (measured 12 ms against 30–35 ms for a
    full ``eigh`` of a 600 × 600 graph, ``fs.baselines.SPARSE_EIGEN_MIN_ROWS``); NumPy's full
    ``eigh`` up to :data:`SMALL_EIGH_DIM`."""
    n = M.shape[0]
    if n <= SMALL_EIGH_DIM:
        values, vectors = np.linalg.eigh(M)
        return values[::-1][:k], vectors[:, ::-1][:, :k]
    values, vectors = scipy.linalg.eigh(M, subset_by_index=[n - k, n - 1], driver="evr")
    return values[::-1], vectors[:, ::-1]


def top_eigh(M: np.ndarray, k: int, *, v0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenvalues (descending) and eigenvectors of a symmetric matrix.

    Dense LAPACK (:func:`dense_top_eigh`) for small matrices; for large ones LOBPCG warm-started
    from ``v0`` (the previous call's vectors during an iteration), which falls back to LAPACK when
    it does not converge to full accuracy.
    """
    n = M.shape[0]
    k = min(k, n)
    if n <= DENSE_EIGH_MAX_DIM or k > n // 4:
        return dense_top_eigh(M, k)
    block = k + max(4, k // 2)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, block))
    if v0 is not None:
        X[:, : min(block, v0.shape[1])] = v0[:, :block]
    with warnings.catch_warnings():  # its accuracy is checked below (and LAPACK takes over)
        warnings.simplefilter("ignore")
        values, vectors, residuals = scipy.sparse.linalg.lobpcg(
            M, X, largest=True, tol=1e-11 * max(1.0, abs(np.trace(M)) / n) ** 0.5, maxiter=200,
            retResidualNormsHistory=True,
        )
    order = np.argsort(values)[::-1][:k]
    values, vectors = values[order], vectors[:, order]
    residual = np.linalg.norm(M @ vectors - vectors * values, axis=0).max()
    if not np.isfinite(residual) or residual > 1e-8 * max(1.0, abs(values[0])):
        return dense_top_eigh(M, k)
    return values, vectors


def orthonormal_basis(vectors: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """An orthonormal basis of the column span (rank-revealing QR)."""
    if vectors.size == 0:
        return vectors
    Q, R, _ = scipy.linalg.qr(vectors, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > tol * max(diag[0], 1e-300)))
    return Q[:, :rank]
