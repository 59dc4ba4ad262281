"""A relative loss below 0 is explained where it is shown (issue 24): the charts' hover, the
per-rank tables' note (dashboard and HTML report) and the NMF findings."""

from __future__ import annotations

import pandas as pd

from fairaudit.audit import RECORD_COLUMNS, AuditResult
from fairaudit.findings import findings
from fairaudit.metrics import NEGATIVE_LOSS_HOVER, NEGATIVE_LOSS_NOTE
from fairaudit.plots import group_curves, hover_texts, negative_loss_note, variant_curves
from fairaudit.report import render_html, summary_table


def _nmf_result(small_loss: float) -> AuditResult:
    """NMF records by hand at rank 2: the larger group's relative loss ``small_loss`` (below 0 or
    not), the smaller group's 0.05, with intervals."""
    rows = []
    for variant in ("vanilla", "fair_mu"):
        large = small_loss if variant == "vanilla" else 0.01
        worst = max(0.05, large)
        rows += [
            ("nmf", variant, 2, "large", "rel_loss", large, large - 0.002, large + 0.002),
            ("nmf", variant, 2, "small", "rel_loss", 0.05, 0.04, 0.06),
            ("nmf", variant, 2, "large", "rel_error", 0.2, 0.19, 0.21),
            ("nmf", variant, 2, "small", "rel_error", 0.3, 0.28, 0.32),
            ("nmf", variant, 2, "", "max_rel_loss", worst, worst - 0.01, worst + 0.01),
            ("nmf", variant, 2, "", "rel_loss_gap", 0.05 - large, 0.03, 0.07),
            ("nmf", variant, 2, "", "total_rel_error", 0.25, 0.24, 0.26),
        ]
    if small_loss < 0:  # a whole-data loss below 0 too, for the tables
        rows.append(("nmf", "vanilla", 3, "", "max_rel_loss", -0.001, -0.002, 0.0))
    return AuditResult(
        records=pd.DataFrame(rows, columns=RECORD_COLUMNS),
        config={"methods": ["nmf"], "flag_ratio": 1.25, "confidence": 0.95},
        data={"group_sizes": {"large": 300, "small": 60}},
    )


def test_the_hover_of_a_point_below_0_says_why():
    line = pd.DataFrame({"rank": [1, 2], "value": [-0.00158, 0.02], "ci_low": [-0.003, 0.01], "ci_high": [0.0, 0.03]})
    below, above = hover_texts(line, "large", "rel_loss")
    assert below.endswith(NEGATIVE_LOSS_HOVER) and NEGATIVE_LOSS_HOVER not in above
    assert NEGATIVE_LOSS_HOVER not in hover_texts(line, "large", "loss")[0]  # PCA's loss: never below its own optimum
    assert hover_texts(line, "large", "heldout_rel_loss")[0].endswith(NEGATIVE_LOSS_HOVER)
    result = _nmf_result(-0.00158)
    per_group = group_curves(result.records, "nmf", "rel_loss")
    assert any(NEGATIVE_LOSS_HOVER in text for trace in per_group.data for text in (trace.text or ()))
    whole = variant_curves(result.records, "nmf", "max_rel_loss")
    assert any(NEGATIVE_LOSS_HOVER in text for trace in whole.data for text in (trace.text or ()))


def test_the_tables_note_a_loss_below_0():
    assert negative_loss_note(summary_table(_nmf_result(-0.00158), "nmf")) == NEGATIVE_LOSS_NOTE
    assert negative_loss_note(summary_table(_nmf_result(0.01), "nmf")) is None
    assert NEGATIVE_LOSS_NOTE in render_html(_nmf_result(-0.00158))
    assert NEGATIVE_LOSS_NOTE not in render_html(_nmf_result(0.01))


def test_the_findings_say_where_a_loss_is_below_0_and_why():
    found = findings(_nmf_result(-0.00158))["nmf"]
    notes = [f for f in found if NEGATIVE_LOSS_NOTE in f.text]
    assert len(notes) == 1 and notes[0].verdict == "info"
    assert notes[0].text.startswith("Relative losses below 0 at rank 2 (large under NMF: −0.00158).")
    assert not any(NEGATIVE_LOSS_NOTE in f.text for f in findings(_nmf_result(0.01))["nmf"])
