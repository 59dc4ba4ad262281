"""Feature selection: FUFS (fairness-aware, Xing et al. 2021) and unsupervised baselines.

``FUFS`` selects features whose kernel keeps the structure of all features while being least
aligned with the protected attribute — as printed (eq. 6, the default) or in our normalised-
alignment formulation; ``VarianceSelector``, ``LaplacianScore`` (He et al. 2005), ``MCFS`` (Cai
et al. 2010), ``SPEC`` (Zhao & Liu 2007), ``UDFS`` (Yang et al. 2011) and ``NDFS`` (Li et al.
2012) are the fairness-unaware baselines. All are scikit-learn ``SelectorMixin`` estimators;
``docs/fs.md`` says what is each paper's and what is ours.
"""

from .baselines import MCFS, NDFS, SPEC, UDFS, LaplacianScore, VarianceSelector
from .evaluation import cluster_scores
from .fufs import FUFS

__all__ = ["FUFS", "MCFS", "NDFS", "SPEC", "UDFS", "LaplacianScore", "VarianceSelector", "cluster_scores"]
