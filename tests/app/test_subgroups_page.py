"""The PCA page's “Search for the worst-served subgroup”: the search runs with the audit and its
finding is shown with the others (the finding's sentence and rule are the library's)."""

from __future__ import annotations

from fairaudit.findings import findings
from fairaudit.vocabulary import render
from tests.app.test_app import finding_texts, unescaped, wait_for_runs
from tests.app.test_trust_pages import app


def test_the_pca_page_searches_the_subgroups_when_asked():
    at = app()
    at.switch_page("pages/data.py").run()
    at.selectbox(key="data-sample").set_value("subgroups").run()
    at.button(key="roles-apply").click().run()
    at.switch_page("pages/pca.py").run()
    wait_for_runs(at)  # the page's own first-open audit: no search
    assert not at.checkbox(key="pca-subgroups").value
    at.slider(key="pca-ranks").set_value((1, 3))
    at.number_input(key="pca-bootstrap").set_value(20)
    at.checkbox(key="pca-subgroups").check()
    at.button(key="FormSubmitter:pca-settings-Run audit").click().run()
    wait_for_runs(at)
    at.run()
    assert not at.exception
    result = at.session_state["runs"].latest(at.session_state["data-token"])["pca"][0]
    assert result.config["subgroups"] is True
    worst = next(f for f in findings(result)["pca"] if f.evidence.get("kind") == "worst subgroup")
    assert worst.verdict == "gap" and worst.evidence["headline"]["group"] == "age_band=old & region=west"
    shown = [unescaped(text) for text in finding_texts(at)]
    assert any(text.endswith(unescaped(render(worst.text, "dashboard"))) for text in shown)
