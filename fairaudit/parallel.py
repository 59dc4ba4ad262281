"""Independent pieces of a family's audit on a few threads (the measurements of its fits).

The feature-selection and CP families measure every fit separately — k-means runs, kernel
alignments, the CP metrics — pure NumPy functions of one fit whose large operations release the
GIL. :func:`map_threads` runs such a function over the fits on ``n_jobs`` threads and returns the
results in the fits' order, so that the records a family writes from them are the same, in the
same order, as one thread's; :func:`worker_limits` is what the calling thread holds while any
worker threads run (the CP family's fit-and-measure workers too). The shared representation
metrics of many fits (:func:`fairaudit.audit.representations_metrics`) run through it as well.

Thread limits. Every pool here (BLAS and OpenMP) is held at one thread while the workers run.
threadpoolctl's limits are process-wide and each context restores on exit what it found on
entry, so workers entering and leaving their own one-thread limits (the leakage test's, the CP
kernels') in any order would otherwise leave a pool at the wrong size; under the outer limit
every one of them finds and restores 1. One BLAS thread per worker is also what the families
measured fastest for these thin products (``fairaudit.cpd._kernels.BLAS_THREADS``). Warning
filters are process-wide as well: the caller's are restored when the workers are done.
Functions given to :func:`map_threads` must not depend on warnings being recorded per thread.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .linalg import blas_threads

T = TypeVar("T")
R = TypeVar("R")

MEASURE_THREADS = min(2, os.cpu_count() or 1)
"""Threads measuring a family's fits (the two cores the product is measured on)."""


@contextlib.contextmanager
def worker_limits():
    """Hold every thread pool at one thread and keep the caller's warning filters while worker
    threads run (module docstring): enter it in the thread that starts the workers."""
    # Warning filters are process-wide too (Python 3.11): a worker's ``catch_warnings`` (scikit-learn
    # classifiers' fits) can leave another worker's copy installed on leaving; this block restores
    # the caller's filters whatever the workers did.
    with blas_threads(1, user_api=None), warnings.catch_warnings():
        yield


def map_threads(function: Callable[[T], R], items: Iterable[T], n_jobs: int | None = None) -> list[R]:
    """``[function(item) for item in items]`` on ``n_jobs`` threads (inline for one; ``None``:
    :data:`MEASURE_THREADS`), in order.

    The first exception a call raises is raised here once the calls already running have
    finished; the calls not yet started are cancelled."""
    items = list(items)
    n_jobs = MEASURE_THREADS if n_jobs is None else n_jobs
    if n_jobs <= 1 or len(items) <= 1:
        return [function(item) for item in items]
    with worker_limits():
        pool = ThreadPoolExecutor(max_workers=min(n_jobs, len(items)), thread_name_prefix="fairaudit-measure")
        try:
            futures = [pool.submit(function, item) for item in items]
            return [future.result() for future in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
