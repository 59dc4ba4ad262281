"""What every selector of the family shares: the fitted mask and scikit-learn's tags."""

from __future__ import annotations

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
