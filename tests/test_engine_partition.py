"""Partition summaries of the dask engine (fairaudit.engine._partition): pure NumPy/Arrow, so these
run without dask. Any partitioning and any merge order give the same summary."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from fairaudit.data._table import table_from_arrow
from fairaudit.engine import GroupMoments
from fairaudit.engine._partition import PartitionPlan, merge_summaries, row_hashes, smallest_rows, summarise_table

PLAN = PartitionPlan(name="t", features=("x", "y", "z"), sensitive=("g", "h"), label="lab", sample_rows=15)


def frame(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n) * 3 + 1
    x[rng.random(n) < 0.05] = np.nan  # missing feature cells
    g = rng.choice(["a", "b", "c"], size=n).astype(object)
    g[rng.random(n) < 0.03] = None  # rows without a group
    lab = rng.choice(["u", "v"], size=n).astype(object)
    lab[rng.random(n) < 0.03] = None
    return {"x": x, "y": rng.normal(size=n) * 1e3, "z": rng.integers(0, 5, size=n).astype(float), "g": g,
            "h": rng.integers(1, 3, size=n).astype(float), "lab": lab}


def summary_of(columns: dict, start: int, stop: int, partition: int):
    table = pa.table({k: v[start:stop] for k, v in columns.items()})
    return summarise_table(table_from_arrow(table, name="t", first_row=start + 1), PLAN, partition)


def split(columns: dict, cuts: list[int]):
    bounds = [0, *sorted(set(cuts)), len(columns["x"])]
    return [summary_of(columns, a, b, i) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)) if b > a]


def tree(parts):
    while len(parts) > 1:
        parts = [merge_summaries(parts[i], parts[i + 1], PLAN.sample_rows) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def by_key(summary) -> dict:
    out = {}
    for i, key in enumerate(summary.keys):
        scale = np.ldexp(1.0, summary.exponents)
        out[key] = (int(summary.rows[i]), int(summary.no_label[i]), int(summary.missing_cells[i]), summary.moments.counts[i],
                    summary.moments.means[i] * scale, summary.moments.scatter[i] * np.outer(scale, scale))
    return out


def assert_same(a, b):
    ka, kb = by_key(a), by_key(b)
    assert set(ka) == set(kb)
    for key in ka:
        assert ka[key][:4] == kb[key][:4], key
        np.testing.assert_allclose(ka[key][4], kb[key][4], atol=1e-9)
        np.testing.assert_allclose(ka[key][5], kb[key][5], rtol=1e-10, atol=1e-6)
    np.testing.assert_array_equal(a.missing, b.missing)
    assert a.rows_missing == b.rows_missing


COLUMNS = frame(400)
WHOLE = summary_of(COLUMNS, 0, 400, 0)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 399), max_size=8))
def test_any_partitioning_gives_the_same_counts_and_moments(cuts):
    assert_same(tree(split(COLUMNS, cuts)), WHOLE)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 399), min_size=3, max_size=6), st.randoms(use_true_random=False))
def test_merging_is_associative_and_order_free(cuts, random):
    parts = split(COLUMNS, cuts)
    left = tree(parts)
    shuffled = list(parts)
    random.shuffle(shuffled)
    right = tree(shuffled)
    assert_same(left, right)
    assert sorted(left.candidates.order.tolist()) == sorted(right.candidates.order.tolist())  # the same sample candidates


def test_moments_are_those_of_the_complete_rows_per_key():
    x, y, z = COLUMNS["x"], COLUMNS["y"], COLUMNS["z"]
    complete = ~np.isnan(x) & np.array([v is not None for v in COLUMNS["g"]]) & np.array([v is not None for v in COLUMNS["lab"]])
    for i, key in enumerate(WHOLE.keys):
        if None in key:
            continue
        rows = complete & (COLUMNS["g"] == key[0]) & (COLUMNS["h"] == key[1])
        expected = GroupMoments.from_rows(np.column_stack([x, y, z])[rows], np.zeros(int(rows.sum()), dtype=int), n_groups=1)
        np.testing.assert_allclose(WHOLE.moments.means[i], expected.means[0], atol=1e-10)
        np.testing.assert_allclose(WHOLE.moments.scatter[i], expected.scatter[0], rtol=1e-10)
        assert WHOLE.rows[i] == int(((COLUMNS["g"] == key[0]) & (COLUMNS["h"] == key[1])).sum())


def test_sample_candidates_are_the_smallest_hashes_of_each_key():
    for i in range(len(WHOLE.keys)):
        mine = WHOLE.candidates.key == i
        assert mine.sum() <= PLAN.sample_rows
    keys = np.array([0, 0, 0, 1, 1, 2])
    hashes = np.array([5, 1, 3, 9, 2, 7], dtype=np.uint64)
    assert sorted(smallest_rows(keys, hashes, 2).tolist()) == [1, 2, 3, 4, 5]  # key 0: the two smallest of 5, 1, 3
    # the hash is a function of (seed, partition, row) only
    np.testing.assert_array_equal(row_hashes(0, 3, np.arange(5)), row_hashes(0, 3, np.arange(5)))
    assert not np.array_equal(row_hashes(0, 3, np.arange(5)), row_hashes(1, 3, np.arange(5)))


def test_reading_on_several_threads_restores_the_csv_field_limit():
    """read_table lifts the csv module's process-wide field limit while it reads; partitions read
    on dask's threads at once must leave it as it was."""
    import csv
    from concurrent.futures import ThreadPoolExecutor

    from fairaudit import read_table

    raw = b'a,b\n1,"' + b"x" * 200_000 + b'"\n2,y\n'
    before = csv.field_size_limit()
    with ThreadPoolExecutor(4) as pool:
        tables = list(pool.map(lambda _: read_table(raw), range(32)))
    assert all(len(t.strings("b")[0].as_py()) == 200_000 for t in tables)
    assert csv.field_size_limit() == before


def test_replicate_moments_merge_key_by_key_whatever_each_partition_holds():
    """Bootstrap replicate moments (PartitionPlan.replicates) travel with the summary: merged, each
    key's replicate moments are the merge of that key's in every partition, replicate by replicate,
    even where partitions hold different keys in different orders. A plan without replicates
    carries none."""
    from dataclasses import replace

    plan = replace(PLAN, replicates=3, replicate_seed=5)
    columns = frame(500, seed=4)
    columns["g"][:200] = np.where(np.arange(200) % 2 == 0, "c", "b").astype(object)  # partition 0: no "a", no missing group
    parts = []
    for i, (start, stop) in enumerate([(0, 200), (200, 500)]):
        table = pa.table({k: v[start:stop] for k, v in columns.items()})
        parts.append(summarise_table(table_from_arrow(table, name="t", first_row=start + 1), plan, i))
    assert parts[0].keys != parts[1].keys[: len(parts[0].keys)]
    whole = merge_summaries(*parts, plan.sample_rows)
    assert whole.n_replicates == 3 and parts[0].n_replicates == 3
    for b in range(3):
        merged = whole.replicate_moments(b)
        for i, key in enumerate(whole.keys):
            own = [p.replicate_moments(b) for p in parts if key in p.keys]
            slots = [p.keys.index(key) for p in parts if key in p.keys]
            expected = GroupMoments(*(np.array([x]) for x in (own[0].counts[slots[0]],)), own[0].means[slots[0]][None],
                                    own[0].scatter[slots[0]][None], ("0",))
            for moments, slot in zip(own[1:], slots[1:], strict=True):
                expected = expected.merge(GroupMoments(np.array([moments.counts[slot]]), moments.means[slot][None],
                                                       moments.scatter[slot][None], ("0",)))
            assert merged.counts[i] == expected.counts[0], (b, key)
            np.testing.assert_allclose(merged.means[i], expected.means[0], rtol=1e-12)
            np.testing.assert_allclose(merged.scatter[i], expected.scatter[0], rtol=1e-10)
    again = summarise_table(table_from_arrow(pa.table({k: v[:200] for k, v in columns.items()}), name="t", first_row=1), plan, 0)
    np.testing.assert_array_equal(again.replicates.scatter, parts[0].replicates.scatter)  # the same rows and seed: the same draws
    plain = summary_of(columns, 0, 200, 0)
    assert plain.replicates is None and plain.n_replicates == 0
    assert merge_summaries(plain, summary_of(columns, 200, 500, 1), PLAN.sample_rows).replicates is None
