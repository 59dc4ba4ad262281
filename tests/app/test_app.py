"""Every page of the dashboard runs in Streamlit's AppTest without exceptions."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from fairaudit.samples import sample_bytes

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=180)


def upload(at: AppTest, name: str, content: bytes) -> None:
    """On the Data page, choose "Upload a CSV file" and upload ``content`` as ``name``."""
    at.switch_page("pages/data.py").run()
    at.radio(key="data-source").set_value("Upload a CSV file").run()
    at.file_uploader(key="data-upload").set_value((name, content, "text/csv")).run()


def choose(at: AppTest, label_start: str, values: list[str]) -> None:
    """Set the Data page's multiselect whose label starts with ``label_start``."""
    [w for w in at.multiselect if w.label.startswith(label_start)][0].set_value(values).run()


def test_first_open_lands_on_the_data_page_and_starts_nothing_slow():
    at = app().run()
    assert not at.exception
    assert at.title[0].value == "Data"
    assert not at.session_state["runs"].runs  # nothing started without the user asking


def test_pca_page_runs_its_quick_default_audit_on_first_open():
    at = app().run()
    at.switch_page("pages/pca.py").run()
    assert not at.exception
    assert any("vanilla PCA" in info.value for info in at.info)
    assert len(at.get("plotly_chart")) >= 5


@pytest.mark.parametrize("page", ["pages/nmf.py", "pages/feature_selection.py", "pages/tensor.py"])
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
    assert any("sex=" in info.value for info in at.info)
    at.switch_page("pages/report.py").run()
    assert not at.exception
    assert len(at.get("download_button")) == 4


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
    assert any("vanilla PCA's reconstruction loss for SEX=" in info.value for info in at.info)
    at.switch_page("pages/report.py").run()
    assert not at.exception
    assert len(at.get("download_button")) == 4
