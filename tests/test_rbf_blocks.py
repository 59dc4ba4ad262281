"""The RBF MMD²'s bandwidth from its distance blocks: the pooled rows' median, exactly."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from fairaudit import metrics


@pytest.mark.parametrize("kind", ["normal", "ties", "mostly_zero", "one_nonzero", "nan"])
def test_the_median_of_blocks_is_the_median_of_their_values(rng, kind):
    for _ in range(30):
        blocks = [rng.normal(size=int(rng.integers(0, 400))) ** 2 for _ in range(int(rng.integers(1, 4)))]
        if kind == "ties":
            blocks = [np.round(block, 1) for block in blocks]
        elif kind == "mostly_zero":
            blocks = [np.where(rng.random(block.size) < 0.7, 0.0, block) for block in blocks]
        elif kind == "one_nonzero":
            blocks = [np.zeros_like(block) for block in blocks]
            if blocks[0].size:
                blocks[0][0] = 4.0
        elif kind == "nan" and blocks[0].size:
            blocks[0][0] = np.nan
        joined = np.concatenate(blocks)
        expected = metrics._median_of_squared(joined.copy())
        kept = [block.copy() for block in blocks]
        found = metrics._median_of_blocks(blocks)
        assert found == expected or (found != found and expected != expected)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(blocks, kept, strict=True))  # left in their order


def test_order_statistics_widen_a_bracket_the_sample_misses():
    block = np.concatenate([np.zeros(100_000), np.arange(1.0, 101.0)])  # a strided sample sees only zeros
    values = np.sort(block)
    assert metrics._order_statistics([block], (100_049, 100_050)) == (values[100_049], values[100_050])


def test_the_rbf_mmd2_equals_the_pooled_bandwidths_formula(rng):
    """The definition written out: σ the median of the pooled rows' distances (their pdist)."""
    groups = np.repeat([0, 1, 2], [60, 45, 30])
    Z = rng.normal(size=(135, 3)) + 0.4 * groups[:, None]
    sigma = np.median(pdist(Z))
    K = np.exp(-((Z[:, None, :] - Z[None, :, :]) ** 2).sum(axis=2) / (2 * sigma**2))
    pairs = [(a, b) for a in range(3) for b in range(a + 1, 3)]
    def mean(a, b):
        return K[np.ix_(groups == a, groups == b)].mean()
    expected = max(mean(a, a) + mean(b, b) - 2 * mean(a, b) for a, b in pairs)
    assert metrics.mmd2_rbf(Z, groups, max_rows_per_group=None) == pytest.approx(expected, rel=1e-12)
