"""Samadi et al.'s rounding of a fractional solution (Algorithm 1, steps after the SDP).

Given a fractional map ``P̂ = Σ_j λ̂_j u_j u_jᵀ`` (``0 ⪯ P̂ ⪯ I``, ``tr P̂ ≤ d``), keep its
eigenvectors and re-choose the weights by the linear program (5)–(9) of
S. Samadi, U. Tantipongpipat, J. Morgenstern, M. Singh, S. Vempala, "The Price of Fair PCA:
One Extra Dimension", NeurIPS 2018::

    min z   s.t.   z ≥ c_i(d) − Σ_j λ_j u_jᵀ C_i u_j   (each group i)
                   Σ_j λ_j ≤ d,    0 ≤ λ_j ≤ 1

taking an *extreme point* (HiGHS dual simplex returns a basic solution). At a vertex at most
``k`` of the ``λ_j`` are fractional, and because the tight constraints number at most ``k + 1``
the map has rank at most ``d + k − 1`` (Samadi et al. Thm. 5.1/5.2 give this bound for k
groups; ``d + 1`` for two). The LP optimum is no worse than ``P̂`` itself, which is feasible.

Last step of Algorithm 1: ``λ*_j = 1 − sqrt(1 − λ̄_j)``. The map ``P* = Σ_j λ*_j u_j u_jᵀ`` then
reconstructs every group with exactly the LP's loss, because ``2λ* − λ*² = λ̄`` and
``‖A − A P*‖²_F = ‖A‖²_F − Σ_j (2λ*_j − λ*_j²) ‖A u_j‖²``.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from ..linalg import LowRankMap
from ._problem import GroupProblem

_ZERO = 1e-9


def lp_round(problem: GroupProblem, d: int, basis: np.ndarray) -> tuple[LowRankMap, np.ndarray]:
    """Solve LP (5)–(9) over the orthonormal ``basis`` (eigenvectors of ``P̂``).

    Returns the affine projection ``P*`` (Alg. 1's output) and the LP weights ``λ̄``.
    """
    s = basis.shape[1]
    captured = problem.captured_by(basis)  # (k, s): u_jᵀ C_i u_j
    c = problem.captured(d)
    k = problem.n_groups
    objective = np.zeros(s + 1)
    objective[-1] = 1.0
    # c_i − a_i·λ ≤ z   ⇔   −a_i·λ − z ≤ −c_i ;   Σ λ ≤ d
    A_ub = np.zeros((k + 1, s + 1))
    A_ub[:k, :s] = -captured
    A_ub[:k, -1] = -1.0
    A_ub[k, :s] = 1.0
    b_ub = np.concatenate([-c, [d]])
    bounds = [(0.0, 1.0)] * s + [(None, None)]
    result = linprog(objective, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs-ds")
    if result.status != 0:  # pragma: no cover - the LP is always feasible and bounded
        raise RuntimeError(f"Samadi LP rounding failed: {result.message}")
    lam = np.clip(result.x[:s], 0.0, 1.0)
    lam[lam < _ZERO] = 0.0
    lam[lam > 1 - _ZERO] = 1.0
    return affine_projection(basis, lam), lam


def affine_projection(basis: np.ndarray, lam: np.ndarray) -> LowRankMap:
    """Samadi Alg. 1's output map: weights ``1 − sqrt(1 − λ̄)`` on the kept directions."""
    keep = lam > 0
    weights = 1.0 - np.sqrt(1.0 - lam[keep])
    order = np.argsort(-weights, kind="stable")
    return LowRankMap(basis[:, keep][:, order], weights[order])
