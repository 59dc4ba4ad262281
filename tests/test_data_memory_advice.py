"""The reader's words with the C library: heap trimming and ordinary pages under its block."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fairaudit.data._memory import HUGE_PAGE_ARRAYS, trim_heap, without_huge_pages


def _vm_flags(address: int) -> list[str] | None:
    """The VmFlags of the mapping holding ``address`` (Linux /proc/self/smaps), or None."""
    smaps = Path("/proc/self/smaps")
    if not smaps.exists():
        return None
    inside = False
    for line in smaps.read_text().splitlines():
        head = line.split()[0] if line else ""
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            low, high = (int(part, 16) for part in head.split("-"))
            inside = low <= address < high
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps are Linux's")
def test_a_large_fresh_array_gets_ordinary_pages():
    array = np.empty(2 * HUGE_PAGE_ARRAYS // 8)
    without_huge_pages(array)
    array[:] = 1.0  # written after the advice, values as ever
    flags = _vm_flags(array.ctypes.data + array.nbytes // 2)
    if flags is None:
        pytest.skip("no /proc/self/smaps")
    assert "nh" in flags and array.sum() == array.size


def test_small_arrays_and_the_heap_are_left_as_they_are():
    small = np.arange(10.0)
    without_huge_pages(small)
    trim_heap()
    assert small.tolist() == list(range(10))
