"""What every selector of the family shares: the fitted mask and scikit-learn's tags; and
:class:`SweepSelection`, the selection one size of a sweep kept."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.validation import check_is_fitted


class FittedSelector(SelectorMixin, BaseEstimator):
    """A ``SelectorMixin`` whose ``fit`` sets ``support_`` (boolean mask of kept features).

    ``get_support``, ``transform``, ``inverse_transform`` and ``get_feature_names_out`` follow from
    it. Unsupervised: ``y`` is never required.
    """

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        return self.support_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags


class SweepSelection(FittedSelector):
    """The columns one size of a selection sweep kept, in selection order: what the audit measured
    at that size. One fit may serve every size of a sweep (``ranking_for``), so the fitted
    selector's own ``support_`` is its largest size's; this is the selection of one size, kept as
    that fit's model (``AuditConfig(keep_models=True)``, :mod:`fairaudit.models`).

    Parameters
    ----------
    selector : FittedSelector
        The fitted selector the columns come from (kept for inspection).
    columns : sequence of int
        Indices of the kept columns, most important first.

    Attributes
    ----------
    order_ : ndarray of int
        ``columns`` as an array.
    support_ : ndarray of bool
        Mask of the kept columns.
    n_features_in_ : int
    """

    def __init__(self, selector=None, columns=()):
        self.selector = selector
        self.columns = columns

    def fit(self, X=None, y=None, **fit_params):
        """Set the attributes from ``selector`` and ``columns`` (``X`` is not needed: the
        selection is already made)."""
        n_features = len(self.selector.support_)
        self.order_ = np.asarray(self.columns, dtype=np.int64)
        self.support_ = np.zeros(n_features, dtype=bool)
        self.support_[self.order_] = True
        self.n_features_in_ = n_features
        return self
