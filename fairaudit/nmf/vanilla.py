"""Standard NMF with the family's per-group attributes (for side-by-side audits)."""

from __future__ import annotations

import time

from ._base import NMFBase
from ._core import GroupedData, blas_threads
from ._standard import STANDARD_MAX_ITER, solve_standard


class NMF(NMFBase):
    """Standard non-negative matrix factorization ``min_{W≥0, H≥0} ‖X − WH‖²_F``.

    Eq. (2) of Kassab, George, Needell et al., "Towards a Fairer Non-negative Matrix
    Factorization" (arXiv:2411.09847). ``sensitive_features`` is optional and used only to
    report how well each group is reconstructed: its relative error, its own rank-r NMF error
    ``E_ℓ`` (Algorithm 1) and its relative loss (Def. 4.1, Remark 4.2).

    Parameters
    ----------
    n_components : int, default=2
        The rank ``r``; at most ``min(rows, features)``.
    solver : {"mu", "cd"}, default="mu"
        ``"mu"`` (the paper's, §3.2): Lee–Seung multiplicative updates (the objective never
        increases; ``loss_history_`` holds every iterate). ``"cd"`` (ours): scikit-learn's
        coordinate descent, which converges further (``docs/nmf.md``). The same solver computes
        ``E_ℓ``.
    stopping : {"eq10", "window"}, default="eq10"
        Stopping rule of ``"mu"`` (:class:`~fairaudit.nmf._core.StoppingRule`): the paper's eq.
        (10) with the whole matrix as its one group, or ours. ``"cd"`` stops on scikit-learn's
        own criterion with the same ``tol``.
    tol : float, default=1e-4
        Stopping tolerance (10⁻⁴ in eq. (10)).
    max_iter : int, default=20000
        Iteration cap; reaching it emits a ``ConvergenceWarning``. (Coordinate descent needed at
        most ~1,100 iterations on the Heart data at ranks 1–10, but up to ~20,000 near-exact
        fits on the default sample at ranks 7–9.)
    n_estimates : int, default=5
        ``T`` of Algorithm 1: NMF runs per group averaged into ``E_ℓ``.
    estimates : array-like of shape (n_groups,), optional
        Precomputed ``E_ℓ`` (absolute Frobenius errors, in group order) instead of Algorithm 1.
    random_state : int, Generator or None
        Seeds the starting factors and Algorithm 1's starts. An int makes the fit reproducible
        and lets ``E_ℓ`` come from the in-memory cache.

    Attributes
    ----------
    W_ : ndarray (n_samples, r)
        The representation of the training rows (in their original order).
    components_ : ndarray (r, n_features)
        ``H``, the dictionary ("topics").
    n_components_ : int
    reconstruction_err_ : float
        ``‖X − WH‖_F``.
    n_iter_ : int
    loss_history_ : ndarray
        ``‖X − WH‖_F / ‖X‖_F`` after each iteration (``"mu"``); the final value (``"cd"``).
    converged_ : bool
        Whether the stopping rule was met before ``max_iter``.
    groups_, group_sizes_ : ndarray
        Group labels and row counts (when ``sensitive_features`` is given).
    E_ : ndarray (n_groups,)
        Each group's own rank-r NMF error (Algorithm 1).
    own_rel_errors_ : ndarray
        ``E_ℓ / ‖X_ℓ‖_F``.
    group_errors_ : ndarray
        Relative errors ``‖X_ℓ − W_ℓH‖_F / ‖X_ℓ‖_F``.
    group_losses_ : ndarray
        Relative losses ``(‖X_ℓ − W_ℓH‖_F − E_ℓ) / ‖X_ℓ‖_F`` (Def. 4.1).
    fit_seconds_ : float
        Time of the factorisation itself (without ``E_ℓ``).
    estimate_seconds_ : float
        Time Algorithm 1 took for ``E_`` (when computed; also when it came from the cache).

    Examples
    --------
    >>> import numpy as np
    >>> from fairaudit import NMF
    >>> X = np.random.default_rng(0).uniform(size=(60, 8))
    >>> model = NMF(n_components=3, random_state=0).fit(X, sensitive_features=np.repeat(["a", "b"], 30))
    >>> model.W_.shape, model.components_.shape, model.group_losses_.shape
    ((60, 3), (3, 8), (2,))
    """

    def __init__(
        self,
        n_components: int = 2,
        *,
        solver: str = "mu",
        stopping: str = "eq10",
        tol: float = 1e-4,
        max_iter: int = STANDARD_MAX_ITER,
        n_estimates: int = 5,
        estimates=None,
        random_state=None,
    ):
        self.n_components = n_components
        self.solver = solver
        self.stopping = stopping
        self.tol = tol
        self.max_iter = max_iter
        self.n_estimates = n_estimates
        self.estimates = estimates
        self.random_state = random_state

    def _nmf_solver(self) -> str:
        return self.solver

    def fit(self, X, y=None, *, sensitive_features=None, W=None, H=None):
        """Factorise ``X``; ``W``, ``H`` optionally give the starting factors."""
        with blas_threads():
            return self._fit(X, sensitive_features, W, H)

    def _fit(self, X, sensitive_features, W, H):
        X = self._validate_input(X)
        r = self._check_common(X)
        data = None
        if sensitive_features is not None:
            data = GroupedData.build(X, sensitive_features)
            E, self.estimate_seconds_ = self._estimates(data, r)
        rng = self._rng()
        W0, H0 = self._start(X, r, W, H, rng)
        start = time.perf_counter()
        fit = solve_standard(
            X, W0, H0, solver=self.solver, tol=self.tol, max_iter=self.max_iter, stopping=self.stopping
        )
        self.fit_seconds_ = time.perf_counter() - start
        self._set_factors(X, fit.W, fit.H)
        self.n_iter_ = fit.n_iter
        self.loss_history_ = fit.history
        self.converged_ = fit.converged
        if data is not None:
            self._set_group_attributes(data, fit.W[data.order], fit.H, E)
        return self

    def fit_transform(self, X, y=None, *, sensitive_features=None, W=None, H=None):
        return self.fit(X, sensitive_features=sensitive_features, W=W, H=H).W_
