"""The data boundary: the only module that sees a raw file.

Two steps, each returning a validated object or raising a specific
:class:`~fairaudit.errors.FairAuditError` whose message names the column, line or value at fault
and says what to do:

1. :func:`read_table` turns bytes (a path, an upload, a file object) into a :class:`RawTable`:
   encoding detection (UTF-8, UTF-8 with BOM, Windows-1252 / Latin-1), delimiter detection
   (``, ; TAB |``), quoted fields, header detection, ragged-row checks. The source is only read,
   never written.
2. :func:`prepare` turns a ``RawTable`` into :class:`AuditData`: feature columns (numeric by
   default, categoricals one-hot on request; sensitive, label and ID columns excluded), groups
   from one or several sensitive columns (intersections), numeric sensitive columns binarised
   or cut into quantile bins on request, a missing-value policy, a minimum group size, and the
   scaling choice. Every decision is written to ``AuditData.log`` so reports can state it.

Estimators never see this module: they take ``X`` and ``sensitive_features`` arrays.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import (
    DuplicateCellError,
    DuplicateColumnError,
    EmptyFileError,
    EncodingError,
    FairAuditError,
    FileTooLargeError,
    InputFileNotFound,
    MalformedCSVError,
    MissingCellError,
    MissingValueError,
    NegativeValueError,
    NoFeaturesError,
    NonNumericColumnError,
    ParameterError,
    SensitiveColumnError,
    UnknownColumnError,
)
from .groups import INTERSECTION_SEPARATOR, GroupCodes, check_groups, encode_groups
from .vocabulary import term

DEFAULT_MAX_MB = 200
"""Upload limit in megabytes (Streamlit's default upload limit too)."""

DELIMITERS = (",", ";", "\t", "|")
MISSING_MARKERS = frozenset({"", "na", "n/a", "nan", "null", "none", "?", "#n/a", "nat"})
MAX_CATEGORIES = 12
"""A numeric sensitive column with more distinct values than this must be binarised or binned."""

SCALINGS = ("standardize", "center", "none", "unit_norm")
MISSING_POLICIES = ("error", "drop", "mean", "median")
NONNEGATIVE_POLICIES = ("error", "shift", "clip")

_SAMPLE_LINES = 200


# ============================================================================ reading a file
@dataclass(frozen=True)
class RawTable:
    """A parsed table of strings with where it came from.

    Attributes
    ----------
    frame : DataFrame of str
        One column per header name, cells stripped of surrounding white space.
    lines : ndarray of int
        The 1-based line number in the file of each row (for messages).
    name, sha256, n_bytes, encoding, delimiter, has_header :
        Provenance, reported in the audit's data fingerprint.
    log : list of str
        What reading did that a user should know (skipped blank lines, detected encoding, ...).
    """

    frame: pd.DataFrame
    lines: np.ndarray
    name: str
    sha256: str
    n_bytes: int
    encoding: str
    delimiter: str
    has_header: bool
    log: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        return list(self.frame.columns)

    def describe(self) -> pd.DataFrame:
        """One row per column: kind (numeric/text), distinct values, missing cells, an example."""
        rows = []
        for column in self.columns:
            parsed = _numeric_column(self.frame[column])
            present = self.frame[column][~parsed.missing]
            rows.append(
                {
                    "column": column,
                    "kind": "numeric" if parsed.is_numeric else "text",
                    "distinct": int(present.nunique()),
                    "missing": int(parsed.missing.sum()),
                    "example": str(present.iloc[0]) if len(present) else "",
                }
            )
        return pd.DataFrame(rows)


def _read_bytes(source, max_bytes: int) -> tuple[bytes, str]:
    """Bytes and a display name from a path, bytes, or a binary/text file object."""
    if isinstance(source, bytes | bytearray | memoryview):
        data, name = bytes(source), "upload.csv"
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.exists():
            raise InputFileNotFound(f"file not found: {path}. Check the path.")
        if path.is_dir():
            raise InputFileNotFound(f"{path} is a folder, not a CSV file.")
        size = path.stat().st_size
        if size > max_bytes:
            raise _too_large(path.name, size, max_bytes)
        data, name = path.read_bytes(), path.name
    elif hasattr(source, "read"):
        data = source.read(max_bytes + 1)
        if isinstance(data, str):
            data = data.encode("utf-8")
        name = Path(getattr(source, "name", "upload.csv") or "upload.csv").name
    else:
        raise FairAuditError(f"cannot read a table from a {type(source).__name__}; pass a path or bytes.")
    if len(data) > max_bytes:
        raise _too_large(name, len(data), max_bytes)
    return data, name


def _too_large(name: str, size: int, max_bytes: int) -> FileTooLargeError:
    return FileTooLargeError(
        f"{name} is {size / 2**20:.1f} MB, above the {max_bytes / 2**20:.0f} MB limit; "
        "sample or split the rows, or raise the limit (CLI --max-mb, app: server.maxUploadSize)."
    )


_BINARY_SIGNATURES = {
    b"PK\x03\x04": "a ZIP archive (an .xlsx workbook is one)",
    b"\x1f\x8b": "a gzip archive",
    b"\xd0\xcf\x11\xe0": "an old Excel/Office file",
    b"%PDF": "a PDF",
    b"PAR1": "a Parquet file",
    b"\x93NUMPY": "a NumPy .npy file",
}


def _decode(data: bytes, name: str) -> tuple[str, str]:
    """Decode text as UTF-8 (BOM allowed), else Windows-1252, else Latin-1; refuse the rest."""
    for signature, what in _BINARY_SIGNATURES.items():
        if data.startswith(signature):
            raise EncodingError(f"{name} is {what}, not a CSV text file; export it as CSV (UTF-8) first.")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data[:4096]:
        raise EncodingError(
            f"{name} is not UTF-8 or Latin-1 text (it looks like UTF-16/UTF-32 or a binary file); "
            "save it as 'CSV UTF-8' and upload it again."
        )
    try:
        return data.decode("utf-8-sig"), "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"
    except UnicodeDecodeError as exc:
        utf8_error = exc
    if b"\x00" in data:
        raise EncodingError(f"{name} contains NUL bytes: it is a binary file, not CSV text.")
    try:
        text = data.decode("cp1252")
        return text, "windows-1252"
    except UnicodeDecodeError:
        pass
    text = data.decode("latin-1")
    if re.search("[\x80-\x9f]", text):
        line = data[: utf8_error.start].count(b"\n") + 1
        raise EncodingError(
            f"{name} is not UTF-8, Windows-1252 or Latin-1 text (first undecodable byte "
            f"0x{data[utf8_error.start]:02x} on line {line}); save it as 'CSV UTF-8' and try again."
        )
    return text, "latin-1"


def _detect_delimiter(sample_lines: list[str]) -> str:
    """The delimiter that splits the sample into the most consistent multi-field rows."""
    best, best_score = ",", (0.0, 0)
    for delimiter in DELIMITERS:
        try:
            counts = [len(r) for r in csv.reader(sample_lines, delimiter=delimiter) if any(f.strip() for f in r)]
        except csv.Error:
            continue
        if not counts:
            continue
        mode = max(set(counts), key=counts.count)
        if mode < 2:
            continue
        score = (counts.count(mode) / len(counts), mode)
        if score > best_score:
            best, best_score = delimiter, score
    return best


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_table(
    source,
    *,
    name: str | None = None,
    skip_rows: int = 0,
    header: bool | None = None,
    delimiter: str | None = None,
    max_mb: float = DEFAULT_MAX_MB,
) -> RawTable:
    """Read a delimited text file into a :class:`RawTable`, or raise a specific error.

    Parameters
    ----------
    source : path, bytes or file object
        The file is only read, never modified.
    name : str, optional
        Display name (defaults to the file name).
    skip_rows : int
        Lines to skip before the header (e.g. 1 for credit's ``default_degree.csv``).
    header : bool or None
        ``None`` detects it: the first row is data when all of its cells are numbers, and the
        columns are then named ``col_1``, ``col_2``, ...
    delimiter : str, optional
        Force a delimiter instead of detecting one of ``, ; TAB |``.
    max_mb : float
        Size limit in megabytes.
    """
    if skip_rows < 0:
        raise ParameterError(f"skip_rows must be >= 0, got {skip_rows}.")
    max_bytes = int(max_mb * 2**20)
    data, default_name = _read_bytes(source, max_bytes)
    name = name or default_name
    sha256 = hashlib.sha256(data).hexdigest()
    if not data.strip():
        raise EmptyFileError(f"{name} is empty; choose a CSV file with a header row and data rows.")
    text, encoding = _decode(data, name)
    log: list[str] = []
    if encoding not in ("utf-8", "utf-8-sig"):
        log.append(f"read as {encoding} text (not valid UTF-8)")

    body = io.StringIO(text, newline="")
    for _ in range(skip_rows):
        body.readline()
    rest = body.read()
    sample = rest.splitlines()[:_SAMPLE_LINES]
    if not any(line.strip() for line in sample):
        raise EmptyFileError(f"{name} has nothing after the first {skip_rows} skipped line(s).")
    delimiter = delimiter or _detect_delimiter(sample)

    reader = csv.reader(io.StringIO(rest, newline=""), delimiter=delimiter, quotechar='"', strict=True)
    rows: list[list[str]] = []
    lines: list[int] = []
    blank = 0
    consumed = 0  # lines read so far: a record starts on the next one (quoted fields may span lines)
    try:
        for record in reader:
            start, consumed = consumed + 1, reader.line_num
            if not any(cell.strip() for cell in record):
                blank += 1
                continue
            rows.append([cell.strip() for cell in record])
            lines.append(start + skip_rows)
    except csv.Error as exc:
        raise MalformedCSVError(
            f"{name} line {reader.line_num + skip_rows + 1}: {exc} (a quote is probably not closed); "
            "fix the quoting in that line."
        ) from None
    if blank:
        log.append(f"skipped {blank} blank line(s)")
    if not rows:
        raise EmptyFileError(f"{name} has no rows.")

    first = rows[0]
    has_header = header if header is not None else not all(_looks_numeric(c) for c in first)
    if has_header:
        names, data_rows, data_lines = first, rows[1:], lines[1:]
    else:
        names = [f"col_{i + 1}" for i in range(len(first))]
        data_rows, data_lines = rows, lines
        log.append(f"no header row: columns named col_1 … col_{len(first)}")
    if not data_rows:
        raise EmptyFileError(f"{name} has a header but no data rows; add rows of values below the header.")

    names = _clean_header(names, name, log)
    width = len(names)
    for record, line in zip(data_rows, data_lines, strict=True):
        if len(record) == width:
            continue
        if len(record) > width and not any(record[width:]):
            del record[width:]  # a trailing delimiter: tolerated
            continue
        shown = "TAB" if delimiter == "\t" else delimiter
        raise MalformedCSVError(
            f"{name} line {line} has {len(record)} fields but the header has {width} "
            f"(delimiter {shown!r}); check that line for a stray delimiter or an unquoted comma."
        )
    frame = pd.DataFrame(data_rows, columns=names, dtype=object)
    return RawTable(
        frame=frame,
        lines=np.asarray(data_lines, dtype=np.int64),
        name=name,
        sha256=sha256,
        n_bytes=len(data),
        encoding=encoding,
        delimiter=delimiter,
        has_header=has_header,
        log=tuple(log),
    )


def _clean_header(names: list[str], file_name: str, log: list[str]) -> list[str]:
    cleaned = []
    for i, raw in enumerate(names):
        label = raw.strip()
        if not label:
            label = f"unnamed_{i + 1}"
            log.append(f"column {i + 1} has no header name: called it {label!r}")
        cleaned.append(label)
    seen: dict[str, int] = {}
    for i, label in enumerate(cleaned):
        if label in seen:
            raise DuplicateColumnError(
                f"{file_name}: columns {seen[label] + 1} and {i + 1} are both named {label!r}; "
                "rename one of them in the header."
            )
        seen[label] = i
    return cleaned


# ============================================================================ cell parsing
@dataclass(frozen=True)
class _Parsed:
    values: np.ndarray  # float, NaN where missing
    missing: np.ndarray  # bool
    bad: np.ndarray  # bool: present but not a number

    @property
    def is_numeric(self) -> bool:
        return not self.bad.any()


_COMMA_DECIMAL = re.compile(r"^[+-]?\d+,\d+$")


def _is_missing(cells: pd.Series) -> np.ndarray:
    return cells.astype(str).str.strip().str.lower().isin(MISSING_MARKERS).to_numpy()


def _numeric_column(cells: pd.Series) -> _Parsed:
    missing = _is_missing(cells)
    present = cells[~missing]
    values = np.full(len(cells), np.nan)
    parsed = pd.to_numeric(present, errors="coerce").to_numpy(dtype=float)
    bad_present = np.isnan(parsed)
    if bad_present.any() and present[bad_present].astype(str).str.match(_COMMA_DECIMAL).all():
        # Decimal commas (e.g. "1,5" in a ';'-separated European export).
        parsed = pd.to_numeric(present.astype(str).str.replace(",", ".", regex=False), errors="coerce").to_numpy(
            dtype=float
        )
        bad_present = np.isnan(parsed)
    values[~missing] = parsed
    bad = np.zeros(len(cells), dtype=bool)
    bad[np.flatnonzero(~missing)[bad_present]] = True
    infinite = np.isinf(values)
    bad |= infinite
    return _Parsed(values=np.where(bad, np.nan, values), missing=missing, bad=bad)


# ============================================================================ prepared data
@dataclass(frozen=True)
class AuditData:
    """Validated input for an audit: a numeric matrix, groups, names and a record of choices.

    Attributes
    ----------
    X_raw : ndarray of shape (n_rows, n_features)
        Finite feature values after encoding and missing-value handling, before scaling.
    feature_names : tuple of str
    groups : GroupCodes
        Group index per row and group labels (``"SEX=2"``, ``"SEX=2 & EDUCATION=1"``).
    sensitive : tuple of str
        The sensitive column(s).
    scaling : str
        ``"standardize"`` (default), ``"center"``, ``"none"`` or ``"unit_norm"``; used by
        :attr:`X`. Methods that need another scaling call :meth:`matrix`.
    label : ndarray or None
        A ground-truth column (for clustering accuracy), if chosen.
    lines : ndarray of int
        The file line of each row (for messages).
    source : dict
        Provenance: name, sha256, bytes, encoding, delimiter, rows read.
    log : tuple of str
        Every preprocessing decision, in order.
    tensor_shape : tuple of int or None
        For tensor input (:func:`prepare_tensor`, :meth:`from_tensor`): the shape
        ``(n_entities, d_1, …)``. ``X_raw`` is then the mode-1 unfolding (entities × the other
        modes' cells, last mode fastest), groups are per entity, and :meth:`tensor` refolds it.
        Families that work on tables read the unfolding; the CP family reads the tensor.
    tensor_modes : tuple of str
        The index column of each mode (``("entity", "item", "context")``).
    tensor_levels : tuple of tuple of str
        The labels along each mode, in the order of the array.
    """

    X_raw: np.ndarray
    feature_names: tuple[str, ...]
    groups: GroupCodes
    sensitive: tuple[str, ...]
    scaling: str = "standardize"
    label: np.ndarray | None = None
    label_name: str | None = None
    lines: np.ndarray | None = None
    source: Mapping = field(default_factory=dict)
    log: tuple[str, ...] = ()
    tensor_shape: tuple[int, ...] | None = None
    tensor_modes: tuple[str, ...] = ()
    tensor_levels: tuple[tuple[str, ...], ...] = ()

    # -- shape -------------------------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        return self.X_raw.shape[0]

    @property
    def n_features(self) -> int:
        return self.X_raw.shape[1]

    def group_sizes(self) -> dict[str, int]:
        return {label: int(n) for label, n in zip(self.groups.labels, self.groups.sizes(), strict=True)}

    # -- matrices ----------------------------------------------------------------------------
    @property
    def X(self) -> np.ndarray:
        """The feature matrix scaled as ``self.scaling`` says."""
        return self.matrix()

    def matrix(self, scaling: str | None = None) -> np.ndarray:
        """The feature matrix under ``scaling`` (default: this data's own choice)."""
        return scale_features(self.X_raw, scaling or self.scaling)

    @property
    def is_tensor(self) -> bool:
        return self.tensor_shape is not None

    def tensor(self, scaling: str | None = None) -> np.ndarray:
        """The data as an N-way array, entities first: the refolded unfolding for tensor input,
        the ``rows × features`` matrix (a 2-way array) otherwise. Scaled like :meth:`matrix`."""
        X = self.matrix(scaling)
        return X.reshape(self.tensor_shape) if self.is_tensor else X

    @property
    def sensitive_features(self) -> pd.Series:
        """Group labels per row, for ``fit(X, sensitive_features=...)``."""
        categorical = pd.Categorical.from_codes(self.groups.codes, categories=list(self.groups.labels))
        return pd.Series(categorical, name=INTERSECTION_SEPARATOR.join(self.sensitive))

    def nonnegative(self, policy: str = "error") -> np.ndarray:
        """``X_raw`` checked (or made) non-negative for NMF.

        ``policy="error"`` raises :class:`NegativeValueError` naming the first negative cell;
        ``"shift"`` subtracts each feature's minimum where it is negative; ``"clip"`` sets
        negative cells to zero.
        """
        if policy not in NONNEGATIVE_POLICIES:
            raise ParameterError(f"nonnegative policy must be one of {NONNEGATIVE_POLICIES}, got {policy!r}.")
        X = self.X_raw
        negative = X < 0
        if not negative.any():
            return X.copy()
        if policy == "clip":
            return np.clip(X, 0.0, None)
        if policy == "shift":
            return X - np.minimum(X.min(axis=0), 0.0)
        row, col = np.argwhere(negative)[0]
        columns = [self.feature_names[j] for j in np.flatnonzero(negative.any(axis=0))]
        where = f"line {self.lines[row]}" if self.lines is not None else f"row {row}"
        raise NegativeValueError(
            f"NMF needs non-negative data, but {len(columns)} feature(s) have negative values "
            f"({', '.join(map(repr, columns[:5]))}{' …' if len(columns) > 5 else ''}; first: "
            f"{self.feature_names[col]!r} = {X[row, col]:g} at {where}). Shift each feature by its "
            "minimum (nonnegative='shift', CLI --nonnegative shift), clip negatives to 0 "
            "('clip'), or leave those columns out."
        )

    # -- provenance --------------------------------------------------------------------------
    def fingerprint(self) -> dict:
        """What identifies this input in a report: file, hash, shape, groups, choices.

        For tensor input the unfolding's column names (one per cell of the other modes) are
        shortened to the first 20 and a count; ``tensor`` gives the modes, shape and levels.
        """
        names = list(self.feature_names)
        if self.is_tensor and len(names) > 20:
            names = names[:20] + [f"… ({len(names) - 20} more)"]
        fingerprint = {
            "name": self.source.get("name", "array"),
            "sha256": self.source.get("sha256", _array_sha256(self.X_raw, self.groups.codes)),
            "bytes": self.source.get("bytes"),
            "encoding": self.source.get("encoding"),
            "delimiter": self.source.get("delimiter"),
            "rows_read": self.source.get("rows_read", self.n_rows),
            "rows": self.n_rows,
            "features": self.n_features,
            "feature_names": names,
            "sensitive": list(self.sensitive),
            "group_sizes": self.group_sizes(),
            "label": self.label_name,
            "scaling": self.scaling,
            "preprocessing": list(self.log),
        }
        if self.is_tensor:
            fingerprint["tensor"] = {
                "modes": list(self.tensor_modes),
                "shape": list(self.tensor_shape),
                "levels": [list(levels[:20]) + ([f"… ({len(levels) - 20} more)"] if len(levels) > 20 else []) for levels in self.tensor_levels],
            }
        return fingerprint

    def cache_key(self) -> str:
        """A short hash of everything that determines the prepared data."""
        digest = hashlib.sha256()
        digest.update(np.ascontiguousarray(self.X_raw).tobytes())
        digest.update(np.ascontiguousarray(self.groups.codes).tobytes())
        digest.update(repr((self.feature_names, self.groups.labels, self.scaling, self.tensor_shape)).encode())
        if self.label is not None:
            digest.update(np.asarray(self.label, dtype=str).astype("U").tobytes())
        return digest.hexdigest()[:16]

    # -- construction from arrays ------------------------------------------------------------
    @classmethod
    def from_tensor(cls, X, sensitive_features, **options) -> AuditData:
        """Tensor :class:`AuditData` from an N-way array; see :func:`tensor_from_arrays`."""
        return tensor_from_arrays(X, sensitive_features, **options)

    @classmethod
    def from_arrays(
        cls,
        X,
        sensitive_features,
        *,
        feature_names: Sequence[str] | None = None,
        label=None,
        label_name: str | None = None,
        scaling: str = "standardize",
        min_group_size: int = 2,
        name: str = "array",
    ) -> AuditData:
        """Validated :class:`AuditData` from in-memory arrays (notebooks, tests)."""
        X = np.asarray(X, dtype=float)
        if X.ndim != 2:
            raise FairAuditError(f"X must be a 2-D array (rows × features), got shape {X.shape}.")
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise EmptyFileError(f"X is empty (shape {X.shape}).")
        if not np.isfinite(X).all():
            row, col = np.argwhere(~np.isfinite(X))[0]
            raise MissingValueError(
                f"X has a missing or infinite value at row {row}, column {col}; "
                "drop or impute those rows first."
            )
        names = tuple(feature_names) if feature_names is not None else tuple(f"x{j}" for j in range(X.shape[1]))
        if len(names) != X.shape[1]:
            raise FairAuditError(f"{len(names)} feature names for {X.shape[1]} columns.")
        groups = encode_groups(sensitive_features, n_rows=X.shape[0])
        check_groups(groups, min_size=min_group_size)
        _check_scaling(scaling)
        sens_name = getattr(sensitive_features, "name", None)
        sens_cols = getattr(sensitive_features, "columns", None)
        sensitive = tuple(map(str, sens_cols)) if sens_cols is not None else (str(sens_name or "group"),)
        return cls(
            X_raw=X,
            feature_names=names,
            groups=groups,
            sensitive=sensitive,
            scaling=scaling,
            label=None if label is None else np.asarray(label),
            label_name=label_name if label is not None else None,
            source={"name": name, "sha256": _array_sha256(X, groups.codes), "rows_read": X.shape[0]},
        )


TENSOR_LEVEL_SEPARATOR = "|"


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
    _check_scaling(scaling)
    flat = np.ascontiguousarray(X.reshape(X.shape[0], -1))
    sens_name = getattr(sensitive_features, "name", None)
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
    )


def _table_source(table: RawTable) -> dict:
    """Provenance of a prepared table: file name, hash, size, encoding, delimiter, lines read."""
    return {
        "name": table.name,
        "sha256": table.sha256,
        "bytes": table.n_bytes,
        "encoding": table.encoding,
        "delimiter": table.delimiter,
        "rows_read": len(table.frame),
    }


def _array_sha256(X: np.ndarray, codes: np.ndarray) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(X).tobytes())
    digest.update(np.ascontiguousarray(codes).tobytes())
    return digest.hexdigest()


# ============================================================================ scaling
def _check_scaling(scaling: str) -> None:
    if scaling not in SCALINGS:
        raise ParameterError(f"scaling must be one of {', '.join(SCALINGS)}; got {scaling!r}.")


def scale_features(X: np.ndarray, scaling: str) -> np.ndarray:
    """Scale columns of ``X``.

    ``"standardize"``: centre and divide by the (population) standard deviation — the default
    for mixed-unit tabular data. ``"center"``: subtract the column mean. ``"none"``: unchanged.
    ``"unit_norm"``: divide each column by its ℓ2 norm without centring (Fairer-NMF §6.1).
    Constant columns are left at zero rather than divided by zero.
    """
    _check_scaling(scaling)
    X = np.asarray(X, dtype=float)
    if scaling == "none":
        return X.copy()
    if scaling == "unit_norm":
        norms = np.linalg.norm(X, axis=0)
        return X / np.where(norms > 0, norms, 1.0)
    centred = X - X.mean(axis=0)
    if scaling == "center":
        return centred
    std = centred.std(axis=0)
    return centred / np.where(std > 0, std, 1.0)


# ============================================================================ preparing
def _suggest(name: str, columns: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(columns), n=3, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in columns}
        close = [lowered[name.lower()]] if name.lower() in lowered else []
    return f" Did you mean {', '.join(map(repr, close))}?" if close else ""


def _require_columns(table: RawTable, names: Iterable[str], role: str) -> None:
    for col in names:
        if col not in table.frame.columns:
            shown = ", ".join(map(repr, table.columns[:12])) + (" …" if len(table.columns) > 12 else "")
            raise UnknownColumnError(
                f"{role} column {col!r} is not in {table.name}.{_suggest(col, table.columns)} "
                f"Columns are: {shown}."
            )


def _is_id_column(name: str, parsed: _Parsed) -> bool:
    lowered = name.strip().lower()
    looks_like_id = lowered in {"id", "index", "row", "rowid", "row_id"} or lowered.endswith(("_id", " id"))
    values = parsed.values[~parsed.missing]
    return bool(looks_like_id and parsed.is_numeric and len(np.unique(values)) == len(values))


def _first_bad_cell(table: RawTable, col: str, parsed: _Parsed) -> tuple[int, str]:
    row = int(np.flatnonzero(parsed.bad)[0])
    return int(table.lines[row]), str(table.frame[col].iloc[row])


def _non_numeric_error(table: RawTable, col: str, parsed: _Parsed) -> NonNumericColumnError:
    line, value = _first_bad_cell(table, col, parsed)
    n_bad = int(parsed.bad.sum())
    return NonNumericColumnError(
        f"feature column {col!r} has text {value!r} at line {line}"
        f"{f' ({n_bad} such cells)' if n_bad > 1 else ''}; fix or blank those cells, leave the "
        "column out (features / --ignore), or one-hot encode it if it is categorical (--one-hot)."
    )


@dataclass
class _Columns:
    """Feature matrix under construction."""

    names: list[str] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)
    missing: list[np.ndarray] = field(default_factory=list)

    def add(self, name: str, values: np.ndarray, missing: np.ndarray) -> None:
        self.names.append(name)
        self.values.append(values)
        self.missing.append(missing)


def _one_hot(table: RawTable, col: str, columns: _Columns, log: list[str]) -> None:
    cells = table.frame[col].astype(str)
    missing = _is_missing(table.frame[col])
    levels = sorted(set(cells[~missing]))
    if len(levels) > 100:
        raise NonNumericColumnError(
            f"column {col!r} has {len(levels)} distinct text values, too many to one-hot encode; "
            "leave it out (it is probably free text or an identifier)."
        )
    for level in levels:
        indicator = np.where(missing, np.nan, (cells == level).to_numpy(dtype=float))
        columns.add(f"{col}={level}", indicator, missing)
    log.append(f"one-hot encoded {col!r} into {len(levels)} indicator columns")


def _select_features(
    table: RawTable,
    features: Sequence[str] | None,
    excluded: set[str],
    one_hot: bool,
    log: list[str],
) -> _Columns:
    columns = _Columns()
    if features is not None:
        for col in features:
            parsed = _numeric_column(table.frame[col])
            if parsed.is_numeric:
                columns.add(col, parsed.values, parsed.missing)
            elif one_hot:
                _one_hot(table, col, columns, log)
            else:
                raise _non_numeric_error(table, col, parsed)
        return columns
    for col in table.columns:
        if col in excluded:
            continue
        parsed = _numeric_column(table.frame[col])
        if parsed.is_numeric:
            if _is_id_column(col, parsed):
                log.append(f"left out {col!r}: it looks like a row identifier")
                continue
            if parsed.missing.all():
                log.append(f"left out {col!r}: every cell is empty")
                continue
            columns.add(col, parsed.values, parsed.missing)
            continue
        n_present = int((~parsed.missing).sum())
        if n_present and parsed.bad.sum() <= 0.05 * n_present:
            # Almost all numbers: a typo in a numeric column, not a text column.
            raise _non_numeric_error(table, col, parsed)
        if one_hot:
            _one_hot(table, col, columns, log)
        else:
            log.append(f"left out text column {col!r} (one_hot=True / --one-hot encodes it)")
    return columns


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _sensitive_labels(
    table: RawTable,
    col: str,
    binarize: Mapping[str, float],
    bins: Mapping[str, int],
    log: list[str],
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Per-row labels (object array, None where missing), label order, missing mask."""
    cells = table.frame[col].astype(str)
    parsed = _numeric_column(table.frame[col])
    missing = parsed.missing.copy()
    if col in binarize or col in bins:
        if not parsed.is_numeric:
            line, value = _first_bad_cell(table, col, parsed)
            raise SensitiveColumnError(
                f"sensitive column {col!r} has text {value!r} at line {line}, so it cannot be "
                "binarised or binned by number; use it as categories instead."
            )
        values = parsed.values
        if col in binarize:
            threshold = float(binarize[col])
            below, above = f"{col}<{_format_number(threshold)}", f"{col}>={_format_number(threshold)}"
            labels = np.where(values < threshold, below, above).astype(object)
            order = [below, above]
            log.append(f"sensitive {col!r} binarised at {_format_number(threshold)}")
        else:
            n_bins = int(bins[col])
            if n_bins < 2:
                raise ParameterError(f"bins for {col!r} must be >= 2, got {n_bins}.")
            edges = np.unique(np.nanquantile(values[~missing], np.linspace(0, 1, n_bins + 1)))
            if len(edges) < 3:
                raise SensitiveColumnError(
                    f"sensitive column {col!r} has too few distinct values for {n_bins} quantile bins; "
                    "use its values as categories."
                )
            index = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
            order = [
                f"{col}∈[{_format_number(lo)}, {_format_number(hi)}{']' if i == len(edges) - 2 else ')'}"
                for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True))
            ]
            labels = np.array([order[i] for i in index], dtype=object)
            log.append(f"sensitive {col!r} cut into {len(order)} quantile bins")
        labels[missing] = None
        return labels, order, missing
    if parsed.is_numeric:
        distinct = np.unique(parsed.values[~missing])
        if len(distinct) > MAX_CATEGORIES:
            example = _format_number(float(np.median(distinct)))
            raise SensitiveColumnError(
                f"sensitive column {col!r} is numeric with {len(distinct)} distinct values, too many "
                f"to use as groups; binarise it (binarize={{{col!r}: {example}}}, CLI --binarize "
                f"{col}={example}) or cut it into quantile bins (CLI --bins {col}=4)."
            )
        order = [f"{col}={_format_number(v)}" for v in distinct]
        labels = np.array([None if m else f"{col}={_format_number(v)}" for v, m in zip(parsed.values, missing, strict=True)], dtype=object)
        return labels, order, missing
    distinct = sorted(set(cells[~missing]))
    if len(distinct) > 50:
        raise SensitiveColumnError(
            f"sensitive column {col!r} has {len(distinct)} distinct values; a group needs many rows, "
            "so choose a column with a few categories (or merge categories first)."
        )
    order = [f"{col}={v}" for v in distinct]
    labels = np.array([None if m else f"{col}={v}" for v, m in zip(cells, missing, strict=True)], dtype=object)
    return labels, order, missing


def _encode_dropping_small(
    label_frame: pd.DataFrame, small_groups: str, min_group_size: int, unit: str, log: list[str]
) -> tuple[GroupCodes, np.ndarray]:
    """Groups of ``label_frame`` and the mask of rows kept; with ``small_groups="drop"`` the rows
    of groups below ``min_group_size`` are dropped (and logged)."""
    groups = encode_groups(label_frame)
    keep = np.ones(len(label_frame), dtype=bool)
    if small_groups == "drop":
        sizes = groups.sizes()
        small = [i for i, n in enumerate(sizes) if n < min_group_size]
        if small:
            dropped = ", ".join(f"{groups.labels[i]!r} ({int(sizes[i])})" for i in small)
            keep = ~np.isin(groups.codes, small)
            groups = encode_groups(label_frame[keep].reset_index(drop=True))
            log.append(f"dropped groups below {min_group_size} {unit}: {dropped}")
    return groups, keep


def _describe_missing(table: RawTable, names: list[str], masks: list[np.ndarray]) -> str:
    parts = []
    for name, mask in zip(names, masks, strict=True):
        if mask.any():
            first = int(table.lines[np.flatnonzero(mask)[0]])
            parts.append(f"{name!r} ({int(mask.sum())} row{'s' if mask.sum() != 1 else ''}, first at line {first})")
    return ", ".join(parts[:6]) + (" …" if len(parts) > 6 else "")


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
    missing: str = "error",
    scaling: str = "standardize",
    min_group_size: int = 2,
    small_groups: str = "error",
) -> AuditData:
    """Validate a :class:`RawTable` for an audit and return :class:`AuditData`.

    Parameters
    ----------
    sensitive : str or list of str
        Sensitive column(s). Values are groups; several columns give intersectional groups.
    features : list of str, optional
        Feature columns. Default: every numeric column that is not sensitive, the label, ignored,
        or a row identifier (``ID``, ``*_id`` with unique values).
    label : str, optional
        Ground-truth column (clustering accuracy); never a feature.
    ignore : list of str
        Columns to leave out.
    one_hot : bool
        One-hot encode text (categorical) feature columns instead of leaving them out.
    binarize : {column: threshold}
        Numeric sensitive columns split into ``< threshold`` and ``>= threshold``.
    bins : {column: n_bins}
        Numeric sensitive columns cut into quantile bins.
    missing : {"error", "drop", "mean", "median"}
        Missing cells: stop with a message (default), drop the rows (counts are logged), or
        impute feature cells with the column mean/median (rows missing a group or label are
        dropped).
    scaling : {"standardize", "center", "none", "unit_norm"}
    min_group_size : int
        Fewest rows a group may have (default 2).
    small_groups : {"error", "drop"}
        What to do with groups below ``min_group_size``.
    """
    if missing not in MISSING_POLICIES:
        raise ParameterError(f"missing must be one of {', '.join(MISSING_POLICIES)}; got {missing!r}.")
    if small_groups not in ("error", "drop"):
        raise ParameterError(f"small_groups must be 'error' or 'drop'; got {small_groups!r}.")
    if min_group_size < 1:
        raise ParameterError(f"min_group_size must be >= 1; got {min_group_size}.")
    _check_scaling(scaling)
    sensitive = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    if not sensitive:
        raise SensitiveColumnError("choose at least one sensitive column (e.g. --sensitive sex).")
    binarize, bins = dict(binarize or {}), dict(bins or {})
    _require_columns(table, sensitive, "sensitive")
    _require_columns(table, list(binarize) + list(bins), "binarised/binned")
    for col in list(binarize) + list(bins):
        if col not in sensitive:
            raise ParameterError(f"{col!r} is binarised/binned but not a sensitive column; add it to sensitive.")
    _require_columns(table, ignore, "ignored")
    if label is not None:
        _require_columns(table, [label], "label")
    if features is not None:
        features = list(features)
        if not features:
            raise NoFeaturesError("the feature list is empty; name at least one feature column or omit it.")
        _require_columns(table, features, "feature")
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

    log: list[str] = list(table.log)
    excluded = set(sensitive) | set(ignore) | ({label} if label else set())
    columns = _select_features(table, features, excluded, one_hot, log)
    if not columns.names:
        raise NoFeaturesError(
            f"no numeric feature columns are left in {table.name} after excluding "
            f"{', '.join(map(repr, sorted(excluded)))}; choose feature columns or enable one-hot encoding."
        )

    # --- groups and label
    per_column = [_sensitive_labels(table, col, binarize, bins, log) for col in sensitive]
    group_missing = np.logical_or.reduce([m for _, _, m in per_column])
    label_values = None
    label_missing = np.zeros(len(table.frame), dtype=bool)
    if label is not None:
        label_missing = _is_missing(table.frame[label])
        label_values = table.frame[label].astype(str).to_numpy()

    # --- missing cells
    feature_missing = np.column_stack(columns.missing)
    any_feature_missing = feature_missing.any(axis=1)
    keep = np.ones(len(table.frame), dtype=bool)
    if any_feature_missing.any() or group_missing.any() or label_missing.any():
        names = list(columns.names) + sensitive + ([label] if label else [])
        masks = list(feature_missing.T) + [m for _, _, m in per_column] + ([label_missing] if label else [])
        described = _describe_missing(table, names, masks)
        if missing == "error":
            total = int((any_feature_missing | group_missing | label_missing).sum())
            raise MissingValueError(
                f"{total} row(s) have missing cells: {described}. Choose {term('missing', 'drop')} "
                f"to drop those rows, or {term('missing', 'mean')} / {term('missing', 'median')} to impute feature cells."
            )
        if missing == "drop":
            keep &= ~(any_feature_missing | group_missing | label_missing)
            log.append(f"dropped {int((~keep).sum())} row(s) with missing cells: {described}")
        else:
            keep &= ~(group_missing | label_missing)
            if (~keep).any():
                log.append(f"dropped {int((~keep).sum())} row(s) with no group or label value")
            if any_feature_missing.any():
                log.append(f"imputed missing feature cells with the column {missing}: {described}")
    if not keep.any():
        raise MissingValueError(f"no rows of {table.name} are left after dropping rows with missing cells.")

    X = np.column_stack(columns.values)[keep]
    if missing in ("mean", "median"):
        fill = np.nanmean(X, axis=0) if missing == "mean" else np.nanmedian(X, axis=0)
        X = np.where(np.isnan(X), fill, X)
    lines = table.lines[keep]

    # --- groups
    label_frame = pd.DataFrame(
        {col: pd.Categorical(labels[keep], categories=order) for col, (labels, order, _) in zip(sensitive, per_column, strict=True)}
    )
    groups, keep_rows = _encode_dropping_small(label_frame, small_groups, min_group_size, "rows", log)
    if not keep_rows.all():
        X, lines = X[keep_rows], lines[keep_rows]
        keep[np.flatnonzero(keep)[~keep_rows]] = False
    check_groups(groups, min_size=min_group_size, what=f"sensitive column(s) {', '.join(map(repr, sensitive))}")

    # --- constant features
    constant = np.ptp(X, axis=0) == 0
    names = list(columns.names)
    if constant.any():
        gone = [n for n, c in zip(names, constant, strict=True) if c]
        log.append(f"left out constant feature(s): {', '.join(map(repr, gone[:10]))}{' …' if len(gone) > 10 else ''}")
        X = X[:, ~constant]
        names = [n for n, c in zip(names, constant, strict=True) if not c]
        if not names:
            raise NoFeaturesError("every feature is constant over the kept rows; nothing varies to analyse.")
    log.append(f"scaling: {scaling}")
    return AuditData(
        X_raw=np.ascontiguousarray(X, dtype=float),
        feature_names=tuple(names),
        groups=groups,
        sensitive=tuple(sensitive),
        scaling=scaling,
        label=None if label_values is None else label_values[keep],
        label_name=label,
        lines=lines,
        source=_table_source(table),
        log=tuple(log),
    )


# ============================================================================ tensors
def _level_order(cells: pd.Series) -> list[str]:
    """Distinct labels of an index column: numeric order when every label is a number."""
    distinct = list(dict.fromkeys(cells))
    try:
        return sorted(distinct, key=float)
    except ValueError:
        return sorted(distinct)


def _cell_text(modes: Sequence[str], labels: Sequence[str]) -> str:
    return ", ".join(f"{mode}={label}" for mode, label in zip(modes, labels, strict=True))


def prepare_tensor(
    table: RawTable,
    *,
    index: Sequence[str],
    value: str,
    sensitive: str | Sequence[str],
    binarize: Mapping[str, float] | None = None,
    bins: Mapping[str, int] | None = None,
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

    * an index combination on two lines is a :class:`DuplicateCellError` (aggregate first);
    * a combination that never appears, or a line without a value, is a
      :class:`MissingCellError` unless ``fill`` gives the value for absent cells (e.g. ``0``
      for counts); the number filled is logged;
    * an empty index cell, a text value, or an entity with two different sensitive values is
      an error naming the line.

    Parameters
    ----------
    index : list of str
        Two or more index columns, entity first (``["user", "item", "context"]``).
    value : str
        The numeric value column.
    sensitive : str or list of str
        Per-entity sensitive column(s); several give intersections.
    binarize, bins :
        As in :func:`prepare`, for a numeric sensitive column.
    fill : float, optional
        Value for absent cells (and lines with an empty value). Default: stop with an error.
    scaling : str
        Default ``"none"`` (cells share one unit); see :func:`scale_features` for the others,
        applied to the columns of the entity unfolding.
    min_group_size, small_groups :
        As in :func:`prepare` (dropping a small group drops its entities).
    """
    index = list(index)
    sensitive = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    binarize, bins = dict(binarize or {}), dict(bins or {})
    if len(index) < 2:
        raise ParameterError(
            f"a tensor needs at least two index columns (entity first, e.g. entity,item,context); got {index}."
        )
    if len(set(index)) != len(index):
        raise ParameterError(f"an index column is listed twice: {index}.")
    if not sensitive:
        raise SensitiveColumnError("choose at least one sensitive column (e.g. --sensitive sex).")
    _require_columns(table, index, "tensor index")
    _require_columns(table, [value], "tensor value")
    _require_columns(table, sensitive, "sensitive")
    if value in index:
        raise ParameterError(f"column {value!r} cannot be both an index and the value column.")
    for col in sensitive:
        if col in index or col == value:
            raise ParameterError(f"sensitive column {col!r} cannot also be an index or the value column.")
    for col in list(binarize) + list(bins):
        if col not in sensitive:
            raise ParameterError(f"{col!r} is binarised/binned but not a sensitive column; add it to sensitive.")
    if fill is not None and not np.isfinite(fill):
        raise ParameterError(f"the fill value must be a finite number; got {fill!r}.")
    if min_group_size < 1:
        raise ParameterError(f"min_group_size must be >= 1; got {min_group_size}.")
    if small_groups not in ("error", "drop"):
        raise ParameterError(f"small_groups must be 'error' or 'drop'; got {small_groups!r}.")
    _check_scaling(scaling)
    log: list[str] = list(table.log)
    frame = table.frame

    # --- coordinates
    for col in index:
        missing = _is_missing(frame[col])
        if missing.any():
            line = int(table.lines[np.flatnonzero(missing)[0]])
            raise MissingValueError(
                f"index column {col!r} is empty at line {line} ({int(missing.sum())} such line(s)); "
                "every line needs all of its coordinates. Fill or delete those lines."
            )
    levels = [_level_order(frame[col]) for col in index]
    codes = np.column_stack(
        [pd.Categorical(frame[col], categories=labels).codes.astype(np.int64) for col, labels in zip(index, levels, strict=True)]
    )
    shape = tuple(len(labels) for labels in levels)
    flat = np.ravel_multi_index(codes.T, shape)
    order = np.argsort(flat, kind="stable")
    repeated = np.flatnonzero(np.diff(flat[order]) == 0)
    if repeated.size:
        first, second = order[repeated[0]], order[repeated[0] + 1]
        cell = _cell_text(index, [levels[m][codes[first, m]] for m in range(len(index))])
        raise DuplicateCellError(
            f"the cell ({cell}) appears on lines {int(table.lines[first])} and {int(table.lines[second])} "
            f"({repeated.size} repeated cell(s) in all); a tensor has one value per cell. Aggregate the "
            "duplicates first (e.g. average them) or delete the extra lines."
        )

    # --- values
    parsed = _numeric_column(frame[value])
    if not parsed.is_numeric:
        line, text = _first_bad_cell(table, value, parsed)
        raise NonNumericColumnError(
            f"tensor value column {value!r} has text {text!r} at line {line}; every value must be a number."
        )
    values = parsed.values
    n_cells = int(np.prod(shape))
    dims = " × ".join(map(str, shape))
    if parsed.missing.any():
        row = int(np.flatnonzero(parsed.missing)[0])
        cell = _cell_text(index, [levels[m][codes[row, m]] for m in range(len(index))])
        if fill is None:
            raise MissingCellError(
                f"{int(parsed.missing.sum())} line(s) have no {value!r} (first: line {int(table.lines[row])}, cell "
                f"{cell}). Fill those values, delete the lines, or give absent cells a value with "
                "fill= (CLI --tensor-fill VALUE)."
            )
        log.append(f"filled {int(parsed.missing.sum())} line(s) without a value with {fill:g}")
        values = np.where(parsed.missing, fill, values)
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
                "give absent cells a value with fill= (CLI --tensor-fill VALUE, e.g. 0 for counts)."
            )
        log.append(f"filled {absent} absent cell(s) of the {dims} tensor with {fill:g}")
        dense[np.isnan(dense)] = fill
    tensor = dense.reshape(shape)

    # --- per-entity sensitive attribute
    per_column = []
    entity_codes = codes[:, 0]
    first_row = np.unique(entity_codes, return_index=True)[1]  # every entity occurs (levels come from the lines)
    for col in sensitive:
        labels, order_labels, missing = _sensitive_labels(table, col, binarize, bins, log)
        present = pd.DataFrame({"entity": entity_codes[~missing], "label": labels[~missing]})
        by_entity = present.groupby("entity")["label"]
        per_entity = by_entity.first().reindex(range(shape[0]))
        without = np.flatnonzero(per_entity.isna().to_numpy())
        if without.size:
            e = int(without[0])
            line = int(table.lines[first_row[e]])
            raise SensitiveColumnError(
                f"{index[0]} {levels[0][e]!r} has no value in sensitive column {col!r} (first line "
                f"{line}); every entity needs its group."
            )
        conflicting = np.flatnonzero(by_entity.nunique().reindex(range(shape[0])).to_numpy() > 1)
        if conflicting.size:
            e = int(conflicting[0])
            rows = np.flatnonzero((entity_codes == e) & ~missing)
            distinct = list(dict.fromkeys(labels[rows]))
            a = rows[labels[rows] == distinct[0]][0]
            b = rows[labels[rows] == distinct[1]][0]
            raise SensitiveColumnError(
                f"sensitive column {col!r} must be constant for each {index[0]}, but {levels[0][e]!r} has "
                f"{distinct[0]!r} at line {int(table.lines[a])} and {distinct[1]!r} at line "
                f"{int(table.lines[b])}. Fix the data so that each {index[0]} has one group."
            )
        per_entity = per_entity.to_numpy(dtype=object)
        per_column.append((per_entity, order_labels))
    label_frame = pd.DataFrame(
        {col: pd.Categorical(values_, categories=order_) for col, (values_, order_) in zip(sensitive, per_column, strict=True)}
    )
    groups, keep = _encode_dropping_small(label_frame, small_groups, min_group_size, "entities", log)
    check_groups(groups, min_size=min_group_size, what=f"sensitive column(s) {', '.join(map(repr, sensitive))} (per {index[0]})")
    tensor = tensor[keep]
    levels[0] = [label for label, kept in zip(levels[0], keep, strict=True) if kept]
    first_lines = table.lines[first_row][keep]
    shape = tensor.shape
    log.append(f"tensor of shape {' × '.join(map(str, shape))} ({' × '.join(index)}) from {len(frame)} line(s); value {value!r}")
    log.append(f"scaling: {scaling}")
    return AuditData(
        X_raw=np.ascontiguousarray(tensor.reshape(shape[0], -1)),
        feature_names=_tensor_feature_names(index, levels),
        groups=groups,
        sensitive=tuple(sensitive),
        scaling=scaling,
        lines=first_lines,
        source=_table_source(table),
        log=tuple(log),
        tensor_shape=tuple(int(d) for d in shape),
        tensor_modes=tuple(index),
        tensor_levels=tuple(tuple(labels) for labels in levels),
    )


def load(source, *, sensitive, skip_rows: int = 0, header: bool | None = None, max_mb: float = DEFAULT_MAX_MB, **options) -> AuditData:
    """:func:`read_table` then :func:`prepare` in one call."""
    table = read_table(source, skip_rows=skip_rows, header=header, max_mb=max_mb)
    return prepare(table, sensitive=sensitive, **options)
