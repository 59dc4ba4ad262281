"""One real-browser run: streamlit headless + Debian's chromium driven by pytest-playwright.

Upload a CSV on the Data page, audit it on the PCA page, see a plotly chart render, download
the HTML report from the Report page.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairaudit.samples import sample_bytes

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("FAIRAUDIT_CHROMIUM", "/usr/bin/chromium")

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists() and shutil.which("chromium") is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it)",
)


@pytest.fixture(scope="session")
def browser_type_launch_args():
    return {
        "executable_path": CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
        "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def app_url():
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true",
         "--browser.gatherUsageStats", "false"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=20)


def test_upload_audit_and_download_the_report(page, app_url, tmp_path):
    page.set_default_timeout(120_000)
    page.goto(app_url)
    page.locator(".js-plotly-plot .scatterlayer .trace").first.wait_for()  # the landing audit rendered

    page.get_by_role("link", name="Data").click()
    page.get_by_text("Upload a CSV file").click()
    upload = tmp_path / "patients.csv"
    upload.write_bytes(sample_bytes("diabetes"))
    page.locator("input[type=file]").set_input_files(str(upload))
    page.get_by_text("Preview of patients.csv").wait_for()
    page.get_by_role("button", name="Use this data").click()
    page.get_by_text("Data ready").wait_for()

    page.get_by_role("link", name="PCA").click()
    page.get_by_text("patients.csv", exact=False).first.wait_for()
    page.get_by_text("vanilla PCA's reconstruction loss is").wait_for()
    chart = page.locator(".js-plotly-plot:has(.scatterlayer .trace)").first  # the first audit curve
    chart.locator(".scatterlayer .trace").first.wait_for()
    assert chart.locator("text.gtitle").first.text_content().startswith("Reconstruction loss")

    page.get_by_role("link", name="Report").click()
    with page.expect_download() as download_info:
        page.get_by_role("button", name="HTML report").click()
    report = tmp_path / "report.html"
    download_info.value.save_as(report)
    html = report.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "patients.csv" in html and "sex=1" in html
    assert "cdn.plot.ly" not in html.split("<main>")[1]
