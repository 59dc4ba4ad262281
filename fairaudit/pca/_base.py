"""What every estimator of the PCA family shares: validation, attributes, transform, sweeps."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from ..engine import GroupMoments
from ..errors import ParameterError
from ..groups import GroupCodes, check_groups, encode_groups
from ..linalg import LowRankMap, blas_threads
from ..validation import check_rank
from ._problem import BLAS_THREADS, GroupProblem


class GroupPCABase(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base class: a linear map ``P = U diag(w) Uᵀ`` learned from centred data and groups.

    Subclasses implement ``_solve(problem, d) -> LowRankMap``. After ``fit``:

    Attributes
    ----------
    mean_ : ndarray (n_features,)
        The global mean subtracted before fitting (rows are centred by it).
    components_ : ndarray (n_components_, n_features)
        Orthonormal directions ``Uᵀ``.
    component_weights_ : ndarray (n_components_,)
        ``w``: 1 for a projection; Samadi's ``λ* = 1 − sqrt(1 − λ̄)`` for an affine projection.
    n_components_ : int
        Effective rank (number of directions with a non-zero weight); can exceed
        ``n_components`` by up to ``k − 1`` for Fair PCA (Samadi et al. 2018, Thm. 5.2).
    groups_ : ndarray of str
        Group labels; the per-group arrays below follow this order.
    group_sizes_ : ndarray
        Rows per group (integers; the sums of the weights after a weighted fit).
    group_errors_ : ndarray
        ``‖A_i − A_i P‖²_F / m_i`` on the training data.
    group_losses_ : ndarray
        ``group_errors_`` minus each group's own best rank-``n_components`` error
        (Samadi et al. 2018, Def. 4.3–4.4).
    """

    def __init__(self, n_components: int = 2):
        self.n_components = n_components

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, sensitive_features=None, sample_weight=None):
        """Learn the map from ``X`` (rows = samples) and one group value per row.

        ``sensitive_features`` is required (the default ``None`` is refused with a message that
        says how to route it through a scikit-learn ``Pipeline``: ``docs/pipelines.md``).
        ``sample_weight`` (optional, non-negative) weights each row, e.g. the multinomial counts
        of a bootstrap resample.
        """
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        groups = encode_groups(sensitive_features, n_rows=X.shape[0])
        check_groups(groups, min_size=1)
        check_rank(self.n_components, X.shape[1])
        return self._fit_problem(GroupProblem.from_data(X, groups, weights=sample_weight))

    def fit_moments(self, moments: GroupMoments):
        """Learn the map from per-group moments alone (:class:`fairaudit.engine.GroupMoments`:
        count, mean and scatter of each group's rows, e.g. computed chunk by chunk or on a
        cluster). The result equals ``fit`` on the rows the moments summarise."""
        present = (moments.counts > 0).astype(int)  # one stand-in row per non-empty group
        check_groups(GroupCodes(np.repeat(np.arange(moments.n_groups), present), moments.labels), min_size=1)
        check_rank(self.n_components, moments.n_features)
        self._fit_problem(GroupProblem.from_moments(moments))
        self.n_features_in_ = moments.n_features
        return self

    def _fit_problem(self, problem: GroupProblem, warm_start=None):
        d = check_rank(self.n_components, problem.n_features)
        with blas_threads(BLAS_THREADS):
            solved = self._solve(problem, min(d, problem.dim), warm_start)  # in problem coordinates
        projection = problem.lift(solved, d)
        self.mean_ = problem.mean
        self.groups_ = np.asarray(problem.labels, dtype=object)
        self.group_sizes_ = problem.sizes.astype(int) if np.all(problem.sizes == np.round(problem.sizes)) else problem.sizes
        self.components_ = projection.basis.T.copy()
        self.component_weights_ = projection.weights.copy()
        self.n_components_ = projection.rank
        self.group_errors_ = problem.errors(solved)
        self.group_losses_ = self.group_errors_ - problem.best_errors(d)
        return self

    def _solve(self, problem: GroupProblem, d: int, warm_start) -> LowRankMap:  # pragma: no cover
        raise NotImplementedError

    def _warm_state(self):
        """What the next rank of a sweep can start from (solver-specific)."""
        return

    def _prepare_ranks(self, problem: GroupProblem, ranks: Iterable[int]) -> None:
        """Before a sweep fits ``ranks`` on ``problem``: what a solver does for all of them at once,
        kept in the problem's cache for their fits (covFairPCA searches every rank together)."""

    # ------------------------------------------------------------------ using the map
    @property
    def projection_(self) -> np.ndarray:
        """The ``n × n`` map ``P`` with reconstruction ``(X − mean_) P + mean_``."""
        return self.map_.dense()

    @property
    def map_(self) -> LowRankMap:
        check_is_fitted(self, "components_")
        return LowRankMap(self.components_.T, self.component_weights_)

    def transform(self, X):
        """Coordinates ``(X − mean_) U diag(w)`` of the representation."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return (X - self.mean_) @ self._representation()

    def _representation(self) -> np.ndarray:
        """The ``n_features × outputs`` matrix ``T`` of the representation ``(x − mean_) T``:
        ``U diag(w)`` (a map followed by an erasure overrides it, :class:`~fairaudit.pca.LeacePCA`)."""
        return self.components_.T * self.component_weights_

    @property
    def _n_features_out(self) -> int:
        """Columns of :meth:`transform` (``get_feature_names_out`` names them ``<class>0 …``)."""
        return self._representation().shape[1]

    def inverse_transform(self, Z):
        """Back to feature space: ``Z Uᵀ + mean_`` (so ``inverse_transform(transform(X)) = (X − mean_) P + mean_``)."""
        check_is_fitted(self, "components_")
        return np.asarray(Z, dtype=float) @ self.components_ + self.mean_

    @property
    def objective_(self) -> float:
        """The largest group loss: the quantity Fair PCA minimises (Samadi et al. eq. 10)."""
        check_is_fitted(self, "group_losses_")
        return float(np.max(self.group_losses_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def solver_settings(estimator, solvers, default_tol: dict, default_max_iter: dict) -> tuple:
    """``(tol, max_iter)`` for an estimator with a ``solver`` choice (:class:`FairPCA`,
    :class:`JEVDPCA`): its own ``tol`` and ``max_iter`` where set, else its solver's defaults; an
    unknown solver is refused, naming the choices."""
    if estimator.solver not in solvers:
        raise ParameterError(f"solver must be one of {', '.join(solvers)}; got {estimator.solver!r}.")
    tol = estimator.tol if estimator.tol is not None else default_tol[estimator.solver]
    max_iter = estimator.max_iter if estimator.max_iter is not None else default_max_iter[estimator.solver]
    return tol, max_iter


def rank_sweep(
    estimator: GroupPCABase, X, sensitive_features, ranks: Iterable[int]
) -> Iterator[tuple[int, GroupPCABase, float]]:
    """Fit ``estimator`` at every rank, sharing the group spectra and warm starts.

    Yields ``(rank, fitted clone, seconds)``; the seconds exclude the one-off cost of the group
    covariances and spectra, which :func:`fairaudit.pca.GroupProblem.from_data` pays once.
    """
    X = np.asarray(X, dtype=float)
    groups = encode_groups(sensitive_features, n_rows=X.shape[0])
    check_groups(groups, min_size=1)
    problem = GroupProblem.from_data(X, groups)
    yield from rank_sweep_problem(estimator, problem, ranks)


def rank_sweep_problem(
    estimator: GroupPCABase, problem: GroupProblem, ranks: Iterable[int]
) -> Iterator[tuple[int, GroupPCABase, float]]:
    """:func:`rank_sweep` on an already built :class:`GroupProblem`."""
    warm = None
    ranks = [int(rank) for rank in ranks]
    estimator._prepare_ranks(problem, ranks)
    for rank in ranks:
        fitted = clone(estimator).set_params(n_components=int(rank))
        start = time.perf_counter()
        fitted._fit_problem(problem, warm)
        seconds = time.perf_counter() - start
        fitted.n_features_in_ = problem.n_features
        warm = fitted._warm_state()
        yield int(rank), fitted, seconds
