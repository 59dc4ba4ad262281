"""Intervals on every number (issue 10): resampling, intervals, the driver, coverage, cancel,
held-out rows and kept models."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairaudit import AuditData, uncertainty
from fairaudit.audit import (
    LEAKAGE_METRICS,
    RECORD_COLUMNS,
    RECORD_KEY,
    AuditCancelled,
    AuditConfig,
    AuditResult,
    Recorder,
    run_audit,
)
from fairaudit.errors import ParameterError
from fairaudit.report import records_csv, result_json
from fairaudit.samples import load_sample

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_coverage import coverage, designs
from bench_coverage_nmf import coverage as nmf_coverage
from bench_coverage_nmf import one_repetition, population, population_values


# ---------------------------------------------------------------------------- building blocks
def test_stratified_resample_keeps_every_group_and_its_size():
    codes = np.repeat([0, 1, 2], [50, 8, 2])
    rows = uncertainty.stratified_resample(codes, np.random.default_rng(0))
    assert np.array_equal(np.bincount(codes[rows]), [50, 8, 2])
    subset = np.flatnonzero(np.arange(60) % 2 == 0)
    rows = uncertainty.stratified_resample(codes, np.random.default_rng(1), subset)
    assert set(rows) <= set(subset) and np.array_equal(np.bincount(codes[rows], minlength=3), np.bincount(codes[subset], minlength=3))


def test_stratified_split_holds_out_a_share_of_every_group():
    codes = np.repeat([0, 1], [100, 10])
    train, test = uncertainty.stratified_split(codes, 0.3, 0)
    assert np.intersect1d(train, test).size == 0 and len(train) + len(test) == 110
    assert np.bincount(codes[test]).tolist() == [30, 3]


def test_intervals_percentile_and_basic():
    values = np.arange(1.0, 101.0)
    low, high = uncertainty.bootstrap_interval(values, 0.9, method="percentile")
    assert low == pytest.approx(np.quantile(values, 0.05)) and high == pytest.approx(np.quantile(values, 0.95))
    basic = uncertainty.bootstrap_interval(values, 0.9, point=40.0, method="basic")
    assert basic == pytest.approx((80 - high, 80 - low))
    assert all(math.isnan(v) for v in uncertainty.bootstrap_interval([1.0, np.nan, np.nan, np.nan], 0.95))
    assert uncertainty.bootstrap_interval([1.0, 2.0, np.inf, np.inf], 0.5)[1] == np.inf  # no inf − inf


def test_disparity_follows_the_point_estimates_pair():
    found = uncertainty.disparity(np.array([0.5, 2.0, 1.0]), errors=np.array([1.5, 3.0, 2.0]))
    assert (found["worst"], found["best"], found["gap"], found["ratio"]) == (1, 0, 1.5, 4.0)
    assert found["error_ratio"] == pytest.approx(3.0 / 1.5)
    flipped = uncertainty.disparity(np.array([2.5, 2.0, 1.0]), pair=(1, 0))  # a replicate where the order flips
    assert flipped["gap"] == -0.5 and flipped["ratio"] == pytest.approx(0.8)
    assert math.isnan(uncertainty.disparity(np.array([0.0, 1.0]))["ratio"])
    assert uncertainty.disparity(np.array([0.0, 1.0]), pair=(1, 0))["ratio"] == math.inf


def test_bad_options_are_refused_with_the_option_named():
    for options, word in (({"bootstrap": -1}, "bootstrap"), ({"bootstrap": 5}, "at least 10"), ({"confidence": 1.0}, "confidence"),
                          ({"holdout": 0.9}, "holdout"), ({"flag_ratio": 1.0}, "flag_ratio")):
        with pytest.raises(ParameterError, match=word):
            AuditConfig(**options)


def test_default_replicates_are_fixed_per_family_and_capped_only_by_the_variable(monkeypatch):
    """The default count never depends on the data's size or the machine's speed (a time budget
    may stop the replicates, and says so: tests/test_replicate_jobs.py)."""
    from fairaudit.vocabulary import render

    monkeypatch.delenv(uncertainty.DEFAULT_CAP_VARIABLE, raising=False)
    for method, count in uncertainty.DEFAULT_BOOTSTRAP.items():
        assert uncertainty.resolve_replicates(method, None) == uncertainty.default_replicates(method)
        assert uncertainty.resolve_replicates(method, None)[0] == count > 0
    count, why = uncertainty.resolve_replicates("nmf", 0)
    assert count == 0 and render(why, "cli") == "intervals turned off (--bootstrap 0)"
    monkeypatch.setenv(uncertainty.DEFAULT_CAP_VARIABLE, "12")
    count, why = uncertainty.resolve_replicates("pca", None)
    assert count == 12 and uncertainty.DEFAULT_CAP_VARIABLE in why
    assert uncertainty.resolve_replicates("pca", 40)[0] == 40  # an explicit number is never capped


# ---------------------------------------------------------------------------- the audit driver
@pytest.fixture(scope="module")
def pca_result():
    events = []
    config = AuditConfig(ranks=(1, 2, 3), variants=("vanilla", "fair_eig", "fair_sdp"), bootstrap=20, holdout=0.3, keep_models=True)
    return run_audit(load_sample("two_groups"), config, progress=events.append), events


def test_records_carry_intervals_in_json_and_csv(pca_result):
    result, _ = pca_result
    records = result.records
    assert list(records.columns) == RECORD_COLUMNS
    assert records.groupby(["method", "variant", "rank", "group", "metric"]).size().max() == 1
    loss = records[(records.variant == "vanilla") & (records.metric == "loss")]
    assert loss.ci_low.notna().all() and (loss.ci_low <= loss.ci_high).all()
    # fair_sdp is not bootstrapped (same problem as fair_eig): NaN, and the reason is a warning
    assert records[(records.variant == "fair_sdp") & (records.metric == "loss")].ci_low.isna().all()
    assert any("fair_sdp" in w and "no interval" in w for w in result.warnings)
    assert any("seconds" in w and "fact of the fit" in w for w in result.warnings)
    payload = json.loads(result_json(result))
    assert {"ci_low", "ci_high"} <= set(payload["records"][0])
    assert payload["uncertainty"]["pca"]["replicates"] == 20 and payload["uncertainty"]["pca"]["holdout"] == 0.3
    again = AuditResult.from_dict(payload)
    np.testing.assert_allclose(again.records.ci_low, result.records.ci_low, equal_nan=True)
    pd.testing.assert_frame_equal(again.comparisons, result.comparisons)  # the comparisons survive the JSON (NaN as null)
    assert records_csv(result).splitlines()[0] == ",".join(RECORD_COLUMNS)


def test_gaps_and_ratios_with_intervals_that_can_include_parity(pca_result):
    result, _ = pca_result
    whole = result.records[(result.records.group == "") & (result.records.variant == "vanilla")]
    table = whole.pivot_table(index="rank", columns="metric", values=["value", "ci_low"])
    assert {"loss_gap", "loss_ratio", "error_ratio", "max_loss", "loss_gap_pvalue"} <= set(table["value"].columns)
    # rank 1 of the default sample: the two groups' losses are close — a wide interval for the gap,
    # and random groups of the same sizes show as large a gap (no verdict of a gap there)
    assert 0 < table.loc[1, ("ci_low", "loss_gap")] < table.loc[1, ("value", "loss_gap")] / 2
    assert table.loc[1, ("value", "loss_gap_pvalue")] > 0.2
    from fairaudit.findings import Records

    rank_one = Records(result, "pca").judge("vanilla", "loss", ranks=[1])
    assert rank_one.verdict == "no_evidence" and rank_one.headline.p_permutation > 0.2 and "test" in rank_one.headline.failed
    # the comparisons table: the same pair, its interval equal to the gap record's (two groups: one pair)
    pair = result.comparisons[(result.comparisons.variant == "vanilla") & (result.comparisons["rank"] == 1)
                              & (result.comparisons.metric == "loss")].iloc[0]
    assert (pair.ci_low, pair.ci_high) == pytest.approx((table.loc[1, ("ci_low", "loss_gap")], whole[(whole["rank"] == 1) & (whole.metric == "loss_gap")].ci_high.iloc[0]))
    assert pair.p_permutation == pytest.approx(table.loc[1, ("value", "loss_gap_pvalue")])


def test_heldout_metrics_and_kept_models(pca_result):
    result, _ = pca_result
    metrics = set(result.records.metric)
    assert {"heldout_loss", "heldout_error", "heldout_balanced_accuracy", "heldout_loss_gap"} <= metrics
    assert result.uncertainty["pca"]["rows"] == {"train": 420, "heldout": 180}
    model = result.models[("pca", "fair_eig", 2)]
    assert model.transform(load_sample("two_groups").X[:5]).shape[1] == model.n_components_


def test_progress_reports_bootstrap_replicates(pca_result):
    _, events = pca_result
    stages = [e["stage"] for e in events]
    assert stages.count("fit") == 9 and stages.count("bootstrap") == 20
    last = events[-1]
    assert last["stage"] == "bootstrap" and last["done"] == last["total"] == 20
    assert {"method", "variant", "rank", "done", "total", "seconds", "stage"} <= set(last)


def test_the_point_estimates_are_handed_over_before_the_replicates(pca_result):
    """One ``stage="estimates"`` event per family, after its fits and before its first replicate,
    carrying every point value of the final result (no interval yet, and it says they are pending)."""
    result, events = pca_result
    stages = [e["stage"] for e in events]
    assert stages.count("estimates") == 1 and stages.index("estimates") == stages.index("bootstrap") - 1
    event = events[stages.index("estimates")]
    assert event["total"] == 20 and {"method", "variant", "rank", "done", "total", "seconds"} <= set(event)
    early = event["result"]
    summary = early.uncertainty["pca"]
    assert summary["intervals_pending"] and summary["replicates"] == 20 and summary["rows"] == result.uncertainty["pca"]["rows"]
    final = result.records.set_index(RECORD_KEY)
    points = early.records.set_index(RECORD_KEY)
    assert set(points.index) <= set(final.index)
    measured = points.index[~points.index.get_level_values("metric").isin(["seconds", "iterations"])]
    np.testing.assert_array_equal(points.loc[measured, "value"], final.loc[measured, "value"])
    # no bootstrap interval yet; only the rows that carry their own (the leakage test's) have one, final already
    bootstrapped = final.loc[points.index].ci_low.notna() & points.ci_low.isna()
    losses = (points.index.get_level_values("metric") == "loss") & (points.index.get_level_values("variant") == "vanilla")
    assert bootstrapped[losses].all()
    own = points.ci_low.notna()
    assert own.any() and all(m.removeprefix("heldout_") in LEAKAGE_METRICS for m in points[own].index.get_level_values("metric"))
    np.testing.assert_array_equal(points[own].ci_low, final.loc[points[own].index].ci_low)
    assert not early.models and early.data == result.data


def test_no_estimates_event_without_intervals():
    events = []
    run_audit(load_sample("two_groups"), AuditConfig(ranks=(1,), variants="vanilla", bootstrap=0), progress=events.append)
    assert "estimates" not in {e["stage"] for e in events}


def test_a_callback_that_raises_cancels_the_run_during_the_bootstrap():
    def cancel(event):
        if event["stage"] == "bootstrap" and event["done"] == 3:
            raise AuditCancelled("stopped by the user")

    with pytest.raises(AuditCancelled, match="stopped by the user"):
        run_audit(load_sample("two_groups"), AuditConfig(ranks=(1,), variants="vanilla", bootstrap=50), progress=cancel)


@pytest.mark.parametrize(
    ("method", "options", "metric"),
    [
        ("nmf", {}, "heldout_rel_loss"),
        ("fs", {"fs": {"kmeans_runs": 3}}, "heldout_relative_balance"),
        ("cpd", {"cpd": {"sweep": False, "n_epochs": 30}}, "heldout_residual_fit"),
    ],
)
def test_every_family_measures_held_out_rows_and_bootstraps(method, options, metric):
    variants = {"nmf": ("vanilla", "fair_mu"), "fs": ("variance", "fufs"), "cpd": ("vanilla", "fatr")}[method]
    config = AuditConfig(methods=(method,), ranks=(2,), variants=variants, bootstrap=10, holdout=0.3, options=options, keep_models=True)
    result = run_audit(load_sample("two_groups"), config)
    records = result.records
    assert metric in set(records.metric)
    bootstrapped = records[(records.metric == metric.removeprefix("heldout_")) & records.variant.isin(variants)]
    assert bootstrapped.ci_low.notna().all(), bootstrapped
    assert records.groupby(["variant", "rank", "group", "metric"]).size().max() == 1
    assert {key[1] for key in result.models} == set(variants)


def _tall_and_wide(shape):
    rng = np.random.default_rng(3)
    n, d = shape
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3.0, size=d) + rng.normal(size=d)
    groups = np.where(np.arange(n) < int(0.6 * n), "a", "b")
    X[groups == "b"] *= 1.5
    return AuditData.from_arrays(X, groups)


@pytest.mark.parametrize("shape", [(300, 6), (40, 70)], ids=["tall", "wide"])
def test_pca_replicates_and_held_out_rows_equal_the_direct_computation(shape):
    """A replicate reweights the engine's moments (no resample materialised; the scaling
    re-estimated on it) and must give what a fit on the materialised resample, scaled on its own,
    gives; held-out rows, scaled as the training rows and centred at the training mean, the losses
    computed from their rows directly — for tall data (moments) and wide data (the row space)."""
    from fairaudit.audit import RecordSink
    from fairaudit.data import scale_features
    from fairaudit.pca import FairPCA
    from fairaudit.pca.audit import PCAAudit

    data = _tall_and_wide(shape)
    config = AuditConfig(ranks=(1, 2, 3), variants=("vanilla", "fair_eig"))
    family = PCAAudit(data, config, RecordSink("pca"))
    everything = np.arange(data.n_rows)
    fits = family.fit(everything)
    rows = uncertainty.stratified_resample(family.codes, np.random.default_rng(0))
    refits = family.fit(rows, warm=fits, replicate=True)
    direct = FairPCA(2).fit(scale_features(data.X_raw[rows], "standardize"), sensitive_features=family.codes[rows])
    np.testing.assert_allclose(refits.models[("fair_eig", 2)].group_losses_, direct.group_losses_, rtol=1e-6, atol=1e-9)

    train, test = uncertainty.stratified_split(family.codes, 0.3, 0)
    trained = family.fit(train)
    found = {}

    class Found(Recorder):
        def add(self, variant, rank, metric, value, group=""):
            found[(variant, rank, group, metric)] = value

    family.measure(trained, test, Found(), heldout=True, replicate=True)
    raw = data.X_raw[train]
    shift, std = raw.mean(axis=0), raw.std(axis=0)
    model = trained.models[("vanilla", 2)]
    A = (data.X_raw[test] - shift) / std - model.mean_
    P = model.components_.T @ model.components_
    for code, label in enumerate(family.labels):
        block = A[family.codes[test] == code]
        error = np.sum((block - block @ P) ** 2) / len(block)
        best = np.sort(np.linalg.svd(block, compute_uv=False) ** 2)[::-1][2:].sum() / len(block)
        assert found[("vanilla", 2, label, "error")] == pytest.approx(error, rel=1e-8)
        assert found[("vanilla", 2, label, "loss")] == pytest.approx(error - best, rel=1e-6, abs=1e-9)


def test_wide_data_audit_bootstraps_and_holds_out():
    result = run_audit(_tall_and_wide((40, 70)), AuditConfig(ranks=(1, 2), variants=("vanilla", "fair_eig"), bootstrap=10, holdout=0.3))
    loss = result.records.query("metric in ('loss', 'heldout_loss') and variant == 'fair_eig'")
    assert len(loss) == 8 and loss.value.notna().all() and loss.ci_low.notna().all()


def test_cancel_during_the_cp_bootstrap_stops_its_worker_threads():
    """Contract 4 in the CP family, whose replicates fit on worker threads: the exception raised
    by the callback propagates and no worker is left running."""
    import threading

    def cancel(event):
        if event["stage"] == "bootstrap":
            raise AuditCancelled("stopped")

    config = AuditConfig(
        methods=("cpd",), ranks=(2,), variants=("vanilla", "fatr", "hsic"), bootstrap=10,
        options={"cpd": {"sweep": False, "n_epochs": 20, "n_jobs": 2}},
    )
    with pytest.raises(AuditCancelled, match="stopped"):
        run_audit(load_sample("two_groups"), config, progress=cancel)
    assert not [t for t in threading.enumerate() if t.name.startswith("fairaudit-cpd")]


# ---------------------------------------------------------------------------- acceptance
def test_bootstrap_intervals_cover_the_population_loss():
    """Per-group PCA loss, two Gaussian groups whose population losses are both positive at rank 1
    (exact values from the covariances). 30 samples × 80 replicates: a working 95 % interval covers
    about 28.5 of 30 times (≥ 25 with probability 0.997); a shifted or collapsed one almost never
    does, and the width check rules out an interval made wide enough to cover by accident. The
    full measurement (400 × 200) is benchmarks/bench_coverage.py."""
    found = coverage([500, 300], designs()["rotated"], rank=1, repetitions=30, replicates=80)
    assert (found["truth"] > 0.1).all()
    assert (found["coverage"]["percentile"] >= 25 / 30).all(), found
    ratio = found["width"] / found["spread"]
    assert ((2.5 < ratio) & (ratio < 6.0)).all(), ratio  # 3.92 for a normal 95 % interval


def test_nmf_bootstrap_intervals_cover_the_population_values():
    """Vanilla NMF at rank 1 on a planted non-negative population (6,000 rows, 70 % group A): 20
    samples of 140 + 60 rows, the audit's 20 warm-started replicates each. Each group's relative
    loss and error and the loss gap are covered in at least 14 of 20 samples (about 18 for a
    working interval), with widths of 2 to 7 spreads of the point estimate (3.92 for a normal 95 %
    interval): a collapsed or shifted interval fails. The full measurement is
    benchmarks/bench_coverage_nmf.py."""
    X, labels = population(6000)
    truth = population_values(X, labels, (1,), ("vanilla",))
    runs = [one_repetition(X, labels, (140, 60), (1,), ("vanilla",), 20, ("warm",), r) for r in range(20)]
    found = nmf_coverage(truth, runs, "warm", "vanilla", 1)
    assert set(found) == {"rel_loss g=A", "rel_loss g=B", "rel_error g=A", "rel_error g=B", "loss gap A−B"}
    for name, figures in found.items():
        assert figures.percentile >= 14 / 20, (name, figures)
        assert 2.0 < figures.width < 7.0, (name, figures)


def test_every_familys_numbers_come_before_any_familys_intervals():
    """Two families in one audit: both families' fits and point estimates, then both families'
    replicates (a viewer has every number before the first interval starts); the result is the same
    as auditing each family on its own."""
    events = []
    data = load_sample("two_groups")
    config = AuditConfig(methods=("pca", "fs"), ranks=(1, 2), variants=("vanilla", "lapscore"), bootstrap=10)
    together = run_audit(data, config, progress=events.append)
    order = [(e["method"], e["stage"]) for e in events]
    first_replicate = order.index(("pca", "bootstrap"))
    assert order.index(("pca", "estimates")) < order.index(("fs", "estimates")) < first_replicate
    assert all(stage != "fit" for _, stage in order[first_replicate:])
    for method in ("pca", "fs"):
        alone = run_audit(data, AuditConfig(methods=(method,), ranks=(1, 2), variants=("vanilla",) if method == "pca" else ("lapscore",),
                                            bootstrap=10)).records
        mine = together.records[together.records.method == method].reset_index(drop=True)
        facts = alone.metric.isin(["seconds", "estimate_seconds"])
        np.testing.assert_array_equal(mine[~facts.to_numpy()][["value", "ci_low", "ci_high"]], alone[~facts][["value", "ci_low", "ci_high"]])
