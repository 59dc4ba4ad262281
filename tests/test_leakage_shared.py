"""Leakage tests of many representations sharing their draws give what each test gives alone."""

from __future__ import annotations

import numpy as np
import pytest

from fairaudit import metrics
from fairaudit.parallel import map_threads


def _representations(rng, groups):
    base = rng.normal(size=(len(groups), 6)) + 0.2 * groups[:, None] * np.arange(6)
    return [base[:, :1], base[:, :3], base, rng.normal(size=(len(groups), 2)) * (1 + 0.3 * groups[:, None])]


def _same(a: metrics.LeakageEstimate, b: metrics.LeakageEstimate) -> bool:
    return all(x == y or (x != x and y != y) for x, y in zip(vars(a).values(), vars(b).values(), strict=True))


@pytest.mark.parametrize("max_rows", [None, 500])  # 500: a stratified subsample, drawn once too
def test_shared_draws_give_each_test_its_own_values(rng, max_rows):
    groups = np.repeat([0, 1, 2], [400, 250, 150])
    representations = _representations(rng, groups)
    alone = [metrics.leakage_test(Z, groups, max_rows=max_rows, random_state=4) for Z in representations]
    nested_alone = metrics.leakage_tests(representations[2], groups, [1, 3, 6], max_rows=max_rows, random_state=4)
    with metrics.shared_draws():
        together = map_threads(lambda Z: metrics.leakage_test(Z, groups, max_rows=max_rows, random_state=4), representations, 2)
        nested = metrics.leakage_tests(representations[2], groups, [1, 3, 6], max_rows=max_rows, random_state=4)
        more = metrics.leakage_test(representations[0], groups, max_rows=max_rows, random_state=4, permutations=80)  # more orders than drawn so far
        assert len(metrics._SHARED_DRAWS) == 1
    assert not metrics._SHARED_DRAWS  # forgotten when the block ends
    assert all(_same(a, b) for a, b in zip(alone, together, strict=True))
    assert all(_same(a, b) for a, b in zip(nested_alone, nested, strict=True))
    assert _same(more, metrics.leakage_test(representations[0], groups, max_rows=max_rows, random_state=4, permutations=80))


def test_draws_are_shared_only_for_a_seed():
    groups = np.repeat([0, 1], [40, 30])
    with metrics.shared_draws():
        first = metrics._draws(groups, 5, 3, None, 1)
        assert metrics._draws(groups.copy(), 5, 3, None, 1) is first  # the same groups by value
        assert metrics._draws(groups, 5, 3, None, 2) is not first
        assert metrics._draws(groups, 5, 3, None, None) is not metrics._draws(groups, 5, 3, None, None)  # fresh entropy each time
    too_small = metrics._draws(np.repeat([0, 1], [40, 3]), 5, 3, None, 1)
    assert too_small.splits is None and too_small.k == 2


def test_the_nearest_class_is_argmin(rng):
    scores = rng.normal(size=(3, 50, 2, 4))
    scores[0, :5, 0, 0] = np.nan
    scores[1, :5, 1, 1] = np.nan
    scores[2, :5, :, 2] = np.nan
    scores[2, 5:8, 1, 3] = scores[2, 5:8, 0, 3]  # ties: the first class, as argmin
    np.testing.assert_array_equal(metrics._nearest(scores), scores.argmin(axis=2))
    three = rng.normal(size=(2, 20, 3, 1))
    np.testing.assert_array_equal(metrics._nearest(three), three.argmin(axis=2))


def test_scores_of_sorted_rows_are_the_balanced_accuracy(rng):
    truth = np.repeat([0, 1, 2], [7, 5, 9])
    predicted = rng.integers(0, 3, size=(4, 2, truth.size))
    accuracy, balanced = metrics._sorted_scores(predicted == truth, np.array([0, 7, 12, 21]))
    assert accuracy.tobytes() == (predicted == truth).mean(axis=-1).tobytes()
    assert balanced.tobytes() == metrics._balanced_accuracy(truth, predicted, 3).tobytes()
