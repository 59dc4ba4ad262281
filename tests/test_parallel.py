"""Measurements on threads (:mod:`fairaudit.parallel`): the same results, in the same order, as
one thread, errors passed on, and the thread pools left as they were found."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from fairaudit.audit import AuditConfig, Recorder, run_audit
from fairaudit.data import AuditData
from fairaudit.parallel import map_threads


class Entries(Recorder):
    """Every record written, in order."""

    def __init__(self):
        self.entries = []

    def add(self, variant, rank, metric, value, group=""):
        self.entries.append((variant, rank, metric, value, group))


def test_map_threads_keeps_the_order_and_uses_the_threads():
    names = set()

    def slow_square(x):
        names.add(threading.current_thread().name)
        time.sleep(0.01 * (5 - x % 5))  # later items finish first
        return x * x

    assert map_threads(slow_square, range(10), n_jobs=2) == [x * x for x in range(10)]
    assert len(names) == 2
    assert map_threads(slow_square, range(4), n_jobs=1) == [0, 1, 4, 9]


def test_map_threads_raises_the_first_error():
    def fails_on_three(x):
        if x == 3:
            raise ValueError("three")
        return x

    with pytest.raises(ValueError, match="three"):
        map_threads(fails_on_three, range(8), n_jobs=2)


def test_thread_pools_are_left_as_they_were_found():
    from fairaudit.linalg import blas_threads

    before = [(pool["user_api"], pool["num_threads"]) for pool in threadpool_info()]

    def limited(x):
        with blas_threads(1, user_api=None):  # what the leakage test does inside every call
            time.sleep(0.001 * (x % 3))
        return x

    map_threads(limited, range(20), n_jobs=2)
    assert [(pool["user_api"], pool["num_threads"]) for pool in threadpool_info()] == before


@pytest.mark.parametrize("method", ["nmf", "fs", "cpd"])
def test_family_records_are_the_same_in_the_same_order_on_one_thread(method, monkeypatch):
    """Each family's measurements on two threads give the records one thread gives, bit for bit
    and row for row (the leakage test, RBF MMD², k-means and kernels are pure functions of a fit)."""
    import fairaudit.fs.audit as fs_audit
    import fairaudit.parallel as parallel

    monkeypatch.setattr(fs_audit, "measure_threads", lambda alignment: None)  # two threads whatever the kernel
    rng = np.random.default_rng(3)
    X = np.abs(rng.normal(size=(160, 5))) + rng.random((160, 1))
    groups = np.where(np.arange(160) % 4 == 0, "b", "a")
    data = AuditData.from_arrays(X, groups)
    config = AuditConfig(methods=(method,), ranks=(1, 2), bootstrap=0)
    two = run_audit(data, config).records
    monkeypatch.setattr(parallel, "MEASURE_THREADS", 1)
    config_one = AuditConfig(methods=(method,), ranks=(1, 2), bootstrap=0, options={"cpd": {"n_jobs": 1}} if method == "cpd" else {})
    one = run_audit(data, config_one).records
    keep = lambda r: r[r.metric != "seconds"].reset_index(drop=True)  # noqa: E731
    assert keep(two)[["variant", "rank", "group", "metric"]].equals(keep(one)[["variant", "rank", "group", "metric"]])
    np.testing.assert_array_equal(keep(two).value.to_numpy(), keep(one).value.to_numpy())


def test_cp_measurements_taken_during_the_fits_equal_measuring_afterwards():
    """The CP audit measures each fit on the workers while the other fits run
    (``fits.shared["measured"]``); measuring the same fits afterwards gives the same records."""
    from fairaudit.audit import RecordSink
    from fairaudit.cpd.audit import CPDAudit

    from .conftest import two_population_tensor

    X, groups = two_population_tensor(shape=(40, 6, 5), true_rank=3, random_state=2)
    data = AuditData.from_tensor(X, groups)
    for replicate in (False, True):
        family = CPDAudit(data, AuditConfig(methods=("cpd",), ranks=(1, 2), options={"cpd": {"n_lambdas": 3, "n_epochs": 40}}), RecordSink("cpd"))
        rows = np.arange(40)
        fits = family.fit(rows)
        if replicate:
            rows = np.sort(np.random.default_rng(0).choice(40, 40))
            fits = family.fit(rows, warm=fits, replicate=True, seed=np.random.SeedSequence(1))
        assert fits.shared["measured"][0] is replicate
        during, after = Entries(), Entries()
        family.measure(fits, rows, during, replicate=replicate)
        fits.shared.pop("measured")
        family.measure(fits, rows, after, replicate=replicate)
        assert len(during.entries) >= 5 * len(fits.models)
        np.testing.assert_equal(during.entries, after.entries)  # NaN equal to NaN
