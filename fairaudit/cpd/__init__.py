"""Fair CP tensor decomposition (Kim & Gittens 2021): KHSIC-BCD, HSIC-BCD, FATR, plain CP."""

from .estimator import METHODS, FairCPD

__all__ = ["METHODS", "FairCPD"]
