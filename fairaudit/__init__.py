"""fairaudit: an offline fairness audit for unsupervised learning.

Does a PCA, an NMF, a feature selection or a tensor factorization represent every group as
well as the others? ``fairaudit`` runs vanilla and fair versions of each method family side by
side and reports per-group metrics from the papers that define them.

Quick start::

    from fairaudit import load, run_audit, AuditConfig
    data = load("credit.csv", sensitive="SEX")
    result = run_audit(data, AuditConfig(methods=("pca",), ranks=range(1, 11)))
    result.records  # tidy table: method, variant, rank, group, metric, value

The public names below are imported on first use (PEP 562), so that ``import fairaudit`` — and
``python -m fairaudit``, whose command imports what its run needs — does not load every family
and the model export (~60 ms and ~3 MB of the command line's PCA audit; ``import fairaudit.x``
and ``from fairaudit import X`` work as before).
"""

from __future__ import annotations

import importlib

from ._version import __version__

_PUBLIC = {
    "AuditConfig": ".audit",
    "AuditResult": ".audit",
    "run_audit": ".audit",
    "FairCPD": ".cpd",
    "AuditData": ".data",
    "RawTable": ".data",
    "load": ".data",
    "prepare": ".data",
    "prepare_tensor": ".data",
    "read_table": ".data",
    "scale_features": ".data",
    "tensor_from_arrays": ".data",
    "LeaceEraser": ".erasure",
    "FairAuditError": ".errors",
    "FUFS": ".fs",
    "MCFS": ".fs",
    "NDFS": ".fs",
    "SPEC": ".fs",
    "UDFS": ".fs",
    "LaplacianScore": ".fs",
    "VarianceSelector": ".fs",
    "encode_groups": ".groups",
    "PortableModel": ".models",
    "export_models": ".models",
    "load_model": ".models",
    "NMF": ".nmf",
    "FairerNMF": ".nmf",
    "JEVDPCA": ".pca",
    "PCA": ".pca",
    "CovFairPCA": ".pca",
    "EqualMeansPCA": ".pca",
    "LeacePCA": ".pca",
    "FairPCA": ".pca",
}
"""Public name → the module that defines it."""

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'fairaudit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
