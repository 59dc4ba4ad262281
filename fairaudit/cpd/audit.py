"""The CP family in an audit: vanilla CP and the fair methods over ranks, and the λ frontier.

Variants: ``vanilla`` (plain CP by ALS), ``fatr`` (Zhu et al. 2018), ``hsic`` (HSIC-BCD) and
``khsic`` (KHSIC-BCD, Kim & Gittens 2021 Algorithm 1).

Records (tidy, as every family; ``rank`` is the CP rank). For each fit: per group and whole-data
``residual_fit``; whole-data ``orthogonality``, ``nkhsic``, ``unfairness``,
``unfairness_balanced``, ``mmd2``, ``mmd2_rbf`` (all on the entity embedding
``FairCPD.embedding_``: each column's mean square 1, or whitened for a matrix), ``lam`` (the
penalty weight, 0 for vanilla), ``epochs`` and ``seconds``.

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

Options (``AuditConfig.options["cpd"]``, CLI ``--cpd-*``): ``leakage_classifier`` (default
``"qda"``; ``"mlp"`` is the paper's 1,500-unit network — see :data:`DEFAULT_OPTIONS`),
``n_lambdas`` (10), ``lambdas`` (a list for every method, or ``{method: list}``),
``sweep_rank`` (default the largest audited rank below the exact-fit rank, see
:func:`default_sweep_rank`), ``sweep`` (``False`` skips the frontier),
``n_epochs`` (200), ``tol`` (1e-4), ``inner_steps`` (5), ``l2`` (FATR's λ_ℓ2, 0),
``khsic_max_rows`` (5000: KHSIC is skipped, with the reason, above it), ``khsic_kernel``
(``"auto"``: the exact kernel up to 2,000 entities, the Nyström approximation above — recorded
as a warning when used; ``"exact"``, ``"nystrom"``) and ``khsic_landmarks`` (500).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..audit import SWEEP_SEPARATOR, AuditConfig, RecordSink, merged_options, representation_metrics
from ..data import AuditData
from ..errors import ParameterError
from ..metrics import LEAKAGE_CLASSIFIERS
from ..vocabulary import term
from . import _kernels
from . import sweep as _sweep
from .estimator import KERNELS, FairCPD, kernel_choice, median_gamma, rank_limit
from .metrics import nkhsic, orthogonality

VARIANTS = {"vanilla": "none", "fatr": "fatr", "hsic": "hsic", "khsic": "khsic"}
"""Variant name → :class:`FairCPD` method."""

DEFAULT_OPTIONS = {
    "leakage_classifier": "qda",
    "n_lambdas": _sweep.DEFAULT_POINTS,
    "lambdas": None,
    "sweep_rank": None,
    "sweep": True,
    "n_epochs": 200,
    "tol": 1e-4,
    "inner_steps": 5,
    "l2": 0.0,
    "khsic_max_rows": 5000,
    "khsic_kernel": "auto",
    "khsic_landmarks": _kernels.NYSTROM_LANDMARKS,
}
"""The audit's defaults. Two differ from :class:`FairCPD`'s and from the paper, for speed:

* ``leakage_classifier="qda"``, not Kim & Gittens' 1,500-unit MLP. Cost: measured on a loaded
  two-core machine, QDA takes 4–30 ms per fit, the MLP ~0.5 s with early stopping (600 and 1,000
  entities) and 3 s with fixed iterations (300 entities), and the default audit makes 70 such
  fits (the MLP was ~100 of the 828 s the previous default took on the 1000 × 10 sample). Noise:
  on small entity counts the MLP's early stopping decided on a few validation rows, ±0.1 in
  balanced accuracy from the network's seed alone at 30 training rows (now fixed iterations
  there: :data:`fairaudit.metrics.MLP_EARLY_STOPPING_ROWS`). Bias: without class weights it
  tends to answer the majority on imbalanced groups (balanced accuracy 0.50 where QDA found 0.84
  on a synthetic 1,000-row embedding). QDA sees differences of means and covariances — what a
  Gaussian-like embedding leaks — and is trained for balanced accuracy.
* ``tol=1e-4`` (relative change of the objective over an epoch), not ``1e-6``: on the 1000 × 10
  sample every metric stayed within 0.003 (residual fit), 0.0003 (nkhsic) and 0.035 (leakage) of
  fits run to ``tol=1e-8`` (and 3,000 epochs), at a ninth of the time.
"""


def _options(config: AuditConfig) -> dict:
    options = merged_options(config, "cpd", DEFAULT_OPTIONS, "cpd")
    if options["n_lambdas"] < 1:
        raise ParameterError(f"n_lambdas must be >= 1; got {options['n_lambdas']}.")
    if options["khsic_kernel"] not in KERNELS:
        raise ParameterError(f"cpd khsic_kernel must be one of {', '.join(KERNELS)}; got {options['khsic_kernel']!r}.")
    if options["leakage_classifier"] not in LEAKAGE_CLASSIFIERS:
        raise ParameterError(
            f"cpd leakage_classifier must be one of {', '.join(LEAKAGE_CLASSIFIERS)}; got {options['leakage_classifier']!r}."
        )
    return options


def _grid(options: dict, method: str, reference: float) -> np.ndarray:
    lambdas = options["lambdas"]
    if isinstance(lambdas, dict):
        lambdas = lambdas.get(method)
    if lambdas is None:
        return _sweep.lambda_grid(reference, options["n_lambdas"])
    grid = np.asarray(sorted(float(v) for v in lambdas))
    if grid.size == 0 or (grid < 0).any() or not np.isfinite(grid).all():
        raise ParameterError(f"cpd lambdas must be finite numbers >= 0; got {list(lambdas)}.")
    return grid


def default_sweep_rank(ranks, limit: int) -> int:
    """The largest audited rank below ``limit``, where a CP model can fit the data exactly.

    At ``limit`` (a matrix's number of columns, say) vanilla CP has residual fit 0, so a
    frontier there only measures how much fit a penalty destroys from a perfect fit; the largest
    rank is used only when every audited rank is at the limit.
    """
    below = [r for r in ranks if r < limit]
    return max(below) if below else max(ranks)


def audit_cpd(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Fit the CP family on ``data.tensor()`` (a matrix is a 2-way tensor) and record it."""
    options = _options(config)
    X = data.tensor()
    codes, labels = data.groups.codes, data.groups.labels
    ranks = config.resolved_ranks(data.n_features, limit=rank_limit(X.shape))
    sweep_rank = options["sweep_rank"] or default_sweep_rank(ranks, rank_limit(X.shape))
    if options["sweep"] and not 1 <= sweep_rank <= rank_limit(X.shape):
        raise ParameterError(f"cpd sweep_rank {sweep_rank} must be between 1 and {rank_limit(X.shape)}.")
    leak_config = dataclasses.replace(config, leakage_classifier=options["leakage_classifier"], methods=())
    fair = []
    for name in ("fatr", "hsic", "khsic"):
        if not config.wants("cpd", name):
            continue
        if name == "khsic" and X.shape[0] > options["khsic_max_rows"]:
            sink.skip(name, _khsic_too_large(X.shape[0], options))
            continue
        fair.append(name)
    run_vanilla = config.wants("cpd", "vanilla")
    do_sweep = bool(options["sweep"] and fair)
    rank_list = sorted(set(ranks) | ({sweep_rank} if do_sweep else set()))
    grid_size = options["n_lambdas"] if options["lambdas"] is None else None
    total = len(rank_list) * int(run_vanilla) + len(ranks) * len(fair)
    if do_sweep:
        total += sum(grid_size or len(_grid(options, name, 1.0)) for name in fair)
    sink.expect(total)
    kernel = kernel_choice(options["khsic_kernel"], X.shape[0], options["khsic_landmarks"])
    landmarks = None
    if "khsic" in fair and kernel == "nystrom":
        landmarks = _kernels.landmarks(codes, options["khsic_landmarks"], config.random_state)
        sink.warn(
            f"cpd/khsic: {X.shape[0]} entities, so the KHSIC penalty and its gradient use the Nyström "
            f"approximation of the RBF kernel on {len(landmarks)} landmark entities (stratified by group; "
            f"khsic_kernel={options['khsic_kernel']!r}, exact up to {_kernels.NYSTROM_ROWS} entities). Set "
            f"{term('cpd_kernel', 'exact')} for the exact kernel, O(n²) per step."
        )
    gammas: dict[int, float] = {}
    unconverged: dict[str, set[int]] = {}
    cache: dict[tuple[str, float, int], tuple[FairCPD, float]] = {}

    def fit(method: str, lam: float, rank: int, init) -> tuple[FairCPD, float]:
        key = (method, lam, rank)
        if key in cache:
            return cache[key]
        params = {"n_epochs": options["n_epochs"], "tol": options["tol"], "random_state": config.random_state}
        if method != "none":
            params["inner_steps"] = options["inner_steps"]
        if method == "khsic":
            params.update(gamma=gammas[rank], kernel=kernel, n_landmarks=options["khsic_landmarks"])
        if method == "fatr":
            params["l2"] = options["l2"]
        started = time.perf_counter()
        with sink.collect_warnings(method):
            model = FairCPD(rank=rank, method=method, lam=lam, init=init, **params).fit(X, sensitive_features=codes)
        if not model.converged_:
            unconverged.setdefault(method, set()).add(rank)
        cache[key] = (model, time.perf_counter() - started)
        return cache[key]

    def record(variant: str, model: FairCPD, seconds: float, lam: float, rank: int) -> None:
        with _kernels.blas_threads():  # the leakage classifiers' products are thin too (MLP: 7–15× faster)
            _record(sink, variant, rank, model, lam, seconds, codes, labels, leak_config)
        sink.progress(variant, rank, seconds)

    for rank in rank_list:
        if "khsic" in fair:
            gammas[rank] = median_gamma(X, rank, config.random_state)
        vanilla, seconds = fit("none", 0.0, rank, "svd")
        if run_vanilla:
            record("vanilla", vanilla, seconds, 0.0, rank)
        for name in fair:
            reference = _sweep.lambda_reference(X, vanilla, codes, name, gammas.get(rank), landmarks)
            if do_sweep and rank == sweep_rank:
                # Continuation: each point starts from the previous (smaller-λ) point's solution.
                init = vanilla.factors_
                for index, lam in enumerate(_grid(options, name, reference)):
                    model, seconds = fit(name, float(lam), rank, init)
                    init = model.factors_
                    record(f"{name}{SWEEP_SEPARATOR}{index}", model, seconds, float(lam), rank)
            if rank in ranks:
                # The default λ; at the sweep rank usually a grid point, whose fit is reused.
                lam = float(_sweep.lambda_grid(reference, options["n_lambdas"])[_sweep.default_index(options["n_lambdas"])])
                record(name, *fit(name, lam, rank, vanilla.factors_), lam, rank)
        cache = {key: value for key, value in cache.items() if key[2] != rank}
    for method, bad in unconverged.items():
        name = next(v for v, m in VARIANTS.items() if m == method)
        sink.warn(
            f"cpd/{name}: reached n_epochs={options['n_epochs']} before the objective settled (relative change "
            f"> tol) at rank(s) {', '.join(map(str, sorted(bad)))}; raise {term('cpd_epochs')} for tighter fits."
        )


def _khsic_too_large(n: int, options: dict) -> str:
    """Why KHSIC is skipped for ``n`` entities: time with the Nyström kernel, memory with the exact one."""
    limit = options["khsic_max_rows"]
    if kernel_choice(options["khsic_kernel"], n, options["khsic_landmarks"]) == "nystrom":
        cost = (
            f"with the Nyström kernel ({options['khsic_landmarks']} landmarks) every KHSIC step costs "
            f"O(entities × landmarks), and the default fits and λ sweep took 85 s at 5,000 entities on two cores"
        )
    else:
        cost = f"the exact kernel needs the {n}×{n} kernel matrix of the entity embedding at every step"
    return (
        f"skipped: {n} entities exceed KHSIC's limit of {limit:,} ({cost}); to run it anyway, use "
        f"{term('cpd_khsic_max_rows', n)}."
    )


def _record(sink: RecordSink, variant: str, rank: int, model: FairCPD, lam: float, seconds: float, codes, labels, config) -> None:
    A = model.embedding_
    sink.add(variant, rank, "residual_fit", model.residual_fit_)
    sink.add_groups(variant, rank, "residual_fit", labels, model.group_residual_fit_)
    sink.add(variant, rank, "orthogonality", orthogonality(A, codes))
    sink.add(variant, rank, "nkhsic", nkhsic(A, codes, random_state=config.random_state))
    sink.add_all(variant, rank, representation_metrics(A, codes, config))
    sink.add(variant, rank, "lam", lam)
    sink.add(variant, rank, "epochs", model.n_iter_)
    sink.add(variant, rank, "seconds", seconds)
