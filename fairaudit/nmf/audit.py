"""The NMF family in an audit: standard NMF and Fairer-NMF over the rank sweep, as tidy records.

Input (the paper's §6 preprocessing, decided here from the validated :class:`AuditData`):
``X_raw`` made non-negative by the chosen policy (:meth:`AuditData.nonnegative`: stop with a
message by default, or shift / clip), all-zero rows stopped (or dropped on request), then each
feature scaled to unit ℓ2 norm (§6.1) — the data's own ``scaling`` (standardize by default,
which creates negative values) is for the PCA family and is not used here.

Records per (variant, rank): per group ``rel_error``, ``rel_loss``, ``own_rel_error``;
whole-data ``max_rel_loss``, ``rel_loss_gap``, ``rel_loss_ratio`` and ``rel_error_ratio``
(worst and best group, added by the audit driver), ``total_rel_error``, ``mmd2``, ``mmd2_rbf``
and the leakage test's records (of the representation ``W``), ``n_iter``, ``seconds`` and
``estimate_seconds``. Definitions: :mod:`fairaudit.metrics`. Intervals: the audit's stratified
bootstrap (:class:`NMFAudit` says how a replicate refits).

Each rank's ``E_ℓ`` (Algorithm 1) is computed once and shared by every variant (and cached
across audits). The defaults are the paper's method (``E_ℓ`` by multiplicative updates stopped by
eq. (10), Algorithms 2–3 as printed) except where ``docs/nmf.md`` measures why not: the Fairer-NMF
iterations stop by our ``"window"`` rule, because eq. (10) stops multiplicative updates on
plateaus — far from the results the authors saved —, they start from the standard NMF of the
same rank, and that standard NMF is at its own optimum (:func:`vanilla_settings`,
:func:`at_own_optimum`). Every fit says which version ran (the ``method`` detail).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..audit import AuditConfig, FamilyAudit, Fits, Recorder, RecordSink, merged_options
from ..data import NONNEGATIVE_POLICIES, AuditData, scale_features
from ..errors import FairAuditError, ParameterError, RankError
from ..formatting import number
from ..groups import check_groups
from ..uncertainty import Disparity, resolve_replicates
from ..vocabulary import term
from ._core import (
    FAIR_STOPPING_RULES,
    STOPPING_RULES,
    GroupedData,
    check_solver_parameters,
    exact_factors,
    group_errors,
)
from ._estimates import data_key, estimate_group_errors
from ._rows import DistinctRows
from ._standard import SOLVERS, STANDARD_MAX_ITER
from .fair import MU_WEIGHTS, FairerNMF
from .vanilla import NMF

VARIANTS = ("vanilla", "fair_mu", "fair_am")
"""Variant names (display titles: ``fairaudit.plots.VARIANT_TITLES``)."""

NMF_SCALINGS = ("unit_norm", "none")
ZERO_ROW_POLICIES = ("error", "drop")
AUDIT_INITS = ("random", "nmf")

DEFAULT_OPTIONS = {
    "nonnegative": "error",
    "scaling": "unit_norm",
    "zero_rows": "error",
    "n_estimates": 5,
    "nmf_solver": "mu",
    "nmf_stopping": "eq10",
    "stopping": "window",
    "mu_weights": "squared",
    "init": "nmf",
    "keep_best": False,
    "tol": 1e-4,
    "max_iter": None,
    "am_max_cells": 100_000,
}
"""``AuditConfig.options["nmf"]`` keys and defaults.

The paper's settings (§6.1, Algorithms 1–3): ``n_estimates`` (``T = 5``), ``nmf_solver="mu"``
and ``nmf_stopping="eq10"`` (standard NMF and Algorithm 1's group NMFs), ``mu_weights="squared"``
(Algorithm 3's H-step), ``keep_best=False``, ``tol=1e-4``. Ours as the audit's defaults, each
with its reason in ``docs/nmf.md``: ``stopping="window"`` for the Fairer-NMF iterations (eq. (10)
stops multiplicative updates on plateaus) and ``init="nmf"`` (Fairer-NMF starts from the standard
NMF it is compared with: lower or equal losses in less time than random starts). ``am_max_cells``: above this many ``rows × features`` the AM
variant is skipped under ``--variants all`` (see :func:`am_too_slow`).

Measured (benchmarks/bench_nmf_am.py, rank 10, one BLAS thread, two cores shared with other
work): an AM iteration costs 1.1–1.6 µs per cell — 0.062–0.095 s at 5000×20, 0.10–0.15 s at
8000×25, 0.33–0.49 s at 30000×24 over two runs — and fits on the Heart and Table-1 data took
2 to 72 iterations, some reaching the 200-iteration cap. At 100,000 cells a rank therefore
takes up to about 20 s and a ten-rank sweep a few minutes at worst; the credit data
(30,000×23) would take up to 1–1.6 min per rank."""


OPTION_TERMS = {
    "nonnegative": "nonnegative",
    "scaling": "nmf_scaling",
    "zero_rows": "zero_rows",
    "n_estimates": "nmf_estimates",
    "nmf_solver": "nmf_solver",
    "nmf_stopping": "nmf_stopping",
    "stopping": "fair_nmf_stopping",
    "mu_weights": "fair_nmf_weights",
    "init": "fair_nmf_init",
    "keep_best": "fair_nmf_keep_best",
    "tol": "nmf_tol",
    "max_iter": "nmf_max_iter",
    "am_max_cells": "am_max_cells",
}
"""Option key → its name in :mod:`fairaudit.vocabulary` (how messages name it in each interface)."""


def nmf_options(config: AuditConfig) -> dict:
    """``config.options["nmf"]`` with defaults filled in, checked."""
    options = merged_options(config, "nmf", DEFAULT_OPTIONS, "NMF")
    for key, allowed in (
        ("nonnegative", NONNEGATIVE_POLICIES),
        ("scaling", NMF_SCALINGS),
        ("zero_rows", ZERO_ROW_POLICIES),
        ("nmf_solver", SOLVERS),
        ("nmf_stopping", STOPPING_RULES),
        ("stopping", FAIR_STOPPING_RULES),
        ("mu_weights", MU_WEIGHTS),
        ("init", AUDIT_INITS),
        ("keep_best", (True, False)),
    ):
        if options[key] not in allowed:
            raise ParameterError(
                f"NMF option {term(OPTION_TERMS[key])} must be one of {', '.join(map(str, allowed))}; got {options[key]!r}."
            )
    names = {key: term(OPTION_TERMS[key]) for key in ("tol", "max_iter", "n_estimates")}
    check_solver_parameters(options["tol"], options["max_iter"] or 1, options["n_estimates"], names)
    return options


# ============================================================================ input
@dataclass(frozen=True)
class NMFInput:
    """The matrix NMF sees and the groups of its rows."""

    X: np.ndarray
    codes: np.ndarray
    labels: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def sensitive_features(self) -> pd.Series:
        """Group labels per row, keeping the data's group order."""
        return pd.Series(pd.Categorical.from_codes(self.codes, categories=list(self.labels)))

    @property
    def smallest_group(self) -> tuple[str, int]:
        """The group with the fewest rows: its label and row count (the first such, in group order)."""
        sizes = np.bincount(self.codes, minlength=len(self.labels))
        smallest = int(np.argmin(sizes))
        return self.labels[smallest], int(sizes[smallest])

    @property
    def exact_rank(self) -> int:
        """The rank from which every group's own NMF is exact: a group of ``n_ℓ`` rows and ``m``
        features has ``E_ℓ = 0`` (Algorithm 1) at ``r ≥ min(n_ℓ, m)``, so here its relative loss
        stops meaning anything. The audit's ranks go up to it (:func:`nmf_ranks`) and are not
        bootstrapped at it; a dictionary brought as "yours" may not have more rows."""
        return min(self.X.shape[1], self.smallest_group[1])


def nmf_input(data: AuditData, nonnegative: str = "error", scaling: str = "unit_norm", zero_rows: str = "error") -> NMFInput:
    """The NMF matrix of ``data``: non-negative (policy), no all-zero rows, scaled (§6.1).

    Order matters: the non-negativity policy acts on the raw values (a shift by each feature's
    minimum is only meaningful in the original units), zero rows are found after it (a shift
    can create one), and the unit-ℓ2 column scaling comes last.
    """
    if scaling not in NMF_SCALINGS:
        raise ParameterError(f"NMF scaling must be one of {', '.join(NMF_SCALINGS)}; got {scaling!r}.")
    if zero_rows not in ZERO_ROW_POLICIES:
        raise ParameterError(f"zero_rows must be 'error' or 'drop'; got {zero_rows!r}.")
    X = data.nonnegative(nonnegative)
    notes = []
    negative_columns = [name for name, neg in zip(data.feature_names, (data.X_raw < 0).any(axis=0), strict=True) if neg]
    if negative_columns and nonnegative != "error":
        action = "each shifted by its own minimum" if nonnegative == "shift" else "clipped at 0"
        notes.append(
            f"nmf: {len(negative_columns)} feature(s) with negative values {action} before NMF "
            f"({', '.join(map(repr, negative_columns[:5]))}{' …' if len(negative_columns) > 5 else ''})"
        )
    groups = data.groups
    zero = ~(X > 0).any(axis=1)
    if zero.any():
        where = [_line(data, i) for i in np.flatnonzero(zero)[:5]]
        if zero_rows == "error":
            cause = " (after shifting each feature by its minimum)" if nonnegative == "shift" else ""
            raise FairAuditError(
                f"{int(zero.sum())} row(s) have only zeros in the feature columns{cause}: "
                f"{', '.join(where)}{' …' if zero.sum() > 5 else ''}. NMF learns nothing from such a row "
                "and it often means missing values coded as 0; check the row(s), leave them out of the "
                f"file, or drop them for NMF with {term('zero_rows', 'drop')}."
            )
        X, groups = X[~zero], groups.subset(~zero)
        notes.append(f"nmf: dropped {int(zero.sum())} all-zero row(s): {', '.join(where)}{' …' if zero.sum() > 5 else ''}")
    X = scale_features(X, scaling)
    check_groups(groups, min_size=1, what="the rows left for NMF")
    return NMFInput(X=np.ascontiguousarray(X), codes=groups.codes, labels=groups.labels, notes=tuple(notes))


def _line(data: AuditData, row: int) -> str:
    return f"line {int(data.lines[row])}" if data.lines is not None else f"row {row}"


def nmf_ranks(config: AuditConfig, prepared: NMFInput) -> tuple[int, ...]:
    """The ranks to sweep: at most min(features, rows, smallest group's rows)."""
    n_rows, n_features = prepared.X.shape
    if config.ranks is None:
        return tuple(range(1, min(10, prepared.exact_rank) + 1))
    ranks = config.resolved_ranks(n_features, limit=n_rows)  # refuses ranks above the features
    group, rows = prepared.smallest_group
    too_high = [r for r in ranks if r > rows]
    if too_high:
        raise RankError(
            f"rank {too_high[0]} is larger than group {group!r} ({rows} rows): "
            "that group's own NMF (E_ℓ, Algorithm 1) would reproduce it exactly and its relative loss "
            f"would mean nothing; choose {term('ranks')} up to {rows}."
        )
    return ranks


def am_too_slow(n_rows: int, n_features: int, options: dict) -> str | None:
    """Why the AM variant is skipped for data this size (``None``: run it)."""
    cells = n_rows * n_features
    limit = options["am_max_cells"]
    if cells > limit:
        return (
            f"skipped: alternating minimisation solves {n_rows} non-negative least-squares problems and a "
            f"cone program per iteration (1–2 µs per cell at rank 10, up to 200 iterations); on "
            f"{n_rows}×{n_features} data ({cells:,} cells, limit am_max_cells={limit:,}) a sweep would take "
            f"minutes. fair_mu optimises the same objective; choose fair_am in {term('variants')} to run it anyway."
        )
    return None


# ============================================================================ the audit
class NMFAudit(FamilyAudit):
    """The NMF family's side of the audit protocol (:class:`fairaudit.audit.FamilyAudit`).

    The audit's own fit: each rank's ``E_ℓ`` once, standard NMF, and each Fairer-NMF variant
    (from the standard NMF with ``init="nmf"``), every fit naming its version (the ``method``
    detail). A replicate starts every iterative fit from the audit's own, so that its interval is
    the sampling variability of the audit's solution (another random start is another solution,
    measured apart: :meth:`restart`): it re-estimates ``E_ℓ`` on the resampled rows by
    continuing each of Algorithm 1's ``T`` runs from where the audit's run ended
    (:meth:`replicate_estimates`), refits standard NMF from the audit's own factors
    (multiplicative updates; coordinate descent restarts at random, since scikit-learn's
    stopping rule is relative to its first iteration and a start at the solution never stops)
    and each Fairer-NMF variant from its own audit fit — its factors and, for Algorithm 3, its
    counts ``c`` — with the same settings (:func:`vanilla_settings`, :func:`fairer_settings`) and
    the same restart of standard NMF from a Fairer-NMF fit with a lower total error
    (:func:`at_own_optimum`). Held-out rows get their ``W`` by NNLS against the fitted ``H`` and
    their own ``E_ℓ`` (Algorithm 1 on the held-out rows of each group).
    """

    method = "nmf"
    disparities = (Disparity("rel_loss", "max_rel_loss", "rel_loss_gap", "rel_loss_ratio", error="rel_error", error_ratio="rel_error_ratio"),)

    def __init__(self, data: AuditData, config: AuditConfig, sink: RecordSink):
        super().__init__(data, config, sink)
        self.options = nmf_options(config)
        self.prepared = nmf_input(data, self.options["nonnegative"], self.options["scaling"], self.options["zero_rows"])
        for note in self.prepared.notes:
            sink.warn(note)
        self.ranks = nmf_ranks(config, self.prepared)
        self.codes, self.labels = self.prepared.codes, tuple(self.prepared.labels)
        self.chosen = self.chosen_variants(
            VARIANTS, lambda name: am_too_slow(*self.prepared.X.shape, self.options) if name == "fair_am" else None
        )
        self._heldout_estimates: dict = {}
        self.bootstrapping = resolve_replicates(self.method, config.bootstrap)[0] > 0
        exact = self.prepared.exact_rank
        self.replicate_ranks_skipped = {
            rank: f"at rank {rank} (≥ {exact}, the features or the smallest group's rows) every group's own NMF is exact "
            "(E_ℓ = 0) and the fits only crawl towards an exact factorisation: not bootstrapped (minutes per replicate)"
            for rank in self.ranks
            if rank >= exact
        }

    @property
    def active(self) -> bool:
        return bool(self.chosen)

    def _sensitive(self, rows) -> pd.Series:
        return pd.Series(pd.Categorical.from_codes(self.codes[rows], categories=list(self.labels)))

    def _estimates(self, grouped: GroupedData, rank: int, n_estimates: int, random_state, *, starts=None, keep_runs=False):
        """``E_ℓ`` of ``grouped`` by Algorithm 1 with the audit's settings (cached for an int seed;
        ``starts``, ``keep_runs``: :func:`estimate_group_errors`'s)."""
        return estimate_group_errors(
            grouped, rank, n_estimates=n_estimates, max_iter=STANDARD_MAX_ITER, random_state=random_state,
            key=data_key(grouped) if isinstance(random_state, int) else None, starts=starts, keep_runs=keep_runs,
            **standard_settings(self.options),
        )

    def audit_estimates(self, fits: Fits, grouped: GroupedData, rank: int) -> np.ndarray:
        """The audit's ``E_ℓ`` at ``rank`` (Algorithm 1 with ``n_estimates`` runs), written into
        ``fits.shared`` as :meth:`fit` does (:meth:`_audit_estimate`)."""
        E, seconds, runs = self._audit_estimate(grouped, rank)
        _share_estimate(fits, grouped, rank, E, seconds, runs)
        return E

    def _audit_estimate(self, grouped: GroupedData, rank: int) -> tuple[np.ndarray, float, list | None]:
        """``(E, seconds, runs)``: the audit's ``E_ℓ`` at ``rank`` and its time; when replicates
        follow, every run's factors for :meth:`replicate_estimates` (else ``None``)."""
        seed = self.config.random_state
        if not self.bootstrapping or rank in self.replicate_ranks_skipped:
            return (*self._estimates(grouped, rank, self.options["n_estimates"], seed), None)
        return self._estimates(grouped, rank, self.options["n_estimates"], seed, keep_runs=True)

    def replicate_estimates(self, grouped: GroupedData, rank: int, warm: Fits, rows, scale=None) -> np.ndarray:
        """``E_ℓ`` of a resample ``grouped`` (of the family's ``rows``): each of the audit's
        Algorithm-1 runs continued on the resampled rows of its group, from the factors it ended
        with (each resampled row's ``W`` row is its original's) — the audit's estimate measured on
        another sample, not a new draw of random starts. ``scale``: ``√c`` per row of ``rows``
        when ``grouped`` holds a resample's distinct rows weighted by their counts
        (:class:`~fairaudit.nmf._rows.DistinctRows`)."""
        inverse, slices = warm.shared["grouped"]
        original = inverse[np.searchsorted(warm.rows, rows)]  # each resampled row's place among the audit's grouped rows
        starts = []
        for g, runs in enumerate(warm.shared["runs"][rank]):
            if runs is None:
                starts.append(None)
                continue
            here = grouped.order[grouped.slices[g]]
            within = original[here] - slices[g].start
            weight = 1.0 if scale is None else scale[here]
            starts.append([(W[within] * weight, H) for W, H in runs])
        return self._estimates(grouped, rank, self.options["n_estimates"], None, starts=starts)[0]

    # ------------------------------------------------------------------ fitting
    def fit(self, rows, *, warm=None, replicate=False, seed=None) -> Fits:
        """Every chosen variant at every rank (:meth:`fit_rank`), the ranks side by side on
        :attr:`executor` when the driver gave one (the most costly first); what each rank said
        (details, warnings) is written in rank order, as one after the other would."""
        if replicate:
            return self._fit_replicate(rows, warm, seed)
        sink = self.sink
        sink.expect(len(self.chosen) * len(self.ranks))
        found: dict[int, RankFit] = {}
        for rank_fit in self._each_rank(rows):
            found[rank_fit.rank] = rank_fit
            for name in self.chosen:
                sink.progress(name, rank_fit.rank, rank_fit.models[name][1])
        grouped = GroupedData.build(self.prepared.X[rows], self._sensitive(rows))
        fits = Fits(rows=rows, shared={"estimate_seconds": {}})
        capped: dict[str, list[int]] = {name: [] for name in self.chosen}
        estimate_capped: list[int] = []
        for rank in self.ranks:
            rank_fit = found[rank]
            _share_estimate(fits, grouped, rank, rank_fit.E, rank_fit.estimate_seconds, rank_fit.runs)
            if rank_fit.estimate_capped:
                estimate_capped.append(rank)
            rank_fit.said.replay(sink)
            for name in self.chosen:
                model, seconds, was_capped = rank_fit.models[name]
                fits.models[(name, rank)], fits.seconds[(name, rank)] = model, seconds
                if was_capped:
                    capped[name].append(rank)
        if estimate_capped:
            sink.warn(
                f"nmf: a group's own NMF (E_ℓ, Algorithm 1) reached its iteration cap at rank(s) "
                f"{', '.join(map(str, estimate_capped))}, so E_ℓ may be slightly high and the relative "
                f"losses slightly low there; loosen {term('nmf_tol')} for a faster, coarser estimate."
            )
        for name, ranks_capped in capped.items():
            if ranks_capped:
                sink.warn(
                    f"nmf/{name}: an iteration cap was reached before the stopping rule at rank(s) "
                    f"{', '.join(map(str, ranks_capped))} (the fit itself or its starting NMF); "
                    f"raise {term('nmf_max_iter')} or loosen {term('nmf_tol')}."
                )
        return fits

    def _each_rank(self, rows):
        """Each rank's :class:`RankFit` as it is done: here one after the other, in order, or as
        jobs on :attr:`executor`, the longest first (the ranks below the exact rank, highest first;
        at and above it every fit starts from an exact factorisation)."""
        if self.executor is None or len(self.ranks) < 2:
            for rank in self.ranks:
                yield self.fit_rank(rows, rank)
            return
        exact = self.prepared.exact_rank
        order = sorted(self.ranks, key=lambda rank: (rank >= exact, -rank))
        context = RankJobs(self.for_jobs(), rows)
        token = uuid.uuid4().hex
        try:
            for done in self.executor.run(fit_rank_job, context, order, token=token):
                yield done.value
        finally:
            self.executor.release(token)

    def fit_rank(self, rows, rank: int) -> RankFit:
        """The audit's own fit at ``rank``: ``E_ℓ`` once, standard NMF, and each Fairer-NMF variant
        (from the standard NMF with ``init="nmf"``), every fit naming its version (the ``method``
        detail). A function of its arguments and the family's settings alone, so that ranks can run
        anywhere (:meth:`fit`); what it says is kept in the result (:class:`Said`), not told."""
        X, sensitive = self.prepared.X[rows], self._sensitive(rows)
        grouped = GroupedData.build(X, sensitive)
        options, seed = self.options, self.config.random_state
        sink = RecordSink(self.method)  # what this rank says, replayed into the audit's sink by fit()
        compared = vanilla_settings(options)
        # Every warning but the iteration caps goes to the audit; the caps are summarised by fit().
        with sink.collect_warnings("E_ℓ", forward=Warning) as caps:
            E, estimate_seconds, runs = self._audit_estimate(grouped, rank)
        estimate_capped = bool(caps)
        found = {}
        # The vanilla NMF also starts the fair variants with init="nmf"; its warnings count only when it is audited.
        if "vanilla" in self.chosen or options["init"] == "nmf":
            # At r ≥ min(rows, features) eq. (2)'s optimum is an exact factorisation: vanilla starts there
            # (from a random start it only crawls towards it, to the iteration cap), as E_ℓ is 0 there.
            exact = dict(zip("WH", exact_factors(X, rank), strict=True)) if rank >= min(X.shape) else {}
            with sink.collect_warnings("vanilla", forward=Warning if "vanilla" in self.chosen else ()) as caps:
                vanilla = NMF(rank, estimates=E, random_state=seed, **compared).fit(X, sensitive_features=sensitive, **exact)
            found["vanilla"] = (vanilla, caps, vanilla.fit_seconds_)
        for name, solver in (("fair_mu", "mu"), ("fair_am", "am")):
            if name in self.chosen:
                found[name] = _fit_fair(sink, name, solver, rank, E, options, seed, X, sensitive, found.get("vanilla"))
        if "vanilla" in self.chosen:
            vanilla, caps, seconds = found["vanilla"]
            best, source = at_own_optimum(vanilla, {n: found[n][0] for n in self.chosen if n != "vanilla"}, X, sensitive, E, compared)
            if source is not None:
                found["vanilla"] = (best, caps, seconds + best.fit_seconds_)
                sink.detail("vanilla", rank, "restart", restart_text(vanilla, best, found[source][0], source, X))
        models = {}
        for name in self.chosen:
            fitted, caps, seconds = found[name]
            models[name] = (fitted, seconds, bool(caps))
            sink.detail(name, rank, "method", describe(name, options))
            if getattr(fitted, "h_solvers_", {}).get("SCS"):
                sink.warn(
                    f"nmf/{name}: Clarabel failed on {fitted.h_solvers_['SCS']} H-step(s) at rank {rank}; "
                    "SCS (first-order, less accurate) solved them."
                )
        return RankFit(rank, E, estimate_seconds, runs, estimate_capped, models, Said.of(sink))

    def _fit_replicate(self, rows, warm: Fits, seed) -> Fits:
        """A replicate's fits on the resample ``rows``, each started from the audit's (``warm``).

        Where rows repeat, every fit runs on the resample's distinct rows weighted by their counts
        (:class:`~fairaudit.nmf._rows.DistinctRows`: the same problems, eq. (2), Algorithms 1–3,
        since copies of a row start equal and stay equal) and its ``W`` is expanded back to the
        resampled rows. Not with coordinate descent (``nmf_solver="cd"``: scikit-learn's stopping
        rule sums over rows, and its replicate starts at random), nor where the distinct rows are
        fewer than a rank: there the fits run on the repeated rows."""
        options = self.options
        compared = vanilla_settings(options)
        rng = np.random.default_rng(seed)
        highest = max((rank for rank in self.ranks if rank not in self.replicate_ranks_skipped), default=0)
        distinct = DistinctRows.of(rows)
        if options["nmf_solver"] != "mu" or not distinct.repeats or len(distinct.rows) < highest:
            distinct = DistinctRows.each(rows)
        X, sensitive = distinct.weighted(self.prepared.X[distinct.rows]), self._sensitive(distinct.rows)
        grouped = GroupedData.build(X, sensitive)
        fits = Fits(rows=rows, shared={"estimate_seconds": {}})
        position = np.searchsorted(warm.rows, distinct.rows)  # each fitted row's place in the audit's fit
        for rank in self.ranks:
            if rank in self.replicate_ranks_skipped:
                continue
            E = self.replicate_estimates(grouped, rank, warm, distinct.rows, distinct.scale)
            start = int(rng.integers(2**31 - 1))
            if "vanilla" in self.chosen:
                audited = warm.models[("vanilla", rank)]
                factors = {"W": distinct.weighted(audited.W_[position]), "H": audited.components_} if options["nmf_solver"] == "mu" else {}
                fits.models[("vanilla", rank)] = NMF(rank, estimates=E, random_state=start, **compared).fit(
                    X, sensitive_features=sensitive, **factors
                )
            for name, solver in (("fair_mu", "mu"), ("fair_am", "am")):
                if name in self.chosen:
                    audited = warm.models[(name, rank)]
                    counts = {"counts": audited.counts_} if solver == "mu" else {}
                    fits.models[(name, rank)] = FairerNMF(
                        rank, init="custom", estimates=E, random_state=start, **fairer_settings(options, solver)
                    ).fit(X, sensitive_features=sensitive, W=distinct.weighted(audited.W_[position]), H=audited.components_, **counts)
            if "vanilla" in self.chosen:  # the same procedure as the audit's (at_own_optimum)
                fair = {n: fits.models[(n, rank)] for n in self.chosen if n != "vanilla"}
                fits.models[("vanilla", rank)] = at_own_optimum(fits.models[("vanilla", rank)], fair, X, sensitive, E, compared)[0]
        for model in fits.models.values():
            distinct.expand(model, grouped)
        return fits

    restarts = 2
    """Two: a restart refits every variant from a cold start, as long as the audit's own fits took
    (3.4 s of CPU on the default sample, against 3.0 s for a warm-started replicate)."""
    restart_reason = (
        "each restart refits standard NMF from other random factors and every Fairer-NMF variant from it, as the "
        "audit does, with the audit's E_ℓ (Algorithm 1's own spread over its T random starts is in E_ℓ's runs)"
    )

    def restart(self, fits: Fits, rows, seed) -> Fits:
        """The audit's procedure on its own rows from other random factors (``seed``): standard
        NMF, then each Fairer-NMF variant from it (``init="nmf"``) or from the same random start
        (``init="random"``), at every bootstrapped rank, with the audit's ``E_ℓ``."""
        X, sensitive = self.prepared.X[rows], self._sensitive(rows)
        options = self.options
        refits = Fits(rows=rows, shared={"estimate_seconds": {}})
        start = int(np.random.default_rng(seed).integers(2**31 - 1))
        for rank in self.ranks:
            if rank in self.replicate_ranks_skipped:
                continue
            E = fits.shared["E"][rank]
            vanilla = NMF(rank, estimates=E, random_state=start, **vanilla_settings(options)).fit(X, sensitive_features=sensitive)
            if "vanilla" in self.chosen:
                refits.models[("vanilla", rank)] = vanilla
            for name, solver in (("fair_mu", "mu"), ("fair_am", "am")):
                if name not in self.chosen:
                    continue
                settings = {**fairer_settings(options, solver), "estimates": E, "random_state": start}
                if options["init"] == "nmf":
                    fair = FairerNMF(rank, init="custom", **settings).fit(X, sensitive_features=sensitive, W=vanilla.W_, H=vanilla.components_)
                else:
                    fair = FairerNMF(rank, init="random", **settings).fit(X, sensitive_features=sensitive)
                refits.models[(name, rank)] = fair
            if "vanilla" in self.chosen:  # the same procedure as the audit's (at_own_optimum)
                fair = {n: refits.models[(n, rank)] for n in self.chosen if n != "vanilla"}
                refits.models[("vanilla", rank)] = at_own_optimum(vanilla, fair, X, sensitive, E, vanilla_settings(options))[0]
        return refits

    def restart_seconds(self, fits: Fits) -> float:
        """A restart refits every variant at the bootstrapped ranks, not ``E_ℓ``: the audit's own fit
        times of those (each fit's own iterations; a Fairer-NMF fit's record also counts its starting
        NMF)."""
        return float(sum(model.fit_seconds_ for (_, rank), model in fits.models.items() if rank not in self.replicate_ranks_skipped))

    # ------------------------------------------------------------------ measuring
    def measure(self, fits: Fits, rows, out: Recorder, *, heldout=False, replicate=False) -> None:
        """Every fit's errors and losses, and the representation metrics of every fit's ``W``
        together (:func:`fairaudit.audit.representations_metrics`: the leakage tests and RBF MMD²
        on worker threads); in a replicate only the group-mean MMD²."""
        X = self.prepared.X[rows]
        codes = self.codes[rows]
        if heldout:
            grouped = GroupedData.build(X, self._sensitive(rows))
        representations = self.representations_of(fits, rows, heldout=heldout)
        found = self.representations(list(representations.values()), codes, replicate=replicate, lineages=list(representations))
        shared = dict(zip(representations, found, strict=True))
        for (name, rank), model in fits.models.items():
            W = representations[name, rank]
            if heldout:
                E = self._heldout_E(rows, rank, replicate)
                errors = group_errors(grouped, W[grouped.order], model.components_)
                rel_error, rel_loss, own = errors / grouped.norms, (errors - E) / grouped.norms, E / grouped.norms
                total = float(np.linalg.norm(X - W @ model.components_)) / float(np.linalg.norm(X))
            else:
                rel_error, rel_loss, own = model.group_errors_, model.group_losses_, model.own_rel_errors_
                total = model.reconstruction_err_ / float(np.linalg.norm(X))
            out.add_groups(name, rank, "rel_error", self.labels, rel_error)
            out.add_groups(name, rank, "rel_loss", self.labels, rel_loss)
            out.add_groups(name, rank, "own_rel_error", self.labels, own)
            out.add(name, rank, "total_rel_error", total)
            out.add_all(name, rank, shared[name, rank])

    def representations_of(self, fits: Fits, rows, *, heldout: bool) -> dict:
        """Each fit's ``W`` of ``rows``: its own rows' (the fit's), or new rows' by non-negative
        least squares against its ``H``."""
        if heldout:
            X = self.prepared.X[rows]
            return {key: model.transform(X) for key, model in fits.models.items()}
        return {key: model.W_ for key, model in fits.models.items()}

    def _heldout_E(self, rows, rank: int, replicate: bool) -> np.ndarray:
        """``E_ℓ`` of the held-out rows' groups (Algorithm 1 on those rows): computed once for the
        held-out part, once per replicate (one run per group) for a resampled one."""
        grouped = GroupedData.build(self.prepared.X[rows], self._sensitive(rows))
        if replicate:
            return self._estimates(grouped, rank, 1, np.random.default_rng([int(rows.sum()), rank]))[0]
        if rank not in self._heldout_estimates:
            self._heldout_estimates[rank] = self._estimates(grouped, rank, self.options["n_estimates"], self.config.random_state)[0]
        return self._heldout_estimates[rank]

    def facts(self, fits: Fits, out: Recorder) -> None:
        for (name, rank), model in fits.models.items():
            out.add(name, rank, "n_iter", model.n_iter_)
            out.add(name, rank, "seconds", fits.seconds[(name, rank)])
            out.add(name, rank, "estimate_seconds", fits.shared["estimate_seconds"][rank])


@dataclass(frozen=True)
class Said:
    """What a rank's fit told its sink: warnings in order and details (``(variant, rank, key, value)``)."""

    warnings: tuple[str, ...]
    details: tuple[tuple[str, int, str, object], ...]

    @classmethod
    def of(cls, sink: RecordSink) -> Said:
        details = tuple(
            (variant, int(rank), key, value)
            for variant, ranks in sink.details.items() for rank, facts in ranks.items() for key, value in facts.items()
        )
        return cls(tuple(sink.warnings), details)

    def replay(self, sink: RecordSink) -> None:
        for message in self.warnings:
            sink.warn(message)
        for variant, rank, key, value in self.details:
            sink.detail(variant, rank, key, value)


@dataclass
class RankFit:
    """The audit's own fit at one rank (:meth:`NMFAudit.fit_rank`): ``E_ℓ``, its seconds and, when
    replicates follow, Algorithm 1's runs; whether those hit their cap; each variant's ``(model,
    seconds, capped)``; and what the fit said."""

    rank: int
    E: np.ndarray
    estimate_seconds: float
    runs: list | None
    estimate_capped: bool
    models: dict
    said: Said


@dataclass
class RankJobs:
    """What every rank job reads (:func:`fit_rank_job`): the family (without its sink's listeners) and the rows."""

    family: NMFAudit
    rows: np.ndarray


def fit_rank_job(context: RankJobs, rank: int) -> RankFit:
    """One rank of the audit's own fit, as a job (:mod:`fairaudit.executors`)."""
    return context.family.fit_rank(context.rows, rank)


def _share_estimate(fits: Fits, grouped: GroupedData, rank: int, E, seconds: float, runs) -> None:
    """Write one rank's ``E_ℓ`` into ``fits.shared``: its seconds; with its runs (replicates follow)
    the runs, ``E_ℓ`` and the rows' grouping, for :meth:`NMFAudit.replicate_estimates`."""
    fits.shared["estimate_seconds"][rank] = seconds
    if runs is not None:
        fits.shared.setdefault("runs", {})[rank] = runs
        fits.shared["grouped"] = (grouped.inverse, grouped.slices)
        fits.shared.setdefault("E", {})[rank] = E


def audit_nmf(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Fit standard NMF and Fairer-NMF (MU, AM) at every rank and write records to ``sink``
    (:func:`fairaudit.audit.run_family` on an :class:`NMFAudit`)."""
    from ..audit import run_family

    run_family(NMFAudit(data, config, sink))


def standard_settings(options: dict) -> dict:
    """Keyword arguments of :class:`NMF` and :func:`estimate_group_errors` for these options."""
    return {"solver": options["nmf_solver"], "stopping": options["nmf_stopping"], "tol": options["tol"]}


def vanilla_settings(options: dict) -> dict:
    """Keyword arguments of the audit's standard NMF — the vanilla fit Fairer-NMF is compared
    with: :func:`standard_settings`, stopped as the Fairer-NMF fits are (eq. (10) when they stop
    by eq. (10); the window rule when they stop by it or by the authors' rule, which is defined for
    relative losses). Stopped by eq. (10) while Fairer-NMF ran on from it by the window rule,
    vanilla was not at its own optimum: Fairer-NMF had a lower total error at most ranks of five
    real tables (Heart −21 % at rank 10; ``docs/nmf.md``). ``E_ℓ`` keeps ``nmf_stopping``: it is
    the paper's yardstick."""
    return {**standard_settings(options), "stopping": "eq10" if options["stopping"] == "eq10" else "window"}


RESTART_MARGIN = 1e-9
"""A fit compared with vanilla NMF must be lower in total error by more than this share of
vanilla's error before vanilla is refitted from it (:func:`at_own_optimum`): rounding is no reason."""


def at_own_optimum(vanilla: NMF, compared: dict, X, sensitive, E, settings: dict) -> tuple[NMF, str | None]:
    """Vanilla NMF at least as good as every fit compared with it, in what vanilla minimises.

    Standard NMF minimises ``‖X − WH‖_F`` (eq. (2)); a Fairer-NMF fit (``compared``: name →
    fitted estimator) with a lower error shows that vanilla stopped short of its optimum, or in a
    poorer one. Then vanilla is refitted from that fit's factors — the best of the same starts —
    by multiplicative updates (which never increase the error: Lee & Seung 2001, Theorem 1)
    stopped by ``settings``' rule, and the lower of the two errors kept. Returns the vanilla fit
    and the name of the fit it was restarted from (``None``: kept as it was)."""
    lower = [name for name, fit in compared.items() if fit.reconstruction_err_ < vanilla.reconstruction_err_ * (1 - RESTART_MARGIN)]
    if not lower:
        return vanilla, None
    source = min(lower, key=lambda name: compared[name].reconstruction_err_)
    fit = compared[source]
    restarted = NMF(vanilla.n_components, estimates=E, random_state=vanilla.random_state, **{**settings, "solver": "mu"}).fit(
        X, sensitive_features=sensitive, W=fit.W_, H=fit.components_
    )
    if restarted.reconstruction_err_ < vanilla.reconstruction_err_:
        return restarted, source
    return vanilla, None  # pragma: no cover - multiplicative updates never raise the error


def restart_text(own: NMF, best: NMF, fit, source: str, X) -> str:
    """The ``restart`` detail of a vanilla fit :func:`at_own_optimum` refitted."""
    total = float(np.linalg.norm(X))
    return (
        f"restarted from the {source} fit's factors: from its own start it stopped at total relative error "
        f"{number(own.reconstruction_err_ / total, 5)}, above {source}'s {number(fit.reconstruction_err_ / total, 5)}; "
        f"restarted there it reaches {number(best.reconstruction_err_ / total, 5)}"
    )


def fairer_settings(options: dict, solver: str) -> dict:
    """Keyword arguments of :class:`FairerNMF` (``solver`` ``"mu"`` or ``"am"``) for these options,
    without ``init`` (the audit passes the start)."""
    return {
        "solver": solver, "mu_weights": options["mu_weights"], "stopping": options["stopping"],
        "keep_best": options["keep_best"], "nmf_solver": options["nmf_solver"], "nmf_stopping": options["nmf_stopping"],
        "tol": options["tol"], "max_iter": options["max_iter"], "n_estimates": options["n_estimates"],
    }


def _fit_fair(sink, name, solver, rank, E, options, seed, X, sensitive, vanilla_fit):
    """``(model, caps, seconds)`` of one Fairer-NMF variant; from the vanilla fit with ``init="nmf"``."""
    settings = {**fairer_settings(options, solver), "estimates": E, "random_state": seed}
    with sink.collect_warnings(name, forward=Warning) as caps:
        if options["init"] == "nmf":
            vanilla = vanilla_fit[0]
            fair = FairerNMF(rank, init="custom", **settings).fit(
                X, sensitive_features=sensitive, W=vanilla.W_, H=vanilla.components_
            )
            # A Fairer-NMF result from init="nmf" costs its starting (vanilla) NMF plus its own iterations.
            return fair, caps, vanilla.fit_seconds_ + fair.fit_seconds_
        fair = FairerNMF(rank, init="random", **settings).fit(X, sensitive_features=sensitive)
    return fair, caps, fair.fit_seconds_


def describe(variant: str, options: dict) -> str:
    """Which version of the method a fit ran, in words (the report's ``method`` detail)."""
    paper, ours = "the paper's", "ours"

    def standard(stopping: str) -> str:
        if options["nmf_solver"] == "cd":
            return "coordinate descent (ours)"
        return f"multiplicative updates stopped by {'eq. (10)' if stopping == 'eq10' else 'the window rule (ours)'}"

    estimate = f"E_ℓ: Algorithm 1, mean of T = {options['n_estimates']} NMFs per group by {standard(options['nmf_stopping'])}"
    if variant == "vanilla":
        return (
            f"standard NMF (eq. (2)) by {standard(vanilla_settings(options)['stopping'])}, as far as the Fairer-NMF fits "
            f"run, and restarted from a Fairer-NMF fit's factors where that fit's total error is lower (ours); {estimate}"
        )
    start = "from the standard NMF (ours)" if options["init"] == "nmf" else f"from a random start ({paper})"
    stop = {
        "eq10": f"stopped by eq. (10) ({paper})",
        "window": "stopped by the window rule (ours)",
        "authors": "stopped by the authors' released code's rule (eq. (10)'s test on the relative losses)",
    }[options["stopping"]]
    if variant == "fair_mu":
        if options["stopping"] == "authors":
            first = "c⁽⁰⁾ = 1/L (the authors' code)"
        else:
            first = f"c⁽⁰⁾ = 0 ({paper})" if options["mu_weights"] == "squared" else f"c⁽⁰⁾ = 1 ({ours})"
        form = f"c_ℓ²/‖X_ℓ‖² ({paper})" if options["mu_weights"] == "squared" else f"c_ℓ/(‖X_ℓ‖‖X_ℓ − W_ℓH‖) ({ours})"
        text = f"Algorithm 3 (multiplicative updates), H-step weights {form}, {first}, {start}, {stop}"
    else:
        text = f"Algorithm 2 (SOCP H-step, NNLS W-step), {start}, {stop}"
    if options["keep_best"]:
        text += ", best iterate kept (ours)"
    return f"{text}; {estimate}"
