"""A bootstrap resample's rows as its distinct rows weighted by their counts — the same NMF problems.

A replicate (:meth:`fairaudit.nmf.audit.NMFAudit._fit_replicate`) resamples the audit's rows with
repeats (about 63 % of them distinct) and starts every resampled row's ``W`` row from its
original's row of the audit's fit. Copies of one original row therefore start equal, and stay
equal: every update of a ``W`` row depends only on that row's data, its group and the shared
``H`` (§3.2's multiplicative step, Algorithm 3's line 11, Algorithm 2's per-row NNLS). Copies are
identified by the resample's row *indices* (the same original row), never by equal values: two
different rows with equal values start from different ``W`` rows.

So each fit of the replicate is the same problem on the distinct rows ``x_u`` weighted by their
counts ``c_u`` (``C = diag(c)``), which this module poses on the rows scaled by ``√c_u``:
``x̃_u = √c_u x_u``, ``w̃_u = √c_u w_u``. Then, in exact arithmetic,

- the errors are the resample's: ``‖X − WH‖²_F = Σ_u c_u ‖x_u − w_u H‖² = ‖X̃ − W̃H‖²_F`` (eq. (2)),
  group by group likewise (``‖X_ℓ − W_ℓH‖_F`` in Def. 4.1, eq. (5) and eq. (10)), and so are the
  groups' norms ``‖X_ℓ‖_F``: every stopping rule sees the quantities it sees on the repeated rows;
- the H-steps' sums are the weighted ones: ``W̃ᵀX̃ = WᵀCX`` and ``W̃ᵀW̃ = WᵀCW`` (§3.2's
  ``H ← H ⊙ WᵀX / (WᵀWH)``; Algorithm 3's lines 9–10 per group; Algorithm 2's H-step, the §5.2
  SOCP, whose cone holds ``‖X̃_ℓ − W̃_ℓH‖_F``);
- a W-step is homogeneous of degree 1 in ``(x_u, w_u)``: the multiplicative step ``w ⊙ xHᵀ /
  (wHHᵀ)`` and the NNLS ``argmin_{w ≥ 0} ‖x − Hᵀw‖`` (Algorithm 2, line 7) of the scaled row are
  ``√c_u`` times the unscaled row's, so ``w̃_u / √c_u`` is every copy's ``W`` row after each step;
- Algorithm 1's runs continued on a group's rows are standard NMF on that group's rows: the same.

Every solver then runs unchanged on fewer rows; the fitted ``W`` is divided by ``√c`` and
expanded back to the resampled rows (:meth:`DistinctRows.expand`), so that whatever is measured
afterwards sees what it sees of a fit on the repeated rows. What differs is rounding (sums taken
in another order; ``tests/test_nmf_rows.py`` measures it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._core import GroupedData


@dataclass(frozen=True)
class DistinctRows:
    """A resample ``rows`` (indices, repeats allowed) as its distinct indices and their counts."""

    rows: np.ndarray  # the distinct indices, increasing (:meth:`each`: the resample as it is)
    counts: np.ndarray  # how often each occurs in the resample
    inverse: np.ndarray  # each resampled row's place in ``rows`` (``rows[inverse]`` is the resample)

    @classmethod
    def of(cls, rows: np.ndarray) -> DistinctRows:
        distinct, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
        return cls(distinct, counts, inverse)

    @classmethod
    def each(cls, rows: np.ndarray) -> DistinctRows:
        """Every resampled row on its own, with count 1 (no weighting: the fit on the repeated rows)."""
        return cls(np.asarray(rows), np.ones(len(rows), dtype=int), np.arange(len(rows)))

    @property
    def repeats(self) -> bool:
        """Whether any row occurs more than once (otherwise the weighting changes nothing)."""
        return len(self.rows) < len(self.inverse)

    @property
    def scale(self) -> np.ndarray:
        """``√c`` as a column (it scales the rows of ``X`` and ``W`` of the distinct rows)."""
        return np.sqrt(self.counts.astype(float))[:, None]

    def weighted(self, A: np.ndarray) -> np.ndarray:
        """``C^{1/2} A`` for ``A`` with one row per distinct row (``X`` or a starting ``W``)."""
        return A * self.scale

    def expand(self, model, grouped: GroupedData) -> None:
        """An estimator fitted on the weighted rows (``grouped``: their grouping) as if fitted on
        the resample: ``W_`` unscaled and repeated to the resampled rows, ``group_sizes_`` the
        resample's. Its errors, losses, ``E_ℓ``, iterations and ``H`` are the resample's already."""
        model.W_ = (model.W_ / self.scale)[self.inverse]
        counts = self.counts[grouped.order]
        model.group_sizes_ = np.array([int(counts[s].sum()) for s in grouped.slices])
