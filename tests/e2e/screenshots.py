"""Screenshots of every dashboard page in the light and the dark theme (not a test: run it by hand
after changing a page, and look at the images).

    .venv/bin/python tests/e2e/screenshots.py OUT_DIR [--families pca,nmf,fs,cpd] [--bootstrap N] [--holdout pca] [--leace pca,nmf]
        [--data-only]
    .venv/bin/python tests/e2e/screenshots.py OUT_DIR --findings   # the findings of a file with a small third group
    .venv/bin/python tests/e2e/screenshots.py OUT_DIR --answer [--widths 1400,1000] [--height 900] [--families …]
        # the first screen of each page after its run: is the answer visible without scrolling?

Starts the dashboard on a free local port, runs each family's audit on the default sample from its
page (the way a user does: one session, sidebar links, the controls and the Run button; the
bootstrap replicates as given, else the library's default, and held-out rows on the pages named),
then photographs every page with Debian's chromium, once per theme (Streamlit follows the
browser's colour scheme), and the HTML report downloaded from the Report page.
Then the Data page in use, per theme: a survey upload whose dropped rows fall mostly on one group
(the accounting and the unequal-drop warning), an ID-like column kept as a feature, and credit-like
data with EDUCATION 1 and 2 merged against the rest (``--data-only``: these alone).
``--findings``: only the PCA page's findings on a file like the issue's school survey (3,869 /
1,852 / 27 rows; ``benchmarks/bench_verdicts.py``), per theme: the headlines, one finding's details
opened, and the findings judged against a reference chosen with *Compare with*.
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
sys.path.insert(0, str(REPO))  # the test modules' sample files
PAGES = {"data": "Data", "pca": "PCA", "nmf": "NMF", "fs": "Feature selection", "cpd": "Tensor", "report": "Report",
         "models": "Models", "compare": "Compare"}
MODELS_TABS = {"fitted": "Fitted models", "transform": "Transform new rows", "yours": "Your representation"}


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


def _inputs(folder: Path) -> dict[str, Path]:
    """Files a user of the Models and Compare pages brings: new rows with an ID column, scikit-learn
    PCA components of the default sample, two saved reports."""
    import pandas as pd
    from sklearn.decomposition import PCA

    from fairaudit import AuditConfig, load, run_audit
    from fairaudit.report import result_json
    from fairaudit.samples import DEFAULT_SAMPLE, load_sample

    data = load_sample(DEFAULT_SAMPLE)
    files = {name: folder / name for name in ("new_rows.csv", "my_components.csv", "before.json", "after.json")}
    frame = pd.DataFrame(data.X_raw[:50], columns=data.feature_names)
    frame.insert(0, "person", [f"p{i:03d}" for i in range(50)])
    frame.to_csv(files["new_rows.csv"], index=False)
    pd.DataFrame(PCA(n_components=4).fit(data.X).components_, columns=data.feature_names).to_csv(files["my_components.csv"], index=False)
    variants = ("vanilla", "fair_eig")
    files["before.json"].write_text(result_json(run_audit(data, AuditConfig(methods=("pca",), ranks=range(1, 5), variants=variants))))
    # "after": the same file with a third of the smaller group's rows left out (a data change)
    raw = pd.read_csv(REPO / "sample_data" / f"{DEFAULT_SAMPLE}.csv")
    smaller = raw.group.value_counts().idxmin()
    rows = raw.index[raw.group == smaller]
    changed = folder / "after_data.csv"
    raw.drop(rows[: len(rows) // 3]).to_csv(changed, index=False)
    later = load(changed, sensitive="group", label="outcome")
    files["after.json"].write_text(result_json(run_audit(later, AuditConfig(methods=("pca",), ranks=range(1, 6), variants=variants))))
    return files


def _upload(page, label: str, path: Path) -> None:
    page.get_by_test_id("stFileUploader").filter(has_text=label).locator("input[type=file]").set_input_files(str(path))
    page.wait_for_load_state("networkidle")
    time.sleep(1.5)


def _take_it_further(page, files: dict[str, Path]) -> None:
    """Drive the Models page (prepare a model, transform new rows, audit your components) and the
    Compare page (two reports), as a user does, so the screenshots show them in use."""
    _open(page, "Models")
    page.get_by_role("button", name="Prepare the model").click()
    _idle(page)
    page.get_by_role("tab", name=MODELS_TABS["transform"]).click()
    _upload(page, "Rows to transform", files["new_rows.csv"])
    page.get_by_role("tab", name=MODELS_TABS["yours"]).click()
    _upload(page, "Components file", files["my_components.csv"])
    _idle(page)
    _open(page, "Compare")
    _upload(page, "First report", files["before.json"])
    _upload(page, "Second report", files["after.json"])
    _idle(page)


def _run(page, bootstrap: str, holdout: bool, leace: bool = False) -> None:
    """On a method page: the intervals' controls as asked (and LEACE's box), then Run audit (the
    settings fold away once the page has a result: opened first)."""
    if not page.get_by_role("button", name="Run audit").is_visible():
        page.get_by_text("Settings of the run").first.click()
        time.sleep(1)
    if bootstrap:
        page.get_by_role("spinbutton", name="Bootstrap replicates").fill(bootstrap)
    if holdout:
        page.get_by_text("Evaluate on held-out rows").click()
    if leace:
        page.get_by_text("Also audit each representation after LEACE").click()
    page.get_by_role("button", name="Run audit").click()


def _report(page, folder: Path) -> Path:
    """The HTML report as the Report page's download button gives it."""
    _open(page, "Report")
    with page.expect_download() as download:
        page.get_by_role("button", name="HTML report").click()
    path = folder / "report.html"
    download.value.save_as(path)
    return path


def _settle(page, seconds: float = 1.5) -> None:
    page.wait_for_load_state("networkidle")
    time.sleep(seconds)
    for _ in range(120):
        if not page.get_by_test_id("stStatusWidget").count():
            break
        time.sleep(0.5)


def _pick(page, label: str, values: list[str]) -> None:
    """Add ``values`` (option text starting so) to the multiselect labelled ``label``."""
    box = page.get_by_test_id("stMultiSelect").filter(has_text=label).first
    for value in values:
        box.locator("input").click()
        box.locator("input").fill(value)
        time.sleep(0.7)
        option = page.get_by_role("option", name=value)
        if option.count():  # not there when already chosen
            option.first.click()
            _settle(page, 1.0)
    page.mouse.click(5, 5)  # close the list


def _data_files(folder: Path) -> dict[str, Path]:
    """A survey whose missing cells fall mostly on one group, and credit-like EDUCATION codes."""
    from tests.app.test_data_page import credit_like
    from tests.test_accounting import survey

    files = {"survey": folder / "survey.csv", "credit": folder / "credit.csv"}
    files["survey"].write_bytes(survey())
    files["credit"].write_bytes(credit_like())
    return files


def _data_states(page, out: Path, scheme: str, files: dict[str, Path]) -> None:
    """The Data page as a user works on it (a fresh session per theme)."""
    _open(page, "Data")
    page.get_by_text("Upload a file (CSV or Parquet)").click()
    _settle(page)
    page.get_by_test_id("stFileUploader").locator("input[type=file]").set_input_files(str(files["survey"]))
    _settle(page, 3)
    _pick(page, "Sensitive attribute", ["sex"])
    page.get_by_test_id("stSelectbox").filter(has_text="Missing cells").first.click()
    page.get_by_role("option", name="drop rows with a missing cell").first.click()
    _settle(page)
    _shoot(page, out / f"data-unequal-drop-{scheme}.png")
    _pick(page, "Use ID-like columns as features", ["school_id"])
    _shoot(page, out / f"data-id-like-{scheme}.png")
    page.get_by_test_id("stFileUploader").locator("input[type=file]").set_input_files(str(files["credit"]))
    _settle(page, 3)
    _pick(page, "Sensitive attribute", ["EDUCATION"])
    page.get_by_text("Merge values into groups").first.click()
    _settle(page)
    _pick(page, "Group 1: values", ["1 (", "2 ("])
    page.get_by_label("Group 1: name").fill("high")
    page.keyboard.press("Enter")
    _settle(page)
    page.get_by_text("Gather the other").click()
    _settle(page)
    page.get_by_label("Its name").fill("low")
    page.keyboard.press("Enter")
    _settle(page)
    _shoot(page, out / f"data-merge-{scheme}.png")


def _findings_states(page, out: Path, scheme: str, bootstrap: str) -> None:
    """The PCA page's findings on a file with a small third group, as a user reads them."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_verdicts import issue_files

    survey = issue_files(out / "files")[0]
    print(f"{scheme}: uploading {survey.name}", flush=True)
    _open(page, "Data")
    page.get_by_text("Upload a file (CSV or Parquet)").click()
    _settle(page)
    page.get_by_test_id("stFileUploader").locator("input[type=file]").set_input_files(str(survey))
    _settle(page, 3)
    _pick(page, "Sensitive attribute", ["race"])
    _pick(page, "Ignore", ["outcome"])
    page.get_by_role("button", name="Use this data").click()
    _settle(page, 3)
    print(f"{scheme}: auditing", flush=True)
    _open(page, "PCA")
    _idle(page)
    _run(page, bootstrap or "30", False)
    time.sleep(3)
    _idle(page)
    page.get_by_text(f"{bootstrap or 30} stratified bootstrap replicates", exact=False).first.wait_for()
    print(f"{scheme}: audited", flush=True)
    _shoot_findings(page, out / f"findings-{scheme}.png")
    page.get_by_text("Details", exact=True).first.click()
    time.sleep(1.5)
    _shoot_findings(page, out / f"findings-details-{scheme}.png")
    page.get_by_test_id("stSelectbox").filter(has_text="Compare with").first.click()
    page.get_by_role("option", name="race=black").first.click()
    _settle(page, 3)
    _shoot_findings(page, out / f"findings-reference-{scheme}.png")


def _shoot_findings(page, path: Path) -> None:
    """The findings, from the “Compare with” selector to the rules' expander under them."""
    top = page.get_by_test_id("stSelectbox").filter(has_text="Compare with").first.bounding_box()
    bottom = page.get_by_text("Why these verdicts: the rules", exact=False).first.bounding_box()
    scroll = page.evaluate("window.scrollY")
    y = top["y"] + scroll - 10
    page.screenshot(path=str(path), full_page=True,
                    clip={"x": 0, "y": y, "width": page.viewport_size["width"], "height": bottom["y"] + scroll + bottom["height"] + 10 - y})
    print(path, flush=True)


def _answers(browser, port: int, args) -> None:
    """``--answer``: one session runs every family (and fills the Compare page), then each page's
    first screen is photographed at every width, light and dark; then the HTML report's first page."""
    page = browser.new_page(viewport={"width": 1400, "height": args.height})
    page.set_default_timeout(900_000)
    _goto(page, port)
    families = args.families.split(",")
    for family in families:
        _open(page, PAGES[family])
        _idle(page)
        _run(page, args.bootstrap, False)
        _idle(page)
    if "pca" in families:
        _take_it_further(page, _inputs(args.out))
    report = _report(page, args.out)
    for width in map(int, args.widths.split(",")):
        page.set_viewport_size({"width": width, "height": args.height})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            for name in [*families, "report", "compare"]:
                _open(page, PAGES[name])
                _idle(page)
                page.evaluate("window.scrollTo(0, 0)")
                _shoot(page, args.out / f"{name}-{width}-{scheme}.png")
    for width in map(int, args.widths.split(",")):
        page.set_viewport_size({"width": width, "height": args.height})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.goto(report.as_uri())
            page.wait_for_load_state("load")
            time.sleep(2)
            _shoot(page, args.out / f"report-html-{width}-{scheme}.png")
            page.locator("h2", has_text="PCA").first.evaluate("heading => heading.scrollIntoView()")
            time.sleep(1)
            _shoot(page, args.out / f"report-html-pca-{width}-{scheme}.png")


def _goto(page, port: int) -> None:
    """Open the dashboard (retrying while the server starts) and wait for the Data page."""
    for _ in range(120):
        try:
            page.goto(f"http://localhost:{port}")
            break
        except Exception:  # noqa: BLE001 - the server is still starting
            time.sleep(0.5)
    page.get_by_role("heading", name="Data").first.wait_for()


def _shoot(page, path: Path) -> None:
    page.screenshot(path=str(path))
    print(path, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--families", default="pca,nmf,fs,cpd")
    parser.add_argument("--bootstrap", default="", help="replicates on every page (default: the library's per family)")
    parser.add_argument("--holdout", default="pca", help="families whose run evaluates on held-out rows")
    parser.add_argument("--leace", default="", help="families whose run also audits each representation after LEACE")
    parser.add_argument("--height", type=int, default=3200, help="viewport height in pixels (a page taller than it is cut)")
    parser.add_argument("--data-only", action="store_true", help="only the Data page's states")
    parser.add_argument("--findings", action="store_true", help="only the PCA findings of a file with a small third group")
    parser.add_argument("--answer", action="store_true",
                        help="only the first screen (a viewport of --height, default 900) of each family page after its run, the "
                        "Report and Compare pages and the HTML report, at each of --widths, light and dark")
    parser.add_argument("--widths", default="1400,1000", help="viewport widths of --answer")
    args = parser.parse_args()
    if args.answer and args.height == parser.get_default("height"):
        args.height = 900
    args.out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            if args.findings:
                for scheme in ("light", "dark"):
                    findings_page = browser.new_page(viewport={"width": 1400, "height": 2400}, color_scheme=scheme)
                    findings_page.set_default_timeout(600_000)
                    _goto(findings_page, port)
                    _findings_states(findings_page, args.out, scheme, args.bootstrap)
                    findings_page.close()
                return 0
            if args.answer:
                _answers(browser, port, args)
                return 0
            files = _data_files(args.out)
            for scheme in ("light", "dark"):  # a session per theme, so each starts from the sample
                data_page = browser.new_page(viewport={"width": 1400, "height": 3200}, color_scheme=scheme)
                data_page.set_default_timeout(120_000)
                _goto(data_page, port)
                _data_states(data_page, args.out, scheme, files)
                data_page.close()
            if args.data_only:
                return 0
            page = browser.new_page(viewport={"width": 1400, "height": args.height})
            page.set_default_timeout(600_000)
            _goto(page, port)
            families = args.families.split(",")
            for family in families:
                _open(page, PAGES[family])
                _idle(page)  # a page's own first-open audit, if it started one
                _run(page, args.bootstrap, family in args.holdout.split(","), family in args.leace.split(","))
                _idle(page)
            if "pca" in families:
                _take_it_further(page, _inputs(args.out))
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                for name, title in PAGES.items():
                    _open(page, title)
                    _idle(page)
                    if name != "models":
                        _shoot(page, args.out / f"{name}-{scheme}.png")
                        continue
                    for tab, label in MODELS_TABS.items():
                        page.get_by_role("tab", name=label).click()
                        time.sleep(1.5)
                        _shoot(page, args.out / f"models-{tab}-{scheme}.png")
            report = _report(page, args.out)
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                page.goto(report.as_uri())
                page.wait_for_load_state("load")
                time.sleep(2)
                _shoot(page, args.out / f"report-html-summary-{scheme}.png")
                for section in ("PCA", "Verdicts and their rules"):
                    page.locator("h2", has_text=section).first.evaluate("heading => heading.scrollIntoView()")
                    time.sleep(1)
                    name = section.split()[0].lower()
                    _shoot(page, args.out / f"report-html-{name}-{scheme}.png")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
