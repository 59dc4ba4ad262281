"""Fair CP tensor decomposition (Kim & Gittens 2021): KHSIC-BCD, HSIC-BCD, FATR, plain CP."""

from .estimator import METHODS, FairCPD, normalised_embedding
from .metrics import nkhsic, orthogonality, residual_fit
from .sweep import frontier, lambda_grid, lambda_reference

__all__ = [
    "METHODS",
    "FairCPD",
    "frontier",
    "lambda_grid",
    "lambda_reference",
    "nkhsic",
    "normalised_embedding",
    "orthogonality",
    "residual_fit",
]
