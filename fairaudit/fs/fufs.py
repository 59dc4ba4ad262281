"""FUFS: fairness-aware unsupervised feature selection by centred kernel alignment.

Reference
---------
[Xing21] X. Xing, H. Liu, C. Chen, J. Li. "Fairness-Aware Unsupervised Feature Selection".
    arXiv:2106.02216, 2021 (CIKM 2021).

What is the paper's and what is ours
------------------------------------
The paper's full text could not be consulted here (only its abstract); the formulation below
follows its stated design — keep a subset of real features whose kernel best *preserves the
kernel of the original feature space* while being *minimally aligned with the protected
attributes*, measured by centred kernel alignment, relaxed to a box and solved by projected
gradient — and the structure the issue names (eqs. 1, 2, 4, 6, 7; parameters ``alpha``,
``beta``, ``n_sensitive_features``). Every concrete choice below that the abstract does not fix
is ours and marked as such.

* Alignment (eq. 1) and centred alignment (eq. 2): ``A(K, T) = ⟨K, T⟩_F / (‖K‖_F ‖T‖_F)`` and
  ``A_c(K, T) = A(HKH, HTH)`` with ``H = I − 11ᵀ/n`` (Cristianini et al. 2002; Cortes et al.
  2012).
* Kernels: ``K_X`` is the RBF kernel of all features; the protected kernel ``K_Y = Y Yᵀ`` with
  ``Y`` the one-hot group indicator (1 when two rows share a group) — *ours*; for a selection
  weight ``s``, ``K_s`` is the RBF kernel of ``X diag(√s)``, i.e. ``exp(−γ_s Σ_j s_j (x_aj −
  x_bj)²)`` with ``γ_s = γ d / Σ_j s_j`` (*ours*: linear weights keep the gradient non-zero at
  ``s_j = 0``; the rescaling keeps ``K_s`` on the scale of ``K_X``).
* Proxies (``n_sensitive_features = g``, *our reading*): the ``g`` features whose joint kernel is
  best aligned with the protected kernel, ``t* = argmax_{t ∈ C_g} A_c(K_t, K_Y)``, found with the
  same projected gradient and rounded to the top ``g``. They are the features through which the
  protected attribute reaches the data (a zip code standing in for race); ``sensitive_scores_``.
* Objective (eq. 4 with binary ``s``; eq. 6 relaxed to ``s ∈ C_m = {s ∈ [0, 1]^d : Σ s = m}``)::

      J(s) = A_c(K_s, K_X) − α A_c(K_s, K_Y) − β A_c(K_s, K_{t*})

  *Ours*: the split of the fairness penalty into the protected attribute itself (``alpha``) and
  its proxies (``beta``); keeping ``Σ s = m`` in the relaxation (a box alone would be maximised
  by keeping every feature).
* Projected gradient (eq. 7): ``s ← Π_{C_m}(s + η_k ∇J(s))`` with the analytic gradient of the
  alignments (:mod:`fairaudit.fs._alignment`) and the Euclidean projection onto the box
  ``[0, 1]^d`` intersected with ``Σ s = m`` (a box clip after a scalar shift). Step sizes: a
  fixed schedule ``η_k = learning_rate / (1 + lr_decay k)``, or ``"auto"`` (*ours*): Armijo
  backtracking along the projection arc from a Barzilai–Borwein trial step, so ``objective_history_`` never decreases. Start:
  ``s = m/d`` for every feature (deterministic). Final selection: the ``m`` largest ``s_j``
  (ties broken by the gradient at the solution), then (*ours*, ``refine=True``) improved by
  gradient-guided swaps that are kept only when the binary objective increases — on data whose
  relaxed optimum spreads weight over many features (google: 1,036 sparse binary columns) plain
  rounding loses much of the objective.
* Constant columns (*ours*) carry no distance and have a zero gradient: they are left out of
  the optimisation, scored 0 and ordered last.
* Scale (*ours*): above ``exact_max_rows`` rows the RBF kernels use the Nyström approximation on
  ``n_landmarks`` seeded landmark rows, and the objective and its gradient are computed through
  the approximation in O(n L (L + d)) time and O(n L) memory per evaluation (``approximation_``
  says which was used); fixed targets keep their 64 leading directions.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import validate_data

from ..errors import ParameterError
from ..groups import check_groups, encode_groups
from ..validation import check_rank
from ._alignment import EXACT_MAX_ROWS, NYSTROM_LANDMARKS, Linear, project_capped_simplex, rbf_backend
from ._selector import FittedSelector

KERNELS = ("rbf", "linear")
APPROXIMATIONS = ("auto", "exact", "nystroem")


def _resolve_gamma(gamma, X: np.ndarray) -> float:
    if gamma == "scale":
        variance = float(X.var())
        return 1.0 / (X.shape[1] * variance) if variance > 0 else 1.0
    if isinstance(gamma, numbers.Real) and not isinstance(gamma, bool) and gamma > 0:
        return float(gamma)
    raise ParameterError(f"gamma must be 'scale' or a positive number, got {gamma!r}.")


def _order(scores: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Feature indices from best to worst: by score, ties by ``tiebreak`` (both descending)."""
    return np.lexsort((-tiebreak, -np.round(scores, 12)))


def projected_gradient(
    value_grad,
    total: float,
    d: int,
    *,
    max_iter: int,
    tol: float,
    learning_rate,
    lr_decay: float,
):
    """Maximise ``J`` over ``{w ∈ [0, 1]^d : Σ w = total}`` by projected gradient ([Xing21] eq. 7).

    ``value_grad(w) -> (J, ∇J)``. Returns ``(w, gradient at w, history of J, iterations,
    converged)``. ``learning_rate="auto"``: Armijo backtracking (sufficient increase
    ``J(w⁺) ≥ J(w) + 10⁻⁴ ⟨∇J, w⁺ − w⟩``) from a Barzilai–Borwein trial step.
    """
    w = np.full(d, total / d)
    value, grad = value_grad(w)
    history = [value]
    auto = learning_rate == "auto"
    step = None
    converged = False
    iteration = 0
    previous = None
    for iteration in range(1, max_iter + 1):
        if auto:
            if step is None:
                peak = float(np.max(np.abs(grad)))
                step = 0.5 / peak if peak > 0 else 1.0
            else:  # Barzilai–Borwein trial step (ascent: η = ‖Δw‖² / |⟨Δw, Δ∇J⟩|), kept within 10⁴× of the last
                dw, dg = w - previous[0], grad - previous[1]
                curvature = abs(float(dw @ dg))
                step = float(dw @ dw) / curvature if curvature > 0 else 2.0 * step
                step = min(step, 1e4 * max(previous[2], 1e-12))
            previous = (w, grad, step)
            for _ in range(40):
                candidate = project_capped_simplex(w + step * grad, total)
                new_value, new_grad = value_grad(candidate)
                if new_value >= value + 1e-4 * float(grad @ (candidate - w)):
                    break
                step *= 0.5
            else:  # no ascent along the projection arc: stationary to working precision
                converged = True
                break
        else:
            step = learning_rate / (1.0 + lr_decay * (iteration - 1))
            candidate = project_capped_simplex(w + step * grad, total)
            new_value, new_grad = value_grad(candidate)
        moved = float(np.max(np.abs(candidate - w)))
        w, value, grad = candidate, new_value, new_grad
        history.append(value)
        # Stop when the weights stand still, or when the objective gained less than tol (relative)
        # per iteration over the last `window` iterations (single steps can be short).
        window = min(10, len(history) - 1)
        gain = abs(history[-1] - history[-1 - window]) / window
        if moved <= tol or (window == 10 and gain <= tol * max(1.0, abs(value))):
            converged = True
            break
    return w, grad, np.asarray(history), iteration, converged


def swap_refine(value_grad, mask: np.ndarray, max_rounds: int = 200):
    """Improve a binary selection by gradient-guided swaps (*ours*; rounding of the relaxation).

    At the binary point, the gradient ranks dropped features (largest ``∂J/∂w_j`` first) and kept
    ones (smallest first); the first ``k`` pairs whose gradients favour a swap are exchanged and the
    swap is kept only if ``J`` of the new binary selection is larger, with ``k`` halved from
    ``m/4`` down to 1 on failure. Stops when no swap helps. The result is never worse than the
    starting selection. Returns ``(mask, J(mask), J(start), swaps)``.
    """
    mask = mask.astype(float)
    m = int(mask.sum())
    value, grad = value_grad(mask)
    start, swaps = value, 0
    for _ in range(max_rounds):
        kept, dropped = np.flatnonzero(mask == 1), np.flatnonzero(mask == 0)
        add = dropped[np.argsort(-grad[dropped], kind="stable")]
        remove = kept[np.argsort(grad[kept], kind="stable")]
        k, improved = max(1, m // 4), False
        while k >= 1 and add.size and remove.size:
            pairs = [(a, r) for a, r in zip(add[:k], remove[:k], strict=False) if grad[a] > grad[r]]
            if pairs:
                candidate = mask.copy()
                candidate[[a for a, _ in pairs]] = 1.0
                candidate[[r for _, r in pairs]] = 0.0
                new_value, new_grad = value_grad(candidate)
                if new_value > value + 1e-12 * max(1.0, abs(value)):
                    mask, value, grad, improved = candidate, new_value, new_grad, True
                    swaps += len(pairs)
                    break
            k //= 2
        if not improved:
            break
    return mask, value, start, swaps


class FUFS(FittedSelector):
    """Fairness-aware unsupervised feature selection ([Xing21]; see the module docstring).

    Parameters
    ----------
    n_features_to_select : int, default=10
        ``m``: how many features to keep (clipped to the number of features at fit time).
    alpha : float, default=1.0
        Weight of the alignment with the protected attribute's kernel (the fairness penalty).
    beta : float, default=0.1
        Weight of the alignment with the kernel of the ``g`` proxy features.
    n_sensitive_features : int or None, default=None
        ``g``: number of proxy features (those best aligned with the protected attribute) whose
        kernel is penalised with weight ``beta``. ``None``: 10 % of the features (at least 1);
        ``0``: no proxy term.
    kernel : {"rbf", "linear"}, default="rbf"
    gamma : "scale" or float, default="scale"
        RBF bandwidth of the all-feature kernel; ``"scale"`` = ``1 / (d · Var(X))`` as in
        scikit-learn's SVC.
    max_iter : int, default=300
        Projected-gradient iterations per stage.
    tol : float, default=1e-6
        Stop when no weight moves more than ``tol``, or the objective gained less than ``tol``
        (relative) per iteration over the last 10 iterations.
    learning_rate : "auto" or float, default="auto"
        ``"auto"``: Armijo backtracking; a float ``η₀``: the schedule ``η₀ / (1 + lr_decay k)``.
    lr_decay : float, default=0.0
    approximation : {"auto", "exact", "nystroem"}, default="auto"
        RBF kernels exactly (``n × n``) or by Nyström; ``"auto"`` is exact up to
        ``exact_max_rows`` rows.
    exact_max_rows : int, default=3000
    n_landmarks : int, default=300
    refine : bool, default=True
        After rounding the relaxed solution to its ``m`` largest weights, improve the binary
        selection by gradient-guided swaps (:func:`swap_refine`, ours); never worse than plain
        rounding, which ``refine=False`` gives.
    proxies : array-like of bool (n_features,) or None, default=None
        Proxy features found by an earlier fit on the same data (its ``sensitive_support_``):
        the proxy stage, which does not depend on ``n_features_to_select``, is then skipped —
        a sweep over subset sizes computes it once.
    random_state : int, RandomState or None, default=None
        Seeds the Nyström landmarks (the optimisation itself is deterministic).

    Attributes
    ----------
    scores_ : ndarray (n_features,)
        The relaxed selection weights ``s ∈ [0, 1]``, ``Σ s = m``.
    sensitive_scores_ : ndarray (n_features,)
        The relaxed proxy weights ``t ∈ [0, 1]``, ``Σ t = g`` (zeros when ``g = 0``).
    support_ : ndarray of bool (n_features,)
        The ``m`` selected features.
    sensitive_support_ : ndarray of bool (n_features,)
        The ``g`` proxy features.
    ranking_ : ndarray of int (n_features,)
        Position of each feature in the selection order (1 = kept first).
    objective_history_ : ndarray
        ``J(s)`` after each projected-gradient iteration (starting point first).
    rounded_objective_, binary_objective_ : float
        ``J`` of the ``m`` largest relaxed weights, and of the final binary selection.
    n_swaps_ : int
        Feature swaps made by the refinement.
    sensitive_objective_history_ : ndarray
        ``A_c(K_t, K_Y)`` over the proxy stage.
    alignments_ : dict
        Centred alignments of the *selected* (binary) features' kernel with ``data`` (all
        features), ``protected`` (the group kernel) and ``proxies``.
    n_iter_ : int
    converged_ : bool
    approximation_ : str
        Which kernel computation was used (exact, Nyström with L landmarks, linear closed form).
    gamma_ : float
    groups_ : ndarray of str

    Examples
    --------
    >>> import numpy as np
    >>> from fairaudit import FUFS
    >>> rng = np.random.default_rng(0)
    >>> group = rng.integers(0, 2, 200)
    >>> X = np.column_stack([rng.normal(size=(200, 4)), group + 0.1 * rng.normal(size=200)])
    >>> FUFS(n_features_to_select=3).fit(X, sensitive_features=group).get_support()[-1]
    np.False_
    """

    def __init__(
        self,
        n_features_to_select=10,
        *,
        alpha=1.0,
        beta=0.1,
        n_sensitive_features=None,
        kernel="rbf",
        gamma="scale",
        max_iter=300,
        tol=1e-6,
        learning_rate="auto",
        lr_decay=0.0,
        approximation="auto",
        exact_max_rows=EXACT_MAX_ROWS,
        n_landmarks=NYSTROM_LANDMARKS,
        refine=True,
        proxies=None,
        random_state=None,
    ):
        self.n_features_to_select = n_features_to_select
        self.alpha = alpha
        self.beta = beta
        self.n_sensitive_features = n_sensitive_features
        self.kernel = kernel
        self.gamma = gamma
        self.max_iter = max_iter
        self.tol = tol
        self.learning_rate = learning_rate
        self.lr_decay = lr_decay
        self.approximation = approximation
        self.exact_max_rows = exact_max_rows
        self.n_landmarks = n_landmarks
        self.refine = refine
        self.proxies = proxies
        self.random_state = random_state

    # ------------------------------------------------------------------ validation
    def _check_params(self, d: int) -> tuple[int, int]:
        m = check_rank(self.n_features_to_select, d, "n_features_to_select")
        g = self.n_sensitive_features
        if g is None:
            g = max(1, round(0.1 * d))
        elif isinstance(g, bool) or not isinstance(g, numbers.Integral) or not 0 <= g <= d:
            raise ParameterError(
                f"n_sensitive_features must be a whole number from 0 to the number of features ({d}), got {g!r}."
            )
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not np.isfinite(value) or value < 0:
                raise ParameterError(f"{name} must be a non-negative number, got {value!r}.")
        if self.kernel not in KERNELS:
            raise ParameterError(f"kernel must be one of {', '.join(KERNELS)}, got {self.kernel!r}.")
        if self.approximation not in APPROXIMATIONS:
            raise ParameterError(f"approximation must be one of {', '.join(APPROXIMATIONS)}, got {self.approximation!r}.")
        if not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ParameterError(f"max_iter must be a positive whole number, got {self.max_iter!r}.")
        lr = self.learning_rate
        if lr != "auto" and (not isinstance(lr, numbers.Real) or isinstance(lr, bool) or not lr > 0):
            raise ParameterError(f"learning_rate must be 'auto' or a positive number, got {lr!r}.")
        if not isinstance(self.n_landmarks, numbers.Integral) or self.n_landmarks < 2:
            raise ParameterError(f"n_landmarks must be a whole number of at least 2, got {self.n_landmarks!r}.")
        return m, int(g)

    def _backend(self, X: np.ndarray):
        if self.kernel == "linear":
            return Linear(X)
        return rbf_backend(
            X,
            _resolve_gamma(self.gamma, X),
            approximation=self.approximation,
            exact_max_rows=self.exact_max_rows,
            n_landmarks=self.n_landmarks,
            random_state=self.random_state,
        )

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, sensitive_features):
        """Select ``n_features_to_select`` columns of ``X`` given one group value per row."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        groups = encode_groups(sensitive_features, n_rows=X.shape[0])
        check_groups(groups, min_size=1)
        n, d = X.shape
        m, g = self._check_params(d)
        # Constant columns carry no information (zero gradient, zero distance): they are left out
        # of the optimisation, scored 0 and ordered last.
        active = np.flatnonzero(np.ptp(X, axis=0) > 0)
        if active.size == 0:
            raise ParameterError("every column of X is constant; there is nothing to select from.")
        da, ma, ga = active.size, min(m, active.size), min(g, active.size)
        backend = self._backend(X[:, active])
        self.approximation_ = backend.describe()
        self.gamma_ = getattr(backend, "gamma", float("nan"))
        self.groups_ = np.asarray(groups.labels, dtype=object)
        one_hot = np.eye(groups.n_groups)[groups.codes]
        protected = backend.target_factor(one_hot)
        options = dict(max_iter=self.max_iter, tol=self.tol, learning_rate=self.learning_rate, lr_decay=self.lr_decay)

        # Stage 1: the g proxy features, t* = argmax A_c(K_t, K_Y) over C_g.
        self.sensitive_scores_ = np.zeros(d)
        self.sensitive_support_ = np.zeros(d, dtype=bool)
        self.sensitive_objective_history_ = np.zeros(0)
        targets, coefs = [backend.target_weights(np.ones(da), da), protected], [1.0, -float(self.alpha)]
        if self.proxies is not None and self.beta > 0:
            given = np.asarray(self.proxies)
            if given.dtype != bool or given.shape != (d,):
                raise ParameterError(f"proxies must be a boolean mask with one entry per feature ({d}), got shape {given.shape}.")
            proxies = given[active].astype(float)
            self.sensitive_support_ = given.copy()
            self.sensitive_scores_ = given.astype(float)
            if proxies.sum() > 0:
                targets.append(backend.target_weights(proxies, proxies.sum()))
                coefs.append(-float(self.beta))
        elif ga > 0 and self.beta > 0:
            def proxy_value_grad(t):
                value, grad, _ = backend.value_grad(t, ga, [1.0], [protected])
                return value, grad

            t, t_grad, t_history, _, _ = projected_gradient(proxy_value_grad, ga, da, **options)
            proxies = np.zeros(da)
            proxies[_order(t, t_grad)[:ga]] = 1.0
            self.sensitive_scores_[active] = t
            self.sensitive_support_[active] = proxies > 0
            self.sensitive_objective_history_ = t_history
            targets.append(backend.target_weights(proxies, ga))
            coefs.append(-float(self.beta))

        # Stage 2: the selection, s = argmax A_c(K_s, K_X) − α A_c(K_s, K_Y) − β A_c(K_s, K_t*) over C_m.
        coefs = np.asarray(coefs)

        def value_grad(s):
            value, grad, _ = backend.value_grad(s, ma, coefs, targets)
            return value, grad

        s, s_grad, history, n_iter, converged = projected_gradient(value_grad, ma, da, **options)
        relaxed_order = _order(s, s_grad)
        rounded = np.zeros(da)
        rounded[relaxed_order[:ma]] = 1.0
        if self.refine and 0 < ma < da:
            rounded, self.binary_objective_, self.rounded_objective_, self.n_swaps_ = swap_refine(value_grad, rounded)
        else:
            self.binary_objective_ = self.rounded_objective_ = value_grad(rounded)[0]
            self.n_swaps_ = 0
        # kept features first (in relaxed order), then the others, then constant columns
        relaxed_order = np.concatenate([relaxed_order[rounded[relaxed_order] == 1], relaxed_order[rounded[relaxed_order] == 0]])
        order = np.concatenate([active[relaxed_order], np.setdiff1d(np.arange(d), active)])
        self.scores_ = np.zeros(d)
        self.scores_[active] = s
        self.objective_history_ = history
        self.n_iter_ = n_iter
        self.converged_ = converged
        self.ranking_ = np.empty(d, dtype=int)
        self.ranking_[order] = np.arange(1, d + 1)
        self.support_ = self.ranking_ <= m
        chosen = self.support_[active].astype(float)
        _, _, final = backend.value_grad(chosen, ma, coefs, targets, gradient=False)
        names = ("data", "protected", "proxies")
        self.alignments_ = {name: float(value) for name, value in zip(names, final, strict=False)}
        if not converged:
            warnings.warn(
                f"FUFS stopped after max_iter={self.max_iter} projected-gradient iterations before the "
                f"objective settled (tol={self.tol}); raise max_iter for a tighter optimum.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self
