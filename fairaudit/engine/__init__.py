"""Engines: how the data reaches the PCA family — group moments and a stratified row sample.

``GroupMoments`` (per-group count, mean and centred scatter, merged exactly chunk by chunk) is the
PCA family's currency: every estimator of the family can be fitted from it
(:meth:`fairaudit.pca.GroupProblem.from_moments`, ``estimator.fit_moments``) and its per-group
error, loss, variance explained and linear MMD² are computed from it. An engine
(:data:`ENGINES`, chosen by ``AuditConfig.engine``) produces the moments and a stratified sample
of rows for the metrics that need rows.
"""

from .local import (
    ENGINES,
    DataSummary,
    LocalEngine,
    RowSample,
    get_engine,
    scaling_transform,
)
from .moments import CHUNK_ROWS, GroupMoments

__all__ = [
    "CHUNK_ROWS",
    "ENGINES",
    "DataSummary",
    "GroupMoments",
    "LocalEngine",
    "RowSample",
    "get_engine",
    "scaling_transform",
]
