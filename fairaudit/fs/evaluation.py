"""Judging a feature selection as [Xing21] §4.1 does: k-means on the selected columns, repeated.

Each run clusters the rows of ``X[:, selected]`` with k-means (one initialisation per run, run
``r`` seeded with ``random_state + r``) and scores the clustering: ``acc`` (eq. 8) and ``nmi``
(eq. 9) against a ground-truth label when one is given, ``balance`` (eq. 10) and
``proportion`` (eq. 11) against the groups. The mean and standard deviation over runs are
returned (the paper reports 50 runs).
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from .. import metrics
from ..errors import ParameterError


def cluster_scores(
    Z: np.ndarray,
    groups: np.ndarray,
    *,
    n_clusters: int,
    labels: np.ndarray | None = None,
    runs: int = 50,
    random_state: int = 0,
) -> dict[str, float]:
    """Mean and std over ``runs`` k-means clusterings of ``Z`` (rows = samples).

    Returns ``{"acc", "acc_std", "nmi", "nmi_std"}`` (only with ``labels``) and
    ``{"balance", "balance_std", "proportion", "proportion_std"}``.
    """
    Z = np.asarray(Z, dtype=float)
    if Z.ndim == 1:
        Z = Z[:, None]
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, int | np.integer) or not 2 <= n_clusters <= Z.shape[0]:
        raise ParameterError(
            f"the number of clusters must be a whole number from 2 to the number of rows ({Z.shape[0]}), got {n_clusters!r}."
        )
    if isinstance(runs, bool) or not isinstance(runs, int | np.integer) or runs < 1:
        raise ParameterError(f"the number of k-means runs must be a whole number of at least 1, got {runs!r}.")
    found: dict[str, list[float]] = {"acc": [], "nmi": [], "balance": [], "proportion": []}
    distinct = len(np.unique(Z, axis=0)) if Z.shape[0] <= 50000 else Z.shape[0]
    clusters_used = min(n_clusters, distinct)
    for run in range(runs):
        if clusters_used < 2:  # every row identical on the selected columns: one cluster
            assignment = np.zeros(Z.shape[0], dtype=int)
        else:
            model = KMeans(n_clusters=clusters_used, n_init=1, random_state=random_state + run)
            assignment = model.fit_predict(Z)
        if labels is not None:
            found["acc"].append(metrics.clustering_accuracy(labels, assignment))
            found["nmi"].append(metrics.nmi(labels, assignment))
        found["balance"].append(metrics.cluster_balance(assignment, groups))
        found["proportion"].append(metrics.cluster_proportion(assignment, groups))
    out: dict[str, float] = {}
    for name, values in found.items():
        if values:
            mean, spread = float(np.mean(values)), float(np.std(values))
            # the same clustering up to a relabelling scores equal up to rounding (e.g. nmi's
            # 3e-18): report that spread as what it is, none
            out[name] = mean
            out[f"{name}_std"] = 0.0 if spread <= 1e-12 * max(1.0, abs(mean)) else spread
    return out
