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


MAX_PIVOTS = 50
"""Pivoting rounds of :func:`nnls_rows` before a row is handed to scipy's NNLS (never reached in
our measurements; the fallback keeps the result exact whatever happens)."""


def nnls_rows(X: np.ndarray, H: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
    """``W`` with rows ``argmin_{w ≥ 0} ‖x_i − Hᵀ w‖₂``: exact NNLS for all rows at once.

    Block principal pivoting (Kim & Park, "Fast nonnegative matrix factorization: an
    active-set-like method and comparisons", SIAM J. Sci. Comput. 33(6), 2011, Alg. 2): every
    row keeps a passive set ``F`` and solves the normal equations ``(HHᵀ)_FF w_F = (Hx)_F``
    (one batched LAPACK call for all rows); the infeasible variables (``w_F < 0``, or a negative
    gradient off ``F``) are exchanged — all of them while their number falls, then one at a time
    (the backup rule that makes the method finite). ``start`` (a previous ``W``) gives the first
    passive sets, which makes alternating minimisation's repeated W-steps cheap. A row is
    accepted only when it meets the KKT conditions to round-off (``w ≥ 0``, gradient ``≥ 0`` off
    ``F`` and ``= 0`` on it); rows that do not within :data:`MAX_PIVOTS` rounds, or whose block is
    singular, are solved by scipy's active-set NNLS (Lawson & Hanson), so the result is exact
    either way (tests compare it with scipy and CVXPY).

    The paper solved this QP with OSQP; one scipy NNLS call per row was our first replacement
    (exact, faster than OSQP); ``benchmarks/bench_nmf_am.py`` times all three.
    """
    X = np.asarray(X, dtype=float)
    G = H @ H.T
    D = X @ H.T  # row i: (H x_i)ᵀ
    m, r = D.shape
    W = np.zeros((m, r))
    usable = np.diag(G) > 0  # a zero row of H leaves its weight free: 0, as Lawson–Hanson gives
    passive = (start > 0) & usable if start is not None else np.zeros((m, r), dtype=bool)
    # Round-off thresholds per row: the gradient is of the size of H x_i, w of that over diag(HHᵀ).
    tol_gradient = 1e-10 * np.maximum(np.abs(D).max(axis=1, initial=0.0), np.finfo(float).tiny)
    tol_w = tol_gradient / max(float(np.diag(G).max(initial=0.0)), np.finfo(float).tiny)
    pending = np.arange(m)
    fewest = np.full(m, r + 1)  # fewest infeasible variables seen (Kim & Park's "ninf")
    tries = np.full(m, 3)  # full exchanges left without progress (their α)
    for _ in range(MAX_PIVOTS):
        if pending.size == 0:
            break
        F = passive[pending]
        w, ok = _solve_on_passive(G, D[pending], F)
        gradient = w @ G - D[pending]
        tg, tw = tol_gradient[pending, None], tol_w[pending, None]
        ok &= ~(F & (np.abs(gradient) > 1e3 * tg)).any(axis=1)  # the solve itself is accurate
        infeasible = (F & (w < -tw)) | (~F & usable & (gradient < -tg))
        count = infeasible.sum(axis=1)
        done = ok & (count == 0)
        W[pending[done]] = np.maximum(w[done], 0.0)
        for i in pending[~ok]:
            W[i] = nnls(H.T, X[i])[0]
        keep = ok & ~done
        rows, infeasible, count = pending[keep], infeasible[keep], count[keep]
        better = count < fewest[rows]
        fewest[rows[better]] = count[better]
        tries[rows[better]] = 3
        full = better | (tries[rows] > 0)
        tries[rows[~better & full]] -= 1
        flip = infeasible
        single = np.flatnonzero(~full)
        if single.size:  # backup rule: exchange only the last infeasible variable
            last = r - 1 - np.argmax(infeasible[single][:, ::-1], axis=1)
            flip[single] = False
            flip[single, last] = True
        passive[rows] ^= flip
        pending = rows
    for i in pending:  # not resolved within MAX_PIVOTS rounds: Lawson–Hanson
        W[i] = nnls(H.T, X[i])[0]
    return W


def _solve_on_passive(G: np.ndarray, D: np.ndarray, passive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, ``w`` with ``G_FF w_F = d_F`` and ``w = 0`` off ``F`` (one batched solve), and
    which rows it worked for (a singular block fails its rows only)."""
    m, r = D.shape
    outer = passive[:, :, None] & passive[:, None, :]
    A = np.where(outer, G[None], 0.0)
    idx = np.arange(r)
    A[:, idx, idx] = np.where(passive, A[:, idx, idx], 1.0)
    b = np.where(passive, D, 0.0)
    ok = np.ones(m, dtype=bool)
    try:
        w = np.linalg.solve(A, b[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:
        w = np.zeros_like(b)
        for i in range(m):
            try:
                w[i] = np.linalg.solve(A[i], b[i])
            except np.linalg.LinAlgError:
                ok[i] = False
    ok &= np.isfinite(w).all(axis=1)
    return np.where(passive & ok[:, None], w, 0.0), ok


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
