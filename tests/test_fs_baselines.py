"""Baseline selectors against their papers' formulas (dense, written out), the scikit-learn selector
contract for every selector, and the clustering metrics against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from threadpoolctl import threadpool_limits

from fairaudit import FUFS, MCFS, NDFS, SPEC, UDFS, LaplacianScore, VarianceSelector, metrics
from fairaudit.errors import ParameterError, RankError
from fairaudit.fs.baselines import heat_graph, nearest_neighbours
from fairaudit.fs.evaluation import cluster_scores


@pytest.fixture(autouse=True)
def _one_thread():
    """One BLAS/OpenMP thread, as the FS audit runs: on the shared two-core machine the default
    thread pools made these small products many times slower."""
    with threadpool_limits(limits=1):
        yield


def _data(seed=0, n=60, d=7):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d))
    X = centres[rng.integers(0, 3, n)] + rng.normal(scale=0.4, size=(n, d)) * rng.uniform(0.2, 2, d)
    return X


# ------------------------------------------------------------------ against the papers' formulas
def test_laplacian_score_matches_the_dense_formula():
    X = _data(1)
    S, _ = heat_graph(X, 5)
    S = S.toarray()
    D = np.diag(S.sum(axis=1))
    L = D - S
    one = np.ones(len(X))
    expected = []
    for f in X.T:
        f_tilde = f - (f @ D @ one) / (one @ D @ one) * one  # He et al. eq. (7)
        expected.append((f_tilde @ L @ f_tilde) / (f_tilde @ D @ f_tilde))  # eq. (8)
    fitted = LaplacianScore(3).fit(X)
    np.testing.assert_allclose(fitted.scores_, expected, rtol=1e-10)
    assert set(np.flatnonzero(fitted.get_support())) == set(np.argsort(expected)[:3])


def test_laplacian_score_graph_is_symmetric_knn_with_heat_weights():
    X = _data(2, n=30)
    S, t = heat_graph(X, 4)
    S = S.toarray()
    assert np.allclose(S, S.T) and np.all(np.diag(S) == 0)
    distances = np.linalg.norm(X[:, None] - X[None], axis=2)
    neighbours = np.argsort(distances, axis=1)[:, 1:5]
    for a in range(len(X)):
        for b in neighbours[a]:
            assert S[a, b] == pytest.approx(np.exp(-distances[a, b] ** 2 / t))
    assert (S > 0).sum(axis=1).min() >= 4


def test_identical_rows_are_neighbours_with_weight_one():
    """A repeated row (every bootstrap resample has many) is its copy's nearest neighbour at distance
    0: the edge stays, with weight exp(0) = 1, and the width t averages over it too."""
    X = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 2.0]])
    S, t = heat_graph(X, 2)
    S = S.toarray()
    assert S[0, 1] == S[1, 0] == 1.0
    squared = np.sum((X[:, None] - X[None]) ** 2, axis=2)
    edges = S > 0
    assert t == pytest.approx(squared[edges].mean())
    np.testing.assert_allclose(S[edges], np.exp(-squared[edges] / t))
    # without repeated rows the graph is the symmetrised k-NN distance matrix, as before
    Y = _data(3, n=40)
    S, t = heat_graph(Y, 4)
    distances, indices = nearest_neighbours(Y, 4)
    graph = sparse.csr_matrix((distances.ravel(), indices.ravel(), np.arange(0, 40 * 4 + 1, 4)), shape=(40, 40))
    graph = graph.maximum(graph.T).toarray()
    np.testing.assert_allclose(S.toarray(), np.where(graph > 0, np.exp(-(graph**2) / t), 0.0), rtol=1e-15)


@pytest.mark.parametrize("criterion", ["phi1", "phi2", "phi3"])
def test_spec_matches_the_dense_formula(criterion):
    X = _data(3, n=40)
    S, _ = heat_graph(X, None)
    d = S.sum(axis=1)
    root = np.sqrt(d)
    laplacian = np.eye(len(X)) - S / np.outer(root, root)  # ℒ = D^{-1/2}(D − S)D^{-1/2}
    lam, xi = np.linalg.eigh(laplacian)
    expected = []
    for f in X.T:
        f_hat = root * f / np.linalg.norm(root * f)
        phi1 = f_hat @ laplacian @ f_hat
        if criterion == "phi1":
            expected.append(phi1)
        elif criterion == "phi2":
            expected.append(phi1 / (1 - (f_hat @ xi[:, 0]) ** 2))
        else:
            expected.append(sum((2 - lam[k]) * (f_hat @ xi[:, k]) ** 2 for k in range(1, 4)))
    fitted = SPEC(2, criterion=criterion, n_clusters=4).fit(X)
    np.testing.assert_allclose(fitted.scores_, expected, rtol=1e-8, atol=1e-12)
    assert fitted.graph_ == "dense"
    order = np.argsort(expected)[::-1] if criterion == "phi3" else np.argsort(expected)
    assert set(np.flatnonzero(fitted.get_support())) == set(order[:2])


def test_dense_spec_in_kernel_blocks_equals_holding_the_similarity(monkeypatch):
    """The dense graph's width (closed form) and SPEC's products from the kernel's row blocks, never
    holding S (:func:`dense_heat_products`), against S written out: equal to rounding, whatever
    the block size."""
    from fairaudit import kernels
    from fairaudit.fs.baselines import dense_width

    X = _data(5, n=60)
    distances = ((X[:, None] - X[None]) ** 2).sum(axis=2)
    t = distances.sum() / (60 * 59)
    assert dense_width(X) == pytest.approx(t, rel=1e-13)
    np.testing.assert_allclose(heat_graph(X, None)[0], np.exp(-distances / t), rtol=1e-13, atol=0)
    S = np.exp(-distances / t)
    root = np.sqrt(S.sum(axis=1))
    F = root[:, None] * X
    F /= np.linalg.norm(F, axis=0)
    phi1 = 1.0 - np.sum(F * ((S @ (F / root[:, None])) / root[:, None]), axis=0)
    xi1 = root / np.linalg.norm(root)
    expected = phi1 / (1.0 - (xi1 @ F) ** 2)
    for block_bytes in (8 * 60 * 7, 2**18):  # 7 rows per block; one block
        monkeypatch.setattr(kernels, "BLOCK_BYTES", block_bytes)
        np.testing.assert_allclose(SPEC(2).fit(X).scores_, expected, rtol=1e-12)


def test_dense_spec_on_repeated_rows_counts_them():
    """A bootstrap resample repeats rows: the dense products are computed on the distinct rows with
    their counts (:func:`dense_heat_products`), equal to S written out over every row."""
    rng = np.random.default_rng(3)
    X = _data(6, n=50)[np.sort(rng.integers(0, 50, size=50))]
    distances = ((X[:, None] - X[None]) ** 2).sum(axis=2)
    S = np.exp(-distances / (distances.sum() / (50 * 49)))
    root = np.sqrt(S.sum(axis=1))
    F = root[:, None] * X
    F /= np.linalg.norm(F, axis=0)
    phi1 = 1.0 - np.sum(F * ((S @ (F / root[:, None])) / root[:, None]), axis=0)
    xi1 = root / np.linalg.norm(root)
    np.testing.assert_allclose(SPEC(2).fit(X).scores_, phi1 / (1.0 - (xi1 @ F) ** 2), rtol=1e-12)


def test_mcfs_uses_the_generalised_eigenvectors_and_lars():
    X = _data(4, n=80)
    fitted = MCFS(3, n_clusters=2).fit(X)
    W, _ = heat_graph(X, 5)
    W = W.toarray()
    D = np.diag(W.sum(axis=1))
    from scipy.linalg import eigh
    from sklearn.linear_model import Lars

    values = eigh(D - W, D, eigvals_only=True)  # L y = λ D y, ascending; λ_0 = 0 is the trivial one
    Y = fitted.embedding_
    for k in range(2):
        y = Y[:, k]
        lam = (y @ (D - W) @ y) / (y @ D @ y)
        assert lam == pytest.approx(values[k + 1], rel=1e-6)
        np.testing.assert_allclose((D - W) @ y, lam * D @ y, atol=1e-8)
        np.testing.assert_allclose(fitted.coef_[k], Lars(n_nonzero_coefs=3).fit(X, y).coef_)
    assert np.all((fitted.coef_ != 0).sum(axis=1) <= 3)
    np.testing.assert_allclose(fitted.scores_, np.abs(fitted.coef_).max(axis=0))


def test_constant_feature_is_ordered_last():
    X = _data(5)
    X[:, 2] = 4.0
    for selector in (LaplacianScore(2), SPEC(2), VarianceSelector(2)):
        selector.fit(X)
        assert selector.ranking_[2] == X.shape[1], type(selector).__name__
    groups = np.arange(len(X)) % 2
    fufs = FUFS(6).fit(X, sensitive_features=groups)  # more than the 5 informative columns
    assert fufs.ranking_[2] == X.shape[1] and fufs.scores_[2] == 0 and fufs.get_support().sum() == 6
    with pytest.raises(ParameterError, match="constant"):
        FUFS(1).fit(np.ones((10, 3)), sensitive_features=np.arange(10) % 2)


# ------------------------------------------------------------------ scikit-learn selector contract
@parametrize_with_checks([VarianceSelector(), LaplacianScore(), SPEC(), MCFS(n_clusters=2), UDFS(n_clusters=2), NDFS(n_clusters=2)])
def test_baselines_pass_sklearn_estimator_checks(estimator, check):
    check(estimator)


SELECTORS = [
    (VarianceSelector(3), False),
    (LaplacianScore(3), False),
    (SPEC(3), False),
    (MCFS(3, n_clusters=2), False),
    (UDFS(3, n_clusters=2), False),
    (NDFS(3, n_clusters=2, random_state=0), False),
    (FUFS(3), True),
    (FUFS(3, formulation="alignment"), True),
]


@pytest.mark.parametrize(("selector", "needs_groups"), SELECTORS, ids=lambda s: type(s).__name__)
def test_selector_contract(selector, needs_groups):
    rng = np.random.default_rng(7)
    X = pd.DataFrame(_data(6, n=50, d=6), columns=[f"c{j}" for j in range(6)])
    groups = rng.integers(0, 2, size=50)
    kwargs = {"sensitive_features": groups} if needs_groups else {}
    with pytest.raises(NotFittedError):
        clone(selector).get_support()
    fitted = clone(selector).fit(X, **kwargs)
    assert clone(fitted).get_params() == selector.get_params()
    mask = fitted.get_support()
    assert mask.dtype == bool and mask.sum() == 3
    assert list(fitted.get_support(indices=True)) == list(np.flatnonzero(mask))
    assert fitted.n_features_in_ == 6 and list(fitted.feature_names_in_) == list(X.columns)
    assert list(fitted.get_feature_names_out()) == list(X.columns[mask])
    out = fitted.transform(X)
    np.testing.assert_array_equal(out, X.to_numpy()[:, mask])
    back = fitted.inverse_transform(out)
    assert back.shape == X.shape and np.all(back[:, ~mask] == 0)
    assert sorted(fitted.ranking_) == list(range(1, 7))
    assert set(np.flatnonzero(fitted.ranking_ <= 3)) == set(np.flatnonzero(mask))
    with pytest.raises(ValueError, match="feature"):
        fitted.transform(X.iloc[:, :5])
    again = clone(selector).fit(X, **kwargs)
    np.testing.assert_array_equal(again.scores_, fitted.scores_)


def test_selectors_work_in_a_pipeline():
    X = _data(8)
    pipeline = make_pipeline(StandardScaler(), LaplacianScore(2)).fit(X)
    assert pipeline.transform(X).shape == (len(X), 2)
    groups = np.arange(len(X)) % 2
    fair = make_pipeline(StandardScaler(), FUFS(2)).fit(X, fufs__sensitive_features=groups)
    assert fair.transform(X).shape == (len(X), 2)


@pytest.mark.parametrize("selector", [VarianceSelector(9), LaplacianScore(9), SPEC(9), MCFS(9), UDFS(9), NDFS(9)], ids=lambda s: type(s).__name__)
def test_too_many_features_is_a_rank_error(selector):
    with pytest.raises(RankError, match="n_features_to_select=9"):
        selector.fit(_data(9))


def test_bad_baseline_parameters():
    with pytest.raises(ParameterError, match="n_neighbors"):
        LaplacianScore(2, n_neighbors=0).fit(_data())
    with pytest.raises(ParameterError, match="criterion"):
        SPEC(2, criterion="phi9").fit(_data())
    with pytest.raises(ParameterError, match="n_clusters"):
        MCFS(2, n_clusters=0).fit(_data())
    with pytest.raises(ParameterError, match="lam"):
        UDFS(2, lam=-1.0).fit(_data())
    with pytest.raises(ParameterError, match="alpha"):
        NDFS(2, alpha=0.0).fit(_data())


# ------------------------------------------------------------------ clustering metrics
def test_clustering_accuracy_equals_brute_force_over_all_maps():
    rng = np.random.default_rng(10)
    for _ in range(20):
        K = int(rng.integers(2, 5))
        truth = rng.integers(0, K, size=40)
        predicted = rng.integers(0, K, size=40)
        best = max(np.mean(np.array(perm)[predicted] == truth) for perm in itertools.permutations(range(K)))
        assert metrics.clustering_accuracy(truth, predicted) == pytest.approx(best)


def test_balance_and_proportion_by_hand():
    clusters = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    groups = np.array([0, 0, 0, 1, 0, 1, 1, 1, 1, 1])
    # cluster 0: 3 of group 0, 1 of group 1; cluster 1: 1 of group 0, 5 of group 1
    assert metrics.cluster_balance(clusters, groups) == pytest.approx(min(1 / 4, 1 / 6))
    assert metrics.cluster_proportion(clusters, groups) == pytest.approx(3 / 4 + 5 / 6)
    mixed = np.array([0, 1] * 5)
    assert metrics.cluster_balance(np.repeat([0, 1], 5), mixed) == pytest.approx(0.4)
    assert metrics.cluster_balance(groups, groups) == 0.0
    assert metrics.cluster_proportion(groups, groups) == pytest.approx(2.0)
    assert metrics.nmi(groups, groups) == pytest.approx(1.0)


def test_batched_kmeans_ends_at_lloyd_fixed_points_as_good_as_scikit_learn():
    from sklearn.cluster import KMeans

    from fairaudit.fs.evaluation import kmeans_labels

    X = _data(13, n=150)
    labels = kmeans_labels(X, 3, 40, random_state=0)

    def inertia(assignment):
        return sum(((X[assignment == c] - X[assignment == c].mean(0)) ** 2).sum() for c in np.unique(assignment))

    for assignment in labels:
        centres = np.array([X[assignment == c].mean(0) for c in range(3)])
        nearest = np.argmin(((X[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
        np.testing.assert_array_equal(nearest, assignment)  # Lloyd's fixed point
    ours = np.mean([inertia(a) for a in labels])
    theirs = np.mean([KMeans(3, n_init=1, random_state=r).fit(X).inertia_ for r in range(40)])
    assert ours <= 1.05 * theirs


def test_cluster_scores_are_mean_and_std_over_seeded_runs():
    X = _data(11, n=90)
    groups = np.arange(90) % 2
    labels = np.arange(90) % 3
    first = cluster_scores(X, groups, n_clusters=3, labels=labels, runs=5, random_state=1)
    assert first == cluster_scores(X, groups, n_clusters=3, labels=labels, runs=5, random_state=1)
    assert set(first) == {f"{m}{s}" for m in ("acc", "nmi", "balance", "proportion") for s in ("", "_std")}
    without = cluster_scores(X, groups, n_clusters=3, runs=5, random_state=1)
    assert "acc" not in without and without["balance"] == first["balance"]
    with pytest.raises(ParameterError, match="clusters"):
        cluster_scores(X, groups, n_clusters=1)


def test_cluster_scores_count_repeated_rows_instead_of_repeating_them():
    """A bootstrap resample's rows: each distinct row once with its count gives the k-means of the
    repeated rows — the same draws and clusterings, so the same scores (labels differ only if a
    row sits within rounding of two centres)."""
    from fairaudit.fs.evaluation import kmeans_labels

    rng = np.random.default_rng(4)
    X = _data(21, n=120)
    groups, labels = np.arange(120) % 2, np.arange(120) % 3
    rows = np.sort(rng.integers(0, 120, size=120))
    once, counts = np.unique(rows, return_counts=True)
    assert once.size < rows.size
    for K in (2, 3):
        repeated = cluster_scores(X[rows], groups[rows], n_clusters=K, labels=labels[rows], runs=10, random_state=3)
        counted = cluster_scores(X[once], groups[once], n_clusters=K, labels=labels[once], runs=10, random_state=3, counts=counts)
        assert counted == repeated
        expanded = np.repeat(kmeans_labels(X[once], K, 10, random_state=3, counts=counts), counts, axis=1)
        np.testing.assert_array_equal(expanded, kmeans_labels(X[rows], K, 10, random_state=3))
    # K is checked against the rows the counts stand for, not the distinct ones
    tiny = np.array([[0.0], [1.0]])
    assert cluster_scores(tiny, [0, 1], n_clusters=3, runs=2, counts=np.array([2, 2]))["balance"] >= 0.0


def test_kmeans_of_many_selections_together_gives_each_ones_own_labels(monkeypatch):
    """Selections of one data set fitted together (the audit's replicates) get, bit for bit, the
    labels each gets alone: the same products, the element-wise steps shared — with and without
    counts, on discrete columns (ties), with selections of several sizes and runs in batches."""
    from fairaudit.fs import evaluation
    from fairaudit.fs.evaluation import cluster_scores_many, kmeans_labels, kmeans_labels_many

    rng = np.random.default_rng(8)
    for trial, X in enumerate((rng.normal(size=(90, 5)), rng.integers(0, 3, size=(90, 5)).astype(float))):
        rows = np.sort(rng.integers(0, 90, size=90))
        once, counts = np.unique(rows, return_counts=True)
        selections = [[0], [1, 3], [3, 1], [2, 4, 0], [4], [0, 1]]
        for base, weights in ((X, None), (X[once], counts)):
            Zs = [base[:, s] for s in selections]
            for K in (2, 3):
                together = kmeans_labels_many(Zs, K, 7, random_state=trial, counts=weights)
                for Z, found in zip(Zs, together, strict=True):
                    np.testing.assert_array_equal(found, kmeans_labels(Z, K, 7, random_state=trial, counts=weights))
        groups, labels = np.arange(90) % 2, np.arange(90) % 3
        scores = cluster_scores_many([X[:, s] for s in selections], groups, n_clusters=2, labels=labels, runs=5)
        assert scores == [cluster_scores(X[:, s], groups, n_clusters=2, labels=labels, runs=5) for s in selections]
    monkeypatch.setattr(evaluation, "_BATCH_CELLS", 300)  # runs in batches, batches of several selections
    single = [cluster_scores(X[:, s], groups, n_clusters=2, labels=labels, runs=5) for s in selections]
    monkeypatch.setattr(evaluation, "_SCORED_LABELS", 1000)  # scored two selections at a time
    Zs = [X[:, [0, 1]], X[:, [2, 3]], X[:, [4]]]
    for Z, found in zip(Zs, kmeans_labels_many(Zs, 3, 9, random_state=2), strict=True):
        np.testing.assert_array_equal(found, kmeans_labels(Z, 3, 9, random_state=2))
    assert cluster_scores_many([X[:, s] for s in selections], groups, n_clusters=2, labels=labels, runs=5) == single
    assert cluster_scores_many([], groups, n_clusters=2) == []


def test_balances_and_proportions_of_many_tables_are_the_definitions():
    """The audit scores every run's table at once (``metrics.balance_from_tables``,
    ``proportion_from_tables``): the same values, bit for bit, as [Xing21] eqs. 10 and 11 written
    out one table at a time over its non-empty clusters, empty clusters and one-group tables
    included; so are the one-table functions."""

    def balance(table):  # min over non-empty clusters C and groups g of |C ∩ X_g| / |C|
        table = table[table.sum(axis=1) > 0].astype(float)
        return 0.0 if table.shape[1] < 2 else float(np.min(table / table.sum(axis=1, keepdims=True)))

    def proportion(table):  # Σ over non-empty clusters C of max_g |C ∩ X_g| / |C|
        table = table[table.sum(axis=1) > 0].astype(float)
        return float(np.sum(table.max(axis=1) / table.sum(axis=1)))

    rng = np.random.default_rng(9)
    empty = 0
    for _ in range(300):
        tables = rng.integers(0, 30, size=(int(rng.integers(1, 8)), int(rng.integers(2, 12)), int(rng.integers(1, 4))))
        tables[rng.random(tables.shape[:2]) < 0.2] = 0
        tables[:, 0, 0] += 1
        empty += int(np.any(tables.sum(axis=2) == 0))
        assert metrics.balance_from_tables(tables).tolist() == [balance(t) for t in tables]
        assert metrics.proportion_from_tables(tables).tolist() == [proportion(t) for t in tables]
        assert [metrics.balance_from_table(t) for t in tables] == [balance(t) for t in tables]
        assert [metrics.proportion_from_table(t) for t in tables] == [proportion(t) for t in tables]
    assert empty > 100
    stacked = rng.integers(0, 5, size=(3, 4, 6, 2))  # any leading shape
    assert metrics.balance_from_tables(stacked).shape == metrics.proportion_from_tables(stacked).shape == (3, 4)


def test_graph_and_embedding_are_built_once_and_shared_whatever_the_order():
    """LapScore, MCFS and NDFS share the heat graph and MCFS and NDFS the spectral embedding
    (remembered by content): each selector's result is the one it gets alone, in any order."""
    from fairaudit.fs import baselines

    X = _data(17, n=80)

    def fresh():
        baselines._GRAPHS.clear()
        baselines._EMBEDDINGS.clear()

    alone = {}
    for name, est in (("mcfs", MCFS), ("ndfs", NDFS)):
        fresh()
        alone[name] = est(3, n_clusters=2, random_state=0).fit(X).scores_
    for order in (("mcfs", "ndfs"), ("ndfs", "mcfs")):
        fresh()
        for name in order:
            est = {"mcfs": MCFS, "ndfs": NDFS}[name]
            np.testing.assert_array_equal(est(3, n_clusters=2, random_state=0).fit(X).scores_, alone[name])
        assert len(baselines._EMBEDDINGS) == 1  # one embedding for both
    first, second = heat_graph(X, 5), heat_graph(X.copy(), 5)
    assert np.shares_memory(first[0].data, second[0].data) and first[1] == second[1]  # one graph, each caller its own matrix


def test_remembered_graphs_are_shared_safely_between_threads():
    """The dashboard audits several sessions at once: the remembered graphs and embeddings are
    read and replaced from many threads without an error, and a key always gets its own value."""
    from concurrent.futures import ThreadPoolExecutor

    from fairaudit.fs.baselines import _Remembered

    remembered = _Remembered(2)

    def work(i):
        return remembered.get(i % 5, lambda: ("value", i % 5))

    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(work, range(3000)))
    assert found == [("value", i % 5) for i in range(3000)] and len(remembered) <= 2


def test_remembered_arrays_are_read_only():
    """The remembered neighbours, heat graphs and spectral embeddings are handed to every caller
    with the same data (other sessions' audits among them): an in-place edit raises instead of
    changing what the next caller reads, and the selectors that share them still fit."""
    from fairaudit.fs import baselines

    baselines._GRAPHS.clear()
    baselines._EMBEDDINGS.clear()
    X = _data(18, n=300)  # from SPARSE_EIGEN_MIN_ROWS: the sparse graph's remembered embedding
    distances, indices = baselines.nearest_neighbours(X, 5)
    graph, _ = heat_graph(X, 5)
    values, vectors, degree = baselines._spectral_embedding(graph, 3, 0)
    edits = [
        lambda: distances.__setitem__((0, 0), 1.0),
        lambda: indices.__setitem__((0, 0), 1),
        lambda: graph.data.__setitem__(0, 1.0),
        lambda: graph.indices.__setitem__(0, 1),
        lambda: graph.indptr.__setitem__(0, 1),
        lambda: np.multiply(graph.data, 2.0, out=graph.data),
        lambda: values.__setitem__(0, 1.0),
        lambda: vectors[:, 0].__imul__(-1.0),  # a view of a read-only array is read-only
        lambda: degree.__setitem__(0, 1.0),
    ]
    for edit in edits:
        with pytest.raises(ValueError, match="read-only"):
            edit()
    again = heat_graph(X.copy(), 5)[0]
    assert np.shares_memory(again.data, graph.data) and baselines._spectral_embedding(graph.copy(), 3, 0)[1] is vectors
    again.setdiag(1.0)  # a structural edit (the diagonal is not stored): the caller's own matrix only
    assert heat_graph(X, 5)[0].diagonal().sum() == 0.0 and graph.diagonal().sum() == 0.0
    for selector in (LaplacianScore(3), MCFS(3, n_clusters=2, random_state=0), SPEC(3, n_neighbors=5, criterion="phi3"),
                     UDFS(3, n_clusters=2), NDFS(3, n_clusters=2, random_state=0)):
        assert selector.fit(X).get_support().sum() == 3


def test_leakage_classifier_survives_wide_and_collinear_selections():
    """Feature selection hands the leakage metric many columns of few rows, some collinear."""
    rng = np.random.default_rng(12)
    groups = np.repeat([0, 1], [70, 20])
    wide = rng.normal(size=(90, 30)) + groups[:, None]
    collinear = np.column_stack([wide[:, :5], wide[:, :5] * 2.0])
    for Z in (wide, collinear):
        accuracy, balanced = metrics.group_prediction_scores(Z, groups, random_state=0)
        assert 0.0 <= balanced <= 1.0 and 0.0 <= accuracy <= 1.0
    assert metrics.group_prediction_scores(wide, groups, random_state=0)[1] > 0.7


def test_sparse_spectral_embedding_matches_dense_eigenvalues():
    """Above 2,000 rows the embedding uses shift-invert Lanczos on the sparse graph."""
    from fairaudit.fs.baselines import _spectral_embedding

    rng = np.random.default_rng(13)
    X = rng.normal(size=(2100, 4))
    X[:1000] += 2.5
    S, _ = heat_graph(X, 5)
    values, vectors, degree = _spectral_embedding(S, 3, 0)
    dense = S.toarray()
    normalised = dense / np.sqrt(np.outer(degree, degree))
    np.testing.assert_allclose(values, np.linalg.eigvalsh(normalised)[::-1][:3], atol=1e-8)
    np.testing.assert_allclose(normalised @ vectors, vectors * values, atol=1e-6)


def _normalised(S, degree):
    dense = S.toarray()
    return dense / np.sqrt(np.outer(degree, degree))


@pytest.mark.parametrize("min_rows", [10, 10**9])  # shift-invert Lanczos or LAPACK for the k-NN graph
def test_spectral_embedding_of_a_connected_graph_does_not_depend_on_the_solver(monkeypatch, min_rows):
    from fairaudit.fs import baselines

    X = np.random.default_rng(21).normal(size=(400, 3))
    S, _ = heat_graph(X, 5)
    assert connected_components(S)[0] == 1
    reference = np.linalg.eigh(_normalised(S, np.asarray(S.sum(axis=1)).ravel()))
    monkeypatch.setattr(baselines, "SPARSE_EIGEN_MIN_ROWS", min_rows)
    values, vectors, degree = baselines._spectral_embedding(S, 4, 0)
    np.testing.assert_allclose(values, reference[0][::-1][:4], atol=1e-12)
    expected = reference[1][:, ::-1][:, :4]
    expected *= np.sign(expected[np.argmax(np.abs(expected), axis=0), range(4)])  # the fixed sign
    np.testing.assert_allclose(vectors, expected, atol=1e-9)


@pytest.mark.parametrize("min_rows", [10, 10**9])
def test_spectral_embedding_of_a_graph_in_pieces_has_a_fixed_basis(monkeypatch, min_rows):
    """Eigenvalue 1 once per piece: any basis of it would do for a solver, so the embedding fixes
    it — D^{1/2}1 first, then the pieces' own, orthogonalised in the pieces' order; below 1 the
    pieces' own eigenvectors, largest first."""
    from fairaudit.fs import baselines

    rng = np.random.default_rng(22)
    X = np.vstack([rng.normal(size=(n, 3)) + 100.0 * shift for n, shift in ((250, 0), (230, 1), (240, 2))])
    S, _ = heat_graph(X, 5)
    monkeypatch.setattr(baselines, "SPARSE_EIGEN_MIN_ROWS", min_rows)
    values, vectors, degree = baselines._spectral_embedding(S, 5, 0)
    root = np.sqrt(degree)
    N = _normalised(S, degree)
    np.testing.assert_allclose(values[:3], 1.0, atol=1e-12)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(5), atol=1e-9)
    np.testing.assert_allclose(N @ vectors, vectors * values, atol=1e-8)
    np.testing.assert_allclose(vectors[:, 0], root / np.linalg.norm(root), atol=1e-12)
    pieces = [slice(0, 250), slice(250, 480), slice(480, 720)]
    second = root.copy()
    second[pieces[0]] *= 1.0 - root[pieces[0]] @ root[pieces[0]] / (root @ root)
    second[250:] *= -root[pieces[0]] @ root[pieces[0]] / (root @ root)  # piece 1's D^{1/2}1 minus its part along D^{1/2}1
    second /= np.linalg.norm(second)
    np.testing.assert_allclose(vectors[:, 1], second * np.sign(second[np.argmax(np.abs(second))]), atol=1e-12)
    own = sorted(((np.linalg.eigvalsh(N[p, p])[-2], i) for i, p in enumerate(pieces)), reverse=True)
    np.testing.assert_allclose(values[3:], [v for v, _ in own[:2]], atol=1e-10)
    assert np.all(vectors[pieces[own[0][1]], 3] != 0) and np.count_nonzero(vectors[:, 3]) == pieces[own[0][1]].stop - pieces[own[0][1]].start
