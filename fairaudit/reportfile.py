"""A saved JSON report (the audit's ``--json``, the Report page's download) as a user hands it over.

What this reader promises (issue 27):

* only a regular file is opened, at most :data:`MAX_REPORT_BYTES` of it read, in pieces
  (:mod:`fairaudit.jsonfile`), the nesting guarded before anything is parsed;
* every record is checked against :data:`RECORD` as it arrives and kept as columns (strings
  shared, numbers as float64), never as the text and its Python objects all at once: reading
  takes about a third of the file's size in memory (measured in docs/readers.md);
* the rest of the report is checked against :data:`REPORT` — the fields the comparison, the
  findings and the HTML read, typed and bounded — and one message names the file and the field.
"""

from __future__ import annotations

import io
from array import array
from pathlib import Path

import numpy as np
import pandas as pd

from .audit import RECORD_COLUMNS, AuditResult
from .data import check_path
from .data._source import Source
from .data._table import release_arrow_memory
from .errors import InputFileNotFound, ReportFileError
from .jsonfile import read_object
from .modelfile import NAME
from .schema import ANY, Fields, Invalid, Items, Keyed, Nullable, Number, Text, Whole, invalid, validate

_INF, _NAN = float("inf"), float("nan")

MAX_REPORT_BYTES = 2 << 30
"""Largest report read (2 GiB; a report of 480,000 records is 100 MB)."""

METHOD = Text(64, r"[a-z][a-z0-9_]*", "a method name (lower-case letters, digits, '_')")
VARIANT = Text(216, NAME + r"(\+leace)?(@[0-9]{1,9})?",
               "a variant name (letters, digits, '_', '.', '-', optionally '+leace', '@' and a number)")

RECORD = Fields(
    required={
        "method": METHOD,
        "variant": VARIANT,
        "rank": Whole(0, 10**9),
        "group": Nullable(Text(10_000)),
        "metric": Text(200, r"[A-Za-z0-9_.\-]+", "a metric name (letters, digits, '_', '.', '-')"),
        "value": Nullable(Number()),
    },
    optional={"ci_low": Nullable(Number()), "ci_high": Nullable(Number())},
)
"""One record: what the comparison matches on (method, variant, rank, group, metric) and the
numbers it compares; other fields of a record are allowed (a newer fairaudit's) and not kept."""

COMPARISON = Fields(
    required={
        "method": METHOD, "variant": VARIANT, "rank": Whole(0, 10**9), "metric": RECORD.required["metric"],
        "group": Text(10_000), "other": Nullable(Text(10_000)), "rows": Whole(), "other_rows": Whole(), "replicates": Whole(),
        **{name: Nullable(Number()) for name in (
            "value", "other_value", "difference", "ci_low", "ci_high", "se", "p_bootstrap", "p_permutation", "null_mean",
            "null_sd", "ratio")},
        "ratio_of": Nullable(Text(64)),
    },
)
"""One pairwise comparison (:data:`fairaudit.verdicts.COMPARISON_COLUMNS`): what the verdicts are
decided from; the counts whole numbers, the rest finite numbers or null."""

_RUN = {
    "methods": Items(METHOD, max=100),
    "ranks": Nullable(Items(Whole(0, 10**9), max=100_000)),
    "random_state": Nullable(Whole(0, 2**64)),
    "flag_ratio": Nullable(Number(positive=True)),
    "confidence": Nullable(Number(positive=True, below=1)),
    "bootstrap": Nullable(Whole(0, 10**9)),
    "holdout": Nullable(Number(below=1)),
    "options": Keyed(Keyed(ANY), max=100),
}
CONFIG = Fields(optional={**_RUN, "runs": Items(Fields(optional=_RUN), max=1000)})

REPORT = Fields(
    required={"fairaudit_version": Text(64)},
    optional={
        "created": Nullable(Text(64)),
        "seconds": Nullable(Number()),
        "config": CONFIG,
        "data": Fields(optional={
            "name": Nullable(Text(1000)), "sha256": Nullable(Text(64)), "rows": Nullable(Whole()), "group_sizes": Keyed(Whole()),
            "feature_names": Items(Text(10_000)), "groups": Items(Keyed(ANY)), "excluded": Items(Keyed(ANY)),
        }),
        "uncertainty": Keyed(Fields(optional={
            "replicates": Nullable(Whole()), "why": Nullable(Text()), "confidence": Nullable(Number(positive=True, below=1)),
            "degenerate_ranks": Keyed(Text(), key=Text(12, r"[0-9]{1,12}", "a rank")),
        }), max=100),
        "findings": Items(Fields(optional={
            "family": Nullable(Text(64)), "variant": Nullable(Text(210)), "rank": Nullable(Whole(0, 10**9)), "verdict": Nullable(Text(64)),
            "topic": Nullable(Text(200)), "text": Nullable(Text()), "rule": Nullable(Text()), "evidence": Nullable(Keyed(ANY)),
        })),
        "skipped": Items(Fields(optional={"reason": Nullable(Text())})),
        "warnings": Items(Text()),
        "details": Keyed(ANY, max=100),
        "comparisons": Items(COMPARISON),
    },
)
"""The report around its records: the fields the comparison, the findings and the HTML read."""


_TEXT_FIELDS = ("method", "variant", "group", "metric")
_NUMBER_FIELDS = ("value", "ci_low", "ci_high")
_KNOWN = frozenset(RECORD.required) | frozenset(RECORD.optional)


class _Columns:
    """Records checked one by one and kept as columns (each distinct string once)."""

    def __init__(self, where: str):
        self.where = where
        self.text: dict[str, list[str]] = {name: [] for name in _TEXT_FIELDS}
        self.rank = array("q")
        self.numbers = {name: array("d") for name in _NUMBER_FIELDS}
        self.valid: dict[str, dict] = {name: {} for name in _TEXT_FIELDS}  # strings already checked, as kept
        self.valid["group"][None] = ""

    def add(self, record, index: int) -> None:
        """Check ``record`` against :data:`RECORD` and append it. A record whose strings were all
        seen (and checked) before and whose numbers are plain finite floats and a whole rank in
        range is surely valid and takes the short way; anything else is checked in full."""
        try:
            if type(record) is not dict or not record.keys() <= _KNOWN:
                raise KeyError
            valid = self.valid
            texts = (valid["method"][record["method"]], valid["variant"][record["variant"]], valid["group"][record["group"]],
                     valid["metric"][record["metric"]])
            rank, value, low, high = record["rank"], record["value"], record.get("ci_low"), record.get("ci_high")
            if type(rank) is not int or not 0 <= rank <= 1_000_000_000:
                raise KeyError
            if not ((value is None or (type(value) is float and -_INF < value < _INF))
                    and (low is None or (type(low) is float and -_INF < low < _INF))
                    and (high is None or (type(high) is float and -_INF < high < _INF))):
                raise KeyError
        except (KeyError, TypeError):  # not seen before, or not plain: the full check
            try:
                record = RECORD.check(record, f"records[{index}]")
            except Invalid as bad:
                raise invalid(self.where, ReportFileError, bad) from None
            for name in _TEXT_FIELDS:
                self.valid[name].setdefault(record[name], record[name] or "")
            texts = tuple(self.valid[name][record[name]] for name in _TEXT_FIELDS)
            rank, value, low, high = record["rank"], record["value"], record.get("ci_low"), record.get("ci_high")
        for values, text in zip(self.text.values(), texts, strict=True):
            values.append(text)
        self.rank.append(rank)
        for values, number in zip(self.numbers.values(), (value, low, high), strict=True):
            values.append(_NAN if number is None else number)

    def frame(self) -> pd.DataFrame:
        columns = {**self.text, "rank": np.frombuffer(self.rank, dtype=np.int64) if len(self.rank) else np.zeros(0, np.int64)}
        columns.update({name: np.frombuffer(values, dtype=float) if len(values) else np.zeros(0) for name, values in self.numbers.items()})
        frame = pd.DataFrame(columns)[RECORD_COLUMNS]
        frame["rank"] = frame["rank"].astype("Int64")
        return frame


def read_report_file(source, name: str | None = None) -> tuple[AuditResult, dict]:
    """``(result, the report's other fields)`` of a saved JSON report: a path, bytes or a binary
    file object (see the module docstring)."""
    opened = None
    if isinstance(source, bytes | bytearray):
        stream, shown = io.BytesIO(bytes(source)), name or "the report"
    elif hasattr(source, "read"):
        stream, shown = source, name or str(getattr(source, "name", "") or "the report")
    else:
        path = Path(source)
        shown = name or path.name
        try:
            info = check_path(path)
        except InputFileNotFound as exc:
            if not path.exists() and not path.is_symlink():
                raise ReportFileError(f"{path} does not exist; give a JSON report written by --json or the Report page.") from None
            raise ReportFileError(str(exc.args[0])) from None
        stream = opened = Source(name=shown, size=info.st_size, path=path).open()
    columns = _Columns(shown)
    try:
        found = read_object(stream, shown, ReportFileError, max_bytes=MAX_REPORT_BYTES, each={"records": columns.add})
    finally:
        if opened is not None:
            opened.close()
    if found.get("records") is not True or "fairaudit_version" not in found:
        if "records" in found and found["records"] is not True:
            raise ReportFileError(f"{shown}: field 'records' must be a list of records; it is not.")
        raise ReportFileError(
            f"{shown} is not a fairaudit JSON report (it needs 'fairaudit_version' and a 'records' list); write one with "
            "the audit's --json or the Report page's JSON download."
        )
    payload = validate({key: value for key, value in found.items() if key != "records"}, REPORT, shown, ReportFileError)
    result = AuditResult.from_dict({**payload, "records": []})
    result.records = columns.frame()
    del columns
    release_arrow_memory()  # what building the columns left in Arrow's pool and the C heap
    return result, payload
