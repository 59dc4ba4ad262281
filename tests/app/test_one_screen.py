"""The answer first (issue 25): after a run, a family page opens with its question, the verdict per
variant and the one chart that carries it; every other chart, table and rule is one click away."""

from __future__ import annotations

import json

from tests.app.test_app import app, wait_for_runs
from tests.app.test_trust_pages import pca_run


def leaves(node):
    """The page's elements in the order they are drawn (containers opened)."""
    children = getattr(node, "children", None)
    if not children:
        yield node
        return
    for index in sorted(children):
        yield from leaves(children[index])


def test_a_pca_run_opens_on_its_answer():
    at = app()
    pca_run(at, bootstrap=20, ranks=(1, 4))
    shown = [e for e in leaves(at.main) if e.type != "caption"]  # captions: the data in use, a chart's reading
    title, table, chart = shown[:3]
    assert title.type == "title" and title.value == "Does PCA reconstruct every group of “group” as well?"
    assert table.type == "markdown" and table.value.startswith("| Variant | Verdict | Judged | Rank | Groups | Deciding number (95 % interval) | Cost |")
    rows = [row.replace("\u00a0", " ") for row in table.value.splitlines()[2:]]  # short cells kept on one line
    assert any(":orange-badge[" in row and "| loss |" in row and "group=B vs group=A" in row and " · diff " in row for row in rows)
    assert any(":blue-badge[" in row and "Fair PCA" in row and " % error |" in row for row in rows)  # mitigated, at a cost
    assert chart.type == "plotly_chart" and "loss" in json.loads(chart.proto.spec)["layout"]["title"]["text"].lower()
    assert [t.label for t in at.tabs] == ["All charts", "Per-rank table", "How this was decided"]
    settings = next(e for e in at.expander if e.label == "Settings of the run")
    assert not settings.proto.expanded  # once a result exists, the settings fold away under the answer
    assert at.selectbox(key="pca-reference").label == "Compare with"  # right under the chart
    assert any(e.label.startswith("Why these verdicts: the rules") for e in at.expander)  # under “How this was decided”


def test_before_any_result_the_settings_are_open():
    at = app().run()
    at.switch_page("pages/nmf.py").run()  # no first-open audit on this page
    wait_for_runs(at)
    assert not at.exception
    settings = next(e for e in at.expander if e.label == "Settings of the run")
    assert settings.proto.expanded and any("Press **Run audit**" in i.value for i in at.info)
    assert at.title[0].value.startswith("Does NMF represent every group of")
