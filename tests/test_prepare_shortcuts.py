"""Preparing without passes it can spare: the reader's missing-cell counts, a constant check that
stops at the first two different cells, the accounting in one count — the same results."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

from fairaudit import prepare, read_table
from fairaudit.data._accounting import DROP_REASONS, NO_GROUP, group_entries

from .test_reading import messy_csvs


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messy_csvs())
def test_the_readers_counts_are_the_missing_cells(raw):
    try:
        table = read_table(raw, name="t.csv")
    except Exception:  # a file the reader refuses: nothing counted
        return
    for column in table.columns:
        if table.is_numeric(column):
            assert table.missing_count(column) == int(np.isnan(table.numbers(column)).sum())


def test_counted_columns_prepare_as_scanned_ones():
    raw = b"a,b,c,g\n1,,3,x\n4,5,6,y\n7,8,,x\n1,2,3,y\n5,6,7,x\n2,4,8,x\n3,1,1,y\n"
    counted = read_table(raw, name="t.csv")
    assert counted._missing == {"a": 0, "b": 1, "c": 1}  # the fast path counted them
    scanned = read_table(raw, name="t.csv")
    scanned._missing.clear()  # as a table read otherwise: counted on demand
    for missing in ("drop", "mean"):
        a, b = (prepare(t, sensitive="g", missing=missing) for t in (counted, scanned))
        np.testing.assert_array_equal(a.X_raw, b.X_raw)
        assert a.accounting == b.accounting and a.log == b.log


def test_a_column_that_varies_only_past_the_probe_is_kept():
    rows = [f"{1.0 if i < 100 else 2.0},{i % 7},{'x' if i % 2 else 'y'}" for i in range(200)]
    constant = [f"3,{i % 7},{'x' if i % 2 else 'y'}" for i in range(200)]
    late = prepare(read_table(("a,b,g\n" + "\n".join(rows)).encode(), name="t.csv"), sensitive="g")
    assert late.feature_names == ("a", "b")
    flat = prepare(read_table(("a,b,g\n" + "\n".join(constant)).encode(), name="t.csv"), sensitive="g")
    assert flat.feature_names == ("b",) and flat.accounting["excluded"][-1]["reason"] == "constant"


def _entries_one_group_at_a_time(read_codes, read_labels, reasons, weights=None):
    """The accounting as first written: a pass per group (the reference)."""
    entries = []
    for g, label in enumerate(list(read_labels) + [NO_GROUP]):
        rows = read_codes == (g if g < len(read_labels) else -1)
        w = None if weights is None else weights[rows]
        n = int(rows.sum() if w is None else w.sum())
        if n == 0:
            continue
        counts = np.rint(np.bincount(reasons[rows], weights=w, minlength=len(DROP_REASONS) + 1)).astype(np.int64)
        dropped = {reason: int(counts[i + 1]) for i, reason in enumerate(DROP_REASONS) if counts[i + 1]}
        entries.append({"group": label, "rows_read": n, "rows_used": int(counts[0]), "dropped": dropped})
    return entries


def test_group_entries_count_what_a_pass_per_group_counts(rng):
    for _ in range(20):
        n, k = int(rng.integers(1, 300)), int(rng.integers(1, 5))
        codes = rng.integers(-1, k, size=n)
        codes[codes == k - 1] = -1 if rng.random() < 0.3 else k - 1  # sometimes a group with no row
        reasons = rng.integers(0, len(DROP_REASONS) + 1, size=n)
        weights = rng.integers(0, 50, size=n).astype(float)
        labels = [f"g{i}" for i in range(k)]
        for w in (None, weights):
            assert group_entries(codes, labels, reasons, w) == _entries_one_group_at_a_time(codes, labels, reasons, w)
