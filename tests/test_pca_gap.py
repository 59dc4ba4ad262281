"""The PCA gap test's regroupings: batched, they give the problems (and p-values) built one by one."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from fairaudit.engine import RowSample
from fairaudit.groups import GroupCodes
from fairaudit.pca import PCA, FairPCA, GroupProblem
from fairaudit.pca.audit import GAP_PERMUTATIONS, _gap_pvalues, label_pairs, observed_gaps, pair_nulls
from fairaudit.verdicts import permutation_pvalue

from .conftest import random_groups_data


def _one_by_one_pvalues(sample, labels, centre, models, random_state):
    """The gap test with a fresh problem per regrouping (the reference): every pair's permuted
    differences, then the same p-values."""
    observed_problem, references, observed = observed_gaps(sample, labels, centre, models)
    rng = np.random.default_rng(random_state)
    first, second = label_pairs(len(labels))
    permuted = {rank: [] for rank in references}
    for _ in range(GAP_PERMUTATIONS):
        regrouped = GroupProblem.from_data(sample.X, GroupCodes(rng.permutation(sample.codes), labels), centre=centre,
                                           basis=observed_problem.basis)
        for rank, model in references.items():
            losses = regrouped.losses(regrouped.reduce(model.map_), rank)
            permuted[rank].append(losses[first] - losses[second])
    return pair_nulls(observed, {rank: np.array(found) for rank, found in permuted.items()})


@pytest.mark.parametrize(("k", "rows", "features"), [(2, 150, 5), (3, 40, 4), (2, 12, 30)])  # the last: wide data
def test_batched_regroupings_equal_problems_built_one_by_one(rng, k, rows, features):
    X, groups = random_groups_data(rng, k, features, rows_per_group=rows)
    groups = groups[: len(groups) - 7 * (k - 1)]  # unequal groups: the largest is found by subtraction
    X = X[: len(groups)]
    labels = tuple("abc"[:k])
    centre = X.mean(axis=0) + 0.1
    problem = GroupProblem.from_data(X, GroupCodes(groups, labels), centre=centre)
    regroupings = np.array([rng.permutation(groups) for _ in range(6)])
    stacked = problem.regroupings(X, regroupings)
    assert stacked.covariances.shape == (6, k, problem.dim, problem.dim) and stacked.n_groups == k
    prepared = problem.regrouping_rows(X)  # worked out once for many batches: the same problems, bit for bit
    np.testing.assert_array_equal(problem.regroupings(prepared, regroupings[:3]).covariances, stacked.covariances[:3])
    model = FairPCA(2)._fit_problem(problem)
    for b, codes in enumerate(regroupings):
        single = GroupProblem.from_data(X, GroupCodes(codes, labels), centre=centre, basis=problem.basis)
        scale = np.abs(single.covariances).max()
        np.testing.assert_allclose(stacked.covariances[b], single.covariances, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(stacked.spectra[b], single.spectra, rtol=0, atol=1e-12 * scale)
        for rank in (1, 2):
            np.testing.assert_allclose(stacked.losses(problem.reduce(model.map_), rank)[b],
                                       single.losses(single.reduce(model.map_), rank), rtol=0, atol=1e-11 * scale)


@pytest.mark.parametrize("seed", [0, 7])
def test_gap_pvalues_equal_the_one_by_one_test(rng, seed):
    X, groups = random_groups_data(rng, 3, 6, rows_per_group=50)
    labels = ("a", "b", "c")
    sample = RowSample(X=X, codes=groups, total_rows=len(X))
    centre = X.mean(axis=0)
    problem = GroupProblem.from_data(X, GroupCodes(groups, labels), centre=centre)
    models = {("vanilla", 1): PCA(1)._fit_problem(problem), ("fair_eig", 2): FairPCA(2)._fit_problem(problem),
              ("fair_eig", 3): FairPCA(3)._fit_problem(problem)}
    found = _gap_pvalues(sample, labels, centre, models, seed)
    reference = _one_by_one_pvalues(sample, labels, centre, models, seed)
    assert set(found) == set(models) and all(set(pairs) == {(0, 1), (0, 2), (1, 2)} for pairs in found.values())
    for key, pairs in found.items():
        for pair, null in pairs.items():
            expected = reference[key][pair]
            assert null.pvalue == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-300)
            assert null.mean == pytest.approx(expected.mean, rel=1e-9, abs=1e-12) and null.sd == pytest.approx(expected.sd, rel=1e-9)
            assert 0 < null.pvalue <= 1


def test_permutation_pvalue_two_sided_with_a_normal_tail_beyond_the_permutations():
    """Inside the permuted values: the empirical two-sided p-value, 2(1 + count)/(1 + P); beyond
    them all: the normal fit's tail, which can go below 2/(1 + P) — what Holm over many pairs and
    ranks needs — but never above it."""
    permuted = np.random.default_rng(3).normal(size=200)
    inside = float(np.sort(permuted)[189])  # 11 values at or above it, itself included
    assert permutation_pvalue(inside, permuted) == pytest.approx(2 * (1 + 11) / 201)
    assert permutation_pvalue(-inside, permuted) == pytest.approx(2 * (1 + np.count_nonzero(permuted <= -inside)) / 201)
    beyond = permutation_pvalue(6.0, permuted)
    mean, sd = permuted.mean(), permuted.std(ddof=1)
    assert beyond == pytest.approx(2 * norm.sf((6.0 - mean) / sd)) and beyond < 2 / 201
    assert permutation_pvalue(0.0, np.zeros(5) + 1.0) == pytest.approx(2 / 6)  # no spread: the empirical bound
