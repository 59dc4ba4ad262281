"""The PCA family: vanilla PCA and fair variants with a common, audit-ready interface.

Every class follows scikit-learn's conventions (``fit(X, *, sensitive_features)`` returns
``self``; ``transform``; learned attributes end in ``_``) and exposes ``projection_`` (the
``n × n`` map ``P``), ``components_``, ``group_errors_``, ``group_losses_`` and
``n_components_`` (the effective rank). Each can also be fitted from per-group moments alone
(``fit_moments(GroupMoments)``, see :mod:`fairaudit.engine`) or with row weights
(``fit(..., sample_weight=...)``).
"""

from ._base import GroupPCABase, rank_sweep, rank_sweep_problem
from ._problem import GroupProblem
from .covfair import CovFairPCA
from .equal_means import EqualMeansPCA
from .fair import FairPCA
from .jevd import JEVDPCA
from .leace import LeacePCA
from .vanilla import PCA

__all__ = [
    "JEVDPCA",
    "PCA",
    "CovFairPCA",
    "EqualMeansPCA",
    "FairPCA",
    "GroupPCABase",
    "GroupProblem",
    "LeacePCA",
    "rank_sweep",
    "rank_sweep_problem",
]
