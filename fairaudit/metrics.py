"""Metric functions, each exactly as its paper defines it.

Conventions: ``X`` is already centred by the global mean (the PCA family's convention, Samadi
et al. 2018 §3); ``P`` is the learned linear map with reconstruction ``X P`` (an ``n × n``
matrix or a :class:`~fairaudit.linalg.LowRankMap`); ``groups`` is a 1-D array of group codes
``0 … k−1`` (see :func:`fairaudit.groups.encode_groups`); ``Z`` is a representation (one row
per sample), e.g. ``X P`` or its coordinates.

References
----------
[Samadi18] S. Samadi, U. Tantipongpipat, J. Morgenstern, M. Singh, S. Vempala. "The Price of
    Fair PCA: One Extra Dimension". NeurIPS 2018.
[Rathore25] V. Rathore, N. Manwani. "Achieving Fair PCA Using Joint Eigenvalue
    Decomposition". arXiv:2502.16933, 2025.
[Lee22] J. Lee, G. Kim, M. Olfat, M. Hasegawa-Johnson, C. D. Yoo. "Fast and Efficient
    MMD-based Fair PCA via Optimization over Stiefel Manifold". AAAI 2022.
[Gretton12] A. Gretton et al. "A Kernel Two-Sample Test". JMLR 13, 2012.
[Kim24] K. Kim, A. Gittens. "Learning fair canonical polyadical decompositions using a kernel
    independence criterion". 2024.
[Xing21] X. Xing, H. Liu, C. Chen, J. Li. "Fairness-Aware Unsupervised Feature Selection".
    arXiv:2106.02216, 2021.
"""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
from scipy.spatial.distance import cdist, pdist

from .linalg import as_map

# ---------------------------------------------------------------- reconstruction (PCA family)


def error(A: np.ndarray, P) -> float:
    """Average reconstruction error ``‖A − A P‖²_F / m`` of the ``m`` rows of ``A``.

    [Samadi18] §3 (reconstruction error of a group under the map ``P``).
    """
    A = np.asarray(A, dtype=float)
    projection = as_map(P)
    # With P = U diag(w) Uᵀ (U orthonormal): ‖A − AP‖² = ‖A‖² − Σ_j (2w_j − w_j²) ‖A u_j‖²,
    # which needs A U (m × r) instead of the m × n reconstruction.
    along = A @ projection.basis
    w = projection.weights
    captured = float(np.sum((along * along) @ (2 * w - w * w)))
    return max(float(np.sum(A * A)) - captured, 0.0) / A.shape[0]


def best_rank_error(A: np.ndarray, d: int) -> float:
    """``‖A − Â‖²_F / m`` with ``Â`` the best rank-``d`` approximation of ``A`` (Eckart–Young)."""
    A = np.asarray(A, dtype=float)
    m, n = A.shape
    if m > n:  # eigenvalues of AᵀA are the squared singular values: O(m n²) instead of an SVD
        squared = np.clip(np.linalg.eigvalsh(A.T @ A)[::-1], 0.0, None)
    else:
        squared = np.linalg.svd(A, compute_uv=False) ** 2
    return float(np.sum(squared[d:]) / m)


def loss(A: np.ndarray, P, d: int) -> float:
    """Samadi et al.'s reconstruction loss, averaged: ``error(A, P) − ‖A − Â‖²_F / m``.

    [Samadi18] Definition 4.3 (with the 1/|A| averaging of Definition 4.4): how much worse the
    map ``P`` reconstructs the group than the group's own best rank-``d`` approximation.
    """
    return error(A, P) - best_rank_error(A, d)


def variance_explained(X: np.ndarray, P) -> float:
    """``‖X P‖²_F / ‖X‖²_F`` on centred data ([Rathore25] §5.3)."""
    X = np.asarray(X, dtype=float)
    coordinates = as_map(P).coordinates(X)  # ‖X P‖_F = ‖X U diag(w)‖_F since U is orthonormal
    total = float(np.sum(X * X))
    return float(np.sum(coordinates * coordinates) / total) if total > 0 else float("nan")


# ---------------------------------------------------------------- distribution distances


def _group_means(Z: np.ndarray, groups: np.ndarray) -> np.ndarray:
    k = int(groups.max()) + 1
    return np.array([Z[groups == g].mean(axis=0) for g in range(k)])


def mmd2(Z: np.ndarray, groups: np.ndarray) -> float:
    """Linear-kernel MMD²: ``‖μ_a − μ_b‖²`` between group means of the representation.

    [Rathore25] §5.3. For more than two groups, the largest pairwise value.
    """
    Z = np.asarray(Z, dtype=float)
    means = _group_means(Z, groups)
    return float(max(np.sum((means[a] - means[b]) ** 2) for a, b in combinations(range(len(means)), 2)))


def _subsample(indices: np.ndarray, max_rows: int | None, rng: np.random.Generator) -> np.ndarray:
    if max_rows is None or len(indices) <= max_rows:
        return indices
    return np.sort(rng.choice(indices, size=max_rows, replace=False))


def median_distance(Z: np.ndarray) -> float | None:
    """The median pairwise distance between the rows of ``Z`` (the median bandwidth heuristic,
    [Gretton12]), or of the non-zero distances when that is 0; ``None`` when every row is the same."""
    return _median_of_squared(pdist(Z, "sqeuclidean"))


def _median_of_squared(squared: np.ndarray) -> float | None:
    """:func:`median_distance` from the squared pairwise distances (any order; the array is
    reordered): ``np.median`` of their square roots, by selection on the squares (no square root
    or sort of all of them)."""
    if squared.size == 0 or not np.any(squared > 0):
        return None
    median = _median_sqrt(squared)
    return median if median > 0 else _median_sqrt(squared[squared > 0])


def _median_sqrt(squared: np.ndarray) -> float:
    """``np.median(np.sqrt(squared))`` with one selection: the upper middle value by
    ``np.partition`` (one kth; two kths, as ``np.median`` asks for, cost 3.7× as much on 2 million
    values) and, for an even count, the lower middle value as the largest of the lower part."""
    half = squared.size // 2
    squared.partition(half)  # in place: callers pass arrays of their own
    upper = np.sqrt(squared[half])
    if squared.size % 2:
        return float(upper)
    return float((np.sqrt(squared[:half].max()) + upper) / 2)


def rbf_members(groups: np.ndarray, max_rows_per_group: int | None, max_rows: int, random_state) -> list[np.ndarray]:
    """The rows of each group that enter :func:`mmd2_rbf`'s kernel (seeded subsamples)."""
    rng = np.random.default_rng(random_state)
    k = int(groups.max()) + 1
    sizes = np.bincount(groups, minlength=k)
    cap = max_rows_per_group
    if cap is not None:
        # the largest per-group cap c with Σ min(m_g, c) ≤ max_rows (at least 50 rows per group)
        while cap > 50 and np.minimum(sizes, cap).sum() > max_rows:
            cap = int(cap * 0.8)
    return [_subsample(np.flatnonzero(groups == g), cap, rng) for g in range(k)]


def mmd2_rbf(
    Z: np.ndarray,
    groups: np.ndarray,
    *,
    max_rows_per_group: int | None = 1000,
    max_rows: int = 4000,
    random_state: int | None = 0,
) -> float:
    """RBF-kernel MMD² with the median bandwidth heuristic ([Lee22] §5; [Gretton12] eq. 5).

    For groups ``a`` and ``b``: ``mean K_aa + mean K_bb − 2 mean K_ab`` (the biased,
    always non-negative V-statistic), ``K(x, y) = exp(−‖x − y‖² / (2 σ²))`` with ``σ`` the
    median pairwise distance of the pooled rows. For more than two groups, the largest pairwise
    value, with one σ for all pairs (the pooled rows of every group) so the kernel is computed
    once. Groups larger than ``max_rows_per_group`` are subsampled (seeded), and the per-group
    cap shrinks so that at most ``max_rows`` rows enter the O(N²) kernel; ``None`` uses every row.
    """
    Z = np.asarray(Z, dtype=float)
    members = rbf_members(groups, max_rows_per_group, max_rows, random_state)
    k = len(members)
    # squared distances within each group (condensed: each pair once) and between groups
    within = [pdist(Z[m], "sqeuclidean") for m in members]
    between = {(a, b): cdist(Z[members[a]], Z[members[b]], "sqeuclidean") for a, b in combinations(range(k), 2)}
    sigma = _median_of_squared(np.concatenate([*within, *(block.ravel() for block in between.values())]))
    if sigma is None:
        return 0.0  # every row identical: no difference between the groups
    scale = -1.0 / (2.0 * sigma * sigma)

    def kernel_sum(squared: np.ndarray) -> float:
        squared *= scale
        return float(np.exp(squared, out=squared).sum())

    sizes = np.array([len(m) for m in members], dtype=float)
    mean_within = [(n + 2.0 * kernel_sum(w)) / (n * n) for w, n in zip(within, sizes, strict=True)]  # K_ii = 1
    return float(
        max(
            mean_within[a] + mean_within[b] - 2.0 * kernel_sum(block) / (sizes[a] * sizes[b])
            for (a, b), block in between.items()
        )
    )


# ---------------------------------------------------------------- leakage


MLP_EARLY_STOPPING_ROWS = 300
"""Training rows from which the MLP leakage classifier stops early on a held-out 10 % of them.

Below it the network trains for a fixed number of iterations (up to 300, until the training loss
settles). Early stopping on a handful of validation rows is a coin toss: measured with two
Gaussian groups (4 dimensions, mean shift 1, Bayes balanced accuracy 0.69), the same data and
split, only the network's seed varied (8 data sets × 5 seeds), the balanced accuracy's
seed-to-seed standard deviation was with early stopping / fixed iterations 0.100 / 0.011 at 30
training rows, 0.045 / 0.013 at 90, 0.044 / 0.012 at 150, 0.040 / 0.023 at 225, 0.021 / 0.009
at 300 and 0.011 / 0.007 at 750; from 300 rows on the fixed network overfits (mean balanced
accuracy 0.668 against 0.693 with early stopping at 300 rows, 0.649 against 0.678 at 750)."""


def _make_classifier(name: str, n_classes: int, random_state, rank_deficient: bool = False, n_rows: int | None = None):
    """The leakage classifier. Each is set up for *balanced* accuracy (equal class weights or
    priors), so a large group cannot win by being guessed by default. ``n_rows`` (training rows)
    decides whether the MLP stops early (:data:`MLP_EARLY_STOPPING_ROWS`)."""
    from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if name == "qda":
        # Bayes-optimal for Gaussian groups: sees differences of means *and* of covariances,
        # which is what a linear representation can leak; a few milliseconds per fit.
        if rank_deficient:
            # A group with no more training rows than columns (or with collinear columns) has a
            # singular covariance, which the SVD solver rejects: use Ledoit–Wolf shrinkage.
            # Standardising first keeps the shrinkage target (mean variance × I) well away from 0.
            return make_pipeline(
                StandardScaler(),
                QuadraticDiscriminantAnalysis(priors=np.full(n_classes, 1.0 / n_classes), solver="eigen", shrinkage="auto", tol=0.0),
            )
        # tol below reg_param: a direction with no variance within a group (an NMF factor that
        # is 0 for every row of a group) is then regularised instead of rejected as rank deficient.
        return QuadraticDiscriminantAnalysis(priors=np.full(n_classes, 1.0 / n_classes), reg_param=1e-4, tol=1e-6)
    if name == "logistic":
        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, class_weight="balanced"))
    if name == "hgb":
        return HistGradientBoostingClassifier(max_iter=100, class_weight="balanced", random_state=random_state)
    if name == "mlp":
        # [Kim24] App. A.6: a network with one hidden layer of 1,500 units (no class weights in
        # scikit-learn's MLP: its balanced accuracy is still reported honestly).
        early = n_rows is None or n_rows >= MLP_EARLY_STOPPING_ROWS
        return make_pipeline(
            StandardScaler(),
            MLPClassifier(hidden_layer_sizes=(1500,), max_iter=300, early_stopping=early, random_state=random_state),
        )
    if name == "mlp_paper":
        # [Kim24] App. A.6 as printed: N(A) = softmax(relu(A W1 + b) W2), 1,500 hidden units, 100
        # epochs of plain SGD (no momentum) with learning rate 0.003 on the raw embedding — no
        # standardisation, no class weights, no early stopping, no weight decay. The batch size is
        # not stated; scikit-learn's default (min(200, rows)) is used. The output layer has a bias
        # here (the paper's W2 has none).
        return MLPClassifier(
            hidden_layer_sizes=(1500,), solver="sgd", learning_rate_init=0.003, momentum=0.0, nesterovs_momentum=False,
            alpha=0.0, max_iter=100, n_iter_no_change=100, tol=0.0, random_state=random_state,
        )
    raise ValueError(f"classifier must be one of {', '.join(LEAKAGE_CLASSIFIERS)}; got {name!r}")


LEAKAGE_CLASSIFIERS = ("qda", "logistic", "hgb", "mlp", "mlp_paper")


LEAKAGE_MIN_GROUP_ROWS = 8
"""A held-out group classifier needs this many rows per group (≥ 2 test and ≥ 6 training rows at
the 75/25 split); with a smaller group the leakage metrics are NaN (and the audit says why)."""


def stratified_quotas(sizes: np.ndarray, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """How many rows to draw from groups of ``sizes`` for a stratified sample of at most about
    ``max_rows``, and which groups are taken whole: every row of small groups, the large ones in
    proportion to their size (at least :data:`LEAKAGE_MIN_GROUP_ROWS` each). Shared by
    :func:`_stratified_subsample` and the dask engine's sample (:mod:`fairaudit.engine`)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    keep_whole = sizes <= max(2 * LEAKAGE_MIN_GROUP_ROWS, int(0.02 * max_rows))
    budget = max_rows - int(sizes[keep_whole].sum())
    large_total = int(sizes[~keep_whole].sum())
    whole = keep_whole | (large_total <= budget)
    takes = [size if entire else min(size, max(LEAKAGE_MIN_GROUP_ROWS, int(round(budget * size / large_total))))
             for size, entire in zip(sizes.tolist(), whole.tolist(), strict=True)]
    return np.asarray(takes, dtype=np.int64), whole


def _stratified_subsample(groups: np.ndarray, max_rows: int, random_state) -> np.ndarray:
    """Row indices: every row of small groups, the large ones subsampled evenly to ``max_rows``."""
    rng = np.random.default_rng(random_state)
    labels, sizes = np.unique(groups, return_counts=True)
    takes, whole = stratified_quotas(sizes, max_rows)
    chosen = []
    for label, take, entire in zip(labels, takes, whole, strict=True):
        members = np.flatnonzero(groups == label)
        chosen.append(members if entire else rng.choice(members, size=int(take), replace=False))
    return np.sort(np.concatenate(chosen))


def group_prediction_scores(
    Z: np.ndarray,
    groups: np.ndarray,
    *,
    classifier: str = "qda",
    test_size: float = 0.25,
    max_rows: int | None = 20000,
    random_state: int | None = 0,
) -> tuple[float, float]:
    """Held-out (accuracy, balanced accuracy) of a classifier predicting the group from ``Z``.

    A stratified ``1 − test_size`` / ``test_size`` split (75/25 as in [Kim24] App. A.6);
    above ``max_rows`` rows a subsample is used that keeps every row of small groups. Returns
    ``(nan, nan)`` when a group has fewer than :data:`LEAKAGE_MIN_GROUP_ROWS` rows.
    """
    from sklearn.metrics import accuracy_score, balanced_accuracy_score
    from sklearn.model_selection import train_test_split

    Z = np.asarray(Z, dtype=float)
    if Z.ndim == 1:
        Z = Z[:, None]
    groups = np.asarray(groups)
    if np.unique(groups, return_counts=True)[1].min() < LEAKAGE_MIN_GROUP_ROWS:
        return float("nan"), float("nan")
    if max_rows is not None and len(groups) > max_rows:
        rows = _stratified_subsample(groups, max_rows, random_state)
        Z, groups = Z[rows], groups[rows]
    Z_train, Z_test, g_train, g_test = train_test_split(
        Z, groups, test_size=test_size, stratify=groups, random_state=random_state
    )
    n_classes = len(np.unique(groups))
    rank_deficient = int(np.unique(g_train, return_counts=True)[1].min()) <= Z.shape[1]
    try:
        with warnings.catch_warnings():
            if (classifier == "mlp" and len(g_train) < MLP_EARLY_STOPPING_ROWS) or classifier == "mlp_paper":
                from sklearn.exceptions import ConvergenceWarning

                # Fixed iterations on a small training set: reaching max_iter is the plan, not news.
                warnings.simplefilter("ignore", ConvergenceWarning)
            model = _make_classifier(classifier, n_classes, random_state, rank_deficient, len(g_train)).fit(Z_train, g_train)
    except np.linalg.LinAlgError:  # collinear columns within a group: QDA with shrinkage instead
        if classifier != "qda":
            raise
        model = _make_classifier(classifier, n_classes, random_state, True).fit(Z_train, g_train)
    predicted = model.predict(Z_test)
    return float(accuracy_score(g_test, predicted)), float(balanced_accuracy_score(g_test, predicted))


def leakage(Z: np.ndarray, groups: np.ndarray, **options) -> dict[str, float]:
    """``{"unfairness", "unfairness_balanced"}`` from one held-out classifier
    (:func:`group_prediction_scores`; ``options`` go to it)."""
    k = len(np.unique(groups))
    accuracy, balanced = group_prediction_scores(Z, groups, **options)
    return {"unfairness": accuracy - 1.0 / k, "unfairness_balanced": balanced - 1.0 / k}


def unfairness(Z: np.ndarray, groups: np.ndarray, **options) -> float:
    """Held-out accuracy of predicting the group from ``Z``, minus chance ``1/k``.

    [Kim24] §3 / App. A.6 define it for two groups as accuracy − 0.5. With imbalanced groups a
    classifier that always answers the majority scores above 0.5 without any leakage; use
    :func:`unfairness_balanced` there.
    """
    return leakage(Z, groups, **options)["unfairness"]


def unfairness_balanced(Z: np.ndarray, groups: np.ndarray, **options) -> float:
    """Like :func:`unfairness` with balanced accuracy (mean per-group recall) minus ``1/k``.

    0 means the representation does not reveal the group beyond chance; 1 − 1/k means it
    reveals it perfectly, whatever the group sizes.
    """
    return leakage(Z, groups, **options)["unfairness_balanced"]


# ---------------------------------------------------------------- clustering (feature selection)


def _contingency(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Counts ``N[i, j]`` of rows with ``a = i``-th value and ``b = j``-th value."""
    _, a = np.unique(np.asarray(a), return_inverse=True)
    _, b = np.unique(np.asarray(b), return_inverse=True)
    table = np.zeros((a.max() + 1, b.max() + 1), dtype=np.int64)
    np.add.at(table, (a, b), 1)
    return table


def clustering_accuracy(labels_true, labels_pred) -> float:
    """Clustering accuracy with the best one-to-one cluster↔class map ([Xing21] eq. 8).

    ``acc = max_map Σ_i δ(y_i, map(c_i)) / n``; the map is found by the Hungarian algorithm
    (:func:`scipy.optimize.linear_sum_assignment`) on the cluster × class contingency table.
    With more clusters than classes the surplus clusters match nothing (count as errors).
    """
    return accuracy_from_table(_contingency(labels_pred, labels_true))


def accuracy_from_table(table: np.ndarray) -> float:
    """:func:`clustering_accuracy` from the cluster × class contingency table."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / table.sum())


def nmi(labels_true, labels_pred) -> float:
    """Normalised mutual information ([Xing21] eq. 9): ``I(C; C') / max(H(C), H(C'))``.

    The paper prints the denominator as "max (H(C) + H(C'))"; a maximum of one term is no
    maximum, so we read it as ``max(H(C), H(C'))`` (scikit-learn's ``average_method="max"``;
    ``docs/fs.md``). 1 when both partitions are trivial.
    """
    return nmi_from_table(_contingency(labels_pred, labels_true))


def nmi_from_table(table: np.ndarray) -> float:
    """:func:`nmi` from a contingency table (natural logarithms; the ratio does not depend on the base)."""
    table = np.asarray(table, dtype=float)
    total = table.sum()
    p = table / total
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    entropy = lambda q: float(-np.sum(q[q > 0] * np.log(q[q > 0])))  # noqa: E731
    h_rows, h_cols = entropy(rows), entropy(cols)
    if h_rows == 0.0 and h_cols == 0.0:
        return 1.0
    nz = p > 0
    mutual = float(np.sum(p[nz] * (np.log(p[nz]) - np.log(np.outer(rows, cols)[nz]))))
    return max(mutual, 0.0) / max(h_rows, h_cols)


def cluster_balance(clusters, groups) -> float:
    """``min_C min_g |C ∩ X_g| / |C|`` over non-empty clusters ``C`` and groups ``g`` ([Xing21] eq. 10).

    The smallest share any group has in any cluster: 0 when some cluster lacks a group
    entirely; at most ``1/k`` for ``k`` groups (every cluster an equal mix). Higher is fairer.
    """
    return balance_from_table(_contingency(clusters, groups))


def balance_from_table(table: np.ndarray) -> float:
    """:func:`cluster_balance` from the cluster × group table (empty clusters ignored)."""
    table = np.asarray(table, dtype=float)
    table = table[table.sum(axis=1) > 0]
    if table.shape[1] < 2:
        return 0.0  # a cluster can only be balanced between groups that are present
    return float(np.min(table / table.sum(axis=1, keepdims=True)))


def cluster_proportion(clusters, groups) -> float:
    """``Σ_C max_g |C ∩ X_g| / |C|`` over non-empty clusters ``C`` ([Xing21] eq. 11).

    How much each cluster is dominated by its largest group, summed over clusters: between
    ``K/k`` (every cluster an equal mix of ``k`` groups) and ``K`` (every cluster one group).
    Lower is fairer.
    """
    return proportion_from_table(_contingency(clusters, groups))


def proportion_from_table(table: np.ndarray) -> float:
    """:func:`cluster_proportion` from the cluster × group table (empty clusters ignored)."""
    table = np.asarray(table, dtype=float)
    table = table[table.sum(axis=1) > 0]
    return float(np.sum(table.max(axis=1) / table.sum(axis=1)))


# ---------------------------------------------------------------- plain-language definitions
METRIC_DEFINITIONS: dict[str, dict[str, str]] = {
    "error": {
        "title": "Reconstruction error per group",
        "formula": "‖A_i − A_i P‖²_F / m_i",
        "plain": "How much of a group's data is lost when it is compressed and reconstructed: the "
        "average squared distance between each row and its reconstruction. Lower is better.",
        "source": "Samadi et al. 2018, §3",
    },
    "loss": {
        "title": "Reconstruction loss per group",
        "formula": "error_i − ‖A_i − Â_i‖²_F / m_i,  Â_i = best rank-d approximation of A_i",
        "plain": "The error a group suffers beyond what the best possible rank-d compression of that "
        "group alone would cost. 0 means the representation serves the group as well as its own "
        "PCA; Fair PCA makes the largest group loss as small as possible.",
        "source": "Samadi et al. 2018, Def. 4.3–4.4",
    },
    "max_loss": {
        "title": "Largest group loss",
        "formula": "max_i loss_i",
        "plain": "The objective Fair PCA minimises: the loss of the worst-served group.",
        "source": "Samadi et al. 2018, eq. 10",
    },
    "loss_gap": {
        "title": "Loss gap",
        "formula": "max_i loss_i − min_i loss_i",
        "plain": "How unequally the groups are served. 0 means every group loses the same.",
        "source": "derived from Samadi et al. 2018, Def. 4.3",
    },
    "variance_explained": {
        "title": "Variance explained",
        "formula": "‖X P‖²_F / ‖X‖²_F (centred X)",
        "plain": "The share of the whole data's variance the representation keeps. Fairness usually "
        "costs a little of it.",
        "source": "Rathore & Manwani 2025, §5.3",
    },
    "mmd2": {
        "title": "MMD² (group means)",
        "formula": "‖μ_a − μ_b‖² of the projected group means (largest pair)",
        "plain": "How far apart the groups' average representations are. 0 means the groups are "
        "centred at the same place in the representation.",
        "source": "Rathore & Manwani 2025, §5.3",
    },
    "mmd2_rbf": {
        "title": "MMD² (RBF kernel)",
        "formula": "mean K_aa + mean K_bb − 2 mean K_ab, K = exp(−‖x−y‖²/2σ²), σ = median distance",
        "plain": "How different the groups' whole distributions are in the representation, not only "
        "their means. 0 means indistinguishable.",
        "source": "Lee et al. 2022; Gretton et al. 2012",
    },
    "unfairness": {
        "title": "Unfairness (leakage, accuracy)",
        "formula": "held-out accuracy of a classifier predicting the group − 1/k",
        "plain": "How well the group can be guessed from the representation alone. With unequal "
        "group sizes a classifier can score well by always guessing the larger group; prefer the "
        "balanced version.",
        "source": "Kim & Gittens 2024, §3 / App. A.6",
    },
    "unfairness_balanced": {
        "title": "Unfairness (leakage, balanced accuracy)",
        "formula": "held-out balanced accuracy of a classifier predicting the group − 1/k",
        "plain": "How well the group can be guessed from the representation, fair to small groups. "
        "0 means no better than chance; 1 − 1/k means the group is fully revealed.",
        "source": "Kim & Gittens 2024, §3 (balanced accuracy)",
    },
    "effective_rank": {
        "title": "Effective rank",
        "formula": "number of directions the map uses",
        "plain": "Fair PCA may use up to k − 1 extra directions (one for two groups) to equalise losses.",
        "source": "Samadi et al. 2018, Thm. 5.1–5.2",
    },
    "dual_gap": {
        "title": "Certified optimality gap",
        "formula": "max_i loss_i − (lower bound from the Lagrangian dual)",
        "plain": "How far the solver's answer can be from the true optimum, at most.",
        "source": "this implementation",
    },
    "rel_error": {
        "title": "Relative reconstruction error (per group)",
        "formula": "‖X_ℓ − W_ℓ H‖_F / ‖X_ℓ‖_F",
        "plain": "The share of a group's data (in norm) that the NMF does not reproduce. Lower is better. "
        "Computed on the non-negative features scaled to unit ℓ2 norm (the paper's §6.1), not on the "
        "scaling chosen for PCA.",
        "source": "Kassab, George, Needell et al., Towards a Fairer NMF, §4",
    },
    "rel_loss": {
        "title": "Relative reconstruction loss (per group)",
        "formula": "(‖X_ℓ − W_ℓ H‖_F − E_ℓ) / ‖X_ℓ‖_F,  E_ℓ = mean error of T rank-r NMFs of group ℓ alone",
        "plain": "How much worse the shared NMF reconstructs a group than an NMF of that group alone "
        "would, relative to the group's size. 0 means the group is served as well as it can be; "
        "small or complex groups usually lose most under standard NMF. Fairer-NMF minimises the "
        "largest value. Can be slightly negative because E_ℓ is an estimate.",
        "source": "Kassab, George, Needell et al., Def. 4.1, Remark 4.2, Alg. 1",
    },
    "own_rel_error": {
        "title": "Group's own NMF error",
        "formula": "E_ℓ / ‖X_ℓ‖_F",
        "plain": "How well an NMF of the same rank fitted to this group alone reconstructs it: the "
        "group's intrinsic complexity, the yardstick of the relative loss.",
        "source": "Kassab, George, Needell et al., Alg. 1",
    },
    "max_rel_loss": {
        "title": "Largest group relative loss",
        "formula": "max_ℓ rel_loss_ℓ",
        "plain": "The objective Fairer-NMF minimises: the relative loss of the worst-served group.",
        "source": "Kassab, George, Needell et al., Def. 4.1",
    },
    "rel_loss_gap": {
        "title": "Relative loss gap",
        "formula": "max_ℓ rel_loss_ℓ − min_ℓ rel_loss_ℓ",
        "plain": "How unequally the groups are served by the NMF. 0 means every group loses the same.",
        "source": "derived from Kassab, George, Needell et al., Def. 4.1",
    },
    "total_rel_error": {
        "title": "Total relative error",
        "formula": "‖X − W H‖_F / ‖X‖_F",
        "plain": "How well the NMF reconstructs all rows together; fairness usually costs a little of it.",
        "source": "Kassab, George, Needell et al., eq. (2)",
    },
    "n_iter": {
        "title": "Iterations",
        "formula": "iterations until the stopping rule or the cap",
        "plain": "How many iterations the solver ran (standard NMF; Fairer-NMF's own iterations).",
        "source": "measured",
    },
    "estimate_seconds": {
        "title": "Time for E_ℓ (s)",
        "formula": "wall-clock seconds of Algorithm 1 at this rank",
        "plain": "Time to fit T NMFs per group for the relative loss's yardstick; computed once per "
        "rank and shared by every NMF variant (and cached across audits).",
        "source": "measured",
    },
    "residual_fit": {
        "title": "Residual fit (CP)",
        "formula": "‖X − ⟦A, B, C⟧‖_F / ‖X‖_F  (per group: over the group's entities' slices)",
        "plain": "The share of the tensor (or matrix) that the CP model does not reproduce. 0 is a "
        "perfect fit; fairness penalties usually raise it a little.",
        "source": "Kim & Gittens 2021, App. A.6",
    },
    "orthogonality": {
        "title": "Orthogonality ‖ÂᵀS‖",
        "formula": "‖ÂᵀS‖_F, Â = entity factor with unit-mean-square columns (whitened, ÂᵀÂ/n = I, for a matrix), S = one-hot groups",
        "plain": "FATR's fairness constraint: 0 means each embedding coordinate sums to zero within "
        "every group. It does not mean the group is hidden — the groups can still differ in spread "
        "or shape (Kim & Gittens' Theorem 1).",
        "source": "Zhu, Hu & Caverlee 2018; Kim & Gittens 2021, Thm. 1 and App. A.6",
    },
    "nkhsic": {
        "title": "Normalised KHSIC",
        "formula": "⟨K̃_A, K̃_S⟩ / (‖K̃_A‖_F ‖K̃_S‖_F), centred RBF kernel on the embedding (median bandwidth)",
        "plain": "How strongly the entity embedding depends on the group, as kernel methods see it "
        "(differences in mean, spread or shape). 0 means no dependence; 1 the strongest.",
        "source": "Kim & Gittens 2021, App. A.6 (centred kernel alignment)",
    },
    "lam": {
        "title": "Penalty weight λ",
        "formula": "λ in ‖X − ⟦A,B,C⟧‖²/N + λ·penalty(A)",
        "plain": "How strongly a fair CP method trades fit for independence from the group; 0 for "
        "vanilla CP. The default grid is scaled to the data (fairaudit.cpd.sweep).",
        "source": "Kim & Gittens 2021, Figs. 2a/3a",
    },
    "epochs": {
        "title": "Epochs",
        "formula": "block-coordinate-descent epochs until the objective settled (or the cap)",
        "plain": "How many rounds of updates the CP fit took.",
        "source": "this implementation",
    },
    "seconds": {
        "title": "Fit time (s)",
        "formula": "wall-clock seconds per fit",
        "plain": "Time to fit one variant at one rank. NMF family: without E_ℓ (see estimate_seconds); "
        "Fairer-NMF includes the standard NMF it starts from.",
        "source": "measured",
    },
    # feature selection (fs): k-means on the selected columns, repeated; "_std" = spread over runs
    "acc": {
        "title": "Clustering accuracy",
        "formula": "max over one-to-one cluster→class maps of the share of rows whose cluster maps to their label (Hungarian matching); mean over k-means runs",
        "plain": "How well clusters found on the selected features recover the ground-truth label. Higher is better.",
        "source": "Xing et al. 2021, eq. 8",
    },
    "acc_std": {
        "title": "Clustering accuracy (std over runs)",
        "formula": "standard deviation of acc over the k-means runs",
        "plain": "How much the accuracy depends on the k-means initialisation.",
        "source": "Xing et al. 2021, §4.1",
    },
    "nmi": {
        "title": "NMI",
        "formula": "I(label; cluster) / max(H(label), H(cluster)); mean over k-means runs",
        "plain": "Information the clusters share with the ground-truth label, from 0 (none) to 1 (identical). Higher is better.",
        "source": "Xing et al. 2021, eq. 9",
    },
    "nmi_std": {
        "title": "NMI (std over runs)",
        "formula": "standard deviation of nmi over the k-means runs",
        "plain": "How much the NMI depends on the k-means initialisation.",
        "source": "Xing et al. 2021, §4.1",
    },
    "balance": {
        "title": "Cluster balance",
        "formula": "min over clusters C, groups g of |C ∩ X_g| / |C|; mean over k-means runs",
        "plain": "The smallest share any group has in any cluster: 0 if some cluster leaves a group out, 1/k "
        "if every cluster mixes the k groups equally. Higher is fairer.",
        "source": "Xing et al. 2021, eq. 10",
    },
    "balance_std": {
        "title": "Cluster balance (std over runs)",
        "formula": "standard deviation of balance over the k-means runs",
        "plain": "How much the balance depends on the k-means initialisation.",
        "source": "Xing et al. 2021, §4.1",
    },
    "proportion": {
        "title": "Cluster proportion",
        "formula": "Σ over clusters C of max_g |C ∩ X_g| / |C|; mean over k-means runs",
        "plain": "How strongly each cluster is dominated by one group, added over clusters: K/k for perfectly "
        "mixed clusters, K when every cluster holds a single group. Lower is fairer.",
        "source": "Xing et al. 2021, eq. 11",
    },
    "proportion_std": {
        "title": "Cluster proportion (std over runs)",
        "formula": "standard deviation of proportion over the k-means runs",
        "plain": "How much the proportion depends on the k-means initialisation.",
        "source": "Xing et al. 2021, §4.1",
    },
    "alignment_data": {
        "title": "Kernel alignment with all features",
        "formula": "A_c(K_S, K_X) = ⟨HK_SH, HK_XH⟩ / (‖HK_SH‖ ‖HK_XH‖), S = selected columns",
        "plain": "How much of the similarity structure of the full data the selected features keep (1 = all). Higher is better.",
        "source": "Xing et al. 2021, eqs. 1–2",
    },
    "alignment_protected": {
        "title": "Kernel alignment with the protected attribute",
        "formula": "A_c(K_S, K_Y), K_Y[a, b] = 1 if rows a and b share a group",
        "plain": "How much the similarity of rows on the selected features follows group membership. Lower is fairer.",
        "source": "Xing et al. 2021, eqs. 1–2",
    },
}


METRIC_BETTER: dict[str, str | None] = {
    "error": "lower", "loss": "lower", "max_loss": "lower", "loss_gap": "lower",
    "variance_explained": "higher", "mmd2": "lower", "mmd2_rbf": "lower",
    "unfairness": "lower", "unfairness_balanced": "lower",
    "effective_rank": None, "dual_gap": "lower",
    "rel_error": "lower", "rel_loss": "lower", "own_rel_error": None, "max_rel_loss": "lower",
    "rel_loss_gap": "lower", "total_rel_error": "lower", "n_iter": None, "estimate_seconds": "lower",
    "residual_fit": "lower", "orthogonality": "lower", "nkhsic": "lower", "lam": None, "epochs": None,
    "seconds": "lower",
    "acc": "higher", "acc_std": "lower", "nmi": "higher", "nmi_std": "lower",
    "balance": "higher", "balance_std": "lower", "proportion": "lower", "proportion_std": "lower",
    "alignment_data": "higher", "alignment_protected": "lower",
}
"""Which way is better for each metric of :data:`METRIC_DEFINITIONS`: ``"lower"``, ``"higher"``, or
``None`` for a quantity with no better direction (a parameter, an iteration count). Charts and
tables print it as “↓ better” / “↑ better”."""

HELDOUT_PREFIX = "heldout_"


def better(metric: str) -> str | None:
    """``"lower"``, ``"higher"`` or ``None`` for ``metric`` (held-out variants as their metric)."""
    base = metric[len(HELDOUT_PREFIX):] if metric.startswith(HELDOUT_PREFIX) else metric
    return METRIC_BETTER.get(base)
