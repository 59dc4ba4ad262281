"""Samadi et al.'s rounding of a fractional solution (Algorithm 1, steps after the SDP).

Given a fractional map ``P̂ = Σ_j λ̂_j u_j u_jᵀ`` (``0 ⪯ P̂ ⪯ I``, ``tr P̂ ≤ d``), keep its
eigenvectors and re-choose the weights by the linear program (5)–(9) of
S. Samadi, U. Tantipongpipat, J. Morgenstern, M. Singh, S. Vempala, "The Price of Fair PCA:
One Extra Dimension", NeurIPS 2018::

    min z   s.t.   z ≥ c_i(d) − Σ_j λ_j u_jᵀ C_i u_j   (each group i)
                   Σ_j λ_j ≤ d,    0 ≤ λ_j ≤ 1

taking an *extreme point* (HiGHS's dual simplex returns a basic solution; called through highspy
directly, without presolve, on one thread: 0.9 ms a solve, where :func:`scipy.optimize.linprog`
took 9 ms — most of a bootstrap replicate's Fair PCA fit on the default sample). At a vertex at most
``k`` of the ``λ_j`` are fractional, and because the tight constraints number at most ``k + 1``
the map has rank at most ``d + k − 1`` (Samadi et al. Thm. 5.1/5.2 give this bound for k
groups; ``d + 1`` for two). The LP optimum is no worse than ``P̂`` itself, which is feasible.

Last step of Algorithm 1: ``λ*_j = 1 − sqrt(1 − λ̄_j)``. The map ``P* = Σ_j λ*_j u_j u_jᵀ`` then
reconstructs every group with exactly the LP's loss, because ``2λ* − λ*² = λ̄`` and
``‖A − A P*‖²_F = ‖A‖²_F − Σ_j (2λ*_j − λ*_j²) ‖A u_j‖²``.
"""

from __future__ import annotations

import numpy as np

from ..linalg import LowRankMap
from ._problem import GroupProblem

_ZERO = 1e-9


def lp_round(problem: GroupProblem, d: int, basis: np.ndarray) -> tuple[LowRankMap, np.ndarray]:
    """Solve LP (5)–(9) over the orthonormal ``basis`` (eigenvectors of ``P̂``).

    Returns the affine projection ``P*`` (Alg. 1's output) and the LP weights ``λ̄``.
    """
    captured = problem.captured_by(basis)  # (k, s): u_jᵀ C_i u_j
    lam = np.clip(_rounding_lp(captured, problem.captured(d), d), 0.0, 1.0)
    lam[lam < _ZERO] = 0.0
    lam[lam > 1 - _ZERO] = 1.0
    return affine_projection(basis, lam), lam


def _rounding_lp(captured: np.ndarray, c: np.ndarray, d: int) -> np.ndarray:
    """A basic optimal ``λ`` of ``min z s.t. c_i − captured_i·λ ≤ z, Σλ ≤ d, 0 ≤ λ ≤ 1`` (HiGHS,
    dual simplex)."""
    import highspy

    k, s = captured.shape
    inf = highspy.kHighsInf
    model = highspy.Highs()
    model.setOptionValue("output_flag", False)
    model.setOptionValue("solver", "simplex")
    model.setOptionValue("simplex_strategy", 1)  # dual simplex, as linprog's "highs-ds"
    model.setOptionValue("presolve", "off")  # a few rows: presolve and threads only cost (1.9 → 0.9 ms a solve)
    model.setOptionValue("threads", 1)
    model.addVars(s + 1, np.r_[np.zeros(s), -inf], np.r_[np.ones(s), inf])
    model.changeColsCost(s + 1, np.arange(s + 1, dtype=np.int32), np.r_[np.zeros(s), 1.0])
    # c_i − a_i·λ ≤ z   ⇔   −a_i·λ − z ≤ −c_i ;   Σ λ ≤ d
    rows = np.zeros((k + 1, s + 1))
    rows[:k, :s], rows[:k, s], rows[k, :s] = -captured, -1.0, 1.0
    starts = np.arange(0, (k + 1) * (s + 1), s + 1, dtype=np.int32)
    index = np.tile(np.arange(s + 1, dtype=np.int32), k + 1)
    model.addRows(k + 1, np.full(k + 1, -inf), np.r_[-c, d], rows.size, starts, index, rows.ravel())
    model.run()
    if model.getModelStatus() != highspy.HighsModelStatus.kOptimal:  # pragma: no cover - always feasible and bounded
        raise RuntimeError(f"Samadi LP rounding failed: {model.modelStatusToString(model.getModelStatus())}")
    return np.asarray(model.getSolution().col_value)[:s]


def affine_projection(basis: np.ndarray, lam: np.ndarray) -> LowRankMap:
    """Samadi Alg. 1's output map: weights ``1 − sqrt(1 − λ̄)`` on the kept directions."""
    keep = lam > 0
    weights = 1.0 - np.sqrt(1.0 - lam[keep])
    order = np.argsort(-weights, kind="stable")
    return LowRankMap(basis[:, keep][:, order], weights[order])
