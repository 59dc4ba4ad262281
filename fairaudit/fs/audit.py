"""The feature-selection family in an audit: every selector over a sweep of subset sizes.

``rank`` is the number of selected features. Without ``--ranks`` the sweep is 10 %, 20 %, 30 %
and 40 % of the features, as in [Xing21] §4. Records per (variant, rank), following §4.1:
k-means on the selected columns repeated ``kmeans_runs`` times (default 50) →
``balance``/``balance_std``, ``proportion``/``proportion_std`` and, with a ground-truth label,
``acc``/``acc_std`` and ``nmi``/``nmi_std``; the centred kernel alignments of the selection's
kernel with all features (``alignment_data``) and with the groups (``alignment_protected``);
``relative_balance`` (``balance`` over the smallest group's share: 1 is parity); the shared
representation metrics of the selected columns (``mmd2``, ``mmd2_rbf`` and the leakage test's
records); ``seconds`` (the selector's fit). The selected column
names, in selection order, go to ``AuditResult.details["fs"][variant][rank]["selected"]``; for
FUFS also which formulation ran (``formulation``), its kernel computation (``kernel``) and the
features its decomposition indicator / proxy stage singled out (``proxies``).

One fit per selector serves the whole sweep wherever the selector's ranking does not depend on
the subset size (variance, Laplacian score, SPEC, UDFS, NDFS, FUFS as printed) or where the
smaller sizes come out of the same fit (MCFS's LARS paths); ``seconds`` is then that fit's time
at every size. FUFS with ``formulation="alignment"`` optimises for one size and is fitted per
size (its proxy stage once).

Options (``AuditConfig.options["fs"]``; CLI ``--clusters``, ``--kmeans-runs``,
``--fufs-formulation``, ``--fufs-alpha``, ``--fufs-beta``): ``n_clusters`` (K; default: the
label's number of classes, else the number of groups), ``kmeans_runs``, ``scaling``
(``"minmax"`` default — every feature rescaled to [0, 1], the range of the paper's data sets;
``"data"`` uses the data's own scaling, which after standardisation gives every feature variance
1 and makes the variance baseline a tie), ``n_neighbors`` of the graph-based baselines, and
FUFS's ``formulation``, ``alpha``, ``beta``, ``proxy_weight``, ``n_sensitive_features``,
``kernel``, ``approximation``, ``exact_max_rows``, ``n_landmarks``, ``max_iter``, ``refine``.
"""

from __future__ import annotations

import time

import numpy as np

from ..audit import AuditConfig, FamilyAudit, Fits, Recorder, RecordSink
from ..data import AuditData
from ..errors import ParameterError
from ..linalg import blas_threads
from ..parallel import map_threads
from ..verdicts import DisparityMetric
from ..vocabulary import term
from ._alignment import EXACT_MAX_ROWS, NYSTROM_LANDMARKS, NystroemRBF, rbf_backend
from ._selector import SweepSelection
from .baselines import MCFS, NDFS, SPEC, UDFS, LaplacianScore, VarianceSelector
from .evaluation import cluster_scores_many
from .fufs import FORMULATIONS, FUFS, _resolve_gamma

VARIANTS = ("variance", "lapscore", "spec", "mcfs", "udfs", "ndfs", "fufs")
"""Variant names in report order (display titles: ``fairaudit.plots.VARIANT_TITLES["fs"]``)."""

FUFS_OPTIONS = (
    "formulation", "alpha", "beta", "proxy_weight", "n_sensitive_features", "kernel", "approximation",
    "exact_max_rows", "n_landmarks", "max_iter", "refine",
)
DEFAULT_FORMULATION = "paper"
"""The audit runs FUFS as printed ([Xing21] eq. 6) unless ``options["fs"]["formulation"]`` says
otherwise (``docs/fs.md`` compares the two on the paper's data)."""
FORMULATION_NAMES = {
    "paper": "as printed (Xing et al. 2021, eq. 6: unnormalised traces, joint m and g, ℓ1 β, box)",
    "alignment": "ours (normalised alignment, capped simplex, proxy stage, swap refinement)",
}
DEFAULT_FRACTIONS = (0.1, 0.2, 0.3, 0.4)
KMEANS_RUNS = 50
"""k-means runs per selection (mean and std reported), as the FUFS paper; the CLI and the
dashboard start from this value."""


def default_ranks(n_features: int) -> tuple[int, ...]:
    """10 %, 20 %, 30 %, 40 % of the features (rounded, at least 1, distinct)."""
    return tuple(sorted({max(1, round(f * n_features)) for f in DEFAULT_FRACTIONS}))


def minmax(X: np.ndarray) -> np.ndarray:
    """Each column rescaled to [0, 1]; a constant column becomes 0."""
    low, high = X.min(axis=0), X.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    return (X - low) / span


def _make(name: str, m: int, n_clusters: int, options: dict, seed: int):
    neighbours = options.get("n_neighbors", 5)
    if name == "variance":
        return VarianceSelector(m)
    if name == "lapscore":
        return LaplacianScore(m, n_neighbors=neighbours)
    if name == "spec":
        return SPEC(m, random_state=seed)
    if name == "mcfs":
        return MCFS(m, n_clusters=n_clusters, n_neighbors=neighbours, random_state=seed)
    if name == "udfs":
        return UDFS(m, n_clusters=n_clusters, n_neighbors=neighbours)
    if name == "ndfs":
        return NDFS(m, n_clusters=n_clusters, n_neighbors=neighbours, random_state=seed)
    fufs = {k: options[k] for k in FUFS_OPTIONS if k in options}
    fufs.setdefault("formulation", DEFAULT_FORMULATION)
    if fufs["formulation"] not in FORMULATIONS:
        raise ParameterError(
            f"the FUFS formulation must be one of {', '.join(FORMULATIONS)}; got {fufs['formulation']!r}. "
            f"Choose {term('fs_formulation', 'paper')} or {term('fs_formulation', 'alignment')}."
        )
    return FUFS(m, random_state=seed, **fufs)


def _one_fit_serves_every_size(name: str, options: dict) -> bool:
    return name != "fufs" or options.get("formulation", DEFAULT_FORMULATION) == "paper"


def _labels(data: AuditData) -> np.ndarray | None:
    if data.label is None:
        return None
    _, codes = np.unique(np.asarray(data.label).astype(str), return_inverse=True)
    return codes


def _n_clusters(data: AuditData, labels, options: dict, sink: RecordSink) -> int:
    K = options.get("n_clusters")
    if K is None:
        if labels is not None:
            K = int(labels.max()) + 1
        else:
            K = max(2, data.groups.n_groups)
            sink.warn(
                f"fs: no ground-truth label and no cluster count given; k-means uses K = {K} clusters "
                f"(the number of groups). Set {term('label')} or {term('fs_clusters')} to choose."
            )
    if isinstance(K, bool) or not isinstance(K, int | np.integer) or not 2 <= K <= data.n_rows:
        raise ParameterError(
            f"{term('fs_clusters')} must be a whole number from 2 to the number of rows ({data.n_rows}), got {K!r}."
        )
    return int(K)


def _alignment_backend(X: np.ndarray, options: dict, seed: int):
    return rbf_backend(
        X,
        _resolve_gamma("scale", X),
        exact_max_rows=options.get("exact_max_rows", EXACT_MAX_ROWS),
        n_landmarks=options.get("n_landmarks", NYSTROM_LANDMARKS),
        random_state=seed,
    )


THREADS = 1
"""BLAS and OpenMP threads while the FS audit runs. Its products are thin (n × d with small d)
and scikit-learn's k-NN graph and KMeans use OpenMP: on the shared two-core machine the default
sample's audit took 5.5 s with the libraries' default threads and 2.1 s with one (same process,
load average 10). Set through the cached controller (:func:`fairaudit.linalg.blas_threads`): a
fresh ``threadpool_limits`` reads the loaded libraries (2–4 ms), twice per bootstrap replicate."""


def measure_threads(alignment) -> int | None:
    """Threads measuring the selections (:func:`fairaudit.parallel.map_threads`; ``None``: its
    default, two): two with the Nyström alignments, whose products are large enough to run outside
    the GIL, one with the exact ones. Measured on resamples of the credit table's rows (two cores,
    load 2.3–2.5, medians of six replicates' measurements): 1,500 rows (exact) 0.118 s on one thread
    and 0.115 s on two, 2,500 rows (exact) 0.307 against 0.339 s, 3,500 rows (Nyström) 0.480 against
    0.421 s; on the default sample (600 rows) a replicate took 0.095–0.103 s on one thread against
    0.118–0.127 s on two — a selection's measurement there is 1–3 ms of short NumPy calls that hold
    the GIL. (Threads used to start at 2,000 rows, whatever the alignments' kernel.)"""
    return None if isinstance(alignment, NystroemRBF) else 1


REPLICATE_KMEANS_RUNS = 10
"""k-means runs per selection inside a bootstrap replicate (the audit itself uses
``kmeans_runs``, default 50). The cluster metrics are means over runs: fewer runs give each
replicate a little more k-means noise, which widens the intervals (never narrows them), at a
fifth of the cost — the 50 runs were most of a replicate's time."""


class FSAudit(FamilyAudit):
    """The feature-selection family's side of the audit protocol
    (:class:`fairaudit.audit.FamilyAudit`). A fit is the selected columns of every selector and
    size; a measurement clusters and aligns those columns on the rows it is given (the fit's
    rows, resampled rows, or held-out rows).

    Per group, ``cluster_share``: the group's share of its worst k-means cluster over its share of
    the rows (the mean over the runs; 1 is parity) — what the cluster-balance verdict judges, group
    by group (:func:`fairaudit.verdicts.judge_balance`). Besides the family's metrics,
    ``relative_balance`` = ``balance`` / (the smallest group's share of the rows): 1 when the least-represented group is as present in its worst cluster as
    in the data, 0 when some cluster lacks a group entirely — the parity scale of the ``gap``
    verdict (``balance`` itself cannot exceed the smallest share, so its parity depends on the
    group sizes). ``*_std`` (the spread over k-means runs, fewer runs in a replicate) get no
    interval.
    """

    method = "fs"
    parities = (DisparityMetric("cluster_share", parity=1.0),)

    def __init__(self, data: AuditData, config: AuditConfig, sink: RecordSink):
        super().__init__(data, config, sink)
        self.options = options = dict(config.options.get("fs", {}))
        scaling = options.get("scaling", "minmax")
        if scaling not in ("minmax", "data"):
            raise ParameterError(f"fs scaling must be 'minmax' or 'data', got {scaling!r}.")
        self.X = minmax(data.X_raw) if scaling == "minmax" else data.X
        d = data.n_features
        self.ranks = default_ranks(d) if config.ranks is None else config.resolved_ranks(d)
        self.codes, self.labels = data.groups.codes, tuple(data.groups.labels)
        self.truth = _labels(data)
        self.K = _n_clusters(data, self.truth, options, sink)
        self.runs = options.get("kmeans_runs", KMEANS_RUNS)
        self.names = np.asarray(data.feature_names, dtype=object)
        self.chosen = self.chosen_variants(VARIANTS)
        self.not_bootstrapped = {
            **self.not_bootstrapped,
            **{f"{m}_std": f"the spread of {m} over k-means runs (a replicate runs fewer)" for m in ("acc", "nmi", "balance", "proportion")},
        }

    @property
    def active(self) -> bool:
        return bool(self.chosen)

    def fit(self, rows, *, warm=None, replicate=False, seed=None) -> Fits:
        """Every selector at every size on ``rows``. A replicate draws its random starts (the
        spectral embeddings' start vectors, NDFS's k-means labels, FUFS's row sample, the k-means
        runs of :meth:`measure`) as the audit did, from the audit's seed: it repeats the audit's
        procedure on the resample rather than drawing new starts, whose effect :meth:`restart`
        measures apart. FUFS as printed (projected gradient on eq. 6) starts from the audit's
        ``(m, g)`` (``warm``, issue 23: the sampling variability of this solution), which on the
        credit table settles in one iteration instead of about ten (docs/fs.md, fifth pass)."""
        return self._fit(rows, self.config.random_state, replicate, warm=warm if replicate else None)

    restarts = 3
    restart_reason = (
        "each restart refits every selector and repeats the k-means runs with another seed (the spectral embeddings' "
        "start vectors, NDFS's k-means labels, FUFS's row sample or landmarks, the k-means starts)"
    )

    def restart(self, fits: Fits, rows, seed) -> Fits:
        """The audit's procedure on its rows with every random start drawn from ``seed``."""
        drawn = int(np.random.default_rng(seed).integers(2**31 - 1))
        refits = self._fit(rows, drawn, replicate=True)
        refits.shared["kmeans_seed"] = drawn
        return refits

    def restart_seconds(self, fits: Fits) -> float:
        """One fit per selector where it serves every size: its time once."""
        return float(sum({id(fits.models[key]): seconds for key, seconds in fits.seconds.items()}.values()))

    def _fit(self, rows, seed: int, replicate: bool, warm: Fits | None = None) -> Fits:
        X, codes = self.X[rows], self.codes[rows]
        fits = Fits(rows=rows, shared={"order": {}})
        if not replicate:
            self.sink.expect(len(self.chosen) * len(self.ranks))
        with blas_threads(THREADS, user_api=None):
            for name in self.chosen:
                with self.sink.collect_warnings(name, forward=() if replicate else UserWarning) as converge:
                    start = _warm_start(name, warm, self.options)
                    for m, estimator, order, seconds in _selections(name, self.ranks, X, codes, self.K, self.options, seed, start):
                        fits.models[(name, m)], fits.seconds[(name, m)] = estimator, seconds
                        fits.shared["order"][(name, m)] = order
                        if not replicate:
                            self._details(name, m, estimator, order)
                            self.sink.progress(name, m, seconds)
                if replicate:
                    continue
                if name == "fufs" and getattr(estimator, "approximation_", "").startswith(("Nyström", "exact RBF kernels on a")):
                    self.sink.warn(f"fs/fufs: the data have {len(rows)} rows, so FUFS computed its kernels with an approximation "
                                   f"({estimator.approximation_}).")
                if converge:
                    self.sink.warn(f"fs/{name}: {len(converge)} convergence warning(s), e.g.: {converge[0].message}")
        return fits

    def _details(self, name: str, m: int, estimator, order) -> None:
        self.sink.detail(name, m, "selected", [str(n) for n in self.names[order]])
        if name == "fufs":
            self.sink.detail(name, m, "formulation", FORMULATION_NAMES[estimator.formulation])
            self.sink.detail(name, m, "proxies", [str(n) for n in self.names[_proxies(estimator, m)]])
            self.sink.detail(name, m, "kernel", estimator.approximation_)
        if name == "spec":
            self.sink.detail(name, m, "graph", estimator.graph_)

    def measure(self, fits: Fits, rows, out: Recorder, *, heldout=False, replicate=False) -> None:
        """Every distinct selection measured once: selectors that keep the same columns in the same
        order at a size get the same measurements, which are pure functions of the selected columns
        (on the 4,165-row credit table 4 of the 28 selections repeat another's; on the default
        sample's bootstrap replicates 24.5 of 28 are distinct). The alignments depend on the *set*
        of columns only and are shared by selections that keep it in another order (21.7 sets per
        replicate there); k-means is not shared so: on discrete columns its distances tie, and the
        column order decides the ties by rounding (credit: a bootstrap replicate's FUFS and variance
        selections {0, 1} gave different balances). The k-means runs and alignments on two threads
        (:func:`fairaudit.parallel.map_threads`), the leakage tests and RBF MMD² of every distinct
        selection together (:func:`fairaudit.audit.representations_metrics`: a selector's sizes are
        the leading columns of its largest selection, tested in one pass). Records are written in
        the fits' order."""
        X, codes = self.X[rows], self.codes[rows]
        orders = {key: tuple(int(j) for j in fits.shared["order"][key]) for key in fits.models}
        distinct = {}  # each distinct selection → the first selector that made it (its lineage)
        for (name, _), order in orders.items():
            distinct.setdefault(order, name)
        sets = list(dict.fromkeys(frozenset(order) for order in distinct))
        runs = min(self.runs, REPLICATE_KMEANS_RUNS) if replicate else self.runs
        with blas_threads(THREADS, user_api=None):
            alignment = _alignment_backend(X, self.options, self.config.random_state)
            threads = measure_threads(alignment) if self.inner_threads is None else self.inner_threads
            aligned = dict(zip(sets, map_threads(self._aligner(alignment, X, codes, announce=not (replicate or heldout)), sets, threads), strict=True))
            parts = [list(distinct)] if threads == 1 or len(distinct) < 2 else [list(distinct)[i::2] for i in range(2)]  # a batch per thread
            clusterer = self._clusterer(rows, runs, fits.shared.get("kmeans_seed", self.config.random_state))
            scores = {order: found for part, results in zip(parts, map_threads(clusterer, parts, threads), strict=True)
                      for order, found in zip(part, results, strict=True)}
            representations = [X[:, list(order)] for order in distinct]
            shared = self.representations(representations, codes, replicate=replicate, lineages=list(distinct.values()))
        smallest_share = np.bincount(codes, minlength=len(self.labels)).min() / len(codes)
        measured = {}
        per_group = {}
        for order, extra in zip(distinct, shared, strict=True):
            found = dict(scores[order])
            per_group[order] = found.pop("cluster_share")
            data, protected = aligned[frozenset(order)]
            measured[order] = [
                *found.items(),
                ("relative_balance", found["balance"] / smallest_share),
                ("alignment_data", data),
                ("alignment_protected", protected),
                *extra.items(),
            ]
        for (name, m), order in orders.items():
            for metric, value in measured[order]:
                out.add(name, m, metric, value)
            if len(per_group[order]) == len(self.labels):  # every group among the rows (a resample's, the held-out part's)
                out.add_groups(name, m, "cluster_share", self.labels, per_group[order])

    def representations_of(self, fits: Fits, rows, *, heldout: bool) -> dict:
        """Each selection's columns of ``rows`` (selectors that keep the same columns in the same
        order share one array)."""
        X = self.X[rows]
        columns: dict[tuple, np.ndarray] = {}
        found = {}
        for key in fits.models:
            order = tuple(int(j) for j in fits.shared["order"][key])
            found[key] = columns.setdefault(order, X[:, list(order)])
        return found

    def _aligner(self, alignment, X: np.ndarray, codes: np.ndarray, *, announce: bool):
        """``columns ↦ (alignment_data, alignment_protected)`` of a set of columns on the rows ``X``:
        the centred alignments of the selection's RBF kernel with the kernel of every feature and
        with the groups' (``alignment``: exact, or Nyström above ``exact_max_rows``, which
        ``announce`` warns of)."""
        d = X.shape[1]
        if announce and isinstance(alignment, NystroemRBF):
            self.sink.warn(
                f"fs: the alignment_data / alignment_protected metrics use the {alignment.describe()} "
                f"because the data have more than {self.options.get('exact_max_rows', EXACT_MAX_ROWS)} rows."
            )
        targets = [alignment.target_weights(np.ones(d), d), alignment.target_factor(np.eye(len(self.labels))[codes])]

        def align(columns: frozenset) -> tuple[float, float]:
            mask = np.zeros(d)
            mask[list(columns)] = 1.0
            found = alignment.alignments(mask, len(columns), targets)
            return found[0], found[1]

        return align

    def _clusterer(self, rows: np.ndarray, runs: int, seed: int):
        """``[order, …] ↦ [cluster_scores, …]`` of the selected columns (in each order) on ``rows``,
        fitted together (:func:`cluster_scores_many`): a resample's repeated rows clustered once
        with their counts."""
        once, counts = np.unique(rows, return_counts=True)
        if once.size == len(rows) or np.any(np.diff(rows) < 0):  # counted in the rows' order: a resample's are sorted
            once, counts = rows, None
        X, codes = self.X[once], self.codes[once]
        truth = None if self.truth is None else self.truth[once]

        def cluster(orders: list[tuple[int, ...]]) -> list[dict[str, float]]:
            return cluster_scores_many(
                [X[:, list(order)] for order in orders], codes, n_clusters=self.K, labels=truth, runs=runs,
                random_state=seed, counts=counts, shares=True,
            )

        return cluster

    def facts(self, fits: Fits, out: Recorder) -> None:
        for (name, m), estimator in fits.models.items():
            out.add(name, m, "seconds", fits.seconds[(name, m)])
            if name == "fufs":
                out.add(name, m, "n_iter", estimator.n_iter_)

    def models_of(self, fits: Fits) -> dict[tuple[str, int], object]:
        """Each size's own selection (:class:`SweepSelection`: that size's columns in order), not
        the fitted selector, which one fit may share with every size of the sweep."""
        return {(name, m): SweepSelection(estimator, fits.shared["order"][(name, m)]).fit() for (name, m), estimator in fits.models.items()}


def audit_fs(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Run every feature selector over the sweep and write records and details to ``sink``
    (:func:`fairaudit.audit.run_family` on an :class:`FSAudit`)."""
    from ..audit import run_family

    run_family(FSAudit(data, config, sink))


def _warm_start(name: str, warm: Fits | None, options: dict) -> np.ndarray | None:
    """FUFS's start ``(m, g)`` from the audit's fit (:meth:`FSAudit.fit`), for the formulation as
    printed; ``None`` for every other selector (their starts are the audit's procedure's)."""
    if warm is None or name != "fufs" or not _one_fit_serves_every_size(name, options):
        return None
    fitted = next((estimator for (variant, _), estimator in warm.models.items() if variant == name), None)
    return None if fitted is None else np.concatenate([fitted.scores_, fitted.sensitive_scores_])


def _selections(name: str, ranks, X, codes, K: int, options: dict, seed: int, start: np.ndarray | None = None):
    """``(m, estimator, selected columns in order, fit seconds)`` for every size of the sweep,
    with one fit wherever it serves every size (module docstring); ``start``: FUFS's
    (:func:`_warm_start`)."""
    if _one_fit_serves_every_size(name, options):
        estimator = _make(name, max(ranks), K, options, seed)
        if start is not None:
            estimator.set_params(init=start)
        started = time.perf_counter()
        estimator.fit(X, sensitive_features=codes)  # the unsupervised baselines ignore the groups
        seconds = time.perf_counter() - started
        for m in ranks:
            yield m, estimator, estimator.ranking_for(m)[:m], seconds
        return
    proxies = None
    for m in ranks:
        estimator = _make(name, m, K, options, seed)
        if proxies is not None:
            estimator.set_params(proxies=proxies)  # the proxy stage does not depend on m
        started = time.perf_counter()
        estimator.fit(X, sensitive_features=codes)
        seconds = time.perf_counter() - started
        proxies = estimator.sensitive_support_
        yield m, estimator, np.argsort(estimator.ranking_)[:m], seconds


def _proxies(estimator: FUFS, m: int) -> np.ndarray:
    """The features FUFS singled out as carrying the protected attribute: the ``m`` first by the
    decomposition indicator ``g`` (paper; [Xing21] Table 6 compares them with the selection at
    the same size) or the proxy stage's (alignment)."""
    if estimator.formulation == "paper":
        return np.argsort(estimator.sensitive_ranking_, kind="stable")[:m]
    return np.flatnonzero(estimator.sensitive_support_)
