"""The PCA family in an audit: every variant over the rank sweep, as tidy records.

Records per (variant, rank): per group ``error`` and ``loss``; whole-data ``max_loss``,
``loss_gap``, ``loss_ratio`` and ``error_ratio`` (worst and best group, added by the audit
driver), for vanilla PCA ``loss_gap_pvalue`` (the gap against random groups of the same sizes),
``variance_explained``, ``mmd2``, ``mmd2_rbf``, the leakage test's ``unfairness``,
``unfairness_balanced``, ``balanced_accuracy``, ``chance_balanced_accuracy`` and
``leakage_pvalue``, ``effective_rank``, ``seconds``, and for the dual solvers ``dual_gap``.
Definitions: :mod:`fairaudit.metrics`.

The family's currency is the per-group second moments (:class:`GroupProblem`): a fit needs
only them, and so do the per-group metrics. A bootstrap replicate therefore reweights the rows
(multinomial counts within each group, ``GroupProblem.from_data(weights=…)``), recomputes the
weighted moments — ``O(m n²)``, no copies of the rows — and refits each variant warm-started
from the audit's own fit at the same rank (Fair PCA's dual weights). Held-out rows are measured with the fitted map, centred by the
training mean, against their own group's best rank-``d`` error.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
from sklearn.base import clone

from ..audit import (
    AuditConfig,
    FamilyAudit,
    Fits,
    Recorder,
    RecordSink,
    representation_metrics,
)
from ..data import AuditData
from ..groups import GroupCodes
from ..uncertainty import Disparity
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

NOT_REPLICATED = {
    "fair_sdp": "fair_sdp solves the same problem as fair_eig (the tests hold them to the same optimum) with an "
    "interior-point SDP, 0.03–0.4 s per fit: its intervals are fair_eig's and are not recomputed",
    "fair_mw": "fair_mw solves the same problem as fair_eig by multiplicative weights, 0.3 s per fit at most "
    "ranks: its intervals are fair_eig's and are not recomputed",
}
"""Variants left out of bootstrap replicates (their records keep ``ci_*`` NaN), with the reason."""


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


def _group_means(X: np.ndarray, groups: GroupCodes, weights: np.ndarray) -> np.ndarray:
    """Each group's weighted mean row (for the group-mean MMD² of a replicate)."""
    return np.array([(weights[mask] @ X[mask]) / weights[mask].sum() for mask in groups.masks()])


GAP_PERMUTATIONS = 200
"""Random regroupings behind vanilla PCA's ``loss_gap_pvalue``: enough for a p-value of 0.005
(a 5 % test shared by ten ranks)."""


def _gap_pvalues(X: np.ndarray, groups: GroupCodes, weights: np.ndarray, centre, models: dict, random_state) -> dict[int, float]:
    """Permutation p-values of vanilla PCA's loss gap at every rank: how often groups of the same
    sizes drawn at random from the same rows show a gap (between the same two labels) at least as
    large.

    A small group's loss is measured against that group's own best rank-``d`` fit *on the same
    rows*, which fits noise: on identically distributed rows a 120-row group's loss is several
    times a 480-row group's. Vanilla PCA's map does not depend on the groups, so regrouping only
    needs new group moments (no refit). Rows keep their weights; labels are permuted.
    """
    observed = {}
    for rank, model in models.items():
        losses = model.group_losses_
        observed[rank] = (int(np.argmax(losses)), int(np.argmin(losses)), float(np.ptp(losses)))
    rng = np.random.default_rng(random_state)
    exceed = dict.fromkeys(models, 0)
    present = np.flatnonzero(weights > 0)
    for _ in range(GAP_PERMUTATIONS):
        shuffled = groups.codes.copy()
        shuffled[present] = rng.permutation(groups.codes[present])
        permuted = GroupProblem.from_data(X, GroupCodes(shuffled, groups.labels), weights=weights, mean=centre)
        for rank, model in models.items():
            worst, best, gap = observed[rank]
            losses = permuted.errors(model.map_) - permuted.best_errors(rank)
            exceed[rank] += losses[worst] - losses[best] >= gap - 1e-12 * max(abs(gap), 1.0)
    return {rank: (1 + count) / (1 + GAP_PERMUTATIONS) for rank, count in exceed.items()}


def _variance_explained(problem: GroupProblem, model) -> float:
    """``‖XP‖²_F / ‖X‖²_F`` from the group moments: ``Σ_j w_j² u_jᵀ (Σ_i m_i C_i) u_j / Σ_i m_i tr C_i``."""
    projection = model.map_
    total = float(problem.sizes @ problem.traces)
    captured = problem.sizes @ problem.captured_by(projection.basis) @ (projection.weights**2)
    return float(captured / total) if total > 0 else float("nan")


def _mmd2(means: np.ndarray, model) -> float:
    """``max_{a<b} ‖(μ_a − μ_b)ᵀ U diag(w)‖²``: the group-mean MMD² of the representation."""
    projection = model.map_
    coordinates = (means @ projection.basis) * projection.weights
    return float(max(np.sum((coordinates[a] - coordinates[b]) ** 2) for a, b in combinations(range(len(means)), 2)))


class PCAAudit(FamilyAudit):
    """The PCA family's side of the audit protocol (:class:`fairaudit.audit.FamilyAudit`)."""

    method = "pca"
    disparities = (Disparity("loss", "max_loss", "loss_gap", "loss_ratio", error="error", error_ratio="error_ratio"),)
    replicate_variants_skipped = NOT_REPLICATED

    def __init__(self, data: AuditData, config: AuditConfig, sink: RecordSink):
        super().__init__(data, config, sink)
        self.X = data.X
        self.groups = data.groups
        self.codes = data.groups.codes
        self.labels = tuple(data.groups.labels)
        self.ranks = config.resolved_ranks(data.n_features)
        self.chosen = []
        for name in VARIANTS:
            if not config.wants("pca", name):
                continue
            reason = _too_slow(name, data.n_features, config)
            if reason and config.variants == "all":
                sink.skip(name, reason)
                continue
            self.chosen.append(name)

    @property
    def active(self) -> bool:
        return bool(self.chosen)

    def degenerate_ranks(self) -> dict[int, str]:
        n = self.X.shape[1]
        return {rank: f"rank {rank} keeps all {n} features: every group is reconstructed exactly" for rank in self.ranks if rank >= n}

    # ------------------------------------------------------------------ fitting
    def _problem(self, rows, mean=None) -> tuple[GroupProblem, np.ndarray, np.ndarray]:
        """The group moments of ``rows`` (repeats counted: bootstrap weights), centred at ``mean``."""
        weights = np.bincount(rows, minlength=len(self.codes)).astype(float)
        problem = GroupProblem.from_data(self.X, self.groups, weights=weights, mean=mean)
        return problem, _group_means(self.X, self.groups, weights), weights

    def fit(self, rows, *, warm=None, replicate=False, seed=None) -> Fits:
        problem, means, weights = self._problem(rows)
        fits = Fits(rows=rows, shared={"problem": problem, "means": means, "weights": weights})
        if replicate:
            for name in self.chosen:
                if name in NOT_REPLICATED:
                    continue
                for rank in self.ranks:
                    start = warm.models[(name, rank)]._warm_state() if warm is not None else None
                    model = clone(VARIANTS[name]).set_params(n_components=rank)
                    model._fit_problem(problem, start)
                    model.n_features_in_ = problem.n_features
                    fits.models[(name, rank)] = model
            return fits
        self.sink.expect(len(self.chosen) * len(self.ranks))
        for name in self.chosen:
            unconverged: list[tuple[int, float]] = []
            with self.sink.collect_warnings(name):  # iteration caps: summarised below from converged_
                for rank, fitted, seconds in rank_sweep_problem(VARIANTS[name], problem, self.ranks):
                    fits.models[(name, rank)], fits.seconds[(name, rank)] = fitted, seconds
                    if not getattr(fitted, "converged_", True):
                        unconverged.append((rank, fitted.dual_gap_ / max(float(np.max(fitted.group_losses_)), 1e-300)))
                    self.sink.progress(name, rank, seconds)
            if unconverged:
                ranks_text = ", ".join(str(r) for r, _ in unconverged)
                worst = max(gap for _, gap in unconverged)
                self.sink.warn(
                    f"pca/{name}: stopped at its iteration cap before reaching its tolerance at rank(s) "
                    f"{ranks_text}; its worst-group loss is within {100 * worst:.2g} % of the optimum "
                    "(certified gap; the dual_gap metric gives each rank's)."
                )
        return fits

    # ------------------------------------------------------------------ measuring
    def measure(self, fits: Fits, rows, out: Recorder, *, heldout=False, replicate=False) -> None:
        if heldout:  # centred at the training mean: how the fitted maps centre new rows
            problem, means, _ = self._problem(rows, mean=fits.shared["problem"].mean)
        else:
            problem, means = fits.shared["problem"], fits.shared["means"]
        for (name, rank), model in fits.models.items():
            if heldout:
                errors = problem.errors(model.map_)
                losses = errors - problem.best_errors(rank)
            else:
                errors, losses = model.group_errors_, model.group_losses_
            out.add_groups(name, rank, "error", self.labels, errors)
            out.add_groups(name, rank, "loss", self.labels, losses)
            out.add(name, rank, "variance_explained", _variance_explained(problem, model))
            if replicate:
                out.add(name, rank, "mmd2", _mmd2(means, model))
            else:
                unique = np.unique(rows)
                Z = model.map_.coordinates(self.X[unique] - problem.mean)
                out.add_all(name, rank, representation_metrics(Z, self.codes[unique], self.config))
        vanilla = {rank: model for (name, rank), model in fits.models.items() if name == "vanilla"}
        if vanilla and not (replicate or heldout):
            pvalues = _gap_pvalues(self.X, self.groups, fits.shared["weights"], problem.mean, vanilla, self.config.random_state)
            for rank, p in pvalues.items():
                out.add("vanilla", rank, "loss_gap_pvalue", p)

    def facts(self, fits: Fits, out: Recorder) -> None:
        for (name, rank), model in fits.models.items():
            out.add(name, rank, "effective_rank", model.n_components_)
            out.add(name, rank, "seconds", fits.seconds[(name, rank)])
            gap = getattr(model, "dual_gap_", None)
            if gap is not None and np.isfinite(gap):
                out.add(name, rank, "dual_gap", gap)


def audit_pca(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Fit the PCA family on ``data.X`` (scaled as the data says) and write records to ``sink``
    (:func:`fairaudit.audit.run_family` on a :class:`PCAAudit`)."""
    from ..audit import run_family

    run_family(PCAAudit(data, config, sink))

