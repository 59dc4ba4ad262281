"""A verdict a pipeline can act on (issue 26, item 3): ``audit --fail-on`` and ``compare --fail-on
regression`` exit with their own status (3, neither a bug's 1 nor bad input's 2) after writing
every output, and the audit card (Markdown + JSON) carries the data hash, the configuration, the
versions, every verdict and the rules."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fairaudit.card import GATE_EXIT, audit_card, card_markdown, gate_failures
from fairaudit.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "two_groups.csv"
AUDIT = ["audit", str(SAMPLE), "--sensitive", "group", "--label", "outcome", "--ranks", "1:4", "--bootstrap", "10",
         "--variants", "vanilla,fair_eig", "--quiet"]


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """One audit of the default sample (vanilla PCA has a gap and leaks the group; Fair PCA closes
    the gap) and one under a tolerance no gap reaches."""
    folder = tmp_path_factory.mktemp("gate")
    assert main([*AUDIT, "--json", str(folder / "strict.json")]) == 0
    assert main([*AUDIT, "--json", str(folder / "lenient.json"), "--flag-ratio", "1000"]) == 0
    return folder


@pytest.mark.parametrize(
    "fail_on,variants,status",
    [
        ("gap", None, GATE_EXIT),  # vanilla's gap
        ("gap", "fair_eig", 0),  # the variant a pipeline ships: mitigated
        ("leakage", "vanilla", GATE_EXIT),
        ("worse", None, 0),
        ("gap,worse", "fair_eig", 0),
    ],
)
def test_the_gate_fails_only_on_what_it_is_asked_to(fail_on, variants, status, tmp_path, capsys):
    argv = [*AUDIT, "--fail-on", fail_on, "--json", str(tmp_path / "r.json")] + (["--fail-variants", variants] if variants else [])
    assert main(argv) == status
    err = capsys.readouterr().err
    assert (tmp_path / "r.json").exists()  # every output is written before the gate speaks
    if status:
        assert err.startswith("fairaudit: gate: gap (pca · vanilla · rank")
    else:
        assert "gate" not in err


def test_a_bad_gate_is_bad_input(tmp_path, capsys):
    assert main([*AUDIT, "--fail-on", "unfair"]) == 2
    assert "choose among gap, worse, leakage" in capsys.readouterr().err
    assert main([*AUDIT, "--fail-on", "gap", "--fail-variants", "fair_magic"]) == 2
    assert "no finding is about such a variant" in capsys.readouterr().err
    assert main([*AUDIT, "--card", str(tmp_path / "card.txt")]) == 2
    assert "ending in .md" in capsys.readouterr().err
    assert main([*AUDIT, "--card", str(SAMPLE.with_suffix(".md")), "--json", str(SAMPLE.with_suffix(".json"))]) == 2
    assert "--card (its JSON) and --json both name" in capsys.readouterr().err


def test_compare_fails_on_a_verdict_that_got_worse(audited, capsys):
    lenient, strict = audited / "lenient.json", audited / "strict.json"
    assert main(["compare", str(lenient), str(strict), "--fail-on", "regression", "--quiet"]) == GATE_EXIT
    err = capsys.readouterr().err
    assert "fairaudit: gate: regression: PCA · PCA: No evidence → Gap at rank" in err
    assert main(["compare", str(strict), str(lenient), "--fail-on", "regression", "--quiet"]) == 0  # an improvement passes
    assert main(["compare", str(strict), str(strict), "--fail-on", "regression", "--quiet"]) == 0


def test_the_audit_card_holds_the_hash_the_setup_the_verdicts_and_the_rules(tmp_path):
    card_path = tmp_path / "card.md"
    assert main([*AUDIT, "--card", str(card_path), "--json", str(tmp_path / "r.json")]) == 0
    card = json.loads(card_path.with_suffix(".json").read_text())
    report = json.loads((tmp_path / "r.json").read_text())
    assert card["data"]["sha256"] == hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    assert card["configuration"] == report["config"] and card["versions"]["numpy"] and card["versions"]["fairaudit"]
    judged = [f for f in report["findings"] if f["verdict"] != "info"]
    assert [(v["variant"], v["verdict"], v["text"]) for v in card["verdicts"]] == [(f["variant"], f["verdict"], f["text"]) for f in judged]
    assert set(card["rules"]) >= {"gap", "no_evidence", "mitigated", "worse"} and "--bootstrap 0" in card["rules"]["info"]
    markdown = card_path.read_text()
    assert markdown.startswith("# Audit card: two\\_groups.csv") and card["data"]["sha256"] in markdown
    assert markdown.count("\n- **") == len(judged) and "## How the verdicts were decided" in markdown


def test_user_text_in_the_card_stays_text():
    import numpy as np
    import pandas as pd

    from fairaudit import AuditConfig, AuditData, run_audit
    from fairaudit.findings import findings

    rng = np.random.default_rng(0)
    groups = pd.Series(np.where(np.arange(80) < 40, "<img src=x>", "*b*"), name="g`")
    result = run_audit(AuditData.from_arrays(rng.normal(size=(80, 4)), groups, name="x`|y.csv"), AuditConfig(ranks=(1, 2)))
    found = findings(result)
    markdown = card_markdown(audit_card(result, found))
    assert "<img" not in markdown.replace("\\<img", "") and "\\<img src=x\\>" in markdown and "`x'|y.csv`" in markdown
    assert gate_failures(found, ["gap"]) == []  # no intervals: no verdict, nothing fails
