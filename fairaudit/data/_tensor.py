"""Tensors: a long-format table (one line per cell) or an array to tensor :class:`AuditData`.

``X_raw`` is the mode-1 unfolding (entities × cells of the other modes, last mode fastest),
groups are per entity, and :meth:`AuditData.tensor` refolds it. When the lines do not define a
tensor, the error says which line and, where the cause is likely a column order or a column
left out of the index, says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import (
    DuplicateCellError,
    EmptyFileError,
    FairAuditError,
    MissingCellError,
    MissingValueError,
    NonNumericColumnError,
    ParameterError,
    SensitiveColumnError,
)
from ..groups import GroupCodes, check_groups, encode_groups
from ..vocabulary import term
from ._accounting import group_entries, whole_accounting
from ._audit_data import AuditData, _array_sha256
from ._prepare import (
    check_group_options,
    drop_small_groups,
    encode_read_groups,
    group_warnings,
    require_columns,
    table_source,
)
from ._scaling import check_scaling
from ._sensitive import sensitive_codes, value_codes
from ._table import RawTable

TENSOR_LEVEL_SEPARATOR = "|"
MAX_TENSOR_CELLS = 100_000_000
"""Largest dense tensor built from a long-format table (800 MB of float64)."""


def _tensor_feature_names(modes: Sequence[str], levels: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """Names of the unfolding's columns: ``item=a|context=x`` (last mode fastest)."""
    names = [""]
    for mode, labels in zip(modes[1:], levels[1:], strict=True):
        names = [f"{prefix}{TENSOR_LEVEL_SEPARATOR if prefix else ''}{mode}={label}" for prefix in names for label in labels]
    return tuple(names)


def tensor_from_arrays(
    X,
    sensitive_features,
    *,
    modes: Sequence[str] | None = None,
    levels: Sequence[Sequence[str]] | None = None,
    scaling: str = "none",
    min_group_size: int = 2,
    name: str = "tensor",
) -> AuditData:
    """Validated tensor :class:`AuditData` from an array of shape ``(n_entities, d_1, …)``.

    ``sensitive_features`` has one value per entity (mode 0). The default scaling is ``"none"``:
    a tensor's cells share one unit, and the CP family fits the values as they are.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim < 2:
        raise FairAuditError(f"a tensor needs at least two modes (entities × …), got shape {X.shape}.")
    if X.size == 0:
        raise EmptyFileError(f"the tensor is empty (shape {X.shape}).")
    if not np.isfinite(X).all():
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(X))[0])
        raise MissingValueError(f"the tensor has a missing or infinite value at index {where}; fill it first.")
    modes = tuple(modes) if modes is not None else tuple(f"mode{m + 1}" for m in range(X.ndim))
    if len(modes) != X.ndim:
        raise FairAuditError(f"{len(modes)} mode names for a {X.ndim}-way tensor.")
    if levels is None:
        levels = [[str(i) for i in range(d)] for d in X.shape]
    levels = tuple(tuple(map(str, labels)) for labels in levels)
    if tuple(len(labels) for labels in levels) != X.shape:
        raise FairAuditError(f"level labels of lengths {[len(v) for v in levels]} do not match the shape {X.shape}.")
    groups = encode_groups(sensitive_features, n_rows=X.shape[0])
    check_groups(groups, min_size=min_group_size)
    check_scaling(scaling)
    flat = np.ascontiguousarray(X.reshape(X.shape[0], -1))
    sens_name = getattr(sensitive_features, "name", None)
    accounting = whole_accounting(groups, [], unit="entities")
    return AuditData(
        X_raw=flat,
        feature_names=_tensor_feature_names(modes, levels),
        groups=groups,
        sensitive=(str(sens_name or "group"),),
        scaling=scaling,
        source={"name": name, "sha256": _array_sha256(flat, groups.codes), "rows_read": X.shape[0]},
        log=(f"tensor of shape {' × '.join(map(str, X.shape))} ({' × '.join(modes)})", f"scaling: {scaling}"),
        tensor_shape=tuple(int(d) for d in X.shape),
        tensor_modes=modes,
        tensor_levels=levels,
        accounting=accounting,
    )


def _level_codes(table: RawTable, column: str) -> tuple[np.ndarray, list[str]]:
    """Per line, the index of its level along ``column``'s mode, and the levels (numeric order
    when every level is a number)."""
    codes, values = value_codes(table, column)
    if not table.is_numeric(column):
        try:
            order = sorted(range(len(values)), key=lambda i: float(values[i]))
        except ValueError:
            return codes, values
        rank = np.empty(len(values), dtype=np.int64)
        rank[order] = np.arange(len(values))
        return np.where(codes >= 0, rank[np.maximum(codes, 0)], -1), [values[i] for i in order]
    return codes, values


def _cell_text(modes: Sequence[str], labels: Sequence[str]) -> str:
    return ", ".join(f"{mode}={label}" for mode, label in zip(modes, labels, strict=True))


def _check_options(table, index, value, sensitive, fill, scaling) -> list[str]:
    index = list(index)
    if len(index) < 2:
        raise ParameterError(
            f"a tensor needs at least two index columns, the entity's first (e.g. entity, item, context); "
            f"{'none is chosen' if not index else f'only {index[0]!r} is chosen'} ({term('tensor_index')})."
        )
    if len(set(index)) != len(index):
        raise ParameterError(f"an index column is listed twice: {index}.")
    require_columns(table, index, "tensor index")
    require_columns(table, [value], "tensor value")
    if value in index:
        raise ParameterError(f"column {value!r} cannot be both an index and the value column.")
    for col in sensitive:
        if col in index or col == value:
            raise ParameterError(f"sensitive column {col!r} cannot also be an index or the value column.")
    if fill is not None:
        try:
            finite = np.isfinite(float(fill))
        except (TypeError, ValueError):
            finite = False
        if not finite:
            raise ParameterError(f"the fill value must be a finite number; got {fill!r} ({term('tensor_fill')}).")
    check_scaling(scaling)
    return index


def _duplicate_error(table: RawTable, index: list[str], value: str, sensitive: list[str], codes, levels, first: int, second: int, repeats: int) -> DuplicateCellError:
    cell = _cell_text(index, [levels[m][codes[first, m]] for m in range(len(index))])
    differing = [
        c for c in table.columns
        if c not in index and c != value and c not in sensitive and table.cell(c, first) != table.cell(c, second)
    ]
    advice = "Aggregate the duplicates first (e.g. average them) or delete the extra lines."
    if differing:
        advice = (
            f"The two lines differ in {', '.join(map(repr, differing[:3]))}: if that is a mode of the data, add it to "
            f"the index ({term('tensor_index', ','.join(index + differing[:1]))}); otherwise aggregate the duplicates "
            "first (e.g. average them) or delete the extra lines."
        )
    return DuplicateCellError(
        f"the cell ({cell}) appears on {table.line_word}s {table.line_of(first)} and {table.line_of(second)} "
        f"({repeats} repeated cell(s) in all); a tensor has one value per cell. {advice}"
    )


def _constant_per(codes: np.ndarray, groups: np.ndarray, n_groups: int) -> bool:
    """Whether ``codes`` (>= 0) take one value within each of ``n_groups`` groups."""
    low = np.full(n_groups, np.iinfo(np.int64).max)
    high = np.full(n_groups, -1)
    np.minimum.at(low, groups, codes)
    np.maximum.at(high, groups, codes)
    seen = high >= 0
    return bool(np.all(low[seen] == high[seen]))


def _conflict_error(table, index, column, entity_codes, level_codes, levels, labels, codes, entity) -> SensitiveColumnError:
    rows = np.flatnonzero((entity_codes == entity) & (codes >= 0))
    distinct = list(dict.fromkeys(codes[rows]))
    a = rows[codes[rows] == distinct[0]][0]
    b = rows[codes[rows] == distinct[1]][0]
    message = (
        f"sensitive column {column!r} must be constant for each {index[0]}, but {levels[0][entity]!r} has "
        f"{labels[distinct[0]]!r} at {table.where(a)} and {labels[distinct[1]]!r} at {table.where(b)}."
    )
    present = codes >= 0
    owners = [
        mode for mode, mode_codes in zip(index[1:], level_codes[1:], strict=True)
        if _constant_per(codes[present], mode_codes[present], int(mode_codes.max()) + 1)
    ]
    if owners:
        order = [owners[0]] + [c for c in index if c != owners[0]]
        return SensitiveColumnError(
            f"{message} It is constant for each {owners[0]!r}: the entity column (whose rows the groups describe) must come "
            f"first in the index — {term('tensor_index', ','.join(order))}."
        )
    return SensitiveColumnError(
        f"{message} Fix the data so that each {index[0]} has one group, or, if the groups belong to a combination of "
        f"columns (a mode left out of the index), add that column ({term('tensor_index')})."
    )


def prepare_tensor(
    table: RawTable,
    *,
    index: Sequence[str],
    value: str,
    sensitive: str | Sequence[str],
    binarize: Mapping[str, float] | None = None,
    bins: Mapping[str, int] | None = None,
    merge: Mapping[str, Mapping] | None = None,
    fill: float | None = None,
    scaling: str = "none",
    min_group_size: int = 2,
    small_groups: str = "error",
) -> AuditData:
    """Build a dense N-way tensor from a long-format table and return tensor :class:`AuditData`.

    Each line of ``table`` is one cell: the index columns give its coordinates (the first index
    column is the *entity* mode, whose rows the groups describe) and ``value`` its number. The
    sensitive column(s) must be constant for each entity (several lines of the same entity
    repeat it). Nothing is guessed:

    * an index combination on two lines is a :class:`DuplicateCellError` (aggregate first; a
      column that tells the two lines apart is named, as it may be a mode left out);
    * a combination that never appears, or a line without a value, is a
      :class:`MissingCellError` unless ``fill`` gives the value for absent cells (e.g. ``0``
      for counts); the number filled is logged;
    * an empty index cell, a text value, or an entity with two different sensitive values is
      an error naming the line (and, when the sensitive column is constant along another index
      column, saying that column should come first).

    Parameters
    ----------
    index : list of str
        Two or more index columns, entity first (``["user", "item", "context"]``).
    value : str
        The numeric value column.
    sensitive : str or list of str
        Per-entity sensitive column(s); several give intersections.
    binarize, bins, merge :
        As in :func:`prepare`, for a sensitive column.
    fill : float, optional
        Value for absent cells (and lines with an empty value). Default: stop with an error.
    scaling : str
        Default ``"none"`` (cells share one unit); see :func:`scale_features` for the others,
        applied to the columns of the entity unfolding.
    min_group_size, small_groups :
        As in :func:`prepare` (dropping a small group drops its entities).

    The accounting counts entities (``unit: "entities"``): per group the entities read and
    used; the feature is the value column; index, sensitive and other columns are listed as
    excluded with their role.
    """
    sensitive, binarize, bins, merge = check_group_options(table, sensitive, binarize, bins, merge, min_group_size, small_groups)
    index = _check_options(table, index, value, sensitive, fill, scaling)
    log: list[str] = list(table.log)

    # --- coordinates
    for col in index:
        missing = table.missing(col)
        if missing.any():
            raise MissingValueError(
                f"index column {col!r} is empty at {table.where(int(np.argmax(missing)))} ({int(missing.sum())} such line(s)); "
                "every line needs all of its coordinates. Fill or delete those lines."
            )
    per_mode = [_level_codes(table, col) for col in index]
    levels = [labels for _, labels in per_mode]
    codes = np.column_stack([mode_codes for mode_codes, _ in per_mode])
    shape = tuple(len(labels) for labels in levels)
    n_cells = int(np.prod(np.array(shape, dtype=object)))
    dims = " × ".join(map(str, shape))
    if n_cells > MAX_TENSOR_CELLS:
        raise ParameterError(
            f"the index columns {', '.join(map(repr, index))} define a {dims} tensor ({n_cells:,} cells, "
            f"{n_cells * 8 / 2**30:.1f} GiB dense), above the {MAX_TENSOR_CELLS:,}-cell limit. Check that no value or "
            f"identifier column is listed as an index ({term('tensor_index')}), or aggregate the data first."
        )
    flat = np.ravel_multi_index(codes.T, shape)
    order = np.argsort(flat, kind="stable")
    repeated = np.flatnonzero(np.diff(flat[order]) == 0)
    if repeated.size:
        first, second = order[repeated[0]], order[repeated[0] + 1]
        raise _duplicate_error(table, index, value, sensitive, codes, levels, int(first), int(second), int(repeated.size))

    # --- values
    parsed = table.parsed(value)
    if not parsed.is_numeric:
        row = int(np.flatnonzero(parsed.bad)[0])
        raise NonNumericColumnError(
            f"tensor value column {value!r} has text {table.cell(value, row)!r} at {table.where(row)}; every value must be a number."
        )
    values = parsed.values
    if parsed.missing.any():
        row = int(np.flatnonzero(parsed.missing)[0])
        cell = _cell_text(index, [levels[m][codes[row, m]] for m in range(len(index))])
        if fill is None:
            raise MissingCellError(
                f"{int(parsed.missing.sum())} line(s) have no {value!r} (first: {table.where(row)}, cell "
                f"{cell}). Fill those values, delete the lines, or give absent cells a value (e.g. "
                f"{term('tensor_fill', 0)} for counts)."
            )
        log.append(f"filled {int(parsed.missing.sum())} line(s) without a value with {float(fill):g}")
        values = np.where(parsed.missing, float(fill), values)
    dense = np.full(n_cells, np.nan)
    dense[flat] = values
    absent = n_cells - len(flat)
    if absent:
        first_absent = int(np.flatnonzero(np.isnan(dense))[0])
        coords = np.unravel_index(first_absent, shape)
        cell = _cell_text(index, [levels[m][coords[m]] for m in range(len(index))])
        entity = levels[0][coords[0]]
        have = int(np.sum(codes[:, 0] == coords[0]))
        per_entity = n_cells // shape[0]
        if fill is None:
            raise MissingCellError(
                f"the lines cover {len(flat)} of the {n_cells} cells of the {dims} tensor "
                f"({' × '.join(index)}): {absent} cell(s) are absent, first ({cell}); "
                f"{index[0]} {entity!r} has {have} of its {per_entity} cells. Add the missing lines, or "
                f"give absent cells a value (e.g. {term('tensor_fill', 0)} for counts)."
            )
        log.append(f"filled {absent} absent cell(s) of the {dims} tensor with {float(fill):g}")
        dense[np.isnan(dense)] = float(fill)
    tensor = dense.reshape(shape)

    # --- per-entity sensitive attribute
    entity_codes = codes[:, 0]
    first_row = np.unique(entity_codes, return_index=True)[1]  # every entity occurs (levels come from the lines)
    per_entity = []
    level_codes = [mode_codes for mode_codes, _ in per_mode]
    for col in sensitive:
        row_codes, labels = sensitive_codes(table, col, binarize=binarize, bins=bins, merge=merge, log=log)
        present = row_codes >= 0
        entity_code = np.full(shape[0], -1, dtype=np.int64)
        entity_code[entity_codes[present][::-1]] = row_codes[present][::-1]  # the first line wins
        without = np.flatnonzero(entity_code < 0)
        if without.size:
            e = int(without[0])
            raise SensitiveColumnError(
                f"{index[0]} {levels[0][e]!r} has no value in sensitive column {col!r} (first {table.where(int(first_row[e]))}); "
                "every entity needs its group."
            )
        low = np.full(shape[0], np.iinfo(np.int64).max)
        np.minimum.at(low, entity_codes[present], row_codes[present])
        high = np.full(shape[0], -1)
        np.maximum.at(high, entity_codes[present], row_codes[present])
        conflicting = np.flatnonzero(low != high)
        if conflicting.size:
            raise _conflict_error(table, index, col, entity_codes, level_codes, levels, labels, row_codes, int(conflicting[0]))
        per_entity.append((entity_code, labels))
    read_codes, read_groups = encode_read_groups(sensitive, per_entity)
    read_labels = read_groups.labels if read_groups is not None else ()
    reasons = np.zeros(shape[0], dtype=np.int8)
    drop_small_groups(read_codes, read_labels, reasons, min_group_size, small_groups, "entities", log)
    keep = reasons == 0
    groups = GroupCodes(read_codes[keep], read_labels).without_empty()
    check_groups(groups, min_size=min_group_size, what=f"sensitive column(s) {', '.join(map(repr, sensitive))} (per {index[0]})")
    tensor = tensor[keep]
    levels[0] = [label for label, kept in zip(levels[0], keep, strict=True) if kept]
    first_lines = table.lines[first_row][keep]
    shape = tensor.shape
    log.append(f"tensor of shape {' × '.join(map(str, shape))} ({' × '.join(index)}) from {table.n_rows} line(s); value {value!r}")
    log.append(f"scaling: {scaling}")
    entries = group_entries(read_codes, list(read_labels), reasons)
    excluded = [
        {"column": col, "reason": "index", "detail": f"mode {m + 1} of the tensor ({'the entities' if m == 0 else f'{shape[m]} levels'})"}
        for m, col in enumerate(index)
    ]
    excluded += [{"column": col, "reason": "sensitive", "detail": "defines the groups of the entities; never a feature"} for col in sensitive]
    excluded += [
        {"column": col, "reason": "unused", "detail": "not an index, value or sensitive column of the tensor"}
        for col in table.columns if col not in index and col != value and col not in sensitive
    ]
    accounting = {
        "unit": "entities",
        "rows_read": len(keep),
        "rows_used": int(keep.sum()),
        "lines_read": int(table.n_rows),
        "groups": entries,
        "features": [value],
        "excluded": excluded,
        "warnings": group_warnings(entries, min_group_size, "entities"),
    }
    return AuditData(
        X_raw=np.ascontiguousarray(tensor.reshape(shape[0], -1)),
        feature_names=_tensor_feature_names(index, levels),
        groups=groups,
        sensitive=tuple(sensitive),
        scaling=scaling,
        lines=first_lines,
        source=table_source(table),
        log=tuple(log),
        tensor_shape=tuple(int(d) for d in shape),
        tensor_modes=tuple(index),
        tensor_levels=tuple(tuple(labels) for labels in levels),
        accounting=accounting,
    )
