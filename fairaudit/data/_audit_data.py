"""``AuditData``: the validated input every family audits."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import (
    EmptyFileError,
    FairAuditError,
    MissingValueError,
    NegativeValueError,
    ParameterError,
)
from ..groups import INTERSECTION_SEPARATOR, GroupCodes, check_groups, encode_groups
from ..vocabulary import term
from ._accounting import whole_accounting
from ._scaling import check_magnitude, check_scaling, scale_features

NONNEGATIVE_POLICIES = ("error", "shift", "clip")
_HASH_ROWS = 1 << 16


@dataclass(frozen=True)
class AuditData:
    """Validated input for an audit: a numeric matrix, groups, names and a record of choices.

    Attributes
    ----------
    X_raw : ndarray of shape (n_rows, n_features)
        Finite feature values after encoding and missing-value handling, before scaling.
        Read-only; it may be a view of the table it was prepared from (no copy).
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
    accounting : dict
        Every row and column the user gave, accounted for: ``groups`` (per group ``rows_read``,
        ``rows_used`` and ``dropped`` by reason), ``features`` (the columns used), ``excluded``
        (each left-out column with a ``reason`` and a ``detail``) and ``warnings`` (e.g. dropping
        removed a much larger share of one group). See :mod:`fairaudit.data._accounting`.
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
    accounting: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if not self.accounting:
            object.__setattr__(self, "accounting", whole_accounting(self.groups, list(self.feature_names)))

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
        """The feature matrix under ``scaling`` (default: this data's own choice).

        Raises a ParameterError when the values are so large that the sums of squares the
        methods compute would overflow (only possible without standardising)."""
        scaling = scaling or self.scaling
        return check_magnitude(scale_features(self.X_raw, scaling), self.feature_names, scaling)

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

    def where(self, row: int) -> str:
        """``"line 17"`` (or ``"row 17"``) — how messages cite row index ``row``."""
        if self.lines is None:
            return f"row {row}"
        return f"{self.source.get('line_word', 'line')} {int(self.lines[row])}"

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
            return np.array(X)
        if policy == "clip":
            return np.clip(X, 0.0, None)
        if policy == "shift":
            shifted = X - np.minimum(X.min(axis=0), 0.0)
            return check_magnitude(shifted, self.feature_names, "none")
        row, col = np.argwhere(negative)[0]
        columns = [self.feature_names[j] for j in np.flatnonzero(negative.any(axis=0))]
        raise NegativeValueError(
            f"NMF needs non-negative data, but {len(columns)} feature(s) have negative values "
            f"({', '.join(map(repr, columns[:5]))}{' …' if len(columns) > 5 else ''}; first: "
            f"{self.feature_names[col]!r} = {X[row, col]:g} at {self.where(row)}). Shift each feature by its "
            f"minimum ({term('nonnegative', 'shift')}), clip negatives to 0 ({term('nonnegative', 'clip')}), "
            "or leave those columns out."
        )

    # -- provenance --------------------------------------------------------------------------
    def fingerprint(self) -> dict:
        """What identifies this input in a report: file, hash, shape, groups, choices, and the
        accounting (``groups``, ``features``, ``excluded``, ``warnings``).

        For tensor input the unfolding's column names (one per cell of the other modes) are
        shortened to the first 20 and a count; ``tensor`` gives the modes, shape and levels.
        """
        names = list(self.feature_names)
        if self.is_tensor and len(names) > 20:
            names = names[:20] + [f"… ({len(names) - 20} more)"]
        accounting = self.accounting
        fingerprint = {
            "name": self.source.get("name", "array"),
            "sha256": self.source.get("sha256") or _array_sha256(self.X_raw, self.groups.codes),
            "bytes": self.source.get("bytes"),
            "format": self.source.get("format"),
            "encoding": self.source.get("encoding"),
            "delimiter": self.source.get("delimiter"),
            "rows_read": self.source.get("rows_read", self.n_rows),
            "rows": self.n_rows,
            "n_features": self.n_features,
            "features": list(accounting.get("features", names)),
            "feature_names": names,
            "sensitive": list(self.sensitive),
            "group_sizes": self.group_sizes(),
            "groups": [dict(entry) for entry in accounting.get("groups", [])],
            "excluded": [dict(entry) for entry in accounting.get("excluded", [])],
            "warnings": list(accounting.get("warnings", [])),
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
        _hash_rows(digest, self.X_raw)
        digest.update(np.ascontiguousarray(self.groups.codes).tobytes())
        digest.update(repr((self.feature_names, self.groups.labels, self.scaling, self.tensor_shape)).encode())
        if self.label is not None:
            digest.update(np.asarray(self.label, dtype=str).astype("U").tobytes())
        return digest.hexdigest()[:16]

    # -- construction from arrays ------------------------------------------------------------
    @classmethod
    def from_tensor(cls, X, sensitive_features, **options) -> AuditData:
        """Tensor :class:`AuditData` from an N-way array; see :func:`tensor_from_arrays`."""
        from ._tensor import tensor_from_arrays

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
        check_scaling(scaling)
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


def _hash_rows(digest, X: np.ndarray) -> None:
    """Feed ``X`` to ``digest`` in row blocks: the same bytes for any memory layout, and never
    a whole second copy of a large matrix."""
    for start in range(0, X.shape[0], _HASH_ROWS):
        digest.update(np.ascontiguousarray(X[start : start + _HASH_ROWS]).data)


def _array_sha256(X: np.ndarray, codes: np.ndarray) -> str:
    digest = hashlib.sha256()
    _hash_rows(digest, X)
    digest.update(np.ascontiguousarray(codes).tobytes())
    return digest.hexdigest()
