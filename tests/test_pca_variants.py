"""JEVD-PCA and covFairPCA: each paper's definitions against straightforward reference
implementations on small data, and the documented choices, tested."""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from fairaudit import JEVDPCA, PCA, CovFairPCA, FairPCA
from fairaudit.groups import encode_groups
from fairaudit.pca import GroupProblem
from fairaudit.pca.jevd import (
    first_order_jevd,
    first_order_update,
    jacobi_jevd,
    jevd_matrices,
    joint_diagonalize,
    off_diagonal_mass,
    select_columns,
)

from .conftest import random_groups_data


def _commuting(rng, n, k):
    basis = np.linalg.qr(rng.normal(size=(n, n)))[0]
    diagonals = rng.uniform(0.1, 5.0, size=(k, n))
    return basis, diagonals, np.array([basis @ np.diag(d) @ basis.T for d in diagonals])


@pytest.mark.parametrize("k", [2, 3, 4])
def test_joint_diagonalisation_recovers_a_common_eigenbasis(rng, k):
    _, _, matrices = _commuting(rng, 8, k)
    U, found, sweeps = joint_diagonalize(matrices)
    np.testing.assert_allclose(U.T @ U, np.eye(8), atol=1e-12)
    for M, diagonal in zip(matrices, found, strict=True):
        rotated = U.T @ M @ U
        assert np.abs(rotated - np.diag(np.diag(rotated))).max() < 1e-9
        np.testing.assert_allclose(np.sort(diagonal), np.sort(np.linalg.eigvalsh(M)), atol=1e-9)
    assert sweeps < 20


def test_joint_diagonalisation_reduces_off_diagonal_mass(rng):
    matrices = np.array([A @ A.T for A in rng.normal(size=(3, 7, 7))])
    U, _, _ = joint_diagonalize(matrices)

    def off(ms):
        return sum(float(np.sum(m**2) - np.sum(np.diag(m) ** 2)) for m in ms)

    assert off([U.T @ m @ U for m in matrices]) < 0.5 * off(matrices)


def test_column_selection_is_the_exact_min_max_subset(rng):
    for _ in range(5):
        captured = rng.uniform(0, 3, size=(3, 9))
        target = captured.sum(axis=1) * 0.6
        pooled = captured.mean(axis=0)
        for r in (1, 3, 5):
            chosen = select_columns(captured, target, r, pooled)
            best = min(
                max(target - captured[:, list(subset)].sum(axis=1)) for subset in combinations(range(9), r)
            )
            assert len(chosen) == r
            assert max(target - captured[:, chosen].sum(axis=1)) == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("solver", ["paper", "damped", "jacobi"])
def test_jevd_on_commuting_groups_is_the_best_coordinate_subspace(rng, solver):
    """With commuting group matrices every rank-d projection onto joint eigenvectors is available;
    JEVD-PCA must return the min–max one, which no other such subspace beats."""
    n = 7
    basis, diagonals, _ = _commuting(rng, n, 2)
    rows = []
    for diagonal in diagonals:
        sample = rng.normal(size=(500, n))
        sample -= sample.mean(axis=0)
        whitened = sample @ np.linalg.inv(np.linalg.cholesky(sample.T @ sample / 500)).T
        rows.append(whitened * np.sqrt(diagonal) @ basis.T)
    X = np.vstack(rows)
    groups = np.repeat([0, 1], 500)
    jevd = JEVDPCA(3, solver=solver).fit(X, sensitive_features=groups)
    assert jevd.off_diagonal_ratio_ < 1e-12
    fair = FairPCA(3).fit(X, sensitive_features=groups)
    assert jevd.objective_ >= fair.objective_ - 1e-9  # a projection cannot beat the relaxation
    Xc = X - X.mean(0)
    best = np.inf
    for subset in combinations(range(n), 3):
        U = basis[:, subset]
        losses = [
            np.trace(Xc[groups == g].T @ Xc[groups == g]) / 500 - np.sum((Xc[groups == g] @ U) ** 2) / 500
            - np.sort(np.linalg.eigvalsh(Xc[groups == g].T @ Xc[groups == g] / 500))[:-3].sum()
            for g in (0, 1)
        ]
        best = min(best, max(losses))
    assert jevd.objective_ == pytest.approx(best, rel=1e-8)


@pytest.mark.parametrize("solver", ["paper", "damped", "jacobi"])
def test_jevd_is_a_projection_of_the_requested_rank(rng, solver):
    X, groups = random_groups_data(rng, 3, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        jevd = JEVDPCA(4, solver=solver).fit(X, sensitive_features=groups)
    assert jevd.n_components_ == 4
    P = jevd.projection_
    np.testing.assert_allclose(P @ P, P, atol=1e-10)
    assert jevd.objective_ >= FairPCA(4).fit(X, sensitive_features=groups).objective_ - 1e-9


def test_jevd_restricts_to_the_principal_subspace_above_max_dim(rng):
    X, groups = random_groups_data(rng, 2, 30)
    jevd = JEVDPCA(3, solver="jacobi", max_dim=10).fit(X, sensitive_features=groups)
    assert jevd.joint_basis_.shape == (30, 10)
    assert jevd.n_components_ == 3


@pytest.mark.parametrize("constrained", [True, False])
def test_cov_fair_pca(rng, constrained):
    X, groups = random_groups_data(rng, 2, 8, rows_per_group=200)
    vanilla = PCA(2).fit(X, sensitive_features=groups)
    cov = CovFairPCA(2, constrained=constrained).fit(X, sensitive_features=groups)
    assert 0.0 <= cov.alpha_ <= 1.0
    assert cov.worse_group_ == vanilla.groups_[np.argmax(vanilla.group_errors_)]
    gap = np.ptp(cov.group_errors_)
    assert gap <= np.ptp(vanilla.group_errors_) + 1e-9  # α = 1 (vanilla) is inside the search
    if constrained:
        assert cov.group_errors_.max() <= vanilla.group_errors_.max() + 1e-6 + 1e-9
    P = cov.projection_
    np.testing.assert_allclose(P @ P, P, atol=1e-10)


def test_cov_fair_pca_handles_more_groups(rng):
    X, groups = random_groups_data(rng, 3, 6)
    cov = CovFairPCA(2).fit(X, sensitive_features=groups)
    assert cov.n_components_ == 2
    assert cov.worse_group_ != cov.better_group_


# ---------------------------------------------------------------- JEVD: the paper's pieces
def _group_rows(rng, sizes=(40, 25), n=5):
    return [rng.normal(size=(m, n)) @ rng.normal(size=(n, n)) for m in sizes]


def test_jevd_matrices_are_section_4_1s(rng):
    """M_s = (1/n_s)[X_sᵀX_s − (1/r) Σ_{k≤r} σ_k²(X_s) I], σ_k from an SVD of the rows."""
    rows = _group_rows(rng)
    covariances = np.array([A.T @ A / len(A) for A in rows])
    spectra = np.array([np.sort(np.linalg.eigvalsh(C))[::-1] for C in covariances])
    for r in (1, 3):
        expected = [
            (A.T @ A - np.sum(np.linalg.svd(A, compute_uv=False)[:r] ** 2) / r * np.eye(5)) / len(A) for A in rows
        ]
        np.testing.assert_allclose(jevd_matrices(covariances, spectra, r), expected, atol=1e-10)


def test_lemma_1_the_loss_is_minus_the_trace_against_m(rng):
    """Rathore & Manwani Lemma 1: L(X;U) = −Tr(Uᵀ M U) for orthonormal U — Samadi's loss."""
    rows = _group_rows(rng)
    X = np.vstack(rows)
    groups = np.repeat([0, 1], [len(A) for A in rows])
    problem = GroupProblem.from_data(X, encode_groups(groups))
    for r in (1, 2, 4):
        U = np.linalg.qr(rng.normal(size=(5, r)))[0]
        M = jevd_matrices(problem.covariances, problem.spectra, r)
        lemma = [-np.trace(U.T @ Ms @ U) for Ms in M]
        np.testing.assert_allclose(lemma, problem.projection_losses(U, r), atol=1e-10)


def test_the_criterion_is_eq_4(rng):
    M = np.array([_symmetric(rng.normal(size=(4, 4))) for _ in range(3)])
    U = rng.normal(size=(4, 4)) + 3 * np.eye(4)
    T = np.array([np.linalg.inv(U) @ Ms @ U for Ms in M])
    expected = sum(T[s][i, j] ** 2 for s in range(3) for i in range(4) for j in range(4) if i != j)
    assert off_diagonal_mass(T) == pytest.approx(expected, rel=1e-12)


def _symmetric(A):
    return A + A.T


def _first_order_criterion(T, V):
    """C_a(V) = Σ_s ‖ZDiag(O_s − VΛ_s + Λ_sV)‖²_F, written out."""
    total = 0.0
    for Ts in T:
        L = np.diag(np.diag(Ts))
        E = (Ts - L) - V @ L + L @ V
        total += np.sum(E**2) - np.sum(np.diag(E) ** 2)
    return total


def test_the_update_minimises_the_first_order_criterion(rng):
    """Algorithm 1 line 8: every partial derivative of C_a at V vanishes (finite differences),
    and C_a(V) is below C_a at random nearby points."""
    T = np.array([_symmetric(rng.normal(size=(5, 5))) + np.diag(rng.uniform(0, 9, 5)) for _ in range(2)])
    V = first_order_update(T)
    assert np.all(np.diag(V) == 0)
    h = 1e-6
    for m, n in [(0, 1), (1, 0), (2, 4), (4, 3)]:
        E = np.zeros_like(V)
        E[m, n] = h
        derivative = (_first_order_criterion(T, V + E) - _first_order_criterion(T, V - E)) / (2 * h)
        assert abs(derivative) < 1e-5 * max(1.0, _first_order_criterion(T, np.zeros_like(V)))
    best = _first_order_criterion(T, V)
    for _ in range(5):
        assert _first_order_criterion(T, V + 1e-3 * rng.normal(size=V.shape) * (1 - np.eye(5))) >= best


def _algorithm_1_as_printed(M, iterations):
    """Algorithm 1 with its loops written out (no vectorisation)."""
    TA, TB = M[0].copy(), M[1].copy()
    d = TA.shape[0]
    U = np.eye(d)
    for _ in range(iterations):
        V = np.zeros((d, d))
        for m in range(d):
            for n in range(d):
                if m != n:
                    gA, gB = TA[m, m] - TA[n, n], TB[m, m] - TB[n, n]
                    V[m, n] = -(TA[m, n] * gA + TB[m, n] * gB) / (gA**2 + gB**2)
        B = np.eye(d) + V
        Binv = np.linalg.inv(B)
        TA, TB = Binv @ TA @ B, Binv @ TB @ B
        U = U @ B
    return U, np.array([TA, TB])


def test_first_order_jevd_is_algorithm_1(rng):
    basis = np.linalg.qr(rng.normal(size=(5, 5)))[0]
    near = basis @ np.diag(rng.uniform(1, 6, 5)) @ basis.T
    M = np.array([near, basis @ np.diag(rng.uniform(1, 6, 5)) @ basis.T + 0.05 * _symmetric(rng.normal(size=(5, 5)))])
    result = first_order_jevd(M, tol=0.0, max_iter=4)
    U, T = _algorithm_1_as_printed(M, 4)
    np.testing.assert_allclose(result.U, U, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(result.T, T, rtol=1e-8, atol=1e-10)
    assert result.n_iter == 4 and len(result.history) == 5


@pytest.mark.parametrize("solver", ["paper", "damped", "jacobi"])
def test_the_joint_basis_does_not_depend_on_r(rng, solver):
    """M_s(r) differs from C_s by a multiple of I, which no scheme sees: one basis for all ranks."""
    rows = _group_rows(rng)
    covariances = np.array([A.T @ A / len(A) for A in rows])
    spectra = np.array([np.sort(np.linalg.eigvalsh(C))[::-1] for C in covariances])
    run = jacobi_jevd if solver == "jacobi" else (lambda M, **kw: first_order_jevd(M, damped=solver == "damped", **kw))
    kwargs = {"tol": 1e-12, "max_sweeps": 50} if solver == "jacobi" else {"tol": 1e-12, "max_iter": 8}
    bases = [run(jevd_matrices(covariances, spectra, r), **kwargs).U for r in (1, 2, 4)] + [run(covariances, **kwargs).U]
    for U in bases[1:]:
        np.testing.assert_allclose(U, bases[0], atol=1e-8)


def test_algorithm_1_converges_quadratically_on_commuting_matrices(rng):
    from scipy.linalg import expm

    A = rng.normal(size=(6, 6))
    Q = expm(1.0 * (A - A.T) / 2)  # far from the starting U = I
    M = np.array([Q @ np.diag(rng.uniform(0.1, 5, 6)) @ Q.T for _ in range(2)])
    result = first_order_jevd(M, tol=1e-20, max_iter=50)
    assert result.converged and result.n_iter < 12
    assert off_diagonal_mass(result.T) < 1e-20 * result.history[0]


def test_divergence_is_caught_and_the_best_iterate_kept(rng):
    """Non-commuting matrices with close diagonal entries: the first-order step is not small and
    Algorithm 1 blows up; the estimator warns, says so, and still returns a projection."""
    X, groups = random_groups_data(rng, 2, 10, rows_per_group=40)
    X = (X - X.mean(0)) / X.std(0)
    with pytest.warns(ConvergenceWarning):
        jevd = JEVDPCA(3, max_iter=200).fit(X, sensitive_features=groups)
    history = np.array(jevd.criterion_history_)
    assert jevd.diverged_ and not jevd.converged_
    assert history.max() > 1e6 * history[0]
    assert jevd.off_diagonal_ratio_ == pytest.approx(history.min() / history[0])
    P = jevd.projection_
    np.testing.assert_allclose(P @ P, P, atol=1e-8)


def test_damped_and_jacobi_schemes_decrease_the_criterion(rng):
    X, groups = random_groups_data(rng, 3, 8)
    problem = GroupProblem.from_data(X, encode_groups(groups))
    for result in (first_order_jevd(problem.covariances, tol=1e-12, max_iter=100, damped=True),
                   jacobi_jevd(problem.covariances, tol=1e-12, max_sweeps=100)):
        history = np.array(result.history)
        assert np.all(np.diff(history) <= 1e-12 * history[0])
        assert history[-1] < history[0]


def test_bad_jevd_solver_is_refused(rng):
    X, groups = random_groups_data(rng, 2, 4)
    with pytest.raises(ValueError, match="solver must be one of paper, damped, jacobi"):
        JEVDPCA(2, solver="svd").fit(X, sensitive_features=groups)


# ---------------------------------------------------------------- covFairPCA: the authors' procedure
def _cov_fair_reference(X, groups, r, constrained=True, tol=1e-6):
    """Pelegrina & Duarte's golden-section search written out: dense eigh, both probes
    re-evaluated each iteration, the constraint checked at the left probe."""
    M = X - X.mean(axis=0)
    n = len(M)
    A, B = M[groups == 0], M[groups == 1]
    cov_M = M.T @ M / n

    def project(matrix):
        w, V = np.linalg.eigh(matrix)
        U = V[:, np.argsort(w)[::-1][:r]]
        return U @ U.T

    def errors(P):
        return (np.sum((A - A @ P) ** 2) / len(A), np.sum((B - B @ P) ** 2) / len(B))

    eA, eB = errors(project(cov_M))
    difference = (B.T @ B / len(B) - A.T @ A / len(A)) if eA <= eB else (A.T @ A / len(A) - B.T @ B / len(B))
    ceiling = max(eA, eB)
    phi = (np.sqrt(5) + 1) / 2
    a0, a1 = 0.0, 1.0
    while abs(a1 - a0) > tol:
        p0, p1 = a1 - (a1 - a0) / phi, a0 + (a1 - a0) / phi
        e0 = errors(project(p0 * cov_M + (1 - p0) * difference))
        e1 = errors(project(p1 * cov_M + (1 - p1) * difference))
        if (e0[1] - e0[0]) ** 2 < (e1[1] - e1[0]) ** 2:
            if not constrained or (e0[0] <= ceiling + 1e-6 and e0[1] <= ceiling + 1e-6):
                a1 = p1
            else:
                a0 = p0
        else:
            a0 = p0
    alpha = (a0 + a1) / 2
    P = project(alpha * cov_M + (1 - alpha) * difference)
    return alpha, errors(P), P


@pytest.mark.parametrize("constrained", [True, False])
@pytest.mark.parametrize("r", [1, 3])
def test_cov_fair_pca_is_the_authors_search(rng, constrained, r):
    X, groups = random_groups_data(rng, 2, 6, rows_per_group=120)
    alpha, errors, P = _cov_fair_reference(X, groups, r, constrained)
    cov = CovFairPCA(r, constrained=constrained).fit(X, sensitive_features=groups)
    assert cov.alpha_ == pytest.approx(alpha, abs=1e-12)
    np.testing.assert_allclose(cov.group_errors_, errors, rtol=1e-9)
    np.testing.assert_allclose(cov.projection_, P, atol=1e-8)


def test_cov_fair_pca_equalises_errors_not_losses():
    """What covFairPCA optimises, on a case where the two differ: groups whose own best errors
    differ. Its error gap closes; its worst-group *loss* can exceed vanilla PCA's (as on LSAC)."""
    rng = np.random.default_rng(7)
    easy = rng.normal(size=(300, 4)) * [3.0, 0.2, 0.2, 0.2]  # one strong direction
    hard = rng.normal(size=(300, 4)) * [1.0, 1.0, 1.0, 1.0]  # no low-rank structure
    X, groups = np.vstack([easy, hard]), np.repeat([0, 1], 300)
    vanilla = PCA(1).fit(X, sensitive_features=groups)
    cov = CovFairPCA(1).fit(X, sensitive_features=groups)
    assert np.ptp(cov.group_errors_) < np.ptp(vanilla.group_errors_)
    assert cov.group_errors_.max() <= vanilla.group_errors_.max() + 1e-6
    assert cov.objective_ > vanilla.objective_  # the loss Fair PCA minimises went up


@pytest.mark.parametrize("constrained", [True, False])
def test_cov_fair_pca_ranks_searched_together_are_each_rank_alone(rng, monkeypatch, constrained):
    """A sweep searches every rank in lockstep, batching each step's eigen-decompositions
    (``covfair.golden_searches``): each rank's α, errors and map are its own search's — and the
    same on the one-at-a-time path that large problems take."""
    from fairaudit.pca import covfair
    from fairaudit.pca._base import rank_sweep

    X, groups = random_groups_data(rng, 2, 7, rows_per_group=90)
    swept = {rank: model for rank, model, _ in rank_sweep(CovFairPCA(constrained=constrained), X, groups, range(1, 7))}
    monkeypatch.setattr(covfair, "BATCHED_EIGH_MAX_DIM", 0)
    one_at_a_time = {rank: model for rank, model, _ in rank_sweep(CovFairPCA(constrained=constrained), X, groups, range(1, 7))}
    for rank in range(1, 7):
        alone = CovFairPCA(rank, constrained=constrained).fit(X, sensitive_features=groups)
        for other in (swept[rank], one_at_a_time[rank]):
            assert other.alpha_ == pytest.approx(alone.alpha_, abs=1e-12)
            assert other.n_iter_ == alone.n_iter_
            np.testing.assert_allclose(other.group_errors_, alone.group_errors_, rtol=1e-9)
            np.testing.assert_allclose(other.projection_, alone.projection_, atol=1e-8)
