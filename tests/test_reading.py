"""The Arrow reader: the old reader's every message, fast path = diagnostic reader, hostile inputs,
Parquet, and a raw table that holds no Python object per cell."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fairaudit.data._table as table_module
from fairaudit import FairAuditError, prepare, read_table
from fairaudit.cli import main
from fairaudit.errors import (
    EmptyFileError,
    EncodingError,
    FileTooLargeError,
    InputFileError,
    InputFileNotFound,
    MalformedCSVError,
    NonNumericColumnError,
    ParameterError,
)
from fairaudit.vocabulary import render

from .reading_corpus import CASES, outcome

EXPECTED = json.loads((Path(__file__).parent / "reading_corpus_expected.json").read_text(encoding="utf-8"))

# Messages of the old reader that named the wrong line or said something untrue, and why the
# new one differs. Everything else must match: error class, line numbers, quoted values.
CORRECTED = {
    "junk-after-quote": ("the fault is on line 2; the old reader added one to csv's line count", [2]),
    "space-after-quote": ("the fault is on line 3 (same off-by-one)", [3]),
    "junk-after-quote-late": ("the fault is on line 3002 (same off-by-one)", [3002]),
    "unclosed-quote": ("the quote opens on line 2; the old message named line 4, past the end of the 3-line file", [2]),
    "unclosed-quote-late": ("the quote opens on line 42; the old message named line 44, past the end", [42]),
    "unclosed-quote-very-late": ("the quote opens on line 3002; the old message named 3004, past the end", [3002]),
}
# Advice of the old reader that could not work, and the quoted words the new message leaves out.
CORRECTED_ADVICE = {
    "small-group": ("two groups: dropping the 1-row 'g=b' would leave one group to compare", {"drop"}),
}
# Log lines the old reader wrote that were wrong: the imputed columns listed the sensitive one.
CORRECTED_LOG = {"missing-median-no-group"}


def _numbers(text: str) -> list[int]:
    """The line (or row) numbers a message cites."""
    return [int(n) for pair in re.findall(r"\b(?:lines?|rows?) (\d+)(?: and (\d+))?", text) for n in pair if n]


def _quoted(text: str) -> set[str]:
    return set(re.findall(r"'([^']*)'", text))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_message_of_the_old_reader_is_still_given(case):
    old, new = EXPECTED[case.id], outcome(case)
    assert new.get("stage") == old.get("stage"), (old, new)
    if "error" in old:
        message = render(new["message"], "library")
        assert new["error"] == old["error"], (old, new)
        lines = CORRECTED[case.id][1] if case.id in CORRECTED else _numbers(old["message"])
        assert _numbers(message) == lines, (old["message"], message)
        kept = _quoted(old["message"]) - CORRECTED_ADVICE.get(case.id, ("", set()))[1]
        assert all(q in message for q in kept), (old["message"], message)
    if "read" in old:
        assert new["read"] == old["read"]
    if "prepared" in old:
        for key in ("features", "groups", "rows"):
            assert new["prepared"][key] == old["prepared"][key]
        assert len(new["prepared"]["log"]) == len(old["prepared"]["log"])
        for before, after in zip(old["prepared"]["log"], new["prepared"]["log"], strict=True):
            after = render(after, "library")
            assert after.split()[:3] == before.split()[:3], (before, after)
            if case.id not in CORRECTED_LOG:
                assert _numbers(after) == _numbers(before) and _quoted(before) <= _quoted(after), (before, after)


def test_corrected_messages_are_documented():
    assert set(CORRECTED) <= set(EXPECTED) and CORRECTED_LOG <= set(EXPECTED)


# ---------------------------------------------------------------- fast path = diagnostic reader
def _snapshot(table) -> dict:
    columns = {}
    for column in table.columns:
        if table.is_numeric(column):
            columns[column] = ("numeric", np.asarray(table.numbers(column)).tobytes())
        else:
            columns[column] = ("text", table.strings(column).to_pylist())
    return {
        "columns": columns,
        "lines": table.lines.tolist(),
        "log": list(table.log),
        "header": table.has_header,
        "delimiter": table.delimiter,
        "encoding": table.encoding,
    }


def _both(raw: bytes, **options):
    fast = read_table(raw, name="t.csv", **options)
    table_module.FAST_PATH = False
    try:
        slow = read_table(raw, name="t.csv", **options)
    finally:
        table_module.FAST_PATH = True
    return fast, slow


cells = st.one_of(
    st.floats(-1e9, 1e9, allow_nan=False).map(repr),
    st.integers(-1000, 1000).map(str),
    st.sampled_from(["", "NA", "?", " n/a ", "nan", "inf", "1,5", "x", 'say "hi"', "a,b", "two\nlines", "  7 ", "-0", "1e400"]),
    st.text(alphabet="abcé, \"\n;|\t", max_size=6),
)


@st.composite
def messy_csvs(draw):
    width = draw(st.integers(1, 4))
    rows = draw(st.lists(st.lists(cells, min_size=width, max_size=width), min_size=1, max_size=12))
    delimiter = draw(st.sampled_from([",", ";", "\t", "|"]))
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator=draw(st.sampled_from(["\n", "\r\n"])),
                        quoting=draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL])))
    writer.writerow([f"h{i}" for i in range(width)])
    for row in rows:
        if draw(st.booleans()) and draw(st.booleans()):
            buffer.write("\n")  # a blank line
        writer.writerow(row)
    text = buffer.getvalue()
    if draw(st.booleans()):
        text += "\n" * draw(st.integers(1, 2))
    return text.encode(draw(st.sampled_from(["utf-8", "utf-8-sig", "cp1252"])), errors="replace")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messy_csvs())
def test_fast_path_reads_exactly_what_the_diagnostic_reader_reads(raw):
    try:
        fast = read_table(raw, name="t.csv")
    except FairAuditError as exc:
        table_module.FAST_PATH = False
        try:
            with pytest.raises(type(exc)) as caught:
                read_table(raw, name="t.csv")
        finally:
            table_module.FAST_PATH = True
        assert str(caught.value) == str(exc)
        return
    table_module.FAST_PATH = False
    try:
        slow = read_table(raw, name="t.csv")
    finally:
        table_module.FAST_PATH = True
    assert _snapshot(fast) == _snapshot(slow)


def _big(rows: int, tail: str = "") -> bytes:
    rng = np.random.default_rng(0)
    body = "".join(f"{'ab'[i % 2]},{rng.normal():.6f},{i % 7},w{i % 3}\n" for i in range(rows))
    return ("g,x,k,t\n" + body + tail).encode()


@pytest.mark.parametrize(
    "tail",
    [
        "a,oops,1,w\n",  # text in a column the sample typed as numbers: that column is re-read as text
        "a,1e400,1,w\n",  # an infinite value: the cell's text is kept for the message
        "a,-nan,1,w\n",  # NaN spelt as a number: text, as before
        'a,1.5,2,"two\nlines"\n',  # a quoted line break after the sample: lines numbered by the line pass
        "\n\na,1.5,2,w\n\n",  # blank lines after the sample
        "a, NA ,2,w\n",  # a padded missing marker
        ",,,\n",  # a row of empty cells is a blank line
    ],
)
def test_fast_path_beyond_the_sample(tail):
    fast, slow = _both(_big(3000, tail))
    assert _snapshot(fast) == _snapshot(slow)


def test_the_numbers_are_read_exactly():
    values = np.random.default_rng(1).normal(size=(500, 3)) * 10.0 ** np.arange(-150, 151, 150)
    text = "a,b,c\n" + "".join(",".join(repr(float(v)) for v in row) + "\n" for row in values)
    table = read_table(text.encode())
    np.testing.assert_array_equal(np.column_stack([table.numbers(c) for c in "abc"]), values)


def test_a_type_broken_late_names_the_cell_at_its_line():
    with pytest.raises(NonNumericColumnError, match=r"'x' has text 'oops' at line 3002"):
        prepare(read_table(_big(3000, "a,oops,1,w\n")), sensitive="g", features=["x"])


def test_quoted_line_breaks_and_blank_lines_keep_line_numbers_in_messages():
    table = read_table(_big(3000, '\n\na,1.5,2,"two\nlines"\nb,?,1,w\n'))
    assert table.lines[-2:].tolist() == [3004, 3006]
    with pytest.raises(FairAuditError, match=r"'x' \(1 row, first at line 3006\)"):
        prepare(table, sensitive="g")


# ---------------------------------------------------------------- the raw table is cheap
def test_raw_table_holds_arrays_not_python_objects():
    table = read_table(_big(2000))
    assert table.n_rows == 2000 and table.columns == ["g", "x", "k", "t"]
    assert isinstance(table.numbers("x"), np.ndarray) and table.numbers("x").dtype == np.float64
    assert not table.numbers("x").flags.writeable
    assert isinstance(table.strings("g"), pa.ChunkedArray)
    head = table.head(5)
    assert head.shape == (5, 4) and str(head["k"].dtype) == "Int64"
    summary = table.describe().set_index("column")
    assert summary.loc["x", "kind"] == "numeric" and summary.loc["g", "kind"] == "text" and summary.loc["k", "distinct"] == 7
    assert table.frame.shape == (2000, 4)


def test_adjacent_features_are_a_view_of_the_table_not_a_copy():
    table = read_table(_big(2000))
    data = prepare(table, sensitive="g", features=["x", "k"])
    assert np.shares_memory(data.X_raw, table.numbers("x"))
    assert not data.X_raw.flags.writeable
    dropped = prepare(table, sensitive="g", features=["k", "x"])  # not in file order: a copy
    assert not np.shares_memory(dropped.X_raw, table.numbers("x"))
    np.testing.assert_array_equal(dropped.X_raw, np.column_stack([table.numbers("k"), table.numbers("x")]))


def test_the_source_is_never_modified(tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(_big(3000, 'a,1.5,2,"q"\n'))
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    mode = path.stat().st_mode
    table = read_table(path)
    prepare(table, sensitive="g")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before == table.sha256
    assert path.stat().st_mode == mode


# ---------------------------------------------------------------- hostile inputs
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(InputFileNotFound, match=r"a pipe \(FIFO\), not a regular file"):
        read_table(fifo)  # opening it would block forever


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_devices_are_refused():
    assert stat.S_ISCHR(os.stat("/dev/zero").st_mode)
    with pytest.raises(InputFileNotFound, match="is a device"):
        read_table("/dev/zero")
    with open("/dev/zero", "rb") as stream, pytest.raises(InputFileNotFound, match="is a device"):
        read_table(stream)


def test_folders_and_missing_files(tmp_path):
    with pytest.raises(InputFileNotFound, match="folder"):
        read_table(tmp_path)
    with pytest.raises(InputFileNotFound, match="no such file"):
        read_table(tmp_path / "absent.csv")


class _EndlessStream(io.RawIOBase):
    """A stream with no known size that never ends; counts what was read from it."""

    def __init__(self):
        self.served = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        buffer[:] = b"1,2\n" * (len(buffer) // 4) + b"1" * (len(buffer) % 4)
        self.served += len(buffer)
        return len(buffer)


def test_size_limit_holds_for_streams_of_unknown_size():
    stream = _EndlessStream()
    with pytest.raises(FileTooLargeError, match="more than 0.1 MB"):
        read_table(io.BufferedReader(stream), max_mb=0.1)
    assert stream.served <= 0.1 * 2**20 + 1 + io.DEFAULT_BUFFER_SIZE


@pytest.mark.parametrize("max_mb", [float("nan"), float("inf"), 0, -1, "lots", None])
def test_max_mb_must_be_a_finite_positive_number(max_mb):
    with pytest.raises(ParameterError, match="size limit"):
        read_table(b"a,b\n1,2\n", max_mb=max_mb)


@pytest.mark.parametrize("options", [{"skip_rows": 1.5}, {"skip_rows": True}, {"delimiter": ";;"}, {"delimiter": '"'}])
def test_absurd_reading_options(options):
    with pytest.raises(ParameterError):
        read_table(b"a,b\n1,2\n", **options)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_cli_refuses_a_fifo_and_a_nan_limit_with_exit_2(tmp_path, capsys):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    assert main(["audit", str(fifo), "--sensitive", "g"]) == 2
    assert "a pipe (FIFO)" in capsys.readouterr().err
    path = tmp_path / "d.csv"
    path.write_bytes(_big(100))
    assert main(["audit", str(path), "--sensitive", "g", "--max-mb", "nan"]) == 2
    assert "--max-mb" in capsys.readouterr().err


# ---------------------------------------------------------------- Parquet
def _parquet(frame: pd.DataFrame, **options) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink, **options)
    return sink.getvalue()


def test_parquet_is_read_with_types_and_rows_named():
    frame = pd.DataFrame({
        "g": pd.Categorical(["a", "b"] * 50),
        "x": np.arange(100.0),
        "n": np.arange(100, dtype=np.int32),
        "flag": [True, False] * 50,
        "when": pd.date_range("2020-01-01", periods=100),
        "note": [None if i == 5 else f"n{i}" for i in range(100)],
    })
    frame.loc[7, "x"] = np.nan
    table = read_table(_parquet(frame, row_group_size=30), name="d.parquet")
    assert table.format == "parquet" and table.encoding is None and table.n_rows == 100
    assert table.is_numeric("x") and table.is_numeric("n") and not table.is_numeric("flag")
    assert table.strings("g").to_pylist()[:2] == ["a", "b"] and table.strings("when")[0].as_py().startswith("2020-01-01")
    with pytest.raises(FairAuditError, match=r"'x' \(1 row, first at row 8\)"):
        prepare(table, sensitive="g", features=["x"])
    data = prepare(table, sensitive="g", features=["x", "n"], missing="drop")
    assert data.n_rows == 99 and data.fingerprint()["format"] == "parquet"


def test_parquet_errors():
    frame = pd.DataFrame({"g": ["a", "b"] * 3, "x": [1.0, np.inf, 2, 3, 4, 5], "l": [[1], [2], [3], [4], [5], [6]]})
    with pytest.raises(InputFileError, match="nested"):
        read_table(_parquet(frame), name="d.parquet")
    table = read_table(_parquet(frame.drop(columns="l")), name="d.parquet")
    with pytest.raises(NonNumericColumnError, match=r"'x' has text 'inf' at row 2"):
        prepare(table, sensitive="g", features=["x"])
    broken = _parquet(frame.drop(columns="l"))
    with pytest.raises(InputFileError, match="cannot be read as Parquet"):
        read_table(broken[:4] + b"\x00" * 40 + broken[-8:], name="d.parquet")
    with pytest.raises(EncodingError, match="end is missing"):
        read_table(broken[:-10], name="d.parquet")
    with pytest.raises(EmptyFileError):
        read_table(_parquet(frame.drop(columns="l").iloc[:0]), name="d.parquet")


def test_empty_and_malformed_files_through_the_cli(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_text("a,b,c\n1,2,3\n1,2\n")
    assert main(["audit", str(path), "--sensitive", "a"]) == 2
    err = capsys.readouterr().err
    assert "line 3 has 2 fields" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(MalformedCSVError):
        read_table(path)


def test_feature_rows_for_a_fitted_model_read_like_prepare():
    from fairaudit.data import feature_rows, scale_features, scaling_parameters

    table = read_table(b"g,city,x\na,Oslo,1\nb,Rome,2\na,Paris,\nb,Lima,4\n")
    rows = feature_rows(table, ["x", "city=Oslo", "city=Rome"], missing="drop")
    np.testing.assert_array_equal(rows.X, [[1, 1, 0], [2, 0, 1], [4, 0, 0]])
    assert rows.lines.tolist() == [2, 3, 5] and rows.encoded == ("city=Oslo", "city=Rome") and rows.unused == ("g",)
    assert "no indicator for ('Lima')" in rows.log[1]
    with pytest.raises(FairAuditError, match="missing cells") as caught:
        feature_rows(table, ["x"])
    assert "--missing drop" in caught.value.render("cli")
    X = np.random.default_rng(1).normal(size=(40, 3))
    for scaling in ("none", "center", "standardize", "unit_norm"):
        center, scale = scaling_parameters(X, scaling)
        np.testing.assert_array_equal((X - center) / scale, scale_features(X, scaling))


def test_long_text_cells_are_read_on_every_path():
    import csv as csv_module

    for raw in (b'a,b\n1,"' + b"x" * 200_000 + b'"\n2,y\n', b"a,b\n1," + b"x" * 200_000 + b"\n2,y\n"):
        fast, slow = _both(raw)
        assert _snapshot(fast) == _snapshot(slow) and len(fast.strings("b")[0].as_py()) == 200_000
    assert csv_module.field_size_limit() == 131072  # the csv module's setting is restored


def test_a_table_handed_over_gives_its_memory_to_the_matrix():
    text = "x0,g,x1,x2,c\n" + "".join(f"{i * 0.5},{i % 2},{i % 7},{(i * i) % 11},5\n" for i in range(40))
    shared = read_table(text.encode())
    copied = prepare(shared, sensitive="g")  # x0 | g | x1 x2: not adjacent, so a copy
    assert not np.shares_memory(copied.X_raw, shared.numbers("x0"))
    expected = copied.X_raw.copy()
    table = read_table(text.encode())
    handed = prepare(table, sensitive="g", reuse_table=True)
    assert handed.feature_names == ("x0", "x1", "x2") and any(e["reason"] == "constant" for e in handed.accounting["excluded"])
    np.testing.assert_array_equal(handed.X_raw, expected)
    assert handed.X_raw.base is not None and not handed.X_raw.flags.writeable
    with pytest.raises(FairAuditError, match="reuse_table=True"):
        table.numbers("x0")
    assert table.name and table.n_rows == 40  # provenance stays readable
