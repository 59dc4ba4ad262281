"""AppTests of the Models and Compare pages: export a fitted model, upload a components file,
compare two reports. The work the Models page starts is a session run (as an audit is): the
tests let it go to the background (no quick wait) and wait for it as tests/app/test_app.py does."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.decomposition import PCA as SklearnPCA
from streamlit.testing.v1 import AppTest

from fairaudit import AuditConfig, run_audit
from fairaudit.models import load_model
from fairaudit.report import result_json
from fairaudit.samples import DEFAULT_SAMPLE, load_sample
from tests.app.test_app import wait_for_runs

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture
def background(monkeypatch):
    """Runs the pages start are surely still going when the page is first drawn."""
    import pages.common

    monkeypatch.setattr(pages.common, "QUICK_WAIT_SECONDS", 0.0)


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    return at


def _audited_pca(at: AppTest) -> None:
    """The PCA page audits the default sample (as on first open), so its result is in the session."""
    at.switch_page("pages/pca.py").run()
    wait_for_runs(at)
    at.run()
    assert not at.exception and "pca" in at.session_state["runs"].latest(at.session_state["data-token"])


@pytest.mark.parametrize("page", ["pages/models.py", "pages/compare.py"])
def test_the_pages_run_before_anything_is_audited_or_uploaded(page):
    at = _app()
    at.switch_page(page).run()
    assert not at.exception and not at.error
    assert any(("Run an audit first" in i.value) or ("Upload both reports" in i.value) for i in at.info)


def test_export_a_fitted_model_from_the_models_page(background):
    at = _app()
    _audited_pca(at)
    at.switch_page("pages/models.py").run()
    assert not at.exception
    at.selectbox(key="models-family").set_value("pca").run()
    # the suggestion: the fair variant where vanilla's gap between groups is largest (rank 3 on the sample)
    assert at.selectbox(key="models-variant-pca").value == "fair_eig"
    assert at.selectbox(key="models-rank-pca-fair_eig").value == 3
    at.selectbox(key="models-rank-pca-fair_eig").set_value(2).run()
    at.button(key="models-prepare").click().run()
    assert not at.exception and not at.error
    registry = at.session_state["runs"]
    refit = [run for run in registry.runs if run.label.startswith("Model:")]
    assert len(refit) == 1 and refit[0].methods == ()  # a session run, which is not the PCA family's audit
    wait_for_runs(at)
    at.run()
    assert not at.exception and not at.error
    assert registry.latest(at.session_state["data-token"])["pca"][1].variants != ("fair_eig",)  # the audit is still PCA's result
    prepared = list(at.session_state["models-prepared"].values())
    assert [(m.method, m.variant, m.rank) for m in prepared] == [("pca", "fair_eig", 2)]
    assert prepared[0].manifest["refit"]["max_abs_difference"] < 1e-9  # the audited model, fitted again exactly
    assert len(at.get("download_button")) == 1
    again = load_model(prepared[0].to_zip())
    data = load_sample(DEFAULT_SAMPLE)
    assert again.transform(data.X_raw).shape[1] >= 2
    # transform new rows with it, keeping an ID column the user marks (a formula-like ID stays text in the download)
    rows = pd.DataFrame(data.X_raw[:5], columns=data.feature_names).assign(person=["=p0", *(f"p{i}" for i in range(1, 5))])
    at.file_uploader(key="models-upload-rows").set_value(("new.csv", rows.to_csv(index=False).encode(), "text/csv")).run()
    at.selectbox(key="models-id").set_value("person").run()
    assert not at.exception and not at.error
    shown = at.dataframe[0].value
    assert shown.person.tolist() == ["=p0", "p1", "p2", "p3", "p4"]
    np.testing.assert_allclose(shown[["pc1", "pc2"]].to_numpy(), again.transform(data.X_raw[:5])[:, :2], atol=1e-12)
    assert len(at.get("download_button")) == 2


def test_upload_a_components_file_audits_it_next_to_vanilla(background):
    at = _app()
    _audited_pca(at)
    at.switch_page("pages/models.py").run()
    data = load_sample(DEFAULT_SAMPLE)
    components = SklearnPCA(n_components=3).fit(data.X).components_
    buffer = io.StringIO()
    pd.DataFrame(components, columns=data.feature_names).to_csv(buffer, index=False)
    at.file_uploader(key="models-yours-components").set_value(("mine.csv", buffer.getvalue().encode(), "text/csv")).run()
    assert not at.exception and not at.error
    started = [run for run in at.session_state["runs"].runs if run.label.startswith("Your representation")]
    assert len(started) == 1
    wait_for_runs(at)
    at.run()
    assert not at.exception and not at.error
    assert len([run for run in at.session_state["runs"].runs if run.label.startswith("Your representation")]) <= 1  # not started again
    assert any("mine" in c.value and "3 × " in c.value for c in at.caption)
    assert any("your representation's largest group loss" in i.value for i in at.info)
    yours = at.dataframe[-1].value
    assert set(yours.variant) == {"yours"} and sorted(set(yours["rank"])) == [1, 2, 3]
    assert len(at.get("plotly_chart")) >= 3
    assert any("better" in c.value for c in at.caption)  # every chart says which way is better
    # the upload and its audit stay with the session when the user looks at another page
    charts = len(at.get("plotly_chart"))
    at.switch_page("pages/data.py").run()
    at.switch_page("pages/models.py").run()
    assert not at.exception and not at.error
    assert any("Using" in c.value and "mine" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == charts


def test_a_failed_audit_of_your_representation_says_why_in_the_dashboards_words(background):
    at = _app()
    at.switch_page("pages/models.py").run()
    data = load_sample(DEFAULT_SAMPLE)
    negative = -np.abs(np.eye(2, data.n_features))
    at.radio(key="models-yours-family").set_value("nmf").run()
    content = pd.DataFrame(negative, columns=data.feature_names).to_csv(index=False).encode()
    at.file_uploader(key="models-yours-components").set_value(("neg.csv", content, "text/csv")).run()
    wait_for_runs(at)
    at.run()
    assert not at.exception
    assert at.error and "“Audit it as” → “PCA” (Models page)" in at.error[0].value.replace("\\", "")
    at.run()  # the failed run is not started again on the next rerun
    assert len([run for run in at.session_state["runs"].runs if run.label.startswith("Your representation")]) <= 1


def test_compare_two_reports():
    """Issue 25: the verdicts that changed first (vanilla PCA's gap gone under a looser tolerance),
    no cut table, the inputs' differences in words one click away, downloads named after the audits."""
    data = load_sample(DEFAULT_SAMPLE)
    before = run_audit(data, AuditConfig(methods=("pca",), ranks=(1, 2, 3), variants=("vanilla", "fair_eig"), bootstrap=10))
    after = run_audit(data, AuditConfig(methods=("pca",), ranks=(1, 2, 3, 4), variants=("vanilla", "fair_eig"), bootstrap=10,
                                        flag_ratio=50.0))
    at = _app()
    at.switch_page("pages/compare.py").run()
    at.file_uploader(key="compare-a").set_value(("before.json", result_json(before).encode(), "application/json")).run()
    at.file_uploader(key="compare-b").set_value(("after.json", result_json(after).encode(), "application/json")).run()
    assert not at.exception and not at.error
    assert at.subheader[0].value == "Verdicts"
    [improved] = [s.value.replace("\\", "") for s in at.success if "PCA · PCA:" in s.value.replace("\\", "")]
    assert improved.startswith("PCA · PCA: Gap → No evidence at rank")
    captions = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "values in both audits" in captions and "only in after.json" in captions
    assert len(at.get("plotly_chart")) == 1 and len(at.get("download_button")) == 2
    differences = [t.value for t in at.table if "setting" in t.value.index.names]
    assert differences and "gap tolerance (×)" in differences[0].index.map(lambda s: s.replace("\\", "")).tolist()
    at.text_input(key="compare-names").set_value("same, same").run()
    assert not at.exception and "“Names of the two audits” → “before,after” (Compare page)" in at.error[0].value.replace("\\", "")
    at.text_input(key="compare-names").set_value("mine, theirs").run()
    at.switch_page("pages/report.py").run()  # Streamlit forgets the names box while its page is not shown …
    at.switch_page("pages/compare.py").run()
    assert not at.exception and not at.error and at.text_input(key="compare-names").value == "mine, theirs"  # … the page does not
    at.file_uploader(key="compare-b").set_value(("notes.json", b'{"rows": []}', "application/json")).run()
    assert not at.exception and "not a fairaudit JSON report" in at.error[0].value


def test_cancelling_the_audit_of_your_representation_keeps_nothing_and_offers_it_again(background, monkeypatch):
    import threading

    import fairaudit.yours

    started = threading.Event()

    def slow(data, representation, config=None, *, progress=None):  # reports progress until cancelled
        started.set()
        for done in range(1, 10_000):
            progress({"method": "pca", "variant": "yours", "rank": 1, "done": done, "total": 10_000, "seconds": 0.01, "stage": "fit"})
            threading.Event().wait(0.01)
        raise AssertionError("never cancelled")

    monkeypatch.setattr(fairaudit.yours, "audit_yours", slow)
    at = _app()
    at.switch_page("pages/models.py").run()
    data = load_sample(DEFAULT_SAMPLE)
    content = pd.DataFrame(np.eye(2, data.n_features), columns=data.feature_names).to_csv(index=False).encode()
    at.file_uploader(key="models-yours-components").set_value(("mine.csv", content, "text/csv")).run()
    assert started.wait(30)
    [run] = [r for r in at.session_state["runs"].runs if r.label.startswith("Your representation")]
    assert run.active and run.methods == ()
    run.cancel()
    wait_for_runs(at)
    at.run()
    assert not at.exception and run.state == "cancelled"
    assert any("was cancelled; nothing from it was kept" in w.value for w in at.warning)
    assert not at.session_state["models-yours"] and not at.get("plotly_chart")
    monkeypatch.undo()  # the real audit from here
    at.button(key="models-yours-again").click().run()
    wait_for_runs(at)
    at.run()
    assert not at.exception and not at.error and len(at.session_state["models-yours"]) == 1


def test_hostile_uploads_are_refused_in_words_and_the_pages_keep_working(tmp_path):
    """Issue 27 in the dashboard: a ZIP bomb as a model, a manifest nested 200,000 deep, complex
    embeddings, a report nested 100,000 deep, one with a lone surrogate — each refused with one
    message, no exception; a valid upload afterwards works."""
    from tests.hostile_files import bomb, build_valid, npy, zipped

    build_valid(tmp_path)
    good = tmp_path / "models" / "pca-vanilla-rank2"
    at = _app()
    at.switch_page("pages/models.py").run()
    at.radio(key="models-source").set_value("Upload a model (ZIP)").run()
    for name, content, said in (
        ("bomb.zip", bomb({"manifest.json": (good / "manifest.json").read_bytes()}, "arrays.npz", 256 << 20), "is a ZIP bomb"),
        ("deep.zip", zipped({"manifest.json": b'{"a":' + b"[" * 200_000 + b"]" * 200_000 + b"}", "arrays.npz": b""}), "64 deep"),
    ):
        at.file_uploader(key="models-upload-model").set_value((name, content, "application/zip")).run()
        assert not at.exception and len(at.error) == 1 and said in at.error[0].value, [e.value for e in at.error]
    at.file_uploader(key="models-upload-model").set_value(("model.zip", (tmp_path / "model.zip").read_bytes(), "application/zip")).run()
    assert not at.exception and not at.error
    at.radio(key="models-yours-kind").set_value("Embeddings (one row per data row)").run()
    at.file_uploader(key="models-yours-embedding").set_value(("mine.npy", npy(np.ones((600, 2)) + 1j), "application/octet-stream")).run()
    assert not at.exception and any("holds complex numbers" in e.value for e in at.error)
    at.switch_page("pages/compare.py").run()
    report = (tmp_path / "good.json").read_bytes()
    at.file_uploader(key="compare-a").set_value(("good.json", report, "application/json")).run()
    for name, content, said in (
        ("deep.json", b'{"fairaudit_version": "1", "records": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "64 deep"),
        ("odd.json", report.replace(b'"group": "sex=F"', b'"group": "\\ud800"', 1), "lone surrogate"),
    ):
        at.file_uploader(key="compare-b").set_value((name, content, "application/json")).run()
        assert not at.exception and len(at.error) == 1 and said in at.error[0].value, [e.value for e in at.error]
    at.file_uploader(key="compare-b").set_value(("same.json", report, "application/json")).run()
    assert not at.exception and not at.error
