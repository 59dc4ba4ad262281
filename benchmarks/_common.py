"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"


def shared(relative: str) -> Path | None:
    """Path of a shared data file, or None (the script then says it skipped that part)."""
    path = SHARED / relative
    return path if path.exists() else None


@contextmanager
def timer():
    """``with timer() as t: ...`` then ``t()`` gives the elapsed seconds."""
    start = time.perf_counter()
    elapsed = [None]
    yield lambda: elapsed[0] if elapsed[0] is not None else time.perf_counter() - start
    elapsed[0] = time.perf_counter() - start


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux: ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine() -> str:
    return f"{os.cpu_count()} cores"


def status_mb(key: str) -> float:
    """A memory figure of this process from ``/proc/self/status`` in MiB (``VmRSS``: resident now,
    ``VmHWM``: its peak)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def module_at(revision: str, path: str, name: str, *, edit=None):
    """The module ``path`` of this repository as it was at git ``revision``, imported as ``name``
    (its text passed through ``edit`` first, e.g. to make relative imports absolute): the code a
    benchmark compares against. Raises ``OSError`` or ``subprocess.CalledProcessError`` when git
    cannot show it."""
    text = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:{path}"], capture_output=True, text=True, check=True).stdout
    file = Path(tempfile.mkdtemp()) / f"{name.rpartition('.')[2]}.py"
    file.write_text(edit(text) if edit else text)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def best_of(call, repeat: int) -> tuple[float, object]:
    """The fastest of ``repeat`` runs of ``call()`` (seconds) and the last run's result: one run
    of a few milliseconds is at the mercy of a busy machine."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - start)
    return best, result


def run_replicates(family, count: int, random_state=0, rows=None, fits=None) -> None:
    """``count`` bootstrap replicates of ``family`` (a :class:`fairaudit.audit.FamilyAudit`) in this
    process, as the audit's driver runs each one (:func:`fairaudit.audit.run_replicate` on the
    family's context, one thread per pool), from its ``fits`` of ``rows`` (every row; fitted here
    when not given)."""
    import numpy as np

    from fairaudit import uncertainty
    from fairaudit.audit import FamilyEstimates, ReplicateJob, replicate_context, run_replicate
    from fairaudit.linalg import blas_threads

    rows = np.arange(len(family.codes)) if rows is None else rows
    stage = FamilyEstimates(family, {}, family.fit(rows) if fits is None else fits, rows, None, {})
    context = replicate_context(stage)
    with blas_threads(1, user_api=None):
        for b, seed in enumerate(uncertainty.replicate_seeds(random_state, count)):
            run_replicate(context, ReplicateJob(b, count, seed))
