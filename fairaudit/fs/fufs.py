"""FUFS: fairness-aware unsupervised feature selection ([Xing21]), as printed and as we improved it.

Reference
---------
[Xing21] X. Xing, H. Liu, C. Chen, J. Li. "Fairness-Aware Unsupervised Feature Selection".
    arXiv:2106.02216, 2021 (CIKM 2021).

Two formulations (``FUFS(formulation=...)``); ``docs/fs.md`` lists every deviation with its
measured effect.

``"paper"`` (default) — [Xing21] §3 exactly: minimise eq. (6)::

    L(m, g) = −Tr(HKHK^M) + α Tr(HK^MHK^P) − α Tr(HK^GHK^P) + β (‖m‖₁ + ‖g‖₁),  m, g ∈ [0, 1]^d

jointly in the selection indicator ``m`` and the decomposition indicator ``g``
(``M = X diag(m)``, ``G = X diag(g)(I − diag(m))``, eq. 3), with the unnormalised centred traces
of eqs. (1), (2), (4), RBF kernels (§4.1), projected gradient on the box (eq. 7, Algorithm 1) and
the features ranked by ``m`` (Algorithm 1 line 11). The number of features ``k`` does not enter
the relaxed problem (the Lagrangian form replaced ``1ᵀm = k`` by the ℓ1 term), so one fit ranks
every subset size. What the paper leaves open (bandwidth, ``P``'s encoding, ``η``, initialisation,
stopping rule) is chosen in :mod:`fairaudit.fs._paper` and said there.

``"alignment"`` (ours; the audit's formulation before the paper's text was available) — the
normalised centred alignment ``A_c(K, T) = ⟨HKH, HTH⟩ / (‖HKH‖ ‖HTH‖)`` instead of the raw
traces, over the capped simplex ``{s ∈ [0, 1]^d : Σ s = m}`` instead of a box with an ℓ1 term,
with the proxies found in a separate first stage::

    t* = argmax_{t ∈ C_g} A_c(K_t, K_Y)                          (the g proxy features)
    J(s) = A_c(K_s, K_X) − α A_c(K_s, K_Y) − proxy_weight · A_c(K_s, K_{t*})

``K_Y = YYᵀ`` (one-hot groups); ``K_s`` is the RBF kernel of ``X diag(√s)`` with bandwidth
``γ d / Σ s`` (weights enter the squared distance linearly, so a feature at 0 keeps a non-zero
gradient). Scale-free in ``n`` and ``d``; maximised by projected gradient with Armijo /
Barzilai–Borwein steps; the ``m`` largest ``s_j`` rounded and improved by gradient-guided swaps
(``refine``). Above ``exact_max_rows`` rows its kernels use the Nyström approximation.

Common to both: constant columns carry no distance and have a zero gradient; they are left out
of the optimisation, scored 0 and ordered last.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

from ..errors import ParameterError
from ..groups import check_groups, encode_groups
from ..linalg import blas_threads
from ..validation import check_rank
from ._alignment import EXACT_MAX_ROWS, NYSTROM_LANDMARKS, Linear, project_capped_simplex, rbf_backend
from ._paper import LinearPaperObjective, PaperObjective, minimise_box, protected_matrix, scale_gamma
from ._selector import FittedSelector

FORMULATIONS = ("paper", "alignment")
"""``FUFS(formulation=...)``: [Xing21] eq. (6) as printed, or our normalised-alignment version."""
KERNELS = ("rbf", "linear")
APPROXIMATIONS = {"paper": ("auto", "exact", "sample"), "alignment": ("auto", "exact", "nystroem")}
INITS = ("half", "random")
BLAS_THREADS = 1
"""BLAS threads while FUFS fits: its products are n × n by n × d with small d; on the shared
two-core machine the Nyström test fit took 48 s with the default threads and 2 s with one."""
PAPER_MAX_ROWS = 1000
"""The paper formulation's exact kernels are ``n × n``; above this many rows (``approximation=
"auto"``) they are computed on a stratified sample of this many rows, traces rescaled by
``(n / s)²``."""


def _resolve_gamma(gamma, X: np.ndarray, name: str = "gamma") -> float:
    if gamma == "scale":
        return scale_gamma(X)
    if isinstance(gamma, numbers.Real) and not isinstance(gamma, bool) and gamma > 0:
        return float(gamma)
    raise ParameterError(f"{name} must be 'scale' or a positive number, got {gamma!r}.")


def stratified_rows(codes: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` row indices drawn without replacement, each group in proportion to its size (at
    least one row per group), sorted."""
    codes = np.asarray(codes)
    n = codes.size
    if size >= n:
        return np.arange(n)
    chosen = []
    for code in np.unique(codes):
        rows = np.flatnonzero(codes == code)
        take = min(rows.size, max(1, round(size * rows.size / n)))
        chosen.append(rng.choice(rows, size=take, replace=False))
    return np.sort(np.concatenate(chosen))


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
        ``k``: how many features to keep.
    formulation : {"paper", "alignment"}, default="paper"
        ``"paper"``: [Xing21] eq. (6) as printed. ``"alignment"``: our normalised-alignment,
        capped-simplex version with a proxy stage (module docstring; ``docs/fs.md``).
    alpha : float, default=1.0
        α of eq. (6): the weight of the protected-attribute terms (eqs. 2 and 4). The paper uses
        1 on CRIME and GOOGLE+, 0.01 on ADOLESCENT and TOXICITY (§4.1). In ``"alignment"``: the
        weight of ``A_c(K_s, K_Y)``.
    beta : float, default=0.1
        β of eq. (6): the ℓ1 (sparsity) weight on ``m`` and ``g`` (paper: 0.1 on CRIME and
        GOOGLE+, 10 on ADOLESCENT and TOXICITY). Not used by ``"alignment"``.
    proxy_weight : float, default=0.1
        ``"alignment"`` only: the weight of the proxies' alignment ``A_c(K_s, K_{t*})``.
    n_sensitive_features : int or None, default=None
        ``"alignment"`` only: ``g``, the number of proxy features (``None``: 10 % of the
        features, at least 1; ``0``: no proxy term).
    kernel : {"rbf", "linear"}, default="rbf"
        The paper's experiments use the RBF kernel (§4.1).
    gamma : "scale" or float, default="scale"
        RBF bandwidth of the feature kernels: ``"scale"`` = ``1 / (d · Var(X))``.
    gamma_protected : "scale" or float, default="scale"
        ``"paper"`` only: RBF bandwidth of ``K^P`` (same rule on the protected matrix).
    init : {"half", "random"} or array of shape (2 * n_features,), default="half"
        ``"paper"`` only: start at ``m = g = ½``, at uniform draws (seeded by ``random_state``), or
        at the given ``(m, g)`` (e.g. a fit's ``np.concatenate([scores_, sensitive_scores_])``: the
        audit's bootstrap replicates start from the audit's fit, issue 23).
    max_iter : int, default=300
        Projected-gradient iterations (per stage for ``"alignment"``).
    tol : float, default=1e-6
        ``"paper"``: stop when ``L`` changed by at most ``tol`` (relative) in one iteration.
        ``"alignment"``: when no weight moves more than ``tol`` or ``J`` gained less than ``tol``
        (relative) per iteration over the last 10.
    learning_rate : "auto" or float, default="auto"
        η of eq. (7). ``"auto"``: Armijo backtracking from a Barzilai–Borwein step (the objective
        never gets worse); a float: fixed (``"alignment"``: ``η₀ / (1 + lr_decay k)``).
    lr_decay : float, default=0.0
    approximation : {"auto", "exact", "sample", "nystroem"}, default="auto"
        RBF kernels on all ``n`` rows (``n × n``), or above ``exact_max_rows`` rows: for
        ``"paper"`` on a stratified ``"sample"`` of ``exact_max_rows`` rows (traces rescaled by
        ``(n/s)²``), for ``"alignment"`` by ``"nystroem"``.
    exact_max_rows : int or None, default=None
        ``None``: 1,000 for ``"paper"`` (:data:`PAPER_MAX_ROWS`), 3,000 for ``"alignment"``.
    n_landmarks : int, default=300
        ``"alignment"`` with Nyström only.
    refine : bool, default=True
        ``"alignment"`` only: improve the rounded selection by gradient-guided swaps.
    proxies : array-like of bool (n_features,) or None, default=None
        ``"alignment"`` only: proxies from an earlier fit on the same data (skips the proxy stage).
    random_state : int, RandomState or None, default=None
        Seeds the row sample / Nyström landmarks and ``init="random"``.

    Attributes
    ----------
    scores_ : ndarray (n_features,)
        ``"paper"``: the relaxed selection indicator ``m ∈ [0, 1]``; ``"alignment"``: the relaxed
        weights ``s`` (``Σ s = k``).
    sensitive_scores_ : ndarray (n_features,)
        ``"paper"``: the decomposition indicator ``g``; ``"alignment"``: the proxy weights ``t``.
    support_ : ndarray of bool (n_features,)
        The ``k`` selected features.
    ranking_ : ndarray of int (n_features,)
        Position of each feature in the selection order (1 = kept first). For ``"paper"`` it does
        not depend on ``k``: the first ``k'`` entries are the selection of size ``k'``.
    sensitive_ranking_ : ndarray of int (n_features,)
        ``"paper"``: each feature's position by ``g`` (1 = most tied to the protected attribute).
    sensitive_support_ : ndarray of bool (n_features,)
        ``"paper"``: the ``k`` features ranked first by ``g`` (the comparison of [Xing21] Table
        6); ``"alignment"``: the ``g`` proxy features.
    objective_history_ : ndarray
        ``L`` (``"paper"``, non-increasing with ``learning_rate="auto"``) or ``J``
        (``"alignment"``, non-decreasing) per iteration, the starting point first.
    traces_ : dict
        ``"paper"``: the three traces of eq. (6) at the solution — ``data`` (eq. 1), ``protected``
        (eq. 2), ``proxies`` (eq. 4).
    alignments_ : dict
        ``"alignment"``: centred alignments of the selection's kernel with ``data``,
        ``protected`` and ``proxies``.
    n_iter_ : int
    converged_ : bool
    approximation_ : str
        Which kernel computation was used.
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
        formulation="paper",
        alpha=1.0,
        beta=0.1,
        proxy_weight=0.1,
        n_sensitive_features=None,
        kernel="rbf",
        gamma="scale",
        gamma_protected="scale",
        init="half",
        max_iter=300,
        tol=1e-6,
        learning_rate="auto",
        lr_decay=0.0,
        approximation="auto",
        exact_max_rows=None,
        n_landmarks=NYSTROM_LANDMARKS,
        refine=True,
        proxies=None,
        random_state=None,
    ):
        self.n_features_to_select = n_features_to_select
        self.formulation = formulation
        self.alpha = alpha
        self.beta = beta
        self.proxy_weight = proxy_weight
        self.n_sensitive_features = n_sensitive_features
        self.kernel = kernel
        self.gamma = gamma
        self.gamma_protected = gamma_protected
        self.init = init
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
        if self.formulation not in FORMULATIONS:
            raise ParameterError(f"formulation must be one of {', '.join(FORMULATIONS)}, got {self.formulation!r}.")
        m = check_rank(self.n_features_to_select, d, "n_features_to_select")
        g = self.n_sensitive_features
        if g is None:
            g = max(1, round(0.1 * d))
        elif isinstance(g, bool) or not isinstance(g, numbers.Integral) or not 0 <= g <= d:
            raise ParameterError(
                f"n_sensitive_features must be a whole number from 0 to the number of features ({d}), got {g!r}."
            )
        for name in ("alpha", "beta", "proxy_weight"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not np.isfinite(value) or value < 0:
                raise ParameterError(f"{name} must be a non-negative number, got {value!r}.")
        if self.kernel not in KERNELS:
            raise ParameterError(f"kernel must be one of {', '.join(KERNELS)}, got {self.kernel!r}.")
        allowed = APPROXIMATIONS[self.formulation]
        if self.approximation not in allowed:
            raise ParameterError(
                f"approximation must be one of {', '.join(allowed)} with formulation={self.formulation!r}, got {self.approximation!r}."
            )
        if isinstance(self.init, str):
            if self.init not in INITS:
                raise ParameterError(f"init must be one of {', '.join(INITS)} or a start (m, g), got {self.init!r}.")
        else:
            start = np.asarray(self.init, dtype=float)
            if start.shape != (2 * d,) or not np.all((start >= 0) & (start <= 1)):
                raise ParameterError(f"an init start (m, g) must hold 2 × {d} numbers in [0, 1], got shape {start.shape}.")
        if not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ParameterError(f"max_iter must be a positive whole number, got {self.max_iter!r}.")
        lr = self.learning_rate
        if lr != "auto" and (not isinstance(lr, numbers.Real) or isinstance(lr, bool) or not lr > 0):
            raise ParameterError(f"learning_rate must be 'auto' or a positive number, got {lr!r}.")
        if not isinstance(self.n_landmarks, numbers.Integral) or self.n_landmarks < 2:
            raise ParameterError(f"n_landmarks must be a whole number of at least 2, got {self.n_landmarks!r}.")
        rows = self.exact_max_rows
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, numbers.Integral) or rows < 2):
            raise ParameterError(f"exact_max_rows must be None or a whole number of at least 2, got {rows!r}.")
        return m, int(g)

    def _exact_max_rows(self) -> int:
        if self.exact_max_rows is not None:
            return int(self.exact_max_rows)
        return PAPER_MAX_ROWS if self.formulation == "paper" else EXACT_MAX_ROWS

    def ranking_for(self, m: int) -> np.ndarray:
        """The feature order of a selection of ``m`` features: for ``"paper"`` the fitted order
        for every ``m`` (``k`` does not enter eq. 6); ``"alignment"`` needs a fit at ``m``."""
        check_is_fitted(self, "support_")
        if self.formulation != "paper" and m != int(self.support_.sum()):
            raise ParameterError(f"formulation='alignment' optimises for one size; fit with n_features_to_select={m}.")
        return np.argsort(self.ranking_, kind="stable")

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, sensitive_features=None):
        """Select ``n_features_to_select`` columns of ``X`` given one group value per row
        (required: ``None`` is refused, saying how to route it through a ``Pipeline``)."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        groups = encode_groups(sensitive_features, n_rows=X.shape[0])
        check_groups(groups, min_size=1)
        d = X.shape[1]
        m, g = self._check_params(d)
        active = np.flatnonzero(np.ptp(X, axis=0) > 0)
        if active.size == 0:
            raise ParameterError("every column of X is constant; there is nothing to select from.")
        self.groups_ = np.asarray(groups.labels, dtype=object)
        with blas_threads(BLAS_THREADS):
            if self.formulation == "paper":
                order = self._fit_paper(X, groups, active)
            else:
                order = self._fit_alignment(X, groups, active, m, g)
        order = np.concatenate([active[order], np.setdiff1d(np.arange(d), active)])
        self.ranking_ = np.empty(d, dtype=int)
        self.ranking_[order] = np.arange(1, d + 1)
        self.support_ = self.ranking_ <= m
        if self.formulation == "paper":
            by_g = np.concatenate([active[_order(self.sensitive_scores_[active], -self._g_grad)], np.setdiff1d(np.arange(d), active)])
            self.sensitive_ranking_ = np.empty(d, dtype=int)
            self.sensitive_ranking_[by_g] = np.arange(1, d + 1)
            self.sensitive_support_ = self.sensitive_ranking_ <= m
            del self._g_grad
        if not self.converged_:
            warnings.warn(
                f"FUFS stopped after max_iter={self.max_iter} projected-gradient iterations before the "
                f"objective settled (tol={self.tol}); raise max_iter for a tighter optimum.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def _fit_paper(self, X, groups, active) -> np.ndarray:
        """[Xing21] eq. (6) by eq. (7); returns the active features' order (by ``m``, Alg. 1 l. 11)."""
        n, d = X.shape
        Xa = X[:, active]
        da = active.size
        rng = np.random.default_rng(self.random_state)
        P = protected_matrix(groups.codes, groups.n_groups)
        if self.kernel == "linear":
            objective = LinearPaperObjective(Xa, P, alpha=self.alpha, beta=self.beta)
            self.approximation_ = "linear kernels (closed form)"
            self.gamma_ = self.gamma_protected_ = float("nan")
        else:
            self.gamma_ = _resolve_gamma(self.gamma, Xa)
            self.gamma_protected_ = _resolve_gamma(self.gamma_protected, P, "gamma_protected")
            limit = self._exact_max_rows()
            rows = np.arange(n)
            if self.approximation == "sample" or (self.approximation == "auto" and n > limit):
                rows = stratified_rows(groups.codes, min(limit, n), rng)
            objective = PaperObjective(
                Xa[rows], P[rows], alpha=self.alpha, beta=self.beta, gamma=self.gamma_,
                gamma_protected=self.gamma_protected_, scale=(n / rows.size) ** 2,
            )
            self.approximation_ = (
                f"exact RBF kernels ({n}×{n})" if rows.size == n
                else f"exact RBF kernels on a stratified sample of {rows.size} of {n} rows (traces × (n/s)²)"
            )
        if not isinstance(self.init, str):
            start = np.asarray(self.init, dtype=float)[np.concatenate([active, d + active])]
        else:
            start = np.full(2 * da, 0.5) if self.init == "half" else rng.uniform(size=2 * da)
        z, grad, history, self.n_iter_, self.converged_ = minimise_box(
            objective.value_grad, start, max_iter=self.max_iter, tol=self.tol, learning_rate=self.learning_rate
        )
        m_weights, g_weights = z[:da], z[da:]
        self.scores_ = np.zeros(d)
        self.scores_[active] = m_weights
        self.sensitive_scores_ = np.zeros(d)
        self.sensitive_scores_[active] = g_weights
        self._g_grad = grad[da:]
        self.objective_history_ = history
        # Ties in m (features at a bound of the box) go to the steepest descent −∂L/∂m_j, then to
        # the kernel terms' gradient in m_j² (at m_j = 0 the first is β for every feature).
        self.traces_, curvature = objective.parts_and_curvature(m_weights, g_weights)
        return np.lexsort((curvature, grad[:da], -np.round(m_weights, 12)))

    def _backend(self, X: np.ndarray):
        if self.kernel == "linear":
            return Linear(X)
        return rbf_backend(
            X,
            _resolve_gamma(self.gamma, X),
            approximation=self.approximation,
            exact_max_rows=self._exact_max_rows(),
            n_landmarks=self.n_landmarks,
            random_state=self.random_state,
        )

    def _fit_alignment(self, X, groups, active, m, g) -> np.ndarray:
        """Our normalised-alignment formulation (module docstring); returns the active order."""
        d = X.shape[1]
        da, ma, ga = active.size, min(m, active.size), min(g, active.size)
        backend = self._backend(X[:, active])
        self.approximation_ = backend.describe()
        self.gamma_ = getattr(backend, "gamma", float("nan"))
        one_hot = np.eye(groups.n_groups)[groups.codes]
        protected = backend.target_factor(one_hot)
        options = dict(max_iter=self.max_iter, tol=self.tol, learning_rate=self.learning_rate, lr_decay=self.lr_decay)

        # Stage 1: the g proxy features, t* = argmax A_c(K_t, K_Y) over C_g.
        self.sensitive_scores_ = np.zeros(d)
        self.sensitive_support_ = np.zeros(d, dtype=bool)
        self.sensitive_objective_history_ = np.zeros(0)
        weight = float(self.proxy_weight)
        targets, coefs = [backend.target_weights(np.ones(da), da), protected], [1.0, -float(self.alpha)]
        if self.proxies is not None and weight > 0:
            given = np.asarray(self.proxies)
            if given.dtype != bool or given.shape != (d,):
                raise ParameterError(f"proxies must be a boolean mask with one entry per feature ({d}), got shape {given.shape}.")
            proxies = given[active].astype(float)
            self.sensitive_support_ = given.copy()
            self.sensitive_scores_ = given.astype(float)
            if proxies.sum() > 0:
                targets.append(backend.target_weights(proxies, proxies.sum()))
                coefs.append(-weight)
        elif ga > 0 and weight > 0:
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
            coefs.append(-weight)

        # Stage 2: s = argmax A_c(K_s, K_X) − α A_c(K_s, K_Y) − proxy_weight A_c(K_s, K_t*) over C_m.
        coefs = np.asarray(coefs)

        def value_grad(s):
            value, grad, _ = backend.value_grad(s, ma, coefs, targets)
            return value, grad

        s, s_grad, history, self.n_iter_, self.converged_ = projected_gradient(value_grad, ma, da, **options)
        relaxed_order = _order(s, s_grad)
        rounded = np.zeros(da)
        rounded[relaxed_order[:ma]] = 1.0
        if self.refine and 0 < ma < da:
            rounded, self.binary_objective_, self.rounded_objective_, self.n_swaps_ = swap_refine(value_grad, rounded)
        else:
            self.binary_objective_ = self.rounded_objective_ = value_grad(rounded)[0]
            self.n_swaps_ = 0
        self.scores_ = np.zeros(d)
        self.scores_[active] = s
        self.objective_history_ = history
        _, _, final = backend.value_grad(rounded, ma, coefs, targets, gradient=False)
        names = ("data", "protected", "proxies")
        self.alignments_ = {name: float(value) for name, value in zip(names, final, strict=False)}
        # kept features first (in relaxed order), then the others
        return np.concatenate([relaxed_order[rounded[relaxed_order] == 1], relaxed_order[rounded[relaxed_order] == 0]])
