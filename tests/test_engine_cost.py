"""The cost model of bootstrap replicates (fairaudit.uncertainty.replicate_seconds and
ReplicateCost, fairaudit.cost): a PCA replicate counts its groups, a pass over the data before the
replicates (the dask engine's) is counted once, and the default count fits both into its budget."""

from __future__ import annotations

import pytest

from fairaudit import uncertainty
from fairaudit.uncertainty import ReplicateCost, replicate_seconds, resolve_replicates


def test_the_pca_replicate_model_gives_its_measurements():
    """PCA_REPLICATE_TERMS were fitted to REPLICATE_MEASURED's two-group replicates (within 18 %)."""
    for n_rows, n_features, seconds in uncertainty.REPLICATE_MEASURED["pca"]:
        assert replicate_seconds("pca", n_rows, n_features, None, 2) == pytest.approx(seconds, rel=0.2), (n_rows, n_features)


def test_a_pca_replicate_costs_more_with_more_groups():
    """Fair PCA's dual has a weight per group (cutting planes from three groups on): the fits cost
    PCA_GROUP_FACTOR times two groups' — measured on LSAC (26,551 × 10) in 2, 3 and 6 groups."""
    two, three, six = (replicate_seconds("pca", 26_551, 10, None, k) for k in (2, 3, 6))
    weighted = replicate_seconds("pca", 26_551, 10, None, 2) - replicate_seconds("pca", 26_551, 10, None, 2, moments_pass=False)
    assert replicate_seconds("pca", 26_551, 10) == two  # groups not known: two
    assert (three - weighted) / (two - weighted) == pytest.approx(uncertainty.pca_group_factor(3)) == pytest.approx(1.7)
    assert (six - weighted) / (two - weighted) == pytest.approx(1.7 + 3 * 0.32)
    assert replicate_seconds("nmf", 600, 10, None, 6) == replicate_seconds("nmf", 600, 10)  # other families: cells alone


def test_a_pass_before_the_replicates_is_counted_once_in_the_default(monkeypatch):
    monkeypatch.delenv(uncertainty.DEFAULT_CAP_VARIABLE, raising=False)
    cost = ReplicateCost(each=0.5, once=20)
    assert cost.seconds(0) == 0 and cost.seconds(10) == 25 and cost.affordable(60) == 80
    count, why = resolve_replicates("pca", None, cost=cost)
    assert count == 80 and "shortened" in why and "one more pass over the data, about 20 seconds, then about 0.5 s per replicate" in why
    count, why = resolve_replicates("pca", None, cost=ReplicateCost(0.5, 58))
    assert count == 0 and "no intervals by default" in why and "one more pass over the data" in why
    assert resolve_replicates("pca", 30, cost=ReplicateCost(0.5, 58))[0] == 30  # asked for: always run
    assert resolve_replicates("pca", None, cost=ReplicateCost(0.0))[0] == uncertainty.DEFAULT_BOOTSTRAP["pca"]


@pytest.mark.parametrize("method, shape, groups", [("fs", (30000, 6), 2), ("pca", (20000, 5), 3), ("nmf", (30000, 4), 2)])
def test_the_expected_default_replicates_are_the_ones_the_audit_runs(method, shape, groups):
    """The CLI's expectation and the dashboard's default (``expected_parts``, ``default_replicates``
    with :func:`fairaudit.audit.rank_count`) count the ranks the audit sweeps: feature selection's
    default sizes (2 of 6 features, not 4), PCA's ranks up to the features (5, not 10). They counted
    the defaults' 4 sizes and 10 ranks: on 30,000 × 6 the dashboard offered 26 replicates where the
    audit ran 50."""
    import numpy as np

    from fairaudit.audit import AuditConfig, RecordSink, _family, rank_count
    from fairaudit.cost import expected_parts
    from fairaudit.data import AuditData

    rng = np.random.default_rng(0)
    n, d = shape
    data = AuditData.from_arrays(np.abs(rng.normal(size=(n, d))) + 0.1, np.arange(n) % groups)
    config = AuditConfig(methods=(method,))
    family = _family(method)(data, config, RecordSink(method))
    ran = resolve_replicates(method, None, cost=family.replicate_cost())[0]
    assert rank_count(method, config, n, d) == len(family.ranks)
    assert expected_parts(n, d, config, n_groups=groups)[method].replicates == ran
    dashboard = uncertainty.default_replicates(method, n, d, rank_count(method, AuditConfig(), n, d), n_groups=groups)[0]
    assert dashboard == ran


def test_an_estimate_never_raises_for_ranks_the_data_do_not_allow():
    """The expected time of a run whose ranks exceed the data is an estimate: it counts the ranks as
    asked, and the audit itself reports the error in the interface's words."""
    from fairaudit.audit import AuditConfig, rank_count
    from fairaudit.cost import expected_parts

    config = AuditConfig(methods=("pca",), ranks=(9,))
    assert rank_count("pca", config, 40, 4) == 1
    assert expected_parts(40, 4, config)["pca"].fits > 0  # no RankError here
