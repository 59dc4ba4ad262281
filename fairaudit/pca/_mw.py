"""Samadi et al.'s multiplicative-weights solver, with a primal–dual-gap stopping rule.

S. Samadi et al., "The Price of Fair PCA: One Extra Dimension", NeurIPS 2018, solve the Fair
PCA relaxation by multiplicative weights over the groups: each round calls the oracle "PCA of
the weighted data" — the top-``d`` eigenvectors of ``M(w) = Σ_i w_i C_i`` (``C_i = A_iᵀA_i/m_i``),
which minimises ``Σ_i w_i ℓ_i(P)`` over the Fantope — then raises the weight of groups with a
large loss, ``w_i ← w_i exp(η ℓ_i(P_t))``, renormalised. The average ``P̄ = (1/T) Σ_t P_t`` is
the fractional solution. The authors' code runs a fixed number of rounds (T = 10 on credit,
which ends 3–25 % above the optimum); here it stops once the certified gap

    max_i ℓ_i(P̄) − max_t g(w_t)      (g the Lagrangian dual, see ``_dual``)

is below ``tol`` times the objective, or after ``max_iter`` rounds. Losses are divided by
the first round's largest loss (vanilla-PCA-like weights) inside the exponent so that ``eta``
is dimensionless (the analysis assumes losses in [0, 1]). The average is then rounded by LP
(5)–(9) to rank ``≤ d + k − 1``, exactly as Algorithm 1 does with the SDP's output.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..linalg import top_eigh
from ._dual import FairPCASolution
from ._problem import GroupProblem
from ._rounding import lp_round


def solve_mw(
    problem: GroupProblem,
    d: int,
    *,
    eta: float = 1.0,
    tol: float = 1e-3,
    max_iter: int = 1000,
) -> FairPCASolution:
    """Multiplicative weights for Fair PCA of rank ``d``; see the module docstring."""
    k, n = problem.n_groups, problem.dim
    c = problem.captured(d)
    w = problem.sizes / problem.sizes.sum()
    loss_scale = None
    average = np.zeros((n, n))
    loss_sum = np.zeros(k)
    lower = -np.inf
    previous = None
    converged = False
    t = 0
    for t in range(1, max_iter + 1):
        values, vectors = top_eigh(problem.weighted(w), d, v0=previous)
        previous = vectors
        losses = problem.projection_losses(vectors, d)
        lower = max(lower, float(w @ c - values.sum()))
        average += vectors @ vectors.T
        loss_sum += losses
        if loss_scale is None:  # the first (vanilla PCA) losses set the scale of the exponent
            loss_scale = float(losses.max()) if losses.max() > 0 else 1.0
        upper = loss_sum.max() / t
        if upper - lower <= tol * max(upper, 1e-300):
            converged = True
            break
        w = w * np.exp(eta / np.sqrt(t) * (losses - losses.max()) / loss_scale)
        w /= w.sum()
    average /= t
    eigenvalues, eigenvectors = np.linalg.eigh((average + average.T) / 2)
    basis = eigenvectors[:, eigenvalues > 1e-12][:, ::-1]
    projection, _ = lp_round(problem, d, basis)
    losses = problem.losses(projection, d)
    converged = bool(converged or losses.max() - lower <= tol * max(losses.max(), 1e-300))
    if not converged:
        warnings.warn(
            f"Fair PCA (mw) stopped after {max_iter} rounds at rank {d} with certified gap "
            f"{losses.max() - lower:.3g} (relative tolerance {tol:g}).",
            ConvergenceWarning,
            stacklevel=3,
        )
    return FairPCASolution(
        projection=projection,
        losses=losses,
        lower_bound=lower,
        weights=w,
        n_iter=t,
        converged=converged,
    )
