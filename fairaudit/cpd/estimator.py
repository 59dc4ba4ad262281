"""``FairCPD``: CP decomposition with an independence penalty on the sensitive factor.

Kim & Gittens, "Learning fair canonical polyadical decompositions using a kernel independence
criterion" (arXiv:2104.13504, 2021) [Kim21], Algorithm 1 (KHSIC-BCD), with the baselines the
paper compares against: HSIC-BCD (linear kernels), FATR (Zhu, Hu & Caverlee, "Fairness-aware
tensor-based recommendation", CIKM 2018) [Zhu18], and plain block coordinate descent.

Problem. ``X`` has shape ``(n, d_1, …, d_{N−1})``; mode 0 holds the ``n`` entities whose groups
are given; ``A = F_0`` is their embedding. With ``N_X`` the number of cells of ``X``, every method
minimises

    J(A, F_1, …) = ‖X − ⟦A, F_1, …⟧‖²_F / N_X + penalty(A)

with ``penalty`` (see :mod:`fairaudit.cpd._kernels`)

=========  ============================================  =================================
method     penalty(A)  (on the normalised Â, below)  source
=========  ============================================  =================================
"none"     0                                             plain CP (ALS)
"fatr"     λ ‖ÂᵀS‖²_F + λ_ℓ2 ‖A‖²_F                     [Zhu18], as in [Kim21]
"hsic"     λ ‖ÃᵀS̃‖²_F / n²  (linear kernels)            [Kim21] HSIC-BCD
"khsic"    λ ⟨K̃_Â, K̃_S⟩ / n²  (RBF kernel on Â)         [Kim21] Algorithm 1 (KHSIC-BCD)
=========  ============================================  =================================

Each epoch (Algorithm 1's outer loop) updates ``A`` (the A-step), then every other factor by
exact least squares (the B- and C-steps: the penalty does not involve them, so these are the
ordinary ALS updates ``F_m = X_(m) KR · G_m⁻¹``).

Choices that are ours (the paper's full text could not be consulted while writing this; the
objective and the algorithm's structure are as the paper's abstract, Algorithm 1's name and the
project issue state them):

* **Scale.** CP is invariant under ``A → A D, F_1 → F_1 D⁻¹`` (``D`` positive diagonal), but a
  penalty on ``A`` as it stands is not: KHSIC, HSIC and ``‖AᵀS‖`` can all be driven to zero by
  shrinking ``A`` while the other factors grow, which changes the model not at all and hides
  nothing (we measured exactly this: the B- and C-steps undo each A-step's shrinkage and the
  iteration crawls). We therefore evaluate every penalty on the *normalised embedding*
  ``Â = A · diag(√n/‖a_r‖)`` (each column's mean square 1; :func:`normalised_embedding`),
  a function of the model alone, and keep the other factors' columns at unit norm (``A``
  carries CP's weights; Kolda & Bader's normalised form). The objective is then invariant to
  the rescaling and block coordinate descent decreases it monotonically. FATR's ``λ_ℓ2‖A‖²``
  in this form is ``λ_ℓ2 Σ_r w_r²`` on the component weights ``w_r = ‖a_r‖ Π_m ‖f_{m,r}‖``; the
  other factors' updates include it as a per-column ridge, so they stay exact.
* **Matrices (2-way CP).** ``A Bᵀ`` determines ``A`` only up to ``A → AQ`` with *any* invertible
  ``Q``, so per-column scaling is not enough there: the penalty could fall by mixing the columns
  towards collinearity at no cost in fit, and KHSIC-BCD drifted that way for hundreds of epochs
  without settling (measured on a 1000 × 10 matrix: largest column correlation 0.25 → 0.99,
  penalty → 0, the groups exactly as predictable by QDA as from vanilla CP; the result depended
  on where ``n_epochs`` cut the drift). For a 2-way array ``Â`` is therefore the *whitened*
  ``A (AᵀA/n)^{−1/2}``, a function of the model up to a rotation that no penalty or metric here
  sees (:func:`normalised_embedding`); three or more modes keep the per-column scaling (CP is then
  essentially unique, and we measured no drift).
* **A-step.** ``inner_steps`` descent steps (Algorithm 1 takes gradient steps in ``A``): L-BFGS
  directions with the Hessian of the fit term, ``(2/N_X) G`` (``G`` the Gram of the other
  factors), as the initial inverse-Hessian model, and Armijo backtracking from the unit step; at
  ``λ = 0`` one step is the exact ALS update, so every method reduces to plain CP. The curvature
  pairs and the penalty's value and gradient at the current ``A`` carry over from one epoch to the
  next (:meth:`FairCPD._a_step`), so no kernel pass is repeated. Measured on the 1000 × 10 sample
  at rank 8, λ = λ_ref: the previous preconditioned gradient steps, which restarted their step
  length at 1 every epoch and re-evaluated the penalty for the history, needed ~1,800 kernel
  passes where this needs ~60–90 for the same objective. Pass ``learning_rate`` for plain
  gradient steps of a fixed size instead. FATR and HSIC-BCD use the same A-step (their
  normalised penalties are no longer quadratic in ``A``).
* **Large n.** ``kernel="nystrom"`` (or ``"auto"`` above 2,000 entities) replaces KHSIC's
  ``O(n²)`` kernel by a Nyström approximation on ``n_landmarks`` entities
  (:func:`fairaudit.cpd._kernels.khsic_nystrom`), drawn afresh every epoch; the history, the
  stopping rule and ``penalty_`` use a fixed evaluation set (``landmarks_``).
* **γ.** ``gamma="median"``: ``1/(2m²)`` with ``m`` the median pairwise distance between the rows
  of ``X_(0)``'s rank-``R`` principal scores, normalised like ``Â`` — the embedding an
  unpenalised fit approximates — fixed before fitting so that the objective does not move.
* **S.** The one-hot matrix of the groups; see :mod:`fairaudit.cpd._kernels` for why the kernel on
  ``S`` is ``SSᵀ``.
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin

from ..errors import EmptyFileError, FairAuditError, MissingValueError, ParameterError
from ..groups import check_groups, encode_groups
from ..validation import check_rank
from . import _kernels, _tensor

METHODS = ("none", "fatr", "hsic", "khsic")
KERNELS = ("exact", "nystrom", "auto")
PAIRS = 8
"""Curvature pairs kept by the A-step's L-BFGS memory."""


def check_tensor(X, what: str = "X") -> np.ndarray:
    """``X`` as a finite float array with at least two modes, or a specific error."""
    X = np.asarray(X, dtype=float)
    if X.ndim < 2:
        raise FairAuditError(
            f"{what} must have at least two modes (entities × …), got shape {X.shape}; "
            "a data table is a 2-way array (rows × features)."
        )
    if X.size == 0:
        raise EmptyFileError(f"{what} is empty (shape {X.shape}).")
    if not np.isfinite(X).all():
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(X))[0])
        raise MissingValueError(f"{what} has a missing or infinite value at index {where}; fill or drop it first.")
    return X


def normalised_embedding(A: np.ndarray, return_scale: bool = False, whiten: bool = False):
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
    """
    n = A.shape[0]
    if whiten:
        values, vectors = np.linalg.eigh(A.T @ A / n)
        top = max(float(values.max()), 0.0)
        inverse_root = np.where(values > 1e-12 * top, 1.0 / np.sqrt(np.where(values > 0, values, 1.0)), 0.0) if top > 0 else np.zeros_like(values)
        transform = (vectors * inverse_root) @ vectors.T
        Z = A @ transform
        return (Z, transform) if return_scale else Z
    norms = np.linalg.norm(A, axis=0)
    scale = np.where(norms > 0, np.sqrt(n) / np.where(norms > 0, norms, 1.0), 0.0)
    Z = A * scale
    return (Z, scale) if return_scale else Z


def embedding_gradient(Z: np.ndarray, transform: np.ndarray, grad_z: np.ndarray) -> np.ndarray:
    """Chain rule from ``∂f/∂Â`` to ``∂f/∂A`` for a function ``f`` of :func:`normalised_embedding`.

    Per-column scaling (``transform`` a row vector ``s``, ``ẑ_r = √n a_r/‖a_r‖``):
    ``∂f/∂a_r = s_r (g_r − ẑ_r (ẑ_rᵀ g_r)/n)``. Whitening (``transform`` the matrix
    ``C = (AᵀA/n)^{−1/2}``): for ``f`` invariant under ``Â → ÂO`` (O orthogonal; every penalty
    here), ``∂f/∂A = (g − Â·sym(Âᵀg)/n) C`` (our derivation: ``f`` depends on ``C`` only through
    ``CCᵀ = (AᵀA/n)⁻¹``; checked against finite differences in the tests).
    """
    n = Z.shape[0]
    if transform.ndim == 1:
        return transform * (grad_z - Z * (np.sum(Z * grad_z, axis=0) / n))
    inner = Z.T @ grad_z
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


def rank_limit(shape: tuple[int, ...]) -> int:
    """The largest rank any array of ``shape`` can need: ``min_m Π_{k≠m} d_k``."""
    total = int(np.prod(shape))
    return int(min(total // d for d in shape))


class FairCPD(TransformerMixin, BaseEstimator):
    """CP decomposition whose sensitive-mode factor is penalised for revealing the groups.

    Parameters
    ----------
    rank : int
        CP rank ``R``.
    method : {"khsic", "hsic", "fatr", "none"}
        The penalty (module docstring). ``"none"`` is plain CP by block coordinate descent (ALS).
    lam : float
        Penalty weight λ (``λ_o`` for FATR). ``0`` gives plain CP for every method.
    l2 : float
        FATR's ``λ_ℓ2`` (ignored by the other methods).
    gamma : "median" or float
        RBF parameter of the kernel on ``A`` (``"khsic"`` only).
    kernel : {"exact", "nystrom", "auto"}
        How KHSIC evaluates the ``n × n`` kernel (``"khsic"`` only): exactly (``O(n²)`` per
        step), by the Nyström approximation on ``n_landmarks`` landmark entities (``O(n m)``;
        :func:`fairaudit.cpd._kernels.khsic_nystrom`), or ``"auto"``: exact up to
        ``_kernels.NYSTROM_ROWS`` (2,000) entities, Nyström above.
    n_landmarks : int
        Landmarks of the Nyström approximation (stratified by group, seeded by ``random_state``).
    n_epochs : int
        Largest number of epochs (A-step, then the other factors).
    inner_steps : int
        Descent steps per A-step (penalised methods).
    learning_rate : float or None
        ``None``: preconditioned L-BFGS steps with Armijo line search; a number: plain gradient
        steps of that size.
    tol : float
        Stop when the objective changes by less than ``tol`` relative to its value.
    init : {"svd", "random"} or list of arrays
        Initial factors: leading singular vectors of each unfolding (then an exact A-step),
        random Gaussian, or given factors (a warm start, e.g. a vanilla fit's ``factors_``).
    random_state : int, optional
        Seeds the random initialisation (and random padding when ``rank`` exceeds a mode).

    Attributes
    ----------
    factors_ : list of ndarray
        ``[A, F_1, …]``; ``A`` (``n × R``) is the entity embedding and carries the weights, the
        other factors have unit-norm columns.
    residual_fit_ : float
        ``‖X − ⟦factors_⟧‖_F / ‖X‖_F`` ([Kim21] App. A.6).
    group_residual_fit_ : ndarray
        The same over each group's entities (slices ``X[g]``).
    penalty_ : float
        The unweighted penalty of the final embedding (KHSIC, HSIC or ``‖ÂᵀS‖²``; 0 for ``"none"``).
    objective_ : float
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
    >>> model = FairCPD(rank=3, method="khsic", lam=0.0, random_state=0).fit(X, sensitive_features=groups)
    >>> model.residual_fit_ < 1e-6
    True
    """

    def __init__(
        self,
        rank: int = 2,
        method: str = "khsic",
        lam: float = 1.0,
        l2: float = 0.0,
        gamma="median",
        kernel: str = "exact",
        n_landmarks: int = _kernels.NYSTROM_LANDMARKS,
        n_epochs: int = 200,
        inner_steps: int = 5,
        learning_rate: float | None = None,
        tol: float = 1e-6,
        init="svd",
        random_state: int | None = None,
    ):
        self.rank = rank
        self.method = method
        self.lam = lam
        self.l2 = l2
        self.gamma = gamma
        self.kernel = kernel
        self.n_landmarks = n_landmarks
        self.n_epochs = n_epochs
        self.inner_steps = inner_steps
        self.learning_rate = learning_rate
        self.tol = tol
        self.init = init
        self.random_state = random_state

    # ------------------------------------------------------------------ validation
    def _check_params(self, shape) -> int:
        if self.method not in METHODS:
            raise ParameterError(f"method must be one of {', '.join(METHODS)}; got {self.method!r}.")
        for name in ("lam", "l2"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
                raise ParameterError(f"{name} must be a finite number >= 0; got {value!r}.")
        if self.kernel not in KERNELS:
            raise ParameterError(f"kernel must be one of {', '.join(KERNELS)}; got {self.kernel!r}.")
        for name in ("n_epochs", "inner_steps", "n_landmarks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ParameterError(f"{name} must be a whole number >= 1; got {value!r}.")
        if self.learning_rate is not None and not (isinstance(self.learning_rate, numbers.Real) and self.learning_rate > 0):
            raise ParameterError(f"learning_rate must be None (line search) or a number > 0; got {self.learning_rate!r}.")
        if not (isinstance(self.tol, numbers.Real) and self.tol >= 0):
            raise ParameterError(f"tol must be a number >= 0; got {self.tol!r}.")
        if not (self.gamma == "median" or (isinstance(self.gamma, numbers.Real) and self.gamma > 0)):
            raise ParameterError(f"gamma must be 'median' or a number > 0; got {self.gamma!r}.")
        return check_rank(self.rank, rank_limit(shape), what="rank", limit_name=f"the largest useful CP rank of a {'×'.join(map(str, shape))} array")

    def _initial_factors(self, X: np.ndarray, rank: int, rng: np.random.Generator) -> list[np.ndarray]:
        if isinstance(self.init, list | tuple):
            factors = [np.array(F, dtype=float) for F in self.init]
            expected = [(d, rank) for d in X.shape]
            if [F.shape for F in factors] != expected:
                raise ParameterError(
                    f"init factors have shapes {[F.shape for F in factors]}, expected {expected}."
                )
            return _tensor.normalise(factors)
        if self.init == "svd":
            factors = [np.zeros((X.shape[0], rank))] + [
                _tensor.leading_left_vectors(X, m, rank, rng) for m in range(1, X.ndim)
            ]
        elif self.init == "random":
            factors = [rng.normal(size=(d, rank)) for d in X.shape]
        else:
            raise ParameterError(f"init must be 'svd', 'random' or a list of factor matrices; got {self.init!r}.")
        unfolded = _tensor.unfold(X, 0)
        factors[0] = _tensor.solve_right(_tensor.mttkrp(unfolded, factors, 0), _tensor.gram(factors, 0))
        return _tensor.normalise(factors)

    # ------------------------------------------------------------------ penalties
    def _penalty(self, A: np.ndarray, gradient: bool = False, evaluation: bool = False):
        """Unweighted penalty of ``normalised_embedding(A)`` (and its gradient in ``A``).

        With the Nyström kernel: on this epoch's landmarks, or with ``evaluation`` on the fixed
        evaluation landmarks :attr:`landmarks_`."""
        if self.method == "none":
            return (0.0, np.zeros_like(A)) if gradient else 0.0
        Z, transform = normalised_embedding(A, return_scale=True, whiten=getattr(self, "_whiten", False))
        landmarks = getattr(self, "landmarks_" if evaluation else "_landmarks", None)
        result = _kernels.penalty(self.method, Z, self._S, self._St, self.gamma_, gradient=gradient, landmarks=landmarks)
        if not gradient:
            return result
        value, grad_z = result
        return value, embedding_gradient(Z, transform, grad_z)

    def _objective_parts(self, A: np.ndarray, penalty: float) -> float:
        """``λ·penalty + λ_ℓ2‖A‖²`` at ``A`` (the other factors having unit columns; ``penalty``
        already evaluated at ``A``)."""
        value = 0.0
        if self.lam > 0:
            value = self.lam * penalty
        if self.method == "fatr" and self.l2 > 0:
            value += self.l2 * float(np.sum(A * A))
        return value

    # ------------------------------------------------------------------ A-step
    def _a_step(self, A, M, G, N, xx, state):
        """``inner_steps`` descent steps on ``J(A)`` with the other factors fixed (unit columns).

        ``J(A) = q(A) + λ·penalty(A)`` with the quadratic ``q`` (the fit, plus FATR's ℓ2 term)
        known exactly: Hessian ``Q = (2/N) G + 2λ_ℓ2 I`` acting on the rows of ``A``. Default:
        preconditioned L-BFGS steps (Nocedal & Wright 2006, Alg. 7.4) with ``Q⁻¹`` as the
        initial inverse Hessian, scaled along the last step by ``sᵀy / yᵀQ⁻¹y`` (≤ 1), and Armijo
        backtracking from the unit step. With no curvature pairs yet the unit step is the exact
        ALS update, so every method reduces to plain CP at λ = 0. The pairs keep only the
        *penalty's* gradient differences (``y_pen``) and add ``Q s`` afresh with the current
        ``G``, so they stay valid from one epoch to the next while the other factors change
        (the penalty does not depend on them); they are rescaled with ``A``'s columns when the
        other factors are normalised. With ``learning_rate``: plain steps ``A ← A − η ∇J``.

        ``state`` carries between epochs: ``"penalty"`` — the unweighted penalty and its gradient
        at the current ``A`` (so no kernel pass is repeated), ``"pairs"`` — the L-BFGS memory.
        """
        penalised = self.lam > 0 and self.method != "none"
        ridge = self.l2 if self.method == "fatr" else 0.0
        if not penalised and ridge == 0:
            state["penalty"] = None
            return _tensor.solve_right(M, G)
        Q = 2.0 * G / N + 2.0 * ridge * np.eye(G.shape[0])

        def smooth(Z):
            ZG = Z @ G
            value = (xx - 2.0 * np.sum(Z * M) + np.sum(ZG * Z)) / N + ridge * float(np.sum(Z * Z))
            return value, 2.0 * (ZG - M) / N + 2.0 * ridge * Z

        def penalty(Z):
            if not penalised:
                return 0.0, np.zeros_like(Z)
            return self._penalty(Z, gradient=True)

        if state.get("penalty") is None:
            state["penalty"] = penalty(A)
        pen_value, pen_grad = state["penalty"]
        smooth_value, smooth_grad = smooth(A)
        current = smooth_value + self.lam * pen_value
        grad = smooth_grad + self.lam * pen_grad
        pairs = state.setdefault("pairs", [])
        curvature = [pair for pair in (self._curvature(s, y_pen, Q) for s, y_pen in pairs) if pair is not None]
        for _ in range(self.inner_steps):
            if self.learning_rate is not None:
                trial = A - self.learning_rate * grad
                trial_pen = penalty(trial)
                trial_smooth = smooth(trial)
                A, pen_value, pen_grad = trial, *trial_pen
                current = trial_smooth[0] + self.lam * pen_value
                grad = trial_smooth[1] + self.lam * pen_grad
                continue
            direction = self._lbfgs_direction(grad, Q, curvature)
            slope = float(np.sum(grad * direction))
            if not slope < 0:  # the memory misleads (or the point is stationary): plain preconditioning
                pairs.clear()
                curvature.clear()
                direction = -_tensor.solve_right(grad, Q)
                slope = float(np.sum(grad * direction))
                if not slope < 0:
                    break
            step = 1.0
            while step > 1e-10:
                trial = A + step * direction
                trial_pen = penalty(trial)
                trial_smooth = smooth(trial)
                value = trial_smooth[0] + self.lam * trial_pen[0]
                if value <= current + 1e-4 * step * slope:
                    break
                # Backtrack to the minimiser of the quadratic through J(0), J'(0) and J(step),
                # kept within [0.1, 0.5] of the failed step.
                bend = value - current - step * slope
                step *= min(0.5, max(0.1, -slope * step / (2.0 * bend))) if bend > 0 else 0.5
            else:
                break
            if penalised:
                pairs.append((trial - A, self.lam * (trial_pen[1] - pen_grad)))
                del pairs[:-PAIRS]
                pair = self._curvature(*pairs[-1], Q)
                if pair is not None:
                    curvature.append(pair)
                    del curvature[:-PAIRS]
            decrease = current - value
            A, pen_value, pen_grad = trial, *trial_pen
            current, grad = value, trial_smooth[1] + self.lam * pen_grad
            if decrease <= 1e-15 * abs(current):
                break
        state["penalty"] = (pen_value, pen_grad)
        return A

    @staticmethod
    def _curvature(s, y_pen, Q):
        """The pair ``(s, y = sQ + y_pen, 1/sᵀy)``, or ``None`` without positive curvature."""
        y = s @ Q + y_pen
        sy = float(np.sum(s * y))
        if sy > 1e-12 * np.sqrt(float(np.sum(s * s)) * float(np.sum(y * y))):
            return s, y, 1.0 / sy
        return None

    @staticmethod
    def _lbfgs_direction(grad, Q, curvature):
        """``−H ∇J`` by the two-loop recursion with ``H₀ = c Q⁻¹`` (Nocedal & Wright, Alg. 7.4)."""
        q = grad.copy()
        alphas = []
        for s, y, rho in reversed(curvature):
            alpha = rho * float(np.sum(s * q))
            alphas.append(alpha)
            q -= alpha * y
        r = _tensor.solve_right(q, Q)
        if curvature:
            s, y, rho = curvature[-1]
            scale = (1.0 / rho) / max(float(np.sum(y * _tensor.solve_right(y, Q))), 1e-300)
            r *= min(1.0, scale)
        for (s, y, rho), alpha in zip(curvature, reversed(alphas), strict=True):
            beta = rho * float(np.sum(y * r))
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
        """Exact update of factor ``m ≥ 1``: least squares, plus FATR's ℓ2 term on the component
        weights ``w_r = ‖a_r‖ Π_k ‖f_{k,r}‖`` as a per-column ridge."""
        M, G = _tensor.mttkrp(unfolded, factors, m), _tensor.gram(factors, m)
        if self.method == "fatr" and self.l2 > 0:
            norms = np.prod([np.sum(F * F, axis=0) for k, F in enumerate(factors) if k != m], axis=0)
            return _tensor.solve_right(M, G + N * self.l2 * np.diag(norms)), M, G
        return _tensor.solve_right(M, G), M, G

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, sensitive_features=None):
        """Fit the CP model to ``X`` (mode 0 = entities) with one group per entity.

        Parameters
        ----------
        X : array-like of shape (n, d_1, …)
            A 2-way (matrix) or higher-order array; every cell present and finite.
        sensitive_features : array-like of shape (n,) or (n, n_attributes)
            Group of each entity (several columns: intersections).
        """
        X = check_tensor(X)
        rank = self._check_params(X.shape)
        groups = encode_groups(sensitive_features, n_rows=X.shape[0])
        check_groups(groups)
        with _kernels.blas_threads():
            return self._fit(X, rank, groups)

    def _fit(self, X: np.ndarray, rank: int, groups) -> FairCPD:
        self.group_labels_ = groups.labels
        n = X.shape[0]
        N = X.size
        self._S = _kernels.one_hot(groups.codes, groups.n_groups)
        self._St = _kernels.centred(self._S)
        self._whiten = X.ndim == 2
        rng = np.random.default_rng(self.random_state)
        self.gamma_ = None
        self.kernel_ = self.landmarks_ = self._landmarks = None
        landmark_rng = np.random.default_rng(self.random_state)
        if self.method == "khsic":
            self.gamma_ = (
                median_gamma(X, rank, random_state=self.random_state)
                if self.gamma == "median"
                else float(self.gamma)
            )
            self.kernel_ = kernel_choice(self.kernel, n, self.n_landmarks)
            if self.kernel_ == "nystrom":
                self.landmarks_ = _kernels.landmarks(groups.codes, self.n_landmarks, landmark_rng)
        factors = self._initial_factors(X, rank, rng)
        unfolded = [_tensor.unfold(X, m) for m in range(X.ndim)]
        xx = float(np.sum(X * X))
        history = []
        previous = np.inf
        self.converged_ = False
        state: dict = {}
        penalised = self.lam > 0 and self.method != "none"
        for epoch in range(1, self.n_epochs + 1):
            if self.kernel_ == "nystrom" and penalised:
                # Fresh landmarks every epoch: against a fixed set the A-step learns to move the
                # landmarks away from the other entities, lowering the approximate penalty while
                # the exact one grows (measured: 2.5× apart after 60 epochs at λ = λ_ref).
                self._landmarks = _kernels.landmarks(groups.codes, self.n_landmarks, landmark_rng)
                state["penalty"] = None
            M, G = _tensor.mttkrp(unfolded[0], factors, 0), _tensor.gram(factors, 0)
            factors[0] = self._a_step(factors[0], M, G, N, xx, state)
            for m in range(1, X.ndim):
                factors[m], M, G = self._other_step(factors, m, unfolded[m], N)
            # Fit of the just-updated model from the last mode's normal-equation pieces.
            last = factors[-1]
            sq_residual = max(xx - 2.0 * np.sum(last * M) + np.sum((last @ G) * last), 0.0)
            factors, weights = _tensor.normalise(factors, return_weights=True)
            self._rescale(state, weights)
            fit = sq_residual / N
            # The A-step left the penalty at A (unchanged by the rescaling) in ``state``; the
            # Nyström kernel's is on this epoch's landmarks, so the history (and the stopping
            # rule) uses the fixed evaluation landmarks instead.
            if penalised and state.get("penalty") is not None and self.kernel_ != "nystrom":
                penalty = state["penalty"][0]
            else:
                penalty = self._penalty(factors[0], evaluation=True)
            objective = fit + self._objective_parts(factors[0], penalty)
            history.append((epoch, objective, fit, penalty, np.sqrt(sq_residual / xx) if xx > 0 else 0.0))
            if abs(previous - objective) <= self.tol * max(abs(objective), 1e-300):
                self.converged_ = True
                break
            previous = objective
        self.factors_ = factors
        self.n_iter_ = len(history)
        self.history_ = pd.DataFrame(history, columns=["epoch", "objective", "fit", "penalty", "residual_fit"])
        residual = X - _tensor.reconstruct(factors)
        norm_x = float(np.sqrt(xx))
        self.residual_fit_ = float(np.linalg.norm(residual) / norm_x) if norm_x > 0 else 0.0
        flat_res, flat_x = residual.reshape(n, -1), X.reshape(n, -1)
        self.group_residual_fit_ = np.array(
            [
                np.linalg.norm(flat_res[mask]) / max(np.linalg.norm(flat_x[mask]), 1e-300)
                for mask in groups.masks()
            ]
        )
        self.penalty_ = float(history[-1][3])
        self.objective_ = float(np.sum(residual * residual)) / N + self._objective_parts(factors[0], self.penalty_)
        del self._S, self._St, self._landmarks
        return self

    @property
    def embedding_(self) -> np.ndarray:
        """The entity embedding with CP's indeterminacy taken out (what the penalties and the
        audit's metrics see; CP's weights are in ``factors_[0]``): ``A`` with each column scaled to
        mean square 1, or for a matrix (2-way CP) ``A`` whitened (:func:`normalised_embedding`)."""
        return normalised_embedding(self.factors_[0], whiten=len(self.factors_) == 2)

    def fit_transform(self, X, y=None, *, sensitive_features=None):
        """Fit and return the fitted entity embedding ``A``."""
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
            raise ParameterError(f"X has modes {X.shape[1:]} after the entities; the model was fitted on {expected}.")
        factors = [np.zeros((X.shape[0], self.factors_[0].shape[1]))] + list(self.factors_[1:])
        return _tensor.solve_right(_tensor.mttkrp(_tensor.unfold(X, 0), factors, 0), _tensor.gram(factors, 0))
