"""Reading Parquet: typed columns already, read batch by batch into the same column store.

Numbers (integers, floats, decimals) become float64 columns — a null or NaN cell is missing,
an infinite value is a text cell where a number belongs, as in a CSV. Everything else that is
flat (strings, categoricals, booleans, dates, times) becomes text. Rows are numbered from 1
(there are no lines), and messages say "row".
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


def _as_text(column: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        column = column.cast(pa.string())
    if not pa.types.is_string(column.type):
        column = column.cast(pa.string())
    return pc.utf8_trim_whitespace(pc.fill_null(column, ""))


def read_parquet(source: Source, name: str) -> TextColumns:
    """A Parquet file as float64 columns (one block) and Arrow strings."""
    try:
        handle = pq.ParquetFile(pa.BufferReader(source.data) if source.data is not None else str(source.path))
        schema = handle.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise InputFileError(f"{name} cannot be read as Parquet ({exc}); export it again, or as CSV (UTF-8).") from None
    log: list[str] = []
    names = _checked_names(schema, name, log)
    n_rows = handle.metadata.num_rows
    if n_rows == 0:
        raise EmptyFileError(f"{name} has no data rows.")
    numeric = [n for n, f in zip(names, schema, strict=True) if _is_number(f.type)]
    position = {n: j for j, n in enumerate(numeric)}
    block = np.empty((n_rows, len(numeric)), order="F")
    strings: dict[str, list[pa.Array]] = {n: [] for n in names if n not in position}
    infinite: set[str] = set()
    row = 0
    try:
        for batch in handle.iter_batches(batch_size=BATCH_ROWS, use_threads=True):
            m = batch.num_rows
            for shown, column in zip(names, batch.columns, strict=True):
                j = position.get(shown)
                if j is None:
                    strings[shown].append(_as_text(column))
                    continue
                values = _floats(column)
                if np.isinf(values).any():
                    infinite.add(shown)
                block[row : row + m, j] = values
            row += m
    except (pa.ArrowException, OSError) as exc:
        raise InputFileError(f"{name} cannot be read as Parquet ({exc}); export it again, or as CSV (UTF-8).") from None
    source.check_unchanged()
    block.flags.writeable = False
    text = {n: pa.chunked_array(parts, pa.string()) for n, parts in strings.items()}
    for shown in infinite:  # an infinite value is text where a number belongs, as in a CSV
        text[shown] = _infinite_as_text(block[:, position[shown]])
    return TextColumns(
        names=names,
        numeric={n: block[:, j] for n, j in position.items() if n not in infinite},
        text=text,
        n_rows=n_rows,
        block=block,
        block_names=numeric,
        first_line=1,
        has_header=True,
        log=log,
    )


def _checked_names(schema: pa.Schema, name: str, log: list[str]) -> list[str]:
    names = clean_header([str(n) for n in schema.names], name, log)
    for field_, shown in zip(schema, names, strict=True):
        kind = field_.type
        if pa.types.is_nested(kind):
            raise InputFileError(
                f"{name}: column {shown!r} holds nested values ({kind}); a table for an audit has one value per cell."
            )
    return names


def _floats(column) -> np.ndarray:
    return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=float)


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
    for shown, column in zip(names, table.columns, strict=True):
        if not _is_number(column.type):
            text[shown] = pa.chunked_array([_as_text(chunk) for chunk in column.chunks], pa.string())
            continue
        values = _floats(column)
        if np.isinf(values).any():
            text[shown] = _infinite_as_text(values)
        else:
            values.flags.writeable = False
            numeric[shown] = values
    return TextColumns(names=names, numeric=numeric, text=text, n_rows=table.num_rows, first_line=first_row, has_header=True, log=log)
