"""The NMF family: standard NMF and Fairer-NMF with a common, audit-ready interface.

Kassab, George, Needell et al., "Towards a Fairer Non-negative Matrix Factorization"
(arXiv:2411.09847). Every class follows scikit-learn's conventions (``fit(X, *,
sensitive_features)`` returns ``self``; ``transform``; learned attributes end in ``_``) and
exposes ``W_``, ``components_`` (``H``), ``E_`` (each group's own NMF error, Algorithm 1),
``group_errors_`` (relative errors) and ``group_losses_`` (relative losses, Def. 4.1).
"""

from ._core import GroupedData
from ._estimates import clear_estimate_cache, estimate_group_errors
from .fair import FairerNMF
from .vanilla import NMF

__all__ = ["NMF", "FairerNMF", "GroupedData", "clear_estimate_cache", "estimate_group_errors"]
