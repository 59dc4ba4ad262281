"""The answer first (fairaudit.summary): short forms read from the findings' evidence, never recomputed."""

from __future__ import annotations

import pytest

from fairaudit.audit import AuditConfig, run_audit
from fairaudit.findings import Finding, findings
from fairaudit.formatting import number, percent
from fairaudit.samples import load_sample
from fairaudit.summary import audit_summary, deciding_number, finding_line, key_figure, question, verdict_rows


@pytest.fixture(scope="module")
def pca_found():
    """The default sample's PCA audit at rank 3 with a few replicates: vanilla has a gap, Fair PCA
    closes it, the mean-matching variants are less fair."""
    result = run_audit(load_sample("two_groups"), AuditConfig(methods=("pca",), ranks=(2, 3), bootstrap=20,
                                                              variants=("vanilla", "fair_eig", "equal_means")))
    return result, findings(result)


def test_the_audit_summary_names_the_gap_who_closes_it_and_the_cost(pca_found):
    _, found = pca_found
    (pca,) = audit_summary(found)
    assert pca.method == "pca" and pca.verdict == "gap"
    assert any(gap.startswith("loss at rank ") and "group=B vs group=A" in gap for gap in pca.gaps)
    fair = next(f for f in found["pca"] if f.variant == "fair_eig" and f.verdict == "mitigated")
    cost = fair.evidence["cost"]["change_percent"] / 100
    assert pca.closed == [("Fair PCA (exact eigen-solver)", f"{percent(cost, sign=True)} total reconstruction error")]
    assert pca.worse == ["Mean-matched PCA (Kleindessner)"] and pca.open == []  # worse, so not also “still a gap”
    text = pca.text()
    assert text.startswith("PCA: gap: loss at rank") and "closed by Fair PCA (exact eigen-solver) (+" in text and "less fair: Mean-matched" in text


def test_the_deciding_number_is_the_evidences(pca_found):
    _, found = pca_found
    gap = next(f for f in found["pca"] if f.variant == "vanilla" and f.verdict == "gap" and "headline" in f.evidence)
    pair = gap.evidence["headline"]
    text = deciding_number(gap)
    assert text.startswith(f"loss {number(pair['value'])} vs {number(pair['other_value'])} (diff {number(pair['difference'])}, 95 % ")
    line = finding_line(gap)
    assert line.startswith(f"GAP         pca  vanilla         rank {gap.rank}") and f"{pair['group']} vs {pair['other']}  loss " in line
    rows = verdict_rows(found["pca"])
    assert [r.verdict for r in rows][:1] == ["gap"] and all(r.number for r in rows)
    assert {r.what for r in rows} >= {"loss", "leakage"}
    assert len(rows) == sum(1 for f in found["pca"] if deciding_number(f) is not None)


def test_families_without_a_gap_and_statements_of_fact():
    """No evidence of a gap with a fair variant beside it; a statement of fact has no deciding number
    and its line is its sentence; feature selection's baselines and FUFS; CP's leakage and its cost in fit."""
    fact = Finding("nmf", 1, "vanilla", "info", "On their own, rank-1 NMFs reconstruct group=B with relative error 0.350.", evidence={"rank": 1})
    assert deciding_number(fact) is None and finding_line(fact).endswith("On their own, rank-1 NMFs reconstruct group=B with relative error 0.350.")
    pair = {"group": "g=B", "other": "g=A", "value": 0.4, "other_value": 0.35, "difference": 0.05, "ci_low": -0.01, "ci_high": 0.1,
            "p_adjusted": 0.3}
    none = Finding("nmf", 2, "vanilla", "no_evidence", "…", evidence={"metric": "rel_loss", "headline": pair, "confidence": 0.9})
    assert deciding_number(none) == "relative loss 0.400 vs 0.350 (diff 0.0500, 90 % −0.0100 to 0.100, p=0.30)"
    swept = Finding("nmf", 2, "vanilla", "no_evidence", "…", evidence={"metric": "rel_loss", "confidence": 0.9,
                                                                      "headline": {**pair, "p": 0.18, "p_adjusted": 1.0, "comparisons": 10}})
    assert deciding_number(swept).endswith(", adj. p=1.0)")  # Holm's p over ten comparisons, said so
    assert deciding_number(swept, compact=True).endswith(", adj. p=1.0")
    balance = Finding("fs", 2, "mcfs", "gap", "…", evidence={"selectors": {}, "headline": {"group": "g=B", "other": "", "p_adjusted": 0.01},
                                                             "share": {"value": 0.3, "ci_low": 0.2, "ci_high": 0.5}, "parity": 1.0})
    fufs = Finding("fs", 2, "fufs", "mitigated", "…", evidence={"cluster_share": {"value": 0.9}, "alignment_protected": {"value": 0.1},
                                                               "baselines_alignment_protected": {"mcfs": 0.5, "variance": 0.7},
                                                               "alignment_data": 0.8, "baselines_alignment_data": [0.6, 0.9]})
    leak = {"kind": "leakage", "balanced_accuracy": 0.9, "ci_low": 0.85, "ci_high": 0.95, "chance": 0.5, "groups": 2, "pvalue": 0.01}
    vanilla_cp = Finding("cpd", 4, "vanilla", "gap", "…", evidence=leak)
    khsic = Finding("cpd", 4, "khsic", "mitigated", "…", evidence={**leak, "balanced_accuracy": 0.5, "ci_low": 0.45, "ci_high": 0.55,
                                                                     "pvalue": 0.6, "residual_fit": 0.06, "vanilla_residual_fit": 0.01})
    nmf, fs, cpd = audit_summary({"nmf": [none, fact], "fs": [balance, fufs], "cpd": [vanilla_cp, khsic]})
    assert nmf.verdict == "no_evidence" and not nmf.gaps and not nmf.closed and nmf.no_evidence == ["relative loss at rank 2"]
    assert nmf.text() == "NMF: no evidence: relative loss at rank 2"
    assert fs.verdict == "gap" and fs.gaps == ["cluster balance at rank 2 (g=B)"]
    assert fs.closed == [("FUFS (fair)", "alignment with all features 0.800 (baselines 0.600–0.900)")]
    assert cpd.gaps == ["leakage at rank 4 (2 groups)"] and cpd.closed == [("KHSIC-BCD (RBF kernel)", "residual fit 0.0600 (vanilla 0.0100)")]
    assert "leakage: balanced accuracy 0.500 (95 % 0.450–0.550); chance 0.500, p=0.60" in finding_line(khsic)
    assert audit_summary({"pca": [fact]}) == []  # nothing judged: no summary line
    worst = {"group": "a=x & b=y", "other": "everyone else", "value": 6.26, "other_value": 0.5, "difference": 5.76, "ci_low": 5.0,
             "ci_high": 6.5, "p_adjusted": 1e-18}
    subgroup = Finding("pca", 3, "vanilla", "gap", "Worst-served subgroup: …", evidence={"kind": "worst subgroup", "headline": worst})
    assert finding_line(subgroup).endswith("a=x & b=y vs everyone else  loss 6.26 vs 0.500 (diff 5.76, 95 % 5.00–6.50, p<0.001)")
    assert audit_summary({"pca": [subgroup]})[0].gaps == ["worst-served subgroup at rank 3 (a=x & b=y vs everyone else)"]
    untested = Finding("nmf", 2, "vanilla", "info", "…", evidence={"metric": "rel_loss", "headline": pair})
    quiet_leak = Finding("nmf", 2, "vanilla", "no_evidence", "…", evidence={**leak, "balanced_accuracy": 0.5, "pvalue": 0.7})
    (unjudged,) = audit_summary({"nmf": [untested, quiet_leak]})  # no intervals: the loss is never read as cleared
    assert unjudged.verdict == "info" and unjudged.unjudged == ["relative loss at rank 2"] and unjudged.no_evidence == ["leakage at rank 2"]
    assert unjudged.where() == "no evidence: leakage at rank 2; not judged (no intervals): relative loss at rank 2"


def test_each_familys_question_and_key_chart(pca_found):
    from fairaudit.plots import family_figures

    assert question("pca", ["race"]) == "Does PCA reconstruct every group of “race” as well?"
    assert "“race” × “sex”" in question("nmf", ["race", "sex"])
    result, _ = pca_found
    figures = family_figures(result.records, "pca")
    key, rest = key_figure(figures, "pca")
    assert key[0] == "loss" and len(rest) == len(figures) - 1 and key not in rest
    assert key_figure([], "pca") == (None, [])
