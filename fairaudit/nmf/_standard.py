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
    """Fit ``X ≈ WH`` from the starting factors ``W``, ``H`` (``"mu"`` leaves them as they are).

    ``stopping`` applies to ``"mu"`` (``"eq10"`` or ``"window"``); ``"cd"`` has its own rule.
    """
    norm = float(np.linalg.norm(X))
    if solver == "cd":
        return _solve_cd(X, W, H, tol=tol, max_iter=max_iter, norm=norm, what=what)
    if solver != "mu":  # pragma: no cover - checked by the estimators
        raise ValueError(solver)
    return _mu_runs(X, [(W, H)], tol=tol, max_iter=max_iter, stopping=stopping, what=what)[0]


def solve_standard_runs(X: np.ndarray, starts, *, solver: str, tol: float, max_iter: int, stopping: str = "eq10", what: str = "NMF") -> list[StandardFit]:
    """:func:`solve_standard` from each of ``starts`` (``(W, H)`` pairs of one shape): Algorithm 1's
    ``T`` runs of a group. Multiplicative updates run them side by side, each product a stack of
    the runs' (NumPy calls BLAS once per run, so every run's arithmetic is that of its own
    :func:`solve_standard`, bit for bit); each run stops by its own rule and leaves the stack.
    What it saves is the interpreter's share of an iteration, most of it on small groups."""
    if solver != "mu":
        return [solve_standard(X, W, H, solver=solver, tol=tol, max_iter=max_iter, stopping=stopping, what=what) for W, H in starts]
    return _mu_runs(X, starts, tol=tol, max_iter=max_iter, stopping=stopping, what=what)


def _mu_runs(X: np.ndarray, starts, *, tol: float, max_iter: int, stopping: str, what: str) -> list[StandardFit]:
    """§3.2's multiplicative updates from every start at once (see :func:`solve_standard_runs`)."""
    norm = float(np.linalg.norm(X))
    squared_norm = norm * norm
    W = np.stack([np.asarray(W, dtype=float) for W, _ in starts])  # (runs, m, r)
    H = np.stack([np.asarray(H, dtype=float) for _, H in starts])  # (runs, r, n)
    runs = list(range(len(starts)))  # the runs still iterating, in stack order
    rules = [StoppingRule(tol, max_iter, rule=stopping, what=what) for _ in starts]
    for k in runs:
        rules[k].start(np.linalg.norm(X - W[k] @ H[k]))
    histories: list[list[float]] = [[] for _ in starts]
    fits: list[StandardFit | None] = [None] * len(starts)
    HHt = H @ H.transpose(0, 2, 1)
    work, positive_W, positive_H = np.empty((2, *W.shape)), np.empty(W.shape, dtype=bool), np.empty(H.shape, dtype=bool)
    iteration = 0
    with np.errstate(**QUIET_DIVISION):
        while runs:
            iteration += 1
            mu_update_W(X, W, H, work, HHt=HHt, positive=positive_W)  # §3.2: W ← W ⊙ XHᵀ / (WHHᵀ)
            WtX = W.transpose(0, 2, 1) @ X
            WtW = W.transpose(0, 2, 1) @ W
            multiplicative_step(H, WtX, WtW @ H, positive_H)  # §3.2: H ← H ⊙ WᵀX / (WᵀWH)
            HHt = H @ H.transpose(0, 2, 1)  # also the next W step's
            stopped = []
            for i, k in enumerate(runs):
                squared = squared_norm - 2.0 * float(np.vdot(H[i], WtX[i])) + float(np.vdot(WtW[i], HHt[i]))
                error = np.sqrt(max(squared, 0.0)) if squared > NEAR_EXACT * squared_norm else float(np.linalg.norm(X - W[i] @ H[i]))
                histories[k].append(error / norm)
                if rules[k].done(iteration, errors=error, objective=error / norm, scale=error / norm):
                    rules[k].warn_if_capped(iteration, histories[k][-1])
                    fits[k] = StandardFit(W[i].copy(), H[i].copy(), iteration, np.asarray(histories[k]), rules[k].converged)
                    stopped.append(i)
            if stopped:
                keep = [i for i in range(len(runs)) if i not in stopped]
                runs = [runs[i] for i in keep]
                W, H, HHt = W[keep], H[keep], HHt[keep]
                work, positive_W, positive_H = work[:, : len(keep)], positive_W[: len(keep)], positive_H[: len(keep)]
    return fits


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
