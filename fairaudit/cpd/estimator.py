"""``FairCPD``: CP decomposition with an independence penalty on the sensitive factor.

Kim & Gittens, "Learning fair canonical polyadical decompositions using a kernel independence
criterion" (arXiv:2104.13504, 2021) [Kim21], Algorithm 1 (KHSIC-BCD), with the baselines the
paper compares against (§3): HSIC-BCD (footnote 4), FATR (Zhu, Hu & Caverlee, "Fairness-aware
tensor-based recommendation", CIKM 2018 [Zhu18], in the form [Kim21] §1 writes it) and
unregularised block coordinate descent.

The paper's problem, as printed (the default)
---------------------------------------------
``X`` has shape ``(n, d_1, …, d_{N−1})``; mode 0 holds the ``n`` entities whose groups are given;
``A = F_0`` is their factor (the *sensitive mode*, [Kim21] §1). With ``N_X`` the number of cells,
every method minimises ([Kim21] §2, the objective below eq. 2)

    J(A, F_1, …) = ‖X − ⟦A, F_1, …⟧‖²_F / N_X + penalty(A)

=========  ==================================================  ==========================
method     penalty(A)                                          source
=========  ==================================================  ==========================
"none"     0                                                   unregularised BCD
"fatr"     λ_o ‖AᵀS‖²_F + λ_ℓ2 ‖A‖²_F                          [Kim21] §1 (FATR, [Zhu18])
"hsic"     λ ⟨HAAᵀH, HSSᵀH⟩ / n² = λ ‖ÃᵀS̃‖²_F / n²             [Kim21] §3 footnote 4
"khsic"    λ ⟨K̃_A, K̃_S⟩ / n²,  K = exp(−γ‖x − y‖²)             [Kim21] §2, eq. (2), App. A.3
=========  ==================================================  ==========================

``S`` is the one-hot matrix of the groups (``n × k``; [Kim21] App. A.4 writes the two-group
``S`` this way), ``H = I − 11ᵀ/n`` and ``K̃ = HKH`` (App. A.3). KHSIC uses the RBF kernel with
``γ = 1`` on both sides (App. A.8, A.9); on one-hot rows the RBF kernel is
``e^{−2γ} + (1 − e^{−2γ})[g_i = g_j]``, so ``K̃_S = (1 − e^{−2}) HSSᵀH``
(:data:`fairaudit.cpd._kernels.GROUP_GAMMA`). HSIC-BCD's penalty is read as eq. (2) with linear
kernels on both sides — footnote 4 defines HSIC as ``‖ÃᵀS̃‖²_F`` and the regulariser replaces
KHSIC's ``⟨K̃_A, K̃_S⟩/n²`` by it, so the ``1/n²`` stays (our reading; without it the paper's
λ_h range [0, 0.01] of Fig. 2a would already be saturated at its first non-zero point).

Algorithm 1 (``solver="bcd"``, the default): every epoch takes ``inner_steps`` gradient steps on
``A`` with step ``α_0`` (``learning_rate``), then on each other factor with step ``α_1``
(``learning_rate_others``) on the fit term alone; App. A.7: 200 steps per factor per epoch.
Initial factors U(0, 1) entry-wise (``init="uniform"``, App. A.8/A.9). The defaults are the
paper's synthetic experiment (App. A.8): ``α_0 = 3`` for unregularised BCD and FATR, ``0.5`` for
HSIC- and KHSIC-BCD, ``α_1 = 1``, ``λ_ℓ2 = 1`` and, for ``lam=None``, the weights of Fig. 2b
(``α_o = 0.1``, ``λ_h = 0.01``, ``λ_k = 0.04``). The paper states neither its number of epochs
``T`` nor a stopping rule: ours are ``n_epochs`` and ``tol`` (the relative change of ``J`` over an
epoch).

The paper's method has properties worth knowing (measured, see ``docs/architecture.md`` and
``fairaudit.reproduce.fair_cpd``): a fixed step diverges when it exceeds ``2/L`` for the block's
curvature ``L`` (FATR at A.8's ``α_0 = 3, λ_ℓ2 = 1``: ``α_0·2λ_ℓ2 = 6 > 2``, the first epoch
overflows; the fit then raises :class:`DivergenceError`), and every penalty above can be lowered
by shrinking ``A`` while the other factors grow, which changes the model not at all.

Our options (each a deviation from the paper, documented with its measured effect in
``docs/architecture.md``; the CP audit's default formulation combines them, :data:`FORMULATIONS`)
------------------------------------------------------------------------------------------------
* ``embedding="normalized"``: penalties (and :attr:`FairCPD.embedding_`) on the normalised
  embedding ``Â`` of :func:`normalised_embedding` instead of the factor ``A``: each column's mean
  square 1, and for a matrix (2-way CP) ``A`` whitened. CP is invariant under
  ``A → A D, F_1 → F_1 D⁻¹`` (and, for a matrix, under every invertible ``A → AQ``), a penalty on
  ``A`` is not: ``Â`` is a function of the model only, so the penalty cannot be lowered by moving
  weight between factors. With ``solver="lbfgs"`` the other factors are kept at unit-norm
  columns and ``A`` carries the weights (Kolda & Bader's normalised form); FATR's
  ``λ_ℓ2‖A‖²`` is then ``λ_ℓ2 Σ_r w_r²`` on the component weights and the other factors' updates
  include it as a per-column ridge, so block coordinate descent is monotone.
* ``solver="lbfgs"``: the A-step is ``inner_steps`` L-BFGS steps preconditioned by the fit's
  Hessian ``(2/N_X) G`` with Armijo backtracking (at ``λ = 0`` the first step is the exact ALS
  update), and the other factors are updated by exact least squares (the ALS updates
  ``F_m = X_(m) KR · G_m⁻¹``, with FATR's ridge where it applies). No step size to tune.
* ``gamma="median"``: the median heuristic instead of ``γ = 1``.
* ``kernel="nystrom"`` (or ``"auto"`` above 2,000 entities): KHSIC through a Nyström
  approximation on ``n_landmarks`` entities (:func:`fairaudit.cpd._kernels.khsic_nystrom`),
  drawn afresh every epoch; the history, the stopping rule and ``penalty_`` use a fixed
  evaluation set (``landmarks_``).
* ``init="svd"``: the leading singular vectors of each unfolding, then an exact A-step.

Entities with counts (``fit(…, sample_weight=c)``)
-------------------------------------------------
A bootstrap replicate resamples entities with repeats (about 63 % distinct). Copies of an entity
have equal rows of ``X`` and the same group; started from equal factor rows, every update above
treats them alike — the fit's gradient and Hessian per row, the penalties' gradients per row
(functions of the row and of sums over all rows), the ALS/least-squares updates of the other
factors (sums over rows), L-BFGS's inner products and the normalisation (sums over rows) — so
their rows stay equal and the fit on the repeated entities is the same problem, and the same
iteration, on the distinct ones weighted by their counts: ``Σ_u c_u ‖x_u − ⟦F⟧_u‖²`` over
``N_X = (Σ c)·cells``, the normalised embedding with weighted column norms (whitening with
``Aᵀ diag(c) A``), every kernel sum weighted by ``c_u c_v`` ([Kim21] eq. (2) and footnote 4 summed
over the repeated rows; :mod:`fairaudit.cpd._kernels`) and every inner product of the L-BFGS
recursion by ``c_u``. Only the rounding differs (sums in another order). The one exception is the
Nyström kernel's landmark term (:func:`fairaudit.cpd._kernels.khsic_nystrom`): there all copies
of a landmark move alike, where on the repeated rows only the copy drawn would. Landmarks are
drawn as for the repeated rows (positions in ``np.repeat(arange(n), c)``, then mapped to their
rows) and γ's median is taken on the repeated rows, so both are today's values; ``init="uniform"``
or ``"random"`` draws the repeated rows' start and gives each row its first copy's (on the repeated
rows the copies would start apart: use a given or SVD start for the same problem).
"""
from __future__ import annotations

import copy
import numbers

import numpy as np
import pandas as pd
import scipy.sparse
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin

from ..errors import EmptyFileError, FairAuditError, MissingValueError, ParameterError
from ..groups import check_groups, encode_groups
from ..validation import check_rank
from . import _kernels, _tensor

METHODS = ("none", "fatr", "hsic", "khsic")
KERNELS = ("exact", "nystrom", "auto")
SOLVERS = ("bcd", "lbfgs")
EMBEDDINGS = ("factor", "normalized")
INITS = ("uniform", "svd", "random")
PAIRS = 8
"""Curvature pairs kept by the A-step's L-BFGS memory."""

PAPER_LAMBDA = {"none": 0.0, "fatr": 0.1, "hsic": 0.01, "khsic": 0.04}
"""[Kim21] App. A.8, Fig. 2b: the fairness weights of FATR (α_o), HSIC-BCD (λ_h) and KHSIC-BCD
(λ_k) on the synthetic data (``lam=None``)."""

PAPER_LEARNING_RATE = {"none": 3.0, "fatr": 3.0, "hsic": 0.5, "khsic": 0.5}
"""[Kim21] App. A.8: α_0, the step of Algorithm 1's A-update (``learning_rate=None``)."""

PAPER_LEARNING_RATE_OTHERS = 1.0
"""[Kim21] App. A.8: α_1, the step of the other factors' updates."""

PAPER_L2 = 1.0
"""[Kim21] App. A.8 and A.9: FATR's λ_ℓ2 (α_l2)."""

PAPER_GAMMA = 1.0
"""[Kim21] App. A.8 and A.9: the RBF kernel's γ."""

PAPER_INNER_STEPS = 200
"""[Kim21] App. A.7: gradient steps per factor per epoch."""

LBFGS_INNER_STEPS = 5
"""L-BFGS steps per A-step of ``solver="lbfgs"`` (ours)."""

NOISY_WINDOW = 3
"""Epochs per window of the stopping rule for fits whose penalty is sampled (the Nyström kernel
with fresh landmarks every epoch): :meth:`FairCPD._settled`."""

NOISY_TOL = 1e-3
"""The resolution of a sampled fit (or ``tol`` if larger), relative to its objective: it stops once
its objective stays within it over a window, or its windowed decrease falls below it — such a fit
cannot resolve changes inside its own sampling noise (:meth:`FairCPD._settled`)."""

FORMULATIONS = {
    "paper": {"solver": "bcd", "embedding": "factor", "gamma": PAPER_GAMMA, "init": "uniform", "l2": PAPER_L2},
    "fairaudit": {"solver": "lbfgs", "embedding": "normalized", "gamma": "median", "init": "svd", "l2": 0.0},
}
"""Named sets of :class:`FairCPD` parameters: ``"paper"`` is [Kim21] as printed (also
FairCPD's defaults), ``"fairaudit"`` our deviations together (module docstring) — the CP
audit's default, for the reasons in ``docs/architecture.md``. Ours drops FATR's ℓ2 term
(``λ_ℓ2 = 0``): it is no fairness term, and in the normalised form ``‖A‖²`` is the squared
component weights, in the data's units. The λ values differ too: the paper's are absolute
(:data:`PAPER_LAMBDA`), the audit's scaled to the data (:mod:`fairaudit.cpd.sweep`)."""


class DivergenceError(ParameterError):
    """Algorithm 1's fixed gradient steps made the objective overflow (a step too large for
    the curvature of a block). ``block`` names the factor (``"A"``, ``"F_1"``, …), ``step`` the
    step size and ``epoch`` the epoch."""

    def __init__(self, message: str, *, block: str = "", step: float = float("nan"), epoch: int = 0):
        super().__init__(message)
        self.block, self.step, self.epoch = block, step, epoch


def _dot(a: np.ndarray, b: np.ndarray, weights: np.ndarray | None = None) -> float:
    """``⟨a, b⟩`` (Frobenius) without the temporary ``a * b`` (the L-BFGS loop's inner products);
    with row ``weights`` ``Σ_u c_u a_u·b_u``, the repeated rows' product (module docstring)."""
    if weights is None:
        return float(np.vdot(a, b))
    return float(np.vdot(a * weights[:, None], b))


def _symmetric_inverse(Q: np.ndarray) -> np.ndarray:
    """``Q⁻¹`` of a small symmetric positive definite matrix (the pseudo-inverse if singular),
    symmetrised."""
    try:
        inverse = np.linalg.inv(Q)
    except np.linalg.LinAlgError:
        inverse = np.linalg.pinv(Q, hermitian=True)
    return (inverse + inverse.T) / 2.0


def check_tensor(X, what: str = "X") -> np.ndarray:
    """``X`` as a finite float array with at least two modes, or a specific error (for a sparse
    or complex array, and a matrix without columns, in scikit-learn's words)."""
    if scipy.sparse.issparse(X):
        raise FairAuditError(f"{what} is a sparse matrix: sparse input is not supported; a tensor is a dense array (X.toarray()).")
    X = np.asarray(X)
    if np.issubdtype(X.dtype, np.complexfloating):
        raise FairAuditError(f"Complex data not supported: {what} has complex values.")
    X = X.astype(float, copy=False)
    if X.ndim == 2 and X.shape[1] == 0:
        raise EmptyFileError(f"{what} has 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.ndim < 2:
        raise FairAuditError(
            f"{what} must have at least two modes (entities × …), got shape {X.shape}; "
            "a data table is a 2-way array (rows × features). Reshape your data, e.g. X.reshape(-1, 1) for one feature."
        )
    if X.size == 0:
        raise EmptyFileError(f"{what} is empty (shape {X.shape}).")
    if not np.isfinite(X).all():
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(X))[0])
        raise MissingValueError(f"{what} has a missing or infinite value at index {where}; fill or drop it first.")
    return X


def normalised_embedding(A: np.ndarray, return_scale: bool = False, whiten: bool = False, weights: np.ndarray | None = None):
    """The entity embedding with CP's indeterminacy taken out: what the penalties and metrics see.

    Default (``whiten=False``, for arrays with three or more modes): ``Â = A · diag(√n / ‖a_r‖)``,
    every column's mean square equal to 1. CP's scaling freedom moves weight between ``A`` and
    the other factors without changing the model; ``Â`` is what stays. Zero columns stay zero.
    With ``return_scale`` also returns the row vector ``√n / ‖a_r‖`` (0 for zero columns).

    ``whiten=True`` (for matrices, 2-way CP): ``Â = A (AᵀA/n)^{−1/2}``, so ``ÂᵀÂ/n = I``. A
    matrix model ``A Bᵀ`` is unchanged by ``A → AQ, B → BQ⁻ᵀ`` for *every* invertible ``Q``, not
    only diagonal ones, so per-column scaling leaves a freedom that changes nothing about the
    model but everything about a penalty: we measured KHSIC-BCD on a 1000 × 10 matrix drifting
    for hundreds of epochs towards nearly collinear columns (largest column correlation 0.25 →
    0.99, penalty → 0 at constant fit) while the groups stayed exactly as predictable by QDA as
    from vanilla CP. Whitening quotients out the whole freedom: ``Â`` is determined by the model
    up to an orthogonal rotation, which no penalty or metric here can see. Directions with an
    eigenvalue below ``1e−12`` times the largest are dropped (pseudo-inverse). With
    ``return_scale`` also returns the ``R × R`` matrix ``(AᵀA/n)^{−1/2}``.

    ``weights``: row ``u`` stands for ``c_u`` identical rows (module docstring, entities with
    counts) — ``n = Σ c``, ``‖a_r‖² = Σ_u c_u a_ur²``, ``AᵀA`` as ``Aᵀ diag(c) A``.
    """
    n = A.shape[0] if weights is None else float(weights.sum())
    weighted = A if weights is None else A * weights[:, None]
    if whiten:
        values, vectors = np.linalg.eigh(weighted.T @ A / n)
        top = max(float(values.max()), 0.0)
        inverse_root = np.where(values > 1e-12 * top, 1.0 / np.sqrt(np.where(values > 0, values, 1.0)), 0.0) if top > 0 else np.zeros_like(values)
        transform = (vectors * inverse_root) @ vectors.T
        Z = A @ transform
        return (Z, transform) if return_scale else Z
    norms = np.linalg.norm(A, axis=0) if weights is None else np.sqrt(np.einsum("ur,ur->r", weighted, A))
    scale = np.where(norms > 0, np.sqrt(n) / np.where(norms > 0, norms, 1.0), 0.0)
    Z = A * scale
    return (Z, scale) if return_scale else Z


def embedding_gradient(Z: np.ndarray, transform: np.ndarray, grad_z: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Chain rule from ``∂f/∂Â`` to ``∂f/∂A`` for a function ``f`` of :func:`normalised_embedding`.

    Per-column scaling (``transform`` a row vector ``s``, ``ẑ_r = √n a_r/‖a_r‖``):
    ``∂f/∂a_r = s_r (g_r − ẑ_r (ẑ_rᵀ g_r)/n)``. Whitening (``transform`` the matrix
    ``C = (AᵀA/n)^{−1/2}``): for ``f`` invariant under ``Â → ÂO`` (O orthogonal; every penalty
    here), ``∂f/∂A = (g − Â·sym(Âᵀg)/n) C`` (our derivation: ``f`` depends on ``C`` only through
    ``CCᵀ = (AᵀA/n)⁻¹``; checked against finite differences in the tests). ``weights``: per-copy
    gradients of rows with counts (module docstring), the sums over rows weighted.
    """
    n = Z.shape[0] if weights is None else float(weights.sum())
    weighted = Z if weights is None else Z * weights[:, None]
    if transform.ndim == 1:
        return transform * (grad_z - Z * (np.sum(weighted * grad_z, axis=0) / n))
    inner = weighted.T @ grad_z
    return (grad_z - Z @ ((inner + inner.T) / (2.0 * n))) @ transform


def median_gamma(X: np.ndarray, rank: int, random_state: int | None = 0) -> float:
    """The default RBF parameter at ``rank``: the median heuristic on the rows of ``X_(0)``'s
    rank-``rank`` principal scores with unit-mean-square columns (the normalised embedding that
    an unpenalised fit approximates)."""
    return _kernels.median_gamma(normalised_embedding(_tensor.truncated_scores(X, rank)), random_state=random_state)


def kernel_choice(kernel: str, n: int, n_landmarks: int = _kernels.NYSTROM_LANDMARKS) -> str:
    """``"exact"`` or ``"nystrom"``: what ``FairCPD(kernel=kernel)`` uses for ``n`` entities
    (Nyström only when it has fewer landmarks than entities)."""
    if kernel == "auto":
        kernel = "nystrom" if n > _kernels.NYSTROM_ROWS else "exact"
    return "nystrom" if kernel == "nystrom" and n_landmarks < n else "exact"


def _counts(sample_weight, n: int) -> np.ndarray | None:
    """``sample_weight`` checked: ``n`` whole numbers ≥ 1 as floats, or ``None``."""
    if sample_weight is None:
        return None
    counts = np.asarray(sample_weight, dtype=float)
    if counts.shape != (n,) or not np.isfinite(counts).all() or (counts < 1).any() or (counts != np.round(counts)).any():
        raise ParameterError(
            f"sample_weight must hold one whole number >= 1 per entity (how many identical entities the row stands for), "
            f"{n} in all; got shape {counts.shape}."
        )
    return counts


def rank_limit(shape: tuple[int, ...]) -> int:
    """The largest rank any array of ``shape`` can need: ``min_m Π_{k≠m} d_k``."""
    total = int(np.prod(shape))
    return int(min(total // d for d in shape))




class FairCPD(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """CP decomposition whose sensitive-mode factor is penalised for revealing the groups.

    The defaults are [Kim21] as printed: Algorithm 1 with the step sizes, kernel, initialisation
    and fairness weights of its synthetic experiment (App. A.8; module docstring). Our deviations
    are options (:data:`FORMULATIONS` names the set the CP audit uses).

    Parameters
    ----------
    rank : int
        CP rank ``R``.
    method : {"khsic", "hsic", "fatr", "none"}
        The penalty (module docstring). ``"none"`` is unregularised CP.
    lam : float or None
        Fairness weight: λ of KHSIC/HSIC-BCD, ``λ_o`` of FATR, in the paper's units ([Kim21] §2:
        the fit term is a mean over the cells, KHSIC and HSIC carry ``1/n²``). ``None``: the
        paper's Fig. 2b value for the method (:data:`PAPER_LAMBDA`). ``0`` gives plain CP.
    l2 : float
        FATR's ``λ_ℓ2`` on ``‖A‖²_F`` (default 1, the paper's; ignored by the other methods).
    gamma : float or "median"
        RBF parameter of KHSIC's kernel on the rows of ``A`` (default 1, the paper's).
        ``"median"`` (ours): ``1/(2m²)`` with ``m`` the median pairwise distance — for
        ``embedding="normalized"`` of ``X_(0)``'s rank-``R`` principal scores normalised like
        ``Â`` (the embedding an unpenalised fit approximates), otherwise of the initial ``A`` —
        fixed before fitting so that the objective does not move.
    embedding : {"factor", "normalized"}
        What the penalty sees: the factor ``A`` as the iteration leaves it (the paper) or the
        normalised embedding ``Â`` (ours; :func:`normalised_embedding`). Also what
        :attr:`embedding_` returns.
    solver : {"bcd", "lbfgs"}
        ``"bcd"``: Algorithm 1, fixed gradient steps on every factor. ``"lbfgs"`` (ours):
        preconditioned L-BFGS A-steps and exact least squares for the other factors.
    learning_rate : float or None
        ``α_0``, Algorithm 1's step for ``A`` (``solver="bcd"``). ``None``: the paper's A.8 value
        for the method (:data:`PAPER_LEARNING_RATE`).
    learning_rate_others : float
        ``α_1``, Algorithm 1's step for the other factors (default 1, the paper's A.8 value).
    inner_steps : int or None
        Steps per factor per epoch. ``None``: 200 for ``"bcd"`` (App. A.7), 5 L-BFGS steps for
        ``"lbfgs"``.
    n_epochs : int
        Largest number of epochs (Algorithm 1's ``T``, which the paper does not state).
    tol : float
        Stop when ``J`` changes by less than ``tol`` relative to its value over an epoch (ours;
        the paper gives no stopping rule). ``0`` runs all ``n_epochs``.
    init : {"uniform", "svd", "random"} or list of arrays
        Initial factors: U(0, 1) entries (the paper), the leading singular vectors of each
        unfolding then an exact A-step, Gaussian entries then an exact A-step, or given factors
        (a warm start, e.g. a vanilla fit's ``factors_``).
    kernel : {"exact", "nystrom", "auto"}
        How KHSIC evaluates the ``n × n`` kernel: exactly (``O(n²)`` per step), by the Nyström
        approximation on ``n_landmarks`` entities (ours), or ``"auto"``: exact up to
        ``_kernels.NYSTROM_ROWS`` (2,000) entities, Nyström above.
    n_landmarks : int
        Landmarks of the Nyström approximation (stratified by group, seeded by ``random_state``).
    random_state : int, optional
        Seeds the initialisation and the landmarks.

    Attributes
    ----------
    factors_ : list of ndarray
        ``[A, F_1, …]``; ``A`` (``n × R``) is the entity factor. With ``solver="lbfgs"`` and
        ``embedding="normalized"`` the other factors have unit-norm columns and ``A`` carries the
        weights; otherwise the factors are as the iteration left them.
    lam_, learning_rate_, inner_steps_ : float, float, int
        The values used (after resolving ``None``).
    residual_fit_ : float
        ``‖X − ⟦factors_⟧‖_F / ‖X‖_F`` ([Kim21] App. A.6).
    group_residual_fit_ : ndarray
        The same over each group's entities (slices ``X[g]``).
    penalty_ : float
        The unweighted penalty at the end (KHSIC, HSIC or ``‖AᵀS‖²``; 0 for ``"none"``), on
        ``A`` or ``Â`` as ``embedding`` says.
    objective_ : float
        ``J`` at the end.
    gamma_ : float or None
        The RBF parameter used (``"khsic"``).
    kernel_ : {"exact", "nystrom"} or None
        How the KHSIC kernel was evaluated (``"khsic"``; ``None`` otherwise).
    landmarks_ : ndarray or None
        The Nyström landmarks' row indices (``kernel_ == "nystrom"``).
    history_ : DataFrame
        One row per epoch: ``epoch, objective, fit, penalty, residual_fit``.
    n_iter_ : int
    converged_ : bool
    group_labels_ : tuple of str

    Examples
    --------
    >>> import numpy as np
    >>> from fairaudit import FairCPD
    >>> rng = np.random.default_rng(0)
    >>> X = np.einsum("ir,jr,kr->ijk", rng.normal(size=(40, 3)), rng.normal(size=(6, 3)), rng.normal(size=(5, 3)))
    >>> groups = np.repeat(["a", "b"], 20)
    >>> model = FairCPD(rank=3, method="khsic", lam=0.0, solver="lbfgs", init="svd").fit(X, sensitive_features=groups)
    >>> model.residual_fit_ < 1e-6
    True
    """

    def __init__(
        self,
        rank: int = 2,
        method: str = "khsic",
        lam: float | None = None,
        l2: float = PAPER_L2,
        gamma=PAPER_GAMMA,
        embedding: str = "factor",
        solver: str = "bcd",
        learning_rate: float | None = None,
        learning_rate_others: float = PAPER_LEARNING_RATE_OTHERS,
        inner_steps: int | None = None,
        n_epochs: int = 200,
        tol: float = 1e-6,
        init="uniform",
        kernel: str = "exact",
        n_landmarks: int = _kernels.NYSTROM_LANDMARKS,
        random_state: int | None = None,
    ):
        self.rank = rank
        self.method = method
        self.lam = lam
        self.l2 = l2
        self.gamma = gamma
        self.embedding = embedding
        self.solver = solver
        self.learning_rate = learning_rate
        self.learning_rate_others = learning_rate_others
        self.inner_steps = inner_steps
        self.n_epochs = n_epochs
        self.tol = tol
        self.init = init
        self.kernel = kernel
        self.n_landmarks = n_landmarks
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def _check_params(self, shape) -> int:
        for name, allowed in (("method", METHODS), ("kernel", KERNELS), ("solver", SOLVERS), ("embedding", EMBEDDINGS)):
            if getattr(self, name) not in allowed:
                raise ParameterError(f"{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}.")
        for name, optional in (("lam", True), ("l2", False)):
            value = getattr(self, name)
            if optional and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
                raise ParameterError(f"{name} must be a finite number >= 0; got {value!r}.")
        for name, optional in (("n_epochs", False), ("inner_steps", True), ("n_landmarks", False)):
            value = getattr(self, name)
            if optional and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ParameterError(f"{name} must be a whole number >= 1; got {value!r}.")
        for name in ("learning_rate", "learning_rate_others"):
            value = getattr(self, name)
            if name == "learning_rate" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (np.isfinite(value) and value > 0):
                raise ParameterError(f"{name} must be a number > 0; got {value!r}.")
        if not (isinstance(self.tol, numbers.Real) and self.tol >= 0):
            raise ParameterError(f"tol must be a number >= 0; got {self.tol!r}.")
        if not (self.gamma == "median" or (isinstance(self.gamma, numbers.Real) and np.isfinite(self.gamma) and self.gamma > 0)):
            raise ParameterError(f"gamma must be 'median' or a number > 0; got {self.gamma!r}.")
        if not isinstance(self.init, list | tuple) and self.init not in INITS:
            raise ParameterError(f"init must be one of {', '.join(INITS)} or a list of factor matrices; got {self.init!r}.")
        return check_rank(self.rank, rank_limit(shape), what="rank", limit_name=f"the largest useful CP rank of a {'×'.join(map(str, shape))} array")

    def _resolve(self) -> None:
        """The values behind the ``None`` defaults ([Kim21] App. A.7–A.8)."""
        self.lam_ = float(PAPER_LAMBDA[self.method] if self.lam is None else self.lam)
        self.learning_rate_ = float(PAPER_LEARNING_RATE[self.method] if self.learning_rate is None else self.learning_rate)
        default_steps = PAPER_INNER_STEPS if self.solver == "bcd" else LBFGS_INNER_STEPS
        self.inner_steps_ = int(default_steps if self.inner_steps is None else self.inner_steps)

    def _initial_factors(self, X: np.ndarray, rank: int, rng: np.random.Generator) -> list[np.ndarray]:
        if isinstance(self.init, list | tuple):
            factors = [np.array(F, dtype=float) for F in self.init]
            expected = [(d, rank) for d in X.shape]
            if [F.shape for F in factors] != expected:
                raise ParameterError(f"init factors have shapes {[F.shape for F in factors]}, expected {expected}.")
        elif self.init == "uniform":  # [Kim21] App. A.8/A.9: every entry U(0, 1)
            factors = [rng.uniform(0.0, 1.0, size=(d, rank)) for d in (self._entities, *X.shape[1:])]
            factors[0] = self._distinct(factors[0])
        else:
            if self.init == "svd":
                factors = [np.zeros((X.shape[0], rank))] + [
                    _tensor.leading_left_vectors(X, m, rank, rng, self._weights) for m in range(1, X.ndim)
                ]
            else:
                factors = [rng.normal(size=(d, rank)) for d in (self._entities, *X.shape[1:])]
            factors[0] = _tensor.solve_right(_tensor.mttkrp(_tensor.unfold(X, 0), factors, 0), _tensor.gram(factors, 0))
        return _tensor.normalise(factors) if self._unit_columns else factors

    # ------------------------------------------------------------------ penalties
    def _bind_groups(self, codes, n_groups=None, *, gamma=None, whiten=False, landmarks=None, weights=None) -> FairCPD:
        """Set what :meth:`_penalty` reads — the one-hot and centred group matrices, γ, whether the
        embedding is whitened, this epoch's landmarks, the rows' counts (``weights``; ``S`` centred
        with the weighted means). :meth:`fit` does it before fitting; the tests use it to evaluate
        a penalty without a fit."""
        self._S = _kernels.one_hot(np.asarray(codes), n_groups)
        self._weights = None if weights is None else np.asarray(weights, dtype=float)
        self._St = self._S - (self._S.mean(axis=0) if weights is None else self._weights @ self._S / self._weights.sum())
        self.gamma_, self._whiten, self._landmarks = gamma, whiten, landmarks
        return self

    def _penalty(self, A: np.ndarray, gradient: bool = False, evaluation: bool = False):
        """Unweighted penalty of ``A`` (or of ``normalised_embedding(A)``), and its gradient in ``A``.

        With the Nyström kernel: on this epoch's landmarks, or with ``evaluation`` on the fixed
        evaluation landmarks :attr:`landmarks_`."""
        if self.method == "none":
            return (0.0, np.zeros_like(A)) if gradient else 0.0
        landmarks = getattr(self, "_evaluation_rows" if evaluation else "_landmarks", None)
        weights = self._weights
        if self.embedding == "factor":
            return _kernels.penalty(self.method, A, self._S, self._St, self.gamma_, gradient=gradient, landmarks=landmarks, weights=weights)
        Z, transform = normalised_embedding(A, return_scale=True, whiten=self._whiten, weights=weights)
        result = _kernels.penalty(self.method, Z, self._S, self._St, self.gamma_, gradient=gradient, landmarks=landmarks, weights=weights)
        if not gradient:
            return result
        value, grad_z = result
        return value, embedding_gradient(Z, transform, grad_z, weights)

    def _objective_parts(self, A: np.ndarray, penalty: float) -> float:
        """``λ·penalty + λ_ℓ2‖A‖²`` at ``A`` (``penalty`` already evaluated at ``A``)."""
        value = self.lam_ * penalty if self.lam_ > 0 else 0.0
        if self._ridge > 0:
            value += self._ridge * _dot(A, A, self._weights)
        return value

    # ------------------------------------------------------------------ Algorithm 1 (solver="bcd")
    def _bcd_epoch(self, factors, unfolded, N, xx, epoch):
        """One epoch of [Kim21] Algorithm 1 with App. A.7's inner steps: ``inner_steps`` gradient
        steps ``A ← A − α_0 ∇_A J`` with the other factors fixed, then ``F_m ← F_m − α_1 ∇ fit``
        for each other factor in turn. The fit's gradient in ``F_m`` is ``2(F_m G_m − M_m)/N_X``
        (``M_m`` the MTTKRP, ``G_m`` the Gram of the other factors, both fixed during the block).
        Returns the squared residual of the updated model."""
        M, G = _tensor.mttkrp(unfolded[0], factors, 0), _tensor.gram(factors, 0)
        A = factors[0]
        penalised = self.lam_ > 0 and self.method != "none"
        with np.errstate(over="ignore", invalid="ignore"):
            for _ in range(self.inner_steps_):
                grad = 2.0 * (A @ G - M) / N
                if self._ridge > 0:
                    grad += 2.0 * self._ridge * A
                if penalised:
                    grad += self.lam_ * self._penalty(A, gradient=True)[1]
                A = A - self.learning_rate_ * grad
            self._check_finite(A, "A", self.learning_rate_, epoch)
            factors[0] = A
            for m in range(1, len(factors)):
                M, G = _tensor.mttkrp(unfolded[m], factors, m, self._weights), _tensor.gram(factors, m, self._weights)
                F = factors[m]
                for _ in range(self.inner_steps_):
                    F = F - self.learning_rate_others * (2.0 * (F @ G - M) / N)
                self._check_finite(F, f"F_{m}", self.learning_rate_others, epoch)
                factors[m] = F
            last = factors[-1]
            return max(xx - 2.0 * np.sum(last * M) + np.sum((last @ G) * last), 0.0)

    def _check_finite(self, F: np.ndarray, name: str, step: float, epoch: int) -> None:
        if not np.isfinite(F).all() or float(np.abs(F).max()) > 1e150:
            which = "learning_rate" if name == "A" else "learning_rate_others"
            raise DivergenceError(
                f"Algorithm 1's gradient steps diverged at epoch {epoch}: the {name} update with step {step:g} "
                f"overflowed (a fixed step must stay below 2 / the block's curvature). Lower {which}, or use "
                "solver='lbfgs' (line search, exact least squares for the other factors).",
                block=name, step=step, epoch=epoch,
            )

    # ------------------------------------------------------------------ solver="lbfgs" (ours)
    def _a_step(self, A, M, G, N, xx, state):
        """``inner_steps`` descent steps on ``J(A)`` with the other factors fixed.

        ``J(A) = q(A) + λ·penalty(A)`` with the quadratic ``q`` (the fit, plus FATR's ℓ2 term)
        known exactly: Hessian ``Q = (2/N) G + 2λ_ℓ2 I`` acting on the rows of ``A``.
        Preconditioned L-BFGS steps (Nocedal & Wright 2006, Alg. 7.4) with ``Q⁻¹`` as the initial
        inverse Hessian, scaled along the last step by ``sᵀy / yᵀQ⁻¹y`` (≤ 1), and Armijo
        backtracking from the unit step. With no curvature pairs yet the unit step is the exact
        ALS update, so every method reduces to plain CP at λ = 0. The pairs keep only the
        *penalty's* gradient differences (``y_pen``) and add ``Q s`` afresh with the current
        ``G``, so they stay valid from one epoch to the next while the other factors change
        (the penalty does not depend on them); they are rescaled with ``A``'s columns when the
        other factors are normalised.

        ``state`` carries between epochs: ``"penalty"`` — the unweighted penalty and its gradient
        at the current ``A`` (so no kernel pass is repeated), ``"pairs"`` — the L-BFGS memory.
        Measured on a 1000 × 10 matrix at rank 8: 60–90 kernel passes where preconditioned
        gradient steps restarting their step length every epoch needed ~1,800 for the same
        objective.
        """
        penalised = self.lam_ > 0 and self.method != "none"
        ridge, weights = self._ridge, self._weights
        if not penalised and ridge == 0:
            state["penalty"] = None
            return _tensor.solve_right(M, G)
        Q = 2.0 * G / N + 2.0 * ridge * np.eye(G.shape[0])
        # Q is R × R and fixed during the step: its inverse once, then products with it (0.03 ms
        # against 0.44 ms for an LU solve with the 4,165 × 10 right-hand sides of the credit table).
        Q_inverse = _symmetric_inverse(Q)

        def smooth(Z):
            ZG = Z @ G
            value = (xx - 2.0 * _dot(Z, M, weights) + _dot(ZG, Z, weights)) / N + ridge * _dot(Z, Z, weights)
            return value, 2.0 * (ZG - M) / N + 2.0 * ridge * Z

        def penalty(Z):
            if not penalised:
                return 0.0, np.zeros_like(Z)
            return self._penalty(Z, gradient=True)

        if state.get("penalty") is None:
            state["penalty"] = penalty(A)
        pen_value, pen_grad = state["penalty"]
        smooth_value, smooth_grad = smooth(A)
        current = smooth_value + self.lam_ * pen_value
        grad = smooth_grad + self.lam_ * pen_grad
        pairs = state.setdefault("pairs", [])
        curvature = [pair for pair in (self._curvature(s, y_pen, Q, weights) for s, y_pen in pairs) if pair is not None]
        for _ in range(self.inner_steps_):
            direction = self._lbfgs_direction(grad, Q_inverse, curvature, weights)
            slope = _dot(grad, direction, weights)
            if not slope < 0:  # the memory misleads (or the point is stationary): plain preconditioning
                pairs.clear()
                curvature.clear()
                direction = -(grad @ Q_inverse)
                slope = _dot(grad, direction, weights)
                if not slope < 0:
                    break
            step = 1.0
            while step > 1e-10:
                trial = A + step * direction
                trial_pen = penalty(trial)
                trial_smooth = smooth(trial)
                value = trial_smooth[0] + self.lam_ * trial_pen[0]
                if value <= current + 1e-4 * step * slope:
                    break
                # Backtrack to the minimiser of the quadratic through J(0), J'(0) and J(step),
                # kept within [0.1, 0.5] of the failed step.
                bend = value - current - step * slope
                step *= min(0.5, max(0.1, -slope * step / (2.0 * bend))) if bend > 0 else 0.5
            else:
                break
            if penalised:
                pairs.append((trial - A, self.lam_ * (trial_pen[1] - pen_grad)))
                del pairs[:-PAIRS]
                pair = self._curvature(*pairs[-1], Q, weights)
                if pair is not None:
                    curvature.append(pair)
                    del curvature[:-PAIRS]
            decrease = current - value
            A, pen_value, pen_grad = trial, *trial_pen
            current, grad = value, trial_smooth[1] + self.lam_ * pen_grad
            if decrease <= 1e-15 * abs(current):
                break
        state["penalty"] = (pen_value, pen_grad)
        return A

    @staticmethod
    def _curvature(s, y_pen, Q, weights=None):
        """The pair ``(s, y = sQ + y_pen, 1/sᵀy)``, or ``None`` without positive curvature
        (``weights``: the rows' counts, every inner product over them weighted)."""
        y = s @ Q + y_pen
        sy = _dot(s, y, weights)
        if sy > 1e-12 * np.sqrt(_dot(s, s, weights) * _dot(y, y, weights)):
            return s, y, 1.0 / sy
        return None

    @staticmethod
    def _lbfgs_direction(grad, Q_inverse, curvature, weights=None):
        """``−H ∇J`` by the two-loop recursion with ``H₀ = c Q⁻¹`` (Nocedal & Wright, Alg. 7.4);
        ``weights``: the rows' counts, every inner product over them weighted."""
        q = grad.copy()
        alphas = []
        for s, y, rho in reversed(curvature):
            alpha = rho * _dot(s, q, weights)
            alphas.append(alpha)
            q -= alpha * y
        r = q @ Q_inverse
        if curvature:
            s, y, rho = curvature[-1]
            scale = (1.0 / rho) / max(_dot(y, y @ Q_inverse, weights), 1e-300)
            r *= min(1.0, scale)
        for (s, y, rho), alpha in zip(curvature, reversed(alphas), strict=True):
            beta = rho * _dot(y, r, weights)
            r += (alpha - beta) * s
        return -r

    @staticmethod
    def _rescale(state, weights):
        """Follow ``A → A·diag(weights)`` (normalisation) in the cached gradient and the pairs:
        the penalty is scale-invariant, so its gradient scales by ``1/weights``."""
        inverse = np.where(weights > 0, 1.0 / np.where(weights > 0, weights, 1.0), 0.0)
        if state.get("penalty") is not None:
            value, grad = state["penalty"]
            state["penalty"] = (value, grad * inverse)
        state["pairs"] = [(s * weights, y * inverse) for s, y in state.get("pairs", [])]

    def _other_step(self, factors, m, unfolded, N):
        """Exact update of factor ``m ≥ 1``: least squares, plus — in the normalised form, where
        ``‖A‖² = Σ_r w_r²`` with ``w_r = ‖a_r‖ Π_k ‖f_{k,r}‖`` — FATR's ℓ2 term as a per-column ridge."""
        weights = self._weights
        M, G = _tensor.mttkrp(unfolded, factors, m, weights), _tensor.gram(factors, m, weights)
        if self._ridge > 0 and self._unit_columns:
            squares = [weights @ (F * F) if k == 0 and weights is not None else np.sum(F * F, axis=0) for k, F in enumerate(factors)]
            norms = np.prod([sq for k, sq in enumerate(squares) if k != m], axis=0)
            return _tensor.solve_right(M, G + N * self._ridge * np.diag(norms)), M, G
        return _tensor.solve_right(M, G), M, G

    def _lbfgs_epoch(self, factors, unfolded, N, xx, state):
        """One epoch of ``solver="lbfgs"``: the A-step, exact steps for the other factors, and —
        in the normalised form — unit columns for the other factors. Returns the squared
        residual of the updated model."""
        M, G = _tensor.mttkrp(unfolded[0], factors, 0), _tensor.gram(factors, 0)
        factors[0] = self._a_step(factors[0], M, G, N, xx, state)
        for m in range(1, len(factors)):
            factors[m], M, G = self._other_step(factors, m, unfolded[m], N)
        # Fit of the just-updated model from the last mode's normal-equation pieces.
        last = factors[-1]
        sq_residual = max(xx - 2.0 * np.sum(last * M) + np.sum((last @ G) * last), 0.0)
        if self._unit_columns:
            factors[:], weights = _tensor.normalise(factors, return_weights=True)
            self._rescale(state, weights)
        return sq_residual

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, sensitive_features=None, sample_weight=None):
        """Fit the CP model to ``X`` (mode 0 = entities) with one group per entity.

        Parameters
        ----------
        X : array-like of shape (n, d_1, …)
            A 2-way (matrix) or higher-order array; every cell present and finite.
        sensitive_features : array-like of shape (n,) or (n, n_attributes)
            Group of each entity (several columns: intersections).
        sample_weight : array-like of shape (n,), optional
            How many identical entities each row stands for (whole numbers ≥ 1; a bootstrap
            resample's counts): the fit of ``np.repeat(X, sample_weight, axis=0)`` (groups repeated
            alike) held on the distinct rows — the same problem and iteration (module docstring,
            entities with counts). The fitted attributes are the repeated rows' except the entity
            factor, one row per row of ``X``: :meth:`repeated` gives the repeated rows' model.
        """
        X = check_tensor(X)
        self.n_features_in_ = int(np.prod(X.shape[1:]))  # cells per entity (a matrix: its columns)
        rank = self._check_params(X.shape)
        groups = encode_groups(sensitive_features, n_rows=X.shape[0])
        check_groups(groups)
        weights = _counts(sample_weight, X.shape[0])
        with _kernels.blas_threads():
            return self._fit(X, rank, groups, weights)

    def repeated(self, inverse) -> FairCPD:
        """The model a fit on the repeated rows gives, from a fit with ``sample_weight``: a copy whose
        entity factor has row ``inverse[i]`` at entity ``i`` (``inverse = np.repeat(arange(n),
        sample_weight)`` is the order in which the fit drew its landmarks, ``landmarks_`` positions
        in it); every other attribute is already the repeated rows'."""
        model = copy.copy(self)
        model.factors_ = [self.factors_[0][np.asarray(inverse)], *self.factors_[1:]]
        model._weights = None
        return model

    def _distinct(self, F: np.ndarray) -> np.ndarray:
        """The rows of ``F`` (one per repeated row) at each row's first copy."""
        return F if self._weights is None else F[np.searchsorted(self._copy_rows, np.arange(len(self._weights)))]

    def _setup(self, X: np.ndarray, rank: int, groups, weights=None) -> list[np.ndarray]:
        """Resolved parameters, the group matrices, γ, the kernel choice and the initial factors."""
        self._resolve()
        self.group_labels_ = groups.labels
        self._bind_groups(groups.codes, groups.n_groups, whiten=self.embedding == "normalized" and X.ndim == 2, weights=weights)
        self._entities = X.shape[0] if weights is None else int(weights.sum())
        self._copy_rows = None if weights is None else np.repeat(np.arange(X.shape[0]), weights.astype(np.intp))
        self._unit_columns = self.solver == "lbfgs" and self.embedding == "normalized"
        self._ridge = self.l2 if self.method == "fatr" else 0.0
        rng = np.random.default_rng(self.random_state)
        factors = self._initial_factors(X, rank, rng)
        self.kernel_ = self.landmarks_ = self._evaluation_rows = None
        if self.method == "khsic":
            copies = (lambda F: F) if weights is None else (lambda F: F[self._copy_rows])  # γ's median on the repeated rows
            if self.gamma != "median":
                self.gamma_ = float(self.gamma)
            elif self.embedding == "normalized":
                self.gamma_ = median_gamma(copies(X), rank, random_state=self.random_state)
            else:
                self.gamma_ = _kernels.median_gamma(copies(factors[0]), random_state=self.random_state)
            self.kernel_ = kernel_choice(self.kernel, self._entities, self.n_landmarks)
            if self.kernel_ == "nystrom":
                self._landmark_rng = np.random.default_rng(self.random_state)
                self._landmark_codes = copies(groups.codes)
                self.landmarks_ = self._draw_landmarks()
                self._evaluation_rows = self._rows_of(self.landmarks_)
        return factors

    def _draw_landmarks(self) -> np.ndarray:
        """Landmark positions among the (repeated) entities, stratified by group (:func:`_kernels.landmarks`)."""
        return _kernels.landmarks(self._landmark_codes, self.n_landmarks, self._landmark_rng)

    def _rows_of(self, positions: np.ndarray) -> np.ndarray:
        """The rows of ``X`` that positions among the repeated entities are copies of."""
        return positions if self._copy_rows is None else self._copy_rows[positions]

    def _fit(self, X: np.ndarray, rank: int, groups, weights=None) -> FairCPD:
        factors = self._setup(X, rank, groups, weights)
        N = self._entities * self.n_features_in_
        unfolded = [_tensor.unfold(X, m) for m in range(X.ndim)]
        xx = float(np.sum(X * X)) if weights is None else float(weights @ np.sum(unfolded[0] * unfolded[0], axis=1))
        history = []
        previous = np.inf
        self.converged_ = False
        state: dict = {}
        penalised = self.lam_ > 0 and self.method != "none"
        for epoch in range(1, self.n_epochs + 1):
            if self.kernel_ == "nystrom" and penalised:
                # Fresh landmarks every epoch: against a fixed set the A-step learns to move the
                # landmarks away from the other entities, lowering the approximate penalty while
                # the exact one grows (measured: 2.5× apart after 60 epochs at λ = λ_ref).
                self._landmarks = self._rows_of(self._draw_landmarks())
                state["penalty"] = None
            if self.solver == "bcd":
                sq_residual = self._bcd_epoch(factors, unfolded, N, xx, epoch)
            else:
                sq_residual = self._lbfgs_epoch(factors, unfolded, N, xx, state)
            fit = sq_residual / N
            # The L-BFGS A-step left the penalty at A (unchanged by the rescaling) in ``state``;
            # the Nyström kernel's is on this epoch's landmarks, so the history (and the stopping
            # rule) uses the fixed evaluation landmarks instead.
            if penalised and state.get("penalty") is not None and self.kernel_ != "nystrom":
                penalty = state["penalty"][0]
            else:
                penalty = self._penalty(factors[0], evaluation=True)
            objective = fit + self._objective_parts(factors[0], penalty)
            history.append((epoch, objective, fit, penalty, np.sqrt(sq_residual / xx) if xx > 0 else 0.0))
            if self.kernel_ == "nystrom" and penalised:
                if self._settled([row[1] for row in history]):
                    self.converged_ = True
                    break
            elif abs(previous - objective) <= self.tol * max(abs(objective), 1e-300):
                self.converged_ = True
                break
            previous = objective
        self._finish(X, factors, groups, history, xx)
        return self

    def _settled(self, objectives: list[float]) -> bool:
        """Stopping rule when the penalty is sampled (ours). Settled once either

        * *flat*: the last :data:`NOISY_WINDOW` objectives lie within :data:`NOISY_TOL` (relative;
          ``tol`` if larger) of each other — the fit stays inside its own resolution, from the
          third epoch on; or
        * *no trend*: the mean objective over the last :data:`NOISY_WINDOW` epochs is lower than over
          the window before by no more than the epoch-to-epoch noise (the recent epochs' standard
          deviation) or that resolution — a fit whose noise exceeds its resolution.

        With fresh Nyström landmarks every epoch each A-step follows a different approximation, so
        the objective (on the fixed evaluation landmarks) carries sampling noise — measured ±0.5–2 %
        from epoch to epoch on a 4,165-entity table at rank 10 — and the relative-change rule
        fires only when two noisy values happen to agree (fits ran 30–75 epochs, and to the cap at
        large λ, for changes of a few per cent below the noise). The second rule alone needs two
        windows: a fit warm-started from vanilla CP at a moderate λ, flat within 0.02 % after its
        first epoch on that table, ran six or seven; the first stops it after three or four
        (``docs/architecture.md``, The CP family → Speed, third pass).
        """
        window, resolution = NOISY_WINDOW, max(self.tol, NOISY_TOL)
        if len(objectives) < window:
            return False
        recent = np.asarray(objectives[-window:])
        level = abs(float(recent.mean()))
        if float(recent.max() - recent.min()) <= resolution * level:
            return True
        if len(objectives) < 2 * window:
            return False
        earlier = np.asarray(objectives[-2 * window : -window])
        noise = float(np.std(recent, ddof=1))
        return float(earlier.mean() - recent.mean()) <= max(resolution * level, noise)

    def _finish(self, X, factors, groups, history, xx) -> None:
        n, N = X.shape[0], self._entities * self.n_features_in_
        self.factors_ = factors
        self.n_iter_ = len(history)
        self.history_ = pd.DataFrame(history, columns=["epoch", "objective", "fit", "penalty", "residual_fit"])
        residual = X - _tensor.reconstruct(factors)
        flat_res, flat_x = residual.reshape(n, -1), X.reshape(n, -1)
        weights = self._weights

        def norm(flat, rows=slice(None)):
            """``‖·‖_F`` over the (repeated) rows ``rows``."""
            if weights is None:
                return float(np.linalg.norm(flat[rows]))
            return float(np.sqrt(weights[rows] @ np.sum(flat[rows] * flat[rows], axis=1)))

        norm_x = float(np.sqrt(xx))
        self.residual_fit_ = norm(flat_res) / norm_x if norm_x > 0 else 0.0
        self.group_residual_fit_ = np.array([norm(flat_res, mask) / max(norm(flat_x, mask), 1e-300) for mask in groups.masks()])
        self.penalty_ = float(history[-1][3])
        self.objective_ = norm(flat_res) ** 2 / N + self._objective_parts(factors[0], self.penalty_)
        del self._S, self._St, self._landmarks, self._evaluation_rows

    @property
    def embedding_(self) -> np.ndarray:
        """The entity embedding the penalty saw: the factor ``A`` (``embedding="factor"``, the
        paper) or the normalised ``Â`` — each column's mean square 1, whitened for a matrix
        (``embedding="normalized"``; :func:`normalised_embedding`)."""
        if self.embedding == "factor":
            return self.factors_[0].copy()
        return normalised_embedding(self.factors_[0], whiten=len(self.factors_) == 2, weights=getattr(self, "_weights", None))

    @property
    def _n_features_out(self) -> int:
        """Columns of the entity factor (``get_feature_names_out``: ``faircpd0 …``)."""
        return self.factors_[0].shape[1]

    def fit_transform(self, X, y=None, *, sensitive_features=None):
        """Fit and return the fitted entity factor ``A``."""
        return self.fit(X, sensitive_features=sensitive_features).factors_[0].copy()

    def transform(self, X) -> np.ndarray:
        """Embed entities by unpenalised least squares against the fitted other factors.

        ``X`` has shape ``(m, d_1, …)``. The groups of new entities are not known here, so this is
        the plain CP A-step; for the fitted entities use :attr:`embedding_`.
        """
        if not hasattr(self, "factors_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("FairCPD is not fitted yet; call fit first.")
        X = check_tensor(X)
        expected = tuple(F.shape[0] for F in self.factors_[1:])
        if X.shape[1:] != expected:
            if X.ndim == 2 and len(expected) == 1:  # a matrix: scikit-learn's words
                raise ParameterError(f"X has {X.shape[1]} features, but FairCPD is expecting {expected[0]} features as input.")
            raise ParameterError(f"X has modes {X.shape[1:]} after the entities; the model was fitted on {expected}.")
        factors = [np.zeros((X.shape[0], self.factors_[0].shape[1]))] + list(self.factors_[1:])
        return _tensor.solve_right(_tensor.mttkrp(_tensor.unfold(X, 0), factors, 0), _tensor.gram(factors, 0))
