"""Fitted models that leave fairaudit as data: ``.npz`` arrays plus a JSON manifest, no pickle.

An audit ends in a decision; this module lets the user take the representation they chose with
them. ``run_audit(data, AuditConfig(keep_models=True))`` keeps every fitted estimator in
``AuditResult.models[(method, variant, rank)]``; :func:`export_models` writes each one to a
directory of two files, and :func:`load_model` reads one back anywhere (no fairaudit state, no
pickle: the arrays are read with ``allow_pickle=False``)::

    pca-fair_eig-rank3/
      manifest.json   what the model is and how to feed it (below)
      arrays.npz      the fitted arrays (e.g. the PCA map's directions, NMF's H)

The manifest holds the method, variant and rank, the features in order, the preprocessing that
turns a raw row into what the estimator saw (``x ↦ (max(x, lower) − center) / scale`` per
feature: the data's scaling for PCA and CP, the paper's non-negativity and unit-ℓ2 scaling for
NMF, the [0, 1] rescaling for feature selection), the sensitive attribute and group sizes, the
fairaudit version, the data fingerprint (file name and sha256), this fit's own audit records,
and the shape and sha256 of the arrays (a model whose arrays were changed or swapped is refused).
It holds no training row: no NMF ``W``, no CP entity factor.

A loaded model is a :class:`PortableModel` with scikit-learn's transformer interface:
``transform`` applies the preprocessing and then the family's own ``transform`` (the PCA map's
coordinates, NMF's non-negative least squares for ``W``, CP's least-squares entity embedding,
the selected columns), ``inverse_transform`` maps back to the original units where a
reconstruction exists, and ``group_errors`` gives the family's per-group error on new rows with
their groups. Data whose columns do not match the manifest are refused with the differences
named.

Kinds (``manifest["kind"]``): ``linear_map`` (the PCA family's ``P = U diag(w) Uᵀ``),
``erased_map`` (a PCA-family map followed by LEACE, ``AuditConfig(leace=True)``'s ``+leace``
variants), ``nmf`` (``H``), ``selection`` (kept columns, in selection order), ``cp`` (the non-entity CP
factors and the entity embedding's normalisation).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import io
import json
import math
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import TransformerMixin
from sklearn.utils.metaestimators import available_if

from ._version import __version__
from .archive import read_npz
from .audit import (
    AuditConfig,
    AuditResult,
    erased_base,
    erases_itself,
    family_options,
    family_run,
    is_sweep_variant,
    run_audit,
    split_variant,
    whole_metrics,
)
from .cpd import _tensor
from .cpd.estimator import FairCPD, normalised_embedding
from .data import AuditData, FeatureRows, RawTable, feature_rows, scaling_parameters
from .errors import (
    FeatureMismatchError,
    MissingValueError,
    ModelFileError,
    NegativeValueError,
    ParameterError,
    UnknownColumnError,
)
from .fs._selector import FittedSelector, SweepSelection
from .groups import encode_groups
from .modelfile import (
    ARRAYS_FILE,
    FORMAT,
    FORMAT_VERSION,
    INDEX_FILE,
    MANIFEST_FILE,
    MAX_MODEL_BYTES,
    parse_manifest,
    read_model_source,
)
from .nmf import NMF
from .nmf._base import NMFBase
from .nmf.audit import DEFAULT_OPTIONS as NMF_DEFAULTS
from .pca._base import GroupPCABase
from .pca.leace import LeacePCA
from .plots import variant_title
from .vocabulary import term


# ============================================================================ preprocessing
@dataclass(frozen=True)
class Preprocessing:
    """What turns a raw row into the row an estimator was fitted on, feature by feature:
    ``x ↦ (max(x, clip_lower) − center) / scale`` (no clip when ``clip_lower`` is ``None``).

    Built by :func:`preprocessing_for` with the same values the audit's families used, so a
    training row comes out bit for bit as the family saw it.
    """

    center: np.ndarray
    scale: np.ndarray
    clip_lower: float | None = None
    steps: tuple[str, ...] = ()

    def apply(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        if self.clip_lower is not None:
            X = np.maximum(X, self.clip_lower)
        return (X - self.center) / self.scale

    def undo(self, Xp: np.ndarray) -> np.ndarray:
        """Back to the original units (a clip cannot be undone: values stay at the bound)."""
        return np.asarray(Xp, dtype=float) * self.scale + self.center

    def to_dict(self) -> dict:
        return {
            "formula": "(max(x, clip_lower) - center) / scale, per feature" if self.clip_lower is not None
            else "(x - center) / scale, per feature",
            "steps": list(self.steps),
            "clip_lower": self.clip_lower,
            "center": [float(v) for v in self.center],
            "scale": [float(v) for v in self.scale],
        }

    @classmethod
    def from_dict(cls, payload: Mapping, n_features: int) -> Preprocessing:
        center = np.asarray(payload["center"], dtype=float)
        scale = np.asarray(payload["scale"], dtype=float)
        if center.shape != (n_features,) or scale.shape != (n_features,):
            raise ModelFileError(
                f"the manifest's preprocessing has {center.size} centre and {scale.size} scale values for "
                f"{n_features} features; the manifest is damaged."
            )
        if not (np.isfinite(center).all() and np.isfinite(scale).all() and (scale > 0).all()):
            raise ModelFileError("the manifest's preprocessing values are not finite positive scales; the manifest is damaged.")
        clip = payload.get("clip_lower")
        return cls(center, scale, None if clip is None else float(clip), tuple(payload.get("steps", ())))


def preprocessing_for(method: str, data: AuditData, options: Mapping | None = None) -> Preprocessing:
    """The preprocessing ``method``'s audit applied to ``data`` (``options``: the family's
    ``AuditConfig.options[method]``).

    * ``pca``, ``cpd``: the data's scaling (:func:`fairaudit.data.scaling_parameters`).
    * ``nmf``: the Fairer-NMF input of :func:`fairaudit.nmf.audit.nmf_input` — the
      non-negativity policy (``shift``: subtract each feature's negative minimum; ``clip``: clip
      at 0), then per-feature unit ℓ2 norms over the rows NMF kept (§6.1).
    * ``fs``: every feature rescaled to [0, 1] by its training minimum and range
      (:func:`fairaudit.fs.audit.minmax`), or the data's scaling with ``scaling="data"``.
    """
    options = dict(options or {})
    X = data.X_raw
    if method in ("pca", "cpd"):
        center, scale = scaling_parameters(X, data.scaling)
        return Preprocessing(center, scale, None, (f"scaling: {data.scaling}",))
    if method == "nmf":
        return _nmf_preprocessing(data, {**NMF_DEFAULTS, **{k: v for k, v in options.items() if v is not None}})
    if method == "fs":
        if options.get("scaling", "minmax") == "data":
            center, scale = scaling_parameters(X, data.scaling)
            return Preprocessing(center, scale, None, (f"scaling: {data.scaling}",))
        low, high = X.min(axis=0), X.max(axis=0)
        return Preprocessing(low, np.where(high > low, high - low, 1.0), None, ("min-max to [0, 1] (training minimum and range)",))
    raise ParameterError(f"no export for method {method!r}.")


def _nmf_preprocessing(data: AuditData, options: Mapping) -> Preprocessing:
    policy = options["nonnegative"]
    X = data.nonnegative(policy)  # stops here exactly as the audit did for negative data under "error"
    shift = np.minimum(data.X_raw.min(axis=0), 0.0) if policy == "shift" else np.zeros(data.n_features)
    steps = []
    if policy == "shift" and (shift < 0).any():
        steps.append("shift: subtract each feature's training minimum where it is negative")
    clip = 0.0 if policy == "clip" else None
    if clip is not None:
        steps.append("clip negative values at 0")
    if options["zero_rows"] == "drop":
        X = X[(X > 0).any(axis=1)]
    offset, scale = scaling_parameters(X, options["scaling"])
    if np.any(offset != 0):  # pragma: no cover - the NMF scalings never centre
        raise ParameterError(f"NMF scaling {options['scaling']!r} centres the data; NMF input must stay non-negative.")
    steps.append(f"NMF scaling: {options['scaling']}")
    return Preprocessing(shift, scale, clip, tuple(steps))


# ============================================================================ the portable model
def _input_matrix(X, features: Sequence[str], tensor_shape: tuple[int, ...] | None) -> np.ndarray:
    """``X`` as a float matrix whose columns are the model's features, in order; refuses data
    whose columns do not match (by name for a DataFrame, by count for an array)."""
    n = len(features)
    if isinstance(X, pd.DataFrame):
        names = [str(c) for c in X.columns]
        missing = [f for f in features if f not in names]
        extra = [c for c in names if c not in set(features)]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {len(missing)} of the model's features ({_listed(missing)})")
            if extra:
                parts.append(f"{len(extra)} column(s) the model was not fitted on ({_listed(extra)})")
            raise FeatureMismatchError(
                f"the data's columns do not match the model's features: {'; '.join(parts)}. The model needs "
                f"exactly its {n} features ({_listed(features)}); select them, e.g. X[model.feature_names_in_]."
            )
        X = X.set_axis(names, axis=1)[list(features)]
        try:
            X = X.to_numpy(dtype=float)
        except (TypeError, ValueError):
            bad = next(c for c in features if not pd.api.types.is_numeric_dtype(X[c]))
            raise FeatureMismatchError(f"feature {bad!r} is not numeric; the model needs numbers in every feature.") from None
    else:
        X = np.asarray(X, dtype=float)
        if tensor_shape is not None and X.ndim == len(tensor_shape) + 1 and X.shape[1:] == tensor_shape:
            X = X.reshape(X.shape[0], -1)
        if X.ndim != 2 or X.shape[1] != n:
            shape = " × ".join(map(str, X.shape))
            raise FeatureMismatchError(
                f"the data have shape {shape}, but the model was fitted on {n} features ({_listed(features)}); "
                "give one row per sample with these columns in this order (or a DataFrame with these names)"
                + (f", or an array of shape (entities, {', '.join(map(str, tensor_shape))})." if tensor_shape else ".")
            )
    if not np.isfinite(X).all():
        row, col = np.argwhere(~np.isfinite(X))[0]
        raise MissingValueError(
            f"the data have a missing or infinite value in row {row}, feature {features[col]!r}; the model needs "
            "a number in every cell (drop or fill those rows first)."
        )
    return X


def _listed(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(map(repr, list(names)[:limit]))
    return shown + (f" … (+{len(names) - limit})" if len(names) > limit else "")


def _has_reconstruction(model: PortableModel) -> bool:
    return model.reconstructs


class PortableModel(TransformerMixin):
    """A fitted fairaudit model read from (or ready to be written to) a manifest and arrays.

    Use :func:`load_model` to read one and :func:`from_estimator` / :func:`export_models` to
    make one. It is already fitted: ``fit`` returns it unchanged, so it can sit in a
    scikit-learn ``Pipeline``.

    Attributes
    ----------
    manifest : dict
        Everything the manifest says (method, variant, rank, features, preprocessing, data
        fingerprint, this fit's audit records, …).
    arrays : dict of str → ndarray
    preprocessing : Preprocessing
    feature_names_in_ : ndarray of str
        The features, in the order an array must give them.
    n_features_in_ : int
    method, variant, rank : str, str, int
    """

    kind: ClassVar[str] = ""
    reconstructs: ClassVar[bool] = True
    error_metric: ClassVar[str] = ""
    """The audit metric :meth:`group_errors` reproduces (``error``, ``rel_error``, ``residual_fit``)."""
    note: ClassVar[str] = ""
    """What ``transform`` does with new rows, written into the manifest's ``notes``."""

    def __init__(self, manifest: Mapping, arrays: Mapping[str, np.ndarray]):
        self.manifest = dict(manifest)
        self.arrays = {name: np.asarray(value) for name, value in arrays.items()}
        features = [str(f) for f in self.manifest["features"]]
        self.feature_names_in_ = np.asarray(features, dtype=object)
        self.n_features_in_ = len(features)
        self.preprocessing = Preprocessing.from_dict(self.manifest["preprocessing"], self.n_features_in_)
        self._check_arrays()

    # -- what it is -------------------------------------------------------------------------------
    @property
    def method(self) -> str:
        return self.manifest["method"]

    @property
    def variant(self) -> str:
        return self.manifest["variant"]

    @property
    def rank(self) -> int:
        return int(self.manifest["rank"])

    @property
    def tensor_shape(self) -> tuple[int, ...] | None:
        shape = self.manifest.get("tensor_shape")
        return None if shape is None else tuple(int(d) for d in shape)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        return np.asarray(self.manifest["outputs"], dtype=object)

    def describe(self) -> str:
        """One line: what the model is and what it was fitted on."""
        data = self.manifest.get("data", {})
        return (
            f"{self.manifest.get('title', self.variant)} ({self.method}/{self.variant}, rank {self.rank}) fitted on "
            f"{data.get('name', '?')} ({data.get('rows', '?')} rows, sha256 {str(data.get('sha256', '?'))[:12]}…) by "
            f"fairaudit {self.manifest.get('fairaudit_version', '?')}: {self.n_features_in_} features in, "
            f"{len(self.manifest['outputs'])} out"
        )

    def __repr__(self) -> str:
        return f"PortableModel({self.method}/{self.variant}, rank {self.rank})"

    # -- using it ---------------------------------------------------------------------------------
    def fit(self, X=None, y=None, **fit_params):
        """Already fitted: returns ``self`` unchanged (for use inside a ``Pipeline``)."""
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return True

    def preprocess(self, X, *, row_labels: Sequence[str] | None = None) -> np.ndarray:
        """``X`` (raw values, the manifest's features) as the estimator saw its training rows.
        ``row_labels`` name the rows in messages (e.g. file lines)."""
        return self.preprocessing.apply(_input_matrix(X, list(self.feature_names_in_), self.tensor_shape))

    def transform(self, X) -> np.ndarray:
        """The representation of the rows of ``X`` (raw values; a DataFrame with the manifest's
        feature names, in any order, or an array with the features in the manifest's order)."""
        return self._represent(self.preprocess(X))

    @available_if(_has_reconstruction)
    def inverse_transform(self, Z) -> np.ndarray:
        """Rows in the original units reconstructed from the representation ``Z``."""
        return self.preprocessing.undo(self._reconstruct(np.asarray(Z, dtype=float)))

    @available_if(_has_reconstruction)
    def reconstruction_errors(self, X) -> np.ndarray:
        """Per row, the squared distance between the preprocessed row and its reconstruction
        (in the space the model was fitted in, where the audit measures errors)."""
        Xp = self.preprocess(X)
        return np.sum((Xp - self._reconstruct(self._represent(Xp))) ** 2, axis=1)

    @available_if(_has_reconstruction)
    def group_errors(self, X, sensitive_features) -> pd.Series:
        """The family's per-group reconstruction metric on ``X`` (named :attr:`error_metric`):
        PCA ``error`` ‖A_i − A_i P‖²_F / m_i (rows centred by the model's mean), NMF
        ``rel_error`` ‖X_ℓ − W_ℓH‖_F / ‖X_ℓ‖_F (``W`` by non-negative least squares), CP
        ``residual_fit`` per group."""
        Xp = self.preprocess(X)
        groups = encode_groups(sensitive_features, n_rows=Xp.shape[0])
        residual = Xp - self._reconstruct(self._represent(Xp))
        values = [self._group_error(Xp[mask], residual[mask]) for mask in groups.masks()]
        return pd.Series(values, index=pd.Index(groups.labels, name="group"), name=self.error_metric)

    # -- saving -----------------------------------------------------------------------------------
    def _payload(self) -> tuple[dict, bytes]:
        buffer = io.BytesIO()
        np.savez(buffer, **self.arrays)
        blob = buffer.getvalue()
        manifest = dict(self.manifest)
        manifest["arrays"] = {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in self.arrays.items()}
        manifest["arrays_sha256"] = hashlib.sha256(blob).hexdigest()
        return manifest, blob

    def save(self, path) -> Path:
        """Write ``manifest.json`` and ``arrays.npz`` into the directory ``path`` (created)."""
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise ParameterError(f"{path} is a file; a model is saved as a directory (manifest.json + arrays.npz).")
        from .report import write_outputs

        manifest, blob = self._payload()
        # each file whole (written beside itself, then renamed), both or neither
        write_outputs(self, ((path / ARRAYS_FILE, lambda _: blob), (path / MANIFEST_FILE, lambda _: _dumps(manifest))))
        return path

    def to_zip(self) -> bytes:
        """The two files in one ZIP archive (what the dashboard offers for download)."""
        manifest, blob = self._payload()
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(MANIFEST_FILE, _dumps(manifest))
            archive.writestr(ARRAYS_FILE, blob)
        return buffer.getvalue()

    # -- per kind ---------------------------------------------------------------------------------
    arrays_spec: ClassVar[dict[str, tuple[str, ...]]] = {}
    """Each array the kind needs and its shape in the manifest's terms — ``outputs`` (the number of
    output columns), ``features`` (of input features), ``rank`` —, checked when a model is
    loaded (before its arrays are read) and when one is made: a new kind declares its arrays here."""
    integer_arrays: ClassVar[frozenset[str]] = frozenset()
    """Arrays of indices (whole numbers); every other array holds finite real numbers."""

    @classmethod
    def array_shapes(cls, manifest: Mapping) -> dict[str, list[tuple[int, ...]]]:
        """The shapes each array of :attr:`arrays_spec` may have for ``manifest``."""
        dims = {"outputs": len(manifest["outputs"]), "features": len(manifest["features"]), "rank": int(manifest["rank"])}
        return {name: [tuple(dims[d] for d in spec)] for name, spec in cls.arrays_spec.items()}

    def _check_arrays(self) -> None:
        """Every declared array present, of its shape, of finite real numbers (indices: whole
        numbers), then the kind's own conditions (:meth:`_check_values`)."""
        for name, shapes in self.array_shapes(self.manifest).items():
            if name not in self.arrays:
                raise ModelFileError(f"the model's arrays lack {name!r}; the files are damaged or from another program.")
            array = self.arrays[name]
            if array.shape not in shapes:
                raise ModelFileError(
                    f"array {name!r} has shape {_shape(array.shape)}; a {self.kind} model with {len(self.manifest['outputs'])} "
                    f"output(s) and {self.n_features_in_} feature(s) needs {' or '.join(map(_shape, shapes))}."
                )
            if name in self.integer_arrays:
                if array.dtype.kind not in "iu":
                    raise ModelFileError(f"array {name!r} holds {array.dtype} values; it needs whole numbers (column indices).")
                continue
            if array.dtype.kind not in "biuf":
                raise ModelFileError(f"array {name!r} holds {array.dtype} values; it needs real numbers.")
            array = np.asarray(array, dtype=float)
            if not np.isfinite(array).all():
                raise ModelFileError(f"array {name!r} holds NaN or infinite values; a model's arrays are finite numbers.")
            self.arrays[name] = array
        self._check_values()

    def _check_values(self) -> None:
        """The kind's conditions on its arrays' values (none by default)."""

    def _represent(self, Xp: np.ndarray) -> np.ndarray:  # pragma: no cover - per kind
        raise NotImplementedError

    def _reconstruct(self, Z: np.ndarray) -> np.ndarray:  # pragma: no cover - per kind
        raise NotImplementedError

    @staticmethod
    def _group_error(Xp: np.ndarray, residual: np.ndarray) -> float:  # pragma: no cover - per kind
        raise NotImplementedError

    @classmethod
    def arrays_of(cls, estimator) -> tuple[dict, dict]:  # pragma: no cover - per kind
        """``(arrays, manifest additions)`` of a fitted estimator of this kind."""
        raise NotImplementedError


class _RestoredModel(PortableModel):
    """A kind whose ``transform`` and ``inverse_transform`` are those of the family's own
    estimator, restored from the arrays (:meth:`_estimator`)."""

    def _estimator(self):  # pragma: no cover - per kind
        raise NotImplementedError

    def _represent(self, Xp):
        return self._estimator().transform(Xp)

    def _reconstruct(self, Z):
        return self._estimator().inverse_transform(Z)


def _relative_error(Xp: np.ndarray, residual: np.ndarray) -> float:
    """``‖residual‖_F / ‖Xp‖_F`` (0 for an all-zero block)."""
    norm = float(np.linalg.norm(Xp))
    return float(np.linalg.norm(residual)) / norm if norm > 0 else 0.0


def _shape(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


class LinearMapModel(_RestoredModel):
    """The PCA family's map ``P = U diag(w) Uᵀ`` (Samadi et al.'s affine projection when
    ``w ≠ 1``) with its centring: ``transform = (x − mean) U diag(w)``,
    ``inverse_transform = z Uᵀ + mean`` (so ``inverse_transform(transform(x)) = (x − mean)P + mean``)."""

    kind = "linear_map"
    error_metric = "error"
    note = (
        "transform(x) = (preprocessed x − mean) U diag(w): the map the audit measured, applied to any row; "
        "on the training rows group_errors reproduces the audit's per-group error."
    )
    arrays_spec = {"components": ("outputs", "features"), "weights": ("outputs",), "mean": ("features",)}

    def _estimator(self) -> GroupPCABase:
        estimator = GroupPCABase(n_components=self.rank)
        estimator.components_ = self.arrays["components"]
        estimator.component_weights_ = self.arrays["weights"]
        estimator.mean_ = self.arrays["mean"]
        estimator.n_features_in_ = self.n_features_in_
        return estimator

    @staticmethod
    def _group_error(Xp, residual):
        return float(np.sum(residual * residual) / residual.shape[0])

    @classmethod
    def arrays_of(cls, estimator):
        arrays = {"components": estimator.components_, "weights": estimator.component_weights_, "mean": estimator.mean_}
        return arrays, {"outputs": [f"pc{j + 1}" for j in range(estimator.components_.shape[0])]}


class ErasedMapModel(_RestoredModel):
    """A PCA-family map followed by LEACE (:class:`~fairaudit.pca.LeacePCA`, the variants
    ``<name>+leace``): ``transform = (x − mean) T`` with ``T = U diag(w)(I − W Q (W⁺Q)ᵀ)`` the base
    map's coordinates with the groups' linear information erased; ``inverse_transform = z T⁺ +
    mean``, the best linear reconstruction from them (the audit's ``error``)."""

    kind = "erased_map"
    error_metric = "error"
    note = (
        "transform(x) = (preprocessed x − mean) T: the base map's coordinates after LEACE (the eraser fitted on the "
        "training rows: no linear classifier predicts their group better than a constant); inverse_transform is the "
        "best linear reconstruction from them, so on the training rows group_errors reproduces the audit's error."
    )
    arrays_spec = {"representation": ("features", "outputs"), "mean": ("features",)}

    def _estimator(self) -> LeacePCA:
        estimator = LeacePCA(n_components=self.rank)
        estimator.representation_ = self.arrays["representation"]
        estimator.mean_ = self.arrays["mean"]
        estimator.n_features_in_ = self.n_features_in_
        return estimator

    _group_error = staticmethod(LinearMapModel._group_error)

    @classmethod
    def arrays_of(cls, estimator):
        arrays = {"representation": estimator.representation_, "mean": estimator.mean_}
        return arrays, {"outputs": [f"pc{j + 1}" for j in range(estimator.representation_.shape[1])]}


class NMFModel(_RestoredModel):
    """NMF's dictionary ``H``: ``transform`` is the non-negative least-squares ``W`` of each row
    (:meth:`fairaudit.nmf.NMF.transform`), ``inverse_transform`` is ``W H``."""

    kind = "nmf"
    error_metric = "rel_error"
    note = (
        "transform gives each row's non-negative least-squares W for the fitted H. On the training rows this W "
        "reconstructs at least as well as the W the fit stopped at, so per-group relative errors can be slightly "
        "lower than the audit's (equal for Fairer-NMF AM, whose W step is this least-squares problem)."
    )
    arrays_spec = {"H": ("outputs", "features")}

    def _check_values(self) -> None:
        if (self.arrays["H"] < 0).any():
            raise ModelFileError("array 'H' holds negative values; an NMF dictionary is non-negative.")

    def _estimator(self) -> NMF:
        estimator = NMF(n_components=self.rank)
        estimator.components_ = self.arrays["H"]
        estimator.n_features_in_ = self.n_features_in_
        return estimator

    def preprocess(self, X, *, row_labels: Sequence[str] | None = None) -> np.ndarray:
        Xp = super().preprocess(X)
        negative = Xp < 0
        if negative.any():
            row, col = np.argwhere(negative)[0]
            where = row_labels[row] if row_labels is not None else f"row {row}"
            raise NegativeValueError(
                f"{int(negative.any(axis=1).sum())} row(s) are negative after the model's preprocessing (first: {where}, "
                f"feature {self.feature_names_in_[col]!r} = {_raw_value(X, row, col)}): NMF needs non-negative "
                f"input, and these values lie below what the model was fitted on ({'; '.join(self.preprocessing.steps)}). "
                "Leave those rows out, or refit the model on data that include such values."
            )
        return Xp

    _group_error = staticmethod(_relative_error)

    @classmethod
    def arrays_of(cls, estimator):
        H = estimator.components_
        return {"H": H}, {"outputs": [f"w{j + 1}" for j in range(H.shape[0])]}


def _raw_value(X, row: int, col: int) -> str:
    try:
        value = X.iloc[row][col] if isinstance(X, pd.DataFrame) else np.asarray(X)[row, col]
    except (IndexError, KeyError, TypeError):
        return "?"
    return f"{float(value):g}" if np.isscalar(value) else str(value)


class SelectionModel(PortableModel):
    """A feature selection: ``transform`` keeps the selected columns (preprocessed as the audit
    measured them), in selection order. No reconstruction."""

    kind = "selection"
    reconstructs = False
    note = "transform keeps the selected columns, preprocessed as the audit measured them, most important first."
    arrays_spec = {"selected": ("outputs",)}
    integer_arrays = frozenset({"selected"})

    def _check_values(self) -> None:
        selected = self.arrays["selected"]
        outside = selected[(selected < 0) | (selected >= self.n_features_in_)]
        if len(outside):
            raise ModelFileError(
                f"array 'selected' holds the column index {int(outside[0])}, outside the model's {self.n_features_in_} features."
            )
        if len(np.unique(selected)) < len(selected):
            raise ModelFileError("array 'selected' holds a column index twice; a selection keeps each column once.")
        names = [str(self.feature_names_in_[j]) for j in selected]
        if names != [str(o) for o in self.manifest["outputs"]]:
            raise ModelFileError("the manifest's outputs are not the features array 'selected' keeps; the files do not belong together.")

    def _represent(self, Xp):
        return Xp[:, self.arrays["selected"]]

    @classmethod
    def arrays_of(cls, estimator):
        if isinstance(estimator, SweepSelection):  # what the audit kept: the columns of one size
            return {"selected": estimator.order_.astype(np.int64)}, {}
        m = int(np.count_nonzero(estimator.support_))
        order = np.argsort(estimator.ranking_, kind="stable")[:m].astype(np.int64)
        return {"selected": order}, {}


class CPModel(PortableModel):
    """A CP model's non-entity factors ``F_1 … F_{N−1}``: ``transform`` embeds new entities by
    the unpenalised least-squares A-step (:meth:`fairaudit.cpd.FairCPD.transform`) and applies
    the training embedding's normalisation (the matrix or column scales of
    :func:`fairaudit.cpd.normalised_embedding`), so it returns what the audit measured on;
    ``inverse_transform`` rebuilds the entities' cells."""

    kind = "cp"
    error_metric = "residual_fit"
    note = (
        "transform embeds entities by CP's unpenalised least-squares step against the fitted non-entity factors. "
        "A fair method's penalty acted on the training entities' own factor, which is not exported (it is one "
        "row per training entity): embeddings of new entities are not made fair by it, and for the training "
        "entities they differ from the audited embedding for fair variants."
    )
    @classmethod
    def array_shapes(cls, manifest):
        """``factor_1 … factor_{N−1}`` (each non-entity mode × the outputs) and ``normalisation``
        (a scale per output, or a whitening matrix)."""
        count = manifest.get("n_factors")
        modes = list(manifest.get("tensor_shape") or [len(manifest["features"])])
        if not isinstance(count, int) or count != len(modes) + 1:
            raise ModelFileError(
                f"the manifest's n_factors is {count!r}, but its {len(modes)} mode(s) after the entities need {len(modes) + 1}; "
                "the manifest is damaged."
            )
        r = len(manifest["outputs"])
        shapes = {f"factor_{m}": [(modes[m - 1], r)] for m in range(1, count)}
        shapes["normalisation"] = [(r,), (r, r)]
        return shapes

    def _factors(self) -> list[np.ndarray]:
        count = int(self.manifest.get("n_factors", 0))
        return [self.arrays[f"factor_{m}"] for m in range(1, count)]

    def _represent(self, Xp):
        estimator = FairCPD(rank=self.rank)
        others = self._factors()
        estimator.factors_ = [np.zeros((0, others[0].shape[1]))] + others
        A = estimator.transform(Xp.reshape((Xp.shape[0], *[F.shape[0] for F in others])))
        scale = self.arrays["normalisation"]
        return A @ scale if scale.ndim == 2 else A * scale

    def _reconstruct(self, Z):
        scale = self.arrays["normalisation"]
        A = Z @ np.linalg.pinv(scale, hermitian=True) if scale.ndim == 2 else Z * np.where(scale > 0, 1.0 / np.where(scale > 0, scale, 1.0), 0.0)
        return A @ _tensor.khatri_rao(self._factors()).T

    _group_error = staticmethod(_relative_error)

    @classmethod
    def arrays_of(cls, estimator):
        factors = estimator.factors_
        if getattr(estimator, "embedding", "normalized") == "factor":  # the paper's formulation: the audit read A itself
            scale = np.ones(factors[0].shape[1])
        else:
            _, scale = normalised_embedding(factors[0], return_scale=True, whiten=len(factors) == 2)
        arrays = {f"factor_{m}": F for m, F in enumerate(factors) if m > 0}
        arrays["normalisation"] = scale
        return arrays, {"outputs": [f"a{j + 1}" for j in range(factors[0].shape[1])], "n_factors": len(factors)}


KINDS: dict[str, type[PortableModel]] = {cls.kind: cls for cls in (LinearMapModel, ErasedMapModel, NMFModel, SelectionModel, CPModel)}


def _kind_of(estimator) -> type[PortableModel]:
    if isinstance(estimator, LeacePCA):
        return ErasedMapModel
    if isinstance(estimator, GroupPCABase):
        return LinearMapModel
    if isinstance(estimator, NMFBase):
        return NMFModel
    if isinstance(estimator, FittedSelector):
        return SelectionModel
    if isinstance(estimator, FairCPD):
        return CPModel
    raise ParameterError(f"no portable form for {type(estimator).__name__}; fairaudit exports its PCA, NMF, feature-selection and CP estimators.")


# ============================================================================ making and exporting
def _json_value(value):
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def _dumps(payload: dict) -> str:
    return json.dumps(payload, indent=1, ensure_ascii=False, allow_nan=False)


def from_estimator(
    estimator,
    data: AuditData,
    *,
    method: str,
    variant: str,
    rank: int,
    options: Mapping | None = None,
    records: pd.DataFrame | None = None,
    fingerprint: Mapping | None = None,
) -> PortableModel:
    """A :class:`PortableModel` of ``estimator``, fitted by ``method``'s audit of ``data``.

    ``options`` are the family's audit options (they decide the NMF and feature-selection
    preprocessing); ``records`` the audit records of this fit (kept in the manifest so the
    model carries its own audit); ``fingerprint`` the audit's data fingerprint (default
    ``data.fingerprint()``).
    """
    kind = _kind_of(estimator)
    n_in = getattr(estimator, "n_features_in_", None)
    if n_in is not None and n_in != data.n_features:
        raise ParameterError(f"the estimator was fitted on {n_in} features, the data have {data.n_features}; export it with the data it was fitted on.")
    arrays, extra = kind.arrays_of(estimator)
    fingerprint = dict(fingerprint or data.fingerprint())
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fairaudit_version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "method": method,
        "variant": variant,
        "rank": int(rank),
        "title": variant_title(method, variant),
        "kind": kind.kind,
        "estimator": {"class": f"{type(estimator).__module__}.{type(estimator).__qualname__}", "params": _json_value(estimator.get_params())},
        "features": list(data.feature_names),
        "outputs": extra.pop("outputs", None),
        "preprocessing": preprocessing_for(method, data, options).to_dict(),
        "notes": [kind.note],
        "sensitive": list(data.sensitive),
        "groups": data.group_sizes(),
        "data": {key: fingerprint.get(key) for key in ("name", "sha256", "rows", "features", "scaling", "label")},
        **extra,
    }
    if data.is_tensor:
        manifest["tensor_shape"] = list(data.tensor_shape[1:])
        manifest["tensor_modes"] = list(data.tensor_modes)
    if kind is SelectionModel:
        manifest["outputs"] = [data.feature_names[j] for j in arrays["selected"]]
    if options:
        manifest["options"] = _json_value(dict(options))
    if records is not None and len(records):
        rows = records.drop(columns=[c for c in ("method", "variant", "rank") if c in records.columns])
        manifest["audit"] = _json_value(rows.to_dict(orient="records"))
    return kind(manifest, arrays)


def _check_same_data(result: AuditResult, data: AuditData) -> None:
    mine = data.fingerprint()
    if (mine.get("sha256"), mine.get("rows")) != (result.data.get("sha256"), result.data.get("rows")):
        raise ParameterError("these data are not the data the audit ran on; export the models with the audit's own data.")


def export_models(
    result: AuditResult,
    data: AuditData,
    directory,
    *,
    ranks: Iterable[int] | None = None,
    methods: Iterable[str] | None = None,
    variants: Iterable[str] | None = None,
) -> list[Path]:
    """Write every model the audit kept (optionally only these ranks / methods / variants) to
    ``directory/<method>-<variant>-rank<r>/`` and an index ``directory/models.json``.

    Needs ``AuditConfig(keep_models=True)``; returns the model directories written.
    """
    if not result.models:
        raise ParameterError(
            f"this audit kept no fitted models; run it with {term('keep_models', True)} to export them."
        )
    _check_same_data(result, data)
    chosen = select_models(result, ranks=ranks, methods=methods, variants=variants)
    from .report import write_outputs

    directory = Path(directory)
    written, index = [], []
    try:
        for (method, variant, rank), estimator in chosen.items():
            model = model_from_result(result, data, method, variant, rank, estimator)
            name = model_directory_name(method, variant, rank)
            written.append(model.save(directory / name))
            index.append({"path": name, "method": method, "variant": variant, "rank": rank, "title": model.manifest["title"]})
        write_outputs(index, ((directory / INDEX_FILE, lambda models: _dumps({"format": FORMAT, "models": models})),))
    except BaseException:  # all or nothing: the models this call wrote go again
        for path in written:
            for name in (ARRAYS_FILE, MANIFEST_FILE):
                (path / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                path.rmdir()  # only if it is now empty (it held nothing else)
        raise
    return written


def select_models(
    result: AuditResult,
    *,
    ranks: Iterable[int] | None = None,
    methods: Iterable[str] | None = None,
    variants: Iterable[str] | None = None,
) -> dict[tuple[str, str, int], object]:
    """The kept models matching the filters (``None``: all); refuses a rank no model has."""
    ranks = None if ranks is None else {int(r) for r in ranks}
    methods = None if methods is None else set(methods)
    variants = None if variants is None else set(variants)
    chosen = {
        key: model
        for key, model in result.models.items()
        if (ranks is None or key[2] in ranks) and (methods is None or key[0] in methods) and (variants is None or key[1] in variants)
    }
    if not chosen:
        available = sorted({key[2] for key in result.models})
        raise ParameterError(
            f"no kept model matches {term('export_rank', ','.join(map(str, sorted(ranks))) if ranks else None)}"
            f"{' and the chosen variants' if variants or methods else ''}; the audit fitted ranks {', '.join(map(str, available))}."
        )
    return chosen


def model_from_result(result: AuditResult, data: AuditData, method: str, variant: str, rank: int, estimator=None) -> PortableModel:
    """The :class:`PortableModel` of one kept fit of ``result`` (with its records and options)."""
    estimator = result.models[(method, variant, rank)] if estimator is None else estimator
    records = result.records[(result.records.method == method) & (result.records.variant == variant) & (result.records["rank"] == rank)]
    return from_estimator(
        estimator, data, method=method, variant=variant, rank=rank, options=family_options(result.config, method),
        records=records, fingerprint=result.data,
    )


WARM_STARTED = frozenset({"pca"})
"""Families whose rank sweep starts each rank's solver from the previous rank's solution
(``pca._base``): where the optimum is not unique (Fair PCA's equalised losses leave directions
free), a fit at one rank alone can land on another optimum than the sweep did — measured on the
default sample, Fair PCA at rank 4 alone: losses equal to 2.4·10⁻¹⁰ but variance explained
6.8·10⁻⁶ apart. A refit replays the audited ranks up to the one asked for."""


def refit_model(result: AuditResult, data: AuditData, method: str, variant: str, rank: int, *, progress=None) -> PortableModel:
    """The model of one fit of ``result``: the kept estimator when the audit kept models, else
    that variant fitted again at that rank with the audit's own settings (seed, options; for the
    CP family the λ sweep only where the audit ran it, so a continuation is repeated as it was;
    for the families in :data:`WARM_STARTED` the audited ranks up to this one, in order).

    The refit's records are checked against the audit's: the manifest's ``refit`` says how far
    apart they are (``max_abs_difference``, timings excluded), so a model that is not exactly
    the audited one says so. ``progress`` is :func:`~fairaudit.audit.run_audit`'s callback for
    the refit (an exception it raises aborts the refit and propagates).
    """
    key = (method, variant, int(rank))
    if key in result.models:
        return model_from_result(result, data, *key)
    _check_same_data(result, data)
    run = family_run(result.config, method)
    fields = {f.name for f in dataclasses.fields(AuditConfig)}
    options = dict(family_options(result.config, method))
    audited = result.records[(result.records.method == method)]
    if method == "cpd":
        swept = audited[audited.variant.map(is_sweep_variant)]
        options["sweep"] = bool(len(swept)) and int(rank) == int(swept["rank"].max())
        if options["sweep"]:
            options["sweep_rank"] = int(rank)
    ranks = (int(rank),)
    if method in WARM_STARTED:  # replay the audit's path to this rank, warm starts included
        ranks = tuple(sorted(int(r) for r in set(audited[audited.variant == variant]["rank"]) if int(r) <= int(rank))) or ranks
    settings = {k: v for k, v in run.items() if k in fields}
    # bootstrap=0: replicates come after the fit and never change it; a model needs none of them
    base = erased_base(variant)
    settings.update(methods=(method,), variants=(split_variant(base or variant)[0],), ranks=ranks, keep_models=True,
                    options={method: options}, bootstrap=0, leace=base is not None)
    refit = run_audit(data, AuditConfig(**settings), progress=progress)
    if key not in refit.models:
        reasons = "; ".join(s["reason"] for s in refit.skipped) or "the audit did not fit it"
        raise ParameterError(f"{method}/{variant} at rank {rank} could not be fitted again: {reasons}")
    model = model_from_result(refit, data, *key)
    mine = _fit_values(refit.records, key)
    theirs = _fit_values(result.records, key)
    common = mine.index.intersection(theirs.index)
    difference = float(np.nanmax(np.abs(mine[common] - theirs[common]))) if len(common) else float("nan")
    model.manifest["refit"] = {"compared_values": int(len(common)), "max_abs_difference": _json_value(difference)}
    return model


def _fit_values(records: pd.DataFrame, key: tuple[str, str, int]) -> pd.Series:
    method, variant, rank = key
    rows = records[(records.method == method) & (records.variant == variant) & (records["rank"] == rank)]
    rows = rows[~rows.metric.isin(("seconds", "estimate_seconds"))]
    return rows.set_index(["group", "metric"]).value


GAP_METRICS = {"pca": "loss_gap", "nmf": "rel_loss_gap"}
"""The whole-data metric of each family that measures the difference between groups' losses."""


def exportable(result: AuditResult, method: str) -> dict[str, list[int]]:
    """The fits of ``method`` a model can be made of, as variant → audited ranks (audit order):
    every variant but the λ-sweep points, a representation the user brought (``yours``) and the
    ``+leace`` records of families whose eraser is the audit's post-step on a representation
    rather than a fitted estimator (all but the PCA family's)."""
    rows = result.records[result.records.method == method]
    fitted_twins = erases_itself(method)
    return {
        variant: sorted(int(r) for r in set(rows[rows.variant == variant]["rank"]))
        for variant in dict.fromkeys(rows.variant)
        if (erased_base(variant) or variant) != "yours" and not is_sweep_variant(variant) and (fitted_twins or erased_base(variant) is None)
    }


def suggested_export(result: AuditResult, method: str) -> tuple[str, int]:
    """The fit a user most likely wants to take away: the family's first fair variant (else the
    first variant) at the rank where vanilla's gap between groups (:data:`GAP_METRICS`) is
    largest — where choosing the fair model matters most —, else the middle audited rank."""
    fits = exportable(result, method)
    if not fits:
        raise ParameterError(f"the audit has no fit of {method} to make a model of.")
    variant = next((v for v in fits if v != "vanilla"), next(iter(fits)))
    ranks = fits[variant]
    gap = GAP_METRICS.get(method)
    table = whole_metrics(result.records, method)
    if gap in table.columns and "vanilla" in table.index.get_level_values(0):
        gaps = table.loc["vanilla", gap].dropna()
        gaps = gaps[gaps.index.isin(ranks)]
        if len(gaps) and gaps.max() > 0:
            return variant, int(gaps.idxmax())
    return variant, ranks[(len(ranks) - 1) // 2]


def model_directory_name(method: str, variant: str, rank: int) -> str:
    return f"{method}-{variant}-rank{int(rank)}"


# ============================================================================ loading
def load_model(source) -> PortableModel:
    """Read a model written by :meth:`PortableModel.save` / :func:`export_models`.

    ``source``: the model's directory, its ``manifest.json``, a ZIP of the two files (path,
    bytes or a file object). Everything is checked before it is used
    (:mod:`fairaudit.modelfile`): the manifest against its schema, the arrays against the
    manifest's sha256 (required), their shapes against what the kind declares
    (:attr:`PortableModel.arrays_spec`) before they are read, without pickle, then their values.
    """
    manifest_raw, blob, where, where_manifest = read_model_source(source)
    manifest = parse_manifest(manifest_raw, where_manifest, tuple(KINDS))
    if hashlib.sha256(blob).hexdigest() != manifest["arrays_sha256"]:
        raise ModelFileError(f"{where}: {ARRAYS_FILE} does not match its manifest (changed, or from another export).")
    kind = KINDS[manifest["kind"]]
    try:
        shapes = kind.array_shapes(manifest)
    except ModelFileError as exc:
        raise ModelFileError(f"{where_manifest}: {exc.args[0]}") from None
    declared = {name: tuple(spec["shape"]) for name, spec in manifest["arrays"].items()}
    for name in sorted(set(shapes) | set(declared)):
        if name not in shapes:
            raise ModelFileError(f"{where_manifest}: field 'arrays' lists {name!r}, which a {kind.kind} model does not have.")
        if declared.get(name) not in shapes[name]:
            raise ModelFileError(
                f"{where_manifest}: field 'arrays.{name}.shape' is {_shape(declared[name]) if name in declared else 'absent'}; a "
                f"{kind.kind} model with {len(manifest['outputs'])} output(s) and {len(manifest['features'])} feature(s) needs "
                f"{' or '.join(map(_shape, shapes[name]))}."
            )
    arrays = read_npz(blob, f"{where} ({ARRAYS_FILE})", ModelFileError, max_bytes=MAX_MODEL_BYTES)
    for name, shape in declared.items():
        if name not in arrays or arrays[name].shape != shape:
            raise ModelFileError(f"{where}: array {name!r} is absent or has another shape than the manifest says.")
    if set(arrays) - set(declared):
        raise ModelFileError(f"{where}: {ARRAYS_FILE} holds arrays the manifest does not list; the files do not belong together.")
    try:
        return kind(manifest, arrays)
    except ModelFileError as exc:
        raise ModelFileError(f"{where} ({ARRAYS_FILE}): {exc.args[0]}") from None


# ============================================================================ new rows from a file
def transform_table(
    model: PortableModel,
    table: RawTable,
    *,
    id_column: str | None = None,
    missing: str = "error",
    with_error: bool = False,
) -> tuple[pd.DataFrame, FeatureRows]:
    """The model's representation of the rows of ``table`` (read by :func:`fairaudit.data.read_table`).

    Features are found by name (one-hot indicators rebuilt, :func:`fairaudit.data.feature_rows`);
    columns the model does not use are ignored (and listed in the returned ``FeatureRows.unused``).
    The first output column is ``id_column``'s values when given, else the file ``line`` of each
    row, so rows can be matched even when some were left out (``missing="drop"``);
    ``with_error`` adds each row's ``reconstruction_error`` (:meth:`PortableModel.reconstruction_errors`).
    """
    if id_column is not None and id_column not in table.columns:
        raise UnknownColumnError(
            f"ID column {id_column!r} is not in {table.name}; choose one of {_listed(table.columns)} for {term('id_column')}."
        )
    if with_error and not model.reconstructs:
        raise ParameterError(f"a {model.kind} model has no reconstruction, so no reconstruction error per row.")
    rows = feature_rows(table, list(model.feature_names_in_), missing=missing)
    Xp = model.preprocess(rows.X, row_labels=[f"line {line}" for line in rows.lines])
    Z = model._represent(Xp)
    key = (id_column, table.texts(id_column)[rows.rows]) if id_column else ("line", rows.lines)
    outputs = [str(name) for name in model.get_feature_names_out()]
    if key[0] in outputs:
        raise ParameterError(f"the ID column {key[0]!r} has the name of an output column; rename it in the file.")
    frame = pd.DataFrame(Z, columns=outputs)
    frame.insert(0, key[0], key[1])
    if with_error:
        frame["reconstruction_error"] = np.sum((Xp - model._reconstruct(Z)) ** 2, axis=1)
    return frame, rows
