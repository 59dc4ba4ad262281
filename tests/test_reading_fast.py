"""The reader's fast paths keep the ``csv`` module's messages and line numbers.

The strict quoting check of a file whose rows are one per line (``_csv._check_quoted_lines``)
recognises the lines whose quotes pair up as whole fields with NumPy on the bytes and sends only
the others through the ``csv`` module. These tests hold it to the ``csv``-module check it
replaced — the reader's own ``_QuoteCheck._with_csv`` given every quoted line — on generated
lines and chunk boundaries, and through ``read_table`` on files that take the fast path.
"""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fairaudit.data._csv as csv_module
import fairaudit.data._table as table_module
from fairaudit import read_table
from fairaudit.data._csv import Fallback, Layout, _check_quoted_lines, _unpaired_quote_lines
from fairaudit.data._source import Source
from fairaudit.errors import FairAuditError, MalformedCSVError

from .test_reading import _snapshot, messy_csvs


# ---------------------------------------------------------------- the reference: the csv-module check
def _reference_check(source: Source, layout: Layout, name: str) -> None:
    """The check as it was before the NumPy pass: every line with a quote through the reader's
    ``csv``-module check (``_QuoteCheck._with_csv``), on the data region at once (its chunking
    only cut the work, not the verdict). The fast path sends that method only the lines whose
    quotes do not pair up as whole fields; the verdicts must agree."""
    text = source.data[layout.data_offset :].decode(csv_module._data_encoding(layout))
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    quoted = [i for i, line in enumerate(lines) if '"' in line]
    if quoted:
        csv_module._QuoteCheck(layout, name)._with_csv([lines[i] for i in quoted], [layout.data_line + i for i in quoted])


def _outcome(check, raw: bytes, delimiter: str, encoding: str = "utf-8"):
    source = Source(name="t.csv", size=len(raw), data=raw)
    layout = Layout(encoding=encoding, delimiter=delimiter, data_offset=0, data_line=7)
    try:
        check(source, layout, "t.csv")
    except (FairAuditError, Fallback) as exc:
        return type(exc).__name__, str(exc)
    return None


# ---------------------------------------------------------------- generated lines
fields = st.one_of(
    st.text(alphabet='ab ,;"', max_size=5),  # anything: stray quotes, delimiters
    st.text(alphabet="ab ,;", max_size=4).map(lambda t: f'"{t}"'),  # a whole quoted field
    st.text(alphabet='ab,"', max_size=4).map(lambda t: '"' + t.replace('"', '""') + '"'),  # escaped quotes
    st.sampled_from(['"x"y', '"x" ', 'x"y', '"', '""', '"""', '"a', 'a"', '"a""']),
)


@st.composite
def quoted_lines(draw):
    delimiter = draw(st.sampled_from([",", ";", "\t", "|"]))
    lines = [delimiter.join(draw(st.lists(fields, min_size=1, max_size=4))) for _ in range(draw(st.integers(1, 12)))]
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    text = ending.join(lines) + (ending if draw(st.booleans()) else "")
    return text.encode(), delimiter


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(quoted_lines())
def test_lines_left_out_of_the_csv_check_parse_as_one_strict_record(case):
    raw, delimiter = case
    data = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero(data == ord("\n"))
    starts, stops, indices = _unpaired_quote_lines(data, ends, ord(delimiter))
    lines = raw.split(b"\n")
    assert [raw[a:b] for a, b in zip(starts, stops, strict=True)] == [lines[i] for i in indices]
    for i, line in enumerate(lines):
        if i in set(indices.tolist()):
            assert b'"' in line
        elif b'"' in line:
            records = list(csv.reader([line.decode()], delimiter=delimiter, quotechar='"', strict=True))
            assert len(records) == 1, line


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(quoted_lines(), st.sampled_from([7, 64, 1 << 22]))
def test_the_check_gives_the_csv_modules_verdict_message_and_line(case, chunk):
    raw, delimiter = case
    saved = csv_module.PIECE_BYTES
    csv_module.PIECE_BYTES = chunk  # piece boundaries inside the data
    try:
        assert _outcome(_check_quoted_lines, raw, delimiter) == _outcome(_reference_check, raw, delimiter)
    finally:
        csv_module.PIECE_BYTES = saved


@pytest.mark.parametrize("delimiter, encoding", [("§", "utf-8"), ("§", "windows-1252"), ("€", "windows-1252")])
def test_delimiters_beyond_ascii_keep_the_check(delimiter, encoding):
    for body in ['a§"x"\nb§"y"z\n', 'a§"x"\nb§"y"\n', 'a€"x"\n"b€c"\n"open§\n']:
        body = body.replace("§", delimiter)
        raw = body.encode(encoding)
        assert _outcome(_check_quoted_lines, raw, delimiter, encoding) == _outcome(_reference_check, raw, delimiter, encoding)


# ---------------------------------------------------------------- through read_table, on the fast path
def _quoted_file(rows: int, line: str | None = None, at: int = 0, ending: str = "\n") -> bytes:
    """A header and ``rows`` rows whose text column is quoted (as Arrow's and pandas' writers do),
    with ``line`` put in as row ``at`` (its line in the file is ``at + 2``)."""
    rng = np.random.default_rng(3)
    body = [f'{rng.normal():.5f},{i % 7},"{"ab"[i % 2]}"' for i in range(rows)]
    if line is not None:
        body[at] = line
    return ('"x","k","g"' + ending + ending.join(body) + ending).encode()


def _read_both(raw: bytes):
    """``read_table`` on the fast path and on the diagnostic reader: (class, message) or the table."""
    outcomes = []
    for fast in (True, False):
        table_module.FAST_PATH = fast
        try:
            table = read_table(raw, name="t.csv")
            outcomes.append(("table", table.n_rows, table.lines.tolist(), table.strings("g").to_pylist(),
                             table.numbers("x").tobytes()))
        except FairAuditError as exc:
            outcomes.append((type(exc).__name__, str(exc)))
        finally:
            table_module.FAST_PATH = True
    return outcomes


@pytest.mark.parametrize(
    "line, message",
    [
        ('0.5,1,"a"b', r"line 2502: ',' expected after '\"'"),  # junk after a closing quote
        ('0.5,1,"a" ', r"line 2502: ',' expected after '\"'"),  # a space after it
        ('0.5,"1"x,"a"', r"line 2502: ',' expected after '\"'"),  # in a middle field
    ],
)
@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_malformed_quote_late_in_a_quoted_file_is_named_at_its_line(line, message, ending, monkeypatch):
    raw = _quoted_file(3000, line, 2500, ending)
    fast, slow = _read_both(raw)
    assert fast == slow and fast[0] == "MalformedCSVError"
    assert fast[1].startswith("t.csv line 2502: ") and __import__("re").search(message, fast[1])
    monkeypatch.setattr(csv_module, "read_diagnostic", _no_diagnostic_reader)  # the fast path names it itself
    with pytest.raises(MalformedCSVError, match=message):
        read_table(raw, name="t.csv")


def _no_diagnostic_reader(*args, **kwargs):
    raise AssertionError("the fast path fell back to the diagnostic reader")


@pytest.mark.parametrize(
    "line",
    [
        '0.5,1,"a""b"',  # an escaped quote
        '0.5,1,""',  # an empty quoted field
        '0.5,1,a"b',  # a quote inside an unquoted field: a character like any other
        '0.5,1,"a,b"',  # a delimiter inside quotes
        '"0.5","1","a"',  # every field quoted
    ],
)
def test_valid_quoting_late_in_a_quoted_file_reads_as_the_diagnostic_reader_reads(line, monkeypatch):
    raw = _quoted_file(3000, line, 2500)
    fast, slow = _read_both(raw)
    assert fast == slow and fast[0] == "table" and fast[1] == 3000
    monkeypatch.setattr(csv_module, "read_diagnostic", _no_diagnostic_reader)
    assert read_table(raw, name="t.csv").n_rows == 3000


def test_a_fault_across_a_chunk_boundary_is_named_at_its_line(monkeypatch):
    raw = _quoted_file(3000, '0.5,1,"a"b', 2999)
    monkeypatch.setattr(csv_module, "PIECE_BYTES", 1000)  # ~40 pieces of lines
    fast, slow = _read_both(raw)
    assert fast == slow and "line 3001:" in fast[1]


# ---------------------------------------------------------------- pieces of whole lines
def _table_or_error(read):
    """``read()``'s table, or the class and message of the error it raised."""
    try:
        return read()
    except FairAuditError as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messy_csvs(), st.sampled_from([1, 16, 64]), st.booleans())
def test_small_pieces_read_exactly_what_the_diagnostic_reader_reads(raw, piece, from_disk):
    """Every file cut into pieces of a few lines (Arrow's multi-threaded reader per piece; from
    the bytes of an upload or from the disk) reads as the diagnostic reader reads it, or fails
    with its message."""
    def fast_read():
        if not from_disk:
            return read_table(raw, name="t.csv")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "t.csv"
            path.write_bytes(raw)
            return read_table(path)

    saved = csv_module.PIECE_BYTES
    csv_module.PIECE_BYTES = piece
    try:
        fast = _table_or_error(fast_read)
    finally:
        csv_module.PIECE_BYTES = saved
    table_module.FAST_PATH = False
    try:
        slow = _table_or_error(lambda: read_table(raw, name="t.csv"))
    finally:
        table_module.FAST_PATH = True
    if isinstance(fast, tuple) or isinstance(slow, tuple):
        assert fast == slow
    else:
        assert _snapshot(fast) == _snapshot(slow)


def test_a_quoted_line_break_after_the_first_piece_reads_the_file_whole(monkeypatch):
    """Pieces are cut at line feeds only while every quote closes on its line; a quoted line
    break sends the file to Arrow's streaming reader, with the same table and line numbers."""
    raw = _quoted_file(3000, '0.5,1,"two\nlines"', 2500)
    monkeypatch.setattr(csv_module, "PIECE_BYTES", 4096)
    streamed = []
    original = csv_module._stream
    monkeypatch.setattr(csv_module, "_stream", lambda *args: streamed.append(1) or original(*args))
    fast, slow = _read_both(raw)
    assert streamed and fast == slow and fast[1] == 3000
    assert fast[2][2499:2501] == [2501, 2502] and fast[2][2501] == 2504  # the record over lines 2502–2503


def test_pieces_of_a_file_without_quotes_or_with_blank_lines(monkeypatch):
    rng = np.random.default_rng(5)
    rows = [f"{rng.normal():.4f},{i % 3},{'ab'[i % 2]}" for i in range(2000)]
    rows[700] = ""  # a blank line in the middle of a piece
    raw = ("x,k,g\n" + "\n".join(rows) + "\n\n").encode()
    monkeypatch.setattr(csv_module, "PIECE_BYTES", 1000)
    fast, slow = _read_both(raw)
    assert fast == slow and fast[1] == 1999 and fast[2][699:701] == [701, 703]


def test_a_line_longer_than_a_piece(tmp_path, monkeypatch):
    """A path is read piece by piece from the disk: a line longer than a piece is read whole."""
    long_text = "y" * 5000
    path = tmp_path / "long.csv"
    path.write_bytes(("x,g\n" + "".join(f"{i},{long_text if i == 3 else 'a'}\n" for i in range(10)) + "10,b").encode())
    monkeypatch.setattr(csv_module, "PIECE_BYTES", 64)
    table = read_table(path)
    assert table.n_rows == 11 and table.strings("g")[3].as_py() == long_text and table.numbers("x")[-1] == 10


@pytest.mark.parametrize("from_disk", [False, True])
@pytest.mark.parametrize("quoted", [False, True])
def test_clean_files_in_small_pieces_stay_on_the_fast_path(tmp_path, monkeypatch, from_disk, quoted):
    raw = _quoted_file(800)
    if not quoted:
        raw = raw.replace(b'"', b"")
    whole = _snapshot(read_table(raw, name="t.csv"))
    source = raw
    if from_disk:
        source = tmp_path / "t.csv"
        source.write_bytes(raw)
    monkeypatch.setattr(csv_module, "PIECE_BYTES", 100)
    monkeypatch.setattr(csv_module, "read_diagnostic", _no_diagnostic_reader)
    monkeypatch.setattr(csv_module, "_stream", _no_diagnostic_reader)
    assert _snapshot(read_table(source, name="t.csv")) == whole


# ---------------------------------------------------------------- the scan of the bytes
def _expected_scan(raw: bytes):
    """What one pass over ``raw`` must find, computed on the whole bytes at once."""
    import hashlib

    from fairaudit.data._source import _CP1252_UNDEFINED, _TAIL, CHUNK, Scan

    try:
        raw.decode("utf-8")
        error, line, byte = None, 0, 0
    except UnicodeDecodeError as exc:
        error, byte = exc.start, raw[exc.start]
        line = raw[: exc.start].count(b"\n") + 1
    lf, cr, crlf = raw.count(b"\n"), raw.count(b"\r"), raw.count(b"\r\n")
    return Scan(hashlib.sha256(raw).hexdigest(), len(raw), raw[:CHUNK], raw[-_TAIL:], not raw or raw.isspace(), error,
                line, byte, b"\x00" in raw, any(b in raw for b in _CP1252_UNDEFINED), lf + cr - crlf, b'"' in raw, cr > crlf)


byte_texts = st.lists(
    st.sampled_from([b"a", b",", b" ", b"\n", b"\r", b"\r\n", b'"', b"\x00", "é".encode(), "€".encode(), b"\xe2\x82",
                     b"\x81", b"\x90", b"\xff", "日".encode()]),
    max_size=40,
).map(b"".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(byte_texts, st.sampled_from([1, 2, 3, 7, 1 << 22]))
def test_the_scan_of_chunks_finds_what_the_whole_bytes_hold(raw, chunk):
    from fairaudit.data import _source

    saved = _source.CHUNK
    _source.CHUNK = chunk
    try:
        assert _source.scan(Source(name="t.csv", size=len(raw), data=raw), 1 << 20) == _expected_scan(raw)
    finally:
        _source.CHUNK = saved


@pytest.mark.parametrize("piece", [100, 1 << 22])  # the two faults in different pieces, or in one
def test_a_quoting_fault_after_a_ragged_row_is_the_message_either_way(monkeypatch, piece):
    raw = _quoted_file(300, '0.5,1,"a"b', 200)
    raw = raw.replace(b'\n0.', b'\n0.,7,', 1)  # an extra field early in the file (line 2 or so)
    monkeypatch.setattr(csv_module, "PIECE_BYTES", piece)
    fast, slow = _read_both(raw)
    assert fast == slow and fast[0] == "MalformedCSVError" and "line 202:" in fast[1]
