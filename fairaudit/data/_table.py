"""The raw table: typed columns read from a file, with where each row came from.

:func:`read_table` is the only function that opens a user's file. It returns a
:class:`RawTable` whose numeric columns are float64 arrays (NaN where a cell is missing; views
into one Fortran-ordered block, so preparing adjacent feature columns copies nothing) and whose
other columns are Arrow strings — never a Python object per cell. The Data page previews it
with :meth:`RawTable.head` and :meth:`RawTable.describe`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import FairAuditError, ParameterError
from ..vocabulary import term
from . import _csv, _parquet
from ._cells import Parsed, is_integer_valued, missing_mask, numeric_parsed, parse_text, text_in_head
from ._memory import read_only, trim_heap
from ._source import max_bytes_for, open_source, scan

DEFAULT_MAX_MB = 200
"""Upload limit in megabytes (Streamlit's default upload limit too)."""

FAST_PATH = True
"""Read CSV with Arrow first (tests switch it off to compare with the diagnostic reader)."""


@dataclass(frozen=True, eq=False)
class RawTable:
    """A table as read: typed columns and where they came from.

    Attributes
    ----------
    columns : list of str
        Column names in file order.
    n_rows : int
        Data rows (blank lines and the header excluded).
    lines : ndarray of int
        The 1-based line of each row in the file (for Parquet: the row number); messages cite it.
    name, sha256, n_bytes, encoding, delimiter, has_header, format :
        Provenance, reported in the audit's data fingerprint (``format`` is ``"csv"`` or
        ``"parquet"``; Parquet has no encoding or delimiter).
    log : tuple of str
        What reading did that a user should know (skipped blank lines, detected encoding, ...).

    Numeric columns are float64 arrays with NaN where a cell is missing; other columns are Arrow
    string arrays of the stripped cells. :meth:`head` and :meth:`describe` are cheap previews;
    :attr:`frame` builds the whole table as a DataFrame (costly for large files).
    """

    name: str
    sha256: str
    n_bytes: int
    encoding: str | None
    delimiter: str | None
    has_header: bool
    log: tuple[str, ...]
    _names: tuple[str, ...] = field(repr=False)
    _numeric: dict = field(repr=False)
    _text: dict = field(repr=False)
    _n_rows: int = field(repr=False)
    _block: np.ndarray | None = field(default=None, repr=False)
    _block_names: tuple[str, ...] = field(default=(), repr=False)
    _lines: np.ndarray | None = field(default=None, repr=False)
    _first_line: int = field(default=1, repr=False)
    format: str = "csv"
    _missing: dict = field(default_factory=dict, repr=False)  # missing cells per numeric column, as the reader counted them
    unreadable: tuple[tuple[str, str], ...] = ()
    """Columns left out when the file was read, each with why (``(column, reason)``): cells that
    are neither numbers nor text, such as binary values in a Parquet file."""
    _cache: dict = field(default_factory=dict, repr=False)

    # -- shape -------------------------------------------------------------------------------
    @property
    def columns(self) -> list[str]:
        return list(self._names)

    @property
    def n_rows(self) -> int:
        return self._n_rows

    @property
    def lines(self) -> np.ndarray:
        if self._lines is not None:
            return self._lines
        if "lines" not in self._cache:
            self._cache["lines"] = np.arange(self._first_line, self._first_line + self._n_rows, dtype=np.int64)
        return self._cache["lines"]

    @property
    def line_word(self) -> str:
        """How messages cite a row: ``"line"`` in a text file, ``"row"`` in Parquet."""
        return "row" if self.format == "parquet" else "line"

    def line_of(self, row: int) -> int:
        """The line (or row number) of row index ``row``."""
        return int(self._lines[row]) if self._lines is not None else self._first_line + int(row)

    def where(self, row: int) -> str:
        """``"line 17"`` — row index ``row`` as messages cite it."""
        return f"{self.line_word} {self.line_of(row)}"

    # -- columns -----------------------------------------------------------------------------
    def _check_live(self) -> None:
        if self._cache.get("spent"):
            raise FairAuditError(
                f"this table of {self.name} was handed over to prepare(..., reuse_table=True), which rearranged its "
                "columns in place; read the file again to use it."
            )

    def is_numeric(self, column: str) -> bool:
        """Every present cell of ``column`` is a finite number."""
        self._check_live()
        return column in self._numeric

    def numbers(self, column: str) -> np.ndarray:
        """A numeric column's values (read-only float64; NaN where missing)."""
        self._check_live()
        return self._numeric[column]

    def strings(self, column: str) -> pa.ChunkedArray:
        """A text column's stripped cells (Arrow strings)."""
        self._check_live()
        return self._text[column]

    def parsed(self, column: str) -> Parsed:
        """``column`` read as numbers: values, missing cells, and text cells where numbers belong."""
        self._check_live()
        if column in self._numeric:
            return numeric_parsed(self._numeric[column])
        return parse_text(self._text[column])

    def missing(self, column: str) -> np.ndarray:
        """Which cells of ``column`` are missing."""
        self._check_live()
        if column in self._numeric:
            return np.isnan(self._numeric[column])
        return missing_mask(self._text[column])

    def missing_count(self, column: str) -> int:
        """How many cells of numeric ``column`` are missing — as the reader counted them (Arrow's
        nulls) when it did, so that preparing a complete column takes no pass over it for that."""
        self._check_live()
        if column not in self._missing:
            self._missing[column] = int(np.count_nonzero(np.isnan(self._numeric[column])))
        return self._missing[column]

    def cell(self, column: str, row: int) -> str:
        """The text of one cell (numbers formatted), for messages."""
        self._check_live()
        if column in self._numeric:
            value = float(self._numeric[column][row])
            return "" if np.isnan(value) else _format_cell(value)
        return self._text[column][int(row)].as_py()

    def texts(self, column: str) -> np.ndarray:
        """The cells of ``column`` as text (an object array of ``str``; numbers written as in
        messages, missing cells as ``""``) — for identifiers in an output and for small tables;
        it makes a Python string per distinct value."""
        self._check_live()
        if column in self._numeric:
            values = self._numeric[column]
            distinct, inverse = np.unique(values, return_inverse=True)
            shown = np.array(["" if np.isnan(v) else _format_cell(float(v)) for v in distinct], dtype=object)
            return shown[inverse.ravel()]
        return np.asarray(self._text[column].to_numpy(zero_copy_only=False), dtype=object)

    def is_integer(self, column: str) -> bool:
        """A numeric column whose values are all whole numbers (identifiers, codes, counts)."""
        key = ("integer", column)
        if key not in self._cache:
            self._cache[key] = column in self._numeric and is_integer_valued(self._numeric[column])
        return self._cache[key]

    def adjacent_block(self, columns: list[str]) -> np.ndarray | None:
        """The numeric ``columns`` as one read-only view (no copy) when they are adjacent, in
        order, in the block the reader filled; else None."""
        self._check_live()
        index = self._block_index(columns)
        if index is None or index != list(range(index[0], index[0] + len(columns))):
            return None
        return self._block[:, index[0] : index[0] + len(columns)]

    def _block_index(self, columns: list[str]) -> list[int] | None:
        if self._block is None or not columns:
            return None
        index = {n: j for j, n in enumerate(self._block_names)}
        if any(c not in index or c not in self._numeric for c in columns):
            return None
        return [index[c] for c in columns]

    def hand_over(self, columns: list[str]) -> np.ndarray | None:
        """The numeric ``columns`` as one view, made adjacent by moving the block's columns in
        place (one column of scratch memory, no copy of the table). The table is *spent*
        afterwards: any further use raises. None when the columns are not all in the block."""
        self._check_live()
        index = self._block_index(columns)
        if index is None:
            return None
        order = index + [j for j in range(self._block.shape[1]) if j not in set(index)]
        block = self._block
        block.flags.writeable = True
        _permute_columns(block, order)
        block.flags.writeable = False
        self._cache["spent"] = True
        return block[:, : len(columns)]

    def spend(self) -> None:
        """Mark the table handed over and let go of its columns (text columns, parsed numbers,
        previews): what a prepared matrix still uses stays alive through its own views. Any
        further use raises, as after :meth:`hand_over`."""
        self._text.clear()
        self._numeric.clear()
        self._missing.clear()
        self._cache.clear()
        self._cache["spent"] = True
        release_arrow_memory()

    # -- previews ----------------------------------------------------------------------------
    def head(self, n: int = 50) -> pd.DataFrame:
        """The first ``n`` rows as a DataFrame (whole numbers shown as integers)."""
        self._check_live()
        n = min(int(n), self._n_rows)
        data = {}
        for column in self._names:
            if column in self._numeric:
                values = self._numeric[column][:n]
                data[column] = pd.array(values, dtype="Int64") if self.is_integer(column) else values
            else:
                data[column] = self._text[column].slice(0, n).to_pylist()
        return pd.DataFrame(data, columns=list(self._names))

    @property
    def frame(self) -> pd.DataFrame:
        """The whole table as a DataFrame: numbers as float64, text as Arrow-backed strings.
        Builds a copy of every column; use :meth:`head` for a preview."""
        self._check_live()
        data = {}
        for column in self._names:
            if column in self._numeric:
                data[column] = pd.Series(np.array(self._numeric[column]), copy=False)
            else:
                data[column] = pd.Series(self._text[column], dtype=pd.ArrowDtype(pa.string()))
        return pd.DataFrame(data, columns=list(self._names))

    def describe(self) -> pd.DataFrame:
        """One row per column: kind (numeric/text), distinct values, missing cells, an example."""
        self._check_live()
        if "describe" not in self._cache:
            self._cache["describe"] = pd.DataFrame([self._describe_column(c) for c in self._names])
        return self._cache["describe"].copy()

    def _describe_column(self, column: str) -> dict:
        if column in self._numeric:
            values = self._numeric[column]
            missing = np.isnan(values)
            present = values[~missing]
            return {
                "column": column,
                "kind": "numeric",
                "distinct": int(pd.unique(present).size),
                "missing": int(missing.sum()),
                "example": _format_cell(float(present[0])) if present.size else "",
            }
        strings = self._text[column]
        missing = missing_mask(strings)
        present = strings.filter(pa.array(~missing)) if missing.any() else strings
        return {
            "column": column,
            "kind": "text",
            "distinct": int(pc.count_distinct(present).as_py()) if len(present) else 0,
            "missing": int(missing.sum()),
            "example": present[0].as_py() if len(present) else "",
        }


def _permute_columns(block: np.ndarray, order: list[int]) -> None:
    """Rearrange ``block``'s columns in place so that new column ``j`` is old column
    ``order[j]`` (cycle by cycle, through one scratch column)."""
    done = [False] * len(order)
    scratch = np.empty(block.shape[0])
    for start in range(len(order)):
        if done[start] or order[start] == start:
            done[start] = True
            continue
        scratch[:] = block[:, start]
        j = start
        while True:
            source = order[j]
            done[j] = True
            if source == start:
                block[:, j] = scratch
                break
            block[:, j] = block[:, source]
            j = source


def _format_cell(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def read_table(
    source,
    *,
    name: str | None = None,
    skip_rows: int = 0,
    header: bool | None = None,
    delimiter: str | None = None,
    max_mb: float = DEFAULT_MAX_MB,
) -> RawTable:
    """Read a delimited text file or a Parquet file into a :class:`RawTable`, or raise a
    specific error.

    Parameters
    ----------
    source : path, bytes or file object
        The file is only read, never modified. Paths must name regular files (a FIFO or a
        device is refused before it is opened); from a file object at most ``max_mb`` MB + 1
        byte are read.
    name : str, optional
        Display name (defaults to the file name).
    skip_rows : int
        Lines to skip before the header (e.g. 1 for credit's ``default_degree.csv``).
    header : bool or None
        ``None`` detects it: the first row is data when all of its cells are numbers, and the
        columns are then named ``col_1``, ``col_2``, ...
    delimiter : str, optional
        Force a delimiter instead of detecting one of ``, ; TAB |``.
    max_mb : float
        Size limit in megabytes (a finite number above 0).

    Text files: UTF-8 (with or without BOM), else Windows-1252; delimiter and header detected;
    quoted fields; blank lines skipped (and counted in :attr:`RawTable.log`). Parquet files are
    recognised by their signature.
    """
    if isinstance(skip_rows, bool) or not isinstance(skip_rows, int | np.integer):
        raise ParameterError(f"skip_rows must be a whole number >= 0, got {skip_rows!r} ({term('skip_rows')}).")
    if skip_rows < 0:
        raise ParameterError(f"skip_rows must be >= 0, got {skip_rows}.")
    if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n'):
        raise ParameterError(f"the delimiter must be one character other than a quote or a line end; got {delimiter!r}.")
    max_bytes = max_bytes_for(max_mb)
    opened = open_source(source, max_bytes, name)
    name = opened.name
    scanned = scan(opened, max_bytes)
    if _parquet.is_parquet(scanned.head, scanned.tail):
        columns = _parquet.read_parquet(opened, name)
        return _build(columns, name, scanned.sha256, scanned.n_bytes, encoding=None, delimiter=None, extra_log=[], format="parquet")
    encoding = _csv.text_encoding(scanned, name)
    extra_log = [] if encoding in ("utf-8", "utf-8-sig") else [f"read as {encoding} text (not valid UTF-8)"]
    with _csv.no_field_limit():
        layout, fast = _csv.sniff(opened, scanned, encoding=encoding, skip_rows=skip_rows, header=header, delimiter=delimiter)
        columns = None
        if FAST_PATH and fast and not scanned.has_nul:
            try:
                columns = _csv.read_fast(opened, scanned, layout, name)
            except _csv.Fallback:
                columns = None
        if columns is None:
            columns = _csv.read_diagnostic(opened, layout, skip_rows=skip_rows, header=header, name=name)
    release_arrow_memory()
    return _build(columns, name, scanned.sha256, scanned.n_bytes, encoding=encoding, delimiter=layout.delimiter, extra_log=extra_log)


def release_arrow_memory() -> None:
    """Give back to the system what Arrow's memory pool keeps for reuse: after reading a
    1,000,000-row file it kept ~25 MB of read buffers, and after ``prepare`` took a table over
    ~14 MB of its text columns and parsing, through the rest of an audit. The reader parses into
    the C library's heap (:data:`fairaudit.data._csv.POOL`), which keeps what was freed at its
    top for reuse; :func:`trim_heap` hands that back too (~20 MB after the same file)."""
    pa.default_memory_pool().release_unused()
    trim_heap()


def table_from_arrow(table: pa.Table, *, name: str, sha256: str = "", first_row: int = 1) -> RawTable:
    """A :class:`RawTable` of an in-memory Arrow table (a Parquet row group, a pandas partition),
    read by the Parquet rules: numbers become float64 columns, everything else text, and text
    columns that hold numbers become numeric, as in a file. Rows are numbered from ``first_row``.
    The dask engine (:mod:`fairaudit.engine`) reads each partition of a large data set with it."""
    columns = _parquet.columns_from_arrow(table, name, first_row)
    return _build(columns, name, sha256, int(table.nbytes), encoding=None, delimiter=None, extra_log=[], format="parquet")


def _build(columns, name, sha256, n_bytes, *, encoding, delimiter, extra_log, format: str = "csv") -> RawTable:
    """A RawTable from a reader's columns: text columns that are numbers become numeric."""
    numeric = dict(columns.numeric)
    text = {}
    for column, strings in columns.text.items():
        parsed = None if text_in_head(strings) else parse_text(strings)
        if parsed is not None and parsed.is_numeric:
            numeric[column] = read_only(parsed.values)
        else:
            text[column] = strings
    return RawTable(
        name=name,
        sha256=sha256,
        n_bytes=n_bytes,
        encoding=encoding,
        delimiter=delimiter,
        has_header=bool(columns.has_header),
        log=tuple(extra_log + list(columns.log)),
        _names=tuple(columns.names),
        _numeric=numeric,
        _text=text,
        _n_rows=int(columns.n_rows),
        _block=columns.block,
        _block_names=tuple(columns.block_names),
        _lines=columns.lines,
        _first_line=int(columns.first_line),
        format=format,
        unreadable=tuple(columns.unreadable),
        _missing=dict(columns.missing),  # the reader's numeric columns (those with NaN spelt as numbers already left out)
    )



