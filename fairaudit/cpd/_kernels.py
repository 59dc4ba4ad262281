"""Independence penalties on the sensitive factor ``A`` and their analytic gradients.

``S`` is the one-hot matrix of the groups (``n × k``), ``H = I − 11ᵀ/n`` the centring matrix,
``Ã = HA`` and ``S̃ = HS``. The penalties, each *per unit λ* (Kim & Gittens 2021 [Kim21] §2,
eq. (2), App. A.3, footnote 4; Zhu, Hu & Caverlee 2018 for FATR, as [Kim21] §1 writes it):

* ``"fatr"``: ``‖AᵀS‖²_F`` (the orthogonality term; the ℓ2 term ``‖A‖²_F`` has its own weight);
* ``"hsic"``: ``‖ÃᵀS̃‖²_F / n² = ⟨HAAᵀH, HSSᵀH⟩ / n²`` — eq. (2) with linear kernels;
* ``"khsic"``: ``⟨K̃_A, K̃_S⟩ / n² = tr(K_A H K_S H) / n²`` — eq. (2), the biased HSIC estimate
  (Gretton et al. 2005), with the RBF kernel ``K[i, j] = exp(−γ‖x_i − x_j‖²)`` (App. A.3) on
  the rows of ``A`` and of ``S``.

The kernel on the sensitive side. The groups are categorical, so ``s_i`` is a one-hot row and the
RBF kernel on ``S`` takes two values: ``exp(−γ_S‖s_i − s_j‖²) = e^{−2γ_S} + (1 − e^{−2γ_S})·[g_i =
g_j]``. Centring removes the constant, so ``K̃_S = c_S · H S Sᵀ H`` with
``c_S = 1 − e^{−2γ_S}``; [Kim21] uses ``γ = 1`` (App. A.8, A.9), so ``c_S = 1 − e^{−2} ≈ 0.865``
(:data:`GROUP_KERNEL_SCALE`), which :func:`penalty` applies so that λ means what it means in the
paper. The functions below compute the ``S Sᵀ`` form; the normalised alignment ``nkhsic`` does
not depend on ``c_S`` at all.

With ``P = S̃ S̃ᵀ`` (``P[i, j] = [g_i = g_j] − p_{g_i} − p_{g_j} + ‖p‖²``, ``p`` the group
proportions) the KHSIC is ``Σ_ij P_ij K_ij / n²`` and its gradient with respect to row ``a_i`` is

    ∂/∂a_i = −(4γ / n²) Σ_j P_ij K_ij (a_i − a_j),

i.e. ``∇_A = −(4γ/n²)(diag(W1) A − W A)`` with ``W = P ∘ K_A`` (our derivation; the factor 4 is
2 from the symmetric double sum times 2 from the square; checked against finite differences and
a dense reference in the tests). It is computed in square blocks on and above the kernel's
diagonal (each exponential once; :func:`symmetric_product`), so that memory stays ``O(n k R)``
besides one cache-sized block; the time is ``O(n² k R)`` per evaluation.

Entities with counts (``weights`` ``c``; a bootstrap resample, whose copies of an entity have equal
rows). Row ``u`` stands for ``c_u`` identical rows and ``n = Σ c``: every sum over rows becomes a
sum over distinct rows weighted by ``c_u`` (pairs by ``c_u c_v``) — ``S̃`` centred with the weighted
means, ``P`` its ``UUᵀ`` with :func:`group_basis` weighted, and in every product the side summed
over carries ``diag(c) U`` (``Σ_ij P_ij K_ij = Σ_uv c_u c_v P_uv K_uv = Σ(cU ∘ K cU)``). The value is
the repeated rows' value; the gradient returned is *per copy*: the repeated rows' gradient at any
copy of row ``u`` (all copies get the same one when they have equal rows), i.e. ``∂/∂a_u`` of the
weighted value divided by ``c_u``. Feature selection holds its kernels over repeated rows so too
(:func:`fairaudit.kernels.pair_weighted`).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cholesky, solve_triangular

from .. import linalg, metrics
from ..kernels import rbf, rbf_row_blocks, rbf_symmetric_blocks

GROUP_GAMMA = 1.0
"""γ of the RBF kernel on the one-hot group rows ([Kim21] App. A.8, A.9: γ = 1)."""

GROUP_KERNEL_SCALE = 1.0 - float(np.exp(-2.0 * GROUP_GAMMA))
"""``c_S``: the centred RBF kernel on one-hot rows is ``c_S · HSSᵀH`` (module docstring)."""

BLAS_THREADS: int | None = 1
"""BLAS threads while a CP model is fitted or a kernel metric computed (``None``: leave BLAS
alone). The products here are thin (the kernel times ``(k−1)(R+1)`` columns, MTTKRPs with ``R``
columns), where a second thread buys little and costs a lot when the cores are shared: measured
on two cores with other work running (load ≈ 2.6), one KHSIC value-and-gradient pass took
4.3 ms with one OpenBLAS thread against 16.1 ms with two at n = 1000 (48.6 against 106.1 ms at
n = 3000), and the default CP audit of the ``two_groups`` sample 13.1 s against 31.0 s."""


def blas_threads():
    """Context manager applying :data:`BLAS_THREADS` (see :func:`fairaudit.linalg.blas_threads`)."""
    return linalg.blas_threads(BLAS_THREADS)


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
    median = metrics.median_distance(Z)
    if median is None:
        return 1.0
    return 1.0 / (2.0 * median * median)


def landmarks(codes: np.ndarray, size: int, random_state=0) -> np.ndarray:
    """Sorted indices of ``size`` landmark entities for :func:`khsic`'s Nyström approximation.

    Stratified by group with equal shares (a share larger than its group takes the whole group;
    the rest is drawn uniformly from the remaining entities), so that a small group's region of
    the embedding is covered as well as a large one's. ``random_state``: a seed or a
    ``numpy.random.Generator`` (drawn from).
    """
    codes = np.asarray(codes)
    n = len(codes)
    if size >= n:
        return np.arange(n)
    rng = np.random.default_rng(random_state)
    groups = np.unique(codes)
    share = size // len(groups)
    chosen = [rng.choice(np.flatnonzero(codes == g), min(share, int(np.sum(codes == g))), replace=False) for g in groups]
    taken = np.concatenate(chosen)
    rest = np.setdiff1d(np.arange(n), taken)
    extra = rng.choice(rest, size - len(taken), replace=False)
    return np.sort(np.concatenate([taken, extra]))


def group_basis(St: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """A basis ``U`` (``n × (k−1)``) with ``UUᵀ = S̃S̃ᵀ = P`` (with ``weights``: ``S̃ᵀS̃`` summed over
    the repeated rows, so that ``U`` is the repeated rows' basis held on the distinct ones).

    The rows of ``S̃`` sum to zero (``e_g − p``), so ``S̃`` has rank ``k − 1`` and one column is
    redundant: ``U = S̃ V₊`` with ``V₊`` the eigenvectors of ``S̃ᵀS̃`` (``k × k``) for its non-zero
    eigenvalues. KHSIC and its gradient only need ``P``, so they can use ``U`` instead of ``S̃``:
    for two groups this halves the kernel products (measured: one column instead of two).
    """
    values, vectors = np.linalg.eigh((St if weights is None else St * weights[:, None]).T @ St)
    keep = values > 1e-10 * max(float(values.max()), 1e-300)
    return St @ vectors[:, keep]


def khsic(A: np.ndarray, St: np.ndarray, gamma: float, *, gradient: bool = False, landmarks: np.ndarray | None = None, weights=None):
    """``tr(K_A H S Sᵀ H) / n²`` (and its gradient in ``A`` if asked; ``weights``: module docstring).

    ``St`` is the centred one-hot matrix ``S̃ = HS`` (or any ``U`` with ``UUᵀ = S̃S̃ᵀ``; it is
    reduced to :func:`group_basis` first). ``P = UUᵀ`` is never formed: with ``W = P ∘ K``,
    ``Σ_ij W_ij = Σ(U ∘ K U)``, ``W1 = rowsum(U ∘ K U)`` and ``W A = Σ_c diag(u_c) K diag(u_c) A``,
    so the evaluation needs one kernel pass and one matrix product ``K · [U, u_1 ∘ A, …]`` (BLAS;
    :func:`symmetric_product`) —
    measured 4× faster than forming ``P ∘ K``.

    ``landmarks`` (row indices, :func:`landmarks`): the Nyström approximation
    ``K ≈ C W⁻¹ Cᵀ`` instead (:func:`khsic_nystrom`), ``O(n m)`` instead of ``O(n²)``.
    """
    A = np.asarray(A, dtype=float)
    U = group_basis(St, weights)
    if landmarks is not None:
        return khsic_nystrom(A, U, gamma, landmarks, gradient=gradient, weights=weights)
    rows, rank = A.shape
    k = U.shape[1]
    n, Uc = (rows, U) if weights is None else (float(weights.sum()), U * weights[:, None])
    right = Uc
    if gradient:
        right = np.hstack([Uc, (Uc[:, :, None] * A[:, None, :]).reshape(rows, k * rank)])
    product = symmetric_product(A, gamma, right)
    weighted = U * product[:, :k]
    value = float(weighted.sum() if weights is None else weights @ weighted.sum(axis=1)) / (n * n)
    if gradient:
        WA = np.einsum("ic,icr->ir", U, product[:, k:].reshape(rows, k, rank))
        return value, (-4.0 * gamma / (n * n)) * (weighted.sum(axis=1)[:, None] * A - WA)
    return value


def symmetric_product(A: np.ndarray, gamma: float, right: np.ndarray, *, norm: bool = False):
    """``K @ right`` for the RBF kernel ``K`` of ``A``'s rows, from the blocks on and above its
    diagonal (:func:`fairaudit.kernels.rbf_symmetric_blocks`: each exponential once); with
    ``norm`` also ``‖K‖²_F``."""
    product = np.zeros((A.shape[0], right.shape[1]))
    sq_norm = 0.0
    for rows, columns, K in rbf_symmetric_blocks(A, gamma):
        product[rows] += K @ right[columns]
        if rows.start == columns.start:
            sq_norm += float(np.vdot(K, K)) if norm else 0.0
            continue
        product[columns] += K.T @ right[rows]
        sq_norm += 2.0 * float(np.vdot(K, K)) if norm else 0.0
    return (product, sq_norm) if norm else product


NYSTROM_ROWS = 2000
"""Entities above which ``kernel="auto"`` (the audit's default) approximates the KHSIC kernel."""

NYSTROM_LANDMARKS = 300
"""Default number of Nyström landmarks. Measured on the 4,165 × 12 credit benchmark table (every
rank 1–10 and the 10-point sweep, vanilla and KHSIC): 300 landmarks against 500 cut the KHSIC
fits' CPU time from 35.6 to 21.3 s (the landmarks' Cholesky factor is cubic in them) and moved
the recorded residual fit by at most 0.005, nKHSIC by 3·10⁻⁵ and balanced leakage by 0.006; the
approximate penalty's own error grows (the exact KHSIC at the fitted embedding ~20 % higher at
rank 10, λ_ref)."""

NYSTROM_DTYPE = np.float32
"""Precision of the Nyström kernel block ``C`` (entities × landmarks) and of the two products with
it; the landmarks' own kernel, its Cholesky factor and everything after are float64. Measured on
two cores (load ≈ 10): the block and its products 7.1–7.5 ms in float32 against 16.4–17.9 ms in
float64 at 4,165 entities × 500 landmarks, rank 10; the value and gradient agree with float64's
to ~1e-6 relative (tests), far below the approximation's own error (~1 %)."""

NYSTROM_JITTER = 1e-8
"""Ridge added to the landmarks' kernel, times the number of landmarks (raised tenfold until the
Cholesky factorisation succeeds)."""


def khsic_nystrom(A: np.ndarray, U: np.ndarray, gamma: float, landmarks: np.ndarray, *, gradient: bool = False, weights=None):
    """KHSIC with the Nyström kernel ``K̂ = C W⁻¹ Cᵀ`` (Williams & Seeger 2001): ``C = K(A, L)``,
    ``W = K(L, L) + εI`` on the landmark rows ``L = A[landmarks]``, which move with ``A``.

    Value ``tr(Uᵀ K̂ U)/n² = tr(Fᵀ W⁻¹ F)/n²`` with ``F = CᵀU``. Gradient (our derivation, the
    exact gradient of the approximate value; checked against finite differences in the tests):
    with ``B = W⁻¹F``, ``d value = (2⟨UBᵀ, dC⟩ − ⟨BBᵀ, dK_LL⟩)/n²``; each kernel entry's
    derivative is ``−2γ k(x, y)(x − y)ᵀ(dx − dy)``, so with ``Γ = UBᵀ ∘ C`` and
    ``Ω = BBᵀ ∘ K_LL`` the rows get ``−(4γ/n²)(diag(Γ1)A − ΓL)`` and the landmarks in addition
    ``−(4γ/n²)(diag(Γᵀ1)L − ΓᵀA − diag(Ω1)L + ΩL)``. Cost ``O(n m k (R + 1) + m³)``: the kernel
    block ``C`` and two products with it, in :data:`NYSTROM_DTYPE`.

    With ``weights`` (module docstring) ``landmarks`` are distinct rows, a row once per copy drawn
    (a repeated landmark is a copy of the same row: ``K̂`` is unchanged, ``W`` singular but for
    the jitter). Every copy of a row moves alike — the landmark term of a row that is a landmark
    goes to all its copies, ``1/c_u`` of it to each — where on the repeated rows only the copy
    drawn as a landmark would get it: the one step of the CP family that does not treat copies
    alike (``docs/architecture.md``, The CP family → Replicates on distinct entities).
    """
    n_rows, rank = A.shape
    n = n_rows if weights is None else float(weights.sum())
    k = U.shape[1]
    m = len(landmarks)
    L = A[landmarks]
    dtype = NYSTROM_DTYPE
    A_low = A.astype(dtype, copy=False)
    U_low = (U if weights is None else U * weights[:, None]).astype(dtype, copy=False)
    sq = gamma * np.einsum("ij,ij->i", A_low, A_low)
    K_LL = rbf(L, L, gamma)
    # Γ = UBᵀ ∘ C is never formed (it would be an n × m temporary per term): with u_c, b_c the
    # columns of U and B, Γ1 = Σ_c u_c ∘ C b_c, ΓL = Σ_c u_c ∘ C(b_c ∘ L), Γᵀ1 = Σ_c b_c ∘ F_c and
    # ΓᵀA = Σ_c b_c ∘ Cᵀ(u_c ∘ A): two products with C, one of them also giving F = CᵀU — that
    # one block by block as C is filled (measured 1.47 against 1.86 ms for C and then the product).
    left = np.hstack([U_low, (U_low[:, :, None] * A_low[:, None, :]).reshape(n_rows, k * rank)]) if gradient else U_low
    C = np.empty((n_rows, m), dtype=dtype)
    P_low = np.zeros((m, left.shape[1]), dtype=dtype)
    for rows, block in rbf_row_blocks(A_low, A_low[landmarks], dtype(gamma), sq_x=sq, sq_y=sq[landmarks], out=C):
        P_low += block.T @ left[rows]
    P = P_low.astype(float)
    F = P[:, :k]
    jitter = NYSTROM_JITTER * m
    while True:
        try:
            # scipy's LAPACK call without the finiteness check: 0.41 ms against numpy's 0.99 ms at
            # 300 landmarks (one thread), once per pass
            ridged = K_LL.copy()
            ridged.flat[:: m + 1] += jitter
            factor = cholesky(ridged, lower=True, overwrite_a=True, check_finite=False)
            break
        except np.linalg.LinAlgError:
            jitter *= 10.0
    half = solve_triangular(factor, F, lower=True)
    value = float(np.sum(half * half)) / (n * n)
    if not gradient:
        return value
    B = solve_triangular(factor.T, half, lower=False)
    Q = (C @ np.hstack([B, (B[:, :, None] * L[:, None, :]).reshape(m, k * rank)]).astype(dtype)).astype(float)
    gamma_rows = np.einsum("ic,ic->i", U, Q[:, :k])
    gamma_l = np.einsum("ic,icr->ir", U, Q[:, k:].reshape(n_rows, k, rank))
    gamma_cols = np.einsum("jc,jc->j", B, F)
    gamma_t_a = np.einsum("jc,jcr->jr", B, P[:, k:].reshape(m, k, rank))
    Omega = (B @ B.T) * K_LL
    grad = gamma_rows[:, None] * A - gamma_l
    landmark_terms = gamma_cols[:, None] * L - gamma_t_a - (Omega.sum(axis=1)[:, None] * L - Omega @ L)
    if weights is None:
        grad[landmarks] += landmark_terms
    else:  # every copy moves alike (docstring); a row drawn twice gets both terms
        np.add.at(grad, landmarks, landmark_terms / weights[landmarks, None])
    grad *= -4.0 * gamma / (n * n)
    return value, grad


def hsic_linear(A: np.ndarray, St: np.ndarray, *, gradient: bool = False, weights=None):
    """``‖ÃᵀS̃‖²_F / n² = ‖S̃ᵀA‖²_F / n²`` (``S̃ᵀH = S̃ᵀ``), and its gradient ``2 S̃S̃ᵀA / n²``
    (``weights``: ``S̃ᵀ diag(c) A``, module docstring)."""
    n = A.shape[0] if weights is None else float(weights.sum())
    C = (St if weights is None else St * weights[:, None]).T @ A
    value = float(np.sum(C * C)) / (n * n)
    if gradient:
        return value, 2.0 * (St @ C) / (n * n)
    return value


def orthogonality_sq(A: np.ndarray, S: np.ndarray, *, gradient: bool = False, weights=None):
    """FATR's ``‖AᵀS‖²_F`` (uncentred one-hot ``S``) and its gradient ``2 S Sᵀ A`` (``weights``:
    ``Sᵀ diag(c) A``, module docstring)."""
    C = (S if weights is None else S * weights[:, None]).T @ A
    value = float(np.sum(C * C))
    if gradient:
        return value, 2.0 * (S @ C)
    return value


def penalty(method: str, Z: np.ndarray, S: np.ndarray, St: np.ndarray, gamma: float | None = None, *, gradient: bool = False, landmarks=None, weights=None):
    """The unweighted penalty of ``method`` at the embedding ``Z`` (and its gradient in ``Z``):
    KHSIC with the RBF kernel on both sides (:func:`khsic` times :data:`GROUP_KERNEL_SCALE`),
    HSIC (:func:`hsic_linear`) or FATR's ``‖ZᵀS‖²`` (:func:`orthogonality_sq`); ``S`` is the
    one-hot group matrix, ``St`` its centred copy (with ``weights``, centred with the weighted
    means; the rows' counts, module docstring)."""
    if method == "khsic":
        result = khsic(Z, St, gamma, gradient=gradient, landmarks=landmarks, weights=weights)
        if gradient:
            return GROUP_KERNEL_SCALE * result[0], GROUP_KERNEL_SCALE * result[1]
        return GROUP_KERNEL_SCALE * result
    if method == "hsic":
        return hsic_linear(Z, St, gradient=gradient, weights=weights)
    if method == "fatr":
        return orthogonality_sq(Z, S, gradient=gradient, weights=weights)
    raise ValueError(f"unknown method {method!r}")
