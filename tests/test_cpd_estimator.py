"""FairCPD: gradients, reduction to plain CP (tensorly as the independent reference), Theorem 1."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from fairaudit import FairAuditError, FairCPD, kernels, metrics
from fairaudit.cpd import _kernels, _tensor
from fairaudit.cpd.estimator import FORMULATIONS, normalised_embedding
from fairaudit.cpd.metrics import nkhsic, orthogonality, penalty
from fairaudit.errors import ParameterError, RankError

tl = pytest.importorskip("tensorly")
from tensorly.decomposition import parafac  # noqa: E402


def Ours(**params):
    """FairCPD with our formulation (the CP audit's default), which these tests check."""
    return FairCPD(**{**FORMULATIONS["fairaudit"], **params})



def low_rank(shape, rank, seed):
    rng = np.random.default_rng(seed)
    factors = [rng.normal(size=(d, rank)) for d in shape]
    return _tensor.reconstruct(factors), factors


def theorem1_tensor(n_per=60, rank=3, noise=0.01, seed=1):
    """Kim & Gittens' Theorem 1 situation: AᵀS = 0 exactly, yet the groups are separable —
    group 0's embedding rows lie on the sphere of radius 1, group 1's on radius 3, each group
    symmetric (a, −a) so that every column sums to zero within each group."""
    rng = np.random.default_rng(seed)
    blocks = []
    for radius in (1.0, 3.0):
        d = rng.normal(size=(n_per // 2, rank))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        blocks.append(np.vstack([radius * d, -radius * d]))
    A = np.vstack(blocks)
    groups = np.repeat([0, 1], n_per)
    X = _tensor.reconstruct([A, rng.normal(size=(8, rank)), rng.normal(size=(6, rank))])
    X += noise * np.sqrt(np.mean(X**2)) * rng.normal(size=X.shape)
    return X, groups, A


# ---------------------------------------------------------------- kernels and gradients
def test_khsic_equals_trace_formula_and_any_rbf_kernel_on_groups():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(25, 3))
    groups = rng.integers(0, 3, size=25)
    S = _kernels.one_hot(groups)
    gamma = 0.3
    n = len(A)
    H = np.eye(n) - 1.0 / n
    K = np.exp(-gamma * ((A[:, None, :] - A[None, :, :]) ** 2).sum(-1))
    expected = np.trace(K @ H @ S @ S.T @ H) / n**2
    assert _kernels.khsic(A, _kernels.centred(S), gamma) == pytest.approx(expected, rel=1e-12)
    # An RBF kernel on the one-hot rows gives the same centred kernel up to (1 − e^{−2γ_S}).
    for gamma_s in (0.1, 1.0, 5.0):
        L = np.exp(-gamma_s * ((S[:, None, :] - S[None, :, :]) ** 2).sum(-1))
        rbf = np.trace(K @ H @ L @ H) / n**2
        assert rbf == pytest.approx((1 - np.exp(-2 * gamma_s)) * expected, rel=1e-10)


def test_block_computation_matches_single_block(monkeypatch):
    rng = np.random.default_rng(1)
    A, St = rng.normal(size=(40, 4)), _kernels.centred(_kernels.one_hot(rng.integers(0, 2, 40)))
    value, grad = _kernels.khsic(A, St, 0.2, gradient=True)
    monkeypatch.setattr(kernels, "BLOCK_BYTES", 8 * 40 * 3)  # 3 rows per block
    value_b, grad_b = _kernels.khsic(A, St, 0.2, gradient=True)
    assert value_b == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(grad_b, grad, rtol=1e-11, atol=1e-14)


def _fitted_shell(method, groups, gamma=0.25, l2=0.0):
    return Ours(method=method, lam=1.0, l2=l2)._bind_groups(groups, gamma=gamma)


@pytest.mark.parametrize("method", ["khsic", "hsic", "fatr"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_penalty_gradient_matches_finite_differences(method, seed):
    """The analytic gradient of the normalised penalty (chain rule through Â) vs central differences."""
    rng = np.random.default_rng(seed)
    n, rank = 14, 3
    A = rng.normal(size=(n, rank)) * rng.uniform(0.5, 3.0, size=rank)
    groups = np.arange(n) % 3
    model = _fitted_shell(method, groups)
    _, grad = model._penalty(A, gradient=True)
    step = 1e-6
    numeric = np.zeros_like(A)
    for i in range(n):
        for r in range(rank):
            E = np.zeros_like(A)
            E[i, r] = step
            numeric[i, r] = (model._penalty(A + E) - model._penalty(A - E)) / (2 * step)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7 * np.abs(numeric).max())


def test_raw_kernel_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(12, 2))
    S = _kernels.one_hot(np.arange(12) % 2)
    St = _kernels.centred(S)
    for function in (
        lambda Z, g=False: _kernels.khsic(Z, St, 0.4, gradient=g),
        lambda Z, g=False: _kernels.hsic_linear(Z, St, gradient=g),
        lambda Z, g=False: _kernels.orthogonality_sq(Z, S, gradient=g),
    ):
        _, grad = function(A, True)
        numeric = np.zeros_like(A)
        for index in np.ndindex(A.shape):
            E = np.zeros_like(A)
            E[index] = 1e-6
            numeric[index] = (function(A + E) - function(A - E)) / 2e-6
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_penalties_ignore_cp_scaling_freedom():
    """Rescaling A's columns (and the other factors inversely) is the same model: same penalty."""
    rng = np.random.default_rng(4)
    A = rng.normal(size=(30, 3))
    groups = np.arange(30) % 2
    D = np.array([0.01, 7.0, 300.0])
    for method in ("khsic", "hsic", "fatr"):
        assert penalty(A * D, groups, method, 0.3) == pytest.approx(penalty(A, groups, method, 0.3), rel=1e-10)
    assert orthogonality(normalised_embedding(A * D), groups) == pytest.approx(orthogonality(normalised_embedding(A), groups))


# ---------------------------------------------------------------- reduction to plain CP
@pytest.mark.parametrize("shape, rank", [((30, 8, 7), 3), ((12, 5, 4, 3), 2), ((40, 9), 4)])
@pytest.mark.parametrize("method", ["none", "fatr", "hsic", "khsic"])
def test_lambda_zero_is_plain_cp_and_reaches_tensorly(shape, rank, method):
    X, _ = low_rank(shape, rank, seed=sum(shape))
    groups = np.arange(shape[0]) % 2
    reference = parafac(tl.tensor(X), rank, init="random", random_state=0, n_iter_max=3000, tol=1e-14)
    tl_fit = np.linalg.norm(X - tl.cp_to_tensor(reference)) / np.linalg.norm(X)
    model = Ours(rank=rank, method=method, lam=0.0, n_epochs=3000, tol=1e-14, random_state=0).fit(
        X, sensitive_features=groups
    )
    assert model.residual_fit_ <= max(tl_fit, 1e-7) + 1e-7
    assert model.residual_fit_ < 1e-6  # noiseless low rank: both recover it
    # Same model as tensorly's up to permutation and scaling: ours reconstructs tensorly's tensor.
    np.testing.assert_allclose(_tensor.reconstruct(model.factors_), tl.cp_to_tensor(reference), atol=1e-5 * np.abs(X).max())


def test_lambda_zero_equals_als_for_every_method_on_noisy_data():
    X, _ = low_rank((20, 6, 5), 2, seed=9)
    X = X + 0.05 * np.random.default_rng(0).normal(size=X.shape)
    groups = np.arange(20) % 2
    als = Ours(rank=2, method="none", lam=0.0, n_epochs=50, tol=0).fit(X, sensitive_features=groups)
    for method in ("fatr", "hsic", "khsic"):
        model = Ours(rank=2, method=method, lam=0.0, n_epochs=50, tol=0).fit(X, sensitive_features=groups)
        assert model.residual_fit_ == pytest.approx(als.residual_fit_, rel=1e-9)
    # and a tiny λ (the gradient A-step) stays next to it: one preconditioned unit step is ALS
    tiny = Ours(rank=2, method="khsic", lam=1e-9, n_epochs=50, tol=0).fit(X, sensitive_features=groups)
    assert tiny.residual_fit_ == pytest.approx(als.residual_fit_, rel=1e-6)


def test_noisy_fit_close_to_tensorly_and_objective_decreases():
    X, _ = low_rank((40, 10, 8), 4, seed=5)
    X = X + 0.2 * np.sqrt(np.mean(X**2)) * np.random.default_rng(1).normal(size=X.shape)
    groups = np.arange(40) % 2
    reference = parafac(tl.tensor(X), 3, init="svd", n_iter_max=2000, tol=1e-12)
    tl_fit = np.linalg.norm(X - tl.cp_to_tensor(reference)) / np.linalg.norm(X)
    vanilla = Ours(rank=3, method="none", n_epochs=2000, tol=1e-12).fit(X, sensitive_features=groups)
    assert vanilla.residual_fit_ <= tl_fit + 1e-4
    fair = Ours(rank=3, method="khsic", lam=50.0, init=vanilla.factors_, n_epochs=60, tol=0).fit(X, sensitive_features=groups)
    objective = fair.history_.objective.to_numpy()
    assert np.all(np.diff(objective) <= 1e-10 * objective[0])  # block coordinate descent is monotone
    assert fair.penalty_ < penalty(vanilla.factors_[0], groups, "khsic", fair.gamma_)


# ---------------------------------------------------------------- Theorem 1 (Figs. 1a/1b)
def test_theorem1_fatr_orthogonal_yet_separable_and_khsic_removes_it():
    X, groups, A_true = theorem1_tensor()
    assert np.abs(A_true.T @ _kernels.one_hot(groups)).max() < 1e-12  # AᵀS = 0 by construction
    score = lambda model: metrics.unfairness(model.embedding_, groups, classifier="qda")  # noqa: E731
    vanilla = Ours(rank=3, method="none").fit(X, sensitive_features=groups)
    assert score(vanilla) == pytest.approx(0.5)  # perfectly separable from the embedding
    fatr = Ours(rank=3, method="fatr", lam=1e4, init=vanilla.factors_).fit(X, sensitive_features=groups)
    assert orthogonality(fatr.embedding_, groups) < 1e-6 * np.sqrt(len(groups))
    assert fatr.residual_fit_ == pytest.approx(vanilla.residual_fit_, abs=1e-3)
    assert score(fatr) >= 0.45  # orthogonal, still perfectly predictable (Theorem 1)
    leak, dependence = [], []
    for lam in (0.0, 30.0, 150.0, 600.0):
        model = Ours(rank=3, method="khsic", lam=lam, init=vanilla.factors_, n_epochs=150).fit(X, sensitive_features=groups)
        leak.append(score(model))
        dependence.append(nkhsic(model.embedding_, groups))
    assert leak[0] == pytest.approx(0.5)
    assert leak[-1] <= 0.15  # KHSIC-BCD drives unfairness down as λ grows
    assert all(b <= a + 1e-9 for a, b in zip(dependence, dependence[1:], strict=False))
    assert dependence[-1] < 0.05 * dependence[0]


# ---------------------------------------------------------------- estimator contract
def test_estimator_contract_and_transform():
    X, _ = low_rank((24, 5, 4), 2, seed=11)
    groups = np.repeat(["a", "b"], 12)
    model = Ours(rank=2, method="hsic", lam=1.0, random_state=0)
    assert clone(model).get_params() == model.get_params()
    Z = model.fit_transform(X, sensitive_features=groups)
    np.testing.assert_array_equal(Z, model.factors_[0])
    assert model.group_labels_ == ("a", "b")
    assert [F.shape for F in model.factors_] == [(24, 2), (5, 2), (4, 2)]
    np.testing.assert_allclose(np.linalg.norm(model.factors_[1], axis=0), 1.0)
    np.testing.assert_allclose(np.mean(model.embedding_**2, axis=0), 1.0)
    plain = Ours(rank=2, method="none").fit(X, sensitive_features=groups)
    np.testing.assert_allclose(plain.transform(X), plain.factors_[0], rtol=1e-6, atol=1e-8)
    assert set(model.history_.columns) == {"epoch", "objective", "fit", "penalty", "residual_fit"}
    assert model.group_residual_fit_.shape == (2,)


def test_gradient_steps_on_the_normalised_embedding():
    """Algorithm 1's fixed steps (``solver="bcd"``) with our normalised embedding: a combination of
    options that runs and lowers the penalty from vanilla's."""
    X, groups, _ = theorem1_tensor(n_per=20)
    vanilla = Ours(rank=3, method="none").fit(X, sensitive_features=groups)
    model = Ours(
        rank=3, method="khsic", lam=100.0, solver="bcd", learning_rate=1e-3, learning_rate_others=1e-3, inner_steps=20,
        init=vanilla.factors_, n_epochs=30,
    ).fit(X, sensitive_features=groups)
    assert np.isfinite(model.objective_) and model.learning_rate_ == 1e-3 and model.inner_steps_ == 20
    assert model.penalty_ < penalty(vanilla.factors_[0], groups, "khsic", model.gamma_)


@pytest.mark.parametrize(
    "params, X, message",
    [
        ({"method": "pca"}, np.ones((4, 3, 2)), "method must be one of"),
        ({"lam": -1.0}, np.ones((4, 3, 2)), "lam must be"),
        ({"n_epochs": 0}, np.ones((4, 3, 2)), "n_epochs"),
        ({"gamma": "auto"}, np.ones((4, 3, 2)), "gamma"),
        ({"learning_rate": -1.0}, np.ones((4, 3, 2)), "learning_rate"),
        ({"solver": "adam"}, np.ones((4, 3, 2)), "solver must be one of"),
        ({"embedding": "raw"}, np.ones((4, 3, 2)), "embedding must be one of"),
        ({"inner_steps": 0}, np.ones((4, 3, 2)), "inner_steps"),
        ({"learning_rate_others": 0.0}, np.ones((4, 3, 2)), "learning_rate_others"),
        ({"init": "nope"}, np.ones((4, 3, 2)), "init must be"),
        ({}, np.ones(4), "at least two modes"),
        ({}, np.full((4, 3), np.nan), "missing or infinite"),
    ],
)
def test_bad_parameters_raise_specific_errors(params, X, message):
    with pytest.raises(FairAuditError, match=message):
        Ours(rank=1, **params).fit(X, sensitive_features=[0, 0, 1, 1])


def test_rank_limit_and_groups_checked():
    with pytest.raises(RankError, match="largest useful CP rank"):
        Ours(rank=5).fit(np.ones((4, 2)), sensitive_features=[0, 0, 1, 1])
    with pytest.raises(FairAuditError, match="single group"):
        Ours(rank=1).fit(np.ones((4, 2)), sensitive_features=[0, 0, 0, 0])
    with pytest.raises(ParameterError, match="init factors"):
        Ours(rank=1, init=[np.ones((3, 1)), np.ones((2, 1))]).fit(np.ones((4, 2)), sensitive_features=[0, 0, 1, 1])
