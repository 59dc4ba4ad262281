"""Centred kernel alignment of feature-weighted kernels, with analytic gradients.

The *centred kernel alignment* (Cristianini et al. 2002; Cortes et al. 2012), the normalised form
of the traces in Xing, Liu, Chen, Li, "Fairness-Aware Unsupervised Feature Selection"
(arXiv:2106.02216, eqs. 1, 2, 4), is

    A_c(K, T) = ⟨H K H, H T H⟩_F / (‖H K H‖_F ‖H T H‖_F),     H = I − 11ᵀ/n,

between the kernel ``K_w`` of the feature-weighted data and a *target* kernel ``T`` (the kernel of
all features, of the protected attribute, ...). This module evaluates weighted sums
``J(w) = Σ_i c_i A_c(K_w, T_i)`` and their exact gradient in ``w`` with three back-ends:

``ExactRBF``
    ``K_w[a, b] = exp(−γ_w Σ_j w_j (x_aj − x_bj)²)`` formed as an ``n × n`` matrix;
    O(n² d) time and O(n²) memory per evaluation.
``NystroemRBF``
    The same kernel through the Nyström approximation on ``L`` landmark rows ``Z``:
    ``K̂_w = C_w W_w⁻¹ C_wᵀ`` with ``C_w = K_w(X, Z)`` and ``W_w = K_w(Z, Z) + εI``. Every
    alignment is computed from ``n × L`` and ``L × L`` matrices (O(n L d) time, O(n L) memory),
    and the gradient is differentiated *through the approximation*, so projected gradient on
    the approximate objective is exact for that objective.
``Linear``
    ``K_w = X diag(w) Xᵀ``. With centred ``X_c`` and ``C = X_cᵀ X_c``, ``‖H K_w H‖² = wᵀ (C∘C) w``
    and ``⟨H K_w H, F Fᵀ⟩ = Σ_j w_j ‖Fᵀ x_cj‖²`` — closed form, exact at any ``n`` in O(d²).

This is the machinery of ``FUFS(formulation="alignment")`` (ours) and of the audit's
``alignment_data`` / ``alignment_protected`` metrics; [Xing21] itself uses the *unnormalised*
centred traces ``Tr(HKHT)`` (:mod:`fairaudit.fs._paper`). Choices that are ours: the weights
enter the RBF kernel *linearly* in the squared distance (``K_{X diag(√w)}``), so a feature at
weight 0 still has a non-zero gradient and can come back; and the bandwidth is
rescaled by the total weight, ``γ_w = γ d / Σ_j w_j``, so a kernel on ``m`` selected features
has the same typical scale as the kernel on all ``d`` (``Σ w`` is fixed by the constraint, so the
rescaling is a constant and does not enter the gradient).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import cho_factor, cho_solve, lapack, solve_triangular

from ..kernels import centred_weighted, rbf, rbf_row_blocks, repeated_rows


def project_capped_simplex(v: np.ndarray, total: float, iterations: int = 100) -> np.ndarray:
    """Euclidean projection of ``v`` onto ``{w ∈ [0, 1]^d : Σ w = total}``.

    The projection is ``clip(v − τ, 0, 1)`` for the scalar ``τ`` at which the sum equals
    ``total`` (KKT conditions of the projection); the sum is monotone in ``τ``, so bisection finds
    it to machine precision. ``total = d`` gives all ones, ``total = 0`` all zeros.
    """
    v = np.asarray(v, dtype=float)
    d = v.size
    if total >= d:
        return np.ones(d)
    if total <= 0:
        return np.zeros(d)
    low, high = float(v.min()) - 1.0, float(v.max())  # sum(low) = d ≥ total ≥ 0 = sum(high)
    for _ in range(iterations):
        tau = 0.5 * (low + high)
        if np.clip(v - tau, 0.0, 1.0).sum() > total:
            low = tau
        else:
            high = tau
        if high - low <= 1e-15 * max(1.0, abs(tau)):
            break
    return np.clip(v - 0.5 * (low + high), 0.0, 1.0)


def _inner(a: np.ndarray, b: np.ndarray) -> float:
    """Frobenius inner product ``⟨a, b⟩`` (einsum: measured faster here than BLAS ``vdot``)."""
    return float(np.einsum("ij,ij->", a, b))


def centred_factor(F: np.ndarray) -> np.ndarray:
    """``H F``: the factor of the centred kernel ``H F Fᵀ H``."""
    F = np.asarray(F, dtype=float)
    return F - F.mean(axis=0)


def _sq_dist_weighted(A: np.ndarray, B: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``Σ_j w_j (a_j − b_j)²`` for every row pair of ``A`` and ``B`` (non-negative): ``‖a‖²_w + ‖b‖²_w
    − 2⟨a, b⟩_w``, evaluated in that order in one array."""
    Aw = A * w
    out = (Aw * A).sum(axis=1)[:, None] + ((B * w) * B).sum(axis=1)[None, :]
    cross = Aw @ B.T
    cross *= 2.0
    out -= cross
    np.maximum(out, 0.0, out=out)
    return out


def _rbf_weighted(A: np.ndarray, B: np.ndarray, w: np.ndarray, gamma: float) -> np.ndarray:
    """``exp(−γ Σ_j w_j (a_j − b_j)²)`` for every row pair, in one array."""
    out = _sq_dist_weighted(A, B, w)
    out *= -gamma
    return np.exp(out, out=out)


def _weighted_distance_gradient(U: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``Σ_ab U_ab (A_aj − B_bj)²`` for every column ``j`` (the chain rule through a distance)."""
    return (A * A).T @ U.sum(axis=1) - 2.0 * np.einsum("aj,aj->j", A, U @ B) + (B * B).T @ U.sum(axis=0)


class _Target:
    """A fixed target kernel, in the form its back-end needs (opaque outside this module)."""

    def __init__(self, kind: str, data, norm: float, summed=None):
        self.kind = kind
        self.data = data
        self.norm = norm
        self.summed = summed  # a factor's rows summed over each distinct row's copies (Nyström with repeated rows)


class ExactRBF:
    """Exact RBF kernels: ``n × n`` matrices (use up to a few thousand rows).

    Identical rows are kept once (:func:`fairaudit.kernels.distinct_rows`) with their counts ``c``,
    in the convention of :func:`fairaudit.kernels.centre` (which FUFS's traces share): kernels are
    those of the distinct rows, centring uses the count-weighted means, and targets carry
    ``c_u c_v`` (:func:`fairaudit.kernels.pair_weighted`), so that a Frobenius product of a kernel
    with a target is the sum over all rows, and the gradient's ``G ∘ K`` carries the counts. A
    bootstrap resample (about 63 % of its rows distinct) then costs 0.4 of the kernel cells;
    without repeated rows nothing changes."""

    name = "exact"

    def __init__(self, X: np.ndarray, gamma: float):
        X = np.asarray(X, dtype=float)
        self.n, self.d = X.shape
        self.X, self._counts, self._inverse = repeated_rows(X) or (X, None, None)
        self.gamma = float(gamma)

    def describe(self) -> str:
        return f"exact RBF kernel ({self.n}×{self.n})"

    def _gamma(self, total: float) -> float:
        return self.gamma * self.d / total

    def kernel(self, w: np.ndarray, total: float) -> np.ndarray:
        """The kernel of the (distinct) rows."""
        return _rbf_weighted(self.X, self.X, w, self._gamma(total))

    def _centred(self, K: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """``(H K H, its pair-weighted copy, ‖H K H‖_F)`` over the repeated rows
        (:func:`fairaudit.kernels.centred_weighted`)."""
        centred, weighted = centred_weighted(K, self._counts)
        return centred, weighted, np.sqrt(_inner(centred, weighted))

    def _target_matrix(self, K: np.ndarray) -> _Target:
        _, weighted, norm = self._centred(K)
        return _Target("matrix", weighted, norm)

    def target_weights(self, w: np.ndarray, total: float) -> _Target:
        return self._target_matrix(self.kernel(w, total))

    def target_factor(self, F: np.ndarray) -> _Target:
        F = centred_factor(F)
        norm = float(np.linalg.norm(F.T @ F))
        if self._counts is not None:  # entry (u, v): Σ over the copies a of u and b of v of (FFᵀ)_ab (copies may differ in F)
            F = sum_copies(F, self._inverse, self.X.shape[0])
        return _Target("matrix", F @ F.T, norm)

    def alignments(self, w: np.ndarray, total: float, targets) -> np.ndarray:
        """``A_c(K_w, T_i)`` for every target, in one pass over the kernel's row blocks
        (:func:`fairaudit.kernels.rbf_row_blocks`) without the centred kernel: with ``a = K c``
        (``c`` the counts, 1 without repeated rows), ``‖HKH‖² = Σ c_u c_v K²_uv − 2 Σ c_u a_u²/n +
        (cᵀa)²/n²`` and ``⟨HKH, T⟩ = ⟨K, T⟩`` for a centred target. The audit's measurement of a
        selection: 0.57–1.2 ms against 2.0–4.1 ms forming the kernel and its centred copy (385
        distinct rows; the same values to 3·10⁻¹⁵)."""
        w = np.asarray(w, dtype=float)
        used = np.flatnonzero(w > 0)
        Z = self.X[:, used] * np.sqrt(w[used])  # Σ_j w_j (x_aj − x_bj)² = ‖z_a − z_b‖²
        counts = self._counts
        c = counts if counts is not None else np.ones(self.X.shape[0])
        a = np.empty(Z.shape[0])
        squares, inner = 0.0, np.zeros(len(targets))
        for rows, block in rbf_row_blocks(Z, Z, self._gamma(total)):
            a[rows] = block @ c
            for i, t in enumerate(targets):
                inner[i] += _inner(block, t.data[rows])
            if counts is None:
                squares += _inner(block, block)
            else:
                squares += float(counts[rows] @ (np.square(block, out=block) @ counts))
        norm2 = squares - 2.0 * float((c * a) @ a) / self.n + float(c @ a) ** 2 / self.n**2
        if norm2 <= 1e-12 * squares:  # every row identical under w: no structure to align
            return np.zeros(len(targets))
        norms = np.array([t.norm for t in targets])
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(norms > 0, inner / (np.sqrt(norm2) * norms), 0.0)

    def value_grad(self, w, total, coefs, targets, gradient: bool = True):
        """``J = Σ c_i A_c(K_w, T_i)``, its gradient in ``w`` and the alignments ``A_c(K_w, T_i)``."""
        if not gradient:
            alignments = self.alignments(w, total, targets)
            return float(np.dot(coefs, alignments)), None, alignments
        K = self.kernel(w, total)
        Kc, weighted, norm = self._centred(K)
        if norm == 0.0:  # every row identical under w: no structure to align
            return 0.0, np.zeros(self.d), np.zeros(len(targets))
        alignments = np.array([_inner(Kc, t.data) / (norm * t.norm) if t.norm > 0 else 0.0 for t in targets])
        value = float(np.dot(coefs, alignments))
        # dJ/dK = Σ c_i T̂_i / ‖K̃‖ − J K̃ / ‖K̃‖²  (T̂ = centred target / its norm; ⟨K̃, T̂⟩ = ⟨K, T̂⟩)
        G = (-value / norm**2) * weighted
        for c, t in zip(coefs, targets, strict=True):
            if t.norm > 0 and c != 0:
                G += (c / (norm * t.norm)) * t.data
        G *= K  # dK/dw_j = −γ_w K ∘ D_j
        grad = -self._gamma(total) * _weighted_distance_gradient(G, self.X, self.X)
        return value, grad, alignments


class NystroemRBF:
    """RBF kernels through the Nyström approximation on ``n_landmarks`` rows (seeded)."""

    name = "nystroem"

    def __init__(
        self,
        X: np.ndarray,
        gamma: float,
        n_landmarks: int = 300,
        random_state=None,
        jitter: float = 1e-8,
        max_target_rank: int = 64,
    ):
        self.X = np.asarray(X, dtype=float)
        self.n, self.d = self.X.shape
        self.gamma = float(gamma)
        rng = np.random.default_rng(random_state)
        L = min(int(n_landmarks), self.n)
        self.landmarks = np.sort(rng.choice(self.n, size=L, replace=False))
        self.Z = self.X[self.landmarks]
        self.jitter = float(jitter)
        self.max_target_rank = int(max_target_rank)

    @functools.cached_property
    def _distinct(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The distinct rows with their counts and each row's distinct row
        (:func:`fairaudit.kernels.repeated_rows`; ``None`` when no row repeats), found when first
        needed — by :meth:`target_factor` and :meth:`alignments`: the gradient-free alignments
        (the audit's measurements) work on the distinct rows with their counts; the gradient and
        the landmarks (drawn among every row) do not."""
        return repeated_rows(self.X)

    def describe(self) -> str:
        return f"Nyström RBF kernel with {len(self.landmarks)} landmark rows (of {self.n})"

    def _gamma(self, total: float) -> float:
        return self.gamma * self.d / total

    def _blocks(self, w, total, rows: np.ndarray | None = None):
        """``(C, W_k, W)``: the kernel of ``rows`` (default: every row) with the landmarks, the
        landmarks' own and its ridged copy."""
        g = self._gamma(total)
        C = _rbf_weighted(self.X if rows is None else rows, self.Z, w, g)
        Wk = _rbf_weighted(self.Z, self.Z, w, g)
        L = Wk.shape[0]
        W = Wk + self.jitter * L * np.eye(L)
        return C, Wk, W

    def factor(self, w: np.ndarray, total: float, rows: np.ndarray | None = None, counts: np.ndarray | None = None) -> np.ndarray:
        """Centred ``F`` with ``H K̂_w H = F Fᵀ`` (``F = H C V Λ^{-1/2}``, ``W = VΛVᵀ``) of every row,
        or of ``rows`` standing for ``counts`` copies each (centred with the count-weighted mean)."""
        C, _, W = self._blocks(w, total, rows)
        values, vectors = np.linalg.eigh(W)
        values = np.maximum(values, self.jitter)
        F = C @ (vectors / np.sqrt(values))
        return centred_factor(F) if counts is None else F - (counts @ F) / self.n

    def target_weights(self, w: np.ndarray, total: float) -> _Target:
        """The target ``H K̂_w H`` (:meth:`target_factor` of :meth:`factor`). With repeated rows the
        factor is that of the distinct rows, centred and truncated with their counts ``c``: every
        copy of a row has the same factor row, so the factor of every row is its rows gathered
        (``data``) and the sum over a row's copies is ``c_u F_u`` (``summed``) — the same target as
        over every row in 0.63 of the products (a bootstrap resample of the credit table)."""
        if self._distinct is None:
            return self.target_factor(self.factor(w, total))
        rows, counts, inverse = self._distinct
        F = self._leading(self.factor(w, total, rows, counts), counts)
        return _Target("factor", F[inverse], float(np.linalg.norm((F * counts[:, None]).T @ F)), F * counts[:, None])

    def _leading(self, F: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
        """``F`` kept to the ``max_target_rank`` leading directions of ``Fᵀ diag(c) F``."""
        if F.shape[1] <= self.max_target_rank:
            return F
        _, vectors = np.linalg.eigh(F.T @ (F if counts is None else F * counts[:, None]))
        return F @ vectors[:, -self.max_target_rank :]

    def target_factor(self, F: np.ndarray) -> _Target:
        """A fixed target ``F Fᵀ`` (centred), kept to its ``max_target_rank`` leading directions:
        the alignment's cost is O(n L r) in the target's rank ``r`` (ours: the leading 64 of a
        Nyström factor's ``L`` directions carry all but a sliver of its Frobenius norm)."""
        F = self._leading(centred_factor(F))
        summed = None if self._distinct is None else sum_copies(F, self._distinct[2], self._distinct[0].shape[0])
        return _Target("factor", F, float(np.linalg.norm(F.T @ F)), summed)

    def _inverse(self, W: np.ndarray) -> np.ndarray:
        B = cho_solve(cho_factor(W), np.eye(W.shape[0]))
        return 0.5 * (B + B.T)

    @staticmethod
    def _aligned(B: np.ndarray, P: np.ndarray, Qs, targets) -> tuple[float, np.ndarray, np.ndarray]:
        """``(‖H K̂ H‖², alignments, BP)`` from ``B = W⁻¹``, ``P = C̃ᵀC̃`` and ``Q_i = C̃ᵀF_i``."""
        BP = B @ P
        norm2 = float(np.sum(BP * BP.T))  # tr(B P B P)
        if norm2 <= 0.0:
            return norm2, np.zeros(len(targets)), BP
        norm = np.sqrt(norm2)
        return norm2, np.array(
            [float(np.sum((B @ Q) * Q)) / (norm * t.norm) if t.norm > 0 else 0.0 for Q, t in zip(Qs, targets, strict=True)]
        ), BP

    def alignments(self, w: np.ndarray, total: float, targets) -> np.ndarray:
        """``A_c(K̂_w, T_i)`` for every target (the gradient-free evaluation: the audit's
        measurement), from the rows distinct *on the columns ``w`` uses* with their counts ``c``
        (the kernel depends on those columns alone; a bootstrap resample's repeated rows and, on
        one or two columns of few values, rows that differ elsewhere): ``C̃ = C − c·C/n``,
        ``P = C̃ᵀ diag(c) C̃``, ``Q_i = C̃ᵀ G_i`` with ``G_i`` the target factor's rows summed over
        each such row's copies — the same quantities as over every row. With ``W = RRᵀ``
        (Cholesky), ``‖H K̂ H‖² = tr(W⁻¹PW⁻¹P) = ‖R⁻¹PR⁻ᵀ‖²`` and ``⟨H K̂ H, F_iF_iᵀ⟩ = ‖R⁻¹Q_i‖²``:
        two triangular solves instead of ``W⁻¹`` and its products.

        A bootstrap replicate of the 4,165-row credit table: 24 → 15–18 ms a selection (docs/fs.md,
        fifth pass). The values agree with the computation over every row (:meth:`value_grad`) to
        8·10⁻⁸ relative on single-feature selections (6·10⁻¹⁰ on wider ones): ``W`` (ridged by
        ``10⁻⁸ L``) is ill-conditioned on one feature, and the same code on the rows in another
        order moves them by up to 2·10⁻⁸."""
        w = np.asarray(w, dtype=float)
        used = np.flatnonzero(w > 0)
        if self._distinct is None:
            X, counts, summed = self.X, None, [t.data for t in targets]
        else:
            X, counts, _ = self._distinct
            summed = [t.summed for t in targets]
        X = X[:, used]
        groups = _groups_of_rows(X)
        if groups is not None:  # rows equal on the used columns: one row, their counts and targets added
            order, starts = groups
            X = X[order[starts]]
            counts = np.add.reduceat(np.ones(order.size) if counts is None else counts[order], starts)
            summed = [np.add.reduceat(G[order], starts, axis=0) for G in summed]
        scale = np.sqrt(w[used])
        g = self._gamma(total)
        Z = self.Z[:, used] * scale
        C = rbf(X * scale, Z, g)
        W = rbf(Z, Z, g)
        L = W.shape[0]
        W.flat[:: L + 1] += self.jitter * L
        R, info = lapack.dpotrf(W, lower=True, clean=True, overwrite_a=True)
        if info != 0:
            raise np.linalg.LinAlgError(f"the Nyström landmarks' kernel is not positive definite (LAPACK potrf info={info}).")
        C -= (C.mean(axis=0) if counts is None else (counts @ C) / self.n)
        Qs = [C.T @ G for G in summed]
        if counts is not None:
            C *= np.sqrt(counts)[:, None]
        M = solve_triangular(R, C.T @ C, lower=True, check_finite=False)
        M = solve_triangular(R, M.T, lower=True, check_finite=False)
        norm2 = _inner(M, M)
        if norm2 <= 0.0:
            return np.zeros(len(targets))
        norm = np.sqrt(norm2)
        found = []
        for Q, t in zip(Qs, targets, strict=True):
            RQ = solve_triangular(R, Q, lower=True, check_finite=False)
            found.append(_inner(RQ, RQ) / (norm * t.norm) if t.norm > 0 else 0.0)
        return np.array(found)

    def _statistics(self, w, total, targets):
        """``(C, W_k, C̃, B = W⁻¹, P = C̃ᵀC̃, [Q_i = C̃ᵀF_i])`` over every row."""
        C, Wk, W = self._blocks(w, total)
        Cc = C - C.mean(axis=0)
        B = self._inverse(W)
        P = Cc.T @ Cc
        Qs = [Cc.T @ t.data for t in targets]  # (L × r_i)
        return C, Wk, Cc, B, P, Qs

    def value_grad(self, w, total, coefs, targets, gradient: bool = True):
        if not gradient:
            alignments = self.alignments(w, total, targets)
            return float(np.dot(coefs, alignments)), None, alignments
        C, Wk, Cc, B, P, Qs = self._statistics(w, total, targets)
        norm2, alignments, BP = self._aligned(B, P, Qs, targets)
        if norm2 <= 0.0:
            return 0.0, np.zeros(self.d), alignments
        norm = np.sqrt(norm2)
        value = float(np.dot(coefs, alignments))
        BPB = BP @ B
        GC = (-2.0 * value / norm2) * (Cc @ BPB)
        GW = (value / norm2) * (BPB @ P @ B)
        for c, t, Q in zip(coefs, targets, Qs, strict=True):
            if t.norm > 0 and c != 0:
                BQ = B @ Q
                scale = c / (norm * t.norm)
                GC += (2.0 * scale) * (t.data @ BQ.T)
                GW -= scale * (BQ @ BQ.T)
        g = self._gamma(total)
        grad = -g * (
            _weighted_distance_gradient(GC * C, self.X, self.Z) + _weighted_distance_gradient(GW * Wk, self.Z, self.Z)
        )
        return value, grad, alignments


EXACT_MAX_ROWS = 3000
"""Up to this many rows the RBF alignments use the exact ``n × n`` kernel (FUFS and the audit)."""
NYSTROM_LANDMARKS = 300
"""Landmark rows of the Nyström approximation above :data:`EXACT_MAX_ROWS`."""


def rbf_backend(
    X: np.ndarray,
    gamma: float,
    *,
    approximation: str = "auto",
    exact_max_rows: int = EXACT_MAX_ROWS,
    n_landmarks: int = NYSTROM_LANDMARKS,
    random_state=None,
):
    """The exact RBF kernel up to ``exact_max_rows`` rows (or with ``approximation="exact"``),
    its Nyström approximation above."""
    if approximation == "exact" or (approximation == "auto" and X.shape[0] <= exact_max_rows):
        return ExactRBF(X, gamma)
    return NystroemRBF(X, gamma, n_landmarks=n_landmarks, random_state=random_state)


def _groups_of_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(order, starts)``: the rows of ``X`` sorted so that equal rows are adjacent, and where each
    run of equal rows starts (``None`` when no two rows are equal)."""
    if X.shape[0] < 2:
        return None
    order = np.lexsort(X.T[::-1])
    ordered = X[order]
    new = np.empty(order.size, dtype=bool)
    new[0] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=new[1:])
    starts = np.flatnonzero(new)
    return None if starts.size == order.size else (order, starts)


def sum_copies(F: np.ndarray, inverse: np.ndarray, count: int) -> np.ndarray:
    """``(count, k)``: row ``u`` the sum of the rows of ``F`` whose row of the data is distinct row
    ``u`` (``inverse`` of :func:`fairaudit.kernels.distinct_rows`; copies of a row may differ in
    ``F``, e.g. in their group)."""
    summed = np.zeros((count, F.shape[1]))
    np.add.at(summed, inverse, F)
    return summed


class Linear:
    """Linear kernels ``X diag(w) Xᵀ``: closed form in ``d × d`` matrices, exact at any ``n``."""

    name = "linear"

    def __init__(self, X: np.ndarray):
        self.Xc = centred_factor(X)
        self.n, self.d = self.Xc.shape
        C = self.Xc.T @ self.Xc
        self.M = C * C  # ‖H K_w H‖² = wᵀ M w

    def describe(self) -> str:
        return "linear kernel (closed form)"

    def target_weights(self, w: np.ndarray, total: float) -> _Target:
        w = np.asarray(w, dtype=float)
        b = self.M @ w
        return _Target("vector", b, float(np.sqrt(max(w @ b, 0.0))))

    def target_factor(self, F: np.ndarray) -> _Target:
        F = centred_factor(F)
        b = np.sum((F.T @ self.Xc) ** 2, axis=0)
        return _Target("vector", b, float(np.linalg.norm(F.T @ F)))

    def value_grad(self, w, total, coefs, targets, gradient: bool = True):
        w = np.asarray(w, dtype=float)
        Mw = self.M @ w
        norm2 = float(w @ Mw)
        if norm2 <= 0.0:
            return 0.0, np.zeros(self.d), np.zeros(len(targets))
        norm = np.sqrt(norm2)
        alignments = np.array([float(w @ t.data) / (norm * t.norm) if t.norm > 0 else 0.0 for t in targets])
        value = float(np.dot(coefs, alignments))
        if not gradient:
            return value, None, alignments
        grad = (-value / norm2) * Mw
        for c, t in zip(coefs, targets, strict=True):
            if t.norm > 0 and c != 0:
                grad += (c / (norm * t.norm)) * t.data
        return value, grad, alignments
