"""Vanilla PCA in the family's common form (for side-by-side audits)."""

from __future__ import annotations

import numpy as np

from ..linalg import LowRankMap
from ._base import GroupPCABase
from ._problem import GroupProblem


class PCA(GroupPCABase):
    """Principal component analysis of the pooled, globally centred data.

    The projection onto the top ``n_components`` eigenvectors of the pooled covariance
    ``Σ_i (m_i/m) C_i`` — the same subspace as :class:`sklearn.decomposition.PCA` — exposed
    with the family's per-group attributes so it can be audited next to the fair variants.
    ``sensitive_features`` is used only to report per-group errors and losses.

    Parameters
    ----------
    n_components : int, default=2
        Rank ``d`` of the projection.

    Attributes
    ----------
    See :class:`~fairaudit.pca._base.GroupPCABase`; additionally ``explained_variance_``,
    the eigenvalues of the pooled covariance for the kept directions.

    Examples
    --------
    >>> import numpy as np
    >>> from fairaudit import PCA
    >>> X = np.random.default_rng(0).normal(size=(100, 5))
    >>> groups = np.repeat(["a", "b"], 50)
    >>> PCA(n_components=2).fit(X, sensitive_features=groups).group_losses_.shape
    (2,)
    """

    def _solve(self, problem: GroupProblem, d: int, warm_start) -> LowRankMap:
        values, vectors = problem.top_eigenvectors(problem.pooled, d)
        self.explained_variance_ = np.concatenate([values, np.zeros(d - len(values))])
        return LowRankMap(vectors, np.ones(vectors.shape[1]))
