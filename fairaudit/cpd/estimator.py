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
* **A-step.** ``inner_steps`` gradient steps (Algorithm 1 takes gradient steps in ``A``). By
  default each is preconditioned by the Hessian of the fit term, ``D = −∇J · (N_X/2) G⁻¹`` with
  ``G`` the Gram of the other factors, and its length set by Armijo backtracking; at ``λ = 0``
  one step is the exact ALS update, so every method reduces to plain CP. Pass
  ``learning_rate`` for plain gradient steps of a fixed size instead. FATR and HSIC-BCD use the
  same A-step (their normalised penalties are no longer quadratic in ``A``).
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


def normalised_embedding(A: np.ndarray, return_scale: bool = False):
    """``Â = A · diag(√n / ‖a_r‖)``: the embedding with every column's mean square equal to 1.

    CP's scaling freedom moves weight between ``A`` and the other factors without changing the
    model; ``Â`` is what stays. Zero columns stay zero. With ``return_scale`` also returns the
    row vector ``√n / ‖a_r‖`` (0 for zero columns).
    """
    n = A.shape[0]
    norms = np.linalg.norm(A, axis=0)
    scale = np.where(norms > 0, np.sqrt(n) / np.where(norms > 0, norms, 1.0), 0.0)
    Z = A * scale
    return (Z, scale) if return_scale else Z


def median_gamma(X: np.ndarray, rank: int, random_state: int | None = 0) -> float:
    """The default RBF parameter at ``rank``: the median heuristic on the rows of ``X_(0)``'s
    rank-``rank`` principal scores with unit-mean-square columns (the normalised embedding that
    an unpenalised fit approximates)."""
    return _kernels.median_gamma(normalised_embedding(_tensor.truncated_scores(X, rank)), random_state=random_state)


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
    n_epochs : int
        Largest number of epochs (A-step, then the other factors).
    inner_steps : int
        Gradient steps per A-step (``"khsic"`` only).
    learning_rate : float or None
        ``None``: preconditioned steps with Armijo line search; a number: plain gradient steps
        of that size (``"khsic"`` only).
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
        for name in ("n_epochs", "inner_steps"):
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
    def _penalty(self, A: np.ndarray, gradient: bool = False):
        """Unweighted penalty of ``normalised_embedding(A)`` (and its gradient in ``A``)."""
        if self.method == "none":
            return (0.0, np.zeros_like(A)) if gradient else 0.0
        Z, scale = normalised_embedding(A, return_scale=True)
        if self.method == "khsic":
            result = _kernels.khsic(Z, self._St, self.gamma_, gradient=gradient)
        elif self.method == "hsic":
            result = _kernels.hsic_linear(Z, self._St, gradient=gradient)
        else:
            result = _kernels.orthogonality_sq(Z, self._S, gradient=gradient)
        if not gradient:
            return result
        value, grad_z = result
        # Chain rule through z_r = √n a_r / ‖a_r‖:  ∂/∂a_r = (√n/‖a_r‖)(g_r − z_r (z_rᵀ g_r)/n).
        n = A.shape[0]
        grad = scale * (grad_z - Z * (np.sum(Z * grad_z, axis=0) / n))
        return value, grad

    def _objective_parts(self, A: np.ndarray) -> float:
        """``λ·penalty + λ_ℓ2‖A‖²`` at ``A`` (the other factors having unit columns)."""
        value = self.lam * self._penalty(A) if self.lam > 0 else 0.0
        if self.method == "fatr" and self.l2 > 0:
            value += self.l2 * float(np.sum(A * A))
        return value

    # ------------------------------------------------------------------ A-step
    def _a_step(self, A, M, G, N, xx):
        """``inner_steps`` gradient steps on ``J(A)`` with the other factors fixed (unit columns).

        Default: the direction ``−∇J · (N/2) G⁻¹`` (Newton for the fit term, which makes one unit
        step the exact ALS update when λ = 0) with Armijo backtracking; with ``learning_rate``,
        plain steps ``A ← A − η ∇J``.
        """
        penalised = self.lam > 0 and self.method != "none"
        if not penalised and not (self.method == "fatr" and self.l2 > 0):
            return _tensor.solve_right(M, G)

        def evaluate(Z, gradient):
            """J(Z), and ∇J(Z) if asked (one kernel pass for both)."""
            value = (xx - 2.0 * np.sum(Z * M) + np.sum((Z @ G) * Z)) / N
            grad = 2.0 * (Z @ G - M) / N if gradient else None
            if penalised:
                if gradient:
                    penalty, penalty_grad = self._penalty(Z, gradient=True)
                    grad += self.lam * penalty_grad
                else:
                    penalty = self._penalty(Z)
                value += self.lam * penalty
            if self.method == "fatr" and self.l2 > 0:
                value += self.l2 * float(np.sum(Z * Z))
                if gradient:
                    grad += 2.0 * self.l2 * Z
            return value, grad

        step = 1.0
        current, grad = evaluate(A, True)
        for _ in range(self.inner_steps):
            if self.learning_rate is not None:
                A = A - self.learning_rate * grad
                current, grad = evaluate(A, True)
                continue
            direction = -0.5 * N * _tensor.solve_right(grad, G)
            slope = float(np.sum(grad * direction))
            if not slope < 0:  # stationary up to rounding
                break
            step = min(1.0, 2.0 * step)
            while step > 1e-12:
                trial = A + step * direction
                # Most trials pass: their gradient comes from the same kernel pass as the value.
                value, trial_grad = evaluate(trial, True)
                if value <= current + 1e-4 * step * slope:
                    A, current, grad = trial, value, trial_grad
                    break
                step *= 0.5
            else:
                break
        return A

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
        self.group_labels_ = groups.labels
        n = X.shape[0]
        N = X.size
        self._S = _kernels.one_hot(groups.codes, groups.n_groups)
        self._St = _kernels.centred(self._S)
        rng = np.random.default_rng(self.random_state)
        self.gamma_ = None
        if self.method == "khsic":
            self.gamma_ = (
                median_gamma(X, rank, random_state=self.random_state)
                if self.gamma == "median"
                else float(self.gamma)
            )
        factors = self._initial_factors(X, rank, rng)
        unfolded = [_tensor.unfold(X, m) for m in range(X.ndim)]
        xx = float(np.sum(X * X))
        history = []
        previous = np.inf
        self.converged_ = False
        for epoch in range(1, self.n_epochs + 1):
            M, G = _tensor.mttkrp(unfolded[0], factors, 0), _tensor.gram(factors, 0)
            factors[0] = self._a_step(factors[0], M, G, N, xx)
            for m in range(1, X.ndim):
                factors[m], M, G = self._other_step(factors, m, unfolded[m], N)
            # Fit of the just-updated model from the last mode's normal-equation pieces.
            last = factors[-1]
            sq_residual = max(xx - 2.0 * np.sum(last * M) + np.sum((last @ G) * last), 0.0)
            factors = _tensor.normalise(factors)
            fit = sq_residual / N
            penalty = self._penalty(factors[0])
            objective = fit + self._objective_parts(factors[0])
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
        self.penalty_ = float(self._penalty(factors[0]))
        self.objective_ = float(np.sum(residual * residual)) / N + self._objective_parts(factors[0])
        del self._S, self._St
        return self

    @property
    def embedding_(self) -> np.ndarray:
        """The entity embedding: ``A`` with each column scaled to mean square 1 (what the
        penalties and the audit's metrics see; CP's weights are in ``factors_[0]``)."""
        return normalised_embedding(self.factors_[0])

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
