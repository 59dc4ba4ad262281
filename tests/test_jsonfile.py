"""JSON read at the edge (fairaudit.jsonfile) and the declared schemas (fairaudit.schema): the
nesting guard against a plain model of it, the streamed reader against ``json.loads``, the limits,
and messages that name the file and the field."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairaudit import jsonfile
from fairaudit.errors import ReportFileError
from fairaudit.jsonfile import MAX_DEPTH, NestingGuard, read_json_bytes, read_object
from fairaudit.schema import Fields, Items, Keyed, Nullable, Number, Text, Whole, shown, validate


def _model_depth(data: bytes) -> int:
    """The deepest bracket nesting outside strings, byte by byte: a quote after an odd run of
    backslashes does not open or close a string (what the guard must compute, in pieces)."""
    depth = deepest = 0
    inside = escaped = False
    for byte in data:
        if byte == 0x5C:
            escaped = not escaped
            continue
        was, escaped = escaped, False
        if byte == 0x22 and not was:
            inside = not inside
        elif not inside and byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif not inside and byte in b"]}":
            depth -= 1
    return deepest


def _accepts(data: bytes, step: int, limit: int) -> bool:
    """Whether the guard lets ``data`` through under ``limit``, fed ``step`` bytes at a time."""
    guard = NestingGuard("x", ReportFileError, max_depth=limit)
    try:
        for start in range(0, len(data), step):
            guard.feed(data[start:start + step])
    except ReportFileError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60).map(lambda b: bytes(b'[]{}"\\a,'[x % 8] for x in b)), st.integers(1, 9))
def test_the_nesting_guard_follows_strings_and_escapes_across_pieces(data, step):
    depth = _model_depth(data)
    assert _accepts(data, step, depth) and (depth == 0 or not _accepts(data, step, depth - 1))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(['"]}\\', "\\\\\"", "é—⟦x⟧"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.text(max_size=6), JSON, max_size=5), st.lists(JSON, max_size=6), st.integers(1, 64), st.booleans())
def test_the_streamed_reader_reads_what_json_loads_reads(fields, records, chunk, indent):
    """Read in pieces of a few bytes (every value split somewhere), with one list handed over
    element by element: the same values as ``json.loads`` of the whole."""
    document = {**fields, "records": records}
    raw = json.dumps(document, indent=1 if indent else None, ensure_ascii=False).encode()
    seen = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonfile, "CHUNK", chunk)
        found = read_object(io.BytesIO(raw), "r.json", ReportFileError, max_bytes=len(raw),
                            each={"records": lambda v, i: seen.append((i, v))})
    assert seen == list(enumerate(records))
    assert {**found, "records": records} == json.loads(raw)


@pytest.mark.parametrize("text,message", [
    ("[1]", "does not hold a JSON object"),
    ("", "is not valid JSON (line 1: expected '{')"),
    ("{\n\"a\": 1,\n}", "is not valid JSON (line 3: expected a field name"),
    ('{"a": 1} x', "extra data after the object"),
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('{"a": -Infinity}', "-Infinity is not a JSON number"),
    ('{"a": 1, "a": 2}', "gives the field 'a' twice"),
    ('{"a": "open', "Unterminated string"),
    ('{"a": ' + "7" * 5000 + "}", "Exceeds the limit (4300 digits)"),
])
def test_what_is_not_a_json_object_is_named(text, message):
    with pytest.raises(ReportFileError, match="^r.json") as caught:
        read_json_bytes(text.encode(), "r.json", ReportFileError, max_bytes=1 << 20)
    assert message in str(caught.value)


def test_nesting_deeper_than_the_limit_is_refused_before_parsing_and_the_limit_is_reached():
    assert read_json_bytes(('{"a": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}").encode(), "r", ReportFileError, max_bytes=1 << 20)
    with pytest.raises(ReportFileError, match=f"more than {MAX_DEPTH} deep"):
        read_json_bytes(('{"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}").encode(), "r", ReportFileError, max_bytes=1 << 20)
    deep = ('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}").encode()
    with pytest.raises(ReportFileError, match="deep"):  # json itself would raise RecursionError
        read_json_bytes(deep, "r", ReportFileError, max_bytes=1 << 20)


def test_size_limit_byte_order_mark_and_text_that_is_not_utf8():
    with pytest.raises(ReportFileError, match="larger than"):
        read_json_bytes(b'{"a": "' + b"x" * 2000 + b'"}', "r", ReportFileError, max_bytes=1000)
    assert read_json_bytes(b'\xef\xbb\xbf{"a": 1}', "r", ReportFileError, max_bytes=1000) == {"a": 1}
    with pytest.raises(ReportFileError, match="is not UTF-8 text"):
        read_json_bytes(b'{"a": "\xff"}', "r", ReportFileError, max_bytes=1000)


SCHEMA = Fields(
    required={"rank": Whole(1, 10), "items": Items(Fields(required={"name": Text(5, r"[a-z]+", "a name")}), max=3)},
    optional={"scale": Number(positive=True), "groups": Keyed(Whole()), "note": Nullable(Text())},
)


@pytest.mark.parametrize("value,message", [
    ({"items": []}, "r.json lacks the field 'rank'"),
    ({"rank": "abc", "items": []}, "field 'rank' must be a whole number from 1 to 10; it is 'abc'"),
    ({"rank": True, "items": []}, "field 'rank' must be a whole number from 1 to 10; it is true"),
    ({"rank": 2.5, "items": []}, "it is 2.5"),
    ({"rank": 1, "items": [{"name": "ok"}, {"name": "NO"}]}, "field 'items[1].name' must be a name; it is 'NO'"),
    ({"rank": 1, "items": [{}] * 4}, "field 'items' must be a list of 0 to 3 values; it is a list of 4 value(s)"),
    ({"rank": 1, "items": [], "scale": 0}, "field 'scale' must be a finite number above 0; it is 0"),
    ({"rank": 1, "items": [], "groups": {"a": -1}}, "field 'groups.a' must be a whole number"),
    ({"rank": 1, "items": [], "note": "\ud800"}, "field 'note' must be text (it holds an invalid character: a lone surrogate)"),
    ({"rank": 1, "items": [], "other": ["\ud800"]}, "field 'other[0]' must be text"),
    ([], "field 'the top level' must be an object; it is a list of 0 value(s)"),
])
def test_a_schema_names_the_file_the_field_and_what_it_found(value, message):
    with pytest.raises(ReportFileError) as caught:
        validate(value, SCHEMA, "r.json", ReportFileError)
    assert message in str(caught.value), str(caught.value)


def test_values_are_shown_short_and_printable():
    assert shown("\x1b[2J⟦max_mb⟧") == "'\\x1b[2J\\u27e6max_mb\\u27e7'"
    assert len(shown("x" * 500)) == 60 and shown(10**400).endswith("…")
    assert validate({"rank": 3.0, "items": [], "scale": 2}, SCHEMA, "r", ReportFileError) == {"rank": 3, "items": [], "scale": 2.0}


def test_one_value_never_holds_more_than_the_limit_however_large_the_file(monkeypatch):
    """A string without its closing quote would otherwise be read to the end of a 2 GB file."""
    monkeypatch.setattr(jsonfile, "CHUNK", 100)
    monkeypatch.setattr(jsonfile, "MAX_VALUE", 1000)
    with pytest.raises(ReportFileError, match="holds a value of more than"):
        read_object(io.BytesIO(b'{"a": "' + b"x" * 50_000), "r.json", ReportFileError, max_bytes=1 << 20)
    many = b'{"r": [' + b",".join([b'"' + b"y" * 500 + b'"'] * 100) + b"]}"  # many values, each small: read
    assert read_object(io.BytesIO(many), "r.json", ReportFileError, max_bytes=1 << 20, each={"r": lambda v, i: None}) == {"r": True}
