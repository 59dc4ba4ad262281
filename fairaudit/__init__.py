"""fairaudit: an offline fairness audit for unsupervised learning.

Does a PCA, an NMF, a feature selection or a tensor factorization represent every group as
well as the others? ``fairaudit`` runs vanilla and fair versions of each method family side by
side and reports per-group metrics from the papers that define them.

Quick start::

    from fairaudit import load, run_audit, AuditConfig
    data = load("credit.csv", sensitive="SEX")
    result = run_audit(data, AuditConfig(methods=("pca",), ranks=range(1, 11)))
    result.records  # tidy table: method, variant, rank, group, metric, value
"""

from ._version import __version__
from .audit import AuditConfig, AuditResult, run_audit
from .cpd import FairCPD
from .data import AuditData, RawTable, load, prepare, prepare_tensor, read_table, scale_features, tensor_from_arrays
from .errors import FairAuditError
from .fs import FUFS, MCFS, NDFS, SPEC, UDFS, LaplacianScore, VarianceSelector
from .groups import encode_groups
from .models import PortableModel, export_models, load_model
from .nmf import NMF, FairerNMF
from .pca import JEVDPCA, PCA, CovFairPCA, FairPCA

__all__ = [
    "NMF",
    "FUFS",
    "MCFS",
    "NDFS",
    "PCA",
    "SPEC",
    "UDFS",
    "AuditConfig",
    "AuditData",
    "AuditResult",
    "CovFairPCA",
    "FairCPD",
    "FairAuditError",
    "PortableModel",
    "FairerNMF",
    "FairPCA",
    "JEVDPCA",
    "LaplacianScore",
    "RawTable",
    "__version__",
    "encode_groups",
    "export_models",
    "load",
    "load_model",
    "prepare",
    "prepare_tensor",
    "read_table",
    "run_audit",
    "scale_features",
    "tensor_from_arrays",
    "VarianceSelector",
]
