"""The data boundary: the only package that sees a raw file.

Two steps, each returning a validated object or raising a specific
:class:`~fairaudit.errors.FairAuditError` whose message names the column, line or value at fault
and says what to do:

1. :func:`read_table` turns a file (a path, an upload, a file object) into a :class:`RawTable`
   of typed columns, with Apache Arrow: CSV/TSV (encoding, delimiter and header detection,
   quoted fields, blank lines, ragged rows named by line) and Parquet. The source is only read,
   never written; paths that are not regular files are refused before they are opened.
2. :func:`prepare` turns a ``RawTable`` into :class:`AuditData`: feature columns (numeric by
   default, categoricals one-hot on request; sensitive, label, ID-like, text, empty and
   constant columns left out with the reason), groups from one or several sensitive columns
   (intersections; thresholds, quantile bins, or values merged into groups), a missing-value
   policy, a minimum group size, and the scaling choice. Every decision is written to
   ``AuditData.log`` and every row and column is accounted for in ``AuditData.accounting``.
   :func:`prepare_tensor` does the same for a long-format table (one line per tensor cell).

Modules: ``_source`` (opening safely, one scan of the bytes), ``_csv`` and ``_parquet``
(reading), ``_cells`` (missing markers, numbers, parsing text columns), ``_table``
(:class:`RawTable`, :func:`read_table`), ``_roles`` (features and exclusions, identifiers),
``_sensitive`` (groups, binarize/bins/merge), ``_prepare``, ``_accounting``, ``_tensor``,
``_audit_data`` (:class:`AuditData`), ``_scaling`` and ``_rows`` (a fitted model's feature
columns read from a new table).

Estimators never see this package: they take ``X`` and ``sensitive_features`` arrays.
"""

from __future__ import annotations

from ._accounting import (
    DROP_GAP_POINTS,
    DROP_RATIO,
    DROP_REASONS,
    EXCLUSION_REASONS,
    NO_GROUP,
    accounting_lines,
    large_drop_warning,
    unequal_drop_warning,
    worded,
)
from ._audit_data import NONNEGATIVE_POLICIES, AuditData
from ._cells import MISSING_MARKERS
from ._csv import DELIMITERS
from ._prepare import MISSING_POLICIES, SMALL_GROUP_POLICIES, prepare
from ._rows import FeatureRows, feature_rows
from ._scaling import SCALINGS, scale_features, scaling_parameters
from ._sensitive import MAX_CATEGORIES, MAX_TEXT_GROUPS, REST, parse_merge, value_counts
from ._source import check_path, read_bytes
from ._table import DEFAULT_MAX_MB, RawTable, read_table
from ._tensor import (
    MAX_TENSOR_CELLS,
    TENSOR_LEVEL_SEPARATOR,
    prepare_tensor,
    tensor_from_arrays,
)


def load(source, *, sensitive, skip_rows: int = 0, header: bool | None = None, max_mb: float = DEFAULT_MAX_MB, **options) -> AuditData:
    """:func:`read_table` then :func:`prepare` in one call (the table is handed over to
    ``prepare``, so the feature matrix never needs a second copy of the numbers)."""
    table = read_table(source, skip_rows=skip_rows, header=header, max_mb=max_mb)
    return prepare(table, sensitive=sensitive, reuse_table=True, **options)


__all__ = [
    "DEFAULT_MAX_MB",
    "DELIMITERS",
    "DROP_GAP_POINTS",
    "DROP_RATIO",
    "DROP_REASONS",
    "EXCLUSION_REASONS",
    "MAX_CATEGORIES",
    "MAX_TENSOR_CELLS",
    "MAX_TEXT_GROUPS",
    "MISSING_MARKERS",
    "MISSING_POLICIES",
    "NONNEGATIVE_POLICIES",
    "NO_GROUP",
    "REST",
    "SCALINGS",
    "SMALL_GROUP_POLICIES",
    "TENSOR_LEVEL_SEPARATOR",
    "AuditData",
    "FeatureRows",
    "RawTable",
    "accounting_lines",
    "check_path",
    "feature_rows",
    "load",
    "parse_merge",
    "prepare",
    "prepare_tensor",
    "read_bytes",
    "read_table",
    "scale_features",
    "scaling_parameters",
    "tensor_from_arrays",
    "large_drop_warning",
    "unequal_drop_warning",
    "value_counts",
    "worded",
]
