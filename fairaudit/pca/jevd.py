"""JEVD-PCA: fair PCA from a joint eigenvalue decomposition of the group matrices.

V. Rathore, N. Manwani, "Achieving Fair PCA Using Joint Eigenvalue Decomposition" (2025).

The paper
---------
* Lemma 1: for orthonormal ``U`` (``d × r``) the reconstruction loss of group ``X_s`` is
  ``L(X_s; U) = −Tr(Uᵀ M_s U)`` with (§4.1)::

      M_s = (1/n_s) [X_sᵀX_s − (1/r) Σ_{k≤r} σ_k²(X_s) I]

  (``M_XA``, ``M_XB``; one per group for k groups — "its extension for multiple sensitive
  groups is trivial", §4). Rows are centred by the global mean, as everywhere in the family.
* Eq. (6): ``U_Fair`` minimises the JEVD criterion (eq. 4)
  ``C(U) = Σ_s ‖ZDiag(U⁻¹ M_s U)‖²_F``; Theorem 4.1: at ``C(U) = 0`` the losses are equal.
* Algorithm 1 (after André et al. 2015): ``U = I``, ``T_s = M_s``; while ``C(U) > ε`` and
  ``i ≤ S_max``: with ``Λ_s = diag(T_s)`` and ``O_s = ZDiag(T_s)``::

      V_mn = − Σ_s O_s(mn) (Λ_s(mm) − Λ_s(nn)) / Σ_s (Λ_s(mm) − Λ_s(nn))²     (m ≠ n)

  ``B = I + V``, ``T_s ← B⁻¹ T_s B``, ``U ← U B`` — the minimiser of the first-order
  expansion ``C_a(V) = Σ_s ‖ZDiag(O_s − VΛ_s + Λ_s V)‖²_F`` of the criterion.

What the paper leaves open, and our reading
-------------------------------------------
* ``ε`` and ``S_max`` have no printed values: ``ε = tol · C(I)`` (relative to the starting
  off-diagonal mass, ``tol = 1e-10``) and ``S_max = max_iter = 500``.
* ``M_s`` depends on ``r`` only through ``(1/r)Σσ²·I``, a multiple of the identity. Algorithm 1
  is unchanged by it (``V`` uses differences of diagonal entries and off-diagonal entries only,
  and ``B⁻¹(T + cI)B = B⁻¹TB + cI``), so ``U`` is the same for every rank and a rank sweep
  computes it once (checked in the tests).
* ``U`` is ``d × d``; the paper does not say which ``r`` of its columns form ``U_Fair``. We take
  the ``r`` columns that minimise the largest group loss — the criterion of eq. (3), which
  Theorem 4.1's proof identifies as the target (``argmax min_s Tr(Uᵀ M_s U)``), restricted to
  joint eigenvectors — as an exact small integer program (HiGHS, :func:`scipy.optimize.milp`),
  ties broken towards more pooled variance. Each column's captured variance is its Rayleigh
  quotient ``u_jᵀ C_s u_j / ‖u_j‖²``. Algorithm 1's ``U`` is not orthogonal, so the selected
  columns are orthonormalised: the representation is the projection onto their span, for which
  Lemma 1 and the family's error and loss hold.
* A division by ``0`` in ``V_mn`` (two diagonal entries equal in every ``T_s``) sets ``V_mn = 0``.
* When the iteration diverges (``C`` not finite, or ``B`` numerically singular) it stops, warns,
  and returns the iterate with the smallest ``C`` seen (``diverged_``).

Solvers (``solver=``)
---------------------
``"paper"`` (default) is Algorithm 1 as printed. Two stabler schemes are named options, each a
documented deviation (``docs/architecture.md``, "JEVD-PCA"):

* ``"damped"`` — Algorithm 1's direction ``V`` with a backtracking step ``B = I + tV``
  (``t = 1, ½, ¼, …`` until ``C`` decreases), so ``C`` decreases monotonically;
* ``"jacobi"`` — orthogonal Jacobi sweeps (Cardoso & Souloumiac 1996): the ``M_s`` are
  symmetric, and for a pair ``(p, q)`` the rotation angle that minimises the pair's off-diagonal
  mass exactly is read off the top eigenvector ``(cos 2θ, −sin 2θ)`` of ``G = Σ_s h_s h_sᵀ``,
  ``h_s = (m_pp − m_qq, 2 m_pq)``; disjoint pairs rotate together in round-robin order; sweeps
  stop when every rotation's ``|sin θ|`` is below ``tol``, or when a sweep lowers the off-diagonal
  mass by at most ``stall`` × its starting value (``JACOBI_STALL``: the mass has settled; the
  remaining rotations turn directions whose mass is tied). ``U`` stays orthogonal (Theorem 4.1's
  setting, eq. 6's constraint ``UᵀU = I``); when the ``M_s`` commute this is their exact common
  eigenbasis.

Above ``max_dim`` features the decomposition runs inside the top-``max_dim`` principal
subspace of the pooled covariance (our restriction: the paper's ``O(d³)`` per iteration is the
cost; not needed for wide data, whose row space is used exactly, see ``_problem``).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from sklearn.exceptions import ConvergenceWarning

from ..linalg import LowRankMap, orthonormal_basis, top_eigh
from ._base import GroupPCABase, solver_settings
from ._problem import GroupProblem

SOLVERS = ("paper", "damped", "jacobi")
_DEFAULT_TOL = {"paper": 1e-10, "damped": 1e-10, "jacobi": 1e-12}
_DEFAULT_MAX_ITER = {"paper": 500, "damped": 500, "jacobi": 100}
_SINGULAR = 1e12  # condition number of B above which Algorithm 1's step is treated as a breakdown


# ============================================================================ the paper's pieces
def jevd_matrices(covariances: np.ndarray, spectra: np.ndarray, r: int) -> np.ndarray:
    """``M_s = C_s − (1/r) Σ_{k≤r} λ_k(C_s) I`` with ``C_s = X_sᵀX_s / n_s`` (§4.1; the
    ``σ_k²(X_s)/n_s`` are the eigenvalues of ``C_s``)."""
    shift = spectra[:, :r].sum(axis=1) / r
    return covariances - shift[:, None, None] * np.eye(covariances.shape[1])


def off_diagonal_mass(T: np.ndarray) -> float:
    """``Σ_s ‖ZDiag(T_s)‖²_F`` — the JEVD criterion C of eq. (4) for ``T_s = U⁻¹ M_s U``."""
    off = T.copy()
    off[:, np.arange(T.shape[1]), np.arange(T.shape[1])] = 0.0
    return float(np.sum(off * off))


def first_order_update(T: np.ndarray) -> np.ndarray:
    """Algorithm 1, lines 4–11: the correction ``V`` minimising the first-order criterion."""
    diagonal = np.einsum("kii->ki", T)
    gaps = diagonal[:, :, None] - diagonal[:, None, :]  # Λ_s(mm) − Λ_s(nn)
    off = T - np.einsum("ki,ij->kij", diagonal, np.eye(T.shape[1]))  # O_s
    numerator = np.sum(off * gaps, axis=0)
    denominator = np.sum(gaps**2, axis=0)
    V = -np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)
    np.fill_diagonal(V, 0.0)
    return V


@dataclass
class JointDecomposition:
    """What a joint eigenvalue decomposition returns."""

    U: np.ndarray  # columns: joint eigenvectors (orthonormal for "jacobi")
    T: np.ndarray  # U⁻¹ M_s U
    n_iter: int
    history: list[float]  # C(U) after each iteration, starting with C(I)
    converged: bool
    diverged: bool = False


def first_order_jevd(matrices: np.ndarray, *, tol: float, max_iter: int, damped: bool = False) -> JointDecomposition:
    """Algorithm 1 of Rathore & Manwani (``damped=False``), or its backtracking variant."""
    T = np.array(matrices, dtype=float, copy=True)
    n = T.shape[1]
    U = np.eye(n)
    cost = off_diagonal_mass(T)
    history = [cost]
    epsilon = tol * cost
    best = (cost, U, T)
    i = 0
    while cost > epsilon and i < max_iter:  # Algorithm 1, line 3 (i ≤ S_max)
        i += 1
        V = first_order_update(T)
        step = 1.0
        while True:
            B = np.eye(n) + step * V  # line 12
            if not np.all(np.isfinite(B)) or np.linalg.cond(B) > _SINGULAR:
                new_T, new_cost = None, np.inf
            else:
                new_T = np.linalg.solve(B[None], T @ B)  # line 15: B⁻¹ T_s B
                new_cost = off_diagonal_mass(new_T)
            if not damped or new_cost < cost or step < 1e-12:
                break
            step /= 2
        if new_T is None or not np.isfinite(new_cost):
            return JointDecomposition(best[1], best[2], i, history, converged=False, diverged=True)
        if damped and new_cost >= cost:  # no step decreases C: a stationary point of the scheme
            return JointDecomposition(U, T, i, history, converged=False)
        T, U, cost = new_T, U @ B, new_cost  # line 17: U ← U B
        history.append(cost)
        if cost < best[0]:
            best = (cost, U, T)
    return JointDecomposition(U, T, i, history, converged=cost <= epsilon)


def _round_robin(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Rounds of disjoint index pairs covering every pair once (circle method)."""
    players = list(range(n)) + ([-1] if n % 2 else [])
    size = len(players)
    rounds = []
    for _ in range(size - 1):
        pairs = [(players[i], players[size - 1 - i]) for i in range(size // 2)]
        pairs = [(min(a, b), max(a, b)) for a, b in pairs if a >= 0 and b >= 0]
        rounds.append((np.array([p for p, _ in pairs], dtype=int), np.array([q for _, q in pairs], dtype=int)))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


JACOBI_STALL = 1e-12
"""Jacobi sweeps stop once a sweep lowers the off-diagonal mass by at most this fraction of its
starting value. Measured on the 50 × 5,000 benchmark's row-space problem (49 dimensions, two
groups): the rotation test alone (``|sin θ| < 1e-12``) took 62–79 sweeps, of which the last ~40 moved
the mass by less than 1e-13 of its start — rotations among directions whose mass is tied (the same
mass, bases up to 67° apart from warm and cold starts), not a better decomposition."""


def jacobi_jevd(
    matrices: np.ndarray, *, tol: float = 1e-12, max_sweeps: int = 100, stall: float = JACOBI_STALL, start: np.ndarray | None = None
) -> JointDecomposition:
    """Orthogonal joint diagonalisation of symmetric matrices by Jacobi sweeps (Cardoso &
    Souloumiac 1996); see the module docstring (``stall=0``: the rotation test alone). ``start``:
    an orthogonal basis to sweep from instead of the identity (an earlier decomposition's, e.g. the
    audit's for a bootstrap replicate); the history then starts at its off-diagonal mass."""
    M = np.array(matrices, dtype=float, copy=True)
    n = M.shape[1]
    U = np.eye(n)
    if start is not None:
        U = np.array(start, dtype=float, copy=True)
        M = np.einsum("na,knm,mb->kab", U, M, U, optimize=True)
    rounds = _round_robin(n)
    history = [off_diagonal_mass(M)]
    if n < 2:
        return JointDecomposition(U, M, 0, history, converged=True)
    negligible = (4 * np.finfo(float).eps * max(float(np.abs(M).max()), np.finfo(float).tiny)) ** 2 * M.shape[0]
    sweeps, converged = 0, False
    for sweeps in range(1, max_sweeps + 1):  # noqa: B007 - reported
        largest = 0.0
        for p, q in rounds:
            h1 = M[:, p, p] - M[:, q, q]  # (k, pairs)
            h2 = 2 * M[:, p, q]
            g11, g12, g22 = (h1 * h1).sum(0), (h1 * h2).sum(0), (h2 * h2).sum(0)
            # top eigenvector (x, y) of [[g11, g12], [g12, g22]], with x >= 0
            angle = 0.5 * np.arctan2(2 * g12, g11 - g22)
            angle[g22 <= negligible] = 0.0  # off-diagonal at rounding level: an arbitrary angle otherwise
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
        history.append(off_diagonal_mass(M))
        if largest < tol or (stall > 0 and history[-2] - history[-1] <= stall * history[0]):
            converged = True
            break
    return JointDecomposition(U, M, sweeps, history, converged=converged)


def joint_diagonalize(matrices: np.ndarray, *, tol: float = 1e-12, max_sweeps: int = 100):
    """Orthogonal ``U`` approximately diagonalising every symmetric matrix in ``matrices``
    (Jacobi); returns ``(U, diagonals, n_sweeps)`` with ``diagonals[i] = diag(Uᵀ M_i U)``."""
    result = jacobi_jevd(matrices, tol=tol, max_sweeps=max_sweeps)
    return result.U, np.einsum("kii->ki", result.T), result.n_iter


# ============================================================================ choosing r columns
ENUMERATE_SUBSETS = 20_000
"""Up to this many subsets of ``r`` of the columns, :func:`select_columns` scores them all (exact,
~0.1 ms for the 252 of 5 among 10) instead of solving the integer program (HiGHS through
:func:`scipy.optimize.milp`: 3–7 ms a call — most of a bootstrap replicate's JEVD fit — and
optimal only to its default relative gap of 10⁻⁴)."""


def select_columns(captured: np.ndarray, target: np.ndarray, r: int, pooled: np.ndarray) -> np.ndarray:
    """Indices of ``r`` columns minimising ``max_i (target_i − Σ_{j∈S} captured_ij)``.

    The integer program (binary ``x_j``, free ``z``)::

        min z − ε Σ_j pooled_j x_j   s.t.  target_i − captured_i · x ≤ z,  Σ x = r

    with a tiny ``ε`` that breaks ties towards more pooled variance: every subset scored when there
    are at most :data:`ENUMERATE_SUBSETS` (exactly; the first in lexicographic order among equal
    scores), else solved as a MILP.
    """
    k, s = captured.shape
    if r >= s:
        return np.arange(s)
    scale = max(float(np.abs(captured).max()), 1e-300)
    epsilon = 1e-9 / max(float(np.abs(pooled).sum()), 1e-300) * scale
    if math.comb(s, r) <= ENUMERATE_SUBSETS:
        subsets = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(s), r)), dtype=np.intp).reshape(-1, r)
        scores = (target[:, None] - captured[:, subsets].sum(axis=2)).max(axis=0) - epsilon * pooled[subsets].sum(axis=1)
        return subsets[int(np.argmin(scores))]
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


# ============================================================================ the estimator
class JEVDPCA(GroupPCABase):
    """Fair PCA by joint eigenvalue decomposition of the group matrices (Rathore & Manwani).

    See the module docstring for the formulation, what the paper leaves open and the solvers.

    Parameters
    ----------
    n_components : int, default=2
    solver : {"paper", "damped", "jacobi"}, default="paper"
        ``"paper"``: Algorithm 1 as printed (first-order updates from ``U = I``). ``"damped"``:
        the same direction with a backtracking step. ``"jacobi"``: orthogonal Jacobi sweeps —
        the stable scheme the audit uses (``docs/architecture.md`` gives why and the measured
        effect).
    tol : float, optional
        ``"paper"``/``"damped"``: ``ε = tol · C(I)`` (default 1e-10). ``"jacobi"``: stop when
        every rotation's ``|sin θ|`` in a sweep is below ``tol`` (default 1e-12).
    max_iter : int, optional
        ``S_max`` (default 500) or the number of Jacobi sweeps (default 100).
    max_dim : int, default=100
        Above this many problem dimensions the decomposition runs inside the top-``max_dim``
        principal subspace of the pooled covariance.

    Attributes
    ----------
    joint_basis_ : ndarray (n_features, n_dim)
        The joint eigenvectors (unit columns; orthonormal for ``"jacobi"``).
    joint_eigenvalues_ : ndarray (k, n_dim)
        ``u_jᵀ C_s u_j`` per group for each unit column.
    off_diagonal_ratio_ : float
        ``C(U) / C(I)`` at the end (0 = exactly joint).
    criterion_history_ : list of float
        ``C(U)`` after each iteration (sweep), starting with ``C(I)``.
    n_iter_ : int
    converged_ : bool
    diverged_ : bool
        Algorithm 1 broke down (``C`` not finite or ``B`` singular); the best iterate was used.
    selected_ : ndarray of int
        The joint eigenvectors kept.

    References
    ----------
    V. Rathore, N. Manwani. "Achieving Fair PCA Using Joint Eigenvalue Decomposition".
    arXiv:2502.16933, 2025.
    R. André, T. Trainini, X. Luciani, E. Moreau. "A fast algorithm for joint eigenvalue
    decomposition of real matrices". EUSIPCO 2015.
    J.-F. Cardoso, A. Souloumiac. "Jacobi angles for simultaneous diagonalization". SIAM J.
    Matrix Anal. Appl. 17(1), 1996.
    """

    def __init__(self, n_components: int = 2, *, solver: str = "paper", tol=None, max_iter=None, max_dim: int = 100):
        super().__init__(n_components)
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.max_dim = max_dim

    def _decompose(self, problem: GroupProblem, start: np.ndarray | None = None):
        """The joint decomposition of ``problem`` (once per problem, shared by every rank);
        ``start`` — an earlier fit's joint basis on the features (:meth:`_warm_state`) — starts the
        Jacobi sweeps there when the problem's coordinates are the features themselves."""
        tol, max_iter = solver_settings(self, SOLVERS, _DEFAULT_TOL, _DEFAULT_MAX_ITER)
        key = ("jevd", self.solver, tol, max_iter, self.max_dim)
        if key not in problem._cache:
            if problem.dim > self.max_dim:
                _, subspace = top_eigh(problem.pooled, self.max_dim)
            else:
                subspace = np.eye(problem.dim)
            # C_s in the subspace; M_s differs by a multiple of I, which no solver sees
            matrices = np.einsum("na,knm,mb->kab", subspace, problem.covariances, subspace, optimize=True)
            warm = (self.solver == "jacobi" and start is not None and problem.basis is None and problem.dim <= self.max_dim
                    and start.shape == (problem.dim, problem.dim))
            if self.solver == "jacobi":
                result = jacobi_jevd(matrices, tol=tol, max_sweeps=max_iter, start=start if warm else None)
            else:
                result = first_order_jevd(matrices, tol=tol, max_iter=max_iter, damped=self.solver == "damped")
            basis = subspace @ result.U
            basis = basis / np.maximum(np.linalg.norm(basis, axis=0), 1e-300)
            problem._cache[key] = (basis, result)
        return problem._cache[key]

    def _warm_state(self):
        """The joint basis on the features: a bootstrap replicate's sweeps start there (the audit's
        solution measured on another sample, not another start's)."""
        return getattr(self, "joint_basis_", None)

    def _solve(self, problem: GroupProblem, d: int, warm_start) -> LowRankMap:
        basis, result = self._decompose(problem, warm_start)
        captured = problem.captured_by(basis)  # Rayleigh quotients of the unit columns
        weights = problem.sizes / problem.sizes.sum()
        selected = select_columns(captured, problem.captured(d), min(d, basis.shape[1]), weights @ captured)
        ratio = result.history[-1] / result.history[0] if result.history[0] > 0 else 0.0
        if result.diverged:
            warnings.warn(
                f"JEVD-PCA (Algorithm 1) diverged after {result.n_iter} iterations (criterion C(U) became "
                "infinite or B singular); the iterate with the smallest C(U) was used "
                f"(C(U)/C(I) = {min(result.history) / max(result.history[0], 1e-300):.3g}). "
                "solver='jacobi' is the stable scheme.",
                ConvergenceWarning,
                stacklevel=4,
            )
        elif not result.converged:
            warnings.warn(
                f"JEVD-PCA ({self.solver}) stopped after {result.n_iter} iterations with C(U)/C(I) = "
                f"{ratio:.3g} above its tolerance.",
                ConvergenceWarning,
                stacklevel=4,
            )
        kept = basis[:, selected] if self.solver == "jacobi" else orthonormal_basis(basis[:, selected])
        if kept.shape[1] < len(selected):
            warnings.warn(
                f"JEVD-PCA ({self.solver}): the {len(selected)} joint eigenvectors kept are linearly dependent; "
                f"the map has rank {kept.shape[1]}.",
                UserWarning,
                stacklevel=4,
            )
        self.joint_basis_ = problem.lift(LowRankMap(basis, np.ones(basis.shape[1])), 0).basis
        self.joint_eigenvalues_ = captured
        self.off_diagonal_ratio_ = min(result.history) / result.history[0] if result.history[0] > 0 else 0.0
        self.criterion_history_ = list(result.history)
        self.n_iter_ = result.n_iter
        self.converged_ = bool(result.converged)
        self.diverged_ = bool(result.diverged)
        self.selected_ = selected
        return LowRankMap(kept, np.ones(kept.shape[1]))
