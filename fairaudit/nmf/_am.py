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
number of rows.

Solvers (§6.1 used ECOS, then SCS when ECOS failed, through CVXPY): Clarabel (interior point,
like ECOS, which CVXPY no longer ships) called directly, then SCS through CVXPY if Clarabel fails
or reports a status other than solved. Which one solved each H-step is recorded.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

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
    """Per row, ``w`` with ``G_FF w_F = d_F`` and ``w = 0`` off ``F`` (one batched LAPACK call on
    masked ``r × r`` systems), and which rows it worked for (a singular block fails its rows
    only). Grouping rows by passive set instead (one factorisation per set) was slower: a
    batched solve costs under a microsecond per row at rank 10, a group ~100 µs of overhead,
    and fitted ``W``s on 4,165 rows had 250–500 distinct supports."""
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
    """The §5.2 SOCP for one data set and rank, re-solved for each ``W``.

    Clarabel is called directly on the cone program written out below (variables ``x = (vec H,
    t)``, ``vec`` stacking columns; ``A x + s = b``, ``s`` in the cones)::

        s = vec H                                                     ≥ 0
        s = (E_ℓ + ‖X_ℓ‖ t, ‖X_ℓ − Q_ℓQ_ℓᵀX_ℓ‖, vec(Q_ℓᵀX_ℓ) − (I ⊗ R_ℓ) vec H)  ∈ second-order cone, each ℓ

    — the same problem CVXPY builds (a test compares the two), without CVXPY's per-solve
    canonicalisation, which took as long as the solve itself (``benchmarks/bench_nmf_am.py``).
    If Clarabel fails, the problem is handed to CVXPY with SCS (§6.1: "ECOS, and SCS only if
    ECOS fails"). After a solve, ``duals`` holds each group's cone multiplier on ``t``.
    """

    def __init__(self, blocks: list[np.ndarray], E: np.ndarray, norms: np.ndarray, r: int):
        self._blocks = blocks
        self._E = np.asarray(E, dtype=float)
        self._norms = np.asarray(norms, dtype=float)
        self.r = r
        self.n = blocks[0].shape[1]
        self.duals = np.full(len(blocks), np.nan)
        self._fallback = None

    def solve(self, W_blocks: list[np.ndarray]) -> tuple[np.ndarray | None, str | None, str]:
        """``(H, solver, status)`` for fixed ``W`` (``H`` is ``None`` when both solvers fail)."""
        parts = []
        for block, W in zip(self._blocks, W_blocks, strict=True):
            Q, R = np.linalg.qr(W, mode="reduced")
            QtX = Q.T @ block
            parts.append((QtX, R, float(np.linalg.norm(block - Q @ QtX))))
        H, status = self._solve_clarabel(parts)
        if H is not None:
            return H, "CLARABEL", status
        H, fallback_status = self._solve_scs(parts)
        if H is not None:
            return H, "SCS", fallback_status
        return None, None, f"CLARABEL: {status}; SCS: {fallback_status}"

    def _structure(self, qs: list[int]):
        """The constraint matrix's sparsity pattern (fixed for a fit): rows, columns, cones, and
        where each group's ``R_ℓ`` entries and ``‖X_ℓ‖`` go in the data vector."""
        import clarabel

        r, n = self.r, self.n
        size = r * n
        rows, cols = [np.arange(size)], [np.arange(size)]
        cones, starts, slots = [clarabel.NonnegativeConeT(size)], [], []
        offset = size
        for q in qs:
            j, a, i = np.indices((n, q, r)).reshape(3, -1)  # entry R[a, i] of the block for column j
            rows += [np.array([offset]), offset + 2 + j * q + a]
            cols += [np.array([size]), j * r + i]
            starts.append(offset)
            slots.append(q * r)
            cones.append(clarabel.SecondOrderConeT(2 + q * n))
            offset += 2 + q * n
        return np.concatenate(rows), np.concatenate(cols), offset, cones, np.array(starts)

    def _solve_clarabel(self, parts) -> tuple[np.ndarray | None, str]:
        import clarabel
        from scipy import sparse

        size = self.r * self.n
        qs = [R.shape[0] for _, R, _ in parts]
        if getattr(self, "_qs", None) != qs:
            self._qs, self._pattern = qs, self._structure(qs)
        rows, cols, n_rows, cones, starts = self._pattern
        data = [-np.ones(size)]
        b = [np.zeros(size)]
        for (QtX, R, outside), e, norm in zip(parts, self._E, self._norms, strict=True):
            data += [np.array([-norm]), np.tile(R.ravel(), self.n)]
            b += [np.array([e, outside]), QtX.ravel(order="F")]
        A = sparse.csc_matrix((np.concatenate(data), (rows, cols)), shape=(n_rows, size + 1))
        objective = np.zeros(size + 1)
        objective[-1] = 1.0
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        try:
            solution = clarabel.DefaultSolver(
                sparse.csc_matrix((size + 1, size + 1)), objective, A, np.concatenate(b), cones, settings
            ).solve()
        except Exception as exc:  # noqa: BLE001 - any failure hands the step to SCS
            return None, f"failed: {exc}"
        accepted = {clarabel.SolverStatus.Solved: "optimal", clarabel.SolverStatus.AlmostSolved: "optimal_inaccurate"}
        if solution.status not in accepted:
            return None, str(solution.status)
        x = np.asarray(solution.x)
        self.duals = np.maximum(np.asarray(solution.z)[starts], 0.0)
        return np.maximum(x[:size].reshape((self.r, self.n), order="F"), 0.0), accepted[solution.status]

    def _solve_scs(self, parts) -> tuple[np.ndarray | None, str]:
        import cvxpy as cp

        if self._fallback is None:
            self._fallback = _cvxpy_problem(self._blocks, self._E, self._norms, self.r)
        problem, H, parameters = self._fallback
        for (QtX, R, outside), (projected, triangular, out) in zip(parts, parameters, strict=True):
            projected.value, triangular.value, out.value = QtX, R, outside
        try:
            problem.solve(solver="SCS")
        except cp.error.SolverError as exc:
            return None, f"failed: {exc}"
        if problem.status not in _ACCEPTED or H.value is None:
            return None, problem.status
        self.duals = np.array([max(float(con.dual_value), 0.0) for con in problem.constraints])
        return np.maximum(H.value, 0.0), problem.status


def _cvxpy_problem(blocks, E, norms, r):
    """The §5.2 SOCP in CVXPY with parameters (DPP): ``(problem, H, [(QᵀX, R, outside), …])``."""
    import cvxpy as cp

    n = blocks[0].shape[1]
    H = cp.Variable((r, n), nonneg=True)
    t = cp.Variable()
    parameters, constraints = [], []
    for block, e, norm in zip(blocks, E, norms, strict=True):
        q = min(block.shape[0], r)
        projected = cp.Parameter((q, n))
        triangular = cp.Parameter((q, r))
        outside = cp.Parameter(nonneg=True)
        residual = cp.hstack([cp.reshape(outside, (1,), order="F"), cp.vec(projected - triangular @ H, order="F")])
        constraints.append(cp.norm(residual, 2) <= float(e) + float(norm) * t)
        parameters.append((projected, triangular, outside))
    return cp.Problem(cp.Minimize(t), constraints), H, parameters
