"""The NMF family in an audit: standard NMF and Fairer-NMF over the rank sweep, as tidy records.

Input (the paper's §6 preprocessing, decided here from the validated :class:`AuditData`):
``X_raw`` made non-negative by the chosen policy (:meth:`AuditData.nonnegative`: stop with a
message by default, or shift / clip), all-zero rows stopped (or dropped on request), then each
feature scaled to unit ℓ2 norm (§6.1) — the data's own ``scaling`` (standardize by default,
which creates negative values) is for the PCA family and is not used here.

Records per (variant, rank): per group ``rel_error``, ``rel_loss``, ``own_rel_error``;
whole-data ``max_rel_loss``, ``rel_loss_gap``, ``total_rel_error``, ``mmd2``, ``mmd2_rbf``,
``unfairness``, ``unfairness_balanced`` (of the representation ``W``), ``n_iter``,
``seconds`` and ``estimate_seconds``. Definitions: :mod:`fairaudit.metrics`.

Each rank's ``E_ℓ`` (Algorithm 1) is computed once and shared by every variant (and cached
across audits). The defaults are the paper's method (``E_ℓ`` and standard NMF by multiplicative
updates stopped by eq. (10), Algorithms 2–3 as printed) except two: the Fairer-NMF iterations
stop by our ``"window"`` rule, because eq. (10) stops multiplicative updates on plateaus — far
from the results the authors saved — and they start from the standard NMF of the same rank
(``docs/nmf.md`` has the measurements). Every fit says which version ran (the ``method`` detail).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..audit import AuditConfig, RecordSink, merged_options, representation_metrics
from ..data import NONNEGATIVE_POLICIES, AuditData, scale_features
from ..errors import FairAuditError, ParameterError, RankError
from ..groups import check_groups
from ..vocabulary import term
from ._core import STOPPING_RULES, GroupedData, check_solver_parameters
from ._estimates import data_key, estimate_group_errors
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
        ("stopping", STOPPING_RULES),
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
    sizes = np.bincount(prepared.codes, minlength=len(prepared.labels))
    smallest = int(np.argmin(sizes))
    if config.ranks is None:
        return tuple(range(1, min(10, n_features, n_rows, int(sizes[smallest])) + 1))
    ranks = config.resolved_ranks(n_features, limit=n_rows)
    too_high = [r for r in ranks if r > sizes[smallest]]
    if too_high:
        raise RankError(
            f"rank {too_high[0]} is larger than group {prepared.labels[smallest]!r} ({int(sizes[smallest])} rows): "
            "that group's own NMF (E_ℓ, Algorithm 1) would reproduce it exactly and its relative loss "
            f"would mean nothing; choose {term('ranks')} up to {int(sizes[smallest])}."
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
def audit_nmf(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Fit standard NMF and Fairer-NMF (MU, AM) at every rank and write records to ``sink``."""
    options = nmf_options(config)
    prepared = nmf_input(data, options["nonnegative"], options["scaling"], options["zero_rows"])
    for note in prepared.notes:
        sink.warn(note)
    ranks = nmf_ranks(config, prepared)
    chosen = []
    for name in VARIANTS:
        if not config.wants("nmf", name):
            continue
        reason = am_too_slow(*prepared.X.shape, options) if name == "fair_am" else None
        if reason and config.variants == "all":
            sink.skip(name, reason)
            continue
        chosen.append(name)
    if not chosen:
        return
    X, sensitive = prepared.X, prepared.sensitive_features
    grouped = GroupedData.build(X, sensitive)
    key = data_key(grouped)
    seed = config.random_state
    standard = standard_settings(options)
    sink.expect(len(chosen) * len(ranks))
    capped: dict[str, list[int]] = {name: [] for name in chosen}
    estimate_capped: list[int] = []
    for rank in ranks:
        # Every warning but the iteration caps goes to the audit; the caps are summarised below.
        with sink.collect_warnings("E_ℓ", forward=Warning) as caps:
            E, estimate_seconds = estimate_group_errors(
                grouped, rank, n_estimates=options["n_estimates"], max_iter=STANDARD_MAX_ITER, random_state=seed,
                key=key, **standard,
            )
        if caps:
            estimate_capped.append(rank)
        fits = {}
        # The vanilla NMF also starts the fair variants with init="nmf"; its warnings count only when it is audited.
        if "vanilla" in chosen or options["init"] == "nmf":
            with sink.collect_warnings("vanilla", forward=Warning if "vanilla" in chosen else ()) as caps:
                vanilla = NMF(rank, estimates=E, random_state=seed, **standard).fit(X, sensitive_features=sensitive)
            fits["vanilla"] = (vanilla, caps, vanilla.fit_seconds_)
        for name, solver in (("fair_mu", "mu"), ("fair_am", "am")):
            if name in chosen:
                fits[name] = _fit_fair(sink, name, solver, rank, E, options, seed, X, sensitive, fits.get("vanilla"))
        for name in chosen:
            fitted, caps, seconds = fits[name]
            _record(sink, name, rank, fitted, seconds, estimate_seconds, X, prepared, config)
            sink.keep(name, rank, fitted)
            sink.detail(name, rank, "method", describe(name, options))
            if caps:
                capped[name].append(rank)
            if getattr(fitted, "h_solvers_", {}).get("SCS"):
                sink.warn(
                    f"nmf/{name}: Clarabel failed on {fitted.h_solvers_['SCS']} H-step(s) at rank {rank}; "
                    "SCS (first-order, less accurate) solved them."
                )
            sink.progress(name, rank, seconds)
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


def standard_settings(options: dict) -> dict:
    """Keyword arguments of :class:`NMF` and :func:`estimate_group_errors` for these options."""
    return {"solver": options["nmf_solver"], "stopping": options["nmf_stopping"], "tol": options["tol"]}


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
    if options["nmf_solver"] == "cd":
        standard = "coordinate descent (ours)"
    else:
        rule = "eq. (10)" if options["nmf_stopping"] == "eq10" else "the window rule (ours)"
        standard = f"multiplicative updates stopped by {rule}"
    estimate = f"E_ℓ: Algorithm 1, mean of T = {options['n_estimates']} NMFs per group by {standard}"
    if variant == "vanilla":
        return f"standard NMF (eq. (2)) by {standard}; {estimate}"
    start = "from the standard NMF (ours)" if options["init"] == "nmf" else f"from a random start ({paper})"
    stop = f"stopped by eq. (10) ({paper})" if options["stopping"] == "eq10" else "stopped by the window rule (ours)"
    if variant == "fair_mu":
        weights = (
            f"H-step weights c_ℓ²/‖X_ℓ‖², c⁽⁰⁾ = 0 ({paper})" if options["mu_weights"] == "squared"
            else f"H-step weights c_ℓ/(‖X_ℓ‖‖X_ℓ − W_ℓH‖), c⁽⁰⁾ = 1 ({ours})"
        )
        text = f"Algorithm 3 (multiplicative updates), {weights}, {start}, {stop}"
    else:
        text = f"Algorithm 2 (SOCP H-step, NNLS W-step), {start}, {stop}"
    if options["keep_best"]:
        text += ", best iterate kept (ours)"
    return f"{text}; {estimate}"


def _record(sink, name, rank, fitted, seconds, estimate_seconds, X, prepared: NMFInput, config) -> None:
    labels = list(fitted.groups_)
    sink.add_groups(name, rank, "rel_error", labels, fitted.group_errors_)
    sink.add_groups(name, rank, "rel_loss", labels, fitted.group_losses_)
    sink.add_groups(name, rank, "own_rel_error", labels, fitted.own_rel_errors_)
    sink.add(name, rank, "max_rel_loss", float(np.max(fitted.group_losses_)))
    sink.add(name, rank, "rel_loss_gap", float(np.ptp(fitted.group_losses_)))
    sink.add(name, rank, "total_rel_error", fitted.reconstruction_err_ / float(np.linalg.norm(X)))
    sink.add_all(name, rank, representation_metrics(fitted.W_, prepared.codes, config))
    sink.add(name, rank, "n_iter", fitted.n_iter_)
    sink.add(name, rank, "seconds", seconds)
    sink.add(name, rank, "estimate_seconds", estimate_seconds)
