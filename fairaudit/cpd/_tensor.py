"""Dense CP (canonical polyadic) algebra for N-way arrays, mode 0 first.

A rank-``R`` CP model of an array ``X`` of shape ``(n, d_1, …, d_{N−1})`` is
``⟦F_0, F_1, …⟧ = Σ_r F_0[:, r] ∘ F_1[:, r] ∘ …`` with factor matrices ``F_m`` of shape
``(d_m, R)`` (Kolda & Bader 2009, §3). Mode 0 is the *sensitive mode*: its rows are the entities
(people) whose embedding ``A = F_0`` a fairness audit inspects.

Conventions used throughout :mod:`fairaudit.cpd`:

* the mode-``m`` unfolding ``X_(m)`` is ``moveaxis(X, m, 0).reshape(d_m, −1)`` (remaining modes
  in their original order, last index fastest); the matching Khatri–Rao product of the other
  factors has column ``r`` equal to ``kron(F_a[:, r], F_b[:, r], …)`` in that same order, so
  ``X_(m) ≈ F_m · KR(others)ᵀ``;
* the MTTKRP ``X_(m) · KR(others)`` and the Gram ``∗_{k≠m} F_kᵀF_k`` (Hadamard product) give the
  least-squares fit as a quadratic in ``F_m``:
  ``‖X − ⟦F⟧‖² = ‖X‖² − 2⟨F_m, MTTKRP⟩ + ⟨F_m G, F_m⟩``;
* ``weights`` (``c``, one per entity): entity ``u`` stands for ``c_u`` identical entities (a
  bootstrap resample's copies), so the fit is ``Σ_u c_u ‖x_u − ⟦F⟧_u‖²``. Only the sums over the
  entities change: for ``m ≥ 1`` the MTTKRP and Gram take ``F_0`` as ``diag(c) F_0`` on one side —
  exactly the pieces the repeated array gives, each row's own quantities (mode 0) unchanged.

Written with NumPy rather than tensorly: the fair methods need these pieces (MTTKRP, Gram,
unfoldings) separately inside their own block updates; tensorly is used in the tests as an
independent reference for plain CP.
"""

from __future__ import annotations

from functools import reduce

import numpy as np


def unfold(X: np.ndarray, mode: int) -> np.ndarray:
    """The mode-``mode`` unfolding ``X_(m)`` (a view for mode 0, a copy otherwise)."""
    if mode == 0:
        return X.reshape(X.shape[0], -1)
    return np.ascontiguousarray(np.moveaxis(X, mode, 0)).reshape(X.shape[mode], -1)


def khatri_rao(matrices: list[np.ndarray]) -> np.ndarray:
    """Column-wise Kronecker product; the first matrix's index varies slowest."""
    rank = matrices[0].shape[1]
    return reduce(lambda P, Q: (P[:, None, :] * Q[None, :, :]).reshape(-1, rank), matrices)


def others(factors: list[np.ndarray], mode: int) -> list[np.ndarray]:
    return [F for k, F in enumerate(factors) if k != mode]


def gram(factors: list[np.ndarray], mode: int, weights: np.ndarray | None = None) -> np.ndarray:
    """``∗_{k≠mode} F_kᵀ F_k`` (Hadamard product of the other factors' Grams); with entity
    ``weights`` ``F_0ᵀ diag(c) F_0`` for the entity factor (module docstring)."""
    grams = [(F * weights[:, None]).T @ F if k == 0 and weights is not None else F.T @ F for k, F in enumerate(factors) if k != mode]
    return reduce(np.multiply, grams)


def mttkrp(unfolded: np.ndarray, factors: list[np.ndarray], mode: int, weights: np.ndarray | None = None) -> np.ndarray:
    """``X_(m) · KR(other factors)`` from the precomputed unfolding ``X_(m)``; with entity
    ``weights`` (``mode ≥ 1``) the entity factor enters as ``diag(c) F_0`` (module docstring)."""
    if weights is not None and mode != 0:
        factors = [factors[0] * weights[:, None], *factors[1:]]
    return unfolded @ khatri_rao(others(factors, mode))


def reconstruct(factors: list[np.ndarray]) -> np.ndarray:
    """The full array ``⟦F_0, F_1, …⟧``."""
    shape = tuple(F.shape[0] for F in factors)
    return (factors[0] @ khatri_rao(factors[1:]).T).reshape(shape)


def solve_right(M: np.ndarray, G: np.ndarray) -> np.ndarray:
    """``M G⁻¹`` for a symmetric positive semi-definite ``G`` (pseudo-inverse if singular)."""
    try:
        # G is symmetric, so M G⁻¹ = (G⁻¹ Mᵀ)ᵀ. (NumPy's LU solve: scipy's cho_solve was
        # ~100× slower here for an R × R system with a few hundred right-hand sides.)
        return np.linalg.solve(G, M.T).T
    except np.linalg.LinAlgError:
        return M @ np.linalg.pinv(G, hermitian=True)


def normalise(factors: list[np.ndarray], return_weights: bool = False):
    """Give every non-sensitive factor unit-norm columns and move the norms into ``F_0``.

    The model ``⟦F⟧`` is unchanged; this fixes CP's scaling freedom so that the sensitive
    factor ``A = F_0`` carries the component weights (the normalised Kruskal form of Kolda &
    Bader 2009, §3.1). Zero columns are left as they are. With ``return_weights`` also returns
    the row vector by which ``F_0``'s columns were multiplied.
    """
    factors = [F.copy() for F in factors]
    weights = np.ones(factors[0].shape[1])
    for k in range(1, len(factors)):
        norms = np.linalg.norm(factors[k], axis=0)
        safe = np.where(norms > 0, norms, 1.0)
        factors[k] /= safe
        weights *= safe
    factors[0] *= weights
    return (factors, weights) if return_weights else factors


def leading_left_vectors(X: np.ndarray, mode: int, rank: int, rng: np.random.Generator, weights: np.ndarray | None = None) -> np.ndarray:
    """The ``rank`` leading left singular vectors of ``X_(m)`` (unit columns).

    From the eigen-decomposition of the ``d_m × d_m`` Gram ``X_(m) X_(m)ᵀ`` (no unfolding copy;
    with entity ``weights`` and ``m ≥ 1`` the sum over the entities weighted, as the repeated
    array's); when ``rank > d_m`` the missing columns are random unit vectors.
    """
    axes = [k for k in range(X.ndim) if k != mode]
    weighted = X * weights.reshape((-1,) + (1,) * (X.ndim - 1)) if weights is not None and mode != 0 else X
    gram_m = np.tensordot(weighted, X, axes=(axes, axes))
    values, vectors = np.linalg.eigh(gram_m)
    order = np.argsort(values)[::-1][: min(rank, X.shape[mode])]
    U = vectors[:, order]
    if rank > U.shape[1]:
        extra = rng.normal(size=(X.shape[mode], rank - U.shape[1]))
        U = np.hstack([U, extra / np.linalg.norm(extra, axis=0)])
    return U


def truncated_scores(X: np.ndarray, rank: int) -> np.ndarray:
    """Rows of ``X_(0)`` in its leading rank-``rank`` principal coordinates (``U_R Σ_R``)."""
    X0 = X.reshape(X.shape[0], -1)
    n, p = X0.shape
    if p <= n:
        values, vectors = np.linalg.eigh(X0.T @ X0)
        V = vectors[:, np.argsort(values)[::-1][:rank]]
        return X0 @ V
    values, vectors = np.linalg.eigh(X0 @ X0.T)
    order = np.argsort(values)[::-1][:rank]
    return vectors[:, order] * np.sqrt(np.clip(values[order], 0.0, None))
