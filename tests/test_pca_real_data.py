"""Samadi et al.'s credit experiment (Figures 3–4 shape) on the real file, when it is present."""

from __future__ import annotations

import numpy as np
import pytest

from fairaudit import AuditData, read_table
from fairaudit.groups import encode_groups
from fairaudit.pca import PCA, FairPCA, rank_sweep

from .conftest import shared_file

pytestmark = pytest.mark.shared_data


def credit_samadi_split() -> AuditData:
    """default_degree.csv: second header line has the names; EDUCATION ∈ {1,2} = high, else low
    (Samadi's split: 24,615 / 5,385); every other column except ID is a feature, standardised."""
    table = read_table(shared_file("credit/default_degree.csv"), skip_rows=1)
    frame = table.frame
    education = frame["EDUCATION"].astype(int)
    groups = np.where(education.isin([1, 2]), "high education", "low education")
    features = frame.drop(columns=["ID", "EDUCATION"]).astype(float)
    return AuditData.from_arrays(features.to_numpy(), groups, feature_names=list(features.columns), name="default_degree.csv")


def test_credit_reproduces_the_shape_of_samadi_figures_3_and_4():
    data = credit_samadi_split()
    assert data.group_sizes() == {"high education": 24615, "low education": 5385}
    ranks = range(1, 22)
    vanilla = {r: est.group_losses_ for r, est, _ in rank_sweep(PCA(), data.X, data.sensitive_features, ranks)}
    fair = {r: est for r, est, _ in rank_sweep(FairPCA(), data.X, data.sensitive_features, ranks)}
    worse_for_low = 0
    for r in ranks:
        high, low = vanilla[r]
        worse_for_low += low > high
        fair_high, fair_low = fair[r].group_losses_
        assert fair_high == pytest.approx(fair_low, rel=1e-6, abs=1e-9)  # equal losses (Thm 4.5)
        assert max(fair_high, fair_low) <= max(high, low) + 1e-12
        assert fair[r].n_components_ <= r + 1
    assert worse_for_low == 21  # vanilla PCA serves the low-education group worse at every d


def test_on_credit_the_optimum_needs_no_extra_dimension():
    """Samadi's credit at d = 9 and 11, where a solver may return rank d + 1: the SDP's optimal P̂ is
    an exact rank-d projection (eigenvalues within 10⁻⁴ of 0 or 1), and that projection attains
    the optimum the exact solver certifies, with equal losses — the extra direction comes from the
    LP's extreme point or the combination the dual recovers, never from the optimum (issue 24)."""
    from fairaudit.linalg import LowRankMap
    from fairaudit.pca import GroupProblem
    from fairaudit.pca._sdp import solve_sdp_relaxation
    from fairaudit.reproduce import samadi

    X, groups = samadi.credit(shared_file("credit/default_degree.csv").parents[1])
    problem = GroupProblem.from_data(X, encode_groups(groups))
    for d in (9, 11):
        P, value, _ = solve_sdp_relaxation(problem, d)
        eigenvalues, vectors = np.linalg.eigh(P)
        assert np.all((eigenvalues < 1e-4) | (eigenvalues > 1 - 1e-4)) and int((eigenvalues > 0.5).sum()) == d
        losses = problem.losses(LowRankMap(vectors[:, ::-1][:, :d], np.ones(d)), d)
        exact = FairPCA(d).fit(X, sensitive_features=groups)
        assert losses.max() == pytest.approx(exact.group_losses_.max(), rel=1e-5)
        assert losses.max() == pytest.approx(value, rel=1e-5) and np.ptp(losses) < 1e-5 * losses.max()
