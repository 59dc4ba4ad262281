"""UDFS (Yang et al., IJCAI 2011) and NDFS (Li et al., AAAI 2012) against their definitions,
written out here independently of ``fairaudit.fs.baselines`` (loops, dense matrices, the
papers' column-per-sample orientation), and against what the papers prove: monotone
objectives, nonnegative indicators, informative features ranked first."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from fairaudit import NDFS, UDFS
from fairaudit.errors import ParameterError
from fairaudit.fs.baselines import ZERO_ROW_RTOL, _smallest_eigenvectors, heat_graph


@pytest.fixture(autouse=True)
def _one_thread():
    with threadpool_limits(limits=1):
        yield


def _clusters(seed=0, n=120, informative=3, noise=5, separation=3.0, scaling="minmax"):
    """Two clusters in the first ``informative`` columns, Gaussian noise in the rest."""
    rng = np.random.default_rng(seed)
    shift = np.repeat([[0.0] * informative, [separation] * informative], n // 2, axis=0)
    X = np.hstack([rng.normal(size=(n, informative)) + shift, rng.normal(size=(n, noise))])
    if scaling == "minmax":
        return (X - X.min(0)) / (X.max(0) - X.min(0))
    return (X - X.mean(0)) / X.std(0)


def _neighbours(X, k):
    """Each row's k nearest other rows by brute force (ties by index)."""
    distances = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(distances, np.inf)
    return np.argsort(distances, axis=1, kind="stable")[:, :k]


def _udfs_M(X, k, lam):
    """[Yang11]'s M = Σ_i S_i H (X̃_iᵀX̃_i + λI)⁻¹ H S_iᵀ in the paper's orientation (X_i is
    d × (k+1), one column per sample), with explicit selection matrices."""
    n = X.shape[0]
    H = np.eye(k + 1) - np.ones((k + 1, k + 1)) / (k + 1)
    M = np.zeros((n, n))
    for i, row in enumerate(_neighbours(X, k)):
        members = [i, *row]
        S = np.zeros((n, k + 1))
        S[members, range(k + 1)] = 1.0
        Xi_tilde = X[members].T @ H  # d × (k+1): X̃_i = X_i H_{k+1}
        M += S @ H @ np.linalg.inv(Xi_tilde.T @ Xi_tilde + lam * np.eye(k + 1)) @ H @ S.T
    return M


# ------------------------------------------------------------------ UDFS
def test_udfs_M_is_the_papers_matrix_built_with_loops():
    X = _clusters(1, n=30)
    k, lam = 4, 10.0
    expected = X.T @ _udfs_M(X, k, lam) @ X
    np.testing.assert_allclose(UDFS(n_neighbors=k, lam=lam)._local_matrix(X, k), expected, rtol=1e-10, atol=1e-12)


def test_udfs_M_comes_from_the_local_discriminative_score():
    """Σ_i DS_i, DS_i = Tr[(S_t^(i) + λI)⁻¹ S_b^(i)] with d × d scatter matrices, equals
    Σ_i Tr(G_(i)ᵀ H G_(i)) − λ Tr(GᵀMG) for any G: M is the matrix the score reduces to."""
    rng = np.random.default_rng(2)
    X = _clusters(2, n=24, informative=2, noise=2)
    n, d = X.shape
    k, lam = 3, 0.7
    H = np.eye(k + 1) - np.ones((k + 1, k + 1)) / (k + 1)
    G = np.linalg.qr(rng.normal(size=(n, 2)))[0]
    total_score = trace_H = 0.0
    for i, row in enumerate(_neighbours(X, k)):
        members = [i, *row]
        Xi_tilde = X[members].T @ H
        Gi = G[members]
        S_t = Xi_tilde @ Xi_tilde.T  # local total scatter (d × d)
        S_b = Xi_tilde @ Gi @ Gi.T @ Xi_tilde.T  # local between-cluster scatter
        total_score += np.trace(np.linalg.solve(S_t + lam * np.eye(d), S_b))
        trace_H += np.trace(Gi.T @ H @ Gi)
    M = _udfs_M(X, k, lam)
    assert total_score == pytest.approx(trace_H - lam * np.trace(G.T @ M @ G), rel=1e-10)
    assert np.allclose(M @ np.ones(n), 0.0, atol=1e-12)  # H 1 = 0: M ignores the data's origin


def test_udfs_objective_is_the_printed_one_and_never_increases():
    for seed, gamma in ((0, 1e-3), (1, 1.0), (2, 10.0), (3, 0.05)):
        X = _clusters(seed, n=80)
        udfs = UDFS(3, n_clusters=2, gamma=gamma, tol=1e-12, max_iter=300).fit(X)
        history = udfs.objective_history_
        assert np.all(np.diff(history) <= 1e-10 * np.abs(history[:-1])), (seed, gamma)
        W = udfs.coef_
        np.testing.assert_allclose(W.T @ W, np.eye(2), atol=1e-10)  # s.t. WᵀW = I
        A = X.T @ _udfs_M(X, 5, udfs.lam) @ X
        printed = np.trace(W.T @ A @ W) + gamma * np.linalg.norm(W, axis=1).sum()  # Tr(WᵀXMXᵀW) + γ‖W‖₂,₁
        assert history[-1] == pytest.approx(printed, rel=1e-9)
        np.testing.assert_allclose(udfs.scores_, np.linalg.norm(W, axis=1))


def test_udfs_solution_is_a_fixed_point_of_algorithm_1():
    X = _clusters(2)
    udfs = UDFS(3, n_clusters=2, tol=1e-12, max_iter=500).fit(X)
    A = udfs._local_matrix(X, 5)
    D = 1.0 / (2.0 * np.maximum(np.linalg.norm(udfs.coef_, axis=1), 1e-12))
    vectors = np.linalg.eigh(0.5 * (A + A.T) + udfs.gamma * np.diag(D))[1][:, :2]
    # W spans the two eigenvectors with the smallest eigenvalues of XᵀMX + γD(W)
    np.testing.assert_allclose(vectors @ vectors.T @ udfs.coef_, udfs.coef_, atol=1e-5)


def test_udfs_ignores_the_datas_origin():
    X = _clusters(4, n=60)
    first, shifted = UDFS(4, n_clusters=2).fit(X), UDFS(4, n_clusters=2).fit(X + np.arange(8.0))
    np.testing.assert_allclose(shifted.scores_, first.scores_, atol=1e-8)
    np.testing.assert_array_equal(shifted.ranking_, first.ranking_)


def test_udfs_ranks_the_informative_features_first():
    """Standardised data (UDFS's WᵀW = I favours small-variance columns, so the columns get one
    scale). γ = 1 keeps c = 2 rows, both informative on every seed; with γ = 10⁻³ the ranking is
    graded and all three informative columns come first."""
    for seed in range(10):
        X = _clusters(seed, scaling="standard")
        kept = np.argsort(UDFS(3, n_clusters=2).fit(X).ranking_)[:2]
        assert set(kept) <= {0, 1, 2}, seed
        graded = UDFS(3, n_clusters=2, gamma=1e-3).fit(X)
        assert set(np.flatnonzero(graded.get_support())) == {0, 1, 2}, seed


def test_rows_driven_to_zero_are_ordered_by_the_first_iterate_whatever_the_tolerance():
    """γ = 1 on the audit's default sample keeps 2 rows; the other 8 end between 1e-16 and 1e-10,
    in an order that changed with ``tol`` before the tie-break."""
    from fairaudit.fs.audit import minmax
    from fairaudit.samples import load_sample

    X = minmax(load_sample().X_raw)
    loose, tight = UDFS(4, n_clusters=2, tol=1e-6).fit(X), UDFS(4, n_clusters=2, tol=1e-12, max_iter=1000).fit(X)
    np.testing.assert_array_equal(loose.ranking_, tight.ranking_)
    order = np.argsort(loose.ranking_)
    alive = loose.scores_ > ZERO_ROW_RTOL * loose.scores_.max()
    assert alive.sum() == 2 and set(order[:2]) == set(np.flatnonzero(alive))
    rest = order[2:]
    assert np.all(np.diff(loose.initial_scores_[rest]) <= 0)
    # the first iterate is Algorithm 1's first step: D = I, so the c smallest eigenvectors of XᵀMX
    first = _smallest_eigenvectors(0.5 * (loose._local_matrix(X, 5) + loose._local_matrix(X, 5).T), np.ones(10) * loose.gamma, 2)
    np.testing.assert_allclose(loose.initial_scores_, np.linalg.norm(first, axis=1), atol=1e-8)


def test_udfs_wide_path_is_the_dense_eigenproblem():
    """Wide data: XᵀMX = UUᵀ from the n × n M, and shift-invert Lanczos on D + UUᵀ finds the
    same eigenvectors as a dense solve."""
    rng = np.random.default_rng(14)
    X = (rng.random((60, 300)) < 0.1).astype(float)
    udfs = UDFS(2, n_neighbors=5, lam=10.0)
    A, U = udfs._local_matrix(X, 5), udfs._local_factor(X, 5)
    np.testing.assert_allclose(U @ U.T, A, atol=1e-12)
    diagonal = rng.uniform(0.5, 3.0, size=300)
    dense, wide = _smallest_eigenvectors(A, diagonal, 3), _smallest_eigenvectors(("factor", U), diagonal, 3)
    np.testing.assert_allclose(wide @ wide.T, dense @ dense.T, atol=1e-8)


# ------------------------------------------------------------------ NDFS
def _normalised_laplacian(X, k, t):
    """[Li12]'s L = D^{-1/2}(D − S)D^{-1/2}, S_ab = exp(−‖x_a − x_b‖²/t) when a is among b's k
    nearest or b among a's (dense, brute force)."""
    n = X.shape[0]
    squared = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    edge = np.zeros((n, n), dtype=bool)
    edge[np.repeat(np.arange(n), k), _neighbours(X, k).ravel()] = True
    edge |= edge.T
    S = np.where(edge, np.exp(-squared / t), 0.0)
    root = np.sqrt(S.sum(1))
    return np.eye(n) - S / np.outer(root, root)


def _indicator_rule(F, MF, gamma):
    """[Li12]'s multiplicative F rule entry by entry, with [MF]⁻ moved to the numerator where the
    printed denominator is not positive (there MF ≤ −γFFᵀF, so the denominator is γFFᵀF)."""
    FFF = F @ F.T @ F
    new = np.empty_like(F)
    for i in range(F.shape[0]):
        for j in range(F.shape[1]):
            denominator = MF[i, j] + gamma * FFF[i, j]
            if denominator > 0:
                new[i, j] = F[i, j] * gamma * F[i, j] / denominator
            else:
                new[i, j] = F[i, j] * (gamma * F[i, j] - MF[i, j]) / (gamma * FFF[i, j]) if F[i, j] > 0 else 0.0
    return new


def _ndfs_steps(X, L, F, *, alpha, beta, gamma, steps):
    """Algorithm 1 of [Li12] written out in the paper's orientation (Xp = Xᵀ, d × n), entry by
    entry for the F rule, with our two departures (docs/fs.md): [MF]⁻ to the numerator where
    the printed denominator is not positive, and F's columns rescaled to unit norm."""
    Xp = X.T
    d, n = Xp.shape
    D = np.eye(d)
    for _ in range(steps):
        inverse = np.linalg.inv(Xp @ Xp.T + beta * D)
        M = L + alpha * (np.eye(n) - Xp.T @ inverse @ Xp)
        new = _indicator_rule(F, M @ F, gamma)
        F = new / np.linalg.norm(new, axis=0)
        W = inverse @ Xp @ F  # W = (XXᵀ + βD)⁻¹XF
        D = np.diag(1.0 / (2.0 * np.linalg.norm(W, axis=1)))
    return F, W


def test_ndfs_iterations_are_algorithm_1_written_out():
    X = _clusters(5, n=40, informative=2, noise=3)
    params = {"alpha": 0.5, "beta": 0.3, "gamma": 1e3}  # a γ that lets MF matter in a few steps
    ndfs = NDFS(2, n_clusters=2, max_iter=6, tol=0.0, random_state=0, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ndfs.fit(X)
    S, _ = heat_graph(X, 5)
    start = ndfs._start(S, 2)
    F, W = _ndfs_steps(X, _normalised_laplacian(X, 5, ndfs.t_), start, steps=6, **params)
    np.testing.assert_allclose(ndfs.indicators_, F, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(ndfs.coef_, W, rtol=1e-7, atol=1e-12)


def test_ndfs_objective_is_the_printed_one_never_increases_and_F_stays_nonnegative():
    for seed, params in ((0, {}), (1, {"alpha": 10.0, "beta": 0.1}), (2, {"alpha": 0.1, "beta": 10.0}), (3, {"gamma": 1e4})):
        X = _clusters(seed, n=90)
        ndfs = NDFS(3, n_clusters=2, random_state=seed, **params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # γ = 10⁴ settles slowly: 100 iterations are monotone too
            ndfs.fit(X)
        history = ndfs.objective_history_
        assert np.all(np.diff(history) <= 1e-9 * np.abs(history[:-1])), (seed, params)
        F, W = ndfs.indicators_, ndfs.coef_
        assert np.all(F >= 0) and np.all(np.isfinite(F))
        L = _normalised_laplacian(X, 5, ndfs.t_)
        alpha, beta, gamma = ndfs.alpha, ndfs.beta, ndfs.gamma
        printed = (np.trace(F.T @ L @ F) + alpha * (np.sum((X @ W - F) ** 2) + beta * np.linalg.norm(W, axis=1).sum())
                   + gamma / 2 * np.sum((F.T @ F - np.eye(2)) ** 2))
        assert history[-1] == pytest.approx(printed, rel=1e-8)


def test_ndfs_printed_rule_alone_does_not_settle_the_scale():
    """For F = aQ (QᵀQ = I, Q ≥ 0) and MF negligible beside γ, the rule F ∘ γF / (MF + γFFᵀF)
    returns Q/a: the scale alternates, so the rule alone (``rescale=False``) does not settle."""
    Q = np.zeros((6, 2))
    Q[:3, 0] = Q[3:, 1] = 1 / np.sqrt(3)
    ndfs = NDFS(rescale=False)
    np.testing.assert_allclose(ndfs._update_indicators(3.0 * Q, np.zeros_like(Q)), Q / 3.0)
    X = _clusters(0)
    alone = NDFS(3, n_clusters=2, rescale=False, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        alone.fit(X)
    rescaled = NDFS(3, n_clusters=2, random_state=0).fit(X)
    assert np.sum(np.diff(alone.objective_history_) > 0) >= 10
    assert np.all(np.diff(rescaled.objective_history_) <= 0) and rescaled.n_iter_ < rescaled.max_iter


def test_ndfs_rule_keeps_F_nonnegative_and_its_fixed_points_where_MF_is_very_negative():
    rng = np.random.default_rng(3)
    F = rng.uniform(size=(20, 3))
    F[:5, 0] = 0.0
    gamma = 10.0
    MF = rng.normal(scale=100.0, size=F.shape)  # many entries with MF + γFFᵀF < 0
    assert np.any(MF + gamma * F @ F.T @ F <= 0)
    updated = NDFS(gamma=gamma, rescale=False)._update_indicators(F, MF)
    assert np.all(np.isfinite(updated)) and np.all(updated >= 0) and np.all(updated[:5, 0] == 0.0)
    # a KKT point of min Tr(FᵀMF) + γ/2‖FᵀF − I‖², F ≥ 0 is left where it is, by either branch
    stationary = gamma * F - gamma * F @ F.T @ F  # the MF that makes the gradient vanish
    np.testing.assert_allclose(NDFS(gamma=gamma, rescale=False)._update_indicators(F, stationary), F, rtol=1e-12)


def test_ndfs_rule_near_zero_entries_do_not_cancel_to_an_overflow():
    """An entry of F near 0 where MF is negative: the denominator MF + γFFᵀF + [MF]⁻ is γFFᵀF
    (10⁻²² here) but summed it rounds to 0 (−0.2 + 10⁻²² is −0.2). Floored at the smallest
    normal float it made the entry 10²⁷⁶, the column's norm overflowed and the rescaling set the
    whole column to 0. The rule's value is about |MF|/γ."""
    F = np.zeros((6, 2))
    F[1:3, 0] = 1 / np.sqrt(2)
    F[3:, 1] = 1 / np.sqrt(3)
    F[0, 1] = 1e-30  # a row on its way to 0
    MF = np.zeros_like(F)
    MF[0, 1] = -0.2
    gamma = 1e8
    with np.errstate(over="raise"):
        updated = NDFS(gamma=gamma, rescale=False)._update_indicators(F, MF)
    expected = _indicator_rule(F, MF, gamma)
    np.testing.assert_allclose(updated, expected, rtol=1e-12, atol=0)
    assert updated[0, 1] == pytest.approx(0.2 / gamma, rel=1e-6)
    rescaled = NDFS(gamma=gamma)._update_indicators(F, MF)
    np.testing.assert_allclose(np.linalg.norm(rescaled, axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(rescaled, expected / np.linalg.norm(expected, axis=0), rtol=1e-12, atol=0)
    # a row of F that is 0 has a zero denominator where MF < 0 and stays 0 (no 0/0), and so does a
    # column of F that is 0 (its norm is 0: not divided by)
    F[0, 1] = 0.0
    F[:, 0] = 0.0
    with np.errstate(all="raise"):
        updated = NDFS(gamma=gamma)._update_indicators(F, MF)
    assert updated[0].tolist() == [0.0, 0.0] and np.all(updated[:, 0] == 0.0)
    np.testing.assert_allclose(updated[:, 1], F[:, 1], rtol=1e-12)


@pytest.mark.parametrize("seed", [20, 40])
def test_ndfs_keeps_every_indicator_column_on_bootstrap_resamples(seed):
    """The cancellation above, reached at the default parameters with five clusters: on these two
    bootstrap resamples of the default sample (2 of 60 seeds) every column of F but one or two
    went to 0 within 37 iterations, the objective jumped by γ/2 per lost column and the scores
    were those of a dead F."""
    from fairaudit.fs.audit import minmax
    from fairaudit.samples import load_sample

    X = minmax(load_sample().X_raw)
    rows = np.random.default_rng(seed).integers(0, len(X), len(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # overflow in the step
        ndfs = NDFS(5, n_clusters=5, random_state=0).fit(X[rows])
    np.testing.assert_allclose(np.linalg.norm(ndfs.indicators_, axis=0), 1.0, rtol=1e-12)
    history = ndfs.objective_history_
    assert np.all(np.diff(history) <= 1e-9 * np.abs(history[:-1])) and history[-1] < 10.0
    assert ndfs.n_iter_ < ndfs.max_iter


def _adversarial(name):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(60, 4))
    if name == "isolated row":  # its heat-kernel weights (t = 0.01) underflow: a row of degree 0
        X[0] = 10.0
    elif name == "rows repeated":  # each of 6 rows 10 times: every neighbour at distance 0 (t = 1)
        X = np.repeat(X[:6], 10, axis=0)
    elif name == "three rows":
        X = X[:3]
    elif name == "near-zero column":  # not constant (0 or the smallest subnormal), yet 0 in every product
        X[:, 1] = 5e-324 * rng.integers(0, 2, size=60)
    return X


@pytest.mark.parametrize("name, params", [
    pytest.param("isolated row", {"t": 0.01}, id="isolated row"),
    pytest.param("rows repeated", {}, id="rows repeated"),
    pytest.param("three rows", {"n_clusters": 5}, id="three rows"),  # c = min(5, n − 1) clusters
    pytest.param("near-zero column", {"center": True}, id="near-zero column"),
    pytest.param("small gamma", {"gamma": 1e-12}, id="small gamma"),  # most steps cancel: the column norms overflowed at step 2
])
def test_ndfs_stays_finite_with_unit_columns_on_degenerate_input(name, params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # γ = 10⁻¹² is below "large enough": it does not settle
        warnings.simplefilter("error", RuntimeWarning)
        ndfs = NDFS(2, **{"n_clusters": 2, "random_state": 0, **params}).fit(_adversarial(name))
    if name == "isolated row":
        assert ndfs.t_ == 0.01 and np.asarray(heat_graph(_adversarial(name), 5, 0.01)[0].sum(axis=1))[0, 0] == 0.0
    assert np.all(np.isfinite(ndfs.indicators_)) and np.all(np.isfinite(ndfs.objective_history_))
    np.testing.assert_allclose(np.linalg.norm(ndfs.indicators_, axis=0), 1.0, rtol=1e-12)
    assert np.all(ndfs.scores_ >= 0) and np.any(ndfs.scores_ > 0)
    if "gamma" not in params:
        history = ndfs.objective_history_
        assert np.all(np.diff(history) <= 1e-9 * np.abs(history[:-1]))


def test_ndfs_ranks_the_informative_features_first():
    """On centred (standardised) data the printed model keeps the three informative columns; on
    min-max scaled data its intercept-free XW spends weight on F's column means and keeps a noise
    column (every seed here), where ``center=True`` keeps the three informative ones."""
    for seed in range(5):
        X = _clusters(seed, scaling="standard")
        assert set(np.flatnonzero(NDFS(3, n_clusters=2, random_state=0).fit(X).get_support())) == {0, 1, 2}, seed
        X = _clusters(seed)
        assert set(np.flatnonzero(NDFS(3, n_clusters=2, center=True, random_state=0).fit(X).get_support())) == {0, 1, 2}, seed
        assert set(np.flatnonzero(NDFS(3, n_clusters=2, random_state=0).fit(X).get_support())) != {0, 1, 2}, seed


def test_ndfs_centred_ignores_the_datas_origin_and_the_printed_model_does_not():
    X = _clusters(6, n=60)
    shift = np.arange(8.0)
    centred, centred_shifted = (NDFS(3, n_clusters=2, center=True, random_state=0).fit(Z) for Z in (X, X + shift))
    np.testing.assert_allclose(centred_shifted.scores_, centred.scores_, rtol=1e-6, atol=1e-10)
    printed, printed_shifted = (NDFS(3, n_clusters=2, random_state=0).fit(Z) for Z in (X, X + shift))
    assert not np.allclose(printed_shifted.scores_, printed.scores_, rtol=1e-3)


def test_ndfs_wide_solve_is_exact():
    rng = np.random.default_rng(0)
    wide, F, weights = rng.normal(size=(10, 25)), rng.uniform(size=(10, 2)), rng.uniform(0.5, 2.0, size=25)
    ndfs = NDFS(beta=0.7)
    direct = np.linalg.solve(wide.T @ wide + ndfs.beta * np.diag(weights), wide.T @ F)
    np.testing.assert_allclose(ndfs._solve(wide, weights, F), direct, rtol=1e-8, atol=1e-10)


# ------------------------------------------------------------------ both
@pytest.mark.parametrize("selector", [UDFS(3, n_clusters=2), NDFS(3, n_clusters=2, random_state=0)], ids=lambda s: type(s).__name__)
def test_constant_columns_are_left_out_and_ordered_last(selector):
    X = _clusters(7, n=60)
    with_constant = np.insert(X, 1, 0.5, axis=1)
    fitted = selector.fit(with_constant)
    assert fitted.ranking_[1] == with_constant.shape[1] and fitted.scores_[1] == 0.0
    assert np.all(fitted.coef_[1] == 0.0) and np.isnan(fitted.initial_scores_[1])
    alone = type(selector)(**selector.get_params()).fit(X)
    np.testing.assert_allclose(np.delete(fitted.scores_, 1), alone.scores_, rtol=1e-10, atol=1e-14)
    with pytest.raises(ParameterError, match="constant"):
        type(selector)(1).fit(np.ones((10, 3)))


def test_parameters_are_checked():
    X = _clusters(8, n=40)
    with pytest.raises(ParameterError, match="lam"):  # λ = 0 leaves X̃_iX̃_iᵀ + λI singular
        UDFS(2, lam=0.0).fit(X)
    with pytest.raises(ParameterError, match="gamma"):
        UDFS(2, gamma=-1.0).fit(X)
    with pytest.raises(ParameterError, match="tol"):
        NDFS(2, tol=float("nan")).fit(X)
    with pytest.raises(ParameterError, match="beta"):
        NDFS(2, beta=0.0).fit(X)


@pytest.mark.parametrize("selector", [UDFS(2, n_clusters=2, gamma=1e-3, max_iter=2, tol=0.0), NDFS(2, n_clusters=2, max_iter=2, random_state=0)], ids=lambda s: type(s).__name__)
def test_an_unsettled_objective_warns(selector):
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        selector.fit(_clusters(9, n=40))
