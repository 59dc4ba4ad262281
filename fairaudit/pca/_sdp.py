"""Samadi et al.'s Algorithm 1 with the semidefinite program solved by CVXPY.

SDP (4) of S. Samadi et al., "The Price of Fair PCA: One Extra Dimension", NeurIPS 2018,
written for k groups with the losses averaged over group sizes::

    min z   s.t.   z ≥ c_i(d) − ⟨C_i, P⟩   (i = 1 … k),   tr P ≤ d,   0 ⪯ P ⪯ I

followed by the SVD of ``P̂`` and the extreme point of LP (5)–(9) (see ``_rounding``).
This is the reference the fast dual solver is tested against. Its cost grows steeply with the
number of features (an n×n matrix variable with two semidefinite constraints).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import FairAuditError
from ._dual import FairPCASolution
from ._problem import GroupProblem
from ._rounding import lp_round

SDP_SOLVERS = ("CLARABEL", "SCS")


def solve_sdp_relaxation(problem: GroupProblem, d: int, solvers=SDP_SOLVERS) -> tuple[np.ndarray, float, str]:
    """The SDP's optimal ``P̂``, its value, and the name of the solver that produced it."""
    import cvxpy as cp

    n = problem.dim
    P = cp.Variable((n, n), symmetric=True)
    z = cp.Variable()
    c = problem.captured(d)
    constraints = [P >> 0, np.eye(n) - P >> 0, cp.trace(P) <= d]
    constraints += [z >= c[i] - cp.sum(cp.multiply(problem.covariances[i], P)) for i in range(problem.n_groups)]
    program = cp.Problem(cp.Minimize(z), constraints)
    failures = []
    for solver in solvers:
        if solver not in cp.installed_solvers():
            failures.append(f"{solver}: not installed")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # the status below says it instead
                program.solve(solver=solver)
        except cp.SolverError as exc:
            failures.append(f"{solver}: {exc}")
            continue
        if program.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and P.value is not None:
            value = (P.value + P.value.T) / 2
            name = solver if program.status == cp.OPTIMAL else f"{solver} (inaccurate)"
            return value, float(program.value), name
        failures.append(f"{solver}: status {program.status}")
    raise FairAuditError("the Fair PCA SDP could not be solved (" + "; ".join(failures) + "); use solver='eig'.")


def solve_sdp(problem: GroupProblem, d: int, solvers=SDP_SOLVERS) -> tuple[FairPCASolution, str]:
    """Samadi Algorithm 1: SDP, eigen-decomposition of ``P̂``, extreme point of LP (5)–(9)."""
    P_hat, value, solver = solve_sdp_relaxation(problem, d, solvers)
    _, vectors = np.linalg.eigh(P_hat)  # the SVD of a symmetric PSD matrix
    projection, _ = lp_round(problem, d, vectors[:, ::-1])
    losses = problem.losses(projection, d)
    solution = FairPCASolution(
        projection=projection,
        losses=losses,
        lower_bound=float("nan"),  # an interior-point SDP value is not a certified bound
        weights=np.full(problem.n_groups, np.nan),
        n_iter=1,
        converged=True,
        relaxation_value=value,
    )
    return solution, solver
