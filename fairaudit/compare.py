"""Compare two saved audits: what changed, per metric and group, and whether it exceeds the
uncertainty.

Two JSON reports (before and after a data change, two models, two releases) are matched on the
records' key ``(method, variant, rank, group, metric)``. For every key present in both:
``a``, ``b``, ``change = b − a``, ``relative = change / |a|``, the intervals ``[a_low, a_high]``
and ``[b_low, b_high]`` when the reports carry them (records' ``ci_low``/``ci_high``), and
``beyond``:

* both values have an interval: ``True`` when the two intervals do not overlap (a conservative
  rule: non-overlapping 95 % intervals mean a difference well beyond the noise of either run);
* one has an interval: ``True`` when the other value lies outside it;
* neither: ``None`` (no interval, so no statement about the noise).

``status`` is ``same`` (equal to within a millionth of the metric's largest magnitude in either
audit, ``scale``: below that, solver tolerances and rounding decide), ``changed``, ``only in A``
or ``only in B``; ``relative`` is left empty where ``|a|`` is itself below that threshold (a ratio
of two rounding errors means nothing); ``judged`` says whether the change is ``better`` or ``worse`` for a metric
with a direction (:func:`direction`: a loss, gap, error or leakage is better lower; variance
explained, balance, accuracy better higher) and is empty for the rest (ranks, iterations, λ,
times). The differences of the inputs (data file, rows, groups, features, configuration,
fairaudit version) and each report's findings come with the table, so a reader sees *why*
numbers might have moved. :func:`render_html` writes all of it as one offline HTML page (same
look and print stylesheet as the audit report).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ._version import __version__
from .audit import AuditResult, is_sweep_variant
from .data._table import release_arrow_memory
from .errors import ParameterError, ReportFileError
from .families import FAMILY_TITLES
from .findings import VERDICT_LABELS
from .formatting import number
from .metrics import HELDOUT_PREFIX, METRIC_DEFINITIONS, better
from .plots import TICK_FORMAT, VANILLA_COLOUR, VARIANT_COLOURS, metric_label, panel_title, rank_title, safe, variant_title
from .report import escape, figure_html, page_html, spreadsheet_safe, table_html, write_outputs
from .reportfile import read_report_file
from .vocabulary import term

KEY = ["method", "variant", "rank", "group", "metric"]

NOT_JUDGED = frozenset({
    "effective_rank", "dual_gap", "own_rel_error", "n_iter", "epochs", "lam", "seconds", "estimate_seconds",
    "acc_std", "nmi_std", "balance_std", "proportion_std",
})
"""Metrics whose change is neither better nor worse: sizes, solver diagnostics, the data's own
difficulty (``own_rel_error``), spreads and times."""

HEADLINES = {
    "pca": ("max_loss", "loss_gap", "unfairness_balanced"),
    "nmf": ("max_rel_loss", "rel_loss_gap", "unfairness_balanced"),
    "fs": ("balance", "alignment_protected", "unfairness_balanced"),
    "cpd": ("residual_fit", "nkhsic", "unfairness_balanced"),
}
"""The whole-data metrics drawn A against B per family (those present)."""

SLICE_ROWS = 5_000
"""Rows of the comparison written to its JSON or CSV file at a time."""

HTML_ROWS = 2_000
"""At most this many rows per table of the HTML page (the CSV and the JSON hold every row)."""

TOLERANCE = 1e-6
"""Two values are the same when they differ by at most this fraction of their metric's scale."""


def direction(metric: str) -> str:
    """``"lower"`` or ``"higher"`` (which is better, :func:`fairaudit.metrics.better`: a held-out
    metric such as ``heldout_loss`` has its base metric's direction) or ``""`` (not judged: no
    direction, or in :data:`NOT_JUDGED`)."""
    if metric.removeprefix(HELDOUT_PREFIX) in NOT_JUDGED:
        return ""
    return better(metric) or ""


# ============================================================================ reading
def read_report(source, *, name: str | None = None) -> AuditResult:
    """A saved JSON report (path, bytes or file object) as an :class:`AuditResult`; the records
    keep their interval columns when the report has them. The file is checked as it is read
    (:mod:`fairaudit.reportfile`: size, nesting, every record and field against its schema)."""
    return _read_report(source, name)[0]


def _read_report(source, name: str | None) -> tuple[AuditResult, dict]:
    return read_report_file(source, name)


# ============================================================================ comparing
@dataclass
class Comparison:
    """Two audits side by side: ``table`` (one row per record key, see the module docstring),
    ``differences`` of their inputs, and both results."""

    a: AuditResult
    b: AuditResult
    names: tuple[str, str]
    table: pd.DataFrame
    differences: list[dict] = field(default_factory=list)
    created: str = ""
    findings: tuple[dict, dict] = ({}, {})
    """Each audit's findings as ``{family: [finding, …]}``, a finding as its JSON object
    (``family, rank, variant, verdict, text, evidence``; :meth:`fairaudit.findings.Finding.to_dict`)."""

    @property
    def verdicts(self) -> list[dict]:
        """Every verdict of either audit matched with the other's (:func:`verdict_changes`)."""
        return verdict_changes(*self.findings)

    @property
    def verdicts_changed(self) -> list[dict]:
        return [v for v in self.verdicts if v["changed"]]

    @property
    def data_note(self) -> str | None:
        """A sentence when the two audits are of different data (:func:`data_note`)."""
        return data_note(self.a, self.b)

    @property
    def changed(self) -> pd.DataFrame:
        return self.table[self.table.status == "changed"]

    def counts(self) -> dict[str, int]:
        status = self.table.status
        both = status.isin(["same", "changed"]).to_numpy()
        beyond = self.table.beyond.to_numpy()
        return {
            "compared": int(both.sum()),
            "changed": int((status == "changed").sum()),
            "same": int((status == "same").sum()),
            "with_interval": int(sum(value is not None for value in beyond[both])),
            "beyond_interval": int(sum(value is True for value in beyond[both])),
            "better": int((self.table.judged == "better").sum()),
            "worse": int((self.table.judged == "worse").sum()),
            "only_a": int((status == "only in A").sum()),
            "only_b": int((status == "only in B").sum()),
        }

    def largest_changes(self, limit: int | None = 10, method: str | None = None, *, beyond: bool = False) -> pd.DataFrame:
        """Changed rows of judged metrics (``beyond``: those whose change exceeds the intervals),
        largest relative change first (in table order among equals); only the first ``limit``
        rows are taken from the table."""
        chosen = self._judged_changes(method)
        if beyond:
            chosen = chosen[[value is True for value in self.table["beyond"].to_numpy()[chosen]]]
        size = np.abs(self.table["change"].to_numpy()[chosen]) / self.table["scale"].to_numpy()[chosen]
        order = chosen[np.argsort(-size, kind="stable")]
        return self.table.iloc[order if limit is None else order[:limit]]

    def _judged_changes(self, method: str | None = None) -> np.ndarray:
        """Positions of the changed rows of judged metrics (of ``method``)."""
        mask = (self.table["status"] == "changed").to_numpy() & (self.table["judged"] != "").to_numpy()
        if method is not None:
            mask &= (self.table["method"] == method).to_numpy()
        return np.flatnonzero(mask)

    def summary(self) -> list[str]:
        """Sentences for the top of a report or a terminal: the verdicts that changed first, then
        whether the data differ, then the values."""
        c = self.counts()
        a, b = self.names
        verdicts = self.verdicts
        changed = [v for v in verdicts if v["changed"]]
        if changed:
            lines = [f"{len(changed)} of {len(verdicts)} verdicts changed:"] + [f"  {v['sentence']}" for v in changed]
        elif verdicts:
            lines = [f"No verdict changed ({len(verdicts)} compared)."]
        else:
            lines = ["Neither audit has verdicts to compare."]
        if self.data_note:
            lines.append(self.data_note)
        lines.append(
            f"{c['compared']} values in both audits: {c['changed']} changed ({c['better']} better, {c['worse']} worse by "
            f"their metric's direction), {c['same']} the same."
        )
        if c["with_interval"]:
            lines.append(f"{c['with_interval']} of them have an interval; {c['beyond_interval']} changes exceed the intervals.")
        else:
            lines.append("Neither report has intervals (bootstrap), so no change can be told apart from noise here.")
        if c["only_a"] or c["only_b"]:
            lines.append(f"{c['only_a']} values only in {a}, {c['only_b']} only in {b} (different variants, ranks, groups or metrics).")
        if self.differences:
            shown = ", ".join(d["what"] for d in self.differences[:6])
            lines.append(f"The inputs differ in {len(self.differences)} respect(s): {shown}{' …' if len(self.differences) > 6 else ''}.")
        else:
            lines.append("The two audits had the same data and configuration.")
        return lines

    def _heading(self) -> dict:
        return {
            "fairaudit_version": __version__,
            "created": self.created,
            "compared": list(self.names),
            "sources": [_source(r) for r in (self.a, self.b)],
            "counts": self.counts(),
            "summary": self.summary(),
            "verdicts": [_json_safe(v) for v in self.verdicts],
            "data_note": self.data_note,
            "differences": [_json_safe(d) for d in self.differences],
        }

    def _row_slices(self):
        for start in range(0, len(self.table), SLICE_ROWS):
            yield self.table.iloc[start:start + SLICE_ROWS]

    def to_dict(self) -> dict:
        return {**self._heading(), "rows": [_json_safe(r) for r in self.table.to_dict(orient="records")]}

    def json_pieces(self, indent: int | None = 1):
        """:meth:`to_json` in pieces, :data:`SLICE_ROWS` rows at a time (what a file is written from:
        the whole text is never held)."""
        dumps = lambda value: json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False)  # noqa: E731
        heading = dumps({**self._heading(), "rows": []})
        yield heading[: heading.rindex("[")] + "["
        for i, rows in enumerate(self._row_slices()):
            yield ("\n" if i == 0 else ",\n") + _json_rows(rows)
        yield "\n" + heading[heading.rindex("[") + 1:]

    def to_json(self, indent: int | None = 1) -> str:
        return "".join(self.json_pieces(indent))

    def csv_pieces(self):
        """:meth:`to_csv` in pieces of :data:`SLICE_ROWS` rows."""
        for i, rows in enumerate(self._row_slices()):
            yield spreadsheet_safe(rows).to_csv(index=False, header=i == 0)
        if not len(self.table):
            yield spreadsheet_safe(self.table).to_csv(index=False)

    def to_csv(self) -> str:
        """The matched values, one row per record key; text cells a spreadsheet would run as a
        formula are neutralised (:func:`fairaudit.report.spreadsheet_safe`)."""
        return "".join(self.csv_pieces())


def _json_rows(rows: pd.DataFrame) -> str:
    """``rows`` as JSON objects, one per line, separated by commas: each distinct text or flag
    encoded once, each number by ``repr`` (as ``json.dumps`` writes it; NaN and missing values as
    ``null``) — the rows' dictionaries are never built."""
    columns = []
    for name in rows.columns:
        column = rows[name]
        if pd.api.types.is_float_dtype(column) or pd.api.types.is_integer_dtype(column):
            values = column.to_numpy(dtype=object, na_value=None)
            cells = [f'"{name}": {"null" if v is None or v != v or v in (math.inf, -math.inf) else repr(v)}' for v in values]
        else:
            codes, uniques = pd.factorize(column, use_na_sentinel=True)
            encoded = np.array([f'"{name}": {json.dumps(_json_safe(v), ensure_ascii=False)}' for v in uniques] + [f'"{name}": null'],
                               dtype=object)
            cells = encoded[codes]  # -1 (missing) is the last entry: null
        columns.append(cells)
    return ",\n".join("{" + ", ".join(parts) + "}" for parts in zip(*columns, strict=True))


def _json_safe(value):
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


def _source(result: AuditResult) -> dict:
    return {
        "created": result.created,
        "fairaudit_version": result.fairaudit_version,
        "data": result.data.get("name"),
        "sha256": result.data.get("sha256"),
        "rows": result.data.get("rows"),
    }


SORT = ["method", "variant", "rank", "metric", "group"]
"""The comparison's row order (every column of :data:`KEY`)."""


def _matched(left: pd.DataFrame, right: pd.DataFrame, names: tuple[str, str]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The records of ``left`` (A) and ``right`` (B) matched on :data:`KEY` — an outer join —,
    sorted by :data:`SORT`: their key, ``a``, ``b`` and their intervals; which rows are in both,
    and which come from A (in both, or in A only).

    The records of both are sorted together by their key columns' codes (each column factorized
    in sorted order): equal neighbours are a match (A's row first) or a repeated key. Matching
    and sorting work on small integers, and each column is copied once, into its place."""
    n, total = len(left), len(left) + len(right)
    codes = [pd.factorize(pd.concat([left[c], right[c]], ignore_index=True), sort=True, use_na_sentinel=False)[0].astype(np.int32)
             for c in SORT]
    release_arrow_memory()  # the factorizations' buffers, kept by Arrow's pool for reuse otherwise
    order = np.lexsort(codes[::-1])  # stable: among equal keys, A's rows come first
    same = np.zeros(total, dtype=bool)  # the row has its predecessor's key
    if total:
        same[1:] = True
        for column in codes:
            ordered = column[order]
            same[1:] &= ordered[1:] == ordered[:-1]
    del codes
    in_b = order >= n
    previous_in_b = np.r_[False, in_b[:-1]]
    repeated = same & (in_b == previous_in_b)
    if repeated.any():
        at = int(np.argmax(repeated))
        which, frame, row = (names[1], right, order[at] - n) if in_b[at] else (names[0], left, order[at])
        dup = frame.iloc[int(row)]
        raise ReportFileError(
            f"{which} has two records for {dup.method}/{dup.variant} rank {dup['rank']} "
            f"{dup.metric}{f' ({dup.group})' if dup.group else ''}; a record key must be unique."
        )
    joined = same & in_b  # B's row of a key A has too: it joins the row before it
    partner = np.full(n, -1, dtype=np.int64)  # each A row's row in B, or -1
    partner[order[np.flatnonzero(joined) - 1]] = order[joined] - n
    rows = order[~joined]  # the table's rows: A's rows and B's rows without a match, in key order
    del order, same, in_b, previous_in_b, joined
    table = pd.DataFrame(index=pd.RangeIndex(len(rows)))
    for column in KEY:
        table[column] = pd.concat([left[column], right[column]], ignore_index=True).take(rows).reset_index(drop=True)
    from_a = rows < n
    mine = np.where(from_a, rows, 0)
    theirs = np.where(from_a, partner[mine] if n else -1, rows - n)  # each row's row in B, or -1
    for side, frame, index in (("a", left, np.where(from_a, mine, -1)), ("b", right, theirs)):
        for column, source in ((side, "value"), (f"{side}_low", "ci_low"), (f"{side}_high", "ci_high")):
            values = frame[source].to_numpy(float) if source in frame.columns else np.full(len(frame), np.nan)
            table[column] = np.where(index >= 0, values[np.maximum(index, 0)] if len(values) else np.nan, np.nan)
    return table, from_a & (theirs >= 0), from_a


def _beyond(table: pd.DataFrame, compared: np.ndarray) -> pd.Series:
    """Per row (``compared``: rows in both audits): whether the change exceeds the intervals —
    both intervals apart, or the other value outside the one interval —, ``None`` without a
    finite value on both sides or any interval."""
    a, b = table["a"].to_numpy(float), table["b"].to_numpy(float)
    a_low, a_high, b_low, b_high = (table[c].to_numpy(float) for c in ("a_low", "a_high", "b_low", "b_high"))
    a_has, b_has = np.isfinite(a_low) & np.isfinite(a_high), np.isfinite(b_low) & np.isfinite(b_high)
    with np.errstate(invalid="ignore"):
        apart = np.where(
            a_has & b_has, (a_high < b_low) | (b_high < a_low),
            np.where(a_has, (b < a_low) | (b > a_high), (a < b_low) | (a > b_high)),
        )
    known = compared & np.isfinite(a) & np.isfinite(b) & (a_has | b_has)
    return pd.Series(np.where(known, apart, None), index=table.index, dtype=object)


def _words(condition: np.ndarray, yes: str, no: str) -> np.ndarray:
    """``yes`` where ``condition`` holds, else ``no``: an object array of two shared strings (not
    a string object per row, as ``np.where(…).astype(object)`` makes)."""
    out = np.full(len(condition), no, dtype=object)
    out[condition] = yes
    return out


def _status(a: np.ndarray, b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``same`` (both missing, or within :data:`TOLERANCE` of the scale) or ``changed``."""
    with np.errstate(invalid="ignore"):
        close = np.abs(b - a) <= TOLERANCE * scale
    return _words((np.isnan(a) & np.isnan(b)) | close, "same", "changed")


def _judged(ways: np.ndarray, change: np.ndarray, status: np.ndarray) -> np.ndarray:
    """``better``/``worse`` by the metric's direction for a changed finite value, else ``""``."""
    judged = (status == "changed") & (ways != "") & np.isfinite(change)
    better = (change < 0) == (ways == "lower")
    out = _words(better, "better", "worse")
    out[~judged] = ""
    return out


def compare(a: AuditResult, b: AuditResult, *, names: tuple[str, str] = ("A", "B"), findings: tuple[dict, dict] | None = None) -> Comparison:
    """Match ``a``'s and ``b``'s records on their key and say what changed (module docstring).
    ``findings``: each audit's ``{family: [finding, …]}`` (default: computed from its records)."""
    names = tuple(str(n) for n in names)
    if len(names) != 2 or names[0] == names[1] or not all(n.strip() for n in names):
        raise ParameterError(
            f"give the two audits two different names, e.g. {term('compare_names', 'before,after')}; got {', '.join(names) or 'none'}."
        )
    table, both, from_a = _matched(a.records, b.records, names)
    table["change"] = table["b"] - table["a"]
    magnitude = np.fmax(table["a"].abs().to_numpy(), table["b"].abs().to_numpy())
    family_metric = pd.factorize(pd.MultiIndex.from_arrays([table["method"], table["metric"]]))[0]
    scale = pd.Series(magnitude).groupby(family_metric).transform("max").fillna(0.0).to_numpy()
    table["scale"] = np.where(scale > 0, scale, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        table["relative"] = np.where(table["a"].abs() > TOLERANCE * table["scale"], table["change"] / table["a"].abs(), np.nan)
    status = _words(from_a, "only in A", "only in B")
    status[both] = _status(table["a"].to_numpy(float)[both], table["b"].to_numpy(float)[both], table["scale"].to_numpy(float)[both])
    table["beyond"] = _beyond(table, both)
    metrics, names_of = pd.factorize(table["metric"])
    ways = np.array([direction(metric) for metric in names_of], dtype=object)[metrics] if len(names_of) else np.zeros(0, dtype=object)
    table["judged"] = _judged(ways, table["change"].to_numpy(float), status)
    table["status"] = status
    table["direction"] = ways
    order = ["method", "variant", "rank", "group", "metric", "a", "b", "change", "relative", "a_low", "a_high", "b_low", "b_high", "beyond", "status", "judged", "direction", "scale"]
    table = table[order]
    if findings is None:
        findings = (finding_objects(a), finding_objects(b))
    created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    return Comparison(a, b, tuple(names), table, input_differences(a, b), created, findings)


def _flatten(value, prefix: str) -> dict[str, object]:
    if isinstance(value, Mapping):
        out: dict[str, object] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


SETTINGS = {
    "data.name": "data file", "data.sha256": "file contents (SHA-256)", "data.bytes": "file size (bytes)",
    "data.format": "file format", "data.encoding": "encoding", "data.delimiter": "delimiter", "data.rows_read": "rows read",
    "data.rows": "rows used", "data.n_features": "number of features", "data.feature_names": "features",
    "data.sensitive": "sensitive columns", "data.label": "label column", "data.scaling": "scaling",
    "data.preprocessing": "preprocessing", "data.warnings": "warnings about the data", "data.engine": "engine",
    "config.methods": "families", "config.ranks": "ranks", "config.variants": "variants", "config.random_state": "random seed",
    "config.bootstrap": "bootstrap replicates", "config.confidence": "confidence level", "config.holdout": "held-out share",
    "config.flag_ratio": "gap tolerance (×)", "config.leakage_classifier": "leakage classifier",
    "config.leakage_max_rows": "rows for the leakage test", "config.mmd_max_rows_per_group": "rows per group for the RBF MMD²",
    "config.sdp_max_features": "largest SDP dimension", "config.mw_max_features": "largest multiplicative-weights dimension",
    "config.leakage_permutations": "leakage permutations", "config.engine": "engine",
}
"""The inputs' settings in words (the rest: their key, with family options as ``PCA option x``)."""

SKIPPED_SETTINGS = frozenset({"data.features", "data.tensor"})
"""Settings another one already shows (``features`` is ``feature_names``)."""


def setting_name(key: str) -> str:
    """A setting of a report's ``data`` or ``config`` (a dotted key) in words."""
    if key in SETTINGS:
        return SETTINGS[key]
    if key.startswith("data.group_sizes."):
        return f"rows of group {key.removeprefix('data.group_sizes.')}"
    if key.startswith("config.options."):
        family, _, option = key.removeprefix("config.options.").partition(".")
        return f"{FAMILY_TITLES.get(family, family)} option {option}" if option else f"{FAMILY_TITLES.get(family, family)} options"
    return key.split(".", 1)[-1].replace("_", " ")


def readable(value) -> str:
    """A setting's value in words: ``—`` when not set, yes/no, numbers to three significant
    figures, lists joined, mappings as ``key = value``."""
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:,}" if isinstance(value, int) else number(value)
    if isinstance(value, list | tuple):
        return _few([readable(v) for v in value])
    if isinstance(value, Mapping):
        return "; ".join(f"{k} = {readable(v)}" for k, v in value.items())
    return str(value)


def _accounting_entries(data: Mapping) -> dict[str, str]:
    """The per-group and per-column accounting of a report's data, one readable entry each."""
    out = {}
    groups, excluded = data.get("groups"), data.get("excluded")  # a saved report's: any JSON, read as text where odd
    for entry in groups if isinstance(groups, list) else []:
        if isinstance(entry, Mapping) and "group" in entry:
            dropped = entry.get("dropped")
            listed = ", ".join(f"{readable(n)} {why}" for why, n in dropped.items()) if isinstance(dropped, Mapping) else ""
            out[f"group {entry['group']}: rows used of read"] = (
                f"{readable(entry.get('rows_used', 0))} of {readable(entry.get('rows_read', 0))}"
                + (f" (dropped: {listed})" if listed else ""))
    for entry in excluded if isinstance(excluded, list) else []:
        if isinstance(entry, Mapping) and "column" in entry:
            out[f"column {entry['column']} left out"] = str(entry.get("reason", ""))
    return out


def input_differences(a: AuditResult, b: AuditResult) -> list[dict]:
    """What differs between the two audits' inputs: data fingerprint, configuration, version —
    ``{"what", "key", "a", "b"}``, the setting (:func:`setting_name`) and both values in words
    (:func:`readable`; long lists shortened to what was added and removed; the per-group and
    per-column accounting one entry each)."""
    found = []
    if a.fairaudit_version != b.fairaudit_version:
        found.append({"what": "fairaudit version", "key": "fairaudit_version", "a": str(a.fairaudit_version), "b": str(b.fairaudit_version)})
    for section, left, right in (("data", a.data, b.data), ("config", a.config, b.config)):
        flat_a, flat_b = _flatten(left, section), _flatten(right, section)
        for key in dict.fromkeys([*flat_a, *flat_b]):
            x, y = flat_a.get(key), flat_b.get(key)
            if x == y or key in SKIPPED_SETTINGS or key in ("data.groups", "data.excluded"):
                continue
            if key == "data.sha256":
                x, y = (v[:12] + "…" if isinstance(v, str) else v for v in (x, y))
            if isinstance(x, list) and isinstance(y, list) and all(isinstance(v, str | int | float) for v in x + y) and len(x) + len(y) > 8:
                removed = [v for v in x if v not in y]
                added = [v for v in y if v not in x]
                if removed or added:
                    found.append({"what": setting_name(key), "key": key, "a": f"{len(x)}; only here: {_few(removed)}",
                                  "b": f"{len(y)}; only here: {_few(added)}"})
                    continue
            found.append({"what": setting_name(key), "key": key, "a": readable(x), "b": readable(y)})
        if section == "data":
            entries_a, entries_b = _accounting_entries(left), _accounting_entries(right)
            for what in dict.fromkeys([*entries_a, *entries_b]):
                x, y = entries_a.get(what, "—"), entries_b.get(what, "—")
                if x != y:
                    found.append({"what": what, "key": f"data.accounting.{what}", "a": x, "b": y})
    return found


def data_note(a: AuditResult, b: AuditResult) -> str | None:
    """A sentence when the two audits are of different data — another file or other contents,
    rows, groups or features —; None when they read the same file the same way."""
    da, db = a.data or {}, b.data or {}
    parts = []
    if da.get("sha256") != db.get("sha256"):
        parts.append("other file contents" if da.get("name") == db.get("name") else f"other files ({da.get('name')}, {db.get('name')})")
    if da.get("rows") != db.get("rows"):
        parts.append(f"rows {readable(da.get('rows'))} → {readable(db.get('rows'))}")
    groups_a, groups_b = set(da.get("group_sizes") or {}), set(db.get("group_sizes") or {})
    if groups_a != groups_b:
        parts.append("groups " + "; ".join(
            f"{_few(sorted(only))} only in the {which}" for only, which in ((groups_a - groups_b, "first"), (groups_b - groups_a, "second")) if only))
    features_a, features_b = da.get("feature_names") or [], db.get("feature_names") or []
    if features_a != features_b:
        parts.append(f"features {len(features_a)} → {len(features_b)}" if set(features_a) != set(features_b) else "features in another order")
    if not parts:
        return None
    return (f"These two audits are of different data ({', '.join(parts)}): their numbers differ partly because the data "
            "do, not only because of what was fitted.")


def _few(values: list, limit: int = 8) -> str:
    if not values:
        return "—"
    return ", ".join(map(str, values[:limit])) + (f" … (+{len(values) - limit})" if len(values) > limit else "")


def compare_files(path_a, path_b, *, names: tuple[str, str] | None = None) -> Comparison:
    """:func:`compare` of two saved JSON reports, named by their file names (or ``names``; two
    files of the same name by :func:`default_names`)."""
    (a, found_a), (b, found_b) = report_with_findings(path_a), report_with_findings(path_b)
    if names is None:
        names = default_names(a, b, (Path(str(path_a)).name, Path(str(path_b)).name))
    return compare(a, b, names=names, findings=(found_a, found_b))


def audit_name(result: AuditResult) -> str:
    """``"survey.csv (2026-11-27 19:05)"``: an audit by its data file and when it was made."""
    created = str(result.created or "")[:16].replace("T", " ")
    data = str((result.data or {}).get("name") or "audit")
    return f"{data} ({created})" if created else data


def default_names(a: AuditResult, b: AuditResult, file_names: tuple[str, str] | None = None) -> tuple[str, str]:
    """Names for two audits: their report files' names when these differ (``before.json``,
    ``after.json``), else their data files and dates (:func:`audit_name`), else those marked
    numbered."""
    if file_names and file_names[0] != file_names[1] and all(n.strip() for n in file_names):
        return tuple(file_names)
    names = (audit_name(a), audit_name(b))
    if names[0] == names[1]:
        names = (f"1: {names[0]}", f"2: {names[1]}")
    return names


def report_with_findings(source, *, name: str | None = None) -> tuple[AuditResult, dict[str, list[dict]]]:
    """A saved report (:func:`read_report`) and its findings (as objects, by family): as saved,
    or computed from its records when it has no ``findings`` field (a report older than the
    findings)."""
    result, payload = _read_report(source, name)
    return result, saved_findings(payload) if "findings" in payload else finding_objects(result)


# ============================================================================ findings
def saved_findings(payload: Mapping) -> dict[str, list[dict]]:
    """The findings a saved report states (its top-level ``findings`` list of objects with
    ``family`` and ``text``), by family; empty when it has none."""
    out: dict[str, list[dict]] = {}
    for item in payload.get("findings") or []:
        if isinstance(item, Mapping) and item.get("text"):
            out.setdefault(str(item.get("family", "")), []).append(dict(item))
    return out


def finding_objects(result: AuditResult) -> dict[str, list[dict]]:
    """The findings of ``result`` computed from its records, by family (as JSON objects)."""
    from .findings import findings

    try:
        return {family: [f.to_dict() for f in found] for family, found in findings(result).items()}
    except (KeyError, ValueError, IndexError, TypeError):  # a report from another version: its records may not fit
        return {}


def finding_texts(result: AuditResult) -> dict[str, list[str]]:
    """The findings of ``result`` as sentences, by family."""
    return {family: [str(item["text"]) for item in found] for family, found in finding_objects(result).items()}


VERDICT_SEVERITY = {"mitigated": 0, "no_evidence": 1, "gap": 2, "worse": 3}
"""How bad a verdict is for the groups: a change up this scale is a regression (``worse``), down
it an improvement; ``info`` is no verdict."""


def finding_topic(item: Mapping) -> str:
    """What a finding is about, so the same finding of two audits can be matched: its ``topic``
    when the report names one, else told from its evidence (leakage, cluster balance, a disparity
    between groups), on the held-out rows or not."""
    if item.get("topic"):
        return str(item["topic"])
    evidence = item.get("evidence") or {}
    if evidence.get("kind"):  # the evidence objects of fairaudit.verdicts say what they judge
        kind = str(evidence["kind"])
    elif "balanced_accuracy" in evidence:
        kind = "leakage"
    elif "relative_balance" in evidence or "alignment_protected" in evidence:
        kind = "cluster balance"
    elif evidence:
        kind = "disparity"
    else:
        kind = "statement"
    held_out = (evidence.get("heldout") or str(evidence.get("metric", "")).startswith("heldout_")
                or str(item.get("text", "")).startswith("Held-out rows"))
    return kind + (" on held-out rows" if held_out else "")


def compared_groups(item: Mapping) -> str:
    """``"race=black vs race=white"``: the groups a finding compares, where its evidence names them."""
    evidence = item.get("evidence") or {}
    pair = evidence.get("groups") or evidence.get("pair")
    headline = evidence.get("headline")
    if isinstance(headline, Mapping) and isinstance(headline.get("group"), str) and headline.get("other"):
        pair = (headline["group"], headline["other"])  # a judged pair of groups (fairaudit.verdicts.Pair)
    if isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(g, str) for g in pair):
        return f"{pair[0]} vs {pair[1]}"
    worst = evidence.get("worst_group") or evidence.get("group")
    best = evidence.get("reference") or evidence.get("best_group")
    return f"{worst} vs {best}" if isinstance(worst, str) and isinstance(best, str) else ""


def verdict_changes(found_a: Mapping, found_b: Mapping) -> list[dict]:
    """Every verdict of either audit matched with the other's on (family, variant, topic): per
    match ``family, variant, topic, a, b`` (the verdicts; None where that audit has no such
    finding), ``rank_a, rank_b, groups, changed``, ``direction`` (``regression`` when the verdict
    got worse for the groups on :data:`VERDICT_SEVERITY`, ``improvement``, ``changed`` otherwise,
    ``""`` unchanged) and ``sentence``. Statements without a verdict (``info``) are left out;
    the changed come first, regressions before improvements."""
    def index(found: Mapping) -> dict[tuple, Mapping]:
        out = {}
        for family, items in found.items():
            for item in items:
                if isinstance(item, Mapping) and item.get("verdict") in VERDICT_SEVERITY:
                    out.setdefault((str(family), str(item.get("variant")), finding_topic(item)), item)
        return out

    left, right = index(found_a), index(found_b)
    rows = []
    for key in dict.fromkeys([*left, *right]):
        family, variant, topic = key
        x, y = left.get(key), right.get(key)
        va, vb = (x or {}).get("verdict"), (y or {}).get("verdict")
        changed = va != vb
        if not changed:
            way = ""
        elif va is None or vb is None:
            way = "changed"
        else:
            way = "regression" if VERDICT_SEVERITY[vb] > VERDICT_SEVERITY[va] else "improvement"
        latest = y or x
        rank = latest.get("rank")
        groups = compared_groups(latest)
        title = FAMILY_TITLES.get(family, family) + " · " + variant_title(family, variant) if variant not in ("None", "") else FAMILY_TITLES.get(family, family)
        where = (f" at rank {rank}" if rank is not None else "") + (f", {groups}" if groups else "")
        label = lambda v: VERDICT_LABELS.get(v, v).capitalize() if v else "not in this audit"  # noqa: E731
        about = "" if topic == "disparity" else f" ({topic})"
        sentence = (f"{title}{about}: {label(va)} → {label(vb)}{where}" if changed else f"{title}{about}: {label(vb)}{where}")
        rows.append({"family": family, "variant": variant, "topic": topic, "a": va, "b": vb,
                     "rank_a": (x or {}).get("rank"), "rank_b": (y or {}).get("rank"), "groups": groups,
                     "changed": changed, "direction": way, "sentence": sentence})
    order = {"regression": 0, "improvement": 1, "changed": 2, "": 3}
    return sorted(rows, key=lambda r: order[r["direction"]])


# ============================================================================ HTML
_CSS = """
.changed-better,.verdict-improvement{background:#e6f4ea}.changed-worse,.verdict-regression{background:#fce8e6}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:1rem}.cols h4{margin:.4rem 0}
table.compare td{overflow-wrap:anywhere}.data-note{border-left:4px solid #E69F00;padding:.4rem .8rem;background:#fff8e6}
@media (prefers-color-scheme: dark){.changed-better,.verdict-improvement{background:#1e3a28}
.changed-worse,.verdict-regression{background:#44211e}.data-note{background:#3a2f14}}
"""


def _value(value) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "—"
    return f"{value:.4g}"


def _interval(low, high) -> str:
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    return f"[{low:.3g}, {high:.3g}]"


def change_cells(row, names: tuple[str, str]) -> dict[str, str]:
    """One changed value as the page and the HTML show it, in five short columns that need no
    scrolling: where (variant, rank, group), the metric, each audit's value with its interval,
    and the change (relative, better or worse, beyond the intervals or not)."""
    beyond = {True: "beyond the intervals", False: "within the intervals"}.get(row.beyond, "no interval")
    relative = f" ({100 * row.relative:+.1f} %)" if np.isfinite(row.relative) else ""
    change = f"{row.change:+.3g}{relative}" if np.isfinite(row.change) else "—"
    where = f"{variant_title(row.method, row.variant)}, rank {row['rank'] if isinstance(row, pd.Series) else row.rank}, {row.group or 'all groups'}"
    return {
        "where": where,
        "metric": metric_label(row.metric),
        names[0]: _value(row.a) + (f" ({_interval(row.a_low, row.a_high)})" if _interval(row.a_low, row.a_high) else ""),
        names[1]: _value(row.b) + (f" ({_interval(row.b_low, row.b_high)})" if _interval(row.b_low, row.b_high) else ""),
        "change": f"{change}: {row.judged or 'not judged'}, {beyond}",
    }


def _change_rows(rows: pd.DataFrame, names: tuple[str, str]) -> str:
    if rows.empty:
        return '<p class="note">No value of a judged metric changed.</p>'
    body = []
    for r in rows.itertuples(index=False):
        cells = change_cells(r, names)
        css = f' class="changed-{r.judged}"' if r.judged else ""
        body.append(f"<tr{css}>" + "".join(f"<td>{escape(c)}</td>" for c in cells.values()) + "</tr>")
    header = ("where", "metric", names[0], names[1], "change")
    return '<table class="compare"><thead><tr>' + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead>" + "".join(body) + "</table>"


def beyond_intervals(comparison: Comparison, limit: int | None = 10) -> pd.DataFrame:
    """Changed values of judged metrics whose change exceeds the intervals, largest first."""
    return comparison.largest_changes(limit, beyond=True)


def _verdicts_html(comparison: Comparison) -> str:
    verdicts = comparison.verdicts
    if not verdicts:
        return "<h2>Verdicts</h2><p class=\"note\">Neither audit has verdicts to compare (intervals off, or no finding).</p>"
    changed = [v for v in verdicts if v["changed"]]
    head = (f"<p><strong>{len(changed)} of {len(verdicts)} verdicts changed.</strong></p>" if changed
            else f"<p>No verdict changed ({len(verdicts)} compared).</p>")
    rows = "".join(
        f'<tr class="verdict-{v["direction"]}"><td>{escape(v["sentence"])}</td><td>{escape(v["direction"] or "unchanged")}</td></tr>'
        for v in verdicts
    )
    return f'<h2>Verdicts</h2>{head}<table class="compare"><thead><tr><th>finding</th><th>change</th></tr></thead>{rows}</table>'



def comparison_figure(comparison: Comparison, method: str) -> go.Figure | None:
    """The family's headline metrics over rank, each variant in A (dashed, open markers) and B
    (solid), with interval bars where the reports have them; ``None`` when there is nothing to draw."""
    table = comparison.table
    whole = ((table.method == method) & (table.group == "")).to_numpy()  # the whole-data rows first: few
    rows = table[whole]
    rows = rows[~rows.variant.map(is_sweep_variant).to_numpy(bool)]
    metrics = [m for m in HEADLINES.get(method, ()) if m in set(rows.metric)]
    if not metrics:
        return None
    fig = make_subplots(rows=1, cols=len(metrics), subplot_titles=[panel_title(metric_label(m), len(metrics)) for m in metrics],
                        horizontal_spacing=0.08)
    variants = sorted(dict.fromkeys(rows.variant), key=lambda v: v != "vanilla")  # the reference first, as in every chart
    colours = {v: VANILLA_COLOUR if v == "vanilla" else VARIANT_COLOURS[i % len(VARIANT_COLOURS)] for i, v in enumerate(v for v in variants if v != "vanilla")}
    colours["vanilla"] = VANILLA_COLOUR
    for col, metric in enumerate(metrics, start=1):
        part = rows[rows.metric == metric].sort_values("rank")
        for variant in variants:
            line = part[part.variant == variant]
            for side, dash, symbol in (("a", "dash", "circle-open"), ("b", "solid", "circle")):
                values = line[side]
                if values.isna().all():
                    continue
                low, high = line[f"{side}_low"], line[f"{side}_high"]
                error = None
                if np.isfinite(low).any():
                    error = dict(type="data", symmetric=False, array=(high - values).to_numpy(), arrayminus=(values - low).to_numpy(), thickness=1)
                name = comparison.names[0 if side == "a" else 1]
                fig.add_trace(
                    go.Scatter(
                        x=line["rank"].astype(float), y=values, mode="lines+markers", error_y=error,
                        name=safe(f"{variant_title(method, variant)} — {name}"), legendgroup=safe(f"{variant}-{side}"),
                        showlegend=col == 1, line=dict(color=colours.get(variant, VANILLA_COLOUR), dash=dash),
                        marker=dict(symbol=symbol, size=8),
                        hovertemplate=safe(f"{variant} ({name})") + ": %{y:.4g}<extra></extra>",
                    ),
                    row=1, col=col,
                )
        fig.update_xaxes(title_text=safe(rank_title(method)) if col == 1 else "rank", dtick=1 if part["rank"].nunique() <= 12 else None,
                         row=1, col=col)
    title_lines = max([t.text.count("<br>") + 1 for t in fig.layout.annotations] or [1])
    fig.update_annotations(font_size=13)
    fig.update_yaxes(tickformat=TICK_FORMAT, exponentformat="e")
    fig.update_layout(
        title=dict(text=safe(f"{FAMILY_TITLES.get(method, method)}: {comparison.names[0]} (dashed, open) and "
                             f"{comparison.names[1]} (solid)"), x=0.01, yref="container", y=1, yanchor="top", pad=dict(t=14)),
        height=440 + 16 * (title_lines - 1), margin=dict(l=60, r=20, t=70 + 16 * (title_lines - 1), b=110), template="plotly_white",
        legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, xanchor="left"), hovermode="x unified",
    )
    return fig


def _differences_html(comparison: Comparison) -> str:
    if not comparison.differences:
        return "<h2>What differs in the inputs</h2><p>Nothing: the same data and configuration.</p>"
    rows = [(d["what"], d["a"], d["b"]) for d in comparison.differences]
    return "<h2>What differs in the inputs</h2>" + table_html(rows, ("setting", *comparison.names))


def _findings_html(found_a: list[dict], found_b: list[dict], names: tuple[str, str]) -> str:
    if not found_a and not found_b:
        return ""
    def column(name, found):
        sentences = "".join(
            f'<div class="finding"><strong>{escape(VERDICT_LABELS.get(f.get("verdict"), "") or "")}</strong> {escape(f.get("text", ""))}</div>'
            for f in found)
        return f"<div><h4>{escape(name)}</h4>" + (sentences or '<p class="note">no finding</p>') + "</div>"
    return ("<details><summary>Every finding of both audits</summary><div class=\"cols\">" + column(names[0], found_a)
            + column(names[1], found_b) + "</div></details>")


def _family_html(comparison: Comparison, method: str, found_a, found_b) -> str:
    parts = [f"<h2>{escape(FAMILY_TITLES.get(method, method))}</h2>", _findings_html(found_a, found_b, comparison.names)]
    fig = comparison_figure(comparison, method)
    if fig is not None:
        parts.append(figure_html(fig))
    count = len(comparison._judged_changes(method))
    changes = comparison.largest_changes(limit=40 + HTML_ROWS, method=method)
    parts.append(f"<h3>Changed values ({count}, largest relative change first)</h3>" + _change_rows(changes.head(40), comparison.names))
    if count > 40:
        more = changes.iloc[40:]
        parts.append(f"<details><summary>{count - 40} more changed values</summary>{_change_rows(more, comparison.names)}"
                     f"{_cut_note(count - 40, len(more))}</details>")
    return "".join(parts)


def _cut_note(rows: int, shown: int) -> str:
    if rows <= shown:
        return ""
    return f'<p class="note">The first {shown:,} of {rows:,} are shown; the comparison\'s CSV and JSON hold every value.</p>'


def _sources_html(comparison: Comparison) -> str:
    rows = []
    for label, key in (("report created", "created"), ("fairaudit", "fairaudit_version"), ("data", "data"), ("sha256", "sha256"), ("rows", "rows")):
        rows.append((label, *(str(_source(r)[key]) for r in (comparison.a, comparison.b))))
    return "<h2>The two audits</h2>" + table_html(rows, ("", *comparison.names))


def _only_html(comparison: Comparison) -> str:
    only = comparison.table[comparison.table.status.isin(["only in A", "only in B"])]
    if only.empty:
        return ""
    where = {"only in A": comparison.names[0], "only in B": comparison.names[1]}
    rows = [(where[r.status], r.method, r.variant, int(r.rank) if pd.notna(r.rank) else "", r.group or "all", r.metric,
             _value(r.a if r.status == "only in A" else r.b))
            for r in only.head(HTML_ROWS).itertuples(index=False)]
    return (
        f"<h2>Values in one audit only</h2><details><summary>{len(only)} values (variants, ranks, groups or metrics "
        "the other audit does not have)</summary>" + table_html(rows, ("in", "method", "variant", "rank", "group", "metric", "value"))
        + _cut_note(len(only), len(rows)) + "</details>"
    )


def render_html(comparison: Comparison) -> str:
    """The comparison as one self-contained HTML page (plotly.js inline, prints to PDF)."""
    a, b = comparison.names
    found_a, found_b = comparison.findings
    methods = list(dict.fromkeys(comparison.table.method))
    moved = beyond_intervals(comparison)
    c = comparison.counts()
    note = comparison.data_note
    body = (
        f"<h1>Comparison of two audits: {escape(a)} → {escape(b)}</h1>"
        f'<p class="note">Created {escape(comparison.created)} by fairaudit {escape(__version__)}. Findings are matched on '
        "(family, variant, what they judge) and values on (method, variant, rank, group, metric); “better” and “worse” follow "
        "each metric's direction (a loss, gap, error or leakage is better lower); a change exceeds the intervals when the two "
        "intervals do not overlap.</p>"
        + (f'<p class="data-note">{escape(note)}</p>' if note else "")
        + _verdicts_html(comparison)
        + "<h2>Values that moved beyond their intervals</h2>"
        + (_change_rows(moved, comparison.names) if not moved.empty else
           f'<p class="note">{"None" if c["with_interval"] else "No interval in either report, so no change can be told from noise"}; '
           f'{c["changed"]:,} of {c["compared"]:,} values changed ({c["better"]:,} better, {c["worse"]:,} worse by their '
           "metric's direction), per family below.</p>")
        + _sources_html(comparison)
        + _differences_html(comparison)
        + "".join(_family_html(comparison, m, found_a.get(m, []), found_b.get(m, [])) for m in methods)
        + _only_html(comparison)
        + _definitions(comparison)
    )
    return page_html(f"fairaudit comparison: {a} → {b}", body, css=_CSS)


def _definitions(comparison: Comparison) -> str:
    table = comparison.table
    used = [m for m in table.metric[(table.status == "changed").to_numpy()].unique() if m in METRIC_DEFINITIONS]
    if not used:
        return ""
    rows = [(METRIC_DEFINITIONS[m]["title"] + f" ({m})", METRIC_DEFINITIONS[m]["formula"], {"lower": "lower", "higher": "higher"}.get(direction(m), "not judged"))
            for m in used]
    return "<h2>Metrics that changed</h2>" + table_html(rows, ("metric", "definition", "better when"))


def write_comparison(comparison: Comparison, *, html_path=None, json_path=None, csv_path=None) -> list[Path]:
    """Write whichever outputs were asked for; returns the paths written."""
    return write_outputs(comparison, ((html_path, render_html), (json_path, Comparison.json_pieces), (csv_path, Comparison.csv_pieces)))
