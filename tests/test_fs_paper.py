"""FUFS as printed ([Xing21] eq. 6): the objective against a direct evaluation of the paper's
formulas, its gradient against finite differences, and the properties of the fit (box, monotone
objective, a ranking that does not depend on k, row sampling)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from fairaudit import FUFS
from fairaudit.fs._paper import LinearPaperObjective, PaperObjective, minimise_box, protected_matrix, scale_gamma
from fairaudit.fs.fufs import stratified_rows


def _data(seed: int, n: int = 30, d: int = 5, k: int = 2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d)) * rng.uniform(0.5, 2.0, size=d)
    codes = rng.integers(0, k, size=n)
    codes[:k] = np.arange(k)
    return X, codes, rng


def reference_objective(X, codes, k, m, g, *, alpha, beta, gamma, gamma_p, kernel="rbf"):
    """Eq. (6) written out as printed: M = diag(m)X, G = diag(g)(I − diag(m))X (eq. 3, columns =
    samples), kernels from their definition, H = I − 11ᵀ/n, the traces of eqs. (1), (2), (4)."""
    Xt = X.T  # the paper's d × n
    M = np.diag(m) @ Xt
    G = np.diag(g) @ (np.eye(len(m)) - np.diag(m)) @ Xt
    P = protected_matrix(codes, k).T
    n = X.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n

    def kern(A, gam):
        if kernel == "linear":
            return A.T @ A
        return np.exp(-gam * cdist(A.T, A.T, "sqeuclidean"))

    K, KM, KG, KP = kern(Xt, gamma), kern(M, gamma), kern(G, gamma), kern(P, gamma_p)
    return (
        -np.trace(H @ K @ H @ KM)
        + alpha * np.trace(H @ KM @ H @ KP)
        - alpha * np.trace(H @ KG @ H @ KP)
        + beta * (np.abs(m).sum() + np.abs(g).sum())
    )


@pytest.mark.parametrize("k", [2, 3])
def test_repeated_rows_count_as_often_as_they_occur(k):
    """A bootstrap resample repeats rows; the objective keeps each distinct (row, group) once with
    its count and is still eq. (6) of all the rows — also where a row repeats with another group."""
    X, codes, rng = _data(7, n=40, k=k)
    rows = np.sort(rng.integers(0, 40, size=40))
    X, codes = X[rows], codes[rows]
    X[-1], codes[-1] = X[0], (codes[0] + 1) % k  # the same row in another group
    d = X.shape[1]
    objective = PaperObjective(X, protected_matrix(codes, k), alpha=1.3, beta=0.2, gamma=scale_gamma(X), gamma_protected=0.7)
    assert objective.X.shape[0] < 40
    for _ in range(3):
        m, g = rng.uniform(size=d), rng.uniform(size=d)
        expected = reference_objective(X, codes, k, m, g, alpha=1.3, beta=0.2, gamma=scale_gamma(X), gamma_p=0.7)
        value, grad = objective.value_grad(np.concatenate([m, g]))
        assert value == pytest.approx(expected, rel=1e-10)
        step = 1e-6
        for j in (0, d + 1):
            z = np.concatenate([m, g])
            z[j] += step
            high = objective.value_grad(z)[0]
            z[j] -= 2 * step
            assert grad[j] == pytest.approx((high - objective.value_grad(z)[0]) / (2 * step), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_objective_is_equation_6(seed, k):
    X, codes, rng = _data(seed, k=k)
    d = X.shape[1]
    m, g = rng.uniform(size=d), rng.uniform(size=d)
    alpha, beta = rng.uniform(0.1, 3.0), rng.uniform(0.0, 2.0)
    gamma, gamma_p = scale_gamma(X), 0.7
    objective = PaperObjective(X, protected_matrix(codes, k), alpha=alpha, beta=beta, gamma=gamma, gamma_protected=gamma_p)
    expected = reference_objective(X, codes, k, m, g, alpha=alpha, beta=beta, gamma=gamma, gamma_p=gamma_p)
    assert objective.value_grad(np.concatenate([m, g]))[0] == pytest.approx(expected, rel=1e-10)
    assert objective.value(m, g) == pytest.approx(expected, rel=1e-10)
    linear = LinearPaperObjective(X, protected_matrix(codes, k), alpha=alpha, beta=beta)
    expected_linear = reference_objective(X, codes, k, m, g, alpha=alpha, beta=beta, gamma=gamma, gamma_p=gamma_p, kernel="linear")
    assert linear.value_grad(np.concatenate([m, g]))[0] == pytest.approx(expected_linear, rel=1e-10)


def test_two_group_protected_matrix_is_the_indicator_column():
    codes = np.array([0, 1, 1, 0])
    np.testing.assert_array_equal(protected_matrix(codes, 2), [[0.0], [1.0], [1.0], [0.0]])
    three = protected_matrix(np.array([0, 1, 2]), 3)
    np.testing.assert_allclose(cdist(three, three, "sqeuclidean"), 1.0 - np.eye(3))


@pytest.mark.parametrize("kind", ["rbf", "linear"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_matches_finite_differences(kind, seed):
    X, codes, rng = _data(seed, k=2 + seed % 2)
    k = int(codes.max()) + 1
    d = X.shape[1]
    P = protected_matrix(codes, k)
    alpha, beta = rng.uniform(0.1, 3.0), rng.uniform(0.0, 1.0)
    if kind == "rbf":
        objective = PaperObjective(X, P, alpha=alpha, beta=beta, gamma=scale_gamma(X), gamma_protected=1.3, scale=1.7)
    else:
        objective = LinearPaperObjective(X, P, alpha=alpha, beta=beta)
    z = rng.uniform(0.05, 0.95, size=2 * d)
    _, grad = objective.value_grad(z)
    step = 1e-6
    numeric = np.array(
        [(objective.value_grad(z + step * e)[0] - objective.value_grad(z - step * e)[0]) / (2 * step) for e in np.eye(2 * d)]
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-7 * np.abs(numeric).max())


def test_box_minimiser_is_monotone_and_feasible_and_stops_by_the_papers_rule():
    X, codes, _ = _data(3, n=60, d=8)
    objective = PaperObjective(X, protected_matrix(codes, 2), alpha=1.0, beta=0.1, gamma=scale_gamma(X), gamma_protected=1.0)
    z, _, history, iterations, converged = minimise_box(objective.value_grad, np.full(16, 0.5), max_iter=500, tol=1e-9, learning_rate="auto")
    assert converged and iterations < 500
    assert np.all(np.diff(history) <= 1e-9 * np.abs(history[:-1]))
    assert z.min() >= 0.0 and z.max() <= 1.0
    # a fixed step is eq. (7) literally: z ← clip(z − η ∇L)
    start = np.full(16, 0.5)
    value, grad = objective.value_grad(start)
    z1, *_ = minimise_box(objective.value_grad, start, max_iter=1, tol=0.0, learning_rate=1e-3)
    np.testing.assert_allclose(z1, np.clip(start - 1e-3 * grad, 0, 1))


def test_ranking_does_not_depend_on_k_and_ties_follow_the_gradient():
    X, codes, _ = _data(4, n=80, d=10)
    fits = [FUFS(k, random_state=0).fit(X, sensitive_features=codes) for k in (2, 5, 8)]
    for fit in fits[1:]:
        np.testing.assert_array_equal(fit.ranking_, fits[0].ranking_)
        np.testing.assert_allclose(fit.scores_, fits[0].scores_)
    first = fits[0]
    assert first.support_.sum() == 2
    assert np.all(np.diff(first.scores_[np.argsort(first.ranking_)]) <= 1e-12)  # ranked by m
    assert set(first.traces_) == {"data", "protected", "proxies"}
    assert first.objective_history_[-1] <= first.objective_history_[0]


def test_large_beta_drives_every_indicator_to_zero():
    X, codes, _ = _data(5, n=50, d=6)
    fit = FUFS(3, beta=1e6).fit(X, sensitive_features=codes)
    assert np.all(fit.scores_ == 0) and np.all(fit.sensitive_scores_ == 0)
    assert fit.support_.sum() == 3  # ties are broken by the gradient, the selection stays of size k


def test_row_sample_is_stratified_and_rescales_the_traces():
    rng = np.random.default_rng(0)
    codes = np.repeat([0, 1, 2], [70, 20, 10])
    rows = stratified_rows(codes, 50, rng)
    assert rows.size == 50 and np.array_equal(np.bincount(codes[rows]), [35, 10, 5])
    X, codes, _ = _data(6, n=120, d=5)
    full = FUFS(2, random_state=0).fit(X, sensitive_features=codes)
    everything = FUFS(2, approximation="sample", exact_max_rows=120, random_state=0).fit(X, sensitive_features=codes)
    np.testing.assert_allclose(everything.scores_, full.scores_)
    sampled = FUFS(2, exact_max_rows=60, random_state=0).fit(X, sensitive_features=codes)
    assert "stratified sample of 60 of 120 rows" in sampled.approximation_
    assert full.approximation_ == "exact RBF kernels (120×120)"
    # the rescaled traces estimate the full data's: same order of magnitude at the full solution
    objective = PaperObjective(X, protected_matrix(codes, 2), alpha=1.0, beta=0.1, gamma=full.gamma_, gamma_protected=full.gamma_protected_)
    rows = stratified_rows(codes, 60, np.random.default_rng(0))
    half = PaperObjective(X[rows], protected_matrix(codes[rows], 2), alpha=1.0, beta=0.1, gamma=full.gamma_,
                          gamma_protected=full.gamma_protected_, scale=4.0)
    m, g = full.scores_, full.sensitive_scores_
    assert half.parts(m, g)["data"] == pytest.approx(objective.parts(m, g)["data"], rel=0.3)


def test_random_init_is_seeded():
    X, codes, _ = _data(7, n=40, d=6)
    a = FUFS(3, init="random", random_state=1).fit(X, sensitive_features=codes)
    b = FUFS(3, init="random", random_state=1).fit(X, sensitive_features=codes)
    np.testing.assert_array_equal(a.scores_, b.scores_)


def test_kernel_sums_of_several_targets_are_those_of_one_pass_each():
    """One pass over a kernel for several Frobenius products (FUFS's traces and curvature) gives
    the values and gradient of one :func:`kernel_terms` pass per target, bit for bit."""
    from fairaudit.fs._paper import kernel_sums, kernel_terms

    X, codes, rng = _data(4, n=300, d=6)
    sq = X * X
    w = rng.uniform(size=6)
    targets = [rng.normal(size=(300, 300)) for _ in range(3)]
    targets = [t + t.T for t in targets]
    values, grad = kernel_sums(X, sq, w, 0.7, targets[:2], targets[2])
    assert values == [kernel_terms(X, sq, w, 0.7, t, gradient=False)[0] for t in targets[:2]]
    np.testing.assert_array_equal(grad, kernel_terms(X, sq, w, 0.7, targets[2])[1])
    values, grad = kernel_sums(X, sq, w, 0.7, targets)
    assert grad is None and values == [kernel_terms(X, sq, w, 0.7, t, gradient=False)[0] for t in targets]
    objective = PaperObjective(X, protected_matrix(codes, 2), alpha=1.0, beta=0.1, gamma=0.5, gamma_protected=1.0)
    m, g = rng.uniform(size=6), rng.uniform(size=6)
    parts, curvature = objective.parts_and_curvature(m, g)
    assert parts == objective.parts(m, g)
    np.testing.assert_array_equal(curvature, objective.selection_curvature(m))
