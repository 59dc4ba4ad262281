"""The reader counts each numeric column's missing cells; preparing trusts those counts."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

from fairaudit import prepare, read_table

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
