"""Fair PCA (Samadi et al. 2018) for any number of groups, with three solvers."""

from __future__ import annotations

import numpy as np

from ..linalg import LowRankMap
from ._base import GroupPCABase, solver_settings
from ._dual import FairPCASolution, solve_dual
from ._mw import solve_mw
from ._problem import GroupProblem
from ._sdp import solve_sdp

SOLVERS = ("eig", "sdp", "mw")
_DEFAULT_TOL = {"eig": 1e-10, "mw": 1e-3, "sdp": None}
_DEFAULT_MAX_ITER = {"eig": 300, "mw": 1000, "sdp": None}


class FairPCA(GroupPCABase):
    """Fair PCA: the rank-``d`` map minimising the largest average group loss.

    Solves Samadi et al.'s problem (eq. 10, for k >= 2 groups)::

        min_P  max_i  (1/m_i) (‖A_i − A_i P‖²_F − ‖A_i − Â_i‖²_F)

    through its convex relaxation (SDP (4)) and returns the extreme-point rounding of
    Algorithm 1, an "affine projection" of rank ``≤ d + k − 1`` (Thm. 5.1/5.2; ``d + 1`` for
    two groups) whose loss equals the relaxation's optimum. At the optimum the losses of the
    groups that bind are equal (Thm. 4.5 for two groups, whenever the optimum is below
    vanilla PCA's loss).

    Parameters
    ----------
    n_components : int, default=2
        Target rank ``d``.
    solver : {"eig", "sdp", "mw"}, default="eig"
        ``"eig"``: exact and fast — the concave Lagrangian dual maximised by a certified
        cutting-plane method with eigen-decompositions only, primal recovered and rounded by
        Samadi's LP (see ``fairaudit.pca._dual``). ``"sdp"``: Samadi Algorithm 1 literally, the
        SDP in CVXPY (Clarabel, SCS fallback) then LP (5)–(9) (HiGHS dual simplex) — slow
        beyond a few dozen features. ``"mw"``: Samadi's multiplicative weights with a
        primal–dual-gap stopping rule.
    tol : float, optional
        Stopping tolerance on the duality gap: relative to the largest group variance for
        ``"eig"`` (default 1e-10), relative to the objective for ``"mw"`` (default 1e-3).
    max_iter : int, optional
        Iteration cap (defaults: 300 for ``"eig"``, 1000 for ``"mw"``).
    eta : float, default=1.0
        ``"mw"`` step size (scaled by the first round's largest loss, decreasing as 1/√t).

    Attributes
    ----------
    dual_gap_ : float
        Certified gap between the returned map's largest loss and a lower bound on the optimum
        (``"eig"``, ``"mw"``; NaN for ``"sdp"``, whose interior-point value is not a bound).
    dual_weights_ : ndarray
        The group weights ``w`` of the best dual point (``"eig"``, ``"mw"``).
    n_iter_ : int
    solver_used_ : str
        ``"eig"``, ``"mw"``, or the SDP solver that succeeded (``"sdp/CLARABEL"``, ``"sdp/SCS"``).
    relaxation_value_ : float or None
        The SDP's own optimal value (``"sdp"`` only).
    Others as in :class:`~fairaudit.pca._base.GroupPCABase`.

    References
    ----------
    S. Samadi, U. Tantipongpipat, J. Morgenstern, M. Singh, S. Vempala. "The Price of Fair
    PCA: One Extra Dimension". NeurIPS 2018.
    J. Shen, A. J. Davis, D. Lu, Z. Bai. "Hidden convexity of fair PCA and fast solver via
    eigenvalue optimization" (EigOpt). 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from fairaudit import FairPCA
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(size=(80, 6)) * [3, 1, 1, 1, 1, 1],
    ...                rng.normal(size=(20, 6)) * [1, 3, 1, 1, 1, 1]])
    >>> groups = np.repeat(["large", "small"], [80, 20])
    >>> fair = FairPCA(n_components=1).fit(X, sensitive_features=groups)
    >>> bool(abs(fair.group_losses_[0] - fair.group_losses_[1]) < 1e-6)
    True
    """

    def __init__(self, n_components: int = 2, *, solver: str = "eig", tol=None, max_iter=None, eta: float = 1.0):
        super().__init__(n_components)
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.eta = eta

    def _solve(self, problem: GroupProblem, d: int, warm_start) -> LowRankMap:
        tol, max_iter = solver_settings(self, SOLVERS, _DEFAULT_TOL, _DEFAULT_MAX_ITER)
        if self.solver == "eig":
            solution = solve_dual(problem, d, tol=tol, max_iter=max_iter, initial_weights=warm_start)
            self.solver_used_ = "eig"
        elif self.solver == "mw":
            solution = solve_mw(problem, d, eta=self.eta, tol=tol, max_iter=max_iter)
            self.solver_used_ = "mw"
        else:
            solution, name = solve_sdp(problem, d)
            self.solver_used_ = f"sdp/{name}"
        self._record(solution)
        return solution.projection

    def _record(self, solution: FairPCASolution) -> None:
        self.dual_gap_ = solution.gap
        self.dual_weights_ = solution.weights
        self.n_iter_ = solution.n_iter
        self.converged_ = solution.converged
        self.relaxation_value_ = solution.relaxation_value

    def _warm_state(self):
        weights = getattr(self, "dual_weights_", None)
        if self.solver != "eig" or weights is None or not np.all(np.isfinite(weights)):
            return None
        return weights
