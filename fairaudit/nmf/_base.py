"""The estimator machinery both NMF classes share: validation, starting factors, group
attributes, ``transform``."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ..errors import FairAuditError
from ._am import nnls_rows
from ._core import (
    STOPPING_RULES,
    GroupedData,
    check_custom_factors,
    check_estimates,
    check_nmf_rank,
    check_nonnegative,
    check_solver_parameters,
    group_errors,
    random_factors,
)
from ._estimates import estimate_group_errors
from ._standard import SOLVERS


class NMFBase(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Shared parts of :class:`~fairaudit.nmf.NMF` and :class:`~fairaudit.nmf.FairerNMF`.

    Subclasses have the parameters ``n_components``, ``n_estimates``, ``estimates``, ``stopping``,
    ``tol``, ``max_iter``, ``random_state`` and name the standard-NMF solver and stopping rule
    behind ``E_ℓ`` in :meth:`_nmf_solver` and :meth:`_nmf_stopping`.
    """

    def _nmf_solver(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def _n_features_out(self) -> int:
        """Columns of ``W`` (``get_feature_names_out``: ``<class>0 …``, so ``set_output`` works)."""
        return self.components_.shape[0]

    def _nmf_stopping(self) -> str:
        """Stopping rule of the standard NMF runs behind ``E_ℓ``."""
        return self.stopping

    def _nmf_max_iter(self) -> int:
        """Iteration cap of the standard NMF runs behind ``E_ℓ``."""
        return self.max_iter

    # ------------------------------------------------------------------ input
    def _validate_input(self, X, reset: bool = True, min_samples: int = 1) -> np.ndarray:
        X = validate_data(self, X, dtype=np.float64, reset=reset, ensure_min_samples=min_samples)
        check_nonnegative(X)
        return X

    def _check_common(self, X: np.ndarray) -> int:
        if self._nmf_solver() not in SOLVERS:
            name = "nmf_solver" if hasattr(self, "nmf_solver") else "solver"
            raise FairAuditError(f"{name} must be one of {', '.join(SOLVERS)}; got {self._nmf_solver()!r}.")
        for name, rule, allowed in (("stopping", self.stopping, self._stopping_rules()), ("nmf_stopping", self._nmf_stopping(), STOPPING_RULES)):
            if rule not in allowed:
                authors = ", 'authors' (the authors' released code)" if "authors" in allowed else ""
                raise FairAuditError(f"{name} must be 'eq10' (the paper's eq. (10)), 'window' (ours){authors}; got {rule!r}.")
        check_solver_parameters(self.tol, self._max_iter(), self.n_estimates)
        return check_nmf_rank(self.n_components, *X.shape)

    def _max_iter(self) -> int:
        return self.max_iter

    def _stopping_rules(self) -> tuple[str, ...]:
        """The values ``stopping`` may take."""
        return STOPPING_RULES

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng(self.random_state)

    def _start(self, X: np.ndarray, r: int, W, H, rng) -> tuple[np.ndarray, np.ndarray]:
        if W is not None or H is not None:
            return check_custom_factors(W, H, X.shape[0], X.shape[1], r)
        return random_factors(X, r, rng)

    def _estimates(self, data: GroupedData, r: int) -> tuple[np.ndarray, float]:
        """``E_ℓ`` from the ``estimates`` parameter or Algorithm 1 (cached)."""
        if self.estimates is not None:
            return check_estimates(self.estimates, data, r), 0.0
        return estimate_group_errors(
            data,
            r,
            n_estimates=self.n_estimates,
            solver=self._nmf_solver(),
            stopping=self._nmf_stopping(),
            tol=self.tol,
            max_iter=self._nmf_max_iter(),
            random_state=self.random_state,
        )

    # ------------------------------------------------------------------ results
    def _set_factors(self, X: np.ndarray, W: np.ndarray, H: np.ndarray) -> None:
        if not (np.isfinite(W).all() and np.isfinite(H).all()):  # never a NaN number in an audit, silently
            raise FairAuditError(
                f"{type(self).__name__} at rank {H.shape[0]} broke down numerically (its factors hold NaN or infinite "
                "values): a bug in fairaudit, please report it with the data's shape; meanwhile leave this variant out."
            )
        self.W_ = W
        self.components_ = H
        self.n_components_ = H.shape[0]
        self.reconstruction_err_ = float(np.linalg.norm(X - W @ H))

    def _set_group_attributes(self, data: GroupedData, W_sorted: np.ndarray, H: np.ndarray, E: np.ndarray) -> None:
        errors = group_errors(data, W_sorted, H)
        self.groups_ = np.asarray(data.labels, dtype=object)
        self.group_sizes_ = data.sizes.astype(int)
        self.E_ = E
        self.own_rel_errors_ = E / data.norms
        self.group_errors_ = errors / data.norms
        self.group_losses_ = (errors - E) / data.norms

    @classmethod
    def from_dictionary(cls, H: np.ndarray, X: np.ndarray, grouped: GroupedData, E: np.ndarray):
        """A fixed dictionary ``H`` as a fitted estimator on ``X``: ``W`` by non-negative least
        squares (:meth:`transform`), each group's error and relative loss against its own ``E_ℓ``
        (Algorithm 1) — what the audit reads of a fit (an NMF dictionary brought as "yours")."""
        model = cls(n_components=H.shape[0])
        model.components_, model.n_features_in_ = H, X.shape[1]
        W = model.transform(X)
        model._set_factors(X, W, H)
        model._set_group_attributes(grouped, W[grouped.order], H, E)
        model.n_iter_ = 0
        return model

    @property
    def objective_(self) -> float:
        """The largest relative loss ``max_ℓ (‖X_ℓ − W_ℓH‖_F − E_ℓ)/‖X_ℓ‖_F`` (Def. 4.1)."""
        check_is_fitted(self, "group_losses_")
        return float(np.max(self.group_losses_))

    # ------------------------------------------------------------------ using the factors
    def transform(self, X):
        """The representation ``W`` of new rows: ``argmin_{w ≥ 0} ‖x − Hᵀw‖`` per row (NNLS).

        For the training rows this is the best ``W`` for the learned ``H``; it can differ
        slightly from ``W_``, which the fitting algorithm left where it stopped.
        """
        check_is_fitted(self, "components_")
        X = self._validate_input(X, reset=False)
        return nnls_rows(X, self.components_)

    def inverse_transform(self, W):
        """Back to feature space: ``W H``."""
        check_is_fitted(self, "components_")
        return np.asarray(W, dtype=float) @ self.components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.positive_only = True
        return tags
