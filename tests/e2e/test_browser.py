"""Real-browser runs: streamlit headless + Debian's chromium driven by pytest-playwright.

The server is started as `make app` starts it (the repository's .streamlit/config.toml, no
address flag): it must listen on this machine only. Then: upload a CSV on the Data page, audit it
on the PCA page, see a plotly chart render, download the HTML report from the Report page.
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
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    yield f"http://localhost:{port}"
    process.terminate()
    process.wait(timeout=20)


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of the sockets listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if int(hex_port, 16) == port and state == "0A":  # 0A: LISTEN
                raw = bytes.fromhex(address)
                # /proc prints each 32-bit word in host (little-endian) order
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found.add(socket.inet_ntop(socket.AF_INET if width == 8 else socket.AF_INET6, words))
    return found


def _outward_address() -> str | None:
    """This machine's address on its default route (no packet is sent), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))
            address = sock.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_the_server_listens_on_localhost_only_by_default(page, app_url):
    port = int(app_url.rsplit(":", 1)[1])
    addresses = _listening_addresses(port)
    assert addresses, "nothing listens on the port"
    assert addresses <= {"127.0.0.1", "::1"}, addresses
    outward = _outward_address()
    if outward is not None:
        with pytest.raises(OSError):
            socket.create_connection((outward, port), timeout=2).close()
    page.set_default_timeout(60_000)
    page.goto(app_url)  # and the dashboard is there for this machine's browser
    page.get_by_role("heading", name="Data").first.wait_for()


def test_upload_audit_and_download_the_report(page, app_url, tmp_path):
    page.set_default_timeout(120_000)
    page.goto(app_url)
    page.get_by_role("heading", name="Data").first.wait_for()  # the landing page
    page.get_by_text("Upload a file (CSV or Parquet)").click()
    upload = tmp_path / "patients.csv"
    upload.write_bytes(sample_bytes("diabetes"))
    page.locator("input[type=file]").set_input_files(str(upload))
    page.get_by_text("Preview of patients.csv").wait_for()
    page.get_by_role("heading", name="What these roles keep").wait_for()  # the accounting, before confirming
    page.get_by_text("Features used (").first.wait_for()
    page.get_by_role("button", name="Use this data").click()
    page.get_by_text("Data ready").wait_for()

    page.get_by_role("link", name="Audit it with PCA").click()  # the next step offered after "Use this data"
    page.get_by_text("patients.csv", exact=False).first.wait_for()
    page.get_by_role("heading", name="Does PCA reconstruct every group of").wait_for()  # the question, first
    page.get_by_text("Deciding number (95 % interval)").wait_for()  # then the verdict table
    chart = page.locator(".js-plotly-plot:has(.scatterlayer .trace)").first  # then the one chart
    chart.locator(".scatterlayer .trace").first.wait_for()
    assert chart.locator("text.gtitle").first.text_content().startswith("Reconstruction loss")

    # intervals and verdicts, as a user asks for them (20 replicates keep it quick), in the settings folded under the answer
    if not page.get_by_role("button", name="Run audit").is_visible():
        page.get_by_text("Settings of the run").first.click()
    page.get_by_role("spinbutton", name="Bootstrap replicates").fill("20")
    page.get_by_role("button", name="Run audit").click()
    done = page.get_by_text("percentile intervals from 20 stratified bootstrap replicates", exact=False)  # all in, not provisional
    for _ in range(60):  # the page redraws its tabs when the run ends: open the findings in full once it has
        page.get_by_role("tab", name="How this was decided").last.click()  # the findings in full and the rules: one click away
        if done.is_visible():
            break
        time.sleep(2)
    done.wait_for()
    page.get_by_text("vanilla PCA's reconstruction loss is").first.wait_for()
    page.get_by_text("Why these verdicts: the rules", exact=False).first.wait_for()
    assert page.locator("[data-testid=stMarkdownContainer] span", has_text="No evidence").count() >= 1  # the badge
    assert page.locator(".js-plotly-plot path.js-fill").count() >= 1  # interval bands drawn in the charts

    page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Report").click()
    with page.expect_download() as download_info:
        page.get_by_role("button", name="HTML report").click()
    report = tmp_path / "report.html"
    download_info.value.save_as(report)
    html = report.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "patients.csv" in html and "sex=1" in html
    assert 'class="finding no_evidence"' in html and "Why “no evidence”: the rule" in html
    assert "cdn.plot.ly" not in html.split("<main>")[1]
