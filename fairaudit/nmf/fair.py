"""Fairer-NMF (Kassab, George, Needell, Geng, Jafar Nia, Li: "Towards a Fairer Non-negative
Matrix Factorization", arXiv:2411.09847; Frontiers in Big Data 9, 2026)."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..errors import FairAuditError
from ._am import HStep, nnls_rows
from ._base import NMFBase
from ._core import (
    TINY,
    GroupedData,
    StoppingRule,
    blas_threads,
    check_custom_factors,
    group_errors,
    mu_update_W,
    random_factors,
)
from ._standard import STANDARD_MAX_ITER, solve_standard

FAIR_SOLVERS = ("mu", "am")
INITS = ("nmf", "random", "custom")
DEFAULT_MAX_ITER = {"mu": 5000, "am": 200}


class FairerNMF(NMFBase):
    """Fairer-NMF: ``min_{W≥0, H≥0} max_ℓ (‖X_ℓ − W_ℓH‖_F − E_ℓ) / ‖X_ℓ‖_F``.

    The rows of ``X`` are split into groups ``X_ℓ`` by ``sensitive_features``; every group has
    its own ``W_ℓ`` and all share the dictionary ``H``. The objective is the largest *relative
    loss* (Def. 4.1, Remark 4.2): a group's reconstruction error beyond ``E_ℓ``, the error of
    the best rank-r NMF of that group alone (estimated by Algorithm 1, the mean over
    ``n_estimates`` runs), relative to the group's norm. Small or intrinsically complex groups,
    which standard NMF (eq. (2)) serves worst, are no longer sacrificed to large simple ones.

    Solvers:

    ``"mu"`` — Algorithm 3, multiplicative updates. Each iteration finds the group with the
    largest relative loss and adds 1 to its weight ``c_ℓ`` (all ``c_ℓ`` start at 1), updates
    ``H`` by the multiplicative step for the ``c``-weighted objective
    ``Σ_ℓ c_ℓ ‖X_ℓ − W_ℓH‖_F / ‖X_ℓ‖_F`` — the Lee–Seung step on the stacked data
    ``√a_ℓ X_ℓ ≈ √a_ℓ W_ℓ H`` with ``a_ℓ = c_ℓ / (‖X_ℓ‖_F ‖X_ℓ − W_ℓH‖_F)``, which is what the
    gradient of the (unsquared) norm gives::

        H ← H ⊙ (Σ_ℓ a_ℓ W_ℓᵀX_ℓ) / (Σ_ℓ a_ℓ W_ℓᵀW_ℓ H)

    — and every ``W_ℓ`` by the standard step ``W_ℓ ← W_ℓ ⊙ X_ℓHᵀ / (W_ℓHHᵀ)``. The iterate
    with the smallest objective is returned (the objective of a min–max scheme need not fall
    monotonically; ``loss_history_`` shows every iterate).

    ``"am"`` — Algorithm 2, alternating minimisation: the H-step is the second-order cone
    program of §5.2 solved with CVXPY (Clarabel, SCS as fallback; ``h_solvers_`` counts which
    solved), the W-step non-negative least squares per row (scipy). Both steps are exact, so
    the objective never increases. See :mod:`fairaudit.nmf._am`.

    Stopping: :class:`~fairaudit.nmf._core.StoppingRule` — the objective's change over the
    last 10 iterations (1 for ``"am"``) at most ``tol`` times the worst group's relative
    error — with a ``max_iter`` cap that emits a ``ConvergenceWarning``.

    What is ours: the paper's body (Algorithms 1–3, eq. (10)) could not be consulted while this
    was written, so the update of ``"mu"`` is written from its description (c-weights
    incremented on the worst group, ``H`` by a multiplicative step on the weighted stacked
    data, ``W_ℓ`` by standard MU) with the weights ``a_ℓ`` derived from the gradient as above;
    the stopping rule is our reading of eq. (10); the initial ``c_ℓ = 1``; and ``init="nmf"``.

    Parameters
    ----------
    n_components : int, default=2
        The rank ``r``; at most ``min(rows, features)``.
    solver : {"mu", "am"}, default="mu"
    init : {"nmf", "random", "custom"}, default="nmf"
        Starting factors. ``"nmf"``: the standard NMF of the pooled data (eq. (2), solver
        ``nmf_solver``, same seed — exactly :class:`NMF`'s solution), our choice: measured on
        the Heart data (benchmarks/bench_nmf_solvers.py, ranks 1–10, seeds 0–4) its mean final
        largest loss is equal or lower than from random starts at every rank (rank 2: 0.0087
        against 0.0176) in less than half the time. ``"random"``: uniform random factors.
        ``"custom"``: ``W`` and ``H`` passed to :meth:`fit`.
    n_estimates : int, default=5
        ``T`` of Algorithm 1.
    estimates : array-like of shape (n_groups,), optional
        Precomputed ``E_ℓ`` (absolute errors, in group order) instead of Algorithm 1 — e.g.
        ``NMF(...).fit(X, sensitive_features=g).E_``.
    nmf_solver : {"cd", "mu"}, default="cd"
        Standard-NMF solver for Algorithm 1 and ``init="nmf"`` (see :class:`NMF`).
    tol : float, default=1e-4
    max_iter : int or None, default=None
        Iteration cap; ``None`` means 5000 for ``"mu"`` and 200 for ``"am"``.
    random_state : int, Generator or None

    Attributes
    ----------
    W_ : ndarray (n_samples, r)
        The representation of the training rows (original row order).
    components_ : ndarray (r, n_features)
        The shared dictionary ``H``.
    E_, own_rel_errors_, group_errors_, group_losses_, groups_, group_sizes_
        As in :class:`NMF`; ``group_losses_`` are the relative losses Fairer-NMF equalises.
    objective_ : float
        ``max(group_losses_)``.
    weights_ : ndarray (n_groups,)
        How much each group drives the solution: ``c / Σc`` for ``"mu"``; for ``"am"`` the
        normalised dual values of the last H-step's cone constraints (0 for a group whose
        loss is below the maximum).
    n_iter_ : int
    loss_history_ : ndarray
        The objective (largest relative loss) before the first and after every iteration.
    converged_ : bool
    h_solvers_ : dict
        ``"am"`` only: number of H-steps solved by each solver (``{"CLARABEL": 37}``).
    fit_seconds_, estimate_seconds_ : float
        Time of the Fairer-NMF iterations (without ``E_ℓ`` and the starting NMF), and of
        Algorithm 1.

    References
    ----------
    L. Kassab, E. George, D. Needell, H. Geng, N. Jafar Nia, A. Li. "Towards a Fairer
    Non-negative Matrix Factorization". arXiv:2411.09847 (2024–2026).

    Examples
    --------
    >>> import numpy as np
    >>> from fairaudit import FairerNMF
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.uniform(size=(80, 2)) @ rng.uniform(size=(2, 10)),
    ...                rng.uniform(size=(20, 5)) @ rng.uniform(size=(5, 10))])
    >>> groups = np.repeat(["large", "small"], [80, 20])
    >>> fair = FairerNMF(n_components=3, random_state=0).fit(X, sensitive_features=groups)
    >>> bool(np.ptp(fair.group_losses_) < 0.01)
    True
    """

    def __init__(
        self,
        n_components: int = 2,
        *,
        solver: str = "mu",
        init: str = "nmf",
        n_estimates: int = 5,
        estimates=None,
        nmf_solver: str = "cd",
        tol: float = 1e-4,
        max_iter: int | None = None,
        random_state=None,
    ):
        self.n_components = n_components
        self.solver = solver
        self.init = init
        self.n_estimates = n_estimates
        self.estimates = estimates
        self.nmf_solver = nmf_solver
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _nmf_solver(self) -> str:
        return self.nmf_solver

    def _nmf_max_iter(self) -> int:
        return STANDARD_MAX_ITER

    def _max_iter(self) -> int:
        return DEFAULT_MAX_ITER.get(self.solver, 1) if self.max_iter is None else self.max_iter

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, sensitive_features, W=None, H=None):
        """Fit on ``X`` with one group value per row; ``W``, ``H`` for ``init="custom"``."""
        with blas_threads():
            return self._fit(X, sensitive_features, W, H)

    def _fit(self, X, sensitive_features, W, H):
        if self.solver not in FAIR_SOLVERS:
            raise FairAuditError(f"solver must be 'mu' (Algorithm 3) or 'am' (Algorithm 2); got {self.solver!r}.")
        if self.init not in INITS:
            raise FairAuditError(f"init must be one of {', '.join(INITS)}; got {self.init!r}.")
        if self.init != "custom" and (W is not None or H is not None):
            raise FairAuditError("W and H are starting factors for init='custom'; set init='custom' or drop them.")
        X = self._validate_input(X)
        r = self._check_common(X)
        data = GroupedData.build(X, sensitive_features)
        E, self.estimate_seconds_ = self._estimates(data, r)
        W0, H0 = self._initial_factors(X, r, W, H)
        W_sorted = np.ascontiguousarray(W0[data.order])
        start = time.perf_counter()
        if self.solver == "mu":
            W_sorted, H, history, n_iter, converged, weights = _fit_mu(data, E, W_sorted, H0, self.tol, self._max_iter())
            self.h_solvers_ = {}
        else:
            W_sorted, H, history, n_iter, converged, weights, used = _fit_am(
                data, E, W_sorted, H0, self.tol, self._max_iter()
            )
            self.h_solvers_ = used
        self.fit_seconds_ = time.perf_counter() - start
        self._set_factors(X, W_sorted[data.inverse], H)
        self.n_iter_ = n_iter
        self.loss_history_ = history
        self.converged_ = converged
        self.weights_ = weights
        self._set_group_attributes(data, W_sorted, H, E)
        return self

    def fit_transform(self, X, y=None, *, sensitive_features, W=None, H=None):
        return self.fit(X, sensitive_features=sensitive_features, W=W, H=H).W_

    def _initial_factors(self, X: np.ndarray, r: int, W, H) -> tuple[np.ndarray, np.ndarray]:
        if self.init == "custom":
            return check_custom_factors(W, H, *X.shape, r)
        W0, H0 = random_factors(X, r, self._rng())
        if self.init == "random":
            return W0, H0
        fit = solve_standard(
            X, W0, H0, solver=self.nmf_solver, tol=self.tol, max_iter=self._nmf_max_iter(), what="the starting NMF (init='nmf')"
        )
        return fit.W, fit.H


# ============================================================================ Algorithm 3
def _fit_mu(data: GroupedData, E: np.ndarray, W: np.ndarray, H: np.ndarray, tol: float, max_iter: int):
    X, slices, norms, squared = data.X, data.slices, data.norms, data.squared_norms
    W = W.copy()
    H = H.copy()
    c = np.ones(data.n_groups)
    rule = StoppingRule(tol, max_iter, what="Fairer-NMF (multiplicative updates)")
    history = []
    best = (np.inf, W, H, c)
    iteration = 0
    HHt = H @ H.T  # afterwards the W step's own HHᵀ (H does not change after it)
    while True:
        # Products of the current iterate: they give its group errors and the next H step.
        WtX = [W[s].T @ X[s] for s in slices]
        WtW = [W[s].T @ W[s] for s in slices]
        squared_errors = np.array(
            [sq - 2.0 * np.vdot(H, a) + np.vdot(b, HHt) for sq, a, b in zip(squared, WtX, WtW, strict=True)]
        )
        errors = np.sqrt(np.maximum(squared_errors, 0.0))
        losses = (errors - E) / norms
        objective = float(losses.max())
        history.append(objective)
        if objective < best[0]:
            best = (objective, W.copy(), H.copy(), c.copy())
        if iteration and rule.done(iteration, objective, float(np.max(errors / norms))):
            break
        iteration += 1
        c[int(np.argmax(losses))] += 1.0
        a = c / (norms * np.maximum(errors, 1e-12 * norms))
        numerator = sum(w * p for w, p in zip(a, WtX, strict=True))
        denominator = sum(w * g for w, g in zip(a, WtW, strict=True)) @ H
        H *= numerator / np.maximum(denominator, TINY)
        _, HHt = mu_update_W(X, W, H)
    rule.warn_if_capped(iteration, objective)
    _, W, H, c = best
    return W, H, np.asarray(history), iteration, rule.converged, c / c.sum()


# ============================================================================ Algorithm 2
def _fit_am(data: GroupedData, E: np.ndarray, W: np.ndarray, H: np.ndarray, tol: float, max_iter: int):
    X, slices, norms = data.X, data.slices, data.norms
    blocks = data.groups()
    step = HStep(blocks, E, norms, H.shape[0])
    rule = StoppingRule(tol, max_iter, every=1, what="Fairer-NMF (alternating minimisation)")
    used: dict[str, int] = {}

    def evaluate(W, H):
        errors = group_errors(data, W, H)
        return float(np.max((errors - E) / norms)), float(np.max(errors / norms))

    objective, _ = evaluate(W, H)
    history = [objective]
    weights = np.full(data.n_groups, np.nan)
    iteration = 0
    while True:
        iteration += 1
        H_new, solver, status = step.solve([W[s] for s in slices])
        if H_new is None:
            warnings.warn(
                f"Fairer-NMF (alternating minimisation): the H-step failed with Clarabel and SCS at "
                f"iteration {iteration} ({status}); returning the previous iterate.",
                ConvergenceWarning,
                stacklevel=3,
            )
            rule.converged = False
            iteration -= 1
            break
        used[solver] = used.get(solver, 0) + 1
        H = H_new
        duals = np.array([max(float(con.dual_value), 0.0) for con in step.problem.constraints])
        if duals.sum() > 0:
            weights = duals / duals.sum()
        W = nnls_rows(X, H)
        objective, scale = evaluate(W, H)
        history.append(objective)
        if rule.done(iteration, objective, scale):
            break
    if iteration >= max_iter:
        rule.warn_if_capped(iteration, objective)
    return W, H, np.asarray(history), iteration, rule.converged, weights, used
