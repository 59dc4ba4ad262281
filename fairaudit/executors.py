"""Where independent jobs run: in this process, on local worker processes, or on a Dask cluster.

A job is a call ``function(context, job)`` of a module-level function that depends on nothing but
its arguments (the bootstrap replicates of an audit: :func:`fairaudit.audit.run_replicate`), so it
gives the same value wherever it runs; an executor only decides where, and hands each value back
as soon as it is there (:class:`Done`, with the wall seconds the call took where it ran). Three:

* :class:`SerialExecutor` — one call after the other, in this process;
* :class:`ProcessExecutor` — this process and ``n_jobs − 1`` worker processes (joblib's loky,
  which scikit-learn already brings): this process computes jobs itself while the workers start
  and between handing them work, so a short batch never waits for a worker to import NumPy (or,
  ``here=False``, ``n_jobs`` workers and this process none: the dashboard's server, which draws
  pages while an audit runs);
  workers are reused from one batch (and audit) to the next, run one BLAS/OpenMP thread each,
  and receive the context once each — written to a file and memory-mapped, not pickled into
  every job;
* :class:`DaskExecutor` — the workers of a ``distributed.Client`` (the context scattered to each
  once).

Threads would not do: two bootstrap replicates on two threads were slower than one after the
other (their short NumPy calls hold the GIL; ``docs/architecture.md``).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import shutil
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass

WORKER_IDLE_SECONDS = 300
"""Worker processes left idle this long shut down (the dashboard's server keeps them between
audits; a command's end shuts them down)."""

WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Every thread pool of a worker process at one thread: the processes are the parallelism."""

QUEUED_PER_WORKER = 2
"""Jobs handed to each worker at once: one running and one waiting, so that a worker does not
idle while this process computes a job of its own before handing it the next."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity, else the machine's count)."""
    with contextlib.suppress(AttributeError, OSError):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Done:
    """One finished job: the job, what the function returned, the wall seconds of the call where it
    ran (a worker's first call of a context does not count the context's loading), and where."""

    job: object
    value: object
    seconds: float
    where: str


Launch = Callable[[], bool]
"""Asked before every job is started: ``False`` stops starting jobs (a time budget); the jobs
already running finish and are handed back."""


def _always() -> bool:
    return True


class SerialExecutor:
    """Every job in this process, one after the other, in order."""

    streams = 1
    description = "in this process"

    def warm(self, modules: Sequence[str] = ()) -> None:
        """Nothing to start."""

    def run(self, function, context, jobs: Iterable, *, token: str | None = None, launch: Launch = _always) -> Iterator[Done]:
        for job in jobs:
            if not launch():
                return
            started = time.perf_counter()
            value = function(context, job)
            yield Done(job, value, time.perf_counter() - started, "here")

    def release(self, token: str) -> None:
        """Nothing was shipped."""

    def close(self) -> None:
        """Nothing to stop."""


class ProcessExecutor:
    """This process and ``n_jobs − 1`` loky worker processes (module docstring).

    Jobs are taken in order: this process takes the next one itself whenever every worker has
    :data:`QUEUED_PER_WORKER` jobs, and every one while the workers are still starting (importing
    NumPy, SciPy and the families: ~1.3 s each), so the values come back roughly in order and a
    batch shorter than a worker's start-up is computed here alone.

    ``here=False`` (``None``: :func:`jobs_here`): ``n_jobs`` workers take every job and this
    process none — for a process with other work while the jobs run (the dashboard's server draws
    the pages: computing replicates too, its page runs and the replicates slowed each other down,
    their short NumPy calls taking turns at the GIL).
    """

    description = "on local processes"

    def __init__(self, n_jobs: int, *, here: bool | None = None):
        self.n_jobs = max(1, int(n_jobs))
        self.here = jobs_here() if here is None else here
        self.workers = self.n_jobs - 1 if self.here else self.n_jobs
        self.streams = self.n_jobs
        self._shipped: dict[str, str] = {}  # token → the folder holding its context
        self._starting: list = []  # the workers' first tasks (their imports): not done, not ready
        self.description = f"on {self.n_jobs} processes" if self.here else f"on {self.n_jobs} worker processes"

    def _pool(self):
        return _worker_pool(self.workers)

    def warm(self, modules: Sequence[str] = ()) -> None:
        """Start the workers now (importing ``modules``), while this process does other work."""
        if self.workers:
            self._starting = start_workers(self.workers, modules)

    def _ready(self) -> bool:
        """Whether the workers have started (their imports done); started now when nobody has."""
        if not self._starting:
            self.warm()
            return False
        return all(future.done() for future in self._starting)

    def _ship(self, context, token: str) -> str:
        """The file the workers load ``context`` from (written once per token)."""
        if token not in self._shipped:
            import joblib

            folder = tempfile.mkdtemp(prefix="fairaudit-jobs-")
            path = os.path.join(folder, "context.pkl")
            joblib.dump(context, path, protocol=5)
            self._shipped[token] = folder
        return os.path.join(self._shipped[token], "context.pkl")

    def release(self, token: str) -> None:
        """Forget ``token``'s context (its file; a worker's copy goes with the next context)."""
        folder = self._shipped.pop(token, None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        """Forget every context shipped; the workers stay for the next audit (they stop when idle)."""
        for token in list(self._shipped):
            self.release(token)

    def run(self, function, context, jobs: Iterable, *, token: str | None = None, launch: Launch = _always) -> Iterator[Done]:
        if not self.workers:
            yield from SerialExecutor().run(function, context, jobs, launch=launch)
            return
        token = token or uuid.uuid4().hex
        pending = deque(jobs)
        running: dict = {}  # future → job
        pool = path = None
        try:
            while pending or running:
                for future in [f for f in running if f.done()]:
                    job = running.pop(future)
                    value, seconds = future.result()
                    yield Done(job, value, seconds, "worker")
                if pending and not launch():
                    pending.clear()
                # the last job of a batch is this process's: a short batch (the first replicates, timed) is split, not queued
                kept = 1 if self.here else 0
                while len(pending) > kept and len(running) < QUEUED_PER_WORKER * self.workers and (
                        running or self._ready() or not self.here):
                    if pool is None:
                        pool, path = self._pool(), self._ship(context, token)
                    job = pending.popleft()
                    running[pool.submit(_call, path, token, function, job)] = job
                if self.here and pending and launch():  # every worker has its jobs: compute the next one here
                    job = pending.popleft()
                    started = time.perf_counter()
                    value = function(context, job)
                    yield Done(job, value, time.perf_counter() - started, "here")
                elif running:
                    wait(list(running), return_when=FIRST_COMPLETED)
        finally:
            for future in running:  # stopped early (an exception, a cancel): what has not started is dropped
                future.cancel()


_HERE: contextvars.ContextVar[bool] = contextvars.ContextVar("fairaudit_jobs_here", default=True)


def jobs_here() -> bool:
    """Whether local jobs run in this process too, beside ``n_jobs − 1`` workers (everywhere but
    inside :func:`jobs_on_workers`)."""
    return _HERE.get()


@contextlib.contextmanager
def jobs_on_workers():
    """Within this block (this thread's context), local replicates run on ``n_jobs`` worker
    processes and none in this process: the dashboard's runs (:mod:`pages.runs`), whose server
    draws pages meanwhile. The values are the same wherever the replicates run."""
    token = _HERE.set(False)
    try:
        yield
    finally:
        _HERE.reset(token)


def _worker_pool(workers: int):
    """The loky pool of ``workers`` processes, shared by every :class:`ProcessExecutor` asking for as
    many (started on first use, reused until idle for :data:`WORKER_IDLE_SECONDS`)."""
    import warnings

    from joblib.externals.loky import get_reusable_executor

    with warnings.catch_warnings():  # another size: loky first lets the running jobs end (workers' imports; one audit at a time)
        warnings.filterwarnings("ignore", "Trying to resize an executor with running jobs", UserWarning)
        pool = get_reusable_executor(max_workers=workers, timeout=WORKER_IDLE_SECONDS, env=WORKER_ENV)
    _POOLS[id(pool)] = pool
    return pool


_POOLS: dict[int, object] = {}
"""The worker pools this process started (:func:`stop_workers`)."""


TRACKER_WARNINGS = "ignore:resource_tracker:UserWarning"
"""The warning filter (``PYTHONWARNINGS`` syntax: messages that start "resource_tracker") that
silences loky's resource tracker, a process of its own that inherits the environment: when a
command stops its workers while they are still starting (a command that fails before its audit),
the tracker may find a lock already removed and print "resource_tracker: …: FileNotFoundError"
after the command's own message (seen once in a full test run)."""


def quiet_worker_cleanup() -> None:
    """Silence the resource tracker's clean-up warnings in the worker processes this *command*
    starts (:data:`TRACKER_WARNINGS`, added to ``PYTHONWARNINGS`` before they start). For the
    command line only: a library does not change its caller's environment."""
    current = os.environ.get("PYTHONWARNINGS", "")
    if TRACKER_WARNINGS not in current.split(","):
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, (current, TRACKER_WARNINGS)))


def stop_workers() -> None:
    """Stop this process's worker processes now, whatever they are doing (a command's end: a
    command that stops before its audit does not wait for its workers' imports). Waiting for
    loky's manager thread to release the pool's locks takes milliseconds; without it, a process
    ending right after could leave one behind and loky's resource tracker printed "leaked
    semlock objects" warnings after the command's own output (seen once in three NMF commands)."""
    while _POOLS:
        _, pool = _POOLS.popitem()
        with contextlib.suppress(Exception):
            pool.shutdown(wait=True, kill_workers=True)


def start_workers(workers: int, modules: Sequence[str] = ()) -> list:
    """Start ``workers`` worker processes now, each importing ``modules``; returns the futures of
    those imports. This module imports nothing heavy (no NumPy), so a command can call this before
    its own imports: the workers then import the families while this process does
    (:mod:`fairaudit.__main__`), and a :class:`ProcessExecutor` of as many workers made later finds
    them started."""
    if _POOLS:  # the pool already started, whatever its size: asking loky for another size would resize it under a running audit
        with contextlib.suppress(Exception):
            pool = list(_POOLS.values())[-1]
            return [pool.submit(_import, tuple(modules)) for _ in range(workers)]
    pool = _worker_pool(workers)
    return [pool.submit(_import, tuple(modules)) for _ in range(workers)]


def start_workers_for(methods: str | None, *, jobs: str | int | None, bootstrap: str | int | None, here: bool = True) -> None:
    """Start the worker processes an audit of ``methods`` (comma-separated family names) with
    ``jobs`` processes and ``bootstrap`` replicates will use — none when it computes no replicates
    (``bootstrap`` 0) or runs on one process — each importing those families' modules
    (``here=False``: ``jobs`` workers, for an audit computing none of its replicates in this
    process). The values are read leniently (a command's words as typed): what cannot be read
    starts nothing."""
    from .families import FAMILIES

    try:
        if bootstrap is not None and int(bootstrap) <= 0:
            return
        processes = usable_cores() if jobs is None else int(jobs)
    except ValueError:
        return
    names = [name.strip() for name in str(methods or "").split(",")]
    modules = [FAMILIES[name].split(":")[0] for name in names if name in FAMILIES]
    workers = processes - 1 if here else processes
    if workers > 0 and modules:
        start_workers(workers, modules)


class DaskExecutor:
    """The workers of a ``distributed.Client``: the context scattered to every worker once, every
    job submitted at once in order, values handed back as they complete."""

    def __init__(self, client, *, own: bool = False):
        self.client, self.own = client, own
        self.streams = max(1, sum(client.nthreads().values()))
        self.description = f"on the Dask cluster at {client.scheduler.address} ({self.streams} threads)"
        self._shipped: dict[str, object] = {}

    def warm(self, modules: Sequence[str] = ()) -> None:
        """The cluster's workers are running already."""

    def release(self, token: str) -> None:
        future = self._shipped.pop(token, None)
        if future is not None:
            with contextlib.suppress(Exception):
                self.client.cancel(future)

    def close(self) -> None:
        """Forget the scattered contexts; a client made here for an address is closed."""
        for token in list(self._shipped):
            self.release(token)
        if self.own:
            with contextlib.suppress(Exception):
                self.client.close()

    def run(self, function, context, jobs: Iterable, *, token: str | None = None, launch: Launch = _always) -> Iterator[Done]:
        from distributed import as_completed

        token = token or uuid.uuid4().hex
        if token not in self._shipped:
            self._shipped[token] = self.client.scatter(context, broadcast=True, hash=False)
        shipped = self._shipped[token]
        jobs = list(jobs)
        futures = {self.client.submit(_dask_call, shipped, function, job, pure=False): job for job in jobs}
        stream = as_completed(list(futures), loop=self.client.loop)
        try:
            for future in stream:
                value, seconds = future.result()
                yield Done(futures[future], value, seconds, "cluster")
                if not launch():
                    left = [f for f in futures if not f.done()]
                    self.client.cancel([f for f in left if f.status == "pending"])
                    for rest in left:  # those already running finish and count
                        with contextlib.suppress(Exception):
                            value, seconds = rest.result()
                            yield Done(futures[rest], value, seconds, "cluster")
                    return
        finally:
            self.client.cancel([f for f in futures if not f.done()])


# ---------------------------------------------------------------------------- in the workers
_CONTEXTS: dict[str, object] = {}
"""A worker's context, by token (the latest only: a worker serves one batch at a time)."""


def _context(path: str, token: str):
    found = _CONTEXTS.get(token)
    if found is None:
        import joblib

        _CONTEXTS.clear()
        found = _CONTEXTS[token] = joblib.load(path, mmap_mode="r")
    return found


def _call(path: str, token: str, function, job):
    """A job in a worker process: its context loaded once (memory-mapped arrays), one thread per
    pool; returns ``(value, seconds)``."""
    context = _context(path, token)
    from .linalg import blas_threads

    started = time.perf_counter()
    with blas_threads(1, user_api=None):
        value = function(context, job)
    return value, time.perf_counter() - started


def _dask_call(context, function, job):
    from .linalg import blas_threads

    started = time.perf_counter()
    with blas_threads(1, user_api=None):
        value = function(context, job)
    return value, time.perf_counter() - started


def _import(modules: tuple[str, ...]) -> None:
    for name in modules:
        importlib.import_module(name)


def dask_executor(scheduler) -> DaskExecutor:
    """The :class:`DaskExecutor` of ``scheduler``: a ``distributed.Client``, or an address to connect
    to (that connection closed by :meth:`DaskExecutor.close`)."""
    from distributed import Client

    if isinstance(scheduler, Client):
        return DaskExecutor(scheduler)
    return DaskExecutor(Client(scheduler, set_as_default=False), own=True)
