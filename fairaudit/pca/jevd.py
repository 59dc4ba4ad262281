"""JEVD-PCA: fair PCA from a joint eigen-decomposition of the group matrices.

Rathore & Manwani (2025) obtain a fair PCA by jointly diagonalising group matrices and keeping
``r`` of the joint eigenvectors. **Provenance note**: only the abstract of their paper could be
consulted while this module was written, so the concrete choices below are ours and are stated
as such; results are this implementation's, not numbers from the paper.

Our formulation
---------------
* Group matrices: ``M_i = A_iᵀA_i / m_i`` on globally centred rows (``M_XA``, ``M_XB`` for two
  groups; one per group for k > 2, the paper's "multi-attribute / non-binary" setting).
  With them, for any orthonormal ``U`` and any set ``S`` of its columns, the projection onto
  ``span U_S`` has group loss (Samadi et al. 2018, Def. 4.3)::

      loss_i(S) = c_i(d) − Σ_{j∈S} (Uᵀ M_i U)_jj ,

  *additive over columns* — which is what a joint eigen-decomposition buys: in a basis that
  diagonalises every ``M_i``, each column carries a fixed amount of every group's variance.
* Joint eigen-decomposition: the orthogonal ``U`` minimising ``Σ_i off(Uᵀ M_i U)`` by Jacobi
  sweeps (Cardoso & Souloumiac 1996): for a pair ``(p, q)`` the rotation angle is read off the
  top eigenvector ``(cos 2θ, −sin 2θ)`` of ``G = Σ_i h_i h_iᵀ``, ``h_i = (m_pp − m_qq, 2 m_pq)``,
  which minimises the pair's off-diagonal mass exactly; disjoint pairs are rotated together in
  a round-robin order; sweeps stop when every rotation's ``|sin θ|`` is below ``tol``. When the
  ``M_i`` commute this is their exact common eigenbasis. Above ``max_dim`` features the sweep
  runs inside the top-``max_dim`` principal subspace of the pooled covariance (the cost is
  ``O(k·max_dim³)`` per sweep).
* Which ``r`` columns (the paper is silent): the subset of size ``r`` that minimises the
  largest group loss — Fair PCA's own criterion restricted to joint eigenvectors — solved
  exactly as a small mixed-integer program (HiGHS via :func:`scipy.optimize.milp`); ties are
  broken towards more pooled variance. No orthonormalisation is needed: the Jacobi basis is
  orthonormal, so the result is an ordinary rank-``r`` projection.
* The joint basis does not depend on ``r``: a rank sweep computes it once.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from ..linalg import LowRankMap, top_eigh
from ._base import GroupPCABase
from ._problem import GroupProblem


def _round_robin(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Rounds of disjoint index pairs covering every pair once (circle method)."""
    players = list(range(n)) + ([-1] if n % 2 else [])
    size = len(players)
    rounds = []
    for _ in range(size - 1):
        pairs = [(players[i], players[size - 1 - i]) for i in range(size // 2)]
        pairs = [(min(a, b), max(a, b)) for a, b in pairs if a >= 0 and b >= 0]
        rounds.append((np.array([p for p, _ in pairs]), np.array([q for _, q in pairs])))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def joint_diagonalize(matrices: np.ndarray, *, tol: float = 1e-12, max_sweeps: int = 100):
    """Orthogonal ``U`` approximately diagonalising every symmetric matrix in ``matrices``.

    Returns ``(U, diagonals, n_sweeps)`` with ``diagonals[i] = diag(Uᵀ M_i U)``.
    """
    M = np.array(matrices, dtype=float, copy=True)
    k, n, _ = M.shape
    U = np.eye(n)
    rounds = _round_robin(n)
    sweeps = 0
    for sweeps in range(1, max_sweeps + 1):  # noqa: B007 - reported
        largest = 0.0
        for p, q in rounds:
            h1 = M[:, p, p] - M[:, q, q]  # (k, pairs)
            h2 = 2 * M[:, p, q]
            g11, g12, g22 = (h1 * h1).sum(0), (h1 * h2).sum(0), (h2 * h2).sum(0)
            # top eigenvector (x, y) of [[g11, g12], [g12, g22]], with x >= 0
            angle = 0.5 * np.arctan2(2 * g12, g11 - g22)
            x, y = np.cos(angle), np.sin(angle)
            c = np.sqrt((1 + x) / 2)
            s = -y / (2 * c)
            largest = max(largest, float(np.abs(s).max(initial=0.0)))
            # M ← Jᵀ M J and U ← U J with J = [[c, s], [−s, c]] on each (p, q) block
            cr, sr = c[None, :, None], s[None, :, None]
            Mp, Mq = M[:, p, :].copy(), M[:, q, :]
            M[:, p, :] = cr * Mp - sr * Mq
            M[:, q, :] = sr * Mp + cr * Mq
            cc, sc = c[None, None, :], s[None, None, :]
            Mp, Mq = M[:, :, p].copy(), M[:, :, q]
            M[:, :, p] = cc * Mp - sc * Mq
            M[:, :, q] = sc * Mp + cc * Mq
            Up, Uq = U[:, p].copy(), U[:, q]
            U[:, p] = c * Up - s * Uq
            U[:, q] = s * Up + c * Uq
        if largest < tol:
            break
    diagonals = np.einsum("kii->ki", M)
    return U, diagonals, sweeps


def select_columns(captured: np.ndarray, target: np.ndarray, r: int, pooled: np.ndarray) -> np.ndarray:
    """Indices of ``r`` columns minimising ``max_i (target_i − Σ_{j∈S} captured_ij)``.

    Exact mixed-integer program (binary ``x_j``, free ``z``)::

        min z − ε Σ_j pooled_j x_j   s.t.  target_i − captured_i · x ≤ z,  Σ x = r

    with a tiny ``ε`` that breaks ties towards more pooled variance.
    """
    k, s = captured.shape
    if r >= s:
        return np.arange(s)
    scale = max(float(np.abs(captured).max()), 1e-300)
    epsilon = 1e-9 / max(float(pooled.sum()), 1e-300) * scale
    objective = np.concatenate([-epsilon * pooled, [1.0]])
    rows = np.hstack([-captured, -np.ones((k, 1))])
    constraints = [
        LinearConstraint(rows, -np.inf, -target),
        LinearConstraint(np.concatenate([np.ones(s), [0.0]])[None, :], r, r),
    ]
    integrality = np.concatenate([np.ones(s), [0]])
    bounds = Bounds(np.concatenate([np.zeros(s), [-np.inf]]), np.concatenate([np.ones(s), [np.inf]]))
    result = milp(objective, constraints=constraints, integrality=integrality, bounds=bounds, options={"time_limit": 30})
    if result.x is None:  # pragma: no cover - time limit without an incumbent
        return np.argsort(-pooled)[:r]
    return np.sort(np.argsort(-result.x[:s])[:r])


class JEVDPCA(GroupPCABase):
    """Fair PCA by joint eigen-decomposition of the group matrices (Rathore & Manwani 2025).

    See the module docstring for the formulation and which choices are ours.

    Parameters
    ----------
    n_components : int, default=2
    max_dim : int, default=100
        Above this many features the joint diagonalisation runs inside the top-``max_dim``
        principal subspace of the pooled covariance.
    tol : float, default=1e-12
        Jacobi stopping rule on the largest rotation sine in a sweep.
    max_sweeps : int, default=100

    Attributes
    ----------
    joint_basis_ : ndarray (n_features, n_dim)
        The orthonormal joint eigenvectors.
    joint_eigenvalues_ : ndarray (k, n_dim)
        ``diag(Uᵀ M_i U)`` per group.
    off_diagonal_ratio_ : float
        ``Σ_i ‖off(Uᵀ M_i U)‖²_F / Σ_i ‖M_i‖²_F`` after the sweeps (0 = exactly joint).
    n_sweeps_ : int
    selected_ : ndarray of int
        The joint eigenvectors kept.

    References
    ----------
    V. Rathore, N. Manwani. "Achieving Fair PCA Using Joint Eigenvalue Decomposition".
    arXiv:2502.16933, 2025.
    J.-F. Cardoso, A. Souloumiac. "Jacobi angles for simultaneous diagonalization". SIAM J.
    Matrix Anal. Appl. 17(1), 1996.
    """

    def __init__(self, n_components: int = 2, *, max_dim: int = 100, tol: float = 1e-12, max_sweeps: int = 100):
        super().__init__(n_components)
        self.max_dim = max_dim
        self.tol = tol
        self.max_sweeps = max_sweeps

    def _joint_basis(self, problem: GroupProblem):
        key = ("jevd", self.max_dim, self.tol, self.max_sweeps)
        if key not in problem._cache:
            n = problem.n_features
            if n > self.max_dim:
                _, subspace = top_eigh(problem.pooled, self.max_dim)
            else:
                subspace = np.eye(n)
            reduced = np.einsum("na,knm,mb->kab", subspace, problem.covariances, subspace, optimize=True)
            rotation, diagonals, sweeps = joint_diagonalize(reduced, tol=self.tol, max_sweeps=self.max_sweeps)
            basis = subspace @ rotation
            rotated = np.einsum("aj,kab,bl->kjl", rotation, reduced, rotation, optimize=True)
            off = rotated - np.einsum("kj,jl->kjl", diagonals, np.eye(rotated.shape[1]))
            ratio = float((off**2).sum() / max((reduced**2).sum(), 1e-300))
            problem._cache[key] = (basis, diagonals, sweeps, ratio)
        return problem._cache[key]

    def _solve(self, problem: GroupProblem, d: int, warm_start) -> LowRankMap:
        basis, diagonals, sweeps, ratio = self._joint_basis(problem)
        weights = problem.sizes / problem.sizes.sum()
        selected = select_columns(diagonals, problem.captured(d), min(d, basis.shape[1]), weights @ diagonals)
        self.joint_basis_ = basis
        self.joint_eigenvalues_ = diagonals
        self.off_diagonal_ratio_ = ratio
        self.n_sweeps_ = sweeps
        self.selected_ = selected
        return LowRankMap(basis[:, selected], np.ones(len(selected)))
