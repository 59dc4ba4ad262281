"""covFairPCA: Pelegrina & Duarte's one-dimensional search over a weighted covariance.

G. D. Pelegrina, L. T. Duarte, "A novel approach for Fair Principal Component Analysis based
on eigendecomposition", IEEE Transactions on Artificial Intelligence, 2023 (arXiv:2208.11362);
the baseline called "covFairPCA" by Rathore & Manwani (2025).

For a rank ``r``, with ``C_M = XᵀX/m`` (all rows, globally centred) and ``C_i = A_iᵀA_i/m_i``:

1. run vanilla PCA at rank ``r``; the group with the larger average reconstruction error is the
   *worse* group, the other the *better* one (decided once per rank);
2. for ``α ∈ [0, 1]`` let ``P(α)`` project onto the top-``r`` eigenvectors (by signed
   eigenvalue) of ``α C_M + (1 − α)(C_worse − C_better)`` — ``α = 1`` is vanilla PCA, smaller
   ``α`` favours directions that carry more of the worse group's variance;
3. golden-section search on ``α`` (interval [0, 1], tolerance ``tol``) minimising the fairness
   measure ``F(α) = (error_worse(P(α)) − error_better(P(α)))²``;
4. the constrained variant only moves towards a probe ``α`` when no group's error there
   exceeds the worst group's vanilla-PCA error (plus 1e-6) — the variant the authors run.

Source: the paper's body was not retrievable here (only its abstract is stored), so steps 1–4
were checked against the authors' published code (``main_goldenFPCA.m`` and
``golden_section_function_constr.m`` in GuilhermePelegrina/FPCA), which the tests re-implement
literally: each new probe pair ``a = high − (high − low)/φ``, ``b = low + (high − low)/φ``; move
``high`` to ``b`` when ``F(a) < F(b)`` and (constrained) both errors at ``a`` are within 10⁻⁶ of
vanilla PCA's worst error, otherwise ``low`` to ``a``; stop when ``high − low ≤ 10⁻⁶``; ``α`` is
the final midpoint. The method equalises reconstruction *errors*; it does not look at Samadi's
losses, so the better-served group's loss can end above vanilla PCA's worst loss
(``docs/architecture.md``, "covFairPCA").

For k > 2 groups (not covered by the paper) we use the groups with the largest and smallest
vanilla error as *worse* and *better*, and ``F = (max_i error_i − min_i error_i)²``. For wide data
(row space, see ``_problem``) the top-``r`` eigenvectors rank the zero eigenvalues outside the
row space above negative ones, as the full ``d × d`` matrix would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..linalg import LowRankMap, blas_threads
from ._base import GroupPCABase
from ._problem import BLAS_THREADS, GroupProblem

_GOLDEN = (1 + 5**0.5) / 2

BATCHED_EIGH_MAX_DIM = 64
"""Up to this problem dimension each golden-section step eigen-decomposes every rank's new probes
in one batched NumPy call (:func:`golden_searches`); above it, one at a time with
:meth:`~fairaudit.pca._problem.GroupProblem.top_eigenvectors` (a few eigenpairs of a large matrix,
warm-started)."""


class CovFairPCA(GroupPCABase):
    """Fair PCA by golden-section search over α·Cov(M) + (1 − α)(Cov_worse − Cov_better).

    Parameters
    ----------
    n_components : int, default=2
    constrained : bool, default=True
        Pelegrina & Duarte's constrained variant (no group ends worse than the worst group of
        vanilla PCA); ``False`` is their unconstrained search.
    tol : float, default=1e-6
        Width of the final α interval (the authors' value).

    Attributes
    ----------
    alpha_ : float
        The α found.
    worse_group_, better_group_ : str
    n_iter_ : int
        Golden-section iterations.

    References
    ----------
    G. D. Pelegrina, L. T. Duarte. "A novel approach for Fair Principal Component Analysis
    based on eigendecomposition". IEEE Trans. Artif. Intell., 2023.
    """

    def __init__(self, n_components: int = 2, *, constrained: bool = True, tol: float = 1e-6):
        super().__init__(n_components)
        self.constrained = constrained
        self.tol = tol

    def _prepare_ranks(self, problem: GroupProblem, ranks) -> None:
        """Every rank of a sweep searched together (:func:`golden_searches`), kept with ``problem``."""
        solved = problem._cache.setdefault(self._cache_key(), {})
        missing = sorted({min(int(r), problem.dim) for r in ranks} - set(solved))
        if missing:
            with blas_threads(BLAS_THREADS):
                solved.update(golden_searches(problem, missing, constrained=self.constrained, tol=self.tol))

    def _cache_key(self) -> tuple:
        return ("covfair", bool(self.constrained), float(self.tol))

    def _solve(self, problem: GroupProblem, d: int, warm_start) -> LowRankMap:
        self._prepare_ranks(problem, [d])
        search = problem._cache[self._cache_key()][d]
        self.alpha_ = search.alpha
        self.worse_group_ = problem.labels[search.worse]
        self.better_group_ = problem.labels[search.better]
        self.n_iter_ = search.iterations
        return LowRankMap(search.vectors, np.ones(search.vectors.shape[1]))


@dataclass
class _Search:
    """One rank's golden-section search (the authors' steps, module docstring): the interval, the
    probes evaluated (``α → (F, errors, vectors)``) and, once done, the result."""

    rank: int
    worse: int
    better: int
    difference: np.ndarray
    ceiling: float
    low: float = 0.0
    high: float = 1.0
    iterations: int = 0
    probes: dict = field(default_factory=dict)
    alpha: float | None = None
    vectors: np.ndarray | None = None
    last: np.ndarray | None = None  # the latest probe's vectors (an iterative solver's start)

    def known(self, alpha: float) -> float:
        """A probe recomputed from the new interval is the previous probe up to rounding (the
        authors' code recomputes it; the projection is the same): the one evaluated already."""
        return next((seen for seen in self.probes if abs(seen - alpha) <= 1e-12), alpha)

    def wanted(self, tol: float) -> list[float]:
        """The probes the next step needs and has not evaluated (none once the search is done)."""
        if self.alpha is not None:
            return []
        if self.high - self.low > tol:
            alphas = [self.known(self.high - (self.high - self.low) / _GOLDEN), self.known(self.low + (self.high - self.low) / _GOLDEN)]
        else:
            alphas = [self.known((self.low + self.high) / 2)]
        return [alpha for alpha in dict.fromkeys(alphas) if alpha not in self.probes]

    def step(self, tol: float, constrained: bool) -> None:
        """The next golden-section step, its probes evaluated (or the final midpoint's vectors)."""
        if self.high - self.low > tol:
            self.iterations += 1
            a = self.high - (self.high - self.low) / _GOLDEN
            b = self.low + (self.high - self.low) / _GOLDEN
            (fa, errors_a, _), (fb, _, _) = self.probes[self.known(a)], self.probes[self.known(b)]
            if fa < fb and (not constrained or errors_a.max() <= self.ceiling):
                self.high = b
            else:
                self.low = a
        else:
            self.alpha = (self.low + self.high) / 2
            self.vectors = self.probes[self.known(self.alpha)][2]


def golden_searches(problem: GroupProblem, ranks, *, constrained: bool, tol: float) -> dict[int, _Search]:
    """covFairPCA's golden-section search (module docstring, steps 1–4) at every rank of ``ranks``,
    the ranks in lockstep: every rank takes the same number of steps (the interval shrinks by
    ``1/φ`` each), so each step's new probes of all ranks are eigen-decomposed in one batched call.
    Each rank's probes, decisions and result are those of its own search alone (the same LAPACK
    routine on the same matrices)."""
    pooled = problem.pooled
    searches = []
    for rank in ranks:
        _, vanilla = problem.top_eigenvectors(pooled, rank)
        vanilla_errors = problem.errors(LowRankMap(vanilla, np.ones(vanilla.shape[1])))
        worse, better = int(np.argmax(vanilla_errors)), int(np.argmin(vanilla_errors))
        difference = problem.covariances[worse] - problem.covariances[better]
        searches.append(_Search(rank, worse, better, difference, float(vanilla_errors.max()) + 1e-6, last=vanilla))
    batched = problem.dim <= BATCHED_EIGH_MAX_DIM
    while True:
        wanted = [(search, alpha) for search in searches for alpha in search.wanted(tol)]
        matrices = [alpha * pooled + (1 - alpha) * search.difference for search, alpha in wanted]
        if batched and wanted:
            found = _batched_probes(problem, matrices, [search.rank for search, _ in wanted])
        else:  # one at a time, each iterative solve started from the rank's previous probe
            found = []
            for (search, _), M in zip(wanted, matrices, strict=True):
                kept = problem.top_eigenvectors(M, search.rank, v0=search.last)[1]
                found.append((problem.errors(LowRankMap(kept, np.ones(kept.shape[1]))), kept))
        for (search, alpha), (errors, kept) in zip(wanted, found, strict=True):
            search.probes[alpha] = (float((errors.max() - errors.min()) ** 2), errors, kept)
            search.last = kept
        active = [search for search in searches if search.alpha is None]
        if not active:
            return {search.rank: search for search in searches}
        for search in active:
            search.step(tol, constrained)


def _batched_probes(problem: GroupProblem, matrices: list[np.ndarray], ranks: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(errors, vectors)`` of the projection onto the top-``rank`` eigenvectors of each matrix
    (:meth:`~fairaudit.pca._problem.GroupProblem.top_from_decomposition`), the decompositions and
    the groups' captured variances ``u_jᵀ C_i u_j`` computed for all matrices at once; ``error_i =
    tr C_i − Σ_j u_jᵀ C_i u_j`` (:meth:`~fairaudit.pca._problem.GroupProblem.errors` of a projection)."""
    values, vectors = np.linalg.eigh(np.stack(matrices))
    values, vectors = values[:, ::-1], vectors[:, :, ::-1]  # descending
    captured = np.sum((problem.covariances[None] @ vectors[:, None]) * vectors[:, None], axis=-2)  # (probes, k, dim)
    before = np.concatenate([np.zeros(captured.shape[:2] + (1,)), np.cumsum(captured, axis=-1)], axis=-1)
    found = []
    for index, rank in enumerate(ranks):
        count = problem._outranking(values[index, : min(rank, problem.dim)], rank)
        found.append((problem.traces - before[index, :, count], vectors[index, :, :count]))
    return found
