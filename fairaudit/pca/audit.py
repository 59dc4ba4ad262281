"""The PCA family in an audit: every variant over the rank sweep, as tidy records.

Records per (variant, rank): per group ``error`` and ``loss``; whole-data ``max_loss``,
``loss_gap`` (largest minus smallest group loss), ``variance_explained``, ``mmd2``,
``mmd2_rbf``, ``unfairness``, ``unfairness_balanced``, ``effective_rank``, ``seconds``, and
for the dual solvers ``dual_gap``. Definitions: :mod:`fairaudit.metrics`.

How the data reach the fits: the engine (``AuditConfig.engine``, :mod:`fairaudit.engine`) makes
one pass over the rows for the per-group moments, from which every fit and its ``error``,
``loss``, ``variance_explained`` and ``mmd2`` are computed exactly; the metrics that need rows
(``unfairness``, ``unfairness_balanced``, ``mmd2_rbf``) read the representation of a stratified
sample of at most ``leakage_max_rows`` rows (every row when there are fewer; its size is stated
in the audit's notes when it is a sample). Wide data (fewer rows than features) are fitted in
the row space (:class:`~fairaudit.pca.GroupProblem`).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone

from ..audit import AuditConfig, RecordSink, merged_options, representation_metrics
from ..data import AuditData
from ..engine import get_engine
from ..errors import ParameterError
from ..linalg import blas_threads
from ..vocabulary import term
from ._base import GroupPCABase, rank_sweep_problem
from ._problem import BLAS_THREADS, GroupProblem
from .covfair import CovFairPCA
from .fair import FairPCA
from .jevd import JEVDPCA
from .jevd import SOLVERS as JEVD_SOLVERS
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

DEFAULT_OPTIONS = {"jevd_solver": "jacobi"}
"""``AuditConfig.options["pca"]`` keys and defaults.

``jevd_solver``: the audit runs JEVD-PCA with the orthogonal Jacobi scheme, not the paper's
Algorithm 1 (the estimator's default): Algorithm 1 as printed diverges from its first iteration
on every real data set we tried (LSAC, credit), leaving the starting basis — the original
features — as its answer (``docs/architecture.md``, "JEVD-PCA", gives the measurements). Each
fit's ``solver`` detail names the scheme that ran."""

JEVD_SOLVER_NOTES = {
    "paper": "paper (Algorithm 1 as printed)",
    "damped": "damped (Algorithm 1's update with a backtracking step; our deviation)",
    "jacobi": "jacobi (orthogonal Jacobi sweeps; our deviation — the paper's Algorithm 1 diverges on real data)",
}


def pca_options(config: AuditConfig) -> dict:
    """``config.options["pca"]`` with defaults filled in, checked."""
    options = merged_options(config, "pca", DEFAULT_OPTIONS, "PCA")
    if options["jevd_solver"] not in JEVD_SOLVERS:
        raise ParameterError(
            f"unknown JEVD-PCA scheme {options['jevd_solver']!r}; choose {term('jevd_solver', 'jacobi')}, "
            f"{term('jevd_solver', 'paper')} or {term('jevd_solver', 'damped')}."
        )
    return options


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


def _estimator(name: str, options: dict) -> GroupPCABase:
    if name == "jevd":
        return clone(VARIANTS[name]).set_params(solver=options["jevd_solver"])
    return VARIANTS[name]


def audit_pca(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Fit the PCA family on the data (scaled as the data say) and write records to ``sink``."""
    options = pca_options(config)
    ranks = config.resolved_ranks(data.n_features)
    summary = get_engine(config.engine).summarise(data, sample_rows=config.leakage_max_rows, random_state=config.random_state)
    if summary.rows is None:
        problem = GroupProblem.from_moments(summary.moments)
    else:  # wide data: the rows themselves, fitted in their row space
        problem = GroupProblem.from_data(summary.rows, summary.row_groups)
    sample = summary.sample
    centred_sample = sample.X - problem.mean
    if not sample.is_complete:
        sink.warn(
            f"pca: unfairness, unfairness_balanced and mmd2_rbf were computed on {sample.describe(data.groups.labels)}; "
            "error, loss, variance_explained and mmd2 use every row (group moments)."
        )
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
        template = _estimator(name, options)
        unconverged: list[tuple[int, float]] = []
        with sink.collect_warnings(name) as caps:
            for rank, fitted, seconds in rank_sweep_problem(template, problem, ranks):
                _record_fit(sink, name, rank, fitted, seconds, problem, centred_sample, sample.codes, config)
                sink.keep(name, rank, fitted)
                if name == "jevd":
                    sink.detail(name, rank, "solver", JEVD_SOLVER_NOTES[fitted.solver])
                if not getattr(fitted, "converged_", True) and getattr(fitted, "dual_gap_", None) is not None:
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
        elif name not in ("fair_eig", "fair_mw"):  # no certified gap: pass the solver's own words on
            sink.capture_warnings(name, caps)


def _record_fit(sink, name, rank, fitted, seconds, problem, centred_sample, sample_codes, config) -> None:
    sink.add_groups(name, rank, "error", fitted.groups_, fitted.group_errors_)
    sink.add_groups(name, rank, "loss", fitted.groups_, fitted.group_losses_)
    sink.add(name, rank, "max_loss", float(np.max(fitted.group_losses_)))
    sink.add(name, rank, "loss_gap", float(np.ptp(fitted.group_losses_)))
    projection = fitted.map_
    in_problem = problem.reduce(projection)
    sink.add(name, rank, "variance_explained", problem.variance_explained(in_problem))
    with blas_threads(BLAS_THREADS):  # thin products and small factorisations (QDA's SVDs)
        row_metrics = representation_metrics(projection.coordinates(centred_sample), sample_codes, config)
    row_metrics["mmd2"] = problem.mean_discrepancy(in_problem)  # exact, from every row's moments
    sink.add_all(name, rank, row_metrics)
    sink.add(name, rank, "effective_rank", fitted.n_components_)
    sink.add(name, rank, "seconds", seconds)
    gap = getattr(fitted, "dual_gap_", None)
    if gap is not None and np.isfinite(gap):
        sink.add(name, rank, "dual_gap", gap)
