"""Feature selection: FUFS (fairness-aware, Xing et al. 2021) and unsupervised baselines.

``FUFS`` selects features whose kernel keeps the structure of all features while being least
aligned with the protected attribute; ``VarianceSelector``, ``LaplacianScore`` (He et al.
2005), ``MCFS`` (Cai et al. 2010) and ``SPEC`` (Zhao & Liu 2007) are the fairness-unaware
baselines. All are scikit-learn ``SelectorMixin`` estimators.
"""

from .baselines import MCFS, NDFS, SPEC, UDFS, LaplacianScore, VarianceSelector
from .evaluation import cluster_scores
from .fufs import FUFS

__all__ = ["FUFS", "MCFS", "NDFS", "SPEC", "UDFS", "LaplacianScore", "VarianceSelector", "cluster_scores"]
