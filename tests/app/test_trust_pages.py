"""AppTests of issue 10 in the dashboard: the intervals, held-out rows and verdicts a user sets up
on a method page (and beside the Report page's run of every family), and how the results show
them — intervals in the tables and charts, a verdict badge and its rule on every finding, held-out
metrics labelled as such, library errors in the widgets' words, the downloads carrying the same.

Replicate counts are small (20): the suite runs with ``FAIRAUDIT_DEFAULT_BOOTSTRAP=0``
(tests/conftest.py), so an empty "Bootstrap replicates" box means no intervals here unless a test
asks for them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from fairaudit.formatting import number
from fairaudit.uncertainty import DEFAULT_CAP_VARIABLE
from fairaudit.vocabulary import OPTIONS
from tests.app.test_app import REPORT_DOWNLOADS, finding_texts, gated, unescaped, wait_for_runs

APP = str(Path(__file__).resolve().parents[2] / "app.py")
REPLICATES = 20
SPAN = re.compile(r"^−?[\d.,]+ \(−?[\d.,≈]+–−?[\d.,≈]+\)$")
"""A table cell with its interval: “0.656 (0.644–0.681)”."""


def app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=180).run()


def pca_run(at: AppTest, *, bootstrap: int | None, holdout: bool = False, ranks: tuple[int, int] = (1, 5)) -> None:
    """On the PCA page, set the intervals' controls, press Run audit and wait for the result."""
    at.switch_page("pages/pca.py").run()
    wait_for_runs(at)  # the page's own first-open audit, if it started one
    at.slider(key="pca-ranks").set_value(ranks)
    at.number_input(key="pca-bootstrap").set_value(bootstrap)
    if holdout:
        at.checkbox(key="pca-heldout").check()
    at.button(key="FormSubmitter:pca-settings-Run audit").click().run()
    wait_for_runs(at)
    at.run()
    assert not at.exception


def table(at: AppTest):
    return at.dataframe[0].value


def rules(at: AppTest) -> dict[str, str]:
    """Each finding's sentence → its rule (the “?” beside it)."""
    return {unescaped(m.value): unescaped(m.proto.help) for m in at.markdown if "-badge[" in m.value and m.proto.help}


def badges(at: AppTest) -> list[tuple[str, str]]:
    """``(badge label, sentence)`` of every finding on the page."""
    found = []
    for text in finding_texts(at):
        match = re.match(r":\w+-badge\[:material/\w+: ([^\]]+)\] (.*)", text, re.S)
        assert match, text
        found.append((match.group(1), unescaped(match.group(2))))
    return found


def test_the_controls_carry_the_vocabularys_names_and_the_librarys_defaults():
    from fairaudit.audit import AuditConfig

    at = app()
    at.switch_page("pages/pca.py").run()
    labels = {w.key: w.label for w in [*at.number_input, *at.checkbox]}
    assert labels["pca-bootstrap"] == OPTIONS["bootstrap"].widget
    assert labels["pca-confidence"] == OPTIONS["confidence"].widget
    assert labels["pca-flag-ratio"] == OPTIONS["flag_ratio"].widget
    assert labels["pca-holdout"] == OPTIONS["holdout"].widget
    assert at.number_input(key="pca-bootstrap").value is None  # empty: the library's default
    assert at.number_input(key="pca-confidence").value == 100 * AuditConfig.confidence
    assert at.number_input(key="pca-flag-ratio").value == AuditConfig.flag_ratio
    assert at.checkbox(key="pca-heldout").value is False


def test_bootstrap_on_the_default_sample_shows_intervals_a_gap_and_its_mitigation():
    at = app()
    pca_run(at, bootstrap=REPLICATES)
    result = at.session_state["runs"].latest(at.session_state["data-token"])["pca"][0]
    assert result.uncertainty["pca"]["replicates"] == REPLICATES
    # every loss column of the table with its interval
    rows = table(at)
    assert all(SPAN.match(cell) for cell in rows["max_loss"]), rows["max_loss"].tolist()
    assert any(f"{REPLICATES} stratified bootstrap replicates" in c.value for c in at.caption)
    # verdicts: vanilla PCA's gap, Fair PCA's mitigation, each with its rule
    found = badges(at)
    assert any(label == "Gap" and text.startswith("Gap at rank") and "vanilla PCA" in text for label, text in found), found
    assert any(label == "Mitigated" and text.startswith("Fair PCA (exact eigen-solver) closes the gap") for label, text in found)
    explained = rules(at)
    assert any("Gap at rank" in text and rule.startswith("gap: two groups, each with at least 30 rows, differ") for text, rule in explained.items())
    assert any("closes the gap" in text and rule.startswith("mitigated: vanilla has a gap") for text, rule in explained.items())
    assert any(e.label.startswith("Why these verdicts: the rules (gap, mitigated") for e in at.expander)
    # the charts draw the intervals: a translucent band per group and variant, error bars for leakage
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    assert any(trace.get("fill") == "toself" and trace.get("name", "").endswith("interval") for spec in specs for trace in spec["data"])
    assert any(trace.get("error_y", {}).get("array") for spec in specs for trace in spec["data"])


def test_bootstrap_zero_shows_the_no_intervals_state_without_errors():
    at = app()
    pca_run(at, bootstrap=0)
    assert not at.error
    assert any("No intervals" in i.value and "“Bootstrap replicates” was 0" in i.value for i in at.info)
    assert not any("(" in cell for cell in table(at)["max_loss"])  # values only
    found = badges(at)
    disparities = [(label, text) for label, text in found if "reconstruction loss" in text]
    assert disparities and all(label == "Info" for label, _ in disparities)  # no test, so no verdict
    assert any("No verdict" in text and "“Bootstrap replicates” → “0”" in text for _, text in disparities)
    assert not any("bootstrap=0" in text for _, text in found)  # never the library's word in the dashboard


def test_holdout_on_shows_heldout_metrics_next_to_the_training_ones():
    at = app()
    pca_run(at, bootstrap=0, holdout=True)
    rows = table(at)  # each variant and rank on two lines, training then held-out, in the same columns
    assert list(rows.columns[:3]) == ["variant", "rank", "rows"] and "heldout_max_loss" not in rows.columns
    assert list(rows["rows"][:4]) == ["training", "held-out", "training", "held-out"]
    result = at.session_state["runs"].latest(at.session_state["data-token"])["pca"][0]
    records = result.records[(result.records.variant == "vanilla") & (result.records["rank"] == 1)]
    heldout = records[records.metric == "heldout_max_loss"].value.iloc[0]
    assert rows["max_loss"][1] == number(heldout) != rows["max_loss"][0]  # the held-out line's value, under the training one
    assert any("Held-out rows: 30 % of each group" in c.value for c in at.caption)
    assert any(c.value.startswith("↓ / ↑ after a title: lower / higher is better.") for c in at.caption)
    titles = [json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")]
    assert any("held-out rows" in title for title in titles), titles
    assert any(text.startswith("At rank") and "on the held-out rows" in text for _, text in badges(at))


def test_a_library_error_about_the_replicates_names_the_widget():
    at = app()
    at.switch_page("pages/pca.py").run()
    wait_for_runs(at)
    started = len(at.session_state["runs"].runs)
    at.number_input(key="pca-bootstrap").set_value(5)
    at.button(key="FormSubmitter:pca-settings-Run audit").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("“Bootstrap replicates” → “5”" in unescaped(e) and "at least 10" in e for e in errors), errors
    assert not any("bootstrap=" in e or "--bootstrap" in e for e in errors)
    assert len(at.session_state["runs"].runs) == started  # nothing ran


def test_the_report_page_and_its_downloads_carry_the_intervals_and_verdicts():
    at = app()
    pca_run(at, bootstrap=REPLICATES)
    at.switch_page("pages/report.py").run()
    assert not at.exception
    assert len(at.get("download_button")) == REPORT_DOWNLOADS
    labels = [label for label, _ in badges(at)]
    assert "Gap" in labels and "Mitigated" in labels
    assert any(e.label.startswith("Why these verdicts") and "gap" in e.label for e in at.expander)
    assert any(rule.startswith("gap:") for rule in rules(at).values())
    assert "Verdicts and their rules" in [e.label for e in at.expander]
    _, combined, found, files, _ = at.session_state["report-built"]
    payload = json.loads(files["report.json"])
    verdicts = {(f["variant"], f["verdict"]) for f in payload["findings"]}
    assert ("vanilla", "gap") in verdicts and ("fair_eig", "mitigated") in verdicts
    assert all("⟦" not in f["rule"] and "⟦" not in f["text"] for f in payload["findings"])  # options worded
    losses = [r for r in payload["records"] if r["metric"] == "max_loss"]
    assert losses and all(r["ci_low"] is not None and r["ci_low"] <= r["value"] <= r["ci_high"] for r in losses)
    header = files["records.csv"].splitlines()[0].split(",")
    assert header[-2:] == ["ci_low", "ci_high"]
    html = files["report.html"]
    assert 'class="finding gap"' in html and "Why “gap”: the rule" in html
    assert f"“Bootstrap replicates” → “{REPLICATES}”" in html  # why this number of replicates, in the dashboard's words


def test_the_run_of_every_family_takes_the_reports_settings(monkeypatch):
    import pages.common

    monkeypatch.setattr(pages.common, "QUICK_WAIT_SECONDS", 0.0)
    at = app()
    at.switch_page("pages/report.py").run()
    at.number_input(key="report-bootstrap").set_value(0)
    at.number_input(key="report-confidence").set_value(90.0)
    at.checkbox(key="report-heldout").check()
    at.button(key="report-run-all").click().run()
    assert not at.exception
    run = at.session_state["runs"].runs[-1]
    run.cancel()  # the settings are what is tested, not the families' audits
    assert run.wait(120)
    configs = {job.method: job.config for job in run.jobs}
    assert list(configs) == ["pca", "nmf", "fs", "cpd"]
    assert all((c.bootstrap, c.confidence, c.holdout) == (0, 0.9, 0.3) for c in configs.values())
    at.switch_page("pages/nmf.py").run()  # the family page shows the settings its run used
    assert at.number_input(key="nmf-confidence").value == 90.0 and at.checkbox(key="nmf-heldout").value is True


def test_the_page_starts_at_once_and_later_says_what_the_last_run_took(monkeypatch):
    """With the library's real defaults (100 PCA replicates), the PCA page still starts its audit on
    first open — its numbers take about a second, the intervals fill in after. It promises no time
    before a run (no model of this machine: the run measures its own pace as it goes); once a run
    is in, it says how long that took here, and how much of it the intervals."""
    monkeypatch.delenv(DEFAULT_CAP_VARIABLE, raising=False)
    fake = gated(monkeypatch)  # the run is the test's to release
    at = app()
    at.switch_page("pages/pca.py").run()
    assert not at.exception
    assert at.number_input(key="pca-bootstrap").placeholder == "100 (default)"
    assert at.number_input(key="pca-jobs").value is None and at.number_input(key="pca-time-budget").value is None
    assert not any("Expect" in c.value or "took" in c.value for c in at.caption)
    assert [run.methods for run in at.session_state["runs"].runs] == [("pca",)]
    fake.gate.set()
    wait_for_runs(at)
    at.run()
    assert any("The last audit of PCA on these data took" in c.value and "bootstrap replicate" in c.value for c in at.caption)


@pytest.mark.parametrize("page", ["pages/nmf.py", "pages/feature_selection.py", "pages/tensor.py"])
def test_every_method_page_has_the_same_controls(page):
    at = app()
    at.switch_page(page).run()
    assert not at.exception
    labels = {w.label for w in [*at.number_input, *at.checkbox]}
    assert {OPTIONS[name].widget for name in ("bootstrap", "confidence", "flag_ratio", "holdout", "n_jobs", "time_budget")} <= labels
    assert "Evaluate on held-out rows" in labels


def test_table_columns_are_as_wide_as_most_of_their_values():
    """A per-rank table column fits its title and most of its cells (Streamlit sized it by the
    title alone, cutting “0.0763 (0.0370–0.159)” under “Loss gap ↓”), and one long cell does not
    widen it; titles are short, with an arrow for which way is better."""
    import pandas as pd

    from fairaudit.plots import table_title as table_label
    from pages.common import column_width

    cells = pd.Series(["0.706 (0.611–0.808)"] * 9 + ["0.0000123 (0.00000456–0.0000789) †"])
    assert column_width("Loss gap ↓", cells) >= 6 * len("0.706 (0.611–0.808)") + 16
    assert column_width("Loss gap ↓", cells) < column_width("Loss gap ↓", cells, share=1.0)
    assert column_width("a title longer than every one of its cells", pd.Series(["0 (0–0)"])) > column_width("x", pd.Series(["0 (0–0)"]))
    assert table_label("loss_gap") == "Loss gap ↓" and table_label("loss_gap", choice=True) == "Loss gap (↓ better)"
    assert table_label("balanced_accuracy") == "Leakage (bal. acc.) ↓"
    assert table_label("heldout_balanced_accuracy") == "Leakage (bal. acc.) (held-out rows) ↓"
