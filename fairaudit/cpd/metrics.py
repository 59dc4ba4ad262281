"""The CP family's metrics (Kim & Gittens 2021, App. A.6) and the penalties as functions of ``A``.

``A`` is an entity embedding, one row per entity — in the audit the *normalised* embedding
``Â`` of :class:`~fairaudit.cpd.FairCPD` (each column's mean square 1; whitened for a matrix),
so that CP's indeterminacy, which changes nothing about the model, cannot change a metric;
``groups`` are integer group codes per entity. The leakage metrics ``unfairness`` / ``unfairness_balanced`` are
the shared ones of :mod:`fairaudit.metrics`, computed on ``A``.
"""

from __future__ import annotations

import numpy as np

from . import _kernels, _tensor


def residual_fit(X: np.ndarray, factors: list[np.ndarray]) -> float:
    """``‖X − ⟦A, B, C, …⟧‖_F / ‖X‖_F`` ([Kim21] App. A.6). 0 is a perfect fit."""
    norm = float(np.linalg.norm(X))
    return float(np.linalg.norm(X - _tensor.reconstruct(factors)) / norm) if norm > 0 else 0.0


def orthogonality(A: np.ndarray, groups: np.ndarray) -> float:
    """FATR's constraint violation ``‖AᵀS‖_F`` with ``S`` the one-hot group matrix ([Zhu18];
    [Kim21] App. A.6). Theorem 1 of [Kim21]: 0 does *not* mean the groups are hidden."""
    return float(np.linalg.norm(_kernels.one_hot(groups).T @ A))


NKHSIC_MAX_ROWS = 2000
"""Entities above which :func:`nkhsic` uses a seeded subsample (its cost is ``O(n²)``; at 2,000 rows
one evaluation is a 4-million-entry kernel, the same size as the exact KHSIC penalty's limit)."""


def nkhsic(A: np.ndarray, groups: np.ndarray, *, gamma: float | None = None, max_rows: int = NKHSIC_MAX_ROWS, random_state: int | None = 0) -> float:
    """Normalised KHSIC (centred kernel alignment) ``⟨K̃_A, K̃_S⟩ / (‖K̃_A‖_F ‖K̃_S‖_F)``.

    [Kim21] App. A.6, with the RBF kernel on the rows of ``A`` (``gamma``; default the median
    heuristic on ``A`` itself, so the value does not depend on the embedding's scale) and
    ``K_S = SSᵀ`` on the one-hot groups (every RBF kernel on one-hot rows gives the same centred
    kernel up to a factor, which the normalisation removes). In [0, 1]; 0 means no dependence
    that the kernels can see. Above ``max_rows`` entities a seeded subsample is used
    (the cost is ``O(n²)``).
    """
    A = np.asarray(A, dtype=float)
    groups = np.asarray(groups)
    if len(A) > max_rows:
        keep = np.sort(np.random.default_rng(random_state).choice(len(A), max_rows, replace=False))
        A, groups = A[keep], groups[keep]
    S = _kernels.centred(_kernels.one_hot(groups))
    if gamma is None:
        gamma = _kernels.median_gamma(A, max_rows=max_rows, random_state=random_state)
    # ⟨K̃_A, K̃_S⟩ = Σ(S̃ ∘ K S̃) and ‖HKH‖²_F = ‖K‖²_F − 2‖K1‖²/n + (1ᵀK1)²/n², from the kernel's
    # blocks on and above its diagonal (no centred n × n copy).
    n = len(A)
    right = np.hstack([S, np.ones((n, 1))])
    with _kernels.blas_threads():
        product, sq_norm = _kernels.symmetric_product(A, gamma, right, norm=True)
    row_sums = product[:, -1]
    norm_a = np.sqrt(max(sq_norm - 2.0 * float(row_sums @ row_sums) / n + float(row_sums.sum()) ** 2 / n**2, 0.0))
    norm_s = float(np.linalg.norm(S.T @ S))
    if norm_a == 0 or norm_s == 0:
        return 0.0
    return float(np.sum(S * product[:, :-1]) / (norm_a * norm_s))


def penalty(
    A: np.ndarray, groups: np.ndarray, method: str, gamma: float | None = None, *, whiten: bool = False, landmarks=None
) -> float:
    """The unweighted penalty of ``method`` for the factor ``A`` — evaluated, like
    :class:`FairCPD` does, on its normalised embedding (what FairCPD multiplies by λ;
    ``whiten=True`` for a matrix, 2-way CP: see :func:`~fairaudit.cpd.normalised_embedding`;
    ``landmarks``: KHSIC by the Nyström approximation)."""
    from .estimator import normalised_embedding

    if method == "none":
        return 0.0
    if method == "khsic" and gamma is None:
        raise ValueError("the KHSIC penalty needs gamma")
    Z = normalised_embedding(np.asarray(A, dtype=float), whiten=whiten)
    S = _kernels.one_hot(groups)
    return _kernels.penalty(method, Z, S, _kernels.centred(S), gamma, landmarks=landmarks)
