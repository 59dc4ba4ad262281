"""The CLI, the dashboard, the HTML report and the JSON say the same thing (issue 22): one audit of
the same file in the dashboard and on the command line, every finding — verdict, sentence and
details — compared across the four renderings of the same evidence objects; and the dashboard's
“Compare with” judges the findings again without a new run."""

from __future__ import annotations

import html
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from fairaudit.findings import findings
from fairaudit.vocabulary import render
from tests.app.test_app import finding_texts, unescaped, upload, wait_for_runs
from tests.app.test_trust_pages import app, pca_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_verdicts import gap_data  # noqa: E402

REPLICATES = 20


def _csv() -> bytes:
    """Two groups of 300 rows with a real gap and a third of 20 (too small to judge)."""
    data = gap_data(3, sizes=(300, 300, 20))
    frame = pd.DataFrame(np.round(data.X_raw, 6), columns=[f"f{i + 1}" for i in range(data.n_features)])
    frame.insert(0, "group", data.sensitive_features)
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, lineterminator="\n")
    return buffer.getvalue().encode()


def test_cli_dashboard_html_and_json_say_the_same(tmp_path):
    content = _csv()
    path = tmp_path / "groups.csv"
    path.write_bytes(content)
    at = app()
    upload(at, "groups.csv", content)
    [w for w in at.multiselect if w.label.startswith("Sensitive")][0].set_value(["group"]).run()
    at.button(key="roles-apply").click().run()
    pca_run(at, bootstrap=REPLICATES, ranks=(1, 3))
    result = at.session_state["runs"].latest(at.session_state["data-token"])["pca"][0]
    found = findings(result)["pca"]
    assert found[0].verdict == "gap" and found[0].evidence["small"][0]["group"] == "group=C"

    out = subprocess.run(
        [sys.executable, "-m", "fairaudit", "audit", str(path), "--sensitive", "group", "--ranks", "1:3",
         "--bootstrap", str(REPLICATES), "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"), "--verbose"],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout
    payload = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    report = (tmp_path / "r.html").read_text(encoding="utf-8")
    shown = [unescaped(text) for text in finding_texts(at)]
    saved = [f for f in payload["findings"] if f["family"] == "pca"]
    assert [(f["verdict"], f["text"], f["details"]) for f in saved] == [
        (f.verdict, render(f.text), [render(d) for d in f.details]) for f in found]  # the JSON: the same findings
    assert [f["evidence"] for f in saved] == [json.loads(json.dumps(f.evidence)) for f in found]
    for finding in found:
        cli_text = render(finding.text, "cli")
        assert f"finding (pca, {finding.verdict}): {cli_text}" in out  # the CLI
        assert html.escape(cli_text) in report  # the HTML report
        assert any(text.endswith(unescaped(render(finding.text, "dashboard"))) for text in shown)  # the dashboard
        for line in finding.details:
            assert f"  · {render(line, 'cli')}" in out and html.escape(render(line, "cli")) in report
    expanders = [e for e in at.expander if e.label.startswith("Details")]
    assert len(expanders) == sum(bool(f.details) for f in found)


def test_compare_with_judges_the_findings_again_without_a_new_run(tmp_path):
    at = app()
    upload(at, "groups.csv", _csv())
    [w for w in at.multiselect if w.label.startswith("Sensitive")][0].set_value(["group"]).run()
    at.button(key="roles-apply").click().run()
    pca_run(at, bootstrap=REPLICATES, ranks=(1, 3))
    runs = len(at.session_state["runs"].runs)
    selector = at.selectbox(key="pca-reference")
    assert selector.options == ["the best-served group (default)", "group=A", "group=B"]  # group=C: too small to judge
    assert "group=C (20 rows)" in selector.help
    selector.set_value("group=B").run()
    wait_for_runs(at)
    at.run()
    assert not at.exception and len(at.session_state["runs"].runs) == runs  # nothing refitted
    assert any("group=B (reference)" in unescaped(text) for text in finding_texts(at))
    at.switch_page("pages/report.py").run()  # the report and its downloads judge with the same reference
    assert not at.exception
    found = at.session_state["report-built"][2]["pca"]
    assert found[0].evidence["reference"] == "group=B" and found[0].evidence["reference_chosen"] == "user"
    assert json.loads(at.session_state["report-built"][3]["report.json"])["config"]["reference"] == "group=B"
