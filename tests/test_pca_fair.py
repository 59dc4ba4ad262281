"""Fair PCA against theory (Samadi et al. 2018) and against an independent solver (CVXPY's SDP)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from fairaudit import PCA, FairPCA, metrics
from fairaudit.errors import FairAuditError, RankError, SingleGroupError
from fairaudit.groups import encode_groups
from fairaudit.pca import GroupProblem, rank_sweep
from fairaudit.pca._sdp import solve_sdp_relaxation

from .conftest import random_groups_data

# (k groups, n features, ranks) — the acceptance grid: 2–4 groups, 10–20 features.
INSTANCES = [(2, 10, (1, 3)), (2, 17, (2, 5)), (3, 12, (1, 4)), (3, 20, (3,)), (4, 14, (2, 5)), (4, 10, (1,))]


def _losses_from_projection(X, groups, P, d):
    """Group losses recomputed from ``projection_`` and the data alone (metrics module)."""
    centred = X - X.mean(axis=0)
    return np.array([metrics.loss(centred[groups == g], P, d) for g in np.unique(groups)])


@pytest.mark.parametrize("k,n,ranks", INSTANCES)
def test_eig_matches_cvxpy_sdp_optimum(k, n, ranks):
    rng = np.random.default_rng(1000 * k + n)
    X, groups = random_groups_data(rng, k, n)
    problem = GroupProblem.from_data(X, encode_groups(groups))
    for d in ranks:
        fair = FairPCA(n_components=d).fit(X, sensitive_features=groups)
        losses = _losses_from_projection(X, groups, fair.projection_, d)
        _, sdp_value, _ = solve_sdp_relaxation(problem, d)
        assert losses.max() == pytest.approx(sdp_value, rel=1e-6)
        assert fair.n_components_ <= d + k - 1  # Samadi Thm 5.1/5.2
        assert fair.dual_gap_ <= 1e-8 * problem.scale
        np.testing.assert_allclose(fair.group_losses_, losses, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_two_groups_have_equal_losses_at_the_optimum(seed):
    """Samadi Thm 4.5: when the optimum beats vanilla PCA, both groups' losses are equal."""
    rng = np.random.default_rng(seed)
    X, groups = random_groups_data(rng, 2, 12)
    for d in (1, 2, 4):
        vanilla = PCA(d).fit(X, sensitive_features=groups)
        fair = FairPCA(d).fit(X, sensitive_features=groups)
        assert fair.objective_ <= vanilla.objective_ + 1e-12
        if fair.objective_ < vanilla.objective_ - 1e-9:
            assert fair.group_losses_[0] == pytest.approx(fair.group_losses_[1], rel=1e-7, abs=1e-10)


@pytest.mark.parametrize("d", [1, 2])
def test_tied_eigenvalues_at_the_optimum(d):
    """Commuting group covariances: at the optimal weights the top eigenvalues tie exactly, the
    dual is not differentiable there, and the primal must be assembled inside the tied
    eigenspace. The solver must still match the SDP and equalise the losses."""
    rng = np.random.default_rng(7)
    n, m = 6, 400
    variances_a = np.array([9.0, 4.0, 1.0, 0.5, 0.2, 0.1])
    variances_b = np.array([1.0, 0.5, 8.0, 3.0, 0.2, 0.1])

    def exact_second_moments(variances):
        sample = rng.normal(size=(m, n))
        sample -= sample.mean(axis=0)
        whitened = sample @ np.linalg.inv(np.linalg.cholesky(sample.T @ sample / m)).T
        return whitened * np.sqrt(variances)

    X = np.vstack([exact_second_moments(variances_a), exact_second_moments(variances_b)])
    groups = np.repeat(["a", "b"], m)
    problem = GroupProblem.from_data(X, encode_groups(groups))
    fair = FairPCA(d).fit(X, sensitive_features=groups)
    _, sdp_value, _ = solve_sdp_relaxation(problem, d)
    vanilla = PCA(d).fit(X, sensitive_features=groups)
    assert fair.objective_ == pytest.approx(sdp_value, rel=1e-6)
    assert fair.objective_ < vanilla.objective_ - 1e-3
    assert fair.n_components_ <= d + 1
    assert fair.group_losses_[0] == pytest.approx(fair.group_losses_[1], rel=1e-7)


@pytest.mark.parametrize("seed", range(12))
def test_kept_cut_lps_equal_fresh_solves_as_cuts_arrive(seed):
    """The k-group LPs kept across cuts (_CutLPs: rows/columns added, re-solved from the last
    basis) give the optimum of the same LPs solved anew by scipy's linprog after every cut —
    Kelley's boxed master (its value) and the restricted primal (its min–max)."""
    from scipy.optimize import linprog

    from fairaudit.pca._dual import _CutLPs, _min_max_mix

    rng = np.random.default_rng(seed)
    k = int(rng.integers(3, 6))
    lps, losses = _CutLPs(k), []
    for t in range(25):
        losses.append(rng.uniform(0, 1, size=k) * (1 + t % 3))
        lps.sync(losses)
        L = np.array(losses)
        theta = lps.mix(L)
        assert theta.sum() == pytest.approx(1.0) and (theta >= 0).all()
        assert (theta @ L).max() == pytest.approx((_min_max_mix(L) @ L).max(), abs=1e-9)
        center, radius = rng.dirichlet(np.ones(k)), float(rng.choice([0.02, 0.2, 1.0]))
        found = lps.kelley(center, radius)
        bounds = [(max(0.0, c - radius), min(1.0, c + radius)) for c in center] + [(None, None)]
        fresh = linprog(np.r_[np.zeros(k), -1.0], A_ub=np.hstack([-L, np.ones((len(L), 1))]), b_ub=np.zeros(len(L)),
                        A_eq=np.r_[np.ones(k), 0.0][None], b_eq=[1.0], bounds=bounds, method="highs")
        assert (found is None) == (fresh.status != 0)
        if found is not None:
            w, value = found
            assert value == pytest.approx(-fresh.fun, abs=1e-9)
            assert (L @ w).min() == pytest.approx(value, abs=1e-9) and w.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(40))
def test_two_group_restricted_primal_is_exact(seed):
    """The pairwise two-group min–max over cuts equals HiGHS' LP (and is never worse)."""
    from fairaudit.pca._dual import _min_max_mix, _two_group_mix

    rng = np.random.default_rng(seed)
    L = rng.uniform(0, 1, size=(int(rng.integers(1, 15)), 2))
    if seed % 4 == 1:
        L[:, 1] = L[:, 0] * 0.5  # every cut favours group 2: a single cut is optimal
    if seed % 4 == 2:
        L[0, 1] = L[0, 0]  # a cut on the diagonal
    exact, lp = _two_group_mix(L), _min_max_mix(L)
    assert exact.sum() == pytest.approx(1.0) and (exact >= 0).all() and np.count_nonzero(exact) <= 2
    assert (exact @ L).max() <= (lp @ L).max() + 1e-9  # never worse than the LP ...
    assert (exact @ L).max() == pytest.approx((lp @ L).max(), abs=1e-7)  # ... and the same optimum


@pytest.mark.parametrize("k,n,ranks", INSTANCES[:4])
def test_sdp_and_mw_solvers_reach_the_same_value(k, n, ranks):
    rng = np.random.default_rng(77 + k + n)
    X, groups = random_groups_data(rng, k, n)
    for d in ranks:
        exact = FairPCA(d, solver="eig").fit(X, sensitive_features=groups)
        sdp = FairPCA(d, solver="sdp").fit(X, sensitive_features=groups)
        assert sdp.objective_ == pytest.approx(exact.objective_, rel=1e-6)
        assert sdp.n_components_ <= d + k - 1
        assert sdp.solver_used_.startswith("sdp/")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            mw = FairPCA(d, solver="mw", max_iter=3000).fit(X, sensitive_features=groups)
        assert mw.n_components_ <= d + k - 1
        # mw is approximate but certified: the optimum lies within its stated gap
        assert exact.objective_ >= mw.objective_ - mw.dual_gap_ - 1e-9 * exact.objective_
        assert mw.objective_ >= exact.objective_ - 1e-9 * exact.objective_


def test_mw_stops_on_its_gap():
    rng = np.random.default_rng(3)
    X, groups = random_groups_data(rng, 2, 8)
    mw = FairPCA(2, solver="mw", tol=1e-2).fit(X, sensitive_features=groups)
    assert mw.converged_
    assert mw.dual_gap_ <= 1e-2 * mw.objective_


def test_affine_projection_map_matches_lp_losses():
    """Samadi Alg. 1 output: ‖A − A P*‖² reproduces the LP losses (2λ* − λ*² = λ̄)."""
    rng = np.random.default_rng(11)
    X, groups = random_groups_data(rng, 3, 9)
    fair = FairPCA(2, solver="sdp").fit(X, sensitive_features=groups)
    assert np.all((fair.component_weights_ > 0) & (fair.component_weights_ <= 1 + 1e-12))
    losses = _losses_from_projection(X, groups, fair.projection_, 2)
    np.testing.assert_allclose(losses, fair.group_losses_, rtol=1e-8, atol=1e-10)


def test_vanilla_pca_matches_scikit_learn_subspace(rng):
    from sklearn.decomposition import PCA as SkPCA

    X, groups = random_groups_data(rng, 2, 8)
    ours = PCA(3).fit(X, sensitive_features=groups)
    theirs = SkPCA(3).fit(X)
    np.testing.assert_allclose(ours.projection_, theirs.components_.T @ theirs.components_, atol=1e-8)
    np.testing.assert_allclose(ours.mean_, theirs.mean_)


def test_transform_and_inverse_transform(rng):
    X, groups = random_groups_data(rng, 2, 7)
    fair = FairPCA(2, solver="sdp").fit(X, sensitive_features=groups)
    Z = fair.transform(X)
    assert Z.shape == (X.shape[0], fair.n_components_)
    centred = X - fair.mean_
    np.testing.assert_allclose(fair.inverse_transform(Z), centred @ fair.projection_ + fair.mean_, atol=1e-9)
    np.testing.assert_allclose(fair.projection_, fair.projection_.T, atol=1e-12)


def test_rank_sweep_equals_independent_fits(rng):
    X, groups = random_groups_data(rng, 3, 9)
    for rank, fitted, seconds in rank_sweep(FairPCA(), X, groups, range(1, 6)):
        alone = FairPCA(rank).fit(X, sensitive_features=groups)
        # both certify optimum ∈ [objective − dual_gap, objective]: the intervals must meet
        certified = max(fitted.dual_gap_, alone.dual_gap_) + 1e-12 * alone.objective_
        assert abs(fitted.objective_ - alone.objective_) <= certified
        assert fitted.objective_ == pytest.approx(alone.objective_, rel=1e-7)
        assert seconds >= 0


def test_scikit_learn_conventions(rng):
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError

    X, groups = random_groups_data(rng, 2, 5)
    estimator = FairPCA(2, solver="eig", tol=1e-9)
    assert estimator.get_params()["tol"] == 1e-9
    copy = clone(estimator)
    with pytest.raises(NotFittedError):
        copy.transform(X)
    assert copy.fit(X, sensitive_features=groups) is copy
    with pytest.raises(ValueError):
        copy.transform(X[:, :3])
    assert set(copy.groups_) == {"0", "1"}


def test_bad_parameters_give_specific_errors(rng):
    X, groups = random_groups_data(rng, 2, 5)
    with pytest.raises(RankError, match="at least 1"):
        FairPCA(0).fit(X, sensitive_features=groups)
    with pytest.raises(RankError, match="larger than"):
        FairPCA(6).fit(X, sensitive_features=groups)
    with pytest.raises(SingleGroupError):
        FairPCA(2).fit(X, sensitive_features=np.zeros(len(X)))
    with pytest.raises(FairAuditError, match="solver"):
        FairPCA(2, solver="magic").fit(X, sensitive_features=groups)
    with pytest.raises(FairAuditError, match="rows"):
        FairPCA(2).fit(X, sensitive_features=groups[:-1])


def test_intersectional_groups_from_a_dataframe(rng):
    import pandas as pd

    X, _ = random_groups_data(rng, 2, 6)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], len(X)), "age": rng.choice(["young", "old"], len(X))})
    fair = FairPCA(2).fit(X, sensitive_features=frame)
    assert len(fair.groups_) == 4
    assert all(" & " in label for label in fair.groups_)
    assert fair.n_components_ <= 2 + 4 - 1
