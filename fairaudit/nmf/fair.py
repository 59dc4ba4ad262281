"""Fairer-NMF (Kassab, George, Needell, Geng, Jafar Nia, Li: "Towards a Fairer Non-negative
Matrix Factorization", arXiv:2411.09847): the objective (eq. (5)), Algorithm 2 (alternating
minimisation) and Algorithm 3 (multiplicative updates), with the paper's settings as defaults
and our improvements as named options (listed with their measured effects in ``docs/nmf.md``)."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..errors import FairAuditError
from ._am import HStep, nnls_rows
from ._base import NMFBase
from ._core import (
    AUTHORS_MAX_ITER,
    CHECK_EVERY,
    FAIR_STOPPING_RULES,
    NEAR_EXACT,
    QUIET_DIVISION,
    GroupedData,
    StoppingRule,
    blas_threads,
    check_custom_factors,
    group_errors,
    mu_update_W,
    multiplicative_step,
    random_factors,
)
from ._standard import STANDARD_MAX_ITER, solve_standard

FAIR_SOLVERS = ("mu", "am")
INITS = ("random", "nmf", "custom")
MU_WEIGHTS = ("squared", "gradient")
DEFAULT_MAX_ITER = {"mu": 5000, "am": 200}


class FairerNMF(NMFBase):
    """Fairer-NMF: ``min_{W≥0, H≥0} max_ℓ (‖X_ℓ − W_ℓH‖_F − E_ℓ) / ‖X_ℓ‖_F`` (eq. (5)).

    The rows of ``X`` are split into groups ``X_ℓ`` by ``sensitive_features``; every group has
    its own ``W_ℓ`` and all share the dictionary ``H``. The objective is the largest *relative
    loss* (Def. 4.1): a group's reconstruction error beyond ``E_ℓ``, the expected error of a
    rank-r NMF of that group alone (Remark 4.2, estimated by Algorithm 1 as the mean over
    ``n_estimates`` runs), relative to the group's norm. Small or intrinsically complex groups,
    which standard NMF (eq. (2)) serves worst, are no longer sacrificed to large simple ones.

    The defaults are the paper's method as printed:

    ``solver="mu"`` — Algorithm 3. ``c⁽⁰⁾ = 0`` (line 3); each iteration finds the group ``ℓ*``
    with the largest relative loss at the previous iterate (line 7) and adds 1 to ``c_ℓ*``
    (line 8); ``H`` takes the multiplicative step for the stacked matrices ``X̃``, ``W̃`` whose
    group-ℓ rows are ``c_ℓ X_ℓ / ‖X_ℓ‖`` and ``c_ℓ W_ℓ / ‖X_ℓ‖`` (lines 9–10, the surrogate eq.
    (9) of the H-problem eq. (8)), i.e. with weights ``a_ℓ = c_ℓ² / ‖X_ℓ‖²``::

        H ← H ⊙ (Σ_ℓ a_ℓ W_ℓᵀX_ℓ) / (Σ_ℓ a_ℓ W_ℓᵀW_ℓ H)

    and ``W`` the standard step ``W ← W ⊙ XHᵀ / (WHHᵀ)`` (line 11). The last iterate is returned.

    ``solver="am"`` — Algorithm 2: from a random ``W⁽⁰⁾``, the H-step is the second-order cone
    program of §5.2 (CVXPY; Clarabel, SCS as fallback — the paper's ECOS is no longer shipped
    with CVXPY; ``h_solvers_`` counts which solved) and the W-step non-negative least squares
    per row (scipy's exact active-set NNLS; the paper used OSQP). Both steps are exact, so the
    objective never increases. See :mod:`fairaudit.nmf._am`.

    Both stop by eq. (10) (``stopping="eq10"``, ``tol=1e-4``): every group's error changed by
    less than ``tol`` of its value in one iteration. The authors' released code does otherwise
    (``stopping="authors"``, named after them): it applies that test to every group's relative
    *loss* and starts Algorithm 3's weights at ``c⁽⁰⁾ = 1/L``; with it our iteration reproduces
    their saved Heart Disease results (``docs/nmf.md``). ``E_ℓ`` comes from Algorithm 1 with ``T = 5``
    runs of standard NMF by multiplicative updates, also stopped by eq. (10) (§6.1;
    ``nmf_solver="mu"``, ``nmf_stopping="eq10"``).

    Our improvements, each a named option (``docs/nmf.md`` gives their measured effects):
    ``mu_weights="gradient"`` (the H-step's weights from the gradient of the unsquared eq. (8),
    ``a_ℓ = c_ℓ / (‖X_ℓ‖ ‖X_ℓ − W_ℓH‖)``, all ``c_ℓ`` starting at 1), ``keep_best=True`` (return
    the iterate with the smallest objective seen), ``stopping="window"`` (compare the objective
    over 100 iterations: eq. (10) stops multiplicative updates on plateaus, well before the
    results the authors saved), ``nmf_solver="cd"`` or ``nmf_stopping="window"`` (a tighter
    ``E_ℓ``) and ``init="nmf"`` (start from the standard NMF of the pooled data).

    Parameters
    ----------
    n_components : int, default=2
        The rank ``r``; at most ``min(rows, features)``.
    solver : {"mu", "am"}, default="mu"
        Algorithm 3 or Algorithm 2.
    init : {"random", "nmf", "custom"}, default="random"
        Starting factors. ``"random"`` (Algorithms 2–3, line 2): uniform random factors (AM uses
        only ``W``). ``"nmf"`` (ours): the standard NMF of the pooled data (eq. (2), solver
        ``nmf_solver``, same seed — exactly :class:`NMF`'s solution). ``"custom"``: ``W`` and
        ``H`` passed to :meth:`fit`.
    mu_weights : {"squared", "gradient"}, default="squared"
        The H-step weights of ``solver="mu"``: Algorithm 3's ``c_ℓ²/‖X_ℓ‖²`` with ``c⁽⁰⁾ = 0``,
        or ours (above).
    stopping : {"eq10", "window", "authors"}, default="eq10"
        Stopping rule (:class:`~fairaudit.nmf._core.StoppingRule`) of the Fairer-NMF iterations:
        eq. (10) as printed, our window rule, or the authors' released code's (eq. (10)'s test on
        the relative losses; with ``solver="mu"`` also ``c⁽⁰⁾ = 1/L``).
    keep_best : bool, default=False
        Return the iterate with the smallest objective instead of the last one (ours; the
        objective of the min–max MU scheme need not fall monotonically).
    n_estimates : int, default=5
        ``T`` of Algorithm 1.
    estimates : array-like of shape (n_groups,), optional
        Precomputed ``E_ℓ`` (absolute errors, in group order) instead of Algorithm 1 — e.g.
        ``NMF(...).fit(X, sensitive_features=g).E_``.
    nmf_solver : {"mu", "cd"}, default="mu"
        Standard-NMF solver for Algorithm 1 and ``init="nmf"`` (see :class:`NMF`).
    nmf_stopping : {"eq10", "window"}, default="eq10"
        Stopping rule of those standard NMFs with ``nmf_solver="mu"``.
    tol : float, default=1e-4
    max_iter : int or None, default=None
        Iteration cap; ``None`` means 5000 for ``"mu"`` (1,000,000 with ``stopping="authors"``,
        :data:`~fairaudit.nmf._core.AUTHORS_MAX_ITER`: their code has no cap) and 200 for ``"am"``.
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
    counts_ : ndarray (n_groups,)
        ``"mu"`` only: the counts ``c`` themselves at the end (Algorithm 3, line 8), which
        ``fit(..., counts=…)`` can start a later fit from.
    n_iter_ : int
    loss_history_ : ndarray
        The objective (largest relative loss) at the start (not for AM from a random start,
        which has no ``H⁽⁰⁾``) and after every iteration.
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
        init: str = "random",
        mu_weights: str = "squared",
        stopping: str = "eq10",
        keep_best: bool = False,
        n_estimates: int = 5,
        estimates=None,
        nmf_solver: str = "mu",
        nmf_stopping: str = "eq10",
        tol: float = 1e-4,
        max_iter: int | None = None,
        random_state=None,
    ):
        self.n_components = n_components
        self.solver = solver
        self.init = init
        self.mu_weights = mu_weights
        self.stopping = stopping
        self.keep_best = keep_best
        self.n_estimates = n_estimates
        self.estimates = estimates
        self.nmf_solver = nmf_solver
        self.nmf_stopping = nmf_stopping
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _nmf_solver(self) -> str:
        return self.nmf_solver

    def _nmf_stopping(self) -> str:
        return self.nmf_stopping

    def _nmf_max_iter(self) -> int:
        return STANDARD_MAX_ITER

    def _max_iter(self) -> int:
        if self.max_iter is not None:
            return self.max_iter
        if self.solver == "mu" and self.stopping == "authors":
            return AUTHORS_MAX_ITER
        return DEFAULT_MAX_ITER.get(self.solver, 1)

    def _stopping_rules(self) -> tuple[str, ...]:
        return FAIR_STOPPING_RULES

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, sensitive_features=None, W=None, H=None, counts=None):
        """Fit on ``X`` with one group value per row; ``W``, ``H`` for ``init="custom"``.

        ``counts`` (``solver="mu"`` with ``init="custom"``): Algorithm 3's ``c`` to start from
        instead of line 3's ``c⁽⁰⁾`` — with ``W`` and ``H`` an earlier fit's whole state
        (``counts_``), so that a fit of resampled rows (a bootstrap replicate) continues that
        fit rather than starting its min–max weighting afresh."""
        if counts is not None and (self.solver != "mu" or self.init != "custom"):
            raise FairAuditError("counts start Algorithm 3 (solver='mu') from an earlier fit's state, with init='custom'.")
        with blas_threads():
            return self._fit(X, sensitive_features, W, H, counts)

    def _check_options(self, W, H) -> None:
        if self.solver not in FAIR_SOLVERS:
            raise FairAuditError(f"solver must be 'mu' (Algorithm 3) or 'am' (Algorithm 2); got {self.solver!r}.")
        if self.init not in INITS:
            raise FairAuditError(f"init must be one of {', '.join(INITS)}; got {self.init!r}.")
        if self.mu_weights not in MU_WEIGHTS:
            raise FairAuditError(
                f"mu_weights must be 'squared' (Algorithm 3, eq. (9)) or 'gradient' (ours); got {self.mu_weights!r}."
            )
        if not isinstance(self.keep_best, bool | np.bool_):
            raise FairAuditError(f"keep_best must be True or False; got {self.keep_best!r}.")
        if self.init != "custom" and (W is not None or H is not None):
            raise FairAuditError("W and H are starting factors for init='custom'; set init='custom' or drop them.")

    def _fit(self, X, sensitive_features, W, H, counts=None):
        self._check_options(W, H)
        X = self._validate_input(X, min_samples=2)  # two groups need two rows
        r = self._check_common(X)
        data = GroupedData.build(X, sensitive_features)
        E, self.estimate_seconds_ = self._estimates(data, r)
        W0, H0 = self._initial_factors(X, r, W, H)
        W_sorted = np.ascontiguousarray(W0[data.order])
        rule = StoppingRule(
            self.tol,
            self._max_iter(),
            rule=self.stopping,
            every=CHECK_EVERY if self.solver == "mu" else 1,
            what=f"Fairer-NMF ({'multiplicative updates' if self.solver == 'mu' else 'alternating minimisation'})",
        )
        start = time.perf_counter()
        if self.solver == "mu":
            fit = _fit_mu(data, E, W_sorted, H0, weights=self.mu_weights, rule=rule, keep_best=self.keep_best,
                          uniform_start=self.stopping == "authors", counts=counts)
        else:
            fit = _fit_am(data, E, W_sorted, H0, rule=rule, has_H=self.init != "random", keep_best=self.keep_best)
        self.fit_seconds_ = time.perf_counter() - start
        self.h_solvers_ = fit.h_solvers
        self._set_factors(X, fit.W[data.inverse], fit.H)
        self.n_iter_ = fit.n_iter
        self.loss_history_ = np.asarray(fit.history)
        self.converged_ = fit.converged
        self.weights_ = fit.weights
        if fit.counts is not None:
            self.counts_ = fit.counts
        self._set_group_attributes(data, fit.W, fit.H, E)
        return self

    def fit_transform(self, X, y=None, *, sensitive_features=None, W=None, H=None):
        return self.fit(X, sensitive_features=sensitive_features, W=W, H=H).W_

    def _initial_factors(self, X: np.ndarray, r: int, W, H) -> tuple[np.ndarray, np.ndarray]:
        if self.init == "custom":
            return check_custom_factors(W, H, *X.shape, r)
        W0, H0 = random_factors(X, r, self._rng())
        if self.init == "random":
            return W0, H0
        fit = solve_standard(
            X, W0, H0, solver=self.nmf_solver, tol=self.tol, max_iter=self._nmf_max_iter(), stopping=self.nmf_stopping,
            what="the starting NMF (init='nmf')",
        )
        return fit.W, fit.H


class _Fit:
    """An iteration's state: the current iterate, its history, and the best iterate seen."""

    def __init__(self, W: np.ndarray, H: np.ndarray, weights: np.ndarray, keep_best: bool):
        self.W, self.H, self.weights = W, H, weights
        self.keep_best = keep_best
        self.history: list[float] = []
        self.n_iter = 0
        self.converged = False
        self.h_solvers: dict[str, int] = {}
        self.counts: np.ndarray | None = None
        self._best: tuple | None = None

    def record(self, objective: float) -> None:
        self.history.append(objective)
        if self.keep_best and (self._best is None or objective < self._best[0]):
            self._best = (objective, self.W.copy(), self.H.copy(), np.array(self.weights, copy=True))

    def finish(self, iteration: int, rule: StoppingRule) -> None:
        """Close the run; with ``keep_best`` (ours) go back to the iterate with the smallest objective."""
        self.n_iter = iteration
        self.converged = rule.converged
        if self._best is not None:
            _, self.W, self.H, self.weights = self._best


# ============================================================================ Algorithm 3
def _fit_mu(
    data: GroupedData, E: np.ndarray, W: np.ndarray, H: np.ndarray, *, weights: str, rule: StoppingRule, keep_best: bool,
    uniform_start: bool = False,
    counts: np.ndarray | None = None,
) -> _Fit:
    """Algorithm 3. ``uniform_start``: ``c⁽⁰⁾ = 1/L`` for every group (the authors' released
    code) instead of line 3's 0 (or 1 for our ``"gradient"`` weights)."""
    X, slices, norms, squared = data.X, data.slices, data.norms, data.squared_norms
    # Line 3: c⁽⁰⁾ = 0. Ours ("gradient"): every c_ℓ starts at 1. The authors' code: 1/L. An earlier
    # fit's counts continue it.
    if counts is not None:
        c = np.array(counts, dtype=float, copy=True)
    elif uniform_start:
        c = np.full(data.n_groups, 1.0 / data.n_groups)
    else:
        c = np.zeros(data.n_groups) if weights == "squared" else np.ones(data.n_groups)
    fit = _Fit(W.copy(), H.copy(), c, keep_best)
    W, H = fit.W, fit.H
    HHt = H @ H.T  # afterwards the W step's own HHᵀ (H does not change after it)
    work = np.empty((2, *W.shape))
    positive_W, positive_H = np.empty(W.shape, dtype=bool), np.empty(H.shape, dtype=bool)
    iteration = 0
    with np.errstate(**QUIET_DIVISION):
        while True:
            # Products of the current iterate: they give its group errors and the next H step.
            WtX = [W[s].T @ X[s] for s in slices]
            WtW = [W[s].T @ W[s] for s in slices]
            errors = _mu_group_errors(data, W, H, WtX, WtW, HHt)
            losses = (errors - E) / norms
            objective = float(losses.max())
            if keep_best:
                fit.weights = _shares(c)
            fit.record(objective)
            if iteration == 0:
                rule.start(errors, losses)
            elif rule.done(iteration, errors=errors, objective=objective, losses=losses,
                           scale=lambda errors=errors: float(np.max(errors / norms))):
                break
            iteration += 1
            c[int(np.argmax(losses))] += 1.0  # lines 7–8: ℓ* of the previous iterate, c ← c + e_ℓ*
            mu_update_H(H, WtX, WtW, h_step_weights(weights, c, squared, errors), positive_H)  # lines 9–10
            _, HHt = mu_update_W(X, W, H, work, positive=positive_W)  # line 11
    fit.weights = _shares(c)
    fit.counts = c
    rule.warn_if_capped(iteration, objective)
    fit.finish(iteration, rule)
    return fit


def _shares(c: np.ndarray) -> np.ndarray:
    """``c / Σc`` (the groups' shares of the H-steps so far; ``c`` itself while it is all 0)."""
    return c / c.sum() if c.sum() > 0 else c.copy()


def h_step_weights(weights: str, c: np.ndarray, squared_norms: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """The groups' weights ``a_ℓ`` in the H-step ``min_H Σ_ℓ a_ℓ ‖X_ℓ − W_ℓH‖²``.

    ``"squared"`` — Algorithm 3, lines 9–10: ``X̃``, ``W̃`` stack ``c_ℓ X_ℓ/‖X_ℓ‖`` and
    ``c_ℓ W_ℓ/‖X_ℓ‖``, so ``‖X̃ − W̃H‖² = Σ_ℓ c_ℓ² ‖X_ℓ − W_ℓH‖² / ‖X_ℓ‖²`` (eq. (9)): ``a_ℓ =
    c_ℓ²/‖X_ℓ‖²``. ``"gradient"`` (ours) — ``a_ℓ = c_ℓ / (‖X_ℓ‖ ‖X_ℓ − W_ℓH‖)``: then
    ``Σ_ℓ a_ℓ W_ℓᵀ(W_ℓH − X_ℓ)`` is the gradient of eq. (8)'s ``Σ_ℓ c_ℓ ‖X_ℓ − W_ℓH‖ / ‖X_ℓ‖``
    at the current ``H``, so the multiplicative step descends eq. (8) itself.
    """
    if weights == "squared":
        return c**2 / squared_norms
    norms = np.sqrt(squared_norms)
    return c / (norms * np.maximum(errors, 1e-12 * norms))


def mu_update_H(H: np.ndarray, WtX: list[np.ndarray], WtW: list[np.ndarray], a: np.ndarray, positive: np.ndarray | None = None) -> None:
    """``H ← H ⊙ (Σ_ℓ a_ℓ W_ℓᵀX_ℓ) / (Σ_ℓ a_ℓ W_ℓᵀW_ℓ H)`` in place: the Lee–Seung step for
    ``min_H Σ_ℓ a_ℓ ‖X_ℓ − W_ℓH‖²`` (Algorithm 3, line 10, with ``W̃ᵀX̃ = Σ a_ℓ W_ℓᵀX_ℓ`` and
    ``W̃ᵀW̃ = Σ a_ℓ W_ℓᵀW_ℓ``); ``positive``: the step's mask buffer (:func:`multiplicative_step`)."""
    numerator, gram = a[0] * WtX[0], a[0] * WtW[0]
    for w, p, g in zip(a[1:], WtX[1:], WtW[1:], strict=True):
        numerator += w * p
        gram += w * g
    multiplicative_step(H, numerator, gram @ H, positive)


def _mu_group_errors(data: GroupedData, W, H, WtX, WtW, HHt) -> np.ndarray:
    """``‖X_ℓ − W_ℓH‖_F`` from ``‖X_ℓ‖² − 2⟨H, W_ℓᵀX_ℓ⟩ + ⟨W_ℓᵀW_ℓ, HHᵀ⟩``; near-exact groups directly."""
    squared = np.array(
        [sq - 2.0 * np.vdot(H, a) + np.vdot(b, HHt) for sq, a, b in zip(data.squared_norms, WtX, WtW, strict=True)]
    )
    errors = np.sqrt(np.maximum(squared, 0.0))
    near = squared <= NEAR_EXACT * data.squared_norms
    if near.any():
        for g in np.flatnonzero(near):
            s = data.slices[g]
            errors[g] = np.linalg.norm(data.X[s] - W[s] @ H)
    return errors


# ============================================================================ Algorithm 2
def _fit_am(
    data: GroupedData, E: np.ndarray, W: np.ndarray, H: np.ndarray, *, rule: StoppingRule, has_H: bool, keep_best: bool
) -> _Fit:
    """Algorithm 2. ``has_H=False``: the start is ``W⁽⁰⁾`` alone (line 2), so eq. (10) first
    compares iterations 1 and 2."""
    X, slices, norms = data.X, data.slices, data.norms
    step = HStep(data.groups(), E, norms, H.shape[0])
    fit = _Fit(W, H, np.full(data.n_groups, np.nan), keep_best)
    objective = np.nan
    if has_H:
        errors = group_errors(data, W, H)
        objective = float(np.max((errors - E) / norms))
        fit.record(objective)
        rule.start(errors, (errors - E) / norms)
    iteration = 0
    while True:
        iteration += 1
        H_new, solver, status = step.solve([fit.W[s] for s in slices])  # line 6: the §5.2 SOCP
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
        fit.h_solvers[solver] = fit.h_solvers.get(solver, 0) + 1
        duals = step.duals
        fit.H = H_new
        fit.W = nnls_rows(X, fit.H, start=fit.W)  # line 7: NNLS per row (the previous W starts the pivoting)
        if duals.sum() > 0:
            fit.weights = duals / duals.sum()
        errors = group_errors(data, fit.W, fit.H)
        losses = (errors - E) / norms
        objective = float(np.max(losses))
        fit.record(objective)
        if rule.done(iteration, errors=errors, objective=objective, losses=losses, scale=float(np.max(errors / norms))):
            break
    if iteration >= rule.max_iter:
        rule.warn_if_capped(iteration, objective)
    fit.finish(iteration, rule)
    return fit
