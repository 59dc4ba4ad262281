"""The CP family in an audit: vanilla CP and the fair methods over ranks, and the λ frontier.

Variants: ``vanilla`` (plain CP by ALS), ``fatr`` (Zhu et al. 2018), ``hsic`` (HSIC-BCD) and
``khsic`` (KHSIC-BCD, Kim & Gittens 2021 Algorithm 1).

Records (tidy, as every family; ``rank`` is the CP rank). For each fit: per group and whole-data
``residual_fit``; whole-data ``orthogonality``, ``nkhsic``, ``unfairness``,
``unfairness_balanced``, ``mmd2``, ``mmd2_rbf`` (all on the entity embedding
``FairCPD.embedding_``: each column's mean square 1, or whitened for a matrix), ``lam`` (the
penalty weight, 0 for vanilla), ``epochs`` and ``seconds``; the audit driver adds
``max_residual_fit``, ``residual_fit_gap`` and ``residual_fit_ratio`` (worst and best group) and
the intervals of the stratified bootstrap over entities (:class:`CPDAudit`).

Two kinds of fair records, told apart by the variant name:

* ``fatr``, ``hsic``, ``khsic`` — one fit per rank at the method's default weight ``λ_ref``
  (:mod:`fairaudit.cpd.sweep`: derived per rank from the data's scale), each from the vanilla
  fit at that rank, for the side-by-side curves over rank;
* ``fatr@i``, ``hsic@i``, ``khsic@i`` (``i = 0 … L−1``, ascending λ) — the λ sweep at one rank
  (``sweep_rank``), one variant per grid point so that every (variant, rank, group, metric) key
  stays unique. The ``lam`` metric gives each point's weight; together with ``vanilla`` at the
  same rank (λ = 0) they form the residual-fit/unfairness frontier of the paper's Figs. 2a/3a
  (:func:`fairaudit.plots.frontier`). :func:`fairaudit.audit.split_variant` parses the name. The sweep is a
  continuation: point ``i`` starts from point ``i − 1``'s solution (point 0 from vanilla), which
  follows one path of local minima and needs fewer epochs than restarting from vanilla (the
  frontier moved by at most 0.003 in residual fit and 0.035 in balanced leakage on the 1000 × 10
  sample when we compared). At the sweep rank the default-λ fit is the sweep's point.

Formulation (``options["cpd"]["formulation"]``, CLI ``--cpd-formulation``). ``"fairaudit"`` (the
default) fits every model with our deviations from the paper together — the normalised embedding,
the median-heuristic γ, the L-BFGS/least-squares solver, an SVD start, warm starts from vanilla and
the data-scaled λ grid; ``"paper"`` fits Kim & Gittens' Algorithm 1 as printed (gradient steps of
the App. A.8 sizes, 200 per factor per epoch, penalties on the factor ``A``, ``γ = 1``, a U(0, 1)
start, FATR's ``λ_ℓ2 = 1``) with the paper's λ values: the Fig. 2b weight per rank and a linear
sweep over the Fig. 1a/2a ranges (:data:`fairaudit.cpd.sweep.PAPER_LAMBDA_RANGE`). Why the audit
defaults to ours is in ``docs/architecture.md`` (The CP family → Formulation); each fit's
``formulation`` detail says which ran, and the embedding metrics follow it (``orthogonality`` and
``nkhsic`` on ``A`` with ``γ = 1`` for the paper, on ``Â`` with the median heuristic for ours).
A paper fit whose fixed steps diverge on the data is skipped with the reason.

Options (``AuditConfig.options["cpd"]``, CLI ``--cpd-*``): ``leakage_classifier`` (default
``"qda"``; ``"mlp"`` is the paper's 1,500-unit network — see :data:`DEFAULT_OPTIONS`),
``n_lambdas`` (10), ``lambdas`` (a list for every method, or ``{method: list}``),
``sweep_rank`` (default the largest audited rank below the exact-fit rank, see
:func:`default_sweep_rank`), ``sweep`` (``False`` skips the frontier),
``n_epochs`` (200), ``tol`` (1e-4), ``inner_steps`` (the solver's: 5 L-BFGS steps, 200 gradient
steps for the paper), ``l2`` (FATR's λ_ℓ2; default the formulation's: 0 for ours, 1 for the paper),
``khsic_max_rows`` (5000: KHSIC is skipped, with the reason, above it), ``khsic_kernel``
(``"auto"``: the exact kernel up to 2,000 entities, the Nyström approximation above — recorded
as a warning when used; ``"exact"``, ``"nystrom"``) and ``khsic_landmarks`` (300), ``n_jobs`` (2: fair fits on two worker threads).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import queue
import threading
import time

import numpy as np

from ..audit import SWEEP_SEPARATOR, AuditConfig, FamilyAudit, Fits, Recorder, RecordSink, merged_options, split_variant
from ..data import AuditData
from ..errors import ParameterError
from ..formatting import number
from ..metrics import LEAKAGE_CLASSIFIERS
from ..parallel import map_threads, worker_limits
from ..uncertainty import Disparity
from ..vocabulary import term
from . import _kernels, _tensor
from . import sweep as _sweep
from .estimator import (
    FORMULATIONS,
    KERNELS,
    PAPER_GAMMA,
    PAPER_LAMBDA,
    DivergenceError,
    FairCPD,
    kernel_choice,
    median_gamma,
    normalised_embedding,
    rank_limit,
)
from .metrics import nkhsic, orthogonality
from .strength import RULES, Choice, Point, choose

VARIANTS = {"vanilla": "none", "fatr": "fatr", "hsic": "hsic", "khsic": "khsic"}
"""Variant name → :class:`FairCPD` method."""

DEFAULT_OPTIONS = {
    "formulation": "fairaudit",
    "lambda_choice": None,
    "leakage_classifier": "qda",
    "n_lambdas": _sweep.DEFAULT_POINTS,
    "lambdas": None,
    "sweep_rank": None,
    "sweep": True,
    "n_epochs": 200,
    "tol": 1e-4,
    "inner_steps": None,
    "l2": None,
    "khsic_max_rows": 5000,
    "khsic_kernel": "auto",
    "khsic_landmarks": _kernels.NYSTROM_LANDMARKS,
    "n_jobs": 2,
}
"""The audit's defaults. ``formulation="fairaudit"`` is discussed in the module docstring;
``lambda_choice`` (how each fair method's default λ is set, :data:`fairaudit.cpd.strength.RULES`
or a number) is ``None``: ``"frontier"`` under our formulation (chosen on the sweep by
:func:`fairaudit.cpd.strength.choose`), ``"paper"`` under the paper's (its Fig. 2b weights). Two
more differ from :class:`FairCPD`'s and from the paper, for speed:

* ``leakage_classifier="qda"``, not Kim & Gittens' 1,500-unit MLP. Cost: measured on a loaded
  two-core machine, QDA takes 4–30 ms per fit, the MLP ~0.5 s with early stopping (600 and 1,000
  entities) and 3 s with fixed iterations (300 entities), and the default audit makes 70 such
  fits (the MLP was ~100 of the 828 s the previous default took on the 1000 × 10 sample). Noise:
  on small entity counts the MLP's early stopping decided on a few validation rows, ±0.1 in
  balanced accuracy from the network's seed alone at 30 training rows (now fixed iterations
  there: :data:`fairaudit.metrics.MLP_EARLY_STOPPING_ROWS`). Bias: without class weights it
  tends to answer the majority on imbalanced groups (balanced accuracy 0.50 where QDA found 0.84
  on a synthetic 1,000-row embedding). QDA sees differences of means and covariances — what a
  Gaussian-like embedding leaks — and is trained for balanced accuracy. The paper's own network
  and training (App. A.6: SGD, learning rate 0.003, 100 epochs) is ``"mlp_paper"``.
* ``tol=1e-4`` (relative change of the objective over an epoch), not ``1e-6``: on the 1000 × 10
  sample every metric stayed within 0.003 (residual fit), 0.0003 (nkhsic) and 0.035 (leakage) of
  fits run to ``tol=1e-8`` (and 3,000 epochs), at a ninth of the time.
"""

RESTART_MARGIN, EXACT = 1e-9, 1e-10
"""A fair fit must beat vanilla's residual fit by more than this share of it, and by more than
``EXACT`` (a residual fit is relative to ``‖X‖``: below 10⁻¹⁰, two exact fits differ by rounding),
before vanilla is refitted from it (:meth:`CPDAudit._at_own_optimum`)."""


def _point(entries: list, lam: float) -> Point:
    """A fit's place on the frontier from its measured records (:meth:`CPDAudit._measure_model`)."""
    found = {metric: value for metric, value, group in entries if not group}
    balanced = found.get("balanced_accuracy", (math.nan, math.nan, math.nan))
    return Point(lam, float(found["residual_fit"]), balanced if isinstance(balanced, tuple) else (balanced, math.nan, math.nan))


REPLICATE_STARTS = "procedure"
"""Where a bootstrap replicate's fits start under our formulation: ``"procedure"`` — as the audit's
own per-rank fits do, vanilla CP from its SVD start and each fair method from that vanilla fit, so
that a replicate is the audit's procedure applied to the resampled entities; ``"audit"`` — from
the audit's fit of the same variant and rank, the entity rows taken along (the paper's
formulation always does this, and ours at the sweep rank, whose default-λ fit is a point of the
λ continuation). Measured on the 4,165 × 12 credit table (two replicates, ten
ranks): from the audit's fits vanilla took 3–37 epochs and KHSIC 10–51 (the SVD start is the
matrix's exact optimum, reached in 2 epochs; a resampled optimum is slow to reach from the old one
by alternating steps), 10–15 s of CPU per replicate, against 2 and 8–21 epochs from the procedure
(docs/architecture.md, The CP family → intervals)."""

REPLICATE_ROWS = "distinct"
"""How a bootstrap replicate's KHSIC fits hold the resampled entities: ``"distinct"`` — each
distinct entity once, with its count (``FairCPD.fit(sample_weight=…)``, then
:meth:`FairCPD.repeated`): the same problem and the same iteration as on the repeated entities, up
to rounding, on about 0.63 of the rows — 0.4 of the exact kernel's cells, 0.63 of the Nyström
block's (module docstring of :mod:`fairaudit.cpd.estimator`, entities with counts; the Nyström
kernel's landmark term moves all copies of a landmark alike); ``"repeated"`` — every copy its own
row, as before (kept to measure against). Vanilla CP, FATR and HSIC stay on the repeated rows:
their work per row is a few multiply-adds, less than what weighting the sums adds (measured on the
default sample: a vanilla fit 0.8 → 0.95 ms, HSIC 3.8–4.6 → 4.9–5.7 ms, KHSIC 13.2–13.7 →
7.8–9.1 ms; ``docs/architecture.md``, The CP family → Speed, fourth pass). The audit's own fit and
its restarts have no repeats and are fitted as they are."""

FORMULATION_TEXT = {
    "paper": (
        "paper: Kim & Gittens' Algorithm 1 as printed — gradient steps of the App. A.8 sizes (α0 = 3 for "
        "vanilla and FATR, 0.5 for HSIC and KHSIC, α1 = 1; 200 per factor per epoch), penalties on the factor A, "
        "RBF γ = 1, U(0, 1) start, FATR's λ_ℓ2 = 1, λ in the paper's units"
    ),
    "fairaudit": (
        "fairaudit: penalties on the normalised embedding (whitened for a matrix), median-heuristic γ, "
        "L-BFGS A-steps with exact least squares for the other factors, SVD start, fair fits warm-started "
        "from vanilla, λ scaled to the data (docs/architecture.md, The CP family)"
    ),
}
"""What each formulation is, as the ``formulation`` detail of every fit says it."""


def _options(config: AuditConfig) -> dict:
    options = merged_options(config, "cpd", DEFAULT_OPTIONS, "cpd")
    if options["formulation"] not in FORMULATIONS:
        raise ParameterError(
            f"cpd formulation must be one of {', '.join(FORMULATIONS)}; got {options['formulation']!r} "
            f"(choose {term('cpd_formulation', 'paper')} or {term('cpd_formulation', 'fairaudit')})."
        )
    if isinstance(options["n_jobs"], bool) or not isinstance(options["n_jobs"], int) or options["n_jobs"] < 1:
        raise ParameterError(f"{term('cpd_jobs')} must be a whole number >= 1; got {options['n_jobs']!r}.")
    if options["n_lambdas"] < 1:
        raise ParameterError(f"n_lambdas must be >= 1; got {options['n_lambdas']}.")
    if options["khsic_kernel"] not in KERNELS:
        raise ParameterError(f"cpd khsic_kernel must be one of {', '.join(KERNELS)}; got {options['khsic_kernel']!r}.")
    if options["leakage_classifier"] not in LEAKAGE_CLASSIFIERS:
        raise ParameterError(
            f"cpd leakage_classifier must be one of {', '.join(LEAKAGE_CLASSIFIERS)}; got {options['leakage_classifier']!r}."
        )
    options["lambda_choice"] = _lambda_choice(options["lambda_choice"], options["formulation"])
    return options


def _lambda_choice(value, formulation: str):
    """The ``lambda_choice`` option checked: a rule of :data:`fairaudit.cpd.strength.RULES` (``None``:
    ``"frontier"`` for ours, ``"paper"`` for the paper's formulation) or a λ ≥ 0 (a number, or
    its text as the command line gives it)."""
    if value is None:
        return "paper" if formulation == "paper" else "frontier"
    if isinstance(value, str) and value in RULES:
        return value
    try:
        lam = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        lam = math.nan
    if not (math.isfinite(lam) and lam >= 0):
        raise ParameterError(
            f"{term('cpd_lambda')} must be {', '.join(RULES)} or a number >= 0; got {value!r} "
            f"(choose {term('cpd_lambda', 'frontier')} to have it chosen on the λ sweep)."
        )
    return lam


def _grid(options: dict, method: str, reference: float) -> np.ndarray:
    """The λ sweep of ``method``: the user's values, else the paper's linear range (paper) or
    the data-scaled grid around ``reference`` (ours)."""
    lambdas = options["lambdas"]
    if isinstance(lambdas, dict):
        lambdas = lambdas.get(method)
    if lambdas is None:
        if options["formulation"] == "paper":
            return _sweep.paper_grid(method, options["n_lambdas"])
        return _sweep.lambda_grid(reference, options["n_lambdas"])
    grid = np.asarray(sorted(float(v) for v in lambdas))
    if grid.size == 0 or (grid < 0).any() or not np.isfinite(grid).all():
        raise ParameterError(f"cpd lambdas must be finite numbers >= 0; got {list(lambdas)}.")
    return grid


def _default_lambda(options: dict, method: str, reference: float, choice: Choice | None = None) -> float:
    """A fair method's λ at a rank whose ``λ_ref`` is ``reference``, by ``options["lambda_choice"]``:
    a number as given; the paper's Fig. 2b weight; the sweep's position ``choice`` chose on the
    frontier, on this rank's grid (the same multiple of ``λ_ref`` at every rank, the same value on
    the paper's or a given grid); else (``"reference"``, or no choice: no sweep, or every point of
    it diverged) the grid point nearest ``λ_ref`` — the paper's weight under its formulation."""
    rule = options["lambda_choice"]
    if not isinstance(rule, str):
        return float(rule)
    if rule == "paper" or (options["formulation"] == "paper" and choice is None):
        return PAPER_LAMBDA[method]
    if rule == "frontier" and choice is not None:
        return float(_grid(options, method, reference)[choice.index])
    return float(_sweep.lambda_grid(reference, options["n_lambdas"])[_sweep.default_index(options["n_lambdas"])])


def default_sweep_rank(ranks, limit: int) -> int:
    """The largest audited rank below ``limit``, from which a CP model may fit the data exactly
    (the smaller of the largest useful rank and :func:`fairaudit.cpd.sweep.unfolding_rank`).

    There vanilla CP reproduces the data, so a frontier only measures how much fit a penalty
    destroys from a perfect fit, and the embedding has directions the data do not determine;
    the largest rank is used only when every audited rank is at the limit.
    """
    below = [r for r in ranks if r < limit]
    return max(below) if below else max(ranks)


class _Fitter:
    """Fits of one audit: the formulation's parameters, γ per rank, the skip and iteration-cap
    bookkeeping. :meth:`fit` may run in worker threads (it touches no shared state); the
    bookkeeping runs in the audit's own thread (:meth:`account`)."""

    def __init__(self, X, codes, options, config, sink, kernel, entities=None):
        self.X, self.codes, self.options, self.sink, self.kernel = X, codes, options, sink, kernel
        self.copies = _copies(entities) if REPLICATE_ROWS == "distinct" else None
        self.paper = options["formulation"] == "paper"
        self.random_state = config.random_state
        self.gammas: dict[int, float] = {}
        self.metric_gammas: dict[int, float | None] = {}
        self.unconverged: dict[str, set[int]] = {}
        self.diverged: set[tuple[str, int]] = set()

    def gamma(self, rank: int) -> float:
        """KHSIC's γ at ``rank``: the paper's 1, or the median heuristic once per rank (ours)."""
        if rank not in self.gammas:
            self.gammas[rank] = PAPER_GAMMA if self.paper else median_gamma(self.X, rank, self.random_state)
        return self.gammas[rank]

    def set_metric_gamma(self, rank: int, vanilla) -> None:
        """nkhsic's kernel at ``rank``, one for every variant (comparable values, one median instead of
        one per fit): γ = 1 on ``A`` for the paper, the median heuristic on vanilla's ``Â`` for ours
        (``None``, the metric's own median, when vanilla did not fit)."""
        if self.paper:
            self.metric_gammas[rank] = PAPER_GAMMA
        elif vanilla is not None:
            self.metric_gammas[rank] = _kernels.median_gamma(vanilla[0].embedding_, random_state=self.random_state)

    def params(self, method: str, rank: int, init, warm: bool = False) -> dict:
        options = self.options
        params = {**FORMULATIONS[options["formulation"]], "n_epochs": options["n_epochs"], "tol": options["tol"]}
        params.update(random_state=self.random_state, inner_steps=options["inner_steps"])
        if options["l2"] is not None:
            params["l2"] = options["l2"]
        # Ours warm-starts every fair fit from vanilla CP at the same rank (and the sweep from the
        # previous point); the paper starts every fit from its U(0, 1) draw — except a bootstrap
        # replicate (``warm``), which starts from the audit's own fit under either formulation.
        if init is not None and (warm or not self.paper):
            params["init"] = init
        if method == "khsic":
            params.update(gamma=self.gamma(rank), kernel=self.kernel, n_landmarks=options["khsic_landmarks"])
        return params

    def fit(self, method: str, lam: float, rank: int, init=None, warm: bool = False) -> tuple[FairCPD, float] | DivergenceError:
        """The fitted model and its seconds, or the :class:`DivergenceError` of a paper fit whose
        fixed steps overflowed. Needs :meth:`gamma` at ``rank`` computed first (for KHSIC).
        ``warm``: start from ``init`` under either formulation (:meth:`params`)."""
        started = time.perf_counter()
        params = self.params(method, rank, init, warm)
        try:
            if self.copies is None or method != "khsic":
                model = FairCPD(rank=rank, method=method, lam=lam, **params).fit(self.X, sensitive_features=self.codes)
            else:  # KHSIC on a resample: each distinct entity once with its count, the same fit (REPLICATE_ROWS)
                first, inverse, counts = self.copies
                if isinstance(params.get("init"), list | tuple):
                    params["init"] = [params["init"][0][first], *params["init"][1:]]
                model = FairCPD(rank=rank, method=method, lam=lam, **params).fit(
                    self.X[first], sensitive_features=self.codes[first], sample_weight=counts
                ).repeated(inverse)
        except DivergenceError as exc:
            return exc
        return model, time.perf_counter() - started

    def account(self, method: str, lam: float, rank: int, fitted) -> tuple[FairCPD, float] | None:
        """Bookkeeping of one finished fit: a skip for a divergence (once per variant and rank, not
        per λ point), the iteration cap. Returns the fit, or ``None`` for a divergence."""
        name = next(v for v, m in VARIANTS.items() if m == method)
        if isinstance(fitted, DivergenceError):
            if (name, rank) not in self.diverged:
                self.diverged.add((name, rank))
                self.sink.skip(
                    name,
                    f"skipped: the paper's fixed gradient steps (Algorithm 1 with the App. A.8 step sizes) diverged on "
                    f"these data — the {fitted.block} update with step {fitted.step:g} overflowed at epoch {fitted.epoch} "
                    f"(λ = {lam:g}). Choose {term('cpd_formulation', 'fairaudit')} (line search, no step size to tune).",
                    rank=rank,
                )
            return None
        if not fitted[0].converged_:
            self.unconverged.setdefault(method, set()).add(rank)
        return fitted


def _copies(entities) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(first, inverse, counts)`` of a resample's entity indices — each distinct entity's first
    position, every position's distinct entity, the counts — or ``None`` when none repeats. Copies
    are the same original entity (its index), never rows that happen to be equal."""
    if entities is None:
        return None
    _, first, inverse, counts = np.unique(entities, return_index=True, return_inverse=True, return_counts=True)
    return None if len(first) == len(entities) else (first, inverse.ravel(), counts.astype(float))


@dataclasses.dataclass
class _Chain:
    """Fair fits at one rank, each from the previous one's solution (the first from ``init``):
    ``steps`` are ``(variants, method, λ)``, ``variants`` the record names that fit answers to (a
    sweep point can also be the rank's default-λ fit). ``warm``: start from ``init`` under either
    formulation (a bootstrap replicate's fits)."""

    rank: int
    init: list | None
    steps: list[tuple[tuple[str, ...], str, float]]
    warm: bool = False


def _run_chain(fitter: _Fitter, chain: _Chain, emit, stop: threading.Event) -> None:
    """Fit a chain, handing each fit to ``emit(variants, method, λ, rank, fitted)`` as it finishes."""
    init = chain.init
    for variants, method, lam in chain.steps:
        if stop.is_set():
            return
        fitted = fitter.fit(method, lam, chain.rank, init, chain.warm)
        if not isinstance(fitted, DivergenceError):
            init = fitted[0].factors_
        emit(variants, method, lam, chain.rank, fitted)


def _chains(fair, rank_list, starts, *, sweep: tuple[int, dict] | None = None, default=None) -> list[_Chain]:
    """Fair fits as chains, the longest first (so that two workers finish together): the λ sweep
    ``sweep = (rank, {method: grid})`` (a continuation, ours), and one fit per method and rank at
    ``default(rank, method)`` (``None``: no such fit) — at the sweep rank the sweep's point when
    that λ is on the grid."""
    chains = []
    for rank in rank_list:
        if rank not in starts:
            continue
        for name in fair:
            lam = default(rank, name) if default is not None else None
            if sweep is not None and rank == sweep[0]:
                steps = []
                for index, point in enumerate(sweep[1][name]):
                    variants = (f"{name}{SWEEP_SEPARATOR}{index}",)
                    if lam is not None and np.isclose(point, lam, rtol=1e-12, atol=0.0):
                        variants, lam = (*variants, name), None
                    steps.append((variants, name, float(point)))
                chains.append(_Chain(rank, starts[rank], steps))
            if lam is not None:
                chains.append(_Chain(rank, starts[rank], [((name,), name, lam)]))
    cost = {"khsic": 100.0, "hsic": 1.0, "fatr": 1.0}
    return sorted(chains, key=lambda c: -sum(cost[m] for _, m, _ in c.steps) * c.rank)


class CPDAudit(FamilyAudit):
    """The CP family's side of the audit protocol (:class:`fairaudit.audit.FamilyAudit`).

    The audit's fit: vanilla CP at every rank first (in the audit's thread), then the fair fits
    as chains (:func:`_chains`) on ``n_jobs`` worker threads — NumPy and BLAS release the GIL,
    so on two cores two KHSIC fits run side by side. Fits are collected, and progress and skips
    written, in the audit's thread as they finish; an exception from the progress callback
    (:class:`fairaudit.audit.AuditCancelled`) stops the workers after their current fit and
    propagates. The records are measured afterwards (:meth:`measure`).

    Rows are entities (mode 0). A replicate resamples entities within each group and refits
    vanilla CP and each fair method at its default λ (λ_ref, γ and the nkhsic kernel recomputed
    from the replicate's own vanilla fit, as the audit does), each warm-started from the audit's
    fit of the same variant and rank (also under the paper's formulation: the start is a
    computational device here, the replicate's sampling is what the interval measures), the fair
    fits on the same worker threads; the λ sweep is not bootstrapped (its points keep ``ci_*``
    NaN). Held-out entities get their factor rows by least squares against the fitted other
    factors (:meth:`FairCPD.transform`), embedded as the fit's embedding is.
    """

    method = "cpd"
    disparities = (Disparity("residual_fit", "max_residual_fit", "residual_fit_gap", "residual_fit_ratio"),)

    def __init__(self, data: AuditData, config: AuditConfig, sink: RecordSink):
        super().__init__(data, config, sink)
        self.options = options = _options(config)
        self.X = X = data.tensor()
        self.codes, self.labels = data.groups.codes, tuple(data.groups.labels)
        limit = rank_limit(X.shape)
        self.ranks = config.resolved_ranks(data.n_features, limit=limit)
        self.data_rank = _sweep.unfolding_rank(X)
        self.sweep_rank = options["sweep_rank"] or default_sweep_rank(self.ranks, min(limit, max(self.data_rank, 1)))
        if options["sweep"] and not 1 <= self.sweep_rank <= limit:
            raise ParameterError(f"cpd sweep_rank {self.sweep_rank} must be between 1 and {limit}.")
        self.leak_config = dataclasses.replace(config, leakage_classifier=options["leakage_classifier"], methods=())
        self.fair = []
        for name in ("fatr", "hsic", "khsic"):
            if not config.wants("cpd", name):
                continue
            if name == "khsic" and X.shape[0] > options["khsic_max_rows"]:
                sink.skip(name, _khsic_too_large(X.shape[0], options))
                continue
            self.fair.append(name)
        self.run_vanilla = config.wants("cpd", "vanilla")
        self.do_sweep = bool(options["sweep"] and self.fair)
        self.kernel = kernel_choice(options["khsic_kernel"], X.shape[0], options["khsic_landmarks"])
        exact = limit if X.ndim > 2 else min(limit, max(self.data_rank, 1))  # a matrix: its rank (Eckart–Young)
        what = "the exact-fit rank" if exact == limit else "the matrix's rank"
        self.replicate_ranks_skipped = {
            rank: f"rank {rank} reaches {what} {exact} (vanilla CP reproduces the data): not bootstrapped"
            for rank in self.ranks
            if rank >= exact
        }
        self.choices: dict[str, Choice] = {}
        """Each fair method's default λ as chosen on the frontier by the audit's fit
        (``lambda_choice="frontier"``): a position on the sweep's grid, kept for the replicates."""
        self.replicate_variants_skipped = {
            f"{name}{SWEEP_SEPARATOR}{i}": "the λ sweep is not bootstrapped (cost); its default-λ point is the variant "
            f"{name}, which has intervals"
            for name in self.fair
            for i in range(len(_grid(self.options, name, 1.0)))
        }

    @property
    def active(self) -> bool:
        return bool(self.run_vanilla or self.fair)

    def _landmarks(self, codes, random_state):
        """The Nyström landmarks λ_ref's KHSIC penalty uses (``None`` with the exact kernel)."""
        if "khsic" in self.fair and self.kernel == "nystrom":
            return _kernels.landmarks(codes, self.options["khsic_landmarks"], random_state)
        return None

    # ------------------------------------------------------------------ fitting
    def fit(self, rows, *, warm=None, replicate=False, seed=None) -> Fits:
        X, codes = self.X[rows], self.codes[rows]
        if replicate:
            return self._fit_replicate(rows, X, codes, warm, seed)
        options, config, sink, fair = self.options, self.config, self.sink, self.fair
        fits = Fits(rows=rows, shared={"lam": {}, "vanilla": {}})
        rank_list = sorted(set(self.ranks) | ({self.sweep_rank} if self.do_sweep else set()))
        total = len(rank_list) * int(self.run_vanilla) + len(self.ranks) * len(fair)
        if self.do_sweep:
            total += sum(len(_grid(options, name, 1.0)) for name in fair)
        sink.expect(total)
        landmarks = self._landmarks(codes, config.random_state)
        if landmarks is not None:
            sink.warn(
                f"cpd/khsic: {X.shape[0]} entities, so the KHSIC penalty and its gradient use the Nyström "
                f"approximation of the RBF kernel on {len(landmarks)} landmark entities (stratified by group; "
                f"exact up to {_kernels.NYSTROM_ROWS} entities). Choose {term('cpd_kernel', 'exact')} for the "
                "exact kernel, O(n²) per step."
            )
        fitter = _Fitter(X, codes, options, config, sink, self.kernel)
        described: set[str] = set()

        def collect(variants, method: str, lam: float, rank: int, fitted) -> list:
            """One finished fit (as :meth:`_Fitter.account` returns it): kept, with its progress;
            returns the task measuring it."""
            for variant in variants:
                if fitted is None:
                    sink.progress(variant, rank, 0.0)
                    continue
                model, seconds = fitted
                if SWEEP_SEPARATOR not in variant and variant not in described:
                    described.add(variant)
                    sink.detail(variant, rank, "formulation", FORMULATION_TEXT[options["formulation"]])
                fits.models[(variant, rank)], fits.seconds[(variant, rank)] = model, seconds
                fits.shared["lam"][(variant, rank)] = lam
                sink.progress(variant, rank, seconds)
            return [] if fitted is None else [self._measurement_task(fits, X, codes, fitted[0], rank, fitter.metric_gammas, False)]

        with _kernels.blas_threads():  # every product here is thin (fits, γ, λ_ref): one BLAS thread
            starts, references, tasks = {}, {}, []
            for rank in rank_list:
                vanilla = fitter.account("none", 0.0, rank, fitter.fit("none", 0.0, rank))
                fitter.set_metric_gamma(rank, vanilla)
                if self.run_vanilla:
                    tasks += collect(("vanilla",), "none", 0.0, rank, vanilla)
                if vanilla is not None:
                    fits.shared["vanilla"][rank] = vanilla[0]
                elif not fitter.paper:
                    continue  # ours needs vanilla (warm start, λ_ref); the skip says why
                starts[rank] = vanilla[0].factors_ if vanilla is not None else None
                for name in fair:
                    gamma = fitter.gamma(rank) if name == "khsic" else None
                    references[rank, name] = (
                        1.0 if fitter.paper else _sweep.lambda_reference(X, vanilla[0], codes, name, gamma, landmarks)
                    )

            def record(variants, method, lam, rank, fitted):
                return collect(variants, method, lam, rank, fitter.account(method, lam, rank, fitted))

            sweep = None
            if self.do_sweep and self.sweep_rank in starts:
                sweep = (self.sweep_rank, {name: _grid(options, name, references[self.sweep_rank, name]) for name in fair})
            self.choices = {}
            if sweep is not None and options["lambda_choice"] == "frontier":
                # The default λ comes from the sweep: the sweep (and its measurements) first, then the per-rank fits.
                _run_chains(fitter, _chains(fair, rank_list, starts, sweep=sweep), record, options["n_jobs"], tasks)
                tasks, sweep = [], None
                self.choices = self._choose(fits, X, codes, fitter)
                for name, choice in self.choices.items():
                    self._adopt(fits, name, choice, described)

            def default(rank: int, name: str) -> float | None:
                if rank not in self.ranks or (name in self.choices and rank == self.sweep_rank):
                    return None
                return _default_lambda(options, name, references[rank, name], self.choices.get(name))

            _run_chains(fitter, _chains(fair, rank_list, starts, sweep=sweep, default=default), record, options["n_jobs"], tasks)
            self._at_own_optimum(fits, fitter, X, codes, replicate=False)
        _in_report_order(fits)
        fits.shared["metric_gammas"] = dict(fitter.metric_gammas)
        for method, bad in fitter.unconverged.items():
            name = next(v for v, m in VARIANTS.items() if m == method)
            sink.warn(
                f"cpd/{name}: reached n_epochs={options['n_epochs']} before the objective settled (relative change "
                f"> tol) at rank(s) {', '.join(map(str, sorted(bad)))}; raise {term('cpd_epochs')} for tighter fits."
            )
        return fits

    def _choose(self, fits: Fits, X, codes, fitter: _Fitter) -> dict[str, Choice]:
        """Each fair method's default λ on the frontier just swept (:func:`fairaudit.cpd.strength.choose`),
        from the sweep's measured residual fit and leakage and vanilla's at the same rank."""
        rank, measured = self.sweep_rank, fits.shared.setdefault("measured", (False, {}))[1]
        vanilla = fits.shared["vanilla"].get(rank)
        if vanilla is None:
            return {}
        if id(vanilla) not in measured:  # vanilla not audited: measured here for the choice only
            measured[id(vanilla)] = self._measure_model(vanilla, rank, X, codes, fitter.metric_gammas, False, False)
        anchor = _point(measured[id(vanilla)], 0.0)
        choices = {}
        for name in self.fair:
            grid = _grid(self.options, name, 1.0)
            points = []
            for index in range(len(grid)):
                model = fits.models.get((f"{name}{SWEEP_SEPARATOR}{index}", rank))
                points.append(None if model is None else _point(measured[id(model)], fits.shared["lam"][(f"{name}{SWEEP_SEPARATOR}{index}", rank)]))
            found = choose(anchor, points, 1.0 / len(self.labels), rank)
            if found is not None:
                choices[name] = found
        return choices

    def _adopt(self, fits: Fits, name: str, choice: Choice, described: set[str]) -> None:
        """The sweep's chosen point becomes ``name``'s fit at the sweep rank (one model, two record
        names), with the rule that chose it as its ``lambda_choice`` detail."""
        rank, sink = self.sweep_rank, self.sink
        sink.detail(name, rank, "lambda_choice", choice.text)
        if rank not in self.ranks:
            return
        point = (f"{name}{SWEEP_SEPARATOR}{choice.index}", rank)
        fits.models[(name, rank)], fits.seconds[(name, rank)] = fits.models[point], fits.seconds[point]
        fits.shared["lam"][(name, rank)] = fits.shared["lam"][point]
        if name not in described:
            described.add(name)
            sink.detail(name, rank, "formulation", FORMULATION_TEXT[self.options["formulation"]])
        sink.progress(name, rank, fits.seconds[point])

    def _at_own_optimum(self, fits: Fits, fitter: _Fitter, X, codes, replicate: bool) -> None:
        """Vanilla CP at least as good as every fair fit of its rank in what it minimises, the
        residual fit: where a fair fit (a per-rank fit or a point of the sweep) fits better —
        vanilla stopped short (``tol``, ``n_epochs``) or in a poorer optimum — vanilla is refitted
        from that fit's factors (by ALS, which never raises the fit; under the paper's formulation by
        its fixed steps) and kept where it then fits better; the audit's details say so. λ_ref and
        the fair fits' warm starts stay those of vanilla's first fit."""
        measured = fits.shared.setdefault("measured", (replicate, {}))[1]
        for rank, vanilla in list(fits.shared["vanilla"].items()):
            others = {variant: model for (variant, r), model in fits.models.items() if r == rank and variant != "vanilla"}
            lower = {v: m for v, m in others.items() if m.residual_fit_ < vanilla.residual_fit_ - max(RESTART_MARGIN * vanilla.residual_fit_, EXACT)}
            if not lower:
                continue
            source = min(lower, key=lambda v: lower[v].residual_fit_)
            refit = fitter.fit("none", 0.0, rank, [F.copy() for F in lower[source].factors_], warm=True)
            if isinstance(refit, DivergenceError) or refit[0].residual_fit_ >= vanilla.residual_fit_:
                continue
            model, seconds = refit
            fits.shared["vanilla"][rank] = model
            if ("vanilla", rank) not in fits.models:
                continue
            fits.models[("vanilla", rank)] = model
            fits.seconds[("vanilla", rank)] += seconds
            measured[id(model)] = self._measure_model(model, rank, X, codes, fitter.metric_gammas, False, replicate)
            if not replicate:
                self.sink.detail("vanilla", rank, "restart", (
                    f"restarted from the {source} fit's factors: from its own start it stopped at residual fit "
                    f"{number(vanilla.residual_fit_, 5)}, above {source}'s {number(lower[source].residual_fit_, 5)}; "
                    f"restarted there it reaches {number(model.residual_fit_, 5)}"
                ))

    @property
    def restarts(self) -> int:
        """Restarts where a fit starts at random: the paper's U(0, 1) factors, or the Nyström
        landmarks KHSIC draws every epoch; ours from an SVD start with the exact kernel is the same
        from any seed (no restart would move it)."""
        return 3 if self.options["formulation"] == "paper" or ("khsic" in self.fair and self.kernel == "nystrom") else 0

    @property
    def restart_reason(self) -> str:
        if self.options["formulation"] == "paper":
            return "each restart refits vanilla CP and every fair method from other U(0, 1) factors (the paper's start)"
        return "each restart refits every method with other Nyström landmarks for KHSIC's penalty (and its γ and nkhsic samples)"

    def restart(self, fits: Fits, rows, seed) -> Fits:
        """The audit's per-rank procedure on its own entities with every random draw from ``seed``
        (:meth:`_fit_replicate` from a cold start: new U(0, 1) factors under the paper's
        formulation, new landmarks under ours)."""
        return self._fit_replicate(rows, self.X[rows], self.codes[rows], fits, seed, cold=True)

    def restart_seconds(self, fits: Fits) -> float:
        """A restart refits vanilla and the default-λ fits at every rank, not the λ sweep."""
        return float(sum(seconds for (variant, _), seconds in fits.seconds.items() if SWEEP_SEPARATOR not in variant))

    def _fit_replicate(self, rows, X, codes, warm: Fits, seed, *, cold: bool = False) -> Fits:
        """Vanilla and the default-λ fair fits on resampled entities; a fit that diverges (the
        paper's fixed steps) leaves its metrics out of this replicate.

        Ours repeats the audit's per-rank procedure on the resample: vanilla CP from its SVD start,
        each fair method from that vanilla fit (:data:`REPLICATE_STARTS`) — except at the sweep
        rank, where the audit's default-λ fit came by continuation along the λ grid and its replicate
        starts from it. The paper's fits start from the audit's own fits (entity factor rows taken
        along with the entities), as its U(0, 1) starts are a draw, not a procedure a replicate
        could repeat cheaply."""
        options = self.options
        start = int(np.random.default_rng(seed).integers(2**31 - 1))
        fitter = _Fitter(X, codes, options, dataclasses.replace(self.config, random_state=start), self.sink, self.kernel, rows)
        fits = Fits(rows=rows, shared={"lam": {}, "metric_gammas": fitter.metric_gammas})
        position = np.searchsorted(warm.rows, rows)  # each resampled entity's place in the audit's fit
        landmarks = self._landmarks(codes, start)

        def resampled(model: FairCPD) -> list[np.ndarray]:
            return [model.factors_[0][position]] + [F.copy() for F in model.factors_[1:]]

        def keep(variants, method, lam, rank, fitted) -> list:
            if isinstance(fitted, DivergenceError):
                return []
            fits.models[(variants[0], rank)] = fitted[0]
            fits.shared["lam"][(variants[0], rank)] = lam
            return [self._measurement_task(fits, X, codes, fitted[0], rank, fitter.metric_gammas, True)]

        chains, tasks = [], []
        from_audit = (fitter.paper or REPLICATE_STARTS == "audit") and not cold
        with _kernels.blas_threads():
            for rank in self.ranks:
                audited = warm.shared["vanilla"].get(rank)
                if rank in self.replicate_ranks_skipped or audited is None:
                    continue
                vanilla = fitter.fit("none", 0.0, rank, resampled(audited) if from_audit else None, warm=from_audit)
                if isinstance(vanilla, DivergenceError):
                    continue
                fitter.set_metric_gamma(rank, vanilla)
                if self.run_vanilla:
                    tasks += keep(("vanilla",), "none", 0.0, rank, vanilla)
                for name in self.fair:
                    if (name, rank) not in warm.models:
                        continue
                    gamma = fitter.gamma(rank) if name == "khsic" else None
                    reference = 1.0 if fitter.paper else _sweep.lambda_reference(X, vanilla[0], codes, name, gamma, landmarks)
                    lam = _default_lambda(options, name, reference, self.choices.get(name))  # the audit's choice, fixed
                    # At the sweep rank the audit's default-λ fit is the sweep's point, reached by
                    # continuation: its replicate starts from it, in its basin (restarting from
                    # vanilla moved KHSIC's residual fit 0.0794 → 0.0832 on the credit table).
                    continued = self.do_sweep and rank == self.sweep_rank and not cold
                    start = resampled(warm.models[(name, rank)]) if from_audit or continued else vanilla[0].factors_
                    chains.append(_Chain(rank, start, [((name,), name, lam)], warm=from_audit or continued))
            _run_chains(fitter, chains, keep, self._replicate_jobs(), tasks)
            if self.run_vanilla:
                fits.shared["vanilla"] = {rank: model for (variant, rank), model in fits.models.items() if variant == "vanilla"}
                self._at_own_optimum(fits, fitter, X, codes, replicate=True)
        _in_report_order(fits)
        return fits

    def _replicate_jobs(self) -> int:
        if self.inner_threads is not None:
            return self.inner_threads
        return self._own_replicate_jobs()

    def _own_replicate_jobs(self) -> int:
        """Worker threads of a bootstrap replicate: ``n_jobs`` with the Nyström KHSIC kernel, one
        with the exact kernel (records are the same on any number). With the exact kernel (up to
        2,000 entities by default) a fit's steps are short NumPy calls that hold the GIL. Measured
        on the default sample (600 entities, two cores, load 1.4–1.6): 0.65 s per replicate on one
        thread against 0.90–0.92 s (1.09–1.12 s CPU) on two; on the 4,165-entity credit table
        (Nyström) two threads take a replicate from 6.0 to 5.1 s."""
        return self.options["n_jobs"] if self.kernel == "nystrom" else 1

    # ------------------------------------------------------------------ measuring
    def measure(self, fits: Fits, rows, out: Recorder, *, heldout=False, replicate=False) -> None:
        """The records of every fit, in the fits' order. On the fit's own rows they were measured
        while the other fits ran (:meth:`_measurement_task`); otherwise (held-out rows) every fitted
        model is measured here, on ``n_jobs`` threads. A model that answers to two variants (a
        sweep point that is also its rank's default-λ fit) is measured once."""
        measured = fits.shared.get("measured")
        if measured is None or rows is not fits.rows or heldout or measured[0] != replicate:
            X, codes = self.X[rows], self.codes[rows]
            models = list({id(model): (rank, model) for (_, rank), model in fits.models.items()}.values())
            found = map_threads(
                lambda item: self._measure_model(item[1], item[0], X, codes, fits.shared["metric_gammas"], heldout, replicate),
                models,
                self._replicate_jobs() if replicate else self.options["n_jobs"],
            )
            measured = (replicate, {id(model): entries for (_, model), entries in zip(models, found, strict=True)})
        for (variant, rank), model in fits.models.items():
            for metric, value, group in measured[1][id(model)]:
                out.add(variant, rank, metric, value, group)

    def _measurement_task(self, fits: Fits, X, codes, model: FairCPD, rank: int, gammas: dict, replicate: bool):
        """A task for :func:`_run_chains`: measure ``model`` on the fit's entities ``X`` (groups
        ``codes``) into ``fits.shared["measured"]``, which :meth:`measure` then replays (the same
        function on the same inputs, so the same records; tested)."""
        measured = fits.shared.setdefault("measured", (replicate, {}))[1]

        def task() -> None:
            measured[id(model)] = self._measure_model(model, rank, X, codes, gammas, False, replicate)

        return task

    def _measure_model(self, model: FairCPD, rank: int, X, codes, gammas: dict, heldout: bool, replicate: bool) -> list:
        """``[(metric, value, group), …]`` of one fitted model on the entities ``X`` (its own, or
        held-out ones)."""
        with _kernels.blas_threads():  # the leakage classifiers' products are thin too (MLP: 7–15× faster)
            if heldout:
                A, residual, groups = self._heldout(model, X, codes)
            else:
                A, residual, groups = model.embedding_, model.residual_fit_, model.group_residual_fit_
            entries = [("residual_fit", residual, "")]
            entries += [("residual_fit", value, label) for label, value in zip(self.labels, groups, strict=True)]
            entries.append(("orthogonality", orthogonality(A, codes), ""))
            entries.append(("nkhsic", nkhsic(A, codes, gamma=gammas.get(rank), random_state=self.config.random_state), ""))
            found = self.representation(A, codes, replicate=replicate, config=self.leak_config)
        return entries + [(metric, value, "") for metric, value in found.items()]

    def representations_of(self, fits: Fits, rows, *, heldout: bool) -> dict:
        """Each fit's embedding of the entities ``rows``: the fit's own, or new entities' by least
        squares (:meth:`_heldout`); a model that answers to two variants shares one array."""
        X, codes = self.X[rows], self.codes[rows]
        embedded: dict[int, np.ndarray] = {}
        found = {}
        for key, model in fits.models.items():
            if id(model) not in embedded:
                embedded[id(model)] = self._heldout(model, X, codes)[0] if heldout else model.embedding_
            found[key] = embedded[id(model)]
        return found

    def _heldout(self, model: FairCPD, X: np.ndarray, codes: np.ndarray):
        """Embedding, residual fit and per-group residual fits of new entities ``X``: their factor
        rows by least squares given the fitted other factors, embedded as the fit's embedding
        (the factor itself for the paper's formulation, else normalised by the fit's scale)."""
        A = model.transform(X)
        if model.embedding == "factor":
            embedded = A
        else:
            _, scale = normalised_embedding(model.factors_[0], return_scale=True, whiten=len(model.factors_) == 2)
            embedded = A @ scale if scale.ndim == 2 else A * scale
        residual = (X - _tensor.reconstruct([A] + list(model.factors_[1:]))).reshape(len(X), -1)
        flat = X.reshape(len(X), -1)
        total = float(np.linalg.norm(flat))
        groups = np.array(
            [np.linalg.norm(residual[codes == g]) / max(np.linalg.norm(flat[codes == g]), 1e-300) for g in range(len(self.labels))]
        )
        return embedded, (float(np.linalg.norm(residual)) / total if total > 0 else 0.0), groups

    def facts(self, fits: Fits, out: Recorder) -> None:
        for (variant, rank), model in fits.models.items():
            out.add(variant, rank, "lam", fits.shared["lam"][(variant, rank)])
            out.add(variant, rank, "epochs", model.n_iter_)
            out.add(variant, rank, "seconds", fits.seconds[(variant, rank)])


def audit_cpd(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Fit the CP family on ``data.tensor()`` (a matrix is a 2-way tensor) and record it
    (:func:`fairaudit.audit.run_family` on a :class:`CPDAudit`)."""
    from ..audit import run_family

    run_family(CPDAudit(data, config, sink))


def _in_report_order(fits: Fits) -> None:
    """Put the fits (collected as the worker threads finish them) in one order whatever the threads
    did: by variant (:data:`VARIANTS`), the per-rank fit before the sweep's points, then by rank —
    the order of the records and so of every chart's legend."""
    order = list(VARIANTS)

    def key(item):
        (variant, rank), _ = item
        base, index = split_variant(variant)
        return order.index(base), -1 if index is None else index, rank

    fits.models = dict(sorted(fits.models.items(), key=key))
    fits.seconds = {key: fits.seconds[key] for key in fits.models if key in fits.seconds}


_STOP, _CHAIN, _TASK = -1, 0, 1
"""What a worker of :func:`_run_chains` takes first: a stop, then chains of fits, then other work."""


def _run_chains(fitter: _Fitter, chains: list[_Chain], record, n_jobs: int, tasks=()) -> None:
    """Run ``chains`` and ``tasks`` (callables: the measurements of fits) on ``n_jobs`` worker
    threads, calling ``record(variants, method, λ, rank, fitted)`` here, in the calling thread, for
    every fit as it finishes; ``record`` returns more tasks (that fit's measurement). A worker takes
    a chain while one is waiting and a task otherwise, so measurements fill the time a worker would
    wait for the other's last chain, instead of all following the last fit. Inline for one job:
    the tasks given first, then each fit's tasks right after it.

    The first exception (a worker's, or ``record``'s — a cancel from the progress callback) stops
    the workers after their current fit or task and is raised here."""
    stop = threading.Event()
    if n_jobs <= 1:
        for task in tasks:
            task()

        def record_inline(*fit) -> None:
            for task in record(*fit) or ():
                task()

        for chain in chains:
            _run_chain(fitter, chain, record_inline, stop)
        return
    work: queue.PriorityQueue = queue.PriorityQueue()
    finished: queue.Queue = queue.Queue()
    order = itertools.count()  # first in, first out within a kind

    def put(kind: int, item) -> None:
        work.put((kind, next(order), item))

    def worker() -> None:
        while True:
            kind, _, item = work.get()
            if kind == _STOP or stop.is_set():
                return
            try:
                if kind == _CHAIN:
                    _run_chain(fitter, item, lambda *fit: finished.put((_CHAIN, fit)), stop)
                else:
                    item()
                    finished.put((_TASK, None))
            except BaseException as exc:  # handed to the calling thread, which raises it
                finished.put((_STOP, exc))
                return

    for chain in chains:
        put(_CHAIN, chain)
    for task in tasks:
        put(_TASK, task)
    fits_left, tasks_left = sum(len(chain.steps) for chain in chains), len(tasks)
    threads = [threading.Thread(target=worker, name=f"fairaudit-cpd-{i}", daemon=True) for i in range(n_jobs)]
    with worker_limits():
        for thread in threads:
            thread.start()
        try:
            while fits_left or tasks_left:
                kind, item = finished.get()
                if kind == _STOP:
                    raise item
                if kind == _TASK:
                    tasks_left -= 1
                    continue
                fits_left -= 1
                for task in record(*item) or ():
                    put(_TASK, task)
                    tasks_left += 1
        finally:
            stop.set()
            for _ in threads:
                put(_STOP, None)
            for thread in threads:
                thread.join()


def _khsic_too_large(n: int, options: dict) -> str:
    """Why KHSIC is skipped for ``n`` entities: time with the Nyström kernel, memory with the exact one."""
    limit = options["khsic_max_rows"]
    if kernel_choice(options["khsic_kernel"], n, options["khsic_landmarks"]) == "nystrom":
        cost = (
            f"with the Nyström kernel ({options['khsic_landmarks']} landmarks) every KHSIC step costs "
            f"O(entities × landmarks), at every pass of every fit, at every rank and bootstrap replicate"
        )
    else:
        cost = f"the exact kernel needs the {n}×{n} kernel matrix of the entity embedding at every step"
    return (
        f"skipped: {n} entities exceed KHSIC's limit of {limit:,} ({cost}); to run it anyway, use "
        f"{term('cpd_khsic_max_rows', n)}."
    )
