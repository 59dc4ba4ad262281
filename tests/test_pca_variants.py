"""JEVD-PCA and covFairPCA: the documented choices, tested."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from fairaudit import JEVDPCA, PCA, CovFairPCA, FairPCA
from fairaudit.pca.jevd import joint_diagonalize, select_columns

from .conftest import random_groups_data


def _commuting(rng, n, k):
    basis = np.linalg.qr(rng.normal(size=(n, n)))[0]
    diagonals = rng.uniform(0.1, 5.0, size=(k, n))
    return basis, diagonals, np.array([basis @ np.diag(d) @ basis.T for d in diagonals])


@pytest.mark.parametrize("k", [2, 3, 4])
def test_joint_diagonalisation_recovers_a_common_eigenbasis(rng, k):
    basis, diagonals, matrices = _commuting(rng, 8, k)
    U, found, sweeps = joint_diagonalize(matrices)
    np.testing.assert_allclose(U.T @ U, np.eye(8), atol=1e-12)
    for M, diagonal in zip(matrices, found, strict=True):
        rotated = U.T @ M @ U
        assert np.abs(rotated - np.diag(np.diag(rotated))).max() < 1e-9
        np.testing.assert_allclose(np.sort(diagonal), np.sort(np.linalg.eigvalsh(M)), atol=1e-9)
    assert sweeps < 20


def test_joint_diagonalisation_reduces_off_diagonal_mass(rng):
    matrices = np.array([(lambda A: A @ A.T)(rng.normal(size=(7, 7))) for _ in range(3)])
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


def test_jevd_on_commuting_groups_is_the_best_coordinate_subspace(rng):
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
    jevd = JEVDPCA(3).fit(X, sensitive_features=groups)
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


def test_jevd_is_a_projection_of_the_requested_rank(rng):
    X, groups = random_groups_data(rng, 3, 12)
    jevd = JEVDPCA(4).fit(X, sensitive_features=groups)
    assert jevd.n_components_ == 4
    P = jevd.projection_
    np.testing.assert_allclose(P @ P, P, atol=1e-10)
    assert jevd.objective_ >= FairPCA(4).fit(X, sensitive_features=groups).objective_ - 1e-9


def test_jevd_restricts_to_the_principal_subspace_above_max_dim(rng):
    X, groups = random_groups_data(rng, 2, 30)
    jevd = JEVDPCA(3, max_dim=10).fit(X, sensitive_features=groups)
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
