"""The worst-served subgroup (``AuditConfig(subgroups=True)``): candidates, the moments-based
losses against a direct refit, the planted intersection found, null data left alone, the
minimum size, the finding in the library, the JSON and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairaudit import AuditConfig, run_audit
from fairaudit.audit import AuditResult
from fairaudit.cli import main
from fairaudit.data import AuditData
from fairaudit.errors import ParameterError
from fairaudit.findings import findings
from fairaudit.report import result_json
from fairaudit.samples import DEFAULT_FOLDER, planted_subgroup
from fairaudit.subgroups import REST, SUBGROUP_METRIC, candidate_subgroups, worst_subgroup

PLANTED = "age_band=old & region=west"


def _data(frame: pd.DataFrame, **options) -> AuditData:
    return AuditData.from_arrays(frame.filter(like="x").to_numpy(), frame[["age_band", "region"]], **options)


def _audit(data: AuditData, bootstrap: int = 20, **options) -> AuditResult:
    return run_audit(data, AuditConfig(variants=["vanilla"], ranks=[1, 2, 3], bootstrap=bootstrap, subgroups=True, n_jobs=1, **options))


def _finding(result: AuditResult):
    return next(f for f in findings(result)["pca"] if f.evidence.get("kind") == "worst subgroup")


def _subgroup_rows(result: AuditResult) -> pd.DataFrame:
    return result.comparisons[result.comparisons.metric == SUBGROUP_METRIC]


def test_candidates_fix_one_or_more_columns_and_keep_the_minimum():
    labels = ["a=1 & b=x", "a=1 & b=y", "a=2 & b=x", "a=2 & b=y"]
    found = candidate_subgroups(labels, [50, 10, 40, 100], ["a", "b"], min_rows=30)
    names = [c.label for c in found]
    # a=1 (60 rows), a=2 (140), b=x (90), b=y (110); cells of 40+ rows; a=1 & b=y (10 rows) is below the minimum
    assert names == ["a=1", "a=2", "b=x", "b=y", "a=1 & b=x", "a=2 & b=x", "a=2 & b=y"]
    assert {c.label: c.rows for c in found}["b=x"] == 90
    # a subgroup with exactly the rows of a shorter one is the shorter one
    same = candidate_subgroups(["a=1 & b=x", "a=2 & b=y"], [40, 60], ["a", "b"], min_rows=30)
    assert [c.label for c in same] == ["a=1", "a=2"]
    # unnamed parts get their column's name; a value holding the separator is refused, in the interface's words
    assert candidate_subgroups(["f & x", "m & y"], [40, 40], ["sex", "race"], 30)[0].label == "sex=f"
    with pytest.raises(ParameterError, match="subgroups"):
        candidate_subgroups(["a & b & c", "d & e"], [40, 40], ["one", "two"], 30)


def test_subgroup_losses_agree_with_a_direct_refit():
    """The moments-based loss of a union of cells equals Samadi's loss computed from its rows:
    error under vanilla PCA's projection minus the subgroup's own best rank-d error (SVD of its
    rows, centred at the data's mean), and the same for the rest."""
    frame = planted_subgroup(n=600, share=0.1, random_state=3)
    result = _audit(_data(frame, scaling="none"), bootstrap=0)
    rows = _subgroup_rows(result)
    X = frame.filter(like="x").to_numpy()
    centred = X - X.mean(axis=0)
    components = np.linalg.svd(centred, full_matrices=False)[2]

    def loss(part: np.ndarray, rank: int) -> float:
        P = components[:rank].T @ components[:rank]
        error = np.sum((part - part @ P) ** 2) / len(part)
        best = np.sum(np.linalg.svd(part, compute_uv=False)[rank:] ** 2) / len(part)
        return error - best

    checked = 0
    for label, mask in (("region=west", frame.region == "west"), (PLANTED, (frame.age_band == "old") & (frame.region == "west")),
                        ("age_band=young", frame.age_band == "young")):
        for rank in (1, 2, 3):
            row = rows[(rows.group == label) & (rows["rank"] == rank)].iloc[0]
            assert row.rows == mask.sum() and row.other_rows == (~mask).sum() and row.other == REST
            assert row.value == pytest.approx(loss(centred[mask.to_numpy()], rank), abs=1e-8)
            assert row.other_value == pytest.approx(loss(centred[~mask.to_numpy()], rank), abs=1e-8)
            checked += 1
    assert checked == 9


@pytest.mark.parametrize("seed", range(4))
def test_a_planted_intersection_of_3_percent_is_found(seed):
    result = _audit(_data(planted_subgroup(n=2000, share=0.03, random_state=seed)))
    verdict = worst_subgroup(result)
    assert verdict.verdict == "gap" and verdict.headline.group == PLANTED
    assert verdict.headline.rows == 60 and verdict.headline.ci_low > 0
    finding = _finding(result)
    assert finding.verdict == "gap" and finding.text.startswith(f"Worst-served subgroup: {PLANTED}.")
    assert finding.evidence["kind"] == "worst subgroup" and finding.evidence["headline"]["group"] == PLANTED


def test_null_data_rarely_show_a_gap():
    verdicts = [worst_subgroup(_audit(_data(planted_subgroup(n=2000, planted=False, random_state=seed)))) for seed in range(4)]
    assert sum(v.verdict == "gap" for v in verdicts) <= 1
    quiet = next(v for v in verdicts if v.verdict == "no_evidence")
    assert quiet.headline.failed and quiet.headline.detectable > 0 and quiet.comparisons == quiet.candidates * 3


def test_a_subgroup_below_the_minimum_is_never_reported():
    """A badly served cell of 20 rows (below 30) is no candidate; raising the minimum after the
    fact leaves out every subgroup below it too."""
    frame = planted_subgroup(n=2000, share=0.01, random_state=1)
    result = _audit(_data(frame))
    rows = _subgroup_rows(result)
    assert (rows.rows >= 30).all() and (rows.other_rows >= 30).all() and PLANTED not in set(rows.group)
    verdict = worst_subgroup(result)
    assert verdict.headline.rows >= 30 and verdict.headline.group != PLANTED
    strict = worst_subgroup(result, min_rows=300)
    assert strict.headline.rows >= 300 and all(p.rows >= 300 for p in strict.worst)
    assert worst_subgroup(result, min_rows=10_000).verdict == "info"


def test_the_finding_survives_the_json_and_says_why_without_intervals():
    data = _data(planted_subgroup(n=2000, random_state=0))
    result = _audit(data)
    back = AuditResult.from_dict(json.loads(result_json(result)))
    assert worst_subgroup(back).to_dict() == worst_subgroup(result).to_dict()
    payload = json.loads(result_json(result))
    found = [f for f in payload["findings"] if f["evidence"].get("kind") == "worst subgroup"]
    assert len(found) == 1 and found[0]["verdict"] == "gap" and "--subgroups" not in found[0]["rule"]
    off = _finding(_audit(data, bootstrap=0))
    assert off.verdict == "info" and off.text.startswith("The worst-served of 15 subgroups: at rank 3, vanilla PCA's reconstruction loss is")
    assert "No verdict: the intervals were not computed" in off.text


def test_off_by_default_and_a_clear_error_for_a_wrong_value():
    assert AuditConfig().subgroups is False
    with pytest.raises(ParameterError, match="subgroups must be True or False"):
        AuditConfig(subgroups="yes")


def test_cli_subgroups_prints_the_finding(tmp_path, capsys):
    out = tmp_path / "audit.json"
    code = main(["audit", str(DEFAULT_FOLDER / "subgroups.csv"), "--sensitive", "age_band", "--sensitive", "region",
                 "--variants", "vanilla", "--ranks", "1:3", "--bootstrap", "20", "--subgroups", "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert any(line.startswith("GAP         pca  vanilla ") and f"  {PLANTED} vs everyone else  loss " in line
               for line in printed.splitlines())  # the quiet line: verdict, the subgroup, the number that decided it
    assert any(f["evidence"].get("kind") == "worst subgroup" for f in json.loads(out.read_text())["findings"])


def test_the_audit_goes_on_when_the_search_cannot_run():
    """A value holding the separator, another family, your components: a note, no search, no error."""
    frame = planted_subgroup(n=600, share=0.1, random_state=1)
    odd = frame.assign(region=frame.region.str.replace("west", "we & st"))
    result = _audit(_data(odd), bootstrap=0)
    assert worst_subgroup(result) is None
    assert any("cannot tell the sensitive columns apart" in note for note in result.warnings)
    nmf = run_audit(_data(frame.assign(**{c: frame[c].abs() for c in frame.filter(like="x")})),
                    AuditConfig(methods=["nmf"], variants=["vanilla"], ranks=[1], bootstrap=0, subgroups=True, n_jobs=1))
    assert any("covers the PCA family only" in note for note in nmf.warnings)
