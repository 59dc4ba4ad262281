"""Reading Parquet: typed columns already, read batch by batch into the same column store.

Numbers (integers, floats, decimals) become float64 columns — a null or NaN cell is missing,
an infinite value is a text cell where a number belongs, as in a CSV. Everything else that is
flat (strings, categoricals, booleans, dates, times) becomes text. Rows are numbered from 1
(there are no lines), and messages say "row".

What this reader promises about a hostile file (issue 27):

* **Only what the file holds.** Every value comes from Arrow's reader, which decodes and
  validates the pages; nothing is allocated from the footer's counts. The footer's row counts
  are checked against each other (the file's against its row groups', each column chunk's
  against its row group's) and against the rows the pages really held; any disagreement is a
  damaged file, refused. A footer can therefore never make the reader show memory it did not
  fill (the earlier reader sized its block from ``num_rows`` and showed another file's values).
* **A column the audit may not use never makes the file unreadable.** Integers too large for
  a float64 to hold exactly (beyond 2⁵³: typically an identifier, which the data boundary then
  leaves out of the features) are rounded to the nearest float64, as a CSV's digits are, and the
  log says so; a column that is neither number nor text (binary that is not UTF-8, a type Arrow
  cannot write as text) is left out, its reason in the log.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import EmptyFileError, InputFileError
from ._csv import TextColumns, clean_header
from ._source import Source

PARQUET_MAGIC = b"PAR1"
BATCH_ROWS = 65536


def is_parquet(head: bytes, tail: bytes) -> bool:
    return head.startswith(PARQUET_MAGIC) and tail.endswith(PARQUET_MAGIC)


def _is_number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind) or pa.types.is_null(kind)


class _NotConvertible(Exception):
    """A column's values cannot become what the reader wants of them; the message says why."""


def _as_text(column: pa.Array) -> pa.Array:
    try:
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if not pa.types.is_string(column.type):
            column = column.cast(pa.string())
    except (pa.ArrowException, ValueError) as exc:
        binary = pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type) or pa.types.is_fixed_size_binary(column.type)
        raise _NotConvertible("it holds binary values that are not text" if binary else f"its values ({column.type}) cannot be written as text ({exc})") from None
    return pc.utf8_trim_whitespace(pc.fill_null(column, ""))


def _floats(column) -> tuple[np.ndarray, bool]:
    """A numeric Arrow array as float64 (null → NaN), and whether some value had to be rounded
    (an integer beyond 2⁵³, a decimal of more digits than a float64 holds); _NotConvertible when
    no float64 holds it at all."""
    try:
        return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=float), False
    except (pa.ArrowException, ValueError):
        pass
    try:
        return np.asarray(pc.cast(column, pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=float), True
    except (pa.ArrowException, ValueError) as exc:
        raise _NotConvertible(f"its numbers cannot be read as float64 ({exc})") from None


ROUNDED = "some of its numbers (integers beyond 2^53 or long decimals) are rounded to the nearest float64, as in a CSV"


def read_parquet(source: Source, name: str) -> TextColumns:
    """A Parquet file as float64 columns (one block) and Arrow strings; see the module's promises."""
    try:
        handle = pq.ParquetFile(pa.BufferReader(source.data) if source.data is not None else str(source.path))
        schema = handle.schema_arrow
        check_footer(handle.metadata, name)
    except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: a name that is not UTF-8
        raise InputFileError(f"{name} cannot be read as Parquet ({exc}); export it again, or as CSV (UTF-8).") from None
    log: list[str] = []
    names = _checked_names(schema, name, log)
    if handle.metadata.num_rows == 0:
        raise EmptyFileError(f"{name} has no data rows.")
    numeric = [n for n, f in zip(names, schema, strict=True) if _is_number(f.type)]
    chunks: dict[str, list] = {n: [] for n in names}
    is_number = {n: n in numeric for n in names}
    rounded: set[str] = set()
    left_out: dict[str, str] = {}
    rows = 0
    try:
        for batch in handle.iter_batches(batch_size=BATCH_ROWS, use_threads=True):
            for shown, column in zip(names, batch.columns, strict=True):
                if shown in left_out:
                    continue
                try:
                    if is_number[shown]:
                        values, inexact = _floats(column)
                        chunks[shown].append(values)
                        if inexact:
                            rounded.add(shown)
                    else:
                        chunks[shown].append(_as_text(column))
                except _NotConvertible as reason:
                    left_out[shown] = str(reason)
                    chunks[shown] = []
            rows += batch.num_rows
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputFileError(f"{name} cannot be read as Parquet ({exc}); export it again, or as CSV (UTF-8).") from None
    if rows != handle.metadata.num_rows:
        raise InputFileError(
            f"{name} is damaged: its footer says {handle.metadata.num_rows:,} rows but its pages hold {rows:,}; export it again."
        )
    source.check_unchanged()
    for shown in sorted(rounded - set(left_out), key=names.index):
        log.append(f"column {shown!r}: {ROUNDED}")
    for shown, reason in left_out.items():
        log.append(f"column {shown!r} left out when reading: {reason}")
    unreadable = [(shown, reason) for shown, reason in left_out.items()]
    kept = [n for n in names if n not in left_out]
    numbers = [n for n in numeric if n not in left_out]
    block = _block(chunks, numbers, rows)
    position = {n: j for j, n in enumerate(numbers)}
    text = {n: pa.chunked_array(chunks[n], pa.string()) for n in kept if n not in position}
    infinite = [n for n in numbers if np.isinf(block[:, position[n]]).any()]
    for shown in infinite:  # an infinite value is text where a number belongs, as in a CSV
        text[shown] = _infinite_as_text(block[:, position[shown]])
    return TextColumns(
        names=kept,
        numeric={n: block[:, j] for n, j in position.items() if n not in infinite},
        text=text,
        n_rows=rows,
        block=block,
        block_names=numbers,
        first_line=1,
        has_header=True,
        log=log,
        unreadable=unreadable,
    )


def check_footer(metadata: pq.FileMetaData, name: str) -> None:
    """The footer's row counts agree with each other, or the file is refused as damaged.

    Only the file's and the row groups' counts are read here: pyarrow's column-chunk accessor
    (``row_group(g).column(c)``) aborts the whole process on some damaged footers (a C++ exception
    it cannot pass on — a hostile file would stop the dashboard for every session), where reading
    the pages raises a clean error. The pages' own count is checked against the footer after
    reading (:func:`read_parquet`)."""
    total = 0
    for g in range(metadata.num_row_groups):
        rows = metadata.row_group(g).num_rows
        if rows < 0:
            raise InputFileError(f"{name} is damaged: row group {g + 1} claims {rows:,} rows; export it again.")
        total += rows
    if total != metadata.num_rows:
        raise InputFileError(
            f"{name} is damaged: its footer claims {metadata.num_rows:,} rows but its row groups {total:,}; export it again."
        )


def _block(chunks: dict[str, list], numbers: list[str], rows: int) -> np.ndarray:
    """The numeric columns as one read-only Fortran block of exactly the rows read, each column's
    chunks freed as it is copied in (the peak is the data once and one column)."""
    block = np.empty((rows, len(numbers)), order="F")
    for j, shown in enumerate(numbers):
        parts = chunks.pop(shown)
        filled = 0
        for part in parts:
            block[filled : filled + len(part), j] = part
            filled += len(part)
        if filled != rows:  # every row of every column, or a damaged file (the counts above agree)
            raise InputFileError(f"column {shown!r} holds {filled:,} values for {rows:,} rows; export the file again.")
        del parts
    block.flags.writeable = False
    return block


def _checked_names(schema: pa.Schema, name: str, log: list[str]) -> list[str]:
    names = clean_header([str(n) for n in schema.names], name, log)
    for field_, shown in zip(schema, names, strict=True):
        kind = field_.type
        if pa.types.is_nested(kind):
            raise InputFileError(
                f"{name}: column {shown!r} holds nested values ({kind}); a table for an audit has one value per cell."
            )
    return names


def _infinite_as_text(values: np.ndarray) -> pa.ChunkedArray:
    return pa.chunked_array([pa.array(np.where(np.isnan(values), "", values.astype(str)), pa.string())])


def columns_from_arrow(table: pa.Table, name: str, first_row: int = 1) -> TextColumns:
    """An in-memory Arrow table — one partition of a data set too large to read at once (the dask
    engine, :mod:`fairaudit.engine`) — as a reader's columns, by this module's rules; its rows are
    numbered from ``first_row``."""
    log: list[str] = []
    names = _checked_names(table.schema, name, log)
    numeric: dict[str, np.ndarray] = {}
    text: dict[str, pa.ChunkedArray] = {}
    kept, unreadable = [], []
    for shown, column in zip(names, table.columns, strict=True):
        try:
            if _is_number(column.type):
                values, inexact = _floats(column.combine_chunks() if column.num_chunks != 1 else column.chunk(0))
                if inexact:
                    log.append(f"column {shown!r}: {ROUNDED}")
                if np.isinf(values).any():
                    text[shown] = _infinite_as_text(values)
                else:
                    values.flags.writeable = False
                    numeric[shown] = values
            else:
                text[shown] = pa.chunked_array([_as_text(chunk) for chunk in column.chunks], pa.string())
        except _NotConvertible as reason:
            log.append(f"column {shown!r} left out when reading: {reason}")
            unreadable.append((shown, str(reason)))
            continue
        kept.append(shown)
    return TextColumns(names=kept, numeric=numeric, text=text, n_rows=table.num_rows, first_line=first_row, has_header=True, log=log,
                       unreadable=unreadable)
