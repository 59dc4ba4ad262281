"""The dashboard runs in Streamlit's AppTest without exceptions."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def test_app_opens_on_the_audited_default_sample():
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception
    assert any("vanilla PCA" in info.value for info in at.info)
    assert len(at.get("plotly_chart")) >= 5


def test_switching_samples():
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.sidebar.selectbox[0].select("diabetes").run()
    assert not at.exception
    assert any("sex=" in info.value for info in at.info)
