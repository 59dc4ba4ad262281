"""Judging a feature selection as [Xing21] §4.1 does: k-means on the selected columns, repeated.

"Since the results of K-means depend on initialization, we repeat K-means 50 times and report
the average results." Each run clusters the rows of ``X[:, selected]`` from its own k-means++
start (Arthur & Vassilvitskii 2007) by Lloyd's iterations until no row changes cluster (or the
centres settle within scikit-learn's default tolerance), and is
scored from its cluster × class and cluster × group contingency tables: ``acc`` (eq. 8) and
``nmi`` (eq. 9) against a ground-truth label when one is given, ``balance`` (eq. 10) and
``proportion`` (eq. 11) against the groups. The mean and standard deviation over runs are
returned.

The runs are computed together (ours, measured in ``benchmarks/bench_fs_audit.py``): every
run's centres live in one array and each Lloyd step is one batched distance computation, so the
50 runs cost about as much as a few scikit-learn fits — scikit-learn's ``KMeans`` runs one
start per call and, with its input checks, thread-pool set-up and the per-run metric checks,
took 41 % of the crime audit. Runs are seeded from ``random_state`` (one generator for all).
"""

from __future__ import annotations

import numpy as np

from .. import metrics
from ..errors import ParameterError

MAX_ITER = 300
"""Lloyd iterations per run at most (scikit-learn's default)."""
_BATCH_CELLS = 4_000_000
"""Runs are processed in batches of at most this many (run × row × cluster) distances."""
_SCORED_LABELS = 1_000_000
""":func:`cluster_scores_many` scores the runs of as many matrices at once as hold at most this many
labels (a bootstrap replicate of the default sample: 24 selections × 10 runs × 385 rows, all at
once; the point estimate on 30,000 rows: one selection's 50 runs at a time, as before)."""


def _kmeans_pp(Z: np.ndarray, sq: np.ndarray, K: int, runs: int, rng: np.random.Generator, counts: np.ndarray | None = None) -> np.ndarray:
    """k-means++ starts for ``runs`` runs at once: ``(runs, K, p)`` centres. The first centre is
    a uniform row, each next one a row drawn with probability ∝ its squared distance to the
    nearest centre so far (uniform when every distance is 0: fewer distinct rows than K).

    With ``counts`` (row ``i`` of ``Z`` standing for ``counts[i]`` identical rows, :func:`kmeans_labels`)
    the draws are those over the repeated rows, in their order: a uniform row is a draw among the
    ``Σ counts`` rows mapped to its distinct row, and a row's probability is its count times its
    squared distance."""
    n = Z.shape[0]
    copies = None if counts is None else np.repeat(np.arange(n), counts)  # repeated row → distinct row
    total_rows = n if copies is None else copies.size
    centres = np.empty((runs, K, Z.shape[1]))
    first = rng.integers(0, total_rows, size=runs)
    if copies is not None:
        first = copies[first]
    centres[:, 0] = Z[first]
    nearest = np.maximum(sq[None, :] - 2.0 * centres[:, 0] @ Z.T + sq[first][:, None], 0.0)
    for c in range(1, K):
        weighted = nearest if counts is None else nearest * counts
        totals = weighted.sum(axis=1)
        u = rng.random(runs) * totals
        cumulative = np.cumsum(weighted, axis=1)
        picks = np.sum(cumulative <= u[:, None], axis=1)  # searchsorted(cumulative[r], u[r], side="right"), every run at once
        flat = totals <= 0
        uniform = rng.integers(0, total_rows, size=int(flat.sum()))
        picks[flat] = uniform if copies is None else copies[uniform]
        picks = np.minimum(picks, n - 1)
        centres[:, c] = Z[picks]
        if c + 1 < K:  # the distances to the last centre draw nothing
            distance = np.maximum(sq[None, :] - 2.0 * centres[:, c] @ Z.T + sq[picks][:, None], 0.0)
            np.minimum(nearest, distance, out=nearest)
    return centres


def _nearest(distance: np.ndarray, code) -> np.ndarray:
    """``distance.argmin(axis=1)`` of a ``(runs, K, n)`` array, as ``code`` integers: the first
    cluster among equally near ones, as ``argmin``. One comparison per cluster instead of an
    ``argmin`` along the middle axis, which NumPy runs row by row — measured 60.8 of the 115 ms
    of 50 runs on the credit table's 4,165 rows (K = 2, 39 iterations), against 3 ms. The first
    comparison is the labels themselves, and later ones mark their rows in place (``putmask``): for
    10 runs, two clusters and 600 rows 4.2 µs against 18 µs with a running copy and boolean
    indexing (three clusters 18 against 25 µs), the same labels."""
    K = distance.shape[1]
    if K == 1:
        return np.zeros((distance.shape[0], distance.shape[2]), dtype=code)
    nearest = np.less(distance[:, 1], distance[:, 0]).astype(code)
    if K > 2:
        best = np.minimum(distance[:, 0], distance[:, 1])
        for c in range(2, K):
            np.putmask(nearest, np.less(distance[:, c], best), c)
            np.minimum(best, distance[:, c], out=best)
    return nearest


def kmeans_labels(Z: np.ndarray, n_clusters: int, runs: int, random_state=0, tol: float = 1e-4, counts: np.ndarray | None = None) -> np.ndarray:
    """Cluster labels ``(runs, n)`` of ``runs`` independent k-means fits (k-means++ + Lloyd).

    A run stops when no row changes cluster or, as scikit-learn's ``KMeans``, when its centres
    moved by at most ``tol`` times the mean feature variance (squared distance summed over the
    centres); its labels are then those of the final centres.

    ``counts``: row ``i`` of ``Z`` stands for ``counts[i]`` identical rows (a bootstrap resample
    repeats about a third of its rows), which the fit counts instead of repeating — the same
    k-means as on ``np.repeat(Z, counts, axis=0)`` (the same draws, centres as count-weighted
    means; equal up to the rounding of those sums), on 0.63 of the rows; the labels are those of
    the distinct rows.
    """
    return kmeans_labels_many([Z], n_clusters, runs, random_state, tol, counts)[0]


class _Runs:
    """A batch of k-means runs on one matrix: its k-means++ centres and where its labels go."""

    def __init__(self, Z, source, threshold, centres, out):
        self.Z, self.source, self.threshold, self.centres, self.out = Z, source, threshold, centres, out


def kmeans_labels_many(Zs, n_clusters: int, runs: int, random_state=0, tol: float = 1e-4, counts: np.ndarray | None = None) -> list[np.ndarray]:
    """``[kmeans_labels(Z, …) for Z in Zs]`` (matrices of the same rows): the same labels, bit for
    bit, with the Lloyd steps of the matrices that have as many columns taken together. Every
    product is the one :func:`kmeans_labels` computes for that matrix alone (one per matrix and
    step); the element-wise steps — nearest centre, indicators, means, shifts — run once on every
    matrix's runs together, which saves their per-call cost: the audit measures about 24
    selections of four sizes per bootstrap replicate, each 10 runs of ~16 steps of two dozen
    NumPy calls on arrays of a few thousand entries."""
    K = n_clusters
    weights = None if counts is None else np.asarray(counts, dtype=float)
    rows = {np.shape(Z)[0] for Z in Zs}
    if len(rows) > 1:
        raise ValueError(f"kmeans_labels_many takes matrices of the same rows; got {sorted(rows)} rows")
    labels, batches = [], []
    for Z in Zs:
        Z = np.ascontiguousarray(Z, dtype=float)
        n = Z.shape[0]
        rng = np.random.default_rng(random_state)
        sq = np.einsum("ij,ij->i", Z, Z)
        threshold = tol * float(np.mean(np.var(Z if counts is None else np.repeat(Z, counts, axis=0), axis=0)))
        source = Z if counts is None else Z * weights[:, None]  # each row times its count
        found = np.empty((runs, n), dtype=np.int64)
        labels.append(found)
        batch = max(1, _BATCH_CELLS // max(1, n * K))
        for start in range(0, runs, batch):
            count = min(batch, runs - start)
            batches.append(_Runs(Z, source, threshold, _kmeans_pp(Z, sq, K, count, rng, counts), found[start : start + count]))
    while batches:  # batches with as many columns, at most _BATCH_CELLS distances at once
        p = batches[0].Z.shape[1]
        group, cells, rest = [], 0, []
        for item in batches:
            size = item.centres.shape[0] * K * item.Z.shape[0]
            if item.Z.shape[1] == p and (not group or cells + size <= _BATCH_CELLS):
                group.append(item)
                cells += size
            else:
                rest.append(item)
        _lloyd(group, K, weights)
        batches = rest
    return labels


def _lloyd(batches: list[_Runs], K: int, weights: np.ndarray | None) -> None:
    """Lloyd's steps for every run of ``batches`` (matrices with as many columns), each run until
    it stops (:func:`kmeans_labels`); labels written to each batch's ``out``."""
    n, p = batches[0].Z.shape
    code = np.min_scalar_type(-K)  # labels in the smallest signed type (less memory to compare and copy)
    levels = np.arange(K, dtype=code)[None, :, None]
    owner = np.concatenate([np.full(b.centres.shape[0], i) for i, b in enumerate(batches)])  # each run's batch
    local = np.concatenate([np.arange(b.centres.shape[0]) for b in batches])  # its index there
    threshold = np.array([batches[i].threshold for i in owner])
    C = np.concatenate([b.centres.reshape(-1, p) for b in batches])  # (a·K, p): the runs still iterating
    assigned = np.full((owner.size, n), -1, dtype=code)
    left = np.arange(owner.size)
    for _ in range(MAX_ITER):
        a = left.size
        bounds = np.searchsorted(owner[left], np.arange(len(batches) + 1))  # each batch's runs: a range of the arrays
        spans = [(i, bounds[i], bounds[i + 1]) for i in range(len(batches)) if bounds[i + 1] > bounds[i]]
        # ‖z − c‖² up to the row's own ‖z‖², which does not change the nearest centre: one GEMM per matrix
        distance = np.empty((a * K, n))
        for i, lo, hi in spans:
            np.matmul(-2.0 * C[lo * K : hi * K], batches[i].Z.T, out=distance[lo * K : hi * K])  # the factor 2 is exact
        distance = distance.reshape(a, K, n)
        distance += np.einsum("ij,ij->i", C, C).reshape(a, K, 1)
        new = _nearest(distance, code)  # (a, n)
        unchanged = np.all(new == assigned, axis=1)
        # new centres: per (run, cluster) means by one batched product with the indicators
        indicators = (new[:, None, :] == levels).astype(float)  # (a, K, n)
        counts_in = indicators.sum(axis=2).ravel() if weights is None else (indicators @ weights).ravel()
        sums = np.empty((a, K, p))
        for i, lo, hi in spans:  # Σ [i ∈ c] (w_i z_i): the terms of Σ ([i ∈ c] w_i) z_i, each rounded once, in the same order
            np.matmul(indicators[lo:hi], batches[i].source, out=sums[lo:hi])
        filled = counts_in > 0
        updated = sums.reshape(-1, p) / np.where(filled, counts_in, 1.0)[:, None]
        if not filled.all():  # an emptied cluster keeps its centre
            updated[~filled] = C[~filled]
        shift = np.sum((updated - C) ** 2, axis=1).reshape(a, K).sum(axis=1)
        done = unchanged | (shift <= threshold)
        C, assigned = updated, new
        if not done.any():
            continue
        settled = done & ~unchanged
        for i, lo, hi in spans if settled.any() else ():  # settled by tol: label by the final centres
            runs_i = lo + np.flatnonzero(settled[lo:hi])
            if runs_i.size:
                final = C.reshape(a, K, p)[runs_i].reshape(-1, p)
                d2 = (final @ batches[i].Z.T) * -2.0 + np.einsum("ij,ij->i", final, final)[:, None]
                assigned[runs_i] = _nearest(d2.reshape(-1, K, n), code)
        for j in np.flatnonzero(done):
            batches[owner[left[j]]].out[local[left[j]]] = assigned[j]
        keep = ~done
        left, threshold = left[keep], threshold[keep]
        if left.size == 0:
            return
        C, assigned = C.reshape(a, K, p)[keep].reshape(-1, p), assigned[keep]
    for j, run in enumerate(left):
        batches[owner[run]].out[local[run]] = assigned[j]


def best_kmeans(Z: np.ndarray, n_clusters: int, runs: int = 10, random_state=0) -> np.ndarray:
    """The labels of the run with the least inertia among ``runs`` (scikit-learn's ``n_init``)."""
    Z = np.asarray(Z, dtype=float)
    labels = kmeans_labels(Z, n_clusters, runs, random_state)
    inertia = []
    for assignment in labels:
        counts = np.bincount(assignment, minlength=n_clusters)
        sums = np.zeros((n_clusters, Z.shape[1]))
        np.add.at(sums, assignment, Z)
        # Σ‖z − μ_c‖² = Σ‖z‖² − Σ_c ‖Σ_{z∈c} z‖² / |c|
        inertia.append(float(np.sum(Z * Z) - np.sum(np.sum(sums**2, axis=1)[counts > 0] / counts[counts > 0])))
    return labels[int(np.argmin(inertia))]


def contingency_tables(labels: np.ndarray, codes: np.ndarray, n_clusters: int, n_codes: int, counts: np.ndarray | None = None) -> np.ndarray:
    """``(runs, K, k)`` counts of rows per (cluster, code) for each run's labels (each row counted
    ``counts`` times when given)."""
    runs = labels.shape[0]
    index = labels * n_codes + np.asarray(codes)[None, :] + (np.arange(runs) * n_clusters * n_codes)[:, None]
    size = runs * n_clusters * n_codes
    if counts is None:
        return np.bincount(index.ravel(), minlength=size).reshape(runs, n_clusters, n_codes)
    found = np.bincount(index.ravel(), weights=np.tile(np.asarray(counts, dtype=float), runs), minlength=size)
    return np.rint(found).astype(np.int64).reshape(runs, n_clusters, n_codes)  # whole numbers, summed exactly


def _check(value, name: str, low: int, high: int | None = None) -> int:
    bad = isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low or (high is not None and value > high)
    if bad:
        span = f"from {low} to the number of rows ({high})" if high is not None else f"of at least {low}"
        raise ParameterError(f"the number of {name} must be a whole number {span}, got {value!r}.")
    return int(value)


def _per_table(metric, tables: np.ndarray) -> list[float]:
    """``[metric(t) for t in tables]``, each distinct table computed once: k-means runs mostly end
    in the same few clusterings (the 10 runs of a bootstrap replicate's selection in one to three
    on the default sample, and selections that keep the same columns end in the same ones), and
    the metrics — a Hungarian matching, entropies — were 20 ms of a replicate's 70 ms of
    measurements."""
    found: dict[bytes, float] = {}
    values = []
    for table in tables:
        key = table.tobytes()
        if key not in found:
            found[key] = metric(table)
        values.append(found[key])
    return values


def _codes(values) -> np.ndarray:
    """``values`` as codes ``0 … k−1`` in sorted order of the values (``np.unique``'s inverse);
    codes that are already ``0 … k−1``, every one present, are taken as they are (the audit
    passes its group codes for every selection)."""
    values = np.asarray(values)
    if values.dtype.kind in "iu" and values.size and values.min() >= 0 and np.bincount(values).all():
        return values
    return np.unique(values, return_inverse=True)[1]


def cluster_scores(Z: np.ndarray, groups: np.ndarray, **options) -> dict[str, float]:
    """Mean and std over ``runs`` k-means clusterings of ``Z`` (rows = samples): the one matrix
    of :func:`cluster_scores_many`, with its keyword options (``n_clusters``, ``labels``, ``runs``,
    ``random_state``, ``counts``)."""
    return cluster_scores_many([Z], groups, **options)[0]


def cluster_scores_many(
    Zs,
    groups: np.ndarray,
    *,
    n_clusters: int,
    labels: np.ndarray | None = None,
    runs: int = 50,
    random_state: int = 0,
    counts: np.ndarray | None = None,
    shares: bool = False,
) -> list[dict[str, float]]:
    """For each matrix of ``Zs`` (matrices of the same rows, e.g. selections of one data set;
    rows = samples), the mean and std over ``runs`` k-means clusterings of its rows into
    ``n_clusters``; the k-means of all of them fitted together (:func:`kmeans_labels_many`: each
    matrix's own labels).

    ``groups`` and ``labels`` are integer codes (``0 … k−1``) or any values. ``counts``: row ``i``
    stands for ``counts[i]`` identical rows, all of ``groups[i]`` and ``labels[i]`` (a bootstrap
    resample's rows, each kept once; :func:`kmeans_labels`). Returns per matrix
    ``{"acc", "acc_std", "nmi", "nmi_std"}`` (only with ``labels``) and
    ``{"balance", "balance_std", "proportion", "proportion_std"}``; with ``shares``, also
    ``"cluster_share"``: each group's share of its worst cluster over its share of the rows, the
    mean over the runs (:func:`fairaudit.metrics.group_shares_from_tables`), a tuple in the order
    of the group codes.
    """
    Zs = [np.asarray(Z, dtype=float) for Z in Zs]
    Zs = [Z[:, None] if Z.ndim == 1 else Z for Z in Zs]
    if not Zs:
        return []
    K = _check(n_clusters, "clusters", 2, Zs[0].shape[0] if counts is None else int(np.sum(counts)))
    runs = _check(runs, "k-means runs", 1)
    group_codes = _codes(groups)
    label_codes = None if labels is None else _codes(labels)
    per_chunk = max(1, _SCORED_LABELS // (runs * Zs[0].shape[0]))  # labels of this many selections held at once
    out = []
    for start in range(0, len(Zs), per_chunk):
        chunk = Zs[start : start + per_chunk]
        assignments = np.concatenate(kmeans_labels_many(chunk, K, runs, random_state, counts=counts))  # (selections · runs, n)
        out += _scores(assignments, len(chunk), runs, group_codes, label_codes, K, counts, shares)
    return out


def _scores(assignments, selections: int, runs: int, group_codes, label_codes, K: int, counts, shares: bool = False) -> list[dict[str, float]]:
    """Each selection's means and spreads over its runs of the metrics of each run's clustering
    (``assignments``: the selections' runs one after the other), every table at once; with
    ``shares`` each group's mean share of its worst cluster (relative to its share of the rows)."""
    found: dict[str, np.ndarray] = {}
    tables = contingency_tables(assignments, group_codes, K, int(group_codes.max()) + 1, counts)
    found["balance"], found["proportion"] = metrics.balance_from_tables(tables), metrics.proportion_from_tables(tables)
    per_group = metrics.group_shares_from_tables(tables).reshape(selections, runs, -1).mean(axis=1) if shares else None
    if label_codes is not None:
        tables = contingency_tables(assignments, label_codes, K, int(label_codes.max()) + 1, counts)
        found["acc"] = np.array(_per_table(metrics.accuracy_from_table, tables))
        found["nmi"] = np.array(_per_table(lambda t: metrics.nmi_from_table(t[t.sum(axis=1) > 0]), tables))
    names = [name for name in ("acc", "nmi", "balance", "proportion") if name in found]
    values = np.stack([found[name].reshape(selections, runs) for name in names], axis=1)  # (selections, metrics, runs)
    means, spreads = values.mean(axis=2), values.std(axis=2)  # each row as np.mean / np.std of it
    out = []
    for mean_row, spread_row in zip(means.tolist(), spreads.tolist(), strict=True):
        scores: dict[str, float] = {}
        for name, mean, spread in zip(names, mean_row, spread_row, strict=True):
            # the same clustering up to a relabelling scores equal up to rounding (e.g. nmi's
            # 3e-18): report that spread as what it is, none
            scores[name] = mean
            scores[f"{name}_std"] = 0.0 if spread <= 1e-12 * max(1.0, abs(mean)) else spread
        if per_group is not None:
            scores["cluster_share"] = tuple(float(x) for x in per_group[len(out)])
        out.append(scores)
    return out
