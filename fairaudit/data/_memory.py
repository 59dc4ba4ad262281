"""Two words with the C library about the reader's memory (glibc on Linux; nothing elsewhere).

* :func:`trim_heap` — return the heap's free memory to the system (``malloc_trim``): what the
  parse freed stays in the heap for reuse otherwise, ~20 MB after a 1,000,000 × 21 file.
* :func:`without_huge_pages` — ask for ordinary pages under a large fresh array
  (``madvise(MADV_NOHUGEPAGE)``; NumPy asks for transparent huge pages above 4 MB). On the 2-core
  virtual machine the product is measured on, the first writes into the reader's 153 MB block
  took 0.23–0.46 s with huge pages and 0.11 s without (the copy of Arrow's columns into it, three
  alternated runs each, the same data): a huge page is a fresh 2 MB range the host backs page by
  page when it is first written, where ordinary pages reuse memory already backed. On a machine
  without that cost it gives up little: 40,000 faults of 4 kB instead of 80 of 2 MB.
"""

from __future__ import annotations

import ctypes
import functools
import mmap

import numpy as np

MADV_NOHUGEPAGE = 15
"""Linux's ``MADV_NOHUGEPAGE`` (``<sys/mman.h>``)."""

HUGE_PAGE_ARRAYS = 4 << 20
"""NumPy's own threshold for asking for huge pages: smaller arrays are left alone."""


@functools.cache
def _libc():
    try:
        library = ctypes.CDLL(None)
        trim, advise = library.malloc_trim, library.madvise  # glibc; a C library without them: nothing to do
    except (OSError, AttributeError):
        return None
    advise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return trim, advise


def read_only(value):
    """``value`` with every array in it marked read-only, returned: an array, a compressed sparse
    matrix (its data and index arrays), or a tuple, list or dict of them; other values as they are. What is
    shared — a table's columns, the audit's matrix, feature selection's remembered graphs — so
    that an in-place edit raises instead of changing another reader's data."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif hasattr(value, "indptr"):  # a compressed scipy sparse matrix: its three arrays
        for part in (value.data, value.indices, value.indptr):
            part.flags.writeable = False
    elif isinstance(value, tuple | list):
        for item in value:
            read_only(item)
    elif isinstance(value, dict):
        for item in value.values():
            read_only(item)
    return value


def trim_heap() -> None:
    """Return the C heap's free memory to the system."""
    functions = _libc()
    if functions is not None:
        functions[0](0)


def without_huge_pages(array: np.ndarray) -> None:
    """Ordinary pages under ``array``'s memory (not yet written: pages already there stay)."""
    functions = _libc()
    if functions is None or array.nbytes < HUGE_PAGE_ARRAYS:
        return
    start = array.ctypes.data
    first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    length = (start + array.nbytes - first) // mmap.PAGESIZE * mmap.PAGESIZE
    if length > 0:
        functions[1](first, length, MADV_NOHUGEPAGE)  # advice only: a refusal changes nothing
