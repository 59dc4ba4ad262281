"""FUFS: alignment and gradients against their definitions, projection against CVXPY, behaviour on
data with planted proxies, and the errors users see."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from fairaudit import FUFS, FairAuditError, LaplacianScore, VarianceSelector
from fairaudit.errors import ParameterError, RankError
from fairaudit.fs._alignment import ExactRBF, Linear, NystroemRBF, project_capped_simplex


@pytest.fixture(autouse=True)
def _one_thread():
    """One BLAS/OpenMP thread, as the FS audit runs: on the shared two-core machine the default
    thread pools made these small products many times slower."""
    with threadpool_limits(limits=1):
        yield


def _centred_alignment(K: np.ndarray, T: np.ndarray) -> float:
    """A_c(K, T) straight from the definition, with an explicit centring matrix."""
    n = K.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    Kc, Tc = H @ K @ H, H @ T @ H
    return float(np.sum(Kc * Tc) / (np.linalg.norm(Kc) * np.linalg.norm(Tc)))


def _problem(seed: int, n: int = 40, d: int = 6, k: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 2.0, size=d)
    groups = rng.integers(0, k, size=n)
    groups[:k] = np.arange(k)
    return X, np.eye(k)[groups], rng


BACKENDS = {
    "exact": lambda X, seed: ExactRBF(X, 0.2),
    "nystroem": lambda X, seed: NystroemRBF(X, 0.2, n_landmarks=15, random_state=seed),
    "linear": lambda X, seed: Linear(X),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_analytic_gradient_matches_finite_differences(backend, seed):
    X, Y, rng = _problem(seed)
    d = X.shape[1]
    B = BACKENDS[backend](X, seed)
    proxies = (np.arange(d) < 2).astype(float)
    targets = [B.target_weights(np.ones(d), d), B.target_factor(Y), B.target_weights(proxies, 2.0)]
    coefs = np.array([1.0, -rng.uniform(0.5, 3.0), -rng.uniform(0.0, 1.0)])
    w = rng.uniform(0.05, 0.95, size=d)
    total = 3.0
    _, grad, _ = B.value_grad(w, total, coefs, targets)
    step = 1e-6
    numeric = np.array(
        [
            (B.value_grad(w + step * e, total, coefs, targets)[0] - B.value_grad(w - step * e, total, coefs, targets)[0]) / (2 * step)
            for e in np.eye(d)
        ]
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def test_exact_alignment_is_the_definition():
    X, Y, rng = _problem(3)
    d = X.shape[1]
    w = rng.uniform(0.1, 1.0, size=d)
    total = 2.5
    B = ExactRBF(X, 0.3)
    _, _, (to_data, to_groups) = B.value_grad(w, total, np.zeros(2), [B.target_weights(np.ones(d), d), B.target_factor(Y)], gradient=False)
    gamma_w = 0.3 * d / total
    diff = X[:, None, :] - X[None, :, :]
    K_w = np.exp(-gamma_w * np.einsum("abj,j->ab", diff**2, w))
    K_all = np.exp(-0.3 * np.sum(diff**2, axis=2))
    assert to_data == pytest.approx(_centred_alignment(K_w, K_all), rel=1e-10)
    assert to_groups == pytest.approx(_centred_alignment(K_w, Y @ Y.T), rel=1e-10)


def test_exact_alignment_counts_repeated_rows_as_often_as_they_occur():
    """A bootstrap resample repeats rows: the exact back-end keeps each distinct row once with its
    count, and its alignments and gradient are still those of every row (a copy may carry another
    group)."""
    X, Y, rng = _problem(6)
    rows = np.sort(rng.integers(0, 40, size=40))
    X, Y = X[rows], Y[rows]
    Y[-1] = Y[0][::-1]  # the first row once more, in another group
    X[-1] = X[0]
    d = X.shape[1]
    B = ExactRBF(X, 0.3)
    assert B.X.shape[0] < 40
    diff = X[:, None, :] - X[None, :, :]
    K_all = np.exp(-0.3 * np.sum(diff**2, axis=2))
    proxies = (np.arange(d) < 2).astype(float)
    K_proxies = np.exp(-0.3 * d / 2.0 * np.einsum("abj,j->ab", diff**2, proxies))
    coefs = np.array([1.0, -1.7, -0.4])
    targets = [B.target_weights(np.ones(d), d), B.target_factor(Y), B.target_weights(proxies, 2.0)]

    def reference(w, total=2.5):
        K_w = np.exp(-0.3 * d / total * np.einsum("abj,j->ab", diff**2, w))
        found = [_centred_alignment(K_w, T) for T in (K_all, Y @ Y.T, K_proxies)]
        return float(coefs @ found), found

    w = rng.uniform(0.1, 1.0, size=d)
    value, grad, alignments = B.value_grad(w, 2.5, coefs, targets)
    expected, found = reference(w)
    assert value == pytest.approx(expected, rel=1e-10)
    np.testing.assert_allclose(alignments, found, rtol=1e-10)
    np.testing.assert_allclose(B.value_grad(w, 2.5, coefs, targets, gradient=False)[2], found, rtol=1e-10)  # one pass, no gradient
    step = 1e-6
    numeric = [(reference(w + step * e)[0] - reference(w - step * e)[0]) / (2 * step) for e in np.eye(d)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def test_nystroem_alignments_on_repeated_rows_are_those_of_every_row():
    """The gradient-free Nyström alignments (the audit's measurement) keep each distinct row once
    with its count: the same alignments as the computation over every row (with the gradient)."""
    X, Y, rng = _problem(8, n=60)
    rows = np.sort(rng.integers(0, 60, size=60))
    X, Y = X[rows], Y[rows]
    Y[-1] = Y[0][::-1]  # the first row once more, in another group
    X[-1] = X[0]
    d = X.shape[1]
    B = NystroemRBF(X, 0.2, n_landmarks=20, random_state=1)
    assert "_distinct" not in vars(B)  # found when first needed, not built with the back-end
    B.factor(np.ones(d), d)
    assert "_distinct" not in vars(B)  # the factor (and the gradient) work on every row
    targets = [B.target_weights(np.ones(d), d), B.target_factor(Y)]
    assert B._distinct is not None and B._distinct[0].shape[0] < 60
    for w in (rng.uniform(0.1, 1.0, size=d), (np.arange(d) < 3).astype(float)):
        every_row = B.value_grad(w, 2.0, np.array([1.0, -1.0]), targets)[2]
        np.testing.assert_allclose(B.value_grad(w, 2.0, np.array([1.0, -1.0]), targets, gradient=False)[2], every_row, rtol=1e-8)


def test_nystroem_alignments_merge_rows_equal_on_the_used_columns():
    """The measurement keeps rows equal on the columns a selection uses once (their counts and
    target rows added), whether or not they differ elsewhere, and solves with ``W``'s Cholesky
    factor: the alignments of the computation over every row, on data with and without repeats."""
    X, Y, rng = _problem(9, n=80)
    X[:, 0] = rng.integers(0, 4, size=80)  # few values: many rows equal on column 0 alone
    X[:, 1] = rng.integers(0, 3, size=80)
    d = X.shape[1]
    for data, groups in ((X, Y), (X[np.sort(rng.integers(0, 80, size=80))], None)):
        groups = Y[: len(data)] if groups is None else groups
        B = NystroemRBF(data, 0.2, n_landmarks=25, random_state=2)
        targets = [B.target_weights(np.ones(d), d), B.target_factor(groups)]
        for used in ([0], [1], [0, 1], [0, 3], [2, 3, 4]):
            w = np.zeros(d)
            w[used] = 1.0
            every_row = B.value_grad(w, len(used), np.array([1.0, -1.0]), targets)[2]
            np.testing.assert_allclose(B.alignments(w, len(used), targets), every_row, rtol=1e-7)


def test_nystroem_target_of_repeated_rows_is_the_target_of_every_row():
    """With repeated rows the data target (``target_weights``) is built on the distinct rows with
    their counts: the same alignments as a target built from every row's factor."""
    X, Y, rng = _problem(10, n=70)
    X = X[np.sort(rng.integers(0, 70, size=70))]
    d = X.shape[1]
    B = NystroemRBF(X, 0.2, n_landmarks=20, random_state=3, max_target_rank=8)
    every_row = B.target_factor(B.factor(np.ones(d), d))
    distinct = B.target_weights(np.ones(d), d)
    assert distinct.norm == pytest.approx(every_row.norm, rel=1e-10)
    np.testing.assert_allclose(distinct.data @ distinct.data.T, every_row.data @ every_row.data.T, atol=1e-9 * every_row.norm)
    np.testing.assert_allclose(distinct.summed @ distinct.summed.T, every_row.summed @ every_row.summed.T, atol=1e-9 * every_row.norm * 70)


def test_linear_closed_form_is_the_definition():
    X, Y, rng = _problem(4)
    d = X.shape[1]
    w, v = rng.uniform(0.1, 1.0, size=d), rng.uniform(0.1, 1.0, size=d)
    B = Linear(X)
    _, _, (a, b) = B.value_grad(w, 1.0, np.zeros(2), [B.target_weights(v, 1.0), B.target_factor(Y)], gradient=False)
    K_w = X @ np.diag(w) @ X.T
    assert a == pytest.approx(_centred_alignment(K_w, X @ np.diag(v) @ X.T), rel=1e-10)
    assert b == pytest.approx(_centred_alignment(K_w, Y @ Y.T), rel=1e-10)


def test_nystroem_with_every_row_as_landmark_is_exact():
    X, Y, rng = _problem(5, n=30)
    d = X.shape[1]
    w = rng.uniform(0.1, 1.0, size=d)
    exact, approx = ExactRBF(X, 0.2), NystroemRBF(X, 0.2, n_landmarks=30, random_state=0, jitter=1e-13)
    results = []
    for B in (exact, approx):
        targets = [B.target_weights(np.ones(d), d), B.target_factor(Y)]
        results.append(B.value_grad(w, 2.0, np.array([1.0, -1.0]), targets))
    assert results[1][0] == pytest.approx(results[0][0], abs=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], atol=1e-5)


@pytest.mark.parametrize("seed", range(5))
def test_capped_simplex_projection_matches_cvxpy(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(3, 12))
    v = rng.normal(scale=2.0, size=d)
    total = float(rng.uniform(0.5, d - 0.5))
    w = cp.Variable(d)
    cp.Problem(cp.Minimize(cp.sum_squares(w - v)), [w >= 0, w <= 1, cp.sum(w) == total]).solve(solver=cp.CLARABEL)
    ours = project_capped_simplex(v, total)
    np.testing.assert_allclose(ours, w.value, atol=1e-6)
    assert ours.sum() == pytest.approx(total, abs=1e-9)


def planted_proxies(seed: int = 0, n: int = 240):
    """Eight informative columns (three clusters, independent of the group) followed by three noisy
    copies of a binary protected attribute, which have the largest variance and the clearest
    two-cluster structure of all columns."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 2, size=n)
    centres = rng.normal(scale=0.35, size=(3, 8))
    clusters = rng.integers(0, 3, size=n)
    informative = centres[clusters] + rng.normal(scale=0.15, size=(n, 8))
    proxies = group[:, None] + rng.normal(scale=0.1, size=(n, 3))
    return np.hstack([informative, proxies]), group


@pytest.mark.parametrize("formulation", ["paper", "alignment"])
def test_fufs_ranks_planted_proxies_last_while_unfair_baselines_rank_them_first(formulation):
    X, group = planted_proxies()
    proxies = np.arange(8, 11)
    fufs = FUFS(n_features_to_select=4, formulation=formulation, n_sensitive_features=3, random_state=0)
    fufs.fit(X, sensitive_features=group)
    assert set(fufs.ranking_[proxies]) == {9, 10, 11}
    assert not fufs.get_support()[proxies].any()
    if formulation == "alignment":
        assert set(np.flatnonzero(fufs.sensitive_support_)) == set(proxies)
        assert fufs.alignments_["protected"] < 0.05
    else:  # the decomposition indicator g puts the proxies first (Table 6's comparison)
        assert set(np.argsort(-fufs.sensitive_scores_)[:3]) == set(proxies)
    for baseline in (VarianceSelector(4), LaplacianScore(4)):
        baseline.fit(X)
        assert set(baseline.ranking_[proxies]) == {1, 2, 3}, type(baseline).__name__


def test_objective_never_decreases_and_weights_stay_feasible():
    X, group = planted_proxies(seed=1)
    fufs = FUFS(n_features_to_select=5, formulation="alignment", random_state=0).fit(X, sensitive_features=group)
    assert np.all(np.diff(fufs.objective_history_) >= -1e-12)
    assert fufs.scores_.min() >= 0 and fufs.scores_.max() <= 1
    assert fufs.scores_.sum() == pytest.approx(5)
    assert fufs.sensitive_scores_.sum() == pytest.approx(fufs.sensitive_support_.sum())
    assert sorted(fufs.ranking_) == list(range(1, X.shape[1] + 1))


def test_fixed_learning_rate_schedule_and_linear_kernel():
    X, group = planted_proxies(seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fixed = FUFS(4, formulation="alignment", learning_rate=0.05, lr_decay=0.01, max_iter=400).fit(X, sensitive_features=group)
    assert not fixed.get_support()[8:].any()
    linear = FUFS(4, formulation="alignment", kernel="linear").fit(X, sensitive_features=group)
    assert linear.approximation_ == "linear kernel (closed form)"
    assert not linear.get_support()[8:].any()


def test_nystroem_is_used_above_the_row_threshold_and_agrees_on_planted_data():
    X, group = planted_proxies(seed=3, n=400)
    exact = FUFS(4, formulation="alignment", random_state=0).fit(X, sensitive_features=group)
    approx = FUFS(4, formulation="alignment", exact_max_rows=100, n_landmarks=120, random_state=0).fit(X, sensitive_features=group)
    assert exact.approximation_.startswith("exact")
    assert approx.approximation_.startswith("Nyström")
    assert not approx.get_support()[8:].any()
    assert (exact.get_support() & approx.get_support()).sum() >= 3


def test_precomputed_proxies_give_the_same_selection():
    X, group = planted_proxies(seed=5)
    first = FUFS(4, formulation="alignment", n_sensitive_features=3).fit(X, sensitive_features=group)
    again = FUFS(4, formulation="alignment", n_sensitive_features=3, proxies=first.sensitive_support_).fit(X, sensitive_features=group)
    np.testing.assert_array_equal(again.get_support(), first.get_support())
    np.testing.assert_allclose(again.objective_history_, first.objective_history_)
    assert again.sensitive_objective_history_.size == 0
    with pytest.raises(ParameterError, match="proxies"):
        FUFS(4, formulation="alignment", proxies=[0, 1]).fit(X, sensitive_features=group)


def test_swap_refinement_never_loses_objective():
    rng = np.random.default_rng(6)
    X = (rng.random((120, 40)) < 0.15).astype(float)  # sparse binary columns, as the google data
    group = rng.integers(0, 2, size=120)
    X[:, 0] = group * (rng.random(120) < 0.8)
    refined = FUFS(10, formulation="alignment", random_state=0).fit(X, sensitive_features=group)
    plain = FUFS(10, formulation="alignment", refine=False, random_state=0).fit(X, sensitive_features=group)
    assert refined.binary_objective_ >= refined.rounded_objective_
    assert plain.binary_objective_ == plain.rounded_objective_ and plain.n_swaps_ == 0
    assert refined.rounded_objective_ == pytest.approx(plain.binary_objective_)
    assert refined.get_support().sum() == 10
    assert set(refined.ranking_[refined.get_support()]) == set(range(1, 11))


@pytest.mark.parametrize("formulation", ["paper", "alignment"])
def test_max_iter_cap_warns(formulation):
    X, group = planted_proxies(seed=4)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        fitted = FUFS(4, formulation=formulation, max_iter=2).fit(X, sensitive_features=group)
    assert fitted.converged_ is False and fitted.n_iter_ == 2


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"n_features_to_select": 12}, RankError, "n_features_to_select=12"),
        ({"n_features_to_select": 0}, RankError, "at least 1"),
        ({"alpha": -1.0}, ParameterError, "alpha"),
        ({"n_sensitive_features": 20}, ParameterError, "n_sensitive_features"),
        ({"kernel": "poly"}, ParameterError, "kernel"),
        ({"gamma": -2.0}, ParameterError, "gamma"),
        ({"learning_rate": 0.0}, ParameterError, "learning_rate"),
        ({"approximation": "rff"}, ParameterError, "approximation"),
        ({"approximation": "nystroem"}, ParameterError, "formulation='paper'"),
        ({"formulation": "alignment", "approximation": "sample"}, ParameterError, "formulation='alignment'"),
        ({"formulation": "normalised"}, ParameterError, "formulation"),
        ({"beta": -0.5}, ParameterError, "beta"),
        ({"init": "zeros"}, ParameterError, "init"),
        ({"gamma_protected": 0.0}, ParameterError, "gamma_protected"),
        ({"exact_max_rows": 1}, ParameterError, "exact_max_rows"),
    ],
)
def test_bad_parameters_raise_a_specific_message(params, error, match):
    X, group = planted_proxies()
    params = {"n_features_to_select": 3, **params}
    with pytest.raises(error, match=match):
        FUFS(**params).fit(X, sensitive_features=group)


def test_groups_are_required_and_checked():
    X, group = planted_proxies()
    for given in ({}, {"sensitive_features": None}):  # required, and None refused, saying how a pipeline routes it
        with pytest.raises(FairAuditError, match="sensitive_features is required.*set_fit_request"):
            FUFS(3).fit(X, **given)
    with pytest.raises(FairAuditError, match="rows"):
        FUFS(3).fit(X, sensitive_features=group[:-1])
