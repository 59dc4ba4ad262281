"""Standard NMF (the paper's eq. (2)): ``min_{W ≥ 0, H ≥ 0} ‖X − WH‖²_F``.

Two solvers:

- ``"mu"`` (the paper's, §3.2): Lee & Seung's multiplicative updates, in the order the paper
  writes them, ``W ← W ⊙ XHᵀ / (WHHᵀ)`` then ``H ← H ⊙ WᵀX / (WᵀWH)`` (Lee & Seung 2001,
  Theorem 1: the objective never increases), stopped by the paper's eq. (10) with the matrix as
  its one group (or our ``"window"`` rule, see :class:`~fairaudit.nmf._core.StoppingRule`). The
  paper does not name the standard-NMF solver behind Algorithm 1; multiplicative updates with
  eq. (10) reproduce the authors' saved per-group errors on Heart Disease (``docs/nmf.md``).
- ``"cd"`` (ours, a named option): scikit-learn's coordinate descent
  (``sklearn.decomposition.non_negative_factorization``, Cichocki & Phan 2009 / Hsieh & Dhillon
  2011), started from the same factors and stopped by scikit-learn's own criterion with the same
  ``tol``. It converges much further than multiplicative updates under eq. (10): on the Heart
  groups its ``E_ℓ`` are equal or lower at every rank (``docs/nmf.md`` has the figures), i.e.
  closer to the *best* rank-r error of a group.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.decomposition import non_negative_factorization
from sklearn.exceptions import ConvergenceWarning

from ._core import NEAR_EXACT, QUIET_DIVISION, StoppingRule, mu_update_W, multiplicative_step

SOLVERS = ("mu", "cd")
STANDARD_MAX_ITER = 20000
"""Default iteration cap of standard NMF (:class:`~fairaudit.nmf.NMF`, ``E_ℓ``, ``init="nmf"``)."""


@dataclass
class StandardFit:
    W: np.ndarray
    H: np.ndarray
    n_iter: int
    history: np.ndarray  # relative error ‖X − WH‖/‖X‖ per iteration ("mu"), final value only ("cd")
    converged: bool


def solve_standard(
    X: np.ndarray,
    W: np.ndarray,
    H: np.ndarray,
    *,
    solver: str,
    tol: float,
    max_iter: int,
    stopping: str = "eq10",
    what: str = "NMF",
) -> StandardFit:
    """Fit ``X ≈ WH`` from the starting factors ``W``, ``H`` (modified in place for ``"mu"``).

    ``stopping`` applies to ``"mu"`` (``"eq10"`` or ``"window"``); ``"cd"`` has its own rule.
    """
    norm = float(np.linalg.norm(X))
    if solver == "cd":
        return _solve_cd(X, W, H, tol=tol, max_iter=max_iter, norm=norm, what=what)
    if solver != "mu":  # pragma: no cover - checked by the estimators
        raise ValueError(solver)
    squared_norm = norm * norm
    rule = StoppingRule(tol, max_iter, rule=stopping, what=what)
    rule.start(np.linalg.norm(X - W @ H))
    history = []
    work = np.empty((2, *W.shape))
    positive_W, positive_H = np.empty(W.shape, dtype=bool), np.empty(H.shape, dtype=bool)
    ratio_H = np.empty_like(H)
    HHt = H @ H.T
    iteration = 0
    with np.errstate(**QUIET_DIVISION):
        while True:
            iteration += 1
            mu_update_W(X, W, H, work, HHt=HHt, positive=positive_W)  # §3.2: W ← W ⊙ XHᵀ / (WHHᵀ)
            WtX = W.T @ X
            WtW = W.T @ W
            np.matmul(WtW, H, out=ratio_H)
            multiplicative_step(H, WtX, ratio_H, positive_H)  # §3.2: H ← H ⊙ WᵀX / (WᵀWH)
            HHt = H @ H.T  # also the next W step's
            squared = squared_norm - 2.0 * float(np.vdot(H, WtX)) + float(np.vdot(WtW, HHt))
            error = np.sqrt(max(squared, 0.0)) if squared > NEAR_EXACT * squared_norm else float(np.linalg.norm(X - W @ H))
            history.append(error / norm)
            if rule.done(iteration, errors=error, objective=error / norm, scale=error / norm):
                break
    rule.warn_if_capped(iteration, history[-1])
    return StandardFit(W, H, iteration, np.asarray(history), rule.converged)


def _solve_cd(X, W, H, *, tol, max_iter, norm, what) -> StandardFit:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        W, H, n_iter = non_negative_factorization(
            X, W=W, H=H, n_components=W.shape[1], init="custom", solver="cd", tol=tol, max_iter=max_iter
        )
    capped = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    relative = float(np.linalg.norm(X - W @ H)) / norm
    if capped:
        warnings.warn(
            f"{what} (coordinate descent) stopped at max_iter={max_iter} before reaching tol={tol:g} "
            f"(relative error {relative:.6g}); raise max_iter or loosen tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return StandardFit(W, H, int(n_iter), np.asarray([relative]), not capped)
