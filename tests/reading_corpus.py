"""Inputs for the reader's message corpus (tests/test_reading.py).

Each case is a file (bytes) and what is done with it: ``read_table`` options, then optionally
``prepare``, ``prepare_tensor`` or ``AuditData.nonnegative``. The messages the pre-Arrow reader
(``fairaudit/data.py`` at commit 9821a12) gave for every case are stored in
``reading_corpus_expected.json``; ``tests/tools/make_reading_corpus.py`` regenerated them from
that commit. The test checks that the new reader still gives each message — same error class,
same line numbers, same quoted values — or the corrected one where the old message was wrong
(listed in ``CORRECTED`` in the test, with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field

BASIC = "sex,age,income,score\nF,30,100.5,1\nM,41,80,2\nF,25,120,3\nM,38,95,4\n"
GROUPS = "g,x,y\na,1,2\nb,2,3\na,3,1\nb,4,5\n"
LONG = "user,item,v,sex\n" + "".join(
    f"u{u},i{i},{u * 10 + i},{'F' if u % 2 else 'M'}\n" for u in (1, 2, 3, 4) for i in (1, 2)
)


@dataclass(frozen=True)
class Case:
    id: str
    data: bytes
    read: dict = field(default_factory=dict)
    prepare: dict | None = None
    tensor: dict | None = None
    nonnegative: str | None = None


def _lines(*rows: str) -> bytes:
    return ("\n".join(rows) + "\n").encode()


def _many(rows: int, extra: str = "") -> str:
    return "g,x,y\n" + "".join(f"{'ab'[i % 2]},{i},{i * 2 % 7}\n" for i in range(rows)) + extra


CASES: list[Case] = [
    # --- bytes, encodings, binary files
    Case("empty", b""),
    Case("only-white-space", b"  \n\n \t\n"),
    Case("zip", b"PK\x03\x04binarystuff"),
    Case("gzip", b"\x1f\x8b\x08\x00rest"),
    Case("old-office", b"\xd0\xcf\x11\xe0\xa1\xb1"),
    Case("pdf", b"%PDF-1.4\n..."),
    Case("npy", b"\x93NUMPY\x01\x00"),
    Case("utf16-bom", "a,b\n1,2\n".encode("utf-16")),
    Case("nul-early", b"a,b\n1\x00,2\n"),
    Case("nul-late-invalid-utf8", b"a,b\n" + b"1,2\n" * 2000 + b"\xff\x00,1\n"),
    Case("undecodable", b"a,b\n1,2\nx\x81\x8d\x8f,1\n"),
    Case("undecodable-later-line", b"a,b\n" + b"1,2\n" * 30 + "é".encode() + b",3\n\x90,4\n"),
    Case("windows-1252", "name,v\nJosé €,1\nZoë,2\n".encode("cp1252")),
    Case("utf8-bom", b"\xef\xbb\xbf" + "name,v\nJosé,1\nZoë,2\n".encode()),
    # --- structure
    Case("nothing-after-skip", b"title\n\n  \n", read={"skip_rows": 1}),
    Case("skip-beyond-end", b"a,b\n1,2\n", read={"skip_rows": 5}),
    Case("header-only", b"a,b,c\n"),
    Case("header-only-blank-lines", b"a,b,c\n\n\n"),
    Case("unclosed-quote", b'a,b\n1,"oops\n2,3\n'),
    Case("unclosed-quote-late", _many(40, '1,"never closed\n2,3\n').encode()),
    Case("junk-after-quote", b'a,b\n1,"x"y\n2,z\n'),
    Case("space-after-quote", b'a,b\n1,2\n3,"x" \n4,z\n'),
    Case("ragged-long", b"a,b,c\n1,2,3\n1,2,3,4\n"),
    Case("ragged-short", b"a,b,c\n1,2\n"),
    Case("ragged-tab", b"a\tb\tc\n1\t2\t3\n4\t5\n"),
    Case("ragged-after-blank-and-quoted-lines", b'a,b,c\n1,"two\nlines",3\n\n4,5,6\n7,8\n'),
    Case("ragged-after-skip", b"title\nmore title\na,b\n1,2\n3\n", read={"skip_rows": 2}),
    Case("ragged-late", _many(500, "x,1,2,3\n").encode()),
    Case("trailing-delimiter", b"a,b,c\n1,2,3,\n4,5,6\n"),
    Case("duplicate-header", b"a,b,a\n1,2,3\n"),
    Case("empty-header-names", b"a,,c,\n1,2,3,4\n5,6,7,8\n"),
    Case("no-header", b"1,2,3\n4,5,6\n"),
    Case("no-header-forced", b"a,b\n1,2\n", read={"header": False}),
    Case("blank-lines", b"\n\na,b\n1,2\n\n3,4\n  \n5,6\n\n"),
    Case("empty-lines-middle", b"a,b\n1,2\n\n3,4\n\n\n5,6\n"),
    Case("trailing-empty-lines", b"a,b\n1,2\n3,4\n\n\n"),
    Case("junk-after-quote-late", _many(3000, '1,"x"y,2\n2,3,4\n').encode()),
    Case("unclosed-quote-very-late", _many(3000, '1,"never closed,2\n2,3,4\n').encode()),
    Case("quoted-newline-late-ragged", _many(3000, '1,"two\nlines",2\n2,3,4\n5,6\n').encode()),
    Case("quoted-newline-late", _many(3000, 'b,"1\n",2\n\na,3,4\nb,5,6\n').encode(), prepare={"sensitive": "g", "one_hot": True}),
    Case("delimiter-only-lines", b"a,b,c\n1,2,3\n,,\n4,5,6\n"),
    Case("quoted-newlines-lines", b'id,comment,value\n1,"hello, world",3\n2,"two\nlines",4\n3,"say ""hi""",5\n'),
    Case("crlf-and-cr", b"a,b\r\n1,2\r\n3,4\r5,6\r"),
    Case("semicolon", BASIC.replace(",", ";").encode()),
    Case("pipe", BASIC.replace(",", "|").encode()),
    Case("tab", BASIC.replace(",", "\t").encode()),
    Case("forced-delimiter", b"a;b,c\n1;2,3\n", read={"delimiter": ";"}),
    Case("skip-rows-negative", b"a,b\n1,2\n", read={"skip_rows": -1}),
    # --- preparing a table
    Case("basic", BASIC.encode(), prepare={"sensitive": "sex"}),
    Case("id-text-columns", b"ID,sex,age,city,income\n1,F,30,Oslo,10\n2,M,41,Rome,20\n3,F,25,Oslo,30\n4,M,38,Rome,25\n",
         prepare={"sensitive": "sex"}),
    Case("empty-column", b"g,x,e,y\na,1,,2\nb,2,,3\na,3,,1\nb,4,,5\n", prepare={"sensitive": "g"}),
    Case("one-hot", b"sex,city,income\nF,Oslo,10\nM,Rome,20\nF,Oslo,30\nM,Paris,25\n", prepare={"sensitive": "sex", "one_hot": True}),
    Case("one-hot-too-many", ("g,t,x\n" + "".join(f"{'ab'[i % 2]},w{i},{i}\n" for i in range(120))).encode(),
         prepare={"sensitive": "g", "one_hot": True}),
    Case("text-cell-in-feature", ("sex,age\nF,30\nM,abc\nF,25\nM,38\n" + "F,30\n" * 30).encode(), prepare={"sensitive": "sex"}),
    Case("text-cells-in-named-feature", b"sex,age\nF,30\nM,abc\nF,x\nM,38\n", prepare={"sensitive": "sex", "features": ["age"]}),
    Case("infinite-cell", b"g,x,y\na,1,2\nb,inf,3\na,3,1\nb,4,5\n", prepare={"sensitive": "g", "features": ["x", "y"]}),
    Case("overflowing-cell", b"g,x,y\na,1,2\nb,1e400,3\na,3,1\nb,4,5\n", prepare={"sensitive": "g", "features": ["x", "y"]}),
    Case("decimal-commas", b"g;x;y\na;1,5;2\nb;2,5;3\na;3,0;1\nb;0,5;2\n", prepare={"sensitive": "g", "scaling": "none"}),
    Case("unknown-sensitive", BASIC.encode(), prepare={"sensitive": "sx"}),
    Case("unknown-feature", BASIC.encode(), prepare={"sensitive": "sex", "features": ["wage"]}),
    Case("unknown-ignored", BASIC.encode(), prepare={"sensitive": "sex", "ignore": ["Age"]}),
    Case("unknown-label", BASIC.encode(), prepare={"sensitive": "sex", "label": "scor"}),
    Case("unknown-binarized", BASIC.encode(), prepare={"sensitive": "sex", "binarize": {"agee": 3}}),
    Case("binarized-not-sensitive", BASIC.encode(), prepare={"sensitive": "sex", "binarize": {"age": 30}}),
    Case("feature-is-sensitive", BASIC.encode(), prepare={"sensitive": "sex", "features": ["sex", "age"]}),
    Case("feature-is-label", BASIC.encode(), prepare={"sensitive": "sex", "features": ["age", "score"], "label": "score"}),
    Case("feature-is-ignored", BASIC.encode(), prepare={"sensitive": "sex", "features": ["age"], "ignore": ["age"]}),
    Case("feature-twice", BASIC.encode(), prepare={"sensitive": "sex", "features": ["age", "age"]}),
    Case("features-empty", BASIC.encode(), prepare={"sensitive": "sex", "features": []}),
    Case("label-is-sensitive", BASIC.encode(), prepare={"sensitive": "sex", "label": "sex"}),
    Case("no-sensitive", BASIC.encode(), prepare={"sensitive": []}),
    Case("bad-missing-policy", BASIC.encode(), prepare={"sensitive": "sex", "missing": "zero"}),
    Case("bad-small-groups", BASIC.encode(), prepare={"sensitive": "sex", "small_groups": "merge"}),
    Case("bad-min-group-size", BASIC.encode(), prepare={"sensitive": "sex", "min_group_size": 0}),
    Case("bad-scaling", BASIC.encode(), prepare={"sensitive": "sex", "scaling": "zscore"}),
    Case("no-numeric-features", b"g,t\na,x\nb,y\na,z\nb,w\n", prepare={"sensitive": "g"}),
    Case("all-constant", b"g,c\na,1\nb,1\na,1\nb,1\n", prepare={"sensitive": "g"}),
    Case("constant-left-out", b"g,x,c,y\na,1,5,2\nb,2,5,4\na,3,5,9\nb,4,5,1\n", prepare={"sensitive": "g"}),
    Case("missing-error", b"g,x,y\na,1,?\nb,2,3\na,3,4\nb,,5\na,5,6\nb,6,7\n", prepare={"sensitive": "g"}),
    Case("missing-many-columns", ("g," + ",".join(f"c{i}" for i in range(8)) + "\n" + "".join(
        f"{'ab'[r % 2]}," + ",".join("NA" if i == r else str(r + i) for i in range(8)) + "\n" for r in range(10))).encode(),
         prepare={"sensitive": "g"}),
    Case("missing-drop", b"g,x,y\na,1,?\nb,2,3\na,3,4\nb,,5\na,5,6\nb,6,7\n", prepare={"sensitive": "g", "missing": "drop"}),
    Case("missing-mean", b"g,x,y\na,1,?\nb,2,3\na,3,4\nb,,5\na,5,6\nb,6,7\n", prepare={"sensitive": "g", "missing": "mean"}),
    Case("missing-median-no-group", b"g,x,y\na,1,?\nb,2,3\n,3,4\nb,,5\na,5,6\nb,6,7\na,1,1\n",
         prepare={"sensitive": "g", "missing": "median"}),
    Case("missing-group-error", b"g,x\na,1\nNA,2\nb,3\na,4\nb,5\n", prepare={"sensitive": "g"}),
    Case("missing-label-error", b"g,x,l\na,1,p\nb,2,\na,3,q\nb,4,p\n", prepare={"sensitive": "g", "label": "l"}),
    Case("all-rows-dropped", b"g,x\na,\nb,\na,?\nb,NA\n", prepare={"sensitive": "g", "features": ["x"], "missing": "drop"}),
    Case("single-group", b"g,x\na,1\na,2\na,3\n", prepare={"sensitive": "g"}),
    Case("small-group", b"g,x,y\na,1,2\na,2,3\nb,3,1\na,4,4\n", prepare={"sensitive": "g"}),
    Case("small-groups-dropped", b"g,x,y\na,1,2\na,2,3\nb,3,1\na,4,4\nc,5,5\nc,6,1\n", prepare={"sensitive": "g", "small_groups": "drop"}),
    Case("numeric-sensitive-too-many", ("age,x\n" + "".join(f"{20 + i},{i % 5}\n" for i in range(30))).encode(), prepare={"sensitive": "age"}),
    Case("text-sensitive-too-many", ("who,x\n" + "".join(f"p{i},{i % 5}\n" for i in range(60))).encode(), prepare={"sensitive": "who"}),
    Case("binarize", ("age,x\n" + "".join(f"{20 + i},{i % 5}\n" for i in range(30))).encode(),
         prepare={"sensitive": "age", "binarize": {"age": 35}}),
    Case("binarize-text", b"g,x\na,1\nb,2\na,3\nb,4\n", prepare={"sensitive": "g", "binarize": {"g": 1}}),
    Case("bins", ("age,x\n" + "".join(f"{20 + i},{i % 5}\n" for i in range(30))).encode(), prepare={"sensitive": "age", "bins": {"age": 3}}),
    Case("bins-too-few-values", b"age,x\n1,1\n1,2\n2,3\n2,4\n", prepare={"sensitive": "age", "bins": {"age": 4}}),
    Case("bins-below-two", ("age,x\n" + "".join(f"{20 + i},{i % 5}\n" for i in range(30))).encode(),
         prepare={"sensitive": "age", "bins": {"age": 1}}),
    Case("intersection", b"s,r,x\nF,a,1\nM,a,2\nF,b,3\nM,b,4\nF,a,5\nM,b,6\nF,b,7\nM,a,8\n", prepare={"sensitive": ["s", "r"]}),
    Case("negative-for-nmf", b"g,x,y\na,-1,2\nb,2,3\na,3,4\nb,4,5\n", prepare={"sensitive": "g", "scaling": "none"}, nonnegative="error"),
    Case("latin1-log", "g,x,y\nJosé,1,2\nZoë,2,3\nJosé,3,1\nZoë,4,5\n".encode("cp1252"), prepare={"sensitive": "g"}),
    # --- tensors
    Case("tensor-ok", LONG.encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex"}),
    Case("tensor-one-index", LONG.encode(), tensor={"index": ["user"], "value": "v", "sensitive": "sex"}),
    Case("tensor-index-twice", LONG.encode(), tensor={"index": ["user", "user"], "value": "v", "sensitive": "sex"}),
    Case("tensor-value-is-index", LONG.encode(), tensor={"index": ["user", "item"], "value": "item", "sensitive": "sex"}),
    Case("tensor-sensitive-is-index", LONG.encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "user"}),
    Case("tensor-binarized-not-sensitive", LONG.encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex", "binarize": {"v": 3}}),
    Case("tensor-fill-nan", LONG.encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex", "fill": float("nan")}),
    Case("tensor-no-sensitive", LONG.encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": []}),
    Case("tensor-bad-min-size", LONG.encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex", "min_group_size": 0}),
    Case("tensor-bad-small-groups", LONG.encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex", "small_groups": "x"}),
    Case("tensor-unknown-index", LONG.encode(), tensor={"index": ["user", "itme"], "value": "v", "sensitive": "sex"}),
    Case("tensor-empty-index", LONG.replace("u2,i1", ",i1").encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex"}),
    Case("tensor-duplicate", (LONG + "u2,i1,5,M\n").encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex"}),
    Case("tensor-text-value", LONG.replace("u2,i2,22", "u2,i2,high").encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex"}),
    Case("tensor-no-value", LONG.replace("u2,i2,22", "u2,i2,").encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex"}),
    Case("tensor-no-value-filled", LONG.replace("u2,i2,22", "u2,i2,").encode(),
         tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex", "fill": 0.0}),
    Case("tensor-absent", LONG.replace("u3,i2,32,F\n", "").encode(), tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex"}),
    Case("tensor-absent-filled", LONG.replace("u3,i2,32,F\n", "").encode(),
         tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex", "fill": 0.0}),
    Case("tensor-entity-without-group", LONG.replace("u4,i1,41,M", "u4,i1,41,").replace("u4,i2,42,M", "u4,i2,42,").encode(),
         tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex"}),
    Case("tensor-group-not-constant", LONG.replace("u2,i2,22,M", "u2,i2,22,F").encode(),
         tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex"}),
    Case("tensor-entity-not-first", LONG.encode(), tensor={"index": ["item", "user"], "value": "v", "sensitive": "sex"}),
    Case("tensor-small-group-dropped", (LONG + "u5,i1,51,X\nu5,i2,52,X\n").encode(),
         tensor={"index": ["user", "item"], "value": "v", "sensitive": "sex", "small_groups": "drop"}),
]


def outcome(case: Case) -> dict:
    """What reading (and preparing) ``case`` gives: the messages, logs and shape, as plain data."""
    from fairaudit import prepare, prepare_tensor, read_table
    from fairaudit.errors import FairAuditError

    result: dict = {}
    try:
        table = read_table(case.data, name="t.csv", **case.read)
    except FairAuditError as exc:
        return {"stage": "read", "error": type(exc).__name__, "message": str(exc)}
    result["read"] = {
        "columns": list(table.columns),
        "lines": [int(v) for v in table.lines],
        "log": list(table.log),
        "encoding": table.encoding,
        "delimiter": table.delimiter,
        "has_header": bool(table.has_header),
    }
    options = case.prepare if case.prepare is not None else case.tensor
    if options is None:
        return result
    try:
        data = (prepare if case.prepare is not None else prepare_tensor)(table, **options)
        if case.nonnegative:
            data.nonnegative(case.nonnegative)
    except FairAuditError as exc:
        return {**result, "stage": "prepare", "error": type(exc).__name__, "message": str(exc)}
    result["prepared"] = {
        "features": list(data.feature_names)[:20],
        "groups": data.group_sizes(),
        "rows": int(data.n_rows),
        "log": list(data.log),
    }
    return result
