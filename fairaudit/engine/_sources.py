"""Where the dask engine's partitions come from: CSV blocks, Parquet row groups, dask DataFrames.

A *source* lists a data set's partitions without reading them, reads its first partition (the
*head*, on which the column roles are judged), and turns a :class:`PartitionPlan` into one dask
task per partition, each returning a :class:`PartitionSummary`:

* **CSV** (local paths, globs and any fsspec URL): :func:`dask.bytes.read_bytes` cuts each file
  into blocks at line ends; every block is read by the data boundary's own reader
  (:func:`fairaudit.data.read_table`, the same delimiter, header and missing-value rules as a
  file read whole), with the file's header lines in front of every block but the first. Line
  numbers in messages are counted from the start of the file (each block counts its line ends).
  A quoted field that spans lines may be cut at a block boundary: such files need
  ``engine="local"`` or Parquet. Compressed files (``.gz``, …) are one block each.
* **Parquet** (a file, a folder of files, a glob, any fsspec URL): row groups, gathered into
  partitions of about :data:`PARTITION_ROWS` rows and read in batches of :data:`BATCH_ROWS`
  (only the columns the audit uses), by the data boundary's Parquet rules
  (:func:`fairaudit.data._table.table_from_arrow`); rows are numbered from 1 per file.
* **dask DataFrame**: its partitions, converted to Arrow and read by the same rules; rows are
  numbered across partitions once every partition has been counted.

Nothing here imports dask at module level: :mod:`fairaudit.engine` must import without it.
"""

from __future__ import annotations

import posixpath
import re

from ..data import DEFAULT_MAX_MB, check_path, read_table
from ..data._parquet import PARQUET_MAGIC, check_footer
from ..data._table import table_from_arrow
from ..errors import FairAuditError, InputFileError, InputFileNotFound, ParameterError
from ._partition import PartitionPlan, PartitionSummary, summarise_table

BLOCKSIZE = 64 * 2**20
"""Bytes per CSV block (one partition)."""
PARTITION_ROWS = 500_000
"""Parquet row groups are gathered into partitions of about this many rows."""
BATCH_ROWS = 131_072
"""Rows read at once within a partition (bounds a worker's memory whatever the row groups)."""
HEAD_ROWS = 100_000
"""At most this many rows of a Parquet file or DataFrame judge the column roles."""

_LINE = re.compile(r"\b(line|row) (\d+)")


def require_dask():
    """``dask`` (imported), or a clear error naming the optional extra."""
    try:
        import dask  # noqa: F401
        import dask.bytes  # noqa: F401
    except ImportError:
        raise ParameterError(
            "the dask engine needs the optional dependencies dask and distributed: pip install 'fairaudit[dask]' "
            "(or audit with the default engine)."
        ) from None
    import dask

    return dask


def filesystem(urlpath: str, storage_options: dict | None = None):
    """``(fs, paths)``: the fsspec file system of ``urlpath`` and the files it names (a file, a
    folder's files, or a glob), sorted; a clear error for an unknown scheme, a scheme whose
    driver is not installed, or nothing there."""
    import fsspec.core

    try:
        fs, path = fsspec.core.url_to_fs(urlpath, **(storage_options or {}))
    except ImportError as exc:
        scheme = urlpath.split("://", 1)[0]
        raise ParameterError(
            f"{urlpath} uses the {scheme}:// scheme, whose fsspec driver is not installed ({exc}); install it "
            f"(e.g. pip install s3fs for s3://, gcsfs for gs://, adlfs for az://) or copy the data to a local path."
        ) from None
    except ValueError as exc:
        raise ParameterError(f"{urlpath}: {exc}; give a local path or a URL such as s3://bucket/data/*.parquet.") from None
    try:
        if fs.isdir(path):
            paths = sorted(p for p in fs.find(path) if not posixpath.basename(p).startswith(("_", ".")))
        elif any(ch in path for ch in "*?["):
            paths = sorted(fs.glob(path))
        else:
            paths = [path] if fs.exists(path) else []
    except (OSError, ValueError) as exc:
        raise InputFileNotFound(f"{urlpath} cannot be listed ({exc}); check the path and your access to it.") from None
    if not paths:
        raise InputFileNotFound(f"no such file: {urlpath}; check the path (a file, a folder of files or a glob such as data/*.parquet).")
    if "file" in fs.protocol:  # a FIFO or a device would block or never end: refused before it is opened
        for path in paths:
            check_path(path)
    return fs, paths


def open_source(source, *, skip_rows: int = 0, header: bool | None = None, blocksize: int = BLOCKSIZE,
                partition_rows: int = PARTITION_ROWS, storage_options: dict | None = None):
    """The source of ``source``: a path or URL (CSV or Parquet, told apart by the first file's
    signature) or a dask DataFrame."""
    if not isinstance(source, str | bytes) and hasattr(source, "to_delayed") and hasattr(source, "npartitions"):
        return FrameSource(source)
    if not isinstance(source, str):
        source = str(source)
    fs, paths = filesystem(source, storage_options)
    with fs.open(paths[0], "rb") as handle:
        signature = handle.read(len(PARQUET_MAGIC))
    if signature == PARQUET_MAGIC:
        return ParquetSource(source, fs, paths, partition_rows)
    return CSVSource(source, fs, paths, skip_rows=skip_rows, header=header, blocksize=blocksize,
                     storage_options=storage_options)


def shifted(exc: FairAuditError, shift: int) -> FairAuditError:
    """``exc`` with the line (row) numbers in its message moved by ``shift``: a partition read on
    its own counts its lines from its own start."""
    if not shift:
        return exc
    text = _LINE.sub(lambda m: f"{m.group(1)} {int(m.group(2)) + shift}", str(exc.args[0]) if exc.args else "")
    return type(exc)(text)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'s' if n != 1 else ''}"


def _display_name(path: str) -> str:
    return posixpath.basename(path.rstrip("/")) or path


# ---------------------------------------------------------------------- CSV
class CSVSource:
    format = "csv"

    def __init__(self, urlpath, fs, paths, *, skip_rows, header, blocksize, storage_options):
        require_dask()
        from dask.bytes import read_bytes
        from fsspec.utils import infer_compression

        self.urlpath, self.fs, self.paths = urlpath, fs, paths
        self.name = _display_name(paths[0]) if len(paths) == 1 else urlpath
        self.skip_rows, self.header_option = skip_rows, header
        compression = infer_compression(paths[0])
        self.compressed = compression is not None
        try:
            _, blocks = read_bytes([fs.unstrip_protocol(p) for p in paths], delimiter=b"\n", blocksize=None if compression else blocksize,
                                   sample=False, compression=compression, **(storage_options or {}))
        except (OSError, ValueError) as exc:
            raise InputFileError(f"{urlpath} cannot be read ({exc}).") from None
        self.blocks = blocks  # per file, a list of delayed bytes
        self.n_bytes = sum(int(fs.size(p) or 0) for p in paths)
        first = _first_block(fs, paths[0], compression, blocksize) if compression else blocks[0][0].compute(scheduler="sync")
        self.head = read_table(first, name=_display_name(paths[0]), skip_rows=skip_rows, header=header, max_mb=_mb(first))
        self.encoding, self.delimiter = self.head.encoding, self.head.delimiter
        self.has_header = self.head.has_header
        self.prefix_lines = self.head.line_of(0) - 1
        self.prefix = b"".join(first.splitlines(keepends=True)[: self.prefix_lines])
        self.partitions = [(f, b) for f, file_blocks in enumerate(blocks) for b in range(len(file_blocks))]

    @property
    def description(self) -> str:
        what = f"{len(self.paths)} CSV files" if len(self.paths) > 1 else "a CSV file"
        if self.compressed:
            return f"{what}, one partition per file (compressed)"
        return f"{what}, {_count(len(self.partitions), 'block')} cut at line ends"

    def tasks(self, plan: PartitionPlan) -> list:
        from dask import delayed

        out = []
        for index, (f, b) in enumerate(self.partitions):
            prefix = None if b == 0 else self.prefix
            name = _display_name(self.paths[f])
            out.append(delayed(_csv_partition, pure=True)(self.blocks[f][b], plan, index, prefix, name, self.skip_rows,
                                                          self.has_header, self.delimiter))
        return out

    def shifts(self, summary: PartitionSummary) -> dict[int, int]:
        """Per partition, what to add to its line numbers to count them from its file's start."""
        shifts, before, current = {}, 0, None
        for index, (f, b) in enumerate(self.partitions):
            if f != current:
                current, before = f, 0
            shifts[index] = 0 if b == 0 else before - self.prefix_lines
            before += summary.newlines.get(index, 0)
        return shifts


def _first_block(fs, path: str, compression: str, blocksize: int) -> bytes:
    """The first ``blocksize`` bytes of a compressed file, decompressed and cut at a line end
    (its head: a compressed file is one partition, not read whole on the client)."""
    import fsspec

    with fsspec.open(fs.unstrip_protocol(path), "rb", compression=compression) as handle:
        data = handle.read(blocksize)
        if len(data) == blocksize and b"\n" in data:
            data = data[: data.rindex(b"\n") + 1]
    return data


def _mb(data: bytes) -> float:
    return max(DEFAULT_MAX_MB, len(data) / 1e6 + 1)


def _csv_partition(block: bytes, plan: PartitionPlan, index: int, prefix: bytes | None, name: str, skip_rows: int,
                   has_header: bool, delimiter: str) -> PartitionSummary:
    newlines = block.count(b"\n")
    if prefix is not None and not block.strip():  # a tail of blank lines
        empty = PartitionSummary.empty(plan)
        empty.newlines = {index: newlines}
        return empty
    data = block if prefix is None else prefix + block
    try:
        table = read_table(data, name=name, skip_rows=skip_rows, header=has_header, delimiter=delimiter, max_mb=_mb(data))
        return summarise_table(table, plan, index, newlines=newlines)
    except FairAuditError as exc:
        return PartitionSummary.failed(plan, index, exc, newlines)


# ---------------------------------------------------------------------- Parquet
class ParquetSource:
    format = "parquet"

    def __init__(self, urlpath, fs, paths, partition_rows: int = PARTITION_ROWS):
        import pyarrow.parquet as pq

        self.urlpath, self.fs, self.paths = urlpath, fs, paths
        self.partition_rows = partition_rows
        self.name = _display_name(paths[0]) if len(paths) == 1 else urlpath
        self.encoding = self.delimiter = None
        self.partitions = []  # (file index, row groups, first row of the partition in its file)
        self.n_bytes = 0
        for f, path in enumerate(paths):
            try:
                with fs.open(path, "rb") as handle:
                    metadata = pq.ParquetFile(handle).metadata
                check_footer(metadata, _display_name(path))
            except FairAuditError:
                raise
            except Exception as exc:  # pyarrow raises several kinds for a file that is not Parquet
                raise InputFileError(f"{path} cannot be read as Parquet ({exc}); every file of the data set must be Parquet.") from None
            self.n_bytes += int(fs.size(path) or 0)
            groups, rows, first = [], 0, 1
            for g in range(metadata.num_row_groups):
                groups.append(g)
                rows += metadata.row_group(g).num_rows
                if rows >= partition_rows:
                    self.partitions.append((f, tuple(groups), first))
                    first += rows
                    groups, rows = [], 0
            if groups:
                self.partitions.append((f, tuple(groups), first))
        self.head = self._head()
        self.columns = {name: name for name in self.head.columns}

    def _head(self):
        import pyarrow as pa
        import pyarrow.parquet as pq

        with self.fs.open(self.paths[0], "rb") as handle:
            reader = pq.ParquetFile(handle)
            batches = []
            rows = 0
            for batch in reader.iter_batches(batch_size=min(HEAD_ROWS, BATCH_ROWS)):
                batches.append(batch)
                rows += batch.num_rows
                if rows >= HEAD_ROWS:
                    break
            table = pa.Table.from_batches(batches, schema=reader.schema_arrow) if batches else reader.schema_arrow.empty_table()
        self.schema_names = list(table.schema.names)
        return table_from_arrow(table, name=_display_name(self.paths[0]))

    @property
    def description(self) -> str:
        what = f"{len(self.paths)} Parquet files" if len(self.paths) > 1 else "a Parquet file"
        return f"{what}, {_count(len(self.partitions), 'partition')} of row groups (up to about {self.partition_rows:,} rows each)"

    def tasks(self, plan: PartitionPlan) -> list:
        from dask import delayed

        wanted = set(plan.read_columns)
        columns = [raw for raw in self.schema_names if raw.strip() in wanted or raw in wanted]
        return [
            delayed(_parquet_partition, pure=True)(self.fs, self.paths[f], groups, first, columns, plan, index,
                                                   _display_name(self.paths[f]))
            for index, (f, groups, first) in enumerate(self.partitions)
        ]

    def shifts(self, summary: PartitionSummary) -> dict[int, int]:
        return dict.fromkeys(range(len(self.partitions)), 0)


def _parquet_partition(fs, path: str, groups: tuple, first: int, columns: list, plan: PartitionPlan, index: int,
                       name: str) -> PartitionSummary:
    import pyarrow as pa
    import pyarrow.parquet as pq

    summary, offset = None, 0
    try:
        with fs.open(path, "rb") as handle:
            reader = pq.ParquetFile(handle)
            claimed = sum(reader.metadata.row_group(g).num_rows for g in groups)
            for batch in reader.iter_batches(batch_size=BATCH_ROWS, row_groups=list(groups), columns=columns):
                table = table_from_arrow(pa.Table.from_batches([batch]), name=name, first_row=first + offset)
                part = summarise_table(table, plan, index, offset=offset)
                summary = part if summary is None else summary.merge(part, plan.sample_rows)
                offset += batch.num_rows
        if offset != claimed:
            raise InputFileError(f"{name} is damaged: its footer says {claimed:,} rows in row groups {', '.join(str(g + 1) for g in groups)} "
                                 f"but their pages hold {offset:,}; export it again.")
    except FairAuditError as exc:
        return PartitionSummary.failed(plan, index, exc)
    except (OSError, pa.ArrowException) as exc:
        return PartitionSummary.failed(plan, index, InputFileError(f"{path} cannot be read as Parquet ({exc})."))
    return summary if summary is not None else PartitionSummary.empty(plan)


# ---------------------------------------------------------------------- dask DataFrame
class FrameSource:
    format = "dataframe"

    def __init__(self, frame):
        require_dask()
        self.frame = frame
        self.name = "dask DataFrame"
        self.paths = []
        self.n_bytes = None
        self.encoding = self.delimiter = None
        self.parts = frame.to_delayed()
        self.partitions = list(range(len(self.parts)))
        head = frame.partitions[0].compute()
        self.head = _frame_table(head.iloc[:HEAD_ROWS], self.name, 1)

    @property
    def description(self) -> str:
        return f"a dask DataFrame, {_count(len(self.partitions), 'partition')}"

    def tasks(self, plan: PartitionPlan) -> list:
        from dask import delayed

        return [delayed(_frame_partition, pure=True)(part, plan, index, self.name) for index, part in enumerate(self.parts)]

    def shifts(self, summary: PartitionSummary) -> dict[int, int]:
        shifts, before = {}, 0
        for index in self.partitions:
            shifts[index] = before
            before += summary.row_counts.get(index, 0)
        return shifts


def _frame_table(frame, name: str, first_row: int):
    import pyarrow as pa

    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise InputFileError(f"{name}: a partition cannot be converted to columns of one type each ({exc}).") from None
    return table_from_arrow(table, name=name, first_row=first_row)


def _frame_partition(frame, plan: PartitionPlan, index: int, name: str) -> PartitionSummary:
    wanted = list(plan.read_columns)
    try:
        columns = [c for c in frame.columns if str(c).strip() in wanted]
        return summarise_table(_frame_table(frame[columns], name, 1), plan, index)
    except FairAuditError as exc:
        return PartitionSummary.failed(plan, index, exc)
