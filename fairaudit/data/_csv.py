"""Reading delimited text: Arrow for the columns, the ``csv`` module for the diagnostics.

**Fast path.** The first lines are sniffed (delimiter, header, where the data start, a type for
each column), then Arrow parses the rest with an explicit type per column: numeric columns go
straight into one preallocated float64 block, text columns stay Arrow strings. No Python object
is made per cell. While a line feed always ends a record, the data are cut into pieces of whole
lines and each piece is parsed by Arrow's multi-threaded reader (memory: the block plus one
piece); a file whose quoted fields may hold a line break is read by Arrow's streaming reader.

**Diagnostics.** Arrow is lenient where users want to hear about a problem, so the first
reader's checks are kept by passes that run only when needed:

* Arrow fails (a ragged row, a broken quote, a blank line of white space or delimiters, a
  cell that breaks a column's type after the sample): the *diagnostic reader* reads the file
  the way the first reader did (Python's ``csv`` module, strict quoting, row by row, streaming)
  and either raises the precise message — file, line, what to fix — or builds the table
  itself, still as Arrow strings;
* the file has quotes (Arrow accepts ``"x"y`` and swallows the rest of the file into an
  unclosed quoted field): every line with a quote is held to strict ``csv`` rules — lines
  whose quotes pair up as whole fields are recognised with NumPy on the bytes, the others go
  through the ``csv`` module (:class:`_QuoteCheck`); rows that are not one per line (blank
  lines, quoted line breaks) are numbered with their lines in the file by the *line pass*.
"""

from __future__ import annotations

import csv
import io
import re
import threading
from array import array
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..errors import (
    DuplicateColumnError,
    EmptyFileError,
    EncodingError,
    MalformedCSVError,
)
from ._cells import DECIMAL_COMMA_PATTERN, NULL_VALUES, looks_numeric, parse_text
from ._memory import without_huge_pages
from ._source import Scan, Source

DELIMITERS = (",", ";", "\t", "|")
SAMPLE_LINES = 200
"""Lines after the skipped ones used to detect the delimiter (as the first reader did)."""
TYPE_SAMPLE_ROWS = 2000
"""Rows of the sniffed head used to choose a column's type for Arrow (a later cell that breaks
it only costs a re-read of that column as text)."""
HEAD_LIMIT = 8 << 20
BLOCK_SIZE = 1 << 20
PIECE_BYTES = 4 << 20
"""Bytes of whole lines parsed at a time by Arrow's multi-threaded reader (memory: about twice this)."""
BATCH_ROWS = 65536
POOL = pa.system_memory_pool()
"""The memory pool of Arrow's parse and of the reader's string columns: the C library's ``malloc``,
whose freed memory :func:`fairaudit.data.release_arrow_memory` hands back to the system. Arrow's
default pool (mimalloc) kept ~15 MB of parse buffers after a 1,000,000 × 21 file was read (its
``release_unused`` gave none of it back), through the rest of the audit."""

_BOM = b"\xef\xbb\xbf"
_BINARY_SIGNATURES = {
    b"PK\x03\x04": "a ZIP archive (an .xlsx workbook is one)",
    b"\x1f\x8b": "a gzip archive",
    b"\xd0\xcf\x11\xe0": "an old Excel/Office file",
    b"%PDF": "a PDF",
    b"\x93NUMPY": "a NumPy .npy file",
}
_TERMINATOR = re.compile(rb"\r\n|\r|\n")
_CONVERSION_ERROR = re.compile(r"In CSV column #(\d+): CSV conversion error")


@contextmanager
def no_field_limit():
    """Let the ``csv`` module read fields of any length while we read (Arrow has no limit; the
    module's default of 131,072 characters would reject a long text cell only on some paths).

    The limit is process-wide and files may be read on several threads at once (the dask engine
    reads partitions on dask's threads): the first reader in lifts it, the last one out restores it."""
    with _FIELD_LIMIT_LOCK:
        if _FIELD_LIMIT["readers"] == 0:
            _FIELD_LIMIT["saved"] = csv.field_size_limit(2**31 - 1)  # returns the limit it replaces
        _FIELD_LIMIT["readers"] += 1
    try:
        yield
    finally:
        with _FIELD_LIMIT_LOCK:
            _FIELD_LIMIT["readers"] -= 1
            if _FIELD_LIMIT["readers"] == 0:
                csv.field_size_limit(_FIELD_LIMIT["saved"])


_FIELD_LIMIT_LOCK = threading.Lock()
_FIELD_LIMIT = {"readers": 0, "saved": 131072}


class Fallback(Exception):
    """The fast path cannot read this file exactly; the diagnostic reader takes over."""


@dataclass
class TextColumns:
    """What a reader hands over: names, columns (float64 arrays or Arrow strings), lines."""

    names: list[str]
    numeric: dict[str, np.ndarray]
    text: dict[str, pa.ChunkedArray]
    n_rows: int
    block: np.ndarray | None = None
    block_names: list[str] = field(default_factory=list)
    lines: np.ndarray | None = None  # line of each row; None: consecutive from first_line
    missing: dict[str, int] = field(default_factory=dict)  # missing cells of numeric columns, where counted
    first_line: int = 1
    has_header: bool = True
    log: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (column, why) left out when reading


# ---------------------------------------------------------------------------- text decisions
def text_encoding(scan: Scan, name: str) -> str:
    """The encoding to read ``scan``'s file with, or the first reader's EncodingError."""
    if scan.blank:
        raise EmptyFileError(f"{name} is empty; choose a CSV file with a header row and data rows.")
    for signature, what in _BINARY_SIGNATURES.items():
        if scan.head.startswith(signature):
            raise EncodingError(f"{name} is {what}, not a CSV text file; export it as CSV (UTF-8) or Parquet first.")
    if scan.head.startswith(b"PAR1"):
        raise EncodingError(f"{name} starts like a Parquet file but its end is missing (a partial copy?); copy or export it again.")
    if scan.head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in scan.head[:4096]:
        raise EncodingError(
            f"{name} is not UTF-8 or Latin-1 text (it looks like UTF-16/UTF-32 or a binary file); "
            "save it as 'CSV UTF-8' and upload it again."
        )
    if scan.utf8_error is None:
        return "utf-8-sig" if scan.head.startswith(_BOM) else "utf-8"
    if scan.has_nul:
        raise EncodingError(f"{name} contains NUL bytes: it is a binary file, not CSV text.")
    if scan.cp1252_undefined:  # neither Windows-1252 nor Latin-1 without C1 control characters
        raise EncodingError(
            f"{name} is not UTF-8, Windows-1252 or Latin-1 text (first undecodable byte "
            f"0x{scan.utf8_error_byte:02x} on line {scan.utf8_error_line}); save it as 'CSV UTF-8' and try again."
        )
    return "windows-1252"


def detect_delimiter(sample_lines: list[str]) -> str:
    """The delimiter that splits the sample into the most consistent multi-field rows."""
    best, best_score = ",", (0.0, 0)
    for delimiter in DELIMITERS:
        try:
            counts = [len(r) for r in csv.reader(sample_lines, delimiter=delimiter) if any(f.strip() for f in r)]
        except csv.Error:
            continue
        if not counts:
            continue
        mode = max(set(counts), key=counts.count)
        if mode < 2:
            continue
        score = (counts.count(mode) / len(counts), mode)
        if score > best_score:
            best, best_score = delimiter, score
    return best


def clean_header(names: list[str], file_name: str, log: list[str]) -> list[str]:
    """Header names stripped; empty ones named ``unnamed_<i>``; duplicates are an error."""
    cleaned = []
    for i, raw in enumerate(names):
        label = raw.strip()
        if not label:
            label = f"unnamed_{i + 1}"
            log.append(f"column {i + 1} has no header name: called it {label!r}")
        cleaned.append(label)
    seen: dict[str, int] = {}
    for i, label in enumerate(cleaned):
        if label in seen:
            raise DuplicateColumnError(
                f"{file_name}: columns {seen[label] + 1} and {i + 1} are both named {label!r}; "
                "rename one of them in the header."
            )
        seen[label] = i
    return cleaned


def _quote_error(name: str, exc: csv.Error, line: int, record_start: int) -> MalformedCSVError:
    """The message for a quoting error: the line of the fault, or where an unclosed field opens."""
    if "unexpected end of data" in str(exc):
        return MalformedCSVError(
            f"{name} line {record_start}: a quoted field that opens on this line is never closed "
            "(unexpected end of data); fix the quoting in that line."
        )
    return MalformedCSVError(f"{name} line {line}: {exc} (a quote is probably not closed); fix the quoting in that line.")


def _ragged_error(name: str, line: int, fields: int, width: int, delimiter: str) -> MalformedCSVError:
    shown = "TAB" if delimiter == "\t" else delimiter
    return MalformedCSVError(
        f"{name} line {line} has {fields} fields but the header has {width} "
        f"(delimiter {shown!r}); check that line for a stray delimiter or an unquoted comma."
    )


# ---------------------------------------------------------------------------- sniffing
@dataclass
class Layout:
    """Where the data start and how to parse them, from the first lines."""

    encoding: str
    delimiter: str
    has_header: bool | None = None
    names: list[str] = field(default_factory=list)
    data_offset: int = 0  # byte offset of the first line after the header
    data_line: int = 1  # its line number in the file
    leading_blank: int = 0  # blank lines skipped before the first record
    numeric: list[bool] = field(default_factory=list)  # per column: read as float64 first


def _read_head(source: Source, skip_rows: int) -> tuple[bytes, bool]:
    """The first bytes: enough lines for the sample after the skipped ones, or the whole file."""
    wanted = skip_rows + SAMPLE_LINES + TYPE_SAMPLE_ROWS
    parts, total, lines = [], 0, 0
    with source.open() as stream:
        while total < HEAD_LIMIT:
            chunk = stream.read(BLOCK_SIZE)
            if not chunk:
                return b"".join(parts), True
            parts.append(chunk)
            total += len(chunk)
            lines += chunk.count(b"\n") + chunk.count(b"\r")
            if lines > wanted + 1:
                break
        more = stream.read(1)
    return b"".join(parts), not more


def _line_starts(raw: bytes, count: int) -> list[int]:
    """Byte offsets where the first ``count`` lines of ``raw`` start (fewer if it has fewer)."""
    starts = [0]
    for match in _TERMINATOR.finditer(raw):
        if len(starts) >= count:
            break
        starts.append(match.end())
    return starts


def sniff(source: Source, scan: Scan, *, encoding: str, skip_rows: int, header: bool | None, delimiter: str | None) -> tuple[Layout, bool]:
    """Delimiter (always), and the header and data start when the head shows them plainly.

    Returns the layout and whether the fast path may use it; the first reader's
    "nothing after the skipped lines" error is raised here.
    """
    raw, complete = _read_head(source, skip_rows)
    if not complete:  # cut after the last LF so no line (or CRLF) is split
        cut = raw.rfind(b"\n")
        raw = raw[: cut + 1] if cut >= 0 else raw
    bom = len(_BOM) if encoding == "utf-8-sig" else 0
    text = raw[bom:].decode("utf-8" if bom or encoding == "utf-8" else encoding, errors="replace" if not complete else "strict")
    body = io.StringIO(text, newline="")
    for _ in range(skip_rows):
        body.readline()
    position = body.tell()
    rest = text[position:]
    sample = rest.splitlines()[:SAMPLE_LINES]
    if not any(line.strip() for line in sample) and (complete or len(sample) >= SAMPLE_LINES):
        raise EmptyFileError(f"{source.name} has nothing after the first {skip_rows} skipped line(s).")
    layout = Layout(encoding=encoding, delimiter=delimiter or detect_delimiter(sample))
    return layout, _find_data(layout, rest, raw, bom, skip_rows, header, complete)


def _find_data(layout: Layout, rest: str, raw: bytes, bom: int, skip_rows: int, header, complete: bool) -> bool:
    reader = csv.reader(io.StringIO(rest, newline=""), delimiter=layout.delimiter, quotechar='"', strict=True)
    total_lines = rest.count("\n") + rest.count("\r") - rest.count("\r\n") + 1
    consumed, blank, first, first_start, first_end = 0, 0, None, 0, 0
    records: list[list[str]] = []
    try:
        for record in reader:
            start, consumed = consumed + 1, reader.line_num
            if not any(cell.strip() for cell in record):
                if first is None:
                    blank += 1
                continue
            if first is None:
                first, first_start, first_end = [c.strip() for c in record], start, consumed
                if not complete and consumed >= total_lines - 1:
                    return False  # the header may run past the head
                continue
            records.append(record)
            if len(records) >= TYPE_SAMPLE_ROWS:
                break
    except csv.Error:
        if complete or first is None or reader.line_num < total_lines - 1:
            return False  # a real quoting error: the diagnostic reader names it
        # else the head was cut inside a quoted field: the sample ends here
    if first is None:
        return False  # no records at all: the diagnostic reader says so
    layout.has_header = header if header is not None else not all(looks_numeric(c) for c in first)
    layout.leading_blank = blank
    if layout.has_header:
        layout.names = first
        data_line = skip_rows + first_end + 1  # the line after the header record
    else:
        layout.names = [f"col_{i + 1}" for i in range(len(first))]
        data_line = skip_rows + first_start
        records.insert(0, first)
    starts = _line_starts(raw[bom:], data_line)
    if len(starts) < data_line:
        if not complete:
            return False
        layout.data_offset = len(raw)  # nothing after the header
    else:
        layout.data_offset = bom + starts[data_line - 1]
    layout.data_line = data_line
    layout.numeric = _numeric_columns(records, len(layout.names))
    return True


def _numeric_columns(records: list[list[str]], width: int) -> list[bool]:
    """Per column: every non-missing sample cell is a finite number written as Arrow parses it
    (decimal commas are not), so the column is read as float64 (one parse for all columns)."""
    rows = [r for r in records if len(r) == width]
    if not rows:
        return [True] * width
    strings = pc.utf8_trim_whitespace(pa.array([r[j] for j in range(width) for r in rows], pa.string()))
    parsed = parse_text(strings)
    comma = np.asarray(pc.match_substring_regex(strings, DECIMAL_COMMA_PATTERN).to_numpy(zero_copy_only=False), dtype=bool)
    text = (parsed.bad | comma).reshape(width, len(rows))
    return [not flag for flag in text.any(axis=1)]


# ---------------------------------------------------------------------------- fast path
def _arrow_options(layout: Layout, names: list[str], types: dict, scan: Scan, include: list[str] | None = None, *, whole_lines: bool = False):
    """Arrow's options for the data region; ``whole_lines``: every record is known to be one line
    (no quoted line break), which lets Arrow cut blocks at any line feed."""
    read = pacsv.ReadOptions(
        column_names=names,
        block_size=BLOCK_SIZE,
        use_threads=True,
        encoding="utf8" if layout.encoding in ("utf-8", "utf-8-sig") else layout.encoding,
    )
    parse = pacsv.ParseOptions(
        delimiter=layout.delimiter,
        quote_char='"',
        double_quote=True,
        escape_char=False,
        newlines_in_values=scan.has_quote and not whole_lines,
        ignore_empty_lines=True,
    )
    convert = pacsv.ConvertOptions(
        column_types=types,
        null_values=NULL_VALUES,
        strings_can_be_null=False,
        quoted_strings_can_be_null=True,
        true_values=[],
        false_values=[],
        include_columns=include,
    )
    return read, parse, convert


def _open_at(source: Source, offset: int):
    if source.data is not None:
        return pa.BufferReader(pa.py_buffer(source.data)[offset:])
    stream = pa.OSFile(str(source.path), "r")
    stream.seek(offset)
    return stream


def _trim(array: pa.Array) -> pa.Array:
    return pc.utf8_trim_whitespace(array, memory_pool=POOL)


def read_fast(source: Source, scan: Scan, layout: Layout, name: str) -> TextColumns:
    """Arrow into a float64 block and Arrow strings; :class:`Fallback` when the file needs the
    diagnostic reader.

    The data are parsed in pieces of whole lines, each by Arrow's multi-threaded reader
    (:func:`_read_pieces`), when a line feed always ends a record; a file whose quoted fields
    may hold a line break (a quote that does not close on its line) is read by Arrow's
    streaming reader instead (:func:`_stream`, one thread)."""
    log: list[str] = []
    names = clean_header(layout.names, name, log) if layout.has_header else list(layout.names)
    numeric = list(layout.numeric)
    capacity = _capacity(scan, layout)
    if capacity < 0:
        raise Fallback("layout")
    in_pieces = not scan.bare_cr  # pieces are cut at line feeds
    for _ in range(len(names) + 1):  # each retry turns one more column into text
        try:
            if in_pieces:
                try:
                    columns, suspicious = _read_pieces(source, scan, layout, names, numeric, capacity, name)
                    break
                except _Unsplittable:
                    in_pieces = False
            columns, suspicious = _stream(source, scan, layout, names, numeric, capacity)
            break
        except _TypeBroken as broken:
            numeric[broken.column] = False
    else:  # pragma: no cover - every column is text after len(names) retries
        raise Fallback("types")
    if columns.n_rows == 0:
        raise Fallback("no data rows")  # the diagnostic reader gives the first reader's message
    columns.log = log
    columns.has_header = bool(layout.has_header)
    if suspicious:  # NaN or infinity spelt as numbers: read those cells as text for the messages
        columns.text.update(_read_as_text(source, scan, layout, names, suspicious))
        for column in suspicious:
            del columns.numeric[column]
    expected = capacity - _trailing_blank(scan)
    columns.lines, inner_blank = line_pass(source, scan, layout, columns.n_rows, expected, name, quotes_checked=in_pieces)
    if columns.lines is None:
        columns.first_line = layout.data_line
        inner_blank = _trailing_blank(scan)
    blank = layout.leading_blank + inner_blank
    if blank:
        columns.log.insert(0, f"skipped {blank} blank line(s)")
    if not layout.has_header:
        columns.log.append(f"no header row: columns named col_1 … col_{len(names)}")
    return columns


class _TypeBroken(Exception):
    def __init__(self, column: int):
        self.column = column


class _Unsplittable(Exception):
    """A line's quotes do not close on it: a quoted field may hold a line break, so pieces cut
    at line feeds could cut a record."""


def _capacity(scan: Scan, layout: Layout) -> int:
    """Most rows the data lines can hold: every line from the first data line on."""
    return scan.lines - (layout.data_line - 1)


def _trailing_blank(scan: Scan) -> int:
    """Empty lines at the end of the file (after the last line's own line end)."""
    body = scan.tail.rstrip(b"\r\n")
    if not body:
        return 0
    trailing = scan.tail[len(body):]
    ends = trailing.count(b"\n") + trailing.count(b"\r") - trailing.count(b"\r\n")
    return max(ends - 1, 0)


class _Block:
    """Record batches gathered into one preallocated float64 block (numeric columns, Fortran
    order, ``capacity`` rows) and lists of string arrays; also the numeric columns that hold NaN
    or infinity spelt as numbers."""

    def __init__(self, names: list[str], numeric: list[bool], capacity: int):
        self.names, self.capacity = names, capacity
        self.types = {n: (pa.float64() if is_number else pa.string()) for n, is_number in zip(names, numeric, strict=True)}
        self.number_names = [n for n, is_number in zip(names, numeric, strict=True) if is_number]
        self.position = {n: j for j, n in enumerate(self.number_names)}
        self.buffer = np.empty(max(capacity, 0) * len(self.number_names))
        without_huge_pages(self.buffer)  # its first writes, 2–4× faster here (fairaudit.data._memory)
        self.strings: dict[str, list[pa.Array]] = {n: [] for n in names if n not in self.position}
        self.suspicious: set[str] = set()
        self.missing = dict.fromkeys(self.number_names, 0)  # Arrow's nulls: NaN in the block
        self.rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        m, capacity, rows = batch.num_rows, self.capacity, self.rows
        if rows + m > capacity:
            raise Fallback("more rows than lines")
        _check_blank_rows(batch)
        for column_name, column in zip(batch.schema.names, batch.columns, strict=True):
            j = self.position.get(column_name)
            if j is None:
                self.strings[column_name].append(_trim(column))
                continue
            values = column.to_numpy(zero_copy_only=False)
            self.buffer[j * capacity + rows : j * capacity + rows + m] = values
            if m - np.count_nonzero(np.isfinite(values)) != column.null_count:
                self.suspicious.add(column_name)
            self.missing[column_name] += column.null_count
        self.rows = rows + m

    def finish(self) -> tuple[TextColumns, list[str]]:
        block = _compact(self.buffer, self.capacity, self.rows, len(self.number_names))
        columns = TextColumns(
            names=self.names,
            numeric={n: block[:, j] for n, j in self.position.items()},
            text={n: pa.chunked_array(parts, pa.string()) for n, parts in self.strings.items()},
            n_rows=self.rows,
            block=block,
            block_names=self.number_names,
            missing={n: count for n, count in self.missing.items() if n not in self.suspicious},  # the others become text
        )
        return columns, [n for n in self.number_names if n in self.suspicious]


@contextmanager
def _arrow_errors(numeric: list[bool]):
    """Arrow's refusals as the fast path's: a cell that breaks a numeric column's type retries
    with that column as text (:class:`_TypeBroken`); anything else is the diagnostic reader's."""
    try:
        yield
    except pa.ArrowInvalid as exc:
        match = _CONVERSION_ERROR.search(str(exc))
        if match and numeric[int(match.group(1))]:
            raise _TypeBroken(int(match.group(1))) from None
        raise Fallback(str(exc)) from None


def _stream(source: Source, scan: Scan, layout: Layout, names: list[str], numeric: list[bool], capacity: int) -> tuple[TextColumns, list[str]]:
    """Arrow's streaming reader (one thread), batch by batch into a :class:`_Block`."""
    block = _Block(names, numeric, capacity)
    read, parse, convert = _arrow_options(layout, names, block.types, scan)
    with _arrow_errors(numeric):
        reader = pacsv.open_csv(_open_at(source, layout.data_offset), read_options=read, parse_options=parse, convert_options=convert,
                                memory_pool=POOL)
        for batch in reader:
            block.add(batch)
    source.check_unchanged()
    return block.finish()


def _read_pieces(source: Source, scan: Scan, layout: Layout, names: list[str], numeric: list[bool], capacity: int, name: str) -> tuple[TextColumns, list[str]]:
    """The data in pieces of whole lines (:data:`PIECE_BYTES`), each parsed by Arrow's
    multi-threaded reader into a :class:`_Block` — Arrow's own speed on several cores, with
    memory for one piece at a time. With quotes, each piece's quoting is checked first
    (:class:`_QuoteCheck`): a line whose quotes do not close on it raises :class:`_Unsplittable`."""
    block = _Block(names, numeric, capacity)
    read, parse, convert = _arrow_options(layout, names, block.types, scan, whole_lines=True)
    check = _QuoteCheck(layout, name, splitting=True) if scan.has_quote else None
    with _arrow_errors(numeric), ThreadPoolExecutor(1) as checker:
        for piece in _pieces(source, layout):
            checking = None if check is None else checker.submit(check.lines, piece)  # alongside Arrow's parse
            try:
                table, failure = pacsv.read_csv(pa.BufferReader(pa.py_buffer(piece)), read_options=read, parse_options=parse, convert_options=convert,
                                                memory_pool=POOL), None
            except pa.ArrowInvalid as exc:
                table, failure = None, exc
            if checking is not None:
                checking.result()  # a quoting fault first, as if the piece had been checked before it was parsed
            if failure is not None:
                raise failure
            for batch in table.to_batches():
                block.add(batch)
            del table
    source.check_unchanged()
    return block.finish()


def _pieces(source: Source, layout: Layout):
    """The data region in pieces of about :data:`PIECE_BYTES`, each cut after a line feed (the
    last one at the end of the file), as memoryviews of the bytes read."""
    if source.data is not None:
        data, position = memoryview(source.data), layout.data_offset
        while position < len(data):
            stop = min(position + PIECE_BYTES, len(data))
            if stop < len(data):
                cut = source.data.rfind(b"\n", position, stop) + 1
                stop = cut if cut > position else _next_line_end(source.data, stop)
            yield data[position:stop]
            position = stop
        return
    with source.open() as stream:
        position = layout.data_offset
        while True:
            stream.seek(position)
            data = stream.read(PIECE_BYTES)
            if not data:
                return
            cut = data.rfind(b"\n") + 1
            if len(data) == PIECE_BYTES and cut < len(data):
                if cut == 0:  # a line longer than a piece: read on to its end
                    parts = [data]
                    while (more := stream.read(PIECE_BYTES)) and b"\n" not in more:
                        parts.append(more)
                    parts.append(more[: more.find(b"\n") + 1] if more else b"")
                    data = b"".join(parts)
                    cut = len(data)
                yield memoryview(data)[:cut]
                position += cut
            else:
                yield memoryview(data)
                position += len(data)


def _next_line_end(data: bytes, start: int) -> int:
    end = data.find(b"\n", start)
    return len(data) if end < 0 else end + 1


def _check_blank_rows(batch: pa.RecordBatch) -> None:
    """A row whose cells are all empty (``,,``) was a blank line to the first reader."""
    empty = None
    for column in batch.columns:
        if pa.types.is_string(column.type):
            mask = np.asarray(pc.equal(_trim(column), "").to_numpy(zero_copy_only=False), dtype=bool)
        else:
            if column.null_count == 0:
                return
            mask = np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        empty = mask if empty is None else empty & mask
        if not empty.any():
            return
    if empty is not None and empty.any():
        raise Fallback("a row of empty cells")


def _compact(buffer: np.ndarray, capacity: int, rows: int, k: int) -> np.ndarray:
    """The ``rows × k`` Fortran-ordered block from a buffer with ``capacity`` rows per column,
    moved down in place and shrunk (no second copy of the data)."""
    if rows < capacity:
        for j in range(1, k):
            buffer[j * rows : (j + 1) * rows] = buffer[j * capacity : j * capacity + rows]
        buffer.resize(rows * k, refcheck=False)
    block = buffer.reshape(k, rows).T if k else np.empty((rows, 0))
    block.flags.writeable = False
    return block


def _read_as_text(source: Source, scan: Scan, layout: Layout, names: list[str], columns: list[str]) -> dict[str, pa.ChunkedArray]:
    """Some columns again, as text (the same parse, so the same rows)."""
    types = {n: pa.string() for n in columns}
    read, parse, convert = _arrow_options(layout, names, types, scan, include=columns)
    table = pacsv.read_csv(_open_at(source, layout.data_offset), read_options=read, parse_options=parse, convert_options=convert, memory_pool=POOL)
    return {n: pa.chunked_array([_trim(chunk) for chunk in table.column(n).chunks], pa.string()) for n in columns}


# ---------------------------------------------------------------------------- line pass
def line_pass(source: Source, scan: Scan, layout: Layout, n_rows: int, expected: int, name: str, *, quotes_checked: bool = False) -> tuple[np.ndarray | None, int]:
    """The line of each data row (None: one row per line, consecutive) and the blank lines
    among them; quoted records are checked with strict ``csv`` rules on the way (the first
    reader's quoting errors, which Arrow lets pass) unless ``quotes_checked`` says the pieces
    were checked line by line already."""
    if n_rows == expected and not scan.bare_cr:
        if scan.has_quote and not quotes_checked:
            _check_quoted_lines(source, layout, name)
        return None, 0
    if not scan.has_quote and not scan.bare_cr:
        return _lines_without_quotes(source, layout, n_rows)
    return _record_lines(source, layout, n_rows, name)


def _data_encoding(layout: Layout) -> str:
    return "utf-8" if layout.encoding in ("utf-8", "utf-8-sig") else layout.encoding


def _chunks_of_lines(source: Source, layout: Layout):
    """The data region as text, piece by piece (:func:`_pieces`), each cut after a line feed."""
    encoding = _data_encoding(layout)
    for data in _pieces(source, layout):
        yield bytes(data).decode(encoding)


_QUOTE, _LF, _CR = ord('"'), ord("\n"), ord("\r")


def _check_quoted_lines(source: Source, layout: Layout, name: str) -> None:
    """Every line is one record here (as many rows as lines): check each line that has a quote
    with strict ``csv`` rules (:class:`_QuoteCheck`)."""
    check = _QuoteCheck(layout, name)
    for data in _pieces(source, layout):
        check.lines(data)


class _QuoteCheck:
    """Strict ``csv`` quoting, line by line, over consecutive chunks of the data region (bytes
    cut after a line feed), counting the lines from the first data line.

    A line whose quotes pair up as whole fields — each opening quote first in its field, the
    next quote on the same line closing it and last in its field — is valid under those rules,
    and most quoted files have only such lines (a quoted text column). They are recognised with
    NumPy on the bytes (:func:`_unpaired_quote_lines`); only the other lines — an escaped quote
    ``""``, a quote inside an unquoted field, a fault — go through the ``csv`` module, so every
    message and line number is the ``csv`` module's. A delimiter that is not one byte in the
    file's encoding takes the ``csv`` module for every quoted line.

    ``splitting``: the lines are checked before Arrow parses them in pieces cut at line feeds; a
    line whose quoted field does not close on it may be a record over several lines, which is
    not an error but :class:`_Unsplittable` (the file is then read whole, and checked after)."""

    def __init__(self, layout: Layout, name: str, *, splitting: bool = False):
        self.name, self.splitting, self.delimiter = name, splitting, layout.delimiter
        self.encoding = _data_encoding(layout)
        try:
            self.byte = layout.delimiter.encode(self.encoding)
        except UnicodeEncodeError:
            self.byte = b""
        self.line = layout.data_line

    def lines(self, data) -> None:
        """Check the lines of ``data`` (a bytes-like chunk cut after a line feed, or the end)."""
        if len(self.byte) == 1:
            array = np.frombuffer(data, dtype=np.uint8)
            ends = np.flatnonzero(array == _LF)
            starts, stops, offsets = _unpaired_quote_lines(array, ends, self.byte[0])
            texts = [bytes(data[a:b]).decode(self.encoding) for a, b in zip(starts.tolist(), stops.tolist(), strict=True)]
            numbers = (self.line + offsets).tolist()
            count = ends.size
        else:
            lines = bytes(data).decode(self.encoding).split("\n")
            chosen = [i for i, text in enumerate(lines) if '"' in text]
            texts, numbers = [lines[i] for i in chosen], [self.line + i for i in chosen]
            count = len(lines) - 1
        if texts:
            self._with_csv(texts, numbers)
        self.line += count + (len(data) > 0 and data[-1] != _LF)

    def _with_csv(self, texts: list[str], numbers: list[int]) -> None:
        """Check ``texts`` (lines, each with a quote; ``numbers`` their lines in the file) with
        strict ``csv`` rules from the field of their first quote; the first line at fault raises
        the ``csv`` module's message with its line."""
        delimiter = self.delimiter
        tails = [t[t.rfind(delimiter, 0, t.find('"')) + 1 :] for t in texts]
        try:
            records = sum(1 for _ in csv.reader(tails, delimiter=delimiter, quotechar='"', strict=True))
        except csv.Error:
            records = -1
        if records == len(tails):
            return
        for text, number in zip(texts, numbers, strict=True):
            try:
                parsed = list(csv.reader([text], delimiter=delimiter, quotechar='"', strict=True))
            except csv.Error as exc:
                if self.splitting and "unexpected end of data" in str(exc):
                    raise _Unsplittable from None
                raise _quote_error(self.name, exc, number, number) from None
            if len(parsed) != 1:
                raise _Unsplittable if self.splitting else Fallback("a record over several lines")
        raise Fallback("csv and Arrow disagree on the records")


def _unpaired_quote_lines(data: np.ndarray, ends: np.ndarray, delimiter: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lines of ``data`` (bytes; ``ends`` the positions of its line feeds) whose quotes do
    not all pair up as whole fields: ``(starts, stops, indices)`` — each line's byte range
    without its line feed, and its index among the lines of ``data``.

    Within a line the quotes are taken in pairs; a pair is a whole field when its first quote
    follows a delimiter or starts the line and its second quote is on the same line and is
    followed by a delimiter or the line's end (LF or CRLF). Between pairs there are no quotes,
    so such a line parses under strict ``csv`` rules as one record of quoted and unquoted
    fields. Every other line that has a quote is returned."""
    quotes = np.flatnonzero(data == _QUOTE)
    empty = np.zeros(0, dtype=np.int64)
    if quotes.size == 0:
        return empty, empty, empty
    line = np.searchsorted(ends, quotes)  # the line of each quote (no quote is a line feed)
    first = np.ones(quotes.size, dtype=bool)
    first[1:] = line[1:] != line[:-1]
    starts_at = np.flatnonzero(first)
    rank = np.arange(quotes.size) - np.repeat(starts_at, np.diff(np.append(starts_at, quotes.size)))
    opening = rank % 2 == 0
    before = data[quotes - 1]  # quotes[0] − 1 = −1 reads the last byte: replaced below
    if quotes[0] == 0:
        before[0] = _LF
    last = data.size - 1
    after = data[np.minimum(quotes + 1, last)]
    after[quotes == last] = _LF
    partnered = np.zeros(quotes.size, dtype=bool)
    partnered[:-1] = line[1:] == line[:-1]  # the next quote is on the same line
    opens_field = (before == delimiter) | (before == _LF)
    closes_field = (after == delimiter) | (after == _LF) | (after == _CR)
    bad = np.where(opening, ~opens_field | ~partnered, ~closes_field)
    if not bad.any():
        return empty, empty, empty
    indices = np.unique(line[bad])
    starts = np.where(indices > 0, ends[np.maximum(indices - 1, 0)] + 1, 0) if ends.size else np.zeros_like(indices)
    stops = ends[indices] if ends.size and indices[-1] < ends.size else np.append(ends[indices[:-1]], data.size)
    return starts, stops, indices


def _lines_without_quotes(source: Source, layout: Layout, n_rows: int) -> tuple[np.ndarray, int]:
    """Without quotes every line is a record or blank: number the non-empty lines."""
    lines = np.empty(n_rows, dtype=np.int64)
    row, blank, line = 0, 0, layout.data_line
    for text in _chunks_of_lines(source, layout):
        parts = text.split("\n")
        if text.endswith("\n"):
            parts.pop()
        empty = np.fromiter((not p.strip() for p in parts), dtype=bool, count=len(parts))
        numbers = line + np.flatnonzero(~empty)
        if row + numbers.size > n_rows:
            raise Fallback("more lines than rows")
        lines[row : row + numbers.size] = numbers
        row += numbers.size
        blank += int(empty.sum())
        line += len(parts)
    if row != n_rows:
        raise Fallback("fewer lines than rows")
    return lines, blank


def _record_lines(source: Source, layout: Layout, n_rows: int, name: str) -> tuple[np.ndarray, int]:
    """Quoted records over several lines: ``csv`` (strict) finds where each record starts."""
    lines = np.empty(n_rows, dtype=np.int64)
    row = blank = consumed = 0
    stream = source.open()
    stream.seek(layout.data_offset)
    encoding = _data_encoding(layout)
    offset = layout.data_line - 1
    with io.TextIOWrapper(stream, encoding=encoding, newline="") as text:
        reader = csv.reader(text, delimiter=layout.delimiter, quotechar='"', strict=True)
        try:
            for record in reader:
                start, consumed = consumed + 1, reader.line_num
                if not record or not any(cell.strip() for cell in record):
                    if record:
                        raise Fallback("a record of empty cells")
                    blank += 1
                    continue
                if row >= n_rows:
                    raise Fallback("more records than rows")
                lines[row] = start + offset
                row += 1
        except csv.Error as exc:
            raise _quote_error(name, exc, reader.line_num + offset, consumed + 1 + offset) from None
    if row != n_rows:
        raise Fallback("fewer records than rows")
    return lines, blank


# ---------------------------------------------------------------------------- diagnostic reader
def read_diagnostic(source: Source, layout: Layout, *, skip_rows: int, header: bool | None, name: str) -> TextColumns:
    """The first reader's algorithm, streaming: strict ``csv`` parsing record by record, blank
    lines skipped and counted, header detection, ragged rows named by line — cells kept as Arrow
    strings in batches. Raises the first reader's errors in its order."""
    encoding = "utf-8-sig" if layout.encoding == "utf-8-sig" else layout.encoding
    stream = io.TextIOWrapper(source.open(), encoding=encoding, newline="")
    with stream:
        for _ in range(skip_rows):
            stream.readline()
        reader = csv.reader(stream, delimiter=layout.delimiter, quotechar='"', strict=True)
        collector = _Collector()
        consumed = blank = 0
        try:
            for record in reader:
                start, consumed = consumed + 1, reader.line_num
                if not any(cell.strip() for cell in record):
                    blank += 1
                    continue
                collector.add([cell.strip() for cell in record], start + skip_rows, header)
        except csv.Error as exc:
            raise _quote_error(name, exc, reader.line_num + skip_rows, consumed + 1 + skip_rows) from None
    source.check_unchanged()
    log = [f"skipped {blank} blank line(s)"] if blank else []
    return collector.finish(name, log, layout.delimiter)


class _Collector:
    """Rows of the diagnostic reader gathered as Arrow string arrays, batch by batch."""

    def __init__(self):
        self.first: list[str] | None = None
        self.first_line = 0
        self.has_header = True
        self.width = 0
        self.batch: list[list[str]] = []
        self.chunks: list[list[pa.Array]] = []
        self.lines = array("q")
        self.ragged: tuple[int, int] | None = None
        self.n_rows = 0

    def add(self, cells: list[str], line: int, header: bool | None) -> None:
        if self.first is None:
            self.first, self.first_line = cells, line
            self.has_header = header if header is not None else not all(looks_numeric(c) for c in cells)
            self.width = len(cells)
            self.chunks = [[] for _ in range(self.width)]
            if self.has_header:
                return
        if self.ragged is not None:
            return
        if len(cells) != self.width:
            if len(cells) > self.width and not any(cells[self.width :]):
                del cells[self.width :]  # a trailing delimiter: tolerated
            else:
                self.ragged = (line, len(cells))
                return
        self.batch.append(cells)
        self.lines.append(line)
        self.n_rows += 1
        if len(self.batch) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self.batch:
            return
        for j, column in enumerate(zip(*self.batch, strict=True)):
            self.chunks[j].append(pa.array(column, pa.string()))
        self.batch = []

    def finish(self, name: str, log: list[str], delimiter: str) -> TextColumns:
        if self.first is None:
            raise EmptyFileError(f"{name} has no rows.")
        if self.has_header:
            names = self.first
        else:
            names = [f"col_{i + 1}" for i in range(self.width)]
            log.append(f"no header row: columns named col_1 … col_{self.width}")
        if self.n_rows == 0 and self.ragged is None:
            raise EmptyFileError(f"{name} has a header but no data rows; add rows of values below the header.")
        names = clean_header(names, name, log) if self.has_header else names
        if self.ragged is not None:
            raise _ragged_error(name, self.ragged[0], self.ragged[1], self.width, delimiter)
        self._flush()
        text = {n: pa.chunked_array(chunks, pa.string()) for n, chunks in zip(names, self.chunks, strict=True)}
        return TextColumns(
            names=list(names),
            numeric={},
            text=text,
            n_rows=self.n_rows,
            lines=np.frombuffer(self.lines, dtype=np.int64).copy(),
            has_header=self.has_header,
            log=log,
        )

