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

from ..audit import (
    SWEEP_SEPARATOR,
    AuditConfig,
    FamilyAudit,
    Fits,
    Recorder,
    RecordSink,
    merged_options,
)
from ..data import AuditData
from ..errors import ParameterError
from ..metrics import LEAKAGE_CLASSIFIERS
from ..uncertainty import Disparity
from ..vocabulary import term
from . import _kernels, _tensor
from . import sweep as _sweep
from .estimator import (
    KERNELS,
    FairCPD,
    kernel_choice,
    median_gamma,
    normalised_embedding,
    rank_limit,
)
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


class CPDAudit(FamilyAudit):
    """The CP family's side of the audit protocol (:class:`fairaudit.audit.FamilyAudit`).

    Rows are entities (mode 0). A replicate resamples entities within each group and refits
    vanilla CP and each fair method at its default λ (λ_ref recomputed from the replicate's own
    vanilla fit, as the audit does), each warm-started from the audit's fit of the same variant
    and rank; the λ sweep is not bootstrapped (its points keep ``ci_*`` NaN). Held-out entities
    get their factor rows by least squares against the fitted other factors
    (:meth:`FairCPD.transform`) and the fitted embedding's normalisation.
    """

    method = "cpd"
    disparities = (Disparity("residual_fit", "max_residual_fit", "residual_fit_gap", "residual_fit_ratio"),)

    def __init__(self, data: AuditData, config: AuditConfig, sink: RecordSink):
        super().__init__(data, config, sink)
        self.options = options = _options(config)
        self.X = X = data.tensor()
        self.codes, self.labels = data.groups.codes, tuple(data.groups.labels)
        self.ranks = config.resolved_ranks(data.n_features, limit=rank_limit(X.shape))
        self.sweep_rank = options["sweep_rank"] or default_sweep_rank(self.ranks, rank_limit(X.shape))
        if options["sweep"] and not 1 <= self.sweep_rank <= rank_limit(X.shape):
            raise ParameterError(f"cpd sweep_rank {self.sweep_rank} must be between 1 and {rank_limit(X.shape)}.")
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
        limit = rank_limit(X.shape)
        self.replicate_ranks_skipped = {
            rank: f"rank {rank} reaches the exact-fit rank {limit} (vanilla CP reproduces the data): not bootstrapped"
            for rank in self.ranks
            if rank >= limit
        }
        self.replicate_variants_skipped = {
            f"{name}{SWEEP_SEPARATOR}{i}": "the λ sweep is not bootstrapped (cost); its default-λ point is the variant "
            f"{name}, which has intervals"
            for name in self.fair
            for i in range(options["n_lambdas"] if options["lambdas"] is None else len(_grid(options, name, 1.0)))
        }

    @property
    def active(self) -> bool:
        return bool(self.run_vanilla or self.fair)

    def _params(self, method: str, rank: int, gamma: float | None, seed) -> dict:
        options = self.options
        params = {"n_epochs": options["n_epochs"], "tol": options["tol"], "random_state": seed}
        if method != "none":
            params["inner_steps"] = options["inner_steps"]
        if method == "khsic":
            params.update(gamma=gamma, kernel=self.kernel, n_landmarks=options["khsic_landmarks"])
        if method == "fatr":
            params["l2"] = options["l2"]
        return params

    def _default_lam(self, reference: float) -> float:
        n = self.options["n_lambdas"]
        return float(_sweep.lambda_grid(reference, n)[_sweep.default_index(n)])

    # ------------------------------------------------------------------ fitting
    def fit(self, rows, *, warm=None, replicate=False, seed=None) -> Fits:
        X, codes = self.X[rows], self.codes[rows]
        if replicate:
            return self._fit_replicate(rows, X, codes, warm, seed)
        options, ranks, fair, sink = self.options, self.ranks, self.fair, self.sink
        fits = Fits(rows=rows, shared={"vanilla": {}, "lam": {}})
        rank_list = sorted(set(ranks) | ({self.sweep_rank} if self.do_sweep else set()))
        total = len(rank_list) * int(self.run_vanilla) + len(ranks) * len(fair)
        if self.do_sweep:
            total += sum(options["n_lambdas"] if options["lambdas"] is None else len(_grid(options, name, 1.0)) for name in fair)
        sink.expect(total)
        landmarks = None
        if "khsic" in fair and self.kernel == "nystrom":
            landmarks = _kernels.landmarks(codes, options["khsic_landmarks"], self.config.random_state)
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
            started = time.perf_counter()
            with sink.collect_warnings(method):
                model = FairCPD(rank=rank, method=method, lam=lam, init=init, **self._params(method, rank, gammas.get(rank), self.config.random_state))
                model.fit(X, sensitive_features=codes)
            if not model.converged_:
                unconverged.setdefault(method, set()).add(rank)
            cache[key] = (model, time.perf_counter() - started)
            return cache[key]

        def keep(variant: str, model: FairCPD, seconds: float, lam: float, rank: int) -> None:
            fits.models[(variant, rank)], fits.seconds[(variant, rank)] = model, seconds
            fits.shared["lam"][(variant, rank)] = lam
            sink.progress(variant, rank, seconds)

        for rank in rank_list:
            if "khsic" in fair:
                gammas[rank] = median_gamma(X, rank, self.config.random_state)
            vanilla, seconds = fit("none", 0.0, rank, "svd")
            fits.shared["vanilla"][rank] = vanilla
            if self.run_vanilla:
                keep("vanilla", vanilla, seconds, 0.0, rank)
            for name in fair:
                reference = _sweep.lambda_reference(X, vanilla, codes, name, gammas.get(rank), landmarks)
                if self.do_sweep and rank == self.sweep_rank:
                    # Continuation: each point starts from the previous (smaller-λ) point's solution.
                    init = vanilla.factors_
                    for index, lam in enumerate(_grid(options, name, reference)):
                        model, seconds = fit(name, float(lam), rank, init)
                        init = model.factors_
                        keep(f"{name}{SWEEP_SEPARATOR}{index}", model, seconds, float(lam), rank)
                if rank in ranks:
                    # The default λ; at the sweep rank usually a grid point, whose fit is reused.
                    lam = self._default_lam(reference)
                    keep(name, *fit(name, lam, rank, vanilla.factors_), lam, rank)
            cache = {key: value for key, value in cache.items() if key[2] != rank}
        for method, bad in unconverged.items():
            name = next(v for v, m in VARIANTS.items() if m == method)
            sink.warn(
                f"cpd/{name}: reached n_epochs={options['n_epochs']} before the objective settled (relative change "
                f"> tol) at rank(s) {', '.join(map(str, sorted(bad)))}; raise {term('cpd_epochs')} for tighter fits."
            )
        return fits

    def _fit_replicate(self, rows, X, codes, warm: Fits, seed) -> Fits:
        fits = Fits(rows=rows, shared={"lam": {}})
        rng = np.random.default_rng(seed)
        start = int(rng.integers(2**31 - 1))
        position = np.searchsorted(warm.rows, rows)  # each resampled entity's place in the audit's fit
        landmarks = None
        if "khsic" in self.fair and self.kernel == "nystrom":
            landmarks = _kernels.landmarks(codes, self.options["khsic_landmarks"], start)

        def resampled(model: FairCPD) -> list[np.ndarray]:
            return [model.factors_[0][position]] + [F.copy() for F in model.factors_[1:]]

        for rank in self.ranks:
            if rank in self.replicate_ranks_skipped:
                continue
            gamma = median_gamma(X, rank, start) if "khsic" in self.fair else None
            vanilla = FairCPD(rank=rank, method="none", lam=0.0, init=resampled(warm.shared["vanilla"][rank]), **self._params("none", rank, None, start))
            vanilla.fit(X, sensitive_features=codes)
            if self.run_vanilla:
                fits.models[("vanilla", rank)] = vanilla
            for name in self.fair:
                lam = self._default_lam(_sweep.lambda_reference(X, vanilla, codes, name, gamma, landmarks))
                model = FairCPD(rank=rank, method=name, lam=lam, init=resampled(warm.models[(name, rank)]), **self._params(name, rank, gamma, start))
                fits.models[(name, rank)] = model.fit(X, sensitive_features=codes)
        return fits

    # ------------------------------------------------------------------ measuring
    def measure(self, fits: Fits, rows, out: Recorder, *, heldout=False, replicate=False) -> None:
        X, codes = self.X[rows], self.codes[rows]
        with _kernels.blas_threads():  # the leakage classifiers' products are thin too (MLP: 7–15× faster)
            for (variant, rank), model in fits.models.items():
                if heldout:
                    A, residual, groups = self._heldout(model, X, codes)
                else:
                    A, residual, groups = model.embedding_, model.residual_fit_, model.group_residual_fit_
                out.add(variant, rank, "residual_fit", residual)
                out.add_groups(variant, rank, "residual_fit", self.labels, groups)
                out.add(variant, rank, "orthogonality", orthogonality(A, codes))
                out.add(variant, rank, "nkhsic", nkhsic(A, codes, random_state=self.config.random_state))
                out.add_all(variant, rank, self.representation(A, codes, replicate=replicate, config=self.leak_config))

    def _heldout(self, model: FairCPD, X: np.ndarray, codes: np.ndarray):
        """Embedding, residual fit and per-group residual fits of new entities ``X``: their factor
        rows by least squares given the fitted other factors, normalised as the fit's embedding."""
        A = model.transform(X)
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
