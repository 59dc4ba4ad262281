"""One-pass group moments: any chunking gives the same moments; the PCA family fits from them.

Also the wide-data path (the row space instead of the d × d covariances), which must give the
same fits as the dense path.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairaudit import AuditConfig, AuditData, metrics, run_audit
from fairaudit.data import scale_features
from fairaudit.engine import GroupMoments, LocalEngine, scaling_transform
from fairaudit.errors import ParameterError
from fairaudit.groups import encode_groups
from fairaudit.pca import JEVDPCA, PCA, CovFairPCA, FairPCA, GroupProblem

from .conftest import random_groups_data


def _reference(X, codes, k, weights=None):
    """Count, mean and centred scatter per group, straight from the definition."""
    w = np.ones(len(X)) if weights is None else weights
    counts, means, scatter = np.zeros(k), np.zeros((k, X.shape[1])), np.zeros((k, X.shape[1], X.shape[1]))
    for g in range(k):
        rows, wg = X[codes == g], w[codes == g]
        counts[g] = wg.sum()
        if counts[g] > 0:
            means[g] = wg @ rows / counts[g]
            scatter[g] = (rows - means[g]).T @ ((rows - means[g]) * wg[:, None])
    return counts, means, scatter


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    d=st.integers(1, 5),
    k=st.integers(1, 4),
    cuts=st.lists(st.integers(0, 60), max_size=6),
    seed=st.integers(0, 2**31 - 1),
    offset=st.sampled_from([0.0, 1e6]),
)
def test_any_chunking_gives_the_same_moments(n, d, k, cuts, seed, offset):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10, size=d) + offset
    codes = rng.integers(0, k, size=n)
    bounds = sorted({0, n, *(c for c in cuts if c < n)})
    chunks = [(X[a:b], codes[a:b]) for a, b in pairwise(bounds)]
    whole = GroupMoments.from_rows(X, codes, n_groups=k)
    streamed = GroupMoments.from_chunks(chunks, n_groups=k)
    assert streamed.allclose(whole, rtol=1e-9, atol=1e-9 * max(1.0, offset))
    counts, means, scatter = _reference(X, codes, k)
    np.testing.assert_array_equal(whole.counts, counts)
    np.testing.assert_allclose(whole.means, means, rtol=1e-12, atol=1e-9 * max(1.0, offset))
    np.testing.assert_allclose(whole.scatter, scatter, rtol=1e-7, atol=1e-6 * max(1.0, np.abs(scatter).max(initial=0)))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), parts=st.integers(1, 9))
def test_merging_is_associative_and_order_free(seed, parts):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(90, 3)) + 5
    codes = rng.integers(0, 3, size=90)
    pieces = [GroupMoments.from_rows(X[i::parts], codes[i::parts], n_groups=3) for i in range(parts)]
    left = pieces[0]
    for piece in pieces[1:]:
        left = left.merge(piece)
    tree = GroupMoments.merge_all(pieces)
    shuffled = GroupMoments.merge_all(pieces[::-1])
    whole = GroupMoments.from_rows(X, codes, n_groups=3)
    for candidate in (left, tree, shuffled):
        assert candidate.allclose(whole, rtol=1e-11, atol=1e-11)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), keys=st.integers(1, 12), k=st.integers(1, 4))
def test_regrouping_keys_gives_the_moments_of_their_groups(seed, keys, k):
    """Moments per key (the dask engine's combinations of raw values) gathered into groups equal
    the groups' own moments; a key of group -1 is left out."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, 3)) * [1, 10, 0.1] + 1e4
    key = rng.integers(0, keys, size=120)
    group_of = rng.integers(-1, k, size=keys)
    per_key = GroupMoments.from_rows(X, key, n_groups=keys)
    regrouped = per_key.regroup(group_of, k, labels=[f"g{g}" for g in range(k)])
    codes = group_of[key]
    kept = codes >= 0
    whole = GroupMoments.from_rows(X[kept], codes[kept], n_groups=k)
    assert regrouped.labels == tuple(f"g{g}" for g in range(k))
    np.testing.assert_array_equal(regrouped.counts, whole.counts)
    assert regrouped.allclose(whole, rtol=1e-10, atol=1e-10 * 1e4)


def test_merging_stays_accurate_far_from_the_origin():
    """The one-pass Σxxᵀ − nμμᵀ formula loses every digit at an offset of 1e8; Chan's update does not."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10_000, 2)) + 1e8
    codes = np.zeros(10_000, dtype=int)
    chunks = [(X[i : i + 997], codes[i : i + 997]) for i in range(0, 10_000, 997)]
    merged = GroupMoments.from_chunks(chunks, n_groups=1)
    centred = X - X.mean(axis=0)
    exact = centred.T @ centred
    scale = np.abs(exact).max()
    np.testing.assert_allclose(merged.scatter[0], exact, atol=1e-8 * scale)
    naive = X.T @ X - 10_000 * np.outer(X.mean(axis=0), X.mean(axis=0))
    assert np.abs(naive - exact).max() > 10 * scale  # the one-pass formula: not one correct digit


def test_weights_equal_repeated_rows(rng):
    X, groups = random_groups_data(rng, 2, 4, rows_per_group=30)
    counts = rng.integers(0, 4, size=len(X))  # a bootstrap-like multinomial draw
    weighted = GroupMoments.from_rows(X, groups, n_groups=2, weights=counts)
    repeated = GroupMoments.from_rows(np.repeat(X, counts, axis=0), np.repeat(groups, counts), n_groups=2)
    assert weighted.allclose(repeated, rtol=1e-10, atol=1e-10)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="one code per row"):
        GroupMoments.from_rows(np.zeros((3, 2)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="weights"):
        GroupMoments.from_rows(np.zeros((3, 2)), np.zeros(3, dtype=int), weights=[1, -1, 1])
    with pytest.raises(ValueError, match="codes"):
        GroupMoments.from_rows(np.zeros((3, 2)), np.array([0, 1, 2]), n_groups=2)


@pytest.mark.parametrize("scaling", ["standardize", "center", "none", "unit_norm"])
def test_engine_moments_are_those_of_the_scaled_data(rng, scaling):
    X, groups = random_groups_data(rng, 3, 5, rows_per_group=40)
    X[:, 2] = 7.0  # a constant column stays at zero
    data = AuditData.from_arrays(X, groups, scaling=scaling)
    summary = LocalEngine().summarise(data, sample_rows=10_000)
    direct = GroupMoments.from_rows(scale_features(X, scaling), data.groups.codes, n_groups=3, labels=data.groups.labels)
    assert summary.moments.allclose(direct, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(summary.sample.X, data.X, atol=1e-12)
    assert summary.sample.is_complete


@pytest.mark.parametrize("scaling", ["standardize", "unit_norm"])
def test_engine_moments_of_values_near_overflow_are_exact(rng, scaling):
    """Columns near 1e308 are divided by a power of two before the raw moments (the data
    boundary's rule): the moments equal those of the scaled data, finite."""
    X, groups = random_groups_data(rng, 2, 4, rows_per_group=30)
    X[:, 1] = X[:, 1] * 1e307 + 1e308
    data = AuditData.from_arrays(X, groups, scaling=scaling)
    summary = LocalEngine().summarise(data, sample_rows=10_000)
    direct = GroupMoments.from_rows(scale_features(X, scaling), data.groups.codes, n_groups=2, labels=data.groups.labels)
    assert np.isfinite(summary.moments.scatter).all()
    assert summary.moments.allclose(direct, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(summary.sample.X, data.X, atol=1e-10)


def test_engine_refuses_values_near_overflow_without_standardising(rng):
    X, groups = random_groups_data(rng, 2, 4, rows_per_group=30)
    X[:, 1] = 1e308
    data = AuditData.from_arrays(X, groups, scaling="center")
    with pytest.raises(ParameterError, match="overflow"):
        LocalEngine().summarise(data, sample_rows=10_000)


def test_scaling_transform_without_the_scatter(rng):
    """Wide data: the scaling from per-feature sums of squares only equals scale_features."""
    X = rng.normal(size=(12, 40)) * rng.uniform(0.1, 3, 40) + rng.normal(size=40)
    groups = encode_groups(np.repeat(["a", "b"], [7, 5]))
    data = AuditData.from_arrays(X, np.repeat(["a", "b"], [7, 5]))
    summary = LocalEngine().summarise(data, sample_rows=100)
    assert summary.moments is None
    np.testing.assert_allclose(summary.rows, scale_features(X, "standardize"), atol=1e-12)
    raw = GroupMoments.from_rows(X, groups.codes, n_groups=2)
    for scaling in ("standardize", "unit_norm"):
        shift, scale = scaling_transform(raw.counts, raw.means, np.einsum("kjj->kj", raw.scatter), scaling)
        np.testing.assert_allclose((X - shift) * scale, scale_features(X, scaling), atol=1e-12)


def test_the_sample_is_the_leakage_metrics_own_subsample(rng):
    X, groups = random_groups_data(rng, 2, 3, rows_per_group=600)
    data = AuditData.from_arrays(X, groups)
    sample = LocalEngine().summarise(data, sample_rows=500, random_state=4).sample
    rows = metrics._stratified_subsample(data.groups.codes, 500, 4)
    np.testing.assert_allclose(sample.X, data.X[rows], atol=1e-12)
    assert sample.size == len(rows) and sample.total_rows == 1200 and not sample.is_complete
    assert "500 of 1,200 rows" in sample.describe(data.groups.labels)


# ---------------------------------------------------------------- estimators from moments
ESTIMATORS = [PCA(3), FairPCA(3), FairPCA(3, solver="mw"), JEVDPCA(3, solver="jacobi"), JEVDPCA(3), CovFairPCA(3)]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # Algorithm 1 as printed
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: f"{type(e).__name__}-{getattr(e, 'solver', '')}")
def test_fit_from_moments_equals_fit_from_rows(rng, estimator):
    X, groups = random_groups_data(rng, 3, 7, rows_per_group=80)
    from_rows = estimator.__class__(**estimator.get_params()).fit(X, sensitive_features=groups)
    chunks = [(X[i : i + 37], groups[i : i + 37]) for i in range(0, len(X), 37)]
    moments = GroupMoments.from_chunks(chunks, n_groups=3, labels=["0", "1", "2"])
    from_moments = estimator.__class__(**estimator.get_params()).fit_moments(moments)
    np.testing.assert_allclose(from_moments.group_losses_, from_rows.group_losses_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(from_moments.projection_, from_rows.projection_, atol=1e-6)
    np.testing.assert_allclose(from_moments.mean_, from_rows.mean_, atol=1e-12)
    assert from_moments.n_features_in_ == 7


def test_weighted_fit_equals_fit_on_repeated_rows(rng):
    X, groups = random_groups_data(rng, 2, 6, rows_per_group=50)
    counts = rng.integers(0, 3, size=len(X))
    weighted = FairPCA(2).fit(X, sensitive_features=groups, sample_weight=counts)
    repeated = FairPCA(2).fit(np.repeat(X, counts, axis=0), sensitive_features=np.repeat(groups, counts))
    np.testing.assert_allclose(weighted.group_losses_, repeated.group_losses_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(weighted.group_sizes_, repeated.group_sizes_)


def test_metrics_from_moments_equal_metrics_from_rows(rng):
    X, groups = random_groups_data(rng, 3, 6, rows_per_group=70)
    codes = encode_groups(groups)
    problem = GroupProblem.from_data(X, codes)
    centred = X - X.mean(axis=0)
    for estimator in (PCA(2), FairPCA(2)):
        fitted = estimator.fit(X, sensitive_features=groups)
        projection = fitted.map_
        assert problem.variance_explained(problem.reduce(projection)) == pytest.approx(
            metrics.variance_explained(centred, projection), rel=1e-10
        )
        assert problem.mean_discrepancy(problem.reduce(projection)) == pytest.approx(
            metrics.mmd2(projection.coordinates(centred), codes.codes), rel=1e-9, abs=1e-12
        )
        for g in range(3):
            rows = centred[codes.codes == g]
            assert fitted.group_errors_[g] == pytest.approx(metrics.error(rows, projection), rel=1e-10)
            assert fitted.group_losses_[g] == pytest.approx(metrics.loss(rows, projection, 2), rel=1e-8, abs=1e-10)


# ---------------------------------------------------------------- wide data
def _wide(rng, n=24, d=60):
    rows = [rng.normal(size=(m, 5)) @ rng.normal(size=(5, d)) + rng.normal(size=(m, d)) * 0.3 for m in (14, n - 14)]
    return np.vstack(rows), np.repeat(["a", "b"], [14, n - 14])


@pytest.mark.parametrize("estimator", [PCA(4), FairPCA(4), JEVDPCA(4, solver="jacobi"), CovFairPCA(4)], ids=lambda e: type(e).__name__)
def test_wide_data_in_the_row_space_equals_the_dense_problem(rng, estimator):
    X, groups = _wide(rng)
    codes = encode_groups(groups)
    wide = GroupProblem.from_data(X, codes)
    assert wide.dim <= X.shape[0] and wide.basis is not None
    dense = GroupProblem.from_moments(GroupMoments.from_rows(X, codes.codes, n_groups=2, labels=codes.labels))
    assert dense.basis is None and dense.dim == X.shape[1]
    a = estimator.__class__(**estimator.get_params())._fit_problem(wide)
    b = estimator.__class__(**estimator.get_params())._fit_problem(dense)
    np.testing.assert_allclose(a.group_errors_, b.group_errors_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(a.group_losses_, b.group_losses_, rtol=1e-6, atol=1e-8)
    assert a.n_components_ == b.n_components_
    np.testing.assert_allclose(a.components_ @ a.components_.T, np.eye(a.components_.shape[0]), atol=1e-10)


def test_wide_data_rank_above_the_row_space(rng):
    """Rank 8 from 6 rows: the map is completed by zero-variance directions, losses unchanged."""
    X = rng.normal(size=(6, 20))
    groups = np.repeat(["a", "b"], 3)
    fitted = PCA(8).fit(X, sensitive_features=groups)
    assert fitted.n_components_ == 8
    np.testing.assert_allclose(fitted.components_ @ fitted.components_.T, np.eye(8), atol=1e-10)
    np.testing.assert_allclose(fitted.group_errors_, 0.0, atol=1e-10)  # 5 centred dimensions < 8


def test_wide_audit_records_equal_the_dense_fit(rng):
    X, groups = _wide(rng, n=30, d=45)
    data = AuditData.from_arrays(X, groups)
    result = run_audit(data, AuditConfig(variants=("vanilla", "fair_eig", "cov_fair"), ranks=(1, 3)))
    losses = result.metric("loss").set_index(["variant", "rank", "group"]).value
    dense_problem = GroupProblem.from_moments(
        GroupMoments.from_rows(data.X, data.groups.codes, n_groups=2, labels=data.groups.labels)
    )
    for rank in (1, 3):
        fair = FairPCA(rank)._fit_problem(dense_problem)
        for label, value in zip(fair.groups_, fair.group_losses_, strict=True):
            assert losses[("fair_eig", rank, label)] == pytest.approx(value, rel=1e-6, abs=1e-9)


# ---------------------------------------------------------------- group encoding
@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["int", "float", "str", "bool", "object_str", "list"]),
    values=st.lists(st.integers(-3, 3), min_size=1, max_size=40),
)
def test_the_fast_group_encoding_equals_the_general_one(kind, values):
    """PCA.fit encodes plain arrays with np.unique; codes and labels must equal pandas' path."""
    import pandas as pd

    array = {
        "int": np.array(values),
        "float": np.array(values, dtype=float) / 2,
        "str": np.array([f"g{v}" for v in values]),
        "bool": np.array(values) > 0,
        "object_str": np.array([f"é{v}" for v in values], dtype=object),
        "list": [f"x{v}" for v in values],
    }[kind]
    fast = encode_groups(array)
    general = encode_groups(pd.Series(array))
    assert fast.labels == general.labels
    np.testing.assert_array_equal(fast.codes, general.codes)


def test_fit_moments_refuses_an_empty_group(rng):
    from fairaudit.errors import SmallGroupError

    moments = GroupMoments.from_rows(rng.normal(size=(10, 3)), np.zeros(10, dtype=int), n_groups=2, labels=["a", "b"])
    with pytest.raises(SmallGroupError, match="'b' \\(0 rows\\)"):
        PCA(1).fit_moments(moments)


def test_a_regrouped_wide_problem_can_reuse_the_row_space(rng):
    """The gap test regroups the same rows many times: reusing the row space (``basis=``) gives
    the problem built from scratch."""
    X = rng.normal(size=(30, 200))
    codes = rng.permutation(np.repeat([0, 1], [18, 12]))
    labels = ("a", "b")
    from fairaudit.groups import GroupCodes

    centre = X.mean(axis=0)
    first = GroupProblem.from_data(X, GroupCodes(rng.permutation(codes), labels), centre=centre)
    fresh = GroupProblem.from_data(X, GroupCodes(codes, labels), centre=centre)
    reused = GroupProblem.from_data(X, GroupCodes(codes, labels), centre=centre, basis=first.basis)
    for rank in (1, 3, 7):
        model = FairPCA(rank)._fit_problem(fresh)
        np.testing.assert_allclose(reused.losses(reused.reduce(model.map_), rank),
                                   fresh.losses(fresh.reduce(model.map_), rank), rtol=1e-9, atol=1e-12)


def test_row_blocks_found_once_give_the_same_moments_bit_for_bit(rng):
    """Bootstrap replicates reuse the blocks' group order (RowBlocks): the moments are those of
    a fresh pass, bit for bit, with and without weights."""
    from fairaudit.engine import CHUNK_ROWS, RowBlocks

    n = 2 * CHUNK_ROWS + 1234
    X = np.asfortranarray(rng.normal(size=(n, 4)) * [1, 10, 100, 1000] + 5)
    codes = rng.integers(0, 3, size=n)
    blocks = RowBlocks.of(codes, 3)
    for weights in (None, rng.multinomial(n, np.ones(n) / n).astype(float)):
        fresh = GroupMoments.from_rows(X, codes, n_groups=3, weights=weights)
        reused = GroupMoments.from_rows(X, codes, n_groups=3, weights=weights, blocks=blocks)
        for a, b in ((fresh.counts, reused.counts), (fresh.means, reused.means), (fresh.scatter, reused.scatter)):
            assert a.tobytes() == b.tobytes()
    data = AuditData.from_arrays(X, codes, scaling="standardize")
    engine = LocalEngine()
    weights = rng.multinomial(n, np.ones(n) / n).astype(float)
    first = engine.summarise(data, sample_rows=0, weights=weights)
    again = engine.summarise(data, sample_rows=0, weights=weights)  # the cached blocks
    assert LocalEngine().summarise(data, sample_rows=0, weights=weights).moments.scatter.tobytes() == again.moments.scatter.tobytes()
    assert first.moments.scatter.tobytes() == again.moments.scatter.tobytes()


# ---------------------------------------------------------------------- Poisson-bootstrap replicates
def test_poisson_replicates_equal_the_weighted_moments_of_their_draws(rng, monkeypatch):
    """The batched replicates (one matrix product per block, centred per block) equal the
    definition under the same Poisson weights, replayed from the same seed group by group — also
    far from the origin and across blocks (a small block size forces many merges)."""
    X = rng.normal(size=(3000, 6)) * [1, 2, 3, 1e-3, 1e3, 1] + 1e4
    bounds = np.array([0, 700, 700, 3000])  # an empty group in the middle
    codes = np.repeat(np.arange(3), np.diff(bounds))
    B = 5
    monkeypatch.setattr("fairaudit.engine.moments.REPLICATE_BLOCK_VALUES", 21 * 40)  # blocks of 40 rows
    stacked = GroupMoments.poisson_replicates(X, bounds, np.random.default_rng(11), B)
    replay = np.random.default_rng(11)
    weights = np.zeros((B, len(X)))
    for g in range(3):
        for start in range(bounds[g], bounds[g + 1], 40):
            stop = min(start + 40, bounds[g + 1])
            weights[:, start:stop] = replay.poisson(1.0, (B, stop - start))
    for b in range(B):
        counts, means, scatter = _reference(X, codes, 3, weights[b])
        mine = stacked.replicate(b, 3)
        np.testing.assert_array_equal(mine.counts, counts)
        np.testing.assert_allclose(mine.means, means, rtol=1e-12, atol=0)
        np.testing.assert_allclose(mine.scatter, scatter, rtol=1e-8, atol=1e-8 * np.abs(scatter).max())
    assert not np.array_equal(stacked.replicate(0, 3).means, stacked.replicate(1, 3).means)  # replicates differ


def test_poisson_replicates_are_a_bootstrap_of_the_mean(rng):
    """Theory: under Poisson(1) weights a group's weighted mean varies like the mean of a
    resample — its spread over replicates is the standard error σ/√n (here within 15 %)."""
    n = 4000
    X = rng.normal(size=(n, 2)) * [1.0, 5.0]
    stacked = GroupMoments.poisson_replicates(X, np.array([0, n]), np.random.default_rng(3), 400)
    spread = stacked.means.std(axis=0)
    expected = X.std(axis=0) / np.sqrt(n)
    np.testing.assert_allclose(spread, expected, rtol=0.15)
    assert abs(stacked.counts.mean() / n - 1) < 0.01  # total weight ≈ n
