"""Algorithm 2 of Kassab, George, Needell et al.: Fairer-NMF by alternating minimisation.

With ``W`` fixed the H-step is the second-order cone program of §5.2::

    minimise t  over H ≥ 0, t
    subject to ‖X_ℓ − W_ℓ H‖_F ≤ E_ℓ + t ‖X_ℓ‖_F     for every group ℓ,

whose optimum ``t`` is ``max_ℓ (‖X_ℓ − W_ℓ H‖_F − E_ℓ) / ‖X_ℓ‖_F`` (Def. 4.1). With ``H`` fixed
the W-step splits by group — ``W_ℓ`` enters only group ℓ's error, and the max is smallest when
each error is — and further by row: non-negative least squares ``min_{w ≥ 0} ‖x_i − Hᵀw‖``.
Each step solves its subproblem exactly, so the objective never increases.

Size reduction (ours; the same problem): with the thin QR factorisation ``W_ℓ = Q_ℓ R_ℓ``,
``‖X_ℓ − W_ℓH‖²_F = ‖X_ℓ − Q_ℓQ_ℓᵀX_ℓ‖²_F + ‖Q_ℓᵀX_ℓ − R_ℓH‖²_F``, so each cone has
``1 + min(m_ℓ, r)·n`` entries instead of ``m_ℓ·n`` and the SOCP's size does not grow with the
number of rows. The problem is built once per fit with CVXPY parameters (DPP) and re-solved.

Solvers: Clarabel (interior point) first; SCS if Clarabel fails or reports a status other than
optimal. Which one solved each H-step is recorded. CVXPY no longer ships ECOS, which the
authors' code asked for; CVXPY then silently used SCS there.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

H_SOLVERS = ("CLARABEL", "SCS")
_ACCEPTED = ("optimal", "optimal_inaccurate")


def nnls_rows(X: np.ndarray, H: np.ndarray) -> np.ndarray:
    """``W`` with rows ``argmin_{w ≥ 0} ‖x_i − Hᵀ w‖₂`` (exact active-set NNLS per row).

    scipy's NNLS rather than one CVXPY/OSQP problem for all rows, because it is faster and
    exact: measured (benchmarks/bench_nmf_am.py) on 297×12 random data at rank 10 scipy takes
    10 ms per W-step against 12 ms for OSQP re-solving a compiled problem (87 ms the first
    time), on 1750×20 at rank 8 17 ms against 47 ms (0.61 s), on 5000×50 at rank 10 87 ms
    against 0.77 s (5.6 s), with residuals equal to 10 digits.
    """
    A = np.ascontiguousarray(H.T)
    W = np.empty((X.shape[0], H.shape[0]))
    for i, row in enumerate(X):
        W[i] = nnls(A, row)[0]
    return W


class HStep:
    """The §5.2 SOCP for one data set and rank, compiled once and re-solved for each ``W``."""

    def __init__(self, blocks: list[np.ndarray], E: np.ndarray, norms: np.ndarray, r: int):
        import cvxpy as cp

        n = blocks[0].shape[1]
        self._blocks = blocks
        self.H = cp.Variable((r, n), nonneg=True)
        self.t = cp.Variable()
        self._projected = []  # Q_ℓᵀ X_ℓ
        self._triangular = []  # R_ℓ
        self._outside = []  # ‖X_ℓ − Q_ℓQ_ℓᵀX_ℓ‖_F
        constraints = []
        for block, e, norm in zip(blocks, E, norms, strict=True):
            q = min(block.shape[0], r)
            projected = cp.Parameter((q, n))
            triangular = cp.Parameter((q, r))
            outside = cp.Parameter(nonneg=True)
            residual = cp.hstack([cp.reshape(outside, (1,), order="F"), cp.vec(projected - triangular @ self.H, order="F")])
            constraints.append(cp.norm(residual, 2) <= float(e) + float(norm) * self.t)
            self._projected.append(projected)
            self._triangular.append(triangular)
            self._outside.append(outside)
        self.problem = cp.Problem(cp.Minimize(self.t), constraints)

    def solve(self, W_blocks: list[np.ndarray]) -> tuple[np.ndarray | None, str | None, str]:
        """``(H, solver, status)`` for fixed ``W`` (``H`` is ``None`` when both solvers fail)."""
        import cvxpy as cp

        for block, W, projected, triangular, outside in zip(
            self._blocks, W_blocks, self._projected, self._triangular, self._outside, strict=True
        ):
            Q, R = np.linalg.qr(W, mode="reduced")
            QtX = Q.T @ block
            projected.value = QtX
            triangular.value = R
            outside.value = float(np.linalg.norm(block - Q @ QtX))
        status = "not run"
        for solver in H_SOLVERS:
            try:
                self.problem.solve(solver=solver)
            except cp.error.SolverError as exc:
                status = f"{solver} failed: {exc}"
                continue
            status = self.problem.status
            if status in _ACCEPTED and self.H.value is not None:
                return np.maximum(self.H.value, 0.0), solver, status
        return None, None, status
