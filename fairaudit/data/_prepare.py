"""``prepare``: a raw table to validated :class:`AuditData`, every row and column accounted for."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from ..errors import (
    MissingValueError,
    NoFeaturesError,
    ParameterError,
    SensitiveColumnError,
    UnknownColumnError,
)
from ..groups import GroupCodes, check_groups, encode_groups
from ..vocabulary import term
from ._accounting import DROP_REASONS, group_entries, large_drop_warning, unequal_drop_warning
from ._audit_data import AuditData
from ._cells import format_number
from ._memory import read_only
from ._roles import FeatureColumns, select_features
from ._scaling import check_scaling, robust_fill
from ._sensitive import MAX_CATEGORIES, normalise_merge, sensitive_codes, value_codes
from ._table import RawTable

MISSING_POLICIES = ("error", "drop", "mean", "median")
SMALL_GROUP_POLICIES = ("error", "drop")
_REASON = {reason: i + 1 for i, reason in enumerate(DROP_REASONS)}


# ---------------------------------------------------------------------------- checks
def suggest(name: str, columns: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(columns), n=3, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in columns}
        close = [lowered[name.lower()]] if name.lower() in lowered else []
    return f" Did you mean {', '.join(map(repr, close))}?" if close else ""


def require_columns(table: RawTable, names: Iterable[str], role: str) -> None:
    for col in names:
        if col not in table.columns:
            shown = ", ".join(map(repr, table.columns[:12])) + (" …" if len(table.columns) > 12 else "")
            raise UnknownColumnError(
                f"{role} column {col!r} is not in {table.name}.{suggest(col, table.columns)} Columns are: {shown}."
            )


SENSITIVE_WORDS = ("sex", "gender", "race", "ethnicity", "ethnic", "religion", "nationality", "disability", "age", "marital")


def likely_sensitive(table: RawTable) -> str | None:
    """A column of ``table`` a user would likely audit by, for an example in a message: one whose
    name is a protected attribute's (``sex``, ``race``, …), else the first text column with 2–10
    values; None when neither exists (a message never names a column the file does not have)."""
    for word in SENSITIVE_WORDS:
        for column in table.columns:
            if word in re.findall(r"[a-z]+", column.lower()):
                return column
    for column in table.columns:
        if not table.is_numeric(column) and 2 <= pc.count_distinct(table.strings(column)).as_py() <= 10:
            return column
    return None


def check_group_options(
    table: RawTable, sensitive, binarize, bins, merge, min_group_size, small_groups
) -> tuple[list[str], dict, dict, dict]:
    """The sensitive columns and their binarize/bins/merge options, validated (shared by
    :func:`prepare` and :func:`~fairaudit.data.prepare_tensor`)."""
    sensitive = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    if not sensitive:
        example = likely_sensitive(table)
        raise SensitiveColumnError(
            "choose at least one sensitive column: the column whose values are the groups"
            + (f" (e.g. {term('sensitive', example)})." if example else f" ({term('sensitive')}).")
        )
    binarize, bins, merge = dict(binarize or {}), dict(bins or {}), normalise_merge(merge)
    require_columns(table, sensitive, "sensitive")
    require_columns(table, list(binarize) + list(bins) + list(merge), "binarised/binned/merged")
    for col in list(binarize) + list(bins) + list(merge):
        if col not in sensitive:
            raise ParameterError(f"{col!r} is binarised/binned/merged but not a sensitive column; add it to {term('sensitive')}.")
    for col in set(binarize) | set(bins) | set(merge):
        if (col in binarize) + (col in bins) + (col in merge) > 1:
            raise ParameterError(
                f"sensitive column {col!r} is given more than one way to make groups; keep one of "
                f"{term('binarize', f'{col}=VALUE')}, {term('bins', f'{col}=N')} and {term('merge', col)}."
            )
    for col, threshold in binarize.items():
        try:
            value = float(threshold)
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            raise ParameterError(f"the threshold for {col!r} must be a finite number; got {threshold!r} ({term('binarize', f'{col}=VALUE')}).")
        binarize[col] = value
    for col, n_bins in bins.items():
        if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) and not (isinstance(n_bins, float) and n_bins.is_integer()):
            raise ParameterError(f"bins for {col!r} must be a whole number; got {n_bins!r}.")
        n_bins = int(n_bins)
        if n_bins < 2:
            raise ParameterError(f"bins for {col!r} must be >= 2, got {n_bins}.")
        if n_bins > MAX_CATEGORIES:
            raise ParameterError(
                f"bins for {col!r} must be at most {MAX_CATEGORIES} (a group needs many rows); got {n_bins} ({term('bins', f'{col}=4')})."
            )
        bins[col] = n_bins
    if isinstance(min_group_size, bool) or not isinstance(min_group_size, int | np.integer) or min_group_size < 1:
        raise ParameterError(f"min_group_size must be >= 1; got {min_group_size}.")
    if small_groups not in SMALL_GROUP_POLICIES:
        raise ParameterError(f"small_groups must be 'error' or 'drop'; got {small_groups!r}.")
    return sensitive, binarize, bins, merge


def _check_roles(table, sensitive, features, label, ignore) -> list[str] | None:
    require_columns(table, ignore, "ignored")
    if label is not None:
        require_columns(table, [label], "label")
    if features is not None:
        features = list(features)
        if not features:
            raise NoFeaturesError(f"the feature list is empty; name at least one feature column or omit {term('features')}.")
        require_columns(table, features, "feature")
        for col in features:
            role = "sensitive" if col in sensitive else "the label" if col == label else "ignored" if col in ignore else None
            if role:
                raise ParameterError(
                    f"column {col!r} is both a feature and {role}; a sensitive attribute, label or "
                    "ignored column is never a feature. Remove it from the features."
                )
        if len(set(features)) != len(features):
            dup = next(c for c in features if features.count(c) > 1)
            raise ParameterError(f"feature {dup!r} is listed twice.")
    if label is not None and label in sensitive:
        raise ParameterError(f"column {label!r} cannot be both the label and sensitive.")
    return features


def _check_use_id_like(table, use_id_like, features, sensitive, label, ignore) -> list[str]:
    use_id_like = [use_id_like] if isinstance(use_id_like, str) else list(use_id_like)
    if not use_id_like:
        return []
    require_columns(table, use_id_like, "ID-like")
    if features is not None:
        raise ParameterError(
            f"{term('use_id_like')} adds to the default features; with the features chosen ({term('features')}), "
            f"list {use_id_like[0]!r} among them instead."
        )
    for col in use_id_like:
        role = "sensitive" if col in sensitive else "the label" if col == label else "ignored" if col in ignore else None
        if role:
            raise ParameterError(f"column {col!r} is both kept as a feature ({term('use_id_like', col)}) and {role}; choose one.")
    return use_id_like


def _fixed_roles(sensitive, label, ignore, binarize, bins, merge) -> dict[str, tuple[str, str]]:
    roles = {}
    for col in sensitive:
        how = (
            f"split at {format_number(binarize[col])}" if col in binarize
            else f"cut into {bins[col]} quantile bins" if col in bins
            else "values merged into groups" if col in merge
            else "its values are the groups"
        )
        roles[col] = ("sensitive", f"defines the groups ({how}); never a feature")
    if label is not None:
        roles[label] = ("label", "ground truth for clustering accuracy; never a feature")
    for col in ignore:
        roles[col] = ("ignored", f"left out on request ({term('ignore')})")
    return roles


def describe_missing(table: RawTable, names: list[str], masks: list[np.ndarray]) -> str:
    counts = [int(mask.sum()) for mask in masks]
    firsts = [f"{table.line_word} {table.line_of(int(np.argmax(mask)))}" if n else "" for mask, n in zip(masks, counts, strict=True)]
    return missing_summary(names, counts, firsts)


def missing_summary(names: list[str], counts: list[int], firsts: list[str]) -> str:
    """``'age' (3 rows, first at line 17), …``: the columns with missing cells, at most six."""
    parts = [
        f"{name!r} ({count} row{'s' if count != 1 else ''}, first at {first})"
        for name, count, first in zip(names, counts, firsts, strict=True)
        if count
    ]
    return ", ".join(parts[:6]) + (" …" if len(parts) > 6 else "")


# ---------------------------------------------------------------------------- groups
def encode_read_groups(sensitive: list[str], per_column: list[tuple[np.ndarray, list[str]]]) -> tuple[np.ndarray, GroupCodes | None]:
    """Groups of every row read that has all its sensitive values: per row, the group code
    (-1 without a complete group value) and the groups."""
    complete = np.logical_and.reduce([codes >= 0 for codes, _ in per_column])
    read_codes = np.full(complete.size, -1, dtype=np.intp)
    if not complete.any():
        return read_codes, None
    frame = pd.DataFrame(
        {col: pd.Categorical.from_codes(codes[complete], categories=labels) for col, (codes, labels) in zip(sensitive, per_column, strict=True)}
    )
    groups = encode_groups(frame)
    read_codes[complete] = groups.codes
    return read_codes, groups


def drop_small_groups(
    read_codes: np.ndarray, labels: tuple[str, ...], reasons: np.ndarray, min_size: int, small_groups: str, unit: str, log: list[str],
    weights: np.ndarray | None = None,
) -> None:
    """With ``small_groups="drop"``: mark the rows of groups with fewer than ``min_size`` kept
    rows as dropped (reason ``small group``), and log it. ``weights``: rows per entry (as in
    :func:`~fairaudit.data._accounting.group_entries`)."""
    if small_groups != "drop":
        return
    kept = reasons == 0
    chosen = kept & (read_codes >= 0)
    sizes = np.rint(np.bincount(read_codes[chosen], weights=None if weights is None else weights[chosen], minlength=len(labels))).astype(np.int64)
    small = [g for g, n in enumerate(sizes) if 0 < n < min_size]
    if small:
        reasons[kept & np.isin(read_codes, small)] = _REASON["small group"]
        dropped = ", ".join(f"{labels[g]!r} ({int(sizes[g])})" for g in small)
        log.append(f"dropped groups below {min_size} {unit}: {dropped}")


def _count(n: int, unit: str) -> str:
    """``"1 row"``, ``"27 rows"``, ``"1 entity"``."""
    return f"{n:,} {unit}" if n != 1 else f"1 {ONE.get(unit, unit)}"


ONE = {"rows": "row", "entities": "entity"}


def group_warnings(entries: list[dict], min_size: int, unit: str) -> list[str]:
    """Warnings about groups: a much larger share dropped from one, groups gone from the audit."""
    warnings = []
    unequal = unequal_drop_warning(entries, unit)
    if unequal:
        warnings.append(unequal)
    elif large := large_drop_warning(entries, unit):
        warnings.append(large)
    for entry in entries:
        if entry["group"] == "(no group value)":
            warnings.append(f"{entry['rows_read']:,} {unit} have no value in a sensitive column and are not in the audit.")
        elif entry["rows_used"] == 0 and entry["dropped"].get("small group"):
            warnings.append(
                f"group {entry['group']} is not in the audit: its {_count(entry['dropped']['small group'], unit)} "
                f"{'is' if entry['dropped']['small group'] == 1 else 'are'} fewer than "
                f"the minimum group size, {min_size} ({term('min_group_size')}), and groups below it are dropped "
                f"({term('small_groups', 'drop')})."
            )
        elif entry["rows_used"] == 0:
            warnings.append(f"group {entry['group']} is not in the audit: every one of its {entry['rows_read']:,} {unit} was dropped.")
    return warnings


# ---------------------------------------------------------------------------- the matrix
def _take(table: RawTable, chosen: FeatureColumns, rows: np.ndarray | None, reuse_table: bool) -> np.ndarray:
    """The feature matrix (Fortran order). When every row is kept and the features are numeric
    columns of the table's block: a read-only view — of the block as it is when the features are
    adjacent, or of the block rearranged in place when ``reuse_table`` hands the table over.
    Otherwise a new array with the chosen rows and columns."""
    if rows is None and chosen.plain_numeric():
        view = table.adjacent_block(chosen.names)
        if view is None and reuse_table:
            view = table.hand_over(chosen.names)
        if view is not None:
            return view
    n = table.n_rows if rows is None else int(rows.sum())
    X = np.empty((n, len(chosen.values)), order="F")
    for j, values in enumerate(chosen.values):
        X[:, j] = values if rows is None else values[rows]
    return X


CONSTANT_PROBE = 64
"""Cells at the head of a complete column that :func:`_drop_constant_features` looks at first."""


def _varies(cells: np.ndarray) -> bool:
    return cells.size > 1 and bool((cells[1:] != cells[0]).any())


def _drop_constant_features(chosen: FeatureColumns, keep: np.ndarray, log: list[str], missing: list[np.ndarray] | None = None) -> None:
    """Leave out the features with one value on the kept rows (missing cells aside). ``missing``:
    each feature's missing cells over every row, when known (:func:`_missing_masks`), so that a
    column with holes is not searched for them again."""
    gone = []
    every_row = keep.all()
    for j, (name, values) in enumerate(zip(chosen.names, chosen.values, strict=True)):
        column = values if every_row else values[keep]
        complete = chosen.missing.get(name) == 0
        if complete and _varies(column[:CONSTANT_PROBE]):
            continue  # two different values among the first cells: not constant, no pass over the column
        if complete:
            holes = None
        elif missing is None:
            holes = np.isnan(column)
        else:
            holes = missing[j] if every_row else missing[j][keep]
        present = column[~holes] if holes is not None and holes.any() else column
        if present.size and present.min() == present.max():
            gone.append(j)
            chosen.exclude(chosen.names[j], "constant", f"the same value ({format_number(present[0])}) on every row kept")
    if not gone:
        return
    names = [chosen.names[j] for j in gone]
    log.append(f"left out constant feature(s): {', '.join(map(repr, names[:10]))}{' …' if len(names) > 10 else ''}")
    if len(gone) == len(chosen.names):
        raise NoFeaturesError("every feature is constant over the kept rows; nothing varies to analyse.")
    for j in reversed(gone):
        del chosen.names[j], chosen.values[j], chosen.sources[j]


def _missing_masks(columns: list[np.ndarray], n_rows: int, counts: list[int | None]) -> tuple[list[np.ndarray], np.ndarray]:
    """Per column, which cells are missing, and which rows miss any. Columns without a missing
    cell share one all-false mask (20 masks of 1,000,000 rows were 20 MB held through
    :func:`prepare` for nothing); a column the reader counted none in is not scanned."""
    none = np.zeros(n_rows, dtype=bool)
    masks, any_missing = [], none
    for values, count in zip(columns, counts, strict=True):
        mask = none if count == 0 else np.isnan(values)
        if mask is not none and mask.any():
            masks.append(mask)
            any_missing = any_missing | mask
        else:
            masks.append(none)
    return masks, any_missing


# ---------------------------------------------------------------------------- prepare
def prepare(
    table: RawTable,
    *,
    sensitive: str | Sequence[str],
    features: Sequence[str] | None = None,
    label: str | None = None,
    ignore: Sequence[str] = (),
    one_hot: bool = False,
    binarize: Mapping[str, float] | None = None,
    bins: Mapping[str, int] | None = None,
    merge: Mapping[str, Mapping] | None = None,
    missing: str = "error",
    scaling: str = "standardize",
    min_group_size: int = 2,
    small_groups: str = "error",
    use_id_like: Sequence[str] = (),
    reuse_table: bool = False,
) -> AuditData:
    """Validate a :class:`RawTable` for an audit and return :class:`AuditData`.

    Parameters
    ----------
    sensitive : str or list of str
        Sensitive column(s). Values are groups; several columns give intersectional groups.
    features : list of str, optional
        Feature columns. Default: every numeric column that is not sensitive, the label,
        ignored, empty, or an identifier (see :mod:`fairaudit.data._roles`). A column named
        here is used as it is.
    label : str, optional
        Ground-truth column (clustering accuracy); never a feature.
    ignore : list of str
        Columns to leave out.
    one_hot : bool
        One-hot encode text (categorical) feature columns instead of leaving them out.
    binarize : {column: threshold}
        Numeric sensitive columns split into ``< threshold`` and ``>= threshold``.
    bins : {column: n_bins}
        Numeric sensitive columns cut into quantile bins (2 to 12).
    merge : {column: {group label: values or "*"}}
        Values of a sensitive column merged into named groups, e.g.
        ``{"EDUCATION": {"high": [1, 2], "low": "*"}}`` (``"*"``: every value not listed;
        unlisted values otherwise keep their own group). See :mod:`fairaudit.data._sensitive`.
    missing : {"error", "drop", "mean", "median"}
        Missing cells: stop with a message (default), drop the rows (counts per group are in
        ``accounting``), or impute feature cells with the column mean/median (rows missing a
        group or label are dropped).
    scaling : {"standardize", "center", "none", "unit_norm"}
    min_group_size : int
        Fewest rows a group may have (default 2).
    small_groups : {"error", "drop"}
        What to do with groups below ``min_group_size``.
    use_id_like : list of str
        Columns the identifier rules flag (``id_like``) that are features all the same, kept
        with the default features (with ``features`` given, list them there instead). The
        accounting warns that each looks like an identifier.
    reuse_table : bool
        Hand the table over: when the features are numeric columns that are not adjacent in the
        file, rearrange the table's memory in place so the matrix is a view of it rather than a
        copy (peak memory ~1× the numbers instead of 2×), and let go of the table's other
        columns. The table cannot be used afterwards;
        :func:`load` and the command line do this, the dashboard (which prepares one table
        several times) does not.

    Returns
    -------
    AuditData
        With ``accounting``: rows read and used per group and why rows were dropped, the
        features used, every column left out with its reason, and warnings (e.g. when dropping
        rows removed a much larger share of one group than of another).
    """
    if missing not in MISSING_POLICIES:
        raise ParameterError(f"missing must be one of {', '.join(MISSING_POLICIES)}; got {missing!r}.")
    if small_groups not in SMALL_GROUP_POLICIES:
        raise ParameterError(f"small_groups must be 'error' or 'drop'; got {small_groups!r}.")
    if isinstance(min_group_size, bool) or not isinstance(min_group_size, int | np.integer) or min_group_size < 1:
        raise ParameterError(f"min_group_size must be >= 1; got {min_group_size}.")
    check_scaling(scaling)
    sensitive, binarize, bins, merge = check_group_options(table, sensitive, binarize, bins, merge, min_group_size, small_groups)
    ignore = list(ignore)
    features = _check_roles(table, sensitive, features, label, ignore)
    use_id_like = _check_use_id_like(table, use_id_like, features, sensitive, label, ignore)

    log: list[str] = list(table.log)
    roles = _fixed_roles(sensitive, label, ignore, binarize, bins, merge)
    chosen = select_features(table, features, roles, one_hot, log, use_id_like)
    for entry in chosen.excluded:
        if entry["column"] in use_id_like:
            raise ParameterError(
                f"column {entry['column']!r} is left out as {entry['reason']} ({entry['detail']}), not as an identifier; "
                f"{term('use_id_like')} keeps only numeric columns flagged ID-like."
            )
    if not chosen.names:
        excluded = sorted(set(sensitive) | set(ignore) | ({label} if label else set()))
        raise NoFeaturesError(
            f"no numeric feature columns are left in {table.name} after excluding {', '.join(map(repr, excluded))}; "
            f"choose feature columns ({term('features')}) or enable one-hot encoding ({term('one_hot', True)})."
        )

    # --- groups and label, per row read
    per_column = [sensitive_codes(table, col, binarize=binarize, bins=bins, merge=merge, log=log) for col in sensitive]
    group_missing = np.logical_or.reduce([codes < 0 for codes, _ in per_column])
    label_codes, label_values = value_codes(table, label) if label is not None else (None, [])
    label_missing = label_codes < 0 if label_codes is not None else np.zeros(table.n_rows, dtype=bool)

    # --- missing cells
    feature_missing, any_feature_missing = _missing_masks(chosen.values, table.n_rows, [chosen.missing.get(n) for n in chosen.names])
    reasons = np.zeros(table.n_rows, dtype=np.int8)
    if any_feature_missing.any() or group_missing.any() or label_missing.any():
        names = list(chosen.names) + sensitive + ([label] if label else [])
        masks = feature_missing + [codes < 0 for codes, _ in per_column] + ([label_missing] if label else [])
        if missing == "error":
            total = int((any_feature_missing | group_missing | label_missing).sum())
            raise MissingValueError(
                f"{total} row(s) have missing cells: {describe_missing(table, names, masks)}. Choose {term('missing', 'drop')} "
                f"to drop those rows, or {term('missing', 'mean')} / {term('missing', 'median')} to impute feature cells."
            )
        reasons[label_missing] = _REASON["no label"]
        reasons[group_missing] = _REASON["no group value"]
        if missing == "drop":
            reasons[(reasons == 0) & any_feature_missing] = _REASON["missing cells"]
            log.append(f"dropped {int((reasons > 0).sum())} row(s) with missing cells: {describe_missing(table, names, masks)}")
        else:
            if (reasons > 0).any():
                roles_missing = masks[len(chosen.names):]
                log.append(
                    f"dropped {int((reasons > 0).sum())} row(s) with no group or label value: "
                    f"{describe_missing(table, names[len(chosen.names):], roles_missing)}"
                )
            if any_feature_missing.any():
                log.append(
                    f"imputed missing feature cells with the column {missing}: "
                    f"{describe_missing(table, list(chosen.names), feature_missing)}"
                )
    if not (reasons == 0).any():
        raise MissingValueError(f"no rows of {table.name} are left after dropping rows with missing cells.")

    # --- groups of the rows read, small groups
    read_codes, read_groups = encode_read_groups(sensitive, per_column)
    read_labels = read_groups.labels if read_groups is not None else ()
    drop_small_groups(read_codes, read_labels, reasons, min_group_size, small_groups, "rows", log)
    keep = reasons == 0
    groups = GroupCodes(read_codes[keep], read_labels).without_empty()
    check_groups(groups, min_size=min_group_size, what=f"sensitive column(s) {', '.join(map(repr, sensitive))}")

    # --- the matrix
    _drop_constant_features(chosen, keep, log, feature_missing)
    X = _take(table, chosen, None if keep.all() else keep, reuse_table)
    if missing in ("mean", "median") and any_feature_missing[keep].any():
        X = np.array(X, order="F")
        fill = robust_fill(X, missing)
        if np.isnan(fill).any():
            empty = [n for n, f in zip(chosen.names, fill, strict=True) if np.isnan(f)]
            raise MissingValueError(
                f"feature(s) {', '.join(map(repr, empty[:5]))} have no value on the rows kept, so there is nothing to "
                f"impute from; leave them out ({term('ignore')})."
            )
        holes = np.isnan(X)
        X[holes] = np.take(fill, np.nonzero(holes)[1])
    names = list(chosen.names)
    log.append(f"scaling: {scaling}")

    entries = group_entries(read_codes, list(read_labels), reasons)
    accounting = {
        "unit": "rows",
        "rows_read": int(table.n_rows),
        "rows_used": int(keep.sum()),
        "groups": entries,
        "features": names,
        "excluded": chosen.excluded,
        "warnings": chosen.warnings + group_warnings(entries, min_group_size, "rows"),
    }
    label_array = None
    if label_codes is not None:
        label_array = np.asarray(label_values, dtype=str)[label_codes[keep]] if label_values else np.array([], dtype=str)
    lines = table.lines if keep.all() else table.lines[keep]
    source = table_source(table)
    if reuse_table:  # handed over: the table's text columns and parsing buffers are not needed again
        table.spend()
    return AuditData(
        X_raw=read_only(X),
        feature_names=tuple(names),
        groups=groups,
        sensitive=tuple(sensitive),
        scaling=scaling,
        label=label_array,
        label_name=label,
        lines=lines,
        source=source,
        log=tuple(log),
        accounting=accounting,
    )


def table_source(table: RawTable) -> dict:
    """Provenance of a prepared table: file name, hash, size, format, encoding, delimiter."""
    return {
        "name": table.name,
        "sha256": table.sha256,
        "bytes": table.n_bytes,
        "format": table.format,
        "encoding": table.encoding,
        "delimiter": table.delimiter,
        "rows_read": table.n_rows,
        "line_word": table.line_word,
    }
