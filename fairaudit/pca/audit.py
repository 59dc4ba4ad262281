"""The PCA family in an audit: every variant over the rank sweep, as tidy records.

Records per (variant, rank): per group ``error`` and ``loss``; whole-data ``max_loss``,
``loss_gap`` (largest minus smallest group loss), ``variance_explained``, ``mmd2``,
``mmd2_rbf``, ``unfairness``, ``unfairness_balanced``, ``effective_rank``, ``seconds``, and
for the dual solvers ``dual_gap``. Definitions: :mod:`fairaudit.metrics`.
"""

from __future__ import annotations

import numpy as np

from .. import metrics
from ..audit import AuditConfig, RecordSink, representation_metrics
from ..data import AuditData
from ..vocabulary import term
from ._base import GroupPCABase, rank_sweep_problem
from ._problem import GroupProblem
from .covfair import CovFairPCA
from .fair import FairPCA
from .jevd import JEVDPCA
from .vanilla import PCA

VARIANTS: dict[str, GroupPCABase] = {
    "vanilla": PCA(),
    "fair_eig": FairPCA(solver="eig"),
    "fair_sdp": FairPCA(solver="sdp"),
    "fair_mw": FairPCA(solver="mw"),
    "jevd": JEVDPCA(),
    "cov_fair": CovFairPCA(),
}
"""Variant name → unfitted estimator (display titles: ``fairaudit.plots.VARIANT_TITLES``)."""


def _too_slow(name: str, n_features: int, config: AuditConfig) -> str | None:
    if name == "fair_sdp" and n_features > config.sdp_max_features:
        return (
            f"skipped: the SDP's matrix variable is {n_features}×{n_features}, so it would take minutes "
            f"(limit {term('sdp_max_features', config.sdp_max_features)}); fair_eig solves the same problem exactly."
        )
    if name == "fair_mw" and n_features > config.mw_max_features:
        return (
            f"skipped: multiplicative weights needs hundreds of eigen-decompositions of a "
            f"{n_features}×{n_features} matrix per rank (limit {term('mw_max_features', config.mw_max_features)})."
        )
    return None


def audit_pca(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Fit the PCA family on ``data.X`` (scaled as the data says) and write records to ``sink``."""
    X = data.X
    ranks = config.resolved_ranks(data.n_features)
    problem = GroupProblem.from_data(X, data.groups)
    centred = X - problem.mean
    codes = data.groups.codes
    labels = data.groups.labels
    chosen = []
    for name in VARIANTS:
        if not config.wants("pca", name):
            continue
        reason = _too_slow(name, data.n_features, config)
        if reason and config.variants == "all":
            sink.skip(name, reason)
            continue
        chosen.append(name)
    sink.expect(len(chosen) * len(ranks))
    for name in chosen:
        template = VARIANTS[name]
        unconverged: list[tuple[int, float]] = []
        with sink.collect_warnings(name):  # iteration caps: summarised below from converged_
            for rank, fitted, seconds in rank_sweep_problem(template, problem, ranks):
                _record_fit(sink, name, rank, fitted, seconds, centred, codes, labels, config)
                if not getattr(fitted, "converged_", True):
                    unconverged.append((rank, fitted.dual_gap_ / max(float(np.max(fitted.group_losses_)), 1e-300)))
                sink.progress(name, rank, seconds)
        if unconverged:
            ranks_text = ", ".join(str(r) for r, _ in unconverged)
            worst = max(gap for _, gap in unconverged)
            sink.warn(
                f"pca/{name}: stopped at its iteration cap before reaching its tolerance at rank(s) "
                f"{ranks_text}; its worst-group loss is within {100 * worst:.2g} % of the optimum "
                "(certified gap; the dual_gap metric gives each rank's)."
            )


def _record_fit(sink, name, rank, fitted, seconds, centred, codes, labels, config) -> None:
    sink.add_groups(name, rank, "error", labels, fitted.group_errors_)
    sink.add_groups(name, rank, "loss", labels, fitted.group_losses_)
    sink.add(name, rank, "max_loss", float(np.max(fitted.group_losses_)))
    sink.add(name, rank, "loss_gap", float(np.ptp(fitted.group_losses_)))
    projection = fitted.map_
    sink.add(name, rank, "variance_explained", metrics.variance_explained(centred, projection))
    sink.add_all(name, rank, representation_metrics(projection.coordinates(centred), codes, config))
    sink.add(name, rank, "effective_rank", fitted.n_components_)
    sink.add(name, rank, "seconds", seconds)
    gap = getattr(fitted, "dual_gap_", None)
    if gap is not None and np.isfinite(gap):
        sink.add(name, rank, "dual_gap", gap)

