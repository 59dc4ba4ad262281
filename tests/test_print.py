"""The HTML reports print cleanly: sections on new pages, charts redrawn to the paper's width,
light theme (checked in Debian's chromium; skipped without it)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairaudit import AuditConfig, AuditData, run_audit
from fairaudit.compare import compare
from fairaudit.compare import render_html as render_comparison
from fairaudit.report import PRINT_WIDTH_PX, render_html

CHROMIUM = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
pytest.importorskip("pytest_playwright")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 6)) @ rng.normal(size=(6, 6))
    X[:50] *= 2
    data = AuditData.from_arrays(X, pd.Series(np.repeat(["a", "b"], [50, 100]), name="g"))
    result = run_audit(data, AuditConfig(methods=("pca",), ranks=(1, 2, 3), variants=("vanilla", "fair_eig", "jevd")))
    folder = tmp_path_factory.mktemp("print")
    report, diff = folder / "report.html", folder / "diff.html"
    report.write_text(render_html(result), encoding="utf-8")
    diff.write_text(render_comparison(compare(result, result, findings=({}, {}))), encoding="utf-8")
    return report, diff


@pytest.fixture(scope="module")
def chromium_browser(playwright):
    """Debian's chromium, driven through pytest-playwright's one Playwright instance (a second
    sync_playwright() in the same session would clash with the browser tests' own)."""
    launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
    yield launched
    launched.close()


DRAWN = "Array.from(document.querySelectorAll('.js-plotly-plot .main-svg:first-of-type')).map(s => Math.round(s.getBoundingClientRect().width))"
"""The width each chart is drawn at (its first SVG layer), as laid out (zoom included)."""


def _page_count(pdf: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page(?!s)", pdf))


@pytest.mark.parametrize("which", [0, 1])
def test_reports_print_on_a4_and_letter_with_charts_at_the_page_width(pages, chromium_browser, which):
    page = chromium_browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(pages[which].as_uri())
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
    screen = page.evaluate(DRAWN)
    assert min(screen) > PRINT_WIDTH_PX  # drawn wider for the screen
    sections = page.evaluate("document.querySelectorAll('main > h2').length")
    page.emulate_media(media="print", color_scheme="dark")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"  # light even in dark mode
    breaks = page.evaluate("Array.from(document.querySelectorAll('main > h2')).map(h => getComputedStyle(h).breakBefore)")
    assert breaks[0] != "page" and set(breaks[1:]) == {"page"}  # the first section follows the title
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    printed = page.evaluate(DRAWN)
    assert set(printed) == {PRINT_WIDTH_PX}
    page.emulate_media(media="null", color_scheme="null")  # back to the screen, as a browser is when it sends afterprint
    page.evaluate("window.dispatchEvent(new Event('afterprint'))")
    assert page.evaluate(DRAWN) == screen
    for paper in ("A4", "Letter"):
        assert _page_count(page.pdf(format=paper)) >= sections
    page.close()


def test_charts_fit_the_page_without_a_print_event(pages, chromium_browser):
    """A headless PDF export that sends no beforeprint: the stylesheet scales the screen charts."""
    page = chromium_browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(pages[0].as_uri())
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
    page.emulate_media(media="print")
    widths = page.evaluate(DRAWN)
    assert max(widths) <= PRINT_WIDTH_PX + 1
    page.close()
