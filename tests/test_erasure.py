"""LEACE (Belrose et al. 2023) against its theorems and independent computations, and its audit.

* Theorems 3.4/4.1: after erasure every group has the same mean; Theorem 4.3: ``r(x) = P* x + b*``.
* Theorem 4.2: ``P*`` is the least-squares optimal linear eraser — checked against CVXPY solving
  ``min ‖(X − μ)Pᵀ − (X − μ)‖²_F s.t. P Σ_XZ = 0`` on tiny data, and against the closed form
  written another way (``scipy.linalg.sqrtm`` and ``pinv``), rank-deficient ``Σ_XX`` included.
* Linear guardedness in practice: a logistic regression trained on erased training rows predicts
  the group of erased held-out rows at chance, within its interval — where it did far better before.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score

from fairaudit import AuditConfig, run_audit
from fairaudit.data import AuditData
from fairaudit.engine import GroupMoments
from fairaudit.erasure import LeaceEraser, leace_from_moments
from fairaudit.errors import FairAuditError


def _grouped(rng, n=240, d=5, k=2, shift=2.0):
    codes = rng.integers(0, k, size=n)
    mixing = rng.normal(size=(d, d))
    X = rng.normal(size=(n, d)) @ mixing + shift * np.eye(k, d)[codes] @ mixing
    return X, codes


def _closed_form(X, codes):
    """Eq. (1) written out with dense matrices: ``W = pinv(sqrtm(Σ_XX))``, ``P = B B⁺``."""
    mean = X.mean(axis=0)
    centred = X - mean
    sigma = centred.T @ centred / len(X)
    Z = np.eye(codes.max() + 1)[codes]
    cross = centred.T @ (Z - Z.mean(axis=0)) / len(X)  # Σ_XZ
    with warnings.catch_warnings():  # a singular Σ_XX has a square root; scipy warns that it is singular
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        root = np.real(scipy.linalg.sqrtm(sigma))
    W = np.linalg.pinv(root, hermitian=True)
    B = W @ cross
    P = B @ np.linalg.pinv(B)
    projection = np.eye(X.shape[1]) - np.linalg.pinv(W, hermitian=True) @ P @ W
    return projection, mean - projection @ mean


@pytest.mark.parametrize("k", [2, 3])
def test_group_means_agree_after_erasure(rng, k):
    X, codes = _grouped(rng, k=k)
    erased = LeaceEraser().fit(X, sensitive_features=codes).transform(X)
    means = np.array([erased[codes == g].mean(axis=0) for g in range(k)])
    np.testing.assert_allclose(means, np.broadcast_to(erased.mean(axis=0), means.shape), atol=1e-10)


def test_affine_form_and_closed_form(rng):
    X, codes = _grouped(rng, k=3)
    eraser = LeaceEraser().fit(X, sensitive_features=codes)
    np.testing.assert_allclose(eraser.transform(X), X @ eraser.projection_.T + eraser.bias_, atol=1e-10)  # Theorem 4.3
    projection, bias = _closed_form(X, codes)
    np.testing.assert_allclose(eraser.projection_, projection, atol=1e-8)
    np.testing.assert_allclose(eraser.bias_, bias, atol=1e-8)
    assert eraser.rank_ == 2  # k − 1 directions
    P = eraser.projection_
    np.testing.assert_allclose(P @ P, P, atol=1e-10)  # an (oblique) projection, §4.2


def test_rank_deficient_covariance(rng):
    """A duplicated and a constant column make Σ_XX singular: W is the pseudo-inverse of its square
    root (Theorem 4.2 as stated), and the means still agree."""
    X, codes = _grouped(rng, d=4)
    X = np.column_stack([X, X[:, 0], np.full(len(X), 3.0)])
    eraser = LeaceEraser().fit(X, sensitive_features=codes)
    erased = eraser.transform(X)
    np.testing.assert_allclose(erased[codes == 0].mean(0), erased[codes == 1].mean(0), atol=1e-9)
    projection, _ = _closed_form(X, codes)
    np.testing.assert_allclose(eraser.projection_, projection, atol=1e-7)
    np.testing.assert_allclose(erased[:, -1], 3.0)  # a direction without variance is left as it is


def test_least_squares_optimal_against_cvxpy():
    """Theorem 4.2 with M = I: no linear map that zeroes the cross-covariance changes the rows
    less — CVXPY's solution of the constrained least squares is LEACE's P*."""
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(3)
    X, codes = _grouped(rng, n=40, d=3, k=3)
    centred = X - X.mean(axis=0)
    Z = np.eye(3)[codes]
    cross = centred.T @ (Z - Z.mean(axis=0)) / len(X)
    P = cp.Variable((3, 3))
    problem = cp.Problem(cp.Minimize(cp.sum_squares(centred @ P.T - centred)), [P @ cross == 0])
    problem.solve(solver=cp.CLARABEL)
    eraser = LeaceEraser().fit(X, sensitive_features=codes)
    np.testing.assert_allclose(eraser.projection_, P.value, atol=1e-6)
    changed = np.sum((eraser.transform(X) - X) ** 2) / len(X)
    assert eraser.distortion_ == pytest.approx(changed, rel=1e-9)
    assert changed == pytest.approx(problem.value / len(X), rel=1e-6)


def test_logistic_regression_at_chance_on_held_out_rows():
    """Linear guardedness (Theorems 3.1, 4.1): fitted on training rows, the eraser leaves a
    logistic regression at chance on held-out rows within its 95 % bootstrap interval; before
    erasure the same classifier is far above chance (so the test can fail)."""
    rng = np.random.default_rng(7)
    X, codes = _grouped(rng, n=3000, d=6, shift=1.0)
    train, test = np.arange(2000), np.arange(2000, 3000)

    def heldout_interval(features):
        model = LogisticRegression(max_iter=1000, class_weight="balanced").fit(features[train], codes[train])
        predicted = model.predict(features[test])
        point = balanced_accuracy_score(codes[test], predicted)
        draws = np.random.default_rng(0).integers(0, len(test), size=(400, len(test)))
        scores = [balanced_accuracy_score(codes[test][d], predicted[d]) for d in draws]
        return point, *np.percentile(scores, [2.5, 97.5])

    before = heldout_interval(X)
    eraser = LeaceEraser().fit(X[train], sensitive_features=codes[train])
    after = heldout_interval(eraser.transform(X))
    assert before[1] > 0.7
    assert after[1] <= 0.5 <= after[2], after


def test_moments_and_weights(rng):
    """From per-group moments (and with row weights) the eraser is the one of the rows."""
    X, codes = _grouped(rng, k=3)
    moments = GroupMoments.from_rows(X, codes, n_groups=3)
    by_rows = LeaceEraser().fit(X, sensitive_features=codes)
    by_moments = LeaceEraser().fit_moments(moments)
    np.testing.assert_allclose(by_moments.projection_, by_rows.projection_, atol=1e-10)
    counts = rng.integers(0, 3, size=len(X))
    weighted = LeaceEraser().fit(X, sensitive_features=codes, sample_weight=counts)
    repeated = LeaceEraser().fit(np.repeat(X, counts, axis=0), sensitive_features=np.repeat(codes, counts))
    np.testing.assert_allclose(weighted.projection_, repeated.projection_, atol=1e-9)
    assert leace_from_moments(moments).rank == 2


def test_nothing_to_erase(rng):
    """Groups with equal means: nothing is erased (rank 0), the rows come back as they were."""
    X = rng.normal(size=(100, 3))
    X = np.vstack([X, X[::-1]])  # the same rows in each group
    codes = np.repeat([0, 1], 100)
    eraser = LeaceEraser().fit(X, sensitive_features=codes)
    assert eraser.rank_ == 0
    np.testing.assert_array_equal(eraser.transform(X), X)


def test_needs_two_groups():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(FairAuditError, match="single group"):
        LeaceEraser().fit(X, sensitive_features=np.zeros(10))


# ---------------------------------------------------------------- the audit's post-step
def _data(rng, n=300):
    X, codes = _grouped(rng, n=n, d=6, shift=1.5)
    return AuditData.from_arrays(np.abs(X) + 0.1, np.where(codes == 1, "b", "a"), feature_names=[f"f{j}" for j in range(6)])


@pytest.mark.parametrize("method", ["nmf", "fs", "cpd"])
def test_post_step_on_other_families(rng, method):
    """``AuditConfig(leace=True)``: every variant of a family that does not erase itself gets a
    ``+leace`` twin with the representation metrics after erasure and what erasure changed — on
    held-out rows with the training rows' eraser — and findings that say both."""
    from fairaudit.findings import findings

    data = _data(rng)
    result = run_audit(data, AuditConfig(methods=(method,), ranks=(2,), leace=True, holdout=0.3, bootstrap=10,
                                         options={"fs": {"kmeans_runs": 2}} if method == "fs" else {}))
    records = result.records
    twins = sorted(v for v in set(records.variant) if v.endswith("+leace"))
    bases = {v for v in set(records.variant) if "@" not in v and not v.endswith("+leace")}
    assert {t.removesuffix("+leace") for t in twins} == bases
    twin = records[records.variant == twins[0]]
    for metric in ("balanced_accuracy", "mmd2", "leace_distortion", "heldout_balanced_accuracy", "heldout_leace_distortion"):
        assert metric in set(twin.metric), metric
    assert twin[twin.metric == "mmd2"].value.max() < 1e-20  # the training rows' means agree exactly
    distortion = twin[twin.metric == "leace_distortion"].iloc[0]
    assert 0 < distortion.value < 1 and np.isfinite(distortion.ci_low)  # refitted in every replicate
    said = [f for f in findings(result)[method] if f.variant in twins]
    assert any("LEACE changed" in f.text for f in said)
    assert any("took no part in fitting the representation or its eraser" in f.text for f in said)


def test_pca_post_step_records(rng):
    """The PCA family fits its twins itself, from the group moments: the family's own records
    (error, loss, intervals) plus the distortion, and the representation has equal group means."""
    data = _data(rng)
    result = run_audit(data, AuditConfig(methods=("pca",), ranks=(2, 3), leace=True, bootstrap=10))
    records = result.records
    assert {"vanilla+leace", "fair_eig+leace", "jevd+leace", "cov_fair+leace"} <= set(records.variant)
    assert not {"equal_means+leace", "equal_means_cov+leace"} & set(records.variant)  # their means agree already
    twin = records[(records.variant == "vanilla+leace") & (records["rank"] == 3)].set_index(["group", "metric"])
    assert twin.loc[("", "mmd2"), "value"] < 1e-20
    assert twin.loc[("", "effective_rank"), "value"] == 2  # one direction erased for two groups
    assert np.isfinite(twin.loc[("a", "loss"), "ci_low"]) and np.isfinite(twin.loc[("", "leace_distortion"), "ci_high"])
    vanilla = records[(records.variant == "vanilla") & (records["rank"] == 3) & (records.metric == "variance_explained")].value.item()
    assert twin.loc[("", "variance_explained"), "value"] < vanilla  # the cost, in reconstruction


def test_a_rank_that_leace_empties(rng):
    """At rank 1 with two groups LEACE erases the only direction: the twin's reconstruction
    records stand, its leakage is not measured (nothing to predict from), and a note says so."""
    data = _data(rng)
    result = run_audit(data, AuditConfig(methods=("pca", "nmf"), ranks=(1, 2), leace=True, bootstrap=0,
                                         variants=("vanilla",)))
    records = result.records.set_index(["method", "variant", "rank", "group", "metric"]).value
    for method in ("pca", "nmf"):
        assert np.isnan(records[(method, "vanilla+leace", 1, "", "balanced_accuracy")])
        assert np.isfinite(records[(method, "vanilla+leace", 2, "", "balanced_accuracy")])
        assert any(w.startswith(f"{method}/vanilla+leace: at rank 1 LEACE erases every direction") for w in result.warnings)
    assert records[("pca", "vanilla+leace", 1, "", "effective_rank")] == 0
    assert np.isfinite(records[("pca", "vanilla+leace", 1, "a", "error")])


def test_your_representation_after_leace(rng):
    """Your components after LEACE are audited like PCA + LEACE: scikit-learn's PCA components on the
    same data give vanilla+leace's records; embeddings get their erased representation's metrics."""
    from sklearn.decomposition import PCA as ScikitPCA

    from fairaudit.yours import Representation, audit_components, audit_embedding

    data = _data(rng)
    config = AuditConfig(methods=("pca",), ranks=(2, 3), leace=True, bootstrap=0)
    components = ScikitPCA(3).fit(data.X).components_
    yours = audit_components(data, Representation("components", components, {"name": "c"}), config).records
    ours = run_audit(data, config).records
    key = ["rank", "group", "metric"]
    merged = yours[yours.variant == "yours+leace"].merge(ours[ours.variant == "vanilla+leace"], on=key)
    merged = merged[merged.metric.isin(["error", "loss", "variance_explained", "mmd2", "balanced_accuracy", "leace_distortion", "effective_rank"])]
    assert len(merged) == 2 * 9  # two ranks: error and loss of two groups, five whole-data records
    np.testing.assert_allclose(merged.value_x, merged.value_y, atol=1e-8)
    embedded = audit_embedding(data, Representation("embedding", data.X @ components.T, {"name": "e"}), config).records
    twin = embedded[embedded.variant == "yours+leace"].set_index("metric").value
    assert twin["mmd2"] < 1e-20 and 0 < twin["leace_distortion"] < 1 and np.isfinite(twin["balanced_accuracy"])


def test_a_variant_keeps_its_colour_when_twins_join_some_charts(rng):
    """NMF's ``+leace`` twins are in the leakage chart, not in the loss chart: the fair variants'
    colours are the same in both."""
    from fairaudit.plots import family_figures

    result = run_audit(_data(rng), AuditConfig(methods=("nmf",), ranks=(2, 3), leace=True, bootstrap=0))
    figures = dict(family_figures(result.records, "nmf"))
    colours = [{trace.name: trace.line.color for trace in figures[metric].data if trace.mode == "lines+markers"}
               for metric in ("max_rel_loss", "balanced_accuracy")]
    shared = set(colours[0]) & set(colours[1])
    assert len(shared) >= 3 and all(colours[0][name] == colours[1][name] for name in shared)


def test_findings_move_to_a_rank_where_the_twin_is_measured(rng):
    """When the family's headline rank is one LEACE empties, the twin's findings are at the next
    rank up where its leakage is measured."""
    from fairaudit.findings import erasure_findings

    result = run_audit(_data(rng), AuditConfig(methods=("nmf",), ranks=(1, 2, 3), leace=True, bootstrap=0, variants=("vanilla",)))
    said = erasure_findings(result, "nmf", 1)
    assert said and {f.rank for f in said} == {2} and "rank-2 representation" in said[0].text
