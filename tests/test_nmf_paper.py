"""The paper's pieces against straightforward reference implementations written from the text.

Kassab, George, Needell et al., "Towards a Fairer Non-negative Matrix Factorization": standard
multiplicative updates (§3.2), eq. (10)'s stopping rule, Algorithm 1 (E_ℓ), Algorithm 3 (MU
Fairer-NMF, with X̃ and W̃ built literally as printed), the H-step objectives (8)/(9) against
finite differences, the monotone steps, and the exact NNLS of Algorithm 2's W-step. Each
reference below is the printed algorithm written the obvious way (full matrices, direct norms,
no reuse of products), so that an optimisation in the package cannot drift from the paper.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import nnls
from sklearn.exceptions import ConvergenceWarning

from fairaudit import NMF, FairerNMF
from fairaudit.nmf import GroupedData, estimate_group_errors
from fairaudit.nmf._am import nnls_rows
from fairaudit.nmf._core import StoppingRule, mu_update_W, relative_change
from fairaudit.nmf.fair import h_step_weights, mu_update_H


# ============================================================================ references
def eq10_met(errors, previous, tol=1e-4) -> bool:
    """Eq. (10) as printed: max_ℓ |e_ℓ^(k) − e_ℓ^(k−1)| / e_ℓ^(k) < tol."""
    return max(abs(e - p) / e for e, p in zip(errors, previous, strict=True)) < tol


def reference_standard_mu(X, W, H, tol=1e-4, max_iter=20000):
    """§3.2: W ← W ⊙ XHᵀ/(WHHᵀ), then H ← H ⊙ WᵀX/(WᵀWH); stop by eq. (10) (one group: X)."""
    W, H = W.copy(), H.copy()
    previous = np.linalg.norm(X - W @ H)
    for k in range(1, max_iter + 1):
        W = W * (X @ H.T) / (W @ H @ H.T)
        H = H * (W.T @ X) / (W.T @ W @ H)
        error = np.linalg.norm(X - W @ H)
        if eq10_met([error], [previous], tol):
            return W, H, k
        previous = error
    return W, H, max_iter


def uniform_start(X, r, rng):
    """The package's random start (uniform, scaled so that mean(WH) = mean(X))."""
    scale = 2.0 * np.sqrt(X.mean() / r)
    return scale * rng.uniform(size=(X.shape[0], r)), scale * rng.uniform(size=(r, X.shape[1]))


def reference_algorithm_1(blocks, r, T, seed):
    """Algorithm 1: E_ℓ = mean over T runs of ‖X_ℓ − W_ℓH_ℓ‖ (standard NMF of group ℓ alone)."""
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(len(blocks))]
    E = []
    for block, rng in zip(blocks, rngs, strict=True):
        errors = []
        for _ in range(T):
            W, H = uniform_start(block, r, rng)
            W, H, _ = reference_standard_mu(block, W, H)
            errors.append(np.linalg.norm(block - W @ H))
        E.append(np.mean(errors))
    return np.array(E)


def reference_algorithm_3(blocks, E, W_blocks, H, tol=1e-4, max_iter=5000, weights="squared"):
    """Algorithm 3 line by line; ``weights="gradient"`` is our variant (c starts at 1, rows of
    group ℓ scaled by sqrt(c_ℓ / (‖X_ℓ‖ ‖X_ℓ − W_ℓH‖)))."""
    X = np.vstack(blocks)
    W = np.vstack(W_blocks).copy()
    H = H.copy()
    bounds = np.cumsum([0] + [b.shape[0] for b in blocks])
    parts = lambda M: [M[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]  # noqa: E731
    norms = np.array([np.linalg.norm(b) for b in blocks])
    c = np.zeros(len(blocks)) if weights == "squared" else np.ones(len(blocks))  # line 3
    errors = np.array([np.linalg.norm(b - Wb @ H) for b, Wb in zip(blocks, parts(W), strict=True)])
    for k in range(1, max_iter + 1):
        worst = np.argmax((errors - E) / norms)  # line 7
        c[worst] += 1  # line 8
        if weights == "squared":
            scale = c / norms  # line 9
        else:
            scale = np.sqrt(c / (norms * errors))
        X_tilde = np.vstack([s * b for s, b in zip(scale, blocks, strict=True)])
        W_tilde = np.vstack([s * Wb for s, Wb in zip(scale, parts(W), strict=True)])
        H = H * (W_tilde.T @ X_tilde) / (W_tilde.T @ W_tilde @ H)  # line 10
        W = W * (X @ H.T) / (W @ H @ H.T)  # line 11
        new = np.array([np.linalg.norm(b - Wb @ H) for b, Wb in zip(blocks, parts(W), strict=True)])
        if eq10_met(new, errors, tol):
            return W, H, k
        errors = new
    return W, H, max_iter


def two_groups(seed=0, sizes=(40, 15), n=8, ranks=(2, 4), noise=0.05):
    rng = np.random.default_rng(seed)
    blocks = [rng.uniform(size=(m, q)) @ rng.uniform(size=(q, n)) + noise * rng.uniform(size=(m, n))
              for m, q in zip(sizes, ranks, strict=True)]
    labels = np.repeat(["a", "b"], sizes)
    return blocks, np.vstack(blocks), labels


# ============================================================================ eq. (10)
def test_stopping_rule_is_eq_10():
    """Every group must have settled, relative to its current error, within one iteration."""
    rule = StoppingRule(1e-4, 100, rule="eq10")
    rule.start([1.0, 2.0])
    assert not rule.done(1, errors=[0.9, 1.9], objective=0.0, scale=1.0)  # 11 % and 5 %
    assert not rule.done(2, errors=[0.89995, 1.8], objective=0.0, scale=1.0)  # 5.6e-5, but 5.6 %
    assert rule.done(3, errors=[0.89990, 1.79999], objective=0.0, scale=1.0)  # 5.6e-5 and 5.6e-6
    assert rule.converged
    capped = StoppingRule(1e-4, 2, rule="eq10")
    capped.start([1.0])
    assert not capped.done(1, errors=[0.5], objective=0.0, scale=1.0)
    assert capped.done(2, errors=[0.25], objective=0.0, scale=1.0) and not capped.converged
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        capped.warn_if_capped(2, 0.25)


def test_relative_change_matches_the_formula():
    rng = np.random.default_rng(0)
    for _ in range(50):
        e, p = rng.uniform(0.1, 1.0, 3), rng.uniform(0.1, 1.0, 3)
        assert relative_change(e, p) == pytest.approx(max(abs(e - p) / e), rel=1e-15)
        assert (relative_change(e, p) < 1e-4) == eq10_met(e, p)
    assert relative_change(np.array([0.0, 1.0]), np.array([0.0, 1.0])) == 0.0  # an exact group has not moved
    # one group's errors are compared as floats: the same numbers as the array form
    for e, p in [(0.7, 0.69), (0.3, 0.3), (0.0, 0.0), (0.0, 0.1), (1e-300, 2e-300)]:
        expected = relative_change(np.array([e, 1.0]), np.array([p, 1.0]))
        with np.errstate(divide="ignore"):
            assert relative_change(e, p) == expected
    assert relative_change(float("nan"), 0.5) != relative_change(float("nan"), 0.5)  # NaN stays NaN (never < tol)


# ============================================================================ standard NMF, Algorithm 1
@pytest.mark.parametrize("seed, r", [(0, 2), (1, 4), (2, 6)])
def test_standard_mu_is_section_3_2_with_eq_10(seed, r):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(30, 9)) ** 2
    W0, H0 = uniform_start(X, r, rng)
    W, H, k = reference_standard_mu(X, W0, H0)
    model = NMF(r).fit(X, W=W0, H=H0)
    assert model.n_iter_ == k and model.converged_
    np.testing.assert_allclose(model.W_, W, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.components_, H, rtol=1e-9, atol=1e-12)


def test_algorithm_1_is_the_mean_of_T_multiplicative_update_runs():
    blocks, X, labels = two_groups(seed=3)
    E, _ = estimate_group_errors(GroupedData.build(X, labels), 3, n_estimates=4, random_state=11)
    np.testing.assert_allclose(E, reference_algorithm_1(blocks, 3, 4, 11), rtol=1e-9)


# ============================================================================ Algorithm 3
@pytest.mark.parametrize("weights", ["squared", "gradient"])
@pytest.mark.parametrize("seed", [0, 1])
def test_algorithm_3_line_by_line(weights, seed):
    blocks, X, labels = two_groups(seed=seed)
    rng = np.random.default_rng(seed + 10)
    r = 3
    W0, H0 = uniform_start(X, r, rng)
    E = np.array([0.6, 0.8]) * np.array([np.linalg.norm(b - b.mean()) for b in blocks]) * 0.1
    W, H, k = reference_algorithm_3(blocks, E, [W0[:40], W0[40:]], H0, weights=weights)
    model = FairerNMF(r, init="custom", mu_weights=weights, estimates=E).fit(X, sensitive_features=labels, W=W0, H=H0)
    assert model.n_iter_ == k and model.converged_
    np.testing.assert_allclose(model.components_, H, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(model.W_, W, rtol=1e-8, atol=1e-12)
    # the objective (5) and the losses (Def. 4.1) of the returned iterate
    errors = np.array([np.linalg.norm(X[labels == g] - W[labels == g] @ H) for g in ("a", "b")])
    norms = np.array([np.linalg.norm(b) for b in blocks])
    np.testing.assert_allclose(model.group_losses_, (errors - E) / norms, rtol=1e-8)
    assert model.objective_ == pytest.approx(np.max((errors - E) / norms), rel=1e-8)


def _finite_difference_gradient(f, H, step=1e-6):
    gradient = np.zeros_like(H)
    for index in np.ndindex(H.shape):
        up, down = H.copy(), H.copy()
        up[index] += step
        down[index] -= step
        gradient[index] = (f(up) - f(down)) / (2 * step)
    return gradient


@pytest.mark.parametrize("weights", ["squared", "gradient"])
def test_the_h_step_descends_eq_9_or_eq_8_by_finite_differences(weights):
    """The multiplicative H-step is ``H − (H / (Σ a_ℓ W_ℓᵀW_ℓH)) ⊙ ∇``, ∇ the gradient of eq. (9)
    (halved: Algorithm 3) or of eq. (8) (ours), checked against central finite differences."""
    blocks, X, labels = two_groups(seed=4)
    rng = np.random.default_rng(5)
    W_blocks = [rng.uniform(size=(b.shape[0], 3)) for b in blocks]
    H = rng.uniform(size=(3, X.shape[1]))
    c = np.array([2.0, 5.0])
    squared = np.array([np.linalg.norm(b) ** 2 for b in blocks])
    errors = np.array([np.linalg.norm(b - Wb @ H) for b, Wb in zip(blocks, W_blocks, strict=True)])
    if weights == "squared":
        def objective(Hv):  # eq. (9), halved
            return 0.5 * sum(ci**2 * np.linalg.norm(b - Wb @ Hv) ** 2 / sq
                             for ci, b, Wb, sq in zip(c, blocks, W_blocks, squared, strict=True))
    else:
        def objective(Hv):  # eq. (8)
            return sum(ci * np.linalg.norm(b - Wb @ Hv) / np.sqrt(sq)
                       for ci, b, Wb, sq in zip(c, blocks, W_blocks, squared, strict=True))
    a = h_step_weights(weights, c, squared, errors)
    WtX = [Wb.T @ b for b, Wb in zip(blocks, W_blocks, strict=True)]
    WtW = [Wb.T @ Wb for Wb in W_blocks]
    stepped = H.copy()
    mu_update_H(stepped, WtX, WtW, a)
    denominator = sum(w * g for w, g in zip(a, WtW, strict=True)) @ H
    expected = H - H / denominator * _finite_difference_gradient(objective, H)
    np.testing.assert_allclose(stepped, expected, rtol=1e-6, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), r=st.integers(1, 5), c1=st.integers(0, 6), c2=st.integers(1, 6))
def test_algorithm_3_steps_are_monotone(seed, r, c1, c2):
    """For fixed c, line 10 is Lee & Seung's step on eq. (9), which never increases it; line 11
    is their W step, which acts row by row and so never increases any group's error."""
    blocks, X, labels = two_groups(seed=seed % 50, sizes=(20, 9), n=7)
    rng = np.random.default_rng(seed)
    W = rng.uniform(size=(X.shape[0], r))
    H = rng.uniform(size=(r, X.shape[1]))
    parts = [W[:20], W[20:]]
    c = np.array([c1, c2], dtype=float)
    squared = np.array([np.linalg.norm(b) ** 2 for b in blocks])

    def eq9(Hv):
        return sum(ci**2 * np.linalg.norm(b - Wb @ Hv) ** 2 / sq for ci, b, Wb, sq in zip(c, blocks, parts, squared, strict=True))

    before = eq9(H)
    mu_update_H(H, [Wb.T @ b for b, Wb in zip(blocks, parts, strict=True)], [Wb.T @ Wb for Wb in parts],
                h_step_weights("squared", c, squared, np.ones(2)))
    assert eq9(H) <= before * (1 + 1e-12) + 1e-15
    group_before = [np.linalg.norm(b - Wb @ H) for b, Wb in zip(blocks, parts, strict=True)]
    mu_update_W(X, W, H)
    group_after = [np.linalg.norm(b - Wb @ H) for b, Wb in zip(blocks, [W[:20], W[20:]], strict=True)]
    assert all(a <= b * (1 + 1e-12) + 1e-15 for a, b in zip(group_after, group_before, strict=True))


def test_algorithm_2_starts_from_w_alone_and_never_increases():
    blocks, X, labels = two_groups(seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = FairerNMF(3, solver="am", estimates=[0.05, 0.05], random_state=0).fit(X, sensitive_features=labels)
    assert len(model.loss_history_) == model.n_iter_  # no H⁽⁰⁾: the history starts after iteration 1
    assert np.all(np.diff(model.loss_history_) <= 1e-7)
    assert model.converged_


# ============================================================================ the W-step's NNLS
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(1, 30), n=st.integers(1, 10), r=st.integers(1, 8),
       zero_row=st.booleans(), warm=st.booleans())
def test_nnls_rows_is_exact(seed, m, n, r, zero_row, warm):
    """Block principal pivoting gives Lawson–Hanson's optimum (scipy) on every row, also with a
    rank-deficient or zero-row H and a warm start."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(m, n)) ** rng.integers(1, 4)
    H = rng.uniform(size=(r, n))
    if zero_row:
        H[0] = 0.0
    start = rng.uniform(size=(m, r)) * (rng.uniform(size=(m, r)) > 0.5) if warm else None
    W = nnls_rows(X, H, start=start)
    reference = np.array([nnls(H.T, x)[0] for x in X])
    assert W.min() >= 0
    ours = np.linalg.norm(X - W @ H, axis=1)
    theirs = np.linalg.norm(X - reference @ H, axis=1)
    assert np.all(ours <= theirs + 1e-9 * np.linalg.norm(X, axis=1) + 1e-12)

