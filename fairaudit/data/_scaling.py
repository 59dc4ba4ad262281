"""Scaling feature columns, exactly and without overflow.

Values near the top of double precision (``1e308``) overflow when summed or squared: the mean
of ``[1e308, 1e308]`` is ``inf``. Standardising and unit-norm scaling do not depend on a
column's units, so a column with huge values is first divided by a power of two (exact in
binary floating point) and then scaled; the result is bit-for-bit what the plain formula gives
when nothing overflows. Centring and no scaling keep the units, so a matrix whose values would
overflow the sums every method computes is refused with a message saying what to do.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..vocabulary import term

SCALINGS = ("standardize", "center", "none", "unit_norm")
_HUGE = 2.0**480  # above this, sums of squares of a few thousand values can overflow


def check_scaling(scaling: str) -> None:
    if scaling not in SCALINGS:
        raise ParameterError(f"scaling must be one of {', '.join(SCALINGS)}; got {scaling!r}.")


def column_peaks(X: np.ndarray, *, skip_nan: bool = True) -> np.ndarray:
    """Each column's largest magnitude — NaN cells skipped (NaN for a column of NaN only), or
    with ``skip_nan=False`` NaN for any column holding one — from the columns' largest and
    smallest values, so no ``|X|`` copy of the matrix is made (at 1,000,000 × 20 that copy was
    the PCA audit's peak memory: 153 MB above the table)."""
    largest, smallest = (np.fmax, np.fmin) if skip_nan else (np.maximum, np.minimum)
    return largest(largest.reduce(X, axis=0), -smallest.reduce(X, axis=0))


def overflow_exponents(X: np.ndarray) -> np.ndarray | None:
    """Per column, the power of two that brings its largest magnitude below 1 — or None when
    no column is large enough to need it."""
    if X.size == 0:
        return None
    peak = column_peaks(X)
    if not np.any(peak > _HUGE):
        return None
    return np.frexp(np.where(peak > _HUGE, peak, 1.0))[1].astype(int) * (peak > _HUGE)


def scaling_parameters(X: np.ndarray, scaling: str) -> tuple[np.ndarray, np.ndarray]:
    """``(center, scale)`` per column such that ``scale_features(X, scaling) == (X − center) / scale``.

    What a fitted model must apply to new rows to see them as it saw ``X``
    (:mod:`fairaudit.models` stores them in its manifest). ``"none"``: 0 and 1; ``"center"``: the
    column means and 1; ``"standardize"``: the means and the population standard deviations;
    ``"unit_norm"``: 0 and the column ℓ2 norms. A constant (or all-zero) column gets scale 1.
    Computed without overflow, like :func:`scale_features`.
    """
    check_scaling(scaling)
    X = np.asarray(X, dtype=float)
    n = X.shape[1]
    if scaling == "none":
        return np.zeros(n), np.ones(n)
    exponents = overflow_exponents(X)
    Y = np.ldexp(X, -exponents) if exponents is not None else X
    back = (lambda v: np.ldexp(v, exponents)) if exponents is not None else (lambda v: v)
    if scaling == "unit_norm":
        norms = np.linalg.norm(Y, axis=0)
        return np.zeros(n), np.where(norms > 0, back(norms), 1.0)
    mean = Y.mean(axis=0)
    if scaling == "center":
        return back(mean), np.ones(n)
    std = (Y - mean).std(axis=0)
    return back(mean), np.where(std > 0, back(std), 1.0)


def scale_features(X: np.ndarray, scaling: str) -> np.ndarray:
    """Scale columns of ``X`` (a new array; ``X`` is not modified).

    ``"standardize"``: centre and divide by the (population) standard deviation — the default
    for mixed-unit tabular data. ``"center"``: subtract the column mean. ``"none"``: unchanged.
    ``"unit_norm"``: divide each column by its ℓ2 norm without centring (Fairer-NMF §6.1).
    Constant columns are left at zero rather than divided by zero.
    """
    check_scaling(scaling)
    X = np.asarray(X, dtype=float)
    if scaling == "none":
        return X.copy()
    exponents = overflow_exponents(X) if scaling in ("standardize", "unit_norm") else None
    Y = np.ldexp(X, -exponents) if exponents is not None else X
    if scaling == "unit_norm":
        norms = np.linalg.norm(Y, axis=0)
        return Y / np.where(norms > 0, norms, 1.0)
    with np.errstate(over="ignore", invalid="ignore"):  # huge values under "center": refused by check_magnitude
        centred = Y - Y.mean(axis=0)
    if scaling == "center":
        return centred
    std = centred.std(axis=0)
    centred /= np.where(std > 0, std, 1.0)
    return centred


def robust_fill(X: np.ndarray, how: str) -> np.ndarray:
    """Per column, the mean or median of the present (non-NaN) values, without overflow."""
    exponents = overflow_exponents(X)
    Y = np.ldexp(X, -exponents) if exponents is not None else X
    fill = np.nanmean(Y, axis=0) if how == "mean" else np.nanmedian(Y, axis=0)
    return np.ldexp(fill, exponents) if exponents is not None else fill


def check_magnitude(M: np.ndarray, names, scaling: str) -> np.ndarray:
    """``M`` if the sums of squares every method computes stay finite, else a ParameterError."""
    if M.size == 0:
        return M
    check_peaks(column_peaks(M, skip_nan=False), names, scaling, M.size)
    return M


def check_peaks(peak: np.ndarray, names, scaling: str, size: int) -> None:
    """:func:`check_magnitude` from each column's largest magnitude ``peak`` and the matrix's
    number of cells ``size`` (what the dask engine knows without the matrix)."""
    limit = np.sqrt(np.finfo(float).max / max(size, 1)) / 4
    bad = ~(peak <= limit)
    if bad.any():
        columns = [str(n) for n, b in zip(names, bad, strict=True) if b]
        shown = ", ".join(map(repr, columns[:5])) + (" …" if len(columns) > 5 else "")
        raise ParameterError(
            f"feature(s) {shown} reach {float(np.max(peak[bad])):.3g} under scaling {scaling!r}: the sums of squares "
            f"the methods compute would overflow double precision (limit about {limit:.3g} for this table). "
            f"Use {term('scaling', 'standardize')} (exact for any magnitude), or rescale those columns."
        )
