"""The PCA family in an audit: every variant over the rank sweep, as tidy records.

Records per (variant, rank): per group ``error`` and ``loss``; whole-data ``max_loss``,
``loss_gap``, ``loss_ratio`` and ``error_ratio`` (worst and best group, added by the audit
driver), ``loss_gap_pvalue`` (that pair's difference against random groups of the same sizes;
:func:`_gap_pvalues` tests every pair, for the verdicts' comparisons),
``variance_explained``, ``mmd2``, ``mmd2_rbf``, the leakage test's ``unfairness``,
``unfairness_balanced``, ``balanced_accuracy``, ``chance_balanced_accuracy`` and
``leakage_pvalue``, ``effective_rank``, ``seconds``, and for the dual solvers ``dual_gap``.
Definitions: :mod:`fairaudit.metrics`.

How the data reach the fits: the engine (``AuditConfig.engine``, :mod:`fairaudit.engine`) makes
one pass over the rows for the per-group moments, from which every fit and its ``error``,
``loss``, ``variance_explained`` and ``mmd2`` are computed exactly; the metrics that need rows
(the leakage test, ``mmd2_rbf``, ``loss_gap_pvalue``) read the representation of a
stratified sample of at most ``leakage_max_rows`` rows (every row when there are fewer; its size
is stated in the audit's notes when it is a sample). Wide data (fewer rows than features) are
fitted in the row space (:class:`~fairaudit.pca.GroupProblem`).

Intervals: a bootstrap replicate reweights the rows (multinomial counts within each group) and
asks the engine for the weighted moments — ``GroupMoments.from_rows(..., weights=...)``, the
resample never materialised, the scaling re-estimated on it as the data boundary would; on data
read partition by partition the dask engine's Poisson bootstrap gives them
(:meth:`~fairaudit.engine.PartitionedData.replicate_summary`) — then
refits each variant warm-started from the audit's own fit at the same rank (Fair PCA's dual
weights). Held-out rows (``AuditConfig(holdout=…)``) are scaled as the training rows were and
measured with the fitted map, centred at the training mean, against their own group's best
rank-``d`` error.
"""

from __future__ import annotations

import copy
import time

import numpy as np
from sklearn.base import clone

from ..audit import (
    AuditConfig,
    FamilyAudit,
    Fits,
    Recorder,
    RecordSink,
    emptied_note,
    erased_base,
    erased_variant,
    merged_options,
)
from ..data import AuditData
from ..engine import POISSON_NOTE, RowSample, dask_instance, get_engine
from ..errors import ParameterError
from ..groups import GroupCodes
from ..linalg import blas_threads
from ..uncertainty import Disparity
from ..verdicts import PermutationNull, permutation_pvalue
from ..vocabulary import term
from ._base import GroupPCABase, rank_sweep_problem
from ._problem import BLAS_THREADS, GroupProblem
from .covfair import CovFairPCA
from .equal_means import EqualMeansPCA
from .fair import FairPCA
from .jevd import JEVDPCA
from .jevd import SOLVERS as JEVD_SOLVERS
from .leace import LeacePCA
from .vanilla import PCA

VARIANTS: dict[str, GroupPCABase] = {
    "vanilla": PCA(),
    "fair_eig": FairPCA(solver="eig"),
    "fair_sdp": FairPCA(solver="sdp"),
    "fair_mw": FairPCA(solver="mw"),
    "jevd": JEVDPCA(),
    "cov_fair": CovFairPCA(),
    "equal_means": EqualMeansPCA(),
    "equal_means_cov": EqualMeansPCA(match_covariance=True),
}
"""Variant name → unfitted estimator (display titles: ``fairaudit.plots.VARIANT_TITLES``). With
``AuditConfig(leace=True)`` every chosen variant but those in :data:`MEANS_EQUAL` also runs as
``<name>+leace`` (:class:`~fairaudit.pca.LeacePCA` around it)."""

MEANS_EQUAL = ("equal_means", "equal_means_cov")
"""Variants whose representation has equal group means by construction: LEACE would erase nothing
(its ``+leace`` twin is not fitted)."""

DEFAULT_OPTIONS = {"jevd_solver": "jacobi"}
"""``AuditConfig.options["pca"]`` keys and defaults.

``jevd_solver``: the audit runs JEVD-PCA with the orthogonal Jacobi scheme, not the paper's
Algorithm 1 (the estimator's default): Algorithm 1 as printed diverges from its first iteration
on standardised data (LSAC, credit: the audit's default scaling) and on raw LSAC with its 0/1
gender column among the features, leaving the starting basis — the original features — as its
answer; on raw LSAC without that column it converges, slowly (0.2–0.4 % of the off-diagonal mass
left after its 500 iterations), to the Jacobi scheme's projections (``docs/architecture.md``,
"JEVD-PCA", gives the measurements). Each fit's ``solver`` detail names the scheme that ran."""

JEVD_SOLVER_NOTES = {
    "paper": "paper (Algorithm 1 as printed)",
    "damped": "damped (Algorithm 1's update with a backtracking step; our deviation)",
    "jacobi": "jacobi (orthogonal Jacobi sweeps; our deviation — the paper's Algorithm 1 diverges on standardised data)",
}

NOT_REPLICATED = {
    "fair_sdp": "fair_sdp solves the same problem as fair_eig (the tests hold them to the same optimum) with an "
    "interior-point SDP, 0.03–0.4 s per fit: its intervals are fair_eig's and are not recomputed",
    "fair_mw": "fair_mw solves the same problem as fair_eig by multiplicative weights, 0.3 s per fit at most "
    "ranks: its intervals are fair_eig's and are not recomputed",
}
NOT_REPLICATED.update({erased_variant(name): reason for name, reason in NOT_REPLICATED.items()})
"""Variants left out of bootstrap replicates (their records keep ``ci_*`` NaN), with the reason
(a ``+leace`` twin with its base)."""

GAP_PERMUTATIONS = 200
"""Random regroupings behind the permutation test of every pair of groups (and
``loss_gap_pvalue``, the worst and best group's): an empirical two-sided p-value down to
2/201 ≈ 0.01, below that a normal fit to the permuted differences
(:func:`fairaudit.verdicts.permutation_pvalue`) — Holm over 3 pairs × 10 ranks needs 0.0017."""

GAP_REGROUPINGS_PER_BATCH = 25
"""Regroupings of :func:`_gap_pvalues` whose group covariances are held at once (``25 × k × s²``
numbers: 4 MB at 2 groups and ``s = 100``, about the largest the budget below allows at 10,000 rows)."""

GAP_TEST_BUDGET = 2e10
"""Largest ``GAP_PERMUTATIONS × (rows × features × s + groups × s³)`` (``s`` the problem's
dimension: the features, or the sample's rows for wide data) for which vanilla's ``loss_gap_pvalue`` is
computed: the group moments and spectra of every regrouping. Above it (e.g. 10,000 rows × 300
features) the test is left out, with the reason in the notes, and the gap verdicts rest on the
interval and the tolerance alone."""


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
    base = erased_base(name)
    if base is not None:
        return LeacePCA(base=_estimator(base, options))
    if name == "jevd":
        return clone(VARIANTS[name]).set_params(solver=options["jevd_solver"])
    return VARIANTS[name]


def _unfitted_copy(template: GroupPCABase, rank: int) -> GroupPCABase:
    """``clone(template).set_params(n_components=rank)`` for an unfitted template, without
    scikit-learn's parameter inspection."""
    model = copy.deepcopy(template)
    model.n_components = rank
    return model


def with_twins(chosen: list[str], config: AuditConfig) -> list[str]:
    """``chosen`` with, under ``config.leace``, each variant's ``+leace`` twin right after it (none
    for :data:`MEANS_EQUAL`)."""
    if not config.leace:
        return list(chosen)
    return [twin for name in chosen for twin in (name, *(() if name in MEANS_EQUAL else (erased_variant(name),)))]


def measured_coordinates(Z: np.ndarray, model) -> np.ndarray:
    """``Z`` (a fit's representation of centred rows) as the representation metrics read it: in
    the basis ``model.output_basis_`` of the subspace an erased representation lies in, where
    the fit has one."""
    basis = getattr(model, "output_basis_", None)
    return Z if basis is None else Z @ basis


def erasure_distortion(problem: GroupProblem, model) -> float:
    """``E‖z' − z‖² / E‖z‖²`` of a fit after LEACE (a :class:`LeacePCA`, or your erased
    components: ``representation_`` after, ``base_representation_`` before, features × outputs)
    on the rows ``problem`` summarises (centred at the fit's mean): the share of the base
    representation's second moment that LEACE changed."""
    change = model.base_representation_ - model.representation_
    base = model.base_representation_
    if problem.basis is not None:
        change, base = problem.basis.T @ change, problem.basis.T @ base
    total = float(np.sum(base * (problem.pooled @ base)))
    return float(np.sum(change * (problem.pooled @ change))) / total if total > 0 else 0.0


def gap_test_cost(sample: RowSample, n_groups: int) -> float:
    """The arithmetic of ``loss_gap_pvalue`` on ``sample`` (see :data:`GAP_TEST_BUDGET`)."""
    n, d = sample.X.shape
    s = min(n, d)
    return GAP_PERMUTATIONS * (n * d * s + n_groups * s**3)


def observed_gaps(sample: RowSample, labels, centre: np.ndarray, models: dict) -> tuple[GroupProblem, dict, dict]:
    """What :func:`_gap_pvalues` compares regroupings with: the problem of ``sample``'s rows in
    their own groups, vanilla PCA's fit at every rank of ``models`` (theirs where they have one),
    and each model's per-group losses on those rows."""
    problem = GroupProblem.from_data(sample.X, GroupCodes(sample.codes, labels), centre=centre)
    references = {rank: model for (name, rank), model in models.items() if name == "vanilla"}
    for rank in sorted({rank for _, rank in models}):
        if rank not in references:
            references[rank] = clone(VARIANTS["vanilla"]).set_params(n_components=rank)._fit_problem(problem)
    observed = {key: np.asarray(problem.losses(problem.reduce(model.map_), key[1]), dtype=float) for key, model in models.items()}
    return problem, references, observed


def label_pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of label indices ``(a, b)``, ``a < b``, as two index arrays."""
    first, second = np.triu_indices(k, 1)
    return first, second


def pair_nulls(observed: dict, permuted: dict) -> dict[tuple[str, int], dict[tuple[int, int], PermutationNull]]:
    """Each model's pairs of groups against the permuted differences of their rank: ``observed``
    maps ``(variant, rank)`` to its per-group losses, ``permuted`` a rank to its ``(P, pairs)``
    permuted differences ``loss_a − loss_b`` (:func:`label_pairs`' order)."""
    out = {}
    for key, losses in observed.items():
        first, second = label_pairs(len(losses))
        differences = losses[first] - losses[second]
        null = permuted[key[1]]
        out[key] = {
            (int(a), int(b)): PermutationNull(float(np.mean(null[:, p])), float(np.std(null[:, p], ddof=1)),
                                              permutation_pvalue(float(differences[p]), null[:, p]))
            for p, (a, b) in enumerate(zip(first, second, strict=True))
        }
    return out


def _gap_pvalues(sample: RowSample, labels, centre: np.ndarray, models: dict, random_state) -> dict[tuple[str, int], dict]:
    """Permutation tests of every fit's loss difference between every pair of groups: how groups
    of the same sizes drawn at random from the same rows differ, under vanilla PCA's map at that
    rank, between the same two labels (:func:`fairaudit.verdicts.permutation_pvalue`: two-sided,
    with a normal fit to the permuted differences where the observed one lies beyond them all).
    Returns ``{(variant, rank): {(a, b): PermutationNull}}`` (label indices ``a < b``, the
    difference ``loss_a − loss_b``).

    A group's loss is measured against that group's own best rank-``d`` fit *on the same rows*,
    which fits noise: on identically distributed rows a 120-row group's loss is several times a
    480-row group's, whatever the map. Vanilla PCA's map does not depend on the groups, so a
    regrouping needs only new group moments (no refit), and the differences it shows are the
    noise floor of every variant's differences at that rank (a fair variant fitted to random
    groups would shrink them, so the test is conservative for it). The same regroupings serve
    every pair: each pair's null is its own labels' difference, so the size bias of every pair
    (a small group flattered against a large one) is in its own null. Observed and permuted
    losses are both measured on the rows of ``sample`` (every row when the data have at most
    ``leakage_max_rows``), centred at the audit's mean. ``models`` maps ``(variant, rank)`` to a
    fitted model; vanilla's map at every rank is computed here.

    The regroupings are :data:`GAP_REGROUPINGS_PER_BATCH` at a time
    (:meth:`GroupProblem.regroupings`: one Gram matrix per group but the largest, the spectra in
    one batched call), the permutations drawn one by one from the same generator as ever.
    """
    observed_problem, references, observed = observed_gaps(sample, labels, centre, models)
    reduced = {rank: observed_problem.reduce(model.map_) for rank, model in references.items()}
    first, second = label_pairs(len(labels))
    rng = np.random.default_rng(random_state)
    permuted: dict[int, list[np.ndarray]] = {rank: [] for rank in reduced}
    with blas_threads(BLAS_THREADS):
        rows = observed_problem.regrouping_rows(sample.X)  # once for every batch
        for start in range(0, GAP_PERMUTATIONS, GAP_REGROUPINGS_PER_BATCH):
            count = min(GAP_REGROUPINGS_PER_BATCH, GAP_PERMUTATIONS - start)
            regrouped = observed_problem.regroupings(rows, [rng.permutation(sample.codes) for _ in range(count)])
            for rank, projection in reduced.items():
                losses = regrouped.losses(projection, rank)  # B × k
                permuted[rank].append(losses[:, first] - losses[:, second])
    return pair_nulls(observed, {rank: np.vstack(found) for rank, found in permuted.items()})


def _every_row_once(rows: np.ndarray, n: int) -> bool:
    """``rows`` is ``0, 1, …, n − 1``: compared in blocks, without a second index array."""
    step = 1 << 16
    return len(rows) == n and all(np.array_equal(rows[s : s + step], np.arange(s, min(s + step, n))) for s in range(0, n, step))


class PCAAudit(FamilyAudit):
    """The PCA family's side of the audit protocol (:class:`fairaudit.audit.FamilyAudit`); see
    the module docstring."""

    method = "pca"
    erases_itself = True
    disparities = (Disparity("loss", "max_loss", "loss_gap", "loss_ratio", error="error", error_ratio="error_ratio"),)
    replicate_variants_skipped = NOT_REPLICATED

    def __init__(self, data: AuditData, config: AuditConfig, sink: RecordSink):
        super().__init__(data, config, sink)
        self.options = pca_options(config)
        self.engine = get_engine(config.engine)
        self.groups = data.groups
        self.codes = data.groups.codes
        self.labels = tuple(data.groups.labels)
        self.ranks = config.resolved_ranks(data.n_features)
        self.chosen = with_twins(self.chosen_variants(VARIANTS, lambda name: _too_slow(name, data.n_features, config)), config)

    @property
    def active(self) -> bool:
        return bool(self.chosen)

    def degenerate_ranks(self) -> dict[int, str]:
        n, d = self.data.n_rows, self.data.n_features
        exact = min(d, n - 1)  # centred rows span at most n − 1 directions
        what = f"keeps all {d} features" if exact == d else f"spans the {n} rows' {exact} centred directions"
        return {rank: f"rank {rank} {what}: every group is reconstructed exactly" for rank in self.ranks if rank >= exact}

    # ------------------------------------------------------------------ the engine
    def resample(self, rng, rows, index: int, count: int):
        """Data read partition by partition (the dask engine) are resampled by the engine's
        Poisson bootstrap (:class:`~fairaudit.engine.PoissonReplicate`); in-memory rows as every
        family's are."""
        if dask_instance(self.data, "PartitionedData"):
            from ..engine import PoissonReplicate

            if index == 0:
                self.sink.warn(POISSON_NOTE)
            return PoissonReplicate(index, count, int(self.config.random_state or 0))
        return super().resample(rng, rows, index, count)

    @property
    def replicates_here(self) -> bool:
        """On data read partition by partition the replicates run in this process: one pass over
        the data (:meth:`prepare_replicates`) gives every replicate's moments, kept with the data."""
        return dask_instance(self.data, "PartitionedData")

    def prepare_replicates(self, count: int) -> None:
        """The dask engine's pass over the data for ``count`` Poisson-bootstrap replicates (reported
        as ``stage="bootstrap_pass"`` progress), before the first replicate."""
        if dask_instance(self.data, "PartitionedData"):
            from ..engine import PoissonReplicate

            self.engine.replicate_summary(self.data, PoissonReplicate(0, count, int(self.config.random_state or 0)), self._pass_progress())

    def _summary(self, rows, *, sample: bool, scaling=None):
        """The engine's summary of ``rows`` (repeats counted: bootstrap weights; or a Poisson
        bootstrap replicate of the dask engine) and the row weights (``None``: every row once, the
        engine's plain pass)."""
        if dask_instance(rows, "PoissonReplicate"):
            return self.engine.replicate_summary(self.data, rows, self._pass_progress()), None
        n = len(self.codes)
        weights = None
        if scaling is not None or not _every_row_once(rows, n):
            weights = np.bincount(rows, minlength=n).astype(float)
        summary = self.engine.summarise(
            self.data, sample_rows=self.config.leakage_max_rows if sample else 0, random_state=self.config.random_state,
            weights=weights, scaling=scaling,
        )
        return summary, weights

    def _pass_progress(self):
        """The dask engine's replicate pass reported as the audit's progress (contract 4): one event
        as it begins (``done=0``) and one per partition done, ``stage="bootstrap_pass"``,
        ``done``/``total`` the pass's partitions
        (``unit``), ``seconds`` since the pass began — it precedes the first ``"bootstrap"`` event.
        Whatever the callback raises (:class:`~fairaudit.audit.AuditCancelled`) stops the pass."""
        started = time.perf_counter()

        def progress(done: int, total: int) -> None:
            self.sink.event({"variant": "", "rank": None, "done": done, "total": total, "seconds": time.perf_counter() - started,
                             "stage": "bootstrap_pass", "unit": "partitions"})

        return progress

    def _problem(self, summary, weights, centre=None) -> GroupProblem:
        if summary.rows is None:
            return GroupProblem.from_moments(summary.moments, centre=centre)
        groups = summary.row_groups if summary.row_groups is not None else self.groups  # the rows' own groups (dask: the sample's)
        return GroupProblem.from_data(summary.rows, groups, weights=weights, centre=centre)  # wide: the row space

    # ------------------------------------------------------------------ fitting
    def _new_fits(self, rows, replicate: bool) -> Fits:
        """Fits of ``rows`` not made yet, holding what every fit there shares and :meth:`measure`
        reads: the rows' ``summary`` (moments, sample) and their ``problem``."""
        summary, weights = self._summary(rows, sample=not replicate)
        return Fits(rows=rows, shared={"problem": self._problem(summary, weights), "summary": summary})

    def fit(self, rows, *, warm=None, replicate=False, seed=None) -> Fits:
        fits = self._new_fits(rows, replicate)
        problem, summary = fits.shared["problem"], fits.shared["summary"]
        if replicate:
            for name in self.chosen:
                if name in NOT_REPLICATED:
                    continue
                template = _estimator(name, self.options)
                template._prepare_ranks(problem, self.ranks)
                for rank in self.ranks:
                    # a copy, not clone(): scikit-learn's get_params inspects signatures, a tenth of a
                    # PCA replicate's time (cProfile, default sample); the unfitted template's
                    # parameters are the same either way
                    model = _unfitted_copy(template, rank)
                    model._fit_problem(problem, warm.models[(name, rank)]._warm_state())
                    model.n_features_in_ = problem.n_features
                    fits.models[(name, rank)] = model
            return fits
        sink = self.sink
        if not summary.sample.is_complete:
            sink.warn(
                f"pca: unfairness, unfairness_balanced, mmd2_rbf and loss_gap_pvalue were computed on "
                f"{summary.sample.describe(self.labels)}; error, loss, variance_explained and mmd2 use every row (group moments)."
            )
        sink.expect(len(self.chosen) * len(self.ranks))
        for name in self.chosen:
            unconverged: list[tuple[int, float]] = []
            with sink.collect_warnings(name) as caps:
                for rank, fitted, seconds in rank_sweep_problem(_estimator(name, self.options), problem, self.ranks):
                    fits.models[(name, rank)], fits.seconds[(name, rank)] = fitted, seconds
                    if name == "jevd":
                        sink.detail(name, rank, "solver", JEVD_SOLVER_NOTES[fitted.solver])
                    if isinstance(fitted, LeacePCA) and fitted.representation_.shape[1] == fitted.erased_dimensions_:
                        sink.warn(emptied_note(self.method, name, rank, len(self.labels)))
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
        return fits

    # ------------------------------------------------------------------ measuring
    def measure(self, fits: Fits, rows, out: Recorder, *, heldout=False, replicate=False) -> None:
        trained, summary = fits.shared["problem"], fits.shared["summary"]
        problem = trained
        if heldout:  # scaled as the training rows were, centred at the training mean
            summary, weights = self._summary(rows, sample=not replicate, scaling=(summary.shift, summary.scale))
            problem = self._problem(summary, weights, centre=trained.mean)
        centred_sample = summary.sample.X - trained.mean
        gap_test = bool(fits.models) and not (replicate or heldout)
        affordable = gap_test and gap_test_cost(summary.sample, len(self.labels)) <= GAP_TEST_BUDGET
        pvalues: dict = {}

        def gap_pvalues() -> None:  # on the representation metrics' worker threads, alongside them
            pvalues.update(_gap_pvalues(summary.sample, self.labels, trained.mean, fits.models, self.config.random_state))

        shared = {} if replicate else self._representation_values(
            fits, centred_sample, summary.sample.codes, alongside=[gap_pvalues] if affordable else [])
        for (name, rank), model in fits.models.items():
            projection = model.map_
            in_problem = problem.reduce(projection)
            if heldout:
                errors = problem.errors(in_problem)
                losses = errors - problem.best_errors(rank)
            else:
                errors, losses = model.group_errors_, model.group_losses_
            out.add_groups(name, rank, "error", self.labels, errors)
            out.add_groups(name, rank, "loss", self.labels, losses)
            out.add(name, rank, "variance_explained", problem.variance_explained(in_problem))
            if getattr(model, "base_representation_", None) is not None:  # after LEACE: what it changed
                out.add(name, rank, "leace_distortion", erasure_distortion(problem, model))
            values = dict(shared.get((name, rank), {}))
            values["mmd2"] = problem.mean_discrepancy(in_problem)  # exact, from every row's moments
            out.add_all(name, rank, values)
        if gap_test:
            if not affordable:
                self.sink.warn(
                    f"pca: loss_gap_pvalue (each gap against {GAP_PERMUTATIONS} random regroupings) was not computed: "
                    f"{summary.sample.size:,} rows × {summary.sample.X.shape[1]:,} features would take minutes; the gap "
                    "verdicts rest on the bootstrap interval and the tolerance alone."
                )
                return
            self.pair_nulls = {(name, rank, "loss"): nulls for (name, rank), nulls in pvalues.items()}
            for (name, rank), nulls in pvalues.items():
                losses = fits.models[(name, rank)].group_losses_
                pair = tuple(sorted((int(np.argmax(losses)), int(np.argmin(losses)))))
                if pair in nulls:
                    out.add(name, rank, "loss_gap_pvalue", nulls[pair].pvalue)

    def search_subgroups(self, fits: Fits) -> list[tuple]:
        """The worst-served subgroup's search (:func:`fairaudit.pca.subgroups.search`)."""
        from .subgroups import search

        return search(self, fits)

    def _representation_values(self, fits: Fits, centred: np.ndarray, codes: np.ndarray, *, alongside=()) -> dict:
        """Each fit's representation metrics (:func:`fairaudit.audit.representations_metrics`: a
        variant's nested ranks tested for leakage in one pass, on worker threads; ``alongside``:
        more work for those threads — the gap test, 0.1 s of the 1,000,000-row audit that one
        core did alone after them)."""
        keys = list(fits.models)
        with blas_threads(BLAS_THREADS):  # thin products and small factorisations
            representations = [self.coordinates(fits.models[key], centred) for key in keys]
        found = self.representations(representations, codes, replicate=False, lineages=[name for name, _ in keys], alongside=alongside)
        return dict(zip(keys, found, strict=True))

    def coordinates(self, model, centred: np.ndarray) -> np.ndarray:
        """The representation of centred rows that the leakage test and the RBF MMD² read: what
        ``transform`` returns — for a ``+leace`` twin LEACE's output, in an orthonormal basis of
        the subspace it lies in (:meth:`fairaudit.erasure.Eraser.output_basis`)."""
        return measured_coordinates(centred @ model._representation(), model)

    def facts(self, fits: Fits, out: Recorder) -> None:
        for (name, rank), model in fits.models.items():
            out.add(name, rank, "effective_rank", model.n_components_)
            out.add(name, rank, "seconds", fits.seconds[(name, rank)])
            gap = getattr(model, "dual_gap_", None)
            if gap is not None and np.isfinite(gap):
                out.add(name, rank, "dual_gap", gap)


def audit_pca(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Fit the PCA family on the data (scaled as the data say) and write records to ``sink``
    (:func:`fairaudit.audit.run_family` on a :class:`PCAAudit`)."""
    from ..audit import run_family

    run_family(PCAAudit(data, config, sink))
