"""The FUFS objective as printed: [Xing21] eq. (6), its gradient, and its minimisation (eq. 7).

Reference
---------
[Xing21] X. Xing, H. Liu, C. Chen, J. Li. "Fairness-Aware Unsupervised Feature Selection".
    arXiv:2106.02216, 2021 (CIKM 2021). §3, eqs. (1)–(7), Algorithm 1.

Notation (rows are samples here; the paper's ``X ∈ R^{d×n}`` holds them as columns): ``X`` is the
``n × d`` matrix of non-protected features, ``P`` the protected attribute(s), ``m, g ∈ [0, 1]^d``
the relaxed selection and decomposition indicators, ``M = X diag(m)`` and
``G = X diag(g) (I − diag(m))`` (eq. 3), ``H = I − 11ᵀ/n``. With the RBF kernel
``κ(u, v) = exp(−γ ‖u − v‖²)`` (§4.1: "we specify the kernel function in FUFS as the RBF kernel")
every kernel of a feature-weighted matrix is ``K_w[a, b] = exp(−γ Σ_j w_j (x_aj − x_bj)²)`` with
``w = m ∘ m`` for ``K^M`` and ``w = (g ∘ (1 − m))²`` for ``K^G``; ``K = K_1`` (all features).

The objective (eq. 6), to *minimise* over the box ``m, g ∈ [0, 1]^d``::

    L(m, g) = −Tr(H K H K^M) + α Tr(H K^M H K^P) − α Tr(H K^G H K^P) + β (‖m‖₁ + ‖g‖₁)

— the unnormalised centred traces of eqs. (1), (2) and (4). Since every kernel is symmetric and
``HH = H``, ``Tr(H A H B) = ⟨H A H, B⟩_F``, so each term is one Frobenius product with a fixed
centred matrix. With ``U = A ∘ K_w`` the chain rule gives
``∂⟨A, K_w⟩/∂w_j = −γ Σ_ab U_ab (x_aj − x_bj)²`` (one ``n × n`` by ``n × d`` product), and

    ∂L/∂m_j = 2 m_j ∂_w(−⟨HKH, K^M⟩ + α⟨HK^PH, K^M⟩)_j − 2 g_j² (1 − m_j) ∂_w(−α⟨HK^PH, K^G⟩)_j + β
    ∂L/∂g_j = 2 g_j (1 − m_j)² ∂_w(−α⟨HK^PH, K^G⟩)_j + β

(checked against finite differences and against a direct evaluation in the tests).

What the paper leaves open, and our choice (listed in ``docs/fs.md``):

* the bandwidth ``γ``: ``"scale"`` = ``1 / (d · Var(X))`` (scikit-learn's rule), the same ``γ``
  for ``K``, ``K^M`` and ``K^G`` (the paper uses one kernel ``κ`` for all three, §3.1);
* the protected matrix ``P``: the 0/1 indicator column for two groups (as in the paper's data
  sets: one binary protected attribute), the one-hot indicators ``/√2`` for more (every pair of
  different groups at distance 1), with its own ``γ_P`` by the same rule;
* the initialisation ("Initialize indicator vectors m, g", Algorithm 1 line 1): ``m = g = ½``
  (deterministic; ``init="random"`` draws them uniformly). ``0`` is no option: the gradient of the
  kernel terms in ``m_j`` is proportional to ``m_j``, so a feature at ``0`` never moves;
* the learning rate ``η`` of eq. (7): a fixed ``η``, or (default) Armijo backtracking from a
  Barzilai–Borwein trial step, which keeps the update of eq. (7) and makes ``L`` non-increasing;
* "while not convergence" (Algorithm 1 line 3): stop when ``L`` changed by at most ``tol``
  (relative) in one iteration, or after ``max_iter`` iterations.

Algorithm 1 computes both gradients (lines 4 and 6) from the kernels of the previous iterate
(they are updated in lines 8–9), so one iteration is one projected-gradient step on ``(g, m)``.
"""

from __future__ import annotations

import numpy as np

from ..kernels import centred_weighted, rbf, rbf_row_blocks, repeated_rows


def protected_matrix(codes: np.ndarray, n_groups: int) -> np.ndarray:
    """``P`` (rows = samples): the 0/1 indicator of the second group for two groups, else the
    one-hot indicators scaled by ``1/√2`` — either way two rows of different groups are at
    squared distance 1 and rows of one group at 0."""
    codes = np.asarray(codes)
    if n_groups == 2:
        return (codes == 1).astype(float)[:, None]
    return np.eye(n_groups)[codes] / np.sqrt(2.0)


def scale_gamma(A: np.ndarray) -> float:
    """``1 / (columns · Var(A))`` over all entries (scikit-learn's ``gamma="scale"``); 1 if constant."""
    variance = float(np.var(A))
    return 1.0 / (A.shape[1] * variance) if variance > 0 else 1.0


def kernel_terms(X: np.ndarray, sq: np.ndarray, w: np.ndarray, gamma: float, target: np.ndarray, gradient: bool = True):
    """``(⟨A, K_w⟩, Σ_ab U_ab (x_aj − x_bj)² for every j)`` with ``U = A ∘ K_w`` (``A = target``
    symmetric, ``sq = X ∘ X``; the second ``None`` without ``gradient``), in one pass over the
    kernel's cache-sized row blocks (:func:`fairaudit.kernels.rbf_row_blocks`) instead of forming
    ``K_w`` and ``U``: 0.91 against 1.5 ms for the value and gradient at 385 distinct rows (a
    bootstrap replicate of the default sample), the same values to 10⁻¹⁵."""
    (value,), grad = kernel_sums(X, sq, w, gamma, [target], target if gradient else None)
    return value, grad


def kernel_sums(X: np.ndarray, sq: np.ndarray, w: np.ndarray, gamma: float, targets, gradient_target=None):
    """``([⟨A, K_w⟩ for A in targets], Σ_ab U_ab (x_aj − x_bj)² for every j)`` with
    ``U = gradient_target ∘ K_w`` (``None`` without one): every Frobenius product with the kernel
    ``K_w`` from one pass over its row blocks (:func:`kernel_terms` for one target). The block is
    multiplied in place by the gradient's target (else the last target), by the others into a
    scratch block: the same products and sums as one pass per target."""
    Z = X * np.sqrt(w)
    values = [0.0] * len(targets)
    gradient = gradient_target is not None
    last = gradient_target if gradient else targets[-1]
    rowsum = np.empty(X.shape[0]) if gradient else None
    UX = np.empty_like(X) if gradient else None
    in_place = [i for i, target in enumerate(targets) if target is last]  # the block itself, once multiplied
    others = [i for i, target in enumerate(targets) if target is not last]
    scratch = None
    for rows, block in rbf_row_blocks(Z, Z, gamma):
        for i in others:
            scratch = np.empty_like(block) if scratch is None else scratch
            values[i] += float(np.multiply(block, targets[i][rows], out=scratch[: block.shape[0]]).sum())
        block *= last[rows]
        total = float(block.sum())
        for i in in_place:
            values[i] += total
        if gradient:
            block.sum(axis=1, out=rowsum[rows])
            np.matmul(block, X, out=UX[rows])
    if not gradient:
        return values, None
    return values, 2.0 * (sq.T @ rowsum - np.einsum("aj,aj->j", X, UX))  # U symmetric: 2 (sqᵀU1 − Σ_a x_aj (UX)_aj)


class PaperObjective:
    """``L(m, g)`` of [Xing21] eq. (6) with exact RBF kernels, its parts and its gradient.

    Parameters
    ----------
    X : ndarray (n, d)
        Non-protected features (rows = samples).
    P : ndarray (n, p)
        Protected attribute(s) (:func:`protected_matrix`).
    alpha, beta : float
        The weights of eq. (6).
    gamma, gamma_protected : float
        RBF bandwidths of the feature kernels and of ``K^P``.
    scale : float, default=1
        Multiplies the three traces; ``(n / s)²`` when the rows are a sample of ``s`` of ``n``
        rows, so the traces estimate the full data's and ``β`` keeps its weight against them.
    """

    def __init__(self, X, P, *, alpha: float, beta: float, gamma: float, gamma_protected: float, scale: float = 1.0):
        X = np.asarray(X, dtype=float)
        P = np.asarray(P, dtype=float).reshape(X.shape[0], -1)
        # Identical rows (with the same protected value) are kept once with their count: every
        # trace is a sum over row pairs of functions of the two rows (the centred targets carry
        # the counts, :func:`fairaudit.kernels.centre`), so the objective and its gradient are those of all rows on
        # 0.4 of the kernel cells for a bootstrap resample (about 63 % of its rows distinct).
        repeated = repeated_rows(np.hstack([X, P]))
        counts = None if repeated is None else repeated[1]
        if repeated is not None:
            X, P = repeated[0][:, : X.shape[1]], repeated[0][:, X.shape[1] :]
        self.X = np.ascontiguousarray(X)
        self.sq = self.X * self.X
        self.d = self.X.shape[1]
        self.alpha, self.beta, self.gamma, self.scale = float(alpha), float(beta), float(gamma), float(scale)
        self.data_target = centred_weighted(rbf(self.X, self.X, self.gamma), counts)[1]  # HKH
        self.protected_target = centred_weighted(rbf(P, P, float(gamma_protected)), counts)[1]  # HK^PH
        self.selection_target = self.alpha * self.protected_target - self.data_target  # multiplies K^M

    def _trace(self, w: np.ndarray, target: np.ndarray, gradient: bool = False):
        return kernel_terms(self.X, self.sq, w, self.gamma, target, gradient)

    def parts(self, m: np.ndarray, g: np.ndarray) -> dict[str, float]:
        """The three traces of eq. (6) (scaled) at ``(m, g)``: ``data`` = Tr(HKHK^M) (eq. 1),
        ``protected`` = Tr(HK^MHK^P) (eq. 2), ``proxies`` = Tr(HK^GHK^P) (eq. 4)."""
        return self.parts_and_curvature(m, g, curvature=False)[0]

    def value(self, m: np.ndarray, g: np.ndarray) -> float:
        p = self.parts(m, g)
        return -p["data"] + self.alpha * (p["protected"] - p["proxies"]) + self.beta * (float(np.sum(m)) + float(np.sum(g)))

    def selection_curvature(self, m: np.ndarray) -> np.ndarray:
        """``∂/∂w_j ⟨αHK^PH − HKH, K_w⟩`` at ``w = m ∘ m``: the selection's kernel terms as a
        function of ``m_j²``. Where ``m_j`` sits at a bound its gradient in ``m_j`` is ``β`` alone
        (at 0) or ties (at 1); this says which feature the kernel terms favour (ranking ties)."""
        return -self.gamma * self.scale * self._trace(m * m, self.selection_target, gradient=True)[1]

    def parts_and_curvature(self, m: np.ndarray, g: np.ndarray, curvature: bool = True) -> tuple[dict[str, float], np.ndarray | None]:
        """:meth:`parts` and :meth:`selection_curvature` (``None`` without ``curvature``) from one
        pass over ``K^M`` and one over ``K^G`` (:func:`kernel_sums`; the two traces with ``K^M``
        and the curvature were three passes over that same kernel)."""
        (data, protected), grad = kernel_sums(
            self.X, self.sq, m * m, self.gamma, [self.data_target, self.protected_target], self.selection_target if curvature else None
        )
        proxies = self._trace((g * (1.0 - m)) ** 2, self.protected_target)[0]
        found = {"data": self.scale * data, "protected": self.scale * protected, "proxies": self.scale * proxies}
        return found, (None if grad is None else -self.gamma * self.scale * grad)

    def value_grad(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        """``L`` and ``∇L`` at ``z = (m, g)`` (concatenated, length ``2d``)."""
        d = self.d
        m, g = z[:d], z[d:]
        keep = 1.0 - m
        # the kernel part of L is ⟨αHK^PH − HKH, K^M⟩ − α⟨HK^PH, K^G⟩
        selection, selection_grad = self._trace(m * m, self.selection_target, gradient=True)  # U_M = A_M ∘ K^M
        proxies, proxies_grad = self._trace((g * keep) ** 2, self.protected_target, gradient=True)
        value = self.scale * (selection - self.alpha * proxies)
        value += self.beta * (float(np.sum(m)) + float(np.sum(g)))  # ‖·‖₁ on the box [0, 1]
        grad_wM = -self.gamma * self.scale * selection_grad
        grad_wG = self.alpha * self.gamma * self.scale * proxies_grad  # of −α⟨A, K^G⟩
        grad_m = 2.0 * m * grad_wM - 2.0 * g * g * keep * grad_wG + self.beta
        grad_g = 2.0 * g * keep * keep * grad_wG + self.beta
        return value, np.concatenate([grad_m, grad_g])


class LinearPaperObjective:
    """Eq. (6) with linear kernels (§3.1 allows any kernel; "polynomial or RBF" in practice):
    ``K_w = X diag(w) Xᵀ``, so each trace is linear in ``w`` — ``Tr(HKHK_w) = Σ_j w_j (C²)_jj``
    with ``C = X_cᵀX_c`` and ``Tr(HK_wHK^P) = Σ_j w_j ‖P_cᵀx_cj‖²`` — and ``L`` separates over
    features: exact at any ``n`` in O(n d²)."""

    def __init__(self, X, P, *, alpha: float, beta: float):
        Xc = np.asarray(X, dtype=float) - np.mean(X, axis=0)
        Pc = np.asarray(P, dtype=float) - np.mean(P, axis=0)
        C = Xc.T @ Xc
        self.data_weight = np.sum(C * C, axis=0)  # (C²)_jj
        self.protected_weight = np.sum((Pc.T @ Xc) ** 2, axis=0)
        self.d = Xc.shape[1]
        self.alpha, self.beta = float(alpha), float(beta)

    def parts(self, m, g) -> dict[str, float]:
        return {
            "data": float(self.data_weight @ (m * m)),
            "protected": float(self.protected_weight @ (m * m)),
            "proxies": float(self.protected_weight @ (g * (1.0 - m)) ** 2),
        }

    def value(self, m, g) -> float:
        p = self.parts(m, g)
        return -p["data"] + self.alpha * (p["protected"] - p["proxies"]) + self.beta * float(np.sum(m) + np.sum(g))

    def selection_curvature(self, m) -> np.ndarray:
        return self.alpha * self.protected_weight - self.data_weight

    def parts_and_curvature(self, m, g, curvature: bool = True):
        return self.parts(m, g), (self.selection_curvature(m) if curvature else None)

    def value_grad(self, z):
        d = self.d
        m, g = z[:d], z[d:]
        keep = 1.0 - m
        own = self.alpha * self.protected_weight - self.data_weight
        value = float(own @ (m * m)) - self.alpha * float(self.protected_weight @ (g * keep) ** 2)
        value += self.beta * float(np.sum(m) + np.sum(g))
        grad_m = 2.0 * m * own + 2.0 * self.alpha * g * g * keep * self.protected_weight + self.beta
        grad_g = -2.0 * self.alpha * g * keep * keep * self.protected_weight + self.beta
        return value, np.concatenate([grad_m, grad_g])


def minimise_box(value_grad, start: np.ndarray, *, max_iter: int, tol: float, learning_rate):
    """Minimise over the box ``[0, 1]^D`` by projected gradient, [Xing21] eq. (7):
    ``z ← P[z − η ∇L(z)]`` with ``P`` the clip to ``[0, 1]``.

    ``learning_rate``: a positive float is the paper's fixed ``η``; ``"auto"`` chooses ``η`` per
    iteration by Armijo backtracking (``L(z⁺) ≤ L(z) + 10⁻⁴ ⟨∇L, z⁺ − z⟩``, halving ``η``) from a
    Barzilai–Borwein trial step, so ``L`` never increases. Stops when ``L`` changed by at most
    ``tol · max(1, |L|)`` in one iteration ("until the objective function converges", §3.3), when
    no entry moves, or after ``max_iter`` iterations. Returns ``(z, ∇L(z), history, iterations,
    converged)``.
    """
    z = np.clip(np.asarray(start, dtype=float), 0.0, 1.0)
    value, grad = value_grad(z)
    history = [value]
    auto = learning_rate == "auto"
    step, previous = None, None
    converged, iteration = False, 0
    while iteration < max_iter:
        iteration += 1
        if auto:
            if previous is None:
                peak = float(np.max(np.abs(grad)))
                step = 0.1 / peak if peak > 0 else 1.0
            else:  # Barzilai–Borwein: η = ‖Δz‖² / |⟨Δz, Δ∇L⟩|, within 10⁴× of the last step
                dz, dg = z - previous[0], grad - previous[1]
                curvature = abs(float(dz @ dg))
                step = float(dz @ dz) / curvature if curvature > 0 else 2.0 * previous[2]
                step = min(step, 1e4 * previous[2])
            previous = (z, grad, step)
            for _ in range(50):
                candidate = np.clip(z - step * grad, 0.0, 1.0)
                new_value, new_grad = value_grad(candidate)
                if new_value <= value + 1e-4 * float(grad @ (candidate - z)):
                    break
                step *= 0.5
            else:  # no descent along the projection arc: stationary to working precision
                converged = True
                break
            previous = (previous[0], previous[1], step)
        else:
            candidate = np.clip(z - learning_rate * grad, 0.0, 1.0)
            new_value, new_grad = value_grad(candidate)
        moved = float(np.max(np.abs(candidate - z))) if z.size else 0.0
        change = abs(value - new_value)
        z, value, grad = candidate, new_value, new_grad
        history.append(value)
        if moved == 0.0 or change <= tol * max(1.0, abs(history[-2])):
            converged = True
            break
    return z, grad, np.asarray(history), iteration, converged
