"""Verdicts on k groups (issue 22): pairs of groups, Holm's correction, groups too small to judge,
the reference group, and sentences written from their evidence.

The synthetic designs are ``benchmarks/bench_verdicts.py``'s (20 seeds there; a few here)."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from fairaudit import AuditData
from fairaudit.audit import AuditConfig, AuditResult, run_audit
from fairaudit.errors import ParameterError
from fairaudit.findings import findings
from fairaudit.plots import VARIANT_TITLES
from fairaudit.report import result_json
from fairaudit.verdicts import (
    COMPARISON_COLUMNS,
    Settings,
    holm,
    judge_disparity,
    pairwise_comparisons,
    wald_pvalue,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_verdicts import gap_data, issue_files, null_data  # noqa: E402

REPLICATES = 30


def _vanilla(data, method="pca", seed=0, **options) -> tuple[AuditResult, object]:
    config = AuditConfig(methods=(method,), ranks=(1, 2, 3), variants=("vanilla",), bootstrap=REPLICATES, random_state=seed, **options)
    result = run_audit(data, config)
    return result, findings(result)[method][0]


# ---------------------------------------------------------------------------- the issue's guarantees
@pytest.mark.parametrize("seed", range(4))
def test_a_small_third_group_never_hides_a_real_gap(seed):
    """Two groups of 1,500 rows with a real loss gap and a third of 25 drawn like the first (the
    issue's 27-row group, flattered by its own best fit): vanilla PCA has a gap between the two
    large groups; the small one is reported as too small to judge, never as the reference."""
    result, top = _vanilla(gap_data(seed))
    assert top.verdict == "gap", top.text
    headline = top.evidence["headline"]
    assert {headline["group"], headline["other"]} == {"A", "B"} and top.evidence["reference"] != "C"
    small = top.evidence["small"]
    assert [s["group"] for s in small] == ["C"] and small[0]["rows"] == 25 and small[0]["detectable"] > 0
    assert any("C (25 rows) is too small to judge" in line for line in top.details)
    assert all("C" not in (p["group"], p["other"]) for p in top.evidence["pairs"])
    # the same two groups without the third: the same verdict on the same pair
    alone = _vanilla(gap_data(seed, sizes=(1500, 1500)), seed=seed)[1]
    assert alone.verdict == "gap" and {alone.evidence["headline"]["group"], alone.evidence["headline"]["other"]} == {"A", "B"}


@pytest.mark.parametrize(("sizes", "seed"), [((750, 750, 25), 0), ((750, 750, 25), 1), ((750, 775), 2), ((750, 750, 750, 25), 3)])
def test_random_groups_of_identical_rows_raise_no_pca_gap(sizes, seed):
    _, top = _vanilla(null_data(seed, sizes), seed=seed)
    assert top.verdict == "no_evidence", top.text
    assert top.evidence["comparisons"] == 3 * math.comb(sum(n >= 30 for n in sizes), 2)  # pairs of judged groups × ranks


def test_random_groups_of_identical_rows_raise_no_nmf_gap():
    _, top = _vanilla(null_data(0, (300, 300, 20), nonnegative=True), method="nmf", options={"nmf": {"n_estimates": 2}})
    assert top.verdict == "no_evidence", top.text


# ---------------------------------------------------------------------------- the reference group
@pytest.fixture(scope="module")
def three_groups():
    """Two large groups with a gap and a third of 40 rows (judged)."""
    result, _ = _vanilla(gap_data(5, sizes=(600, 600, 40)), seed=5)
    return result


def test_a_chosen_reference_compares_each_group_with_it(three_groups):
    data_chosen = findings(three_groups)["pca"][0].evidence
    assert data_chosen["reference_chosen"] == "data" and data_chosen["comparisons"] == 3 * 3  # every pair, every rank
    chosen = findings(three_groups, reference="B")["pca"][0]
    evidence = chosen.evidence
    assert evidence["reference"] == "B" and evidence["reference_chosen"] == "user"
    assert evidence["comparisons"] == 3 * 2  # k − 1 comparisons per rank
    assert all("B" in (p["group"], p["other"]) for p in evidence["pairs"])
    assert "B (reference)" in chosen.text and any("the reference you chose" in line for line in chosen.details)
    # the library's three ways agree: findings(reference=…), with_reference, AuditConfig(reference=…)
    assert findings(three_groups.with_reference("B"))["pca"][0].text == chosen.text
    assert three_groups.with_reference("B", "nmf").config.get("reference") is None
    rerun = run_audit(gap_data(5, sizes=(600, 600, 40)), AuditConfig(ranks=(1, 2, 3), variants=("vanilla",), bootstrap=REPLICATES,
                                                                       random_state=5, reference="B"))
    assert findings(rerun)["pca"][0].text == chosen.text


def test_an_unknown_or_too_small_reference_is_refused_naming_the_groups(three_groups):
    with pytest.raises(ParameterError, match=r"reference='Z' is not one of the groups; .*A \(600 rows\), B \(600 rows\), C \(40 rows\)"):
        findings(three_groups, reference="Z")
    with pytest.raises(ParameterError, match=r"group C has 40 rows, fewer than the 50 needed.*min_judged_rows=50"):
        _judge_with(three_groups, "C", 50)
    with pytest.raises(ParameterError, match="reference="):
        run_audit(gap_data(0, sizes=(100, 100, 10)), AuditConfig(ranks=(1,), variants=("vanilla",), reference="C"))


def _judge_with(result, reference, least):
    return judge_disparity(result.comparisons.to_dict("records"), result.uncertainty["pca"]["group_rows"],
                           Settings(min_judged_rows=least, reference=reference), method="pca", variant="vanilla", metric="loss")


def test_a_reference_is_found_by_the_value_part_of_its_label():
    data = AuditData.from_arrays(gap_data(1).X_raw, np.char.add("race=", gap_data(1).sensitive_features.astype(str)))
    result = run_audit(data, AuditConfig(ranks=(1,), variants=("vanilla",), bootstrap=10))
    assert findings(result, reference="A")["pca"][0].evidence["reference"] == "race=A"


# ---------------------------------------------------------------------------- the statistics
def test_holm_against_its_step_down_definition(rng):
    """Holm 1979: order the p-values; reject H(1)…H(j−1), where j is the first with p(j) > α/(m−j+1).
    The adjusted p-values reject exactly those at every α."""
    for _ in range(200):
        p = rng.uniform(0, 0.2, size=rng.integers(1, 12)) ** rng.uniform(1, 3)
        adjusted = holm(p)
        for alpha in (0.01, 0.05, 0.1):
            order = np.argsort(p)
            rejected = set()
            for step, index in enumerate(order):
                if p[index] > alpha / (len(p) - step):
                    break
                rejected.add(int(index))
            assert {int(i) for i in np.flatnonzero(adjusted <= alpha)} == rejected
    assert np.isnan(holm([0.01, np.nan, 0.04])[1]) and holm([0.01, np.nan, 0.04])[2] == pytest.approx(0.04 * 1)  # NaN not counted
    assert holm([0.01, 0.04]).tolist() == pytest.approx([0.02, 0.04])


def test_the_comparisons_are_every_pair_with_its_bootstrap_difference():
    """A pure function of point values and replicates: every pair once, oriented worse first; the
    difference's interval, standard error and Wald p-value from the replicates' differences (the
    pair fixed), the error ratio from the worse group's error."""
    labels = ("a", "b", "c")
    points = {("v", 1, g, "loss"): value for g, value in zip(labels, (0.3, 0.1, 0.2), strict=True)}
    points |= {("v", 1, g, "error"): value for g, value in zip(labels, (1.3, 1.1, 1.2), strict=True)}
    rng = np.random.default_rng(0)
    draws = {g: rng.normal(points[("v", 1, g, "loss")], 0.02, size=200) for g in labels}
    replicates = {("v", 1, g, "loss"): draws[g] for g in labels}
    from fairaudit.verdicts import DisparityMetric

    rows = pairwise_comparisons("pca", labels, (100, 200, 300), [DisparityMetric("loss", "error")], points, replicates)
    table = {(r[4], r[5]): dict(zip(COMPARISON_COLUMNS, r, strict=True)) for r in rows}
    assert set(table) == {("a", "b"), ("a", "c"), ("c", "b")}
    ab = table[("a", "b")]
    differences = draws["a"] - draws["b"]
    assert ab["difference"] == pytest.approx(0.2) and ab["se"] == pytest.approx(np.std(differences, ddof=1))
    assert (ab["ci_low"], ab["ci_high"]) == pytest.approx(tuple(np.quantile(differences, [0.025, 0.975])))
    assert ab["p_bootstrap"] == pytest.approx(wald_pvalue(0.2, ab["se"])) and ab["ratio"] == pytest.approx(1.3 / 1.1)
    assert (ab["rows"], ab["other_rows"], ab["replicates"]) == (100, 200, 200) and math.isnan(ab["p_permutation"])
    without = pairwise_comparisons("pca", labels, (100, 200, 300), [DisparityMetric("loss", "error")], points)
    assert all(math.isnan(r[COMPARISON_COLUMNS.index("se")]) for r in without)


def test_a_no_evidence_names_the_condition_that_decided_it():
    """Each condition of a gap failing alone: the sentence says which, with its number."""
    base = dict(method="nmf", variant="vanilla", rank=2, metric="rel_loss", group="B", other="A", rows=100, other_rows=100,
                value=0.4, other_value=0.1, difference=0.3, ci_low=0.2, ci_high=0.4, se=0.05, p_bootstrap=wald_pvalue(0.3, 0.05),
                p_permutation=float("nan"), null_mean=float("nan"), null_sd=float("nan"), ratio=2.0, ratio_of="error", replicates=30)
    cases = {
        "interval": ({"ci_low": -0.01}, "its interval includes 0"),
        "test": ({"se": 0.2, "p_bootstrap": wald_pvalue(0.3, 0.2)}, "within sampling noise (p = 0.134, Holm-adjusted for 1 comparison 0.134 > 0.05)"),
        "tolerance": ({"ratio": 1.1}, "B's error is 1.10× what it would be if served like A, below the tolerance of 1.25×"),
    }
    from fairaudit.audit import comparisons_frame

    for condition, (change, words) in cases.items():
        row = {**base, **change}
        result = AuditResult(records=_records(row), config={"methods": ["nmf"]}, data={"group_sizes": {"A": 100, "B": 100}},
                             uncertainty={"nmf": {"replicates": 30}}, comparisons=comparisons_frame([row]))
        top = findings(result)["nmf"][0]
        assert top.verdict == "no_evidence" and top.evidence["headline"]["failed"] == [condition], (condition, top.text)
        assert words in top.text and ("would likely go undetected" in top.text or "The tolerance needs a difference of at least" in top.text), top.text
    gap = AuditResult(records=_records(base), config={"methods": ["nmf"]}, data={"group_sizes": {"A": 100, "B": 100}},
                      uncertainty={"nmf": {"replicates": 30}}, comparisons=comparisons_frame([base]))
    assert findings(gap)["nmf"][0].verdict == "gap"


def _records(row):
    import pandas as pd

    from fairaudit.audit import RECORD_COLUMNS

    return pd.DataFrame([("nmf", "vanilla", row["rank"], g, "rel_loss", v, np.nan, np.nan)
                         for g, v in ((row["group"], row["value"]), (row["other"], row["other_value"]))], columns=RECORD_COLUMNS)


# ---------------------------------------------------------------------------- small groups elsewhere
def test_the_leakage_test_leaves_out_groups_too_small_to_judge():
    """A 5-row group used to turn the leakage test off for everyone (fewer than 8 rows per group);
    now the test runs among the groups large enough to judge, and the finding names the one left out."""
    rng = np.random.default_rng(2)
    X = np.vstack([rng.normal(size=(150, 4)), rng.normal(size=(150, 4)) + 1.5, rng.normal(size=(5, 4))])
    data = AuditData.from_arrays(X, np.repeat(["a", "b", "c"], [150, 150, 5]))
    result = run_audit(data, AuditConfig(ranks=(2,), variants=("vanilla",), bootstrap=10))
    leak = next(f for f in findings(result)["pca"] if "balanced accuracy" in f.text)
    assert leak.verdict == "gap" and "among the 2 groups large enough to judge" in leak.text and leak.evidence["chance"] == 0.5
    assert leak.evidence["left_out"] == {"c": 5} and "c (5 rows)" in leak.details[0]
    assert any("too small to judge" in w and "c (5 rows)" in w for w in result.warnings)


def test_min_judged_rows_is_checked():
    for bad in (1, 0, 2.5, True, "30"):
        with pytest.raises(ParameterError, match="min_judged_rows"):
            AuditConfig(min_judged_rows=bad)
    with pytest.raises(ParameterError, match="reference"):
        AuditConfig(reference=" ")


# ---------------------------------------------------------------------------- the issue's files
def test_the_issue_like_files_from_the_sample_generator(tmp_path):
    """``small_third_group.csv`` (3,869 / 1,852 / 27, as the school survey) gives vanilla PCA a gap
    between the two large groups, ``other`` too small to judge; ``ten_to_one.csv`` (358 / 39) does not
    contradict itself: its verdict and its numbers are one evidence object."""
    from fairaudit import load

    survey, imbalance = issue_files(tmp_path)
    data = load(survey, sensitive=["race"], ignore=["outcome"])
    result = run_audit(data, AuditConfig(ranks=(1, 2, 3), variants=("vanilla", "fair_eig"), bootstrap=20))
    found = findings(result)["pca"]
    assert found[0].verdict == "gap" and {found[0].evidence["headline"]["group"], found[0].evidence["headline"]["other"]} == {"race=black", "race=white"}
    assert [s["group"] for s in found[0].evidence["small"]] == ["race=other"]
    assert next(f for f in found if f.variant == "fair_eig").verdict == "mitigated"
    small = load(imbalance, sensitive=["sex"], ignore=["outcome"])
    top = findings(run_audit(small, AuditConfig(ranks=(1, 2, 3), variants=("vanilla",), bootstrap=20)))["pca"][0]
    assert top.verdict in ("gap", "no_evidence")
    if top.verdict == "no_evidence":
        assert top.evidence["headline"]["failed"]


# ---------------------------------------------------------------------------- sentences from evidence
NUMBER = re.compile(r"−?\d[\d,]*(?:\.\d+)?|≈0")
TITLES = sorted({title for family in VARIANT_TITLES.values() for title in family.values()}, key=len, reverse=True)
CONDITION_WORDS = {
    "interval": ("its interval includes 0", "its interval reaches parity"),
    "test": ("within sampling noise", "random groups of these sizes", "beyond noise"),
    "tolerance": ("below the tolerance", "not below the tolerance"),
}


def _three(x: float) -> float:
    """``x`` to three significant figures, as :func:`fairaudit.formatting.number` rounds it (0 below its TINY)."""
    if abs(x) < 1e-9:
        return 0.0
    return round(x, 2 - math.floor(math.log10(abs(x))))


def _evidence_numbers(value) -> set[float]:
    """Every number of an evidence object to three significant figures (and as a percentage)."""
    out: set[float] = set()
    if isinstance(value, dict):
        for item in value.values():
            out |= _evidence_numbers(item)
    elif isinstance(value, list | tuple):
        for item in value:
            out |= _evidence_numbers(item)
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        out |= {_three(float(value)), _three(100.0 * value), abs(_three(float(value)))}
    return out


def _token(text: str) -> float:
    return 0.0 if text == "≈0" else float(text.replace(",", "").replace("−", "-"))


def _random_audit(seed: int) -> AuditResult:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    sizes = [int(n) for n in rng.integers(40, 160, size=k)]
    if rng.random() < 0.4:
        sizes[-1] = int(rng.integers(5, 30))  # a group too small to judge
    names = ["alpha", "beta", "gamma", "delta"][:k]
    blocks = []
    for n in sizes:
        mixing = rng.normal(size=(5, 5)) * rng.uniform(0.3, 2.0, size=5) if rng.random() < 0.5 else np.diag([3, 2, 1, 0.5, 0.3])
        blocks.append(rng.normal(size=(n, 5)) @ mixing)
    X = np.vstack(blocks)
    method = "nmf" if seed % 10 == 7 else "pca"
    if method == "nmf":
        X = np.abs(X) + 0.01
    data = AuditData.from_arrays(X, np.repeat(names, sizes), scaling="none" if method == "nmf" else "standardize")
    config = AuditConfig(methods=(method,), ranks=(1, 2), variants=("vanilla", "fair_eig") if method == "pca" else ("vanilla", "fair_mu"),
                         bootstrap=10, random_state=seed, holdout=0.3 if seed % 5 == 0 else None,
                         reference=names[0] if seed % 4 == 0 and sizes[0] >= 30 else None,
                         leakage_permutations=0 if seed % 3 == 0 else None, options={"nmf": {"n_estimates": 2}} if method == "nmf" else {},
                         subgroups=method == "pca" and seed % 2 == 1)
    return run_audit(data, config)


@pytest.mark.parametrize("chunk", range(6))
def test_every_number_in_a_finding_is_its_evidence(chunk):
    """Property over 60 random audits (PCA and NMF; 2–4 groups, some too small to judge; a chosen
    reference, held-out rows, with and without leakage permutations, half of PCA's with the subgroup
    search): every number a finding's
    sentence or detail states is a number of its evidence, to three significant figures, and every
    *No evidence* of a disparity names the condition of a gap that failed — the first in its
    evidence's ``failed`` list."""
    for seed in range(10 * chunk, 10 * chunk + 10):
        result = _random_audit(seed)
        for family in findings(result).values():
            for finding in family:
                allowed = _evidence_numbers(finding.evidence) | {0.001}  # "p < 0.001"
                for text in (finding.text, *finding.details):
                    for title in TITLES:  # names such as "Fairer-NMF (multiplicative updates, Alg. 3)" are not numbers
                        text = text.replace(title, "")
                    for token in NUMBER.findall(text):
                        value = abs(_token(token))
                        assert any(math.isclose(value, abs(e), rel_tol=1e-9, abs_tol=1e-300) for e in allowed), (seed, token, text)
                headline = finding.evidence.get("headline") or {}
                if finding.verdict == "no_evidence" and headline.get("failed"):
                    first = headline["failed"][0]
                    assert any(words in finding.text for words in CONDITION_WORDS[first]), (seed, first, finding.text)
                elif finding.verdict == "no_evidence":
                    assert "not above chance" in finding.text or "below the tolerance" in finding.text, (seed, finding.text)


def test_a_result_saved_without_comparisons_says_why_it_has_no_verdict(three_groups):
    """A JSON report from before the comparisons existed: its records alone cannot be judged pair by
    pair, and the finding says so instead of judging the worst and best group as before."""
    import json

    payload = json.loads(result_json(three_groups))
    del payload["comparisons"]
    found = findings(AuditResult.from_dict(payload))["pca"]
    assert found[0].verdict == "info" and "carries no comparisons of groups" in found[0].text
    again = AuditResult.from_dict(json.loads(result_json(three_groups)))  # with them: the same findings as the result's
    assert [f.to_dict() for f in findings(again)["pca"]] == [f.to_dict() for f in findings(three_groups)["pca"]]
