"""Cells: what counts as missing, what counts as a number, and parsing a text column at once.

Every column of a :class:`~fairaudit.data.RawTable` is either *numeric* — a float64 array,
NaN where a cell is missing — or *text* — an Arrow string array of the stripped cells. A text
column is parsed for numbers only when a step needs it (a feature, a sensitive column cut at a
threshold); :func:`parse_text` does it with Arrow kernels, without a Python object per cell, and
reports which cells are missing and which are text where a number was expected.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MISSING_MARKERS = frozenset({"", "na", "n/a", "nan", "null", "none", "?", "#n/a", "nat"})
"""Cells read as missing, compared after stripping white space and lower-casing."""

NUMBER_PATTERN = r"^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)$"
"""Numbers as the first reader (``pandas.to_numeric``) and Arrow's cast both accept them."""

DECIMAL_COMMA_PATTERN = r"^[+-]?\d+,\d+$"


def _case_variants(word: str) -> list[str]:
    options = [(c.lower(), c.upper()) if c.isalpha() else (c,) for c in word]
    return ["".join(p) for p in itertools.product(*options)]


NULL_VALUES = sorted({variant for marker in MISSING_MARKERS for variant in _case_variants(marker)})
"""Every spelling of the missing markers, for Arrow's exact-match ``null_values``."""

_MARKER_SET = pa.array(sorted(MISSING_MARKERS), pa.string())


@dataclass(frozen=True)
class Parsed:
    """A column read as numbers: ``values`` (NaN where missing or text), ``missing``, ``bad``."""

    values: np.ndarray
    missing: np.ndarray
    bad: np.ndarray

    @property
    def is_numeric(self) -> bool:
        return not self.bad.any()


def as_chunked(column) -> pa.ChunkedArray:
    return column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column], pa.string())


def _mask(array) -> np.ndarray:
    """A boolean Arrow (chunked) array as a NumPy bool array (nulls as False)."""
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=bool)


def missing_mask(strings) -> np.ndarray:
    """Cells of a text column that are missing markers (after stripping; case-insensitive)."""
    strings = as_chunked(strings)
    if len(strings) == 0:
        return np.zeros(0, dtype=bool)
    return _mask(pc.is_in(pc.utf8_lower(strings), value_set=_MARKER_SET))


SAMPLE_CELLS = 1000
"""Cells looked at first where one of them can settle a question about a whole column."""


def text_in_head(strings) -> bool:
    """A cell among the first :data:`SAMPLE_CELLS` of ``strings`` is text where a number belongs,
    so :func:`parse_text` would find the whole column not numeric: the decimal-comma rule only
    gets stricter with more cells. Tells a text column apart without parsing all of it."""
    strings = as_chunked(strings)
    return len(strings) > SAMPLE_CELLS and not parse_text(strings.slice(0, SAMPLE_CELLS)).is_numeric


def parse_text(strings) -> Parsed:
    """Read a text column as numbers, the first reader's rules done with Arrow kernels.

    Missing markers are missing; numbers parse; decimal commas (``1,5``) are accepted when every
    cell that is not a number has one; infinite values (``inf``, ``1e400``) and ``nan`` spelt as a
    number are *bad* (text where a number belongs), as before.
    """
    strings = as_chunked(strings)
    n = len(strings)
    if n == 0:
        empty = np.zeros(0, dtype=bool)
        return Parsed(np.zeros(0), empty, empty)
    missing = missing_mask(strings)
    number = _mask(pc.match_substring_regex(strings, NUMBER_PATTERN, ignore_case=True)) & ~missing
    bad = ~missing & ~number
    text = strings
    if bad.any():
        comma = _mask(pc.match_substring_regex(strings, DECIMAL_COMMA_PATTERN))
        if comma[bad].all():  # decimal commas, e.g. "1,5" in a ';'-separated European export
            text = pc.replace_substring(strings, ",", ".")
            number |= comma
            bad &= ~comma
    values = np.full(n, np.nan)
    if number.any():
        chosen = text.filter(pa.array(number))
        values[number] = pc.cast(chosen, pa.float64()).to_numpy(zero_copy_only=False)
    not_finite = number & ~np.isfinite(values)
    bad |= not_finite
    values[bad | missing] = np.nan
    return Parsed(values=values, missing=missing, bad=bad)


def numeric_parsed(values: np.ndarray) -> Parsed:
    """The :class:`Parsed` view of a numeric column (NaN = missing, nothing bad)."""
    missing = np.isnan(values)
    return Parsed(values=values, missing=missing, bad=np.zeros(len(values), dtype=bool))


def looks_numeric(text: str) -> bool:
    """Whether a header cell reads as a number (the header test: all-numeric first row = data)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def format_number(value: float) -> str:
    """``3`` for 3.0, ``2.5`` for 2.5 (labels and messages)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def is_integer_valued(values: np.ndarray) -> bool:
    """Every present value is a whole number below 2⁵³ (and there is one). A fraction among the
    first cells answers without a pass over the column."""
    head = values[:SAMPLE_CELLS]
    if np.any((head != np.round(head)) & ~np.isnan(head)):
        return False
    present = values[~np.isnan(values)]
    return bool(present.size) and bool(np.all(present == np.round(present))) and bool(np.all(np.abs(present) < 2**53))
