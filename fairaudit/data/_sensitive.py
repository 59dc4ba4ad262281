"""Groups from sensitive columns: values, thresholds, quantile bins, and merged sets of values.

Each sensitive column becomes integer codes (-1 where the cell is missing) and group labels
``column=value``. A numeric column is split at a threshold (``binarize``) or cut into quantile
bins (``bins``); any column's values can be merged into named groups (``merge``):

``merge={"EDUCATION": {"high": [1, 2], "low": "*"}}``
    rows whose EDUCATION is 1 or 2 form ``EDUCATION=high``; ``"*"`` stands for every value not
    listed for that column, so all other rows form ``EDUCATION=low`` (Samadi et al.'s credit
    split). Values not covered by any group keep their own label, so
    ``{"race": {"other": ["Asian", "Pacific Islander"]}}`` merges two small categories and
    leaves the rest alone.

Values are compared as they read in the file (``"1"`` and ``1`` and ``1.0`` are the same value
in a numeric column). A listed value that does not occur, a value in two groups, a ``"*"``
that covers nothing, and a merged label that is also a kept value are errors that name them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pyarrow.compute as pc

from ..errors import ParameterError, SensitiveColumnError
from ..vocabulary import term
from ._cells import format_number, looks_numeric, missing_mask
from ._table import RawTable

MAX_CATEGORIES = 12
"""A numeric sensitive column with more distinct values than this must be binarised, binned
or merged (and at most this many quantile bins)."""
MAX_TEXT_GROUPS = 50
"""A text sensitive column with more distinct values than this must be merged."""
REST = "*"
"""In ``merge``, every value of the column that no other group lists."""


def normalise_merge(merge) -> dict[str, dict[str, list[str] | str]]:
    """``merge`` as ``{column: {label: [value text, ...] or "*"}}``, shape-checked."""
    if merge is None:
        return {}
    if not isinstance(merge, Mapping):
        raise ParameterError(
            f"merge must map a sensitive column to {{group label: values}}, e.g. "
            f"{{'EDUCATION': {{'high': [1, 2], 'low': '*'}}}}; got {type(merge).__name__} ({term('merge')})."
        )
    out: dict[str, dict[str, list[str] | str]] = {}
    for column, groups in merge.items():
        if not isinstance(groups, Mapping) or not groups:
            raise ParameterError(
                f"merge for {column!r} must map group labels to values, e.g. {{'high': [1, 2], 'low': '*'}}; got {groups!r}."
            )
        spec: dict[str, list[str] | str] = {}
        for label, values in groups.items():
            label = str(label).strip()
            if not label:
                raise ParameterError(f"merge for {column!r}: a group label is empty; name every merged group.")
            if isinstance(values, str) and values.strip() == REST:
                spec[label] = REST
                continue
            if isinstance(values, str | int | float | np.number):
                values = [values]
            listed = [_value_text(v) for v in values]
            if not listed:
                raise ParameterError(f"merge for {column!r}: group {label!r} lists no values.")
            if REST in listed:
                raise ParameterError(f"merge for {column!r}: {REST!r} stands alone (every value not listed), not inside a list.")
            spec[label] = listed
        if sum(v == REST for v in spec.values()) > 1:
            raise ParameterError(f"merge for {column!r}: only one group can take the rest ({REST!r}).")
        out[str(column)] = spec
    return out


def parse_merge(items) -> dict[str, dict[str, list[str] | str]]:
    """Merge items written ``COLUMN=V1,V2:GROUP`` (``*`` for every value not listed), as the
    CLI's repeatable ``--merge`` and the Data page take them, as ``prepare``'s ``merge``:
    ``["EDUCATION=1,2:high", "EDUCATION=*:low"]`` → ``{"EDUCATION": {"high": ["1", "2"], "low": "*"}}``."""
    merges: dict[str, dict[str, list[str] | str]] = {}
    for item in items or []:
        column, equals, rest = str(item).partition("=")
        values, colon, label = rest.rpartition(":")
        column, values, label = column.strip(), values.strip(), label.strip()
        if not equals or not colon or not column or not values or not label:
            raise ParameterError(f"{term('merge')} expects COLUMN=VALUE1,VALUE2:GROUP (or COLUMN=*:GROUP), got {item!r}.")
        group = merges.setdefault(column, {})
        if label in group:
            raise ParameterError(
                f"{term('merge')} names group {label!r} of {column!r} twice; list its values once (VALUE1,VALUE2,…)."
            )
        group[label] = REST if values == REST else [v.strip() for v in values.split(",") if v.strip()]
    return merges


def _value_text(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float | np.number):
        if not math.isfinite(float(value)):
            raise ParameterError(f"merge values must be finite; got {value!r}.")
        return format_number(float(value))
    return str(value).strip()


def _merge_codes(column: str, values: list[str], sizes: np.ndarray, spec: dict, log: list[str]) -> tuple[np.ndarray, list[str]]:
    """Map the column's distinct ``values`` (display text) to merged labels: per value, the
    index of its output label, and the output labels (merged groups first, in ``spec`` order,
    then the values kept as they are)."""
    position = {v: i for i, v in enumerate(values)}
    numeric = all(looks_numeric(v) for v in values)
    assigned: dict[int, str] = {}
    for label, listed in spec.items():
        if listed == REST:
            continue
        for text in listed:
            key = format_number(float(text)) if numeric and looks_numeric(text) else text
            if key not in position:
                shown = ", ".join(values[:20]) + (" …" if len(values) > 20 else "")
                raise ParameterError(
                    f"merge for {column!r}: value {text!r} does not occur in the column (its values: {shown}) ({term('merge')})."
                )
            index = position[key]
            if index in assigned and assigned[index] != label:
                raise ParameterError(
                    f"merge for {column!r}: value {text!r} is in two groups, {assigned[index]!r} and {label!r}; put it in one."
                )
            assigned[index] = label
    rest = next((label for label, listed in spec.items() if listed == REST), None)
    if rest is not None:
        left = [i for i in range(len(values)) if i not in assigned]
        if not left:
            raise ParameterError(f"merge for {column!r}: {REST!r} ({rest!r}) covers no value — every value is already listed.")
        for i in left:
            assigned[i] = rest
    labels = [label for label in spec if label in assigned.values()]
    kept = [v for i, v in enumerate(values) if i not in assigned]
    clash = sorted(set(labels) & set(kept))
    if clash:
        raise ParameterError(
            f"merge for {column!r}: the group label {clash[0]!r} is also a value of the column that is not merged; "
            "choose another label or merge that value into it."
        )
    outputs = labels + kept
    index = {label: i for i, label in enumerate(outputs)}
    mapping = np.array([index[assigned.get(i, v)] for i, v in enumerate(values)], dtype=np.int64)
    parts = []
    for label in labels:
        members = [values[i] for i in range(len(values)) if assigned.get(i) == label]
        parts.append(f"{label} = {', '.join(members)} ({int(sizes[mapping == index[label]].sum()):,} rows)")
    log.append(f"merged values of {column!r} into groups: {'; '.join(parts)}")
    return mapping, outputs


def value_codes(table: RawTable, column: str, *, numbers_as_text: bool = True) -> tuple[np.ndarray, list]:
    """Per row, the index of its value among the column's distinct present values (-1 where
    missing), and those values as text (numbers in numeric order, text sorted).

    ``numbers_as_text=False`` leaves a numeric column's values as floats: a partition's values,
    whose order and labels are decided once every partition is seen (:mod:`fairaudit.engine`)."""
    if table.is_numeric(column):
        values = table.numbers(column)
        missing = np.isnan(values)
        distinct = np.unique(values[~missing])
        codes = np.full(values.size, -1, dtype=np.int64)
        codes[~missing] = np.searchsorted(distinct, values[~missing])
        return codes, [format_number(v) for v in distinct] if numbers_as_text else distinct.tolist()
    strings = table.strings(column)
    encoded = pc.dictionary_encode(strings).combine_chunks()
    dictionary = encoded.dictionary.to_pylist()
    indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    missing_entry = missing_mask(encoded.dictionary)
    order = sorted((v for v, m in zip(dictionary, missing_entry, strict=True) if not m))
    rank = {v: i for i, v in enumerate(order)}
    remap = np.array([-1 if m else rank[v] for v, m in zip(dictionary, missing_entry, strict=True)], dtype=np.int64)
    return (remap[indices] if len(remap) else np.full(len(indices), -1, dtype=np.int64)), order


def value_counts(table: RawTable, column: str) -> tuple[list[str], np.ndarray]:
    """The column's distinct present values as ``merge`` names them (numbers in numeric order,
    text sorted) and the number of rows holding each (the Data page's merge control)."""
    codes, values = value_codes(table, column)
    return values, np.bincount(codes[codes >= 0], minlength=len(values))


def sensitive_codes(
    table: RawTable,
    column: str,
    *,
    binarize: Mapping[str, float],
    bins: Mapping[str, int],
    merge: Mapping[str, dict],
    log: list[str],
) -> tuple[np.ndarray, list[str]]:
    """Per row, the index of its group label for sensitive ``column`` (-1 where missing), and
    the labels (``column=value``)."""
    if column in binarize or column in bins:
        return _numeric_groups(table, column, binarize, bins, log)
    codes, values = value_codes(table, column)
    numeric = table.is_numeric(column)
    sizes = np.bincount(codes[codes >= 0], minlength=len(values))
    return grouped_values(column, codes, values, sizes, numeric=numeric, merge=merge, log=log)


def grouped_values(
    column: str, codes: np.ndarray, values: list[str], sizes: np.ndarray, *, numeric: bool, merge: Mapping[str, dict], log: list[str]
) -> tuple[np.ndarray, list[str]]:
    """Group labels (``column=value``) from a column's distinct ``values`` (as :func:`value_codes`
    orders them) with their row counts ``sizes``: values merged as ``merge`` says, and the limit
    on the number of groups. ``codes`` index ``values`` (-1 where missing) — per row, or per
    distinct key of a partitioned data set (:mod:`fairaudit.engine`), which is why the sizes are
    given rather than counted."""
    distinct = values
    if column in merge:
        mapping, values = _merge_codes(column, values, sizes, merge[column], log)
        codes = np.where(codes >= 0, mapping[np.maximum(codes, 0)], -1)
    limit = MAX_CATEGORIES if numeric else MAX_TEXT_GROUPS
    if len(values) > limit:
        if numeric:
            example = format_number(float(np.median([float(v) for v in distinct])))
            raise SensitiveColumnError(
                f"sensitive column {column!r} is numeric with {len(values)} distinct values, too many to use as groups; "
                f"binarise it ({term('binarize', f'{column}={example}')}), cut it into quantile bins "
                f"({term('bins', f'{column}=4')}) or merge values into groups ({term('merge', column)})."
            )
        raise SensitiveColumnError(
            f"sensitive column {column!r} has {len(values)} distinct values; a group needs many rows, so choose a "
            f"column with a few categories (or merge categories first: {term('merge', column)})."
        )
    return codes, [f"{column}={v}" for v in values]


def _numeric_groups(table, column, binarize, bins, log) -> tuple[np.ndarray, list[str]]:
    parsed = table.parsed(column)
    if not parsed.is_numeric:
        row = int(np.flatnonzero(parsed.bad)[0])
        raise SensitiveColumnError(
            f"sensitive column {column!r} has text {table.cell(column, row)!r} at {table.where(row)}, so it cannot be "
            "binarised or binned by number; use it as categories instead."
        )
    values, missing = parsed.values, parsed.missing
    codes = np.full(values.size, -1, dtype=np.int64)
    if column in binarize:
        threshold = float(binarize[column])
        below, above = f"{column}<{format_number(threshold)}", f"{column}>={format_number(threshold)}"
        codes[~missing] = (values[~missing] >= threshold).astype(np.int64)
        log.append(f"sensitive {column!r} binarised at {format_number(threshold)}")
        return codes, [below, above]
    n_bins = int(bins[column])
    edges = np.unique(np.nanquantile(values[~missing], np.linspace(0, 1, n_bins + 1))) if (~missing).any() else np.zeros(1)
    if len(edges) < 3:
        raise SensitiveColumnError(
            f"sensitive column {column!r} has too few distinct values for {n_bins} quantile bins; "
            "use its values as categories."
        )
    codes[~missing] = np.clip(np.searchsorted(edges, values[~missing], side="right") - 1, 0, len(edges) - 2)
    labels = _bin_labels(column, edges)
    made = len(labels)
    log.append(
        f"sensitive {column!r} cut into {made} quantile bins"
        + (f" ({n_bins} asked for; the other quantiles coincide)" if made < n_bins else "")
    )
    return codes, labels


def _bin_labels(column: str, edges: np.ndarray) -> list[str]:
    """``column∈[lo, hi)`` for each bin, with as many digits as it takes to tell edges apart."""
    for digits in (6, 8, 10, 12, 15, 17):
        shown = [format_number(e) if digits == 6 else f"{e:.{digits}g}" for e in edges]
        if len(set(shown)) == len(shown):
            break
    else:  # pragma: no cover - distinct doubles always differ at 17 significant digits
        raise SensitiveColumnError(f"the quantile bins of {column!r} cannot be told apart; use fewer ({term('bins', f'{column}=N')}).")
    last = len(edges) - 2
    return [f"{column}∈[{shown[i]}, {shown[i + 1]}{']' if i == last else ')'}" for i in range(len(edges) - 1)]
