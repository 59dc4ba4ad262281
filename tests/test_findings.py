"""Verdicts with stated rules (issue 10): false alarms, the default sample, leakage, degenerate
ranks, numbers for people, and the rules in every output."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from fairaudit import AuditData, metrics
from fairaudit.audit import RECORD_COLUMNS, AuditConfig, AuditResult, run_audit
from fairaudit.findings import VERDICTS, Finding, findings, verdict_rules
from fairaudit.pca import PCA, FairPCA
from fairaudit.report import render_html, result_json
from fairaudit.samples import load_sample

E_NOTATION = re.compile(r"\d[eE][-+]?\d")


def _identical_rows_random_groups(seed: int, n: int = 600, share: float = 0.2, nonnegative: bool = False):
    """Identically distributed rows; each row's group drawn at random (unequal sizes)."""
    rng = np.random.default_rng(seed)
    if nonnegative:
        X = rng.gamma(1.0, size=(n, 3)) @ rng.uniform(size=(3, 8)) + rng.uniform(0, 0.3, size=(n, 8))
    else:
        X = rng.multivariate_normal(np.zeros(6), np.diag([5, 3, 2, 1, 0.5, 0.3]), size=n)
    return AuditData.from_arrays(X, np.where(rng.random(n) < share, "B", "A"))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_groups_on_identical_rows_raise_no_pca_gap(seed):
    """A 120-row group's own PCA fits its rows better than the shared one — 5× the loss of the
    480-row group on identical rows — which a naive interval flags at most ranks. The permutation
    test against random groups of the same sizes (and the error-ratio tolerance) must not."""
    config = AuditConfig(variants=("vanilla", "fair_eig", "jevd", "cov_fair"), bootstrap=30, random_state=seed)
    result = run_audit(_identical_rows_random_groups(seed), config)
    found = findings(result)["pca"]
    alarms = [f for f in found if f.verdict in ("gap", "worse")]
    assert not alarms, [f.text for f in alarms]
    assert found[0].verdict == "no_evidence"
    assert _gaps_at_any_rank(result, "pca", "loss") == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_groups_on_identical_rows_raise_no_nmf_gap(seed):
    data = _identical_rows_random_groups(seed, n=300, nonnegative=True)
    config = AuditConfig(methods=("nmf",), ranks=(1, 2, 3), variants=("vanilla", "fair_mu"), bootstrap=10, random_state=seed)
    result = run_audit(data, config)
    found = findings(result)["nmf"]
    alarms = [f for f in found if f.verdict in ("gap", "worse")]
    assert not alarms, [f.text for f in alarms]
    assert _gaps_at_any_rank(result, "nmf", "rel_loss") == []


def _gaps_at_any_rank(result, method, metric) -> list[tuple[str, int]]:
    """Every (variant, rank) the gap rule flags — each variant judged over all its ranks, not only
    the headline rank the findings report."""
    from fairaudit.findings import Records

    records = Records(result, method)
    judged = {v: records.judge(v, metric) for v in records.variants}
    assert any(j is not None and j.verdict == "no_evidence" for j in judged.values())  # the rule did run
    return [(v, r) for v, j in judged.items() if j is not None for r in j.gap_ranks]


@pytest.fixture(scope="module")
def default_pca():
    config = AuditConfig(variants=("vanilla", "fair_eig", "jevd", "cov_fair"), bootstrap=30)
    return run_audit(load_sample("two_groups"), config)


def test_the_default_sample_shows_a_gap_that_fair_pca_mitigates(default_pca):
    found = findings(default_pca)["pca"]
    vanilla = next(f for f in found if f.variant == "vanilla")
    assert vanilla.verdict == "gap" and vanilla.rank is not None
    fair = next(f for f in found if f.variant == "fair_eig")
    assert fair.verdict == "mitigated" and fair.rank == vanilla.rank
    assert "total reconstruction error" in fair.text  # the stated cost
    assert vanilla.rule == verdict_rules()["gap"] and fair.rule == verdict_rules()["mitigated"]
    headline = vanilla.evidence["headline"]
    assert headline["group"] == "group=B" and headline["other"] == "group=A" == vanilla.evidence["reference"]
    assert headline["p_adjusted"] <= 0.05 and headline["p_permutation"] <= 0.05 and headline["failed"] == []


def test_findings_are_objects_in_json_with_numbers_for_people(default_pca):
    payload = json.loads(result_json(default_pca))
    assert payload["findings"], "JSON has a top-level findings list"
    for item in payload["findings"]:
        assert {"family", "rank", "verdict", "text", "variant", "rule", "evidence"} <= set(item)
        assert item["verdict"] in VERDICTS
        assert not E_NOTATION.search(item["text"]), item["text"]
    for finding in findings(default_pca)["pca"]:
        assert isinstance(finding, Finding) and str(finding) == finding.text


def test_every_report_states_the_rules(default_pca, tmp_path):
    html = render_html(default_pca)
    assert "Verdicts and their rules" in html and "no_evidence:" in html and "1.25" in html
    assert 'class="finding gap"' in html and "Uncertainty" in html


def test_without_intervals_there_is_no_verdict():
    result = run_audit(load_sample("two_groups"), AuditConfig(ranks=(2, 3), variants=("vanilla", "fair_eig"), bootstrap=0))
    found = findings(result)["pca"]
    assert found[0].verdict == "info" and "bootstrap=0" in found[0].text
    assert not any(f.verdict in ("gap", "mitigated", "no_evidence") for f in found if f.variant == "fair_eig")


def _fabricated(ranks_values: dict[int, tuple[float, float]], degenerate: dict[int, str], ci: float = 0.05,
                noisy: tuple[int, ...] = ()) -> AuditResult:
    """NMF-like records and comparisons by hand: per rank the two groups' relative losses,
    intervals ± ``ci``; the difference's standard error ``ci / 1.96`` (its interval reaching
    below 0 and its standard error ten times larger at the ``noisy`` ranks)."""
    from fairaudit.audit import comparisons_frame
    from fairaudit.verdicts import wald_pvalue

    rows, compared = [], []
    for rank, (b, a) in ranks_values.items():
        gap = b - a
        se = ci / 1.96 * (10 if rank in noisy else 1)
        low = -0.01 if rank in noisy else gap - ci
        rows += [
            ("nmf", "vanilla", rank, "B", "rel_loss", b, b - ci, b + ci),
            ("nmf", "vanilla", rank, "A", "rel_loss", a, a - ci, a + ci),
            ("nmf", "vanilla", rank, "B", "rel_error", b + 0.1, b, b + 0.2),
            ("nmf", "vanilla", rank, "A", "rel_error", a + 0.1, a, a + 0.2),
            ("nmf", "vanilla", rank, "", "rel_loss_gap", gap, low, gap + ci),
        ]
        compared.append(("nmf", "vanilla", rank, "rel_loss", "B", "A", 100, 100, b, a, gap, low, gap + ci, se,
                         wald_pvalue(gap, se), np.nan, np.nan, np.nan, (b + 0.1) / (a + 0.1), "error", 30))
    return AuditResult(
        records=pd.DataFrame(rows, columns=RECORD_COLUMNS),
        config={"methods": ["nmf"], "flag_ratio": 1.25, "confidence": 0.95},
        data={"group_sizes": {"A": 100, "B": 100}},
        uncertainty={"nmf": {"degenerate_ranks": {str(r): why for r, why in degenerate.items()}, "replicates": 30}},
        comparisons=comparisons_frame(compared),
    )


def test_degenerate_ranks_and_noise_are_never_the_largest_gap():
    # rank 10 is full rank (the largest difference there is meaningless); rank 9's difference is noise
    result = _fabricated({2: (0.30, 0.10), 9: (0.50, 0.02), 10: (0.9, 0.0)}, {10: "full rank"}, ci=0.05, noisy=(9,))
    top = findings(result)["nmf"][0]
    assert top.verdict == "gap" and top.rank == 2, top.text
    assert top.evidence["ranks"] == [2, 9] and top.evidence["comparisons"] == 2  # Holm counted the two judged ranks
    # all numerically zero: never a gap, whatever the interval
    zero = _fabricated({3: (1e-14, 0.0), 4: (0.3, 0.1)}, {})
    assert findings(zero)["nmf"][0].rank == 4


# ---------------------------------------------------------------------------- leakage
def test_batched_qda_is_scikit_learns_qda(rng):
    from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis
    from sklearn.model_selection import StratifiedKFold

    groups = np.repeat([0, 1, 2], [120, 60, 40])
    Z = rng.normal(size=(220, 3)) * (1 + 0.4 * groups[:, None]) + 0.3 * groups[:, None]
    Z[:, 2] += 0.5 * Z[:, 0] * (groups == 1)  # correlated columns in one group: the leading blocks differ from the whole
    train = rng.permutation(220)[:160]
    test = np.setdiff1d(np.arange(220), train)
    orders = np.vstack([np.arange(220), rng.permutation(220), rng.permutation(220)])
    other = rng.permutation(220)[:170]
    holdout = [(train, test), (other, np.setdiff1d(np.arange(220), other))]  # not a k-fold: class totals summed directly
    kfold = list(StratifiedKFold(4, shuffle=True, random_state=1).split(Z, groups))  # totals from the folds' own sums
    for splits in (holdout, kfold):
        accuracy, balanced = metrics._batched_qda_scores(Z, groups, splits, orders, 3, widths=[1, 2, 3])
        assert accuracy.shape == (3, 3, len(splits))
        for w, width in enumerate((1, 2, 3)):
            for p, order in enumerate(orders):
                for j, (fit_rows, score_rows) in enumerate(splits):
                    model = QuadraticDiscriminantAnalysis(priors=np.full(3, 1 / 3), reg_param=metrics.QDA_REG_PARAM, tol=1e-6)
                    Zw = Z[order, :width]
                    predicted = model.fit(Zw[fit_rows], groups[fit_rows]).predict(Zw[score_rows])
                    assert accuracy[w, p, j] == pytest.approx(np.mean(predicted == groups[score_rows]))
                    recalls = [np.mean(predicted[groups[score_rows] == c] == c) for c in range(3)]
                    assert balanced[w, p, j] == pytest.approx(np.mean(recalls))


def test_leakage_tests_of_nested_widths_equal_one_test_per_width(rng):
    """One pass over the widest representation gives, at every width, what a test of the leading
    columns alone gives (same folds, same permutations: the same rng draws)."""
    groups = np.repeat([0, 1], [700, 300])
    Z = rng.normal(size=(1000, 6)) + 0.15 * groups[:, None] * np.arange(6)
    widths = [1, 2, 4, 6]
    together = metrics.leakage_tests(Z, groups, widths, max_rows=800, random_state=3)
    for width, estimate in zip(widths, together, strict=True):
        alone = metrics.leakage_test(Z[:, :width], groups, max_rows=800, random_state=3)
        assert estimate == alone
    assert together[0].permutations == metrics.LEAKAGE_PERMUTATIONS["qda"]
    assert [e.permutations for e in metrics.leakage_tests(Z, groups, widths, classifier="logistic", max_rows=800)] == [20] * 4


def test_representations_metrics_equal_one_representation_at_a_time(rng):
    """Nested ranks found per lineage (a sign flip allowed), worker threads: the values one call per
    representation gives, in the same order of metrics."""
    from fairaudit.audit import AuditConfig, representation_metrics, representations_metrics

    groups = np.repeat([0, 1], [500, 250])
    wide = rng.normal(size=(750, 5)) + 0.2 * groups[:, None]
    flipped = wide[:, :2] * np.array([1.0, -1.0])
    other = rng.normal(size=(750, 3)) + 0.1 * groups[:, None]  # another lineage, not nested in ``wide``
    representations = [wide[:, :1], flipped, wide, other, other[:, :2]]
    config = AuditConfig(leakage_max_rows=600)
    together = representations_metrics(representations, groups, config, lineages=["a", "a", "a", "b", "c"])
    for Z, values in zip(representations, together, strict=True):
        alone = representation_metrics(Z, groups, config)
        assert list(values) == list(alone)
        for metric, value in alone.items():
            np.testing.assert_allclose(values[metric], value, rtol=1e-12, atol=1e-15, err_msg=metric)
    np.testing.assert_equal(representations_metrics(representations, groups, config, threads=1), representations_metrics(representations, groups, config))


def test_leakage_test_against_chance(rng):
    groups = np.repeat([0, 1], [300, 100])
    clean = rng.normal(size=(400, 3))
    leaky = clean + np.where(groups[:, None] == 1, 1.0, 0.0)
    noise = metrics.leakage_test(clean, groups, random_state=0)
    signal = metrics.leakage_test(leaky, groups, random_state=0)
    assert noise.permutations == metrics.LEAKAGE_PERMUTATIONS["qda"] and noise.pvalue > 0.05 and abs(noise.balanced - 0.5) < 0.06
    assert signal.pvalue == 1 / (1 + signal.permutations) and signal.balanced_low > 0.6 and signal.above_chance(0.05)
    assert noise.chance_low < 0.5 < noise.chance_high
    plain = metrics.leakage_test(leaky, groups, classifier="logistic", permutations=0, random_state=0)  # the interval decides
    assert plain.permutations == 0 and np.isnan(plain.pvalue) and plain.above_chance(0.05)
    assert metrics.LEAKAGE_PERMUTATIONS["hgb"] == metrics.LEAKAGE_PERMUTATIONS["mlp"] == 0  # 0.1–3 s per fit


def test_leakage_is_stable_across_seeds():
    """One 75/25 split moved the balanced accuracy by up to 0.20 between seeds on the diabetes sample
    (0.004 on the default sample, where most representations reveal the group completely); the
    repeated cross-validation by at most 0.02 (benchmarks/bench_leakage_stability.py)."""
    for name, estimator, rank in (("diabetes", PCA, 2), ("two_groups", FairPCA, 2)):
        data = load_sample(name)
        X = data.X - data.X.mean(axis=0)
        Z = estimator(rank).fit(X, sensitive_features=data.groups.codes).transform(X)
        values = [metrics.leakage_test(Z, data.groups.codes, permutations=0, random_state=seed).balanced for seed in range(5)]
        assert np.ptp(values) < 0.03, (name, values)


def test_leakage_below_chance_is_no_detectable_leakage():
    from fairaudit.findings import Records, leakage_finding

    rows = [("pca", "vanilla", 2, "", "balanced_accuracy", 0.46, 0.40, 0.52), ("pca", "vanilla", 2, "", "leakage_pvalue", 0.8, np.nan, np.nan)]
    result = AuditResult(pd.DataFrame(rows, columns=RECORD_COLUMNS), {"methods": ["pca"]}, {"group_sizes": {"a": 50, "b": 50}})
    finding = leakage_finding(Records(result, "pca"), "vanilla", 2)
    assert finding.verdict == "no_evidence" and "No detectable leakage" in finding.text and "not an improvement" in finding.text


def test_numbers_for_people():
    from fairaudit.formatting import (
        interval,
        level,
        number,
        percent,
        plural,
        pvalue,
        times,
    )

    assert [number(v) for v in (0.000031416, 1234567.0, 2.0, 0.5, 9.996, -3.14159, 1234, 3e-16, float("nan"))] == [
        "0.0000314", "1,230,000", "2.00", "0.500", "10.0", "−3.14", "1,234", "≈0", "n/a",
    ]
    assert (interval(0.371, 0.455), times(2.6198), percent(0.1823, sign=True), level(0.95), level(0.975)) == (
        "0.371–0.455", "2.62×", "+18.2 %", "95 %", "97.5 %",
    )
    assert (plural(1, "rank"), plural(3, "rank"), pvalue(0.0099), pvalue(0.0001)) == ("1 rank", "3 ranks", "p = 0.0099", "p < 0.001")
    assert percent(3e-12, sign=True) == "≈0 %"  # a change that is rounding noise has no sign
    assert interval(-0.237, 0.687) == "−0.237 to 0.687"  # never a dash after a minus sign
    # the largest floats: three figures would round past them (a report can hold them; the fuzz found it)
    assert number(1.7976931348623157e308).startswith("179,769,313") and number(-1.79e308).startswith("−178,999")


def test_a_value_outside_its_own_interval_is_said_to_be():
    """A percentile interval can exclude its point estimate (the refits on resampled rows are
    biased relative to the fit on the user's rows, e.g. a selector that picks other columns);
    every rendering says so instead of printing “0.852 (0.508–0.782)” as if it were a confidence
    interval for 0.852. Rounding-size excursions are not flagged."""
    from fairaudit.formatting import outside_interval, with_interval

    assert outside_interval(0.852, 0.508, 0.782) and outside_interval(0.1, 0.2, 0.3)
    assert not outside_interval(0.5, 0.4, 0.6) and not outside_interval(0.4, 0.4, 0.6)
    assert not outside_interval(0.6 + 1e-9, 0.4, 0.6)  # rounding at the interval's ends
    assert not outside_interval(0.4551, 0.371, 0.455) and not outside_interval(0.82520939, 0.82535597, 0.89520869)  # written equal
    assert outside_interval(0.996, 1.0, 1.5) and outside_interval(0.454, 0.455, 0.6)  # written outside: 0.996 (1.00–1.50)
    assert not outside_interval(10**400, 0, 1)  # not a float: never marked, never raises
    assert not outside_interval(4e-12, 6.7e-12, 6.3e-9)  # both sides below formatting's TINY: noise around 0
    assert not outside_interval(float("nan"), 0.1, 0.2) and not outside_interval(0.5, float("nan"), float("nan"))
    assert with_interval(0.5, 0.4, 0.6, 0.95) == "0.500 (95 % interval 0.400–0.600)"
    text = with_interval(0.852, 0.508, 0.782, 0.95)
    assert text.startswith("0.852 (outside its 95 % interval 0.508–0.782") and "differ systematically" in text
