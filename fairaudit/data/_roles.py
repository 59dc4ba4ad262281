"""Column roles: which columns become features, which are left out, and why.

Every column of the table ends in exactly one place: a feature (``features``) or an excluded
column with a reason and a detail (``excluded``). Default features are the numeric columns that
are not sensitive, the label, ignored, identifiers, or empty; text columns are one-hot encoded
on request. Constant columns are found later, on the rows kept (:mod:`._prepare`).

**Identifiers.** A column is left out as ``id_like`` when

* its name says so (``ID``, ``row_id``, ``schoolID``, …) and every value is distinct — the
  rule before this one;
* it holds distinct whole numbers on every row and either runs in increasing order, covers a
  range with few gaps (row numbers, sequential IDs), or has at least 1,000 rows (a measured
  quantity almost never repeats no value over so many rows);
* it holds whole-number *codes* with many levels (at least 50), each repeated a few times on
  average (1.5–50 rows per level) with no dominant level (the largest at most 10× the median
  count, which keeps money amounts with many zeros out), and either its name speaks of an
  identifier or a unit such as a school or household, or the rows of each code are stored
  together (the file is sorted by it);
* its name marks an identifier outright (``schid``, ``schidkn``, ``hhid``, ``pid``, ``caseno``,
  ``idkn``: a unit or its abbreviation joined to ``id``/``no``/``nr``/``num``, or ``id`` with a
  survey suffix such as NELS's ``kn``) and it holds whole-number codes: at least 20 levels, each
  on 1.5 rows or more on average, none dominant — a school identifier with 79 codes of about 70
  pupils each (issue 25: it was kept, and feature selection then called it the feature most
  aligned with race).

These rules left every feature of the papers' data sets in place (credit, heart, crime, LSAC,
German, bank, adult, recidivism, COMPAS) and flagged their ID columns. A flagged column that is
a real feature comes back by naming it in ``features`` or, keeping the default features, in
``use_id_like``; either way it is used and the accounting warns that it looks like an identifier.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import NonNumericColumnError
from ..vocabulary import term
from ._cells import missing_mask
from ._table import RawTable

MAX_ONE_HOT_LEVELS = 100
ID_NAMES = frozenset({"id", "index", "row", "rowid", "row_id", "idx", "uuid", "guid", "key"})
CODE_WORDS = frozenset({"id", "ids", "idx", "uuid", "guid", "key", "code", "codes", "zip", "zipcode", "postcode", "postal", "fips", "number", "nr", "no", "num"})
UNIT_WORDS = frozenset({
    "school", "student", "pupil", "teacher", "class", "classroom", "person", "patient", "user", "customer", "client",
    "household", "hh", "family", "subject", "respondent", "participant", "case", "record", "row", "member", "account",
    "employee", "worker", "district", "county", "municipality", "hospital", "clinic", "site", "store", "branch",
    "village", "cluster", "tract", "region", "area", "entity", "item", "product", "order", "visit", "sample",
})
MIN_CODE_LEVELS = 50
MIN_NAMED_CODE_LEVELS = 20
MIN_DISTINCT_ROWS = 1000
UNIT_ABBREVIATIONS = frozenset({
    "sch", "schl", "scl", "stu", "std", "pup", "tch", "tchr", "cls", "hh", "fam", "per", "pers", "resp", "part", "subj",
    "pat", "pt", "emp", "cust", "acc", "acct", "mem", "rec", "prod", "ord", "vis", "samp", "dist", "cty", "hosp", "p",
    "c", "h", "s", "u", "r", "case", "unit", "grp", "org", "firm", "co", "plant", "loc", "geo",
})
ID_SUFFIXES = ("", "kn", "no", "nr", "num", "n", "x", "s", "code", "cd")
"""What may follow ``id`` in a compact identifier name (``schidkn``, ``idno``): survey codebooks'
suffixes (NELS's ``kn``), numbers and codes."""


_UNIT_ID_NAMES = frozenset(unit + mark for unit in UNIT_WORDS for mark in ("id", "no", "nr", "number"))
"""``schoolid``, ``patientno``, ``casenumber``: a unit word and an identifier's mark, as one word."""


def _compact_id_name(compact: str) -> bool:
    """``schidkn``, ``hhid``, ``pid``, ``caseno``, ``idkn``: an identifier spelt as one word."""
    for suffix in ID_SUFFIXES:
        if not compact.endswith("id" + suffix):
            continue
        prefix = compact[: len(compact) - len("id" + suffix)]
        if prefix in UNIT_ABBREVIATIONS or prefix in UNIT_WORDS or (prefix == "" and suffix):
            return True
    for mark in ("no", "nr", "num"):
        if compact.endswith(mark) and compact[: -len(mark)] in UNIT_ABBREVIATIONS | UNIT_WORDS and len(compact) > len(mark) + 1:
            return True
    return False


def _tokens(name: str) -> list[str]:
    return [t.lower() for t in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]


def id_name(name: str) -> bool:
    """A name that says "identifier": ``ID``, ``row_id``, ``user id``, ``schoolID``, ``patient_no``."""
    lowered = name.strip().lower()
    if lowered in ID_NAMES or lowered.endswith(("_id", " id", "-id", ".id")):
        return True
    if any(t in ("id", "ids", "idx", "uuid", "guid") for t in _tokens(name)):
        return True
    compact = re.sub(r"[^a-z]", "", lowered)
    return compact in _UNIT_ID_NAMES or _compact_id_name(compact)


def code_name(name: str) -> bool:
    """A name under which whole numbers are likely codes: identifiers, zip codes, schools, …"""
    return id_name(name) or any(t in CODE_WORDS or t in UNIT_WORDS for t in _tokens(name))


def id_like_detail(table: RawTable, column: str) -> str | None:
    """Why numeric ``column`` looks like an identifier (the rules in this module's docstring),
    or None."""
    named = id_name(column)
    if not (named or table.is_integer(column)):
        return None  # measurements with fractions: no sort needed
    values = table.numbers(column)
    present = values[~np.isnan(values)]
    m = present.size
    if m < 2:
        return None
    levels, counts = np.unique(present, return_counts=True)
    k = levels.size
    if k == m and named:
        return f"its name and {m:,} distinct values (one per row) say it identifies rows"
    if not table.is_integer(column):
        return None
    if k == m:
        increasing = bool(np.all(np.diff(present) > 0))
        dense = levels[-1] - levels[0] + 1 <= 1.5 * m
        if m >= 50 and (increasing or dense):
            how = "in increasing order" if increasing else f"covering {levels[0]:.0f}–{levels[-1]:.0f} with few gaps"
            return f"{m:,} distinct whole numbers, one per row, {how}"
        if m >= MIN_DISTINCT_ROWS:
            return f"{m:,} distinct whole numbers, one per row"
        return None
    per_level = m / k
    no_dominant = counts.max() <= 10 * np.median(counts)
    if k < MIN_CODE_LEVELS or not 1.5 <= per_level <= 50 or not no_dominant:
        if named and k >= MIN_NAMED_CODE_LEVELS and per_level >= 1.5 and no_dominant:
            return f"{k:,} whole-number codes, about {per_level:,.0f} rows each, under a name that marks an identifier"
        return None
    runs = 1 + int(np.count_nonzero(present[1:] != present[:-1]))
    together = runs <= 1.1 * k
    if not (together or code_name(column)):
        return None
    why = "the rows of each code are stored together" if together else "its name suggests codes"
    return f"{k:,} whole-number codes, about {per_level:.0f} rows each; {why}"


@dataclass
class FeatureColumns:
    """Feature columns chosen so far and every column left out, with its reason."""

    names: list[str] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # the table column each feature comes from
    missing: dict[str, int] = field(default_factory=dict)  # missing cells of a feature, where known
    excluded: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, name: str, values: np.ndarray, source: str, missing: int | None = None) -> None:
        self.names.append(name)
        self.values.append(values)
        self.sources.append(source)
        if missing is not None:
            self.missing[name] = missing

    def exclude(self, column: str, reason: str, detail: str) -> None:
        self.excluded.append({"column": column, "reason": reason, "detail": detail})

    def plain_numeric(self) -> bool:
        """Every feature is a table column as read (no one-hot indicator)."""
        return self.names == self.sources


def non_numeric_error(table: RawTable, column: str, bad: np.ndarray) -> NonNumericColumnError:
    row = int(np.flatnonzero(bad)[0])
    n_bad = int(bad.sum())
    return NonNumericColumnError(
        f"feature column {column!r} has text {table.cell(column, row)!r} at {table.where(row)}"
        f"{f' ({n_bad} such cells)' if n_bad > 1 else ''}; fix or blank those cells, leave the column out "
        f"({term('features')} / {term('ignore')}), or one-hot encode it if it is categorical ({term('one_hot', True)})."
    )


def one_hot(table: RawTable, column: str, features: FeatureColumns, log: list[str]) -> None:
    """Indicator columns ``column=level`` (NaN where the cell is missing), levels sorted."""
    strings = table.strings(column)
    missing = missing_mask(strings)
    encoded = pc.dictionary_encode(strings).combine_chunks()
    dictionary = encoded.dictionary.to_pylist()
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    present = np.zeros(len(dictionary), dtype=bool)
    present[np.unique(indices[~missing])] = True
    levels = sorted(level for level, keep in zip(dictionary, present, strict=True) if keep)
    if len(levels) > MAX_ONE_HOT_LEVELS:
        raise NonNumericColumnError(
            f"column {column!r} has {len(levels)} distinct text values, too many to one-hot encode; "
            f"leave it out ({term('ignore')}; it is probably free text or an identifier)."
        )
    where = {level: i for i, level in enumerate(dictionary)}
    for level in levels:
        indicator = (indices == where[level]).astype(float)
        indicator[missing] = np.nan
        features.add(f"{column}={level}", indicator, column)
    log.append(f"one-hot encoded {column!r} into {len(levels)} indicator columns")


def select_features(
    table: RawTable,
    features: Sequence[str] | None,
    roles: dict[str, tuple[str, str]],
    one_hot_text: bool,
    log: list[str],
    use_id_like: Sequence[str] = (),
) -> FeatureColumns:
    """The feature columns, and every other column with the reason it is left out.

    ``roles`` maps the columns with a fixed role (sensitive, label, ignored) to
    ``(reason, detail)``. ``use_id_like`` (with the default features only) names columns the
    identifier rules flag that are features all the same."""
    chosen = FeatureColumns()
    for column, reason in table.unreadable:
        chosen.exclude(column, "unreadable", reason)
    for column in table.columns:
        if column in roles:
            chosen.exclude(column, *roles[column])
    if features is not None:
        for column in features:
            _add_named(table, column, chosen, one_hot_text, log)
        for column in table.columns:
            if column not in roles and column not in features:
                chosen.exclude(column, "not_selected", f"not among the chosen features ({term('features')})")
        return chosen
    for column in table.columns:
        if column not in roles:
            _add_default(table, column, chosen, one_hot_text, log, column in use_id_like)
    return chosen


def _use_id_like(table: RawTable, column: str, detail: str, why: str, chosen: FeatureColumns, log: list[str]) -> None:
    """Use a column the identifier rules flag as a feature, and say so (log and warning)."""
    chosen.add(column, table.numbers(column), column, table.missing_count(column))
    log.append(f"used {column!r} as a feature although it looks like an identifier ({detail}), {why}")
    chosen.warnings.append(
        f"column {column!r} looks like an identifier ({detail}) and is used as a feature, {why}; an identifier is "
        "a label, not a measurement, so the audit would treat its numbering as a quantity."
    )


def _add_named(table: RawTable, column: str, chosen: FeatureColumns, one_hot_text: bool, log: list[str]) -> None:
    if table.is_numeric(column):
        detail = id_like_detail(table, column)
        if detail:
            _use_id_like(table, column, detail, f"as named in {term('features')}", chosen, log)
        else:
            chosen.add(column, table.numbers(column), column, table.missing_count(column))
        return
    parsed = table.parsed(column)
    if one_hot_text:
        one_hot(table, column, chosen, log)
    else:
        raise non_numeric_error(table, column, parsed.bad)


def _add_default(
    table: RawTable, column: str, chosen: FeatureColumns, one_hot_text: bool, log: list[str], use_id_like: bool = False
) -> None:
    if table.is_numeric(column):
        values = table.numbers(column)
        if table.missing_count(column) == values.size:
            log.append(f"left out {column!r}: every cell is empty")
            chosen.exclude(column, "empty", "every cell is missing")
            return
        detail = id_like_detail(table, column)
        if detail and use_id_like:
            _use_id_like(table, column, detail, f"as asked ({term('use_id_like', column)})", chosen, log)
            return
        if detail:
            log.append(f"left out {column!r}: it looks like a row identifier ({detail})")
            chosen.exclude(column, "id_like", f"{detail}; if it is a real feature, use it ({term('use_id_like', column)})")
            if not id_name(column):
                chosen.warnings.append(
                    f"column {column!r} was left out because it looks like an identifier ({detail}); "
                    f"if it is a real feature, use it ({term('use_id_like', column)})."
                )
            return
        chosen.add(column, values, column, table.missing_count(column))
        return
    parsed = table.parsed(column)
    n_present = int((~parsed.missing).sum())
    if n_present and parsed.bad.sum() <= 0.05 * n_present:
        # Almost all numbers: a typo in a numeric column, not a text column.
        raise non_numeric_error(table, column, parsed.bad)
    if one_hot_text:
        one_hot(table, column, chosen, log)
        return
    distinct = int(pc.count_distinct(table.strings(column).filter(pa.array(~parsed.missing))).as_py()) if n_present else 0
    log.append(f"left out text column {column!r} ({term('one_hot', True)} encodes it)")
    kind = "as many values as rows: free text or an identifier" if distinct == n_present and n_present > 20 else f"{distinct:,} distinct values"
    chosen.exclude(column, "text", f"text ({kind}); {term('one_hot', True)} encodes it as indicator columns")
