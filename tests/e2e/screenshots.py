"""Screenshots of every dashboard page in the light and the dark theme (not a test: run it by hand
after changing a page, and look at the images).

    .venv/bin/python tests/e2e/screenshots.py OUT_DIR [--families pca,nmf,fs,cpd]

Starts the dashboard on a free local port, runs each family's audit on the default sample from its
page (the way a user does: one session, sidebar links, the Run button), then photographs every
page with Debian's chromium, once per theme (Streamlit follows the browser's colour scheme).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[2]
PAGES = {"data": "Data", "pca": "PCA", "nmf": "NMF", "fs": "Feature selection", "cpd": "Tensor", "report": "Report"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _open(page, title: str) -> None:
    page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=title, exact=True).click()
    page.wait_for_load_state("networkidle")
    time.sleep(1.0)


def _idle(page, timeout: float = 900) -> None:
    """Wait until no run is in progress (the sidebar's Cancel buttons are gone) and plots drew."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        running = page.get_by_role("button", name="Cancel").count() or page.get_by_test_id("stStatusWidget").count()
        if not running:
            break
        time.sleep(2)
    time.sleep(2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--families", default="pca,nmf,fs,cpd")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 3200})
            page.set_default_timeout(600_000)
            for _ in range(120):
                try:
                    page.goto(f"http://localhost:{port}")
                    break
                except Exception:  # noqa: BLE001 - the server is still starting
                    time.sleep(0.5)
            page.get_by_role("heading", name="Data").first.wait_for()
            for family in args.families.split(","):
                _open(page, PAGES[family])
                if family != "pca":
                    page.get_by_role("button", name="Run audit").click()
                _idle(page)
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                for name, title in PAGES.items():
                    _open(page, title)
                    _idle(page)
                    page.screenshot(path=str(args.out / f"{name}-{scheme}.png"))
                    print(args.out / f"{name}-{scheme}.png", flush=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
