"""The data boundary: every way a file can be read or fail, and property tests over CSVs."""

from __future__ import annotations

import csv
import hashlib
import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairaudit import AuditData, prepare, read_table, scale_features
from fairaudit.errors import (
    DuplicateColumnError,
    EmptyFileError,
    EncodingError,
    FileTooLargeError,
    InputFileNotFound,
    MalformedCSVError,
    MissingValueError,
    NegativeValueError,
    NoFeaturesError,
    NonNumericColumnError,
    ParameterError,
    SensitiveColumnError,
    SingleGroupError,
    SmallGroupError,
    UnknownColumnError,
)

BASIC = "sex,age,income,score\nF,30,100.5,1\nM,41,80,2\nF,25,120,3\nM,38,95,4\n"


def table(text: str, encoding: str = "utf-8", **kw):
    return read_table(text.encode(encoding), name="t.csv", **kw)


# ---------------------------------------------------------------- reading


@pytest.mark.parametrize(
    "encoding,prefix,expected",
    [("utf-8", b"", "utf-8"), ("utf-8", b"\xef\xbb\xbf", "utf-8-sig"), ("cp1252", b"", "windows-1252"), ("latin-1", b"", None)],
)
def test_encodings(encoding, prefix, expected):
    text = "name,value\nJosé €,1\nZoë,2\n" if encoding != "latin-1" else "name,value\nJosé,1\nZoë\xa0x,2\n"
    raw = prefix + text.encode(encoding)
    result = read_table(raw)
    assert result.frame["name"].iloc[0].startswith("José")
    assert result.encoding in ({expected} if expected else {"windows-1252", "latin-1"})
    assert result.columns == ["name", "value"]


def test_utf16_and_binary_files_are_refused_with_a_reason():
    with pytest.raises(EncodingError, match="UTF-16"):
        read_table("a,b\n1,2\n".encode("utf-16"))
    with pytest.raises(EncodingError, match="ZIP"):
        read_table(b"PK\x03\x04binarystuff")
    with pytest.raises(EncodingError, match="not UTF-8"):
        read_table(b"a,b\n\x81\x8d\x8f,1\n")


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_delimiters_are_detected(delimiter):
    text = BASIC.replace(",", delimiter)
    result = table(text)
    assert result.delimiter == delimiter
    assert result.columns == ["sex", "age", "income", "score"]


def test_quoted_fields_with_delimiters_and_newlines():
    text = 'id,comment,value\n1,"hello, world",3\n2,"two\nlines",4\n3,"say ""hi""",5\n'
    result = table(text)
    assert result.frame["comment"].tolist() == ["hello, world", "two\nlines", 'say "hi"']
    assert result.lines.tolist() == [2, 3, 5]


def test_decimal_commas_in_a_semicolon_file():
    data = prepare(table("g;x;y\na;1,5;2\nb;2,5;3\na;3,0;1\nb;0,5;2\n"), sensitive="g", scaling="none")
    np.testing.assert_allclose(data.X_raw[:, 0], [1.5, 2.5, 3.0, 0.5])


def test_header_detection_and_skip_rows():
    headerless = table("1,2,3\n4,5,6\n")
    assert not headerless.has_header and headerless.columns == ["col_1", "col_2", "col_3"]
    skipped = table("title line\nA,B\n1,2\n", skip_rows=1)
    assert skipped.columns == ["A", "B"] and skipped.lines.tolist() == [3]


def test_ragged_rows_name_the_line():
    with pytest.raises(MalformedCSVError, match="line 3 has 4 fields but the header has 3"):
        table("a,b,c\n1,2,3\n1,2,3,4\n")
    with pytest.raises(MalformedCSVError, match="line 2 has 2 fields"):
        table("a,b,c\n1,2\n")
    assert table("a,b,c\n1,2,3,\n").frame.shape == (1, 3)  # a trailing delimiter is tolerated


def test_unclosed_quote():
    with pytest.raises(MalformedCSVError):
        table('a,b\n1,"oops\n2,3\n', delimiter=",")


def test_empty_and_header_only_files():
    with pytest.raises(EmptyFileError, match="empty"):
        read_table(b"")
    with pytest.raises(EmptyFileError, match="empty"):
        read_table(b"  \n\n")
    with pytest.raises(EmptyFileError, match="header but no data rows"):
        table("a,b,c\n")


def test_duplicate_column_names():
    with pytest.raises(DuplicateColumnError, match="columns 1 and 3 are both named 'a'"):
        table("a,b,a\n1,2,3\n")


def test_missing_path_and_size_limit(tmp_path):
    with pytest.raises(InputFileNotFound):
        read_table(tmp_path / "nope.csv")
    big = tmp_path / "big.csv"
    big.write_text("a,b\n" + "1,2\n" * 1000)
    with pytest.raises(FileTooLargeError, match="limit"):
        read_table(big, max_mb=0.001)


def test_the_source_file_is_never_modified(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("g,x,y\na,1,?\nb,2,3\na,3,4\nb,,5\na,4,5\nb,3,3\n")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    data = prepare(read_table(path), sensitive="g", missing="drop")
    assert data.n_rows == 4
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before == data.fingerprint()["sha256"]


# ---------------------------------------------------------------- preparing


def test_default_features_are_numeric_non_sensitive_non_id():
    text = "ID,sex,age,city,income\n1,F,30,Oslo,10\n2,M,41,Rome,20\n3,F,25,Oslo,30\n4,M,38,Rome,25\n"
    data = prepare(table(text), sensitive="sex")
    assert data.feature_names == ("age", "income")
    assert any("row identifier" in line for line in data.log)
    assert any("text column 'city'" in line for line in data.log)
    assert data.group_sizes() == {"sex=F": 2, "sex=M": 2}


def test_one_hot_on_request():
    text = "sex,city,income\nF,Oslo,10\nM,Rome,20\nF,Oslo,30\nM,Paris,25\n"
    data = prepare(table(text), sensitive="sex", one_hot=True, scaling="none")
    assert data.feature_names == ("city=Oslo", "city=Paris", "city=Rome", "income")
    np.testing.assert_allclose(data.X_raw[:, 0], [1, 0, 1, 0])


def test_text_cell_in_a_feature_is_named():
    text = "sex,age\nF,30\nM,abc\nF,25\nM,38\n" + "F,30\n" * 30
    with pytest.raises(NonNumericColumnError, match="'age' has text 'abc' at line 3"):
        prepare(table(text), sensitive="sex")
    with pytest.raises(NonNumericColumnError, match="'age'"):
        prepare(table(text), sensitive="sex", features=["age"])


def test_unknown_columns_get_suggestions():
    with pytest.raises(UnknownColumnError, match="Did you mean 'sex'"):
        prepare(table(BASIC), sensitive="sx")
    with pytest.raises(UnknownColumnError, match="feature column 'wage'"):
        prepare(table(BASIC), sensitive="sex", features=["wage"])


def test_roles_cannot_overlap():
    with pytest.raises(ParameterError, match="both a feature and sensitive"):
        prepare(table(BASIC), sensitive="sex", features=["sex", "age"])


def test_missing_values_policies():
    text = "g,x,y\na,1,?\nb,2,3\na,3,4\nb,,5\na,5,6\nb,6,7\n"
    with pytest.raises(MissingValueError, match=r"'x' \(1 row, first at line 5\), 'y' \(1 row, first at line 2\)"):
        prepare(table(text), sensitive="g")
    dropped = prepare(table(text), sensitive="g", missing="drop", scaling="none")
    assert dropped.n_rows == 4 and dropped.lines.tolist() == [3, 4, 6, 7]
    assert any("dropped 2 row(s)" in line for line in dropped.log)
    imputed = prepare(table(text), sensitive="g", missing="mean", scaling="none")
    assert imputed.n_rows == 6
    assert imputed.X_raw[3, 0] == pytest.approx(np.mean([1, 2, 3, 5, 6]))


def test_groups_single_small_and_dropped():
    with pytest.raises(SingleGroupError, match="single group"):
        prepare(table("g,x\na,1\na,2\na,3\n"), sensitive="g")
    one_row = "g,x,y\na,1,2\na,2,3\nb,3,1\na,4,4\n"
    with pytest.raises(SmallGroupError, match="'g=b' \\(1 row\\)"):
        prepare(table(one_row), sensitive="g")
    kept = prepare(table(one_row + "c,5,5\nc,6,1\n"), sensitive="g", small_groups="drop")
    assert kept.group_sizes() == {"g=a": 3, "g=c": 2}


def test_small_group_advice_only_offers_what_leaves_two_groups():
    def advice(text: str) -> str:
        with pytest.raises(SmallGroupError) as caught:
            prepare(table(text), sensitive="g")
        return caught.value.render("cli")

    two = advice("g,x,y\na,1,2\na,2,3\nb,3,1\na,4,4\n")  # dropping or merging 'b' leaves one group
    assert "--drop-small-groups" not in two and "--merge" not in two
    assert "--min-group-size" in two and "--sensitive" in two
    three = advice("g,x,y\na,1,2\na,2,3\nb,3,1\na,4,4\nc,5,5\nc,6,1\n")
    assert "--merge" in three and "--drop-small-groups" in three and "--sensitive" not in three
    two_small = advice("g,x,y\na,1,2\na,2,3\nb,3,1\na,4,4\nc,5,5\n")  # dropping both leaves one group
    assert "--merge" in two_small and "--drop-small-groups" not in two_small and "--sensitive" in two_small


def test_intersections_binarising_and_quantile_bins():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"sex": rng.choice(["F", "M"], 200), "age": rng.integers(18, 80, 200), "x": rng.normal(size=200), "z": rng.normal(size=200)}
    )
    raw = table(frame.to_csv(index=False))
    with pytest.raises(SensitiveColumnError, match="binarise it"):
        prepare(raw, sensitive="age")
    binary = prepare(raw, sensitive=["sex", "age"], binarize={"age": 40})
    assert set(binary.group_sizes()) == {"sex=F & age<40", "sex=F & age>=40", "sex=M & age<40", "sex=M & age>=40"}
    binned = prepare(raw, sensitive="age", bins={"age": 3})
    assert len(binned.group_sizes()) == 3
    assert binned.feature_names == ("x", "z")


def test_constant_features_are_left_out_and_scaling_choices():
    data = prepare(table("g,x,c,y\na,1,5,2\nb,2,5,4\na,3,5,9\nb,4,5,1\n"), sensitive="g")
    assert data.feature_names == ("x", "y")
    np.testing.assert_allclose(data.X.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(data.X.std(0), 1)
    np.testing.assert_allclose(data.matrix("center").mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(data.matrix("unit_norm"), axis=0), 1)
    np.testing.assert_allclose(data.matrix("none"), data.X_raw)
    with pytest.raises(ParameterError):
        scale_features(data.X_raw, "zscore")
    with pytest.raises(NoFeaturesError):
        prepare(table("g,c\na,1\nb,1\na,1\nb,1\n"), sensitive="g")


def test_nonnegative_policies():
    data = prepare(table("g,x,y\na,-1,2\nb,2,3\na,3,4\nb,4,5\n"), sensitive="g", scaling="none")
    with pytest.raises(NegativeValueError, match="'x' = -1 at line 2"):
        data.nonnegative()
    np.testing.assert_allclose(data.nonnegative("shift")[:, 0], [0, 3, 4, 5])
    np.testing.assert_allclose(data.nonnegative("clip")[:, 0], [0, 2, 3, 4])


def test_from_arrays_validates():
    with pytest.raises(MissingValueError):
        AuditData.from_arrays(np.array([[1.0, np.nan], [2, 3]]), ["a", "b"])
    data = AuditData.from_arrays(np.arange(12.0).reshape(6, 2), ["a", "b"] * 3, min_group_size=1)
    assert data.group_sizes() == {"a": 3, "b": 3}
    assert len(data.cache_key()) == 16


# ---------------------------------------------------------------- properties over generated CSVs

# Header names start with a letter (an all-numeric first row is, by design, read as data) and
# use characters that Windows-1252 can encode.
names = st.builds(
    lambda first, rest: first + rest,
    st.sampled_from(list("abcxyzABCéÉß")),
    st.text(alphabet="abcdefXYZ019_ -éüØ€", max_size=7),
)


@st.composite
def csv_files(draw):
    n_rows = draw(st.integers(4, 25))
    n_features = draw(st.integers(1, 4))
    columns = draw(st.lists(names, min_size=n_features + 1, max_size=n_features + 1, unique_by=lambda s: s.strip().lower()))
    columns = [c.strip() or "c" for c in columns]
    if len(set(columns)) != len(columns) or any(c.lower() in {"id", "index", "row"} or c.lower().endswith("id") for c in columns):
        columns = [f"c{i}" for i in range(n_features + 1)]
    values = draw(
        st.lists(
            st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=n_features, max_size=n_features),
            min_size=n_rows,
            max_size=n_rows,
        )
    )
    groups = ["a", "b"] * (n_rows // 2) + ["a"] * (n_rows % 2)
    delimiter = draw(st.sampled_from([",", ";", "\t", "|"]))
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "cp1252"]))
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]))
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, quoting=quoting, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(columns)
    for group, row in zip(groups, values, strict=True):
        writer.writerow([group, *[repr(float(v)) for v in row]])
    raw = buffer.getvalue().encode(encoding)
    if encoding == "cp1252":  # Windows-1252 bytes that are also valid UTF-8 ("É€" is "ɀ") are read as UTF-8
        try:
            columns = [c.encode(encoding).decode("utf-8") for c in columns] if raw.decode("utf-8") else columns
        except UnicodeDecodeError:
            pass
    return raw, columns, np.array(values, dtype=float), groups, delimiter


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(csv_files())
def test_generated_csvs_round_trip(case):
    raw, columns, values, groups, delimiter = case
    result = read_table(raw, name="gen.csv")
    assert result.delimiter == delimiter
    assert result.columns == columns
    varying = values.max(axis=0) > values.min(axis=0)
    if not varying.any():
        with pytest.raises(NoFeaturesError):
            prepare(result, sensitive=columns[0], scaling="none")
        return
    data = prepare(result, sensitive=columns[0], scaling="none")
    np.testing.assert_allclose(data.X_raw, values[:, varying], rtol=1e-7)
    assert list(data.feature_names) == [c for c, v in zip(columns[1:], varying, strict=True) if v]
    assert data.group_sizes() == {f"{columns[0]}=a": groups.count("a"), f"{columns[0]}=b": groups.count("b")}


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_the_reader(raw):
    """Any input either reads or raises a FairAuditError — never another exception."""
    from fairaudit import FairAuditError

    try:
        result = read_table(raw)
    except FairAuditError:
        return
    try:
        prepare(result, sensitive=result.columns[0])
    except FairAuditError:
        pass
