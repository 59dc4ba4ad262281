"""LEACE: least-squares linear concept erasure (Belrose et al., 2023), as a scikit-learn transformer.

N. Belrose, D. Schneider-Joseph, S. Ravfogel, R. Cotterell, E. Raff, S. Biderman. "LEACE: Perfect
linear concept erasure in closed form". NeurIPS 2023 (arXiv:2306.03819).

For rows ``x`` with groups ``z`` (one-hot), the *eraser* is the affine map (the paper's eq. (1))::

    r(x) = x − W⁺ P_{W Σ_XZ} W (x − E[x])

with ``W = (Σ_XX^{1/2})⁺`` the whitening, ``Σ_XZ`` the cross-covariance of ``x`` and the one-hot
``z`` and ``P_{WΣ_XZ}`` the orthogonal projection onto the column space of ``W Σ_XZ`` (Theorem 4.2;
the bias ``E[x] − P* E[x]`` is Theorem 4.3's). What it guarantees:

* after erasure every group has the same mean (Theorem 3.4: ``Cov(r(X), Z) = 0``), which is
  equivalent to *linear guardedness*: no linear classifier predicts the group better than a
  constant, for every convex loss (Theorems 3.1 and 3.3);
* among all affine maps with that property it changes the rows least, ``E‖r(X) − X‖²_M``, for
  every inner product ``M`` at once (Theorem 4.2) — the erasure's *cost*.

Computed from per-group moments (:class:`~fairaudit.engine.GroupMoments`): ``Σ_XX`` is the pooled
covariance and column ``g`` of ``Σ_XZ`` is ``p_g (μ_g − μ)`` (the identity in Theorem 3.4's proof),
so the eraser of data read chunk by chunk, or of a bootstrap replicate's weighted moments, needs no
rows; ``P_{WΣ_XZ}`` depends only on the span of the groups' mean offsets (rank at most ``k − 1``:
the columns of ``Σ_XZ`` sum to zero), from which offsets of rounding size are left out
(:data:`ROUNDING`).

**Rank-deficient Σ_XX** (constant or collinear features, fewer rows than features): ``W`` is the
pseudo-inverse of the p.s.d. square root, exactly as Theorem 4.2 states it — eigenvalues of
``Σ_XX`` at or below ``max eigenvalue × n × machine epsilon`` count as zero, as NumPy's
``matrix_rank`` counts them. Directions without variance carry no group mean difference (the
columns of ``Σ_XZ`` lie in the column space of ``Σ_XX``), so nothing is lost; they are left as
they are. ``P``'s rank is decided the same way on the singular values of ``WΣ_XZ``.

The map is stored as two ``n × r`` factors (``r ≤ k − 1`` erased directions), so applying it costs
``O(m n r)``: ``r(x) = x − ((x − mean_) · directions_in_) · directions_out_ᵀ`` with
``directions_in_ = W Q`` and ``directions_out_ = W⁺ Q``, ``Q`` an orthonormal basis of
``colsp(WΣ_XZ)`` (``W⁺ Q Qᵀ W = W⁺ P W``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .engine import GroupMoments
from .groups import check_groups, encode_groups
from .linalg import orthonormal_basis


@dataclass(frozen=True)
class Eraser:
    """LEACE's map in factored form: ``r(x) = x − ((x − mean) @ read) @ writeᵀ``.

    ``read = W Q`` and ``write = W⁺ Q`` (``n × r``), ``Q`` an orthonormal basis of
    ``colsp(W Σ_XZ)``; ``r`` is the number of erased directions (0 when the group means already
    agree)."""

    mean: np.ndarray
    read: np.ndarray
    write: np.ndarray

    @property
    def rank(self) -> int:
        return int(self.read.shape[1])

    def apply(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        if self.rank == 0:
            return X.copy()
        return X - ((X - self.mean) @ self.read) @ self.write.T

    def linear_part(self) -> np.ndarray:
        """``P* = I − W⁺ P W`` as a dense matrix, acting on column vectors (Theorem 4.2)."""
        n = self.mean.shape[0]
        return np.eye(n) - self.write @ self.read.T

    def output_basis(self) -> np.ndarray:
        """An orthonormal basis (``n × (n − rank)``) of the subspace the erased rows lie in around
        the mean (the range of ``P*``). Coordinates in it keep every distance between erased rows
        and drop the ``rank`` directions LEACE emptied, which would make a quadratic classifier's
        covariance singular: the audit's leakage test and RBF MMD² read them."""
        if self.rank == 0:
            return np.eye(self.mean.shape[0])
        return orthonormal_basis(self.linear_part())

    def distortion(self, covariance: np.ndarray) -> float:
        """``E‖r(X) − X‖²`` (Euclidean) for rows of covariance ``covariance``: the quantity LEACE
        minimises (Theorem 4.2 with ``M = I``), ``tr(writeᵀ write · readᵀ Σ read)``."""
        if self.rank == 0:
            return 0.0
        return float(np.sum((self.write.T @ self.write) * (self.read.T @ covariance @ self.read)))


ROUNDING = 1e3 * np.finfo(float).eps
"""Group mean offsets whose size is at most this share of the data's own size (the mean's norm
plus the total standard deviation) are rounding, not a difference: two groups of the same rows
in another order have offsets of 10⁻¹⁷ (``tests/test_erasure.py``), and erasing along them would
remove a random direction."""


def mean_difference_basis(offsets: np.ndarray, scale: float) -> np.ndarray:
    """An orthonormal basis (``n × r``, ``r ≤ k − 1``) of the span of the groups' mean offsets
    ``μ_g − μ`` (``k × n``) — the column space of ``Σ_XZ`` (Theorem 3.4) — without the directions
    where the offsets are rounding: singular values at or below :data:`ROUNDING` × ``scale``."""
    offsets = np.asarray(offsets, dtype=float)
    if offsets.size == 0:
        return np.zeros((offsets.shape[-1], 0))
    _, singular, right = np.linalg.svd(offsets, full_matrices=False)
    return right[singular > ROUNDING * max(float(scale), np.finfo(float).tiny)].T


def leace(covariance: np.ndarray, offsets: np.ndarray, mean: np.ndarray, scale: float | None = None) -> Eraser:
    """The LEACE eraser (eq. (1)) from second moments.

    Parameters
    ----------
    covariance : ndarray (n, n)
        ``Σ_XX``, the covariance of the rows (around their mean).
    offsets : ndarray (k, n)
        ``μ_g − μ``: each group's mean minus the overall mean. Column ``g`` of ``Σ_XZ`` is
        ``p_g (μ_g − μ)`` (Theorem 3.4), so ``colsp(Σ_XZ)`` — all the projection ``P_{WΣ_XZ}``
        needs — is their span (:func:`mean_difference_basis`).
    mean : ndarray (n,)
        ``E[X]``.
    scale : float, optional
        The size of the values the offsets were computed from (rounding below
        :data:`ROUNDING` × it is no difference); by default ``‖mean‖ + √tr Σ_XX``. A
        representation ``z = (x − μ)U`` of raw rows passes the rows' own.
    """
    covariance = np.asarray(covariance, dtype=float)
    mean = np.asarray(mean, dtype=float)
    n = covariance.shape[0]
    values, vectors = np.linalg.eigh((covariance + covariance.T) / 2)
    kept = values > max(float(values.max(initial=0.0)), 0.0) * n * np.finfo(float).eps
    values, vectors = values[kept], vectors[:, kept]
    if scale is None:
        scale = float(np.linalg.norm(mean)) + float(np.sqrt(max(values.sum(), 0.0)))
    span = mean_difference_basis(offsets, scale)
    if not kept.any() or span.shape[1] == 0:
        return Eraser(mean, np.zeros((n, 0)), np.zeros((n, 0)))
    root = np.sqrt(values)
    whitened = (vectors.T @ span) / root[:, None]  # W colsp(Σ_XZ), in the eigenbasis of Σ_XX
    left, singular, _ = np.linalg.svd(whitened, full_matrices=False)
    rank = int(np.sum(singular > singular.max(initial=0.0) * max(whitened.shape) * np.finfo(float).eps))
    Q = left[:, :rank]  # an orthonormal basis of colsp(W Σ_XZ), eigenbasis coordinates
    read = vectors @ (Q / root[:, None])  # W Q
    write = vectors @ (Q * root[:, None])  # W⁺ Q
    return Eraser(mean, read, write)


def leace_from_moments(moments: GroupMoments) -> Eraser:
    """:func:`leace` of the rows the per-group ``moments`` summarise."""
    shares = moments.counts / max(moments.total, np.finfo(float).tiny)
    pooled = np.tensordot(shares, moments.covariances(), axes=1)  # around the overall mean
    return leace(pooled, moments.centred_means(), moments.global_mean)


class LeaceEraser(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Remove the linearly available information about the groups from a representation.

    LEACE (Belrose et al. 2023, eq. (1)): the affine map closest to the identity (in mean squared
    change, Theorem 4.2) after which every group has the same mean, so that no linear classifier
    predicts the group better than a constant (Theorems 3.1, 3.4 and 4.1). A classifier that is not
    linear may still find the group (for instance from differences in spread): the audit's
    leakage test uses QDA, which sees them.

    ``fit(X, *, sensitive_features)`` learns the map from rows and one group per row (Fairlearn's
    keyword; several columns define intersections); ``transform`` applies it to any rows, with
    their groups unknown. It fits after any representation — a PCA, an NMF's ``W``, selected
    columns, embeddings — e.g. ``make_pipeline(NMF(5), LeaceEraser())`` with
    ``sensitive_features`` routed to both steps (``docs/pipelines.md``).

    Attributes
    ----------
    mean_ : ndarray (n_features,)
        ``E[X]`` of the training rows.
    directions_in_, directions_out_ : ndarray (n_features, rank_)
        ``W Q`` and ``W⁺ Q``: ``transform(x) = x − ((x − mean_) directions_in_) directions_out_ᵀ``.
    rank_ : int
        Erased directions (at most the number of groups minus one).
    groups_ : ndarray of str
    distortion_ : float
        ``E‖r(X) − X‖²`` on the training rows, the least any linearly guarding affine map achieves.
    relative_distortion_ : float
        ``distortion_`` over the rows' total variance ``E‖X − E[X]‖²``: the share of the
        representation's variance the erasure changes.

    Notes
    -----
    ``Σ_XX`` may be singular: ``W`` is the pseudo-inverse of its square root, as in Theorem 4.2 (see
    the module docstring for the rank tolerance).

    References
    ----------
    N. Belrose et al. "LEACE: Perfect linear concept erasure in closed form". NeurIPS 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from fairaudit.erasure import LeaceEraser
    >>> rng = np.random.default_rng(0)
    >>> groups = np.repeat(["a", "b"], 100)
    >>> X = rng.normal(size=(200, 3)) + (groups == "a")[:, None] * [2.0, 0.0, 1.0]
    >>> erased = LeaceEraser().fit(X, sensitive_features=groups).transform(X)
    >>> bool(np.allclose(erased[groups == "a"].mean(0), erased[groups == "b"].mean(0)))
    True
    """

    def fit(self, X, y=None, *, sensitive_features=None, sample_weight=None):
        """Learn the eraser from ``X`` and one group per row (``sample_weight``: optional,
        non-negative row weights)."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        groups = encode_groups(sensitive_features, n_rows=X.shape[0])
        check_groups(groups, min_size=1)
        weights = None if sample_weight is None else np.asarray(sample_weight, dtype=float)
        moments = GroupMoments.from_rows(X, groups.codes, n_groups=groups.n_groups, weights=weights, labels=groups.labels)
        return self._fit_moments(moments)

    def fit_moments(self, moments: GroupMoments):
        """Learn the eraser from per-group moments alone (equal to ``fit`` on their rows)."""
        self._fit_moments(moments)
        self.n_features_in_ = moments.n_features
        return self

    def _fit_moments(self, moments: GroupMoments):
        eraser = leace_from_moments(moments)
        shares = moments.counts / max(moments.total, np.finfo(float).tiny)
        pooled = np.tensordot(shares, moments.covariances(), axes=1)
        self.mean_ = eraser.mean
        self.directions_in_, self.directions_out_ = eraser.read, eraser.write
        self.rank_ = eraser.rank
        self.groups_ = np.asarray(moments.labels, dtype=object)
        self.distortion_ = eraser.distortion(pooled)
        total = float(np.trace(pooled))
        self.relative_distortion_ = self.distortion_ / total if total > 0 else 0.0
        return self

    @property
    def eraser_(self) -> Eraser:
        check_is_fitted(self, "directions_in_")
        return Eraser(self.mean_, self.directions_in_, self.directions_out_)

    @property
    def projection_(self) -> np.ndarray:
        """``P* = I − W⁺ P_{WΣ_XZ} W`` (Theorem 4.2), acting on column vectors: ``r(x) = P* x + bias_``."""
        return self.eraser_.linear_part()

    @property
    def bias_(self) -> np.ndarray:
        """``b* = E[X] − P* E[X]`` (Theorem 4.3)."""
        return self.mean_ - self.projection_ @ self.mean_

    def transform(self, X):
        """The rows with the groups' linear information erased (same columns)."""
        check_is_fitted(self, "directions_in_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.eraser_.apply(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
