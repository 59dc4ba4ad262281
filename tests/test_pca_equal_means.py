"""Kleindessner et al. (2023)'s fair PCA and PCA + LEACE, against independent computations.

* ``EqualMeansPCA`` (Algorithm 1): the projected group means agree to 1e-10; the subspace equals
  the algorithm written out on the rows (``z`` centred, the null space of ``zᵀX``, PCA of
  ``Rᵀ XᵀX R``), for two and three groups.
* Algorithm 2 ("equal covariances"): the subspace equals the literal procedure (``np.cov`` of each
  group, the ``l`` eigenvectors of ``Rᵀ(Σ_1 − Σ_2)R`` smallest in magnitude, PCA inside them); for
  more groups our generalisation reduces to it with two.
* ``LeacePCA``: the reconstruction is the projection onto ``span(U) ∩ {μ_g − μ}^⊥`` (computed
  here from vanilla PCA and a null space), its representation is LEACE applied to PCA's.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from fairaudit import PCA, AuditConfig, EqualMeansPCA, LeaceEraser, LeacePCA, run_audit
from fairaudit.data import AuditData
from fairaudit.pca import GroupProblem
from fairaudit.pca.equal_means import sample_covariances


def _projector(basis: np.ndarray) -> np.ndarray:
    Q = scipy.linalg.orth(basis)
    return Q @ Q.T


def _data(rng, k=2, n_per=80, d=7):
    """Groups with different means and covariances."""
    blocks = [rng.normal(size=(n_per + 13 * g, d)) @ (rng.normal(size=(d, d)) * rng.uniform(0.3, 2, size=d)) + rng.normal(scale=2, size=d)
              for g in range(k)]
    return np.vstack(blocks), np.repeat(np.arange(k), [n_per + 13 * g for g in range(k)])


def _algorithm_1(X, codes, d):
    """Kleindessner et al.'s Algorithm 1 on the rows, written out: one-hot ``Z`` centred, ``R`` the
    null space of ``(Z − Z̄)ᵀ X``, ``U = R V`` with ``V`` the top eigenvectors of ``Rᵀ XᵀX R``."""
    centred = X - X.mean(axis=0)
    Z = np.eye(codes.max() + 1)[codes]
    R = scipy.linalg.null_space((Z - Z.mean(axis=0)).T @ centred)
    values, vectors = np.linalg.eigh(R.T @ centred.T @ centred @ R)
    return R @ vectors[:, ::-1][:, :d], R, centred


@pytest.mark.parametrize("k", [2, 3])
def test_equal_group_means_and_the_algorithm_on_rows(rng, k):
    X, codes = _data(rng, k=k)
    model = EqualMeansPCA(n_components=3).fit(X, sensitive_features=codes)
    Z = model.transform(X)
    means = np.array([Z[codes == g].mean(axis=0) for g in range(k)])
    np.testing.assert_allclose(means, np.zeros_like(means), atol=1e-10)  # the projection's group means agree
    U, _, _ = _algorithm_1(X, codes, 3)
    np.testing.assert_allclose(_projector(model.components_.T), _projector(U), atol=1e-10)
    assert model.removed_dimensions_ == k - 1
    vanilla = PCA(n_components=3).fit(X, sensitive_features=codes)
    assert model.group_errors_.mean() >= vanilla.group_errors_.mean() - 1e-9  # the price of equal means


def test_equal_covariances_is_the_papers_algorithm_2(rng):
    X, codes = _data(rng, k=2, d=8)
    share = 0.5
    model = EqualMeansPCA(n_components=2, match_covariance=True, covariance_share=share).fit(X, sensitive_features=codes)
    _, R, centred = _algorithm_1(X, codes, 2)
    T = R.T @ (np.cov(X[codes == 0].T) - np.cov(X[codes == 1].T)) @ R
    values, vectors = np.linalg.eigh(T)
    kept = max(2, min(R.shape[1], int(share * X.shape[1])))
    Q = vectors[:, np.argsort(np.abs(values))[:kept]]
    inner_values, inner = np.linalg.eigh(Q.T @ R.T @ centred.T @ centred @ R @ Q)
    U = R @ Q @ inner[:, ::-1][:, :2]
    np.testing.assert_allclose(_projector(model.components_.T), _projector(U), atol=1e-9)
    assert model.covariance_dimensions_ == kept
    Z = model.transform(X)
    np.testing.assert_allclose(Z[codes == 0].mean(0), Z[codes == 1].mean(0), atol=1e-10)
    # what Algorithm 2 is for: the projected covariances are closer than Algorithm 1's
    plain = EqualMeansPCA(n_components=2).fit(X, sensitive_features=codes).transform(X)
    gap = lambda Y: np.linalg.norm(np.cov(Y[codes == 0].T) - np.cov(Y[codes == 1].T))  # noqa: E731
    assert gap(Z) < gap(plain)


def test_more_groups_reduce_to_two(rng):
    """For k > 2 the eigenvectors of Σ_g p_g T_g² (ours) are, for two groups, those of T (the
    paper's): p_1 p_2 T²."""
    X, codes = _data(rng, k=2, d=6)
    problem = GroupProblem.from_data(X, __import__("fairaudit").encode_groups(codes))
    covariances = sample_covariances(problem)
    shares = problem.sizes / problem.sizes.sum()
    spread = covariances - np.tensordot(shares, covariances, axes=1)
    S = np.tensordot(shares, spread @ spread, axes=1)
    T = covariances[0] - covariances[1]
    np.testing.assert_allclose(S, shares[0] * shares[1] * T @ T, atol=1e-9 * np.abs(S).max())
    three, codes3 = _data(rng, k=3, d=6)
    Z = EqualMeansPCA(n_components=2, match_covariance=True, covariance_share=0.6).fit(three, sensitive_features=codes3).transform(three)
    means = np.array([Z[codes3 == g].mean(0) for g in range(3)])
    np.testing.assert_allclose(means - means.mean(0), 0, atol=1e-10)


def test_rank_beyond_the_mean_free_directions_warns(rng):
    X, codes = _data(rng, k=3, d=4)
    with pytest.warns(UserWarning, match="more directions than remain"):
        model = EqualMeansPCA(n_components=4).fit(X, sensitive_features=codes)
    assert model.n_components_ == 2


def test_leace_pca_span_and_representation(rng):
    X, codes = _data(rng, k=3)
    model = LeacePCA(n_components=4).fit(X, sensitive_features=codes)
    vanilla = PCA(n_components=4).fit(X, sensitive_features=codes)
    U = vanilla.components_.T
    offsets = np.array([X[codes == g].mean(0) - X.mean(0) for g in range(3)])
    inside = U @ scipy.linalg.null_space(offsets @ U)  # span(U) ∩ offsets^⊥, independently
    np.testing.assert_allclose(_projector(model.components_.T), _projector(inside), atol=1e-9)
    assert model.n_components_ == 2 and model.erased_dimensions_ == 2
    # its representation is LEACE fitted on PCA's representation (Belrose et al., eq. (1))
    pcs = vanilla.transform(X)
    np.testing.assert_allclose(model.transform(X), LeaceEraser().fit(pcs, sensitive_features=codes).transform(pcs), atol=1e-9)
    # the reconstruction is the best linear one from it
    centred = X - X.mean(0)
    np.testing.assert_allclose(model.inverse_transform(model.transform(X)) - X.mean(0), centred @ _projector(inside), atol=1e-9)


def test_audit_variants_and_their_findings(rng):
    """In the PCA family's audit like every variant: records with intervals (the bootstrap refits
    them), the linear MMD² 0, and findings through the family's generic paths."""
    from fairaudit.findings import findings

    X, codes = _data(rng, k=2, d=6)
    data = AuditData.from_arrays(X, np.where(codes == 0, "a", "b"), feature_names=[f"f{j}" for j in range(6)])
    result = run_audit(data, AuditConfig(methods=("pca",), ranks=(2, 3), bootstrap=10))
    records = result.records
    for variant in ("equal_means", "equal_means_cov"):
        mine = records[(records.variant == variant) & (records["rank"] == 2)].set_index(["group", "metric"])
        assert mine.loc[("", "mmd2"), "value"] < 1e-20
        assert np.isfinite(mine.loc[("a", "loss"), "ci_low"]) and np.isfinite(mine.loc[("", "loss_gap"), "ci_high"])
    said = [f for f in findings(result)["pca"] if f.variant == "equal_means"]
    assert any("total reconstruction error" in f.text for f in said)  # its cost, beside vanilla's gap
    assert any("a classifier predicts the group" in f.text for f in said)  # its leakage, against vanilla's
