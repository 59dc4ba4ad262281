"""AppTests of the Models and Compare pages: export a fitted model, upload a components file,
compare two reports."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.decomposition import PCA as SklearnPCA
from streamlit.testing.v1 import AppTest

from fairaudit import AuditConfig, run_audit
from fairaudit.models import load_model
from fairaudit.samples import DEFAULT_SAMPLE, load_sample

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    return at


def _audited_pca(at: AppTest) -> None:
    """The PCA page audits the default sample (as on first open), so its result is in the session."""
    at.switch_page("pages/pca.py").run()
    assert not at.exception


def test_export_a_fitted_model_from_the_models_page():
    at = _app()
    _audited_pca(at)
    at.switch_page("pages/models.py").run()
    assert not at.exception
    at.selectbox(key="models-family").set_value("pca").run()
    at.selectbox(key="models-variant").set_value("fair_eig").run()
    at.selectbox(key="models-rank").set_value(2).run()
    at.button(key="models-prepare").click().run()
    assert not at.exception and not at.error
    prepared = list(at.session_state["models-prepared"].values())
    assert [(m.method, m.variant, m.rank) for m in prepared] == [("pca", "fair_eig", 2)]
    assert prepared[0].manifest["refit"]["max_abs_difference"] < 1e-9  # the audited model, fitted again exactly
    assert len(at.get("download_button")) == 1
    again = load_model(prepared[0].to_zip())
    data = load_sample(DEFAULT_SAMPLE)
    assert again.transform(data.X_raw).shape[1] >= 2
    # transform new rows with it, keeping an ID column the user marks
    rows = pd.DataFrame(data.X_raw[:5], columns=data.feature_names).assign(person=[f"p{i}" for i in range(5)])
    at.file_uploader(key="models-upload-rows").set_value(("new.csv", rows.to_csv(index=False).encode(), "text/csv")).run()
    at.selectbox(key="models-id").set_value("person").run()
    assert not at.exception and not at.error
    shown = at.dataframe[0].value
    assert shown.person.tolist() == [f"p{i}" for i in range(5)]
    np.testing.assert_allclose(shown[["pc1", "pc2"]].to_numpy(), again.transform(data.X_raw[:5])[:, :2], atol=1e-12)
    assert len(at.get("download_button")) == 2


def test_upload_a_components_file_audits_it_next_to_vanilla():
    at = _app()
    _audited_pca(at)
    at.switch_page("pages/models.py").run()
    data = load_sample(DEFAULT_SAMPLE)
    components = SklearnPCA(n_components=3).fit(data.X).components_
    buffer = io.StringIO()
    pd.DataFrame(components, columns=data.feature_names).to_csv(buffer, index=False)
    at.file_uploader(key="models-yours-components").set_value(("mine.csv", buffer.getvalue().encode(), "text/csv")).run()
    assert not at.exception and not at.error
    assert any("mine" in c.value and "3 × " in c.value for c in at.caption)
    frames = [f.value for f in at.dataframe]
    yours = frames[-1]
    assert set(yours.variant) == {"yours"} and sorted(set(yours["rank"])) == [1, 2, 3]
    assert len(at.get("plotly_chart")) >= 3


def test_compare_two_reports():
    data = load_sample(DEFAULT_SAMPLE)
    before = run_audit(data, AuditConfig(methods=("pca",), ranks=(1, 2, 3), variants=("vanilla", "fair_eig")))
    after = run_audit(data, AuditConfig(methods=("pca",), ranks=(1, 2, 3, 4), variants=("vanilla", "fair_eig"), random_state=1))
    at = _app()
    at.switch_page("pages/compare.py").run()
    at.file_uploader(key="compare-a").set_value(("before.json", before.to_json().encode(), "application/json")).run()
    at.file_uploader(key="compare-b").set_value(("after.json", after.to_json().encode(), "application/json")).run()
    assert not at.exception and not at.error
    text = " ".join(m.value for m in at.markdown).replace("\\", "")  # user text is Markdown-escaped
    assert "values in both audits" in text and "only in after.json" in text
    assert len(at.get("plotly_chart")) == 1 and len(at.get("download_button")) == 2
    at.file_uploader(key="compare-b").set_value(("notes.json", b'{"rows": []}', "application/json")).run()
    assert not at.exception and "not a fairaudit JSON report" in at.error[0].value
