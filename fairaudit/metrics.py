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

import inspect
import math
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
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


def _median_of_blocks(blocks: list[np.ndarray]) -> float | None:
    """:func:`_median_of_squared` of the values of ``blocks`` together — bit for bit, since a median
    is an order statistic — without joining them into one array or reordering them (the RBF
    MMD² then sums the same blocks' kernel values in their order): :func:`_order_statistics`.
    Falls back to a joined copy when the median is 0 (the median of the non-zero values)."""
    total = sum(block.size for block in blocks)
    if total == 0:
        return None
    half = total // 2
    lower, upper = _order_statistics(blocks, (half - 1 if total % 2 == 0 else half, half))
    median = float(np.sqrt(upper)) if total % 2 else float((np.sqrt(lower) + np.sqrt(upper)) / 2)
    if median > 0:
        return median
    return _median_of_squared(np.concatenate(blocks))


MEDIAN_SAMPLE = 20_000
"""Values of a strided sample that bracket an order statistic in :func:`_order_statistics`."""


def _order_statistics(blocks: list[np.ndarray], ranks: tuple[int, int]) -> tuple[float, float]:
    """The ``ranks[0]``-th and ``ranks[1]``-th smallest (from 0; ``ranks[0] ≤ ranks[1]``) of the
    values of ``blocks`` together, exactly: a strided sample brackets them, one pass counts the
    values below the bracket and gathers those inside it, and a selection among those (a few
    percent of the values) finds them; a bracket that misses (a sample unlike the rest) widens
    until it holds them. Three comparisons per value instead of ``np.partition`` of a joined
    copy (2.4× faster on the 2 million squared distances of a 2,000-row RBF kernel; no copy)."""
    total = sum(block.size for block in blocks)
    step = max(1, total // MEDIAN_SAMPLE)
    sample = np.sort(np.concatenate([block[::step] for block in blocks]))
    margin = 0.02
    while margin < 1:
        low_at = math.floor((ranks[0] / total - margin) * sample.size)
        high_at = math.ceil((ranks[1] / total + margin) * sample.size)
        low = sample[low_at] if low_at > 0 else -np.inf
        high = sample[high_at] if high_at < sample.size else np.inf
        below = sum(int(np.count_nonzero(block < low)) for block in blocks)
        inside = np.concatenate([block[(block >= low) & (block <= high)] for block in blocks])
        if below <= ranks[0] and ranks[1] < below + inside.size:
            first, second = ranks[0] - below, ranks[1] - below
            inside.partition([first, second] if first != second else first)
            return float(inside[first]), float(inside[second])
        margin *= 4
    joined = np.concatenate(blocks)  # NaN among the values: np.partition's order (NaN last)
    joined.partition(list(dict.fromkeys(ranks)))
    return float(joined[ranks[0]]), float(joined[ranks[1]])


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
    # Every pair's squared distance once, block by block (each group's pairs, each pair of
    # groups'): together they are the pooled rows' pairwise distances, whose median is σ, and
    # each block's kernel sum reads them in place — no second pass over the pooled rows and no
    # joined copy for the median (:func:`_median_of_blocks`; the memory of the pooled distances).
    blocks = {(a, a): pdist(Z[members[a]], "sqeuclidean") for a in range(k)}
    blocks.update({(a, b): cdist(Z[members[a]], Z[members[b]], "sqeuclidean") for a, b in combinations(range(k), 2)})
    sigma = _median_of_blocks([block.reshape(-1) for block in blocks.values()])
    if sigma is None:
        return 0.0  # every row identical: no difference between the groups
    scale = -1.0 / (2.0 * sigma * sigma)

    def kernel_sum(a: int, b: int) -> float:
        """``Σ K`` over the pairs of groups ``a`` and ``b`` (each pair once when ``a == b``)."""
        squared = blocks.pop((a, b))
        squared *= scale
        return float(np.exp(squared, out=squared).sum())

    sizes = np.array([len(m) for m in members], dtype=float)
    mean_within = [(n + 2.0 * kernel_sum(g, g)) / (n * n) for g, n in enumerate(sizes)]  # K_ii = 1
    return float(
        max(
            mean_within[a] + mean_within[b] - 2.0 * kernel_sum(a, b) / (sizes[a] * sizes[b])
            for a, b in combinations(range(k), 2)
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
"""The leakage test needs this many rows per group (every fold of the cross-validation then holds
at least one row of each group and trains on at least six); with a smaller group the leakage
metrics are NaN (and the audit says why)."""

LEAKAGE_FOLDS = 5
"""Folds of the stratified cross-validation behind the leakage metrics (fewer when the smallest
group has fewer rows)."""

LEAKAGE_REPEATS = 3
"""Repeats of the stratified ``k``-fold split (each with its own shuffle); the leakage value is
the mean balanced accuracy over the ``folds × repeats`` held-out folds. Measured with
``benchmarks/bench_leakage_stability.py`` (see ``docs/architecture.md``)."""

LEAKAGE_PERMUTATIONS: dict[str, int] = {"qda": 50, "logistic": 20, "hgb": 0, "mlp": 0, "mlp_paper": 0}
"""Permutations of the chance distribution per classifier (``AuditConfig.leakage_permutations``
overrides). QDA's are refitted in one batched computation (:func:`_batched_qda_scores`): 50 of
them (250 refits) took 20 ms at 600 rows × 8 columns with the first batched QDA, 100 took 37 ms —
the permutations are most of a leakage test's cost (the observed cross-validation: 3 ms), so 50, enough for p-values down to
0.02 (fewer on large representations, see :data:`LEAKAGE_PERMUTATION_BUDGET`; more when the
confidence asks for it: at least ``1/α − 1``); the other classifiers are refitted one by one, so HGB and
the MLP (0.1–3 s per fit) get none: their "above chance" test is then the cross-validation
interval lying above ``1/k``."""

LEAKAGE_PERMUTATION_BUDGET = 2e8
"""Largest ``permutations × folds × groups × rows × columns²`` for QDA's chance distribution; above
it the permutations are cut to fit, never below :data:`LEAKAGE_MIN_PERMUTATIONS`. The rule was set
by the first batched QDA, whose arithmetic this was (0.5–0.8 s for 100 permutations at 10,000 rows
× 10 columns on two busy cores, so 20 there; all 50 up to about 4,000 rows × 10 columns). The
present one (:func:`_batched_qda_scores`: moments by subtraction, each row scored once per fold) is
3.4× faster on the same representations, side by side (``benchmarks/bench_leakage_speed.py``);
the rule was kept so that the counts, and with them every p-value, stayed as they were. The
estimate records how many were used."""

LEAKAGE_MIN_PERMUTATIONS = 20


def _permutation_count(classifier: str, n_rows: int, n_columns: int, n_classes: int, folds: int, confidence: float = 0.95) -> int:
    """The default number of permutations for the chance distribution (see the constants above),
    never fewer than ``1/α − 1`` (a p-value can only reach ``1/(1 + permutations)``)."""
    if classifier == "qda":
        affordable = int(LEAKAGE_PERMUTATION_BUDGET // max(folds * n_classes * n_rows * n_columns**2, 1))
        count = min(LEAKAGE_PERMUTATIONS["qda"], affordable) if affordable >= LEAKAGE_MIN_PERMUTATIONS else LEAKAGE_MIN_PERMUTATIONS
    else:
        count = LEAKAGE_PERMUTATIONS.get(classifier, 0)
    return max(count, math.ceil(1.0 / (1.0 - confidence) - 1e-9) - 1) if count else 0


@dataclass(frozen=True)
class LeakageEstimate:
    """How well the group can be predicted from a representation, and whether that beats chance.

    ``balanced`` / ``accuracy``: the mean over the held-out folds of repeated stratified
    cross-validation, with ``*_low`` / ``*_high`` the corrected resampled-t interval over those
    folds (Nadeau & Bengio 2003: the fold scores share training rows, so their plain standard
    error is too small; the variance is inflated by ``1/J + n_test/n_train``). ``chance`` is
    ``1/k``; ``chance_mean``/``chance_low``/``chance_high`` the mean and central interval of the
    same statistic with the representation's rows permuted against the groups (the chance
    distribution; Ojala & Garriga 2010, test 1); ``pvalue`` = (1 + #{permuted ≥ observed}) /
    (1 + permutations), NaN without permutations.
    """

    balanced: float
    balanced_low: float
    balanced_high: float
    accuracy: float
    accuracy_low: float
    accuracy_high: float
    chance: float
    chance_mean: float
    chance_low: float
    chance_high: float
    pvalue: float
    permutations: int
    folds: int
    repeats: int

    @classmethod
    def missing(cls, k: int) -> LeakageEstimate:
        nan = float("nan")
        return cls(nan, nan, nan, nan, nan, nan, 1.0 / max(k, 1), nan, nan, nan, nan, 0, 0, 0)

    def above_chance(self, alpha: float) -> bool | None:
        """The test: permutation p-value ≤ ``alpha`` (or, without permutations, the interval of the
        balanced accuracy entirely above ``1/k``); ``None`` when nothing was measured."""
        if not np.isfinite(self.balanced):
            return None
        if self.permutations > 0 and np.isfinite(self.pvalue):
            return bool(self.pvalue <= alpha)
        return bool(self.balanced_low > self.chance)

    def records(self) -> dict[str, tuple[float, float, float]]:
        """The audit's records: ``metric → (value, ci_low, ci_high)``."""
        nan = float("nan")
        c = self.chance
        return {
            "unfairness": (self.accuracy - c, self.accuracy_low - c, self.accuracy_high - c),
            "unfairness_balanced": (self.balanced - c, self.balanced_low - c, self.balanced_high - c),
            "balanced_accuracy": (self.balanced, self.balanced_low, self.balanced_high),
            "chance_balanced_accuracy": (
                (self.chance_mean, self.chance_low, self.chance_high) if self.permutations else (c, nan, nan)
            ),
            "leakage_pvalue": (self.pvalue, nan, nan),
        }


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


def _fit_classifier(classifier: str, Z_train, g_train, n_classes: int, random_state):
    """One leakage classifier fitted for balanced accuracy (QDA falls back to shrinkage when a
    group has no more training rows than columns, or its columns are collinear)."""
    rank_deficient = int(np.bincount(g_train, minlength=n_classes).min()) <= Z_train.shape[1]
    try:
        with warnings.catch_warnings():
            if (classifier == "mlp" and len(g_train) < MLP_EARLY_STOPPING_ROWS) or classifier == "mlp_paper":
                from sklearn.exceptions import ConvergenceWarning

                # Fixed iterations on a small training set: reaching max_iter is the plan, not news.
                warnings.simplefilter("ignore", ConvergenceWarning)
            return _make_classifier(classifier, n_classes, random_state, rank_deficient, len(g_train)).fit(Z_train, g_train)
    except np.linalg.LinAlgError:  # collinear columns within a group: QDA with shrinkage instead
        if classifier != "qda":
            raise
        return _make_classifier(classifier, n_classes, random_state, True).fit(Z_train, g_train)


def _balanced_accuracy(truth: np.ndarray, predicted: np.ndarray, n_classes: int) -> np.ndarray:
    """Balanced accuracy (mean per-class recall) of each row of ``predicted`` (… × n) against ``truth``."""
    hits = predicted == truth
    recalls = [hits[..., truth == c].mean(axis=-1) for c in range(n_classes)]
    return np.mean(recalls, axis=0)


def _sorted_scores(hits: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(accuracy, balanced accuracy) of ``hits`` (… × n, whether each row was predicted right) for
    rows sorted by class (class ``c`` at ``bounds[c]:bounds[c + 1]``): :func:`_balanced_accuracy`'s
    values, bit for bit (a mean of booleans is their count over the rows), from slices instead of
    a boolean selection of every class's rows."""
    recalls = [hits[..., bounds[c] : bounds[c + 1]].mean(axis=-1) for c in range(len(bounds) - 1)]
    return hits.mean(axis=-1), np.mean(recalls, axis=0)


def _nearest(scores: np.ndarray) -> np.ndarray:
    """``scores.argmin(axis=2)``: with two classes one comparison (NaN ranked as ``argmin`` ranks
    it: the first NaN wins), 10× faster than ``argmin`` along an axis of length 2."""
    if scores.shape[2] != 2:
        return scores.argmin(axis=2)
    first, second = scores[:, :, 0], scores[:, :, 1]
    nearest = second < first
    missing = np.isnan(second)
    if missing.any():
        nearest |= missing & ~np.isnan(first)
    return nearest.view(np.int8)


QDA_REG_PARAM = 1e-4

QDA_BATCH_CELLS = 1_000_000
"""Numbers per batch of row orders in :func:`_batched_qda_scores` (8 MB of float64: the orders'
rows and their centred, whitened copies per class)."""


def _batched_qda_scores(
    Z: np.ndarray, groups: np.ndarray, splits: list, orders: np.ndarray, n_classes: int, widths=None, split_set: _SplitSet | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(accuracy, balanced accuracy), each ``W × P × J``, of QDA on the leading ``widths[w]``
    columns of ``Z`` fitted on each split's training rows and scored on its test rows, for every
    row order ``p`` and split ``j`` (``widths`` defaults to all columns: ``1 × P × J``).

    ``orders`` (P × n) rearranges the rows of ``Z`` against the fixed groups (the identity for
    the observed score; random permutations for the chance distribution): under order ``p`` row
    ``i`` of the data is ``Z[orders[p, i]]``. The model is scikit-learn's
    ``QuadraticDiscriminantAnalysis(priors=uniform, reg_param=QDA_REG_PARAM)`` — class
    covariances ``(1 − r) S_c/n_c + r I`` (``S_c`` the centred scatter), equal priors (checked
    against scikit-learn in the tests). No model is refitted from its rows: under each order a
    split's training moments are the class sums ``Σ z``, ``Σ z zᵀ`` minus those of the rows it
    leaves out (its test fold), and the class totals are the sums of one k-fold repeat's folds, so
    every row enters the moments once per order and is scored once per split that tests it:
    ``O(P · n · d² · (1 + classes))`` per k-fold repeat, instead of ``P · J`` fits on ``(J − 1)/J``
    of the rows each. Every width at once: the Cholesky factor of a leading block of a covariance
    is the leading block of its factor, so the whitened coordinates ``L⁻¹(x − μ)`` of the first
    ``w`` columns are the first ``w`` of all columns', and the Mahalanobis distance and the
    log-determinant at every width are cumulative sums. ``split_set``: what the splits alone
    determine (:class:`_SplitSet`), when the caller has it.
    """
    n, d = Z.shape
    widths = np.asarray([d] if widths is None else widths, dtype=int)
    P, J, k = len(orders), len(splits), n_classes
    # One column of ones more: the Gram matrix of a block of rows then holds its count, its column
    # sums and its scatter, and [x, 1] @ [[L⁻ᵀ], [−μᵀL⁻ᵀ]] whitens a row in one product.
    Za = np.hstack([Z, np.ones((n, 1))])
    split_set = _SplitSet.of(groups, splits, k) if split_set is None else split_set
    plans, trained, covering, members = split_set.plans, split_set.trained, split_set.covering, split_set.members
    ridge = QDA_REG_PARAM * np.eye(d)
    leading = (np.arange(d)[:, None] < widths[None, :]).astype(float)  # d × W: which coordinates each width sums
    accuracy, balanced = np.empty((len(widths), P, J)), np.empty((len(widths), P, J))
    step = max(1, int(QDA_BATCH_CELLS // (n * (d + 1) + k * max(len(plan.scored) for plan in plans) * d)))
    for start in range(0, P, step):
        chunk = orders[start : start + step]  # B × n
        B = len(chunk)
        grams = np.empty((B, J, k, d + 1, d + 1))  # per split and class: the left-out rows' Gram matrix
        gathered = []
        for j, plan in enumerate(plans):
            rows = np.take(Za, chunk[:, plan.outside], axis=0)  # B × m × (d + 1), sorted by class (take: 2–6× indexing's speed)
            for c in range(k):
                part = rows[:, plan.bounds[c] : plan.bounds[c + 1]]
                grams[:, j, c] = part.swapaxes(1, 2) @ part
            gathered.append(rows if plan.scored is plan.outside else None)
        if covering is not None:
            total = grams[:, covering].sum(axis=1)  # B × k × (d + 1) × (d + 1)
        else:
            total = np.stack([(lambda rows: rows.swapaxes(1, 2) @ rows)(np.take(Za, chunk[:, m], axis=0)) for m in members], axis=1)
        fit = total[:, None] - grams  # B × J × k: the training rows' Gram matrices
        mean = fit[..., :d, d] / trained[None, :, :, None]
        cov = fit[..., :d, :d] / trained[None, :, :, None, None] - mean[..., :, None] * mean[..., None, :]
        chol = np.linalg.cholesky((1 - QDA_REG_PARAM) * cov + ridge)  # B × J × k × d × d
        whiten = np.linalg.inv(chol).swapaxes(-1, -2)  # L⁻ᵀ: (x − μ)ᵀ Σ⁻¹ (x − μ) = ‖(x − μ)ᵀ L⁻ᵀ‖²
        shifted = np.concatenate([whiten, -(mean[..., None, :] @ whiten)], axis=-2)  # B × J × k × (d + 1) × d
        side_by_side = np.ascontiguousarray(shifted.transpose(0, 1, 3, 2, 4).reshape(B, J, d + 1, k * d))
        logdet = np.cumsum(2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)[..., widths - 1]  # B × J × k × W
        for j, plan in enumerate(plans):
            rows = gathered[j] if gathered[j] is not None else np.take(Za, chunk[:, plan.scored], axis=0)
            white = rows @ side_by_side[:, j]  # B × m × (k · d)
            m = white.shape[1]
            distance = ((white * white).reshape(B * m * k, d) @ leading).reshape(B, m, k, len(widths))
            predicted = _nearest(distance + logdet[:, j, None]).swapaxes(1, 2)  # B × W × m
            truth = groups[plan.scored]
            if plan.scored is plan.outside:  # sorted by class
                right, fair = _sorted_scores(predicted == truth, plan.bounds)
            else:
                right, fair = (predicted == truth).mean(axis=2), _balanced_accuracy(truth, predicted, k)
            accuracy[:, start : start + B, j] = right.T
            balanced[:, start : start + B, j] = fair.T
    return accuracy, balanced


@dataclass(frozen=True)
class _SplitPlan:
    """One split's rows for :func:`_batched_qda_scores`: ``outside`` the rows its fit leaves out,
    sorted by class (class ``c`` at ``bounds[c]:bounds[c + 1]``), and ``scored`` the rows it is
    scored on (``outside`` itself for a k-fold split)."""

    outside: np.ndarray
    bounds: np.ndarray
    scored: np.ndarray


def _split_plan(train: np.ndarray, test: np.ndarray, groups: np.ndarray, k: int) -> _SplitPlan:
    n = len(groups)
    complement = len(train) + len(test) == n
    outside = np.asarray(test) if complement else np.setdiff1d(np.arange(n), train, assume_unique=True)
    outside = outside[np.argsort(groups[outside], kind="stable")]
    bounds = np.searchsorted(groups[outside], np.arange(k + 1))
    return _SplitPlan(outside, bounds, outside if complement else np.asarray(test))


def _covering_splits(left_out: list, n: int) -> np.ndarray | None:
    """The first splits whose left-out rows together are every row exactly once (one repeat of a
    k-fold split), or None."""
    seen = np.zeros(n, dtype=int)
    for j, rows in enumerate(left_out):
        for part in rows:
            seen[part] += 1
        if seen.min() >= 1:
            return np.arange(j + 1) if seen.max() == 1 else None
    return None


@dataclass(frozen=True)
class _SplitSet:
    """What :func:`_batched_qda_scores` needs of the splits alone: each split's plan, the class
    sizes each trains on (``J × k``), the first k-fold repeat's splits covering every row once (or
    None), each class's rows, and the fewest training rows of a class in any split."""

    plans: list
    trained: np.ndarray
    covering: np.ndarray | None
    members: list
    fewest: int

    @classmethod
    def of(cls, groups: np.ndarray, splits: list, k: int) -> _SplitSet:
        members = [np.flatnonzero(groups == c) for c in range(k)]
        plans = [_split_plan(train, test, groups, k) for train, test in splits]
        trained = np.array([[members[c].size - np.diff(plan.bounds)[c] for c in range(k)] for plan in plans], dtype=float)
        covering = _covering_splits([plan.outside for plan in plans], len(groups))
        return cls(plans, trained, covering, members, int(trained.min()) if len(plans) else 0)


def _cv_scores(Z, groups, splits, classifier, n_classes, random_state, orders=None, widths=None, split_set=None):
    """Fold scores ``(accuracy, balanced)``, each ``W × P × J`` (leading-column widths × row
    orders × folds); ``widths`` defaults to all columns. QDA is computed in one batch
    (:func:`_batched_qda_scores`) when every group trains on more rows than columns; otherwise,
    and for the other classifiers, each fit is scikit-learn's."""
    widths = [Z.shape[1]] if widths is None else [int(w) for w in widths]
    if orders is None:
        orders = np.arange(len(groups))[None, :]
    accuracy = np.empty((len(widths), len(orders), len(splits)))
    balanced = np.empty_like(accuracy)
    solved: set[int] = set()
    if classifier == "qda":
        split_set = _SplitSet.of(groups, splits, n_classes) if split_set is None else split_set
        eligible = [i for i, w in enumerate(widths) if split_set.fewest > w]
        solved = _batched_widths(Z, groups, splits, orders, n_classes, widths, eligible, accuracy, balanced, split_set)
    for i, width in enumerate(widths):
        if i in solved:
            continue
        for j, (train, test) in enumerate(splits):
            for p, order in enumerate(orders):
                Zo = Z[order, :width]
                model = _fit_classifier(classifier, Zo[train], groups[train], n_classes, random_state)
                predicted = model.predict(Zo[test])
                accuracy[i, p, j] = float(np.mean(predicted == groups[test]))
                balanced[i, p, j] = float(_balanced_accuracy(groups[test], predicted[None, :], n_classes)[0])
    return accuracy, balanced


def _batched_widths(Z, groups, splits, orders, n_classes, widths, chosen, accuracy, balanced, split_set=None) -> set[int]:
    """Fill ``accuracy``/``balanced`` at the ``chosen`` widths by batched QDA; the indices filled.
    A numerically singular class covariance at the widest stops the batch: then width by width
    (the rest is left to scikit-learn's refits)."""
    if not chosen:
        return set()
    part = [widths[i] for i in chosen]
    try:
        accuracy[chosen], balanced[chosen] = _batched_qda_scores(Z[:, : max(part)], groups, splits, orders, n_classes, part, split_set)
        return set(chosen)
    except np.linalg.LinAlgError:
        if len(chosen) == 1:
            return set()
        return set().union(*(_batched_widths(Z, groups, splits, orders, n_classes, widths, [i], accuracy, balanced, split_set) for i in chosen))


def _corrected_interval(scores: np.ndarray, test_share: float, confidence: float) -> tuple[float, float]:
    """Nadeau & Bengio's corrected resampled-t interval of the mean of ``J`` fold scores."""
    from scipy.stats import t

    J = scores.size
    mean = float(scores.mean())
    if J < 2:
        return float("nan"), float("nan")
    spread = float(scores.var(ddof=1)) * (1.0 / J + test_share / (1.0 - test_share))
    half = float(t.ppf(0.5 + confidence / 2, J - 1)) * np.sqrt(spread)
    return mean - half, mean + half


def leakage_test(
    Z: np.ndarray,
    groups: np.ndarray,
    *,
    classifier: str = "qda",
    folds: int = LEAKAGE_FOLDS,
    repeats: int = LEAKAGE_REPEATS,
    permutations: int | None = None,
    confidence: float = 0.95,
    max_rows: int | None = 10000,
    random_state: int | None = 0,
) -> LeakageEstimate:
    """How well the group can be predicted from ``Z``, tested against chance.

    Balanced accuracy (and accuracy) of ``classifier`` by repeated stratified ``folds``-fold
    cross-validation ([Kim24] §3 / App. A.6 use one 75/25 split; one split moved the balanced
    accuracy by up to 0.2 between seeds on the 442-row diabetes sample); the interval is
    clipped to [0, 1]. The chance distribution comes from ``permutations`` refits with the rows
    of ``Z`` permuted against the groups (the first repeat's folds; Ojala & Garriga 2010,
    test 1); default
    :data:`LEAKAGE_PERMUTATIONS`, cut to :data:`LEAKAGE_PERMUTATION_BUDGET`. Above ``max_rows``
    rows a stratified subsample is used (every row of small groups kept).

    References
    ----------
    C. Nadeau, Y. Bengio. "Inference for the Generalization Error". Machine Learning 52, 2003.
    M. Ojala, G. C. Garriga. "Permutation Tests for Studying Classifier Performance". JMLR 11, 2010.
    """
    settings = (classifier, folds, repeats, permutations, confidence, max_rows, random_state)
    return _leakage_tests(Z, groups, None, *settings)[0]


def leakage_tests(Z: np.ndarray, groups: np.ndarray, widths=None, **options) -> list[LeakageEstimate]:
    """:func:`leakage_test` (``options``: its keywords) of the leading ``widths[i]`` columns of
    ``Z``, for each ``i`` (all columns when ``widths`` is None) — equal to calling it on
    ``Z[:, :w]`` width by width (the same rows, folds and permutations), computed together: for
    nested representations (vanilla PCA at ranks 1…r) QDA's moments, factors and distances at
    every width come from one pass over the widest (:func:`_batched_qda_scores`)."""
    settings = inspect.signature(leakage_test).bind(Z, groups, **options)  # leakage_test's defaults, one place
    settings.apply_defaults()
    return _leakage_tests(widths=widths, **settings.arguments)


def _leakage_tests(Z, groups, widths, classifier, folds, repeats, permutations, confidence, max_rows, random_state) -> list[LeakageEstimate]:
    from .linalg import blas_threads

    # Small products and many small fits: one thread (BLAS and OpenMP alike) was 5× faster than
    # two for the batched QDA on a busy two-core machine, and HGB's OpenMP threads thrashed. (The
    # cached controller: a fresh threadpool_limits reads the loaded libraries, ~4 ms a call.)
    with blas_threads(1, user_api=None):
        return _leakage_tests_at_one_thread(Z, groups, widths, classifier, folds, repeats, permutations, confidence, max_rows, random_state)


def _leakage_tests_at_one_thread(Z, groups, widths, classifier, folds, repeats, permutations, confidence, max_rows, random_state) -> list[LeakageEstimate]:
    Z = np.asarray(Z, dtype=float)
    if Z.ndim == 1:
        Z = Z[:, None]
    widths = [Z.shape[1]] if widths is None else [int(w) for w in widths]
    draws = _draws(np.asarray(groups), folds, repeats, max_rows, random_state)
    k = draws.k
    if draws.splits is None:
        return [LeakageEstimate.missing(k) for _ in widths]
    if draws.rows is not None:
        Z = Z[draws.rows]
    groups, folds, splits, seed = draws.groups, draws.folds, draws.splits, draws.seed
    accuracy, balanced = _cv_scores(Z, groups, splits, classifier, k, seed, widths=widths, split_set=draws.split_set(len(splits)))
    counts = [
        _permutation_count(classifier, len(groups), w, k, folds, confidence) if permutations is None else int(permutations)
        for w in widths
    ]
    null = np.empty((len(widths), 0))
    if max(counts):
        # The chance distribution of one repeat's mean over its folds: under no leakage it spreads
        # more than the observed mean over every repeat, so the p-value errs on the large side.
        # One set of row orders for every width (each width uses the first ones it needs).
        orders = draws.orders(max(counts))
        null = np.full((len(widths), len(orders)), np.nan)  # W × P
        done = 0
        for count in sorted(set(counts)):  # orders done..count for the widths that use that many
            chosen = [i for i, c in enumerate(counts) if c >= count]
            part = [widths[i] for i in chosen]
            scores = _cv_scores(Z[:, : max(part)], groups, splits[:folds], classifier, k, seed, orders[done:count], part,
                                split_set=draws.split_set(folds))[1]
            null[chosen, done:count] = scores.mean(axis=2)
            done = count
    return [
        _estimate(accuracy[i, 0], balanced[i, 0], null[i, : counts[i]], k, folds, repeats, confidence)
        for i in range(len(widths))
    ]


class _Draws:
    """What a leakage test draws before it looks at the representation: the groups encoded, the
    stratified subsample (``rows``; None: every row), the folds, the classifiers' seed, the
    cross-validation splits (None when a group is too small to test) and the permutations
    (:meth:`orders`), all from one generator seeded with ``random_state`` — so every test of the
    same groups with the same settings draws the same, and :func:`shared_draws` lets the tests of
    many representations share them."""

    def __init__(self, groups: np.ndarray, folds: int, repeats: int, max_rows: int | None, random_state):
        from sklearn.model_selection import RepeatedStratifiedKFold

        _, groups = np.unique(groups, return_inverse=True)
        self.k = int(groups.max()) + 1 if groups.size else 0
        self.rows = self.splits = self.seed = None
        self.groups, self.folds = groups, folds
        sizes = np.bincount(groups, minlength=self.k)
        if self.k < 2 or sizes.min() < LEAKAGE_MIN_GROUP_ROWS:
            return
        self._rng = np.random.default_rng(random_state)
        if max_rows is not None and len(groups) > max_rows:
            self.rows = _stratified_subsample(groups, max_rows, self._rng)
            self.groups = groups = groups[self.rows]
            sizes = np.bincount(groups, minlength=self.k)
        self.folds = int(min(folds, sizes.min()))
        self.seed = int(self._rng.integers(2**31 - 1))
        folding = RepeatedStratifiedKFold(n_splits=self.folds, n_repeats=repeats, random_state=self.seed)
        self.splits = list(folding.split(np.empty((len(groups), 0)), groups))
        self._orders = np.empty((0, len(groups)), dtype=np.intp)
        self._split_sets: dict[int, _SplitSet] = {}
        self._lock = threading.Lock()

    def orders(self, count: int) -> np.ndarray:
        """The first ``count`` permutations of the rows (drawn on demand, in the generator's order)."""
        with self._lock:
            if len(self._orders) < count:
                more = [self._rng.permutation(len(self.groups)) for _ in range(count - len(self._orders))]
                self._orders = np.vstack([self._orders, *more])
            return self._orders[:count]

    def split_set(self, count: int) -> _SplitSet:
        """The :class:`_SplitSet` of the first ``count`` splits."""
        with self._lock:
            if count not in self._split_sets:
                self._split_sets[count] = _SplitSet.of(self.groups, self.splits[:count], self.k)
            return self._split_sets[count]


_SHARED_DRAWS: dict = {}
_SHARED_DRAWS_LOCK = threading.Lock()
_SHARED_DRAWS_USERS = [0]


@contextmanager
def shared_draws():
    """Within this block, leakage tests of the same groups with the same settings and an integer
    ``random_state`` share their :class:`_Draws` (computed once; forgotten when the last block
    ends), on any thread. Every test draws exactly what it would alone (a fresh generator per
    test draws the same), so no value changes; measured on the PCA audit of 1,000,000 × 20 rows
    (30 tests of 10,000 rows), the draws were ~10 of a test's ~45 ms."""
    with _SHARED_DRAWS_LOCK:
        _SHARED_DRAWS_USERS[0] += 1
    try:
        yield
    finally:
        with _SHARED_DRAWS_LOCK:
            _SHARED_DRAWS_USERS[0] -= 1
            if _SHARED_DRAWS_USERS[0] == 0:
                _SHARED_DRAWS.clear()


def _draws(groups: np.ndarray, folds: int, repeats: int, max_rows: int | None, random_state) -> _Draws:
    """The :class:`_Draws` of a test (shared within :func:`shared_draws` when ``random_state`` is an
    integer: ``None`` draws fresh entropy every time, a generator moves on)."""
    if not isinstance(random_state, int | np.integer) or _SHARED_DRAWS_USERS[0] == 0:
        return _Draws(groups, folds, repeats, max_rows, random_state)
    key = (groups.dtype.str, groups.shape, groups.tobytes(), folds, repeats, max_rows, int(random_state))
    with _SHARED_DRAWS_LOCK:
        if key not in _SHARED_DRAWS:
            _SHARED_DRAWS[key] = _Draws(groups, folds, repeats, max_rows, random_state)
        return _SHARED_DRAWS[key]


def _estimate(accuracy, balanced, null, k, folds, repeats, confidence) -> LeakageEstimate:
    """The leakage estimate from the observed fold scores and the permutations' mean balanced accuracies."""
    test_share = 1.0 / folds
    acc_low, acc_high = np.clip(_corrected_interval(accuracy, test_share, confidence), 0.0, 1.0)
    bal_low, bal_high = np.clip(_corrected_interval(balanced, test_share, confidence), 0.0, 1.0)
    observed = float(balanced.mean())
    chance_mean = chance_low = chance_high = pvalue = float("nan")
    if null.size:
        chance_mean = float(null.mean())
        chance_low, chance_high = (float(q) for q in np.quantile(null, [0.5 - confidence / 2, 0.5 + confidence / 2]))
        pvalue = float((1 + np.sum(null >= observed - 1e-12)) / (1 + null.size))
    return LeakageEstimate(
        balanced=observed,
        balanced_low=float(bal_low),
        balanced_high=float(bal_high),
        accuracy=float(accuracy.mean()),
        accuracy_low=float(acc_low),
        accuracy_high=float(acc_high),
        chance=1.0 / k,
        chance_mean=chance_mean,
        chance_low=chance_low,
        chance_high=chance_high,
        pvalue=pvalue,
        permutations=int(null.size),
        folds=folds,
        repeats=repeats,
    )


def group_prediction_scores(
    Z: np.ndarray,
    groups: np.ndarray,
    *,
    classifier: str = "qda",
    test_size: float = 0.25,
    max_rows: int | None = 20000,
    random_state: int | None = 0,
) -> tuple[float, float]:
    """Held-out (accuracy, balanced accuracy) of a classifier predicting the group from ``Z``,
    from one stratified ``1 − test_size`` / ``test_size`` split (75/25 as in [Kim24] App. A.6).

    One split is noisy on small data; the audit uses :func:`leakage_test`. Returns
    ``(nan, nan)`` when a group has fewer than :data:`LEAKAGE_MIN_GROUP_ROWS` rows.
    """
    from sklearn.model_selection import train_test_split

    Z = np.asarray(Z, dtype=float)
    if Z.ndim == 1:
        Z = Z[:, None]
    _, groups = np.unique(np.asarray(groups), return_inverse=True)
    if np.bincount(groups).min() < LEAKAGE_MIN_GROUP_ROWS:
        return float("nan"), float("nan")
    if max_rows is not None and len(groups) > max_rows:
        rows = _stratified_subsample(groups, max_rows, random_state)
        Z, groups = Z[rows], groups[rows]
    Z_train, Z_test, g_train, g_test = train_test_split(Z, groups, test_size=test_size, stratify=groups, random_state=random_state)
    n_classes = int(groups.max()) + 1
    predicted = _fit_classifier(classifier, Z_train, g_train, n_classes, random_state).predict(Z_test)
    return float(np.mean(predicted == g_test)), float(_balanced_accuracy(g_test, predicted[None, :], n_classes)[0])


def leakage(Z: np.ndarray, groups: np.ndarray, *, test_size: float | None = None, **options) -> dict[str, float]:
    """``{"unfairness", "unfairness_balanced"}``: (balanced) accuracy minus ``1/k`` from
    :func:`leakage_test` (``options`` go to it; no permutations unless asked for). With
    ``test_size`` the paper's protocol instead ([Kim24] App. A.6, for reproductions): one
    stratified split holding out that share (:func:`group_prediction_scores`)."""
    if test_size is not None:
        chance = 1.0 / len(np.unique(np.asarray(groups)))
        accuracy, balanced = group_prediction_scores(Z, groups, test_size=test_size, **options)
        return {"unfairness": accuracy - chance, "unfairness_balanced": balanced - chance}
    options.setdefault("permutations", 0)
    estimate = leakage_test(Z, groups, **options)
    return {"unfairness": estimate.accuracy - estimate.chance, "unfairness_balanced": estimate.balanced - estimate.chance}


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
    return float(balance_from_tables(np.asarray(table)[None])[0])


def balance_from_tables(tables: np.ndarray) -> np.ndarray:
    """:func:`cluster_balance` of every cluster × group table of a stack ``(…, K, k)`` at once
    (feature selection scores every k-means run's table so): each non-empty cluster's group
    shares, the smallest; an empty cluster's shares are left out (as +∞)."""
    tables = np.asarray(tables, dtype=float)
    if tables.shape[-1] < 2:
        return np.zeros(tables.shape[:-2])  # a cluster can only be balanced between groups that are present
    sizes = tables.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(sizes > 0, tables / sizes, np.inf)
    return shares.min(axis=(-2, -1))


def group_shares_from_tables(tables: np.ndarray) -> np.ndarray:
    """Each group's share of its worst cluster over its share of the rows, for every cluster ×
    group table of a stack ``(…, K, k)``: ``min_C (|C ∩ X_g| / |C|) / (|X_g| / n)`` over non-empty
    clusters, shape ``(…, k)`` — 1 when the group is as present in every cluster as in the data, 0
    when some cluster lacks it; NaN for a group without rows. Per group what [Xing21] eq. 10's
    balance takes the minimum of (over groups, unscaled): the scale makes groups of different
    sizes comparable, so each can be judged against parity (our extension, the feature-selection
    verdict's quantity)."""
    tables = np.asarray(tables, dtype=float)
    sizes = tables.sum(axis=-1, keepdims=True)
    totals = tables.sum(axis=-2)  # (…, k) rows per group
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(sizes > 0, tables / sizes, np.inf).min(axis=-2)
        data_share = totals / totals.sum(axis=-1, keepdims=True)
        return np.where(totals > 0, shares / data_share, np.nan)


def cluster_proportion(clusters, groups) -> float:
    """``Σ_C max_g |C ∩ X_g| / |C|`` over non-empty clusters ``C`` ([Xing21] eq. 11).

    How much each cluster is dominated by its largest group, summed over clusters: between
    ``K/k`` (every cluster an equal mix of ``k`` groups) and ``K`` (every cluster one group).
    Lower is fairer.
    """
    return proportion_from_table(_contingency(clusters, groups))


def proportion_from_table(table: np.ndarray) -> float:
    """:func:`cluster_proportion` from the cluster × group table (empty clusters ignored)."""
    return float(proportion_from_tables(np.asarray(table)[None])[0])


def proportion_from_tables(tables: np.ndarray) -> np.ndarray:
    """:func:`cluster_proportion` of every cluster × group table of a stack ``(…, K, k)`` at once:
    the sum over clusters of the largest group's share; a table with an empty cluster sums over its
    non-empty ones (one at a time: the sum over fewer terms is not the same sum with zeros)."""
    tables = np.asarray(tables, dtype=float)
    sizes = tables.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        found = np.sum(tables.max(axis=-1) / sizes, axis=-1)
    for index in map(tuple, np.argwhere((sizes <= 0).any(axis=-1))):
        table = tables[index][sizes[index] > 0]
        found[index] = np.sum(table.max(axis=1) / table.sum(axis=1))
    return found


NEGATIVE_LOSS_METRICS = ("rel_loss", "max_rel_loss")
"""NMF metrics that can fall below 0 (their held-out twins too): a relative loss is measured against
``E_ℓ``, an estimate (Kassab, George, Needell et al., Def. 4.1, Remark 4.2, Algorithm 1)."""

NEGATIVE_LOSS_NOTE = (
    "A relative loss below 0 is no error: E_ℓ, the yardstick, is the mean error of a few NMFs of the group alone "
    "(Algorithm 1, T runs, each stopped by eq. (10)) — an estimate of what an NMF of the group achieves, not the best it "
    "could — so a group the shared model fits better than its own runs did on average gets a loss below 0."
)
"""Why a relative loss can be negative: said where one is shown (the charts' hover, the tables' note,
the NMF findings)."""

NEGATIVE_LOSS_HOVER = "below 0: fitted better than the mean of the group's own NMF runs (E_ℓ is an estimate)"
""":data:`NEGATIVE_LOSS_NOTE` in a chart's hover, beside the point."""


def can_be_negative(metric: str) -> bool:
    """``metric`` (or its held-out twin) is one of :data:`NEGATIVE_LOSS_METRICS`."""
    return metric.removeprefix(HELDOUT_PREFIX) in NEGATIVE_LOSS_METRICS


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
        "plain": "How unequally the groups are served. 0 means every group loses the same. Its interval "
        "follows the groups worst and best served in the full data, so it can include 0.",
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
        "formula": "cross-validated accuracy of a classifier predicting the group − 1/k",
        "plain": "How well the group can be guessed from the representation alone. With unequal "
        "group sizes a classifier can score well by always guessing the larger group; prefer the "
        "balanced version.",
        "source": "Kim & Gittens 2024, §3 / App. A.6",
    },
    "unfairness_balanced": {
        "title": "Unfairness (leakage, balanced accuracy − chance)",
        "formula": "cross-validated balanced accuracy of a classifier predicting the group − 1/k",
        "plain": "How far above chance the group can be guessed from the representation, fair to small "
        "groups: balanced_accuracy minus 1/k. 0 means no better than chance; 1 − 1/k means the group is "
        "fully revealed. A value below 0 is noise, not an improvement.",
        "source": "Kim & Gittens 2024, §3 (balanced accuracy)",
    },
    "balanced_accuracy": {
        "title": "Leakage: balanced accuracy of predicting the group",
        "formula": "mean per-group recall of a classifier (QDA by default) predicting the group from the "
        "representation, repeated stratified 5-fold cross-validation; interval: Nadeau–Bengio corrected t",
        "plain": "How well the group can be guessed from the representation alone, fair to small groups. "
        "Chance is 1/k (0.5 for two groups); 1 means the representation reveals the group completely. "
        "Whether it is above chance is tested against permuted groups (leakage_pvalue).",
        "source": "Kim & Gittens 2024, §3; Nadeau & Bengio 2003; Ojala & Garriga 2010",
    },
    "chance_balanced_accuracy": {
        "title": "Leakage: chance level",
        "formula": "mean (interval: central range) of the balanced accuracy with the representation's rows "
        "permuted against the groups (1/k without permutations)",
        "plain": "What the leakage classifier scores when the representation carries no information about "
        "the group: the line the balanced accuracy is compared with.",
        "source": "Ojala & Garriga 2010, test 1",
    },
    "leakage_pvalue": {
        "title": "Leakage: permutation p-value",
        "formula": "(1 + #{permuted balanced accuracy ≥ observed}) / (1 + permutations)",
        "plain": "How often chance alone does as well as the observed balanced accuracy. At most "
        "1 − confidence (0.05) means the group is predicted above chance.",
        "source": "Ojala & Garriga 2010, test 1",
    },
    "loss_ratio": {
        "title": "Loss ratio (worst / best group)",
        "formula": "loss_worst / loss_best (the groups worst and best served in the full data)",
        "plain": "How many times more the worst-served group loses than the best-served one; 1 is parity. "
        "Undefined (empty) when the best group's loss is 0. The gap verdict uses a tolerance on it "
        "(flag_ratio, default 1.25).",
        "source": "derived from Samadi et al. 2018, Def. 4.3",
    },
    "error_ratio": {
        "title": "Error ratio (worst group, against being served as well as the best)",
        "formula": "error_worst / (error_worst − (loss_worst − loss_best))",
        "plain": "How many times larger the worst-served group's reconstruction error is than it would be if that "
        "group lost only as much as the best-served one; 1 is parity. Unlike the ratio of two losses it stays "
        "near 1 when both losses are small next to the errors. The gap verdict's tolerance (flag_ratio) applies to it.",
        "source": "derived from Samadi et al. 2018, Def. 4.3 (this implementation)",
    },
    "loss_gap_pvalue": {
        "title": "Loss gap: permutation p-value",
        "formula": "2 (1 + #{random-group differences as extreme, on the observed side}) / (1 + 200), the worst and best "
        "group under vanilla PCA's map; a normal fit to the 200 beyond them all",
        "plain": "How often groups drawn at random from the same rows, with the same sizes, differ as much as the worst "
        "and best groups do. A small group's own PCA fits its rows' noise, so random small groups look differently "
        "served; the verdicts use this test for every pair of groups (the comparisons table), Holm-corrected.",
        "source": "this implementation (permutation test)",
    },
    "rel_error_ratio": {
        "title": "Relative error ratio (worst group, against being served as well as the best)",
        "formula": "rel_error_worst / (rel_error_worst − (rel_loss_worst − rel_loss_best))",
        "plain": "How many times larger the worst-served group's relative error is than it would be if that group "
        "lost only as much as the best-served one; 1 is parity. The gap verdict's tolerance applies to it.",
        "source": "derived from Kassab, George, Needell et al., Def. 4.1 (this implementation)",
    },
    "rel_loss_ratio": {
        "title": "Relative loss ratio (worst / best group)",
        "formula": "rel_loss_worst / rel_loss_best",
        "plain": "How many times more relative loss the worst-served group has than the best-served one; 1 is "
        "parity. Undefined when the best group's relative loss is 0 or below (E_ℓ is an estimate).",
        "source": "derived from Kassab, George, Needell et al., Def. 4.1",
    },
    "max_residual_fit": {
        "title": "Largest group residual fit",
        "formula": "max over groups of the residual fit of the group's entities",
        "plain": "How poorly the CP model reproduces the worst-served group's entities.",
        "source": "derived from Kim & Gittens 2021, App. A.6",
    },
    "residual_fit_gap": {
        "title": "Residual fit gap",
        "formula": "residual_fit_worst − residual_fit_best (groups' entities)",
        "plain": "How unequally the CP model reproduces the groups' entities; 0 is parity.",
        "source": "derived from Kim & Gittens 2021, App. A.6",
    },
    "residual_fit_ratio": {
        "title": "Residual fit ratio (worst / best group)",
        "formula": "residual_fit_worst / residual_fit_best",
        "plain": "How many times worse the worst-served group's entities are reproduced; 1 is parity.",
        "source": "derived from Kim & Gittens 2021, App. A.6",
    },
    "relative_balance": {
        "title": "Relative cluster balance",
        "formula": "balance / (smallest group's share of the rows)",
        "plain": "The least-represented group's share of its worst k-means cluster, relative to its share of "
        "the data: 1 is parity (every cluster mixes the groups as the data do), 0 a cluster without the group. "
        "Higher is fairer; the gap verdict flags values at or below 1/flag_ratio.",
        "source": "derived from Xing et al. 2021, eq. 10",
    },
    "cluster_share": {
        "title": "Share of the worst cluster",
        "formula": "min over clusters C of (|C ∩ X_g| / |C|) / (|X_g| / n), mean over k-means runs",
        "plain": "Per group: its share of the k-means cluster where it is least present, relative to its share of the "
        "data; 1 is parity, 0 a cluster without the group. Higher is fairer; the cluster-balance verdict judges each "
        "group large enough to judge against 1/flag_ratio.",
        "source": "derived from Xing et al. 2021, eq. 10 (per group)",
    },
    "leace_distortion": {
        "title": "Change made by LEACE",
        "formula": "E‖r(Z) − Z‖² / E‖Z − E[Z]‖²",
        "plain": "The share of the representation's variance that LEACE changed to erase the groups' linear "
        "information (the variant named '+ LEACE'): the least any affine map that makes every group's mean "
        "equal can change it. 0: nothing to erase; near 1: the representation was mostly the group.",
        "source": "Belrose et al. 2023, LEACE, Theorem 4.2",
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
        "largest value. Below 0 where the shared NMF fits a group better than the group's own runs "
        "did: E_ℓ is an estimate (see the note under the table).",
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
        "plain": "How unequally the groups are served by the NMF. 0 means every group loses the same. Its "
        "interval follows the groups worst and best served in the full data, so it can include 0.",
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
    "effective_rank": None, "dual_gap": "lower", "leace_distortion": "lower",
    "rel_error": "lower", "rel_loss": "lower", "own_rel_error": None, "max_rel_loss": "lower",
    "rel_loss_gap": "lower", "total_rel_error": "lower", "n_iter": None, "estimate_seconds": "lower",
    "residual_fit": "lower", "orthogonality": "lower", "nkhsic": "lower", "lam": None, "epochs": None,
    "seconds": "lower",
    "acc": "higher", "acc_std": "lower", "nmi": "higher", "nmi_std": "lower",
    "balance": "higher", "balance_std": "lower", "proportion": "lower", "proportion_std": "lower",
    "alignment_data": "higher", "alignment_protected": "lower",
    "balanced_accuracy": "lower", "chance_balanced_accuracy": None, "leakage_pvalue": None,
    "loss_ratio": "lower", "error_ratio": "lower", "loss_gap_pvalue": None,
    "rel_loss_ratio": "lower", "rel_error_ratio": "lower",
    "max_residual_fit": "lower", "residual_fit_gap": "lower", "residual_fit_ratio": "lower",
    "relative_balance": "higher", "cluster_share": "higher",
}
"""Which way is better for each metric of :data:`METRIC_DEFINITIONS`: ``"lower"``, ``"higher"``, or
``None`` for a quantity with no better direction (a parameter, an iteration count). Charts and
tables print it as “↓ better” / “↑ better”."""

HELDOUT_PREFIX = "heldout_"


def better(metric: str) -> str | None:
    """``"lower"``, ``"higher"`` or ``None`` for ``metric`` (held-out variants as their metric)."""
    base = metric[len(HELDOUT_PREFIX):] if metric.startswith(HELDOUT_PREFIX) else metric
    return METRIC_BETTER.get(base)


def metric_definition(metric: str) -> dict[str, str]:
    """:data:`METRIC_DEFINITIONS`' entry for ``metric``; a held-out metric (``heldout_loss``) is
    its metric measured on the held-out rows (``AuditConfig(holdout=…)``)."""
    if metric in METRIC_DEFINITIONS:
        return METRIC_DEFINITIONS[metric]
    base = metric.removeprefix(HELDOUT_PREFIX)
    if base != metric and base in METRIC_DEFINITIONS:
        found = dict(METRIC_DEFINITIONS[base])
        found["title"] += " (held-out rows)"
        found["plain"] += " Measured on the held-out rows with the model fitted on the others."
        return found
    return {}
