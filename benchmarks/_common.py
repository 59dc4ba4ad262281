"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import os
import resource
import time
from contextlib import contextmanager
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


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
