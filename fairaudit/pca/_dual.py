"""Exact Fair PCA through its Lagrangian dual (the default ``solver="eig"``).

Fair PCA's convex relaxation (Samadi et al. 2018, SDP (4), for k groups) is

    min_{P ∈ F_d}  max_i  ℓ_i(P),     ℓ_i(P) = c_i(d) − ⟨C_i, P⟩,
    F_d = {P : 0 ⪯ P ⪯ I, tr P ≤ d}    (the Fantope),

with ``C_i = A_iᵀA_i / m_i`` and ``c_i(d)`` the sum of ``C_i``'s ``d`` largest eigenvalues.
By the minimax theorem it equals the maximum over the simplex of the concave dual

    g(w) = Σ_i w_i c_i(d) − (sum of the d largest eigenvalues of M(w) = Σ_i w_i C_i),

(Ky Fan's maximum principle: ``min_{P ∈ F_d} −⟨M, P⟩`` is minus that sum, attained at the
projection ``V Vᵀ`` onto the top-``d`` eigenvectors). Each evaluation of ``g`` gives a
*cut*: the loss vector ``ℓ(V Vᵀ)`` is a supergradient, and ``g(w') ≤ ⟨ℓ(V Vᵀ), w'⟩`` for all
``w'``. Hidden convexity for two groups: Junhui Shen, Aaron J. Davis, Ding Lu, Zhaojun Bai (2025,
"Hidden convexity of fair PCA and fast solver via eigenvalue optimization", EigOpt).

Algorithm (a cutting-plane method that certifies its own gap):

* lower bound: ``LB = max_t g(w_t)`` over the points evaluated;
* upper bound: the restricted primal ``min_θ max_i Σ_t θ_t ℓ_i(V_t V_tᵀ)`` over convex
  combinations of the projections found so far (the LP dual of Kelley's master problem), an
  achievable objective; two groups — solved exactly over pairs of cuts; k groups — by HiGHS;
* k groups: both LPs (Kelley's boxed master and the restricted primal) are kept as HiGHS models
  that grow by one row or column per cut and re-solve from their last basis (:class:`_CutLPs`);
* next point: two groups — regula falsi (Illinois) on the monotone supergradient
  ``h(t) = ℓ_1 − ℓ_2`` of the 1-D concave ``g(t, 1 − t)``; k groups — Kelley's point inside a
  trust box around the best ``w`` (the box step method), which keeps iterates local;
* stop when ``UB − LB ≤ tol · scale``.

Primal recovery: the optimal θ combine at most ``k`` projections; where eigenvalues tie at the
optimum these are different top-``d`` subspaces of the tied eigenspace, and their combination
is the solution of the small problem inside that eigenspace. Samadi's LP (5)–(9) then rounds it
to an extreme point of rank ``≤ d + k − 1`` (see ``_rounding``). A single projection (rank ``d``)
is returned instead whenever it is optimal within the tolerance (the generic two-group case).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from sklearn.exceptions import ConvergenceWarning

from ..linalg import LowRankMap, orthonormal_basis, top_eigh
from ._problem import GroupProblem
from ._rounding import lp_round


@dataclass
class FairPCASolution:
    """What a Fair PCA solver returns."""

    projection: LowRankMap
    losses: np.ndarray
    lower_bound: float
    weights: np.ndarray
    n_iter: int
    converged: bool
    relaxation_value: float | None = None  # the SDP's own optimum (solver="sdp")

    @property
    def objective(self) -> float:
        return float(self.losses.max())

    @property
    def gap(self) -> float:
        """Certified ``objective − lower bound`` (NaN when the solver gives no bound)."""
        return max(0.0, self.objective - self.lower_bound) if np.isfinite(self.lower_bound) else float("nan")


class _Cuts:
    """Evaluated points of the dual: weights, loss vectors, projections, dual values."""

    def __init__(self, problem: GroupProblem, d: int):
        self.problem, self.d = problem, d
        self.weights: list[np.ndarray] = []
        self.losses: list[np.ndarray] = []
        self.vectors: list[np.ndarray] = []
        self.values: list[float] = []
        self._last_vectors: np.ndarray | None = None
        self.c = problem.captured(d)
        self._lps: _CutLPs | None = None

    @property
    def lps(self) -> _CutLPs:
        """The k-group LPs over every cut so far (built on first use)."""
        if self._lps is None:
            self._lps = _CutLPs(self.problem.n_groups)
        self._lps.sync(self.losses)
        return self._lps

    def add(self, w: np.ndarray, vectors: np.ndarray, top_sum: float) -> float:
        losses = self.problem.projection_losses(vectors, self.d)
        value = float(w @ self.c - top_sum)  # g(w), exact given the eigenvalues
        self.weights.append(w)
        self.losses.append(losses)
        self.vectors.append(vectors)
        self.values.append(value)
        return value

    def evaluate(self, w: np.ndarray) -> float:
        w = np.clip(w, 0.0, None)
        w = w / w.sum()
        values, vectors = top_eigh(self.problem.weighted(w), self.d, v0=self._last_vectors)
        self._last_vectors = vectors
        return self.add(w, vectors, float(values.sum()))

    def add_vertices(self) -> None:
        """Group ``i``'s own PCA is the exact minimiser of the Lagrangian at ``w = e_i``."""
        for i in range(self.problem.n_groups):
            w = np.zeros(self.problem.n_groups)
            w[i] = 1.0
            self.add(w, self.problem.eigenvectors[i][:, : self.d], float(self.problem.spectra[i, : self.d].sum()))

    @property
    def lower_bound(self) -> float:
        return max(self.values)

    def best(self) -> int:
        return int(np.argmax(self.values))

    def restricted_primal(self) -> tuple[float, np.ndarray]:
        """``min_θ max_i Σ_t θ_t ℓ_{t,i}`` over the simplex: its value and θ.

        The value is recomputed exactly from θ, so it is always an achievable primal objective.
        """
        L = np.array(self.losses)  # (T, k)
        theta = _two_group_mix(L) if L.shape[1] == 2 else self.lps.mix(L)
        value = min(float((theta @ L).max()), float(L.max(axis=1).min()))
        return value, theta

    def boxed_kelley(self, center: np.ndarray, radius: float) -> tuple[np.ndarray, float] | None:
        """Kelley's point within ``‖w − center‖_∞ ≤ radius`` on the simplex, and its model value
        (``None`` when the LP solver fails, e.g. on a box at the edge of its tolerances)."""
        return self.lps.kelley(center, radius)


def _silent_highs():
    import highspy

    model = highspy.Highs()
    model.setOptionValue("output_flag", False)
    for option in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
        model.setOptionValue(option, 1e-10)
    return model


class _CutLPs:
    """Kelley's boxed master ``max z s.t. z ≤ ℓ_t·w (every cut t), w in the simplex and the box``
    and the restricted primal ``min u s.t. Σ_t θ_t ℓ_{t,i} ≤ u (every group i), θ in the simplex``
    (the LP dual of the unboxed master), as two HiGHS models (highspy, MIT) that grow by one row
    (the master) and one column (the primal) per cut and re-solve from their last basis.

    Built anew for every solve through :func:`scipy.optimize.linprog` (which is also HiGHS) they
    cost 2.2 ms each; kept, 0.06 ms — the two solves were ~90 % of a three-group fit's time. The
    optimal values are the same LPs'; where the LP has several optimal θ, HiGHS may return a
    different one (the fit's loss is the same to the solver's tolerance)."""

    def __init__(self, k: int):
        import highspy

        self.k, self.synced = k, 0
        self._inf = inf = highspy.kHighsInf
        self._optimal = highspy.HighsModelStatus.kOptimal
        self._index = np.arange(k + 1, dtype=np.int32)
        master = self.master = _silent_highs()
        master.addVars(k + 1, np.r_[np.zeros(k), -inf], np.r_[np.ones(k), inf])
        master.changeColsCost(k + 1, self._index, np.r_[np.zeros(k), 1.0])
        master.changeObjectiveSense(highspy.ObjSense.kMaximize)
        master.addRow(1.0, 1.0, k, self._index[:k], np.ones(k))
        primal = self.primal = _silent_highs()
        primal.addVar(-inf, inf)  # u
        primal.changeColCost(0, 1.0)
        primal.addRows(k + 1, np.r_[np.full(k, -inf), 1.0], np.r_[np.zeros(k), 1.0], k,
                       np.arange(k + 1, dtype=np.int32), np.zeros(k, dtype=np.int32), -np.ones(k))

    def sync(self, losses: list[np.ndarray]) -> None:
        """Add the cuts not added yet: a row ``z − ℓ_t·w ≤ 0`` and a column θ_t."""
        for loss in losses[self.synced :]:
            self.master.addRow(-self._inf, 0.0, self.k + 1, self._index, np.r_[-loss, 1.0])
            self.primal.addCol(0.0, 0.0, self._inf, self.k + 1, self._index, np.r_[loss, 1.0])
        self.synced = len(losses)

    def kelley(self, center: np.ndarray, radius: float) -> tuple[np.ndarray, float] | None:
        k = self.k
        self.master.changeColsBounds(k, self._index[:k], np.maximum(0.0, center - radius), np.minimum(1.0, center + radius))
        self.master.run()
        if self.master.getModelStatus() != self._optimal:
            self.master.clearSolver()
            return None
        x = np.asarray(self.master.getSolution().col_value)
        return x[:k], float(x[k])

    def mix(self, L: np.ndarray) -> np.ndarray:
        self.primal.run()
        if self.primal.getModelStatus() != self._optimal:  # fall back on a fresh solve
            self.primal.clearSolver()
            return _min_max_mix(L)
        theta = np.clip(np.asarray(self.primal.getSolution().col_value)[1:], 0.0, None)
        return theta / theta.sum()


def _two_group_mix(L: np.ndarray) -> np.ndarray:
    """Exact ``argmin_θ max(θ·ℓ_1, θ·ℓ_2)`` for two groups, without an LP solver.

    The minimiser over the convex hull of the points ``(ℓ_{t,1}, ℓ_{t,2})`` is a single point or
    lies on the diagonal ``ℓ_1 = ℓ_2``, on a segment between a point above and a point below it;
    with the few cuts of a two-group search (about ten) all such pairs are checked directly. This
    is ~10× faster than HiGHS through scipy here and exact (no feasibility tolerance).
    """
    T = L.shape[0]
    worst = L.max(axis=1)
    best = int(np.argmin(worst))
    theta = np.zeros(T)
    theta[best] = 1.0
    value = worst[best]
    h = L[:, 0] - L[:, 1]
    above, below = np.flatnonzero(h > 0), np.flatnonzero(h < 0)
    if above.size and below.size:
        ha, hb = h[above][:, None], h[below][None, :]
        share = -hb / (ha - hb)  # weight on the "above" point that equalises the two losses
        mixed = share * L[above, 0][:, None] + (1 - share) * L[below, 0][None, :]
        a, b = np.unravel_index(int(np.argmin(mixed)), mixed.shape)
        if mixed[a, b] < value:
            theta[:] = 0.0
            theta[above[a]] = share[a, b]
            theta[below[b]] = 1 - share[a, b]
    return theta


def _min_max_mix(L: np.ndarray) -> np.ndarray:
    """``argmin_θ max_i Σ_t θ_t ℓ_{t,i}`` for k groups: the LP dual of Kelley's master (HiGHS)."""
    T, k = L.shape
    objective = np.zeros(T + 1)
    objective[-1] = 1.0
    A_ub = np.hstack([L.T, -np.ones((k, 1))])
    A_eq = np.zeros((1, T + 1))
    A_eq[0, :T] = 1.0
    result = linprog(
        objective, A_ub=A_ub, b_ub=np.zeros(k), A_eq=A_eq, b_eq=[1.0],
        bounds=[(0, None)] * T + [(None, None)], method="highs-ds",
    )
    theta = np.clip(result.x[:T], 0.0, None)
    return theta / theta.sum()


def _converged(cuts: _Cuts, tolerance: float) -> bool:
    upper, _ = cuts.restricted_primal()
    return upper - cuts.lower_bound <= tolerance


def _search_two_groups(cuts: _Cuts, tolerance: float, max_iter: int) -> tuple[int, bool]:
    """Regula falsi (Illinois) on the decreasing supergradient ``h(t) = ℓ_1 − ℓ_2`` of
    ``t ↦ g(t, 1 − t)``; the vertices ``t = 0`` (``h ≥ 0``) and ``t = 1`` (``h ≤ 0``) bracket
    the maximiser."""

    def h(index: int) -> float:
        return float(cuts.losses[index][0] - cuts.losses[index][1])

    ta, ha, tb, hb = 0.0, h(1), 1.0, h(0)  # cut 0 is the vertex e_1 (t = 1), cut 1 is e_2
    for index in range(2, len(cuts.values)):  # the warm start, if any
        t, value = cuts.weights[index][0], h(index)
        if value > 0 and t > ta:
            ta, ha = t, value
        elif value <= 0 and t < tb:
            tb, hb = t, value
    kept = None
    for n_iter in range(1, max_iter + 1):
        if _converged(cuts, tolerance):
            return n_iter, True
        width = tb - ta
        if ha - hb > 0:
            t = ta + ha * width / (ha - hb)
        else:
            t = ta + width / 2
        t = float(np.clip(t, ta + 1e-4 * width, tb - 1e-4 * width))
        cuts.evaluate(np.array([t, 1.0 - t]))
        value = h(len(cuts.values) - 1)
        if value > 0:
            ta, ha = t, value
            if kept == "a":
                hb /= 2
            kept = "a"
        else:
            tb, hb = t, value
            if kept == "b":
                ha /= 2
            kept = "b"
    return max_iter, _converged(cuts, tolerance)


def _search_k_groups(cuts: _Cuts, tolerance: float, max_iter: int, radius: float) -> tuple[int, bool]:
    """Kelley's cutting-plane point inside a trust box around the best ``w`` (box step)."""
    center = cuts.best()
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        if _converged(cuts, tolerance):
            return n_iter, True
        step = cuts.boxed_kelley(cuts.weights[center], radius)
        if step is None:  # the box is too small for the LP's tolerances: widen it, or stop
            if radius >= 1.0:
                break
            radius = min(1.0, max(radius * 4, 1e-9))
            continue
        w, model = step
        value = cuts.evaluate(w)
        predicted = model - cuts.values[center]
        if value > cuts.values[center]:
            ratio = (value - cuts.values[center]) / max(predicted, 1e-300)
            center = len(cuts.values) - 1
            if ratio > 0.5:
                radius = min(2 * radius, 1.0)
        else:
            radius = max(radius / 2, 1e-9)
    return n_iter, _converged(cuts, tolerance)


def _recover_primal(cuts: _Cuts, theta: np.ndarray) -> tuple[LowRankMap, np.ndarray]:
    """The θ-combination of cut projections, rounded by Samadi's LP to rank ≤ d + k − 1."""
    problem, d = cuts.problem, cuts.d
    active = np.flatnonzero(theta > 1e-12)
    span = orthonormal_basis(np.hstack([cuts.vectors[t] for t in active]))
    combination = np.zeros((span.shape[1], span.shape[1]))
    for t in active:
        coords = span.T @ cuts.vectors[t]
        combination += theta[t] * coords @ coords.T
    eigenvalues, eigenvectors = np.linalg.eigh((combination + combination.T) / 2)
    basis = span @ eigenvectors[:, eigenvalues > 1e-12]
    projection, _ = lp_round(problem, d, basis)
    return projection, problem.losses(projection, d)


def solve_dual(
    problem: GroupProblem,
    d: int,
    *,
    tol: float = 1e-10,
    max_iter: int = 300,
    initial_weights: np.ndarray | None = None,
) -> FairPCASolution:
    """Fair PCA of rank ``d`` by the certified cutting-plane dual method described above."""
    k = problem.n_groups
    cuts = _Cuts(problem, d)
    cuts.add_vertices()
    start = initial_weights if initial_weights is not None else problem.sizes / problem.sizes.sum()
    cuts.evaluate(np.asarray(start, dtype=float))
    tolerance = tol * problem.scale
    if k == 2:
        n_iter, converged = _search_two_groups(cuts, tolerance, max_iter)
    else:
        radius = 0.25 if initial_weights is None else 0.05
        n_iter, converged = _search_k_groups(cuts, tolerance, max_iter, radius)
    _, theta = cuts.restricted_primal()
    combined, combined_losses = _recover_primal(cuts, theta)
    single = int(np.argmin([loss.max() for loss in cuts.losses]))
    single_losses = cuts.losses[single]  # projection_losses of that cut, stored by _Cuts.add
    if single_losses.max() <= combined_losses.max() + tolerance:
        projection = LowRankMap(cuts.vectors[single], np.ones(d))
        losses = problem.losses(projection, d)
    else:
        projection, losses = combined, combined_losses
    lower = cuts.lower_bound
    converged = bool(converged or losses.max() - lower <= tolerance)
    if not converged:
        warnings.warn(
            f"Fair PCA (eig) stopped after {max_iter} iterations at rank {d} with duality gap "
            f"{losses.max() - lower:.3g} (tolerance {tolerance:.3g}); raise max_iter.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return FairPCASolution(
        projection=projection,
        losses=losses,
        lower_bound=lower,
        weights=cuts.weights[cuts.best()],
        n_iter=n_iter,
        converged=converged,
    )
