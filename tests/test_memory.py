"""The read path and the in-process engine copy no more than they need.

The PCA audit of a large CSV holds the numbers once (the reader's float64 block, which the
prepared matrix and the engine read as views). These tests pin that down on small data with
``tracemalloc`` (NumPy's allocations are traced; Arrow's are not), and check that the shortcuts
taken for memory give what the general code gives.
"""

from __future__ import annotations

import functools
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import fairaudit.data._table as table_module
from fairaudit import AuditConfig, AuditData, prepare, read_table, run_audit
from fairaudit.data._scaling import column_peaks, overflow_exponents
from fairaudit.engine import LocalEngine
from fairaudit.pca.audit import _every_row_once


@functools.lru_cache(maxsize=4)
def _csv(rows: int, seed: int = 0, columns: int = 6) -> bytes:
    """Numbers with 5 decimals and a quoted group column, written by Arrow as
    ``benchmarks/bench_read.write_csv`` writes the benchmark's file."""
    rng = np.random.default_rng(seed)
    table = {f"x{j}": np.round(rng.normal(size=rows) * rng.uniform(0.5, 5), 5) for j in range(columns)}
    table["group"] = np.where(rng.random(rows) < 0.4, "a", "b")
    sink = pa.BufferOutputStream()
    pacsv.write_csv(pa.table(table), sink)
    return sink.getvalue().to_pybytes()


def _traced_peak(step):
    """(result, peak bytes NumPy and Python allocated during ``step`` above what was held before)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = step()
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_column_peaks_are_the_largest_magnitudes():
    X = np.array([[1.0, -5.0, np.nan, np.nan, -np.inf], [3.0, 2.0, 1.0, np.nan, 2.0]])
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        np.testing.assert_array_equal(column_peaks(X), np.nanmax(np.abs(X), axis=0))
    np.testing.assert_array_equal(column_peaks(X, skip_nan=False), np.max(np.abs(X), axis=0))
    huge = np.array([[1e308, 2.0], [-1.5e308, -3.0]])
    np.testing.assert_array_equal(overflow_exponents(huge), [1024, 0])


def test_the_overflow_check_makes_no_copy_of_the_matrix():
    X = np.asfortranarray(np.random.default_rng(1).normal(size=(100_000, 8)))
    _, peak = _traced_peak(lambda: overflow_exponents(X))
    assert peak < 0.05 * X.nbytes  # np.abs(X) was a whole copy


@pytest.mark.parametrize("rows", [np.arange(7), np.arange(200_000), np.arange(6), np.array([0, 1, 3, 2]),
                                  np.array([0, 0, 1, 2]), np.r_[np.arange(70_000), 5, np.arange(70_001, 200_000)]])
def test_every_row_once_is_array_equal_to_the_range(rows):
    for n in (len(rows), len(rows) + 1):
        assert _every_row_once(rows, n) == (len(rows) == n and np.array_equal(rows, np.arange(n)))


def test_the_sample_of_every_row_is_the_sample_of_unit_weights():
    data = prepare(read_table(_csv(30_000)), sensitive="group")
    engine = LocalEngine()
    X = data.X_raw
    shift, scale = X.mean(axis=0), 1 / X.std(axis=0)
    for max_rows in (0, 500, 10_000, 50_000):
        plain = engine._sample(data, X, max_rows, 3, shift, scale)
        weighted = engine._sample(data, X, max_rows, 3, shift, scale, weights=np.ones(data.n_rows))
        np.testing.assert_array_equal(plain.X, weighted.X)
        np.testing.assert_array_equal(plain.codes, weighted.codes)
        assert plain.total_rows == weighted.total_rows


def _marginal(step, sizes=(100_000, 200_000)):
    """How much more ``step(rows)`` allocates at the larger size than at the smaller: what grows
    with the rows (a copy of the data does), not the fixed buffers of a piece or a block."""
    (small, peak_small), (large, peak_large) = (_traced_peak(lambda n=n: step(n)) for n in sizes)
    return small, large, peak_large - peak_small


def test_reading_and_preparing_hold_the_numbers_once():
    raws = {n: _csv(n, columns=20) for n in (100_000, 200_000)}
    small, large, grown = _marginal(lambda n: read_table(raws[n], name="t.csv"))
    block = large._block.nbytes - small._block.nbytes
    assert grown < 1.1 * block, (grown, block)  # the block, and no second copy of it
    tables = {n: read_table(raws[n], name="t.csv") for n in raws}
    small, large, grown = _marginal(lambda n: prepare(tables[n], sensitive="group"))
    assert np.shares_memory(large.X_raw, tables[200_000]._block)
    assert grown < 0.5 * block, (grown, block)  # group codes and masks (~45 bytes a row); no matrix


def test_the_engine_summarises_without_copying_the_matrix():
    datasets = {n: prepare(read_table(_csv(n, columns=20)), sensitive="group") for n in (100_000, 200_000)}
    small, large, grown = _marginal(lambda n: LocalEngine().summarise(datasets[n], sample_rows=10_000, random_state=0))
    assert large.moments.total == 200_000
    assert grown < 0.1 * (datasets[200_000].X_raw.nbytes - datasets[100_000].X_raw.nbytes), grown


def test_pca_records_are_the_same_whichever_reader_read_the_file():
    """The fast path's table (pieces, NumPy quote check) gives the audit the diagnostic reader's
    records, bit for bit."""
    raw = _csv(3_000, seed=4)
    config = AuditConfig(methods=("pca",), ranks=(1, 3), variants=("vanilla", "fair_eig", "cov_fair"), bootstrap=0)
    fast = run_audit(prepare(read_table(raw, name="t.csv"), sensitive="group"), config).records
    table_module.FAST_PATH = False
    try:
        slow = run_audit(prepare(read_table(raw, name="t.csv"), sensitive="group"), config).records
    finally:
        table_module.FAST_PATH = True
    key = ["method", "variant", "rank", "group", "metric"]
    fast, slow = fast.sort_values(key).reset_index(drop=True), slow.sort_values(key).reset_index(drop=True)
    fast, slow = fast[fast.metric != "seconds"], slow[slow.metric != "seconds"]
    assert fast[key].equals(slow[key])
    np.testing.assert_array_equal(fast["value"].to_numpy(), slow["value"].to_numpy())


def test_audit_data_from_arrays_is_unaffected():
    X = np.random.default_rng(2).normal(size=(400, 5))
    data = AuditData.from_arrays(X, np.repeat(["a", "b"], 200))
    summary = LocalEngine().summarise(data, sample_rows=100, random_state=0)
    assert summary.sample.size == 100 and summary.moments.total == 400


def test_a_table_handed_over_lets_go_of_its_columns():
    """prepare(reuse_table=True) (load, the command line) keeps what the matrix uses and lets the
    rest of the table go — its text columns were ~14 MB of Arrow memory held through an audit of
    1,000,000 rows — even when the features were adjacent and nothing had to move."""
    from fairaudit import FairAuditError

    table = read_table(_csv(2_000))
    data = prepare(table, sensitive="group", reuse_table=True)
    assert np.shares_memory(data.X_raw, table._block) and data.lines.tolist() == list(range(2, 2_002))
    assert not table._text and not table._numeric
    with pytest.raises(FairAuditError, match="handed over"):
        table.strings("group")
    kept = read_table(_csv(2_000))
    prepare(kept, sensitive="group")  # the dashboard prepares one table several times
    assert kept.strings("group")[0].as_py() in ("a", "b")
