"""The feature-selection family inside an audit: records, details, JSON, report, CLI — and the FUFS
paper's crime data (skipped when ../shared/datasets is absent)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fairaudit import FUFS, MCFS, AuditData
from fairaudit.audit import AuditConfig, AuditResult, run_audit
from fairaudit.cli import main
from fairaudit.errors import ParameterError
from fairaudit.findings import findings
from fairaudit.fs.audit import VARIANTS, default_ranks
from fairaudit.report import render_html, result_json

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def _planted(n=160, seed=0):
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 2, size=n)
    label = rng.integers(0, 2, size=n)
    informative = label[:, None] * 0.8 + rng.normal(scale=0.3, size=(n, 6))
    proxies = group[:, None] * 3 + rng.normal(scale=0.2, size=(n, 2))
    X = np.hstack([informative, proxies])
    names = [f"info{j}" for j in range(6)] + ["zip_proxy", "name_proxy"]
    return AuditData.from_arrays(X, np.where(group == 1, "b", "a"), feature_names=names, label=label, label_name="y")


@pytest.fixture(scope="module")
def result():
    config = AuditConfig(methods=("fs",), ranks=(2, 4), options={"fs": {"kmeans_runs": 3}})
    return run_audit(_planted(), config)


def test_records_for_every_variant_and_rank(result):
    records = result.records
    assert set(records.method) == {"fs"}
    assert set(records.variant) == set(VARIANTS)
    assert set(records["rank"]) == {2, 4}
    per_fit = records.groupby(["variant", "rank"]).metric.apply(set)
    expected = {"acc", "acc_std", "nmi", "nmi_std", "balance", "balance_std", "proportion", "proportion_std",
                "alignment_data", "alignment_protected", "mmd2", "mmd2_rbf", "unfairness", "unfairness_balanced", "seconds"}
    for metrics in per_fit:
        assert expected <= metrics
    assert set(records[records.group != ""].metric) == {"cluster_share"}  # per group: the balance verdict's quantity
    shares = records[records.metric == "cluster_share"]
    assert shares.value.between(0, 1 + 1e-12).all() and len(shares) == len(per_fit) * records[records.group != ""].group.nunique()


def test_selected_features_are_reported_and_fufs_avoids_the_proxies(result):
    details = result.details["fs"]
    for variant in VARIANTS:
        for rank in (2, 4):
            assert len(details[variant][str(rank)]["selected"]) == rank
    assert {"zip_proxy", "name_proxy"} & set(details["variance"]["2"]["selected"]) == {"zip_proxy", "name_proxy"}
    assert not {"zip_proxy", "name_proxy"} & set(details["fufs"]["4"]["selected"])
    proxies = details["fufs"]["2"]["proxies"]  # the 2 features ranked first by FUFS's decomposition indicator g
    assert set(proxies) == {"zip_proxy", "name_proxy"}
    assert details["fufs"]["4"]["kernel"].startswith("exact RBF")
    assert details["fufs"]["4"]["formulation"].startswith("as printed (Xing et al. 2021, eq. 6")
    fair = result.metric("alignment_protected", "fs").set_index(["variant", "rank"]).value
    assert fair[("fufs", 2)] < fair[("variance", 2)]


def test_details_travel_through_json_and_into_the_report(result):
    payload = json.loads(result_json(result))
    assert payload["details"]["fs"]["fufs"]["2"]["selected"] == result.details["fs"]["fufs"]["2"]["selected"]
    again = AuditResult.from_dict(payload)
    assert again.details == result.details
    page = render_html(result)
    assert "Details per fit" in page and "zip_proxy" in page and "FUFS (fair)" in page
    sentences = findings(result)["fs"]
    assert any("FUFS" in s.text and "alignment with the groups" in s.text for s in sentences)


def test_default_sweep_is_ten_to_forty_percent():
    assert default_ranks(121) == (12, 24, 36, 48)
    assert default_ranks(8) == (1, 2, 3)
    assert default_ranks(1694) == (169, 339, 508, 678)


def test_clusters_default_to_the_groups_without_a_label_and_say_so():
    data = _planted()
    data = AuditData.from_arrays(data.X_raw, data.sensitive_features, feature_names=data.feature_names)
    config = AuditConfig(methods=("fs",), ranks=(2,), variants=("variance",), options={"fs": {"kmeans_runs": 2}})
    out = run_audit(data, config)
    assert "acc" not in set(out.records.metric)
    assert any("K = 2 clusters" in w for w in out.warnings)
    with pytest.raises(ParameterError, match="clusters"):
        run_audit(data, AuditConfig(methods=("fs",), ranks=(2,), options={"fs": {"n_clusters": 1}}))


@pytest.mark.parametrize(("formulation", "kernel"), [("paper", "exact RBF kernels on a stratified sample of 100 of 160 rows"),
                                                    ("alignment", "Nyström RBF kernel with 60 landmark rows")])
def test_kernel_approximation_is_recorded_in_the_audit(formulation, kernel):
    config = AuditConfig(methods=("fs",), ranks=(3,), variants=("fufs",),
                         options={"fs": {"kmeans_runs": 2, "exact_max_rows": 100, "n_landmarks": 60, "formulation": formulation}})
    out = run_audit(_planted(), config)
    assert out.details["fs"]["fufs"]["3"]["kernel"].startswith(kernel)
    assert any("FUFS computed its kernels with an approximation" in w for w in out.warnings)
    assert out.details["fs"]["fufs"]["3"]["formulation"].startswith("as printed" if formulation == "paper" else "ours")


def test_one_fit_serves_the_sweep_and_mcfs_paths_equal_fits_per_size():
    data = _planted()
    config = AuditConfig(methods=("fs",), ranks=(2, 3, 5), variants=("mcfs", "fufs", "udfs"), options={"fs": {"kmeans_runs": 2}})
    out = run_audit(data, config)
    seconds = out.metric("seconds", "fs").set_index(["variant", "rank"]).value
    for variant in ("mcfs", "fufs", "udfs"):
        assert len({seconds[(variant, r)] for r in (2, 3, 5)}) == 1  # one fit, its time at every size
    from fairaudit.fs.audit import minmax

    X = minmax(data.X_raw)
    big = MCFS(5, n_clusters=2).fit(X)
    for m in (1, 2, 3):
        np.testing.assert_array_equal(np.sort(big.ranking_for(m)[:m]), np.flatnonzero(MCFS(m, n_clusters=2).fit(X).get_support()))
    with pytest.raises(ParameterError, match="ranking_for"):
        big.ranking_for(6)


def test_replicates_start_fufs_from_the_audits_fit():
    """A bootstrap replicate's FUFS as printed starts from the audit's (m, g) (issue 23: the
    sampling variability of this solution); on the audit's own rows it stays at that solution and
    settles within a few iterations, where the audit's fit from m = g = ½ took many. The other
    selectors and a restart keep their own starts."""
    from fairaudit import uncertainty
    from fairaudit.audit import RecordSink
    from fairaudit.fs.audit import FSAudit

    data = _planted()
    family = FSAudit(data, AuditConfig(methods=("fs",), ranks=(2, 4), options={"fs": {"kmeans_runs": 2}}), RecordSink("fs"))
    rows = np.arange(data.n_rows)
    fits = family.fit(rows)
    audit_fit = fits.models[("fufs", 4)]
    start = np.concatenate([audit_fit.scores_, audit_fit.sensitive_scores_])
    same_rows = family.fit(rows, warm=fits, replicate=True)
    refit = same_rows.models[("fufs", 4)]
    np.testing.assert_array_equal(refit.init, start)
    np.testing.assert_array_equal(refit.ranking_, audit_fit.ranking_)
    assert refit.n_iter_ <= 3 < audit_fit.n_iter_
    resample = uncertainty.stratified_resample(family.codes, np.random.default_rng(0))
    assert isinstance(family.fit(resample, warm=fits, replicate=True).models[("fufs", 4)].init, np.ndarray)
    assert family.restart(fits, rows, 5).models[("fufs", 4)].init == "half"
    assert family.fit(rows, warm=fits).models[("fufs", 4)].init == "half"  # not a replicate: the audit's own start


def test_fufs_start_must_fit_the_features():
    X = _planted().X
    with pytest.raises(ParameterError, match="init"):
        FUFS(2, init=np.full(3, 0.5)).fit(X, sensitive_features=np.arange(len(X)) % 2)
    with pytest.raises(ParameterError, match="init"):
        FUFS(2, init=np.full(2 * X.shape[1], 1.5)).fit(X, sensitive_features=np.arange(len(X)) % 2)


def test_unknown_formulation_names_the_option_in_each_interface():
    config = AuditConfig(methods=("fs",), ranks=(2,), variants=("fufs",), options={"fs": {"formulation": "normalised"}})
    with pytest.raises(ParameterError) as caught:
        run_audit(_planted(), config)
    assert "--fufs-formulation paper" in caught.value.render("cli")
    assert "“FUFS formulation”" in caught.value.render("dashboard")
    assert "formulation='alignment'" in str(caught.value)


def test_cli_runs_fs_with_label_and_clusters(tmp_path, capsys):
    data = _planted()
    frame = np.column_stack([data.X_raw, data.label, np.asarray(data.sensitive_features)])
    path = tmp_path / "planted.csv"
    header = ",".join([*data.feature_names, "y", "group"])
    lines = [header] + [",".join(map(str, row)) for row in frame]
    path.write_text("\n".join(lines) + "\n")
    out_json = tmp_path / "out.json"
    code = main(["audit", str(path), "--sensitive", "group", "--label", "y", "--methods", "fs", "--ranks", "2",
                 "--variants", "variance,fufs", "--clusters", "3", "--kmeans-runs", "2", "--json", str(out_json), "--verbose"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "selected (fs/fufs, rank 2):" in printed and "balance" in printed
    payload = json.loads(out_json.read_text())
    assert payload["config"]["options"] == {"fs": {"n_clusters": 3, "kmeans_runs": 2}}
    assert main(["audit", str(path), "--sensitive", "group", "--methods", "fs", "--clusters", "1"]) == 2
    assert "--clusters must be at least 2" in capsys.readouterr().err


@pytest.mark.shared_data
def test_crime_fufs_is_least_aligned_with_race_and_most_balanced():
    """The FUFS paper's crime data at 10–40 % of the features (benchmarks/bench_fs_crime.py prints the
    full table). With the fairness weight alpha = 3 FUFS beats every fairness-unaware selector on
    cluster balance and on kernel alignment with race at every size; alpha = 1 (the default) does
    at most sizes only (see the benchmark)."""
    path = SHARED / "fufs" / "crime.csv"
    if not path.exists():
        pytest.skip(f"real data not available: {path} (the ../shared/datasets folder is absent)")
    table = np.loadtxt(path, delimiter=",")
    race = np.where(table[:, 2] > 0.06, "racepctblack>0.06", "racepctblack<=0.06")  # the paper's split
    X = np.delete(table[:, :-1], 2, axis=1)
    data = AuditData.from_arrays(X, race, label=table[:, -1].astype(int), label_name="violent_crime")
    config = AuditConfig(methods=("fs",), options={"fs": {"kmeans_runs": 10, "n_clusters": 2, "alpha": 3.0}})
    out = run_audit(data, config)
    wide = out.records.pivot_table(index=["variant", "rank"], columns="metric", values="value")
    baselines = [v for v in VARIANTS if v != "fufs"]
    for rank in (12, 24, 36, 48):
        fufs = wide.loc[("fufs", rank)]
        assert fufs["balance"] > max(wide.loc[(b, rank), "balance"] for b in baselines)
        assert fufs["alignment_protected"] < min(wide.loc[(b, rank), "alignment_protected"] for b in baselines)


def test_cli_fufs_flags_reach_the_options_and_the_details(tmp_path, capsys):
    data = _planted()
    frame = np.column_stack([data.X_raw, np.asarray(data.sensitive_features)])
    path = tmp_path / "planted.csv"
    path.write_text("\n".join([",".join([*data.feature_names, "group"])] + [",".join(map(str, row)) for row in frame]) + "\n")
    out_json = tmp_path / "out.json"
    code = main(["audit", str(path), "--sensitive", "group", "--methods", "fs", "--ranks", "2", "--variants", "fufs",
                 "--kmeans-runs", "2", "--fufs-formulation", "alignment", "--fufs-alpha", "2", "--fufs-beta", "0.5",
                 "--json", str(out_json), "--verbose"])  # the details per fit: with --verbose
    assert code == 0
    payload = json.loads(out_json.read_text())
    assert payload["config"]["options"]["fs"] == {"kmeans_runs": 2, "formulation": "alignment", "alpha": 2.0, "beta": 0.5}
    assert payload["details"]["fs"]["fufs"]["2"]["formulation"].startswith("ours")
    assert "formulation" in capsys.readouterr().out
    assert main(["audit", str(path), "--sensitive", "group", "--methods", "fs", "--fufs-alpha", "-1"]) == 2
    assert "--fufs-alpha must be a number ≥ 0" in capsys.readouterr().err


def test_nearest_cluster_is_argmin_with_its_ties():
    """k-means' assignment step (one comparison per cluster) picks what ``argmin`` picks, the
    first of equally near clusters included."""
    from fairaudit.fs.evaluation import _nearest

    rng = np.random.default_rng(4)
    distance = rng.integers(0, 4, size=(6, 5, 300)).astype(float)  # many ties
    np.testing.assert_array_equal(_nearest(distance, np.int8), distance.argmin(axis=1))
    distance = rng.normal(size=(3, 2, 1000))
    np.testing.assert_array_equal(_nearest(distance, np.int16), distance.argmin(axis=1))
