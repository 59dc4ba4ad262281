"""The PCA gap test's regroupings: batched, they give the problems (and p-values) built one by one."""

from __future__ import annotations

import numpy as np
import pytest

from fairaudit.engine import RowSample
from fairaudit.groups import GroupCodes
from fairaudit.pca import PCA, FairPCA, GroupProblem
from fairaudit.pca.audit import GAP_PERMUTATIONS, _gap_pvalues, observed_gaps

from .conftest import random_groups_data


def _one_by_one_pvalues(sample, labels, centre, models, random_state):
    """The gap test as first written: a fresh problem per regrouping (the reference)."""
    observed_problem, references, observed = observed_gaps(sample, labels, centre, models)
    rng = np.random.default_rng(random_state)
    exceed = dict.fromkeys(models, 0)
    for _ in range(GAP_PERMUTATIONS):
        permuted = GroupProblem.from_data(sample.X, GroupCodes(rng.permutation(sample.codes), labels), centre=centre,
                                          basis=observed_problem.basis)
        for key, (worst, best, gap) in observed.items():
            losses = permuted.losses(permuted.reduce(references[key[1]].map_), key[1])
            exceed[key] += losses[worst] - losses[best] >= gap - 1e-12 * max(abs(gap), 1.0)
    return {key: (1 + count) / (1 + GAP_PERMUTATIONS) for key, count in exceed.items()}


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
    assert found == _one_by_one_pvalues(sample, labels, centre, models, seed)
    assert set(found) == set(models) and all(1 / (1 + GAP_PERMUTATIONS) <= p <= 1 for p in found.values())
