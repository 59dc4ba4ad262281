"""The PCA family's audit: metrics from the moments, the row sample stated, JEVD's scheme named."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from fairaudit import AuditConfig, AuditData, metrics, run_audit
from fairaudit.cli import build_parser, config_from_args
from fairaudit.errors import FairAuditError
from fairaudit.pca import JEVDPCA, FairPCA

from .conftest import random_groups_data


@pytest.fixture
def data(rng):
    X, groups = random_groups_data(rng, 2, 6, rows_per_group=150)
    return AuditData.from_arrays(X, np.where(groups == 0, "a", "b"))


def test_moment_metrics_equal_the_row_metrics(data):
    result = run_audit(data, AuditConfig(variants=("vanilla", "fair_eig", "jevd"), ranks=(1, 3)))
    centred = data.X - data.X.mean(axis=0)
    for rank in (1, 3):
        fitted = FairPCA(rank).fit(data.X, sensitive_features=data.sensitive_features)
        Z = fitted.map_.coordinates(centred)
        whole = result.records.query("variant == 'fair_eig' and rank == @rank and group == ''").set_index("metric").value
        assert whole["variance_explained"] == pytest.approx(metrics.variance_explained(centred, fitted.map_), rel=1e-9)
        assert whole["mmd2"] == pytest.approx(metrics.mmd2(Z, data.groups.codes), rel=1e-8)
        assert whole["mmd2_rbf"] == pytest.approx(metrics.mmd2_rbf(Z, data.groups.codes), rel=1e-6)
    assert not any("stratified sample" in w for w in result.warnings)  # 300 rows: every row used


def test_the_row_sample_is_stated_when_it_is_a_sample(data):
    result = run_audit(data, AuditConfig(variants=("vanilla",), ranks=(2,), leakage_max_rows=120))
    note = next(w for w in result.warnings if "stratified sample" in w)
    assert "of 300 rows" in note and "a: " in note and "b: " in note
    assert "error, loss, variance_explained and mmd2 use every row" in note


def test_the_audit_names_the_jevd_scheme_that_ran(data):
    default = run_audit(data, AuditConfig(variants=("jevd",), ranks=(1, 2)))
    assert default.details["pca"]["jevd"]["1"]["solver"].startswith("jacobi")
    paper = run_audit(data, AuditConfig(variants=("jevd",), ranks=(2,), options={"pca": {"jevd_solver": "paper"}}))
    assert paper.details["pca"]["jevd"]["2"]["solver"].startswith("paper (Algorithm 1 as printed)")
    with pytest.warns(ConvergenceWarning) as caught:
        JEVDPCA(2).fit(data.X, sensitive_features=data.sensitive_features)
    assert f"pca/jevd: {caught[0].message}" in paper.warnings  # the estimator's words reach the report


def test_an_unknown_jevd_scheme_is_refused_in_every_interface(data):
    with pytest.raises(FairAuditError) as caught:
        run_audit(data, AuditConfig(variants=("jevd",), options={"pca": {"jevd_solver": "svd"}}))
    assert "jevd_solver='jacobi'" in str(caught.value)
    assert "--jevd-solver jacobi" in caught.value.render("cli")
    assert "JEVD-PCA scheme" in caught.value.render("dashboard")


def test_the_cli_passes_the_jevd_scheme():
    args = build_parser().parse_args(["audit", "x.csv", "--sensitive", "g", "--jevd-solver", "paper"])
    assert config_from_args(args).options["pca"] == {"jevd_solver": "paper"}
    args = build_parser().parse_args(["audit", "x.csv", "--sensitive", "g"])
    assert "pca" not in config_from_args(args).options


def test_an_unknown_engine_is_refused():
    with pytest.raises(FairAuditError, match="engine must be one of local"):
        AuditConfig(engine="spark")


def test_your_components_on_wide_data_are_measured_in_the_row_space(rng):
    """fairaudit.yours reads GroupProblem's losses: for wide data they are in the row space."""
    from fairaudit import PCA
    from fairaudit.yours import Representation, audit_components

    X = rng.normal(size=(30, 60))
    groups = np.repeat(["a", "b"], 15)
    data = AuditData.from_arrays(X, groups)
    ours = PCA(3).fit(data.X, sensitive_features=groups)
    mine = Representation("components", ours.components_, {"name": "components"})
    result = audit_components(data, mine, AuditConfig(methods=("pca",), ranks=(3,)))
    losses = result.metric("loss").set_index("group").value
    np.testing.assert_allclose([losses["a"], losses["b"]], ours.group_losses_, rtol=1e-8)
