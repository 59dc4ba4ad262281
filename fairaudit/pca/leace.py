"""A PCA-family map followed by LEACE: the representation with the groups' linear information erased.

The post-step of :mod:`fairaudit.erasure` (Belrose et al. 2023, eq. (1)) on the representation
``z = (x − μ) U diag(w)`` of any map of the family (vanilla PCA by default): the eraser is fitted
on the representation's own moments — ``Σ_zz = (U diag w)ᵀ C (U diag w)`` and the groups' mean
offsets ``(μ_g − μ) U diag(w)`` — so, like every variant, it is fitted from the group moments
(one pass over the rows, weighted bootstrap replicates).

What the audit measures of it:

* the **representation** is LEACE's output ``z' = z − (z W Q)(W⁺ Q)ᵀ``, ``q`` columns of rank
  ``q − r`` (``r ≤ k − 1`` erased directions): ``transform`` returns it; the leakage test and the
  RBF MMD² read it in an orthonormal basis of the subspace it lies in (``output_basis_``: the same
  distances, without the ``r`` emptied columns that make QDA's covariance singular);
* the **reconstruction** is the best linear one from ``z'``: the orthogonal projection onto the
  span of ``T = U diag(w)(I − W Q (W⁺Q)ᵀ)``, which is ``span(U) ∩ {μ_g − μ}^⊥`` — so ``error``,
  ``loss``, ``variance_explained`` and ``mmd2`` (0: the groups' means agree) are those of that
  projection (``components_``, the ``q − r`` directions of ``effective_rank``), and
  ``inverse_transform(z') = z' T⁺ + μ``. What erasure costs in reconstruction is the difference
  from the base map's records at the same rank.

Compare :class:`~fairaudit.pca.EqualMeansPCA` (Kleindessner et al. 2023): it projects the mean
differences out *first* and then picks the ``d`` directions of largest variance in what is left;
PCA + LEACE picks them first and removes the mean differences from them after, keeping fewer
(``d − r``) directions in a space chosen blind to the groups.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from ..erasure import leace
from ..linalg import LowRankMap, orthonormal_basis
from ._base import GroupPCABase
from ._problem import GroupProblem


class LeacePCA(GroupPCABase):
    """``base`` (a PCA-family estimator; vanilla PCA by default), then LEACE on its representation.

    Parameters
    ----------
    n_components : int, default=2
        Rank of the base map.
    base : GroupPCABase, optional
        The map whose representation is erased (``PCA()`` when ``None``); fitted at
        ``n_components``.

    Attributes
    ----------
    See :class:`~fairaudit.pca._base.GroupPCABase` (``components_``: the directions of the best
    linear reconstruction from the erased representation); additionally ``base_`` (the fitted
    base map), ``representation_`` (``T``, features × outputs), ``erased_dimensions_`` (``r``)
    and ``relative_distortion_`` (``E‖z' − z‖² / E‖z‖²``, the share of the representation's
    variance LEACE changed: the least any linearly guarding affine map changes, Theorem 4.2).

    References
    ----------
    N. Belrose et al. "LEACE: Perfect linear concept erasure in closed form". NeurIPS 2023.
    """

    def __init__(self, n_components: int = 2, *, base: GroupPCABase | None = None):
        super().__init__(n_components)
        self.base = base

    def _solve(self, problem: GroupProblem, d: int, warm_start) -> LowRankMap:
        from .vanilla import PCA

        base = clone(self.base if self.base is not None else PCA()).set_params(n_components=self.n_components)
        solved = base._solve(problem, d, warm_start)
        self.base_ = base
        coordinates = solved.basis * solved.weights  # z = y @ coordinates, y the centred rows in problem coordinates
        covariance = coordinates.T @ problem.pooled @ coordinates
        eraser = leace(covariance, problem.offsets @ coordinates, np.zeros(coordinates.shape[1]), scale=problem.value_scale)
        erased = coordinates - (coordinates @ eraser.read) @ eraser.write.T  # z' = y @ erased
        total = float(np.trace(covariance))
        self.erased_dimensions_ = eraser.rank
        self.relative_distortion_ = eraser.distortion(covariance) / total if total > 0 else 0.0
        lift = (lambda M: M) if problem.basis is None else (lambda M: problem.basis @ M)
        self.representation_, self.base_representation_ = lift(erased), lift(coordinates)
        self.output_basis_ = eraser.output_basis()  # what the audit's leakage test reads: representation_ @ output_basis_
        kept = erased @ self.output_basis_  # the same span without the r emptied columns (rounding there is no direction)
        basis = orthonormal_basis(kept) if kept.size else kept
        return LowRankMap(basis, np.ones(basis.shape[1]))

    def _warm_state(self):
        return self.base_._warm_state()

    def _prepare_ranks(self, problem: GroupProblem, ranks) -> None:
        from .vanilla import PCA

        (self.base if self.base is not None else PCA())._prepare_ranks(problem, ranks)

    def _representation(self) -> np.ndarray:
        check_is_fitted(self, "representation_")
        return self.representation_

    def inverse_transform(self, Z):
        """The best linear reconstruction from the erased representation: ``Z T⁺ + mean_`` (the
        orthogonal projection onto the span of ``T``; ``components_``' map)."""
        check_is_fitted(self, "representation_")
        return np.asarray(Z, dtype=float) @ np.linalg.pinv(self.representation_) + self.mean_
