"""A bootstrap replicate's NMF fits on the resample's distinct rows weighted by their counts
(:mod:`fairaudit.nmf._rows`) are the fits on the repeated rows: factors (expanded), errors, losses,
``E_ℓ`` and iteration counts, for standard NMF, Algorithm 1's continued runs, Fairer-NMF by
multiplicative updates (Algorithm 3) and by alternating minimisation (Algorithm 2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairaudit import AuditData, uncertainty
from fairaudit.audit import AuditConfig, RecordSink, estimate_family
from fairaudit.nmf import _estimates as estimates_module
from fairaudit.nmf._rows import DistinctRows
from fairaudit.nmf.audit import NMFAudit

TOLERANCE = {"vanilla": 1e-12, "fair_mu": 1e-12, "fair_am": 1e-9}
"""Relative to the largest entry of what is compared. Measured on this data over ten replicates:
at most 1.3·10⁻¹⁴ for the multiplicative updates (sums taken in another order) and 2.6·10⁻¹¹ for
alternating minimisation (its H-step's cone program solved on other, equivalent, data)."""


def data_with_twins(seed=0):
    """Two groups of non-negative rows; rows 3 and 4 have equal values (different rows all the same)."""
    rng = np.random.default_rng(seed)
    big = rng.uniform(size=(40, 2)) @ rng.uniform(size=(2, 6))
    small = rng.uniform(size=(20, 4)) @ rng.uniform(size=(4, 6))
    X = np.round(np.vstack([big, small]) + 0.01, 6)
    X[4] = X[3]
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)])
    return AuditData.from_arrays(frame.to_numpy(), pd.Series(["big"] * 40 + ["small"] * 20), feature_names=list(frame.columns))


def fitted(options=None, ranks=(1, 2, 3)):
    config = AuditConfig(methods=("nmf",), ranks=ranks, bootstrap=10, options={"nmf": options or {}})
    family = NMFAudit(data_with_twins(), config, RecordSink("nmf"))
    return family, estimate_family(family)


def replicate(family, stage, monkeypatch, *, weighted: bool, index=0, rows=None):
    """Replicate ``index``'s fits (on ``rows`` if given), the rows each fit ran on (before
    expansion) and every E_ℓ run's iteration count, on the distinct rows with counts or
    (``weighted=False``) the repeated rows."""
    seeds = uncertainty.replicate_seeds(0, 10)
    if rows is None:
        rows = family.resample(np.random.default_rng(seeds[index]), stage.train, index, 10)
    fitted_rows, iterations = [], []
    with monkeypatch.context() as patch:
        if not weighted:
            patch.setattr(DistinctRows, "of", classmethod(lambda cls, rows: cls.each(rows)))
        expand = DistinctRows.expand
        patch.setattr(DistinctRows, "expand", lambda self, model, grouped: fitted_rows.append(len(model.W_)) or expand(self, model, grouped))
        runs = estimates_module.solve_standard_runs
        patch.setattr(estimates_module, "solve_standard_runs",
                      lambda X, starts, **k: [iterations.append(fit.n_iter) or fit for fit in runs(X, starts, **k)])
        fits = family.fit(rows, warm=stage.fits, replicate=True, seed=seeds[index])
    return rows, fits, fitted_rows, iterations


def close(a, b, what):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape, what
    assert np.abs(a - b).max() <= TOLERANCE[what[0][0]] * max(np.abs(b).max(), 1e-300), what


def the_same_fits(weighted, repeated):
    assert weighted.models.keys() == repeated.models.keys() and len(weighted.models) == 9
    for key, model in weighted.models.items():
        other = repeated.models[key]
        assert model.n_iter_ == other.n_iter_, key
        for attribute in ("W_", "components_", "reconstruction_err_", "group_errors_", "group_losses_", "own_rel_errors_", "E_"):
            close(getattr(model, attribute), getattr(other, attribute), (key, attribute))
        np.testing.assert_array_equal(model.group_sizes_, other.group_sizes_)
        if key[0] == "fair_mu":
            np.testing.assert_array_equal(model.counts_, other.counts_)


@pytest.mark.parametrize("index", [0, 1])
def test_the_weighted_fits_are_the_fits_on_the_repeated_rows(monkeypatch, index):
    family, stage = fitted()
    assert set(family.chosen) == {"vanilla", "fair_mu", "fair_am"}
    rows, weighted, fitted_rows, runs = replicate(family, stage, monkeypatch, weighted=True, index=index)
    _, repeated, repeated_rows, repeated_runs = replicate(family, stage, monkeypatch, weighted=False, index=index)
    distinct = len(np.unique(rows))
    assert distinct < len(rows) and set(fitted_rows) == {distinct} and set(repeated_rows) == {len(rows)}
    assert runs == repeated_runs  # Algorithm 1's continued runs: the same iterations
    the_same_fits(weighted, repeated)


def test_rows_with_equal_values_are_not_copies(monkeypatch):
    """Copies are the same row index: rows 3 and 4 have equal values, and each is fitted as itself
    (from its own W row of the audit's fit) with its own count."""
    distinct = DistinctRows.of(np.array([4, 3, 3, 7, 4, 4]))
    np.testing.assert_array_equal(distinct.rows, [3, 4, 7])
    np.testing.assert_array_equal(distinct.counts, [2, 3, 1])
    np.testing.assert_array_equal(distinct.rows[distinct.inverse], [4, 3, 3, 7, 4, 4])
    family, stage = fitted()
    rng = np.random.default_rng(5)
    rows = np.concatenate([[3, 4, 4, 4], rng.choice(np.r_[0:3, 5:40], 36), rng.choice(np.arange(40, 60), 20)])
    _, weighted, fitted_rows, _ = replicate(family, stage, monkeypatch, weighted=True, rows=rows)
    _, repeated, _, _ = replicate(family, stage, monkeypatch, weighted=False, rows=rows)
    assert set(fitted_rows) == {len(np.unique(rows))}
    the_same_fits(weighted, repeated)


def test_coordinate_descent_fits_the_repeated_rows(monkeypatch):
    """scikit-learn's stopping rule sums over rows, and its replicate starts at random: no weighting."""
    family, stage = fitted({"nmf_solver": "cd"}, ranks=(1,))
    rows, _, fitted_rows, _ = replicate(family, stage, monkeypatch, weighted=True)
    assert set(fitted_rows) == {len(rows)}
