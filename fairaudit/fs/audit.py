"""The feature-selection family in an audit: every selector over a sweep of subset sizes.

``rank`` is the number of selected features. Without ``--ranks`` the sweep is 10 %, 20 %, 30 %
and 40 % of the features, as in [Xing21] §4. Records per (variant, rank), following §4.1:
k-means on the selected columns repeated ``kmeans_runs`` times (default 50) →
``balance``/``balance_std``, ``proportion``/``proportion_std`` and, with a ground-truth label,
``acc``/``acc_std`` and ``nmi``/``nmi_std``; the centred kernel alignments of the selection's
kernel with all features (``alignment_data``) and with the groups (``alignment_protected``);
the shared representation metrics of the selected columns (``mmd2``, ``mmd2_rbf``,
``unfairness``, ``unfairness_balanced``); ``seconds`` (the selector's fit). The selected column
names, in selection order, go to ``AuditResult.details["fs"][variant][rank]["selected"]``.

Options (``AuditConfig.options["fs"]``; CLI ``--clusters``, ``--kmeans-runs``):
``n_clusters`` (K; default: the label's number of classes, else the number of groups),
``kmeans_runs``, ``scaling`` (``"minmax"`` default — every feature rescaled to [0, 1], the
range of the paper's data sets; ``"data"`` uses the data's own scaling, which after
standardisation gives every feature variance 1 and makes the variance baseline a tie), and
FUFS's ``alpha``, ``beta``, ``n_sensitive_features``, ``kernel``, ``approximation``,
``exact_max_rows``, ``n_landmarks``, ``max_iter``, ``refine``.
"""

from __future__ import annotations

import time

import numpy as np

from ..audit import AuditConfig, RecordSink, representation_metrics
from ..data import AuditData
from ..errors import ParameterError
from ..vocabulary import term
from ._alignment import EXACT_MAX_ROWS, NYSTROM_LANDMARKS, NystroemRBF, rbf_backend
from .baselines import MCFS, SPEC, LaplacianScore, VarianceSelector
from .evaluation import cluster_scores
from .fufs import FUFS, _resolve_gamma

VARIANTS = ("variance", "lapscore", "spec", "mcfs", "fufs")
"""Variant names in report order (display titles: ``fairaudit.plots.VARIANT_TITLES["fs"]``)."""

FUFS_OPTIONS = ("alpha", "beta", "n_sensitive_features", "kernel", "approximation", "exact_max_rows", "n_landmarks", "max_iter", "refine")
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
    if name == "variance":
        return VarianceSelector(m)
    if name == "lapscore":
        return LaplacianScore(m, n_neighbors=options.get("n_neighbors", 5))
    if name == "spec":
        return SPEC(m, random_state=seed)
    if name == "mcfs":
        return MCFS(m, n_clusters=n_clusters, n_neighbors=options.get("n_neighbors", 5), random_state=seed)
    return FUFS(m, random_state=seed, **{k: options[k] for k in FUFS_OPTIONS if k in options})


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


def audit_fs(data: AuditData, config: AuditConfig, sink: RecordSink) -> None:
    """Run every feature selector over the sweep and write records and details to ``sink``."""
    options = dict(config.options.get("fs", {}))
    scaling = options.get("scaling", "minmax")
    if scaling not in ("minmax", "data"):
        raise ParameterError(f"fs scaling must be 'minmax' or 'data', got {scaling!r}.")
    X = minmax(data.X_raw) if scaling == "minmax" else data.X
    d = data.n_features
    ranks = default_ranks(d) if config.ranks is None else config.resolved_ranks(d)
    codes, group_labels = data.groups.codes, data.groups.labels
    labels = _labels(data)
    K = _n_clusters(data, labels, options, sink)
    runs = options.get("kmeans_runs", KMEANS_RUNS)
    seed = config.random_state
    names = np.asarray(data.feature_names, dtype=object)
    alignment = _alignment_backend(X, options, seed)
    targets = [alignment.target_weights(np.ones(d), d), alignment.target_factor(np.eye(len(group_labels))[codes])]
    chosen = [v for v in VARIANTS if config.wants("fs", v)]
    sink.expect(len(chosen) * len(ranks))
    for name in chosen:
        with sink.collect_warnings(name) as converge:
            proxies = None
            for m in ranks:
                estimator = _make(name, m, K, options, seed)
                if name == "fufs" and proxies is not None:
                    estimator.set_params(proxies=proxies)  # the proxy stage does not depend on m
                started = time.perf_counter()
                estimator.fit(X, sensitive_features=codes)  # the unsupervised baselines ignore the groups
                seconds = time.perf_counter() - started
                order = np.argsort(estimator.ranking_)[:m]
                Z = X[:, order]
                sink.add_all(name, m, cluster_scores(Z, codes, n_clusters=K, labels=labels, runs=runs, random_state=seed))
                mask = np.zeros(d)
                mask[order] = 1.0
                _, _, aligned = alignment.value_grad(mask, m, np.zeros(2), targets, gradient=False)
                sink.add(name, m, "alignment_data", aligned[0])
                sink.add(name, m, "alignment_protected", aligned[1])
                sink.add_all(name, m, representation_metrics(Z, codes, config))
                sink.add(name, m, "seconds", seconds)
                sink.detail(name, m, "selected", [str(n) for n in names[order]])
                if name == "fufs":
                    proxies = estimator.sensitive_support_
                    sink.detail(name, m, "proxies", [str(n) for n in names[estimator.sensitive_support_]])
                    sink.detail(name, m, "kernel", estimator.approximation_)
                    sink.add(name, m, "n_iter", estimator.n_iter_)
                if name == "spec":
                    sink.detail(name, m, "graph", estimator.graph_)
                sink.progress(name, m, seconds)
        if name == "fufs" and getattr(estimator, "approximation_", "").startswith("Nyström"):
            sink.warn(
                f"fs/fufs: {data.n_rows} rows exceed exact_max_rows={options.get('exact_max_rows', EXACT_MAX_ROWS)}, so FUFS "
                f"optimised its kernel alignments through a low-rank approximation ({estimator.approximation_})."
            )
        if converge:
            sink.warn(f"fs/{name}: {len(converge)} convergence warning(s), e.g.: {converge[0].message}")
    if isinstance(alignment, NystroemRBF):
        sink.warn(
            f"fs: the alignment_data / alignment_protected metrics use the {alignment.describe()} "
            f"because the data have more than {options.get('exact_max_rows', EXACT_MAX_ROWS)} rows."
        )
