"""Unsupervised feature-selection baselines, written from their papers (no GPL code).

Every selector is a scikit-learn ``SelectorMixin``: ``fit(X)`` scores each feature
(``scores_``, in the paper's own direction), orders them (``ranking_``: 1 = kept first) and
keeps ``n_features_to_select`` (``support_``, ``get_support()``, ``transform``).

References
----------
[He05] X. He, D. Cai, P. Niyogi. "Laplacian Score for Feature Selection". NIPS 18, 2005
    (proceedings 2006).
[Cai10] D. Cai, C. Zhang, X. He. "Unsupervised Feature Selection for Multi-Cluster Data".
    KDD 2010.
[Zhao07] Z. Zhao, H. Liu. "Spectral Feature Selection for Supervised and Unsupervised
    Learning". ICML 2007.
[Yang11] Y. Yang, H. T. Shen, Z. Ma, Z. Huang, X. Zhou. "ℓ2,1-Norm Regularized Discriminative
    Feature Selection for Unsupervised Learning". IJCAI 2011.
[Li12] Z. Li, Y. Yang, J. Liu, X. Zhou, H. Lu. "Unsupervised Feature Selection Using Nonnegative
    Spectral Analysis". AAAI 2012.

REFS (J. Li, J. Tang, H. Liu, "Reconstruction-based Unsupervised Feature Selection: An Embedded
Approach", IJCAI 2017), the FUFS paper's fifth baseline, is not here: its text was not available
to us in full (the search tools return only the first page of it), and its reconstruction
function, graph term and solver cannot be written down faithfully from the abstract.
"""

from __future__ import annotations

import hashlib
import numbers
import threading
import warnings
from collections import OrderedDict

import numpy as np
from scipy import sparse
from scipy.linalg import cho_factor, cho_solve, eigh, lapack
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import eigsh
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lars
from sklearn.neighbors import kneighbors_graph
from sklearn.utils.validation import check_is_fitted, validate_data

from ..data._memory import read_only
from ..errors import ParameterError
from ..kernels import rbf, rbf_row_blocks, repeated_rows
from ..linalg import dense_top_eigh
from ..validation import check_rank
from ._selector import FittedSelector
from .evaluation import best_kmeans

DENSE_MAX_ROWS = 5000
"""SPEC's dense similarity matrix is used up to this many rows; above it, a k-NN graph."""


def _check_positive_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ParameterError(f"{name} must be a whole number of at least {minimum}, got {value!r}.")
    return int(value)


class _Remembered:
    """The last ``kept`` values by key, least recently used out; shared safely between threads
    (the dashboard audits several sessions' data at once). A value is computed outside the lock,
    so two threads may compute the same one; the first stored is the one kept and returned.

    Every caller with the same key gets the same arrays — another session's audit among them — so
    what is stored is made read-only (:func:`fairaudit.data._memory.read_only`): an in-place edit raises instead of
    changing what the next caller reads."""

    def __init__(self, kept: int):
        self.kept = kept
        self._values: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, compute):
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = read_only(compute())
        with self._lock:
            value = self._values.setdefault(key, value)
            self._values.move_to_end(key)
            while len(self._values) > self.kept:
                self._values.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def __len__(self) -> int:
        return len(self._values)


def _content_key(*arrays) -> str:
    """A digest of the arrays' bytes (what the remembered results are keyed by, with the shapes)."""
    digest = hashlib.blake2b(digest_size=16)
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


_GRAPHS = _Remembered(2)


def _graphs_of(X: np.ndarray, k: int) -> dict:
    """What has been built on ``X`` with ``k`` neighbours (the neighbours, heat graphs by width),
    remembered for the last two matrices by content: in an audit LapScore, MCFS, UDFS and NDFS
    build the same graph on the same rows (credit, 30,000 rows: 3 s each; a bootstrap replicate of
    the default sample builds the heat graph three times)."""
    X = np.ascontiguousarray(X, dtype=float)

    def build() -> dict:
        graph = kneighbors_graph(X, k, mode="distance", include_self=False)
        return {"neighbours": (graph.data.reshape(X.shape[0], k), graph.indices.reshape(X.shape[0], k))}

    return _GRAPHS.get((X.shape, int(k), _content_key(X)), build)


def nearest_neighbours(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Distances and indices ``(n, k)`` of each row's ``k`` nearest other rows (scikit-learn's
    ``NearestNeighbors``), remembered by content (:func:`_graphs_of`)."""
    return _graphs_of(X, k)["neighbours"]


def heat_graph(X: np.ndarray, n_neighbors: int | None, t="auto") -> tuple[sparse.csr_matrix | np.ndarray, float]:
    """Heat-kernel affinity ``S_ab = exp(−‖x_a − x_b‖² / t)`` ([He05] §2, step 2).

    With ``n_neighbors`` an edge joins ``a`` and ``b`` when either is among the other's
    nearest neighbours (sparse, symmetric, no self loops); ``None`` gives the dense all-pairs
    matrix (diagonal 1, as in [Zhao07]). ``t="auto"`` is the mean squared distance over the
    graph's edges (our choice; [He05] leave ``t`` as a parameter). The sparse graph is remembered
    with the neighbours (:func:`_graphs_of`) and shared: callers only read it.
    """
    n = X.shape[0]
    if n_neighbors is None:
        t = dense_width(X, t)
        return rbf(X, X, 1.0 / t), t
    k = min(int(n_neighbors), n - 1)
    built = _graphs_of(X, k)
    found = built.get(("heat", t))
    if found is None:
        found = built[("heat", t)] = read_only(_heat_graph(*built["neighbours"], t))
    graph, width = found
    # Each caller its own matrix over the shared read-only arrays: an edit of the values raises, and
    # one that rebuilds the structure (setdiag on a missing diagonal, eliminate_zeros) changes only
    # the caller's matrix, never the remembered one.
    return sparse.csr_matrix((graph.data, graph.indices, graph.indptr), shape=graph.shape, copy=False), width


def _heat_graph(distances: np.ndarray, indices: np.ndarray, t) -> tuple[sparse.csr_matrix, float]:
    graph = _symmetric_knn(distances, indices)
    squared = graph.data**2
    if t == "auto":
        t = float(squared.mean()) if squared.size else 1.0
    t = t if t > 0 else 1.0
    graph.data = np.exp(-squared / t)
    return graph, float(t)


def _symmetric_knn(distances: np.ndarray, indices: np.ndarray) -> sparse.csr_matrix:
    """The k-NN distances ``(n, k)`` as a symmetric sparse matrix: an entry wherever either row is
    among the other's nearest, with the larger of the two distances found for the pair (sorted
    indices, as ``graph.maximum(graph.T)`` gives them). Identical rows are neighbours at distance 0
    and keep their entry, which SciPy's sparse arithmetic would drop as an explicit zero — their
    heat-kernel weight is ``exp(0) = 1``, the strongest edge of the graph. (It used to vanish: a
    bootstrap resample repeats about a third of its rows, so its graphs lost many of their
    strongest edges and fell apart into components; the 4,165-row credit table has 12 repeated
    rows.)"""
    n, k = distances.shape
    rows = np.repeat(np.arange(n), k)
    cols = indices.ravel()
    keys = np.concatenate([rows * n + cols, cols * n + rows])
    values = np.concatenate([distances.ravel(), distances.ravel()])
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    first = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    data = np.maximum.reduceat(values, first)
    kept = keys[first]
    indptr = np.searchsorted(kept // n, np.arange(n + 1))
    return sparse.csr_matrix((data, kept % n, indptr), shape=(n, n))


def dense_width(X: np.ndarray, t="auto") -> float:
    """The heat kernel's ``t`` for the dense graph: ``"auto"`` is the mean squared distance over
    all pairs of distinct rows, ``(2n Σ‖x‖² − 2‖Σx‖²) / (n(n − 1))`` in closed form (no n × n
    distances); a non-positive width becomes 1."""
    if t == "auto":
        n = X.shape[0]
        total = 2.0 * n * float(np.einsum("ij,ij->", X, X)) - 2.0 * float(np.sum(X.sum(axis=0) ** 2))
        t = max(total, 0.0) / max(n * (n - 1), 1)
    return float(t) if t > 0 else 1.0


def dense_heat_products(X: np.ndarray, t: float, right) -> tuple[np.ndarray, np.ndarray]:
    """``(degree, S @ right(degree))`` of the dense heat kernel ``S = exp(−‖x_a − x_b‖²/t)``
    without holding ``S``: two passes over its row blocks (:func:`fairaudit.kernels.rbf_row_blocks`),
    the first for the degrees ``S1``, the second for the product with the thin matrix ``right``
    builds from them. On the 4,165-row credit table SPEC's scores took 0.98 s (0.24 s once the
    process had the memory) holding ``S`` and its temporaries, 139 MB each.

    Repeated rows (a bootstrap resample's) are kept once with their counts ``c``
    (:func:`fairaudit.kernels.repeated_rows`): copies have the same kernel row, degree and row of
    ``right``'s matrix ``G`` (a function of a row and its degree, normalised over every row), so
    ``S1 = S_d c`` and ``S G = S_d (c ∘ G_d)`` over the distinct rows, gathered back — 0.4 of the
    kernel cells on a resample."""
    found = repeated_rows(X)
    rows, counts, inverse = (X, None, None) if found is None else found
    degree = np.empty(rows.shape[0])
    for block_rows, block in rbf_row_blocks(rows, rows, 1.0 / t):
        degree[block_rows] = block.sum(axis=1) if counts is None else block @ counts
    if counts is None:
        G = right(degree)
    else:
        first = np.empty(rows.shape[0], dtype=np.intp)
        first[inverse[::-1]] = np.arange(X.shape[0])[::-1]  # each distinct row's first occurrence
        degree = degree[inverse]
        G = right(degree)[first] * counts[:, None]
    product = np.empty((rows.shape[0], G.shape[1]))
    for block_rows, block in rbf_row_blocks(rows, rows, 1.0 / t):
        np.matmul(block, G, out=product[block_rows])
    return degree, (product if counts is None else product[inverse])


class _ScoreSelector(FittedSelector):
    """Shared machinery: validation, ordering by score, the selector interface."""

    higher_is_better = True

    def _n_select(self, d: int) -> int:
        if self.n_features_to_select is None:
            return max(1, d // 2)
        return check_rank(self.n_features_to_select, d, "n_features_to_select")

    def fit(self, X, y=None, **fit_params):
        """Score every feature of ``X`` (``y`` and ``sensitive_features`` are ignored: unsupervised)."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        m = self._n_select(X.shape[1])
        scores = np.asarray(self._scores(X, m), dtype=float)
        order = self._order(scores)
        self.scores_ = scores
        self.ranking_ = np.empty(X.shape[1], dtype=int)
        self.ranking_[order] = np.arange(1, X.shape[1] + 1)
        self.support_ = self.ranking_ <= m
        return self

    def _scores(self, X: np.ndarray, m: int) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _order(self, scores: np.ndarray) -> np.ndarray:
        key = scores if self.higher_is_better else -scores
        key = np.where(np.isnan(key), -np.inf, key)
        return np.argsort(-key, kind="stable")  # ties keep column order

    def ranking_for(self, m: int) -> np.ndarray:
        """The feature order (best first) of a selection of ``m`` features. The score of every
        selector here but MCFS does not depend on ``m``: the fitted order, whatever ``m``."""
        return np.argsort(self.ranking_, kind="stable")



class VarianceSelector(_ScoreSelector):
    """Keep the features with the largest variance (the classic unsupervised baseline).

    Parameters
    ----------
    n_features_to_select : int or None, default=None
        ``None`` keeps half of the features.

    Attributes
    ----------
    scores_ : ndarray (n_features,)
        Each feature's variance (higher = kept first).
    ranking_, support_ : see the module docstring.
    """

    def __init__(self, n_features_to_select=None):
        self.n_features_to_select = n_features_to_select

    def _scores(self, X, m):
        return X.var(axis=0)


class LaplacianScore(_ScoreSelector):
    """Laplacian Score ([He05], Algorithm / eqs. 5–8): keep features that respect the data's
    local neighbourhood structure.

    A k-nearest-neighbour graph with heat-kernel weights ``S`` gives ``D = diag(S1)`` and
    ``L = D − S``; each feature ``f`` is centred in the ``D`` inner product,
    ``f̃ = f − (fᵀD1 / 1ᵀD1) 1``, and scored ``L_r = f̃ᵀ L f̃ / f̃ᵀ D f̃``. *Smaller* is better
    (a feature that varies little along graph edges but much overall). A constant feature has
    no score (``nan``) and is ordered last.

    Parameters
    ----------
    n_features_to_select : int or None, default=None
    n_neighbors : int, default=5
        ``k`` of the graph ([He05] use 5).
    t : "auto" or float, default="auto"
        Heat-kernel width (see :func:`heat_graph`).

    Attributes
    ----------
    scores_ : ndarray (n_features,)
        The Laplacian score of each feature (smaller = kept first).
    t_ : float
    """

    higher_is_better = False

    def __init__(self, n_features_to_select=None, *, n_neighbors=5, t="auto"):
        self.n_features_to_select = n_features_to_select
        self.n_neighbors = n_neighbors
        self.t = t

    def _scores(self, X, m):
        k = _check_positive_int(self.n_neighbors, "n_neighbors")
        S, self.t_ = heat_graph(X, k, self.t)
        degree = np.asarray(S.sum(axis=1)).ravel()
        centred = X - (degree @ X / degree.sum())[None, :]
        spread = degree @ (centred * centred)  # f̃ᵀ D f̃
        smooth = spread - np.sum(centred * (S @ centred), axis=0)  # f̃ᵀ (D − S) f̃
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = smooth / spread
        return np.where(spread > 1e-12 * max(spread.max(), 1e-300), scores, np.nan)


SPARSE_EIGEN_MIN_ROWS = 200
"""From this many rows the leading eigenvectors of a sparse (k-NN) graph are found by shift-invert
Lanczos, below it (and for the dense graph) by LAPACK's subset driver. Measured on the default
sample's graph (600 rows, one thread): a full ``numpy.linalg.eigh`` 30–35 ms, LAPACK's subset
driver (``evr``) 12 ms, shift-invert Lanczos 3.5–5 ms — the same vectors to 2·10⁻¹⁵ (up to sign),
the same eigenvalues to 3·10⁻¹⁶. A replicate of the feature-selection audit computes two."""


_EMBEDDINGS = _Remembered(2)


def _spectral_embedding(S, n_vectors: int, random_state) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_compute_spectral_embedding`, remembered for the last two sparse graphs by content
    (with the number of vectors and the seed): MCFS and NDFS compute the same one on the same
    graph in an audit (NDFS asks for one vector more than it uses, as MCFS does; 4 ms each on a
    bootstrap replicate of the default sample). Callers only read the arrays."""
    if not sparse.issparse(S):
        return _compute_spectral_embedding(S, n_vectors, random_state)
    S = S.tocsr()
    key = (S.shape, int(n_vectors), repr(random_state), _content_key(S.data, S.indices, S.indptr))
    return _EMBEDDINGS.get(key, lambda: _compute_spectral_embedding(S, n_vectors, random_state))


def _compute_spectral_embedding(S, n_vectors: int, random_state) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``n_vectors`` leading eigenpairs of ``D^{-1/2} S D^{-1/2}`` (largest first) and the
    degrees.

    The first vector is the trivial one, ``D^{1/2}1`` normalised (eigenvalue 1). A graph in ``c``
    pieces (connected components with an edge) has eigenvalue 1 ``c`` times, and any basis of that
    eigenspace is as good to a solver — so LAPACK and Lanczos return different ones and which
    "second" eigenvector MCFS regresses on would be the solver's choice (a bootstrap resample's
    k-NN graph falls apart in about half the replicates: a row repeated more often than it has
    neighbours is its own piece). The basis is therefore fixed here: ``D^{1/2}1``, then each
    piece's ``D^{1/2}1_C`` in the order of its first row, made orthogonal to the ones before; the
    eigenvalues below 1 come from each piece's own eigenpairs (the graph is block diagonal), largest
    first, ties in piece order. Each vector's sign is fixed too (its largest entry in magnitude
    positive)."""
    degree = np.asarray(S.sum(axis=1)).ravel()
    inv_sqrt = 1.0 / np.sqrt(np.maximum(degree, 1e-300))
    if sparse.issparse(S):
        normalised = (sparse.diags(inv_sqrt) @ S @ sparse.diags(inv_sqrt)).tocsr()
    else:
        normalised = inv_sqrt[:, None] * S * inv_sqrt[None, :]
    pieces, labels = connected_components(S, directed=False)
    if pieces == 1:
        values, vectors = _leading_eigenpairs(normalised, n_vectors, random_state)
    else:
        values, vectors = _leading_by_piece(normalised, labels, pieces, np.sqrt(degree), n_vectors, random_state)
    return values, _fixed_signs(vectors), degree


def _leading_eigenpairs(M, k: int, random_state) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenpairs of the normalised adjacency ``M`` (largest first)."""
    n = M.shape[0]
    if not sparse.issparse(M) or n < SPARSE_EIGEN_MIN_ROWS or k >= n - 1:
        return dense_top_eigh(M.toarray() if sparse.issparse(M) else M, k)
    # The wanted eigenvalues of the normalised adjacency cluster near 1, where plain Lanczos
    # converges slowly (minutes at 30,000 rows): shift-invert on the normalised Laplacian
    # I − D^{-1/2} S D^{-1/2}, whose smallest eigenvalues they are. σ just below 0 keeps it
    # invertible and spreads the tiny eigenvalues apart (1/(λ − σ)): credit's k-NN graph has
    # eigenvalues 0, 0, 1.2e-8, … — σ = −10⁻² left them within 1 % of each other after the
    # shift (hundreds of CPU seconds, 2,000 Lanczos iterations per call); σ = −10⁻⁶: 2.8 s.
    start = np.random.default_rng(random_state).normal(size=n)
    laplacian = (sparse.identity(n, format="csc") - sparse.csc_matrix(M)).tocsc()
    # A wide Krylov space (ncv) matters: near-disconnected graphs (duplicate rows) have
    # clusters of tiny eigenvalues that a narrow one resolves only after minutes.
    ncv = min(n, max(4 * k, 40))
    lam, vectors = eigsh(laplacian, k=k, sigma=-1e-6, which="LM", v0=start, ncv=ncv, tol=1e-8)
    order = np.argsort(lam, kind="stable")
    return 1.0 - lam[order], vectors[:, order]


def _leading_by_piece(M, labels, pieces: int, root: np.ndarray, k: int, random_state) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_leading_eigenpairs` of a graph in several pieces, in the fixed basis of
    :func:`_spectral_embedding`. A row without an edge has eigenvalue 0 (its unit vector)."""
    n = M.shape[0]
    members = [np.flatnonzero(labels == p) for p in range(pieces)]
    linked = [rows for rows in members if np.any(root[rows] > 0)]
    indicators = np.zeros((n, len(linked) + 1))
    indicators[:, 0] = root
    for j, rows in enumerate(linked):
        indicators[rows, j + 1] = root[rows]
    ones = np.linalg.qr(indicators)[0][:, : min(len(linked), k)]  # D^{1/2}1, then each piece's, orthogonalised
    found = [(1.0, column) for column in ones.T]
    rest = k - len(found)
    if rest > 0:
        candidates = []
        for rows in members:
            if not np.any(root[rows] > 0):
                candidates += [(0.0, rows[[i]], np.ones(1)) for i in range(len(rows))]
                continue
            count = min(rest + 1, len(rows))
            values, vectors = _leading_eigenpairs(M[rows][:, rows], count, random_state)
            candidates += [(float(v), rows, vectors[:, i]) for i, v in enumerate(values[1:], start=1)]
        candidates.sort(key=lambda item: -item[0])  # stable: ties keep the pieces' order
        for value, rows, part in candidates[:rest]:
            column = np.zeros(n)
            column[rows] = part
            found.append((value, column))
    values = np.array([value for value, _ in found])
    return values, np.column_stack([column for _, column in found])


def _fixed_signs(vectors: np.ndarray) -> np.ndarray:
    """Each column times ±1 so that its largest entry in magnitude is positive (the first such
    entry on ties)."""
    peaks = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])]
    return vectors * np.where(peaks < 0, -1.0, 1.0)


class MCFS(_ScoreSelector):
    """Multi-Cluster Feature Selection ([Cai10], §3, eqs. 2–5).

    1. A k-NN graph with heat-kernel weights ``W``; ``D = diag(W1)``, ``L = D − W``.
    2. The ``K = n_clusters`` smallest non-trivial generalised eigenvectors ``L y = λ D y``
       (the spectral embedding; computed as ``y = D^{-1/2} v`` from the leading eigenvectors
       of ``D^{-1/2} W D^{-1/2}``, dropping the trivial one).
    3. For each ``y_k``, a sparse regression ``min ‖y_k − X a_k‖²`` with ``m`` non-zero
       coefficients by LARS (the cardinality-constrained lasso of eq. 4; scikit-learn's
       :class:`~sklearn.linear_model.Lars`).
    4. ``MCFS(j) = max_k |a_k,j|``; keep the ``m`` largest.

    The score depends on ``m`` (step 3). LARS adds one feature per step, so the coefficients
    with ``m' < m`` non-zeros are the path's step ``m'``: :meth:`ranking_for` gives the selection
    of any smaller size from one fit (graph, eigenvectors and LARS path computed once; checked
    equal to a fit at ``m'`` in the tests).

    Parameters
    ----------
    n_features_to_select : int or None, default=None
    n_clusters : int, default=5
        ``K``: number of eigenvectors (the number of clusters expected).
    n_neighbors : int, default=5
    t : "auto" or float, default="auto"
    random_state : int or None
        Seeds the sparse eigen-solver's start vector (large data only).

    Attributes
    ----------
    scores_ : ndarray (n_features,)
        MCFS score (higher = kept first).
    coef_ : ndarray (n_clusters, n_features)
        The sparse coefficients ``a_k``.
    embedding_ : ndarray (n_samples, n_clusters)
        The eigenvectors ``y_k`` (step 2).
    """

    def __init__(self, n_features_to_select=None, *, n_clusters=5, n_neighbors=5, t="auto", random_state=None):
        self.n_features_to_select = n_features_to_select
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.t = t
        self.random_state = random_state

    def _scores(self, X, m):
        K = _check_positive_int(self.n_clusters, "n_clusters")
        k = _check_positive_int(self.n_neighbors, "n_neighbors")
        n = X.shape[0]
        K = min(K, n - 2)
        W, self.t_ = heat_graph(X, k, self.t)
        _, vectors, degree = _spectral_embedding(W, K + 1, self.random_state)
        embedding = vectors[:, 1:] / np.sqrt(np.maximum(degree, 1e-300))[:, None]
        paths = []
        for target in embedding.T:
            model = Lars(n_nonzero_coefs=m, fit_intercept=True)
            model.fit(X, target)
            paths.append(model.coef_path_)
        self._paths = paths
        self.coef_ = self._coefficients(m)
        self.embedding_ = embedding
        return np.max(np.abs(self.coef_), axis=0)

    def _coefficients(self, m: int) -> np.ndarray:
        """``a_k`` with ``m`` non-zeros: step ``m`` of each LARS path (its end if it stopped sooner)."""
        return np.array([path[:, min(m, path.shape[1] - 1)] for path in self._paths])

    def ranking_for(self, m: int) -> np.ndarray:
        check_is_fitted(self, "support_")
        if m > int(self.support_.sum()):
            raise ParameterError(f"ranking_for({m}) needs a fit with n_features_to_select ≥ {m}.")
        return self._order(np.max(np.abs(self._coefficients(m)), axis=0))


class SPEC(_ScoreSelector):
    """Spectral feature selection, unsupervised ([Zhao07], §3–4).

    Similarity ``S`` (RBF, all pairs), ``D = diag(S1)``, normalised Laplacian
    ``ℒ = D^{-1/2} (D − S) D^{-1/2}`` with eigenpairs ``(λ_k, ξ_k)`` (``ξ_1 ∝ D^{1/2} 1``,
    ``λ_1 = 0``). Each feature becomes ``f̂ = D^{1/2} f / ‖D^{1/2} f‖`` and is scored

    * ``"phi1"`` (eq. 5): ``f̂ᵀ ℒ f̂`` — smaller is better;
    * ``"phi2"`` (eq. 6, default): ``f̂ᵀ ℒ f̂ / (1 − (f̂ᵀ ξ_1)²)`` — smaller is better (removes
      the trivial component);
    * ``"phi3"`` (eq. 7): ``Σ_{k=2}^{K} (2 − λ_k) (f̂ᵀ ξ_k)²`` — larger is better.

    Parameters
    ----------
    n_features_to_select : int or None, default=None
    criterion : {"phi1", "phi2", "phi3"}, default="phi2"
    n_clusters : int, default=5
        ``K`` of ``phi3``.
    n_neighbors : "auto", int or None, default="auto"
        ``None``: the paper's dense similarity; an int: a k-NN graph (sparse). ``"auto"``: dense
        up to 5,000 rows, else 10 neighbours (ours: the dense matrix needs n² memory).
    t : "auto" or float, default="auto"
        Width ``2σ²`` of the RBF similarity (see :func:`heat_graph`).
    random_state : int or None

    Attributes
    ----------
    scores_ : ndarray (n_features,)
    graph_ : str
        "dense" or "k-NN (k neighbours)": which similarity was used.
    """

    CRITERIA = ("phi1", "phi2", "phi3")

    def __init__(self, n_features_to_select=None, *, criterion="phi2", n_clusters=5, n_neighbors="auto", t="auto", random_state=None):
        self.n_features_to_select = n_features_to_select
        self.criterion = criterion
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.t = t
        self.random_state = random_state

    @property
    def higher_is_better(self):  # phi3 is a "larger is better" score
        return self.criterion == "phi3"

    def _scores(self, X, m):
        if self.criterion not in self.CRITERIA:
            raise ParameterError(f"criterion must be one of {', '.join(self.CRITERIA)}, got {self.criterion!r}.")
        n = X.shape[0]
        neighbours = self.n_neighbors
        if neighbours == "auto":
            neighbours = None if n <= DENSE_MAX_ROWS else 10
        elif neighbours is not None:
            neighbours = _check_positive_int(neighbours, "n_neighbors")
        self.graph_ = "dense" if neighbours is None else f"k-NN ({neighbours} neighbours)"

        if neighbours is None and self.criterion != "phi3":  # only S's products are needed, not S
            self.t_ = dense_width(X, self.t)
            degree, SG = dense_heat_products(X, self.t_, lambda degree: (1.0 / np.sqrt(degree))[:, None] * _spec_features(X, degree)[0])
        else:
            S, self.t_ = heat_graph(X, neighbours, self.t)
            degree, SG = np.asarray(S.sum(axis=1)).ravel(), None
        F, valid, root = _spec_features(X, degree)
        inv_root = 1.0 / root
        if SG is None:
            SG = S @ (inv_root[:, None] * F)
        SF = SG * inv_root[:, None]  # D^{-1/2} S D^{-1/2} f̂
        phi1 = 1.0 - np.sum(F * SF, axis=0)  # f̂ᵀ ℒ f̂ with ‖f̂‖ = 1
        if self.criterion == "phi1":
            scores = phi1
        elif self.criterion == "phi2":
            xi1 = root / np.linalg.norm(root)
            trivial = (xi1 @ F) ** 2
            with np.errstate(divide="ignore", invalid="ignore"):
                scores = phi1 / (1.0 - trivial)
            scores = np.where(1.0 - trivial > 1e-12, scores, np.nan)
        else:
            K = min(_check_positive_int(self.n_clusters, "n_clusters", 2), n - 1)
            values, vectors, _ = _spectral_embedding(S, K, self.random_state)
            lam = 1.0 - values  # eigenvalues of ℒ, ascending
            projections = (vectors.T @ F) ** 2
            scores = np.sum((2.0 - lam[1:, None]) * projections[1:], axis=0)
        return np.where(valid, scores, np.nan)


def _spec_features(X: np.ndarray, degree: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(F̂, valid, D^{1/2}1)``: each feature ``f̂ = D^{1/2} f / ‖D^{1/2} f‖`` ([Zhao07] §3), which
    features are not 0 there, and the degrees' square roots."""
    root = np.sqrt(degree)
    F = root[:, None] * X
    norms = np.linalg.norm(F, axis=0)
    valid = norms > 0
    return F / np.where(valid, norms, 1.0), valid, root


def _cholesky(A: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_factor(A)[0]`` (upper factor): the same LAPACK ``potrf`` call without the
    wrapper's checks, which cost 7 of its 8 µs on NDFS's ``d × d`` systems (two solves and a
    factorisation per iteration, about 50 iterations per fit)."""
    factor, info = lapack.dpotrf(A, lower=False, clean=False)
    if info != 0:
        raise np.linalg.LinAlgError(f"the matrix is not positive definite (LAPACK potrf info={info}).")
    return factor


def _cholesky_solve(factor: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_solve((factor, False), B)``: the same LAPACK ``potrs`` call."""
    solution, info = lapack.dpotrs(factor, B, lower=False)
    if info != 0:
        raise ValueError(f"LAPACK potrs: illegal value in argument {-info}.")
    return solution


def _row_norms(W: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(W * W, axis=1))


DENSE_EIGEN_MAX = 600
"""UDFS solves its d × d eigenproblem densely when ``d ≤ max(600, n)``; above (wide data) it uses
``XᵀMX = UUᵀ`` of rank ≤ n and shift-invert Lanczos on ``D + UUᵀ`` (Woodbury, O(d n) per
product): a dense 4,252-column eigenproblem (toxicity) took 150 s per iteration."""


def _smallest_eigenvectors(A, diagonal: np.ndarray, c: int) -> np.ndarray:
    """The ``c`` eigenvectors of ``A + diag(diagonal)`` with the smallest eigenvalues, where ``A``
    is a dense PSD matrix or ``("factor", U)`` for ``A = UUᵀ``.

    For the factor: ``A + D ⪰ D``, so ``σ`` just below ``min(D)`` makes ``A + D − σI`` positive
    definite and its inverse (Woodbury: ``E⁻¹ − E⁻¹U(I + UᵀE⁻¹U)⁻¹UᵀE⁻¹``, ``E = D − σI``) has the
    wanted vectors as its largest eigenvectors, found by Lanczos (``eigsh``, fixed start)."""
    if not isinstance(A, tuple):
        return eigh(A + np.diag(diagonal), subset_by_index=[0, c - 1])[1]
    from scipy.sparse.linalg import LinearOperator, eigsh

    U = A[1]
    d, r = U.shape
    low = float(diagonal.min())
    sigma = low - 1e-6 * max(abs(low), 1e-12)
    inverse = 1.0 / (diagonal - sigma)
    EU = inverse[:, None] * U
    core = cho_factor(np.eye(r) + U.T @ EU)

    def apply(v):
        v = v.reshape(d, -1)
        return inverse[:, None] * v - EU @ cho_solve(core, EU.T @ v)

    operator = LinearOperator((d, d), matvec=apply, matmat=apply, dtype=float)
    start = np.full(d, 1.0 / np.sqrt(d))
    _, vectors = eigsh(operator, k=c, which="LA", v0=start, tol=1e-10, ncv=min(d, max(4 * c + 1, 20)))
    return vectors


ZERO_ROW_RTOL = 1e-9
"""A row of an ℓ2,1-regularised ``W`` whose norm is at most this fraction of the largest row's is
one the reweighting drove to zero: its norm is rounding noise (UDFS on the default sample, γ = 1:
two rows of norm 1, eight between 1e-16 and 1e-10, in an order that changed with ``tol``)."""


def _check_real(value, name: str, *, positive: bool) -> float:
    bad = isinstance(value, bool) or not isinstance(value, numbers.Real) or not (value > 0 if positive else value >= 0)
    if bad or not np.isfinite(value):
        kind = "positive" if positive else "non-negative"
        raise ParameterError(f"{name} must be a finite {kind} number, got {value!r}.")
    return float(value)


def _settled(history: list[float], tol: float) -> bool:
    """The stopping rule of UDFS and NDFS (the papers: "until convergence"; ours): the objective
    changed by at most ``tol`` relative to ``max(1, |previous|)`` in the last iteration."""
    return len(history) > 1 and abs(history[-2] - history[-1]) <= tol * max(1.0, abs(history[-2]))


def _warn_unsettled(name: str, max_iter: int, tol: float) -> None:
    warnings.warn(
        f"{name} stopped after max_iter={max_iter} iterations before its objective settled (tol={tol}); "
        "raise max_iter for a tighter optimum.",
        ConvergenceWarning,
        stacklevel=5,  # the caller of fit
    )


class _L21Selector(_ScoreSelector):
    """UDFS and NDFS: features ranked by the row norms ``‖w^j‖`` of an ℓ2,1-regularised ``W``
    ([Yang11] and [Li12]: sort the features by ``‖w^j‖`` in descending order).

    Ours where the papers are silent:

    * The iteratively reweighted solution drives all but a few rows to zero (UDFS keeps ``c``
      rows when γ outweighs ``XᵀMX``), and the paper's order among those is rounding noise. Rows
      at most :data:`ZERO_ROW_RTOL` of the largest tie at zero and are ordered by the first
      iterate's row norms (``initial_scores_``: the solution before any reweighting, ``D = I``),
      then by column. The other rows keep the paper's order.
    * Constant columns are left out of the fit, scored 0 and ordered last (as FUFS here does).
      Both criteria would otherwise prefer them: UDFS's ``M 1 = 0`` gives a constant column
      zero cost, and NDFS's ``XW`` has no intercept, which a constant column supplies. GOOGLE+
      has 659 constant columns of 1,695.
    """

    def _scores(self, X, m):
        varying = np.ptp(X, axis=0) > 0
        if not varying.any():
            raise ParameterError("every column of X is constant; there is nothing to select from.")
        norms, initial, W = self._fit_l21(X[:, varying])
        d = X.shape[1]
        self.initial_scores_ = np.full(d, np.nan)
        self.initial_scores_[varying] = initial
        self.coef_ = np.zeros((d, W.shape[1]))
        self.coef_[varying] = W
        scores = np.zeros(d)
        scores[varying] = norms
        return scores

    def _fit_l21(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
        """``(‖w^j‖ at the end, ‖w^j‖ of the first iterate, W)`` on non-constant columns."""
        raise NotImplementedError

    def _order(self, scores: np.ndarray) -> np.ndarray:
        primary = np.where(scores > ZERO_ROW_RTOL * scores.max(), scores, 0.0)
        secondary = np.nan_to_num(self.initial_scores_, nan=-np.inf)  # constant columns last
        return np.lexsort((np.arange(scores.size), -secondary, -primary))


class UDFS(_L21Selector):
    """ℓ2,1-norm regularised discriminative feature selection ([Yang11] §3, Algorithm 1).

    [Yang11] writes samples as columns; fairaudit's rows are samples, so the paper's ``X`` is our
    ``Xᵀ`` and every formula here is the paper's transposed.

    1. **Local cliques.** Row ``x_i`` and its ``k`` nearest neighbours form ``X_i`` (``(k+1) × d``),
       centred ``X̃_i = H_{k+1} X_i`` with ``H_{k+1} = I − 11ᵀ/(k+1)``; ``S_i`` (``n × (k+1)``)
       selects them, so ``G_(i) = S_iᵀ G`` for the scaled cluster indicator ``G`` (``GᵀG = I``).
    2. **Local discriminative score** ``DS_i = Tr[(S_t^(i) + λI)^{-1} S_b^(i)]`` with the local total
       scatter ``S_t^(i) = X̃_iᵀX̃_i`` and between-cluster scatter ``S_b^(i) = X̃_iᵀG_(i)G_(i)ᵀX̃_i``.
       ``Σ_i DS_i = Σ_i Tr(G_(i)ᵀ H_{k+1} G_(i)) − λ Tr(Gᵀ M G)`` (tested) with
       ``M = Σ_i S_i H_{k+1} (X̃_i X̃_iᵀ + λI)^{-1} H_{k+1} S_iᵀ`` (the paper's ``X̃_iᵀX̃_i``: the
       ``(k+1) × (k+1)`` Gram matrix of the clique), and the paper maximises the score through
       ``min Tr(Gᵀ M G)``.
    3. **Objective.** With the linear classifier ``G = XW``:
       ``min_{WᵀW = I} Tr(Wᵀ XᵀMX W) + γ ‖W‖_{2,1}``.
    4. **Algorithm 1.** ``D = I``; repeat: ``W`` = the ``c`` eigenvectors of ``XᵀMX + γD`` with the
       smallest eigenvalues, ``D_jj = 1 / (2‖w^j‖)``; until convergence. The objective never
       increases ([Yang11]'s convergence theorem; ``objective_history_``, tested).
    5. Features are ranked by ``‖w^j‖``, largest first.

    The paper's full text was not available to this project; the formulas are written from
    [Yang11] as published and checked against independent computations (``M`` with explicit
    selection matrices and loops, the fixed point of step 4, monotonicity; ``tests/test_fs_udfs_ndfs.py``).
    Equation numbers are therefore not cited. ``M 1 = 0`` (``H 1 = 0``), so the selection does not
    depend on the data's origin.

    Where the paper is silent (ours, ``docs/fs.md``): the stopping rule (the objective changed by
    at most ``tol`` relative, or ``max_iter`` iterations, with a ``ConvergenceWarning``); the order
    of the rows the reweighting drove to zero (:class:`_L21Selector`); ``γ = 1`` by default (the
    paper tunes γ with the labels over {10⁻⁹, 10⁻⁶, 10⁻³, 1, 10³, 10⁶, 10⁹}; an audit has none
    to tune with).

    Parameters
    ----------
    n_features_to_select : int or None, default=None
    n_clusters : int, default=5
        ``c``: columns of ``W`` (the number of clusters).
    n_neighbors : int, default=5
        ``k`` (the paper's experiments: 5).
    lam : float, default=1000.0
        ``λ > 0``, the regulariser that makes ``S_t^(i) + λI`` invertible. 10³ is our reading of
        the paper's setting (not checked against its text, which we did not have).
    gamma : float, default=1.0
        ``γ ≥ 0``, the ℓ2,1 weight.
    max_iter : int, default=100
    tol : float, default=1e-6

    Attributes
    ----------
    scores_ : ndarray (n_features,)
        ``‖w^j‖₂`` (higher = kept first).
    initial_scores_ : ndarray (n_features,)
        ``‖w^j‖₂`` of the first iterate (``D = I``): orders the rows driven to zero.
    coef_ : ndarray (n_features, n_clusters)
        ``W``.
    n_iter_ : int
    objective_history_ : ndarray
        ``Tr(WᵀXᵀMXW) + γ‖W‖_{2,1}`` after each iteration.

    References
    ----------
    [Yang11] Y. Yang, H. T. Shen, Z. Ma, Z. Huang, X. Zhou. "ℓ2,1-Norm Regularized
        Discriminative Feature Selection for Unsupervised Learning". IJCAI 2011.
    """

    def __init__(self, n_features_to_select=None, *, n_clusters=5, n_neighbors=5, lam=1000.0, gamma=1.0, max_iter=100, tol=1e-6):
        self.n_features_to_select = n_features_to_select
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.lam = lam
        self.gamma = gamma
        self.max_iter = max_iter
        self.tol = tol

    def _cliques(self, X: np.ndarray, k: int):
        """Each row's clique (itself and its ``k`` nearest neighbours) and ``B_i = H (X̃_iX̃_iᵀ + λI)⁻¹ H``."""
        n = X.shape[0]
        neighbours = nearest_neighbours(X, k)[1]
        cliques = np.concatenate([np.arange(n)[:, None], neighbours], axis=1)  # (n, k+1)
        local = X[cliques]  # (n, k+1, d)
        centred = local - local.mean(axis=1, keepdims=True)  # H_{k+1} X_i
        gram = centred @ centred.transpose(0, 2, 1) + self.lam * np.eye(k + 1)  # X̃_i X̃_iᵀ + λI
        H = np.eye(k + 1) - 1.0 / (k + 1)
        return cliques, local, H @ np.linalg.inv(gram) @ H  # blocks (n, k+1, k+1)

    def _local_matrix(self, X: np.ndarray, k: int) -> np.ndarray:
        """``XᵀMX`` (d × d) with ``M = Σ_i S_i B_i S_iᵀ``, built clique by clique (vectorised)."""
        _, local, blocks = self._cliques(X, k)
        # XᵀMX = Σ_i X_iᵀ B_i X_i (S_i picks the clique's rows of X): one GEMM over all cliques
        weighted = blocks @ local  # (n, k+1, d)
        return local.reshape(-1, local.shape[2]).T @ weighted.reshape(-1, local.shape[2])

    def _local_factor(self, X: np.ndarray, k: int) -> np.ndarray:
        """``U`` (d × n) with ``UUᵀ = XᵀMX``: ``M = Σ_i S_i B_i S_iᵀ`` assembled as ``n × n``
        (PSD), ``M = QΛQᵀ``, ``U = XᵀQΛ^{1/2}`` — for wide data, where ``d × d`` is the cost."""
        n = X.shape[0]
        cliques, _, blocks = self._cliques(X, k)
        M = np.zeros((n, n))
        np.add.at(M, (cliques[:, :, None], cliques[:, None, :]), blocks)
        values, vectors = np.linalg.eigh(0.5 * (M + M.T))
        keep = values > values.max() * 1e-12
        return X.T @ (vectors[:, keep] * np.sqrt(values[keep]))

    def _fit_l21(self, X):
        c = _check_positive_int(self.n_clusters, "n_clusters")
        k = min(_check_positive_int(self.n_neighbors, "n_neighbors"), X.shape[0] - 1)
        max_iter = _check_positive_int(self.max_iter, "max_iter")
        _check_real(self.lam, "lam", positive=True)  # λ = 0: X̃_iX̃_iᵀ has rank ≤ k, singular
        gamma = _check_real(self.gamma, "gamma", positive=False)
        tol = _check_real(self.tol, "tol", positive=False)
        n, d = X.shape
        c = min(c, d)
        if d <= max(DENSE_EIGEN_MAX, n):
            A = self._local_matrix(X, k)
            A = 0.5 * (A + A.T)
            quadratic = lambda W: float(np.sum(W * (A @ W)))  # noqa: E731
        else:
            U = self._local_factor(X, k)
            A = ("factor", U)
            quadratic = lambda W: float(np.sum((U.T @ W) ** 2))  # noqa: E731
        weights = np.ones(d)  # diagonal of D (Algorithm 1: D = I)
        history = []
        for iteration in range(1, max_iter + 1):
            W = _smallest_eigenvectors(A, gamma * weights, c)
            norms = _row_norms(W)
            if iteration == 1:
                initial = norms
            history.append(quadratic(W) + gamma * norms.sum())
            weights = 1.0 / (2.0 * np.maximum(norms, 1e-12))
            if _settled(history, tol):
                break
        else:
            if max_iter > 1:
                _warn_unsettled("UDFS", max_iter, tol)
        self.n_iter_ = iteration
        self.objective_history_ = np.asarray(history)
        return norms, initial, W


_TINY = np.finfo(float).tiny
"""The smallest normal float, floor of the norms NDFS rescales ``F``'s columns by (a column at 0
stays 0). Kept as a constant: ``np.finfo`` builds its answer anew at every call (2 ms of a
bootstrap replicate's NDFS fit)."""

INDICATOR_OFFSET = 0.2
"""NDFS's start: the k-means indicator (0/1) plus this constant, columns scaled to unit norm (the
'k-means + 0.2' start of multiplicative indicator updates, e.g. Ding, Li & Jordan's semi-NMF): a
multiplicative rule never moves an entry that is 0."""


class NDFS(_L21Selector):
    """Nonnegative discriminative feature selection ([Li12], Algorithm 1).

    [Li12] writes samples as columns; fairaudit's rows are samples (the paper's ``X`` is our ``Xᵀ``).

        min_{F, W}  Tr(FᵀLF) + α (‖XW − F‖²_F + β ‖W‖_{2,1})   s.t.  FᵀF = I, F ≥ 0

    ``F`` (``n × c``) is the scaled cluster indicator relaxed to be nonnegative, ``XW`` the linear
    classifier predicting it, ``L = D^{-1/2}(D − S)D^{-1/2}`` the normalised Laplacian of the k-NN
    heat-kernel graph ``S`` (an edge when either row is among the other's ``k`` nearest,
    :func:`heat_graph`). With the orthogonality as a penalty ``(γ/2)‖FᵀF − I‖²_F`` (γ "large
    enough"; 10⁸ in the paper's experiments):

    * fixed ``F``: ``W = (XᵀX + βD_W)^{-1} XᵀF`` with ``(D_W)_jj = 1/(2‖w^j‖)``;
    * substituting it, ``F`` minimises ``Tr(FᵀMF) + (γ/2)‖FᵀF − I‖²`` over ``F ≥ 0`` with
      ``M = L + α(I − X(XᵀX + βD_W)^{-1}Xᵀ)``, by the multiplicative rule
      ``F_ij ← F_ij (γF)_ij / (MF + γFFᵀF)_ij``;
    * Algorithm 1: ``D_W = I``; repeat: the ``F`` rule (``M`` from the current ``D_W``),
      ``W = (XᵀX + βD_W)^{-1}XᵀF``, ``D_W`` from ``W``; until convergence;
    * features ranked by ``‖w^j‖``, largest first.

    The paper's full text was not available to this project; the formulas are written from [Li12]
    as published (equation numbers not cited) and checked against independent computations
    (``tests/test_fs_udfs_ndfs.py``).

    Where we depart from the rule as printed, or choose where the paper is silent (measured in
    ``docs/fs.md``):

    * **F's scale** (``rescale=True``): after each ``F`` update its columns are scaled to unit
      norm. The rule alone does not settle the scale: for ``F = aQ`` with ``QᵀQ = I``, ``Q ≥ 0``,
      the γ terms dominate and it returns ``≈ Q/a``, so the scale alternates ``a, 1/a, a, …`` and
      the objective with it (default sample: 49 of 99 steps raised the objective, which still
      alternated between 2.6·10⁶ and 3.8·10⁶ after 100; rescaled, it fell at every step and
      settled at 0.81 after 44). ``rescale=False`` runs the rule alone.
    * **A non-positive denominator.** ``(MF)_ij`` can be negative (``L`` and ``I − X(·)^{-1}Xᵀ``
      have negative entries) and exceed ``γ(FFᵀF)_ij`` where ``F`` is near 0; the printed rule
      would then make ``F_ij`` negative or infinite. There (only) the negative part of ``MF`` moves
      to the numerator, ``F_ij ← F_ij (γF + [MF]⁻)_ij / ([MF]⁺ + γFFᵀF)_ij``: ``F`` stays ≥ 0 and
      the rule keeps its fixed points (``(MF + γFFᵀF − γF)_ij F_ij = 0``, the KKT condition).
      There the denominator ``[MF]⁺ + γFFᵀF`` is ``γ(FFᵀF)_ij`` (:meth:`_update_indicators`: summed
      as ``MF + γFFᵀF − MF`` it cancelled to 0 near ``F_ij = 0``).
    * **Start:** k-means (10 starts) on the spectral embedding of ``S`` gives the indicator ``Y``;
      ``F₀ = Y + 0.2``, columns at unit norm (:data:`INDICATOR_OFFSET`).
    * **Stopping:** the objective changed by at most ``tol`` relative, or ``max_iter`` iterations
      (with a ``ConvergenceWarning``).
    * **Rows driven to zero** are ordered as in :class:`_L21Selector`.
    * ``center`` (default ``False``: the printed model, ``XW`` without an intercept, on the data as
      given). ``True`` centres the columns first — the default before this review; on min-max
      scaled data the printed model spends ``W`` on reproducing ``F``'s column means and prefers
      columns with a large mean relative to their spread (a two-cluster toy: a noise column
      among the top 3 in 20 of 20 seeds; centred, the three informative ones in 20 of 20).

    When there are more features than rows the ``d × d`` solve is done in ``n × n`` (the
    push-through identity ``(XᵀX + B)^{-1}Xᵀ = B^{-1}Xᵀ(I + XB^{-1}Xᵀ)^{-1}``).

    Parameters
    ----------
    n_features_to_select : int or None, default=None
    n_clusters : int, default=5
        ``c``.
    n_neighbors : int, default=5
        ``k`` of the graph (the paper's experiments: 5).
    alpha, beta : float, default=1.0
        The paper tunes both over {10⁻⁶, 10⁻⁴, …, 10⁶} with the labels; 1 is ours.
    gamma : float, default=1e8
        The orthogonality penalty (the paper's experiments: 10⁸).
    t : "auto" or float, default="auto"
        Heat-kernel width (:func:`heat_graph`).
    center : bool, default=False
    rescale : bool, default=True
    max_iter : int, default=100
    tol : float, default=1e-6
    random_state : int or None
        Seeds the k-means start of ``F``.

    Attributes
    ----------
    scores_ : ndarray (n_features,)
        ``‖w^j‖₂`` (higher = kept first).
    initial_scores_ : ndarray (n_features,)
        ``‖w^j‖₂`` of the first iterate (``D_W = I``): orders the rows driven to zero.
    coef_ : ndarray (n_features, n_clusters)
    indicators_ : ndarray (n_samples, n_clusters)
        ``F``.
    n_iter_ : int
    objective_history_ : ndarray
        ``Tr(FᵀLF) + α(‖XW − F‖² + β‖W‖_{2,1}) + (γ/2)‖FᵀF − I‖²`` after each iteration.

    References
    ----------
    [Li12] Z. Li, Y. Yang, J. Liu, X. Zhou, H. Lu. "Unsupervised Feature Selection Using
        Nonnegative Spectral Analysis". AAAI 2012.
    """

    def __init__(self, n_features_to_select=None, *, n_clusters=5, n_neighbors=5, alpha=1.0, beta=1.0, gamma=1e8,
                 t="auto", center=False, rescale=True, max_iter=100, tol=1e-6, random_state=None):
        self.n_features_to_select = n_features_to_select
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.t = t
        self.center = center
        self.rescale = rescale
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _solver(self, X: np.ndarray, weights: np.ndarray, gram: np.ndarray | None = None):
        """``F ↦ (XᵀX + βD_W)^{-1} XᵀF`` for the current ``D_W``, factorised once (in the smaller
        of the two dimensions; ``gram`` = ``XᵀX`` when ``d ≤ n``)."""
        n, d = X.shape
        B = self.beta * weights
        if d <= n:
            gram = X.T @ X if gram is None else gram
            factor = _cholesky(gram + np.diag(B))
            return lambda F: _cholesky_solve(factor, X.T @ F)
        scaled = X.T / B[:, None]  # B^{-1} Xᵀ
        factor = _cholesky(np.eye(n) + X @ scaled)
        return lambda F: scaled @ _cholesky_solve(factor, F)

    def _solve(self, X: np.ndarray, weights: np.ndarray, F: np.ndarray) -> np.ndarray:
        """``(XᵀX + βD_W)^{-1} XᵀF``."""
        return self._solver(X, weights)(F)

    def _start(self, S, c: int) -> np.ndarray:
        """``F₀``: the k-means indicator on the spectral embedding of ``S`` (its ``c`` leading
        vectors), plus the offset, columns at unit norm. The embedding is computed with ``c + 1``
        vectors, as MCFS computes its own (the trivial vector and ``K`` more), so that an audit,
        where both run on the same graph with ``c = K``, computes it once
        (:func:`_spectral_embedding`); the ``c`` leading vectors of the two computations agree to
        the eigen-solver's tolerance (the default sample's NDFS selections, its 50 bootstrap
        replicates' included, unchanged)."""
        _, vectors, _ = _spectral_embedding(S, c + 1, self.random_state)
        labels = best_kmeans(vectors[:, :c], c, runs=10, random_state=self.random_state)
        F = np.eye(c)[labels] + INDICATOR_OFFSET
        return F / np.linalg.norm(F, axis=0)

    def _update_indicators(self, F: np.ndarray, MF: np.ndarray) -> np.ndarray:
        """One multiplicative step on ``F`` ([Li12]'s rule; a non-positive denominator handled as
        in the class docstring), then the columns rescaled to unit norm (``rescale``).

        Where the printed denominator is not positive, ``MF ≤ −γ(FFᵀF) ≤ 0``, so the denominator
        ``MF + γFFᵀF + [MF]⁻`` is ``γ(FFᵀF)`` exactly: it is taken as that, not summed. Summed, it
        cancelled for an entry on its way to 0: with ``F_ij = 10⁻³⁰`` alone in its row,
        ``γ(FFᵀF)_ij = 10⁻²²`` beside ``MF_ij = −0.2``, ``MF + γFFᵀF`` rounds to ``MF`` and adding
        ``−MF`` gives 0. Floored at the smallest normal float (as this step was until then, like
        NMF's before :func:`fairaudit.nmf._core.multiplicative_step`), that made the entry
        ``10⁻³⁰ · 0.2 / 2.2·10⁻³⁰⁸ ≈ 10²⁷⁶`` instead of about ``0.2/γ``; the column's norm overflowed
        and the rescaling set the column to 0. It was reached at the default parameters: NDFS with
        ``n_clusters=5`` on 2 of 60 bootstrap resamples of the default sample ended with three or
        four of its five columns at 0, the objective up by ``γ/2`` per lost column and the scores
        those of a dead ``F`` (``tests/test_fs_udfs_ndfs.py``). The product ``F ∘ numerator`` is
        formed first, so an entry at 0 stays 0 whatever its denominator (never ``0 · (x/0)``, the
        NaN NMF's step met) and a tiny entry's ``F_ij · numerator`` cannot overflow; a denominator
        of exactly 0 (the entry's row of ``F`` is 0, or ``γ(FFᵀF)_ij`` underflowed) leaves the entry
        at 0. Entries below the smallest normal float are not flushed to 0 (NMF's
        ``flush_subnormal``): the rule can bring them back where ``MF < 0``, and flushing made an
        NDFS fit no faster (about 0.6 such entries per step, measured on 12 resamples of the default
        sample)."""
        gamma = self.gamma
        numerator = gamma * F
        orthogonality = gamma * (F @ (F.T @ F))
        denominator = MF + orthogonality
        printed = denominator > 0
        if not printed.all():  # the printed rule would leave F ≥ 0 here: [MF]⁻ to the numerator
            numerator = np.where(printed, numerator, numerator + np.maximum(-MF, 0.0))
            denominator = np.where(printed, denominator, orthogonality)  # MF + γFFᵀF + [MF]⁻ = γFFᵀF here
        F = np.divide(F * numerator, denominator, out=np.zeros_like(F), where=denominator > 0)
        if self.rescale:
            F = F / np.maximum(np.linalg.norm(F, axis=0), _TINY)
        return F

    def _fit_l21(self, X):
        c = _check_positive_int(self.n_clusters, "n_clusters")
        k = _check_positive_int(self.n_neighbors, "n_neighbors")
        max_iter = _check_positive_int(self.max_iter, "max_iter")
        for name in ("alpha", "beta", "gamma"):
            _check_real(getattr(self, name), name, positive=True)
        tol = _check_real(self.tol, "tol", positive=False)
        alpha, beta = float(self.alpha), float(self.beta)
        n, d = X.shape
        c = min(c, n - 1)
        S, self.t_ = heat_graph(X, k, self.t)
        if self.center:
            X = X - X.mean(axis=0)
        degree = np.asarray(S.sum(axis=1)).ravel()
        inv_sqrt = 1.0 / np.sqrt(np.maximum(degree, 1e-300))
        laplacian = sparse.identity(n, format="csr") - sparse.diags(inv_sqrt) @ S @ sparse.diags(inv_sqrt)
        F = self._start(S, c)
        weights = np.ones(d)  # diagonal of D_W (Algorithm 1: D = I)
        gram = X.T @ X if d <= n else None
        history = []
        LF = laplacian @ F  # kept from the objective of one iteration for the F step of the next
        for iteration in range(1, max_iter + 1):
            solve = self._solver(X, weights, gram)  # one factorisation per iteration: D_W changes once
            W = solve(F)
            if iteration == 1:
                initial = _row_norms(W)
            MF = LF + alpha * (F - X @ W)  # M F without forming the n × n M
            F = self._update_indicators(F, MF)
            LF = laplacian @ F
            W = solve(F)
            norms = _row_norms(W)
            residual = X @ W - F
            orthogonality = F.T @ F - np.eye(c)
            history.append(float(np.sum(F * LF) + alpha * (np.sum(residual**2) + beta * norms.sum())
                                 + 0.5 * self.gamma * np.sum(orthogonality**2)))
            weights = 1.0 / (2.0 * np.maximum(norms, 1e-12))
            if _settled(history, tol):
                break
        else:
            if max_iter > 1:
                _warn_unsettled("NDFS", max_iter, tol)
        self.indicators_ = F
        self.n_iter_ = iteration
        self.objective_history_ = np.asarray(history)
        return norms, initial, W
