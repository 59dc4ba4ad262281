"""Rows for a model fitted elsewhere: named feature columns of a table, as ``prepare`` reads them.

Written for ``fairaudit.models`` (``transform`` of new rows with an exported model): the
columns a fitted model names are read from a :class:`RawTable` the way :func:`prepare` reads
them — numbers parsed, one-hot indicators ``column=level`` rebuilt from their text column — and
rows with a missing cell stop the run (naming them) or are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import (
    MissingValueError,
    NonNumericColumnError,
    ParameterError,
    UnknownColumnError,
)
from ..vocabulary import term
from ._prepare import describe_missing, suggest
from ._sensitive import value_codes
from ._table import RawTable


@dataclass(frozen=True)
class FeatureRows:
    """Named feature columns read from a :class:`RawTable` for a model fitted elsewhere.

    Attributes
    ----------
    X : ndarray (rows kept × features), in the order the model names them
    rows : ndarray of int
        Position in the table of each kept row.
    lines : ndarray of int
        File line of each kept row.
    encoded : tuple of str
        Features rebuilt as one-hot indicators (``col=level``) from a text column.
    unused : tuple of str
        Table columns the features do not use (IDs, the sensitive column, …).
    log : tuple of str
        What was done: dropped rows, values of an encoded column no indicator covers.
    """

    X: np.ndarray
    rows: np.ndarray
    lines: np.ndarray
    encoded: tuple[str, ...]
    unused: tuple[str, ...]
    log: tuple[str, ...]


def _indicator_source(name: str, columns: Sequence[str]) -> tuple[str, str] | None:
    """``(column, level)`` when ``name`` is ``prepare``'s one-hot name ``f"{column}={level}"``."""
    for at in (i for i, char in enumerate(name) if char == "="):
        if name[:at] in columns:
            return name[:at], name[at + 1 :]
    return None


def feature_rows(table: RawTable, names: Sequence[str], *, missing: str = "error", purpose: str = "the model") -> FeatureRows:
    """The columns ``names`` of ``table`` as numbers, for a fitted model's ``transform``.

    A name that is a column is parsed as :func:`prepare` parses numbers; a name ``col=level``
    whose ``col`` is a column is rebuilt as :func:`prepare`'s one-hot indicator of ``level``.
    Any other name stops with the list of columns the table lacks (``purpose`` says who needs
    them: ``"the model"``, ``"the audit"``). ``missing``: ``"error"`` stops at rows with a
    missing cell in these columns (naming them), ``"drop"`` leaves them out (counted in
    ``log``); nothing is imputed, since the values the model was fitted with are not known here.
    """
    if missing not in ("error", "drop"):
        raise ParameterError(f"missing must be 'error' or 'drop' for new rows; got {missing!r}.")
    columns = table.columns
    absent = [name for name in names if name not in columns and _indicator_source(name, columns) is None]
    if absent:
        shown = ", ".join(f"{name!r}{suggest(name, columns)}" for name in absent[:8])
        raise UnknownColumnError(
            f"{table.name} lacks {len(absent)} of the {len(names)} feature column(s) {purpose} needs: {shown}"
            f"{' …' if len(absent) > 8 else ''}. Give every feature, under the same names."
        )
    values, masks, encoded, log = [], [], [], []
    levels: dict[str, set[str]] = {}
    for name in names:
        if name in columns:
            parsed = table.parsed(name)
            if parsed.bad.any():
                row = int(np.flatnonzero(parsed.bad)[0])
                raise NonNumericColumnError(
                    f"feature column {name!r} has text {table.cell(name, row)!r} at {table.where(row)} ({int(parsed.bad.sum())} "
                    f"such cell(s)); {purpose} needs a number in every cell of these features. Fix those cells, or blank "
                    f"them and choose {term('transform_missing', 'drop')}."
                )
            values.append(parsed.values)
            masks.append(parsed.missing)
            continue
        col, level = _indicator_source(name, columns)
        codes, found = value_codes(table, col)
        target = found.index(level) if level in found else -2
        values.append(np.where(codes < 0, np.nan, (codes == target).astype(float)))
        masks.append(codes < 0)
        encoded.append(name)
        levels.setdefault(col, set()).add(level)
    any_missing = np.logical_or.reduce(masks)
    keep = ~any_missing
    if any_missing.any():
        described = describe_missing(table, list(names), masks)
        if missing == "error":
            raise MissingValueError(
                f"{int(any_missing.sum())} row(s) have missing cells in the features {purpose} needs: {described}. "
                f"Choose {term('transform_missing', 'drop')} to leave those rows out of the output, or fill the cells."
            )
        log.append(f"left out {int(any_missing.sum())} row(s) with missing cells: {described}")
    for col, known in levels.items():
        codes, found = value_codes(table, col)
        kept = codes[keep]
        unseen = [value for i, value in enumerate(found) if value not in known and np.any(kept == i)]
        if unseen:
            count = int(np.isin(kept, [found.index(v) for v in unseen]).sum())
            log.append(
                f"column {col!r}: {count} row(s) have value(s) the model has no indicator for "
                f"({', '.join(map(repr, unseen[:5]))}{' …' if len(unseen) > 5 else ''}); all of {col!r}'s indicators are 0 there"
            )
    used = set(names) | set(levels)
    X = np.empty((int(keep.sum()), len(values)))
    for j, column in enumerate(values):
        X[:, j] = column[keep]
    return FeatureRows(
        X=X,
        rows=np.flatnonzero(keep),
        lines=table.lines[keep],
        encoded=tuple(encoded),
        unused=tuple(c for c in columns if c not in used),
        log=tuple(log),
    )
