"""Independence penalties on the sensitive factor ``A`` and their analytic gradients.

``S`` is the one-hot matrix of the groups (``n × k``), ``H = I − 11ᵀ/n`` the centring matrix,
``Ã = HA`` and ``S̃ = HS``. The penalties (each *per unit λ*; Kim & Gittens 2021, §4 and
Algorithm 1; Zhu, Hu & Caverlee 2018 for FATR):

* ``"fatr"``: ``‖AᵀS‖²_F`` (the orthogonality term; the ℓ2 term ``‖A‖²_F`` has its own weight);
* ``"hsic"``: ``‖ÃᵀS̃‖²_F / n²`` — the biased HSIC estimate with linear kernels;
* ``"khsic"``: ``⟨K̃_A, K̃_S⟩ / n² = tr(K_A H K_S H) / n²`` — the biased HSIC estimate
  (Gretton et al. 2005) with the RBF kernel ``K_A[i, j] = exp(−γ‖a_i − a_j‖²)`` on the rows of
  ``A``.

The kernel on the sensitive side. The groups are categorical, so ``s_i`` is a one-hot row and any
RBF kernel on ``S`` takes two values: ``exp(−γ_S‖s_i − s_j‖²) = e^{−2γ_S} + (1 − e^{−2γ_S})·[g_i =
g_j]``. Centring removes the constant, so ``K̃_S = (1 − e^{−2γ_S}) · H S Sᵀ H`` for *every* γ_S.
We use ``K_S = S Sᵀ`` (the γ_S → ∞ limit): it fixes the otherwise arbitrary factor in front of
λ, and the normalised alignment ``nkhsic`` does not depend on it at all. (Our statement; the
paper's γ_S is thereby absorbed into λ.)

With ``P = S̃ S̃ᵀ`` (``P[i, j] = [g_i = g_j] − p_{g_i} − p_{g_j} + ‖p‖²``, ``p`` the group
proportions) the KHSIC is ``Σ_ij P_ij K_ij / n²`` and its gradient with respect to row ``a_i`` is

    ∂/∂a_i = −(4γ / n²) Σ_j P_ij K_ij (a_i − a_j),

i.e. ``∇_A = −(4γ/n²)(diag(W1) A − W A)`` with ``W = P ∘ K_A`` (our derivation; the factor 4 is
2 from the symmetric double sum times 2 from the square). It is computed in row blocks so that
memory stays ``O(block · n)``; the time is ``O(n² k R)`` per evaluation.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist, pdist

BLOCK_BYTES = 64 * 2**20
"""Largest kernel block held in memory (bytes)."""


def one_hot(codes: np.ndarray, n_groups: int | None = None) -> np.ndarray:
    """The ``n × k`` indicator matrix of integer group codes."""
    codes = np.asarray(codes)
    k = int(codes.max()) + 1 if n_groups is None else n_groups
    S = np.zeros((len(codes), k))
    S[np.arange(len(codes)), codes] = 1.0
    return S


def centred(S: np.ndarray) -> np.ndarray:
    return S - S.mean(axis=0)


def median_gamma(Z: np.ndarray, max_rows: int = 2000, random_state: int | None = 0) -> float:
    """``γ = 1 / (2 m²)`` with ``m`` the median pairwise distance of the rows of ``Z``.

    The median heuristic (Gretton et al. 2005; also :func:`fairaudit.metrics.mmd2_rbf`); above
    ``max_rows`` rows a seeded subsample is used. Falls back to the median of the non-zero
    distances, and to 1 when every row is identical.
    """
    Z = np.asarray(Z, dtype=float)
    if len(Z) > max_rows:
        Z = Z[np.sort(np.random.default_rng(random_state).choice(len(Z), max_rows, replace=False))]
    distances = pdist(Z)
    positive = distances[distances > 0]
    if positive.size == 0:
        return 1.0
    median = float(np.median(distances))
    if median <= 0:
        median = float(np.median(positive))
    return 1.0 / (2.0 * median * median)


def _blocks(n: int):
    size = max(1, min(n, BLOCK_BYTES // (8 * max(n, 1))))
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def khsic(A: np.ndarray, St: np.ndarray, gamma: float, *, gradient: bool = False):
    """``tr(K_A H S Sᵀ H) / n²`` (and its gradient in ``A`` if asked).

    ``St`` is the centred one-hot matrix ``S̃ = HS``. ``P = S̃S̃ᵀ`` is never formed: with
    ``W = P ∘ K``, ``Σ_ij W_ij = Σ(S̃ ∘ K S̃)``, ``W1 = rowsum(S̃ ∘ K S̃)`` and
    ``W A = Σ_c diag(s̃_c) K diag(s̃_c) A``, so each block needs one kernel pass and one matrix
    product ``K · [S̃, s̃_1 ∘ A, …]`` (BLAS) — measured 4× faster than forming ``P ∘ K``.
    """
    A = np.asarray(A, dtype=float)
    n, rank = A.shape
    k = St.shape[1]
    right = St
    if gradient:
        right = np.hstack([St, (St[:, :, None] * A[:, None, :]).reshape(n, k * rank)])
    value = 0.0
    grad = np.zeros_like(A) if gradient else None
    for rows in _blocks(n):
        K = cdist(A[rows], A, "sqeuclidean")
        np.multiply(K, -gamma, out=K)
        np.exp(K, out=K)
        product = K @ right
        weighted = St[rows] * product[:, :k]
        value += float(weighted.sum())
        if gradient:
            WA = np.einsum("ic,icr->ir", St[rows], product[:, k:].reshape(-1, k, rank))
            grad[rows] = weighted.sum(axis=1)[:, None] * A[rows] - WA
    value /= n * n
    if gradient:
        grad *= -4.0 * gamma / (n * n)
        return value, grad
    return value


def hsic_linear(A: np.ndarray, St: np.ndarray, *, gradient: bool = False):
    """``‖ÃᵀS̃‖²_F / n² = ‖S̃ᵀA‖²_F / n²`` (``S̃ᵀH = S̃ᵀ``), and its gradient ``2 S̃S̃ᵀA / n²``."""
    n = A.shape[0]
    C = St.T @ A
    value = float(np.sum(C * C)) / (n * n)
    if gradient:
        return value, 2.0 * (St @ C) / (n * n)
    return value


def orthogonality_sq(A: np.ndarray, S: np.ndarray, *, gradient: bool = False):
    """FATR's ``‖AᵀS‖²_F`` (uncentred one-hot ``S``) and its gradient ``2 S Sᵀ A``."""
    C = S.T @ A
    value = float(np.sum(C * C))
    if gradient:
        return value, 2.0 * (S @ C)
    return value
