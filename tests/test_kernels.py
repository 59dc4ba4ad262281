"""The RBF kernel in cache-sized row blocks (:mod:`fairaudit.kernels`) against the distance formula."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from fairaudit import kernels


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rbf_in_blocks_equals_the_distance_formula(dtype, monkeypatch):
    """Against ``exp(−γ · cdist²)``: within 1e-12 in float64 and 2e-6 in float32, whatever the
    block size, with 1 on the diagonal of a kernel with itself and nothing above 1."""
    rng = np.random.default_rng(11)
    X, Y = rng.normal(size=(257, 7)), rng.normal(size=(33, 7))
    reference = np.exp(-0.3 * cdist(X, Y, "sqeuclidean"))
    tolerance = 1e-12 if dtype == np.float64 else 2e-6
    for block_bytes in (1, 4096, 2**18):
        monkeypatch.setattr(kernels, "BLOCK_BYTES", block_bytes)
        K = kernels.rbf(X.astype(dtype), Y.astype(dtype), 0.3)
        assert K.dtype == dtype
        np.testing.assert_allclose(K, reference, rtol=0, atol=tolerance)
        own = kernels.rbf(X.astype(dtype), X.astype(dtype), 0.3)
        np.testing.assert_allclose(np.diag(own), 1.0, rtol=0, atol=tolerance)
        assert own.max() <= 1.0


def test_scratch_blocks_cover_every_row_once(monkeypatch):
    """Without ``out`` the blocks share one scratch array; read as they come, they are the kernel."""
    monkeypatch.setattr(kernels, "BLOCK_BYTES", 8 * 50 * 4)  # 4 rows per block
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 3))
    full = kernels.rbf(X, X, 0.5)
    seen = np.zeros_like(full)
    for rows, block in kernels.rbf_row_blocks(X, X, 0.5):
        assert block.shape[0] <= 4
        seen[rows] = block
    np.testing.assert_array_equal(seen, full)


@pytest.mark.parametrize("block_bytes", [8, 8 * 7 * 7, 2**18])
def test_symmetric_blocks_cover_the_upper_triangle_once(block_bytes, monkeypatch):
    """The blocks on and above the diagonal cover each cell of the upper triangle once (a diagonal
    block is computed whole), whatever the block size (one cell, a size that does not divide the
    rows, one block); mirrored, they are the whole kernel; and the CP family's ``K @ right`` and
    ``‖K‖²`` from them equal the full kernel's."""
    from fairaudit.cpd._kernels import symmetric_product

    monkeypatch.setattr(kernels, "BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(45, 3))
    full = kernels.rbf(X, X, 0.7)
    seen = np.zeros_like(full)
    hits = np.zeros(full.shape, dtype=int)
    for rows, columns, block in kernels.rbf_symmetric_blocks(X, 0.7):
        assert rows.start <= columns.start
        seen[rows, columns] = block
        hits[rows, columns] += 1
    assert np.array_equal(np.triu(hits), np.triu(np.ones_like(hits)))
    if block_bytes < 2**18:  # several blocks: the cells below the diagonal blocks are not computed
        assert hits.sum() < 0.7 * hits.size
    upper = np.triu(seen)
    np.testing.assert_allclose(upper + np.triu(upper, 1).T, full, rtol=0, atol=1e-12)
    right = rng.normal(size=(45, 4))
    product, sq_norm = symmetric_product(X, 0.7, right, norm=True)
    np.testing.assert_allclose(product, full @ right, rtol=1e-12, atol=1e-12)
    assert sq_norm == pytest.approx(float(np.sum(full * full)), rel=1e-12)


def test_centre_with_counts_is_the_centred_kernel_of_the_repeated_rows():
    """``centre(K, counts)`` over the distinct rows, weighted by ``pair_weighted``, gives the
    Frobenius products of ``H K H`` over the repeated rows; without counts it is ``H K H``."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(9, 3))
    counts = np.array([1, 3, 1, 2, 1, 1, 4, 1, 2])
    repeated = np.repeat(X, counts, axis=0)
    n = repeated.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    K_full, K = kernels.rbf(repeated, repeated, 0.4), kernels.rbf(X, X, 0.4)
    centred_full = H @ K_full @ H
    centred = kernels.centre(K, counts)
    np.testing.assert_allclose(centred[np.repeat(np.arange(9), counts)][:, np.repeat(np.arange(9), counts)], centred_full, atol=1e-12)
    A, A_full = kernels.rbf(X, X, 1.3), kernels.rbf(repeated, repeated, 1.3)
    assert np.sum(A * kernels.pair_weighted(centred, counts)) == pytest.approx(np.sum(A_full * centred_full), rel=1e-12)
    H9 = np.eye(9) - np.ones((9, 9)) / 9
    np.testing.assert_allclose(kernels.centre(K), H9 @ K @ H9, atol=1e-12)
    assert kernels.pair_weighted(K, None) is K


def test_repeated_rows_are_the_distinct_rows_with_float_counts_or_none():
    """``repeated_rows``: the distinct rows in first-seen order, their counts (floats, the weights
    of ``centre``), each row's distinct row; ``None`` when every row is distinct."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(7, 3))
    assert kernels.repeated_rows(X) is None
    order = np.array([2, 0, 2, 5, 0, 2, 6])
    rows, counts, inverse = kernels.repeated_rows(X[order])
    np.testing.assert_array_equal(rows, X[[2, 0, 5, 6]])
    assert counts.dtype == float and counts.tolist() == [3.0, 2.0, 1.0, 1.0]
    np.testing.assert_array_equal(rows[inverse], X[order])


def test_centred_weighted_is_the_centred_kernel_and_its_pair_weighted_copy():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(6, 2))
    K = kernels.rbf(X, X, 0.7)
    counts = np.array([2.0, 1.0, 3.0, 1.0, 1.0, 2.0])
    centred, weighted = kernels.centred_weighted(K, counts)
    np.testing.assert_array_equal(centred, kernels.centre(K, counts))
    np.testing.assert_array_equal(weighted, kernels.pair_weighted(kernels.centre(K, counts), counts))
    centred, weighted = kernels.centred_weighted(K, None)
    np.testing.assert_array_equal(centred, kernels.centre(K))
    assert weighted is centred
