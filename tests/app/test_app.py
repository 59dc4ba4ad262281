"""Every page of the dashboard runs in Streamlit's AppTest without exceptions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from fairaudit.samples import sample_bytes
from tests.app.test_runs import GatedAudit

APP = str(Path(__file__).resolve().parents[2] / "app.py")


REPORT_DOWNLOADS = 6
"""The Report page's downloads: HTML, JSON, CSV records, the ZIP of all three, the audit card as
Markdown and as JSON."""


def app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=180)


def upload(at: AppTest, name: str, content: bytes) -> None:
    """On the Data page, choose "Upload a file (CSV or Parquet)" and upload ``content`` as ``name``."""
    at.switch_page("pages/data.py").run()
    at.radio(key="data-source").set_value("Upload a file (CSV or Parquet)").run()
    at.file_uploader(key="data-upload").set_value((name, content, "text/csv")).run()


def choose(at: AppTest, label_start: str, values: list[str]) -> None:
    """Set the Data page's multiselect whose label starts with ``label_start``."""
    [w for w in at.multiselect if w.label.startswith(label_start)][0].set_value(values).run()


def finding_texts(at: AppTest) -> list[str]:
    """The findings on the page: each is Markdown with its verdict badge first (the verdict table above
    them is a Markdown table of badges)."""
    return [m.value for m in at.markdown if "-badge[" in m.value and not m.value.startswith("|")]  # not the verdict table


def test_first_open_lands_on_the_data_page_and_starts_nothing_slow():
    at = app().run()
    assert not at.exception
    assert at.title[0].value == "Data"
    assert not at.session_state["runs"].runs  # nothing started without the user asking


def test_pca_page_runs_its_quick_default_audit_on_first_open():
    at = app().run()
    at.switch_page("pages/pca.py").run()
    assert not at.exception
    assert any("vanilla PCA" in text for text in finding_texts(at))
    assert len(at.get("plotly_chart")) >= 5


def test_feature_selection_page_runs_its_quick_default_audit_on_first_open():
    """Its numbers take about a second on the default sample (the page's size rule), so the page
    starts its default audit unasked, as the PCA page does."""
    at = app().run()
    at.switch_page("pages/feature_selection.py").run()
    assert not at.exception
    wait_for_runs(at)
    at.run()
    assert [run.methods for run in at.session_state["runs"].runs] == [("fs",)]
    assert any("FUFS" in text for text in finding_texts(at))


@pytest.mark.parametrize("page", ["pages/nmf.py", "pages/tensor.py"])
def test_slower_families_wait_for_the_run_button(page):
    at = app().run()
    at.switch_page(page).run()
    assert not at.exception
    assert not at.session_state["runs"].runs
    assert any("Run audit" in info.value for info in at.info)


@pytest.mark.parametrize("page", ["pages/pca.py", "pages/nmf.py", "pages/feature_selection.py", "pages/tensor.py", "pages/report.py"])
def test_every_page_runs(page):
    at = app().run()
    at.switch_page(page).run()
    assert not at.exception


def test_upload_a_csv_and_audit_it():
    at = app().run()
    upload(at, "patients.csv", sample_bytes("diabetes"))
    assert not at.exception
    choose(at, "Sensitive", ["sex"])
    choose(at, "Ignore", ["disease_progression"])
    at.button(key="roles-apply").click().run()
    assert not at.exception
    assert any("Data ready" in s.value for s in at.success)
    at.switch_page("pages/pca.py").run()
    assert not at.exception
    assert any("sex=" in text for text in finding_texts(at))
    at.switch_page("pages/report.py").run()
    assert not at.exception
    assert len(at.get("download_button")) == REPORT_DOWNLOADS


def test_bad_upload_shows_an_error_and_the_app_keeps_working():
    at = app().run()
    upload(at, "broken.csv", b"a,b\n1,2,3\n")
    assert not at.exception
    assert any("fields but the header has 2" in e.value for e in at.error)
    at.switch_page("pages/pca.py").run()
    assert not at.exception


def test_tensor_sample_in_long_format():
    at = app().run()
    at.switch_page("pages/data.py").run()
    at.selectbox(key="data-sample").set_value("cpd_tensor").run()
    assert not at.exception
    at.button(key="roles-apply").click().run()
    assert not at.exception
    assert any("Data ready" in s.value for s in at.success)
    assert any("A tensor of shape" in c.value for c in at.caption)


def test_tensor_page_offers_khsic_above_its_entity_limit():
    """Above 5,000 entities KHSIC is skipped by default; the page says so and offers to run it."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(5001, 5)), columns=[f"x{i}" for i in range(5)])
    frame["group"] = rng.choice(["a", "b"], size=5001)
    at = app().run()
    upload(at, "big.csv", frame.to_csv(index=False).encode())
    choose(at, "Sensitive", ["group"])
    at.button(key="roles-apply").click().run()
    at.switch_page("pages/tensor.py").run()
    assert not at.exception
    assert at.checkbox(key="cpd-khsic-anyway").value is False
    assert any("Run KHSIC anyway" in w.value for w in at.warning)


@pytest.mark.shared_data
@pytest.mark.parametrize("sensitive", [["SEX"], ["SEX", "EDUCATION"]], ids=["sex", "sex-x-education"])
def test_credit_upload_end_to_end(sensitive):
    """The realistic upload of the issue: 30,000 rows, SEX (or SEX × EDUCATION) sensitive."""
    from tests.conftest import shared_file

    content = shared_file("credit/UCI_Credit_Card.csv").read_bytes()
    at = app().run()
    upload(at, "UCI_Credit_Card.csv", content)
    choose(at, "Sensitive", sensitive)
    at.button(key="roles-apply").click().run()
    assert not at.exception
    assert any("Data ready" in s.value for s in at.success)
    at.switch_page("pages/pca.py").run()
    assert not at.exception
    wait_for_runs(at)  # 30,000 rows: the page's run may outlast its first wait on a loaded machine
    at.run()
    assert not at.exception
    assert any("vanilla PCA's reconstruction loss is" in text and "SEX=" in text for text in finding_texts(at))
    at.switch_page("pages/report.py").run()
    assert not at.exception
    assert len(at.get("download_button")) == REPORT_DOWNLOADS


# ---------------------------------------------------------------- runs belong to the session
def wait_for_runs(at: AppTest, timeout: float = 120.0) -> None:
    for run in at.session_state["runs"].runs:
        assert run.wait(timeout), f"run {run.label} still going after {timeout} s"


def test_a_run_survives_switching_pages_and_lands_on_its_page_and_the_report(monkeypatch):
    import pages.common

    monkeypatch.setattr(pages.common, "QUICK_WAIT_SECONDS", 0.0)  # the run is surely still going below
    at = app().run()
    at.switch_page("pages/nmf.py").run()
    at.slider(key="nmf-ranks").set_value((1, 2))
    at.button(key="FormSubmitter:nmf-settings-Run audit").click().run()
    assert not at.exception
    registry = at.session_state["runs"]
    assert len(registry.runs) == 1
    at.switch_page("pages/data.py").run()  # the user looks elsewhere while it runs
    assert not at.exception
    wait_for_runs(at)
    assert registry.runs[0].state == "done"
    at.switch_page("pages/nmf.py").run()
    assert not at.exception
    assert any("relative loss" in text for text in finding_texts(at))  # the NMF findings
    assert at.slider(key="nmf-ranks").value == (1, 2)  # the settings the run used, not the defaults
    at.switch_page("pages/report.py").run()
    assert not at.exception
    assert len(at.get("download_button")) == REPORT_DOWNLOADS
    assert any(m.value == "#### NMF" for m in at.markdown)  # the NMF findings, each with its verdict badge
    assert any("relative loss" in text for text in finding_texts(at))
    assert not any("Not audited yet" in info.value and "NMF" in info.value for info in at.info)


def gated(monkeypatch, gate_before_estimates: bool = False) -> GatedAudit:
    """The dashboard's audits under the test's control (:class:`GatedAudit`), and a result cache of
    this test's own (the shared one may hold the same audit from another test)."""
    import pages.common
    import pages.runs

    fake = GatedAudit(gate_before_estimates)
    monkeypatch.setattr(pages.runs, "AuditRun", fake)
    store = pages.runs.ResultStore()
    monkeypatch.setattr(pages.common, "result_store", lambda: store)
    return fake


def test_cancel_stops_a_run_and_keeps_nothing(monkeypatch):
    """Cancelled during its fits, before any number is in: nothing is kept, and the page says so."""
    fake = gated(monkeypatch, gate_before_estimates=True)
    at = app().run()
    at.switch_page("pages/nmf.py").run()
    at.button(key="FormSubmitter:nmf-settings-Run audit").click().run()
    run = at.session_state["runs"].runs[0]
    assert fake.fitted.wait(60)
    run.cancel()
    fake.gate.set()
    assert run.wait(60)
    assert run.state == "cancelled" and "nmf" not in run.results
    at.switch_page("pages/nmf.py").run()
    assert not at.exception
    assert any("cancelled" in w.value and "nothing from it was kept" in w.value for w in at.warning)


def test_the_page_shows_the_point_estimates_while_the_intervals_run(monkeypatch):
    """The numbers show as soon as they are measured, marked as point estimates, with no verdict;
    the findings and their verdicts come with the intervals."""
    fake = gated(monkeypatch)
    at = app().run()
    at.switch_page("pages/pca.py").run()  # its quick default audit starts; the intervals wait for the gate
    assert fake.handed_over.wait(60)
    at.run()
    assert not at.exception
    assert any("Point estimates" in i.value and "being computed" in i.value for i in at.info)
    assert not finding_texts(at) and any("with the intervals" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) >= 3 and at.dataframe
    at.switch_page("pages/report.py").run()  # the report waits for the intervals, and says where the numbers are
    assert not at.exception
    assert any(i.value.startswith("Numbers ready, intervals running: PCA") for i in at.info)
    fake.gate.set()
    wait_for_runs(at)
    at.switch_page("pages/pca.py").run()
    assert not any("Point estimates" in i.value for i in at.info)
    assert any("vanilla PCA" in text for text in finding_texts(at))
    assert any("10 stratified bootstrap replicates" in c.value for c in at.caption)


def test_cancelling_the_intervals_keeps_the_numbers(monkeypatch):
    fake = gated(monkeypatch)
    at = app().run()
    at.switch_page("pages/pca.py").run()
    assert fake.handed_over.wait(60)
    at.session_state["runs"].runs[0].cancel()
    wait_for_runs(at)
    at.run()
    assert not at.exception
    assert any("intervals were cancelled" in w.value and "point estimates are kept" in w.value for w in at.warning)
    assert any("No intervals: the intervals were cancelled by the user after" in i.value for i in at.info)
    found = finding_texts(at)
    assert found and all(":gray-badge[" in text for text in found if "reconstruction loss" in text)  # no verdict without intervals
    assert any("No verdict: the intervals were not computed (the intervals were cancelled by the user after" in unescaped(text)
               for text in found)  # why, in the finding itself (not "Bootstrap replicates → 0")
    at.switch_page("pages/report.py").run()
    assert not at.exception
    assert any("PCA during its intervals" in w.value and "point estimates are kept" in w.value for w in at.warning)
    assert len(at.get("download_button")) == REPORT_DOWNLOADS  # the numbers can be exported, their missing intervals said


# ---------------------------------------------------------------- safe by default
def unescaped(text: str) -> str:
    """``text`` as the reader sees it (Markdown backslash escapes removed)."""
    return re.sub(r"\\(.)", r"\1", text)


def markdown_images_and_html(text: str) -> list[str]:
    """Image or raw-HTML tokens a CommonMark renderer would make of ``text``."""
    from markdown_it import MarkdownIt

    found = []
    for token in MarkdownIt("commonmark").parse(text):
        for child in [token, *(token.children or [])]:
            if child.type in ("image", "html_inline", "html_block"):
                found.append(child.content or child.type)
    return found


def rendered_strings(at: AppTest) -> list[str]:
    """Every string the page hands to Streamlit's Markdown renderer (bodies and widget labels)."""
    out = []

    def walk(node):
        proto = getattr(node, "proto", None)
        if proto is not None:
            for field in ("body", "label"):
                value = getattr(proto, field, None)
                if isinstance(value, str) and value:
                    out.append(value)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return out


def test_a_group_value_with_markdown_image_syntax_renders_as_text():
    evil = "![x](http://host/p.png)"
    rows = "".join(f"{evil if i % 2 else 'plain'},{i % 7},{(i * 3) % 11},{(i * 5) % 13}\n" for i in range(60))
    at = app().run()
    upload(at, "evil ![y](http://host/q.png).csv", ("grp,a,b,c\n" + rows).encode())
    choose(at, "Sensitive", ["grp"])
    at.button(key="roles-apply").click().run()
    assert not at.exception
    for page in ("pages/data.py", "pages/pca.py", "pages/report.py"):
        at.switch_page(page).run()
        assert not at.exception
        strings = rendered_strings(at)
        assert any(evil in unescaped(s) for s in strings), page  # the value is shown...
        for s in strings:
            assert not markdown_images_and_html(s), (page, s)  # ...as text, never as an image


def test_two_sessions_with_numerically_identical_uploads_see_their_own_names():
    rows = [(("F", "M")[i % 2], 20 + i % 13, 100 + (7 * i) % 17, i % 5) for i in range(80)]
    first = "sex,age,income,score\n" + "".join(f"{s},{a},{b},{c}\n" for s, a, b, c in rows)
    second = "sex,age,income,score\r\n" + "".join(f"{s},{a}.0,{b},{c}\r\n" for s, a, b, c in rows)  # other bytes, same numbers
    sessions = {}
    for name, content in (("alpha.csv", first), ("beta.csv", second)):
        at = app().run()
        upload(at, name, content.encode())
        choose(at, "Sensitive", ["sex"])
        at.button(key="roles-apply").click().run()
        at.switch_page("pages/pca.py").run()
        assert not at.exception
        sessions[name] = at
    beta = sessions["beta.csv"]
    run = beta.session_state["runs"].runs[-1]
    assert run.jobs[0].state == "cached"  # the numbers came from alpha's session...
    captions = unescaped(" ".join(c.value for c in beta.caption))
    assert "beta.csv" in captions and "alpha.csv" not in captions  # ...the names did not
    beta.switch_page("pages/report.py").run()
    assert not beta.exception
    assert len(beta.get("download_button")) == REPORT_DOWNLOADS
    assert "beta.csv" in unescaped(" ".join(c.value for c in beta.caption))
    result = beta.session_state["runs"].latest(beta.session_state["data-token"])["pca"][0]
    assert result.data["name"] == "beta.csv"
    alpha_result = sessions["alpha.csv"].session_state["runs"].latest(sessions["alpha.csv"].session_state["data-token"])["pca"][0]
    assert alpha_result.data["name"] == "alpha.csv" and alpha_result.data["sha256"] != result.data["sha256"]


@pytest.mark.slow
def test_the_report_runs_every_family_in_one_run_and_shows_them_all():
    """Every family's default audit (its library defaults: 50 k-means runs, a 10-point λ sweep)."""
    rows = "".join(f"{'FM'[i % 2]},{20 + i % 17},{100 + (7 * i) % 23},{i % 5},{(i * i) % 11}\n" for i in range(48))
    at = app().run()
    upload(at, "small.csv", ("sex,age,income,score,visits\n" + rows).encode())
    choose(at, "Sensitive", ["sex"])
    at.button(key="roles-apply").click().run()
    at.switch_page("pages/report.py").run()
    assert any("Not audited yet" in info.value for info in at.info)
    at.button(key="report-run-all").click().run()
    assert not at.exception
    run = at.session_state["runs"].runs[-1]
    assert [job.method for job in run.jobs] == ["pca", "nmf", "fs", "cpd"]  # one run, one overall bar
    wait_for_runs(at, 300)
    assert run.state == "done", run.errors
    at.switch_page("pages/report.py").run()
    assert not at.exception
    assert not any("Not audited yet" in info.value for info in at.info)
    assert len(at.get("download_button")) == REPORT_DOWNLOADS
    families = " ".join(unescaped(c.value) for c in at.caption)
    assert all(title in families for title in ("PCA", "NMF", "Feature selection", "Tensor (CP)"))
    summary = next(m.value for m in at.markdown if m.value.startswith("| Family | Vanilla |"))  # above the families
    assert at.subheader[0].value == "Audit summary"
    assert all(f"| {title} |" in unescaped(summary) for title in ("PCA", "NMF", "Tensor (CP)"))
